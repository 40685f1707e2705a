//! Runs one case: threads prepared outside the timed region, started together, timed as a group.
//!
//! Every subsystem hands the runner a factory of [`Worker`]s, one per thread. The runner spawns
//! the threads (pinned when asked), lets each build its worker (allocate and touch memory, open
//! files, connect sockets: none of it timed), then for the warm-up and each repetition releases
//! all threads at once from a barrier. Each thread reads the clock right before and right after
//! its work; the repetition's wall time is from the earliest start to the latest end, and its
//! rate is the work of all threads divided by that wall time. Per-thread rates are never summed
//! or averaged: a thread that finishes early does not make the group faster.
//!
//! A worker is told how much to do by a [`Quota`]: a deadline (stop by duration) or a number of
//! work units (stop by amount of work; with strong scaling the total is split among threads,
//! with weak scaling each thread does the full amount). Workers ask the quota for work in chunks,
//! so the clock and the interrupt flag are read once per chunk, not once per operation.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};

use crate::interrupt;
use crate::names::named_enum;
use crate::options::RunnerOptions;
use crate::stats::LatencyHistogram;
use crate::stats::UNSTABLE_CV;
use crate::sysinfo::clock::thread_cpu_ns;

/// When a repetition stops.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stop {
    /// Each thread works until this much time has passed since the group started.
    Duration(Duration),
    /// A fixed amount of work units, split among threads according to [`Scaling`].
    Work(u64),
}

named_enum! {
    /// How a fixed amount of work is shared among threads.
    pub enum Scaling {
        /// a fixed total of work split among the threads
        Strong = "strong",
        /// the same work for each thread
        Weak = "weak",
    }
}

/// How much one thread should do in one repetition.
#[derive(Clone, Copy, Debug)]
pub struct Quota {
    deadline: Option<Instant>,
    units: Option<u64>,
}

impl Quota {
    pub fn until(deadline: Instant) -> Self {
        Quota {
            deadline: Some(deadline),
            units: None,
        }
    }

    pub fn units(units: u64) -> Self {
        Quota {
            deadline: None,
            units: Some(units),
        }
    }

    /// How many units to do next, at most `chunk`, given `done` so far; 0 means stop.
    #[inline]
    pub fn next_chunk(&self, done: u64, chunk: u64) -> u64 {
        if interrupt::requested() {
            return 0;
        }
        match (self.units, self.deadline) {
            (Some(units), _) => chunk.min(units.saturating_sub(done)),
            (None, Some(deadline)) => {
                if Instant::now() < deadline {
                    chunk
                } else {
                    0
                }
            }
            (None, None) => 0,
        }
    }

    /// The deadline, for workers that wait on something with a timeout (sockets, I/O).
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }
}

/// What one thread did in one repetition.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    /// Work units done (FLOPs, bytes, …, as the case counts them).
    pub units: u64,
    /// Operations done (accesses, I/Os, messages), where the case counts them apart from units.
    pub ops: u64,
    /// Latencies of individual operations, where the case records them.
    pub latency: Option<LatencyHistogram>,
    /// A value derived from the results of the work, for the case to verify.
    pub checksum: u64,
}

/// One thread's state for a case: built before timing, then run once per repetition.
pub trait Worker {
    /// Does the work the quota allows and says how much it did.
    fn run(&mut self, quota: &Quota) -> Result<Tally>;
}

/// Settings of the runner for one case.
#[derive(Clone, Debug)]
pub struct RunSettings {
    pub threads: usize,
    pub stop: Stop,
    pub scaling: Scaling,
    /// Measured repetitions.
    pub repetitions: u32,
    /// Length of the unmeasured warm-up, run as a duration; zero skips it.
    pub warmup: Duration,
    /// Pin thread i to the i-th online CPU (wrapping when there are more threads than CPUs).
    pub pin: bool,
    /// While a round runs, the coordinating thread wakes this often to see whether the workers
    /// are done, instead of blocking until they are; `None` blocks. The disk cases use 10 ms,
    /// as fio's main thread does while its jobs run: on a VM, whether some thread wakes now
    /// and then on the CPU an I/O thread waits on changes how fast that thread wakes after each
    /// completion (docs/disk.md), so peakbench keeps fio's neighbourhood to compare with it.
    pub watch: Option<Duration>,
}

