//! The data path: senders, receivers, ping-pong and echo, for TCP and UDP.
//!
//! Throughput is counted by the receiver: every thread adds the payload bytes each `read`/`recv`
//! returned to its stream's counter, and the window is the receiver's own clock from
//! `omit` after the start to `omit + duration`; bytes = counter at the end − counter at the
//! start of the window. A read that straddles a boundary counts where it returned (at most one
//! read buffer, 256 KiB, per stream and boundary).
//!
//! A UDP datagram carries a 20-byte header inside its payload: the low 32 bits of the test's
//! token, a sequence number and the sender's clock in nanoseconds. The receiver counts every
//! datagram with the right token: received, reordered (a sequence number below the highest one
//! seen), duplicates (among the last 65 536 sequence numbers: a fixed window behind the highest
//! one, so no datagram sizes the receiver's memory; an older one counts as reordered), and the
//! interarrival jitter of RFC 3550 §6.4.1
//! (J += (|D| − J) / 16 with D the change in transit time between consecutive arrivals).
//! Only differences of the sender's clock are used, so the two clocks need not agree.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::proto::{ReceiverWait, UdpCounts, Window};
use crate::stats::LatencyHistogram;

/// Bytes of the UDP header inside each datagram.
pub const UDP_HEADER: usize = 20;
/// Size of each receive buffer.
const READ_BUFFER: usize = 256 * 1024;
/// How often a blocked socket call wakes up to look at the stop flags.
pub const POLL: Duration = Duration::from_millis(100);
/// How long a spinning TCP receiver goes on reading an empty socket before it sleeps.
pub const SPIN: Duration = Duration::from_micros(200);

/// How one side of a test runs its data threads: whether the TCP receivers spin on an empty
/// socket (see [`receiver_spins`]), and where the sending and the receiving threads run.
#[derive(Clone, Copy, Debug, Default)]
pub struct DataThreads {
    pub spin: bool,
    pub send: StreamCpus,
    pub receive: StreamCpus,
}

impl DataThreads {
    /// What both sides of `spec` derive alike, each from whether its peer is on `loopback`:
    /// spinning receivers, and on loopback the placement of [`StreamCpus::loopback_pair`],
    /// which wins over `--pin`'s (`pin`: stream i on the i-th CPU, which would put a
    /// `--reverse` test's receivers on the server's senders' CPUs).
    pub fn for_test(spec: &super::proto::TestSpec, loopback: bool, pin: bool) -> DataThreads {
        let streams = spec.streams as usize;
        let spin = receiver_spins(
            spec.receiver_wait,
            spec.proto,
            streams,
            loopback,
            crate::runner::num_cpus(),
        );
        let (send, receive) = match StreamCpus::loopback_pair(spin, loopback, streams) {
            (StreamCpus::Free, StreamCpus::Free) => {
                (StreamCpus::pinned(pin), StreamCpus::pinned(pin))
            }
            placed => placed,
        };
        DataThreads {
            spin,
            send,
            receive,
        }
    }
}

/// Whether the TCP receiver of a test spins on its empty sockets ([`SPIN`]) instead of sleeping
/// in poll(2) at once. A sleeping receiver is woken by the kernel on the sender's side for every
/// burst of data, and on a VM that wake-up (an interrupt to a halted vCPU) costs the sending CPU
/// more than the receiver's copy: one loopback stream read 31 Gb/s with a spinning receiver and
/// 22 with a sleeping one on a 2-vCPU Zen 4 guest. Spinning costs a CPU per receiving thread,
/// so `auto` spins only where this host runs both ends (`loopback`) and the `streams`' sending
/// and receiving threads all fit in the `cpus` this process may use: a spinning thread on a
/// shared CPU would take it from a sender. A remote sender's CPUs, or another network
/// namespace's on this host, are not known here, so its receiver sleeps unless asked to spin.
/// UDP receivers always sleep: their figure is the loss at a rate, which a spinning receiver
/// would hide.
pub fn receiver_spins(
    wait: ReceiverWait,
    proto: super::proto::Proto,
    streams: usize,
    loopback: bool,
    cpus: usize,
) -> bool {
    proto == super::proto::Proto::Tcp
        && match wait {
            ReceiverWait::Spin => true,
            ReceiverWait::Sleep => false,
            ReceiverWait::Auto => loopback && 2 * streams <= cpus,
        }
}

/// The data sockets of one test, in stream order.
pub enum Sockets {
    Tcp(Vec<TcpStream>),
    Udp(Vec<UdpSocket>),
}

impl Sockets {
    pub fn len(&self) -> usize {
        match self {
            Sockets::Tcp(s) => s.len(),
            Sockets::Udp(s) => s.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn timed_out(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
    )
}

/// Nanoseconds on this process's monotonic clock.
pub fn now_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Asks the kernel for socket buffers of `bytes` (it may grant less, up to its maximum).
pub fn set_buffers(fd: &impl AsRawFd, bytes: usize) {
    let value = bytes as libc::c_int;
    for option in [libc::SO_RCVBUF, libc::SO_SNDBUF] {
        // SAFETY: a valid socket descriptor and a c_int option value of the right length.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                option,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
}

/// A message of `len` bytes of a non-constant pattern.
fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 131 + 7) as u8).collect()
}

