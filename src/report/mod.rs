//! Exporters: each format is a pure function from the results document to bytes, behind one
//! trait, [`Exporter`]: the text table ([`TextReport`]), [`JsonDocument`], [`Csv`], the Markdown table
//! ([`Markdown`]), the Markdown tables to paste ([`MarkdownTables`]) and the HTML report
//! ([`Html`]). [`by_extension`] and [`for_stdout`] pick one from a file name or the flags.
//!
//! They draw what the document holds and compute no model of their own: a roofline run's
//! section ([`roofline`]: its text and chart) draws the model of [`crate::result::roofline`],
//! stored in the run's `model` result or built there from its roofline results.
//!
//! The human table and Markdown open with the run's [`findings`] where the document has them,
//! then show one row per result; JSON is the whole document (the schema of `docs/schema.md`);
//! CSV has one row per result with every parameter and statistic in its own column. What a cell
//! says, and how a document's text is escaped in each format, is in [`cells`], for every format
//! alike. [`OutputFile`] is created before a run (so a bad path fails at once) and rewritten
//! atomically after every case, so an interrupted run leaves a complete, valid file.

pub(crate) mod cells;
pub(crate) mod c2c;
pub(crate) mod charts;
mod cluster;
mod csv;
pub(crate) mod findings;
pub(crate) mod html;
pub(crate) mod inventory;
mod json;
mod markdown_tables;
pub(crate) mod peaks;
pub(crate) mod roofline;
mod table;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::options::OutputArgs;
use crate::result::Report;

pub(crate) use csv::Csv;
pub(crate) use html::Html;
pub(crate) use json::JsonDocument;
pub(crate) use markdown_tables::MarkdownTables;
pub(crate) use table::{Markdown, TextReport};

/// One output format: a pure function from the results to bytes.
pub(crate) trait Exporter: std::fmt::Debug + Sync {
    /// One run's results document in this format.
    fn export(&self, report: &Report) -> Vec<u8>;

    /// Several runs (two machines, before and after a change) as one document of this format,
    /// each with its id in the history, or `None` for a format that holds one run (the table,
    /// JSON, CSV and the Markdown table). `peakbench report` writes these.
    fn export_runs(&self, _runs: &[(i64, &Report)]) -> Option<Vec<u8>> {
        None
    }
}

/// The formats a results file is written in, by the extensions of its name (lower case).
const BY_EXTENSION: [(&str, &dyn Exporter); 6] = [
    ("json", &JsonDocument),
    ("csv", &Csv),
    ("md", &Markdown),
    ("markdown", &Markdown),
    ("txt", &TextReport),
    ("text", &TextReport),
];

/// The format a file name asks for by its extension (`--output FILE`), if it names one.
pub(crate) fn by_extension(path: &Path) -> Option<&'static dyn Exporter> {
    let extension = path.extension()?.to_str()?.to_ascii_lowercase();
    BY_EXTENSION
        .iter()
        .find(|(name, _)| *name == extension)
        .map(|(_, exporter)| *exporter)
}

/// What a run prints on stdout: JSON with `--json`, CSV with `--csv`, else the table.
pub(crate) fn for_stdout(output: &OutputArgs) -> &'static dyn Exporter {
    if output.json.on {
        &JsonDocument
    } else if output.csv {
        &Csv
    } else {
        &TextReport
    }
}

/// A results file kept up to date during a run.
#[derive(Debug)]
pub(crate) struct OutputFile {
    path: PathBuf,
    exporter: &'static dyn Exporter,
}

impl OutputFile {
    /// Creates (or truncates) the file now, so that a bad path fails before anything runs.
    pub(crate) fn create(path: &Path, exporter: &'static dyn Exporter) -> Result<OutputFile> {
        fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
        Ok(OutputFile {
            path: path.to_path_buf(),
            exporter,
        })
    }

    /// Replaces the file's content with `report`, atomically ([`write_atomically`]).
    pub(crate) fn write(&self, report: &Report) -> Result<()> {
        write_atomically(&self.path, &self.exporter.export(report))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// The directory a file at `path` is written in.
fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// A new file of a random name in `path`'s directory, created with `O_EXCL`, so that a symbolic
/// link planted at any name is never followed; it is removed when dropped unless persisted.
pub(crate) fn temporary_beside(path: &Path) -> Result<tempfile::NamedTempFile> {
    let dir = dir_of(path);
    tempfile::Builder::new()
        .prefix(".peakbench-")
        .suffix(".partial")
        .tempfile_in(dir)
        .with_context(|| format!("cannot write a temporary file in {}", dir.display()))
}

/// Replaces `path`'s content with `bytes`, atomically: written and flushed to a new file beside
/// it ([`temporary_beside`]), then renamed over it, so that a reader sees the old file or the new
/// one, never half of one. The file keeps the mode it had; a new one gets 0644 (tempfile
/// creates 0600, which a collector running as another user could not read).
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let mut file = temporary_beside(path)?;
    let mode = fs::metadata(path)
        .map(|meta| meta.permissions())
        .unwrap_or_else(|_| fs::Permissions::from_mode(0o644));
    let _ = file.as_file().set_permissions(mode);
    file.write_all(bytes)
        .and_then(|()| file.as_file().sync_data())
        .with_context(|| format!("cannot write {}", file.path().display()))?;
    file.persist(path)
        .map(drop)
        .with_context(|| format!("cannot replace {}", path.display()))
}

/// The exact text of every exporter over the fixture document, so that a change to any output
/// format shows up in review (`cargo insta review`, or `INSTA_UPDATE=always` and read the diff).
#[cfg(test)]
mod snapshots {
    use super::markdown_tables::render_markdown_tables;
    use super::*;

