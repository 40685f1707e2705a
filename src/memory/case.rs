//! One bandwidth case: the block and STREAM workers, how bytes are counted, and their checks.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Result, bail};

use super::kernels::{self, MemIsa, Stream};
use super::op::MemOp;
use super::reference;
use super::region::{HugePages, Region};
use super::work::Work;
use crate::peak::{self, CacheLevel};
use crate::plan::{Case, CaseSpec, Context, guess};
use crate::result::{BenchResult, Params, Subsystem};
use crate::rng::Rng;
use crate::runner::{self, Quota, Repetition, RunSettings, Stop, Tally, Worker};
use crate::units::{format_size, format_size_approx};

/// The byte every copy's source region is filled with (a read's holds `kernels::READ_WORD`).
const FILL: u8 = 0x5a;
/// The byte every destination region holds before the run.
const INIT: u8 = 0x11;
/// The byte write kernels store.
const WRITTEN: u8 = 0xa5;
/// STREAM's starting values of a, b, c (c is not 0 so that every kernel changes its output).
const START: [f64; 3] = [1.0, 2.0, 4.0];

/// One operation, block size and thread count.
pub(crate) struct BandwidthCase {
    pub op: MemOp,
    /// `None` for STREAM kernels (they stream whole arrays).
    pub block: Option<u64>,
    pub threads: usize,
    /// Bytes of each region (or STREAM array) of each thread, a whole number of blocks.
    pub slice: u64,
    pub nt: bool,
    pub duration: Duration,
    /// Fixed work per repetition instead of `duration`.
    pub work: Option<Work>,
    pub isa: MemIsa,
    /// Threads pinned to CPUs (`--pin`), for the record.
    pub pin: bool,
}

impl BandwidthCase {
    fn regions(&self) -> u64 {
        match self.op.stream() {
            Some(kernel) => kernel.arrays(),
            None => {
                let (r, w) = self.op.regions();
                u64::from(r) + u64::from(w)
            }
        }
    }

    /// Bytes of all threads' regions together: the working set actually used.
    pub(crate) fn working_set(&self) -> u64 {
        self.slice * self.regions() * self.threads as u64
    }

    /// What the standard tools are asked to measure beside this case.
    fn tool_case(&self) -> reference::ToolCase {
        reference::ToolCase {
            op: self.op,
            block: self.block,
            threads: self.threads,
            nt: self.nt,
            isa: self.isa,
            slice: self.slice,
            working_set: self.working_set(),
        }
    }

    /// Bytes counted per access (block ops) or per element (STREAM).
    fn bytes_per_unit(&self) -> u64 {
        match (self.op.stream(), self.block) {
            (Some(kernel), _) => kernel.bytes_per_element(),
            (None, block) => self.op.bytes_per_access(block.unwrap_or(1)),
        }
    }

    fn stop(&self) -> Stop {
        match self.work {
            None => Stop::Duration(self.duration),
            Some(work) => Stop::Work(work.units(self.bytes_per_unit())),
        }
    }

    fn counting(&self) -> String {
        let allocate = if self.nt {
            "non-temporal stores: no write-allocate traffic"
        } else {
            "write-allocate reads of written lines are not counted (they add 1× the bytes written on the bus)"
        };
        let how = match (self.op, self.block) {
            (MemOp::StreamCopy, _) => "STREAM: c = a, 16 B per element (8 read + 8 written)",
            (MemOp::StreamScale, _) => "STREAM: b = 3·c, 16 B per element (8 read + 8 written)",
            (MemOp::StreamAdd, _) => "STREAM: c = a + b, 24 B per element (16 read + 8 written)",
            (MemOp::StreamTriad, _) => {
                "STREAM: a = b + 3·c, 24 B per element (16 read + 8 written)"
            }
            (MemOp::Read | MemOp::RandRead, _) => {
                "bytes read: B per access of a B-byte block, every byte folded into a verified checksum"
            }
            (MemOp::Write | MemOp::RandWrite, _) => {
                "bytes written: B per access of a B-byte block, verified after the run"
            }
            (MemOp::Copy, _) => "bytes read + bytes written: 2·B per access of a B-byte block",
            (MemOp::RandRw, _) => {
                "bytes read + bytes written: 2·B per access, a B-byte block copied from one random offset to another"
            }
        };
        let writes = !matches!(self.op, MemOp::Read | MemOp::RandRead);
        let mut text = format!("{how}; decimal GB/s (10^9 B/s)");
        if writes {
            text.push_str("; ");
            text.push_str(allocate);
        }
        if self.op.random() {
            text.push_str("; offsets from wyrand, block-aligned, generated in the loop but not counted as bytes");
        }
        if self.block.is_some() {
            text.push_str(
                "; access_time = elapsed times of all threads added up / accesses of all threads \
                 (one thread's time per access); wall_time_per_access = repetition wall time / \
                 accesses of all threads (falls as threads are added)",
            );
        }
        text
    }

