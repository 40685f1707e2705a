//! Network: TCP and UDP throughput and ping-pong round-trip time between a client and a
//! `peakbench net serve` server (or an in-process one on loopback).
//!
//! Each repetition is one test on the server, on data connections of its own: the control
//! protocol is in [`proto`], the data path and how bytes are counted in [`data`]. The network
//! cases do not use the shared runner's barrier: the receiver, which may be the other machine,
//! times the window, so a repetition is a whole test and the warm-up is the test's own omitted
//! start (`--omit`, TCP slow start) for throughput and the runner's `--warmup` for latency.

pub mod client;
pub mod data;
pub mod proto;
pub mod reference;
pub mod server;

use std::net::{IpAddr, SocketAddr, TcpListener, ToSocketAddrs};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use clap::{Args, Subcommand};
use serde::Serialize;

use crate::app::UsageError;
use crate::cli::{OutputArgs, PeakArgs, RunnerArgs, ThreadList, size_list, thread_list};
use crate::result::{BenchResult, CaseInfo, Extra, Params, PeakRef, Subsystem};
use crate::session::{Case, Context};
use crate::stats::{LatencyHistogram, Summary};
use crate::units::{format_size, parse_count, parse_duration};
use client::Outcome;
pub use proto::{Mode, Proto};
use server::LocalServer;

/// The server's port when none is given.
pub const DEFAULT_PORT: u16 = 5301;

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct NetArgs {
    #[command(subcommand)]
    pub command: Option<NetCommand>,
    /// The server, HOST[:PORT] (a 'peakbench net serve' there); without it an in-process server on 127.0.0.1
    #[arg(long, short = 's', value_name = "HOST[:PORT]")]
    pub server: Option<String>,
    /// Protocols: tcp, udp
    #[arg(long, value_name = "LIST", default_value = "tcp", value_parser = proto_list)]
    pub proto: ProtoList,
    /// Modes: throughput, latency (round-trip time of a ping-pong)
    #[arg(long, value_name = "LIST", default_value = "throughput,latency", value_parser = mode_list)]
    pub mode: ModeList,
    /// Message sizes (list), 1 B to 1 MB for TCP, up to 65507 B for UDP (default: TCP 128KiB, UDP 1470, latency 1)
    #[arg(long, short = 'm', value_name = "LIST", value_parser = msg_list)]
    pub msg: Option<MsgList>,
    /// Parallel streams (connections, each on its own thread), list
    #[arg(long, short = 'P', value_name = "LIST", default_value = "1", value_parser = thread_list)]
    pub streams: ThreadList,
    /// Measured length of each repetition
    #[arg(long, short = 'd', default_value = "2s", value_name = "DURATION", value_parser = positive_duration)]
    pub duration: Duration,
    /// Round trips per stream and repetition for latency (instead of --duration)
    #[arg(long, value_name = "N", value_parser = positive_count)]
    pub count: Option<u64>,
    /// The server sends and this side receives
    #[arg(long, short = 'R')]
    pub reverse: bool,
    /// UDP sending rate per stream in bit/s (e.g. 500M); unlimited without it
    #[arg(long, value_name = "BITS", value_parser = positive_count)]
    pub rate: Option<u64>,
    /// Unmeasured start of each throughput repetition (TCP slow start)
    #[arg(long, default_value = "1s", value_name = "DURATION", value_parser = any_duration)]
    pub omit: Duration,
    #[command(flatten)]
    pub runner: RunnerArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub peak: PeakArgs,
}

#[derive(Subcommand, Debug)]
pub enum NetCommand {
    /// Serve tests to any number of clients until stopped (Ctrl-C)
    Serve(ServeArgs),
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on (IPv4 or IPv6, e.g. 0.0.0.0 or ::)
    #[arg(long, default_value = "0.0.0.0", value_name = "ADDR")]
    pub bind: IpAddr,
    /// Control port
    #[arg(long, short = 'p', default_value_t = DEFAULT_PORT, value_name = "PORT")]
    pub port: u16,
}

#[derive(Clone, Debug)]
pub struct ProtoList(pub Vec<Proto>);
#[derive(Clone, Debug)]
pub struct ModeList(pub Vec<Mode>);
#[derive(Clone, Debug)]
pub struct MsgList(pub Vec<u64>);

