//! Real machines replayed: each folder of `tests/fixtures/machines/` is what was read off one
//! machine (`bench/read-machine.sh`: /proc, lscpu, CPUID, the sysfs caches, an independent clock
//! reading, and peakbench's own runs there). `peakbench sysinfo --sysroot DIR` reads the
//! inventory from the folder instead of this machine, so every test here holds on any CPU.
//!
//! The expected answers come from the CPUs' documentation (Intel's model numbers and the
//! per-core FLOP and op rates of its Xeon Scalable and AMX material), and the model is checked
//! against what the kernels measured on the machine itself: no kernel above its peak.

mod common;

use std::path::{Path, PathBuf};

use serde_json::Value;

/// A fixture machine and what its documentation says it is.
struct Expected {
    folder: &'static str,
    microarch: &'static str,
    /// Words the identification's source must hold (the rule that matched).
    source_says: &'static [&'static str],
    cores: f64,
    /// (precision, isa, form, fma, ops per cycle per core) from the vendor's figures.
    per_cycle: &'static [(&'static str, &'static str, &'static str, bool, f64)],
}

/// Golden Cove server cores: 2 × 512-bit FMA (32 f64 FLOP, 64 f32, 128 f16 per cycle), AMX at
/// 1024 bf16 FLOP and 2048 int8 ops per cycle, AVX-512 VNNI at 256 int8 ops per cycle (Intel
/// Xeon Scalable 4th/5th generation and AMX material).
const GOLDEN_COVE_SERVER: &[(&str, &str, &str, bool, f64)] = &[
    ("f64", "avx512", "arith", true, 32.0),
    ("f32", "avx512", "arith", true, 64.0),
    ("f16", "avx512", "arith", true, 128.0),
    ("bf16", "avx512", "tile", false, 1024.0),
    ("i8", "avx512", "tile", false, 2048.0),
    ("i8", "avx512", "dot", false, 256.0),
];

/// Zen 5 (full-width AVX-512): 2 × 512-bit FMA (32 f64 FLOP, 64 f32 per cycle), VNNI at 256
/// int8 ops and AVX512-BF16 at 128 bf16 FLOP per cycle (AMD's family 1Ah optimisation guide).
const ZEN5: &[(&str, &str, &str, bool, f64)] = &[
    ("f64", "avx512", "arith", true, 32.0),
    ("f32", "avx512", "arith", true, 64.0),
    ("i8", "avx512", "dot", false, 256.0),
    ("bf16", "avx512", "dot", false, 128.0),
];

const MACHINES: &[Expected] = &[
    // The hypervisor presents Rocket Lake's model 0xA7, which has no AMX.
    Expected {
        folder: "xeon-amx-kvm-2vcpu",
        microarch: "sapphirerapids",
        source_says: &["overridden", "AMX-TILE with AVX512-FP16"],
        cores: 2.0,
        per_cycle: GOLDEN_COVE_SERVER,
    },
    // The same kind of guest, read again on 2026-12-01 with today's clock and its core-to-core
    // matrix.
    Expected {
        folder: "xeon-amx-kvm-2vcpu-c2c",
        microarch: "sapphirerapids",
        source_says: &["overridden", "AMX-TILE with AVX512-FP16"],
        cores: 2.0,
        per_cycle: GOLDEN_COVE_SERVER,
    },
    // Model 0xCF is Emerald Rapids (5th generation Xeon Scalable).
    Expected {
        folder: "emeraldrapids-kvm-16vcpu",
        microarch: "emeraldrapids",
        source_says: &["CPUID family 6 model 207"],
        cores: 16.0,
        per_cycle: GOLDEN_COVE_SERVER,
    },
    // The same kind of guest, lent again on 2026-11-28 and read with its core-to-core matrix.
    Expected {
        folder: "emeraldrapids-kvm-16vcpu-c2c",
        microarch: "emeraldrapids",
        source_says: &["CPUID family 6 model 207"],
        cores: 16.0,
        per_cycle: GOLDEN_COVE_SERVER,
    },
    // The guest this project's developers worked on in 2026-11-28's sessions.
    Expected {
        folder: "emeraldrapids-kvm-2vcpu",
        microarch: "emeraldrapids",
        source_says: &["CPUID family 6 model 207"],
        cores: 2.0,
        per_cycle: GOLDEN_COVE_SERVER,
    },
    // Family 26 model 2 is Zen 5 (EPYC Turin); cpuinfo's 2.60 GHz is not the 4.0-4.1 it runs at.
    Expected {
        folder: "zen5-kvm-2vcpu",
        microarch: "zen5",
        source_says: &["CPUID family 26 model 2"],
        cores: 2.0,
        per_cycle: ZEN5,
    },
];

