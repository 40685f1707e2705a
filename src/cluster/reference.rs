//! `peakbench cluster run --reference`: hpcc over the same ranks, and mpi4py's ping-pong where
//! it has one, beside peakbench's own figures.
//!
//! How hpcc gets the same ranks: a running MPI job cannot simply host another one. Spawning
//! hpcc from inside (`MPI_Comm_spawn`) needs free slots on every host (the job holds them) and
//! ties hpcc's `MPI_Finalize` to the job's; so rank 0, after the job's own phases and while
//! every other rank sleeps between probes (taking no core), starts `mpirun` itself, as a
//! second job on the same hosts: the job's hosts with their ranks each (`--host a:2,b:2`), the
//! job's launch parameters (the MCA parameters `mpirun` handed the ranks as `OMPI_MCA_*`
//! variables: the rsh agent, the BTLs, the interfaces, [`LAUNCH_PARAMETERS`]), and none of the
//! job's own identity (every other `OMPI_*`, `PMIX_*`, `ORTE_*` variable, which would make the
//! new `mpirun` think it runs inside a job). Under Slurm, `mpirun` inside the allocation
//! launches through Slurm as usual (not tested here: no Slurm on this machine).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::cpu::reference::{HPCC, HPL_NB, MPIRUN, hpcc_input};
use crate::reference::{Invocation, Reading, Source, Tool};
use crate::result::{BenchResult, ClusterReference, Reference};

/// The MCA parameters (after `OMPI_MCA_`) of the job's launch that hpcc's launch repeats: how
/// daemons are started and which transports and interfaces carry the traffic. Prefixes.
pub const LAUNCH_PARAMETERS: [&str; 9] = [
    "plm_rsh_", "btl", "oob_", "pml", "mtl", "coll", "osc", "routed", "plm",
];

/// The job's launch parameters, from this rank's environment: `(name, value)` for every
/// `OMPI_MCA_name` whose name starts with one of [`LAUNCH_PARAMETERS`].
pub fn launch_parameters(env: impl Iterator<Item = (String, String)>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = env
        .filter_map(|(k, v)| k.strip_prefix("OMPI_MCA_").map(|n| (n.to_string(), v)))
        .filter(|(n, _)| LAUNCH_PARAMETERS.iter().any(|p| n.starts_with(p)))
        .collect();
    out.sort();
    out
}

/// HPL's order for `ranks` ranks: 1500 × √ranks, a multiple of the block size (the matrix,
/// 8 N² bytes, grows with the ranks: 18 MB per rank). A small problem: hpcc's other tests
/// (STREAM, PTRANS, RandomAccess, FFT) are sized from it, and the figures compared are the
/// ping-pong's; its HPL is a sanity figure, not a tuned HPL run.
pub fn hpl_order(ranks: usize) -> u64 {
    let n = 1500.0 * (ranks.max(1) as f64).sqrt();
    ((n / f64::from(HPL_NB)).round().max(1.0) as u64) * u64::from(HPL_NB)
}

/// mpirun's arguments for hpcc on `hosts` (name, ranks), with the job's `mca` parameters.
pub fn hpcc_args(hosts: &[(String, usize)], mca: &[(String, String)], root: bool) -> Vec<String> {
    let ranks: usize = hosts.iter().map(|h| h.1).sum();
    let mut args = Vec::new();
    if root {
        args.push("--allow-run-as-root".to_string());
    }
    args.extend(["-np".to_string(), ranks.to_string(), "--host".to_string()]);
    let list: Vec<String> = hosts.iter().map(|(h, k)| format!("{h}:{k}")).collect();
    args.push(list.join(","));
    for (name, value) in mca {
        args.extend(["--mca".to_string(), name.clone(), value.clone()]);
    }
    args.push(HPCC.program.to_string());
    args
}

/// The `key=value` lines of hpcc's summary (the end of `hpccoutf.txt`) that are numbers.
pub fn parse_summary(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter_map(|l| l.trim().split_once('='))
        .filter_map(|(k, v)| Some((k.to_string(), v.trim().parse::<f64>().ok()?)))
        .filter(|(_, v)| v.is_finite())
        .collect()
}

/// What one hpcc run over the job's ranks gave: HPL's reference (value in GFLOP/s, or why
/// none) and its summary's figures.
pub struct Hpcc {
    pub hpl: Reference,
    pub summary: BTreeMap<String, f64>,
}

