//! The commands: validated options in, a plan of cases, a session that runs it, output out.

use std::process::ExitCode;

use anyhow::Result;

use crate::cli::{
    Cli, Command, CpuArgs, CpuCommand, FmaChoice, IsaItem, LinpackArgs, OutputArgs, PeakArgs,
    Preset, RunArgs, RunnerArgs, ScalingChoice, SysinfoArgs, ThreadList,
};
use crate::config;
use crate::cpu::{self, CpuOptions, linpack::LinpackCase};
use crate::peak::{PeakOverrides, Peaks};
use crate::report::{Format, OutputFile};
use crate::result::{SCHEMA_VERSION, Tool};
use crate::runner::{Scaling, num_cpus};
use crate::session::{Case, Context, Ending, RunnerDefaults, Session, print_plan};

/// Bad input found after parsing: exit code 2, one line naming the flag and the fix.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

pub fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Sysinfo(args) => sysinfo(&args),
        Command::Cpu(args) => match &args.command {
            Some(CpuCommand::Linpack(linpack)) => linpack_command(linpack),
            None => cpu_command(&args),
        },
        Command::Mem(args) => crate::memory::args::command(&args),
        Command::Run(args) => run_matrix(&args),
        Command::History(command) => crate::history::run(&command),
        Command::Net(args) => crate::net::command(&args),
        Command::Disk(args) => crate::disk::command(&args),
    }
}

fn overrides(args: &PeakArgs) -> PeakOverrides {
    PeakOverrides {
        cpu_ghz: args.cpu_ghz,
        cores: args.cores,
        fma_units: args.fma_units,
        mem_channels: args.mem_channels,
        mem_mts: args.mem_mts,
        nic_gbps: args.nic_gbps,
        disk_mbps: args.disk_mbps,
        disk_iops: args.disk_iops,
    }
}

pub(crate) fn context(peak: &PeakArgs, runner: &RunnerArgs) -> Context {
    let host = crate::sysinfo::collect();
    let peaks = Peaks::compute(&host, &overrides(peak), &cpu::probe());
    Context {
        host,
        peaks,
        runner: RunnerDefaults {
            repetitions: runner.repetitions,
            warmup: runner.warmup,
            pin: runner.pin,
            reference: runner.reference,
        },
    }
}

