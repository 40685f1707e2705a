//! Runs a plan: the context it runs in, the cases one after another, and what is kept.
//!
//! The session builds the [`Context`] (the inventory, the clock probe, the peaks), prints the
//! plan's notes, and runs the cases: a progress bar with ETA on stderr (hidden when stderr is
//! not a terminal), the output file rewritten after every case, the files a case hands back
//! with its result written as soon as it has run (the roofline's `--svg` chart: a case writes
//! none itself), Ctrl-C honoured between and within cases, and the results so far kept
//! whatever happens. Each case is dropped as soon as it has run, so what cases share (the disk
//! test file, the loopback server) goes away after the last case that uses it, not at the end
//! of the run. Then the results are printed, stored in the history, and, for `peakbench run`,
//! written as an HTML report.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use crate::error::{Exit, UsageError};
use crate::interrupt;
use crate::options::{OutputArgs, PeakOverrides, RunnerOptions};
use crate::peak::MeasuredFactors;
use crate::plan::{Case, CaseSpec, Context, Plan};
use crate::report::{Exporter, Html, OutputFile};
use crate::result::{BenchResult, Report, RunStatus, SCHEMA_VERSION, Tool, now_rfc3339};
use crate::units::format_duration;

/// The context of a run on this machine: its inventory, the peaks, and the `probes` the caller
/// ran (the clock of one core and the FMA instructions it retires per cycle, which the CPU
/// workload measures: the session names no workload).
pub(crate) fn context(
    mut runner: RunnerOptions,
    peak: &PeakOverrides,
    probes: &MeasuredFactors,
) -> Context {
    let host = host();
    // Inside a guest, pinning threads to vCPUs does not pin the vCPUs to host cores: every run
    // reads where each case's first two CPUs sat, as `peakbench check` does everywhere.
    runner.placement |= host.hypervisor.as_ref().is_some_and(|v| v != "none");
    Context::new(host, peak, probes, runner)
}

/// This machine's inventory, the memory available lowered to what this process's memory
/// cgroup allows (what `sysinfo` prints and every run plans with).
pub(crate) fn host() -> crate::sysinfo::SysInfo {
    let mut host = crate::sysinfo::collect();
    limit_to_cgroup(&mut host.memory, crate::evidence::memory_headroom());
    host
}

/// Lowers the memory a run may take to what its memory cgroup still allows, where that is less
/// than MemAvailable: every step sizes its buffers from `available_bytes`, and a limit it did
/// not see got the run killed by the kernel's OOM killer with nothing kept (the loopback
/// tests' 1 GiB copy under a 300 MiB limit).
fn limit_to_cgroup(
    memory: &mut crate::sysinfo::MemoryInfo,
    headroom: Option<crate::evidence::Read<u64>>,
) {
    let Some(headroom) = headroom else { return };
    if memory.available_bytes > 0 && headroom.value >= memory.available_bytes {
        return;
    }
    memory.available_source = Some(format!(
        "{}; /proc/meminfo's MemAvailable is {}",
        headroom.source,
        crate::units::format_size_approx(memory.available_bytes)
    ));
    memory.available_bytes = headroom.value;
}

/// Warnings about the machine as a whole, each with what to do.
fn machine_warnings(ctx: &Context) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Some(governor) = ctx.host.cpu.governor.as_ref()
        && governor != "performance"
    {
        warnings.push(format!(
            "the CPU governor is '{governor}', not 'performance': clocks move with load; \
             set it with 'cpupower frequency-set -g performance'"
        ));
    }
    if let Some(clock) = ctx.peaks.cpu.factors.clock_warning() {
        warnings.push(clock);
    }
    if let Some(vendor) = ctx.host.hypervisor.as_ref()
        && vendor != "none"
    {
        warnings.push(format!(
            "running under a hypervisor ({vendor}): other guests share the host; compare runs \
             by alternating them and reading medians"
        ));
    }
    warnings
}

