//! The PostgreSQL schema, created and migrated at start.
//!
//! `petstore_schema` holds the version the database is at (one row);
//! [`migrate`] runs the migrations after it, in one transaction under an
//! advisory lock, and refuses a database newer than [`VERSION`]. Version
//! 1: the id counter and the pets with the contract's CHECKs; 2: the
//! name's characters as the core checks them; 3: the change counter,
//! `last_change` and `petstore_transition`; 4: the kept answers of
//! idempotency keys and the two keyed functions; 5: the orders, their
//! steps (`petstore_steps`) and their lapse (`petstore_expire`); 6: the
//! feed of events (beta), written by triggers on the pets and the orders;
//! 7: a usual batch of steps reads its state once and writes its own
//! events; 8: no index that no query of the server reads.
//!
//! Every table, index and function, and why each is as it is:
//! docs/replicas.md, "PostgreSQL's schema".

use petstore_core::pet::name_rules;
use tokio_postgres::Client;

use super::describe::describe;

/// The schema version this binary writes and reads.
pub const VERSION: i32 = 8;

/// Migration `i` takes the database from version `i` to `i + 1`.
fn migrations() -> [String; VERSION as usize] {
    [
        VERSION_1.to_owned(),
        version_2(),
        VERSION_3.to_owned(),
        VERSION_4.to_owned(),
        VERSION_5.to_owned(),
        [VERSION_6, EVENT_TRIGGERS, VERSION_6_TRIGGERS].concat(),
        [VERSION_7, EVENT_TRIGGERS].concat(),
        VERSION_8.to_owned(),
    ]
}

/// How a batch of steps is decided, as it is now: `petstore_step_state`,
/// `petstore_steps_state` and `petstore_steps` (their first bodies came
/// with version 5; a database at 5 or 6 holds those until this replaces
/// them). What version 7 changed: the plan keys every lookup at any table
/// size (no hash or merge join, which a plan cached on a nearly empty
/// orders table kept using as it grew); the usual batch reads its state
/// once (into an array of `petstore_step_state`) and looks up the order a
/// step names only for a complete or a cancel; and it appends its events
/// itself in one go (each step's order's, then its pet's) while the
/// triggers of its three statements stand aside (`petstore.events_written`,
/// a setting local to the transaction, `on` only around those
/// statements). Every other writer's events are still the triggers'. The
/// same signatures: a replica of version 6 still running calls the new
/// function.
///
/// `petstore_steps` decides a batch of steps, one per element of its
/// arrays, in order: `kinds[i]` is `place`, `complete`, `cancel`, or the
/// pet transitions `reserve`, `release`, `sell` (doors to the same
/// orders); `targets[i]` the order or the pet; `actors[i]` and
/// `sees_all[i]` who asks; `holds[i]` a place's hold in seconds; a keyed
/// step has `keys[i]`, claimed first as `petstore_transition_keyed`
/// claims (an unkeyed one a NULL key). Each row answers one step:
/// `outcome` is `order` or `pet` (made), `kept` (the key's claim lost:
/// the `kept_` columns hold the holder's answer, the `order_` ones the
/// order it names), or why not: `pet_missing`,
/// `order_missing`, `pet_conflict` (`pet_status`), `order_conflict`
/// (`order_status`), `held` (another key's order, `order_id`).
const VERSION_7: &str = r#"
CREATE TYPE petstore_step_state AS (n integer, kind text, target bigint, named_id bigint, named_pet bigint,
               named_status text, named_by text, named_placed timestamptz,
               named_expires timestamptz, pet bigint, pet_status text, pet_name text,
               pet_category bigint, open_id bigint, open_by text, open_placed timestamptz,
               open_expires timestamptz);
DROP FUNCTION IF EXISTS petstore_steps_state(text[], bigint[]);
-- What a batch of steps reads, one row per step in its order: the order
-- a complete or cancel names, the pet the step moves, and that pet's
-- placed order.
CREATE FUNCTION petstore_steps_state(kinds text[], targets bigint[])
RETURNS SETOF petstore_step_state
LANGUAGE sql STABLE AS $$
    SELECT i.n::integer, i.kind, i.target, o.id, o.pet_id, o.status, o.placed_by, o.placed_at,
           o.expires_at, p.id, p.status, p.name, p.category_id, op.id, op.placed_by,
           op.placed_at, op.expires_at
    FROM unnest(kinds, targets) WITH ORDINALITY AS i(kind, target, n)
    LEFT JOIN petstore_orders o
        ON o.id = CASE WHEN i.kind IN ('complete', 'cancel') THEN i.target END
    LEFT JOIN petstore_pets p
        ON p.id = CASE WHEN i.kind IN ('complete', 'cancel') THEN o.pet_id ELSE i.target END
    LEFT JOIN petstore_orders op ON op.pet_id = p.id AND op.status = 'placed'
    ORDER BY i.n
$$;

CREATE OR REPLACE FUNCTION petstore_steps(
    kinds text[], targets bigint[], actors text[], sees_all boolean[], holds int4[],
    scopes text[], keys text[], fps bytea[], ats timestamptz[], keep_secs int8)
RETURNS TABLE (item integer, outcome text, change bigint,
               order_id bigint, order_pet bigint, order_status text, order_by text,
               order_placed bigint, order_expires bigint, order_closed bigint,
               pet_name text, pet_category bigint, pet_status text,
               kept_fingerprint bytea, kept_answer smallint, kept_pet bigint, kept_name text,
               kept_category bigint, kept_status text, kept_transition text,
               kept_order_status text, lapsed boolean)
LANGUAGE plpgsql AS $$
DECLARE
    base bigint;
    last bigint;
    order_base bigint;
    next_order bigint;
    at timestamptz;
    k text;
    pet bigint;
    to_status text;
    o petstore_orders;
    open_order petstore_orders;
    current_status text;
    r petstore_step_state;
    states petstore_step_state[];
    ev_kinds text[] := '{}'; ev_subjects bigint[] := '{}'; ev_statuses text[] := '{}';
    ev_changes bigint[] := '{}'; ev_ats timestamptz[] := '{}';
    closing text;
    new_ids bigint[] := '{}'; new_pets bigint[] := '{}'; new_status text[] := '{}';
    new_by text[] := '{}'; new_expires timestamptz[] := '{}'; new_changes bigint[] := '{}';
    closed_ids bigint[] := '{}'; closed_status text[] := '{}'; closed_changes bigint[] := '{}';
    moved_ids bigint[] := '{}'; moved_status text[] := '{}'; moved_changes bigint[] := '{}';
