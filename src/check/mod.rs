//! `peakbench check`: a short plan (the `check` preset, or `--config`) judged case by case
//! against a baseline of this hardware, each suspect case measured again with more repetitions
//! before it fails; and `peakbench baseline`, which makes, moves and shows baselines.
//!
//! The gate's rule is in [`gate`], the outputs (text, drain reason, JUnit, JSON) in [`verdict`],
//! the Prometheus textfile in [`prometheus`], learning a baseline in one command (`--learn`)
//! in [`learn`], the exit codes in `docs/check.md`: 0 healthy, 1 a regression (or a
//! measurement that failed), 2 bad input, 3 no baseline for this hardware (0 with
//! `--no-baseline-ok`).

pub(crate) mod baseline_cmd;
pub(crate) mod gate;
pub(crate) mod learn;
pub(crate) mod prometheus;
pub(crate) mod verdict;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use crate::config::{self, Entry, Preset, ServerArg, TableSource};
use crate::error::{Exit, Lack, UsageError};
use crate::history::baseline::{self, Baseline};
use crate::history::inventory::{self, Inventory, Loss};
use crate::options::{
    DbArgs, Json, OutputArgs, PeakArgs, PeakOverrides, RunnerOptions, StoreArgs, positive_u32,
};
use crate::plan::{Context, LatencyProbe, Plan};
use crate::session::{self, HtmlReport, Session};
use crate::sysinfo::Fingerprint;
use gate::{CaseVerdict, Gate, Status};
use verdict::{CheckOutcome, CheckStatus};

#[derive(Args, Debug)]
pub(crate) struct CheckArgs {
    /// The baseline: a saved name (`peakbench baseline list`), a baseline file, or a directory
    /// of baselines, one per hardware fingerprint (read only). Default: the saved baseline of
    /// this machine's fingerprint
    #[arg(long, value_name = "NAME|FILE|DIR")]
    pub baseline: Option<String>,
    /// Slower than the slowest of the baseline's learning runs by more than this share fails
    /// (with a significant test): 0.2 or 20%
    #[arg(long, default_value = "0.2", value_name = "FRACTION", value_parser = tolerance)]
    pub tolerance: f64,
    /// Fail unstable cases too (by default they are reported as unstable with their spread;
    /// an ungateable case is never failed)
    #[arg(long)]
    pub strict: bool,
    /// Exit 0, not 3, when there is no baseline for this hardware
    #[arg(long)]
    pub no_baseline_ok: bool,
    /// Judge against a baseline learned on other hardware (its differing fields are printed)
    #[arg(long)]
    pub any_hardware: bool,
    /// Print only the drain reason on stdout (at most 100 printable ASCII characters; nothing
    /// when healthy)
    #[arg(long, conflicts_with = "json")]
    pub reason: bool,
    /// Write a JUnit XML report: one testcase per case, failures with their message
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write the result for Prometheus' node_exporter (textfile collector) to FILE, replaced
    /// atomically: each case's ratio and status, the exit code, the duration, a timestamp
    #[arg(long, value_name = "FILE.prom")]
    pub prometheus: Option<PathBuf>,
    /// Run N learning checks (each stored in the history like any check), then save them as
    /// a baseline; N is at least 12 (docs/check.md says why)
    #[arg(
        long,
        value_name = "N",
        value_parser = positive_u32,
        conflicts_with_all = ["baseline", "reason", "junit", "prometheus", "dry_run", "strict", "any_hardware", "no_history"]
    )]
    pub learn: Option<u32>,
    /// The name --learn saves the baseline under
    #[arg(long, value_name = "NAME", default_value = "node", requires = "learn")]
    pub save_as: String,
    /// With --learn: replace a saved baseline of that name
    #[arg(long, requires = "learn")]
    pub force: bool,
    #[command(flatten)]
    pub json: Json,
    /// Print the plan and its estimated duration, run nothing
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub tables: TableSource,
    #[command(flatten)]
    pub net: ServerArg,
    /// Measured repetitions per case
    #[arg(long, short = 'r', default_value = "5", value_name = "N", value_parser = positive_u32)]
    pub repetitions: u32,
    /// Repetitions of a case measured again before it fails
    #[arg(long, default_value = "10", value_name = "N", value_parser = positive_u32)]
    pub remeasure: u32,
    /// The check's time: a suspect case is measured again only while its estimate fits in
    /// what is left of it (the others are judged on their first measurement, and say so)
    #[arg(long, default_value = "60s", value_name = "DURATION", value_parser = crate::options::positive_duration)]
    pub budget: std::time::Duration,
    #[command(flatten)]
    pub history: StoreArgs,
    #[command(flatten)]
    pub peak: PeakArgs,
}

