//! `peakbench net serve`: many clients at once, each test on its own data ports.
//!
//! The accept loop hands each control connection to a thread of its own. A connection that
//! has not yet sent a valid hello (and proved the key, when there is one) holds only a
//! *handshake* place: [`HANDSHAKES_PER_BLOCK`] per address block, [`MAX_HANDSHAKES`] in all,
//! for at most [`HELLO`]. A valid hello then takes a *test* slot, counted per address block
//! (an IPv4 address, an IPv6 /64) up to `--max-per-address`, [`MAX_TESTS`] in all, and within
//! the whole server's budgets of streams, buffer memory and open files (each test reserves its
//! share under one lock, so two tests cannot both fit in the same room). Anything over is
//! refused with `busy: …` and the reason; clients retry `busy` for a while.
//!
//! Every read and write has a deadline: the hello within [`HELLO`], data connections within
//! [`OPEN_STREAMS`], and the test within its own length plus [`MARGIN`]; a slot is given back within
//! [`OPEN_STREAMS`] + length + [`MARGIN`] + 2 s (a forward test's drain) of its hello, whatever the
//! client does (`docs/security.md`). A test's slot is given back before its last message is
//! sent, so the client's next repetition finds it free. A malformed line is answered with
//! `refused` and the connection closed; each event is logged on stderr, peer text escaped,
//! each line cut at [`LOG_LINE`] characters and at most [`LOG_BURST`] lines per address block
//! per [`LOG_PERIOD`].

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::auth::{Key, Nonce};
use super::data::{self, Sockets};
use super::limits;
use super::proto::{self, Control, Mode, Msg, PROTOCOL_VERSION, Proto, TestSpec};
use crate::evidence::{CaseWatch, PeerEvidence};

mod admission;
mod log;
#[cfg(test)]
mod tests;

pub(crate) use admission::{Cidr, DEFAULT_PER_ADDRESS, Policy};
use admission::{Slot, Slots, canonical};
pub(crate) use log::log_line;
use log::{AcceptBackoff, Log};

/// Tests served at once; one more is refused.
pub(crate) const MAX_TESTS: usize = 64;
/// Connections in their handshake (accepted, no valid hello yet) at once, in all.
pub(crate) const MAX_HANDSHAKES: usize = 64;
/// Connections in their handshake at once from one address block.
pub(crate) const HANDSHAKES_PER_BLOCK: usize = 16;
/// Time a client has, after the challenge, to send its hello (and prove the key).
pub(crate) const HELLO: Duration = Duration::from_secs(3);
/// Time a client has to open its data connections.
pub(crate) const OPEN_STREAMS: Duration = Duration::from_secs(5);
/// Time a test is served beyond its own length (the final counts, a late client).
pub(crate) const MARGIN: Duration = Duration::from_secs(10);
/// Streams of all the tests running, unless `--max-total-streams` says otherwise (each is a
/// thread and one or two sockets).
pub(crate) const DEFAULT_TOTAL_STREAMS: u64 = 1024;
/// Buffer memory of all the tests running, unless `--max-buffers` says otherwise.
pub(crate) const DEFAULT_BUFFER_BYTES: u64 = 1 << 30;
/// The buffer each stream's thread holds at least: what a TCP receiver reads at a time.
const STREAM_BUFFER: u64 = data::READ_BUFFER as u64;
/// Open files a connection in its handshake may hold (the socket and its clones).
const HANDSHAKE_FILES: u64 = 4;
/// Open files kept free for the server itself (its listener, /proc, a refused connection).
const SPARE_FILES: u64 = 32;
/// Longest log line, in characters, after escaping.
pub(crate) const LOG_LINE: usize = 400;
/// Lines one address block may cause in [`LOG_PERIOD`]; the rest are counted, not logged.
pub(crate) const LOG_BURST: u32 = 20;
pub(crate) const LOG_PERIOD: Duration = Duration::from_secs(10);

