//! The record format: one JSON line per created pet, per transition of a
//! pet or per order step, and a time record before a batch in a new
//! second, each with the CRC-32 of its bytes; how a record is written, and
//! how one is checked and decoded. The format, byte for byte, and why a
//! transition record names the transition: docs/durability.md, "Record
//! format".

use crate::clock::Timestamp;
use crate::idempotency::{Fingerprint, IdempotencyKey, Keyed, Scope};
use std::sync::Arc;

use crate::order::{Order, OrderId, OrderStatus};
use crate::pet::json::{encode, parse_canonical};
use crate::pet::{validate_name, Pet, PetId, PetStatus, Transition};

const LINE_PREFIX: &[u8] = br#"{"pet":"#;
const TRANSITION_PREFIX: &[u8] = br#"{"transition":"#;
/// A write with its idempotency key, in one record: see [`encode_keyed_line`].
const KEYED_PREFIX: &[u8] = br#"{"keyed":"#;
/// An order's step: see [`encode_order_line`].
const ORDER_PREFIX: &[u8] = br#"{"order":"#;
/// The time of the records after it: see [`encode_time_line`].
const TIME_PREFIX: &[u8] = br#"{"time":"#;
/// The transition record's body as written: `{"id":7,"action":"sell"}`.
const ACTION_PREFIX: &[u8] = br#","action":""#;

/// What a checked record holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Record {
    /// A created pet: its id and status; its canonical JSON is in the
    /// scratch buffer given to [`decode_record`].
    Pet(PetId, PetStatus),
    /// A transition of an existing pet.
    Transition(PetId, Transition),
    /// A transition refused for its pet's status then, kept for its
    /// idempotency key (only ever in a keyed record): changes nothing.
    Conflict(PetId, PetStatus, Transition),
    /// An order's step, with its pet's change.
    Order(OrderStep),
    /// A step refused for its order's status then, kept for its
    /// idempotency key (only in a keyed record): changes nothing.
    OrderConflict(OrderId, OrderStatus),
    /// The time (Unix seconds) the records after it were written at,
    /// until the next: what dates a created pet's event. Changes nothing.
    Time(u64),
}

/// One step of an order, and its pet's change with it, in one record:
/// a placed order holds its pet (`pending`), a sale sells it at once, a
/// completed order sells it, a cancelled or expired one makes it
/// `available` again. Times are whole seconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OrderStep {
    pub(crate) id: OrderId,
    pub(crate) kind: StepKind,
    /// When it was made (Unix seconds).
    pub(crate) at: u64,
    /// The pet transition it was made through, when it was.
    pub(crate) door: Option<Transition>,
}

/// What an [`OrderStep`] does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum StepKind {
    /// A new order placed, holding `pet` until `expires`.
    Place {
        pet: PetId,
        by: Arc<str>,
        expires: u64,
    },
    /// A new order placed and completed at once: `pet` sold.
    Sale { pet: PetId, by: Arc<str> },
    /// A placed order leaves `placed` for this status.
    Close(OrderStatus),
}

impl OrderStep {
    /// The order as this step leaves it: a new one for a place or a sale
    /// (named by `by`, shared with the key's earlier orders when given),
    /// `before` closed for a close; `None` for a close of no order.
    pub(crate) fn order_after(
        &self,
        before: Option<Order>,
        by: impl FnOnce(&Arc<str>) -> Arc<str>,
    ) -> Option<Order> {
        let at = Timestamp::from_unix_secs(self.at);
        let new = |pet: PetId, by: Arc<str>, status, expires_at, closed_at| Order {
            id: self.id,
            pet,
            status,
            placed_by: by,
            placed_at: at,
            expires_at,
            closed_at,
        };
        match &self.kind {
            StepKind::Place {
                pet,
                by: name,
                expires,
            } => Some(new(
                *pet,
                by(name),
                OrderStatus::Placed,
                Timestamp::from_unix_secs(*expires),
                None,
            )),
            StepKind::Sale { pet, by: name } => {
                Some(new(*pet, by(name), OrderStatus::Completed, at, Some(at)))
            }
            StepKind::Close(status) => before.map(|mut order| {
                order.status = *status;
                order.closed_at = Some(at);
                order
            }),
        }
    }
}

