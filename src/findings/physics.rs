//! The physics: what a well-run machine reaches for each class of case, as a band of fractions
//! of the theoretical peak, and the ceilings no honest figure passes.
//!
//! The table is [`CLASSES`]; docs/findings.md prints it with the source of every band. A case
//! of no class, or of a class whose peak is unknown, gets no physics verdict, and the finding
//! says what is missing and which flag supplies it.

use crate::result::{Against, BenchResult, Expectation, Report, Subsystem, Verdict};
use crate::units::format_value;

/// One class of case and the band a well-run machine reaches, as fractions of the peak.
pub(super) struct Class {
    pub name: &'static str,
    /// What the class holds, for the docs and the finding.
    pub holds: &'static str,
    /// At or above `band[0]` of the peak is at the limit; above `band[1]` is more than the
    /// hardware can do.
    pub band: [f64; 2],
    /// Where the band comes from.
    pub source: &'static str,
}

/// Every class, in the order the docs list them.
pub(super) const CLASSES: &[Class] = &[
    Class {
        name: "simd-kernel",
        holds: "cpu flops and iops (dot products too): independent FMA, add, multiply or dot \
                product chains in registers",
        band: [0.90, 1.03],
        source: "peakbench's kernels and likwid-bench peakflops reach 0.97–0.99 of the peak on an \
                 idle core; 0.90 leaves room for a shared VM's clock; over 1.03 the clock or the \
                 pipe count of the peak is wrong (the model, not the hardware)",
    },
    Class {
        name: "amx-tile",
        holds: "cpu tile-flops and tile-iops: independent AMX tile multiplies",
        band: [0.80, 1.03],
        source: "one tdpbf16ps or tdpbssd per 16 cycles by Intel's AMX figures; peakbench's \
                 kernel reads one per 18-19 cycles (0.85-0.89) on two Golden Cove server guests \
                 (tests/fixtures/machines/)",
    },
    Class {
        name: "gemm",
        holds: "cpu gemm: a tuned BLAS's matrix multiply",
        band: [0.85, 1.03],
        source: "vendor BLAS (MKL, BLIS, OpenBLAS on its own microarchitecture) reach 0.85–0.95 \
                 of the FMA peak at n ≥ 2000",
    },
    Class {
        name: "linpack",
        holds: "cpu linpack at n ≥ 5000: HPL's LU solve",
        band: [0.70, 1.03],
        source: "tuned HPL reaches 0.75–0.90 of the peak on one node (TOP500 Rmax/Rpeak of \
                 CPU-only systems); smaller n spends a large share in O(n²) panel work",
    },
    Class {
        name: "dram-stream",
        holds: "memory bandwidth over a working set of at least 4× the last-level cache, every \
                core",
        band: [0.60, 1.0],
        source: "STREAM triad reaches 0.60–0.85 of channels × MT/s × 8 B on servers with every \
                 core; a working set this large cannot be served from a cache, so above 1.0 is a \
                 counting error",
    },
    Class {
        name: "cache-bandwidth",
        holds: "memory bandwidth over a working set held in each core's L1 or L2, or swept \
                through the shared L3: sequential and STREAM kernels with cached stores",
        band: [0.40, 1.03],
        source: "the peak is the load and store ports' bytes per cycle (L1) or the L2's lines per \
                 cycle, which only loads that do nothing with their data approach; a kernel that \
                 uses every byte pays an instruction per load. On a Golden Cove server guest \
                 likwid-bench read at L1 0.83 (load, bare loads), 0.48 (sum), 0.93 (copy), 0.96 \
                 (store) and 0.56 (stream) of it, and at L2 0.49-0.68; Intel's guide gives a \
                 sustained L2 of 0.75-0.81 of its peak (48-52 of 64 bytes per cycle); 0.40 \
                 leaves the sum kernel's 0.48 the room a shared VM's clock takes; over 1.03 the \
                 clock or the row is wrong",
    },
    Class {
        name: "disk-rated",
        holds: "disk throughput or IOPS against the rating given with --disk-*",
        band: [0.80, 1.10],
        source: "fio on an idle device reaches 0.85–1.0 of the vendor's sequential and random \
                 ratings at their queue depth; above 1.10 the reads came from a cache",
    },
    Class {
        name: "tcp-link",
        holds: "TCP throughput over a NIC with a link speed",
        band: [0.85, 1.0],
        source: "TCP payload is at most 1448 of every 1538 bytes a 1500-byte MTU puts on the \
                 wire (0.94); iperf3 reaches 0.90–0.94 of the link on an idle path",
    },
];

