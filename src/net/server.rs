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
//! [`STEP`], and the test within its own length plus [`MARGIN`]; a slot is given back within
//! [`STEP`] + length + [`MARGIN`] + 2 s (a forward test's drain) of its hello, whatever the
//! client does (`docs/security.md`). A test's slot is given back before its last message is
//! sent, so the client's next repetition finds it free. A malformed line is answered with
//! `refused` and the connection closed; each event is logged on stderr, peer text escaped,
//! each line cut at [`LOG_LINE`] characters and at most [`LOG_BURST`] lines per address block
//! per [`LOG_PERIOD`].

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::auth::{Key, Nonce};
use super::data::{self, Sockets};
use super::limits::{self, MAX_STREAMS, MAX_TEST};
use super::proto::{self, Control, Mode, Msg, Proto, TestSpec, VERSION};
use crate::evidence::{CaseWatch, PeerEvidence};

/// Tests served at once; one more is refused.
pub const MAX_TESTS: usize = 64;
/// Connections in their handshake (accepted, no valid hello yet) at once, in all.
pub const MAX_HANDSHAKES: usize = 64;
/// Connections in their handshake at once from one address block.
pub const HANDSHAKES_PER_BLOCK: usize = 16;
/// Time a client has, after the challenge, to send its hello (and prove the key).
pub const HELLO: Duration = Duration::from_secs(3);
/// Time a client has to open its data connections.
pub const STEP: Duration = Duration::from_secs(5);
/// Time a test is served beyond its own length (the final counts, a late client).
pub const MARGIN: Duration = Duration::from_secs(10);
/// Streams of all the tests running, unless `--max-total-streams` says otherwise (each is a
/// thread and one or two sockets).
pub const DEFAULT_TOTAL_STREAMS: u64 = 1024;
/// Buffer memory of all the tests running, unless `--max-buffers` says otherwise.
pub const DEFAULT_BUFFER_BYTES: u64 = 1 << 30;
/// The buffer each stream's thread holds at least (the TCP receiver reads 256 KiB at a time).
const STREAM_BUFFER: u64 = 256 * 1024;
/// Open files a connection in its handshake may hold (the socket and its clones).
const HANDSHAKE_FILES: u64 = 4;
/// Open files kept free for the server itself (its listener, /proc, a refused connection).
const SPARE_FILES: u64 = 32;
/// Longest log line, in characters, after escaping.
pub const LOG_LINE: usize = 400;
/// Lines one address block may cause in [`LOG_PERIOD`]; the rest are counted, not logged.
pub const LOG_BURST: u32 = 20;
pub const LOG_PERIOD: Duration = Duration::from_secs(10);

/// What the operator allows: who may run tests, and how large.
#[derive(Clone, Debug)]
pub struct Policy {
    /// The shared key every hello must prove; `None` serves anyone who reaches the port.
    pub key: Option<Key>,
    /// Client addresses served (`--allow`); empty: every address.
    pub allow: Vec<Cidr>,
    /// Tests one client address block (IPv4 address, IPv6 /64) may run at once.
    pub per_address: usize,
    /// Streams of all the tests running at once.
    pub total_streams: u64,
    /// Buffer memory of all the tests running at once, bytes (see [`buffer_bytes`]).
    pub buffer_bytes: u64,
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
            total_streams: DEFAULT_TOTAL_STREAMS,
            buffer_bytes: DEFAULT_BUFFER_BYTES,
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
            "listening on {addr} (protocol v{VERSION}), {who}, {key}; tests up to {} s and {} streams, {} at once per address (IPv6: per /64), {MAX_TESTS} in all, {} streams and {} MiB of buffers in all{rate}. Restrict with --allow CIDR, --key FILE, --max-duration, --max-streams, --max-rate, --max-per-address, --max-total-streams, --max-buffers; stop with Ctrl-C",
            self.max_test.as_secs(),
            self.max_streams,
            self.per_address,
            self.total_streams,
            self.buffer_bytes >> 20,
        )
    }
}

