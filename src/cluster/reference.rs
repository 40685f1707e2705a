//! `peakbench cluster run --reference`: hpcc over the same ranks, and mpi4py's ping-pong where
//! it has one, beside peakbench's own figures.
//!
//! How hpcc gets the same ranks: a running MPI job cannot simply host another one. Spawning hpcc
//! from inside (`MPI_Comm_spawn`) needs free slots on every host (the job holds them) and ties
//! hpcc's `MPI_Finalize` to the job's; so rank 0, after the job's own phases and while every other
//! rank sleeps between probes (taking no core), starts `mpirun` itself, as a second job on the same
//! hosts: the job's hosts with their ranks each (`--host a:2,b:2`), the job's launch parameters
//! (the MCA parameters `mpirun` handed the ranks as `OMPI_MCA_*` variables: the rsh agent, the
//! BTLs, the interfaces, a binding the user gave, [`LAUNCH_PARAMETERS`]; unbound where the user
//! gave none, as the job's measuring ranks run), and none of the job's own identity (every other
//! `OMPI_*`, `PMIX_*`, `ORTE_*` variable, which would make the new `mpirun` think it runs inside a
//! job). Under Slurm, `mpirun` inside the allocation launches through Slurm as usual
//! (tests/slurm.rs does not run `--reference`).

// Without the `mpi` feature no cluster job runs, but this module is still built: its tests run
// in every build, and the exporters read the documents it describes.
#![cfg_attr(not(feature = "mpi"), allow(dead_code))]

use std::collections::BTreeMap;
use std::time::Duration;

use crate::cpu::reference::{HPCC, HPL_NB, MPIRUN, hpcc_input};
use crate::reference::{Invocation, Reading, Source, ToolSpec};
use crate::result::{BenchResult, ClusterReference, Reference};

/// The MCA parameters (after `OMPI_MCA_`) of the job's launch that hpcc's launch repeats: how
/// daemons are started, which transports and interfaces carry the traffic, and the binding the
/// user asked for (`--bind-to`). Prefixes.
pub(crate) const LAUNCH_PARAMETERS: [&str; 10] = [
    "plm_rsh_", "btl", "oob_", "pml", "mtl", "coll", "osc", "routed", "plm", BINDING,
];

/// The MCA parameter `mpirun --bind-to` sets.
const BINDING: &str = "hwloc_base_binding_policy";

