//! The commands: validated options in, a plan of cases, a session that runs it, output out.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;

use crate::cli::{
    Cli, Command, CpuArgs, CpuCommand, FmaChoice, IsaItem, LinpackArgs, OutputArgs, PeakArgs,
    Preset, RunArgs, RunnerArgs, ScalingChoice, SysinfoArgs, ThreadList,
};
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
        Command::Disk(args) => crate::disk::command(&args),
        Command::Run(args) => run_preset(&args),
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

fn cpu_command(args: &CpuArgs) -> Result<ExitCode> {
    let ctx = context(&args.peak, &args.runner);
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
    let (cases, notes) = cpu::plan(&options, &ctx);
    if cases.is_empty() {
        return Err(UsageError(format!(
            "--precision/--isa: nothing this CPU can run ({}); see 'peakbench sysinfo' for its ISAs",
            notes.join("; ")
        ))
        .into());
    }
    let config = serde_json::json!({ "cpu": options, "runner": ctx.runner });
    execute(cases, &ctx, &args.output, config, notes)
}

fn linpack_command(args: &LinpackArgs) -> Result<ExitCode> {
    let ctx = context(&args.peak, &args.runner);
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
    let config = serde_json::json!({
        "linpack": { "n": args.n.0, "threads": threads },
        "runner": ctx.runner,
    });
    execute(cases, &ctx, &args.output, config, Vec::new())
}

fn run_preset(args: &RunArgs) -> Result<ExitCode> {
    let ctx = context(&args.peak, &args.runner);
    let Preset::Quick = args.preset;
    let options = CpuOptions {
        precisions: vec![
            crate::peak::Precision::F64,
            crate::peak::Precision::F32,
            crate::peak::Precision::I32,
        ],
        isas: vec![None],
        fma: vec![true],
        threads: default_threads(),
        scaling: Scaling::Strong,
        ops: None,
        duration: Duration::from_millis(300),
        samples: None,
    };
    let (mut cases, notes) = cpu::plan(&options, &ctx);
    cases.push(Box::new(LinpackCase {
        n: 1000,
        threads: num_cpus(),
    }));
    let config = serde_json::json!({ "preset": "quick", "cpu": options, "runner": ctx.runner });
    execute(cases, &ctx, &args.output, config, notes)
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

pub(crate) fn execute(
    cases: Vec<Box<dyn Case>>,
    ctx: &Context,
    output: &OutputArgs,
    config: serde_json::Value,
    notes: Vec<String>,
) -> Result<ExitCode> {
    if output.dry_run {
        print_plan(&cases, ctx, output.json);
        return Ok(ExitCode::SUCCESS);
    }
    for note in &notes {
        eprintln!("note: {note}");
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
    session.print(stdout_format)?;
    if let Some(path) = session.output_path() {
        eprintln!("results written to {}", path.display());
    }
    match outcome? {
        Ending::Complete => Ok(ExitCode::SUCCESS),
        Ending::Interrupted => {
            eprintln!("interrupted: the results above are those measured before it");
            Ok(ExitCode::from(130))
        }
    }
}
