//! The model of the machine judged by its own kernels: a kernel over its peak, kernels sharing
//! one fraction or half their scaling, a private cache's latency against the core's cycles.

use super::*;

#[test]
fn a_figure_over_the_peak_is_above_the_limit() {
    let mut report = document();
    report.results.push(kernel(&report, 1, 1.3));
    assert_eq!(judged(&report).verdict, Verdict::AboveLimit);
}

/// A kernel at `share` of a peak computed at a measured 2.92 GHz (base 2.45 GHz), whose core
/// ran at `after` GHz right after it.
fn kernel_clocked(report: &Report, share: f64, after: f64) -> BenchResult {
    let mut r = kernel(report, 1, share);
    r.peak.as_mut().unwrap().pair = Some(crate::peak::ClockPair {
        at_base: Some(100.0 * 2.45 / 2.92),
        base_ghz: crate::peak::Factor::known(2.45, "cpuinfo", "test"),
        at_turbo: None,
        turbo_ghz: crate::peak::Factor::unknown("test"),
        measured_ghz: Some(2.92),
        used_ghz: None,
    });
    r.extra.push(crate::result::Extra {
        metric: "clock_after".into(),
        unit: "GHz".into(),
        value: after,
        stats: crate::stats::Summary::of(&[after]).unwrap(),
    });
    r
}

/// A second kernel of the same run ([`kernel_clocked`]), `cpu-f64-t2`, whose reading after it
/// is another moment of the run's clock.
fn other_case(report: &Report, share: f64, after: f64) -> BenchResult {
    let mut r = kernel_clocked(report, share, after);
    r.id = "cpu-f64-t2".into();
    r
}

#[test]
fn a_clock_that_moved_after_the_peak_was_measured_explains_a_figure_over_or_under_it() {
    let mut report = document();
    // 1.06 of a peak at 2.92 GHz, the core at 3.10 GHz after the case: 1.00 of the peak at its
    // own clock, so at its limit, never above it.
    report.results.push(kernel_clocked(&report, 1.06, 3.10));
    let f = judged(&report);
    assert_eq!(f.verdict, Verdict::AtLimit, "{f:#?}");
    // 1.13 is 1.06 at 3.10 GHz: above even there, and the moved clock is named beside it.
    report.results[0] = kernel_clocked(&report, 1.13, 3.10);
    let f = judged(&report);
    assert_eq!(f.verdict, Verdict::AboveLimit, "{f:#?}");
    let c = cause(&f, "clock-moved");
    assert_eq!(c.value, Some(3.10));
    assert!(
        c.text
            .starts_with("the core ran at 3.10 GHz right after this case, 6 % above the 2.92 GHz")
            && c.text
                .ends_with("at 3.10 GHz the figure is 1.06 of its peak"),
        "{}",
        c.text
    );
    // Under it: a clock that fell slows the figure, and is named as a cause of it. A figure
    // under the band only at the peak's clock is at its limit at the clock it fell to: 0.80 at
    // 2.92 GHz is 0.93 at 2.50.
    report.results[0] = kernel_clocked(&report, 0.80, 2.50);
    assert_eq!(judged(&report).verdict, Verdict::AtLimit);
    report.results[0] = kernel_clocked(&report, 0.70, 2.50);
    let f = judged(&report);
    assert_eq!(f.verdict, Verdict::Below, "{f:#?}");
    assert!(cause(&f, "clock-moved").text.contains("14 % below"));
    // A peak at the clock --cpu-ghz gave: the given clock is what is off, not the machine's.
    let mut r = kernel_clocked(&report, 1.3, 3.12);
    let pair = r.peak.as_mut().unwrap().pair.as_mut().unwrap();
    pair.base_ghz = crate::peak::Factor::known(2.6, "flag", "--cpu-ghz");
    pair.at_base = Some(100.0);
    report.results[0] = r;
    let f = judged(&report);
    let text = &cause(&f, "clock-moved").text;
    assert!(
        text.contains("20 % above the 2.60 GHz its peak was computed at: the cores do not run at the clock --cpu-ghz gave; at 3.12 GHz the figure is 1.08"),
        "{text}"
    );
    // A clock within 3 % of the peak's is not a cause.
    report.results[0] = kernel_clocked(&report, 1.3, 2.95);
    let f = judged(&report);
    assert_eq!(f.verdict, Verdict::AboveLimit);
    assert!(f.causes.iter().all(|c| c.kind != "clock-moved"), "{f:#?}");
}

