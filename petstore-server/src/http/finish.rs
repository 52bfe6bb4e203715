//! [`Admitted::finish`]: an admitted request answered once its body is
//! read, or [`Finished::Waiting`] for the store (a create or a transition
//! it cannot answer at once, a get of an id its read copy may not hold
//! yet). Which backend answers is the store's business (`store/`), not
//! this file's.
//!
//! A POST with an `Idempotency-Key` always waits: its body is read whole
//! and fingerprinted (SHA-256 of method, path and body), then validated.
//! A valid body goes straight to the store's keyed write, whose claim of
//! the key decides: the write runs, or the kept answer is given again, or
//! 422 (the key reused with another request), or 409 (in flight). Only
//! an invalid body asks the store what the key holds ([`Store::seen`](crate::store::Store::seen)),
//! so that a reused or busy key still answers 422 or 409 whatever that
//! body is, and a new key's invalid body is 400 and keeps nothing.
//! Why not ask first, for every request: on PostgreSQL the question is a
//! round trip of its own, and the claim answers it anyway; the order of
//! the verdicts a client sees is the same either way. An answer given
//! again carries `Idempotent-Replayed: true` and the rate-limit headers
//! of this request.

use std::cell::RefCell;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use petstore_core::{
    event::{EventId, EventLimit, FeedError, JsonEvents},
    idempotency::{Fingerprint, IdempotencyKey, Scope},
    inventory::{FinalPage, OrderQuery, Step, StepRequest, Stepped},
    order::{Actor, NewOrder, Order, OrderId},
    ListQuery, NewPet, Pet, PetId, Transition, TransitionError,
};
use sha2::{Digest, Sha256};

use super::admit::{Admitted, Checked, Served};
use super::api::Api;
use super::body::{BodyRead, MAX_BODY};
use super::connection::Connection;
use super::error::{ApiError, HttpResponse, ResponseBody};
use super::query_string::EventsRequest;
use super::reply::{decorate, refusal};
use super::route::OrderAction;
use crate::headers::{Extra, EVENTS_CURSOR, IDEMPOTENT_REPLAYED};
use crate::keys::Scope as KeyScope;
use crate::state::AppState;
use crate::store::{
    Answer, CreateFailed, Keyed, KeyedFailed, KeyedOutcome, StepFailed, StreamSource, WaitRefused,
};
use crate::util::buffers;
use crate::util::hex::hex;

/// What [`Admitted::finish`] made of a request: its answer, or the store
/// work it must wait for first.
#[derive(Debug)]
pub enum Finished {
    /// Answered without waiting: every read of a pet the inventory holds,
    /// every refusal, and a create or a transition in memory.
    Answered(HttpResponse, Served),
    /// A create or a transition the store answers later (a journal's
    /// fsync, a PostgreSQL commit), or a get of an id the store's read
    /// copy may not hold yet: [`Waiting::finish`] awaits it and answers.
    Waiting(Waiting),
}

/// An admitted request waiting for the store. Holds no thread: the server
/// awaits [`finish`](Self::finish).
#[derive(Debug)]
pub struct Waiting {
    admitted: Admitted,
    work: Work,
}

#[derive(Debug)]
enum Work {
    Create(NewPet),
    /// An order's step, or a pet transition (its door).
    Step(StepRequest),
    CatchUp(PetId),
    /// An order the read copy does not hold yet, which another replica
    /// may have just placed.
    CatchUpOrder(OrderId),
    /// A page of events that was empty, to read again once an event
    /// after `after` is published or the request's `wait` is up.
    Events(EventsRequest, EventId),
    /// A POST with an idempotency key: its body not yet validated.
    Keyed {
        keyed: Keyed,
        write: KeyedWrite,
        body: Bytes,
    },
}

/// Which write a keyed POST asks for.
#[derive(Clone, Copy, Debug)]
enum KeyedWrite {
    Create,
    Transition(PetId, Transition),
    Place,
    OrderStep(OrderId, OrderAction),
}

