//! Where a guest's vCPUs sat for a case (`evidence.placement`): moved during it, farther than
//! the rest of its run, unlike its past, and a run that changed placement.

use super::*;
use crate::evidence::PlacementProbe;

fn placed(mut r: BenchResult, id: &str, before_ns: f64, after_ns: f64) -> BenchResult {
    r.id = id.into();
    r.evidence.as_mut().unwrap().placement = Some(PlacementProbe {
        cpus: [0, 1],
        before_ns,
        after_ns,
    });
    r
}

fn causes_of<'a>(findings: &'a Findings, id: &str) -> Vec<&'a str> {
    let f = findings.results.iter().find(|f| f.id == id).unwrap();
    f.causes.iter().map(|c| c.kind.as_str()).collect()
}

#[test]
fn a_case_whose_vcpus_moved_while_it_ran_names_the_placement() {
    let mut report = document();
    let r = kernel(&report, 2, 0.55);
    report.results.push(placed(r, "cpu-a", 29.0, 140.0));
    let findings = judge(&report, &[]);
    let f = &findings.results[0];
    assert_eq!(f.verdict, Verdict::Below, "{f:#?}");
    let c = cause(f, "placement");
    assert!(c.text.contains("moved during the case"), "{}", c.text);
    assert_eq!(c.value, Some(140.0));
    let run = findings.run.iter().find(|c| c.kind == "placement-changed");
    assert!(
        run.unwrap().text.contains("1 moved while they ran"),
        "{run:#?}"
    );
}

#[test]
fn a_case_farther_apart_than_the_rest_of_its_run_names_the_placement() {
    let mut report = document();
    let near = kernel(&report, 2, 0.97);
    let far = kernel(&report, 2, 0.55);
    report
        .results
        .push(placed(near.clone(), "cpu-a", 28.0, 29.0));
    report
        .results
        .push(placed(near.clone(), "cpu-b", 27.0, 29.0));
    report.results.push(placed(near, "cpu-d", 29.0, 30.0));
    report
        .results
        .push(placed(far.clone(), "cpu-c", 131.0, 128.0));
    let findings = judge(&report, &[]);
    assert!(!causes_of(&findings, "cpu-a").contains(&"placement"));
    assert!(
        causes_of(&findings, "cpu-c").contains(&"placement"),
        "{findings:#?}"
    );
    let c = findings.results[3]
        .causes
        .iter()
        .find(|c| c.kind == "placement")
        .unwrap();
    assert!(
        c.text.contains("farther apart")
            && c.text
                .contains("131 ns (shared L3) against 29 ns at their median"),
        "{}",
        c.text
    );
    let run = findings
        .run
        .iter()
        .find(|c| c.kind == "placement-changed")
        .expect("the run's change of placement");
    assert_eq!(run.value, Some(1.0));
    assert!(
        run.text
            .contains("3 cases read about 29 ns, 1 read about 131 ns"),
        "{}",
        run.text
    );
    // With fewer cases than agree on a placement, two readings apart are not two placements.
    report.results.drain(1..3);
    let findings = judge(&report, &[]);
    assert!(findings.run.iter().all(|c| c.kind != "placement-changed"));
    assert!(!causes_of(&findings, "cpu-c").contains(&"placement"));
}

#[test]
fn a_case_below_its_past_in_a_farther_placement_names_it() {
    let past_at = |ns: f64| -> Vec<PastRun> {
        (1..=3)
            .map(|id| {
                let mut run = document();
                let d = disk(&run, 200.0 + id as f64);
                run.results.push(placed(d, "disk-seqread", ns, ns + 1.0));
                PastRun { id, report: run }
            })
            .collect()
    };
    let mut report = document();
    let d = disk(&report, 100.0);
    report.results.push(placed(d, "disk-seqread", 130.0, 132.0));
    let f = judge(&report, &past_at(28.0)).results.remove(0);
    assert_eq!(f.verdict, Verdict::Below, "{f:#?}");
    let c = cause(&f, "placement");
    assert!(
        c.text
            .contains("132 ns (shared L3) against 29 ns at the median of 3 earlier runs"),
        "{}",
        c.text
    );
    // The same placement as the past's is not the cause.
    let f = judge(&report, &past_at(125.0)).results.remove(0);
    assert!(f.causes.iter().all(|c| c.kind != "placement"), "{f:#?}");
}

/// One placement's readings on the Emerald Rapids-class guest spread from 102 to 213 ns with no
/// gap between neighbours: no case is set apart, though 213 is 2.1 × 102.
#[test]
fn readings_spread_without_a_gap_are_one_placement() {
    let mut report = document();
    let r = kernel(&report, 2, 0.55);
    for (i, ns) in [102.0, 131.0, 160.0, 213.0].into_iter().enumerate() {
        report
            .results
            .push(placed(r.clone(), &format!("cpu-{i}"), ns, ns));
    }
    let findings = judge(&report, &[]);
    assert!(findings.run.iter().all(|c| c.kind != "placement-changed"));
    for i in 0..4 {
        assert!(!causes_of(&findings, &format!("cpu-{i}")).contains(&"placement"));
    }
}

/// The quick run on the Emerald Rapids-class guest: 16 cases read about 150 ns, and the
/// 2-thread L1 copy 16 ns (both vCPUs on one host core) and half its usual rate. That case
/// names its placement, closer and on one core; the cases of the usual placement name none.
#[test]
fn a_case_on_one_host_cores_siblings_names_the_placement_closer() {
    let mut report = document();
    let usual = kernel(&report, 2, 0.97);
    for i in 0..16 {
        let ns = 120.0 + 3.0 * i as f64;
        report
            .results
            .push(placed(usual.clone(), &format!("cpu-{i}"), ns, ns));
    }
    report
        .results
        .push(placed(kernel(&report, 2, 0.55), "mem-copy", 16.0, 16.0));
    let findings = judge(&report, &[]);
    let f = findings
        .results
        .iter()
        .find(|f| f.id == "mem-copy")
        .unwrap();
    let c = cause(f, "placement");
    assert!(c.text.contains("sat closer"), "{}", c.text);
    assert!(
        c.text.contains("16 ns (same core (SMT siblings))"),
        "{}",
        c.text
    );
    assert!(c.text.contains("one host core"), "{}", c.text);
    for i in 0..16 {
        assert!(!causes_of(&findings, &format!("cpu-{i}")).contains(&"placement"));
    }
}
