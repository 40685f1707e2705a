//! Two runs side by side, result by result.
//!
//! Results are matched by their case `id` (the same parameters give the same id in every
//! run). The change is `(B − A) / A`, of the medians. It is called *beyond the noise* when the
//! two-sided Mann–Whitney U test of the two runs' repetitions gives p < 0.05: the chance that
//! repetitions of one unchanged distribution would split as unevenly is below 5 %. The test
//! assumes nothing about how the repetitions spread (a disturbed repetition is worse, rarely
//! better), only that they are independent. It needs enough repetitions to say anything: with 3
//! against 3 the most uneven split still has p = 0.1, and the comparison says there are too few;
//! 4 against 4 can show a change only when no repetition of one run comes near the other's; 5
//! against 5 tolerates some overlap.

use crate::report::cells::describe_params;
use crate::result::{BenchResult, Report};
use crate::sysinfo::Fingerprint;
use crate::text::{Align, Table, printable};
use crate::units::format_value;

pub(crate) use crate::result::significance::{Significance, significance};

/// One shared result.
#[derive(Debug, Clone)]
pub(crate) struct Change {
    pub label: String,
    pub unit: String,
    pub a: f64,
    pub b: f64,
    /// (b − a) / a; `None` when a is 0.
    pub change: Option<f64>,
    pub significance: Significance,
}

/// Every result present in both runs, in A's order, and how many are in only one of them.
///
/// Results match on their case id and unit; where either run measured several hosts at once
/// (a cluster run, schema version 2), also on the host, so that a cluster run compares host by
/// host with another cluster run or with a single-host run (of either schema version) of one
/// of its hosts.
pub(crate) fn compare(a: &Report, b: &Report) -> (Vec<Change>, usize, usize) {
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
            significance: significance(ra, rb),
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
pub(crate) fn render(a_id: i64, a: &Report, b_id: i64, b: &Report) -> String {
    let (changes, only_a, only_b) = compare(a, b);
    let mut out = format!(
        "A: run {a_id}, {} on {}, {}\nB: run {b_id}, {} on {}, {}\n\n",
        printable(&a.started_at),
        printable(&a.host.hostname),
        status(a),
        printable(&b.started_at),
        printable(&b.host.hostname),
        status(b)
    );
    // Runs of different hardware compare, but the reader is told which fields differ.
    let hardware = Fingerprint::of(&a.host).differences(&Fingerprint::of(&b.host));
    if !hardware.is_empty() {
        out.push_str(&format!(
            "Not the same hardware (A vs B): {}\n\n",
            hardware.join(", ")
        ));
    }
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
            c.significance.text(),
        ]);
    }
    out.push_str(&table.render());
    out.push_str(&closing_line(&changes));
    if only_a + only_b > 0 {
        out.push_str(&format!("; {only_a} only in A, {only_b} only in B"));
    }
    out.push('\n');
    crate::text::terminal(&out)
}

/// How many results changed beyond the noise, by which rule, and what to do when the
/// repetitions were too few for the rule to say anything.
fn closing_line(changes: &[Change]) -> String {
    let beyond = changes
        .iter()
        .filter(|c| c.significance.is_beyond())
        .count();
    let mut line = format!(
        "\n{} shared results, {beyond} beyond the noise (two-sided Mann–Whitney U test on the repetitions, p < 0.05",
        changes.len()
    );
    let too_few = changes.iter().find_map(|c| match c.significance {
        Significance::Unknown { n, .. } => Some(n),
        _ => None,
    });
    if let Some([a, b]) = too_few {
        line.push_str(&format!(
            "; {a} vs {b} repetitions can never show it: use --repetitions 5 or more"
        ));
    }
    line.push(')');
    line
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
    fn separated_repetitions_are_beyond_the_noise_and_overlapping_ones_within() {
        let a = result(vec![10.0, 11.0, 12.0, 13.0, 14.0]);
        // Every repetition of B above A's: p = 2/252 (the one most uneven of C(10, 5) splits,
        // doubled).
        let Significance::Beyond { p } =
            significance(&a, &result(vec![15.0, 16.0, 17.0, 18.0, 19.0]))
        else {
            panic!("separated repetitions")
        };
        assert!((p - 2.0 / 252.0).abs() < 1e-12);
        // U = 6 of 25: 56 of the 252 splits are at least as uneven, p = 0.222.
        let overlapping = significance(&a, &result(vec![11.5, 12.5, 13.5, 14.5, 15.5]));
        let Significance::Within { p } = overlapping else {
            panic!("overlapping repetitions: {overlapping:?}")
        };
        assert!((p - 56.0 / 252.0).abs() < 1e-12);
        assert_eq!(overlapping.text(), "within noise (p 0.22)");
        assert_eq!(significance(&a, &a), Significance::Within { p: 1.0 });
    }

    #[test]
    fn three_repetitions_against_three_are_too_few_to_tell() {
        let a = result(vec![10.0, 11.0, 12.0]);
        let separated = significance(&a, &result(vec![20.0, 21.0, 22.0]));
        assert!(matches!(separated, Significance::Unknown { n: [3, 3], .. }));
        assert_eq!(separated.text(), "too few repetitions (3 vs 3: p ≥ 0.10)");
        assert_eq!(
            significance(&a, &result(vec![20.0])).text(),
            "too few repetitions (3 vs 1: p ≥ 0.50)"
        );
        assert_eq!(
            significance(&result(vec![1.0]), &result(vec![2.0])).text(),
            "too few repetitions (1 vs 1)"
        );
    }

    #[test]
    fn the_closing_line_states_the_rule_and_the_fix_for_too_few_repetitions() {
        let change = |significance| Change {
            label: "cpu f64".into(),
            unit: "GFLOP/s".into(),
            a: 1.0,
            b: 2.0,
            change: Some(1.0),
            significance,
        };
        let line = closing_line(&[change(Significance::Beyond { p: 0.008 })]);
        assert_eq!(
            line,
            "\n1 shared results, 1 beyond the noise (two-sided Mann–Whitney U test on the repetitions, p < 0.05)"
        );
        let too_few = Significance::Unknown {
            n: [3, 3],
            min_p: 0.1,
        };
        let line = closing_line(&[change(too_few), change(Significance::Within { p: 0.4 })]);
        assert!(
            line.ends_with("0 beyond the noise (two-sided Mann–Whitney U test on the repetitions, p < 0.05; 3 vs 3 repetitions can never show it: use --repetitions 5 or more)"),
            "{line}"
        );
    }
}
