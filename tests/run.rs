//! `peakbench run`: the quick preset end to end (every subsystem, stored, reported, compared),
//! the standard matrix as a plan, and config files checked before anything runs.

use std::path::Path;
use std::process::Output;

mod common;

fn peakbench(args: &[&str], history: &Path) -> Output {
    common::command(args)
        .env("PEAKBENCH_DB", history.join("history.db"))
        .output()
        .expect("the binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn the_quick_preset_covers_every_subsystem_lands_in_the_history_and_names_its_report() {
    let dir = tempfile::tempdir().unwrap();
    let disk_dir = dir.path().join("disk");
    std::fs::create_dir(&disk_dir).unwrap();
    let out = peakbench(
        &[
            "run",
            "--preset",
            "quick",
            "-r",
            "1",
            "--warmup",
            "0",
            "--dir",
            disk_dir.to_str().unwrap(),
            "--json",
        ],
        dir.path(),
    );
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(doc["status"], "complete");
    assert_eq!(doc["config"]["preset"], "quick");
    let subsystems: std::collections::BTreeSet<&str> = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["subsystem"].as_str().unwrap())
        .collect();
    assert_eq!(
        subsystems.into_iter().collect::<Vec<_>>(),
        ["cpu", "disk", "memory", "network"]
    );
    // mem latency's table prints where the curve steps up, as `peakbench mem latency` does.
    assert!(stderr.contains("caches (sysinfo): "), "{stderr}");
    // The last line names the run and its HTML report, which exists.
    let last = stderr.lines().last().unwrap_or("");
    assert!(last.starts_with("run 1: HTML report in "), "{stderr}");
    let report = Path::new(last.trim_start_matches("run 1: HTML report in "));
    let html = std::fs::read_to_string(report).expect("the report was written");
    assert!(html.contains("<svg"), "the report has charts");
    // The disk test file is gone.
    assert_eq!(std::fs::read_dir(&disk_dir).unwrap().count(), 0);

    let listed = peakbench(&["history"], dir.path());
    assert!(listed.status.success());
    assert!(text(&listed.stdout).contains("quick"));
    let same = peakbench(&["compare", "latest", "1"], dir.path());
    assert!(same.status.success(), "{}", text(&same.stderr));
    assert!(
        text(&same.stdout).contains(" 0 beyond the noise"),
        "{}",
        text(&same.stdout)
    );
}

#[test]
fn the_standard_plan_spells_out_the_whole_matrix() {
    let dir = tempfile::tempdir().unwrap();
    let out = peakbench(
        &[
            "run",
            "--preset",
            "standard",
            "--dry-run",
            "--dir",
            dir.path().to_str().unwrap(),
        ],
        dir.path(),
    );
    let plan = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The standard matrix runs every ISA the CPU has: the widest one is in the plan.
    let sysinfo = common::run_json(&["sysinfo", "--json"]);
    let isas = sysinfo["peaks"]["cpu"]["isas"].as_array().unwrap();
    let widest = isas.last().unwrap().as_str().unwrap();
    let widest_fma = format!("cpu f64-{widest}-fma 8 threads");
    for expected in [
        "cpu i8-",
        widest_fma.as_str(),
        "linpack n=5000",
        "mem randrw",
        "stream-triad",
        "mem latency",
        "rewrite",
        "80 MB",
        "net tcp throughput",
        "net udp latency",
    ] {
        assert!(
            plan.contains(expected),
            "no '{expected}' in the plan:\n{plan}"
        );
    }
    // Nothing was created by a dry run, disk test file included.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn a_bad_config_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("matrix.toml");
    std::fs::write(
        &config,
        "[[cpu]]\nprecision = \"f64\"\n\n[[mem]]\nop = \"teleport\"\n",
    )
    .unwrap();
    let out = peakbench(&["run", "--config", config.to_str().unwrap()], dir.path());
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("[[mem]] #1"), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing was measured");
}
