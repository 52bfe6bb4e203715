//! [`FinalPages`]: the first pages that can no longer change, encoded
//! once and shared (see [`Inventory::final_page`](crate::Inventory::final_page)).

use std::sync::{Arc, OnceLock};

use super::query::{FinalPage, Limit, ListQuery};
use crate::pet::PetStatus;

/// The first pages that can no longer change, by status filter and limit
/// (the "Layout and why" of `records.rs`). Set once each, then read without a
/// lock.
pub(super) struct FinalPages(
    [[OnceLock<Arc<FinalPage>>; Limit::MAX.get()]; 1 + PetStatus::ALL.len()],
);

impl std::fmt::Debug for FinalPages {
    /// How many are kept, not 400 slots.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self
            .0
            .iter()
            .flatten()
            .filter(|slot| slot.get().is_some())
            .count();
        f.debug_struct("FinalPages").field("kept", &kept).finish()
    }
}

impl Default for FinalPages {
    fn default() -> Self {
        FinalPages(std::array::from_fn(|_| {
            std::array::from_fn(|_| OnceLock::new())
        }))
    }
}

impl FinalPages {
    pub(super) fn slot(&self, query: &ListQuery) -> Option<&OnceLock<Arc<FinalPage>>> {
        let filter = query.status.map_or(0, |status| 1 + status.index());
        self.0.get(filter)?.get(query.limit.get() - 1)
    }
}
