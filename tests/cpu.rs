//! The dense engines through the real binary: peakbench's LU at odd orders and thread counts,
//! the engine choice, every engine side by side, and a singular matrix refused.

use std::path::Path;

mod common;

use common::{command, run_json as peakbench_json};

const OPENBLAS: &str = "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0";

#[test]
fn the_builtin_lu_passes_hpl_s_check_at_odd_orders_on_1_and_all_threads() {
    // 1 and 2 are below any block, 127 and 1000 are not multiples of the panel (256) nor of
    // its recursion's leaf (8); 1000 has three panels and look-ahead.
    let doc = peakbench_json(&[
        "cpu",
        "linpack",
        "-n",
        "1,2,127,1000",
        "-t",
        "1,2",
        "-r",
        "2",
        "--warmup",
        "0",
        "--blas",
        "builtin",
        "--json",
    ]);
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 8);
    for r in results {
        let other = &r["params"]["other"];
        assert_eq!(other["dense_engine"], "builtin", "{r}");
        assert!(
            other["lu_engine"]
                .as_str()
                .unwrap()
                .contains("peakbench LU"),
            "{other}"
        );
        let residual = other["scaled_residual_max"].as_f64().unwrap();
        assert!(residual < 16.0, "{}: {residual}", r["label"]);
        assert!(r["counting"].as_str().unwrap().contains("2/3·n³"));
    }
}

#[test]
fn auto_picks_an_engine_and_says_why() {
    let doc = peakbench_json(&[
        "cpu", "gemm", "-n", "200", "-t", "1", "-r", "2", "--warmup", "0", "--json",
    ]);
    let other = &doc["results"][0]["params"]["other"];
    let why = other["dense_engine_choice"].as_str().unwrap();
    let engine = other["dense_engine"].as_str().unwrap();
    if Path::new(OPENBLAS).exists() {
        // A probe ran: it names every engine it measured, the one picked among them.
        assert!(why.starts_with("auto: fastest multiply"), "{why}");
        assert!(why.contains("builtin") && why.contains("OpenBLAS"), "{why}");
        assert!(why.contains(engine), "{engine}: {why}");
    } else {
        assert_eq!(engine, "builtin");
    }
}

#[test]
fn gemm_all_runs_every_engine_present_side_by_side() {
    let doc = peakbench_json(&[
        "cpu", "gemm", "-n", "130", "-t", "1", "-r", "2", "--warmup", "0", "--blas", "all",
        "--json",
    ]);
    let results = doc["results"].as_array().unwrap();
    let engines: Vec<&str> = results
        .iter()
        .map(|r| r["params"]["other"]["dense_engine"].as_str().unwrap())
        .collect();
    assert_eq!(engines[0], "builtin");
    assert_eq!(engines.contains(&"OpenBLAS"), Path::new(OPENBLAS).exists());
    let mut ids: Vec<&str> = results.iter().map(|r| r["id"].as_str().unwrap()).collect();
    ids.dedup();
    assert_eq!(ids.len(), results.len(), "each engine has its own case id");
    for r in results {
        let worst = r["params"]["other"]["checked_error_of_bound_max"].as_f64();
        assert!(worst.unwrap() <= 1.0, "{r}");
        assert_eq!(
            r["params"]["other"]["dense_engine_choice"],
            "forced by --blas"
        );
    }
}

#[test]
fn a_singular_matrix_fails_the_run_with_a_clear_error() {
    let mut blases = vec!["builtin"];
    if Path::new(OPENBLAS).exists() {
        blases.push("openblas");
    }
    for blas in blases {
        for precision in ["f64", "f32"] {
            let output = command(&[
                "cpu", "linpack", "-n", "300", "-t", "2", "-r", "1", "--warmup", "0", "--blas",
                blas, "-p", precision, "--json",
            ])
            .env("PEAKBENCH_TEST_SINGULAR_MATRIX", "1")
            .output()
            .unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(
                output.status.code(),
                Some(1),
                "{blas} {precision}: {stderr}"
            );
            let text = format!("{stderr}{}", String::from_utf8_lossy(&output.stdout));
            assert!(
                text.contains("singular") || text.contains("exactly zero"),
                "{blas} {precision}: {text}"
            );
            assert!(!text.contains("\"passed\""), "{blas} {precision}");
        }
    }
}

