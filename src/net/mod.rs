//! Network: TCP and UDP throughput and ping-pong round-trip time between a client and a
//! `peakbench net serve` server (or, without `--server`, one on loopback that peakbench starts
//! as a child process).
//!
//! Each repetition is one test on the server, on data connections of its own: the control
//! protocol is in [`proto`], the data path and how bytes are counted in [`data`]. The network
//! cases do not use the shared runner's barrier: the receiver, which may be the other machine,
//! times the window, so a repetition is a whole test and the warm-up is the test's own omitted
//! start (`--omit`, TCP slow start) for throughput and the runner's `--warmup` for latency.

pub(crate) mod args;
mod params;
pub(crate) mod auth;
mod case;
pub(crate) mod client;
pub(crate) mod data;
pub(crate) mod limits;
mod loopback;
mod plan;
pub(crate) mod proto;
pub(crate) mod reference;
pub(crate) mod server;
pub(crate) mod child;
mod target;

use std::net::{IpAddr, SocketAddr, TcpListener, ToSocketAddrs};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use std::io::Write as _;

use anyhow::{Context as _, Result};
use clap::{ArgMatches, Args, FromArgMatches};

use crate::error::usage;
use crate::options::unique;
use crate::plan::{Context, Plan};
use crate::workload::{Benchmark, Direct};
use args::{NetArgs, ServeArgs};
// What the cluster's network matrix (the `mpi` feature) builds its cases from.
#[cfg(feature = "mpi")]
pub(crate) use case::NetCase;
pub(crate) use limits::DEFAULT_PORT;
use limits::{MAX_STREAMS, MAX_TEST};
pub(crate) use plan::NetOptions;
#[cfg(any(feature = "mpi", test))]
pub(crate) use proto::{Mode, Proto};
#[cfg(any(feature = "mpi", test))]
pub(crate) use target::NetTarget;

/// `peakbench net`.
pub(crate) struct Net;

impl Benchmark for Net {
    const NAME: &'static str = "net";
    const PATH: &'static [&'static str] = &["net"];
    const ABOUT: &'static str =
        "Network throughput (Mb/s) and round-trip time over TCP and UDP; `net serve` is the server";
    type Args = NetArgs;

    fn plan(args: &NetArgs, ctx: &Context) -> Result<Plan> {
        let server = match &args.server {
            Some(text) => Some(resolve_server(text).map_err(|e| usage(format!("--server: {e}")))?),
            None => None,
        };
        let opts = NetOptions {
            server,
            protos: unique(&args.proto),
            modes: unique(&args.mode),
            msgs: args.msg.as_deref().map(unique),
            streams: unique(&args.streams),
            duration: args.timing.duration,
            count: args.count,
            reverse: args.reverse,
            rates_bps: unique(&args.rate),
            omit: args.omit,
            receiver_wait: args.receiver_wait,
            key: auth::Key::resolve(args.key.as_deref())?,
        };
        let cases = plan::plan(&opts, ctx)?;
        Plan::new(cases, Vec::new(), &opts)
    }

    fn direct() -> Option<&'static dyn Direct> {
        Some(&Serve)
    }
}

/// `peakbench net serve`: the server, until stopped.
pub(crate) struct Serve;

impl Direct for Serve {
    fn path(&self) -> &'static [&'static str] {
        &["net", "serve"]
    }

    fn about(&self) -> &'static str {
        "Serve tests to any number of clients until stopped (Ctrl-C)"
    }

    fn command(&self) -> clap::Command {
        ServeArgs::augment_args(clap::Command::new("serve").about(self.about()))
    }

    fn run(&self, matches: &ArgMatches) -> Result<ExitCode> {
        let args = ServeArgs::from_arg_matches(matches)?;
        serve_command(&args)
    }
}

