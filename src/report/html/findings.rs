//! The report's first section: the findings of each run that has them (the summary lines, what
//! concerns the run as a whole, a table of every result not at its limit with its verdict as a
//! coloured badge, what it was judged against and its causes, each cause's evidence and remedy
//! folded under it, then the results at their limit folded). Nothing is written for a run
//! without findings. Every string from the document is escaped.

use std::fmt::Write;

use crate::report::cells::escape;
use crate::report::findings::{
    NO_CAUSE, case_name, cause_line, ratio, reason, several_hosts, shown, tally, test_note,
    wants_causes,
};
use crate::result::{Cause, Finding, Findings, Report, Verdict};
use crate::units::format_value;

/// The badges' colours: white text on each is at least 4.5:1 (WCAG AA).
pub(super) const STYLE: &str = ".verdict{display:inline-block;padding:.05em .5em;border-radius:.7em;color:#fff;font-weight:600;font-size:.9em;white-space:nowrap}\
.verdict.at-limit{background:#1a7f37}.verdict.below{background:#b35900}.verdict.above-limit{background:#c62828}\
.verdict.unstable{background:#6f42c1}.verdict.unknown{background:#5f6368}\
table.findings td{font-size:.95em}table.findings td.n{white-space:nowrap}.cause{margin:.1em 0 .4em}details.cause summary{font-weight:normal}details.cause ul{margin:.2em 0;padding-left:1.4em}details.cause p{margin:.2em 0}\
.source{color:#555;font-size:.9em}details.source summary{cursor:pointer;font-weight:normal}ul.notes{color:#555;font-size:.85em;margin:.3em 0 1em;padding-left:.5em;list-style:none}span.note{color:#555;white-space:nowrap}ul.findings{margin:.4em 0}p.tally{font-weight:600}";

/// The findings section of `runs`, under one heading, a sub-heading per run where there are
/// several; nothing where no run has findings.
pub(super) fn section(out: &mut String, runs: &[(i64, &Report)]) {
    let judged: Vec<(i64, &Report, &Findings)> = runs
        .iter()
        .filter_map(|(id, r)| Some((*id, *r, r.findings.as_ref()?)))
        .collect();
    if judged.is_empty() {
        return;
    }
    out.push_str("<section class=\"findings\">\n<h2 id=\"findings\">Findings</h2>\n");
    for (id, report, findings) in judged {
        if runs.len() > 1 {
            let _ = writeln!(out, "<h3>Run {id} ({})</h3>", escape(&report.host.hostname));
        }
        run_findings(out, findings);
    }
    out.push_str("</section>\n");
}

fn run_findings(out: &mut String, findings: &Findings) {
    if !findings.summary.is_empty() {
        out.push_str("<ul class=\"findings\">");
        for line in &findings.summary {
            let _ = write!(out, "<li>{}</li>", escape(line));
        }
        out.push_str("</ul>\n");
    }
    if !findings.run.is_empty() {
        out.push_str("<p>The run as a whole:</p><ul class=\"findings\">");
        for cause in &findings.run {
            let _ = write!(out, "<li>{}</li>", cause_details(cause, ""));
        }
        out.push_str("</ul>\n");
    }
    let with_host = several_hosts(findings);
    let listed = shown(findings);
    if !listed.is_empty() {
        table(out, &listed, with_host, true);
    }
    let at_limit: Vec<&Finding> = findings
        .results
        .iter()
        .filter(|f| f.verdict == Verdict::AtLimit)
        .collect();
    if !at_limit.is_empty() {
        let _ = write!(
            out,
            "<details><summary>At their limit ({})</summary>",
            at_limit.len()
        );
        table(out, &at_limit, with_host, false);
        out.push_str("</details>\n");
    }
    let _ = writeln!(out, "<p class=\"tally\">{}</p>", escape(&tally(findings)));
}

