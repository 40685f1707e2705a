//! The history of runs: every measuring command stores its document in an SQLite file, and
//! `history`, `show`, `compare`, `import` and `report` read it back (and `explain`, in
//! `crate::findings::explain`, which judges what they load).
//!
//! The file is `--db PATH`, else `$PEAKBENCH_DB`, else `$XDG_DATA_HOME/peakbench/history.db`,
//! else `~/.local/share/peakbench/history.db`; it is created on first use. See [`store`] for
//! the schema and how a file that is not ours is refused.

pub(crate) mod baseline;
pub(crate) mod inventory;
pub(crate) mod compare;
pub(crate) mod store;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};

use crate::error::UsageError;
use crate::options::{DbArgs, Json, StoreArgs};
use crate::report::{Exporter, Html, MarkdownTables};
use crate::result::{Report, SCHEMA_VERSION};
use crate::text::{Align, Table, printable};
use crate::units::format_value;
use store::Store;

/// The commands that read the history (flattened into the top-level commands).
#[derive(Subcommand, Debug)]
pub(crate) enum HistoryCommand {
    /// Lists the stored runs: id, host, date, command, status, results and headline numbers
    History(HistoryListArgs),
    /// Prints one stored run (RUN: an id, `latest` or `previous`)
    Show(HistoryShowArgs),
    /// Every result two runs share, side by side, with the change and whether it is beyond the noise
    Compare(CompareArgs),
    /// Adds a JSON results file (written by --json or --output FILE.json) to the history
    Import(HistoryImportArgs),
    /// Writes a stored run as a self-contained HTML report (tables and charts) and/or Markdown tables
    Report(ReportArgs),
}

#[derive(Args, Debug)]
pub(crate) struct HistoryListArgs {
    #[command(flatten)]
    pub db: DbArgs,
}

#[derive(Args, Debug)]
pub(crate) struct HistoryShowArgs {
    /// The run: an id from 'peakbench history', `latest` or `previous`
    #[arg(default_value = "latest")]
    pub run: String,
    #[command(flatten)]
    pub json: Json,
    #[command(flatten)]
    pub db: DbArgs,
}

#[derive(Args, Debug)]
pub(crate) struct CompareArgs {
    /// The first run (A): an id, `latest`, `previous` or a JSON results file
    pub run_a: String,
    /// The second run (B): an id, `latest`, `previous` or a JSON results file
    pub run_b: String,
    #[command(flatten)]
    pub db: DbArgs,
}

#[derive(Args, Debug)]
pub(crate) struct HistoryImportArgs {
    /// A JSON document written by `--json` or `--output FILE.json`
    pub file: PathBuf,
    #[command(flatten)]
    pub db: DbArgs,
}

#[derive(Args, Debug)]
pub(crate) struct ReportArgs {
    /// The runs: ids, `latest`, `previous`, or JSON results files; several share the charts
    #[arg(default_value = "latest", num_args = 1..)]
    pub run: Vec<String>,
    /// Write a self-contained HTML report (inline SVG charts, no network needed) to FILE
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Write the tables in Markdown to FILE
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    #[command(flatten)]
    pub db: DbArgs,
}

/// The history file: the flag, else the environment, else the user's data directory.
pub(crate) fn db_path(args: &DbArgs) -> Result<PathBuf> {
    if let Some(path) = &args.db {
        return Ok(path.clone());
    }
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(path) = var("PEAKBENCH_DB") {
        return Ok(PathBuf::from(path));
    }
    let data = match var("XDG_DATA_HOME") {
        Some(dir) => PathBuf::from(dir),
        None => match var("HOME") {
            Some(home) => Path::new(&home).join(".local/share"),
            None => {
                return Err(UsageError(
                    "--db: neither $PEAKBENCH_DB, $XDG_DATA_HOME nor $HOME is set: give --db PATH"
                        .into(),
                )
                .into());
            }
        },
    };
    Ok(data.join("peakbench").join("history.db"))
}