BEGIN
    -- The change counter first, as every status writer; then the order
    -- counter. The time once both are held: steps commit in the order of
    -- their times.
    SELECT c.last_change INTO base FROM petstore_changes c FOR UPDATE;
    SELECT c.last_id INTO order_base FROM petstore_order_counter c FOR UPDATE;
    last := base;
    next_order := order_base;
    at := date_trunc('second', clock_timestamp());
    -- The usual batch, set-based: no key, no pet moved by two of its
    -- steps, no hold to lapse first. Its pets and orders are read in one
    -- query, decided in memory in order, and written in one statement
    -- each, its events in one append; any other batch takes the loop
    -- below, a few statements a step.
    IF NOT EXISTS (SELECT 1 FROM unnest(keys) AS u(key) WHERE u.key IS NOT NULL) THEN
        states := ARRAY(SELECT s FROM petstore_steps_state(kinds, targets) s);
    END IF;
    IF states IS NOT NULL
       AND (SELECT count(s.pet) = count(DISTINCT s.pet)
                   AND NOT coalesce(bool_or(s.named_status = 'placed'
                                            AND s.named_expires <= at), false)
                   AND NOT coalesce(bool_or(s.open_expires <= at), false)
            FROM unnest(states) s) THEN
        FOREACH r IN ARRAY states LOOP
            item := r.n;
            outcome := NULL; change := NULL; order_id := NULL; order_pet := NULL;
            order_status := NULL; order_by := NULL; order_placed := NULL;
            order_expires := NULL; order_closed := NULL; pet_name := r.pet_name;
            pet_category := r.pet_category; pet_status := NULL; kept_fingerprint := NULL;
            kept_answer := NULL; kept_pet := NULL; kept_name := NULL; kept_category := NULL;
            kept_status := NULL; kept_transition := NULL; kept_order_status := NULL;
            lapsed := false; to_status := NULL; closing := NULL;
            k := r.kind;
            IF k IN ('complete', 'cancel') THEN
                IF r.named_id IS NULL OR NOT sees_all[r.n] AND r.named_by <> actors[r.n] THEN
                    outcome := 'order_missing';
                ELSIF r.named_status <> 'placed' THEN
                    outcome := 'order_conflict';
                    order_id := r.named_id;
                    order_status := r.named_status;
                ELSE
                    outcome := 'order';
                    closing := CASE k WHEN 'complete' THEN 'completed' ELSE 'cancelled' END;
                    to_status := CASE k WHEN 'complete' THEN 'sold' ELSE 'available' END;
                    order_id := r.named_id; order_by := r.named_by;
                    order_placed := extract(epoch FROM r.named_placed)::bigint;
                    order_expires := extract(epoch FROM r.named_expires)::bigint;
                END IF;
            ELSIF r.pet IS NULL THEN
                outcome := 'pet_missing';
            ELSIF NOT r.pet_status = ANY (CASE k WHEN 'release' THEN ARRAY['pending']
                                                 WHEN 'sell' THEN ARRAY['available', 'pending']
                                                 ELSE ARRAY['available'] END) THEN
                outcome := 'pet_conflict';
                pet_status := r.pet_status;
            ELSIF r.open_id IS NOT NULL AND NOT sees_all[r.n] AND r.open_by <> actors[r.n] THEN
                outcome := 'held';
                order_id := r.open_id;
            ELSE
                outcome := CASE k WHEN 'place' THEN 'order' ELSE 'pet' END;
                IF k IN ('place', 'reserve') OR r.open_id IS NULL AND k = 'sell' THEN
                    -- A new order: placed, or a sale placed and completed at once.
                    next_order := next_order + 1;
                    to_status := CASE k WHEN 'sell' THEN 'sold' ELSE 'pending' END;
                    order_id := next_order; order_by := actors[r.n];
                    order_placed := extract(epoch FROM at)::bigint;
                    order_expires := CASE k WHEN 'sell' THEN order_placed
                                            ELSE order_placed + holds[r.n] END;
                    new_ids := new_ids || next_order; new_pets := new_pets || r.pet;
                    new_status := new_status || CASE k WHEN 'sell' THEN 'completed'
                                                       ELSE 'placed' END;
                    new_by := new_by || actors[r.n];
                    new_expires := new_expires || to_timestamp(order_expires);
                    new_changes := new_changes || (last + 1);
                    IF k = 'sell' THEN
                        order_closed := order_placed;
                        order_status := 'completed';
                    ELSE
                        order_status := 'placed';
                    END IF;
                ELSIF r.open_id IS NOT NULL THEN
                    closing := CASE k WHEN 'sell' THEN 'completed' ELSE 'cancelled' END;
                    to_status := CASE k WHEN 'sell' THEN 'sold' ELSE 'available' END;
                    order_id := r.open_id; order_by := r.open_by;
                    order_placed := extract(epoch FROM r.open_placed)::bigint;
                    order_expires := extract(epoch FROM r.open_expires)::bigint;
                ELSE
                    -- A pet created pending has no order: the transition alone.
                    to_status := 'available';
                END IF;
            END IF;
            IF to_status IS NOT NULL THEN
                last := last + 1;
                change := last;
                pet_status := to_status;
                moved_ids := moved_ids || r.pet; moved_status := moved_status || to_status;
                moved_changes := moved_changes || last;
                IF order_id IS NOT NULL THEN
                    order_pet := r.pet;
                END IF;
                IF closing IS NOT NULL THEN
                    order_status := closing;
                    order_closed := extract(epoch FROM at)::bigint;
                    closed_ids := closed_ids || order_id; closed_status := closed_status || closing;
                    closed_changes := closed_changes || last;
                END IF;
                -- Its events as the triggers would date them: its order's
                -- first, then its pet's.
                IF order_id IS NOT NULL THEN
                    ev_kinds := ev_kinds || ('order.' || order_status);
                    ev_subjects := ev_subjects || order_id;
                    ev_statuses := ev_statuses || order_status;
                    ev_changes := ev_changes || last; ev_ats := ev_ats || at;
                END IF;
                ev_kinds := ev_kinds || 'pet.status_changed'::text;
                ev_subjects := ev_subjects || r.pet; ev_statuses := ev_statuses || to_status;
                ev_changes := ev_changes || last; ev_ats := ev_ats || clock_timestamp();
            END IF;
            IF outcome NOT IN ('pet', 'order') THEN
                pet_name := NULL; pet_category := NULL;
            END IF;
            RETURN NEXT;
        END LOOP;
        -- The triggers stand aside: the events are appended below.
        PERFORM set_config('petstore.events_written', 'on', true);
        INSERT INTO petstore_orders
            (id, pet_id, status, placed_by, placed_at, expires_at, closed_at, last_change)
        SELECT w.id, w.pet, w.status, w.by, at, w.expires,
               CASE w.status WHEN 'placed' THEN NULL ELSE at END, w.change
        FROM unnest(new_ids, new_pets, new_status, new_by, new_expires, new_changes)
            AS w(id, pet, status, by, expires, change);
        UPDATE petstore_orders closed SET status = w.status, closed_at = at,
                                          last_change = w.change
        FROM unnest(closed_ids, closed_status, closed_changes) AS w(id, status, change)
        WHERE closed.id = w.id;
        UPDATE petstore_pets p
        SET status = w.status, last_change = w.change,
            json = regexp_replace(p.json, '"status":"[a-z]+"}$', '"status":"' || w.status || '"}')
        FROM unnest(moved_ids, moved_status, moved_changes) AS w(id, status, change)
        WHERE p.id = w.id;
        PERFORM set_config('petstore.events_written', 'off', true);
        PERFORM petstore_append_events(cardinality(ev_subjects), ev_kinds, ev_subjects,
                                       ev_statuses, ev_changes, ev_ats);
    ELSE
    FOR i IN 1 .. coalesce(array_length(kinds, 1), 0) LOOP
        item := i;
        outcome := NULL; change := NULL; order_id := NULL; order_pet := NULL;
        order_status := NULL; order_by := NULL; order_placed := NULL; order_expires := NULL;
        order_closed := NULL; pet_name := NULL; pet_category := NULL; pet_status := NULL;
        kept_fingerprint := NULL; kept_answer := NULL; kept_pet := NULL; kept_name := NULL;
        kept_category := NULL; kept_status := NULL; kept_transition := NULL;
        kept_order_status := NULL; lapsed := false;
        o := NULL; pet := NULL; to_status := NULL;
        k := kinds[i];
        IF keys[i] IS NOT NULL THEN
            INSERT INTO petstore_idempotency AS kept (scope, key, fingerprint, created_at, answer)
            VALUES (scopes[i], keys[i], fps[i], ats[i], 0)
            ON CONFLICT (scope, key) DO UPDATE
                SET fingerprint = EXCLUDED.fingerprint, created_at = EXCLUDED.created_at,
                    answer = 0, pet_id = NULL, name = NULL, category_id = NULL, status = NULL,
                    transition = NULL, order_id = NULL, order_status = NULL
                WHERE kept.created_at <= EXCLUDED.created_at - make_interval(secs => keep_secs);
            IF NOT FOUND THEN
                -- The holder's kept row, committed (the claim waited for
                -- it), and the order a kept order's answer names.
                outcome := 'kept';
                SELECT kept.fingerprint, kept.answer, kept.pet_id, kept.name, kept.category_id,
                       kept.status, kept.transition, kept.order_status, kept.order_id
                INTO kept_fingerprint, kept_answer, kept_pet, kept_name, kept_category,
                     kept_status, kept_transition, kept_order_status, order_id
                FROM petstore_idempotency kept
                WHERE kept.scope = scopes[i] AND kept.key = keys[i];
                SELECT * INTO o FROM petstore_orders WHERE id = order_id;
                IF o.id IS NOT NULL THEN
                    order_pet := o.pet_id; order_status := o.status; order_by := o.placed_by;
                    order_placed := extract(epoch FROM o.placed_at)::bigint;
                    order_expires := extract(epoch FROM o.expires_at)::bigint;
                    order_closed := extract(epoch FROM o.closed_at)::bigint;
                END IF;
                RETURN NEXT;
                CONTINUE;
            END IF;
        END IF;
        IF k IN ('complete', 'cancel') THEN
            SELECT * INTO o FROM petstore_orders WHERE id = targets[i];
            IF o.id IS NULL OR NOT sees_all[i] AND o.placed_by <> actors[i] THEN
                outcome := 'order_missing';
            ELSE
                IF o.status = 'placed' AND o.expires_at <= at THEN
                    -- Past its hold: it lapses first, as if the timer ran.
                    last := last + 1;
                    lapsed := true;
                    SELECT * INTO o FROM petstore_close_order(o.id, 'expired', at, last);
                END IF;
                IF o.status <> 'placed' THEN
                    outcome := 'order_conflict';
                    order_id := o.id;
                    order_status := o.status;
                ELSE
                    outcome := 'order';
                    pet := o.pet_id;
                    to_status := CASE k WHEN 'complete' THEN 'sold' ELSE 'available' END;
                    last := last + 1;
                    UPDATE petstore_orders
                    SET status = CASE k WHEN 'complete' THEN 'completed' ELSE 'cancelled' END,
                        closed_at = at, last_change = last
                    WHERE id = o.id
                    RETURNING * INTO o;
                END IF;
            END IF;
        ELSE
            -- A pet's step: the pet and its placed order, whose lapsed
            -- hold lapses first.
            pet := targets[i];
            SELECT p.status INTO current_status FROM petstore_pets p WHERE p.id = pet;
            SELECT * INTO open_order FROM petstore_orders
            WHERE petstore_orders.pet_id = pet AND status = 'placed';
            IF open_order.id IS NOT NULL AND open_order.expires_at <= at THEN
                last := last + 1;
                lapsed := true;
                PERFORM petstore_close_order(open_order.id, 'expired', at, last);
                open_order := NULL;
                current_status := 'available';
            END IF;
            IF current_status IS NULL THEN
                outcome := 'pet_missing';
            ELSIF NOT current_status = ANY (CASE k WHEN 'release' THEN ARRAY['pending']
                                                  WHEN 'sell' THEN ARRAY['available', 'pending']
                                                  ELSE ARRAY['available'] END) THEN
                outcome := 'pet_conflict';
                pet_status := current_status;
            ELSIF open_order.id IS NOT NULL AND k <> 'reserve' AND k <> 'place'
                  AND NOT sees_all[i] AND open_order.placed_by <> actors[i] THEN
                outcome := 'held';
                order_id := open_order.id;
            ELSE
                outcome := CASE k WHEN 'place' THEN 'order' ELSE 'pet' END;
                last := last + 1;
                IF k IN ('place', 'reserve') THEN
                    to_status := 'pending';
                    next_order := next_order + 1;
                    INSERT INTO petstore_orders
                        (id, pet_id, status, placed_by, placed_at, expires_at, last_change)
                    VALUES (next_order, pet, 'placed', actors[i], at,
                            at + make_interval(secs => holds[i]), last)
                    RETURNING * INTO o;
                ELSIF open_order.id IS NOT NULL THEN
                    to_status := CASE k WHEN 'sell' THEN 'sold' ELSE 'available' END;
                    UPDATE petstore_orders
                    SET status = CASE k WHEN 'sell' THEN 'completed' ELSE 'cancelled' END,
                        closed_at = at, last_change = last
                    WHERE id = open_order.id
                    RETURNING * INTO o;
                ELSIF k = 'release' THEN
                    -- A pet created pending has no order: the transition alone.
                    to_status := 'available';
                ELSE
                    -- A sale of a pet no order holds: placed and completed at once.
                    to_status := 'sold';
                    next_order := next_order + 1;
                    INSERT INTO petstore_orders (id, pet_id, status, placed_by, placed_at,
                                                 expires_at, closed_at, last_change)
                    VALUES (next_order, pet, 'completed', actors[i], at, at, at, last)
                    RETURNING * INTO o;
                END IF;
            END IF;
        END IF;
        IF to_status IS NOT NULL THEN
            -- The step's change: its pet's, as `petstore_transition` writes it.
            UPDATE petstore_pets p
            SET status = to_status, last_change = last,
                json = regexp_replace(p.json, '"status":"[a-z]+"}$', '"status":"' || to_status || '"}')
            WHERE p.id = pet
            RETURNING p.name, p.category_id, p.status INTO pet_name, pet_category, pet_status;
            change := last;
        ELSIF lapsed THEN
            -- Refused after the lapse it made: that change is its number.
            change := last;
        END IF;
        IF o.id IS NOT NULL AND outcome IN ('order', 'pet') THEN
            order_id := o.id; order_pet := o.pet_id; order_status := o.status;
            order_by := o.placed_by; order_placed := extract(epoch FROM o.placed_at)::bigint;
            order_expires := extract(epoch FROM o.expires_at)::bigint;
            order_closed := extract(epoch FROM o.closed_at)::bigint;
        END IF;
        IF keys[i] IS NOT NULL THEN
            IF outcome IN ('pet_missing', 'order_missing', 'held') THEN
                -- Nothing is kept: the client may retry.
                DELETE FROM petstore_idempotency kept
                WHERE kept.scope = scopes[i] AND kept.key = keys[i];
            ELSE
                UPDATE petstore_idempotency kept
                SET answer = CASE outcome WHEN 'pet' THEN 200 WHEN 'pet_conflict' THEN 409
                                  WHEN 'order_conflict' THEN 1409
                                  ELSE CASE k WHEN 'place' THEN 1201 ELSE 1200 END END,
                    pet_id = CASE WHEN outcome IN ('pet', 'pet_conflict') THEN targets[i] END,
                    name = CASE WHEN outcome = 'pet' THEN pet_name END,
                    category_id = CASE WHEN outcome = 'pet' THEN pet_category END,
                    status = CASE WHEN outcome IN ('pet', 'pet_conflict') THEN pet_status END,
                    transition = CASE WHEN outcome IN ('pet', 'pet_conflict')
                                      THEN CASE k WHEN 'place' THEN 'reserve' ELSE k END END,
                    order_id = CASE WHEN outcome IN ('order', 'order_conflict')
                                    THEN petstore_steps.order_id END,
                    order_status = CASE WHEN outcome IN ('order', 'order_conflict')
                                        THEN petstore_steps.order_status END
                WHERE kept.scope = scopes[i] AND kept.key = keys[i];
            END IF;
        END IF;
        RETURN NEXT;
    END LOOP;
    END IF;
    IF next_order > order_base THEN
        UPDATE petstore_order_counter SET last_id = next_order;
    END IF;
    IF last > base THEN
        UPDATE petstore_changes SET last_change = last;
        PERFORM pg_notify('petstore_pets', 'change ' || last);
    END IF;
