//! Noise: repetitions that do not give one figure. Two regimes (two tight clusters far apart:
//! 12 and 33 Gb/s), a drift across the series (a Mann–Kendall trend, p < 0.05, over 10 % from
//! the first third to the last), or a coefficient of variation over [`super::UNSTABLE_CV`].

use crate::result::{BenchResult, Cause, Evidence};
use crate::units::format_value;

/// Why a result's repetitions do not give one figure, and what in them shows it.
pub(super) struct Unstable {
    /// In a few words, e.g. "two regimes: 3 repetitions near 12.1 and 2 near 33.0 Gb/s".
    pub what: String,
    /// The noise itself as causes (the regimes, the drift), beside those read on the machine.
    pub causes: Vec<Cause>,
}

/// A drift is named when the trend test rejects at this level …
const DRIFT_P: f64 = 0.05;
/// … and the last third's median is this far from the first third's.
const DRIFT_CHANGE: f64 = 0.10;

/// Whether `r`'s repetitions are unstable, and how.
pub(super) fn unstable(r: &BenchResult) -> Option<Unstable> {
    let samples = &r.samples;
    let shown = |v: f64| format!("{} {}", format_value(v), r.unit);
    let listed = || {
        samples
            .iter()
            .map(|v| format_value(*v))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(regimes) = crate::stats::regimes(samples) {
        let what = format!(
            "two regimes: {} repetitions near {} and {} near {}",
            regimes.low.len(),
            shown(regimes.low_median),
            regimes.high.len(),
            shown(regimes.high_median)
        );
        return Some(Unstable {
            causes: vec![Cause {
                kind: "two-regimes".into(),
                value: Some(regimes.high_median / regimes.low_median),
                unit: "×".into(),
                text: format!("the repetitions fall in {what}"),
                evidence: vec![Evidence::new("the repetitions, in order", listed())],
                bound: None,
                explains: None,
                remedy: "find what switches between the regimes (a clock, a placement, another \
                         job); pin the threads with --pin and run again"
                    .into(),
            }],
            what,
        });
    }
    if let Some(drift) = crate::stats::drift(samples)
        && drift.p < DRIFT_P
        && drift.change.abs() >= DRIFT_CHANGE
    {
        let what = format!(
            "the repetitions drift {:+.0} % from the first third to the last (Mann–Kendall \
             p = {:.3})",
            drift.change * 100.0,
            drift.p
        );
        return Some(Unstable {
            causes: vec![Cause {
                kind: "drift".into(),
                value: Some(drift.change * 100.0),
                unit: "%".into(),
                text: what.clone(),
                evidence: vec![Evidence::new("the repetitions, in order", listed())],
                bound: None,
                explains: None,
                remedy: "a warming or throttling clock, a filling cache or disk: lengthen the \
                         warm-up (--warmup) and run again"
                    .into(),
            }],
            what,
        });
    }
    let cv = r.stats.cv?;
    crate::stats::unstable(Some(cv), samples.len()).then(|| Unstable {
        what: format!(
            "the repetitions vary by {:.1} % (CV over {:.0} %): {}",
            cv * 100.0,
            super::UNSTABLE_CV * 100.0,
            listed()
        ),
        causes: Vec::new(),
    })
}