/// A planned case as `--dry-run --json` prints it.
#[derive(Serialize)]
struct PlannedCase {
    #[serde(flatten)]
    spec: CaseSpec,
    estimate_s: f64,
}

/// Prints the plan: every case with its parameters and estimate, and the total.
fn print_plan(plan: &Plan, ctx: &Context, json: bool) {
    let planned: Vec<PlannedCase> = plan
        .cases
        .iter()
        .map(|c| PlannedCase {
            spec: c.spec(),
            estimate_s: c.estimate(ctx).as_secs_f64(),
        })
        .collect();
    let total = crate::plan::guess::sum(plan.cases.iter().map(|c| c.estimate(ctx))).as_secs_f64();
    if json {
        let doc = serde_json::json!({
            "cases": planned,
            "estimate_s": total,
            "notes": plan.notes,
            "config": plan.config,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).expect("plan serialises")
        );
        return;
    }
    println!(
        "{} cases, estimated {}:",
        planned.len(),
        format_duration(crate::plan::guess::secs(total))
    );
    for p in &planned {
        println!(
            "  {:<48} {:>10}  {}",
            p.spec.label,
            format_duration(crate::plan::guess::secs(p.estimate_s)),
            p.spec.id
        );
    }
}

/// Where `run` writes its HTML report.
pub(crate) enum HtmlReport {
    /// Single commands write none (`peakbench report` makes one from the history).
    None,
    /// Next to the history, named after the run: `<data dir>/peakbench/reports/run-<id>.html`.
    Default,
    At(PathBuf),
}

/// How a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    Complete,
    Interrupted,
}

/// A run in progress: the document and where it is written.
pub(crate) struct Session {
    pub report: Report,
    output: Option<OutputFile>,
}

impl Session {
    /// Starts a document; the output file, if any, is written at once with no results.
    pub(crate) fn start(
        ctx: &Context,
        config: serde_json::Value,
        warnings: Vec<String>,
        output: Option<OutputFile>,
    ) -> Result<Session> {
        let report = Report {
            schema_version: SCHEMA_VERSION,
            tool: Tool::this(),
            command: std::env::args().collect(),
            started_at: now_rfc3339(),
            finished_at: None,
            status: RunStatus::Running,
            host: ctx.host.clone(),
            peaks: ctx.peaks.clone(),
            config,
            warnings,
            results: Vec::new(),
            hosts: Default::default(),
            cluster: None,
            evidence: Some(crate::evidence::RunEvidence::read()),
            findings: None,
        };
        let session = Session { report, output };
        session.save()?;
        Ok(session)
    }

    /// Writes the document to the output file, if any.
    pub(crate) fn save(&self) -> Result<()> {
        match &self.output {
            Some(file) => file.write(&self.report),
            None => Ok(()),
        }
    }

    /// Runs every case in order, dropping each once it has run. A failing case stops the run
    /// with its error after the results so far are saved; an interrupt stops it the same way
    /// with `Ending::Interrupted`.
    pub(crate) fn run(&mut self, cases: Vec<Box<dyn Case>>, ctx: &Context) -> Result<Ending> {
        let estimates: Vec<u64> = cases
            .iter()
            .map(|c| u64::try_from(c.estimate(ctx).as_millis().max(1)).unwrap_or(u64::MAX))
            .collect();
        let progress = ProgressBar::with_draw_target(
            Some(estimates.iter().fold(0u64, |a, b| a.saturating_add(*b))),
            indicatif::ProgressDrawTarget::stderr(),
        );
        progress.set_style(
            ProgressStyle::with_template("{bar:30} {percent:>3}% ETA {eta:>4} {wide_msg}")
                .expect("valid template"),
        );
        let mut ending = Ending::Complete;
        for (case, estimate) in cases.into_iter().zip(estimates) {
            if interrupt::requested() {
                ending = Ending::Interrupted;
                break;
            }
            let label = case.spec().label;
            progress.set_message(label.clone());
            match run_case(case, ctx) {
                Ok(result) => {
                    self.report.results.push(result);
                    self.save()?;
                }
                Err(error) if error.is::<interrupt::Interrupted>() => {
                    ending = Ending::Interrupted;
                    break;
                }
                Err(error) => {
                    progress.finish_and_clear();
                    self.finish(RunStatus::Failed)?;
                    return Err(error.context(format!("case {label}")));
                }
            }
            progress.inc(estimate);
        }
        progress.finish_and_clear();
        self.finish(match ending {
            Ending::Complete => RunStatus::Complete,
            Ending::Interrupted => RunStatus::Interrupted,
        })?;
        Ok(ending)
    }

