//! Core-to-core latency: the time for one cache line to go from one CPU to another and back,
//! and what the matrix of it says about the machine's topology.
//!
//! **How a round trip is counted.** Two threads, each pinned to one CPU of the pair, share one
//! 64-byte line (128-byte aligned, so the adjacent-line prefetcher pulls no neighbour in). One
//! round trip is A→B→A: A publishes sequence number 2k−1, B spins until it sees it and answers
//! 2k, A spins until it sees the answer. In `store` mode the publication and the answer are
//! plain release stores read by acquire loads; in `cas` mode each is a compare-and-swap spun on
//! until it succeeds (`core-to-core-latency`'s default benchmark). Round trips are timed in
//! batches by the monotonic clock (a batch lasts at least 20 µs, so the clock's own cost is
//! under 0.2 %); a batch's value is its wall time / its round trips, and a pair's value is the
//! median of its batches, so a batch in which either thread was descheduled does not move it.
//! `core-to-core-latency` prints half a round trip (its loop time / iterations / 2): its
//! figures × 2 are comparable with these.
//!
//! **Nothing hangs.** Every spin loop reads the clock every few thousand turns and gives up at a
//! deadline: a partner that never answers (an offline CPU, a CPU another task holds for good)
//! is an error that names the CPU, never a hang.
//!
//! The parts: [`pingpong`] measures one pair; [`infer`] reads groups out of a matrix (siblings,
//! L3 domains, sockets), counts cores, and names a pair's placement; [`kernel`] reads what the
//! kernel and CPUID claim, to set beside it. [`pair_round_trip`] is the probe other commands
//! call (a fraction of a second); `peakbench mem c2c` measures the whole matrix.

pub(crate) mod infer;
pub(crate) mod kernel;
pub(crate) mod pingpong;

use std::time::Duration;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

pub use infer::{Level, MeasuredCores, Placement, classify, infer, measured_cores};
pub use kernel::KernelTopology;

crate::names::named_enum! {
    /// How the line goes back and forth.
    pub enum C2cMode {
        /// a release store answered by a store, each seen by an acquire load spinning on the line
        Store = "store",
        /// a compare-and-swap answered by one, each spun on until it succeeds (core-to-core-latency's bench 1)
        Cas = "cas",
    }
}

/// One pair's round-trip latency, as [`pair_round_trip`] measures it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairLatency {
    /// The two CPUs: the first starts each round trip.
    pub cpus: [usize; 2],
    pub mode: C2cMode,
    /// The median of the batches' ns per round trip (A→B→A).
    pub median_ns: f64,
    /// The fastest and slowest batch, ns per round trip.
    pub min_ns: f64,
    pub max_ns: f64,
    /// Batches timed (the samples of the median).
    pub samples: usize,
    /// Round trips per batch.
    pub round_trips_per_batch: u64,
}

impl PairLatency {
    /// The pair's value from its batches (ns per round trip each); `None` without a batch.
    pub(crate) fn from_batches(
        cpus: [usize; 2],
        mode: C2cMode,
        batches: &[f64],
        per_batch: u64,
    ) -> Option<PairLatency> {
        let stats = crate::stats::Summary::of(batches)?;
        Some(PairLatency {
            cpus,
            mode,
            median_ns: stats.median,
            min_ns: stats.min,
            max_ns: stats.max,
            samples: batches.len(),
            round_trips_per_batch: per_batch,
        })
    }
}

/// The round trip of a cache line between CPUs `a` and `b` (A→B→A, `cas` mode), the median
/// of batches timed for about `budget` (at least 5 batches, whatever the budget), with each
/// thread pinned to its CPU. For other commands' evidence (where `peakbench check` runs a
/// case, say), a fraction of a second: give 0.2–1 s. Name the placement with [`classify`].
///
/// Errors when `a == b`, when a CPU is not one this process may run on, when a thread cannot
/// be pinned, or when the partner does not answer within `budget` + 1 s.
pub fn pair_round_trip(a: usize, b: usize, budget: Duration) -> Result<PairLatency> {
    if a == b {
        bail!("a round trip needs two CPUs: both are {a}");
    }
    let allowed = super::affinity::allowed_cpus();
    if let Some(cpu) = [a, b].into_iter().find(|c| !allowed.contains(c)) {
        bail!(
            "CPU {cpu} is not one this process may run on (allowed: {})",
            super::format_cpu_list(&allowed)
        );
    }
    let settings = pingpong::PairSettings {
        mode: C2cMode::Cas,
        time: budget,
        ..pingpong::PairSettings::default()
    };
    pingpong::measure_pair([a, b], &settings)
}

