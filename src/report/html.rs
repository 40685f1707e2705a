//! The HTML report: one self-contained file (inline CSS and SVG, no script, nothing fetched).
//!
//! It works on any report, from the fields every result has: results are grouped by
//! subsystem; within one, by op, metric and unit into charts, and by every parameter but the
//! one on the x axis into lines. So a new subsystem or parameter gets its tables and charts
//! without changes here. Charts:
//!
//! - the headline value against threads, block size, message size and streams (one line per
//!   combination of the other parameters), where a line has at least two points;
//! - latency percentiles (p50, p99) against the same axes, for results that have them;
//! - the efficiency of each result against its theoretical peak;
//! - the cache-latency curve: results with op `latency` and a working set, ns against the
//!   working set on a log₂ axis, with the machine's cache sizes marked;
//! - the time series of each sampling run.

use std::fmt::Write;

use super::charts::{LineChart, Marker, Scale, Series, Ticks, bar_chart, escape, line_chart};
use super::table::{PASTE_HEADERS, all_warnings, describe_params, paste_row, subsystems};
use crate::result::{BenchResult, Params, Report, Subsystem};

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}\
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}\
table{border-collapse:collapse;margin:1em 0;font-size:.9em}th,td{border:1px solid #ccc;padding:.25em .6em}\
th{background:#f2f2f2;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}\
pre{background:#f7f7f7;padding:1em;white-space:pre-wrap;font-size:.85em}\
figure{margin:1.5em 0}svg.chart{max-width:100%;height:auto;font-size:12px}\
svg .title{font-size:15px;font-weight:600}svg .axis{font-size:13px}svg .tick{font-size:11px;fill:#444}\
svg .legend{font-size:12px}svg .marker-label{font-size:11px;fill:#666}.warn li{color:#8a4b00}";

/// The report of run `run_id` as one HTML document.
pub fn render(run_id: i64, report: &Report) -> String {
    let mut out = String::new();
    let title = format!("peakbench run {run_id} on {}", report.host.hostname);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>{t}</title><style>{STYLE}</style></head><body>\n<h1>{t}</h1>\n",
        t = escape(&title)
    );
    header(&mut out, run_id, report);
    let _ = write!(
        out,
        "<h2>Machine</h2>\n<pre>{}</pre>\n<h2>Theoretical peaks</h2>\n<pre>{}</pre>\n",
        escape(&crate::sysinfo::render(&report.host)),
        escape(&crate::peak::render(&report.peaks))
    );
    for subsystem in subsystems(report) {
        let results: Vec<&BenchResult> = report
            .results
            .iter()
            .filter(|r| r.subsystem == subsystem)
            .collect();
        section(&mut out, subsystem, &results, report);
    }
    if report.results.is_empty() {
        out.push_str("<p>This run has no results.</p>\n");
    }
    warnings(&mut out, report);
    out.push_str("</body></html>\n");
    out
}

fn header(out: &mut String, run_id: i64, report: &Report) {
    let status = serde_json::to_value(report.status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let rows = [
        ("run", run_id.to_string()),
        ("host", report.host.hostname.clone()),
        ("CPU", report.host.cpu.model_name.clone()),
        ("started", report.started_at.clone()),
        (
            "finished",
            report.finished_at.clone().unwrap_or_else(|| "-".into()),
        ),
        ("status", status),
        ("command", report.command.join(" ")),
        (
            "tool",
            format!("{} {}", report.tool.name, report.tool.version),
        ),
    ];
    out.push_str("<table class=\"run\">\n");
    for (key, value) in rows {
        let _ = writeln!(
            out,
            "<tr><th>{}</th><td>{}</td></tr>",
            escape(key),
            escape(&value)
        );
    }
    out.push_str("</table>\n");
}

fn section(out: &mut String, subsystem: Subsystem, results: &[&BenchResult], report: &Report) {
    let _ = write!(
        out,
        "<h2 id=\"{s}\">{s}</h2>\n<table class=\"results\"><tr>",
        s = subsystem.name()
    );
    for h in PASTE_HEADERS {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr>\n");
    for r in results {
        out.push_str("<tr>");
        for (i, cell) in paste_row(r).iter().enumerate() {
            let class = if matches!(i, 2 | 3 | 5 | 7 | 8 | 9) {
                " class=\"n\""
            } else {
                ""
            };
            let _ = write!(out, "<td{class}>{}</td>", escape(cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
    let mut counting: Vec<String> = Vec::new();
    for r in results {
        let note = format!("{}: {}", r.op, r.counting);
        if !counting.contains(&note) {
            counting.push(note);
        }
    }
    out.push_str("<p>How work is counted:</p><ul>");
    for note in counting {
        let _ = write!(out, "<li>{}</li>", escape(&note));
    }
    out.push_str("</ul>\n");
    for chart in charts(results, report) {
        let _ = writeln!(out, "<figure>{chart}</figure>");
    }
}

fn warnings(out: &mut String, report: &Report) {
    let list = all_warnings(report);
    out.push_str("<h2>Warnings</h2>\n");
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

/// A parameter a chart can put on its x axis.
#[derive(Clone, Copy)]
struct XParam {
    name: &'static str,
    label: &'static str,
    scale: Scale,
    ticks: Ticks,
    get: fn(&Params) -> Option<f64>,
    clear: fn(&mut Params),
}

const X_PARAMS: [XParam; 4] = [
    XParam {
        name: "threads",
        label: "threads",
        scale: Scale::Linear,
        ticks: Ticks::Number,
        get: |p| p.threads.map(|t| t as f64),
        clear: |p| p.threads = None,
    },
    XParam {
        name: "block size",
        label: "block size (bytes)",
        scale: Scale::Log2,
        ticks: Ticks::Bytes,
        get: |p| p.block_bytes.map(|b| b as f64),
        clear: |p| p.block_bytes = None,
    },
    XParam {
        name: "message size",
        label: "message size (bytes)",
        scale: Scale::Log2,
        ticks: Ticks::Bytes,
        get: |p| p.message_bytes.map(|b| b as f64),
        clear: |p| p.message_bytes = None,
    },
    XParam {
        name: "streams",
        label: "parallel streams",
        scale: Scale::Linear,
        ticks: Ticks::Number,
        get: |p| p.streams.map(|s| s as f64),
        clear: |p| p.streams = None,
    },
];

fn is_cache_curve(r: &BenchResult) -> bool {
    r.op == "latency" && r.params.working_set_bytes.is_some()
}

/// Adds `(x, y)` to the line `line` of the chart `chart`, keeping first-seen order.
type Groups = Vec<(String, String, Vec<(String, Vec<(f64, f64)>)>)>;

fn add(groups: &mut Groups, chart: String, y_label: String, line: String, point: (f64, f64)) {
    let index = match groups.iter().position(|g| g.0 == chart) {
        Some(i) => i,
        None => {
            groups.push((chart, y_label, Vec::new()));
            groups.len() - 1
        }
    };
    let lines = &mut groups[index].2;
    match lines.iter_mut().find(|l| l.0 == line) {
        Some(l) => l.1.push(point),
        None => lines.push((line, vec![point])),
    }
}

fn series_of(lines: Vec<(String, Vec<(f64, f64)>)>) -> Vec<Series> {
    lines
        .into_iter()
        .map(|(name, mut points)| {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series { name, points }
        })
        .collect()
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

/// Every chart of one subsystem's results.
fn charts(results: &[&BenchResult], report: &Report) -> Vec<String> {
    let mut svgs = Vec::new();
    for axis in X_PARAMS {
        let mut groups: Groups = Vec::new();
        for r in results.iter().filter(|r| !is_cache_curve(r)) {
            let Some(x) = (axis.get)(&r.params) else {
                continue;
            };
            let mut rest = r.params.clone();
            (axis.clear)(&mut rest);
            let line = line_label(&rest, &r.op);
            add(
                &mut groups,
                format!(
                    "{} {}: {} against {}",
                    r.subsystem.name(),
                    r.op,
                    r.metric,
                    axis.name
                ),
                format!("{} ({})", r.metric, r.unit),
                line.clone(),
                (x, r.value),
            );
            if let Some(latency) = &r.latency_ns {
                for (name, v) in [("p50", latency.p50), ("p99", latency.p99)] {
                    add(
                        &mut groups,
                        format!(
                            "{} {}: latency against {}",
                            r.subsystem.name(),
                            r.op,
                            axis.name
                        ),
                        "latency (ns)".into(),
                        format!("{line} {name}"),
                        (x, v),
                    );
                }
            }
        }
        for (title, y_label, lines) in groups {
            if !lines.iter().any(|l| l.1.len() > 1) {
                continue;
            }
            let series = series_of(lines);
            let y_scale = y_scale_for(&series);
            svgs.push(line_chart(&LineChart {
                title,
                x_label: axis.label.into(),
                y_label,
                x_scale: axis.scale,
                y_scale,
                x_ticks: axis.ticks,
                y_from_zero: true,
                series,
                markers: Vec::new(),
            }));
        }
    }
    let mut curves: Groups = Vec::new();
    for r in results.iter().filter(|r| is_cache_curve(r)) {
        let ws = r.params.working_set_bytes.unwrap_or(0) as f64;
        let rest = Params {
            working_set_bytes: None,
            ..r.params.clone()
        };
        add(
            &mut curves,
            format!(
                "{} {}: {} against working set (cache-latency curve)",
                r.subsystem.name(),
                r.op,
                r.metric
            ),
            format!("{} ({})", r.metric, r.unit),
            line_label(&rest, &r.op),
            (ws, r.value),
        );
    }
    for (title, y_label, lines) in curves {
        let series = series_of(lines);
        svgs.push(line_chart(&LineChart {
            title,
            x_label: "working set (bytes)".into(),
            y_label,
            x_scale: Scale::Log2,
            y_scale: y_scale_for(&series),
            x_ticks: Ticks::Bytes,
            y_from_zero: true,
            series,
            markers: cache_markers(report),
        }));
    }
    let bars: Vec<(String, f64)> = results
        .iter()
        .filter_map(|r| {
            r.efficiency
                .map(|e| (format!("{} {}", r.op, describe_params(&r.params)), e))
        })
        .collect();
    if let Some(first) = results.first()
        && !bars.is_empty()
    {
        svgs.push(bar_chart(
            &format!(
                "{}: efficiency against the theoretical peak",
                first.subsystem.name()
            ),
            "measured / theoretical peak (%)",
            &bars,
        ));
    }
    for r in results.iter().filter(|r| !r.series.is_empty()) {
        svgs.push(line_chart(&LineChart {
            title: format!(
                "{} {} {}: time series",
                r.subsystem.name(),
                r.op,
                describe_params(&r.params)
            ),
            x_label: "time (s)".into(),
            y_label: format!("{} ({})", r.metric, r.unit),
            x_scale: Scale::Linear,
            y_scale: Scale::Linear,
            x_ticks: Ticks::Number,
            y_from_zero: true,
            series: vec![Series {
                name: format!("{} per sample", r.metric),
                points: r.series.iter().map(|p| (p.t_s, p.value)).collect(),
            }],
            markers: Vec::new(),
        }));
    }
    svgs
}

/// The name of a line: every parameter left once the x axis is taken out, those a subsystem
/// keeps in `other` included, so two different cases never share a line.
fn line_label(params: &Params, op: &str) -> String {
    let mut parts = vec![describe_params(params)];
    parts.extend(params.other.iter().map(|(k, v)| format!("{k}={v}")));
    let text = parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    if text.is_empty() {
        op.to_string()
    } else {
        text
    }
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

    fn fixture() -> Report {
        serde_json::from_str(include_str!("../../tests/fixtures/report.json")).unwrap()
    }

    #[test]
    fn distinct_cases_get_distinct_lines_and_a_line_needs_two_points() {
        let mut report = fixture();
        report.results.retain(|r| r.subsystem == Subsystem::Cpu);
        let html = render(1, &report);
        assert!(html.contains("cpu flops: throughput against threads"));
        // The sampling case differs only in params.other: its own line, not a second point
        // at 2 threads on the f64 line.
        assert!(html.contains(">f64 avx512 fma interval_s=1.0 samples=20</text>"));
        report.results.retain(|r| r.params.threads == Some(1));
        assert!(!render(1, &report).contains("against threads"));
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