fn proto_list(text: &str) -> Result<ProtoList, String> {
    text.split(',')
        .map(|p| match p.trim().to_ascii_lowercase().as_str() {
            "tcp" => Ok(Proto::Tcp),
            "udp" => Ok(Proto::Udp),
            other => Err(format!(
                "'{other}' is not a protocol: use tcp, udp or tcp,udp"
            )),
        })
        .collect::<Result<_, _>>()
        .map(ProtoList)
}

fn mode_list(text: &str) -> Result<ModeList, String> {
    text.split(',')
        .map(|p| match p.trim().to_ascii_lowercase().as_str() {
            "throughput" | "bw" => Ok(Mode::Throughput),
            "latency" | "rtt" | "pingpong" => Ok(Mode::Latency),
            other => Err(format!(
                "'{other}' is not a mode: use throughput, latency or both"
            )),
        })
        .collect::<Result<_, _>>()
        .map(ModeList)
}

fn msg_list(text: &str) -> Result<MsgList, String> {
    let sizes = size_list(text)?;
    if let Some(big) = sizes.iter().find(|&&s| s > 1_000_000) {
        return Err(format!(
            "{big} B is more than 1 MB, the largest message: give e.g. 1MB"
        ));
    }
    Ok(MsgList(sizes))
}

fn positive_duration(text: &str) -> Result<Duration, String> {
    match parse_duration(text).map_err(|e| e.0)? {
        d if d.is_zero() => Err("a zero duration measures nothing: give e.g. 2s".into()),
        d => Ok(d),
    }
}

fn any_duration(text: &str) -> Result<Duration, String> {
    parse_duration(text).map_err(|e| e.0)
}

fn positive_count(text: &str) -> Result<u64, String> {
    match parse_count(text).map_err(|e| e.0)? {
        0 => Err("0 is nothing: give a positive number, e.g. 10000 or 500M".into()),
        n => Ok(n),
    }
}

/// Validated client settings, constructible from code (the presets build one).
#[derive(Clone, Debug, Serialize)]
pub struct NetOptions {
    /// `None`: an in-process server on 127.0.0.1, started by [`plan`].
    pub server: Option<SocketAddr>,
    pub protos: Vec<Proto>,
    pub modes: Vec<Mode>,
    /// `None`: TCP throughput 128 KiB, UDP throughput 1470 B, latency 1 B.
    pub msgs: Option<Vec<u64>>,
    pub streams: Vec<usize>,
    pub duration: Duration,
    pub count: Option<u64>,
    pub reverse: bool,
    pub rate_bps: Option<u64>,
    pub omit: Duration,
}

impl NetOptions {
    /// Loopback, TCP and UDP, both modes, short runs.
    pub fn quick() -> NetOptions {
        NetOptions {
            server: None,
            protos: vec![Proto::Tcp, Proto::Udp],
            modes: vec![Mode::Throughput, Mode::Latency],
            msgs: None,
            streams: vec![1],
            duration: Duration::from_millis(500),
            count: None,
            reverse: false,
            rate_bps: None,
            omit: Duration::from_millis(200),
        }
    }
}

/// Where the tests go: a remote server, or the in-process one this holds.
pub struct Target {
    pub addr: SocketAddr,
    pub loopback: bool,
    _local: Option<LocalServer>,
}

fn default_msg(proto: Proto, mode: Mode) -> u64 {
    match (proto, mode) {
        (Proto::Tcp, Mode::Throughput) => 128 * 1024,
        (Proto::Udp, Mode::Throughput) => 1470,
        (_, Mode::Latency) => 1,
    }
}

