//! Runs the real binary on small files in temp dirs: the bytes it claims, both I/O paths, the
//! engine fallback, every refusal (exit 2, foreign data untouched), --keep and Ctrl-C.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

/// The binary with these arguments (its history isolated, and not stored for `disk` runs).
fn command(args: &[&str]) -> Command {
    let mut cmd = common::command(args);
    if args.first() == Some(&"disk") {
        cmd.arg("--no-history");
    }
    cmd
}

fn peakbench(args: &[&str]) -> Output {
    command(args).output().expect("the binary runs")
}

fn json(output: &Output) -> serde_json::Value {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

/// A short disk run in `dir` with these extra arguments.
fn disk(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "disk",
        "--dir",
        dir.to_str().unwrap(),
        "--size",
        "4MiB",
        "-d",
        "150ms",
        "--ramp",
        "0",
        "-r",
        "2",
        "--json",
    ];
    args.extend_from_slice(extra);
    peakbench(&args)
}

fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// Waits up to 20 s for the run's test file (`peakbench-….tmp`) to appear in `dir`; false if it
/// never does. The writability probe (`.peakbench-probe-…`) comes and goes before it, so a
/// Ctrl-C sent when any file appears can stop the run before it has a test file.
fn wait_for_test_file(dir: &Path) -> bool {
    let start = Instant::now();
    loop {
        if leftovers(dir)
            .iter()
            .any(|name| name.starts_with("peakbench-"))
        {
            return true;
        }
        if start.elapsed() > Duration::from_secs(20) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Exit 2 with one `Error:` line that mentions `flag`.
fn assert_refused(output: &Output, flag: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].starts_with("Error: ") && lines[0].contains(flag),
        "{stderr}"
    );
}

#[test]
fn each_op_moves_the_bytes_it_claims_direct_and_buffered() {
    let dir = tempfile::tempdir().unwrap();
    let doc = json(&disk(
        dir.path(),
        &[
            "--op",
            "seqread,seqwrite,randread,randwrite,readwrite,rewrite",
            "-b",
            "8B,4KiB,64KiB",
            "--qd",
            "4",
            "-t",
            "2",
            "--buffered-if-unaligned",
        ],
    ));
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 6 * 3);
    for r in results {
        let p = &r["params"];
        let block = p["block_bytes"].as_u64().unwrap();
        assert_eq!(p["direct"].as_bool().unwrap(), block != 8, "{}", r["id"]);
        assert_eq!(
            p["other"]["io"],
            if block == 8 { "buffered" } else { "direct" }
        );
        assert!(["io_uring", "sync"].contains(&p["engine"].as_str().unwrap()));
        let moved = p["other"]["bytes_moved"].as_array().unwrap();
        assert_eq!(moved.len(), 2);
        for m in moved {
            let m = m.as_u64().unwrap();
            assert!(m > 0 && m % block == 0, "{}: {m} B moved", r["id"]);
        }
        let lat = &r["latency_ns"];
        assert!(lat["p50"].as_f64().unwrap() <= lat["p99"].as_f64().unwrap());
        assert!(lat["count"].as_u64().unwrap() * block >= moved[0].as_u64().unwrap());
        let counting = r["counting"].as_str().unwrap();
        assert!(counting.contains("MB = 10^6"), "{counting}");
        // The wall time per I/O is 1/IOPS in each repetition: the fastest repetition's
        // against the most IOPS, the slowest's against the fewest. (Not the medians: of two
        // repetitions each is a mean, and a buffered one that met a writeback stall read 26 ×
        // slower than the other, which put their product at 7.)
        let extra = |metric: &str| {
            let all = r["extra"].as_array().unwrap();
            let e = all.iter().find(|e| e["metric"] == metric);
            e.unwrap_or_else(|| panic!("{}: no {metric}", r["id"]))["stats"].clone()
        };
        let iops = if r["metric"] == "iops" {
            r["stats"].clone()
        } else {
            extra("iops")
        };
        let wall_per_io = extra("wall_time_per_io");
        let stat = |s: &serde_json::Value, name: &str| s[name].as_f64().unwrap();
        assert!(stat(&wall_per_io, "min") > 0.0, "{}", r["id"]);
        for (wall, ops) in [("min", "max"), ("max", "min")] {
            let product = stat(&wall_per_io, wall) * 1e-9 * stat(&iops, ops);
            assert!((product - 1.0).abs() < 1e-9, "{}: {product}", r["id"]);
        }
        let reads = r["op"] != "seqwrite" && r["op"] != "randwrite";
        if reads && block >= 4096 {
            assert!(
                p["other"]["stamps_checked"].as_u64().unwrap() > 0,
                "{}",
                r["id"]
            );
        }
        if block == 8 {
            assert!(
                r["warnings"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|w| w.as_str().unwrap().contains("buffered"))
            );
        }
    }
    assert!(
        leftovers(dir.path()).is_empty(),
        "{:?}",
        leftovers(dir.path())
    );
}

