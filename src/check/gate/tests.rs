use super::*;
use crate::history::baseline::BaselineCase;
use crate::result::Report;
use crate::result::{Against, Verdict};

/// A one-result document from the fixture, its result's repetitions `here`.
fn report(here: &[f64]) -> Report {
    let mut report = Report::parse(include_str!("../../../tests/fixtures/report.json")).unwrap();
    report.results.truncate(1);
    let r = &mut report.results[0];
    r.samples = here.to_vec();
    r.value = crate::stats::median(here).unwrap();
    r.stats = Summary::of(here).unwrap();
    r.extra.clear();
    r.evidence = None;
    report.evidence = None;
    report
}

/// The gate's verdict on `here` against the baseline case `case`, judged as `check` judges;
/// `imposed`: the findings found a limit the machine imposed holding it.
fn judged(here: &[f64], case: &BaselineCase, gate: Gate, imposed: bool) -> CaseVerdict {
    judged_report(&report(here), case, gate, imposed)
}

/// [`judged`] on a given one-result document.
fn judged_report(report: &Report, case: &BaselineCase, gate: Gate, imposed: bool) -> CaseVerdict {
    let here: Vec<f64> = report.results[0].samples.clone();
    let r = &report.results[0];
    let index = crate::findings::PastIndex::from_samples(
        [(
            case.id.as_str(),
            case.unit.as_str(),
            case.runs.as_slice(),
            case.samples.as_slice(),
        )],
        1.0 - gate.tolerance,
    );
    let mut findings = crate::findings::judge_with(report, &index);
    if imposed {
        findings.results[0]
            .expectations
            .push(crate::result::Expectation {
                against: Against::Imposed,
                verdict: Verdict::Below,
                expected: here[0],
                ratio: 0.5,
                class: None,
                band: None,
                source: "cpu-quota: the cgroup's CPU quota".into(),
                test: None,
            });
    }
    gate_case(r, Some(case), findings.results.first(), gate)
}

/// A baseline case of the fixture's result: runs of 5 repetitions each, `runs` long, newest
/// first, with their medians kept (`learned`) or not (a baseline saved before they were).
fn case_of(runs: &[Vec<f64>], learned: bool) -> BaselineCase {
    let report = report(&[1.0]);
    let r = &report.results[0];
    BaselineCase {
        id: r.id.clone(),
        label: String::new(),
        subsystem: String::new(),
        metric: r.metric.clone(),
        unit: r.unit.clone(),
        runs: (1..=runs.len() as i64).rev().collect(),
        samples: runs.concat(),
        run_medians: if learned {
            runs.iter()
                .map(|run| crate::stats::median(run).unwrap())
                .collect()
        } else {
            Vec::new()
        },
        placements: Vec::new(),
        disturbed: Vec::new(),
    }
}

/// Five repetitions within 1 % of `around`.
fn run_at(around: f64) -> Vec<f64> {
    [-1.0, -0.5, 0.0, 0.5, 1.0]
        .iter()
        .map(|d| around * (1.0 + d / 100.0))
        .collect()
}

/// A latency's ratio is inverted (below 1 is slower), so its line gives both latencies and
/// says which way is faster: "1.70 of the baseline's median 15.2 µs" read as a latency of
/// 25.8 µs where it was 8.9.
#[test]
fn a_latencys_line_gives_both_latencies_and_says_lower_is_faster() {
    let runs: Vec<Vec<f64>> = (0..12).map(|_| run_at(10.0)).collect();
    let mut case = case_of(&runs, true);
    (case.metric, case.unit) = ("latency".into(), "µs".into());
    for (at, status, ratio) in [(20.0, Status::Fail, 0.5), (5.0, Status::Pass, 2.0)] {
        let mut report = report(&run_at(at));
        (report.results[0].metric, report.results[0].unit) = ("latency".into(), "µs".into());
        let v = judged_report(&report, &case, GATE, false);
        assert_eq!(v.status, status, "{}", v.line);
        assert!((v.ratio.unwrap() - ratio).abs() < 0.02, "{}", v.line);
        let both = format!(
            "{ratio:.2} of the baseline's speed, {} µs against its median 10.0 µs (lower is \
             faster)",
            format_value(at)
        );
        assert!(v.line.contains(&both), "{}", v.line);
    }
}

