//! The history and the reports, through the real binary, always on a temporary --db.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/report.json");
const EXPECTED_MD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/report.md");

fn peakbench(args: &[&str]) -> Output {
    common::command(&[])
        .args(args)
        // Never the user's own history, whatever a test forgets.
        .env("PEAKBENCH_DB", "/nonexistent/peakbench-tests/history.db")
        .output()
        .expect("the binary runs")
}

fn ok(args: &[&str]) -> (String, String) {
    let output = peakbench(args);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{args:?}: {stderr}");
    (String::from_utf8_lossy(&output.stdout).into_owned(), stderr)
}

/// A command that must be refused with exit 2 and one line naming the problem.
fn refused(args: &[&str]) -> String {
    let output = peakbench(args);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    stderr
}

fn db(dir: &Path) -> String {
    dir.join("history.db").to_str().unwrap().to_string()
}

/// A short CPU run, as the quick preset makes them (3 repetitions), stored in `db`.
fn short_run(db: &str) -> String {
    short_run_repeated(db, "3")
}

fn short_run_repeated(db: &str, repetitions: &str) -> String {
    let (stdout, stderr) = ok(&[
        "cpu",
        "-p",
        "f64",
        "-t",
        "1",
        "-d",
        "30ms",
        "-r",
        repetitions,
        "--warmup",
        "0",
        "--db",
        db,
    ]);
    assert!(stdout.contains("GFLOP/s"), "{stdout}");
    stderr
}

#[test]
fn a_run_lands_in_the_history_and_compares_with_itself_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let db = db(dir.path());
    let stderr = short_run(&db);
    assert!(
        stderr.contains(&format!("stored as run 1 in {db}")),
        "{stderr}"
    );
    let (list, _) = ok(&["history", "--db", &db]);
    assert!(list.contains("complete") && list.contains("cpu "), "{list}");
    // Three repetitions against three cannot show any change, not even against themselves.
    let (same, _) = ok(&["compare", "latest", "1", "--db", &db]);
    assert!(
        same.contains("+0.0%") && same.contains("too few repetitions (3 vs 3: p ≥ 0.10)"),
        "{same}"
    );
    assert!(
        same.contains("1 shared results, 0 beyond the noise (two-sided Mann–Whitney U test on the repetitions, p < 0.05; 3 vs 3 repetitions can never show it: use --repetitions 5 or more)"),
        "{same}"
    );
    // Five can: a run against itself is within the noise.
    assert!(short_run_repeated(&db, "5").contains("stored as run 2 in"));
    let (same, _) = ok(&["compare", "latest", "latest", "--db", &db]);
    assert!(
        same.contains("+0.0%") && same.contains("within noise (p 1.00)"),
        "{same}"
    );
    assert!(
        same.contains("1 shared results, 0 beyond the noise (two-sided Mann–Whitney U test on the repetitions, p < 0.05)\n"),
        "{same}"
    );
    let (two, _) = ok(&["compare", "previous", "latest", "--db", &db]);
    assert!(
        two.contains("A: run 1") && two.contains("B: run 2"),
        "{two}"
    );
    let (shown, _) = ok(&["show", "previous", "--json", "--db", &db]);
    let doc: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(doc["status"], "complete");
    assert_eq!(doc["results"].as_array().unwrap().len(), 1);
    assert!(refused(&["show", "7", "--db", &db]).contains("no run 7"));
    assert!(refused(&["show", "yesterday", "--db", &db]).contains("RUN"));
}

#[test]
fn no_history_stores_nothing_and_a_missing_history_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let db = db(dir.path());
    let (_, stderr) = ok(&[
        "cpu",
        "-p",
        "f64",
        "-t",
        "1",
        "-d",
        "20ms",
        "-r",
        "1",
        "--warmup",
        "0",
        "--no-history",
    ]);
    assert!(!stderr.contains("stored as"), "{stderr}");
    assert!(refused(&["history", "--db", &db]).contains("no history"));
    assert!(!Path::new(&db).exists());
}

#[test]
fn an_interrupted_run_is_stored_as_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let db = db(dir.path());
    let child = common::command(&[])
        .args([
            "cpu",
            "-p",
            "f64,f32,i64,i32",
            "-t",
            "1",
            "-d",
            "400ms",
            "-r",
            "3",
            "--db",
            &db,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: sending SIGINT to the child we started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130));
    let (list, _) = ok(&["history", "--db", &db]);
    assert!(list.contains("interrupted"), "{list}");
}