/// The cases of `opts`, in the order they run; the in-process server (when there is no
/// `server`) starts here and stops when the last case is dropped.
pub fn plan(opts: &NetOptions, _ctx: &Context) -> Result<Vec<Box<dyn Case>>> {
    let target = Arc::new(match opts.server {
        Some(addr) => Target {
            addr,
            loopback: addr.ip().is_loopback(),
            _local: None,
        },
        None => {
            let local = LocalServer::start()?;
            Target {
                addr: local.addr,
                loopback: true,
                _local: Some(local),
            }
        }
    });
    if opts.count.is_some() && !opts.modes.contains(&Mode::Latency) {
        return Err(UsageError(
            "--count: counts round trips of latency tests; throughput runs by --duration".into(),
        )
        .into());
    }
    let mut cases: Vec<Box<dyn Case>> = Vec::new();
    for &mode in &opts.modes {
        for &proto in &opts.protos {
            let msgs = opts
                .msgs
                .clone()
                .unwrap_or_else(|| vec![default_msg(proto, mode)]);
            for msg in msgs {
                if let Err(e) = data::check_msg(proto, mode == Mode::Throughput, msg) {
                    return Err(UsageError(format!("--msg: {e}")).into());
                }
                for &streams in &opts.streams {
                    if streams as u32 > server::MAX_STREAMS {
                        return Err(UsageError(format!(
                            "--streams: at most {} per test",
                            server::MAX_STREAMS
                        ))
                        .into());
                    }
                    let spec = proto::TestSpec {
                        proto,
                        mode,
                        msg_bytes: msg,
                        streams: streams as u32,
                        omit_ms: if mode == Mode::Throughput {
                            opts.omit.as_millis() as u64
                        } else {
                            0
                        },
                        duration_ms: opts.duration.as_millis().max(1) as u64,
                        reverse: opts.reverse && mode == Mode::Throughput,
                        rate_bps: opts.rate_bps.filter(|_| proto == Proto::Udp),
                    };
                    cases.push(Box::new(NetCase {
                        spec,
                        count: opts.count.filter(|_| mode == Mode::Latency),
                        target: target.clone(),
                    }));
                }
            }
        }
    }
    Ok(cases)
}

/// One network experiment.
pub struct NetCase {
    pub spec: proto::TestSpec,
    pub count: Option<u64>,
    pub target: Arc<Target>,
}

impl Case for NetCase {
    fn id(&self) -> String {
        let s = &self.spec;
        format!(
            "net-{}-{}-m{}-s{}{}",
            s.proto.name(),
            s.mode.name(),
            s.msg_bytes,
            s.streams,
            if s.reverse { "-reverse" } else { "" }
        )
    }

    fn label(&self) -> String {
        let s = &self.spec;
        format!(
            "net {} {} {} ×{}{}",
            s.proto.name(),
            s.mode.name(),
            format_size(s.msg_bytes),
            s.streams,
            if s.reverse { " reverse" } else { "" }
        )
    }

    fn estimate(&self, ctx: &Context) -> Duration {
        let per = match self.spec.mode {
            Mode::Throughput => Duration::from_millis(self.spec.omit_ms + self.spec.duration_ms),
            Mode::Latency => ctx.runner.warmup + Duration::from_millis(self.spec.duration_ms),
        };
        (per + Duration::from_millis(50)) * ctx.runner.repetitions
    }

    fn run(&self, ctx: &Context) -> Result<BenchResult> {
        let mut outcomes = Vec::new();
        for _ in 0..ctx.runner.repetitions {
            if crate::interrupt::requested() {
                bail!(crate::interrupt::Interrupted);
            }
            outcomes.push(client::run_test(
                self.target.addr,
                &self.spec,
                ctx.runner.warmup,
                self.count,
            )?);
        }
        let mut result = match self.spec.mode {
            Mode::Throughput => self.throughput_result(ctx, &outcomes)?,
            Mode::Latency => self.latency_result(ctx, &outcomes)?,
        };
        if ctx.runner.reference {
            let reference = reference::run(&self.spec, &self.target, self.count, ctx)?;
            result = result.with_reference(reference);
        }
        Ok(result)
    }
}

fn extra(metric: &str, unit: &str, values: &[f64]) -> Option<Extra> {
    let stats = Summary::of(values)?;
    Some(Extra {
        metric: metric.into(),
        unit: unit.into(),
        value: stats.median,
        stats,
    })
}

impl NetCase {
    fn params(&self) -> Params {
        let s = &self.spec;
        let mut params = Params {
            protocol: Some(s.proto.name().into()),
            message_bytes: Some(s.msg_bytes),
            streams: Some(s.streams as usize),
            duration_s: Some(s.duration_ms as f64 / 1e3),
            ..Params::default()
        };
        params.other.insert("reverse".into(), s.reverse.into());
        params
            .other
            .insert("server".into(), self.target.addr.to_string().into());
        params.other.insert(
            "in_process_server".into(),
            self.target._local.is_some().into(),
        );
        if s.mode == Mode::Throughput {
            params
                .other
                .insert("omit_s".into(), (s.omit_ms as f64 / 1e3).into());
        }
        if let Some(rate) = s.rate_bps {
            params.other.insert("rate_bps".into(), rate.into());
        }
        if let Some(count) = self.count {
            params.other.insert("round_trips".into(), count.into());
        }
        params
    }

