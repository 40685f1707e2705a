//! The results table, one row per result: as aligned text for the terminal ([`Table`], also
//! `--output FILE.txt`) and as Markdown ([`Markdown`], `--output FILE.md`). Both open with the
//! run's findings where the document has them and close with how work is counted, the clocks,
//! the other references and the warnings.

use super::Exporter;
use super::cells::{
    ACCESS_TIME_HEADER, RESULT_HEADERS, access_time_cell, any_access_time, describe_params,
    markdown_cell, markdown_text, other_reference_line, result_row, status_word,
};
use super::findings;
use crate::result::{BenchResult, Report};
use crate::text::{Align, Table as TextTable, printable};
use crate::units::format_value;

const LATENCY_HEADERS: [&str; 4] = ["case", "p50 µs", "p99 µs", "p99.9 µs"];

/// One row per result with latency percentiles (disk I/Os, network round trips): the
/// percentiles of the histogram merged over threads and repetitions, in microseconds.
fn latency_rows(report: &Report) -> Vec<[String; 4]> {
    let us = |ns: f64| format_value(ns / 1e3);
    report
        .results
        .iter()
        .filter_map(|r| {
            let l = r.latency_ns.as_ref()?;
            Some([
                format!("{} {}", r.op, describe_params(&r.params)),
                us(l.p50),
                us(l.p99),
                us(l.p999),
            ])
        })
        .collect()
}

/// The latency table under the main one, when any result has percentiles.
fn latency_table(report: &Report, markdown: bool, out: &mut String) {
    let rows = latency_rows(report);
    if rows.is_empty() {
        return;
    }
    if markdown {
        out.push_str(&format!(
            "\n## Latency\n\n| {} |\n|{}\n",
            LATENCY_HEADERS.join(" | "),
            "---|".repeat(LATENCY_HEADERS.len())
        ));
        for r in rows {
            out.push_str(&format!(
                "| {} |\n",
                r.iter()
                    .map(|c| markdown_cell(c))
                    .collect::<Vec<_>>()
                    .join(" | ")
            ));
        }
        return;
    }
    let mut table = TextTable::new(&LATENCY_HEADERS.map(|h| match h {
        "case" => (h, Align::Left),
        _ => (h, Align::Right),
    }));
    for r in rows {
        table.row(r);
    }
    out.push_str("\nLatency (per I/O or round trip, all threads and repetitions merged):\n");
    out.push_str(&table.render());
}

/// How work is counted, the clocks, the other references and the warnings, each line's
/// document text through `escape` (the terminal's [`printable`] or [`markdown_text`]).
fn footer(report: &Report, out: &mut String, escape: fn(&str) -> String) {
    let mut notes: Vec<String> = Vec::new();
    for result in &report.results {
        let note = format!("{}: {}", result.op, result.counting);
        if !notes.contains(&note) {
            notes.push(note);
        }
    }
    if !notes.is_empty() {
        out.push_str("\nCounting:\n");
        for note in notes {
            out.push_str(&format!("  {}\n", escape(&note)));
        }
    }
    clock_pairs(report, out, escape);
    let others: Vec<String> = report
        .results
        .iter()
        .flat_map(|r| {
            r.other_references
                .iter()
                .map(move |o| other_reference_line(r, o))
        })
        .collect();
    if !others.is_empty() {
        out.push_str("\nOther references (ours / theirs):\n");
        for line in others {
            out.push_str(&format!("  {}\n", escape(&line)));
        }
    }
    let warnings: Vec<String> = report
        .warnings
        .iter()
        .cloned()
        .chain(report.results.iter().flat_map(|r| {
            r.warnings
                .iter()
                .map(move |w| format!("{} {}: {w}", r.op, describe_params(&r.params)))
        }))
        .collect();
    if !warnings.is_empty() {
        out.push_str("\nWarnings:\n");
        for warning in warnings {
            out.push_str(&format!("  {}\n", escape(&warning)));
        }
    }
}

