//! What a core-to-core matrix says: groups of CPUs whose mutual latency is a small fraction of
//! the rest, the cores they add up to, and a pair's placement.
//!
//! **Groups.** The measured pairs' latencies are sorted; wherever one value is at least
//! [`GAP`] × the one before it, the CPUs joined by the pairs at or below the lower value form
//! groups (connected components). Such a cut is kept only when it is clean (every measured pair
//! inside a group is at or below the cut, so a chain of fast pairs cannot join two CPUs whose
//! own pair is slow) and when it splits the CPUs into more than one group with at least one
//! group of two. A uniform matrix has no such gap and infers nothing. Cuts are kept finest
//! first, each a [`Level`]: its groups, the slowest pair inside a group and the fastest pair
//! between two of them.
//!
//! **Names.** The finest level is SMT siblings when its groups hold 2–4 CPUs and its slowest
//! pair is under [`SIBLING_MAX_NS`] (a cache line between two threads of one core does not
//! leave its L1/L2); the next level up is an L3 domain (a CCX on AMD, a die's L3 on Intel), any
//! level above that a socket. One matrix cannot tell an L3 domain from a socket that has one
//! L3: the name says so.
//!
//! **Cores** ([`measured_cores`]): only on a clear signal, since it changes every all-thread
//! peak: siblings in each of the last 3 repetitions, the same groups each time, the slowest
//! sibling pair under half ([`SIBLING_SHARE`]) of the fastest pair between groups, and the
//! matrix covering every CPU the kernel counts.
//!
//! **Placement** ([`classify`]): a pair's round trip against the machine's own levels, cut
//! halfway (geometrically) between a level's slowest inside pair and its fastest outside pair;
//! without levels, the absolute bounds [`ABS_SAME_CORE_NS`] and [`ABS_SHARED_L3_NS`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A cut needs the next latency to be at least this many times the one below it.
pub(crate) const GAP: f64 = 1.5;
/// Siblings' slowest round trip, at most (ns): SMT siblings measure 10–40 ns a round trip.
pub(crate) const SIBLING_MAX_NS: f64 = 50.0;
/// For the cores count: the slowest sibling pair under this share of the fastest other pair.
pub(crate) const SIBLING_SHARE: f64 = 0.5;
/// Repetitions that must all show the same siblings before the cores count changes.
pub(crate) const SIBLING_REPETITIONS: usize = 3;
/// Without a matrix: a round trip below this is two threads of one core (ns).
pub(crate) const ABS_SAME_CORE_NS: f64 = 50.0;
/// Without a matrix: below this, two cores of one L3 domain (ns); above, different domains.
/// Zen's CCX and Intel's mesh measure 40–180 ns a round trip, cross-CCD and cross-socket
/// 200 ns and more.
pub(crate) const ABS_SHARED_L3_NS: f64 = 190.0;

/// One level of groups read off a matrix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Level {
    /// "SMT siblings", "L3 domain" or "socket" (see the module doc).
    pub name: String,
    /// The groups of two CPUs or more, each sorted, in order of their first CPU.
    pub groups: Vec<Vec<usize>>,
    /// The slowest measured pair inside a group, ns per round trip.
    pub within_max_ns: f64,
    /// The fastest measured pair between two groups (or a group and a lone CPU).
    pub between_min_ns: f64,
}

impl Level {
    /// Whether this level's groups are SMT siblings.
    pub fn is_siblings(&self) -> bool {
        self.name == SIBLINGS
    }
}

const SIBLINGS: &str = "SMT siblings";
const L3: &str = "L3 domain";
const SOCKET: &str = "socket";

