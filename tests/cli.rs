//! Runs the real binary: inventory, bad input, a short CPU run, interruption.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

mod common;

use common::{json, run as peakbench, run_json as peakbench_json};

#[test]
fn sysinfo_json_has_the_inventory_and_sourced_peaks() {
    let doc = peakbench_json(&["sysinfo", "--json"]);
    assert_eq!(doc["schema_version"], 4);
    assert_eq!(doc["tool"]["name"], "peakbench");
    let cpu = &doc["host"]["cpu"];
    assert_eq!(
        cpu["logical_cpus"].as_u64().unwrap() as usize,
        std::thread::available_parallelism().unwrap().get()
    );
    assert!(cpu["simd"].as_array().unwrap().iter().any(|f| f == "sse2"));
    for field in [
        "vendor",
        "model_name",
        "microarch",
        "base_ghz",
        "governor",
        "caches",
    ] {
        assert!(!cpu[field].is_null() || cpu[field].is_object(), "{field}");
    }
    for section in ["memory", "disks", "nics", "os", "hypervisor"] {
        assert!(doc["host"].get(section).is_some(), "{section}");
    }
    // Every factor of the DP FMA peak has a source (or, if unknown, says how to give it).
    let factors = &doc["peaks"]["cpu"]["factors"];
    for factor in [&factors["cores"], &factors["ghz"], &factors["fma_units"][2]] {
        assert!(factor["source"].is_string(), "{factor}");
        assert!(factor["detail"].as_str().unwrap().len() > 3, "{factor}");
    }
    let table = doc["peaks"]["cpu"]["table"].as_array().unwrap();
    assert!(
        table
            .iter()
            .any(|r| r["precision"] == "f64" && r["fma"] == true)
    );
}

#[test]
fn sysinfo_table_names_sources() {
    let output = peakbench(&["sysinfo", "--cpu-ghz", "2.5", "--fma-units", "2"]);
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.contains("clock GHz 2.5 (flag: --cpu-ghz)"), "{text}");
    assert!(text.contains("Caches"));
}

/// A base and turbo clock given by flags reach the peaks table, the JSON and each CPU result as
/// a pair, each with its source, the measured clock beside them.
#[test]
fn a_flag_given_clock_pair_reaches_the_peaks_and_the_results() {
    let flags = ["--cpu-ghz", "2", "--cpu-turbo-ghz", "3", "--fma-units", "2"];
    let text = peakbench(&[&["sysinfo"][..], &flags].concat());
    assert!(text.status.success());
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains("turbo GHz 3 (flag: --cpu-turbo-ghz)"),
        "{text}"
    );
    assert!(
        text.contains("peaks at base and turbo: base 2 GHz (flag), turbo 3 GHz (flag)"),
        "{text}"
    );
    assert!(text.contains("(at base / at turbo)"), "{text}");
    let doc = peakbench_json(&[&["sysinfo", "--json"][..], &flags].concat());
    let cpu = &doc["peaks"]["cpu"];
    assert_eq!(cpu["factors"]["turbo_ghz"]["value"], 3.0);
    assert_eq!(cpu["factors"]["turbo_ghz"]["detail"], "--cpu-turbo-ghz");
    for row in cpu["table"].as_array().unwrap() {
        if let (Some(base), Some(turbo)) = (row["at_base"].as_f64(), row["at_turbo"].as_f64()) {
            assert!((turbo / base - 1.5).abs() < 1e-12, "{row}");
        }
    }
    let doc = peakbench_json(
        &[
            &[
                "cpu", "-p", "f64", "--isa", "scalar", "-t", "1", "-d", "20ms", "-r", "1",
            ][..],
            &["--warmup", "0", "--json"],
            &flags,
        ]
        .concat(),
    );
    for r in doc["results"].as_array().unwrap() {
        let pair = &r["peak"]["pair"];
        let (base, turbo) = (
            pair["at_base"].as_f64().unwrap(),
            pair["at_turbo"].as_f64().unwrap(),
        );
        assert!((turbo / base - 1.5).abs() < 1e-12, "{pair}");
        assert_eq!(pair["base_ghz"]["source"], "flag");
        assert_eq!(pair["turbo_ghz"]["detail"], "--cpu-turbo-ghz");
        // The probe's own clock stands beside the flags', unless its two chains disagreed (a
        // loaded host, as CI's once was), which the run must then say.
        match pair["measured_ghz"].as_f64() {
            Some(ghz) => assert!(ghz > 0.0, "{pair}"),
            None => assert!(
                doc["warnings"].as_array().unwrap().iter().any(|w| w
                    .as_str()
                    .unwrap()
                    .starts_with("the clock probe read no clock")),
                "no measured clock and no warning why: {pair} {}",
                doc["warnings"]
            ),
        }
        let source = r["peak"]["source"].as_str().unwrap();
        assert!(
            source.contains("at base 2 GHz") && source.contains("at turbo 3 GHz"),
            "{source}"
        );
    }
}