    fn fixture() -> Report {
        serde_json::from_str(include_str!("../../tests/fixtures/report.json"))
            .expect("the fixture is a results document")
    }

    fn text(exporter: &dyn Exporter) -> String {
        String::from_utf8(exporter.export(&fixture())).expect("exporters write UTF-8")
    }

    /// `--output` picks its format by the file's extension, in any case; a name without one
    /// it knows (the HTML report is `--html`'s) picks none.
    #[test]
    fn a_file_name_picks_its_format_by_its_extension() {
        let picked = |name: &str| by_extension(Path::new(name)).map(|e| format!("{e:?}"));
        for (name, format) in [
            ("r.json", "JsonDocument"),
            ("r.CSV", "Csv"),
            ("r.md", "Markdown"),
            ("r.markdown", "Markdown"),
            ("dir.d/r.txt", "TextReport"),
            ("r.Text", "TextReport"),
        ] {
            assert_eq!(picked(name).as_deref(), Some(format), "{name}");
        }
        for name in ["r.html", "results", "r.json.gz"] {
            assert_eq!(picked(name), None, "{name}");
        }
    }

    #[test]
    fn table() {
        insta::assert_snapshot!(text(&TextReport));
    }

    #[test]
    fn csv() {
        insta::assert_snapshot!(text(&Csv));
    }

    #[test]
    fn json() {
        insta::assert_snapshot!(text(&JsonDocument));
    }

    #[test]
    fn markdown() {
        insta::assert_snapshot!(text(&Markdown));
    }

    #[test]
    fn markdown_tables() {
        insta::assert_snapshot!(render_markdown_tables(&fixture()));
    }

    /// A memory block case's access time (the extra the case records) is a column of the table,
    /// the Markdown, the pasted tables and the CSV; other subsystems' tables do not get the
    /// column.
    #[test]
    fn access_time_is_a_column_where_a_result_has_one() {
        let mut report = fixture();
        let stats = crate::stats::Summary::of(&[2.5, 2.5]).unwrap();
        let copy = report
            .results
            .iter_mut()
            .find(|r| r.id == "memory-copy-8b-2t")
            .unwrap();
        copy.extra.push(crate::result::Extra {
            metric: "access_time".into(),
            unit: "ns".into(),
            value: 2.5,
            stats,
        });
        let table = String::from_utf8(TextReport.export(&report)).unwrap();
        let header = table.lines().find(|l| l.contains("case")).unwrap();
        assert!(header.trim_end().ends_with("access time"), "{header}");
        let row = table
            .lines()
            .find(|l| l.starts_with("copy") && l.contains("bs=8B ") && l.contains(" 2T "))
            .unwrap_or_else(|| panic!("{table}"));
        assert!(row.trim_end().ends_with("2.50 ns"), "{row}");

        let markdown = String::from_utf8(Markdown.export(&report)).unwrap();
        assert!(markdown.contains("| ratio | access time |"), "{markdown}");

        let pasted = render_markdown_tables(&report);
        let sections: Vec<&str> = pasted.split("\n## ").collect();
        let memory = sections.iter().find(|s| s.starts_with("memory")).unwrap();
        assert!(memory.contains("| latency p99 | access time |"), "{memory}");
        assert!(memory.contains("| 2.50 ns |"), "{memory}");
        let cpu = sections.iter().find(|s| s.starts_with("cpu")).unwrap();
        assert!(!cpu.contains("access time"), "{cpu}");

        let csv = String::from_utf8(Csv.export(&report)).unwrap();
        let mut reader = ::csv::Reader::from_reader(csv.as_bytes());
        let headers = reader.headers().unwrap().clone();
        let at = headers.iter().position(|h| h == "access_time_ns").unwrap();
        let id = headers.iter().position(|h| h == "id").unwrap();
        for record in reader.records() {
            let record = record.unwrap();
            let expected = if &record[id] == "memory-copy-8b-2t" && &record[0] == "result" {
                "2.5"
            } else {
                ""
            };
            assert_eq!(&record[at], expected, "{record:?}");
        }
    }