impl RunSettings {
    /// The settings of a case on `threads` threads that stops at `stop`, with the run's
    /// repetitions, warm-up and pinning.
    pub fn new(runner: &RunnerOptions, threads: usize, stop: Stop) -> RunSettings {
        RunSettings {
            threads,
            stop,
            scaling: Scaling::Strong,
            repetitions: runner.repetitions,
            warmup: runner.warmup,
            pin: runner.pin,
            watch: None,
        }
    }
}

/// One measured repetition of a case.
#[derive(Clone, Debug)]
pub struct Repetition {
    /// From the earliest thread start to the latest thread end.
    pub wall: Duration,
    /// The elapsed times of all threads added up (each from its start to its end).
    pub thread_time: Duration,
    /// The CPU times of all threads added up over the same spans: short of `thread_time` by
    /// the time the threads were off their cores (descheduled, or stolen by the hypervisor).
    pub cpu_time: Duration,
    /// Sum over threads.
    pub units: u64,
    /// Sum over threads.
    pub ops: u64,
    /// Merged over threads.
    pub latency: Option<LatencyHistogram>,
    /// Each thread's tally, in thread order.
    pub threads: Vec<Tally>,
}

impl Repetition {
    /// Units per second of the whole group.
    pub fn units_per_sec(&self) -> f64 {
        self.units as f64 / self.wall.as_secs_f64()
    }

    /// Operations per second of the whole group.
    pub fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.wall.as_secs_f64()
    }
}

/// The units each thread must do for a work-based stop.
pub fn split_work(total: u64, threads: usize, scaling: Scaling) -> Vec<u64> {
    let threads = threads as u64;
    match scaling {
        Scaling::Weak => vec![total; threads as usize],
        Scaling::Strong => (0..threads)
            .map(|i| total / threads + u64::from(i < total % threads))
            .collect(),
    }
}

/// Measures a case: `make(thread_index)` builds each thread's worker on its own thread.
pub fn measure<W, F>(settings: &RunSettings, make: F) -> Result<Vec<Repetition>>
where
    W: Worker,
    F: Fn(usize) -> Result<W> + Sync,
{
    if settings.threads == 0 {
        bail!("a case needs at least one thread");
    }
    let rounds = Rounds::new(settings, &make);
    std::thread::scope(|scope| {
        for index in 0..settings.threads {
            let rounds = &rounds;
            scope.spawn(move || rounds.work::<W>(index));
        }
        rounds.coordinate();
    });
    rounds.outcome()
}

/// What the threads of one [`measure`] share: the barrier that releases them together, the
/// coordinator's decision for each round, the errors, and every thread's stamps.
struct Rounds<'a, F> {
    settings: &'a RunSettings,
    make: &'a F,
    /// Each thread's units for a work-based stop.
    shares: Option<Vec<u64>>,
    /// The warm-up round, if any, then the repetitions.
    count: usize,
    has_warmup: bool,
    barrier: Barrier,
    failed: AtomicBool,
    errors: Mutex<Vec<anyhow::Error>>,
    /// `stamps[round][thread]`.
    stamps: Mutex<Vec<Vec<Option<Stamped>>>>,
    /// Set by the coordinating thread before each release; read by the workers after it, so
    /// every thread takes the same decision and nobody is left waiting at a barrier.
    proceed: AtomicBool,
    /// Workers that have finished the current round; read by a watching coordinator.
    finished: AtomicUsize,
}

impl<'a, F> Rounds<'a, F> {
    fn new(settings: &'a RunSettings, make: &'a F) -> Self {
        let threads = settings.threads;
        let has_warmup = !settings.warmup.is_zero();
        let count = settings.repetitions as usize + usize::from(has_warmup);
        Rounds {
            settings,
            make,
            shares: match settings.stop {
                Stop::Work(total) => Some(split_work(total, threads, settings.scaling)),
                Stop::Duration(_) => None,
            },
            count,
            has_warmup,
            barrier: Barrier::new(threads + 1),
            failed: AtomicBool::new(false),
            errors: Mutex::new(Vec::new()),
            stamps: Mutex::new(vec![vec![None; threads]; count]),
            proceed: AtomicBool::new(false),
            finished: AtomicUsize::new(0),
        }
    }

