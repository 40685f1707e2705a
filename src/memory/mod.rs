//! Memory bandwidth and latency: `peakbench mem` and `peakbench mem latency`; the core-to-core
//! matrix of `peakbench mem c2c` ([`c2c`]).
//!
//! **Bandwidth.** Each case runs one operation on N threads over a working set of `--size`
//! bytes split among the threads (strong scaling, as STREAM does): every thread maps its own
//! slice and writes it before timing (so its pages come from its own NUMA node and no page fault
//! is timed), then accesses it in blocks of `--block` bytes, sequentially or at block-aligned
//! offsets drawn from a wyrand generator. A repetition lasts `--duration`; its rate is the bytes
//! of all threads divided by the group's wall time (or, with `--bytes`/`--ops`, a fixed
//! work is shared by the threads).
//!
//! **How bytes are counted.** Bytes read plus bytes written by the program: a read or write
//! access of B bytes is B, a copy is 2·B, randrw (a random copy: one block read at a random offset, written at another) is 2·B too. STREAM kernels
//! are counted as STREAM counts them: copy and scale 16 B per element, add and triad 24 B.
//! Ordinary stores make the CPU read each written line first (write-allocate); that traffic is
//! real on the bus but is not counted (the `counting` field says how much it adds); `--nt`
//! stores avoid it.
//!
//! **Proof of work.** Reads return a checksum of everything they loaded, checked against its
//! closed form after each repetition; writes and copies are checked byte for byte after the
//! last repetition (untimed). A failed check fails the case.
//!
//! **Latency** ([`latency`]): a pointer chase through a random cyclic permutation of 64-byte
//! nodes, one load depending on the previous, so nothing overlaps and no prefetcher can guess.

pub(crate) mod args;
pub(crate) mod bound;
pub(crate) mod c2c;
mod params;
mod case;
pub(crate) mod kernels;
pub(crate) mod latency;
pub(crate) mod loaded;
mod op;
mod plan;
pub(crate) mod reference;
pub(crate) mod region;
mod work;

use anyhow::Result;

use crate::options::{OrAll, unique};
use crate::plan::{Context, Plan};
use crate::workload::Benchmark;
use args::{LatencyArgs, MemArgs};
pub(crate) use case::BandwidthCase;
pub(crate) use op::MemOp;
pub(crate) use plan::MemOptions;

/// `peakbench mem`.
pub(crate) struct Mem;

impl Benchmark for Mem {
    const NAME: &'static str = "mem";
    const PATH: &'static [&'static str] = &["mem"];
    const ABOUT: &'static str = "Memory bandwidth (GB/s) per operation, block size and thread count, STREAM kernels; `mem latency`, `mem c2c`";
    type Args = MemArgs;

    fn plan(args: &MemArgs, ctx: &Context) -> Result<Plan> {
        let mut options = MemOptions::defaults();
        options.ops = OrAll::expand(&args.op);
        options.blocks = args.block.as_deref().map(unique);
        if let Some(threads) = args.threads.given() {
            options.threads = unique(threads);
        }
        options.size = args.size;
        options.size_per_thread = args.size_per_thread;
        options.nt = args.nt;
        options.duration = args.timing.duration;
        options.work = match (args.bytes, args.ops) {
            (Some(b), _) => Some(work::Work::Bytes(b)),
            (None, Some(n)) => Some(work::Work::Ops(n)),
            (None, None) => None,
        };
        let (cases, notes) = plan::plan(&options, ctx)?;
        let mut config = serde_json::to_value(&options)?;
        if options.size_per_thread.is_none() {
            let working_set = options.size.unwrap_or_else(|| plan::default_size(ctx).0);
            config["working_set_bytes"] = working_set.into();
        }
        Plan::new(cases, notes, config)
    }
}

/// `peakbench mem latency`.
pub(crate) struct MemLatency;

