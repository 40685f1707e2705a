//! `peakbench net serve`: many clients at once, each test on its own data ports.
//!
//! The accept loop hands each control connection to a thread of its own, up to
//! [`MAX_TESTS`] at once (more are refused with a message). Every read has a deadline: the
//! hello within 5 s, data connections within 5 s, and the whole test within its own length
//! plus a margin, never more than [`MAX_TEST`]. A client that vanishes costs at most that, a
//! malformed line is answered with `refused` and the connection closed; each event is logged
//! on stderr.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::auth::{Key, Nonce};
use super::data::{self, Sockets};
use super::limits::{self, MAX_STREAMS, MAX_TEST};
use super::proto::{self, Control, Mode, Msg, Proto, TestSpec, VERSION};

/// Tests served at once; one more is refused.
pub const MAX_TESTS: usize = 64;
/// Time a client has for each handshake step.
const STEP: Duration = Duration::from_secs(5);

/// What the operator allows: who may run tests, and how large.
#[derive(Clone, Debug)]
pub struct Policy {
    /// The shared key every hello must prove; `None` serves anyone who reaches the port.
    pub key: Option<Key>,
    /// Client addresses served (`--allow`); empty: every address.
    pub allow: Vec<Cidr>,
    /// Tests one client address may run at once.
    pub per_address: usize,
    /// Longest test (omit + duration).
    pub max_test: Duration,
    pub max_streams: u32,
    /// Fastest UDP rate per stream a client may ask for; `None`: unlimited.
    pub max_rate_bps: Option<u64>,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            key: None,
            allow: Vec::new(),
            per_address: DEFAULT_PER_ADDRESS,
            max_test: MAX_TEST,
            max_streams: MAX_STREAMS,
            max_rate_bps: None,
        }
    }
}

impl Policy {
    /// Whether a client at `ip` may connect.
    pub fn allows(&self, ip: IpAddr) -> bool {
        self.allow.is_empty() || self.allow.iter().any(|c| c.contains(ip))
    }

    /// What is open and how to close it: the server's first line.
    pub fn describe(&self, addr: SocketAddr) -> String {
        let who = if self.allow.is_empty() {
            "open to every address that reaches it".to_string()
        } else {
            let list: Vec<String> = self.allow.iter().map(Cidr::to_string).collect();
            format!("open to {} only", list.join(", "))
        };
        let key = if self.key.is_some() {
            "clients must prove the shared key"
        } else {
            "no key"
        };
        let rate = match self.max_rate_bps {
            Some(r) => format!(", UDP at most {r} bit/s per stream"),
            None => String::new(),
        };
        format!(
            "listening on {addr} (protocol v{VERSION}), {who}, {key}; tests up to {} s and {} streams, {} at once per address, {MAX_TESTS} in all{rate}. Restrict with --allow CIDR, --key FILE, --max-duration, --max-streams, --max-rate, --max-per-address; stop with Ctrl-C",
            self.max_test.as_secs(),
            self.max_streams,
            self.per_address,
        )
    }
}

/// Tests one client address may run at once, unless `--max-per-address` says otherwise.
pub const DEFAULT_PER_ADDRESS: usize = 8;

/// An address block, `10.0.0.0/8`, `2001:db8::/32` or one address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    net: IpAddr,
    prefix: u8,
}

impl std::str::FromStr for Cidr {
    type Err = String;

    fn from_str(text: &str) -> Result<Cidr, String> {
        let (ip, prefix) = match text.split_once('/') {
            Some((ip, p)) => (ip, Some(p)),
            None => (text, None),
        };
        let net: IpAddr = ip.trim().parse().map_err(|_| {
            format!("'{text}' is not an address or ADDRESS/PREFIX (e.g. 10.0.0.0/8)")
        })?;
        let net = canonical(net);
        let bits = if net.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|&p| p <= bits)
                .ok_or_else(|| format!("'{text}': the prefix must be 0 to {bits}"))?,
            None => bits,
        };
        Ok(Cidr { net, prefix })
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.net, self.prefix)
    }
}