    /// What thread `index` must do in `round`, which it starts at `start`.
    fn quota(&self, round: usize, index: usize, start: Instant) -> Quota {
        match (
            round == 0 && self.has_warmup,
            self.settings.stop,
            &self.shares,
        ) {
            (true, _, _) => Quota::until(start + self.settings.warmup),
            (false, _, Some(shares)) => Quota::units(shares[index]),
            (false, Stop::Duration(d), _) => Quota::until(start + d),
            (false, Stop::Work(_), None) => unreachable!("work stops always have shares"),
        }
    }

    fn fail(&self, error: anyhow::Error) {
        self.failed.store(true, Ordering::SeqCst);
        self.errors.lock().unwrap().push(error);
    }

    /// The life of worker thread `index`: pinned and prepared, then one timed span per round
    /// for as long as the coordinator lets the rounds go on.
    fn work<W>(&self, index: usize)
    where
        W: Worker,
        F: Fn(usize) -> Result<W>,
    {
        let cpu = cpu_for(self.settings.pin, index);
        let mut worker = match cpu.map_or(Ok(()), pin_to).and_then(|()| (self.make)(index)) {
            Ok(worker) => Some(worker),
            Err(error) => {
                self.fail(error.context(format!("preparing thread {index}")));
                None
            }
        };
        self.barrier.wait(); // every thread prepared (or failed to)
        for round in 0..self.count {
            self.barrier.wait(); // released together
            if !self.proceed.load(Ordering::SeqCst) {
                return;
            }
            let worker = worker
                .as_mut()
                .expect("a failed preparation stops the case");
            // The thread's CPU clock is read outside the timed span, one call each side.
            let cpu_start = thread_cpu_ns();
            let start = Instant::now();
            let quota = self.quota(round, index, start);
            let outcome = worker.run(&quota);
            let end = Instant::now();
            let cpu = Duration::from_nanos(thread_cpu_ns().saturating_sub(cpu_start));
            match outcome {
                Ok(tally) => {
                    self.stamps.lock().unwrap()[round][index] = Some((start, end, tally, cpu))
                }
                Err(error) => self.fail(error.context(format!("thread {index}"))),
            }
            self.finished.fetch_add(1, Ordering::SeqCst);
            self.barrier.wait(); // all done with this round
        }
    }

    /// The coordinator, on the calling thread: releases each round unless a thread failed or
    /// the user interrupted, and with `watch` set polls until every worker has finished it.
    fn coordinate(&self) {
        self.barrier.wait(); // preparation over: `failed` is settled
        for _ in 0..self.count {
            let go = !self.failed.load(Ordering::SeqCst) && !interrupt::requested();
            self.proceed.store(go, Ordering::SeqCst);
            self.finished.store(0, Ordering::SeqCst);
            self.barrier.wait();
            if !go {
                break;
            }
            if let Some(interval) = self.settings.watch {
                while self.finished.load(Ordering::SeqCst) < self.settings.threads {
                    std::thread::sleep(interval);
                }
            }
            self.barrier.wait();
        }
    }

    /// The repetitions (the warm-up dropped), or the first error, or the interrupt.
    fn outcome(self) -> Result<Vec<Repetition>> {
        if let Some(error) = self.errors.into_inner().unwrap().into_iter().next() {
            return Err(error);
        }
        if interrupt::requested() {
            return Err(anyhow!(interrupt::Interrupted));
        }
        self.stamps
            .into_inner()
            .unwrap()
            .into_iter()
            .skip(usize::from(self.has_warmup))
            .map(|round| assemble(round).context("a thread reported no result"))
            .collect()
    }
}

/// One thread's start, end, tally and CPU time in one round.
type Stamped = (Instant, Instant, Tally, Duration);

fn assemble(round: Vec<Option<Stamped>>) -> Option<Repetition> {
    let round: Vec<Stamped> = round.into_iter().collect::<Option<_>>()?;
    let start = round.iter().map(|r| r.0).min()?;
    let end = round.iter().map(|r| r.1).max()?;
    let mut latency: Option<LatencyHistogram> = None;
    for (_, _, tally, _) in &round {
        if let Some(h) = &tally.latency {
            latency.get_or_insert_with(LatencyHistogram::new).merge(h);
        }
    }
    let thread_time = round.iter().map(|r| r.1.duration_since(r.0)).sum();
    let cpu_time = round.iter().map(|r| r.3).sum();
    let tallies: Vec<Tally> = round.into_iter().map(|r| r.2).collect();
    Some(Repetition {
        wall: end.duration_since(start),
        thread_time,
        cpu_time,
        units: tallies.iter().map(|t| t.units).sum(),
        ops: tallies.iter().map(|t| t.ops).sum(),
        latency,
        threads: tallies,
    })
}