/// A kernel above its peak at its own clock proves the model wrong, and the line says so instead
/// of praising the hardware.
#[test]
fn a_kernel_over_its_peak_at_its_own_clock_says_the_model_is_wrong() {
    let mut report = document();
    report.results.push(kernel_clocked(&report, 1.30, 2.95));
    let f = judged(&report);
    assert_eq!(f.verdict, Verdict::AboveLimit);
    let c = cause(&f, "model-wrong");
    assert!(
        c.text.contains("the model of this machine is wrong"),
        "{}",
        c.text
    );
    assert!(
        f.line
            .starts_with("above the model's peak, so the model is wrong"),
        "{}",
        f.line
    );
    assert!(
        !f.line.contains("above what the hardware can do"),
        "{}",
        f.line
    );
    // Within 3 % of the peak at the clock after it: the clock's, not the model's.
    report.results[0] = kernel_clocked(&report, 1.06, 3.10);
    assert!(
        judged(&report)
            .causes
            .iter()
            .all(|c| c.kind != "model-wrong")
    );
}

/// The clock moves from second to second on a shared host, and a reading after one case is one
/// moment of it: a kernel is above its peak only at the fastest clock any reading of its run saw.
/// A quick run on a Sapphire Rapids-class guest read its 1-thread i32 adds at 1.03 of the peak at
/// the first clock and 1.05 at the lower clock read right after them, 2 per cycle at the top of
/// the clock's spread in that run.
#[test]
fn a_kernel_is_above_its_peak_only_at_the_fastest_clock_its_run_saw() {
    let mut report = document();
    // Alone, with its clock read lower after it: 1.04 of the peak, and the lower reading does
    // not make it more above than that.
    report.results.push(kernel_clocked(&report, 1.04, 2.80));
    let f = judged(&report);
    assert_eq!(f.verdict, Verdict::AboveLimit, "{f:#?}");
    let c = cause(&f, "model-wrong");
    assert_eq!(c.value.map(|v| (v * 100.0).round()), Some(104.0), "{c:#?}");
    // Another case of the run read the clock 3 % above the peak's: there the kernel is 1.01 of
    // its peak, at its limit, and no model is called wrong.
    report.results.push(other_case(&report, 0.97, 3.01));
    let f = judged(&report);
    assert_eq!(f.verdict, Verdict::AtLimit, "{f:#?}");
    assert!(f.causes.iter().all(|c| c.kind != "model-wrong"), "{f:#?}");
    // Far above even at that clock: the model is wrong, and the line names the clock and the
    // case that read it.
    report.results[0] = kernel_clocked(&report, 1.30, 2.80);
    let f = judged(&report);
    assert_eq!(f.verdict, Verdict::AboveLimit);
    let text = &cause(&f, "model-wrong").text;
    assert!(
        text.starts_with(
            "the kernel reads 1.26 of its peak at 3.01 GHz, the fastest clock the run saw \
             (right after cpu-f64-t2)"
        ),
        "{text}"
    );
    // A reading on another host says nothing of this one's clock.
    report.results[1].host = "elsewhere".into();
    report.results[0] = kernel_clocked(&report, 1.04, 2.80);
    assert_eq!(judged(&report).verdict, Verdict::AboveLimit);
}