#[test]
fn refused_io_uring_falls_back_to_sync_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let output = command(&["disk", "--dir", dir.path().to_str().unwrap()])
        .args(["--size", "2MiB", "-d", "100ms", "--ramp", "0", "-r", "1"])
        .args(["--op", "randread", "-b", "4KiB", "--qd", "8", "--json"])
        .env("PEAKBENCH_TEST_REFUSE_IO_URING", "1")
        .output()
        .unwrap();
    let doc = json(&output);
    let r = &doc["results"][0];
    assert_eq!(r["params"]["engine"], "sync");
    assert_eq!(r["params"]["queue_depth"], 1);
    let warnings = r["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().contains("io_uring is not available"))
    );
    let forced = command(&[
        "disk",
        "--dir",
        dir.path().to_str().unwrap(),
        "--engine",
        "io_uring",
    ])
    .env("PEAKBENCH_TEST_REFUSE_IO_URING", "1")
    .output()
    .unwrap();
    assert_refused(&forced, "--engine");
    assert!(leftovers(dir.path()).is_empty());
}

#[test]
fn a_foreign_file_is_refused_and_left_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("precious.db");
    let content: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&victim, &content).unwrap();
    let before = std::fs::metadata(&victim).unwrap().modified().unwrap();
    for extra in [
        &["--op", "seqwrite"][..],
        &["--op", "seqread", "--keep"][..],
    ] {
        let mut args = vec![
            "disk",
            "--file",
            victim.to_str().unwrap(),
            "--size",
            "64KiB",
        ];
        args.extend_from_slice(extra);
        assert_refused(&peakbench(&args), "--file");
    }
    assert_eq!(std::fs::read(&victim).unwrap(), content);
    assert_eq!(
        std::fs::metadata(&victim).unwrap().modified().unwrap(),
        before
    );
    assert_eq!(leftovers(dir.path()), vec!["precious.db".to_string()]);
}

#[test]
fn a_block_device_is_refused_even_when_allowed_if_it_is_in_use() {
    let Some(dev) = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|l| {
            l.split(" - ")
                .nth(1)?
                .split_whitespace()
                .nth(1)
                .map(String::from)
        })
        .find(|d| d.starts_with("/dev/") && Path::new(d).exists())
    else {
        eprintln!("skipped: no mounted block device to try");
        return;
    };
    assert_refused(
        &peakbench(&["disk", "--file", &dev]),
        "--allow-device-write",
    );
    let allowed = peakbench(&["disk", "--file", &dev, "--allow-device-write", &dev]);
    assert_refused(&allowed, "--allow-device-write");
    let stderr = String::from_utf8_lossy(&allowed.stderr);
    assert!(
        stderr.contains("mounted") || stderr.contains("holds") || stderr.contains("partitions"),
        "{stderr}"
    );
}

#[test]
fn not_enough_space_is_refused_before_anything_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let output = peakbench(&[
        "disk",
        "--dir",
        dir.path().to_str().unwrap(),
        "--size",
        "900TiB",
    ]);
    assert_refused(&output, "--size");
    assert!(leftovers(dir.path()).is_empty());
}

