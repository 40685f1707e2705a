//! Memory bandwidth and latency: `peakbench mem` and `peakbench mem latency`.
//!
//! **Bandwidth.** Each case runs one operation on N threads over a working set of `--size`
//! bytes split among the threads (strong scaling, as STREAM does): every thread maps its own
//! slice and writes it before timing (so its pages come from its own NUMA node and no page fault
//! is timed), then accesses it in blocks of `--block` bytes, sequentially or at block-aligned
//! offsets drawn from a wyrand generator. A repetition lasts `--duration`; its rate is the bytes
//! of all threads divided by the group's wall time.
//!
//! **How bytes are counted.** Bytes read plus bytes written by the program: a read or write
//! access of B bytes is B, a copy is 2·B, randrw is one read and one write of B. STREAM kernels
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

pub mod args;
pub mod kernels;
pub mod latency;
pub mod reference;
pub mod region;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Result, bail};
use serde::Serialize;

use crate::app::UsageError;
use crate::result::{BenchResult, CaseInfo, Extra, Params, Subsystem};
use crate::rng::Rng;
use crate::runner::{self, Quota, Repetition, Stop, Tally, Worker};
use crate::session::{Case, Context};
use crate::stats::Summary;
use crate::units::{format_size, format_size_approx};
use kernels::{Isa, Stream};
use region::{HugePages, Region};

/// The byte every source region is filled with.
const FILL: u8 = 0x5a;
/// The byte every destination region holds before the run.
const INIT: u8 = 0x11;
/// The byte write kernels store.
const WRITTEN: u8 = 0xa5;
/// STREAM's starting values of a, b, c (c is not 0 so that every kernel changes its output).
const START: [f64; 3] = [1.0, 2.0, 4.0];

/// One memory operation, named as scripts name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum MemOp {
    #[serde(rename = "read")]
    Read,
    #[serde(rename = "write")]
    Write,
    #[serde(rename = "copy")]
    Copy,
    #[serde(rename = "randread")]
    RandRead,
    #[serde(rename = "randwrite")]
    RandWrite,
    #[serde(rename = "randrw")]
    RandRw,
    #[serde(rename = "stream-copy")]
    StreamCopy,
    #[serde(rename = "stream-scale")]
    StreamScale,
    #[serde(rename = "stream-add")]
    StreamAdd,
    #[serde(rename = "stream-triad")]
    StreamTriad,
}

impl MemOp {
    pub const ALL: [MemOp; 10] = [
        MemOp::Read,
        MemOp::Write,
        MemOp::Copy,
        MemOp::RandRead,
        MemOp::RandWrite,
        MemOp::RandRw,
        MemOp::StreamCopy,
        MemOp::StreamScale,
        MemOp::StreamAdd,
        MemOp::StreamTriad,
    ];

    pub fn name(self) -> &'static str {
        match self {
            MemOp::Read => "read",
            MemOp::Write => "write",
            MemOp::Copy => "copy",
            MemOp::RandRead => "randread",
            MemOp::RandWrite => "randwrite",
            MemOp::RandRw => "randrw",
            MemOp::StreamCopy => "stream-copy",
            MemOp::StreamScale => "stream-scale",
            MemOp::StreamAdd => "stream-add",
            MemOp::StreamTriad => "stream-triad",
        }
    }

    /// A name or one of the aliases users' reports use (RWS = copy, RWR = randrw).
    pub fn parse(text: &str) -> Option<MemOp> {
        let text = text.trim().to_ascii_lowercase();
        match text.as_str() {
            "rws" => Some(MemOp::Copy),
            "rwr" => Some(MemOp::RandRw),
            _ => MemOp::ALL.into_iter().find(|op| op.name() == text),
        }
    }

    pub fn stream(self) -> Option<Stream> {
        match self {
            MemOp::StreamCopy => Some(Stream::Copy),
            MemOp::StreamScale => Some(Stream::Scale),
            MemOp::StreamAdd => Some(Stream::Add),
            MemOp::StreamTriad => Some(Stream::Triad),
            _ => None,
        }
    }

    pub fn random(self) -> bool {
        matches!(self, MemOp::RandRead | MemOp::RandWrite | MemOp::RandRw)
    }

    /// Operations that have a non-temporal variant.
    pub fn has_nt(self) -> bool {
        matches!(self, MemOp::Write | MemOp::Copy) || self.stream().is_some()
    }

    /// Regions of a block operation: a source (read from), a destination (written to).
    fn regions(self) -> (bool, bool) {
        match self {
            MemOp::Read | MemOp::RandRead => (true, false),
            MemOp::Write | MemOp::RandWrite => (false, true),
            _ => (true, true),
        }
    }

    /// Bytes read and written by one block access of `block` bytes.
    fn bytes_per_access(self, block: u64) -> u64 {
        let (reads, writes) = self.regions();
        block * (u64::from(reads) + u64::from(writes))
    }
}

