use super::*;
use crate::result::{Cause, Evidence};

fn case(id: &str, status: Status, ratio: f64) -> CaseVerdict {
    CaseVerdict {
        id: id.into(),
        label: format!("label of {id}"),
        subsystem: "cpu".into(),
        unit: "GFLOP/s".into(),
        status,
        value: 50.0,
        cv: Some(0.01),
        repetitions: 10,
        baseline: None,
        ratio: Some(ratio),
        slowest_ratio: None,
        interval: Some([ratio - 0.02, ratio + 0.02]),
        p: Some(0.0001),
        rule: None,
        remeasured: true,
        causes: vec![Cause {
            kind: "cpu-quota".into(),
            value: Some(1.2),
            unit: "CPU".into(),
            text: "the cgroup's CPU quota allows 1.20 CPU for 2 threads <&>".into(),
            evidence: vec![Evidence::new("/sys/fs/cgroup/x/cpu.max", "120000 100000")],
            bound: None,
            explains: None,
            remedy: "run outside the cgroup".into(),
        }],
        line: format!("FAIL {id}: 0.58 of the baseline's median … \u{1b}[2J"),
    }
}

/// A check judged against a baseline of the fixture's run, with `cases` (the Prometheus tests
/// use it too).
pub(crate) fn verdict(cases: Vec<CaseVerdict>) -> CheckOutcome {
    verdict_with_losses(cases, Vec::new())
}

/// As [`verdict`], on a node that lost `lost` since the baseline.
pub(crate) fn verdict_with_losses(cases: Vec<CaseVerdict>, lost: Vec<Loss>) -> CheckOutcome {
    let report =
        crate::result::Report::parse(include_str!("../../../tests/fixtures/report.json")).unwrap();
    let fp = Fingerprint::of(&report.host);
    let b = crate::history::baseline::Baseline::from_runs("node", fp.clone(), &[(1, report)], 5);
    let found = LocatedBaseline {
        baseline: b,
        origin: "saved baseline 'node'".into(),
    };
    let gate = Gate {
        tolerance: 0.2,
        strict: false,
    };
    CheckOutcome::new(Some(&found), &fp, gate, cases, lost, Some(9))
}

#[test]
fn a_regression_gives_a_short_printable_reason_naming_the_cause() {
    let long = "cpu-f64-avx512-fma-t2-strong-with-a-very-long-name-that-goes-on-and-on";
    let v = verdict(vec![
        case(long, Status::Fail, 0.58),
        case("other", Status::Fail, 0.7),
        case("fine", Status::Pass, 1.0),
    ]);
    assert_eq!(v.status, CheckStatus::Regression);
    let reason = v.reason.clone().unwrap();
    assert!(reason.len() <= MAX_REASON, "{reason}");
    assert!(reason.chars().all(|c| c == ' ' || c.is_ascii_graphic()));
    assert!(
        reason
            .starts_with("peakbench: cpu-quota 1.20 CPU: 0.58x baseline p=1e-4 (+1 more): cpu-f64"),
        "{reason}"
    );
}

#[test]
fn healthy_has_no_reason_and_unstable_is_not_a_failure() {
    let v = verdict(vec![
        case("a", Status::Pass, 1.0),
        case("b", Status::Unstable, 0.7),
    ]);
    assert_eq!(v.status, CheckStatus::Healthy);
    assert_eq!(v.reason, None);
    let text = v.render();
    assert!(text.lines().next().unwrap().starts_with("FAIL b") || text.contains("b:"));
    assert!(text.lines().last().unwrap().contains("healthy"));
}

#[test]
fn nothing_judged_is_no_baseline() {
    let v = verdict(vec![case("a", Status::Unjudged, 1.0)]);
    assert_eq!(v.status, CheckStatus::NoBaseline);
    assert!(v.reason.unwrap().contains("no baseline"));
}

#[test]
fn text_has_one_line_per_failure_then_the_causes() {
    let v = verdict(vec![
        case("a", Status::Fail, 0.5),
        case("b", Status::Pass, 1.0),
    ]);
    let text = v.render();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("FAIL a"), "{text}");
    assert!(!text.contains('\u{1b}'));
    assert!(lines[1].starts_with("  cpu-quota: "));
    assert!(text.contains("evidence: /sys/fs/cgroup/x/cpu.max = 120000 100000"));
    assert!(text.contains("remedy: run outside the cgroup"));
    assert!(
        lines
            .last()
            .unwrap()
            .contains("REGRESSION: 2 cases, 1 pass, 1 fail")
    );
}

