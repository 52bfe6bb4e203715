//! An order's JSON, as the contract shows it:
//! `{"id":12,"petId":7,"status":"placed","placedBy":"shop","placedAt":"…","expiresAt":"…"}`,
//! with `"closedAt"` once it left `placed`.

use super::record::Order;

impl Order {
    /// The order as the JSON of the contract's `Order`.
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::*;
    /// use petstore_core::order::Actor;
    /// let inventory = Inventory::in_memory();
    /// let rex = inventory.create(NewPet::new("Rex", CategoryId::MIN).unwrap()).unwrap();
    /// let at = Timestamp::from_unix_secs(1_764_324_000);
    /// let order = inventory.place_order(&Actor::new("shop"), rex.id().into(), at).unwrap();
    /// assert_eq!(
    ///     String::from_utf8(order.to_json()).unwrap(),
    ///     r#"{"id":1,"petId":1,"status":"placed","placedBy":"shop","placedAt":"2025-11-28T10:00:00Z","expiresAt":"2025-11-28T10:15:00Z"}"#
    /// );
    /// ```
    pub fn to_json(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(160);
        self.encode(&mut out);
        out
    }

    /// Appends the order's JSON to `out`.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        use std::io::Write;
        let name = serde_json::to_string(&*self.placed_by).unwrap_or_else(|_| "\"\"".into());
        let _ = write!(
            out,
            r#"{{"id":{},"petId":{},"status":"{}","placedBy":{},"placedAt":"{}","expiresAt":"{}""#,
            self.id,
            self.pet,
            self.status.as_str(),
            name,
            self.placed_at.to_rfc3339(),
            self.expires_at.to_rfc3339(),
        );
        if let Some(closed) = self.closed_at {
            let _ = write!(out, r#","closedAt":"{}""#, closed.to_rfc3339());
        }
        out.push(b'}');
    }
}

/// Orders as a JSON array, for a page.
pub(crate) fn encode_array<'a>(orders: impl IntoIterator<Item = &'a Order>) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.push(b'[');
    for (i, order) in orders.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        order.encode(&mut out);
    }
    out.push(b']');
    out
}
