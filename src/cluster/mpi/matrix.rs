//! The network matrix: rounds of disjoint pairs of hosts, each pair measuring TCP both ways and
//! the MPI ping-pong, rank 0 gathering each round; the matrices of the links measured so far,
//! and which of a server's addresses a client uses.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};

use super::super::analysis;
use super::super::schedule::MatrixPlan;
use super::fault::fault;
use super::leader::Leader;
use super::messages::{Role, RoundReport, ServerAt};
use super::pingpong::{ping_pong, pingpong_results};
use super::transport::{TAG, TAG_PAIR, far};
use crate::net::proto::{ReceiverWait, TestSpec};
use crate::net::server::LocalServer;
use crate::net::{Mode, NetCase, NetTarget, Proto};
use crate::plan::{Case, Context};
use crate::result::{BenchResult, Failure, Matrix};

impl Leader<'_> {
    /// The network matrix: the rounds of disjoint pairs, each pair measuring TCP both ways
    /// and the MPI ping-pong, rank 0 gathering each round.
    pub(super) fn matrix(&mut self) {
        let comm = self.comm;
        let others: Vec<usize> = self.leaders[1..].to_vec();
        let (_, rounds) = self.schedule();
        let per_test = self.args.matrix_duration + Duration::from_millis(250);
        let estimate = (per_test * 2 + Duration::from_secs(1)) * self.args.runner.repetitions
            + Duration::from_secs(5);
        let deadline = self
            .args
            .case_deadline
            .unwrap_or(estimate * 3 + Duration::from_secs(30));
        for (r, pairs) in rounds.iter().enumerate() {
            let role_of = |h: usize| {
                let pair = pairs.iter().find(|&&(a, b)| a == h || b == h);
                Role {
                    peer: pair.map(|&(a, b)| if a == h { b } else { a }),
                    server: pair.is_some_and(|&(_, b)| b == h),
                    deadline_s: deadline.as_secs_f64(),
                }
            };
            let round_start = Instant::now();
            let step = format!("matrix round {} of {}", r + 1, rounds.len());
            let role = if comm.rank == 0 {
                self.begin(&step);
                for (h, &rank) in self.leaders.iter().enumerate().skip(1) {
                    comm.send(rank, TAG, &role_of(h), far());
                }
                role_of(0)
            } else {
                comm.recv_root(far(), "matrix round")
            };
            if r == 0 {
                fault(&self.layout.hosts[self.me].name, "matrix");
            }
            let report = self.pair(role, &step);
            if comm.rank != 0 {
                comm.send(0, TAG, &report, far());
                continue;
            }
            // A pair's hosts give up on each other after `deadline`, and tell: rank 0 waits
            // a little longer to hear which one stopped answering.
            let (reports, missing) = comm
                .gather::<RoundReport>(&others, round_start + deadline + Duration::from_secs(5));
            let mut all = vec![(0, report)];
            all.extend(reports);
            for (rank, report) in all {
                self.session().report.results.extend(report.results);
                if let Some(why) = report.error {
                    let host = self.host_of(report.silent.unwrap_or(rank));
                    let rank = report.silent.unwrap_or(rank);
                    eprintln!("peakbench cluster: {step} failed on {host}: {why}");
                    self.cluster().failures.push(Failure {
                        host,
                        rank,
                        case: step.clone(),
                        why,
                    });
                }
            }
            if !missing.is_empty() {
                self.give_up(
                    &missing,
                    &step,
                    &format!("did not finish the round within {} s", deadline.as_secs()),
                );
            }
            self.analyse();
            self.save();
        }
    }

    /// The matrix's plan (`--matrix`, else the default for the host count) and its rounds,
    /// the same on every leader (the seed comes from rank 0).
    pub(super) fn schedule(&self) -> (MatrixPlan, Vec<Vec<(usize, usize)>>) {
        let n = self.leaders.len();
        let plan = self.args.matrix.unwrap_or(MatrixPlan::default_for(n));
        (plan, plan.rounds(n, self.seed))
    }

    /// This host's part of a round (`step`, for the failures).
    pub(super) fn pair(&mut self, role: Role, step: &str) -> RoundReport {
        let Some(peer) = role.peer else {
            return RoundReport::default();
        };
        let comm = self.comm;
        let peer_rank = self.leaders[peer];
        let peer_name = self.layout.hosts[peer].name.clone();
        let limit = role.deadline_s;
        let deadline = Instant::now() + Duration::from_secs_f64(limit);
        if role.server {
            let server = LocalServer::start_on(IpAddr::V4(Ipv4Addr::UNSPECIFIED), self.key.clone());
            let at = match &server {
                Ok(s) => Some(ServerAt {
                    port: s.addr.port(),
                    addrs: addresses(),
                }),
                Err(_) => None,
            };
            comm.send_or(peer_rank, TAG_PAIR, &at, deadline, &mut || {
                self.stuck(
                    peer,
                    step,
                    Vec::new(),
                    format!("{peer_name} took no server address within {limit} s"),
                )
            });
            // The client says when its TCP tests are over.
            let done: Option<Option<bool>> = comm.recv(peer_rank, TAG_PAIR, deadline);
            drop(server);
            if done.is_none() {
                self.stuck(
                    peer,
                    step,
                    Vec::new(),
                    format!("{peer_name} did not end its TCP tests within {limit} s"),
                );
            }
            ping_pong(comm, peer_rank, false, 0, deadline, &mut |why| {
                self.stuck(peer, step, Vec::new(), format!("{peer_name} {why}"))
            });
            return RoundReport::default();
        }
        let at: Option<ServerAt> = match comm.recv(peer_rank, TAG_PAIR, deadline) {
            Some(at) => at,
            None => self.stuck(
                peer,
                step,
                Vec::new(),
                format!("{peer_name} sent no server address within {limit} s"),
            ),
        };
        let mut report = RoundReport::default();
        match at {
            Some(at) => match self.tcp(&at, &peer_name) {
                Ok(results) => report.results = results,
                Err(e) => report.error = Some(format!("TCP to {peer_name}: {e:#}")),
            },
            None => report.error = Some(format!("{peer_name} could not start its server")),
        }
        comm.send_or(peer_rank, TAG_PAIR, &Some(true), deadline, &mut || {
            let measured = std::mem::take(&mut report.results);
            self.stuck(
                peer,
                step,
                measured,
                format!("{peer_name} took no word of the end of the TCP tests within {limit} s"),
            )
        });
        let reps = self.args.runner.repetitions as usize;
        let curve = ping_pong(comm, peer_rank, true, reps, deadline, &mut |why| {
            let measured = std::mem::take(&mut report.results);
            self.stuck(peer, step, measured, format!("{peer_name} {why}"))
        });
        match pingpong_results(&curve, &self.ctx.host.hostname, &peer_name) {
            Ok(results) => report.results.extend(results),
            Err(e) => report.error = Some(format!("MPI ping-pong with {peer_name}: {e:#}")),
        }
        report
    }

    /// The host `peer` (an index of the hosts) stopped answering this one in `step`: rank 0
    /// records it with what this host measured and ends the job; another leader tells rank 0
    /// (as its report of the round, naming the peer) and waits for rank 0 to end the job.
    pub(super) fn stuck(
        &mut self,
        peer: usize,
        step: &str,
        measured: Vec<BenchResult>,
        why: String,
    ) -> ! {
        let comm = self.comm;
        let peer_rank = self.leaders[peer];
        let why = format!("{why} (seen from {})", self.layout.hosts[self.me].name);
        if comm.rank == 0 {
            self.session().report.results.extend(measured);
            self.give_up(&[peer_rank], step, &why);
        }
        let report = RoundReport {
            results: measured,
            error: Some(why),
            silent: Some(peer_rank),
        };
        comm.send(0, TAG, &report, far());
        let _: Option<serde_json::Value> = comm.recv(0, TAG, far());
        comm.fatal("rank 0 went on after this host's peer stopped answering")
    }

    /// The client's TCP tests against the peer's server: throughput each way, then RTT.
    pub(super) fn tcp(&self, at: &ServerAt, peer: &str) -> Result<Vec<BenchResult>> {
        let ip = choose(&at.addrs, &addresses())
            .ok_or_else(|| anyhow!("{peer} has no IPv4 address to reach"))?;
        let addr = SocketAddr::new(ip, at.port);
        // The matrix measures the link, not a reference tool (which has no server there).
        let mut runner = self.ctx.runner.clone();
        runner.reference = false;
        let ctx = Context {
            host: self.ctx.host.clone(),
            peaks: self.ctx.peaks.clone(),
            runner,
            latency_probe: self.ctx.latency_probe.clone(),
        };
        let target = Arc::new(NetTarget::new(Some(addr), self.key.clone()));
        let duration_ms = self.args.matrix_duration.as_millis().max(1) as u64;
        let tests = [
            (Mode::Throughput, false, 128 * 1024),
            (Mode::Throughput, true, 128 * 1024),
            (Mode::Latency, false, 1),
        ];
        let mut results = Vec::new();
        for (mode, reverse, msg) in tests {
            let case = NetCase {
                spec: TestSpec {
                    proto: Proto::Tcp,
                    mode,
                    msg_bytes: msg,
                    streams: 1,
                    omit_ms: if mode == Mode::Throughput { 250 } else { 0 },
                    duration_ms: if mode == Mode::Throughput {
                        duration_ms
                    } else {
                        duration_ms.min(500)
                    },
                    reverse,
                    rate_bps: None,
                    count: None,
                    // The pairs of a round run at once, and hosts that share physical CPUs
                    // (VMs on one hypervisor, this project's namespace cluster) would lose a
                    // CPU to another pair's spinning receiver: every link sleeps alike, as
                    // `auto` does for a peer that is not on loopback.
                    receiver_wait: ReceiverWait::Sleep,
                },
                count: None,
                pin: false,
                target: target.clone(),
            };
            let mut result = case.run(&ctx)?;
            result.id = format!("matrix-{}-{peer}", result.id);
            result.params.other.insert("peer".into(), peer.into());
            results.push(result);
        }
        Ok(results)
    }
}