/// Runs hpcc over `hosts` (name, ranks) as a second `mpirun` job with the launch parameters
/// `mca`; `Err` only when interrupted.
pub fn run_hpcc(hosts: &[(String, usize)], mca: &[(String, String)]) -> anyhow::Result<Hpcc> {
    let ranks: usize = hosts.iter().map(|h| h.1).sum();
    let n = hpl_order(ranks);
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let args = hpcc_args(hosts, mca, root);
    // The solve at a pessimistic 1 GFLOP/s per rank, plus hpcc's other tests.
    let seconds = 2.0 / 3.0 * (n as f64).powi(3) / (1e9 * ranks as f64) + 300.0;
    let mut text = String::new();
    let mut invocation = Invocation::new(HPCC, args, Duration::from_secs_f64(seconds), |t| {
        text = t.to_string();
        let tflops =
            crate::cpu::reference::parse_hpl_tflops(t).ok_or("no HPL_Tflops in hpccoutf.txt")?;
        Ok(Reading {
            value: tflops * 1000.0,
            note: Some(format!(
                "HPL of order {n} on a 1 × {ranks} grid over the job's ranks; its speed follows \
                 the BLAS hpcc is linked with"
            )),
        })
    })
    .launched_by(MPIRUN)
    .input_file(
        "hpccinf.txt",
        hpcc_input(n, ranks),
        format!("N={n}, NB={HPL_NB}, P=1, Q={ranks}"),
    )
    .env("OMP_NUM_THREADS", "1")
    .env("OPENBLAS_NUM_THREADS", "1")
    .read_from(Source::File("hpccoutf.txt".into()));
    for prefix in ["OMPI_", "PMIX_", "ORTE_", "OPAL_"] {
        invocation = invocation.env_remove_prefixed(prefix);
    }
    let hpl = invocation.run()?;
    Ok(Hpcc {
        hpl,
        summary: parse_summary(&text),
    })
}

/// mpi4py's benchmark module as a reference tool.
pub const MPI4PY: Tool = Tool {
    name: "mpi4py.bench pingpong",
    program: "python3",
    install: "apt-get install python3-mpi4py (4.0 or later for its pingpong)",
};

/// mpi4py's ping-pong: whether some `python3` on PATH has `mpi4py.bench pingpong`; the
/// reference records what was found (peakbench does not run it: the version of mpi4py with a
/// ping-pong, 4.0, is not on this machine to read its output from).
pub fn mpi4py() -> Reference {
    let probe =
        "import mpi4py, mpi4py.bench as b; print(mpi4py.__version__, hasattr(b, 'pingpong'))";
    let command = format!("python3 -c \"{probe}\"");
    let mut seen = Vec::new();
    for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
        let exe = dir.join("python3");
        let Ok(real) = std::fs::canonicalize(&exe) else {
            continue;
        };
        if seen.contains(&real) {
            continue;
        }
        seen.push(real);
        let Ok(out) = std::process::Command::new(&exe)
            .args(["-c", probe])
            .env_remove("PYTHONPATH")
            .stdin(std::process::Stdio::null())
            .output()
        else {
            continue;
        };
        let said = String::from_utf8_lossy(&out.stdout);
        let mut words = said.split_whitespace();
        if let (true, Some(version), Some(has)) = (out.status.success(), words.next(), words.next())
        {
            let why = if has == "True" {
                format!(
                    "mpi4py {version} ({}) has a pingpong in `python3 -m mpi4py.bench`; peakbench \
                     does not run it yet",
                    exe.display()
                )
            } else {
                format!(
                    "mpi4py {version} ({}) has no pingpong in `python3 -m mpi4py.bench` (only \
                     helloworld and ringtest before 4.0): hpcc is the MPI reference",
                    exe.display()
                )
            };
            return MPI4PY.failed(&command, why);
        }
    }
    MPI4PY.failed(&command, "no python3 on PATH has mpi4py")
}

/// The figure of the links of the matrix for `op`, counted as hpcc counts (each link's best
/// timed batch: the smallest latency, the largest bandwidth, `best_is_largest`), then the
/// smallest or the largest over the links.
fn over_links(
    results: &[BenchResult],
    op: &str,
    best_is_largest: bool,
    largest: bool,
) -> Option<f64> {
    let values = results
        .iter()
        .filter(|r| r.op == op && r.params.other.contains_key("peer"))
        .map(|r| {
            if best_is_largest {
                r.stats.max
            } else {
                r.stats.min
            }
        });
    extreme(values, largest)
}

fn extreme(values: impl Iterator<Item = f64>, largest: bool) -> Option<f64> {
    if largest {
        values.reduce(f64::max)
    } else {
        values.reduce(f64::min)
    }
}

/// hpcc's bandwidth message: 2,000,000 B.
const HPCC_BANDWIDTH_BYTES: u64 = 2_000_000;