fn folder(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/machines")
        .join(name)
}

fn replay(name: &str) -> Value {
    let dir = folder(name);
    common::run_json(&["sysinfo", "--json", "--sysroot", dir.to_str().unwrap()])
}

/// The peak row a kernel's result is measured against.
fn row_of<'a>(peaks: &'a Value, result: &Value) -> Option<&'a Value> {
    let params = &result["params"];
    let op = result["op"].as_str()?;
    let form = match op.split_once('-') {
        Some(("dot", _)) => "dot",
        Some(("tile", _)) => "tile",
        _ => "arith",
    };
    let isa = match params["isa"].as_str()? {
        "amx" => "avx512",
        isa => isa,
    };
    let fma = params["fma"].as_bool().unwrap_or(false);
    peaks["cpu"]["table"].as_array()?.iter().find(|row| {
        row["precision"] == params["precision"]
            && row["isa"] == isa
            && row["form"].as_str().unwrap_or("arith") == form
            && row["fma"].as_bool() == Some(fma)
    })
}

#[test]
fn every_fixture_is_identified_as_its_documentation_says() {
    for m in MACHINES {
        let doc = replay(m.folder);
        let arch = &doc["host"]["cpu"]["microarch"];
        assert_eq!(arch["value"], m.microarch, "{}: {arch}", m.folder);
        let source = arch["source"].as_str().unwrap_or_default();
        for words in m.source_says {
            assert!(
                source.contains(words),
                "{}: '{source}' lacks '{words}'",
                m.folder
            );
        }
        let factors = &doc["peaks"]["cpu"]["factors"];
        assert_eq!(factors["cores"]["value"], m.cores, "{}", m.folder);
        for &(precision, isa, form, fma, want) in m.per_cycle {
            let row = doc["peaks"]["cpu"]["table"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| {
                    r["precision"] == precision
                        && r["isa"] == isa
                        && r["form"].as_str().unwrap_or("arith") == form
                        && r["fma"] == fma
                })
                .unwrap_or_else(|| panic!("{}: no {precision} {isa} {form} row", m.folder));
            assert_eq!(
                row["per_cycle_per_core"].as_f64(),
                Some(want),
                "{}: {precision} {isa} {form}",
                m.folder
            );
        }
    }
}

#[test]
fn the_replayed_clock_is_the_independent_reading() {
    for m in MACHINES {
        let doc = replay(m.folder);
        let text = std::fs::read_to_string(folder(m.folder).join("clock-independent.txt")).unwrap();
        let add: f64 = text.split_whitespace().next().unwrap().parse().unwrap();
        let measured = &doc["peaks"]["cpu"]["factors"]["measured_ghz"];
        assert_eq!(
            measured["value"].as_f64(),
            Some(add),
            "{}: {measured}",
            m.folder
        );
        assert!(measured["detail"].as_str().unwrap().contains("imul chain"));
    }
}

