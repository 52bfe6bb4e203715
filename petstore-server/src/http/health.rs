//! `GET /healthz`: whether this instance can do its job, for a load
//! balancer. 200 `{"status":"ok"}` while pets can be stored; 503
//! `{"status":"degraded","reason":"..."}` when they cannot (the journal
//! failed, or was deleted or replaced), so that the instance is taken out
//! while reads still work for whoever is connected. The reason says what
//! kind of failure it is, never a path or an error number (those are in
//! the log). With PostgreSQL, 503 while it cannot be reached. While the
//! server drains before stopping (`--shutdown-delay`), 503
//! `{"status":"draining"}`.

use hyper::body::Bytes;
use hyper::StatusCode;
use serde::Serialize;

use crate::store::Store;

#[derive(Serialize)]
struct Degraded {
    status: &'static str,
    reason: String,
}

/// The status and JSON body of `/healthz` for `store`, or 503
/// `{"status":"draining"}` while the server drains before it stops (a
/// load balancer takes it out; it still serves what comes). Costs one
/// `stat` of the journal (to notice a deleted journal before any create
/// does), which only health checks pay.
pub fn check(store: &Store, draining: bool) -> (StatusCode, Bytes) {
    if draining {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Bytes::from_static(b"{\"status\":\"draining\"}"),
        );
    }
    match store.failure() {
        None => (StatusCode::OK, Bytes::from_static(b"{\"status\":\"ok\"}")),
        Some(failure) => {
            let body = Degraded {
                status: "degraded",
                reason: format!("pets cannot be stored: {failure}"),
            };
            // Two plain string fields into a Vec cannot fail.
            let bytes = serde_json::to_vec(&body).unwrap_or_default();
            (StatusCode::SERVICE_UNAVAILABLE, Bytes::from(bytes))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_in_memory_inventory_is_healthy() {
        let store = Store::Memory(std::sync::Arc::new(petstore_core::Inventory::in_memory()));
        let (status, body) = check(&store, false);
        assert_eq!(status, StatusCode::OK);
        assert_eq!(&body[..], b"{\"status\":\"ok\"}");
        let (status, body) = check(&store, true);
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(&body[..], b"{\"status\":\"draining\"}");
    }
}
