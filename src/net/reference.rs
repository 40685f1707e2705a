//! The standard tools on the same case: iperf3 for throughput, sockperf ping-pong for latency,
//! and ICMP `ping` (iputils) beside sockperf as the floor of a round trip.
//!
//! On loopback (no `--server`), peakbench starts the tool's server itself on a free loopback
//! port (`iperf3 -s -1`, `sockperf sr`) and stops it afterwards; against a remote `--server` it
//! expects `iperf3 -s` (port 5201) and `sockperf sr` (port 11111) running there.
//! iperf3's value is `end.sum_received.bits_per_second` (its receiver's count, like ours);
//! sockperf's is the p50 of `pp --full-rtt` (round trip, not its default half round trip).
//! Both take whole seconds, so durations are rounded up to at least 1 s.
//!
//! `ping` goes to the address the client targets (the loopback server's, or `--server`'s) and
//! nowhere else. Its round trip is an ICMP echo as ping measures it: from its send to its receipt
//! of the reply through an ICMP socket, answered by the far side's kernel, with no TCP or UDP
//! stack and no user-space echo on the way — the floor under peakbench's ping-pong. Its value is
//! the p50 of the replies' times as ping prints them (1 µs resolution below 1 ms), so the ratio
//! is our p50 ÷ ping's p50; the note carries ping's own min/avg/max/mdev. The payload (`-s`) is
//! the case's message where ICMP allows it: 16 B at least (below, iputils carries no timestamp
//! and prints no time) and 65507 B at most over IPv4 (65527 B over IPv6). The interval is the
//! shortest the machine allows: `-i 0` (the next request when the reply is in) for root, else
//! 2 ms, iputils' floor for other users (an older ping's floor, named in its refusal, is used
//! instead). A ping refused ICMP sockets (no `cap_net_raw`, and the user's group outside
//! `net.ipv4.ping_group_range`) is a note, not a failure.

use std::net::{IpAddr, SocketAddr, TcpListener, UdpSocket};
use std::time::Duration;

use super::proto::{Mode, Proto, TestSpec};
use super::target::NetTarget;
use crate::plan::Context;
use crate::reference::{Invocation, Reading, Ready, Server, Source, ToolSpec};
use crate::result::Reference;

const IPERF3: ToolSpec = ToolSpec {
    name: "iperf3",
    program: "iperf3",
    install: "apt-get install iperf3",
};

const PING: ToolSpec = ToolSpec {
    name: "ping",
    program: "ping",
    install: "apt-get install iputils-ping",
};

const SOCKPERF: ToolSpec = ToolSpec {
    name: "sockperf",
    program: "sockperf",
    install: "apt-get install sockperf",
};

/// sockperf's smallest message (its own header).
const SOCKPERF_MIN_MSG: u64 = 14;

/// Runs the tool that fits `spec` and returns its value (Mb/s or µs).
pub(crate) fn run(
    spec: &TestSpec,
    target: &NetTarget,
    _count: Option<u64>,
    _ctx: &Context,
) -> anyhow::Result<Reference> {
    match spec.mode {
        Mode::Throughput => iperf3(spec, target),
        Mode::Latency => sockperf(spec, target),
    }
}

fn free_port(udp: bool) -> Option<u16> {
    if udp {
        Some(
            UdpSocket::bind("127.0.0.1:0")
                .ok()?
                .local_addr()
                .ok()?
                .port(),
        )
    } else {
        Some(
            TcpListener::bind("127.0.0.1:0")
                .ok()?
                .local_addr()
                .ok()?
                .port(),
        )
    }
}

fn seconds(ms: u64) -> u64 {
    ms.div_ceil(1000).max(1)
}

