//! Runs a plan of cases one after another and keeps the results document up to date.
//!
//! A subsystem turns its validated options into a list of [`Case`]s up front (so the plan can
//! be printed with `--dry-run`), and the session runs them: a progress bar with ETA on stderr
//! (hidden when stderr is not a terminal), the output file rewritten after every case, Ctrl-C
//! honoured between and within cases, and the results so far kept whatever happens.

use std::time::Duration;

use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use crate::interrupt;
use crate::peak::Peaks;
use crate::report::{Format, OutputFile};
use crate::result::{BenchResult, Report, RunStatus, SCHEMA_VERSION, Tool, now_rfc3339};
use crate::runner::RunSettings;
use crate::sysinfo::SysInfo;
use crate::units::format_duration;

/// What every case may use: the machine, its peaks and the runner's settings.
pub struct Context {
    pub host: SysInfo,
    pub peaks: Peaks,
    /// Repetitions, warm-up and pinning (threads and stop are per case).
    pub runner: RunnerDefaults,
}

/// The runner settings chosen on the command line, common to all cases.
#[derive(Clone, Debug, Serialize)]
pub struct RunnerDefaults {
    pub repetitions: u32,
    pub warmup: Duration,
    pub pin: bool,
    /// Run the standard tool of the field next to each case (`--reference`).
    pub reference: bool,
}

impl RunnerDefaults {
    pub fn settings(&self, threads: usize, stop: crate::runner::Stop) -> RunSettings {
        RunSettings {
            threads,
            stop,
            scaling: crate::runner::Scaling::Strong,
            repetitions: self.repetitions,
            warmup: self.warmup,
            pin: self.pin,
            watch: None,
        }
    }
}

/// One concrete experiment of a plan.
pub trait Case {
    /// Stable id: the same parameters give the same id in every run.
    fn id(&self) -> String;
    /// A one-line description for plans and progress.
    fn label(&self) -> String;
    /// Expected duration, warm-up and repetitions included.
    fn estimate(&self, ctx: &Context) -> Duration;
    /// Measures the case.
    fn run(&self, ctx: &Context) -> Result<BenchResult>;
}

/// How a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Complete,
    Interrupted,
}

/// The planned cases, printed by `--dry-run`.
#[derive(Serialize)]
struct PlannedCase {
    id: String,
    label: String,
    estimate_s: f64,
}

/// Prints the plan and its estimated duration.
pub fn print_plan(cases: &[Box<dyn Case>], ctx: &Context, json: bool) {
    let planned: Vec<PlannedCase> = cases
        .iter()
        .map(|c| PlannedCase {
            id: c.id(),
            label: c.label(),
            estimate_s: c.estimate(ctx).as_secs_f64(),
        })
        .collect();
    let total: f64 = planned.iter().map(|p| p.estimate_s).sum();
    if json {
        let doc = serde_json::json!({ "cases": planned, "estimate_s": total });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).expect("plan serialises")
        );
        return;
    }
    println!(
        "{} cases, estimated {}:",
        planned.len(),
        format_duration(Duration::from_secs_f64(total))
    );
    for p in &planned {
        println!(
            "  {:<48} {:>10}  {}",
            p.label,
            format_duration(Duration::from_secs_f64(p.estimate_s)),
            p.id
        );
    }
}

/// A run in progress: the document and where it is written.
pub struct Session {
    pub report: Report,
    output: Option<OutputFile>,
}

impl Session {
    /// Starts a document; the output file, if any, is written at once with no results.
    pub fn start(
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
        };
        let session = Session { report, output };
        session.save()?;
        Ok(session)
    }

    fn save(&self) -> Result<()> {
        match &self.output {
            Some(file) => file.write(&self.report),
            None => Ok(()),
        }
    }

    /// Runs every case in order. A failing case stops the run with its error after the
    /// results so far are saved; an interrupt stops it the same way with `Ending::Interrupted`.
    pub fn run(&mut self, cases: &[Box<dyn Case>], ctx: &Context) -> Result<Ending> {
        let estimates: Vec<u64> = cases
            .iter()
            .map(|c| c.estimate(ctx).as_millis().max(1) as u64)
            .collect();
        let progress = ProgressBar::with_draw_target(
            Some(estimates.iter().sum()),
            indicatif::ProgressDrawTarget::stderr(),
        );
        progress.set_style(
            ProgressStyle::with_template("{bar:30} {percent:>3}% ETA {eta:>4} {wide_msg}")
                .expect("valid template"),
        );
        let mut ending = Ending::Complete;
        for (case, estimate) in cases.iter().zip(estimates) {
            if interrupt::requested() {
                ending = Ending::Interrupted;
                break;
            }
            progress.set_message(case.label());
            match case.run(ctx) {
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
                    return Err(error.context(format!("case {}", case.label())));
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

    fn finish(&mut self, status: RunStatus) -> Result<()> {
        self.report.status = status;
        self.report.finished_at = Some(now_rfc3339());
        self.save()
    }

    /// Prints the document on stdout in `format`.
    pub fn print(&self, format: Format) -> Result<()> {
        use std::io::Write;
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(&format.render(&self.report))?;
        stdout.flush()?;
        Ok(())
    }

    pub fn output_path(&self) -> Option<&std::path::Path> {
        self.output.as_ref().map(|o| o.path())
    }
}
