//! The I/O loops: io_uring with a queue depth per thread, or synchronous pread/pwrite.
//!
//! Each thread owns its file descriptor, its buffers (aligned for O_DIRECT, filled with
//! pseudo-random bytes before timing) and its region of the file (the data region split evenly,
//! a whole number of blocks each), as fio's `offset_increment` does. A latency is measured per
//! I/O from just before it is handed to the kernel to just after its completion is seen, and
//! recorded in the thread's histogram.
//!
//! Writes stamp their buffers and reads check what they got as [`super::stamp`] says.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::time::Instant;

use anyhow::{Result, anyhow};
use io_uring::{IoUring, opcode, types};

use crate::rng::Rng;
use crate::runner::{Quota, Tally, Worker};
use crate::stats::LatencyHistogram;

use super::buffer::AlignedBuf;
use super::error::io_error;
use super::file::TestFile;
use super::settings::{IoEngine, Op};
use super::stamp::{FULL_CHECK_EVERY, stamp, verify, verify_ends};

/// What one thread does: everything the I/O loop needs, fixed before the run.
#[derive(Clone, Debug)]
pub(crate) struct ThreadIo {
    pub op: Op,
    pub block: u64,
    pub qd: u32,
    /// I/Os queued before each io_uring submission (1: each is submitted the moment it is ready).
    pub batch: u32,
    pub direct: bool,
    pub engine: IoEngine,
    /// Read share of `readwrite`, percent.
    pub rwmix_read: u32,
    /// fsync after this many writes of a thread.
    pub fsync_every: Option<u64>,
    /// fsync once at the end of each repetition, inside the timed region (buffered writes).
    pub end_fsync: bool,
    /// Whether reads check the offset stamps.
    pub verify: bool,
    pub tag: u64,
    /// The region each thread works in: `region_start(i) = data_offset + i * region`.
    pub data_offset: u64,
    pub region: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
}

/// Environment variable that makes io_uring setup fail as a kernel that refuses it would. A
/// test hook: read only in builds with the `test-hooks` feature, which only the tests enable.
#[cfg(feature = "test-hooks")]
pub(crate) const REFUSE_IO_URING_ENV: &str = "PEAKBENCH_TEST_REFUSE_IO_URING";

/// Creates a ring, or says why the kernel refuses one.
pub(crate) fn new_ring(entries: u32) -> std::io::Result<IoUring> {
    #[cfg(feature = "test-hooks")]
    if std::env::var_os(REFUSE_IO_URING_ENV).is_some() {
        return Err(std::io::Error::from_raw_os_error(libc::EPERM));
    }
    let entries = entries.next_power_of_two().max(1);
    // One issuer whose completions run when it waits for them (DEFER_TASKRUN, Linux 6.1+):
    // no interrupt of the worker per completion and no lock; random 4 KiB reads at QD 1 came
    // out about 5 % faster than with COOP_TASKRUN, which is the fallback (5.19+), then a
    // plain ring. The ring is built on the thread that uses it, as both modes require.
    if let Ok(r) = IoUring::builder()
        .setup_defer_taskrun()
        .setup_single_issuer()
        .build(entries)
    {
        return Ok(r);
    }
    IoUring::builder()
        .setup_coop_taskrun()
        .setup_single_issuer()
        .build(entries)
        .or_else(|_| IoUring::new(entries))
}

#[derive(Clone, Copy)]
struct IoSlot {
    kind: Kind,
    offset: u64,
    done: u64,
    start: Instant,
}

/// One thread of a disk case.
pub(crate) struct DiskWorker {
    job: ThreadIo,
    file: File,
    ring: Option<IoUring>,
    buffers: Vec<AlignedBuf>,
    slots: Vec<Option<IoSlot>>,
    rng: Rng,
    region_start: u64,
    /// Next sequential position within the region.
    position: u64,
    seq: u64,
    /// Reads checked so far (every `FULL_CHECK_EVERY`th checks its whole block).
    reads_checked: u64,
    writes_since_fsync: u64,
    /// Set when a ring error left I/Os in flight: the buffers are leaked, never freed under them.
    poisoned: bool,
}

