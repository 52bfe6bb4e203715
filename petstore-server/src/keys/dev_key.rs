//! The development key of a durable server started without a keys file,
//! kept in its data directory (`DATA/dev.key`) so that a restart prints
//! the same key and the `curl` line a developer copied keeps working.
//!
//! Why a file of its own, mode 0600: the key is a credential (on the
//! `pro` plan); only the server's user may read it. The server keeps only
//! its hash in memory, as for every key. The file is created with
//! `create_new` (never through a link someone left at that name) and
//! read only if it is a regular file of a key's length.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::util::file_read::read_regular_file;

/// The file's name in the data directory.
pub const DEV_KEY_FILE: &str = "dev.key";

/// The most bytes a development key file may hold (a key is 67).
const CAP: u64 = 256;

/// The development key kept in `data`, or, when there is none yet, a new
/// one from `make`, written there first. An error names the file and
/// what to do; the key itself is never in it.
pub fn load_or_create<E: std::fmt::Display>(
    data: &Path,
    make: impl FnOnce() -> Result<String, E>,
) -> Result<String, String> {
    let path = data.join(DEV_KEY_FILE);
    match read_regular_file(&path, CAP) {
        Ok((bytes, _)) => return parse(&path, &bytes),
        Err(e) if e.is_not_found() => {}
        Err(e) => return Err(unusable(&path, &e.to_string())),
    }
    let key = make().map_err(|e| format!("cannot make a development key: {e}"))?;
    std::fs::create_dir_all(data)
        .map_err(|e| format!("cannot create the data directory {}: {e}", data.display()))?;
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut file| {
            file.write_all(format!("{key}\n").as_bytes())?;
            file.sync_all()
        });
    match written {
        Ok(()) => Ok(key),
        // Made meanwhile by another server starting on this directory
        // (the journal's lock refuses one of them next): use that one.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let (bytes, _) =
                read_regular_file(&path, CAP).map_err(|e| unusable(&path, &e.to_string()))?;
            parse(&path, &bytes)
        }
        Err(e) => Err(format!(
            "cannot keep the development key in {}: {e}",
            path.display()
        )),
    }
}

/// The key in a file's bytes: one line of printable ASCII without spaces.
fn parse(path: &Path, bytes: &[u8]) -> Result<String, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| unusable(path, "it is not text"))?;
    let key = text.strip_suffix('\n').unwrap_or(text);
    if key.len() < 16 || !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(unusable(path, "it does not hold a key"));
    }
    Ok(key.to_owned())
}

fn unusable(path: &Path, why: &str) -> String {
    format!(
        "the development key file {} cannot be used: {why}; delete it to make a new key, or give --keys",
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn dir(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("petstore-dev-key-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_key_is_made_once_kept_with_mode_0600_and_read_again() {
        let data = dir("kept");
        let first =
            load_or_create(&data, || Ok::<_, String>("ps_0123456789abcdef".into())).unwrap();
        assert_eq!(first, "ps_0123456789abcdef");
        let mode = std::fs::metadata(data.join(DEV_KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let again = load_or_create(&data, || Err::<String, _>("must not be asked")).unwrap();
        assert_eq!(again, first);
        std::fs::remove_dir_all(&data).unwrap();
    }

    #[test]
    fn a_damaged_file_or_a_directory_is_refused_naming_the_file_not_the_key() {
        let data = dir("bad");
        std::fs::create_dir_all(&data).unwrap();
        let path = data.join(DEV_KEY_FILE);
        std::fs::write(&path, "short\n").unwrap();
        let e = load_or_create(&data, || Ok::<_, String>("unused".into())).unwrap_err();
        assert!(
            e.contains("dev.key") && e.contains("does not hold a key"),
            "{e}"
        );
        std::fs::remove_file(&path).unwrap();
        // A directory where the file should be is no key either.
        std::fs::create_dir(&path).unwrap();
        let e = load_or_create(&data, || Ok::<_, String>("unused".into())).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        std::fs::remove_dir_all(&data).unwrap();
    }
}
