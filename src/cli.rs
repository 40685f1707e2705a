//! Command-line definitions (clap). Values are parsed into domain types here, with one-line
//! errors that name the fix; `options.rs` then checks what needs more than one flag.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::peak::{Isa, Precision};
use crate::units::{UnitError, parse_count, parse_duration, parse_list, parse_size};

#[derive(Parser, Debug)]
#[command(
    name = "peakbench",
    version,
    about = "How close this machine comes to the peak of its CPU, memory, disk and network",
    after_help = "Exit codes: 0 done, 1 a measurement failed, 2 bad input, 130 interrupted (results so far kept).\n\
                  Sizes: KB, MB, GB are powers of 1000; KiB, MiB, GiB powers of 1024; a bare number is bytes."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// The machine's inventory and theoretical peaks, each value with its source
    Sysinfo(SysinfoArgs),
    /// CPU throughput (GFLOP/s, GIOP/s) per precision, ISA and thread count; `cpu linpack`
    Cpu(Box<CpuArgs>),
    /// Memory bandwidth (GB/s) per operation, block size and thread count, STREAM kernels; `mem latency`
    Mem(Box<crate::memory::args::MemArgs>),
    /// Network throughput (Mb/s) and round-trip time over TCP and UDP; `net serve` is the server
    Net(Box<crate::net::NetArgs>),
    /// Disk throughput, IOPS and latency per op, block size, threads and queue depth, next to fio
    Disk(Box<crate::disk::DiskArgs>),
    /// Runs a preset of every benchmark peakbench has
    Run(RunArgs),
    #[command(flatten)]
    History(crate::history::HistoryCommand),
}

#[derive(Args, Debug)]
pub struct SysinfoArgs {
    /// Print one JSON document instead of the table
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub peak: PeakArgs,
}

/// Factors of the theoretical peaks that the machine does not tell (or tells wrongly).
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Peak factors")]
pub struct PeakArgs {
    /// Nominal CPU clock in GHz for the peak (e.g. 2.5)
    #[arg(long, allow_negative_numbers = true, value_name = "GHZ", value_parser = positive_f64)]
    pub cpu_ghz: Option<f64>,
    /// Physical cores for the peak
    #[arg(long, allow_negative_numbers = true, value_name = "N", value_parser = positive_u32)]
    pub cores: Option<u32>,
    /// FMA units per core at the widest vector ISA (e.g. 2 on a Xeon Platinum)
    #[arg(long, allow_negative_numbers = true, value_name = "N", value_parser = positive_f64)]
    pub fma_units: Option<f64>,
    /// Populated memory channels
    #[arg(long, allow_negative_numbers = true, value_name = "N", value_parser = positive_u32)]
    pub mem_channels: Option<u32>,
    /// Memory transfer rate in MT/s (e.g. 3200 for DDR4-3200)
    #[arg(long, allow_negative_numbers = true, value_name = "MTS", value_parser = positive_u32)]
    pub mem_mts: Option<u32>,
    /// NIC link speed in Gb/s
    #[arg(long, allow_negative_numbers = true, value_name = "GBPS", value_parser = positive_f64)]
    pub nic_gbps: Option<f64>,
    /// Rated disk throughput in MB/s
    #[arg(long, allow_negative_numbers = true, value_name = "MBPS", value_parser = positive_f64)]
    pub disk_mbps: Option<f64>,
    /// Rated disk IOPS
    #[arg(long, allow_negative_numbers = true, value_name = "IOPS", value_parser = positive_f64)]
    pub disk_iops: Option<f64>,
}

/// How results are shown and kept.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Output")]
pub struct OutputArgs {
    /// Print one JSON document on stdout (and nothing else there)
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV on stdout, one row per result
    #[arg(long)]
    pub csv: bool,
    /// Also write the results to FILE (.json, .csv, .md or .txt), rewritten after every case
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Print the plan and its estimated duration, run nothing
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub history: crate::history::StoreArgs,
}

