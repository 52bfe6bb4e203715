//! The typed errors of the library. Each names what was wrong, so a server
//! can turn it into a clear message without guessing.

/// Why a text or number is not a valid [`PetId`](crate::PetId) or
/// [`CategoryId`](crate::CategoryId).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// Not a plain decimal integer.
    #[error("must be an integer")]
    NotAnInteger,
    /// An integer outside 1 to 2^63 - 1.
    #[error("must be an integer from 1 to 9223372036854775807")]
    OutOfRange,
    /// Digits with a leading zero (`01`): a number has one spelling.
    #[error("must be written without leading zeros")]
    LeadingZero,
}

/// Why a pet name is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The empty string.
    #[error("must not be empty")]
    Empty,
    /// Only whitespace and invisible (default-ignorable) characters.
    #[error(
        "must contain at least one visible character, not only whitespace or invisible characters"
    )]
    Blank,
    /// More than 100 characters.
    #[error("must be at most 100 characters")]
    TooLong,
    /// Holds a control character (Unicode category Cc), a bidirectional
    /// control (U+202A to U+202E, U+2066 to U+2069) or a noncharacter.
    #[error("must not contain control characters, bidirectional controls or noncharacters")]
    ControlCharacter,
}

/// Why a `createPet` body or a [`NewPet`](crate::NewPet) is refused.
///
/// [`field`](PetError::field) names the field at fault where there is one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PetError {
    /// No body at all.
    #[error("request body is empty; expected a JSON object with name and categoryId")]
    Empty,
    /// Not valid JSON.
    #[error("request body is not valid JSON: {0}")]
    Malformed(String),
    /// Valid JSON, but not an object.
    #[error("request body must be a JSON object")]
    NotAnObject,
    /// The client sent an `id`; the inventory assigns ids.
    #[error("field `id` must not be sent; the service assigns ids")]
    IdNotAllowed,
    /// A field the schema does not have.
    #[error(
        "unknown field `{}`; allowed fields are name, categoryId, status",
        crate::quote::quote(.0)
    )]
    UnknownField(String),
    /// The same field twice.
    #[error("field `{0}` appears more than once")]
    DuplicateField(&'static str),
    /// A required field is absent.
    #[error("field `{0}` is required")]
    MissingField(&'static str),
    /// A field holds a value of the wrong JSON type (`null` included).
    #[error("field `{field}` must be {expected}")]
    WrongType {
        /// The field.
        field: &'static str,
        /// What it must be, in words.
        expected: &'static str,
    },
    /// `name` breaks a rule.
    #[error("field `name` {0}")]
    Name(NameError),
    /// `categoryId` is not within 1 to 2^63 - 1.
    #[error("field `categoryId` {0}")]
    CategoryId(IdError),
    /// `status` is not one of the three values.
    #[error("field `status` must be one of available, pending, sold")]
    Status,
}

impl PetError {
    /// The field at fault, if the error is about one field.
    pub fn field(&self) -> Option<&str> {
        match self {
            PetError::Empty | PetError::Malformed(_) | PetError::NotAnObject => None,
            PetError::IdNotAllowed => Some("id"),
            PetError::UnknownField(name) => Some(name),
            PetError::DuplicateField(f) | PetError::MissingField(f) => Some(f),
            PetError::WrongType { field, .. } => Some(field),
            PetError::Name(_) => Some("name"),
            PetError::CategoryId(_) => Some("categoryId"),
            PetError::Status => Some("status"),
        }
    }
}

/// Why [`Inventory::create`](crate::Inventory::create) did not store a pet.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// Every id up to 2^63 - 1 has been given out.
    #[error("the inventory is full: no pet ids are left")]
    IdsExhausted,
    /// The journal could not be written or synced, or its file was
    /// deleted or replaced. The pet was not stored (or not durably), and
    /// the inventory refuses every later create until it is reopened;
    /// reads go on.
    #[error("the inventory cannot store pets: {0}")]
    Storage(StorageFailure),
}

/// Why a durable inventory cannot store pets any more, in words fit for a
/// client or a health check: never a path or an error number (those are
/// in [`StorageFailure::detail`], for the log).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum StorageFault {
    /// A write or fsync found the disk full.
    #[error("the data disk is full")]
    NoSpace,
    /// Writing the journal failed.
    #[error("the journal could not be written")]
    WriteFailed,
    /// Syncing the journal to disk failed.
    #[error("the journal could not be synced to disk")]
    SyncFailed,
    /// The journal's path no longer names the file the inventory writes:
    /// it was deleted, or replaced by another file. Pets written now would
    /// be lost at the next start.
    #[error("the journal file was deleted or replaced")]
    JournalReplaced,
}

/// A durable inventory's storage failure: what kind ([`StorageFault`], for
/// clients and health checks) and the details (for the operator's log).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{fault}: {detail}")]
pub struct StorageFailure {
    /// What went wrong, without paths.
    pub fault: StorageFault,
    /// The details: the journal's path and the operating system's error.
    pub detail: String,
}

/// Why [`Inventory::open`](crate::Inventory::open) failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The directory or journal could not be created, read or written.
    #[error("cannot use {path}: {source}")]
    Io {
        /// The path at fault.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A complete record (one ending in a newline, the last included) is
    /// damaged: that is corruption, not a torn write, and dropping it
    /// could drop an acknowledged pet.
    #[error("{path} line {line} is damaged ({reason}); refusing to open rather than drop an acknowledged pet")]
    Corrupt {
        /// The journal file.
        path: std::path::PathBuf,
        /// The line (1-based).
        line: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// Another process (a server, or a `journal repair`) holds the data
    /// directory's lock file.
    #[error("the data directory {dir} is in use by another process (it holds the lock on {lock})")]
    Locked {
        /// The data directory.
        dir: std::path::PathBuf,
        /// Its lock file.
        lock: std::path::PathBuf,
    },
}

/// Why [`Inventory::apply`](crate::Inventory::apply) refused pets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// The pets do not follow on from the inventory's last id: the next id
    /// it can take is `expected`, and `found` came (a gap, or pets out of
    /// order). Nothing was applied.
    #[error("pet ids must follow on: expected id {expected}, found {found}")]
    Gap {
        /// The next id the inventory can take.
        expected: u64,
        /// The id that came instead.
        found: u64,
    },
    /// The inventory is durable: its pets come from its journal alone, and
    /// pets applied only in memory would be lost at the next start.
    #[error("pets can be applied only to an in-memory inventory")]
    Durable,
}

/// A page size outside 1 to 100.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("limit must be an integer from 1 to 100")]
pub struct LimitError;

/// A rate-limit configuration that cannot work.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuotaError {
    /// A limit of zero requests.
    #[error("a rate limit must allow at least one request")]
    Zero,
    /// The enterprise plan has no default numbers.
    #[error("plan `enterprise` needs perMinute and perDay")]
    MissingEnterpriseLimits,
    /// A ban policy with a zero count or duration.
    #[error("ban strikes, windowSeconds and banSeconds must be at least 1")]
    InvalidBan,
}