/// One measured pair of a matrix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairCell {
    /// The two CPUs, the lower first.
    pub cpus: [usize; 2],
    /// The median of the repetitions' medians, ns per round trip.
    pub median_ns: f64,
    /// Each repetition's median, ns per round trip, in order.
    pub repetitions_ns: Vec<f64>,
    /// `core-to-core-latency`'s mean × 2 (its figure is half a round trip), when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_ns: Option<f64>,
}

/// A measured core-to-core matrix with what it says, beside what the kernel and CPUID say.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct C2cMatrix {
    pub mode: C2cMode,
    /// The CPUs measured (the process's affinity), in order.
    pub cpus: Vec<usize>,
    /// Each measured pair; every pair of `cpus` unless `sampled` says otherwise.
    pub pairs: Vec<PairCell>,
    /// How pairs were chosen when not all were measured, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled: Option<String>,
    /// Groups read off the medians, finest first; empty when the matrix shows none.
    pub inferred: Vec<Level>,
    /// What the kernel's sysfs topology and CPUID claim.
    pub kernel: KernelTopology,
    /// Cores counted from the matrix where it shows siblings the kernel hides, with the rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_cores: Option<MeasuredCores>,
}

impl C2cMatrix {
    /// The pairs as (a, b, ns) from their overall medians.
    pub fn medians(&self) -> Vec<(usize, usize, f64)> {
        self.pairs
            .iter()
            .map(|p| (p.cpus[0], p.cpus[1], p.median_ns))
            .collect()
    }

    /// The pairs as (a, b, ns) of repetition `r` (pairs without it are left out).
    pub fn repetition(&self, r: usize) -> Vec<(usize, usize, f64)> {
        self.pairs
            .iter()
            .filter_map(|p| Some((p.cpus[0], p.cpus[1], *p.repetitions_ns.get(r)?)))
            .collect()
    }

    /// Repetitions every pair has.
    pub fn repetitions(&self) -> usize {
        self.pairs
            .iter()
            .map(|p| p.repetitions_ns.len())
            .min()
            .unwrap_or(0)
    }

    /// The CPUs in the order a heat map shows them: by the finest groups inferred, those in
    /// the coarser groups' order, so that every group is a block on the diagonal.
    pub fn display_order(&self) -> Vec<usize> {
        infer::order(&self.cpus, &self.inferred)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The probe other commands call: one pair in about its budget, the caller's thread left
    /// unpinned; refused for one CPU twice or a CPU the process may not use.
    #[test]
    fn the_placement_probe_measures_one_pair_and_refuses_bad_pairs() {
        let cpus = super::super::affinity::allowed_cpus();
        assert!(pair_round_trip(cpus[0], cpus[0], Duration::from_millis(10)).is_err());
        let absent = (0..4096).find(|c| !cpus.contains(c)).unwrap();
        let e = pair_round_trip(cpus[0], absent, Duration::from_millis(10)).unwrap_err();
        assert!(e.to_string().contains(&format!("CPU {absent}")), "{e}");
        if cpus.len() < 2 {
            return;
        }
        let pair = pair_round_trip(cpus[0], cpus[1], Duration::from_millis(20)).unwrap();
        assert_eq!((pair.cpus, pair.mode), ([cpus[0], cpus[1]], C2cMode::Cas));
        assert!(pair.samples >= 5 && pair.median_ns > 0.0, "{pair:?}");
        let (placement, why) = classify(pair.median_ns, &[]);
        assert!(!why.is_empty(), "{placement}");
        assert_eq!(super::super::affinity::allowed_cpus(), cpus);
    }
}
