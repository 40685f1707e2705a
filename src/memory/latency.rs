//! `peakbench mem latency`: the time of one dependent load, by working-set size.
//!
//! The working set is cut into 64-byte nodes, one per cache line. Sattolo's algorithm draws a
//! random permutation with a single cycle through all nodes, and each node holds the address of
//! the next, so a chase `p = *p` visits every node once per cycle in an order that no prefetcher
//! can predict (the order is random within pages as well as across them). Each load waits for
//! the previous one; the time per load is the wall time divided by the loads done. With 4 KiB
//! pages, large working sets also pay TLB misses, as real random accesses do; `--huge-pages`
//! asks for transparent huge pages (madvise) to see the cache and DRAM latency without them.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Result, bail};
use serde::Serialize;

use super::region::{HugePages, Region};
use crate::error::usage;
use crate::plan::{Case, CaseSpec, Context, guess};
use crate::result::{BenchResult, Params, Subsystem};
use crate::rng::Rng;
use crate::runner::{self, Quota, RunSettings, Stop, Tally, Worker};
use crate::stats::Summary;
use crate::sysinfo::clock::thread_cpu_ns;
use crate::units::{format_size, format_size_approx};

/// Bytes per node: one cache line.
pub(crate) const NODE: usize = 64;
/// Loads per chunk of work between looks at the clock.
const CHUNK: u64 = 1 << 14;

/// Validated settings of `peakbench mem latency`.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct LatencyOptions {
    /// Working-set sizes in bytes.
    pub sizes: Vec<u64>,
    pub huge_pages: bool,
    /// Length of one repetition.
    pub duration: Duration,
}

impl LatencyOptions {
    /// Powers of two from 4 KiB to 1 GiB (or 3/4 of the memory available, if less).
    pub(crate) fn defaults(ctx: &Context) -> LatencyOptions {
        let available = ctx.host.memory.available_bytes;
        let top = if available > 0 {
            (1u64 << 30).min(available / 4 * 3)
        } else {
            1 << 30
        };
        LatencyOptions {
            sizes: (12..=30).map(|s| 1u64 << s).filter(|&s| s <= top).collect(),
            huge_pages: false,
            duration: Duration::from_millis(100),
        }
    }
}

/// The cases of one sweep, one per size. They share the curve measured so far, from which each
/// result states its step from the previous size.
pub(crate) fn plan(options: &LatencyOptions, ctx: &Context) -> Result<Vec<Box<dyn Case>>> {
    let available = ctx.host.memory.available_bytes;
    let curve = Arc::new(Mutex::new(Vec::new()));
    let mut cases: Vec<Box<dyn Case>> = Vec::new();
    for &size in &options.sizes {
        if size < 2 * NODE as u64 {
            return Err(usage(format!(
                "--sizes: {} holds fewer than 2 cache lines of {NODE} B: give at least 128B",
                format_size(size)
            )));
        }
        if available > 0 && size > available {
            return Err(usage(format!(
                "--sizes: {} is more than the {} of memory available: give smaller sizes",
                format_size(size),
                format_size_approx(available)
            )));
        }
        cases.push(Box::new(LatencyCase {
            size,
            huge_pages: options.huge_pages,
            duration: options.duration,
            pin: ctx.runner.pin,
            curve: curve.clone(),
        }));
    }
    if cases.is_empty() {
        return Err(usage("--sizes: no size to measure: give e.g. 4KiB,1GiB"));
    }
    Ok(cases)
}

/// The smallest data cache that holds `bytes`, by the sizes sysinfo read ("L1", …, "DRAM").
pub(crate) fn level_for(ctx: &Context, bytes: u64) -> String {
    let mut caches: Vec<_> = ctx.host.cpu.data_caches().collect();
    caches.sort_by_key(|c| c.level);
    caches
        .iter()
        .find(|c| bytes <= c.size_bytes)
        .map_or_else(|| "DRAM".to_string(), |c| format!("L{}", c.level))
}

/// The lines to print after a sweep: where the latency steps up, next to the cache sizes.
pub(crate) fn boundaries(ctx: &Context, results: &[&BenchResult]) -> Vec<String> {
    let mut curve: Vec<(u64, f64)> = results
        .iter()
        .filter_map(|r| Some((r.params.working_set_bytes?, r.value)))
        .collect();
    curve.sort_by_key(|&(size, _)| size);
    let mut lines = Vec::new();
    for pair in curve.windows(2) {
        let ((s0, ns0), (s1, ns1)) = (pair[0], pair[1]);
        if ns1 > ns0 * 1.3 {
            lines.push(format!(
                "latency steps ×{:.1} from {} ({:.1} ns) to {} ({:.1} ns): sysinfo puts {} in {} and {} in {}",
                ns1 / ns0,
                format_size(s0),
                ns0,
                format_size(s1),
                ns1,
                format_size(s0),
                level_for(ctx, s0),
                format_size(s1),
                level_for(ctx, s1)
            ));
        }
    }
    let caches: Vec<String> = ctx
        .host
        .cpu
        .data_caches()
        .map(|c| format!("L{} {}", c.level, format_size_approx(c.size_bytes)))
        .collect();
    if !caches.is_empty() {
        lines.push(format!("caches (sysinfo): {}", caches.join(", ")));
    }
    lines
}

