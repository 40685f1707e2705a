//! The gate: whether one case of a check failed, from the findings' judgement of it against
//! the baseline.
//!
//! What a gate compares is the spread between runs, not the repetitions of one run: a case
//! fails only when the findings' Mann–Whitney U test of its repetitions against the baseline's
//! rejects at p < [`ALPHA`] with the median on the slow side, *and* its median is below the
//! slowest of the baseline's learning runs by more than the tolerance (in the direction of
//! performance). A case whose runs fell into two regimes is thus learned with both as normal.
//! A case whose slowest learning run, less the tolerance, is below half its runs' median could
//! not be caught even at half its speed: it is [`Status::Ungateable`], never failed.
//!
//! Where the findings found the case held by a limit the machine imposed (a quota, a throttle,
//! a shaper), that limit is its cause, whatever the baseline's runs spread over: it is judged by
//! the fixed tolerance against the baseline's pooled median, as is every case of a baseline
//! saved before run medians were kept.
//!
//! A case whose repetitions are unstable is reported as unstable with its spread, not failed,
//! unless `--strict`, or the limit imposed, or even the upper end of the ratio's 95 % interval
//! is beyond the tolerance: a spread cannot account for such a gap. The ratio's 95 % interval
//! is a bootstrap of the ratio of medians (both samples resampled), reported with each verdict.

use serde::Serialize;

use crate::evidence::{PlacementProbe, same_placement};
use crate::findings::ALPHA;
use crate::history::baseline::{BaselineCase, RunSpread};
use crate::history::inventory::Loss;
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
    /// The baseline's own runs spread so far that no slowdown short of more than halving could
    /// fail it at this tolerance: reported with that spread, never failed (unless a limit the
    /// machine imposed holds it).
    Ungateable,
    /// Nothing to judge it against: the baseline has no such case, or its samples cannot be
    /// compared.
    Unjudged,
    /// A case of the baseline this check's plan did not run: a failure where the node lost
    /// hardware (the plan shrank with it), else reported only (the plan changed).
    Missing,
}

impl Status {
    /// Its name, as the JSON and the Prometheus label write it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Unstable => "unstable",
            Status::Ungateable => "ungateable",
            Status::Unjudged => "unjudged",
            Status::Missing => "missing",
        }
    }
}

/// The baseline's figures for a case.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct BaselineFigures {
    pub median: f64,
    /// Coefficient of variation of its samples.
    pub cv: Option<f64>,
    pub samples: usize,
    pub runs: Vec<i64>,
    /// What its learning runs' medians spread over; absent for a baseline saved before they
    /// were kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spread: Option<RunSpread>,
}

impl BaselineFigures {
    /// The figures of the baseline's case `base`; `None` without samples.
    fn of(base: &BaselineCase) -> Option<BaselineFigures> {
        let summary = Summary::of(&base.samples)?;
        Some(BaselineFigures {
            median: summary.median,
            cv: summary.cv,
            samples: base.samples.len(),
            runs: base.runs.clone(),
            spread: base.spread(),
        })
    }
}