fn iperf3(spec: &TestSpec, target: &NetTarget) -> anyhow::Result<Reference> {
    let local = target.loopback();
    let (host, port) = if local {
        match free_port(false) {
            Some(p) => ("127.0.0.1".to_string(), p),
            None => return Ok(IPERF3.failed("iperf3 -s", "no free loopback port")),
        }
    } else {
        (target.remote_ip(), 5201)
    };
    let mut args: Vec<String> = vec![
        "-c".into(),
        host.clone(),
        "-p".into(),
        port.to_string(),
        "-J".into(),
        "-t".into(),
        seconds(spec.duration_ms).to_string(),
        "-O".into(),
        spec.omit_ms.div_ceil(1000).to_string(),
        "-l".into(),
        spec.msg_bytes.to_string(),
        "-P".into(),
        spec.streams.to_string(),
    ];
    if spec.proto == Proto::Udp {
        args.extend([
            "-u".into(),
            "-b".into(),
            spec.rate_bps.map_or("0".into(), |r| r.to_string()),
        ]);
    }
    if spec.reverse {
        args.push("-R".into());
    }
    let timeout = Duration::from_secs(seconds(spec.duration_ms) + spec.omit_ms / 1000 + 30);
    // Its JSON says why it failed better than its exit status.
    let mut run = Invocation::new(IPERF3, args, timeout, |stdout| parse_iperf3(stdout, spec))
        .any_exit_status();
    if local {
        run = run.server(Server {
            args: ["-s", "-1", "-B", "127.0.0.1", "-p", &port.to_string()]
                .map(String::from)
                .to_vec(),
            // Not by connecting: `iperf3 -s -1` would take the probe for its one client.
            ready: Ready::Listening(port),
        });
    }
    run.run()
}

/// iperf3's receiver rate in Mb/s from its `-J` output, with what differs from peakbench's
/// test.
fn parse_iperf3(stdout: &str, spec: &TestSpec) -> Result<Reading, String> {
    let doc: serde_json::Value =
        serde_json::from_str(stdout).map_err(|e| format!("no JSON from iperf3 ({e})"))?;
    let received = &doc["end"]["sum_received"];
    let Some(bps) = received["bits_per_second"].as_f64() else {
        return Err(format!(
            "iperf3 reported no receiver rate: {}",
            doc["error"].as_str().unwrap_or("no end.sum_received")
        ));
    };
    let loss = (spec.proto == Proto::Udp).then(|| {
        format!(
            "iperf3 receiver: {} of {} datagrams lost ({:.2} %), jitter {:.3} ms",
            received["lost_packets"],
            received["packets"],
            received["lost_percent"].as_f64().unwrap_or(f64::NAN),
            received["jitter_ms"].as_f64().unwrap_or(f64::NAN)
        )
    });
    let version = doc["start"]["version"].as_str().unwrap_or("");
    let threads = (spec.streams > 1 && one_thread_for_all_streams(version)).then(|| {
        format!(
            "{version} drives all {} streams from one thread on each side (a thread per \
             stream came with iperf3 3.16); peakbench gives each stream its own thread",
            spec.streams
        )
    });
    let note = [loss, threads].into_iter().flatten().collect::<Vec<_>>();
    Ok(Reading {
        value: bps / 1e6,
        note: (!note.is_empty()).then(|| note.join("; ")),
    })
}

/// Whether an iperf3 of this `start.version` ("iperf 3.12") runs every stream in one thread.
fn one_thread_for_all_streams(version: &str) -> bool {
    let mut numbers = version
        .trim_start_matches(|c: char| !c.is_ascii_digit())
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().ok());
    match (numbers.next().flatten(), numbers.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) < (3, 16),
        _ => false,
    }
}

