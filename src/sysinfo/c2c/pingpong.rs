//! One pair's ping-pong: two pinned threads bounce one cache line, every spin bounded by a
//! deadline. The counting rule is in the parent module's doc.

use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};

use super::{C2cMode, PairLatency};
use crate::sysinfo::affinity::pin_to;

/// The shared line, alone on its 128 bytes (the adjacent-line prefetcher fetches pairs of
/// 64-byte lines; nothing else may sit in the other half).
#[repr(C, align(128))]
struct Line {
    value: AtomicU64,
}

/// The value A stores to tell B to stop.
const STOP: u64 = u64::MAX;
/// Spins between looks at the clock.
const SPINS_PER_LOOK: u32 = 1 << 12;
/// A batch lasts at least this long once calibrated.
const MIN_BATCH: Duration = Duration::from_micros(20);
/// Round trips per batch, at most.
const MAX_BATCH: u64 = 1 << 16;
/// How long past its time a pair may take before its partner counts as gone.
const GRACE: Duration = Duration::from_secs(1);

/// How one pair is measured.
#[derive(Clone, Debug)]
pub(crate) struct PairSettings {
    pub mode: C2cMode,
    /// Time spent timing batches (after the calibration).
    pub time: Duration,
    /// Batches timed at least, whatever the time.
    pub min_batches: usize,
    /// Batches timed at most.
    pub max_batches: usize,
}

impl Default for PairSettings {
    fn default() -> Self {
        PairSettings {
            mode: C2cMode::Cas,
            time: Duration::from_millis(20),
            min_batches: 5,
            max_batches: 100_000,
        }
    }
}

/// The partner the leading thread waits for.
struct Peer<'a> {
    cpu: usize,
    deadline: Instant,
    /// Set when the partner's thread has ended (it could not be pinned, say).
    gone: &'a AtomicBool,
}

/// Spins until `done` says yes; errors once the peer is gone or its deadline has passed.
#[inline(always)]
fn spin_until(mut done: impl FnMut() -> bool, peer: &Peer) -> Result<()> {
    let mut spins = 0u32;
    while !done() {
        spins += 1;
        if spins == SPINS_PER_LOOK {
            spins = 0;
            let who = peer.cpu;
            if peer.gone.load(Ordering::Relaxed) {
                bail!("the thread on CPU {who} stopped answering");
            }
            if Instant::now() > peer.deadline {
                bail!(
                    "CPU {who} did not answer before the deadline: is it offline, or held by a \
                     task that does not yield?"
                );
            }
        }
    }
    Ok(())
}

/// B's side: answers each odd number with the next even one until A stores [`STOP`] (or
/// `quit` is set, when A never started).
fn answer(line: &AtomicU64, mode: C2cMode, deadline: Instant, quit: &AtomicBool) -> Result<()> {
    let mut odd = 1u64;
    loop {
        let mut spins = 0u32;
        loop {
            let seen = match mode {
                C2cMode::Store => line.load(Ordering::Acquire),
                // Spun on as core-to-core-latency spins: the CAS asks for the line exclusive.
                C2cMode::Cas => {
                    match line.compare_exchange(odd, odd + 1, Ordering::AcqRel, Ordering::Acquire) {
                        Ok(_) => break,
                        Err(v) => v,
                    }
                }
            };
            if seen == odd {
                line.store(odd + 1, Ordering::Release); // store mode only: a CAS broke out
                break;
            }
            if seen == STOP {
                return Ok(());
            }
            spins += 1;
            if spins == SPINS_PER_LOOK {
                spins = 0;
                if quit.load(Ordering::Relaxed) {
                    return Ok(());
                }
                if Instant::now() > deadline {
                    bail!("the leading thread stopped starting round trips before the deadline");
                }
            }
        }
        odd += 2;
    }
}

/// A's side: `n` round trips from `next`, the even number B last answered; returns the next
/// one. In `store` mode A stores next + 1 and spins until it reads next + 2; in `cas` mode A
/// swaps next for next + 1, spinning until B's answer makes the swap succeed, so each batch
/// of n swaps spans n round trips, as core-to-core-latency's loop does.
#[inline(never)]
fn round_trips(line: &AtomicU64, mode: C2cMode, mut next: u64, n: u64, peer: &Peer) -> Result<u64> {
    for _ in 0..n {
        match mode {
            C2cMode::Store => {
                line.store(next + 1, Ordering::Release);
                spin_until(|| line.load(Ordering::Acquire) == next + 2, peer)?;
            }
            C2cMode::Cas => spin_until(
                || {
                    line.compare_exchange(next, next + 1, Ordering::AcqRel, Ordering::Relaxed)
                        .is_ok()
                },
                peer,
            )?,
        }
        next += 2;
    }
    Ok(next)
}

