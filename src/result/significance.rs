//! Whether two runs' repetitions of one case differ beyond the noise: the rule of `peakbench
//! compare` and of the report's change columns.

use super::BenchResult;
use crate::stats::mann_whitney;

/// What the repetitions of two runs say about one change (the rule of `peakbench compare`): the
/// two-sided Mann–Whitney U test of the two runs' repetitions at α = [`Significance::ALPHA`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Significance {
    /// p < α: the two runs' repetitions differ beyond what chance gives.
    Beyond { p: f64 },
    /// p ≥ α, though these many repetitions could have shown a change.
    Within { p: f64 },
    /// Too few repetitions for any change to reach p < α (3 vs 3 gives at best p = 0.1), or a
    /// run without repetitions: nothing can be said.
    Unknown { n: [usize; 2], min_p: f64 },
}

impl Significance {
    /// The significance level: a change is beyond the noise when p is below it.
    pub(crate) const ALPHA: f64 = 0.05;

    /// The significance in a table cell, e.g. "BEYOND noise (p 0.008)", "within noise (p 0.41)",
    /// "too few repetitions (3 vs 3: p ≥ 0.10)".
    pub(crate) fn text(self) -> String {
        match self {
            Significance::Beyond { p } => format!("BEYOND noise (p {})", format_p(p)),
            Significance::Within { p } => format!("within noise (p {})", format_p(p)),
            Significance::Unknown { n: [a, b], min_p } if min_p < 1.0 => {
                format!("too few repetitions ({a} vs {b}: p ≥ {})", format_p(min_p))
            }
            Significance::Unknown { n: [a, b], .. } => format!("too few repetitions ({a} vs {b})"),
        }
    }

    pub(crate) fn is_beyond(self) -> bool {
        matches!(self, Significance::Beyond { .. })
    }
}

/// A p-value in 2 decimals, 3 below 0.1 (so 0.046 does not read as 0.05), "< 0.001" below that.
fn format_p(p: f64) -> String {
    if p < 0.001 {
        "< 0.001".into()
    } else if p < 0.1 {
        format!("{p:.3}")
    } else {
        format!("{p:.2}")
    }
}

/// Tests B's repetitions against A's (their `samples`) with the Mann–Whitney U test: beyond the
/// noise at p < 0.05, within it at p ≥ 0.05, unknown when no outcome could reach 0.05 with these
/// numbers of repetitions (3 vs 3 gives 0.1 at best; 4 vs 4 reaches 0.029 only when no
/// repetition of one run comes near the other's) or a run has none.
pub(crate) fn significance(a: &BenchResult, b: &BenchResult) -> Significance {
    let n = [a.samples.len(), b.samples.len()];
    match mann_whitney(&a.samples, &b.samples) {
        Some(t) if t.min_p >= Significance::ALPHA => Significance::Unknown { n, min_p: t.min_p },
        Some(t) if t.p < Significance::ALPHA => Significance::Beyond { p: t.p },
        Some(t) => Significance::Within { p: t.p },
        None => Significance::Unknown { n, min_p: 1.0 },
    }
}
