//! Latency tests: the client's ping-pong and the server's echo.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::sockets::{POLL, Sockets, payload, timed_out};
use super::threads::{join_stream, spawn_streams};
use crate::net::limits::MAX_TEST;
use crate::stats::LatencyHistogram;

/// What one ping-pong stream measured.
pub(crate) struct PingPong {
    pub histogram: LatencyHistogram,
    /// Round trips timed.
    pub round_trips: u64,
    /// UDP requests with no reply within the timeout (resent).
    pub lost: u64,
    /// Wall time of the timed round trips.
    pub elapsed: Duration,
}

/// Round trips on one connected socket: `warmup` untimed, then until `deadline` or `count`.
pub(crate) fn ping_pong(
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
        Some(_) => warm_end + MAX_TEST,
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
pub(crate) fn prepare_ping(sockets: &Sockets) -> Result<()> {
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
pub(crate) fn echo(
    sockets: &Sockets,
    msg: usize,
    stop: &AtomicBool,
    deadline: Instant,
) -> Result<()> {
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

/// Echoes one TCP stream. Reads and writes both wake every [`POLL`] to look at `stop` and the
/// deadline: a client that sends but never reads its echo fills the server's send buffer, and a
/// blocking `write_all` then waited on its zero window for good, holding the test's slot.
fn echo_tcp(stream: &TcpStream, msg: usize, stop: &AtomicBool, deadline: Instant) -> Result<()> {
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(POLL))?;
    stream.set_write_timeout(Some(POLL))?;
    let mut buf = vec![0u8; msg];
    let mut s = stream;
    let mut have = 0;
    let over = || stop.load(Ordering::Relaxed) || Instant::now() >= deadline;
    loop {
        if over() {
            return Ok(());
        }
        match s.read(&mut buf[have..]) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                have += n;
                if have == msg {
                    if !write_until(s, &buf, &over)? {
                        return Ok(());
                    }
                    have = 0;
                }
            }
            Err(e) if timed_out(&e) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return Ok(()),
            Err(e) => return Err(e).context("echo read"),
        }
    }
}

/// Writes all of `buf` unless `over` says stop first (checked whenever a write times out);
/// whether it was all written. A peer that closed or reset ends it quietly (`false`).
fn write_until(mut s: &TcpStream, buf: &[u8], over: &impl Fn() -> bool) -> Result<bool> {
    let mut off = 0;
    while off < buf.len() {
        match s.write(&buf[off..]) {
            Ok(0) => return Ok(false),
            Ok(n) => off += n,
            Err(e) if timed_out(&e) => {
                if over() {
                    return Ok(false);
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset) => {
                return Ok(false);
            }
            Err(e) => return Err(e).context("echo"),
        }
    }
    Ok(true)
}

fn echo_udp(sock: &UdpSocket, stop: &AtomicBool, deadline: Instant) -> Result<()> {
    sock.set_read_timeout(Some(POLL))?;
    sock.set_write_timeout(Some(POLL))?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A client that sends but never reads its echo: the echo thread still ends by its deadline
    /// (it once blocked in `write_all` on a zero window for good).
    #[test]
    fn an_echo_that_is_never_read_ends_by_its_deadline() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let started = Instant::now();
        let deadline = started + Duration::from_millis(800);
        let msg = 64 * 1024;
        let (done, ended) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let stop = AtomicBool::new(false);
            let _ = done.send(echo_tcp(&server, msg, &stop, deadline).is_ok());
        });
        // Send until both sides' buffers are full, reading nothing back.
        client
            .set_write_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let chunk = vec![7u8; msg];
        let mut w = &client;
        while Instant::now() < deadline && w.write(&chunk).is_ok() {}
        let ended = ended.recv_timeout(Duration::from_secs(5));
        assert_eq!(
            ended,
            Ok(true),
            "the echo thread did not end by its deadline"
        );
        drop(client);
    }
}
