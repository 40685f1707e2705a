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