/// The job's launch parameters, from this rank's environment: `(name, value)` for every
/// `OMPI_MCA_name` whose name starts with one of [`LAUNCH_PARAMETERS`].
pub(crate) fn launch_parameters(
    env: impl Iterator<Item = (String, String)>,
) -> Vec<(String, String)> {
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
pub(crate) fn hpl_order(ranks: usize) -> u64 {
    let n = 1500.0 * (ranks.max(1) as f64).sqrt();
    ((n / f64::from(HPL_NB)).round().max(1.0) as u64) * u64::from(HPL_NB)
}

/// mpirun's arguments for hpcc on `hosts` (name, ranks), with the job's `mca` parameters.
pub(crate) fn hpcc_args(
    hosts: &[(String, usize)],
    mca: &[(String, String)],
    root: bool,
) -> Vec<String> {
    mpirun_args(hosts, mca, root, &[HPCC.program.to_string()])
}

/// mpirun's arguments for `program` (with its arguments) on `hosts` (name, ranks), with the
/// job's `mca` parameters.
fn mpirun_args(
    hosts: &[(String, usize)],
    mca: &[(String, String)],
    root: bool,
    program: &[String],
) -> Vec<String> {
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
    // The job's measuring ranks run unbound unless the user bound them (see
    // `cluster::mpi::job`); so do the reference's, where mpirun's default would bind each to a
    // core (for 2 ranks or fewer): hosts that share a machine would share that core.
    if !mca.iter().any(|(name, _)| name == BINDING) {
        args.extend(["--bind-to".to_string(), "none".to_string()]);
    }
    args.extend_from_slice(program);
    args
}

/// The `key=value` lines of hpcc's summary (the end of `hpccoutf.txt`) that are numbers.
pub(crate) fn parse_summary(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter_map(|l| l.trim().split_once('='))
        .filter_map(|(k, v)| Some((k.to_string(), v.trim().parse::<f64>().ok()?)))
        .filter(|(_, v)| v.is_finite())
        .collect()
}

/// What one hpcc run over the job's ranks gave: HPL's reference (value in GFLOP/s, or why
/// none) and its summary's figures.
pub(crate) struct Hpcc {
    pub hpl: Reference,
    pub summary: BTreeMap<String, f64>,
}

/// Runs hpcc over `hosts` (name, ranks) as a second `mpirun` job with the launch parameters
/// `mca`; `Err` only when interrupted.
pub(crate) fn run_hpcc(
    hosts: &[(String, usize)],
    mca: &[(String, String)],
) -> anyhow::Result<Hpcc> {
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
pub(crate) const MPI4PY: ToolSpec = ToolSpec {
    name: "mpi4py.bench pingpong",
    program: "python3",
    install: "pip install --no-binary mpi4py 'mpi4py>=4' (Debian's python3-mpi4py 3.1.4 has no pingpong)",
};

/// The first `python3` on PATH whose mpi4py has `python3 -m mpi4py.bench pingpong` (4.0 and
/// later), or the reference that says why there is none.
///
/// The probe runs Python isolated (`-I`: neither the working directory nor the user's
/// site-packages nor `PYTHON*` variables are on its path, so a `./mpi4py` planted where
/// peakbench was started, often as root, is never imported), in a private empty directory of
/// its own, in a session of its own, killed with all it started after [`PROBE_TIMEOUT`] or on
/// Ctrl-C ([`crate::reference::run_for_at_most`]). The ping-pong itself runs with `-I` too, so
/// it finds the mpi4py the probe found.
pub(crate) fn find_mpi4py() -> Result<std::path::PathBuf, Reference> {
    let probe =
        "import mpi4py, mpi4py.bench as b; print(mpi4py.__version__, hasattr(b, 'pingpong'))";
    let command = format!("python3 -I -c \"{probe}\"");
    let Ok(private) = tempfile::Builder::new()
        .prefix("peakbench-probe-")
        .tempdir()
    else {
        return Err(MPI4PY.failed(&command, "no private directory to run the probe in"));
    };
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
        let Ok(out) = crate::reference::run_for_at_most(
            std::process::Command::new(&exe)
                .args(["-I", "-c", probe])
                .env_remove("PYTHONPATH")
                .current_dir(private.path()),
            "the mpi4py probe",
            PROBE_TIMEOUT,
        ) else {
            continue;
        };
        let said = out.stdout.as_str();
        let mut words = said.split_whitespace();
        if let (true, Some(version), Some(has)) = (out.status.success(), words.next(), words.next())
        {
            if has == "True" {
                return Ok(exe);
            }
            return Err(MPI4PY.failed(
                &command,
                format!(
                    "mpi4py {version} ({}) has no pingpong in `python3 -m mpi4py.bench` (only \
                     helloworld and ringtest before 4.0): hpcc is the MPI reference",
                    exe.display()
                ),
            ));
        }
    }
    Err(MPI4PY.failed(&command, "no python3 on PATH has mpi4py"))
}

/// The longest the mpi4py probe may take (an import of mpi4py is well under a second).
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

/// What mpi4py's ping-pong gave between ranks 0 and 1: the reference of its latency at 8 B
/// (µs, or why there is none), its bandwidth per message size (GB/s), and the two hosts.
pub(crate) struct Mpi4py {
    pub latency: Reference,
    pub bandwidth_gbs: BTreeMap<u64, f64>,
    pub pair: Option<(String, String)>,
}

impl Mpi4py {
    /// No run: `why` says why.
    pub(crate) fn absent(why: Reference) -> Mpi4py {
        Mpi4py {
            latency: why,
            bandwidth_gbs: BTreeMap::new(),
            pair: None,
        }
    }
}

/// mpi4py's ping-pong's lines: message size (B) → its mean one-way time (s), the half round
/// trip averaged over all its timed round trips.
pub(crate) fn parse_pingpong(text: &str) -> BTreeMap<u64, f64> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace().filter(|w| *w != "|");
            let size = words.next()?.parse::<u64>().ok()?;
            let _bandwidth = words.next()?;
            let seconds = words.next()?.parse::<f64>().ok()?;
            (seconds > 0.0).then_some((size, seconds))
        })
        .collect()
}

/// The largest message of mpi4py's ping-pong: the matrix's headline size.
const MPI4PY_MAX_BYTES: u64 = 4 << 20;

