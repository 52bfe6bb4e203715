//! [`FinalPages`]: first pages kept encoded, and shared, while no change
//! can reach them (see [`Inventory::final_page`](crate::Inventory::final_page)).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use super::query::{FinalPage, ListQuery, PageSize};
use crate::pet::{PetId, PetStatus};

/// A kept page, if there is one. A lock rather than a `OnceLock`, which
/// cannot be emptied again: a transition must be able to drop the page.
/// Reading it is one atomic add beside the `Arc`'s own count (readers
/// never wait for one another, only for a transition dropping it).
type Slot = RwLock<Option<Arc<FinalPage>>>;

/// The first pages kept, by status filter and limit (docs/performance.md,
/// "The inventory's layout").
///
/// A page is kept while more pets match than it holds: creates only add
/// pets after it, so they never change it. A transition can: it is
/// dropped ([`dropped_by`](Self::dropped_by)) when the changed pet is on
/// it, would join it, or leaves its filter with too few pets for a next
/// page. Pages kept and dropped change only under the records' lock (a
/// page is kept with the read lock held, dropped with the write lock), so
/// a page built before a change is never kept after it.
///
/// Most transitions reach no kept page (pollers keep small first pages;
/// most pets lie beyond them), so each filter also keeps how far its kept
/// pages reach ([`Reach`]) and a transition beyond that looks at none of
/// its 100 slots.
pub(super) struct FinalPages {
    slots: [[Slot; PageSize::MAX.get()]; FILTERS],
    reach: [Reach; FILTERS],
}

/// No filter, and each status.
const FILTERS: usize = 1 + PetStatus::ALL.len();

/// How far a filter's kept pages reach: at least the largest last id and
/// the largest limit of any of them (zero: none kept). Raised when a page
/// is kept, set exactly when pages are dropped; the records' lock orders
/// the two (see [`FinalPages`]), so relaxed atomics do.
#[derive(Default)]
struct Reach {
    last: AtomicU64,
    limit: AtomicUsize,
}

impl std::fmt::Debug for FinalPages {
    /// How many are kept, not 400 slots.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self
            .slots
            .iter()
            .flatten()
            .filter(|slot| slot.read().is_some())
            .count();
        f.debug_struct("FinalPages").field("kept", &kept).finish()
    }
}

impl Default for FinalPages {
    fn default() -> Self {
        FinalPages {
            slots: std::array::from_fn(|_| std::array::from_fn(|_| RwLock::new(None))),
            reach: std::array::from_fn(|_| Reach::default()),
        }
    }
}

fn filter_index(status: Option<PetStatus>) -> usize {
    status.map_or(0, |status| 1 + status.index())
}

impl FinalPages {
    /// The page kept for `query` (a first page), if there is one.
    pub(super) fn get(&self, query: &ListQuery) -> Option<Arc<FinalPage>> {
        self.slot(query)?.read().clone()
    }

    /// Keeps `page` for `query`, or returns the one another thread kept
    /// first (the same bytes). The caller holds the records' read lock.
    pub(super) fn keep(&self, query: &ListQuery, page: FinalPage) -> Arc<FinalPage> {
        let Some(slot) = self.slot(query) else {
            return Arc::new(page);
        };
        let reach = &self.reach[filter_index(query.status)];
        reach
            .last
            .fetch_max(page.next_after.get(), Ordering::Relaxed);
        reach.limit.fetch_max(query.limit.get(), Ordering::Relaxed);
        slot.write().get_or_insert_with(|| Arc::new(page)).clone()
    }

    /// Drops every kept page that pet `id`'s change from `from` to `to`
    /// reaches; `left` is how many pets have status `from` after it. The
    /// caller holds the records' write lock.
    ///
    /// A page's pets are the first `limit` ids of its filter and its last
    /// id is `next_after`, so:
    /// - a page of all pets holds `id` when `id <= next_after`;
    /// - a page of `from` held `id` when `id <= next_after`, and loses its
    ///   next page when `left <= limit`;
    /// - a page of `to` would take `id` when `id < next_after`;
    /// - a page of the third status cannot change.
    pub(super) fn dropped_by(&self, id: PetId, from: PetStatus, to: PetStatus, left: usize) {
        // Only the page of `from` can lose its next page.
        let never = usize::MAX;
        for (filter, left) in [(None, never), (Some(from), left), (Some(to), never)] {
            let filter = filter_index(filter);
            let reach = &self.reach[filter];
            if id.get() > reach.last.load(Ordering::Relaxed)
                && left > reach.limit.load(Ordering::Relaxed)
            {
                continue;
            }
            let (mut last, mut most) = (0, 0);
            for (i, slot) in self.slots[filter].iter().enumerate() {
                let limit = i + 1;
                let mut slot = slot.write();
                match slot.as_ref() {
                    Some(page) if id <= page.next_after || left <= limit => *slot = None,
                    Some(page) => {
                        last = last.max(page.next_after.get());
                        most = limit;
                    }
                    None => {}
                }
            }
            reach.last.store(last, Ordering::Relaxed);
            reach.limit.store(most, Ordering::Relaxed);
        }
    }

    fn slot(&self, query: &ListQuery) -> Option<&Slot> {
        self.slots
            .get(filter_index(query.status))?
            .get(query.limit.get() - 1)
    }
}