/// Groups of CPUs, finest level first, from `(a, b, ns)` pairs; empty when none stands out.
pub fn infer(pairs: &[(usize, usize, f64)]) -> Vec<Level> {
    let mut values: Vec<f64> = pairs.iter().map(|p| p.2).filter(|v| *v > 0.0).collect();
    values.sort_by(f64::total_cmp);
    let cpus: Vec<usize> = {
        let mut c: Vec<usize> = pairs.iter().flat_map(|p| [p.0, p.1]).collect();
        c.sort_unstable();
        c.dedup();
        c
    };
    let mut levels: Vec<Level> = Vec::new();
    for w in values.windows(2) {
        if w[1] < w[0] * GAP {
            continue;
        }
        let Some(level) = cut(&cpus, pairs, w[0]) else {
            continue;
        };
        match levels.iter_mut().find(|l| l.groups == level.groups) {
            // The same groups at a higher cut: keep the wider gap.
            Some(same)
                if level.between_min_ns / level.within_max_ns
                    > same.between_min_ns / same.within_max_ns =>
            {
                *same = level
            }
            Some(_) => {}
            None => levels.push(level),
        }
    }
    name_levels(&mut levels);
    levels
}

/// The groups joined by pairs at or below `at`, if the cut is clean and splits the CPUs.
fn cut(cpus: &[usize], pairs: &[(usize, usize, f64)], at: f64) -> Option<Level> {
    let index: BTreeMap<usize, usize> = cpus.iter().enumerate().map(|(i, &c)| (c, i)).collect();
    let mut parent: Vec<usize> = (0..cpus.len()).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for &(a, b, _) in pairs.iter().filter(|p| p.2 <= at) {
        let (ra, rb) = (root(&mut parent, index[&a]), root(&mut parent, index[&b]));
        parent[ra] = rb;
    }
    let group_of: Vec<usize> = (0..cpus.len()).map(|i| root(&mut parent, i)).collect();
    let (mut within, mut between) = (0.0f64, f64::INFINITY);
    for &(a, b, ns) in pairs {
        if group_of[index[&a]] == group_of[index[&b]] {
            within = within.max(ns);
        } else {
            between = between.min(ns);
        }
    }
    if within > at || !between.is_finite() {
        return None; // a slow pair inside a group, or one group of every CPU
    }
    let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, &cpu) in cpus.iter().enumerate() {
        groups.entry(group_of[i]).or_default().push(cpu);
    }
    let mut groups: Vec<Vec<usize>> = groups.into_values().filter(|g| g.len() > 1).collect();
    groups.sort();
    (!groups.is_empty()).then(|| Level {
        name: String::new(),
        groups,
        within_max_ns: within,
        between_min_ns: between,
    })
}

/// Names the levels, finest first (see the module doc).
fn name_levels(levels: &mut [Level]) {
    levels.sort_by(|a, b| a.within_max_ns.total_cmp(&b.within_max_ns));
    let mut names = Vec::new();
    for (i, level) in levels.iter().enumerate() {
        let largest = level.groups.iter().map(Vec::len).max().unwrap_or(0);
        let name = if i == 0 && largest <= 4 && level.within_max_ns <= SIBLING_MAX_NS {
            SIBLINGS
        } else if !names.contains(&L3) {
            L3
        } else {
            SOCKET
        };
        names.push(name);
    }
    for (level, name) in levels.iter_mut().zip(names) {
        level.name = name.to_string();
    }
}

/// Cores counted from a matrix, with the rule that allowed it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MeasuredCores {
    /// Physical cores: the CPUs less one per extra sibling.
    pub cores: usize,
    /// The sibling groups the matrix shows.
    pub siblings: Vec<Vec<usize>>,
    /// How the count was found, for the peak's source.
    pub detail: String,
}

