//! `peakbench mem latency --load-threads N`: the pointer chase of [`super::latency`] on one CPU
//! while N other threads stream over buffers of their own, at several load levels, so that
//! latency can be read against the bandwidth the other threads achieve (the curve Intel's MLC
//! calls loaded latency).
//!
//! Each load thread repeats one operation (read, write or copy) over its buffer in chunks of
//! [`CHUNK_BYTES`]; after each chunk it waits `pace` (spinning on the monotonic clock), so a
//! longer pace is a lighter load. The levels of one sweep are the no-load point (no load thread
//! runs), then each pace given (0 = unpaced). Bytes are counted per completed chunk as `mem`
//! counts them (read: B, write: B, copy: 2·B) and the load bandwidth of a repetition is the
//! bytes of the chunks completed while the chase ran ÷ that wall time. The chase is timed by its
//! thread's CPU time, as the unloaded sweep is. The chase thread is pinned to the first CPU this
//! process may use and the load threads to the others (wrapping when there are more threads
//! than CPUs), so they do not share a core where the machine has enough of them.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use super::kernels::{self, MemIsa};
use super::latency::{NODE, chase, level_for, link};
use super::region::{HugePages, Region};
use crate::error::usage;
use crate::names::named_enum;
use crate::plan::{Case, CaseSpec, Context};
use crate::result::{BenchResult, Params, Subsystem};
use crate::runner::{self, Round};
use crate::sysinfo::clock::thread_cpu_ns;
use crate::units::format_size;

/// Bytes one load thread moves between two looks at the clock (and two pauses).
pub(crate) const CHUNK_BYTES: usize = 64 * 1024;
/// Dependent loads between two looks at the clock.
const LOADS: u64 = 1 << 12;
/// The byte the load buffers hold (read checksums are compared with its closed form).
const FILL: u8 = 0x5a;

named_enum! {
    /// What the load threads do.
    pub(crate) enum LoadOp {
        /// read their buffer, every word folded into a verified checksum
        Read = "read",
        /// store a constant byte over their buffer
        Write = "write",
        /// copy one half of their buffer to the other
        Copy = "copy",
    }
}

/// The default pauses after each chunk, µs: unpaced, then lighter and lighter loads (a 64 KiB
/// chunk takes about 3–10 µs at 5–20 GB/s per thread).
pub(crate) const DEFAULT_PACES_US: [u64; 5] = [0, 2, 8, 32, 128];
/// The default buffer of each load thread: above the last-level caches of current CPUs.
pub(crate) const DEFAULT_LOAD_BYTES: u64 = 256 << 20;
/// The smallest buffer of a load thread: two chunks.
const MIN_LOAD_BYTES: u64 = 2 * CHUNK_BYTES as u64;
/// The longest pause after a chunk.
const MAX_PACE: Duration = Duration::from_secs(1);

/// The default chase working set under load: 256 MiB (DRAM), or 1/4 of the memory available.
pub(crate) fn default_loaded_size(ctx: &Context) -> u64 {
    let available = ctx.host.memory.available_bytes;
    if available > 0 {
        (256u64 << 20).min(available / 4).max(1 << 20)
    } else {
        256 << 20
    }
}

/// The cases of a loaded sweep: each size at each level, the no-load level first.
pub(crate) fn plan(
    options: &super::latency::LatencyOptions,
    load: LoadOptions,
    ctx: &Context,
) -> Result<Vec<Box<dyn Case>>> {
    if load.bytes < MIN_LOAD_BYTES {
        return Err(usage(format!(
            "--load-size: {} is less than two {} chunks: give at least 128KiB",
            format_size(load.bytes),
            format_size(CHUNK_BYTES as u64)
        )));
    }
    if let Some(p) = load.paces.iter().find(|p| **p > MAX_PACE) {
        return Err(usage(format!(
            "--load-pace: {} after each chunk is no load at all: give at most 1s",
            humantime::format_duration(*p)
        )));
    }
    let available = ctx.host.memory.available_bytes;
    let largest = options.sizes.iter().copied().max().unwrap_or(0);
    let need = largest.saturating_add((load.threads as u64).saturating_mul(load.bytes));
    if available > 0 && need > available {
        return Err(usage(format!(
            "--load-size: {} load threads × {} plus the {} chase need more than the {} of \
             memory available: give a smaller --load-size or fewer --load-threads",
            load.threads,
            format_size(load.bytes),
            format_size(largest),
            crate::units::format_size_approx(available)
        )));
    }
    // The sizes' own checks (at least two nodes, within memory) are the unloaded sweep's.
    super::latency::plan(options, ctx)?;
    let load = Arc::new(load);
    let mut cases: Vec<Box<dyn Case>> = Vec::new();
    for &size in &options.sizes {
        for level in load.levels() {
            cases.push(Box::new(LoadedCase {
                size,
                huge_pages: options.huge_pages,
                duration: options.duration,
                load: load.clone(),
                level,
            }));
        }
    }
    Ok(cases)
}

