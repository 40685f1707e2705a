//! Runs `peakbench roofline` for real on tiny sizes and durations: the document has its
//! ceilings, roofs, sweep and ridge points, the sweep counts as stated, the SVG labels every
//! ceiling and roof, and bad input exits 2 naming the flag.

use std::process::Output;

mod common;

fn peakbench(args: &[&str]) -> Output {
    common::command(args)
        .arg("--no-history")
        .output()
        .expect("the binary runs")
}

/// A tiny roofline: L1 and a small "DRAM" set, two intensities, 20 ms repetitions.
const TINY: &[&str] = &[
    "roofline",
    "--json",
    "--threads",
    "1,2",
    "--levels",
    "L1,DRAM",
    "--dram-size",
    "8MiB",
    "--flops",
    "1,64",
    "--duration",
    "20ms",
    "--warmup",
    "0",
    "-r",
    "1",
    "--point",
    "mine:0.5:1.5",
];

/// The `<g class="{class}" data-name="…">` names of an SVG.
fn names_of(svg: &str, class: &str) -> Vec<String> {
    let open = format!("<g class=\"{class}\" data-name=\"");
    svg.split(&open)
        .skip(1)
        .map(|rest| rest[..rest.find('"').unwrap()].to_string())
        .collect()
}

/// The texts of `<text class="{class}" …>…</text>` elements.
fn texts_of(svg: &str, class: &str) -> Vec<String> {
    let open = format!("<text class=\"{class}\"");
    svg.split(&open)
        .skip(1)
        .map(|rest| {
            let start = rest.find('>').unwrap() + 1;
            rest[start..rest.find("</text>").unwrap()].to_string()
        })
        .collect()
}

#[test]
fn a_tiny_roofline_has_ceilings_roofs_sweep_ridges_and_a_labelled_chart() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("roofline-tiny");
    std::fs::create_dir_all(&dir).unwrap();
    let svg_path = dir.join("chart.svg");
    let _ = std::fs::remove_file(&svg_path);
    let mut args = TINY.to_vec();
    let svg_arg = svg_path.to_str().unwrap().to_string();
    args.extend(["--svg", &svg_arg]);
    let started = std::time::Instant::now();
    let output = peakbench(&args);
    let doc = common::json(&output);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(120),
        "a tiny roofline is quick"
    );
    let results = doc["results"].as_array().unwrap();
    let of = |op: &str| -> Vec<&serde_json::Value> {
        results
            .iter()
            .filter(|r| r["subsystem"] == "roofline" && r["op"] == op)
            .collect()
    };
    assert!(!of("compute").is_empty());
    // 2 levels × read, triad, copy × 1 and 2 threads.
    assert_eq!(of("bandwidth").len(), 12);
    // 2 levels × 2 intensities, on 2 threads.
    let sweep = of("sweep");
    assert_eq!(sweep.len(), 4);
    for r in &sweep {
        let f = r["params"]["other"]["flop_per_element"].as_u64().unwrap();
        let intensity = r["params"]["other"]["intensity"].as_f64().unwrap();
        // Read only, 8 B per element: intensity = FLOP per element / 8.
        assert_eq!(intensity, f as f64 / 8.0);
        assert_eq!(r["unit"], "GFLOP/s");
        let bandwidth = r["extra"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["metric"] == "bandwidth")
            .unwrap()["value"]
            .as_f64()
            .unwrap();
        let gflops = r["value"].as_f64().unwrap();
        assert!(
            (bandwidth * intensity / gflops - 1.0).abs() < 1e-9,
            "GB/s × FLOP/B = GFLOP/s: {bandwidth} × {intensity} vs {gflops}"
        );
        assert_eq!(r["params"]["pinned"], true, "the sweep pins by default");
    }
    for r in of("bandwidth") {
        let extra = r["extra"].as_array().unwrap();
        let wa = extra
            .iter()
            .find(|e| e["metric"] == "throughput_with_write_allocate")
            .unwrap()["value"]
            .as_f64()
            .unwrap();
        let app = r["value"].as_f64().unwrap();
        let factor = match r["params"]["other"]["traffic"].as_str().unwrap() {
            "read" => 1.0,
            "triad" => 32.0 / 24.0,
            "copy" => 24.0 / 16.0,
            other => panic!("traffic {other}"),
        };
        assert!((wa / app - factor).abs() < 1e-9);
        assert!(
            r["params"]["other"]["same_as"]
                .as_str()
                .unwrap()
                .starts_with("peakbench mem --op ")
        );
    }

    let model_result = of("model");
    assert_eq!(model_result.len(), 1);
    let model = &model_result[0]["params"]["other"]["roofline"];
    let ceilings = model["ceilings"].as_array().unwrap();
    let roofs = model["roofs"].as_array().unwrap();
    let ridges = model["ridges"].as_array().unwrap();
    assert_eq!(roofs.len(), 12);
    assert!(!ceilings.is_empty());
    // Every roof meets every ceiling of its thread count.
    let pairs: usize = roofs
        .iter()
        .map(|r| {
            ceilings
                .iter()
                .filter(|c| c["threads"] == r["threads"])
                .count()
        })
        .sum();
    assert_eq!(ridges.len(), pairs);
    for ridge in ridges {
        let c = ceilings
            .iter()
            .find(|c| c["name"] == ridge["ceiling"] && c["threads"] == ridge["threads"])
            .unwrap();
        let r = roofs
            .iter()
            .find(|r| {
                format!(
                    "{} {}",
                    r["level"].as_str().unwrap(),
                    r["traffic"].as_str().unwrap()
                ) == ridge["roof"].as_str().unwrap()
                    && r["threads"] == ridge["threads"]
            })
            .unwrap();
        let expected = c["gflops"].as_f64().unwrap() / r["gbps"].as_f64().unwrap();
        assert!((ridge["intensity"].as_f64().unwrap() / expected - 1.0).abs() < 1e-12);
        assert!(
            ridge["intensity_write_allocate"].as_f64().unwrap()
                <= ridge["intensity"].as_f64().unwrap()
        );
    }
    // The self-check is stated for each level's two plateaus.
    assert_eq!(model["checks"].as_array().unwrap().len(), 4);
    let point = &model["points"][0];
    assert_eq!(point["name"], "mine");
    assert!(
        point["bound_by"].as_str().unwrap().ends_with("roof")
            || point["bound_by"].as_str().unwrap().ends_with("ceiling")
    );

    // The chart: every ceiling and roof drawn at the chart's thread count, each labelled.
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
    assert_eq!(svg.matches("<svg").count(), 1);
    let threads = model["threads"].as_u64().unwrap();
    let drawn_ceilings = names_of(&svg, "ceiling");
    let ceiling_labels = texts_of(&svg, "ceiling-label");
    for c in ceilings
        .iter()
        .filter(|c| c["threads"].as_u64() == Some(threads))
    {
        let name = c["name"].as_str().unwrap();
        assert!(drawn_ceilings.iter().any(|n| n == name), "{name} drawn");
        assert!(
            ceiling_labels
                .iter()
                .any(|l| l.starts_with(&format!("{name} ")) && l.contains("GFLOP/s")),
            "{name} labelled: {ceiling_labels:?}"
        );
    }
    let drawn_roofs = names_of(&svg, "roof");
    let roof_labels = texts_of(&svg, "roof-label");
    for r in roofs
        .iter()
        .filter(|r| r["threads"].as_u64() == Some(threads))
    {
        let name = format!(
            "{} {}",
            r["level"].as_str().unwrap(),
            r["traffic"].as_str().unwrap()
        );
        assert!(drawn_roofs.contains(&name), "{name} drawn");
        assert!(
            roof_labels
                .iter()
                .any(|l| l.starts_with(&format!("{name} ")) && l.contains("GB/s")),
            "{name} labelled: {roof_labels:?}"
        );
    }
    assert_eq!(svg.matches("class=\"sweep\"").count(), 2);
    assert!(svg.matches("class=\"ridge\"").count() >= 6);
    assert!(svg.contains("class=\"point\" data-name=\"mine\""));
}

