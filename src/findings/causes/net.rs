//! Network: the qdiscs that shape the route to the server (and, as the server sent them back,
//! its way to the client), the route's MTU and offloads, the server machine's load, the
//! receiver's mode.
//!
//! A shaper of `rate` bit/s counts whole frames: a TCP segment carries `MTU − 52` bytes of
//! payload (IPv4, TCP with timestamps) in `MTU + 14` bytes (Ethernet header), a UDP datagram of
//! `m` bytes travels in `m + 42`. So the payload a shaper lets through is
//! `rate × payload / frame`: 150 Mbit/s of tbf is 143.5 Mb/s of TCP payload at MTU 1500.

use super::{Candidate, Scene, num};
use crate::evidence::Qdisc;
use crate::result::{Evidence, Subsystem};

/// A figure within this band of a shaper's bound is held by it.
const HELD: [f64; 2] = [0.85, 1.05];
/// A sleeping receiver woken more often than once per this many bytes received is named.
const WAKE_BYTES: f64 = 64.0 * 1024.0;

pub(super) fn causes(s: &Scene, out: &mut Vec<Candidate>) {
    if s.r.subsystem != Subsystem::Network {
        return;
    }
    let Some(route) = s.case.route.as_ref() else {
        return;
    };
    let interface = route.value.as_str();
    let mtu = s
        .host
        .nics
        .iter()
        .find(|n| n.name == interface)
        .and_then(|n| n.mtu)
        .unwrap_or(1500);
    if s.r.unit == "Mb/s" && s.r.op.ends_with("throughput") {
        shapers(s, interface, mtu, &route.source, out);
        peer_shapers(s, mtu, out);
        if s.r.params.protocol.as_deref() == Some("tcp") {
            window(s, out);
        }
    }
    small_mtu(s, interface, mtu, out);
    offloads(s, interface, out);
    peer_load(s, out);
    receiver(s, out);
}

/// The payload share of each frame on the wire for this case.
fn payload_share(s: &Scene, mtu: u32) -> (f64, String) {
    let udp = s.r.params.protocol.as_deref() == Some("udp");
    if udp {
        let m = s.r.params.message_bytes.unwrap_or(1470) as f64;
        (
            m / (m + 42.0),
            format!("{m:.0} of every {:.0} bytes", m + 42.0),
        )
    } else {
        let mss = mtu.saturating_sub(52).max(1) as f64;
        let frame = mtu as f64 + 14.0;
        (mss / frame, format!("{mss:.0} of every {frame:.0} bytes"))
    }
}

fn shapers(s: &Scene, interface: &str, mtu: u32, route_source: &str, out: &mut Vec<Candidate>) {
    let route = Evidence::new(route_source.to_string(), format!("dev {interface}"));
    held_by(s, s.run.shapers(interface), mtu, "", route, out);
}

/// The server's shapers on its way back to the client hold a `--reverse` test, whose data the
/// server sends (in a forward test only the acknowledgements take that way).
fn peer_shapers(s: &Scene, mtu: u32, out: &mut Vec<Candidate>) {
    let reverse = s.r.params.other.get("reverse").and_then(|v| v.as_bool()) == Some(true);
    let Some(peer) = s.case.peer.as_ref().filter(|_| reverse) else {
        return;
    };
    let Some(interface) = peer.route.as_deref() else {
        return;
    };
    let route = Evidence::new(
        "the server's `ip -j route get CLIENT`, sent back with its results",
        format!("dev {interface}"),
    );
    held_by(s, peer.shapers.iter(), mtu, "the server's ", route, out);
}

/// Each of `qdiscs` whose payload bound the figure sits at: `whose` says on which machine
/// (empty for this one).
fn held_by<'a>(
    s: &Scene,
    qdiscs: impl Iterator<Item = &'a Qdisc>,
    mtu: u32,
    whose: &str,
    route: Evidence,
    out: &mut Vec<Candidate>,
) {
    let (share, per_frame) = payload_share(s, mtu);
    for q in qdiscs {
        let rate = q.rate_bps.unwrap_or(0) as f64;
        let bound = rate / 1e6 * share;
        if bound <= 0.0 || s.r.value < HELD[0] * bound || s.r.value > HELD[1] * bound {
            continue;
        }
        let interface = &q.interface;
        let mut c = Candidate::new(
            "qdisc",
            format!(
                "a {} qdisc on {whose}{interface} shapes to {} Mbit/s: at most {} Mb/s of payload \
                 ({per_frame})",
                q.kind,
                num(rate / 1e6),
                num(bound)
            ),
            vec![
                Evidence::new(
                    q.source.clone(),
                    format!(
                        "{} {} on {interface}: rate {rate:.0} bit/s",
                        q.kind, q.handle
                    ),
                ),
                route.clone(),
            ],
            "remove or raise the shaper ('tc qdisc show dev IF'), or test a path without it",
        )
        .value(rate / 1e6, "Mbit/s");
        c.cause.bound = Some(bound);
        c.binds = true;
        out.push(c);
    }
}