/// Serves on `listener` until `stop` is set.
pub(crate) fn serve(
    listener: TcpListener,
    stop: Arc<AtomicBool>,
    log: bool,
    policy: Policy,
) -> Result<()> {
    let policy = Arc::new(policy);
    let slots = Arc::new(Slots::default());
    let log = Arc::new(Log::new(log));
    log.server(&policy.describe(listener.local_addr()?));
    let mut backoff = AcceptBackoff::default();
    while !stop.load(Ordering::Relaxed) {
        if !readable(&listener, 100) {
            continue;
        }
        let (stream, peer) = match listener.accept() {
            Ok(pair) => {
                backoff.succeeded();
                pair
            }
            Err(e) if matches!(e.kind(), ErrorKind::Interrupted | ErrorKind::WouldBlock) => {
                continue;
            }
            Err(e) => {
                let (wait, say) = backoff.failed(Instant::now());
                if say {
                    log.server(&format!(
                        "accept failed: {e} ({} times in a row; retrying every {} ms at most, logged once per {} s)",
                        backoff.failures,
                        wait.as_millis(),
                        LOG_PERIOD.as_secs()
                    ));
                }
                std::thread::sleep(wait);
                continue;
            }
        };
        let ip = canonical(peer.ip());
        if !policy.allows(ip) {
            log.peer(ip, &format!("{peer}: closed, not in --allow"));
            continue;
        }
        let place = match Slots::handshake(&slots, ip) {
            Ok(place) => place,
            Err(why) => {
                log.peer(ip, &format!("{peer}: refused, {why}"));
                let _ = refuse(stream, &why);
                continue;
            }
        };
        let reply = stream.try_clone();
        let (policy, slots, log_here) = (policy.clone(), slots.clone(), log.clone());
        let spawned = std::thread::Builder::new().spawn(move || {
            let log = log_here;
            match handle(stream, peer, place, &slots, &log, &policy) {
                Ok(()) => log.peer(ip, &format!("{peer}: test done")),
                Err(e) => log.peer(ip, &format!("{peer}: {e:#}")),
            }
        });
        if let Err(e) = spawned {
            let why = format!("busy: the server cannot start a thread ({e}), try again later");
            log.peer(ip, &format!("{peer}: refused, {why}"));
            if let Ok(reply) = reply {
                let _ = refuse(reply, &why);
            }
        }
    }
    Ok(())
}

/// Waits up to `ms` for a connection to accept.
fn readable(listener: &TcpListener, ms: i32) -> bool {
    let mut fd = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut fd, 1, ms) > 0 }
}

fn refuse(mut stream: TcpStream, why: &str) -> Result<()> {
    stream.set_write_timeout(Some(Duration::from_secs(1)))?;
    let mut line = serde_json::to_vec(&Msg::Refused {
        error: why.to_string(),
    })?;
    line.push(b'\n');
    stream.write_all(&line)?;
    Ok(())
}

/// Why a test cannot be served, or `None`.
fn invalid(spec: &TestSpec, policy: &Policy) -> Option<String> {
    if spec.streams == 0 || spec.streams > policy.max_streams {
        return Some(format!("streams must be 1 to {}", policy.max_streams));
    }
    if let Err(e) = limits::check_msg(spec.proto, spec.mode == Mode::Throughput, spec.msg_bytes) {
        return Some(e.to_string());
    }
    if spec.duration_ms == 0 {
        return Some("a zero duration measures nothing".into());
    }
    if Duration::from_millis(spec.omit_ms.saturating_add(spec.duration_ms)) > policy.max_test {
        return Some(format!(
            "tests last at most {} s here",
            policy.max_test.as_secs_f64()
        ));
    }
    if let Some(max) = policy.max_rate_bps
        && spec.proto == Proto::Udp
        && spec.mode == Mode::Throughput
        && spec.rate_bps.is_none_or(|r| r > max)
    {
        return Some(format!(
            "this server takes UDP at most {max} bit/s per stream: give --rate {max} or less"
        ));
    }
    if spec.rate_bps == Some(0) {
        return Some("a rate of 0 sends nothing".into());
    }
    if let Some(rate) = spec.rate_bps
        && spec.proto == Proto::Udp
        && spec.mode == Mode::Throughput
        && let Err(e) = limits::check_rate(spec.msg_bytes, rate)
    {
        return Some(format!("rate: {e}"));
    }
    if spec.count == Some(0) {
        return Some("a count of 0 round trips measures nothing".into());
    }
    None
}