/// The CPUs this process may run on, in order.
pub fn online_cpus() -> Vec<usize> {
    crate::sysinfo::affinity::allowed_cpus()
}

/// Logical CPUs this process may run on (its affinity mask). Not the standard library's
/// `available_parallelism`, which also divides by a cgroup's CPU quota: "every CPU" would then
/// shrink under a quota of 1.2 CPUs to 1 thread, and a health check would drop the very cases
/// the quota slows (the findings name the quota as a cause instead).
pub fn num_cpus() -> usize {
    online_cpus().len().max(1)
}

/// Pins the calling thread to one CPU.
pub fn pin_to(cpu: usize) -> Result<()> {
    crate::sysinfo::affinity::pin_to(cpu)
}

/// Confines the calling thread, and the threads it starts after, to `cpus`.
pub fn pin_to_set(cpus: &[usize]) -> Result<()> {
    crate::sysinfo::affinity::pin_to_set(cpus)
}

/// The smallest interval the monotonic clock reports, measured.
pub fn clock_resolution() -> Duration {
    let mut best = Duration::MAX;
    for _ in 0..1000 {
        let a = Instant::now();
        let mut b = Instant::now();
        while b == a {
            b = Instant::now();
        }
        best = best.min(b - a);
    }
    best
}

/// Warnings about a case's repetitions, each with what to do about it: values that vary by
/// more than [`UNSTABLE_CV`] (the findings' "unstable"), and repetitions too short for the clock and the cost of starting threads.
pub fn repetition_warnings(walls: &[Duration], cv: Option<f64>) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Some(cv) = cv.filter(|cv| *cv > UNSTABLE_CV) {
        warnings.push(format!(
            "repetitions vary by {:.1} % (CV > {:.0} %): the machine is busy or the clock moves; \
             close other work, pin threads with --pin, or raise --repetitions",
            cv * 100.0,
            UNSTABLE_CV * 100.0
        ));
    }
    static RESOLUTION: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    if let Some(shortest) = walls.iter().min() {
        let resolution = *RESOLUTION.get_or_init(clock_resolution);
        let floor = (resolution * 10_000).max(Duration::from_millis(10));
        if *shortest < floor {
            warnings.push(format!(
                "a repetition took only {:.3} ms, short against the clock's {} ns resolution \
                 and the cost of starting threads; give more work (--duration, --ops, --size)",
                shortest.as_secs_f64() * 1e3,
                resolution.as_nanos()
            ));
        }
    }
    warnings
}

/// The warning for more threads than CPUs, where threads compete for the same cores.
pub fn oversubscription_warning(threads: usize) -> Option<String> {
    let cpus = num_cpus();
    (threads > cpus).then(|| {
        format!(
            "{threads} threads on {cpus} CPUs: threads take turns on the cores, so the rate is \
             the machine's, shared; the peak is capped at the cores there are"
        )
    })
}

/// The share of the threads' running time they spent off their cores, over all repetitions:
/// 1 − CPU time / elapsed time, both summed over threads (0 when nothing was timed).
pub fn off_core_share(reps: &[Repetition]) -> f64 {
    let elapsed: f64 = reps.iter().map(|r| r.thread_time.as_secs_f64()).sum();
    let cpu: f64 = reps.iter().map(|r| r.cpu_time.as_secs_f64()).sum();
    if elapsed > 0.0 {
        (1.0 - cpu / elapsed).clamp(0.0, 1.0)
    } else {
        0.0
    }
}

/// Each repetition's [`off_core_share`] in percent, for the result's `off_core` extra (the
/// findings name it as a cause where nothing else on the machine explains it).
pub fn off_core_percent(reps: &[Repetition]) -> Vec<f64> {
    reps.iter()
        .map(|r| off_core_share(std::slice::from_ref(r)) * 100.0)
        .collect()
}

/// Above this share of their time off their cores, a compute-bound case's threads are said
/// to have shared the machine (the clock read and the thread's wake-up cost well under 1 %).
pub const OFF_CORE_WARNING: f64 = 0.05;

