//! How a durable inventory is opened: [`JournalOptions`], its
//! [`FsyncPolicy`] and its [`CompactionPolicy`].

use std::num::NonZeroU32;

/// When created pets reach the disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FsyncPolicy {
    /// fsync (`fdatasync`) before acknowledging: a created pet survives a
    /// crash of the process or of the machine. The default.
    #[default]
    Always,
    /// Write, but let the operating system flush when it likes: a created
    /// pet survives a crash of the process, but the last seconds of pets
    /// can be lost on power loss. For benchmarks and throwaway data.
    Never,
}

/// When a compaction is due: the journal (its snapshot, closed segments
/// and live file) is over `min_bytes` and more than `ratio` times its
/// last snapshot. The defaults, 64 MiB and 2, are Redis' for its
/// append-only file: a journal is compacted once it has doubled since the
/// last time, so compactions cost a constant share of the writes, and a
/// small journal never bothers.
///
/// # Examples
///
/// ```
/// use std::num::NonZeroU32;
/// use petstore_core::journal::CompactionPolicy;
/// let policy = CompactionPolicy::default();
/// assert_eq!(policy.min_bytes, 64 << 20);
/// assert_eq!(policy.ratio, NonZeroU32::new(2).unwrap());
/// assert_eq!(policy.rest, 4);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CompactionPolicy {
    /// No compaction while the journal is this small.
    pub min_bytes: u64,
    /// How many times its last snapshot the journal grows before the next.
    pub ratio: NonZeroU32,
    /// How long a compaction rests for each moment it works, as a
    /// multiple: 4 (the default) rests two milliseconds after each half
    /// millisecond of work, so a compaction takes about five times as
    /// long and leaves requests four fifths of the core it runs on; 0 runs
    /// it flat out (a stopped server's directory, where nothing waits).
    pub rest: u32,
}

impl Default for CompactionPolicy {
    fn default() -> Self {
        CompactionPolicy {
            min_bytes: 64 << 20,
            ratio: NonZeroU32::MIN.saturating_add(1),
            rest: 4,
        }
    }
}

/// How to open a durable inventory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct JournalOptions {
    /// When pets reach the disk.
    pub fsync: FsyncPolicy,
    /// When [`Inventory::compaction_due`](crate::Inventory::compaction_due)
    /// says a compaction is due.
    pub compaction: CompactionPolicy,
}