/// `--tolerance`: a fraction in (0, 1), or a percentage.
pub(crate) fn tolerance(text: &str) -> Result<f64, String> {
    let (number, scale) = match text.trim().strip_suffix('%') {
        Some(n) => (n, 100.0),
        None => (text.trim(), 1.0),
    };
    match number.parse::<f64>().map(|v| v / scale) {
        Ok(v) if v > 0.0 && v < 1.0 => Ok(v),
        _ => Err(format!(
            "'{text}' is not a tolerance: give a share between 0 and 1 (0.2) or a percentage (20%)"
        )),
    }
}

/// The check's plan made from the flags once: its tables and the machine's context. Each
/// measurement (a check, a learning check, a case measured again) plans from it.
pub(crate) struct Prepared {
    entries: Vec<Entry>,
    parsed: Vec<(&'static dyn crate::workload::Workload, clap::ArgMatches)>,
    origin: String,
    ctx: Context,
}

impl Prepared {
    /// The plan's tables (`--config`, else the check preset, with the run-wide targets
    /// applied), checked, and the machine read.
    pub(crate) fn new(args: &CheckArgs) -> Result<Prepared> {
        let peak = PeakOverrides::try_from(&args.peak)?;
        let (origin, mut entries) = args.tables.entries(Preset::Check)?;
        args.net.apply(&mut entries);
        let parsed = entries
            .iter()
            .map(|entry| config::parse_entry(entry, &origin))
            .collect::<Result<Vec<_>, _>>()?;
        // Every case measured the same way each time: thread i on the i-th CPU (the loopback
        // pair's sender and receiver on CPUs of their own, a BLAS on the first CPUs), so that
        // where the scheduler happens to put them is no second regime of the case.
        let runner = RunnerOptions {
            repetitions: args.repetitions,
            pin: true,
            placement: true,
            ..RunnerOptions::default()
        };
        let mut ctx = session::context(runner, &peak, &crate::registry::probe());
        if !args.dry_run {
            ctx.latency_probe = LatencyProbe::live();
        }
        Ok(Prepared {
            entries,
            parsed,
            origin,
            ctx,
        })
    }

    /// The plan, its configuration saying it is a check with `args`' gate.
    pub(crate) fn plan(&self, args: &CheckArgs) -> Result<Plan> {
        let (mut plan, experiments) =
            config::plan(&self.entries, &self.parsed, &self.ctx, &self.origin)?;
        plan.config = serde_json::json!({
            "experiments": experiments,
            "runner": self.ctx.runner,
            "preset": "check",
            "check": { "tolerance": args.tolerance, "strict": args.strict },
        });
        Ok(plan)
    }

