//! `peakbench baseline save|export|import|list|show`: baselines made from the history's runs,
//! kept beside the history (`baselines/NAME.json`), and moved between machines as files.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::{Args, Subcommand};

use crate::error::UsageError;
use crate::history::baseline::{self, Baseline, DEFAULT_RUNS, MIN_RUNS};
use crate::history::store::Store;
use crate::options::{DbArgs, Json};
use crate::result::Report;
use crate::sysinfo::Fingerprint;

/// What `peakbench baseline` does.
#[derive(Subcommand, Debug)]
pub(crate) enum BaselineCommand {
    /// Keeps the samples of this machine's latest runs of each case (or of chosen runs) as NAME
    Save(BaselineSaveArgs),
    /// Writes a saved baseline to FILE, or into DIR as DIR/<fingerprint>.json (a fleet's shared directory)
    Export(BaselineExportArgs),
    /// Checks a baseline file and saves it (under its own name, or --name)
    Import(BaselineImportArgs),
    /// Lists the saved baselines with their fingerprints
    List(BaselineListArgs),
    /// Prints a saved baseline (NAME) or a baseline file: its fingerprint and each case's median and spread
    Show(BaselineShowArgs),
}

#[derive(Args, Debug)]
pub(crate) struct BaselineSaveArgs {
    /// The baseline's name (letters, digits, '.', '-', '_')
    pub name: String,
    /// The runs to keep, by id (default: the latest runs of this machine's fingerprint)
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    pub runs: Vec<i64>,
    /// How many runs of each case to keep (at least 12: docs/check.md says why)
    #[arg(long, default_value_t = DEFAULT_RUNS as u32, value_name = "N", value_parser = crate::options::positive_u32)]
    pub last: u32,
    /// Replace a saved baseline of that name
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub db: DbArgs,
}

#[derive(Args, Debug)]
pub(crate) struct BaselineExportArgs {
    /// The saved baseline
    pub name: String,
    /// A file to write, or a directory to write <fingerprint>.json into
    pub to: PathBuf,
    #[command(flatten)]
    pub db: DbArgs,
}

#[derive(Args, Debug)]
pub(crate) struct BaselineImportArgs {
    /// A baseline file written by 'peakbench baseline export'
    pub file: PathBuf,
    /// Save it under this name instead of its own
    #[arg(long)]
    pub name: Option<String>,
    /// Replace a saved baseline of that name
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub db: DbArgs,
}

#[derive(Args, Debug)]
pub(crate) struct BaselineListArgs {
    #[command(flatten)]
    pub db: DbArgs,
}

#[derive(Args, Debug)]
pub(crate) struct BaselineShowArgs {
    /// A saved baseline's name, or a baseline file
    pub baseline: String,
    #[command(flatten)]
    pub json: Json,
    #[command(flatten)]
    pub db: DbArgs,
}

pub(crate) fn run(command: &BaselineCommand) -> Result<ExitCode> {
    match command {
        BaselineCommand::Save(args) => save(args),
        BaselineCommand::Export(args) => export(args),
        BaselineCommand::Import(args) => import(args),
        BaselineCommand::List(args) => list(args),
        BaselineCommand::Show(args) => show(args),
    }
    .map(|()| ExitCode::SUCCESS)
}

fn saved_dir(db: &DbArgs) -> Result<PathBuf> {
    Ok(baseline::saved_dir(&crate::history::db_path(db)?))
}

pub(crate) fn checked_name<'a>(name: &'a str, flag: &str) -> Result<&'a str> {
    if baseline::valid_name(name) {
        Ok(name)
    } else {
        Err(UsageError(format!(
            "{flag}: '{}' is not a baseline name: use 1 to 64 letters, digits, '.', '-' or '_'",
            crate::text::printable_at_most(name, 64)
        ))
        .into())
    }
}

