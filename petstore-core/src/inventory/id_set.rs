//! [`IdSet`]: the pets of one status, as a set of indices that a
//! transition changes in a few word writes and a page walks in order.

/// Bits a word holds.
const WORD: usize = u64::BITS as usize;

/// A set of pet indices (id - 1), ascending, as a bitmap with summaries:
/// `levels[0]` has a bit per index; each level above has a bit per word
/// of the level below, set when that word is not zero; the top level is
/// one word.
///
/// Why this shape: a sorted `Vec` of ids makes a list's walk cheap but a
/// transition costs a `memmove` of up to every id after the changed one
/// (megabytes at a million pets); a tree costs a node per few ids.
/// Here insert and remove touch one word per level (four levels up to
/// 16 million pets), the next member after any index is found in as
/// many steps however far it is (a bit of the first summary stands for
/// 64 pets, of the second for 4,096, of the third for 262,144, so a
/// rare status's page skips the pets of other statuses by the
/// thousand), and the set costs a bit per pet, plus 1/64 of that.
#[derive(Debug, Default)]
pub(super) struct IdSet {
    levels: Vec<Vec<u64>>,
    len: usize,
}

impl IdSet {
    /// How many indices the set holds.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Whether `index` is in the set.
    pub(super) fn contains(&self, index: usize) -> bool {
        self.levels
            .first()
            .and_then(|bits| bits.get(index / WORD))
            .is_some_and(|word| word & (1 << (index % WORD)) != 0)
    }

    /// Adds `index`; nothing if it is there already.
    pub(super) fn insert(&mut self, index: usize) {
        if self.levels.is_empty() {
            self.levels.push(Vec::new());
        }
        let mut at = index;
        for level in 0.. {
            let Some(words) = self.levels.get_mut(level) else {
                break;
            };
            let (word, bit) = (at / WORD, 1u64 << (at % WORD));
            if words.len() <= word {
                words.resize(word + 1, 0);
            }
            let was = words[word];
            words[word] |= bit;
            if level == 0 {
                if was & bit != 0 {
                    return;
                }
                self.len += 1;
            }
            if was != 0 {
                // The level above already marks this word.
                return;
            }
            at = word;
        }
        // The top level outgrew one word: summarise it in a new one, as
        // often as needed.
        while let Some(top) = self.levels.last().filter(|top| top.len() > 1) {
            let mut above = vec![0u64; top.len().div_ceil(WORD)];
            for (word, value) in top.iter().enumerate() {
                if *value != 0 {
                    above[word / WORD] |= 1 << (word % WORD);
                }
            }
            self.levels.push(above);
        }
    }

    /// Removes `index`; nothing if it is not there.
    pub(super) fn remove(&mut self, index: usize) {
        let mut at = index;
        for level in 0..self.levels.len() {
            let (word, bit) = (at / WORD, 1u64 << (at % WORD));
            let Some(value) = self.levels[level].get_mut(word) else {
                return;
            };
            if *value & bit == 0 {
                return;
            }
            *value &= !bit;
            if level == 0 {
                self.len -= 1;
            }
            if *value != 0 {
                // Other members keep the word marked above.
                return;
            }
            at = word;
        }
    }

    /// The smallest index in the set at or after `from`.
    pub(super) fn next_from(&self, from: usize) -> Option<usize> {
        self.next_at(0, from)
    }

    /// The smallest position set in `level` at or after `from`.
    fn next_at(&self, level: usize, from: usize) -> Option<usize> {
        let words = self.levels.get(level)?;
        let word = from / WORD;
        let value = *words.get(word)? & (!0u64 << (from % WORD));
        if value != 0 {
            return Some(word * WORD + value.trailing_zeros() as usize);
        }
        // The next word that is not zero, from the level above (or, at
        // the top, which is one word, there is none).
        let next = match level + 1 < self.levels.len() {
            true => self.next_at(level + 1, word + 1)?,
            false => (word + 1..words.len()).find(|&w| words[w] != 0)?,
        };
        let value = *words.get(next)?;
        (value != 0).then(|| next * WORD + value.trailing_zeros() as usize)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    /// Indices around the words' and the summaries' edges.
    fn arb_index() -> impl Strategy<Value = usize> {
        prop_oneof![
            0..200usize,
            (0..4usize, 0..3usize).prop_map(|(k, d)| (WORD.pow(2) * (k + 1) + d).saturating_sub(1)),
            (0..3usize).prop_map(|d| WORD.pow(3) + d - 1),
            0..300_000usize,
        ]
    }

    proptest! {
        #[test]
        fn the_set_equals_a_btree_set(
            ops in prop::collection::vec((any::<bool>(), arb_index()), 0..300),
            probes in prop::collection::vec(arb_index(), 0..50),
        ) {
            let mut set = IdSet::default();
            let mut model = BTreeSet::new();
            for (insert, index) in ops {
                if insert {
                    set.insert(index);
                    model.insert(index);
                } else {
                    set.remove(index);
                    model.remove(&index);
                }
                prop_assert_eq!(set.len(), model.len());
                prop_assert_eq!(set.contains(index), insert);
                prop_assert_eq!(set.next_from(0), model.first().copied());
            }
            for from in probes {
                prop_assert_eq!(set.next_from(from), model.range(from..).next().copied());
            }
            // A walk visits every member in order.
            let mut walked = Vec::new();
            let mut at = 0;
            while let Some(index) = set.next_from(at) {
                walked.push(index);
                at = index + 1;
            }
            prop_assert_eq!(walked, model.into_iter().collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_lone_member_far_away_is_found_through_the_summaries() {
        let mut set = IdSet::default();
        let far = WORD.pow(3) * 2 + 5;
        set.insert(far);
        set.insert(3);
        assert_eq!(set.next_from(4), Some(far));
        set.remove(far);
        assert_eq!(set.next_from(4), None);
        assert_eq!(set.next_from(0), Some(3));
        assert_eq!(set.len(), 1);
    }
}
