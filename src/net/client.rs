//! One test against a server: handshake, data connections, the run, the receiver's counts.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::auth::{Key, Nonce};
use super::data::{self, PingPong, Sockets, StreamCpus};
use super::proto::{
    Control, Mode, Msg, PROTOCOL_VERSION, Proto, TestSpec, UdpCounts, Window, hello_message,
};
use crate::evidence::PeerEvidence;

/// How long a connection to the server may take before it counts as unreachable.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a test refused `busy` (the server's slots or budgets full for the moment) is
/// retried, with a back-off from 20 ms doubling to 500 ms, before the refusal is the error.
pub(crate) const BUSY_RETRY: Duration = Duration::from_secs(10);

/// A server's refusal for want of room for the moment (its text starts with `busy`): the
/// client tries again. A latency test ends when the client closes its control connection, so
/// its next repetition can reach the server a moment before the slot of the previous one is
/// given back; the server gives a throughput test's slot back before its last message.
#[derive(Debug)]
struct Busy(String);

impl std::fmt::Display for Busy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Busy {}

/// The error of a refusal by `server`, escaped; a [`Busy`] one when the server is full.
fn refused(server: SocketAddr, error: &str) -> anyhow::Error {
    let why = format!(
        "the server at {server} refused the test: {}",
        super::proto::escaped(error)
    );
    if error.starts_with("busy") {
        Busy(why).into()
    } else {
        anyhow::anyhow!(why)
    }
}

/// What one test measured.
pub(crate) enum TestOutcome {
    Throughput {
        window: Window,
        /// Per stream; empty for TCP.
        udp: Vec<UdpCounts>,
        /// Per stream: bytes (TCP) or datagrams (UDP) the sender sent.
        sent: Vec<u64>,
        /// What the server's machine showed during the test, made safe to keep.
        server: Option<Box<PeerEvidence>>,
    },
    Latency(Vec<PingPong>),
}

fn connect(addr: SocketAddr) -> Result<TcpStream> {
    TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT).with_context(|| {
        format!(
            "cannot reach the peakbench server at {addr} (within {} s); start it there with \
             'peakbench net serve' or check --server",
            CONNECT_TIMEOUT.as_secs()
        )
    })
}

/// Reads the server's challenge; returns the hello's proof when the server wants the key.
pub(crate) fn handshake(
    control: &mut Control,
    server: SocketAddr,
    spec: &TestSpec,
    key: Option<&Key>,
) -> Result<Option<String>> {
    let challenge = control
        .recv(Instant::now() + Duration::from_secs(10))
        .with_context(|| {
            format!(
                "waiting for the server's challenge (a peakbench server older than protocol v{PROTOCOL_VERSION} sends none: use the same peakbench on both sides)"
            )
        })?;
    match challenge {
        Msg::Challenge { version, .. } if version != PROTOCOL_VERSION => bail!(
            "the server at {server} speaks protocol v{version}, this peakbench v{PROTOCOL_VERSION}: use the same peakbench on both sides"
        ),
        Msg::Challenge { key: false, .. } => Ok(None),
        Msg::Challenge {
            nonce, key: true, ..
        } => {
            let Some(key) = key else {
                return Err(crate::error::usage(format!(
                    "--key: the server at {server} requires a shared key: give its key file with --key FILE or ${}",
                    super::auth::KEY_ENV
                )));
            };
            let nonce = Nonce::from_hex(&nonce)
                .with_context(|| format!("the server at {server} sent a malformed nonce"))?;
            Ok(Some(key.prove(&nonce, &hello_message(spec))))
        }
        Msg::Refused { error } => Err(refused(server, &error)),
        _ => bail!("the server at {server} answered out of turn"),
    }
}