impl Cidr {
    pub fn contains(&self, ip: IpAddr) -> bool {
        let bits = |ip: IpAddr| -> u128 {
            match ip {
                IpAddr::V4(v4) => u32::from(v4) as u128,
                IpAddr::V6(v6) => u128::from(v6),
            }
        };
        let ip = canonical(ip);
        if ip.is_ipv4() != self.net.is_ipv4() {
            return false;
        }
        let width = if ip.is_ipv4() { 32 } else { 128 };
        let shift = width - u32::from(self.prefix);
        if shift >= 128 {
            return true;
        }
        (bits(ip) >> shift) == (bits(self.net) >> shift)
    }
}

/// An IPv4-mapped IPv6 address (a dual-stack listener's view of an IPv4 client) as IPv4.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The tests running, in all and per client address.
#[derive(Default)]
struct Slots {
    state: std::sync::Mutex<(usize, HashMap<IpAddr, usize>)>,
}

/// One test's place in [`Slots`], given back when dropped: when its handler ends, returns an
/// error or panics.
struct Slot {
    slots: Arc<Slots>,
    ip: IpAddr,
}

impl Slots {
    fn take(slots: &Arc<Slots>, ip: IpAddr, per_address: usize) -> Result<Slot, String> {
        let mut state = slots.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.0 >= MAX_TESTS {
            return Err(format!("busy: {MAX_TESTS} tests running, try again later"));
        }
        let mine = state.1.entry(ip).or_insert(0);
        if *mine >= per_address {
            return Err(format!(
                "busy: {per_address} tests from {ip} already running (the server's --max-per-address), try again later"
            ));
        }
        *mine += 1;
        state.0 += 1;
        Ok(Slot {
            slots: slots.clone(),
            ip,
        })
    }

    #[cfg(test)]
    fn running(&self) -> usize {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).0
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut state = self.slots.state.lock().unwrap_or_else(|p| p.into_inner());
        state.0 -= 1;
        if let Some(n) = state.1.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                state.1.remove(&self.ip);
            }
        }
    }
}

/// One line on stderr for the operator. A server outlives its log: when stderr is full, closed
/// or its reader gone (`2>/dev/full`, `2>&-`, `2>&1 | head -1`) the line is lost, never the
/// server (`eprintln!` panics on a failed write).
pub fn log_line(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "net serve: {line}");
}