#[test]
fn a_read_only_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let tmpfs = common::mount_tmpfs(dir.path(), "ro,size=16m");
    let mounted = tmpfs.is_some();
    let target = if mounted {
        dir.path().to_path_buf()
    } else {
        common::prerequisite(Err("cannot mount a read-only tmpfs here".into()));
        eprintln!("trying /proc/self instead");
        Path::new("/proc/self").to_path_buf()
    };
    let output = peakbench(&["disk", "--dir", target.to_str().unwrap(), "--size", "1MiB"]);
    // --size-fit reads the free space first: read-only is named there too, not "too little".
    let fitted = peakbench(&["disk", "--dir", target.to_str().unwrap(), "--size-fit"]);
    drop(tmpfs);
    assert_refused(&output, "--dir");
    assert_refused(&fitted, "--dir");
    if mounted {
        assert!(
            String::from_utf8_lossy(&fitted.stderr).contains("is on a read-only file system"),
            "{}",
            String::from_utf8_lossy(&fitted.stderr)
        );
    }
}

#[test]
fn an_unaligned_direct_block_says_to_use_buffered() {
    let dir = tempfile::tempdir().unwrap();
    let output = peakbench(&[
        "disk",
        "--dir",
        dir.path().to_str().unwrap(),
        "-b",
        "8KB",
        "--size",
        "1MiB",
    ]);
    assert_refused(&output, "--block");
    assert!(String::from_utf8_lossy(&output.stderr).contains("--buffered"));
}

#[test]
fn a_kept_file_is_reused_by_the_next_run() {
    let dir = tempfile::tempdir().unwrap();
    let keep = ["--op", "randread", "-b", "4KiB", "--keep"];
    json(&disk(dir.path(), &keep));
    let files = leftovers(dir.path());
    assert_eq!(files.len(), 1);
    assert!(files[0].starts_with("peakbench-") && files[0].ends_with(".tmp"));
    let second = disk(dir.path(), &keep);
    let doc = json(&second);
    assert!(String::from_utf8_lossy(&second.stderr).contains("reusing"));
    assert!(
        doc["results"][0]["params"]["other"]["stamps_checked"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(leftovers(dir.path()), files);
    // Named with --file and no --keep, the kept file is used once more and removed.
    let path = dir.path().join(&files[0]);
    let third = peakbench(&[
        "disk",
        "--file",
        path.to_str().unwrap(),
        "--size",
        "4MiB",
        "-d",
        "100ms",
        "-r",
        "1",
        "--op",
        "seqread",
        "-b",
        "1MiB",
        "--json",
    ]);
    json(&third);
    assert!(leftovers(dir.path()).is_empty());
}

#[test]
fn a_kept_file_is_reused_where_a_second_one_would_not_fit() {
    let dir = tempfile::tempdir().unwrap();
    // 100 MiB: room for one 24 MiB file beside the 64 MiB + 1 % that peakbench leaves free,
    // not for two.
    let tmpfs = common::mount_tmpfs(dir.path(), "size=100m");
    if !common::prerequisite(
        tmpfs
            .is_some()
            .then_some(())
            .ok_or("cannot mount a tmpfs here (needs root)".into()),
    ) {
        return;
    }
    let run = || {
        peakbench(&[
            "disk",
            "--dir",
            dir.path().to_str().unwrap(),
            "--size",
            "24MiB",
            "--buffered",
            "--op",
            "seqread",
            "-b",
            "1MiB",
            "-d",
            "100ms",
            "--ramp",
            "0",
            "-r",
            "1",
            "--keep",
            "--json",
        ])
    };
    let first = run();
    let second = run();
    let files = leftovers(dir.path());
    drop(tmpfs);
    json(&first);
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        second.status.success() && stderr.contains("reusing"),
        "{stderr}"
    );
    assert_eq!(files.len(), 1, "{files:?}");
}

#[test]
fn ctrl_c_mid_run_leaves_no_test_file() {
    let dir = tempfile::tempdir().unwrap();
    let child = command(&["disk", "--dir", dir.path().to_str().unwrap()])
        .args([
            "--size",
            "8MiB",
            "-d",
            "5s",
            "--op",
            "randwrite",
            "-b",
            "4KiB",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait_for_test_file(dir.path()), "the run created its file");
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: sending SIGINT to our own child process.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let output = child.wait_with_output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        leftovers(dir.path()).is_empty(),
        "{:?}",
        leftovers(dir.path())
    );
}

/// Voluntary context switches of all of a process's threads so far.
fn context_switches(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.unwrap().path().join("status")).ok())
        .flat_map(|status| {
            status
                .lines()
                .filter_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                .map(|n| n.trim().parse::<u64>().unwrap())
                .collect::<Vec<_>>()
        })
        .sum()
}

