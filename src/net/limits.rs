//! The limits of a test that both sides check: the port, the longest test, the most streams,
//! the message sizes of each protocol and the slowest UDP rate.

use std::time::Duration;

use anyhow::{Result, bail};

use super::proto::Proto;

/// The server's port when none is given.
pub(crate) const DEFAULT_PORT: u16 = 5301;
/// Longest test a client may ask for (omit + duration).
pub(crate) const MAX_TEST: Duration = Duration::from_secs(600);
/// Most streams in one test.
pub(crate) const MAX_STREAMS: u32 = 128;

/// Slowest pacing accepted: one datagram per this long. A slower rate would have the sender
/// wait between datagrams longer than a test can usefully last (1 bit/s of 1470-byte datagrams
/// is one every 3 hours).
pub(crate) const SLOWEST_DATAGRAM: Duration = Duration::from_millis(100);

/// Whether `rate_bps` sends at least one `msg`-byte datagram per [`SLOWEST_DATAGRAM`].
pub(crate) fn check_rate(msg: u64, rate_bps: u64) -> Result<(), String> {
    let per_second = 1000 / SLOWEST_DATAGRAM.as_millis() as u64;
    let least = msg.saturating_mul(8).saturating_mul(per_second);
    if rate_bps < least {
        return Err(format!(
            "{rate_bps} bit/s sends less than one {msg}-byte datagram per {} ms: give at least {least} bit/s",
            SLOWEST_DATAGRAM.as_millis()
        ));
    }
    Ok(())
}

/// Checks that `msg` fits the protocol and mode, in the words of the flag.
pub(crate) fn check_msg(proto: Proto, _throughput: bool, msg: u64) -> Result<()> {
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
