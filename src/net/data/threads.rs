//! The threads of a test's streams: where each runs, whether a TCP receiver spins, and how
//! they are started and joined.

use std::time::Duration;

use anyhow::{Context, Result};

use crate::net::proto::{Proto, ReceiverWait, TestSpec};

/// How long a spinning TCP receiver goes on reading an empty socket before it sleeps.
pub(crate) const SPIN: Duration = Duration::from_micros(200);

/// How one side of a test runs its data threads: whether the TCP receivers spin on an empty
/// socket (see [`receiver_spins`]), and where the sending and the receiving threads run.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct DataThreads {
    pub spin: bool,
    pub send: StreamCpus,
    pub receive: StreamCpus,
}

impl DataThreads {
    /// What both sides of `spec` derive alike, each from whether its peer is on `loopback`:
    /// spinning receivers, and on loopback the placement of [`StreamCpus::loopback_pair`],
    /// which wins over `--pin`'s (`pin`: stream i on the i-th CPU, which would put a
    /// `--reverse` test's receivers on the server's senders' CPUs).
    pub(crate) fn for_spec(spec: &TestSpec, loopback: bool, pin: bool) -> DataThreads {
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

impl DataThreads {
    /// Where this side's threads run, in words, for the result's `placement`: "senders from
    /// CPU 0, receivers from CPU 1", or why no placement is fixed.
    pub(crate) fn describe(&self, streams: usize, loopback: bool) -> String {
        let first = |cpus: StreamCpus| match cpus {
            StreamCpus::From(k) => crate::runner::cpu_for(true, k),
            StreamCpus::Free => None,
        };
        let allowed = crate::runner::online_cpus().len();
        match (first(self.send), first(self.receive)) {
            (Some(s), Some(r)) if loopback => {
                format!("senders from CPU {s}, receivers from CPU {r}")
            }
            (Some(s), _) => format!("streams from CPU {s}"),
            _ if loopback && 2 * streams > allowed => format!(
                "not fixed: {allowed} CPU{} for {} sending and receiving threads, which share \
                 them",
                if allowed == 1 { "" } else { "s" },
                2 * streams
            ),
            _ => "where the scheduler puts them".into(),
        }
    }
}

/// Whether the TCP receiver of a test spins on its empty sockets ([`SPIN`]) instead of sleeping in
/// a blocking read at once. A sleeping receiver is woken by the kernel on the sender's side for
/// every burst of data, and on a VM that wake-up (an interrupt to a halted vCPU) costs the sending
/// CPU more than the receiver's copy: one loopback stream read 31 Gb/s with a spinning receiver and
/// 22 with a sleeping one on a 2-vCPU KVM guest of an AMD EPYC Zen 4. Spinning costs a CPU per
/// receiving thread, so `auto` spins only where this host runs both ends (`loopback`) and the
/// `streams`' sending and receiving threads all fit in the `cpus` this process may use: a spinning
/// thread on a shared CPU would take it from a sender. A remote sender's CPUs, or another network
/// namespace's on this host, are not known here, so its receiver sleeps unless asked to spin. UDP
/// receivers always sleep: their figure is the loss at a rate, which a spinning receiver would
/// hide.
pub(crate) fn receiver_spins(
    wait: ReceiverWait,
    proto: Proto,
    streams: usize,
    loopback: bool,
    cpus: usize,
) -> bool {
    proto == Proto::Tcp
        && match wait {
            ReceiverWait::Spin => true,
            ReceiverWait::Sleep => false,
            ReceiverWait::Auto => loopback && 2 * streams <= cpus,
        }
}

/// Where the thread of each stream runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum StreamCpus {
    /// Wherever the scheduler puts it.
    #[default]
    Free,
    /// Stream i on the (k + i)-th CPU this process may use (`--pin` is `From(0)`, as worker i
    /// of every case runs on the i-th CPU).
    From(usize),
}

impl StreamCpus {
    /// `--pin`'s placement, or none.
    pub(crate) fn pinned(pin: bool) -> StreamCpus {
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
    pub(crate) fn loopback_pair(
        spin: bool,
        loopback: bool,
        streams: usize,
    ) -> (StreamCpus, StreamCpus) {
        if spin && loopback && 2 * streams <= crate::runner::online_cpus().len() {
            (StreamCpus::From(0), StreamCpus::From(streams))
        } else {
            (StreamCpus::Free, StreamCpus::Free)
        }
    }
}

/// Puts the calling thread, that of stream `index`, where `cpus` says.
pub(crate) fn pin_stream(cpus: StreamCpus, index: usize) -> Result<()> {
    match cpus {
        StreamCpus::Free => Ok(()),
        StreamCpus::From(first) => match crate::runner::cpu_for(true, first + index) {
            Some(cpu) => crate::runner::pin_to(cpu),
            None => Ok(()),
        },
    }
}

/// Starts one thread per stream in `scope`, `f(i)` on the i-th. When the system refuses a
/// thread (out of memory or of threads), `abort` is called so that the threads already started
/// end, they are joined, and an error is returned instead of a panic.
pub(crate) fn spawn_streams<'scope, T, F, G>(
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
    pub(super) static FAIL_SPAWN: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// A stream thread's result; a panic in it becomes an error.
pub(crate) fn join_stream<T>(handle: std::thread::ScopedJoinHandle<'_, Result<T>>) -> Result<T> {
    handle
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("a stream thread panicked")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receiver_spins_only_where_it_has_the_cpus_to_spare() {
        use Proto::{Tcp, Udp};
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
}
