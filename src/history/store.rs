//! The SQLite file that keeps every run.
//!
//! The schema is versioned with `PRAGMA user_version` and marked as ours with
//! `PRAGMA application_id`. Migrations run in order, each in the same transaction as the
//! version bump, so a file is always at one version:
//!
//! - v1: one row per run in `runs`, the whole JSON document in `runs.report`.
//! - v2: adds `runs.preset` and a `results` table, one row per result with its case id,
//!   subsystem, op, unit and statistics in indexed columns (filled from the v1 documents by the
//!   migration), so listings and comparisons need not parse every document.
//!
//! An existing file is first opened read-only and checked (an SQLite file, our application id,
//! a version this build knows, `quick_check` clean); only then is it opened for writing. A
//! corrupt file, another program's database or one from a newer peakbench is refused and left
//! exactly as it was.
//!
//! A hot journal (a writer killed mid-transaction) is rolled back by SQLite before the check,
//! when the file is ours (its header holds our application id): a read-only connection cannot
//! roll back, so one read-write connection reads the schema once, which makes SQLite restore
//! the last committed state. Creation and every migration take the write lock first
//! (`BEGIN IMMEDIATE`) and read the schema version inside that transaction, so processes that
//! create or migrate the same file at once do it once.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rusqlite::{Connection, OpenFlags, OptionalExtension, Transaction, params};

use crate::result::Report;

/// `PRAGMA application_id` of a peakbench history: "peak" in ASCII.
pub(crate) const APPLICATION_ID: i64 = 0x7065_616b;
/// The schema version this build writes.
pub(crate) const CURRENT_VERSION: u32 = 2;

/// Version 1: runs only, each with its whole document as JSON.
pub(crate) const V1_SQL: &str = "
PRAGMA application_id = 1885692267;
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    host TEXT NOT NULL,
    status TEXT NOT NULL,
    command TEXT NOT NULL,
    report TEXT NOT NULL
);
PRAGMA user_version = 1;
";

/// Version 2: the preset of a run and one indexed row per result.
const V2_SQL: &str = "
ALTER TABLE runs ADD COLUMN preset TEXT;
CREATE TABLE results (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    case_id TEXT NOT NULL,
    subsystem TEXT NOT NULL,
    op TEXT NOT NULL,
    metric TEXT NOT NULL,
    unit TEXT NOT NULL,
    value REAL NOT NULL,
    stddev REAL,
    min REAL NOT NULL,
    max REAL NOT NULL,
    repetitions INTEGER NOT NULL,
    efficiency REAL,
    PRIMARY KEY (run_id, position)
);
CREATE INDEX results_by_case ON results(case_id, run_id);
CREATE INDEX results_by_subsystem ON results(subsystem, run_id);
";

/// Why a file is not opened; shown as one line (exit code 2).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refused {
    #[error(
        "--db: {0} is not an SQLite database (corrupt, or another kind of file); it was left unchanged: give another path"
    )]
    NotSqlite(String),
    #[error(
        "--db: {0} is an SQLite database of another program ({1}); it was left unchanged: give another path"
    )]
    Foreign(String, String),
    #[error(
        "--db: {0} has history schema v{1}, newer than this peakbench reads (v{CURRENT_VERSION}); it was left unchanged: use a newer peakbench"
    )]
    Newer(String, u32),
    #[error(
        "--db: {0} is damaged ({1}); it was left unchanged: restore it from a backup or give another path"
    )]
    Damaged(String, String),
}

/// One run in the listing.
#[derive(Debug, Clone)]
pub(crate) struct RunRow {
    pub id: i64,
    pub started_at: String,
    pub host: String,
    pub status: String,
    pub command: String,
    pub preset: Option<String>,
    /// Results stored for the run.
    pub results: usize,
    /// The best value per subsystem, e.g. ("cpu", "812 GFLOP/s").
    pub headline: Vec<(String, f64, String)>,
}