/// The matrices of the links measured so far.
pub(super) fn matrices(
    results: &[BenchResult],
    hosts: &[String],
    threshold: f64,
    nic_gbps: Option<f64>,
    shared: &std::collections::BTreeMap<String, usize>,
) -> Vec<Matrix> {
    let n = hosts.len();
    let positions: std::collections::HashMap<&str, usize> = hosts
        .iter()
        .enumerate()
        .map(|(i, h)| (h.as_str(), i))
        .collect();
    let index = |name: &str| positions.get(name).copied();
    let kinds = [
        ("tcp-throughput", "TCP throughput", "Mb/s", true),
        ("tcp-latency", "TCP round trip", "µs", false),
        ("mpi-pingpong-latency", "MPI one-way latency", "µs", false),
        (
            "mpi-pingpong-bandwidth",
            "MPI ping-pong bandwidth",
            "GB/s",
            true,
        ),
    ];
    let mut out = Vec::new();
    for (op, metric, unit, up) in kinds {
        let (links, counting) = links_of(results, op, &index);
        if links.is_empty() {
            continue;
        }
        let (values, cells) = Matrix::store(n, links);
        let mut matrix = Matrix {
            metric: metric.into(),
            unit: unit.into(),
            higher_is_better: up,
            counting,
            hosts: hosts.to_vec(),
            values,
            cells,
            median: None,
            flagged: Vec::new(),
            peak: match unit {
                "Mb/s" => nic_gbps.map(|g| g * 1000.0),
                "GB/s" => nic_gbps.map(|g| g / 8.0),
                _ => None,
            },
            op: op.into(),
            not_compared: None,
            loosened: None,
            slow_hosts: Vec::new(),
        };
        analysis::flag_slow_links(&mut matrix, threshold, shared);
        out.push(matrix);
    }
    out
}

