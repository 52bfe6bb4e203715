//! The [`Inventory`]'s tests: pages, cursors and final pages against a
//! naive model of the contract.

use super::*;
use crate::pet::{CategoryId, PetStatus, Transition};
use proptest::prelude::*;

#[test]
fn an_applied_copy_answers_like_the_original() {
    let original = Inventory::in_memory();
    let mut pets = Vec::new();
    for (i, status) in PetStatus::ALL.iter().cycle().take(10).enumerate() {
        let name = format!("pet {i}");
        let new = NewPet::new(name, CategoryId::MIN).map(|n| n.with_status(*status));
        let created = new.ok().and_then(|n| original.create(n).ok());
        pets.extend(created);
    }
    let copy = Inventory::in_memory();
    assert_eq!(copy.apply(&pets[..4]), Ok(4));
    assert_eq!(
        copy.apply(&pets[7..]),
        Err(ApplyError::Gap {
            expected: 5,
            found: 8
        })
    );
    assert_eq!(copy.apply(&pets[2..]), Ok(6));
    for status in [None, Some(PetStatus::Sold)] {
        let mut query = ListQuery::new();
        query.status = status;
        assert_eq!(copy.list_json(&query).body, original.list_json(&query).body);
    }
    assert_eq!(copy.get(PetId::MIN), original.get(PetId::MIN));
}

#[test]
fn cursor_past_the_end_and_limits() {
    let inv = Inventory::in_memory();
    assert_eq!(inv.list(&ListQuery::new()), Page::default());
    for i in 0..5 {
        let status = PetStatus::ALL[i % 3];
        let new = NewPet::new(format!("p{i}"), CategoryId::MIN).map(|n| n.with_status(status));
        assert!(new.ok().map(|n| inv.create(n).is_ok()) == Some(true));
    }
    let q = |limit: u64, after: Option<u64>| {
        let mut q = ListQuery::new();
        q.limit = PageSize::new(limit).unwrap_or_default();
        q.after = after.and_then(PetId::new);
        q
    };
    assert_eq!(inv.list(&q(5, None)).next_after, None);
    assert_eq!(inv.list(&q(4, None)).next_after, PetId::new(4));
    assert_eq!(inv.list(&q(1, Some(4))).pets.len(), 1);
    assert_eq!(inv.list(&q(1, Some(4))).next_after, None);
    assert_eq!(inv.list(&q(3, Some(5))), Page::default());
    assert_eq!(inv.list(&q(3, Some(PetId::MAX.get()))), Page::default());
    assert_eq!(inv.list_json(&q(3, Some(5))).body, b"[]");
    // available: ids 1 and 4
    let sold_after = q(1, None).status(PetStatus::Available);
    let page = inv.list(&sold_after);
    assert_eq!(page.next_after, PetId::new(1));
    let page = inv.list(&sold_after.after(PetId::MIN));
    assert_eq!(
        page.pets.iter().map(|p| p.id().get()).collect::<Vec<_>>(),
        [4]
    );
    assert_eq!(page.next_after, None);
    assert_eq!(
        inv.get(PetId::MIN).map(|p| p.name().to_owned()),
        Some("p0".into())
    );
    assert_eq!(inv.get(PetId::new(6).unwrap_or(PetId::MAX)), None);
    assert_eq!(inv.get(PetId::MAX), None);
}

#[test]
fn a_rare_status_is_found_across_the_status_sets_words_and_summaries() {
    // Only the last pet is sold; for inventory sizes around a word of
    // the status set (64 pets) and a summary bit (4,096), it is found.
    let create = |inv: &Inventory, status: PetStatus| {
        let new = NewPet::new("p", CategoryId::MIN).map(|p| p.with_status(status));
        match new.map(|p| inv.create(p)) {
            Ok(Ok(pet)) => pet,
            _ => panic!("create failed"),
        }
    };
    for n in (1..=130).chain([4_095, 4_096, 4_097, 4_161]) {
        let inv = Inventory::in_memory();
        for _ in 1..n {
            create(&inv, PetStatus::Available);
        }
        let last = create(&inv, PetStatus::Sold);
        for limit in 1..=3 {
            let q = ListQuery::new()
                .status(PetStatus::Sold)
                .limit(PageSize::new(limit).unwrap_or_default());
            let page = inv.list(&q);
            assert_eq!(
                page.pets,
                std::slice::from_ref(&last),
                "n {n} limit {limit}"
            );
            assert_eq!(page.next_after, None);
            if let Some(before) = PetId::new(n as u64 - 1) {
                assert_eq!(inv.list(&q.after(before)).pets, std::slice::from_ref(&last));
            }
            assert_eq!(inv.list(&q.after(last.id())), Page::default());
        }
    }
}

