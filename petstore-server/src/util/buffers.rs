//! Reused buffers for list pages and for the header values that change
//! with every response (`headers/`). A page of 20 pets is about 1.4 KiB,
//! over glibc's per-thread cache of small blocks (tcache, up to 1 KiB),
//! so allocating and freeing one per request takes a malloc arena lock.
//! With two workers that lock was contended: `perf record -e
//! syscalls:sys_enter_futex` under list load put a fifth of the server's
//! futex calls on that page's allocation and free (docs/performance.md).
//!
//! A page is written into a buffer taken from the worker thread's free
//! list and handed to hyper as [`Bytes`] that own it; when hyper drops
//! the bytes (after writing them), the buffer goes back on the free list
//! of the thread that dropped it. Each list keeps at most [`KEEP`]
//! buffers of at most [`MAX_KEPT`] bytes, so the memory held is bounded.
//!
//! A body made once and shared (a final page of the inventory) needs no
//! buffer: [`Shared`] hands it to hyper as it is.

use std::cell::RefCell;

use hyper::body::Bytes;

/// Buffers kept per thread.
pub const KEEP: usize = 64;
/// Largest buffer kept: a page of 100 pets with names of 50 characters.
/// Larger pages are rare and simply freed. So a thread holds at most
/// 1 MiB of buffers.
pub const MAX_KEPT: usize = 16 * 1024;

thread_local! {
    static FREE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// An empty buffer, reused when this thread has one.
pub fn take() -> Vec<u8> {
    FREE.try_with(|free| free.borrow_mut().pop())
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// `buf` as bytes that give the buffer back when dropped.
pub fn into_bytes(buf: Vec<u8>) -> Bytes {
    Bytes::from_owner(Returned(buf))
}

/// Owns a buffer while it is bytes; gives it back on drop.
struct Returned(Vec<u8>);

/// A body shared by every response that sends it (an `Arc` of bytes
/// made once, such as a final page of the inventory): [`Bytes::from_owner`]
/// takes it without a copy.
#[derive(Debug)]
pub struct Shared<T>(pub std::sync::Arc<T>);

impl<T: AsRef<[u8]>> AsRef<[u8]> for Shared<T> {
    fn as_ref(&self) -> &[u8] {
        (*self.0).as_ref()
    }
}

impl AsRef<[u8]> for Returned {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Returned {
    fn drop(&mut self) {
        let mut buf = std::mem::take(&mut self.0);
        if buf.capacity() == 0 || buf.capacity() > MAX_KEPT {
            return;
        }
        buf.clear();
        // During thread teardown the list may be gone: then the buffer is
        // simply freed.
        let _ = FREE.try_with(|free| {
            let mut free = free.borrow_mut();
            if free.len() < KEEP {
                free.push(buf);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_bounded() {
        // Another thread, so that this test's list starts empty.
        std::thread::spawn(|| {
            let many: Vec<Bytes> = (0..KEEP + 10)
                .map(|i| {
                    let mut buf = take();
                    buf.resize(100 + i, b'x');
                    into_bytes(buf)
                })
                .collect();
            assert_eq!(many[5].len(), 105);
            drop(many);
            let kept: Vec<Vec<u8>> = std::iter::from_fn(|| {
                let buf = take();
                (buf.capacity() > 0).then_some(buf)
            })
            .take(KEEP + 10)
            .collect();
            assert_eq!(kept.len(), KEEP);
            assert!(kept.iter().all(|b| b.is_empty()));

            // Too large to keep.
            let mut big = take();
            big.resize(MAX_KEPT + 1, 0);
            drop(into_bytes(big));
            assert_eq!(take().capacity(), 0);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_buffer_given_back_is_taken_again() {
        let mut buf = take();
        buf.extend_from_slice(b"[]");
        let bytes = into_bytes(buf);
        assert_eq!(&bytes[..], b"[]");
        drop(bytes);
        assert!(take().capacity() >= 2); // the same buffer, again
    }
}