/// Serves on `listener` until `stop` is set.
pub fn serve(
    listener: TcpListener,
    stop: Arc<AtomicBool>,
    log: bool,
    policy: Policy,
) -> Result<()> {
    let policy = Arc::new(policy);
    let slots = Arc::new(Slots::default());
    let say = move |line: String| {
        if log {
            log_line(&line);
        }
    };
    if log {
        say(policy.describe(listener.local_addr()?));
    }
    while !stop.load(Ordering::Relaxed) {
        if !readable(&listener, 100) {
            continue;
        }
        let (stream, peer) = match listener.accept() {
            Ok(pair) => pair,
            Err(e) => {
                say(format!("accept failed: {e}"));
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let ip = canonical(peer.ip());
        if !policy.allows(ip) {
            say(format!("{peer}: closed, not in --allow"));
            continue;
        }
        let slot = match Slots::take(&slots, ip, policy.per_address) {
            Ok(slot) => slot,
            Err(why) => {
                say(format!("{peer}: refused, {why}"));
                let _ = refuse(stream, &why);
                continue;
            }
        };
        let reply = stream.try_clone();
        let policy = policy.clone();
        let spawned = std::thread::Builder::new().spawn(move || {
            let _slot = slot;
            match handle(stream, peer, &say, &policy) {
                Ok(()) => say(format!("{peer}: test done")),
                Err(e) => say(format!("{peer}: {e:#}")),
            }
        });
        if let Err(e) = spawned {
            let why = format!("busy: the server cannot start a thread ({e}), try again later");
            say(format!("{peer}: refused, {why}"));
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

/// How long the server serves a test once it is ready: its length plus a margin, or for a
/// latency test with a round-trip count the longest test the operator allows (the client ends
/// it when its count is done, by closing the control connection).
fn serving_time(spec: &TestSpec, max_test: Duration) -> Duration {
    let length = match (spec.mode, spec.count) {
        (Mode::Latency, Some(_)) => max_test,
        _ => Duration::from_millis(spec.omit_ms + spec.duration_ms),
    };
    length + Duration::from_secs(10)
}

/// One client's test, from its hello to the end: admitted ([`admit`]), its data connections
/// collected, then served as its mode asks.
fn handle(
    stream: TcpStream,
    peer: SocketAddr,
    say: &impl Fn(String),
    policy: &Policy,
) -> Result<()> {
    stream.set_nodelay(true)?;
    let local = stream.local_addr()?.ip();
    let mut control = Control::new(stream)?;
    let spec = admit(&mut control, policy)?;
    say(format!(
        "{peer}: {} {} {} streams of {} B messages, {} ms{}",
        spec.proto.name(),
        spec.mode.name(),
        spec.streams,
        spec.msg_bytes,
        spec.duration_ms,
        if spec.reverse { ", reverse" } else { "" }
    ));
    let token = random_token();
    let (ports, pending) = open_data(&spec, local)?;
    control.send(&Msg::Accepted {
        version: VERSION,
        ports,
        token,
    })?;
    let sockets = collect_data(pending, &spec, token, peer.ip())?;
    control.send(&Msg::Ready)?;
    let test = Test {
        sockets: &sockets,
        spec: &spec,
        token,
        deadline: Instant::now() + serving_time(&spec, policy.max_test),
        // Spinning TCP receivers (ours in forward mode, the client's with --reverse) and, on
        // loopback, where each side's threads run (the client places its own alike).
        threads: data::DataThreads::for_test(&spec, canonical(peer.ip()).is_loopback(), false),
    };
    match (spec.mode, spec.reverse) {
        (Mode::Throughput, false) => test.receive(&mut control),
        (Mode::Throughput, true) => test.send(&mut control),
        (Mode::Latency, _) => test.echo(&mut control),
    }
}

/// The challenge, the client's hello and its proof of the key, and the test it asks for
/// checked against the policy; a test that cannot be served is refused with the reason.
fn admit(control: &mut Control, policy: &Policy) -> Result<TestSpec> {
    let nonce = Nonce::random();
    control.send(&Msg::Challenge {
        version: VERSION,
        nonce: nonce.to_hex(),
        key: policy.key.is_some(),
    })?;
    let refuse = |control: &mut Control, why: String| -> Result<TestSpec> {
        control.send(&Msg::Refused { error: why.clone() })?;
        bail!("refused: {why}");
    };
    let received = control.recv(Instant::now() + STEP);
    let unread = received.is_err();
    let spec = match judge_hello(received, &nonce, policy) {
        Ok(spec) => spec,
        Err(why) if unread => {
            // The connection may be gone: say why if it can still hear it.
            let _ = control.send(&Msg::Refused { error: why.clone() });
            bail!("refused: {why}");
        }
        Err(why) => return refuse(control, why),
    };
    if let Some(why) = descriptors_short(&spec) {
        return refuse(control, why);
    }
    Ok(spec)
}

/// The handshake's decision on the client's first message, with no socket: a hello of this
/// protocol version, proving the key when the server has one (`nonce` is the challenge's),
/// asking for a test the policy allows; else the reason it is refused. Pure, so it is fuzzed
/// (`fuzz/fuzz_targets/control_line.rs`).
pub fn judge_hello(
    received: Result<Msg>,
    nonce: &Nonce,
    policy: &Policy,
) -> Result<TestSpec, String> {
    let (spec, auth) = match received {
        Ok(Msg::Hello {
            peakbench,
            test,
            auth,
        }) if peakbench == VERSION => (test, auth),
        Ok(Msg::Hello { peakbench, .. }) => {
            return Err(format!(
                "protocol version {peakbench} is not {VERSION}: use the same peakbench on both sides"
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
struct Test<'a> {
    sockets: &'a Sockets,
    spec: &'a TestSpec,
    token: u64,
    deadline: Instant,
    threads: data::DataThreads,
}

impl Test<'_> {
    /// Forward throughput: this side receives and counts, tells the client its window, and
    /// after the client's totals sends the final UDP counts.
    fn receive(&self, control: &mut Control) -> Result<()> {
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
                    Msg::Sent { per_stream } => Ok(per_stream),
                    other => bail!("expected sent, got {}", kind(&other)),
                }
            },
            self.threads,
        )?;
        control.send(&Msg::Final { udp })
    }

    /// `--reverse` throughput: this side sends until the client, which counts, says stop, then
    /// tells what it sent.
    fn send(&self, control: &mut Control) -> Result<()> {
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
        control.send(&Msg::Sent { per_stream: sent })
    }

    /// Latency: this side echoes every message until the client closes the control connection.
    fn echo(&self, control: &mut Control) -> Result<()> {
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

/// Why the test's sockets would not fit under the open-file limit, or `None`: each stream
/// takes a socket and, on the receiving or echoing side, a clone of it; a test takes a few
/// more (its listener and control clones), and 32 are kept for the server itself.
fn descriptors_short(spec: &TestSpec) -> Option<String> {
    let needed = 2 * spec.streams as u64 + 8;
    let open = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
    let limit = open_file_limit().0;
    (open + needed + 32 > limit).then(|| {
        format!(
            "busy: the server has {open} files open of its limit of {limit}, and {} streams need {needed} more: try fewer streams or later",
            spec.streams
        )
    })
}

/// The soft and hard limits on open files.
pub fn open_file_limit() -> (u64, u64) {
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
pub fn raise_open_file_limit() -> u64 {
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

/// Waits for every data connection (TCP: token and stream index first; UDP: the token in a
/// first datagram, acknowledged), at most [`STEP`]. Connections with a wrong token are dropped.
fn collect_data(pending: Pending, spec: &TestSpec, token: u64, client: IpAddr) -> Result<Sockets> {
    let deadline = Instant::now() + STEP;
    let n = spec.streams as usize;
    match pending {
        Pending::Tcp(listener) => {
            listener.set_nonblocking(true)?;
            let mut streams: Vec<Option<TcpStream>> = (0..n).map(|_| None).collect();
            while streams.iter().any(Option::is_none) {
                if Instant::now() >= deadline {
                    bail!("the client opened fewer than {n} data connections within {STEP:?}");
                }
                if !readable(&listener, 50) {
                    continue;
                }
                let Ok((mut s, _)) = listener.accept() else {
                    continue;
                };
                s.set_nonblocking(false)?;
                s.set_read_timeout(Some(Duration::from_secs(1)))?;
                let mut hello = [0u8; 12];
                if s.read_exact(&mut hello).is_err() {
                    continue;
                }
                let got = u64::from_le_bytes(hello[0..8].try_into().expect("8 bytes"));
                let index = u32::from_le_bytes(hello[8..12].try_into().expect("4 bytes")) as usize;
                if got == token && index < n && streams[index].is_none() {
                    streams[index] = Some(s);
                }
            }
            Ok(Sockets::Tcp(streams.into_iter().flatten().collect()))
        }
        Pending::Udp(socks) => {
            for s in &socks {
                let mut buf = [0u8; 64];
                loop {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        bail!("the client's UDP data streams did not arrive within {STEP:?}");
                    }
                    s.set_read_timeout(Some(left))?;
                    match s.recv_from(&mut buf) {
                        Ok((8, from)) if buf[..8] == token.to_le_bytes() && from.ip() == client => {
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
    }
}

/// 64 random bits from the kernel (a token, not a secret: it keeps stray traffic out).
pub fn random_token() -> u64 {
    let mut bytes = [0u8; 8];
    // SAFETY: writes at most 8 bytes into an 8-byte buffer.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), 8, 0) };
    if n != 8 {
        return data::now_ns() ^ 0x9e37_79b9_7f4a_7c15;
    }
    u64::from_le_bytes(bytes)
}

/// An in-process server on a loopback port, stopped when dropped.
pub struct LocalServer {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Result<()>>>,
}

impl LocalServer {
    /// Starts serving on a free loopback port; with `key`, only clients holding it are served
    /// (a per-run [`Key::random`] keeps other local users out).
    pub fn start(key: Option<Key>) -> Result<LocalServer> {
        Self::start_on(IpAddr::from([127, 0, 0, 1]), key)
    }

    /// A server on a free port of `ip` (the unspecified address for every interface), in this
    /// process, until dropped; with `key`, only clients holding it are served.
    pub fn start_on(ip: IpAddr, key: Option<Key>) -> Result<LocalServer> {
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

#[cfg(test)]
mod tests {
    use super::super::proto::MAX_LINE;
    use super::*;

    #[test]
    fn a_counted_ping_pong_is_served_until_the_client_is_done_not_until_its_duration() {
        let mut spec = TestSpec {
            proto: Proto::Tcp,
            mode: Mode::Latency,
            msg_bytes: 1,
            streams: 1,
            omit_ms: 0,
            duration_ms: 2000,
            reverse: false,
            rate_bps: None,
            count: None,
            receiver_wait: proto::ReceiverWait::Auto,
        };
        assert_eq!(serving_time(&spec, MAX_TEST), Duration::from_secs(12));
        spec.count = Some(1_000_000);
        assert_eq!(
            serving_time(&spec, MAX_TEST),
            MAX_TEST + Duration::from_secs(10)
        );
        spec.count = Some(0);
        assert!(
            invalid(&spec, &Policy::default())
                .unwrap()
                .contains("count")
        );
        // An older client's hello has no count and is still understood.
        let old = r#"{"type":"hello","peakbench":1,"test":{"proto":"tcp","mode":"latency","msg_bytes":1,"streams":1,"omit_ms":0,"duration_ms":5,"reverse":false,"rate_bps":null}}"#;
        let Msg::Hello { test, .. } = serde_json::from_str(old).unwrap() else {
            panic!("not a hello");
        };
        assert_eq!(test.count, None);
    }

    #[test]
    fn garbage_and_overlong_lines_are_refused_and_the_server_goes_on() {
        let server = LocalServer::start(None).unwrap();
        for garbage in [
            b"GET / HTTP/1.0\r\n\r\n".to_vec(),
            vec![b'x'; MAX_LINE * 3],
            b"{\"type\":\"hello\",\"peakbench\":99,\"test\":{}}\n".to_vec(),
        ] {
            let mut s = TcpStream::connect(server.addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let _ = s.write_all(&garbage);
            let mut reply = String::new();
            let _ = s.read_to_string(&mut reply);
            assert!(reply.contains("refused"), "{reply}");
        }
    }

    #[test]
    fn address_blocks_contain_what_they_should() {
        let net: Cidr = "10.1.0.0/16".parse().unwrap();
        assert!(net.contains("10.1.200.3".parse().unwrap()));
        assert!(net.contains("::ffff:10.1.0.9".parse().unwrap()));
        assert!(!net.contains("10.2.0.1".parse().unwrap()));
        assert!(!net.contains("::1".parse().unwrap()));
        let one: Cidr = "2001:db8::5".parse().unwrap();
        assert!(one.contains("2001:db8::5".parse().unwrap()));
        assert!(!one.contains("2001:db8::6".parse().unwrap()));
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("192.0.2.1".parse().unwrap()));
        assert!("10.0.0.0/33".parse::<Cidr>().is_err());
        assert!("example.com".parse::<Cidr>().is_err());
    }

    /// Issue 18, item 5: a handler that panics gives its slot back (it leaked for good).
    #[test]
    fn a_slot_is_given_back_even_when_its_handler_panics() {
        let slots = Arc::new(Slots::default());
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let taken = Slots::take(&slots, ip, 2).unwrap();
        let held = slots.clone();
        let panicked = std::thread::spawn(move || {
            let _slot = Slots::take(&held, ip, 2).unwrap();
            panic!("a handler that panics");
        })
        .join();
        assert!(panicked.is_err());
        assert_eq!(slots.running(), 1);
        let second = Slots::take(&slots, ip, 2).unwrap();
        let Err(why) = Slots::take(&slots, ip, 2) else {
            panic!("a third test from one address with a limit of 2");
        };
        assert!(why.contains("from 192.0.2.7"), "{why}");
        assert!(Slots::take(&slots, "192.0.2.8".parse().unwrap(), 2).is_ok());
        drop((taken, second));
        assert_eq!(slots.running(), 0);
    }

    #[test]
    fn beyond_the_limit_a_test_is_refused_politely() {
        let server = LocalServer::start(None).unwrap();
        // Idle control connections hold their slot until the hello deadline (5 s).
        let idle: Vec<TcpStream> = (0..MAX_TESTS)
            .map(|_| TcpStream::connect(server.addr).unwrap())
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        let mut extra = TcpStream::connect(server.addr).unwrap();
        extra
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        let mut reply = String::new();
        let _ = extra.read_to_string(&mut reply);
        assert!(reply.contains("busy"), "{reply}");
        drop(idle);
    }
}