/// Resolves `HOST[:PORT]`, `IPv4`, `IPv6` or `[IPv6]:PORT`.
pub(crate) fn resolve_server(text: &str) -> Result<SocketAddr, String> {
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

fn serve_command(args: &ServeArgs) -> Result<ExitCode> {
    if args.max_duration > MAX_TEST {
        return Err(usage(format!(
            "--max-duration: at most {} s (the protocol's limit)",
            MAX_TEST.as_secs()
        )));
    }
    if args.max_streams > u64::from(MAX_STREAMS) {
        return Err(usage(format!(
            "--max-streams: at most {} (the protocol's limit)",
            MAX_STREAMS
        )));
    }
    let policy = server::Policy {
        key: if args.key_stdin {
            let mut line = String::new();
            std::io::stdin()
                .read_line(&mut line)
                .context("reading the key on stdin")?;
            Some(auth::Key::from_hex(&line)?)
        } else {
            auth::Key::resolve(args.key.as_deref())?
        },
        allow: args.allow.clone(),
        per_address: usize::try_from(args.max_per_address).unwrap_or(usize::MAX),
        total_streams: args.max_total_streams,
        buffer_bytes: args.max_buffers,
        max_test: args.max_duration,
        max_streams: args.max_streams as u32,
        max_rate_bps: args.max_rate,
    };
    // A vanished reader of the log (`2>&1 | head -1`) must not end the server with SIGPIPE: the
    // write then fails with EPIPE and the line is dropped. Its sockets send with MSG_NOSIGNAL.
    // SAFETY: setting a signal's disposition to SIG_IGN installs no handler.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let files = server::raise_open_file_limit();
    if !args.announce {
        server::log_line(&format!("open-file limit {files}"));
    }
    let listener = TcpListener::bind((args.bind, args.port)).map_err(|e| {
        usage(format!(
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
    if args.announce {
        // For the parent that started this server: its port, then nothing more on stdout.
        let port = listener.local_addr().context("the bound port")?.port();
        let mut out = std::io::stdout().lock();
        writeln!(out, "port {port}")
            .and_then(|_| out.flush())
            .context("announcing the port")?;
        server::serve(listener, stop, false, policy)?;
        return Ok(ExitCode::SUCCESS);
    }
    server::serve(listener, stop, true, policy)?;
    server::log_line("stopped");
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::client::TestOutcome;
    use super::server::LocalServer;
    use super::*;

    #[test]
    fn repeated_protocols_and_modes_plan_each_case_once_and_start_nothing() {
        let ctx = crate::plan::Context::fixture();
        let args = [
            "net",
            "--proto",
            "tcp,tcp,udp",
            "--mode",
            "latency,latency",
            "-P",
            "1,1",
        ];
        let plan = crate::workload::plan_for::<Net>(&args, &ctx).unwrap();
        let ids: Vec<String> = plan.cases.iter().map(|c| c.spec().id).collect();
        assert_eq!(ids, ["net-tcp-latency-m1-s1", "net-udp-latency-m1-s1"]);
        let target = NetTarget::new(None, None);
        assert!(
            !target.started(),
            "a target starts nothing until a case asks for it"
        );
        target.addr().unwrap();
        assert!(target.started());
    }

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
        assert!(limits::check_msg(Proto::Tcp, true, 1).is_ok());
        assert!(limits::check_msg(Proto::Tcp, true, 1_000_001).is_err());
        assert!(limits::check_msg(Proto::Udp, true, 65_507).is_ok());
        assert!(limits::check_msg(Proto::Udp, true, 65_508).is_err());
        // Throughput datagrams shorter than the sequence header go without one.
        assert!(limits::check_msg(Proto::Udp, true, 1).is_ok());
        assert!(limits::check_msg(Proto::Udp, true, 0).is_err());
        assert!(limits::check_msg(Proto::Udp, false, 1).is_ok());
    }

    /// A server with a key serves its holders only; the key never crosses the wire.
    #[test]
    fn a_keyed_server_refuses_a_client_without_its_key() {
        let key = auth::Key::from_bytes(b"a shared key of 32 bytes or so!!").unwrap();
        let server = LocalServer::start(Some(key.clone())).unwrap();
        let spec = proto::TestSpec {
            proto: Proto::Tcp,
            mode: Mode::Latency,
            msg_bytes: 1,
            streams: 1,
            omit_ms: 0,
            duration_ms: 50,
            reverse: false,
            rate_bps: None,
            count: None,
            receiver_wait: proto::ReceiverWait::Auto,
        };
        let run = |k: Option<&auth::Key>| {
            client::run_test(server.addr, &spec, k, Duration::ZERO, Some(10), false)
                .map(|_| ())
                .map_err(|e| format!("{e:#}"))
        };
        let none = run(None).unwrap_err();
        assert!(
            none.contains("--key") && none.contains("requires"),
            "{none}"
        );
        let wrong = auth::Key::from_bytes(b"another key of 32 bytes or so!!!").unwrap();
        let refused = run(Some(&wrong)).unwrap_err();
        assert!(refused.contains("does not match"), "{refused}");
        run(Some(&key)).unwrap();
    }

    #[test]
    fn a_test_runs_against_the_in_process_server() {
        let key = auth::Key::random();
        let server = LocalServer::start(Some(key.clone())).unwrap();
        let spec = proto::TestSpec {
            proto: Proto::Tcp,
            mode: Mode::Throughput,
            msg_bytes: 65536,
            streams: 2,
            omit_ms: 0,
            duration_ms: 200,
            reverse: false,
            rate_bps: None,
            count: None,
            receiver_wait: proto::ReceiverWait::Auto,
        };
        let TestOutcome::Throughput { window, sent, .. } =
            client::run_test(server.addr, &spec, Some(&key), Duration::ZERO, None, false).unwrap()
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
