//! Statistics over repetitions, and latency histograms that merge.
//!
//! A [`Summary`] describes the repetitions of one case: the median is the headline value (robust
//! to one disturbed repetition on a shared machine), the sample standard deviation (n − 1) and the
//! coefficient of variation say how much to trust it. Statistics that do not exist for the sample
//! (a standard deviation of one value) are `None`, never NaN.
//!
//! A [`LatencyHistogram`] records every latency in nanoseconds into an HDR histogram (Gil Tene's
//! log-linear layout, the `hdrhistogram` crate) with two significant digits: each bucket is at
//! most 1/128 of its value wide, and a percentile is read as the middle of its bucket (as fio
//! reads its own), so it is within 0.4 % of the true sample value either way, not biased up.
//! Histograms from several threads (or hosts) are merged bucket by bucket before percentiles are
//! taken; percentiles are never averaged.
//!
//! Three tests read the repetitions themselves, assuming nothing about their distribution (a
//! benchmark's repetitions are rarely normal: a disturbed repetition can be far worse, none is
//! far better): [`mann_whitney`] says whether two runs' repetitions differ (the rule of
//! `peakbench compare`), [`regimes`] whether one run's repetitions fall into two separate
//! groups, and [`drift`] whether they trend up or down from first to last. The two rank tests
//! count out the exact distribution of their statistic for small samples without ties, and use
//! the normal approximation for large samples or where values tie.

/// The coefficient of variation above which a result is unstable: the one threshold the
/// run's warnings and the findings both use.
pub(crate) const UNSTABLE_CV: f64 = 0.10;

use std::cmp::Ordering;
use std::f64::consts::{PI, SQRT_2};

use serde::{Deserialize, Serialize};

/// Summary statistics of a set of repetitions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Median (mean of the two middle values for an even count).
    pub median: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (n − 1 in the denominator); `null` for fewer than 2 values.
    pub stddev: Option<f64>,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Coefficient of variation, stddev / mean; `null` without a stddev or with a zero mean.
    pub cv: Option<f64>,
    /// Number of values.
    pub n: usize,
}

impl Summary {
    /// Summarises `values`; `None` for an empty slice or a value that is not finite.
    pub fn of(values: &[f64]) -> Option<Summary> {
        if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = middle(&sorted);
        let mean = sorted.iter().sum::<f64>() / n as f64;
        let stddev = (n > 1).then(|| {
            let squares: f64 = sorted.iter().map(|v| (v - mean).powi(2)).sum();
            (squares / (n - 1) as f64).sqrt()
        });
        let cv = stddev.filter(|_| mean != 0.0).map(|s| s / mean.abs());
        Some(Summary {
            median,
            mean,
            stddev,
            min: sorted[0],
            max: sorted[n - 1],
            cv,
            n,
        })
    }
}

/// Latency percentiles in nanoseconds, from a merged histogram.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Mean of the recorded values (from the histogram, within its error bound).
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    /// Largest recorded value.
    pub max: f64,
    /// Number of recorded values.
    pub count: u64,
}

/// A log-linear histogram of latencies in nanoseconds, 2 significant digits (≤ 0.4 % error).
#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    histogram: hdrhistogram::Histogram<u64>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    /// Relative error bound of a percentile: half a bucket of at most 1/128 of its value.
    pub const RELATIVE_ERROR: f64 = 1.0 / 256.0;

    pub fn new() -> Self {
        let mut histogram =
            hdrhistogram::Histogram::new(2).expect("2 significant digits is a valid precision");
        histogram.auto(true);
        LatencyHistogram { histogram }
    }

    /// Records one latency; 0 is recorded as 1 ns (the clock cannot resolve less).
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.histogram
            .record(ns.max(1))
            .expect("auto-resizing histogram accepts any value");
    }

    /// Records the same latency `count` times.
    pub fn record_n(&mut self, ns: u64, count: u64) {
        self.histogram
            .record_n(ns.max(1), count)
            .expect("auto-resizing histogram accepts any value");
    }

    /// Adds every bucket of `other` into this histogram.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        self.histogram
            .add(&other.histogram)
            .expect("auto-resizing histogram accepts any other");
    }

    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    /// The value at `quantile` (0.0 ..= 1.0): the middle of the bucket that holds it.
    pub fn quantile(&self, quantile: f64) -> u64 {
        self.histogram
            .median_equivalent(self.histogram.value_at_quantile(quantile))
    }

    /// Percentiles of everything recorded; `None` when nothing was.
    pub fn summary(&self) -> Option<LatencySummary> {
        if self.histogram.is_empty() {
            return None;
        }
        Some(LatencySummary {
            mean: self.histogram.mean(),
            p50: self.quantile(0.50) as f64,
            p90: self.quantile(0.90) as f64,
            p99: self.quantile(0.99) as f64,
            p999: self.quantile(0.999) as f64,
            max: self.histogram.max() as f64,
            count: self.histogram.len(),
        })
    }
}

