//! The pet's canonical JSON, in one place: [`Pet::to_json`] and the
//! encoder behind it (byte for byte what `serde_json` writes of a
//! [`Pet`]), and its fast reader for what it wrote (the inventory's arena,
//! the journal's replay read these bytes back).

use crate::pet::{validate_name, CategoryId, Pet, PetId, PetStatus};

impl Pet {
    /// The pet as the API's JSON: byte for byte what
    /// `serde_json::to_vec(&pet)` writes, from the inventory's own encoder
    /// (faster than serde's, and the same bytes `list_json`
    /// and `get_json` answer).
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::{CategoryId, Inventory, NewPet};
    ///
    /// let inventory = Inventory::in_memory();
    /// let pet = inventory.create(NewPet::new("Rex \"2\"", CategoryId::MIN).unwrap()).unwrap();
    /// assert_eq!(pet.to_json(), serde_json::to_vec(&pet).unwrap());
    /// assert_eq!(Some(pet.to_json()), inventory.get_json(pet.id()));
    /// ```
    pub fn to_json(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(80 + self.name().len());
        encode(self, &mut out);
        out
    }
}

// The JSON layout of one pet. `encode` writes it and `decode` reads it back;
// nothing else touches the arena's bytes.
const ID_PREFIX: &[u8] = br#"{"id":"#;
const NAME_PREFIX: &[u8] = br#","name":""#;
const CATEGORY_PREFIX: &[u8] = br#"","categoryId":"#;
const STATUS_PREFIX: &[u8] = br#","status":""#;
const SUFFIX: &[u8] = br#""}"#;

/// Appends the pet's JSON, byte for byte what `serde_json::to_vec` writes.
pub(crate) fn encode(pet: &Pet, out: &mut Vec<u8>) {
    out.extend_from_slice(ID_PREFIX);
    push_decimal(out, pet.id().get());
    out.extend_from_slice(NAME_PREFIX);
    escape_into(pet.name(), out);
    out.extend_from_slice(CATEGORY_PREFIX);
    push_decimal(out, pet.category_id().get());
    out.extend_from_slice(STATUS_PREFIX);
    out.extend_from_slice(pet.status().as_str().as_bytes());
    out.extend_from_slice(SUFFIX);
}

/// Appends the pet of `json` (as [`encode`] wrote it, with status
/// `current`) with its status `status` instead: the feed's events give a
/// pet as a change left it, without building a [`Pet`] again. `false`,
/// appending nothing, for JSON that is not that.
pub(crate) fn encode_with_status(
    json: &[u8],
    current: PetStatus,
    status: PetStatus,
    out: &mut Vec<u8>,
) -> bool {
    let tail = current.as_str().len() + SUFFIX.len();
    let Some(head) = json.len().checked_sub(tail).and_then(|end| json.get(..end)) else {
        return false;
    };
    if !head.ends_with(STATUS_PREFIX) {
        return false;
    }
    out.extend_from_slice(head);
    out.extend_from_slice(status.as_str().as_bytes());
    out.extend_from_slice(SUFFIX);
    true
}

/// Appends `n` in decimal (an order's page writes its ids with it too).
pub(crate) fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// JSON string escaping as serde_json does it: `"` and `\` and control
/// characters (which valid names never hold, but the encoder must not rely
/// on that to stay correct).
pub(crate) fn escape_into(s: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0x00..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        if escape.is_empty() {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0xf)]);
        } else {
            out.extend_from_slice(escape);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
}

/// The longest status's spelling: how much a pet's JSON can grow when
/// its status changes.
pub(crate) const LONGEST_STATUS: usize = PetStatus::Available.as_str().len();

const _: () = {
    let mut i = 0;
    while i < PetStatus::ALL.len() {
        assert!(PetStatus::ALL[i].as_str().len() <= LONGEST_STATUS);
        i += 1;
    }
};

/// The status written in a pet's JSON as [`encode`] writes it (the last
/// value), read from its end alone.
pub(crate) fn status_of_json(json: &[u8]) -> Option<PetStatus> {
    let rest = json.strip_suffix(SUFFIX)?;
    PetStatus::ALL.into_iter().find(|s| {
        rest.strip_suffix(s.as_str().as_bytes())
            .is_some_and(|r| r.ends_with(STATUS_PREFIX))
    })
}

/// Reads a pet back out of the JSON that [`encode`] wrote.
pub(crate) fn decode(id: PetId, status: PetStatus, json: &[u8]) -> Option<Pet> {
    let name_start = ID_PREFIX.len() + decimal_len(id.get()) + NAME_PREFIX.len();
    let tail = STATUS_PREFIX.len() + status.as_str().len() + SUFFIX.len();
    let category_end = json.len().checked_sub(tail)?;
    let head = json.get(..category_end)?;
    let digits = head.iter().rev().take_while(|b| b.is_ascii_digit()).count();
    let category_start = category_end - digits;
    // The digits `encode` wrote: summed directly, not through `str::parse`,
    // whose general checks these digits do not need and every `get` pays.
    let (category, _) = canonical_digits(&head[category_start..])?;
    let name_end = category_start.checked_sub(CATEGORY_PREFIX.len())?;
    let escaped = json.get(name_start..name_end)?;
    let name = if escaped.contains(&b'\\') {
        // Rare: let serde_json undo the escapes, quotes included.
        let quoted = json.get(name_start - 1..name_end + 1)?;
        serde_json::from_slice(quoted).ok()?
    } else {
        String::from_utf8(escaped.to_vec()).ok()?
    };
    let pet = Pet::from_parts(id, name, CategoryId::new(category)?, status);
    debug_assert_eq!(
        serde_json::from_slice::<Pet>(json).ok().as_ref(),
        Some(&pet)
    );
    Some(pet)
}

