//! Findings: every result judged against its peak, the standard tool, its past and its fleet,
//! and every shortfall explained by what the machine showed while it ran.
//!
//! Judging reads only the document (its results, their evidence, the run's evidence) and the
//! earlier runs of the same hardware from the history, never the machine: `peakbench explain`
//! judges a stored or imported run as the run itself did. The rules and their thresholds are
//! in `docs/findings.md`; each lives in one place here:
//!
//! - [`physics`]: the classes of case and their bands (the peak × the efficiency a well-run
//!   machine reaches), and the ceilings nothing may pass;
//! - [`past`]: the same case on the same hardware fingerprint in the history, by a Mann–Whitney
//!   U test of the repetitions;
//! - [`causes`]: what the machine imposed (a CPU quota, a cpuset, other processes, steal, an
//!   I/O throttle, a shaping qdisc, …), each with the bound it puts on the result;
//! - [`noise`]: two regimes, a drift, a spread over the threshold;
//! - [`summary`]: one line per subsystem.

mod boundaries;
mod causes;
pub(crate) mod explain;
mod noise;
mod past;
mod physics;
mod summary;

use std::time::Instant;

pub(crate) use boundaries::{MEMORY_STEP, STEP_SPAN, memory_step, private_cache_bytes};
pub(crate) use past::{ALPHA, Index as PastIndex, PastRun, past_runs};

use crate::result::{
    Against, BenchResult, Cause, Expectation, Finding, Findings, NO_CAUSE, Report, Verdict,
    higher_is_better, missing_kinds,
};
use crate::units::format_value;

/// Judges every result of `report` against its physics, its reference, `past` (earlier runs
/// of the same hardware, newest first) and, in a cluster run, the other hosts.
pub(crate) fn judge(report: &Report, past: &[PastRun]) -> Findings {
    judge_with(report, &past::Index::new(report, past))
}

/// [`judge`], with the past already indexed (a baseline's samples, `PastIndex::from_samples`).
pub(crate) fn judge_with(report: &Report, past: &past::Index) -> Findings {
    let started = Instant::now();
    let results: Vec<Finding> = report
        .results
        .iter()
        .map(|r| judge_result(report, r, past))
        .collect();
    let run = causes::run_causes(report);
    let mut summary = summary::lines(&results);
    if report.evidence.is_none() {
        summary.push(
            "this document carries no evidence read from its machine (written by a peakbench \
             before findings): no cause can be named"
                .to_string(),
        );
    }
    Findings {
        summary,
        results,
        run,
        judged_in_s: started.elapsed().as_secs_f64(),
    }
}

/// How a result performs against `expected`: value / expected where higher is better,
/// expected / value where lower is (a latency); below 1 is worse.
fn performance(r: &BenchResult, expected: f64) -> f64 {
    if higher_is_better(&r.metric, &r.unit) {
        r.value / expected
    } else {
        expected / r.value
    }
}

pub(crate) use crate::stats::UNSTABLE_CV;

/// Where the standard tool's figure is this much better than ours, ours is below it.
pub(crate) const REFERENCE_BAND: f64 = 0.90;

