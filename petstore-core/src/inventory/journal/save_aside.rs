//! Save-aside: bytes cut from the journal (a torn tail at recovery, a
//! damaged part at a repair) are first copied, durably, to a side file
//! that never overwrites another, and only then cut.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::files::{sync_dir, JOURNAL_FILE};
use super::lines::READ_BUFFER;
use crate::inventory::error::OpenError;

/// Keeps the `len` bytes of the journal `file` from offset `cut` (to its
/// end) aside, in `pets.journal.<what>-<unix-seconds>`, then cuts the file
/// to `cut` bytes, durably (the file and its directory synced). Only the
/// removed bytes are copied, so this needs free space for them alone,
/// which matters after a full disk. Recovery cuts a torn tail with it (at
/// most a record), and `repair` a damaged one (any size: streamed).
pub(crate) fn cut_aside(
    dir: &Path,
    file: &File,
    cut: u64,
    len: u64,
    what: &str,
) -> Result<PathBuf, OpenError> {
    let journal = dir.join(JOURNAL_FILE);
    let io_err = |source| OpenError::Io {
        path: journal.clone(),
        source,
    };
    let mut source = file;
    source.seek(SeekFrom::Start(cut)).map_err(io_err)?;
    let copy = save_aside(dir, what, &mut source, len, &journal)?;
    let truncate = || -> io::Result<()> {
        file.set_len(cut)?;
        file.sync_all()?;
        sync_dir(dir)
    };
    truncate().map_err(io_err)?;
    Ok(copy)
}

/// Copies exactly `len` bytes of `source` (`from` names it in errors)
/// durably to a new file `pets.journal.<what>-<unix-seconds>` in `dir`
/// and returns its path. A copy that fails half-way (a full disk, say) is
/// removed, so failed attempts leave nothing behind.
pub(crate) fn save_aside(
    dir: &Path,
    what: &str,
    source: &mut dyn Read,
    len: u64,
    from: &Path,
) -> Result<PathBuf, OpenError> {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    save_aside_at(dir, what, source, len, from, secs)
}

/// Which side of a copy failed, so that the error names the right file.
enum CopyFault {
    Read(io::Error),
    Write(io::Error),
}

/// [`save_aside`] with the clock's reading given: the names it tries are
/// `pets.journal.WHAT-SECS`, then `-1` to `-1000` after it.
fn save_aside_at(
    dir: &Path,
    what: &str,
    source: &mut dyn Read,
    len: u64,
    from: &Path,
    secs: u64,
) -> Result<PathBuf, OpenError> {
    let mut n = 0u32;
    loop {
        let name = match n {
            0 => format!("{JOURNAL_FILE}.{what}-{secs}"),
            _ => format!("{JOURNAL_FILE}.{what}-{secs}-{n}"),
        };
        let path = dir.join(name);
        let mut file = match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 1000 => {
                n += 1;
                continue;
            }
            Err(source) => return Err(OpenError::Io { path, source }),
        };
        let written = copy_exactly(source, len, &mut file)
            .and_then(|()| file.sync_all().map_err(CopyFault::Write))
            .and_then(|()| sync_dir(dir).map_err(CopyFault::Write));
        return match written {
            Ok(()) => Ok(path),
            Err(fault) => {
                drop(file);
                // Best effort: the error that matters is the fault.
                let _ = fs::remove_file(&path);
                Err(match fault {
                    CopyFault::Read(source) => OpenError::Io {
                        path: from.to_path_buf(),
                        source,
                    },
                    CopyFault::Write(source) => OpenError::Io { path, source },
                })
            }
        };
    }
}