/// The gate's verdict on `here` against a baseline of `base` in runs of five, judged as
/// `check` judges.
fn verdict(here: &[f64], base: &[f64], tolerance: f64, strict: bool) -> CaseVerdict {
    let runs: Vec<Vec<f64>> = base.chunks(5).map(<[f64]>::to_vec).collect();
    judged(
        here,
        &case_of(&runs, true),
        Gate { tolerance, strict },
        false,
    )
}

const GATE: Gate = Gate {
    tolerance: 0.2,
    strict: false,
};

/// 12 learning runs of a case the hypervisor puts in two regimes: 8 at 67, 4 at 44.
fn bimodal() -> Vec<Vec<f64>> {
    [
        67.0, 44.0, 67.5, 66.0, 44.5, 68.0, 67.0, 43.5, 66.5, 67.2, 44.2, 66.8,
    ]
    .iter()
    .map(|m| run_at(*m))
    .collect()
}

/// The false failure this rule exists for: a check that landed in the regime the baseline saw
/// less often fails against the pooled median (0.65 of it), but not against the slowest run.
#[test]
fn a_bimodal_case_learned_with_both_regimes_passes_a_check_in_either() {
    let case = case_of(&bimodal(), true);
    let spread = case.spread().unwrap();
    let regimes = spread.regimes.clone().expect("two regimes");
    assert_eq!((regimes.low_runs, regimes.high_runs), (4, 8));
    assert!(!spread.ungateable(0.2), "{spread:?}");
    for here in [run_at(43.8), run_at(67.1)] {
        let v = judged(&here, &case, GATE, false);
        assert_eq!(v.status, Status::Pass, "{}", v.line);
        assert_eq!(v.rule, Some(Rule::LearnedSpread));
    }
    let low = judged(&run_at(43.8), &case, GATE, false);
    assert!(
        low.ratio.unwrap() < 0.7 && low.p.unwrap() < 0.05,
        "{}",
        low.line
    );
}

#[test]
fn a_check_below_the_slowest_learning_run_by_more_than_the_tolerance_fails() {
    let case = case_of(&bimodal(), true);
    let v = judged(&run_at(33.0), &case, GATE, false);
    assert_eq!(v.status, Status::Fail, "{}", v.line);
    let slowest = v.slowest_ratio.unwrap();
    assert!((slowest - 33.0 / 43.5).abs() < 0.01, "{slowest}");
    assert!(
        v.line.contains(&format!(
            "{slowest:.2} of the slowest of its 12 learning runs"
        )),
        "{}",
        v.line
    );
    // Within the tolerance of the slowest run: not failed, however far below the median.
    let v = judged(&run_at(37.0), &case, GATE, false);
    assert_eq!(v.status, Status::Pass, "{}", v.line);
}

/// Runs spread from 30 to 105: at 20 % the gate could not catch even a halving.
fn too_noisy() -> BaselineCase {
    let medians = [
        100.0, 95.0, 30.0, 105.0, 98.0, 35.0, 102.0, 40.0, 97.0, 101.0, 99.0, 103.0,
    ];
    case_of(&medians.map(run_at), true)
}

#[test]
fn an_ungateable_case_is_never_failed_unless_a_limit_imposed_holds_it() {
    let case = too_noisy();
    assert!(case.spread().unwrap().ungateable(0.2));
    let here = run_at(15.0);
    for gate in [
        GATE,
        Gate {
            strict: true,
            ..GATE
        },
    ] {
        let v = judged(&here, &case, gate, false);
        assert_eq!(v.status, Status::Ungateable, "{}", v.line);
        assert!(v.line.starts_with("UNGATEABLE "), "{}", v.line);
        assert!(
            v.line.contains("learning runs spread from 30"),
            "{}",
            v.line
        );
    }
    let v = judged(&here, &case, GATE, true);
    assert_eq!(v.status, Status::Fail, "{}", v.line);
    assert_eq!(v.rule, Some(Rule::Imposed));
    // No tolerance catches a halving of runs that reach down to 0.3 of their median; one that
    // reaches 0.6 is gated at 10 %, not at 20 %.
    assert!(case.spread().unwrap().max_tolerance <= 0.0);
    let medians = [
        100.0, 99.0, 60.0, 101.0, 100.5, 98.0, 100.0, 99.5, 102.0, 101.0, 99.0, 100.0,
    ];
    let spread = case_of(&medians.map(run_at), true).spread().unwrap();
    assert!(
        spread.ungateable(0.2) && !spread.ungateable(0.1),
        "{spread:?}"
    );
}

