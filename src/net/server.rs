//! `peakbench net serve`: many clients at once, each test on its own data ports.
//!
//! The accept loop hands each control connection to a thread of its own, up to
//! [`MAX_TESTS`] at once (more are refused with a message). Every read has a deadline: the
//! hello within 5 s, data connections within 5 s, and the whole test within its own length
//! plus a margin, never more than [`MAX_TEST`]. A client that vanishes costs at most that, a
//! malformed line is answered with `refused` and the connection closed; each event is logged
//! on stderr.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::auth::{Key, Nonce};
use super::data::{self, Sockets};
use super::proto::{self, Control, Mode, Msg, Proto, TestSpec, VERSION};

/// Tests served at once; one more is refused.
pub const MAX_TESTS: usize = 64;
/// Longest test a client may ask for (omit + duration).
pub const MAX_TEST: Duration = Duration::from_secs(600);
/// Most streams in one test.
pub const MAX_STREAMS: u32 = 128;
/// Time a client has for each handshake step.
const STEP: Duration = Duration::from_secs(5);

/// What the operator allows: who may run tests, and how large.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    /// The shared key every hello must prove; `None` serves anyone who reaches the port.
    pub key: Option<Key>,
}

/// Serves on `listener` until `stop` is set.
pub fn serve(
    listener: TcpListener,
    stop: Arc<AtomicBool>,
    log: bool,
    policy: Policy,
) -> Result<()> {
    let policy = Arc::new(policy);
    let active = Arc::new(AtomicUsize::new(0));
    let say = move |line: String| {
        if log {
            eprintln!("net serve: {line}");
        }
    };
    if log {
        say(format!(
            "listening on {} (protocol version {VERSION})",
            listener.local_addr()?
        ));
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
        if active.fetch_add(1, Ordering::SeqCst) >= MAX_TESTS {
            active.fetch_sub(1, Ordering::SeqCst);
            say(format!(
                "{peer}: refused, {MAX_TESTS} tests already running"
            ));
            let _ = refuse(
                stream,
                &format!("busy: {MAX_TESTS} tests running, try again later"),
            );
            continue;
        }
        let active = active.clone();
        let policy = policy.clone();
        std::thread::spawn(move || {
            match handle(stream, peer, &say, &policy) {
                Ok(()) => say(format!("{peer}: test done")),
                Err(e) => say(format!("{peer}: {e:#}")),
            }
            active.fetch_sub(1, Ordering::SeqCst);
        });
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
fn invalid(spec: &TestSpec) -> Option<String> {
    if spec.streams == 0 || spec.streams > MAX_STREAMS {
        return Some(format!("streams must be 1 to {MAX_STREAMS}"));
    }
    if let Err(e) = data::check_msg(spec.proto, spec.mode == Mode::Throughput, spec.msg_bytes) {
        return Some(e.to_string());
    }
    if spec.duration_ms == 0 {
        return Some("a zero duration measures nothing".into());
    }
    if Duration::from_millis(spec.omit_ms.saturating_add(spec.duration_ms)) > MAX_TEST {
        return Some(format!("tests last at most {} s", MAX_TEST.as_secs()));
    }
    if spec.rate_bps == Some(0) {
        return Some("a rate of 0 sends nothing".into());
    }
    if let Some(rate) = spec.rate_bps
        && spec.proto == Proto::Udp
        && spec.mode == Mode::Throughput
        && let Err(e) = data::check_rate(spec.msg_bytes, rate)
    {
        return Some(format!("rate: {e}"));
    }
    None
}

fn handle(
    stream: TcpStream,
    peer: SocketAddr,
    say: &impl Fn(String),
    policy: &Policy,
) -> Result<()> {
    stream.set_nodelay(true)?;
    let local = stream.local_addr()?.ip();
    let mut control = Control::new(stream)?;
    let nonce = Nonce::random();
    control.send(&Msg::Challenge {
        version: VERSION,
        nonce: nonce.to_hex(),
        key: policy.key.is_some(),
    })?;
    let (spec, auth) = match control.recv(Instant::now() + STEP) {
        Ok(Msg::Hello {
            peakbench,
            test,
            auth,
        }) if peakbench == VERSION => (test, auth),
        Ok(Msg::Hello { peakbench, .. }) => {
            let why = format!(
                "protocol version {peakbench} is not {VERSION}: use the same peakbench on both sides"
            );
            control.send(&Msg::Refused { error: why.clone() })?;
            bail!("refused: {why}");
        }
        Ok(other) => {
            let why = format!("expected hello, got {}", kind(&other));
            control.send(&Msg::Refused { error: why.clone() })?;
            bail!("refused: {why}");
        }
        Err(e) => {
            let why = format!("{e:#}");
            let _ = control.send(&Msg::Refused { error: why.clone() });
            bail!("refused: {why}");
        }
    };
    if let Some(key) = &policy.key {
        let proven = auth
            .as_deref()
            .is_some_and(|proof| key.verify(&nonce, &proto::hello_message(&spec), proof));
        if !proven {
            let why = if auth.is_none() {
                "this server requires its shared key: give the same key file with --key FILE or $PEAKBENCH_KEY_FILE"
            } else {
                "the hello's proof does not match this server's key: give the same key file with --key FILE or $PEAKBENCH_KEY_FILE"
            };
            control.send(&Msg::Refused { error: why.into() })?;
            bail!("refused: {why}");
        }
    }
    if let Some(why) = invalid(&spec) {
        control.send(&Msg::Refused { error: why.clone() })?;
        bail!("refused: {why}");
    }
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
    let length = Duration::from_millis(spec.omit_ms + spec.duration_ms);
    let deadline = Instant::now() + length + Duration::from_secs(10);
    let msg = spec.msg_bytes as usize;
    match (spec.mode, spec.reverse) {
        (Mode::Throughput, false) => {
            let watch = control.stream().try_clone()?;
            let (_, udp) = data::receive(
                &sockets,
                token,
                Duration::from_millis(spec.omit_ms),
                Duration::from_millis(spec.duration_ms),
                || proto::peer_closed(&watch),
                |window| {
                    control.send(&Msg::Window(window.clone()))?;
                    match control.recv(deadline)? {
                        Msg::Sent { per_stream } => Ok(per_stream),
                        other => bail!("expected sent, got {}", kind(&other)),
                    }
                },
                false,
            )?;
            control.send(&Msg::Final { udp })?;
        }
        (Mode::Throughput, true) => {
            let stop = AtomicBool::new(false);
            let sent = std::thread::scope(|scope| {
                let sender = scope.spawn(|| {
                    data::send(&sockets, msg, token, spec.rate_bps, &stop, deadline, false)
                });
                let asked = control.recv(deadline);
                stop.store(true, Ordering::SeqCst);
                let sent = sender.join().expect("sender thread panicked")?;
                match asked? {
                    Msg::Stop => Ok(sent),
                    other => bail!("expected stop, got {}", kind(&other)),
                }
            })?;
            control.send(&Msg::Sent { per_stream: sent })?;
        }
        (Mode::Latency, _) => {
            let stop = AtomicBool::new(false);
            std::thread::scope(|scope| {
                let echo = scope.spawn(|| data::echo(&sockets, msg, &stop, deadline));
                control.wait_closed(deadline);
                stop.store(true, Ordering::SeqCst);
                echo.join().expect("echo thread panicked")
            })?;
        }
    }
    Ok(())
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
        return super::data::now_ns() ^ 0x9e37_79b9_7f4a_7c15;
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
        let thread = std::thread::spawn(move || serve(listener, flag, false, Policy { key }));
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
