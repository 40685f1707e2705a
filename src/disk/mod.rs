//! Disk: sequential and random reads and writes, their mix, and read-then-rewrite, at any block
//! size, thread count and queue depth, with IOPS and latency percentiles, next to fio.
//!
//! The stages: [`DiskArgs`] (clap) → [`DiskOptions`] (validated, constructible from code) →
//! [`plan`] (every op × block × threads × queue depth as a [`DiskCase`], with the target checked
//! but nothing created) → the session runs the cases. The first case to run creates and fills
//! the test file ([`file`]); every case of the plan shares it, and it is removed when the last
//! case is dropped (or kept with `--keep`).
//!
//! Counting: a repetition's bytes are block × the I/Os of all threads that completed in it
//! (reads and writes alike), divided by the repetition's wall time (earliest thread start to
//! latest thread end, fsyncs inside); MB = 10^6 bytes. IOPS are the same I/Os per second.
//! Latencies are per I/O, submission to completion, merged over threads and repetitions.

pub mod buffer;
pub mod engine;
pub mod file;
pub mod fio;
pub mod stamp;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Result, bail};
use clap::{Args, ValueEnum};
use serde::Serialize;

use crate::app::UsageError;
use crate::cli::{OutputArgs, PeakArgs, RunnerArgs, ThreadList, size_list, thread_list};
use crate::result::{BenchResult, CaseInfo, Extra, PeakRef, Subsystem};
use crate::runner::{self, Stop};
use crate::session::{Case, Context};
use crate::stats::{LatencyHistogram, Summary};
use crate::units::{format_size_approx, parse_duration, parse_size};

use engine::{DiskWorker, Job};
use file::{Place, TargetSpec, TestFile};

/// The largest block of one I/O (a single read or write moves at most ~2 GiB on Linux).
pub const MAX_BLOCK: u64 = 1 << 30;
/// Blocks below this report IOPS as the headline (with MB/s as an extra); larger ones MB/s.
pub const IOPS_HEADLINE_BELOW: u64 = 64 * 1024;

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    #[value(name = "seqread")]
    SeqRead,
    #[value(name = "seqwrite")]
    SeqWrite,
    #[value(name = "randread")]
    RandRead,
    #[value(name = "randwrite")]
    RandWrite,
    /// Random mix of reads and writes, `--rwmix` percent reads.
    #[value(name = "readwrite")]
    ReadWrite,
    /// Read each block sequentially, then write it back to the same place.
    #[value(name = "rewrite")]
    Rewrite,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::SeqRead => "seqread",
            Op::SeqWrite => "seqwrite",
            Op::RandRead => "randread",
            Op::RandWrite => "randwrite",
            Op::ReadWrite => "readwrite",
            Op::Rewrite => "rewrite",
        }
    }

    pub fn writes(self) -> bool {
        !matches!(self, Op::SeqRead | Op::RandRead)
    }

    fn reads(self) -> bool {
        !matches!(self, Op::SeqWrite | Op::RandWrite)
    }
}

/// The engine a case runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Engine {
    #[serde(rename = "io_uring")]
    IoUring,
    #[serde(rename = "sync")]
    Sync,
}

impl Engine {
    pub fn name(self) -> &'static str {
        match self {
            Engine::IoUring => "io_uring",
            Engine::Sync => "sync",
        }
    }
}

/// The engine asked for.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineChoice {
    /// io_uring where the kernel allows it, else sync with a note
    Auto,
    #[value(name = "io_uring", alias = "io-uring")]
    IoUring,
    /// pread/pwrite, one I/O in flight per thread
    Sync,
}

/// O_DIRECT or the page cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DirectChoice {
    /// O_DIRECT; a block it cannot do is an error.
    Always,
    /// Buffered (page cache) for every case.
    Never,
    /// O_DIRECT where the block allows it, buffered (and labelled so) where not.
    WhereAligned,
}

/// When a repetition stops.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stopping {
    Duration(Duration),
    /// Bytes moved by all threads together.
    Bytes(u64),
}

/// Ops as listed.
#[derive(Clone, Debug)]
pub struct OpList(pub Vec<Op>);
/// Block sizes as listed.
#[derive(Clone, Debug)]
pub struct BlockList(pub Vec<u64>);
/// Queue depths as listed.
#[derive(Clone, Debug)]
pub struct QdList(pub Vec<u32>);

