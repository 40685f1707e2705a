//! Where the two CPUs a case used sat, read around it (`evidence.placement`: a cache line's
//! round trip between them before and after the case, which a run reads inside a guest and
//! `peakbench check` always). Inside a guest, pinning threads to vCPUs does not pin the vCPUs
//! to host cores, so a case can run with its CPUs on one core's SMT threads, in one L3 or
//! across two, and the case's figure follows.
//!
//! - a placement that moved during the case (the two readings apart);
//! - a placement unlike the one most of the run's other cases sat in, where their readings
//!   fall into two placements with a gap between them (`placement`, on the case): closer (one
//!   host core's SMT threads share its execution units) or farther apart (a line they share
//!   crosses farther);
//! - a placement unlike every earlier run's of the same case (`placement`, against the past);
//! - a run whose cases sat in more than one placement (`placement-changed`, on the run).
//!
//! Two readings are one placement within [`PLACEMENT_RATIO`] of each other.

use super::{Candidate, Scene};
use crate::evidence::{PLACEMENT_RATIO, PlacementProbe, same_placement};
use crate::result::{BenchResult, Cause, Evidence, Report};

const REMEDY: &str = "re-run the case and compare it with runs in the same placement; a \
                      guest's vCPUs move between host cores, so ask for dedicated (pinned) vCPUs \
                      for figures of the hardware; `peakbench mem c2c` draws the whole matrix";

/// The probe of `r`, where its run read one.
fn probe(r: &BenchResult) -> Option<&PlacementProbe> {
    r.evidence.as_ref()?.placement.as_ref()
}

/// The case's own two readings, as evidence.
fn probe_evidence(p: &PlacementProbe) -> Evidence {
    Evidence::new(
        "the case's placement probe",
        format!("{:.0} ns, then {:.0} ns", p.before_ns, p.after_ns),
    )
}

/// The fewest cases of a run (or earlier runs of a case) that must agree on a placement before
/// another case, or the run, is named apart from it: two readings alone, 102 and 213 ns, are one placement's spread on
/// the Emerald Rapids-class guest, yet more than 1.6 × apart.
const AGREEING: usize = 3;

/// The run's probes on `r`'s host and CPUs, other than `r`'s own: (case id, probe).
fn others<'a>(report: &'a Report, r: &BenchResult, cpus: [usize; 2]) -> Vec<(&'a str, f64)> {
    report
        .results
        .iter()
        .filter(|o| o.host == r.host && o.id != r.id)
        .filter_map(|o| Some((o.id.as_str(), probe(o)?)))
        .filter(|(_, p)| p.cpus == cpus && !p.moved())
        .map(|(id, p)| (id, p.ns()))
        .collect()
}

/// Where round trips read in one run fall into two placements: split at their widest gap
/// between neighbours in order, where that gap is wider than [`PLACEMENT_RATIO`]; the last
/// reading of the nearer placement, or `None` for one placement. A guest's readings of one
/// placement spread without a gap (102–213 ns on the Emerald Rapids-class guest), its two
/// placements with one (26–31 against 126–150 ns on the Zen 5 guest), so a reading is never
/// set apart by its distance from the nearest alone.
fn split(readings: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = readings
        .iter()
        .copied()
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    sorted.sort_by(f64::total_cmp);
    sorted
        .windows(2)
        .filter(|w| !same_placement(w[0], w[1]))
        .max_by(|x, y| (x[1] / x[0]).total_cmp(&(y[1] / y[0])))
        .map(|w| w[0])
}