/// The cores the matrix counts, where it shows siblings the kernel does not (`kernel_cores`
/// physical cores over `kernel_cpus` logical CPUs) on a clear signal (module doc); `None`
/// otherwise. `repetitions` are each repetition's pairs; `cpus` the CPUs the matrix covers.
pub fn measured_cores(
    repetitions: &[Vec<(usize, usize, f64)>],
    cpus: usize,
    kernel_cores: usize,
    kernel_cpus: usize,
) -> Option<MeasuredCores> {
    if repetitions.len() < SIBLING_REPETITIONS || cpus < kernel_cpus {
        return None;
    }
    let last = &repetitions[repetitions.len() - SIBLING_REPETITIONS..];
    let mut seen: Option<Vec<Vec<usize>>> = None;
    let mut worst_share = 0.0f64;
    for pairs in last {
        let levels = infer(pairs);
        let siblings = levels.first().filter(|l| l.is_siblings())?;
        let share = siblings.within_max_ns / siblings.between_min_ns;
        if share >= SIBLING_SHARE || seen.as_ref().is_some_and(|g| *g != siblings.groups) {
            return None;
        }
        worst_share = worst_share.max(share);
        seen = Some(siblings.groups.clone());
    }
    let siblings = seen?;
    let extra: usize = siblings.iter().map(|g| g.len() - 1).sum();
    let cores = cpus - extra;
    (cores < kernel_cores).then(|| MeasuredCores {
        cores,
        detail: format!(
            "core-to-core matrix: {} sibling groups ({}) in {SIBLING_REPETITIONS} of \
             {SIBLING_REPETITIONS} repetitions, slowest sibling round trip at most {:.2} of the \
             fastest other pair; the kernel shows {kernel_cores} cores",
            siblings.len(),
            siblings
                .iter()
                .map(|g| super::super::format_cpu_list(g))
                .collect::<Vec<_>>()
                .join(" "),
            worst_share
        ),
        siblings,
    })
}

crate::names::named_enum! {
    /// Where two CPUs sit relative to each other.
    pub enum Placement {
        /// two threads of one core
        SameCore = "same core (SMT siblings)",
        /// two cores that share an L3
        SharedL3 = "shared L3",
        /// cores in different L3 domains (CCDs, dies or sockets)
        DifferentL3 = "different L3 domains",
    }
}

/// Names the placement of a pair whose round trip is `ns`, against `levels` (this machine's
/// matrix, [`infer`]) when they have any, else against the absolute bounds of the module doc.
/// Returns the placement and the rule that named it.
pub fn classify(ns: f64, levels: &[Level]) -> (Placement, String) {
    let bound = |l: &Level| (l.within_max_ns * l.between_min_ns).sqrt();
    let siblings = levels.iter().find(|l| l.is_siblings());
    let l3 = levels.iter().find(|l| l.name == L3);
    if levels.is_empty() {
        let placement = if ns < ABS_SAME_CORE_NS {
            Placement::SameCore
        } else if ns < ABS_SHARED_L3_NS {
            Placement::SharedL3
        } else {
            Placement::DifferentL3
        };
        return (
            placement,
            format!(
                "{ns:.1} ns against the absolute bounds {ABS_SAME_CORE_NS} and \
                 {ABS_SHARED_L3_NS} ns (no groups in this machine's matrix)"
            ),
        );
    }
    if let Some(s) = siblings
        && ns < bound(s)
    {
        return (
            Placement::SameCore,
            format!(
                "{ns:.1} ns < {:.1} ns, the matrix's sibling bound",
                bound(s)
            ),
        );
    }
    match l3 {
        Some(l) if ns < bound(l) => (
            Placement::SharedL3,
            format!(
                "{ns:.1} ns < {:.1} ns, the matrix's L3-domain bound",
                bound(l)
            ),
        ),
        Some(l) => (
            Placement::DifferentL3,
            format!(
                "{ns:.1} ns ≥ {:.1} ns, the matrix's L3-domain bound",
                bound(l)
            ),
        ),
        // Siblings but no coarser level: every core shares one domain.
        None => (
            Placement::SharedL3,
            format!("{ns:.1} ns: the matrix shows one L3 domain beyond its siblings"),
        ),
    }
}

/// The CPUs ordered group by group, finest groups inside coarser ones, lone CPUs last within
/// their coarser group (see [`super::C2cMatrix::display_order`]).
pub(crate) fn order(cpus: &[usize], levels: &[Level]) -> Vec<usize> {
    // Each CPU's key: the first CPU of its group at each level, coarsest first.
    let key = |cpu: usize| -> Vec<usize> {
        levels
            .iter()
            .rev()
            .map(|l| {
                l.groups
                    .iter()
                    .find(|g| g.contains(&cpu))
                    .map_or(usize::MAX, |g| g[0])
            })
            .chain([cpu])
            .collect()
    };
    let mut ordered = cpus.to_vec();
    ordered.sort_by_key(|&c| key(c));
    ordered
}

#[cfg(test)]
mod tests;