fn op_list(text: &str) -> Result<OpList, String> {
    let mut ops = Vec::new();
    for item in text.split(',') {
        let op = Op::from_str(item.trim(), true).map_err(|_| {
            format!(
                "'{item}' is not an op: use seqread, seqwrite, randread, randwrite, readwrite or rewrite"
            )
        })?;
        if !ops.contains(&op) {
            ops.push(op);
        }
    }
    Ok(OpList(ops))
}

fn block_list(text: &str) -> Result<BlockList, String> {
    let blocks = size_list(text)?;
    if let Some(big) = blocks.iter().find(|&&b| b > MAX_BLOCK) {
        return Err(format!(
            "a block of {big} B is more than one I/O can move: give at most 1GiB"
        ));
    }
    Ok(BlockList(blocks))
}

fn qd_list(text: &str) -> Result<QdList, String> {
    let mut list = Vec::new();
    for item in text.split(',') {
        match item.trim().parse::<u32>() {
            Ok(n) if (1..=4096).contains(&n) => list.push(n),
            _ => {
                return Err(format!(
                    "'{item}' is not a queue depth: give 1 to 4096, e.g. 1,8,32"
                ));
            }
        }
    }
    Ok(QdList(list))
}

fn size(text: &str) -> Result<u64, String> {
    match parse_size(text).map_err(|e| e.0)? {
        0 => Err("0 bytes is no test file: give e.g. 1GiB".into()),
        n => Ok(n),
    }
}

fn duration(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text).map_err(|e| e.0)?;
    if d.is_zero() {
        return Err("a zero duration measures nothing: give e.g. 10s".into());
    }
    Ok(d)
}

fn any_duration(text: &str) -> Result<Duration, String> {
    parse_duration(text).map_err(|e| e.0)
}

fn percent(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(n) if n <= 100 => Ok(n),
        _ => Err(format!(
            "'{text}' is not a percentage: give 0 to 100, e.g. 70"
        )),
    }
}

fn positive_u64(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!(
            "'{text}' is not a positive whole number: give e.g. 32"
        )),
    }
}

#[derive(Args, Debug)]
pub struct DiskArgs {
    /// Ops: seqread, seqwrite, randread, randwrite, readwrite (random mix, --rwmix reads), rewrite (read each block, write it back)
    #[arg(long, value_name = "LIST", default_value = "seqread,seqwrite,randread,randwrite", value_parser = op_list)]
    pub op: OpList,
    /// Block sizes (list), e.g. 4KiB,1MiB; O_DIRECT needs multiples of the device's logical block
    #[arg(long, short = 'b', value_name = "LIST", default_value = "4KiB,1MiB", value_parser = block_list)]
    pub block: BlockList,
    /// Thread counts (list), each with its own file descriptor and region of the file
    #[arg(long, short = 't', value_name = "LIST", default_value = "1", value_parser = thread_list)]
    pub threads: ThreadList,
    /// Queue depths per thread (list); above 1 needs io_uring
    #[arg(long, value_name = "LIST", default_value = "1", value_parser = qd_list)]
    pub qd: QdList,
    /// I/Os queued per io_uring submission (fio's iodepth_batch_submit): 1 submits each I/O the
    /// moment it is ready, as fio does, which keeps a virtualised disk busiest; N waits for N
    #[arg(long, value_name = "N", default_value = "1", value_parser = crate::cli::positive_u32)]
    pub batch: u32,
    /// Data size of the test file
    #[arg(long, short = 's', value_name = "SIZE", default_value = "1GiB", value_parser = size)]
    pub size: u64,
    /// Length of one repetition (time-based; 3 repetitions by default)
    #[arg(long, short = 'd', value_name = "DURATION", default_value = "3s", value_parser = duration, conflicts_with = "bytes")]
    pub duration: Duration,
    /// Size-based instead: bytes moved by all threads in one repetition
    #[arg(long, value_name = "SIZE", value_parser = size)]
    pub bytes: Option<u64>,
    /// Unmeasured ramp-up before the repetitions of each case (default: --warmup's value)
    #[arg(long, value_name = "DURATION", value_parser = any_duration)]
    pub ramp: Option<Duration>,
    /// Directory for the test file (peakbench-<hex>.tmp, removed at the end)
    #[arg(long, value_name = "DIR", default_value = ".", conflicts_with = "file")]
    pub dir: PathBuf,
    /// Exact path of the test file (new, or one peakbench created), or a block device with --allow-device-write
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
    /// Use the page cache (no O_DIRECT) for every case; labelled "buffered" in every output
    #[arg(long, conflicts_with = "buffered_if_unaligned")]
    pub buffered: bool,
    /// O_DIRECT where the block allows it, buffered (and labelled so) where it does not (e.g. 8B, 8KB)
    #[arg(long)]
    pub buffered_if_unaligned: bool,
    /// I/O engine: auto (io_uring, else sync with a note), io_uring, sync
    #[arg(long, value_enum, default_value = "auto")]
    pub engine: EngineChoice,
    /// Read share of readwrite, percent
    #[arg(long, value_name = "PCT", default_value = "50", value_parser = percent)]
    pub rwmix: u32,
    /// fsync after every N writes of a thread (inside the timed region)
    #[arg(long, value_name = "N", value_parser = positive_u64)]
    pub fsync: Option<u64>,
    /// Keep the test file at the end; the next run with --keep in the same --dir reuses it
    #[arg(long)]
    pub keep: bool,
    /// When --size does not fit in --dir, use the largest file that does (half the usable free space), with a note
    #[arg(long)]
    pub size_fit: bool,
    /// Allow writing to this block device (given again with --file); refused if mounted, in use, partitioned or holding a file system
    #[arg(long, value_name = "DEV")]
    pub allow_device_write: Option<PathBuf>,
    #[command(flatten)]
    pub runner: RunnerArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub peak: PeakArgs,
}

