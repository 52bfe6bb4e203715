//! The `createPet` request body parser behind
//! [`NewPet::from_json`](crate::NewPet::from_json).
//!
//! Why not `#[derive(Deserialize)]` with `deny_unknown_fields`: serde's
//! messages do not say which field was wrong in a form a client can act on,
//! and a derive cannot tell an `id` (refused with its own message) from any
//! other unknown field. This visitor walks the object once, records the
//! first problem, and still consumes the rest, so a syntax error anywhere
//! wins over a field error (the body is not JSON at all).

use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

use super::error::{IdError, PetError};
use super::id::CategoryId;
use super::name::validate_name;
use super::new_pet::NewPet;
use super::status::PetStatus;

pub(crate) fn parse_new_pet(body: &[u8]) -> Result<NewPet, PetError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(PetError::Empty);
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let checked = de::Deserializer::deserialize_any(&mut de, BodyVisitor).and_then(|checked| {
        de.end()?;
        Ok(checked)
    });
    match checked {
        Ok(result) => result,
        // The visitor accepts only an object, and the values inside it are
        // read as `Value`s that any JSON fits; so a data error means the
        // top level was something other than an object.
        Err(e) if e.classify() == serde_json::error::Category::Data => Err(PetError::NotAnObject),
        Err(e) => Err(PetError::Malformed(e.to_string())),
    }
}

enum Key {
    Name,
    CategoryId,
    Status,
    Id,
    Other(String),
}

struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Key;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Key, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for KeySeed {
    type Value = Key;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
        Ok(match v {
            "name" => Key::Name,
            "categoryId" => Key::CategoryId,
            "status" => Key::Status,
            "id" => Key::Id,
            other => Key::Other(other.to_owned()),
        })
    }
}

struct BodyVisitor;

impl<'de> Visitor<'de> for BodyVisitor {
    /// Outer `Result`: the JSON itself; inner: the pet's rules.
    type Value = Result<NewPet, PetError>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut first_error: Option<PetError> = None;
        let mut name: Option<String> = None;
        let mut category: Option<CategoryId> = None;
        let mut status: Option<PetStatus> = None;
        let mut seen = [false; 3];

        while let Some(key) = map.next_key_seed(KeySeed)? {
            let (slot, label) = match key {
                Key::Name => (0, "name"),
                Key::CategoryId => (1, "categoryId"),
                Key::Status => (2, "status"),
                Key::Id => {
                    map.next_value::<IgnoredAny>()?;
                    first_error.get_or_insert(PetError::IdNotAllowed);
                    continue;
                }
                Key::Other(other) => {
                    map.next_value::<IgnoredAny>()?;
                    first_error.get_or_insert(PetError::UnknownField(other));
                    continue;
                }
            };
            let value: Value = map.next_value()?;
            if first_error.is_some() {
                continue;
            }
            if std::mem::replace(&mut seen[slot], true) {
                first_error = Some(PetError::DuplicateField(label));
                continue;
            }
            let checked = match slot {
                0 => name_of(value).map(|n| name = Some(n)),
                1 => category_of(value).map(|c| category = Some(c)),
                _ => status_of(value).map(|s| status = Some(s)),
            };
            if let Err(e) = checked {
                first_error = Some(e);
            }
        }

        if let Some(e) = first_error {
            return Ok(Err(e));
        }
        let Some(name) = name else {
            return Ok(Err(PetError::MissingField("name")));
        };
        let Some(category) = category else {
            return Ok(Err(PetError::MissingField("categoryId")));
        };
        Ok(NewPet::new(name, category).map(|p| p.with_status(status.unwrap_or_default())))
    }
}

fn name_of(value: Value) -> Result<String, PetError> {
    match value {
        Value::String(s) => {
            validate_name(&s).map_err(PetError::Name)?;
            Ok(s)
        }
        _ => Err(PetError::WrongType {
            field: "name",
            expected: "a string",
        }),
    }
}

fn category_of(value: Value) -> Result<CategoryId, PetError> {
    match value {
        Value::Number(n) => n
            .as_u64()
            .and_then(CategoryId::new)
            .ok_or(PetError::CategoryId(IdError::OutOfRange)),
        _ => Err(PetError::WrongType {
            field: "categoryId",
            expected: "an integer",
        }),
    }
}

fn status_of(value: Value) -> Result<PetStatus, PetError> {
    match value {
        Value::String(s) => s.parse().map_err(|_| PetError::Status),
        _ => Err(PetError::WrongType {
            field: "status",
            expected: "one of the strings available, pending, sold",
        }),
    }
}