/// The placement of the case as causes of a shortfall: moved during it, or in the other of
/// two placements the run's cases read ([`split`]) from the one most of them sat in.
pub(super) fn causes(s: &Scene, out: &mut Vec<Candidate>) {
    let Some(here) = s.case.placement.as_ref() else {
        return;
    };
    let [a, b] = here.cpus;
    if here.moved() {
        let mut c = Candidate::new(
            "placement",
            format!(
                "CPUs {a} and {b} moved during the case: a cache line's round trip between \
                 them read {:.0} ns before it and {:.0} ns after (more than {PLACEMENT_RATIO} × \
                 apart), so the hypervisor put their vCPUs elsewhere while it ran and part of \
                 the case ran in each placement",
                here.before_ns, here.after_ns
            ),
            vec![probe_evidence(here)],
            REMEDY,
        )
        .value(here.ns(), "ns");
        c.slows = true;
        c.noisy = true;
        out.push(c);
        return;
    }
    let rest = others(s.report, s.r, here.cpus);
    let mut readings: Vec<f64> = rest.iter().map(|(_, ns)| *ns).collect();
    readings.push(here.ns());
    let Some(cut) = split(&readings) else {
        return;
    };
    // Set apart only where the run's other cases sat mostly in the other placement.
    let near = here.ns() <= cut;
    let theirs: Vec<f64> = rest
        .iter()
        .map(|(_, ns)| *ns)
        .filter(|ns| (*ns <= cut) != near)
        .collect();
    if 2 * theirs.len() <= rest.len() || theirs.len() < AGREEING {
        return;
    }
    let Some(typical) = crate::stats::median(&theirs) else {
        return;
    };
    let mut c = Candidate::new(
        "placement",
        format!(
            "CPUs {a} and {b} sat {} for this case than for {} other case{} of the run: {}",
            if near { "closer" } else { "farther apart" },
            theirs.len(),
            if theirs.len() == 1 { "" } else { "s" },
            unlike(here.ns(), typical, "at their median"),
        ),
        vec![
            probe_evidence(here),
            Evidence::new(
                "the run's other placement",
                format!("{} cases, median {typical:.0} ns", theirs.len()),
            ),
        ],
        REMEDY,
    )
    .value(here.ns(), "ns");
    c.slows = true;
    out.push(c);
}

/// What a round trip of `ns` against the usual `typical` means, named by the absolute bounds
/// of `sysinfo::c2c::classify`: on one host core's SMT threads the two threads share its
/// execution units and caches (a compute or cache-bound case slows); farther apart, every line
/// they share crosses farther (a case that passes data between them slows).
fn unlike(ns: f64, typical: f64, which: &str) -> String {
    let (place, _) = crate::sysinfo::c2c::classify(ns, &[]);
    let (was, _) = crate::sysinfo::c2c::classify(typical, &[]);
    let meaning = if ns < typical {
        if place == crate::sysinfo::c2c::Placement::SameCore {
            "so the hypervisor had put both vCPUs on one host core, whose execution units and \
             caches their threads then shared"
        } else {
            "so the hypervisor had put their vCPUs nearer each other than usual"
        }
    } else {
        "so the hypervisor had put their vCPUs on host cores farther apart, and every line \
         they share crossed farther"
    };
    format!(
        "a cache line's round trip between them read {ns:.0} ns ({}) against {typical:.0} ns \
         {which} ({}), {meaning}",
        place.name(),
        was.name()
    )
}

/// The placement as the cause of a result below its past: the case read a round trip unlike
/// every earlier run's of it that read one (`past`, ns, at least [`AGREEING`] of them), nearer
/// or farther.
pub(in crate::findings) fn against_past(r: &BenchResult, past: &[f64]) -> Option<Candidate> {
    let here = probe(r)?;
    if past.len() < AGREEING || past.iter().any(|&p| same_placement(p, here.ns())) {
        return None;
    }
    let median = crate::stats::median(past)?;
    let [a, b] = here.cpus;
    let which = format!(
        "at the median of {} earlier run{}",
        past.len(),
        if past.len() == 1 { "" } else { "s" }
    );
    let mut c = Candidate::new(
        "placement",
        format!(
            "CPUs {a} and {b} sat unlike in every earlier run of this case: {}",
            unlike(here.ns(), median, &which)
        ),
        vec![
            probe_evidence(here),
            Evidence::new(
                "the earlier runs' placement probes",
                past.iter()
                    .map(|p| format!("{p:.0}"))
                    .collect::<Vec<_>>()
                    .join(", ")
                    + " ns",
            ),
        ],
        REMEDY,
    )
    .value(here.ns(), "ns");
    c.slows = true;
    Some(c)
}