/// Where the thread of each stream runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StreamCpus {
    /// Wherever the scheduler puts it.
    #[default]
    Free,
    /// Stream i on the (k + i)-th CPU this process may use (`--pin` is `From(0)`, as worker i
    /// of every case runs on the i-th CPU).
    From(usize),
}

impl StreamCpus {
    /// `--pin`'s placement, or none.
    pub fn pinned(pin: bool) -> StreamCpus {
        if pin {
            StreamCpus::From(0)
        } else {
            StreamCpus::Free
        }
    }

    /// Where the senders and the receivers of a loopback test with spinning receivers run: the
    /// senders on the first `streams` CPUs, the receivers on the next ones. Left to itself the
    /// scheduler wakes a receiver on its sender's CPU (the kernel wakes it from there), and a
    /// receiver that then spins never sleeps again to be moved: in 12 runs in a row one
    /// stream read 13 Gb/s with both threads on one vCPU and the other idle, against 30-35
    /// when apart. Free unless the receivers `spin` on `loopback` and every thread has a CPU.
    pub fn loopback_pair(spin: bool, loopback: bool, streams: usize) -> (StreamCpus, StreamCpus) {
        if spin && loopback && 2 * streams <= crate::runner::online_cpus().len() {
            (StreamCpus::From(0), StreamCpus::From(streams))
        } else {
            (StreamCpus::Free, StreamCpus::Free)
        }
    }
}

/// Puts the calling thread, that of stream `index`, where `cpus` says.
pub fn pin_stream(cpus: StreamCpus, index: usize) -> Result<()> {
    match cpus {
        StreamCpus::Free => Ok(()),
        StreamCpus::From(first) => match crate::runner::cpu_for(true, first + index) {
            Some(cpu) => crate::runner::pin_to(cpu),
            None => Ok(()),
        },
    }
}

/// Sends on every stream until `stop` is set or `deadline` passes; returns what each stream
/// sent (bytes for TCP, datagrams for UDP). `rate_bps` paces each UDP stream; `cpus` places
/// each stream's thread.
pub fn send(
    sockets: &Sockets,
    msg: usize,
    token: u64,
    rate_bps: Option<u64>,
    stop: &AtomicBool,
    deadline: Instant,
    cpus: StreamCpus,
) -> Result<Vec<u64>> {
    std::thread::scope(|scope| {
        let handles = match sockets {
            Sockets::Tcp(streams) => spawn_streams(
                scope,
                streams.len(),
                |i| {
                    move || {
                        pin_stream(cpus, i)?;
                        send_tcp(&streams[i], msg, stop, deadline)
                    }
                },
                || stop.store(true, Ordering::SeqCst),
            )?,
            Sockets::Udp(socks) => spawn_streams(
                scope,
                socks.len(),
                |i| {
                    move || {
                        pin_stream(cpus, i)?;
                        send_udp(&socks[i], msg, token, rate_bps, stop, deadline)
                    }
                },
                || stop.store(true, Ordering::SeqCst),
            )?,
        };
        handles.into_iter().map(join_stream).collect()
    })
}

/// Starts one thread per stream in `scope`, `f(i)` on the i-th. When the system refuses a
/// thread (out of memory or of threads), `abort` is called so that the threads already started
/// end, they are joined, and an error is returned instead of a panic.
pub fn spawn_streams<'scope, T, F, G>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    n: usize,
    f: F,
    abort: impl FnOnce(),
) -> Result<Vec<std::thread::ScopedJoinHandle<'scope, T>>>
where
    T: Send + 'scope,
    F: Fn(usize) -> G,
    G: FnOnce() -> T + Send + 'scope,
{
    let mut handles = Vec::with_capacity(n);
    for i in 0..n {
        match spawn_one(scope, f(i)) {
            Ok(h) => handles.push(h),
            Err(e) => {
                abort();
                for h in handles {
                    let _ = h.join();
                }
                return Err(e).with_context(|| {
                    format!("cannot start the thread of stream {i} of {n}; the test is refused")
                });
            }
        }
    }
    Ok(handles)
}

fn spawn_one<'scope, T: Send + 'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    g: impl FnOnce() -> T + Send + 'scope,
) -> std::io::Result<std::thread::ScopedJoinHandle<'scope, T>> {
    #[cfg(test)]
    if FAIL_SPAWN.with(|left| {
        let n = left.get();
        left.set(n.saturating_sub(1));
        n == 1
    }) {
        return Err(std::io::Error::from_raw_os_error(libc::EAGAIN));
    }
    std::thread::Builder::new().spawn_scoped(scope, g)
}