    /// Judges every result (against its physics, reference and the past in the history at
    /// `db`) and keeps the findings in the document.
    pub(crate) fn add_findings(&mut self, db: &crate::options::DbArgs) -> Result<()> {
        let started = std::time::Instant::now();
        let past = crate::findings::past_runs(db, &self.report, None);
        let mut findings = crate::findings::judge(&self.report, &past);
        // What judging cost includes reading the past from the history.
        findings.judged_in_s = started.elapsed().as_secs_f64();
        self.report.findings = Some(findings);
        self.save()
    }

    /// Sets how the run ended and writes the document.
    pub(crate) fn finish(&mut self, status: RunStatus) -> Result<()> {
        self.report.status = status;
        self.report.finished_at = Some(now_rfc3339());
        self.save()
    }

    /// Prints the document on stdout as `exporter` writes it.
    pub(crate) fn print(&self, exporter: &dyn Exporter) -> Result<()> {
        use std::io::Write;
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(&exporter.export(&self.report))?;
        stdout.flush()?;
        Ok(())
    }

    pub(crate) fn output_path(&self) -> Option<&Path> {
        self.output.as_ref().map(|o| o.path())
    }
}

/// Runs one case with the machine watched around it (the CPU time of this process and the
/// others, steal, throttling), writes the files it hands back, and drops it; the result
/// carries what was seen. A file that cannot be written fails the case.
pub(crate) fn run_case(case: Box<dyn Case>, ctx: &Context) -> Result<BenchResult> {
    let pair = if ctx.runner.placement {
        placement_pair(&case.spec().params)
    } else {
        None
    };
    let before = pair.and_then(round_trip);
    let watch = crate::evidence::CaseWatch::start();
    let outcome = case
        .run(ctx)
        .and_then(|result| Ok((case.files(&result)?, result)));
    drop(case);
    let (files, mut result) = outcome?;
    for file in files {
        std::fs::write(&file.path, &file.bytes)
            .with_context(|| format!("{}: cannot write {}", file.flag, file.path.display()))?;
    }
    // A network case brings what its server read on the far side; this side adds its own.
    let peer = result.evidence.take().and_then(|e| e.peer);
    let mut evidence = watched(watch, &result);
    evidence.peer = peer;
    // Read after the watch ends, so that the probe's two spinning threads are not counted as
    // the case's CPU time.
    let after = pair.and_then(round_trip);
    if let (Some(cpus), Some(before_ns), Some(after_ns)) = (pair, before, after) {
        evidence.placement = Some(crate::evidence::PlacementProbe {
            cpus,
            before_ns,
            after_ns,
        });
    }
    result.evidence = Some(evidence);
    Ok(result)
}

/// The two CPUs whose placement a case depends on: the first two this process may use, for a
/// case of two or more threads (pinned, its first two threads run there) or a loopback pair
/// whose sender and receiver were placed apart; `None` for a case on one CPU.
fn placement_pair(params: &crate::result::Params) -> Option<[usize; 2]> {
    let placed_apart = params
        .other
        .get("placement")
        .and_then(|p| p.as_str())
        .is_some_and(|p| p.starts_with("senders from"));
    if params.threads.unwrap_or(1) < 2 && !placed_apart {
        return None;
    }
    match crate::runner::online_cpus()[..] {
        [a, b, ..] => Some([a, b]),
        _ => None,
    }
}

