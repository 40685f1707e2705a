//! MPI's collectives over all ranks (allreduce, allgather, alltoall): each timed at every size
//! from 8 B, counted as nccl-tests counts them.

use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};
use mpi::collective::SystemOperation;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

use super::super::ClusterRunArgs;
use super::fault::fault;
use super::leader::Leader;
use super::messages::Step;
use super::pingpong::PING_BATCH;
use super::transport::{Comm, Never, TAG, far, spin};
use crate::result::{BenchResult, Failure, Params, Subsystem};

impl Leader<'_> {
    /// records them.
    pub(super) fn collectives(&mut self) {
        let comm = self.comm;
        if comm.rank == 0 {
            self.begin("collectives");
            for r in (1..comm.size).filter(|r| !self.leaders.contains(r)) {
                comm.send(r, TAG, &Step::Collectives, far());
            }
        }
        let reps = self.args.runner.repetitions as usize;
        let host = self.ctx.host.hostname.clone();
        let limit = collective_deadline(self.args);
        let max_bytes = self.args.collective_max_bytes;
        let outcomes = collectives(
            comm,
            max_bytes,
            reps,
            &host,
            limit,
            &mut |missing, case, why| self.give_up(&missing, &case, &why),
        );
        if comm.rank != 0 {
            return;
        }
        for outcome in outcomes {
            match outcome {
                Ok(result) => self.session().report.results.push(result),
                Err(e) => {
                    let failure = Failure {
                        host: host.clone(),
                        rank: 0,
                        case: "collectives".into(),
                        why: format!("{e:#}"),
                    };
                    eprintln!("peakbench cluster: collectives failed: {}", failure.why);
                    self.cluster().failures.push(failure);
                }
            }
        }
        self.save();
    }
}

/// A collective of MPI over all ranks.
#[derive(Clone, Copy)]
pub(super) enum CollectiveOp {
    Reduce,
    Gather,
    ToAll,
}

impl CollectiveOp {
    pub(super) fn name(self) -> &'static str {
        match self {
            CollectiveOp::Reduce => "allreduce",
            CollectiveOp::Gather => "allgather",
            CollectiveOp::ToAll => "alltoall",
        }
    }

    /// Bus bandwidth / algorithm bandwidth for `n` ranks (nccl-tests' factors).
    pub(super) fn bus_factor(self, n: usize) -> f64 {
        let n = n as f64;
        match self {
            CollectiveOp::Reduce => 2.0 * (n - 1.0) / n,
            CollectiveOp::Gather | CollectiveOp::ToAll => (n - 1.0) / n,
        }
    }

    pub(super) fn rule(self) -> &'static str {
        match self {
            CollectiveOp::Reduce => {
                "bytes = one rank's buffer of f32 summed (MPI_Allreduce, MPI_SUM); \
                 busbw = algbw × 2(n − 1)/n"
            }
            CollectiveOp::Gather => {
                "bytes = the whole gathered buffer (n × each rank's part, MPI_Allgather); \
                 busbw = algbw × (n − 1)/n"
            }
            CollectiveOp::ToAll => {
                "bytes = one rank's send buffer (n × the part for each rank, MPI_Alltoall); \
                 busbw = algbw × (n − 1)/n"
            }
        }
    }
}

/// The collectives' message sizes: 8 B to `max`, doubling.
pub(super) fn collective_sizes(max: usize) -> Vec<usize> {
    (3..=30)
        .map(|k| 1usize << k)
        .take_while(|&s| s <= max)
        .collect()
}

/// The operations in one timed batch of a size, from the warm-up's time per operation: the
/// same on every rank (each must call the collective as often), about [`PING_BATCH`] long,
/// between 1 and 200.
pub(super) fn collective_iterations(op_s: f64) -> usize {
    (PING_BATCH / op_s.max(1e-9)).clamp(1.0, 200.0) as usize
}

/// One size of a collective: the bytes (nccl-tests' size), the operations per batch, and each
/// timed batch's time per operation (the slowest rank's), seconds.
pub(super) struct CollectivePoint {
    pub(super) bytes: usize,
    pub(super) iterations: usize,
    pub(super) op_s: Vec<f64>,
}

/// One size's buffers: f32 for the sum, bytes for the others, each rank's part at least one
/// element.
struct Buffers {
    /// Elements of each rank's part (allreduce: of the whole buffer).
    count: usize,
    /// nccl-tests' size of the operation.
    bytes: usize,
    floats_in: Vec<f32>,
    floats_out: Vec<f32>,
    bytes_in: Vec<u8>,
    bytes_out: Vec<u8>,
}

