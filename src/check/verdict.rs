//! The verdict of a check, as each reader takes it: text (one line per failing case, as NHC
//! writes drain reasons), the drain reason alone (`--reason`), JUnit XML (`--junit`, which
//! GitLab, Jenkins and GitHub read) and JSON (`--json`).

use std::path::Path;

use serde::Serialize;

use super::LocatedBaseline;
use super::gate::{CaseVerdict, Gate, Status, format_p, short_cause};
use crate::error::UsageError;
use crate::history::inventory::{self, Loss};
use crate::sysinfo::Fingerprint;
use crate::units::format_value;

/// The longest drain reason: Slurm keeps longer ones, but `sinfo -R` and NHC show about this.
pub(crate) const MAX_REASON: usize = 100;

/// How the check ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum CheckStatus {
    /// No case failed.
    Healthy,
    /// At least one case failed.
    Regression,
    /// No baseline of this hardware (or none of its cases in this plan): nothing was judged.
    NoBaseline,
}

/// The baseline a check was judged against.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct BaselineRef {
    pub name: String,
    /// Where it was read: a saved name, a file.
    pub origin: String,
    pub fingerprint: String,
    pub created_at: String,
    pub host: String,
    /// Whether its cases carry their learning runs' medians; a baseline saved before they were
    /// kept is judged by its pooled samples alone (save it again).
    pub learned_spreads: bool,
}

/// The whole verdict of a check.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct CheckOutcome {
    pub status: CheckStatus,
    /// This machine's hardware fingerprint, and its key.
    pub fingerprint: Fingerprint,
    pub fingerprint_key: String,
    pub baseline: Option<BaselineRef>,
    pub tolerance: f64,
    pub strict: bool,
    /// The check's run in the history, where it was stored.
    pub run: Option<i64>,
    /// What the node lost since its baseline (CPUs, memory, disks, NICs, the room or the writes
    /// of the disk cases' directory): each one fails it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lost: Vec<Loss>,
    pub cases: Vec<CaseVerdict>,
    /// The drain reason, when the node is not healthy.
    pub reason: Option<String>,
}

impl CheckOutcome {
    pub(crate) fn new(
        found: Option<&LocatedBaseline>,
        fp: &Fingerprint,
        gate: Gate,
        cases: Vec<CaseVerdict>,
        lost: Vec<Loss>,
        run: Option<i64>,
    ) -> CheckOutcome {
        let judged = cases.iter().any(|c| c.status != Status::Unjudged);
        let status = if !lost.is_empty() || cases.iter().any(|c| c.status == Status::Fail) {
            CheckStatus::Regression
        } else if found.is_none() || !judged {
            CheckStatus::NoBaseline
        } else {
            CheckStatus::Healthy
        };
        let mut verdict = CheckOutcome {
            status,
            fingerprint: fp.clone(),
            fingerprint_key: fp.key(),
            baseline: found.map(|f| BaselineRef {
                name: f.baseline.name.clone(),
                origin: f.origin.clone(),
                fingerprint: f.baseline.fingerprint.key(),
                created_at: f.baseline.created_at.clone(),
                host: f.baseline.host.clone(),
                learned_spreads: f.baseline.learned_spreads(),
            }),
            tolerance: gate.tolerance,
            strict: gate.strict,
            run,
            lost,
            cases,
            reason: None,
        };
        verdict.reason = reason(&verdict);
        verdict
    }