#[cfg(test)]
thread_local! {
    /// Tests: the n-th thread started from this thread fails (0: none does).
    static FAIL_SPAWN: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// A stream thread's result; a panic in it becomes an error.
pub fn join_stream<T>(handle: std::thread::ScopedJoinHandle<'_, Result<T>>) -> Result<T> {
    handle
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("a stream thread panicked")))
}

fn send_tcp(stream: &TcpStream, msg: usize, stop: &AtomicBool, deadline: Instant) -> Result<u64> {
    let buf = payload(msg);
    stream.set_write_timeout(Some(POLL))?;
    let mut stream_ref = stream;
    let mut sent = 0u64;
    let mut messages = 0u64;
    'outer: loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        messages += 1;
        if messages.is_multiple_of(256) && Instant::now() >= deadline {
            break;
        }
        let mut off = 0;
        while off < buf.len() {
            match stream_ref.write(&buf[off..]) {
                Ok(0) => break 'outer,
                Ok(n) => {
                    off += n;
                    sent += n as u64;
                }
                Err(e) if timed_out(&e) => {
                    if stop.load(Ordering::Relaxed) || Instant::now() >= deadline {
                        break 'outer;
                    }
                }
                // The receiver closing first is how a test ends when it stops early.
                Err(e)
                    if matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset) =>
                {
                    break 'outer;
                }
                Err(e) => return Err(e).context("sending on a data connection"),
            }
        }
    }
    let _ = stream.shutdown(std::net::Shutdown::Write);
    Ok(sent)
}

fn send_udp(
    sock: &UdpSocket,
    msg: usize,
    token: u64,
    rate_bps: Option<u64>,
    stop: &AtomicBool,
    deadline: Instant,
) -> Result<u64> {
    let mut buf = payload(msg);
    // Datagrams shorter than the header go without one: counted, not sequenced.
    let header = msg >= UDP_HEADER;
    if header {
        buf[0..4].copy_from_slice(&(token as u32).to_le_bytes());
    }
    sock.set_write_timeout(Some(POLL))?;
    let start = Instant::now();
    let mut seq = 0u64;
    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if seq.is_multiple_of(64) && Instant::now() >= deadline {
            break;
        }
        if let Some(rate) = rate_bps {
            let due = start + Duration::from_secs_f64((seq * msg as u64 * 8) as f64 / rate as f64);
            let now = Instant::now();
            if due > now {
                // In slices, so that stop and the deadline are seen within one POLL.
                if now >= deadline {
                    break;
                }
                std::thread::sleep((due - now).min(POLL));
                continue;
            }
        }
        if header {
            buf[4..12].copy_from_slice(&seq.to_le_bytes());
            buf[12..20].copy_from_slice(&now_ns().to_le_bytes());
        }
        match sock.send(&buf) {
            Ok(_) => seq += 1,
            // A full queue (ENOBUFS) or a receiver not yet/no longer there: the datagram is lost.
            Err(e) if timed_out(&e) || e.raw_os_error() == Some(libc::ENOBUFS) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(e).context("sending a datagram"),
        }
    }
    Ok(seq)
}

/// Shared between the receiving threads and the thread that times the window.
struct Counters {
    bytes: Vec<AtomicU64>,
    /// Set once the window is over and the sender's totals are known.
    draining: AtomicBool,
    /// What the sender says it sent, per stream (UDP: datagrams), once `draining`.
    expected: Vec<AtomicU64>,
    /// Last moment to keep reading, nanoseconds on [`now_ns`]'s clock.
    give_up_ns: AtomicU64,
}

