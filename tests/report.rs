//! The HTML report of real measurements: a short run of every subsystem, each swept parameter
//! at two values (three working sets for the cache curve), made by the test through
//! `peakbench run --config`, then loaded in headless Chromium: every chart users draw is there,
//! every line has as many points as its sweep had values, and the page logs nothing. And the
//! report of a judged run (a fixture document with findings) opens with its findings.

use std::collections::BTreeMap;
use std::path::Path;

mod common;

/// One table per subsystem, each with two values of every swept parameter.
const CONFIG: &str = r#"
[[cpu]]
precision = ["f64", "f32"]
threads = [1, 2]
duration = "20ms"

[[mem]]
op = ["read", "copy"]
block = ["8KB", "64KB"]
threads = [1, 2]
size = "16MiB"
duration = "20ms"

[[mem-latency]]
sizes = ["16KiB", "256KiB", "8MiB"]
duration = "20ms"

[[disk]]
op = ["randread"]
block = ["4KiB", "64KiB"]
threads = [1, 2]
qd = [1, 4]
size = "16MiB"
duration = "60ms"
ramp = "0s"

[[net]]
proto = ["tcp", "udp"]
mode = ["throughput", "latency"]
msg = ["1KB", "32KB"]
streams = [1, 2]
duration = "60ms"
omit = "0s"
"#;

/// The charts a user draws from these tables, by title, and how many points each solid line
/// must have (the number of values its sweep had).
const EXPECTED: [(&str, usize); 14] = [
    ("cpu flops: throughput against threads", 2),
    (
        "cpu flops: throughput against threads: efficiency against the theoretical peak",
        2,
    ),
    ("memory: throughput against block size", 2),
    ("memory: throughput against threads", 2),
    ("memory: access_time against block size", 2),
    (
        "memory latency: latency against working set (cache-latency curve)",
        3,
    ),
    ("disk randread: throughput against block size", 2),
    ("disk randread: iops against block size", 2),
    ("disk randread: latency against threads", 2),
    ("disk randread: iops against queue depth", 2),
    ("network: throughput against message size", 2),
    ("network: throughput against streams", 2),
    ("network: rtt against message size", 2),
    ("network: latency against message size", 2),
];

/// Title → (line name, points) of every solid line of every chart in `document`.
fn lines(document: &str) -> BTreeMap<String, Vec<(String, usize)>> {
    let mut charts = BTreeMap::new();
    for chart in document.split("<svg class=\"chart\"").skip(1) {
        let chart = &chart[..chart.find("</svg>").expect("every chart is closed")];
        let title = &chart[chart.find("<title>").unwrap() + 7..chart.find("</title>").unwrap()];
        let lines = chart
            .split("<g class=\"series\" data-name=\"")
            .skip(1)
            .map(|rest| {
                let name = rest[..rest.find('"').unwrap()].to_string();
                let at = rest.find("data-points=\"").unwrap() + 13;
                let end = at + rest[at..].find('"').unwrap();
                (name, rest[at..end].parse().unwrap())
            })
            .collect();
        charts.insert(title.replace("&amp;", "&"), lines);
    }
    charts
}

fn run_everything(dir: &Path) -> (std::path::PathBuf, serde_json::Value) {
    run_config(dir, CONFIG)
}

