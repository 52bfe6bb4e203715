//! [`Records`]: the arena that holds an inventory's pets, and how a page
//! is read out of it.
//!
//! Every pet's JSON as created lies back to back in one arena, so a page
//! is one copy per run of neighbours; the id is the index; a pet whose
//! status changed has its JSON in a slot of its own; each status's pets
//! are a bitmap ([`IdSet`]). The layout, field by field, and why:
//! docs/performance.md, "The inventory's layout".

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::id_set::IdSet;
use super::query::{JsonPage, ListQuery, PageSize};
use crate::pet::json::{decode, encode, status_of_json, LONGEST_STATUS};
use crate::pet::{Pet, PetId, PetStatus};

#[derive(Debug, Default)]
pub(crate) struct Records {
    /// Every pet's JSON as created, back to back, each followed by a `,`:
    /// a page of consecutive ids is one copy, with no encoding.
    pub(super) arena: Vec<u8>,
    /// Where each pet's JSON as created (its *home*) ends, comma included.
    /// Ids are dense, so the id is the index: `get` is O(1).
    pub(super) ends: Vec<u64>,
    /// Each pet's status, one byte each.
    pub(super) statuses: Vec<PetStatus>,
    /// The pets of each status: a transition moves a pet between two sets
    /// in a few word writes, and a filtered page never scans the pets of
    /// other statuses.
    pub(super) by_status: [IdSet; 3],
    /// Pets whose status is not the one of their home bytes, by index.
    /// Empty while no pet ever changed.
    away_set: IdSet,
    /// The JSON of pets away from home, each in a slot of its own: apart
    /// from `arena`, whose pets must stay back to back. A slot is sized
    /// for the pet's longest status, so later changes rewrite it in place
    /// and the bytes held stay under twice the arena's.
    moved: Vec<u8>,
    /// The slot in `moved` of each pet that was ever away: its start and
    /// its JSON's length now (comma excluded). Kept when the pet goes
    /// home, so that a pet reserved and released again and again reuses
    /// one slot instead of growing `moved` each time.
    away: HashMap<usize, (u64, u32), BuildHasherDefault<IndexHasher>>,
}

/// The hash of a pet's index for `away`: one multiplication. The keys are
/// the inventory's own indices, not a client's choice, so SipHash's
/// defence against chosen collisions buys nothing here, and every page
/// with a changed pet on it looks it up.
#[derive(Default)]
struct IndexHasher(u64);

impl Hasher for IndexHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn write_u64(&mut self, n: u64) {
        // Fibonacci hashing: an odd constant near 2^64 / golden ratio
        // spreads consecutive indices over the high bits too.
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Where offsets into `moved` start, in the one space of offsets that
/// [`Records::slot`] and [`Runs`] use for both buffers: a run never
/// spans the two, and no arena comes near this size.
const MOVED: usize = usize::MAX / 2 + 1;

impl Records {
    /// [`Inventory::list_json_into`](crate::Inventory::list_json_into) under the lock.
    pub(super) fn json_page(&self, query: &ListQuery, mut body: Vec<u8>) -> JsonPage {
        body.clear();
        if query.status.is_none() {
            let (range, next_after) = self.all_range(query);
            if self.any_away(&range) {
                // Pets of the page that changed are elsewhere: copied as
                // runs of neighbours around them.
                let mut runs = Runs::new();
                for index in range.clone() {
                    runs.push(self, index);
                }
                runs.write(self, &mut body);
            } else {
                // Consecutive ids are consecutive in the arena: one copy.
                // `[`, the pets with their commas, the last comma
                // becoming `]`.
                body.reserve_exact((1 + self.arena_span(&range)).max(2));
                body.push(b'[');
                if !range.is_empty() {
                    let start = self.start(range.start);
                    let end = self.end(range.end - 1);
                    body.extend_from_slice(&self.arena[start..end]);
                }
                close_array(&mut body);
            }
            return JsonPage {
                body,
                count: range.len(),
                next_after,
            };
        }
        // The matches' bytes first, so that the body is allocated once,
        // exactly ([`Runs`]).
        let mut runs = Runs::new();
        let mut count = 0;
        let next_after = self.select(query, |index| {
            count += 1;
            runs.push(self, index);
        });
        runs.write(self, &mut body);
        JsonPage {
            body,
            count,
            next_after,
        }
    }