/// Each kind of bad input: exit code 2 and one line naming the flag.
#[test]
fn bad_input_exits_2_with_one_line_naming_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (&["cpu", "--frobnicate"], "--frobnicate"),
        (&["cpu", "--ops", "8QB"], "--ops"),
        (&["cpu", "--threads", "0"], "--threads"),
        (&["cpu", "--threads", "1,,2"], "--threads"),
        (&["cpu", "--duration", "0"], "--duration"),
        (&["cpu", "--duration", "ten"], "--duration"),
        // 1e20 s overflows a Duration (it once panicked, exit 101).
        (&["cpu", "--duration", "1e20"], "--duration"),
        (&["cpu", "--duration", "3000years"], "--duration"),
        (&["cpu", "--warmup", "1e300"], "--warmup"),
        (&["cpu", "--precision", "f128"], "--precision"),
        (&["cpu", "--isa", "neon2"], "--isa"),
        (&["cpu", "--repetitions", "0"], "--repetitions"),
        (
            &["cpu", "--output", "/nonexistent-dir/x.json", "-d", "10ms"],
            "--output",
        ),
        (
            &["cpu", "--output", "results.xyz", "-d", "10ms"],
            "--output",
        ),
        (&["cpu", "linpack", "-n", "0"], "-n"),
        (&["cpu", "linpack", "-n", "10000000"], "--n"),
        (&["cpu", "linpack", "--blas", "atlas"], "--blas"),
        (&["cpu", "linpack", "-p", "f16"], "--precision"),
        (&["sysinfo", "--cpu-ghz", "-1"], "--cpu-ghz"),
        // 1e308 GHz would make an infinite peak, stored as null.
        (&["sysinfo", "--cpu-ghz", "1e308"], "--cpu-ghz"),
        (&["sysinfo", "--fma-units", "1e300"], "--fma-units"),
        (&["sysinfo", "--nic-gbps", "1e308"], "--nic-gbps"),
        (&["sysinfo", "--disk-mbps", "1e308"], "--disk-mbps"),
        (&["sysinfo", "--disk-iops", "1e308"], "--disk-iops"),
        (&["sysinfo", "--disk-read-mbps", "0"], "--disk-read-mbps"),
        (&["sysinfo", "--int-units", "1e300"], "--int-units"),
        (&["sysinfo", "--cpu-turbo-ghz", "-3"], "--cpu-turbo-ghz"),
        (&["sysinfo", "--cpu-turbo-ghz", "0"], "--cpu-turbo-ghz"),
        (&["cpu", "--cpu-turbo-ghz", "2e9"], "--cpu-turbo-ghz"),
        (
            &["sysinfo", "--cpu-ghz", "3", "--cpu-turbo-ghz", "2.5"],
            "--cpu-turbo-ghz 2.5 is below --cpu-ghz 3",
        ),
        (
            &[
                "cpu",
                "--cpu-ghz",
                "3",
                "--cpu-turbo-ghz",
                "2.5",
                "-d",
                "10ms",
            ],
            "--cpu-turbo-ghz",
        ),
        (&["cpu", "--int-units", "none"], "--int-units"),
        (&["disk", "--disk-write-mbps", "fast"], "--disk-write-mbps"),
        (&["sysinfo", "--disk-read-iops", "-5"], "--disk-read-iops"),
        (&["disk", "--disk-write-iops", "1e308"], "--disk-write-iops"),
    ];
    for (args, flag) in cases {
        let output = peakbench(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("Error: "), "{args:?}: {stderr}");
        assert!(
            stderr.contains(flag),
            "{args:?} should name {flag}: {stderr}"
        );
        assert!(output.stdout.is_empty(), "{args:?}: nothing on stdout");
    }
}