impl Waiting {
    /// The route template, for a log line.
    pub fn route(&self) -> &'static str {
        self.admitted.route()
    }

    /// Awaits the store, then answers as [`Admitted::finish`] would have.
    pub async fn finish(self, connection: &Connection) -> (HttpResponse, Served) {
        let (state, api) = (&*connection.state, &*connection.api);
        let result = match self.work {
            Work::Create(new) => created(api, state.store.create(new).await),
            Work::Step(request) => {
                let step = request.step;
                stepped(api, step, state.store.step(request).await)
            }
            Work::CatchUp(id) => match (state.store.catch_up(id).await, get_pet(state, api, id)) {
                // Not in the copy, and the store could not say whether it
                // exists: a 404 could deny an acknowledged pet.
                (false, Err(ApiError::NotFound(_))) => Err(ApiError::Unconfirmed("pet")),
                (_, result) => result,
            },
            Work::CatchUpOrder(id) => {
                let actor = self.admitted.actor();
                match (
                    state.store.catch_up_order(id).await,
                    get_order(state, id, &actor),
                ) {
                    (false, Err(ApiError::NotFound(_))) => Err(ApiError::Unconfirmed("order")),
                    (_, result) => result,
                }
            }
            Work::Events(request, after) => {
                let key = self.admitted.served.key.unwrap_or_default();
                match state.feed.slot(key) {
                    Err(refused) => Err(ApiError::TooManyWaiters {
                        total: refused == WaitRefused::Total,
                    }),
                    Ok(slot) => {
                        let wait = request.wait.unwrap_or_default();
                        state.feed.wait(&slot, after, wait).await;
                        let mut again = request;
                        again.query = again.query.after(after);
                        events_page(state, api, &again).map(|page| page.success)
                    }
                }
            }
            Work::Keyed { keyed, write, body } => {
                let actor = self.admitted.actor();
                let at = keyed.at;
                let done = keyed_write(state, keyed, write, &body, actor, at).await;
                let (result, replayed) = match done {
                    Ok(KeyedOutcome::Done(answer)) => (answered(api, write, answer), false),
                    Ok(KeyedOutcome::Replay(answer)) => (answered(api, write, answer), true),
                    Ok(KeyedOutcome::Reused) => (Err(ApiError::IdempotencyKeyReused), false),
                    Ok(KeyedOutcome::InFlight) => (Err(ApiError::IdempotencyKeyInUse), false),
                    Err(error) => (Err(error), false),
                };
                return self.admitted.answer(api, result, |mut response, served| {
                    if replayed {
                        response
                            .headers_mut()
                            .insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
                    }
                    (response, served)
                });
            }
        };
        self.admitted
            .answer(api, result, |response, served| (response, served))
    }
}

