//! CSV: one row per result, and one row per time-series point for sampling runs
//! (`kind` = `result` or `sample`), with every parameter ([`Params::FIELDS`]; `other` as one
//! column of JSON) and every statistic in its own column. `access_time_ns` is a memory block
//! case's access time per thread (all threads' elapsed time ÷ all accesses, median over
//! repetitions; the wall time per access is in the JSON's extras), empty elsewhere. `other_references` holds the result's other standard tools
//! (ICMP ping beside sockperf) as a JSON array of their references, empty when there are none.

use super::Exporter;
use super::cells::access_time_ns;
use crate::result::{BenchResult, Params, Report};

/// The columns before the parameters.
const CASE: &[&str] = &["kind", "id", "host", "subsystem", "op"];
/// The columns after the parameters.
const VALUES: &[&str] = &[
    "metric",
    "unit",
    "value",
    "mean",
    "stddev",
    "min",
    "max",
    "cv",
    "repetitions",
    "latency_p50_ns",
    "latency_p99_ns",
    "peak",
    "efficiency",
    "reference_tool",
    "reference_value",
    "reference_ratio",
    "t_s",
    "ghz",
    "access_time_ns",
    "other_references",
];

/// The column a parameter goes in (`other` is `params_other`, a JSON object).
fn param_column(field: &str) -> String {
    match field {
        "other" => "params_other".into(),
        name => name.into(),
    }
}

pub(super) fn columns() -> Vec<String> {
    CASE.iter()
        .map(|c| c.to_string())
        .chain(Params::FIELDS.iter().map(|f| param_column(f)))
        .chain(VALUES.iter().map(|c| c.to_string()))
        .collect()
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// A JSON value as a cell: strings bare, null and empty objects empty, the rest as JSON.
fn cell(value: Option<&serde_json::Value>) -> String {
    match value {
        None | Some(serde_json::Value::Null) => String::new(),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Object(map)) if map.is_empty() => String::new(),
        Some(other) => other.to_string(),
    }
}

/// The cells of a result (the series columns empty), and where its value column is.
fn fields(result: &BenchResult) -> Vec<String> {
    let params = serde_json::to_value(&result.params).expect("parameters serialise");
    let s = &result.stats;
    let reference = result.reference.as_ref();
    let mut row: Vec<String> = vec![
        "result".into(),
        result.id.clone(),
        result.host.clone(),
        result.subsystem.name().into(),
        result.op.clone(),
    ];
    row.extend(Params::FIELDS.iter().map(|f| cell(params.get(*f))));
    row.extend([
        result.metric.clone(),
        result.unit.clone(),
        result.value.to_string(),
        s.mean.to_string(),
        opt(s.stddev),
        s.min.to_string(),
        s.max.to_string(),
        opt(s.cv),
        s.n.to_string(),
        opt(result.latency_ns.as_ref().map(|l| l.p50)),
        opt(result.latency_ns.as_ref().map(|l| l.p99)),
        opt(result.peak.as_ref().map(|p| p.value)),
        opt(result.efficiency),
        opt(reference.map(|r| r.tool.clone())),
        opt(reference.and_then(|r| r.value)),
        opt(reference.and_then(|r| r.ratio)),
        String::new(),
        String::new(),
        opt(access_time_ns(result)),
        if result.other_references.is_empty() {
            String::new()
        } else {
            serde_json::to_string(&result.other_references).expect("references serialise")
        },
    ]);
    row
}

/// The results as CSV: `--csv` on stdout and `--output FILE.csv`.
#[derive(Debug)]
pub(crate) struct Csv;

impl Exporter for Csv {
    fn export(&self, report: &Report) -> Vec<u8> {
        render(report)
    }
}

fn render(report: &Report) -> Vec<u8> {
    let header = columns();
    let at = |name: &str| header.iter().position(|c| c == name).expect("a column");
    let (value, mean, ghz, t_s) = (at("value"), at("mean"), at("ghz"), at("t_s"));
    let access = at("access_time_ns");
    let mut writer = csv::Writer::from_writer(Vec::new());
    let mut write = |record: &[String]| {
        writer
            .write_record(record)
            .expect("writing to memory cannot fail");
    };
    write(&header);
    for result in &report.results {
        let base = fields(result);
        write(&base);
        for point in &result.series {
            let mut row = base.clone();
            row[0] = "sample".into();
            row[value] = point.value.to_string();
            for cell in &mut row[mean..t_s] {
                cell.clear();
            }
            row[t_s] = point.t_s.to_string();
            row[ghz] = opt(point.ghz);
            row[access].clear();
            write(&row);
        }
    }
    writer.into_inner().expect("writing to memory cannot fail")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_parameter_has_a_column() {
        let header = columns();
        for field in Params::FIELDS {
            assert!(header.contains(&param_column(field)), "{field}");
        }
        for promised in [
            "direct",
            "engine",
            "working_set_bytes",
            "file_bytes",
            "scaling",
            "pinned",
            "duration_s",
            "params_other",
        ] {
            assert!(header.iter().any(|c| c == promised), "{promised}");
        }
    }

    #[test]
    fn a_row_has_a_cell_per_column_and_the_other_parameters_as_json() {
        let mut result = BenchResult::example("disk-x", "MB/s", vec![1.0, 2.0, 3.0]);
        result.params.direct = Some(true);
        result
            .params
            .other
            .insert("region_bytes".into(), 4096.into());
        let row = fields(&result);
        let header = columns();
        assert_eq!(row.len(), header.len());
        let at = |name: &str| header.iter().position(|c| c == name).unwrap();
        assert_eq!(row[at("direct")], "true");
        assert_eq!(row[at("params_other")], r#"{"region_bytes":4096}"#);
        assert_eq!(row[at("value")], "2");
    }
}