fn arb_new_pet() -> impl Strategy<Value = NewPet> {
    (
        "[a-z\"\\\\é ]{0,6}[a-z]",
        1..=4u64,
        prop::sample::select(PetStatus::ALL.to_vec()),
    )
        .prop_filter_map("valid", |(name, cat, status)| {
            Some(
                NewPet::new(name, CategoryId::new(cat)?)
                    .ok()?
                    .with_status(status),
            )
        })
}

fn arb_query() -> impl Strategy<Value = ListQuery> {
    (
        1..=100u64,
        prop::option::of(prop::sample::select(PetStatus::ALL.to_vec())),
        prop::option::of(1..=260u64),
    )
        .prop_map(|(limit, status, after)| ListQuery {
            limit: PageSize::new(limit).unwrap_or_default(),
            status,
            after: after.and_then(PetId::new),
        })
}

/// What `list` must return, computed the slow, obvious way.
fn naive(all: &[Pet], q: &ListQuery) -> Page {
    let matching: Vec<&Pet> = all
        .iter()
        .filter(|p| q.status.is_none_or(|s| p.status() == s))
        .filter(|p| q.after.is_none_or(|a| p.id() > a))
        .collect();
    let pets: Vec<Pet> = matching
        .iter()
        .take(q.limit.get())
        .map(|p| (*p).clone())
        .collect();
    let next_after = (matching.len() > pets.len())
        .then(|| pets.last().map(Pet::id))
        .flatten();
    Page { pets, next_after }
}