/// An open history.
pub(crate) struct Store {
    conn: Connection,
    path: PathBuf,
}

impl Store {
    /// Opens the history at `path`. With `write` (the measuring commands and `import`), a
    /// file that does not exist is created (with its directory) and an older schema is
    /// migrated; without it (`history`, `show`, `compare`, `report`) the file is opened
    /// read-only and nothing is created or migrated. Anything but a regular file (a device, a
    /// FIFO, a directory, a symbolic link) is refused before SQLite sees it.
    pub(crate) fn open(path: &Path, write: bool) -> Result<Store> {
        let shown = path.display().to_string();
        let exists = check_regular(path)?;
        if exists {
            let version =
                inspect(path).map_err(|refused| crate::error::UsageError(refused.to_string()))?;
            if !write {
                if version == 0 {
                    return Err(crate::error::UsageError(format!(
                        "--db: {shown} is an empty file, not a history yet: run a benchmark with this --db first"
                    ))
                    .into());
                }
                if version < CURRENT_VERSION {
                    return Err(crate::error::UsageError(format!(
                        "--db: {shown} has history schema v{version}; history, show, compare and report only read: run a measuring command or 'peakbench import' with this --db to migrate it to v{CURRENT_VERSION}"
                    ))
                    .into());
                }
                let conn = Connection::open_with_flags(
                    path,
                    OpenFlags::SQLITE_OPEN_READ_ONLY
                        | OpenFlags::SQLITE_OPEN_NO_MUTEX
                        | OpenFlags::SQLITE_OPEN_NOFOLLOW,
                )
                .with_context(|| format!("cannot open {shown}"))?;
                configure(&conn)?;
                return Ok(Store {
                    conn,
                    path: path.to_path_buf(),
                });
            }
            let mut conn = Connection::open_with_flags(
                path,
                OpenFlags::SQLITE_OPEN_READ_WRITE
                    | OpenFlags::SQLITE_OPEN_NO_MUTEX
                    | OpenFlags::SQLITE_OPEN_NOFOLLOW,
            )
            .with_context(|| format!("cannot open {shown} for writing"))?;
            if version < CURRENT_VERSION {
                migrate(&mut conn, version).with_context(|| {
                    format!("cannot migrate {shown} from schema v{version} to v{CURRENT_VERSION}")
                })?;
            }
            configure(&conn)?;
            return Ok(Store {
                conn,
                path: path.to_path_buf(),
            });
        }
        if !write {
            return Err(crate::error::UsageError(format!(
                "--db: there is no history at {shown} yet: run a benchmark first, or give the --db of an existing history"
            ))
            .into());
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create the directory {}", dir.display()))?;
        }
        let mut conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
                | OpenFlags::SQLITE_OPEN_NOFOLLOW,
        )
        .with_context(|| format!("cannot create {shown}"))?;
        migrate(&mut conn, 0).with_context(|| format!("cannot create the schema in {shown}"))?;
        configure(&conn)?;
        Ok(Store {
            conn,
            path: path.to_path_buf(),
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Stores a run and its results; returns the run id.
    pub(crate) fn insert(&mut self, report: &Report) -> Result<i64> {
        let tx = self.conn.transaction()?;
        let id = insert_run(&tx, report)?;
        tx.commit()?;
        Ok(id)
    }

    /// The id of a run already stored with the same start time, host and command line.
    pub(crate) fn find_same(&self, report: &Report) -> Result<Option<i64>> {
        Ok(self
            .conn
            .query_row(
                "SELECT id FROM runs WHERE started_at = ?1 AND host = ?2 AND command = ?3",
                params![
                    report.started_at,
                    report.host.hostname,
                    command_line(report)
                ],
                |row| row.get(0),
            )
            .optional()?)
    }

    /// Every run, oldest first, with its headline numbers.
    pub(crate) fn list(&self) -> Result<Vec<RunRow>> {
        let mut runs: Vec<RunRow> = self
            .conn
            .prepare(
                "SELECT id, started_at, host, status, command, preset,
                        (SELECT COUNT(*) FROM results WHERE run_id = runs.id)
                 FROM runs ORDER BY id",
            )?
            .query_map([], |row| {
                Ok(RunRow {
                    id: row.get(0)?,
                    started_at: row.get(1)?,
                    host: row.get(2)?,
                    status: row.get(3)?,
                    command: row.get(4)?,
                    preset: row.get(5)?,
                    results: row.get::<_, i64>(6)? as usize,
                    headline: Vec::new(),
                })
            })?
            .collect::<rusqlite::Result<_>>()?;
        let mut statement = self.conn.prepare(
            "SELECT subsystem, unit, value FROM results WHERE run_id = ?1 ORDER BY position",
        )?;
        for run in &mut runs {
            let rows: Vec<(String, String, f64)> = statement
                .query_map([run.id], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
                .collect::<rusqlite::Result<_>>()?;
            run.headline = headline(&rows);
        }
        Ok(runs)
    }

    /// The ids of at most `limit` runs, newest first, those before `before` when given.
    pub(crate) fn recent(&self, before: Option<i64>, limit: usize) -> Result<Vec<i64>> {
        let ids = self
            .conn
            .prepare("SELECT id FROM runs WHERE id < ?1 ORDER BY id DESC LIMIT ?2")?
            .query_map(
                rusqlite::params![before.unwrap_or(i64::MAX), limit as i64],
                |row| row.get(0),
            )?
            .collect::<rusqlite::Result<_>>()?;
        Ok(ids)
    }

    /// The document of run `id`.
    pub(crate) fn load(&self, id: i64) -> Result<Report> {
        let text: String = self
            .conn
            .query_row("SELECT report FROM runs WHERE id = ?1", [id], |row| {
                row.get(0)
            })
            .optional()?
            .ok_or_else(|| {
                crate::error::UsageError(format!(
                    "RUN: there is no run {id} in {}: see 'peakbench history'",
                    self.path.display()
                ))
            })?;
        Report::parse(&text).map_err(|e| anyhow::anyhow!("run {id}'s document does not parse: {e}"))
    }

    /// A run name: a numeric id, `latest` or `previous`.
    pub(crate) fn resolve(&self, name: &str) -> Result<i64> {
        let nth = match name {
            "latest" | "last" => 0,
            "previous" | "prev" => 1,
            _ => {
                return name.parse::<i64>().map_err(|_| {
                    crate::error::UsageError(format!(
                        "RUN: '{name}' is not a run: give a run id from 'peakbench history', 'latest' or 'previous'"
                    ))
                    .into()
                });
            }
        };
        self.conn
            .query_row(
                "SELECT id FROM runs ORDER BY id DESC LIMIT 1 OFFSET ?1",
                [nth],
                |row| row.get(0),
            )
            .optional()?
            .ok_or_else(|| {
                crate::error::UsageError(format!(
                    "RUN: '{name}' does not exist: {} holds fewer runs; see 'peakbench history'",
                    self.path.display()
                ))
                .into()
            })
    }
}

/// Whether `path` exists, after checking that it is a regular file: opened without following a
/// symbolic link and without blocking (a FIFO would otherwise hang), then `fstat`ed. SQLite
/// takes a block device (`fstat` size 0) for an empty database and writes a schema over it.
fn check_regular(path: &Path) -> Result<bool> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let shown = path.display();
    let usage = |why: String| -> anyhow::Error { crate::error::UsageError(why).into() };
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(usage(format!(
                "--db: {shown} is a symbolic link, which peakbench does not follow: give the path of the file itself"
            )));
        }
        Err(e) => {
            return Err(usage(format!(
                "--db: cannot read {shown}: {e}; give a readable path"
            )));
        }
    };
    let kind = file
        .metadata()
        .with_context(|| format!("cannot stat {shown}"))?
        .file_type();
    let what = if kind.is_file() {
        return Ok(true);
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    Err(usage(format!(
        "--db: {shown} is {what}; the history is a regular file and nothing else is opened: give the path of a file"
    )))
}

fn configure(conn: &Connection) -> Result<()> {
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.pragma_update(None, "foreign_keys", true)?;
    Ok(())
}

/// Checks an existing file without writing to it; returns its schema version (0: empty).
fn inspect(path: &Path) -> Result<u32, Refused> {
    let shown = path.display().to_string();
    recover_hot_journal(path).map_err(|e| Refused::Damaged(shown.clone(), e.to_string()))?;
    // "Not an SQLite database" only when SQLite says so; any other error is shown as it is.
    let not_sqlite = |e: rusqlite::Error| match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::NotADatabase) => Refused::NotSqlite(shown.clone()),
        _ => Refused::Damaged(shown.clone(), e.to_string()),
    };
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(not_sqlite)?;
    // A writer creating or migrating the file holds its lock for a moment.
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(not_sqlite)?;
    // One read transaction: the tables, the id and the version are read from one state of the
    // file, not across another process's creation of it.
    conn.execute_batch("BEGIN").map_err(not_sqlite)?;
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .and_then(|mut s| s.query_map([], |row| row.get(0))?.collect())
        .map_err(not_sqlite)?;
    let application_id: i64 = conn
        .pragma_query_value(None, "application_id", |row| row.get(0))
        .map_err(not_sqlite)?;
    let version: u32 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(not_sqlite)?;
    if tables.is_empty() && application_id == 0 && version == 0 {
        return Ok(0);
    }
    if application_id != APPLICATION_ID {
        let what = if tables.is_empty() {
            "no tables".to_string()
        } else {
            format!("tables {}", tables.join(", "))
        };
        return Err(Refused::Foreign(shown, what));
    }
    if version > CURRENT_VERSION {
        return Err(Refused::Newer(shown, version));
    }
    if version == 0 || !tables.iter().any(|t| t == "runs") {
        return Err(Refused::Damaged(
            shown,
            "no schema version or no runs table".into(),
        ));
    }
    let check: String = conn
        .query_row("PRAGMA quick_check", [], |row| row.get(0))
        .map_err(not_sqlite)?;
    if check != "ok" {
        return Err(Refused::Damaged(shown, format!("quick_check: {check}")));
    }
    Ok(version)
}

