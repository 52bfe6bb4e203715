//! A waker for the unit tests of `net/`'s hand-written futures
//! (`stop.rs`, `header_timer.rs`): it counts its wakes and notes when it
//! was first woken.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Wake, Waker};
use std::time::Instant;

use parking_lot::Mutex;

/// What a [`counting`] waker saw.
#[derive(Debug, Default)]
pub(super) struct Count {
    wakes: AtomicUsize,
    first: Mutex<Option<Instant>>,
}

impl Count {
    /// How many times it was woken.
    pub(super) fn wakes(&self) -> usize {
        self.wakes.load(Ordering::SeqCst)
    }

    /// When it was first woken, if it was.
    pub(super) fn first_woken(&self) -> Option<Instant> {
        *self.first.lock()
    }
}

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.first.lock().get_or_insert_with(Instant::now);
        self.wakes.fetch_add(1, Ordering::SeqCst);
    }
}

/// A waker, and what it sees.
pub(super) fn counting() -> (Arc<Count>, Waker) {
    let count = Arc::new(Count::default());
    (count.clone(), Waker::from(count))
}
