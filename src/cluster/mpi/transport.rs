//! How the ranks talk: JSON messages point to point, waited for between short sleeps, rank 0's
//! gathers with a deadline, and the spinning waits of the timed parts.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use mpi::request::{Request, Scope};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::Exit;

/// What a handler of a stuck step returns: nothing (it ends the job), as `!` can't be named in
/// a closure's type on stable Rust.
pub(super) type Never = std::convert::Infallible;

/// How long a waiting rank sleeps between two probes at first.
pub(super) const POLL: Duration = Duration::from_micros(500);
/// The longest sleep between two probes. A wait that lasts is a rank whose CPU measures for
/// another: the server of a pair's TCP tests, a host idle while the others measure. Probing
/// every [`POLL`] there, 2,000 wake-ups a second took that CPU from the TCP receiver beside
/// it, which read 0.84 x iperf3 pinned to it; waking at most 100 times a second, 1.05 x
/// (measured with bench/cluster.py --only tcp).
pub(super) const POLL_IDLE: Duration = Duration::from_millis(10);

/// Sleeps between two probes of a wait that began at `since`: [`POLL`] at first, then a tenth
/// of the time waited so far, at most [`POLL_IDLE`]. A quick exchange is seen within 0.5 ms; a
/// message after a long wait, at most 10 % of that wait (and 10 ms) late.
pub(super) fn pause(since: Instant) {
    std::thread::sleep((since.elapsed() / 10).clamp(POLL, POLL_IDLE));
}
/// Control messages between rank 0 and the others (in order between any two ranks).
pub(super) const TAG: i32 = 11;
/// Messages between the two hosts of a pair.
pub(super) const TAG_PAIR: i32 = 12;
/// The MPI ping-pong's own messages.
pub(super) const TAG_PING: i32 = 13;
/// "I am alive and was asked to stop": each rank's answer to SIGTERM or Ctrl-C (see
/// [`Leader::stopped`]).
pub(super) const TAG_STOP: i32 = 14;
/// How long rank 0, asked to stop, waits for every other rank to say it is alive: well within
/// the time Open MPI leaves between the SIGTERM and the SIGKILL with which it ends a job.
pub(super) const STOP_GRACE: Duration = Duration::from_millis(600);
/// The time the ranks have to say hello, and the setup steps.
pub(super) const SETUP: Duration = Duration::from_secs(120);

/// The world and this rank.
pub(super) struct Comm {
    pub(super) world: SimpleCommunicator,
    pub(super) rank: usize,
    pub(super) size: usize,
    /// Whether this rank told rank 0 that it was asked to stop.
    pub(super) told_stop: std::cell::Cell<bool>,
}