impl NewPet {
    /// Parses and validates a `createPet` request body. The server and an
    /// embedder refuse exactly the same inputs: a body that is empty, not
    /// JSON, not an object, has an unknown, duplicate or missing field, an
    /// `id`, a value of the wrong type or out of range. The error names the
    /// field and the reason.
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::{NewPet, PetError};
    /// let err = NewPet::from_json(br#"{"name":"Rex","categoryId":0}"#).unwrap_err();
    /// assert_eq!(err.field(), Some("categoryId"));
    /// let err = NewPet::from_json(br#"{"id":1,"name":"Rex","categoryId":1}"#).unwrap_err();
    /// assert_eq!(err, PetError::IdNotAllowed);
    /// ```
    pub fn from_json(body: &[u8]) -> Result<Self, PetError> {
        parse_new_pet(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pet::error::NameError;

    fn parse(s: &str) -> Result<NewPet, PetError> {
        parse_new_pet(s.as_bytes())
    }

    #[test]
    fn accepts_the_contract_shape() {
        let pet = parse(r#" {"name":"Rex","categoryId":9223372036854775807} "#);
        assert!(
            matches!(pet, Ok(ref p) if p.status() == PetStatus::Available
            && p.category_id() == CategoryId::MAX && p.name() == "Rex")
        );
        let pet = parse(r#"{"status":"sold","categoryId":1,"name":"\u00e9\"x"}"#);
        assert!(matches!(pet, Ok(ref p) if p.status() == PetStatus::Sold && p.name() == "é\"x"));
    }

    #[test]
    fn refuses_every_bad_shape_with_a_named_reason() {
        use PetError::*;
        let cases: &[(&str, PetError)] = &[
            ("", Empty),
            ("  \n", Empty),
            ("[]", NotAnObject),
            ("null", NotAnObject),
            ("\"x\"", NotAnObject),
            ("42", NotAnObject),
            (r#"{"name":"a","categoryId":1,"id":5}"#, IdNotAllowed),
            (
                r#"{"name":"a","categoryId":1,"x":5}"#,
                UnknownField("x".into()),
            ),
            (
                r#"{"name":"a","name":"b","categoryId":1}"#,
                DuplicateField("name"),
            ),
            (r#"{"categoryId":1}"#, MissingField("name")),
            (r#"{"name":"a"}"#, MissingField("categoryId")),
            ("{}", MissingField("name")),
            (
                r#"{"name":1,"categoryId":1}"#,
                WrongType {
                    field: "name",
                    expected: "a string",
                },
            ),
            (
                r#"{"name":null,"categoryId":1}"#,
                WrongType {
                    field: "name",
                    expected: "a string",
                },
            ),
            (
                r#"{"name":"a","categoryId":"1"}"#,
                WrongType {
                    field: "categoryId",
                    expected: "an integer",
                },
            ),
            (
                r#"{"name":"a","categoryId":0}"#,
                CategoryId(IdError::OutOfRange),
            ),
            (
                r#"{"name":"a","categoryId":-3}"#,
                CategoryId(IdError::OutOfRange),
            ),
            (
                r#"{"name":"a","categoryId":1.5}"#,
                CategoryId(IdError::OutOfRange),
            ),
            (
                r#"{"name":"a","categoryId":9223372036854775808}"#,
                CategoryId(IdError::OutOfRange),
            ),
            (
                r#"{"name":"a","categoryId":1e400}"#,
                Malformed("number out of range at line 1 column 30".into()),
            ),
            (r#"{"name":"a","categoryId":1,"status":"lost"}"#, Status),
            (
                r#"{"name":"a","categoryId":1,"status":null}"#,
                WrongType {
                    field: "status",
                    expected: "one of the strings available, pending, sold",
                },
            ),
            (r#"{"name":"","categoryId":1}"#, Name(NameError::Empty)),
            (r#"{"name":" ","categoryId":1}"#, Name(NameError::Blank)),
            (
                r#"{"name":"a\nb","categoryId":1}"#,
                Name(NameError::ControlCharacter),
            ),
        ];
        for (body, want) in cases {
            assert_eq!(&parse(body).unwrap_err(), want, "body {body:?}");
        }
    }

    #[test]
    fn messages_quote_a_long_field_name_cut_at_64_characters() {
        let field = "\u{e9}".repeat(30_000);
        let body = format!(r#"{{"{field}":1,"name":"a","categoryId":1}}"#);
        let err = parse(&body).unwrap_err();
        assert_eq!(err.field(), Some(field.as_str()));
        assert_eq!(
            err.to_string(),
            format!(
                "unknown field `{}…`; allowed fields are name, categoryId, status",
                "\u{e9}".repeat(64)
            )
        );
    }

    #[test]
    fn names_follow_the_unicode_rules_in_the_body_too() {
        for (name, want) in [
            ("\\u200b", NameError::Blank),
            ("\u{2060}\u{feff}", NameError::Blank),
            ("Rex\u{202e}", NameError::ControlCharacter),
            ("Rex\\ufdd0", NameError::ControlCharacter),
        ] {
            let body = format!(r#"{{"name":"{name}","categoryId":1}}"#);
            assert_eq!(parse(&body), Err(PetError::Name(want)), "{body}");
        }
    }

    #[test]
    fn syntax_errors_win_over_field_errors() {
        for body in [
            r#"{"x":1"#,
            r#"{"name":"a","categoryId":1} x"#,
            r#"{"x":1,}"#,
            "{",
            "\u{feff}{}",
        ] {
            assert!(
                matches!(parse(body), Err(PetError::Malformed(_))),
                "{body:?}"
            );
        }
        assert!(matches!(
            parse_new_pet(b"{\"name\":\"\xff\",\"categoryId\":1}"),
            Err(PetError::Malformed(_))
        ));
    }
}
