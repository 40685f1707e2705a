//! The command line of `peakbench mem` and `peakbench mem latency`, and the two commands.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use clap::{Args, Subcommand};

use super::latency::{self, LatencyOptions};
use super::{MemOp, MemOptions};
use crate::app::{Planned, UsageError, context, execute};
use crate::cli::{OutputArgs, PeakArgs, RunnerArgs, ThreadList, size_list, thread_list};
use crate::session::Context;
use crate::units::{parse_duration, parse_size};

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct MemArgs {
    #[command(subcommand)]
    pub command: Option<MemCommand>,
    /// Operations: read, write, copy (alias RWS), randread, randwrite, randrw (alias RWR),
    /// stream-copy, stream-scale, stream-add, stream-triad, or all
    #[arg(long, value_name = "LIST", default_value = "read,write,copy,randread,stream-copy,stream-triad", value_parser = op_list)]
    pub op: OpList,
    /// Bytes per access (list, e.g. 1B,8B,1KB,8KB,1MB,80MB); default 1 MiB sequential, 64 B random
    #[arg(long, short = 'b', value_name = "LIST", value_parser = sizes)]
    pub block: Option<SizeList>,
    /// Thread counts (default: 1 and every CPU)
    #[arg(long, short = 't', value_name = "LIST", value_parser = thread_list)]
    pub threads: Option<ThreadList>,
    /// Working set of all threads together (default 1 GiB, at least 4 × the last-level cache)
    #[arg(long, short = 's', value_name = "SIZE", value_parser = size)]
    pub size: Option<u64>,
    /// Non-temporal (streaming) stores for write, copy and the STREAM kernels
    #[arg(long)]
    pub nt: bool,
    /// Length of one repetition
    #[arg(long, short = 'd', default_value = "300ms", value_name = "DURATION", value_parser = positive_duration)]
    pub duration: Duration,
    #[command(flatten)]
    pub runner: RunnerArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub peak: PeakArgs,
}

#[derive(Subcommand, Debug)]
pub enum MemCommand {
    /// Load-to-use latency by pointer chasing, 4 KiB to 1 GiB, with the cache boundaries
    Latency(LatencyArgs),
}

#[derive(Args, Debug)]
pub struct LatencyArgs {
    /// Working-set sizes (list; default powers of two from 4 KiB to 1 GiB)
    #[arg(long, value_name = "LIST", value_parser = sizes)]
    pub sizes: Option<SizeList>,
    /// Ask for transparent huge pages (madvise); without it 4 KiB pages are asked for
    #[arg(long)]
    pub huge_pages: bool,
    /// Length of one repetition
    #[arg(long, short = 'd', default_value = "100ms", value_name = "DURATION", value_parser = positive_duration)]
    pub duration: Duration,
    #[command(flatten)]
    pub runner: RunnerArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub peak: PeakArgs,
}

/// Operations as listed.
#[derive(Clone, Debug)]
pub struct OpList(pub Vec<MemOp>);

/// Sizes as listed.
#[derive(Clone, Debug)]
pub struct SizeList(pub Vec<u64>);

fn op_list(text: &str) -> Result<OpList, String> {
    let mut ops = Vec::new();
    for item in text.split(',') {
        if item.trim().eq_ignore_ascii_case("all") {
            ops.extend(MemOp::ALL);
            continue;
        }
        let op = MemOp::parse(item).ok_or_else(|| {
            format!(
                "'{}' is not an operation: use read, write, copy, randread, randwrite, randrw, \
                 stream-copy, stream-scale, stream-add, stream-triad, RWS, RWR or all",
                item.trim()
            )
        })?;
        ops.push(op);
    }
    let mut unique = Vec::new();
    for op in ops {
        if !unique.contains(&op) {
            unique.push(op);
        }
    }
    Ok(OpList(unique))
}

fn sizes(text: &str) -> Result<SizeList, String> {
    size_list(text).map(SizeList)
}

fn size(text: &str) -> Result<u64, String> {
    match parse_size(text).map_err(|e| e.0)? {
        0 => Err("a working set of 0 bytes holds nothing: give e.g. 1GiB".into()),
        n => Ok(n),
    }
}

fn positive_duration(text: &str) -> Result<Duration, String> {
    match parse_duration(text).map_err(|e| e.0)? {
        d if d.is_zero() => Err("a zero duration measures nothing: give e.g. 300ms".into()),
        d => Ok(d),
    }
}

/// `peakbench mem` and `peakbench mem latency`.
pub fn command(args: &MemArgs) -> Result<ExitCode> {
    if let Some(MemCommand::Latency(latency)) = &args.command {
        return latency_command(latency);
    }
    let ctx = context(&args.peak, &args.runner);
    let planned = bandwidth_cases(args, &ctx)?;
    let config = serde_json::json!({ "mem": planned.config, "runner": ctx.runner });
    execute(planned.cases, &ctx, &args.output, config, planned.notes)
}

/// The cases of `mem` or `mem latency`, for `peakbench run`.
pub(crate) fn cases(args: &MemArgs, ctx: &Context) -> Result<Planned> {
    match &args.command {
        Some(MemCommand::Latency(latency)) => {
            let options = latency_options(latency, ctx)?;
            let (cases, _sweep) = latency::plan(&options, ctx)?;
            Ok(Planned {
                cases,
                notes: Vec::new(),
                config: serde_json::to_value(&options)?,
            })
        }
        None => bandwidth_cases(args, ctx),
    }
}

fn bandwidth_cases(args: &MemArgs, ctx: &Context) -> Result<Planned> {
    let mut options = MemOptions::defaults();
    options.ops = args.op.0.clone();
    options.blocks = args.block.as_ref().map(|b| b.0.clone());
    if let Some(threads) = &args.threads {
        options.threads = threads.0.clone();
        options.threads.dedup();
    }
    options.size = args.size;
    options.nt = args.nt;
    options.duration = args.duration;
    let (cases, notes) = super::plan(&options, ctx)?;
    let working_set = options.size.unwrap_or_else(|| super::default_size(ctx).0);
    let mut config = serde_json::to_value(&options)?;
    config["working_set_bytes"] = working_set.into();
    Ok(Planned {
        cases,
        notes,
        config,
    })
}

fn latency_options(args: &LatencyArgs, ctx: &Context) -> Result<LatencyOptions> {
    let mut options = LatencyOptions::defaults(ctx);
    if let Some(sizes) = &args.sizes {
        options.sizes = sizes.0.clone();
    }
    options.huge_pages = args.huge_pages;
    options.duration = args.duration;
    if options.sizes.is_empty() {
        return Err(UsageError("--sizes: no size to measure: give e.g. 4KiB,1GiB".into()).into());
    }
    Ok(options)
}

fn latency_command(args: &LatencyArgs) -> Result<ExitCode> {
    let ctx = context(&args.peak, &args.runner);
    let options = latency_options(args, &ctx)?;
    let (cases, sweep) = latency::plan(&options, &ctx)?;
    let config = serde_json::json!({ "mem_latency": options, "runner": ctx.runner });
    let code = execute(cases, &ctx, &args.output, config, Vec::new())?;
    if !args.output.dry_run {
        for line in latency::boundaries(&ctx, &sweep.curve.lock().unwrap()) {
            eprintln!("{line}");
        }
    }
    Ok(code)
}
