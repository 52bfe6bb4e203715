//! A private PostgreSQL for tests: `initdb` into a temporary directory,
//! a free port on 127.0.0.1, its unix socket inside that directory. Tests
//! can stop it (`-m fast`, `-m immediate`), kill it with SIGKILL, and
//! start it again; it is stopped and its directory removed on drop.
//!
//! A standby ([`Postgres::standby_of`]: `pg_basebackup -R` from a
//! primary, streaming, synchronous once the primary requires it) can be
//! promoted, for failover tests.
//!
//! PostgreSQL refuses to run as root: as root, its commands run as the
//! `postgres` user (`runuser`), which owns the directory. Without the
//! server binaries the test fails, naming what to install; it never skips.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Where the binaries may be, besides `PETSTORE_TEST_PG_BIN`.
/// The schema version the server migrates a database to.
pub const SCHEMA_VERSION: u32 = 8;

const SEARCH: &[&str] = &[
    "/usr/lib/postgresql/17/bin",
    "/usr/lib/postgresql/16/bin",
    "/usr/lib/postgresql/15/bin",
    "/usr/lib/postgresql/14/bin",
    "/usr/local/pgsql/bin",
    "/usr/local/bin",
    "/usr/bin",
];

/// One private PostgreSQL server.
#[derive(Debug)]
pub struct Postgres {
    bin: PathBuf,
    dir: super::TempDir,
    /// Its TCP port on 127.0.0.1.
    pub port: u16,
    as_postgres_user: bool,
}

fn find_bin() -> PathBuf {
    let wanted = ["initdb", "pg_ctl", "postgres", "psql"];
    let candidates = std::env::var_os("PETSTORE_TEST_PG_BIN")
        .map(PathBuf::from)
        .into_iter()
        .chain(SEARCH.iter().map(PathBuf::from));
    for dir in candidates {
        if wanted.iter().all(|b| dir.join(b).is_file()) {
            return dir;
        }
    }
    panic!(
        "the PostgreSQL tests need PostgreSQL's server binaries (initdb, pg_ctl, postgres, psql), \
         and none were found in {SEARCH:?}: install them (Debian/Ubuntu: apt-get install postgresql-15; \
         Fedora: dnf install postgresql-server), or set PETSTORE_TEST_PG_BIN to their directory"
    );
}

fn is_root() -> bool {
    // `/proc/self` belongs to the process's effective user.
    std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false)
}