/// How long the server serves a test once it is ready: its length plus [`MARGIN`], or for a
/// latency test with a round-trip count the longest test the operator allows (the client ends
/// it when its count is done, by closing the control connection).
fn serving_time(spec: &TestSpec, max_test: Duration) -> Duration {
    let length = match (spec.mode, spec.count) {
        (Mode::Latency, Some(_)) => max_test,
        _ => Duration::from_millis(spec.omit_ms + spec.duration_ms),
    };
    length + MARGIN
}

/// One client's test, from its hello to the end: admitted ([`admit`]) while it holds a
/// handshake `place`, then given a test slot (or refused `busy`), its data connections
/// collected, then served as its mode asks.
fn handle(
    stream: TcpStream,
    peer: SocketAddr,
    place: Slot,
    slots: &Arc<Slots>,
    log: &Log,
    policy: &Policy,
) -> Result<()> {
    stream.set_nodelay(true)?;
    let local = stream.local_addr()?.ip();
    let mut control = Control::new(stream)?;
    let spec = admit(&mut control, policy)?;
    let slot = match Slots::test(slots, peer.ip(), &spec, policy) {
        Ok(slot) => slot,
        Err(why) => {
            control.send(&Msg::Refused { error: why.clone() })?;
            bail!("refused, {why}");
        }
    };
    drop(place);
    log.peer(
        peer.ip(),
        &format!(
            "{peer}: {} {} {} streams of {} B messages, {} ms{}",
            spec.proto.name(),
            spec.mode.name(),
            spec.streams,
            spec.msg_bytes,
            spec.duration_ms,
            if spec.reverse { ", reverse" } else { "" }
        ),
    );
    let token = random_token();
    let (ports, pending) = open_data(&spec, local)?;
    control.send(&Msg::Accepted {
        version: PROTOCOL_VERSION,
        ports,
        token,
    })?;
    let sockets = collect_data(pending, &spec, token, peer.ip())?;
    // What this machine does while the test runs goes back to the client with the results
    // (its findings name this side's shapers and load): read before the data flows.
    let watch = CaseWatch::start();
    control.send(&Msg::Ready)?;
    let test = ServerTest {
        slot: Some(slot),
        sockets: &sockets,
        spec: &spec,
        token,
        deadline: Instant::now() + serving_time(&spec, policy.max_test),
        // Spinning TCP receivers (ours in forward mode, the client's with --reverse) and, on
        // loopback, where each side's threads run (the client places its own alike).
        threads: data::DataThreads::for_spec(&spec, canonical(peer.ip()).is_loopback(), false),
    };
    match (spec.mode, spec.reverse) {
        (Mode::Throughput, false) => test.receive(&mut control, watch, canonical(peer.ip())),
        (Mode::Throughput, true) => test.send(&mut control, watch, canonical(peer.ip())),
        (Mode::Latency, _) => test.echo(&mut control),
    }
}

/// The challenge, the client's hello and its proof of the key, and the test it asks for
/// checked against the policy; a test that cannot be served is refused with the reason.
fn admit(control: &mut Control, policy: &Policy) -> Result<TestSpec> {
    let nonce = Nonce::random();
    control.send(&Msg::Challenge {
        version: PROTOCOL_VERSION,
        nonce: nonce.to_hex(),
        key: policy.key.is_some(),
    })?;
    let refuse = |control: &mut Control, why: String| -> Result<TestSpec> {
        control.send(&Msg::Refused { error: why.clone() })?;
        bail!("refused: {why}");
    };
    let received = control.recv(Instant::now() + HELLO);
    let unread = received.is_err();
    match judge_hello(received, &nonce, policy) {
        Ok(spec) => Ok(spec),
        Err(why) if unread => {
            // The connection may be gone: say why if it can still hear it.
            let _ = control.send(&Msg::Refused { error: why.clone() });
            bail!("refused: {why}");
        }
        Err(why) => refuse(control, why),
    }
}