impl Admitted {
    /// Answers the admitted request with `body`, what the server read of
    /// its body, or says what it must wait for.
    pub fn finish(mut self, connection: &Connection, body: BodyRead) -> Finished {
        let (state, api) = (&*connection.state, &*connection.api);
        if let Some((key, write)) = self.take_key() {
            return match complete(body) {
                Ok(body) => self.keyed(state, api, key, write, body),
                Err(error) => self.answer(api, Err(error), Finished::Answered),
            };
        }
        if matches!(self.op, Checked::ListPets(_) | Checked::ListOrders(_)) {
            self.events_cursor = Some(state.inventory.events_head());
        }
        let result = match self.op {
            Checked::ListPets(ref list) => no_body(&body).map(|()| list_pets(state, api, list)),
            Checked::ListEvents(request) => match no_body(&body)
                .and_then(|()| events_page(state, api, &request))
            {
                Ok(page) if page.count == 0 && request.wait.is_some() && !state.is_draining() => {
                    return self.wait(Work::Events(request, page.next));
                }
                result => result.map(|page| page.success),
            },
            Checked::StreamEvents(request) => {
                match no_body(&body).and_then(|()| stream_events(state, &self.served, &request)) {
                    Ok(events) => {
                        let started = Success {
                            status: StatusCode::OK,
                            body: Bytes::new(),
                            extra: Extra::Nothing,
                        };
                        return self.answer(api, Ok(started), |mut response, served| {
                            let headers = response.headers_mut();
                            headers.insert(
                                CONTENT_TYPE,
                                HeaderValue::from_static("text/event-stream"),
                            );
                            // Never kept by a cache: each read follows on.
                            headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
                            headers.remove(CONTENT_LENGTH);
                            *response.body_mut() = ResponseBody::Stream(events);
                            Finished::Answered(response, served)
                        });
                    }
                    Err(error) => Err(error),
                }
            }
            Checked::CreatePet(_) => match new_pet(body) {
                Err(error) => Err(error),
                Ok(new) => match state.store.create_now(new) {
                    Ok(stored) => created(api, stored),
                    Err(new) => return self.wait(Work::Create(new)),
                },
            },
            Checked::GetPet(id) => {
                // Asked before the read, not after a miss: a read copy
                // that takes the pet in between would otherwise answer
                // 404 for a pet it holds (another replica's, just made).
                let may_catch_up = state.store.may_catch_up(id);
                match no_body(&body).and_then(|()| get_pet(state, api, id)) {
                    // Only a 404 waits for the store to know more.
                    Err(ApiError::NotFound(_)) if may_catch_up => {
                        return self.wait(Work::CatchUp(id))
                    }
                    result => result,
                }
            }
            Checked::Transition(id, transition, _) => match transition_body(body) {
                Err(error) => Err(error),
                Ok(()) => return self.step(state, api, Step::Transition(id, transition)),
            },
            Checked::ListOrders(ref query) => {
                no_body(&body).map(|()| list_orders(state, api, query, &self.actor()))
            }
            Checked::PlaceOrder(_) => match complete(body).and_then(|body| new_order(&body)) {
                Err(error) => Err(error),
                Ok(new) => return self.step(state, api, Step::Place(new)),
            },
            Checked::GetOrder(id) => {
                // As a pet's: asked before the read.
                let may_catch_up = state.store.may_catch_up_order(id);
                match no_body(&body).and_then(|()| get_order(state, id, &self.actor())) {
                    Err(ApiError::NotFound(_)) if may_catch_up => {
                        return self.wait(Work::CatchUpOrder(id))
                    }
                    result => result,
                }
            }
            Checked::OrderStep(id, action, _) => match transition_body(body) {
                Err(error) => Err(error),
                Ok(()) => return self.step(state, api, order_step(id, action)),
            },
        };
        self.answer(api, result, Finished::Answered)
    }

    /// The idempotency key of a POST that sent one, taken out of its
    /// operation, and the write it asks for.
    fn take_key(&mut self) -> Option<(IdempotencyKey, KeyedWrite)> {
        match &mut self.op {
            Checked::CreatePet(key) => Some((key.take()?, KeyedWrite::Create)),
            Checked::Transition(id, transition, key) => {
                Some((key.take()?, KeyedWrite::Transition(*id, *transition)))
            }
            Checked::PlaceOrder(key) => Some((key.take()?, KeyedWrite::Place)),
            Checked::OrderStep(id, action, key) => {
                Some((key.take()?, KeyedWrite::OrderStep(*id, *action)))
            }
            _ => None,
        }
    }

    /// Who the request acts as, for orders: its key's entry, seeing every
    /// key's orders with `orders:all`.
    fn actor(&self) -> Actor {
        let actor = Actor::new(self.served.key.unwrap_or_default());
        if self.all_orders {
            actor.with_all_orders()
        } else {
            actor
        }
    }

    /// A step made at once when the store can, else waited for.
    fn step(self, state: &AppState, api: &Api, step: Step) -> Finished {
        let request = StepRequest {
            actor: self.actor(),
            step,
            at: state.clock.now(),
            claim: None,
        };
        match state.store.step_now(request) {
            Ok(result) => self.answer(api, stepped(api, step, result), Finished::Answered),
            Err(request) => self.wait(Work::Step(*request)),
        }
    }

    /// A keyed POST with its whole `body`: waits for the store, whose
    /// word on the key wins over the body's (see the file's notes).
    fn keyed(
        self,
        state: &AppState,
        api: &Api,
        key: IdempotencyKey,
        write: KeyedWrite,
        body: Bytes,
    ) -> Finished {
        // Admitted means a valid API key: its entry's name is the scope.
        let Some(scope) = self.served.key.and_then(scope_of) else {
            return self.answer(api, Err(ApiError::Internal), Finished::Answered);
        };
        let keyed = Keyed {
            scope,
            key,
            fingerprint: fingerprint(write, &body),
            at: state.clock.now(),
        };
        self.wait(Work::Keyed { keyed, write, body })
    }

    fn wait(self, work: Work) -> Finished {
        Finished::Waiting(Waiting {
            admitted: self,
            work,
        })
    }