proptest! {
    /// Inventories where one status is common and the others rare
    /// (alone or in runs), with small pages: filtered pages come from
    /// the status scan, the binary-search fallback, or both.
    #[test]
    fn filtered_pages_of_rare_and_common_statuses_equal_naive(
        statuses in prop::collection::vec(
            prop_oneof![
                40 => Just(vec![PetStatus::Available]),
                1 => prop::sample::select(PetStatus::ALL.to_vec()).prop_map(|s| vec![s]),
                1 => (prop::sample::select(PetStatus::ALL.to_vec()), 1..40usize)
                    .prop_map(|(s, n)| vec![s; n]),
            ],
            0..800,
        ),
        queries in prop::collection::vec(
            (1..=12u64, prop::sample::select(PetStatus::ALL.to_vec()), prop::option::of(1..=1_700u64)),
            1..30,
        ),
    ) {
        let inv = Inventory::in_memory();
        let mut all = Vec::new();
        for (i, status) in statuses.into_iter().flatten().enumerate() {
            let new = NewPet::new(format!("p{i}"), CategoryId::MIN)
                .map_err(|e| TestCaseError::fail(e.to_string()))?
                .with_status(status);
            all.push(inv.create(new).map_err(|e| TestCaseError::fail(e.to_string()))?);
        }
        for (limit, status, after) in queries {
            let mut q = ListQuery {
                limit: PageSize::new(limit).unwrap_or_default(),
                status: Some(status),
                after: after.and_then(PetId::new),
            };
            let want = naive(&all, &q);
            prop_assert_eq!(&inv.list(&q), &want);
            let json = inv.list_json(&q);
            prop_assert_eq!(json.body.capacity(), json.body.len());
            prop_assert_eq!(Some(json.body), serde_json::to_vec(&want.pets).ok());
            prop_assert_eq!(json.next_after, want.next_after);
            // And the rest of the pages, by the cursor.
            let mut seen: Vec<PetId> = want.pets.iter().map(Pet::id).collect();
            while let Some(after) = inv.list(&q).next_after {
                q.after = Some(after);
                seen.extend(inv.list(&q).pets.iter().map(Pet::id));
            }
            let first = after.unwrap_or(0);
            let matching: Vec<PetId> = all
                .iter()
                .filter(|p| p.status() == status && p.id().get() > first)
                .map(Pet::id)
                .collect();
            prop_assert_eq!(seen, matching);
        }
    }

    /// Creates interleaved with asks for first pages: a final page is
    /// given only when more pets match than it holds, equals the
    /// naive page then, and still equals it after every later create.
    #[test]
    fn final_pages_equal_the_naive_page_then_and_for_ever(
        steps in prop::collection::vec(
            prop_oneof![
                3 => prop::sample::select(PetStatus::ALL.to_vec()).prop_map(Ok),
                1 => (1..=6u64, prop::option::of(prop::sample::select(PetStatus::ALL.to_vec())))
                    .prop_map(Err),
            ],
            1..120,
        ),
    ) {
        let inv = Inventory::in_memory();
        let mut all = Vec::new();
        let mut given = Vec::new();
        for step in steps {
            match step {
                Ok(status) => {
                    let new = NewPet::new(format!("p{}", all.len()), CategoryId::MIN)
                        .map_err(|e| TestCaseError::fail(e.to_string()))?
                        .with_status(status);
                    all.push(inv.create(new).map_err(|e| TestCaseError::fail(e.to_string()))?);
                }
                Err((limit, status)) => {
                    let q = ListQuery {
                        limit: PageSize::new(limit).unwrap_or_default(),
                        status,
                        after: None,
                    };
                    let matching = all.iter().filter(|p| status.is_none_or(|s| p.status() == s)).count();
                    let page = inv.final_page(&q);
                    prop_assert_eq!(page.is_some(), matching > q.limit.get());
                    if let Some(page) = page {
                        given.push((q, page));
                    }
                    // A cursor is never a final page.
                    prop_assert!(inv.final_page(&q.after(PetId::MIN)).is_none());
                }
            }
            for (q, page) in &given {
                let want = naive(&all, q);
                prop_assert_eq!(Some(page.body.to_vec()), serde_json::to_vec(&want.pets).ok());
                prop_assert_eq!(page.count, want.pets.len());
                prop_assert_eq!(Some(page.next_after), want.next_after);
                prop_assert_eq!(&inv.final_page(q), &Some(page.clone()));
            }
        }
    }

    #[test]
    fn list_equals_naive_filter_sort_take(
        pets in prop::collection::vec(arb_new_pet(), 0..250),
        queries in prop::collection::vec(arb_query(), 1..20),
    ) {
        let inv = Inventory::in_memory();
        let mut all = Vec::new();
        for new in pets {
            all.push(inv.create(new).map_err(|e| TestCaseError::fail(e.to_string()))?);
        }
        for q in &queries {
            let want = naive(&all, q);
            prop_assert_eq!(&inv.list(q), &want);
            let json = inv.list_json(q);
            prop_assert_eq!(json.body.capacity(), json.body.len());
            let reused = inv.list_json_into(q, b"left over from another page".to_vec());
            prop_assert_eq!(&reused.body, &json.body);
            prop_assert_eq!(reused.next_after, json.next_after);
            prop_assert_eq!(Some(json.body), serde_json::to_vec(&want.pets).ok());
            prop_assert_eq!(json.count, want.pets.len());
            prop_assert_eq!(json.next_after, want.next_after);
        }
        for p in &all {
            prop_assert_eq!(inv.get(p.id()), Some(p.clone()));
            prop_assert_eq!(inv.get_json(p.id()), serde_json::to_vec(p).ok());
        }
    }

    #[test]
    fn cursor_paging_visits_every_match_once(
        pets in prop::collection::vec(arb_new_pet(), 0..250),
        limit in 1..=100u64,
        status in prop::option::of(prop::sample::select(PetStatus::ALL.to_vec())),
    ) {
        let inv = Inventory::in_memory();
        let mut want = Vec::new();
        for new in pets {
            let pet = inv.create(new).map_err(|e| TestCaseError::fail(e.to_string()))?;
            if status.is_none_or(|s| s == pet.status()) {
                want.push(pet.id());
            }
        }
        let mut seen = Vec::new();
        let mut query = ListQuery { limit: PageSize::new(limit).unwrap_or_default(), status, after: None };
        loop {
            let page = inv.list(&query);
            prop_assert!(page.pets.len() <= limit as usize);
            seen.extend(page.pets.iter().map(Pet::id));
            match page.next_after {
                Some(after) => query.after = Some(after),
                None => break,
            }
        }
        prop_assert_eq!(seen, want);
    }
}

