//! What rank 0 reads from every host's results: the spread of each node-local case (per-host
//! values, the cluster median, each host's ratio to it), the hosts below the threshold, the
//! inventory fields that differ, the hosts that are one machine, and the matrices' medians,
//! slow links and slow hosts.
//!
//! **Hosts that are one machine** (the same boot id) share its CPUs: while a round's pairs
//! measure at once, every MPI rank that waits spins, and a round trip between two such hosts
//! times the scheduler as much as the link (on 4 namespace hosts on 2 CPUs the MPI latency of
//! identical links read 13 µs to 3.7 ms). So the matrices timed by a ping-pong (the TCP round
//! trip, the MPI latency and the MPI ping-pong bandwidth, [`CPU_TIMED`]) leave out of their
//! median and their flags every link with an end on a shared machine; the values stay in the
//! matrix. TCP throughput stays compared: its receiver sleeps in the kernel, and a shaper on a
//! link (a tbf qdisc, a slow NIC) bounds it whoever shares the CPUs.

// Without the `mpi` feature no cluster job runs, but this module is still built: its tests run
// in every build, and the exporters read the documents it describes.
#![cfg_attr(not(feature = "mpi"), allow(dead_code))]

use std::collections::BTreeMap;

use crate::evidence::RunEvidence;
use crate::result::{
    BenchResult, Difference, Flagged, Loosened, Matrix, NotCompared, SharedMachine, SlowHost,
    Spread,
};
use crate::sysinfo::SysInfo;

pub(crate) use crate::result::higher_is_better;
use crate::stats::median;

/// A value's performance relative to the median: below 1 is slower, whichever way the metric
/// points.
pub(crate) fn relative(value: f64, median: f64, higher_is_better: bool) -> f64 {
    if higher_is_better {
        value / median
    } else {
        median / value
    }
}