/// Runs the tables of `config` through `peakbench run --config` (history in `dir`), and returns
/// the HTML report's path and the results document.
fn run_config(dir: &Path, config_text: &str) -> (std::path::PathBuf, serde_json::Value) {
    let config = dir.join("short.toml");
    std::fs::write(&config, config_text).unwrap();
    let html = dir.join("report.html");
    let json = dir.join("results.json");
    let db = dir.join("history.db");
    let output = common::run(&[
        "run",
        "--config",
        config.to_str().unwrap(),
        "--dir",
        dir.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
        "-o",
        json.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
        "-r",
        "2",
        "--warmup",
        "0",
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let doc = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (html, doc)
}

#[test]
fn the_report_of_real_short_runs_has_every_chart_with_every_point() {
    let Some(browser) = common::chromium() else {
        common::prerequisite(Err(
            "no chromium on PATH (CI installs Debian's chromium)".into()
        ));
        return;
    };
    // Under the target dir, not /tmp: O_DIRECT needs a real file system, not tmpfs.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (html, doc) = run_everything(dir.path());
    let results = doc["results"].as_array().unwrap();
    for subsystem in ["cpu", "memory", "disk", "network"] {
        assert!(
            results.iter().any(|r| r["subsystem"] == subsystem),
            "no {subsystem} results"
        );
    }
    let (dom, console) = common::chromium_dom(browser, &html, dir.path());
    assert!(console.is_empty(), "console messages: {console:?}");
    let charts = lines(&dom);
    for (title, points) in EXPECTED {
        let lines = charts
            .get(title)
            .unwrap_or_else(|| panic!("no chart '{title}' in {:?}", charts.keys()));
        assert!(!lines.is_empty(), "{title}: no lines");
        for (name, count) in lines {
            assert_eq!(*count, points, "{title}: line '{name}'");
        }
    }
    // No chart anywhere drops a point of a sweep or names a line by bookkeeping.
    for (title, lines) in &charts {
        if title.ends_with("time series") {
            continue;
        }
        for (name, count) in lines {
            assert!(
                *count >= 2 || title.contains("linpack"),
                "{title}: '{name}' has {count} point(s)"
            );
            for bookkeeping in ["bytes_moved", "stamps_checked", "region_bytes", "ops_per_"] {
                assert!(!name.contains(bookkeeping), "{title}: '{name}'");
            }
        }
    }
    // The tables carry latency where the case has it, and no bookkeeping.
    assert!(dom.contains("<th>latency p99</th>"));
    assert!(!dom.contains("stamps_checked="));
}

/// The charts of the other tables users run: Linpack and DGEMM at two sizes and two thread
/// counts, the disk latency sweep (1 KiB random reads and writes, the same I/Os at 1 and 2
/// threads) and UDP at two offered rates.
const MORE: &str = r#"
[[linpack]]
n = [200, 400]
threads = [1, 2]

[[gemm]]
n = [128, 256]
threads = [1, 2]

[[disk]]
op = ["randread", "randwrite"]
block = ["1KiB"]
buffered-if-unaligned = true
threads = [1, 2]
ios = 2000
size = "16MiB"

[[net]]
proto = "udp"
mode = "throughput"
msg = "1KB"
rate = ["100M", "200M"]
duration = "60ms"
omit = "0s"
"#;

/// Chart title, the lines it must have (by name, the solid ones), and their points.
const MORE_EXPECTED: [(&str, &[&str], usize); 8] = [
    (
        "cpu: throughput against threads",
        &["linpack n=200", "linpack n=400", "gemm n=128", "gemm n=256"],
        2,
    ),
    (
        "cpu: throughput against threads: efficiency against the theoretical peak",
        &["linpack n=200", "linpack n=400", "gemm n=128", "gemm n=256"],
        2,
    ),
    (
        "cpu: throughput against n",
        &["linpack 1T", "linpack 2T", "gemm 1T", "gemm 2T"],
        2,
    ),
    (
        "disk: latency against threads",
        &[
            "randread p50",
            "randread p99",
            "randwrite p50",
            "randwrite p99",
        ],
        2,
    ),
    ("disk: iops against threads", &["randread", "randwrite"], 2),
    (
        "disk: throughput against threads",
        &["randread", "randwrite"],
        2,
    ),
    (
        "network udp-throughput: throughput against offered rate",
        &["udp-throughput"],
        2,
    ),
    (
        "network udp-throughput: loss against offered rate",
        &["udp-throughput"],
        2,
    ),
];

#[test]
fn linpack_gemm_the_disk_latency_sweep_and_udp_rates_have_their_charts() {
    let Some(browser) = common::chromium() else {
        common::prerequisite(Err(
            "no chromium on PATH (CI installs Debian's chromium)".into()
        ));
        return;
    };
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (html, _) = run_config(dir.path(), MORE);
    let (dom, console) = common::chromium_dom(browser, &html, dir.path());
    assert!(console.is_empty(), "console messages: {console:?}");
    let charts = lines(&dom);
    for (title, names, points) in MORE_EXPECTED {
        let lines = charts
            .get(title)
            .unwrap_or_else(|| panic!("no chart '{title}' in {:?}", charts.keys()));
        for name in names {
            let found = lines.iter().find(|(n, _)| n == name);
            let (_, count) =
                found.unwrap_or_else(|| panic!("{title}: no line '{name}' in {lines:?}"));
            assert_eq!(*count, points, "{title}: line '{name}'");
        }
    }
    // The offered rate reads with its unit on the axis, in the legends and in the table.
    assert!(dom.contains(">100 Mbit/s</text>"), "no rate tick in Mbit/s");
    assert!(dom.contains("at 200 Mbit/s"), "no rate in the table");
    assert!(!dom.contains("rate_bps"), "an unformatted rate is shown");
}

/// A real mixed network run: TCP and UDP throughput at two message sizes, UDP at one offered
/// rate at the same sizes, round trips. UDP unlimited and UDP at the rate are two lines of two
/// points each (they were one line of four, two per message size, and the run of one stream
/// drew a chart "against streams" with every point at 1), and per-stream shares get no charts.
#[test]
fn a_mixed_network_run_draws_tcp_udp_and_the_paced_udp_as_their_own_lines() {
    let dir = tempfile::tempdir().unwrap();
    let config = r#"
[[net]]
proto = ["tcp", "udp"]
mode = "throughput"
msg = ["1KB", "32KB"]
duration = "60ms"
omit = "0s"

[[net]]
proto = "udp"
mode = "throughput"
msg = ["1KB", "32KB"]
rate = "1G"
duration = "60ms"
omit = "0s"

[[net]]
proto = ["tcp", "udp"]
mode = "latency"
msg = ["1B", "64B"]
duration = "60ms"
"#;
    let (html, _) = run_config(dir.path(), config);
    let charts = lines(&std::fs::read_to_string(html).unwrap());
    let throughput = &charts["network: throughput against message size"];
    let names: Vec<&str> = throughput.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "tcp-throughput tcp",
            "udp-throughput udp",
            "udp-throughput udp at 1 Gbit/s"
        ]
    );
    assert!(throughput.iter().all(|(_, p)| *p == 2), "{throughput:?}");
    assert_eq!(charts["network: rtt against message size"].len(), 2);
    assert!(
        !charts
            .keys()
            .any(|t| t.contains("against streams") || t.contains("stream 0")),
        "{:?}",
        charts.keys()
    );
}

