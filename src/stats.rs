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
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