/// The middle value of sorted values (the mean of the two middle ones for an even count).
fn middle(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// The median of values in any order (the mean of the two middle ones for an even count),
/// over the finite values; `None` when there is none.
pub(crate) fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    Some(middle(&sorted))
}

/// The `q` quantile (0 to 1) of sorted values by the nearest rank, round((n − 1) × q): always
/// one of the values, never an interpolation; `None` for no values.
pub(crate) fn nearest_rank(sorted: &[f64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    Some(sorted[(last as f64 * q.clamp(0.0, 1.0)).round() as usize])
}

/// Resamples of [`ratio_interval`].
const RESAMPLES: usize = 1000;

/// A 95 % percentile bootstrap interval of the ratio of medians (`here` against `base`, both
/// resampled; in the direction of performance: `here / base` where higher is better, `base /
/// here` where lower is), seeded by `id` so that the same samples give the same interval.
/// `None` for an empty sample, or where fewer than half the resampled ratios are finite.
pub(crate) fn ratio_interval(here: &[f64], base: &[f64], up: bool, id: &str) -> Option<[f64; 2]> {
    if here.is_empty() || base.is_empty() {
        return None;
    }
    let seed = id.bytes().fold(0x9e37_79b9_7f4a_7c15u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let mut rng = crate::rng::Rng::for_thread(seed, 0);
    let mut resample = |from: &[f64]| {
        let picked: Vec<f64> = (0..from.len())
            .map(|_| from[rng.index(from.len())])
            .collect();
        median(&picked)
    };
    let mut ratios: Vec<f64> = (0..RESAMPLES)
        .filter_map(|_| {
            let (h, b) = (resample(here)?, resample(base)?);
            Some(if up { h / b } else { b / h })
        })
        .filter(|r| r.is_finite())
        .collect();
    if ratios.len() < RESAMPLES / 2 {
        return None;
    }
    ratios.sort_by(f64::total_cmp);
    Some([nearest_rank(&ratios, 0.025)?, nearest_rank(&ratios, 0.975)?])
}

/// Whether repetitions with coefficient of variation `cv` over `n` values are unstable: a CV
/// above [`UNSTABLE_CV`] over at least 3 of them (two values say nothing of a spread).
pub(crate) fn unstable(cv: Option<f64>, n: usize) -> bool {
    cv.is_some_and(|cv| cv > UNSTABLE_CV) && n >= 3
}

/// Up to this many pairs n_a × n_b (50 vs 50), [`mann_whitney`] counts out the exact
/// distribution of U when no values tie: at most about 1.6 million additions. Above it the
/// normal approximation's p is within 0.003 of the exact one when the smaller sample holds 20
/// or more values, 0.006 at 10, but 0.03 for a lopsided 2 vs 1251.
pub(crate) const MANN_WHITNEY_EXACT_PAIRS: usize = 2500;

/// Up to this many repetitions, [`drift`] counts out the exact distribution of S when no values
/// tie (about 6 million additions at 60). Above it the normal approximation's p is within
/// 0.002 of the exact one.
pub(crate) const DRIFT_EXACT_VALUES: usize = 60;

/// The two-sided Mann–Whitney U test of two samples.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct MannWhitney {
    /// U of the first sample: the pairs (x of a, y of b) with x > y, a tie counting 1/2.
    /// It runs from 0 (every a below every b) to n_a × n_b (every a above every b).
    pub u: f64,
    /// Two-sided p: twice the smaller tail of U's distribution when both samples come from one
    /// distribution, capped at 1.
    pub p: f64,
    /// The smallest p that samples of these sizes can give, 2 / C(n_a + n_b, n_a) capped at 1:
    /// at 3 and 3 values it is 0.1, so no difference can reach p < 0.05.
    pub min_p: f64,
    /// The sizes of a and b.
    pub n: [usize; 2],
    /// Whether p is from the exact distribution of U (no ties, at most
    /// [`MANN_WHITNEY_EXACT_PAIRS`] pairs) rather than the normal approximation.
    pub exact: bool,
}

/// Tests whether `a` and `b` come from one distribution, against one that tends to give larger
/// (or smaller) values: the two-sided Mann–Whitney U (Wilcoxon rank-sum) test. It assumes the
/// values are independent, and nothing of their distribution's shape.
///
/// Without ties and with at most [`MANN_WHITNEY_EXACT_PAIRS`] pairs, p is exact: every way to split
/// the ranked values into groups of n_a and n_b is equally likely, and their U values are counted
/// out by Mann and Whitney's recurrence (`u_counts`). Otherwise p is from the normal
/// approximation, mean n_a·n_b/2 and variance n_a·n_b/12 · (N + 1 − Σ(t³ − t) / (N(N − 1))) for
/// N values and groups of t tied values, with a continuity correction of 1/2. With ties in small
/// samples that approximation is rough; it is never reported below `min_p`, which no split of
/// these sizes can beat.
///
/// `None` when either sample is empty or a value is not finite.
pub(crate) fn mann_whitney(a: &[f64], b: &[f64]) -> Option<MannWhitney> {
    if a.is_empty() || b.is_empty() || a.iter().chain(b).any(|v| !v.is_finite()) {
        return None;
    }
    let (na, nb) = (a.len(), b.len());
    let all: Vec<f64> = a.iter().chain(b).copied().collect();
    let ranked = rank(&all);
    // The rank sum of a counts, for each value of a, the values below it (ties as 1/2) plus
    // its own rank among a's values: subtracting 1 + 2 + … + n_a leaves U.
    let u = ranked.ranks[..na].iter().sum::<f64>() - (na * (na + 1)) as f64 / 2.0;
    let min_p = (2.0 / binomial(na + nb, na)).min(1.0);
    let exact = ranked.ties.is_empty() && na * nb <= MANN_WHITNEY_EXACT_PAIRS;
    let p = if exact {
        two_sided(&u_counts(na, nb), u.round() as usize)
    } else {
        let n = (na + nb) as f64;
        let tie_term: f64 = ranked.ties.iter().map(|&t| (t.pow(3) - t) as f64).sum();
        let variance = (na * nb) as f64 / 12.0 * (n + 1.0 - tie_term / (n * (n - 1.0)));
        normal_two_sided(u - (na * nb) as f64 / 2.0, 0.5, variance).max(min_p)
    };
    Some(MannWhitney {
        u,
        p,
        min_p,
        n: [na, nb],
        exact,
    })
}

/// How many of the C(m + n, m) orders of m values of a and n of b (all different) give each
/// U (the index, 0 ..= m·n). Mann and Whitney's (1947) recurrence: the largest value is either
/// a's, and is above all n of b's, or b's, and is above none of a's, so
/// count(m, n, U) = count(m − 1, n, U − n) + count(m, n − 1, U).
/// Counts are f64 (exact to 2⁵³, then within a relative 1e-15, as p needs).
fn u_counts(m: usize, n: usize) -> Vec<f64> {
    // by_n[j]: the counts for i values of a and j of b, for the i of the current pass.
    let mut by_n = vec![vec![1.0]; n + 1];
    for i in 1..=m {
        let mut next: Vec<Vec<f64>> = vec![vec![1.0]];
        for j in 1..=n {
            let mut counts = vec![0.0; i * j + 1];
            for (u, c) in by_n[j].iter().enumerate() {
                counts[u + j] += c;
            }
            for (u, c) in next[j - 1].iter().enumerate() {
                counts[u] += c;
            }
            next.push(counts);
        }
        by_n = next;
    }
    by_n.pop().expect("n + 1 distributions")
}

/// Two repetition regimes: the repetitions fell into two tight groups far apart.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Regimes {
    /// The values of the lower group, ascending.
    pub low: Vec<f64>,
    /// The values of the upper group, ascending.
    pub high: Vec<f64>,
    pub low_median: f64,
    pub high_median: f64,
}