    fn info(&self, metric: &str, unit: &str, counting: String) -> CaseInfo {
        CaseInfo {
            id: self.id(),
            subsystem: Subsystem::Network,
            op: format!("{}-{}", self.spec.proto.name(), self.spec.mode.name()),
            params: self.params(),
            metric: metric.into(),
            unit: unit.into(),
            counting,
        }
    }

    fn throughput_result(&self, ctx: &Context, outcomes: &[Outcome]) -> Result<BenchResult> {
        let streams = self.spec.streams as usize;
        let mut total = Vec::new();
        let mut per_stream: Vec<Vec<f64>> = vec![Vec::new(); streams];
        let (mut sent, mut received, mut lost, mut loss_pct, mut reordered, mut jitter) =
            (vec![], vec![], vec![], vec![], vec![], vec![]);
        for outcome in outcomes {
            let Outcome::Throughput {
                window,
                udp,
                sent: s,
            } = outcome
            else {
                bail!("a throughput test returned something else");
            };
            let secs = window.window_ns as f64 / 1e9;
            let bytes: u64 = window.stream_bytes.iter().sum();
            total.push(bytes as f64 * 8.0 / secs / 1e6);
            for (i, b) in window.stream_bytes.iter().enumerate().take(streams) {
                per_stream[i].push(*b as f64 * 8.0 / secs / 1e6);
            }
            if self.spec.proto == Proto::Udp {
                let s: u64 = s.iter().sum();
                let r: u64 = udp.iter().map(|u| u.received).sum();
                sent.push(s as f64);
                received.push(r as f64);
                lost.push(s.saturating_sub(r) as f64);
                loss_pct.push(if s > 0 {
                    100.0 * s.saturating_sub(r) as f64 / s as f64
                } else {
                    0.0
                });
                reordered.push(udp.iter().map(|u| u.reordered).sum::<u64>() as f64);
                let j = udp.iter().map(|u| u.jitter_ns).sum::<f64>() / udp.len().max(1) as f64;
                jitter.push(j / 1e3);
            }
        }
        let counting = match self.spec.proto {
            Proto::Tcp => format!(
                "payload bytes read by the receiver ({}) in the window from {} ms after the start to the end of --duration, on the receiver's clock; 1 Mb = 10^6 bits; {}-byte writes",
                if self.spec.reverse {
                    "this client"
                } else {
                    "the server"
                },
                self.spec.omit_ms,
                self.spec.msg_bytes
            ),
            Proto::Udp => format!(
                "UDP payload bytes (whole {}-byte datagrams, the 20-byte sequence header included) received by the {} in the window after {} ms, on its clock; lost = sent − received over the whole test; 1 Mb = 10^6 bits",
                self.spec.msg_bytes,
                if self.spec.reverse {
                    "client"
                } else {
                    "server"
                },
                self.spec.omit_ms
            ),
        };
        let info = self.info("throughput", "Mb/s", counting);
        let result = BenchResult::from_samples(&ctx.host.hostname, info, total.clone())
            .context("no repetition produced a finite rate")?;
        let mut result = result.with_peak(nic_peak(ctx, &self.target));
        let gbps: Vec<f64> = total.iter().map(|v| v / 1e3).collect();
        result.extra.extend(extra("throughput", "Gb/s", &gbps));
        if streams > 1 {
            for (i, values) in per_stream.iter().enumerate() {
                result
                    .extra
                    .extend(extra(&format!("stream {i} throughput"), "Mb/s", values));
            }
        }
        for (metric, unit, values) in [
            ("packets sent", "packets", &sent),
            ("packets received", "packets", &received),
            ("packets lost", "packets", &lost),
            ("loss", "%", &loss_pct),
            ("packets reordered", "packets", &reordered),
            ("jitter", "µs", &jitter),
        ] {
            result.extra.extend(extra(metric, unit, values));
        }
        if self.target.loopback {
            result.warnings.push(
                "loopback has no link speed, so no peak: its bound is the memory copy bandwidth (see 'peakbench sysinfo')".into(),
            );
        }
        if result.stats.cv.is_some_and(|cv| cv > 0.05) {
            result.warnings.push(format!(
                "repetitions vary by {:.1} % (CV > 5 %): raise --duration or --repetitions",
                result.stats.cv.unwrap_or(0.0) * 100.0
            ));
        }
        if loss_pct.iter().any(|&l| l > 1.0) && self.spec.rate_bps.is_none() {
            result.warnings.push(
                "UDP at unlimited rate loses datagrams at the receiver: give --rate to measure loss at a chosen load".into(),
            );
        }
        Ok(result)
    }