#[test]
fn each_dgemm_micro_kernel_forced_multiplies_and_factors_right() {
    // PEAKBENCH_DGEMM_KERNEL forces a micro-kernel; the result names the one that ran. gemm
    // checks 16 entries of C against dot products, linpack HPL's residual: a wrong kernel fails.
    for (kernel, name, has) in [
        (
            "avx512",
            "avx512 24x8",
            std::arch::is_x86_feature_detected!("avx512f"),
        ),
        (
            "avx2",
            "avx2-fma 8x6",
            std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma"),
        ),
        ("portable", "portable 4x4", true),
    ] {
        if !has {
            eprintln!("skipped: this CPU cannot run the {name} kernel; forcing it must be refused");
            let output = command(&[
                "cpu", "gemm", "-n", "64", "-t", "1", "-r", "1", "--warmup", "0", "--blas",
                "builtin", "--json",
            ])
            .env("PEAKBENCH_DGEMM_KERNEL", kernel)
            .output()
            .unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(!output.status.success(), "{kernel}: {stderr}");
            assert!(stderr.contains("PEAKBENCH_DGEMM_KERNEL"), "{stderr}");
            continue;
        }
        for args in [
            &["cpu", "gemm", "-n", "131", "-t", "1,2"][..],
            &["cpu", "linpack", "-n", "300", "-t", "2"][..],
        ] {
            let mut full = args.to_vec();
            full.extend(["-r", "1", "--warmup", "0", "--blas", "builtin", "--json"]);
            let output = command(&full)
                .env("PEAKBENCH_DGEMM_KERNEL", kernel)
                .output()
                .unwrap();
            let doc = common::json(&output);
            for r in doc["results"].as_array().unwrap() {
                let other = &r["params"]["other"];
                assert_eq!(other["gemm_kernel"], name, "{kernel}: {other}");
            }
        }
    }
}

/// SGEMM is its own case of `cpu gemm` (`-p f32`), beside DGEMM, with its own id, its own peak (the
/// f32 FMA row: twice the f64 one), and its entries checked against dot products within f32's
/// bound; n = 1, 2 and 127 are below or not a multiple of any block.
#[test]
fn sgemm_is_its_own_case_with_its_own_peak_and_check() {
    let doc = peakbench_json(&[
        "cpu", "gemm", "-p", "f64,f32", "-n", "1,2,127", "-t", "1", "-r", "2", "--warmup", "0",
        "--blas", "builtin", "--json",
    ]);
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 6);
    let peak_of = |precision: &str| {
        results
            .iter()
            .find(|r| r["params"]["precision"] == precision)
            .and_then(|r| r["peak"]["value"].as_f64())
    };
    if let (Some(f64_peak), Some(f32_peak)) = (peak_of("f64"), peak_of("f32")) {
        assert!(
            (f32_peak / f64_peak - 2.0).abs() < 1e-9,
            "{f32_peak} {f64_peak}"
        );
    }
    for r in results {
        let id = r["id"].as_str().unwrap();
        let other = &r["params"]["other"];
        let counting = r["counting"].as_str().unwrap();
        assert!(
            other["checked_error_of_bound_max"].as_f64().unwrap() <= 1.0,
            "{r}"
        );
        if r["params"]["precision"] == "f32" {
            assert!(id.starts_with("cpu-gemm-f32-n"), "{id}");
            assert!(
                counting.contains("f32 matrices") && counting.contains("2⁻²³"),
                "{counting}"
            );
            assert!(
                other["gemm_engine"]
                    .as_str()
                    .unwrap()
                    .starts_with("peakbench sgemm"),
                "{other}"
            );
        } else {
            assert!(!id.contains("f32"), "{id}");
            assert!(counting.contains("f64 matrices"), "{counting}");
        }
    }
}

