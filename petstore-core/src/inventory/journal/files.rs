//! The journal's files: their names in the data directory, the checks that
//! a path is a regular file, a file's identity, and a directory's sync.

use std::fs::{self, File};
use std::io;
use std::path::Path;

use crate::inventory::error::OpenError;

/// The journal's file name inside the data directory.
pub const JOURNAL_FILE: &str = "pets.journal";

/// The lock file inside the data directory: whoever holds its `flock`
/// owns the whole directory (the journal and any other state kept there).
pub const LOCK_FILE: &str = ".lock";

/// The `(device, inode)` pair that names a file (`None` where there is no
/// such pair: then the path is not checked). One function with the `cfg`
/// inside, so that mutation testing mutates the code that runs here.
pub(super) fn file_identity(meta: &fs::Metadata) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some((meta.dev(), meta.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        None
    }
}

/// Refuses a journal that exists and is not a regular file, before it is
/// opened (following a symlink): a FIFO would hang its reader, and a
/// device such as `/dev/zero` never ends, so a check would read it
/// forever (memory stays bounded: the journal is read as a stream). A
/// missing file is fine (it is created, or reported).
pub(crate) fn ensure_regular_path(path: &Path) -> io::Result<()> {
    match fs::metadata(path) {
        Ok(meta) if !meta.is_file() => Err(not_regular()),
        _ => Ok(()),
    }
}

/// The same check on the opened handle, for a file swapped in between.
pub(crate) fn ensure_regular_file(file: &File) -> io::Result<()> {
    if file.metadata()?.is_file() {
        Ok(())
    } else {
        Err(not_regular())
    }
}

fn not_regular() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "not a regular file (a FIFO, a device or a directory); refusing to read it",
    )
}

/// Opens `path` to read, refusing anything but a regular file (checked
/// before the open and on the handle, see [`ensure_regular_path`]).
pub(crate) fn open_regular(path: &Path) -> Result<File, OpenError> {
    let io_err = |source| OpenError::Io {
        path: path.to_path_buf(),
        source,
    };
    ensure_regular_path(path).map_err(io_err)?;
    let file = File::open(path).map_err(io_err)?;
    ensure_regular_file(&file).map_err(io_err)?;
    Ok(file)
}

/// Syncs the directory itself, so that a file created in it (or a
/// length it was cut to) survives a crash along with its name.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}