#[test]
fn the_plan_prints_the_working_sets_and_the_sweep() {
    let output = peakbench(&["roofline", "--dry-run", "--json"]);
    let plan = common::json(&output);
    let config = &plan["config"]["roofline"];
    assert!(config["levels"].as_array().unwrap().len() >= 2);
    assert_eq!(config["flop_per_element"][0], 1);
    assert_eq!(
        config["flop_per_element"]
            .as_array()
            .unwrap()
            .last()
            .unwrap(),
        1024
    );
    assert_eq!(config["sweep_pinned"], true);
    assert!(
        plan["estimate_s"].as_f64().unwrap() < 180.0,
        "under 3 minutes"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("DRAM:"), "the sizes are printed: {stderr}");
    // A dry run times nothing: an L3 keeps sysinfo's size, and the plan says a run measures it.
    if stderr.contains("note: L3:") {
        assert!(stderr.contains("a dry run times nothing"), "{stderr}");
        assert!(!stderr.contains("L3 latency probe:"), "{stderr}");
    }
}

#[test]
fn bad_input_exits_2_naming_the_flag() {
    for (args, flag) in [
        (vec!["roofline", "--flops", "3"], "--flops"),
        (vec!["roofline", "--flops", "0"], "--flops"),
        (vec!["roofline", "--levels", "L9"], "--levels"),
        (vec!["roofline", "--point", "k:1"], "--point"),
        (vec!["roofline", "--point", "k:-1:2"], "--point"),
        (
            vec!["roofline", "--svg", "/nonexistent-peakbench-dir/x.svg"],
            "--svg",
        ),
        (vec!["roofline", "--dram-size", "0"], "--dram-size"),
    ] {
        let output = peakbench(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
    }
}