/// A server whose machine was busy with other work (or held by its CPU quota) while the test
/// ran: its receiver, sender or echo got what was left.
fn peer_load(s: &Scene, out: &mut Vec<Candidate>) {
    /// Other work over this many CPUs on the server is named.
    const BUSY_CPUS: f64 = 0.5;
    let Some(peer) = s.case.peer.as_ref().filter(|p| p.wall_s > 0.0) else {
        return;
    };
    // A server on this machine: its "other processes" are this client, and this side's own
    // evidence already says what else ran.
    if peer.boot_id.is_some() && peer.boot_id == s.run.boot_id {
        return;
    }
    let others = peer.others_cpu_s / peer.wall_s;
    let steal = peer.steal_s / peer.wall_s;
    if others + steal >= BUSY_CPUS {
        let top = peer
            .top_others
            .iter()
            .map(|p| format!("{} ({:.2} CPU)", p.command, p.cpu_s / peer.wall_s))
            .collect::<Vec<_>>();
        let mut c = Candidate::new(
            "server-busy",
            format!(
                "the server's machine ran other work on {:.2} CPUs{} while it served the test{}",
                others + steal,
                if steal > 0.05 {
                    format!(" ({steal:.2} of them stolen by its hypervisor)")
                } else {
                    String::new()
                },
                if top.is_empty() {
                    String::new()
                } else {
                    format!(": {}", top.join(", "))
                }
            ),
            vec![Evidence::new(
                "the server's /proc/stat and /proc/PID/stat, sent back with its results",
                format!(
                    "{:.2} CPU-s of others and {:.2} s of steal in {:.2} s",
                    peer.others_cpu_s, peer.steal_s, peer.wall_s
                ),
            )],
            "run the server on a quiet machine, or pin it away from the other work",
        )
        .value(others + steal, "CPU");
        c.slows = true;
        c.noisy = true;
        out.push(c);
    }
    let streams = s.r.params.streams.unwrap_or(1).max(1);
    if let Some(quota) = peer.cpu_quota.filter(|q| *q < streams as f64) {
        let mut c = Candidate::new(
            "server-cpu-quota",
            format!("the server's cgroup may use {quota:.2} CPU for {streams} streams"),
            vec![Evidence::new(
                "the server's cgroup CPU quota, sent back with its results",
                format!("{quota:.2} CPU"),
            )],
            "raise the server's CPU quota or run it outside that cgroup",
        )
        .value(quota, "CPU");
        c.slows = true;
        out.push(c);
    }
}

/// The round trip to the same server, from a TCP latency case of the same run: the median
/// of its repetitions, seconds.
fn round_trip_s(s: &Scene) -> Option<f64> {
    let server = s.r.params.other.get("server")?;
    s.report
        .results
        .iter()
        .filter(|r| r.op == "tcp-latency" && r.params.other.get("server") == Some(server))
        .filter(|r| r.unit == "µs" && r.value > 0.0)
        .map(|r| r.value / 1e6)
        .next()
}

/// A TCP stream carries at most one window per round trip, and the receive window is at most
/// half of `net.ipv4.tcp_rmem`'s maximum (the kernel keeps the other half for its overhead,
/// `tcp_adv_win_scale` = 1): streams × rmem_max / 2 / RTT.
fn window(s: &Scene, out: &mut Vec<Candidate>) {
    let Some(rmem_max) = s
        .run
        .sysctls
        .get("net.ipv4.tcp_rmem")
        .and_then(|v| v.split_whitespace().nth(2))
        .and_then(|v| v.parse::<f64>().ok())
    else {
        return;
    };
    let Some(rtt) = round_trip_s(s) else {
        return;
    };
    let streams = s.r.params.streams.unwrap_or(1).max(1) as f64;
    let bound = streams * rmem_max / 2.0 * 8.0 / rtt / 1e6;
    if s.r.value < HELD[0] * bound || s.r.value > HELD[1] * bound {
        return;
    }
    let mut c = Candidate::new(
        "socket-buffer",
        format!(
            "the receive window (half of tcp_rmem's maximum, {} B) over a round trip of {:.0} µs \
             carries at most {} Mb/s per stream",
            num(rmem_max),
            rtt * 1e6,
            num(bound / streams)
        ),
        vec![
            Evidence::new("/proc/sys/net/ipv4/tcp_rmem", num(rmem_max)),
            Evidence::new(
                "the run's tcp-latency case to the same server",
                format!("{:.1} µs", rtt * 1e6),
            ),
        ],
        "raise net.ipv4.tcp_rmem's maximum (and net.core.rmem_max) to at least 2 × bandwidth × \
         round trip, or use more --streams",
    )
    .value(rmem_max, "B");
    c.cause.bound = Some(bound);
    c.binds = true;
    out.push(c);
}

