//! The data path: senders, receivers, ping-pong and echo, for TCP and UDP.
//!
//! Throughput is counted by the receiver: every thread adds the payload bytes each `read`/`recv`
//! returned to its stream's counter, and the window is the receiver's own clock from
//! `omit` after the start to `omit + duration`; bytes = counter at the end − counter at the
//! start of the window. A read that straddles a boundary counts where it returned (at most one
//! read buffer, 128 KiB, per stream and boundary).
//!
//! A UDP datagram carries a 20-byte header inside its payload: the low 32 bits of the test's
//! token, a sequence number and the sender's clock in nanoseconds. The receiver counts every
//! datagram with the right token: received, reordered (a sequence number below the highest one
//! seen), duplicates (among the last 65 536 sequence numbers: a fixed window behind the highest
//! one, so no datagram sizes the receiver's memory; an older one counts as reordered), and the
//! interarrival jitter of RFC 3550 §6.4.1
//! (J += (|D| − J) / 16 with D the change in transit time between consecutive arrivals).
//! Only differences of the sender's clock are used, so the two clocks need not agree.
//!
//! The parts: [`sockets`] (what they all share), [`threads`] (where stream threads run and
//! how they start), [`sender`], [`receiver`] (the window and the UDP counts, with [`seen`] for
//! duplicates) and [`pingpong`] (latency: ping-pong and echo).

mod pingpong;
mod receiver;
mod seen;
mod sender;
mod sockets;
mod threads;

pub(crate) use pingpong::{PingPong, echo, ping_pong, prepare_ping};
pub(crate) use receiver::{READ_BUFFER, UdpTally, receive};
pub(crate) use sender::send;
pub(crate) use sockets::{Sockets, UDP_HEADER, now_ns, set_buffers};
pub(crate) use threads::{DataThreads, SPIN, StreamCpus, join_stream, pin_stream};
