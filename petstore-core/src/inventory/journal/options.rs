//! How a durable inventory is opened: [`JournalOptions`] and its
//! [`FsyncPolicy`].

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

/// How to open a durable inventory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct JournalOptions {
    /// When pets reach the disk.
    pub fsync: FsyncPolicy,
}