    fn id_and_label(&self) -> (String, String) {
        let nt = if self.nt { "-nt" } else { "" };
        match self.block {
            Some(block) => (
                // The working set is part of the id: the same op and block over an L1-sized
                // and a DRAM-sized set are different cases (ids before it had none).
                format!(
                    "mem-{}{nt}-b{block}-s{}-t{}",
                    self.op.name(),
                    self.working_set(),
                    self.threads
                ),
                format!(
                    "mem {}{nt} block {} {} threads {}",
                    self.op.name(),
                    format_size(block),
                    self.threads,
                    format_size_approx(self.working_set())
                ),
            ),
            None => (
                format!(
                    "mem-{}{nt}-s{}-t{}",
                    self.op.name(),
                    self.working_set(),
                    self.threads
                ),
                format!(
                    "mem {}{nt} {} threads {}",
                    self.op.name(),
                    self.threads,
                    format_size_approx(self.working_set())
                ),
            ),
        }
    }
}

impl BandwidthCase {
    /// The cache (L1, L2, L3) each core's share of the working set stays in, for a kernel
    /// whose peak there the ports and lines give: sequential or STREAM, cached stores, blocks
    /// of 4 KiB or more (a smaller block spends a share of its time in the call per block).
    pub(super) fn cache_level(&self, ctx: &Context) -> Option<CacheLevel> {
        self.op.accesses()?;
        if self.nt || self.block.is_some_and(|b| b < 4096) {
            return None;
        }
        let cores = self.threads.min(ctx.host.cpu.physical_cores.max(1)) as u64;
        CacheLevel::holding(&ctx.host, self.working_set() / cores, self.working_set())
    }
}

impl Case for BandwidthCase {
    fn spec(&self) -> CaseSpec {
        let (id, label) = self.id_and_label();
        let mut params = Params {
            threads: Some(self.threads),
            pinned: Some(self.pin),
            isa: Some(self.isa.name().to_string()),
            block_bytes: self.block,
            working_set_bytes: Some(self.working_set()),
            duration_s: self.work.is_none().then_some(self.duration.as_secs_f64()),
            ..Params::default()
        };
        if let Some(work) = self.work {
            let units = work.units(self.bytes_per_unit());
            params
                .other
                .insert("ops_per_repetition".into(), units.into());
            // Past 2^64 bytes (--ops near u64::MAX) the count is a float, never a wrapped one.
            let bytes = match units.checked_mul(self.bytes_per_unit()) {
                Some(bytes) => bytes.into(),
                None => (units as f64 * self.bytes_per_unit() as f64).into(),
            };
            params.other.insert("bytes_per_repetition".into(), bytes);
        }
        params.other.insert("nt".into(), self.nt.into());
        params.other.insert(
            "scaling".into(),
            "strong: the working set is split among threads".into(),
        );
        CaseSpec {
            id,
            label,
            subsystem: Subsystem::Memory,
            op: self.op.name().to_string(),
            params,
        }
    }

    fn estimate(&self, ctx: &Context) -> Duration {
        // Touching the pages before timing runs at roughly 4 GB/s.
        let prepare = guess::secs(self.working_set() as f64 / 4e9);
        // Fixed work is guessed at 10 GB/s.
        let rep = match self.work {
            None => self.duration,
            Some(work) => guess::secs(
                work.units(self.bytes_per_unit()) as f64 * self.bytes_per_unit() as f64 / 10e9,
            ),
        };
        guess::sum([
            prepare,
            ctx.runner.warmup,
            guess::times(rep, ctx.runner.repetitions.into()),
        ])
    }

