//! The inference on synthetic matrices: siblings, two CCDs, two sockets, noise, a uniform
//! matrix, and a 16-vCPU guest whose hypervisor hides its siblings.

use super::*;
use crate::rng::Rng;

/// Every pair of `n` CPUs, its latency from `ns(a, b)` times a noise of ± `noise` (seeded).
fn matrix(
    n: usize,
    noise: f64,
    seed: u64,
    ns: impl Fn(usize, usize) -> f64,
) -> Vec<(usize, usize, f64)> {
    let mut rng = Rng::for_thread(seed, 0);
    let mut pairs = Vec::new();
    for a in 0..n {
        for b in a + 1..n {
            let jitter = 1.0 + noise * rng.centered_f64() * 2.0;
            pairs.push((a, b, ns(a, b) * jitter));
        }
    }
    pairs
}

fn groups(level: &Level) -> Vec<Vec<usize>> {
    level.groups.clone()
}

#[test]
fn siblings_are_the_finest_level() {
    let levels = infer(&matrix(
        4,
        0.0,
        1,
        |a, b| if a / 2 == b / 2 { 15.0 } else { 60.0 },
    ));
    assert_eq!(levels.len(), 1, "{levels:?}");
    assert!(levels[0].is_siblings());
    assert_eq!(groups(&levels[0]), [vec![0, 1], vec![2, 3]]);
    assert_eq!(
        (levels[0].within_max_ns, levels[0].between_min_ns),
        (15.0, 60.0)
    );
}

#[test]
fn two_ccds_are_two_l3_domains() {
    let levels = infer(&matrix(8, 0.05, 2, |a, b| {
        if a / 4 == b / 4 { 50.0 } else { 250.0 }
    }));
    assert_eq!(levels.len(), 1, "{levels:?}");
    assert_eq!(levels[0].name, "L3 domain");
    assert_eq!(groups(&levels[0]), [vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
}

/// 2 sockets × 2 L3 domains × 2 cores × 2 threads, with 15 % noise.
#[test]
fn two_sockets_of_two_l3_domains_with_siblings_give_three_levels() {
    let ns = |a: usize, b: usize| match () {
        _ if a / 2 == b / 2 => 15.0,
        _ if a / 4 == b / 4 => 55.0,
        _ if a / 8 == b / 8 => 180.0,
        _ => 400.0,
    };
    for seed in 0..20 {
        let levels = infer(&matrix(16, 0.15, seed, ns));
        let names: Vec<&str> = levels.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(
            names,
            ["SMT siblings", "L3 domain", "socket"],
            "seed {seed}: {levels:?}"
        );
        assert_eq!(levels[0].groups.len(), 8);
        assert_eq!(groups(&levels[1])[1], [4, 5, 6, 7]);
        assert_eq!(
            groups(&levels[2]),
            [(0..8).collect::<Vec<_>>(), (8..16).collect()]
        );
    }
}

#[test]
fn a_uniform_matrix_infers_nothing() {
    for seed in 0..50 {
        for n in [2, 3, 4, 16, 64] {
            let levels = infer(&matrix(n, 0.2, seed, |_, _| 100.0));
            assert!(levels.is_empty(), "{n} CPUs, seed {seed}: {levels:?}");
        }
    }
    assert!(infer(&[]).is_empty());
}

/// A chain of fast pairs whose ends are slow to each other is no group.
#[test]
fn a_chain_of_fast_pairs_is_no_group() {
    let pairs = [(0, 1, 20.0), (1, 2, 20.0), (0, 2, 100.0)];
    assert!(infer(&pairs).is_empty());
}

/// A 16-vCPU guest that is 8 cores × 2 threads, CPU i and i + 8 on one core, shown by the
/// hypervisor as 16 cores.
fn hidden_siblings(seed: u64) -> Vec<(usize, usize, f64)> {
    matrix(
        16,
        0.1,
        seed,
        |a, b| if a % 8 == b % 8 { 16.0 } else { 60.0 },
    )
}

#[test]
fn a_guest_with_hidden_siblings_counts_8_cores() {
    let levels = infer(&hidden_siblings(7));
    assert!(levels[0].is_siblings(), "{levels:?}");
    assert_eq!(levels[0].groups[0], [0, 8]);
    let reps: Vec<_> = (0..3).map(hidden_siblings).collect();
    let cores = measured_cores(&reps, 16, 16, 16).unwrap();
    assert_eq!(cores.cores, 8);
    assert_eq!(cores.siblings.len(), 8);
    assert!(
        cores.detail.contains("3 of 3 repetitions"),
        "{}",
        cores.detail
    );
    // Ordered for the heat map: each core's two threads side by side.
    let cpus: Vec<usize> = (0..16).collect();
    assert_eq!(order(&cpus, &levels)[..4], [0, 8, 1, 9]);
}

#[test]
fn the_cores_count_changes_only_on_a_clear_signal() {
    let reps: Vec<_> = (0..3).map(hidden_siblings).collect();
    // Fewer than 3 repetitions, or a matrix that misses CPUs the kernel counts.
    assert!(measured_cores(&reps[..2], 16, 16, 16).is_none());
    assert!(measured_cores(&reps, 16, 16, 32).is_none());
    // The kernel already counts 8 cores: nothing to change.
    assert!(measured_cores(&reps, 16, 8, 16).is_none());
    // One repetition without the siblings.
    let mut mixed = reps.clone();
    mixed[1] = matrix(16, 0.1, 9, |_, _| 60.0);
    assert!(measured_cores(&mixed, 16, 16, 16).is_none());
    // Siblings at 0.6 of the rest: a group, but not under half.
    let weak: Vec<_> = (0..3)
        .map(|s| matrix(16, 0.0, s, |a, b| if a % 8 == b % 8 { 36.0 } else { 60.0 }))
        .collect();
    assert!(infer(&weak[0])[0].is_siblings());
    assert!(measured_cores(&weak, 16, 16, 16).is_none());
}

#[test]
fn placement_follows_the_machines_own_levels_or_the_absolute_bounds() {
    let levels = infer(&matrix(16, 0.0, 0, |a, b| match () {
        _ if a / 2 == b / 2 => 15.0,
        _ if a / 8 == b / 8 => 55.0,
        _ => 250.0,
    }));
    assert_eq!(classify(14.0, &levels).0, Placement::SameCore);
    assert_eq!(classify(60.0, &levels).0, Placement::SharedL3);
    assert_eq!(classify(240.0, &levels).0, Placement::DifferentL3);
    assert_eq!(classify(20.0, &[]).0, Placement::SameCore);
    assert_eq!(classify(120.0, &[]).0, Placement::SharedL3);
    let (far, why) = classify(300.0, &[]);
    assert_eq!(far, Placement::DifferentL3);
    assert!(why.contains("absolute"), "{why}");
    assert_eq!(Placement::SameCore.name(), "same core (SMT siblings)");
}