/// Lets SQLite roll back a hot journal left by a writer killed mid-transaction: only a
/// read-write connection can, and only for a file whose header holds our application id (a
/// file that is not ours is left for the check to refuse).
fn recover_hot_journal(path: &Path) -> rusqlite::Result<()> {
    use std::io::Read;
    let mut journal = path.as_os_str().to_owned();
    journal.push("-journal");
    let hot = std::fs::symlink_metadata(&journal).is_ok_and(|m| m.is_file() && m.len() > 0);
    let mut header = [0u8; 72];
    let ours = std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut header))
        .is_ok_and(|()| header[68..72] == (APPLICATION_ID as u32).to_be_bytes());
    if !(hot && ours) {
        return Ok(());
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW,
    )?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.query_row("SELECT count(*) FROM sqlite_master", [], |row| {
        row.get::<_, i64>(0)
    })?;
    Ok(())
}

/// Brings a file to [`CURRENT_VERSION`], in one transaction that takes the write lock first
/// and reads the version inside it: another process may have created or migrated the file
/// since it was checked (`from` is what the check saw).
fn migrate(conn: &mut Connection, seen: u32) -> Result<()> {
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let from: u32 = tx.pragma_query_value(None, "user_version", |row| row.get(0))?;
    if from > CURRENT_VERSION {
        anyhow::bail!(
            "it was at v{seen} and another peakbench made it v{from}, newer than this one reads"
        );
    }
    if from < 1 {
        tx.execute_batch(V1_SQL)?;
    }
    if from < 2 {
        tx.execute_batch(V2_SQL)?;
        let documents: Vec<(i64, String)> = tx
            .prepare("SELECT id, report FROM runs ORDER BY id")?
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        for (id, text) in documents {
            let report = Report::parse(&text)
                .map_err(|e| anyhow::anyhow!("run {id}'s document does not parse: {e}"))?;
            tx.execute(
                "UPDATE runs SET preset = ?1 WHERE id = ?2",
                params![preset_of(&report), id],
            )?;
            insert_results(&tx, id, &report)?;
        }
        tx.pragma_update(None, "user_version", 2)?;
    }
    tx.commit()?;
    Ok(())
}