fn sockperf(spec: &TestSpec, target: &NetTarget) -> anyhow::Result<Reference> {
    let local = target.loopback();
    let tcp = spec.proto == Proto::Tcp;
    let (host, port) = if local {
        match free_port(!tcp) {
            Some(p) => ("127.0.0.1".to_string(), p),
            None => return Ok(SOCKPERF.failed("sockperf sr", "no free loopback port")),
        }
    } else {
        (target.remote_ip(), 11111)
    };
    let msg = spec.msg_bytes.max(SOCKPERF_MIN_MSG);
    let mut args: Vec<String> = vec!["pp".into()];
    if tcp {
        args.push("--tcp".into());
    }
    args.extend([
        "-i".into(),
        host.clone(),
        "-p".into(),
        port.to_string(),
        "-m".into(),
        msg.to_string(),
        "-t".into(),
        seconds(spec.duration_ms).to_string(),
        "--full-rtt".into(),
    ]);
    let mut notes = Vec::new();
    if msg != spec.msg_bytes {
        notes.push(format!(
            "sockperf's smallest message is {SOCKPERF_MIN_MSG} B (its header): it ran with {msg} B"
        ));
    }
    if spec.streams > 1 {
        notes.push("sockperf ping-pong runs one stream".into());
    }
    let timeout = Duration::from_secs(seconds(spec.duration_ms) + 30);
    let mut run = Invocation::new(SOCKPERF, args, timeout, |text| {
        let us = parse_sockperf_p50(text).ok_or("no percentile 50 in sockperf's output")?;
        Ok(Reading {
            value: us,
            note: (!notes.is_empty()).then(|| notes.join("; ")),
        })
    })
    .read_from(Source::StdoutAndStderr)
    .any_exit_status();
    if local {
        let mut server_args = vec!["sr".to_string()];
        if tcp {
            server_args.push("--tcp".into());
        }
        server_args.extend(["-i".into(), host, "-p".into(), port.to_string()]);
        run = run.server(Server {
            args: server_args,
            ready: if tcp {
                Ready::Accepting(SocketAddr::new(IpAddr::from([127, 0, 0, 1]), port))
            } else {
                Ready::After(Duration::from_millis(300))
            },
        });
    }
    run.run()
}

/// iputils' smallest payload that carries its timestamp: below it ping prints no time.
const PING_MIN_TIMED: u64 = 16;
/// ICMP's largest echo payload: 65535 − 20 (IPv4 header) − 8 (ICMP header); over IPv6 the
/// header is outside the length, so 65535 − 8.
const ICMP_MAX_V4: u64 = 65507;
const ICMP_MAX_V6: u64 = 65527;
/// The shortest interval iputils allows a user who is not root, seconds.
const PING_USER_INTERVAL_S: f64 = 0.002;
/// The most echo requests one reference sends (its output is a line per reply).
const PING_MAX_COUNT: u64 = 100_000;

/// ICMP `ping` to the address the client targets, beside sockperf on a round-trip case: its p50
/// in µs, or a note saying why there is none.
pub(crate) fn ping(spec: &TestSpec, addr: IpAddr, count: Option<u64>) -> anyhow::Result<Reference> {
    // iputils refuses `-i` below its floor by the real user id.
    // SAFETY: getuid has no preconditions and cannot fail.
    let root = unsafe { libc::getuid() } == 0;
    let interval = if root { 0.0 } else { PING_USER_INTERVAL_S };
    let first = ping_at(spec, addr, count, interval, root)?;
    // An older iputils has a longer floor for users: it names it when it refuses.
    let floor = first
        .note
        .as_deref()
        .filter(|_| first.value.is_none())
        .and_then(user_interval_floor_s);
    match floor {
        Some(floor) if floor > interval => ping_at(spec, addr, count, floor, root),
        _ => Ok(first),
    }
}

fn ping_at(
    spec: &TestSpec,
    addr: IpAddr,
    count: Option<u64>,
    interval_s: f64,
    root: bool,
) -> anyhow::Result<Reference> {
    let deadline = seconds(spec.duration_ms);
    let max = if addr.is_ipv6() {
        ICMP_MAX_V6
    } else {
        ICMP_MAX_V4
    };
    let payload = spec.msg_bytes.clamp(PING_MIN_TIMED, max);
    // With --count, as many echo requests as round trips; else as many as fit the duration.
    let asked = match count {
        Some(n) => n,
        None if interval_s > 0.0 => (deadline as f64 / interval_s).ceil() as u64,
        None => PING_MAX_COUNT,
    }
    .clamp(1, PING_MAX_COUNT);
    let interval = if interval_s == 0.0 {
        "0".to_string()
    } else {
        format!("{interval_s}")
    };
    let args: Vec<String> = vec![
        "-n".into(),
        "-c".into(),
        asked.to_string(),
        "-w".into(),
        deadline.to_string(),
        "-i".into(),
        interval.clone(),
        "-s".into(),
        payload.to_string(),
        addr.to_string(),
    ];
    let mut said = ping_notes(spec, addr, payload, count, &interval, root);
    let timeout = Duration::from_secs(deadline + 10);
    Invocation::new(PING, args, timeout, move |text| {
        let parsed = parse_ping(text)?;
        said.push(parsed.summary(asked, deadline));
        Ok(Reading {
            value: parsed.p50_us,
            note: Some(said.join("; ")),
        })
    })
    .read_from(Source::StdoutAndStderr)
    // Exit status 1 (some replies missing) still has times worth reading.
    .any_exit_status()
    .run()
}

