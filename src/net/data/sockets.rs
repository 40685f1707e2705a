//! What every part of the data path shares: the sockets of a test, the clock, buffers, and
//! the UDP header's size.

use std::io::ErrorKind;
use std::net::{TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Bytes of the UDP header inside each datagram.
pub(crate) const UDP_HEADER: usize = 20;
/// How often a blocked socket call wakes up to look at the stop flags.
pub(crate) const POLL: Duration = Duration::from_millis(100);

/// The data sockets of one test, in stream order.
pub(crate) enum Sockets {
    Tcp(Vec<TcpStream>),
    Udp(Vec<UdpSocket>),
}

impl Sockets {
    pub(crate) fn len(&self) -> usize {
        match self {
            Sockets::Tcp(s) => s.len(),
            Sockets::Udp(s) => s.len(),
        }
    }
}

/// Whether a socket call ended for want of data or time (try again), not in error.
pub(super) fn timed_out(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
    )
}

/// Nanoseconds on this process's monotonic clock.
pub(crate) fn now_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Asks the kernel for socket buffers of `bytes` (it may grant less, up to its maximum).
pub(crate) fn set_buffers(fd: &impl AsRawFd, bytes: usize) {
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
pub(super) fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 131 + 7) as u8).collect()
}
