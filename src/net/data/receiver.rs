//! The receiving side of a throughput test: the counters, the window timed on the receiver's
//! clock, and the UDP counts (received, reordered, duplicates, jitter).

use std::io::{ErrorKind, Read};
use std::net::{TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::seen::{Seen, SeenSet};
use super::sockets::{POLL, Sockets, UDP_HEADER, now_ns, timed_out};
use super::threads::{DataThreads, SPIN, join_stream, pin_stream, spawn_streams};
use crate::net::proto::{UdpCounts, Window};

/// The most a TCP receiver takes in one read: 128 KiB, iperf3's block size, which it reads. On
/// a 2-vCPU KVM guest of a Golden Cove server Xeon, alternating with iperf3 (docs/net.md, "The
/// read size"), a sleeping receiver's larger reads lost on loopback (256 KiB: 0.93-0.94 x
/// iperf3 both ways) and its smaller ones between network namespaces (64 KiB: 0.84-0.88, waking
/// 10-10.5 times per MB against 7.5-8), while 128 KiB read 0.95-1.00 on loopback and 0.99-1.01
/// between namespaces.
pub(crate) const READ_BUFFER: usize = 128 * 1024;

/// Shared between the receiving threads and the thread that times the window.
struct Counters {
    bytes: Vec<AtomicU64>,
    /// Set once the window is over and the sender's totals are known.
    draining: AtomicBool,
    /// What the sender says it sent, per stream (UDP: datagrams), once `draining`.
    expected: Vec<AtomicU64>,
    /// Last moment to keep reading, nanoseconds on [`now_ns`]'s clock.
    give_up_ns: AtomicU64,
    /// The thread id of each TCP stream's receiver once it runs (0 before), for its wake-ups.
    tids: Vec<AtomicI32>,
}

impl Counters {
    fn new(streams: usize) -> Counters {
        Counters {
            bytes: (0..streams).map(|_| AtomicU64::new(0)).collect(),
            draining: AtomicBool::new(false),
            expected: (0..streams).map(|_| AtomicU64::new(u64::MAX)).collect(),
            give_up_ns: AtomicU64::new(u64::MAX),
            tids: (0..streams).map(|_| AtomicI32::new(0)).collect(),
        }
    }

    /// The wake-ups of all the TCP receiving threads so far, counting `unborn` for a thread
    /// that has not started yet (at the window's start with no `omit`: 0, its whole life is
    /// then in the window); none where a count cannot be read.
    fn wakeups(&self, unborn: Option<u64>) -> Option<u64> {
        self.tids
            .iter()
            .map(|t| match t.load(Ordering::Acquire) {
                0 => unborn,
                tid => wakeups(tid),
            })
            .sum()
    }

    /// Each stream's bytes so far.
    fn snapshot(&self) -> Vec<u64> {
        self.bytes
            .iter()
            .map(|b| b.load(Ordering::Acquire))
            .collect()
    }

    /// Tells the receiving threads to stop at once.
    fn give_up(&self) {
        self.give_up_ns.store(0, Ordering::Release);
        self.draining.store(true, Ordering::Release);
    }

    /// Tells the receiving threads what the sender sent (when it said), and to drain what is
    /// still in flight for at most 2 s.
    fn drain(&self, sent: Option<&[u64]>) {
        for (e, s) in self.expected.iter().zip(sent.unwrap_or_default()) {
            e.store(*s, Ordering::Release);
        }
        self.give_up_ns
            .store(now_ns() + 2_000_000_000, Ordering::Release);
        self.draining.store(true, Ordering::Release);
    }

    /// Times the window on this clock: `omit`, then `duration`; returns its length, each
    /// stream's bytes in it and the TCP receivers' wake-ups in it, or `None` when the peer is
    /// `gone`.
    fn window(
        &self,
        omit: Duration,
        duration: Duration,
        gone: &impl Fn() -> bool,
    ) -> Option<(Duration, Vec<u64>, Option<u64>)> {
        let start = Instant::now();
        sleep_until(start + omit, gone);
        let (from, before, woke) = (Instant::now(), self.snapshot(), self.wakeups(Some(0)));
        sleep_until(from + duration, gone);
        let (to, after, awake) = (Instant::now(), self.snapshot(), self.wakeups(None));
        if gone() {
            return None;
        }
        let bytes = after.iter().zip(&before).map(|(a, b)| a - b).collect();
        let wakeups = woke.zip(awake).map(|(w, a)| a.saturating_sub(w));
        Some((to.duration_since(from), bytes, wakeups))
    }
}

/// Receives on every stream: times the window (`omit`, then `duration`), calls `end_window`
/// with what was counted in it (which tells the sender to stop and returns what it sent),
/// drains what is still in flight, and returns the window and the UDP counts. `gone` is asked
/// while waiting: when it says the other side has vanished, the test ends at once.
pub(crate) fn receive(
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
    let counters = Counters::new(sockets.len());
    std::thread::scope(|scope| {
        let counters = &counters;
        let abort = || counters.give_up();
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
        let Some((length, stream_bytes, receiver_wakeups)) = counters.window(omit, duration, &gone)
        else {
            counters.give_up();
            for h in handles {
                let _ = h.join();
            }
            bail!("the other side went away during the test");
        };
        let window = Window {
            window_ns: length.as_nanos() as u64,
            stream_bytes,
            receiver_spun: spin && matches!(sockets, Sockets::Tcp(_)),
            receiver_wakeups,
        };
        let ended = end_window(&window);
        counters.drain(ended.as_deref().ok());
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

/// Reads one TCP stream to its end. A sleeping receiver blocks in read(2), each read with a
/// deadline of [`POLL`] (SO_RCVTIMEO) to look at the flags. A spinning one (`spin`) reads
/// non-blocking and on an empty socket reads on for up to [`SPIN`] since the last data, then
/// sleeps in poll(2) (see [`receiver_spins`]). Why a blocking read and not poll(2) then a
/// non-blocking read when it sleeps: on a 2-vCPU KVM guest of a Golden Cove server Xeon one
/// loopback stream read about 7 % more with the blocking read, with as many wake-ups per MB
/// (docs/net.md, "A sleeping receiver against iperf3's"); on a 2-vCPU KVM guest of an AMD EPYC
/// Zen 4 poll(2) had read 3-5 % more, so the choice is the machine's, not a law.
fn receive_tcp(stream: &TcpStream, index: usize, counters: &Counters, spin: bool) -> Result<()> {
    // SAFETY: gettid has no preconditions.
    counters.tids[index].store(unsafe { libc::gettid() }, Ordering::Release);
    if spin {
        stream.set_nonblocking(true)?;
    } else {
        stream.set_nonblocking(false)?;
        stream.set_read_timeout(Some(POLL))?;
    }
    let mut buf = vec![0u8; READ_BUFFER];
    let mut total = 0u64;
    let mut stream_ref = stream;
    let spin_ns = SPIN.as_nanos() as u64;
    let mut last_data = now_ns();
    loop {
        match stream_ref.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                total += n as u64;
                counters.bytes[index].store(total, Ordering::Release);
                last_data = now_ns();
            }
            // Empty: a spinning receiver's non-blocking read (a sleeping one's deadline
            // passing is a time-out, below).
            Err(e) if spin && e.kind() == ErrorKind::WouldBlock => {
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

/// How often thread `tid` of this process has slept and been woken so far: its voluntary
/// context switches (/proc/self/task/TID/status). A receiver that sleeps on an empty socket is
/// woken by the kernel once per burst of data, on the sending CPU's time.
fn wakeups(tid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))?
        .trim()
        .parse()
        .ok()
}

/// What one UDP stream's receiver keeps: its counts, the highest sequence number, the sequence
/// numbers seen, the last transit time and the jitter. Fed one datagram at a time by
/// [`UdpTally::record`], with no socket, so the datagram header is fuzzed
/// (`fuzz/fuzz_targets/udp_datagram.rs`).
#[derive(Default)]
pub(crate) struct UdpTally {
    pub counts: UdpCounts,
    /// Payload bytes of the datagrams counted.
    pub bytes: u64,
    highest: Option<u64>,
    seen: SeenSet,
    last_transit: Option<i64>,
    jitter: f64,
}

impl UdpTally {
    /// Counts one datagram of `n` bytes that arrived at `arrival_ns`; whether it was the test's
    /// (a header with the token's low 32 bits, or a headerless small one that is not a late
    /// repeat of the 8-byte token). Any bytes are accepted: a peer's sequence number and clock
    /// are only compared, in wrapping arithmetic.
    pub(crate) fn record(&mut self, datagram: &[u8], token: u64, arrival_ns: u64) -> bool {
        let n = datagram.len();
        if n >= UDP_HEADER && datagram[0..4] == (token as u32).to_le_bytes() {
            let seq = u64::from_le_bytes(datagram[4..12].try_into().expect("8 bytes"));
            let sent_ns = u64::from_le_bytes(datagram[12..20].try_into().expect("8 bytes"));
            if self.seen.insert(seq) == Seen::Duplicate {
                self.counts.duplicates += 1;
                return true;
            }
            self.counts.received += 1;
            self.bytes += n as u64;
            match self.highest {
                Some(h) if seq < h => self.counts.reordered += 1,
                _ => self.highest = Some(seq),
            }
            // A crafted clock must not overflow: transit times are differences of the two
            // clocks, compared with the previous one's (RFC 3550's D), all wrapping.
            let transit = (arrival_ns as i64).wrapping_sub(sent_ns as i64);
            if let Some(last) = self.last_transit {
                let d = transit.wrapping_sub(last).unsigned_abs() as f64;
                self.jitter += (d - self.jitter) / 16.0;
            }
            self.last_transit = Some(transit);
            self.counts.jitter_ns = self.jitter;
            true
        } else if n < UDP_HEADER && datagram != token.to_le_bytes() {
            // A datagram shorter than the header is a headerless one of a small-message test
            // (the socket is connected: only the client's datagrams arrive), except a late
            // repeat of the client's 8-byte token.
            self.counts.received += 1;
            self.bytes += n as u64;
            true
        } else {
            false // a stray datagram: not ours
        }
    }
}

fn receive_udp(
    sock: &UdpSocket,
    index: usize,
    token: u64,
    counters: &Counters,
) -> Result<UdpCounts> {
    sock.set_read_timeout(Some(Duration::from_millis(20)))?;
    let mut buf = vec![0u8; 65536];
    let mut tally = UdpTally::default();
    let mut idle_since = Instant::now();
    loop {
        match sock.recv(&mut buf) {
            Ok(n) => {
                if tally.record(&buf[..n], token, now_ns()) {
                    idle_since = Instant::now();
                    counters.bytes[index].store(tally.bytes, Ordering::Release);
                }
            }
            Err(e) if timed_out(&e) || e.kind() == ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(e).context("receiving a datagram"),
        }
        if counters.draining.load(Ordering::Acquire) {
            let expected = counters.expected[index].load(Ordering::Acquire);
            let idle = idle_since.elapsed() > Duration::from_millis(200);
            if tally.counts.received >= expected
                || idle
                || now_ns() > counters.give_up_ns.load(Ordering::Acquire)
            {
                break;
            }
        }
    }
    Ok(tally.counts)
}

#[cfg(test)]
mod tests {
    use super::super::sender::send;
    use super::super::sockets::set_buffers;
    use super::super::threads::StreamCpus;
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

    /// A thread's wake-ups are read from /proc, and a sleep is one more.
    #[test]
    fn a_threads_wakeups_are_read_and_a_sleep_adds_one() {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        let before = wakeups(tid).expect("this thread's voluntary context switches");
        std::thread::sleep(Duration::from_millis(1));
        assert!(wakeups(tid).unwrap() > before);
        assert_eq!(wakeups(i32::MAX), None);
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
        assert!(crate::net::limits::check_msg(crate::net::proto::Proto::Udp, true, 1).is_ok());
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
