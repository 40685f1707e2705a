//! One network case: whole tests against the server, and what their outcomes say.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, bail};

use super::client::{self, TestOutcome};
use super::proto::{self, Mode, Proto};
use super::target::NetTarget;
use crate::peak::PeakRef;
use crate::plan::{Case, CaseSpec, Context, Measured, guess};
use crate::result::{BenchResult, Params, RECEIVER_WAKEUPS, Subsystem};
use crate::runner::{self, Round};
use crate::stats::LatencyHistogram;
use crate::units::format_size;

/// One network experiment.
pub(crate) struct NetCase {
    pub spec: proto::TestSpec,
    pub count: Option<u64>,
    /// Stream i runs on the i-th CPU (`--pin`).
    pub pin: bool,
    pub target: Arc<NetTarget>,
}

impl Case for NetCase {
    fn spec(&self) -> CaseSpec {
        let s = &self.spec;
        let mut params = Params {
            protocol: Some(s.proto.name().into()),
            message_bytes: Some(s.msg_bytes),
            streams: Some(s.streams as usize),
            duration_s: Some(s.duration_ms as f64 / 1e3),
            pinned: Some(self.pin),
            ..Params::default()
        };
        params.other.insert("reverse".into(), s.reverse.into());
        params
            .other
            .insert("in_process_server".into(), self.target.in_process().into());
        if self.target.in_process()
            && let Ok(placement) = NetTarget::placement()
        {
            params
                .other
                .insert("loopback_server".into(), placement.name().into());
        }
        if self.target.loopback() {
            params.other.insert("loopback".into(), true.into());
        }
        if s.mode == Mode::Throughput {
            let loopback = self.target.loopback();
            let threads = super::data::DataThreads::for_spec(s, loopback, self.pin);
            params.other.insert(
                "placement".into(),
                threads.describe(s.streams as usize, loopback).into(),
            );
        }
        if s.mode == Mode::Throughput {
            params
                .other
                .insert("omit_s".into(), (s.omit_ms as f64 / 1e3).into());
        }
        if s.mode == Mode::Throughput && s.proto == Proto::Tcp {
            params
                .other
                .insert("receiver_wait".into(), s.receiver_wait.name().into());
        }
        if let Some(rate) = s.rate_bps {
            params.other.insert("rate_bps".into(), rate.into());
        }
        if let Some(count) = self.count {
            params.other.insert("round_trips".into(), count.into());
        }
        CaseSpec {
            id: format!(
                "net-{}-{}-m{}-s{}{}{}",
                s.proto.name(),
                s.mode.name(),
                s.msg_bytes,
                s.streams,
                if s.reverse { "-reverse" } else { "" },
                s.rate_bps.map(|r| format!("-r{r}")).unwrap_or_default()
            ),
            label: format!(
                "net {} {} {} ×{}{}{}",
                s.proto.name(),
                s.mode.name(),
                format_size(s.msg_bytes),
                s.streams,
                if s.reverse { " reverse" } else { "" },
                s.rate_bps
                    .map(|r| format!(" at {r} bit/s"))
                    .unwrap_or_default()
            ),
            subsystem: Subsystem::Network,
            op: format!("{}-{}", s.proto.name(), s.mode.name()),
            params,
        }
    }

    fn estimate(&self, ctx: &Context) -> Duration {
        let per = match self.spec.mode {
            Mode::Throughput => Duration::from_millis(self.spec.omit_ms + self.spec.duration_ms),
            // With a count, a guess for the plan only: 100 µs per round trip.
            Mode::Latency => match self.count {
                Some(n) => guess::sum([
                    ctx.runner.warmup,
                    guess::times(Duration::from_micros(100), n),
                ]),
                None => ctx.runner.warmup + Duration::from_millis(self.spec.duration_ms),
            },
        };
        let warmup = if ctx.runner.warmup.is_zero() {
            Duration::ZERO
        } else {
            ctx.runner.warmup + Duration::from_millis(50)
        };
        let per = guess::sum([per, Duration::from_millis(50)]);
        guess::sum([guess::times(per, ctx.runner.repetitions.into()), warmup])
    }