/// While the reference tool runs, peakbench sleeps until the tool exits (a timer waking beside
/// fio on a VM changes what fio measures at QD 1), and a SIGTERM still stops the tool at once.
#[test]
fn a_reference_tool_runs_with_peakbench_asleep_and_dies_with_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let started = dir.path().join("fio.pid");
    let fake = bin.join("fio");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho $$ > \"$FAKE_FIO_PID\"\nexec sleep 60\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let child = command(&["disk", "--dir", data.to_str().unwrap()])
        .args(["--size", "2MiB", "-d", "100ms", "--ramp", "0", "-r", "1"])
        .args(["--op", "randread", "-b", "4KiB", "--reference", "--json"])
        .env("PATH", path)
        .env("FAKE_FIO_PID", &started)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !std::fs::read_to_string(&started).is_ok_and(|s| s.ends_with('\n'))
        && start.elapsed() < Duration::from_secs(20)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let fio: i32 = std::fs::read_to_string(&started)
        .expect("the reference run started the fake fio")
        .trim()
        .parse()
        .unwrap();
    // The fake fio writes its pid as it starts, while peakbench may still be starting the
    // threads that read its output (each blocks once as it starts): let it settle first.
    std::thread::sleep(Duration::from_millis(300));
    let before = context_switches(child.id());
    std::thread::sleep(Duration::from_millis(500));
    let woke = context_switches(child.id()) - before;
    assert!(
        woke <= 2,
        "peakbench woke {woke} times in 0.5 s while the reference tool ran"
    );
    let signalled = Instant::now();
    // SAFETY: sending SIGTERM to our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let output = child.wait_with_output().unwrap();
    assert!(
        signalled.elapsed() < Duration::from_secs(5),
        "the run did not stop at once"
    );
    assert_eq!(
        output.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // SAFETY: signal 0 only asks whether the process exists.
    let alive = unsafe { libc::kill(fio, 0) } == 0;
    assert!(!alive, "the reference tool outlived the run");
    assert!(leftovers(&data).is_empty(), "{:?}", leftovers(&data));
}

#[test]
fn dry_run_checks_the_target_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let output = peakbench(&[
        "disk",
        "--dir",
        dir.path().to_str().unwrap(),
        "--op",
        "seqread,randread,rewrite",
        "-b",
        "8B,8KB,8MB,80MB",
        "-t",
        "1,2,4,8",
        "--buffered-if-unaligned",
        "--dry-run",
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.starts_with("48 cases"), "{text}");
    assert!(leftovers(dir.path()).is_empty());
}

