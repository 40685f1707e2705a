//! The standard tools next to `peakbench mem`: likwid-bench's kernels (sum, store, copy,
//! stream) at the same threads and working set, and mbw for a single-threaded copy. A read is
//! judged against likwid-bench's `sum`, which adds every word it loads as peakbench's read uses
//! every byte; its `load`, which discards what it loads, is shown beside it ([`bare_loads`]).
//!
//! Counting conventions, reconciled to peakbench's (bytes read + bytes written, decimal GB/s,
//! write-allocate not counted):
//! - likwid-bench reports "MByte/s" = its data volume (loads + stores of the kernel, 8 B each,
//!   no write-allocate) / time, in 10^6 B/s: the same rule, so only divided by 1000. Its
//!   `-w S0:SIZE:THREADS` sizes the working set of all streams and threads together, as
//!   `--size` does here.
//! - mbw `-t0` (memcpy) reports MiB copied per second, each byte counted once; peakbench counts
//!   a copied byte twice (read and written), so mbw's value is × 2 × 1.048576 / 1000.

use std::time::Duration;

use super::kernels::MemIsa;
use super::op::MemOp;
use crate::reference::{Invocation, Reading, ToolSpec};
use crate::result::Reference;

const LIKWID: ToolSpec = ToolSpec {
    name: "likwid-bench",
    program: "likwid-bench",
    install: "apt-get install likwid",
};

const MBW: ToolSpec = ToolSpec {
    name: "mbw",
    program: "mbw",
    install: "apt-get install mbw",
};

/// Each tool run is bounded so that a stuck tool cannot hold the run.
const TIMEOUT: Duration = Duration::from_secs(120);

/// What a bandwidth case measures, as the tools are told it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ToolCase {
    pub op: MemOp,
    /// `None` for STREAM kernels.
    pub block: Option<u64>,
    pub threads: usize,
    pub nt: bool,
    pub isa: MemIsa,
    /// Bytes of each region of each thread.
    pub slice: u64,
    /// Bytes of all threads' regions together.
    pub working_set: u64,
}

/// likwid-bench's suffix for the kernels of `isa`.
fn suffix(isa: MemIsa) -> &'static str {
    if isa == MemIsa::Avx512 {
        "_avx512"
    } else {
        "_avx"
    }
}

/// Which standard tool measures a case: a likwid-bench kernel, mbw, or none (and why).
#[derive(Debug, PartialEq)]
enum Tool {
    Likwid(String),
    Mbw,
    None(&'static str),
}

fn tool(case: &ToolCase) -> Tool {
    let suffix = suffix(case.isa);
    let nt = case.nt;
    Tool::Likwid(match case.op {
        MemOp::Read => format!("sum{suffix}"),
        MemOp::Write if nt => format!("store_mem{suffix}"),
        MemOp::Write => format!("store{suffix}"),
        MemOp::Copy if case.threads == 1 && !nt => return Tool::Mbw,
        MemOp::Copy | MemOp::StreamCopy if nt => format!("copy_mem{suffix}"),
        MemOp::Copy | MemOp::StreamCopy => format!("copy{suffix}"),
        MemOp::StreamTriad if nt => format!("stream_mem{suffix}"),
        MemOp::StreamTriad if case.isa == MemIsa::Avx512 => "stream_avx512_fma".to_string(),
        MemOp::StreamTriad if case.isa == MemIsa::Avx2 => "stream_avx_fma".to_string(),
        MemOp::StreamTriad => format!("stream{suffix}"),
        MemOp::StreamScale | MemOp::StreamAdd => {
            return Tool::None(
                "likwid-bench has no STREAM scale or add kernel (and hpcc's STREAM runs only \
                 inside its whole suite); no reference run",
            );
        }
        MemOp::RandRead | MemOp::RandWrite | MemOp::RandRw => {
            return Tool::None(
                "no standard tool measures random memory access by block; no reference run",
            );
        }
    })
}

/// The reference for a case: the tool that measures the same thing, or a note why none does.
pub(crate) fn for_case(case: &ToolCase) -> anyhow::Result<Reference> {
    match tool(case) {
        Tool::Likwid(kernel) => likwid(case, &kernel),
        Tool::Mbw => mbw(case),
        Tool::None(why) => Ok(LIKWID.failed("", why)),
    }
}

/// likwid-bench's `load` kernel for a read, at the same working set and threads: loads whose
/// values nothing uses. It is not what the read is judged against: on a Sapphire Rapids-class
/// core any 512-bit arithmetic lowers the clock the loads run at to 0.89-0.95 of theirs
/// (docs/memory.md), so a read that proves its bytes stays at 0.83-0.86 of it while it runs at
/// 1.05-1.14 × `sum`. `None` for every other operation.
fn bare_loads_kernel(case: &ToolCase) -> Option<String> {
    (case.op == MemOp::Read).then(|| format!("load{}", suffix(case.isa)))
}

/// [`bare_loads_kernel`] run beside a read's reference, shown and not judged.
pub(crate) fn bare_loads(case: &ToolCase) -> Option<anyhow::Result<Reference>> {
    bare_loads_kernel(case).map(|kernel| likwid(case, &kernel))
}

fn likwid(case: &ToolCase, kernel: &str) -> anyhow::Result<Reference> {
    let size_kb = (case.working_set / 1000).max(1);
    let args: Vec<String> = vec![
        "-t".into(),
        kernel.into(),
        "-w".into(),
        format!("S0:{size_kb}kB:{}", case.threads),
    ];
    Invocation::new(LIKWID, args, TIMEOUT, |stdout| {
        let mbps = parse_likwid_mbytes(stdout).ok_or("no MByte/s line")?;
        let what = if kernel.starts_with("sum") {
            "; it adds every word it loads, as peakbench's read uses every byte"
        } else if kernel.starts_with("load") {
            "; it discards what it loads, where peakbench's read uses every byte, so the read \
             is not judged against it"
        } else {
            ""
        };
        let note = match case.block {
            Some(block) => format!(
                "likwid-bench MByte/s / 1000 (same counting){what}; it streams whole arrays, \
                 peakbench accesses blocks of {block} B"
            ),
            None => {
                "likwid-bench MByte/s / 1000 (same counting: loads + stores, no write-allocate)"
                    .into()
            }
        };
        Ok(Reading {
            value: mbps / 1000.0,
            note: Some(note),
        })
    })
    .run()
}

/// The `MByte/s:` figure of likwid-bench's report.
fn parse_likwid_mbytes(stdout: &str) -> Option<f64> {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("MByte/s:"))
        .and_then(|v| v.trim().parse::<f64>().ok())
}

