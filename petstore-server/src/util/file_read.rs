//! Reading a file an operator names (the keys file, the limiter state)
//! without letting it stall or swell the server: [`read_regular_file`].
//!
//! Why the checks: opening a FIFO for reading blocks until a writer
//! appears, and reading a device or a huge file can take any time and
//! memory. So the path's metadata is checked *before* opening (a FIFO is
//! refused without ever being opened), and the opened file's metadata is
//! checked again (the path may have been replaced in between). The one
//! window left, a path replaced by a FIFO between the check and the
//! `open`, can still block that `open`: callers that must not stall (a
//! reload) run this off the runtime's worker threads.

use std::fs::{File, Metadata};
use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The operating system refused (missing file, permissions, I/O).
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Not a regular file.
    #[error("it is not a regular file (it is {0})")]
    NotRegular(&'static str),
    /// Larger than the caller's cap.
    #[error("it is larger than the limit of {cap} bytes")]
    TooLarge {
        /// The cap, in bytes.
        cap: u64,
    },
}

impl FileError {
    /// The file does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, FileError::Io(e) if e.kind() == std::io::ErrorKind::NotFound)
    }
}

fn kind(meta: &Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_file() {
        None
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_socket() {
        Some("a socket")
    } else if t.is_block_device() || t.is_char_device() {
        Some("a device")
    } else {
        Some("not a regular file")
    }
}

fn check(meta: &Metadata, cap: u64) -> Result<(), FileError> {
    if let Some(kind) = kind(meta) {
        return Err(FileError::NotRegular(kind));
    }
    if meta.len() > cap {
        return Err(FileError::TooLarge { cap });
    }
    Ok(())
}

/// Reads `path` whole if it is a regular file (a symbolic link to one is
/// fine) of at most `cap` bytes; returns its bytes and the opened file's
/// metadata (its permissions, for instance).
pub fn read_regular_file(path: &Path, cap: u64) -> Result<(Vec<u8>, Metadata), FileError> {
    check(&std::fs::metadata(path)?, cap)?;
    let file = File::open(path)?;
    let meta = file.metadata()?;
    check(&meta, cap)?;
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    // The file may grow after the check: never read more than the cap.
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(FileError::TooLarge { cap });
    }
    Ok((bytes, meta))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_directories_and_large_files_reads_the_rest() {
        let dir = std::env::temp_dir().join(format!("petstore-file-read-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(matches!(
            read_regular_file(&dir, 10),
            Err(FileError::NotRegular("a directory"))
        ));
        let path = dir.join("f");
        std::fs::write(&path, b"0123456789").unwrap();
        assert_eq!(read_regular_file(&path, 10).unwrap().0, b"0123456789");
        assert!(matches!(
            read_regular_file(&path, 9),
            Err(FileError::TooLarge { cap: 9 })
        ));
        assert!(read_regular_file(&dir.join("missing"), 9)
            .unwrap_err()
            .is_not_found());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
