//! [`NewOrder`]: an order to be placed (`{"petId": 7, "holdSeconds":
//! 900}`), valid by construction, and [`Hold`]: how long it holds.
//!
//! Why a visitor and not a derive: as for a pet's body, a duplicate field
//! is refused (serde_json keeps the last), every message names its field,
//! and a syntax error anywhere wins over a field error.

use std::fmt;
use std::time::Duration;

use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

use super::error::OrderError;
use crate::pet::PetId;

/// How long an order holds its pet: 60 to 86,400 whole seconds.
///
/// # Examples
///
/// ```
/// use petstore_core::order::Hold;
/// assert_eq!(Hold::default().secs(), 900);
/// assert!(Hold::from_secs(59).is_none());
/// assert_eq!(Hold::from_secs(86_400).map(Hold::secs), Some(86_400));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Hold(u32);

impl Hold {
    /// The shortest hold: a minute.
    pub const MIN_SECS: u32 = 60;
    /// The longest hold: a day.
    pub const MAX_SECS: u32 = 86_400;
    /// The hold of an order that does not say, and of a reservation.
    pub const DEFAULT: Hold = Hold(900);

    /// A hold of `secs` seconds; `None` outside 60 to 86,400.
    pub fn from_secs(secs: u64) -> Option<Hold> {
        let secs = u32::try_from(secs).ok()?;
        (Self::MIN_SECS..=Self::MAX_SECS)
            .contains(&secs)
            .then_some(Hold(secs))
    }

    /// Its length in seconds.
    pub fn secs(self) -> u32 {
        self.0
    }

    /// Its length.
    pub fn duration(self) -> Duration {
        Duration::from_secs(u64::from(self.0))
    }
}

impl Default for Hold {
    fn default() -> Self {
        Hold::DEFAULT
    }
}

/// An order to be placed: the pet, and how long to hold it.
///
/// # Examples
///
/// ```
/// use petstore_core::order::{Hold, NewOrder, OrderError};
/// let order = NewOrder::from_json(br#"{"petId": 7}"#).unwrap();
/// assert_eq!((order.pet.get(), order.hold), (7, Hold::DEFAULT));
/// let err = NewOrder::from_json(br#"{"petId": 7, "holdSeconds": 30}"#).unwrap_err();
/// assert_eq!(err, OrderError::BadHold);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewOrder {
    /// The pet to hold.
    pub pet: PetId,
    /// How long.
    pub hold: Hold,
}

impl NewOrder {
    /// An order for `pet` with the default hold.
    pub fn new(pet: PetId) -> NewOrder {
        NewOrder {
            pet,
            hold: Hold::DEFAULT,
        }
    }

    /// Parses a `placeOrder` body: a JSON object with `petId` and
    /// optionally `holdSeconds`, nothing else.
    pub fn from_json(body: &[u8]) -> Result<NewOrder, OrderError> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Err(OrderError::Empty);
        }
        let mut de = serde_json::Deserializer::from_slice(body);
        let checked = de::Deserializer::deserialize_any(&mut de, BodyVisitor).and_then(|c| {
            de.end()?;
            Ok(c)
        });
        match checked {
            Ok(result) => result,
            // The visitor takes only an object, and reads its values as
            // `Value`s any JSON fits: a data error is a top level that
            // was no object.
            Err(e) if e.classify() == serde_json::error::Category::Data => {
                Err(OrderError::NotAnObject)
            }
            Err(e) => Err(OrderError::Malformed(e.to_string())),
        }
    }
}

/// An order for the pet, with the default hold.
impl From<PetId> for NewOrder {
    fn from(pet: PetId) -> NewOrder {
        NewOrder::new(pet)
    }
}

struct BodyVisitor;

impl<'de> Visitor<'de> for BodyVisitor {
    type Value = Result<NewOrder, OrderError>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut first: Option<OrderError> = None;
        let mut pet: Option<Value> = None;
        let mut hold: Option<Value> = None;
        while let Some(key) = map.next_key::<String>()? {
            let slot = match key.as_str() {
                "petId" => Some((&mut pet, "petId")),
                "holdSeconds" => Some((&mut hold, "holdSeconds")),
                _ => None,
            };
            match slot {
                Some((slot, name)) => {
                    let value: Value = map.next_value()?;
                    if slot.is_some() {
                        first.get_or_insert(OrderError::DuplicateField(name));
                    }
                    *slot = Some(value);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                    first.get_or_insert(OrderError::UnknownField(key));
                }
            }
        }
        if let Some(error) = first {
            return Ok(Err(error));
        }
        let pet = match pet {
            None => return Ok(Err(OrderError::MissingPetId)),
            Some(value) => match value.as_u64().and_then(PetId::new) {
                Some(pet) => pet,
                None => return Ok(Err(OrderError::BadPetId)),
            },
        };
        let hold = match hold {
            None => Hold::DEFAULT,
            Some(value) => match value.as_u64().and_then(Hold::from_secs) {
                Some(hold) => hold,
                None => return Ok(Err(OrderError::BadHold)),
            },
        };
        Ok(Ok(NewOrder { pet, hold }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bad_body_is_named() {
        let cases: &[(&[u8], OrderError)] = &[
            (b"", OrderError::Empty),
            (b"  ", OrderError::Empty),
            (b"[]", OrderError::NotAnObject),
            (b"7", OrderError::NotAnObject),
            (b"{}", OrderError::MissingPetId),
            (br#"{"petId":0}"#, OrderError::BadPetId),
            (br#"{"petId":-1}"#, OrderError::BadPetId),
            (br#"{"petId":1.5}"#, OrderError::BadPetId),
            (br#"{"petId":"7"}"#, OrderError::BadPetId),
            (br#"{"petId":null}"#, OrderError::BadPetId),
            (br#"{"petId":9223372036854775808}"#, OrderError::BadPetId),
            (br#"{"petId":7,"holdSeconds":59}"#, OrderError::BadHold),
            (br#"{"petId":7,"holdSeconds":86401}"#, OrderError::BadHold),
            (br#"{"petId":7,"holdSeconds":"900"}"#, OrderError::BadHold),
            (
                br#"{"petId":7,"petId":8}"#,
                OrderError::DuplicateField("petId"),
            ),
            (
                br#"{"petId":7,"id":1}"#,
                OrderError::UnknownField("id".into()),
            ),
        ];
        for (body, expected) in cases {
            let text = String::from_utf8_lossy(body);
            assert_eq!(NewOrder::from_json(body).as_ref(), Err(expected), "{text}");
        }
        assert!(matches!(
            NewOrder::from_json(br#"{"petId":7"#),
            Err(OrderError::Malformed(_))
        ));
        // A syntax error after a field error still says the body is no JSON.
        assert!(matches!(
            NewOrder::from_json(br#"{"x":1,"#),
            Err(OrderError::Malformed(_))
        ));
    }

    #[test]
    fn a_good_body_is_taken_whole() {
        let order = NewOrder::from_json(br#" {"holdSeconds":60,"petId":3} "#).unwrap();
        assert_eq!((order.pet.get(), order.hold.secs()), (3, 60));
        let order = NewOrder::from_json(br#"{"petId":3,"holdSeconds":86400}"#).unwrap();
        assert_eq!(order.hold.secs(), 86_400);
    }
}
