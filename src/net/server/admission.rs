//! Who may run a test and how much of the server it may take: the operator's [`Policy`], address
//! blocks ([`Cidr`]), and the slots a handshake or a test holds until it ends ([`Slots`]).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use super::super::auth::Key;
use super::super::limits::{MAX_STREAMS, MAX_TEST};
use super::super::proto::{PROTOCOL_VERSION, TestSpec};
use super::{
    DEFAULT_BUFFER_BYTES, DEFAULT_TOTAL_STREAMS, HANDSHAKE_FILES, HANDSHAKES_PER_BLOCK,
    MAX_HANDSHAKES, MAX_TESTS, SPARE_FILES, STREAM_BUFFER, open_file_limit,
};

/// What the operator allows: who may run tests, and how large.
#[derive(Clone, Debug)]
pub(crate) struct Policy {
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
    pub(crate) fn allows(&self, ip: IpAddr) -> bool {
        self.allow.is_empty() || self.allow.iter().any(|c| c.contains(ip))
    }

    /// What is open and how to close it: the server's first line.
    pub(crate) fn describe(&self, addr: SocketAddr) -> String {
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
            "listening on {addr} (protocol v{PROTOCOL_VERSION}), {who}, {key}; tests up to {} s and {} streams, {} at once per address (IPv6: per /64), {MAX_TESTS} in all, {} streams and {} MiB of buffers in all{rate}. Restrict with --allow CIDR, --key FILE, --max-duration, --max-streams, --max-rate, --max-per-address, --max-total-streams, --max-buffers; stop with Ctrl-C",
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
pub(crate) const DEFAULT_PER_ADDRESS: usize = 32;

/// An address block, `10.0.0.0/8`, `2001:db8::/32` or one address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cidr {
    pub(super) net: IpAddr,
    pub(super) prefix: u8,
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
    pub(crate) fn contains(&self, ip: IpAddr) -> bool {
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
pub(super) fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The block a client's places are counted by: its IPv4 address, or the /64 of its IPv6
/// address (one host commonly holds a whole /64, and may use a new address per connection).
pub(super) fn block(ip: IpAddr) -> IpAddr {
    match canonical(ip) {
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !(u64::MAX as u128))),
        v4 => v4,
    }
}

/// A block as the operator and the client read it.
pub(super) fn block_name(block: IpAddr) -> String {
    match block {
        IpAddr::V6(v6) => format!("{v6}/64"),
        v4 => v4.to_string(),
    }
}

/// What a place holds of the server's budgets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Need {
    pub(super) streams: u64,
    pub(super) buffer_bytes: u64,
    pub(super) files: u64,
}

/// The buffer memory a test's data threads hold, as counted against `--max-buffers`: each
/// stream at least [`STREAM_BUFFER`], or its message when larger.
pub(crate) fn buffer_bytes(spec: &TestSpec) -> u64 {
    u64::from(spec.streams) * spec.msg_bytes.max(STREAM_BUFFER)
}

/// Open files a test needs: each stream a socket and, on the receiving or echoing side, a
/// clone of it; a few more for its listener and control clones.
pub(super) fn test_files(spec: &TestSpec) -> u64 {
    2 * u64::from(spec.streams) + 8
}

/// What is held now: tests and handshakes, in all and per block, and the budgets' use.
#[derive(Default)]
pub(super) struct Held {
    pub(super) tests: usize,
    pub(super) handshakes: usize,
    /// Per block: (tests, handshakes).
    pub(super) blocks: HashMap<IpAddr, (usize, usize)>,
    pub(super) used: Need,
}

/// The server's places: the tests running and the connections in their handshake, and what
/// they hold of the streams, buffers and open files of the whole server.
#[derive(Default)]
pub(super) struct Slots {
    pub(super) held: std::sync::Mutex<Held>,
}

/// A place in [`Slots`], given back when dropped: when its handler ends, returns an error,
/// panics, or gives it back early ([`Test::release`]).
pub(super) struct Slot {
    pub(super) slots: Arc<Slots>,
    pub(super) block: IpAddr,
    pub(super) handshake: bool,
    pub(super) need: Need,
}

impl Slots {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place for a connection that has not sent a valid hello yet.
    pub(super) fn handshake(slots: &Arc<Slots>, ip: IpAddr) -> Result<Slot, String> {
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
    pub(super) fn test(
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
    pub(super) fn running(&self) -> (usize, usize, Need) {
        let held = self.lock();
        (held.tests, held.handshakes, held.used)
    }
}

/// Why `needed` more open files do not fit, or `None`. Counted under the lock of [`Slots`]:
/// the files open now plus everything promised to the places held (counted twice once
/// opened: it errs on the side of refusing) plus [`SPARE_FILES`] must stay under the limit,
/// so two tests checked at once cannot both take the same room.
pub(super) fn files_short(held: &Held, needed: u64, what: &str) -> Option<String> {
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