/// The v1 schema exactly as v1 of peakbench wrote it (frozen here on purpose).
const V1_SQL: &str = "
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

#[test]
fn a_version_1_history_is_migrated_and_keeps_its_runs() {
    let dir = tempfile::tempdir().unwrap();
    let db = db(dir.path());
    let fixture = std::fs::read_to_string(FIXTURE).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&fixture).unwrap();
    let results = doc["results"].as_array().unwrap().len();
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(V1_SQL).unwrap();
        for _ in 0..2 {
            conn.execute(
                "INSERT INTO runs (started_at, finished_at, host, status, command, report)
                 VALUES ('2026-11-01T10:00:00Z', NULL, 'fixture-host', 'complete', 'peakbench run', ?1)",
                [&fixture],
            )
            .unwrap();
        }
    }
    // The reading commands never migrate; they name the commands that do.
    let before = std::fs::read(&db).unwrap();
    let why = refused(&["history", "--db", &db]);
    assert!(why.contains("schema v1") && why.contains("import"), "{why}");
    assert_eq!(std::fs::read(&db).unwrap(), before);
    short_run(&db);
    let (list, _) = ok(&["history", "--db", &db]);
    assert!(list.contains("fixture-host"), "{list}");
    assert!(list.contains(&format!("  {results}  ")), "{list}");
    assert!(list.contains("preset quick"), "{list}");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let version: u32 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 2);
    let rows: i64 = conn
        .query_row("SELECT COUNT(*) FROM results", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows as usize, 2 * results + 1);
    let (same, _) = ok(&["compare", "1", "2", "--db", &db]);
    assert!(
        same.contains(&format!("{results} shared results, 0 beyond")),
        "{same}"
    );
}

fn assert_refused_and_unchanged(path: &Path, expect: &str) {
    let before = std::fs::read(path).unwrap();
    let db = path.to_str().unwrap();
    for args in [
        vec!["history", "--db", db],
        vec!["import", FIXTURE, "--db", db],
    ] {
        assert!(refused(&args).contains(expect), "{args:?}");
    }
    // A measuring run keeps its results and its exit code; only the storing is skipped.
    let (stdout, stderr) = ok(&[
        "cpu", "-p", "f64", "-t", "1", "-d", "20ms", "-r", "1", "--warmup", "0", "--db", db,
    ]);
    assert!(stdout.contains("GFLOP/s"));
    assert!(
        stderr.contains("not stored") && stderr.contains(expect),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read(path).unwrap(),
        before,
        "{} changed",
        path.display()
    );
    let siblings: Vec<PathBuf> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(siblings, vec![path.to_path_buf()], "files were added");
}

#[test]
fn a_corrupt_file_is_refused_and_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.db");
    let garbage: Vec<u8> = (0..8192u32).map(|i| (i * 7919 % 251) as u8).collect();
    std::fs::write(&path, garbage).unwrap();
    assert_refused_and_unchanged(&path, "not an SQLite database");
    // A real history whose pages were overwritten in the middle.
    let damaged = tempfile::tempdir().unwrap();
    let db = db(damaged.path());
    ok(&["import", FIXTURE, "--db", &db]);
    let mut bytes = std::fs::read(&db).unwrap();
    let len = bytes.len();
    bytes[100..len].iter_mut().for_each(|b| *b = 0x5a);
    std::fs::write(&db, bytes).unwrap();
    let output = peakbench(&["history", "--db", &db]);
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn a_foreign_or_newer_database_is_refused_and_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT);
             INSERT INTO users (name) VALUES ('ada');",
        )
        .unwrap();
    }
    assert_refused_and_unchanged(&path, "another program");
    let newer_dir = tempfile::tempdir().unwrap();
    let newer = newer_dir.path().join("newer.db");
    {
        let conn = rusqlite::Connection::open(&newer).unwrap();
        conn.execute_batch(&V1_SQL.replace("user_version = 1", "user_version = 99"))
            .unwrap();
    }
    assert_refused_and_unchanged(&newer, "newer");
}