    /// The response to `result`, with the rate-limit and CORS headers,
    /// handed to `wrap` with what it served.
    ///
    /// Why `wrap`, and the response built where it stays: each move of
    /// the 144-byte response (out of a `match`, into a tuple, into the
    /// caller's enum) was a `memcpy` (`scripts/bench/profile`).
    fn answer<T>(
        self,
        api: &Api,
        result: Result<Success<'_>, ApiError>,
        wrap: impl FnOnce(HttpResponse, Served) -> T,
    ) -> T {
        let mut response;
        match result {
            Ok(success) => {
                response = Response::new(ResponseBody::Full(Full::new(success.body)));
                *response.status_mut() = success.status;
                *response.headers_mut() = self.quota.success(self.binding, success.extra);
                if let Some(cursor) = self.events_cursor {
                    response
                        .headers_mut()
                        .insert(EVENTS_CURSOR, cursor_value(cursor.get()));
                }
            }
            Err(error) => {
                let deprecated = matches!(self.op, Checked::GetPet(_));
                response = refusal(api, &error, self.binding, &self.quota, deprecated);
            }
        }
        decorate(api, &self.origin, &mut response);
        wrap(response, self.served)
    }
}

/// A 2xx answer of an operation; [`QuotaHeaders::success`](crate::headers::QuotaHeaders::success) makes its
/// headers.
struct Success<'a> {
    status: StatusCode,
    body: Bytes,
    extra: Extra<'a>,
}

fn get_order(state: &AppState, id: OrderId, actor: &Actor) -> Result<Success<'static>, ApiError> {
    match state.inventory.order(actor, id) {
        Some(order) => Ok(Success {
            status: StatusCode::OK,
            body: Bytes::from(order.to_json()),
            extra: Extra::Nothing,
        }),
        None => Err(order_not_found(id)),
    }
}

fn order_not_found(id: OrderId) -> ApiError {
    ApiError::NotFound(format!("no order with id {id}"))
}

/// Starts a stream of events (beta) for `request`: its cursor is
/// checked first, as a page's would be (a `410` before the stream, never
/// inside it), then a place among the waiters taken for the stream's
/// life, and its task started (`store/feed.rs`).
fn stream_events(
    state: &AppState,
    served: &Served,
    request: &EventsRequest,
) -> Result<tokio::sync::mpsc::Receiver<Bytes>, ApiError> {
    // One event read, not a page: only whether the cursor holds.
    let mut first = request.query;
    first.limit = EventLimit::new(1).unwrap_or_default();
    match state.inventory.events(&first, state.clock.now()) {
        Err(FeedError::Ahead { .. }) if state.store.is_replica() => {}
        Err(e) => return Err(cursor_expired(&e)),
        Ok(_) => {}
    }
    let source = StreamSource {
        inventory: Arc::clone(&state.inventory),
        clock: Arc::clone(&state.clock),
        replica: state.store.is_replica(),
        expired: |e| cursor_expired(e).body(),
    };
    state
        .feed
        .stream(served.key.unwrap_or_default(), source, request.query.after)
        .map_err(|refused| ApiError::TooManyWaiters {
            total: refused == WaitRefused::Total,
        })
}

/// The 410 of a cursor out of the feed (past its retention, or beyond
/// its newest event on one server).
fn cursor_expired(e: &FeedError) -> ApiError {
    ApiError::CursorExpired(format!(
        "{e}; list again, and follow from the list's Events-Cursor"
    ))
}

/// A page of events, and where the next starts.
struct EventsPage<'a> {
    success: Success<'a>,
    count: usize,
    next: EventId,
}

fn events_page<'a>(
    state: &AppState,
    api: &'a Api,
    request: &EventsRequest,
) -> Result<EventsPage<'a>, ApiError> {
    let page = match state
        .inventory
        .events_json(&request.query, state.clock.now())
    {
        Ok(page) => page,
        // Another replica's cursor, a moment ahead of this one's copy: an
        // empty page after it, which a long poll waits on.
        Err(FeedError::Ahead { after, .. }) if state.store.is_replica() => JsonEvents {
            body: b"[]".to_vec(),
            count: 0,
            next: after,
        },
        Err(e) => return Err(cursor_expired(&e)),
    };
    Ok(EventsPage {
        count: page.count,
        next: page.next,
        success: Success {
            status: StatusCode::OK,
            body: Bytes::from(page.body),
            extra: Extra::EventsNext {
                base_url: &api.options.base_url,
                limit: request.query.limit.get(),
                wait: request.wait.map(|wait| wait.as_secs()),
                after: page.next.get(),
            },
        },
    })
}

