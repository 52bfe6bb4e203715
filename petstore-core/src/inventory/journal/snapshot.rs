//! The snapshot format: the live state of a durable inventory in one
//! file of checksummed JSON lines, written whole to a temporary file,
//! synced and renamed into place, so that a snapshot is either all there
//! or not there at all.
//!
//! ```text
//! {"snapshot":{"version":1,"segment":3,"time":…,"pets":N,"orders":M,"eventsFirst":F},"crc32":"…"}
//! {"pet":{"id":1,…},"crc32":"…"}                       N of them, in id order, as they stand
//! {"names":["shop","kiosk"],"crc32":"…"}              who placed orders, each once
//! {"orders":[[7,0,0,1764324000,900,0],…],"crc32":"…"}  M of them, in id order, many a line
//! {"kept":{"scope":…,"key":…,"fingerprint":…,"at":…,"created":{…}},"crc32":"…"}   answers not yet expired
//! {"events":"<hex>","crc32":"…"}                         the events kept, oldest first, 13 bytes each
//! {"end":1234,"crc32":"…"}                                the count of lines before it
//! ```
//!
//! The header comes first and the end line last: a file without its end
//! is refused, as is any line that does not check out (never a silently
//! wrong state). `version` lets a later release read this one's files.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::files::{open_regular, sync_dir};
use super::layout::{snapshot_path, temp_snapshot_path};
use super::lines::{too_long_reason, Line, Lines};
use super::record::{checked_body, decode_record, encode_checked, keyed_of, Record};
use crate::clock::Timestamp;
use crate::event::log::Entry;
use crate::idempotency::{Answer, Keyed};
use crate::inventory::error::OpenError;
use crate::order::{Order, OrderId, OrderStatus};
use crate::pet::json::encode;
use crate::pet::{validate_name, Pet, PetId, PetStatus, Transition};

/// The format this release writes, and the only one it reads.
pub(crate) const SNAPSHOT_VERSION: u32 = 1;

const HEADER_PREFIX: &[u8] = br#"{"snapshot":"#;
const PET_PREFIX: &[u8] = br#"{"pet":"#;
const NAMES_PREFIX: &[u8] = br#"{"names":"#;
const ORDERS_PREFIX: &[u8] = br#"{"orders":"#;
const KEPT_PREFIX: &[u8] = br#"{"kept":"#;
const EVENTS_PREFIX: &[u8] = br#"{"events":"#;
const END_PREFIX: &[u8] = br#"{"end":"#;

/// Events per `events` line: 2,000 entries are 52,000 hex digits, well
/// within a record's longest line.
const EVENTS_PER_LINE: usize = 2000;

/// Bytes written between two syncs of a snapshot being written.
const SYNC_EVERY: u64 = 4 << 20;

/// An `orders` line is ended once its body passes this: with the
/// longest order after it, still well within a record's longest line.
const CHUNK_BYTES: usize = 16 * 1024;

/// What a snapshot holds, in its first line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct SnapshotHeader {
    /// [`SNAPSHOT_VERSION`] when written by this release.
    pub(crate) version: u32,
    /// The last segment it covers: its own number.
    pub(crate) segment: u64,
    /// When it was taken (Unix seconds): what dates the records after it
    /// until the next time record.
    pub(crate) time: u64,
    /// Pets it holds (ids 1 to `pets`).
    pub(crate) pets: u64,
    /// Orders it holds (ids 1 to `orders`).
    pub(crate) orders: u64,
    /// The position of the first event it keeps (the next event's, when
    /// it keeps none).
    pub(crate) events_first: u64,
}

/// One line of a snapshot after its header.
#[derive(Debug)]
pub(crate) enum Item {
    /// A pet as it stands; its canonical JSON is in the scratch buffer.
    Pet(PetId, PetStatus),
    /// Orders as they stand, in id order, after those of the lines before.
    Orders(Vec<Order>),
    /// A kept idempotency answer.
    Kept(Keyed, Answer),
    /// Events kept, oldest first, after those of the lines before.
    Events(Vec<Entry>),
}

