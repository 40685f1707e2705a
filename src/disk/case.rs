//! One disk case: the job it runs, how it counts, and what it reports.

use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;

use super::engine::{DiskWorker, ThreadIo};
use super::file::TestFile;
use super::fio;
use super::settings::{IOPS_HEADLINE_BELOW, IoEngine, Op, Stopping};
use super::target::DiskTarget;
use crate::peak::PeakRef;
use crate::plan::{Case, CaseSpec, Context, guess};
use crate::result::{BenchResult, Params, Reference, Subsystem};
use crate::runner::{self, Repetition, RunSettings, Stop};
use crate::units::format_size_approx;

/// One disk experiment.
pub(crate) struct DiskCase {
    pub op: Op,
    pub block: u64,
    pub threads: usize,
    pub qd: u32,
    /// I/Os queued per io_uring submission (at most `qd`).
    pub batch: u32,
    pub direct: bool,
    pub engine: IoEngine,
    pub stop: Stopping,
    pub ramp: Duration,
    pub rwmix_read: u32,
    pub fsync_every: Option<u64>,
    /// Bytes of the file each thread works in.
    pub region: u64,
    /// Threads pinned to CPUs (`--pin`), for the record.
    pub pin: bool,
    pub(super) target: Arc<DiskTarget>,
    pub(super) notes: Vec<String>,
}