fn list_orders<'a>(
    state: &AppState,
    api: &'a Api,
    query: &OrderQuery,
    actor: &Actor,
) -> Success<'a> {
    let (body, next_after) = state.inventory.list_orders_json(actor, query);
    let mut next = *query;
    next.after = next_after;
    Success {
        status: StatusCode::OK,
        body: Bytes::from(body),
        extra: Extra::OrderNext {
            base_url: &api.options.base_url,
            next: next_after.map(|_| next),
        },
    }
}

/// The step of `completeOrder` or `cancelOrder`.
fn order_step(id: OrderId, action: OrderAction) -> Step {
    match action {
        OrderAction::Complete => Step::Complete(id),
        OrderAction::Cancel => Step::Cancel(id),
    }
}

/// The validated order of a `placeOrder` body.
fn new_order(body: &[u8]) -> Result<NewOrder, ApiError> {
    NewOrder::from_json(body).map_err(|e| ApiError::InvalidBody(e.to_string()))
}

fn get_pet<'a>(state: &AppState, api: &'a Api, id: PetId) -> Result<Success<'a>, ApiError> {
    match state.inventory.get_json(id) {
        Some(pet) => Ok(Success {
            status: StatusCode::OK,
            body: Bytes::from(pet),
            extra: Extra::Deprecated(api.successor_link()),
        }),
        None => Err(ApiError::NotFound(format!("no pet with id {id}"))),
    }
}

fn list_pets<'a>(state: &AppState, api: &'a Api, list: &ListQuery) -> Success<'a> {
    #[cfg(test)]
    if state
        .panic_on_next_list
        .swap(false, std::sync::atomic::Ordering::Relaxed)
    {
        panic!("the test hook's deliberate panic in a list");
    }
    // A first page that can no longer change is shared, not built: no
    // lock, no copy (`Inventory::final_page`).
    if let Some(page) = state.inventory.final_page(list) {
        let next = Some(list.after(page.next_after));
        return Success {
            status: StatusCode::OK,
            body: shared_body(page),
            extra: Extra::Next {
                base_url: &api.options.base_url,
                next,
                walking: list.after.is_some(),
            },
        };
    }
    let page = state.inventory.list_json_into(list, buffers::take());
    Success {
        status: StatusCode::OK,
        body: buffers::into_bytes(page.body),
        extra: Extra::Next {
            base_url: &api.options.base_url,
            next: page.next_after.map(|after| list.after(after)),
            walking: list.after.is_some(),
        },
    }
}

thread_local! {
    /// The `Events-Cursor` value this thread made last. While nothing
    /// changes every list answers the same one, and its clone is a
    /// reference count, not digits formatted into a new allocation.
    static LAST_CURSOR: RefCell<Option<(u64, HeaderValue)>> = const { RefCell::new(None) };
}

/// The `Events-Cursor` value of `cursor`: [`LAST_CURSOR`]'s when it is the
/// same position.
fn cursor_value(cursor: u64) -> HeaderValue {
    LAST_CURSOR
        .try_with(|last| {
            let mut last = last.try_borrow_mut().ok()?;
            if let Some((made_of, value)) = last.as_ref() {
                if *made_of == cursor {
                    return Some(value.clone());
                }
            }
            let value = HeaderValue::from(cursor);
            *last = Some((cursor, value.clone()));
            Some(value)
        })
        .ok()
        .flatten()
        .unwrap_or_else(|| HeaderValue::from(cursor))
}

thread_local! {
    /// The final page this thread answered last, as the bytes it gave
    /// hyper.
    ///
    /// Why: handing hyper a shared page took an allocation (the bytes'
    /// owner) and its free on every request; clients that poll the first
    /// page get the same page again and again, so the last one's bytes
    /// are handed out again, a reference count. One page per worker
    /// thread: bounded.
    static LAST_FINAL_PAGE: RefCell<Option<(Arc<FinalPage>, Bytes)>> =
        const { RefCell::new(None) };
}