#[test]
fn import_adds_a_results_file_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = db(dir.path());
    let (_, stderr) = ok(&["import", FIXTURE, "--db", &db]);
    assert!(stderr.contains("as run 1"), "{stderr}");
    let (_, again) = ok(&["import", FIXTURE, "--db", &db]);
    assert!(again.contains("already in the history as run 1"), "{again}");
    let not_json = dir.path().join("x.json");
    std::fs::write(&not_json, "{\"a\": 1}").unwrap();
    assert!(refused(&["import", not_json.to_str().unwrap(), "--db", &db]).contains("FILE"));
}

#[test]
fn markdown_tables_match_the_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let db = db(dir.path());
    ok(&["import", FIXTURE, "--db", &db]);
    let md = dir.path().join("report.md");
    ok(&["report", "--db", &db, "--markdown", md.to_str().unwrap()]);
    assert!(refused(&["report", "--db", &db]).contains("--html/--markdown"));
    let got = std::fs::read_to_string(&md).unwrap();
    let expected = std::fs::read_to_string(EXPECTED_MD).unwrap();
    assert_eq!(
        got, expected,
        "Markdown differs from tests/fixtures/report.md; if the change is intended, rewrite it with \
         'peakbench report --markdown tests/fixtures/report.md' on an import of the fixture"
    );
}

/// Every chart kind the fixture must produce, by a piece of its title.
const CHART_KINDS: [&str; 12] = [
    "cpu flops: throughput against threads",
    "memory: throughput against block size",
    "memory: throughput against threads",
    "latency against working set (cache-latency curve)",
    "disk: latency against threads",
    "disk: throughput against block size",
    "disk: iops against block size",
    "network: throughput against message size",
    "network: throughput against streams",
    "efficiency against the theoretical peak",
    "time series",
    "cpu flops: throughput against threads: efficiency",
];

fn html_report(dir: &Path) -> (PathBuf, String) {
    let db = db(dir);
    ok(&["import", FIXTURE, "--db", &db]);
    let html = dir.join("report.html");
    ok(&["report", "1", "--db", &db, "--html", html.to_str().unwrap()]);
    let text = std::fs::read_to_string(&html).unwrap();
    (html, text)
}

/// The `<svg class="chart" …>…</svg>` elements of a document.
fn charts(document: &str) -> Vec<&str> {
    document
        .split("<svg class=\"chart\"")
        .skip(1)
        .map(|rest| &rest[..rest.find("</svg>").expect("every chart is closed")])
        .collect()
}

fn assert_every_chart_drawn(document: &str) {
    let charts = charts(document);
    for kind in CHART_KINDS {
        assert!(charts.iter().any(|c| c.contains(kind)), "no chart '{kind}'");
    }
    for chart in &charts {
        let drawn = chart.contains("class=\"point\"") || chart.contains("<rect class=\"bar\"");
        assert!(
            drawn,
            "a chart drew nothing: {}",
            &chart[..chart.len().min(300)]
        );
        let title = &chart[chart.find("<title>").unwrap()..];
        if let Some(at) = chart.find("points=\"") {
            assert!(
                chart[at + 8..].chars().next().unwrap().is_ascii_digit(),
                "{title}"
            );
        }
    }
}

#[test]
fn the_html_report_is_self_contained_escaped_and_has_every_chart() {
    let dir = tempfile::tempdir().unwrap();
    let (_, text) = html_report(dir.path());
    assert!(text.starts_with("<!DOCTYPE html>"));
    for forbidden in ["<script", "src=", "href=", "https://", "@import", "url("] {
        assert!(!text.contains(forbidden), "{forbidden}");
    }
    // The fixture's command and warning carry markup, which must come out as text.
    assert!(text.contains("&lt;script&gt;&amp;") && text.contains("&lt;&amp;&gt;"));
    for section in [
        "Summary",
        "Machine",
        "Theoretical peaks",
        "cpu",
        "memory",
        "disk",
        "network",
        "Warnings",
    ] {
        assert!(text.contains(&format!(">{section}</h2>")), "{section}");
    }
    assert!(text.contains("L1 48 KiB") || text.contains("class=\"marker\""));
    assert_every_chart_drawn(&text);
}