/// Runs one test; `warmup` and `count` apply to latency tests; with `pin`, stream i runs on
/// the i-th CPU.
pub(crate) fn run_test(
    server: SocketAddr,
    spec: &TestSpec,
    key: Option<&Key>,
    warmup: Duration,
    count: Option<u64>,
    pin: bool,
) -> Result<TestOutcome> {
    let (mut control, ports, token) = admitted(server, spec, key)?;
    let sockets = open_data(server.ip(), spec, &ports, token)?;
    match control.recv(Instant::now() + Duration::from_secs(10))? {
        Msg::Ready => {}
        Msg::Refused { error } => bail!(
            "the server at {server} gave up: {}",
            super::proto::escaped(&error)
        ),
        _ => bail!("the server at {server} answered out of turn"),
    }
    // Spinning TCP receivers (the server's in forward mode, ours with --reverse) and, on
    // loopback, where each side's threads run.
    let threads = data::DataThreads::for_spec(spec, server.ip().to_canonical().is_loopback(), pin);
    match (spec.mode, spec.reverse) {
        (Mode::Throughput, false) => send_window(control, &sockets, spec, token, threads),
        (Mode::Throughput, true) => receive_window(control, &sockets, spec, token, threads),
        (Mode::Latency, _) => {
            let deadline = Instant::now() + warmup + Duration::from_millis(spec.duration_ms);
            let streams = ping_streams(&sockets, spec, warmup, deadline, count, pin);
            drop(sockets);
            drop(control);
            Ok(TestOutcome::Latency(streams?))
        }
    }
}

/// A control connection on which `server` accepted the test, its data ports and token; a
/// `busy` refusal is retried for [`BUSY_RETRY`].
fn admitted(
    server: SocketAddr,
    spec: &TestSpec,
    key: Option<&Key>,
) -> Result<(Control, Vec<u16>, u64)> {
    let started = Instant::now();
    let mut wait = Duration::from_millis(20);
    loop {
        let stream = connect(server)?;
        stream.set_nodelay(true)?;
        let mut control = Control::new(stream)?;
        match request(&mut control, server, spec, key) {
            Ok((ports, token)) => return Ok((control, ports, token)),
            Err(e)
                if e.downcast_ref::<Busy>().is_some()
                    && started.elapsed() + wait < BUSY_RETRY
                    && !crate::interrupt::requested() =>
            {
                drop(control);
                // A little jitter, so clients refused together do not return together.
                let jitter = Duration::from_nanos(data::now_ns() % (wait.as_nanos() as u64 / 2));
                std::thread::sleep(wait + jitter);
                wait = (wait * 2).min(Duration::from_millis(500));
            }
            Err(e) => return Err(e),
        }
    }
}

/// The handshake and the hello; returns the data ports and the token the server accepted the
/// test with.
fn request(
    control: &mut Control,
    server: SocketAddr,
    spec: &TestSpec,
    key: Option<&Key>,
) -> Result<(Vec<u16>, u64)> {
    let auth = handshake(control, server, spec, key)?;
    control.send(&Msg::Hello {
        peakbench: PROTOCOL_VERSION,
        test: spec.clone(),
        auth,
    })?;
    let step = Instant::now() + Duration::from_secs(10);
    match control
        .recv(step)
        .context("waiting for the server's answer")?
    {
        Msg::Accepted { ports, token, .. } => Ok((ports, token)),
        Msg::Refused { error } => Err(refused(server, &error)),
        _ => bail!("the server at {server} answered out of turn"),
    }
}

/// Forward throughput: this side sends until the server's window is over, then tells what it
/// sent and gets the final UDP counts.
fn send_window(
    mut control: Control,
    sockets: &Sockets,
    spec: &TestSpec,
    token: u64,
    threads: data::DataThreads,
) -> Result<TestOutcome> {
    let stop = AtomicBool::new(false);
    let end = Instant::now()
        + Duration::from_millis(spec.omit_ms + spec.duration_ms)
        + Duration::from_secs(15);
    let (window, sent) = std::thread::scope(|scope| {
        let sender = scope.spawn(|| {
            data::send(
                sockets,
                spec.msg_bytes as usize,
                token,
                spec.rate_bps,
                &stop,
                end,
                threads.send,
            )
        });
        let answer = control.recv(end);
        stop.store(true, Ordering::SeqCst);
        let sent = sender.join().expect("sender thread panicked")?;
        match answer.context("waiting for the server's count")? {
            Msg::Window(w) => Ok((w, sent)),
            _ => bail!("the server answered out of turn"),
        }
    })?;
    control.send(&Msg::Sent {
        per_stream: sent.clone(),
        server: None,
    })?;
    match control.recv(Instant::now() + Duration::from_secs(10))? {
        Msg::Final { udp, server } => Ok(TestOutcome::Throughput {
            window,
            udp,
            sent,
            server: server.map(|s| Box::new(s.sanitized())),
        }),
        _ => bail!("the server answered out of turn"),
    }
}

