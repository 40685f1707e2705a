//! The tables users paste into their reports, in Markdown ([`MarkdownTables`], `peakbench
//! report --markdown`): a header, the findings where the document has them, one table per
//! subsystem with what its rows share said once, how work is counted and the warnings. Several
//! runs (two machines, before and after a change) are one document, their columns side by side
//! with each later run's change against the first.

use super::Exporter;
use super::cells::{
    ACCESS_TIME_HEADER, PASTE_HEADERS, access_time_cell, all_warnings, any_access_time,
    change_cell, markdown_cell, markdown_text, paste_row, shared_params, status_word, subsystems,
    subsystems_of_runs,
};
use super::findings;
use crate::result::{BenchResult, Report};

/// The pasted tables in Markdown: a header, the findings where the document has them, one
/// table per subsystem, how work is counted and the warnings.
pub(super) fn render_markdown_tables(report: &Report) -> String {
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
        out.push_str(&findings::render_markdown(findings, "## Findings"));
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

/// Several runs (two machines, or before and after a change) as one Markdown document: the
/// findings of each run that has them, then per subsystem one row per case, each run's measured value, spread, efficiency (and the tool's
/// ratio and the latency where any case has them) side by side, and for every run after the
/// first its change against the first with the verdict of `peakbench compare`. One run is
/// [`render_markdown_tables`].
pub(super) fn render_markdown_runs(runs: &[(i64, &Report)]) -> String {
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
                let heading = format!("### run {id} ({})", markdown_text(&r.host.hostname));
                out.push('\n');
                out.push_str(&findings::render_markdown(findings, &heading));
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
                (Some(a), Some(b)) => change_cell(a, b),
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

/// The tables to paste, of one run or of several side by side: `peakbench report --markdown`.
#[derive(Debug)]
pub(crate) struct MarkdownTables;

impl Exporter for MarkdownTables {
    fn export(&self, report: &Report) -> Vec<u8> {
        render_markdown_tables(report).into_bytes()
    }

    fn export_runs(&self, runs: &[(i64, &Report)]) -> Option<Vec<u8>> {
        Some(render_markdown_runs(runs).into_bytes())
    }
}