#[test]
fn the_html_report_renders_in_headless_chromium_without_console_errors() {
    let Some(browser) = common::chromium() else {
        common::prerequisite(Err(
            "no chromium on PATH (CI installs Debian's chromium)".into()
        ));
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (html, _) = html_report(dir.path());
    let profile = dir.path().join("profile");
    let url = format!("file://{}", html.display());
    let flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--enable-logging=stderr",
        "--v=0",
    ];
    let profile_flag = format!("--user-data-dir={}", profile.display());
    let Some(output) = common::bounded(
        Command::new(browser)
            .args(flags)
            .arg(&profile_flag)
            .args(["--dump-dom", &url]),
        dir.path(),
        Duration::from_secs(90),
    ) else {
        panic!("{browser} did not finish within 90 s");
    };
    let dom = String::from_utf8_lossy(&output.stdout);
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{browser} failed: {log}");
    // Chromium logs page console messages as ":CONSOLE(" / ":CONSOLE:" lines; its own noise
    // (D-Bus, GPU, sandbox) never carries that tag.
    let console: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:?}");
    assert!(dom.contains("</svg>"), "the DOM has no SVG: {dom}");
    assert_every_chart_drawn(&dom);
    // And a screenshot is painted.
    let png = dir.path().join("report.png");
    let shot = common::bounded(
        Command::new(browser).args(flags).arg(&profile_flag).args([
            "--window-size=1100,3000",
            &format!("--screenshot={}", png.display()),
            &url,
        ]),
        dir.path(),
        Duration::from_secs(90),
    )
    .expect("the screenshot finishes");
    assert!(shot.status.success());
    let bytes = std::fs::read(&png).expect("a screenshot is written");
    assert!(
        bytes.starts_with(b"\x89PNG") && bytes.len() > 20_000,
        "{}",
        bytes.len()
    );
}

/// A block device at --db is refused and left unchanged: SQLite took one (fstat size 0) for an
/// empty database and wrote a schema over its first pages, even from the read-only `history`.
#[test]
fn a_block_device_at_db_is_refused_and_left_unchanged() {
    let device = common::LoopDevice::with_gpt(4);
    if !common::prerequisite(device.as_ref().map(|_| ()).map_err(Clone::clone)) {
        return;
    }
    let device = device.unwrap();
    let before = device.contents();
    for command in [
        &["history", "--db", device.as_str()][..],
        &["show", "--db", device.as_str()],
        &["import", FIXTURE, "--db", device.as_str()],
    ] {
        let why = refused(command);
        assert!(why.contains("is a block device"), "{command:?}: {why}");
    }
    // A measuring command warns and keeps its exit code, and leaves the device as it was.
    let (_, stderr) = ok(&[
        "cpu",
        "-p",
        "f64",
        "-t",
        "1",
        "-d",
        "20ms",
        "-r",
        "1",
        "--warmup",
        "0",
        "--db",
        device.as_str(),
    ]);
    assert!(stderr.contains("is a block device"), "{stderr}");
    assert!(device.contents() == before, "the device was written");
}

#[test]
fn a_fifo_or_a_symlink_at_db_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.db");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let started = Instant::now();
    assert!(refused(&["history", "--db", fifo.to_str().unwrap()]).contains("is a FIFO"));
    assert!(started.elapsed() < Duration::from_secs(10));
    let real = db(dir.path());
    short_run(&real);
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    assert!(refused(&["history", "--db", link.to_str().unwrap()]).contains("symbolic link"));
}

/// `history`, `show`, `compare` and `report` only read: an empty file stays empty.
#[test]
fn the_reading_commands_never_create_or_migrate() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    let empty = empty.to_str().unwrap();
    assert!(refused(&["history", "--db", empty]).contains("empty file"));
    assert!(refused(&["compare", "1", "2", "--db", empty]).contains("empty file"));
    assert_eq!(std::fs::metadata(empty).unwrap().len(), 0);
    let missing = dir.path().join("missing.db");
    refused(&["show", "--db", missing.to_str().unwrap()]);
    assert!(!missing.exists());
}