END
$$;

-- Every join of petstore_steps is a batch (tens of rows) to a table by
-- its key, so a nested loop over the key is the plan at any size. A plan
-- cached while the orders were few (a new database, before its first
-- ANALYZE) hashed the whole table on every call as it grew.
ALTER FUNCTION petstore_steps SET enable_hashjoin = off SET enable_mergejoin = off;
"#;

/// The indexes no query of the server reads, dropped: every status change
/// paid for them, and a batch of steps' writes most (the figures:
/// docs/bench/orders-runs.md). A pet's new row is never a HOT update
/// (`last_change` is indexed), so each index on the pets takes an entry
/// per change: the partial index per status (version 1) served readers
/// filtering by status, and the server never asks PostgreSQL for a list
/// (its lists come from its read copy). Each event took an entry in
/// `petstore_events_at` (version 6), which the feed's start and pruning
/// never used: both find the first kept event by walking the primary key
/// (times are not in id order).
const VERSION_8: &str = r#"
DROP INDEX IF EXISTS petstore_pets_available;
DROP INDEX IF EXISTS petstore_pets_pending;
DROP INDEX IF EXISTS petstore_pets_sold;
DROP INDEX IF EXISTS petstore_events_at;
"#;

/// The functions of the event triggers (version 6), as they are now:
/// each returns at once while `petstore.events_written` is `on` (a
/// usual batch of steps appends its own events, version 7).
const EVENT_TRIGGERS: &str = r#"
CREATE OR REPLACE FUNCTION petstore_pets_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    kinds text[]; subjects bigint[]; statuses text[]; changes bigint[]; ats timestamptz[];
BEGIN
    IF current_setting('petstore.events_written', true) = 'on' THEN
        RETURN NULL;
    END IF;
    SELECT array_agg('pet.status_changed'::text ORDER BY n.last_change, n.id),
           array_agg(n.id ORDER BY n.last_change, n.id),
           array_agg(n.status ORDER BY n.last_change, n.id),
           array_agg(n.last_change ORDER BY n.last_change, n.id),
           array_agg(clock_timestamp() ORDER BY n.last_change, n.id)
        INTO kinds, subjects, statuses, changes, ats
        FROM after_rows n JOIN before_rows o ON o.id = n.id
        WHERE o.status IS DISTINCT FROM n.status;
    PERFORM petstore_append_events(coalesce(cardinality(subjects), 0), kinds, subjects, statuses,
                                   changes, ats);
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION petstore_orders_placed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    kinds text[]; subjects bigint[]; statuses text[]; changes bigint[]; ats timestamptz[];
BEGIN
    IF current_setting('petstore.events_written', true) = 'on' THEN
        RETURN NULL;
    END IF;
    SELECT array_agg('order.' || status ORDER BY id), array_agg(id ORDER BY id),
           array_agg(status ORDER BY id), array_agg(last_change ORDER BY id),
           array_agg(coalesce(closed_at, placed_at) ORDER BY id)
        INTO kinds, subjects, statuses, changes, ats FROM placed;
    PERFORM petstore_append_events(coalesce(cardinality(subjects), 0), kinds, subjects, statuses,
                                   changes, ats);
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION petstore_orders_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    kinds text[]; subjects bigint[]; statuses text[]; changes bigint[]; ats timestamptz[];
BEGIN
    IF current_setting('petstore.events_written', true) = 'on' THEN
        RETURN NULL;
    END IF;
    SELECT array_agg('order.' || n.status ORDER BY n.last_change, n.id),
           array_agg(n.id ORDER BY n.last_change, n.id),
           array_agg(n.status ORDER BY n.last_change, n.id),
           array_agg(n.last_change ORDER BY n.last_change, n.id),
           array_agg(coalesce(n.closed_at, n.placed_at) ORDER BY n.last_change, n.id)
        INTO kinds, subjects, statuses, changes, ats
        FROM after_rows n JOIN before_rows o ON o.id = n.id
        WHERE o.status IS DISTINCT FROM n.status;
    PERFORM petstore_append_events(coalesce(cardinality(subjects), 0), kinds, subjects, statuses,
                                   changes, ats);
    RETURN NULL;