/// The handshake's decision on the client's first message, with no socket: a hello of this
/// protocol version, proving the key when the server has one (`nonce` is the challenge's),
/// asking for a test the policy allows; else the reason it is refused. Pure, so it is fuzzed
/// (`fuzz/fuzz_targets/control_line.rs`).
pub(crate) fn judge_hello(
    received: Result<Msg>,
    nonce: &Nonce,
    policy: &Policy,
) -> Result<TestSpec, String> {
    let (spec, auth) = match received {
        Ok(Msg::Hello {
            peakbench,
            test,
            auth,
        }) if peakbench == PROTOCOL_VERSION => (test, auth),
        Ok(Msg::Hello { peakbench, .. }) => {
            return Err(format!(
                "protocol version {peakbench} is not {PROTOCOL_VERSION}: use the same peakbench on both sides"
            ));
        }
        Ok(other) => return Err(format!("expected hello, got {}", kind(&other))),
        Err(e) => return Err(format!("{e:#}")),
    };
    if let Some(key) = &policy.key {
        let proven = auth
            .as_deref()
            .is_some_and(|proof| key.verify(nonce, &proto::hello_message(&spec), proof));
        if !proven {
            let why = if auth.is_none() {
                "this server requires its shared key: give the same key file with --key FILE or $PEAKBENCH_KEY_FILE"
            } else {
                "the hello's proof does not match this server's key: give the same key file with --key FILE or $PEAKBENCH_KEY_FILE"
            };
            return Err(why.into());
        }
    }
    match invalid(&spec, policy) {
        Some(why) => Err(why),
        None => Ok(spec),
    }
}

/// An admitted test with its data connections, served until `deadline`.
struct ServerTest<'a> {
    /// Given back ([`ServerTest::release`]) once the data threads are joined, before the last
    /// message: a client's next repetition must find it free.
    slot: Option<Slot>,
    sockets: &'a Sockets,
    spec: &'a TestSpec,
    token: u64,
    deadline: Instant,
    threads: data::DataThreads,
}

impl ServerTest<'_> {
    /// Gives the test's slot back: its data threads have all ended.
    fn release(&mut self) {
        self.slot = None;
    }

    /// Forward throughput: this side receives and counts, tells the client its window, and
    /// after the client's totals sends the final UDP counts.
    fn receive(mut self, control: &mut Control, evidence: CaseWatch, client: IpAddr) -> Result<()> {
        let watch = control.stream().try_clone()?;
        let (_, udp) = data::receive(
            self.sockets,
            self.token,
            Duration::from_millis(self.spec.omit_ms),
            Duration::from_millis(self.spec.duration_ms),
            || proto::peer_closed(&watch),
            |window| {
                control.send(&Msg::Window(window.clone()))?;
                match control.recv(self.deadline)? {
                    Msg::Sent { per_stream, .. } => Ok(per_stream),
                    other => bail!("expected sent, got {}", kind(&other)),
                }
            },
            self.threads,
        )?;
        self.release();
        let server = Some(PeerEvidence::of_server(evidence, client));
        control.send(&Msg::Final { udp, server })
    }

    /// `--reverse` throughput: this side sends until the client, which counts, says stop, then
    /// tells what it sent.
    fn send(mut self, control: &mut Control, watch: CaseWatch, client: IpAddr) -> Result<()> {
        let stop = AtomicBool::new(false);
        let sent = std::thread::scope(|scope| {
            let sender = std::thread::Builder::new()
                .spawn_scoped(scope, || {
                    data::send(
                        self.sockets,
                        self.spec.msg_bytes as usize,
                        self.token,
                        self.spec.rate_bps,
                        &stop,
                        self.deadline,
                        self.threads.send,
                    )
                })
                .context("cannot start the sending thread; the test is refused")?;
            let asked = control.recv(self.deadline);
            stop.store(true, Ordering::SeqCst);
            let sent = data::join_stream(sender)?;
            match asked? {
                Msg::Stop => Ok(sent),
                other => bail!("expected stop, got {}", kind(&other)),
            }
        })?;
        self.release();
        let server = Some(PeerEvidence::of_server(watch, client));
        control.send(&Msg::Sent {
            per_stream: sent,
            server,
        })
    }

    /// Latency: this side echoes every message until the client closes the control connection.
    fn echo(self, control: &mut Control) -> Result<()> {
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let echo = std::thread::Builder::new()
                .spawn_scoped(scope, || {
                    data::echo(
                        self.sockets,
                        self.spec.msg_bytes as usize,
                        &stop,
                        self.deadline,
                    )
                })
                .context("cannot start the echo thread; the test is refused")?;
            control.wait_closed(self.deadline);
            stop.store(true, Ordering::SeqCst);
            data::join_stream(echo)
        })
    }
}

/// The soft and hard limits on open files.
pub(crate) fn open_file_limit() -> (u64, u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return (1024, 1024);
    }
    (limit.rlim_cur, limit.rlim_max)
}