/// Writes `b` as a saved baseline, refusing to replace one unless `force`.
fn keep(db: &DbArgs, b: &Baseline, force: bool) -> Result<PathBuf> {
    let dir = saved_dir(db)?;
    let file = dir.join(format!("{}.json", b.name));
    if file.exists() && !force {
        return Err(UsageError(format!(
            "NAME: a baseline '{}' is already saved ({}): give --force to replace it, or \
             another name",
            b.name,
            file.display()
        ))
        .into());
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(&file, b.to_json()).with_context(|| format!("writing {}", file.display()))?;
    Ok(file)
}

/// The runs a baseline keeps, newest first: `chosen`, or the latest of `fp`'s hardware.
fn runs(store: &Store, chosen: &[i64], fp: &Fingerprint) -> Result<Vec<(i64, Report)>> {
    if !chosen.is_empty() {
        let mut runs = Vec::new();
        for id in chosen {
            runs.push((*id, store.load(*id)?));
        }
        runs.sort_by_key(|run| std::cmp::Reverse(run.0));
        return Ok(runs);
    }
    let mut runs = Vec::new();
    for id in store.recent(None, 500)? {
        let Ok(report) = store.load(id) else { continue };
        if Fingerprint::of(&report.host) == *fp {
            runs.push((id, report));
        }
    }
    Ok(runs)
}

/// The default `--tolerance` of `check`, which `save` warns of the cases it cannot gate at.
const DEFAULT_TOLERANCE: f64 = 0.2;

fn save(args: &BaselineSaveArgs) -> Result<()> {
    let name = checked_name(&args.name, "NAME")?;
    let learning = Learning {
        db: &args.db,
        runs: &args.runs,
        last: args.last as usize,
        force: args.force,
        tolerance: DEFAULT_TOLERANCE,
    };
    save_learned(name, &learning).map(drop)
}

/// What a baseline is saved from: the history, the runs to keep (chosen ones, or the latest of
/// this hardware), how many of each case, whether it replaces one of the same name, and the
/// tolerance the warnings of cases too noisy to gate are for.
pub(crate) struct Learning<'a> {
    pub db: &'a DbArgs,
    pub runs: &'a [i64],
    pub last: usize,
    pub force: bool,
    pub tolerance: f64,
}

/// Saves the baseline `name` from the history's runs, keeping the cases learned from at least
/// [`MIN_RUNS`] runs and refusing (exit 2) when none is; says what it saved and warns of the
/// cases whose runs fell into two regimes or spread too far to gate.
pub(crate) fn save_learned(name: &str, how: &Learning) -> Result<(Baseline, PathBuf)> {
    too_few(how.last, "--last", "give --last 12 or more")?;
    if !how.runs.is_empty() {
        too_few(how.runs.len(), "--runs", "name more runs")?;
    }
    let store = Store::open(&crate::history::db_path(how.db)?, false)?;
    let here = Fingerprint::of(&crate::sysinfo::collect());
    let runs = runs(&store, how.runs, &here)?;
    let fp = match runs.first() {
        Some((_, first)) if !how.runs.is_empty() => Fingerprint::of(&first.host),
        _ => here,
    };
    if let Some((id, _)) = runs
        .iter()
        .find(|(_, r)| !Fingerprint::of(&r.host).differences(&fp).is_empty())
    {
        return Err(UsageError(format!(
            "--runs: run {id} was measured on other hardware than run {}: {}; choose runs of one machine",
            runs[0].0,
            Fingerprint::of(&runs.iter().find(|r| r.0 == *id).expect("found").1.host)
                .differences(&fp)
                .join(", ")
        ))
        .into());
    }
    let mut b = Baseline::from_runs(name, fp, &runs, how.last);
    if b.cases.is_empty() {
        return Err(UsageError(format!(
            "NAME: no run of this hardware (fingerprint {}) in {}: learn one with 'peakbench \
             check --learn {MIN_RUNS}', or give --runs",
            b.fingerprint.key(),
            store.path().display()
        ))
        .into());
    }
    let most = b.cases.iter().map(|c| c.runs.len()).max().unwrap_or(0);
    if most < MIN_RUNS {
        let flag = if how.runs.is_empty() {
            "--last"
        } else {
            "--runs"
        };
        return Err(UsageError(format!(
            "{flag}: {most} runs of this hardware in {}, and the gate learns from at least \
             {MIN_RUNS}: run {} more checks ('peakbench check --no-baseline-ok'), or learn \
             anew with 'peakbench check --learn {MIN_RUNS}'",
            store.path().display(),
            MIN_RUNS - most
        ))
        .into());
    }
    let left_out = b.keep_learned_from(MIN_RUNS);
    let file = keep(how.db, &b, how.force)?;
    report_saved(&b, &file, &left_out, how.tolerance);
    Ok((b, file))
}

/// Refuses `n` runs, fewer than the gate learns from (one line naming `flag` and `fix`).
pub(crate) fn too_few(n: usize, flag: &str, fix: &str) -> Result<()> {
    if n >= MIN_RUNS {
        return Ok(());
    }
    Err(UsageError(format!(
        "{flag}: {n} runs are too few to learn from: the gate needs at least {MIN_RUNS} (a \
         regime a fifth of the runs fall into is missed by {n} runs with chance {:.0} %, by \
         {MIN_RUNS} with {:.0} %); {fix}",
        100.0 * 0.8f64.powi(n as i32),
        100.0 * 0.8f64.powi(MIN_RUNS as i32),
    ))
    .into())
}

