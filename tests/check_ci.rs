//! The CI job of docs/check.md, run as a CI runner runs it: its script, read from the page,
//! in a fresh project directory that keeps `.peakbench/` between jobs (the runner type's
//! cache), with `peakbench` on PATH and a one-case plan in `PEAKBENCH_CHECK_ARGS`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;

const PLAN: &str =
    "[[cpu]]\nprecision = [\"f64\"]\nfma = \"yes\"\nthreads = [1]\nduration = \"50ms\"\n";

/// The job's script: the literal block under `script: - |` in the page's YAML.
fn job_script() -> String {
    let page = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/check.md"))
        .unwrap();
    let yaml = page
        .split("```yaml\n")
        .nth(1)
        .expect("docs/check.md shows a CI job in YAML")
        .split("```")
        .next()
        .unwrap();
    let body = yaml
        .split("    - |\n")
        .nth(1)
        .expect("the job's script is a literal block");
    let lines: Vec<&str> = body
        .lines()
        .map(|l| l.strip_prefix("      ").unwrap_or(l))
        .collect();
    assert!(lines.iter().any(|l| l.contains("peakbench check")));
    lines.join("\n") + "\n"
}

struct Runner {
    dir: tempfile::TempDir,
    bin: PathBuf,
    script: String,
}

impl Runner {
    fn new() -> Runner {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        std::os::unix::fs::symlink(common::binary(), bin.join("peakbench")).unwrap();
        std::fs::create_dir(dir.path().join("project")).unwrap();
        std::fs::write(dir.path().join("plan.toml"), PLAN).unwrap();
        Runner {
            dir,
            bin,
            script: job_script(),
        }
    }

    fn project(&self) -> PathBuf {
        self.dir.path().join("project")
    }

    /// One job: the script, in the project directory, its exit code and output.
    fn job(&self) -> Output {
        let mut cmd = Command::new("sh");
        common::isolate(&mut cmd);
        let path = format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let plan = self.dir.path().join("plan.toml");
        cmd.args(["-c", &self.script])
            .current_dir(self.project())
            .env("PATH", path)
            .env(
                "PEAKBENCH_CHECK_ARGS",
                format!("--config {} -r 3 --remeasure 4", plan.display()),
            );
        cmd.output().unwrap()
    }

    fn baselines(&self) -> Vec<PathBuf> {
        let dir = self.project().join(".peakbench/by-hardware");
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        files.sort();
        files
    }

    fn junit(&self) -> String {
        std::fs::read_to_string(self.project().join("peakbench.xml")).unwrap()
    }
}

/// The baseline `file` with every sample multiplied by `factor` ([`common::scale_baseline`]).
fn scale(file: &Path, factor: f64) {
    let mut b: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    common::scale_baseline(&mut b, factor);
    std::fs::write(file, b.to_string()).unwrap();
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn the_ci_job_learns_a_baseline_per_runner_then_gates_with_junit() {
    let runner = Runner::new();
    // The first jobs pass with no baseline; the twelfth (the fewest runs a baseline is
    // learned from) learns one for this runner type.
    for job in 1..=12 {
        let out = runner.job();
        assert_eq!(out.status.code(), Some(0), "job {job}: {}", text(&out));
        assert!(runner.junit().contains("name=\"baseline\"><skipped"));
        assert_eq!(
            runner.baselines().len(),
            usize::from(job == 12),
            "job {job}"
        );
    }
    let baseline = runner.baselines().remove(0);
    let key = baseline.file_stem().unwrap().to_string_lossy().into_owned();
    assert_eq!(key.len(), 16, "{key}");

    // Against a baseline far slower than any machine: the job passes, one testcase passed.
    scale(&baseline, 1e-3);
    let out = runner.job();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let xml = runner.junit();
    assert!(xml.contains("tests=\"1\" failures=\"0\""), "{xml}");

    // Against one far faster: the job fails, and the report says which case and why.
    scale(&baseline, 1e6);
    let out = runner.job();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let xml = runner.junit();
    assert!(xml.contains("tests=\"1\" failures=\"1\""), "{xml}");
    assert!(xml.contains("<failure message=\"FAIL cpu-f64-"), "{xml}");
}