impl Benchmark for MemLatency {
    const NAME: &'static str = "mem-latency";
    const PATH: &'static [&'static str] = &["mem", "latency"];
    const ABOUT: &'static str =
        "Load-to-use latency by pointer chasing, 4 KiB to 1 GiB, with the cache boundaries";
    type Args = LatencyArgs;

    fn plan(args: &LatencyArgs, ctx: &Context) -> Result<Plan> {
        let mut options = latency::LatencyOptions::defaults(ctx);
        if let Some(sizes) = &args.sizes {
            options.sizes = unique(sizes);
        }
        options.huge_pages = args.huge_pages;
        options.duration = args.timing.duration;
        if let Some(threads) = args.load_threads {
            let load = loaded::LoadOptions {
                threads,
                op: args.load_op,
                paces: match &args.load_pace {
                    Some(paces) => unique(paces),
                    None => loaded::DEFAULT_PACES_US
                        .iter()
                        .map(|&us| std::time::Duration::from_micros(us))
                        .collect(),
                },
                bytes: args.load_size.unwrap_or(loaded::DEFAULT_LOAD_BYTES),
            };
            if args.sizes.is_none() {
                options.sizes = vec![loaded::default_loaded_size(ctx)];
            }
            let cases = loaded::plan(&options, load, ctx)?;
            return Ok(Plan::new(cases, Vec::new(), &options)?.with_summary(loaded::curve));
        }
        let cases = latency::plan(&options, ctx)?;
        Ok(Plan::new(cases, Vec::new(), &options)?.with_summary(latency::boundaries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::Named;
    use crate::workload::plan_for;

    #[test]
    fn sizes_beyond_the_memory_or_a_threads_share_are_refused() {
        let ctx = Context::fixture();
        let e = plan_for::<Mem>(&["mem", "--size", "100GB"], &ctx)
            .err()
            .unwrap();
        assert!(
            e.to_string().starts_with("--size: 100 GB is more than"),
            "{e}"
        );
        let e = plan_for::<Mem>(
            &[
                "mem", "--op", "copy", "--size", "1MiB", "-b", "1MiB", "-t", "2",
            ],
            &ctx,
        )
        .err()
        .unwrap();
        assert!(
            e.to_string()
                .starts_with("--block: 1 MiB is larger than each thread's share"),
            "{e}"
        );
        // A read's block is whole 8-byte words; a copy's may be any size.
        let e = plan_for::<Mem>(
            &["mem", "--op", "read", "--size", "1MiB", "-b", "100"],
            &ctx,
        )
        .err()
        .unwrap();
        assert!(
            e.to_string()
                .starts_with("--block: 100 B is not a whole number of 8-byte words"),
            "{e}"
        );
        assert!(
            plan_for::<Mem>(
                &["mem", "--op", "copy", "--size", "1MiB", "-b", "100"],
                &ctx
            )
            .is_ok()
        );
        // The messages name the flag the working set came from.
        let e = plan_for::<Mem>(&["mem", "--op", "read", "--size-per-thread", "4B"], &ctx)
            .err()
            .unwrap();
        assert!(
            e.to_string()
                .starts_with("--size-per-thread: 4 B leaves each of"),
            "{e}"
        );
        let e = plan_for::<MemLatency>(&["latency", "--sizes", "64B"], &ctx)
            .err()
            .unwrap();
        assert!(
            e.to_string().starts_with("--sizes: 64 B holds fewer"),
            "{e}"
        );
    }

    /// The DIMM table's note only where a case needs the memory peak: a working set each core
    /// holds in its L1 is judged against the L1's peak.
    #[test]
    fn the_unknown_memory_peak_is_noted_only_for_cases_beyond_the_caches() {
        let ctx = Context::fixture();
        assert!(ctx.peaks.memory.value.is_none());
        let noted = |size: &str| {
            plan_for::<Mem>(&["mem", "--op", "read", "--size", size, "-t", "1"], &ctx)
                .unwrap()
                .notes
                .iter()
                .any(|n| n.contains("memory bandwidth peak is unknown"))
        };
        assert!(!noted("16KiB"));
        assert!(noted("256MiB"));
    }

    /// `--size-per-thread` gives each thread count its own working set, the same share a
    /// thread; `--size` is one working set for all.
    #[test]
    fn a_size_per_thread_scales_the_working_set_with_the_threads() {
        let ctx = Context::fixture();
        let sets = |argv: &[&str]| -> Vec<(usize, u64)> {
            plan_for::<Mem>(argv, &ctx)
                .unwrap()
                .cases
                .iter()
                .map(|c| {
                    let p = c.spec().params;
                    (p.threads.unwrap(), p.working_set_bytes.unwrap())
                })
                .collect()
        };
        let each = [
            "mem",
            "--op",
            "read,stream-triad",
            "-b",
            "8KiB",
            "-t",
            "1,2,3",
        ];
        let per_thread = sets(&[&each[..], &["--size-per-thread", "64KiB"]].concat());
        assert_eq!(per_thread.len(), 6);
        for (threads, set) in per_thread {
            // Whole blocks, or whole elements of the STREAM arrays, of 64 KiB a thread.
            let want = 64 * 1024 * threads as u64;
            assert!(
                set <= want && set + 24 * threads as u64 >= want,
                "{threads} threads: {set}"
            );
        }
        for (threads, set) in sets(&[&each[..], &["--size", "192KiB"]].concat()) {
            // One set shared: whole blocks (or elements) of each thread's share of 192 KiB.
            assert!(
                set <= 192 * 1024 && set > 190 * 1024,
                "{threads} threads: {set}"
            );
        }
    }

    #[test]
    fn aliases_name_the_ops_users_know_and_all_is_every_op() {
        let ctx = Context::fixture();
        let ids = |argv: &[&str]| -> Vec<String> {
            plan_for::<Mem>(argv, &ctx)
                .unwrap()
                .cases
                .iter()
                .map(|c| c.spec().id)
                .collect()
        };
        assert_eq!(
            ids(&[
                "mem",
                "--op",
                "RWS,copy,rwr",
                "-b",
                "8KB",
                "-t",
                "1",
                "-s",
                "64MiB"
            ]),
            [
                "mem-copy-b8000-s67104000-t1",
                "mem-randrw-b8000-s67104000-t1"
            ]
        );
        let all = ids(&["mem", "--op", "all", "-b", "8KB", "-t", "1", "-s", "64MiB"]);
        assert_eq!(all.len(), MemOp::ALL.len());
    }

    /// `--bytes` and `--ops` fix the work of a repetition: the case records it and runs with it
    /// (the runner's own tests check that `Stop::Work` does exactly that many units), and work
    /// too small to share is refused.
    #[test]
    fn bytes_or_ops_give_a_fixed_amount_of_work() {
        let mut ctx = Context::fixture();
        ctx.runner.repetitions = 2;
        ctx.runner.warmup = std::time::Duration::ZERO;
        let argv = |work: &[&'static str]| {
            let mut v = vec!["mem", "--op", "copy,stream-triad", "-b", "1KB", "-t", "1"];
            v.extend(["-s", "8MiB"]);
            v.extend(work);
            v
        };
        let plan = plan_for::<Mem>(&argv(&["--bytes", "1MB"]), &ctx).unwrap();
        let expect = [(1_000_000 / 2000, 2000), (1_000_000 / 24, 24)];
        for (case, (ops, per)) in plan.cases.iter().zip(expect) {
            let spec = case.spec();
            assert_eq!(spec.params.duration_s, None);
            assert_eq!(spec.params.other["ops_per_repetition"], ops);
            assert_eq!(spec.params.other["bytes_per_repetition"], ops * per);
            let result = case.run(&ctx).unwrap();
            assert_eq!(result.samples.len(), 2, "{}", spec.id);
        }
        let plan = plan_for::<Mem>(&argv(&["--ops", "300"]), &ctx).unwrap();
        assert_eq!(plan.cases[0].spec().params.other["ops_per_repetition"], 300);
        assert_eq!(plan.cases[1].spec().params.other["ops_per_repetition"], 300);

        let e = plan_for::<Mem>(
            &["mem", "--op", "read", "-t", "2", "-s", "8MiB", "--ops", "1"],
            &ctx,
        )
        .err()
        .unwrap();
        assert!(e.to_string().starts_with("--ops: 1 accesses cannot"), "{e}");
        let e = plan_for::<Mem>(
            &[
                "mem", "--op", "copy", "-b", "1KB", "-t", "1", "-s", "8MiB", "--bytes", "1KB",
            ],
            &ctx,
        )
        .err()
        .unwrap();
        assert!(e.to_string().starts_with("--bytes: 1 KB is fewer"), "{e}");
    }

    #[test]
    fn the_latency_sweep_summary_names_the_steps_and_the_caches() {
        let ctx = Context::fixture();
        let plan = plan_for::<MemLatency>(&["latency", "--sizes", "16KiB,64MiB"], &ctx).unwrap();
        assert_eq!(plan.summaries.len(), 1);
        let mut small = crate::result::BenchResult::example("a", "ns", vec![1.0]);
        small.params.working_set_bytes = Some(16 << 10);
        let mut large = crate::result::BenchResult::example("b", "ns", vec![90.0]);
        large.params.working_set_bytes = Some(64 << 20);
        let lines = (plan.summaries[0].0)(&ctx, &[&large, &small]);
        assert!(
            lines[0].starts_with("latency steps ×90.0 from 16 KiB"),
            "{lines:?}"
        );
        assert!(
            lines.last().unwrap().starts_with("caches (sysinfo): "),
            "{lines:?}"
        );
    }
}
