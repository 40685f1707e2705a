//! `peakbench mem latency`: the time of one dependent load, by working-set size.
//!
//! The working set is cut into 64-byte nodes, one per cache line. Sattolo's algorithm draws a
//! random permutation with a single cycle through all nodes, and each node holds the address of
//! the next, so a chase `p = *p` visits every node once per cycle in an order that no prefetcher
//! can predict (the order is random within pages as well as across them). Each load waits for
//! the previous one; the time per load is the wall time divided by the loads done. With 4 KiB
//! pages, large working sets also pay TLB misses, as real random accesses do; `--huge-pages`
//! asks for transparent huge pages (madvise) to see the cache and DRAM latency without them.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use anyhow::{Result, bail};
use serde::Serialize;

use super::region::{HugePages, Region};
use crate::app::UsageError;
use crate::result::{BenchResult, CaseInfo, Extra, Params, Subsystem};
use crate::rng::Rng;
use crate::runner::{self, Quota, Stop, Tally, Worker};
use crate::session::{Case, Context};
use crate::stats::Summary;
use crate::units::{format_size, format_size_approx};

/// Bytes per node: one cache line.
pub const NODE: usize = 64;
/// Loads per chunk of work between looks at the clock.
const CHUNK: u64 = 1 << 14;

/// Validated settings of `peakbench mem latency`.
#[derive(Clone, Debug, Serialize)]
pub struct LatencyOptions {
    /// Working-set sizes in bytes.
    pub sizes: Vec<u64>,
    pub huge_pages: bool,
    /// Length of one repetition.
    pub duration: Duration,
}

