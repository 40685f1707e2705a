//! fio, run with the identical job on the same file (`--reference`).
//!
//! The job mirrors the case: the same file, the data region split the same way
//! (`--offset`, `--size` per job and `--offset_increment`), the same block size, jobs, queue
//! depth, engine (`io_uring` or `psync`), O_DIRECT or not, fsync settings, ramp and duration.
//! Random offsets are drawn with replacement on both sides (`--norandommap`). fio has no
//! read-then-write-back of the same block; `rewrite` is compared with fio's sequential 50/50
//! mix (`--rw=rw`), which moves the same bytes in the same order of regions.
//!
//! fio never opens the test file by its name: it inherits a descriptor of the file peakbench
//! opened and checked, and its `--filename` is `/proc/self/fd/N`, which the kernel resolves to
//! that very inode (a new open, so fio's own flags, O_DIRECT included, apply). A name swapped
//! in a shared directory between peakbench's checks and fio's start cannot redirect fio.

use std::os::fd::RawFd;
use std::path::Path;
use std::time::Duration;

use crate::reference::{Invocation, Reading, ToolSpec};
use crate::result::Reference;

use super::buffer::HUGE_BUFFERS_FROM;
use super::settings::{IoEngine, Op, Stopping};

pub(crate) const FIO: ToolSpec = ToolSpec {
    name: "fio",
    program: "fio",
    install: "apt-get install fio",
};

/// Everything fio needs to run the case's job.
pub(crate) struct FioJob<'a> {
    /// The test file's name, shown in the command line only.
    pub path: &'a Path,
    /// A descriptor of the checked test file, 3 or more, close-on-exec, open while fio runs:
    /// fio inherits it and opens `/proc/self/fd/<fd>`.
    pub fd: RawFd,
    pub op: Op,
    pub rwmix_read: u32,
    pub block: u64,
    pub threads: usize,
    pub qd: u32,
    pub batch: u32,
    /// fio's buffers in huge pages (`--iomem=shmhuge`), as peakbench's large ones are.
    pub huge_iomem: bool,
    pub engine: IoEngine,
    pub direct: bool,
    pub data_offset: u64,
    pub region: u64,
    pub fsync_every: Option<u64>,
    pub end_fsync: bool,
    pub stop: Stopping,
    pub ramp: Duration,
    /// The result's unit: "MB/s" or "IOPS".
    pub iops_headline: bool,
    /// With `--pin`, the CPUs peakbench pins its threads to (thread i on the i-th, wrapping);
    /// fio's `split` policy gives job i the same one.
    pub cpus: Option<Vec<usize>>,
}

/// `path` as fio's `--filename` reads it: fio splits the value at every `:` into several files
/// (a directory named with an ISO time, or `/dev/disk/by-path/pci-0000:00:1f.2-…`, would make
/// fio write files peakbench never checked), and turns `\:` back into `:`, leaving every other
/// backslash as it is (fio 3.33, checked with directories named `a:b`, `p\:q` and `x\\y`).
/// So each `:` is escaped and nothing else.
pub(crate) fn fio_filename(path: &Path) -> String {
    path.to_string_lossy().replace(':', "\\:")
}

