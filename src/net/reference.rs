//! The standard tools on the same case: iperf3 for throughput, sockperf ping-pong for latency.
//!
//! Against the in-process server, peakbench starts the tool's server itself on a free loopback
//! port (`iperf3 -s -1`, `sockperf sr`) and stops it afterwards; against a remote `--server` it
//! expects `iperf3 -s` (port 5201) and `sockperf sr` (port 11111) running there.
//! iperf3's value is `end.sum_received.bits_per_second` (its receiver's count, like ours);
//! sockperf's is the p50 of `pp --full-rtt` (round trip, not its default half round trip).
//! Both take whole seconds, so durations are rounded up to at least 1 s.

use std::net::{IpAddr, SocketAddr, TcpListener, UdpSocket};
use std::time::Duration;

use super::Target;
use super::proto::{Mode, Proto, TestSpec};
use crate::plan::Context;
use crate::reference::{Invocation, Reading, Ready, Server, Source, Tool};
use crate::result::Reference;

const IPERF3: Tool = Tool {
    name: "iperf3",
    program: "iperf3",
    install: "apt-get install iperf3",
};

const SOCKPERF: Tool = Tool {
    name: "sockperf",
    program: "sockperf",
    install: "apt-get install sockperf",
};

/// sockperf's smallest message (its own header).
const SOCKPERF_MIN_MSG: u64 = 14;

/// Runs the tool that fits `spec` and returns its value (Mb/s or µs).
pub fn run(
    spec: &TestSpec,
    target: &Target,
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

fn iperf3(spec: &TestSpec, target: &Target) -> anyhow::Result<Reference> {
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

fn sockperf(spec: &TestSpec, target: &Target) -> anyhow::Result<Reference> {
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

    #[test]
    fn sockperf_p50_is_read() {
        let text = "sockperf: ---> percentile 90.000 =   42.683\nsockperf: ---> percentile 50.000 =   35.552\n";
        assert_eq!(parse_sockperf_p50(text), Some(35.552));
        assert_eq!(parse_sockperf_p50("nothing"), None);
    }
}
