//! `peakbench cluster run`: the whole suite on every host of an MPI job at once, the all-pairs
//! network matrix, and the slow node found.
//!
//! Launched by `mpirun` (or `srun`), one process per rank. Ranks are grouped by host name; the
//! first rank of each host (its leader) runs the node-local suite (the same presets and config
//! tables as `peakbench run`, network tables left to the matrix), all leaders starting each case
//! together, and the host's side of the network matrix; rank 0 gathers every host's inventory and
//! results into one document (schema version 2: a `hosts` map, each result tied to its host, and
//! the `cluster` section). The MPI part is behind the cargo feature `mpi` ([`mpi`]); what does not
//! need MPI (the options, the schedule, the analysis) is here, tested without it.

pub(crate) mod analysis;
pub(crate) mod job;
#[cfg(feature = "mpi")]
mod mpi;
pub(crate) mod reference;
pub(crate) mod schedule;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use clap::{Args, Subcommand};

use crate::config::{self, SuiteArgs};
use crate::error::UsageError;
use crate::names::named_enum;
use crate::options::{OutputArgs, PeakArgs, PeakOverrides, RunnerArgs, duration};
use crate::plan::{Context, Plan};
use schedule::MatrixPlan;

/// `peakbench cluster`.
#[derive(Args, Debug)]
pub(crate) struct ClusterArgs {
    #[command(subcommand)]
    pub command: Option<ClusterCommand>,
}

#[derive(Subcommand, Debug)]
pub(crate) enum ClusterCommand {
    /// Run under mpirun or srun: the node-local suite on every host at once, the all-pairs network matrix, the slow node found
    Run(Box<ClusterRunArgs>),
}

named_enum! {
    /// A part of a cluster run.
    pub(crate) enum Phase {
        /// the node-local suite (CPU, memory, disk) on every host at once
        Local = "local",
        /// the all-pairs network matrix (TCP and MPI point-to-point)
        Matrix = "matrix",
        /// MPI's collectives (allreduce, allgather, alltoall) over all ranks
        Collectives = "collectives",
    }
}

#[derive(Args, Debug)]
pub(crate) struct ClusterRunArgs {
    #[command(flatten)]
    pub suite: SuiteArgs,
    /// The phases to run, in this order
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "local,matrix,collectives"
    )]
    pub phases: Vec<Phase>,
    /// The largest message of the collectives (from 8 B, doubling; nccl-tests' sizes: the
    /// buffer of allreduce, the whole gathered buffer of allgather, a rank's send buffer of
    /// alltoall)
    #[arg(long, default_value = "64MiB", value_name = "BYTES", value_parser = collective_bytes)]
    pub collective_max_bytes: usize,
    /// Flag a host (or link) whose value / the cluster median is below this
    #[arg(long, default_value = "0.9", value_name = "RATIO", value_parser = ratio)]
    pub threshold: f64,
    /// Which pairs of hosts the matrix measures: 'pairs' (every pair, N − 1 rounds), 'ring'
    /// (each host with its two neighbours, 2 rounds) or 'sample:K' (the ring and K random
    /// peers per host, K + 2 rounds at any N) [default: pairs up to 4 hosts, sample:3 above]
    #[arg(long, value_name = "PLAN", value_parser = MatrixPlan::parse)]
    pub matrix: Option<MatrixPlan>,
    /// Keep the MPI ping-pong curve (every size) of every link in the document, not only of
    /// the flagged links
    #[arg(long)]
    pub matrix_curves: bool,
    /// Length of each TCP throughput test of the matrix (one per direction of each pair)
    #[arg(long, default_value = "1s", value_name = "DURATION", value_parser = duration)]
    pub matrix_duration: Duration,
    /// The longest a host may take for one case, matrix round or collective before the job is
    /// ended (default: 3 × the case's or round's estimate + 30 s; a collective 60 s + 1 s per
    /// timed batch)
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub case_deadline: Option<Duration>,
    #[command(flatten)]
    pub runner: RunnerArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub peak: PeakArgs,
}

fn ratio(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 1.0 => Ok(v),
        _ => Err(format!("'{text}' is not a ratio in (0, 1], e.g. 0.9")),
    }
}

fn collective_bytes(text: &str) -> Result<usize, String> {
    match crate::units::parse_size(text) {
        Ok(b) if (8..=1 << 30).contains(&b) => Ok(b as usize),
        _ => Err(format!(
            "'{text}' is not a message size from 8 B to 1 GiB, e.g. 64MiB"
        )),
    }
}

/// How to get the command where the binary was built without MPI.
pub(crate) const BUILD_HINT: &str = "peakbench cluster needs MPI: build with 'cargo build --release \
     --features mpi' (needs openmpi-bin, libopenmpi-dev and libclang-dev), then launch with \
     'mpirun -np N --host a,b,… peakbench cluster run'";