/// Raises the soft limit on open files to the hard one (many streams, many clients); returns
/// the limit now in force.
pub(crate) fn raise_open_file_limit() -> u64 {
    let (soft, hard) = open_file_limit();
    if soft < hard {
        let limit = libc::rlimit {
            rlim_cur: hard,
            rlim_max: hard,
        };
        // SAFETY: setrlimit reads one valid rlimit; raising the soft limit up to the hard one
        // needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } == 0 {
            return hard;
        }
    }
    soft
}

fn kind(msg: &Msg) -> String {
    serde_json::to_value(msg)
        .ok()
        .and_then(|v| v["type"].as_str().map(str::to_string))
        .unwrap_or_default()
}

/// A test's data sockets before the client has reached them.
enum Pending {
    Tcp(TcpListener),
    Udp(Vec<UdpSocket>),
}

fn open_data(spec: &TestSpec, local: IpAddr) -> Result<(Vec<u16>, Pending)> {
    match spec.proto {
        Proto::Tcp => {
            let listener =
                TcpListener::bind((local, 0)).context("opening a data port for the test")?;
            Ok((vec![listener.local_addr()?.port()], Pending::Tcp(listener)))
        }
        Proto::Udp => {
            let mut socks = Vec::new();
            for _ in 0..spec.streams {
                let s = UdpSocket::bind((local, 0)).context("opening a data port for the test")?;
                if spec.mode == Mode::Throughput {
                    data::set_buffers(&s, 4 << 20);
                }
                socks.push(s);
            }
            let ports = socks
                .iter()
                .map(|s| s.local_addr().map(|a| a.port()))
                .collect::<std::io::Result<_>>()?;
            Ok((ports, Pending::Udp(socks)))
        }
    }
}

/// A data connection whose token and stream index have not all arrived.
struct Joining {
    stream: TcpStream,
    hello: [u8; 12],
    have: usize,
}

/// Waits for every data connection (TCP: token and stream index first; UDP: the token in a
/// first datagram, acknowledged), at most [`OPEN_STREAMS`]. Connections from any address other than
/// the control connection's are closed at once, unread; those with a wrong token are closed.
/// The TCP ones are read without blocking, side by side, so a connection that sends nothing
/// (or a flood of them) delays nobody else's.
fn collect_data(pending: Pending, spec: &TestSpec, token: u64, client: IpAddr) -> Result<Sockets> {
    let deadline = Instant::now() + OPEN_STREAMS;
    let n = spec.streams as usize;
    let client = canonical(client);
    match pending {
        Pending::Tcp(listener) => collect_tcp(&listener, n, token, client, deadline),
        Pending::Udp(socks) => collect_udp(socks, token, client, deadline),
    }
}

/// The TCP part of [`collect_data`]: `n` connections, each sending the token and its index.
fn collect_tcp(
    listener: &TcpListener,
    n: usize,
    token: u64,
    client: IpAddr,
    deadline: Instant,
) -> Result<Sockets> {
    listener.set_nonblocking(true)?;
    let mut streams: Vec<Option<TcpStream>> = (0..n).map(|_| None).collect();
    let mut joining: Vec<Joining> = Vec::new();
    while streams.iter().any(Option::is_none) {
        if Instant::now() >= deadline {
            bail!("the client opened fewer than {n} data connections within {OPEN_STREAMS:?}");
        }
        wait_any(listener, &joining, 50);
        accept_joining(listener, &mut joining, client, 2 * n + 16)?;
        for (index, stream) in read_joining(&mut joining, token) {
            if index < n && streams[index].is_none() {
                streams[index] = Some(stream);
            }
        }
    }
    let streams: Vec<TcpStream> = streams.into_iter().flatten().collect();
    for s in &streams {
        s.set_nonblocking(false)?;
    }
    Ok(Sockets::Tcp(streams))
}

