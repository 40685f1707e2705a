//! Where a run's own latency curve says the caches end, against the sizes sysinfo read.
//!
//! A guest often sees its host's caches: a 2-vCPU KVM guest of a Golden Cove server Xeon was told
//! of a 480 MiB L3 while its `mem latency` stepped from 46.8 ns at 8 MiB to 259 ns at 256 MiB. A
//! working set of 256 MiB is then in memory, whatever sysinfo says, and a bandwidth result there is
//! judged as one of memory, with a run-wide finding that says why.

use crate::result::{BenchResult, Cause, Evidence, Report, Subsystem};
use crate::sysinfo::SysInfo;
use crate::units::format_size;

/// A latency this many times the one at a smaller working set beyond the private caches (the
/// next smaller one, or one at most [`STEP_SPAN`] × smaller) is a load from memory, not from a
/// cache: a shared L3 answers in 10–50 ns, a DRAM access in 80–150 ns on an idle server (the
/// vendors' latency tools, Intel MLC and AMD's guides), so the step from the last cache to
/// memory is 2–9 ×; growth inside one cache level from TLB misses stays well under it.
pub(crate) const MEMORY_STEP: f64 = 2.5;

/// A latency this many times the one at the largest set within the private caches is a load
/// from memory with no shared cache between: a core's L2 answers in 3–8 ns and a shared L3 in
/// 10–50 ns (3.8 × on the Zen 5 guest, 6.4 × and 8.2 × on the Golden Cove server guests of
/// tests/fixtures/machines), DRAM in 80–230 ns (20–23 × on the Emerald Rapids guests when their
/// 8 MiB chase missed the L3 they were shown, 33 × and 50 × on the others). A guest shown its
/// host's L3 may get so little of it that the curve goes from its L2 straight to memory.
pub(crate) const PRIVATE_TO_MEMORY_STEP: f64 = 15.0;

/// The step of a latency curve that leaves the caches where sysinfo says they still hold.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct MeasuredEdge {
    /// The largest working set still in a cache, and its latency.
    pub cached: (u64, f64),
    /// The smallest working set beyond the caches, and its latency.
    pub beyond: (u64, f64),
    /// The last-level cache sysinfo read.
    pub llc_bytes: u64,
    /// The ids of the two latency results.
    pub ids: [String; 2],
}

impl MeasuredEdge {
    /// Whether a working set of `bytes` is in memory by this edge: from 7/8 of the size beyond
    /// the caches (a kernel over several arrays rounds each one down, so a 256 MiB triad holds
    /// 16 bytes less than 256 MiB).
    pub(super) fn holds_in_memory(&self, bytes: u64) -> bool {
        bytes >= self.beyond.0 / 8 * 7
    }
}

/// How far apart in size, at most, two points of a latency curve that are not neighbours may be for
/// [`memory_step`] to compare them. With working sets ×2 apart a cache's edge spreads over two
/// intervals, as about half the loads still hit at twice its size: a 2-vCPU KVM guest of a Golden
/// Cove server Xeon read 47 ns at 16 MiB, 103 ns at 32 MiB and 157 ns at 64 MiB with huge pages, no
/// interval ×2.5. Over ×4, the growth inside a cache from TLB misses (a page walk the cache serves
/// adds at most one more cache latency) stays under [`MEMORY_STEP`].
pub(crate) const STEP_SPAN: u64 = 4;