/// The links of one `op` among `results` as (from, to, value), with the results' counting. A
/// TCP throughput link runs one way (the server's way when reversed); a round trip counts for
/// both directions.
fn links_of(
    results: &[BenchResult],
    op: &str,
    index: &dyn Fn(&str) -> Option<usize>,
) -> (Vec<(usize, usize, f64)>, String) {
    let mut links: Vec<(usize, usize, f64)> = Vec::new();
    let mut counting = String::new();
    for r in results.iter().filter(|r| r.op == op) {
        let Some(peer) = r.params.peer() else {
            continue;
        };
        let (Some(client), Some(server)) = (index(&r.host), index(peer)) else {
            continue;
        };
        counting.clone_from(&r.counting);
        let reverse = r
            .params
            .other
            .get("reverse")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false);
        if op == "tcp-throughput" {
            let (from, to) = if reverse {
                (server, client)
            } else {
                (client, server)
            };
            links.push((from, to, r.value));
        } else {
            links.push((client, server, r.value));
            links.push((server, client, r.value));
        }
    }
    (links, counting)
}

/// This host's IPv4 addresses, loopback left out, each with its prefix length.
pub(super) fn addresses() -> Vec<(IpAddr, u8)> {
    let mut out = Vec::new();
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a list that freeifaddrs releases below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return out;
    }
    let mut at = list;
    while !at.is_null() {
        // SAFETY: `at` is a node of the list getifaddrs returned, not yet freed.
        let node = unsafe { &*at };
        at = node.ifa_next;
        if node.ifa_addr.is_null() || node.ifa_netmask.is_null() {
            continue;
        }
        // SAFETY: ifa_addr points to a sockaddr whose family says its type.
        if i32::from(unsafe { (*node.ifa_addr).sa_family }) != libc::AF_INET {
            continue;
        }
        // SAFETY: an AF_INET address and its netmask are sockaddr_in.
        let (addr, mask) = unsafe {
            (
                (*(node.ifa_addr as *const libc::sockaddr_in))
                    .sin_addr
                    .s_addr,
                (*(node.ifa_netmask as *const libc::sockaddr_in))
                    .sin_addr
                    .s_addr,
            )
        };
        let ip = Ipv4Addr::from(u32::from_be(addr));
        if !ip.is_loopback() {
            out.push((IpAddr::V4(ip), u32::from_be(mask).count_ones() as u8));
        }
    }
    // SAFETY: `list` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(list) };
    out
}

/// The server's address to use: the first on a subnet of one of the client's own, else its
/// first.
pub(super) fn choose(server: &[(IpAddr, u8)], client: &[(IpAddr, u8)]) -> Option<IpAddr> {
    let net = |ip: IpAddr, prefix: u8| match ip {
        IpAddr::V4(v4) => u32::from(v4)
            .checked_shr(32 - u32::from(prefix.min(32)))
            .unwrap_or(0),
        IpAddr::V6(_) => 0,
    };
    server
        .iter()
        .find(|&&(s, _)| {
            client
                .iter()
                .any(|&(c, prefix)| prefix > 0 && net(s, prefix) == net(c, prefix))
        })
        .or(server.first())
        .map(|&(ip, _)| ip)
}