/// The report of a document with findings opens with them. Rendered from a real run's document with
/// hand-made findings of every verdict (tests/fixtures/make_findings.py), loaded in Chromium: the
/// Findings section comes before the run table, the summary and the first results table, every
/// verdict has its badge, and the page logs nothing.
#[test]
fn the_report_of_a_judged_run_opens_with_its_findings() {
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/findings.json");
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("findings.html");
    let db = dir.path().join("history.db");
    let output = common::run(&[
        "report",
        fixture,
        "--html",
        html.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    opens_with_findings(&page);
    let Some(browser) = common::chromium() else {
        common::prerequisite(Err(
            "no chromium on PATH (CI installs Debian's chromium)".into()
        ));
        return;
    };
    let (dom, console) = common::chromium_dom(browser, &html, dir.path());
    assert!(console.is_empty(), "console messages: {console:?}");
    opens_with_findings(&dom);
}

/// Checks that the findings of a page come first, with a badge per verdict and the causes
/// named with their values.
fn opens_with_findings(page: &str) {
    let findings = page.find(">Findings</h2>").expect("a findings section");
    for later in [
        "<table class=\"run\"",
        ">Summary</h2>",
        "<table class=\"results\"",
    ] {
        let at = page.find(later).unwrap_or_else(|| panic!("no {later}"));
        assert!(findings < at, "{later} comes before the findings");
    }
    for verdict in ["at-limit", "below", "above-limit", "unstable", "unknown"] {
        assert!(
            page.contains(&format!("class=\"verdict {verdict}\"")),
            "no {verdict} badge"
        );
    }
    assert!(
        page.contains("cpu-quota 0.5 CPU: "),
        "the quota is not named"
    );
    assert!(
        page.contains("qdisc 150 Mbit/s: "),
        "the qdisc is not named"
    );
}