/// Says what `save` kept in one line, then the cases left out, the regimes and the cases too
/// noisy to gate at `tolerance`, each on a line of its own.
fn report_saved(b: &Baseline, file: &Path, left_out: &[String], tolerance: f64) {
    let fewest = b.cases.iter().map(|c| c.runs.len()).min().unwrap_or(0);
    eprintln!(
        "saved baseline '{}' of {} cases (at least {fewest} runs each, fingerprint {}) in {}",
        b.name,
        b.cases.len(),
        b.fingerprint.key(),
        file.display()
    );
    if !left_out.is_empty() {
        eprintln!(
            "note: left out {} cases seen in fewer than {MIN_RUNS} runs (check reports them \
             unjudged): {}",
            left_out.len(),
            left_out.join(", ")
        );
    }
    for note in b.notes() {
        eprintln!("warning: {note}");
    }
    for c in &b.cases {
        let Some(spread) = c.spread().filter(|s| s.ungateable(tolerance)) else {
            continue;
        };
        eprintln!(
            "warning: {}: its runs spread too far to gate at a tolerance of {:.0} % (the \
             slowest {:.2} of their median): check reports it UNGATEABLE, never failed",
            c.id,
            tolerance * 100.0,
            spread.slowest_share
        );
    }
}

/// A saved baseline by name.
fn load_saved(db: &DbArgs, name: &str) -> Result<Baseline> {
    let name = checked_name(name, "NAME")?;
    let file = saved_dir(db)?.join(format!("{name}.json"));
    if !file.is_file() {
        return Err(UsageError(format!(
            "NAME: no saved baseline named '{name}': see 'peakbench baseline list'"
        ))
        .into());
    }
    baseline::read_file(&file).map_err(|why| UsageError(format!("NAME: {why}")).into())
}

fn export(args: &BaselineExportArgs) -> Result<()> {
    let b = load_saved(&args.db, &args.name)?;
    let file = if args.to.is_dir() {
        args.to.join(format!("{}.json", b.fingerprint.key()))
    } else {
        args.to.clone()
    };
    std::fs::write(&file, b.to_json()).map_err(|e| {
        UsageError(format!(
            "TO: cannot write {}: {e}; choose a writable path",
            file.display()
        ))
    })?;
    eprintln!("baseline '{}' written to {}", b.name, file.display());
    Ok(())
}

fn import(args: &BaselineImportArgs) -> Result<()> {
    let mut b =
        baseline::read_file(&args.file).map_err(|why| UsageError(format!("FILE: {why}")))?;
    if let Some(name) = &args.name {
        b.name = checked_name(name, "--name")?.to_string();
    } else {
        checked_name(&b.name, "--name")?;
    }
    let file = keep(&args.db, &b, args.force)?;
    eprintln!("imported baseline '{}' as {}", b.name, file.display());
    Ok(())
}

fn list(args: &BaselineListArgs) -> Result<()> {
    use crate::text::{Align, Table};
    let dir = saved_dir(&args.db)?;
    let saved = baseline::saved(&dir);
    if saved.is_empty() {
        println!("no baselines in {}", dir.display());
        return Ok(());
    }
    let here = Fingerprint::of(&crate::sysinfo::collect());
    let mut table = Table::new(&[
        ("name", Align::Left),
        ("fingerprint", Align::Left),
        ("here", Align::Left),
        ("cpu", Align::Left),
        ("cases", Align::Right),
        ("created", Align::Left),
    ]);
    for b in &saved {
        match b {
            Ok(b) => table.row([
                b.name.clone(),
                b.fingerprint.key(),
                if b.fingerprint == here { "yes" } else { "" }.to_string(),
                b.fingerprint.cpu_model.clone(),
                b.cases.len().to_string(),
                b.created_at.clone(),
            ]),
            Err(why) => eprintln!("warning: {why}"),
        }
    }
    print!("{}", table.render());
    Ok(())
}

fn show(args: &BaselineShowArgs) -> Result<()> {
    let b = if args.baseline.contains('/')
        || args.baseline.ends_with(".json")
        || Path::new(&args.baseline).is_file()
    {
        baseline::read_file(Path::new(&args.baseline))
            .map_err(|why| UsageError(format!("BASELINE: {why}")))?
    } else {
        load_saved(&args.db, &args.baseline)?
    };
    if args.json.on {
        let json = serde_json::to_string_pretty(&b.show_json())?;
        println!("{}", crate::text::json_for_terminal(&json));
    } else {
        print!("{}", b.render());
    }
    Ok(())
}