/// At or under this multiple of the table's cycles, a load's latency is at its limit: the
/// chase adds a TLB hit and the loop's own branch to the load.
const LATENCY_SLACK: f64 = 1.20;

/// Under this fraction of the table's cycles, a load was faster than its cache can be: the
/// clock or the level is wrong.
const LATENCY_FLOOR: f64 = 0.90;

/// A load latency against its level: in a core's private cache (L1, L2) the
/// microarchitecture's load-to-use cycles at the clock measured on the core (the result's
/// `latency_cycles`); in the shared L3 or DRAM the row's band in nanoseconds.
fn latency(report: &Report, r: &BenchResult) -> Option<Result<Expectation, String>> {
    if (r.subsystem, r.op.as_str()) != (Subsystem::Memory, "latency") {
        return None;
    }
    let level = r.params.other.get("cache_level").and_then(|v| v.as_str())?;
    let name = report.host.cpu.microarch.value.as_deref()?;
    let table = crate::sysinfo::microarch::load_latency(name)?;
    let expected = match level {
        "L1" => table.l1_cycles,
        "L2" => table.l2_cycles,
        _ => return Some(far_latency(report, r, name)),
    };
    let Some(cycles) = r.extra.iter().find(|e| e.metric == "latency_cycles") else {
        return Some(Err(
            "a latency in cycles (the clock was not measured)".into()
        ));
    };
    let ratio = expected / cycles.value;
    let verdict = if ratio > 1.0 / LATENCY_FLOOR {
        Verdict::AboveLimit
    } else if ratio >= 1.0 / LATENCY_SLACK {
        Verdict::AtLimit
    } else {
        Verdict::Below
    };
    Some(Ok(Expectation {
        against: Against::Physics,
        verdict,
        expected: r.value * ratio,
        ratio,
        class: Some("cache-latency".into()),
        band: Some([1.0 / LATENCY_SLACK, 1.0 / LATENCY_FLOOR]),
        source: format!(
            "{level} load-to-use latency of {name}: {expected} cycles ({}); measured {:.2} \
             cycles at the clock of the core; at the limit up to {LATENCY_SLACK} × the table, \
             below {LATENCY_FLOOR} × it the clock or the level is wrong",
            table.source, cycles.value
        ),
        test: None,
    }))
}

/// A chase this much of whose region was backed by huge pages is judged by the bands, which
/// are measured with them (2 MiB pages reach 1 GiB or more through the TLB).
const HUGE_SHARE: f64 = 0.9;

