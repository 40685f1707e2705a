//! `peakbench mem`'s options expanded into cases, sizes checked against memory first.

use std::time::Duration;

use anyhow::Result;
use serde::Serialize;

use super::case::BandwidthCase;
use super::kernels::{MemIsa, Stream};
use super::op::MemOp;
use super::work::Work;
use crate::error::usage;
use crate::plan::{Case, Cases, Context};
use crate::runner;
use crate::units::{format_size, format_size_approx};

/// Validated settings of `peakbench mem`, constructible from code (presets) as well as flags.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct MemOptions {
    pub ops: Vec<MemOp>,
    /// Block sizes in bytes; `None`: 1 MiB for sequential ops, 64 B for random ones.
    pub blocks: Option<Vec<u64>>,
    pub threads: Vec<usize>,
    /// Working set of all threads together, bytes; `None`: [`default_size`].
    pub size: Option<u64>,
    /// Working set per thread, bytes, in place of `size`: each thread count gets this many
    /// times its threads.
    pub size_per_thread: Option<u64>,
    /// Non-temporal stores for the ops that have them.
    pub nt: bool,
    /// Length of one repetition (when `work` is `None`).
    pub duration: Duration,
    /// Fixed work per repetition instead of a duration (`--bytes`, `--ops`).
    pub work: Option<Work>,
}

/// Refuses fixed work that leaves a thread nothing to do.
fn check_work(work: Option<Work>, per_access: u64, threads: usize, what: &str) -> Result<()> {
    let Some(work) = work else { return Ok(()) };
    if work.units(per_access) >= threads as u64 {
        return Ok(());
    }
    Err(usage(match work {
        Work::Bytes(b) => format!(
            "--bytes: {} is fewer than one {per_access}-byte access of {what} per thread for {threads} threads: give at least {} B",
            format_size(b),
            per_access * threads as u64
        ),
        Work::Ops(n) => format!(
            "--ops: {n} accesses cannot be shared by {threads} threads: give at least {threads}, or fewer --threads"
        ),
    }))
}

impl MemOptions {
    /// The defaults of `peakbench mem` with no flags.
    pub(crate) fn defaults() -> MemOptions {
        MemOptions {
            ops: vec![
                MemOp::Read,
                MemOp::Write,
                MemOp::Copy,
                MemOp::RandRead,
                MemOp::StreamCopy,
                MemOp::StreamTriad,
            ],
            blocks: None,
            threads: {
                let mut t = vec![1, runner::num_cpus()];
                t.dedup();
                t
            },
            size: None,
            size_per_thread: None,
            nt: false,
            duration: Duration::from_millis(300),
            work: None,
        }
    }
}

/// 1 GiB, or 4 × the last-level cache when that is larger, but at most 3/4 of the memory
/// available (and then a note says so).
pub(crate) fn default_size(ctx: &Context) -> (u64, Option<String>) {
    let llc = ctx.host.cpu.last_level_cache_bytes();
    let wanted = (1u64 << 30).max(4 * llc);
    let available = ctx.host.memory.available_bytes;
    if available > 0 && wanted > available / 4 * 3 {
        let size = available / 4 * 3;
        return (
            size,
            Some(format!(
                "working set {} (3/4 of the memory available) instead of {}",
                format_size_approx(size),
                format_size_approx(wanted)
            )),
        );
    }
    (wanted, None)
}

/// Expands the options into cases, checking sizes against memory first. Bad combinations are
/// usage errors naming the flag.
/// The cases, and notes about the choices made (printed and kept as warnings).
pub(super) fn plan(options: &MemOptions, ctx: &Context) -> Result<(Cases, Vec<String>)> {
    let mut notes = Vec::new();
    // One working set for every thread count, or (--size-per-thread) one per thread count.
    let (size_flag, shared) = match options.size_per_thread {
        Some(_) => ("--size-per-thread", 0),
        None => ("--size", working_set(options.size, ctx, &mut notes)?),
    };
    let isa = MemIsa::detect();
    if options.nt && !isa.has_nt() {
        notes.push(format!(
            "--nt: the {} kernels have no non-temporal stores; ordinary stores are used",
            isa.name()
        ));
    }
    let mut cases: Vec<Box<dyn Case>> = Vec::new();
    let mut beyond_caches = false;
    for &op in &options.ops {
        for &threads in &options.threads {
            let size = match options.size_per_thread {
                Some(each) => per_thread_set(each, threads, ctx)?,
                None => shared,
            };
            let shape = Shape {
                op,
                threads,
                size,
                size_flag,
                isa,
                pin: ctx.runner.pin,
            };
            let shaped = match op.stream() {
                Some(kernel) => vec![shape.stream_case(kernel, options)?],
                None => shape.block_cases(options)?,
            };
            for case in shaped {
                // A case held in a cache is judged against that cache's peak.
                beyond_caches |= case.cache_level(ctx).is_none();
                cases.push(Box::new(case));
            }
        }
    }
    if beyond_caches && ctx.peaks.memory.value.is_none() {
        notes.push(
            "the memory bandwidth peak is unknown (no readable DIMM table): give --mem-channels \
             and --mem-mts for the peak and the efficiency of the cases beyond the caches"
                .into(),
        );
    }
    if options.nt && options.ops.iter().any(|op| !op.has_nt()) {
        notes.push(
            "--nt applies to write, copy and the STREAM kernels; the other ops use ordinary stores"
                .into(),
        );
    }
    Ok((cases, notes))
}