/// Accepts every connection waiting on `listener`: those from `client` join (at most `most`, the
/// oldest dropped first), the others are closed unread.
fn accept_joining(
    listener: &TcpListener,
    joining: &mut Vec<Joining>,
    client: IpAddr,
    most: usize,
) -> Result<()> {
    loop {
        match listener.accept() {
            Ok((s, from)) if canonical(from.ip()) == client => {
                s.set_nonblocking(true)?;
                // A flood from the client's own address: the oldest go first (the client's
                // own connections send their 12 bytes as soon as they open).
                if joining.len() >= most {
                    joining.remove(0);
                }
                joining.push(Joining {
                    stream: s,
                    hello: [0; 12],
                    have: 0,
                });
            }
            Ok(_) => continue,       // another address: dropped unread
            Err(_) => return Ok(()), // nothing more waiting (or a failed accept: next round)
        }
    }
}

/// Reads what has arrived on each joining connection; returns those that sent the right token
/// with their stream index, and drops those that closed or sent a wrong token.
fn read_joining(joining: &mut Vec<Joining>, token: u64) -> Vec<(usize, TcpStream)> {
    let mut done = Vec::new();
    let mut k = 0;
    while k < joining.len() {
        let j = &mut joining[k];
        let keep = match (&j.stream).read(&mut j.hello[j.have..]) {
            Ok(0) => false,
            Ok(got) => {
                j.have += got;
                j.have < j.hello.len()
            }
            Err(e) => matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted),
        };
        if keep {
            k += 1;
            continue;
        }
        let j = joining.swap_remove(k);
        if j.have == j.hello.len() {
            let got = u64::from_le_bytes(j.hello[0..8].try_into().expect("8 bytes"));
            let index = u32::from_le_bytes(j.hello[8..12].try_into().expect("4 bytes"));
            if got == token {
                done.push((index as usize, j.stream));
            }
        }
    }
    done
}

/// The UDP part of [`collect_data`]: a first datagram holding the token on each socket, from
/// `client`, acknowledged with the token.
fn collect_udp(
    socks: Vec<UdpSocket>,
    token: u64,
    client: IpAddr,
    deadline: Instant,
) -> Result<Sockets> {
    for s in &socks {
        let mut buf = [0u8; 64];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                bail!("the client's UDP data streams did not arrive within {OPEN_STREAMS:?}");
            }
            s.set_read_timeout(Some(left))?;
            match s.recv_from(&mut buf) {
                Ok((8, from))
                    if buf[..8] == token.to_le_bytes() && canonical(from.ip()) == client =>
                {
                    s.connect(from)?;
                    let _ = s.send(&token.to_le_bytes());
                    break;
                }
                _ => continue,
            }
        }
    }
    Ok(Sockets::Udp(socks))
}

/// Waits up to `ms` for a connection on `listener` or bytes on a joining one.
fn wait_any(listener: &TcpListener, joining: &[Joining], ms: i32) {
    let mut fds: Vec<libc::pollfd> = std::iter::once(listener.as_raw_fd())
        .chain(joining.iter().map(|j| j.stream.as_raw_fd()))
        .map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: a valid array of pollfds, its length given, for the length of the call.
    unsafe {
        libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms);
    }
}

/// 64 random bits from the kernel (a token, not a secret: it keeps stray traffic out).
pub(crate) fn random_token() -> u64 {
    let mut bytes = [0u8; 8];
    // SAFETY: writes at most 8 bytes into an 8-byte buffer.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), 8, 0) };
    if n != 8 {
        return data::now_ns() ^ 0x9e37_79b9_7f4a_7c15;
    }
    u64::from_le_bytes(bytes)
}

/// An in-process server on a loopback port, stopped when dropped.
pub(crate) struct LocalServer {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Result<()>>>,
}

impl LocalServer {
    /// Starts serving on a free loopback port; with `key`, only clients holding it are served
    /// (a per-run [`Key::random`] keeps other local users out).
    pub(crate) fn start(key: Option<Key>) -> Result<LocalServer> {
        Self::start_on(IpAddr::from([127, 0, 0, 1]), key)
    }

    /// A server on a free port of `ip` (the unspecified address for every interface), in this
    /// process, until dropped; with `key`, only clients holding it are served.
    pub(crate) fn start_on(ip: IpAddr, key: Option<Key>) -> Result<LocalServer> {
        let listener = TcpListener::bind((ip, 0))
            .with_context(|| format!("opening a port on {ip} for the server"))?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let policy = Policy {
            key,
            ..Policy::default()
        };
        let thread = std::thread::spawn(move || serve(listener, flag, false, policy));
        Ok(LocalServer {
            addr,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
