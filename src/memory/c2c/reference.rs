//! `core-to-core-latency` (crates.io) beside `peakbench mem c2c`, on the same CPUs.
//!
//! Its bench 1 spins a compare-and-swap each way on one line (peakbench's `cas` mode); its
//! bench 2 has each side store to its own line and load the other's (peakbench's `store`
//! mode uses one line both ways: the nearest it has). It times samples of 1000 round trips
//! and prints, per pair, the mean of 300 samples of loop time / iterations / 2: half a round
//! trip. So its figure × 2 is set beside peakbench's round trip (a median of batches). With
//! `--csv` it prints that matrix on stdout: row i, column j (j < i) for the CPUs in the order
//! given by `--cores`.

use std::time::Duration;

use crate::reference::{Invocation, Reading, ToolSpec};
use crate::result::Reference;
use crate::sysinfo::c2c::{C2cMatrix, C2cMode};

const TOOL: ToolSpec = ToolSpec {
    name: "core-to-core-latency",
    program: "core-to-core-latency",
    install: "cargo install core-to-core-latency",
};

/// The most pairs the tool is run on: it measures every pair, 300 × 1000 round trips each.
const MAX_PAIRS: usize = 500;

/// Runs the tool on `cpus` and records each pair's figure × 2 in `matrix`; the reference's
/// value is the median over pairs, as the headline is.
pub(super) fn run(
    mode: C2cMode,
    cpus: &[usize],
    matrix: &mut C2cMatrix,
) -> anyhow::Result<Reference> {
    let bench = match mode {
        C2cMode::Cas => "1",
        C2cMode::Store => "2",
    };
    let list: Vec<String> = cpus.iter().map(usize::to_string).collect();
    let args: Vec<String> = vec![
        "1000".into(),
        "300".into(),
        "--csv".into(),
        "-b".into(),
        bench.into(),
        "--cores".into(),
        list.join(","),
    ];
    let n = cpus.len();
    let pairs = n * (n - 1) / 2;
    // 300 × 1000 round trips of at most ~1 µs each per pair, and a margin.
    let timeout = Duration::from_secs(30 + pairs as u64 / 2);
    let mut parsed: Option<Vec<(usize, usize, f64)>> = None;
    let invocation = Invocation::new(TOOL, args, timeout, |stdout| {
        let cells = parse_csv(stdout, cpus).ok_or("no matrix of means on its stdout (--csv)")?;
        let values: Vec<f64> = cells.iter().map(|c| c.2).collect();
        let median = crate::stats::median(&values).ok_or("an empty matrix")?;
        parsed = Some(cells);
        Ok(Reading {
            value: median,
            note: Some(format!(
                "core-to-core-latency bench {bench}: the mean of 300 samples of 1000 round trips \
                 per pair, × 2 (it prints half a round trip); the median over pairs{}",
                if mode == C2cMode::Store {
                    "; its bench 2 uses two lines, one per writer"
                } else {
                    ""
                }
            )),
        })
    });
    let invocation = if pairs > MAX_PAIRS || matrix.sampled.is_some() {
        invocation.refuse(format!(
            "not run: {pairs} pairs (it measures every pair, about 30 ms each); give --cpus \
             with at most 32 CPUs to compare"
        ))
    } else {
        invocation
    };
    let reference = invocation.run()?;
    for (a, b, ns) in parsed.unwrap_or_default() {
        if let Some(cell) = matrix
            .pairs
            .iter_mut()
            .find(|p| p.cpus == [a.min(b), a.max(b)])
        {
            cell.reference_ns = Some(ns);
        }
    }
    Ok(reference)
}

/// The tool's `--csv` matrix as (CPU, CPU, round-trip ns): row i, column j < i, × 2.
fn parse_csv(stdout: &str, cpus: &[usize]) -> Option<Vec<(usize, usize, f64)>> {
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains(',') || l.trim().parse::<f64>().is_ok() || l.trim().is_empty())
        .collect();
    let rows = &rows[rows.len().checked_sub(cpus.len())?..];
    let mut cells = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        for (j, field) in row.split(',').enumerate().take(i) {
            if let Ok(v) = field.trim().parse::<f64>()
                && v.is_finite()
                && v > 0.0
            {
                cells.push((cpus[j], cpus[i], v * 2.0));
            }
        }
    }
    (!cells.is_empty()).then_some(cells)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tools_half_round_trips_become_round_trips_by_pair() {
        let out = ",,\n31.5,,\n70,62.25,\n";
        let cells = parse_csv(out, &[0, 2, 5]).unwrap();
        assert_eq!(cells, [(0, 2, 63.0), (0, 5, 140.0), (2, 5, 124.5)]);
        assert!(parse_csv("nothing here", &[0, 1]).is_none());
    }
}