    fn latency_result(&self, ctx: &Context, outcomes: &[Outcome]) -> Result<BenchResult> {
        let mut merged = LatencyHistogram::new();
        let mut p50 = Vec::new();
        let mut rate = Vec::new();
        let mut lost = Vec::new();
        for outcome in outcomes {
            let Outcome::Latency(streams) = outcome else {
                bail!("a latency test returned something else");
            };
            let mut rep = LatencyHistogram::new();
            let mut trips = 0.0;
            for s in streams {
                rep.merge(&s.histogram);
                trips += s.round_trips as f64 / s.elapsed.as_secs_f64().max(1e-9);
            }
            if rep.count() == 0 {
                bail!("no round trip completed: the server does not answer");
            }
            p50.push(rep.quantile(0.5) as f64 / 1e3);
            rate.push(trips);
            lost.push(streams.iter().map(|s| s.lost).sum::<u64>() as f64);
            merged.merge(&rep);
        }
        let counting = format!(
            "round-trip time of one ping-pong: {} B sent, the same {} B echoed back{}, timed on the client from before the send to after the whole reply; value = median over repetitions of each repetition's p50; percentiles from all round trips merged",
            self.spec.msg_bytes,
            self.spec.msg_bytes,
            if self.spec.proto == Proto::Tcp {
                " (TCP_NODELAY)"
            } else {
                ""
            }
        );
        let info = self.info("rtt", "µs", counting);
        let mut result = BenchResult::from_samples(&ctx.host.hostname, info, p50)
            .context("no repetition produced a round trip")?;
        result.latency_ns = merged.summary();
        result.extra.extend(extra("round trips", "1/s", &rate));
        if self.spec.proto == Proto::Udp {
            result
                .extra
                .extend(extra("requests lost", "packets", &lost));
        }
        Ok(result)
    }
}

/// The peak of the interface the traffic leaves by; `None` on loopback or when unknown.
fn nic_peak(ctx: &Context, target: &Target) -> Option<PeakRef> {
    if target.loopback {
        return None;
    }
    let probe = std::net::UdpSocket::bind(match target.addr {
        SocketAddr::V4(_) => "0.0.0.0:0",
        SocketAddr::V6(_) => "[::]:0",
    })
    .ok()?;
    probe.connect(target.addr).ok()?;
    let local = probe.local_addr().ok()?.ip();
    let name = interface_of(local)?;
    let nic = ctx.peaks.nics.iter().find(|n| n.interface == name)?;
    Some(PeakRef {
        value: nic.gbps.value? * 1e3,
        unit: "Mb/s".into(),
        source: format!(
            "link speed of {name} ({}: {})",
            nic.gbps.source, nic.gbps.detail
        ),
    })
}

/// The name of the interface that holds `ip`.
fn interface_of(ip: IpAddr) -> Option<String> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills a list we free below; every pointer is checked before use.
    unsafe {
        if libc::getifaddrs(&mut list) != 0 {
            return None;
        }
        let mut found = None;
        let mut cur = list;
        while !cur.is_null() {
            let entry = &*cur;
            if !entry.ifa_addr.is_null() {
                let family = (*entry.ifa_addr).sa_family as i32;
                let addr: Option<IpAddr> = if family == libc::AF_INET {
                    let sin = &*(entry.ifa_addr as *const libc::sockaddr_in);
                    Some(std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)).into())
                } else if family == libc::AF_INET6 {
                    let sin6 = &*(entry.ifa_addr as *const libc::sockaddr_in6);
                    Some(std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr).into())
                } else {
                    None
                };
                if addr == Some(ip) {
                    found = Some(
                        std::ffi::CStr::from_ptr(entry.ifa_name)
                            .to_string_lossy()
                            .into_owned(),
                    );
                    break;
                }
            }
            cur = entry.ifa_next;
        }
        libc::freeifaddrs(list);
        found
    }
}

/// Resolves `HOST[:PORT]`, `IPv4`, `IPv6` or `[IPv6]:PORT`.
pub fn resolve_server(text: &str) -> Result<SocketAddr, String> {
    let text = text.trim();
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    if let Ok(ip) = text.trim_matches(['[', ']']).parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, DEFAULT_PORT));
    }
    let with_port = if text.contains(':') {
        text.to_string()
    } else {
        format!("{text}:{DEFAULT_PORT}")
    };
    with_port
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve '{text}' ({e}): give HOST[:PORT] or an IP address"))?
        .next()
        .ok_or_else(|| format!("'{text}' resolves to no address: give an IP address"))
}