/// Stores a finished (or interrupted, or failed) run and returns its id. A failure here never
/// loses the results, which are already printed and written: it is reported as a warning (and
/// `None` returned) and the run's exit code stands.
pub(crate) fn store_run(args: &StoreArgs, report: &Report) -> Option<i64> {
    if args.no_history {
        return None;
    }
    let stored = db_path(&args.db).and_then(|path| {
        let mut store = Store::open(&path, true)?;
        let id = store.insert(report)?;
        Ok((id, path))
    });
    match stored {
        Ok((id, path)) => {
            eprintln!("stored as run {id} in {}", path.display());
            Some(id)
        }
        Err(error) => {
            eprintln!(
                "warning: the run was not stored in the history: {error:#} (the results above are complete; use --no-history to skip storing)"
            );
            None
        }
    }
}

pub(crate) fn run(command: &HistoryCommand) -> Result<ExitCode> {
    match command {
        HistoryCommand::History(args) => list(args),
        HistoryCommand::Show(args) => show(args),
        HistoryCommand::Compare(args) => compare_runs(args),
        HistoryCommand::Import(args) => import(args),
        HistoryCommand::Report(args) => report(args),
    }
}

fn open(args: &DbArgs, write: bool) -> Result<Store> {
    Store::open(&db_path(args)?, write)
}

fn list(args: &HistoryListArgs) -> Result<ExitCode> {
    let store = open(&args.db, false)?;
    let runs = store.list()?;
    if runs.is_empty() {
        println!("no runs in {}", store.path().display());
        return Ok(ExitCode::SUCCESS);
    }
    let mut table = Table::new(&[
        ("run", Align::Right),
        ("host", Align::Left),
        ("started", Align::Left),
        ("command", Align::Left),
        ("status", Align::Left),
        ("results", Align::Right),
        ("best", Align::Left),
    ]);
    for r in &runs {
        table.row([
            r.id.to_string(),
            r.host.clone(),
            r.started_at.clone(),
            r.preset
                .as_ref()
                .map(|p| format!("preset {p}"))
                .unwrap_or_else(|| short_command(&r.command)),
            r.status.clone(),
            r.results.to_string(),
            r.headline
                .iter()
                .map(|(s, v, u)| format!("{s} {} {u}", format_value(*v)))
                .collect::<Vec<_>>()
                .join(", "),
        ]);
    }
    print!("{}", table.render());
    eprintln!("{} runs in {}", runs.len(), store.path().display());
    Ok(ExitCode::SUCCESS)
}

/// The command line without the program's path and the history flags.
pub(crate) fn short_command(command: &str) -> String {
    let mut words = command.split_whitespace();
    let program = words.next().unwrap_or("");
    let program = Path::new(program)
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut out = vec![program];
    let mut skip = false;
    for word in words {
        if skip {
            skip = false;
        } else if word == "--db" {
            skip = true;
        } else if !word.starts_with("--db=") {
            out.push(word.to_string());
        }
    }
    out.join(" ")
}