#[test]
fn a_baseline_without_run_medians_is_judged_by_its_pooled_median() {
    let old = case_of(&bimodal(), false);
    assert!(old.spread().is_none());
    let v = judged(&run_at(43.8), &old, GATE, false);
    assert_eq!(v.status, Status::Fail, "{}", v.line);
    assert_eq!(v.rule, Some(Rule::PooledMedian));
    assert!(v.line.contains("predates learned spreads"), "{}", v.line);
    assert_eq!(v.slowest_ratio, None);
    let v = judged(&run_at(66.0), &old, GATE, false);
    assert_eq!(v.status, Status::Pass, "{}", v.line);
}

/// 25 repetitions around 100 (five runs of five), spread about 1 %.
fn baseline() -> Vec<f64> {
    (0..25).map(|i| 99.0 + f64::from(i % 5) * 0.5).collect()
}

#[test]
fn the_same_figures_pass() {
    let v = verdict(&[99.5, 100.0, 100.5, 99.0, 101.0], &baseline(), 0.2, false);
    assert_eq!(v.status, Status::Pass, "{}", v.line);
    assert!(v.p.unwrap() > 0.05);
}

#[test]
fn half_the_speed_fails_with_its_figures() {
    let v = verdict(&[50.0, 51.0, 49.5, 50.5, 50.2], &baseline(), 0.2, false);
    assert_eq!(v.status, Status::Fail, "{}", v.line);
    let ratio = v.ratio.unwrap();
    assert!((ratio - 0.502).abs() < 0.01, "{ratio}");
    let [lo, hi] = v.interval.unwrap();
    assert!(lo <= ratio && ratio <= hi && hi < 0.6, "{lo} {hi}");
    assert!(v.p.unwrap() < 0.001);
    assert!(v.line.starts_with("FAIL "), "{}", v.line);
    assert!(
        v.line.contains("of the baseline's median 100"),
        "{}",
        v.line
    );
    assert!(!v.line.contains('\n'));
}

#[test]
fn slower_within_the_tolerance_passes() {
    let here = [85.0, 85.5, 84.5, 85.2, 84.8];
    let v = verdict(&here, &baseline(), 0.2, false);
    assert!(v.p.unwrap() < 0.05);
    assert_eq!(v.status, Status::Pass, "{}", v.line);
    assert_eq!(verdict(&here, &baseline(), 0.1, false).status, Status::Fail);
}

#[test]
fn too_few_repetitions_to_test_never_fail() {
    // One repetition against two samples: no test can reach p < 0.05.
    let v = verdict(&[50.0], &[100.0, 101.0], 0.2, false);
    assert_eq!(v.status, Status::Pass, "{}", v.line);
}

#[test]
fn unstable_repetitions_are_unstable_unless_strict() {
    // Slow in median, but some repetitions reach the baseline's figure.
    let here = [60.0, 97.0, 62.0, 95.0, 61.0, 96.0, 63.0];
    let v = verdict(&here, &baseline(), 0.2, false);
    assert_eq!(v.status, Status::Unstable, "{}", v.line);
    assert!(v.line.contains("CV"), "{}", v.line);
    assert_eq!(verdict(&here, &baseline(), 0.2, true).status, Status::Fail);
}

/// A gap no spread accounts for: every resample's ratio is beyond the tolerance.
#[test]
fn unstable_repetitions_all_far_below_the_baseline_fail() {
    let here = [40.0, 75.0, 45.0, 72.0, 42.0, 70.0, 44.0];
    let v = verdict(&here, &baseline(), 0.2, false);
    assert!(v.interval.unwrap()[1] < 0.8, "{:?}", v.interval);
    assert_eq!(v.status, Status::Fail, "{}", v.line);
}

#[test]
fn a_case_the_baseline_lacks_is_unjudged() {
    let report = report(&[1.0, 2.0]);
    let gate = Gate {
        tolerance: 0.2,
        strict: false,
    };
    let v = gate_case(&report.results[0], None, None, gate);
    assert_eq!(v.status, Status::Unjudged);
}

#[test]
fn p_values_stay_short() {
    assert_eq!(format_p(0.0123), "0.012");
    assert_eq!(format_p(0.00002), "2e-5");
}

