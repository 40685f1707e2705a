//! The flags of `peakbench net` and `peakbench net serve`.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::limits::{DEFAULT_PORT, MAX_STREAMS};
use super::proto::{Mode, Proto, ReceiverWait};
use super::server::{Cidr, DEFAULT_PER_ADDRESS, DEFAULT_TOTAL_STREAMS};
use crate::options::{
    Defaults, Timing, bit_rate, duration, positive_count, positive_duration, positive_size,
    thread_count,
};

/// A message size, 1 B to 1 MB (each protocol's own limit is checked when planning).
fn message(text: &str) -> Result<u64, String> {
    match positive_size(text)? {
        m if m > 1_000_000 => Err(format!(
            "{m} B is more than 1 MB, the largest message: give e.g. 1MB"
        )),
        m => Ok(m),
    }
}

/// The defaults of `net`: 2 s per repetition after the omitted start (`--omit`), long enough
/// for TCP's window to settle on loopback and a LAN. Its threads are streams (`-P`).
#[derive(Debug, Clone)]
pub(crate) struct NetDefaults;

impl Defaults for NetDefaults {
    const DURATION: &'static str = "2s";
}

#[derive(Args, Debug)]
pub(crate) struct NetArgs {
    /// The server, HOST[:PORT] (a 'peakbench net serve' there); without it a loopback server on 127.0.0.1 that peakbench starts as a child process
    #[arg(long, short = 's', value_name = "HOST[:PORT]")]
    pub server: Option<String>,
    /// Protocols (list)
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        ignore_case = true,
        default_value = "tcp"
    )]
    pub proto: Vec<Proto>,
    /// Modes (list)
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        ignore_case = true,
        default_value = "throughput,latency"
    )]
    pub mode: Vec<Mode>,
    /// Message sizes (list), 1 B to 1 MB for TCP, up to 65507 B for UDP (default: TCP 128KiB, UDP 1470, latency 1)
    #[arg(long, short = 'm', value_name = "LIST", value_delimiter = ',', value_parser = message)]
    pub msg: Option<Vec<u64>>,
    /// Parallel streams (connections, each on its own thread), list
    #[arg(long, short = 'P', value_name = "LIST", value_delimiter = ',', default_value = "1", value_parser = thread_count)]
    pub streams: Vec<usize>,
    #[command(flatten)]
    pub timing: Timing<NetDefaults>,
    /// Round trips per stream and repetition for latency (instead of --duration)
    #[arg(long, value_name = "N", value_parser = positive_count)]
    pub count: Option<u64>,
    /// The server sends and this side receives
    #[arg(long, short = 'R')]
    pub reverse: bool,
    /// UDP sending rates per stream in bits per second (list; decimal prefixes as iperf3's -b:
    /// 100K, 500M, 1G, 2.5G, 1Gbit, 500Mbit/s): the loss against the offered rate; unlimited
    /// without it
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = bit_rate)]
    pub rate: Vec<u64>,
    /// Unmeasured start of each throughput repetition (TCP slow start)
    #[arg(long, default_value = "1s", value_name = "DURATION", value_parser = duration)]
    pub omit: Duration,
    /// How the TCP throughput receiver waits on an empty socket: spin (reads on for 200 µs
    /// before sleeping), sleep (in a blocking read at once, as iperf3), auto (spin when the receiving
    /// and the sending threads of a loopback test fit in the CPUs; else sleep)
    #[arg(long, value_name = "WAIT", ignore_case = true, default_value = "auto")]
    pub receiver_wait: ReceiverWait,
    /// The server's shared key, a file of at least 16 bytes readable by you alone (else $PEAKBENCH_KEY_FILE)
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub(crate) struct ServeArgs {
    /// Address to listen on (IPv4 or IPv6, e.g. 0.0.0.0 or ::)
    #[arg(long, default_value = "0.0.0.0", value_name = "ADDR")]
    pub bind: IpAddr,
    /// Control port
    #[arg(long, short = 'p', default_value_t = DEFAULT_PORT, value_name = "PORT")]
    pub port: u16,
    /// Serve only clients that hold this shared key, a file of at least 16 bytes readable by you alone (else $PEAKBENCH_KEY_FILE)
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// Serve only these client addresses (list of ADDRESS or ADDRESS/PREFIX); default: every address
    #[arg(long, value_name = "CIDR", value_delimiter = ',')]
    pub allow: Vec<Cidr>,
    /// Tests one client address (IPv6: one /64) may run at once
    #[arg(long, value_name = "N", default_value_t = DEFAULT_PER_ADDRESS as u64, value_parser = positive_count)]
    pub max_per_address: u64,
    /// Streams of all the tests running at once (each a thread and a socket or two)
    #[arg(long, value_name = "N", default_value_t = DEFAULT_TOTAL_STREAMS, value_parser = positive_count)]
    pub max_total_streams: u64,
    /// Buffer memory of all the tests running at once (each stream counts its message, at least 128KiB)
    #[arg(long, value_name = "SIZE", default_value = "1GiB", value_parser = positive_size)]
    pub max_buffers: u64,
    /// Longest test a client may ask for (omit + duration), at most 600s
    #[arg(long, value_name = "DURATION", default_value = "600s", value_parser = positive_duration)]
    pub max_duration: Duration,
    /// Most streams in one test, at most 128
    #[arg(long, value_name = "N", default_value_t = MAX_STREAMS as u64, value_parser = positive_count)]
    pub max_streams: u64,
    /// Fastest UDP rate per stream a client may ask for, in bits per second as --rate (e.g. 100M, 1Gbit); unlimited without it
    #[arg(long, value_name = "BITS", value_parser = bit_rate)]
    pub max_rate: Option<u64>,
    /// Print "port N" on stdout once listening, log nothing (the loopback child of `net`)
    #[arg(long, hide = true)]
    pub announce: bool,
    /// Read the key as one hex line on stdin (the loopback child of `net`)
    #[arg(long, hide = true, requires = "announce", conflicts_with = "key")]
    pub key_stdin: bool,
}