    pub(crate) fn ctx(&self) -> &Context {
        &self.ctx
    }
}

/// Where the baseline came from, for messages.
pub(crate) struct LocatedBaseline {
    pub baseline: Baseline,
    pub origin: String,
}

/// The baseline `--baseline` names (or the saved one of this fingerprint), refused when it was
/// learned on other hardware unless `any`; `None` when there is none for this hardware.
pub(crate) fn locate(
    arg: Option<&str>,
    db: &DbArgs,
    fp: &Fingerprint,
    any: bool,
) -> Result<Option<LocatedBaseline>> {
    let Some(found) = find(arg, db, fp)? else {
        return Ok(None);
    };
    let differ = found.baseline.fingerprint.differences(fp);
    if fp.degraded_from(&found.baseline.fingerprint) {
        eprintln!(
            "note: this node has less than {} was learned on ({}; here vs there): judged \
             against it, and what it lost fails the check",
            found.origin,
            differ.join(", ")
        );
    } else if !differ.is_empty() {
        let line = format!(
            "{} was learned on other hardware: {} (there vs here)",
            found.origin,
            differ.join(", ")
        );
        if !any {
            return Err(UsageError(format!(
                "--baseline: {line}; use this machine's baseline, or --any-hardware to judge \
                 against it anyway"
            ))
            .into());
        }
        eprintln!("warning: {line}; judged anyway (--any-hardware)");
    }
    Ok(Some(found))
}

/// The baseline `arg` names: a directory's file of this fingerprint, a file, a saved name;
/// without `arg`, the newest saved baseline of this fingerprint.
fn find(arg: Option<&str>, db: &DbArgs, fp: &Fingerprint) -> Result<Option<LocatedBaseline>> {
    let bad = |why: String| UsageError(format!("--baseline: {why}; give a valid baseline file"));
    let read = |file: &Path, origin: String| -> Result<Option<LocatedBaseline>> {
        let baseline = baseline::read_file(file).map_err(bad)?;
        Ok(Some(LocatedBaseline { baseline, origin }))
    };
    let saved = baseline::saved_dir(&crate::history::db_path(db)?);
    match arg {
        None => Ok(newest_saved(&saved, fp)),
        Some(arg) if Path::new(arg).is_dir() => {
            let file = Path::new(arg).join(format!("{}.json", fp.key()));
            if file.exists() {
                return read(&file, file.display().to_string());
            }
            // A node that lost hardware has another key: its baseline is the one it fits in.
            if let Some(found) = newest_saved(Path::new(arg), fp) {
                return Ok(Some(found));
            }
            eprintln!(
                "no baseline for this hardware in {arg}: no {}",
                file.display()
            );
            Ok(None)
        }
        Some(arg) if arg.contains('/') || arg.ends_with(".json") || Path::new(arg).is_file() => {
            read(Path::new(arg), arg.to_string())
        }
        Some(name) => {
            let file = saved.join(format!("{name}.json"));
            if !baseline::valid_name(name) || !file.is_file() {
                return Err(UsageError(format!(
                    "--baseline: no saved baseline named '{}': see 'peakbench baseline list', \
                     or give a file or directory",
                    crate::text::printable_at_most(name, 64)
                ))
                .into());
            }
            read(&file, format!("saved baseline '{name}'"))
        }
    }
}

/// The newest saved baseline of fingerprint `fp` in `dir` (those that cannot be read are
/// skipped with a warning); where there is none, the newest of a node this one could be after
/// losing hardware ([`Fingerprint::degraded_from`]), so that a degraded node is judged against
/// its baseline, and fails for what it lost, instead of finding none.
fn newest_saved(dir: &Path, fp: &Fingerprint) -> Option<LocatedBaseline> {
    let readable: Vec<Baseline> = baseline::saved(dir)
        .into_iter()
        .filter_map(|b| b.map_err(|why| eprintln!("warning: skipped {why}")).ok())
        .collect();
    let newest = |matches: &dyn Fn(&Baseline) -> bool| {
        readable
            .iter()
            .filter(|b| matches(b))
            .max_by(|a, b| a.created_at.cmp(&b.created_at))
            .cloned()
    };
    let baseline = newest(&|b| b.fingerprint == *fp)
        .or_else(|| newest(&|b| fp.degraded_from(&b.fingerprint)))?;
    let origin = format!("saved baseline '{}'", baseline.name);
    Some(LocatedBaseline { baseline, origin })
}

/// `peakbench check`.
pub(crate) fn run(args: &CheckArgs) -> Result<ExitCode> {
    // The budget counts from here: the machine's probes and the planning are the check's time.
    let started = std::time::Instant::now();
    let prepared = Prepared::new(args)?;
    if let Some(n) = args.learn {
        return learn::run(args, &prepared, n);
    }
    let mut plan = prepared.plan(args)?;
    if args.dry_run {
        let output = OutputArgs {
            json: args.json,
            dry_run: true,
            ..OutputArgs::default()
        };
        return session::execute(plan, &prepared.ctx, &output, HtmlReport::None);
    }
    if let Some(file) = &args.junit {
        verdict::probe_writable(file, "--junit")?;
    }
    if let Some(file) = &args.prometheus {
        prometheus::probe(file)?;
    }
    let fp = Fingerprint::of(&prepared.ctx.host);
    let found = locate(
        args.baseline.as_deref(),
        &args.history.db,
        &fp,
        args.any_hardware,
    )?;
    if let Some(found) = found.as_ref().filter(|f| !f.baseline.learned_spreads()) {
        eprintln!(
            "warning: {} predates learned spreads (its cases have no run medians): judged by \
             pooled medians alone; save the baseline again",
            found.origin
        );
    }
    for note in &plan.notes {
        eprintln!("note: {note}");
    }
    let unusable = std::mem::take(&mut plan.unusable);
    let mut session = Session::start(&prepared.ctx, plan.config, plan.notes, None)?;
    let ending = session.run(plan.cases, &prepared.ctx)?;
    let gate = Gate {
        tolerance: args.tolerance,
        strict: args.strict,
    };
    let mut cases = match &found {
        Some(found) => {
            let rerun = Rerun {
                prepared: &prepared,
                repetitions: args.remeasure,
                left: args.budget.saturating_sub(started.elapsed()),
            };
            judge_and_remeasure(&mut session, &found.baseline, gate, &rerun)?
        }
        None => {
            session.add_findings(&args.history.db)?;
            Vec::new()
        }
    };
    let lost = match &found {
        Some(found) => {
            let mut lost = Inventory::of(&session.report).losses(&found.baseline.inventory());
            lost.extend(place_lost(&unusable, &found.baseline, &cases));
            with_missing(&mut cases, &found.baseline, &lost);
            lost
        }
        None => Vec::new(),
    };
    let run_id = crate::history::store_run(&args.history, &session.report);
    let verdict = CheckOutcome::new(found.as_ref(), &fp, gate, cases, lost, run_id);
    finish(args, &verdict, ending, started)
}

/// What the node lost of its disk cases' place: each reason the plan left a disk table out for
/// (`unusable`: no room, or a read-only file system), where the baseline has a disk case this
/// check did not run. A scratch file system that filled up, or that ext4 remounted read-only
/// after an I/O error, takes the disk cases away as surely as a lost disk does.
fn place_lost(
    unusable: &[(Lack, String)],
    baseline: &Baseline,
    cases: &[CaseVerdict],
) -> Vec<Loss> {
    let disk_missing = baseline
        .cases
        .iter()
        .any(|b| b.subsystem == "disk" && !cases.iter().any(|c| c.id == b.id));
    if !disk_missing {
        return Vec::new();
    }
    unusable
        .iter()
        .map(|(lack, reason)| Loss {
            kind: match lack {
                Lack::Room => inventory::NO_ROOM,
                Lack::Writes => inventory::READ_ONLY,
            },
            text: reason.clone(),
            source: "statvfs(2) of the disk cases' directory".into(),
        })
        .collect()
}

/// Adds a verdict for each case of `baseline` the check did not run, and names the hardware
/// the node `lost` as the cause of each failure that has none: a node short of a CPU runs its
/// two-thread cases on one, and loopback TCP's sender and receiver share it.
fn with_missing(cases: &mut Vec<CaseVerdict>, baseline: &Baseline, lost: &[Loss]) {
    for base in &baseline.cases {
        if !cases.iter().any(|c| c.id == base.id && c.unit == base.unit) {
            cases.push(gate::missing_case(base, lost));
        }
    }
    let lost: Vec<Loss> = lost.iter().filter(|l| l.is_hardware()).cloned().collect();
    if lost.is_empty() {
        return;
    }
    for case in cases
        .iter_mut()
        .filter(|c| c.status == Status::Fail && c.causes.is_empty())
    {
        case.causes.push(gate::lost_hardware(&lost));
        case.line = case
            .line
            .replace("; no cause found on this machine", "; cause: lost-hardware");
    }
}

/// What measuring a case again needs: the plan's tables and the machine.
struct Rerun<'a> {
    prepared: &'a Prepared,
    /// Repetitions of a case measured again.
    repetitions: u32,
    /// What is left of the check's time budget.
    left: std::time::Duration,
}

