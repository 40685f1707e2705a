//! The MPI side of `peakbench cluster run`: the ranks, how they wait, and the phases.
//!
//! Every message is a JSON value sent point to point; a rank that waits for one probes for it
//! between sleeps ([`transport::pause`]: 0.5 ms at first, up to 10 ms as the wait lasts)
//! instead of blocking in MPI, whose waits spin by default: the idle ranks of a host would
//! otherwise steal cores from the measuring one. Rank 0 is the only
//! rank that gathers: each step (the start of a case, its results, a matrix round) is a gather
//! at rank 0 with a deadline and, where all must start together, an answer from rank 0 to each
//! rank. A rank that does not answer in time is named in the document with the case it was in,
//! the document is written, and the job ends with `MPI_Abort`.
//!
//! The parts: [`transport`] (messages, waits, gathers), [`messages`] (what is sent),
//! [`leader`] (a host's measuring rank and how rank 0 ends a job), [`gather`] (rank 0's run and
//! its document), the phases [`local`], [`matrix`] (with [`pingpong`]) and [`collective`], and
//! the tests' [`fault`] hook.

mod collective;
mod fault;
mod gather;
mod leader;
mod local;
mod matrix;
mod messages;
mod pingpong;
mod transport;

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Result, anyhow};
use mpi::environment::Universe;
use mpi::traits::*;

use super::{ClusterRunArgs, plan_local};
use crate::error::UsageError;
use crate::options::{PeakOverrides, RunnerOptions};
use crate::result::ClusterHost;
use crate::session;
use collective::{collective_deadline, collectives};
use leader::Leader;
use messages::{Hello, Layout, Step};
use transport::{Comm, SETUP, TAG, far};

/// The host name the kernel gives this process (its UTS namespace's).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| mpi::environment::processor_name().ok())
        .unwrap_or_else(|| "unknown".into())
}

/// `peakbench cluster run`, on every rank.
pub(super) fn run(args: &ClusterRunArgs, peak: &PeakOverrides) -> Result<ExitCode> {
    if args.output.dry_run {
        return Err(UsageError(
            "--dry-run: a cluster run has no dry run; see the node-local plan with 'peakbench \
             run --dry-run' (same --preset or --config) on one host"
                .into(),
        )
        .into());
    }
    let (universe, _) = mpi::initialize_with_threading(mpi::Threading::Funneled)
        .ok_or_else(|| anyhow!("MPI was already initialised"))?;
    let code = job(&universe, args, peak);
    drop(universe);
    code
}

fn job(universe: &Universe, args: &ClusterRunArgs, peak: &PeakOverrides) -> Result<ExitCode> {
    let world = universe.world();
    let comm = Comm {
        rank: world.rank() as usize,
        size: world.size() as usize,
        world,
        told_stop: std::cell::Cell::new(false),
    };
    let start = Instant::now();
    let name = host_name();
    let layout = exchange_layout(&comm, &name, start);
    let me = layout
        .hosts
        .iter()
        .position(|h| h.ranks.contains(&comm.rank))
        .expect("every rank has a host");
    let leaders: Vec<usize> = layout.hosts.iter().map(|h| h.ranks[0]).collect();
    if leaders[me] != comm.rank {
        follow(&comm, args, &name);
        return Ok(ExitCode::SUCCESS);
    }
    // Open MPI binds each rank at launch by default (to a core for 2 ranks or fewer, to a
    // socket above): a host's measuring rank would measure that core or socket of the host.
    // Unless the binding is the user's or a shared node's (`may_widen_binding`), it takes every
    // CPU its cpuset allows, as would a run on the host itself; the evidence keeps the CPUs it
    // was bound to.
    let cpus_online = crate::evidence::cpus_online();
    if super::may_widen_binding(|name| std::env::var(name).ok(), cpus_online)
        && let Some(before) = crate::evidence::widen_affinity()
        && comm.rank == 0
    {
        eprintln!(
            "peakbench cluster: the launcher bound rank 0 to CPU {}; each host's measuring \
             rank runs on every CPU its cpuset allows (give mpirun --bind-to to keep a binding)",
            crate::sysinfo::format_cpu_list(&before)
        );
    }
    let runner = RunnerOptions::from(&args.runner);
    let mut ctx = session::context(runner, peak, &crate::registry::probe());
    // Each host's measuring rank plans for its own host, so a probe measures that host.
    ctx.latency_probe = crate::plan::LatencyProbe::live();
    let plan = plan_local(args, &ctx)?;
    let mut leader = Leader {
        comm: &comm,
        args,
        ctx: &ctx,
        layout: &layout,
        leaders: &leaders,
        me,
        session: None,
        html: args.suite.html.clone(),
        key: None,
        seed: 0,
        curves: Default::default(),
    };
    if comm.rank == 0 {
        leader.root(plan, start)
    } else {
        leader.member(plan, start)
    }
}

/// Rank 0 gathers every rank's host name and sends back the layout (which ranks share a host);
/// the other ranks send their name and receive it.
fn exchange_layout(comm: &Comm, name: &str, start: Instant) -> Layout {
    if comm.rank == 0 {
        let others: Vec<usize> = (1..comm.size).collect();
        let (hellos, missing) = comm.gather::<Hello>(&others, start + SETUP);
        if !missing.is_empty() {
            comm.fatal(&format!("ranks {missing:?} did not say hello"));
        }
        let mut hosts: Vec<ClusterHost> = Vec::new();
        let names = std::iter::once((0, name.to_string()))
            .chain(hellos.into_iter().map(|(r, h)| (r, h.host)));
        for (rank, host) in names {
            match hosts.iter_mut().find(|h| h.name == host) {
                Some(h) => h.ranks.push(rank),
                None => hosts.push(ClusterHost {
                    name: host,
                    ranks: vec![rank],
                }),
            }
        }
        let layout = Layout { hosts };
        for r in 1..comm.size {
            comm.send(r, TAG, &layout, start + SETUP);
        }
        layout
    } else {
        comm.send(
            0,
            TAG,
            &Hello {
                host: name.to_string(),
            },
            start + SETUP,
        );
        comm.recv_root(start + SETUP, "layout")
    }
}

/// A rank that is not its host's leader measures nothing but the collectives, over all ranks:
/// it waits for them and for the end without taking a core.
fn follow(comm: &Comm, args: &ClusterRunArgs, name: &str) {
    loop {
        match comm.recv_root(far(), "end of the run") {
            Step::Collectives => {
                let reps = args.runner.repetitions as usize;
                let limit = collective_deadline(args);
                let _ = collectives(
                    comm,
                    args.collective_max_bytes,
                    reps,
                    name,
                    limit,
                    &mut |_, case, why| comm.fatal(&format!("{case}: {why}")),
                );
            }
            Step::Done => break,
            _ => {}
        }
    }
    comm.barrier(far());
}