/// Receives on every stream: times the window (`omit`, then `duration`), calls `end_window`
/// with what was counted in it (which tells the sender to stop and returns what it sent),
/// drains what is still in flight, and returns the window and the UDP counts. `gone` is asked
/// while waiting: when it says the other side has vanished, the test ends at once.
pub fn receive(
    sockets: &Sockets,
    token: u64,
    omit: Duration,
    duration: Duration,
    gone: impl Fn() -> bool,
    end_window: impl FnOnce(&Window) -> Result<Vec<u64>>,
    threads: DataThreads,
) -> Result<(Window, Vec<UdpCounts>)> {
    let DataThreads {
        spin,
        receive: cpus,
        ..
    } = threads;
    let n = sockets.len();
    let counters = Counters {
        bytes: (0..n).map(|_| AtomicU64::new(0)).collect(),
        draining: AtomicBool::new(false),
        expected: (0..n).map(|_| AtomicU64::new(u64::MAX)).collect(),
        give_up_ns: AtomicU64::new(u64::MAX),
    };
    std::thread::scope(|scope| {
        let counters = &counters;
        let abort = || {
            counters.give_up_ns.store(0, Ordering::Release);
            counters.draining.store(true, Ordering::Release);
        };
        let handles = match sockets {
            Sockets::Tcp(streams) => spawn_streams(
                scope,
                streams.len(),
                |i| {
                    move || {
                        pin_stream(cpus, i)?;
                        receive_tcp(&streams[i], i, counters, spin).map(|()| None)
                    }
                },
                abort,
            )?,
            Sockets::Udp(socks) => spawn_streams(
                scope,
                socks.len(),
                |i| {
                    move || {
                        pin_stream(cpus, i)?;
                        receive_udp(&socks[i], i, token, counters).map(Some)
                    }
                },
                abort,
            )?,
        };
        let snapshot = || -> Vec<u64> {
            counters
                .bytes
                .iter()
                .map(|b| b.load(Ordering::Acquire))
                .collect()
        };
        let start = Instant::now();
        sleep_until(start + omit, &gone);
        let (from, before) = (Instant::now(), snapshot());
        sleep_until(from + duration, &gone);
        let (to, after) = (Instant::now(), snapshot());
        if gone() {
            counters.give_up_ns.store(0, Ordering::Release);
            counters.draining.store(true, Ordering::Release);
            for h in handles {
                let _ = h.join();
            }
            bail!("the other side went away during the test");
        }
        let window = Window {
            window_ns: to.duration_since(from).as_nanos() as u64,
            stream_bytes: after.iter().zip(&before).map(|(a, b)| a - b).collect(),
            receiver_spun: spin && matches!(sockets, Sockets::Tcp(_)),
        };
        let ended = end_window(&window);
        if let Ok(sent) = &ended {
            for (e, s) in counters.expected.iter().zip(sent) {
                e.store(*s, Ordering::Release);
            }
        }
        counters
            .give_up_ns
            .store(now_ns() + 2_000_000_000, Ordering::Release);
        counters.draining.store(true, Ordering::Release);
        let mut udp = Vec::new();
        let mut failure = ended.err();
        for h in handles {
            match join_stream(h) {
                Ok(Some(counts)) => udp.push(counts),
                Ok(None) => {}
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok((window, udp)),
        }
    })
}

/// Sleeps until `when`, waking to honour Ctrl-C and to ask whether the peer is `gone`.
fn sleep_until(when: Instant, gone: &impl Fn() -> bool) {
    loop {
        let now = Instant::now();
        if now >= when || crate::interrupt::requested() || gone() {
            return;
        }
        std::thread::sleep((when - now).min(POLL));
    }
}

/// Reads one TCP stream to its end. Non-blocking reads; on an empty socket the receiver either
/// sleeps in poll(2) at once (as iperf3's select loop does: on loopback this read 3-5 % more
/// than blocking reads with a timeout) or, with `spin`, reads on for up to [`SPIN`] since the
/// last data before it sleeps (see [`receiver_spins`]).
fn receive_tcp(stream: &TcpStream, index: usize, counters: &Counters, spin: bool) -> Result<()> {
    stream.set_nonblocking(true)?;
    let mut buf = vec![0u8; READ_BUFFER];
    let mut total = 0u64;
    let mut stream_ref = stream;
    let spin_ns = if spin { SPIN.as_nanos() as u64 } else { 0 };
    let mut last_data = now_ns();
    loop {
        match stream_ref.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                total += n as u64;
                counters.bytes[index].store(total, Ordering::Release);
                last_data = now_ns();
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if now_ns().saturating_sub(last_data) < spin_ns {
                    std::hint::spin_loop();
                } else {
                    wait_readable(stream)?;
                    last_data = now_ns();
                }
            }
            Err(e) if timed_out(&e) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return Ok(()),
            Err(e) => return Err(e).context("receiving on a data connection"),
        }
        if counters.draining.load(Ordering::Acquire)
            && now_ns() > counters.give_up_ns.load(Ordering::Acquire)
        {
            return Ok(());
        }
    }
}

/// Waits until `stream` has data to read, at most [`POLL`].
fn wait_readable(stream: &TcpStream) -> Result<()> {
    let mut fd = libc::pollfd {
        fd: stream.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the length of the call.
    let ready = unsafe { libc::poll(&mut fd, 1, POLL.as_millis() as libc::c_int) };
    if ready < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() != ErrorKind::Interrupted {
            return Err(e).context("waiting on a data connection");
        }
    }
    Ok(())
}

