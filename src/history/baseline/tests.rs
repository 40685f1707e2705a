use super::*;

fn fixture() -> Report {
    Report::parse(include_str!("../../../tests/fixtures/report.json")).unwrap()
}

fn sample() -> Baseline {
    let report = fixture();
    let fp = Fingerprint::of(&report.host);
    Baseline::from_runs("node", fp, &[(7, report.clone()), (3, report)], 5)
}

#[test]
fn a_baseline_keeps_the_newest_runs_of_each_case() {
    let report = fixture();
    let fp = Fingerprint::of(&report.host);
    let runs: Vec<(i64, Report)> = (1..=7).rev().map(|id| (id, report.clone())).collect();
    let b = Baseline::from_runs("node", fp, &runs, 5);
    assert!(!b.cases.is_empty());
    let first = &b.cases[0];
    assert_eq!(first.runs, vec![7, 6, 5, 4, 3]);
    let one = report.results.iter().find(|r| r.id == first.id).unwrap();
    assert_eq!(first.samples.len(), 5 * one.samples.len());
}

#[test]
fn a_baseline_reads_back_what_it_wrote() {
    let b = sample();
    assert_eq!(Baseline::parse(&b.to_json()).unwrap(), b);
    assert!(b.render().contains(&b.cases[0].id));
}

#[test]
fn a_bad_baseline_is_refused_naming_the_field() {
    let good = sample().to_json();
    let cases = [
        (
            good.replacen("\"version\": 1", "\"version\": 9", 1),
            "version: 9",
        ),
        (good.replacen("peakbench-baseline", "x", 1), "format:"),
        (
            good.replacen("\"name\": \"node\"", "\"name\": \"a\\u001b[2J\"", 1),
            "name: not printable",
        ),
        (
            "{\"format\":\"peakbench-baseline\",\"version\":1,\"x\":1e999}".to_string(),
            "x",
        ),
        ("[".to_string(), "not JSON"),
    ];
    for (text, wanted) in cases {
        let why = Baseline::parse(&text).unwrap_err();
        assert!(why.contains(wanted), "{why} lacks {wanted}");
    }
    let mut b = sample();
    b.cases[0].samples[1] = -1.0;
    let why = Baseline::parse(&b.to_json()).unwrap_err();
    assert!(why.starts_with("cases[0].samples[1]"), "{why}");
    b.cases[0].samples.clear();
    assert!(Baseline::parse(&b.to_json()).unwrap_err().contains("empty"));
}

#[test]
fn fingerprints_name_the_fields_that_differ() {
    let a = Fingerprint::of(&fixture().host);
    let mut b = a.clone();
    assert!(a.differences(&b).is_empty());
    assert_eq!(a.key(), b.key());
    b.cpus += 2;
    b.kernel_major = "99".into();
    let diff = a.differences(&b);
    assert_eq!(diff.len(), 2);
    assert!(diff[0].starts_with("cpus ("));
    assert!(diff[1].starts_with("kernel_major ("));
    assert_ne!(a.key(), b.key());
}

#[test]
fn names_of_saved_baselines_are_plain_file_names() {
    for good in ["node", "ci-runner_2.x"] {
        assert!(valid_name(good));
    }
    for bad in ["", ".hidden", "a/b", "../x", "a b", &"x".repeat(65)] {
        assert!(!valid_name(bad), "{bad}");
    }
}

#[test]
fn a_baseline_keeps_each_runs_median_beside_its_id() {
    let report = fixture();
    let fp = Fingerprint::of(&report.host);
    let mut slower = report.clone();
    for r in &mut slower.results {
        for s in &mut r.samples {
            *s /= 2.0;
        }
    }
    let b = Baseline::from_runs("node", fp, &[(8, slower), (7, report.clone())], 5);
    let case = &b.cases[0];
    assert_eq!(case.runs, vec![8, 7]);
    let one = report.results.iter().find(|r| r.id == case.id).unwrap();
    let median = crate::stats::median(&one.samples).unwrap();
    assert_eq!(case.run_medians, vec![median / 2.0, median]);
    assert!(b.learned_spreads());
}