    /// The text output: a line per failing, unstable and ungateable case, the causes of the failures with
    /// their evidence and remedy, and a summary line.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        for loss in &self.lost {
            out.push_str(&format!(
                "{} {} ({})\n",
                heading(loss).label,
                crate::text::printable(&loss.text),
                crate::text::printable(&loss.source)
            ));
        }
        for c in self.cases.iter().filter(|c| {
            matches!(
                c.status,
                Status::Fail | Status::Unstable | Status::Ungateable | Status::Missing
            )
        }) {
            out.push_str(&crate::text::printable(&c.line));
            out.push('\n');
        }
        let mut named: Vec<&crate::result::Cause> = Vec::new();
        for c in self.cases.iter().filter(|c| c.status == Status::Fail) {
            for cause in &c.causes {
                // Each kind once: the first failure's (one cause is read again for each case).
                if !named.iter().any(|n| n.kind == cause.kind) {
                    named.push(cause);
                }
            }
        }
        for cause in named {
            out.push_str(&format!("  {}: {}\n", cause.kind, cause.text));
            for e in &cause.evidence {
                out.push_str(&format!("    evidence: {} = {}\n", e.source, e.value));
            }
            out.push_str(&format!("    remedy: {}\n", cause.remedy));
        }
        out.push_str(&self.summary());
        out.push('\n');
        crate::text::terminal(&out)
    }

    /// One line: the status, the counts and the baseline.
    pub(crate) fn summary(&self) -> String {
        let count = |s: Status| self.cases.iter().filter(|c| c.status == s).count();
        let against = match &self.baseline {
            Some(b) if !b.learned_spreads => format!(
                "against {}, which predates learned spreads: judged by pooled medians; save the \
                 baseline again",
                b.origin
            ),
            Some(b) => format!("against {}", b.origin),
            None => format!(
                "no baseline for this hardware (fingerprint {}): nothing judged; learn one with \
                 'peakbench check --learn {}'",
                self.fingerprint_key,
                crate::history::baseline::MIN_RUNS
            ),
        };
        let status = match self.status {
            CheckStatus::Healthy => "healthy",
            CheckStatus::Regression => "REGRESSION",
            CheckStatus::NoBaseline => "no baseline",
        };
        let lost = match self.lost.iter().filter(|l| l.is_hardware()).count() {
            0 => String::new(),
            n => format!(
                "{n} item{} of hardware lost, ",
                if n == 1 { "" } else { "s" }
            ),
        };
        let place: String = self
            .lost
            .iter()
            .filter(|l| !l.is_hardware())
            .map(|l| format!("{}, ", heading(l).summary))
            .collect();
        let missing = match count(Status::Missing) {
            0 => String::new(),
            n => format!(", {n} missing"),
        };
        format!(
            "peakbench check: {status}: {lost}{place}{} cases, {} pass, {} fail, {} unstable, {} \
             ungateable, {} unjudged{missing}, {against} (tolerance {:.0} %{})",
            self.cases.len(),
            count(Status::Pass),
            count(Status::Fail),
            count(Status::Unstable),
            count(Status::Ungateable),
            count(Status::Unjudged),
            self.tolerance * 100.0,
            if self.strict { ", strict" } else { "" }
        )
    }
}

/// How the outputs name a kind of loss.
struct Heading {
    /// The text's line label: `LOST 1 of 2 CPUs allowed …`.
    label: &'static str,
    /// The summary's words for the disk cases' place (hardware is counted instead).
    summary: &'static str,
    /// The drain reason's: `peakbench: lost hardware: …`.
    reason: &'static str,
    /// JUnit's failure type.
    junit: &'static str,
}

fn heading(loss: &Loss) -> Heading {
    let (label, summary, reason, junit) = match loss.kind {
        inventory::NO_ROOM => (
            "NO ROOM",
            "no room for the disk cases",
            "no room",
            "no-room",
        ),
        inventory::READ_ONLY => (
            "READ-ONLY",
            "the disk cases' directory read-only",
            "read-only",
            "read-only",
        ),
        _ => ("LOST", "", "lost hardware", "lost-hardware"),
    };
    Heading {
        label,
        summary,
        reason,
        junit,
    }
}

/// The drain reason: the worst failing case, its ratio and p, and its first cause, in at most
/// [`MAX_REASON`] printable ASCII characters; "no baseline" where nothing could be judged;
/// `None` when healthy.
fn reason(v: &CheckOutcome) -> Option<String> {
    let text = match v.status {
        CheckStatus::Healthy => return None,
        CheckStatus::NoBaseline => format!(
            "peakbench: no baseline for fingerprint {}",
            v.fingerprint_key
        ),
        CheckStatus::Regression if !v.lost.is_empty() => {
            let more = match v.lost.len() {
                1 => String::new(),
                n => format!(" (+{} more)", n - 1),
            };
            format!(
                "peakbench: {}: {}{more}",
                heading(&v.lost[0]).reason,
                v.lost[0].text
            )
        }
        CheckStatus::Regression => {
            let failed: Vec<&CaseVerdict> = v
                .cases
                .iter()
                .filter(|c| c.status == Status::Fail)
                .collect();
            let worst = failed
                .iter()
                .min_by(|a, b| a.ratio.unwrap_or(1.0).total_cmp(&b.ratio.unwrap_or(1.0)))
                .expect("a regression has a failing case");
            let cause = worst
                .causes
                .first()
                .map(short_cause)
                .unwrap_or_else(|| "no cause found".into());
            let more = match failed.len() {
                1 => String::new(),
                n => format!(" (+{} more)", n - 1),
            };
            // The case last, so that a long id is what the limit cuts.
            format!(
                "peakbench: {cause}: {:.2}x baseline p={}{more}: {}",
                worst.ratio.unwrap_or(f64::NAN),
                format_p(worst.p.unwrap_or(1.0)),
                worst.id,
            )
        }
    };
    Some(ascii_at_most(&text, MAX_REASON))
}

