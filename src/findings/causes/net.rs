//! Network: the qdiscs that shape the route to the server, its MTU, the receiver's mode.
//!
//! A shaper of `rate` bit/s counts whole frames: a TCP segment carries `MTU − 52` bytes of
//! payload (IPv4, TCP with timestamps) in `MTU + 14` bytes (Ethernet header), a UDP datagram of
//! `m` bytes travels in `m + 42`. So the payload a shaper lets through is
//! `rate × payload / frame`: 150 Mbit/s of tbf is 143.5 Mb/s of TCP payload at MTU 1500.

use super::{Candidate, Scene, num};
use crate::result::{Evidence, Subsystem};

/// A figure within this band of a shaper's bound is held by it.
const HELD: [f64; 2] = [0.85, 1.05];

pub fn causes(s: &Scene, out: &mut Vec<Candidate>) {
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
        if s.r.params.protocol.as_deref() == Some("tcp") {
            window(s, out);
        }
    }
    small_mtu(s, interface, mtu, out);
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
    let (share, per_frame) = payload_share(s, mtu);
    for q in s.run.shapers(interface) {
        let rate = q.rate_bps.unwrap_or(0) as f64;
        let bound = rate / 1e6 * share;
        if bound <= 0.0 || s.r.value < HELD[0] * bound || s.r.value > HELD[1] * bound {
            continue;
        }
        let mut c = Candidate::new(
            "qdisc",
            format!(
                "a {} qdisc on {interface} shapes to {} Mbit/s: at most {} Mb/s of payload \
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
                Evidence::new(route_source.to_string(), format!("dev {interface}")),
            ],
            "remove or raise the shaper ('tc qdisc show dev IF'), or test a path without it",
        )
        .value(rate / 1e6, "Mbit/s");
        c.cause.bound = Some(bound);
        c.binds = true;
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

fn receiver(s: &Scene, out: &mut Vec<Candidate>) {
    let sleep =
        s.r.params
            .other
            .get("receiver_wait")
            .and_then(|v| v.as_str())
            == Some("sleep");
    if !sleep {
        return;
    }
    let mut c = Candidate::new(
        "receiver-sleeps",
        "the receiver sleeps in poll(2) on an empty socket (--receiver-wait sleep): each wake-up \
         costs microseconds"
            .to_string(),
        vec![Evidence::new(
            "the case's parameters",
            "receiver_wait = sleep",
        )],
        "let the receiver spin (--receiver-wait auto) where a CPU per stream can be spared",
    );
    c.slows = true;
    c.structural = true;
    out.push(c);
}