/// Which rule judged a case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Rule {
    /// Beyond the tolerance below the slowest learning run.
    LearnedSpread,
    /// Beyond the tolerance below the pooled median: a baseline without run medians.
    PooledMedian,
    /// Beyond the tolerance below the pooled median: a limit the machine imposed holds it.
    Imposed,
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
    /// Performance against the slowest learning run's median.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slowest_ratio: Option<f64>,
    /// 95 % bootstrap interval of `ratio`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<[f64; 2]>,
    /// Two-sided p of the Mann–Whitney U test against the baseline's samples.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p: Option<f64>,
    /// The rule that judged it; absent when it was not judged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<Rule>,
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
        slowest_ratio: None,
        interval: None,
        p: None,
        rule: None,
        remeasured: false,
        causes: finding.map(|f| f.causes.clone()).unwrap_or_default(),
        line: String::new(),
    };
    let Some(base) = base else {
        v.line = format!("{}: not in the baseline: not judged", v.id);
        return v;
    };
    let placement = r.evidence.as_ref().and_then(|e| e.placement.as_ref());
    let past = finding.and_then(|f| {
        f.expectations
            .iter()
            .find(|e| e.against == Against::Past && e.test.is_some())
    });
    let (Some(past), Some(figures)) = (past, BaselineFigures::of(base)) else {
        v.line = format!(
            "{}: its repetitions cannot be compared with the baseline's",
            v.id
        );
        return v;
    };
    let p = past.test.as_ref().map_or(1.0, |t| t.p);
    let up = higher_is_better(&r.metric, &r.unit);
    v.slowest_ratio = figures.spread.as_ref().map(|s| {
        if up {
            v.value / s.slowest
        } else {
            s.slowest / v.value
        }
    });
    v.baseline = Some(figures);
    v.ratio = Some(past.ratio);
    v.p = Some(p);
    v.interval = crate::stats::ratio_interval(&r.samples, &base.samples, up, &r.id);
    let (status, rule) = status_of(&v, finding, gate);
    v.status = status;
    v.rule = Some(rule);
    if status == Status::Fail
        && let Some(cause) = placement.and_then(|p| placement_cause(p, base))
    {
        // Against the baseline's placements, in place of the findings' against this run's.
        v.causes.retain(|c| c.kind != "placement");
        v.causes.insert(0, cause);
    }
    v.line = line(&v, gate);
    v
}

/// The fewest runs of the baseline in this check's placement that it is judged against alone.
pub(crate) const MIN_PLACED_RUNS: usize = 3;

/// The baseline's case with only the runs whose placement was this check's (`here`), where the
/// runs read one and at least [`MIN_PLACED_RUNS`] of them (not all) were in it: a case judged
/// against the runs in its own placement, by the test and by the learned spread, not against
/// a spread another placement made. Their samples are cut out where every run gave as many
/// (else the test keeps the pooled ones). `None` where nothing is to be left out.
pub(crate) fn in_placement(
    base: &BaselineCase,
    here: Option<&PlacementProbe>,
) -> Option<BaselineCase> {
    let here = here?;
    if base.placements.len() != base.runs.len() || base.run_medians.len() != base.runs.len() {
        return None;
    }
    let same: Vec<usize> = (0..base.runs.len())
        .filter(|&i| same_placement(base.placements[i], here.ns()))
        .collect();
    if same.len() < MIN_PLACED_RUNS || same.len() == base.runs.len() {
        return None;
    }
    let mut kept = base.clone();
    kept.runs = same.iter().map(|&i| base.runs[i]).collect();
    kept.run_medians = same.iter().map(|&i| base.run_medians[i]).collect();
    kept.placements = same.iter().map(|&i| base.placements[i]).collect();
    let each = base.samples.len() / base.runs.len();
    if each > 0 && each * base.runs.len() == base.samples.len() {
        kept.samples = same
            .iter()
            .flat_map(|&i| base.samples[i * each..(i + 1) * each].iter().copied())
            .collect();
    }
    Some(kept)
}

/// The placement as the cause of a failure: where the CPUs the case used sat unlike in every
/// run of the baseline that read it, or moved during the case.
fn placement_cause(here: &PlacementProbe, base: &BaselineCase) -> Option<Cause> {
    let unlike = !base.placements.is_empty()
        && !base
            .placements
            .iter()
            .any(|&p| same_placement(p, here.ns()));
    if !unlike && !here.moved() {
        return None;
    }
    let (place, _) = crate::sysinfo::c2c::classify(here.ns(), &[]);
    let [a, b] = here.cpus;
    let then = match crate::stats::median(&base.placements) {
        Some(typical) => {
            let (was, _) = crate::sysinfo::c2c::classify(typical, &[]);
            format!(
                "; the baseline's {} runs read {} ns at the median ({})",
                base.placements.len(),
                format_value(typical),
                was.name()
            )
        }
        None => String::new(),
    };
    let moved = if here.moved() {
        " and moved during the case"
    } else {
        ""
    };
    Some(Cause {
        kind: "placement".into(),
        value: Some(here.ns()),
        unit: "ns".into(),
        text: format!(
            "CPUs {a} and {b} sat in {}{moved}: a cache line's round trip {} ns before the case, \
             {} after{then}",
            place.name(),
            format_value(here.before_ns),
            format_value(here.after_ns),
        ),
        evidence: vec![crate::result::Evidence::new(
            format!("cache-line round trip CPU {a} <-> {b} (sysinfo::c2c, 0.1 s before and after)"),
            format!(
                "{} ns, {} ns",
                format_value(here.before_ns),
                format_value(here.after_ns)
            ),
        )],
        bound: None,
        explains: None,
        remedy: "inside a guest the hypervisor places the vCPUs: ask for them pinned to host \
                 cores (libvirt's vcpupin, a dedicated-CPU flavour), or learn the baseline with \
                 runs in both placements"
            .into(),
    })
}

