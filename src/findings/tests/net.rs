//! TCP receivers: a window too small for the round trip, and a sleeping receiver named as a
//! cause only on its wake-ups per MB.

use super::*;

#[test]
fn a_receive_window_too_small_for_the_round_trip_is_named() {
    // 1 MiB of tcp_rmem over a 10 ms round trip: 512 KiB per 10 ms = 419 Mb/s.
    let mut report = document();
    report
        .evidence
        .as_mut()
        .unwrap()
        .sysctls
        .insert("net.ipv4.tcp_rmem".into(), "4096 131072 1048576".into());
    let mut r = tcp(&report, 415.0);
    r.params
        .other
        .insert("server".into(), "10.9.0.2:5201".into());
    let mut rtt = BenchResult::example("net-rtt", "µs", vec![10_000.0; 3]);
    rtt.op = "tcp-latency".into();
    rtt.params
        .other
        .insert("server".into(), "10.9.0.2:5201".into());
    report.results.push(r);
    report.results.push(rtt);
    let f = judged(&report);
    let c = cause(&f, "socket-buffer");
    assert!((c.bound.unwrap() - 419.430_4).abs() < 1e-3, "{c:#?}");
}

/// A TCP result whose receiver slept, at 0.85 of iperf3's figure, with its receiving threads woken
/// `per_mb` times per MB (`None`: not counted, as an older peakbench).
fn slept_below_iperf3(report: &Report, per_mb: Option<f64>, spun: bool) -> BenchResult {
    let mut r = tcp(report, 15_600.0);
    r.params
        .other
        .insert("receiver_wait".into(), "sleep".into());
    r.params.other.insert("receiver_spun".into(), spun.into());
    if let Some(v) = per_mb {
        r.extra.push(crate::result::Extra {
            metric: crate::result::RECEIVER_WAKEUPS.into(),
            unit: "per MB".into(),
            value: v,
            stats: crate::stats::Summary::of(&[v * 0.98, v, v * 1.02]).unwrap(),
        });
    }
    r.reference = Some(crate::result::Reference {
        tool: "iperf3".into(),
        command: "iperf3 -c 10.9.0.2 -l 131072 -P 1".into(),
        value: Some(18_300.0),
        ratio: Some(15_600.0 / 18_300.0),
        note: None,
    });
    r
}

#[test]
fn a_sleeping_receiver_is_named_below_iperf3_only_when_it_woke_often() {
    let judged_with = |per_mb, spun| {
        let mut report = document();
        report
            .results
            .push(slept_below_iperf3(&report, per_mb, spun));
        judged(&report)
    };
    // Woken once per 16 KiB: named, with its count as the evidence.
    let f = judged_with(Some(64.0), false);
    assert_eq!(f.verdict, Verdict::Below, "{f:#?}");
    let c = cause(&f, "receiver-sleeps");
    assert_eq!(c.value, Some(64.0));
    assert!(c.text.contains("once per 15 KiB"), "{}", c.text);
    assert!(c.evidence[0].value.contains("64.0 per MB"), "{c:#?}");
    // Below iperf3 all the same, but woken once per 256 KiB read, or not sleeping, or with no
    // count to show: the receiver's mode is not named.
    for (per_mb, spun) in [(Some(4.0), false), (Some(64.0), true), (None, false)] {
        let f = judged_with(per_mb, spun);
        assert_eq!(f.verdict, Verdict::Below, "{f:#?}");
        assert!(
            f.causes.iter().all(|c| c.kind != "receiver-sleeps"),
            "{per_mb:?} {spun}: {f:#?}"
        );
    }
}