/// The spread of every case measured on at least two hosts, in the order of first appearance.
pub(crate) fn spread(results: &[BenchResult]) -> Vec<Spread> {
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
pub(crate) fn flagged(spread: &[Spread], threshold: f64) -> Vec<Flagged> {
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
pub(crate) fn differences(hosts: &BTreeMap<String, SysInfo>) -> Vec<Difference> {
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

/// The hosts that are one running machine: the same boot id (from the inventory, else the
/// run's evidence) and, where read, the same machine id; groups of two or more, in host order.
pub(crate) fn shared_machines(
    hosts: &BTreeMap<String, SysInfo>,
    evidence: &BTreeMap<String, RunEvidence>,
) -> Vec<SharedMachine> {
    let mut groups: BTreeMap<(String, Option<String>), Vec<String>> = BTreeMap::new();
    let names = hosts
        .keys()
        .chain(evidence.keys().filter(|h| !hosts.contains_key(*h)));
    for name in names {
        let seen = evidence.get(name);
        let boot = hosts
            .get(name)
            .and_then(|h| h.boot_id.clone())
            .or_else(|| seen.and_then(|e| e.boot_id.clone()));
        let Some(boot) = boot else { continue };
        let machine = seen.and_then(|e| e.machine_id.clone());
        groups
            .entry((boot, machine))
            .or_default()
            .push(name.clone());
    }
    groups
        .into_iter()
        .filter(|(_, hosts)| hosts.len() > 1)
        .map(|((boot_id, machine_id), hosts)| SharedMachine {
            hosts,
            boot_id,
            machine_id,
        })
        .collect()
}

/// The matrices timed by a ping-pong, whose links are not compared where their hosts share a
/// machine (see the module's notes).
pub(crate) const CPU_TIMED: [&str; 3] = [
    "tcp-latency",
    "mpi-pingpong-latency",
    "mpi-pingpong-bandwidth",
];

/// Why a link with an end on a shared machine is not compared in a [`CPU_TIMED`] matrix.
pub(crate) const SHARED_WHY: &str = "these hosts share one machine's CPUs with other hosts of the job \
     (the same boot id): the ranks of a round's pairs spin on the same CPUs, so a ping-pong \
     there times the scheduler as much as the link; their links are left out of the median and \
     the flags (TCP throughput, whose receiver sleeps and which a shaper still bounds, stays \
     compared)";

/// Why a throughput link with an end on a shared machine is flagged only further below.
pub(crate) const SHARED_THROUGHPUT_WHY: &str = "these hosts share one machine's CPUs with other hosts \
     of the job (the same boot id): the pairs measured at once there share its CPUs, and a \
     link's fair share can fall to 1 / (pairs at once) of the median's, so a link is flagged \
     only below threshold / (pairs at once) × the median; a shaper (a tbf, a slow NIC) is \
     still far below that";

/// Sets a matrix's median over its compared links, flags the links below `threshold`, and
/// names the hosts slow on most of their links. `shared` maps each host on a machine shared
/// with other hosts of the job to the most pairs measured at once on that machine in a round:
/// in a [`CPU_TIMED`] matrix their links are not compared; in a throughput matrix they are
/// flagged only below `threshold` / that count (the CPU share a pair can lose).
pub(crate) fn flag_slow_links(
    matrix: &mut Matrix,
    threshold: f64,
    shared: &BTreeMap<String, usize>,
) {
    let timed = CPU_TIMED.contains(&matrix.op.as_str());
    let left_out: Vec<bool> = matrix
        .hosts
        .iter()
        .map(|h| timed && shared.contains_key(h))
        .collect();
    let at_once: Vec<usize> = matrix
        .hosts
        .iter()
        .map(|h| {
            if timed {
                1
            } else {
                shared.get(h).copied().unwrap_or(1).max(1)
            }
        })
        .collect();
    let loosened: Vec<&String> = matrix
        .hosts
        .iter()
        .zip(&at_once)
        .filter(|(_, n)| **n > 1)
        .map(|(h, _)| h)
        .collect();
    let most = at_once.iter().copied().max().unwrap_or(1);
    matrix.loosened = (!loosened.is_empty()).then(|| Loosened {
        hosts: loosened.into_iter().cloned().collect(),
        pairs_at_once: most,
        threshold: threshold / most as f64,
        why: SHARED_THROUGHPUT_WHY.to_string(),
    });
    matrix.not_compared = left_out.iter().any(|&x| x).then(|| NotCompared {
        hosts: matrix
            .hosts
            .iter()
            .zip(&left_out)
            .filter(|(_, out)| **out)
            .map(|(h, _)| h.clone())
            .collect(),
        why: SHARED_WHY.to_string(),
    });
    let compared = |i: usize, j: usize| !left_out[i] && !left_out[j];
    let values: Vec<f64> = matrix
        .measured()
        .filter(|&(i, j, _)| compared(i, j))
        .map(|(_, _, v)| v)
        .collect();
    matrix.median = median(&values);
    matrix.flagged.clear();
    matrix.slow_hosts.clear();
    let Some(median) = matrix.median else {
        return;
    };
    let mut cells: Vec<(usize, usize, bool)> = Vec::new();
    let measured: Vec<(usize, usize, f64)> = matrix.measured().collect();
    for (i, j, v) in measured {
        if !compared(i, j) {
            continue;
        }
        let limit = threshold / at_once[i].max(at_once[j]) as f64;
        let slow = relative(v, median, matrix.higher_is_better) < limit;
        if slow {
            matrix
                .flagged
                .push([matrix.hosts[i].clone(), matrix.hosts[j].clone()]);
        }
        cells.push((i, j, slow));
    }
    matrix.slow_hosts = slow_hosts(&matrix.hosts, &cells);
}

/// The hosts slow on most of their links, worst first. Once a host is named, its links no
/// longer count against its peers (a peer of the slow host is not slow for that link).
/// `cells` holds each compared link as (from, to, slow).
fn slow_hosts(hosts: &[String], cells: &[(usize, usize, bool)]) -> Vec<SlowHost> {
    let n = hosts.len();
    let mut named = vec![false; n];
    let mut out = Vec::new();
    loop {
        let (mut links, mut slow) = (vec![0usize; n], vec![0usize; n]);
        for &(i, j, s) in cells {
            if named[i] || named[j] {
                continue;
            }
            for h in [i, j] {
                links[h] += 1;
                slow[h] += usize::from(s);
            }
        }
        let worst = (0..n)
            .filter(|&h| !named[h] && links[h] >= 2 && slow[h] * 2 > links[h])
            .max_by(|&a, &b| {
                (slow[a] as f64 / links[a] as f64).total_cmp(&(slow[b] as f64 / links[b] as f64))
            });
        let Some(h) = worst else { return out };
        named[h] = true;
        out.push(SlowHost {
            host: hosts[h].clone(),
            slow_links: slow[h],
            links: links[h],
        });
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
        let mut m = matrix("tcp-throughput", true, hosts.clone(), values.clone());
        flag_slow_links(&mut m, 0.9, &BTreeMap::new());
        assert_eq!(m.flagged.len(), 6);
        assert!(m.flagged.iter().all(|[a, b]| a == "b" || b == "b"));
        // b is slow on all of its links: the host, not each link; the others on 2 of 6.
        assert_eq!(
            m.slow_hosts,
            [SlowHost {
                host: "b".into(),
                slow_links: 6,
                links: 6
            }]
        );
        // On a machine the hosts share, a throughput through a shaper is still a truth, flagged
        // below 0.9 / 2 of the median with two pairs at once; a link at 0.6 of it is not.
        let mut values = vec![vec![Some(1000.0); 4]; 4];
        for (i, row) in values.iter_mut().enumerate() {
            row[i] = None;
        }
        values[0][2] = Some(600.0);
        values[1][3] = Some(30.0);
        values[3][1] = Some(30.0);
        let mut m = matrix("tcp-throughput", true, hosts.clone(), values);
        flag_slow_links(&mut m, 0.9, &on_one_machine(&hosts, 2));
        assert_eq!(
            m.flagged,
            [["b", "d"], ["d", "b"]].map(|l| l.map(String::from))
        );
        assert!(m.not_compared.is_none());
        let loosened = m.loosened.as_ref().unwrap();
        assert_eq!((loosened.pairs_at_once, loosened.threshold), (2, 0.45));
        flag_slow_links(&mut m, 0.9, &BTreeMap::new());
        assert_eq!(
            m.flagged.len(),
            3,
            "without the rule the CPU's share is a slow link"
        );
    }

    fn on_one_machine(hosts: &[String], at_once: usize) -> BTreeMap<String, usize> {
        hosts.iter().map(|h| (h.clone(), at_once)).collect()
    }

    #[test]
    fn the_peers_of_a_slow_host_are_not_slow_hosts_for_its_links() {
        // Three links each (a sampled matrix): d is slow on all; c on its link to d and on
        // one more, which alone does not make c slow.
        let hosts: Vec<String> = ["a", "b", "c", "d", "e", "f"].map(String::from).to_vec();
        let mut values = vec![vec![None; 6]; 6];
        let mut link = |i: usize, j: usize, v: f64| {
            values[i][j] = Some(v);
            values[j][i] = Some(v);
        };
        for (i, j) in [
            (0, 1),
            (1, 2),
            (2, 3),
            (3, 4),
            (4, 5),
            (5, 0),
            (0, 3),
            (1, 4),
            (2, 5),
        ] {
            link(i, j, 1000.0);
        }
        for (i, j) in [(2, 3), (3, 4), (0, 3)] {
            link(i, j, 50.0);
        }
        link(1, 2, 700.0);
        let mut m = matrix("tcp-throughput", true, hosts, values);
        flag_slow_links(&mut m, 0.9, &BTreeMap::new());
        let slow: Vec<&str> = m.slow_hosts.iter().map(|h| h.host.as_str()).collect();
        assert_eq!(slow, ["d"]);
    }

    fn matrix(op: &str, up: bool, hosts: Vec<String>, values: Vec<Vec<Option<f64>>>) -> Matrix {
        Matrix {
            metric: op.into(),
            unit: if up { "Mb/s" } else { "µs" }.into(),
            higher_is_better: up,
            counting: String::new(),
            hosts,
            values,
            cells: Vec::new(),
            median: None,
            flagged: Vec::new(),
            peak: None,
            op: op.into(),
            not_compared: None,
            loosened: None,
            slow_hosts: Vec::new(),
        }
    }

    #[test]
    fn latencies_between_hosts_of_one_machine_are_not_compared() {
        // Four hosts on one machine, as on the namespace cluster: the spinning ranks made half
        // the latencies 13 µs and the others up to 3.7 ms, though every link is the same.
        let hosts: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
        let mut values = vec![vec![Some(13.0); 4]; 4];
        for (i, row) in values.iter_mut().enumerate() {
            row[i] = None;
        }
        values[0][2] = Some(3700.0);
        values[2][0] = Some(3700.0);
        values[1][3] = Some(900.0);
        values[3][1] = Some(900.0);
        let mut m = matrix("mpi-pingpong-latency", false, hosts.clone(), values.clone());
        flag_slow_links(&mut m, 0.9, &BTreeMap::new());
        assert_eq!(
            m.flagged.len(),
            4,
            "without the rule the spinning reads as slow links"
        );
        flag_slow_links(&mut m, 0.9, &on_one_machine(&hosts, 2));
        assert!(m.flagged.is_empty() && m.slow_hosts.is_empty());
        assert_eq!(m.median, None, "nothing left to compare");
        let nc = m.not_compared.as_ref().unwrap();
        assert_eq!(nc.hosts, hosts);
        assert!(nc.why.contains("boot id"));
        assert_eq!(m.values, values, "the values stay");
        // Two of the four share a machine: the links among the other two are still judged.
        let mut m = matrix("mpi-pingpong-latency", false, hosts.clone(), values);
        flag_slow_links(&mut m, 0.9, &on_one_machine(&hosts[..2], 1));
        assert_eq!(m.not_compared.as_ref().unwrap().hosts, ["a", "b"]);
        assert_eq!(m.median, Some(13.0));
    }

    #[test]
    fn hosts_with_the_same_boot_id_are_grouped_as_one_machine() {
        let info = |boot: Option<&str>| {
            let mut i = crate::plan::Context::fixture().host;
            i.boot_id = boot.map(String::from);
            i
        };
        let hosts: BTreeMap<String, SysInfo> = [
            ("a", info(Some("b1"))),
            ("b", info(Some("b2"))),
            ("c", info(Some("b1"))),
            ("d", info(None)),
        ]
        .into_iter()
        .map(|(h, i)| (h.to_string(), i))
        .collect();
        let groups = shared_machines(&hosts, &BTreeMap::new());
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].hosts, ["a", "c"]);
        assert_eq!(groups[0].boot_id, "b1");
        // The machine id, where every host of the group read the same one, is recorded.
        let mut evidence = BTreeMap::new();
        let e = RunEvidence {
            machine_id: Some("m1".into()),
            ..RunEvidence::default()
        };
        evidence.insert("a".to_string(), e.clone());
        evidence.insert("c".to_string(), e);
        let groups = shared_machines(&hosts, &evidence);
        assert_eq!(groups[0].machine_id.as_deref(), Some("m1"));
    }

    /// A sampled matrix of many hosts is kept as its links (`cells`), its JSON grows with the
    /// hosts, not their square, and its slow link and slow host are still found.
    #[test]
    fn a_sampled_matrix_of_many_hosts_is_kept_as_links_and_still_judged() {
        let bytes = |n: usize| {
            let hosts: Vec<String> = (0..n).map(|h| format!("node-{h:04}")).collect();
            // The ring both ways and each host against the one three places on.
            let mut links = Vec::new();
            for i in 0..n {
                for step in [1, 3] {
                    let j = (i + step) % n;
                    let v = if (i, j) == (5, 6) {
                        2_000.0
                    } else {
                        9_400.0 + i as f64
                    };
                    links.push((i, j, v));
                    links.push((j, i, 9_400.0 + j as f64));
                }
            }
            // Host 40 slow on every link it has.
            for l in links.iter_mut().filter(|l| l.0 == 40 || l.1 == 40) {
                l.2 = 1_000.0;
            }
            let (values, cells) = Matrix::store(n, links);
            let mut m = matrix("tcp-throughput", true, hosts, values);
            m.cells = cells;
            flag_slow_links(&mut m, 0.8, &BTreeMap::new());
            let len = serde_json::to_string(&m).unwrap().len();
            (m, len)
        };
        let (small, _) = bytes(Matrix::DENSE_MAX_HOSTS);
        assert!(small.cells.is_empty() && small.values.len() == Matrix::DENSE_MAX_HOSTS);
        let (m, at_200) = bytes(200);
        let (_, at_800) = bytes(800);
        assert!(m.values.is_empty(), "200 hosts are kept dense");
        assert_eq!(m.cells.len(), 200 * 4);
        assert!(m.grid().is_none());
        assert_eq!(m.measured().count(), m.cells.len());
        let ratio = at_800 as f64 / at_200 as f64;
        assert!(
            (3.5..4.5).contains(&ratio),
            "4 x the hosts, {ratio:.2} x the bytes"
        );
        let flagged = |from: &str, to: &str| m.flagged.iter().any(|[f, t]| f == from && t == to);
        assert!(flagged("node-0005", "node-0006"), "{:?}", m.flagged);
        assert!(!flagged("node-0006", "node-0005"));
        let slow: Vec<&str> = m.slow_hosts.iter().map(|h| h.host.as_str()).collect();
        assert_eq!(slow, ["node-0040"]);
        // And back from JSON, the same matrix.
        let back: Matrix = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back, m);
    }
}
