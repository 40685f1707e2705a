//! The HTML report: one self-contained file (inline CSS and SVG, no script, nothing fetched).
//!
//! It works on any report, from the fields every result has. The first screen is a summary per
//! subsystem (the best figure of each op, its efficiency and the tool's ratio, the warnings);
//! then the machine and the peaks as tables; then per subsystem the table users paste and the
//! charts. Charts group results by the axis (threads, block size, message size, streams, queue
//! depth, n, offered rate) and the quantity (the headline metric, each extra metric, latency
//! p50/p99); a line is one combination of the settings that vary within the chart, as
//! [`param_role`] tells settings from bookkeeping, so a new subsystem, parameter or metric gets
//! its charts without changes here. On each chart: the standard tool's values dashed in the
//! line's colour, the theoretical peak as a labelled horizontal line (dotted per line where it
//! changes along the axis), and an efficiency chart beside it. Also the cache-latency curve
//! (working set on a log axis, cache sizes marked) and each sampling run's time series (y axis
//! fitted to the data, median and interquartile range marked). Several runs (`peakbench report A
//! B`) share the charts, each run in its own line style.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use super::charts::{HLine, LineChart, Marker, Scale, Series, Stroke, Ticks, escape, line_chart};
use super::table::{
    ACCESS_TIME_HEADER, PASTE_HEADERS, access_time_cell, all_warnings, any_access_time,
    describe_other, describe_params, paste_row, shared_params, subsystems,
};
use crate::result::{BenchResult, ParamRole, Params, Report, Subsystem, param_role};
use crate::units::format_value;

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}\
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}h3{font-size:1.05em;margin:1.2em 0 .3em}\
table{border-collapse:collapse;margin:.6em 0 1em;font-size:.9em}th,td{border:1px solid #ccc;padding:.25em .6em;vertical-align:top}\
th{background:#f2f2f2;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}\
figure{margin:1.5em 0}svg.chart{max-width:100%;height:auto;font-size:12px}\
svg .title{font-size:15px;font-weight:600}svg .axis{font-size:13px}svg .tick{font-size:11px;fill:#444}\
svg .legend{font-size:12px}svg .note{font-size:11px;fill:#555}svg .marker-label{font-size:11px;fill:#555}.warn li{color:#8a4b00}\
details{margin:.5em 0}.wide{overflow-x:auto}table.results{font-size:.82em}p.shared{font-size:.9em;color:#444}summary{cursor:pointer;font-weight:600}";

/// The report of run `run_id` as one HTML document.
pub fn render(run_id: i64, report: &Report) -> String {
    render_runs(&[(run_id, report)])
}

/// The report of one run or several (two machines, before and after a change) on the same
/// charts, each run in its own line style.
pub fn render_runs(runs: &[(i64, &Report)]) -> String {
    let mut out = String::new();
    let ids: Vec<String> = runs.iter().map(|(id, _)| id.to_string()).collect();
    let hosts: Vec<&str> = runs.iter().map(|(_, r)| r.host.hostname.as_str()).collect();
    let title = format!(
        "peakbench run{} {} on {}",
        if runs.len() > 1 { "s" } else { "" },
        ids.join(", "),
        hosts.join(", ")
    );
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>{t}</title><style>{STYLE}</style></head><body>\n<h1>{t}</h1>\n",
        t = escape(&title)
    );
    header(&mut out, runs);
    summary(&mut out, runs);
    for (_, report) in runs {
        super::cluster::section(&mut out, report);
    }
    for (index, (id, report)) in runs.iter().enumerate() {
        let whose = if runs.len() > 1 {
            format!(" of run {id} ({})", report.host.hostname)
        } else {
            String::new()
        };
        let _ = writeln!(out, "<h2>Machine{}</h2>", escape(&whose));
        text_tables(&mut out, &crate::sysinfo::render(&report.host));
        let _ = writeln!(out, "<h2>Theoretical peaks{}</h2>", escape(&whose));
        text_tables(&mut out, &crate::peak::render(&report.peaks));
        let _ = index;
    }
    let mut order: Vec<Subsystem> = Vec::new();
    for (_, report) in runs {
        for s in subsystems(report) {
            if !order.contains(&s) {
                order.push(s);
            }
        }
    }
    for subsystem in order {
        let items: Vec<Item> = runs
            .iter()
            .enumerate()
            .flat_map(|(run, (_, report))| {
                report
                    .results
                    .iter()
                    .filter(move |r| r.subsystem == subsystem)
                    .map(move |result| Item {
                        run,
                        result,
                        flat: result.params.without_bookkeeping().flat(),
                    })
            })
            .collect();
        section(&mut out, subsystem, &items, runs);
    }
    if runs.iter().all(|(_, r)| r.results.is_empty()) {
        out.push_str("<p>This run has no results.</p>\n");
    }
    for (id, report) in runs {
        let whose = if runs.len() > 1 {
            format!(" of run {id}")
        } else {
            String::new()
        };
        warnings(&mut out, report, &whose);
    }
    out.push_str("</body></html>\n");
    out
}

fn status_name(report: &Report) -> String {
    serde_json::to_value(report.status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// A cell of the run table, from the run's id and document.
type Cell = fn(i64, &Report) -> String;

fn header(out: &mut String, runs: &[(i64, &Report)]) {
    let rows: [(&str, Cell); 8] = [
        ("run", |id, _| id.to_string()),
        ("host", |_, r| r.host.hostname.clone()),
        ("CPU", |_, r| r.host.cpu.model_name.clone()),
        ("started", |_, r| r.started_at.clone()),
        ("finished", |_, r| {
            r.finished_at.clone().unwrap_or_else(|| "-".into())
        }),
        ("status", |_, r| status_name(r)),
        ("command", |_, r| r.command.join(" ")),
        ("tool", |_, r| format!("{} {}", r.tool.name, r.tool.version)),
    ];
    out.push_str("<table class=\"run\">\n");
    for (key, value) in rows {
        let _ = write!(out, "<tr><th>{}</th>", escape(key));
        for (id, report) in runs {
            let _ = write!(out, "<td>{}</td>", escape(&value(*id, report)));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

/// Whether lower is better for a result's headline (a latency or a time).
fn lower_is_better(r: &BenchResult) -> bool {
    matches!(r.unit.as_str(), "ns" | "µs" | "us" | "ms" | "s")
}

/// The first screen: per subsystem and op, the best figure, its case, its efficiency and the
/// tool's ratio, and how many warnings the subsystem's results carry.
fn summary(out: &mut String, runs: &[(i64, &Report)]) {
    out.push_str("<h2 id=\"summary\">Summary</h2>\n<table class=\"summary\"><tr>");
    let multi = runs.len() > 1;
    if multi {
        out.push_str("<th>run</th>");
    }
    for h in [
        "subsystem",
        "op",
        "best",
        "unit",
        "case",
        "efficiency",
        "tool",
        "ours / tool",
        "warnings",
    ] {
        let _ = write!(out, "<th>{h}</th>");
    }
    out.push_str("</tr>\n");
    for (id, report) in runs {
        for subsystem in subsystems(report) {
            let results: Vec<&BenchResult> = report
                .results
                .iter()
                .filter(|r| r.subsystem == subsystem)
                .collect();
            let warned = results.iter().filter(|r| !r.warnings.is_empty()).count();
            let mut keys: Vec<(&str, &str)> = Vec::new();
            for r in &results {
                if !keys.contains(&(r.op.as_str(), r.unit.as_str())) {
                    keys.push((&r.op, &r.unit));
                }
            }
            for (i, (op, unit)) in keys.iter().enumerate() {
                let best = results
                    .iter()
                    .filter(|r| r.op == *op && r.unit == *unit)
                    .max_by(|a, b| {
                        let order = a.value.total_cmp(&b.value);
                        if lower_is_better(a) {
                            order.reverse()
                        } else {
                            order
                        }
                    })
                    .expect("a key comes from a result");
                let percent = |v: f64| format!("{:.1}%", v * 100.0);
                let reference = best.reference.as_ref();
                let mut cells = Vec::new();
                if multi {
                    cells.push(id.to_string());
                }
                cells.extend([
                    if i == 0 {
                        subsystem.name().to_string()
                    } else {
                        String::new()
                    },
                    op.to_string(),
                    format_value(best.value),
                    unit.to_string(),
                    describe_params(&best.params.without_bookkeeping()),
                    best.efficiency.map(percent).unwrap_or_else(|| "-".into()),
                    reference
                        .map(|r| match r.value {
                            Some(v) => format!("{} {}", r.tool, format_value(v)),
                            None => format!("{} n/a", r.tool),
                        })
                        .unwrap_or_else(|| "-".into()),
                    reference
                        .and_then(|r| r.ratio)
                        .map(|r| format!("{r:.2}"))
                        .unwrap_or_else(|| "-".into()),
                    if i == 0 {
                        format!("{warned} of {} results", results.len())
                    } else {
                        String::new()
                    },
                ]);
                out.push_str("<tr>");
                for (c, cell) in cells.iter().enumerate() {
                    let class = if matches!(c + usize::from(!multi), 3 | 6 | 8) {
                        " class=\"n\""
                    } else {
                        ""
                    };
                    let _ = write!(out, "<td{class}>{}</td>", escape(cell));
                }
                out.push_str("</tr>\n");
            }
        }
    }
    out.push_str("</table>\n");
    for (id, report) in runs {
        if !report.warnings.is_empty() {
            let _ = write!(
                out,
                "<p>Warnings about run {id} as a whole:</p><ul class=\"warn\">"
            );
            for w in &report.warnings {
                let _ = write!(out, "<li>{}</li>", escape(w));
            }
            out.push_str("</ul>\n");
        }
    }
}

/// A text block of `peakbench sysinfo` or the peaks as tables: a line at the margin starts a
/// table under its heading; an indented `key: value` line is a row of two cells; any other
/// indented line is split into cells at runs of two or more spaces.
fn text_tables(out: &mut String, text: &str) {
    let mut open = false;
    let mut width: Option<usize> = None;
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        if !line.starts_with(' ') {
            if open {
                out.push_str("</table>\n");
            }
            let _ = write!(
                out,
                "<h3>{}</h3>\n<table class=\"inventory\">",
                escape(line.trim())
            );
            open = true;
            width = None;
            continue;
        }
        if !open {
            out.push_str("<table class=\"inventory\">");
            open = true;
        }
        let line = line.trim();
        // A peak factor reads `name value (source: detail)`: the colon inside the parentheses
        // is the source's, so such a line is split before its source instead.
        let cells: Vec<String> = match (line.split_once(": "), line.split_once(" (")) {
            (Some((key, value)), _) if !key.contains("  ") && !key.contains('(') => {
                vec![key.trim().to_string(), value.trim().to_string()]
            }
            (_, Some((key, source))) if !line.contains("  ") => {
                vec![key.trim().to_string(), format!("({source}")]
            }
            _ => line
                .split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect(),
        };
        // Rows of another width (the peak matrix below the peak factors) get a table of their
        // own, so the narrow rows do not stretch the wide table's columns.
        if width.is_some_and(|w| w != cells.len()) {
            out.push_str("</table>\n<table class=\"inventory\">");
        }
        width = Some(cells.len());
        out.push_str("<tr>");
        for (i, cell) in cells.iter().enumerate() {
            let tag = if i == 0 { "th" } else { "td" };
            let _ = write!(out, "<{tag}>{}</{tag}>", escape(cell));
        }
        out.push_str("</tr>\n");
    }
    if open {
        out.push_str("</table>\n");
    }
}

fn section(out: &mut String, subsystem: Subsystem, items: &[Item], runs: &[(i64, &Report)]) {
    let _ = writeln!(out, "<h2 id=\"{s}\">{s}</h2>", s = subsystem.name());
    // What every row shares is said once, above the table.
    let results: Vec<&BenchResult> = items.iter().map(|i| i.result).collect();
    let (shared, described) = shared_params(&results);
    if !described.is_empty() {
        let _ = write!(
            out,
            "<p class=\"shared\">Every row: {}</p>",
            escape(&described)
        );
    }
    out.push_str("<div class=\"wide\"><table class=\"results\"><tr>");
    let multi = runs.len() > 1;
    if multi {
        out.push_str("<th>run</th>");
    }
    // A cluster run's results come from several hosts: a column says whose each row is.
    let hosts = items.iter().any(|i| i.result.host != items[0].result.host);
    if hosts {
        out.push_str("<th>host</th>");
    }
    for h in PASTE_HEADERS {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    let access = any_access_time(results.iter().copied());
    if access {
        let _ = write!(out, "<th>{}</th>", escape(ACCESS_TIME_HEADER));
    }
    if multi {
        out.push_str("<th>against the first run</th>");
    }
    out.push_str("</tr>\n");
    for item in items {
        out.push_str("<tr>");
        if multi {
            let _ = write!(out, "<td>{}</td>", runs[item.run].0);
        }
        if hosts {
            let _ = write!(out, "<td>{}</td>", escape(&item.result.host));
        }
        for (i, cell) in paste_row(item.result, &shared).iter().enumerate() {
            let class = if (3..PASTE_HEADERS.len()).contains(&i) && i != 4 && i != 6 {
                " class=\"n\""
            } else {
                ""
            };
            let _ = write!(out, "<td{class}>{}</td>", escape(cell));
        }
        if access {
            let _ = write!(
                out,
                "<td class=\"n\">{}</td>",
                escape(&access_time_cell(item.result))
            );
        }
        if multi {
            let verdict = if item.run == 0 {
                String::new()
            } else {
                runs[0]
                    .1
                    .results
                    .iter()
                    .find(|r| r.id == item.result.id)
                    .map(|a| super::change_cell(a, item.result))
                    .unwrap_or_else(|| "not in the first run".into())
            };
            let _ = write!(out, "<td>{}</td>", escape(&verdict));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table></div>\n");
    let mut counting: Vec<String> = Vec::new();
    for item in items {
        let note = format!("{}: {}", item.result.op, item.result.counting);
        if !counting.contains(&note) {
            counting.push(note);
        }
    }
    out.push_str("<details><summary>How work is counted</summary><ul>");
    for note in counting {
        let _ = write!(out, "<li>{}</li>", escape(&note));
    }
    out.push_str("</ul></details>\n");
    let others: Vec<String> = items
        .iter()
        .flat_map(|item| {
            item.result
                .other_references
                .iter()
                .map(|o| super::table::other_reference_line(item.result, o))
        })
        .collect();
    if !others.is_empty() {
        out.push_str("<details open><summary>Other references (ours / theirs)</summary><ul>");
        for line in others {
            let _ = write!(out, "<li>{}</li>", escape(&line));
        }
        out.push_str("</ul></details>\n");
    }
    for chart in charts(items, runs[0].1, runs.len()) {
        let _ = writeln!(out, "<figure>{chart}</figure>");
    }
}

fn warnings(out: &mut String, report: &Report, whose: &str) {
    let list = all_warnings(report);
    let _ = writeln!(out, "<h2>Warnings{}</h2>", escape(whose));
    if list.is_empty() {
        out.push_str("<p>None.</p>\n");
        return;
    }
    out.push_str("<ul class=\"warn\">");
    for w in list {
        let _ = write!(out, "<li>{}</li>", escape(&w));
    }
    out.push_str("</ul>\n");
}

/// A parameter a chart can put on its x axis, by its name in [`Params::flat`].
#[derive(Clone, Copy)]
struct XParam {
    key: &'static str,
    name: &'static str,
    label: &'static str,
    ticks: Ticks,
}

const X_PARAMS: [XParam; 7] = [
    XParam {
        key: "threads",
        name: "threads",
        label: "threads (count)",
        ticks: Ticks::Count,
    },
    XParam {
        key: "block_bytes",
        name: "block size",
        label: "block size (bytes)",
        ticks: Ticks::Bytes,
    },
    XParam {
        key: "message_bytes",
        name: "message size",
        label: "message size (bytes)",
        ticks: Ticks::Bytes,
    },
    XParam {
        key: "streams",
        name: "streams",
        label: "parallel streams (count)",
        ticks: Ticks::Count,
    },
    XParam {
        key: "queue_depth",
        name: "queue depth",
        label: "queue depth (I/Os in flight per thread)",
        ticks: Ticks::Count,
    },
    XParam {
        key: "n",
        name: "n",
        label: "problem size n (order of the matrix)",
        ticks: Ticks::Count,
    },
    XParam {
        key: "rate_bps",
        name: "offered rate",
        label: "offered rate per stream (bit/s)",
        ticks: Ticks::BitRate,
    },
];

fn is_cache_curve(r: &BenchResult) -> bool {
    r.op == "latency" && r.params.working_set_bytes.is_some() && !is_loaded_latency(r)
}

/// A point of `mem latency --load-threads`: latency at one load level.
fn is_loaded_latency(r: &BenchResult) -> bool {
    r.op == "latency" && r.params.other.contains_key("load_threads")
}

/// One result of one run, with its parameters by name (bookkeeping left out).
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

/// One quantity a result measured, as a chart plots it: the headline value, an extra metric
/// of the same repetitions, or a latency percentile.
#[derive(Clone)]
struct Measure {
    metric: String,
    unit: String,
    value: f64,
    /// The standard tool's value in this unit.
    reference: Option<f64>,
    peak: Option<f64>,
    /// Which percentile, for latency.
    stat: &'static str,
}

/// Units of counts that are not worth a chart of their own (the loss has its percentage).
const UNCHARTED_UNITS: [&str; 1] = ["packets"];

/// Whether an extra metric is one stream's share of a result ("stream 3 throughput"): it is in
/// the JSON, but a chart per stream number would bury the charts users draw.
fn is_per_stream(metric: &str) -> bool {
    metric
        .strip_prefix("stream ")
        .and_then(|rest| rest.split_once(' '))
        .is_some_and(|(n, _)| n.parse::<u32>().is_ok())
}

/// Metrics that are the same work counted two ways, so that the tool's value in one converts to
/// the other in the proportion of ours (IOPS × block size = bytes per second).
const PROPORTIONAL: [&str; 2] = ["throughput", "iops"];

fn measures(r: &BenchResult) -> Vec<Measure> {
    let reference = r.reference.as_ref().and_then(|t| t.value);
    let mut list = vec![Measure {
        metric: r.metric.clone(),
        unit: r.unit.clone(),
        value: r.value,
        reference,
        peak: r.peak.as_ref().map(|p| p.value),
        stat: "",
    }];
    for extra in &r.extra {
        if extra.metric == r.metric
            || UNCHARTED_UNITS.contains(&extra.unit.as_str())
            || is_per_stream(&extra.metric)
        {
            continue;
        }
        let proportional = PROPORTIONAL.contains(&extra.metric.as_str())
            && PROPORTIONAL.contains(&r.metric.as_str());
        list.push(Measure {
            metric: extra.metric.clone(),
            unit: extra.unit.clone(),
            value: extra.value,
            reference: reference
                .filter(|_| proportional && r.value > 0.0)
                .map(|v| v * extra.value / r.value),
            peak: None,
            stat: "",
        });
    }
    if let Some(latency) = &r.latency_ns {
        for (stat, value) in [("p50", latency.p50), ("p99", latency.p99)] {
            list.push(Measure {
                metric: "latency".into(),
                unit: "ns".into(),
                value,
                reference: None,
                peak: None,
                stat,
            });
        }
    }
    list
}

/// Units that are the same kind of rate and share a chart (QP/HP integer operations beside
/// SP/DP floating-point ones).
fn unit_class(unit: &str) -> &str {
    match unit {
        "GFLOP/s" | "GIOP/s" => "GOP/s",
        other => other,
    }
}

/// One point of a line: x, our value, the tool's, the peak.
#[derive(Clone, Copy)]
struct Point {
    x: f64,
    y: f64,
    reference: Option<f64>,
    peak: Option<f64>,
}

#[derive(Clone)]
struct Line {
    name: String,
    run: usize,
    op: String,
    points: Vec<Point>,
    /// Indices in the group of the results drawn as this line's points.
    members: Vec<usize>,
}

impl Line {
    /// Whether the line spans the axis: two points at different x (its points are sorted by x).
    /// Points at one x only say nothing against that axis.
    fn spans(&self) -> bool {
        match (self.points.first(), self.points.last()) {
            (Some(a), Some(b)) => a.x != b.x,
            _ => false,
        }
    }
}

/// Splits `group` into lines: one per combination of the settings that vary in it (the op
/// and the run when they vary too), the axis left out. A derived parameter joins the key only
/// where the settings alone would put two points of a line at the same x; bookkeeping never does.
fn lines(group: &[(&Item, Measure, f64)], axis: &str) -> Vec<Line> {
    // A parameter varies when it takes two values among the results of the ops that have it:
    // a result of another op without it does not make it vary, but a case of the same op
    // without it does (UDP unlimited beside UDP at one offered rate are two lines).
    let varies = |key: &str| {
        let ops: BTreeSet<&str> = group
            .iter()
            .filter(|(i, _, _)| i.flat.contains_key(key))
            .map(|(i, _, _)| i.result.op.as_str())
            .collect();
        let mut values = group
            .iter()
            .filter(|(i, _, _)| ops.contains(i.result.op.as_str()))
            .map(|(i, _, _)| i.flat.get(key));
        let first = values.next();
        values.any(|v| Some(v) != first)
    };
    let keys: BTreeSet<&String> = group.iter().flat_map(|(i, _, _)| i.flat.keys()).collect();
    let by_role = |role: ParamRole| -> Vec<String> {
        keys.iter()
            .filter(|k| k.as_str() != axis && param_role(k) == role && varies(k))
            .map(|k| k.to_string())
            .collect()
    };
    let op_varies = group
        .iter()
        .any(|(i, _, _)| i.result.op != group[0].0.result.op);
    let run_varies = group.iter().any(|(i, _, _)| i.run != group[0].0.run);
    // A cluster run's node-local case measured on several hosts: a line per host.
    let host_varies = group
        .iter()
        .any(|(i, _, _)| i.result.host != group[0].0.result.host);
    let settings = by_role(ParamRole::Setting);
    let split = |keys: &[String]| -> Vec<Line> {
        let mut lines: Vec<(Vec<String>, Line)> = Vec::new();
        for (index, (item, measure, x)) in group.iter().enumerate() {
            let mut key: Vec<String> = keys
                .iter()
                .map(|k| item.flat.get(k).map(|v| v.to_string()).unwrap_or_default())
                .collect();
            key.extend([
                item.result.op.clone(),
                item.run.to_string(),
                measure.stat.to_string(),
            ]);
            if host_varies {
                key.push(item.result.host.clone());
            }
            let point = Point {
                x: *x,
                y: measure.value,
                reference: measure.reference,
                peak: measure.peak,
            };
            match lines.iter_mut().find(|l| l.0 == key) {
                Some(line) => {
                    line.1.points.push(point);
                    line.1.members.push(index);
                }
                None => {
                    let shown: BTreeMap<String, serde_json::Value> = keys
                        .iter()
                        .filter_map(|k| item.flat.get(k).map(|v| (k.clone(), v.clone())))
                        .collect();
                    let mut name = Vec::new();
                    if run_varies {
                        name.push(format!("run {}", item.run + 1));
                    }
                    if host_varies {
                        name.push(item.result.host.clone());
                    }
                    if op_varies {
                        name.push(item.result.op.clone());
                    }
                    name.push(describe_swept(&shown));
                    name.push(measure.stat.to_string());
                    name.retain(|n| !n.is_empty());
                    let name = if name.is_empty() {
                        item.result.op.clone()
                    } else {
                        name.join(" ")
                    };
                    lines.push((
                        key,
                        Line {
                            name,
                            run: item.run,
                            op: item.result.op.clone(),
                            points: vec![point],
                            members: vec![index],
                        },
                    ));
                }
            }
        }
        let mut lines: Vec<Line> = lines.into_iter().map(|l| l.1).collect();
        for line in &mut lines {
            line.points.sort_by(|a, b| a.x.total_cmp(&b.x));
        }
        lines
    };
    let first = split(&settings);
    let crowded = first
        .iter()
        .any(|l| l.points.windows(2).any(|w| w[0].x == w[1].x));
    if !crowded {
        return first;
    }
    let mut keys = settings;
    keys.extend(by_role(ParamRole::Derived));
    split(&keys)
}

/// The name of a line from the parameters that tell it apart, e.g. "f64 avx512 fma" or "2T".
fn describe_swept(shown: &BTreeMap<String, serde_json::Value>) -> String {
    let params = Params::from_flat(shown);
    let mut parts = vec![describe_params(&params)];
    parts.extend(describe_other(&params));
    parts.retain(|p| !p.is_empty());
    parts.join(" ")
}

/// Times in nanoseconds in the unit that keeps the axis readable: µs from 10 µs, ms from 10 ms
/// (a disk latency of 100 ms read as 100000000 ns). Other units are left as they are.
fn readable_time(mut lines: Vec<Line>, unit: String) -> (Vec<Line>, String) {
    if unit != "ns" {
        return (lines, unit);
    }
    let most = lines
        .iter()
        .flat_map(|l| l.points.iter().flat_map(|p| [Some(p.y), p.reference]))
        .flatten()
        .fold(0f64, f64::max);
    let (factor, unit) = if most >= 1e7 {
        (1e-6, "ms")
    } else if most >= 1e4 {
        (1e-3, "µs")
    } else {
        return (lines, unit);
    };
    for point in lines.iter_mut().flat_map(|l| l.points.iter_mut()) {
        point.y *= factor;
        point.reference = point.reference.map(|v| v * factor);
        point.peak = point.peak.map(|v| v * factor);
    }
    (lines, unit.to_string())
}

/// The scale of an axis of counts or sizes: logarithmic when they span a factor of 8 or more.
fn x_scale_for(ticks: Ticks, lines: &[Line]) -> Scale {
    let xs = lines.iter().flat_map(|l| l.points.iter().map(|p| p.x));
    let (lo, hi) = xs.fold((f64::INFINITY, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    match ticks {
        Ticks::Bytes => Scale::Log2,
        Ticks::Count if lo > 0.0 && hi / lo >= 8.0 => Scale::Log2,
        Ticks::Number | Ticks::BitRate if lo > 0.0 && hi / lo >= 100.0 => Scale::Log10,
        _ => Scale::Linear,
    }
}

/// Log scale when positive values span more than a factor of 20.
fn y_scale_for(series: &[Series]) -> Scale {
    let values = series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let (lo, hi) = values.fold((f64::INFINITY, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > 0.0 && hi / lo > 20.0 {
        Scale::Log10
    } else {
        Scale::Linear
    }
}

/// The names of the standard tools in `lines`' results, for the legend's note.
fn tools_of(items: &[&Item]) -> String {
    let mut tools: Vec<&str> = Vec::new();
    for item in items {
        if let Some(reference) = &item.result.reference
            && reference.value.is_some()
            && !tools.contains(&reference.tool.as_str())
        {
            tools.push(&reference.tool);
        }
    }
    tools.join(", ")
}

/// The value chart of `lines` and, where they have peaks, the efficiency chart beside it.
fn draw(
    title: &str,
    x: &XParam,
    y_label: &str,
    unit: &str,
    lines: &[Line],
    tools: &str,
    runs: usize,
) -> Vec<String> {
    let x_scale = x_scale_for(x.ticks, lines);
    let stroke = |line: &Line| {
        if runs > 1 {
            Stroke::Run(line.run)
        } else {
            Stroke::Solid
        }
    };
    let mut series = Vec::new();
    let peaks: BTreeSet<u64> = lines
        .iter()
        .flat_map(|l| l.points.iter().filter_map(|p| p.peak.map(f64::to_bits)))
        .collect();
    let one_peak = (peaks.len() == 1).then(|| f64::from_bits(*peaks.first().unwrap()));
    let mut notes = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        series.push(Series {
            stroke: stroke(line),
            ..Series::line(
                line.name.clone(),
                line.points.iter().map(|p| (p.x, p.y)).collect(),
                i,
            )
        });
        let reference: Vec<(f64, f64)> = line
            .points
            .iter()
            .filter_map(|p| p.reference.map(|r| (p.x, r)))
            .collect();
        if !reference.is_empty() {
            series.push(Series {
                name: format!("{} ({})", line.name, tools),
                points: reference,
                style: i,
                stroke: Stroke::Dashed,
                legend: false,
            });
        }
        if one_peak.is_none() {
            let peak: Vec<(f64, f64)> = line
                .points
                .iter()
                .filter_map(|p| p.peak.map(|v| (p.x, v)))
                .collect();
            if !peak.is_empty() {
                series.push(Series {
                    name: format!("{} theoretical peak", line.name),
                    points: peak,
                    style: i,
                    stroke: Stroke::Dotted,
                    legend: false,
                });
            }
        }
    }
    if series.iter().any(|s| s.stroke == Stroke::Dashed) {
        notes.push(format!(
            "dashed, same colour: {tools}, the standard tool, on the same cases"
        ));
    }
    if series.iter().any(|s| s.stroke == Stroke::Dotted) {
        notes.push("dotted, same colour: the theoretical peak of the line's cases".into());
    }
    let hlines = one_peak
        .map(|v| {
            vec![HLine {
                y: v,
                label: format!("theoretical peak {} {unit}", format_value(v)),
            }]
        })
        .unwrap_or_default();
    let y_scale = y_scale_for(&series);
    let mut svgs = vec![line_chart(&LineChart {
        x_scale,
        y_scale,
        x_ticks: x.ticks,
        hlines,
        notes: notes.clone(),
        ..LineChart::new(title.into(), x.label.into(), y_label.into(), series)
    })];
    if peaks.is_empty() {
        return svgs;
    }
    let mut series = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let of = |v: Option<f64>, p: &Point| Some((p.x, 100.0 * v? / p.peak.filter(|p| *p > 0.0)?));
        let ours: Vec<(f64, f64)> = line
            .points
            .iter()
            .filter_map(|p| of(Some(p.y), p))
            .collect();
        if ours.is_empty() {
            continue;
        }
        series.push(Series {
            stroke: stroke(line),
            ..Series::line(line.name.clone(), ours, i)
        });
        let theirs: Vec<(f64, f64)> = line
            .points
            .iter()
            .filter_map(|p| of(p.reference, p))
            .collect();
        if !theirs.is_empty() {
            series.push(Series {
                name: format!("{} ({})", line.name, tools),
                points: theirs,
                style: i,
                stroke: Stroke::Dashed,
                legend: false,
            });
        }
    }
    let mut notes = Vec::new();
    if series.iter().any(|s| s.stroke == Stroke::Dashed) {
        notes.push(format!(
            "dashed, same colour: the efficiency of {tools} on the same cases"
        ));
    }
    svgs.push(line_chart(&LineChart {
        x_scale,
        x_ticks: x.ticks,
        hlines: vec![HLine {
            y: 100.0,
            label: "theoretical peak".into(),
        }],
        notes,
        ..LineChart::new(
            format!("{title}: efficiency against the theoretical peak"),
            x.label.into(),
            "efficiency (% of the theoretical peak)".into(),
            series,
        )
    }));
    svgs
}

/// Results with the quantity a chart plots and their x.
type Group<'a> = Vec<(&'a Item<'a>, Measure, f64)>;

/// Every chart of one subsystem's results (of one run or several).
fn charts(items: &[Item], report: &Report, runs: usize) -> Vec<String> {
    let mut svgs = Vec::new();
    let subsystem = items
        .first()
        .map(|i| i.result.subsystem.name())
        .unwrap_or("");
    for axis in X_PARAMS {
        let mut groups: Vec<((String, String), Group)> = Vec::new();
        for item in items
            .iter()
            .filter(|i| !is_cache_curve(i.result) && i.result.series.is_empty())
        {
            let Some(x) = item.x(axis.key) else { continue };
            for measure in measures(item.result) {
                let key = (
                    measure.metric.clone(),
                    unit_class(&measure.unit).to_string(),
                );
                match groups.iter_mut().find(|g| g.0 == key) {
                    Some(group) => group.1.push((item, measure, x)),
                    None => groups.push((key, vec![(item, measure, x)])),
                }
            }
        }
        for ((metric, _), mut group) in groups {
            let mut all = lines(&group, axis.key);
            // A case whose table did not sweep this axis (a single Linpack size among the
            // thread sweeps, the 1 KiB latency-against-threads table on the block-size chart) is
            // a line of one point here beside swept lines: it is in the table and on the charts
            // of the axes its table swept, not on this one.
            if all.iter().any(Line::spans) && !all.iter().all(Line::spans) {
                let kept: BTreeSet<usize> = all
                    .iter()
                    .filter(|l| l.spans())
                    .flat_map(|l| l.members.iter().copied())
                    .collect();
                group = group
                    .into_iter()
                    .enumerate()
                    .filter(|(index, _)| kept.contains(index))
                    .map(|(_, g)| g)
                    .collect();
                all = lines(&group, axis.key);
            }
            if !all.iter().any(Line::spans) {
                continue;
            }
            // More lines than colours: one chart per op.
            let mut ops: Vec<String> = Vec::new();
            for line in &all {
                if !ops.contains(&line.op) {
                    ops.push(line.op.clone());
                }
            }
            let split = all.len() > 16 && ops.len() > 1;
            let mut parts: Vec<(String, Group)> = if split {
                ops.iter()
                    .map(|op| {
                        let part = group.iter().filter(|g| &g.0.result.op == op).cloned();
                        (String::new(), part.collect())
                    })
                    .collect()
            } else {
                vec![(String::new(), group.clone())]
            };
            // And the ops side by side (read against write, RWS against RWR) at the highest
            // concurrency, where that leaves few enough lines.
            if split {
                for key in ["threads", "streams"]
                    .into_iter()
                    .filter(|k| *k != axis.key)
                {
                    let Some(most) = group.iter().filter_map(|g| g.0.x(key)).reduce(f64::max)
                    else {
                        continue;
                    };
                    let part: Vec<(&Item, Measure, f64)> = group
                        .iter()
                        .filter(|g| g.0.x(key) == Some(most))
                        .cloned()
                        .collect();
                    if lines(&part, axis.key).len() <= 16 {
                        parts.push((format!(", every op at {most} {key}"), part));
                    }
                    break;
                }
            }
            for (suffix, part) in parts {
                let lines = if split {
                    self::lines(&part, axis.key)
                } else {
                    all.clone()
                };
                if !lines.iter().any(Line::spans) {
                    continue;
                }
                let mut units: Vec<&str> = Vec::new();
                for (_, m, _) in &part {
                    if !units.contains(&m.unit.as_str()) {
                        units.push(&m.unit);
                    }
                }
                let (lines, unit) = readable_time(lines, units.join(" or "));
                let part_ops: BTreeSet<&str> =
                    part.iter().map(|g| g.0.result.op.as_str()).collect();
                let title = if part_ops.len() == 1 {
                    format!(
                        "{subsystem} {}: {metric} against {}",
                        part[0].0.result.op, axis.name
                    )
                } else {
                    format!("{subsystem}: {metric} against {}{suffix}", axis.name)
                };
                let items: Vec<&Item> = part.iter().map(|g| g.0).collect();
                svgs.extend(draw(
                    &title,
                    &axis,
                    &format!("{metric} ({unit})"),
                    &unit,
                    &lines,
                    &tools_of(&items),
                    runs,
                ));
            }
        }
    }
    svgs.extend(cache_curves(items, report));
    svgs.extend(loaded_latency_curves(items));
    for item in items.iter().filter(|i| !i.result.series.is_empty()) {
        svgs.push(time_series(item.result));
    }
    svgs
}

/// The cache-latency curve: one connected line per combination of settings, ns against the
/// working set, both axes logarithmic, the machine's cache sizes marked.
fn cache_curves(items: &[Item], report: &Report) -> Vec<String> {
    let group: Vec<(&Item, Measure, f64)> = items
        .iter()
        .filter(|i| is_cache_curve(i.result))
        .filter_map(|i| {
            let m = measures(i.result).into_iter().next()?;
            Some((i, m, i.x("working_set_bytes")?))
        })
        .collect();
    if group.is_empty() {
        return Vec::new();
    }
    let r = group[0].0.result;
    let series: Vec<Series> = lines(&group, "working_set_bytes")
        .into_iter()
        .enumerate()
        .map(|(i, l)| Series::line(l.name, l.points.iter().map(|p| (p.x, p.y)).collect(), i))
        .collect();
    vec![line_chart(&LineChart {
        x_scale: Scale::Log2,
        y_scale: Scale::Log10,
        x_ticks: Ticks::Bytes,
        markers: cache_markers(report),
        ..LineChart::new(
            format!(
                "{} {}: {} against working set (cache-latency curve)",
                r.subsystem.name(),
                r.op,
                r.metric
            ),
            "working set (bytes)".into(),
            format!("{} ({})", r.metric, r.unit),
            series,
        )
    })]
}

/// Loaded latency: the chase's latency against the bandwidth the load threads achieved, one
/// line per run, working set and load (threads × op), its points the load levels.
fn loaded_latency_curves(items: &[Item]) -> Vec<String> {
    let mut lines: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for item in items.iter().filter(|i| is_loaded_latency(i.result)) {
        let r = item.result;
        let Some(bandwidth) = r.extra.iter().find(|e| e.metric == "load_bandwidth") else {
            continue;
        };
        let op = r.params.other.get("load_op").and_then(|v| v.as_str());
        let threads = r.params.other.get("load_threads").and_then(|v| v.as_u64());
        // The no-load level (pace_ns null) is the first point of its sweep's line.
        let name = format!(
            "{}{} chase, {} × {} load",
            if item.run > 0 {
                format!("run {}: ", item.run + 1)
            } else {
                String::new()
            },
            crate::units::format_size(r.params.working_set_bytes.unwrap_or(0)),
            threads.unwrap_or(0),
            op.unwrap_or("-")
        );
        match lines.iter_mut().find(|l| l.0 == name) {
            Some(line) => line.1.push((bandwidth.value, r.value)),
            None => lines.push((name, vec![(bandwidth.value, r.value)])),
        }
    }
    if lines.is_empty() {
        return Vec::new();
    }
    let series: Vec<Series> = lines
        .into_iter()
        .enumerate()
        .map(|(i, (name, mut points))| {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series::line(name, points, i)
        })
        .collect();
    vec![line_chart(&LineChart::new(
        "memory latency against the load threads' bandwidth (loaded latency)".into(),
        "load bandwidth (GB/s)".into(),
        "latency (ns)".into(),
        series,
    ))]
}

/// A sampling run's value against time, the y axis fitted to the data, with the median and the
/// interquartile range marked.
fn time_series(r: &BenchResult) -> String {
    let mut values: Vec<f64> = r.series.iter().map(|p| p.value).collect();
    values.sort_by(f64::total_cmp);
    let quantile = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
    let (q1, median, q3) = (quantile(0.25), quantile(0.5), quantile(0.75));
    line_chart(&LineChart {
        y_from_zero: false,
        hlines: vec![HLine {
            y: median,
            label: format!("median {} {}", format_value(median), r.unit),
        }],
        band: Some((
            q1,
            q3,
            format!(
                "middle half of the samples: {} … {} {}",
                format_value(q1),
                format_value(q3),
                r.unit
            ),
        )),
        ..LineChart::new(
            format!(
                "{} {} {}: time series",
                r.subsystem.name(),
                r.op,
                describe_params(&r.params.without_bookkeeping())
            ),
            "time (s)".into(),
            format!("{} ({})", r.metric, r.unit),
            vec![Series::line(
                format!("{} per sample", r.metric),
                r.series.iter().map(|p| (p.t_s, p.value)).collect(),
                0,
            )],
        )
    })
}

/// The data and unified caches of the machine, one marker per level.
fn cache_markers(report: &Report) -> Vec<Marker> {
    let mut markers: Vec<Marker> = Vec::new();
    for cache in &report.host.cpu.caches {
        if cache.kind == "Instruction" || cache.size_bytes == 0 {
            continue;
        }
        let label = format!(
            "L{} {}",
            cache.level,
            crate::units::format_size_approx(cache.size_bytes)
        );
        if !markers.iter().any(|m| m.label == label) {
            markers.push(Marker {
                x: cache.size_bytes as f64,
                label,
            });
        }
    }
    markers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peak_factor_is_split_before_its_source_not_at_the_sources_colon() {
        let mut out = String::new();
        text_tables(
            &mut out,
            "Peaks\n  cores 2 (cpuinfo: physical cores)\n  model: AMD EPYC\n  f64  avx2  yes\n",
        );
        assert!(
            out.contains("<th>cores 2</th><td>(cpuinfo: physical cores)</td>"),
            "{out}"
        );
        assert!(out.contains("<th>model</th><td>AMD EPYC</td>"), "{out}");
        assert!(
            out.contains("<th>f64</th><td>avx2</td><td>yes</td>"),
            "{out}"
        );
    }

    fn fixture() -> Report {
        serde_json::from_str(include_str!("../../tests/fixtures/report.json")).unwrap()
    }

    /// The `data-name` and `data-points` of every line of the chart whose title contains
    /// `title`.
    fn lines_of(html: &str, title: &str) -> Vec<(String, usize)> {
        let chart = html
            .split("<svg class=\"chart\"")
            .find(|c| c.contains(&format!("{title}</title>")))
            .unwrap_or_else(|| panic!("no chart '{title}'"));
        let chart = &chart[..chart.find("</svg>").unwrap()];
        chart
            .split("<g class=\"series\" data-name=\"")
            .skip(1)
            .map(|rest| {
                let name = rest[..rest.find('"').unwrap()].to_string();
                let at = rest.find("data-points=\"").unwrap() + 13;
                let count = rest[at..at + rest[at..].find('"').unwrap()]
                    .parse()
                    .unwrap();
                (name, count)
            })
            .collect()
    }

    #[test]
    fn a_cluster_runs_node_local_sweep_draws_one_line_per_host() {
        let mut report = fixture();
        report
            .results
            .retain(|r| r.subsystem == Subsystem::Cpu && r.op == "flops");
        report
            .results
            .retain(|r| r.params.precision.as_deref() == Some("f64"));
        let mut other = report.results.clone();
        for r in &mut other {
            r.host = "node-b".into();
            r.value *= 0.5;
        }
        let first = report.results[0].host.clone();
        report.results.extend(other);
        let html = render(1, &report);
        let lines = lines_of(&html, "cpu flops: throughput against threads");
        assert_eq!(
            lines,
            vec![(first.clone(), 3), ("node-b".to_string(), 3)],
            "one line per host, each as long as its sweep"
        );
        // And the table says whose each row is.
        let rows = report.results.len() / 2;
        assert!(html.contains("<th>host</th>"), "{html}");
        assert_eq!(html.matches("<tr><td>node-b</td>").count(), rows);
        assert_eq!(html.matches(&format!("<tr><td>{first}</td>")).count(), rows);
    }

    #[test]
    fn a_line_is_named_by_the_swept_parameters_and_bookkeeping_never_splits_it() {
        let mut report = fixture();
        report.results.retain(|r| r.subsystem == Subsystem::Cpu);
        let html = render(1, &report);
        let lines = lines_of(&html, "cpu flops: throughput against threads");
        assert_eq!(
            lines,
            vec![("f64".to_string(), 3), ("f32".to_string(), 3)],
            "ops_per_repetition differs per case and must not split lines"
        );
        assert!(!html.contains("ops_per_repetition="));
        report.results.retain(|r| r.params.threads == Some(1));
        assert!(!render(1, &report).contains("against threads</title>"));
    }

    #[test]
    fn disk_cases_with_bookkeeping_make_one_line_per_op_across_the_sweep() {
        let html = render(1, &fixture());
        // Every disk case carries its own bytes_moved and stamps_checked.
        for title in [
            "disk: throughput against block size",
            "disk: iops against block size",
        ] {
            let lines = lines_of(&html, title);
            assert_eq!(lines.len(), 4, "{title}: {lines:?}");
            assert!(lines.iter().all(|l| l.1 == 3), "{title}: {lines:?}");
        }
        let latency = lines_of(&html, "disk: latency against threads");
        assert!(latency.iter().any(|l| l.0.ends_with("p99")), "{latency:?}");
        // The memory working set follows from block and threads: one line per thread count.
        let memory = lines_of(&html, "memory: throughput against block size");
        let names: Vec<&str> = memory.iter().map(|l| l.0.as_str()).collect();
        assert_eq!(names, ["copy 1T", "copy 2T", "triad 1T", "triad 2T"]);
        assert!(memory.iter().all(|l| l.1 == 4), "{memory:?}");
        let curve = lines_of(
            &html,
            "memory latency: latency against working set (cache-latency curve)",
        );
        assert_eq!(curve.len(), 1, "{curve:?}");
        assert_eq!(curve[0].1, 9);
    }

    #[test]
    fn latencies_of_milliseconds_are_drawn_in_milliseconds() {
        let point = |y| Point {
            x: 1.0,
            y,
            reference: None,
            peak: None,
        };
        let line = Line {
            name: "randread p99".into(),
            run: 0,
            op: "randread".into(),
            points: vec![point(50_000.0), point(30_000_000.0)],
            members: vec![0, 1],
        };
        let (lines, unit) = readable_time(vec![line.clone()], "ns".into());
        assert_eq!(unit, "ms");
        assert_eq!(lines[0].points[1].y, 30.0);
        let (_, unit) = readable_time(vec![line.clone()], "GB/s".into());
        assert_eq!(unit, "GB/s");
        let small = Line {
            points: vec![point(80.0)],
            ..line
        };
        assert_eq!(readable_time(vec![small], "ns".into()).1, "ns");
    }

    #[test]
    fn the_cache_curve_marks_data_and_unified_caches_only() {
        let markers = cache_markers(&fixture());
        let labels: Vec<&str> = markers.iter().map(|m| m.label.as_str()).collect();
        assert!(labels.iter().any(|l| l.starts_with("L1 ")), "{labels:?}");
        assert_eq!(
            labels.iter().filter(|l| l.starts_with("L1 ")).count(),
            1,
            "{labels:?}"
        );
    }
}