/// One load level: no load at all, or load threads pausing `pace` after each chunk.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum LoadLevel {
    NoLoad,
    Paced(Duration),
}

/// The settings of a loaded sweep.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct LoadOptions {
    pub threads: usize,
    pub op: LoadOp,
    /// Pauses after each chunk, one level each (0 = unpaced); the no-load level comes first.
    pub paces: Vec<Duration>,
    /// Buffer bytes of each load thread.
    pub bytes: u64,
}

impl LoadOptions {
    /// The levels in order: no load, then each pace as given.
    pub(crate) fn levels(&self) -> Vec<LoadLevel> {
        std::iter::once(LoadLevel::NoLoad)
            .chain(self.paces.iter().map(|&p| LoadLevel::Paced(p)))
            .collect()
    }
}

/// The CPUs of the chase thread and of each load thread: the chase on the first CPU, the loads
/// on the others, wrapping; with a single CPU, nothing is pinned.
pub(crate) fn placement(cpus: &[usize], load_threads: usize) -> Option<(usize, Vec<usize>)> {
    if cpus.len() < 2 {
        return None;
    }
    let rest = &cpus[1..];
    Some((
        cpus[0],
        (0..load_threads).map(|i| rest[i % rest.len()]).collect(),
    ))
}

/// One working-set size at one load level.
pub(crate) struct LoadedCase {
    pub size: u64,
    pub huge_pages: bool,
    pub duration: Duration,
    pub load: Arc<LoadOptions>,
    pub level: LoadLevel,
}

/// A load thread's share of a level: bytes of completed chunks, and whether it failed.
struct Shared {
    bytes: AtomicU64,
    stop: AtomicBool,
    failure: Mutex<Option<String>>,
}

/// The bytes a chunk of `len` counts for `op`.
fn counted(op: LoadOp, len: usize) -> u64 {
    match op {
        LoadOp::Read | LoadOp::Write => len as u64,
        LoadOp::Copy => 2 * len as u64,
    }
}

/// One load thread: repeats `op` over its own buffer chunk by chunk until told to stop.
fn load_thread(op: LoadOp, bytes: usize, pace: Duration, cpu: Option<usize>, shared: &Shared) {
    let fail = |e: String| {
        shared.failure.lock().unwrap().get_or_insert(e);
    };
    if let Some(cpu) = cpu
        && let Err(e) = runner::pin_to(cpu)
    {
        return fail(e.to_string());
    }
    let mut region = match Region::map(bytes, HugePages::System) {
        Ok(r) => r,
        Err(e) => return fail(e.to_string()),
    };
    match op {
        LoadOp::Read => kernels::fill_read_source(region.as_mut_slice()),
        _ => region.as_mut_slice().fill(FILL),
    }
    let isa = MemIsa::detect();
    let base = region.as_ptr();
    // A copy moves the first half into the second; read and write span the buffer.
    let span = match op {
        LoadOp::Copy => bytes / 2,
        _ => bytes,
    };
    let chunks = (span / CHUNK_BYTES).max(1);
    let len = CHUNK_BYTES.min(span);
    let expected = kernels::read_checksum(isa, len);
    let mut k = 0;
    while !shared.stop.load(Ordering::Relaxed) {
        let at = (k % chunks) * len;
        // SAFETY: at + len ≤ span ≤ the region's length; a copy's source (first half) and
        // destination (second half) do not overlap.
        unsafe {
            match op {
                LoadOp::Read => {
                    let sum = kernels::read(isa, base.add(at), len);
                    if std::hint::black_box(sum) != expected {
                        return fail(format!(
                            "a load thread read checksum {sum:#x}, expected {expected:#x}: the \
                             loads were not done as counted"
                        ));
                    }
                }
                LoadOp::Write => kernels::write(isa, base.add(at), len, FILL, false),
                LoadOp::Copy => kernels::copy(isa, base.add(span + at), base.add(at), len, false),
            }
        }
        shared.bytes.fetch_add(counted(op, len), Ordering::Relaxed);
        k += 1;
        if !pace.is_zero() {
            let until = Instant::now() + pace;
            while Instant::now() < until {
                std::hint::spin_loop();
            }
        }
    }
    std::hint::black_box(region.as_slice().first());
}