/// Validated disk settings; what [`plan`] expands. Constructible from code (presets).
#[derive(Clone, Debug, Serialize)]
pub struct DiskOptions {
    pub ops: Vec<Op>,
    pub blocks: Vec<u64>,
    pub threads: Vec<usize>,
    pub qds: Vec<u32>,
    /// I/Os queued per io_uring submission.
    pub batch: u32,
    /// Bytes of the test file's data region.
    pub size: u64,
    pub stop: Stopping,
    /// Unmeasured time before each case's repetitions.
    pub ramp: Duration,
    pub dir: PathBuf,
    pub file: Option<PathBuf>,
    pub direct: DirectChoice,
    pub engine: EngineChoice,
    pub rwmix_read: u32,
    pub fsync_every: Option<u64>,
    pub keep: bool,
    pub size_fit: bool,
    pub allow_device_write: Option<PathBuf>,
}

impl DiskOptions {
    pub fn from_args(args: &DiskArgs, ramp: Duration) -> DiskOptions {
        DiskOptions {
            ops: args.op.0.clone(),
            blocks: args.block.0.clone(),
            threads: args.threads.0.clone(),
            qds: args.qd.0.clone(),
            batch: args.batch,
            size: args.size,
            stop: match args.bytes {
                Some(b) => Stopping::Bytes(b),
                None => Stopping::Duration(args.duration),
            },
            ramp,
            dir: args.dir.clone(),
            file: args.file.clone(),
            direct: if args.buffered {
                DirectChoice::Never
            } else if args.buffered_if_unaligned {
                DirectChoice::WhereAligned
            } else {
                DirectChoice::Always
            },
            engine: args.engine,
            rwmix_read: args.rwmix,
            fsync_every: args.fsync,
            keep: args.keep,
            size_fit: args.size_fit,
            allow_device_write: args.allow_device_write.clone(),
        }
    }
}

/// The test file of a plan: created by the first case that runs, shared by all of them, and
/// removed when the last of them is dropped.
pub struct Target {
    spec: TargetSpec,
    file: Mutex<Option<Arc<TestFile>>>,
}

impl Target {
    fn open(&self) -> Result<Arc<TestFile>> {
        let mut slot = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(file) = slot.as_ref() {
            return Ok(file.clone());
        }
        let file = Arc::new(file::open(&self.spec)?);
        *slot = Some(file.clone());
        Ok(file)
    }
}

fn usage(message: String) -> anyhow::Error {
    UsageError(message).into()
}

/// The cases of a plan.
pub type Cases = Vec<Box<dyn Case>>;