/// For a compute-bound case (CPU kernels, memory streams: threads that never wait), a warning
/// when its threads spent more than [`OFF_CORE_WARNING`] of their time off their cores: the
/// rate is then the share of the machine that other work left, not the machine's. Cases with
/// more threads than CPUs get [`oversubscription_warning`] instead.
pub fn off_core_warning(reps: &[Repetition], threads: usize) -> Option<String> {
    let share = off_core_share(reps);
    (threads <= num_cpus() && share > OFF_CORE_WARNING).then(|| {
        format!(
            "the threads were off their cores {:.0} % of their running time (other work on the \
             machine, or the hypervisor's): the rate is what was left to peakbench, about \
             {:.0} % of what the cores give; close other work and run again",
            share * 100.0,
            (1.0 - share) * 100.0
        )
    })
}

/// The time all threads of this process spent runnable but waiting for a CPU, added up: the
/// second field of `/proc/self/task/*/schedstat`. `None` where the kernel keeps no schedstat.
/// A thread that sleeps or blocks does not add to it, so it suits a library's thread pool
/// (Linpack, DGEMM), whose threads' own CPU time peakbench cannot bracket.
pub fn run_queue_wait() -> Option<Duration> {
    let mut total = 0u64;
    let mut any = false;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let Ok(text) = std::fs::read_to_string(task.path().join("schedstat")) else {
            continue; // a thread that ended in between
        };
        if let Some(waited) = text
            .split_whitespace()
            .nth(1)
            .and_then(|w| w.parse::<u64>().ok())
        {
            total += waited;
            any = true;
        }
    }
    any.then(|| Duration::from_nanos(total))
}

/// Runs `work` and returns what it returned, its elapsed time and the share of `threads` ×
/// that time which the process's threads spent waiting for a CPU (`None` without schedstat).
/// The run-queue counters are read outside the timed span.
pub fn timed_waiting<T>(threads: usize, work: impl FnOnce() -> T) -> (T, Duration, Option<f64>) {
    let before = run_queue_wait();
    let start = Instant::now();
    let value = work();
    let elapsed = start.elapsed();
    let share = match (before, run_queue_wait()) {
        (Some(before), Some(after)) if !elapsed.is_zero() => Some(
            after.saturating_sub(before).as_secs_f64()
                / (elapsed.as_secs_f64() * threads.max(1) as f64),
        ),
        _ => None,
    };
    (value, elapsed, share)
}

/// For a case whose threads a library owns, a warning when the median repetition's threads
/// waited for a CPU more than [`OFF_CORE_WARNING`] of the time ([`timed_waiting`]'s shares).
pub fn waiting_warning(shares: &[Option<f64>], threads: usize) -> Option<String> {
    let mut known: Vec<f64> = shares.iter().flatten().copied().collect();
    if known.is_empty() || threads > num_cpus() {
        return None;
    }
    known.sort_by(f64::total_cmp);
    let share = known[known.len() / 2].min(1.0);
    (share > OFF_CORE_WARNING).then(|| {
        format!(
            "the threads waited for a CPU {:.0} % of the time (other work on the machine): the \
             rate is what was left to peakbench, not what the cores give; close other work and \
             run again",
            share * 100.0
        )
    })
}

/// The CPU thread `index` of a case is pinned to with `--pin` (wrapping when there are more
/// threads than CPUs), or `None` without it.
pub fn cpu_for(pin: bool, index: usize) -> Option<usize> {
    if !pin {
        return None;
    }
    let cpus = online_cpus();
    (!cpus.is_empty()).then(|| cpus[index % cpus.len()])
}

/// One round of a whole test (see [`repeat`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Round {
    /// Unmeasured: warm up for about this long, in whatever way suits the test.
    Warmup(Duration),
    /// The i-th measured repetition, from 0.
    Measured(u32),
}

/// A measured round of a whole test and how long it took.
#[derive(Clone, Debug)]
pub struct Timed<T> {
    pub value: T,
    pub wall: Duration,
}