impl DiskWorker {
    pub(crate) fn new(job: &ThreadIo, target: &TestFile, index: usize) -> Result<DiskWorker> {
        // Read-only jobs open the file read-only, as fio does. On this VM's virtio disk random
        // 4 KiB reads at QD 1 through a read-only descriptor came out 1.03x and 1.01x (p50
        // 2.5 and 3 % lower) against a read-write one, in two sets of 16 and 20 alternations.
        // Derived from the test file's one descriptor, never opened by name.
        let file = target.reopen(job.op.writes(), job.direct)?;
        let depth = match job.engine {
            IoEngine::IoUring => job.qd as usize,
            IoEngine::Sync => 1,
        };
        let ring = match job.engine {
            IoEngine::IoUring => {
                Some(new_ring(job.qd).map_err(|e| anyhow!("io_uring setup: {e}"))?)
            }
            IoEngine::Sync => None,
        };
        let mut rng = Rng::for_thread(Rng::from_clock().next_u64(), index);
        let mut buffers = Vec::with_capacity(depth);
        for _ in 0..depth {
            let mut buf = AlignedBuf::new(job.block as usize, 4096)?;
            rng.fill(buf.as_mut_slice());
            buffers.push(buf);
        }
        Ok(DiskWorker {
            region_start: job.data_offset + index as u64 * job.region,
            job: job.clone(),
            file,
            ring,
            buffers,
            slots: vec![None; depth],
            rng,
            position: 0,
            seq: 0,
            reads_checked: 0,
            writes_since_fsync: 0,
            poisoned: false,
        })
    }

    /// The next I/O of the pattern (for rewrite: the read; its write-back follows it).
    fn next_io(&mut self) -> (Kind, u64) {
        let block = self.job.block;
        let sequential = |w: &mut DiskWorker| {
            if w.position + block > w.job.region {
                w.position = 0;
            }
            let offset = w.region_start + w.position;
            w.position += block;
            offset
        };
        let random =
            |w: &mut DiskWorker| w.region_start + w.rng.below(w.job.region / block) * block;
        match self.job.op {
            Op::SeqRead | Op::Rewrite => (Kind::Read, sequential(self)),
            Op::SeqWrite => (Kind::Write, sequential(self)),
            Op::RandRead => (Kind::Read, random(self)),
            Op::RandWrite => (Kind::Write, random(self)),
            Op::ReadWrite => {
                let kind = if self.rng.below(100) < u64::from(self.job.rwmix_read) {
                    Kind::Read
                } else {
                    Kind::Write
                };
                (kind, random(self))
            }
        }
    }

    /// Work units one step takes from the quota: a rewrite step is a read and a write.
    fn units_per_step(&self) -> u64 {
        if self.job.op == Op::Rewrite { 2 } else { 1 }
    }

    fn fsync_due(&self) -> bool {
        self.job
            .fsync_every
            .is_some_and(|n| self.writes_since_fsync >= n)
    }

    fn fsync(&mut self) -> Result<()> {
        self.writes_since_fsync = 0;
        self.file
            .sync_all()
            .map_err(|e| io_error(e, "fsync of the test file", 0))
    }

    fn prepare_write(&mut self, slot: usize, offset: u64) {
        self.seq += 1;
        let (tag, seq) = (self.job.tag, self.seq);
        stamp(self.buffers[slot].as_mut_slice(), offset, tag, seq);
    }

    /// Accounts for a completed I/O of `slot`.
    fn completed(&mut self, slot: usize, kind: Kind, offset: u64, tally: &mut Tally) -> Result<()> {
        tally.ops += 1;
        tally.units += self.job.block;
        match kind {
            Kind::Read if self.job.verify => {
                self.reads_checked += 1;
                let buf = self.buffers[slot].as_slice();
                tally.checksum += if self.reads_checked.is_multiple_of(FULL_CHECK_EVERY) {
                    verify(buf, offset, self.job.tag)?
                } else {
                    verify_ends(buf, offset, self.job.tag)?
                };
            }
            Kind::Read => {}
            Kind::Write => self.writes_since_fsync += 1,
        }
        Ok(())
    }