/// Finds two regimes among repetitions (e.g. 12 and 33 Gb/s, from two NUMA placements or two
/// paths), where one median would describe neither.
///
/// The rule: sort the values and split them at the largest gap between neighbours. It is two
/// regimes when each side holds at least 2 values (so at least 4 values in all: one odd value is
/// an outlier, not a regime), the upper side's smallest value is at least 1.25 × the lower side's
/// largest, and the gap is at least 3 × the wider side's own range (max − min): two tight
/// clusters far apart, not a sample that is merely spread out. A heuristic, not a test: it
/// gives no probability, and with many values a few disturbed repetitions can make a group.
///
/// `None` when there are no two regimes, or a value is not positive and finite.
pub(crate) fn regimes(samples: &[f64]) -> Option<Regimes> {
    if samples.len() < 4 || samples.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let gap_below = |i: usize| sorted[i] - sorted[i - 1];
    let split = (1..sorted.len()).max_by(|&i, &j| gap_below(i).total_cmp(&gap_below(j)))?;
    let (low, high) = sorted.split_at(split);
    if low.len() < 2 || high.len() < 2 {
        return None;
    }
    let (low_max, high_min) = (low[low.len() - 1], high[0]);
    let range = (low_max - low[0]).max(high[high.len() - 1] - high_min);
    if high_min / low_max < 1.25 || high_min - low_max < 3.0 * range {
        return None;
    }
    Some(Regimes {
        low_median: middle(low),
        high_median: middle(high),
        low: low.to_vec(),
        high: high.to_vec(),
    })
}

