//! CSV: one row per result, and one row per time-series point for sampling runs
//! (`kind` = `result` or `sample`), with every parameter and statistic in its own column.

use crate::result::{BenchResult, Report};

const COLUMNS: &[&str] = &[
    "kind",
    "id",
    "host",
    "subsystem",
    "op",
    "threads",
    "precision",
    "isa",
    "fma",
    "n",
    "block_bytes",
    "queue_depth",
    "protocol",
    "message_bytes",
    "streams",
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
];

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

fn fields(result: &BenchResult) -> Vec<String> {
    let p = &result.params;
    let s = &result.stats;
    let reference = result.reference.as_ref();
    vec![
        "result".into(),
        result.id.clone(),
        result.host.clone(),
        result.subsystem.name().into(),
        result.op.clone(),
        opt(p.threads),
        opt(p.precision.clone()),
        opt(p.isa.clone()),
        opt(p.fma),
        opt(p.n),
        opt(p.block_bytes),
        opt(p.queue_depth),
        opt(p.protocol.clone()),
        opt(p.message_bytes),
        opt(p.streams),
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
    ]
}

pub fn render(report: &Report) -> Vec<u8> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    let write = |w: &mut csv::Writer<Vec<u8>>, record: &[String]| {
        w.write_record(record)
            .expect("writing to memory cannot fail");
    };
    write(
        &mut writer,
        &COLUMNS.iter().map(|c| c.to_string()).collect::<Vec<_>>(),
    );
    for result in &report.results {
        let base = fields(result);
        write(&mut writer, &base);
        for point in &result.series {
            let mut row = base.clone();
            row[0] = "sample".into();
            row[17] = point.value.to_string();
            for cell in &mut row[18..31] {
                cell.clear();
            }
            row[31] = point.t_s.to_string();
            row[32] = opt(point.ghz);
            write(&mut writer, &row);
        }
    }
    writer.into_inner().expect("writing to memory cannot fail")
}
