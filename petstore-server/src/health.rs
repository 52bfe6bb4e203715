//! `GET /healthz`: whether this instance can do its job, for a load
//! balancer. 200 `{"status":"ok"}` while pets can be stored; 503
//! `{"status":"degraded","reason":"..."}` when they cannot (the journal
//! failed, or was deleted or replaced), so that the instance is taken out
//! while reads still work for whoever is connected. The reason says what
//! kind of failure it is, never a path or an error number (those are in
//! the log).

use hyper::body::Bytes;
use hyper::StatusCode;
use petstore_core::Inventory;
use serde::Serialize;

#[derive(Serialize)]
struct Degraded {
    status: &'static str,
    reason: String,
}

/// The status and JSON body of `/healthz` for `inventory`. Costs one
/// `stat` of the journal (to notice a deleted journal before any create
/// does), which only health checks pay.
pub fn check(inventory: &Inventory) -> (StatusCode, Bytes) {
    match inventory.storage_failure() {
        None => (StatusCode::OK, Bytes::from_static(b"{\"status\":\"ok\"}")),
        Some(failure) => {
            let body = Degraded {
                status: "degraded",
                reason: format!("pets cannot be stored: {}", failure.fault),
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
        let (status, body) = check(&Inventory::in_memory());
        assert_eq!(status, StatusCode::OK);
        assert_eq!(&body[..], b"{\"status\":\"ok\"}");
    }
}
