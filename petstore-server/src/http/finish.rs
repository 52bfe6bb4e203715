//! [`Admitted::finish`]: an admitted request answered once its body is
//! read, or [`Finished::Waiting`] for the store (a create or a transition
//! it cannot answer at once, a get of an id its read copy may not hold
//! yet). Which backend answers is the store's business (`store/`), not
//! this file's.

use std::cell::RefCell;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Response, StatusCode};
use petstore_core::{FinalPage, ListQuery, NewPet, Pet, PetId, Transition, TransitionError};

use super::admit::{Admitted, Checked, Served};
use super::api::Api;
use super::body::{BodyRead, MAX_BODY};
use super::connection::Connection;
use super::error::{ApiError, HttpResponse};
use super::reply::{decorate, refusal};
use crate::headers::Extra;
use crate::state::AppState;
use crate::store::{CreateFailed, TransitionFailed};
use crate::util::buffers;

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
    Transition(PetId, Transition),
    CatchUp(PetId),
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
            Work::Transition(id, transition) => {
                transitioned(id, transition, state.store.transition(id, transition).await)
            }
            Work::CatchUp(id) => match (state.store.catch_up(id).await, get_pet(state, api, id)) {
                // Not in the copy, and the store could not say whether it
                // exists: a 404 could deny an acknowledged pet.
                (false, Err(ApiError::NotFound(_))) => Err(ApiError::Unconfirmed),
                (_, result) => result,
            },
        };
        self.admitted
            .answer(api, result, |response, served| (response, served))
    }
}

impl Admitted {
    /// Answers the admitted request with `body`, what the server read of
    /// its body, or says what it must wait for.
    pub fn finish(self, connection: &Connection, body: BodyRead) -> Finished {
        let (state, api) = (&*connection.state, &*connection.api);
        let result = match self.op {
            Checked::ListPets(list) => no_body(&body).map(|()| list_pets(state, api, &list)),
            Checked::CreatePet => match new_pet(body) {
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
            Checked::Transition(id, transition) => match transition_body(body) {
                Err(error) => Err(error),
                Ok(()) => match state.store.transition_now(id, transition) {
                    Some(result) => transitioned(id, transition, result),
                    None => return self.wait(Work::Transition(id, transition)),
                },
            },
            Checked::ListOrders => no_body(&body).and_then(|()| {
                Err(ApiError::NotImplemented(
                    "store orders are not implemented: the specification gives only the operation's existence".into(),
                ))
            }),
        };
        self.answer(api, result, Finished::Answered)
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
    /// caller's enum) was a `memcpy` (`scripts/profile`).
    fn answer<T>(
        self,
        api: &Api,
        result: Result<Success<'_>, ApiError>,
        wrap: impl FnOnce(HttpResponse, Served) -> T,
    ) -> T {
        let mut response;
        match result {
            Ok(success) => {
                response = Response::new(Full::new(success.body));
                *response.status_mut() = success.status;
                *response.headers_mut() = self.quota.success(self.binding, success.extra);
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
        },
    }
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
    let bytes = complete(body)?;
    match &bytes[..] {
        b"" | b"{}" => Ok(()),
        _ => Err(ApiError::InvalidBody(
            "a transition takes no request body, an empty one, or exactly {}".into(),
        )),
    }
}

/// The 200 of a pet that changed status, or why it did not: the 409's
/// message is the core's own words for the conflict, so it is the same
/// whichever store decided.
fn transitioned(
    id: PetId,
    transition: Transition,
    result: Result<Pet, TransitionFailed>,
) -> Result<Success<'static>, ApiError> {
    match result {
        Ok(pet) => Ok(Success {
            status: StatusCode::OK,
            body: Bytes::from(pet.to_json()),
            extra: Extra::Nothing,
        }),
        Err(TransitionFailed::NotFound) => Err(ApiError::NotFound(format!("no pet with id {id}"))),
        Err(TransitionFailed::Conflict(current)) => Err(ApiError::StatusConflict(
            TransitionError::Conflict {
                id,
                current,
                transition,
            }
            .to_string(),
        )),
        // Not stored, or not known to be: as a create's 503.
        Err(TransitionFailed::Unavailable) => Err(ApiError::Unavailable),
    }
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
    use petstore_core::{CategoryId, Inventory, Limit};

    #[test]
    fn a_final_page_given_again_is_the_bytes_given_last() {
        // Another thread: this one's last page is its own.
        std::thread::spawn(|| {
            let inventory = Inventory::in_memory();
            for name in ["Rex", "Tom", "Kitty"] {
                let pet = NewPet::new(name, CategoryId::MIN).unwrap();
                inventory.create(pet).unwrap();
            }
            let first = |n| ListQuery::new().limit(Limit::new(n).unwrap());
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