/// A table of findings: verdict, case, value, what it was judged against, and (`causes`) the
/// causes or what is missing. Rows in a row that lack the same thing and have no cause share
/// one cell that says it once ("to judge these N: …"), as the text does: a 100-host report
/// repeated one long text in every row of its matrix's links.
fn table(out: &mut String, list: &[&Finding], with_host: bool, causes: bool) {
    let notes = shared_notes(list);
    out.push_str("<div class=\"wide\"><table class=\"findings\"><tr><th>verdict</th><th>case</th><th>value</th><th>judged against</th>");
    if causes {
        out.push_str("<th>causes</th>");
    }
    out.push_str("</tr>\n");
    // Rows still covered by a cause cell that spans from a row above.
    let mut spanned = 0;
    for (i, finding) in list.iter().enumerate() {
        let verdict = finding.verdict.name();
        let _ = write!(
            out,
            "<tr><td><span class=\"verdict {verdict}\">{verdict}</span></td><td>{}</td><td class=\"n\">{} {}</td><td>{}</td>",
            escape(&case_name(finding, with_host)),
            format_value(finding.value),
            escape(&finding.unit),
            against(finding, &notes)
        );
        if causes {
            if spanned > 0 {
                spanned -= 1;
            } else {
                let rows = lacking_the_same(&list[i..]);
                if rows > 1 {
                    let _ = write!(
                        out,
                        "<td rowspan=\"{rows}\">{}</td>",
                        causes_cell(finding, rows)
                    );
                    spanned = rows - 1;
                } else {
                    let _ = write!(out, "<td>{}</td>", causes_cell(finding, 1));
                }
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table></div>\n");
    if !notes.is_empty() {
        out.push_str("<ul class=\"notes\">");
        for (i, note) in notes.iter().enumerate() {
            let _ = write!(out, "<li>[{}] {}</li>", i + 1, escape(note));
        }
        out.push_str("</ul>\n");
    }
}

/// Below this many characters, a parenthesis is left where it is.
const NOTE_MIN: usize = 40;

/// The explanations the table's "judged against" texts repeat: every innermost parenthesis of
/// at least [`NOTE_MIN`] characters that two or more of them hold (where a clock or a pipe
/// count came from, what a class's band means), in the order they first appear. Each is said
/// once, in a numbered list under the table, and its place in the texts holds its number:
/// the peak sources of a 12-kernel run repeated the same 900 characters in every row.
fn shared_notes(list: &[&Finding]) -> Vec<String> {
    let mut seen: Vec<(String, usize)> = Vec::new();
    for e in list.iter().flat_map(|f| &f.expectations) {
        let mut in_this: Vec<&str> = Vec::new();
        for (start, end) in innermost_parentheses(&e.source) {
            let text = &e.source[start + 1..end];
            if text.chars().count() < NOTE_MIN || in_this.contains(&text) {
                continue;
            }
            in_this.push(text);
            match seen.iter_mut().find(|(t, _)| t == text) {
                Some((_, count)) => *count += 1,
                None => seen.push((text.to_string(), 1)),
            }
        }
    }
    seen.into_iter()
        .filter(|(_, count)| *count > 1)
        .map(|(text, _)| text)
        .collect()
}

/// The byte ranges (from the `(` to its `)`) of the parentheses of `text` that hold no other.
fn innermost_parentheses(text: &str) -> Vec<(usize, usize)> {
    let mut open: Vec<(usize, bool)> = Vec::new();
    let mut found = Vec::new();
    for (at, c) in text.char_indices() {
        match c {
            '(' => {
                if let Some(outer) = open.last_mut() {
                    outer.1 = true;
                }
                open.push((at, false));
            }
            ')' => {
                if let Some((start, nested)) = open.pop()
                    && !nested
                {
                    found.push((start, at));
                }
            }
            _ => {}
        }
    }
    found.sort_unstable();
    found
}

/// `source` escaped, each parenthesis that is one of `notes` replaced by its number ("[2]").
fn with_notes(source: &str, notes: &[String]) -> String {
    let mut html = String::new();
    let mut from = 0;
    for (start, end) in innermost_parentheses(source) {
        let text = &source[start + 1..end];
        if let Some(i) = notes.iter().position(|n| n == text) {
            html.push_str(&escape(&source[from..start]));
            let _ = write!(html, "<span class=\"note\">[{}]</span>", i + 1);
            from = end + 1;
        }
    }
    html.push_str(&escape(&source[from..]));
    html
}

/// How many characters of `source` the cell shows, each parenthesis that is one of `notes`
/// counted as its number ("[2]").
fn shown_chars(source: &str, notes: &[String]) -> usize {
    innermost_parentheses(source)
        .into_iter()
        .filter(|&(start, end)| notes.iter().any(|n| *n == source[start + 1..end]))
        .fold(source.chars().count(), |count, (start, end)| {
            count - source[start..=end].chars().count() + 3
        })
}

/// Above this many characters, an expectation's source is folded under its first words.
const SOURCE_FOLD: usize = 100;

/// What an unstable result's verdict says (its repetitions' spread), then each expectation:
/// what it is, the value expected, the ratio, and its source below (the parentheses that are
/// `notes` by their numbers; a long one folded under the words before its first parenthesis,
/// "the peak 205 GIOP/s").
fn against(finding: &Finding, notes: &[String]) -> String {
    let mut cell = Vec::new();
    let spread = reason(finding);
    if finding.verdict == Verdict::Unstable && !spread.is_empty() {
        cell.push(escape(spread));
    }
    cell.extend(finding.expectations.iter().map(|e| {
        let band = match e.band {
            Some([lo, hi]) => format!(", band {lo:.2}–{hi:.2} of the peak"),
            None => String::new(),
        };
        let class = e
            .class
            .as_deref()
            .map(|c| format!(" ({})", escape(c)))
            .unwrap_or_default();
        let test = e.test.as_ref().map(test_note).unwrap_or_default();
        let source = format!("{}{}", with_notes(&e.source, notes), escape(&band));
        let first_words = e.source.split(" (").next().unwrap_or_default();
        let first_words = first_words.split("; ").next().unwrap_or_default().trim();
        let source = if shown_chars(&e.source, notes) > SOURCE_FOLD && !first_words.is_empty() {
            format!(
                "<details class=\"source\"><summary>{}</summary>{source}</details>",
                escape(first_words)
            )
        } else {
            format!("<br><span class=\"source\">{source}</span>")
        };
        format!(
            "<b>{}</b>{class}: {} {}, ratio {}{}{source}",
            e.against.name(),
            format_value(e.expected),
            escape(&finding.unit),
            ratio(e.ratio),
            escape(&test),
        )
    }));
    if cell.is_empty() {
        return "-".into();
    }
    cell.join("<br>")
}

/// How many findings from the first of `rows` on have its verdict, no cause, and lack the
/// same thing as it (1 when it has a cause or lacks nothing).
fn lacking_the_same(rows: &[&Finding]) -> usize {
    let first = rows[0];
    if first.missing.is_empty() || !first.causes.is_empty() {
        return 1;
    }
    rows.iter()
        .take_while(|f| {
            f.verdict == first.verdict && f.causes.is_empty() && f.missing == first.missing
        })
        .count()
}

/// The causes of a finding, each with its evidence and remedy folded under it; "no cause found" where it
/// should have some; what is missing where it is unknown, for it or (`rows` > 1) for the rows
/// that lack the same, from it on.
fn causes_cell(finding: &Finding, rows: usize) -> String {
    let mut cell: Vec<String> = finding
        .causes
        .iter()
        .map(|c| cause_details(c, &finding.unit))
        .collect();
    if finding.causes.is_empty() && wants_causes(finding.verdict) {
        cell.push(format!("<div>{NO_CAUSE}</div>"));
    }
    if !finding.missing.is_empty() {
        let which = if rows > 1 {
            format!("these {rows}")
        } else {
            "it".into()
        };
        cell.push(format!(
            "<div>to judge {which}: {}</div>",
            escape(&finding.missing.join("; "))
        ));
    }
    if cell.is_empty() {
        return "-".into();
    }
    cell.join("")
}

/// A cause as a `<details>`: its kind, value, what it does and the share of the gap it
/// explains in the summary, always shown; what was read and the remedy folded inside.
fn cause_details(cause: &Cause, unit: &str) -> String {
    let line = escape(&cause_line(cause, unit));
    if cause.evidence.is_empty() && cause.remedy.is_empty() {
        return format!("<p class=\"cause\">{line}</p>");
    }
    let mut inner = String::new();
    if !cause.evidence.is_empty() {
        inner.push_str("<ul class=\"source\">");
        for e in &cause.evidence {
            let _ = write!(
                inner,
                "<li>{} = {}</li>",
                escape(&e.source),
                escape(&e.value)
            );
        }
        inner.push_str("</ul>");
    }
    if !cause.remedy.is_empty() {
        let _ = write!(inner, "<p>remedy: {}</p>", escape(&cause.remedy));
    }
    format!("<details class=\"cause\"><summary>{line}</summary>{inner}</details>")
}

#[cfg(test)]
mod tests {
    use crate::report::findings::tests::{fixture, planted};
    use crate::report::html::{render, render_runs};

    #[test]
    fn a_document_without_findings_shows_no_findings_section() {
        let mut report = fixture();
        report.findings = None;
        assert!(!render(1, &report).contains("Findings"));
    }

    #[test]
    fn the_page_opens_with_the_findings_escaped() {
        let page = render(1, &planted());
        let findings = page.find("<h2 id=\"findings\">Findings</h2>").unwrap();
        for later in [
            "<table class=\"run\">",
            "<h2 id=\"summary\">",
            "<table class=\"results\">",
            "<svg class=\"chart\"",
        ] {
            let at = page.find(later).unwrap_or_else(|| panic!("no {later}"));
            assert!(findings < at, "{later} before the findings");
        }
        assert!(!page.contains("<script>"), "a script got through");
        assert!(
            page.contains("cpu|quota&lt;script&gt;alert(1)&lt;/script&gt; 0.5 CPU: "),
            "the cause is not shown escaped"
        );
        for verdict in ["above-limit", "unstable", "below", "unknown", "at-limit"] {
            assert!(
                page.contains(&format!(
                    "<span class=\"verdict {verdict}\">{verdict}</span>"
                )),
                "no {verdict} badge"
            );
        }
        // Every cause's evidence and remedy are folded under it; the results at their limit
        // are folded at the end of the section.
        assert!(page.contains("<li>/sys/fs/cgroup/cpu/peakbench/cpu.cfs_period_us = 100000</li>"));
        assert!(page.contains("<details><summary>At their limit (1)</summary>"));
        assert!(page.contains("qdisc 150 Mbit/s: a tbf qdisc on lo"));
        assert!(page.contains("mann-whitney-u p = 0.029 (3 against 12 repetitions)"));
    }

    #[test]
    fn rows_that_lack_the_same_share_one_cell_that_says_it_once() {
        let mut report = fixture();
        let findings = report.findings.as_mut().unwrap();
        let unknown = findings
            .results
            .iter()
            .position(|f| f.verdict == crate::result::Verdict::Unknown)
            .expect("the fixture has an unknown result");
        let missing = findings.results[unknown].missing.join("; ");
        assert!(!missing.is_empty());
        // Three more like it, right after it: four rows, one cell.
        for k in 1..=3 {
            let mut twin = findings.results[unknown].clone();
            twin.id = format!("{}-twin{k}", twin.id);
            twin.label = format!("{} twin {k}", twin.label);
            findings.results.insert(unknown + k, twin);
        }
        let page = render(1, &report);
        let said = crate::report::cells::escape(&missing);
        assert_eq!(page.matches(said.as_str()).count(), 1, "{page}");
        assert!(page.contains(&format!(
            "<td rowspan=\"4\"><div>to judge these 4: {said}</div></td>"
        )));
        for k in 1..=3 {
            assert!(page.contains(&format!("twin {k}")), "row {k} is gone");
        }
        // A single row keeps its own cell.
        let page = render(1, &fixture());
        assert!(page.contains(&format!("<div>to judge it: {said}</div>")));
        assert!(!page.contains("rowspan"));
    }

    #[test]
    fn a_long_parenthesis_that_rows_repeat_is_said_once_under_the_table() {
        let mut report = fixture();
        let findings = report.findings.as_mut().unwrap();
        let judged = findings
            .results
            .iter()
            .position(|f| {
                f.verdict != crate::result::Verdict::AtLimit && !f.expectations.is_empty()
            })
            .expect("the fixture has a judged result");
        let why = "a probe of this test, said by both rows and once under the table";
        let source = |ghz: u32| {
            format!(
                "the peak {ghz} GFLOP/s (1 cores × {ghz} GHz; clock {ghz} ({why}); short (kept))"
            )
        };
        findings.results[judged].expectations[0].source = source(3);
        let mut twin = findings.results[judged].clone();
        twin.id = format!("{}-twin", twin.id);
        twin.expectations[0].source = source(4);
        findings.results.insert(judged + 1, twin);
        let page = render(1, &report);
        assert_eq!(page.matches(why).count(), 1, "{page}");
        assert!(page.contains(&format!("<ul class=\"notes\"><li>[1] {why}</li></ul>")));
        for ghz in [3, 4] {
            assert!(
                page.contains(&format!(
                    "(1 cores × {ghz} GHz; clock {ghz} <span class=\"note\">[1]</span>; short (kept))"
                )),
                "{page}"
            );
        }
        // Said by one row only, it stays where it is.
        report.findings.as_mut().unwrap().results.remove(judged + 1);
        let page = render(1, &report);
        assert!(page.contains(&format!("clock 3 ({why})")), "{page}");
        assert!(!page.contains(&format!("] {why}</li>")));
    }

    #[test]
    fn an_unstable_row_shows_its_spread_and_a_long_source_is_folded() {
        let page = render(1, &fixture());
        // The unstable result's reason is its repetitions' spread, which no expectation says.
        assert!(
            page.contains("</td><td>cv 14.5 % over 3 repetitions (threshold 5 %)"),
            "{page}"
        );
        // A short source stays in the cell (the fixture's, once the notes under the table stand
        // for their long parentheses); a long one (a peak's factors, each with where it came
        // from, said by this row alone) is folded under its first words.
        assert!(page.contains("<br><span class=\"source\">peak 90.6 GFLOP/s <span"));
        assert!(!page.contains("<details class=\"source\">"));
        let mut report = fixture();
        let findings = report.findings.as_mut().unwrap();
        let judged = findings
            .results
            .iter_mut()
            .find(|f| f.verdict != crate::result::Verdict::AtLimit && !f.expectations.is_empty())
            .unwrap();
        judged.expectations[0].source = "the peak 205 GIOP/s (2 cores × 3.2009 GHz × 8 lanes × 4 \
             units × 1 op; clock 3.2009 (measured: a dependent add chain on one core))"
            .into();
        let page = render(1, &report);
        assert!(page.contains(
            "<details class=\"source\"><summary>the peak 205 GIOP/s</summary>the peak 205 GIOP/s \
             (2 cores"
        ));
    }

    #[test]
    fn several_runs_have_a_findings_section_each_under_one_heading() {
        let a = fixture();
        let b = fixture();
        let mut c = fixture();
        c.findings = None;
        let page = render_runs(&[(1, &a), (2, &b), (3, &c)]);
        assert_eq!(page.matches("<h2 id=\"findings\">").count(), 1);
        assert!(page.contains("<h3>Run 1 (fixture-host)</h3>"));
        assert!(page.contains("<h3>Run 2 (fixture-host)</h3>"));
        assert!(!page.contains("<h3>Run 3 "));
    }
}