    fn run(&self, ctx: &Context) -> Result<BenchResult> {
        // The peak first: on loopback it is a memory copy (once per plan), measured before the
        // server starts and outside every timed test.
        let bound = match self.spec.mode {
            Mode::Throughput => self.throughput_bound(ctx)?,
            Mode::Latency => Bound::default(),
        };
        let addr = self.target.addr()?;
        // Each round is one whole test on the server. The warm-up round is an unmeasured test
        // of --warmup's length; every latency test also warms its own connection up for
        // --warmup before timing, as the throughput tests omit their start (--omit).
        let outcomes = runner::repeat(&ctx.runner, ctx.runner.repetitions, |round| {
            let (spec, count) = match round {
                Round::Warmup(budget) => {
                    let mut spec = self.spec.clone();
                    spec.omit_ms = 0;
                    spec.duration_ms = budget.as_millis().max(1) as u64;
                    (spec, None)
                }
                Round::Measured(_) => (self.spec.clone(), self.count),
            };
            client::run_test(
                addr,
                &spec,
                self.target.key(),
                ctx.runner.warmup,
                count,
                self.pin,
            )
        })?;
        let (walls, outcomes): (Vec<Duration>, Vec<TestOutcome>) =
            outcomes.into_iter().map(|o| (o.wall, o.value)).unzip();
        let mut result = match self.spec.mode {
            Mode::Throughput => self.throughput_result(ctx, &outcomes, bound)?,
            Mode::Latency => self.latency_result(ctx, &outcomes)?,
        }
        .walls(walls)
        .param("server", addr.to_string());
        if ctx.runner.reference {
            result = result.reference(super::reference::run(
                &self.spec,
                &self.target,
                self.count,
                ctx,
            )?);
            if self.spec.mode == Mode::Latency {
                // ICMP echo to the same address: the round trip without a TCP/UDP stack.
                result = result.other_reference(super::reference::ping(
                    &self.spec,
                    addr.ip(),
                    self.count,
                )?);
            }
        }
        Ok(result.finish())
    }
}

impl NetCase {
    /// Whether UDP datagrams carry the sequence header (messages of at least its size).
    fn sequenced(&self) -> bool {
        self.spec.msg_bytes >= super::data::UDP_HEADER as u64
    }

    fn measured(
        &self,
        ctx: &Context,
        metric: &str,
        unit: &str,
        counting: String,
        samples: Vec<f64>,
    ) -> Result<Measured> {
        self.spec()
            .measured(&ctx.host.hostname, metric, unit, counting, samples)
    }
    /// The peak of this throughput case: the link's (or on loopback the `--nic-gbps` the user
    /// assumed), else on loopback the memory copy bound ([`super::loopback`]), else none.
    fn throughput_bound(&self, ctx: &Context) -> Result<Bound> {
        if let Some(peak) = nic_peak(ctx, &self.target) {
            return Ok(Bound {
                peak: Some(peak),
                note: None,
            });
        }
        if !self.target.loopback() {
            return Ok(Bound::default());
        }
        Ok(match self.target.bound().peak(ctx)? {
            Ok(peak) => Bound {
                peak: Some(peak),
                note: None,
            },
            Err(note) => Bound {
                peak: None,
                note: Some(note),
            },
        })
    }

