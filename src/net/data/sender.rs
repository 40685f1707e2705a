//! The sending side of a throughput test: TCP writes and paced UDP datagrams.

use std::io::{ErrorKind, Write};
use std::net::{TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::sockets::{POLL, Sockets, UDP_HEADER, now_ns, payload, timed_out};
use super::threads::{StreamCpus, join_stream, pin_stream, spawn_streams};

/// Sends on every stream until `stop` is set or `deadline` passes; returns what each stream
/// sent (bytes for TCP, datagrams for UDP). `rate_bps` paces each UDP stream; `cpus` places
/// each stream's thread.
pub(crate) fn send(
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

#[cfg(test)]
mod tests {
    use super::super::threads::FAIL_SPAWN;
    use super::*;

    /// A sender at a tiny rate still stops within its poll (such a rate once put it to sleep
    /// for hours, deaf to stop).
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

    /// A thread the system refuses fails the test (no panic), and the streams already started
    /// are stopped and joined.
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
}