    fn run_sync(
        &mut self,
        quota: &Quota,
        tally: &mut Tally,
        hist: &mut LatencyHistogram,
    ) -> Result<()> {
        let per = self.units_per_step();
        let mut issued = 0;
        while quota.next_chunk(issued, per) == per {
            issued += per;
            let (kind, offset) = self.next_io();
            let steps: &[Kind] = match (self.job.op, kind) {
                (Op::Rewrite, _) => &[Kind::Read, Kind::Write],
                (_, Kind::Read) => &[Kind::Read],
                (_, Kind::Write) => &[Kind::Write],
            };
            for &kind in steps {
                if kind == Kind::Write {
                    self.prepare_write(0, offset);
                }
                let buf = &mut self.buffers[0];
                let start = Instant::now();
                let outcome = match kind {
                    // Whole transfers: short reads and writes are resumed, EINTR retried.
                    Kind::Read => self.file.read_exact_at(buf.as_mut_slice(), offset),
                    Kind::Write => self.file.write_all_at(buf.as_slice(), offset),
                };
                let end = Instant::now();
                outcome.map_err(|e| io_error(e, io_name(kind), offset))?;
                hist.record(end.duration_since(start).as_nanos() as u64);
                self.completed(0, kind, offset, tally)?;
                if self.fsync_due() {
                    self.fsync()?;
                }
            }
        }
        Ok(())
    }

    fn push(&mut self, slot: usize, s: IoSlot) -> Result<()> {
        let fd = types::Fd(self.file.as_raw_fd());
        let ptr = self.buffers[slot].ptr();
        // SAFETY: `done` < block, so the range lies inside the slot's buffer.
        let ptr = unsafe { ptr.add(s.done as usize) };
        let len = (self.job.block - s.done) as u32;
        let entry = match s.kind {
            Kind::Read => opcode::Read::new(fd, ptr, len)
                .offset(s.offset + s.done)
                .build(),
            Kind::Write => opcode::Write::new(fd, ptr, len)
                .offset(s.offset + s.done)
                .build(),
        }
        .user_data(slot as u64);
        self.slots[slot] = Some(s);
        let ring = self.ring.as_mut().expect("io_uring engine has a ring");
        // SAFETY: the buffer lives in `self.buffers` until the completion is reaped; `run`
        // drains every I/O in flight (or leaks the buffers) before it returns.
        unsafe { ring.submission().push(&entry) }
            .map_err(|_| anyhow!("io_uring submission queue full"))
    }

    /// Hands the queued I/Os to the kernel without waiting for any.
    fn submit(&mut self) -> Result<()> {
        let ring = self.ring.as_mut().expect("io_uring engine has a ring");
        loop {
            match ring.submit() {
                Ok(_) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => return Err(anyhow!("io_uring submit: {e}")),
            }
        }
    }