#[test]
fn junit_has_a_testcase_per_case_and_escapes_its_text() {
    let v = verdict(vec![
        case("a", Status::Fail, 0.5),
        case("b", Status::Pass, 1.0),
        case("c", Status::Unstable, 0.9),
    ]);
    let xml = junit(&v);
    assert!(
        xml.contains("tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"1\""),
        "{xml}"
    );
    assert_eq!(xml.matches("<testcase ").count(), 3);
    assert!(xml.contains("<failure message=\"FAIL a: "));
    assert!(xml.contains("&lt;&amp;&gt;"));
    assert!(xml.contains("remedy: run outside the cgroup"));
    assert!(!xml.contains('\u{1b}'));
}

#[test]
fn an_ungateable_case_is_shown_and_counted_but_never_a_failure() {
    let mut noisy = case("n", Status::Ungateable, 0.3);
    noisy.line = "UNGATEABLE n: its 12 learning runs spread from 30 to 105".into();
    let v = verdict(vec![case("a", Status::Pass, 1.0), noisy]);
    assert_eq!(v.status, CheckStatus::Healthy);
    assert_eq!(v.reason, None);
    let text = v.render();
    assert!(text.starts_with("UNGATEABLE n: "), "{text}");
    assert!(
        text.contains("healthy: 2 cases, 1 pass, 0 fail, 0 unstable, 1 ungateable, 0 unjudged"),
        "{text}"
    );
    assert!(
        !text.contains("cpu-quota"),
        "causes are shown for failures only: {text}"
    );
    let xml = junit(&v);
    assert!(
        xml.contains("failures=\"0\" errors=\"0\" skipped=\"1\""),
        "{xml}"
    );
    assert!(xml.contains("<skipped message=\"UNGATEABLE n: "), "{xml}");
    let json = serde_json::to_value(&v).unwrap();
    assert_eq!(json["cases"][1]["status"], "ungateable");
}

#[test]
fn a_baseline_without_run_medians_says_so_in_the_summary() {
    let mut v = verdict(vec![case("a", Status::Pass, 1.0)]);
    assert!(!v.summary().contains("predates"), "{}", v.summary());
    v.baseline.as_mut().unwrap().learned_spreads = false;
    assert!(
        v.summary().contains(
            "which predates learned spreads: judged by pooled medians; save the baseline again"
        ),
        "{}",
        v.summary()
    );
}

/// A baseline case of `subsystem` (one learning run of one sample) that a check did not run.
fn not_run(id: &str, subsystem: &str) -> crate::history::baseline::BaselineCase {
    crate::history::baseline::BaselineCase {
        id: id.into(),
        label: id.into(),
        subsystem: subsystem.into(),
        metric: "throughput".into(),
        unit: "GFLOP/s".into(),
        runs: vec![1],
        samples: vec![100.0],
        run_medians: vec![100.0],
        placements: Vec::new(),
        disturbed: Vec::new(),
    }
}

/// A CPU out of the cpuset: the loss fails the node by itself (every case left passes), the
/// two-thread case its plan dropped is missing and counts as a failure, and every output names
/// the loss.
pub(crate) fn one_cpu_lost() -> CheckOutcome {
    let lost = vec![Loss {
        kind: "cpus-allowed",
        text: "1 of 2 CPUs allowed: cpuset 0".into(),
        source: "/sys/fs/cgroup/cpuset/check/cpuset.effective_cpus".into(),
    }];
    let missing =
        super::super::gate::missing_case(&not_run("cpu-f64-avx2-fma-t2-strong", "cpu"), &lost);
    verdict_with_losses(vec![case("a", Status::Pass, 1.0), missing], lost)
}