/// How each case is repeated.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Repetitions")]
pub struct RunnerArgs {
    /// Measured repetitions per case (the value is their median)
    #[arg(long, short = 'r', default_value = "3", value_name = "N", value_parser = positive_u32)]
    pub repetitions: u32,
    /// Unmeasured warm-up before the repetitions (0 to skip)
    #[arg(long, default_value = "200ms", value_name = "DURATION", value_parser = duration)]
    pub warmup: Duration,
    /// Pin thread i to the i-th CPU
    #[arg(long)]
    pub pin: bool,
    /// Also run the standard tool of the field on each case (when installed) and record its value and the ratio
    #[arg(long)]
    pub reference: bool,
}

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct CpuArgs {
    #[command(subcommand)]
    pub command: Option<CpuCommand>,
    /// Precisions: i8, i16, i32, i64, f16, f32, f64; QP, HP, SP, DP are 8, 16, 32, 64 bit (integer and float)
    #[arg(long, short = 'p', value_name = "LIST", default_value = "f64,f32,i64,i32,i16,i8", value_parser = precision_list)]
    pub precision: PrecisionList,
    /// ISAs: scalar, sse, avx2, avx512, auto (the widest this CPU has), all (every one it has)
    #[arg(long, value_name = "LIST", default_value = "auto", value_parser = isa_list)]
    pub isa: IsaList,
    /// Floating-point kernels with fused multiply-add, without (separate adds and multiplies), or both
    #[arg(long, value_enum, default_value = "yes")]
    pub fma: FmaChoice,
    /// Thread counts (default: 1 and every CPU)
    #[arg(long, short = 't', value_name = "LIST", value_parser = thread_list)]
    pub threads: Option<ThreadList>,
    /// strong: a fixed total of work split among threads; weak: the same work per thread
    #[arg(long, value_enum, default_value = "strong")]
    pub scaling: ScalingChoice,
    /// Work of one repetition in ops (total for strong, per thread for weak), e.g. 100G
    #[arg(long, value_name = "COUNT", value_parser = positive_count)]
    pub ops: Option<u64>,
    /// Size the work so that one thread needs about this long per repetition
    #[arg(long, short = 'd', default_value = "1s", value_name = "DURATION", value_parser = positive_duration)]
    pub duration: Duration,
    /// Sampling run: record this many samples with all threads busy (e.g. 600)
    #[arg(long, value_name = "N", value_parser = positive_u32)]
    pub samples: Option<u32>,
    /// Length of one sample of a sampling run
    #[arg(long, default_value = "1s", value_name = "DURATION", value_parser = positive_duration, requires = "samples")]
    pub interval: Duration,
    #[command(flatten)]
    pub runner: RunnerArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub peak: PeakArgs,
}

#[derive(Subcommand, Debug)]
pub enum CpuCommand {
    /// Dense LU solve with partial pivoting (faer), GFLOP/s and HPL's residual check
    Linpack(LinpackArgs),
}

#[derive(Args, Debug)]
pub struct LinpackArgs {
    /// Orders of the system (list), e.g. 1000,5000,10000
    #[arg(long, short = 'n', value_name = "LIST", default_value = "2000", value_parser = order_list)]
    pub n: OrderList,
    /// Thread counts (default: every CPU)
    #[arg(long, short = 't', value_name = "LIST", value_parser = thread_list)]
    pub threads: Option<ThreadList>,
    #[command(flatten)]
    pub runner: RunnerArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub peak: PeakArgs,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// quick: every subsystem in about a minute; standard: the users' whole matrix; full: every size, hours
    #[arg(long, value_enum, conflicts_with = "config")]
    pub preset: Option<Preset>,
    /// A TOML file of experiments, one table per subcommand run (see presets/standard.toml)
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Write the HTML report here (default: next to the history, reports/run-<id>.html)
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Run the network tables against this 'peakbench net serve' (default: one on loopback)
    #[arg(long, value_name = "HOST[:PORT]")]
    pub server: Option<String>,
    /// Directory for the disk tables' test file (default: each table's own, else the current one)
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    #[command(flatten)]
    pub runner: RunnerArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub peak: PeakArgs,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    Quick,
    Standard,
    Full,
}

impl Preset {
    pub fn name(self) -> &'static str {
        match self {
            Preset::Quick => "quick",
            Preset::Standard => "standard",
            Preset::Full => "full",
        }
    }
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FmaChoice {
    Yes,
    No,
    Both,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScalingChoice {
    Strong,
    Weak,
}

/// Precisions as listed (clap needs a named type to keep a Vec from a parser).
#[derive(Clone, Debug)]
pub struct PrecisionList(pub Vec<Precision>);

/// ISAs as listed; `None` is `auto`, and `all` expands later to what the CPU has.
#[derive(Clone, Debug)]
pub struct IsaList(pub Vec<IsaItem>);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IsaItem {
    One(Isa),
    Auto,
    All,
}

fn unit(result: Result<u64, UnitError>) -> Result<u64, String> {
    result.map_err(|e| e.0)
}

fn duration(text: &str) -> Result<Duration, String> {
    parse_duration(text).map_err(|e| e.0)
}

fn positive_duration(text: &str) -> Result<Duration, String> {
    let d = duration(text)?;
    if d.is_zero() {
        return Err("a zero duration measures nothing: give e.g. 1s or 500ms".into());
    }
    Ok(d)
}

fn positive_count(text: &str) -> Result<u64, String> {
    match unit(parse_count(text))? {
        0 => Err("0 is not enough work: give a positive count, e.g. 10G".into()),
        n => Ok(n),
    }
}

pub(crate) fn positive_u32(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(0) | Err(_) => Err(format!(
            "'{text}' is not a positive whole number: give e.g. 3"
        )),
        Ok(n) => Ok(n),
    }
}

