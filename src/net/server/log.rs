//! The server's stderr log, limited per address block, and the accept loop's back-off.

use std::collections::HashMap;
use std::io::Write;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use super::admission::{block, block_name};
use super::{LOG_BURST, LOG_LINE, LOG_PERIOD};

/// The server's log: one line per event on stderr, when logging at all. Every line is made
/// printable ([`crate::text::printable`]: a peer's text cannot reach the operator's terminal
/// raw) and cut at [`LOG_LINE`] characters; lines caused by one address block are limited to
/// [`LOG_BURST`] per [`LOG_PERIOD`], the rest counted and the count logged when the block is
/// heard from again.
pub(super) struct Log {
    pub(super) on: bool,
    pub(super) blocks: std::sync::Mutex<HashMap<IpAddr, Burst>>,
}

/// One block's lines in the current period.
pub(super) struct Burst {
    pub(super) since: Instant,
    pub(super) lines: u32,
    pub(super) dropped: u64,
}

/// Blocks remembered by [`Log`]; beyond, the ones whose period is over are forgotten.
pub(super) const LOG_BLOCKS: usize = 4096;

impl Log {
    pub(super) fn new(on: bool) -> Log {
        Log {
            on,
            blocks: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// A line about the server itself, in its own words.
    pub(super) fn server(&self, line: &str) {
        if self.on {
            log_line(line);
        }
    }

    /// A line caused by the client at `ip`, within its block's rate.
    pub(super) fn peer(&self, ip: IpAddr, line: &str) {
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
    pub(super) fn admit(&self, block: IpAddr, now: Instant) -> Option<u64> {
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
pub(super) fn fit(line: &str) -> String {
    crate::text::printable_at_most(line, LOG_LINE)
}

/// How the accept loop waits after a failed `accept` (out of descriptors, EMFILE, leaves the
/// connection in the backlog and poll(2) says readable at once: it spun at 100 % CPU and logged
/// every 10 ms): 10 ms, doubling to 1 s while it fails; logged once per [`LOG_PERIOD`].
#[derive(Default)]
pub(super) struct AcceptBackoff {
    pub(super) wait: Duration,
    pub(super) failures: u64,
    pub(super) logged: Option<Instant>,
}

impl AcceptBackoff {
    /// One more failure at `now`: how long to wait, and whether to log it.
    pub(super) fn failed(&mut self, now: Instant) -> (Duration, bool) {
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

    pub(super) fn succeeded(&mut self) {
        self.wait = Duration::ZERO;
        self.failures = 0;
        self.logged = None;
    }
}

/// One line on stderr for the operator. A server outlives its log: when stderr is full, closed
/// or its reader gone (`2>/dev/full`, `2>&-`, `2>&1 | head -1`) the line is lost, never the
/// server (`eprintln!` panics on a failed write).
pub(crate) fn log_line(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "net serve: {line}");
}
