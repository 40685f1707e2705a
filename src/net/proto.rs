//! The control protocol: one JSON object per line, each line at most [`MAX_LINE`] bytes.
//!
//! The server opens every control connection with [`Msg::Challenge`]: its version, a fresh
//! nonce, and whether it requires the shared key (`super::auth`). The client sends
//! [`Msg::Hello`] with its version, the test and, for a server with a key, the proof (an HMAC
//! of the nonce and the test, never the key); the server answers [`Msg::Accepted`] (the data ports and a token the data connections must
//! present) or [`Msg::Refused`] with the reason. Once every data connection is in, the server
//! sends [`Msg::Ready`] and the test runs. The receiver of the data ends the window with
//! [`Msg::Window`] (forward) or [`Msg::Stop`] (reverse); the sender answers [`Msg::Sent`]; in
//! forward mode the server closes with [`Msg::Final`]. The server's last message (`Final`, or
//! its `Sent` with `--reverse`) carries what its machine showed during the test (its shapers on
//! the way back, its CPUs' load): the client's findings name causes on the far side too.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::evidence::PeerEvidence;
use crate::names::named_enum;

/// Version of the control protocol; a server refuses any other. Version 2 added the challenge.
pub(crate) const PROTOCOL_VERSION: u32 = 2;
/// Longest control line accepted, newline included.
pub(crate) const MAX_LINE: usize = 4096;

named_enum! {
    /// A transport protocol.
    pub(crate) enum Proto {
        Tcp = "tcp",
        Udp = "udp",
    }
}

named_enum! {
    /// What a test measures.
    pub(crate) enum Mode {
        /// bytes per second of a one-way stream
        Throughput = "throughput" | "bw",
        /// round-trip time of a ping-pong
        Latency = "latency" | "rtt" | "pingpong",
    }
}

named_enum! {
    /// How a TCP throughput receiver waits while its socket is empty.
    pub(crate) enum ReceiverWait {
        /// spin on loopback when the sending and the receiving threads fit in the CPUs
        Auto = "auto",
        /// keep reading for up to 200 µs after the last data before sleeping in poll(2)
        Spin = "spin" | "busy",
        /// sleep in a blocking read as soon as the socket is empty, as iperf3's receiver does
        Sleep = "sleep" | "poll",
    }
}

impl ReceiverWait {
    pub(crate) fn auto() -> Self {
        ReceiverWait::Auto
    }

    pub(crate) fn is_auto(&self) -> bool {
        *self == ReceiverWait::Auto
    }
}

/// The parameters of one test, as the client sends them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TestSpec {
    pub proto: Proto,
    pub mode: Mode,
    pub msg_bytes: u64,
    pub streams: u32,
    /// Unmeasured start of a throughput test (TCP slow start), milliseconds.
    pub omit_ms: u64,
    /// Measured window (throughput) or the longest a latency test may last, milliseconds.
    pub duration_ms: u64,
    /// The server sends and the client receives.
    pub reverse: bool,
    /// UDP sending rate per stream in bits per second; `None` is as fast as possible.
    pub rate_bps: Option<u64>,
    /// Latency: round trips per stream after the warm-up; the test then lasts as long as they
    /// take (at most the server's longest test) instead of `duration_ms`. Left out of the
    /// message when `None`, so an older client's hello (which has no such field) is still
    /// accepted; an older server refuses a hello that has it, naming the field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// How the TCP receiver waits on an empty socket; left out when `auto`, for the same
    /// reason as `count`.
    #[serde(
        default = "ReceiverWait::auto",
        skip_serializing_if = "ReceiverWait::is_auto"
    )]
    pub receiver_wait: ReceiverWait,
}

/// Counts of one UDP stream, kept by its receiver over the whole test.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct UdpCounts {
    pub received: u64,
    /// Datagrams that arrived after one with a higher sequence number.
    pub reordered: u64,
    /// Datagrams whose sequence number had already been seen.
    pub duplicates: u64,
    /// RFC 3550 interarrival jitter at the end of the test, nanoseconds.
    pub jitter_ns: f64,
}

/// What the receiver counted in the measured window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Window {
    /// Length of the window on the receiver's clock, nanoseconds.
    pub window_ns: u64,
    /// Payload bytes received in the window, per stream.
    pub stream_bytes: Vec<u64>,
    /// The TCP receiver spun on its empty sockets instead of sleeping (absent from an older
    /// peer's window, which always slept).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub receiver_spun: bool,
    /// How often the TCP receiving threads slept and were woken in the window, all streams
    /// together (their voluntary context switches); absent for UDP and from an older peer,
    /// which ignores it: the wire keeps its version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_wakeups: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Msg {
    /// The server's first line on every control connection.
    Challenge {
        version: u32,
        /// 32 random bytes in hex, new for this connection.
        nonce: String,
        /// Whether the hello must carry `auth`.
        key: bool,
    },
    Hello {
        peakbench: u32,
        test: TestSpec,
        /// With a shared key: [`super::auth::Key::prove`] of the nonce and [`hello_message`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        auth: Option<String>,
    },
    Accepted {
        version: u32,
        ports: Vec<u16>,
        token: u64,
    },
    Refused {
        error: String,
    },
    Ready,
    Window(Window),
    Stop,
    /// Datagrams (UDP) or bytes (TCP) the sender sent, per stream.
    Sent {
        per_stream: Vec<u64>,
        /// From the server (`--reverse`): what its machine showed meanwhile. Absent from a
        /// client's, and from an older server's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        server: Option<PeerEvidence>,
    },
    Final {
        udp: Vec<UdpCounts>,
        /// What the server's machine showed during the test (absent from an older server's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        server: Option<PeerEvidence>,
    },
}