/// `page`'s body as bytes that share it: [`LAST_FINAL_PAGE`]'s when it is
/// the same page (the same `Arc`), else new bytes, kept for the next.
fn shared_body(page: Arc<FinalPage>) -> Bytes {
    LAST_FINAL_PAGE
        .try_with(|last| {
            let mut last = last.try_borrow_mut().ok()?;
            if let Some((kept, bytes)) = last.as_ref() {
                if Arc::ptr_eq(kept, &page) {
                    return Some(bytes.clone());
                }
            }
            let bytes = Bytes::from_owner(buffers::Shared(page.clone()));
            *last = Some((page.clone(), bytes.clone()));
            Some(bytes)
        })
        .ok()
        .flatten()
        .unwrap_or_else(|| Bytes::from_owner(buffers::Shared(page)))
}

/// Whose idempotency keys a request's are: its API key's entry, by name
/// (never the key itself); a name too long for a journal record by the
/// SHA-256 of it.
fn scope_of(name: &str) -> Option<Scope> {
    Scope::new(name).or_else(|| Scope::new(&hex(&Sha256::digest(name.as_bytes()))))
}

/// The fingerprint of a keyed POST: SHA-256 of its method, its path (in
/// its one spelling: numbers in paths have no other) and its body, by
/// bytes. A body that differs by one byte is another request.
fn fingerprint(write: KeyedWrite, body: &[u8]) -> Fingerprint {
    let path = match write {
        KeyedWrite::Create => "/v1/pets".to_owned(),
        KeyedWrite::Transition(id, transition) => format!("/v1/pets/{id}/{transition}"),
        KeyedWrite::Place => "/v1/store/orders".to_owned(),
        KeyedWrite::OrderStep(id, action) => {
            format!("/v1/store/orders/{id}/{}", action.as_str())
        }
    };
    let mut digest = Sha256::new();
    digest.update(b"POST ");
    digest.update(path.as_bytes());
    digest.update(b"\n");
    digest.update(body);
    Fingerprint::from_bytes(digest.finalize().into())
}

/// The fingerprint of a create with `body`, for the tests of this room.
#[cfg(test)]
pub(super) fn fingerprint_of_create(body: &[u8]) -> Fingerprint {
    fingerprint(KeyedWrite::Create, body)
}

/// A keyed POST at the store. A valid body is written at once: the
/// keyed write claims the key atomically and comes back with what the key
/// held when the claim lost (a replay, a reuse, in flight), so asking
/// first would only repeat the question. An invalid body asks what the
/// key holds, whose verdict wins over the body's 400.
async fn keyed_write(
    state: &AppState,
    keyed: Keyed,
    write: KeyedWrite,
    body: &[u8],
    actor: Actor,
    at: petstore_core::Timestamp,
) -> Result<KeyedOutcome, ApiError> {
    let valid = match write {
        KeyedWrite::Create => NewPet::from_json(body)
            .map(Valid::Create)
            .map_err(|e| ApiError::InvalidBody(e.to_string())),
        KeyedWrite::Transition(id, transition) => {
            transition_bytes(body).map(|()| Valid::Step(Step::Transition(id, transition)))
        }
        KeyedWrite::Place => new_order(body).map(|new| Valid::Step(Step::Place(new))),
        KeyedWrite::OrderStep(id, action) => {
            transition_bytes(body).map(|()| Valid::Step(order_step(id, action)))
        }
    };
    match valid {
        Ok(Valid::Create(new)) => state
            .store
            .create_keyed(new, keyed)
            .await
            .map_err(|_| ApiError::Unavailable),
        Ok(Valid::Step(step)) => {
            let request = StepRequest {
                actor,
                step,
                at,
                claim: None,
            };
            state
                .store
                .step_keyed(request, keyed)
                .await
                .map_err(|error| keyed_failed(step, error))
        }
        Err(invalid) => {
            let seen = state
                .store
                .seen(&keyed)
                .await
                .map_err(|_| ApiError::Unavailable)?;
            KeyedOutcome::of_seen(seen).ok_or(invalid)
        }
    }
}

