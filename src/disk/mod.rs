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
mod params;
pub(crate) mod buffer;
mod case;
pub(crate) mod device;
pub(crate) mod engine;
pub(crate) mod error;
pub(crate) mod file;
pub(crate) mod fio;
mod plan;
mod settings;
pub(crate) mod stamp;
mod target;

use anyhow::Result;

use crate::plan::{Context, Plan};
use crate::workload::Benchmark;
pub(crate) use args::DiskArgs;
pub(crate) use plan::DiskOptions;

/// `peakbench disk`.
pub(crate) struct Disk;

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