/// What reads a journal back: the records of segments, and the lines of
/// a snapshot. A refusal says why (corruption, like a bad checksum).
pub(crate) trait Restore {
    /// A journal record (see `replay`).
    fn record(&mut self, record: Record, json: &[u8], keyed: Option<Keyed>) -> Result<(), String>;
    /// A snapshot's header, before its items.
    fn header(&mut self, header: &SnapshotHeader) -> Result<(), String>;
    /// A snapshot's item (a pet's JSON in `json`).
    fn item(&mut self, item: Item, json: &[u8]) -> Result<(), String>;
}

/// Writes a snapshot: [`create`](Self::create), the items, then
/// [`finish`](Self::finish), which makes it durable under its name.
pub(crate) struct SnapshotWriter {
    out: BufWriter<File>,
    temp: PathBuf,
    path: PathBuf,
    dir: PathBuf,
    lines: u64,
    bytes: u64,
    line: Vec<u8>,
    /// Each placer's name and its index in the `names` lines.
    names: std::collections::HashMap<Arc<str>, usize>,
    /// Orders not written yet (their line is not full).
    orders: Vec<u8>,
}

impl SnapshotWriter {
    /// Starts snapshot `header.segment` in `dir`, in its temporary file
    /// (replacing one a crash left).
    pub(crate) fn create(dir: &Path, header: &SnapshotHeader) -> io::Result<Self> {
        let temp = temp_snapshot_path(dir, header.segment);
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temp)?;
        let mut writer = SnapshotWriter {
            out: BufWriter::with_capacity(1 << 20, file),
            temp,
            path: snapshot_path(dir, header.segment),
            dir: dir.to_path_buf(),
            lines: 0,
            bytes: 0,
            line: Vec::with_capacity(512),
            names: std::collections::HashMap::new(),
            orders: Vec::new(),
        };
        let body = serde_json::to_vec(header).map_err(io::Error::other)?;
        writer.put(HEADER_PREFIX, |out| out.extend_from_slice(&body))?;
        Ok(writer)
    }

    fn put(&mut self, prefix: &[u8], body: impl FnOnce(&mut Vec<u8>)) -> io::Result<()> {
        self.line.clear();
        encode_checked(prefix, &mut self.line, body);
        self.out.write_all(&self.line)?;
        self.lines += 1;
        let before = self.bytes;
        self.bytes += self.line.len() as u64;
        // Synced as it goes, a few MiB at a time: one sync of the whole
        // file at the end would queue all of it at once ahead of the
        // journal's own syncs, which every create waits for.
        if before / SYNC_EVERY != self.bytes / SYNC_EVERY {
            self.out.flush()?;
            self.out.get_ref().sync_data()?;
        }
        Ok(())
    }

    /// A pet as it stands: its canonical JSON.
    pub(crate) fn pet(&mut self, json: &[u8]) -> io::Result<()> {
        self.put(PET_PREFIX, |out| out.extend_from_slice(json))
    }

    /// An order as it stands, the next in id order: `[pet, status,
    /// placer, placed, expires - placed, closed - placed or -1]`, its
    /// placer an index into the `names` lines (a name is written once,
    /// before the first order that needs it). Twenty-odd bytes an order.
    pub(crate) fn order(&mut self, order: &Order) -> io::Result<()> {
        use std::io::Write as _;
        let by = match self.names.get(&order.placed_by) {
            Some(&index) => index,
            None => {
                self.flush_orders()?;
                let index = self.names.len();
                self.names.insert(order.placed_by.clone(), index);
                let name = serde_json::to_vec(&[&*order.placed_by]).map_err(io::Error::other)?;
                self.put(NAMES_PREFIX, |out| out.extend_from_slice(&name))?;
                index
            }
        };
        let placed = order.placed_at.unix_secs();
        let rel = |t: Timestamp| t.unix_secs() as i128 - placed as i128;
        let _ = write!(
            self.orders,
            "[{},{},{by},{placed},{},{}],",
            order.pet,
            order.status.code(),
            rel(order.expires_at),
            order.closed_at.map_or(-1, rel),
        );
        if self.orders.len() > CHUNK_BYTES {
            self.flush_orders()?;
        }
        Ok(())
    }

    fn flush_orders(&mut self) -> io::Result<()> {
        if self.orders.is_empty() {
            return Ok(());
        }
        let mut body = std::mem::take(&mut self.orders);
        body.pop();
        let result = self.put(ORDERS_PREFIX, |out| {
            out.push(b'[');
            out.extend_from_slice(&body);
            out.push(b']');
        });
        body.clear();
        self.orders = body;
        result
    }

    /// A kept answer.
    pub(crate) fn kept(&mut self, keyed: &Keyed, answer: &Answer) -> io::Result<()> {
        self.flush_orders()?;
        self.put(KEPT_PREFIX, |out| encode_kept(keyed, answer, out))
    }

    /// Events, oldest first, in lines of [`EVENTS_PER_LINE`].
    pub(crate) fn events(&mut self, entries: impl Iterator<Item = Entry>) -> io::Result<()> {
        self.flush_orders()?;
        let mut chunk = Vec::with_capacity(EVENTS_PER_LINE);
        for entry in entries {
            chunk.push(entry);
            if chunk.len() == EVENTS_PER_LINE {
                self.put(EVENTS_PREFIX, |out| encode_events(&chunk, out))?;
                chunk.clear();
            }
        }
        if !chunk.is_empty() {
            self.put(EVENTS_PREFIX, |out| encode_events(&chunk, out))?;
        }
        Ok(())
    }

    /// Writes the end line, syncs the file, renames it into place and
    /// syncs the directory: only then is the snapshot there. Returns its
    /// size in bytes. `step` is called before each of the four (a test
    /// stops the sequence there, as a crash would).
    pub(crate) fn finish(
        mut self,
        step: &mut dyn FnMut(FinishStep) -> io::Result<()>,
    ) -> io::Result<u64> {
        self.flush_orders()?;
        let lines = self.lines;
        self.put(END_PREFIX, |out| {
            out.extend_from_slice(lines.to_string().as_bytes())
        })?;
        step(FinishStep::Written)?;
        let file = self.out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        step(FinishStep::Synced)?;
        fs::rename(&self.temp, &self.path)?;
        step(FinishStep::Renamed)?;
        sync_dir(&self.dir)?;
        Ok(self.bytes)
    }
}