/// A latency beyond the private caches against the row's band for its level: the shared L3
/// for a working set within half of it, DRAM for one beyond the caches by sysinfo's sizes
/// (4 × the last level) or by the run's own latency curve.
fn far_latency(report: &Report, r: &BenchResult, name: &str) -> Result<Expectation, String> {
    let bands = crate::sysinfo::microarch::far_latency(name)
        .ok_or_else(|| format!("a latency band beyond the private caches of {name}"))?;
    let huge = match r
        .params
        .other
        .get("huge_page_share")
        .and_then(|v| v.as_f64())
    {
        Some(share) => share >= HUGE_SHARE,
        None => false,
    };
    if !huge {
        return Err(
            "a band for a chase over 4 KiB pages beyond the private caches: each load then \
             also walks the page tables, which the bands (measured over 2 MiB pages) leave out; \
             run `mem latency --huge-pages` where transparent huge pages are on"
                .into(),
        );
    }
    let host = report.inventory(&r.host).unwrap_or(&report.host);
    let llc = host.cpu.last_level_cache_bytes();
    let set = r.params.working_set_bytes.unwrap_or(0);
    let in_memory = super::boundaries::beyond_caches(report, &r.host)
        .is_some_and(|edge| edge.holds_in_memory(set));
    let (level, band) = if in_memory || (llc > 0 && set >= 4 * llc) {
        ("DRAM", bands.dram_ns)
    } else if llc > 0 && set <= llc / 2 {
        ("L3", bands.l3_ns)
    } else {
        return Err(format!(
            "a band for a working set between the last-level cache and memory ({} against a {} \
             cache): part of its loads hit, part miss",
            crate::units::format_size(set),
            crate::units::format_size(llc)
        ));
    };
    // Lower is better: the ratio is the band's slowest over the reading, at the limit from 1
    // (as slow as the band allows) to fastest/slowest's inverse (as fast as the level can be).
    let ratio = band[1] / r.value;
    let top = band[1] / band[0];
    let verdict = if ratio > top / LATENCY_FLOOR {
        Verdict::AboveLimit
    } else if ratio >= 1.0 {
        Verdict::AtLimit
    } else {
        Verdict::Below
    };
    Ok(Expectation {
        against: Against::Physics,
        verdict,
        expected: band[1],
        ratio,
        class: Some("far-latency".into()),
        band: Some([1.0, top / LATENCY_FLOOR]),
        source: format!(
            "{level} latency of {name}, idle, over huge pages: {}-{} ns ({}); at the limit up \
             to {} ns, faster than {LATENCY_FLOOR} × {} ns the level is wrong",
            band[0], band[1], bands.source, band[1], band[0]
        ),
        test: None,
    })
}

/// What a class's band says of `r`, or why there is no physics for it.
pub(super) fn expect(report: &Report, r: &BenchResult) -> Result<Expectation, String> {
    if let Some(judged) = latency(report, r) {
        return judged;
    }
    let class = class_of(report, r)?;
    let peak = r.peak.as_ref().ok_or_else(|| missing_peak(r))?;
    if peak.value <= 0.0 {
        return Err(missing_peak(r));
    }
    let ratio = r.value / peak.value;
    let (judged, share) = match class {
        Some(class) => band_of(report, r, class),
        None => ([0.0, 1.0], None),
    };
    // A result on the core's clock ran at some moment of a boost clock that moves: above the
    // ceiling only at the fastest clock the run read, below the band only at the clock read
    // right after it where that fell.
    let ceiling = super::causes::at_fastest_clock(report, r).unwrap_or(ratio);
    let floor = super::causes::at_own_lower_clock(r).unwrap_or(ratio);
    let (verdict, band) = match class {
        Some(_) => (
            if ceiling > judged[1] {
                Verdict::AboveLimit
            } else if floor >= judged[0] {
                Verdict::AtLimit
            } else {
                Verdict::Below
            },
            Some(judged),
        ),
        // A ceiling with no band: only passing it says anything.
        None if ratio > 1.0 => (Verdict::AboveLimit, Some([0.0, 1.0])),
        None => return Err(no_band(r)),
    };
    let expected = band.map_or(peak.value, |b| peak.value * b[0]);
    Ok(Expectation {
        against: Against::Physics,
        verdict,
        expected: if verdict == Verdict::AboveLimit {
            peak.value
        } else {
            expected
        },
        ratio,
        class: Some(class.map_or("ceiling", |c| c.name).to_string()),
        band,
        source: format!(
            "the peak {} {} ({}){}",
            format_value(peak.value),
            peak.unit,
            peak.source,
            class
                .map(|c| match &share {
                    Some(share) => format!(
                        " × the band {:.2}–{:.2} of class {} ({}: {share})",
                        judged[0], judged[1], c.name, c.holds
                    ),
                    None => format!(
                        " × the band {:.2}–{:.2} of class {} ({}: {})",
                        c.band[0], c.band[1], c.name, c.holds, c.source
                    ),
                })
                .unwrap_or_default()
        ),
        test: None,
    })
}