    fn run(&self, ctx: &Context) -> Result<BenchResult> {
        let settings = RunSettings::new(&ctx.runner, self.threads, self.stop());
        let failures = Arc::new(Mutex::new(Vec::<String>::new()));
        let reps = match self.op.stream() {
            Some(kernel) => runner::measure(&settings, |_| {
                StreamWorker::prepare(kernel, self, failures.clone())
            })?,
            None => runner::measure(&settings, |index| {
                BlockWorker::prepare(self, index, failures.clone())
            })?,
        };
        // The clock right after a case held in a cache: its peak stands on the clock measured
        // at the start of the run, and a shared host's boost clock moves from minute to minute
        // (3.4-3.9 GHz within one quick run on a Sapphire Rapids-class guest, where an L1 copy
        // then read 1.05 of its peak at the run's first clock).
        let level = self.cache_level(ctx);
        let clock_after: Vec<f64> = level
            .and_then(|_| crate::sysinfo::clock::glance_ghz())
            .into_iter()
            .collect();
        if let Some(failure) = failures.lock().unwrap().first() {
            bail!("{failure}");
        }
        let samples: Vec<f64> = reps.iter().map(|r| r.units_per_sec() / 1e9).collect();
        let mut result = self
            .spec()
            .measured(
                &ctx.host.hostname,
                "throughput",
                "GB/s",
                self.counting(),
                samples,
            )?
            .walls(reps.iter().map(|r| r.wall));
        result = match level {
            Some(level) => result.param("cache_level", level.name()).peak(
                peak::cache_peak(
                    &ctx.host,
                    &ctx.peaks.cpu.factors,
                    level,
                    self.op
                        .accesses()
                        .expect("cache_level checked the accesses"),
                    self.threads,
                )
                .ok(),
            ),
            None => result.peak(ctx.peaks.memory.as_ref()),
        };
        result = result
            .warn(runner::oversubscription_warning(self.threads))
            .warn(runner::off_core_warning(&reps, self.threads));
        if self.block.is_some() {
            result = result
                .extra("access_time", "ns", &access_times(&reps))
                .extra("wall_time_per_access", "ns", &wall_times_per_access(&reps));
        }
        result = result.extra("clock_after", "GHz", &clock_after);
        // Last: the times above are what a reader of the extras looks for first.
        result = result.extra("off_core", "%", &runner::off_core_percent(&reps));
        if ctx.runner.reference {
            let case = self.tool_case();
            result = result.reference(reference::for_case(&case)?);
            if let Some(bare) = reference::bare_loads(&case) {
                result = result.other_reference(bare?);
            }
        }
        Ok(result.finish())
    }
}

/// Access time per thread (`access_time`, ns): the elapsed times of all threads added up ÷ the
/// accesses of all threads, per repetition. What one thread waits for each of its accesses: it
/// stays flat as threads are added while the memory keeps up with them.
fn access_times(reps: &[Repetition]) -> Vec<f64> {
    reps.iter()
        .filter(|r| r.ops > 0)
        .map(|r| r.thread_time.as_secs_f64() * 1e9 / r.ops as f64)
        .collect()
}

/// Wall time per access (`wall_time_per_access`, ns): the repetition's wall time ÷ the accesses
/// of all threads, per repetition, as the users' reports count memory latency. It falls as
/// threads are added (n threads sharing one wall time), so it is not a thread's access time.
fn wall_times_per_access(reps: &[Repetition]) -> Vec<f64> {
    reps.iter()
        .filter(|r| r.ops > 0 && !r.wall.is_zero())
        .map(|r| r.wall.as_secs_f64() * 1e9 / r.ops as f64)
        .collect()
}

/// One thread of a block operation.
struct BlockWorker {
    op: MemOp,
    isa: MemIsa,
    nt: bool,
    block: usize,
    blocks: usize,
    src: Option<Region>,
    dst: Option<Region>,
    position: usize,
    rng: Rng,
    /// Accesses done over all rounds, for the final check.
    accesses: u64,
    failures: Arc<Mutex<Vec<String>>>,
}

impl BlockWorker {
    fn prepare(
        case: &BandwidthCase,
        index: usize,
        failures: Arc<Mutex<Vec<String>>>,
    ) -> Result<BlockWorker> {
        let block = case.block.expect("block ops have a block") as usize;
        let slice = case.slice as usize;
        let (reads, writes) = case.op.regions();
        // Each region is first touched here, by this thread.
        let map = |fill: u8| -> Result<Region> {
            let mut region = Region::map(slice, HugePages::System)?;
            if !writes {
                kernels::fill_read_source(region.as_mut_slice());
            } else {
                region.as_mut_slice().fill(fill);
            }
            Ok(region)
        };
        Ok(BlockWorker {
            op: case.op,
            isa: case.isa,
            nt: case.nt,
            block,
            blocks: slice / block,
            src: if reads { Some(map(FILL)?) } else { None },
            dst: if writes { Some(map(INIT)?) } else { None },
            position: 0,
            rng: Rng::for_thread(0xd1b5_4a32_d192_ed03, index),
            accesses: 0,
            failures,
        })
    }

