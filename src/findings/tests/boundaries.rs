//! The caches' end read from the run's own latency curve, against sysinfo's sizes.

use super::*;

/// The quick run of the Xeon guest that sysinfo tells of its host's 480 MiB L3: its latency
/// steps ×5.5 from 8 MiB to 256 MiB, so 256 MiB is memory.
fn xeon_guest() -> Report {
    Report::parse(include_str!(
        "../../../tests/fixtures/machines/xeon-amx-kvm-2vcpu/peakbench-quick.json"
    ))
    .unwrap()
}

#[test]
fn a_latency_step_beyond_the_private_caches_overrules_the_sizes_sysinfo_read() {
    let report = xeon_guest();
    assert_eq!(report.host.cpu.last_level_cache_bytes(), 480 << 20);
    let edge = super::super::boundaries::beyond_caches(&report, &report.host.hostname).unwrap();
    assert_eq!(edge.cached.0, 8 << 20);
    assert_eq!(edge.beyond.0, 256 << 20);
    let findings = judge(&report, &[]);
    let cause = findings
        .run
        .iter()
        .find(|c| c.kind == "cache-sizes-wrong")
        .expect("the run names the contradicted sizes");
    assert!(cause.text.contains("from 8 MiB"), "{}", cause.text);
    assert!(cause.text.contains("480 MiB"), "{}", cause.text);
    // The 256 MiB bandwidth results are judged as memory: what they lack is the memory's
    // peak, not a model of the caches.
    let triad = findings
        .results
        .iter()
        .find(|f| f.id.contains("triad") && f.label.contains("256MiB"))
        .expect("a triad at 256 MiB");
    assert!(
        triad
            .missing
            .iter()
            .all(|m| !m.contains("fits in the caches")),
        "{:?}",
        triad.missing
    );
}

#[test]
fn a_curve_that_agrees_with_sysinfo_names_nothing() {
    let mut report = xeon_guest();
    for cache in report.host.cpu.caches.iter_mut().filter(|c| c.level == 3) {
        cache.size_bytes = 105 << 20; // the host's real L3 would end before 256 MiB
    }
    assert_eq!(
        super::super::boundaries::beyond_caches(&report, &report.host.hostname),
        None
    );
    assert!(
        judge(&report, &[])
            .run
            .iter()
            .all(|c| c.kind != "cache-sizes-wrong")
    );
}

#[test]
fn a_step_inside_the_private_caches_is_not_the_memory() {
    let mut report = xeon_guest();
    // Only an L1 → L2 step: 16 KiB at 1.3 ns, 1 MiB at 4.7 ns.
    let template = report
        .results
        .iter()
        .find(|r| (r.subsystem, r.op.as_str()) == (Subsystem::Memory, "latency"))
        .unwrap()
        .clone();
    report
        .results
        .retain(|r| (r.subsystem, r.op.as_str()) != (Subsystem::Memory, "latency"));
    for (set, ns) in [(16u64 << 10, 1.3), (1 << 20, 4.7)] {
        let mut r = template.clone();
        r.id = format!("mem-latency-{set}");
        r.params.working_set_bytes = Some(set);
        r.value = ns;
        report.results.push(r);
    }
    assert_eq!(
        super::super::boundaries::beyond_caches(&report, &report.host.hostname),
        None
    );
}