impl Postgres {
    /// initdb and start; waits until it accepts connections.
    pub fn start() -> Postgres {
        let bin = find_bin();
        let dir = super::TempDir::new();
        let as_postgres_user = is_root();
        if as_postgres_user {
            // The data directory must belong to the user that runs the
            // server, and the path to it must be traversable.
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&dir)
                .status()
                .unwrap();
            assert!(status.success(), "chown of {} failed", dir.display());
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        let pg = Postgres {
            bin,
            dir,
            port: super::free_port(),
            as_postgres_user,
        };
        let out = pg.run(
            "initdb",
            &[
                "-D",
                &pg.data().display().to_string(),
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
            ],
        );
        assert!(out.status.success(), "initdb failed: {}", text(&out));
        let conf = format!(
            "port = {}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n\
             fsync = off\nfull_page_writes = off\nmax_connections = 60\nshared_buffers = 32MB\n",
            pg.port,
            pg.dir.display()
        );
        let conf_path = pg.data().join("postgresql.conf");
        let mut all = std::fs::read_to_string(&conf_path).unwrap();
        all.push_str(&conf);
        std::fs::write(&conf_path, all).unwrap();
        pg.start_again();
        pg
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// A connection string for `--postgres`.
    pub fn url(&self) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/postgres?connect_timeout=2",
            self.port
        )
    }

    fn run(&self, program: &str, args: &[&str]) -> Output {
        let path = self.bin.join(program);
        let mut cmd = if self.as_postgres_user {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", "postgres", "--"]).arg(path);
            cmd
        } else {
            Command::new(path)
        };
        cmd.args(args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// Starts the server (again); waits until it accepts connections.
    pub fn start_again(&self) {
        let data = self.data().display().to_string();
        let log = self.dir.join("log").display().to_string();
        let out = self.run(
            "pg_ctl",
            &["-D", &data, "-l", &log, "-w", "-t", "60", "start"],
        );
        assert!(
            out.status.success(),
            "pg_ctl start failed: {}\n--- log:\n{}",
            text(&out),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    /// `pg_ctl stop -m mode` (`fast`: disconnects clients and shuts down
    /// cleanly; `immediate`: quits at once, recovery at the next start).
    pub fn stop(&self, mode: &str) {
        let data = self.data().display().to_string();
        let out = self.run(
            "pg_ctl",
            &["-D", &data, "-m", mode, "-w", "-t", "60", "stop"],
        );
        assert!(out.status.success(), "pg_ctl stop failed: {}", text(&out));
    }

    /// SIGKILL to the postmaster (its children then quit as well), and
    /// waits until the port refuses connections.
    pub fn kill9(&self) {
        let pid_file = std::fs::read_to_string(self.data().join("postmaster.pid")).unwrap();
        let pid = pid_file.lines().next().unwrap().trim().to_owned();
        let status = Command::new("kill").args(["-9", &pid]).status().unwrap();
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
            assert!(
                Instant::now() < deadline,
                "PostgreSQL still listens after kill -9"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // The postmaster's children notice its death and exit; a new one
        // refuses to start while they hold the shared memory.
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.children_alive(&pid) {
            assert!(
                Instant::now() < deadline,
                "PostgreSQL's backends outlive kill -9"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // What a killed postmaster leaves behind, and a new one refuses
        // to start over.
        let _ = std::fs::remove_file(self.data().join("postmaster.pid"));
        let socket = self.dir.join(format!(".s.PGSQL.{}", self.port));
        let _ = std::fs::remove_file(socket.with_extension(format!("{}.lock", self.port)));
        let _ = std::fs::remove_file(&socket);
    }

    fn children_alive(&self, parent: &str) -> bool {
        let out = Command::new("pgrep")
            .args(["-P", parent])
            .output()
            .map(|o| !o.stdout.is_empty());
        out.unwrap_or(false)
    }

    /// The psql command that runs `sql` (unaligned, tuples only, stopping
    /// at the first error), to run at once or on a thread of its own.
    pub fn psql_command(&self, sql: &str) -> Command {
        let mut command = self.psql_on();
        command.args(["-Atc", sql]).stdin(Stdio::null());
        command
    }

    /// psql on this server's `postgres` database as `postgres`, stopping
    /// at the first error; the caller adds what it runs.
    fn psql_on(&self) -> Command {
        let mut command = Command::new(self.bin.join("psql"));
        command.args([
            "-h",
            "127.0.0.1",
            "-p",
            &self.port.to_string(),
            "-U",
            "postgres",
            "-d",
            "postgres",
            "-v",
            "ON_ERROR_STOP=1",
        ]);
        command
    }

    /// A psql session that reads SQL from its stdin (piped), so that a
    /// test can open a transaction, hold its locks while something else
    /// waits on them, and end it when it chooses. Its output is dropped.
    pub fn psql_session(&self) -> std::process::Child {
        self.psql_on()
            .arg("-Aq")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }

    /// Runs `script` in one psql session (its statements one at a time,
    /// stopping at the first error); psql's whole output, notices and
    /// `\warn` lines in order on its stderr.
    pub fn psql_script(&self, script: &str) -> Output {
        let mut child = self
            .psql_on()
            .args(["-Aq", "-v", "ON_ERROR_STOP=1", "-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(script.as_bytes()).unwrap();
        drop(stdin);
        child.wait_with_output().unwrap()
    }

    /// Runs `sql` with psql; returns its unaligned, tuples-only output.
    pub fn psql(&self, sql: &str) -> String {
        self.try_psql(sql)
            .unwrap_or_else(|e| panic!("psql {sql:?} failed: {e}"))
    }

    /// The call of `petstore_steps` a replica's committer makes for one
    /// batch of `kinds` on `targets`, by the key `shop`, none keyed.
    pub fn steps_sql(kinds: &[&str], targets: &[u64]) -> String {
        let n = kinds.len();
        let kinds: Vec<String> = kinds.iter().map(|k| format!("'{k}'")).collect();
        let targets: Vec<String> = targets.iter().map(u64::to_string).collect();
        format!(
            "SELECT count(*) FROM petstore_steps(ARRAY[{}]::text[], ARRAY[{}]::int8[], \
             array_fill('shop'::text, ARRAY[{n}]), array_fill(false, ARRAY[{n}]), \
             array_fill(600, ARRAY[{n}]), array_fill(NULL::text, ARRAY[{n}]), \
             array_fill(NULL::text, ARRAY[{n}]), array_fill(NULL::bytea, ARRAY[{n}]), \
             array_fill(NULL::timestamptz, ARRAY[{n}]), 86400);",
            kinds.join(","),
            targets.join(","),
        )
    }

    /// Waits until one of `replicas`, started on a database at schema
    /// version `from`, logs that it migrated it (the harness reads stderr
    /// on a thread of its own; the bound only cuts off a line that never
    /// comes), then asserts that exactly one did and that the database is
    /// at [`SCHEMA_VERSION`].
    pub fn assert_migrated_once(&self, replicas: &[&super::Server], from: u32) {
        let migrated = format!("schema migrated from version {from} to {SCHEMA_VERSION}");
        let log = || replicas.iter().map(|r| r.stderr_text()).collect::<String>();
        super::wait_until(Duration::from_secs(30), || log().contains(&migrated));
        let log = log();
        assert_eq!(
            log.matches(&migrated).count(),
            1,
            "one replica migrates, the others find it done:\n{log}"
        );
        assert_eq!(
            self.psql("SELECT version FROM petstore_schema"),
            SCHEMA_VERSION.to_string()
        );
    }

    /// Takes the schema back to `version` (2 to 7), as a database made by
    /// that release holds it, its pets (and kept keys) left as they are:
    /// what a migration test starts from. Each step undoes one version.
    pub fn downgrade_to(&self, version: u32) {
        assert!((2..=7).contains(&version), "no downgrade to {version}");
        // 8: the indexes no query reads, back.
        self.psql(
            "CREATE INDEX petstore_pets_available ON petstore_pets (id) WHERE status = 'available';
             CREATE INDEX petstore_pets_pending ON petstore_pets (id) WHERE status = 'pending';
             CREATE INDEX petstore_pets_sold ON petstore_pets (id) WHERE status = 'sold';
             CREATE INDEX petstore_events_at ON petstore_events (at);
             UPDATE petstore_schema SET version = 7;",
        );
        if version == 7 {
            return;
        }
        // 7: the batch's state as a row type. `petstore_steps` keeps its
        // newer body, which the migration replaces before any call.
        self.psql(
            "DROP FUNCTION petstore_steps_state; DROP TYPE petstore_step_state;
             CREATE FUNCTION petstore_steps_state(kinds text[], targets bigint[])
             RETURNS TABLE (n integer, kind text, target bigint, named_id bigint,
                            named_pet bigint, named_status text, named_by text,
                            named_placed timestamptz, named_expires timestamptz, pet bigint,
                            pet_status text, pet_name text, pet_category bigint,
                            open_id bigint, open_by text, open_placed timestamptz,
                            open_expires timestamptz)
             LANGUAGE sql STABLE AS $$
                 SELECT i.n::integer, i.kind, i.target, o.id, o.pet_id, o.status, o.placed_by,
                        o.placed_at, o.expires_at, p.id, p.status, p.name, p.category_id,
                        op.id, op.placed_by, op.placed_at, op.expires_at
                 FROM unnest(kinds, targets) WITH ORDINALITY AS i(kind, target, n)
                 LEFT JOIN petstore_orders o
                     ON i.kind IN ('complete', 'cancel') AND o.id = i.target
                 LEFT JOIN petstore_pets p ON p.id = CASE WHEN i.kind IN ('complete', 'cancel')
                                                          THEN o.pet_id ELSE i.target END
                 LEFT JOIN petstore_orders op ON op.pet_id = p.id AND op.status = 'placed'
                 ORDER BY i.n
             $$;
             UPDATE petstore_schema SET version = 6;",
        );
        if version == 6 {
            return;
        }
        // 6: the feed of events, its triggers and their functions.
        self.psql(
            "DROP TRIGGER petstore_pets_created ON petstore_pets;
             DROP TRIGGER petstore_pets_changed ON petstore_pets;
             DROP TRIGGER petstore_orders_placed ON petstore_orders;
             DROP TRIGGER petstore_orders_changed ON petstore_orders;
             DROP FUNCTION petstore_pets_created; DROP FUNCTION petstore_pets_changed;
             DROP FUNCTION petstore_orders_placed; DROP FUNCTION petstore_orders_changed;
             DROP FUNCTION petstore_append_events;
             DROP TABLE petstore_events; DROP TABLE petstore_event_counter;
             UPDATE petstore_schema SET version = 5;",
        );
        if version == 5 {
            return;
        }
        // 5: the orders, their functions, and the kept orders' columns
        // and CHECKs (the answer codes and the kept row as version 4
        // wrote them).
        self.psql(
            "DROP FUNCTION petstore_expire; DROP FUNCTION petstore_steps;
             DROP FUNCTION petstore_steps_state;
             DROP FUNCTION petstore_close_order; DROP FUNCTION petstore_set_pet;
             DROP TABLE petstore_orders; DROP TABLE petstore_order_counter;
             ALTER TABLE petstore_idempotency
                 DROP CONSTRAINT petstore_idempotency_answer,
                 DROP CONSTRAINT petstore_idempotency_kept,
                 DROP COLUMN order_id, DROP COLUMN order_status,
                 ADD CONSTRAINT petstore_idempotency_answer_check
                     CHECK (answer IN (0, 200, 201, 409)),
                 ADD CONSTRAINT petstore_idempotency_check
                     CHECK (answer = 0 OR pet_id IS NOT NULL AND status IS NOT NULL);
             UPDATE petstore_schema SET version = 4;",
        );
        if version <= 3 {
            self.psql(
                "DROP FUNCTION petstore_create_keyed;
                 DROP FUNCTION petstore_transition_keyed;
                 DROP TABLE petstore_idempotency;
                 UPDATE petstore_schema SET version = 3;",
            );
        }
        if version <= 2 {
            self.psql(
                "DROP FUNCTION petstore_transition(bigint[], text[], text[]);
                 DROP TABLE petstore_changes;
                 ALTER TABLE petstore_pets DROP COLUMN last_change;
                 UPDATE petstore_schema SET version = 2;",
            );
        }
    }

    /// Writes pet 2 with a name the contract refuses (a control
    /// character), around the table's CHECK, as a database from before
    /// that CHECK (or a hand-written row) could hold it: a row a
    /// replica's copy cannot apply.
    pub fn write_a_row_the_copy_refuses(&self) {
        self.psql("ALTER TABLE petstore_pets DROP CONSTRAINT petstore_pets_name_contract");
        self.psql(
            r#"INSERT INTO petstore_pets (id, name, category_id, status, json)
               VALUES (2, E'bad\x01', 1, 'available',
                       '{"id":2,"name":"bad\u0001","categoryId":1,"status":"available"}');
               UPDATE petstore_counter SET last_id = 2"#,
        );
    }

    /// [`psql`](Self::psql), with PostgreSQL's error as `Err`.
    pub fn try_psql(&self, sql: &str) -> Result<String, String> {
        let out = self.psql_command(sql).output().unwrap();
        if !out.status.success() {
            return Err(text(&out));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// The directory (data, log, socket).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Postgres {
    /// A streaming standby of `primary`: `pg_basebackup -R` (which writes
    /// `standby.signal` and `primary_conninfo`) into a directory of its
    /// own, then started on a free port of its own; waits until the
    /// primary sees it streaming. `pg_ctl promote` makes it a primary
    /// ([`promote`](Self::promote)).
    pub fn standby_of(primary: &Postgres) -> Postgres {
        let dir = super::TempDir::new();
        if primary.as_postgres_user {
            let status = Command::new("chown")
                .args(["postgres:postgres"])
                .arg(&dir)
                .status()
                .unwrap();
            assert!(status.success(), "chown of {} failed", dir.display());
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        let standby = Postgres {
            bin: primary.bin.clone(),
            dir,
            port: super::free_port(),
            as_postgres_user: primary.as_postgres_user,
        };
        assert!(
            primary.bin.join("pg_basebackup").is_file(),
            "a standby needs pg_basebackup beside initdb in {} (Debian/Ubuntu: the postgresql-15 package)",
            primary.bin.display()
        );
        let from_port = primary.port.to_string();
        let out = standby.run(
            "pg_basebackup",
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &from_port,
                "-U",
                "postgres",
                "-D",
                &standby.data().display().to_string(),
                "-R",
                "-X",
                "stream",
                "--no-sync",
            ],
        );
        assert!(out.status.success(), "pg_basebackup failed: {}", text(&out));
        // The copied postgresql.conf names the primary's port and socket
        // directory: the later lines win.
        let conf_path = standby.data().join("postgresql.conf");
        let mut all = std::fs::read_to_string(&conf_path).unwrap();
        all.push_str(&format!(
            "port = {}\nunix_socket_directories = '{}'\n",
            standby.port,
            standby.dir.display()
        ));
        std::fs::write(&conf_path, all).unwrap();
        standby.start_again();
        let streaming = super::wait_until(Duration::from_secs(60), || {
            primary
                .try_psql("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")
                .is_ok_and(|n| n == "1")
        });
        assert!(streaming, "the standby never streamed from the primary");
        standby
    }

    /// Makes every commit here wait until a standby has flushed it
    /// (`synchronous_standby_names = '*'`, `synchronous_commit = on`),
    /// and waits until the primary counts its standby as synchronous.
    /// Set on this server only (`ALTER SYSTEM`, after the base backup):
    /// a promoted standby that required a standby of its own would make
    /// every commit wait for one that does not exist.
    pub fn require_synchronous_standby(&self) {
        self.psql("ALTER SYSTEM SET synchronous_standby_names = '*'");
        self.psql("ALTER SYSTEM SET synchronous_commit = 'on'");
        self.psql("SELECT pg_reload_conf()");
        let sync = super::wait_until(Duration::from_secs(60), || {
            self.try_psql("SELECT sync_state FROM pg_stat_replication")
                .is_ok_and(|s| s == "sync")
        });
        assert!(sync, "the standby never became synchronous");
    }

    /// `pg_ctl promote -w`: the standby ends recovery and accepts writes.
    pub fn promote(&self) {
        let data = self.data().display().to_string();
        let out = self.run("pg_ctl", &["-D", &data, "-w", "-t", "60", "promote"]);
        assert!(
            out.status.success(),
            "pg_ctl promote failed: {}",
            text(&out)
        );
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = self.data().display().to_string();
        if self.data().join("postmaster.pid").exists() {
            let _ = self.run("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"]);
        }
        // `dir` goes with the fields, after the server is stopped.
    }
}