fn show(args: &HistoryShowArgs) -> Result<ExitCode> {
    let store = open(&args.db, false)?;
    let id = store.resolve(&args.run)?;
    let report = store.load(id)?;
    if args.json.on {
        let json = serde_json::to_string_pretty(&report)?;
        println!("{}", crate::text::json_for_terminal(&json));
    } else {
        println!(
            "run {id}: {}\n",
            printable(&short_command(&report.command.join(" ")))
        );
        std::io::stdout().write_all(&crate::report::TextReport.export(&report))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Two runs side by side, each a stored run or a JSON results file (shown as run 0).
fn compare_runs(args: &CompareArgs) -> Result<ExitCode> {
    let (a, report_a) = load_named(&args.run_a, &args.db)?;
    let (b, report_b) = load_named(&args.run_b, &args.db)?;
    print!(
        "{}",
        compare::render(a.unwrap_or(0), &report_a, b.unwrap_or(0), &report_b)
    );
    Ok(ExitCode::SUCCESS)
}

/// A JSON results document written by `--json` or `--output FILE.json`.
fn read_document(path: &std::path::Path) -> Result<Report> {
    let file = path.display();
    // The size first: a file too large to read is refused before it is read.
    if let Ok(meta) = std::fs::metadata(path)
        && meta.is_file()
    {
        crate::result::validate::check_size(meta.len(), crate::sysinfo::available_memory)
            .map_err(|e| UsageError(format!("FILE: {file}: {e}")))?;
    }
    let text = std::fs::read_to_string(path).map_err(|e| {
        UsageError(format!(
            "FILE: cannot read {file}: {e}; give a JSON results file"
        ))
    })?;
    // A version 1 document is upgraded (it is a version 2 document of one host).
    let report = Report::parse(&text).map_err(|e| {
        UsageError(format!(
            "FILE: {file}: {e}; give a JSON results document written with --json or --output FILE.json (schema v1 to v{SCHEMA_VERSION})"
        ))
    })?;
    Ok(report)
}

/// Whether a run named on the command line is a JSON results file (its name ends in `.json`,
/// or a file of that name exists) rather than a run of the history.
fn names_a_file(name: &str) -> bool {
    name.ends_with(".json") || Path::new(name).is_file()
}

/// A run named on the command line: a JSON results file, which has no id in a history (`None`),
/// or a stored run by id, `latest` or `previous` from the history at `db`.
pub(crate) fn load_named(name: &str, db: &DbArgs) -> Result<(Option<i64>, Report)> {
    if names_a_file(name) {
        return Ok((None, read_document(Path::new(name))?));
    }
    let store = open(db, false)?;
    let id = store.resolve(name)?;
    Ok((Some(id), store.load(id)?))
}

fn import(args: &HistoryImportArgs) -> Result<ExitCode> {
    let report = read_document(&args.file)?;
    let file = args.file.display();
    let mut store = open(&args.db, true)?;
    if let Some(id) = store.find_same(&report)? {
        eprintln!(
            "{file} is already in the history as run {id} in {}",
            store.path().display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let id = store.insert(&report)?;
    eprintln!("imported {file} as run {id} in {}", store.path().display());
    Ok(ExitCode::SUCCESS)
}

fn report(args: &ReportArgs) -> Result<ExitCode> {
    if args.html.is_none() && args.markdown.is_none() {
        return Err(UsageError(
            "--html/--markdown: say what to write, e.g. --html report.html or --markdown report.md"
                .into(),
        )
        .into());
    }
    let mut runs: Vec<(i64, Report)> = Vec::new();
    let mut store = None;
    for name in &args.run {
        if names_a_file(name) {
            // A results file is shown as run 0: it has no id in a history.
            runs.push((0, read_document(Path::new(name))?));
            continue;
        }
        if store.is_none() {
            store = Some(open(&args.db, false)?);
        }
        let store = store.as_ref().expect("opened above");
        let id = store.resolve(name)?;
        runs.push((id, store.load(id)?));
    }
    let id = runs[0].0;
    let shown: Vec<(i64, &Report)> = runs.iter().map(|(id, r)| (*id, r)).collect();
    let outputs: [(&Option<PathBuf>, &str, &dyn Exporter); 2] = [
        (&args.html, "--html", &Html { run: id }),
        (&args.markdown, "--markdown", &MarkdownTables),
    ];
    for (path, flag, exporter) in outputs {
        let Some(path) = path else { continue };
        let text = exporter
            .export_runs(&shown)
            .expect("the HTML report and the Markdown tables hold several runs");
        std::fs::write(path, text).map_err(|e| {
            UsageError(format!(
                "{flag}: cannot write {}: {e}; choose a writable path",
                path.display()
            ))
        })?;
        eprintln!("run {id}: {flag} report written to {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
