//! MPI's own ping-pong between the two hosts of a pair, and its results: the latency at the
//! smallest size, the bandwidth at the largest, the whole curve.

use std::time::Instant;

use anyhow::Result;
use mpi::traits::*;
use serde::{Deserialize, Serialize};

use super::transport::{Comm, Never, TAG_PING, spin};
use crate::result::{BenchResult, Params, Subsystem};

/// The message sizes of the MPI ping-pong: 8 B to 4 MiB, doubling.
pub(super) fn ping_sizes() -> Vec<usize> {
    (3..=22).map(|k| 1usize << k).collect()
}

/// The most round trips in one timed batch: enough for a batch of tens of milliseconds at the
/// small sizes on an idle pair, at least 10 at the largest.
pub(super) fn ping_iterations(size: usize) -> usize {
    ((64 << 20) / size).clamp(10, 1000)
}

/// How long a timed batch goes on at most once it has one round trip (a loaded machine's round
/// trips can take milliseconds: the batch stops by time, and counts what it did).
pub(super) const PING_BATCH: f64 = 0.05;

/// One size of the ping-pong: the one-way time of each repetition, seconds, and the round
/// trips each took.
#[derive(Serialize, Deserialize)]
pub(super) struct PingPoint {
    pub(super) bytes: usize,
    pub(super) one_way_s: Vec<f64>,
    pub(super) round_trips: Vec<usize>,
}

/// Sends `buf` to `peer` (the ping-pong's tag), waiting for the send to complete by spinning;
/// past `deadline`, `stuck`.
pub(super) fn ping_send(
    comm: &Comm,
    peer: usize,
    buf: &[u8],
    deadline: Instant,
    stuck: &mut dyn FnMut() -> Never,
) {
    let process = comm.process(peer);
    mpi::request::scope(|scope| {
        spin(
            process.immediate_send_with_tag(scope, buf, TAG_PING),
            deadline,
            stuck,
        );
    });
}

/// Receives the peer's message into `buf` (the ping-pong's tag), spinning; past `deadline`,
/// `stuck`.
pub(super) fn ping_recv(
    comm: &Comm,
    peer: usize,
    buf: &mut [u8],
    deadline: Instant,
    stuck: &mut dyn FnMut() -> Never,
) {
    let process = comm.process(peer);
    mpi::request::scope(|scope| {
        spin(
            process.immediate_receive_into_with_tag(scope, buf, TAG_PING),
            deadline,
            stuck,
        );
    });
}

/// MPI's own ping-pong between this rank and `peer` (as `osu_latency` and hpcc's ping-pong
/// measure it): a send and a receive at a time, `reps` timed batches per size after an untimed
/// warm-up batch; the initiator times and decides when a batch ends (the first byte of its
/// message is 0 on the last round trip), the other echoes. Each send and receive is
/// non-blocking and tested in a loop until it completes (spinning, as MPI's blocking calls do:
/// only the two ranks of the pair are busy), so that a peer that stops answering is noticed at
/// `deadline`: then `stuck` is called with what stopped.
pub(super) fn ping_pong(
    comm: &Comm,
    peer: usize,
    initiator: bool,
    reps: usize,
    deadline: Instant,
    stuck: &mut dyn FnMut(String) -> Never,
) -> Vec<PingPoint> {
    // Both sides must run the same number of batches: the initiator tells.
    let mut count = [0u8; 8];
    let batches: usize = {
        let mut stop = || -> Never { stuck("did not start the MPI ping-pong in time".into()) };
        if initiator {
            count = (reps as u64 + 1).to_le_bytes();
            ping_send(comm, peer, &count, deadline, &mut stop);
            reps + 1
        } else {
            ping_recv(comm, peer, &mut count, deadline, &mut stop);
            u64::from_le_bytes(count) as usize
        }
    };
    let mut curve = Vec::new();
    for size in ping_sizes() {
        let mut stop = || -> Never {
            stuck(format!(
                "stopped answering the MPI ping-pong at {size} B in time"
            ))
        };
        let mut buf = vec![1u8; size];
        let most = ping_iterations(size);
        let mut times = Vec::with_capacity(batches);
        let mut counts = Vec::with_capacity(batches);
        for _ in 0..batches {
            if !initiator {
                loop {
                    ping_recv(comm, peer, &mut buf, deadline, &mut stop);
                    let last = buf[0] == 0;
                    ping_send(comm, peer, &buf, deadline, &mut stop);
                    if last {
                        break;
                    }
                }
                continue;
            }
            let t0 = mpi::time();
            let mut count = 0;
            loop {
                let last = count + 1 >= most || mpi::time() - t0 >= PING_BATCH;
                buf[0] = u8::from(!last);
                ping_send(comm, peer, &buf, deadline, &mut stop);
                ping_recv(comm, peer, &mut buf, deadline, &mut stop);
                count += 1;
                if last {
                    break;
                }
            }
            times.push((mpi::time() - t0) / count as f64 / 2.0);
            counts.push(count);
        }
        if initiator {
            // The first batch warms the path up and is not kept.
            curve.push(PingPoint {
                bytes: size,
                one_way_s: times.split_off(1),
                round_trips: counts.split_off(1),
            });
        }
    }
    curve
}

