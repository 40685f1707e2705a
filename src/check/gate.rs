//! The gate: whether one case of a check failed, from the findings' judgement of it against
//! the baseline.
//!
//! A case fails only when both hold: the findings' Mann–Whitney U test of its repetitions
//! against the baseline's rejects at p < [`ALPHA`] with the median on the slow side, and the
//! ratio of medians is below 1 − tolerance. A case whose repetitions are unstable is reported as
//! unstable with its spread, not failed, unless `--strict`; unless the findings found it held
//! by a limit the machine imposed (a quota, a throttle, a shaper): then the spread is that
//! limit's doing and the case fails with it; or unless even the upper end of the ratio's 95 %
//! interval is beyond the tolerance: a spread cannot account for such a gap. The ratio's 95 % interval is a bootstrap of the
//! ratio of medians (both samples resampled), reported with each verdict.

use serde::Serialize;

use crate::findings::ALPHA;
use crate::history::baseline::BaselineCase;
use crate::result::{Against, BenchResult, Cause, Finding, Verdict, higher_is_better};
use crate::stats::Summary;
use crate::units::format_value;

/// How strict the gate is.
#[derive(Clone, Copy, Debug, Serialize)]
pub(crate) struct Gate {
    /// A case is slower in practice below 1 − tolerance of the baseline's median.
    pub tolerance: f64,
    /// Fail unstable cases too.
    pub strict: bool,
}

/// What a case is, by the gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Status {
    /// Not slower than its baseline (or not by enough, or not provably).
    Pass,
    /// Slower than its baseline, by the test and beyond the tolerance.
    Fail,
    /// Its repetitions spread too much to judge.
    Unstable,
    /// Nothing to judge it against: the baseline has no such case, or its samples cannot be
    /// compared.
    Unjudged,
}

/// The baseline's figures for a case.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct BaselineFigures {
    pub median: f64,
    /// Coefficient of variation of its samples.
    pub cv: Option<f64>,
    pub samples: usize,
    pub runs: Vec<i64>,
}

/// The gate's verdict on one case.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct CaseVerdict {
    pub id: String,
    pub label: String,
    pub subsystem: String,
    pub unit: String,
    pub status: Status,
    /// This check's median.
    pub value: f64,
    /// The coefficient of variation of this check's repetitions.
    pub cv: Option<f64>,
    pub repetitions: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineFigures>,
    /// Performance against the baseline's median (below 1 is slower; a latency's is inverted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    /// 95 % bootstrap interval of `ratio`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<[f64; 2]>,
    /// Two-sided p of the Mann–Whitney U test against the baseline's samples.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p: Option<f64>,
    /// Whether the case was measured a second time, with more repetitions, before this verdict.
    pub remeasured: bool,
    /// The causes the findings name, with their evidence and remedy.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<Cause>,
    /// The verdict in one line.
    pub line: String,
}

