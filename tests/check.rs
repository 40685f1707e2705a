//! `peakbench check` and `peakbench baseline` through the real binary, on a temporary history,
//! with a one-case plan of 50 ms repetitions. The verdicts are made deterministic by the
//! baselines: one learned from the machine's own runs (`check --learn`), then edited to be far
//! faster or far slower than any machine measures.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

mod common;

/// The fewest learning runs `baseline save` takes (`history::baseline::MIN_RUNS`).
const LEARN: usize = 12;

/// One single-thread FMA case, as short as a case goes.
const PLAN: &str =
    "[[cpu]]\nprecision = [\"f64\"]\nfma = \"yes\"\nthreads = [1]\nduration = \"50ms\"\n";

struct Lab {
    dir: tempfile::TempDir,
}

/// What `check --learn` left behind in a lab: its history database and the saved baseline.
struct Learned {
    history: Vec<u8>,
    saved: String,
}

/// The one baseline this process learns, for every test that starts from a learned one.
static LEARNED: OnceLock<Learned> = OnceLock::new();

impl Lab {
    fn new() -> Lab {
        let lab = Lab {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::write(lab.path("plan.toml"), PLAN).unwrap();
        lab
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn run(&self, args: &[&str]) -> Output {
        common::command(args)
            .env("PEAKBENCH_DB", self.path("history.db"))
            .output()
            .expect("the binary runs")
    }

    /// `check` with the short plan and `args`.
    fn check(&self, args: &[&str]) -> Output {
        let plan = self.path("plan.toml");
        let mut all = vec![
            "check",
            "--config",
            plan.to_str().unwrap(),
            "-r",
            "3",
            "--remeasure",
            "4",
        ];
        all.extend_from_slice(args);
        self.run(&all)
    }

    /// A saved baseline 'node' learned from the fewest checks of this machine a baseline is
    /// learned from, in one command, with the history that learned it. Learning takes LEARN
    /// checks, so it is done once in this process ([`LEARNED`]) and each lab gets a copy of the
    /// history and the saved file, which it may change without touching the others'.
    fn learned(&self) -> serde_json::Value {
        let learned = LEARNED.get_or_init(|| {
            let lab = Lab::new();
            let out = lab.check(&["--learn", &LEARN.to_string()]);
            assert!(out.status.success(), "{}", text(&out.stderr));
            Learned {
                history: std::fs::read(lab.path("history.db")).unwrap(),
                saved: std::fs::read_to_string(lab.saved("node")).unwrap(),
            }
        });
        std::fs::write(self.path("history.db"), &learned.history).unwrap();
        std::fs::create_dir_all(self.path("baselines")).unwrap();
        std::fs::write(self.saved("node"), &learned.saved).unwrap();
        serde_json::from_str(&learned.saved).unwrap()
    }

    fn saved(&self, name: &str) -> PathBuf {
        self.path("baselines").join(format!("{name}.json"))
    }

    /// Writes `baseline` with every sample of every case multiplied by `factor`, to `name`.
    fn scaled(&self, baseline: &serde_json::Value, factor: f64, name: &str) -> PathBuf {
        let mut b = baseline.clone();
        common::scale_baseline(&mut b, factor);
        let file = self.path(name);
        std::fs::write(&file, serde_json::to_string(&b).unwrap()).unwrap();
        file
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn without_a_baseline_check_exits_3_unless_told_it_is_fine() {
    let lab = Lab::new();
    let out = lab.check(&[]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("no baseline for this hardware"));
    let out = lab.check(&["--no-baseline-ok", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "no-baseline");
    assert!(v["run"].as_i64().is_some(), "the check is stored as a run");
    let out = lab.check(&["--reason"]);
    assert!(text(&out.stdout).starts_with("peakbench: no baseline for fingerprint "));
}

#[test]
fn a_learned_baseline_passes_a_faster_machine_and_fails_a_slower_one_naming_the_case() {
    let lab = Lab::new();
    let learned = lab.learned();
    assert_eq!(learned["format"], "peakbench-baseline");
    let case = learned["cases"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(learned["cases"][0]["runs"].as_array().unwrap().len(), LEARN);
    assert_eq!(
        learned["cases"][0]["run_medians"].as_array().unwrap().len(),
        LEARN
    );

    // Against a baseline 1000 times slower than this machine: healthy.
    let slow = lab.scaled(&learned, 1e-3, "slow.json");
    let out = lab.check(&["--baseline", slow.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    // (Pass, or unstable where this machine's repetitions spread: never a failure.)
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("healthy: 1 cases, ") && stdout.contains(" 0 fail"),
        "{stdout}"
    );

    // Against one 1000 times faster: a regression, measured again first.
    let fast = lab.scaled(&learned, 1e3, "fast.json");
    let junit = lab.path("junit.xml");
    let out = lab.check(&[
        "--baseline",
        fast.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with(&format!("FAIL {case}: 0.00 of the baseline's median")),
        "{stdout}"
    );
    assert!(text(&out.stderr).contains("measuring again with 4 repetitions"));
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("failures=\"1\""), "{xml}");
    assert!(xml.contains(&format!("name=\"{case}\"><failure message=\"FAIL {case}")));

    let out = lab.check(&["--baseline", fast.to_str().unwrap(), "--reason"]);
    assert_eq!(out.status.code(), Some(1));
    let reason = text(&out.stdout);
    assert_eq!(reason.lines().count(), 1, "{reason}");
    let reason = reason.trim_end();
    assert!(reason.len() <= 100 && reason.is_ascii(), "{reason}");
    assert!(reason.contains("0.00x baseline"), "{reason}");

    let out = lab.check(&["--baseline", fast.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "regression");
    assert_eq!(v["cases"][0]["status"], "fail");
    assert_eq!(v["cases"][0]["remeasured"], true);
    assert_eq!(v["cases"][0]["repetitions"], 4);
    assert!(v["cases"][0]["p"].as_f64().unwrap() < 0.05);

    // No time left to measure again: judged on the first measurement, and said so.
    let out = lab.check(&[
        "--baseline",
        fast.to_str().unwrap(),
        "--json",
        "--budget",
        "1ms",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["cases"][0]["remeasured"], false);
    assert_eq!(v["cases"][0]["repetitions"], 3);
    assert!(
        text(&out.stderr).contains("not measured again"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_baseline_of_other_hardware_or_a_bad_one_is_refused_naming_the_field() {
    let lab = Lab::new();
    let learned = lab.learned();
    let mut other = learned.clone();
    other["fingerprint"]["cpus"] = 4096.into();
    other["fingerprint"]["kernel_major"] = "1".into();
    let file = lab.path("other.json");
    std::fs::write(&file, other.to_string()).unwrap();
    let out = lab.check(&["--baseline", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("other hardware: cpus (4096 vs "), "{err}");
    assert!(err.contains("kernel_major (1 vs "), "{err}");
    assert!(err.contains("--any-hardware"), "{err}");
    let out = lab.check(&["--baseline", file.to_str().unwrap(), "--any-hardware"]);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        text(&out.stderr)
    );

    a_node_that_lost_cpus_is_judged_against_its_baseline_and_fails(&lab, &learned);

    let mut bad = learned.clone();
    bad["cases"][0]["samples"][1] = serde_json::json!(-5.0);
    std::fs::write(&file, bad.to_string()).unwrap();
    let out = lab.check(&["--baseline", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("cases[0].samples[1]: not a finite number above 0"));
    let out = lab.run(&["baseline", "import", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let out = lab.check(&["--baseline", "nosuch"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no saved baseline named 'nosuch'"));
    let out = lab.check(&["--tolerance", "1.5", "--no-baseline-ok"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--tolerance"));
}

/// The saved baseline made two CPUs bigger than this node, with a case for them: the node, as
/// if it had lost those CPUs, still finds it (its fingerprint differs only by less), and fails
/// naming what it lost and the case its smaller plan dropped.
fn a_node_that_lost_cpus_is_judged_against_its_baseline_and_fails(
    lab: &Lab,
    learned: &serde_json::Value,
) {
    let mut bigger = learned.clone();
    let cpus = bigger["fingerprint"]["cpus"].as_u64().unwrap();
    bigger["fingerprint"]["cpus"] = (cpus + 2).into();
    let inventory = &mut bigger["inventory"];
    assert_eq!(inventory["cpus_online"].as_u64(), Some(cpus), "{inventory}");
    inventory["cpus_online"] = (cpus + 2).into();
    let allowed = inventory["cpus_allowed"].as_array_mut().unwrap();
    let n = allowed.len();
    allowed.extend([serde_json::json!(4000), serde_json::json!(4001)]);
    let mut wide = bigger["cases"][0].clone();
    wide["id"] = "cpu-f64-fma-t4000-strong".into();
    bigger["cases"].as_array_mut().unwrap().push(wide);
    let saved = lab.saved("node");
    let kept = std::fs::read_to_string(&saved).unwrap();
    std::fs::write(&saved, bigger.to_string()).unwrap();
    let out = lab.check(&[]);
    std::fs::write(&saved, kept).unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with(&format!(
            "LOST {cpus} of {} CPUs online (/sys/devices/system/cpu/online)\nLOST {n} of {} \
             CPUs allowed: ",
            cpus + 2,
            n + 2
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains("MISSING cpu-f64-fma-t4000-strong: the plan could not run it"),
        "{stdout}"
    );
    assert!(
        stdout.contains("REGRESSION: 2 items of hardware lost"),
        "{stdout}"
    );
    assert!(text(&out.stderr).contains("this node has less than saved baseline 'node'"));
    let show = text(&lab.run(&["baseline", "show", "node"]).stdout);
    assert!(
        show.contains(&format!("inventory: {cpus} CPUs online")),
        "{show}"
    );
}

#[test]
fn baselines_move_through_a_directory_that_check_only_reads() {
    let lab = Lab::new();
    let learned = lab.learned();
    let key = learned_key(&lab);
    let shared = lab.path("shared");
    std::fs::create_dir(&shared).unwrap();
    let out = lab.run(&["baseline", "export", "node", shared.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let file = shared.join(format!("{key}.json"));
    assert!(file.is_file());
    let before = listing(&shared);
    let out = lab.check(&["--baseline", shared.to_str().unwrap()]);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        text(&out.stderr)
    );
    assert!(text(&out.stdout).contains(&format!("against {}", file.display())));
    assert_eq!(
        listing(&shared),
        before,
        "check wrote into the shared directory"
    );

    // Imported under another name, listed and shown.
    let out = lab.run(&[
        "baseline",
        "import",
        file.to_str().unwrap(),
        "--name",
        "copy",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let list = text(&lab.run(&["baseline", "list"]).stdout);
    assert!(
        list.contains("copy") && list.contains("node") && list.contains(&key),
        "{list}"
    );
    let show = text(&lab.run(&["baseline", "show", "copy"]).stdout);
    assert!(
        show.contains(learned["cases"][0]["id"].as_str().unwrap()),
        "{show}"
    );

    // A directory without this hardware's file: no baseline.
    let empty = lab.path("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = lab.check(&["--baseline", empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3));
}

fn learned_key(lab: &Lab) -> String {
    let out = lab.run(&["baseline", "list"]);
    let list = text(&out.stdout);
    let row = list
        .lines()
        .find(|l| l.starts_with("node "))
        .expect("node is listed");
    row.split_whitespace().nth(1).unwrap().to_string()
}

fn listing(dir: &Path) -> Vec<(String, u64, std::time::SystemTime)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            let meta = e.metadata().unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                meta.len(),
                meta.modified().unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn a_baseline_is_learned_from_enough_runs_and_says_how_many_more_it_needs() {
    let lab = Lab::new();
    for _ in 0..2 {
        assert_eq!(lab.check(&["--no-baseline-ok"]).status.code(), Some(0));
    }
    let out = lab.run(&["baseline", "save", "node"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("2 runs of this hardware") && err.contains("run 10 more checks"),
        "{err}"
    );
    for (args, flag) in [
        (
            vec!["baseline", "save", "node", "--last", "5"],
            "--last: 5 runs",
        ),
        (
            vec!["baseline", "save", "node", "--runs", "1,2"],
            "--runs: 2 runs",
        ),
    ] {
        let out = lab.run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(text(&out.stderr).contains(flag), "{}", text(&out.stderr));
    }
    let out = lab.check(&["--learn", "5"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("--learn: 5 runs are too few") && err.contains("--learn 12"),
        "{err}"
    );
    assert!(
        !err.contains("learning check"),
        "refused before measuring: {err}"
    );

    // Learned in one command: a progress line per check, what was saved on stdout.
    let out = lab.check(&["--learn", &LEARN.to_string(), "--save-as", "rack1"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    // One progress line per check; more than LEARN where a check was disturbed (the tests
    // run beside each other), at most half as many again.
    let checks = err
        .lines()
        .filter(|l| l.starts_with("learning check "))
        .count();
    assert!((LEARN..=LEARN + LEARN / 2).contains(&checks), "{err}");
    assert!(err.contains("saved baseline 'rack1'"), "{err}");
    assert!(text(&out.stdout).starts_with("baseline rack1 "));
    let out = lab.check(&["--learn", &LEARN.to_string(), "--save-as", "rack1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--force"),
        "{}",
        text(&out.stderr)
    );
    // The history now holds enough checks for `baseline save` too.
    let out = lab.run(&["baseline", "save", "node"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn a_baseline_saved_before_run_medians_is_judged_by_its_pooled_median_and_says_so() {
    let lab = Lab::new();
    let mut old = lab.learned();
    for case in old["cases"].as_array_mut().unwrap() {
        case.as_object_mut().unwrap().remove("run_medians");
    }
    let file = lab.path("old.json");
    std::fs::write(&file, old.to_string()).unwrap();
    let out = lab.check(&["--baseline", file.to_str().unwrap()]);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        text(&out.stderr)
    );
    let summary = text(&out.stdout);
    assert!(summary.contains("predates learned spreads"), "{summary}");
    assert!(text(&out.stderr).contains("save the baseline again"));
    let show = lab.run(&["baseline", "show", file.to_str().unwrap()]);
    assert!(text(&show.stdout).contains("predates learned spreads"));
    let show = lab.run(&["baseline", "show", file.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(v["learned_spreads"], false);
}

/// The alert rule docs/check.md shows: the YAML block of its Prometheus section.
fn alert_rule() -> String {
    let page = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/check.md"))
        .unwrap();
    let section = page
        .split("\n## Prometheus\n")
        .nth(1)
        .expect("docs/check.md has a Prometheus section");
    section
        .split("```yaml\n")
        .nth(1)
        .expect("the section shows an alert rule in YAML")
        .split("```")
        .next()
        .unwrap()
        .to_string()
}

/// A baseline of this machine's case scaled by `factor` whose first run fell to 0.3 of the
/// others: no tolerance of 20 % could catch a halving of it.
fn too_noisy(lab: &Lab, learned: &serde_json::Value, factor: f64, name: &str) -> PathBuf {
    let mut b = learned.clone();
    common::scale_baseline(&mut b, factor);
    let case = &mut b["cases"][0];
    // The first run's three samples at 0.3 of the runs' median: on a machine busy while it
    // learned, that run's own samples may lie anywhere among the others.
    let mut medians: Vec<f64> = case["run_medians"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_f64().unwrap())
        .collect();
    medians.sort_by(f64::total_cmp);
    let low = 0.3 * medians[medians.len() / 2];
    let samples = case["samples"].as_array_mut().unwrap();
    for (s, scale) in samples.iter_mut().zip([0.99, 1.0, 1.01]) {
        *s = (low * scale).into();
    }
    case["run_medians"][0] = low.into();
    let file = lab.path(name);
    std::fs::write(&file, b.to_string()).unwrap();
    file
}

#[test]
fn a_case_too_noisy_to_gate_is_ungateable_and_never_fails_the_check() {
    let lab = Lab::new();
    let learned = lab.learned();
    // Against runs far slower than this machine: ungateable whatever the machine does now.
    let noisy = too_noisy(&lab, &learned, 1e-3, "noisy.json");
    let junit = lab.path("junit.xml");
    let prom = lab.path("peakbench.prom");
    let out = lab.check(&[
        "--baseline",
        noisy.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
        "--prometheus",
        prom.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("UNGATEABLE "), "{stdout}");
    assert!(stdout.contains("healthy: 1 cases, 0 pass, 0 fail, 0 unstable, 1 ungateable"));
    assert!(
        std::fs::read_to_string(&junit)
            .unwrap()
            .contains("<skipped message=\"UNGATEABLE")
    );
    let metrics = std::fs::read_to_string(&prom).unwrap();
    assert!(metrics.contains(",status=\"ungateable\"} 1\n"), "{metrics}");
    assert!(
        metrics.contains("peakbench_check_exit_code 0\n"),
        "{metrics}"
    );
    let out = lab.check(&["--baseline", noisy.to_str().unwrap(), "--reason"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        text(&out.stdout),
        "",
        "no drain reason for an ungateable case"
    );

    // Against runs far faster: 1/1000 of them is not failed either, unless the findings find
    // a limit the machine imposes on the case now (another process holding the CPU while the
    // tests share it), which then is its cause.
    let noisy = too_noisy(&lab, &learned, 1e3, "noisy-fast.json");
    let out = lab.check(&["--baseline", noisy.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let case = &v["cases"][0];
    assert!(
        case["baseline"]["spread"]["slowest_share"]
            .as_f64()
            .is_some_and(|share| share < 0.5),
        "{case}"
    );
    if case["rule"] == "imposed" {
        assert_eq!(case["status"], "fail", "{case}");
        assert_eq!(out.status.code(), Some(1));
    } else {
        assert_eq!(case["status"], "ungateable", "{case}");
        assert_eq!(out.status.code(), Some(0));
    }
}

#[test]
fn the_prometheus_file_is_valid_exposition_text_and_a_bad_path_fails_first() {
    let lab = Lab::new();
    let learned = lab.learned();
    let fast = lab.scaled(&learned, 1e3, "fast.json");
    let prom = lab.path("textfile/peakbench.prom");
    std::fs::create_dir(lab.path("textfile")).unwrap();
    let out = lab.check(&[
        "--baseline",
        fast.to_str().unwrap(),
        "--prometheus",
        prom.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let metrics = std::fs::read_to_string(&prom).unwrap();
    assert!(
        metrics.contains("peakbench_check_exit_code 1\n"),
        "{metrics}"
    );
    assert!(metrics.contains(",status=\"fail\"} 1\n"), "{metrics}");
    assert_eq!(
        std::fs::read_dir(lab.path("textfile")).unwrap().count(),
        1,
        "only the .prom file is left"
    );
    if common::prerequisite(common::on_path("promtool").map(drop)) {
        let check = std::process::Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(std::fs::File::open(&prom).unwrap())
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "promtool: {}{}\n{metrics}",
            text(&check.stdout),
            text(&check.stderr)
        );
        let rules = lab.path("rules.yml");
        std::fs::write(&rules, alert_rule()).unwrap();
        let check = std::process::Command::new("promtool")
            .args(["check", "rules"])
            .arg(&rules)
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "promtool: {}{}",
            text(&check.stdout),
            text(&check.stderr)
        );
    }

    let bad = lab.path("no/such/dir/x.prom");
    let out = lab.check(&["--no-baseline-ok", "--prometheus", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("--prometheus: cannot write"), "{err}");
    assert!(
        !err.contains("stored as run"),
        "refused before measuring: {err}"
    );
}

/// Checks of the short plan and a disk table of `disk` (its `dir` and `size`), against the
/// learned baseline made slower (so that the CPU case passes) and given a disk case, and
/// against the same without one.
struct PlaceChecks {
    with_disk: Output,
    /// The same as `with_disk`, with `--reason`.
    reason: Output,
    without_disk: Output,
}

fn check_with_disk_table(lab: &Lab, disk: &str) -> PlaceChecks {
    let learned = lab.learned();
    std::fs::write(
        lab.path("plan.toml"),
        format!(
            "{PLAN}[[disk]]\nop = [\"seqread\"]\nblock = [\"1MiB\"]\nthreads = [1]\nqd = [1]\n\
             {disk}"
        ),
    )
    .unwrap();
    let slow = lab.scaled(&learned, 1e-3, "slow.json");
    let mut with_disk = learned.clone();
    common::scale_baseline(&mut with_disk, 1e-3);
    let mut case = with_disk["cases"][0].clone();
    case["id"] = "disk-seqread-b1048576-t1-qd1-direct-io_uring".into();
    case["subsystem"] = "disk".into();
    with_disk["cases"].as_array_mut().unwrap().push(case);
    let with_disk_file = lab.path("with-disk.json");
    std::fs::write(&with_disk_file, with_disk.to_string()).unwrap();
    let with_disk_file = with_disk_file.to_str().unwrap();
    PlaceChecks {
        with_disk: lab.check(&["--baseline", with_disk_file]),
        reason: lab.check(&["--baseline", with_disk_file, "--reason"]),
        without_disk: lab.check(&["--baseline", slow.to_str().unwrap()]),
    }
}

/// What checks that could not run the baseline's disk case for want of its place print: the
/// loss's `label` line naming `reason`, the case missing for it, the summary's `summary`, the
/// drain reason's `what`, and nothing of it where the baseline has no disk case.
fn assert_place_lost(checks: PlaceChecks, label: &str, reason: &str, summary: &str, what: &str) {
    let out = checks.with_disk;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.starts_with(&format!("{label} {reason}")), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "MISSING disk-seqread-b1048576-t1-qd1-direct-io_uring: the plan could not run it on \
             what is left of the node: {reason}"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("REGRESSION: {summary}, 2 cases, ")) && stdout.contains(" 0 fail"),
        "{stdout}"
    );
    assert!(stderr.contains("[[disk]] #1 skipped: "), "{stderr}");
    let drain = text(&checks.reason.stdout);
    assert_eq!(checks.reason.status.code(), Some(1), "{drain}");
    // (Cut to 100 characters where the temporary directory's path is long.)
    let (drain, expected) = (drain.trim_end(), format!("peakbench: {what}: {reason}"));
    assert!(
        drain.starts_with(&expected) || (drain.len() == 100 && expected.starts_with(drain)),
        "{drain}"
    );
    let stdout = text(&checks.without_disk.stdout);
    assert_eq!(checks.without_disk.status.code(), Some(0), "{stdout}");
    // (The CPU case passes, or is unstable where this machine's repetitions spread.)
    assert!(
        stdout.contains("healthy: 1 cases, ") && stdout.contains(" 0 fail"),
        "{stdout}"
    );
    assert!(!stdout.contains(label), "{stdout}");
}

/// A disk table whose directory has no room for its test file (here a size no file system
/// has) fails a check whose baseline has disk cases, naming the room, and leaves one whose
/// baseline has none healthy with a note: a scratch file system that filled up is a node's
/// fault only where the node used to run the disk cases.
#[test]
fn a_directory_without_room_for_the_disk_cases_of_the_baseline_fails_the_check() {
    let lab = Lab::new();
    let dir = lab.path("scratch");
    std::fs::create_dir(&dir).unwrap();
    let checks = check_with_disk_table(
        &lab,
        &format!("size = \"1000TiB\"\ndir = {:?}\n", dir.to_str().unwrap()),
    );
    assert_place_lost(
        checks,
        "NO ROOM",
        "the test file needs 1000 TiB and ",
        "no room for the disk cases",
        "no room",
    );
}

/// The same with the directory on a file system mounted read-only, as ext4 remounts itself
/// after an I/O error (a tmpfs mounted `ro` here, where this process may mount).
#[test]
fn a_read_only_directory_for_the_disk_cases_of_the_baseline_fails_the_check() {
    let lab = Lab::new();
    let dir = lab.path("scratch");
    std::fs::create_dir(&dir).unwrap();
    let tmpfs = common::mount_tmpfs(&dir, "ro,size=16m");
    if !common::prerequisite(
        tmpfs
            .is_some()
            .then_some(())
            .ok_or("cannot mount a read-only tmpfs here".into()),
    ) {
        return;
    }
    let checks = check_with_disk_table(
        &lab,
        &format!("size = \"1MiB\"\ndir = {:?}\n", dir.to_str().unwrap()),
    );
    drop(tmpfs);
    assert_place_lost(
        checks,
        "READ-ONLY",
        &format!("{} is on a read-only file system", dir.display()),
        "the disk cases' directory read-only",
        "read-only",
    );
}