#[test]
fn a_baseline_saved_before_run_medians_reads_as_before() {
    let mut b = sample();
    for case in &mut b.cases {
        case.run_medians.clear();
    }
    let text = b.to_json();
    assert!(!text.contains("run_medians"));
    let read = Baseline::parse(&text).unwrap();
    assert!(!read.learned_spreads());
    assert!(read.cases.iter().all(|c| c.spread().is_none()));
    assert!(read.render().contains("predates learned spreads"));
    assert_eq!(read.show_json()["learned_spreads"], false);
}

#[test]
fn run_medians_that_do_not_fit_their_runs_or_samples_are_refused() {
    let mut b = sample();
    b.cases[0].run_medians.pop();
    let why = Baseline::parse(&b.to_json()).unwrap_err();
    assert!(
        why.starts_with("cases[0].run_medians: 1 values for 2 runs"),
        "{why}"
    );
    let mut b = sample();
    b.cases[0].run_medians[1] = 1e12;
    let why = Baseline::parse(&b.to_json()).unwrap_err();
    assert!(
        why.starts_with("cases[0].run_medians[1]: not a median"),
        "{why}"
    );
}

/// A case of 12 runs whose medians are `medians`, five repetitions each.
fn case_with(medians: &[f64]) -> BaselineCase {
    let runs: Vec<Vec<f64>> = medians
        .iter()
        .map(|m| vec![m * 0.99, m * 0.995, *m, m * 1.005, m * 1.01])
        .collect();
    BaselineCase {
        id: "net-tcp-throughput-m131072-s1".into(),
        label: String::new(),
        subsystem: String::new(),
        metric: "throughput".into(),
        unit: "Mb/s".into(),
        runs: (1..=medians.len() as i64).rev().collect(),
        samples: runs.concat(),
        run_medians: medians.to_vec(),
        placements: Vec::new(),
        disturbed: Vec::new(),
    }
}

#[test]
fn runs_in_two_regimes_are_named_with_how_many_runs_each_holds() {
    let medians = [
        67e3, 42e3, 67.5e3, 66e3, 42.5e3, 68e3, 67e3, 41.5e3, 66.5e3, 67.2e3, 42.2e3, 66.8e3,
    ];
    let case = case_with(&medians);
    let spread = case.spread().unwrap();
    assert_eq!(spread.runs, 12);
    assert_eq!(spread.slowest, 41.5e3);
    assert_eq!(spread.fastest, 68e3);
    let regimes = spread.regimes.clone().unwrap();
    assert_eq!((regimes.low_runs, regimes.high_runs), (4, 8));
    let mut b = sample();
    b.cases = vec![case];
    let notes = b.notes();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("two regimes, about 42100 Mb/s (4 runs)")),
        "{notes:?}"
    );
    assert!(b.render().contains("two regimes"));
    let json = b.show_json();
    assert_eq!(json["cases"][0]["spread"]["regimes"]["high_runs"], 8);
    assert_eq!(json["learned_spreads"], true);
    // One regime: none named.
    assert!(case_with(&[100.0; 12]).spread().unwrap().regimes.is_none());
}

#[test]
fn a_latency_runs_slowest_is_its_highest() {
    let mut case = case_with(&[100.0, 120.0, 95.0, 100.0]);
    case.metric = "latency".into();
    case.unit = "ns".into();
    let spread = case.spread().unwrap();
    assert_eq!((spread.slowest, spread.fastest), (120.0, 95.0));
    assert!((spread.slowest_share - 100.0 / 120.0).abs() < 1e-12);
}