    fn throughput_result(
        &self,
        ctx: &Context,
        outcomes: &[TestOutcome],
        bound: Bound,
    ) -> Result<Measured> {
        let streams = self.spec.streams as usize;
        let mut series = StreamRates::of(outcomes, streams, self.spec.proto == Proto::Udp)?;
        let counting = self.throughput_counting(series.spun, outcomes.len());
        let gbps: Vec<f64> = series.total.iter().map(|v| v / 1e3).collect();
        let peer = crate::evidence::PeerEvidence::merged(outcomes.iter().filter_map(|o| match o {
            TestOutcome::Throughput { server, .. } => server.as_deref().cloned(),
            TestOutcome::Latency(_) => None,
        }));
        let mut result = self
            .measured(ctx, "throughput", "Mb/s", counting, series.total.clone())?
            .peak(bound.peak)
            .peer(peer);
        if self.spec.proto == Proto::Tcp {
            result = result.param("receiver_spun", series.spun == outcomes.len());
        }
        let mut result = result.extra("throughput", "Gb/s", &gbps);
        // Every repetition's or none: a mix of peers would mix what the median means.
        if series.wakeups_per_mb.len() == outcomes.len() {
            result = result.extra(RECEIVER_WAKEUPS, "per MB", &series.wakeups_per_mb);
        }
        if streams > 1 {
            for (i, values) in series.per_stream.iter().enumerate() {
                result = result.extra(format!("stream {i} throughput"), "Mb/s", values);
            }
        }
        if !self.sequenced() {
            // Without sequence numbers there is nothing to tell order or timing by.
            series.reordered.clear();
            series.jitter.clear();
        }
        for (metric, unit, values) in [
            ("packets sent", "packets", &series.sent),
            ("packets received", "packets", &series.received),
            ("packets lost", "packets", &series.lost),
            ("loss", "%", &series.loss_pct),
            ("packets reordered", "packets", &series.reordered),
            ("jitter", "µs", &series.jitter),
        ] {
            result = result.extra(metric, unit, values);
        }
        let lossy = (series.loss_pct.iter().any(|&l| l > 1.0) && self.spec.rate_bps.is_none()).then(|| {
            "UDP at unlimited rate loses datagrams at the receiver: give --rate to measure loss at a chosen load".to_string()
        });
        Ok(result.warn(bound.note).warn(lossy))
    }

    /// How a throughput case counts, for its protocol (`spun`: the repetitions of `reps` in
    /// which the TCP receiver spun).
    fn throughput_counting(&self, spun: usize, reps: usize) -> String {
        let receiver = if self.spec.reverse {
            "client"
        } else {
            "server"
        };
        match self.spec.proto {
            Proto::Tcp => format!(
                "payload bytes read by the receiver ({}) in the window from {} ms after the start to the end of --duration, on the receiver's clock; 1 Mb = 10^6 bits; {}-byte writes; {}",
                if self.spec.reverse {
                    "this client"
                } else {
                    "the server"
                },
                self.spec.omit_ms,
                self.spec.msg_bytes,
                receiver_waits(spun, reps)
            ),
            Proto::Udp if !self.sequenced() => format!(
                "UDP payload bytes (whole {}-byte datagrams, below the {}-byte sequence header, so sent without one) received by the {receiver} in the window after {} ms, on its clock; lost = sent − received counts over the whole test only; reordering, duplicates and jitter unknown; 1 Mb = 10^6 bits",
                self.spec.msg_bytes,
                super::data::UDP_HEADER,
                self.spec.omit_ms
            ),
            Proto::Udp => format!(
                "UDP payload bytes (whole {}-byte datagrams, the 20-byte sequence header included) received by the {receiver} in the window after {} ms, on its clock; lost = sent − received over the whole test; 1 Mb = 10^6 bits",
                self.spec.msg_bytes, self.spec.omit_ms
            ),
        }
    }