/// What the ping reference says about how it was run: what it measures, its payload, its
/// interval and its count, each where it differs from the case.
fn ping_notes(
    spec: &TestSpec,
    addr: IpAddr,
    payload: u64,
    count: Option<u64>,
    interval: &str,
    root: bool,
) -> Vec<String> {
    let mut said = vec![
        "ICMP echo round trip as ping measures it: from its send to its receipt of the reply \
         through an ICMP socket, answered by the far side's kernel (no TCP/UDP stack, no \
         user-space echo); value = p50 of the replies' times as ping prints them (to 1 µs below \
         1 ms, 3 significant digits above); ratio = our p50 ÷ ping's p50"
            .to_string(),
    ];
    if payload > spec.msg_bytes {
        said.push(format!(
            "payload {payload} B, not {} B: below {PING_MIN_TIMED} B ping carries no timestamp \
             and prints no time",
            spec.msg_bytes
        ));
    } else if payload < spec.msg_bytes {
        said.push(format!(
            "payload {payload} B, not {} B: ICMP's largest echo payload over IPv{}",
            spec.msg_bytes,
            if addr.is_ipv6() { 6 } else { 4 }
        ));
    } else {
        said.push(format!("payload {payload} B, as the case's message"));
    }
    said.push(if root {
        "interval 0 (each request as soon as the reply is in; root)".to_string()
    } else {
        format!(
            "interval {interval} s (the shortest iputils allows a user who is not root; 0 needs root)"
        )
    });
    if count.is_some_and(|n| n > PING_MAX_COUNT) {
        said.push(format!("at most {PING_MAX_COUNT} requests"));
    }
    if spec.streams > 1 {
        said.push("ping runs one request at a time (one stream)".into());
    }
    said
}

/// What iputils `ping` printed: each reply's time and its summary.
#[derive(Debug, PartialEq)]
struct PingOutput {
    /// p50 of the replies' times, µs.
    p50_us: f64,
    replies: usize,
    /// Duplicate replies, left out of the times.
    duplicates: usize,
    /// "N packets transmitted", if printed.
    transmitted: Option<u64>,
    /// min/avg/max/mdev in ms, as printed.
    rtt_ms: Option<[f64; 4]>,
    /// "pipe N": requests in flight at once, if more than one ever was.
    pipe: Option<u64>,
}

impl PingOutput {
    fn summary(&self, asked: u64, deadline_s: u64) -> String {
        let mut out = format!("{} replies", self.replies);
        if let Some(sent) = self.transmitted {
            out = format!("{sent} requests, {out}");
            if sent < asked {
                out.push_str(&format!(
                    " ({asked} asked; the {deadline_s} s deadline came first)"
                ));
            }
        }
        if self.duplicates > 0 {
            out.push_str(&format!(", {} duplicates left out", self.duplicates));
        }
        if let Some([min, avg, max, mdev]) = self.rtt_ms {
            out.push_str(&format!(
                "; ping's summary min/avg/max/mdev = {}/{}/{}/{} µs",
                us(min),
                us(avg),
                us(max),
                us(mdev)
            ));
        }
        if let Some(pipe) = self.pipe {
            out.push_str(&format!("; up to {pipe} requests were in flight at once"));
        }
        out
    }
}