/// The gate's verdict on result `r`, judged by the findings (`finding`, whose past is the
/// baseline) against the baseline's case `base`.
pub(crate) fn gate_case(
    r: &BenchResult,
    base: Option<&BaselineCase>,
    finding: Option<&Finding>,
    gate: Gate,
) -> CaseVerdict {
    let here = Summary::of(&r.samples);
    let mut v = CaseVerdict {
        id: r.id.clone(),
        label: finding
            .map(|f| f.label.clone())
            .unwrap_or_else(|| r.op.clone()),
        subsystem: r.subsystem.to_string(),
        unit: r.unit.clone(),
        status: Status::Unjudged,
        value: here.as_ref().map_or(r.value, |s| s.median),
        cv: here.as_ref().and_then(|s| s.cv),
        repetitions: r.samples.len(),
        baseline: None,
        ratio: None,
        interval: None,
        p: None,
        remeasured: false,
        causes: finding.map(|f| f.causes.clone()).unwrap_or_default(),
        line: String::new(),
    };
    let Some(base) = base else {
        v.line = format!("{}: not in the baseline: not judged", v.id);
        return v;
    };
    let past = finding.and_then(|f| {
        f.expectations
            .iter()
            .find(|e| e.against == Against::Past && e.test.is_some())
    });
    let (Some(past), Some(summary)) = (past, Summary::of(&base.samples)) else {
        v.line = format!(
            "{}: its repetitions cannot be compared with the baseline's",
            v.id
        );
        return v;
    };
    let p = past.test.as_ref().map_or(1.0, |t| t.p);
    v.baseline = Some(BaselineFigures {
        median: summary.median,
        cv: summary.cv,
        samples: base.samples.len(),
        runs: base.runs.clone(),
    });
    v.ratio = Some(past.ratio);
    v.p = Some(p);
    v.interval = crate::stats::ratio_interval(
        &r.samples,
        &base.samples,
        higher_is_better(&r.metric, &r.unit),
        &r.id,
    );
    let slower = p < ALPHA && past.ratio < 1.0 - gate.tolerance;
    let unstable = finding.is_some_and(|f| f.verdict == Verdict::Unstable);
    let imposed =
        finding.is_some_and(|f| f.expectations.iter().any(|e| e.against == Against::Imposed));
    // However spread its repetitions, a case whose whole 95 % interval lies beyond the
    // tolerance is slower than the baseline: its spread cannot account for the gap.
    let beyond_spread = v
        .interval
        .is_some_and(|[_, high]| high < 1.0 - gate.tolerance);
    v.status = if slower && (!unstable || gate.strict || imposed || beyond_spread) {
        Status::Fail
    } else if unstable {
        Status::Unstable
    } else {
        Status::Pass
    };
    v.line = line(&v);
    v
}

/// The verdict in one line (no line break), as a drain reason or a CI log shows it.
fn line(v: &CaseVerdict) -> String {
    let Some(base) = &v.baseline else {
        return v.line.clone();
    };
    let pct = |cv: Option<f64>| {
        cv.map(|cv| format!("CV {:.1} %", cv * 100.0))
            .unwrap_or_else(|| "CV n/a".into())
    };
    let interval = v
        .interval
        .map(|[lo, hi]| format!(" [95 % CI {lo:.2}-{hi:.2}]"))
        .unwrap_or_default();
    let figures = format!(
        "{:.2} of the baseline's median {} {} ({}, {} samples){interval}, Mann-Whitney p = {}",
        v.ratio.unwrap_or(f64::NAN),
        format_value(base.median),
        v.unit,
        pct(base.cv),
        base.samples,
        format_p(v.p.unwrap_or(1.0)),
    );
    let cause = v
        .causes
        .first()
        .map(|c| format!("; cause: {}", short_cause(c)))
        .unwrap_or_else(|| "; no cause found on this machine".into());
    let head = match v.status {
        Status::Fail => "FAIL",
        Status::Unstable => "UNSTABLE",
        Status::Pass => "ok",
        Status::Unjudged => "unjudged",
    };
    match v.status {
        Status::Fail => format!("{head} {}: {figures}{cause}", v.id),
        Status::Unstable => format!(
            "{head} {}: repetitions spread ({} over {}); {figures}",
            v.id,
            pct(v.cv),
            v.repetitions
        ),
        _ => format!("{head} {}: {figures}", v.id),
    }
}

/// A cause in a few words: its kind and value.
pub(crate) fn short_cause(c: &Cause) -> String {
    match c.value {
        Some(value) => format!("{} {} {}", c.kind, format_value(value), c.unit)
            .trim_end()
            .to_string(),
        None => c.kind.clone(),
    }
}

/// A p-value in at most a few characters: 0.003, 2e-05.
pub(crate) fn format_p(p: f64) -> String {
    if p >= 0.001 {
        format!("{p:.3}")
    } else {
        format!("{p:.0e}")
    }
}

#[cfg(test)]
mod tests;