/// Printable ASCII only (anything else becomes '?'), cut to `chars`.
pub(crate) fn ascii_at_most(text: &str, chars: usize) -> String {
    text.chars()
        .map(|c| {
            if c == ' ' || c.is_ascii_graphic() {
                c
            } else {
                '?'
            }
        })
        .take(chars)
        .collect()
}

/// Fails fast on a JUnit path that cannot be written, before anything is measured.
pub(crate) fn probe_writable(path: &Path, flag: &str) -> anyhow::Result<()> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map(drop)
        .map_err(|e| {
            UsageError(format!(
                "{flag}: cannot write {}: {e}; choose a writable path",
                path.display()
            ))
            .into()
        })
}

/// Writes the JUnit XML report.
pub(crate) fn write_junit(path: &Path, v: &CheckOutcome) -> anyhow::Result<()> {
    std::fs::write(path, junit(v)).map_err(|e| {
        UsageError(format!(
            "--junit: cannot write {}: {e}; choose a writable path",
            path.display()
        ))
        .into()
    })
}

/// The verdict as JUnit XML: one testsuite, one testcase per case (classname its subsystem),
/// a failure per failing case with its line as the message and its causes as the text; an
/// unstable case is a failure with `--strict`, otherwise skipped with its line, as are an
/// ungateable and an unjudged one; no baseline is one skipped testcase. Each item of hardware
/// lost (and the disk cases' directory's room or writes) is a failing testcase of classname
/// `peakbench.inventory`, and a missing case fails where the node lost any (skipped
/// otherwise).
pub(crate) fn junit(v: &CheckOutcome) -> String {
    let count = |s: Status| v.cases.iter().filter(|c| c.status == s).count();
    let no_baseline = v.status == CheckStatus::NoBaseline && v.cases.is_empty();
    // A missing case fails where the node lost hardware or its directory (its plan shrank
    // with it).
    let missing_fails = !v.lost.is_empty();
    let missing = count(Status::Missing);
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n<testsuite name=\"peakbench \
         check\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\">\n",
        v.cases.len().max(usize::from(no_baseline)) + v.lost.len(),
        count(Status::Fail) + v.lost.len() + if missing_fails { missing } else { 0 },
        count(Status::Unstable)
            + count(Status::Ungateable)
            + count(Status::Unjudged)
            + if missing_fails { 0 } else { missing }
            + usize::from(no_baseline),
    );
    for loss in &v.lost {
        out.push_str(&format!(
            "<testcase classname=\"peakbench.inventory\" name=\"{}\"><failure message=\"{}\" \
             type=\"{}\">{}</failure></testcase>\n",
            xml(loss.kind),
            xml(&loss.text),
            heading(loss).junit,
            xml(&loss.source)
        ));
    }
    if no_baseline {
        out.push_str(&format!(
            "<testcase classname=\"peakbench.check\" name=\"baseline\"><skipped message=\"{}\"/></testcase>\n",
            xml(&v.summary())
        ));
    }
    for c in &v.cases {
        out.push_str(&format!(
            "<testcase classname=\"peakbench.{}\" name=\"{}\">",
            xml(&c.subsystem),
            xml(&c.id)
        ));
        match c.status {
            Status::Fail => out.push_str(&format!(
                "<failure message=\"{}\" type=\"regression\">{}</failure>",
                xml(&c.line),
                xml(&details(c))
            )),
            Status::Missing if missing_fails => out.push_str(&format!(
                "<failure message=\"{}\" type=\"missing\"/>",
                xml(&c.line)
            )),
            Status::Unstable | Status::Ungateable | Status::Unjudged | Status::Missing => {
                out.push_str(&format!("<skipped message=\"{}\"/>", xml(&c.line)))
            }
            Status::Pass => out.push_str(&format!("<system-out>{}</system-out>", xml(&c.line))),
        }
        out.push_str("</testcase>\n");
    }
    out.push_str("</testsuite>\n</testsuites>\n");
    out
}

/// A failing case's figures and causes, one per line.
fn details(c: &CaseVerdict) -> String {
    let mut out = format!(
        "{}: {} {} this run over {} repetitions",
        c.label,
        format_value(c.value),
        c.unit,
        c.repetitions
    );
    for cause in &c.causes {
        out.push_str(&format!("\ncause {}: {}", cause.kind, cause.text));
        for e in &cause.evidence {
            out.push_str(&format!("\n  evidence: {} = {}", e.source, e.value));
        }
        out.push_str(&format!("\n  remedy: {}", cause.remedy));
    }
    out
}

/// Text escaped for an XML attribute or element; control characters, which XML 1.0 cannot
/// hold, become visible escapes.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in crate::text::terminal(text).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests;
