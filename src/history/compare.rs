//! Two runs side by side, result by result.
//!
//! Results are matched by their case `id` (the same parameters give the same id in every
//! run). The change is `(B − A) / A`. It is called *beyond the noise* only when the ranges of
//! the two runs' repetitions do not overlap (B's slowest repetition beats A's fastest, or the
//! other way round): a change smaller than what the repetitions of either run already spread
//! over is not evidence of anything. With a single repetition on either side there is no
//! spread to judge by, and the verdict says so.

use crate::report::describe_params;
use crate::result::{BenchResult, Report};
use crate::text::{Align, Table};
use crate::units::format_value;

pub use crate::report::{Verdict, verdict};

/// One shared result.
#[derive(Debug, Clone)]
pub struct Change {
    pub id: String,
    pub label: String,
    pub unit: String,
    pub a: f64,
    pub b: f64,
    /// (b − a) / a; `None` when a is 0.
    pub change: Option<f64>,
    pub verdict: Verdict,
}

/// Every result present in both runs, in A's order, and how many are in only one of them.
///
/// Results match on their case id and unit; where either run measured several hosts at once
/// (a cluster run, schema version 2), also on the host, so that a cluster run compares host by
/// host with another cluster run or with a single-host run (of either schema version) of one
/// of its hosts.
pub fn compare(a: &Report, b: &Report) -> (Vec<Change>, usize, usize) {
    let by_host = a.hosts.len() > 1 || b.hosts.len() > 1;
    let same = |ra: &BenchResult, rb: &BenchResult| {
        ra.id == rb.id && ra.unit == rb.unit && (!by_host || ra.host == rb.host)
    };
    let mut changes = Vec::new();
    for ra in &a.results {
        let Some(rb) = b.results.iter().find(|rb| same(ra, rb)) else {
            continue;
        };
        let on = if by_host {
            format!(" on {}", ra.host)
        } else {
            String::new()
        };
        changes.push(Change {
            id: ra.id.clone(),
            label: format!(
                "{} {} {}{on}",
                ra.subsystem.name(),
                ra.op,
                describe_params(&ra.params)
            ),
            unit: ra.unit.clone(),
            a: ra.value,
            b: rb.value,
            change: (ra.value != 0.0).then(|| (rb.value - ra.value) / ra.value),
            verdict: verdict(ra, rb),
        });
    }
    let only_a = a.results.len() - changes.len();
    let only_b = b
        .results
        .iter()
        .filter(|rb| !a.results.iter().any(|ra| same(ra, rb)))
        .count();
    (changes, only_a, only_b)
}

/// The comparison as an aligned text table.
pub fn render(a_id: i64, a: &Report, b_id: i64, b: &Report) -> String {
    let (changes, only_a, only_b) = compare(a, b);
    let mut out = format!(
        "A: run {a_id}, {} on {}, {}\nB: run {b_id}, {} on {}, {}\n\n",
        a.started_at,
        a.host.hostname,
        status(a),
        b.started_at,
        b.host.hostname,
        status(b)
    );
    let mut table = Table::new(&[
        ("case", Align::Left),
        ("A", Align::Right),
        ("B", Align::Right),
        ("unit", Align::Left),
        ("change", Align::Right),
        ("noise", Align::Left),
    ]);
    for c in &changes {
        table.row([
            c.label.clone(),
            format_value(c.a),
            format_value(c.b),
            c.unit.clone(),
            c.change
                .map(|x| format!("{:+.1}%", x * 100.0))
                .unwrap_or_else(|| "-".into()),
            c.verdict.word().to_string(),
        ]);
    }
    out.push_str(&table.render());
    let beyond = changes
        .iter()
        .filter(|c| c.verdict == Verdict::Beyond)
        .count();
    out.push_str(&format!(
        "\n{} shared results, {beyond} beyond the noise (the two runs' min–max ranges of repetitions do not overlap)",
        changes.len()
    ));
    if only_a + only_b > 0 {
        out.push_str(&format!("; {only_a} only in A, {only_b} only in B"));
    }
    out.push('\n');
    out
}

fn status(report: &Report) -> &'static str {
    report.status.name()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::BenchResult;

    fn result(samples: Vec<f64>) -> BenchResult {
        BenchResult::example("cpu-f64", "GFLOP/s", samples)
    }

    #[test]
    fn overlapping_ranges_are_noise_and_separate_ones_are_not() {
        let a = result(vec![10.0, 11.0, 12.0]);
        assert_eq!(verdict(&a, &a), Verdict::Within);
        assert_eq!(
            verdict(&a, &result(vec![11.5, 12.5, 13.0])),
            Verdict::Within
        );
        assert_eq!(
            verdict(&a, &result(vec![12.1, 12.5, 13.0])),
            Verdict::Beyond
        );
        assert_eq!(verdict(&a, &result(vec![8.0, 9.0, 9.9])), Verdict::Beyond);
        assert_eq!(verdict(&a, &result(vec![20.0])), Verdict::Unknown);
    }
}