    #[inline]
    fn next_offset(&mut self) -> usize {
        if self.op.random() {
            self.rng.index(self.blocks) * self.block
        } else {
            let offset = self.position * self.block;
            self.position += 1;
            if self.position == self.blocks {
                self.position = 0;
            }
            offset
        }
    }

    /// Checks what the writes left behind (untimed: called on drop).
    fn check(&self) -> Option<String> {
        let dst = self.dst.as_ref()?;
        let used = &dst.as_slice()[..self.blocks * self.block];
        let expected = if matches!(self.op, MemOp::Copy | MemOp::RandRw) {
            FILL
        } else {
            WRITTEN
        };
        if self.op.random() {
            // Every byte was either written or left as it was; the test suite checks the
            // count of blocks written with a known generator.
            let bad = used.iter().position(|&b| b != expected && b != INIT)?;
            Some(format!(
                "{}: byte {bad} holds {:#x}, neither written ({expected:#x}) nor initial ({INIT:#x})",
                self.op.name(),
                used[bad]
            ))
        } else if self.accesses >= self.blocks as u64 {
            let bad = used.iter().position(|&b| b != expected)?;
            Some(format!(
                "{}: after a full pass byte {bad} holds {:#x}, not {expected:#x}: the counted bytes were not written",
                self.op.name(),
                used[bad]
            ))
        } else {
            None
        }
    }
}

impl Worker for BlockWorker {
    fn run(&mut self, quota: &Quota) -> Result<Tally> {
        let chunk = ((1u64 << 20) / self.block as u64).max(1);
        let src = self.src.as_ref().map_or(std::ptr::null(), |r| r.as_ptr());
        let dst = self
            .dst
            .as_ref()
            .map_or(std::ptr::null_mut(), |r| r.as_ptr());
        let (isa, nt, block) = (self.isa, self.nt, self.block);
        let (mut done, mut checksum) = (0u64, 0u64);
        loop {
            let n = quota.next_chunk(done, chunk);
            if n == 0 {
                break;
            }
            // Every kernel call below is sound for the same reason: offsets are below
            // blocks × block, inside the regions this worker owns, and source and destination
            // are distinct mappings.
            match self.op {
                MemOp::Read | MemOp::RandRead => {
                    for _ in 0..n {
                        let offset = self.next_offset();
                        // SAFETY: an offset of this worker's regions (see above).
                        let sum = unsafe { kernels::read(isa, src.add(offset), block) };
                        checksum = checksum.wrapping_add(sum);
                    }
                }
                MemOp::Write | MemOp::RandWrite => {
                    for _ in 0..n {
                        let offset = self.next_offset();
                        // SAFETY: an offset of this worker's regions (see above).
                        unsafe { kernels::write(isa, dst.add(offset), block, WRITTEN, nt) };
                    }
                }
                MemOp::Copy => {
                    for _ in 0..n {
                        let offset = self.next_offset();
                        // SAFETY: an offset of this worker's regions (see above).
                        unsafe { kernels::copy(isa, dst.add(offset), src.add(offset), block, nt) };
                    }
                }
                MemOp::RandRw => {
                    // A random copy: the block read at one random offset of the source is
                    // written at another, independently drawn offset of the destination.
                    for _ in 0..n {
                        let from = self.next_offset();
                        let to = self.next_offset();
                        // SAFETY: offsets of this worker's regions (see above).
                        unsafe { kernels::copy(isa, dst.add(to), src.add(from), block, false) };
                    }
                }
                _ => unreachable!("STREAM ops run in StreamWorker"),
            }
            done += n;
        }
        kernels::store_fence();
        let reads = match self.op {
            MemOp::Read | MemOp::RandRead => done,
            _ => 0,
        };
        let expected = kernels::read_checksum(self.isa, block).wrapping_mul(reads);
        if checksum != expected {
            bail!(
                "{}: checksum {checksum:#x} of the bytes read, expected {expected:#x}: the counted bytes were not all read",
                self.op.name()
            );
        }
        self.accesses += done;
        Ok(Tally {
            units: done * self.op.bytes_per_access(block as u64),
            ops: done,
            latency: None,
            checksum,
        })
    }
}