impl FioJob<'_> {
    pub(crate) fn args(&self) -> Vec<String> {
        let rw = match self.op {
            Op::SeqRead => "read",
            Op::SeqWrite => "write",
            Op::RandRead => "randread",
            Op::RandWrite => "randwrite",
            Op::ReadWrite => "randrw",
            Op::Rewrite => "rw",
        };
        let mut args = vec![
            "--name=peakbench".to_string(),
            format!(
                "--filename={}",
                fio_filename(Path::new(&format!("/proc/self/fd/{}", self.fd)))
            ),
            format!("--rw={rw}"),
            format!("--bs={}", self.block),
            format!("--numjobs={}", self.threads),
            format!("--iodepth={}", self.qd),
            format!(
                "--ioengine={}",
                match self.engine {
                    IoEngine::IoUring => "io_uring",
                    IoEngine::Sync => "psync",
                }
            ),
            format!("--direct={}", u8::from(self.direct)),
            format!("--offset={}", self.data_offset),
            format!("--size={}", self.region),
            format!("--offset_increment={}", self.region),
            "--norandommap".into(),
            "--randrepeat=0".into(),
            "--thread".into(),
        ];
        if self.engine == IoEngine::IoUring {
            args.push(format!("--iodepth_batch_submit={}", self.batch));
        }
        if self.huge_iomem {
            args.push("--iomem=shmhuge".into());
        }
        if let Some(cpus) = &self.cpus {
            let list: Vec<String> = cpus.iter().map(usize::to_string).collect();
            args.push(format!("--cpus_allowed={}", list.join(",")));
            args.push("--cpus_allowed_policy=split".into());
        }
        match self.op {
            Op::ReadWrite => args.push(format!("--rwmixread={}", self.rwmix_read)),
            Op::Rewrite => args.push("--rwmixread=50".into()),
            _ => {}
        }
        if let Some(n) = self.fsync_every {
            args.push(format!("--fsync={n}"));
        }
        if self.end_fsync {
            args.push("--end_fsync=1".into());
        }
        args.extend(self.stop_args());
        if !self.ramp.is_zero() {
            args.push(format!("--ramp_time={}ms", self.ramp.as_millis()));
        }
        args.extend([
            "--group_reporting".into(),
            "--lat_percentiles=1".into(),
            "--output-format=json".into(),
        ]);
        args
    }

    /// How fio stops: after the duration, or after the same bytes or I/Os per job as ours.
    fn stop_args(&self) -> Vec<String> {
        match self.stop {
            Stopping::Duration(d) => vec![
                "--time_based".into(),
                format!("--runtime={}ms", d.as_millis().max(1)),
            ],
            Stopping::Bytes(total) => {
                let per_job = (total / self.threads as u64).max(self.block);
                vec![format!("--io_size={per_job}")]
            }
            Stopping::Ios(total) => {
                // fio counts bytes per job (wrapping in its region as we do): the same I/Os.
                let per_job = (total / self.threads as u64).max(1);
                vec![format!("--io_size={}", per_job * self.block)]
            }
        }
    }

    /// Why fio's buffers are not on huge pages when peakbench's are, if so.
    fn small_pages_note(&self) -> Option<String> {
        (self.block >= HUGE_BUFFERS_FROM && !self.huge_iomem).then(|| {
            format!(
                "fio's buffers are on 4 KiB pages (peakbench's on huge pages): its {} B I/Os may \
                 reach the disk split in pieces (see /sys/block/<dev>/stat); reserve {} of \
                 huge pages (sysctl vm.nr_hugepages) and peakbench gives fio --iomem=shmhuge",
                self.block,
                crate::units::format_size_approx(fio_huge_bytes(self.threads, self.qd, self.block))
            )
        })
    }

    /// Runs fio and returns its value in the result's unit.
    pub(crate) fn run(&self) -> anyhow::Result<Reference> {
        let limit = match self.stop {
            Stopping::Duration(d) => d + self.ramp + Duration::from_secs(60),
            Stopping::Bytes(_) | Stopping::Ios(_) => Duration::from_secs(3600),
        };
        Invocation::new(FIO, self.args(), limit, |stdout| self.reading(stdout))
            .inherit_fd(self.fd, self.path.display().to_string())
            .run()
    }

    /// fio's value in the result's unit, with its other figures in the note.
    fn reading(&self, stdout: &str) -> Result<Reading, String> {
        let v = parse(stdout).ok_or("fio printed no job result in its JSON")?;
        let value = if self.iops_headline {
            v.iops
        } else {
            v.bytes_per_sec / 1e6
        };
        let figures = format!(
            "fio: {:.1} MB/s, {:.0} IOPS, total latency (lat_ns) p50 {} ns, p99 {} ns, p99.9 {} ns",
            v.bytes_per_sec / 1e6,
            v.iops,
            v.p50_ns.map_or("?".into(), |x| format!("{x:.0}")),
            v.p99_ns.map_or("?".into(), |x| format!("{x:.0}")),
            v.p999_ns.map_or("?".into(), |x| format!("{x:.0}"))
        );
        let note = [Some(figures), self.small_pages_note()]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join("; ");
        Ok(Reading {
            value,
            note: Some(note),
        })
    }
}

/// Huge-page memory fio's `--iomem=shmhuge` takes for the job: one segment per job of the
/// buffers plus fio's alignment slack, in whole 2 MiB pages.
pub(crate) fn fio_huge_bytes(threads: usize, qd: u32, block: u64) -> u64 {
    const PAGE: u64 = 2 << 20;
    threads as u64 * (u64::from(qd) * block + PAGE).div_ceil(PAGE) * PAGE
}