/// Below its band only at the clock read right after it where that fell, and the run names the
/// spread: 0.88 of a peak at 2.92 GHz is 0.92 at 2.80, within the band from 0.90, where the
/// case's own reading was 2.80; another case's reading of 2.80 says nothing of this one's.
#[test]
fn a_kernel_is_below_its_band_only_at_its_own_clock_where_that_fell() {
    let mut report = document();
    report.results.push(kernel_clocked(&report, 0.88, 2.92));
    assert_eq!(judged(&report).verdict, Verdict::Below);
    let findings = judge(&report, &[]);
    assert!(findings.run.iter().all(|c| c.kind != "clock-spread"));
    report.results.push(other_case(&report, 0.97, 2.80));
    let findings = judge(&report, &[]);
    assert_eq!(findings.results[0].verdict, Verdict::Below);
    let spread = findings
        .run
        .iter()
        .find(|c| c.kind == "clock-spread")
        .expect("the run names the clock's spread");
    assert!(
        spread.text.starts_with(
            "the core's clock, read right after each of 2 cases, ran from -4 % to +0 %"
        ),
        "{}",
        spread.text
    );
    assert_eq!(
        spread.evidence[0].value,
        "2.800 GHz, 0.959 × its peak's clock"
    );
    report.results[0] = kernel_clocked(&report, 0.88, 2.80);
    assert_eq!(judge(&report, &[]).results[0].verdict, Verdict::AtLimit);
    // Far below even there: below.
    report.results[0] = kernel_clocked(&report, 0.70, 2.80);
    assert_eq!(judged(&report).verdict, Verdict::Below);
}

/// Every kernel at the same fraction of its peak names the factor the peaks share.
#[test]
fn kernels_all_at_one_fraction_of_their_peaks_name_the_shared_factor() {
    let mut report = document();
    for share in [0.310, 0.312, 0.315] {
        report.results.push(kernel(&report, 1, share));
    }
    let run = judge(&report, &[]).run;
    let c = run
        .iter()
        .find(|c| c.kind == "shared-factor")
        .unwrap_or_else(|| panic!("{run:#?}"));
    assert!(
        c.text.contains("all 3 CPU kernels read 0.31-0.32"),
        "{}",
        c.text
    );
    // Fractions apart by more than 3 %, or at the limit: no shared factor.
    report.results[2] = kernel(&report, 1, 0.5);
    assert!(
        judge(&report, &[])
            .run
            .iter()
            .all(|c| c.kind != "shared-factor")
    );
}

/// Kernels at N threads doing half of N × their one-thread rate: the CPUs are SMT siblings.
#[test]
fn kernels_at_half_their_scaling_name_shared_cores() {
    let mut report = document();
    for (i, precision) in ["f64", "f32", "i8"].into_iter().enumerate() {
        let mut one = kernel(&report, 1, 0.95);
        one.params.precision = Some(precision.into());
        one.id = format!("k{i}-t1");
        let mut two = kernel(&report, 2, 0.48 * 2.0 * 0.95);
        two.params.precision = Some(precision.into());
        two.id = format!("k{i}-t2");
        report.results.extend([one, two]);
    }
    let run = judge(&report, &[]).run;
    let c = run
        .iter()
        .find(|c| c.kind == "shared-cores")
        .unwrap_or_else(|| panic!("{run:#?}"));
    assert!((c.value.unwrap() - 0.48).abs() < 1e-9, "{c:?}");
    assert!(
        c.text.contains("the 2 CPUs do the work of about 1 core"),
        "{}",
        c.text
    );
}

