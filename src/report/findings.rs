//! The findings of a run where a user reads them: the section the text output, `peakbench
//! show` and `peakbench explain` print first, and the one the Markdown reports open with (the
//! HTML report's is in `html/findings.rs`, from the same pieces).
//!
//! Every string in a finding came from a document, which may have been written on another
//! machine or by hand: the text output passes each through [`printable`] (no terminal
//! sequence gets through), the Markdown through [`markdown_text`] (no cell break, no HTML).
//! Each verdict line is the one `findings` wrote (`Finding.line`); nothing here judges again.

use super::cells::markdown_text;
use crate::result::{Cause, Finding, Findings, Verdict};
use crate::text::printable;
use crate::units::format_value;

/// The verdicts a section lists finding by finding, in the order it lists them; the results at
/// their limit are only counted.
pub(crate) const SHOWN: [Verdict; 4] = [
    Verdict::AboveLimit,
    Verdict::Unstable,
    Verdict::Below,
    Verdict::Unknown,
];

pub(crate) use crate::result::NO_CAUSE;

/// The findings a section lists, grouped by verdict in the order of [`SHOWN`], each group in
/// the order of the results.
pub(crate) fn shown(findings: &Findings) -> Vec<&Finding> {
    SHOWN
        .iter()
        .flat_map(|v| findings.results.iter().filter(move |f| f.verdict == *v))
        .collect()
}

/// The longest row of unknown results the text lists one by one; a longer one lists its first
/// few and counts the rest (the JSON, the HTML and `explain --json` keep every one).
const UNKNOWN_ROW: usize = 6;

/// Whether a finding with this verdict is one that should have causes.
pub(crate) fn wants_causes(verdict: Verdict) -> bool {
    matches!(
        verdict,
        Verdict::Below | Verdict::Unstable | Verdict::AboveLimit
    )
}

/// The tally that ends a section: "12 results at their limit, 2 below, 1 unknown" (the
/// results at their limit always, the other verdicts where any result has them).
pub(crate) fn tally(findings: &Findings) -> String {
    let count = |v: Verdict| findings.results.iter().filter(|f| f.verdict == v).count();
    if findings.results.is_empty() {
        return "no result was judged".into();
    }
    let at = count(Verdict::AtLimit);
    let mut parts = vec![if at == 1 {
        "1 result at its limit".to_string()
    } else {
        format!("{at} results at their limit")
    }];
    for verdict in SHOWN {
        let n = count(verdict);
        if n > 0 {
            let word = match verdict {
                Verdict::AboveLimit if n == 1 => "above its limit",
                Verdict::AboveLimit => "above their limit",
                Verdict::Unstable => "unstable",
                Verdict::Below => "below",
                _ => "unknown",
            };
            parts.push(format!("{n} {word}"));
        }
    }
    parts.join(", ")
}

/// Whether the findings of a run belong to more than one host (a cluster run), so that each
/// finding names its host.
pub(crate) fn several_hosts(findings: &Findings) -> bool {
    findings
        .results
        .iter()
        .any(|f| f.host != findings.results[0].host)
}

/// The case as a section names it: its label, after its host where the run has several.
/// Unescaped: each format escapes it.
pub(crate) fn case_name(finding: &Finding, with_host: bool) -> String {
    if with_host {
        format!("{} {}", finding.host, finding.label)
    } else {
        finding.label.clone()
    }
}

/// A cause in one line, unescaped: kind, value and unit, what it does, the bound it puts on
/// the result (in `unit`, the result's), the share of the gap it explains.
/// "cpu-quota 0.5 CPU: the cgroup allows … (bound 45.6 GFLOP/s; explains 94 % of the gap)".
pub(crate) fn cause_line(cause: &Cause, unit: &str) -> String {
    let mut head = cause.kind.clone();
    if let Some(value) = cause.value {
        head.push(' ');
        head.push_str(&short_value(value));
        if !cause.unit.is_empty() {
            head.push(' ');
            head.push_str(&cause.unit);
        }
    }
    let mut notes = Vec::new();
    if let Some(bound) = cause.bound {
        notes.push(format!("bound {} {unit}", format_value(bound)));
    }
    if let Some(share) = cause.explains {
        notes.push(format!("explains {:.0} % of the gap", share * 100.0));
    }
    let notes = if notes.is_empty() {
        String::new()
    } else {
        format!(" ({})", notes.join("; "))
    };
    if cause.text.is_empty() {
        format!("{head}{notes}")
    } else {
        format!("{head}: {}{notes}", cause.text)
    }
}

