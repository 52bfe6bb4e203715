//! [`FinalPages`]: first pages kept encoded, and shared, while no change
//! can reach them (see [`Inventory::final_page`](crate::Inventory::final_page)).

use std::sync::Arc;

use parking_lot::RwLock;

use super::query::{FinalPage, Limit, ListQuery};
use crate::pet::{PetId, PetStatus};

/// A kept page, if there is one.
type Slot = RwLock<Option<Arc<FinalPage>>>;

/// The first pages kept, by status filter and limit (the "Layout and
/// why" of `records.rs`).
///
/// A page is kept while more pets match than it holds: creates only add
/// pets after it, so they never change it. A transition can: it is
/// dropped ([`dropped_by`](Self::dropped_by)) when the changed pet is on
/// it, would join it, or leaves its filter with too few pets for a next
/// page. Pages kept and dropped change only under the records' lock (a
/// page is kept with the read lock held, dropped with the write lock), so
/// a page built before a change is never kept after it.
pub(super) struct FinalPages([[Slot; Limit::MAX.get()]; 1 + PetStatus::ALL.len()]);

impl std::fmt::Debug for FinalPages {
    /// How many are kept, not 400 slots.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self
            .0
            .iter()
            .flatten()
            .filter(|slot| slot.read().is_some())
            .count();
        f.debug_struct("FinalPages").field("kept", &kept).finish()
    }
}

impl Default for FinalPages {
    fn default() -> Self {
        FinalPages(std::array::from_fn(|_| {
            std::array::from_fn(|_| RwLock::new(None))
        }))
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
            for (i, slot) in self.0[filter_index(filter)].iter().enumerate() {
                let limit = i + 1;
                let reached = slot
                    .read()
                    .as_ref()
                    .is_some_and(|page| id <= page.next_after || left <= limit);
                if reached {
                    *slot.write() = None;
                }
            }
        }
    }

    fn slot(&self, query: &ListQuery) -> Option<&Slot> {
        self.0
            .get(filter_index(query.status))?
            .get(query.limit.get() - 1)
    }
}
