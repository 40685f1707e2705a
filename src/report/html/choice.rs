//! Which charts a subsystem's results get. Per axis a result has (the parameters the workloads
//! declare as axes) and per quantity it measured (the headline metric, each extra metric, latency
//! p50/p99: a [`Measure`]), a chart of the results that sweep that axis, split into lines by
//! `lines`; with more lines than colours, one chart per op and one of the ops side by side. Then
//! the curves of their own: the cache-latency curve, the loaded latency, each sampling run's
//! time series.

use std::collections::BTreeSet;

use super::draw::{Chart, draw};
use super::lines::{Line, lines, readable_time};
use super::{Item, Measure};
use crate::report::cells::describe_params;
use crate::report::charts::{HLine, LineChart, Marker, PALETTE, Scale, Series, Ticks, line_chart};
use crate::result::{AxisScale, BenchResult, Report, chart_axes};
use crate::units::format_value;

/// A parameter a chart can put on its x axis, by its name in `Params::flat`: the axes the
/// workloads declare ([`crate::result::chart_axes`]), in their order.
#[derive(Clone, Copy)]
struct XParam {
    key: &'static str,
    name: &'static str,
    label: &'static str,
    ticks: Ticks,
}

fn x_params() -> Vec<XParam> {
    chart_axes()
        .into_iter()
        .map(|(key, axis)| XParam {
            key,
            name: axis.name,
            label: axis.label,
            ticks: match axis.scale {
                AxisScale::Count => Ticks::Count,
                AxisScale::Bytes => Ticks::Bytes,
                AxisScale::BitRate => Ticks::BitRate,
            },
        })
        .collect()
}

fn is_cache_curve(r: &BenchResult) -> bool {
    r.op == "latency" && r.params.working_set_bytes.is_some() && !is_loaded_latency(r)
}