/// The points of [`SnapshotWriter::finish`] a test may stop at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FinishStep {
    /// Every line written (perhaps still buffered).
    Written,
    /// The temporary file synced.
    Synced,
    /// Renamed into place, the directory not synced yet.
    Renamed,
}

fn encode_order(order: &Order, out: &mut Vec<u8>) {
    use std::io::Write as _;
    let string = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
    let _ = write!(
        out,
        r#"{{"id":{},"pet":{},"status":"{}","by":{},"placedAt":{},"expiresAt":{}"#,
        order.id,
        order.pet,
        order.status.as_str(),
        string(&order.placed_by),
        order.placed_at.unix_secs(),
        order.expires_at.unix_secs(),
    );
    if let Some(closed) = order.closed_at {
        let _ = write!(out, r#","closedAt":{}"#, closed.unix_secs());
    }
    out.push(b'}');
}

/// An order as a snapshot keeps it (see [`SnapshotWriter::order`]),
/// with its id.
fn order_of(
    id: u64,
    (pet, status, by, placed, expires, closed): (PetId, u8, usize, u64, i64, i64),
    names: &[Arc<str>],
) -> Result<Order, String> {
    let bad = |what: String| format!("bad order {id}: {what}");
    let status = match status {
        0..=3 => OrderStatus::from_code(status),
        _ => return Err(bad(format!("status {status}"))),
    };
    let placed_by = names
        .get(by)
        .cloned()
        .ok_or_else(|| bad(format!("name {by}, of {} named", names.len())))?;
    let at = |rel: i64| {
        placed
            .checked_add_signed(rel)
            .map(Timestamp::from_unix_secs)
            .ok_or_else(|| bad(format!("time {placed}{rel:+}")))
    };
    let closed_at = match closed {
        -1 => None,
        rel => Some(at(rel)?),
    };
    if (status == OrderStatus::Placed) != closed_at.is_none() {
        return Err(bad(format!(
            "{status} and {} a closing time",
            if closed_at.is_some() { "has" } else { "lacks" }
        )));
    }
    Ok(Order {
        id: OrderId::new(id).ok_or_else(|| bad("id".into()))?,
        pet,
        status,
        placed_by,
        placed_at: Timestamp::from_unix_secs(placed),
        expires_at: at(expires)?,
        closed_at,
    })
}

/// An order as a kept answer holds it.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct OrderState {
    id: OrderId,
    pet: PetId,
    status: OrderStatus,
    by: String,
    placed_at: u64,
    expires_at: u64,
    closed_at: Option<u64>,
}