#[test]
fn each_sgemm_micro_kernel_forced_multiplies_right() {
    // PEAKBENCH_SGEMM_KERNEL forces the f32 micro-kernel (the DGEMM's stays as it is); the
    // check of 16 entries of C against f64 dot products fails a wrong kernel.
    for (kernel, name, has) in [
        (
            "avx512",
            "avx512 48x8",
            std::arch::is_x86_feature_detected!("avx512f"),
        ),
        (
            "avx2",
            "avx2-fma 16x6",
            std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma"),
        ),
        ("portable", "portable 4x4", true),
    ] {
        let args = [
            "cpu", "gemm", "-p", "f32", "-n", "127,131", "-t", "1,2", "-r", "1", "--warmup", "0",
            "--blas", "builtin", "--json",
        ];
        let output = command(&args)
            .env("PEAKBENCH_SGEMM_KERNEL", kernel)
            .output()
            .unwrap();
        if !has {
            eprintln!("skipped: this CPU cannot run the {name} kernel; forcing it must be refused");
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(!output.status.success(), "{kernel}: {stderr}");
            assert!(stderr.contains("PEAKBENCH_SGEMM_KERNEL"), "{stderr}");
            continue;
        }
        let doc = common::json(&output);
        for r in doc["results"].as_array().unwrap() {
            let other = &r["params"]["other"];
            assert_eq!(other["gemm_kernel"], name, "{kernel}: {other}");
            assert!(other["checked_error_of_bound_max"].as_f64().unwrap() <= 1.0);
        }
    }
}

/// `--blas PATH` forces the library at that path; what it is comes from its symbols, and the
/// result names the path.
#[test]
fn blas_path_forces_the_library_at_that_path() {
    if !Path::new(OPENBLAS).exists() {
        assert!(!common::strict(), "strict mode: {OPENBLAS} is missing");
        eprintln!("skipped: no {OPENBLAS} (apt-get install libopenblas0-pthread)");
        return;
    }
    let doc = peakbench_json(&[
        "cpu", "gemm", "-p", "f64,f32", "-n", "130", "-t", "1", "-r", "2", "--warmup", "0",
        "--blas", OPENBLAS, "--json",
    ]);
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    for r in results {
        let other = &r["params"]["other"];
        assert_eq!(other["dense_engine"], "OpenBLAS", "{other}");
        assert_eq!(other["library_path"], OPENBLAS, "{other}");
        assert_eq!(
            other["dense_engine_choice"],
            format!("forced by --blas {OPENBLAS}")
        );
        assert!(other["checked_error_of_bound_max"].as_f64().unwrap() <= 1.0);
        assert!(
            r["id"].as_str().unwrap().ends_with("-libopenblas-so-0"),
            "{}",
            r["id"]
        );
    }
    let routines: Vec<&str> = results
        .iter()
        .map(|r| r["counting"].as_str().unwrap())
        .collect();
    assert!(
        routines[0].contains("dgemm") && routines[1].contains("sgemm"),
        "{routines:?}"
    );
    // Linpack takes the path too, and runs that library's LAPACK.
    let doc = peakbench_json(&[
        "cpu", "linpack", "-n", "200", "-t", "1", "-r", "1", "--warmup", "0", "--blas", OPENBLAS,
        "--json",
    ]);
    let other = &doc["results"][0]["params"]["other"];
    assert_eq!(other["library_path"], OPENBLAS, "{other}");
    assert_eq!(
        other["solver"],
        format!("LAPACK dgetrf + dgetrs ({OPENBLAS})")
    );
}