/// Links the nodes of `region` into one random cycle (Sattolo) and returns the first node.
pub(crate) fn link(region: &mut Region, seed: u64) -> *const u8 {
    let nodes = region.len() / NODE;
    // A permutation of node indices with one cycle: next[k] is the node after k.
    let mut next: Vec<u32> = (0..nodes as u32).collect();
    let mut rng = Rng::new(seed);
    for i in (1..nodes).rev() {
        let j = rng.index(i); // j < i: Sattolo, not Fisher–Yates
        next.swap(i, j);
    }
    let base = region.as_ptr();
    for (k, &n) in next.iter().enumerate() {
        // SAFETY: k and n are below `nodes`; each node is 64 bytes inside the region, 8-aligned.
        unsafe {
            base.add(k * NODE)
                .cast::<usize>()
                .write(base.add(n as usize * NODE) as usize)
        };
    }
    base
}

/// Follows the chain `loads` times from `p` and returns where it ended.
///
/// # Safety
/// `p` must be a node of a chain built by [`link`] whose region is alive.
#[inline(never)]
pub(crate) unsafe fn chase(mut p: *const u8, loads: u64) -> *const u8 {
    let mut left = loads;
    // SAFETY: every node holds the address of another node of the same region.
    unsafe {
        while left >= 8 {
            for _ in 0..8 {
                p = *(p as *const *const u8);
            }
            left -= 8;
        }
        for _ in 0..left {
            p = *(p as *const *const u8);
        }
    }
    p
}

/// The ns of one dependent load over a working set of `size` bytes, from one short chase on the
/// calling thread: link a chain over a fresh region (`huge` pages asked for or not), warm it
/// with up to one pass, then chase for `cpu` of the thread's CPU time. For a quick look at the
/// curve before a plan (the roofline's cache edge), not a result: one sample, no repetitions.
pub(crate) fn chase_ns(size: u64, huge: HugePages, cpu: Duration) -> Result<f64> {
    let size = (size as usize / NODE * NODE).max(2 * NODE);
    let mut region = Region::map(size, huge)?;
    let start = link(&mut region, 0x2545_f491_4f6c_dd1d ^ size as u64);
    // SAFETY: start is a node of the chain in region, which lives to the end of this function.
    let mut p = unsafe { chase(start, ((size / NODE) as u64).min(4 * CHUNK)) };
    let (mut loads, begin) = (0u64, thread_cpu_ns());
    while loads == 0 || thread_cpu_ns() - begin < cpu.as_nanos() as u64 {
        // SAFETY: as above.
        p = unsafe { chase(std::hint::black_box(p), CHUNK) };
        loads += CHUNK;
    }
    let spent = thread_cpu_ns() - begin;
    let offset = (p as usize).wrapping_sub(region.as_ptr() as usize);
    if offset >= region.len() || !offset.is_multiple_of(NODE) {
        bail!("the chase left its chain (offset {offset}): the loads were not done");
    }
    Ok(spent as f64 / loads as f64)
}

/// One working-set size.
struct LatencyCase {
    size: u64,
    huge_pages: bool,
    duration: Duration,
    pin: bool,
    /// (working set, median ns) of the sizes of the sweep measured so far, in order.
    curve: Arc<Mutex<Vec<(u64, f64)>>>,
}

struct ChaseWorker {
    region: Region,
    at: *const u8,
    /// (CPU ns, loads) of each round, warm-up first.
    rounds: Arc<Mutex<Vec<(u64, u64)>>>,
}

/// The least share of a chase's region backed by huge pages over its repetitions, when read.
fn least_share(shares: &[f64]) -> Option<f64> {
    shares.iter().copied().reduce(f64::min)
}

impl Worker for ChaseWorker {
    fn run(&mut self, quota: &Quota) -> Result<Tally> {
        let mut done = 0;
        let mut p = self.at;
        let cpu_start = thread_cpu_ns();
        loop {
            let n = quota.next_chunk(done, CHUNK);
            if n == 0 {
                break;
            }
            // SAFETY: p is a node of the chain in self.region.
            p = unsafe { chase(std::hint::black_box(p), n) };
            done += n;
        }
        let cpu = thread_cpu_ns() - cpu_start;
        self.rounds.lock().unwrap().push((cpu, done));
        let offset = (p as usize).wrapping_sub(self.region.as_ptr() as usize);
        if offset >= self.region.len() || !offset.is_multiple_of(NODE) {
            bail!("the chase left its chain (offset {offset}): the loads were not done");
        }
        self.at = p;
        Ok(Tally {
            units: done,
            ops: done,
            latency: None,
            checksum: offset as u64,
        })
    }
}

impl LatencyCase {
    /// How a chase is counted, as its result states it.
    fn counting(&self) -> String {
        format!(
            "the thread's CPU time / dependent loads (time descheduled is not counted; the \
             wall-clock value is extra latency_wall); one 8-byte load per 64-byte node, nodes in a random \
             single cycle (Sattolo); {} pages",
            if self.huge_pages {
                "transparent huge"
            } else {
                "4 KiB"
            }
        )
    }
}

