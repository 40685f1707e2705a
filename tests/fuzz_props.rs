//! The fuzz targets of `fuzz/` as property tests on stable: each target's function in
//! `peakbench::fuzzing` fed a seeded, deterministic stream of inputs (the seeds below and the
//! committed corpus in `fuzz/corpus/<target>`, mutated: bytes flipped, inserted, deleted, spliced,
//! copied), a few seconds per target, so a regression of anything a campaign found fails
//! `cargo test`. Each crash a campaign finds is also a named case here.

use std::path::Path;

use peakbench::fuzzing;
use peakbench::rng::Rng;

/// The committed corpus of a target, and the seeds given here.
fn seeds(target: &str, extra: &[&[u8]]) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut out: Vec<Vec<u8>> = extra.iter().map(|s| s.to_vec()).collect();
    if let Ok(entries) = std::fs::read_dir(dir) {
        let mut files: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        files.sort();
        out.extend(files.iter().filter_map(|f| std::fs::read(f).ok()));
    }
    assert!(!out.is_empty(), "{target} has seeds");
    out
}

/// One mutation of `input` (structure kept often enough to reach past the first parser).
fn mutate(rng: &mut Rng, input: &[u8], pool: &[Vec<u8>]) -> Vec<u8> {
    const INTERESTING: &[&[u8]] = &[
        b"\x1b[2J",
        b"\x1b]52;c;x\x07",
        b"\xc2\x9b",
        b"\x7f",
        b"\r\n",
        b"-1",
        b"0",
        b"1e308",
        b"18446744073709551615",
        b"4294967296",
        b"NaN",
        b"inf",
        b"[]",
        b"{}",
        b"null",
        b"\"\"",
        b",",
        b"true",
        b"[true]",
        b"1e-400",
        b"9223372036854775808",
    ];
    let mut out = input.to_vec();
    for _ in 0..=rng.below(4) {
        let at = if out.is_empty() {
            0
        } else {
            rng.index(out.len() + 1)
        };
        match rng.below(6) {
            0 if !out.is_empty() => {
                let i = rng.index(out.len());
                out[i] ^= 1 << rng.below(8);
            }
            1 => {
                let piece = INTERESTING[rng.index(INTERESTING.len())];
                out.splice(at..at, piece.iter().copied());
            }
            2 if at < out.len() => {
                let end = (at + 1 + rng.index(16)).min(out.len());
                out.drain(at..end);
            }
            3 => {
                let other = &pool[rng.index(pool.len())];
                if !other.is_empty() {
                    let from = rng.index(other.len());
                    let end = (from + 1 + rng.index(64)).min(other.len());
                    out.splice(at..at, other[from..end].iter().copied());
                }
            }
            4 if !out.is_empty() => {
                let i = rng.index(out.len());
                out[i] = rng.below(256) as u8;
            }
            _ => {
                let end = (at + rng.index(8)).min(out.len());
                let copy: Vec<u8> = out[at..end].to_vec();
                out.splice(at..at, copy);
            }
        }
    }
    out
}

/// Runs `target` on every seed and on `rounds` mutations of them, from a fixed seed.
fn property(name: &str, pool: Vec<Vec<u8>>, rounds: usize, target: impl Fn(&[u8])) {
    let mut rng = Rng::for_thread(0x33_33_33, name.len());
    for input in &pool {
        target(input);
    }
    for _ in 0..rounds {
        let base = &pool[rng.index(pool.len())];
        let input = mutate(&mut rng, base, &pool);
        target(&input);
    }
}

fn text(f: impl Fn(&str)) -> impl Fn(&[u8]) {
    move |bytes| {
        if let Ok(t) = std::str::from_utf8(bytes) {
            f(t)
        }
    }
}

#[test]
fn cli_value_parsers_never_panic() {
    let pool = seeds(
        "options",
        &[
            b"\x0010s",
            b"\x011.5s",
            b"\x024KiB",
            b"\x031e6",
            b"\x043",
            b"\x052.5",
            b"\x063.1",
            b"\x0750",
            b"\x0810Gbit/s",
            b"\x098",
            b"\x0a1,2,4,8",
            b"\x0b1GiB",
            b"\x021e30GiB",
            b"\x00999999999999999999d",
            b"\x08999999999999Tbit/s",
        ],
    );
    property("options", pool, 20_000, |bytes| {
        if let Some((&which, rest)) = bytes.split_first()
            && let Ok(t) = std::str::from_utf8(rest)
        {
            fuzzing::cli_value(which, t);
        }
    });
}