fn mbw(case: &ToolCase) -> anyhow::Result<Reference> {
    // mbw allocates two arrays of the size given, in MiB: the two regions of peakbench's copy.
    let mib = (case.slice >> 20).max(1);
    let args: Vec<String> = vec![
        "-q".into(),
        "-n".into(),
        "10".into(),
        "-t0".into(),
        mib.to_string(),
    ];
    Invocation::new(MBW, args, TIMEOUT, |stdout| {
        let mib_per_s = parse_mbw(stdout).ok_or("no AVG Copy line")?;
        Ok(Reading {
            value: mib_per_s * 2.0 * 1.048_576 / 1000.0,
            note: Some(
                "mbw AVG memcpy MiB/s counts each copied byte once: × 2 (read + written) × \
                 1.048576 / 1000 for GB/s; mbw copies whole arrays in one memcpy"
                    .into(),
            ),
        })
    })
    .run()
}

/// The MiB/s of mbw's AVG line ("AVG\tMethod: MEMCPY\t… Copy: 9905.587 MiB/s").
fn parse_mbw(stdout: &str) -> Option<f64> {
    let line = stdout.lines().find(|l| l.starts_with("AVG"))?;
    let value = line.split("Copy:").nth(1)?.split_whitespace().next()?;
    value.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mbw_average_is_parsed() {
        let out = "0\tMethod: MEMCPY\tElapsed: 0.00487\tMiB: 64.00000\tCopy: 13138.986 MiB/s\n\
                   AVG\tMethod: MEMCPY\tElapsed: 0.00646\tMiB: 64.00000\tCopy: 9905.587 MiB/s\n";
        assert_eq!(parse_mbw(out), Some(9905.587));
        assert_eq!(parse_mbw("nothing"), None);
    }

    /// A read is judged against the likwid-bench kernel that uses its words (`sum`); the one
    /// that discards them (`load`) is only shown beside it.
    #[test]
    fn a_read_is_judged_against_sum_and_shown_beside_load() {
        let case = |op, isa| ToolCase {
            op,
            block: Some(8000),
            threads: 2,
            nt: false,
            isa,
            slice: 16_000,
            working_set: 32_000,
        };
        let read = case(MemOp::Read, MemIsa::Avx512);
        assert_eq!(tool(&read), Tool::Likwid("sum_avx512".into()));
        assert_eq!(bare_loads_kernel(&read).as_deref(), Some("load_avx512"));
        let read = case(MemOp::Read, MemIsa::Avx2);
        assert_eq!(tool(&read), Tool::Likwid("sum_avx".into()));
        assert_eq!(bare_loads_kernel(&read).as_deref(), Some("load_avx"));
        let copy = case(MemOp::Copy, MemIsa::Avx512);
        assert_eq!(tool(&copy), Tool::Likwid("copy_avx512".into()));
        assert_eq!(bare_loads_kernel(&copy), None);
        assert!(matches!(
            tool(&case(MemOp::StreamAdd, MemIsa::Avx512)),
            Tool::None(_)
        ));
    }

    #[test]
    fn likwid_bandwidth_is_parsed() {
        let out = "Cycles:\t\t\t1234\nMByte/s:\t\t14266.72\nTime:\t\t1.0 sec\n";
        assert_eq!(parse_likwid_mbytes(out), Some(14266.72));
        assert_eq!(parse_likwid_mbytes("nothing"), None);
    }
}
