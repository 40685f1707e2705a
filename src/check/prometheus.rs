//! The check's result for Prometheus, in its text exposition format, written where
//! node_exporter's textfile collector (`--collector.textfile.directory`) reads it: each case's
//! ratio to the baseline and its status, the check's exit code, its duration and when it ended.
//!
//! The file is replaced atomically (written to a temporary file in the same directory, then
//! renamed over it), so the collector never reads half a file; the temporary file's name does
//! not end in `.prom`, so the collector never reads it either. Samples carry no timestamp of
//! their own (the textfile collector refuses them): `peakbench_check_timestamp_seconds` says
//! when the check ended, so that an alert can tell a check that stopped running.

use std::path::Path;

use super::gate::Status;
use super::verdict::CheckOutcome;
use crate::error::UsageError;

/// What the file says: the verdict and how the check ended.
pub(crate) struct Metrics<'a> {
    pub verdict: &'a CheckOutcome,
    /// The check's exit code.
    pub exit: u8,
    /// How long the check took, in seconds.
    pub duration_s: f64,
    /// When it ended, in seconds since the Unix epoch.
    pub timestamp_s: f64,
}

/// Every status a case can have, as the `status` label names it.
const STATUSES: [Status; 6] = [
    Status::Pass,
    Status::Fail,
    Status::Unstable,
    Status::Ungateable,
    Status::Unjudged,
    Status::Missing,
];

/// The metrics in the text exposition format (version 0.0.4).
pub(crate) fn text(m: &Metrics) -> String {
    let mut out = String::new();
    let cases = &m.verdict.cases;
    family(
        &mut out,
        "peakbench_check_ratio",
        "Performance of each case against its baseline's median (below 1 is slower; a latency's is inverted).",
    );
    for c in cases {
        if let Some(ratio) = c.ratio {
            let labels = labels(&[("case", &c.id), ("subsystem", &c.subsystem)]);
            out.push_str(&format!(
                "peakbench_check_ratio{labels} {}\n",
                number(ratio)
            ));
        }
    }
    family(
        &mut out,
        "peakbench_check_case_status",
        "The gate's status of each case: 1 for the status it has, 0 for the others.",
    );
    for c in cases {
        for status in STATUSES {
            let labels = labels(&[
                ("case", &c.id),
                ("subsystem", &c.subsystem),
                ("status", status.name()),
            ]);
            let on = u8::from(c.status == status);
            out.push_str(&format!("peakbench_check_case_status{labels} {on}\n"));
        }
    }
    family(
        &mut out,
        "peakbench_check_hardware_lost",
        "Items of hardware the node lost since its baseline, by kind (CPUs online or allowed, memory, disks, NICs, link speed), and the disk cases' directory's room (disk-space) and writes (read-only).",
    );
    for kind in crate::history::inventory::LOSS_KINDS {
        let n = m.verdict.lost.iter().filter(|l| l.kind == kind).count();
        out.push_str(&format!(
            "peakbench_check_hardware_lost{} {n}\n",
            labels(&[("kind", kind)])
        ));
    }
    let check_wide = [
        (
            "peakbench_check_exit_code",
            "The check's exit code: 0 healthy, 1 a regression, 3 no baseline, 130 interrupted.",
            f64::from(m.exit),
        ),
        (
            "peakbench_check_duration_seconds",
            "How long the check took, measuring again included.",
            (m.duration_s * 1e3).round() / 1e3,
        ),
        (
            "peakbench_check_timestamp_seconds",
            "When the check ended, in seconds since the Unix epoch.",
            (m.timestamp_s * 1e3).round() / 1e3,
        ),
    ];
    for (name, help, value) in check_wide {
        family(&mut out, name, help);
        out.push_str(&format!("{name} {}\n", number(value)));
    }
    out
}

/// A gauge family's HELP and TYPE lines.
fn family(out: &mut String, name: &str, help: &str) {
    let help = help.replace('\\', "\\\\").replace('\n', "\\n");
    out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} gauge\n"));
}

/// `{name="value",…}`, each value escaped as the format asks: a backslash, a double quote and a
/// line feed become `\\`, `\"` and `\n`.
fn labels(pairs: &[(&str, &str)]) -> String {
    let escaped: Vec<String> = pairs
        .iter()
        .map(|(name, value)| {
            let value = value
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n");
            format!("{name}=\"{value}\"")
        })
        .collect();
    format!("{{{}}}", escaped.join(","))
}

/// A sample value as the format writes it (`NaN`, `+Inf`, `-Inf` for those).
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

fn usage(path: &Path, why: impl std::fmt::Display) -> anyhow::Error {
    UsageError(format!(
        "--prometheus: cannot write {}: {why}; choose a writable file in node_exporter's \
         textfile directory",
        path.display()
    ))
    .into()
}

/// Fails fast, before anything is measured, where `path` cannot be written as [`write`] writes
/// it (a file created beside it, then renamed); warns when the collector would not read it.
pub(crate) fn probe(path: &Path) -> anyhow::Result<()> {
    if path.is_dir() {
        return Err(usage(path, "it is a directory"));
    }
    // The file written at the end is created beside it, then renamed: what must work now.
    crate::report::temporary_beside(path).map_err(|e| usage(path, format!("{e:#}")))?;
    if path.extension().is_none_or(|e| e != "prom") {
        eprintln!(
            "warning: --prometheus: {} does not end in .prom, and node_exporter's textfile \
             collector reads only *.prom files",
            path.display()
        );
    }
    Ok(())
}

/// Writes `text` to `path` atomically ([`crate::report::write_atomically`]): the collector
/// never reads half a file, and a link planted beside it is never followed.
pub(crate) fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    crate::report::write_atomically(path, text.as_bytes())
        .map_err(|e| usage(path, format!("{e:#}")))
}

#[cfg(test)]
mod tests;