impl Buffers {
    /// The buffers of `op` at `size` for `rank` of `n`, filled so that [`Buffers::delivered`]
    /// can tell the data arrived.
    fn new(op: CollectiveOp, size: usize, rank: usize, n: usize) -> Buffers {
        let (count, bytes) = match op {
            CollectiveOp::Reduce => {
                let count = (size / 4).max(1);
                (count, count * 4)
            }
            CollectiveOp::Gather | CollectiveOp::ToAll => {
                let part = (size / n).max(1);
                (part, part * n)
            }
        };
        let mut buffers = Buffers {
            count,
            bytes,
            floats_in: Vec::new(),
            floats_out: Vec::new(),
            bytes_in: Vec::new(),
            bytes_out: Vec::new(),
        };
        match op {
            CollectiveOp::Reduce => {
                buffers.floats_in = vec![1.0; count];
                buffers.floats_out = vec![0.0; count];
            }
            CollectiveOp::Gather => {
                buffers.bytes_in = vec![rank as u8; count];
                buffers.bytes_out = vec![0; count * n];
            }
            CollectiveOp::ToAll => {
                buffers.bytes_in = (0..count * n).map(|i| (i / count) as u8).collect();
                buffers.bytes_out = vec![0; count * n];
            }
        }
        buffers
    }

    /// One operation of `op`, spun to completion.
    fn operate(
        &mut self,
        world: &SimpleCommunicator,
        op: CollectiveOp,
        deadline: Instant,
        stop: &mut dyn FnMut() -> Never,
    ) {
        mpi::request::scope(|scope| match op {
            CollectiveOp::Reduce => spin(
                world.immediate_all_reduce_into(
                    scope,
                    &self.floats_in[..],
                    &mut self.floats_out[..],
                    SystemOperation::sum(),
                ),
                deadline,
                stop,
            ),
            CollectiveOp::Gather => spin(
                world.immediate_all_gather_into(scope, &self.bytes_in[..], &mut self.bytes_out[..]),
                deadline,
                stop,
            ),
            CollectiveOp::ToAll => spin(
                world.immediate_all_to_all_into(scope, &self.bytes_in[..], &mut self.bytes_out[..]),
                deadline,
                stop,
            ),
        });
    }

    /// Whether the data arrived: the sum is n everywhere, each rank's part where it belongs.
    fn delivered(&self, op: CollectiveOp, rank: usize, n: usize) -> bool {
        match op {
            CollectiveOp::Reduce => self.floats_out.iter().all(|&v| v == n as f32),
            CollectiveOp::Gather => self
                .bytes_out
                .iter()
                .enumerate()
                .all(|(i, &b)| b == (i / self.count) as u8),
            CollectiveOp::ToAll => self.bytes_out.iter().all(|&b| b == rank as u8),
        }
    }
}

/// `reps` timed batches of `op` on `buffers` after an untimed warm-up of one operation, whose
/// slowest time (the same on every rank) sets the batch: as many operations as fill
/// [`PING_BATCH`], from 1 to 200. Each batch starts after a barrier; its time per operation is
/// the slowest rank's. Returns the operations per batch and each batch's time per operation.
fn timed_batches(
    comm: &Comm,
    op: CollectiveOp,
    buffers: &mut Buffers,
    reps: usize,
    deadline: Instant,
    stop: &mut dyn FnMut() -> Never,
) -> (usize, Vec<f64>) {
    let world = &comm.world;
    let mut op_s = Vec::with_capacity(reps);
    let mut iterations = 1;
    for batch in 0..=reps {
        spin(world.immediate_barrier(), deadline, stop);
        let t0 = mpi::time();
        for _ in 0..iterations {
            buffers.operate(world, op, deadline, stop);
        }
        let mine = (mpi::time() - t0) / iterations as f64;
        let mut slowest = 0.0f64;
        mpi::request::scope(|scope| {
            spin(
                world.immediate_all_reduce_into(scope, &mine, &mut slowest, SystemOperation::max()),
                deadline,
                stop,
            )
        });
        if batch > 0 {
            op_s.push(slowest);
        } else {
            iterations = collective_iterations(slowest);
        }
    }
    (iterations, op_s)
}

/// Every rank: one collective at every size, `reps` timed batches after an untimed warm-up
/// batch ([`timed_batches`]). Returns the curve on rank 0 (the others get the same, unused).
/// MPI's blocking calls spin here: every rank is busy.
pub(super) fn collective(
    comm: &Comm,
    op: CollectiveOp,
    max_bytes: usize,
    reps: usize,
    deadline: Instant,
    stuck: &mut dyn FnMut(String) -> Never,
) -> Result<Vec<CollectivePoint>> {
    let mut curve = Vec::new();
    let mut wrong = None;
    for size in collective_sizes(max_bytes) {
        let mut buffers = Buffers::new(op, size, comm.rank, comm.size);
        let bytes = buffers.bytes;
        let mut stop = || -> Never {
            stuck(format!(
                "{} of {bytes} B did not complete by the deadline",
                op.name()
            ))
        };
        let (iterations, op_s) = timed_batches(comm, op, &mut buffers, reps, deadline, &mut stop);
        // Every rank goes on through the sizes, as the others do, and reports at the end.
        if !buffers.delivered(op, comm.rank, comm.size) && wrong.is_none() {
            wrong = Some(format!("{} of {bytes} B delivered wrong data", op.name()));
        }
        curve.push(CollectivePoint {
            bytes,
            iterations,
            op_s,
        });
    }
    match wrong {
        Some(why) => Err(anyhow!(why)),
        None => Ok(curve),
    }
}

