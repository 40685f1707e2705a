//! The human table (stdout) and the same rows as Markdown.

use super::findings::markdown_text;
use crate::result::{BenchResult, Params, Reference, Report};
use crate::text::{Align, Table, printable};
use crate::units::{format_bitrate, format_size, format_size_approx, format_value};

/// A compact description of a case's parameters, e.g. "f64 avx512 fma 2T".
pub fn describe_params(p: &Params) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut push = |s: Option<String>| parts.extend(s);
    push(p.precision.clone());
    push(p.isa.clone());
    push(p.fma.map(|f| if f { "fma" } else { "no-fma" }.to_string()));
    push(p.n.map(|n| format!("n={n}")));
    push(p.protocol.clone());
    push(
        p.block_bytes
            .map(|b| format!("bs={}", format_size(b).replace(' ', ""))),
    );
    push(
        p.message_bytes
            .map(|b| format!("msg={}", format_size(b).replace(' ', ""))),
    );
    // A working set split among threads is rarely a round size: 2097125KiB reads as ≈2GiB,
    // 2,200,000 KiB as ≈2.1GiB.
    push(p.working_set_bytes.map(|b| {
        let exact = format_size(b);
        let short = exact
            .split(' ')
            .next()
            .and_then(|n| n.parse::<u64>().ok())
            .is_some_and(|n| n < 10_000);
        if short {
            format!("ws={}", exact.replace(' ', ""))
        } else {
            format!("ws≈{}", format_size_approx(b).replace(' ', ""))
        }
    }));
    push((p.other.get("nt") == Some(&serde_json::Value::Bool(true))).then(|| "nt".to_string()));
    if let Some(threads) = p.other.get("load_threads").and_then(|v| v.as_u64()) {
        let op = p
            .other
            .get("load_op")
            .and_then(|v| v.as_str())
            .unwrap_or("-");
        push(Some(
            match p.other.get("pace_ns").and_then(|v| v.as_u64()) {
                None => "no-load".to_string(),
                Some(0) => format!("load={threads}x{op} unpaced"),
                Some(ns) => format!("load={threads}x{op} pace={}ns", ns),
            },
        ));
    }
    push(p.queue_depth.map(|q| format!("qd={q}")));
    push(
        p.direct
            .map(|d| if d { "direct" } else { "buffered" }.to_string()),
    );
    push(p.engine.clone());
    push(p.streams.map(|s| format!("{s} streams")));
    push(
        p.other
            .get("rate_bps")
            .and_then(serde_json::Value::as_f64)
            .map(|r| format!("at {}", format_bitrate(r))),
    );
    push(p.threads.map(|t| format!("{t}T")));
    push(p.scaling.clone());
    // A link of a cluster's matrix is measured from its host to this peer: without it, the
    // N − 1 links of a host read alike.
    push(p.peer().map(|peer| format!("to {peer}")));
    parts.join(" ")
}

/// The parameters outside the named fields (`params.other`) that [`describe_params`] does not
/// name (it names `nt`, the offered rate and a link's peer), each as `key=value`, a string up
/// to its first explanation.
pub fn describe_other(p: &Params) -> Vec<String> {
    p.other
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "nt" | "rate_bps" | "peer"))
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => format!("{k}={}", s.split(':').next().unwrap_or(s)),
            other => format!("{k}={other}"),
        })
        .collect()
}

fn row(result: &BenchResult) -> [String; 9] {
    let percent = |v: f64| format!("{:.1}%", v * 100.0);
    let reference = result.reference.as_ref();
    [
        format!("{} {}", result.op, describe_params(&result.params)),
        format_value(result.value),
        result.unit.clone(),
        result.stats.cv.map(percent).unwrap_or_else(|| "-".into()),
        format!(
            "{} … {}",
            format_value(result.stats.min),
            format_value(result.stats.max)
        ),
        result
            .peak
            .as_ref()
            .map(|p| format_value(p.value))
            .unwrap_or_else(|| "-".into()),
        result.efficiency.map(percent).unwrap_or_else(|| "-".into()),
        reference_cell(reference),
        ratio_cell(reference),
    ]
}