#[test]
fn blas_path_that_is_missing_or_not_a_library_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("libnotblas.so");
    std::fs::write(&text, "not a library\n").unwrap();
    let missing = dir.path().join("libmissing.so");
    for (path, why) in [
        (missing.to_str().unwrap(), "no such file"),
        (text.to_str().unwrap(), "not a shared library"),
        (dir.path().to_str().unwrap(), "not a file"),
    ] {
        for sub in ["gemm", "linpack"] {
            let output = command(&["cpu", sub, "-n", "50", "--blas", path, "--json"])
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(2), "{sub} {path}: {stderr}");
            assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
            assert!(
                stderr.contains(&format!("--blas {path}: {why}")),
                "{sub}: {stderr}"
            );
            assert!(output.stdout.is_empty(), "nothing measured");
        }
    }
    // A word that is neither a choice nor a path is refused by the parser, naming the flag.
    let output = command(&["cpu", "gemm", "--blas", "atlas"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--blas") && stderr.contains("nor a path"),
        "{stderr}"
    );
}

/// A shared library that is no BLAS (libm) opens, but exports no dgemm_: exit 2, naming
/// --blas and the missing routine.
#[test]
fn blas_path_without_the_routine_a_case_needs_is_a_usage_error() {
    let libm = "/lib/x86_64-linux-gnu/libm.so.6";
    if !Path::new(libm).exists() {
        eprintln!("skipped: no {libm}");
        return;
    }
    let output = command(&[
        "cpu", "gemm", "-n", "50", "-t", "1", "-r", "1", "--warmup", "0", "--blas", libm, "--json",
    ])
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("--blas {libm}")) && stderr.contains("dgemm_"),
        "{stderr}"
    );
}

/// The variables through which the search finds a BLAS the user installed.
const USER_INSTALL_VARS: [&str; 5] = [
    "CONDA_PREFIX",
    "VIRTUAL_ENV",
    "PYENV_ROOT",
    "PYENV_VERSION",
    "LD_LIBRARY_PATH",
];

/// `pip install mkl` under pyenv puts `libmkl_rt.so.*` in
/// `~/.pyenv/versions/X.Y.Z/lib`, while `python3` on PATH is a shim in `~/.pyenv/shims`.
/// With a fake pyenv (a shim script that prints the prefix; OpenBLAS linked in as MKL's file
/// name, since only the file name is searched for) and nothing else set, `--blas mkl` finds it
/// and the result says how.
#[test]
fn mkl_installed_by_pip_under_pyenv_is_found_through_the_shim() {
    if !Path::new(OPENBLAS).exists() {
        assert!(!common::strict(), "strict mode: {OPENBLAS} is missing");
        eprintln!("skipped: no {OPENBLAS} (apt-get install libopenblas0-pthread)");
        return;
    }
    if Path::new("/usr/lib/x86_64-linux-gnu/libmkl_rt.so").exists() {
        eprintln!("skipped: this machine's own MKL comes before any user's");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let prefix = home.join(".pyenv/versions/3.11.7");
    std::fs::create_dir_all(prefix.join("lib")).unwrap();
    let mkl = prefix.join("lib/libmkl_rt.so.3");
    std::os::unix::fs::symlink(OPENBLAS, &mkl).unwrap();
    let shims = home.join(".pyenv/shims");
    std::fs::create_dir_all(&shims).unwrap();
    let shim = shims.join("python3");
    let body = format!("#!/bin/sh\necho {0}\necho {0}\n", prefix.display());
    std::fs::write(&shim, body).unwrap();
    std::fs::set_permissions(&shim, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();

    let mut cmd = command(&[
        "cpu", "gemm", "-n", "64", "-t", "1", "-r", "1", "--warmup", "0", "--blas", "mkl", "--json",
    ]);
    cmd.env("HOME", home).env("PATH", &shims);
    for var in USER_INSTALL_VARS {
        cmd.env_remove(var);
    }
    let doc = common::json(&cmd.output().unwrap());
    let other = &doc["results"][0]["params"]["other"];
    assert_eq!(other["library_path"], mkl.display().to_string(), "{other}");
    assert_eq!(
        other["library_found_by"],
        format!("found by asking {} for sys.prefix", shim.display())
    );
}