/// Rank 0: a collective's result: the bus bandwidth at the largest size as the value, the
/// curve (time per operation, algorithm and bus bandwidth per size) in params.curve.
pub(super) fn collective_result(
    curve: &[CollectivePoint],
    op: CollectiveOp,
    ranks: usize,
    host: &str,
) -> Result<BenchResult> {
    let Some(last) = curve.last() else {
        anyhow::bail!("no size of {} measured", op.name());
    };
    let factor = op.bus_factor(ranks);
    let table: Vec<serde_json::Value> = curve
        .iter()
        .map(|p| {
            // A size with no timed operation has no figures: null in the document.
            let t = crate::stats::median(&p.op_s);
            let algbw = t.map(|t| p.bytes as f64 / t / 1e9);
            serde_json::json!({
                "bytes": p.bytes,
                "iterations": p.iterations,
                "time_us": t.map(|t| t * 1e6),
                "algbw_gbs": algbw,
                "busbw_gbs": algbw.map(|algbw| algbw * factor),
            })
        })
        .collect();
    let mut params = Params {
        protocol: Some("mpi".into()),
        message_bytes: Some(last.bytes as u64),
        ..Params::default()
    };
    params.other.insert("ranks".into(), ranks.into());
    params.other.insert("curve".into(), table.into());
    let spec = crate::plan::CaseSpec {
        id: format!("collective-{}-n{ranks}", op.name()),
        label: format!("MPI {} over {ranks} ranks", op.name()),
        subsystem: Subsystem::Network,
        op: format!("mpi-{}", op.name()),
        params,
    };
    Ok(spec
        .measured(
            host,
            "bus bandwidth",
            "GB/s",
            format!(
                "{}; algbw = bytes / the time of one operation (a batch of {} after a barrier, \
                 the slowest rank's time / the count; params.curve has every size from 8 B), \
                 1 GB = 10^9 B, n = {ranks} ranks, as nccl-tests",
                op.rule(),
                last.iterations
            ),
            last.op_s
                .iter()
                .map(|t| last.bytes as f64 / t / 1e9 * factor)
                .collect(),
        )?
        .finish())
}

/// The longest one collective (all its sizes) may take: `--case-deadline`, else 60 s + 1 s
/// per batch.
pub(super) fn collective_deadline(args: &ClusterRunArgs) -> Duration {
    let batches =
        collective_sizes(args.collective_max_bytes).len() as u32 * (args.runner.repetitions + 1);
    args.case_deadline
        .unwrap_or(Duration::from_secs(60) + Duration::from_secs(1) * batches)
}

/// Every rank: the three collectives; rank 0 gets their results. Before each, every rank tells
/// rank 0 it is there and rank 0 waits for all until `limit` (so a rank that stopped answering
/// is named); each must end within `limit` (on the other ranks 30 s more, so that rank 0 is
/// the first to notice). Past either, `stuck` with the ranks missing (none when they stopped
/// inside the collective, where MPI does not say which), the step and why.
// The `stuck` call ends the job (its result is uninhabited), which rustc reports as making
// the rest of its branch unreachable.
#[allow(unreachable_code)]
pub(super) fn collectives(
    comm: &Comm,
    max_bytes: usize,
    reps: usize,
    host: &str,
    limit: Duration,
    stuck: &mut dyn FnMut(Vec<usize>, String, String) -> Never,
) -> Vec<Result<BenchResult>> {
    let mut out = Vec::new();
    for op in [
        CollectiveOp::Reduce,
        CollectiveOp::Gather,
        CollectiveOp::ToAll,
    ] {
        let step = format!("collective {}", op.name());
        let start = Instant::now();
        if comm.rank == 0 {
            let all: Vec<usize> = (1..comm.size).collect();
            let (_, missing) = comm.gather::<Step>(&all, start + limit);
            if !missing.is_empty() {
                let why = format!("did not reach its start within {} s", limit.as_secs());
                stuck(missing, step, why);
            }
        } else {
            fault(host, "collectives");
            comm.send(0, TAG, &Step::Ready(0), start + limit);
        }
        let deadline = if comm.rank == 0 {
            start + limit
        } else {
            start + limit + Duration::from_secs(30)
        };
        let curve = collective(comm, op, max_bytes, reps, deadline, &mut |why| {
            stuck(Vec::new(), step.clone(), why)
        });
        out.push(curve.and_then(|curve| collective_result(&curve, op, comm.size, host)));
    }
    out
}