impl OrderState {
    fn into_order(self) -> Result<Order, String> {
        if (self.status == OrderStatus::Placed) != self.closed_at.is_none() {
            return Err(format!(
                "order {} is {} and {} a closing time",
                self.id,
                self.status,
                if self.closed_at.is_some() {
                    "has"
                } else {
                    "lacks"
                }
            ));
        }
        Ok(Order {
            id: self.id,
            pet: self.pet,
            status: self.status,
            placed_by: Arc::from(self.by),
            placed_at: Timestamp::from_unix_secs(self.placed_at),
            expires_at: Timestamp::from_unix_secs(self.expires_at),
            closed_at: self.closed_at.map(Timestamp::from_unix_secs),
        })
    }
}

fn encode_kept(keyed: &Keyed, answer: &Answer, out: &mut Vec<u8>) {
    use std::io::Write as _;
    let string = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
    let _ = write!(
        out,
        r#"{{"scope":{},"key":{},"fingerprint":"{}","at":{}"#,
        string(keyed.scope.as_str()),
        string(keyed.key.as_str()),
        keyed.fingerprint.to_hex(),
        keyed.at.as_unix_nanos()
    );
    match answer {
        Answer::Created(pet) => {
            out.extend_from_slice(br#","created":"#);
            encode(pet, out);
        }
        Answer::Transitioned(pet) => {
            out.extend_from_slice(br#","transitioned":"#);
            encode(pet, out);
        }
        Answer::Conflict {
            id,
            status,
            transition,
        } => {
            let _ = write!(
                out,
                r#","conflict":{{"id":{id},"status":"{}","action":"{}"}}"#,
                status.as_str(),
                transition.as_str()
            );
        }
        Answer::Order(order) => {
            out.extend_from_slice(br#","order":"#);
            encode_order(order, out);
        }
        Answer::OrderConflict { id, status } => {
            let _ = write!(
                out,
                r#","orderConflict":{{"id":{id},"status":"{}"}}"#,
                status.as_str()
            );
        }
    }
    out.push(b'}');
}

fn parse_kept(body: &[u8]) -> Result<(Keyed, Answer), String> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Conflict {
        id: PetId,
        status: PetStatus,
        action: String,
    }
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct OrderConflict {
        id: OrderId,
        status: OrderStatus,
    }
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Body {
        scope: String,
        key: String,
        fingerprint: String,
        at: u64,
        created: Option<Pet>,
        transitioned: Option<Pet>,
        conflict: Option<Conflict>,
        order: Option<OrderState>,
        order_conflict: Option<OrderConflict>,
    }
    let bad = |what: &str| format!("bad kept answer: {what}");
    let body: Body = serde_json::from_slice(body).map_err(|e| bad(&e.to_string()))?;
    let keyed = keyed_of(&body.scope, &body.key, &body.fingerprint, body.at, &bad)?;
    let checked = |pet: Pet| -> Result<Pet, String> {
        validate_name(pet.name()).map_err(|e| bad(&format!("name {e}")))?;
        Ok(pet)
    };
    let answer = match (
        body.created,
        body.transitioned,
        body.conflict,
        body.order,
        body.order_conflict,
    ) {
        (Some(pet), None, None, None, None) => Answer::Created(checked(pet)?),
        (None, Some(pet), None, None, None) => Answer::Transitioned(checked(pet)?),
        (None, None, Some(c), None, None) => Answer::Conflict {
            id: c.id,
            status: c.status,
            transition: c
                .action
                .parse::<Transition>()
                .map_err(|e| bad(&format!("action {e}")))?,
        },
        (None, None, None, Some(order), None) => Answer::Order(Box::new(order.into_order()?)),
        (None, None, None, None, Some(c)) => Answer::OrderConflict {
            id: c.id,
            status: c.status,
        },
        _ => return Err(bad("not one answer")),
    };
    Ok((keyed, answer))
}

fn encode_events(entries: &[Entry], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    for entry in entries {
        for byte in entry.to_bytes() {
            out.push(HEX[usize::from(byte >> 4)]);
            out.push(HEX[usize::from(byte & 15)]);
        }
    }
    out.push(b'"');
}

fn parse_events(body: &[u8]) -> Result<Vec<Entry>, String> {
    let bad = || "bad events: not a string of 26 hex digits an event".to_string();
    let hex = body
        .strip_prefix(b"\"")
        .and_then(|b| b.strip_suffix(b"\""))
        .ok_or_else(bad)?;
    if hex.len() % 26 != 0 {
        return Err(bad());
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    hex.chunks_exact(26)
        .map(|chunk| {
            let mut bytes = [0u8; 13];
            for (i, pair) in chunk.chunks_exact(2).enumerate() {
                bytes[i] =
                    (digit(pair[0]).ok_or_else(bad)? << 4) | digit(pair[1]).ok_or_else(bad)?;
            }
            Entry::from_bytes(bytes).ok_or_else(|| "bad events: an unknown kind".to_string())
        })
        .collect()
}

/// What [`read_snapshot`] read.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SnapshotRead {
    pub(crate) header: SnapshotHeader,
    /// Bytes read: the file's length.
    pub(crate) bytes: u64,
}

/// Reads snapshot `path` whole, giving its header and each item to
/// `restore`; any line that does not check out, a count that does not
/// match its header, or a missing end is [`OpenError::Corrupt`].
pub(crate) fn read_snapshot(
    file: impl Read,
    path: &Path,
    restore: &mut dyn Restore,
) -> Result<SnapshotRead, OpenError> {
    let corrupt = |line: u64, reason: String| OpenError::Corrupt {
        path: path.to_path_buf(),
        line,
        reason,
    };
    let mut lines = Lines::new(file);
    let mut line_no = 0u64;
    let mut header: Option<SnapshotHeader> = None;
    let (mut pets, mut orders) = (0u64, 0u64);
    let mut names: Vec<Arc<str>> = Vec::new();
    let mut json = Vec::with_capacity(512);
    loop {
        line_no += 1;
        let line = lines.next_line().map_err(|source| OpenError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let line = match line {
            None => {
                return Err(corrupt(
                    line_no,
                    "the snapshot ends before its end line".into(),
                ))
            }
            Some(Line::Complete(line)) => line,
            Some(Line::Unterminated(_)) => {
                return Err(corrupt(
                    line_no,
                    "an unterminated line: a snapshot is renamed into place only once whole".into(),
                ))
            }
            Some(Line::TooLong) => return Err(corrupt(line_no, too_long_reason())),
        };
        let Some(head) = header else {
            let body = checked_body(line, HEADER_PREFIX).map_err(|r| corrupt(line_no, r))?;
            let read: SnapshotHeader = serde_json::from_slice(body)
                .map_err(|e| corrupt(line_no, format!("bad snapshot header: {e}")))?;
            if read.version != SNAPSHOT_VERSION {
                return Err(corrupt(
                    line_no,
                    format!(
                        "snapshot format version {} (this release reads {SNAPSHOT_VERSION})",
                        read.version
                    ),
                ));
            }
            restore.header(&read).map_err(|r| corrupt(line_no, r))?;
            header = Some(read);
            continue;
        };
        let item = if line.starts_with(END_PREFIX) {
            let body = checked_body(line, END_PREFIX).map_err(|r| corrupt(line_no, r))?;
            let count: u64 = std::str::from_utf8(body)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| corrupt(line_no, "bad end line".into()))?;
            if count != line_no - 1 || pets != head.pets || orders != head.orders {
                return Err(corrupt(
                    line_no,
                    format!(
                        "the snapshot holds {} lines, {pets} pets and {orders} orders where it says {count}, {} and {}",
                        line_no - 1,
                        head.pets,
                        head.orders
                    ),
                ));
            }
            if lines.next_line().ok().flatten().is_some() {
                return Err(corrupt(line_no + 1, "a line after the end line".into()));
            }
            return Ok(SnapshotRead {
                header: head,
                bytes: lines.end(),
            });
        } else if line.starts_with(PET_PREFIX) {
            match decode_record(line, &mut json).map_err(|r| corrupt(line_no, r))? {
                (Record::Pet(id, status), None) if id.get() == pets + 1 => {
                    pets += 1;
                    Item::Pet(id, status)
                }
                (Record::Pet(id, _), None) => {
                    return Err(corrupt(
                        line_no,
                        format!("expected pet id {}, found {id}", pets + 1),
                    ))
                }
                _ => return Err(corrupt(line_no, "not a pet".into())),
            }
        } else if line.starts_with(NAMES_PREFIX) {
            let body = checked_body(line, NAMES_PREFIX).map_err(|r| corrupt(line_no, r))?;
            let more: Vec<String> = serde_json::from_slice(body)
                .map_err(|e| corrupt(line_no, format!("bad names: {e}")))?;
            names.extend(more.into_iter().map(Arc::from));
            continue;
        } else if line.starts_with(ORDERS_PREFIX) {
            let body = checked_body(line, ORDERS_PREFIX).map_err(|r| corrupt(line_no, r))?;
            let rows: Vec<(PetId, u8, usize, u64, i64, i64)> = serde_json::from_slice(body)
                .map_err(|e| corrupt(line_no, format!("bad orders: {e}")))?;
            let mut read = Vec::with_capacity(rows.len());
            for row in rows {
                orders += 1;
                read.push(order_of(orders, row, &names).map_err(|r| corrupt(line_no, r))?);
            }
            Item::Orders(read)
        } else if line.starts_with(KEPT_PREFIX) {
            let body = checked_body(line, KEPT_PREFIX).map_err(|r| corrupt(line_no, r))?;
            let (keyed, answer) = parse_kept(body).map_err(|r| corrupt(line_no, r))?;
            Item::Kept(keyed, answer)
        } else {
            let body = checked_body(line, EVENTS_PREFIX).map_err(|r| corrupt(line_no, r))?;
            Item::Events(parse_events(body).map_err(|r| corrupt(line_no, r))?)
        };
        restore.item(item, &json).map_err(|r| corrupt(line_no, r))?;
    }
}

/// Reads snapshot `n` of `dir` (a regular file) with [`read_snapshot`],
/// and refuses one whose header names another segment than its name.
pub(crate) fn read_snapshot_file(
    dir: &Path,
    n: u64,
    restore: &mut dyn Restore,
) -> Result<SnapshotRead, OpenError> {
    let path = snapshot_path(dir, n);
    let file = open_regular(&path)?;
    let read = read_snapshot(&file, &path, restore)?;
    if read.header.segment != n {
        return Err(OpenError::Corrupt {
            path,
            line: 1,
            reason: format!(
                "the snapshot says it covers segment {}, its name {n}",
                read.header.segment
            ),
        });
    }
    Ok(read)
}