#[test]
fn a_cpu_run_prints_json_with_peak_and_efficiency() {
    let doc = peakbench_json(&[
        "cpu", "-p", "f64,i32", "-t", "1", "-d", "50ms", "-r", "2", "--warmup", "0", "--json",
    ]);
    assert_eq!(doc["status"], "complete");
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    for r in results {
        assert_eq!(r["subsystem"], "cpu");
        assert_eq!(r["params"]["threads"], 1);
        assert_eq!(r["stats"]["n"], 2);
        assert_eq!(r["samples"].as_array().unwrap().len(), 2);
        assert!(r["value"].as_f64().unwrap() > 0.0);
        assert!(
            r["counting"]
                .as_str()
                .unwrap()
                .contains("checksum verified")
        );
        // The peak is known on x86 machines in the table; elsewhere it says why not.
        if let Some(peak) = r.get("peak") {
            assert!(peak["value"].as_f64().unwrap() > 0.0);
            assert!(peak["source"].as_str().unwrap().contains("GHz"));
            assert!(r["efficiency"].as_f64().unwrap() > 0.0);
        }
    }
    assert_eq!(results[0]["unit"], "GFLOP/s");
    assert_eq!(results[1]["unit"], "GIOP/s");
}

#[test]
fn csv_has_one_row_per_result() {
    let output = peakbench(&[
        "cpu", "-p", "i64", "-t", "1,2", "-d", "20ms", "-r", "1", "--warmup", "0", "--csv",
    ]);
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].starts_with("kind,id,host,subsystem,op,threads"));
}

#[test]
fn dry_run_prints_the_plan_and_runs_nothing() {
    let plan = peakbench_json(&["cpu", "-p", "f64,f32", "-t", "1,2,4", "--dry-run", "--json"]);
    assert_eq!(plan["cases"].as_array().unwrap().len(), 6);
    assert!(plan["estimate_s"].as_f64().unwrap() > 0.0);
}

#[test]
fn linpack_solves_and_checks_the_residual() {
    let doc = peakbench_json(&[
        "cpu", "linpack", "-n", "300", "-t", "1", "-r", "2", "--blas", "faer", "--json",
    ]);
    let r = &doc["results"][0];
    assert_eq!(r["op"], "linpack");
    assert_eq!(r["params"]["n"], 300);
    assert!(
        r["params"]["other"]["scaled_residual_max"]
            .as_f64()
            .unwrap()
            < 16.0
    );
    assert!(r["counting"].as_str().unwrap().contains("faer"));
    // The built-in engine: peakbench's own DGEMM, faer's triangular solves in the panel.
    assert_eq!(
        r["params"]["other"]["library"],
        "peakbench dgemm, faer 0.24"
    );
}

#[test]
fn linpack_in_f32_is_a_case_of_its_own_against_the_f32_peak() {
    let doc = peakbench_json(&[
        "cpu", "linpack", "-n", "300", "-t", "1", "-r", "2", "--blas", "builtin", "-p", "f64,f32",
        "--json",
    ]);
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{doc}");
    let by = |p: &str| {
        results
            .iter()
            .find(|r| r["params"]["precision"] == p)
            .unwrap_or_else(|| panic!("no {p} result: {doc}"))
    };
    let (double, single) = (by("f64"), by("f32"));
    assert_eq!(double["id"], "cpu-linpack-n300-t1");
    assert_eq!(single["id"], "cpu-linpack-f32-n300-t1");
    let other = &single["params"]["other"];
    assert!(other["scaled_residual_max"].as_f64().unwrap() < 16.0);
    assert_eq!(other["library"], "peakbench sgemm, faer 0.24");
    let counting = single["counting"].as_str().unwrap();
    assert!(counting.contains("peakbench sgemm"), "{counting}");
    // f32 has twice f64's lanes: its peak is twice f64's at the same clock and threads.
    let peak = |r: &serde_json::Value| r["peak"]["pair"]["at_base"].as_f64().unwrap();
    assert!(
        (peak(single) / peak(double) - 2.0).abs() < 1e-9,
        "{} vs {}",
        peak(single),
        peak(double)
    );
}

/// The OpenBLAS of Debian's `libopenblas0-pthread`, where `.ci/run` installs it.
const OPENBLAS: &str = "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0";