/// A load latency in L1 or L2 is judged against the core's load-to-use cycles.
#[test]
fn a_private_cache_latency_is_judged_by_the_cores_cycles() {
    let mut report = document();
    report.host.cpu.microarch = crate::sysinfo::Fact::read("sapphirerapids".to_string(), "test");
    let latency = |level: &str, cycles: f64| {
        let ns = cycles / 4.0;
        let mut r = BenchResult::example("mem-latency", "ns", vec![ns, ns, ns]);
        r.host = report.host.hostname.clone();
        r.subsystem = Subsystem::Memory;
        r.op = "latency".into();
        r.metric = "latency".into();
        r.params
            .other
            .insert("cache_level".into(), serde_json::Value::from(level));
        r.extra.push(crate::result::Extra {
            metric: "latency_cycles".into(),
            unit: "cycles".into(),
            value: cycles,
            stats: crate::stats::Summary::of(&[cycles]).unwrap(),
        });
        r
    };
    for (level, cycles, verdict) in [
        ("L1", 4.95, Verdict::AtLimit),
        ("L1", 8.0, Verdict::Below),
        ("L1", 4.0, Verdict::AboveLimit),
        ("L2", 18.06, Verdict::AtLimit),
        ("L2", 25.0, Verdict::Below),
    ] {
        report.results = vec![latency(level, cycles)];
        let f = judged(&report);
        assert_eq!(f.verdict, verdict, "{level} {cycles}: {}", f.line);
    }
    report.results = vec![latency("L3", 180.0)];
    assert_eq!(judged(&report).verdict, Verdict::Unknown);
}

/// A chase of `ns` at `set` bytes over huge pages (`share` of the region backed by them) on
/// the fixture's machine told it is a Sapphire Rapids with sysinfo's caches.
fn far_chase(report: &Report, set: u64, ns: f64, share: Option<f64>) -> BenchResult {
    let mut r = BenchResult::example(&format!("mem-latency-{set}"), "ns", vec![ns, ns, ns]);
    r.host = report.host.hostname.clone();
    r.subsystem = Subsystem::Memory;
    r.op = "latency".into();
    r.metric = "latency".into();
    r.params.threads = Some(1);
    r.params.working_set_bytes = Some(set);
    r.params
        .other
        .insert("cache_level".into(), serde_json::Value::from("L3"));
    if let Some(share) = share {
        r.params
            .other
            .insert("huge_page_share".into(), serde_json::Value::from(share));
    }
    r
}

/// The shared L3 and DRAM are judged by the row's bands in ns, over huge pages only (over 4 KiB
/// pages each load also walks the page tables), with DRAM where the run's own curve says memory
/// begins, whatever sysinfo's L3.
#[test]
fn the_l3_and_dram_latencies_are_judged_by_the_rows_bands_over_huge_pages() {
    let mut report = document();
    report.host.cpu.microarch = crate::sysinfo::Fact::read("sapphirerapids".to_string(), "test");
    for cache in report.host.cpu.caches.iter_mut().filter(|c| c.level == 3) {
        cache.size_bytes = 480 << 20; // a guest shown its host's L3
    }
    let verdict_of = |report: &Report, id: &str| {
        let findings = judge(report, &[]);
        let f = findings.results.iter().find(|f| f.id == id).unwrap();
        (f.verdict, f.line.clone(), f.missing.clone())
    };
    // Sapphire Rapids' band: L3 25-48 ns, DRAM 90-150 ns.
    for (ns, verdict) in [
        (45.5, Verdict::AtLimit),
        (60.0, Verdict::Below),
        (20.0, Verdict::AboveLimit),
    ] {
        report.results = vec![far_chase(&report, 8 << 20, ns, Some(1.0))];
        let (v, line, _) = verdict_of(&report, "mem-latency-8388608");
        assert_eq!(v, verdict, "{ns} ns: {line}");
    }
    // The curve steps ×4 from 8 MiB to 256 MiB: 256 MiB is DRAM, though sysinfo says L3.
    report.results = vec![
        far_chase(&report, 8 << 20, 45.5, Some(1.0)),
        far_chase(&report, 256 << 20, 120.0, Some(1.0)),
    ];
    let (v, line, _) = verdict_of(&report, "mem-latency-268435456");
    assert_eq!(v, Verdict::AtLimit, "{line}");
    report.results[1].value = 184.0;
    assert_eq!(
        verdict_of(&report, "mem-latency-268435456").0,
        Verdict::Below
    );
    // Over 4 KiB pages (or a kernel that gave too few huge ones) there is no band.
    for share in [None, Some(0.5)] {
        report.results = vec![far_chase(&report, 8 << 20, 45.5, share)];
        let (v, _, missing) = verdict_of(&report, "mem-latency-8388608");
        assert_eq!(v, Verdict::Unknown);
        assert!(
            missing.iter().any(|m| m.contains("--huge-pages")),
            "{missing:?}"
        );
    }
}