/// Checks the target and expands the options into cases; nothing is created yet.
pub fn plan(opts: &DiskOptions, ctx: &Context) -> Result<Vec<Box<dyn Case>>> {
    plan_with_notes(opts, ctx).map(|(cases, _)| cases)
}

/// [`plan`], with the notes (e.g. an engine fallback) also put in each result's warnings.
pub fn plan_with_notes(opts: &DiskOptions, ctx: &Context) -> Result<(Cases, Vec<String>)> {
    let mut notes = Vec::new();
    let mut fitted;
    let mut opts = opts;
    if opts.size_fit
        && opts.file.is_none()
        && let Some(size) = file::fitting_size(&opts.dir, opts.size)?
    {
        notes.push(format!(
            "a {} test file does not fit in {}: using {} (--size-fit); give --dir on a larger \
             file system for the full size",
            format_size_approx(opts.size),
            opts.dir.display(),
            format_size_approx(size)
        ));
        fitted = opts.clone();
        fitted.size = size;
        opts = &fitted;
    }
    let spec = target_spec(opts)?;
    let engine = match opts.engine {
        EngineChoice::Sync => Engine::Sync,
        EngineChoice::IoUring => match engine::new_ring(1) {
            Ok(_) => Engine::IoUring,
            Err(e) => {
                return Err(usage(format!(
                    "--engine io_uring: the kernel refuses io_uring ({e}): give --engine sync or auto"
                )));
            }
        },
        EngineChoice::Auto => match engine::new_ring(1) {
            Ok(_) => Engine::IoUring,
            Err(e) => {
                notes.push(format!(
                    "io_uring is not available ({e}): running the sync engine (pread/pwrite), \
                     one I/O in flight per thread; check /proc/sys/kernel/io_uring_disabled or \
                     the container's seccomp profile to use queue depths"
                ));
                Engine::Sync
            }
        },
    };
    let mut qds = opts.qds.clone();
    if engine == Engine::Sync && qds.iter().any(|&q| q > 1) {
        if opts.engine == EngineChoice::Sync {
            return Err(usage(
                "--qd: the sync engine has one I/O in flight per thread: give --qd 1 or --engine io_uring"
                    .into(),
            ));
        }
        notes.push("queue depths above 1 run as 1 with the sync engine".into());
        qds = vec![1];
    }
    let target = Arc::new(Target {
        spec,
        file: Mutex::new(None),
    });
    let available = ctx.host.memory.available_bytes;
    let mut cases: Vec<Box<dyn Case>> = Vec::new();
    for &op in &opts.ops {
        for &block in &opts.blocks {
            let aligned = block % target.spec.align == 0;
            let direct = match opts.direct {
                DirectChoice::Never => false,
                DirectChoice::WhereAligned => aligned,
                DirectChoice::Always if aligned => true,
                DirectChoice::Always => {
                    return Err(usage(format!(
                        "--block: {block} B is not a multiple of {} B ({}), which O_DIRECT needs: \
                         give e.g. {} B, or --buffered, or --buffered-if-unaligned",
                        target.spec.align,
                        target.spec.align_source,
                        block.div_ceil(target.spec.align) * target.spec.align
                    )));
                }
            };
            for &threads in &opts.threads {
                let region = target.spec.data_bytes / threads as u64 / block * block;
                if region == 0 {
                    return Err(usage(format!(
                        "--size: {threads} threads × a {block}-byte block need a test file of at \
                         least {} B: give a larger --size, fewer --threads or a smaller --block",
                        threads as u64 * block
                    )));
                }
                for &qd in &qds {
                    let buffers = block * u64::from(qd) * threads as u64;
                    if available > 0 && buffers > available / 2 {
                        return Err(usage(format!(
                            "--block/--qd/--threads: {threads} threads × QD {qd} × {block} B need \
                             {} of buffers and {} of memory is available: give fewer or smaller",
                            format_size_approx(buffers),
                            format_size_approx(available)
                        )));
                    }
                    let mut case_notes = notes.clone();
                    if !direct && opts.direct == DirectChoice::WhereAligned {
                        case_notes.push(format!(
                            "{block} B is not a multiple of the {} B O_DIRECT alignment: this case \
                             is buffered (page cache)",
                            target.spec.align
                        ));
                    }
                    cases.push(Box::new(DiskCase {
                        op,
                        block,
                        threads,
                        qd,
                        batch: opts.batch.min(qd),
                        direct,
                        engine,
                        stop: opts.stop,
                        ramp: opts.ramp,
                        rwmix_read: opts.rwmix_read,
                        fsync_every: opts.fsync_every,
                        region,
                        target: target.clone(),
                        notes: case_notes,
                    }));
                }
            }
        }
    }
    Ok((cases, notes))
}

