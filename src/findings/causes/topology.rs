//! What a core-to-core matrix (`peakbench mem c2c`) says against the kernel: siblings the
//! kernel hides (`shared-cores`, naming the pairs, where the matrix's signal is clear enough
//! to change the peaks' cores) and any other disagreement between the matrix's siblings and
//! sysfs (`topology-mismatch`).

use crate::report::c2c::matrix_of;
use crate::result::{Cause, Evidence, Report};
use crate::sysinfo::format_cpu_list;

/// The causes every `mem c2c` result of `report` raises.
pub(super) fn c2c_causes(report: &Report) -> Vec<Cause> {
    let mut causes = Vec::new();
    for result in &report.results {
        let Some(m) = matrix_of(result) else {
            continue;
        };
        let siblings = m.inferred.iter().find(|l| l.is_siblings());
        let kernel = Evidence::new(
            "sysfs topology/thread_siblings_list".to_string(),
            if m.kernel.siblings.is_empty() {
                "no siblings".to_string()
            } else {
                groups(&m.kernel.siblings)
            },
        );
        if let (Some(cores), Some(level)) = (&m.measured_cores, siblings) {
            causes.push(Cause {
                kind: "shared-cores".into(),
                value: Some(cores.cores as f64),
                unit: "cores".into(),
                text: format!(
                    "the core-to-core matrix shows SMT siblings the kernel does not list: CPU \
                     pairs {} share a core (round trips ≤ {:.1} ns against ≥ {:.1} ns between \
                     cores), so the {} CPUs are {} cores and every all-thread peak is counted \
                     with {} cores",
                    groups(&cores.siblings),
                    level.within_max_ns,
                    level.between_min_ns,
                    m.cpus.len(),
                    cores.cores,
                    cores.cores
                ),
                evidence: vec![
                    Evidence::new(result.id.clone(), cores.detail.clone()),
                    kernel,
                ],
                bound: None,
                explains: None,
                remedy: "read all-thread figures against the cores counted here; ask the \
                         provider for the guest's real topology (threads per core)"
                    .into(),
            });
            continue;
        }
        let disagreements = m
            .kernel
            .disagreements(siblings.map_or(&[][..], |l| &l.groups));
        if disagreements.is_empty() {
            continue;
        }
        causes.push(Cause {
            kind: "topology-mismatch".into(),
            value: None,
            unit: String::new(),
            text: format!(
                "the core-to-core matrix and the kernel disagree: {}",
                disagreements.join("; ")
            ),
            evidence: vec![
                Evidence::new(
                    result.id.clone(),
                    siblings.map_or("no siblings inferred".into(), |l| groups(&l.groups)),
                ),
                kernel,
            ],
            bound: None,
            explains: None,
            remedy: "measure again (mem c2c, 3 repetitions): siblings count only when all \
                     repetitions show them; a placement that moved during the run (vCPUs \
                     rescheduled) shows as a disagreement"
                .into(),
        });
    }
    causes
}

fn groups(groups: &[Vec<usize>]) -> String {
    groups
        .iter()
        .map(|g| format_cpu_list(g))
        .collect::<Vec<_>>()
        .join(" ")
}
