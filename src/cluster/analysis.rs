//! What rank 0 reads from every host's results: the spread of each node-local case (per-host
//! values, the cluster median, each host's ratio to it), the hosts below the threshold, the
//! inventory fields that differ, and the matrices' medians and slow links.

use std::collections::BTreeMap;

use crate::result::{BenchResult, Difference, Flagged, Matrix, Spread};
use crate::sysinfo::SysInfo;

pub use crate::result::higher_is_better;

/// The median of `values` (the mean of the middle two for an even count); `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    })
}

/// A value's performance relative to the median: below 1 is slower, whichever way the metric
/// points.
pub fn relative(value: f64, median: f64, higher_is_better: bool) -> f64 {
    if higher_is_better {
        value / median
    } else {
        median / value
    }
}

/// The spread of every case measured on at least two hosts, in the order of first appearance.
pub fn spread(results: &[BenchResult]) -> Vec<Spread> {
    let mut order: Vec<(&str, &str)> = Vec::new();
    let mut by_case: BTreeMap<(&str, &str), Vec<&BenchResult>> = BTreeMap::new();
    for r in results {
        let key = (r.id.as_str(), r.unit.as_str());
        let entry = by_case.entry(key).or_default();
        if entry.is_empty() {
            order.push(key);
        }
        entry.push(r);
    }
    order
        .into_iter()
        .filter_map(|key| {
            let rs = &by_case[&key];
            let values: BTreeMap<String, f64> =
                rs.iter().map(|r| (r.host.clone(), r.value)).collect();
            if values.len() < 2 {
                return None;
            }
            let up = higher_is_better(&rs[0].metric, &rs[0].unit);
            let median = median(&values.values().copied().collect::<Vec<_>>())?;
            let ratios = values
                .iter()
                .map(|(h, &v)| (h.clone(), relative(v, median, up)))
                .collect();
            Some(Spread {
                id: key.0.to_string(),
                metric: rs[0].metric.clone(),
                unit: key.1.to_string(),
                higher_is_better: up,
                median,
                values,
                ratios,
            })
        })
        .collect()
}

/// The hosts with a case below `threshold` × the median, each with those cases, worst first.
pub fn flagged(spread: &[Spread], threshold: f64) -> Vec<Flagged> {
    let mut hosts: BTreeMap<String, Flagged> = BTreeMap::new();
    for s in spread {
        for (host, &ratio) in &s.ratios {
            if ratio < threshold {
                let f = hosts.entry(host.clone()).or_insert_with(|| Flagged {
                    host: host.clone(),
                    worst_ratio: ratio,
                    cases: Vec::new(),
                });
                f.worst_ratio = f.worst_ratio.min(ratio);
                f.cases.push(s.id.clone());
            }
        }
    }
    let mut out: Vec<Flagged> = hosts.into_values().collect();
    out.sort_by(|a, b| a.worst_ratio.total_cmp(&b.worst_ratio));
    out
}

/// The inventory fields a cluster acceptance asks about first, as text per host.
fn fields(info: &SysInfo) -> Vec<(&'static str, String)> {
    let ghz =
        |f: &crate::sysinfo::Fact<f64>| f.value.map_or("unknown".into(), |v| format!("{v:.2} GHz"));
    vec![
        ("cpu model", info.cpu.model_name.clone()),
        ("logical CPUs", info.cpu.logical_cpus.to_string()),
        ("physical cores", info.cpu.physical_cores.to_string()),
        ("base clock", ghz(&info.cpu.base_ghz)),
        ("max clock", ghz(&info.cpu.max_ghz)),
        // MemTotal moves by a few MiB with what the kernel reserves: compared in GiB.
        (
            "memory",
            format!(
                "{:.0} GiB",
                info.memory.total_bytes as f64 / (1u64 << 30) as f64
            ),
        ),
        ("kernel", info.os.kernel.clone()),
        (
            "distribution",
            info.os.distribution.value.clone().unwrap_or_default(),
        ),
    ]
}

/// The inventory fields whose value is not the same on every host.
pub fn differences(hosts: &BTreeMap<String, SysInfo>) -> Vec<Difference> {
    let per_host: Vec<(&String, Vec<(&'static str, String)>)> =
        hosts.iter().map(|(h, info)| (h, fields(info))).collect();
    let Some((_, first)) = per_host.first() else {
        return Vec::new();
    };
    (0..first.len())
        .filter(|&i| per_host.iter().any(|(_, f)| f[i].1 != first[i].1))
        .map(|i| Difference {
            field: first[i].0.to_string(),
            values: per_host
                .iter()
                .map(|(h, f)| ((*h).clone(), f[i].1.clone()))
                .collect(),
        })
        .collect()
}

/// Sets a matrix's median over its measured links and flags the links below `threshold`.
pub fn judge(matrix: &mut Matrix, threshold: f64) {
    let values: Vec<f64> = matrix.values.iter().flatten().flatten().copied().collect();
    matrix.median = median(&values);
    matrix.flagged.clear();
    let Some(median) = matrix.median else {
        return;
    };
    for (i, row) in matrix.values.iter().enumerate() {
        for (j, v) in row.iter().enumerate() {
            if let Some(v) = v
                && relative(*v, median, matrix.higher_is_better) < threshold
            {
                matrix
                    .flagged
                    .push([matrix.hosts[i].clone(), matrix.hosts[j].clone()]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(host: &str, id: &str, value: f64) -> BenchResult {
        let mut r = BenchResult::example(id, "GFLOP/s", vec![value]);
        r.host = host.into();
        r
    }

    #[test]
    fn the_slow_host_is_flagged_with_its_cases() {
        let results = [
            result("a", "cpu", 10.0),
            result("b", "cpu", 10.4),
            result("c", "cpu", 5.0),
            result("a", "mem", 20.0),
            result("b", "mem", 19.0),
            result("c", "mem", 20.0),
            result("a", "only-a", 1.0),
        ];
        let spread = spread(&results);
        assert_eq!(spread.len(), 2, "a case of one host has no spread");
        assert_eq!(spread[0].median, 10.0);
        assert!((spread[0].ratios["c"] - 0.5).abs() < 1e-12);
        let flagged = flagged(&spread, 0.9);
        assert_eq!(flagged.len(), 1);
        assert_eq!(flagged[0].host, "c");
        assert_eq!(flagged[0].cases, ["cpu"]);
    }

    #[test]
    fn latencies_are_slow_when_high() {
        assert!(!higher_is_better("latency", "ns"));
        assert!(higher_is_better("throughput", "Mb/s"));
        assert!(relative(20.0, 10.0, false) < 0.9);
    }

    #[test]
    fn slow_links_are_flagged_against_the_median_link() {
        let hosts: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
        let mut values = vec![vec![Some(1000.0); 4]; 4];
        for (i, row) in values.iter_mut().enumerate() {
            row[i] = None;
            if i != 1 {
                row[1] = Some(287.0);
            }
        }
        for v in values[1].iter_mut().flatten() {
            *v = 287.0;
        }
        let mut m = Matrix {
            metric: "tcp throughput".into(),
            unit: "Mb/s".into(),
            higher_is_better: true,
            counting: String::new(),
            hosts,
            values,
            median: None,
            flagged: Vec::new(),
            peak: None,
        };
        judge(&mut m, 0.9);
        assert_eq!(m.flagged.len(), 6);
        assert!(m.flagged.iter().all(|[a, b]| a == "b" || b == "b"));
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }
}