/// Below this share of the expected one, a cache kernel is below its limit: a shared VM's clock
/// and the spread between runs take the rest.
const SHARE_SLACK: f64 = 0.90;

/// The band `r` is judged by in `class`, and where it comes from when it is not the class's
/// own: a cache kernel of a row whose share of the peak was measured is at its limit from 0.9
/// of that share up to the model's ceiling (faster than expected is still not above the peak).
fn band_of(report: &Report, r: &BenchResult, class: &Class) -> ([f64; 2], Option<String>) {
    if class.name != "cache-bandwidth" {
        return (class.band, None);
    }
    let level = r.params.other.get("cache_level").and_then(|v| v.as_str());
    let host = report.inventory(&r.host).unwrap_or(&report.host);
    let share = host
        .cpu
        .microarch
        .value
        .as_deref()
        .zip(level)
        .and_then(|(name, level)| {
            crate::sysinfo::microarch::cache_kernel_share(name, level, kernel_op(r))
                .map(|(share, source)| (name, level, share, source))
        });
    match share {
        Some((name, level, share, source)) => (
            [share * SHARE_SLACK, class.band[1]],
            Some(format!(
                "{} at {level} of {name} reaches {share:.2} of the peak ({source}); at its limit \
                 from {SHARE_SLACK} × that",
                kernel_op(r)
            )),
        ),
        None => (class.band, None),
    }
}

/// The memory kernel of `r`: its op, or for a roofline's roof the `mem` op it ran.
fn kernel_op(r: &BenchResult) -> &str {
    r.params
        .other
        .get("kernel_op")
        .and_then(|v| v.as_str())
        .unwrap_or(&r.op)
}

/// The class of `r`: `Ok(Some)` with a band, `Ok(None)` for a case whose peak is only a
/// ceiling, `Err` with why it has neither.
fn class_of(report: &Report, r: &BenchResult) -> Result<Option<&'static Class>, String> {
    let class = |name: &str| CLASSES.iter().find(|c| c.name == name);
    let threads = r.params.threads.unwrap_or(1);
    match (r.subsystem, r.op.as_str()) {
        (Subsystem::Cpu, "flops" | "iops" | "dot-flops" | "dot-iops") => Ok(class("simd-kernel")),
        (Subsystem::Cpu, "tile-flops" | "tile-iops") => Ok(class("amx-tile")),
        (Subsystem::Cpu, "gemm") => Ok(class("gemm")),
        (Subsystem::Cpu, "linpack") => match r.params.n {
            Some(n) if n >= 5000 => Ok(class("linpack")),
            Some(n) => Err(format!(
                "a band for Linpack at n={n}: below n=5000 its O(n²) panel work keeps it \
                 far from the peak on any machine; give --n 10000 or more"
            )),
            None => Err("a band for Linpack without its order n".into()),
        },
        (Subsystem::Cpu, op) => Err(format!(
            "a class for cpu {op}: peakbench has no band for it"
        )),
        (Subsystem::Memory, "latency") => Err(
            "a latency model for this CPU: its microarchitecture is unknown or has no row (give \
             --reference, or judge it by its past)"
                .into(),
        ),
        (Subsystem::Memory, "c2c") => Err(
            "a model of the core-to-core round trip: peakbench has none (the interconnect's \
             latency is not in any vendor table); judge it by its past or with --reference"
                .into(),
        ),
        // A roofline's ceilings and roofs are the `cpu` and `mem` kernels' own cases.
        (Subsystem::Memory | Subsystem::Roofline, "bandwidth") | (Subsystem::Memory, _) => {
            memory_class(report, r, threads)
        }
        (Subsystem::Roofline, "compute") => Ok(class("simd-kernel")),
        (Subsystem::Disk, _) => Ok(class("disk-rated")),
        (Subsystem::Network, op) if op.ends_with("throughput") => {
            let loopback = r.params.other.get("loopback").and_then(|v| v.as_bool());
            if op.starts_with("tcp") && loopback != Some(true) {
                Ok(class("tcp-link"))
            } else {
                Ok(None) // loopback's copy bound and a UDP sender's link are ceilings
            }
        }
        (Subsystem::Roofline, _) => Err(
            "a band for the roofline's sweep and model: they are held against its ceilings and \
             roofs instead (its self-check, in the model's warnings)"
                .into(),
        ),
        (Subsystem::Network, _) => Err(
            "a peak for a round trip: peakbench models none; judge it by its past or with \
             --reference (sockperf)"
                .into(),
        ),
    }
}

