//! The naive list model the list tests compare the inventory with: the
//! pets matching the filter after the cursor, in id order, a page of them.

use petstore_core::{ListQuery, Pet, PetId};

/// What a list must answer, the slow, obvious way, from the model's pets.
pub(crate) fn naive(all: &[Pet], query: &ListQuery) -> (Vec<Pet>, Option<PetId>) {
    let matching: Vec<&Pet> = all
        .iter()
        .filter(|p| query.status.is_none_or(|s| p.status() == s))
        .filter(|p| query.after.is_none_or(|a| p.id() > a))
        .collect();
    let page: Vec<Pet> = matching
        .iter()
        .take(query.limit.get())
        .map(|p| (*p).clone())
        .collect();
    let next = (matching.len() > page.len())
        .then(|| page.last().map(Pet::id))
        .flatten();
    (page, next)
}