impl Drop for BlockWorker {
    fn drop(&mut self) {
        if let Some(failure) = self.check() {
            self.failures.lock().unwrap().push(failure);
        }
    }
}

/// Elements between two looks at the quota: 512 KiB of each array, in one call into a STREAM
/// kernel or, over shorter arrays, several.
const STREAM_CHUNK: u64 = 1 << 16;

/// Array i starts i × this many bytes into its mapping, so that a[j], b[j] and c[j] do not share
/// their address bits below 4 KiB (4K aliasing makes loads wait on unrelated stores).
const ARRAY_STAGGER: usize = 1088;

fn array_start(region: &Region, index: usize) -> *mut f64 {
    // SAFETY: the mapping is ARRAY_STAGGER × 2 bytes longer than the array; 1088 is a multiple
    // of 64, so the start stays aligned for streaming stores.
    unsafe { region.as_ptr().add(index * ARRAY_STAGGER).cast::<f64>() }
}

/// One thread of a STREAM kernel: its own three arrays.
struct StreamWorker {
    kernel: Stream,
    isa: MemIsa,
    nt: bool,
    arrays: [Region; 3],
    elements: usize,
    position: usize,
    done: u64,
    failures: Arc<Mutex<Vec<String>>>,
}

impl StreamWorker {
    fn prepare(
        kernel: Stream,
        case: &BandwidthCase,
        failures: Arc<Mutex<Vec<String>>>,
    ) -> Result<StreamWorker> {
        let elements = (case.slice / 8) as usize;
        let used = Self::used(kernel);
        let map = || Region::map(case.slice as usize + ARRAY_STAGGER * 2, HugePages::System);
        let arrays = [map()?, map()?, map()?];
        for (i, array) in arrays.iter().enumerate() {
            if used[i] {
                // SAFETY: the mapping holds `elements` f64s after the array's stagger.
                let values =
                    unsafe { std::slice::from_raw_parts_mut(array_start(array, i), elements) };
                values.fill(START[i]); // first touch, by this thread
            }
        }
        Ok(StreamWorker {
            kernel,
            isa: case.isa,
            nt: case.nt,
            arrays,
            elements,
            position: 0,
            done: 0,
            failures,
        })
    }

    /// Which of a, b, c the kernel reads or writes.
    fn used(kernel: Stream) -> [bool; 3] {
        match kernel {
            Stream::Copy => [true, false, true],
            Stream::Scale => [false, true, true],
            Stream::Add | Stream::Triad => [true, true, true],
        }
    }

    /// The array the kernel writes and the value every element must hold after a full pass.
    fn output(&self) -> (usize, f64) {
        let [a, b, c] = START;
        match self.kernel {
            Stream::Copy => (2, a),
            Stream::Scale => (1, kernels::Q * c),
            Stream::Add => (2, a + b),
            Stream::Triad => (0, b + kernels::Q * c),
        }
    }
}

impl Worker for StreamWorker {
    fn run(&mut self, quota: &Quota) -> Result<Tally> {
        let [a, b, c] = &self.arrays;
        let pointers = [array_start(a, 0), array_start(b, 1), array_start(c, 2)];
        let mut done = 0u64;
        loop {
            // A chunk may go round the arrays several times: over arrays of an L1's size one
            // pass is a few dozen cycles, too short to pay a look at the clock each.
            let n = quota.next_chunk(done, STREAM_CHUNK) as usize;
            if n == 0 {
                break;
            }
            let mut left = n;
            while left > 0 {
                let m = left.min(self.elements - self.position);
                // From the arrays' start, every whole pass the chunk holds in one call.
                let passes = if m == self.elements { left / m } else { 1 };
                // SAFETY: position + m <= elements; the arrays are this worker's, page-aligned.
                unsafe {
                    kernels::stream(
                        self.isa,
                        self.kernel,
                        pointers,
                        self.position..self.position + m,
                        self.nt,
                        passes,
                    )
                };
                self.position = (self.position + m) % self.elements;
                left -= m * passes;
            }
            done += n as u64;
        }
        kernels::store_fence();
        self.done += done;
        Ok(Tally {
            units: done * self.kernel.bytes_per_element(),
            ops: done,
            latency: None,
            checksum: 0,
        })
    }
}