fn small_mtu(s: &Scene, interface: &str, mtu: u32, out: &mut Vec<Candidate>) {
    if mtu >= 1500 || !s.r.op.ends_with("throughput") {
        return;
    }
    let mut c = Candidate::new(
        "mtu",
        format!(
            "{interface}'s MTU is {mtu}: more packets (and per-packet work) per byte than at \
             1500"
        ),
        vec![Evidence::new(
            format!("/sys/class/net/{interface}/mtu"),
            mtu.to_string(),
        )],
        "use an MTU of 1500 or more (9000 where the path allows jumbo frames)",
    )
    .value(f64::from(mtu), "B");
    c.slows = true;
    c.structural = true;
    out.push(c);
}

/// Segmentation (TSO, GSO) and receive (GRO) offloads off on the route's interface: the
/// sender's stack cuts every MTU-sized segment itself and the receiver's handles each packet
/// alone, a per-packet cost the offloads pay once per 64 KiB.
fn offloads(s: &Scene, interface: &str, out: &mut Vec<Candidate>) {
    if !s.r.op.ends_with("throughput") {
        return;
    }
    let Some(offloads) = s.run.offloads_of(interface) else {
        return;
    };
    let off = offloads.off();
    if off.is_empty() {
        return;
    }
    let mut c = Candidate::new(
        "offloads",
        format!(
            "{} off on {interface}: the stack handles every MTU-sized packet on its own \
             instead of 64 KiB at a time",
            off.join(", ")
        ),
        vec![Evidence::new(
            offloads.source.clone(),
            off.iter()
                .map(|o| format!("{o} off"))
                .collect::<Vec<_>>()
                .join(", "),
        )],
        "turn them on: ethtool -K IF tso on gso on gro on",
    )
    .value(off.len() as f64, "offloads off");
    c.slows = true;
    out.push(c);
}

/// A TCP receiver that slept on its empty socket and was woken more often than once per
/// [`WAKE_BYTES`] received. Each wake-up is paid on the CPU that delivers the data (on loopback
/// and between namespaces, the sender's; on a VM, an interrupt to a halted vCPU), so a receiver
/// woken per burst of a few segments takes time from the sender that iperf3's, woken less
/// often, does not. Named on the result's own count (its `receiver_wakeups` extra: the
/// receiving threads' voluntary context switches per MB in the window), never on the setting
/// alone: a sleeping receiver that drains whole buffers costs next to nothing.
fn receiver(s: &Scene, out: &mut Vec<Candidate>) {
    let other = &s.r.params.other;
    let slept = match other.get("receiver_spun").and_then(|v| v.as_bool()) {
        Some(spun) => !spun,
        None => other.get("receiver_wait").and_then(|v| v.as_str()) == Some("sleep"),
    };
    let Some(woke) =
        s.r.extra
            .iter()
            .find(|e| e.metric == crate::result::RECEIVER_WAKEUPS)
    else {
        return;
    };
    let per_mb = woke.value;
    if !slept || per_mb < 1e6 / WAKE_BYTES {
        return;
    }
    let mut c = Candidate::new(
        "receiver-sleeps",
        format!(
            "the receiver slept on its empty socket and was woken {per_mb:.1} times per MB \
             (once per {:.0} KiB): each wake-up costs the delivering CPU microseconds",
            1e6 / per_mb / 1024.0
        ),
        vec![
            Evidence::new(
                "the receiving threads' voluntary context switches in the window (the result's \
                 receiver_wakeups extra)",
                format!("median {per_mb:.1} per MB"),
            ),
            Evidence::new(
                "the case's parameters",
                format!(
                    "receiver_wait = {}",
                    other
                        .get("receiver_wait")
                        .and_then(|v| v.as_str())
                        .unwrap_or("auto")
                ),
            ),
        ],
        "let the receiver spin (--receiver-wait spin, or auto on loopback) where a CPU per \
         stream can be spared, or send larger messages (--msg) so that each wake-up finds more",
    )
    .value(per_mb, "per MB");
    c.slows = true;
    out.push(c);
}