fn sysinfo(args: &SysinfoArgs) -> Result<ExitCode> {
    let host = crate::sysinfo::collect();
    let peaks = Peaks::compute(&host, &overrides(&args.peak), &cpu::probe());
    if args.json {
        let doc = serde_json::json!({
            "schema_version": SCHEMA_VERSION,
            "tool": Tool::this(),
            "host": host,
            "peaks": peaks,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", crate::sysinfo::render(&host));
        print!("{}", crate::peak::render(&peaks));
    }
    Ok(ExitCode::SUCCESS)
}

fn threads_or_default(threads: &Option<ThreadList>, default: Vec<usize>) -> Vec<usize> {
    let mut list = threads.as_ref().map_or(default, |t| t.0.clone());
    list.dedup();
    list
}

/// A subcommand's cases, the notes on what it left out, and its configuration for the record.
pub(crate) struct Planned {
    pub cases: Vec<Box<dyn Case>>,
    pub notes: Vec<String>,
    pub config: serde_json::Value,
}

fn cpu_command(args: &CpuArgs) -> Result<ExitCode> {
    let ctx = context(&args.peak, &args.runner);
    let planned = cpu_cases(args, &ctx)?;
    let config = serde_json::json!({ "cpu": planned.config, "runner": ctx.runner });
    execute(planned.cases, &ctx, &args.output, config, planned.notes)
}

fn cpu_cases(args: &CpuArgs, ctx: &Context) -> Result<Planned> {
    let available = crate::peak::isas_of(&ctx.host);
    let mut isas = Vec::new();
    for item in &args.isa.0 {
        match item {
            IsaItem::One(isa) => isas.push(Some(*isa)),
            IsaItem::Auto => isas.push(None),
            IsaItem::All => isas.extend(available.iter().map(|i| Some(*i))),
        }
    }
    let options = CpuOptions {
        precisions: args.precision.0.clone(),
        isas,
        fma: match args.fma {
            FmaChoice::Yes => vec![true],
            FmaChoice::No => vec![false],
            FmaChoice::Both => vec![true, false],
        },
        threads: threads_or_default(&args.threads, default_threads()),
        scaling: match args.scaling {
            ScalingChoice::Strong => Scaling::Strong,
            ScalingChoice::Weak => Scaling::Weak,
        },
        ops: args.ops,
        duration: args.duration,
        samples: args.samples.map(|n| (n, args.interval)),
    };
    let (cases, notes) = cpu::plan(&options, ctx);
    if cases.is_empty() {
        return Err(UsageError(format!(
            "--precision/--isa: nothing this CPU can run ({}); see 'peakbench sysinfo' for its ISAs",
            notes.join("; ")
        ))
        .into());
    }
    Ok(Planned {
        cases,
        notes,
        config: serde_json::to_value(&options)?,
    })
}

fn linpack_command(args: &LinpackArgs) -> Result<ExitCode> {
    let ctx = context(&args.peak, &args.runner);
    let planned = linpack_cases(args, &ctx)?;
    let config = serde_json::json!({ "linpack": planned.config, "runner": ctx.runner });
    execute(planned.cases, &ctx, &args.output, config, planned.notes)
}

fn linpack_cases(args: &LinpackArgs, ctx: &Context) -> Result<Planned> {
    let threads = threads_or_default(&args.threads, vec![num_cpus()]);
    let mut cases: Vec<Box<dyn Case>> = Vec::new();
    for &n in &args.n.0 {
        let needed = cpu::linpack::memory_needed(n);
        if needed > ctx.host.memory.available_bytes && ctx.host.memory.available_bytes > 0 {
            return Err(UsageError(format!(
                "--n: {n} needs {} of memory and {} is available: give a smaller order",
                crate::units::format_size_approx(needed),
                crate::units::format_size_approx(ctx.host.memory.available_bytes)
            ))
            .into());
        }
        for &t in &threads {
            cases.push(Box::new(LinpackCase { n, threads: t }));
        }
    }
    Ok(Planned {
        cases,
        notes: Vec::new(),
        config: serde_json::json!({ "n": args.n.0, "threads": threads }),
    })
}

/// The cases of one subcommand parsed from a config table.
fn plan_command(command: &Command, ctx: &Context) -> Result<Planned> {
    match command {
        Command::Cpu(args) => match &args.command {
            Some(CpuCommand::Linpack(linpack)) => linpack_cases(linpack, ctx),
            None => cpu_cases(args, ctx),
        },
        Command::Mem(args) => crate::memory::args::cases(args, ctx),
        Command::Net(args) => crate::net::cases(args, ctx),
        Command::Disk(args) => crate::disk::cases(args, ctx),
        Command::Sysinfo(_) | Command::Run(_) | Command::History(_) => {
            anyhow::bail!("this subcommand measures nothing and cannot be part of a run")
        }
    }
}

/// `peakbench run`: every table of a preset or config file, in one session.
fn run_matrix(args: &RunArgs) -> Result<ExitCode> {
    let (origin, entries) = match &args.config {
        Some(path) => (format!("--config {}", path.display()), config::load(path)?),
        None => {
            let name = args.preset.unwrap_or(Preset::Quick).name();
            let text = config::preset_text(name).expect("every preset has a config");
            (format!("preset {name}"), config::parse(text, name)?)
        }
    };
    // Run-wide targets apply to every table that does not name its own.
    let mut entries = entries;
    for entry in &mut entries {
        let target = match entry.section.as_str() {
            "net" => args.server.as_ref().map(|s| ("server", s.clone())),
            "disk" => args.dir.as_ref().map(|d| ("dir", d.display().to_string())),
            _ => None,
        };
        if let Some((flag, value)) = target
            && !entry
                .argv
                .iter()
                .any(|a| a.starts_with(&format!("--{flag}=")))
        {
            entry.argv.push(format!("--{flag}={value}"));
        }
    }
    // Every table is checked before anything is measured: a typo costs nothing.
    let commands = entries
        .iter()
        .map(|entry| config::parse_entry(entry, &origin))
        .collect::<Result<Vec<_>, _>>()?;
    let ctx = context(&args.peak, &args.runner);
    let mut cases: Vec<Box<dyn Case>> = Vec::new();
    let mut notes = Vec::new();
    let mut experiments = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (entry, command) in entries.iter().zip(&commands) {
        let planned = match plan_command(command, &ctx) {
            Ok(planned) => planned,
            Err(e) => {
                // A subsystem that cannot run here (no space, no server) is skipped, not fatal.
                notes.push(format!("{} skipped: {e:#}", entry.name()));
                continue;
            }
        };
        notes.extend(
            planned
                .notes
                .into_iter()
                .map(|n| format!("{}: {n}", entry.name())),
        );
        let before = cases.len();
        // Two tables may ask for the same case; it is measured once.
        cases.extend(planned.cases.into_iter().filter(|c| seen.insert(c.id())));
        experiments.push(serde_json::json!({
            "table": entry.name(),
            "argv": entry.argv[1..],
            "options": planned.config,
            "cases": cases.len() - before,
        }));
    }
    if cases.is_empty() {
        return Err(UsageError(format!("{origin}: nothing to run: {}", notes.join("; "))).into());
    }
    let mut config = serde_json::json!({ "experiments": experiments, "runner": ctx.runner });
    match &args.config {
        Some(path) => config["config"] = path.display().to_string().into(),
        None => config["preset"] = args.preset.unwrap_or(Preset::Quick).name().into(),
    }
    let html = match &args.html {
        Some(path) => HtmlReport::At(path.clone()),
        None => HtmlReport::Default,
    };
    execute_with_report(cases, &ctx, &args.output, config, notes, html)
}

/// Writes the run's HTML report and names it, with the run id, as the last line on stderr.
/// A report that cannot be written is a warning: the results are already printed and stored.
fn write_html_report(
    html: &HtmlReport,
    run_id: Option<i64>,
    report: &crate::result::Report,
    output: &OutputArgs,
) {
    let path = match (html, run_id) {
        (HtmlReport::None, _) => return,
        (HtmlReport::At(path), _) => path.clone(),
        (HtmlReport::Default, Some(id)) => match crate::history::db_path(&output.history.db) {
            Ok(db) => db
                .parent()
                .unwrap_or(std::path::Path::new("."))
                .join("reports")
                .join(format!("run-{id}.html")),
            Err(_) => return,
        },
        (HtmlReport::Default, None) => {
            eprintln!("no HTML report: the run is not in the history; give --html FILE for one");
            return;
        }
    };
    let text = crate::report::html::render(run_id.unwrap_or(0), report);
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

/// 1 and every CPU.
fn default_threads() -> Vec<usize> {
    let mut threads = vec![1, num_cpus()];
    threads.dedup();
    threads
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

fn output_file(args: &OutputArgs) -> Result<Option<OutputFile>> {
    let Some(path) = &args.output else {
        return Ok(None);
    };
    let format = Format::from_path(path).ok_or_else(|| {
        UsageError(format!(
            "--output: '{}' has no known extension: use .json, .csv, .md or .txt",
            path.display()
        ))
    })?;
    OutputFile::create(path, format)
        .map(Some)
        .map_err(|e| UsageError(format!("--output: {e:#}; choose a writable path")).into())
}

/// Where `run` writes its HTML report.
pub(crate) enum HtmlReport {
    /// Single commands write none (`peakbench report` makes one from the history).
    None,
    /// Next to the history, named after the run: `<data dir>/peakbench/reports/run-<id>.html`.
    Default,
    At(std::path::PathBuf),
}

pub(crate) fn execute(
    cases: Vec<Box<dyn Case>>,
    ctx: &Context,
    output: &OutputArgs,
    config: serde_json::Value,
    notes: Vec<String>,
) -> Result<ExitCode> {
    execute_with_report(cases, ctx, output, config, notes, HtmlReport::None)
}

fn execute_with_report(
    cases: Vec<Box<dyn Case>>,
    ctx: &Context,
    output: &OutputArgs,
    config: serde_json::Value,
    notes: Vec<String>,
    html: HtmlReport,
) -> Result<ExitCode> {
    // Notes first, so that a plan also says what it left out and why.
    for note in &notes {
        eprintln!("note: {note}");
    }
    if output.dry_run {
        print_plan(&cases, ctx, output.json);
        return Ok(ExitCode::SUCCESS);
    }
    let file = output_file(output)?;
    let mut warnings = machine_warnings(ctx);
    warnings.extend(notes);
    let mut session = Session::start(ctx, config, warnings, file)?;
    let stdout_format = if output.json {
        Format::Json
    } else if output.csv {
        Format::Csv
    } else {
        Format::Table
    };
    let outcome = session.run(&cases, ctx);
    let printed = session.print(stdout_format);
    if let Some(path) = session.output_path() {
        eprintln!("results written to {}", path.display());
    }
    let run_id = crate::history::store_run(&output.history, &session.report);
    write_html_report(&html, run_id, &session.report, output);
    printed?;
    match outcome? {
        Ending::Complete => Ok(ExitCode::SUCCESS),
        Ending::Interrupted => {
            eprintln!("interrupted: the results above are those measured before it");
            Ok(ExitCode::from(130))
        }
    }
}
