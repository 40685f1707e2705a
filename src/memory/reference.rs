//! The standard tools next to `peakbench mem`: likwid-bench's kernels (load, store, copy,
//! stream) at the same threads and working set, and mbw for a single-threaded copy.
//!
//! Counting conventions, reconciled to peakbench's (bytes read + bytes written, decimal GB/s,
//! write-allocate not counted):
//! - likwid-bench reports "MByte/s" = its data volume (loads + stores of the kernel, 8 B each,
//!   no write-allocate) / time, in 10^6 B/s: the same rule, so only divided by 1000. Its
//!   `-w S0:SIZE:THREADS` sizes the working set of all streams and threads together, as
//!   `--size` does here.
//! - mbw `-t0` (memcpy) reports MiB copied per second, each byte counted once; peakbench counts
//!   a copied byte twice (read and written), so mbw's value is × 2 × 1.048576 / 1000.

use std::process::Command;
use std::time::Duration;

use super::{BandwidthCase, MemOp};
use crate::reference::{Tool, command_line, last_line, run_bounded};
use crate::result::Reference;

const LIKWID: Tool = Tool {
    name: "likwid-bench",
    program: "likwid-bench",
    install: "apt-get install likwid",
};

const MBW: Tool = Tool {
    name: "mbw",
    program: "mbw",
    install: "apt-get install mbw",
};

/// Each tool run is bounded so that a stuck tool cannot hold the run.
const TIMEOUT: Duration = Duration::from_secs(120);

/// The reference for a case: the tool that measures the same thing, or a note why none does.
pub fn for_case(case: &BandwidthCase) -> Reference {
    let suffix = if case.isa == super::kernels::Isa::Avx512 {
        "_avx512"
    } else {
        "_avx"
    };
    let nt = case.nt;
    let kernel = match case.op {
        MemOp::Read => format!("load{suffix}"),
        MemOp::Write if nt => format!("store_mem{suffix}"),
        MemOp::Write => format!("store{suffix}"),
        MemOp::Copy if case.threads == 1 && !nt => return mbw(case),
        MemOp::Copy | MemOp::StreamCopy if nt => format!("copy_mem{suffix}"),
        MemOp::Copy | MemOp::StreamCopy => format!("copy{suffix}"),
        MemOp::StreamTriad if nt => format!("stream_mem{suffix}"),
        MemOp::StreamTriad if case.isa == super::kernels::Isa::Avx512 => {
            "stream_avx512_fma".to_string()
        }
        MemOp::StreamTriad => format!("stream{suffix}"),
        MemOp::StreamScale | MemOp::StreamAdd => {
            return LIKWID.failed(
                "",
                "likwid-bench has no STREAM scale or add kernel (and hpcc's STREAM runs only \
                 inside its whole suite); no reference run",
            );
        }
        MemOp::RandRead | MemOp::RandWrite | MemOp::RandRw => {
            return LIKWID.failed(
                "",
                "no standard tool measures random memory access by block; no reference run",
            );
        }
    };
    likwid(case, &kernel)
}

fn likwid(case: &BandwidthCase, kernel: &str) -> Reference {
    let size_kb = (case.working_set() / 1000).max(1);
    let args: Vec<String> = vec![
        "-t".into(),
        kernel.into(),
        "-w".into(),
        format!("S0:{size_kb}kB:{}", case.threads),
    ];
    let Some(path) = LIKWID.path() else {
        return LIKWID.missing(&format!("likwid-bench {}", args.join(" ")));
    };
    let line = command_line(&path, &args);
    let output = match run_bounded(Command::new(&path).args(&args), TIMEOUT) {
        Ok(output) => output,
        Err(error) => return LIKWID.failed(&line, format!("{error:#}")),
    };
    let value = output
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("MByte/s:"))
        .and_then(|v| v.trim().parse::<f64>().ok());
    match value {
        Some(mbps) if output.success => LIKWID.value(
            &line,
            mbps / 1000.0,
            Some(match case.block {
                Some(block) => format!(
                    "likwid-bench MByte/s / 1000 (same counting); it streams whole arrays, \
                     peakbench accesses blocks of {block} B"
                ),
                None => {
                    "likwid-bench MByte/s / 1000 (same counting: loads + stores, no write-allocate)"
                        .into()
                }
            }),
        ),
        _ => LIKWID.failed(
            &line,
            format!("no MByte/s line: {}", last_line(&output.stderr)),
        ),
    }
}

fn mbw(case: &BandwidthCase) -> Reference {
    // mbw allocates two arrays of the size given, in MiB: the two regions of peakbench's copy.
    let mib = (case.slice >> 20).max(1);
    let args: Vec<String> = vec![
        "-q".into(),
        "-n".into(),
        "10".into(),
        "-t0".into(),
        mib.to_string(),
    ];
    let Some(path) = MBW.path() else {
        return MBW.missing(&format!("mbw {}", args.join(" ")));
    };
    let line = command_line(&path, &args);
    let output = match run_bounded(Command::new(&path).args(&args), TIMEOUT) {
        Ok(output) => output,
        Err(error) => return MBW.failed(&line, format!("{error:#}")),
    };
    match parse_mbw(&output.stdout) {
        Some(mib_per_s) if output.success => MBW.value(
            &line,
            mib_per_s * 2.0 * 1.048_576 / 1000.0,
            Some(
                "mbw AVG memcpy MiB/s counts each copied byte once: × 2 (read + written) × \
                 1.048576 / 1000 for GB/s; mbw copies whole arrays in one memcpy"
                    .into(),
            ),
        ),
        _ => MBW.failed(
            &line,
            format!("no AVG Copy line: {}", last_line(&output.stderr)),
        ),
    }
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
}
