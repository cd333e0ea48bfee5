//! The embedded store: one SQLite file shared by every process of one machine (hook
//! processes above all). WAL mode; every update is one `BEGIN IMMEDIATE` transaction, so
//! parallel processes never lose an update and a process killed mid-decision leaves the
//! file as it was before or after that decision, never in between.

use crate::{Counters, SessionInfo, Store, StoreError, Tally, MAX_TOOLS};
use rusqlite::{params, Connection, OpenFlags, OptionalExtension, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;
use toolbrake_core::SessionState;

/// Schema version written to `meta`.
const SCHEMA: i64 = 1;
/// How often (at most) idle sessions are swept, in milliseconds.
const SWEEP_EVERY_MS: i64 = 10 * 60 * 1000;
/// A write-ahead log larger than this is checkpointed into the database and truncated by
/// the next process that opens the file. Short-lived hook processes never close the log
/// with a checkpoint (that costs fsyncs on every call), and SQLite's automatic checkpoints
/// do not shrink the file, so without this it grows with every decision. Every opener is
/// the file's only connection, so it rebuilds the log's index by reading and checksumming
/// every frame: the bound is the price of every hook. 256 KiB (about 30 decisions) keeps
/// that read small and the checkpoint's fsyncs rare (BENCHMARKS.md, "Speed against the
/// floors": with a 4 MiB bound, a log of 0.8 MiB already cost each hook 0.7 ms; a 16 KiB
/// bound cost more in fsyncs than it saved).
const WAL_LIMIT_BYTES: u64 = 256 << 10;

/// Options of the embedded store.
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// Sessions idle longer than this are forgotten.
    pub idle_ttl: Duration,
    /// How long to wait for another process's transaction before giving up.
    pub lock_timeout: Duration,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            idle_ttl: Duration::from_secs(7 * 24 * 3600),
            lock_timeout: Duration::from_secs(3),
        }
    }
}

/// Session state in one SQLite file.
#[derive(Debug)]
pub struct SqliteStore {
    path: PathBuf,
    conn: Mutex<Connection>,
    opts: SqliteOptions,
    warnings: Mutex<Vec<String>>,
}

fn now_ms() -> i64 {
    crate::now_ms().min(i64::MAX as u64) as i64
}