/// Copies exactly `len` bytes of `source` to the start of the empty file
/// `out`, a chunk of at most `READ_BUFFER` at a time: a repair may move
/// gigabytes of garbage aside, and must not hold them in memory. A chunk
/// of zeros is skipped with a seek rather than written (the file's final
/// length fills it with zeros just the same), so that moving a sparse
/// tail aside costs no more disk than it did in the journal.
fn copy_exactly(source: &mut dyn Read, len: u64, out: &mut File) -> Result<(), CopyFault> {
    let mut buf = vec![0u8; usize::try_from(len).map_or(READ_BUFFER, |l| l.min(READ_BUFFER))];
    let mut left = len;
    while left > 0 {
        let want = usize::try_from(left).map_or(buf.len(), |l| l.min(buf.len()));
        let n = match source.read(&mut buf[..want]) {
            Ok(0) => {
                return Err(CopyFault::Read(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("ended {left} bytes early: shorter than when it was read"),
                )))
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(CopyFault::Read(e)),
        };
        let chunk = &buf[..n];
        let done = if chunk.iter().all(|b| *b == 0) {
            // `n` is at most `READ_BUFFER`, which fits an `i64`.
            out.seek(SeekFrom::Current(n as i64)).map(drop)
        } else {
            out.write_all(chunk)
        };
        done.map_err(CopyFault::Write)?;
        left -= n as u64;
    }
    // Zeros skipped at the end are not in the file until its length is.
    out.set_len(len).map_err(CopyFault::Write)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory under the system's temporary one.
    fn scratch_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "petstore-journal-unit-{name}-{}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// The clock reading of the tests of `save_aside_at`: a fixed one, so
    /// that the names they take are the names it tries, however long the
    /// test runs on a busy machine (the real clock could cross into the
    /// next seconds between taking the names and trying them).
    const SECS: u64 = 1_800_000_000;

    /// Takes the names `save_aside_at` tries for `what` at [`SECS`]: the
    /// plain name for suffix 0, then `-N` for each other suffix.
    fn take_names(dir: &Path, what: &str, suffixes: std::ops::Range<u32>) {
        for n in suffixes {
            let name = match n {
                0 => format!("{JOURNAL_FILE}.{what}-{SECS}"),
                _ => format!("{JOURNAL_FILE}.{what}-{SECS}-{n}"),
            };
            fs::write(dir.join(name), b"taken").unwrap();
        }
    }

    #[test]
    fn save_aside_never_overwrites_and_tries_at_most_a_thousand_names() {
        let dir = scratch_dir("aside");
        let from = dir.join(JOURNAL_FILE);
        // The plain name taken: the next free one, with the bytes.
        take_names(&dir, "torn", 0..1);
        let kept = save_aside_at(&dir, "torn", &mut &b"torn bytes"[..], 10, &from, SECS).unwrap();
        let name = kept.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.ends_with("-1"), "{name}");
        assert_eq!(fs::read(&kept).unwrap(), b"torn bytes");
        // The plain name and 1..=1000 taken: refused, naming the last try.
        take_names(&dir, "bad", 0..1001);
        match save_aside_at(&dir, "bad", &mut &b"x"[..], 1, &from, SECS) {
            Err(OpenError::Io { path, source }) => {
                assert_eq!(source.kind(), io::ErrorKind::AlreadyExists);
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                assert!(name.ends_with("-1000"), "{name}");
            }
            other => panic!("{other:?}"),
        }
        // Another error is not retried under other names.
        let missing = dir.join("missing");
        match save_aside_at(&missing, "torn", &mut &b"x"[..], 1, &from, SECS) {
            Err(OpenError::Io { path, source }) => {
                assert_eq!(source.kind(), io::ErrorKind::NotFound);
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                // `pets.journal.torn-SECS`: the first name, no `-N`.
                assert_eq!(name.matches('-').count(), 1, "{name}");
            }
            other => panic!("{other:?}"),
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn save_aside_copies_exactly_holes_and_all_and_refuses_a_short_source() {
        let dir = scratch_dir("copy");
        let from = dir.join(JOURNAL_FILE);
        // Zeros at the start, in the middle, at the end, across chunks.
        let mut bytes = vec![0u8; 3 * READ_BUFFER + 10];
        bytes[READ_BUFFER + 5] = b'x';
        bytes[2 * READ_BUFFER..2 * READ_BUFFER + 3].copy_from_slice(b"abc");
        let len = bytes.len() as u64;
        let kept = save_aside_at(&dir, "removed", &mut &bytes[..], len, &from, SECS).unwrap();
        assert_eq!(fs::read(&kept).unwrap(), bytes);
        // Only `len` bytes, however long the source.
        let kept = save_aside_at(&dir, "removed", &mut &b"abcdef"[..], 4, &from, SECS).unwrap();
        assert_eq!(fs::read(&kept).unwrap(), b"abcd");
        // A source that ends early (the journal changed): an error naming
        // the journal, and no copy left behind.
        let before = fs::read_dir(&dir).unwrap().count();
        match save_aside_at(&dir, "torn", &mut &b"abc"[..], 4, &from, SECS) {
            Err(OpenError::Io { path, source }) => {
                assert_eq!(path, from);
                assert_eq!(source.kind(), io::ErrorKind::UnexpectedEof);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(fs::read_dir(&dir).unwrap().count(), before);
        fs::remove_dir_all(&dir).unwrap();
    }
}