/// Repeats a test that runs whole rather than in barrier rounds of worker threads (Linpack,
/// whose threads a library owns; a network test, timed by its receiver; a sampling run): one
/// unmeasured [`Round::Warmup`] when `--warmup` is above zero, then `repetitions` measured
/// rounds, stopping with [`interrupt::Interrupted`] when the user asks. With `--pin`, thread i
/// of the test takes its CPU from [`cpu_for`], as worker i of the barrier runner ([`measure`])
/// does; the calling thread, which only coordinates, stays unpinned there too. So `--warmup`,
/// `--pin`, Ctrl-C and the variation warnings ([`repetition_warnings`] over each round's wall
/// time) mean the same for every case.
pub fn repeat<T>(
    runner: &RunnerOptions,
    repetitions: u32,
    mut test: impl FnMut(Round) -> Result<T>,
) -> Result<Vec<Timed<T>>> {
    if !runner.warmup.is_zero() {
        if interrupt::requested() {
            return Err(anyhow!(interrupt::Interrupted));
        }
        test(Round::Warmup(runner.warmup))?;
    }
    let mut rounds = Vec::with_capacity(repetitions as usize);
    for i in 0..repetitions {
        if interrupt::requested() {
            return Err(anyhow!(interrupt::Interrupted));
        }
        let start = Instant::now();
        let value = test(Round::Measured(i))?;
        rounds.push(Timed {
            value,
            wall: start.elapsed(),
        });
    }
    Ok(rounds)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts units in chunks, sleeping a little per chunk so durations are visible.
    struct Counter {
        chunk: u64,
        pause: Duration,
    }

    impl Worker for Counter {
        fn run(&mut self, quota: &Quota) -> Result<Tally> {
            let mut done = 0;
            loop {
                let n = quota.next_chunk(done, self.chunk);
                if n == 0 {
                    break;
                }
                std::thread::sleep(self.pause);
                done += n;
            }
            let mut latency = LatencyHistogram::new();
            latency.record_n(1000, done);
            Ok(Tally {
                units: done,
                ops: done,
                latency: Some(latency),
                checksum: done,
            })
        }
    }

    fn settings(threads: usize, stop: Stop, scaling: Scaling) -> RunSettings {
        RunSettings {
            threads,
            stop,
            scaling,
            repetitions: 3,
            warmup: Duration::ZERO,
            pin: false,
            watch: None,
        }
    }

    #[test]
    fn time_off_the_core_is_measured_and_warned_about() {
        // A sleeping thread is off its core nearly all its time; the CPU clock says so.
        let reps = measure(
            &settings(
                1,
                Stop::Duration(Duration::from_millis(40)),
                Scaling::Strong,
            ),
            |_| {
                Ok(Counter {
                    chunk: 1,
                    pause: Duration::from_millis(10),
                })
            },
        )
        .unwrap();
        assert!(
            reps.iter().all(|r| r.cpu_time < r.thread_time / 2),
            "{reps:?}"
        );
        assert!(off_core_share(&reps) > 0.5);
        let warning = off_core_warning(&reps, 1).expect("a sleeping thread is warned about");
        assert!(warning.contains("off their cores"), "{warning}");

        // Made-up repetitions: 2 % off the core is not worth a warning, 30 % is, and more
        // threads than CPUs get the oversubscription warning instead.
        let rep = |cpu_ms: u64| Repetition {
            wall: Duration::from_millis(100),
            thread_time: Duration::from_millis(200),
            cpu_time: Duration::from_millis(cpu_ms),
            units: 0,
            ops: 0,
            latency: None,
            threads: Vec::new(),
        };
        assert_eq!(off_core_warning(&[rep(196)], 1), None);
        let text = off_core_warning(&[rep(140), rep(140)], 1).unwrap();
        assert!(
            text.contains("30 %") && text.contains("about 70 %"),
            "{text}"
        );
        assert_eq!(off_core_warning(&[rep(140)], num_cpus() + 1), None);
        assert_eq!(off_core_share(&[]), 0.0);
    }

    #[test]
    fn waiting_for_a_cpu_is_measured_and_warned_about() {
        // Three spinning threads on one CPU: two of them always wait for it.
        let pinned = std::thread::spawn(|| {
            pin_to(online_cpus()[0]).unwrap();
            timed_waiting(1, || {
                let spin = || {
                    let start = Instant::now();
                    while start.elapsed() < Duration::from_millis(150) {
                        std::hint::spin_loop();
                    }
                };
                std::thread::scope(|s| {
                    s.spawn(spin);
                    s.spawn(spin);
                    spin();
                });
            })
        });
        let ((), elapsed, share) = pinned.join().unwrap();
        let Some(share) = share else {
            eprintln!("skipped: this kernel keeps no /proc/self/task/*/schedstat");
            return;
        };
        assert!(elapsed >= Duration::from_millis(150));
        assert!(share > 0.5, "three spinners on one CPU waited {share}");
        assert!(waiting_warning(&[Some(share)], 1).is_some());
        assert_eq!(waiting_warning(&[Some(0.01), Some(0.02), None], 1), None);
        assert!(
            waiting_warning(&[Some(0.3), Some(0.3), Some(0.01)], 1)
                .unwrap()
                .contains("30 %")
        );
        assert_eq!(waiting_warning(&[None], 1), None);
    }

    #[test]
    fn strong_scaling_splits_the_total_exactly() {
        assert_eq!(split_work(10, 3, Scaling::Strong), vec![4, 3, 3]);
        assert_eq!(split_work(10, 3, Scaling::Weak), vec![10, 10, 10]);
        assert_eq!(split_work(2, 4, Scaling::Strong), vec![1, 1, 0, 0]);
    }

    #[test]
    fn work_stop_does_exactly_the_work_and_merges_latency() {
        let reps = measure(&settings(3, Stop::Work(1000), Scaling::Strong), |_| {
            Ok(Counter {
                chunk: 7,
                pause: Duration::ZERO,
            })
        })
        .unwrap();
        assert_eq!(reps.len(), 3);
        for rep in &reps {
            assert_eq!(rep.units, 1000);
            assert_eq!(rep.threads.len(), 3);
            assert_eq!(rep.latency.as_ref().unwrap().count(), 1000);
        }
        let weak = measure(&settings(2, Stop::Work(100), Scaling::Weak), |_| {
            Ok(Counter {
                chunk: 7,
                pause: Duration::ZERO,
            })
        })
        .unwrap();
        assert!(weak.iter().all(|r| r.units == 200));
    }

    #[test]
    fn duration_stop_times_the_group_wall_clock() {
        let mut s = settings(
            2,
            Stop::Duration(Duration::from_millis(30)),
            Scaling::Strong,
        );
        s.warmup = Duration::from_millis(5);
        s.pin = true;
        let reps = measure(&s, |_| {
            Ok(Counter {
                chunk: 1,
                pause: Duration::from_millis(1),
            })
        })
        .unwrap();
        assert_eq!(reps.len(), 3, "warm-up is not reported");
        for rep in reps {
            assert!(rep.wall >= Duration::from_millis(30), "{:?}", rep.wall);
            assert!(rep.units > 0);
        }
    }

    #[test]
    fn a_worker_that_cannot_be_prepared_fails_the_case_without_hanging() {
        let outcome = measure(&settings(2, Stop::Work(10), Scaling::Strong), |i| {
            if i == 1 {
                bail!("no such device");
            }
            Ok(Counter {
                chunk: 1,
                pause: Duration::ZERO,
            })
        });
        let message = format!("{:#}", outcome.err().unwrap());
        assert!(message.contains("no such device"), "{message}");
    }

    /// Fails in its second run.
    struct FailsLater {
        runs: u32,
    }

    impl Worker for FailsLater {
        fn run(&mut self, _quota: &Quota) -> Result<Tally> {
            self.runs += 1;
            if self.runs == 2 {
                bail!("device went away");
            }
            Ok(Tally::default())
        }
    }

    #[test]
    fn a_watching_coordinator_gives_the_same_rounds_and_sees_failures() {
        let mut s = settings(3, Stop::Work(1000), Scaling::Strong);
        s.watch = Some(Duration::from_millis(1));
        // On its own thread, so that a coordinator that never sees the round end fails the
        // test instead of hanging it.
        let (send, receive) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let counted = measure(&s, |_| {
                Ok(Counter {
                    chunk: 7,
                    pause: Duration::ZERO,
                })
            })
            .map(|reps| {
                reps.iter()
                    .map(|r| (r.units, r.threads.len()))
                    .collect::<Vec<_>>()
            });
            let failed = measure(&s, |_| Ok(FailsLater { runs: 0 })).map(|_| ());
            send.send((counted, failed)).unwrap();
        });
        let (counted, failed) = receive
            .recv_timeout(Duration::from_secs(20))
            .expect("the watching coordinator did not finish");
        assert_eq!(counted.unwrap(), vec![(1000, 3); 3]);
        let message = format!("{:#}", failed.err().unwrap());
        assert!(message.contains("device went away"), "{message}");
    }

    #[test]
    fn the_clock_resolves_below_a_millisecond() {
        assert!(clock_resolution() < Duration::from_millis(1));
    }
}