#[test]
fn an_allowed_blank_loop_device_is_used_and_a_formatted_one_refused() {
    let dir = tempfile::tempdir().unwrap();
    let backing = dir.path().join("backing.img");
    std::fs::write(&backing, vec![0u8; 16 << 20]).unwrap();
    let attach = |file: &Path| -> Option<String> {
        let out = Command::new("losetup")
            .args(["--find", "--show"])
            .arg(file)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let Some(dev) = attach(&backing) else {
        common::prerequisite(Err("cannot attach a loop device here (losetup)".into()));
        return;
    };
    let output = peakbench(&[
        "disk",
        "--file",
        &dev,
        "--allow-device-write",
        &dev,
        "--size",
        "8MiB",
        "-d",
        "100ms",
        "--ramp",
        "0",
        "-r",
        "1",
        "--op",
        "randwrite,seqread",
        "-b",
        "4KiB",
        "--json",
    ]);
    let _ = Command::new("losetup").args(["-d", &dev]).status();
    let doc = json(&output);
    assert_eq!(doc["results"].as_array().unwrap().len(), 2);
    let bytes = std::fs::read(&backing).unwrap();
    assert!(
        bytes[..8 << 20].iter().filter(|&&b| b == 0).count() < 1 << 17,
        "written"
    );
    assert!(
        bytes[8 << 20..].iter().all(|&b| b == 0),
        "nothing past --size"
    );

    // The same device with an ext4 file system (libblkid finds it) is refused and left as it was.
    if !common::prerequisite(common::on_path("mkfs.ext4").map(|_| ())) {
        return;
    }
    std::fs::write(&backing, vec![0u8; 16 << 20]).unwrap();
    make_ext4(&backing);
    let formatted = std::fs::read(&backing).unwrap();
    let Some(dev) = attach(&backing) else {
        return;
    };
    let output = peakbench(&["disk", "--file", &dev, "--allow-device-write", &dev]);
    let _ = Command::new("losetup").args(["-d", &dev]).status();
    assert_refused(&output, "--allow-device-write");
    assert!(String::from_utf8_lossy(&output.stderr).contains("ext4"));
    assert_eq!(std::fs::read(&backing).unwrap(), formatted);
}

/// Puts an ext4 file system on `image` (no lazy initialisation: nothing is written after).
fn make_ext4(image: &Path) {
    let status = Command::new("mkfs.ext4")
        .args(["-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"])
        .arg(image)
        .status()
        .unwrap();
    assert!(status.success(), "mkfs.ext4 failed");
}

/// A loop device over an image file, detached when dropped.
struct Loop {
    dev: String,
}

impl Loop {
    /// Attaches `image`, or says why the machine cannot (not root, no loop devices).
    fn attach(image: &Path) -> Result<Loop, String> {
        common::root()?;
        let losetup = common::on_path("losetup")?;
        let out = Command::new(losetup)
            .args(["--find", "--show"])
            .arg(image)
            .output()
            .map_err(|e| format!("losetup: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "losetup cannot attach a loop device here: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Loop {
            dev: String::from_utf8_lossy(&out.stdout).trim().to_string(),
        })
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
    }
}

/// A short write run on an allowed device.
fn write_device(dev: &str) -> Output {
    peakbench(&[
        "disk",
        "--file",
        dev,
        "--allow-device-write",
        dev,
        "--size",
        "8MiB",
        "-d",
        "100ms",
        "--ramp",
        "0",
        "-r",
        "1",
        "--op",
        "randwrite",
        "-b",
        "4KiB",
        "--json",
    ])
}

/// A blank, unmounted device that another program holds (as md, dm or btrfs hold theirs) passes
/// every check of /proc and /sys, and was once written. peakbench opens it with O_EXCL, which the
/// kernel refuses: exit 2, device unchanged. A mounted one (an ext4 mounted read-only, so that
/// nothing else writes to it) is refused the same way.
#[test]
fn a_device_held_or_mounted_is_refused_and_left_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("held.img");
    std::fs::write(&image, vec![0u8; 16 << 20]).unwrap();
    let device = match Loop::attach(&image) {
        Ok(device) => device,
        Err(why) => {
            common::prerequisite(Err(why));
            return;
        }
    };
    let holder = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_EXCL)
            .open(&device.dev)
            .unwrap()
    };
    let output = write_device(&device.dev);
    assert_refused(&output, "--allow-device-write");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("refuses to open it exclusively"),
        "{stderr}"
    );
    drop(holder);
    drop(device);
    assert!(
        std::fs::read(&image).unwrap().iter().all(|&b| b == 0),
        "the held device was written"
    );

    if !common::prerequisite(common::on_path("mkfs.ext4").map(|_| ())) {
        return;
    }
    make_ext4(&image);
    let formatted = std::fs::read(&image).unwrap();
    let device = Loop::attach(&image).unwrap();
    let point = dir.path().join("mnt");
    std::fs::create_dir(&point).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "ext4", "-o", "ro,noload", &device.dev])
        .arg(&point)
        .status()
        .is_ok_and(|s| s.success());
    if !common::prerequisite(if mounted {
        Ok(())
    } else {
        Err("cannot mount an ext4 loop device here".into())
    }) {
        return;
    }
    let output = write_device(&device.dev);
    let _ = Command::new("umount").arg(&point).status();
    drop(device);
    assert_refused(&output, "--allow-device-write");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("is mounted on"), "{stderr}");
    assert_eq!(std::fs::read(&image).unwrap(), formatted, "changed");
}