/// A session's stored bytes and last update time.
fn read_row(conn: &Connection, key: &str) -> rusqlite::Result<Option<(Vec<u8>, i64)>> {
    conn.query_row(
        "SELECT state, updated_ms FROM sessions WHERE key = ?1",
        params![key],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path`. The directory is created with
    /// owner-only permissions, and so is the file.
    pub fn open(path: &Path, opts: SqliteOptions) -> Result<Self, StoreError> {
        let err = |m: String| StoreError::unavailable(format!("sqlite {}", path.display()), m);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            create_private_dir(dir)
                .map_err(|e| err(format!("cannot create {}: {e}", dir.display())))?;
        }
        refuse_links(path).map_err(err)?;
        create_private_file(path).map_err(err)?;
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| err(e.to_string()))?;
        // SQLite counts the busy timeout in 32-bit milliseconds: clamp, never overflow.
        conn.busy_timeout(
            opts.lock_timeout
                .min(Duration::from_millis(i32::MAX as u64)),
        )
        .map_err(|e| err(e.to_string()))?;
        // Hook processes open and close the file once per tool call. Checkpointing the WAL
        // into the database on every close costs fsyncs and recreating the WAL file: leave
        // it to SQLite's automatic checkpoints during writes instead. (Durability is the
        // same: the WAL is replayed by the next opener.)
        conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
            true,
        )
        .map_err(|e| err(e.to_string()))?;
        // A file that already has our schema needs only the per-connection settings (WAL
        // mode persists in the file).
        // A file made before the counters existed (same schema: older versions ignore the
        // tables) is given them by the setup below.
        let known: Option<(Option<i64>, Option<i64>)> = conn
            .query_row(
                "SELECT (SELECT v FROM meta WHERE k = 'schema'), (SELECT v FROM meta WHERE k = 'counters')",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .unwrap_or(None);
        if let Some((Some(v), Some(_))) = known {
            if v > SCHEMA {
                return Err(err(format!(
                    "the file was written by a newer toolbrake (schema {v}, this one knows {SCHEMA})"
                )));
            }
            conn.pragma_update(None, "synchronous", "NORMAL")
                .map_err(|e| err(e.to_string()))?;
            bound_wal(&conn, path);
            return Ok(SqliteStore {
                path: path.to_path_buf(),
                conn: Mutex::new(conn),
                opts,
                warnings: Mutex::new(Vec::new()),
            });
        }
        // The first openers of a new file race to create it; SQLite answers a writer that
        // loses that race "database is locked" at once (switching to WAL does not wait),
        // so the setup is retried until `lock_timeout`.
        let deadline = std::time::Instant::now() + opts.lock_timeout;
        let version = loop {
            match create_schema(&conn) {
                Ok(v) => break v,
                Err(e)
                    if matches!(
                        e.sqlite_error_code(),
                        Some(
                            rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                        )
                    ) && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(err(e.to_string())),
            }
        };
        if let Some(v) = version.filter(|v| *v > SCHEMA) {
            return Err(err(format!(
                "the file was written by a newer toolbrake (schema {v}, this one knows {SCHEMA})"
            )));
        }
        Ok(SqliteStore {
            path: path.to_path_buf(),
            conn: Mutex::new(conn),
            opts,
            warnings: Mutex::new(Vec::new()),
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A failure caused by `e`, which stays reachable through `source()`.
    fn caused(&self, e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
        StoreError::caused(self.describe(), e)
    }

    fn ttl_ms(&self) -> i64 {
        self.opts.idle_ttl.as_millis().min(i64::MAX as u128) as i64
    }

    fn decode(&self, bytes: &[u8]) -> SessionState {
        crate::decode_or_warn(bytes, &self.describe(), &self.warnings)
    }

    /// Checks the file's integrity (`PRAGMA integrity_check`): `Ok` when sound.
    pub fn integrity_check(&self) -> Result<(), StoreError> {
        let r: String = self
            .conn()
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .map_err(|e| self.caused(e))?;
        if r == "ok" {
            Ok(())
        } else {
            Err(StoreError::Corrupt {
                store: self.describe(),
                message: r,
            })
        }
    }
}

/// Makes a new file ours: WAL mode, the tables, the schema version. Idempotent; returns
/// the version the file already had, if any.
fn create_schema(conn: &Connection) -> rusqlite::Result<Option<i64>> {
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // WAL + NORMAL: a crashed process never corrupts the file; a power cut may lose the
    // last decisions, which only makes the brake forget a little.
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    // A file this version made already has every table: one read instead of parsing the
    // schema again (a hook opens the file at every tool call, and that parse was a third
    // of its start-up).
    let made: rusqlite::Result<(Option<i64>, Option<i64>)> = conn.query_row(
        "SELECT (SELECT v FROM meta WHERE k = 'schema'), (SELECT v FROM meta WHERE k = 'counters')",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    );
    if let Ok((Some(version), Some(_))) = made {
        return Ok(Some(version));
    }
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS sessions (
             key TEXT PRIMARY KEY,
             state BLOB NOT NULL,
             updated_ms INTEGER NOT NULL
         );
         CREATE INDEX IF NOT EXISTS sessions_updated ON sessions(updated_ms);
         CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v INTEGER NOT NULL);
         CREATE TABLE IF NOT EXISTS counters (series TEXT PRIMARY KEY, value INTEGER NOT NULL);
         CREATE TABLE IF NOT EXISTS counter_tools (tool TEXT PRIMARY KEY);
         INSERT OR IGNORE INTO meta (k, v) VALUES ('counters', 1);",
    )?;
    let version: Option<i64> = conn
        .query_row("SELECT v FROM meta WHERE k = 'schema'", [], |r| r.get(0))
        .optional()?;
    if version.is_none() {
        conn.execute(
            "INSERT OR IGNORE INTO meta (k, v) VALUES ('schema', ?1)",
            params![SCHEMA],
        )?;
    }
    Ok(version)
}

/// Adds a tally to the counters inside the caller's transaction: one upsert per series,
/// a tool past [`MAX_TOOLS`] folded into `other`.
fn count(tx: &Connection, tally: &Tally) -> rusqlite::Result<()> {
    for inc in tally.incs() {
        let key = match &inc.tool {
            Some((tool, other)) => {
                let known = tx
                    .prepare_cached("SELECT 1 FROM counter_tools WHERE tool = ?1")?
                    .exists(params![tool])?;
                let kept: i64 = if known {
                    0
                } else {
                    tx.prepare_cached("SELECT count(*) FROM counter_tools")?
                        .query_row([], |r| r.get(0))?
                };
                if known {
                    &inc.key
                } else if (kept as usize) < MAX_TOOLS {
                    tx.prepare_cached("INSERT INTO counter_tools (tool) VALUES (?1)")?
                        .execute(params![tool])?;
                    &inc.key
                } else {
                    other
                }
            }
            None => &inc.key,
        };
        tx.prepare_cached(
            "INSERT INTO counters (series, value) VALUES (?1, ?2)
             ON CONFLICT(series) DO UPDATE SET value = value + excluded.value",
        )?
        .execute(params![key, inc.n.min(i64::MAX as u64) as i64])?;
    }
    Ok(())
}

/// Checkpoints and truncates the write-ahead log when it has grown past
/// [`WAL_LIMIT_BYTES`] (one `stat` otherwise). Best effort: a busy log is left for the next
/// opener.
fn bound_wal(conn: &Connection, path: &Path) {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let big = std::fs::metadata(&wal).is_ok_and(|m| m.len() > WAL_LIMIT_BYTES);
    if big {
        let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
    }
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

/// The files SQLite keeps beside the state file.
const SIDE_FILES: [&str; 3] = ["-wal", "-shm", "-journal"];

/// `path` with `side` appended (`state.db-wal`).
fn side_file(path: &Path, side: &str) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(side);
    PathBuf::from(p)
}

/// What the user reads when the state file (or a file SQLite keeps beside it) is a link.
fn link_message(path: &Path) -> String {
    format!(
        "{} is a symbolic link: toolbrake keeps its state in a file of its own and does not follow a link there (it would change the mode and the contents of the file the link points to). Remove the link, or set TOOLBRAKE_STATE or `[store] path` to a file toolbrake may create",
        path.display()
    )
}

/// Refuses a state file, or a file SQLite keeps beside it, that is a symbolic link: SQLite
/// would follow it and write its tables and log into another program's file, and the
/// permissions would be tightened on the file it points to. (A link to the folder above is
/// the user's own arrangement, and is followed.)
fn refuse_links(path: &Path) -> Result<(), String> {
    for p in
        std::iter::once(path.to_path_buf()).chain(SIDE_FILES.iter().map(|s| side_file(path, s)))
    {
        if std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(link_message(&p));
        }
    }
    Ok(())
}

/// Whether opening without following links failed because the name is a link (the link
/// appeared after [`refuse_links`] looked).
fn is_link_error(e: &std::io::Error) -> bool {
    #[cfg(unix)]
    {
        e.raw_os_error() == Some(libc::ELOOP)
    }
    #[cfg(not(unix))]
    {
        let _ = e;
        false
    }
}

/// Creates the state file owner-only, and tightens an existing file (or directory) that
/// others can read: session state names tools, hosts and commands. Nothing is opened
/// through a symbolic link, and modes are set on the open files (`fchmod`), so a link put
/// in place meanwhile never has its target's mode changed.
#[cfg(unix)]
fn create_private_file(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let failed = |p: &Path, e: std::io::Error| {
        if is_link_error(&e) {
            link_message(p)
        } else {
            format!("cannot create the file: {e}")
        }
    };
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| failed(path, e))?;
    let meta = f.metadata().map_err(|e| failed(path, e))?;
    if meta.permissions().mode() & 0o077 != 0 {
        f.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(|e| failed(path, e))?;
    }
    for side in SIDE_FILES {
        let p = side_file(path, side);
        let opened = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&p);
        match opened {
            Ok(f) => {
                if f.metadata()
                    .is_ok_and(|m| m.permissions().mode() & 0o077 != 0)
                {
                    let _ = f.set_permissions(std::fs::Permissions::from_mode(0o600));
                }
            }
            Err(e) if is_link_error(&e) => return Err(link_message(&p)),
            Err(_) => {}
        }
    }
    Ok(())
}

#[cfg(not(unix))]
fn create_private_file(path: &Path) -> Result<(), String> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map(|_| ())
        .map_err(|e| format!("cannot create the file: {e}"))
}

impl Store for SqliteStore {
    fn update(
        &self,
        session: &str,
        f: &mut dyn FnMut(&mut SessionState, &mut Tally),
    ) -> Result<(), StoreError> {
        let now = now_ms();
        let ttl = self.ttl_ms();
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.caused(e))?;
        let row = read_row(&tx, session).map_err(|e| self.caused(e))?;
        let mut state = match row {
            Some((bytes, updated)) if now.saturating_sub(updated) <= ttl => self.decode(&bytes),
            _ => SessionState::default(),
        };
        let mut tally = Tally::new();
        f(&mut state, &mut tally);
        let bytes = serde_json::to_vec(&state).map_err(|e| self.caused(e))?;
        tx.execute(
            "INSERT INTO sessions (key, state, updated_ms) VALUES (?1, ?2, ?3)
             ON CONFLICT(key) DO UPDATE SET state = excluded.state, updated_ms = excluded.updated_ms",
            params![session, bytes, now],
        )
        .map_err(|e| self.caused(e))?;
        count(&tx, &tally).map_err(|e| self.caused(e))?;
        // Sweep idle sessions now and then, inside the same transaction: no daemon.
        let last_sweep: i64 = tx
            .query_row("SELECT v FROM meta WHERE k = 'last_sweep'", [], |r| {
                r.get(0)
            })
            .optional()
            .map_err(|e| self.caused(e))?
            .unwrap_or(0);
        if now.saturating_sub(last_sweep) > SWEEP_EVERY_MS {
            tx.execute(
                "DELETE FROM sessions WHERE updated_ms < ?1",
                params![now.saturating_sub(ttl)],
            )
            .map_err(|e| self.caused(e))?;
            tx.execute(
                "INSERT INTO meta (k, v) VALUES ('last_sweep', ?1) ON CONFLICT(k) DO UPDATE SET v = excluded.v",
                params![now],
            )
            .map_err(|e| self.caused(e))?;
        }
        tx.commit().map_err(|e| self.caused(e))
    }

    fn add_counts(&self, tally: &Tally) -> Result<(), StoreError> {
        if tally.is_empty() {
            return Ok(());
        }
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.caused(e))?;
        count(&tx, tally).map_err(|e| self.caused(e))?;
        tx.commit().map_err(|e| self.caused(e))
    }

    fn counters(&self) -> Result<Counters, StoreError> {
        use rusqlite::types::Value as Sql;
        let rows: Vec<(Sql, Sql)> = {
            let conn = self.conn();
            let mut stmt = conn
                .prepare("SELECT series, value FROM counters")
                .map_err(|e| self.caused(e))?;
            let it = stmt
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(|e| self.caused(e))?;
            it.collect::<Result<_, _>>().map_err(|e| self.caused(e))?
        };
        let mut out = Counters::default();
        for (series, value) in rows {
            if let (Sql::Text(k), Sql::Integer(v)) = (series, value) {
                out.add_stored(k.as_bytes(), v.max(0) as u64);
            }
        }
        Ok(out)
    }

    fn get(&self, session: &str) -> Result<Option<SessionState>, StoreError> {
        let row = read_row(&self.conn(), session).map_err(|e| self.caused(e))?;
        Ok(row
            .filter(|(_, t)| now_ms().saturating_sub(*t) <= self.ttl_ms())
            .map(|(b, _)| self.decode(&b)))
    }

    fn remove(&self, session: &str) -> Result<bool, StoreError> {
        let n = self
            .conn()
            .execute("DELETE FROM sessions WHERE key = ?1", params![session])
            .map_err(|e| self.caused(e))?;
        Ok(n > 0)
    }

    fn list(&self) -> Result<Vec<SessionInfo>, StoreError> {
        let cutoff = now_ms().saturating_sub(self.ttl_ms());
        use rusqlite::types::Value as Sql;
        // Read every column as whatever it holds: a row someone wrote by hand (a text
        // state, a blob key) is reported and skipped, not fatal to the whole listing.
        let rows: Vec<(Sql, Sql, Sql)> = {
            let conn = self.conn();
            let mut stmt = conn
                .prepare("SELECT key, state, updated_ms FROM sessions WHERE updated_ms >= ?1 ORDER BY key")
                .map_err(|e| self.caused(e))?;
            let it = stmt
                .query_map(params![cutoff], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .map_err(|e| self.caused(e))?;
            it.collect::<Result<_, _>>().map_err(|e| self.caused(e))?
        };
        let mut out = Vec::new();
        for (key, state, t) in rows {
            let key = match key {
                Sql::Text(k) => k,
                Sql::Blob(b) => String::from_utf8_lossy(&b).into_owned(),
                _ => continue,
            };
            let bytes = match state {
                Sql::Blob(b) => b,
                Sql::Text(t) => t.into_bytes(),
                _ => Vec::new(),
            };
            let t = match t {
                Sql::Integer(t) => t,
                _ => 0,
            };
            if let Some(state) =
                crate::decode_listed(&key, &bytes, &self.describe(), &self.warnings)
            {
                out.push(SessionInfo {
                    state,
                    key,
                    last_activity_ms: t.max(0) as u64,
                });
            }
        }
        Ok(out)
    }

    fn keys_with_prefix(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare("SELECT key FROM sessions WHERE substr(key, 1, length(?1)) = ?1")
            .map_err(|e| self.caused(e))?;
        let it = stmt
            .query_map(params![prefix], |r| r.get::<_, String>(0))
            .map_err(|e| self.caused(e))?;
        it.collect::<Result<_, _>>().map_err(|e| self.caused(e))
    }

    fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *self.warnings.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn describe(&self) -> String {
        format!("sqlite {}", self.path.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::update;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("lb-sqlite-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d.join("sub").join("state.db")
    }

    #[test]
    #[cfg(unix)]
    fn files_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let p = tmp("perm");
        let s = SqliteStore::open(&p, SqliteOptions::default()).unwrap();
        update(&s, "k", |st| st.streak = Default::default()).unwrap();
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            std::fs::metadata(p.parent().unwrap())
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o700
        );
    }

    #[test]
    fn a_corrupt_row_starts_afresh_with_a_warning() {
        let p = tmp("corrupt");
        let s = SqliteStore::open(&p, SqliteOptions::default()).unwrap();
        s.conn()
            .execute(
                "INSERT INTO sessions (key, state, updated_ms) VALUES ('k', x'7b7b7b', ?1)",
                params![now_ms()],
            )
            .unwrap();
        assert_eq!(s.get("k").unwrap(), Some(SessionState::default()));
        assert_eq!(s.take_warnings().len(), 1);
        update(&s, "k", |_| ()).unwrap();
        assert!(s.take_warnings().len() == 1);
        assert!(s.take_warnings().is_empty());
        s.integrity_check().unwrap();
    }

    #[test]
    fn expired_sessions_are_forgotten() {
        let p = tmp("ttl");
        let s = SqliteStore::open(
            &p,
            SqliteOptions {
                idle_ttl: Duration::from_millis(0),
                ..SqliteOptions::default()
            },
        )
        .unwrap();
        update(&s, "k", |st| st.streak = Default::default()).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert!(s.get("k").unwrap().is_none());
        assert!(s.list().unwrap().is_empty());
    }

    #[test]
    fn a_newer_schema_is_refused() {
        let p = tmp("schema");
        let s = SqliteStore::open(&p, SqliteOptions::default()).unwrap();
        s.conn()
            .execute("UPDATE meta SET v = 99 WHERE k = 'schema'", [])
            .unwrap();
        drop(s);
        let e = SqliteStore::open(&p, SqliteOptions::default()).unwrap_err();
        assert!(e.to_string().contains("newer toolbrake"), "{e}");
    }
}