/// Runs `python -m mpi4py.bench pingpong` (8 B to 4 MiB, 100 timed round trips from 2 MiB up
/// instead of its 10) over the job's hosts as a second `mpirun` job, as hpcc runs; its ranks 0
/// and 1 are on the first two hosts. `Err` only when interrupted.
pub(crate) fn run_mpi4py(
    hosts: &[(String, usize)],
    mca: &[(String, String)],
    python: &std::path::Path,
) -> anyhow::Result<Mpi4py> {
    // Ranks 0 and 1 on one host (several ranks there) are no link of the matrix.
    let pair = match hosts {
        [a, b, ..] if a.1 == 1 => Some((a.0.clone(), b.0.clone())),
        _ => None,
    };
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let program: Vec<String> = [
        &python.display().to_string(),
        "-I",
        "-m",
        "mpi4py.bench",
        "pingpong",
        "-a",
        "none",
        "-m",
        "8",
        "-n",
        &MPI4PY_MAX_BYTES.to_string(),
        "--skip-huge",
        "10",
        "--loop-huge",
        "100",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let args = mpirun_args(hosts, mca, root, &program);
    let mut rows = BTreeMap::new();
    let mut invocation = Invocation::new(MPI4PY, args, Duration::from_secs(300), |text| {
        rows = parse_pingpong(text);
        let one_way = rows.get(&8).ok_or("no 8-byte line in its output")?;
        Ok(Reading {
            value: one_way * 1e6,
            note: Some(
                "mpi4py's mean one-way time (half a round trip) over its 10 000 timed round \
                 trips at 8 B, ranks 0 and 1"
                    .into(),
            ),
        })
    })
    .launched_by(MPIRUN);
    for prefix in ["OMPI_", "PMIX_", "ORTE_", "OPAL_"] {
        invocation = invocation.env_remove_prefixed(prefix);
    }
    let latency = invocation.run()?;
    Ok(Mpi4py {
        latency,
        bandwidth_gbs: rows
            .iter()
            .map(|(&size, &seconds)| (size, size as f64 / seconds / 1e9))
            .collect(),
        pair,
    })
}

/// The matrix's result for `op` on the link between `a` and `b`, measured from either end.
fn link<'r>(
    results: &'r [BenchResult],
    op: &str,
    (a, b): &(String, String),
) -> Option<&'r BenchResult> {
    results.iter().find(|r| {
        let peer = r.params.peer();
        r.op == op
            && ((r.host == *a && peer == Some(b.as_str()))
                || (r.host == *b && peer == Some(a.as_str())))
    })
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
pub(crate) fn against_tools(
    results: &[BenchResult],
    hpcc: &Hpcc,
    mpi4py: Mpi4py,
) -> Vec<ClusterReference> {
    let mut out = hpcc_rows(results, hpcc);
    out.extend(mpi4py_rows(results, mpi4py));
    out
}