impl LoadedCase {
    fn pace_ns(&self) -> Option<u64> {
        match self.level {
            LoadLevel::NoLoad => None,
            LoadLevel::Paced(p) => Some(p.as_nanos() as u64),
        }
    }

    fn level_name(&self) -> String {
        match self.level {
            LoadLevel::NoLoad => "no load".into(),
            LoadLevel::Paced(p) if p.is_zero() => "unpaced".into(),
            LoadLevel::Paced(p) => format!("pace {}", humantime::format_duration(p)),
        }
    }
}

impl Case for LoadedCase {
    fn spec(&self) -> CaseSpec {
        let size = self.size as usize / NODE * NODE;
        let mut params = Params {
            threads: Some(1),
            pinned: Some(runner::online_cpus().len() >= 2),
            working_set_bytes: Some(size as u64),
            duration_s: Some(self.duration.as_secs_f64()),
            ..Params::default()
        };
        let other = &mut params.other;
        other.insert("huge_pages".into(), self.huge_pages.into());
        // The sweep's load; pace_ns null is its no-load level (no load thread runs).
        other.insert("load_threads".into(), self.load.threads.into());
        other.insert("load_op".into(), self.load.op.name().into());
        other.insert("pace_ns".into(), self.pace_ns().into());
        other.insert("load_bytes_per_thread".into(), self.load.bytes.into());
        let level = match self.pace_ns() {
            None => "noload".to_string(),
            Some(ns) => format!("pace{ns}"),
        };
        CaseSpec {
            id: format!(
                "mem-latency-{}{}-load{}-{}-{level}",
                self.size,
                if self.huge_pages { "-huge" } else { "" },
                self.load.threads,
                self.load.op.name()
            ),
            label: format!(
                "mem latency {} under {} × {} load, {}",
                format_size(self.size),
                self.load.threads,
                self.load.op.name(),
                self.level_name()
            ),
            subsystem: Subsystem::Memory,
            op: "latency".into(),
            params,
        }
    }

    fn estimate(&self, ctx: &Context) -> Duration {
        let link = Duration::from_secs_f64((self.size / NODE as u64) as f64 * 30e-9);
        let fill = Duration::from_secs_f64(self.load.bytes as f64 / 2e9);
        link + fill + ctx.runner.warmup + self.duration * ctx.runner.repetitions
    }