/// One step of the model with transitions: a create, a transition of the
/// pet at some position (an id beyond the last included), or a look at a
/// page (a list, and the first page kept for polling).
#[derive(Clone, Debug)]
enum Step {
    Create(NewPet),
    Change(u64, Transition),
    Look(ListQuery),
}

fn arb_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => arb_new_pet().prop_map(Step::Create),
        3 => (1..=40u64, prop::sample::select(Transition::ALL.to_vec()))
            .prop_map(|(id, t)| Step::Change(id, t)),
        2 => (1..=8u64, prop::option::of(prop::sample::select(PetStatus::ALL.to_vec())), prop::option::of(1..=40u64))
            .prop_map(|(limit, status, after)| Step::Look(ListQuery {
                limit: PageSize::new(limit).unwrap_or_default(),
                status,
                after: after.and_then(PetId::new),
            })),
    ]
}

/// The model's outcome of a transition: what `transition` must answer.
fn naive_transition(all: &mut [Pet], id: u64, t: Transition) -> Result<Pet, TransitionError> {
    let pet_id = PetId::new(id).unwrap_or(PetId::MAX);
    let Some(pet) = all.get_mut(id as usize - 1) else {
        return Err(TransitionError::NotFound(pet_id));
    };
    if !t.allows(pet.status()) {
        return Err(TransitionError::Conflict {
            id: pet_id,
            current: pet.status(),
            transition: t,
        });
    }
    *pet = pet.clone().with_status(t.to_status());
    Ok(pet.clone())
}

proptest! {
    /// Creates, transitions and looks interleaved: every answer equals
    /// the naive model's, and every first page ever kept still equals
    /// the naive page whenever it is given again (a kept page that a
    /// transition reached is never given stale).
    #[test]
    fn with_transitions_every_page_equals_naive(steps in prop::collection::vec(arb_step(), 1..200)) {
        let inv = Inventory::in_memory();
        let mut all: Vec<Pet> = Vec::new();
        let mut kept: Vec<ListQuery> = Vec::new();
        for step in steps {
            match step {
                Step::Create(new) => {
                    all.push(inv.create(new).map_err(|e| TestCaseError::fail(e.to_string()))?);
                }
                Step::Change(id, t) => {
                    let want = naive_transition(&mut all, id, t);
                    let pet_id = PetId::new(id).unwrap_or(PetId::MAX);
                    prop_assert_eq!(inv.transition(pet_id, t), want);
                }
                Step::Look(q) => {
                    let want = naive(&all, &q);
                    prop_assert_eq!(&inv.list(&q), &want);
                    let json = inv.list_json(&q);
                    prop_assert_eq!(json.body.capacity(), json.body.len());
                    prop_assert_eq!(Some(json.body), serde_json::to_vec(&want.pets).ok());
                    prop_assert_eq!(json.next_after, want.next_after);
                    let first = ListQuery { after: None, ..q };
                    if inv.final_page(&first).is_some() {
                        kept.push(first);
                    }
                }
            }
            for q in &kept {
                let want = naive(&all, q);
                let matching = all.iter().filter(|p| q.status.is_none_or(|s| p.status() == s)).count();
                let page = inv.final_page(q);
                prop_assert_eq!(page.is_some(), matching > q.limit.get());
                if let Some(page) = page {
                    prop_assert_eq!(Some(page.body.to_vec()), serde_json::to_vec(&want.pets).ok());
                    prop_assert_eq!(Some(page.next_after), want.next_after);
                    prop_assert_eq!(page.count, want.pets.len());
                }
            }
        }
        for p in &all {
            prop_assert_eq!(inv.get(p.id()), Some(p.clone()));
            prop_assert_eq!(inv.get_json(p.id()), serde_json::to_vec(p).ok());
        }
        // A copy given the same pets, then the final statuses, answers alike.
        let copy = Inventory::in_memory();
        let created: Vec<Pet> = all.iter().map(|p| inv.get(p.id()).unwrap_or_else(|| p.clone())).collect();
        prop_assert_eq!(copy.apply(&created), Ok(created.len()));
        let statuses: Vec<(PetId, PetStatus)> = all.iter().map(|p| (p.id(), p.status())).collect();
        prop_assert_eq!(copy.apply_statuses(&statuses), Ok(statuses.len()));
        for status in [None, Some(PetStatus::Available), Some(PetStatus::Pending), Some(PetStatus::Sold)] {
            let q = ListQuery { limit: PageSize::MAX, status, after: None };
            prop_assert_eq!(copy.list_json(&q).body, inv.list_json(&q).body);
        }
    }
}