/// The refusal of a keyed step that kept nothing.
fn keyed_failed(step: Step, error: KeyedFailed) -> ApiError {
    let failed = match error {
        KeyedFailed::NotFound => StepFailed::PetNotFound,
        KeyedFailed::OrderNotFound => StepFailed::OrderNotFound,
        KeyedFailed::HeldByAnother => return ApiError::InsufficientScope(KeyScope::OrdersAll),
        KeyedFailed::Unavailable => StepFailed::Unavailable,
    };
    match stepped_error(step, failed) {
        Err(error) => error,
        Ok(never) => match never {},
    }
}

/// A keyed POST's write once its body is validated.
enum Valid {
    Create(NewPet),
    Step(Step),
}

/// The answer a key keeps, as a response: the same status, body and
/// `Location` whenever it is given.
fn answered(api: &Api, write: KeyedWrite, answer: Answer) -> Result<Success<'_>, ApiError> {
    match answer {
        Answer::Created(pet) => created(api, Ok(pet)),
        Answer::Transitioned(pet) => {
            let step = Step::Transition(pet.id(), Transition::Sell);
            stepped(api, step, Ok(Stepped::Pet(pet)))
        }
        Answer::Order(order) => {
            let step = match write {
                KeyedWrite::Place => Step::Place(NewOrder::new(order.pet())),
                _ => Step::Complete(order.id()),
            };
            stepped(api, step, Ok(Stepped::Order(*order)))
        }
        Answer::Conflict {
            id,
            status,
            transition,
        } => {
            let step = match write {
                KeyedWrite::Place => Step::Place(NewOrder::new(id)),
                _ => Step::Transition(id, transition),
            };
            stepped(api, step, Err(StepFailed::PetConflict(status)))
        }
        Answer::OrderConflict { id, status } => stepped(
            api,
            Step::Complete(id),
            Err(StepFailed::OrderConflict(status)),
        ),
    }
}

/// The whole body of a request that may have one, or why there is none
/// to look at.
fn complete(body: BodyRead) -> Result<Bytes, ApiError> {
    match body {
        BodyRead::Complete(bytes) => Ok(bytes),
        BodyRead::TooLarge => Err(ApiError::PayloadTooLarge(MAX_BODY)),
        BodyRead::TimedOut(after) => Err(ApiError::RequestTimeout(after.as_secs())),
        BodyRead::Trailers => Err(ApiError::InvalidBody(TRAILERS.into())),
        BodyRead::Broken => Err(ApiError::InvalidBody(
            "the request body could not be read".into(),
        )),
    }
}

/// The refusal of a body that ended with trailer fields.
const TRAILERS: &str = "the request ends with trailer fields, and no operation takes any";

/// The validated pet of a create's body.
fn new_pet(body: BodyRead) -> Result<NewPet, ApiError> {
    let bytes = complete(body)?;
    NewPet::from_json(&bytes).map_err(|e| ApiError::InvalidBody(e.to_string()))
}

/// A transition's body: none, or exactly `{}`, the empty object a
/// generated client sends for an operation whose body is optional.
/// Anything else is refused rather than ignored: a client that believes
/// it can say more (a status, a customer) learns at once that it cannot.
fn transition_body(body: BodyRead) -> Result<(), ApiError> {
    transition_bytes(&complete(body)?)
}

/// [`transition_body`] of a body read whole.
fn transition_bytes(bytes: &[u8]) -> Result<(), ApiError> {
    match bytes {
        b"" | b"{}" => Ok(()),
        _ => Err(ApiError::InvalidBody(
            "a transition takes no request body, an empty one, or exactly {}".into(),
        )),
    }
}

/// The answer of a step: the 200 of a pet that changed status or of an
/// order's step, the 201 of a placed order, or why it was not made. A
/// pet's 409 message is the core's own words for the conflict, so it is
/// the same whichever store decided.
fn stepped(
    api: &Api,
    step: Step,
    result: Result<Stepped, StepFailed>,
) -> Result<Success<'_>, ApiError> {
    match result {
        Ok(Stepped::Pet(pet)) => Ok(Success {
            status: StatusCode::OK,
            body: Bytes::from(pet.to_json()),
            extra: Extra::Nothing,
        }),
        Ok(Stepped::Order(order)) => Ok(placed_or_changed(api, step, &order)),
        Err(failed) => stepped_error(step, failed).map(|never| match never {}),
    }
}

