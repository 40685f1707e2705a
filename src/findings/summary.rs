//! One line per subsystem: what is at its limit, what is not, and the causes named most.

use crate::names::Named;
use crate::result::{Finding, Subsystem, Verdict};

/// "cpu: 5 of 7 at their limit, 2 below (cpu-quota 0.50 CPU)", for each subsystem that has
/// results, in the order of the subsystems.
pub(super) fn lines(findings: &[Finding]) -> Vec<String> {
    Subsystem::ALL
        .iter()
        .filter_map(|subsystem| line(*subsystem, findings))
        .collect()
}

fn line(subsystem: Subsystem, findings: &[Finding]) -> Option<String> {
    let mine: Vec<&Finding> = findings
        .iter()
        .filter(|f| f.subsystem == subsystem)
        .collect();
    if mine.is_empty() {
        return None;
    }
    let count = |v: Verdict| mine.iter().filter(|f| f.verdict == v).count();
    let mut parts = vec![format!(
        "{} of {} at {} limit",
        count(Verdict::AtLimit),
        mine.len(),
        if mine.len() == 1 { "its" } else { "their" }
    )];
    for verdict in [
        Verdict::AboveLimit,
        Verdict::Unstable,
        Verdict::Below,
        Verdict::Unknown,
    ] {
        let n = count(verdict);
        if n == 0 {
            continue;
        }
        let causes = top_causes(&mine, verdict);
        parts.push(if causes.is_empty() {
            match verdict {
                Verdict::Unknown => format!("{n} unknown (nothing to judge against)"),
                _ => format!("{n} {} (no cause found)", verdict.name()),
            }
        } else {
            format!("{n} {} ({causes})", verdict.name())
        });
    }
    Some(format!("{}: {}", subsystem.name(), parts.join(", ")))
}

/// The causes of the findings of `verdict`, each kind once with its first value.
fn top_causes(findings: &[&Finding], verdict: Verdict) -> String {
    let mut seen: Vec<String> = Vec::new();
    for f in findings.iter().filter(|f| f.verdict == verdict) {
        for c in &f.causes {
            let shown = match c.value {
                Some(v) if !c.unit.is_empty() => {
                    format!("{} {} {}", c.kind, crate::units::format_value(v), c.unit)
                }
                _ => c.kind.clone(),
            };
            if !seen
                .iter()
                .any(|s| s.split(' ').next() == Some(c.kind.as_str()))
            {
                seen.push(shown);
            }
        }
    }
    seen.join(", ")
}