#[test]
fn a_node_that_lost_a_cpu_fails_naming_it_and_its_missing_cases() {
    let v = one_cpu_lost();
    assert_eq!(v.status, CheckStatus::Regression);
    assert_eq!(
        v.reason.as_deref(),
        Some("peakbench: lost hardware: 1 of 2 CPUs allowed: cpuset 0")
    );
    let text = v.render();
    assert!(
        text.starts_with(
            "LOST 1 of 2 CPUs allowed: cpuset 0 (/sys/fs/cgroup/cpuset/check/cpuset.effective_cpus)\n\
             MISSING cpu-f64-avx2-fma-t2-strong: the plan could not run it on what is left of the \
             node: 1 of 2 CPUs allowed: cpuset 0\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("REGRESSION: 1 item of hardware lost, 2 cases"),
        "{text}"
    );
    assert!(text.contains("1 missing"), "{text}");
    let junit = junit(&v);
    assert!(junit.contains("tests=\"3\" failures=\"2\""), "{junit}");
    assert!(junit.contains("type=\"lost-hardware\""), "{junit}");
    assert!(junit.contains("type=\"missing\""), "{junit}");
    let json = serde_json::to_value(&v).unwrap();
    assert_eq!(json["lost"][0]["kind"], "cpus-allowed");
    assert_eq!(json["cases"][1]["status"], "missing");
}

/// A CPU lost and the disk cases' room lost: each missing case names its own, the reason the
/// hardware, and JUnit types the room apart.
#[test]
fn a_missing_disk_case_names_the_room_and_a_missing_cpu_case_the_hardware() {
    let mut lost = one_cpu_lost().lost;
    lost.push(Loss {
        kind: crate::history::inventory::NO_ROOM,
        text: "/scratch has 98.5 MiB free, too little for a test file".into(),
        source: "statvfs(2) of the disk cases' directory".into(),
    });
    let disk = super::super::gate::missing_case(&not_run("disk-x", "disk"), &lost);
    let cpu = super::super::gate::missing_case(&not_run("cpu-x", "cpu"), &lost);
    assert!(
        disk.line
            .ends_with("node: /scratch has 98.5 MiB free, too little for a test file")
    );
    assert!(cpu.line.ends_with("node: 1 of 2 CPUs allowed: cpuset 0"));
    let v = verdict_with_losses(vec![disk, cpu], lost);
    assert_eq!(
        v.reason.as_deref(),
        Some("peakbench: lost hardware: 1 of 2 CPUs allowed: cpuset 0 (+1 more)")
    );
    let text = v.render();
    assert!(
        text.contains("\nNO ROOM /scratch has 98.5 MiB free, too little for a test file ("),
        "{text}"
    );
    assert!(
        text.contains("REGRESSION: 1 item of hardware lost, no room for the disk cases, 2 cases"),
        "{text}"
    );
    let junit = junit(&v);
    assert!(junit.contains("type=\"no-room\""), "{junit}");
    assert!(junit.contains("tests=\"4\" failures=\"4\""), "{junit}");

    let read_only = vec![Loss {
        kind: crate::history::inventory::READ_ONLY,
        text: "/scratch is on a read-only file system".into(),
        source: "statvfs(2) of the disk cases' directory".into(),
    }];
    let disk = super::super::gate::missing_case(&not_run("disk-x", "disk"), &read_only);
    let v = verdict_with_losses(vec![disk], read_only);
    assert_eq!(
        v.reason.as_deref(),
        Some("peakbench: read-only: /scratch is on a read-only file system")
    );
    let text = v.render();
    assert!(
        text.starts_with("READ-ONLY /scratch is on a read-only file system ("),
        "{text}"
    );
    assert!(
        text.contains("REGRESSION: the disk cases' directory read-only, 1 cases"),
        "{text}"
    );
    assert!(super::junit(&v).contains("type=\"read-only\""));
}

#[test]
fn a_missing_case_on_a_node_that_lost_nothing_is_only_reported() {
    let missing = super::super::gate::missing_case(&not_run("disk-randread", "disk"), &[]);
    let v = verdict(vec![case("a", Status::Pass, 1.0), missing]);
    assert_eq!(v.status, CheckStatus::Healthy);
    assert!(
        v.render()
            .contains("missing disk-randread: in the baseline, not in this check's plan")
    );
    assert!(junit(&v).contains("failures=\"0\""));
}
