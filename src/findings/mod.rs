//! Findings: every result judged against its peak, the standard tool, its past and its fleet,
//! and every shortfall explained by what the machine showed while it ran.
//!
//! Judging reads only the document (its results, their evidence, the run's evidence) and the
//! earlier runs of the same hardware from the history, never the machine: `peakbench explain`
//! judges a stored or imported run as the run itself did. The rules and their thresholds are
//! in `docs/findings.md`.

pub mod explain;
use crate::result::{Findings, Report};

/// An earlier run of the same case on the same hardware, from the history.
#[derive(Clone, Debug)]
pub struct PastRun {
    /// Its id in the history.
    pub id: i64,
    pub report: Report,
}

/// Judges every result of `report` against its physics, its reference, `past` (earlier runs
/// of the same hardware, newest first) and, in a cluster run, the other hosts.
pub fn judge(report: &Report, past: &[PastRun]) -> Findings {
    let _ = (report, past);
    Findings::default()
}

/// The earlier runs in the history at `db` of the hardware `report` was measured on, newest
/// first, at most [`PAST_RUNS`], those stored before `before` (its own id) when it is stored.
pub fn past_runs(
    db: &crate::options::DbArgs,
    report: &Report,
    before: Option<i64>,
) -> Vec<PastRun> {
    let _ = (db, report, before);
    Vec::new()
}

/// How many earlier runs the past is read from.
pub const PAST_RUNS: usize = 20;
