//! `peakbench disk`'s options checked against the target and expanded into cases; nothing is
//! created yet.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;

use super::args::DiskArgs;
use super::case::DiskCase;
use super::device;
use super::engine;
use super::error::{name_flag, target_usage};
use super::file::{self, Place, TargetSpec};
use super::settings::{DirectChoice, IoEngine, IoEngineChoice, Op, Stopping};
use super::target::DiskTarget;
use crate::error::usage;
use crate::options::unique;
use crate::plan::{Case, Cases, Context};
use crate::units::format_size_approx;

/// Validated disk settings; what [`plan`] expands. Constructible from code (presets).
#[derive(Clone, Debug, Serialize)]
pub(crate) struct DiskOptions {
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
    pub engine: IoEngineChoice,
    pub rwmix_read: u32,
    pub fsync_every: Option<u64>,
    pub keep: bool,
    pub size_fit: bool,
    pub allow_device_write: Option<PathBuf>,
}

impl DiskOptions {
    pub(crate) fn from_args(args: &DiskArgs, ramp: Duration) -> DiskOptions {
        DiskOptions {
            ops: unique(&args.op),
            blocks: unique(&args.block),
            threads: args.threads.or(&[1]),
            qds: unique(&args.qd),
            batch: args.batch,
            size: args.size,
            stop: match (args.bytes, args.ios) {
                (Some(b), _) => Stopping::Bytes(b),
                (None, Some(n)) => Stopping::Ios(n),
                (None, None) => Stopping::Duration(args.timing.duration),
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

/// Checks the target and expands the options into cases (nothing is created yet), with the
/// notes (e.g. an engine fallback) also put in each result's warnings.
pub(super) fn plan_with_notes(opts: &DiskOptions, ctx: &Context) -> Result<(Cases, Vec<String>)> {
    let mut notes = Vec::new();
    let fitted = fit_size(opts)?;
    let opts = match &fitted {
        Some((fitted, note)) => {
            notes.push(note.clone());
            fitted
        }
        None => opts,
    };
    let spec = target_spec(opts)?;
    if let Place::Device(device) = &spec.place
        && let Some(note) = &device.probe_note
    {
        notes.push(note.clone());
    }
    let engine = choose_engine(
        opts.engine,
        engine::new_ring(1).map(drop).map_err(|e| e.to_string()),
        &mut notes,
    )?;
    let qds = queue_depths(opts, engine, &mut notes)?;
    let target = Arc::new(DiskTarget::new(spec));
    let available = ctx.host.memory.available_bytes;
    let mut cases: Vec<Box<dyn Case>> = Vec::new();
    for &op in &opts.ops {
        for &block in &opts.blocks {
            let direct = direct_for(opts.direct, block, target.spec())?;
            for &threads in &opts.threads {
                let region = region_bytes(target.spec().data_bytes, threads, block)?;
                if let Stopping::Ios(n) = opts.stop
                    && n < threads as u64
                {
                    return Err(usage(format!(
                        "--ios: {n} I/Os cannot be shared by {threads} threads: give at least \
                         {threads}, or fewer --threads"
                    )));
                }
                for &qd in &qds {
                    check_buffers(threads, qd, block, available)?;
                    let mut case_notes = notes.clone();
                    if !direct && opts.direct == DirectChoice::WhereAligned {
                        case_notes.push(format!(
                            "{block} B is not a multiple of the {} B O_DIRECT alignment: this case \
                             is buffered (page cache)",
                            target.spec().align
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
                        pin: ctx.runner.pin,
                        target: target.clone(),
                        notes: case_notes,
                    }));
                }
            }
        }
    }
    Ok((cases, notes))
}

/// The queue depths to run: `--qd` as given, or 1 where the sync engine was chosen for want of
/// io_uring (an explicit `--engine sync` with a depth above 1 is refused).
fn queue_depths(opts: &DiskOptions, engine: IoEngine, notes: &mut Vec<String>) -> Result<Vec<u32>> {
    if engine == IoEngine::Sync && opts.qds.iter().any(|&q| q > 1) {
        if opts.engine == IoEngineChoice::Sync {
            return Err(usage(
                "--qd: the sync engine has one I/O in flight per thread: give --qd 1 or --engine io_uring",
            ));
        }
        notes.push("queue depths above 1 run as 1 with the sync engine".into());
        return Ok(vec![1]);
    }
    Ok(opts.qds.clone())
}

/// Refuses a case whose I/O buffers would take more than half the available memory.
fn check_buffers(threads: usize, qd: u32, block: u64, available: u64) -> Result<()> {
    let buffers = block * u64::from(qd) * threads as u64;
    if available > 0 && buffers > available / 2 {
        return Err(usage(format!(
            "--block/--qd/--threads: {threads} threads × QD {qd} × {block} B need {} of buffers \
             and {} of memory is available: give fewer or smaller",
            format_size_approx(buffers),
            format_size_approx(available)
        )));
    }
    Ok(())
}

/// With `--size-fit` and a `--size` that does not fit in `--dir`: the options with the size
/// that fits, and the note that says so. `None` when nothing changes.
fn fit_size(opts: &DiskOptions) -> Result<Option<(DiskOptions, String)>> {
    if !opts.size_fit || opts.file.is_some() {
        return Ok(None);
    }
    let Some(size) = file::fitting_size(&opts.dir, opts.size).map_err(|e| name_flag(e, "--dir"))?
    else {
        return Ok(None);
    };
    let note = format!(
        "a {} test file does not fit in {}: using {} (--size-fit); give --dir on a larger \
         file system for the full size",
        format_size_approx(opts.size),
        opts.dir.display(),
        format_size_approx(size)
    );
    let mut fitted = opts.clone();
    fitted.size = size;
    Ok(Some((fitted, note)))
}

/// The engine to run: the one asked for, or with `auto` io_uring where the kernel gives a ring
/// (`ring`) and sync with a note where it refuses.
fn choose_engine(
    choice: IoEngineChoice,
    ring: Result<(), String>,
    notes: &mut Vec<String>,
) -> Result<IoEngine> {
    match (choice, ring) {
        (IoEngineChoice::Sync, _) => Ok(IoEngine::Sync),
        (IoEngineChoice::IoUring | IoEngineChoice::Auto, Ok(())) => Ok(IoEngine::IoUring),
        (IoEngineChoice::IoUring, Err(e)) => Err(usage(format!(
            "--engine io_uring: the kernel refuses io_uring ({e}): give --engine sync or auto"
        ))),
        (IoEngineChoice::Auto, Err(e)) => {
            notes.push(format!(
                "io_uring is not available ({e}): running the sync engine (pread/pwrite), \
                 one I/O in flight per thread; check /proc/sys/kernel/io_uring_disabled or \
                 the container's seccomp profile to use queue depths"
            ));
            Ok(IoEngine::Sync)
        }
    }
}

/// Whether a block runs with O_DIRECT: always where it is a multiple of the target's alignment,
/// never with `--buffered`, and an unaligned block is refused unless buffered I/O is allowed
/// for it (`--buffered-if-unaligned`).
fn direct_for(choice: DirectChoice, block: u64, spec: &TargetSpec) -> Result<bool> {
    let aligned = block.is_multiple_of(spec.align);
    match choice {
        DirectChoice::Never => Ok(false),
        DirectChoice::WhereAligned => Ok(aligned),
        DirectChoice::Always if aligned => Ok(true),
        DirectChoice::Always => Err(usage(format!(
            "--block: {block} B is not a multiple of {} B ({}), which O_DIRECT needs: \
             give e.g. {} B, or --buffered, or --buffered-if-unaligned",
            spec.align,
            spec.align_source,
            block.div_ceil(spec.align) * spec.align
        ))),
    }
}

/// Each thread's region of the file: an equal share, a whole number of blocks.
fn region_bytes(data_bytes: u64, threads: usize, block: u64) -> Result<u64> {
    match data_bytes / threads as u64 / block * block {
        0 => Err(usage(format!(
            "--size: {threads} threads × a {block}-byte block need a test file of at least \
             {} B: give a larger --size, fewer --threads or a smaller --block",
            threads as u64 * block
        ))),
        region => Ok(region),
    }
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
        file::check_dir(&opts.dir, if reused { 0 } else { opts.size }, align.0)
            .map_err(|e| target_usage(e, "--dir"))?;
        return Ok(spec(Place::Dir(opts.dir.clone()), opts.size, align));
    };
    match std::fs::metadata(path) {
        Ok(meta) if meta.file_type().is_block_device() => {
            // Held open with O_EXCL from here to the end of the run (the plan owns it).
            let device = device::check_device(path, opts.allow_device_write.as_deref())
                .map_err(|e| target_usage(e, "--file"))?;
            let align = file::alignment_of_device(device.rdev);
            let bytes = device.bytes / align.0 * align.0;
            Ok(spec(
                Place::Device(Arc::new(device)),
                opts.size.min(bytes),
                align,
            ))
        }
        Ok(_) => {
            let header = file::check_existing_file(path).map_err(|e| target_usage(e, "--file"))?;
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
            file::check_dir(parent, opts.size, align.0).map_err(|e| target_usage(e, "--file"))?;
            Ok(spec(Place::File(path.clone()), opts.size, align))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::plan_for;

    fn spec(align: u64) -> TargetSpec {
        TargetSpec {
            place: Place::Dir(PathBuf::from(".")),
            data_bytes: 1 << 20,
            align,
            align_source: "logical block size".into(),
            keep: false,
            direct_fill: true,
        }
    }

    #[test]
    fn o_direct_is_chosen_per_block_by_the_alignment() {
        let s = spec(512);
        assert!(direct_for(DirectChoice::Always, 4096, &s).unwrap());
        let refused = direct_for(DirectChoice::Always, 8, &s)
            .unwrap_err()
            .to_string();
        assert!(
            refused.starts_with("--block: 8 B is not a multiple of 512 B"),
            "{refused}"
        );
        assert!(refused.contains("give e.g. 512 B"), "{refused}");
        assert!(!direct_for(DirectChoice::WhereAligned, 8, &s).unwrap());
        assert!(direct_for(DirectChoice::WhereAligned, 8192, &s).unwrap());
        assert!(!direct_for(DirectChoice::Never, 4096, &s).unwrap());
    }

    #[test]
    fn a_refused_ring_falls_back_to_sync_with_a_note_only_for_auto() {
        let mut notes = Vec::new();
        let refused = || Err("Operation not permitted".to_string());
        assert_eq!(
            choose_engine(IoEngineChoice::Auto, refused(), &mut notes).unwrap(),
            IoEngine::Sync
        );
        assert!(notes[0].contains("io_uring is not available"), "{notes:?}");
        let e = choose_engine(IoEngineChoice::IoUring, refused(), &mut notes).unwrap_err();
        assert!(e.to_string().starts_with("--engine io_uring"), "{e}");
        assert_eq!(
            choose_engine(IoEngineChoice::Auto, Ok(()), &mut notes).unwrap(),
            IoEngine::IoUring
        );
        assert_eq!(notes.len(), 1);
    }

    #[test]
    fn regions_are_equal_shares_in_whole_blocks() {
        assert_eq!(region_bytes(1 << 20, 3, 4096).unwrap(), 85 * 4096);
        assert_eq!(region_bytes(10_000, 1, 3).unwrap(), 9999);
        let e = region_bytes(4096, 2, 4096).unwrap_err().to_string();
        assert!(
            e.starts_with("--size: 2 threads × a 4096-byte block"),
            "{e}"
        );
    }

    #[test]
    fn buffers_beyond_half_the_memory_are_refused_before_anything_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = Context::fixture();
        let d = dir.path().to_str().unwrap();
        // 8 threads × QD 4096 × 1 GiB of buffers against the fixture's 22 GiB.
        let e = plan_for::<super::super::Disk>(
            &[
                "disk", "--dir", d, "-s", "8GiB", "-b", "1GiB", "--qd", "4096", "-t", "8",
            ],
            &ctx,
        )
        .err()
        .expect("refused");
        assert!(e.to_string().starts_with("--block/--qd/--threads"), "{e}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let plan =
            plan_for::<super::super::Disk>(&["disk", "--dir", d, "-s", "4MiB", "-t", "1,2"], &ctx)
                .unwrap();
        // Four ops × two blocks × two thread counts, nothing created yet.
        assert_eq!(plan.cases.len(), 16);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