/// A device whose start was wiped but that still holds a GPT backup header in its last sector,
/// or an md 1.0 RAID member (its superblock 8 KiB from the end), is refused and left unchanged:
/// libblkid (wipefs) finds both signatures, which a look at the first 256 KiB alone missed.
#[test]
fn a_signature_at_the_end_of_a_device_is_refused_and_left_unchanged() {
    if !common::prerequisite(common::on_path("sfdisk").map(|_| ())) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let size: usize = 16 << 20;

    // A GPT whose protective MBR and primary header are zeroed: only the backup is left.
    let gpt = dir.path().join("gpt.img");
    std::fs::write(&gpt, vec![0u8; size]).unwrap();
    let mut sfdisk = Command::new("sfdisk")
        .args(["--quiet", "--label", "gpt"])
        .arg(&gpt)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        sfdisk.stdin.take().unwrap().write_all(b",,L\n").unwrap();
    }
    assert!(sfdisk.wait().unwrap().success());
    let mut bytes = std::fs::read(&gpt).unwrap();
    bytes[..1 << 20].fill(0);
    assert_eq!(&bytes[size - 512..size - 504], b"EFI PART");
    std::fs::write(&gpt, &bytes).unwrap();

    // An md 1.0 superblock: magic, major version 1, and its own offset in sectors.
    let md = dir.path().join("md.img");
    let mut md_bytes = vec![0u8; size];
    let at = (size & !0xfff) - 0x2000;
    md_bytes[at..at + 4].copy_from_slice(&0xa92b_4efcu32.to_le_bytes());
    md_bytes[at + 4..at + 8].copy_from_slice(&1u32.to_le_bytes());
    md_bytes[at + 144..at + 152].copy_from_slice(&((at as u64) >> 9).to_le_bytes());
    std::fs::write(&md, &md_bytes).unwrap();

    for (image, expected, what) in [(&gpt, &bytes, "gpt"), (&md, &md_bytes, "raid")] {
        let device = match Loop::attach(image) {
            Ok(device) => device,
            Err(why) => {
                common::prerequisite(Err(why));
                return;
            }
        };
        let output = write_device(&device.dev);
        drop(device);
        assert_refused(&output, "--allow-device-write");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(what), "{stderr}");
        assert!(
            std::fs::read(image).unwrap() == *expected,
            "{what}: the device was written"
        );
    }
}

/// fio reads `--filename` as a `:`-separated list, so a `--dir` with a colon in its name (an
/// ISO time) once made fio write `<parent>/run` and `./2026-…/peakbench-N.tmp`, files peakbench
/// never checked. Real fio writes the checked file only.
#[test]
fn a_colon_in_dir_reaches_fio_as_the_one_checked_file() {
    if !common::prerequisite(common::on_path("fio").map(|_| ())) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("run:2026-11-24T08:00");
    std::fs::create_dir(&data).unwrap();
    let cwd = dir.path().join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    let output = command(&["disk", "--dir", data.to_str().unwrap()])
        .args(["--size", "2MiB", "-d", "100ms", "--ramp", "0", "-r", "1"])
        .args(["--op", "seqwrite", "-b", "64KiB", "--reference", "--json"])
        .current_dir(&cwd)
        .output()
        .unwrap();
    let doc = json(&output);
    let reference = &doc["results"][0]["reference"];
    assert!(reference["value"].as_f64().is_some(), "{reference}");
    let mut top = leftovers(dir.path());
    top.sort();
    assert_eq!(top, ["cwd", "run:2026-11-24T08:00"], "fio wrote beside");
    assert!(
        leftovers(&cwd).is_empty(),
        "fio wrote in its working directory"
    );
    assert!(leftovers(&data).is_empty(), "the test file is removed");
}