/// The class of a memory bandwidth result (or a roofline's roof, the same case): none for a
/// working set in the caches, a ceiling for fewer cores than the machine has.
fn memory_class(
    report: &Report,
    r: &BenchResult,
    threads: usize,
) -> Result<Option<&'static Class>, String> {
    let class = |name: &str| CLASSES.iter().find(|c| c.name == name);
    let level = r.params.other.get("cache_level").and_then(|v| v.as_str());
    if matches!(level, Some("L1" | "L2")) {
        return Ok(class("cache-bandwidth"));
    }
    let host = report.inventory(&r.host).unwrap_or(&report.host);
    let llc = host.cpu.last_level_cache_bytes();
    let set = r.params.working_set_bytes.unwrap_or(0);
    // The run's own latency curve overrules sysinfo's sizes where they disagree: a guest shown
    // its host's L3 gets only a share of it.
    let in_memory = super::boundaries::beyond_caches(report, &r.host)
        .is_some_and(|edge| edge.holds_in_memory(set));
    if level == Some("L3") && !in_memory {
        return Ok(class("cache-bandwidth"));
    }
    if llc > 0 && set < 4 * llc && !in_memory {
        Err(format!(
            "a peak for a working set in the shared cache ({} against a {} last-level \
                 cache): the L3 model holds a set of at most half of it, and the run's latency \
                 curve did not show where this guest's share of it ends; judge it by its past \
                 or with --reference",
            crate::units::format_size(set),
            crate::units::format_size(llc)
        ))
    } else if threads < host.cpu.physical_cores {
        Ok(None) // the DRAM peak is a ceiling for a few cores, not what they reach
    } else {
        Ok(class("dram-stream"))
    }
}

fn missing_peak(r: &BenchResult) -> String {
    match r.subsystem {
        Subsystem::Cpu => "the CPU peak: give --cpu-ghz and --fma-units".into(),
        Subsystem::Memory if r.params.other.contains_key("cache_level") => {
            "the cache peak: the microarchitecture's row or the clock is unknown (sysinfo names \
             both; give --cpu-ghz)"
                .into()
        }
        Subsystem::Memory => {
            "the memory peak (no readable DIMM table): give --mem-channels and --mem-mts".into()
        }
        Subsystem::Disk => {
            "the disk's rating: give --disk-mbps and --disk-iops (or the --disk-read-*/--disk-write-* \
             ones)"
                .into()
        }
        Subsystem::Network => "the link speed: give --nic-gbps".into(),
        Subsystem::Roofline => "the CPU and memory peaks: give --cpu-ghz, --fma-units, \
                                --mem-channels and --mem-mts"
            .into(),
    }
}

fn no_band(r: &BenchResult) -> String {
    match r.subsystem {
        Subsystem::Network => {
            "a band for this path: the loopback copy bound and a UDP sender's link are ceilings, \
             not what a well-run machine reaches; judge it by its past or with --reference"
                .into()
        }
        _ => "a band for a case using fewer cores than the machine has: the DRAM peak needs \
              every core; run with --threads equal to the cores"
            .into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_band_is_ordered_and_sourced() {
        for c in CLASSES {
            assert!(c.band[0] < c.band[1], "{}", c.name);
            assert!(!c.source.is_empty() && !c.holds.is_empty());
        }
    }
}
