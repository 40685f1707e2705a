//! A short memory copy on every CPU: the bound another workload takes from memory when it has
//! no peak of its own (a loopback network test moves every byte by memory copies).
//!
//! It is `mem --op copy` made small: the same copy kernel ([`kernels::copy`], ordinary
//! stores), in 1 MiB blocks, sequential, on one thread per CPU, each thread over buffers of its
//! own touched before timing, and bytes counted as `mem --op copy` counts them (read + written:
//! 2 × the block per copy). The buffers together are 8 × the last-level cache (64 MiB to
//! 1 GiB, at most a quarter of the memory available), so the copy runs from memory and not
//! from a cache. A 30 ms warm-up, then [`REPETITIONS`] repetitions of [`REPETITION`]; the value
//! is the best repetition.

use std::time::Duration;

use anyhow::{Result, bail};

use super::kernels::{self, MemIsa};
use super::region::{HugePages, Region};
use crate::plan::Context;
use crate::runner::{self, Quota, RunSettings, Scaling, Stop, Tally, Worker};
use crate::units::format_size_approx;

/// Timed repetitions of the copy.
const REPETITIONS: u32 = 4;
/// The length of each.
const REPETITION: Duration = Duration::from_millis(60);
/// The untimed start.
const WARMUP: Duration = Duration::from_millis(30);
/// Bytes of each copy, as `mem --op copy`'s default block.
const BLOCK: u64 = 1 << 20;

/// What the copy measured.
#[derive(Clone, Debug)]
pub(crate) struct CopyBound {
    /// The best repetition, GB/s (10^9 B/s), bytes read + bytes written.
    pub gbs: f64,
    /// All threads' source and destination buffers together.
    pub buffer_bytes: u64,
    pub threads: usize,
    pub isa: MemIsa,
    /// The timed repetitions and the length of each.
    pub repetitions: u32,
    pub repetition: Duration,
}

impl CopyBound {
    /// What was measured, in one phrase for a peak's source.
    pub(crate) fn describe(&self) -> String {
        format!(
            "mem --op copy's {} kernel in {} blocks over {} of buffers, {} threads, best of \
             {} × {} ms: {:.2} GB/s, bytes read + written",
            self.isa.name(),
            format_size_approx(BLOCK),
            format_size_approx(self.buffer_bytes),
            self.threads,
            self.repetitions,
            self.repetition.as_millis(),
            self.gbs
        )
    }
}

/// Measures the copy on every CPU this process may use (`--pin` places the threads as for
/// every case). Interrupted by Ctrl-C, it returns the runner's interruption.
pub(crate) fn copy_bandwidth(ctx: &Context) -> Result<CopyBound> {
    let threads = runner::num_cpus().max(1);
    let llc = ctx.host.cpu.last_level_cache_bytes();
    let mut total = (8 * llc).clamp(64 << 20, 1 << 30);
    let available = ctx.host.memory.available_bytes;
    if available > 0 {
        total = total.min(available / 4);
    }
    // Each thread a source and a destination of whole blocks.
    let slice = total / (2 * threads as u64) / BLOCK * BLOCK;
    if slice == 0 {
        bail!(
            "{} of memory leave {threads} threads no 1 MiB block to copy",
            format_size_approx(total)
        );
    }
    let isa = MemIsa::detect();
    let settings = RunSettings {
        threads,
        stop: Stop::Duration(REPETITION),
        scaling: Scaling::Strong,
        repetitions: REPETITIONS,
        warmup: WARMUP,
        pin: ctx.runner.pin,
        watch: None,
    };
    let reps = runner::measure(&settings, |_| CopyWorker::prepare(isa, slice as usize))?;
    let gbs = reps
        .iter()
        .map(|r| r.units_per_sec() / 1e9)
        .fold(0.0, f64::max);
    if gbs <= 0.0 {
        bail!("the copy moved no byte");
    }
    Ok(CopyBound {
        gbs,
        buffer_bytes: slice * 2 * threads as u64,
        threads,
        isa,
        repetitions: REPETITIONS,
        repetition: REPETITION,
    })
}

/// One thread's source and destination, copied block after block.
struct CopyWorker {
    isa: MemIsa,
    src: Region,
    dst: Region,
    blocks: usize,
    position: usize,
}

impl CopyWorker {
    /// Maps and touches (on this thread, so on its NUMA node) `slice` bytes of each buffer.
    fn prepare(isa: MemIsa, slice: usize) -> Result<CopyWorker> {
        let map = |fill: u8| -> Result<Region> {
            let mut region = Region::map(slice, HugePages::System)?;
            region.as_mut_slice().fill(fill);
            Ok(region)
        };
        Ok(CopyWorker {
            isa,
            src: map(0x5a)?,
            dst: map(0x11)?,
            blocks: slice / BLOCK as usize,
            position: 0,
        })
    }
}

impl Worker for CopyWorker {
    fn run(&mut self, quota: &Quota) -> Result<Tally> {
        let block = BLOCK as usize;
        let mut done = 0u64;
        loop {
            let n = quota.next_chunk(done, 1);
            if n == 0 {
                break;
            }
            let offset = self.position * block;
            // SAFETY: offset + block ≤ blocks × block, inside both regions, which are distinct
            // mappings owned by this worker.
            unsafe {
                kernels::copy(
                    self.isa,
                    self.dst.as_ptr().add(offset),
                    self.src.as_ptr().add(offset),
                    block,
                    false,
                );
            }
            self.position = (self.position + 1) % self.blocks;
            done += n;
        }
        kernels::store_fence();
        Ok(Tally {
            units: done * 2 * BLOCK,
            ops: done,
            latency: None,
            checksum: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_bound_counts_read_and_written_bytes_on_every_cpu() {
        let bound = copy_bandwidth(&Context::fixture()).unwrap();
        assert!(bound.gbs > 0.0, "{bound:?}");
        assert_eq!(bound.threads, runner::num_cpus());
        assert!(bound.buffer_bytes >= 2 << 20, "{bound:?}");
        let text = bound.describe();
        assert!(text.contains("bytes read + written"), "{text}");
        assert!(
            text.contains(&format!("{} threads", bound.threads)),
            "{text}"
        );
    }
}