#[test]
fn a_tolerance_is_a_share_or_a_percentage_between_0_and_1() {
    assert_eq!(super::super::tolerance("0.2"), Ok(0.2));
    assert_eq!(super::super::tolerance("15%"), Ok(0.15));
    for bad in ["0", "1", "100%", "-0.1", "x", "NaN", "inf", ""] {
        assert!(super::super::tolerance(bad).is_err(), "{bad}");
    }
}

/// As [`judged`], the check's CPUs read at `ns` before and after the case.
fn judged_placed(here: &[f64], case: &BaselineCase, ns: f64) -> CaseVerdict {
    let mut report = report(here);
    report.results[0].evidence = Some(crate::evidence::CaseEvidence {
        placement: Some(PlacementProbe {
            cpus: [0, 1],
            before_ns: ns,
            after_ns: ns,
        }),
        ..Default::default()
    });
    let r = &report.results[0];
    // As `check`'s gate_all: the runs in this placement, where there are some.
    let placement = r.evidence.as_ref().and_then(|e| e.placement.as_ref());
    let case = &in_placement(case, placement).unwrap_or_else(|| case.clone());
    let index = crate::findings::PastIndex::from_samples(
        [(
            case.id.as_str(),
            case.unit.as_str(),
            case.runs.as_slice(),
            case.samples.as_slice(),
        )],
        0.8,
    );
    let findings = crate::findings::judge_with(&report, &index);
    gate_case(r, Some(case), findings.results.first(), GATE)
}

/// The bimodal case of [`bimodal`] with each run's placement: the fast runs with the two vCPUs
/// in one L3 (a 60 ns round trip), the slow ones across two (270 ns), as on the Zen 5 guest.
fn placed_bimodal() -> BaselineCase {
    let runs = bimodal();
    let mut case = case_of(&runs, true);
    case.placements = runs
        .iter()
        .map(|r| if r[2] > 55.0 { 60.0 } else { 270.0 })
        .collect();
    case
}

#[test]
fn a_case_is_judged_against_the_learning_runs_in_its_own_placement() {
    let case = placed_bimodal();
    // Across two L3s, as 4 of the learning runs were: judged against those, it passes.
    let v = judged_placed(&run_at(43.8), &case, 265.0);
    assert_eq!(v.status, Status::Pass, "{}", v.line);
    assert_eq!(v.baseline.as_ref().unwrap().runs.len(), 4);
    // In one L3, as the other 8 were: 50 is 0.76 of their slowest (66), beyond the tolerance,
    // though above the slowest of all 12 (43.5), which would have passed it.
    let v = judged_placed(&run_at(50.0), &case, 62.0);
    assert_eq!(v.status, Status::Fail, "{}", v.line);
    assert_eq!(v.baseline.as_ref().unwrap().runs.len(), 8);
    assert!(
        v.causes.is_empty(),
        "the placement is the baseline's: not a cause"
    );
    // Without a placement read, the rule is the one of all runs.
    assert_eq!(
        judged(&run_at(50.0), &case, GATE, false).status,
        Status::Pass
    );
}

#[test]
fn a_placement_unlike_every_learning_run_is_named_as_the_cause() {
    let runs: Vec<Vec<f64>> = (0..12).map(|i| run_at(67.0 + f64::from(i) * 0.1)).collect();
    let mut case = case_of(&runs, true);
    case.placements = vec![60.0; 12];
    let v = judged_placed(&run_at(44.0), &case, 270.0);
    assert_eq!(v.status, Status::Fail, "{}", v.line);
    let cause = &v.causes[0];
    assert_eq!(cause.kind, "placement");
    assert!(
        cause
            .text
            .starts_with("CPUs 0 and 1 sat in different L3 domains"),
        "{}",
        cause.text
    );
    assert!(
        cause
            .text
            .contains("the baseline's 12 runs read 60.0 ns at the median"),
        "{}",
        cause.text
    );
    assert!(v.line.contains("; cause: placement 270 ns"), "{}", v.line);
    // In the baseline's placement the same shortfall has no such cause.
    let v = judged_placed(&run_at(44.0), &case, 58.0);
    assert_eq!(v.status, Status::Fail);
    assert!(v.causes.is_empty(), "{:?}", v.causes);
}