/// Judges every result against the baseline, measures the failing and unstable cases again
/// with `remeasure` repetitions, judges again, and keeps the findings in the document.
fn judge_and_remeasure(
    session: &mut Session,
    baseline: &Baseline,
    gate: Gate,
    rerun: &Rerun,
) -> Result<Vec<CaseVerdict>> {
    let judging = std::time::Instant::now();
    let mut cases = gate_all(session, baseline, gate);
    // Judging again after measuring again takes as long, so it is kept out of what measuring
    // may take.
    let rerun = &Rerun {
        left: rerun.left.saturating_sub(judging.elapsed()),
        ..*rerun
    };
    // Failures first, the slowest first; then the unstable cases.
    let mut suspects: Vec<&CaseVerdict> = cases
        .iter()
        .filter(|c| matches!(c.status, Status::Fail | Status::Unstable))
        .collect();
    suspects.sort_by(|a, b| {
        (a.status != Status::Fail)
            .cmp(&(b.status != Status::Fail))
            .then(a.ratio.unwrap_or(1.0).total_cmp(&b.ratio.unwrap_or(1.0)))
    });
    let suspects: Vec<String> = suspects.iter().map(|c| c.id.clone()).collect();
    if !suspects.is_empty() && !crate::interrupt::requested() {
        eprintln!(
            "measuring again with {} repetitions before judging: {}",
            rerun.repetitions,
            suspects.join(", ")
        );
        let again = measure_again(session, rerun, &suspects)?;
        cases = gate_all(session, baseline, gate);
        for case in cases.iter_mut().filter(|c| again.contains(&c.id)) {
            case.remeasured = true;
        }
    }
    session.save()?;
    Ok(cases)
}