    fn run(&self, ctx: &Context) -> Result<BenchResult> {
        let cpus = runner::online_cpus();
        let (chase_cpu, load_cpus) = match placement(&cpus, self.load.threads) {
            Some((c, l)) => (Some(c), l.into_iter().map(Some).collect()),
            None => (None, vec![None; self.load.threads]),
        };
        let shared = Shared {
            bytes: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            failure: Mutex::new(None),
        };
        let pace = match self.level {
            LoadLevel::NoLoad => None,
            LoadLevel::Paced(p) => Some(p),
        };
        let bytes = self.load.bytes as usize;
        let op = self.load.op;
        let rounds = std::thread::scope(|scope| -> Result<Vec<(f64, f64)>> {
            if let Some(pace) = pace {
                for cpu in &load_cpus {
                    let (shared, cpu) = (&shared, *cpu);
                    scope.spawn(move || load_thread(op, bytes, pace, cpu, shared));
                }
            }
            let chase_thread = scope.spawn(|| self.chase(ctx, chase_cpu, pace.is_some(), &shared));
            let result = chase_thread
                .join()
                .expect("the chase thread does not panic");
            shared.stop.store(true, Ordering::Relaxed);
            result
        })?;
        if let Some(failure) = shared.failure.lock().unwrap().take() {
            bail!("{failure}");
        }
        let latency: Vec<f64> = rounds.iter().map(|r| r.0).collect();
        let bandwidth: Vec<f64> = rounds.iter().map(|r| r.1).collect();
        let result = self
            .spec()
            .measured(
                &ctx.host.hostname,
                "latency",
                "ns",
                self.counting(),
                latency,
            )?
            .param("cache_level", level_for(ctx, self.size))
            .extra("load_bandwidth", "GB/s", &bandwidth)
            .warn(self.sharing_warning(chase_cpu.is_some(), cpus.len()));
        Ok(result.finish())
    }
}

impl LoadedCase {
    /// The chase thread: on its CPU, it links its chain, waits until the load threads (when
    /// `loaded`) have started, then times each round. Each measured round gives (chase CPU ns /
    /// loads, load bytes / chase wall ns).
    fn chase(
        &self,
        ctx: &Context,
        cpu: Option<usize>,
        loaded: bool,
        shared: &Shared,
    ) -> Result<Vec<(f64, f64)>> {
        if let Some(cpu) = cpu {
            runner::pin_to(cpu)?;
        }
        let huge = if self.huge_pages {
            HugePages::Ask
        } else {
            HugePages::Refuse
        };
        let mut region = Region::map(self.size as usize / NODE * NODE, huge)?;
        let mut at = link(&mut region, 0x2545_f491_4f6c_dd1d ^ self.size);
        if loaded {
            // The load threads fill their buffers first: wait until each moved a chunk.
            wait_for_loads(shared, counted(self.load.op, 1) * self.load.threads as u64)?;
        }
        let rounds = runner::repeat(&ctx.runner, ctx.runner.repetitions, |round| {
            let length = match round {
                Round::Warmup(d) => d.min(self.duration),
                Round::Measured(_) => self.duration,
            };
            chase_round(&region, &mut at, length, shared)
        });
        rounds.map(|r| r.into_iter().map(|t| t.value).collect())
    }

    /// How the latency and the load bandwidth are counted.
    fn counting(&self) -> String {
        format!(
            "the chase thread's CPU time / dependent loads (one 8-byte load per 64-byte node, \
             nodes in a random single cycle); load_bandwidth (extra): bytes of the chunks the load \
             threads completed while the chase ran / its wall time, decimal GB/s (10^9 B/s), \
             {} per {} chunk; each load thread pauses the pace after each chunk",
            match self.load.op {
                LoadOp::Copy => "2·B (read + written)",
                LoadOp::Read => "B read, checksum verified",
                LoadOp::Write => "B written",
            },
            format_size(CHUNK_BYTES as u64),
        )
    }

    /// A warning when the chase shares a CPU with the loads (`pinned`: the chase has a CPU of
    /// its own, among `cpus`).
    fn sharing_warning(&self, pinned: bool, cpus: usize) -> Option<String> {
        if !pinned {
            Some(
                "a single CPU: the chase and the load threads share it, so the latency includes \
                 waiting for the CPU"
                    .to_string(),
            )
        } else if self.load.threads + 1 > cpus {
            Some(format!(
                "{} load threads on the {} CPUs other than the chase's: they share cores",
                self.load.threads,
                cpus - 1
            ))
        } else {
            None
        }
    }
}

