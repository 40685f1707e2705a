//! What every integration test shares: the binary run with its history and home isolated,
//! JSON output read back, and prerequisites that skip a test (or, in CI's strict mode, fail it).
//!
//! Every run of the binary goes through [`command`], which points `PEAKBENCH_DB`, `HOME` and
//! `XDG_DATA_HOME` at a fresh directory under cargo's target dir, so no test can reach the
//! user's history (`tests/architecture.rs` checks that no test runs the binary another way).
//! A test that wants a history it reads back gives `--db` itself.

#![allow(dead_code)] // each test binary uses its own part of the harness

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A fresh directory for one run's home and history, under cargo's target dir.
fn sandbox() -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "home-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&dir).expect("a sandbox directory");
    dir
}

/// Points a command's history and home at a sandbox.
pub fn isolate(cmd: &mut Command) -> &mut Command {
    let home = sandbox();
    cmd.env("PEAKBENCH_DB", home.join("history.db"))
        .env("HOME", &home)
        .env("XDG_DATA_HOME", home.join("data"))
}

/// The peakbench binary's path.
pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_peakbench")
}

/// The binary with `args`, its history and home isolated.
pub fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(binary());
    cmd.args(args);
    isolate(&mut cmd);
    cmd
}

/// Runs the binary to its end.
pub fn run(args: &[&str]) -> Output {
    command(args).output().expect("the binary runs")
}

/// The JSON document a successful run printed on stdout.
pub fn json(output: &Output) -> serde_json::Value {
    assert!(
        output.status.success(),
        "exit {:?}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

/// Runs a command that must succeed and print one JSON document.
pub fn run_json(args: &[&str]) -> serde_json::Value {
    json(&run(args))
}

/// Whether CI's strict mode is on (`PEAKBENCH_STRICT_TESTS=1`, set by `.ci/run`): a test
/// whose prerequisite CI installs (Chromium, iproute2, root) fails instead of skipping.
pub fn strict() -> bool {
    std::env::var_os("PEAKBENCH_STRICT_TESTS").is_some_and(|v| v == "1")
}

/// `Ok` when the test can run; otherwise prints why it is skipped and returns `false`, or
/// panics in strict mode.
pub fn prerequisite(available: Result<(), String>) -> bool {
    match available {
        Ok(()) => true,
        Err(why) if strict() => panic!("strict mode: a prerequisite CI provides is missing: {why}"),
        Err(why) => {
            eprintln!("skipped: {why}");
            false
        }
    }
}

/// Whether the tests run as root (mounts, loop devices, network namespaces).
pub fn root() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    match unsafe { libc::geteuid() } {
        0 => Ok(()),
        _ => Err("needs root".into()),
    }
}

/// A program on PATH, or why not.
pub fn on_path(name: &str) -> Result<PathBuf, String> {
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(name))
                .find(|p| p.is_file())
        })
        .ok_or_else(|| format!("no {name} on PATH"))
}

/// A loop device over a sparse file in a temporary directory, carrying a GPT partition table
/// (written by `sfdisk`, so both the primary header at the start and the backup at the end are
/// there); detached when dropped.
pub struct LoopDevice {
    pub path: PathBuf,
    _dir: tempfile::TempDir,
}

impl LoopDevice {
    /// A `mib` MiB device with a GPT and one partition, or why the machine cannot make one.
    pub fn with_gpt(mib: u64) -> Result<LoopDevice, String> {
        root()?;
        let losetup = on_path("losetup")?;
        let sfdisk = on_path("sfdisk")?;
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let image = dir.path().join("disk.img");
        std::fs::File::create(&image)
            .and_then(|f| f.set_len(mib << 20))
            .map_err(|e| e.to_string())?;
        let label = std::process::Command::new(sfdisk)
            .args(["--quiet", "--label", "gpt"])
            .arg(&image)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write;
                child.stdin.take().unwrap().write_all(b",,L\n")?;
                child.wait_with_output()
            })
            .map_err(|e| format!("sfdisk: {e}"))?;
        if !label.status.success() {
            return Err(format!(
                "sfdisk: {}",
                String::from_utf8_lossy(&label.stderr).trim()
            ));
        }
        let attach = Command::new(losetup)
            .args(["-f", "--show"])
            .arg(&image)
            .output()
            .map_err(|e| format!("losetup: {e}"))?;
        if !attach.status.success() {
            return Err(format!(
                "losetup cannot attach a loop device here: {}",
                String::from_utf8_lossy(&attach.stderr).trim()
            ));
        }
        let path = PathBuf::from(String::from_utf8_lossy(&attach.stdout).trim());
        Ok(LoopDevice { path, _dir: dir })
    }

    /// Every byte of the device.
    pub fn contents(&self) -> Vec<u8> {
        std::fs::read(&self.path).expect("the loop device reads")
    }

    pub fn as_str(&self) -> &str {
        self.path.to_str().unwrap()
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.path).status();
    }
}

