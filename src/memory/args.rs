//! The flags of `peakbench mem` and `peakbench mem latency`.

use std::time::Duration;

use clap::Args;

use super::loaded::LoadOp;
use super::op::MemOp;
use crate::options::{
    Defaults, OrAll, Threads, Timing, duration, or_all, positive_count, positive_size, thread_count,
};

/// The defaults of `mem`: 1 and every CPU; a repetition of 300 ms, tens of passes over a
/// working set of 1 GiB at DRAM speed.
#[derive(Debug, Clone)]
pub(crate) struct MemDefaults;

impl Defaults for MemDefaults {
    const DURATION: &'static str = "300ms";
}

/// The defaults of `mem latency`: one chasing thread; 100 ms per working set, millions of
/// dependent loads even at DRAM latency, over a curve of some twenty sizes.
#[derive(Debug, Clone)]
pub(crate) struct LatencyDefaults;

impl Defaults for LatencyDefaults {
    const DURATION: &'static str = "100ms";
}

#[derive(Args, Debug)]
pub(crate) struct MemArgs {
    /// Operations (list)
    #[arg(long, value_name = "LIST", value_delimiter = ',', ignore_case = true, value_parser = or_all::<MemOp>(), default_value = "read,write,copy,randread,stream-copy,stream-triad")]
    pub op: Vec<OrAll<MemOp>>,
    /// Bytes per access (list, e.g. 1B,8B,1KB,8KB,1MB,80MB); default 1 MiB sequential, 64 B random
    #[arg(long, short = 'b', value_name = "LIST", value_delimiter = ',', value_parser = positive_size)]
    pub block: Option<Vec<u64>>,
    #[command(flatten)]
    pub threads: Threads<MemDefaults>,
    /// Working set of all threads together (default 1 GiB, at least 4 × the last-level cache)
    #[arg(long, short = 's', value_name = "SIZE", value_parser = positive_size)]
    pub size: Option<u64>,
    /// Working set per thread instead: SIZE × the threads at each thread count, so that each
    /// thread's share stays in one cache level on a machine of any size
    #[arg(long, value_name = "SIZE", value_parser = positive_size, conflicts_with = "size")]
    pub size_per_thread: Option<u64>,
    /// Non-temporal (streaming) stores for write, copy and the STREAM kernels
    #[arg(long)]
    pub nt: bool,
    #[command(flatten)]
    pub timing: Timing<MemDefaults>,
    /// Size-based instead: bytes counted (by the stated rule) of all threads in one repetition
    #[arg(long, value_name = "SIZE", value_parser = positive_size, conflicts_with_all = ["ops", "duration"])]
    pub bytes: Option<u64>,
    /// Count-based instead: accesses (STREAM: elements) of all threads in one repetition
    #[arg(long, value_name = "N", value_parser = positive_count, conflicts_with = "duration")]
    pub ops: Option<u64>,
}

#[derive(Args, Debug)]
pub(crate) struct LatencyArgs {
    /// Working-set sizes (list; default powers of two from 4 KiB to 1 GiB)
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = positive_size)]
    pub sizes: Option<Vec<u64>>,
    /// Ask for transparent huge pages (madvise); without it 4 KiB pages are asked for
    #[arg(long)]
    pub huge_pages: bool,
    #[command(flatten)]
    pub timing: Timing<LatencyDefaults>,
    /// Loaded latency: N other threads stream over buffers of their own while the chase runs
    /// (default working set 256 MiB)
    #[arg(long, value_name = "N", value_parser = thread_count)]
    pub load_threads: Option<usize>,
    /// What the load threads do: read, write or copy
    #[arg(
        long,
        value_enum,
        ignore_case = true,
        default_value = "read",
        requires = "load_threads"
    )]
    pub load_op: LoadOp,
    /// Pauses of each load thread after each 64 KiB chunk, one load level each (list; 0 =
    /// unpaced); the no-load level is always measured first
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = duration, requires = "load_threads")]
    pub load_pace: Option<Vec<Duration>>,
    /// Buffer of each load thread (default 256 MiB, at least 128 KiB)
    #[arg(long, value_name = "SIZE", value_parser = positive_size, requires = "load_threads")]
    pub load_size: Option<u64>,
}

#[derive(Args, Debug)]
pub(crate) struct C2cArgs {
    /// How the line goes back and forth: cas (a compare-and-swap each way, as
    /// core-to-core-latency's default) or store (a store each way, seen by loads)
    #[arg(long, value_enum, ignore_case = true, default_value = "cas")]
    pub mode: crate::sysinfo::c2c::C2cMode,
    /// CPUs to measure (a kernel CPU list, e.g. 0-3,8; default every CPU this process may use)
    #[arg(long, value_name = "LIST", value_parser = cpu_list)]
    pub cpus: Option<CpuList>,
    /// Time for the whole matrix, all repetitions: each pair gets budget / (repetitions ×
    /// pairs), at most 20 ms and at least 2 ms, and past --max-pairs the pairs are sampled
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = crate::options::positive_duration)]
    pub budget: Duration,
    /// Most pairs measured per repetition; more are sampled (each CPU with its neighbours, the
    /// CPU half the list away, and random partners)
    #[arg(long, value_name = "N", default_value = "1024", value_parser = positive_count)]
    pub max_pairs: u64,
    /// Also write the heat map as a standalone SVG file
    #[arg(long, value_name = "FILE")]
    pub svg: Option<std::path::PathBuf>,
}

/// CPUs given as a kernel CPU list, in order, without repeats (one value for clap, not a list
/// of values).
#[derive(Clone, Debug)]
pub(crate) struct CpuList(pub Vec<usize>);

/// A kernel CPU list ("0-3,8"), at least two CPUs.
fn cpu_list(text: &str) -> Result<CpuList, String> {
    let cpus = crate::sysinfo::parse_cpu_list(text);
    if cpus.len() < 2 {
        return Err(format!(
            "'{text}' names fewer than 2 CPUs: give a list such as 0-3 or 0,2"
        ));
    }
    Ok(CpuList(cpus))
}