/// A cache line's round trip between `cpus` in ns, the median of 0.1 s of batches; `None`
/// where it cannot be read (a CPU that cannot be pinned).
fn round_trip(cpus: [usize; 2]) -> Option<f64> {
    crate::sysinfo::c2c::pair_round_trip(cpus[0], cpus[1], std::time::Duration::from_millis(100))
        .map(|p| p.median_ns)
        .ok()
}

/// What the machine did while `result`'s case ran, read by `watch`; the case's file (a disk
/// case's `path`) and server (a network case's `server`) say where its device and route are.
fn watched(
    watch: crate::evidence::CaseWatch,
    result: &BenchResult,
) -> crate::evidence::CaseEvidence {
    let text = |key: &str| result.params.other.get(key).and_then(|v| v.as_str());
    watch.finish(text("path"), text("server"))
}

/// The `--output` file, created (a bad path is a usage error before anything runs).
pub(crate) fn output_file(args: &OutputArgs) -> Result<Option<OutputFile>> {
    let Some(path) = &args.output else {
        return Ok(None);
    };
    let exporter = crate::report::by_extension(path).ok_or_else(|| {
        UsageError(format!(
            "--output: '{}' has no known extension: use .json, .csv, .md or .txt",
            path.display()
        ))
    })?;
    OutputFile::create(path, exporter)
        .map(Some)
        .map_err(|e| UsageError(format!("--output: {e:#}; choose a writable path")).into())
}

/// Runs `plan` (or prints it with `--dry-run`), prints and stores the results, writes the HTML
/// report `html` asks for, and prints the plan's summaries; the exit code says how it ended.
pub(crate) fn execute(
    plan: Plan,
    ctx: &Context,
    output: &OutputArgs,
    html: HtmlReport,
) -> Result<ExitCode> {
    // Notes first, so that a plan also says what it left out and why.
    for note in &plan.notes {
        eprintln!("note: {note}");
    }
    if output.dry_run {
        print_plan(&plan, ctx, output.json.on);
        return Ok(ExitCode::SUCCESS);
    }
    let file = output_file(output)?;
    let mut warnings = machine_warnings(ctx);
    warnings.extend(plan.notes);
    let mut session = Session::start(ctx, plan.config, warnings, file)?;
    let outcome = session.run(plan.cases, ctx);
    if let Err(error) = session.add_findings(&output.history.db) {
        eprintln!("warning: the findings were not written to the output file: {error:#}");
    }
    let printed = session.print(crate::report::for_stdout(output));
    if let Some(path) = session.output_path() {
        eprintln!("results written to {}", path.display());
    }
    for (summary, ids) in &plan.summaries {
        let results: Vec<&BenchResult> = session
            .report
            .results
            .iter()
            .filter(|r| ids.contains(&r.id))
            .collect();
        if !results.is_empty() {
            for line in summary(ctx, &results) {
                eprintln!("{line}");
            }
        }
    }
    let run_id = crate::history::store_run(&output.history, &session.report);
    write_html_report(&html, run_id, &session.report, output);
    printed?;
    match outcome? {
        Ending::Complete => Ok(ExitCode::SUCCESS),
        Ending::Interrupted => {
            eprintln!("interrupted: the results above are those measured before it");
            Ok(Exit::Interrupted.into())
        }
    }
}