fn receive_udp(
    sock: &UdpSocket,
    index: usize,
    token: u64,
    counters: &Counters,
) -> Result<UdpCounts> {
    sock.set_read_timeout(Some(Duration::from_millis(20)))?;
    let mut buf = vec![0u8; 65536];
    let mut counts = UdpCounts::default();
    let mut total = 0u64;
    let mut highest: Option<u64> = None;
    let mut seen = SeenSet::default();
    let mut last_transit: Option<i64> = None;
    let mut jitter = 0.0f64;
    let mut idle_since = Instant::now();
    loop {
        match sock.recv(&mut buf) {
            Ok(n) if n >= UDP_HEADER && buf[0..4] == (token as u32).to_le_bytes() => {
                let arrival = now_ns();
                idle_since = Instant::now();
                let seq = u64::from_le_bytes(buf[4..12].try_into().expect("8 bytes"));
                let sent_ns = u64::from_le_bytes(buf[12..20].try_into().expect("8 bytes"));
                if seen.insert(seq) == Seen::Duplicate {
                    counts.duplicates += 1;
                    continue;
                }
                counts.received += 1;
                total += n as u64;
                counters.bytes[index].store(total, Ordering::Release);
                match highest {
                    Some(h) if seq < h => counts.reordered += 1,
                    _ => highest = Some(seq),
                }
                let transit = arrival as i64 - sent_ns as i64;
                if let Some(last) = last_transit {
                    jitter += (((transit - last).abs() as f64) - jitter) / 16.0;
                }
                last_transit = Some(transit);
            }
            // A datagram shorter than the header is a headerless one of a small-message test
            // (the socket is connected: only the client's datagrams arrive), except a late
            // repeat of the client's 8-byte token.
            Ok(n) if n < UDP_HEADER && buf[..n] != token.to_le_bytes() => {
                idle_since = Instant::now();
                counts.received += 1;
                total += n as u64;
                counters.bytes[index].store(total, Ordering::Release);
            }
            Ok(_) => {} // a stray datagram: not ours
            Err(e) if timed_out(&e) || e.kind() == ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(e).context("receiving a datagram"),
        }
        if counters.draining.load(Ordering::Acquire) {
            let expected = counters.expected[index].load(Ordering::Acquire);
            let idle = idle_since.elapsed() > Duration::from_millis(200);
            if counts.received >= expected
                || idle
                || now_ns() > counters.give_up_ns.load(Ordering::Acquire)
            {
                break;
            }
        }
    }
    counts.jitter_ns = jitter;
    Ok(counts)
}

/// Sequence numbers tracked behind the highest one seen, for duplicates: 2^16 (an 8 KiB
/// bitmap), whatever the sender claims. At 10 Gb/s of 1470-byte datagrams that is 77 ms of
/// reordering.
const SEEN_WINDOW: u64 = 1 << 16;

/// Which of the last [`SEEN_WINDOW`] sequence numbers arrived: a fixed ring of bits that slides
/// with the highest number seen. Its size never depends on what a datagram says (a crafted
/// sequence number of 2^32 − 1 made the old bitmap grow to 512 MiB).
struct SeenSet {
    words: Vec<u64>,
    highest: Option<u64>,
}

/// What [`SeenSet::insert`] found.
#[derive(Debug, PartialEq)]
enum Seen {
    New,
    Duplicate,
    /// Older than the window: it cannot be checked for a duplicate; counted as reordered.
    Late,
}

impl Default for SeenSet {
    fn default() -> SeenSet {
        SeenSet {
            words: vec![0; (SEEN_WINDOW / 64) as usize],
            highest: None,
        }
    }
}

impl SeenSet {
    fn bit(seq: u64) -> (usize, u64) {
        let slot = seq % SEEN_WINDOW;
        ((slot / 64) as usize, 1 << (slot % 64))
    }

    fn insert(&mut self, seq: u64) -> Seen {
        match self.highest {
            Some(h) if seq <= h => {
                if h - seq >= SEEN_WINDOW {
                    return Seen::Late;
                }
            }
            _ => {
                // Slide: forget the slots that now stand for the numbers after the old highest.
                let from = self.highest.map_or(0, |h| h + 1);
                if seq - from >= SEEN_WINDOW {
                    self.words.fill(0);
                } else {
                    for n in from..seq {
                        let (word, bit) = Self::bit(n);
                        self.words[word] &= !bit;
                    }
                }
                self.highest = Some(seq);
                let (word, bit) = Self::bit(seq);
                self.words[word] |= bit;
                return Seen::New;
            }
        }
        let (word, bit) = Self::bit(seq);
        if self.words[word] & bit != 0 {
            return Seen::Duplicate;
        }
        self.words[word] |= bit;
        Seen::New
    }
}

/// What one ping-pong stream measured.
pub struct PingPong {
    pub histogram: LatencyHistogram,
    /// Round trips timed.
    pub round_trips: u64,
    /// UDP requests with no reply within the timeout (resent).
    pub lost: u64,
    /// Wall time of the timed round trips.
    pub elapsed: Duration,
}