fn us(ms: f64) -> String {
    let v = ms * 1e3;
    let s = format!("{v:.1}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Reads iputils `ping` output (without `-q`): the time of each reply, the summary lines. Why
/// there is no value when no reply carries a time.
fn parse_ping(text: &str) -> Result<PingOutput, String> {
    if text.contains("socket: Operation not permitted")
        || text.contains("socket: Permission denied")
        || text.contains("cap_net_raw")
    {
        return Err(
            "ping was refused an ICMP socket: it needs cap_net_raw (or setuid root), or \
                    the user's group within net.ipv4.ping_group_range for unprivileged ICMP"
                .into(),
        );
    }
    let mut times = Vec::new();
    let mut duplicates = 0;
    let mut untimed = 0;
    let mut transmitted = None;
    let mut rtt_ms = None;
    let mut pipe = None;
    for line in text.lines() {
        if line.contains("icmp_seq=") {
            if line.contains("DUP!") {
                duplicates += 1;
                continue;
            }
            let time = line
                .split_once("time=")
                .and_then(|(_, t)| t.split_whitespace().next())
                .and_then(|t| t.parse::<f64>().ok());
            match time {
                Some(ms) if ms.is_finite() && ms >= 0.0 => times.push(ms * 1e3),
                _ if line.contains("bytes from") => untimed += 1,
                _ => {}
            }
        } else if let Some((sent, _)) = line.split_once(" packets transmitted") {
            transmitted = sent.trim().parse().ok();
        } else if let Some((_, values)) = line.split_once("min/avg/max/mdev = ") {
            let numbers: Vec<f64> = values
                .split_whitespace()
                .next()
                .unwrap_or("")
                .split('/')
                .filter_map(|v| v.parse().ok())
                .collect();
            if let [a, b, c, d] = numbers[..] {
                rtt_ms = Some([a, b, c, d]);
            }
        }
        if let Some((_, p)) = line.split_once(", pipe ") {
            pipe = p
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|p| p.parse().ok());
        }
    }
    if times.is_empty() {
        return Err(if untimed > 0 {
            format!("ping printed {untimed} replies without a time (payload below its timestamp)")
        } else {
            "no reply in ping's output".into()
        });
    }
    let replies = times.len();
    let p50_us = crate::stats::Summary::of(&times)
        .map(|s| s.median)
        .ok_or("ping printed times that are not numbers")?;
    Ok(PingOutput {
        p50_us,
        replies,
        duplicates,
        transmitted,
        rtt_ms,
        pipe,
    })
}

/// The floor, seconds, an iputils ping names when it refuses a shorter interval to a user
/// ("cannot flood; minimal interval allowed for user is 200ms").
fn user_interval_floor_s(note: &str) -> Option<f64> {
    let (_, tail) = note.split_once("minimal interval allowed for user is")?;
    let tail = tail.trim_start();
    let digits: String = tail
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let ms: f64 = digits.parse().ok()?;
    (ms.is_finite() && ms > 0.0).then_some(ms / 1e3)
}

/// The p50 round trip in µs from `sockperf pp --full-rtt` output.
fn parse_sockperf_p50(text: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.contains("percentile 50.000"))
        .and_then(|l| l.rsplit('=').next())
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iperf3_before_3_16_runs_streams_in_one_thread() {
        assert!(one_thread_for_all_streams("iperf 3.12"));
        assert!(one_thread_for_all_streams("iperf 3.9"));
        assert!(!one_thread_for_all_streams("iperf 3.16"));
        assert!(!one_thread_for_all_streams("iperf 3.17.1+"));
        assert!(!one_thread_for_all_streams("iperf 4.0"));
        assert!(!one_thread_for_all_streams(""), "unknown: no claim");
    }

    // Output of iputils-ping 20221126 (Debian 12) on loopback, as captured.
    const PING_64: &str = "PING 127.0.0.1 (127.0.0.1) 64(92) bytes of data.
72 bytes from 127.0.0.1: icmp_seq=1 ttl=64 time=0.728 ms
72 bytes from 127.0.0.1: icmp_seq=2 ttl=64 time=0.039 ms
72 bytes from 127.0.0.1: icmp_seq=3 ttl=64 time=0.037 ms

--- 127.0.0.1 ping statistics ---
3 packets transmitted, 3 received, 0% packet loss, time 410ms
rtt min/avg/max/mdev = 0.037/0.268/0.728/0.325 ms
";

    /// As root with `-i 0`: the summary adds ipg/ewma.
    const PING_ROOT_I0: &str = "PING 127.0.0.1 (127.0.0.1) 56(84) bytes of data.
64 bytes from 127.0.0.1: icmp_seq=1 ttl=64 time=0.030 ms
64 bytes from 127.0.0.1: icmp_seq=2 ttl=64 time=0.006 ms
64 bytes from 127.0.0.1: icmp_seq=3 ttl=64 time=0.005 ms
64 bytes from 127.0.0.1: icmp_seq=4 ttl=64 time=0.005 ms

--- 127.0.0.1 ping statistics ---
4 packets transmitted, 4 received, 0% packet loss, time 0ms
rtt min/avg/max/mdev = 0.005/0.011/0.030/0.010 ms, ipg/ewma 0.041/0.021 ms
";

    /// `-l 3`: requests in flight at once, said as "pipe N".
    const PING_PIPE: &str = "PING 127.0.0.1 (127.0.0.1) 56(84) bytes of data.
64 bytes from 127.0.0.1: icmp_seq=1 ttl=64 time=0.054 ms
64 bytes from 127.0.0.1: icmp_seq=2 ttl=64 time=0.053 ms
64 bytes from 127.0.0.1: icmp_seq=3 ttl=64 time=0.051 ms
64 bytes from 127.0.0.1: icmp_seq=4 ttl=64 time=0.036 ms

--- 127.0.0.1 ping statistics ---
4 packets transmitted, 4 received, 0% packet loss, time 204ms
rtt min/avg/max/mdev = 0.036/0.048/0.054/0.007 ms, pipe 3
";

    /// IPv6.
    const PING_V6: &str = "PING ::1(::1) 1400 data bytes
1408 bytes from ::1: icmp_seq=1 ttl=64 time=0.032 ms
1408 bytes from ::1: icmp_seq=2 ttl=64 time=0.008 ms
1408 bytes from ::1: icmp_seq=3 ttl=64 time=0.011 ms

--- ::1 ping statistics ---
3 packets transmitted, 3 received, 0% packet loss, time 4ms
rtt min/avg/max/mdev = 0.008/0.017/0.032/0.010 ms
";

    /// A reply above 1 ms is printed with three significant digits.
    const PING_SLOW: &str = "PING 127.0.0.2 (127.0.0.2) 56(84) bytes of data.
64 bytes from 127.0.0.2: icmp_seq=1 ttl=64 time=1.08 ms
64 bytes from 127.0.0.2: icmp_seq=2 ttl=64 time=0.038 ms

--- 127.0.0.2 ping statistics ---
2 packets transmitted, 2 received, 0% packet loss, time 200ms
rtt min/avg/max/mdev = 0.038/0.559/1.080/0.521 ms
";

    /// `-s 8`: below its timestamp, no time on the replies and no rtt line.
    const PING_UNTIMED: &str = "PING 127.0.0.1 (127.0.0.1) 8(36) bytes of data.
16 bytes from 127.0.0.1: icmp_seq=1 ttl=64
16 bytes from 127.0.0.1: icmp_seq=2 ttl=64
16 bytes from 127.0.0.1: icmp_seq=3 ttl=64

--- 127.0.0.1 ping statistics ---
3 packets transmitted, 3 received, 0% packet loss, time 406ms

";

    /// `-s 65508`: no reply at all (stdout, then stderr).
    const PING_NONE: &str = "PING 127.0.0.1 (127.0.0.1) 65508(65536) bytes of data.

--- 127.0.0.1 ping statistics ---
2 packets transmitted, 0 received, +2 errors, 100% packet loss, time 1014ms

ping: local error: message too long, mtu=65535
ping: local error: message too long, mtu=65535
";

    /// A user without cap_net_raw whose group is outside ping_group_range (stderr).
    const PING_REFUSED: &str = "
ping: socktype: SOCK_RAW
ping: socket: Operation not permitted
ping: => missing cap_net_raw+p capability or setuid?
";

    /// A user asking for less than the floor (stderr).
    const PING_FLOOR: &str = "PING 127.0.0.1 (127.0.0.1) 56(84) bytes of data.
ping: cannot flood; minimal interval allowed for user is 2ms
";

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn ping_p50_comes_from_the_replies_and_the_summary_is_kept() {
        let out = parse_ping(PING_64).unwrap();
        assert!(
            close(out.p50_us, 39.0),
            "the median reply, not the slow first one"
        );
        assert_eq!(out.replies, 3);
        assert_eq!(out.transmitted, Some(3));
        assert_eq!(out.rtt_ms, Some([0.037, 0.268, 0.728, 0.325]));
        assert_eq!(out.pipe, None);
        let said = out.summary(3, 2);
        assert!(
            said.contains("min/avg/max/mdev = 37/268/728/325 µs"),
            "{said}"
        );
        let out = parse_ping(PING_ROOT_I0).unwrap();
        assert!(close(out.p50_us, 5.5), "{}", out.p50_us);
        assert_eq!(out.rtt_ms.unwrap()[1], 0.011, "ipg/ewma after the rtt");
        let out = parse_ping(PING_V6).unwrap();
        assert!(close(out.p50_us, 11.0));
        let out = parse_ping(PING_SLOW).unwrap();
        assert!(close(out.p50_us, (1080.0 + 38.0) / 2.0));
        assert_eq!(out.rtt_ms.unwrap()[2], 1.08);
    }

    #[test]
    fn ping_says_when_requests_overlapped_or_the_deadline_came_first() {
        let out = parse_ping(PING_PIPE).unwrap();
        assert_eq!(out.pipe, Some(3));
        let said = out.summary(10, 1);
        assert!(said.contains("up to 3 requests were in flight"), "{said}");
        assert!(
            said.contains("4 requests, 4 replies (10 asked; the 1 s deadline"),
            "{said}"
        );
        let dup = "64 bytes from 127.0.0.1: icmp_seq=1 ttl=64 time=0.050 ms\n\
                   64 bytes from 127.0.0.1: icmp_seq=1 ttl=64 time=0.900 ms (DUP!)\n";
        let out = parse_ping(dup).unwrap();
        assert_eq!((out.replies, out.duplicates), (1, 1));
        assert!(close(out.p50_us, 50.0));
    }

    #[test]
    fn ping_without_times_is_a_reason() {
        let why = parse_ping(PING_UNTIMED).unwrap_err();
        assert!(why.contains("3 replies without a time"), "{why}");
        assert_eq!(
            parse_ping(PING_NONE).unwrap_err(),
            "no reply in ping's output"
        );
        let why = parse_ping(PING_REFUSED).unwrap_err();
        assert!(why.contains("ping_group_range"), "{why}");
        assert!(why.contains("cap_net_raw"), "{why}");
    }

    #[test]
    fn a_users_interval_floor_is_read_from_pings_refusal() {
        assert_eq!(user_interval_floor_s(PING_FLOOR), Some(0.002));
        let old = "no reply in ping's output: ping: cannot flood; minimal interval allowed for user is 200ms";
        assert_eq!(user_interval_floor_s(old), Some(0.2));
        assert_eq!(user_interval_floor_s(PING_64), None);
    }

    #[test]
    fn sockperf_p50_is_read() {
        let text = "sockperf: ---> percentile 90.000 =   42.683\nsockperf: ---> percentile 50.000 =   35.552\n";
        assert_eq!(parse_sockperf_p50(text), Some(35.552));
        assert_eq!(parse_sockperf_p50("nothing"), None);
    }
}