END $$;
"#;

/// The feed of events (beta): one row per change, numbered by a counter
/// row of its own (gapless, and in commit order: a writer holds its lock
/// until it commits, as the id and change counters'), written by
/// statement triggers on the pets and the orders, so every writer (a
/// create, a keyed one, a step, an expiry) writes its events in its own
/// transaction without knowing of them. Statement triggers with
/// transition tables: one counter update and one insert per statement,
/// whatever the rows. In one statement, rows go in id order (new ones)
/// or change order (changed ones); a step writes its order before its
/// pet, so its order's event comes first. A database migrated from an
/// earlier version starts its feed empty, at 0.
const VERSION_6: &str = r#"
CREATE TABLE petstore_event_counter (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    last_id bigint NOT NULL CHECK (last_id >= 0)
);
INSERT INTO petstore_event_counter (last_id) VALUES (0);
CREATE TABLE petstore_events (
    id bigint PRIMARY KEY CHECK (id >= 1),
    type text NOT NULL CHECK (type IN ('pet.created', 'pet.status_changed', 'order.placed',
                                      'order.completed', 'order.cancelled', 'order.expired')),
    subject bigint NOT NULL CHECK (subject >= 1),
    status text NOT NULL,
    -- The change number of the row the event is of (0 for a new pet, whose
    -- id places it): a replica applies an event once its copy holds it.
    change bigint NOT NULL CHECK (change >= 0),
    at timestamptz NOT NULL
);
CREATE INDEX petstore_events_at ON petstore_events (at);