/// Writes the run's HTML report and names it, with the run id, as the last line on stderr.
/// A report that cannot be written is a warning: the results are already printed and stored.
pub(crate) fn write_html_report(
    html: &HtmlReport,
    run_id: Option<i64>,
    report: &Report,
    output: &OutputArgs,
) {
    let path = match (html, run_id) {
        (HtmlReport::None, _) => return,
        (HtmlReport::At(path), _) => path.clone(),
        (HtmlReport::Default, Some(id)) => match crate::history::db_path(&output.history.db) {
            Ok(db) => db
                .parent()
                .unwrap_or(Path::new("."))
                .join("reports")
                .join(format!("run-{id}.html")),
            Err(_) => return,
        },
        (HtmlReport::Default, None) => {
            eprintln!("no HTML report: the run is not in the history; give --html FILE for one");
            return;
        }
    };
    let text = Html {
        run: run_id.unwrap_or(0),
    }
    .export(report);
    let written = path
        .parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&path, text));
    match (written, run_id) {
        (Ok(()), Some(id)) => eprintln!("run {id}: HTML report in {}", path.display()),
        (Ok(()), None) => eprintln!("HTML report in {}", path.display()),
        (Err(e), _) => eprintln!(
            "warning: the HTML report was not written to {}: {e}",
            path.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::Read;
    use crate::plan::CaseFile;
    use crate::result::Subsystem;

    /// A cgroup that allows less than MemAvailable lowers what the run may take, and says
    /// from where; one that allows more, or none, leaves MemAvailable.
    #[test]
    fn a_memory_cgroup_below_memavailable_lowers_what_a_run_may_take() {
        let mut memory = Context::fixture().host.memory;
        memory.available_bytes = 20 << 30;
        let limit = |bytes| Some(Read::new(bytes, "g/memory.limit_in_bytes less g/usage"));
        let mut same = memory.clone();
        limit_to_cgroup(&mut same, limit(30 << 30));
        limit_to_cgroup(&mut same, None);
        assert_eq!(
            (same.available_bytes, same.available_source),
            (20 << 30, None)
        );
        limit_to_cgroup(&mut memory, limit(300 << 20));
        assert_eq!(memory.available_bytes, 300 << 20);
        let source = memory.available_source.unwrap();
        assert!(
            source.starts_with("g/memory.limit_in_bytes less g/usage")
                && source.contains("MemAvailable is 20 GiB"),
            "{source}"
        );
    }

    /// A case that hands back a file at `path`.
    struct Drawing {
        path: PathBuf,
    }

    impl Case for Drawing {
        fn spec(&self) -> CaseSpec {
            CaseSpec {
                id: "drawing".into(),
                label: "a case that draws".into(),
                subsystem: Subsystem::Roofline,
                op: "model".into(),
                params: Default::default(),
            }
        }

        fn estimate(&self, _: &Context) -> std::time::Duration {
            std::time::Duration::ZERO
        }

        fn run(&self, ctx: &Context) -> Result<BenchResult> {
            let measured =
                self.spec()
                    .measured(&ctx.host.hostname, "x", "1", "nothing".into(), vec![1.0])?;
            Ok(measured.finish())
        }

        fn files(&self, _: &BenchResult) -> Result<Vec<CaseFile>> {
            Ok(vec![CaseFile {
                flag: "--svg",
                path: self.path.clone(),
                bytes: b"<svg/>".to_vec(),
            }])
        }
    }

    /// The session writes what a case hands back; a file it cannot write fails the case with
    /// the flag that named it.
    #[test]
    fn the_files_a_case_hands_back_are_written_and_a_failed_write_names_the_flag() {
        let ctx = Context::fixture();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chart.svg");
        run_case(Box::new(Drawing { path: path.clone() }), &ctx).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"<svg/>");
        let nowhere = dir.path().join("gone").join("chart.svg");
        let error = run_case(
            Box::new(Drawing {
                path: nowhere.clone(),
            }),
            &ctx,
        )
        .unwrap_err();
        let expected = format!("--svg: cannot write {}: ", nowhere.display());
        assert!(format!("{error:#}").starts_with(&expected), "{error:#}");
    }
}