/// A's whole run: calibrates the batch to [`MIN_BATCH`], then times batches for
/// `settings.time`. Returns (ns per round trip of each batch, round trips per batch).
fn lead(line: &AtomicU64, settings: &PairSettings, peer: &Peer) -> Result<(Vec<f64>, u64)> {
    let mode = settings.mode;
    let mut next = 0u64;
    let mut per_batch = 64u64;
    // Calibration doubles as the warm-up: both threads running, the line moving.
    loop {
        let start = Instant::now();
        next = round_trips(line, mode, next, per_batch, peer)?;
        if start.elapsed() >= MIN_BATCH || per_batch >= MAX_BATCH {
            break;
        }
        per_batch *= 2;
    }
    let mut batches = Vec::new();
    let started = Instant::now();
    while batches.len() < settings.max_batches
        && (batches.len() < settings.min_batches || started.elapsed() < settings.time)
    {
        let start = Instant::now();
        next = round_trips(line, mode, next, per_batch, peer)?;
        batches.push(start.elapsed().as_nanos() as f64 / per_batch as f64);
    }
    Ok((batches, per_batch))
}

/// Measures the pair `[a, b]`: A on CPU `a` leads, B on CPU `b` answers.
pub(crate) fn measure_pair(cpus: [usize; 2], settings: &PairSettings) -> Result<PairLatency> {
    let [a, b] = cpus;
    let line = Line {
        value: AtomicU64::new(0),
    };
    let barrier = Barrier::new(2);
    let quit = AtomicBool::new(false);
    let gone = AtomicBool::new(false);
    let deadline = Instant::now() + settings.time.saturating_mul(2) + GRACE;
    let (led, answered) = std::thread::scope(|s| {
        let responder = s.spawn(|| {
            let pinned = pin_to(b);
            barrier.wait();
            let answered =
                pinned.and_then(|()| answer(&line.value, settings.mode, deadline, &quit));
            gone.store(true, Ordering::Relaxed);
            answered
        });
        // A runs on a thread of its own too: the caller's thread keeps its affinity (a tool
        // started after the matrix inherits it).
        let leader = s.spawn(|| {
            let pinned = pin_to(a);
            barrier.wait();
            pinned?;
            let peer = Peer {
                cpu: b,
                deadline,
                gone: &gone,
            };
            lead(&line.value, settings, &peer)
        });
        let led = leader
            .join()
            .unwrap_or_else(|_| Err(anyhow!("the thread on CPU {a} panicked")));
        // However A ended, B stops: on the line, and by the flag if A never started.
        line.value.store(STOP, Ordering::Release);
        quit.store(true, Ordering::Relaxed);
        let answered = responder
            .join()
            .unwrap_or_else(|_| Err(anyhow!("the thread on CPU {b} panicked")));
        (led, answered)
    });
    answered?;
    let (batches, per_batch) = led.map_err(|e| e.context(format!("pair CPU {a} ↔ CPU {b}")))?;
    PairLatency::from_batches(cpus, settings.mode, &batches, per_batch)
        .ok_or_else(|| anyhow!("pair CPU {a} ↔ CPU {b}: no batch was timed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_modes_measure_a_pair_and_count_round_trips() {
        let cpus = crate::sysinfo::affinity::allowed_cpus();
        if cpus.len() < 2 {
            return; // one CPU: no pair
        }
        for mode in [C2cMode::Store, C2cMode::Cas] {
            let settings = PairSettings {
                mode,
                time: Duration::from_millis(5),
                ..PairSettings::default()
            };
            let pair = measure_pair([cpus[0], cpus[1]], &settings).unwrap();
            assert!(pair.samples >= 5, "{pair:?}");
            assert!(
                pair.median_ns > 0.0 && pair.min_ns <= pair.median_ns,
                "{pair:?}"
            );
            assert!(pair.round_trips_per_batch >= 64, "{pair:?}");
            // The caller's own thread is left as it was: unpinned.
            assert_eq!(crate::sysinfo::affinity::allowed_cpus(), cpus);
        }
    }

    #[test]
    fn a_cpu_this_process_may_not_use_is_an_error_not_a_hang() {
        let cpus = crate::sysinfo::affinity::allowed_cpus();
        let absent = (0..1024).find(|c| !cpus.contains(c)).unwrap();
        let e = measure_pair([cpus[0], absent], &PairSettings::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("CPU {absent}")), "{e}");
    }
}