/// The working set of all threads: `size` (`--size`), or [`default_size`] with its note;
/// refused when it is more than the memory available.
fn working_set(size: Option<u64>, ctx: &Context, notes: &mut Vec<String>) -> Result<u64> {
    let size = match size {
        Some(size) => size,
        None => {
            let (size, note) = default_size(ctx);
            notes.extend(note);
            size
        }
    };
    within_memory(size, ctx, |available| {
        format!(
            "--size: {} is more than the {available} of memory available: give a smaller --size",
            format_size(size)
        )
    })
}

/// The working set of `threads` threads of `each` bytes (`--size-per-thread`); refused when it
/// is more than the memory available.
fn per_thread_set(each: u64, threads: usize, ctx: &Context) -> Result<u64> {
    within_memory(each.saturating_mul(threads as u64), ctx, |available| {
        format!(
            "--size-per-thread: {} × {threads} threads is more than the {available} of memory available: give a smaller --size-per-thread or fewer --threads",
            format_size(each)
        )
    })
}

/// `size`, or the usage error `refusal` words (given the memory available, approximated) when
/// it is more than the memory available.
fn within_memory(size: u64, ctx: &Context, refusal: impl FnOnce(String) -> String) -> Result<u64> {
    let available = ctx.host.memory.available_bytes;
    if available > 0 && size > available {
        return Err(usage(refusal(format_size_approx(available))));
    }
    Ok(size)
}

/// One op at one thread count over the working set: what its cases share.
struct Shape {
    op: MemOp,
    threads: usize,
    /// Bytes of the working set of all threads.
    size: u64,
    /// The flag that gave it, for the messages: `--size` or `--size-per-thread`.
    size_flag: &'static str,
    isa: MemIsa,
    pin: bool,
}

impl Shape {
    /// The case of a STREAM kernel: each thread gets its share of every array, in elements.
    fn stream_case(&self, kernel: Stream, options: &MemOptions) -> Result<BandwidthCase> {
        let Shape {
            op,
            threads,
            size,
            size_flag: flag,
            ..
        } = *self;
        let elements = size / (kernel.arrays() * 8 * threads as u64);
        if elements == 0 {
            return Err(usage(format!(
                "{flag}: {} gives {threads} threads no element of {} arrays: give a larger {flag}",
                format_size(size),
                kernel.arrays()
            )));
        }
        check_work(options.work, kernel.bytes_per_element(), threads, op.name())?;
        Ok(BandwidthCase {
            op,
            block: None,
            threads,
            slice: elements * 8,
            nt: options.nt && self.isa.has_nt(),
            duration: options.duration,
            work: options.work,
            isa: self.isa,
            pin: self.pin,
        })
    }

    /// The cases of a block op, one per block size: each thread gets its share of each region
    /// (one or two), a whole number of blocks.
    fn block_cases(&self, options: &MemOptions) -> Result<Vec<BandwidthCase>> {
        let Shape {
            op,
            threads,
            size,
            size_flag: flag,
            ..
        } = *self;
        let (reads, writes) = op.regions();
        let regions = u64::from(reads) + u64::from(writes);
        let slice = size / (regions * threads as u64);
        if slice == 0 {
            return Err(usage(format!(
                "{flag}: {} leaves {threads} threads of {} no byte each: give a larger {flag} or fewer --threads",
                format_size(size),
                op.name()
            )));
        }
        // A read adds up whole 8-byte words as it loads them (kernels.rs), so its blocks are
        // whole words, each starting on a word of the source.
        let word = if writes { 1 } else { 8 };
        if slice < word {
            return Err(usage(format!(
                "{flag}: {} leaves each of {threads} threads of {} less than one 8-byte word: give a larger {flag} or fewer --threads",
                format_size(size),
                op.name()
            )));
        }
        let blocks = match &options.blocks {
            Some(blocks) => blocks.clone(),
            None if op.random() => vec![64.min(slice) / word * word],
            None => vec![(1u64 << 20).min(slice) / word * word],
        };
        let mut cases = Vec::new();
        for block in blocks {
            if block % word != 0 {
                return Err(usage(format!(
                    "--block: {} is not a whole number of 8-byte words, which {} adds up as it loads them: give a multiple of 8 B such as {} B",
                    format_size(block),
                    op.name(),
                    (block / word * word).max(word)
                )));
            }
            if block > size {
                return Err(usage(format!(
                    "--block: {} is larger than the working set ({flag} {}): give a smaller block or a larger {flag}",
                    format_size(block),
                    format_size(size)
                )));
            }
            if block > slice {
                return Err(usage(format!(
                    "--block: {} is larger than each thread's share of {flag} for {} ({} = {} / {threads} threads{}): give a smaller block or a larger {flag}",
                    format_size(block),
                    op.name(),
                    format_size_approx(slice),
                    format_size(size),
                    if regions == 2 { " / 2 regions" } else { "" }
                )));
            }
            check_work(options.work, op.bytes_per_access(block), threads, op.name())?;
            cases.push(BandwidthCase {
                op,
                block: Some(block),
                threads,
                slice: slice / block * block,
                nt: options.nt && op.has_nt() && self.isa.has_nt(),
                duration: options.duration,
                work: options.work,
                isa: self.isa,
                pin: self.pin,
            });
        }
        Ok(cases)
    }
}