impl StepKind {
    fn name(&self) -> &'static str {
        match self {
            StepKind::Place { .. } => "place",
            StepKind::Sale { .. } => "sale",
            StepKind::Close(OrderStatus::Completed) => "complete",
            StepKind::Close(OrderStatus::Cancelled) => "cancel",
            StepKind::Close(_) => "expire",
        }
    }
}

/// What a keyed record holds besides its key.
#[derive(Clone, Copy, Debug)]
pub(crate) enum KeyedWrite<'a> {
    /// A created pet.
    Pet(&'a Pet),
    /// A transition made.
    Transition(PetId, Transition),
    /// A transition refused: the pet's status then.
    Conflict(PetId, PetStatus, Transition),
    /// An order's step.
    Order(&'a OrderStep),
    /// An order's step refused: the order's status then.
    OrderConflict(OrderId, OrderStatus),
}
const CRC_PREFIX: &[u8] = br#","crc32":""#;
const LINE_SUFFIX: &[u8] = b"\"}";
/// `,"crc32":"` + 8 hex digits + `"}`.
const TRAILER_LEN: usize = 10 + 8 + 2;

/// The longest a record can be without whitespace, newline excluded:
/// [`LINE_PREFIX`] and the trailer around the longest pet JSON that
/// replay accepts. Replay takes any layout serde_json reads (a record
/// need not be what `encode` writes, only check out), so every string
/// may be written with escapes, each character at its longest:
///
/// - the keys `"id"`, `"name"`, `"categoryId"`, `"status"`: 2 + 4 + 10 + 6
///   characters, each `\uXXXX` (6 bytes), plus 2 quotes each:
///   14 + 26 + 62 + 38 = 140;
/// - the name: [`MAX_NAME_CHARS`](crate::pet::MAX_NAME_CHARS) characters,
///   each at most a surrogate pair `\uXXXX\uXXXX` (12 bytes; raw UTF-8 is
///   at most 4), plus 2 quotes: 100 * 12 + 2 = 1,202;
/// - the status: `available`, the longest, 9 * 6 + 2 quotes = 56;
/// - the two numbers: at most 20 digits each (a `u64`) = 40;
/// - `{`, `}`, 3 commas, 4 colons = 9.
///
/// That is 1,447 bytes of pet, 1,474 with the 27 around it.
const LONGEST_COMPACT_RECORD: usize = LINE_PREFIX.len()
    + (2 + 2 * 6) // "id"
    + (2 + 4 * 6) // "name"
    + (2 + 10 * 6) // "categoryId"
    + (2 + 6 * 6) // "status"
    + (2 + crate::pet::MAX_NAME_CHARS * 12)
    + (2 + 9 * 6) // "available"
    + 2 * 20
    + 9
    + TRAILER_LEN;

/// The longest line that can be a record, newline excluded. JSON allows
/// any amount of whitespace between tokens, which nothing here writes but
/// a record assembled by hand may hold, so the bound is not the exact
/// [`LONGEST_COMPACT_RECORD`] but a generous multiple of it (over 40
/// times): a hand-made record is never refused for its spaces, and 64 KiB
/// is still nothing next to the read buffer. A longer line is corruption,
/// never a torn write, and is never held in memory beyond these bytes.
pub(crate) const MAX_RECORD_LEN: usize = 64 * 1024;

const _: () = assert!(MAX_RECORD_LEN >= 40 * LONGEST_COMPACT_RECORD);

/// Appends one journal line for `pet`.
pub(super) fn encode_line(pet: &Pet, out: &mut Vec<u8>) {
    out.extend_from_slice(LINE_PREFIX);
    let start = out.len();
    encode(pet, out);
    let crc = crc32fast::hash(&out[start..]);
    out.extend_from_slice(CRC_PREFIX);
    out.extend_from_slice(format!("{crc:08x}").as_bytes());
    out.extend_from_slice(LINE_SUFFIX);
    out.push(b'\n');
}

/// Appends one journal line for the transition of pet `id`.
pub(crate) fn encode_transition_line(id: PetId, transition: Transition, out: &mut Vec<u8>) {
    out.extend_from_slice(TRANSITION_PREFIX);
    let start = out.len();
    out.extend_from_slice(br#"{"id":"#);
    out.extend_from_slice(id.get().to_string().as_bytes());
    out.extend_from_slice(ACTION_PREFIX);
    out.extend_from_slice(transition.as_str().as_bytes());
    out.extend_from_slice(b"\"}");
    let crc = crc32fast::hash(&out[start..]);
    out.extend_from_slice(CRC_PREFIX);
    out.extend_from_slice(format!("{crc:08x}").as_bytes());
    out.extend_from_slice(LINE_SUFFIX);
    out.push(b'\n');
}

/// Appends one journal line that dates the records after it:
/// `{"time":1764324000,"crc32":"..."}`. A batch of the group commit
/// starts with one when its second is not the last one written, so a
/// busy journal spends one line a second on it.
pub(crate) fn encode_time_line(unix_secs: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(TIME_PREFIX);
    let start = out.len();
    crate::pet::json::push_decimal(out, unix_secs);
    let crc = crc32fast::hash(&out[start..]);
    out.extend_from_slice(CRC_PREFIX);
    out.extend_from_slice(format!("{crc:08x}").as_bytes());
    out.extend_from_slice(LINE_SUFFIX);
    out.push(b'\n');
}

/// A checked time record's body: decimal digits, one spelling.
fn parse_time(body: &[u8]) -> Result<u64, String> {
    let bad = || format!("bad time: {:?}", String::from_utf8_lossy(body));
    if body.is_empty() || body.len() > 19 || (body[0] == b'0' && body.len() > 1) {
        return Err(bad());
    }
    if !body.iter().all(u8::is_ascii_digit) {
        return Err(bad());
    }
    std::str::from_utf8(body)
        .ok()
        .and_then(|digits| digits.parse().ok())
        .ok_or_else(bad)
}

/// An order step's body: `{"step":"place","id":12,"pet":7,"by":"shop","at":…,"expires":…}`,
/// `{"step":"sale","id":13,"pet":8,"by":"shop","at":…}` or
/// `{"step":"complete","id":12,"at":…}` (`cancel`, `expire`), with
/// `"door":"reserve"` (`release`, `sell`) when a pet transition made it.
fn encode_step(step: &OrderStep, out: &mut Vec<u8>) {
    use std::io::Write;
    let string = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
    let _ = write!(out, r#"{{"step":"{}","id":{}"#, step.kind.name(), step.id);
    match &step.kind {
        StepKind::Place { pet, by, expires } => {
            let _ = write!(
                out,
                r#","pet":{pet},"by":{},"expires":{expires}"#,
                string(by)
            );
        }
        StepKind::Sale { pet, by } => {
            let _ = write!(out, r#","pet":{pet},"by":{}"#, string(by));
        }
        StepKind::Close(_) => {}
    }
    let _ = write!(out, r#","at":{}"#, step.at);
    if let Some(door) = step.door {
        let _ = write!(out, r#","door":"{door}""#);
    }
    out.push(b'}');
}

/// Appends one journal line for an order's step.
pub(crate) fn encode_order_line(step: &OrderStep, out: &mut Vec<u8>) {
    out.extend_from_slice(ORDER_PREFIX);
    let start = out.len();
    encode_step(step, out);
    let crc = crc32fast::hash(&out[start..]);
    out.extend_from_slice(CRC_PREFIX);
    out.extend_from_slice(format!("{crc:08x}").as_bytes());
    out.extend_from_slice(LINE_SUFFIX);
    out.push(b'\n');
}

/// An order step's body as read, before its fields are checked together.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct StepBody {
    step: String,
    id: OrderId,
    pet: Option<PetId>,
    by: Option<String>,
    expires: Option<u64>,
    at: u64,
    door: Option<String>,
}

/// A checked order step's body, in any layout serde_json accepts.
fn parse_step(body: &[u8]) -> Result<OrderStep, String> {
    let body: StepBody =
        serde_json::from_slice(body).map_err(|e| format!("bad order step: {e}"))?;
    step_of(body)
}

/// The step a body read says, if its fields fit its kind.
fn step_of(body: StepBody) -> Result<OrderStep, String> {
    let bad = |what: &str| format!("bad order step: {what}");
    let door = match body.door {
        None => None,
        Some(door) => Some(door.parse().map_err(|e| bad(&format!("door {e}")))?),
    };
    let kind = match (body.step.as_str(), body.pet, body.by, body.expires) {
        ("place", Some(pet), Some(by), Some(expires)) => StepKind::Place {
            pet,
            by: by.into(),
            expires,
        },
        ("sale", Some(pet), Some(by), None) => StepKind::Sale { pet, by: by.into() },
        ("complete", None, None, None) => StepKind::Close(OrderStatus::Completed),
        ("cancel", None, None, None) => StepKind::Close(OrderStatus::Cancelled),
        ("expire", None, None, None) => StepKind::Close(OrderStatus::Expired),
        (step, ..) => return Err(bad(&format!("{step:?} with the wrong fields"))),
    };
    Ok(OrderStep {
        id: body.id,
        kind,
        at: body.at,
        door,
    })
}

/// Appends one journal line for a write and its idempotency key, so that
/// the two are durable together or not at all:
///
/// ```text
/// {"keyed":{"scope":"shop","key":"k-1","fingerprint":"<64 hex>","at":<unix ns>,"pet":{...}},"crc32":"..."}
/// ```
///
/// with `"transition":{"id":1,"action":"sell"}` or
/// `"conflict":{"id":1,"status":"sold","action":"sell"}` in place of
/// `"pet"`. The scope and the key are JSON strings (escaped as JSON
/// escapes them); replay reads the record with serde, any layout.
pub(crate) fn encode_keyed_line(keyed: &Keyed, write: KeyedWrite<'_>, out: &mut Vec<u8>) {
    let string = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
    out.extend_from_slice(KEYED_PREFIX);
    let start = out.len();
    out.extend_from_slice(br#"{"scope":"#);
    out.extend_from_slice(string(keyed.scope.as_str()).as_bytes());
    out.extend_from_slice(br#","key":"#);
    out.extend_from_slice(string(keyed.key.as_str()).as_bytes());
    out.extend_from_slice(br#","fingerprint":""#);
    out.extend_from_slice(keyed.fingerprint.to_hex().as_bytes());
    out.extend_from_slice(br#"","at":"#);
    out.extend_from_slice(keyed.at.as_unix_nanos().to_string().as_bytes());
    match write {
        KeyedWrite::Pet(pet) => {
            out.extend_from_slice(br#","pet":"#);
            encode(pet, out);
        }
        KeyedWrite::Transition(id, transition) => {
            out.extend_from_slice(
                format!(
                    r#","transition":{{"id":{id},"action":"{}"}}"#,
                    transition.as_str()
                )
                .as_bytes(),
            );
        }
        KeyedWrite::Order(step) => {
            out.extend_from_slice(br#","order":"#);
            encode_step(step, out);
        }
        KeyedWrite::OrderConflict(id, status) => {
            out.extend_from_slice(
                format!(r#","orderConflict":{{"id":{id},"status":"{status}"}}"#).as_bytes(),
            );
        }
        KeyedWrite::Conflict(id, status, transition) => {
            out.extend_from_slice(
                format!(
                    r#","conflict":{{"id":{id},"status":"{}","action":"{}"}}"#,
                    status.as_str(),
                    transition.as_str()
                )
                .as_bytes(),
            );
        }
    }
    out.push(b'}');
    let crc = crc32fast::hash(&out[start..]);
    out.extend_from_slice(CRC_PREFIX);
    out.extend_from_slice(format!("{crc:08x}").as_bytes());
    out.extend_from_slice(LINE_SUFFIX);
    out.push(b'\n');
}

/// A checked keyed record's body, in any layout serde_json accepts: the
/// write, and its key.
fn parse_keyed(body: &[u8], scratch: &mut Vec<u8>) -> Result<(Record, Keyed), String> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Action {
        id: PetId,
        status: Option<PetStatus>,
        action: String,
    }
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Body {
        scope: String,
        key: String,
        fingerprint: String,
        at: u64,
        pet: Option<Pet>,
        transition: Option<Action>,
        conflict: Option<Action>,
        order: Option<StepBody>,
        #[serde(rename = "orderConflict")]
        order_conflict: Option<OrderConflict>,
    }
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct OrderConflict {
        id: OrderId,
        status: OrderStatus,
    }
    let bad = |what: &str| format!("bad keyed record: {what}");
    let body: Body = serde_json::from_slice(body).map_err(|e| bad(&e.to_string()))?;
    let keyed = keyed_of(&body.scope, &body.key, &body.fingerprint, body.at, &bad)?;
    let action = |a: &Action| -> Result<Transition, String> {
        a.action.parse().map_err(|e| bad(&format!("action {e}")))
    };
    let record = match (
        body.pet,
        body.transition,
        body.conflict,
        body.order,
        body.order_conflict,
    ) {
        (None, None, None, Some(step), None) => Record::Order(step_of(step)?),
        (None, None, None, None, Some(c)) => Record::OrderConflict(c.id, c.status),
        (Some(pet), None, None, None, None) => {
            validate_name(pet.name()).map_err(|e| bad(&format!("name {e}")))?;
            scratch.clear();
            encode(&pet, scratch);
            Record::Pet(pet.id(), pet.status())
        }
        (None, Some(t), None, None, None) if t.status.is_none() => {
            Record::Transition(t.id, action(&t)?)
        }
        (None, None, Some(c), None, None) => {
            let status = c
                .status
                .ok_or_else(|| bad("a conflict without its status"))?;
            Record::Conflict(c.id, status, action(&c)?)
        }
        _ => return Err(bad("not one pet, transition, order or conflict")),
    };
    Ok((record, keyed))
}

/// Appends one line: `prefix`, the body `body` writes, and the CRC-32
/// of that body (the trailer every record and snapshot line ends in).
pub(super) fn encode_checked(prefix: &[u8], out: &mut Vec<u8>, body: impl FnOnce(&mut Vec<u8>)) {
    out.extend_from_slice(prefix);
    let start = out.len();
    body(out);
    let crc = crc32fast::hash(&out[start..]);
    out.extend_from_slice(CRC_PREFIX);
    out.extend_from_slice(format!("{crc:08x}").as_bytes());
    out.extend_from_slice(LINE_SUFFIX);
    out.push(b'\n');
}

/// A key as a record or a snapshot writes it: its scope, the key, the
/// request's fingerprint in hex, and its time in Unix nanoseconds; `bad`
/// says which field is wrong.
pub(super) fn keyed_of(
    scope: &str,
    key: &str,
    fingerprint: &str,
    at: u64,
    bad: &dyn Fn(&str) -> String,
) -> Result<Keyed, String> {
    Ok(Keyed {
        scope: Scope::new(scope).ok_or_else(|| bad("scope"))?,
        key: IdempotencyKey::new(key).ok_or_else(|| bad("key"))?,
        fingerprint: Fingerprint::from_hex(fingerprint).ok_or_else(|| bad("fingerprint"))?,
        at: Timestamp::from_unix_nanos(at),
    })
}

/// Checks one line (without its `\n`) with `prefix` and returns its
/// body: the bytes the checksum covers.
pub(super) fn checked_body<'a>(line: &'a [u8], prefix: &[u8]) -> Result<&'a [u8], String> {
    if line.len() < prefix.len() + TRAILER_LEN || !line.starts_with(prefix) {
        return Err("not a journal record".into());
    }
    let (body, trailer) = line[prefix.len()..].split_at(line.len() - prefix.len() - TRAILER_LEN);
    if !trailer.starts_with(CRC_PREFIX) || !trailer.ends_with(LINE_SUFFIX) {
        return Err("not a journal record (no crc32)".into());
    }
    let hex = std::str::from_utf8(&trailer[CRC_PREFIX.len()..CRC_PREFIX.len() + 8])
        .map_err(|_| "crc32 is not hex".to_string())?;
    if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("crc32 is not hex".into());
    }
    let stored = u32::from_str_radix(hex, 16).map_err(|_| "crc32 is not hex".to_string())?;
    let actual = crc32fast::hash(body);
    if stored != actual {
        return Err(format!(
            "checksum mismatch (stored {stored:08x}, computed {actual:08x})"
        ));
    }
    Ok(body)
}

/// A checked record's pet JSON, in any layout serde_json accepts.
fn parse_pet(body: &[u8]) -> Result<Pet, String> {
    let pet: Pet = serde_json::from_slice(body).map_err(|e| format!("bad pet: {e}"))?;
    validate_name(pet.name()).map_err(|e| format!("bad pet: name {e}"))?;
    Ok(pet)
}

/// A checked transition record's body exactly as
/// [`encode_transition_line`] writes it, read without serde: replay of a
/// journal of many transitions is a scan, not a parse each.
fn parse_canonical_transition(body: &[u8]) -> Option<(PetId, Transition)> {
    let rest = body.strip_prefix(br#"{"id":"#)?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || digits > 19 || rest[0] == b'0' {
        return None;
    }
    let id = std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()?;
    let action = rest[digits..]
        .strip_prefix(ACTION_PREFIX)?
        .strip_suffix(b"\"}")?;
    let transition = Transition::ALL
        .into_iter()
        .find(|t| t.as_str().as_bytes() == action)?;
    Some((PetId::new(id)?, transition))
}

/// A checked transition record's body: the fast reader for what the
/// writer writes, else serde.
fn parse_transition(body: &[u8]) -> Result<(PetId, Transition), String> {
    match parse_canonical_transition(body) {
        Some(found) => Ok(found),
        None => parse_any_transition(body),
    }
}

/// A checked transition record's body, in any layout serde_json accepts.
fn parse_any_transition(body: &[u8]) -> Result<(PetId, Transition), String> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Body<'a> {
        id: PetId,
        #[serde(borrow)]
        action: std::borrow::Cow<'a, str>,
    }
    let body: Body<'_> =
        serde_json::from_slice(body).map_err(|e| format!("bad transition: {e}"))?;
    let transition = body
        .action
        .parse()
        .map_err(|e| format!("bad transition: action {e}"))?;
    Ok((body.id, transition))
}

/// A checked record, and its idempotency key when it has one; for a pet,
/// its canonical JSON is left in `scratch`.
pub(crate) fn decode_record(
    line: &[u8],
    scratch: &mut Vec<u8>,
) -> Result<(Record, Option<Keyed>), String> {
    if line.starts_with(KEYED_PREFIX) {
        let (record, keyed) = parse_keyed(checked_body(line, KEYED_PREFIX)?, scratch)?;
        return Ok((record, Some(keyed)));
    }
    decode_unkeyed(line, scratch).map(|record| (record, None))
}

/// A checked record without a key.
fn decode_unkeyed(line: &[u8], scratch: &mut Vec<u8>) -> Result<Record, String> {
    if line.starts_with(ORDER_PREFIX) {
        return parse_step(checked_body(line, ORDER_PREFIX)?).map(Record::Order);
    }
    if line.starts_with(TIME_PREFIX) {
        return parse_time(checked_body(line, TIME_PREFIX)?).map(Record::Time);
    }
    if line.starts_with(TRANSITION_PREFIX) {
        let (id, transition) = parse_transition(checked_body(line, TRANSITION_PREFIX)?)?;
        return Ok(Record::Transition(id, transition));
    }
    let body = checked_body(line, LINE_PREFIX)?;
    scratch.clear();
    // Fast path: the bytes are exactly what `encode` writes.
    if let Some((id, status)) = parse_canonical(body) {
        scratch.extend_from_slice(body);
        return Ok(Record::Pet(id, status));
    }
    let pet = parse_pet(body)?;
    encode(&pet, scratch);
    Ok(Record::Pet(pet.id(), pet.status()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pet::{CategoryId, NewPet};

    /// Checks one line and returns its pet (the general, allocating path).
    fn decode_line(line: &[u8]) -> Result<Pet, String> {
        parse_pet(checked_body(line, LINE_PREFIX)?)
    }

    fn pet(id: u64, name: &str) -> Pet {
        let new = NewPet::new(name, CategoryId::MIN)
            .unwrap()
            .with_status(PetStatus::Sold);
        new.into_pet(PetId::new(id).unwrap())
    }
    #[test]
    fn lines_round_trip_and_are_plain_json() {
        let mut out = Vec::new();
        encode_line(&pet(1, "R\"ex"), &mut out);
        assert_eq!(out.last(), Some(&b'\n'));
        let line = &out[..out.len() - 1];
        assert_eq!(decode_line(line), Ok(pet(1, "R\"ex")));
        let v: serde_json::Value = serde_json::from_slice(line).unwrap();
        assert_eq!(v["pet"]["name"], "R\"ex");
        assert_eq!(v["crc32"].as_str().map(str::len), Some(8));
    }

    #[test]
    fn damaged_lines_are_refused() {
        let mut out = Vec::new();
        encode_line(&pet(7, "Rex"), &mut out);
        let line = out[..out.len() - 1].to_vec();
        // Flip one bit anywhere: always detected.
        for i in 0..line.len() {
            let mut bad = line.clone();
            bad[i] ^= 0x01;
            assert!(decode_line(&bad).is_err(), "flip at {i}");
        }
        for cut in 0..line.len() {
            assert!(decode_line(&line[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn transition_lines_round_trip_and_damage_is_refused() {
        let mut out = Vec::new();
        let id = PetId::new(42).unwrap();
        encode_transition_line(id, Transition::Sell, &mut out);
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            "{\"transition\":{\"id\":42,\"action\":\"sell\"},\"crc32\":\"".to_owned()
                + &format!("{:08x}", crc32fast::hash(br#"{"id":42,"action":"sell"}"#))
                + "\"}\n"
        );
        let line = out[..out.len() - 1].to_vec();
        let mut scratch = Vec::new();
        assert_eq!(
            decode_record(&line, &mut scratch),
            Ok((Record::Transition(id, Transition::Sell), None))
        );
        for i in 0..line.len() {
            let mut bad = line.clone();
            bad[i] ^= 0x01;
            assert!(decode_record(&bad, &mut scratch).is_err(), "flip at {i}");
        }
        for cut in 0..line.len() {
            assert!(
                decode_record(&line[..cut], &mut scratch).is_err(),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn keyed_lines_round_trip_and_damage_is_refused() {
        let keyed = Keyed {
            scope: Scope::new("shop \"north\"").unwrap(),
            key: IdempotencyKey::parse_header(br#""a\"b\\c""#).unwrap(),
            fingerprint: Fingerprint::from_bytes([0xab; 32]),
            at: Timestamp::from_unix_nanos(1_700_000_000_123_456_789),
        };
        let rex = pet(3, "R\"ex");
        let id = PetId::new(3).unwrap();
        let place = OrderStep {
            id: OrderId::MIN,
            kind: StepKind::Place {
                pet: id,
                by: "shop \"north\"".into(),
                expires: 1_700_000_900,
            },
            at: 1_700_000_000,
            door: Some(Transition::Reserve),
        };
        let writes = [
            (KeyedWrite::Order(&place), Record::Order(place.clone())),
            (
                KeyedWrite::OrderConflict(OrderId::MIN, OrderStatus::Expired),
                Record::OrderConflict(OrderId::MIN, OrderStatus::Expired),
            ),
            (KeyedWrite::Pet(&rex), Record::Pet(id, PetStatus::Sold)),
            (
                KeyedWrite::Transition(id, Transition::Release),
                Record::Transition(id, Transition::Release),
            ),
            (
                KeyedWrite::Conflict(id, PetStatus::Sold, Transition::Sell),
                Record::Conflict(id, PetStatus::Sold, Transition::Sell),
            ),
        ];
        for (write, record) in writes {
            let mut out = Vec::new();
            encode_keyed_line(&keyed, write, &mut out);
            let line = out[..out.len() - 1].to_vec();
            let v: serde_json::Value = serde_json::from_slice(&line).unwrap();
            assert_eq!(v["keyed"]["key"], "a\"b\\c");
            let mut scratch = Vec::new();
            assert_eq!(
                decode_record(&line, &mut scratch),
                Ok((record.clone(), Some(keyed.clone())))
            );
            if let Record::Pet(..) = record {
                assert_eq!(scratch, rex.to_json());
            }
            for i in 0..line.len() {
                let mut bad = line.clone();
                bad[i] ^= 0x01;
                assert!(decode_record(&bad, &mut scratch).is_err(), "flip at {i}");
            }
        }
    }

    #[test]
    fn order_lines_round_trip_and_damage_is_refused() {
        let pet = PetId::new(7).unwrap();
        let id = OrderId::new(12).unwrap();
        let steps = [
            StepKind::Place {
                pet,
                by: "a\"b".into(),
                expires: 1_900,
            },
            StepKind::Sale {
                pet,
                by: "shop".into(),
            },
            StepKind::Close(OrderStatus::Completed),
            StepKind::Close(OrderStatus::Cancelled),
            StepKind::Close(OrderStatus::Expired),
        ];
        for (kind, door) in steps
            .into_iter()
            .zip([None, Some(Transition::Sell)].into_iter().cycle())
        {
            let step = OrderStep {
                id,
                kind,
                at: 1_000,
                door,
            };
            let mut out = Vec::new();
            encode_order_line(&step, &mut out);
            let line = out[..out.len() - 1].to_vec();
            let mut scratch = Vec::new();
            assert_eq!(
                decode_record(&line, &mut scratch),
                Ok((Record::Order(step.clone()), None))
            );
            for i in 0..line.len() {
                let mut bad = line.clone();
                bad[i] ^= 0x01;
                assert!(decode_record(&bad, &mut scratch).is_err(), "flip at {i}");
            }
        }
        // A step with fields its kind does not have is refused.
        let body = br#"{"step":"complete","id":1,"pet":7,"at":5}"#;
        assert!(parse_step(body).is_err());
    }

    #[test]
    fn the_fast_transition_reader_agrees_with_serde() {
        let bodies = [
            r#"{"id":42,"action":"sell"}"#,
            r#"{"id":9223372036854775807,"action":"release"}"#,
            r#"{"id":042,"action":"sell"}"#,
            r#"{"id":0,"action":"sell"}"#,
            r#"{"id":9223372036854775808,"action":"sell"}"#,
            r#"{"id":1,"action":"Sell"}"#,
            r#"{"id":1, "action":"reserve"}"#,
            r#"{"action":"reserve","id":1}"#,
            r#"{"id":1,"action":"reserve","x":1}"#,
        ];
        for body in bodies {
            let fast = parse_canonical_transition(body.as_bytes());
            let slow = parse_any_transition(body.as_bytes()).ok();
            // The fast reader takes only what serde takes, and agrees.
            if let Some(found) = fast {
                assert_eq!(Some(found), slow, "{body}");
            }
            // And it takes everything the writer writes.
            if let Some((id, t)) = slow {
                let mut line = Vec::new();
                encode_transition_line(id, t, &mut line);
                let written = &line[TRANSITION_PREFIX.len()..line.len() - TRAILER_LEN - 1];
                assert_eq!(parse_canonical_transition(written), slow, "{body}");
            }
        }
    }

    #[test]
    fn the_longest_record_fits_well_within_the_bound() {
        // Every string escaped at its longest: keys and the status as
        // `\uXXXX` each, the name 100 surrogate pairs; the largest ids.
        let escape =
            |s: &str| -> String { s.chars().map(|c| format!("\\u{:04x}", c as u32)).collect() };
        let name = "\\ud83d\\ude00".repeat(crate::pet::MAX_NAME_CHARS);
        let max = i64::MAX;
        let body = format!(
            r#"{{"{}":{max},"{}":"{name}","{}":{max},"{}":"{}"}}"#,
            escape("id"),
            escape("name"),
            escape("categoryId"),
            escape("status"),
            escape("available"),
        );
        let line = format!(
            r#"{{"pet":{body},"crc32":"{:08x}"}}"#,
            crc32fast::hash(body.as_bytes())
        );
        let pet = decode_line(line.as_bytes()).unwrap();
        assert_eq!(pet.name().chars().count(), crate::pet::MAX_NAME_CHARS);
        assert_eq!(pet.status(), PetStatus::Available);
        // 20-digit numbers are out of range, hence the 2 bytes of slack.
        assert_eq!(line.len() + 2, LONGEST_COMPACT_RECORD);
        assert_eq!(LONGEST_COMPACT_RECORD, 1474);
        assert!(line.len() * 40 < MAX_RECORD_LEN);
    }

    #[test]
    fn time_lines_round_trip_and_other_spellings_are_refused() {
        let mut out = Vec::new();
        encode_time_line(1_764_324_000, &mut out);
        let line = &out[..out.len() - 1];
        let v: serde_json::Value = serde_json::from_slice(line).unwrap();
        assert_eq!(v["time"], 1_764_324_000u64);
        let mut scratch = Vec::new();
        assert_eq!(
            decode_record(line, &mut scratch),
            Ok((Record::Time(1_764_324_000), None))
        );
        for body in ["01", "", "1.5", "-1", "99999999999999999999", "\"1\""] {
            let line = format!(
                r#"{{"time":{body},"crc32":"{:08x}"}}"#,
                crc32fast::hash(body.as_bytes())
            );
            assert!(
                decode_record(line.as_bytes(), &mut scratch).is_err(),
                "{body}"
            );
        }
        let mut bad = line.to_vec();
        bad[9] ^= 1;
        assert!(decode_record(&bad, &mut scratch).is_err());
    }
}