#[test]
fn linpack_on_openblas_names_the_library_its_version_and_kernels() {
    if !std::path::Path::new(OPENBLAS).exists() {
        assert!(!common::strict(), "strict mode: {OPENBLAS} is missing");
        eprintln!("skipped: no {OPENBLAS} (apt-get install libopenblas0-pthread)");
        return;
    }
    // Two threads, pinned: LAPACK runs on its own large-stack thread, the library on two.
    let doc = peakbench_json(&[
        "cpu", "linpack", "-n", "1200", "-t", "2", "-r", "2", "--blas", "openblas", "--pin",
        "--json",
    ]);
    let r = &doc["results"][0];
    let other = &r["params"]["other"];
    assert_eq!(other["solver"], "LAPACK dgetrf + dgetrs (OpenBLAS)");
    assert!(
        other["library_version"]
            .as_str()
            .unwrap()
            .starts_with("OpenBLAS 0."),
        "{other}"
    );
    assert!(
        !other["library_kernel"].as_str().unwrap().is_empty(),
        "{other}"
    );
    assert!(other["scaled_residual_max"].as_f64().unwrap() < 16.0);
    assert!(r["counting"].as_str().unwrap().contains("dgetrf"));
}

#[test]
fn gemm_multiplies_checks_entries_of_c_and_counts_2n3() {
    let mut blases = vec!["faer"];
    if std::path::Path::new(OPENBLAS).exists() {
        blases.push("openblas");
    } else {
        assert!(!common::strict(), "strict mode: {OPENBLAS} is missing");
    }
    for blas in blases {
        let doc = peakbench_json(&[
            "cpu", "gemm", "-n", "300", "-t", "1,2", "-r", "2", "--warmup", "0", "--blas", blas,
            "--json",
        ]);
        let results = doc["results"].as_array().unwrap();
        assert_eq!(results.len(), 2, "{blas}");
        for r in results {
            assert_eq!(r["op"], "gemm");
            assert_eq!(r["unit"], "GFLOP/s");
            assert!(r["counting"].as_str().unwrap().starts_with("2·n³ FLOP"));
            let worst = r["params"]["other"]["checked_error_of_bound_max"].as_f64();
            assert!(worst.unwrap() <= 1.0, "{blas}: {r}");
            assert!(r["value"].as_f64().unwrap() > 0.0);
        }
    }
}

#[test]
fn a_blas_that_is_not_installed_is_a_usage_error_naming_the_package() {
    if std::path::Path::new("/usr/lib/x86_64-linux-gnu/libmkl_rt.so").exists() {
        return; // this machine has MKL: nothing to refuse
    }
    // Nothing of the user's: no Python on PATH, a fresh home, none of the variables that lead
    // to an installation (this machine's pyenv may well have MKL).
    let empty = tempfile::tempdir().unwrap();
    let mut cmd = common::command(&["cpu", "linpack", "--blas", "mkl", "-n", "100"]);
    cmd.env("PATH", empty.path());
    for var in [
        "CONDA_PREFIX",
        "VIRTUAL_ENV",
        "PYENV_ROOT",
        "PYENV_VERSION",
        "LD_LIBRARY_PATH",
    ] {
        cmd.env_remove(var);
    }
    let output = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--blas mkl") && stderr.contains("apt-get install"),
        "{stderr}"
    );
}

#[test]
fn ctrl_c_keeps_the_results_already_measured_in_a_valid_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("partial.json");
    let child = common::command(&[])
        .args([
            "cpu",
            "-p",
            "f64,f32,i64,i32,i16,i8",
            "-t",
            "1",
            "-d",
            "150ms",
            "-r",
            "2",
        ])
        .args(["--warmup", "0", "--output"])
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_results(&path, Duration::from_secs(20));
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
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).expect("valid JSON");
    assert_eq!(doc["status"], "interrupted");
    let measured = doc["results"].as_array().unwrap().len();
    assert!((1..6).contains(&measured), "{measured} results");
    assert!(!doc["finished_at"].is_null());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "no temporary file is left behind");
}

/// Waits until the output file holds at least one result.
fn wait_for_results(path: &Path, limit: Duration) {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Ok(bytes) = std::fs::read(path)
            && let Ok(doc) = serde_json::from_slice::<serde_json::Value>(&bytes)
            && doc["results"].as_array().is_some_and(|r| !r.is_empty())
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("no result appeared in {}", path.display());
}

