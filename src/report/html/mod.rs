//! The HTML report: one self-contained file (inline CSS and SVG, no script, nothing fetched).
//!
//! It works on any report, from the fields every result has. The first screen is the run's
//! findings where the document has them (every result not at its limit, its verdict, what it
//! was judged against and its causes), then a summary per subsystem (the best figure of each
//! op, its efficiency and the tool's ratio, the warnings); then the machine and the peaks as
//! tables; then per subsystem the table users paste and the
//! charts. Charts group results by the axis (threads, block size, message size, streams, queue
//! depth, n, offered rate) and the quantity (the headline metric, each extra metric, latency
//! p50/p99); a line is one combination of the settings that vary within the chart, as
//! [`param_role`](crate::result::param_role) tells settings from bookkeeping, so a new
//! subsystem, parameter or metric gets its charts without changes here. On each chart: the
//! standard tool's values dashed in the line's colour, the theoretical peak as a labelled
//! horizontal line (dotted per line where it changes along the axis), and an efficiency chart
//! beside it. Also the cache-latency curve (working set on a log axis, cache sizes marked) and
//! each sampling run's time series (y axis fitted to the data, median and interquartile range
//! marked). Several runs (`peakbench report A B`) share the charts, each run in its own line
//! style.
//!
//! The page and the choice of charts are apart:
//! - `findings`: the findings section;
//! - `page`: the document (its skeleton, the run table, the summary, the machine and peak
//!   tables, each subsystem's section with its results table, the warnings) and its CSS;
//! - `choice`: which charts a subsystem's results get (the axes, the quantities, one chart or
//!   one per op) and the special curves (cache latency, loaded latency, time series);
//! - `lines`: the grouping of a chart's results into lines and their names;
//! - `draw`: a chart's lines as SVG, with the standard tool's values, the peak marks and the
//!   efficiency chart beside it.

mod choice;
mod draw;
mod findings;
mod lines;
mod page;

use std::collections::BTreeMap;

use super::Exporter;
use crate::result::{BenchResult, Report};

use page::{render, render_runs};

/// The HTML report: the page of one run (`peakbench run`'s report, `--html`), or of several
/// on the same charts (`peakbench report A B --html`).
#[derive(Debug)]
pub(crate) struct Html {
    /// The id in the history of the run [`Exporter::export`] shows (0 for a run not stored);
    /// several runs each bring their own.
    pub run: i64,
}

impl Exporter for Html {
    fn export(&self, report: &Report) -> Vec<u8> {
        render(self.run, report).into_bytes()
    }

    fn export_runs(&self, runs: &[(i64, &Report)]) -> Option<Vec<u8>> {
        Some(render_runs(runs).into_bytes())
    }
}

/// One quantity a result measured, as a chart plots it: the headline value, an extra metric
/// of the same repetitions, or a latency percentile.
#[derive(Clone)]
pub(super) struct Measure {
    pub(super) metric: String,
    pub(super) unit: String,
    pub(super) value: f64,
    /// The standard tool's value in this unit.
    pub(super) reference: Option<f64>,
    pub(super) peak: Option<f64>,
    /// Which percentile, for latency.
    pub(super) stat: &'static str,
}

/// One result of one run, with its parameters by name (bookkeeping left out): what a section's
/// table shows as a row and its charts as a point.
struct Item<'a> {
    run: usize,
    result: &'a BenchResult,
    flat: BTreeMap<String, serde_json::Value>,
}

impl Item<'_> {
    fn x(&self, key: &str) -> Option<f64> {
        self.flat.get(key).and_then(serde_json::Value::as_f64)
    }
}