/// A monotonic trend across repetitions in the order they ran.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Drift {
    /// Kendall's tau-b between the repetition's index and its value: +1 when every repetition
    /// is above all before it, −1 when below, near 0 without a trend.
    pub tau: f64,
    /// Two-sided p of the Mann–Kendall test: how likely a trend at least this strong is when
    /// the order of the repetitions is pure chance.
    pub p: f64,
    /// (median of the last third − median of the first third) / median of the first third:
    /// +0.1 is 10 % higher at the end.
    pub change: f64,
}

/// Tests repetitions, in the order they ran, for a trend up or down (a device warming up,
/// a cache filling, a clock throttling): the Mann–Kendall test.
///
/// S = Σ over pairs i < j of sign(x_j − x_i). Without ties and with at most
/// [`DRIFT_EXACT_VALUES`] values, p is exact: every order of the values is equally likely, and
/// the orders are counted by their number of discordant pairs (`discordance_counts`).
/// Otherwise p is from the normal approximation, variance
/// (n(n − 1)(2n + 5) − Σ t(t − 1)(2t + 5)) / 18 for groups of t tied values, with a continuity
/// correction of 1 (S moves in steps of 2). The test assumes independent repetitions and says
/// nothing of a trend that goes up and comes back down.
///
/// `None` for fewer than 5 values, a value that is not finite, or a first third whose median
/// is 0 (no relative change).
pub(crate) fn drift(samples: &[f64]) -> Option<Drift> {
    let n = samples.len();
    if n < 5 || samples.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let third = n / 3;
    let first = median(&samples[..third])?;
    if first == 0.0 {
        return None;
    }
    let change = (median(&samples[n - third..])? - first) / first;
    let mut s = 0i64;
    for (i, x) in samples.iter().enumerate() {
        for y in &samples[i + 1..] {
            s += match y.total_cmp(x) {
                Ordering::Greater => 1,
                Ordering::Less => -1,
                Ordering::Equal => 0,
            };
        }
    }
    let ties = rank(samples).ties;
    let pairs = n * (n - 1) / 2;
    let tied_pairs: usize = ties.iter().map(|t| t * (t - 1) / 2).sum();
    if tied_pairs == pairs {
        // Every value equal: no trend, and no tau to speak of.
        return Some(Drift {
            tau: 0.0,
            p: 1.0,
            change,
        });
    }
    let tau = s as f64 / ((pairs * (pairs - tied_pairs)) as f64).sqrt();
    let p = if ties.is_empty() && n <= DRIFT_EXACT_VALUES {
        let discordant = (pairs as i64 - s) / 2;
        two_sided(&discordance_counts(n), discordant as usize)
    } else {
        let tie_term: usize = ties.iter().map(|t| t * (t - 1) * (2 * t + 5)).sum();
        let variance = (n * (n - 1) * (2 * n + 5) - tie_term) as f64 / 18.0;
        normal_two_sided(s as f64, 1.0, variance)
    };
    Some(Drift { tau, p, change })
}

/// How many of the n! orders of n different values have each number of discordant pairs (the
/// index, 0 ..= n(n − 1)/2; S = pairs − 2 × discordant). Built one value at a time: the k-th
/// value lies below 0 ..= k − 1 of the values before it, each as many orders as the others.
fn discordance_counts(n: usize) -> Vec<f64> {
    let mut counts = vec![1.0];
    for k in 2..=n {
        let mut next = vec![0.0; counts.len() + k - 1];
        for (discordant, c) in counts.iter().enumerate() {
            for added in 0..k {
                next[discordant + added] += c;
            }
        }
        counts = next;
    }
    counts
}

/// Values ranked together.
struct Ranked {
    /// The rank of each value, in the values' order: 1 for the smallest; tied values share the
    /// mean of the ranks they span (2, 3 and 4 tied are 3 each).
    ranks: Vec<f64>,
    /// The size of each group of tied values (2 or more).
    ties: Vec<usize>,
}

fn rank(values: &[f64]) -> Ranked {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&i, &j| values[i].total_cmp(&values[j]));
    let mut ranks = vec![0.0; values.len()];
    let mut ties = Vec::new();
    let mut start = 0;
    while start < order.len() {
        let value = values[order[start]];
        let end = start + order[start..].partition_point(|&i| values[i] == value);
        // Ranks start + 1 ..= end, their mean for each.
        let shared = (start + 1 + end) as f64 / 2.0;
        for &i in &order[start..end] {
            ranks[i] = shared;
        }
        if end - start > 1 {
            ties.push(end - start);
        }
        start = end;
    }
    Ranked { ranks, ties }
}

/// C(n, k) as a float (it overflows to infinity only past n ≈ 1000).
fn binomial(n: usize, k: usize) -> f64 {
    (1..=k).fold(1.0, |c, i| c * (n - k + i) as f64 / i as f64)
}