/// A point of `mem latency --load-threads`: latency at one load level.
fn is_loaded_latency(r: &BenchResult) -> bool {
    r.op == "latency" && r.params.other.contains_key("load_threads")
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

/// Results with the quantity a chart plots and their x.
type Group<'a> = Vec<(&'a Item<'a>, Measure, f64)>;

/// The most lines a chart draws apart: one per colour.
const COLOURS: usize = PALETTE.len();

/// Every chart of one subsystem's results (of one run or several).
pub(super) fn charts(items: &[Item], report: &Report, runs: usize) -> Vec<String> {
    let mut svgs = Vec::new();
    let subsystem = items
        .first()
        .map(|i| i.result.subsystem.name())
        .unwrap_or("");
    for axis in x_params() {
        for ((metric, _), group) in quantities(items, axis.key) {
            let (group, all) = swept_only(group, axis.key);
            if !all.iter().any(Line::spans) {
                continue;
            }
            for (suffix, part, lines) in chart_parts(group, all, axis.key) {
                if !lines.iter().any(Line::spans) {
                    continue;
                }
                svgs.extend(part_charts(
                    subsystem, &metric, &axis, &suffix, &part, lines, runs,
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

/// The results that have the parameter `axis`, by the quantity they measured (its metric and
/// the class of its unit), in the order first met. The cache curve and sampling runs have
/// charts of their own.
fn quantities<'a>(items: &'a [Item<'a>], axis: &str) -> Vec<((String, String), Group<'a>)> {
    let mut groups: Vec<((String, String), Group)> = Vec::new();
    for item in items
        .iter()
        .filter(|i| !is_cache_curve(i.result) && i.result.series.is_empty())
    {
        let Some(x) = item.x(axis) else { continue };
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
    groups
}

/// The group's results that sweep `axis`, and their lines.
fn swept_only<'a>(group: Group<'a>, axis: &str) -> (Group<'a>, Vec<Line>) {
    let all = lines(&group, axis);
    // A case whose table did not sweep this axis (a single Linpack size among the thread
    // sweeps, the 1 KiB latency-against-threads table on the block-size chart) is a line of one
    // point here beside swept lines: it is in the table and on the charts of the axes its table
    // swept, not on this one.
    let spanning = all.iter().filter(|l| l.spans()).count();
    if spanning == 0 || spanning == all.len() {
        return (group, all);
    }
    let kept: BTreeSet<usize> = all
        .iter()
        .filter(|l| l.spans())
        .flat_map(|l| l.members.iter().copied())
        .collect();
    let group: Group = group
        .into_iter()
        .enumerate()
        .filter(|(index, _)| kept.contains(index))
        .map(|(_, g)| g)
        .collect();
    let all = lines(&group, axis);
    (group, all)
}

/// The charts a group is drawn on, each with the suffix of its title, its results and its
/// lines: one chart, or where it has more lines than colours one per op, and the ops side by
/// side (read against write, RWS against RWR) at the highest concurrency where that leaves
/// few enough lines.
fn chart_parts<'a>(
    group: Group<'a>,
    all: Vec<Line>,
    axis: &str,
) -> Vec<(String, Group<'a>, Vec<Line>)> {
    let mut ops: Vec<String> = Vec::new();
    for line in &all {
        if !ops.contains(&line.op) {
            ops.push(line.op.clone());
        }
    }
    if all.len() <= COLOURS || ops.len() <= 1 {
        return vec![(String::new(), group, all)];
    }
    let mut parts: Vec<(String, Group, Vec<Line>)> = ops
        .iter()
        .map(|op| {
            let part: Group = group
                .iter()
                .filter(|g| &g.0.result.op == op)
                .cloned()
                .collect();
            let lines = lines(&part, axis);
            (String::new(), part, lines)
        })
        .collect();
    for key in ["threads", "streams"].into_iter().filter(|k| *k != axis) {
        let Some(most) = group.iter().filter_map(|g| g.0.x(key)).reduce(f64::max) else {
            continue;
        };
        let part: Group = group
            .iter()
            .filter(|g| g.0.x(key) == Some(most))
            .cloned()
            .collect();
        let lines = lines(&part, axis);
        if lines.len() <= COLOURS {
            parts.push((format!(", every op at {most} {key}"), part, lines));
        }
        break;
    }
    parts
}

/// The charts of one part of a group: titled by its op where it has one, its lines in a
/// readable time unit.
fn part_charts(
    subsystem: &str,
    metric: &str,
    axis: &XParam,
    suffix: &str,
    part: &[(&Item, Measure, f64)],
    lines: Vec<Line>,
    runs: usize,
) -> Vec<String> {
    let mut units: Vec<&str> = Vec::new();
    for (_, m, _) in part {
        if !units.contains(&m.unit.as_str()) {
            units.push(&m.unit);
        }
    }
    let (lines, unit) = readable_time(lines, units.join(" or "));
    let part_ops: BTreeSet<&str> = part.iter().map(|g| g.0.result.op.as_str()).collect();
    let title = if part_ops.len() == 1 {
        format!(
            "{subsystem} {}: {metric} against {}",
            part[0].0.result.op, axis.name
        )
    } else {
        format!("{subsystem}: {metric} against {}{suffix}", axis.name)
    };
    let items: Vec<&Item> = part.iter().map(|g| g.0).collect();
    let chart = Chart {
        title,
        x_label: axis.label,
        x_ticks: axis.ticks,
        y_label: format!("{metric} ({unit})"),
        unit,
        tools: tools_of(&items),
        runs,
    };
    draw(&chart, &lines)
}

/// The names of the standard tools in `items`' results, for the legend's note.
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
    let quantile = |q: f64| crate::stats::nearest_rank(&values, q);
    let (Some(q1), Some(median), Some(q3)) = (quantile(0.25), quantile(0.5), quantile(0.75)) else {
        return String::new();
    };
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
    use crate::report::html::render;
    use crate::result::Subsystem;

    fn fixture() -> Report {
        serde_json::from_str(include_str!("../../../tests/fixtures/report.json")).unwrap()
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