/// If `json` is a pet exactly as [`encode`] writes it, with valid values
/// and a name that needs no escaping, its id and status. Lets replay copy
/// journal bytes straight into the arena without building a `Pet`; any
/// other valid pet JSON takes the slower general path.
pub(crate) fn parse_canonical(json: &[u8]) -> Option<(PetId, PetStatus)> {
    let rest = json.strip_prefix(ID_PREFIX)?;
    let (id, rest) = canonical_digits(rest)?;
    let id = PetId::new(id)?;
    let rest = rest.strip_prefix(NAME_PREFIX)?;
    let status = PetStatus::ALL.into_iter().find(|s| {
        rest.strip_suffix(SUFFIX)
            .and_then(|r| r.strip_suffix(s.as_str().as_bytes()))
            .is_some_and(|r| r.ends_with(STATUS_PREFIX))
    })?;
    let rest = &rest[..rest.len() - SUFFIX.len() - status.as_str().len() - STATUS_PREFIX.len()];
    let name_end = rest.len() - rest.iter().rev().take_while(|b| b.is_ascii_digit()).count();
    let (category, tail) = canonical_digits(&rest[name_end..])?;
    if !tail.is_empty() {
        return None;
    }
    CategoryId::new(category)?;
    let name = rest[..name_end].strip_suffix(CATEGORY_PREFIX)?;
    // `"` and `\` would need escapes; control characters are invalid.
    if name.iter().any(|b| matches!(b, b'"' | b'\\')) {
        return None;
    }
    validate_name(std::str::from_utf8(name).ok()?).ok()?;
    Some((id, status))
}

/// Leading decimal digits without a leading zero, and the rest.
fn canonical_digits(s: &[u8]) -> Option<(u64, &[u8])> {
    let len = s.iter().take_while(|b| b.is_ascii_digit()).count();
    if len == 0 || (len > 1 && s[0] == b'0') || len > 19 {
        return None;
    }
    let value = s[..len].iter().try_fold(0u64, |n, d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })?;
    Some((value, &s[len..]))
}

fn decimal_len(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |log| log as usize + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pet(id: u64, name: &str, category: u64, status: PetStatus) -> Option<Pet> {
        Some(Pet::from_parts(
            PetId::new(id)?,
            name.to_owned(),
            CategoryId::new(category)?,
            status,
        ))
    }

    #[test]
    fn encode_matches_serde_json_and_decodes_back() {
        let names = [
            "Rex",
            "a\"b\\c",
            "é€😀",
            "x\u{7f}",
            "1234",
            r#"","categoryId":5"#,
        ];
        for name in names {
            for status in PetStatus::ALL {
                for (id, cat) in [(1, 1), (9, 10), (PetId::MAX.get(), CategoryId::MAX.get())] {
                    let Some(p) = pet(id, name, cat, status) else {
                        panic!("bad test pet")
                    };
                    let mut ours = Vec::new();
                    encode(&p, &mut ours);
                    assert_eq!(Some(ours.clone()), serde_json::to_vec(&p).ok(), "{name:?}");
                    assert_eq!(p.to_json(), ours);
                    assert_eq!(decode(p.id(), status, &ours), Some(p));
                }
            }
        }
    }

    #[test]
    fn canonical_parse_accepts_exactly_what_encode_writes() {
        for name in ["Rex", "é€😀 x", "1234"] {
            for status in PetStatus::ALL {
                let p = pet(123, name, 45, status).unwrap_or_else(|| panic!("bad test pet"));
                let mut json = Vec::new();
                encode(&p, &mut json);
                assert_eq!(parse_canonical(&json), Some((p.id(), status)));
            }
        }
        // Valid pets that are not canonical (or need escapes) take the slow path.
        for other in [
            r#"{"id":1,"name":"a\"b","categoryId":1,"status":"sold"}"#,
            r#"{"id":01,"name":"a","categoryId":1,"status":"sold"}"#,
            r#"{"id":1, "name":"a","categoryId":1,"status":"sold"}"#,
            r#"{"id":1,"name":"a","categoryId":0,"status":"sold"}"#,
            r#"{"id":1,"name":"a","categoryId":1,"status":"lost"}"#,
            r#"{"id":1,"name":" ","categoryId":1,"status":"sold"}"#,
            r#"{"id":0,"name":"a","categoryId":1,"status":"sold"}"#,
            r#"{"id":1,"name":"a","categoryId":99999999999999999999,"status":"sold"}"#,
            r#"{"id":1,"name":"a","categoryId":1,"status":"sold"} "#,
        ] {
            assert_eq!(parse_canonical(other.as_bytes()), None, "{other}");
        }
    }

    #[test]
    fn escapes_control_characters_like_serde_json() {
        let mut out = Vec::new();
        escape_into("\u{0}\u{1f}\n\u{8}\u{c}", &mut out);
        assert_eq!(
            Some(out),
            serde_json::to_vec("\u{0}\u{1f}\n\u{8}\u{c}")
                .ok()
                .map(|v| v[1..v.len() - 1].to_vec())
        );
    }
}