    pub(super) fn index_of(&self, id: PetId) -> Option<usize> {
        let index = usize::try_from(id.get() - 1).ok()?;
        (index < self.ends.len()).then_some(index)
    }

    /// Where the pet's home bytes (its JSON as created) start.
    fn start(&self, index: usize) -> usize {
        match index {
            0 => 0,
            _ => self.ends[index - 1] as usize,
        }
    }

    /// End of the pet's home bytes *including* their trailing comma.
    fn end(&self, index: usize) -> usize {
        self.ends[index] as usize
    }

    /// Whether the pet's status is no longer the one of its home bytes.
    fn is_away(&self, index: usize) -> bool {
        self.away_set.len() > 0 && self.away_set.contains(index)
    }

    /// Whether any pet of `range` is away: no look at all while no pet
    /// ever changed, else one search.
    fn any_away(&self, range: &std::ops::Range<usize>) -> bool {
        self.away_set.len() > 0
            && self
                .away_set
                .next_from(range.start)
                .is_some_and(|index| index < range.end)
    }

    /// Where the pet's JSON is now, its trailing comma included: in
    /// `arena`, or (from [`MOVED`] on) in `moved`.
    fn slot(&self, index: usize) -> (usize, usize) {
        if self.is_away(index) {
            if let Some(&(start, len)) = self.away.get(&index) {
                let start = MOVED + start as usize;
                return (start, start + len as usize + 1);
            }
        }
        (self.start(index), self.end(index))
    }

    /// Bytes of JSON held, home and moved.
    #[cfg(test)]
    pub(super) fn bytes_held(&self) -> usize {
        self.arena.len() + self.moved.len()
    }

    /// The bytes of a slot or run of slots.
    fn bytes(&self, start: usize, end: usize) -> &[u8] {
        match start.checked_sub(MOVED) {
            Some(at) => &self.moved[at..end - MOVED],
            None => &self.arena[start..end],
        }
    }

    /// The pet's JSON without the trailing comma.
    pub(super) fn json(&self, index: usize) -> &[u8] {
        let (start, end) = self.slot(index);
        self.bytes(start, end - 1)
    }

    /// Changes the status of the pet at `index` (which the caller has
    /// decided is allowed). Its JSON changes length with the status, so
    /// it cannot be rewritten where it lies without moving every later
    /// pet: it goes to a slot of its own in `moved`, sized for its longest
    /// JSON so that every later change fits there, and it goes home again
    /// when its status is again the one it was created with. A page of
    /// pets at home stays one copy.
    pub(super) fn set_status(&mut self, index: usize, status: PetStatus) {
        let Some(&old) = self.statuses.get(index) else {
            return;
        };
        if old == status {
            return;
        }
        let id = id_at(index);
        let home = &self.arena[self.start(index)..self.end(index) - 1];
        if status_of_json(home) == Some(status) {
            self.away_set.remove(index);
        } else if let Some(pet) = decode(id, old, self.json(index)) {
            let mut json = Vec::with_capacity(home.len() + LONGEST_STATUS);
            encode(&pet.with_status(status), &mut json);
            json.push(b',');
            let len = json.len() as u32 - 1;
            let start = self.away.get(&index).map(|&(start, _)| start as usize);
            // The slot was sized for the longest status, so the JSON fits;
            // taken with `get_mut`, not indexed, so that nothing here can
            // panic (a slot not found is replaced by a fresh one).
            let fits = start.and_then(|at| self.moved.get_mut(at..at + json.len()));
            match (fits, start) {
                (Some(slot), Some(start)) => {
                    slot.copy_from_slice(&json);
                    self.away.insert(index, (start as u64, len));
                }
                _ => {
                    // Room for the longest status, whatever comes later.
                    let room = json.len() - status.as_str().len() + LONGEST_STATUS;
                    let start = self.moved.len();
                    self.moved.extend_from_slice(&json);
                    self.moved.resize(start + room, b' ');
                    self.away.insert(index, (start as u64, len));
                }
            }
            self.away_set.insert(index);
        } else {
            // The arena holds what `encode` wrote: not reached.
            return;
        }
        self.statuses[index] = status;
        self.by_status[old.index()].remove(index);
        self.by_status[status.index()].insert(index);
    }

    fn arena_span(&self, range: &std::ops::Range<usize>) -> usize {
        match range.is_empty() {
            true => 0,
            false => self.end(range.end - 1) - self.start(range.start),
        }
    }