impl Case for LatencyCase {
    fn spec(&self) -> CaseSpec {
        let size = self.size as usize / NODE * NODE;
        let mut params = Params {
            threads: Some(1),
            pinned: Some(self.pin),
            working_set_bytes: Some(size as u64),
            duration_s: Some(self.duration.as_secs_f64()),
            ..Params::default()
        };
        params
            .other
            .insert("huge_pages".into(), self.huge_pages.into());
        params.other.insert("nodes".into(), (size / NODE).into());
        CaseSpec {
            id: format!(
                "mem-latency-{}{}",
                self.size,
                if self.huge_pages { "-huge" } else { "" }
            ),
            label: format!(
                "mem latency {}{}",
                format_size(self.size),
                if self.huge_pages { " huge pages" } else { "" }
            ),
            subsystem: Subsystem::Memory,
            op: "latency".into(),
            params,
        }
    }

    fn estimate(&self, ctx: &Context) -> Duration {
        // Linking costs a random access per node.
        let link = guess::secs((self.size / NODE as u64) as f64 * 30e-9);
        guess::sum([
            link,
            ctx.runner.warmup,
            guess::times(self.duration, ctx.runner.repetitions.into()),
        ])
    }

    fn run(&self, ctx: &Context) -> Result<BenchResult> {
        let settings = RunSettings::new(&ctx.runner, 1, Stop::Duration(self.duration));
        let size = self.size as usize / NODE * NODE;
        let huge = if self.huge_pages {
            HugePages::Ask
        } else {
            HugePages::Refuse
        };
        let rounds = Arc::new(Mutex::new(Vec::new()));
        let shares = Mutex::new(Vec::new());
        let reps = runner::measure(&settings, |_| {
            let mut region = Region::map(size, huge)?;
            let at = link(&mut region, 0x2545_f491_4f6c_dd1d ^ self.size);
            shares.lock().unwrap().extend(region.huge_page_share());
            Ok(ChaseWorker {
                region,
                at,
                rounds: rounds.clone(),
            })
        })?;
        let rounds = rounds.lock().unwrap();
        let measured = &rounds[rounds.len() - reps.len()..]; // the warm-up is first
        let samples: Vec<f64> = measured
            .iter()
            .map(|&(cpu_ns, loads)| cpu_ns as f64 / loads as f64)
            .collect();
        let wall_ns: Vec<f64> = reps
            .iter()
            .map(|r| r.wall.as_secs_f64() * 1e9 / r.units as f64)
            .collect();
        let mut result = self
            .spec()
            .measured(
                &ctx.host.hostname,
                "latency",
                "ns",
                self.counting(),
                samples.clone(),
            )?
            .walls(reps.iter().map(|r| r.wall))
            .param("cache_level", level_for(ctx, self.size));
        if let Some(share) = least_share(&shares.lock().unwrap()) {
            // What the kernel gave, beside what was asked (`huge_pages`).
            result = result.param("huge_page_share", (share * 1000.0).round() / 1000.0);
        }
        let value = result.value();
        // Cycles at the clock the context measured (the one probe, by thread CPU time).
        if let Some(ghz) = ctx.peaks.cpu.factors.measured_ghz.value {
            let cycles: Vec<f64> = samples.iter().map(|ns| ns * ghz).collect();
            result = result
                .extra("latency_cycles", "cycles", &cycles)
                .param("clock_ghz_measured", ghz);
        }
        if let Some(wall) = Summary::of(&wall_ns)
            && wall.median > value * 1.1
        {
            result = result.warn([format!(
                "the thread was off its core {:.0} % of the wall time (other work on the \
                 machine); the value counts only its CPU time; close other work for a \
                 cleaner curve",
                (1.0 - value / wall.median) * 100.0
            )]);
        }
        result = result.extra("latency_wall", "ns", &wall_ns);
        let mut curve = self.curve.lock().unwrap();
        if let Some(&(previous, ns)) = curve.last()
            && previous < self.size
        {
            result = result.param("step_from_previous", value / ns);
        }
        curve.push((self.size, value));
        Ok(result.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_visits_every_node_once_per_cycle() {
        for nodes in [2usize, 3, 64, 1000] {
            let mut region = Region::map(nodes * NODE, HugePages::System).unwrap();
            let start = link(&mut region, 42);
            let base = region.as_ptr() as usize;
            let mut seen = vec![false; nodes];
            let mut p = start;
            for step in 0..nodes {
                let index = (p as usize - base) / NODE;
                assert!(!seen[index], "node {index} visited twice by step {step}");
                seen[index] = true;
                // SAFETY: p is a node of the chain.
                p = unsafe { chase(p, 1) };
            }
            assert_eq!(p, start, "{nodes} nodes: the cycle closes after every node");
            // SAFETY: as above.
            assert_eq!(unsafe { chase(start, 3 * nodes as u64) }, start);
        }
    }
}