#[test]
fn a_learning_run_whose_findings_name_a_disturbance_is_left_out_of_that_case() {
    use crate::result::{Cause, Finding, Findings, Verdict};
    let report = fixture();
    let fp = Fingerprint::of(&report.host);
    let r = &report.results[0];
    let mut disturbed = report.clone();
    let cause = |kind: &str| Cause {
        kind: kind.into(),
        value: Some(1.0),
        unit: "CPU".into(),
        text: String::new(),
        evidence: Vec::new(),
        bound: None,
        explains: None,
        remedy: String::new(),
    };
    let finding = |kind: &str| Finding {
        id: r.id.clone(),
        host: String::new(),
        subsystem: r.subsystem,
        label: String::new(),
        value: r.value,
        unit: r.unit.clone(),
        verdict: Verdict::Below,
        line: String::new(),
        expectations: Vec::new(),
        causes: vec![cause(kind)],
        missing: Vec::new(),
    };
    disturbed.findings = Some(Findings {
        results: vec![finding("other-processes")],
        ..Findings::default()
    });
    // A quota is the machine's normal, not a disturbance of one run.
    let mut quota = report.clone();
    quota.findings = Some(Findings {
        results: vec![finding("cpu-quota")],
        ..Findings::default()
    });
    let runs: Vec<(i64, Report)> = (1..=7)
        .rev()
        .map(|id| match id {
            5 => (id, disturbed.clone()),
            4 => (id, quota.clone()),
            _ => (id, report.clone()),
        })
        .collect();
    let b = Baseline::from_runs("node", fp, &runs, 5);
    let case = b.case(&r.id, &r.unit).unwrap();
    assert_eq!(case.runs, vec![7, 6, 4, 3, 2]);
    assert_eq!(case.run_medians.len(), 5);
    assert_eq!(
        case.disturbed,
        vec![DisturbedRun {
            run: 5,
            cause: "other-processes".into()
        }]
    );
    assert_eq!(Baseline::parse(&b.to_json()).unwrap(), b);
    // A machine busy through its learning: too few clean runs, made up with the newest
    // disturbed ones, so that the case is still learned.
    let busy: Vec<(i64, Report)> = (1..=6)
        .rev()
        .map(|id| match id {
            1 | 2 => (id, report.clone()),
            _ => (id, disturbed.clone()),
        })
        .collect();
    let learned_busy = Baseline::from_runs("node", Fingerprint::of(&report.host), &busy, 5);
    let case = learned_busy.case(&r.id, &r.unit).unwrap();
    assert_eq!(case.runs, vec![6, 5, 4, 2, 1]);
    assert_eq!(
        case.disturbed.iter().map(|d| d.run).collect::<Vec<_>>(),
        [3]
    );
    // The other cases of the disturbed run keep it.
    if let Some(other) = b.cases.iter().find(|c| c.id != r.id) {
        assert_eq!(other.runs, vec![7, 6, 5, 4, 3]);
    }
}

#[test]
fn each_run_keeps_its_placement_where_every_run_read_one() {
    let mut report = fixture();
    let r = &mut report.results[0];
    let mut evidence = r.evidence.clone().unwrap_or_default();
    evidence.placement = Some(crate::evidence::PlacementProbe {
        cpus: [0, 1],
        before_ns: 60.0,
        after_ns: 270.0,
    });
    r.evidence = Some(evidence);
    let id = r.id.clone();
    let fp = Fingerprint::of(&report.host);
    let runs: Vec<(i64, Report)> = (1..=3).rev().map(|i| (i, report.clone())).collect();
    let b = Baseline::from_runs("node", fp.clone(), &runs, 5);
    let case = b.cases.iter().find(|c| c.id == id).unwrap();
    // The farther of the two readings, one per run.
    assert_eq!(case.placements, vec![270.0; 3]);
    assert_eq!(Baseline::parse(&b.to_json()).unwrap(), b);
    // A run that did not read it leaves the case without any.
    let mut older = fixture();
    older.results[0].evidence = None;
    let mixed = vec![(2, report), (1, older)];
    let b = Baseline::from_runs("node", fp, &mixed, 5);
    assert!(
        b.cases
            .iter()
            .find(|c| c.id == id)
            .unwrap()
            .placements
            .is_empty()
    );
}