    pub(super) fn push(&mut self, pet: &Pet) {
        encode(pet, &mut self.arena);
        self.push_encoded(pet.id(), pet.status());
    }

    /// Appends a pet whose JSON, exactly as [`encode`] writes it, is given.
    pub(crate) fn push_json(&mut self, id: PetId, status: PetStatus, json: &[u8]) {
        self.arena.extend_from_slice(json);
        self.push_encoded(id, status);
    }

    fn push_encoded(&mut self, id: PetId, status: PetStatus) {
        debug_assert_eq!(id_at(self.ends.len()), id);
        self.arena.push(b',');
        self.by_status[status.index()].insert(self.ends.len());
        self.ends.push(self.arena.len() as u64);
        self.statuses.push(status);
    }

    /// Indices of the first page of all pets (no status filter).
    fn all_range(&self, query: &ListQuery) -> (std::ops::Range<usize>, Option<PetId>) {
        let len = self.ends.len();
        // Ids are dense: the first id greater than `after` is at index `after`.
        let start = query.after.map_or(0, |a| a.get().min(len as u64) as usize);
        let end = start.saturating_add(query.limit.get()).min(len);
        let next = (end < len && end > start).then(|| id_at(end - 1));
        (start..end, next)
    }

    /// Calls `visit` with the index of each pet of the page, in order, and
    /// returns the cursor of the next page.
    pub(super) fn select(&self, query: &ListQuery, mut visit: impl FnMut(usize)) -> Option<PetId> {
        match query.status {
            None => {
                let (range, next) = self.all_range(query);
                range.for_each(visit);
                next
            }
            Some(status) => {
                // The status's set, from the first index after the cursor
                // (ids are dense: the pet after `after` is at `after`).
                let members = &self.by_status[status.index()];
                let len = self.ends.len() as u64;
                let mut at = query.after.map_or(0, |a| a.get().min(len) as usize);
                let mut last = None;
                for _ in 0..query.limit.get() {
                    let Some(index) = members.next_from(at) else {
                        break;
                    };
                    visit(index);
                    last = Some(index);
                    at = index + 1;
                }
                // A next page exactly when another pet of the status
                // follows the page's last one.
                let last = last?;
                members.next_from(last + 1).map(|_| id_at(last))
            }
        }
    }
}

/// The arena's bytes of at most a page of pets ([`PageSize::MAX`]), as runs:
/// pets next to each other in the arena (consecutive ids, a run of one
/// status) become one range and one copy, and the page's length is known
/// before its body grows, so that it grows once, exactly.
///
/// Why one pass for the runs and one for the copies: every pet's bounds
/// are looked up once, where a pass for the length and a pass for the
/// copies each looked them up again (a filtered first page's pets are
/// rarely neighbours, so it is mostly runs of one pet).
/// The filtered page of a cursor and the first page of a status share it.
struct Runs {
    ranges: [(usize, usize); PageSize::MAX.get()],
    len: usize,
    span: usize,
}

impl Runs {
    fn new() -> Self {
        Runs {
            ranges: [(0, 0); PageSize::MAX.get()],
            len: 0,
            span: 0,
        }
    }

    /// Adds the pet at `index` (after the ones added before it).
    fn push(&mut self, records: &Records, index: usize) {
        let (start, end) = records.slot(index);
        self.span += end - start;
        match self
            .len
            .checked_sub(1)
            .and_then(|last| self.ranges.get_mut(last))
        {
            Some(last) if last.1 == start => last.1 = end,
            _ => {
                if let Some(slot) = self.ranges.get_mut(self.len) {
                    *slot = (start, end);
                    self.len += 1;
                }
            }
        }
    }

    /// The JSON array of the pets added, into `body`.
    fn write(&self, records: &Records, body: &mut Vec<u8>) {
        body.reserve_exact((1 + self.span).max(2));
        body.push(b'[');
        for &(start, end) in &self.ranges[..self.len] {
            body.extend_from_slice(records.bytes(start, end));
        }
        close_array(body);
    }
}

/// Turns `[a,b,` into `[a,b]` and `[` into `[]`.
fn close_array(body: &mut Vec<u8>) {
    match body.last_mut() {
        Some(last @ b',') => *last = b']',
        _ => body.push(b']'),
    }
}

pub(super) fn id_at(index: usize) -> PetId {
    // `index < ends.len()`, and `create` never pushes past `PetId::MAX`.
    PetId::new(index as u64 + 1).unwrap_or(PetId::MAX)
}