/// Round trips on one connected socket: `warmup` untimed, then until `deadline` or `count`.
pub fn ping_pong(
    socket: &Sockets,
    index: usize,
    msg: usize,
    warmup: Duration,
    deadline: Instant,
    count: Option<u64>,
) -> Result<PingPong> {
    let mut buf = payload(msg);
    let mut reply = vec![0u8; msg.max(1)];
    let mut histogram = LatencyHistogram::new();
    let mut lost = 0u64;
    let mut round_trips = 0u64;
    let warm_end = Instant::now() + warmup;
    let mut warm = warmup.is_zero();
    let mut timed_start = Instant::now();
    let mut seq = 0u64;
    // A counted test lasts as long as its round trips take, at most the server's longest test.
    let limit = match count {
        Some(_) => warm_end + super::server::MAX_TEST,
        None => deadline + Duration::from_secs(60),
    };
    loop {
        if !warm && Instant::now() >= warm_end {
            warm = true;
            timed_start = Instant::now();
        }
        if warm
            && (count.is_some_and(|c| round_trips >= c)
                || (count.is_none() && Instant::now() >= deadline))
        {
            break;
        }
        if crate::interrupt::requested() || Instant::now() >= limit {
            break;
        }
        seq += 1;
        if msg >= 8 {
            buf[0..8].copy_from_slice(&seq.to_le_bytes());
        }
        let t0 = Instant::now();
        let ok = match socket {
            Sockets::Tcp(s) => {
                let mut s = &s[index];
                s.write_all(&buf).context("ping-pong send")?;
                s.read_exact(&mut reply)
                    .context("ping-pong reply (the server went away or is slower than 5 s)")?;
                true
            }
            Sockets::Udp(s) => {
                let s = &s[index];
                s.send(&buf).context("ping-pong send")?;
                loop {
                    match s.recv(&mut reply) {
                        Ok(n) if n == msg && (msg < 8 || reply[0..8] == buf[0..8]) => break true,
                        Ok(_) => continue, // a late reply to an earlier request
                        Err(e) if timed_out(&e) || e.kind() == ErrorKind::ConnectionRefused => {
                            lost += 1;
                            break false;
                        }
                        Err(e) => return Err(e).context("ping-pong reply"),
                    }
                }
            }
        };
        let rtt = t0.elapsed();
        if ok && warm {
            histogram.record(rtt.as_nanos() as u64);
            round_trips += 1;
        }
    }
    std::hint::black_box(&reply);
    Ok(PingPong {
        histogram,
        round_trips,
        lost,
        elapsed: timed_start.elapsed(),
    })
}

/// Prepares one socket for ping-pong: no Nagle delay on TCP, a reply timeout.
pub fn prepare_ping(sockets: &Sockets) -> Result<()> {
    match sockets {
        Sockets::Tcp(streams) => {
            for s in streams {
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(Duration::from_secs(5)))?;
            }
        }
        Sockets::Udp(socks) => {
            for s in socks {
                s.set_read_timeout(Some(Duration::from_millis(200)))?;
            }
        }
    }
    Ok(())
}

/// Echoes every message back until the peer closes, `stop` is set or `deadline` passes.
pub fn echo(sockets: &Sockets, msg: usize, stop: &AtomicBool, deadline: Instant) -> Result<()> {
    let abort = || stop.store(true, Ordering::SeqCst);
    std::thread::scope(|scope| {
        let handles = match sockets {
            Sockets::Tcp(streams) => spawn_streams(
                scope,
                streams.len(),
                |i| move || echo_tcp(&streams[i], msg, stop, deadline),
                abort,
            )?,
            Sockets::Udp(socks) => spawn_streams(
                scope,
                socks.len(),
                |i| move || echo_udp(&socks[i], stop, deadline),
                abort,
            )?,
        };
        for h in handles {
            join_stream(h)?;
        }
        Ok(())
    })
}

fn echo_tcp(stream: &TcpStream, msg: usize, stop: &AtomicBool, deadline: Instant) -> Result<()> {
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(POLL))?;
    let mut buf = vec![0u8; msg];
    let mut s = stream;
    let mut have = 0;
    loop {
        if stop.load(Ordering::Relaxed) || Instant::now() >= deadline {
            return Ok(());
        }
        match s.read(&mut buf[have..]) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                have += n;
                if have == msg {
                    s.write_all(&buf).context("echo")?;
                    have = 0;
                }
            }
            Err(e) if timed_out(&e) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return Ok(()),
            Err(e) => return Err(e).context("echo read"),
        }
    }
}

fn echo_udp(sock: &UdpSocket, stop: &AtomicBool, deadline: Instant) -> Result<()> {
    sock.set_read_timeout(Some(POLL))?;
    let mut buf = vec![0u8; 65536];
    loop {
        if stop.load(Ordering::Relaxed) || Instant::now() >= deadline {
            return Ok(());
        }
        match sock.recv(&mut buf) {
            Ok(n) => {
                let _ = sock.send(&buf[..n]);
            }
            Err(e) if timed_out(&e) || e.kind() == ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(e).context("echo read"),
        }
    }
}

/// Slowest pacing accepted: one datagram per this long. A slower rate would have the sender
/// wait between datagrams longer than a test can usefully last (1 bit/s of 1470-byte datagrams
/// is one every 3 hours).
pub const SLOWEST_DATAGRAM: Duration = Duration::from_millis(100);

