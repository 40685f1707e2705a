//! What a case of `cpu gemm` and one of `cpu linpack` share: the peak they are held to, the
//! estimate of their time, and the value each repetition measures.

use std::time::Duration;

use crate::peak::{Isa, PeakRef, Precision};
use crate::plan::{Context, guess};
use crate::runner;

/// A measured repetition of a dense case: GFLOP/s, the figure its check reports, and the share
/// of the time its threads waited for a CPU ([`runner::timed_waiting`]; `None` in the warm-up
/// or without schedstat).
pub type DenseRound = runner::Timed<(f64, f64, Option<f64>)>;

/// The peak of a dense solve or multiply in `precision` (f64 or f32) on `threads` cores: FMA
/// of that element type at the widest ISA the CPU has (what HPL, DGEMM and SGEMM kernels run).
pub fn fma_peak(ctx: &Context, threads: usize, precision: Precision) -> Option<PeakRef> {
    let cpu = &ctx.peaks.cpu;
    let widest = *cpu.isas.last().unwrap_or(&Isa::Scalar);
    cpu.row(precision, widest, true)
        .and_then(|row| cpu.for_threads(row, threads, None))
}

/// The time a case takes at a modest `per_thread` FLOP/s on each of its threads: `flops` and
/// `per_repetition_s` every repetition, `once_s` once, and the warm-up. The plan is a guide,
/// not a promise.
pub fn estimate(
    ctx: &Context,
    threads: usize,
    flops: f64,
    per_thread: f64,
    per_repetition_s: f64,
    once_s: f64,
) -> Duration {
    let rate = per_thread * threads.min(runner::num_cpus()) as f64;
    guess::sum([
        guess::secs((flops / rate + per_repetition_s) * ctx.runner.repetitions as f64 + once_s),
        ctx.runner.warmup,
    ])
}