-- Appends the rows of `events` (type, subject, status, at, in their
-- order) under the event counter's lock.
CREATE FUNCTION petstore_append_events(n bigint, kinds text[], subjects bigint[],
                                       statuses text[], changes bigint[], ats timestamptz[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    base bigint;
BEGIN
    IF n = 0 THEN
        RETURN;
    END IF;
    UPDATE petstore_event_counter SET last_id = last_id + n RETURNING last_id - n INTO base;
    INSERT INTO petstore_events (id, type, subject, status, change, at)
        SELECT base + e.i, e.kind, e.subject, e.status, e.change, e.at
        FROM unnest(kinds, subjects, statuses, changes, ats)
            WITH ORDINALITY AS e(kind, subject, status, change, at, i);
END $$;

CREATE FUNCTION petstore_pets_created() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    kinds text[]; subjects bigint[]; statuses text[]; changes bigint[]; ats timestamptz[];
BEGIN
    SELECT array_agg('pet.created'::text ORDER BY id), array_agg(id ORDER BY id),
           array_agg(status ORDER BY id), array_agg(0::int8 ORDER BY id),
           array_agg(clock_timestamp() ORDER BY id)
        INTO kinds, subjects, statuses, changes, ats FROM created;
    PERFORM petstore_append_events(coalesce(cardinality(subjects), 0), kinds, subjects, statuses,
                                   changes, ats);
    RETURN NULL;
END $$;
CREATE TRIGGER petstore_pets_created AFTER INSERT ON petstore_pets
    REFERENCING NEW TABLE AS created FOR EACH STATEMENT EXECUTE FUNCTION petstore_pets_created();
"#;

/// The other three triggers of version 6, once their functions
/// ([`EVENT_TRIGGERS`]) are there.
const VERSION_6_TRIGGERS: &str = r#"
CREATE TRIGGER petstore_pets_changed AFTER UPDATE ON petstore_pets
    REFERENCING OLD TABLE AS before_rows NEW TABLE AS after_rows
    FOR EACH STATEMENT EXECUTE FUNCTION petstore_pets_changed();

CREATE TRIGGER petstore_orders_placed AFTER INSERT ON petstore_orders
    REFERENCING NEW TABLE AS placed FOR EACH STATEMENT EXECUTE FUNCTION petstore_orders_placed();

CREATE TRIGGER petstore_orders_changed AFTER UPDATE ON petstore_orders
    REFERENCING OLD TABLE AS before_rows NEW TABLE AS after_rows
    FOR EACH STATEMENT EXECUTE FUNCTION petstore_orders_changed();
"#;

/// The id counter, the pets with the contract's CHECKs, a partial index
/// per status. A counter row, not a sequence: creates then commit in id
/// order with no gap (a sequence's aborts leave holes, and a lower id can
/// commit after a higher one). An index per status, not one on
/// `(status, id)`, which lets the planner walk the primary key and filter
/// instead; version 8 drops them ([`VERSION_8`]).
const VERSION_1: &str = r#"
CREATE TABLE petstore_counter (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    last_id bigint NOT NULL CHECK (last_id >= 0)
);
INSERT INTO petstore_counter (last_id) VALUES (0);
CREATE TABLE petstore_pets (
    id bigint PRIMARY KEY CHECK (id >= 1),
    name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
    category_id bigint NOT NULL CHECK (category_id >= 1),
    status text NOT NULL CHECK (status IN ('available', 'pending', 'sold')),
    json text NOT NULL CHECK (starts_with(json, '{"id":' || id || ','))
);
CREATE INDEX petstore_pets_available ON petstore_pets (id) WHERE status = 'available';
CREATE INDEX petstore_pets_pending ON petstore_pets (id) WHERE status = 'pending';
CREATE INDEX petstore_pets_sold ON petstore_pets (id) WHERE status = 'sold';
"#;

/// Status changes, numbered in commit order by a counter row of their own
/// (so that transitions and creates do not wait for each other), and
/// `petstore_transition`: a function, so that a batch is one statement
/// and one round trip whatever its size (docs/replicas.md, "PostgreSQL's
/// schema"). `froms[i]` is the statuses transition `i` needs,
/// comma-separated.
const VERSION_3: &str = r#"
CREATE TABLE petstore_changes (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    last_change bigint NOT NULL CHECK (last_change >= 0)
);
INSERT INTO petstore_changes (last_change) VALUES (0);
ALTER TABLE petstore_pets
    ADD COLUMN last_change bigint NOT NULL DEFAULT 0 CHECK (last_change >= 0);
CREATE INDEX petstore_pets_changed ON petstore_pets (last_change) WHERE last_change > 0;
CREATE FUNCTION petstore_transition(ids bigint[], tos text[], froms text[])
RETURNS TABLE (item integer, change bigint, pet_name text, pet_category bigint, pet_status text)
LANGUAGE plpgsql AS $$
DECLARE
    base bigint;
    last bigint;
BEGIN
    -- The counter first: every status writer waits here, so the rows
    -- read below are the latest and the numbers commit in order.
    SELECT c.last_change INTO base FROM petstore_changes c FOR UPDATE;
    last := base;
    FOR i IN 1 .. coalesce(array_length(ids, 1), 0) LOOP
        item := i;
        UPDATE petstore_pets p
        SET status = tos[i],
            last_change = last + 1,
            json = regexp_replace(p.json, '"status":"[a-z]+"}$', '"status":"' || tos[i] || '"}')
        WHERE p.id = ids[i] AND p.status = ANY (string_to_array(froms[i], ','))
        RETURNING p.last_change, p.name, p.category_id, p.status
        INTO change, pet_name, pet_category, pet_status;
        IF FOUND THEN
            last := last + 1;
        ELSE
            change := NULL;
            pet_name := NULL;
            pet_category := NULL;
            SELECT p.status INTO pet_status FROM petstore_pets p WHERE p.id = ids[i];
        END IF;
        RETURN NEXT;
    END LOOP;
    IF last > base THEN
        UPDATE petstore_changes SET last_change = last;
        PERFORM pg_notify('petstore_pets', 'change ' || last);
    END IF;
END
$$;
"#;

/// Kept answers of keyed POSTs (docs/replicas.md, "PostgreSQL's schema",
/// version 4). Each function
/// takes the batch as arrays, one element per item, and `keep_secs`, the
/// retention: a row whose `created_at` is that long before the new
/// request's is expired, and the key is free again.
const VERSION_4: &str = r#"
CREATE TABLE petstore_idempotency (
    scope text NOT NULL CHECK (octet_length(scope) BETWEEN 1 AND 256),
    -- The length apart from the characters: a bounded repetition
    -- (`{1,255}`) costs PostgreSQL's regular expressions about 100 times
    -- more per row.
    key text NOT NULL CHECK (octet_length(key) BETWEEN 1 AND 255 AND key ~ '^[!-~]+$'),
    fingerprint bytea NOT NULL CHECK (octet_length(fingerprint) = 32),
    created_at timestamptz NOT NULL,
    answer smallint NOT NULL CHECK (answer IN (0, 200, 201, 409)),
    pet_id bigint CHECK (pet_id >= 1),
    name text,
    category_id bigint,
    status text CHECK (status IN ('available', 'pending', 'sold')),
    transition text CHECK (transition IN ('reserve', 'release', 'sell')),
    PRIMARY KEY (scope, key),
    CHECK (answer = 0 OR pet_id IS NOT NULL AND status IS NOT NULL),
    CHECK (answer NOT IN (200, 201) OR name IS NOT NULL AND category_id IS NOT NULL),
    CHECK (answer NOT IN (200, 409) OR transition IS NOT NULL)
);
CREATE INDEX petstore_idempotency_created ON petstore_idempotency (created_at);

CREATE FUNCTION petstore_create_keyed(
    scopes text[], keys text[], fps bytea[], ats timestamptz[],
    names text[], cats int8[], statuses text[], tails text[], keep_secs int8)
RETURNS TABLE (item bigint, new_id bigint, kept_fingerprint bytea, kept_answer smallint,
               kept_pet bigint, kept_name text, kept_category bigint, kept_status text,
               kept_transition text)
LANGUAGE plpgsql AS $$
DECLARE
    base bigint;
    claimed bigint[];
    added bigint;
BEGIN
    -- The counter first, as every create: the creates of all replicas
    -- commit one after the other, and ids stay in commit order.
    SELECT c.last_id INTO base FROM petstore_counter c FOR UPDATE;
    -- Claim every key, item n with the id base + n. A conflicting row of
    -- a transaction still running (a keyed transition with the same
    -- key) is waited for, then seen. RETURNING gives back n.
    WITH c AS (
        INSERT INTO petstore_idempotency AS k
            (scope, key, fingerprint, created_at, answer, pet_id, name, category_id, status)
        SELECT p.scope, p.key, p.fp, p.at, 201, base + p.n, names[p.n], cats[p.n], statuses[p.n]
        FROM unnest(scopes, keys, fps, ats) WITH ORDINALITY AS p(scope, key, fp, at, n)
        ORDER BY p.n
        ON CONFLICT (scope, key) DO UPDATE
            SET fingerprint = EXCLUDED.fingerprint, created_at = EXCLUDED.created_at,
                answer = 201, pet_id = EXCLUDED.pet_id, name = EXCLUDED.name,
                category_id = EXCLUDED.category_id, status = EXCLUDED.status, transition = NULL
            WHERE k.created_at <= EXCLUDED.created_at - make_interval(secs => keep_secs)
        RETURNING k.pet_id - base AS n
    )
    SELECT coalesce(array_agg(c.n ORDER BY c.n), '{}') INTO claimed FROM c;
    added := coalesce(array_length(claimed, 1), 0);
    -- Some lost (rare): the claimed ones take the next ids in the
    -- batch's order instead, so that ids keep no gap.
    IF added < coalesce(array_length(keys, 1), 0) THEN
        UPDATE petstore_idempotency k SET pet_id = base + w.r
        FROM unnest(claimed) WITH ORDINALITY AS w(n, r)
        WHERE k.scope = scopes[w.n] AND k.key = keys[w.n] AND w.r <> w.n;
    END IF;
    INSERT INTO petstore_pets (id, name, category_id, status, json)
    SELECT base + w.r, names[w.n], cats[w.n], statuses[w.n], '{"id":' || (base + w.r) || tails[w.n]
    FROM unnest(claimed) WITH ORDINALITY AS w(n, r);
    IF added > 0 THEN
        UPDATE petstore_counter SET last_id = base + added;
        PERFORM pg_notify('petstore_pets', (base + added)::text);
    END IF;
    -- Per item: its id, or the row it lost to (committed: this
    -- statement's snapshot is taken after the claim's wait).
    RETURN QUERY
    SELECT p.n, base + w.r, k.fingerprint, k.answer, k.pet_id, k.name, k.category_id,
           k.status, k.transition
    FROM unnest(scopes, keys) WITH ORDINALITY AS p(scope, key, n)
    LEFT JOIN unnest(claimed) WITH ORDINALITY AS w(n, r) ON w.n = p.n
    LEFT JOIN petstore_idempotency k ON w.n IS NULL AND k.scope = p.scope AND k.key = p.key
    ORDER BY p.n;
END
$$;
-- Plans made for this call's table: a plan cached while the table was
-- small (a hash join over all its rows) made a batch about 8 times
-- slower once it held 50,000 keys.
ALTER FUNCTION petstore_create_keyed SET plan_cache_mode = force_custom_plan;

CREATE FUNCTION petstore_transition_keyed(
    ids bigint[], tos text[], froms text[], transitions text[],
    scopes text[], keys text[], fps bytea[], ats timestamptz[], keep_secs int8)
RETURNS TABLE (item integer, change bigint, pet_name text, pet_category bigint, pet_status text,
               won boolean, kept_fingerprint bytea, kept_answer smallint, kept_pet bigint,
               kept_name text, kept_category bigint, kept_status text, kept_transition text)
LANGUAGE plpgsql AS $$
DECLARE
    base bigint;
    last bigint;
BEGIN
    -- As petstore_transition: the change counter first.
    SELECT c.last_change INTO base FROM petstore_changes c FOR UPDATE;
    last := base;
    FOR i IN 1 .. coalesce(array_length(ids, 1), 0) LOOP
        item := i;
        change := NULL; pet_name := NULL; pet_category := NULL; pet_status := NULL;
        kept_fingerprint := NULL; kept_answer := NULL; kept_pet := NULL; kept_name := NULL;
        kept_category := NULL; kept_status := NULL; kept_transition := NULL;
        -- The claim: waits for a transaction holding the key, then sees it.
        INSERT INTO petstore_idempotency AS k (scope, key, fingerprint, created_at, answer)
        VALUES (scopes[i], keys[i], fps[i], ats[i], 0)
        ON CONFLICT (scope, key) DO UPDATE
            SET fingerprint = EXCLUDED.fingerprint, created_at = EXCLUDED.created_at, answer = 0,
                pet_id = NULL, name = NULL, category_id = NULL, status = NULL,
                transition = NULL
            WHERE k.created_at <= EXCLUDED.created_at - make_interval(secs => keep_secs);
        won := FOUND;
        IF NOT won THEN
            SELECT k.fingerprint, k.answer, k.pet_id, k.name, k.category_id, k.status,
                   k.transition
            INTO kept_fingerprint, kept_answer, kept_pet, kept_name, kept_category,
                 kept_status, kept_transition
            FROM petstore_idempotency k WHERE k.scope = scopes[i] AND k.key = keys[i];
            RETURN NEXT;
            CONTINUE;
        END IF;
        UPDATE petstore_pets p
        SET status = tos[i],
            last_change = last + 1,
            json = regexp_replace(p.json, '"status":"[a-z]+"}$', '"status":"' || tos[i] || '"}')
        WHERE p.id = ids[i] AND p.status = ANY (string_to_array(froms[i], ','))
        RETURNING p.last_change, p.name, p.category_id, p.status
        INTO change, pet_name, pet_category, pet_status;
        IF FOUND THEN
            last := last + 1;
            UPDATE petstore_idempotency k
            SET answer = 200, pet_id = ids[i], name = pet_name, category_id = pet_category,
                status = tos[i], transition = transitions[i]
            WHERE k.scope = scopes[i] AND k.key = keys[i];
        ELSE
            change := NULL;
            SELECT p.status INTO pet_status FROM petstore_pets p WHERE p.id = ids[i];
            IF pet_status IS NULL THEN
                -- No such pet: nothing is kept, the client may retry.
                DELETE FROM petstore_idempotency k WHERE k.scope = scopes[i] AND k.key = keys[i];
            ELSE
                UPDATE petstore_idempotency k
                SET answer = 409, pet_id = ids[i], status = pet_status,
                    transition = transitions[i]
                WHERE k.scope = scopes[i] AND k.key = keys[i];
            END IF;
        END IF;
        RETURN NEXT;
    END LOOP;
    IF last > base THEN
        UPDATE petstore_changes SET last_change = last;
        PERFORM pg_notify('petstore_pets', 'change ' || last);
    END IF;
END
$$;
ALTER FUNCTION petstore_transition_keyed SET plan_cache_mode = force_custom_plan;
"#;

/// The orders (docs/replicas.md, "PostgreSQL's schema", version 5).
///
/// Order ids come from a counter row of their own, as pet ids do, so
/// they have no gap; it is locked after the change counter, which every
/// step takes first. A pet has at most one placed order (a unique partial
/// index: two steps that both thought a pet free could not both commit).
/// An order's row and its pet's share the step's change number, so the
/// copies' tail brings both in commit order. Times are whole seconds of
/// PostgreSQL's clock (`clock_timestamp()` once the change counter is
/// locked): every replica judges a hold by the same clock.
///
/// Kept answers of orders take answer codes of their own: 1201 a placed
/// order, 1200 a closed one, 1409 an order's conflict; the order itself
/// is read from `petstore_orders` (a placed order's kept answer is the
/// order as placed; a closed one's is final).
const VERSION_5: &str = r#"
CREATE TABLE petstore_order_counter (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    last_id bigint NOT NULL CHECK (last_id >= 0)
);
INSERT INTO petstore_order_counter (last_id) VALUES (0);
CREATE TABLE petstore_orders (
    id bigint PRIMARY KEY CHECK (id >= 1),
    -- No foreign key: a step inserts an order only for a pet it read in
    -- the same transaction, under the change counter's lock, and pets are
    -- never deleted; the key's check would lock the pet's row once more
    -- per order, about a third of a place's time.
    pet_id bigint NOT NULL CHECK (pet_id >= 1),
    status text NOT NULL CHECK (status IN ('placed', 'completed', 'cancelled', 'expired')),
    placed_by text NOT NULL CHECK (octet_length(placed_by) BETWEEN 1 AND 256),
    placed_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL CHECK (expires_at >= placed_at),
    closed_at timestamptz CHECK (closed_at >= placed_at),
    last_change bigint NOT NULL CHECK (last_change >= 1),
    CHECK ((status = 'placed') = (closed_at IS NULL))
);
CREATE UNIQUE INDEX petstore_orders_open ON petstore_orders (pet_id) WHERE status = 'placed';
CREATE INDEX petstore_orders_due ON petstore_orders (expires_at) WHERE status = 'placed';
CREATE INDEX petstore_orders_changed ON petstore_orders (last_change);

ALTER TABLE petstore_idempotency
    DROP CONSTRAINT petstore_idempotency_answer_check,
    DROP CONSTRAINT petstore_idempotency_check,
    ADD COLUMN order_id bigint CHECK (order_id >= 1),
    ADD COLUMN order_status text
        CHECK (order_status IN ('placed', 'completed', 'cancelled', 'expired')),
    ADD CONSTRAINT petstore_idempotency_answer
        CHECK (answer IN (0, 200, 201, 409, 1200, 1201, 1409)),
    ADD CONSTRAINT petstore_idempotency_kept CHECK (
        answer = 0
        OR answer < 1000 AND pet_id IS NOT NULL AND status IS NOT NULL
        OR answer >= 1000 AND order_id IS NOT NULL AND order_status IS NOT NULL);

-- One change of a pet's status, as `petstore_transition` writes it.
CREATE FUNCTION petstore_set_pet(pet bigint, to_status text, change bigint)
RETURNS TABLE (pet_name text, pet_category bigint)
LANGUAGE sql AS $$
    UPDATE petstore_pets p
    SET status = to_status,
        last_change = change,
        json = regexp_replace(p.json, '"status":"[a-z]+"}$', '"status":"' || to_status || '"}')
    WHERE p.id = pet
    RETURNING p.name, p.category_id
$$;

-- Closes placed order `closing` as `to_status` at `at`, with its pet.
CREATE FUNCTION petstore_close_order(closing bigint, to_status text, at timestamptz, change bigint)
RETURNS SETOF petstore_orders
LANGUAGE plpgsql AS $$
DECLARE
    o petstore_orders;
BEGIN
    UPDATE petstore_orders SET status = to_status, closed_at = at, last_change = change
    WHERE id = closing AND status = 'placed'
    RETURNING * INTO o;
    IF FOUND THEN
        PERFORM petstore_set_pet(o.pet_id,
            CASE to_status WHEN 'completed' THEN 'sold' ELSE 'available' END, change);
        RETURN NEXT o;
    END IF;
END
$$;

-- `petstore_steps_state` and `petstore_steps`, which decide a batch of
-- steps, are version 7's (`VERSION_7`): a database migrated to 5 or 6 by
-- an earlier release holds their earlier bodies, which 7 replaces.

-- Expires up to `most` placed orders whose hold lapsed by PostgreSQL's
-- clock, each exactly once (whichever replica calls first); how many.
CREATE FUNCTION petstore_expire(most int4)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    base bigint;
    last bigint;
    at timestamptz;
    due record;
BEGIN
    -- Nothing due: no lock taken, so idle replicas cost an index probe.
    IF NOT EXISTS (SELECT 1 FROM petstore_orders
                   WHERE status = 'placed' AND expires_at <= clock_timestamp()) THEN
        RETURN 0;
    END IF;
    SELECT c.last_change INTO base FROM petstore_changes c FOR UPDATE;
    last := base;
    at := date_trunc('second', clock_timestamp());
    FOR due IN SELECT id FROM petstore_orders WHERE status = 'placed' AND expires_at <= at
               ORDER BY expires_at, id LIMIT most LOOP
        last := last + 1;
        PERFORM petstore_close_order(due.id, 'expired', at, last);
    END LOOP;
    IF last > base THEN
        UPDATE petstore_changes SET last_change = last;
        PERFORM pg_notify('petstore_pets', 'change ' || last);
    END IF;
    RETURN last - base;
END
$$;
"#;

/// The name's characters as the core checks them, so that the read copy
/// can apply every row PostgreSQL holds.
fn version_2() -> String {
    let rules = name_rules();
    format!(
        "SET LOCAL standard_conforming_strings = on;
         ALTER TABLE petstore_pets ADD CONSTRAINT petstore_pets_name_contract
             CHECK (name !~ '[{}]' AND name ~ '[^{}]');",
        regex_class(&rules.refused),
        regex_class(&rules.blank)
    )
}

/// A PostgreSQL regular expression's bracket contents for `ranges` of
/// code points, every character written as an escape (none of them is
/// then special). U+0000 cannot be in `text`, so ranges start at U+0001.
fn regex_class(ranges: &[(u32, u32)]) -> String {
    let escape = |u: u32| {
        if u <= 0xFFFF {
            format!("\\u{u:04x}")
        } else {
            format!("\\U{u:08x}")
        }
    };
    ranges
        .iter()
        .filter(|&&(_, hi)| hi >= 1)
        .map(|&(lo, hi)| {
            let lo = lo.max(1);
            if lo == hi {
                escape(lo)
            } else {
                format!("{}-{}", escape(lo), escape(hi))
            }
        })
        .collect()
}

/// Any value, the same in every replica: the key of the advisory lock
/// that serialises migrations.
const MIGRATION_LOCK: i64 = 0x7065_7473_746f_7265; // "petstore"

/// Why the schema could not be made ready.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// The database was migrated by a newer server.
    #[error(
        "the database's petstore schema is at version {found}, and this server knows versions up to {known}: \
         run a newer petstore-server (an older one could write rows the newer schema does not expect)"
    )]
    Newer {
        /// The database's version.
        found: i32,
        /// The newest version this binary knows.
        known: i32,
    },
    /// PostgreSQL refused or failed.
    #[error("cannot create or migrate the schema: {0}")]
    Database(String),
}