#[test]
fn two_runs_share_the_charts_each_in_its_style_with_the_compare_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    let db = db(dir.path());
    ok(&["import", FIXTURE, "--db", &db]);
    let html = dir.path().join("two.html");
    // A stored run and a results file, as before and after a change.
    ok(&[
        "report",
        "1",
        FIXTURE,
        "--db",
        &db,
        "--html",
        html.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(
        text.contains("<th>against the first run</th>"),
        "no verdicts"
    );
    // The fixture's three repetitions a case are too few for the test to tell.
    assert!(text.contains("+0.0% too few repetitions (3 vs 3: p ≥ 0.10)"));
    for name in ["run 1 f64", "run 2 f64"] {
        assert!(text.contains(&format!("data-name=\"{name}\"")), "{name}");
    }
    assert!(
        text.contains("stroke-dasharray=\"12 3 2 3\""),
        "run 2's style"
    );
    // Twice the lines: more than 16 on a chart splits it per op, every chart still drawn.
    assert!(text.contains("disk randread: latency against threads</title>"));
    assert!(charts(&text).iter().all(|c| c.contains("class=\"point\"")));
}

/// An imported document with values a few units apart near 1e17 (below the spacing of floats
/// there) is reported at once; it made a chart's axis add a step that never moved its tick,
/// until memory ran out.
#[test]
fn a_crafted_document_with_absurd_ranges_reports_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(FIXTURE).unwrap()).unwrap();
    for (i, result) in doc["results"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .enumerate()
    {
        let v = 1e17 + 16.0 * (i % 2) as f64;
        result["value"] = v.into();
        result["samples"] = serde_json::json!([v]);
        for key in ["median", "mean", "min", "max"] {
            result["stats"][key] = v.into();
        }
        result["stats"]["stddev"] = 0.0.into();
        result["stats"]["cv"] = 0.0.into();
        result["stats"]["n"] = 1.into();
        // Thread counts the same way: the x axis of the charts against threads.
        result["params"]["threads"] = (100_000_000_000_000_000u64 + 16 * (i % 2) as u64).into();
    }
    let crafted = dir.path().join("crafted.json");
    std::fs::write(&crafted, doc.to_string()).unwrap();
    let db = db(dir.path());
    ok(&["import", crafted.to_str().unwrap(), "--db", &db]);
    let html = dir.path().join("report.html");
    let mut cmd = common::command(&[]);
    cmd.args(["report", "1", "--db", &db, "--html", html.to_str().unwrap()]);
    let output = common::bounded(&mut cmd, dir.path(), Duration::from_secs(30))
        .expect("the report finishes within 30 s");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(text.contains("<svg"), "the report has its charts");
}

/// A writer killed mid-transaction leaves a hot journal, which SQLite rolls back: the committed
/// runs are all there (the history was once refused as "not an SQLite database" for good).
#[test]
fn a_hot_journal_after_a_crash_is_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let db = db(dir.path());
    ok(&["import", FIXTURE, "--db", &db]);
    // A writer that deletes every run and dies (SIGKILL) before it commits; a one-page cache
    // makes it write changed pages into the database file itself before the end.
    let script = "import sqlite3, sys, time\n\
        c = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
        c.execute('PRAGMA cache_size = 1')\n\
        c.execute('BEGIN')\n\
        c.execute('DELETE FROM results')\n\
        c.execute('DELETE FROM runs')\n\
        print('ready', flush=True)\n\
        time.sleep(60)\n";
    let mut writer = Command::new("python3")
        .args(["-c", script, &db])
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(writer.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "ready");
    writer.kill().unwrap();
    writer.wait().unwrap();
    let journal = format!("{db}-journal");
    assert!(
        std::fs::metadata(&journal).is_ok_and(|m| m.len() > 0),
        "the crash left a journal"
    );
    let (list, _) = ok(&["history", "--db", &db]);
    assert!(
        list.contains("complete"),
        "the committed run is there: {list}"
    );
    let (shown, _) = ok(&["show", "1", "--db", &db]);
    assert!(shown.contains("GFLOP/s"), "{shown}");
}

/// Processes creating the same new history at once all succeed, and the file has one schema
/// (creation and migration take the write lock first, BEGIN IMMEDIATE, and read the version inside
/// the transaction).
#[test]
fn processes_creating_one_history_at_once_all_succeed() {
    for round in 0..4 {
        let dir = tempfile::tempdir().unwrap();
        let db = db(dir.path());
        let children: Vec<_> = (0..4)
            .map(|_| {
                common::command(&["import", FIXTURE, "--db", &db])
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for child in children {
            let output = child.wait_with_output().unwrap();
            assert!(
                output.status.success(),
                "round {round}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let (list, _) = ok(&["history", "--db", &db]);
        assert!(list.contains("complete"), "{list}");
    }
}