/// A cause's value as people write it: three significant digits at most, no trailing zeros
/// (0.5 CPU, 150 Mbit/s).
pub(crate) fn short_value(value: f64) -> String {
    let text = format_value(value);
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// A ratio to an expectation: two decimals, three under 0.1 (0.018 of a link is not 0.02).
pub(crate) fn ratio(value: f64) -> String {
    if value.abs() < 0.1 && value != 0.0 {
        format!("{value:.3}")
    } else {
        format!("{value:.2}")
    }
}

/// What was read for a cause, unescaped: "source = value; source = value".
pub(crate) fn evidence_line(cause: &Cause) -> String {
    cause
        .evidence
        .iter()
        .map(|e| format!("{} = {}", e.source, e.value))
        .collect::<Vec<_>>()
        .join("; ")
}

/// What a finding was judged against, unescaped, one entry per expectation: "physics 82.2
/// GFLOP/s, ratio 0.46", with the test where the past decided.
pub(crate) fn expectation_lines(finding: &Finding) -> Vec<String> {
    finding
        .expectations
        .iter()
        .map(|e| {
            format!(
                "{} {} {}, ratio {}{}",
                e.against.name(),
                format_value(e.expected),
                finding.unit,
                ratio(e.ratio),
                e.test.as_ref().map(test_note).unwrap_or_default()
            )
        })
        .collect()
}

/// The statistical test behind a verdict against the past, unescaped: ", mann-whitney-u p =
/// 0.029 (3 against 12 repetitions)".
pub(crate) fn test_note(test: &crate::result::Test) -> String {
    format!(
        ", {} p = {} ({} against {} repetitions)",
        test.name,
        format_value(test.p),
        test.n[0],
        test.n[1]
    )
}

/// The findings as text: the summary (one line per subsystem), what concerns the run as a
/// whole, every result not at its limit grouped by verdict with its causes (each with its
/// evidence and remedy) or what is missing to judge it, and the tally. Every string from the
/// document is made [`printable`].
pub(crate) fn render_text(findings: &Findings) -> String {
    let mut out = String::from("Findings:\n");
    for line in &findings.summary {
        out.push_str(&format!("  {}\n", printable(line)));
    }
    for cause in &findings.run {
        out.push_str(&format!(
            "  the run: {}\n",
            printable(&cause_line(cause, ""))
        ));
        cause_details(cause, "    ", &mut out);
    }
    let listed = shown(findings);
    if !listed.is_empty() && (!findings.summary.is_empty() || !findings.run.is_empty()) {
        out.push('\n');
    }
    let with_host = several_hosts(findings);
    // Results in a row that lack the same thing (the 90 results of a roofline without a
    // history) say it once, after the row; a row of unknown ones is cut to its first few.
    let mut i = 0;
    while i < listed.len() {
        let finding = listed[i];
        let row = listed[i..]
            .iter()
            .take_while(|f| {
                f.verdict == finding.verdict
                    && f.causes.is_empty()
                    && finding.causes.is_empty()
                    && f.missing == finding.missing
            })
            .count();
        if row > 1 && !finding.missing.is_empty() {
            text_row(&listed[i..i + row], with_host, &mut out);
            i += row;
        } else {
            text_finding(finding, with_host, &mut out);
            i += 1;
        }
    }
    out.push_str(&format!("  {}\n", tally(findings)));
    crate::text::terminal(&out)
}

/// A row of findings with the same verdict that lack the same things: each line, then what
/// they lack, once; a row of unknown ones is cut to its first few.
fn text_row(row: &[&Finding], with_host: bool, out: &mut String) {
    let first = row[0];
    let shown_rows = if first.verdict == Verdict::Unknown && row.len() > UNKNOWN_ROW {
        UNKNOWN_ROW - 1
    } else {
        row.len()
    };
    for f in &row[..shown_rows] {
        out.push_str(&format!(
            "  {:<11} {}\n",
            f.verdict.name(),
            printable(&finding_line(f, with_host))
        ));
        if wants_causes(f.verdict) {
            out.push_str(&format!("    {NO_CAUSE}\n"));
        }
    }
    if shown_rows < row.len() {
        out.push_str(&format!(
            "  {:<11} … and {} more that lack the same\n",
            first.verdict.name(),
            row.len() - shown_rows
        ));
    }
    out.push_str(&format!(
        "    to judge these {}: {}\n",
        row.len(),
        printable(&first.missing.join("; "))
    ));
}

/// One finding: its line, its causes with their evidence, and what it lacks.
fn text_finding(finding: &Finding, with_host: bool, out: &mut String) {
    let line = finding_line(finding, with_host);
    out.push_str(&format!(
        "  {:<11} {}\n",
        finding.verdict.name(),
        printable(&line)
    ));
    for cause in &finding.causes {
        out.push_str(&format!(
            "    {}\n",
            printable(&cause_line(cause, &finding.unit))
        ));
        cause_details(cause, "      ", out);
    }
    if finding.causes.is_empty() && wants_causes(finding.verdict) {
        out.push_str(&format!("    {NO_CAUSE}\n"));
    }
    if !finding.missing.is_empty() {
        out.push_str(&format!(
            "    to judge it: {}\n",
            printable(&finding.missing.join("; "))
        ));
    }
}

/// A finding's line in the section: the case and its value, then its [`reason`], after its
/// host where the run has several.
fn finding_line(finding: &Finding, with_host: bool) -> String {
    let reason = reason(finding);
    let case = format!(
        "{} {} {}",
        finding.label,
        format_value(finding.value),
        finding.unit
    );
    let line = if reason.is_empty() {
        case
    } else {
        format!("{case}: {reason}")
    };
    if with_host {
        format!("{}: {line}", finding.host)
    } else {
        line
    }
}

/// The verdict's reason as `findings` wrote it in the finding's line, without the verdict word
/// (a section prints it in its own column) and without the first cause (printed on its own)
/// or the missing things (listed after the row: "to judge it: …"); "the repetitions vary by
/// 12.9 % (CV over 10 %): 38.2, 40.8, 48.8" of an unstable result.
pub(crate) fn reason(finding: &Finding) -> &str {
    let line = finding.line.trim();
    let line = line
        .strip_prefix(finding.verdict.name())
        .filter(|rest| rest.starts_with(' ') || rest.starts_with(':'))
        .map(|rest| rest.trim_start_matches(':').trim_start())
        .unwrap_or(line);
    // The reason ends where `findings` appended the first cause, or said it found none (the
    // first "; " in a document whose cause reads otherwise).
    let cut = |at: Option<usize>| at.or_else(|| line.find("; ")).map(|at| &line[..at]);
    match finding.causes.first() {
        Some(cause) => cut(line.find(&format!("; {}", cause.text))),
        None if wants_causes(finding.verdict) => cut(line.rfind(&format!("; {NO_CAUSE}"))),
        None => line.strip_suffix(&crate::result::missing_kinds(&finding.missing)),
    }
    .unwrap_or(line)
}

/// A cause's evidence and remedy, each on its own line at `indent`.
fn cause_details(cause: &Cause, indent: &str, out: &mut String) {
    if !cause.evidence.is_empty() {
        out.push_str(&format!(
            "{indent}evidence: {}\n",
            printable(&evidence_line(cause))
        ));
    }
    if !cause.remedy.is_empty() {
        out.push_str(&format!("{indent}remedy: {}\n", printable(&cause.remedy)));
    }
}

/// The findings in Markdown under `heading` (e.g. `## Findings`): the summary as a list, what
/// concerns the run as a whole, then a table of every result not at its limit (verdict, case,
/// value, what it was judged against, the causes, the remedies) and the tally.
pub(crate) fn render_markdown(findings: &Findings, heading: &str) -> String {
    let mut out = format!("{heading}\n\n");
    let mut items: Vec<String> = findings.summary.iter().map(|s| markdown_text(s)).collect();
    for cause in &findings.run {
        let mut item = format!("the run: {}", markdown_text(&cause_line(cause, "")));
        if !cause.remedy.is_empty() {
            item.push_str(&format!(" — remedy: {}", markdown_text(&cause.remedy)));
        }
        items.push(item);
    }
    if !items.is_empty() {
        for item in items {
            out.push_str(&format!("- {item}\n"));
        }
        out.push('\n');
    }
    let listed = shown(findings);
    if !listed.is_empty() {
        out.push_str(
            "| verdict | case | value | judged against | causes | remedy |\n|---|---|--:|---|---|---|\n",
        );
        let with_host = several_hosts(findings);
        for finding in listed {
            out.push_str(&markdown_row(finding, with_host));
        }
        out.push('\n');
    }
    out.push_str(&format!("{}.\n", tally(findings)));
    out
}

/// One finding as a row of the Markdown table.
fn markdown_row(finding: &Finding, with_host: bool) -> String {
    let dash = || "-".to_string();
    let or_dash = |list: Vec<String>| {
        if list.is_empty() {
            dash()
        } else {
            list.join("; ")
        }
    };
    let causes = if finding.causes.is_empty() && wants_causes(finding.verdict) {
        NO_CAUSE.to_string()
    } else {
        or_dash(
            finding
                .causes
                .iter()
                .map(|c| markdown_text(&cause_brief(c)))
                .collect(),
        )
    };
    let mut remedies: Vec<String> = finding
        .causes
        .iter()
        .filter(|c| !c.remedy.is_empty())
        .map(|c| markdown_text(&c.remedy))
        .collect();
    if !finding.missing.is_empty() {
        remedies.push(format!(
            "to judge it: {}",
            markdown_text(&finding.missing.join("; "))
        ));
    }
    let cells = [
        finding.verdict.name().to_string(),
        markdown_text(&case_name(finding, with_host)),
        markdown_text(&format!("{} {}", format_value(finding.value), finding.unit)),
        or_dash(
            expectation_lines(finding)
                .iter()
                .map(|e| markdown_text(e))
                .collect(),
        ),
        causes,
        or_dash(remedies),
    ];
    format!("| {} |\n", cells.join(" | "))
}

/// A cause in a table cell, unescaped: kind, value and unit, the share of the gap it explains.
pub(crate) fn cause_brief(cause: &Cause) -> String {
    let mut text = cause.kind.clone();
    if let Some(value) = cause.value {
        text.push_str(&format!(" {}", short_value(value)));
        if !cause.unit.is_empty() {
            text.push_str(&format!(" {}", cause.unit));
        }
    }
    if let Some(share) = cause.explains {
        text.push_str(&format!(" (explains {:.0} %)", share * 100.0));
    }
    text
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::report::{Exporter, Markdown, MarkdownTables, TextReport};
    use crate::result::{Against, Evidence, Expectation, Subsystem};

    /// What `exporter` writes for `report`, as text.
    fn exported(exporter: &dyn Exporter, report: &crate::result::Report) -> String {
        String::from_utf8(exporter.export(report)).expect("exporters write UTF-8")
    }

    fn finding(verdict: Verdict, label: &str) -> Finding {
        Finding {
            id: label.replace(' ', "-"),
            host: "node1".into(),
            subsystem: Subsystem::Cpu,
            label: label.into(),
            value: 38.1,
            unit: "GFLOP/s".into(),
            verdict,
            line: format!("{}: 0.42 of physics (peak 91.3 × 0.90)", verdict.name()),
            expectations: vec![Expectation {
                against: Against::Physics,
                verdict,
                expected: 82.2,
                ratio: 0.46,
                class: Some("fma".into()),
                band: Some([0.9, 1.0]),
                source: "peak 91.3 GFLOP/s × 0.90".into(),
                test: None,
            }],
            causes: Vec::new(),
            missing: Vec::new(),
        }
    }

    fn quota() -> Cause {
        Cause {
            kind: "cpu-quota".into(),
            value: Some(0.5),
            unit: "CPU".into(),
            text: "the cgroup allows 0.5 CPU for 2 threads".into(),
            evidence: vec![
                Evidence::new("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "50000"),
                Evidence::new("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000"),
            ],
            bound: Some(45.6),
            explains: Some(0.94),
            remedy: "run outside the quota".into(),
        }
    }

    fn findings() -> Findings {
        let mut below = finding(Verdict::Below, "flops f64 avx2 fma 2T");
        below.causes.push(quota());
        let mut unknown = finding(Verdict::Unknown, "read bs=1MB 1T");
        unknown.expectations.clear();
        unknown
            .missing
            .push("the DIMM table: give --mem-channels".into());
        Findings {
            summary: vec!["cpu: 1 of 3 below (cpu-quota 0.5 CPU)".into()],
            results: vec![
                finding(Verdict::AtLimit, "flops f32 avx2 fma 1T"),
                unknown,
                below,
                finding(Verdict::Unstable, "iops randread"),
                finding(Verdict::AboveLimit, "read bs=8KB"),
            ],
            run: Vec::new(),
            judged_in_s: 0.01,
        }
    }

    #[test]
    fn the_text_lists_what_is_not_at_its_limit_by_verdict_with_causes() {
        let text = render_text(&findings());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "Findings:");
        assert_eq!(lines[1], "  cpu: 1 of 3 below (cpu-quota 0.5 CPU)");
        let order: Vec<&str> = lines
            .iter()
            .filter_map(|l| l.strip_prefix("  ")?.split(' ').next())
            .filter(|w| {
                <Verdict as crate::names::Named>::ALL
                    .iter()
                    .any(|v| v.name() == *w)
            })
            .collect();
        assert_eq!(order, ["above-limit", "unstable", "below", "unknown"]);
        let below = lines.iter().position(|l| l.contains("flops f64")).unwrap();
        assert_eq!(
            lines[below],
            "  below       flops f64 avx2 fma 2T 38.1 GFLOP/s: 0.42 of physics (peak 91.3 × 0.90)"
        );
        assert_eq!(
            lines[below + 1],
            "    cpu-quota 0.5 CPU: the cgroup allows 0.5 CPU for 2 threads (bound 45.6 GFLOP/s; explains 94 % of the gap)"
        );
        assert_eq!(
            lines[below + 2],
            "      evidence: /sys/fs/cgroup/cpu/cpu.cfs_quota_us = 50000; /sys/fs/cgroup/cpu/cpu.cfs_period_us = 100000"
        );
        assert_eq!(lines[below + 3], "      remedy: run outside the quota");
        assert_eq!(text.matches(NO_CAUSE).count(), 2, "{text}");
        assert!(
            text.contains("    to judge it: the DIMM table: give --mem-channels\n"),
            "{text}"
        );
        assert!(!text.contains("flops f32"), "{text}");
        assert_eq!(
            lines.last().unwrap(),
            &"  1 result at its limit, 1 above its limit, 1 unstable, 1 below, 1 unknown"
        );
    }

    #[test]
    fn a_row_of_results_lacking_the_same_says_it_once() {
        let unknown = |i: usize| {
            let mut f = finding(Verdict::Unknown, &format!("roof L{i} read 1T"));
            f.missing.push("the past: no earlier run".into());
            f
        };
        let mut f = findings();
        f.results = (0..10).map(unknown).collect();
        let text = render_text(&f);
        assert_eq!(
            text.matches("the past: no earlier run").count(),
            1,
            "{text}"
        );
        assert!(
            text.contains("    to judge these 10: the past: no earlier run\n"),
            "{text}"
        );
        assert_eq!(
            text.matches("\n  unknown     roof L").count(),
            UNKNOWN_ROW - 1
        );
        assert!(text.contains("  unknown     … and 5 more that lack the same\n"));
        assert!(text.ends_with("10 unknown\n"), "{text}");
        // A short row lists every result; a different lack starts a row of its own.
        f.results.truncate(3);
        f.results[2].missing = vec!["--reference".into()];
        let text = render_text(&f);
        assert_eq!(text.matches("\n  unknown     roof L").count(), 3, "{text}");
        assert!(text.contains("    to judge these 2: the past: no earlier run\n"));
        assert!(text.contains("    to judge it: --reference\n"), "{text}");
    }

    #[test]
    fn a_line_that_starts_with_its_verdict_does_not_say_it_twice() {
        let mut f = findings();
        f.results[2].line = "below: 0.40 of the peak; the quota".into();
        let text = render_text(&f);
        assert!(
            text.contains("\n  below       flops f64 avx2 fma 2T 38.1 GFLOP/s: 0.40 of the peak\n"),
            "{text}"
        );
    }

    #[test]
    fn text_from_the_document_reaches_the_terminal_escaped() {
        let mut f = findings();
        f.results[2].causes[0].evidence[0].value = "\u{1b}]0;owned\u{7}stress".into();
        f.results[2].causes[0].text = "two\nlines".into();
        let text = render_text(&f);
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{text}"
        );
        assert!(text.contains("\\u{1b}]0;owned\\u{7}stress"), "{text}");
        assert!(text.contains("two\\nlines"), "{text}");
    }

    #[test]
    fn a_cluster_runs_findings_name_their_host() {
        let mut f = findings();
        f.results[3].host = "node2".into();
        let text = render_text(&f);
        assert!(
            text.contains("  unstable    node2: iops randread"),
            "{text}"
        );
        let markdown = render_markdown(&f, "## Findings");
        assert!(markdown.contains("| node2 iops randread |"), "{markdown}");
    }

    #[test]
    fn markdown_cells_carry_no_cell_break_and_no_html() {
        let mut f = findings();
        f.results[2].causes[0].kind = "a|b<script>alert(1)</script>&\\|".into();
        f.results[2].causes[0].remedy = "one\ntwo".into();
        let markdown = render_markdown(&f, "## Findings");
        assert!(markdown.starts_with("## Findings\n\n- cpu: 1 of 3 below"));
        let row = markdown
            .lines()
            .find(|l| l.starts_with("| below |"))
            .unwrap();
        assert!(
            row.contains("a\\|b&lt;script&gt;alert(1)&lt;/script&gt;&amp;\\\\\\| 0.5 CPU"),
            "{row}"
        );
        assert!(row.contains("| one two |"), "{row}");
        // Six cells: seven unescaped bars.
        let bars = row.replace("\\\\", "").replace("\\|", "");
        assert_eq!(bars.matches('|').count(), 7, "{row}");
        assert!(
            row.contains("| physics 82.2 GFLOP/s, ratio 0.46 |"),
            "{row}"
        );
        assert!(markdown.contains(&format!("| unstable | iops randread | 38.1 GFLOP/s | physics 82.2 GFLOP/s, ratio 0.46 | {NO_CAUSE} | - |")), "{markdown}");
        assert!(
            markdown.contains("| to judge it: the DIMM table: give --mem-channels |"),
            "{markdown}"
        );
    }

    /// A real run's document with hand-made findings of every verdict
    /// (tests/fixtures/make_findings.py).
    pub(crate) fn fixture() -> crate::result::Report {
        serde_json::from_str(include_str!("../../tests/fixtures/findings.json"))
            .expect("the fixture is a results document")
    }

    /// The fixture with a cell break and a script planted in a cause's text and a terminal
    /// sequence in its evidence, as a document from elsewhere may carry.
    pub(crate) fn planted() -> crate::result::Report {
        let mut report = fixture();
        let findings = report.findings.as_mut().unwrap();
        let quota = findings
            .results
            .iter_mut()
            .find(|f| f.causes.iter().any(|c| c.kind == "cpu-quota"))
            .unwrap();
        quota.causes[0].kind = "cpu|quota<script>alert(1)</script>".into();
        quota.causes[0].evidence[0].value = "50000\u{1b}[2J".into();
        report
    }

    #[test]
    fn the_text_output_opens_with_the_findings_and_names_each_cause_with_its_value() {
        let text = exported(&TextReport, &fixture());
        let findings = text.find("\nFindings:\n").expect("a findings section");
        let table = text.find("\ncase ").expect("the results table");
        assert!(findings < table, "{text}");
        for cause in [
            "    cpu-quota 0.5 CPU: ",
            "    qdisc 150 Mbit/s: ",
            "    other-processes 0.8 CPU: ",
        ] {
            assert!(text.contains(cause), "no {cause:?} in {text}");
        }
        assert!(text.contains("explains 99 % of the gap"), "{text}");
        assert!(text.contains(&format!("    {NO_CAUSE}\n")), "{text}");
        assert!(text.contains("    to judge it: the DRAM peak"), "{text}");
        assert!(
            text.contains(
                "  1 result at its limit, 1 above its limit, 1 unstable, 3 below, 1 unknown\n"
            ),
            "{text}"
        );
        let planted = exported(&TextReport, &planted());
        assert!(!planted.contains('\u{1b}'), "{planted}");
        assert!(planted.contains("50000\\u{1b}[2J"), "{planted}");
    }

    #[test]
    fn the_markdown_reports_open_with_the_findings_escaped() {
        let report = planted();
        for markdown in [
            exported(&Markdown, &report),
            exported(&MarkdownTables, &report),
        ] {
            let findings = markdown
                .find("\n## Findings\n")
                .expect("a findings section");
            let table = markdown
                .find("\n| workload |")
                .or_else(|| markdown.find("\n| case |"))
                .expect("a results table");
            assert!(findings < table, "{markdown}");
            assert!(!markdown.contains("<script>"), "{markdown}");
            assert!(
                markdown.contains(
                    "cpu\\|quota&lt;script&gt;alert(1)&lt;/script&gt; 0.5 CPU (explains 99 %)"
                ),
                "{markdown}"
            );
            let row = markdown
                .lines()
                .find(|l| l.contains("quota&lt;script"))
                .unwrap();
            assert_eq!(row.replace("\\|", "").matches('|').count(), 7, "{row}");
        }
    }

    #[test]
    fn several_runs_in_markdown_have_their_findings_each() {
        let with = fixture();
        let mut without = fixture();
        without.findings = None;
        let runs = MarkdownTables.export_runs(&[(3, &with), (4, &without)]);
        let markdown = String::from_utf8(runs.unwrap()).unwrap();
        assert_eq!(markdown.matches("\n## Findings\n").count(), 1, "{markdown}");
        assert!(
            markdown.contains("\n### run 3 (fixture-host)\n"),
            "{markdown}"
        );
        assert!(!markdown.contains("### run 4"), "{markdown}");
    }

    #[test]
    fn a_document_without_findings_shows_no_findings_section() {
        let mut report = fixture();
        report.findings = None;
        for exporter in [&TextReport as &dyn Exporter, &Markdown, &MarkdownTables] {
            let text = exported(exporter, &report);
            assert!(!text.contains("Findings"), "{text}");
        }
    }

    #[test]
    fn nothing_judged_says_so() {
        let text = render_text(&Findings::default());
        assert_eq!(text, "Findings:\n  no result was judged\n");
    }
}