/// `peakbench cluster …`.
pub(crate) fn run(args: &ClusterArgs) -> Result<ExitCode> {
    if !cfg!(feature = "mpi") {
        return Err(UsageError(BUILD_HINT.into()).into());
    }
    match &args.command {
        Some(ClusterCommand::Run(run)) => {
            let peak = PeakOverrides::try_from(&run.peak)?;
            run_job(run, &peak)
        }
        None => Err(UsageError(
            "cluster: give a command: 'peakbench cluster run' under mpirun or srun (see --help)"
                .into(),
        )
        .into()),
    }
}

#[cfg(feature = "mpi")]
fn run_job(args: &ClusterRunArgs, peak: &PeakOverrides) -> Result<ExitCode> {
    mpi::run(args, peak)
}

#[cfg(not(feature = "mpi"))]
fn run_job(_: &ClusterRunArgs, _: &PeakOverrides) -> Result<ExitCode> {
    Err(UsageError(BUILD_HINT.into()).into())
}

/// The node-local suite of this host: every table of the preset or config except the network
/// ones (the network is the matrix's), with notes on what was left out. Each host plans from
/// its own context; rank 0's plan decides which cases run, in which order.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) fn plan_local(args: &ClusterRunArgs, ctx: &Context) -> Result<Plan> {
    let (origin, mut entries) = args.suite.entries()?;
    let mut plan = Plan::empty(serde_json::Value::Null);
    let before = entries.len();
    entries.retain(|e| e.section != "net");
    if entries.len() < before {
        plan.notes.push(format!(
            "{origin}: the [[net]] tables are left out: the network matrix measures every pair"
        ));
    }
    let parsed = entries
        .iter()
        .map(|entry| config::parse_entry(entry, &origin))
        .collect::<Result<Vec<_>, _>>()?;
    let mut experiments = Vec::new();
    for (entry, (workload, matches)) in entries.iter().zip(&parsed) {
        match workload.plan(matches, ctx) {
            Ok(table) => {
                let options = table.config.clone();
                let added = plan.absorb(table, &entry.name());
                experiments.push(serde_json::json!({
                    "table": entry.name(), "options": options, "cases": added,
                }));
            }
            Err(e) => plan.notes.push(format!("{} skipped: {e:#}", entry.name())),
        }
    }
    plan.config = serde_json::json!({ "experiments": experiments, "runner": ctx.runner });
    args.suite.record(&mut plan.config);
    Ok(plan)
}

/// Whether a host's measuring rank may widen the binding it was launched with to every CPU its
/// cpuset allows (`var` reads the environment, `cpus_online` counts the host's CPUs). Not when
/// the user asked for a binding (`mpirun --bind-to`, which reaches the ranks as
/// OMPI_MCA_hwloc_base_binding_policy), nor when Slurm gave the job part of the node
/// (SLURM_CPUS_ON_NODE below the CPUs online): without a cgroup holding the job to its CPUs,
/// the binding is what keeps it off the other jobs' ones.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) fn may_widen_binding(var: impl Fn(&str) -> Option<String>, cpus_online: usize) -> bool {
    if var("OMPI_MCA_hwloc_base_binding_policy").is_some() {
        return false;
    }
    match var("SLURM_CPUS_ON_NODE").and_then(|v| v.trim().parse::<usize>().ok()) {
        Some(allocated) => allocated >= cpus_online,
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn a_binding_is_widened_unless_the_user_or_a_shared_node_keeps_it() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert!(may_widen_binding(env(&[]), 8));
        assert!(!may_widen_binding(
            env(&[("OMPI_MCA_hwloc_base_binding_policy", "core")]),
            8
        ));
        // A whole node under Slurm (sbatch --exclusive), then part of one.
        assert!(may_widen_binding(env(&[("SLURM_CPUS_ON_NODE", "8")]), 8));
        assert!(!may_widen_binding(env(&[("SLURM_CPUS_ON_NODE", "2")]), 8));
        assert!(may_widen_binding(env(&[("SLURM_CPUS_ON_NODE", "x")]), 8));
    }

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        args: ClusterRunArgs,
    }

    #[test]
    fn the_local_suite_leaves_the_network_to_the_matrix() {
        let args = Wrap::parse_from(["x", "--preset", "quick"]).args;
        let plan = plan_local(&args, &Context::fixture()).unwrap();
        assert!(!plan.cases.is_empty());
        assert!(plan.cases.iter().all(|c| !c.spec().id.starts_with("net-")));
        assert!(plan.notes.iter().any(|n| n.contains("[[net]]")));
    }

    #[test]
    fn the_matrix_plan_is_parsed_with_the_fix_named() {
        let args = Wrap::parse_from(["x", "--matrix", "sample:4"]).args;
        assert_eq!(args.matrix, Some(MatrixPlan::Sample(4)));
        assert_eq!(Wrap::parse_from(["x"]).args.matrix, None);
        let e = Wrap::try_parse_from(["x", "--matrix", "all"])
            .err()
            .unwrap();
        assert!(e.to_string().contains("--matrix") && e.to_string().contains("sample:K"));
    }

    #[test]
    fn thresholds_are_ratios() {
        assert!(ratio("0.9").is_ok());
        assert!(ratio("0").is_err());
        assert!(ratio("1.5").is_err());
    }
}
