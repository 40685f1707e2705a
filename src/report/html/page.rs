//! The page of the HTML report: the document's skeleton and CSS, the findings (first, where the
//! document has them), the run table, the summary, the machine and peak tables, each
//! subsystem's section (what its rows share, its results table, how work is counted, the other
//! references, then the charts `choice` picks) and the warnings.

use std::fmt::Write;

use super::Item;
use super::choice::charts;
use super::findings;
use crate::report::cells::{
    ACCESS_TIME_HEADER, PASTE_HEADERS, access_time_cell, all_warnings, any_access_time,
    change_cell, describe_params, escape, other_reference_line, paste_row, ratio_cell,
    reference_cell, shared_params, subsystems, subsystems_of_runs,
};
use crate::report::{cluster, inventory, peaks};
use crate::result::{BenchResult, Report, Subsystem};
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
pub(super) fn render(run_id: i64, report: &Report) -> String {
    render_runs(&[(run_id, report)])
}

/// The report of one run or several (two machines, before and after a change) on the same
/// charts, each run in its own line style.
pub(super) fn render_runs(runs: &[(i64, &Report)]) -> String {
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
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>{t}</title><style>{STYLE}{judged}</style></head><body>\n<h1>{t}</h1>\n",
        t = escape(&title),
        judged = if runs.iter().any(|(_, r)| r.findings.is_some()) {
            findings::STYLE
        } else {
            ""
        }
    );
    findings::section(&mut out, runs);
    header(&mut out, runs);
    summary(&mut out, runs);
    for (_, report) in runs {
        cluster::section(&mut out, report);
    }
    for (id, report) in runs {
        let whose = if runs.len() > 1 {
            format!(" of run {id} ({})", report.host.hostname)
        } else {
            String::new()
        };
        let _ = writeln!(out, "<h2>Machine{}</h2>", escape(&whose));
        text_tables(&mut out, &inventory::render(&report.host));
        let _ = writeln!(out, "<h2>Theoretical peaks{}</h2>", escape(&whose));
        text_tables(&mut out, &peaks::render(&report.peaks));
    }
    for subsystem in subsystems_of_runs(runs) {
        section(&mut out, subsystem, &items_of(runs, subsystem), runs);
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

/// The results of `subsystem` in every run, run by run.
fn items_of<'a>(runs: &[(i64, &'a Report)], subsystem: Subsystem) -> Vec<Item<'a>> {
    runs.iter()
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
        .collect()
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
            summary_rows(out, multi.then_some(*id), subsystem, report);
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

/// The summary's rows of one run's subsystem, one per op (and unit): its best result. `run` is
/// the run's id where the summary has a run column.
fn summary_rows(out: &mut String, run: Option<i64>, subsystem: Subsystem, report: &Report) {
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
        let best = best_of(&results, op, unit);
        let percent = |v: f64| format!("{:.1}%", v * 100.0);
        let reference = best.reference.as_ref();
        let mut cells = Vec::new();
        if let Some(id) = run {
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
            reference_cell(reference),
            ratio_cell(reference),
            if i == 0 {
                format!("{warned} of {} results", results.len())
            } else {
                String::new()
            },
        ]);
        out.push_str("<tr>");
        for (c, cell) in cells.iter().enumerate() {
            let class = if matches!(c + usize::from(run.is_none()), 3 | 6 | 8) {
                " class=\"n\""
            } else {
                ""
            };
            let _ = write!(out, "<td{class}>{}</td>", escape(cell));
        }
        out.push_str("</tr>\n");
    }
}

/// The best of the results of `op` in `unit`: the highest figure, or the lowest where lower is
/// better.
fn best_of<'a>(results: &[&'a BenchResult], op: &str, unit: &str) -> &'a BenchResult {
    results
        .iter()
        .filter(|r| r.op == op && r.unit == unit)
        .max_by(|a, b| {
            let order = a.value.total_cmp(&b.value);
            if lower_is_better(a) {
                order.reverse()
            } else {
                order
            }
        })
        .expect("a key comes from a result")
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

/// A subsystem's section: what every row shares, the results table, how work is counted, the
/// other references and the charts.
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
    results_table(out, items, runs, &shared);
    counting_notes(out, items);
    other_references(out, items);
    if subsystem == Subsystem::Roofline {
        // Its own chart (log–log ceilings and roofs) instead of the charts of parameters.
        crate::report::roofline::html_section(out, runs);
        return;
    }
    for chart in charts(items, runs[0].1, runs.len()) {
        let _ = writeln!(out, "<figure>{chart}</figure>");
    }
    if subsystem == Subsystem::Memory {
        crate::report::c2c::html_section(out, runs);
    }
}

/// The table users paste, a row per result (the parameters in `shared` left to the line
/// above it), with a run column and each row against the first run where there are several,
/// and a host column for a cluster run's results.
fn results_table(out: &mut String, items: &[Item], runs: &[(i64, &Report)], shared: &[String]) {
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
    let access = any_access_time(items.iter().map(|i| i.result));
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
        for (i, cell) in paste_row(item.result, shared).iter().enumerate() {
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
            let _ = write!(out, "<td>{}</td>", escape(&against_first(item, runs)));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table></div>\n");
}

/// A result of a later run against the same case of the first run (empty for the first run's).
fn against_first(item: &Item, runs: &[(i64, &Report)]) -> String {
    if item.run == 0 {
        return String::new();
    }
    runs[0]
        .1
        .results
        .iter()
        .find(|r| r.id == item.result.id)
        .map(|a| change_cell(a, item.result))
        .unwrap_or_else(|| "not in the first run".into())
}

/// How each op counts its work, once per op and rule.
fn counting_notes(out: &mut String, items: &[Item]) {
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
}

/// The results against a second tool (ICMP ping beside sockperf), where there are any.
fn other_references(out: &mut String, items: &[Item]) {
    let others: Vec<String> = items
        .iter()
        .flat_map(|item| {
            item.result
                .other_references
                .iter()
                .map(|o| other_reference_line(item.result, o))
        })
        .collect();
    if !others.is_empty() {
        out.push_str("<details open><summary>Other references (ours / theirs)</summary><ul>");
        for line in others {
            let _ = write!(out, "<li>{}</li>", escape(&line));
        }
        out.push_str("</ul></details>\n");
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
}
