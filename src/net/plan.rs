//! `peakbench net`'s options expanded into cases, and where their tests go.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;

use super::auth::Key;
use super::case::NetCase;
use super::limits::{self, MAX_STREAMS, MAX_TEST};
use super::proto::{self, Mode, Proto, ReceiverWait};
use super::target::NetTarget;
use crate::error::usage;
use crate::plan::{Case, Context};

/// Validated client settings, constructible from code (the presets build one).
#[derive(Clone, Debug, Serialize)]
pub(crate) struct NetOptions {
    /// `None`: the loopback server on 127.0.0.1 (a child process), started when the first case
    /// runs.
    pub server: Option<SocketAddr>,
    pub protos: Vec<Proto>,
    pub modes: Vec<Mode>,
    /// `None`: TCP throughput 128 KiB, UDP throughput 1470 B, latency 1 B.
    pub msgs: Option<Vec<u64>>,
    pub streams: Vec<usize>,
    pub duration: Duration,
    pub count: Option<u64>,
    pub reverse: bool,
    /// UDP sending rates per stream; empty: unlimited.
    pub rates_bps: Vec<u64>,
    pub omit: Duration,
    /// How the TCP throughput receiver waits on an empty socket.
    pub receiver_wait: ReceiverWait,
    /// The remote server's shared key (`--key`); never written out.
    #[serde(skip)]
    pub key: Option<Key>,
}

fn default_msg(proto: Proto, mode: Mode) -> u64 {
    match (proto, mode) {
        (Proto::Tcp, Mode::Throughput) => 128 * 1024,
        (Proto::Udp, Mode::Throughput) => 1470,
        (_, Mode::Latency) => 1,
    }
}

/// The cases of `opts`, in the order they run. Nothing starts here: the loopback server
/// (when there is no `server`) starts with the first case that runs.
pub(super) fn plan(opts: &NetOptions, ctx: &Context) -> Result<Vec<Box<dyn Case>>> {
    let target = Arc::new(NetTarget::new(opts.server, opts.key.clone()));
    check_lengths(opts)?;
    let mut cases: Vec<Box<dyn Case>> = Vec::new();
    for &mode in &opts.modes {
        for &proto in &opts.protos {
            let msgs = opts
                .msgs
                .clone()
                .unwrap_or_else(|| vec![default_msg(proto, mode)]);
            for msg in msgs {
                let rates = rates(opts, proto, mode, msg)?;
                for (&streams, rate_bps) in opts
                    .streams
                    .iter()
                    .flat_map(|s| rates.iter().map(move |r| (s, *r)))
                {
                    if streams as u32 > MAX_STREAMS {
                        return Err(usage(format!(
                            "--streams: at most {} per test",
                            MAX_STREAMS
                        )));
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
                        rate_bps,
                        count: opts.count.filter(|_| mode == Mode::Latency),
                        receiver_wait: opts.receiver_wait,
                    };
                    cases.push(Box::new(NetCase {
                        spec,
                        count: opts.count.filter(|_| mode == Mode::Latency),
                        pin: ctx.runner.pin,
                        target: target.clone(),
                    }));
                }
            }
        }
    }
    Ok(cases)
}

/// Refuses `--count` without a latency test, and a test longer than the server allows.
fn check_lengths(opts: &NetOptions) -> Result<()> {
    if opts.count.is_some() && !opts.modes.contains(&Mode::Latency) {
        return Err(usage(
            "--count: counts round trips of latency tests; throughput runs by --duration",
        ));
    }
    if (opts.modes.contains(&Mode::Throughput) && opts.omit + opts.duration > MAX_TEST)
        || opts.duration > MAX_TEST
    {
        return Err(usage(format!(
            "--duration: a test lasts at most {} s with --omit (the server's limit): give a shorter --duration",
            MAX_TEST.as_secs()
        )));
    }
    Ok(())
}

/// The rates a case of `msg` bytes runs at, each checked: `--rate` limits UDP throughput only;
/// TCP and UDP latency run once, unlimited (`None`).
fn rates(opts: &NetOptions, proto: Proto, mode: Mode, msg: u64) -> Result<Vec<Option<u64>>> {
    if let Err(e) = limits::check_msg(proto, mode == Mode::Throughput, msg) {
        return Err(usage(format!("--msg: {e}")));
    }
    if proto != Proto::Udp || mode != Mode::Throughput {
        return Ok(vec![None]);
    }
    for &rate in &opts.rates_bps {
        if let Err(e) = limits::check_rate(msg, rate) {
            return Err(usage(format!("--rate: {e}")));
        }
    }
    if opts.rates_bps.is_empty() {
        return Ok(vec![None]);
    }
    Ok(opts.rates_bps.iter().copied().map(Some).collect())
}
