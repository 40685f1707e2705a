//! What the cells of every format's tables say, in one place: a case's parameters in words
//! ([`describe_params`]), a result's row of the results table and of the pasted tables, the
//! standard tool's and the access time's cells, one run against another ([`change_cell`]), how
//! a run ended, and the lists the tables are built from (the subsystems, the warnings). Also how
//! a document's text is made safe in each format's cell: [`escape`] for HTML and SVG,
//! [`markdown_text`] and [`markdown_cell`] for Markdown (the terminal's is [`printable`]).
//!
//! Every function is pure and formats what the document holds; the exporters lay the cells
//! out.

use crate::result::significance::significance;
use crate::result::{BenchResult, Params, Reference, Report};
use crate::text::printable;
use crate::units::{format_bitrate, format_size, format_size_approx, format_value};

/// A compact description of a case's parameters, e.g. "f64 avx512 fma 2T".
pub(crate) fn describe_params(p: &Params) -> String {
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
pub(crate) fn describe_other(p: &Params) -> Vec<String> {
    p.other
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "nt" | "rate_bps" | "peer"))
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => format!("{k}={}", s.split(':').next().unwrap_or(s)),
            other => format!("{k}={other}"),
        })
        .collect()
}

/// One row of the results table, one cell per [`RESULT_HEADERS`]: the case, the value with its
/// unit, spread and range, the theoretical peak and the efficiency, the standard tool's value
/// and our ratio to it.
pub(crate) fn result_row(result: &BenchResult) -> [String; 9] {
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

/// The columns of the results table (the terminal's and the Markdown one).
pub(crate) const RESULT_HEADERS: [&str; 9] = [
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
pub(crate) const ACCESS_TIME_HEADER: &str = "access time";

/// A memory block case's access time as users count it (the elapsed times of all threads added
/// up ÷ the accesses of all threads, median over repetitions; its counting rule says so), if
/// the result has one.
pub(crate) fn access_time_ns(result: &BenchResult) -> Option<f64> {
    result
        .extra
        .iter()
        .find(|e| e.metric == "access_time")
        .map(|e| e.value)
}

/// Whether any of these results has an access time (and so its table the column).
pub(crate) fn any_access_time<'a>(mut results: impl Iterator<Item = &'a BenchResult>) -> bool {
    results.any(|r| access_time_ns(r).is_some())
}

/// The access-time cell of a result: "-" where it has none.
pub(crate) fn access_time_cell(result: &BenchResult) -> String {
    access_time_ns(result)
        .map(format_ns)
        .unwrap_or_else(|| "-".into())
}

/// A latency in nanoseconds in the unit that keeps it short.
pub(crate) fn format_ns(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{} ms", format_value(ns / 1e6))
    } else if ns >= 1e3 {
        format!("{} µs", format_value(ns / 1e3))
    } else {
        format!("{} ns", format_value(ns))
    }
}

/// One line of a result's further standard tool: its value and our ratio to it, or why it has
/// none, then what it measured differently.
pub(crate) fn other_reference_line(result: &BenchResult, other: &Reference) -> String {
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

/// How the run ended, as the tables' header says it.
pub(crate) fn status_word(report: &Report) -> &'static str {
    match report.status {
        crate::result::RunStatus::Running => "running",
        crate::result::RunStatus::Complete => "complete",
        crate::result::RunStatus::Interrupted => "interrupted: results so far",
        crate::result::RunStatus::Failed => "failed: results so far",
    }
}

/// B against A in a table cell: the change in % and its significance.
pub(crate) fn change_cell(a: &BenchResult, b: &BenchResult) -> String {
    let change = if a.value != 0.0 {
        format!("{:+.1}% ", (b.value - a.value) / a.value * 100.0)
    } else {
        String::new()
    };
    format!("{change}{}", significance(a, b).text())
}

/// Headers of the tables users paste into their reports, one per subsystem.
pub(crate) const PASTE_HEADERS: [&str; 14] = [
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
pub(crate) fn shared_params(results: &[&BenchResult]) -> (Vec<String>, String) {
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

/// One row of a pasted table: workload, the parameters but concurrency and bookkeeping (kept
/// in the JSON), concurrency (threads or streams), the measured value and its spread, the
/// tool's value and our ratio to it, the theoretical peak, both efficiencies, and the latency
/// percentiles where the case has them.
///
/// The parameters named in `hide` (by their [`Params::flat`] names) are left out, for a table
/// that states once what every row shares.
pub(crate) fn paste_row(result: &BenchResult, hide: &[String]) -> [String; 14] {
    let [_, value, unit, cv, _, peak, eff, _, ratio] = result_row(result);
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
pub(crate) fn subsystems(report: &Report) -> Vec<crate::result::Subsystem> {
    let mut list = Vec::new();
    for r in &report.results {
        if !list.contains(&r.subsystem) {
            list.push(r.subsystem);
        }
    }
    list
}

/// The run's warnings, then each result's, prefixed with the case it belongs to.
pub(crate) fn all_warnings(report: &Report) -> Vec<String> {
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

/// The subsystems of several runs, in the order of their first result in the first run that has
/// them.
pub(crate) fn subsystems_of_runs(runs: &[(i64, &Report)]) -> Vec<crate::result::Subsystem> {
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

/// Escapes text for HTML and SVG content and attribute values.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Text from a document as Markdown that stays in its table cell or list item and carries no
/// HTML: `|` and `\` escaped, line breaks as spaces, `<`, `>` and `&` as entities, control
/// characters as visible escapes.
pub(crate) fn markdown_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '|' => out.push_str("\\|"),
            '\\' => out.push_str("\\\\"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\n' | '\r' => out.push(' '),
            c => out.push_str(&printable(c.encode_utf8(&mut [0; 4]))),
        }
    }
    out
}

/// A cell of a Markdown table: one line, `|` escaped, no raw HTML ([`markdown_text`]), the
/// ellipsis of a range as a dash.
pub(crate) fn markdown_cell(text: &str) -> String {
    markdown_text(text).replace("…", "–")
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