/// Waits until the load threads moved `want` bytes (or one failed), at most 60 s.
fn wait_for_loads(shared: &Shared, want: u64) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while shared.bytes.load(Ordering::Relaxed) < want && shared.failure.lock().unwrap().is_none() {
        if Instant::now() > deadline {
            bail!("the load threads moved nothing in 60 s");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// One round of the chase from `at` for `length`: (CPU ns per load, load bytes per wall ns).
/// Fails when the chase left its chain.
fn chase_round(
    region: &Region,
    at: &mut *const u8,
    length: Duration,
    shared: &Shared,
) -> Result<(f64, f64)> {
    let before = shared.bytes.load(Ordering::Relaxed);
    let wall_start = Instant::now();
    let cpu_start = thread_cpu_ns();
    let mut loads = 0u64;
    while wall_start.elapsed() < length {
        // SAFETY: `at` is a node of the chain in `region`, alive here.
        *at = unsafe { chase(std::hint::black_box(*at), LOADS) };
        loads += LOADS;
    }
    let cpu = thread_cpu_ns() - cpu_start;
    let wall = wall_start.elapsed();
    let moved = shared.bytes.load(Ordering::Relaxed) - before;
    let offset = (*at as usize).wrapping_sub(region.as_ptr() as usize);
    if offset >= region.len() || !offset.is_multiple_of(NODE) {
        bail!("the chase left its chain (offset {offset}): the loads were not done");
    }
    Ok((
        cpu as f64 / loads as f64,
        moved as f64 / wall.as_nanos() as f64,
    ))
}

/// The lines after a loaded sweep: the curve, latency against load bandwidth, one line per
/// level.
pub(crate) fn curve(_ctx: &Context, results: &[&BenchResult]) -> Vec<String> {
    let mut lines = vec!["loaded latency (latency against the load threads' bandwidth):".into()];
    let mut table = crate::text::Table::new(&[
        ("working set", crate::text::Align::Right),
        ("load", crate::text::Align::Left),
        ("pace", crate::text::Align::Right),
        ("load GB/s", crate::text::Align::Right),
        ("latency ns", crate::text::Align::Right),
    ]);
    for r in results {
        let other = &r.params.other;
        let bandwidth = r
            .extra
            .iter()
            .find(|e| e.metric == "load_bandwidth")
            .map_or(0.0, |e| e.value);
        let pace = match other.get("pace_ns").and_then(|v| v.as_u64()) {
            None => "no load".to_string(),
            Some(0) => "unpaced".to_string(),
            Some(ns) => humantime::format_duration(Duration::from_nanos(ns)).to_string(),
        };
        table.row([
            format_size(r.params.working_set_bytes.unwrap_or(0)),
            if other.get("pace_ns").is_some_and(|v| !v.is_null()) {
                format!(
                    "{} × {}",
                    other
                        .get("load_threads")
                        .and_then(|v| v.as_u64())
                        .unwrap_or(0),
                    other.get("load_op").and_then(|v| v.as_str()).unwrap_or("-")
                )
            } else {
                "none".to_string()
            },
            pace,
            format!("{bandwidth:.2}"),
            format!("{:.1}", r.value),
        ]);
    }
    lines.extend(table.render().lines().map(|l| format!("  {l}")));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chase_and_the_loads_get_distinct_cpus_where_there_are_enough() {
        assert_eq!(placement(&[0], 3), None);
        assert_eq!(placement(&[0, 1], 1), Some((0, vec![1])));
        assert_eq!(placement(&[2, 5, 7], 3), Some((2, vec![5, 7, 5])));
    }

    #[test]
    fn copy_counts_read_and_written_bytes() {
        assert_eq!(counted(LoadOp::Read, 100), 100);
        assert_eq!(counted(LoadOp::Write, 100), 100);
        assert_eq!(counted(LoadOp::Copy, 100), 200);
    }

    #[test]
    fn the_levels_start_with_no_load() {
        let options = LoadOptions {
            threads: 1,
            op: LoadOp::Read,
            paces: vec![Duration::ZERO, Duration::from_micros(8)],
            bytes: 1 << 20,
        };
        assert_eq!(
            options.levels(),
            [
                LoadLevel::NoLoad,
                LoadLevel::Paced(Duration::ZERO),
                LoadLevel::Paced(Duration::from_micros(8))
            ]
        );
    }
}