impl Comm {
    pub(super) fn process(&self, rank: usize) -> mpi::topology::Process<'_> {
        self.world.process_at_rank(rank as i32)
    }

    /// A rank other than 0 that was asked to stop (SIGTERM: mpirun ending the job because a
    /// rank died, or because it was itself stopped) tells rank 0, once, that it is alive, so
    /// that rank 0 can name the ranks that are not. Called from every wait.
    pub(super) fn tell_stop(&self) {
        if self.rank == 0 || self.told_stop.get() || !crate::interrupt::requested() {
            return;
        }
        self.told_stop.set(true);
        // One byte: sent eagerly, the call returns without rank 0 receiving it.
        self.process(0).send_with_tag(&[1u8][..], TAG_STOP);
    }

    /// Sends `value` to `to`; a send that cannot complete before `deadline` (the peer gone)
    /// ends the job.
    pub(super) fn send<T: Serialize>(&self, to: usize, tag: i32, value: &T, deadline: Instant) {
        self.send_or(to, tag, value, deadline, &mut || {
            eprintln!(
                "peakbench cluster: rank {}: rank {to} took no message within its deadline; \
                 ending the job",
                self.rank
            );
            self.world.abort(Exit::Failed as i32)
        });
    }

    /// Sends `value` to `to`, testing between sleeps; a send that cannot complete before
    /// `deadline` (the peer gone: even a small message waits for a peer that never made its
    /// connection) calls `stuck`, the request still pending.
    pub(super) fn send_or<T: Serialize>(
        &self,
        to: usize,
        tag: i32,
        value: &T,
        deadline: Instant,
        stuck: &mut dyn FnMut() -> Never,
    ) {
        let since = Instant::now();
        let bytes = serde_json::to_vec(value).expect("messages serialise");
        let process = self.process(to);
        mpi::request::scope(|scope| {
            let mut request = process.immediate_send_with_tag(scope, &bytes[..], tag);
            loop {
                match request.test() {
                    Ok(_) => return,
                    Err(pending) => request = pending,
                }
                self.tell_stop();
                if Instant::now() > deadline || (self.rank == 0 && crate::interrupt::requested()) {
                    stuck();
                }
                pause(since);
            }
        });
    }

    /// Whether a message from `from` has arrived; if so, receives it.
    pub(super) fn try_recv<T: DeserializeOwned>(&self, from: usize, tag: i32) -> Option<Result<T>> {
        let process = self.process(from);
        process.immediate_probe_with_tag(tag)?;
        let (bytes, _) = process.receive_vec_with_tag::<u8>(tag);
        Some(
            serde_json::from_slice(&bytes)
                .with_context(|| format!("a message from rank {from} does not parse")),
        )
    }

    /// Waits for a message from `from` until `deadline`, sleeping between probes.
    pub(super) fn recv<T: DeserializeOwned>(
        &self,
        from: usize,
        tag: i32,
        deadline: Instant,
    ) -> Option<T> {
        let since = Instant::now();
        loop {
            if let Some(message) = self.try_recv(from, tag) {
                return Some(message.unwrap_or_else(|e| self.fatal(&format!("{e:#}"))));
            }
            self.tell_stop();
            if Instant::now() > deadline || (self.rank == 0 && crate::interrupt::requested()) {
                return None;
            }
            pause(since);
        }
    }

    /// Waits for a message from rank 0; rank 0 silent past `deadline` ends the job.
    pub(super) fn recv_root<T: DeserializeOwned>(&self, deadline: Instant, what: &str) -> T {
        self.recv(0, TAG, deadline)
            .unwrap_or_else(|| self.fatal(&format!("rank 0 sent no {what} within the deadline")))
    }

    /// Rank 0: a message from each of `from`, those that did not send by `deadline` apart.
    pub(super) fn gather<T: DeserializeOwned>(
        &self,
        from: &[usize],
        deadline: Instant,
    ) -> (BTreeMap<usize, T>, Vec<usize>) {
        let since = Instant::now();
        let mut got = BTreeMap::new();
        let mut pending: Vec<usize> = from.iter().copied().filter(|&r| r != 0).collect();
        loop {
            pending.retain(|&r| match self.try_recv::<T>(r, TAG) {
                Some(Ok(message)) => {
                    got.insert(r, message);
                    false
                }
                Some(Err(e)) => self.fatal(&format!("{e:#}")),
                None => true,
            });
            // Asked to stop: the caller gives up on the ranks pending, which turns into
            // naming the ranks that do not answer the stop (`Leader::stopped`).
            if pending.is_empty() || Instant::now() > deadline || crate::interrupt::requested() {
                return (got, pending);
            }
            pause(since);
        }
    }

    /// Every rank here, without spinning: a non-blocking barrier tested between sleeps.
    pub(super) fn barrier(&self, deadline: Instant) {
        let since = Instant::now();
        let mut request = self.world.immediate_barrier();
        loop {
            match request.test() {
                Ok(_) => return,
                Err(pending) => request = pending,
            }
            self.tell_stop();
            if Instant::now() > deadline {
                self.fatal("the other ranks did not reach the final barrier");
            }
            pause(since);
        }
    }

    pub(super) fn fatal(&self, why: &str) -> ! {
        self.tell_stop();
        eprintln!(
            "peakbench cluster: rank {}: {why}; ending the job",
            self.rank
        );
        self.world.abort(Exit::Failed as i32)
    }
}

/// Spins on `request` (testing it, no sleep: the timed parts, where every rank of the
/// operation is busy) until it completes or `deadline` passes; then `stuck` is called with the
/// request still pending (it never returns: the request is never dropped incomplete).
pub(super) fn spin<'a, D: ?Sized, S: Scope<'a>>(
    mut request: Request<'a, D, S>,
    deadline: Instant,
    stuck: &mut dyn FnMut() -> Never,
) {
    let mut tests = 0u32;
    loop {
        match request.test() {
            Ok(_) => return,
            Err(pending) => request = pending,
        }
        tests = tests.wrapping_add(1);
        if tests.is_multiple_of(256) && (Instant::now() > deadline || crate::interrupt::requested())
        {
            stuck();
        }
    }
}

/// A deadline no step reaches: the waits whose end rank 0 decides.
pub(super) fn far() -> Instant {
    Instant::now() + Duration::from_secs(7 * 24 * 3600)
}