fn placed_or_changed<'a>(api: &'a Api, step: Step, order: &Order) -> Success<'a> {
    let body = Bytes::from(order.to_json());
    match step {
        Step::Place(_) => Success {
            status: StatusCode::CREATED,
            body,
            extra: Extra::OrderLocation {
                base_url: &api.options.base_url,
                id: order.id(),
            },
        },
        _ => Success {
            status: StatusCode::OK,
            body,
            extra: Extra::Nothing,
        },
    }
}

/// Why a step was not made, as the contract answers it.
fn stepped_error(step: Step, failed: StepFailed) -> Result<std::convert::Infallible, ApiError> {
    let pet = match step {
        Step::Place(new) => Some(new.pet),
        Step::Transition(id, _) => Some(id),
        Step::Complete(_) | Step::Cancel(_) => None,
    };
    let order = match step {
        Step::Complete(id) | Step::Cancel(id) => Some(id),
        _ => None,
    };
    Err(match failed {
        StepFailed::PetNotFound => {
            ApiError::NotFound(format!("no pet with id {}", pet.map_or(0, PetId::get)))
        }
        StepFailed::OrderNotFound => ApiError::NotFound(format!(
            "no order with id {}",
            order.map_or(0, OrderId::get)
        )),
        StepFailed::PetConflict(current) => ApiError::StatusConflict(match step {
            Step::Transition(id, transition) => TransitionError::Conflict {
                id,
                current,
                transition,
            }
            .to_string(),
            _ => format!(
                "pet {} is {current}; an order needs an available pet",
                pet.map_or(0, PetId::get)
            ),
        }),
        StepFailed::OrderConflict(status) => ApiError::StatusConflict(format!(
            "order {} is {status}; only a placed order can be completed or cancelled",
            order.map_or(0, OrderId::get)
        )),
        StepFailed::HeldByAnother(_) => ApiError::InsufficientScope(KeyScope::OrdersAll),
        // Not stored, or not known to be: as a create's 503.
        StepFailed::Unavailable => ApiError::Unavailable,
    })
}

/// The 201 of a stored pet, or the 503 of one the store could not store
/// (the cause is logged once, by the store, when it starts).
fn created(api: &Api, stored: Result<Pet, CreateFailed>) -> Result<Success<'_>, ApiError> {
    let pet = stored.map_err(|CreateFailed| ApiError::Unavailable)?;
    Ok(Success {
        status: StatusCode::CREATED,
        body: Bytes::from(pet.to_json()),
        extra: Extra::Location {
            base_url: &api.options.base_url,
            id: pet.id(),
        },
    })
}

/// Operations without a request body refuse one.
fn no_body(body: &BodyRead) -> Result<(), ApiError> {
    match body {
        BodyRead::Complete(bytes) if bytes.is_empty() => Ok(()),
        BodyRead::TooLarge => Err(ApiError::PayloadTooLarge(MAX_BODY)),
        BodyRead::Trailers => Err(ApiError::InvalidBody(TRAILERS.into())),
        _ => Err(ApiError::InvalidBody(
            "this operation takes no request body".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use petstore_core::{CategoryId, Inventory, PageSize};

    #[test]
    fn a_final_page_given_again_is_the_bytes_given_last() {
        // Another thread: this one's last page is its own.
        std::thread::spawn(|| {
            let inventory = Inventory::in_memory();
            for name in ["Rex", "Tom", "Kitty"] {
                let pet = NewPet::new(name, CategoryId::MIN).unwrap();
                inventory.create(pet).unwrap();
            }
            let first = |n| ListQuery::new().limit(PageSize::new(n).unwrap());
            let page = inventory.final_page(&first(2)).unwrap();
            let held = Arc::strong_count(&page);
            let a = shared_body(page.clone());
            assert_eq!(&a[..], &page.body[..]);
            let once = Arc::strong_count(&page);
            // The same page again: the same bytes, no new owner of the page.
            let b = shared_body(page.clone());
            assert_eq!(Arc::strong_count(&page), once);
            assert_eq!(a, b);
            // Another page takes its place; the first is let go once its
            // bytes are.
            let other = inventory.final_page(&first(1)).unwrap();
            assert_eq!(&shared_body(other.clone())[..], &other.body[..]);
            drop((a, b));
            assert_eq!(Arc::strong_count(&page), held);
        })
        .join()
        .unwrap();
    }
}