/// A 1-thread `op` on `host` of `working_set` bytes held in L1, `gbs` in every repetition,
/// against `peak`.
fn l1_result(host: &str, op: &str, gbs: f64, working_set: u64, peak: PeakRef) -> BenchResult {
    let mut r = BenchResult::example(&format!("mem-{op}-l1"), "GB/s", vec![gbs, gbs, gbs]);
    r.host = host.to_string();
    r.subsystem = Subsystem::Memory;
    r.op = op.into();
    r.params.threads = Some(1);
    r.params.working_set_bytes = Some(working_set);
    r.params
        .other
        .insert("cache_level".into(), serde_json::Value::from("L1"));
    r.peak = Some(peak);
    r
}

/// A bandwidth result whose working set each core holds in its L1 or L2 is judged against the
/// ports' peak the run gave it, in the cache-bandwidth band.
#[test]
fn a_bandwidth_in_a_private_cache_is_judged_in_the_cache_band() {
    let mut report = document();
    let read = |gbs: f64| {
        l1_result(
            &report.host.hostname,
            "read",
            gbs,
            32 << 10,
            PeakRef {
                value: 491.5,
                unit: "GB/s".into(),
                source: "L1 of sapphirerapids: 128 B of loads per cycle × 3.84 GHz".into(),
                pair: None,
            },
        )
    };
    // The fixture's row (Zen 5) reads 0.85 of its ports' peak: at its limit from 0.77.
    for (gbs, verdict) in [
        (400.0, Verdict::AtLimit),
        (300.0, Verdict::Below),
        (520.0, Verdict::AboveLimit),
    ] {
        report.results = vec![read(gbs)];
        let f = judged(&report);
        assert_eq!(f.verdict, verdict, "{gbs}: {}", f.line);
        let physics = &f.expectations[0];
        assert!(
            physics.source.contains("read at L1 of zen5 reaches 0.85"),
            "{}",
            physics.source
        );
    }
    // Above a modelled peak the model is wrong, and the line says so, naming the peak's factors.
    report.results = vec![read(520.0)];
    let f = judged(&report);
    assert!(
        f.line
            .starts_with("above the model's peak, so the model is wrong"),
        "{}",
        f.line
    );
    assert!(
        cause(&f, "model-wrong").evidence[0]
            .value
            .contains("128 B of loads")
    );
    // Without its peak (an unknown row or clock) the finding names the cache peak, not DIMMs.
    let mut unpeaked = read(252.0);
    unpeaked.peak = None;
    report.results = vec![unpeaked];
    let f = judged(&report);
    assert!(
        f.missing.iter().any(|m| m.contains("the cache peak")),
        "{:?}",
        f.missing
    );
}