/// A case's id and its placement probe.
type Probed<'a> = (&'a str, &'a PlacementProbe);

/// A run whose cases did not all sit in one placement: per host and pair of CPUs, the cases
/// read round trips in more than one placement, or one moved during its case.
pub(super) fn run_changes(report: &Report) -> Vec<Cause> {
    let mut by_pair: std::collections::BTreeMap<(&str, [usize; 2]), Vec<Probed>> =
        Default::default();
    for r in &report.results {
        if let Some(p) = probe(r) {
            by_pair
                .entry((r.host.as_str(), p.cpus))
                .or_default()
                .push((r.id.as_str(), p));
        }
    }
    let mut causes = Vec::new();
    for ((host, [a, b]), probes) in by_pair {
        let moved: Vec<&str> = probes
            .iter()
            .filter(|(_, p)| p.moved())
            .map(|(id, _)| *id)
            .collect();
        let steady: Vec<&Probed> = probes.iter().filter(|(_, p)| !p.moved()).collect();
        let readings: Vec<f64> = steady.iter().map(|(_, p)| p.ns()).collect();
        // Two placements only where the larger holds enough cases to agree on one.
        let cut = split(&readings).filter(|&cut| {
            let near = readings.iter().filter(|&&ns| ns <= cut).count();
            near.max(readings.len() - near) >= AGREEING
        });
        let (near, far): (Vec<&Probed>, Vec<&Probed>) = steady
            .into_iter()
            .partition(|(_, p)| cut.is_none_or(|cut| p.ns() <= cut));
        if far.is_empty() && moved.is_empty() {
            continue;
        }
        let median = |set: &[&Probed]| {
            crate::stats::median(&set.iter().map(|(_, p)| p.ns()).collect::<Vec<_>>())
                .unwrap_or(f64::NAN)
        };
        let ids = |set: &[&Probed]| set.iter().map(|(id, _)| *id).collect::<Vec<_>>().join(", ");
        let on = if host.is_empty() {
            String::new()
        } else {
            format!(" on {host}")
        };
        let mut parts = Vec::new();
        if !near.is_empty() {
            parts.push(format!(
                "{} case{} read about {:.0} ns",
                near.len(),
                if near.len() == 1 { "" } else { "s" },
                median(&near)
            ));
        }
        if !far.is_empty() {
            parts.push(format!("{} read about {:.0} ns", far.len(), median(&far)));
        }
        if !moved.is_empty() {
            parts.push(format!("{} moved while they ran", moved.len()));
        }
        let mut evidence = Vec::new();
        if !near.is_empty() {
            evidence.push(Evidence::new("nearer placement", ids(&near)));
        }
        if !far.is_empty() {
            evidence.push(Evidence::new("farther placement", ids(&far)));
        }
        if !moved.is_empty() {
            evidence.push(Evidence::new("moved during the case", moved.join(", ")));
        }
        // The cases set apart: those of the smaller placement, and those that moved.
        let apart = near.len().min(far.len()) + moved.len();
        causes.push(Cause {
            kind: "placement-changed".into(),
            value: Some(apart as f64),
            unit: if apart == 1 { "case" } else { "cases" }.into(),
            text: format!(
                "CPUs {a} and {b}{on} did not stay in one placement during the run (a cache \
                 line's round trip between them, read around each case that used both): {}; \
                 the hypervisor moved their vCPUs between host cores, and cases in different \
                 placements are not comparable",
                parts.join(", ")
            ),
            evidence,
            bound: None,
            explains: None,
            remedy: REMEDY.into(),
        });
    }
    causes
}