fn target_spec(opts: &DiskOptions) -> Result<TargetSpec> {
    use std::os::unix::fs::FileTypeExt;
    let direct_fill = opts.direct != DirectChoice::Never;
    let spec = |place, data_bytes, (align, align_source): (u64, String)| TargetSpec {
        place,
        data_bytes,
        align,
        align_source,
        keep: opts.keep,
        direct_fill,
    };
    if let Some(dev) = &opts.allow_device_write
        && opts.file.as_deref() != Some(dev.as_path())
    {
        return Err(usage(format!(
            "--allow-device-write: give the same device with --file {}",
            dev.display()
        )));
    }
    let Some(path) = &opts.file else {
        let align = file::alignment(&opts.dir);
        // A kept file this run reuses takes no new space.
        let reused = opts.keep && file::find_kept(&opts.dir, opts.size).is_some();
        file::check_dir(&opts.dir, if reused { 0 } else { opts.size }, align.0)?;
        return Ok(spec(Place::Dir(opts.dir.clone()), opts.size, align));
    };
    match std::fs::metadata(path) {
        Ok(meta) if meta.file_type().is_block_device() => {
            file::check_device(path, opts.allow_device_write.as_deref())?;
            let align = file::alignment(path);
            let bytes = file::device_bytes(path)? / align.0 * align.0;
            Ok(spec(
                Place::Device(path.clone()),
                opts.size.min(bytes),
                align,
            ))
        }
        Ok(_) => {
            let header = file::check_existing_file(path)?;
            if header.data_bytes < opts.size {
                return Err(usage(format!(
                    "--size: the peakbench file {} holds {} B of data: give --size {} or less, or a new --file",
                    path.display(),
                    header.data_bytes,
                    header.data_bytes
                )));
            }
            let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
            let align = file::alignment(parent.unwrap_or(std::path::Path::new(".")));
            Ok(spec(Place::File(path.clone()), opts.size, align))
        }
        Err(_) => {
            let parent = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(std::path::Path::new("."));
            let align = file::alignment(parent);
            file::check_dir(parent, opts.size, align.0)
                .map_err(|e| usage(e.to_string().replacen("--dir", "--file", 1)))?;
            Ok(spec(Place::File(path.clone()), opts.size, align))
        }
    }
}

/// One disk experiment.
pub struct DiskCase {
    pub op: Op,
    pub block: u64,
    pub threads: usize,
    pub qd: u32,
    /// I/Os queued per io_uring submission (at most `qd`).
    pub batch: u32,
    pub direct: bool,
    pub engine: Engine,
    pub stop: Stopping,
    pub ramp: Duration,
    pub rwmix_read: u32,
    pub fsync_every: Option<u64>,
    /// Bytes of the file each thread works in.
    pub region: u64,
    target: Arc<Target>,
    notes: Vec<String>,
}

impl DiskCase {
    fn io_mode(&self) -> &'static str {
        if self.direct { "direct" } else { "buffered" }
    }

    fn end_fsync(&self) -> bool {
        self.op.writes() && !self.direct
    }

    fn iops_headline(&self) -> bool {
        self.block < IOPS_HEADLINE_BELOW
    }

    fn counting(&self, verify: bool) -> String {
        let mut text = format!(
            "bytes = {} B block × I/Os completed by all {} threads (reads and writes), per \
             repetition wall time (first thread start to last thread end); MB = 10^6 B; IOPS = \
             the same I/Os per second; ramp {} excluded; latency per I/O from submission to \
             completion; each thread works in its own {} B region of the file",
            self.block,
            self.threads,
            humantime::format_duration(self.ramp),
            self.region
        );
        if self.op == Op::Rewrite {
            text.push_str("; rewrite: each block read, then written back in place (2 I/Os)");
        }
        if self.op == Op::ReadWrite {
            text.push_str(&format!("; {} % reads, drawn per I/O", self.rwmix_read));
        }
        if self.op.writes() {
            text.push_str(
                "; writes carry fresh data: incompressible random buffers with each 4 KiB \
                 stamped with its offset and a new sequence number (16 B) before each write",
            );
            match self.fsync_every {
                Some(n) => text.push_str(&format!("; fsync after every {n} writes per thread")),
                None => text.push_str("; no periodic fsync"),
            }
            if self.end_fsync() {
                text.push_str(
                    "; buffered: one fsync per thread at the end, inside the timed region",
                );
            }
        }
        if self.op.reads() {
            text.push_str(if verify {
                "; reads check the offset stamps (one per 4 KiB) at both ends of each block, \
                 and every stamp of one read's block in 64 per thread"
            } else {
                "; content check off: fio wrote to the file in an earlier --reference run"
            });
        }
        text
    }
}