/// The bytes a hello's proof covers: the test as JSON (`TestSpec` refuses unknown fields, so
/// both sides serialize it to the same bytes).
pub(crate) fn hello_message(test: &TestSpec) -> Vec<u8> {
    serde_json::to_vec(test).expect("a test spec serializes")
}

/// Text that came from the peer, made safe to print: control characters (ESC and the C1
/// range included, so no terminal sequence gets through) and bidirectional overrides are
/// written as escapes, and the escaped text is cut at 200 characters.
pub(crate) fn escaped(text: &str) -> String {
    crate::text::printable_at_most(text, 200)
}

/// One control line (without its newline) as a message. The error says what was wrong and
/// shows the start of the line, both [`escaped`]: serde's text quotes the peer's own strings
/// (an unknown field's or variant's name) and reached the server's log and the client's
/// terminal as they were.
pub(crate) fn parse_line(line: &[u8]) -> Result<Msg> {
    serde_json::from_slice(line).map_err(|e| {
        anyhow::anyhow!(
            "malformed control message ({}): {}",
            escaped(&e.to_string()),
            escaped(&String::from_utf8_lossy(&line[..line.len().min(80)]))
        )
    })
}

/// Whether the peer of `stream` has closed (or reset) it, without reading anything.
pub(crate) fn peer_closed(stream: &TcpStream) -> bool {
    use std::os::fd::AsRawFd;
    let mut byte = 0u8;
    // SAFETY: peeks at most one byte into a one-byte buffer, without blocking.
    let n = unsafe {
        libc::recv(
            stream.as_raw_fd(),
            (&mut byte as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    n == 0
        || (n < 0
            && !matches!(
                std::io::Error::last_os_error().raw_os_error(),
                Some(libc::EAGAIN) | Some(libc::EINTR)
            ))
}

/// A control connection: lines out, bounded lines in.
pub(crate) struct Control {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Control {
    pub(crate) fn new(stream: TcpStream) -> Result<Control> {
        let writer = stream.try_clone().context("cloning the control socket")?;
        writer.set_write_timeout(Some(Duration::from_secs(5)))?;
        Ok(Control {
            reader: BufReader::new(stream),
            writer,
        })
    }

    pub(crate) fn stream(&self) -> &TcpStream {
        &self.writer
    }

    pub(crate) fn send(&mut self, msg: &Msg) -> Result<()> {
        let mut line = serde_json::to_vec(msg)?;
        line.push(b'\n');
        self.writer
            .write_all(&line)
            .context("writing on the control connection")
    }

    /// The next message, waiting at most until `deadline`; an error on a closed connection,
    /// an overlong line, invalid JSON or a missed deadline.
    pub(crate) fn recv(&mut self, deadline: Instant) -> Result<Msg> {
        let line = self.read_line(deadline)?;
        parse_line(&line)
    }

    /// Whether the peer closed the connection before `deadline` (anything it sends is dropped).
    pub(crate) fn wait_closed(&mut self, deadline: Instant) -> bool {
        loop {
            match self.read_line(deadline) {
                Ok(_) => continue,
                Err(e) => return e.to_string().contains("closed"),
            }
        }
    }

    fn read_line(&mut self, deadline: Instant) -> Result<Vec<u8>> {
        let mut line = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                bail!("no control message before the deadline");
            }
            self.reader
                .get_ref()
                .set_read_timeout(Some(left.min(Duration::from_millis(200))))?;
            let available = match self.reader.fill_buf() {
                Ok(buf) => buf,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::Interrupted
                    ) =>
                {
                    continue;
                }
                Err(e) => return Err(e).context("reading the control connection"),
            };
            if available.is_empty() {
                bail!("the control connection closed");
            }
            let (used, done) = match available.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (available.len(), false),
            };
            line.extend_from_slice(&available[..used]);
            self.reader.consume(used);
            if line.len() > MAX_LINE {
                bail!("control line longer than {MAX_LINE} bytes");
            }
            if done {
                line.pop();
                return Ok(line);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes from a peer reach a log or an error line escaped.
    #[test]
    fn peer_text_is_escaped_before_it_is_shown() {
        assert_eq!(escaped("busy, try later"), "busy, try later");
        let shown = escaped("\u{1b}[2J\u{1b}]0;owned\u{7}\r\nx\u{9b}31m\u{202e}txt");
        assert!(!shown.chars().any(|c| c.is_control()), "{shown}");
        assert!(!shown.contains('\u{202e}'), "{shown}");
        assert!(shown.contains("\\u{1b}[2J"), "{shown}");
        assert_eq!(escaped(&"y".repeat(500)).chars().count(), 201);
    }

    /// serde's error quotes the peer's field and variant names, so the error of a malformed line
    /// is escaped: it holds no control character and stays short, whatever the line.
    #[test]
    fn a_malformed_lines_error_is_escaped_and_bounded() {
        let field = format!(r"\u001b]52;c;{}\u0007\u001b[2J", "A".repeat(3000));
        for line in [
            format!(r#"{{"type":"hello","peakbench":2,"test":{{"{field}":1}}}}"#),
            format!(r#"{{"type":"{field}"}}"#),
            format!(
                r#"{{"type":"hello","peakbench":2,"test":{{"proto":"{field}","mode":"latency"}}}}"#
            ),
        ] {
            let error = format!("{:#}", parse_line(line.as_bytes()).unwrap_err());
            assert!(error.contains("malformed control message"), "{error}");
            assert!(!error.chars().any(|c| c.is_control()), "{error}");
            assert!(error.contains("\\u{1b}"), "{error}");
            assert!(error.chars().count() < 600, "{}", error.chars().count());
        }
    }
}
