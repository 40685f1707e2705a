//! The HTML report of real measurements: a short run of every subsystem, each swept parameter
//! at two values (three working sets for the cache curve), made by the test through
//! `peakbench run --config`, then loaded in headless Chromium: every chart users draw is there,
//! every line has as many points as its sweep had values, and the page logs nothing.

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
    let config = dir.join("short.toml");
    std::fs::write(&config, CONFIG).unwrap();
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