/// Runs `command` with a deadline, its output going through files in `dir` (a pipe left
/// undrained would block a large --dump-dom); `None` when it did not finish in time (it is
/// killed).
pub fn bounded(command: &mut Command, dir: &Path, limit: Duration) -> Option<Output> {
    let out_path = dir.join("chromium.out");
    let err_path = dir.join("chromium.err");
    let mut child = command
        .stdout(std::fs::File::create(&out_path).ok()?)
        .stderr(std::fs::File::create(&err_path).ok()?)
        .spawn()
        .ok()?;
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().ok()? {
            return Some(Output {
                status,
                stdout: std::fs::read(&out_path).ok()?,
                stderr: std::fs::read(&err_path).ok()?,
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// A Chromium on PATH.
pub fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|name| on_path(name).is_ok())
}

/// Flags for a headless Chromium that logs the page's console on stderr.
pub const CHROMIUM_FLAGS: [&str; 6] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--enable-logging=stderr",
    "--v=0",
];

/// The DOM of `html` after headless Chromium `browser` loaded it, and the page's console
/// messages (Chromium logs them as ":CONSOLE" lines; its own noise never carries that tag).
pub fn chromium_dom(browser: &str, html: &Path, dir: &Path) -> (String, Vec<String>) {
    let profile = format!("--user-data-dir={}", dir.join("profile").display());
    let url = format!("file://{}", html.display());
    let Some(output) = bounded(
        Command::new(browser)
            .args(CHROMIUM_FLAGS)
            .arg(&profile)
            .args(["--dump-dom", &url]),
        dir,
        Duration::from_secs(90),
    ) else {
        panic!("{browser} did not finish within 90 s");
    };
    let log = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{browser} failed: {log}");
    let console = log
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        console,
    )
}

/// Runs `ip ARGS` (iproute2); its stderr is the error when it fails.
pub fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A control connection to a `net serve` on loopback spoken by hand, as a hostile client
/// would: lines out, the server's messages in (each read within 10 s).
pub struct RawClient {
    pub writer: std::net::TcpStream,
    pub reader: std::io::BufReader<std::net::TcpStream>,
}

impl RawClient {
    pub fn connect(port: u16) -> RawClient {
        let writer = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        writer
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let reader = std::io::BufReader::new(writer.try_clone().unwrap());
        RawClient { writer, reader }
    }

    pub fn send(&mut self, line: &str) {
        use std::io::Write;
        self.writer.write_all(line.as_bytes()).unwrap();
        self.writer.write_all(b"\n").unwrap();
    }

    /// The next message other than the server's challenge.
    pub fn recv(&mut self) -> serde_json::Value {
        use std::io::BufRead;
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).unwrap();
            assert!(!line.is_empty(), "the server closed the control connection");
            let msg: serde_json::Value = serde_json::from_str(&line).unwrap();
            if msg["type"] != "challenge" {
                return msg;
            }
        }
    }

    pub fn hello(&mut self, test: serde_json::Value) -> serde_json::Value {
        let hello = serde_json::json!({"type": "hello", "peakbench": 2, "test": test});
        self.send(&hello.to_string());
        self.recv()
    }
}

/// Multiplies every sample of every case of baseline `b` by `factor`, and sets each of its
/// runs' medians to the pooled median: runs that did not spread, so that a verdict against it
/// does not hang on how far this machine's learning runs spread while the tests share its CPUs.
pub fn scale_baseline(b: &mut serde_json::Value, factor: f64) {
    for case in b["cases"].as_array_mut().unwrap() {
        let mut samples: Vec<f64> = case["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_f64().unwrap() * factor)
            .collect();
        case["samples"] = samples.clone().into();
        samples.sort_by(f64::total_cmp);
        let median = samples[samples.len() / 2];
        for m in case["run_medians"].as_array_mut().unwrap() {
            *m = median.into();
        }
    }
}

/// A tmpfs mounted on a test's directory, unmounted when dropped however the test ends (so
/// that the directory can be removed).
pub struct Tmpfs(PathBuf);

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Mounts a tmpfs with these options on `dir`; `None` where that is not allowed (not root).
pub fn mount_tmpfs(dir: &Path, options: &str) -> Option<Tmpfs> {
    Command::new("mount")
        .args(["-t", "tmpfs", "-o", options, "peakbench-test"])
        .arg(dir)
        .status()
        .is_ok_and(|s| s.success())
        .then(|| Tmpfs(dir.to_path_buf()))
}