/// Tests one client address block may run at once, unless `--max-per-address` says otherwise:
/// 8 clients of one host (a sweep to 8 threads), each holding at most two slots for a moment
/// (one repetition's test ending as the next one's starts), twice over.
pub const DEFAULT_PER_ADDRESS: usize = 32;

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

/// The block a client's places are counted by: its IPv4 address, or the /64 of its IPv6
/// address (one host commonly holds a whole /64, and may use a new address per connection).
fn block(ip: IpAddr) -> IpAddr {
    match canonical(ip) {
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !(u64::MAX as u128))),
        v4 => v4,
    }
}

/// A block as the operator and the client read it.
fn block_name(block: IpAddr) -> String {
    match block {
        IpAddr::V6(v6) => format!("{v6}/64"),
        v4 => v4.to_string(),
    }
}

/// What a place holds of the server's budgets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Need {
    streams: u64,
    buffer_bytes: u64,
    files: u64,
}

/// The buffer memory a test's data threads hold, as counted against `--max-buffers`: each
/// stream at least [`STREAM_BUFFER`], or its message when larger.
pub fn buffer_bytes(spec: &TestSpec) -> u64 {
    u64::from(spec.streams) * spec.msg_bytes.max(STREAM_BUFFER)
}

/// Open files a test needs: each stream a socket and, on the receiving or echoing side, a
/// clone of it; a few more for its listener and control clones.
fn test_files(spec: &TestSpec) -> u64 {
    2 * u64::from(spec.streams) + 8
}

/// What is held now: tests and handshakes, in all and per block, and the budgets' use.
#[derive(Default)]
struct Held {
    tests: usize,
    handshakes: usize,
    /// Per block: (tests, handshakes).
    blocks: HashMap<IpAddr, (usize, usize)>,
    used: Need,
}

/// The server's places: the tests running and the connections in their handshake, and what
/// they hold of the streams, buffers and open files of the whole server.
#[derive(Default)]
struct Slots {
    held: std::sync::Mutex<Held>,
}

/// A place in [`Slots`], given back when dropped: when its handler ends, returns an error,
/// panics, or gives it back early ([`Test::release`]).
struct Slot {
    slots: Arc<Slots>,
    block: IpAddr,
    handshake: bool,
    need: Need,
}

impl Slots {
    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place for a connection that has not sent a valid hello yet.
    fn handshake(slots: &Arc<Slots>, ip: IpAddr) -> Result<Slot, String> {
        let block = block(ip);
        let mut held = slots.lock();
        if held.handshakes >= MAX_HANDSHAKES {
            return Err(format!(
                "busy: {MAX_HANDSHAKES} connections are in their handshake, try again later"
            ));
        }
        let mine = held.blocks.get(&block).map_or(0, |b| b.1);
        if mine >= HANDSHAKES_PER_BLOCK {
            return Err(format!(
                "busy: {HANDSHAKES_PER_BLOCK} connections from {} are in their handshake, try again later",
                block_name(block)
            ));
        }
        let need = Need {
            files: HANDSHAKE_FILES,
            ..Need::default()
        };
        if let Some(why) = files_short(&held, need.files, "this connection") {
            return Err(why);
        }
        held.handshakes += 1;
        held.blocks.entry(block).or_default().1 += 1;
        held.used.files += need.files;
        Ok(Slot {
            slots: slots.clone(),
            block,
            handshake: true,
            need,
        })
    }