/// HPL's row (no ratio), then the ping-pong's best batches of the fastest and the slowest
/// link against hpcc's `Min`/`MaxPingPong…`.
fn hpcc_rows(results: &[BenchResult], hpcc: &Hpcc) -> Vec<ClusterReference> {
    let mut out = vec![ClusterReference {
        metric: "HPL over all ranks (peakbench has no distributed solve; the hosts' own \
                 results are in the spread)"
            .into(),
        unit: "GFLOP/s".into(),
        value: None,
        reference: hpcc.hpl.clone(),
    }];
    let tool = ToolSpec {
        name: "hpcc PingPong",
        ..HPCC
    };
    for (metric, unit, ours, key) in pingpong_figures(results) {
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
    out
}

/// Our side of the ping-pong rows hpcc is compared on: (what, unit, our value, hpcc's key),
/// the fastest and the slowest link's latency, then their bandwidth.
fn pingpong_figures(
    results: &[BenchResult],
) -> Vec<(String, &'static str, Option<f64>, &'static str)> {
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
    latency.into_iter().chain(bandwidth).collect()
}

/// mpi4py counts a sustained ping-pong (a mean over all its round trips), as peakbench's median
/// batch does: the link it ran on, median against mean, latency and bandwidth.
fn mpi4py_rows(results: &[BenchResult], mpi4py: Mpi4py) -> Vec<ClusterReference> {
    let mut out = Vec::new();
    let between = mpi4py
        .pair
        .as_ref()
        .map_or("ranks 0 and 1".to_string(), |(a, b)| format!("{a}–{b}"));
    let on_link = |op| mpi4py.pair.as_ref().and_then(|p| link(results, op, p));
    let mut latency = mpi4py.latency.clone();
    let ours = on_link("mpi-pingpong-latency").map(|r| r.value);
    latency.ratio = ours.zip(latency.value).map(|(o, t)| o / t);
    out.push(ClusterReference {
        metric: format!("MPI ping-pong latency, 8 B, median batch: {between} (mpi4py: its mean)"),
        unit: "µs".into(),
        value: ours,
        reference: latency,
    });
    let ours = on_link("mpi-pingpong-bandwidth").map(|r| r.value);
    let mut bandwidth = match mpi4py.bandwidth_gbs.get(&MPI4PY_MAX_BYTES) {
        Some(&gbs) => MPI4PY.value(
            &mpi4py.latency.command,
            gbs,
            Some("4 MiB ÷ mpi4py's mean one-way time over its 100 timed round trips".into()),
        ),
        None => mpi4py.latency.clone(),
    };
    bandwidth.ratio = ours.zip(bandwidth.value).map(|(o, t)| o / t);
    out.push(ClusterReference {
        metric: format!(
            "MPI ping-pong bandwidth, 4 MiB, median batch: {between} (mpi4py: its mean)"
        ),
        unit: "GB/s".into(),
        value: ours,
        reference: bandwidth,
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
            ("OMPI_MCA_orte_bound_at_launch", "1"),
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
            line.ends_with("--mca plm_rsh_agent /tmp/agent.sh --bind-to none hpcc"),
            "{line}"
        );
        // A binding the user gave the job is the reference's too.
        let env = [("OMPI_MCA_hwloc_base_binding_policy", "core")]
            .map(|(k, v)| (k.to_string(), v.to_string()));
        let mca = launch_parameters(env.into_iter());
        let line = hpcc_args(&[("a".into(), 1)], &mca, false).join(" ");
        assert_eq!(
            line,
            "-np 1 --host a:1 --mca hwloc_base_binding_policy core hpcc"
        );
    }

    #[test]
    fn hpl_grows_with_the_ranks_in_whole_blocks() {
        assert_eq!(hpl_order(1) % u64::from(HPL_NB), 0);
        assert!(hpl_order(4) > hpl_order(1));
        assert!((hpl_order(4) as f64 / 3000.0 - 1.0).abs() < 0.05);
    }

    /// A result of the captured report fixture, to make links of.
    fn a_result() -> BenchResult {
        let fixture: crate::result::Report = serde_json::from_str(
            &std::fs::read_to_string(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/report.json"
            ))
            .unwrap(),
        )
        .unwrap();
        fixture.results[0].clone()
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
        let mut link = a_result();
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
        let rows = against_tools(
            &[link, slow, bw],
            &hpcc,
            Mpi4py::absent(MPI4PY.failed("", "none")),
        );
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
        assert_eq!(rows[6].reference.note.as_deref(), Some("none"));
    }

    /// The lines of mpi4py 4.1.2's ping-pong as it printed them over two ranks here.
    const MPI4PY_OUTPUT: &str = "# MPI PingPong Test
# Size [B]  Bandwidth [MB/s] | Time Mean [s] ± StdDev [s]  Samples
         8              1.11 | 7.2249928e-06 ± 1.2396e-05    10000
   2097152           1698.64 | 1.2346079e-03 ± 2.3113e-05       10
   4194304           1817.68 | 2.3075033e-03 ± 1.0691e-04       10
";

    #[test]
    fn mpi4py_is_compared_on_the_link_it_ran_on_median_against_mean() {
        let rows = parse_pingpong(MPI4PY_OUTPUT);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[&8], 7.2249928e-06);
        assert_eq!(rows[&(4 << 20)], 2.3075033e-03);
        // The link a-b measured from b, and another link that is not mpi4py's.
        let mut lat = a_result();
        (lat.op, lat.host, lat.value) = ("mpi-pingpong-latency".into(), "b".into(), 7.0);
        lat.params.other.insert("peer".into(), "a".into());
        let mut other = lat.clone();
        other.params.other.insert("peer".into(), "c".into());
        other.value = 99.0;
        let mut bw = lat.clone();
        (bw.op, bw.value) = ("mpi-pingpong-bandwidth".into(), 2.0);
        let hpcc = Hpcc {
            hpl: HPCC.failed("mpirun hpcc", "not installed"),
            summary: BTreeMap::new(),
        };
        let run = Mpi4py {
            latency: MPI4PY.value("mpirun python3 -m mpi4py.bench pingpong", 7.2249928, None),
            bandwidth_gbs: rows
                .iter()
                .map(|(&b, &s)| (b, b as f64 / s / 1e9))
                .collect(),
            pair: Some(("a".into(), "b".into())),
        };
        let refs = against_tools(&[other, lat, bw], &hpcc, run);
        let (latency, bandwidth) = (&refs[5], &refs[6]);
        assert!(latency.metric.contains("a–b"), "{}", latency.metric);
        assert_eq!(latency.value, Some(7.0));
        assert_eq!(latency.reference.ratio, Some(7.0 / 7.2249928));
        let theirs = (4u64 << 20) as f64 / 2.3075033e-03 / 1e9;
        assert_eq!(bandwidth.reference.value, Some(theirs));
        assert_eq!(bandwidth.reference.ratio, Some(2.0 / theirs));
        assert_eq!(bandwidth.unit, "GB/s");
    }
}