/// The model against the machine: every kernel peakbench measured there (one thread, so no
/// sharing of a core can hide in it) has a peak, reads at most 3 % above its peak at the
/// highest clock the run saw (a kernel above that proves the table wrong: too few pipes), and
/// the f64 FMA kernel of the widest ISA reads at least 0.90 of its peak at the clock read right
/// after it. A fixture read before the clock fix carries a folded clock after each case (23 GHz
/// on a 4 GHz core); such readings are set aside for the independent one.
#[test]
fn no_kernel_beats_its_peak_on_the_machine_it_ran_on() {
    for m in MACHINES {
        let doc = replay(m.folder);
        let dir = folder(m.folder);
        let independent: f64 = std::fs::read_to_string(dir.join("clock-independent.txt"))
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let runs: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("peakbench-cpu-all.json")).unwrap(),
        )
        .unwrap();
        let one_thread: Vec<&Value> = runs["results"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["params"]["threads"] == 1)
            .collect();
        assert!(
            one_thread.len() > 20,
            "{}: {} kernels",
            m.folder,
            one_thread.len()
        );
        let clock_after = |r: &Value| {
            r["extra"]
                .as_array()
                .and_then(|extra| extra.iter().find(|e| e["metric"] == "clock_after"))
                .and_then(|e| e["value"].as_f64())
                .filter(|&ghz| (0.67 * independent..1.5 * independent).contains(&ghz))
                .unwrap_or(independent)
        };
        let highest = one_thread
            .iter()
            .map(|r| clock_after(r))
            .fold(independent, f64::max);
        for r in &one_thread {
            let id = r["id"].as_str().unwrap();
            let row =
                row_of(&doc["peaks"], r).unwrap_or_else(|| panic!("{}: {id} has no row", m.folder));
            let per_cycle = row["per_cycle_per_core"]
                .as_f64()
                .unwrap_or_else(|| panic!("{}: {id} has no peak: {}", m.folder, row["units"]));
            let value = r["value"].as_f64().unwrap();
            let top = value / (per_cycle * highest);
            assert!(
                top <= 1.03,
                "{}: {id} reads {value} = {top:.3} of its peak {per_cycle}/cycle at {highest} GHz",
                m.folder
            );
            if r["params"]["precision"] == "f64"
                && r["params"]["isa"] == "avx512"
                && r["params"]["fma"] == true
            {
                let own = value / (per_cycle * clock_after(r));
                assert!(own >= 0.90, "{}: {id} reads {own:.3} of its peak", m.folder);
            }
        }
    }
}

/// A folder that is not there is a usage error naming the flag.
#[test]
fn a_missing_sysroot_is_refused_naming_the_flag() {
    let out = common::run(&["sysinfo", "--sysroot", "/nonexistent/machine"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--sysroot") && err.contains("not a directory"),
        "{err}"
    );
}

/// On a 16-vCPU KVM guest of an Emerald Rapids Xeon the kernels at 16 threads do half of 16 × their
/// one-thread rate: `explain` names the shared cores for the run, and the kernels its document
/// judged against the table of its day (no add-only pipes) above their peaks as a wrong model.
#[test]
fn explain_names_the_shared_cores_and_the_wrong_model_of_a_real_run() {
    let file = folder("emeraldrapids-kvm-16vcpu").join("peakbench-cpu-all.json");
    let doc = common::run_json(&["explain", "--json", file.to_str().unwrap()]);
    let findings = if doc["findings"].is_object() {
        &doc["findings"]
    } else {
        &doc
    };
    let run = findings["run"].as_array().expect("run causes");
    let shared = run
        .iter()
        .find(|c| c["kind"] == "shared-cores")
        .unwrap_or_else(|| panic!("{run:?}"));
    let share = shared["value"].as_f64().unwrap();
    assert!((0.45..0.56).contains(&share), "{shared}");
    let wrong = findings["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            f["causes"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["kind"] == "model-wrong"))
        })
        .count();
    assert!(wrong >= 3, "{wrong} results name the wrong model");
}
