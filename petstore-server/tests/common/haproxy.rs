//! HAProxy for tests: [`Haproxy::start`] runs it on a configuration, in
//! the foreground (`-db`), until dropped. Fails, naming the package, when
//! `haproxy` is missing.

use std::process::{Child, Command, Stdio};

use super::TempDir;

/// A running HAProxy, and the directory of its configuration (removed
/// after it).
pub struct Haproxy {
    child: Child,
    /// Where its configuration lies; a configuration may put its socket
    /// here too.
    pub dir: TempDir,
}

impl Haproxy {
    /// A directory for a configuration that names it (a stats socket),
    /// before HAProxy starts.
    pub fn dir() -> TempDir {
        TempDir::new()
    }

    /// Runs HAProxy on `config`, written into `dir`.
    pub fn start(dir: TempDir, config: &str) -> Haproxy {
        let cfg = dir.join("haproxy.cfg");
        std::fs::write(&cfg, config).unwrap();
        let child = Command::new("haproxy")
            .arg("-db")
            .arg("-f")
            .arg(&cfg)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run haproxy ({e}): install it (Debian: apt-get install haproxy)")
            });
        Haproxy { child, dir }
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