/// Every size's median and best batch, as `params.curve` holds them. The best (shortest)
/// timed batch of a size is hpcc's and OSU's counting.
fn curve_table(curve: &[PingPoint]) -> Vec<serde_json::Value> {
    curve
        .iter()
        .map(|p| {
            // A size with no timed batch has no figures: null in the document.
            let t = crate::stats::median(&p.one_way_s);
            let best = p.one_way_s.iter().copied().reduce(f64::min);
            serde_json::json!({
                "bytes": p.bytes,
                "latency_us": t.map(|t| t * 1e6),
                "bandwidth_gbs": t.map(|t| p.bytes as f64 / t / 1e9),
                "latency_best_us": best.map(|best| best * 1e6),
                "bandwidth_best_gbs": best.map(|best| p.bytes as f64 / best / 1e9),
            })
        })
        .collect()
}

/// The case of a ping-pong `op` ("latency" or "bandwidth") at `bytes` to `peer`.
fn pingpong_spec(op: &str, bytes: usize, peer: &str) -> crate::plan::CaseSpec {
    let mut params = Params {
        protocol: Some("mpi".into()),
        message_bytes: Some(bytes as u64),
        ..Params::default()
    };
    params.other.insert("peer".into(), peer.into());
    crate::plan::CaseSpec {
        id: format!("matrix-mpi-{op}-m{bytes}-{peer}"),
        label: format!("MPI ping-pong {op} to {peer}"),
        subsystem: Subsystem::Network,
        op: format!("mpi-pingpong-{op}"),
        params,
    }
}

/// The ping-pong's results: the latency at the smallest size and the bandwidth at the largest,
/// the whole curve with the latency.
pub(super) fn pingpong_results(
    curve: &[PingPoint],
    host: &str,
    peer: &str,
) -> Result<Vec<BenchResult>> {
    let (Some(first), Some(last)) = (curve.first(), curve.last()) else {
        anyhow::bail!("no ping-pong size measured");
    };
    let table = curve_table(curve);
    let spec = |op: &str, bytes: usize| pingpong_spec(op, bytes, peer);
    let mut latency_spec = spec("latency", first.bytes);
    latency_spec
        .params
        .other
        .insert("round_trips".into(), first.round_trips.clone().into());
    latency_spec
        .params
        .other
        .insert("curve".into(), table.into());
    let latency = latency_spec
        .measured(
            host,
            "latency",
            "µs",
            format!(
                "one-way latency = the time of a batch of round trips of {} B (up to {} or \
                 {} ms, counted in params.round_trips) / their count / 2 (one send and one \
                 receive at a time, as osu_latency; each an MPI_Isend or MPI_Irecv tested to \
                 completion); params.curve holds every size's median and best batch",
                first.bytes,
                ping_iterations(first.bytes),
                PING_BATCH * 1e3
            ),
            first.one_way_s.iter().map(|t| t * 1e6).collect(),
        )?
        .finish();
    let mut bandwidth_spec = spec("bandwidth", last.bytes);
    bandwidth_spec
        .params
        .other
        .insert("round_trips".into(), last.round_trips.clone().into());
    let bandwidth = bandwidth_spec
        .measured(
            host,
            "bandwidth",
            "GB/s",
            format!(
                "{} B / the one-way time of a ping-pong (round trip / 2), 1 GB = 10^9 B, as \
                 hpcc's PingPongBandwidth",
                last.bytes
            ),
            last.one_way_s
                .iter()
                .map(|t| last.bytes as f64 / t / 1e9)
                .collect(),
        )?
        .finish();
    Ok(vec![latency, bandwidth])
}
