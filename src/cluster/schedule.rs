//! The round-robin schedule of the network matrix: every pair of hosts once, in rounds of
//! disjoint pairs, so that each round loads each host at most once and N hosts take N − 1
//! rounds (N rounds for odd N, one host idle in each), not N(N − 1)/2 tests one after another.

/// The rounds of pairs `(a, b)` of host indices `0..n` (the circle method: host 0 stays, the
/// others turn one place a round; for odd `n` a phantom host makes the count even and whoever
/// meets it sits the round out).
pub fn rounds(n: usize) -> Vec<Vec<(usize, usize)>> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

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
            let mut seen = BTreeSet::new();
            for round in &rounds {
                let mut busy = BTreeSet::new();
                for &(a, b) in round {
                    assert!(a < b && b < n);
                    assert!(busy.insert(a) && busy.insert(b), "a host twice in a round");
                    assert!(seen.insert((a, b)), "pair ({a}, {b}) twice");
                }
                assert_eq!(round.len(), n / 2, "every round is as full as it can be");
            }
            assert_eq!(seen.len(), n * n.saturating_sub(1) / 2);
        }
    }
}
