//! Exporters: each format is a pure function from a [`Report`] to bytes.
//!
//! The human table and Markdown show one row per result; JSON is the whole document (the
//! schema of `docs/schema.md`); CSV has one row per result with every parameter and statistic
//! in its own column. [`OutputFile`] is created before a run (so a bad path fails at once) and
//! rewritten atomically after every case, so an interrupted run leaves a complete, valid file.

pub mod charts;
mod csv;
pub mod html;
mod table;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::result::{BenchResult, Report};

pub use table::{describe_params, render_markdown, render_markdown_tables, render_table};

/// What the repetitions of two runs say about one change (the rule of `peakbench compare`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Within,
    Beyond,
    Unknown,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Within => "within noise",
            Verdict::Beyond => "BEYOND noise",
            Verdict::Unknown => "1 repetition",
        }
    }
}

/// The min–max rule: a change is beyond the noise only when the ranges of the two runs'
/// repetitions do not overlap; with one repetition on either side there is nothing to judge by.
pub fn verdict(a: &BenchResult, b: &BenchResult) -> Verdict {
    if a.stats.n < 2 || b.stats.n < 2 {
        return Verdict::Unknown;
    }
    if b.stats.min > a.stats.max || b.stats.max < a.stats.min {
        Verdict::Beyond
    } else {
        Verdict::Within
    }
}

/// B against A in a table cell: the change in % and the verdict.
pub fn change_cell(a: &BenchResult, b: &BenchResult) -> String {
    let change = if a.value != 0.0 {
        format!("{:+.1}% ", (b.value - a.value) / a.value * 100.0)
    } else {
        String::new()
    };
    format!("{change}{}", verdict(a, b).word())
}

/// An output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
    Csv,
    Markdown,
}

impl Format {
    /// The format a file name asks for by its extension.
    pub fn from_path(path: &Path) -> Option<Format> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "json" => Some(Format::Json),
            "csv" => Some(Format::Csv),
            "md" | "markdown" => Some(Format::Markdown),
            "txt" | "text" => Some(Format::Table),
            _ => None,
        }
    }

    pub fn render(self, report: &Report) -> Vec<u8> {
        match self {
            Format::Table => render_table(report).into_bytes(),
            Format::Markdown => render_markdown(report).into_bytes(),
            Format::Csv => csv::render(report),
            Format::Json => {
                let mut bytes =
                    serde_json::to_vec_pretty(report).expect("a report always serialises");
                bytes.push(b'\n');
                bytes
            }
        }
    }
}

/// A results file kept up to date during a run.
#[derive(Debug)]
pub struct OutputFile {
    path: PathBuf,
    format: Format,
}

impl OutputFile {
    /// Creates (or truncates) the file now, so that a bad path fails before anything runs.
    pub fn create(path: &Path, format: Format) -> Result<OutputFile> {
        fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
        Ok(OutputFile {
            path: path.to_path_buf(),
            format,
        })
    }

    /// Replaces the file's content with `report`, atomically (write a sibling, then rename).
    pub fn write(&self, report: &Report) -> Result<()> {
        let mut temporary = self.path.clone().into_os_string();
        temporary.push(".peakbench-partial");
        let temporary = PathBuf::from(temporary);
        let mut file = fs::File::create(&temporary)
            .with_context(|| format!("cannot write {}", temporary.display()))?;
        file.write_all(&self.format.render(report))
            .and_then(|()| file.sync_data())
            .with_context(|| format!("cannot write {}", temporary.display()))?;
        fs::rename(&temporary, &self.path)
            .with_context(|| format!("cannot replace {}", self.path.display()))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The exact text of every exporter over the fixture document, so that a change to any output
/// format shows up in review (`cargo insta review`, or `INSTA_UPDATE=always` and read the diff).
#[cfg(test)]
mod snapshots {
    use super::*;

    fn fixture() -> Report {
        serde_json::from_str(include_str!("../../tests/fixtures/report.json"))
            .expect("the fixture is a results document")
    }

    fn text(format: Format) -> String {
        String::from_utf8(format.render(&fixture())).expect("exporters write UTF-8")
    }

    #[test]
    fn table() {
        insta::assert_snapshot!(text(Format::Table));
    }

    #[test]
    fn csv() {
        insta::assert_snapshot!(text(Format::Csv));
    }

    #[test]
    fn json() {
        insta::assert_snapshot!(text(Format::Json));
    }

    #[test]
    fn markdown() {
        insta::assert_snapshot!(text(Format::Markdown));
    }

    #[test]
    fn markdown_tables() {
        insta::assert_snapshot!(render_markdown_tables(&fixture()));
    }

    /// Issue 20 item 4: a memory block case's access time (the extra the case records) is a
    /// column of the table, the Markdown, the pasted tables and the CSV; other subsystems' tables
    /// do not get the column.
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
        let table = String::from_utf8(Format::Table.render(&report)).unwrap();
        let header = table.lines().find(|l| l.contains("case")).unwrap();
        assert!(header.trim_end().ends_with("access time"), "{header}");
        let row = table
            .lines()
            .find(|l| l.starts_with("copy") && l.contains("bs=8B ") && l.contains(" 2T "))
            .unwrap_or_else(|| panic!("{table}"));
        assert!(row.trim_end().ends_with("2.50 ns"), "{row}");

        let markdown = String::from_utf8(Format::Markdown.render(&report)).unwrap();
        assert!(markdown.contains("| ratio | access time |"), "{markdown}");

        let pasted = render_markdown_tables(&report);
        let sections: Vec<&str> = pasted.split("\n## ").collect();
        let memory = sections.iter().find(|s| s.starts_with("memory")).unwrap();
        assert!(memory.contains("| latency p99 | access time |"), "{memory}");
        assert!(memory.contains("| 2.50 ns |"), "{memory}");
        let cpu = sections.iter().find(|s| s.starts_with("cpu")).unwrap();
        assert!(!cpu.contains("access time"), "{cpu}");

        let csv = String::from_utf8(Format::Csv.render(&report)).unwrap();
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
}