/// Whether fio can have its buffers on huge pages for this job: large blocks only (as
/// peakbench's), and only from huge pages the system has already reserved and left free —
/// peakbench never changes `vm.nr_hugepages`.
pub(crate) fn huge_iomem_fits(threads: usize, qd: u32, block: u64) -> bool {
    if block < HUGE_BUFFERS_FROM {
        return false;
    }
    let Ok(meminfo) = std::fs::read_to_string("/proc/meminfo") else {
        return false;
    };
    let field = |key: &str| {
        meminfo
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
    };
    match (field("HugePages_Free:"), field("Hugepagesize:")) {
        (Some(free), Some(kib)) if kib == 2048 => {
            free * kib * 1024 >= fio_huge_bytes(threads, qd, block)
        }
        _ => false,
    }
}

/// fio's figures for the group, reads and writes together.
#[derive(Debug, PartialEq)]
pub(crate) struct FioValue {
    pub bytes_per_sec: f64,
    pub iops: f64,
    /// Latency percentiles of the direction with the most I/Os.
    pub p50_ns: Option<f64>,
    pub p99_ns: Option<f64>,
    pub p999_ns: Option<f64>,
}

/// Parses fio's `--output-format=json` (anything fio prints before the document is skipped).
pub(crate) fn parse(stdout: &str) -> Option<FioValue> {
    let start = stdout.find('{')?;
    let doc: serde_json::Value = serde_json::from_str(&stdout[start..]).ok()?;
    let job = doc.get("jobs")?.get(0)?;
    let mut value = FioValue {
        bytes_per_sec: 0.0,
        iops: 0.0,
        p50_ns: None,
        p99_ns: None,
        p999_ns: None,
    };
    let mut most = 0u64;
    for dir in ["read", "write"] {
        let d = job.get(dir)?;
        value.bytes_per_sec += d.get("bw_bytes")?.as_f64()?;
        value.iops += d.get("iops")?.as_f64()?;
        let n = d.get("total_ios").and_then(|v| v.as_u64()).unwrap_or(0);
        if n > most {
            most = n;
            let pct = |p: &str| d.get("lat_ns")?.get("percentile")?.get(p)?.as_f64();
            value.p50_ns = pct("50.000000");
            value.p99_ns = pct("99.000000");
            value.p999_ns = pct("99.900000");
        }
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random 4 KiB reads, 2 jobs at QD 32 on io_uring, 10 s after a 1 s ramp, unpinned.
    fn randread_job() -> FioJob<'static> {
        FioJob {
            path: Path::new("/d/peakbench-1.tmp"),
            fd: 7,
            op: Op::RandRead,
            rwmix_read: 50,
            block: 4096,
            threads: 2,
            qd: 32,
            batch: 1,
            huge_iomem: false,
            engine: IoEngine::IoUring,
            direct: true,
            data_offset: 4096,
            region: 1 << 20,
            fsync_every: None,
            end_fsync: false,
            stop: Stopping::Duration(Duration::from_secs(10)),
            ramp: Duration::from_secs(1),
            iops_headline: true,
            cpus: None,
        }
    }

    #[test]
    fn a_colon_in_the_path_reaches_fio_as_one_file() {
        assert_eq!(
            fio_filename(Path::new("/d/run:2026-11-24T08:00/peakbench-1.tmp")),
            "/d/run\\:2026-11-24T08\\:00/peakbench-1.tmp"
        );
        assert_eq!(fio_filename(Path::new("/d/p\\:q/f")), "/d/p\\\\:q/f");
        assert_eq!(fio_filename(Path::new("/d/x\\y/f")), "/d/x\\y/f");
    }

    /// fio writes through the descriptor peakbench checked, not the name. When fio opened the
    /// test file by its name, a name swapped for a symbolic link after peakbench's checks sent
    /// fio's writes to the link's target; through the descriptor the victim is untouched and the
    /// checked inode holds fio's writes.
    #[test]
    fn fio_writes_through_the_checked_descriptor_not_the_name() {
        use crate::disk::file::{self, Place, TargetSpec};
        if crate::reference::find_program("fio").is_none() {
            eprintln!("skipped: fio is not installed");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let file = file::open(&TargetSpec {
            place: Place::Dir(dir.path().to_path_buf()),
            data_bytes: 1 << 20,
            align: 4096,
            align_source: "test".into(),
            keep: false,
            direct_fill: false,
        })
        .unwrap();
        let checked = dir.path().join("checked-inode");
        std::fs::rename(&file.path, &checked).unwrap();
        let before = std::fs::read(&checked).unwrap();
        let victim = dir.path().join("victim");
        let victim_bytes = vec![0x55u8; before.len()];
        std::fs::write(&victim, &victim_bytes).unwrap();
        std::os::unix::fs::symlink(&victim, &file.path).unwrap();

        let shared = file.share_with_tool().unwrap();
        let job = FioJob {
            path: &file.path,
            fd: std::os::fd::AsRawFd::as_raw_fd(&shared),
            op: Op::SeqWrite,
            rwmix_read: 50,
            block: 64 << 10,
            threads: 1,
            qd: 1,
            batch: 1,
            huge_iomem: false,
            engine: IoEngine::Sync,
            direct: true,
            data_offset: file.data_offset,
            region: file.data_bytes,
            fsync_every: None,
            end_fsync: true,
            stop: Stopping::Bytes(file.data_bytes),
            ramp: Duration::ZERO,
            iops_headline: false,
            cpus: None,
        };
        let reference = job.run().unwrap();
        assert!(reference.value.is_some(), "{reference:?}");
        assert!(
            reference.command.contains("--filename=/proc/self/fd/")
                && reference
                    .command
                    .contains(&format!("open on {}", file.path.display())),
            "{}",
            reference.command
        );
        assert_eq!(
            std::fs::read(&victim).unwrap(),
            victim_bytes,
            "fio followed the planted link"
        );
        let after = std::fs::read(&checked).unwrap();
        let offset = file.data_offset as usize;
        assert_eq!(after[..offset], before[..offset], "the header is kept");
        assert_ne!(
            after[offset..],
            before[offset..],
            "fio wrote the checked inode"
        );
    }

    #[test]
    fn the_job_names_every_setting() {
        let job = randread_job();
        let line = job.args().join(" ");
        for part in [
            "--filename=/proc/self/fd/7 ",
            "--rw=randread",
            "--bs=4096",
            "--iodepth_batch_submit=1",
            "--numjobs=2",
            "--iodepth=32",
            "--ioengine=io_uring",
            "--direct=1",
            "--offset=4096",
            "--size=1048576",
            "--offset_increment=1048576",
            "--time_based",
            "--runtime=10000ms",
            "--ramp_time=1000ms",
            "--output-format=json",
        ] {
            assert!(line.contains(part), "{part} missing from {line}");
        }
        assert!(
            !line.contains("--iomem"),
            "small blocks keep fio's own buffers"
        );
        assert!(job.small_pages_note().is_none());
        assert!(
            !line.contains("--cpus_allowed"),
            "unpinned: fio places its jobs freely"
        );
    }

    #[test]
    fn pinned_threads_pin_fios_jobs_to_the_same_cpus() {
        let mut job = randread_job();
        job.threads = 3;
        job.cpus = Some(vec![2, 5]);
        let args = job.args();
        assert!(args.contains(&"--cpus_allowed=2,5".to_string()), "{args:?}");
        assert!(args.contains(&"--cpus_allowed_policy=split".to_string()));
    }

    #[test]
    fn large_blocks_give_fio_huge_pages_or_say_why_not() {
        let mut job = FioJob {
            op: Op::SeqRead,
            block: 1 << 20,
            threads: 1,
            qd: 8,
            huge_iomem: true,
            region: 1 << 30,
            ramp: Duration::ZERO,
            iops_headline: false,
            ..randread_job()
        };
        assert!(job.args().contains(&"--iomem=shmhuge".to_string()));
        assert!(job.small_pages_note().is_none());
        job.huge_iomem = false;
        assert!(!job.args().iter().any(|a| a.starts_with("--iomem")));
        let note = job
            .small_pages_note()
            .expect("a note when fio's pages are small");
        assert!(
            note.contains("vm.nr_hugepages") && note.contains("10 MiB"),
            "{note}"
        );
        // 8 MiB of buffers and fio's 2 MiB of alignment slack, per job.
        assert_eq!(fio_huge_bytes(2, 8, 1 << 20), 2 * (10 << 20));
    }

    #[test]
    fn fio_json_is_parsed_read_and_write_together() {
        let text = r#"note: some fio chatter
{"jobs":[{"read":{"bw_bytes":1000000,"iops":250.0,"total_ios":100,
  "lat_ns":{"percentile":{"50.000000":1000,"99.000000":5000,"99.900000":9000}}},
 "write":{"bw_bytes":2000000,"iops":500.0,"total_ios":0,"lat_ns":{}}}]}"#;
        let v = parse(text).unwrap();
        assert_eq!(v.bytes_per_sec, 3_000_000.0);
        assert_eq!(v.iops, 750.0);
        assert_eq!(v.p99_ns, Some(5000.0));
        assert!(parse("fio: error").is_none());
    }
}