#[test]
fn a_count_based_run_does_exactly_its_ios_at_every_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let args = [
        "disk",
        "--dir",
        d,
        "--size",
        "4MiB",
        "--op",
        "randread,randwrite",
        "-b",
        "1KiB",
        "-t",
        "1,3",
        "--ios",
        "1000",
        "--ramp",
        "0",
        "-r",
        "2",
    ];
    let mut with_json = args.to_vec();
    with_json.push("--json");
    let doc = json(&peakbench(&with_json));
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 4);
    for r in results {
        let other = &r["params"]["other"];
        assert_eq!(other["ios_per_repetition"], 1000, "{}", r["id"]);
        assert!(r["id"].as_str().unwrap().ends_with("-n1000"), "{}", r["id"]);
        for moved in other["bytes_moved"].as_array().unwrap() {
            assert_eq!(moved.as_u64().unwrap(), 1000 * 1024, "{}", r["id"]);
        }
        // Two repetitions of 1000 I/Os, each one timed.
        assert_eq!(r["latency_ns"]["count"], 2000, "{}", r["id"]);
        let lat = &r["latency_ns"];
        assert!(lat["p99"].as_f64().unwrap() <= lat["p999"].as_f64().unwrap());
        assert!(
            r["counting"]
                .as_str()
                .unwrap()
                .contains("1000 I/Os of all threads")
        );
    }
    // The human table shows the percentiles of each case.
    let text = peakbench(&args);
    assert!(text.status.success());
    let stdout = String::from_utf8_lossy(&text.stdout);
    let (_, latency) = stdout
        .split_once("p50 µs  p99 µs  p99.9 µs\n")
        .unwrap_or_else(|| panic!("no latency table: {stdout}"));
    let rows: Vec<&str> = latency.lines().take_while(|l| !l.is_empty()).collect();
    assert_eq!(rows.len(), 4, "{stdout}");
    assert!(rows.iter().all(|r| r.contains("bs=1KiB")), "{rows:?}");

    assert_refused(
        &peakbench(&[
            "disk", "--dir", d, "--size", "4MiB", "-t", "4", "--ios", "2",
        ]),
        "--ios",
    );
    let both = peakbench(&["disk", "--dir", d, "--ios", "10", "-d", "1s"]);
    assert_eq!(both.status.code(), Some(2));
    assert!(leftovers(dir.path()).is_empty());
}