#[test]
fn a_pet_reserved_and_released_again_and_again_does_not_grow_the_arena() {
    let inv = Inventory::in_memory();
    let rex = NewPet::new("Rex", CategoryId::MIN).map(|n| inv.create(n));
    let Ok(Ok(rex)) = rex else {
        panic!("create failed")
    };
    let step = |t| inv.transition(rex.id(), t).map(|p| p.status());
    assert_eq!(step(Transition::Reserve), Ok(PetStatus::Pending));
    let len = inv.records.read().bytes_held();
    for _ in 0..100 {
        assert_eq!(step(Transition::Release), Ok(PetStatus::Available));
        assert_eq!(step(Transition::Reserve), Ok(PetStatus::Pending));
    }
    assert_eq!(step(Transition::Sell), Ok(PetStatus::Sold));
    assert_eq!(inv.records.read().bytes_held(), len);
    assert_eq!(inv.get(rex.id()).map(|p| p.status()), Some(PetStatus::Sold));
}

#[test]
fn kept_first_pages_survive_transitions_that_cannot_reach_them() {
    let inv = Inventory::in_memory();
    for i in 0..100 {
        let new = NewPet::new(format!("p{i}"), CategoryId::MIN);
        assert!(new.ok().map(|n| inv.create(n).is_ok()) == Some(true));
    }
    let id = |n| PetId::new(n).unwrap_or(PetId::MAX);
    let five = |status: Option<PetStatus>| ListQuery {
        limit: PageSize::new(5).unwrap_or_default(),
        status,
        after: None,
    };
    let kept = |q: &ListQuery| inv.final_page(q).unwrap_or_else(|| panic!("no page"));
    let (all, available) = (kept(&five(None)), kept(&five(Some(PetStatus::Available))));
    // Pets 6 and beyond are on neither page: the pages stay, shared.
    for (n, t) in [
        (50, Transition::Reserve),
        (50, Transition::Sell),
        (6, Transition::Sell),
    ] {
        assert!(inv.transition(id(n), t).is_ok());
        assert!(Arc::ptr_eq(&kept(&five(None)), &all));
        assert!(Arc::ptr_eq(
            &kept(&five(Some(PetStatus::Available))),
            &available
        ));
    }
    // Pet 3 is on both: both go, and come back with its new status.
    assert!(inv.transition(id(3), Transition::Reserve).is_ok());
    for q in [five(None), five(Some(PetStatus::Available))] {
        let page = kept(&q);
        assert_eq!(*page.body, *inv.list_json(&q).body);
    }
    assert!(!Arc::ptr_eq(&kept(&five(None)), &all));
    // A page of pending pets needs more than five of them: one more
    // reserve brings pet 7 before pet 50's place, then a sale of one of
    // the first five leaves the page without a next one.
    let pending = five(Some(PetStatus::Pending));
    for n in [1, 2, 4, 5, 7] {
        assert!(inv.transition(id(n), Transition::Reserve).is_ok());
    }
    let page = kept(&pending);
    assert_eq!(page.next_after, id(5));
    assert!(inv.transition(id(8), Transition::Reserve).is_ok());
    assert!(
        Arc::ptr_eq(&kept(&pending), &page),
        "pet 8 comes after the page"
    );
    assert!(inv.transition(id(1), Transition::Sell).is_ok());
    assert!(inv.transition(id(2), Transition::Sell).is_ok());
    // Five pending pets are left (3, 4, 5, 7, 8): no next page.
    assert!(inv.final_page(&pending).is_none());
    assert_eq!(inv.list(&pending).next_after, None);
}
