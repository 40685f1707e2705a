//! The schedule of the network matrix: which pairs of hosts are measured, in rounds of disjoint
//! pairs, so that each round loads each host at most once.
//!
//! Three plans (`--matrix`):
//! - `pairs`: every pair once, N − 1 rounds (N for odd N; the circle method);
//! - `ring`: each host with its two neighbours in host order, 2 rounds (3 for odd N);
//! - `sample:K`: the ring, then K rounds each pairing every host with a random peer it has not
//!   met yet (a random perfect matching; for odd N one host sits each round out), so that each
//!   host meets its two neighbours and K random peers in K + 2 rounds (K + 3 for odd N),
//!   whatever N. Every host has at least two links, so a host slow on most of its links can be
//!   told from a slow link (see [`super::analysis::slow_hosts`]).
//!
//! The default is `pairs` up to [`PAIRS_UP_TO`] hosts (3 rounds) and `sample:3` above (every
//! pair up to 6 hosts, where the sample would reach them all; then 5 rounds for even N, 6 for
//! odd N, at any N). So each host has at most 5 links at any N: the matrix takes O(1) rounds
//! and the document O(N) links, where every pair would take N − 1 rounds and N²/2 links.

// Without the `mpi` feature no cluster job runs, but this module is still built: its tests run
// in every build, and the exporters read the documents it describes.
#![cfg_attr(not(feature = "mpi"), allow(dead_code))]

use std::collections::BTreeSet;

use crate::rng::Rng;

/// Which pairs the matrix measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MatrixPlan {
    Pairs,
    Ring,
    Sample(usize),
}

/// The default plan measures every pair up to this many hosts.
pub(crate) const PAIRS_UP_TO: usize = 4;
/// Random peers per host of the default plan above [`PAIRS_UP_TO`] hosts.
pub(crate) const DEFAULT_SAMPLE: usize = 3;

impl MatrixPlan {
    /// The plan `--matrix` names: `pairs`, `ring` or `sample:K` (K from 1 to 64).
    pub(crate) fn parse(text: &str) -> Result<MatrixPlan, String> {
        let bad = || {
            format!(
                "'{text}' is not a matrix plan: give 'pairs' (every pair), 'ring' (each host \
                 with its neighbours) or 'sample:K' (the ring and K random peers per host, K from \
                 1 to 64, e.g. sample:3)"
            )
        };
        match text {
            "pairs" => Ok(MatrixPlan::Pairs),
            "ring" => Ok(MatrixPlan::Ring),
            _ => {
                let k = text.strip_prefix("sample:").ok_or_else(bad)?;
                match k.parse::<usize>() {
                    Ok(k) if (1..=64).contains(&k) => Ok(MatrixPlan::Sample(k)),
                    _ => Err(bad()),
                }
            }
        }
    }

    /// The default for `n` hosts.
    pub(crate) fn default_for(n: usize) -> MatrixPlan {
        if n <= PAIRS_UP_TO {
            MatrixPlan::Pairs
        } else {
            MatrixPlan::Sample(DEFAULT_SAMPLE)
        }
    }

    /// The plan as `--matrix` takes it.
    pub(crate) fn text(self) -> String {
        match self {
            MatrixPlan::Pairs => "pairs".into(),
            MatrixPlan::Ring => "ring".into(),
            MatrixPlan::Sample(k) => format!("sample:{k}"),
        }
    }

    /// The rounds of pairs `(a, b)`, `a < b`, of host indices `0..n`; `seed` draws the random
    /// peers of `sample:K` (the same seed, the same rounds). A sample that would reach every
    /// pair anyway is `pairs`.
    pub(crate) fn rounds(self, n: usize, seed: u64) -> Vec<Vec<(usize, usize)>> {
        match self {
            MatrixPlan::Pairs => rounds(n),
            MatrixPlan::Ring => ring(n),
            MatrixPlan::Sample(k) if k + 2 >= n.saturating_sub(1) => rounds(n),
            MatrixPlan::Sample(k) => sample(n, k, seed),
        }
    }
}

/// The rounds of every pair (the circle method: host 0 stays, the others turn one place a
/// round; for odd `n` a phantom host makes the count even and whoever meets it sits the round
/// out).
pub(crate) fn rounds(n: usize) -> Vec<Vec<(usize, usize)>> {
    if n < 2 {
        return Vec::new();
    }
    let m = if n.is_multiple_of(2) { n } else { n + 1 };
    let mut ring: Vec<usize> = (1..m).collect();
    let mut out = Vec::with_capacity(m - 1);
    for _ in 0..m - 1 {
        let mut pairs = Vec::with_capacity(m / 2);
        let seat = |i: usize| if i == 0 { 0 } else { ring[i - 1] };
        for i in 0..m / 2 {
            let (a, b) = (seat(i), seat(m - 1 - i));
            if a < n && b < n {
                pairs.push((a.min(b), a.max(b)));
            }
        }
        out.push(pairs);
        ring.rotate_right(1);
    }
    out
}

/// Each host with its neighbours: the links (i, i + 1 mod n) in 2 rounds for even `n`, 3 for
/// odd `n` (the last link, (n − 1, 0), alone with none of its hosts' other links).
pub(crate) fn ring(n: usize) -> Vec<Vec<(usize, usize)>> {
    if n < 3 {
        return rounds(n);
    }
    let link = |i: usize| {
        let (a, b) = (i, (i + 1) % n);
        (a.min(b), a.max(b))
    };
    let mut out = vec![
        (0..n - 1).step_by(2).map(link).collect::<Vec<_>>(),
        (1..n - 1).step_by(2).map(link).collect(),
    ];
    if n.is_multiple_of(2) {
        out[1].push(link(n - 1));
    } else {
        out.push(vec![link(n - 1)]);
    }
    out
}