/// A fill cut short by Ctrl-C is removed, --keep or not (kept with --keep and labelled complete,
/// it failed every later --keep run).
#[test]
fn an_unfinished_fill_is_removed_even_with_keep() {
    let dir = tempfile::tempdir().unwrap();
    let child = command(&["disk", "--dir", dir.path().to_str().unwrap()])
        .args(["--size", "2GiB", "-d", "100ms", "--keep", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait_for_test_file(dir.path()), "the run created its file");
    // SAFETY: sending SIGINT to our own child process.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("fill did not finish"), "{stderr}");
    assert!(
        leftovers(dir.path()).is_empty(),
        "{:?}",
        leftovers(dir.path())
    );
}

/// A kept test file made by a `--keep` run in `dir`, and its bytes.
fn kept_file(dir: &Path) -> (std::path::PathBuf, Vec<u8>) {
    json(&disk(dir, &KEEP));
    let files = leftovers(dir);
    assert_eq!(files.len(), 1, "{files:?}");
    let path = dir.join(&files[0]);
    let bytes = std::fs::read(&path).unwrap();
    (path, bytes)
}

const KEEP: [&str; 3] = ["--op", "seqread", "--keep"];

/// A symbolic link planted at a kept file's name is never followed, neither found by `--keep`
/// nor opened when named with `--file`; its target is left byte for byte.
#[test]
fn a_symlink_planted_as_a_kept_file_is_not_followed() {
    let elsewhere = tempfile::tempdir().unwrap();
    let (target, before) = kept_file(elsewhere.path());
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("peakbench-0000000000000001.tmp");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    json(&disk(dir.path(), &KEEP));
    assert_eq!(
        std::fs::read(&target).unwrap(),
        before,
        "the target changed"
    );
    let mut args = vec!["disk", "--file", link.to_str().unwrap(), "--size", "4MiB"];
    args.extend_from_slice(&["-d", "100ms", "-r", "1", "--op", "seqread", "--keep"]);
    assert_refused(&peakbench(&args), "--file");
    assert_eq!(
        std::fs::read(&target).unwrap(),
        before,
        "the target changed"
    );
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

/// A kept file with a second hard link (which writes would reach) is refused with exit 2 and
/// left byte for byte; so is one another user owns.
#[test]
fn a_hard_linked_or_foreign_owned_kept_file_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (path, before) = kept_file(dir.path());
    let other = dir.path().join("another-name");
    std::fs::hard_link(&path, &other).unwrap();
    let output = disk(dir.path(), &KEEP);
    assert_refused(&output, "--dir");
    assert!(String::from_utf8_lossy(&output.stderr).contains("hard links"));
    assert_eq!(std::fs::read(&path).unwrap(), before);
    std::fs::remove_file(&other).unwrap();

    if !common::prerequisite(common::root()) {
        return;
    }
    std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
    let output = disk(dir.path(), &KEEP);
    assert_refused(&output, "--dir");
    assert!(String::from_utf8_lossy(&output.stderr).contains("belongs to uid 65534"));
    assert_eq!(std::fs::read(&path).unwrap(), before);
    let mut args = vec!["disk", "--file", path.to_str().unwrap(), "--size", "4MiB"];
    args.extend_from_slice(&["-d", "100ms", "-r", "1", "--op", "seqread"]);
    assert_refused(&peakbench(&args), "--file");
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

/// A read case is rated by --disk-read-*, a write case by --disk-write-*, a mix by the harmonic
/// mean weighted by its reads; --disk-mbps alone rates both.
#[test]
fn per_op_ratings_reach_the_cases_they_rate() {
    let dir = tempfile::tempdir().unwrap();
    let peak_of = |doc: &serde_json::Value, op: &str| -> (f64, String) {
        let r = doc["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["op"] == op)
            .unwrap_or_else(|| panic!("no {op} case"));
        (
            r["peak"]["value"].as_f64().unwrap(),
            r["peak"]["source"].as_str().unwrap().to_string(),
        )
    };
    let common = [
        "--op",
        "seqread,seqwrite,readwrite,rewrite",
        "-b",
        "64KiB",
        "--rwmix",
        "75",
    ];
    let mut args = common.to_vec();
    args.extend([
        "--disk-read-mbps",
        "1000",
        "--disk-write-mbps",
        "500",
        "--disk-mbps",
        "7",
    ]);
    let doc = json(&disk(dir.path(), &args));
    let (read, source) = peak_of(&doc, "seqread");
    assert_eq!(read, 1000.0);
    assert!(source.contains("--disk-read-mbps"), "{source}");
    let (write, source) = peak_of(&doc, "seqwrite");
    assert_eq!(write, 500.0);
    assert!(source.contains("--disk-write-mbps"), "{source}");
    // 75 % reads: 1 / (0.75/1000 + 0.25/500) = 800.
    let (mix, source) = peak_of(&doc, "readwrite");
    assert!((mix - 800.0).abs() < 1e-9, "{mix}");
    assert!(
        source.contains("--disk-read-mbps") && source.contains("--disk-write-mbps"),
        "{source}"
    );
    // rewrite: half reads: 1 / (0.5/1000 + 0.5/500) = 666.67.
    let (rewrite, _) = peak_of(&doc, "rewrite");
    assert!((rewrite - 2000.0 / 3.0).abs() < 1e-9, "{rewrite}");

    // The shared flag alone rates both.
    let mut args = common.to_vec();
    args.extend(["--disk-mbps", "300", "--disk-write-mbps", "100"]);
    let doc = json(&disk(dir.path(), &args));
    let (read, source) = peak_of(&doc, "seqread");
    assert_eq!(read, 300.0);
    assert!(source.contains("--disk-mbps"), "{source}");
    let (write, _) = peak_of(&doc, "seqwrite");
    assert_eq!(write, 100.0);
    assert!(
        leftovers(dir.path()).is_empty(),
        "{:?}",
        leftovers(dir.path())
    );
}