/// The standard tool's cell of a results table: its name and value, `n/a` when it gave none.
pub(crate) fn reference_cell(reference: Option<&Reference>) -> String {
    reference
        .map(|r| match r.value {
            Some(v) => format!("{} {}", r.tool, format_value(v)),
            None => format!("{} n/a", r.tool),
        })
        .unwrap_or_else(|| "-".into())
}

/// The ours-to-the-tool ratio's cell.
pub(crate) fn ratio_cell(reference: Option<&Reference>) -> String {
    reference
        .and_then(|r| r.ratio)
        .map(|r| format!("{r:.2}"))
        .unwrap_or_else(|| "-".into())
}

/// The header of the access-time column, added to a table where some result has one.
pub const ACCESS_TIME_HEADER: &str = "access time";

/// A memory block case's access time as users count it (the elapsed times of all threads added
/// up ÷ the accesses of all threads, median over repetitions; its counting rule says so), if
/// the result has one.
pub fn access_time_ns(result: &BenchResult) -> Option<f64> {
    result
        .extra
        .iter()
        .find(|e| e.metric == "access_time")
        .map(|e| e.value)
}

/// Whether any of these results has an access time (and so its table the column).
pub fn any_access_time<'a>(mut results: impl Iterator<Item = &'a BenchResult>) -> bool {
    results.any(|r| access_time_ns(r).is_some())
}

/// The access-time cell of a result: "-" where it has none.
pub fn access_time_cell(result: &BenchResult) -> String {
    access_time_ns(result)
        .map(format_ns)
        .unwrap_or_else(|| "-".into())
}

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
    let mut table = Table::new(&LATENCY_HEADERS.map(|h| match h {
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

/// The CPU peaks at the base and the turbo clock, where a result has them: the clocks with
/// their sources once, then each result's pair.
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
        "\nPeaks at base / turbo clock ({}):\n",
        escape(&format!(
            "{}; {}{measured}",
            clock("base", &first.base_ghz),
            clock("turbo", &first.turbo_ghz)
        ))
    ));
    let cell = |v: Option<f64>| v.map(format_value).unwrap_or_else(|| "unknown".into());
    for (r, peak, pair) in paired {
        let line = format!(
            "{} {}: {} / {} {}",
            r.op,
            describe_params(&r.params),
            cell(pair.at_base),
            cell(pair.at_turbo),
            peak.unit
        );
        out.push_str(&format!("  {}\n", escape(&line)));
    }
}

/// One line of a result's further standard tool: its value and our ratio to it, or why it has
/// none, then what it measured differently.
pub fn other_reference_line(result: &BenchResult, other: &crate::result::Reference) -> String {
    let value = match (other.value, other.ratio) {
        (Some(v), Some(ratio)) => format!(
            "{} {} {}, ratio {ratio:.2}",
            other.tool,
            format_value(v),
            result.unit
        ),
        (Some(v), None) => format!("{} {} {}", other.tool, format_value(v), result.unit),
        (None, _) => format!("{} n/a", other.tool),
    };
    let note = other
        .note
        .as_deref()
        .map(|n| format!(" ({n})"))
        .unwrap_or_default();
    format!(
        "{} {}: {value}{note}",
        result.op,
        describe_params(&result.params)
    )
}

/// The human table: the findings where the document has them, then one aligned row per result,
/// then how ops are counted, then warnings.
pub fn render_table(report: &Report) -> String {
    let right = |h| (h, Align::Right);
    let left = |h| (h, Align::Left);
    let access = any_access_time(report.results.iter());
    let mut columns: Vec<(&str, Align)> = HEADERS
        .iter()
        .map(|&h| match h {
            "case" | "unit" | "reference" => left(h),
            _ => right(h),
        })
        .collect();
    if access {
        columns.push(right(ACCESS_TIME_HEADER));
    }
    let mut table = Table::new(&columns);
    for result in &report.results {
        let mut cells = row(result).to_vec();
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
        out.push_str(&super::findings::render_text(findings));
        out.push('\n');
    }
    out.push_str(&table.render());
    latency_table(report, false, &mut out);
    footer(report, &mut out, printable);
    crate::text::terminal(&out)
}