/// Validated settings of `peakbench mem`, constructible from code (presets) as well as flags.
#[derive(Clone, Debug, Serialize)]
pub struct MemOptions {
    pub ops: Vec<MemOp>,
    /// Block sizes in bytes; `None`: 1 MiB for sequential ops, 64 B for random ones.
    pub blocks: Option<Vec<u64>>,
    pub threads: Vec<usize>,
    /// Working set of all threads together, bytes; `None`: [`default_size`].
    pub size: Option<u64>,
    /// Non-temporal stores for the ops that have them.
    pub nt: bool,
    /// Length of one repetition.
    pub duration: Duration,
}

impl MemOptions {
    /// The defaults of `peakbench mem` with no flags.
    pub fn defaults() -> MemOptions {
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
            nt: false,
            duration: Duration::from_millis(300),
        }
    }
}

/// 1 GiB, or 4 × the last-level cache when that is larger, but at most 3/4 of the memory
/// available (and then a note says so).
pub fn default_size(ctx: &Context) -> (u64, Option<String>) {
    let llc = ctx
        .host
        .cpu
        .caches
        .iter()
        .filter(|c| c.kind != "Instruction")
        .map(|c| c.size_bytes)
        .max()
        .unwrap_or(0);
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

/// A plan: the cases, and notes about the choices made (printed and kept as warnings).
pub type Plan = (Vec<Box<dyn Case>>, Vec<String>);

/// Expands the options into cases, checking sizes against memory first. Bad combinations are
/// [`UsageError`]s naming the flag.
pub fn plan(options: &MemOptions, ctx: &Context) -> Result<Plan> {
    let mut notes = Vec::new();
    let size = match options.size {
        Some(size) => size,
        None => {
            let (size, note) = default_size(ctx);
            notes.extend(note);
            size
        }
    };
    let available = ctx.host.memory.available_bytes;
    if available > 0 && size > available {
        return Err(UsageError(format!(
            "--size: {} is more than the {} of memory available: give a smaller --size",
            format_size(size),
            format_size_approx(available)
        ))
        .into());
    }
    if ctx.peaks.memory.value.is_none() {
        notes.push(
            "the memory bandwidth peak is unknown (no readable DIMM table): give --mem-channels \
             and --mem-mts for the peak and the efficiency"
                .into(),
        );
    }
    let isa = Isa::detect();
    if options.nt && !isa.has_nt() {
        notes.push(format!(
            "--nt: the {} kernels have no non-temporal stores; ordinary stores are used",
            isa.name()
        ));
    }
    let mut cases: Vec<Box<dyn Case>> = Vec::new();
    for &op in &options.ops {
        for &threads in &options.threads {
            if let Some(kernel) = op.stream() {
                let elements = size / (kernel.arrays() * 8 * threads as u64);
                if elements == 0 {
                    return Err(UsageError(format!(
                        "--size: {} gives {threads} threads no element of {} arrays: give a larger --size",
                        format_size(size),
                        kernel.arrays()
                    ))
                    .into());
                }
                cases.push(Box::new(BandwidthCase {
                    op,
                    block: None,
                    threads,
                    slice: elements * 8,
                    nt: options.nt && isa.has_nt(),
                    duration: options.duration,
                    isa,
                }));
                continue;
            }
            let (reads, writes) = op.regions();
            let regions = u64::from(reads) + u64::from(writes);
            let slice = size / (regions * threads as u64);
            if slice == 0 {
                return Err(UsageError(format!(
                    "--size: {} leaves {threads} threads of {} no byte each: give a larger --size or fewer --threads",
                    format_size(size),
                    op.name()
                ))
                .into());
            }
            let blocks = match &options.blocks {
                Some(blocks) => blocks.clone(),
                None if op.random() => vec![64.min(slice)],
                None => vec![(1u64 << 20).min(slice)],
            };
            for block in blocks {
                if block > size {
                    return Err(UsageError(format!(
                        "--block: {} is larger than the working set (--size {}): give a smaller block or a larger --size",
                        format_size(block),
                        format_size(size)
                    ))
                    .into());
                }
                if block > slice {
                    return Err(UsageError(format!(
                        "--block: {} is larger than each thread's share of --size for {} ({} = {} / {threads} threads{}): give a smaller block or a larger --size",
                        format_size(block),
                        op.name(),
                        format_size_approx(slice),
                        format_size(size),
                        if regions == 2 { " / 2 regions" } else { "" }
                    ))
                    .into());
                }
                cases.push(Box::new(BandwidthCase {
                    op,
                    block: Some(block),
                    threads,
                    slice: slice / block * block,
                    nt: options.nt && op.has_nt() && isa.has_nt(),
                    duration: options.duration,
                    isa,
                }));
            }
        }
    }
    if options.nt && options.ops.iter().any(|op| !op.has_nt()) {
        notes.push(
            "--nt applies to write, copy and the STREAM kernels; the other ops use ordinary stores"
                .into(),
        );
    }
    Ok((cases, notes))
}

/// One operation, block size and thread count.
pub struct BandwidthCase {
    pub op: MemOp,
    /// `None` for STREAM kernels (they stream whole arrays).
    pub block: Option<u64>,
    pub threads: usize,
    /// Bytes of each region (or STREAM array) of each thread, a whole number of blocks.
    pub slice: u64,
    pub nt: bool,
    pub duration: Duration,
    pub isa: Isa,
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
    pub fn working_set(&self) -> u64 {
        self.slice * self.regions() * self.threads as u64
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
                "bytes read + bytes written: one B-byte read and one B-byte write per access"
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
        text
    }

    fn id_and_label(&self) -> (String, String) {
        let nt = if self.nt { "-nt" } else { "" };
        match self.block {
            Some(block) => (
                format!("mem-{}{nt}-b{block}-t{}", self.op.name(), self.threads),
                format!(
                    "mem {}{nt} block {} {} threads",
                    self.op.name(),
                    format_size(block),
                    self.threads
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

impl Case for BandwidthCase {
    fn id(&self) -> String {
        self.id_and_label().0
    }

    fn label(&self) -> String {
        self.id_and_label().1
    }

    fn estimate(&self, ctx: &Context) -> Duration {
        // Touching the pages before timing runs at roughly 4 GB/s.
        let prepare = Duration::from_secs_f64(self.working_set() as f64 / 4e9);
        prepare + ctx.runner.warmup + self.duration * ctx.runner.repetitions
    }

    fn run(&self, ctx: &Context) -> Result<BenchResult> {
        let settings = ctx
            .runner
            .settings(self.threads, Stop::Duration(self.duration));
        let failures = Arc::new(Mutex::new(Vec::<String>::new()));
        let reps = match self.op.stream() {
            Some(kernel) => runner::measure(&settings, |_| {
                StreamWorker::prepare(kernel, self, failures.clone())
            })?,
            None => runner::measure(&settings, |index| {
                BlockWorker::prepare(self, index, failures.clone())
            })?,
        };
        if let Some(failure) = failures.lock().unwrap().first() {
            bail!("{failure}");
        }
        let samples: Vec<f64> = reps.iter().map(|r| r.units_per_sec() / 1e9).collect();
        let mut params = Params {
            threads: Some(self.threads),
            pinned: Some(ctx.runner.pin),
            isa: Some(self.isa.name().to_string()),
            block_bytes: self.block,
            working_set_bytes: Some(self.working_set()),
            duration_s: Some(self.duration.as_secs_f64()),
            ..Params::default()
        };
        params.other.insert("nt".into(), self.nt.into());
        params.other.insert(
            "scaling".into(),
            "strong: the working set is split among threads".into(),
        );
        let (id, _) = self.id_and_label();
        let info = CaseInfo {
            id,
            subsystem: Subsystem::Memory,
            op: self.op.name().to_string(),
            params,
            metric: "throughput".into(),
            unit: "GB/s".into(),
            counting: self.counting(),
        };
        let Some(result) = BenchResult::from_samples(&ctx.host.hostname, info, samples) else {
            bail!("no repetition produced a finite rate");
        };
        let mut result = result.with_peak(ctx.peaks.memory.as_ref());
        if self.block.is_some()
            && let Some(extra) = access_time(&reps, self.threads)
        {
            result.extra.push(extra);
        }
        result.warnings = runner::repetition_warnings(&reps, result.stats.cv);
        if self.threads > runner::num_cpus() {
            result.warnings.push(format!(
                "{} threads on {} CPUs: threads take turns on the cores",
                self.threads,
                runner::num_cpus()
            ));
        }
        if ctx.runner.reference {
            let reference = reference::for_case(self)?;
            result = result.with_reference(reference);
        }
        Ok(result)
    }
}

/// Time per access of one thread: the wall time × threads / accesses, per repetition.
fn access_time(reps: &[Repetition], threads: usize) -> Option<Extra> {
    let values: Vec<f64> = reps
        .iter()
        .filter(|r| r.ops > 0)
        .map(|r| r.wall.as_secs_f64() * 1e9 * threads as f64 / r.ops as f64)
        .collect();
    let stats = Summary::of(&values)?;
    Some(Extra {
        metric: "access_time".into(),
        unit: "ns".into(),
        value: stats.median,
        stats,
    })
}

/// One thread of a block operation.
struct BlockWorker {
    op: MemOp,
    isa: Isa,
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
        let map = |fill: u8| -> Result<Region> {
            let mut region = Region::map(slice, HugePages::System)?;
            region.as_mut_slice().fill(fill); // first touch, by this thread
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
        let expected = if self.op == MemOp::Copy {
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
            // SAFETY (all kernel calls): offsets are below blocks × block, inside the regions
            // this worker owns; source and destination are distinct mappings.
            match self.op {
                MemOp::Read | MemOp::RandRead => {
                    for _ in 0..n {
                        let offset = self.next_offset();
                        let sum = unsafe { kernels::read(isa, src.add(offset), block) };
                        checksum = checksum.wrapping_add(sum);
                    }
                }
                MemOp::Write | MemOp::RandWrite => {
                    for _ in 0..n {
                        let offset = self.next_offset();
                        unsafe { kernels::write(isa, dst.add(offset), block, WRITTEN, nt) };
                    }
                }
                MemOp::Copy => {
                    for _ in 0..n {
                        let offset = self.next_offset();
                        unsafe { kernels::copy(isa, dst.add(offset), src.add(offset), block, nt) };
                    }
                }
                MemOp::RandRw => {
                    for _ in 0..n {
                        let from = self.next_offset();
                        let to = self.next_offset();
                        let sum = unsafe { kernels::read(isa, src.add(from), block) };
                        checksum = checksum.wrapping_add(sum);
                        unsafe { kernels::write(isa, dst.add(to), block, WRITTEN, false) };
                    }
                }
                _ => unreachable!("STREAM ops run in StreamWorker"),
            }
            done += n;
        }
        kernels::store_fence();
        let reads = match self.op {
            MemOp::Read | MemOp::RandRead | MemOp::RandRw => done,
            _ => 0,
        };
        let expected = kernels::checksum_of_constant(FILL, block).wrapping_mul(reads);
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

/// Elements per call into a STREAM kernel: 512 KiB of each array.
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
    isa: Isa,
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
            let left = (self.elements - self.position) as u64;
            let n = quota.next_chunk(done, STREAM_CHUNK.min(left)) as usize;
            if n == 0 {
                break;
            }
            // SAFETY: position + n <= elements; the arrays are this worker's, page-aligned.
            unsafe {
                kernels::stream(
                    self.isa,
                    self.kernel,
                    pointers,
                    self.position..self.position + n,
                    self.nt,
                )
            };
            self.position = (self.position + n) % self.elements;
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

    #[test]
    fn op_names_and_aliases() {
        for op in MemOp::ALL {
            assert_eq!(MemOp::parse(op.name()), Some(op));
        }
        assert_eq!(MemOp::parse("RWS"), Some(MemOp::Copy));
        assert_eq!(MemOp::parse("rwr"), Some(MemOp::RandRw));
        assert_eq!(MemOp::parse("readwrite"), None);
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
            isa: Isa::detect(),
        }
    }

    /// Every block op moves exactly the bytes it claims: reads are checked by their checksum
    /// inside `run`, writes and copies by the bytes they leave behind.
    #[test]
    fn every_op_moves_the_bytes_it_counts() {
        for op in MemOp::ALL {
            for nt in [false, true] {
                for block in [1u64, 8, 100, 4096] {
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
                                let written = dst.iter().filter(|&&b| b == WRITTEN).count() as u64;
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