/// Each link's best ping-pong bandwidth at the size of its curve nearest hpcc's message (2 MiB
/// of the powers of two: 5 % above hpcc's), then the largest or the smallest over the links.
/// The curve is in the latency result's `params.curve`; a link without best batches there (a
/// document older than them) has no value.
fn bandwidth_near_hpcc(results: &[BenchResult], largest: bool) -> Option<(f64, u64)> {
    let mut bytes_seen = None;
    let values = results
        .iter()
        .filter(|r| r.op == "mpi-pingpong-latency" && r.params.other.contains_key("peer"))
        .filter_map(|r| {
            let curve = r.params.other.get("curve")?.as_array()?;
            let point = curve.iter().min_by_key(|p| {
                p["bytes"]
                    .as_u64()
                    .map_or(u64::MAX, |b| b.abs_diff(HPCC_BANDWIDTH_BYTES))
            })?;
            bytes_seen = point["bytes"].as_u64();
            point["bandwidth_best_gbs"].as_f64()
        })
        .collect::<Vec<_>>();
    extreme(values.into_iter(), largest).zip(bytes_seen)
}

/// peakbench's figures beside hpcc's (and mpi4py's note): HPL over all ranks (peakbench has no
/// distributed solve: recorded without a ratio), the MPI ping-pong's latency and bandwidth of
/// the fastest and the slowest link against hpcc's `Min`/`MaxPingPong…`. hpcc counts each
/// pair's best measurement (its minimal time); so does the comparison: each link's best timed
/// batch (the links' headline values in the matrix are their medians).
pub fn compare(results: &[BenchResult], hpcc: &Hpcc, mpi4py: Reference) -> Vec<ClusterReference> {
    let mut out = vec![ClusterReference {
        metric: "HPL over all ranks (peakbench has no distributed solve; the hosts' own \
                 results are in the spread)"
            .into(),
        unit: "GFLOP/s".into(),
        value: None,
        reference: hpcc.hpl.clone(),
    }];
    let rows = [
        (
            "MPI ping-pong latency, 8 B, best batch: the fastest link",
            "µs",
            "mpi-pingpong-latency",
            false,
            false,
            "MinPingPongLatency_usec",
        ),
        (
            "MPI ping-pong latency, 8 B, best batch: the slowest link",
            "µs",
            "mpi-pingpong-latency",
            false,
            true,
            "MaxPingPongLatency_usec",
        ),
    ];
    let tool = Tool {
        name: "hpcc PingPong",
        ..HPCC
    };
    let latency = rows.map(|(metric, unit, op, best_is_largest, largest, key)| {
        (
            metric.to_string(),
            unit,
            over_links(results, op, best_is_largest, largest),
            key,
        )
    });
    // Bandwidth at the size nearest hpcc's (the largest size, 4 MiB, is the matrix's headline;
    // on the namespace cluster a 4 MiB ping-pong read 3-16 % below a 2 MB one, in a plain C
    // ping-pong as in peakbench's). hpcc's figure is still its best *single* round trip, where
    // peakbench's is its best batch (docs/cluster.md).
    let bandwidth = [
        ("the fastest link", true, "MaxPingPongBandwidth_GBytes"),
        ("the slowest link", false, "MinPingPongBandwidth_GBytes"),
    ]
    .map(|(which, largest, key)| {
        let ours = bandwidth_near_hpcc(results, largest);
        let size = ours.map_or("2 MiB".to_string(), |(_, bytes)| {
            crate::units::format_size(bytes)
        });
        (
            format!(
                "MPI ping-pong bandwidth, best batch: {which} (peakbench at {size}, hpcc at \
                 2,000,000 B)"
            ),
            "GB/s",
            ours.map(|(v, _)| v),
            key,
        )
    });
    for (metric, unit, ours, key) in latency.into_iter().chain(bandwidth) {
        let theirs = hpcc.summary.get(key).copied().filter(|v| *v > 0.0);
        let mut reference = match theirs {
            Some(v) => tool.value(&hpcc.hpl.command, v, Some(format!("hpcc's {key}"))),
            None => tool.failed(
                &hpcc.hpl.command,
                match &hpcc.hpl.note {
                    Some(why) if hpcc.hpl.value.is_none() => why.clone(),
                    _ => format!("no positive {key} in hpccoutf.txt (one rank has no pair)"),
                },
            ),
        };
        reference.ratio = ours.zip(theirs).map(|(o, t)| o / t);
        out.push(ClusterReference {
            metric,
            unit: unit.into(),
            value: ours,
            reference,
        });
    }
    out.push(ClusterReference {
        metric: "MPI ping-pong latency, 8 B, best batch: the fastest link".into(),
        unit: "µs".into(),
        value: over_links(results, "mpi-pingpong-latency", false, false),
        reference: mpi4py,
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_launch_parameters_are_the_jobs_transports_not_its_identity() {
        let env = [
            ("OMPI_MCA_plm_rsh_agent", "/tmp/agent.sh"),
            ("OMPI_MCA_btl", "tcp,self"),
            ("OMPI_MCA_btl_tcp_if_include", "10.1.0.0/24"),
            ("OMPI_MCA_oob_tcp_if_include", "10.1.0.0/24"),
            ("OMPI_MCA_orte_hnp_uri", "123.0;tcp://10.1.0.1:4000"),
            ("OMPI_MCA_ess", "^singleton"),
            ("OMPI_COMM_WORLD_RANK", "0"),
            ("PATH", "/usr/bin"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let mca = launch_parameters(env.into_iter());
        let names: Vec<&str> = mca.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "btl",
                "btl_tcp_if_include",
                "oob_tcp_if_include",
                "plm_rsh_agent"
            ]
        );
        let args = hpcc_args(&[("a".into(), 2), ("b".into(), 1)], &mca, true);
        let line = args.join(" ");
        assert!(
            line.starts_with("--allow-run-as-root -np 3 --host a:2,b:1 --mca btl tcp,self"),
            "{line}"
        );
        assert!(
            line.ends_with("--mca plm_rsh_agent /tmp/agent.sh hpcc"),
            "{line}"
        );
    }

    #[test]
    fn hpl_grows_with_the_ranks_in_whole_blocks() {
        assert_eq!(hpl_order(1) % u64::from(HPL_NB), 0);
        assert!(hpl_order(4) > hpl_order(1));
        assert!((hpl_order(4) as f64 / 3000.0 - 1.0).abs() < 0.05);
    }

    #[test]
    fn the_summary_is_read_and_the_links_compared_with_it() {
        let text = "Begin of Summary section.\nHPL_Tflops=0.0123\nMinPingPongLatency_usec=12.5\n\
                    MaxPingPongLatency_usec=25\nMaxPingPongBandwidth_GBytes=2.5\n\
                    MinPingPongBandwidth_GBytes=1.25\nsuccess=1\nVersionMajor=1\nName=x\n";
        let summary = parse_summary(text);
        assert_eq!(summary["MinPingPongLatency_usec"], 12.5);
        assert!(!summary.contains_key("Name"));
        let hpcc = Hpcc {
            hpl: HPCC.value("mpirun hpcc", 12.3, None),
            summary,
        };
        let fixture: crate::result::Report = serde_json::from_str(
            &std::fs::read_to_string(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/report.json"
            ))
            .unwrap(),
        )
        .unwrap();
        let mut link = fixture.results[0].clone();
        link.op = "mpi-pingpong-latency".into();
        link.params.other.insert("peer".into(), "b".into());
        // Each link's best batch is compared: the smallest latency, the largest bandwidth.
        (link.value, link.stats.min, link.stats.max) = (16.0, 15.0, 17.0);
        // The bandwidth is compared at the curve's size nearest hpcc's 2,000,000 B: 2 MiB.
        let curve = |near: f64, far: f64| {
            serde_json::json!([
                {"bytes": 1 << 20, "bandwidth_gbs": 9.0, "bandwidth_best_gbs": 9.5},
                {"bytes": 2 << 20, "bandwidth_gbs": near - 0.1, "bandwidth_best_gbs": near},
                {"bytes": 4 << 20, "bandwidth_gbs": far - 0.1, "bandwidth_best_gbs": far},
            ])
        };
        link.params.other.insert("curve".into(), curve(2.0, 7.0));
        let mut slow = link.clone();
        (slow.value, slow.stats.min, slow.stats.max) = (31.0, 30.0, 32.0);
        slow.params.other.insert("curve".into(), curve(1.5, 7.0));
        // The 4 MiB headline result is not what hpcc is compared with.
        let mut bw = link.clone();
        bw.op = "mpi-pingpong-bandwidth".into();
        (bw.value, bw.stats.min, bw.stats.max) = (6.9, 6.8, 7.0);
        let rows = compare(&[link, slow, bw], &hpcc, MPI4PY.failed("", "none"));
        assert_eq!(rows[0].reference.value, Some(12.3));
        assert_eq!(rows[0].reference.ratio, None);
        assert_eq!(rows[1].value, Some(15.0));
        assert_eq!(rows[1].reference.ratio, Some(15.0 / 12.5));
        assert_eq!(rows[2].value, Some(30.0));
        assert_eq!(rows[2].reference.ratio, Some(30.0 / 25.0));
        assert_eq!(rows[3].reference.ratio, Some(2.0 / 2.5));
        assert_eq!(rows[4].reference.ratio, Some(1.5 / 1.25));
        assert!(
            rows[3].metric.contains("peakbench at 2 MiB"),
            "{}",
            rows[3].metric
        );
        assert_eq!(rows[5].reference.note.as_deref(), Some("none"));
    }
}