impl Case for DiskCase {
    fn id(&self) -> String {
        format!(
            "disk-{}-b{}-t{}-qd{}-{}-{}",
            self.op.name(),
            self.block,
            self.threads,
            self.qd,
            self.io_mode(),
            self.engine.name()
        )
    }

    fn label(&self) -> String {
        format!(
            "disk {} {} t{} qd{} {} {}",
            self.op.name(),
            format_size_approx(self.block),
            self.threads,
            self.qd,
            self.io_mode(),
            self.engine.name()
        )
    }

    fn estimate(&self, ctx: &Context) -> Duration {
        let per_rep = match self.stop {
            Stopping::Duration(d) => d,
            Stopping::Bytes(b) => Duration::from_secs_f64(b as f64 / 500e6),
        };
        per_rep * ctx.runner.repetitions + self.ramp + Duration::from_millis(50)
    }

    fn run(&self, ctx: &Context) -> Result<BenchResult> {
        let file = self.target.open()?;
        file.drop_cached_pages()?;
        let verify = file.verifiable();
        let job = Job {
            op: self.op,
            block: self.block,
            qd: self.qd,
            batch: self.batch,
            direct: self.direct,
            engine: self.engine,
            rwmix_read: self.rwmix_read,
            fsync_every: self.fsync_every,
            end_fsync: self.end_fsync(),
            verify,
            tag: file.tag,
            data_offset: file.data_offset,
            region: self.region,
        };
        let stop = match self.stop {
            Stopping::Duration(d) => Stop::Duration(d),
            Stopping::Bytes(b) => Stop::Work((b / self.block).max(1)),
        };
        let mut settings = ctx.runner.settings(self.threads, stop);
        settings.warmup = self.ramp;
        settings.watch = Some(Duration::from_millis(10));
        let reps = runner::measure(&settings, |i| DiskWorker::new(&job, &file.path, i))?;
        let mbps: Vec<f64> = reps.iter().map(|r| r.units_per_sec() / 1e6).collect();
        let iops: Vec<f64> = reps.iter().map(|r| r.ops_per_sec()).collect();
        let (unit, samples, extra) = if self.iops_headline() {
            ("IOPS", iops, ("throughput", "MB/s", mbps))
        } else {
            ("MB/s", mbps, ("iops", "IOPS", iops))
        };
        let mut params = crate::result::Params {
            threads: Some(self.threads),
            block_bytes: Some(self.block),
            file_bytes: Some(file.data_bytes),
            queue_depth: Some(self.qd),
            engine: Some(self.engine.name().into()),
            direct: Some(self.direct),
            pinned: Some(ctx.runner.pin),
            ..Default::default()
        };
        if let Stopping::Duration(d) = self.stop {
            params.duration_s = Some(d.as_secs_f64());
        }
        let other = &mut params.other;
        other.insert("io".into(), self.io_mode().into());
        other.insert("ramp_s".into(), self.ramp.as_secs_f64().into());
        other.insert("region_bytes".into(), self.region.into());
        if self.engine == Engine::IoUring {
            other.insert("submit_batch".into(), self.batch.into());
        }
        if let Stopping::Bytes(b) = self.stop {
            other.insert("bytes_per_repetition".into(), b.into());
        }
        if self.op == Op::ReadWrite {
            other.insert("rwmix_read_pct".into(), self.rwmix_read.into());
        }
        if self.op.writes() {
            other.insert("fsync_every".into(), self.fsync_every.into());
            other.insert("end_fsync".into(), self.end_fsync().into());
        }
        other.insert(
            "bytes_moved".into(),
            reps.iter().map(|r| r.units).collect::<Vec<_>>().into(),
        );
        let checked: u64 = reps
            .iter()
            .flat_map(|r| &r.threads)
            .map(|t| t.checksum)
            .sum();
        other.insert("stamps_checked".into(), checked.into());
        other.insert("path".into(), file.path.display().to_string().into());
        let info = CaseInfo {
            id: self.id(),
            subsystem: Subsystem::Disk,
            op: self.op.name().into(),
            params,
            metric: if self.iops_headline() {
                "iops"
            } else {
                "throughput"
            }
            .into(),
            unit: unit.into(),
            counting: self.counting(verify),
        };
        let Some(mut result) = BenchResult::from_samples(&ctx.host.hostname, info, samples) else {
            bail!("no repetition moved any bytes");
        };
        if let Some(stats) = Summary::of(&extra.2) {
            result.extra.push(Extra {
                metric: extra.0.into(),
                unit: extra.1.into(),
                value: stats.median,
                stats,
            });
        }
        let mut latency = LatencyHistogram::new();
        for h in reps.iter().filter_map(|r| r.latency.as_ref()) {
            latency.merge(h);
        }
        result.latency_ns = latency.summary();
        let factor = if self.iops_headline() {
            &ctx.peaks.disk.iops
        } else {
            &ctx.peaks.disk.mbps
        };
        let peak = factor.value.map(|value| PeakRef {
            value,
            unit: unit.into(),
            source: format!("the device's rating ({}: {})", factor.source, factor.detail),
        });
        result = result.with_peak(peak);
        let mut warnings = self.notes.clone();
        warnings.extend(runner::repetition_warnings(&reps, result.stats.cv));
        let memory = ctx
            .host
            .memory
            .total_bytes
            .max(ctx.host.memory.available_bytes);
        if !self.direct && self.op.reads() && file.data_bytes <= memory {
            warnings.push(format!(
                "buffered reads of a {} file that fits in the page cache ({} of memory) may \
                 measure RAM, not the disk: drop --buffered, or give --size larger than memory",
                format_size_approx(file.data_bytes),
                format_size_approx(memory)
            ));
        }
        result.warnings = warnings;
        if ctx.runner.reference {
            let job = fio::FioJob {
                path: &file.path,
                op: self.op,
                rwmix_read: self.rwmix_read,
                block: self.block,
                threads: self.threads,
                qd: self.qd,
                batch: self.batch,
                huge_iomem: fio::huge_iomem_fits(self.threads, self.qd, self.block),
                engine: self.engine,
                direct: self.direct,
                data_offset: file.data_offset,
                region: self.region,
                fsync_every: self.fsync_every,
                end_fsync: self.end_fsync(),
                stop: self.stop,
                ramp: self.ramp,
                iops_headline: self.iops_headline(),
                cpus: ctx.runner.pin.then(runner::online_cpus),
            };
            let reference = job.run()?;
            if job.op.writes() && reference.value.is_some() {
                file.mark_foreign_writes();
            }
            result = result.with_reference(reference);
        }
        Ok(result)
    }
}

/// `peakbench disk`.
pub fn command(args: &DiskArgs) -> Result<ExitCode> {
    let mut runner = args.runner.clone();
    if let Some(ramp) = args.ramp {
        runner.warmup = ramp;
    }
    let ctx = crate::app::context(&args.peak, &runner);
    let planned = cases(args, &ctx)?;
    let config = serde_json::json!({ "disk": planned.config, "runner": ctx.runner });
    crate::app::execute(planned.cases, &ctx, &args.output, config, planned.notes)
}

/// The cases of `peakbench disk`, for the command and for `peakbench run` (where the run's
/// warm-up is the ramp unless the table gives `ramp`).
pub(crate) fn cases(args: &DiskArgs, ctx: &Context) -> Result<crate::app::Planned> {
    let options = DiskOptions::from_args(args, args.ramp.unwrap_or(ctx.runner.warmup));
    let (cases, notes) = plan_with_notes(&options, ctx)?;
    Ok(crate::app::Planned {
        cases,
        notes,
        config: serde_json::to_value(&options)?,
    })
}