    /// Another standard tool beside the main one (ICMP ping beside sockperf) reaches the CSV,
    /// as a JSON array in its own column, and the HTML report, as well as the text table.
    #[test]
    fn other_references_reach_the_csv_and_the_html() {
        let mut report = fixture();
        let first = &mut report.results[0];
        let id = first.id.clone();
        first.other_references.push(crate::result::Reference {
            tool: "ping".into(),
            command: "ping -c 10 127.0.0.1".into(),
            value: Some(4.0),
            ratio: Some(3.5),
            note: None,
        });
        let csv = String::from_utf8(Csv.export(&report)).unwrap();
        let mut reader = ::csv::Reader::from_reader(csv.as_bytes());
        let headers = reader.headers().unwrap().clone();
        let at = headers
            .iter()
            .position(|h| h == "other_references")
            .unwrap();
        let id_at = headers.iter().position(|h| h == "id").unwrap();
        let mut seen = 0;
        for record in reader.records() {
            let record = record.unwrap();
            if record[id_at] == id && &record[0] == "result" {
                let cell: serde_json::Value = serde_json::from_str(&record[at]).unwrap();
                assert_eq!(cell[0]["tool"], "ping");
                assert_eq!(cell[0]["value"], 4.0);
                seen += 1;
            } else {
                assert_eq!(&record[at], "", "{record:?}");
            }
        }
        assert_eq!(seen, 1);
        let page = String::from_utf8(Html { run: 1 }.export(&report)).unwrap();
        assert!(page.contains("Other references"), "no section");
        let line = format!("ping {}", crate::units::format_value(4.0));
        assert!(page.contains(&line), "no {line} in the page");
        let table = String::from_utf8(TextReport.export(&report)).unwrap();
        assert!(table.contains("Other references"), "{table}");
    }
}

#[cfg(test)]
mod multi_run {
    use super::markdown_tables::{render_markdown_runs, render_markdown_tables};
    use super::*;
    use crate::result::BenchResult;

    fn fixture() -> Report {
        serde_json::from_str(include_str!("../../tests/fixtures/report.json"))
            .expect("the fixture is a results document")
    }

    #[test]
    fn two_runs_in_markdown_are_one_document_with_columns_side_by_side_and_verdicts() {
        // Five repetitions a case (the fixture's three are too few for the test to tell), and
        // the second run every case 50 % faster, its repetitions well apart from the first's.
        let five = |r: &mut BenchResult, scale: f64| {
            r.value *= scale;
            r.samples = [0.99, 0.995, 1.0, 1.005, 1.01]
                .map(|x| x * r.value)
                .to_vec();
        };
        let mut before = fixture();
        before.results.iter_mut().for_each(|r| five(r, 1.0));
        let mut after = fixture();
        after.results.iter_mut().for_each(|r| five(r, 1.5));
        let first_id = after.results[0].id.clone();
        after.results.retain(|r| r.id != first_id);
        let text = render_markdown_runs(&[(7, &before), (9, &after)]);
        assert_eq!(
            text.matches("\n# ").count() + usize::from(text.starts_with("# ")),
            1
        );
        assert!(text.starts_with("# peakbench runs 7, 9\n"), "{text}");
        for subsystem in subsystems_of(&before) {
            assert_eq!(
                text.matches(&format!("\n## {subsystem}\n")).count(),
                1,
                "one section per subsystem: {subsystem}"
            );
        }
        let header = text
            .lines()
            .find(|l| l.starts_with("| workload |"))
            .expect("a results table");
        assert!(header.contains("| run 7 | run 7 cv |"), "{header}");
        assert!(header.contains("| run 9 | run 9 cv |"), "{header}");
        assert!(header.ends_with("| run 9 against run 7 |"), "{header}");
        // Every case is one row: as many rows as the first run has results.
        let rows = text
            .lines()
            .filter(|l| {
                l.starts_with("| ") && !l.starts_with("| workload") && !l.starts_with("| run")
            })
            .filter(|l| !l.starts_with("| 7 ") && !l.starts_with("| 9 "))
            .count();
        assert_eq!(rows, before.results.len(), "{text}");
        let with_verdict = text
            .lines()
            .filter(|l| l.ends_with("+50.0% BEYOND noise (p 0.008) |"));
        assert_eq!(with_verdict.count(), before.results.len() - 1, "{text}");
        // The case run 9 lacks has a dash in its columns and no verdict.
        assert!(text.lines().any(|l| l.ends_with("| - | - |")), "{text}");
        // One run is the single-run document.
        assert_eq!(
            render_markdown_runs(&[(7, &before)]),
            render_markdown_tables(&before)
        );
    }

    fn subsystems_of(report: &Report) -> Vec<&'static str> {
        let mut names = Vec::new();
        for r in &report.results {
            if !names.contains(&r.subsystem.name()) {
                names.push(r.subsystem.name());
            }
        }
        names
    }
}