/// The two-sided p of the value at index `at` of a distribution given as a count per value:
/// twice the smaller of the two tails (each including `at`), capped at 1.
fn two_sided(counts: &[f64], at: usize) -> f64 {
    let total: f64 = counts.iter().sum();
    let lower: f64 = counts[..=at].iter().sum();
    let upper: f64 = counts[at..].iter().sum();
    (2.0 * lower.min(upper) / total).min(1.0)
}

/// The two-sided p of a statistic `distance` away from its mean, under the normal approximation
/// with this `variance` and continuity correction: 2 P(Z ≥ (|distance| − correction) / σ),
/// capped at 1. A variance of 0 (every value tied) gives 1.
fn normal_two_sided(distance: f64, correction: f64, variance: f64) -> f64 {
    if variance <= 0.0 {
        return 1.0;
    }
    let z = (distance.abs() - correction).max(0.0) / variance.sqrt();
    (2.0 * normal_upper_tail(z)).min(1.0)
}

/// P(Z ≥ z) for a standard normal Z, to a relative 1e-10 or better, through erfc(z / √2)/2.
/// Below x = z/√2 = 3 from the series of Abramowitz and Stegun 7.1.6,
/// erf x = 2/√π e^(−x²) Σ 2ᵏ x^(2k+1) / (1·3·…·(2k+1)), whose terms are all positive; from 3 on
/// from the continued fraction 7.1.14, erfc x = e^(−x²)/√π / (x + ½/(x + 1/(x + (3/2)/(x + …)))),
/// where 1 − erf would lose the digits.
fn normal_upper_tail(z: f64) -> f64 {
    if z < 0.0 {
        return 1.0 - normal_upper_tail(-z);
    }
    let x = z / SQRT_2;
    let weight = (-x * x).exp() / PI.sqrt();
    if x < 3.0 {
        let (mut term, mut sum) = (x, x);
        let mut k = 0;
        while term > sum * 1e-17 {
            k += 1;
            term *= 2.0 * x * x / (2 * k + 1) as f64;
            sum += term;
        }
        (1.0 - 2.0 * weight * sum) / 2.0
    } else {
        let mut fraction = x;
        for k in (1..=60).rev() {
            fraction = x + k as f64 / 2.0 / fraction;
        }
        weight / fraction / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_is_reproducible_and_follows_the_direction() {
        let a = [10.0, 11.0, 12.0];
        let b = [20.0, 21.0, 22.0];
        let up = ratio_interval(&a, &b, true, "x").unwrap();
        assert_eq!(Some(up), ratio_interval(&a, &b, true, "x"));
        assert!(up[1] < 1.0);
        let down = ratio_interval(&a, &b, false, "x").unwrap();
        assert!(down[0] > 1.0);
    }

    #[test]
    fn medians_skip_values_that_are_not_finite_and_an_empty_set_has_none() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[f64::NAN]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[4.0, f64::NAN, 1.0, 2.0]), Some(2.0));
    }

    #[test]
    fn the_nearest_rank_is_always_one_of_the_values() {
        assert_eq!(nearest_rank(&[], 0.5), None);
        assert_eq!(nearest_rank(&[1.0, 2.0, 3.0, 4.0], 0.5), Some(3.0));
        assert_eq!(nearest_rank(&[1.0, 2.0, 3.0, 4.0], 0.25), Some(2.0));
        assert_eq!(nearest_rank(&[1.0, 2.0, 3.0, 4.0], 1.5), Some(4.0));
    }

    #[test]
    fn unstable_takes_a_spread_over_three_repetitions_or_more() {
        assert!(unstable(Some(0.11), 3));
        assert!(!unstable(Some(0.11), 2));
        assert!(!unstable(Some(0.10), 5));
        assert!(!unstable(None, 5));
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn summary_matches_hand_computed_values() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, squared deviations sum 32, sample variance 32/7.
        let s = Summary::of(&[9.0, 2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0]).unwrap();
        assert_eq!(s.n, 8);
        assert!(close(s.median, 4.5));
        assert!(close(s.mean, 5.0));
        assert!(close(s.stddev.unwrap(), (32.0f64 / 7.0).sqrt()));
        assert!(close(s.cv.unwrap(), (32.0f64 / 7.0).sqrt() / 5.0));
        assert_eq!((s.min, s.max), (2.0, 9.0));
    }

    #[test]
    fn odd_count_median_is_the_middle_value() {
        let s = Summary::of(&[3.0, 1.0, 2.0]).unwrap();
        assert!(close(s.median, 2.0));
        assert!(close(s.stddev.unwrap(), 1.0));
    }

    #[test]
    fn one_value_has_no_spread_and_no_nan() {
        let s = Summary::of(&[7.5]).unwrap();
        assert_eq!(s.median, 7.5);
        assert_eq!(s.stddev, None);
        assert_eq!(s.cv, None);
        assert!(Summary::of(&[]).is_none());
        assert!(Summary::of(&[1.0, f64::NAN]).is_none());
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains("\"stddev\":null"));
    }

    #[test]
    fn histogram_error_is_within_bound_across_magnitudes() {
        let mut h = LatencyHistogram::new();
        let mut value = 1u64;
        while value < 10_000_000_000 {
            h.record(value);
            let mut single = LatencyHistogram::new();
            single.record(value);
            let seen = single.quantile(0.5) as f64;
            let error = (seen - value as f64).abs() / value as f64;
            assert!(
                error <= LatencyHistogram::RELATIVE_ERROR,
                "value {value} read back as {seen}: error {error}"
            );
            value = value * 3 + 7;
        }
        assert!(h.count() > 15);
    }

    #[test]
    fn percentiles_of_a_known_distribution() {
        let mut h = LatencyHistogram::new();
        for ns in 1..=10_000u64 {
            h.record(ns * 100);
        }
        let s = h.summary().unwrap();
        for (got, want) in [
            (s.p50, 500_000.0),
            (s.p90, 900_000.0),
            (s.p99, 990_000.0),
            (s.p999, 999_000.0),
            (s.max, 1_000_000.0),
            (s.mean, 500_050.0),
        ] {
            assert!(
                (got - want).abs() / want <= 0.01,
                "got {got}, want {want} ± 1 %"
            );
        }
        assert_eq!(s.count, 10_000);
    }

    #[test]
    fn merged_histograms_equal_one_histogram_of_all_values() {
        let mut a = LatencyHistogram::new();
        let mut b = LatencyHistogram::new();
        let mut all = LatencyHistogram::new();
        for i in 0..5_000u64 {
            let fast = 1_000 + i;
            let slow = 1_000_000 + 37 * i;
            a.record(fast);
            b.record(slow);
            all.record(fast);
            all.record(slow);
        }
        a.merge(&b);
        assert_eq!(a.summary(), all.summary());
        // The merged median lies between the two groups; averaging the two medians would not
        // give the same value, which is why percentiles are never averaged.
        assert!(a.quantile(0.25) < 10_000 && a.quantile(0.75) > 1_000_000);
    }

    #[test]
    fn normal_tail_matches_erfc_across_both_methods() {
        // P(Z ≥ z) = erfc(z/√2)/2 from Python's math.erfc; 4.2 and 4.3 straddle the switch from
        // the series to the continued fraction (z/√2 = 3 at z ≈ 4.24).
        for (z, want) in [
            (0.0, 0.5),
            (0.5, 0.3085375387259869),
            (1.0, 0.15865525393145707),
            (1.959963984540054, 0.025),
            (3.0, 0.0013498980316300957),
            (4.2, 1.3345749015906346e-05),
            (4.3, 8.539905470991816e-06),
            (5.0, 2.866515718791946e-07),
            (8.0, 6.220960574271819e-16),
            (12.0, 1.776482112077702e-33),
        ] {
            let got = normal_upper_tail(z);
            assert!(
                (got - want).abs() <= 1e-10 * want,
                "z {z}: {got}, want {want}"
            );
        }
        assert!(close(normal_upper_tail(-1.0), 1.0 - 0.15865525393145707));
    }

    #[test]
    fn ranks_share_the_mean_rank_of_a_tie() {
        let ranked = rank(&[5.0, 1.0, 3.0, 3.0, 3.0, 9.0, 1.0]);
        // Sorted: 1 1 | 3 3 3 | 5 | 9 → ranks 1.5, 1.5, 4, 4, 4, 6, 7.
        assert_eq!(ranked.ranks, [6.0, 1.5, 4.0, 4.0, 4.0, 7.0, 1.5]);
        assert_eq!(ranked.ties, [2, 3]);
    }

    #[test]
    fn three_against_three_fully_separated_is_p_one_tenth_at_best() {
        // One split of the C(6, 3) = 20 puts all three lowest values in a: P(U ≤ 0) = 1/20,
        // doubled for two sides.
        let t = mann_whitney(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap();
        assert_eq!(t.u, 0.0);
        assert!(close(t.p, 0.1) && close(t.min_p, 0.1), "{t:?}");
        assert_eq!((t.n, t.exact), ([3, 3], true));
        let swapped = mann_whitney(&[4.0, 5.0, 6.0], &[1.0, 2.0, 3.0]).unwrap();
        assert_eq!(swapped.u, 9.0);
        assert!(close(swapped.p, 0.1));
        // 3 vs 4 cannot reach 0.05 either (2/35); 3 vs 5 can (2/56).
        let min_p = |a: usize, b: usize| mann_whitney(&vec![1.0; a], &vec![2.0; b]).unwrap().min_p;
        assert!(close(min_p(3, 4), 2.0 / 35.0));
        assert!(close(min_p(3, 5), 2.0 / 56.0));
        assert_eq!(min_p(1, 1), 1.0);
    }

    #[test]
    fn four_against_four_fully_separated_is_two_in_seventy() {
        let t = mann_whitney(&[5.0, 6.0, 7.0, 8.0], &[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(t.u, 16.0);
        assert!(
            close(t.p, 2.0 / 70.0) && close(t.min_p, 2.0 / 70.0),
            "{t:?}"
        );
        // One value swapped across (U = 1): 2 × 2/70, no longer below 0.05.
        let t = mann_whitney(&[4.0, 6.0, 7.0, 8.0], &[1.0, 2.0, 3.0, 5.0]).unwrap();
        assert_eq!(t.u, 15.0);
        assert!(close(t.p, 4.0 / 70.0), "{t:?}");
    }

    #[test]
    fn identical_samples_are_p_one() {
        let values = [10.0, 11.0, 12.0, 13.0, 14.0];
        let t = mann_whitney(&values, &values).unwrap();
        assert_eq!(t.u, 12.5);
        assert_eq!(t.p, 1.0);
        assert!(!t.exact, "every value tied with its copy");
        let same = mann_whitney(&[3.0; 4], &[3.0; 6]).unwrap();
        assert_eq!((same.u, same.p), (12.0, 1.0));
    }

    #[test]
    fn ties_use_the_normal_approximation_with_tie_and_continuity_corrections() {
        // a = 1 2 2 3 4, b = 2 3 5 6 7. U of a: 1 beats nothing, each 2 ties b's 2 (½ + ½),
        // 3 beats b's 2 and ties its 3 (1½), 4 beats 2 and 3 (2): U = 4.5. Mean 5·5/2 = 12.5;
        // ties: three 2s (3³ − 3 = 24) and two 3s (6), so the variance is
        // 25/12 · (11 − 30/90) = 22.222…; z = (8 − ½)/√22.222 = 1.590990;
        // p = erfc(z/√2) = 0.1116118 (Python math.erfc).
        let t = mann_whitney(&[1.0, 2.0, 2.0, 3.0, 4.0], &[2.0, 3.0, 5.0, 6.0, 7.0]).unwrap();
        assert_eq!(t.u, 4.5);
        assert!(!t.exact);
        assert!((t.p - 0.11161176829829222).abs() < 1e-9, "{t:?}");
        assert!(close(t.min_p, 2.0 / 252.0));
    }

    #[test]
    fn ten_against_ten_matches_a_brute_force_count() {
        // Python, itertools.combinations over all C(20, 10) = 184756 splits of the 20 values,
        // U counted pair by pair: U = 13 and P(U ≤ 13) doubled = 0.0038862066725843815.
        let a = [10.1, 10.4, 9.8, 10.9, 10.3, 10.6, 10.0, 10.8, 10.2, 10.5];
        let b = [
            10.7, 11.2, 10.65, 11.0, 10.35, 11.4, 10.95, 11.1, 10.45, 11.3,
        ];
        let t = mann_whitney(&a, &b).unwrap();
        assert_eq!(t.u, 13.0);
        assert!(t.exact);
        assert!((t.p - 0.0038862066725843815).abs() < 1e-12, "{t:?}");
    }

    #[test]
    fn large_samples_agree_between_exact_count_and_normal_approximation() {
        // 0..30 against the same shifted by 7.5: U = 253. Python, the same recurrence in exact
        // integers: p = 0.0031935408185939456. The normal approximation is within 0.003.
        let a: Vec<f64> = (0..30).map(f64::from).collect();
        let b: Vec<f64> = a.iter().map(|x| x + 7.5).collect();
        let t = mann_whitney(&a, &b).unwrap();
        assert_eq!((t.u, t.exact), (253.0, true));
        assert!((t.p - 0.0031935408185939456).abs() < 1e-12, "{t:?}");
        let approximate = normal_two_sided(253.0 - 450.0, 0.5, 900.0 * 61.0 / 12.0);
        assert!((approximate - t.p).abs() < 0.003, "{approximate}");
        // 51 against 51: beyond the exact count. Python: U = 946, variance 51·51·103/12 =
        // 22325.25, z = (1300.5 − 946 − 0.5)/√22325.25 = 2.369218; p = erfc(z/√2).
        let a: Vec<f64> = (0..51).map(f64::from).collect();
        let b: Vec<f64> = a.iter().map(|x| x + 7.5).collect();
        let t = mann_whitney(&a, &b).unwrap();
        assert_eq!((t.u, t.exact), (946.0, false));
        assert!((t.p - 0.01782572384160753).abs() < 1e-9, "{t:?}");
    }

    #[test]
    fn empty_or_not_finite_samples_have_no_test() {
        assert!(mann_whitney(&[], &[1.0]).is_none());
        assert!(mann_whitney(&[1.0], &[]).is_none());
        assert!(mann_whitney(&[1.0, f64::NAN], &[2.0]).is_none());
        assert!(mann_whitney(&[1.0], &[f64::INFINITY]).is_none());
    }

    #[test]
    fn two_tight_groups_far_apart_are_two_regimes() {
        let r = regimes(&[12.0, 12.3, 33.0, 32.8, 12.1]).unwrap();
        assert_eq!(r.low, [12.0, 12.1, 12.3]);
        assert_eq!(r.high, [32.8, 33.0]);
        assert!(
            close(r.low_median, 12.1) && close(r.high_median, 32.9),
            "{r:?}"
        );
        // Two groups without any spread of their own.
        assert!(regimes(&[12.0, 33.0, 12.0, 33.0]).is_some());
        // A gap 18 beside a group spread over 2: still 3 × 2 ≤ 18.
        assert!(regimes(&[10.0, 12.0, 30.0, 31.0]).is_some());
    }

    #[test]
    fn spread_outliers_and_close_groups_are_not_regimes() {
        // Evenly spread: every gap 1, within each side's range.
        assert!(regimes(&[10.0, 11.0, 12.0, 13.0, 14.0]).is_none());
        // One outlier: a side of one value.
        assert!(regimes(&[10.0, 10.1, 10.2, 20.0]).is_none());
        // Tight but only 20 % apart.
        assert!(regimes(&[10.0, 10.0, 12.0, 12.0]).is_none());
        // The lower group spread over 7, the gap only 13 < 21.
        assert!(regimes(&[10.0, 17.0, 30.0, 31.0]).is_none());
        assert!(regimes(&[12.0, 12.0, 33.0]).is_none());
        assert!(regimes(&[12.0, 12.0, 33.0, -33.0]).is_none());
        assert!(regimes(&[12.0, 12.0, 33.0, f64::NAN]).is_none());
    }

    #[test]
    fn a_steady_rise_is_a_drift() {
        // Every pair rises: S = 15 of 15, tau 1; only 1 of the 6! = 720 orders reaches it,
        // doubled: p = 2/720. The last third's median 14.5 against the first third's 10.5.
        let d = drift(&[10.0, 11.0, 12.0, 13.0, 14.0, 15.0]).unwrap();
        assert!(close(d.tau, 1.0));
        assert!(close(d.p, 2.0 / 720.0), "{d:?}");
        assert!(close(d.change, 4.0 / 10.5));
        let down = drift(&[15.0, 14.0, 13.0, 12.0, 11.0, 10.0]).unwrap();
        assert!(close(down.tau, -1.0) && close(down.p, 2.0 / 720.0));
        assert!(close(down.change, -4.0 / 14.5));
    }

    #[test]
    fn a_shuffled_flat_sample_has_no_drift() {
        // Python, all 8! orders: S = 2, tau 2/28, p = 0.9048611111111111.
        let d = drift(&[10.1, 9.9, 10.2, 9.8, 10.0, 10.3, 9.95, 10.05]).unwrap();
        assert!(close(d.tau, 2.0 / 28.0));
        assert!((d.p - 0.9048611111111111).abs() < 1e-12, "{d:?}");
        assert!(close(d.change, 0.0), "{d:?}");
    }

    #[test]
    fn a_drift_with_ties_uses_the_normal_approximation() {
        // 10 10 11 11 12 12 13: S = 18 (21 pairs, 3 tied); variance
        // (7·6·19 − 3 · 2·1·9)/18 = 41.333; z = (18 − 1)/√41.333 = 2.644227;
        // p = erfc(z/√2) = 0.008187776844595674; tau-b = 18/√(21 · 18) = 0.9258201.
        let d = drift(&[10.0, 10.0, 11.0, 11.0, 12.0, 12.0, 13.0]).unwrap();
        assert!((d.p - 0.008187776844595674).abs() < 1e-9, "{d:?}");
        assert!((d.tau - 0.9258200997725514).abs() < 1e-12, "{d:?}");
        let flat = drift(&[7.0; 6]).unwrap();
        assert_eq!((flat.tau, flat.p, flat.change), (0.0, 1.0, 0.0));
    }

    #[test]
    fn too_few_or_unusable_repetitions_have_no_drift() {
        assert!(drift(&[1.0, 2.0, 3.0, 4.0]).is_none());
        assert!(drift(&[1.0, 2.0, 3.0, 4.0, f64::NAN]).is_none());
        assert!(
            drift(&[0.0, 2.0, 3.0, 4.0, 5.0]).is_none(),
            "no relative change from 0"
        );
    }

    #[test]
    fn exact_counts_sum_to_every_split_and_order() {
        let total = |c: Vec<f64>| c.iter().sum::<f64>();
        assert_eq!(total(u_counts(5, 5)), 252.0);
        assert_eq!(total(u_counts(2, 7)), 36.0);
        assert_eq!(total(discordance_counts(6)), 720.0);
        // The U distribution is symmetric around m·n/2.
        let c = u_counts(4, 6);
        assert!(c.iter().eq(c.iter().rev()));
    }
}