const HEADERS: [&str; 9] = [
    "case",
    "value",
    "unit",
    "cv",
    "min … max",
    "peak",
    "eff",
    "reference",
    "ratio",
];

fn status_word(report: &Report) -> &'static str {
    match report.status {
        crate::result::RunStatus::Running => "running",
        crate::result::RunStatus::Complete => "complete",
        crate::result::RunStatus::Interrupted => "interrupted: results so far",
        crate::result::RunStatus::Failed => "failed: results so far",
    }
}

/// The same rows as a Markdown table, after the findings where the document has them.
pub fn render_markdown(report: &Report) -> String {
    let mut out = format!(
        "# peakbench {} on {}\n\n{} ({}), {}\n\n",
        markdown_text(&report.tool.version),
        markdown_text(&report.host.hostname),
        markdown_text(&report.host.cpu.model_name),
        markdown_text(&report.started_at),
        status_word(report)
    );
    if let Some(findings) = &report.findings {
        out.push_str(&super::findings::render_markdown(findings, "## Findings"));
        out.push('\n');
    }
    let access = any_access_time(report.results.iter());
    let mut headers = HEADERS.to_vec();
    if access {
        headers.push(ACCESS_TIME_HEADER);
    }
    out.push_str(&format!("| {} |\n", headers.join(" | ")));
    out.push_str(&format!("|{}\n", "---|".repeat(headers.len())));
    for result in &report.results {
        let mut cells = row(result).to_vec();
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

/// Headers of the tables users paste into their reports, one per subsystem.
pub const PASTE_HEADERS: [&str; 14] = [
    "workload",
    "parameters",
    "concurrency",
    "measured",
    "unit",
    "cv",
    "tool",
    "tool's value",
    "ours / tool",
    "peak",
    "efficiency",
    "tool's efficiency",
    "latency p50",
    "latency p99",
];

/// The parameters (by their [`Params::flat`] names, bookkeeping left out) every one of
/// `results` has with the same value, but concurrency, and their description: what a table
/// states once instead of on every row.
pub fn shared_params(results: &[&BenchResult]) -> (Vec<String>, String) {
    let flats: Vec<_> = results
        .iter()
        .map(|r| r.params.without_bookkeeping().flat())
        .collect();
    let Some(first) = flats.first().filter(|_| flats.len() > 1) else {
        return (Vec::new(), String::new());
    };
    let shared: std::collections::BTreeMap<String, serde_json::Value> = first
        .iter()
        .filter(|(k, v)| {
            !matches!(k.as_str(), "threads" | "streams")
                && flats.iter().all(|f| f.get(*k) == Some(v))
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let params = Params::from_flat(&shared);
    let mut described = vec![describe_params(&params)];
    described.extend(describe_other(&params));
    described.retain(|d| !d.is_empty());
    (shared.into_keys().collect(), described.join(" "))
}

/// A latency in nanoseconds in the unit that keeps it short.
fn format_ns(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{} ms", format_value(ns / 1e6))
    } else if ns >= 1e3 {
        format!("{} µs", format_value(ns / 1e3))
    } else {
        format!("{} ns", format_value(ns))
    }
}

/// One row of a pasted table: workload, the parameters but concurrency and bookkeeping (kept
/// in the JSON), concurrency (threads or streams), the measured value and its spread, the
/// tool's value and our ratio to it, the theoretical peak, both efficiencies, and the latency
/// percentiles where the case has them.
///
/// The parameters named in `hide` (by their [`Params::flat`] names) are left out, for a table
/// that states once what every row shares.
pub fn paste_row(result: &BenchResult, hide: &[String]) -> [String; 14] {
    let [_, value, unit, cv, _, peak, eff, _, ratio] = row(result);
    let p = &result.params;
    let concurrency = match (p.threads, p.streams) {
        (Some(t), Some(s)) => format!("{t} × {s} streams"),
        (Some(t), None) => t.to_string(),
        (None, Some(s)) => format!("{s} streams"),
        (None, None) => "-".into(),
    };
    let mut flat = p.without_bookkeeping().flat();
    flat.retain(|k, _| !hide.contains(k));
    let params = Params {
        threads: None,
        streams: None,
        ..Params::from_flat(&flat)
    };
    let mut described = vec![describe_params(&params)];
    described.extend(describe_other(&params));
    described.retain(|d| !d.is_empty());
    let reference = result.reference.as_ref();
    let dash = || "-".to_string();
    let tool_efficiency = reference
        .and_then(|r| Some(r.value? / result.peak.as_ref()?.value))
        .map(|e| format!("{:.1}%", e * 100.0))
        .unwrap_or_else(dash);
    let latency = |pick: fn(&crate::stats::LatencySummary) -> f64| {
        result
            .latency_ns
            .as_ref()
            .map(|l| format_ns(pick(l)))
            .unwrap_or_else(dash)
    };
    [
        result.op.clone(),
        described.join(" "),
        concurrency,
        value,
        unit,
        cv,
        reference.map(|r| r.tool.clone()).unwrap_or_else(dash),
        reference
            .map(|r| r.value.map(format_value).unwrap_or_else(|| "n/a".into()))
            .unwrap_or_else(dash),
        ratio,
        peak,
        eff,
        tool_efficiency,
        latency(|l| l.p50),
        latency(|l| l.p99),
    ]
}

/// The subsystems present in a report, in the order of their first result.
pub fn subsystems(report: &Report) -> Vec<crate::result::Subsystem> {
    let mut list = Vec::new();
    for r in &report.results {
        if !list.contains(&r.subsystem) {
            list.push(r.subsystem);
        }
    }
    list
}

/// The pasted tables in Markdown: a header, the findings where the document has them, one
/// table per subsystem, how work is counted and the warnings.
pub fn render_markdown_tables(report: &Report) -> String {
    let mut out = format!(
        "# peakbench {} on {}\n\n{} ({}), {}\n",
        report.tool.version,
        markdown_cell(&report.host.hostname),
        markdown_cell(&report.host.cpu.model_name),
        markdown_text(&report.started_at),
        status_word(report)
    );
    if let Some(findings) = &report.findings {
        out.push('\n');
        out.push_str(&super::findings::render_markdown(findings, "## Findings"));
    }
    for subsystem in subsystems(report) {
        out.push_str(&format!("\n## {}\n\n", subsystem.name()));
        let results: Vec<&BenchResult> = report
            .results
            .iter()
            .filter(|r| r.subsystem == subsystem)
            .collect();
        let (shared, described) = shared_params(&results);
        if !described.is_empty() {
            out.push_str(&format!("Every row: {}\n\n", markdown_cell(&described)));
        }
        let access = any_access_time(results.iter().copied());
        let (head, align) = if access {
            (
                format!("{} | {ACCESS_TIME_HEADER}", PASTE_HEADERS.join(" | ")),
                "--:|",
            )
        } else {
            (PASTE_HEADERS.join(" | "), "")
        };
        out.push_str(&format!("| {head} |\n"));
        out.push_str(&format!(
            "|---|---|--:|--:|---|--:|---|--:|--:|--:|--:|--:|--:|--:|{align}\n"
        ));
        for r in results {
            let mut cells: Vec<String> = paste_row(r, &shared)
                .iter()
                .map(|c| markdown_cell(c))
                .collect();
            if access {
                cells.push(access_time_cell(r));
            }
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
    }
    out.push_str(&counting_section(&report.results));
    let warnings: Vec<String> = all_warnings(report)
        .into_iter()
        .map(|w| format!("- {}", markdown_text(&w)))
        .collect();
    if !warnings.is_empty() {
        out.push_str(&format!("\n## Warnings\n\n{}\n", warnings.join("\n")));
    }
    out
}

/// The run's warnings, then each result's, prefixed with the case it belongs to.
pub fn all_warnings(report: &Report) -> Vec<String> {
    report
        .warnings
        .iter()
        .cloned()
        .chain(report.results.iter().flat_map(|r| {
            r.warnings.iter().map(move |w| {
                format!(
                    "{} {} {}: {w}",
                    r.subsystem.name(),
                    r.op,
                    describe_params(&r.params)
                )
            })
        }))
        .collect()
}

/// Several runs (two machines, or before and after a change) as one Markdown document: the
/// findings of each run that has them, then per subsystem one row per case, each run's measured value, spread, efficiency (and the tool's
/// ratio and the latency where any case has them) side by side, and for every run after the
/// first its change against the first with the verdict of `peakbench compare`. One run is
/// [`render_markdown_tables`].
pub fn render_markdown_runs(runs: &[(i64, &Report)]) -> String {
    if let [(_, report)] = runs {
        return render_markdown_tables(report);
    }
    let ids: Vec<String> = runs.iter().map(|(id, _)| id.to_string()).collect();
    let mut out = format!("# peakbench runs {}\n\n", ids.join(", "));
    out.push_str(
        "| run | host | CPU | started | peakbench | status |\n|--:|---|---|---|---|---|\n",
    );
    for (id, r) in runs {
        out.push_str(&format!(
            "| {id} | {} | {} | {} | {} | {} |\n",
            markdown_cell(&r.host.hostname),
            markdown_cell(&r.host.cpu.model_name),
            markdown_cell(&r.started_at),
            markdown_cell(&r.tool.version),
            status_word(r)
        ));
    }
    if runs.iter().any(|(_, r)| r.findings.is_some()) {
        out.push_str("\n## Findings\n");
        for (id, r) in runs {
            if let Some(findings) = &r.findings {
                let heading = format!(
                    "### run {id} ({})",
                    super::findings::markdown_text(&r.host.hostname)
                );
                out.push('\n');
                out.push_str(&super::findings::render_markdown(findings, &heading));
            }
        }
    }
    for subsystem in subsystems_of_runs(runs) {
        out.push_str(&format!("\n## {}\n\n", subsystem.name()));
        out.push_str(&runs_side_by_side(runs, subsystem));
    }
    out.push_str(&counting_section(
        runs.iter().flat_map(|(_, report)| &report.results),
    ));
    let warnings: Vec<String> = runs
        .iter()
        .flat_map(|(id, r)| {
            all_warnings(r)
                .into_iter()
                .map(move |w| format!("- run {id}: {}", markdown_text(&w)))
        })
        .collect();
    if !warnings.is_empty() {
        out.push_str(&format!("\n## Warnings\n\n{}\n", warnings.join("\n")));
    }
    out
}

/// Text as a Markdown table cell: `|` escaped, the ellipsis of a range as a dash.
/// A cell of a Markdown table: one line, `|` escaped, no raw HTML ([`markdown_text`]).
fn markdown_cell(text: &str) -> String {
    markdown_text(text).replace("…", "–")
}

/// The subsystems of several runs, in the order of their first result in the first run that has
/// them.
pub fn subsystems_of_runs(runs: &[(i64, &Report)]) -> Vec<crate::result::Subsystem> {
    let mut order = Vec::new();
    for (_, report) in runs {
        for s in subsystems(report) {
            if !order.contains(&s) {
                order.push(s);
            }
        }
    }
    order
}

/// Which of the optional columns a comparison table has for each run.
#[derive(Clone, Copy)]
struct RunColumns {
    /// Ours against the standard tool, where any case ran it.
    tool: bool,
    /// p50 and p99, where any case has latencies.
    latency: bool,
}

/// One subsystem's cases in Markdown, the runs side by side: what every row shares, then the
/// table with a row per case.
fn runs_side_by_side(runs: &[(i64, &Report)], subsystem: crate::result::Subsystem) -> String {
    let mut out = String::new();
    let all: Vec<&BenchResult> = runs
        .iter()
        .flat_map(|(_, r)| r.results.iter().filter(|x| x.subsystem == subsystem))
        .collect();
    let (shared, described) = shared_params(&all);
    if !described.is_empty() {
        out.push_str(&format!("Every row: {}\n\n", markdown_cell(&described)));
    }
    let columns = RunColumns {
        tool: all.iter().any(|r| r.reference.is_some()),
        latency: all.iter().any(|r| r.latency_ns.is_some()),
    };
    out.push_str(&side_by_side_header(runs, columns));
    let mut cases: Vec<&str> = Vec::new();
    for r in &all {
        if !cases.contains(&r.id.as_str()) {
            cases.push(&r.id);
        }
    }
    for case in cases {
        let found: Vec<Option<&BenchResult>> = runs
            .iter()
            .map(|(_, r)| r.results.iter().find(|x| x.id == case))
            .collect();
        let Some(cells) = side_by_side_row(&found, &shared, runs[0].0, columns) else {
            continue;
        };
        let cells: Vec<String> = cells.iter().map(|c| markdown_cell(c)).collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out
}

/// The header and alignment rows: the case's columns, then per run measured, cv, efficiency,
/// [ours / tool], [p50, p99], [against the first run].
fn side_by_side_header(runs: &[(i64, &Report)], columns: RunColumns) -> String {
    let first = runs[0].0;
    let mut headers = vec!["workload", "parameters", "concurrency", "unit"]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
    let mut align = vec!["---", "---", "--:", "---"];
    for (index, (id, _)) in runs.iter().enumerate() {
        headers.extend([
            format!("run {id}"),
            format!("run {id} cv"),
            format!("run {id} efficiency"),
        ]);
        align.extend(["--:", "--:", "--:"]);
        if columns.tool {
            headers.push(format!("run {id} ours / tool"));
            align.push("--:");
        }
        if columns.latency {
            headers.extend([format!("run {id} p50"), format!("run {id} p99")]);
            align.extend(["--:", "--:"]);
        }
        if index > 0 {
            headers.push(format!("run {id} against run {first}"));
            align.push("---");
        }
    }
    format!("| {} |\n|{}|\n", headers.join(" | "), align.join("|"))
}

/// The cells of one case, `found` its result in each run (run `first` the first); `None` when
/// no run has it.
fn side_by_side_row(
    found: &[Option<&BenchResult>],
    shared: &[String],
    first: i64,
    columns: RunColumns,
) -> Option<Vec<String>> {
    let model = found.iter().flatten().next()?;
    let row = paste_row(model, shared);
    let mut cells = vec![
        row[0].clone(),
        row[1].clone(),
        row[2].clone(),
        row[4].clone(),
    ];
    for (index, result) in found.iter().enumerate() {
        let own = result.map(|r| paste_row(r, shared));
        let pick = |i: usize| own.as_ref().map_or("-".to_string(), |c| c[i].clone());
        cells.extend([pick(3), pick(5), pick(10)]);
        if columns.tool {
            cells.push(pick(8));
        }
        if columns.latency {
            cells.extend([pick(12), pick(13)]);
        }
        if index > 0 {
            cells.push(match (found[0], result) {
                (Some(a), Some(b)) => super::change_cell(a, b),
                (None, Some(_)) => format!("not in run {first}"),
                _ => "-".into(),
            });
        }
    }
    Some(cells)
}

/// The "How work is counted" section: each op's counting rule once, in the order first met;
/// empty when there are no results.
fn counting_section<'a>(results: impl IntoIterator<Item = &'a BenchResult>) -> String {
    let mut counting: Vec<String> = Vec::new();
    for r in results {
        let note = format!("- {}", markdown_text(&format!("{}: {}", r.op, r.counting)));
        if !counting.contains(&note) {
            counting.push(note);
        }
    }
    if counting.is_empty() {
        return String::new();
    }
    format!("\n## How work is counted\n\n{}\n", counting.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offered_rate_reads_with_its_unit_in_tables_and_legends() {
        let mut p = Params {
            protocol: Some("udp".into()),
            message_bytes: Some(1000),
            ..Params::default()
        };
        p.other.insert("rate_bps".into(), 100_000_000u64.into());
        assert_eq!(describe_params(&p), "udp msg=1KB at 100 Mbit/s");
        assert!(
            describe_other(&p).is_empty(),
            "said once, by describe_params"
        );
    }

    #[test]
    fn a_link_of_the_matrix_names_its_peer_once() {
        let mut p = Params {
            protocol: Some("tcp".into()),
            message_bytes: Some(1),
            ..Params::default()
        };
        p.other.insert("peer".into(), "node-007".into());
        assert_eq!(describe_params(&p), "tcp msg=1B to node-007");
        assert!(describe_other(&p).is_empty(), "said once");
    }
}