    fn latency_result(&self, ctx: &Context, outcomes: &[TestOutcome]) -> Result<Measured> {
        let mut merged = LatencyHistogram::new();
        let mut p50 = Vec::new();
        let mut rate = Vec::new();
        let mut lost = Vec::new();
        for outcome in outcomes {
            let TestOutcome::Latency(streams) = outcome else {
                bail!("a latency test returned something else");
            };
            let mut rep = LatencyHistogram::new();
            let mut trips = 0.0;
            for s in streams {
                rep.merge(&s.histogram);
                trips += s.round_trips as f64 / s.elapsed.as_secs_f64().max(1e-9);
            }
            if rep.count() == 0 {
                bail!("no round trip completed: the server does not answer");
            }
            p50.push(rep.quantile(0.5) as f64 / 1e3);
            rate.push(trips);
            lost.push(streams.iter().map(|s| s.lost).sum::<u64>() as f64);
            merged.merge(&rep);
        }
        let counting = format!(
            "round-trip time of one ping-pong: {} B sent, the same {} B echoed back{}, timed on the client from before the send to after the whole reply; value = median over repetitions of each repetition's p50; percentiles from all round trips merged",
            self.spec.msg_bytes,
            self.spec.msg_bytes,
            if self.spec.proto == Proto::Tcp {
                " (TCP_NODELAY)"
            } else {
                ""
            }
        );
        let counting = format!(
            "{counting}; ping-pong throughput = 2 × {} B × round trips ÷ each stream's timed \
             wall time, summed over streams (2 × message ÷ mean RTT for one stream); 1 Mb = \
             10^6 bits",
            self.spec.msg_bytes
        );
        let pingpong_mbps: Vec<f64> = rate
            .iter()
            .map(|trips| 2.0 * self.spec.msg_bytes as f64 * 8.0 * trips / 1e6)
            .collect();
        let mut result = self
            .measured(ctx, "rtt", "µs", counting, p50)?
            .latency([&merged])
            .extra("round trips", "1/s", &rate)
            .extra("ping-pong throughput", "Mb/s", &pingpong_mbps);
        if self.spec.proto == Proto::Udp {
            result = result.extra("requests lost", "packets", &lost);
        }
        Ok(result)
    }
}

/// The peak of a throughput result, or the note that says why it has none.
#[derive(Default)]
struct Bound {
    peak: Option<PeakRef>,
    note: Option<String>,
}

/// The series of a throughput case, one value per repetition: Mb/s in all and per stream, and
/// for UDP the packets and jitter (µs); `spun`: the repetitions whose TCP receiver spun.
#[derive(Default)]
struct StreamRates {
    total: Vec<f64>,
    per_stream: Vec<Vec<f64>>,
    sent: Vec<f64>,
    received: Vec<f64>,
    lost: Vec<f64>,
    loss_pct: Vec<f64>,
    reordered: Vec<f64>,
    jitter: Vec<f64>,
    spun: usize,
    /// TCP: the receivers' wake-ups per MB received in each repetition's window (where the
    /// receiver counted them).
    wakeups_per_mb: Vec<f64>,
}

impl StreamRates {
    fn of(outcomes: &[TestOutcome], streams: usize, udp: bool) -> Result<StreamRates> {
        let mut series = StreamRates {
            per_stream: vec![Vec::new(); streams],
            ..StreamRates::default()
        };
        for outcome in outcomes {
            let TestOutcome::Throughput {
                window,
                udp: counts,
                sent,
                ..
            } = outcome
            else {
                bail!("a throughput test returned something else");
            };
            series.spun += usize::from(window.receiver_spun);
            let secs = window.window_ns as f64 / 1e9;
            let bytes: u64 = window.stream_bytes.iter().sum();
            series.total.push(bytes as f64 * 8.0 / secs / 1e6);
            for (i, b) in window.stream_bytes.iter().enumerate().take(streams) {
                series.per_stream[i].push(*b as f64 * 8.0 / secs / 1e6);
            }
            if let Some(w) = window.receiver_wakeups.filter(|_| bytes > 0) {
                series.wakeups_per_mb.push(w as f64 / (bytes as f64 / 1e6));
            }
            if udp {
                let s: u64 = sent.iter().sum();
                let r: u64 = counts.iter().map(|u| u.received).sum();
                series.sent.push(s as f64);
                series.received.push(r as f64);
                series.lost.push(s.saturating_sub(r) as f64);
                series.loss_pct.push(if s > 0 {
                    100.0 * s.saturating_sub(r) as f64 / s as f64
                } else {
                    0.0
                });
                series
                    .reordered
                    .push(counts.iter().map(|u| u.reordered).sum::<u64>() as f64);
                let j =
                    counts.iter().map(|u| u.jitter_ns).sum::<f64>() / counts.len().max(1) as f64;
                series.jitter.push(j / 1e3);
            }
        }
        Ok(series)
    }
}