fn judge_result(report: &Report, r: &BenchResult, past: &past::Index) -> Finding {
    let (mut expectations, mut missing) = expectations(report, r, past);
    // What the machine imposed: the bound each cause puts on this result.
    let mut found = causes::of_result(report, r);
    // A placement unlike every earlier run's, where the result is below its past.
    if expectations
        .iter()
        .any(|e| e.against == Against::Past && e.verdict == Verdict::Below)
        && let Some(c) = causes::placement_against_past(r, past.placements(r))
    {
        found.causes.push(c);
    }
    for cause in &found.causes {
        if let (Some(bound), true) = (cause.cause.bound, cause.binds) {
            expectations.push(Expectation {
                against: Against::Imposed,
                verdict: Verdict::Below,
                expected: bound,
                ratio: performance(r, bound),
                class: None,
                band: None,
                source: format!("{}: {}", cause.cause.kind, cause.cause.text),
                test: None,
            });
        }
    }
    let unstable = noise::unstable(r);
    let verdict = combine(&expectations, unstable.is_some(), found.holds());
    let mut causes: Vec<Cause> = Vec::new();
    if let Some(noise) = unstable.as_ref() {
        causes.extend(noise.causes.iter().cloned());
    }
    if verdict != Verdict::AtLimit && verdict != Verdict::Unknown {
        causes.extend(fitting_causes(r, verdict, &expectations, &mut found.causes));
        causes.sort_by(|a, b| {
            b.explains
                .unwrap_or(-1.0)
                .total_cmp(&a.explains.unwrap_or(-1.0))
        });
    }
    // Above its physics' ceiling with nothing on the machine (a cache) to explain it: the peak
    // is wrong, the model's or the user's rating, never the hardware above its limit. A clock
    // that moved explains none of it: the ceiling was already taken at the clock read after it.
    if verdict == Verdict::AboveLimit
        && causes.iter().all(|c| c.kind == "clock-moved")
        && let Some(physics) = expectations
            .iter()
            .find(|e| e.against == Against::Physics && e.verdict == Verdict::AboveLimit)
    {
        causes.push(causes::above_peak(r, physics));
    }
    let line = line(
        r,
        verdict,
        &expectations,
        &causes,
        unstable.as_ref(),
        &missing,
    );
    if verdict != Verdict::Unknown {
        missing.retain(|m| !m.starts_with("the standard tool"));
    }
    Finding {
        id: r.id.clone(),
        host: r.host.clone(),
        subsystem: r.subsystem,
        label: format!(
            "{} {}",
            r.op,
            crate::report::cells::describe_params(&r.params)
        ),
        value: r.value,
        unit: r.unit.clone(),
        verdict,
        line,
        expectations,
        causes,
        missing,
    }
}

/// What a result is measured against (its physics, the standard tool, its past, the fleet),
/// and for each one missing, what would have given it.
fn expectations(
    report: &Report,
    r: &BenchResult,
    past: &past::Index,
) -> (Vec<Expectation>, Vec<String>) {
    let mut expectations = Vec::new();
    let mut missing = Vec::new();
    match physics::expect(report, r) {
        Ok(e) => expectations.push(e),
        Err(why) => missing.push(why),
    }
    match reference(r) {
        Some(e) => expectations.push(e),
        None => missing
            .push("the standard tool's figure on the same case: run with --reference".to_string()),
    }
    match past::expect(r, past) {
        Ok(e) => expectations.push(e),
        Err(why) => missing.push(why),
    }
    match fleet(report, r) {
        Some(Ok(e)) => expectations.push(e),
        Some(Err(why)) => missing.push(why),
        None => {}
    }
    (expectations, missing)
}

/// The causes found on the machine that fit a result's verdict, each with the share of the
/// gap it explains.
fn fitting_causes(
    r: &BenchResult,
    verdict: Verdict,
    expectations: &[Expectation],
    found: &mut [causes::Candidate],
) -> Vec<Cause> {
    let gap = gap(expectations);
    // A setting of the machine (huge pages, the governor, SMT, a virtual disk …) is named
    // only where the result is below the hardware's physics: the standard tool and the
    // result's own past ran with the same settings, so they cannot explain a gap to those.
    let against_hardware = expectations
        .iter()
        .any(|e| e.against == Against::Physics && e.verdict == Verdict::Below);
    let any_below = expectations.iter().any(|e| e.verdict == Verdict::Below);
    let mut causes = Vec::new();
    for c in found.iter_mut() {
        let slows = c.slows && (!c.structural || against_hardware);
        let fits = match verdict {
            // A limit that holds the figure is named whatever else spread it, and so is
            // what slows a figure that is below as well as spread.
            Verdict::Unstable => c.noisy || c.binds || (any_below && slows),
            Verdict::AboveLimit => c.inflates,
            Verdict::Below => c.binds || slows,
            Verdict::AtLimit | Verdict::Unknown => false,
        };
        if !fits {
            continue;
        }
        // The share of the work a limit leaves: given, or its bound against the
        // expectation the result fell short of.
        let factor = c.factor.or_else(|| {
            let bound = c.cause.bound?;
            Some(gap? / performance(r, bound))
        });
        c.cause.explains = match (gap, factor) {
            (Some(gap), Some(factor)) if gap < 1.0 && gap > 0.0 && factor > 0.0 => {
                Some((factor.ln() / gap.ln()).clamp(0.0, 1.0))
            }
            _ => None,
        };
        causes.push(c.cause.clone());
    }
    causes
}