/// The CPU peaks of each result: the one its efficiency uses, at the clock it stands on and
/// where that clock came from (measured, a licence, cpuinfo or a flag), then the same peak at
/// the base and the turbo clock for comparison. The clocks with their sources come once.
fn clock_pairs(report: &Report, out: &mut String, escape: fn(&str) -> String) {
    let paired: Vec<(&BenchResult, &crate::peak::PeakRef, &crate::peak::ClockPair)> = report
        .results
        .iter()
        .filter_map(|r| {
            let peak = r.peak.as_ref()?;
            Some((r, peak, peak.pair.as_ref()?))
        })
        .collect();
    let Some((_, _, first)) = paired.first() else {
        return;
    };
    let clock = |name: &str, f: &crate::peak::Factor| match f.value {
        Some(g) => format!(
            "{name} {} GHz ({}: {})",
            format_value(g),
            f.source,
            f.detail
        ),
        None => format!("{name} clock unknown ({})", f.detail),
    };
    let measured = first
        .measured_ghz
        .map(|m| format!("; measured {} GHz", format_value(m)))
        .unwrap_or_default();
    out.push_str(&format!(
        "\nPeaks on the cores' clock (CPU kernels, bandwidths held in a cache): the one each \
         efficiency uses, then at base / turbo clock ({}):\n",
        escape(&format!(
            "{}; {}{measured}",
            clock("base", &first.base_ghz),
            clock("turbo", &first.turbo_ghz)
        ))
    ));
    let cell = |v: Option<f64>| v.map(format_value).unwrap_or_else(|| "unknown".into());
    for (r, peak, pair) in paired {
        let used = match pair.used_ghz.as_ref().and_then(|f| Some((f.value?, f))) {
            Some((ghz, f)) => format!(" at {} GHz ({})", format_value(ghz), f.source),
            None => String::new(),
        };
        let line = format!(
            "{} {}: {} {}{used}, used; at base / turbo {} / {}",
            r.op,
            describe_params(&r.params),
            format_value(peak.value),
            peak.unit,
            cell(pair.at_base),
            cell(pair.at_turbo),
        );
        out.push_str(&format!("  {}\n", escape(&line)));
    }
}

/// The human table: the findings where the document has them, then one aligned row per result,
/// then how ops are counted, then warnings.
pub(super) fn render_table(report: &Report) -> String {
    let right = |h| (h, Align::Right);
    let left = |h| (h, Align::Left);
    let access = any_access_time(report.results.iter());
    let mut columns: Vec<(&str, Align)> = RESULT_HEADERS
        .iter()
        .map(|&h| match h {
            "case" | "unit" | "reference" => left(h),
            _ => right(h),
        })
        .collect();
    if access {
        columns.push(right(ACCESS_TIME_HEADER));
    }
    let mut table = TextTable::new(&columns);
    for result in &report.results {
        let mut cells = result_row(result).to_vec();
        if access {
            cells.push(access_time_cell(result));
        }
        table.row(cells);
    }
    let mut out = format!(
        "peakbench {} on {} ({}), {}\n\n",
        printable(&report.tool.version),
        printable(&report.host.hostname),
        printable(&report.host.cpu.model_name),
        status_word(report)
    );
    if let Some(findings) = &report.findings {
        out.push_str(&findings::render_text(findings));
        out.push('\n');
    }
    out.push_str(&table.render());
    latency_table(report, false, &mut out);
    footer(report, &mut out, printable);
    crate::text::terminal(&out)
}

/// The same rows as a Markdown table, after the findings where the document has them.
pub(super) fn render_markdown(report: &Report) -> String {
    let mut out = format!(
        "# peakbench {} on {}\n\n{} ({}), {}\n\n",
        markdown_text(&report.tool.version),
        markdown_text(&report.host.hostname),
        markdown_text(&report.host.cpu.model_name),
        markdown_text(&report.started_at),
        status_word(report)
    );
    if let Some(findings) = &report.findings {
        out.push_str(&findings::render_markdown(findings, "## Findings"));
        out.push('\n');
    }
    let access = any_access_time(report.results.iter());
    let mut headers = RESULT_HEADERS.to_vec();
    if access {
        headers.push(ACCESS_TIME_HEADER);
    }
    out.push_str(&format!("| {} |\n", headers.join(" | ")));
    out.push_str(&format!("|{}\n", "---|".repeat(headers.len())));
    for result in &report.results {
        let mut cells = result_row(result).to_vec();
        if access {
            cells.push(access_time_cell(result));
        }
        let cells: Vec<String> = cells.iter().map(|c| markdown_cell(c)).collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    latency_table(report, true, &mut out);
    footer(report, &mut out, markdown_text);
    out
}

/// The results table as aligned text: what a command prints by default, and `--output
/// FILE.txt`.
#[derive(Debug)]
pub(crate) struct TextReport;

impl Exporter for TextReport {
    fn export(&self, report: &Report) -> Vec<u8> {
        render_table(report).into_bytes()
    }
}

/// The results table in Markdown: `--output FILE.md`.
#[derive(Debug)]
pub(crate) struct Markdown;

impl Exporter for Markdown {
    fn export(&self, report: &Report) -> Vec<u8> {
        render_markdown(report).into_bytes()
    }
}