fn command_line(report: &Report) -> String {
    report.command.join(" ")
}

/// The preset a run was made with (`config.preset`), if any.
fn preset_of(report: &Report) -> Option<String> {
    report
        .config
        .get("preset")
        .and_then(|p| p.as_str())
        .map(str::to_string)
}

fn insert_run(tx: &Transaction, report: &Report) -> Result<i64> {
    let status = serde_json::to_value(report.status)?;
    tx.execute(
        "INSERT INTO runs (started_at, finished_at, host, status, command, report, preset)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            report.started_at,
            report.finished_at,
            report.host.hostname,
            status.as_str().unwrap_or("unknown"),
            command_line(report),
            serde_json::to_string(report)?,
            preset_of(report),
        ],
    )?;
    let id = tx.last_insert_rowid();
    insert_results(tx, id, report)?;
    Ok(id)
}

fn insert_results(tx: &Transaction, run_id: i64, report: &Report) -> Result<()> {
    let mut statement = tx.prepare(
        "INSERT INTO results (run_id, position, case_id, subsystem, op, metric, unit, value,
                              stddev, min, max, repetitions, efficiency)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    )?;
    for (position, r) in report.results.iter().enumerate() {
        statement.execute(params![
            run_id,
            position as i64,
            r.id,
            r.subsystem.name(),
            r.op,
            r.metric,
            r.unit,
            r.value,
            r.stats.stddev,
            r.stats.min,
            r.stats.max,
            r.stats.n as i64,
            r.efficiency,
        ])?;
    }
    Ok(())
}

