use super::*;
use crate::history::baseline::BaselineCase;
use crate::result::Report;

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

/// The gate's verdict on `here` against a baseline of `base`, judged as `check` judges.
fn verdict(here: &[f64], base: &[f64], tolerance: f64, strict: bool) -> CaseVerdict {
    let report = report(here);
    let r = &report.results[0];
    let case = BaselineCase {
        id: r.id.clone(),
        label: String::new(),
        metric: r.metric.clone(),
        unit: r.unit.clone(),
        runs: vec![5, 4, 3, 2, 1],
        samples: base.to_vec(),
    };
    let index = crate::findings::PastIndex::from_samples(
        [(
            case.id.as_str(),
            case.unit.as_str(),
            case.runs.as_slice(),
            case.samples.as_slice(),
        )],
        1.0 - tolerance,
    );
    let findings = crate::findings::judge_with(&report, &index);
    let gate = Gate { tolerance, strict };
    gate_case(r, Some(&case), findings.results.first(), gate)
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