fn positive_f64(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("'{text}' is not a positive number: give e.g. 2.5")),
    }
}

/// Thread counts as listed (a named type, so that clap keeps the list as one value).
#[derive(Clone, Debug)]
pub struct ThreadList(pub Vec<usize>);

/// Orders of linear systems as listed.
#[derive(Clone, Debug)]
pub struct OrderList(pub Vec<u64>);

/// A comma-separated list of thread counts, each at least 1.
pub fn thread_list(text: &str) -> Result<ThreadList, String> {
    let counts = parse_list(text, parse_count).map_err(|e| e.0)?;
    if counts.contains(&0) {
        return Err("0 threads run nothing: give 1 or more, e.g. 1,2,4,8".into());
    }
    if let Some(big) = counts.iter().find(|&&c| c > 4096) {
        return Err(format!(
            "{big} threads is more than peakbench runs (4096): give fewer"
        ));
    }
    Ok(ThreadList(counts.into_iter().map(|c| c as usize).collect()))
}

fn order_list(text: &str) -> Result<OrderList, String> {
    let orders = parse_list(text, parse_count).map_err(|e| e.0)?;
    if orders.contains(&0) {
        return Err("an order of 0 is no system: give e.g. 1000,5000".into());
    }
    Ok(OrderList(orders))
}

/// A comma-separated list of sizes, each at least 1 byte (used by the memory and disk sweeps).
pub fn size_list(text: &str) -> Result<Vec<u64>, String> {
    let sizes = parse_list(text, parse_size).map_err(|e| e.0)?;
    if sizes.contains(&0) {
        return Err("a size of 0 moves nothing: give e.g. 8B,8KB,8MB".into());
    }
    Ok(sizes)
}

fn precision_list(text: &str) -> Result<PrecisionList, String> {
    let mut list = Vec::new();
    for item in text.split(',') {
        let found: &[Precision] = match item.trim().to_ascii_lowercase().as_str() {
            "i8" => &[Precision::I8],
            "i16" => &[Precision::I16],
            "i32" => &[Precision::I32],
            "i64" => &[Precision::I64],
            "f16" => &[Precision::F16],
            "f32" => &[Precision::F32],
            "f64" => &[Precision::F64],
            "qp" => &[Precision::I8],
            "hp" => &[Precision::F16, Precision::I16],
            "sp" => &[Precision::F32, Precision::I32],
            "dp" => &[Precision::F64, Precision::I64],
            other => {
                return Err(format!(
                    "'{other}' is not a precision: use i8, i16, i32, i64, f16, f32, f64 or QP, HP, SP, DP"
                ));
            }
        };
        for p in found {
            if !list.contains(p) {
                list.push(*p);
            }
        }
    }
    Ok(PrecisionList(list))
}

fn isa_list(text: &str) -> Result<IsaList, String> {
    text.split(',')
        .map(|item| match item.trim().to_ascii_lowercase().as_str() {
            "scalar" => Ok(IsaItem::One(Isa::Scalar)),
            "sse" | "sse2" => Ok(IsaItem::One(Isa::Sse)),
            "avx2" | "avx" => Ok(IsaItem::One(Isa::Avx2)),
            "avx512" => Ok(IsaItem::One(Isa::Avx512)),
            "auto" => Ok(IsaItem::Auto),
            "all" => Ok(IsaItem::All),
            other => Err(format!(
                "'{other}' is not an ISA: use scalar, sse, avx2, avx512, auto or all"
            )),
        })
        .collect::<Result<_, _>>()
        .map(IsaList)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn aliases_expand_to_integer_and_float() {
        let PrecisionList(list) = precision_list("DP,QP").unwrap();
        assert_eq!(list, vec![Precision::F64, Precision::I64, Precision::I8]);
        assert!(precision_list("f128").is_err());
    }

    #[test]
    fn thread_lists_reject_zero() {
        assert_eq!(thread_list("1,2,4,8").unwrap().0, vec![1, 2, 4, 8]);
        assert!(thread_list("0").unwrap_err().contains("0 threads"));
        assert!(thread_list("1,,2").is_err());
    }
}