/// `peakbench net` and `peakbench net serve`.
pub fn command(args: &NetArgs) -> Result<ExitCode> {
    if let Some(NetCommand::Serve(serve)) = &args.command {
        return serve_command(serve);
    }
    let ctx = crate::app::context(&args.peak, &args.runner);
    let planned = cases(args, &ctx)?;
    let config = serde_json::json!({ "net": planned.config, "runner": ctx.runner });
    crate::app::execute(planned.cases, &ctx, &args.output, config, planned.notes)
}

/// The client's cases, for `peakbench net` and `peakbench run`.
pub(crate) fn cases(args: &NetArgs, ctx: &Context) -> Result<crate::app::Planned> {
    if args.command.is_some() {
        anyhow::bail!("'net serve' is a server, not a benchmark: start it on the other machine");
    }
    let server = match &args.server {
        Some(text) => Some(resolve_server(text).map_err(|e| UsageError(format!("--server: {e}")))?),
        None => None,
    };
    let opts = NetOptions {
        server,
        protos: args.proto.0.clone(),
        modes: args.mode.0.clone(),
        msgs: args.msg.as_ref().map(|m| m.0.clone()),
        streams: args.streams.0.clone(),
        duration: args.duration,
        count: args.count,
        reverse: args.reverse,
        rate_bps: args.rate,
        omit: args.omit,
    };
    let cases = plan(&opts, ctx)?;
    Ok(crate::app::Planned {
        cases,
        notes: Vec::new(),
        config: serde_json::to_value(&opts)?,
    })
}

fn serve_command(args: &ServeArgs) -> Result<ExitCode> {
    let listener = TcpListener::bind((args.bind, args.port)).map_err(|e| {
        UsageError(format!(
            "--bind/--port: cannot listen on {}: {e}; choose another --port or address",
            SocketAddr::new(args.bind, args.port)
        ))
    })?;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    // Ctrl-C sets the shared interrupt flag; pass it on to the accept loop.
    std::thread::spawn(move || {
        while !crate::interrupt::requested() {
            std::thread::sleep(Duration::from_millis(100));
        }
        flag.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    server::serve(listener, stop, true)?;
    eprintln!("net serve: stopped");
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_resolve_with_and_without_port() {
        assert_eq!(resolve_server("127.0.0.1").unwrap().port(), DEFAULT_PORT);
        assert_eq!(resolve_server("127.0.0.1:9").unwrap().port(), 9);
        assert_eq!(resolve_server("::1").unwrap().port(), DEFAULT_PORT);
        assert_eq!(resolve_server("[::1]:7").unwrap().port(), 7);
        assert!(resolve_server("localhost").is_ok());
    }

    #[test]
    fn message_sizes_are_checked_per_protocol() {
        assert!(data::check_msg(Proto::Tcp, true, 1).is_ok());
        assert!(data::check_msg(Proto::Tcp, true, 1_000_001).is_err());
        assert!(data::check_msg(Proto::Udp, true, 65_507).is_ok());
        assert!(data::check_msg(Proto::Udp, true, 65_508).is_err());
        assert!(data::check_msg(Proto::Udp, true, 8).is_err());
        assert!(data::check_msg(Proto::Udp, false, 1).is_ok());
    }

    #[test]
    fn a_test_runs_against_the_in_process_server() {
        let server = LocalServer::start().unwrap();
        let spec = proto::TestSpec {
            proto: Proto::Tcp,
            mode: Mode::Throughput,
            msg_bytes: 65536,
            streams: 2,
            omit_ms: 0,
            duration_ms: 200,
            reverse: false,
            rate_bps: None,
        };
        let Outcome::Throughput { window, sent, .. } =
            client::run_test(server.addr, &spec, Duration::ZERO, None).unwrap()
        else {
            panic!("throughput outcome expected");
        };
        assert_eq!(window.stream_bytes.len(), 2);
        assert!(window.stream_bytes.iter().all(|&b| b > 0));
        // The receiver cannot have counted more than was sent.
        let counted: u64 = window.stream_bytes.iter().sum();
        assert!(counted <= sent.iter().sum::<u64>());
        assert!((150_000_000..400_000_000).contains(&window.window_ns));
    }
}
