//! The feed of events on replicas (beta). PostgreSQL's triggers write
//! every change's event into `petstore_events`, numbered in commit order
//! (schema version 6), so every replica gives an event the same id. Each
//! replica's copy follows the table: woken by the listener's
//! notifications (and a poll), it reads the events after its newest and
//! applies those its copy already shows, so that a list's `Events-Cursor`
//! never runs ahead of the page beside it. An event whose change the
//! copy does not show yet (another replica's, not tailed yet) waits for
//! the tail, and is asked again a moment later.
//!
//! The replicas also prune events past the retention, a batch at a time.
//!
//! A cursor beyond the copy's newest event is another replica's, given a
//! moment ago, more often than a restored database's: a replica answers
//! it an empty page (and a long poll waits for the copy to pass it), not
//! 410 (`http/finish.rs` asks [`Store::is_replica`](crate::store::Store::is_replica)).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use petstore_core::event::{EventId, EventType, Recorded};
use petstore_core::{PetStatus, Timestamp};
use tokio::time::timeout;
use tokio_postgres::Row;

use super::describe::{describe, pool_error};
use super::stats::Op;
use super::{Postgres, POLL, QUERY_TIMEOUT};

/// Events per query.
const PAGE: i64 = 10_000;
/// How soon an event the copy does not show yet is asked for again.
const UNSHOWN_RETRY: Duration = Duration::from_millis(5);
/// How often old events are pruned.
const PRUNE_EVERY: Duration = Duration::from_secs(60);
/// Events one pruning statement drops at most.
const PRUNE_BATCH: u64 = 10_000;
/// Pruning statements a pass makes at most: a minute's worth of events at
/// 10,000 a second.
const PRUNE_BATCHES: usize = 60;
/// The events after a position.
const AFTER: &str = "SELECT id, type, subject, status, change, extract(epoch FROM at)::int8 \
                     FROM petstore_events WHERE id > $1 ORDER BY id LIMIT $2";
/// The first event still within the retention ($1 seconds), by id.
///
/// By id, not by time: times are not in id order (an order's event is
/// dated by its whole-second `placedAt` or `closedAt`, a pet's by the
/// clock, so an order's event can be dated before the pets' events just
/// before it). The kept events are a run of ids, and the pruned ones the
/// run before it; this walks the primary key from the oldest row, past
/// at most the rows pruning has not reached yet.
const FIRST_KEPT: &str = "(SELECT id FROM petstore_events \
                          WHERE at > now() - make_interval(secs => $1) ORDER BY id LIMIT 1)";

/// Where a new copy's feed starts: before the first event kept, or after
/// the newest when none is.
fn start_query() -> String {
    format!("SELECT coalesce({FIRST_KEPT} - 1, (SELECT last_id FROM petstore_event_counter))")
}

/// Drops a batch of the events before the first kept: always a run of
/// the oldest ids, so a copy that starts never meets a hole.
fn prune_query() -> String {
    format!(
        "DELETE FROM petstore_events WHERE id IN (SELECT id FROM petstore_events \
         WHERE id < coalesce({FIRST_KEPT}, (SELECT last_id + 1 FROM petstore_event_counter)) \
         ORDER BY id LIMIT 10000)"
    )
}

/// What a pass of [`Postgres::pull_events`] left.
enum Pulled {
    /// Every committed event the copy can show is applied.
    Done,
    /// Some wait for the copy to show their change, or a page was full.
    More,
}

impl Postgres {
    /// Follows `petstore_events` into the copy's feed, for ever.
    pub(super) async fn events_loop(self: Arc<Self>) {
        let mut wait = POLL;
        let mut pruned = Instant::now();
        let mut started = false;
        loop {
            let _ = timeout(wait, self.events_wake.notified()).await;
            let retention = self.copy.event_retention().as_secs_f64();
            if !started {
                match timeout(QUERY_TIMEOUT, self.start_events(retention)).await {
                    Ok(Ok(())) => started = true,
                    _ => {
                        self.stats.count_error(Op::Events);
                        wait = (wait * 2).min(super::MAX_BACKOFF);
                        continue;
                    }
                }
            }
            wait = match timeout(QUERY_TIMEOUT, self.pull_events()).await {
                Ok(Ok(Pulled::Done)) => POLL,
                Ok(Ok(Pulled::More)) => UNSHOWN_RETRY,
                Ok(Err(_)) | Err(_) => {
                    self.stats.count_error(Op::Events);
                    (wait * 2).min(super::MAX_BACKOFF)
                }
            };
            if pruned.elapsed() >= PRUNE_EVERY {
                pruned = Instant::now();
                if !matches!(
                    timeout(QUERY_TIMEOUT, self.prune_events(retention)).await,
                    Ok(Ok(()))
                ) {
                    self.stats.count_error(Op::Events);
                }
            }
        }
    }