#[test]
fn a_sampling_run_records_one_value_per_interval() {
    let doc = peakbench_json(&[
        "cpu",
        "-p",
        "f64",
        "-t",
        "1",
        "--samples",
        "3",
        "--interval",
        "100ms",
        "--json",
    ]);
    let r = &doc["results"][0];
    let series = r["series"].as_array().unwrap();
    assert_eq!(series.len(), 3);
    assert_eq!(r["stats"]["n"], 3);
    let times: Vec<f64> = series.iter().map(|p| p["t_s"].as_f64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[1] > w[0]), "{times:?}");
    assert!(series.iter().all(|p| p["value"].as_f64().unwrap() > 0.0));
}

#[test]
fn a_missing_reference_tool_is_named_and_the_run_goes_on() {
    // An empty PATH: likwid-bench cannot be found, whatever the machine has installed.
    let empty = tempfile::tempdir().unwrap();
    let output = common::command(&[])
        .args([
            "cpu",
            "-p",
            "f64,i32",
            "--isa",
            "scalar",
            "--fma",
            "no",
            "-t",
            "1",
            "-d",
            "20ms",
            "-r",
            "1",
            "--warmup",
            "0",
            "--reference",
            "--json",
        ])
        .env("PATH", empty.path())
        .output()
        .expect("the binary runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let results = json(&output)["results"].as_array().unwrap().clone();
    assert_eq!(results.len(), 2);
    let note = |i: usize| {
        results[i]["reference"]["note"]
            .as_str()
            .unwrap()
            .to_string()
    };
    for r in &results {
        assert_eq!(r["reference"]["tool"], "likwid-bench");
        assert!(r["reference"]["value"].is_null());
    }
    assert!(note(0).contains("apt-get install likwid"), "{}", note(0));
    assert!(note(1).contains("no integer peak kernel"), "{}", note(1));
}

/// Ctrl-C while a reference tool runs ends the run (exit 130) at once: the tool is killed, the
/// case it was comparing is dropped as any interrupted case is, and the cases measured before
/// stay in the output with their references.
#[test]
fn ctrl_c_during_a_reference_tool_interrupts_the_run_and_keeps_earlier_results() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    // The first run answers at once; the second hangs until it is killed.
    let fake = bin.join("likwid-bench");
    std::fs::write(
        &fake,
        "#!/bin/sh\n\
         if [ -e \"$FAKE_DIR/ran\" ]; then echo $$ > \"$FAKE_DIR/hung.pid\"; exec sleep 60; fi\n\
         touch \"$FAKE_DIR/ran\"\n\
         printf 'MFlops/s:\\t1000\\n'\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = dir.path().join("partial.json");
    let child = common::command(&["cpu", "-p", "f64,f32", "--isa", "scalar", "--fma", "no"])
        .args([
            "-t",
            "1",
            "-d",
            "20ms",
            "-r",
            "1",
            "--warmup",
            "0",
            "--reference",
        ])
        .arg("--output")
        .arg(&path)
        .env("PEAKBENCH_DB", dir.path().join("history.db"))
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("FAKE_DIR", dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let hung = dir.path().join("hung.pid");
    let start = Instant::now();
    while !std::fs::read_to_string(&hung).is_ok_and(|s| s.ends_with('\n'))
        && start.elapsed() < Duration::from_secs(30)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let tool: i32 = std::fs::read_to_string(&hung)
        .expect("the second case started its reference tool")
        .trim()
        .parse()
        .unwrap();
    let signalled = Instant::now();
    // SAFETY: sending SIGINT to our own child process.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
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
    let alive = unsafe { libc::kill(tool, 0) } == 0;
    assert!(!alive, "the reference tool outlived the run");
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).expect("valid JSON");
    assert_eq!(doc["status"], "interrupted");
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "the first case only: {results:?}");
    assert_eq!(results[0]["reference"]["value"], 1.0);
    assert!(
        results[0]["reference"]["command"]
            .as_str()
            .unwrap()
            .contains("-t peakflops -W N:32kB:1"),
        "{}",
        results[0]["reference"]
    );
}