/// Whether `rate_bps` sends at least one `msg`-byte datagram per [`SLOWEST_DATAGRAM`].
pub fn check_rate(msg: u64, rate_bps: u64) -> Result<(), String> {
    let least = msg.saturating_mul(8).saturating_mul(10);
    if rate_bps < least {
        return Err(format!(
            "{rate_bps} bit/s sends less than one {msg}-byte datagram per 100 ms: give at least {least} bit/s"
        ));
    }
    Ok(())
}

/// Checks that `msg` fits the protocol and mode, in the words of the flag.
pub fn check_msg(proto: super::proto::Proto, _throughput: bool, msg: u64) -> Result<()> {
    use super::proto::Proto;
    match proto {
        Proto::Tcp if !(1..=1_000_000).contains(&msg) => {
            bail!("TCP messages are 1 B to 1 MB, not {msg} B")
        }
        Proto::Udp if msg > 65_507 => {
            bail!("a UDP datagram carries at most 65507 B over IPv4, not {msg} B")
        }
        Proto::Udp if msg == 0 => bail!("a 0-byte datagram carries nothing"),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A receiving and a sending UDP socket on loopback, connected to each other, the receiver
    /// with 4 MiB of buffer.
    fn udp_pair() -> (UdpSocket, UdpSocket) {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        rx.connect(tx.local_addr().unwrap()).unwrap();
        set_buffers(&rx, 4 << 20);
        (rx, tx)
    }

    #[test]
    fn one_byte_datagrams_go_without_a_header_and_are_all_counted() {
        let (rx, tx) = udp_pair();
        let token = 0x1234_5678_u64;
        let stop = AtomicBool::new(false);
        let (rx_sockets, tx_sockets) = (Sockets::Udp(vec![rx]), Sockets::Udp(vec![tx]));
        let (window, udp, sent) = std::thread::scope(|scope| {
            let sender = scope.spawn(|| {
                // 80 kb/s of 1-byte datagrams: 10,000 per second, few enough to lose none.
                let deadline = Instant::now() + Duration::from_secs(5);
                send(
                    &tx_sockets,
                    1,
                    token,
                    Some(80_000),
                    &stop,
                    deadline,
                    StreamCpus::Free,
                )
            });
            let mut sent = Vec::new();
            let (w, u) = receive(
                &rx_sockets,
                token,
                Duration::ZERO,
                Duration::from_millis(200),
                || false,
                |_| {
                    stop.store(true, Ordering::SeqCst);
                    sent = sender.join().unwrap().unwrap();
                    Ok(sent.clone())
                },
                DataThreads::default(),
            )
            .unwrap();
            (w, u, sent)
        });
        // Every byte counted is a whole 1-byte datagram, and every datagram sent arrived.
        assert!(window.stream_bytes[0] > 1000, "{window:?}");
        assert_eq!(udp[0].received, sent[0], "{udp:?} of {sent:?}");
        assert_eq!(udp[0].reordered, 0);
        assert!(check_msg(super::super::proto::Proto::Udp, true, 1).is_ok());
    }

    #[test]
    fn a_receiver_spins_only_where_it_has_the_cpus_to_spare() {
        use super::super::proto::Proto::{Tcp, Udp};
        use ReceiverWait::{Auto, Sleep, Spin};
        // One loopback stream on 2 CPUs: the sender and the receiver each have one.
        assert!(receiver_spins(Auto, Tcp, 1, true, 2));
        // Two loopback streams on 2 CPUs: a spinning receiver would take a sender's CPU.
        assert!(!receiver_spins(Auto, Tcp, 2, true, 2));
        assert!(receiver_spins(Auto, Tcp, 2, true, 4));
        // A sender elsewhere may share this host's CPUs unseen (a namespace, a container).
        assert!(!receiver_spins(Auto, Tcp, 1, false, 64));
        // Asked for, whatever the CPUs; never for UDP.
        assert!(receiver_spins(Spin, Tcp, 8, true, 2));
        assert!(receiver_spins(Spin, Tcp, 1, false, 2));
        assert!(!receiver_spins(Sleep, Tcp, 1, true, 64));
        assert!(!receiver_spins(Spin, Udp, 1, true, 64));
        assert!(!receiver_spins(Auto, Udp, 1, true, 64));
    }

    #[test]
    fn spinning_loopback_receivers_get_cpus_apart_from_their_senders() {
        let cpus = crate::runner::online_cpus().len();
        for streams in 1..=4 {
            let placed = StreamCpus::loopback_pair(true, true, streams);
            if 2 * streams <= cpus {
                assert_eq!(
                    placed,
                    (StreamCpus::From(0), StreamCpus::From(streams)),
                    "{streams} streams on {cpus} CPUs"
                );
            } else {
                assert_eq!(placed, (StreamCpus::Free, StreamCpus::Free));
            }
            // Sleeping receivers, and a peer elsewhere, are left to the scheduler.
            assert_eq!(
                StreamCpus::loopback_pair(false, true, streams),
                (StreamCpus::Free, StreamCpus::Free)
            );
            assert_eq!(
                StreamCpus::loopback_pair(true, false, streams),
                (StreamCpus::Free, StreamCpus::Free)
            );
        }
    }

    #[test]
    fn seen_set_finds_duplicates() {
        let mut s = SeenSet::default();
        assert_eq!(s.insert(5), Seen::New);
        assert_eq!(s.insert(1000), Seen::New);
        assert_eq!(s.insert(5), Seen::Duplicate);
        assert_eq!(s.insert(4), Seen::New);
        assert_eq!(s.insert(1000), Seen::Duplicate);
        // Sliding past the window forgets what it held: slot 5 now stands for 5 + 2^16.
        assert_eq!(s.insert(5 + SEEN_WINDOW), Seen::New);
        assert_eq!(s.insert(5), Seen::Late);
        assert_eq!(s.insert(1000 + SEEN_WINDOW), Seen::New);
        assert_eq!(s.insert(1000 + SEEN_WINDOW), Seen::Duplicate);
    }

    /// Issue 18, item 3: a datagram's sequence number never sizes the receiver's memory.
    #[test]
    fn a_huge_sequence_number_keeps_the_seen_set_at_its_size() {
        let mut s = SeenSet::default();
        let size = s.words.len();
        for seq in [1, (1 << 32) - 1, u64::MAX, 7] {
            s.insert(seq);
            assert_eq!(s.words.len(), size);
        }
        assert_eq!(s.insert(u64::MAX), Seen::Duplicate);
        assert_eq!(s.insert(u64::MAX - 1), Seen::New);
        assert_eq!(s.insert(3), Seen::Late);
        assert_eq!(size * 8, 8192);
    }

    /// Issue 18, item 4: a tiny rate put the sender to sleep for hours, deaf to stop.
    #[test]
    fn a_slow_sender_still_stops_within_its_poll() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        let stop = AtomicBool::new(false);
        let started = Instant::now();
        let sent = std::thread::scope(|scope| {
            let sender = scope.spawn(|| {
                send_udp(
                    &tx,
                    1470,
                    1,
                    Some(1),
                    &stop,
                    started + Duration::from_secs(60),
                )
            });
            std::thread::sleep(Duration::from_millis(150));
            stop.store(true, Ordering::SeqCst);
            sender.join().unwrap().unwrap()
        });
        assert_eq!(sent, 1);
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        // And the deadline alone ends it too.
        let started = Instant::now();
        let never = AtomicBool::new(false);
        send_udp(
            &tx,
            1470,
            1,
            Some(1),
            &never,
            started + Duration::from_millis(150),
        )
        .unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }

    /// Issue 18, item 5: a thread the system refuses fails the test (no panic), and the
    /// streams already started are stopped and joined.
    #[test]
    fn a_refused_thread_stops_the_started_streams_and_is_an_error() {
        let socks: Vec<UdpSocket> = (0..4)
            .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
            .collect();
        for s in &socks {
            s.connect(s.local_addr().unwrap()).unwrap();
        }
        let sockets = Sockets::Udp(socks);
        let stop = AtomicBool::new(false);
        FAIL_SPAWN.with(|n| n.set(3));
        let started = Instant::now();
        let error = send(
            &sockets,
            100,
            1,
            Some(8000),
            &stop,
            started + Duration::from_secs(60),
            StreamCpus::Free,
        )
        .unwrap_err();
        assert!(format!("{error:#}").contains("stream 2 of 4"), "{error:#}");
        assert!(stop.load(Ordering::SeqCst));
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn udp_loopback_counts_every_datagram() {
        let (rx, tx) = udp_pair();
        let token = 0xfeed_beef_u64;
        let stop = AtomicBool::new(false);
        let rx_sockets = Sockets::Udp(vec![rx]);
        let tx_sockets = Sockets::Udp(vec![tx]);
        let (window, udp) = std::thread::scope(|scope| {
            let sender = scope.spawn(|| {
                send(
                    &tx_sockets,
                    100,
                    token,
                    Some(8_000_000),
                    &stop,
                    Instant::now() + Duration::from_secs(5),
                    StreamCpus::Free,
                )
            });
            receive(
                &rx_sockets,
                token,
                Duration::ZERO,
                Duration::from_millis(200),
                || false,
                |_| {
                    stop.store(true, Ordering::SeqCst);
                    Ok(sender.join().unwrap().unwrap())
                },
                DataThreads::default(),
            )
            .unwrap()
        });
        // 8 Mb/s of 100-byte datagrams is 10 000 per second: about 2 000 in the window.
        let bytes = window.stream_bytes[0];
        assert!(
            (150_000..=250_000).contains(&bytes),
            "{bytes} bytes in 200 ms at 1 MB/s"
        );
        assert_eq!(udp[0].duplicates, 0);
        assert!(udp[0].received > 1500);
    }
}