/// The best value per subsystem, in the unit of its first result: the highest, or the lowest
/// for a time in ns (a latency).
fn headline(rows: &[(String, String, f64)]) -> Vec<(String, f64, String)> {
    let mut best: Vec<(String, f64, String)> = Vec::new();
    for (subsystem, unit, value) in rows {
        match best.iter_mut().find(|(s, _, _)| s == subsystem) {
            None => best.push((subsystem.clone(), *value, unit.clone())),
            Some((_, b, u)) if u == unit => {
                *b = if unit == "ns" {
                    b.min(*value)
                } else {
                    b.max(*value)
                }
            }
            Some(_) => {}
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headline_takes_the_best_in_the_first_unit() {
        let rows = vec![
            ("cpu".to_string(), "GFLOP/s".to_string(), 10.0),
            ("cpu".to_string(), "GFLOP/s".to_string(), 30.0),
            ("cpu".to_string(), "GIOP/s".to_string(), 99.0),
            ("memory".to_string(), "ns".to_string(), 80.0),
            ("memory".to_string(), "ns".to_string(), 1.5),
        ];
        assert_eq!(
            headline(&rows),
            vec![
                ("cpu".to_string(), 30.0, "GFLOP/s".to_string()),
                ("memory".to_string(), 1.5, "ns".to_string()),
            ]
        );
    }

    #[test]
    fn a_new_file_is_at_the_current_version() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/history.db");
        assert!(Store::open(&path, false).is_err());
        let store = Store::open(&path, true).unwrap();
        assert!(store.list().unwrap().is_empty());
        drop(store);
        assert_eq!(inspect(&path).unwrap(), CURRENT_VERSION);
    }
}
