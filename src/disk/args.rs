//! The flags of `peakbench disk`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::settings::{IoEngineChoice, MAX_BLOCK, Op};
use crate::options::{
    Defaults, Threads, Timing, duration, percent, positive_count, positive_size, positive_u32,
};

/// A block size, 1 B to [`MAX_BLOCK`].
fn block(text: &str) -> Result<u64, String> {
    match positive_size(text)? {
        b if b > MAX_BLOCK => Err(format!(
            "a block of {b} B is more than one I/O can move: give at most 1GiB"
        )),
        b => Ok(b),
    }
}

/// A queue depth, 1 to 4096.
fn queue_depth(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(n) if (1..=4096).contains(&n) => Ok(n),
        _ => Err(format!(
            "'{text}' is not a queue depth: give 1 to 4096, e.g. 1,8,32"
        )),
    }
}

/// The defaults of `disk`: one thread (each thread has its own file descriptor and region of
/// the file; `-t` sweeps them); 3 s per repetition, long enough for a device's write cache and
/// its queue to reach their steady state.
#[derive(Debug, Clone)]
pub(crate) struct DiskDefaults;

impl Defaults for DiskDefaults {
    const THREADS: &'static str = "1; each thread has its own file descriptor and region of \
        the file";
    const DURATION: &'static str = "3s";
}

#[derive(Args, Debug)]
pub(crate) struct DiskArgs {
    /// Ops (list)
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        ignore_case = true,
        default_value = "seqread,seqwrite,randread,randwrite"
    )]
    pub op: Vec<Op>,
    /// Block sizes (list), e.g. 4KiB,1MiB; O_DIRECT needs multiples of the device's logical block
    #[arg(long, short = 'b', value_name = "LIST", default_value = "4KiB,1MiB", value_delimiter = ',', value_parser = block)]
    pub block: Vec<u64>,
    // Each thread has its own file descriptor and region of the file.
    #[command(flatten)]
    pub threads: Threads<DiskDefaults>,
    /// Queue depths per thread (list); above 1 needs io_uring
    #[arg(long, value_name = "LIST", default_value = "1", value_delimiter = ',', value_parser = queue_depth)]
    pub qd: Vec<u32>,
    /// I/Os queued per io_uring submission (fio's iodepth_batch_submit): 1 submits each I/O the
    /// moment it is ready, as fio does, which keeps a virtualised disk busiest; N waits for N
    #[arg(long, value_name = "N", default_value = "1", value_parser = positive_u32)]
    pub batch: u32,
    /// Data size of the test file
    #[arg(long, short = 's', value_name = "SIZE", default_value = "1GiB", value_parser = positive_size)]
    pub size: u64,
    #[command(flatten)]
    pub timing: Timing<DiskDefaults>,
    /// Size-based instead: bytes moved by all threads in one repetition
    #[arg(long, value_name = "SIZE", value_parser = positive_size, conflicts_with_all = ["ios", "duration"])]
    pub bytes: Option<u64>,
    /// Count-based instead: I/Os completed by all threads in one repetition (split equally),
    /// e.g. a latency sweep with the same number of samples at every thread count
    #[arg(long, value_name = "N", value_parser = positive_count, conflicts_with = "duration")]
    pub ios: Option<u64>,
    /// Unmeasured ramp-up before the repetitions of each case (default: --warmup's value)
    #[arg(long, value_name = "DURATION", value_parser = duration)]
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
    #[arg(long, value_enum, ignore_case = true, default_value = "auto")]
    pub engine: IoEngineChoice,
    /// Read share of readwrite, percent
    #[arg(long, value_name = "PCT", default_value = "50", value_parser = percent)]
    pub rwmix: u32,
    /// fsync after every N writes of a thread (inside the timed region)
    #[arg(long, value_name = "N", value_parser = positive_count)]
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
}