    fn run_uring(
        &mut self,
        quota: &Quota,
        tally: &mut Tally,
        hist: &mut LatencyHistogram,
    ) -> Result<()> {
        let depth = self.slots.len();
        let mut state = UringState {
            free: (0..depth).rev().collect(),
            issued: 0,
            stopping: false,
            error: None,
            queued: 0,
        };
        let mut reaped: Vec<(u64, i32)> = Vec::with_capacity(depth);
        loop {
            self.issue(&mut state, quota)?;
            if state.free.len() == depth {
                // Nothing in flight: the end, or an fsync between I/Os.
                if state.error.is_some() || state.stopping {
                    break;
                }
                if self.fsync_due()
                    && let Err(e) = self.fsync()
                {
                    state.error = Some(e);
                }
                continue;
            }
            state.queued = 0;
            let ring = self.ring.as_mut().expect("io_uring engine has a ring");
            match ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => {
                    // I/Os may still be in flight into our buffers: never free them.
                    self.poisoned = true;
                    return Err(anyhow!("io_uring submit: {e}"));
                }
            }
            reaped.clear();
            reaped.extend(ring.completion().map(|c| (c.user_data(), c.result())));
            let now = Instant::now();
            for &(user_data, res) in &reaped {
                self.complete(user_data as usize, res, now, &mut state, tally, hist);
            }
        }
        match state.error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Fills the free slots with new I/Os while the quota lasts, no error was seen and no fsync
    /// is due, submitting them a batch at a time. An error of the submission itself ends the run
    /// (the worker is poisoned: what was queued may be in flight).
    fn issue(&mut self, state: &mut UringState, quota: &Quota) -> Result<()> {
        let per = self.units_per_step();
        while state.error.is_none()
            && !state.stopping
            && !state.free.is_empty()
            && !self.fsync_due()
        {
            if quota.next_chunk(state.issued, per) < per {
                state.stopping = true;
                break;
            }
            state.issued += per;
            let slot = state.free.pop().expect("a free slot");
            let (kind, offset) = self.next_io();
            if kind == Kind::Write {
                self.prepare_write(slot, offset);
            }
            let s = IoSlot {
                kind,
                offset,
                done: 0,
                start: Instant::now(),
            };
            if let Err(e) = self.push(slot, s) {
                state.error = Some(e);
                state.free.push(slot);
                break;
            }
            state.queued += 1;
            // Submitted the moment the batch is full (by default each I/O on its own, as
            // fio does: a virtio disk served one burst per wait ran at 0.8x fio). The last
            // one too, and the wait is a call of its own, as in fio: random 4 KiB reads at
            // QD 1 ran 0.95x fio with one combined submit-and-wait, 0.98x with two calls
            // (medians of 18 alternations of 5 s on this VM's virtio disk).
            if state.queued >= self.job.batch {
                state.queued = 0;
                if let Err(e) = self.submit() {
                    self.poisoned = true;
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Takes one completion of `slot`: a failed I/O or one at the end of the file is an error, a
    /// short one goes back in the queue for the rest, a whole one is timed and checked (and a
    /// rewrite's read is followed by its write in the same slot). The slot is freed unless its
    /// I/O goes on.
    fn complete(
        &mut self,
        slot: usize,
        res: i32,
        now: Instant,
        state: &mut UringState,
        tally: &mut Tally,
        hist: &mut LatencyHistogram,
    ) {
        let mut s = self.slots[slot]
            .take()
            .expect("a completion for an issued I/O");
        if res < 0 {
            let e = std::io::Error::from_raw_os_error(-res);
            state.fail(slot, io_error(e, io_name(s.kind), s.offset + s.done));
            return;
        }
        if res == 0 {
            let e = anyhow!(
                "{} at offset {} returned 0 bytes (end of file)",
                io_name(s.kind),
                s.offset + s.done
            );
            state.fail(slot, e);
            return;
        }
        s.done += res as u64;
        if s.done < self.job.block {
            // A short transfer: the rest goes back in the queue, same slot.
            if let Err(e) = self.push(slot, s) {
                state.fail(slot, e);
            }
            return;
        }
        hist.record(now.duration_since(s.start).as_nanos() as u64);
        if let Err(e) = self.completed(slot, s.kind, s.offset, tally) {
            state.error.get_or_insert(e);
        }
        if self.job.op == Op::Rewrite && s.kind == Kind::Read && state.error.is_none() {
            self.prepare_write(slot, s.offset);
            let w = IoSlot {
                kind: Kind::Write,
                offset: s.offset,
                done: 0,
                start: Instant::now(),
            };
            if let Err(e) = self.push(slot, w) {
                state.fail(slot, e);
            }
            return;
        }
        state.free.push(slot);
    }
}

/// Where one run of the io_uring loop stands.
struct UringState {
    /// Slots with no I/O in flight.
    free: Vec<usize>,
    /// Units the quota handed out so far.
    issued: u64,
    /// The quota is spent: no new I/O, the ones in flight are drained.
    stopping: bool,
    /// The first error; no new I/O after it, the ones in flight are drained.
    error: Option<anyhow::Error>,
    /// I/Os pushed to the submission queue and not yet submitted.
    queued: u32,
}

impl UringState {
    /// Keeps the first error and frees the slot whose I/O failed.
    fn fail(&mut self, slot: usize, e: anyhow::Error) {
        self.error.get_or_insert(e);
        self.free.push(slot);
    }
}

fn io_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Read => "reading the test file",
        Kind::Write => "writing the test file",
    }
}

impl Worker for DiskWorker {
    fn run(&mut self, quota: &Quota) -> Result<Tally> {
        let mut tally = Tally::default();
        let mut hist = LatencyHistogram::new();
        match self.job.engine {
            IoEngine::Sync => self.run_sync(quota, &mut tally, &mut hist)?,
            IoEngine::IoUring => self.run_uring(quota, &mut tally, &mut hist)?,
        }
        if self.job.end_fsync {
            self.fsync()?;
        }
        tally.latency = Some(hist);
        Ok(tally)
    }
}

impl Drop for DiskWorker {
    fn drop(&mut self) {
        if self.poisoned {
            for buf in std::mem::take(&mut self.buffers) {
                std::mem::forget(buf);
            }
            if let Some(ring) = self.ring.take() {
                std::mem::forget(ring);
            }
        }
    }
}

#[cfg(test)]
mod io_tests {
    use super::*;
    use crate::disk::file::{self, Place, TargetSpec};
    use crate::disk::stamp::STAMP_EVERY;
    use std::fs::OpenOptions;

    fn test_file(dir: &std::path::Path, bytes: u64) -> file::TestFile {
        file::open(&TargetSpec {
            place: Place::Dir(dir.to_path_buf()),
            data_bytes: bytes,
            align: 4096,
            align_source: "test".into(),
            keep: false,
            direct_fill: true,
        })
        .unwrap()
    }

    fn job(
        op: Op,
        engine: IoEngine,
        direct: bool,
        f: &file::TestFile,
        block: u64,
        qd: u32,
    ) -> ThreadIo {
        ThreadIo {
            op,
            block,
            qd,
            batch: 1,
            direct,
            engine,
            rwmix_read: 50,
            fsync_every: None,
            end_fsync: !direct,
            verify: true,
            tag: f.tag,
            data_offset: f.data_offset,
            region: f.data_bytes / block * block,
        }
    }

    /// Stamps checked by `reads` reads of `block`-byte blocks that start on a stamp.
    fn expected_checks(reads: u64, block: u64) -> u64 {
        let stamps = block / STAMP_EVERY;
        let full = reads / FULL_CHECK_EVERY;
        (reads - full) * stamps.min(2) + full * stamps
    }

    /// The seq field of every stamp of the data region.
    fn sequences(f: &file::TestFile) -> Vec<u64> {
        let bytes = std::fs::read(&f.path).unwrap();
        (f.data_offset..f.data_offset + f.data_bytes)
            .step_by(STAMP_EVERY as usize)
            .map(|p| u64::from_le_bytes(bytes[p as usize + 8..p as usize + 16].try_into().unwrap()))
            .collect()
    }

    #[test]
    fn a_full_sequential_write_pass_rewrites_every_byte_and_reads_check_them() {
        let dir = tempfile::tempdir().unwrap();
        let f = test_file(dir.path(), 2 << 20);
        assert!(
            sequences(&f).iter().all(|&s| s == 0),
            "the fill stamps sequence 0"
        );
        for (engine, direct, qd) in [(IoEngine::IoUring, true, 4), (IoEngine::Sync, false, 1)] {
            let block = 64 * 1024;
            let j = job(Op::SeqWrite, engine, direct, &f, block, qd);
            let mut w = DiskWorker::new(&j, &f, 0).unwrap();
            let blocks = f.data_bytes / block;
            let tally = w.run(&Quota::units(blocks)).unwrap();
            assert_eq!(tally.units, f.data_bytes, "{engine:?}: bytes claimed");
            assert_eq!(tally.ops, blocks);
            assert_eq!(tally.latency.as_ref().unwrap().count(), blocks);
            let seqs = sequences(&f);
            assert!(
                seqs.iter().all(|&s| s > 0),
                "{engine:?}: every 4 KiB was written"
            );
            let mut unique = seqs.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(
                unique.len() as u64,
                blocks,
                "a new sequence number for every write"
            );
            // Two passes: 64 reads, the last of which checks its whole block.
            let r = job(Op::SeqRead, engine, direct, &f, block, qd);
            let mut w = DiskWorker::new(&r, &f, 0).unwrap();
            let tally = w.run(&Quota::units(2 * blocks)).unwrap();
            assert_eq!(tally.units, 2 * f.data_bytes);
            assert_eq!(
                tally.checksum,
                expected_checks(2 * blocks, block),
                "both ends of every block, and all of the 64th"
            );
        }
    }

    #[test]
    fn batched_submissions_move_every_block_once() {
        let dir = tempfile::tempdir().unwrap();
        let f = test_file(dir.path(), 1 << 20);
        let block = 16 * 1024;
        let blocks = f.data_bytes / block;
        for batch in [1, 3, 8] {
            let mut j = job(Op::SeqWrite, IoEngine::IoUring, true, &f, block, 8);
            j.batch = batch;
            let tally = DiskWorker::new(&j, &f, 0)
                .unwrap()
                .run(&Quota::units(blocks))
                .unwrap();
            assert_eq!(tally.ops, blocks, "batch {batch}: every write completed");
            assert!(sequences(&f).iter().all(|&s| s > 0), "batch {batch}");
            j.op = Op::SeqRead;
            let tally = DiskWorker::new(&j, &f, 0)
                .unwrap()
                .run(&Quota::units(blocks))
                .unwrap();
            assert_eq!(
                tally.checksum,
                expected_checks(blocks, block),
                "batch {batch}"
            );
        }
    }

    #[test]
    fn rewrite_reads_and_writes_each_block_once_per_pass() {
        let dir = tempfile::tempdir().unwrap();
        let f = test_file(dir.path(), 1 << 20);
        for engine in [IoEngine::IoUring, IoEngine::Sync] {
            let j = job(Op::Rewrite, engine, true, &f, 8192, 2);
            let mut w = DiskWorker::new(&j, &f, 0).unwrap();
            let blocks = f.data_bytes / 8192;
            let tally = w.run(&Quota::units(2 * blocks)).unwrap();
            assert_eq!(tally.ops, 2 * blocks);
            assert_eq!(tally.checksum, f.data_bytes / STAMP_EVERY);
            assert!(sequences(&f).iter().all(|&s| s > 0));
        }
    }

    #[test]
    fn a_read_of_wrong_bytes_fails_the_case() {
        use std::os::unix::fs::FileExt;
        let dir = tempfile::tempdir().unwrap();
        let f = test_file(dir.path(), 1 << 20);
        let handle = OpenOptions::new().write(true).open(&f.path).unwrap();
        handle
            .write_all_at(&[0u8; 8], f.data_offset + 8 * 4096)
            .unwrap();
        handle.sync_all().unwrap();
        for engine in [IoEngine::IoUring, IoEngine::Sync] {
            let j = job(Op::SeqRead, engine, true, &f, 4096, 8);
            let mut w = DiskWorker::new(&j, &f, 0).unwrap();
            let e = w.run(&Quota::units(256)).unwrap_err();
            assert!(format!("{e:#}").contains("wrong data"), "{e:#}");
        }
    }

    #[test]
    fn wrong_bytes_inside_a_large_block_are_caught_by_the_full_check() {
        use std::os::unix::fs::FileExt;
        let dir = tempfile::tempdir().unwrap();
        let f = test_file(dir.path(), 1 << 20);
        let block = 64 * 1024;
        // The middle stamp of the last block: the ends of every block stay right.
        let handle = OpenOptions::new().write(true).open(&f.path).unwrap();
        let middle = f.data_offset + f.data_bytes - block / 2;
        handle.write_all_at(&[0u8; 8], middle).unwrap();
        handle.sync_all().unwrap();
        let j = job(Op::SeqRead, IoEngine::Sync, true, &f, block, 1);
        // 16 blocks a pass: read 64, the fourth pass's last block, is checked whole.
        let reads = FULL_CHECK_EVERY;
        assert_eq!(reads % (f.data_bytes / block), 0);
        let mut w = DiskWorker::new(&j, &f, 0).unwrap();
        w.run(&Quota::units(reads - 1)).unwrap();
        let e = w.run(&Quota::units(1)).unwrap_err();
        assert!(format!("{e:#}").contains(&format!("at {middle}")), "{e:#}");
    }

    #[test]
    fn random_and_small_buffered_blocks_stay_in_the_thread_region() {
        let dir = tempfile::tempdir().unwrap();
        let f = test_file(dir.path(), 1 << 20);
        let mut j = job(Op::RandWrite, IoEngine::Sync, false, &f, 8, 1);
        j.region = f.data_bytes / 2;
        let before = std::fs::read(&f.path).unwrap();
        let mut w = DiskWorker::new(&j, &f, 1).unwrap();
        let tally = w.run(&Quota::units(2000)).unwrap();
        assert_eq!(tally.units, 16_000);
        let after = std::fs::read(&f.path).unwrap();
        let first_half = (f.data_offset + j.region) as usize;
        assert_eq!(
            before[..first_half],
            after[..first_half],
            "thread 1 stays in its half"
        );
        assert_ne!(before[first_half..], after[first_half..]);
    }
}