    /// A slot for an admitted test, within the per-block limit and the server's budgets.
    fn test(
        slots: &Arc<Slots>,
        ip: IpAddr,
        spec: &TestSpec,
        policy: &Policy,
    ) -> Result<Slot, String> {
        let block = block(ip);
        let mut held = slots.lock();
        if held.tests >= MAX_TESTS {
            return Err(format!("busy: {MAX_TESTS} tests running, try again later"));
        }
        let mine = held.blocks.get(&block).map_or(0, |b| b.0);
        if mine >= policy.per_address {
            return Err(format!(
                "busy: {} tests from {} already running (the server's --max-per-address), try again later",
                policy.per_address,
                block_name(block)
            ));
        }
        let need = Need {
            streams: u64::from(spec.streams),
            buffer_bytes: buffer_bytes(spec),
            files: test_files(spec),
        };
        if held.used.streams + need.streams > policy.total_streams {
            return Err(format!(
                "busy: the tests running hold {} of the server's {} streams (--max-total-streams) and {} more do not fit: try fewer streams or later",
                held.used.streams, policy.total_streams, need.streams
            ));
        }
        if held.used.buffer_bytes + need.buffer_bytes > policy.buffer_bytes {
            return Err(format!(
                "busy: the tests running hold {} KiB of the server's {} KiB of buffers (--max-buffers) and this test's {} KiB do not fit: try fewer streams, smaller messages or later",
                held.used.buffer_bytes >> 10,
                policy.buffer_bytes >> 10,
                need.buffer_bytes >> 10
            ));
        }
        let what = format!("{} streams", spec.streams);
        if let Some(why) = files_short(&held, need.files, &what) {
            return Err(why);
        }
        held.tests += 1;
        held.blocks.entry(block).or_default().0 += 1;
        held.used.streams += need.streams;
        held.used.buffer_bytes += need.buffer_bytes;
        held.used.files += need.files;
        Ok(Slot {
            slots: slots.clone(),
            block,
            handshake: false,
            need,
        })
    }

    #[cfg(test)]
    fn running(&self) -> (usize, usize, Need) {
        let held = self.lock();
        (held.tests, held.handshakes, held.used)
    }
}

/// Why `needed` more open files do not fit, or `None`. Counted under the lock of [`Slots`]:
/// the files open now plus everything promised to the places held (counted twice once
/// opened: it errs on the side of refusing) plus [`SPARE_FILES`] must stay under the limit,
/// so two tests checked at once cannot both take the same room.
fn files_short(held: &Held, needed: u64, what: &str) -> Option<String> {
    let limit = open_file_limit().0;
    let open = match std::fs::read_dir("/proc/self/fd") {
        Ok(dir) => dir.count() as u64,
        // Not even a descriptor to look with: full.
        Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => limit,
        // No /proc: the promised files alone are counted.
        Err(_) => 0,
    };
    let promised = held.used.files;
    (open + promised + needed + SPARE_FILES > limit).then(|| {
        format!(
            "busy: the server has {open} files open and {promised} more promised to its tests, of its limit of {limit}; {what} would take {needed} more: try fewer streams or later"
        )
    })
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = self.slots.lock();
        if self.handshake {
            held.handshakes -= 1;
        } else {
            held.tests -= 1;
        }
        if let Some(b) = held.blocks.get_mut(&self.block) {
            if self.handshake {
                b.1 -= 1;
            } else {
                b.0 -= 1;
            }
            if *b == (0, 0) {
                held.blocks.remove(&self.block);
            }
        }
        held.used.streams -= self.need.streams;
        held.used.buffer_bytes -= self.need.buffer_bytes;
        held.used.files -= self.need.files;
    }
}

/// The server's log: one line per event on stderr, when logging at all. Every line is made
/// printable ([`crate::text::printable`]: a peer's text cannot reach the operator's terminal
/// raw) and cut at [`LOG_LINE`] characters; lines caused by one address block are limited to
/// [`LOG_BURST`] per [`LOG_PERIOD`], the rest counted and the count logged when the block is
/// heard from again.
struct Log {
    on: bool,
    blocks: std::sync::Mutex<HashMap<IpAddr, Burst>>,
}

/// One block's lines in the current period.
struct Burst {
    since: Instant,
    lines: u32,
    dropped: u64,
}

/// Blocks remembered by [`Log`]; beyond, the ones whose period is over are forgotten.
const LOG_BLOCKS: usize = 4096;