/// The findings of the session's document against `baseline` (kept in the document), and
/// the gate's verdict on each result.
fn gate_all(session: &mut Session, baseline: &Baseline, gate: Gate) -> Vec<CaseVerdict> {
    // Each case as the baseline's runs in its placement saw it, where there are such runs.
    let placed: Vec<baseline::BaselineCase> = baseline
        .cases
        .iter()
        .map(|c| {
            let here = session
                .report
                .results
                .iter()
                .find(|r| r.id == c.id && r.unit == c.unit)
                .and_then(|r| r.evidence.as_ref()?.placement.as_ref());
            gate::in_placement(c, here).unwrap_or_else(|| c.clone())
        })
        .collect();
    let index = crate::findings::PastIndex::from_samples(
        placed.iter().map(|c| {
            (
                c.id.as_str(),
                c.unit.as_str(),
                c.runs.as_slice(),
                c.samples.as_slice(),
            )
        }),
        1.0 - gate.tolerance,
    );
    let findings = crate::findings::judge_with(&session.report, &index);
    let cases = session
        .report
        .results
        .iter()
        .map(|r| {
            let finding = findings.results.iter().find(|f| f.id == r.id);
            let base = placed.iter().find(|c| c.id == r.id && c.unit == r.unit);
            gate::gate_case(r, base, finding, gate)
        })
        .collect();
    session.report.findings = Some(findings);
    cases
}

/// Measures the cases `ids` again (in that order) with more repetitions, each result replacing
/// the first one, while each case's estimate fits in what is left of the budget; returns the
/// ids measured again.
fn measure_again(session: &mut Session, rerun: &Rerun, ids: &[String]) -> Result<Vec<String>> {
    let base = &rerun.prepared.ctx;
    let ctx = Context {
        host: base.host.clone(),
        peaks: base.peaks.clone(),
        runner: RunnerOptions {
            repetitions: rerun.repetitions,
            ..base.runner.clone()
        },
        latency_probe: base.latency_probe.clone(),
    };
    let p = rerun.prepared;
    let (plan, _) = config::plan(&p.entries, &p.parsed, &ctx, &p.origin)?;
    let mut cases: Vec<_> = plan
        .cases
        .into_iter()
        .filter_map(|c| Some((ids.iter().position(|id| *id == c.spec().id)?, c)))
        .collect();
    cases.sort_by_key(|(at, _)| *at);
    let mut left = rerun.left;
    let mut again = Vec::new();
    for (_, case) in cases {
        let id = case.spec().id;
        let first = session.report.results.iter().find(|r| r.id == id);
        let estimate = paced(case.estimate(&ctx), case.estimate(base), first);
        if crate::interrupt::requested() || estimate > left {
            eprintln!(
                "note: {id} not measured again: its {} would pass the check's time (--budget)",
                crate::units::format_duration(estimate)
            );
            continue;
        }
        let started = std::time::Instant::now();
        let result = session::run_case(case, &ctx)?;
        left = left.saturating_sub(started.elapsed());
        if let Some(slot) = session.report.results.iter_mut().find(|r| r.id == id) {
            *slot = result;
        }
        again.push(id);
    }
    Ok(again)
}