/// Where a latency curve steps from a cache to memory before the last-level cache ends: the
/// indices `(i, j)` of the first point `j` of `curve` ((working set in bytes, ns), sorted by
/// size) within the `llc` bytes sysinfo gives the last level whose latency is [`MEMORY_STEP`] ×
/// or more that of a smaller point `i` beyond the private caches (more than `private` bytes):
/// its neighbour, or one at most [`STEP_SPAN`] × smaller, the largest such; or, where there is
/// none, the first point past the private caches when it reads [`PRIVATE_TO_MEMORY_STEP`] × the
/// last point within them. `curve[i]` is then the largest working set still in a cache and
/// `curve[j]` the smallest in memory. A smaller step out of the private caches, or one past the
/// last level, agrees with sysinfo and is not one.
/// The rule of this finding and of the roofline's L3 size alike.
pub(crate) fn memory_step(curve: &[(u64, f64)], private: u64, llc: u64) -> Option<(usize, usize)> {
    let shared = (1..curve.len())
        .filter(|&j| curve[j].0 <= llc)
        .find_map(|j| {
            let (high_set, high_ns) = curve[j];
            (0..j)
                .rev()
                .take_while(|&i| curve[i].0 > private)
                .take_while(|&i| i + 1 == j || curve[i].0 * STEP_SPAN >= high_set)
                .find(|&i| curve[i].1 > 0.0 && high_ns >= MEMORY_STEP * curve[i].1)
                .map(|i| (i, j))
        });
    // Straight from the private caches to memory: the first point past them read
    // PRIVATE_TO_MEMORY_STEP × the last point within them.
    let straight = || {
        let j = curve.iter().position(|&(set, _)| set > private)?;
        let i = j.checked_sub(1)?;
        (curve[j].0 <= llc && curve[i].1 > 0.0 && curve[j].1 >= PRIVATE_TO_MEMORY_STEP * curve[i].1)
            .then_some((i, j))
    };
    shared.or_else(straight)
}

/// The step of `host`'s latency curve in `report` that contradicts sysinfo's cache sizes, if
/// any ([`memory_step`]).
pub(super) fn beyond_caches(report: &Report, host: &str) -> Option<MeasuredEdge> {
    let inventory = report.inventory(host).unwrap_or(&report.host);
    let llc = inventory.cpu.last_level_cache_bytes();
    let private = private_cache_bytes(inventory);
    let mut curve: Vec<(&BenchResult, u64)> = report
        .results
        .iter()
        .filter(|r| r.host == host || report.hosts.is_empty())
        .filter(|r| (r.subsystem, r.op.as_str()) == (Subsystem::Memory, "latency"))
        .filter(|r| r.params.threads.unwrap_or(1) == 1 && r.value > 0.0)
        .filter_map(|r| Some((r, r.params.working_set_bytes?)))
        .collect();
    curve.sort_by_key(|&(_, set)| set);
    let points: Vec<(u64, f64)> = curve.iter().map(|&(r, set)| (set, r.value)).collect();
    let (i, j) = memory_step(&points, private, llc)?;
    let ((low, low_set), (high, high_set)) = (curve[i], curve[j]);
    Some(MeasuredEdge {
        cached: (low_set, low.value),
        beyond: (high_set, high.value),
        llc_bytes: llc,
        ids: [low.id.clone(), high.id.clone()],
    })
}

/// The largest cache below the last level (a core's L2), 0 where sysinfo read none.
pub(crate) fn private_cache_bytes(host: &SysInfo) -> u64 {
    let llc_level = host.cpu.data_caches().map(|c| c.level).max().unwrap_or(0);
    host.cpu
        .data_caches()
        .filter(|c| c.level < llc_level)
        .map(|c| c.size_bytes)
        .max()
        .unwrap_or(0)
}

/// The run-wide finding: the caches end where the latency curve says, not where sysinfo does.
pub(super) fn cache_sizes_wrong(report: &Report) -> Option<Cause> {
    let edge = beyond_caches(report, &report.host.hostname)?;
    let ((low_set, low_ns), (high_set, high_ns)) = (edge.cached, edge.beyond);
    Some(Cause {
        kind: "cache-sizes-wrong".into(),
        value: Some(high_ns / low_ns),
        unit: "× latency".into(),
        text: format!(
            "the run's latency steps ×{:.1} from {} ({low_ns:.1} ns) to {} ({high_ns:.1} ns), \
             from a cache to memory, though sysinfo gives a {} last-level cache (a guest may be \
             shown its host's): working sets from {} on are judged as memory",
            high_ns / low_ns,
            format_size(low_set),
            format_size(high_set),
            format_size(edge.llc_bytes),
            format_size(high_set),
        ),
        evidence: vec![
            Evidence::new(edge.ids[0].clone(), format!("{low_ns:.1} ns")),
            Evidence::new(edge.ids[1].clone(), format!("{high_ns:.1} ns")),
            Evidence::new(
                "sysinfo: the largest data cache",
                format_size(edge.llc_bytes),
            ),
        ],
        bound: None,
        explains: None,
        remedy: "nothing to change in the run: the measured boundary is used; `mem latency \
                 --sizes` with more sizes between the two places the edge closer"
            .into(),
    })
}