/// The verdict on the baseline's case `base`, which this check did not run; `lost` is what
/// the node lost since the baseline (the inventory's losses, and the disk cases' place), the
/// likely reason: for a disk case the place first, for any other case an item of hardware.
pub(crate) fn missing_case(base: &BaselineCase, lost: &[Loss]) -> CaseVerdict {
    let place = lost
        .iter()
        .find(|l| !l.is_hardware())
        .filter(|_| base.subsystem == "disk");
    let line = match place.or_else(|| lost.iter().find(|l| l.is_hardware())) {
        Some(loss) => format!(
            "MISSING {}: the plan could not run it on what is left of the node: {}",
            base.id, loss.text
        ),
        None => format!(
            "missing {}: in the baseline, not in this check's plan (another --config, or a \
             tool, path, server or space it needs is absent: the run's notes say which): not \
             judged",
            base.id
        ),
    };
    CaseVerdict {
        id: base.id.clone(),
        label: base.label.clone(),
        subsystem: base.subsystem.clone(),
        unit: base.unit.clone(),
        status: Status::Missing,
        value: f64::NAN,
        cv: None,
        repetitions: 0,
        baseline: BaselineFigures::of(base),
        ratio: None,
        slowest_ratio: None,
        interval: None,
        p: None,
        rule: None,
        remeasured: false,
        causes: Vec::new(),
        line,
    }
}

/// The cause a check names for a failure the findings found none for, where the node lost
/// hardware since its baseline: every item lost, with where it was read.
pub(crate) fn lost_hardware(lost: &[Loss]) -> Cause {
    let items: Vec<&str> = lost.iter().map(|l| l.text.as_str()).collect();
    Cause {
        kind: "lost-hardware".into(),
        value: None,
        unit: String::new(),
        text: format!(
            "the node has lost hardware since its baseline ({}): the case runs on less",
            items.join("; ")
        ),
        evidence: lost
            .iter()
            .map(|l| crate::result::Evidence::new(l.source.clone(), l.text.clone()))
            .collect(),
        bound: None,
        explains: None,
        remedy: "bring back what was lost (a CPU online or in the cpuset, a DIMM, a disk, a \
                 NIC's link), or learn a baseline of the node as it is now"
            .into(),
    }
}

