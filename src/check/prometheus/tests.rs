use super::*;
use crate::check::gate::CaseVerdict;

fn case(id: &str, status: Status, ratio: Option<f64>) -> CaseVerdict {
    CaseVerdict {
        id: id.into(),
        label: String::new(),
        subsystem: "cpu".into(),
        unit: "GFLOP/s".into(),
        status,
        value: 50.0,
        cv: None,
        repetitions: 5,
        baseline: None,
        ratio,
        slowest_ratio: None,
        interval: None,
        p: None,
        rule: None,
        remeasured: false,
        causes: Vec::new(),
        line: String::new(),
    }
}

/// A check of two cases: one failed, one (with every character the format escapes in its id)
/// not in the baseline.
fn small() -> CheckOutcome {
    crate::check::verdict::tests::verdict(vec![
        case("cpu-f64-fma-t1", Status::Fail, Some(0.45)),
        case("odd\\\"\nid", Status::Unjudged, None),
    ])
}

#[test]
fn a_small_verdict_is_written_exactly_so() {
    let verdict = small();
    let text = text(&Metrics {
        verdict: &verdict,
        exit: 1,
        duration_s: 27.31249,
        timestamp_s: 1_700_000_000.5,
    });
    let expected = r#"# HELP peakbench_check_ratio Performance of each case against its baseline's median (below 1 is slower; a latency's is inverted).
# TYPE peakbench_check_ratio gauge
peakbench_check_ratio{case="cpu-f64-fma-t1",subsystem="cpu"} 0.45
# HELP peakbench_check_case_status The gate's status of each case: 1 for the status it has, 0 for the others.
# TYPE peakbench_check_case_status gauge
peakbench_check_case_status{case="cpu-f64-fma-t1",subsystem="cpu",status="pass"} 0
peakbench_check_case_status{case="cpu-f64-fma-t1",subsystem="cpu",status="fail"} 1
peakbench_check_case_status{case="cpu-f64-fma-t1",subsystem="cpu",status="unstable"} 0
peakbench_check_case_status{case="cpu-f64-fma-t1",subsystem="cpu",status="ungateable"} 0
peakbench_check_case_status{case="cpu-f64-fma-t1",subsystem="cpu",status="unjudged"} 0
peakbench_check_case_status{case="cpu-f64-fma-t1",subsystem="cpu",status="missing"} 0
peakbench_check_case_status{case="odd\\\"\nid",subsystem="cpu",status="pass"} 0
peakbench_check_case_status{case="odd\\\"\nid",subsystem="cpu",status="fail"} 0
peakbench_check_case_status{case="odd\\\"\nid",subsystem="cpu",status="unstable"} 0
peakbench_check_case_status{case="odd\\\"\nid",subsystem="cpu",status="ungateable"} 0
peakbench_check_case_status{case="odd\\\"\nid",subsystem="cpu",status="unjudged"} 1
peakbench_check_case_status{case="odd\\\"\nid",subsystem="cpu",status="missing"} 0
# HELP peakbench_check_hardware_lost Items of hardware the node lost since its baseline, by kind (CPUs online or allowed, memory, disks, NICs, link speed), and the disk cases' directory's room (disk-space) and writes (read-only).
# TYPE peakbench_check_hardware_lost gauge
peakbench_check_hardware_lost{kind="cpus-online"} 0
peakbench_check_hardware_lost{kind="cpus-allowed"} 0
peakbench_check_hardware_lost{kind="memory"} 0
peakbench_check_hardware_lost{kind="memory-limit"} 0
peakbench_check_hardware_lost{kind="disk"} 0
peakbench_check_hardware_lost{kind="nic"} 0
peakbench_check_hardware_lost{kind="link-speed"} 0
peakbench_check_hardware_lost{kind="disk-space"} 0
peakbench_check_hardware_lost{kind="read-only"} 0
# HELP peakbench_check_exit_code The check's exit code: 0 healthy, 1 a regression, 3 no baseline, 130 interrupted.
# TYPE peakbench_check_exit_code gauge
peakbench_check_exit_code 1
# HELP peakbench_check_duration_seconds How long the check took, measuring again included.
# TYPE peakbench_check_duration_seconds gauge
peakbench_check_duration_seconds 27.312
# HELP peakbench_check_timestamp_seconds When the check ended, in seconds since the Unix epoch.
# TYPE peakbench_check_timestamp_seconds gauge
peakbench_check_timestamp_seconds 1700000000.5
"#;
    assert_eq!(text, expected);
}

#[test]
fn the_file_is_replaced_whole_and_a_bad_path_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("peakbench.prom");
    std::fs::write(&file, "old").unwrap();
    probe(&file).unwrap();
    write(&file, "new\n").unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "new\n");
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert_eq!(names.len(), 1, "the temporary file is gone");
    for bad in [
        dir.path().to_path_buf(),
        dir.path().join("no/such/dir/x.prom"),
    ] {
        let why = probe(&bad).unwrap_err().to_string();
        assert!(why.starts_with("--prometheus: cannot write "), "{why}");
    }
}

#[test]
fn a_lost_cpu_and_its_missing_case_are_counted() {
    let verdict = crate::check::verdict::tests::one_cpu_lost();
    let text = text(&Metrics {
        verdict: &verdict,
        exit: 1,
        duration_s: 20.0,
        timestamp_s: 1.0,
    });
    assert!(
        text.contains("peakbench_check_hardware_lost{kind=\"cpus-allowed\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("peakbench_check_hardware_lost{kind=\"memory\"} 0\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "peakbench_check_case_status{case=\"cpu-f64-avx2-fma-t2-strong\",subsystem=\"cpu\",\
             status=\"missing\"} 1\n"
        ),
        "{text}"
    );
}