impl DiskCase {
    fn io_mode(&self) -> &'static str {
        if self.direct { "direct" } else { "buffered" }
    }

    fn end_fsync(&self) -> bool {
        self.op.writes() && !self.direct
    }

    /// The share of the case's I/Os (and bytes: every I/O is one block) that are reads: rewrite
    /// reads each block and writes it back (one half each), readwrite draws --rwmix per I/O.
    fn read_fraction(&self) -> f64 {
        match self.op {
            Op::SeqRead | Op::RandRead => 1.0,
            Op::SeqWrite | Op::RandWrite => 0.0,
            Op::Rewrite => 0.5,
            Op::ReadWrite => f64::from(self.rwmix_read) / 100.0,
        }
    }

    fn iops_headline(&self) -> bool {
        self.block < IOPS_HEADLINE_BELOW
    }

    fn counting(&self, verify: bool) -> String {
        let mut text = format!(
            "bytes = {} B block × I/Os completed by all {} threads (reads and writes), per \
             repetition wall time (first thread start to last thread end); MB = 10^6 B; IOPS = \
             the same I/Os per second; ramp {} excluded; latency per I/O from submission to \
             completion; wall_time_per_io = repetition wall time / I/Os of all threads (1/IOPS, \
             not an I/O's latency); each thread works in its own {} B region of the file",
            self.block,
            self.threads,
            humantime::format_duration(self.ramp),
            self.region
        );
        if let Stopping::Ios(n) = self.stop {
            text.push_str(&format!(
                "; each repetition is {n} I/Os of all threads together, split equally"
            ));
        }
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

    /// What each thread does, on the file as it was opened.
    fn thread_io(&self, file: &TestFile, verify: bool) -> ThreadIo {
        ThreadIo {
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
        }
    }

    /// When the runner ends a repetition: bytes become whole blocks, at least one.
    fn runner_stop(&self) -> Stop {
        match self.stop {
            Stopping::Duration(d) => Stop::Duration(d),
            Stopping::Bytes(b) => Stop::Work((b / self.block).max(1)),
            Stopping::Ios(n) => Stop::Work(n),
        }
    }

    /// The disk's peak for this case's mix of reads and writes, in the headline's unit.
    fn peak(&self, ctx: &Context, unit: &str) -> Option<PeakRef> {
        ctx.peaks
            .disk
            .for_mix(self.read_fraction(), self.iops_headline())
            .map(|(value, source)| PeakRef {
                value,
                unit: unit.into(),
                source,
                pair: None,
            })
    }

    /// Buffered reads of a file the page cache can hold may measure memory, not the disk.
    fn page_cache_warning(&self, ctx: &Context, file: &TestFile) -> Option<String> {
        let memory = ctx
            .host
            .memory
            .total_bytes
            .max(ctx.host.memory.available_bytes);
        (!self.direct && self.op.reads() && file.data_bytes <= memory).then(|| {
            format!(
                "buffered reads of a {} file that fits in the page cache ({} of memory) may \
                 measure RAM, not the disk: drop --buffered, or give --size larger than memory",
                format_size_approx(file.data_bytes),
                format_size_approx(memory)
            )
        })
    }

    /// fio's run of the same job on the same file (`--reference`).
    fn fio_reference(&self, ctx: &Context, file: &TestFile) -> Result<Reference> {
        // fio inherits the checked file's descriptor and never opens its name.
        let shared = file.share_with_tool()?;
        let job = fio::FioJob {
            path: &file.path,
            fd: shared.as_raw_fd(),
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
        drop(shared);
        if job.op.writes() && reference.value.is_some() {
            file.mark_foreign_writes();
        }
        Ok(reference)
    }
}

impl Case for DiskCase {
    fn spec(&self) -> CaseSpec {
        let mut params = Params {
            threads: Some(self.threads),
            block_bytes: Some(self.block),
            file_bytes: Some(self.target.data_bytes()),
            queue_depth: Some(self.qd),
            engine: Some(self.engine.name().into()),
            direct: Some(self.direct),
            pinned: Some(self.pin),
            ..Default::default()
        };
        if let Stopping::Duration(d) = self.stop {
            params.duration_s = Some(d.as_secs_f64());
        }
        let other = &mut params.other;
        other.insert("io".into(), self.io_mode().into());
        other.insert("ramp_s".into(), self.ramp.as_secs_f64().into());
        other.insert("region_bytes".into(), self.region.into());
        if self.engine == IoEngine::IoUring {
            other.insert("submit_batch".into(), self.batch.into());
        }
        if let Stopping::Bytes(b) = self.stop {
            other.insert("bytes_per_repetition".into(), b.into());
        }
        if let Stopping::Ios(n) = self.stop {
            other.insert("ios_per_repetition".into(), n.into());
        }
        if self.op == Op::ReadWrite {
            other.insert("rwmix_read_pct".into(), self.rwmix_read.into());
        }
        if self.op.writes() {
            other.insert("fsync_every".into(), self.fsync_every.into());
            other.insert("end_fsync".into(), self.end_fsync().into());
        }
        // A count-based case is another experiment than a timed one with the same parameters.
        let (count, count_label) = match self.stop {
            Stopping::Ios(n) => (format!("-n{n}"), format!(" {n} I/Os")),
            _ => (String::new(), String::new()),
        };
        CaseSpec {
            id: format!(
                "disk-{}-b{}-t{}-qd{}-{}-{}{count}",
                self.op.name(),
                self.block,
                self.threads,
                self.qd,
                self.io_mode(),
                self.engine.name()
            ),
            label: format!(
                "disk {} {} t{} qd{} {} {}{count_label}",
                self.op.name(),
                format_size_approx(self.block),
                self.threads,
                self.qd,
                self.io_mode(),
                self.engine.name()
            ),
            subsystem: Subsystem::Disk,
            op: self.op.name().into(),
            params,
        }
    }

    fn estimate(&self, ctx: &Context) -> Duration {
        let per_rep = match self.stop {
            Stopping::Duration(d) => d,
            Stopping::Bytes(b) => guess::secs(b as f64 / 500e6),
            // A guess for the plan only: 10,000 IOPS per I/O in flight, at most 100,000 IOPS.
            Stopping::Ios(n) => {
                guess::secs(n as f64 / (10e3 * f64::from(self.qd) * self.threads as f64).min(100e3))
            }
        };
        guess::sum([
            guess::times(per_rep, ctx.runner.repetitions.into()),
            self.ramp,
            Duration::from_millis(50),
        ])
    }

    fn run(&self, ctx: &Context) -> Result<BenchResult> {
        let file = self.target.open()?;
        file.drop_cached_pages()?;
        let verify = file.verifiable();
        let job = self.thread_io(&file, verify);
        let mut settings = RunSettings::new(&ctx.runner, self.threads, self.runner_stop());
        settings.warmup = self.ramp;
        settings.watch = Some(Duration::from_millis(10));
        let reps = runner::measure(&settings, |i| DiskWorker::new(&job, &file, i))?;
        let mbps: Vec<f64> = reps.iter().map(|r| r.units_per_sec() / 1e6).collect();
        let iops: Vec<f64> = reps.iter().map(|r| r.ops_per_sec()).collect();
        let wall_per_io = wall_times_per_io(&reps);
        let (metric, unit, samples, extra) = if self.iops_headline() {
            ("iops", "IOPS", iops, ("throughput", "MB/s", mbps))
        } else {
            ("throughput", "MB/s", mbps, ("iops", "IOPS", iops))
        };
        let checked: u64 = reps
            .iter()
            .flat_map(|r| &r.threads)
            .map(|t| t.checksum)
            .sum();
        let mut result = self
            .spec()
            .measured(
                &ctx.host.hostname,
                metric,
                unit,
                self.counting(verify),
                samples,
            )?
            .walls(reps.iter().map(|r| r.wall))
            .param(
                "bytes_moved",
                reps.iter().map(|r| r.units).collect::<Vec<_>>(),
            )
            .param("stamps_checked", checked)
            .param("path", file.path.display().to_string())
            .extra(extra.0, extra.1, &extra.2)
            .extra("wall_time_per_io", "ns", &wall_per_io)
            .latency(reps.iter().filter_map(|r| r.latency.as_ref()))
            .peak(self.peak(ctx, unit))
            .warn(self.notes.iter().cloned())
            .warn(self.page_cache_warning(ctx, &file));
        if ctx.runner.reference {
            result = result.reference(self.fio_reference(ctx, &file)?);
        }
        Ok(result.finish())
    }
}

/// Wall time per I/O (`wall_time_per_io`, ns): the repetition's wall time ÷ the I/Os of all
/// threads, that is 1/IOPS, as the users' reports count disk latency. It falls as threads and
/// queue depth are added (I/Os overlap); each I/O's own time is in the latency percentiles.
fn wall_times_per_io(reps: &[Repetition]) -> Vec<f64> {
    reps.iter()
        .filter(|r| r.ops > 0 && !r.wall.is_zero())
        .map(|r| r.wall.as_secs_f64() * 1e9 / r.ops as f64)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_time_per_io_is_the_inverse_of_iops() {
        // 4 threads at QD 8 complete 200,000 I/Os in a 0.5 s repetition: 400,000 IOPS, and
        // 0.5 s / 200,000 = 2,500 ns of wall time per I/O, whatever each I/O took itself.
        let rep = Repetition {
            wall: Duration::from_millis(500),
            thread_time: Duration::from_secs(2),
            cpu_time: Duration::from_secs(2),
            units: 0,
            ops: 200_000,
            latency: None,
            threads: Vec::new(),
        };
        assert_eq!(rep.ops_per_sec(), 400_000.0);
        assert_eq!(wall_times_per_io(&[rep]), [2500.0]);
    }
}