/// The status of a case whose figures against the baseline `v` holds, and the rule that gave
/// it (the module's doc says why).
fn status_of(v: &CaseVerdict, finding: Option<&Finding>, gate: Gate) -> (Status, Rule) {
    let unstable = finding.is_some_and(|f| f.verdict == Verdict::Unstable);
    let imposed =
        finding.is_some_and(|f| f.expectations.iter().any(|e| e.against == Against::Imposed));
    let limit = 1.0 - gate.tolerance;
    let ratio = v.ratio.unwrap_or(1.0);
    let spread = v.baseline.as_ref().and_then(|b| b.spread.as_ref());
    let significant = v.p.unwrap_or(1.0) < ALPHA && ratio < 1.0;
    // `scale` takes a ratio to the pooled median to one to the slowest run.
    let (rule, against, scale) = match v.slowest_ratio {
        Some(slowest) if !imposed && ratio > 0.0 => (Rule::LearnedSpread, slowest, slowest / ratio),
        _ if imposed => (Rule::Imposed, ratio, 1.0),
        _ => (Rule::PooledMedian, ratio, 1.0),
    };
    let slower = significant && against < limit;
    let ungateable = spread.is_some_and(|s| s.ungateable(gate.tolerance));
    // However spread its repetitions, a case whose whole 95 % interval lies beyond the
    // tolerance is slower than the baseline: its spread cannot account for the gap.
    let beyond_spread = v.interval.is_some_and(|[_, high]| high * scale < limit);
    let status =
        if slower && (imposed || (!ungateable && (!unstable || gate.strict || beyond_spread))) {
            Status::Fail
        } else if ungateable {
            Status::Ungateable
        } else if unstable {
            Status::Unstable
        } else {
            Status::Pass
        };
    (status, rule)
}

/// The verdict in one line (no line break), as a drain reason or a CI log shows it.
fn line(v: &CaseVerdict, gate: Gate) -> String {
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
    let ratio = v.ratio.unwrap_or(f64::NAN);
    // A latency's ratio is inverted (below 1 is slower): "2.00 of the baseline's median 10 µs"
    // would read as twice the latency, so its line gives both latencies.
    let against = if higher_is_better("", &v.unit) {
        format!(
            "{ratio:.2} of the baseline's median {} {}",
            format_value(base.median),
            v.unit
        )
    } else {
        format!(
            "{ratio:.2} of the baseline's speed, {} {} against its median {} {} (lower is \
             faster)",
            format_value(v.value),
            v.unit,
            format_value(base.median),
            v.unit
        )
    };
    let figures = format!(
        "{against} ({}, {} samples){interval}, Mann-Whitney p = {}{}",
        pct(base.cv),
        base.samples,
        format_p(v.p.unwrap_or(1.0)),
        rule_words(v),
    );
    let cause = v
        .causes
        .first()
        .map(|c| format!("; cause: {}", short_cause(c)))
        .unwrap_or_else(|| "; no cause found on this machine".into());
    match (v.status, &base.spread) {
        (Status::Fail, _) => format!("FAIL {}: {figures}{cause}", v.id),
        (Status::Unstable, _) => format!(
            "UNSTABLE {}: repetitions spread ({} over {}); {figures}",
            v.id,
            pct(v.cv),
            v.repetitions
        ),
        (Status::Ungateable, Some(s)) => format!(
            "UNGATEABLE {}: its {} learning runs spread from {} to {} {} (the slowest {:.2} of \
             their median): at a tolerance of {:.0} % not even a halving would fail it; \
             {figures}",
            v.id,
            s.runs,
            format_value(s.slowest),
            format_value(s.fastest),
            v.unit,
            s.slowest_share,
            gate.tolerance * 100.0,
        ),
        (Status::Pass, _) => format!("ok {}: {figures}", v.id),
        (Status::Ungateable, None) => format!("UNGATEABLE {}: {figures}", v.id),
        (Status::Unjudged, _) => format!("unjudged {}: {figures}", v.id),
        (Status::Missing, _) => v.line.clone(),
    }
}

/// How the rule that judged the case shows in its line.
fn rule_words(v: &CaseVerdict) -> String {
    let runs = v
        .baseline
        .as_ref()
        .and_then(|b| b.spread.as_ref())
        .map_or(0, |s| s.runs);
    match (v.rule, v.slowest_ratio) {
        (Some(Rule::LearnedSpread), Some(slowest)) => {
            format!(", {slowest:.2} of the slowest of its {runs} learning runs")
        }
        (Some(Rule::Imposed), _) => {
            "; judged by the pooled median: the machine imposes a limit on it".into()
        }
        (Some(Rule::PooledMedian), _) => {
            "; judged by the pooled median: the baseline predates learned spreads (save it \
             again)"
                .into()
        }
        _ => String::new(),
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
