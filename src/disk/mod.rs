//! Disk: sequential and random reads and writes, their mix, and read-then-rewrite, at any block
//! size, thread count and queue depth, with IOPS and latency percentiles, next to fio.
//!
//! The stages: [`DiskArgs`] (clap) → [`DiskOptions`] (validated, constructible from code) →
//! [`plan`] (every op × block × threads × queue depth as a [`DiskCase`], with the target checked
//! but nothing created) → the session runs the cases. The first case to run creates and fills
//! the test file ([`file`]); every case of the plan shares it, and it is removed when the last
//! case is dropped (or kept with `--keep`).
//!
//! Counting: a repetition's bytes are block × the I/Os of all threads that completed in it
//! (reads and writes alike), divided by the repetition's wall time (earliest thread start to
//! latest thread end, fsyncs inside); MB = 10^6 bytes. IOPS are the same I/Os per second.
//! Latencies are per I/O, submission to completion, merged over threads and repetitions.

mod args;
pub mod buffer;
mod case;
pub mod device;
pub mod engine;
pub mod error;
pub mod file;
pub mod fio;
mod plan;
pub mod stamp;
mod target;

use anyhow::Result;
use serde::Serialize;

use crate::names::named_enum;
use crate::plan::{Context, Plan};
use crate::workload::Benchmark;
pub use args::DiskArgs;
pub use case::DiskCase;
pub use plan::{DiskOptions, plan};

/// The largest block of one I/O (a single read or write moves at most ~2 GiB on Linux).
pub const MAX_BLOCK: u64 = 1 << 30;
/// Blocks below this report IOPS as the headline (with MB/s as an extra); larger ones MB/s.
pub const IOPS_HEADLINE_BELOW: u64 = 64 * 1024;

/// `peakbench disk`.
pub struct Disk;

impl Benchmark for Disk {
    const NAME: &'static str = "disk";
    const PATH: &'static [&'static str] = &["disk"];
    const ABOUT: &'static str = "Disk throughput, IOPS and latency per op, block size, threads and queue depth, next to fio";
    type Args = DiskArgs;

    /// The ramp is the run's `--warmup` unless `--ramp` is given.
    fn plan(args: &DiskArgs, ctx: &Context) -> Result<Plan> {
        let options = DiskOptions::from_args(args, args.ramp.unwrap_or(ctx.runner.warmup));
        let (cases, notes) = plan::plan_with_notes(&options, ctx)?;
        Plan::new(cases, notes, &options)
    }
}

named_enum! {
    /// A disk operation.
    pub enum Op {
        /// sequential reads
        SeqRead = "seqread",
        /// sequential writes
        SeqWrite = "seqwrite",
        /// reads at random block-aligned offsets
        RandRead = "randread",
        /// writes at random block-aligned offsets
        RandWrite = "randwrite",
        /// a random mix of reads and writes, --rwmix percent reads
        ReadWrite = "readwrite",
        /// each block read sequentially, then written back in place
        Rewrite = "rewrite",
    }
}

impl Op {
    pub fn writes(self) -> bool {
        !matches!(self, Op::SeqRead | Op::RandRead)
    }

    fn reads(self) -> bool {
        !matches!(self, Op::SeqWrite | Op::RandWrite)
    }
}

named_enum! {
    /// The engine a case runs with.
    pub enum Engine {
        IoUring = "io_uring",
        Sync = "sync",
    }
}

named_enum! {
    /// The engine asked for.
    pub enum EngineChoice {
        /// io_uring where the kernel allows it, else sync with a note
        Auto = "auto",
        /// io_uring, queue depths per thread
        IoUring = "io_uring" | "io-uring",
        /// pread/pwrite, one I/O in flight per thread
        Sync = "sync",
    }
}

named_enum! {
    /// O_DIRECT or the page cache.
    pub enum DirectChoice {
        /// O_DIRECT; a block it cannot do is an error
        Always = "always",
        /// buffered (page cache) for every case
        Never = "never",
        /// O_DIRECT where the block allows it, buffered (and labelled so) where not
        WhereAligned = "where_aligned",
    }
}

/// When a repetition stops.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stopping {
    Duration(std::time::Duration),
    /// Bytes moved by all threads together.
    Bytes(u64),
    /// I/Os completed by all threads together, split equally among them.
    Ios(u64),
}