/// `--reverse` throughput: this side receives and counts, and at the end of its window asks
/// the server to stop and what it sent.
fn receive_window(
    mut control: Control,
    sockets: &Sockets,
    spec: &TestSpec,
    token: u64,
    threads: data::DataThreads,
) -> Result<TestOutcome> {
    let omit = Duration::from_millis(spec.omit_ms);
    let duration = Duration::from_millis(spec.duration_ms);
    let end = Instant::now() + omit + duration + Duration::from_secs(15);
    let mut sent = Vec::new();
    let mut peer = None;
    let watch = control.stream().try_clone()?;
    let gone = || super::proto::peer_closed(&watch);
    let (window, udp) = data::receive(
        sockets,
        token,
        omit,
        duration,
        gone,
        |_| {
            control.send(&Msg::Stop)?;
            match control.recv(end)? {
                Msg::Sent { per_stream, server } => {
                    sent = per_stream.clone();
                    peer = server.map(|s| Box::new(s.sanitized()));
                    Ok(per_stream)
                }
                _ => bail!("the server answered out of turn"),
            }
        },
        threads,
    )?;
    Ok(TestOutcome::Throughput {
        window,
        udp,
        sent,
        server: peer,
    })
}

/// Latency: a ping-pong on every stream at once, each on its own thread (stream i on the i-th
/// CPU with `pin`).
fn ping_streams(
    sockets: &Sockets,
    spec: &TestSpec,
    warmup: Duration,
    deadline: Instant,
    count: Option<u64>,
    pin: bool,
) -> Result<Vec<PingPong>> {
    data::prepare_ping(sockets)?;
    let msg = spec.msg_bytes as usize;
    let results: Vec<Result<PingPong>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..sockets.len())
            .map(|i| {
                scope.spawn(move || {
                    data::pin_stream(StreamCpus::pinned(pin), i)?;
                    data::ping_pong(sockets, i, msg, warmup, deadline, count)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("ping-pong thread panicked"))
            .collect()
    });
    results.into_iter().collect()
}

fn open_data(ip: IpAddr, spec: &TestSpec, ports: &[u16], token: u64) -> Result<Sockets> {
    let n = spec.streams as usize;
    match spec.proto {
        Proto::Tcp => {
            let port = *ports.first().context("the server gave no data port")?;
            let mut streams = Vec::with_capacity(n);
            for index in 0..n as u32 {
                let mut s = connect(SocketAddr::new(ip, port))?;
                let mut hello = token.to_le_bytes().to_vec();
                hello.extend_from_slice(&index.to_le_bytes());
                s.write_all(&hello).context("opening a data connection")?;
                streams.push(s);
            }
            Ok(Sockets::Tcp(streams))
        }
        Proto::Udp => {
            if ports.len() != n {
                bail!("the server gave {} data ports for {n} streams", ports.len());
            }
            let any: IpAddr = match ip {
                IpAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
                IpAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
            };
            let mut socks = Vec::with_capacity(n);
            for &port in ports {
                let s = UdpSocket::bind((any, 0)).context("opening a UDP socket")?;
                if spec.mode == Mode::Throughput {
                    data::set_buffers(&s, 4 << 20);
                }
                s.connect((ip, port))?;
                s.set_read_timeout(Some(Duration::from_millis(100)))?;
                let mut acked = false;
                let mut ack = [0u8; 64];
                for _ in 0..30 {
                    let _ = s.send(&token.to_le_bytes());
                    if let Ok(8) = s.recv(&mut ack)
                        && ack[..8] == token.to_le_bytes()
                    {
                        acked = true;
                        break;
                    }
                }
                if !acked {
                    bail!(
                        "the server's UDP port {port} did not answer: is UDP blocked on the way?"
                    );
                }
                socks.push(s);
            }
            Ok(Sockets::Udp(socks))
        }
    }
}