impl Drop for StreamWorker {
    fn drop(&mut self) {
        if self.done < self.elements as u64 {
            return;
        }
        let (array, value) = self.output();
        // SAFETY: the array holds `elements` f64s.
        let values = unsafe {
            std::slice::from_raw_parts(array_start(&self.arrays[array], array), self.elements)
        };
        if let Some(bad) = values.iter().position(|&v| v != value) {
            self.failures.lock().unwrap().push(format!(
                "STREAM {:?}: element {bad} is {}, expected {value}: the counted elements were not computed",
                self.kernel, values[bad]
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::Named;

    #[test]
    fn access_time_is_the_threads_time_added_up_over_all_accesses() {
        // Two threads, 1 s and 3 s, 2·10^9 accesses together: 4 s / 2·10^9 = 2 ns.
        let rep = Repetition {
            wall: Duration::from_secs(3),
            thread_time: Duration::from_secs(1) + Duration::from_secs(3),
            cpu_time: Duration::from_secs(4),
            units: 0,
            ops: 2_000_000_000,
            latency: None,
            threads: Vec::new(),
        };
        assert_eq!(access_times(&[rep]), [2.0]);
    }

    #[test]
    fn the_two_access_times_differ_by_the_thread_count() {
        // Two threads of 1 s each, side by side (wall 1 s), 10^9 accesses together: each thread
        // spent 2 s / 10^9 = 2 ns per access, and the wall clock saw 1 s / 10^9 = 1 ns per access.
        let rep = Repetition {
            wall: Duration::from_secs(1),
            thread_time: Duration::from_secs(2),
            cpu_time: Duration::from_secs(2),
            units: 0,
            ops: 1_000_000_000,
            latency: None,
            threads: Vec::new(),
        };
        assert_eq!(access_times(std::slice::from_ref(&rep)), [2.0]);
        assert_eq!(wall_times_per_access(&[rep]), [1.0]);
    }

    #[test]
    fn a_repetition_without_accesses_gives_no_access_time() {
        let rep = Repetition {
            wall: Duration::ZERO,
            thread_time: Duration::ZERO,
            cpu_time: Duration::ZERO,
            units: 0,
            ops: 0,
            latency: None,
            threads: Vec::new(),
        };
        assert!(access_times(std::slice::from_ref(&rep)).is_empty());
        assert!(wall_times_per_access(&[rep]).is_empty());
    }

    #[test]
    fn op_names_and_aliases() {
        for &op in MemOp::ALL {
            assert_eq!(MemOp::from_name(op.name()), Some(op));
        }
        assert_eq!(MemOp::from_name("RWS"), Some(MemOp::Copy));
        assert_eq!(MemOp::from_name("rwr"), Some(MemOp::RandRw));
        assert_eq!(MemOp::from_name("readwrite"), None);
    }

    #[test]
    fn random_offsets_cover_every_block_and_stay_inside() {
        let mut rng = Rng::new(1);
        let mut seen = [false; 100];
        for _ in 0..10_000 {
            let i = rng.index(100);
            seen[i] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }

    fn case(op: MemOp, block: u64, slice: u64, threads: usize) -> BandwidthCase {
        BandwidthCase {
            op,
            block: op.stream().is_none().then_some(block),
            threads,
            slice,
            nt: false,
            duration: Duration::from_millis(1),
            work: None,
            isa: MemIsa::detect(),
            pin: false,
        }
    }

    /// Every block op moves exactly the bytes it claims: reads are checked by their checksum
    /// inside `run`, writes and copies by the bytes they leave behind.
    #[test]
    fn every_op_moves_the_bytes_it_counts() {
        for &op in MemOp::ALL {
            for nt in [false, true] {
                for block in [1u64, 8, 100, 4096] {
                    if op.regions() == (true, false) && block % 8 != 0 {
                        continue; // a read's block is whole words (refused by the plan)
                    }
                    let mut c = case(op, block, 64 * 1024, 1);
                    c.nt = nt && op.has_nt() && c.isa.has_nt();
                    if op.stream().is_none() {
                        c.slice = c.slice / block * block;
                    }
                    let failures = Arc::new(Mutex::new(Vec::new()));
                    let accesses = 2 * c.slice / block.max(1);
                    let tally = match op.stream() {
                        Some(kernel) => {
                            let mut w =
                                StreamWorker::prepare(kernel, &c, failures.clone()).unwrap();
                            let elements = c.slice / 8;
                            let t = w.run(&Quota::units(2 * elements + 3)).unwrap();
                            assert_eq!(t.units, (2 * elements + 3) * kernel.bytes_per_element());
                            t
                        }
                        None => {
                            let mut w = BlockWorker::prepare(&c, 0, failures.clone()).unwrap();
                            let t = w.run(&Quota::units(accesses)).unwrap();
                            assert_eq!(t.ops, accesses);
                            assert_eq!(t.units, accesses * op.bytes_per_access(block));
                            if op.random() && op != MemOp::RandRead {
                                let dst = w.dst.as_ref().unwrap().as_slice();
                                // randrw copies the source's bytes; randwrite stores its own.
                                let stored = if op == MemOp::RandRw { FILL } else { WRITTEN };
                                let written = dst.iter().filter(|&&b| b == stored).count() as u64;
                                // 2 × blocks random draws leave about 1 − e^-2 = 86 % written.
                                assert!(written > c.slice / 2, "{op:?} {block}: {written}");
                            }
                            t
                        }
                    };
                    assert!(tally.units > 0);
                    let failed = failures.lock().unwrap().clone();
                    assert!(failed.is_empty(), "{op:?}: {failed:?}");
                    if op.stream().is_some() {
                        break; // block sizes do not apply
                    }
                }
            }
        }
    }

    /// randrw copies: each destination block it writes holds the bytes of some source block,
    /// and the two offsets are drawn apart (not one offset used for both).
    #[test]
    fn randrw_copies_a_random_block_to_another_random_offset() {
        let block = 64usize;
        let c = case(MemOp::RandRw, block as u64, 64 * 1024, 1);
        let blocks = c.slice as usize / block;
        // Byte of source block k: 32 + k mod 200, never INIT.
        let tag = |k: usize| (32 + k % 200) as u8;
        let failures = Arc::new(Mutex::new(Vec::new()));
        let mut w = BlockWorker::prepare(&c, 0, failures).unwrap();
        for (k, chunk) in w.src.as_mut().unwrap().as_mut_slice()[..blocks * block]
            .chunks_mut(block)
            .enumerate()
        {
            chunk.fill(tag(k));
        }
        let t = w.run(&Quota::units(blocks as u64)).unwrap();
        assert_eq!(t.units, 2 * blocks as u64 * block as u64);
        let dst = w.dst.as_ref().unwrap().as_slice();
        let (mut written, mut moved) = (0, 0);
        for (k, chunk) in dst[..blocks * block].chunks(block).enumerate() {
            assert!(
                chunk.iter().all(|&b| b == chunk[0]),
                "block {k} mixes sources"
            );
            if chunk[0] == INIT {
                continue;
            }
            assert!((32..232).contains(&chunk[0]), "block {k}: {:#x}", chunk[0]);
            written += 1;
            if chunk[0] != tag(k) {
                moved += 1;
            }
        }
        // blocks random draws leave about 1 − 1/e = 63 % of the blocks written, nearly all of
        // them from another offset.
        assert!(written > blocks / 2, "{written} of {blocks}");
        assert!(moved > written * 9 / 10, "{moved} of {written}");
        w.dst = None; // the bytes are not FILL: skip the drop check
    }

    #[test]
    fn a_worker_that_skips_bytes_is_caught() {
        let c = case(MemOp::Write, 64, 4096, 1);
        let failures = Arc::new(Mutex::new(Vec::new()));
        let mut w = BlockWorker::prepare(&c, 0, failures.clone()).unwrap();
        w.run(&Quota::units(64)).unwrap();
        w.dst.as_mut().unwrap().as_mut_slice()[100] = 0;
        drop(w);
        assert_eq!(failures.lock().unwrap().len(), 1);

        let c = case(MemOp::StreamTriad, 0, 8192, 1);
        let mut w = StreamWorker::prepare(Stream::Triad, &c, failures.clone()).unwrap();
        w.run(&Quota::units(1024)).unwrap();
        w.arrays[0].as_mut_slice()[8] = 0xff;
        drop(w);
        assert_eq!(failures.lock().unwrap().len(), 2);
    }
}
