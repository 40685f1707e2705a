//! The benchmark scripts keep working: `bench/smoke.sh` runs the ones that need no standard
//! tool and take seconds (the history's and the CPU's) with their smallest settings, against
//! the binary these tests built, and fails when one breaks (a traceback, a time-out). The whole
//! set, reference tools and the MPI build included, is `bench/smoke.sh` with no argument.

mod common;

use std::path::Path;
use std::process::Command;

#[test]
fn the_cheap_bench_scripts_run_to_the_end() {
    if !common::prerequisite(common::on_path("python3").map(drop)) {
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/smoke.sh");
    let mut cmd = Command::new("bash");
    cmd.arg(&script)
        .args(["hist", "cpu"])
        .env("PEAKBENCH", common::binary());
    common::isolate(&mut cmd);
    let out = cmd.output().expect("bash runs bench/smoke.sh");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("2 passed, 0 failed, 0 skipped"), "{text}");
}