/// Creates or migrates the schema to [`VERSION`]; returns the version the
/// database was at (0: new). All in one transaction under a
/// transaction-level advisory lock: replicas starting at once migrate one
/// after the other, and a migration is done whole or not at all.
pub async fn migrate(client: &mut Client) -> Result<i32, SchemaError> {
    let db = |e: tokio_postgres::Error| SchemaError::Database(describe(&e));
    let tx = client.transaction().await.map_err(db)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(db)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS petstore_schema (
             only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
             version integer NOT NULL
         )",
    )
    .await
    .map_err(db)?;
    let found: i32 = tx
        .query_opt("SELECT version FROM petstore_schema", &[])
        .await
        .map_err(db)?
        .map_or(0, |row| row.get(0));
    if found > VERSION {
        return Err(SchemaError::Newer {
            found,
            known: VERSION,
        });
    }
    for migration in migrations()
        .iter()
        .skip(usize::try_from(found).unwrap_or(0))
    {
        tx.batch_execute(migration).await.map_err(db)?;
    }
    tx.execute(
        "INSERT INTO petstore_schema (version) VALUES ($1)
         ON CONFLICT (only_row) DO UPDATE SET version = EXCLUDED.version",
        &[&VERSION],
    )
    .await
    .map_err(db)?;
    tx.commit().await.map_err(db)?;
    Ok(found)
}