/// A case's estimate to measure it again (`again`), stretched by how much longer than its own
/// estimate (`planned`) its `first` measurement took: a machine slowed by what the check looks
/// for (a spinner on each CPU, a CPU quota) runs the second measurement as slowly as the first,
/// and an estimate for a quiet machine would take the check past its budget.
fn paced(
    again: std::time::Duration,
    planned: std::time::Duration,
    first: Option<&crate::result::BenchResult>,
) -> std::time::Duration {
    let took = first.and_then(|r| Some(r.evidence.as_ref()?.wall_s));
    match took {
        Some(took) if !planned.is_zero() => {
            again.mul_f64((took / planned.as_secs_f64()).clamp(1.0, 10.0))
        }
        _ => again,
    }
}

/// Prints the verdict as asked, writes the JUnit and Prometheus files, and returns the exit
/// code.
fn finish(
    args: &CheckArgs,
    verdict: &CheckOutcome,
    ending: session::Ending,
    started: std::time::Instant,
) -> Result<ExitCode> {
    let exit = if ending == session::Ending::Interrupted {
        Exit::Interrupted
    } else {
        match verdict.status {
            CheckStatus::Healthy => Exit::Done,
            CheckStatus::Regression => Exit::Failed,
            CheckStatus::NoBaseline if args.no_baseline_ok => Exit::Done,
            CheckStatus::NoBaseline => Exit::NoBaseline,
        }
    };
    if let Some(file) = &args.junit {
        verdict::write_junit(file, verdict)?;
    }
    if let Some(file) = &args.prometheus {
        let text = prometheus::text(&prometheus::Metrics {
            verdict,
            exit: exit as u8,
            duration_s: started.elapsed().as_secs_f64(),
            timestamp_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
        });
        prometheus::write(file, &text)?;
    }
    if args.json.on {
        println!("{}", serde_json::to_string_pretty(verdict)?);
    } else if args.reason {
        if let Some(reason) = &verdict.reason {
            println!("{reason}");
        }
    } else {
        print!("{}", verdict.render());
    }
    if exit == Exit::Interrupted {
        eprintln!("interrupted: the verdict above covers the cases measured before it");
    }
    Ok(exit.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The fixture's first result, its first measurement having taken `wall_s`.
    fn first(wall_s: Option<f64>) -> crate::result::BenchResult {
        let report =
            crate::result::Report::parse(include_str!("../../tests/fixtures/report.json")).unwrap();
        let mut r = report.results[0].clone();
        r.evidence = wall_s.map(|wall_s| crate::evidence::CaseEvidence {
            wall_s,
            ..Default::default()
        });
        r
    }

    /// A second measurement's estimate stretches as the first outran its own, never shrinks,
    /// and stretches at most tenfold.
    #[test]
    fn a_slowed_first_measurement_stretches_the_estimate_of_the_second() {
        let (again, planned) = (Duration::from_secs(4), Duration::from_secs(2));
        let slowed = first(Some(3.0));
        assert_eq!(paced(again, planned, Some(&slowed)), Duration::from_secs(6));
        let quick = first(Some(1.0));
        assert_eq!(paced(again, planned, Some(&quick)), again);
        let stalled = first(Some(1000.0));
        assert_eq!(paced(again, planned, Some(&stalled)), again * 10);
        assert_eq!(paced(again, planned, Some(&first(None))), again);
        assert_eq!(paced(again, planned, None), again);
        assert_eq!(paced(again, Duration::ZERO, Some(&slowed)), again);
    }
}