impl LatencyOptions {
    /// Powers of two from 4 KiB to 1 GiB (or 3/4 of the memory available, if less).
    pub fn defaults(ctx: &Context) -> LatencyOptions {
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

/// What the cases of one sweep share: the measured clock and the curve so far.
#[derive(Default)]
pub struct Sweep {
    clock_ghz: OnceLock<Option<f64>>,
    /// (working set, median ns) of the sizes measured so far, in order.
    pub curve: Mutex<Vec<(u64, f64)>>,
}

/// The cases and the sweep they fill in.
pub type LatencyPlan = (Vec<Box<dyn Case>>, Arc<Sweep>);

/// One case per size; the `Sweep` lets the caller print the boundaries afterwards.
pub fn plan(options: &LatencyOptions, ctx: &Context) -> Result<LatencyPlan> {
    let available = ctx.host.memory.available_bytes;
    let sweep = Arc::new(Sweep::default());
    let mut cases: Vec<Box<dyn Case>> = Vec::new();
    for &size in &options.sizes {
        if size < 2 * NODE as u64 {
            return Err(UsageError(format!(
                "--sizes: {} holds fewer than 2 cache lines of {NODE} B: give at least 128B",
                format_size(size)
            ))
            .into());
        }
        if available > 0 && size > available {
            return Err(UsageError(format!(
                "--sizes: {} is more than the {} of memory available: give smaller sizes",
                format_size(size),
                format_size_approx(available)
            ))
            .into());
        }
        cases.push(Box::new(LatencyCase {
            size,
            huge_pages: options.huge_pages,
            duration: options.duration,
            sweep: sweep.clone(),
        }));
    }
    Ok((cases, sweep))
}

/// The smallest data cache that holds `bytes`, by the sizes sysinfo read ("L1", …, "DRAM").
pub fn level_for(ctx: &Context, bytes: u64) -> String {
    let mut caches: Vec<_> = ctx
        .host
        .cpu
        .caches
        .iter()
        .filter(|c| c.kind != "Instruction")
        .collect();
    caches.sort_by_key(|c| c.level);
    caches
        .iter()
        .find(|c| bytes <= c.size_bytes)
        .map_or_else(|| "DRAM".to_string(), |c| format!("L{}", c.level))
}

/// The lines to print after a sweep: where the latency steps up, next to the cache sizes.
pub fn boundaries(ctx: &Context, curve: &[(u64, f64)]) -> Vec<String> {
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
        .caches
        .iter()
        .filter(|c| c.kind != "Instruction")
        .map(|c| format!("L{} {}", c.level, format_size_approx(c.size_bytes)))
        .collect();
    if !caches.is_empty() {
        lines.push(format!("caches (sysinfo): {}", caches.join(", ")));
    }
    lines
}

/// Links the nodes of `region` into one random cycle (Sattolo) and returns the first node.
pub fn link(region: &mut Region, seed: u64) -> *const u8 {
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
pub unsafe fn chase(mut p: *const u8, loads: u64) -> *const u8 {
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

/// One working-set size.
struct LatencyCase {
    size: u64,
    huge_pages: bool,
    duration: Duration,
    sweep: Arc<Sweep>,
}

struct ChaseWorker {
    region: Region,
    at: *const u8,
    /// (CPU ns, loads) of each round, warm-up first.
    rounds: Arc<Mutex<Vec<(u64, u64)>>>,
}

/// The clock of the current core, GHz: a chain of dependent adds (one per cycle) timed by the
/// thread's CPU time, best of five 20 ms runs. `cpu::kernels::measure_clock_ghz` does the same
/// with wall time, which on a busy machine counts the time the thread waits for a core and
/// reads a clock several times too slow.
pub fn clock_ghz() -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        let mut best: f64 = 0.0;
        for _ in 0..5 {
            let start = thread_cpu_ns();
            let mut rounds = 0u64;
            let mut x = 0u64;
            while thread_cpu_ns() - start < 20_000_000 {
                for _ in 0..10_000 {
                    // SAFETY: register-only adds; no memory, no stack, flags clobbered only.
                    unsafe {
                        std::arch::asm!(".rept 100", "add {x}, 1", ".endr", x = inout(reg) x, options(nomem, nostack));
                    }
                }
                rounds += 1;
            }
            std::hint::black_box(x);
            let ns = (thread_cpu_ns() - start) as f64;
            best = best.max(rounds as f64 * 1_000_000.0 / ns);
        }
        Some(best)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

/// CPU time of the calling thread, ns: it stops while the thread is descheduled (and, with
/// paravirtual steal accounting, while the hypervisor runs another guest on the core).
fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: t is a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
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

impl Case for LatencyCase {
    fn id(&self) -> String {
        format!(
            "mem-latency-{}{}",
            self.size,
            if self.huge_pages { "-huge" } else { "" }
        )
    }

    fn label(&self) -> String {
        format!(
            "mem latency {}{}",
            format_size(self.size),
            if self.huge_pages { " huge pages" } else { "" }
        )
    }

    fn estimate(&self, ctx: &Context) -> Duration {
        // Linking costs a random access per node.
        let link = Duration::from_secs_f64((self.size / NODE as u64) as f64 * 30e-9);
        link + ctx.runner.warmup + self.duration * ctx.runner.repetitions
    }

    fn run(&self, ctx: &Context) -> Result<BenchResult> {
        let settings = ctx.runner.settings(1, Stop::Duration(self.duration));
        let size = self.size as usize / NODE * NODE;
        let huge = if self.huge_pages {
            HugePages::Ask
        } else {
            HugePages::Refuse
        };
        let rounds = Arc::new(Mutex::new(Vec::new()));
        let reps = runner::measure(&settings, |_| {
            let mut region = Region::map(size, huge)?;
            let at = link(&mut region, 0x2545_f491_4f6c_dd1d ^ self.size);
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
        let level = level_for(ctx, self.size);
        let mut params = Params {
            threads: Some(1),
            pinned: Some(ctx.runner.pin),
            working_set_bytes: Some(size as u64),
            duration_s: Some(self.duration.as_secs_f64()),
            ..Params::default()
        };
        params
            .other
            .insert("huge_pages".into(), self.huge_pages.into());
        params.other.insert("nodes".into(), (size / NODE).into());
        params
            .other
            .insert("cache_level".into(), level.clone().into());
        let info = CaseInfo {
            id: self.id(),
            subsystem: Subsystem::Memory,
            op: "latency".into(),
            params,
            metric: "latency".into(),
            unit: "ns".into(),
            counting: format!(
                "the thread's CPU time / dependent loads (time descheduled is not counted; the \
                 wall-clock value is extra latency_wall); one 8-byte load per 64-byte node, nodes in a random \
                 single cycle (Sattolo); {} pages",
                if self.huge_pages {
                    "transparent huge"
                } else {
                    "4 KiB"
                }
            ),
        };
        let Some(mut result) = BenchResult::from_samples(&ctx.host.hostname, info, samples.clone())
        else {
            bail!("no repetition produced a finite latency");
        };
        let ghz = *self.sweep.clock_ghz.get_or_init(clock_ghz);
        if let Some(ghz) = ghz {
            let cycles: Vec<f64> = samples.iter().map(|ns| ns * ghz).collect();
            if let Some(stats) = Summary::of(&cycles) {
                result.extra.push(Extra {
                    metric: "latency_cycles".into(),
                    unit: "cycles".into(),
                    value: stats.median,
                    stats,
                });
            }
            result
                .params
                .other
                .insert("clock_ghz_measured".into(), ghz.into());
        }
        if let Some(stats) = Summary::of(&wall_ns) {
            if stats.median > result.value * 1.1 {
                result.warnings.push(format!(
                    "the thread was off its core {:.0} % of the wall time (other work on the \
                     machine); the value counts only its CPU time; close other work for a \
                     cleaner curve",
                    (1.0 - result.value / stats.median) * 100.0
                ));
            }
            result.extra.push(Extra {
                metric: "latency_wall".into(),
                unit: "ns".into(),
                value: stats.median,
                stats,
            });
        }
        let mut curve = self.sweep.curve.lock().unwrap();
        if let Some(&(previous, ns)) = curve.last()
            && previous < self.size
        {
            result
                .params
                .other
                .insert("step_from_previous".into(), (result.value / ns).into());
        }
        curve.push((self.size, result.value));
        let mut warnings = runner::repetition_warnings(&reps, result.stats.cv);
        warnings.append(&mut result.warnings);
        result.warnings = warnings;
        Ok(result)
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