#[cfg(not(feature = "mpi"))]
#[test]
fn cluster_without_mpi_says_in_one_line_how_to_build_it() {
    for args in [&["cluster"][..], &["cluster", "run", "--preset", "quick"]] {
        let out = peakbench(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let text = String::from_utf8_lossy(&out.stderr);
        assert_eq!(text.trim().lines().count(), 1, "{text}");
        assert!(text.contains("--features mpi"), "{text}");
    }
}

/// A negative number is refused naming its flag in every command (clap answered `--threads -1`
/// with "unexpected argument '-1'", naming no flag).
#[test]
fn a_negative_number_is_refused_naming_its_flag_in_every_command() {
    let cases: &[(&[&str], &str)] = &[
        (&["cpu", "--threads", "-1"], "--threads"),
        (&["cpu", "linpack", "-n", "-4"], "-n"),
        (&["mem", "--size", "-5GiB"], "--size"),
        (&["mem", "latency", "--duration", "-1s"], "--duration"),
        (&["disk", "--size", "-5GiB"], "--size"),
        (&["disk", "--qd", "-2"], "--qd"),
        (&["net", "--count", "-10"], "--count"),
        (&["net", "serve", "--port", "-1"], "--port"),
        (&["run", "--preset", "quick", "-r", "-3"], "-r"),
        (&["sysinfo", "--cpu-ghz", "-.5"], "--cpu-ghz"),
        (&["net", "serve", "--max-streams", "-1"], "--max-streams"),
    ];
    for (args, flag) in cases {
        let output = peakbench(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with(&format!("Error: {flag}: ")) && stderr.contains("negative"),
            "{args:?} should name {flag}: {stderr}"
        );
    }
}

/// Huge work and repetitions are estimated without overflow (a Duration product overflowed in
/// the plan's estimate, exit 101).
#[test]
fn huge_work_and_repetitions_are_estimated_without_overflow() {
    let max = u64::MAX.to_string();
    let reps = u32::MAX.to_string();
    let cases: &[&[&str]] = &[
        &["disk", "--ios", &max, "-r", &reps],
        &["disk", "--bytes", "1000000TiB", "-r", &reps],
        &["mem", "--ops", &max, "-r", &reps],
        &["cpu", "--ops", &max, "-r", &reps],
        &["net", "--count", &max, "-r", &reps],
        &["cpu", "--samples", &reps, "--interval", "1day"],
    ];
    for args in cases {
        let started = Instant::now();
        let output = peakbench(&[&args[..], &["--dry-run", "--json"]].concat());
        let doc = json(&output);
        let total = doc["estimate_s"].as_f64().unwrap();
        assert!(total > 1e9, "{args:?}: {total}");
        assert!(started.elapsed() < Duration::from_secs(20), "{args:?}");
    }
}

/// Output never follows a link planted at a predictable name: results were once written through
/// `FILE.peakbench-partial`, a name anyone could predict and plant a symbolic link at.
#[test]
fn output_never_follows_a_link_planted_at_a_predictable_name() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results.json");
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"not yours").unwrap();
    std::os::unix::fs::symlink(&victim, dir.path().join("results.json.peakbench-partial")).unwrap();
    let output = peakbench(&[
        "cpu",
        "-p",
        "f64",
        "-t",
        "1",
        "-d",
        "10ms",
        "-r",
        "1",
        "--warmup",
        "0",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(std::fs::read(&victim).unwrap(), b"not yours");
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(doc["status"], "complete");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".partial"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

/// peakbench killed by SIGKILL runs none of its code, yet nothing a tool started outlives it. The
/// tool here (a stand-in `likwid-bench` first on PATH) starts a child in a process group of its
/// own, as mpirun does with its ranks; the kernel kills the tool (PR_SET_PDEATHSIG) and peakbench's
/// guard kills the rest of the tool's session.
#[test]
fn a_peakbench_killed_by_sigkill_leaves_nothing_its_tools_started() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let tool = dir.path().join("likwid-bench");
    std::fs::write(
        &tool,
        format!(
            "#!/bin/sh\nperl -e 'setpgrp(0, 0); exec \"sleep\", \"60\"' &\n\
             echo \"$$ $!\" > {0}.tmp && mv {0}.tmp {0}\nwait\n",
            pids.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap()
    );
    let mut run = common::command(&[
        "cpu",
        "-p",
        "f64",
        "--isa",
        "scalar",
        "--fma",
        "no",
        "-t",
        "1",
        "-d",
        "10ms",
        "-r",
        "1",
        "--reference",
        "--no-history",
    ])
    .env("PATH", path)
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let (tool_pid, rank_pid) = loop {
        let text = std::fs::read_to_string(&pids).unwrap_or_default();
        let got: Vec<i32> = text
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        if let [tool, rank] = got[..] {
            break (tool, rank);
        }
        assert!(Instant::now() < deadline, "the stand-in tool never ran");
        std::thread::sleep(Duration::from_millis(20));
    };
    run.kill().unwrap(); // SIGKILL
    run.wait().unwrap();
    let alive = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        })
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(tool_pid) || alive(rank_pid) {
        if Instant::now() > deadline {
            // Leave nothing behind even when the test fails.
            for pid in [tool_pid, rank_pid] {
                // SAFETY: kill takes a pid and a signal, no pointers.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            panic!(
                "after peakbench's SIGKILL the tool ({tool_pid}, alive: {}) or its child in a \
                 group of its own ({rank_pid}, alive: {}) lived on",
                alive(tool_pid),
                alive(rank_pid)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn completions_and_manual_pages_cover_the_whole_tree() {
    // Every workload the registry adds reaches the completion script, not only the top commands.
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef"),
        ("fish", "complete -c"),
    ] {
        let out = peakbench(&["completions", shell]);
        assert!(out.status.success(), "{shell}");
        let script = String::from_utf8(out.stdout).unwrap();
        assert!(script.contains(marker), "{shell}: {marker}");
        for word in ["linpack", "latency", "serve", "threads"] {
            assert!(script.contains(word), "{shell} completes {word}");
        }
    }
    let out = peakbench(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));

    let page = String::from_utf8(peakbench(&["man"]).stdout).unwrap();
    assert!(
        page.starts_with(".ie") || page.contains(".TH peakbench 1"),
        "{page}"
    );
    let dir = tempfile::tempdir().unwrap();
    let out = peakbench(&["man", "--dir", dir.path().to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for page in [
        "peakbench.1",
        "peakbench-cpu-linpack.1",
        "peakbench-net-serve.1",
        "peakbench-disk.1",
    ] {
        let text = std::fs::read_to_string(dir.path().join(page)).unwrap();
        assert!(text.contains(".TH"), "{page}");
    }
    let disk = std::fs::read_to_string(dir.path().join("peakbench-disk.1")).unwrap();
    assert!(
        disk.contains("queue depth"),
        "the disk page has its own flags"
    );
    let out = peakbench(&["man", "--dir", "/nonexistent/peakbench-man"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--dir"));
}

/// A real run's document with hand-made findings of every verdict (tests/fixtures/make_findings.py).
const FINDINGS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/findings.json");

#[test]
fn explain_judges_an_imported_run_and_a_results_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("history.db");
    let db = db.to_str().unwrap();
    let out = peakbench(&["import", FINDINGS, "--db", db]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for run in ["latest", "1", FINDINGS] {
        let out = peakbench(&["explain", run, "--db", db]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "explain {run}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let header = stdout.lines().next().unwrap();
        assert!(header.contains("fixture-host"), "{stdout}");
        assert!(stdout.contains("\nFindings:\n"), "{stdout}");
    }
    let json = peakbench_json(&["explain", "latest", "--json", "--db", db]);
    assert!(json["results"].is_array(), "{json}");
    assert!(json["summary"].is_array(), "{json}");
}

#[test]
fn explain_of_a_run_that_is_not_there_exits_2_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("history.db");
    let db = db.to_str().unwrap();
    let one_line_naming = |args: &[&str], name: &str| {
        let out = peakbench(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("Error: "), "{stderr}");
        assert!(stderr.contains(name), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    };
    // No history yet, then a history without that run.
    one_line_naming(&["explain", "999", "--db", db], "999");
    assert!(
        peakbench(&["import", FINDINGS, "--db", db])
            .status
            .success()
    );
    one_line_naming(&["explain", "999", "--db", db], "no run 999");
    one_line_naming(
        &["explain", "nonexistent.json", "--db", db],
        "nonexistent.json",
    );
    one_line_naming(&["explain", "someday", "--db", db], "someday");
}