impl Log {
    fn new(on: bool) -> Log {
        Log {
            on,
            blocks: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// A line about the server itself, in its own words.
    fn server(&self, line: &str) {
        if self.on {
            log_line(line);
        }
    }

    /// A line caused by the client at `ip`, within its block's rate.
    fn peer(&self, ip: IpAddr, line: &str) {
        if !self.on {
            return;
        }
        let block = block(ip);
        let Some(dropped) = self.admit(block, Instant::now()) else {
            return;
        };
        if dropped > 0 {
            log_line(&format!(
                "{dropped} lines about {} not logged (more than {LOG_BURST} in {} s)",
                block_name(block),
                LOG_PERIOD.as_secs()
            ));
        }
        log_line(&fit(line));
    }

    /// Whether a line about `block` at `now` is logged (`None`: over its rate, counted), and
    /// how many were not since the last one that was.
    fn admit(&self, block: IpAddr, now: Instant) -> Option<u64> {
        let mut blocks = self.blocks.lock().unwrap_or_else(|p| p.into_inner());
        if blocks.len() >= LOG_BLOCKS {
            blocks.retain(|_, b| now.duration_since(b.since) < LOG_PERIOD);
            if blocks.len() >= LOG_BLOCKS {
                blocks.clear();
            }
        }
        let burst = blocks.entry(block).or_insert(Burst {
            since: now,
            lines: 0,
            dropped: 0,
        });
        if now.duration_since(burst.since) >= LOG_PERIOD {
            burst.since = now;
            burst.lines = 0;
        }
        if burst.lines >= LOG_BURST {
            burst.dropped += 1;
            return None;
        }
        burst.lines += 1;
        Some(std::mem::take(&mut burst.dropped))
    }
}

/// `line` made printable and cut at [`LOG_LINE`] characters.
fn fit(line: &str) -> String {
    crate::text::printable_at_most(line, LOG_LINE)
}

/// How the accept loop waits after a failed `accept` (out of descriptors, EMFILE, leaves the
/// connection in the backlog and poll(2) says readable at once: it spun at 100 % CPU and logged
/// every 10 ms): 10 ms, doubling to 1 s while it fails; logged once per [`LOG_PERIOD`].
#[derive(Default)]
struct AcceptBackoff {
    wait: Duration,
    failures: u64,
    logged: Option<Instant>,
}

impl AcceptBackoff {
    /// One more failure at `now`: how long to wait, and whether to log it.
    fn failed(&mut self, now: Instant) -> (Duration, bool) {
        self.failures += 1;
        self.wait = (self.wait * 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
        let log = self
            .logged
            .is_none_or(|t| now.duration_since(t) >= LOG_PERIOD);
        if log {
            self.logged = Some(now);
        }
        (self.wait, log)
    }

    fn succeeded(&mut self) {
        self.wait = Duration::ZERO;
        self.failures = 0;
        self.logged = None;
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
        version: VERSION,
        ports,
        token,
    })?;
    let sockets = collect_data(pending, &spec, token, peer.ip())?;
    // What this machine does while the test runs goes back to the client with the results
    // (its findings name this side's shapers and load): read before the data flows.
    let watch = CaseWatch::start();
    control.send(&Msg::Ready)?;
    let test = Test {
        slot: Some(slot),
        sockets: &sockets,
        spec: &spec,
        token,
        deadline: Instant::now() + serving_time(&spec, policy.max_test),
        // Spinning TCP receivers (ours in forward mode, the client's with --reverse) and, on
        // loopback, where each side's threads run (the client places its own alike).
        threads: data::DataThreads::for_test(&spec, canonical(peer.ip()).is_loopback(), false),
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
        version: VERSION,
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
    /// Given back ([`Test::release`]) once the data threads are joined, before the last
    /// message: a client's next repetition must find it free.
    slot: Option<Slot>,
    sockets: &'a Sockets,
    spec: &'a TestSpec,
    token: u64,
    deadline: Instant,
    threads: data::DataThreads,
}

impl Test<'_> {
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

/// A data connection whose token and stream index have not all arrived.
struct Joining {
    stream: TcpStream,
    hello: [u8; 12],
    have: usize,
}

/// Waits for every data connection (TCP: token and stream index first; UDP: the token in a
/// first datagram, acknowledged), at most [`STEP`]. Connections from any address other than
/// the control connection's are closed at once, unread; those with a wrong token are closed.
/// The TCP ones are read without blocking, side by side, so a connection that sends nothing
/// (or a flood of them) delays nobody else's.
fn collect_data(pending: Pending, spec: &TestSpec, token: u64, client: IpAddr) -> Result<Sockets> {
    let deadline = Instant::now() + STEP;
    let n = spec.streams as usize;
    let client = canonical(client);
    match pending {
        Pending::Tcp(listener) => {
            listener.set_nonblocking(true)?;
            let mut streams: Vec<Option<TcpStream>> = (0..n).map(|_| None).collect();
            let mut joining: Vec<Joining> = Vec::new();
            while streams.iter().any(Option::is_none) {
                if Instant::now() >= deadline {
                    bail!("the client opened fewer than {n} data connections within {STEP:?}");
                }
                wait_any(&listener, &joining, 50);
                loop {
                    match listener.accept() {
                        Ok((s, from)) if canonical(from.ip()) == client => {
                            s.set_nonblocking(true)?;
                            // A flood from the client's own address: the oldest go first
                            // (the client's own send their 12 bytes with the connection).
                            if joining.len() >= 2 * n + 16 {
                                joining.remove(0);
                            }
                            joining.push(Joining {
                                stream: s,
                                hello: [0; 12],
                                have: 0,
                            });
                        }
                        Ok(_) => continue, // another address: dropped unread
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(_) => break,
                    }
                }
                let mut k = 0;
                while k < joining.len() {
                    let j = &mut joining[k];
                    let keep = match (&j.stream).read(&mut j.hello[j.have..]) {
                        Ok(0) => false,
                        Ok(got) => {
                            j.have += got;
                            j.have < j.hello.len()
                        }
                        Err(e) => {
                            matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted)
                        }
                    };
                    if keep {
                        k += 1;
                        continue;
                    }
                    let j = joining.swap_remove(k);
                    if j.have == j.hello.len() {
                        let got = u64::from_le_bytes(j.hello[0..8].try_into().expect("8 bytes"));
                        let index = u32::from_le_bytes(j.hello[8..12].try_into().expect("4 bytes"));
                        let index = index as usize;
                        if got == token && index < n && streams[index].is_none() {
                            streams[index] = Some(j.stream);
                        }
                    }
                }
            }
            let streams: Vec<TcpStream> = streams.into_iter().flatten().collect();
            for s in &streams {
                s.set_nonblocking(false)?;
            }
            Ok(Sockets::Tcp(streams))
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
                        Ok((8, from))
                            if buf[..8] == token.to_le_bytes()
                                && canonical(from.ip()) == client =>
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
    }
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

    fn spec(streams: u32, msg_bytes: u64) -> TestSpec {
        TestSpec {
            proto: Proto::Tcp,
            mode: Mode::Throughput,
            msg_bytes,
            streams,
            omit_ms: 0,
            duration_ms: 100,
            reverse: false,
            rate_bps: None,
            count: None,
            receiver_wait: proto::ReceiverWait::Auto,
        }
    }

    fn policy(per_address: usize) -> Policy {
        Policy {
            per_address,
            ..Policy::default()
        }
    }

    /// Issue 18, item 5: a handler that panics gives its slot back (it leaked for good).
    #[test]
    fn a_slot_is_given_back_even_when_its_handler_panics() {
        let slots = Arc::new(Slots::default());
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let (one, two) = (spec(1, 1000), policy(2));
        let taken = Slots::test(&slots, ip, &one, &two).unwrap();
        let held = slots.clone();
        let panicked = std::thread::spawn(move || {
            let _slot = Slots::test(&held, ip, &spec(1, 1000), &policy(2)).unwrap();
            panic!("a handler that panics");
        })
        .join();
        assert!(panicked.is_err());
        assert_eq!(slots.running().0, 1);
        let second = Slots::test(&slots, ip, &one, &two).unwrap();
        let Err(why) = Slots::test(&slots, ip, &one, &two) else {
            panic!("a third test from one address with a limit of 2");
        };
        assert!(why.contains("from 192.0.2.7"), "{why}");
        assert!(Slots::test(&slots, "192.0.2.8".parse().unwrap(), &one, &two).is_ok());
        drop((taken, second));
        assert_eq!(slots.running(), (0, 0, Need::default()));
    }

    /// Issue 33, item 3: IPv6 clients are counted per /64, tests and handshakes alike; an
    /// IPv4-mapped address counts as its IPv4 address.
    #[test]
    fn ipv6_clients_are_counted_per_64() {
        let slots = Arc::new(Slots::default());
        let (one, two) = (spec(1, 1000), policy(2));
        let a = Slots::test(&slots, "2001:db8:1:2::1".parse().unwrap(), &one, &two).unwrap();
        let b = Slots::test(&slots, "2001:db8:1:2:ffff::9".parse().unwrap(), &one, &two).unwrap();
        let why = Slots::test(&slots, "2001:db8:1:2:abcd::1".parse().unwrap(), &one, &two)
            .err()
            .unwrap();
        assert!(why.contains("from 2001:db8:1:2::/64"), "{why}");
        assert!(Slots::test(&slots, "2001:db8:1:3::1".parse().unwrap(), &one, &two).is_ok());
        let _v4 = Slots::test(&slots, "::ffff:192.0.2.1".parse().unwrap(), &one, &two).unwrap();
        let _v4 = Slots::test(&slots, "192.0.2.1".parse().unwrap(), &one, &two).unwrap();
        assert!(Slots::test(&slots, "192.0.2.1".parse().unwrap(), &one, &two).is_err());
        let places: Vec<Slot> = (0..HANDSHAKES_PER_BLOCK as u128)
            .map(|i| {
                let ip = Ipv6Addr::from(0x2001_0db8_0000_0009_0000_0000_0000_0000 + i);
                Slots::handshake(&slots, IpAddr::V6(ip)).unwrap()
            })
            .collect();
        let why = Slots::handshake(&slots, "2001:db8:0:9:1::1".parse().unwrap())
            .err()
            .unwrap();
        assert!(
            why.contains("2001:db8:0:9::/64 are in their handshake"),
            "{why}"
        );
        drop((a, b, places));
    }

    /// Issue 33, items 3 and 6: handshakes do not take test slots; the server's streams and
    /// buffers are budgets over all its tests, refused `busy` with the reason and given back.
    #[test]
    fn the_whole_servers_budgets_refuse_with_the_reason() {
        let slots = Arc::new(Slots::default());
        let ip: IpAddr = "192.0.2.9".parse().unwrap();
        let tight = Policy {
            per_address: 100,
            total_streams: 10,
            buffer_bytes: 4 << 20,
            ..Policy::default()
        };
        let places: Vec<Slot> = (0..HANDSHAKES_PER_BLOCK)
            .map(|_| Slots::handshake(&slots, ip).unwrap())
            .collect();
        assert!(Slots::handshake(&slots, ip).is_err());
        let six = Slots::test(&slots, ip, &spec(6, 1000), &tight).unwrap();
        let why = Slots::test(&slots, ip, &spec(5, 1000), &tight)
            .err()
            .unwrap();
        assert!(
            why.starts_with("busy") && why.contains("6 of the server's 10 streams"),
            "{why}"
        );
        let four = Slots::test(&slots, ip, &spec(4, 1000), &tight).unwrap();
        drop(six);
        // 6 streams of 256 KiB and 3 of 1 MB messages: 1.5 MiB + 2.86 MiB > 4 MiB.
        let small = Slots::test(&slots, ip, &spec(6, 1000), &tight).unwrap();
        drop(four);
        let why = Slots::test(&slots, ip, &spec(3, 1_000_000), &tight)
            .err()
            .unwrap();
        assert!(
            why.starts_with("busy") && why.contains("--max-buffers"),
            "{why}"
        );
        drop((small, places));
        assert_eq!(slots.running(), (0, 0, Need::default()));
        assert!(Slots::test(&slots, ip, &spec(3, 1_000_000), &tight).is_ok());
    }

    /// Issue 33, item 6: the open-file check reserves each test's descriptors under the lock:
    /// two tests that each fit, but not both, are not both admitted (each read the same count
    /// of open files before either opened its sockets).
    #[test]
    fn descriptors_are_reserved_per_test() {
        let open = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64;
        let room = open_file_limit().0.saturating_sub(open + SPARE_FILES);
        if room > 1 << 20 {
            eprintln!(
                "skipped: an open-file limit of {} leaves too much room",
                open_file_limit().0
            );
            return;
        }
        let streams = ((room * 6 / 10).saturating_sub(8) / 2) as u32;
        let slots = Arc::new(Slots::default());
        let lots = Policy {
            per_address: 100,
            total_streams: u64::MAX,
            buffer_bytes: u64::MAX,
            ..Policy::default()
        };
        let ip: IpAddr = "192.0.2.10".parse().unwrap();
        let first = Slots::test(&slots, ip, &spec(streams, 1), &lots).unwrap();
        let why = Slots::test(&slots, ip, &spec(streams, 1), &lots)
            .err()
            .unwrap();
        assert!(
            why.contains("files open") && why.contains("promised"),
            "{why}"
        );
        drop(first);
        assert!(Slots::test(&slots, ip, &spec(streams, 1), &lots).is_ok());
    }

    /// Issue 33, item 6: a failing accept (EMFILE) waits 10 ms doubling to 1 s, and is logged
    /// once per period, not every 10 ms.
    #[test]
    fn a_failing_accept_backs_off_and_is_logged_once_per_period() {
        let mut backoff = AcceptBackoff::default();
        let t0 = Instant::now();
        let mut waits = Vec::new();
        let mut logged = 0;
        let mut now = t0;
        for _ in 0..30 {
            let (wait, log) = backoff.failed(now);
            waits.push(wait.as_millis());
            logged += usize::from(log);
            now += wait;
        }
        assert_eq!(&waits[..8], &[10, 20, 40, 80, 160, 320, 640, 1000]);
        assert!(waits[8..].iter().all(|&w| w == 1000));
        // About 24 s of failures: logged at 0, 10 and 20 s.
        assert_eq!(logged, 3, "{waits:?}");
        backoff.succeeded();
        assert_eq!(backoff.failed(now).0, Duration::from_millis(10));
    }

    /// Issue 33, item 4: lines one address block causes are rate-limited per block, the
    /// dropped ones counted on the next line; log lines are printable and bounded.
    #[test]
    fn log_lines_are_escaped_bounded_and_rate_limited_per_block() {
        let log = Log::new(true);
        let t0 = Instant::now();
        let noisy = block("2001:db8::1".parse().unwrap());
        let quiet = block("2001:db9::1".parse().unwrap());
        for i in 0..LOG_BURST {
            assert_eq!(log.admit(noisy, t0), Some(0), "line {i}");
        }
        for _ in 0..100 {
            assert_eq!(log.admit(noisy, t0), None);
        }
        // Another block is not silenced by the noisy one, nor is the same /64 spared.
        assert_eq!(log.admit(quiet, t0), Some(0));
        assert_eq!(log.admit(block("2001:db8::2".parse().unwrap()), t0), None);
        assert_eq!(log.admit(noisy, t0 + LOG_PERIOD), Some(101));
        assert_eq!(log.admit(noisy, t0 + LOG_PERIOD), Some(0));
        let line = fit(&format!("{}\u{1b}]52;c;x\u{7}", "é".repeat(5000)));
        assert!(
            line.chars().count() <= LOG_LINE + 1,
            "{}",
            line.chars().count()
        );
        assert!(!fit("a\u{1b}[2Jb\nc").chars().any(|c| c.is_control()));
    }

    #[test]
    fn beyond_the_limit_a_connection_is_refused_politely() {
        let server = LocalServer::start(None).unwrap();
        // Idle control connections hold a handshake place each until the hello deadline.
        let idle: Vec<TcpStream> = (0..HANDSHAKES_PER_BLOCK)
            .map(|_| TcpStream::connect(server.addr).unwrap())
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        let mut extra = TcpStream::connect(server.addr).unwrap();
        extra
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        let mut reply = String::new();
        let _ = extra.read_to_string(&mut reply);
        assert!(
            reply.contains("busy") && reply.contains("handshake"),
            "{reply}"
        );
        drop(idle);
    }
}