/// The verdict from every expectation's: over a ceiling beats everything, then repetitions
/// too spread to read, then below any expectation or held by an imposed limit, then at the
/// limit where anything says so.
fn combine(expectations: &[Expectation], unstable: bool, held: bool) -> Verdict {
    let any = |v: Verdict| expectations.iter().any(|e| e.verdict == v);
    if any(Verdict::AboveLimit) {
        Verdict::AboveLimit
    } else if unstable {
        Verdict::Unstable
    } else if any(Verdict::Below) || held {
        Verdict::Below
    } else if any(Verdict::AtLimit) {
        Verdict::AtLimit
    } else {
        Verdict::Unknown
    }
}

/// The result's performance against what it should reach: the physics, else the past, else the
/// standard tool (the first that says below).
fn gap(expectations: &[Expectation]) -> Option<f64> {
    [
        Against::Physics,
        Against::Past,
        Against::Reference,
        Against::Fleet,
    ]
    .iter()
    .find_map(|against| {
        expectations
            .iter()
            .find(|e| e.against == *against && e.verdict == Verdict::Below)
            .map(|e| e.ratio)
    })
}

/// The standard tool's figure, where `--reference` ran it.
fn reference(r: &BenchResult) -> Option<Expectation> {
    let reference = r.reference.as_ref()?;
    let value = reference.value.filter(|v| *v > 0.0)?;
    let ratio = performance(r, value);
    Some(Expectation {
        against: Against::Reference,
        verdict: if ratio < REFERENCE_BAND {
            Verdict::Below
        } else {
            Verdict::AtLimit
        },
        expected: value,
        ratio,
        class: None,
        band: None,
        source: format!(
            "{} measured {} {} on the same case ({}); below {:.2} of it is below",
            reference.tool,
            format_value(value),
            r.unit,
            reference.command,
            REFERENCE_BAND
        ),
        test: None,
    })
}

/// In a cluster run, the median over the hosts of the same case, or for a link of the network
/// matrix the median link of its matrix; a link the matrix does not compare (an end on a
/// machine shared with other hosts) has none, and says why.
fn fleet(report: &Report, r: &BenchResult) -> Option<Result<Expectation, String>> {
    let cluster = report.cluster.as_ref()?;
    if let Some(peer) = r.params.peer() {
        return link_fleet(cluster, r, peer);
    }
    let spread = cluster
        .spread
        .iter()
        .find(|s| s.id == r.id && s.unit == r.unit)?;
    let ratio = *spread.ratios.get(&r.host)?;
    Some(Ok(Expectation {
        against: Against::Fleet,
        verdict: if ratio < cluster.threshold {
            Verdict::Below
        } else {
            Verdict::AtLimit
        },
        expected: spread.median,
        ratio,
        class: None,
        band: None,
        source: format!(
            "the median of {} hosts' {} {}; below {:.2} of it is flagged",
            spread.values.len(),
            format_value(spread.median),
            r.unit,
            cluster.threshold
        ),
        test: None,
    }))
}