    /// Starts the copy's feed where the table's kept events start.
    async fn start_events(&self, retention: f64) -> Result<(), String> {
        let client = self.pool.get().await.map_err(|e| pool_error(&e))?;
        let row = client
            .query_one(&start_query(), &[&retention])
            .await
            .map_err(|e| describe(&e))?;
        let before: i64 = row.try_get(0).map_err(|e| describe(&e))?;
        let before = EventId::new(u64::try_from(before).unwrap_or(0));
        self.copy
            .apply_events(before, &[])
            .map(drop)
            .map_err(|e| e.to_string())
    }

    /// Applies the events after the copy's newest that the copy shows.
    async fn pull_events(&self) -> Result<Pulled, String> {
        let client = self.pool.get().await.map_err(|e| pool_error(&e))?;
        let statement = client
            .prepare_cached(AFTER)
            .await
            .map_err(|e| describe(&e))?;
        let head = self.copy.events_head();
        let after = i64::try_from(head.get()).unwrap_or(i64::MAX);
        let rows = client
            .query(&statement, &[&after, &PAGE])
            .await
            .map_err(|e| describe(&e))?;
        let full = rows.len() as i64 == PAGE;
        let mut events = Vec::with_capacity(rows.len());
        for row in &rows {
            let (event, change) = recorded(row)?;
            if !self.shows(&event, change) {
                break;
            }
            events.push(event);
        }
        let all = events.len() == rows.len();
        self.copy
            .apply_events(head, &events)
            .map_err(|e| format!("the events do not follow on from the copy's: {e}"))?;
        Ok(if all && !full {
            Pulled::Done
        } else {
            Pulled::More
        })
    }

    /// Whether the copy shows the change of `event`, made with change
    /// number `change` (0: a new pet's).
    fn shows(&self, event: &Recorded, change: u64) -> bool {
        let applied = self.changes_applied.load(Ordering::Acquire);
        match event.kind {
            EventType::PetCreated => event.subject <= self.copy.len() as u64,
            EventType::PetStatusChanged => {
                event.subject <= self.copy.len() as u64 && change <= applied
            }
            _ => event.subject <= self.copy.orders_len() && change <= applied,
        }
    }

    /// Drops the events past the retention, a batch at a time (a short
    /// transaction each, so no writer waits long on them), at most
    /// [`PRUNE_BATCHES`] batches a pass.
    async fn prune_events(&self, retention: f64) -> Result<(), String> {
        let client = self.pool.get().await.map_err(|e| pool_error(&e))?;
        for _ in 0..PRUNE_BATCHES {
            let dropped = client
                .execute(&prune_query(), &[&retention])
                .await
                .map_err(|e| describe(&e))?;
            if dropped < PRUNE_BATCH {
                break;
            }
        }
        Ok(())
    }
}

/// An event of the table, and its change number.
fn recorded(row: &Row) -> Result<(Recorded, u64), String> {
    let bad = |what: &str| format!("a row of petstore_events with a bad {what}");
    let id: i64 = row.try_get(0).map_err(|_| bad("id"))?;
    let kind: &str = row.try_get(1).map_err(|_| bad("type"))?;
    let subject: i64 = row.try_get(2).map_err(|_| bad("subject"))?;
    let status: &str = row.try_get(3).map_err(|_| bad("status"))?;
    let change: i64 = row.try_get(4).map_err(|_| bad("change"))?;
    let at: i64 = row.try_get(5).map_err(|_| bad("at"))?;
    let kind = EventType::ALL
        .into_iter()
        .find(|k| k.as_str() == kind)
        .ok_or_else(|| bad("type"))?;
    let pet_status = match kind {
        EventType::PetCreated | EventType::PetStatusChanged => {
            Some(status.parse::<PetStatus>().map_err(|_| bad("status"))?)
        }
        _ => None,
    };
    let event = Recorded {
        id: EventId::new(u64::try_from(id).map_err(|_| bad("id"))?),
        kind,
        subject: u64::try_from(subject).map_err(|_| bad("subject"))?,
        pet_status,
        at: Timestamp::from_unix_secs(u64::try_from(at).unwrap_or(0)),
    };
    Ok((event, u64::try_from(change).unwrap_or(0)))
}