/// A bandwidth held in a cache stands on the core's clock as a kernel does: where the clock read
/// right after it rose above the one its peak was computed at, it is judged at that clock, and
/// the moved clock is named. An L1 copy on a Sapphire Rapids-class guest read 1.05 of its peak
/// at the run's first clock of 3.57 GHz, with the boost clock moving 3.4-3.9 GHz in that run.
#[test]
fn a_bandwidth_in_a_cache_is_judged_at_the_clock_read_right_after_it() {
    let mut report = document();
    let copy = |gbs: f64, after: Option<f64>| {
        // 128 counted B per cycle at 3.57 GHz, the clock the peak records as used.
        let peak = PeakRef {
            value: 457.0,
            unit: "GB/s".into(),
            source: "L1 of sapphirerapids: 128 B of loads and 64 B of stores per cycle".into(),
            pair: Some(crate::peak::ClockPair {
                at_base: Some(128.0 * 2.6),
                base_ghz: crate::peak::Factor::known(2.6, "cpuinfo", "test"),
                at_turbo: None,
                turbo_ghz: crate::peak::Factor::unknown("test"),
                measured_ghz: Some(3.57),
                used_ghz: Some(crate::peak::Factor::known(3.57, "measured", "test")),
            }),
        };
        let mut r = l1_result(&report.host.hostname, "copy", gbs, 16 << 10, peak);
        r.evidence = Some(CaseEvidence {
            wall_s: 2.0,
            own_cpu_s: 2.0,
            ..CaseEvidence::default()
        });
        if let Some(ghz) = after {
            r.extra.push(crate::result::Extra {
                metric: "clock_after".into(),
                unit: "GHz".into(),
                value: ghz,
                stats: crate::stats::Summary::of(&[ghz]).unwrap(),
            });
        }
        r
    };
    // 479 GB/s is 1.05 of the peak at 3.57 GHz and 0.98 at the 3.84 read right after it.
    report.results = vec![copy(479.0, Some(3.84))];
    let f = judged(&report);
    assert_eq!(f.verdict, Verdict::AtLimit, "{}", f.line);
    // 1.12 is 1.04 at 3.84 GHz: above even there, with the moved clock named beside it.
    report.results = vec![copy(512.0, Some(3.84))];
    let f = judged(&report);
    assert_eq!(f.verdict, Verdict::AboveLimit, "{}", f.line);
    assert!(
        cause(&f, "clock-moved")
            .text
            .starts_with("the core ran at 3.84 GHz right after this case, 8 % above the 3.57 GHz"),
        "{:#?}",
        f.causes
    );
    assert!(f.line.starts_with("above the model's peak"), "{}", f.line);
    assert!(
        cause(&f, "model-wrong")
            .text
            .contains("the model of this machine is wrong")
    );
    // Without a clock read after it, or with the clock unmoved, 1.05 is the model's error.
    for after in [None, Some(3.58)] {
        report.results = vec![copy(479.0, after)];
        let f = judged(&report);
        assert_eq!(f.verdict, Verdict::AboveLimit, "{after:?}: {}", f.line);
        assert_eq!(cause(&f, "model-wrong").kind, "model-wrong");
    }
    // A clock that fell is named beside a figure under the band.
    report.results = vec![copy(300.0, Some(3.19))];
    let f = judged(&report);
    assert_eq!(f.verdict, Verdict::Below, "{}", f.line);
    assert!(cause(&f, "clock-moved").text.contains("11 % below"));
}

/// Above a peak that stands on the user's rating, the rating is wrong, and the line says so;
/// above a modelled peak (a DRAM peak from the DIMM table) the model is.
#[test]
fn above_a_rating_the_rating_is_wrong_and_above_a_model_the_model_is() {
    let mut report = document();
    let mut r = BenchResult::example("disk-seqread", "MB/s", vec![640.0, 650.0, 660.0]);
    r.host = report.host.hostname.clone();
    r.subsystem = Subsystem::Disk;
    r.op = "seqread".into();
    r.peak = Some(PeakRef {
        value: 500.0,
        unit: "MB/s".into(),
        source: "the device's read rating (flag: --disk-mbps)".into(),
        pair: None,
    });
    report.results = vec![r];
    let f = judged(&report);
    assert_eq!(f.verdict, Verdict::AboveLimit);
    assert!(
        f.line
            .starts_with("above the rating given, so the rating is wrong: 1.30 of the peak"),
        "{}",
        f.line
    );
    assert!(cause(&f, "rating-wrong").text.contains("--disk-"), "{f:#?}");
    assert!(!f.line.contains("above what the hardware can do"));
    // A peak off the core's clock does not move with it: 1.12 of a rating (over the band's
    // 1.10) stays above it in a run whose kernel read the clock 10 % above its peak's.
    report.results[0].samples = vec![560.0, 560.0, 560.0];
    report.results[0].value = 560.0;
    report.results.push(kernel_clocked(&report, 0.98, 3.21));
    assert_eq!(judged(&report).verdict, Verdict::AboveLimit);
}
