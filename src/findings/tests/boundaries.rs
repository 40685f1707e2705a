//! The caches' end read from the run's own latency curve, against sysinfo's sizes.

use super::*;

/// The quick run of a 2-vCPU KVM guest of a Golden Cove server Xeon (its hypervisor presents
/// model 0xA7), which sysinfo tells of its host's 480 MiB L3: its latency steps ×5.5 from 8 MiB
/// to 256 MiB, so 256 MiB is memory.
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

const MIB: u64 = 1 << 20;

/// The rule alone, on a guest's curve with huge pages: a 2 MiB L2, sysinfo's 480 MiB L3, and
/// memory from 16 MiB on, one interval ×2.7.
#[test]
fn the_step_rule_finds_an_early_step_where_the_curve_leaves_the_cache() {
    let curve = [
        (4 * MIB, 30.0),
        (8 * MIB, 45.0),
        (16 * MIB, 120.0),
        (32 * MIB, 160.0),
        (256 * MIB, 184.0),
    ];
    assert_eq!(memory_step(&curve, 2 * MIB, 480 * MIB), Some((1, 2)));
}

/// The curve of the same Golden Cove server Xeon's KVM guest as the roofline's probe reads it,
/// sets ×2 apart: the edge spreads over two intervals (×2.2, then ×1.5), and the step is read
/// over ×4, from 16 MiB to 64 MiB.
#[test]
fn the_step_rule_reads_a_step_spread_over_two_intervals() {
    let curve = [
        (4 * MIB, 40.7),
        (8 * MIB, 43.9),
        (16 * MIB, 46.9),
        (32 * MIB, 103.0),
        (64 * MIB, 157.0),
        (128 * MIB, 170.0),
        (256 * MIB, 180.0),
    ];
    assert_eq!(memory_step(&curve, 2 * MIB, 480 * MIB), Some((2, 4)));
    // A gradual rise, ×2.75 over ×8 but under ×2.5 over any ×4, is growth inside the cache.
    let gradual = [
        (4 * MIB, 40.0),
        (8 * MIB, 60.0),
        (16 * MIB, 80.0),
        (32 * MIB, 110.0),
    ];
    assert_eq!(memory_step(&gradual, 2 * MIB, 480 * MIB), None);
}

/// A real 105 MiB L3: the curve is flat up to 64 MiB, and its step to memory lies past the
/// last level, where sysinfo says the caches end.
#[test]
fn the_step_rule_finds_nothing_on_a_curve_that_agrees_with_a_real_l3() {
    let curve = [
        (4 * MIB, 28.0),
        (8 * MIB, 31.0),
        (16 * MIB, 34.0),
        (32 * MIB, 38.0),
        (64 * MIB, 44.0),
        (128 * MIB, 125.0),
    ];
    assert_eq!(memory_step(&curve, 2 * MIB, 105 * MIB), None);
}

/// L1 to L2 and L2 to L3 are steps of 3 × and more too, but a step whose smaller set is
/// within the private caches is not a load from memory.
#[test]
fn the_step_rule_ignores_a_step_inside_the_private_caches() {
    let curve = [
        (32 << 10, 1.2),
        (256 << 10, 4.0),
        (MIB, 4.5),
        (2 * MIB, 14.0),
        (8 * MIB, 16.0),
    ];
    assert_eq!(memory_step(&curve, 2 * MIB, 32 * MIB), None);
    assert_eq!(memory_step(&curve, MIB, 32 * MIB), None);
}

/// The quick preset's curve on the Emerald Rapids guests when their 8 MiB chase missed the
/// 300 MiB L3 they are shown: from the L2 (5.6 ns) straight to memory (127 ns, × 22.7), a step
/// out of the private caches too large for any L3. The same guest's L3 at 35.7 ns (× 6.4), and
/// the other fixtures' (× 3.8 on Zen 5, × 8.2 on the Golden Cove guest), are not it.
#[test]
fn the_step_rule_finds_memory_right_after_the_private_caches() {
    let curve = |l3: f64| {
        [
            (16 << 10, 1.7),
            (256 << 10, 5.6),
            (8 * MIB, l3),
            (256 * MIB, 140.6),
        ]
    };
    assert_eq!(memory_step(&curve(127.4), 2 * MIB, 300 * MIB), Some((1, 2)));
    assert_eq!(memory_step(&curve(35.7), 2 * MIB, 300 * MIB), Some((2, 3)));
    let zen5 = [
        (16 << 10, 1.0),
        (256 << 10, 3.5),
        (8 * MIB, 13.2),
        (256 * MIB, 151.8),
    ];
    assert_eq!(memory_step(&zen5, MIB, 32 * MIB), None);
    let golden_cove = [(256 << 10, 4.5), (8 * MIB, 36.9), (256 * MIB, 228.5)];
    assert_eq!(memory_step(&golden_cove, 2 * MIB, 480 * MIB), Some((1, 2)));
}

/// On a 2-vCPU KVM guest of a Golden Cove server Xeon, a first quick run (the preset with the
/// memory hierarchy's levels and the chase over huge pages) judges at least 60 % of its results,
/// none above its limit, and every bandwidth in a private cache gets a verdict from the cache
/// model.
#[test]
fn a_first_quick_run_on_the_xeon_guest_judges_most_of_its_results() {
    let report = Report::parse(include_str!(
        "../../../tests/fixtures/machines/xeon-amx-kvm-2vcpu/peakbench-quick-levels.json"
    ))
    .unwrap();
    let findings = judge(&report, &[]);
    let judged = findings
        .results
        .iter()
        .filter(|f| f.verdict != Verdict::Unknown)
        .count();
    let total = findings.results.len();
    assert!(judged * 10 >= total * 6, "{judged} of {total} judged");
    assert!(
        findings
            .results
            .iter()
            .all(|f| f.verdict != Verdict::AboveLimit),
        "a verdict above the limit is the model's error"
    );
    for r in report.results.iter().filter(|r| {
        matches!(
            r.params.other.get("cache_level").and_then(|v| v.as_str()),
            Some("L1" | "L2")
        ) && r.op != "latency"
    }) {
        let f = findings.results.iter().find(|f| f.id == r.id).unwrap();
        assert_ne!(f.verdict, Verdict::Unknown, "{}: {:?}", f.line, f.missing);
    }
}