/// A link of the network matrix against the median link of its matrix.
fn link_fleet(
    cluster: &crate::result::Cluster,
    r: &BenchResult,
    peer: &str,
) -> Option<Result<Expectation, String>> {
    let matrix = cluster.matrices.iter().find(|m| m.op == r.op)?;
    if let Some(left_out) = &matrix.not_compared
        && left_out.hosts.iter().any(|h| *h == r.host || h == peer)
    {
        return Some(Err(format!(
            "the fleet's median link: not compared in the {} matrix: {}",
            matrix.metric, left_out.why
        )));
    }
    let median = matrix.median.filter(|m| *m > 0.0)?;
    // An end on a shared machine: flagged only further below (the CPU share a pair can lose).
    let threshold = match &matrix.loosened {
        Some(l) if l.hosts.iter().any(|h| *h == r.host || h == peer) => l.threshold,
        _ => cluster.threshold,
    };
    let ratio = if matrix.higher_is_better {
        r.value / median
    } else {
        median / r.value
    };
    Some(Ok(Expectation {
        against: Against::Fleet,
        verdict: if ratio < threshold {
            Verdict::Below
        } else {
            Verdict::AtLimit
        },
        expected: median,
        ratio,
        class: None,
        band: None,
        source: format!(
            "the median link of the {} matrix, {} {}; below {:.2} of it is flagged",
            matrix.metric,
            format_value(median),
            r.unit,
            threshold
        ),
        test: None,
    }))
}

/// The verdict in one line, with the figure that decided it.
fn line(
    r: &BenchResult,
    verdict: Verdict,
    expectations: &[Expectation],
    causes: &[Cause],
    unstable: Option<&noise::Unstable>,
    missing: &[String],
) -> String {
    let decided = |v: Verdict| expectations.iter().find(|e| e.verdict == v);
    let against = |e: &Expectation| match e.against {
        Against::Physics => format!(
            "{:.2} of the peak ({})",
            e.ratio,
            e.class.as_deref().unwrap_or("physics")
        ),
        Against::Reference => format!("{:.2} of the standard tool's figure", e.ratio),
        Against::Past => format!(
            "{:.2} of this hardware's past median {} {}",
            e.ratio,
            format_value(e.expected),
            r.unit
        ),
        Against::Fleet if r.params.peer().is_some() => {
            format!("{:.2} of the matrix's median link", e.ratio)
        }
        Against::Fleet => format!("{:.2} of the hosts' median", e.ratio),
        Against::Imposed => format!(
            "at {:.2} of an imposed limit of {} {}",
            e.ratio,
            format_value(e.expected),
            r.unit
        ),
    };
    let head = match verdict {
        Verdict::AtLimit => decided(Verdict::AtLimit)
            .map(|e| format!("at its limit: {}", against(e)))
            .unwrap_or_else(|| "at its limit".into()),
        Verdict::AboveLimit if causes.iter().any(|c| c.kind == "model-wrong") => {
            decided(Verdict::AboveLimit)
                .map(|e| {
                    format!(
                        "above the model's peak, so the model is wrong: {}",
                        against(e)
                    )
                })
                .unwrap_or_default()
        }
        Verdict::AboveLimit if causes.iter().any(|c| c.kind == "rating-wrong") => {
            decided(Verdict::AboveLimit)
                .map(|e| {
                    format!(
                        "above the rating given, so the rating is wrong: {}",
                        against(e)
                    )
                })
                .unwrap_or_default()
        }
        Verdict::AboveLimit => decided(Verdict::AboveLimit)
            .map(|e| format!("above its peak: {}", against(e)))
            .unwrap_or_default(),
        Verdict::Unstable => format!(
            "unstable: {}",
            unstable.map(|u| u.what.as_str()).unwrap_or("")
        ),
        Verdict::Below => match decided(Verdict::Below) {
            Some(e) => format!("below: {}", against(e)),
            None => "below: held by a limit the machine imposed".to_string(),
        },
        Verdict::Unknown => format!(
            "unknown: nothing to judge it against{}",
            missing_kinds(missing)
        ),
    };
    match (verdict, causes.first()) {
        (Verdict::AtLimit | Verdict::Unknown, _) => head,
        (_, Some(c)) => {
            let share = c
                .explains
                .map(|x| format!(", which explains {:.0} % of the gap", x * 100.0))
                .unwrap_or_default();
            format!("{head}; {}{share}", c.text)
        }
        (_, None) => format!("{head}; {NO_CAUSE}"),
    }
}

#[cfg(test)]
mod tests;