/// The ring, then `k` rounds each a random matching of pairs not yet measured.
fn sample(n: usize, k: usize, seed: u64) -> Vec<Vec<(usize, usize)>> {
    let mut out = ring(n);
    let mut seen: BTreeSet<(usize, usize)> = out.iter().flatten().copied().collect();
    let mut rng = Rng::new(seed);
    for _ in 0..k {
        // The matching that repeats the fewest measured pairs of a few random draws; a pair
        // measured already is left out of the round.
        let mut best: Option<Vec<(usize, usize)>> = None;
        for _ in 0..64 {
            let mut hosts: Vec<usize> = (0..n).collect();
            for i in (1..n).rev() {
                hosts.swap(i, rng.index(i + 1));
            }
            let pairs: Vec<(usize, usize)> = hosts
                .chunks_exact(2)
                .map(|p| (p[0].min(p[1]), p[0].max(p[1])))
                .filter(|p| !seen.contains(p))
                .collect();
            if best.as_ref().is_none_or(|b| pairs.len() > b.len()) {
                best = Some(pairs);
            }
            if best.as_ref().is_some_and(|b| b.len() == n / 2) {
                break;
            }
        }
        let pairs = best.unwrap_or_default();
        seen.extend(pairs.iter().copied());
        if !pairs.is_empty() {
            out.push(pairs);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_disjoint(rounds: &[Vec<(usize, usize)>], n: usize) -> BTreeSet<(usize, usize)> {
        let mut seen = BTreeSet::new();
        for round in rounds {
            let mut busy = BTreeSet::new();
            for &(a, b) in round {
                assert!(a < b && b < n);
                assert!(busy.insert(a) && busy.insert(b), "a host twice in a round");
                assert!(seen.insert((a, b)), "pair ({a}, {b}) twice");
            }
        }
        seen
    }

    #[test]
    fn every_pair_once_in_rounds_of_disjoint_pairs() {
        for n in 0..=12 {
            let rounds = rounds(n);
            let expected_rounds = match n {
                0 | 1 => 0,
                n if n.is_multiple_of(2) => n - 1,
                n => n,
            };
            assert_eq!(rounds.len(), expected_rounds, "n = {n}");
            for round in &rounds {
                assert_eq!(round.len(), n / 2, "every round is as full as it can be");
            }
            assert_eq!(
                check_disjoint(&rounds, n).len(),
                n * n.saturating_sub(1) / 2
            );
        }
    }

    #[test]
    fn the_ring_links_each_host_to_its_neighbours_in_two_or_three_rounds() {
        for n in 3..=13 {
            let rounds = ring(n);
            assert_eq!(rounds.len(), if n % 2 == 0 { 2 } else { 3 }, "n = {n}");
            let seen = check_disjoint(&rounds, n);
            assert_eq!(seen.len(), n, "n = {n}");
            for i in 0..n {
                let j = (i + 1) % n;
                assert!(seen.contains(&(i.min(j), i.max(j))), "n = {n}: {i}–{j}");
            }
        }
    }

    #[test]
    fn a_sample_takes_k_rounds_more_than_the_ring_at_any_size() {
        for n in [9, 10, 16, 17, 100, 1000] {
            let plan = MatrixPlan::Sample(3);
            let rounds = plan.rounds(n, 42);
            let ring_rounds = if n % 2 == 0 { 2 } else { 3 };
            assert_eq!(rounds.len(), ring_rounds + 3, "n = {n}");
            let seen = check_disjoint(&rounds, n);
            // Every host meets its two neighbours and up to 3 random peers.
            let mut degree = vec![0usize; n];
            for &(a, b) in &seen {
                degree[a] += 1;
                degree[b] += 1;
            }
            assert!(degree.iter().all(|&d| (2..=5).contains(&d)), "n = {n}");
            let links: usize = degree.iter().sum();
            assert!(links * 100 >= n * 5 * 85, "n = {n}: {links} link ends");
            assert_eq!(rounds, plan.rounds(n, 42), "the seed fixes the sample");
        }
        // Few hosts: the sample would reach every pair, so it is every pair.
        assert_eq!(MatrixPlan::Sample(3).rounds(6, 1), rounds(6));
    }

    #[test]
    fn plans_parse_and_the_default_follows_the_host_count() {
        assert_eq!(MatrixPlan::parse("pairs"), Ok(MatrixPlan::Pairs));
        assert_eq!(MatrixPlan::parse("ring"), Ok(MatrixPlan::Ring));
        assert_eq!(MatrixPlan::parse("sample:3"), Ok(MatrixPlan::Sample(3)));
        for bad in ["sample:0", "sample:", "sample:x", "all", "sample:65"] {
            let e = MatrixPlan::parse(bad).unwrap_err();
            assert!(e.contains("sample:K"), "{e}");
        }
        assert_eq!(MatrixPlan::default_for(4), MatrixPlan::Pairs);
        assert_eq!(MatrixPlan::default_for(5), MatrixPlan::Sample(3));
        assert_eq!(MatrixPlan::Sample(3).text(), "sample:3");
    }
}