/// The peak of the interface the traffic leaves by (on loopback, the `--nic-gbps` the user
/// assumed); `None` when unknown.
fn nic_peak(ctx: &Context, target: &NetTarget) -> Option<PeakRef> {
    if target.loopback() {
        let lo = ctx.peaks.nics.iter().find(|n| n.loopback)?;
        return Some(PeakRef {
            value: lo.gbps.value? * 1e3,
            unit: "Mb/s".into(),
            source: format!(
                "assumed loopback peak ({}: {})",
                lo.gbps.source, lo.gbps.detail
            ),
            pair: None,
        });
    }
    let addr = target.addr().ok()?;
    let probe = std::net::UdpSocket::bind(match addr {
        SocketAddr::V4(_) => "0.0.0.0:0",
        SocketAddr::V6(_) => "[::]:0",
    })
    .ok()?;
    probe.connect(addr).ok()?;
    let local = probe.local_addr().ok()?.ip();
    let name = interface_of(local)?;
    let nic = ctx.peaks.nics.iter().find(|n| n.interface == name)?;
    Some(PeakRef {
        value: nic.gbps.value? * 1e3,
        unit: "Mb/s".into(),
        source: format!(
            "link speed of {name} ({}: {})",
            nic.gbps.source, nic.gbps.detail
        ),
        pair: None,
    })
}

/// The name of the interface that holds `ip`.
fn interface_of(ip: IpAddr) -> Option<String> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills a list we free below; every pointer is checked before use.
    unsafe {
        if libc::getifaddrs(&mut list) != 0 {
            return None;
        }
        let mut found = None;
        let mut cur = list;
        while !cur.is_null() {
            let entry = &*cur;
            if !entry.ifa_addr.is_null() {
                let family = (*entry.ifa_addr).sa_family as i32;
                let addr: Option<IpAddr> = if family == libc::AF_INET {
                    let sin = &*(entry.ifa_addr as *const libc::sockaddr_in);
                    Some(std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)).into())
                } else if family == libc::AF_INET6 {
                    let sin6 = &*(entry.ifa_addr as *const libc::sockaddr_in6);
                    Some(std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr).into())
                } else {
                    None
                };
                if addr == Some(ip) {
                    found = Some(
                        std::ffi::CStr::from_ptr(entry.ifa_name)
                            .to_string_lossy()
                            .into_owned(),
                    );
                    break;
                }
            }
            cur = entry.ifa_next;
        }
        libc::freeifaddrs(list);
        found
    }
}

/// How the TCP receiver waited on an empty socket, for the counting rule: it spun in `spun` of
/// `reps` repetitions (the server decides under `--receiver-wait auto`).
fn receiver_waits(spun: usize, reps: usize) -> String {
    let spin_us = super::data::SPIN.as_micros();
    match spun {
        0 => {
            "the receiver slept in a blocking read whenever its socket was empty, as iperf3's does"
                .into()
        }
        n if n == reps => format!(
            "the receiver read non-blocking and spun for up to {spin_us} µs on an empty socket before sleeping in poll(2) (a CPU per stream; iperf3's sleeps at once: --receiver-wait sleep)"
        ),
        n => format!(
            "the receiver spun for up to {spin_us} µs on an empty socket in {n} of {reps} repetitions and slept in poll(2) in the others"
        ),
    }
}