#[test]
fn run_configs_never_panic() {
    let mut extra: Vec<&[u8]> = vec![
        b"[[cpu]]\nthreads = [1, 2]\nduration = \"1s\"\n",
        b"[[memory]]\nop = [\"read\", \"copy\"]\nsize = \"64KiB\"\n",
        // A boolean inside a list reached unreachable!() (exit 101).
        b"[[cpu]]\nthreads = [true]\n",
    ];
    let presets: Vec<String> = ["quick", "standard", "full"]
        .iter()
        .map(|p| {
            std::fs::read_to_string(
                Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("presets/{p}.toml")),
            )
            .unwrap()
        })
        .collect();
    extra.extend(presets.iter().map(|p| p.as_bytes()));
    let config = |text: &str| {
        if let Ok(entries) = peakbench::config::parse(text, "fuzz") {
            for entry in &entries {
                let _ = peakbench::config::parse_entry(entry, "fuzz");
            }
        }
    };
    property("config", seeds("config", &extra), 300, text(config));
}

#[test]
fn control_lines_and_the_handshake_never_panic() {
    let hello = br#"{"type":"hello","peakbench":1,"test":{"proto":"tcp","mode":"throughput","msg_bytes":131072,"streams":1,"omit_ms":0,"duration_ms":1000,"reverse":false,"rate_bps":null}}"#;
    let pool = seeds(
        "control_line",
        &[
            hello,
            br#"{"type":"refused","error":"\u001b[2Jbusy"}"#,
            br#"{"type":"window","window_ns":5,"stream_bytes":[1,2]}"#,
            br#"{"type":"final","udp":[{"received":1,"reordered":0,"duplicates":0,"jitter_ns":0.5}]}"#,
            b"{\"type\":\"\x1b]52;c;x\x07\"}\n{\"type\":\"stop\"}",
        ],
    );
    property("control_line", pool, 20_000, fuzzing::control_bytes);
}

#[test]
fn udp_datagrams_never_panic() {
    let mut crafted = vec![20u8, 0];
    crafted.extend_from_slice(&[0, 0, 0, 0]);
    // A sequence number of 2^64 − 1 and a sender clock of 2^63: the transit time's
    // subtraction overflowed i64 (a panic in this debug build) before it wrapped.
    crafted.extend_from_slice(&u64::MAX.to_le_bytes());
    crafted.extend_from_slice(&(1u64 << 63).to_le_bytes());
    crafted.extend_from_slice(&[20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    crafted.extend_from_slice(&0u64.to_le_bytes());
    property(
        "udp_datagram",
        seeds("udp_datagram", &[&crafted, b"\x08\x00abcdefgh"]),
        20_000,
        fuzzing::udp_datagrams,
    );
}

#[test]
fn results_documents_never_panic_nor_reach_the_terminal_raw() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let fixtures: Vec<String> = ["report.json", "findings.json"]
        .iter()
        .map(|f| std::fs::read_to_string(root.join("tests/fixtures").join(f)).unwrap())
        .collect();
    let cluster = r#"{"schema_version":3,"tool":{"name":"peakbench","version":"0"},"command":[],"started_at":"x","finished_at":null,"status":"complete","host":HOST,"peaks":PEAKS,"config":{},"warnings":[],"results":[],"cluster":{"ranks":2,"hosts":[{"name":"a","ranks":[0]},{"name":"b","ranks":[1]}],"phase":"done","threshold":0.9,"matrices":[{"metric":"m","unit":"Gb/s","higher_is_better":true,"counting":"c","hosts":["a","b"],"values":[[null,1.0],[2.0,null]],"median":1.5}]}}"#;
    let doc: serde_json::Value = serde_json::from_str(&fixtures[0]).unwrap();
    let cluster = cluster
        .replace("HOST", &doc["host"].to_string())
        .replace("PEAKS", &doc["peaks"].to_string());
    // The same matrix in schema 4's sparse form (`cells`).
    let sparse = cluster
        .replace("\"schema_version\":3", "\"schema_version\":4")
        .replace(
            "\"values\":[[null,1.0],[2.0,null]]",
            "\"cells\":[[0,1,1.0],[1,0,2.0]]",
        );
    assert!(sparse.contains("cells"));
    let extra: Vec<&[u8]> = vec![
        fixtures[0].as_bytes(),
        fixtures[1].as_bytes(),
        cluster.as_bytes(),
        sparse.as_bytes(),
    ];
    // Rendering every format of a full document takes milliseconds in a debug build.
    property(
        "document",
        seeds("document", &extra),
        150,
        text(fuzzing::document),
    );
}

#[test]
fn baseline_files_never_panic_nor_reach_the_terminal_raw() {
    let extra: Vec<&[u8]> = vec![
        br#"{"format":"peakbench-baseline","version":1}"#,
        br#"{"format":"peakbench-baseline","version":1,"name":"a","created_at":"x","tool_version":"0","fingerprint":{"microarch":"m","cpu_model":"c","cpus":2,"memory_gib":4,"disks":[],"nics":[],"kernel_major":"6"},"host":"h","cases":[{"id":"i","label":"l","metric":"m","unit":"u","runs":[1],"samples":[1.0]}]}"#,
    ];
    property(
        "baseline",
        seeds("baseline", &extra),
        3000,
        text(fuzzing::baseline),
    );
}
