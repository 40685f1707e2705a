//! What the machine imposes on a run, read while it runs and stored with it: the evidence the
//! findings name their causes from.
//!
//! Two kinds, both plain serde values kept in the results document so that `peakbench explain`
//! judges a stored or imported run without reading the machine again:
//!
//! - [`RunEvidence`], read once when a run starts: this process's cgroup limits (CPU quota,
//!   cpuset, memory limit, I/O throttles; cgroup v1 and v2), the CPUs it may run on, transparent
//!   huge pages, the qdiscs of every interface, the socket buffer and congestion control
//!   sysctls, each block device's queue, and the boot and machine ids;
//! - [`CaseEvidence`], read around each case: what this process and every other one used of
//!   the CPUs while it ran, the time the hypervisor stole, the CFS throttling of this cgroup,
//!   and where the case's traffic went (the test file's device, the route to the server).
//!
//! Every reader is cheap: a few small files, `tc` once per run (and once more per interface
//! with an htb qdisc), `ip` once per network case, each command killed after 2 s. What cannot
//! be read is said in `unreadable`, never guessed.

mod block;
mod cgroup;
mod net;
mod procstat;

use serde::{Deserialize, Serialize};

pub(crate) use procstat::CpuTimes;
// An MPI rank widens its binding before it measures (the cluster's `mpi` feature).
#[cfg(feature = "mpi")]
pub(crate) use procstat::cpus_online;
#[cfg(any(feature = "mpi", test))]
pub(crate) use procstat::widen_affinity;

/// A value read from the machine and where it was read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Read<T> {
    pub value: T,
    /// The file and field, or the command, it came from.
    pub source: String,
}

impl<T> Read<T> {
    pub fn new(value: T, source: impl Into<String>) -> Self {
        Read {
            value,
            source: source.into(),
        }
    }
}

/// What this process's memory cgroup still lets it take, over its group and the group's
/// ancestors, with the limit it comes from; `None` where no limit binds.
pub(crate) fn memory_headroom() -> Option<Read<u64>> {
    cgroup::read_memory_headroom()
}

/// Read once when a run starts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunEvidence {
    /// `1` or `2`: the cgroup hierarchy this process's limits were read from (`null`: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_version: Option<u8>,
    /// The CFS bandwidth limit of this process's cgroup, or of the nearest ancestor that has one
    /// (v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`, v2 `cpu.max`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_quota: Option<Read<CpuQuota>>,
    /// The cpuset's CPUs (v1 `cpuset.effective_cpus`, else `cpuset.cpus`; v2
    /// `cpuset.cpus.effective`) as the kernel writes them, e.g. `0-3,8`; recorded even when it
    /// holds every CPU ([`parse_cpu_list`] counts them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpuset: Option<Read<String>>,
    /// The CPUs `sched_getaffinity` allows this process, in order.
    #[serde(default)]
    pub affinity: Vec<usize>,
    /// The CPUs the launcher had bound this process to before it widened its affinity to
    /// `affinity` (a `cluster run` rank that `mpirun` bound to a core by default); empty when
    /// nothing was widened.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub launch_affinity: Vec<usize>,
    /// Logical CPUs online (`/sys/devices/system/cpu/online`).
    #[serde(default)]
    pub cpus_online: usize,
    /// The memory limit of this process's cgroup in bytes (v1 `memory.limit_in_bytes` when
    /// below the machine's memory, v2 `memory.max` when not `max`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit: Option<Read<u64>>,
    /// Memory the cgroup used when the run started, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_usage: Option<Read<u64>>,
    /// The I/O throttles of this process's cgroup, one per device (v1 `blkio.throttle.*`, v2
    /// `io.max`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub io_throttles: Vec<IoThrottle>,
    /// `/sys/kernel/mm/transparent_hugepage/enabled`: `always`, `madvise` or `never`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thp: Option<Read<String>>,
    /// The root qdisc of every interface of this network namespace, and every qdisc and htb
    /// class that shapes (has a rate), from `tc -j`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub qdiscs: Vec<Qdisc>,
    /// The segmentation and receive offloads of every interface of this network namespace
    /// (the `SIOCETHTOOL` ioctl, as `ethtool -k` reads them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offloads: Vec<Offloads>,
    /// Socket buffer and TCP sysctls by name (`net.core.rmem_max`, `net.core.wmem_max`,
    /// `net.ipv4.tcp_rmem`, `net.ipv4.tcp_wmem`, `net.ipv4.tcp_congestion_control`), as written.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub sysctls: std::collections::BTreeMap<String, String>,
    /// Every block device's queue.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub block_devices: Vec<BlockQueue>,
    /// `/proc/sys/kernel/random/boot_id`: two hosts with the same one are one running machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    /// `/etc/machine-id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_id: Option<String>,
    /// What reading all this cost, seconds.
    #[serde(default)]
    pub read_s: f64,
    /// What could not be read and why (no `tc`, no cgroup mounted, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<String>,
}

/// A CFS bandwidth limit: `quota_us` of CPU time per `period_us` for the whole cgroup.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuQuota {
    pub quota_us: u64,
    pub period_us: u64,
}

impl CpuQuota {
    /// The CPUs' worth of time the quota allows: quota / period.
    pub fn cpus(&self) -> f64 {
        self.quota_us as f64 / self.period_us.max(1) as f64
    }
}

/// The I/O limits of one device in a cgroup; `None` where there is no limit.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IoThrottle {
    /// `major:minor` of the device.
    pub device: String,
    /// The device's name, where `/sys/dev/block/M:m` names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_bps: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_bps: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_iops: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_iops: Option<u64>,
    /// The files the limits were read from.
    pub source: String,
}

/// One qdisc (or an htb class) of one interface, with the rate it holds traffic to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Qdisc {
    pub interface: String,
    /// `tbf`, `htb`, `fq`, `cake`, `fq_codel`, `noqueue`, … (an htb class is `htb-class`).
    pub kind: String,
    /// `1:`, `1:10`, …
    pub handle: String,
    /// `root`, or the parent's handle.
    pub parent: String,
    /// The rate it shapes to, bits per second (tbf `rate`, htb class `ceil`, fq `maxrate`,
    /// cake `bandwidth`); `null` for a qdisc that does not shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_bps: Option<u64>,
    /// The command it was read with, e.g. `tc -j qdisc show dev veth0`.
    pub source: String,
}

/// Whether an interface segments and coalesces in bulk: TCP segmentation (TSO), generic
/// segmentation (GSO) and generic receive (GRO) offload. With them off, the stack handles
/// every MTU-sized packet on its own, which costs a core at a few Gb/s.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Offloads {
    pub interface: String,
    /// `None` where the driver does not answer the query.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tso: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gso: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gro: Option<bool>,
    /// A software interface (no `/sys/class/net/IF/device`: loopback, veth, bridge): it hands
    /// segmentation-offloaded packets on whole, so only TSO and GSO matter on it, not GRO.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub software: bool,
    /// How it was read: `SIOCETHTOOL ETHTOOL_GTSO/GGSO/GGRO on IF` (what `ethtool -k IF` shows).
    pub source: String,
}

impl Offloads {
    /// The offloads that are off and matter on this interface, by their `ethtool -K` names
    /// (`tso`, `gso`, and `gro` on a device).
    pub fn off(&self) -> Vec<&'static str> {
        let gro = if self.software { None } else { self.gro };
        [("tso", self.tso), ("gso", self.gso), ("gro", gro)]
            .into_iter()
            .filter(|(_, on)| *on == Some(false))
            .map(|(name, _)| name)
            .collect()
    }
}

/// One block device's request queue (`/sys/block/NAME/queue/…`) and what it sits on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BlockQueue {
    pub name: String,
    /// `major:minor`.
    pub device: String,
    /// `nr_requests`: the requests the queue holds (the deepest queue depth it can serve).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nr_requests: Option<u64>,
    /// The scheduler in use (the bracketed one of `scheduler`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<String>,
    /// `write back` or `write through` (`queue/write_cache`; older kernels say `write cache`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_cache: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotational: Option<bool>,
    /// What the device is: `virtio`, `loop`, `device-mapper`, `md`, `nvme`, `scsi`, … (from the
    /// name and `device/driver`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The devices under it (`slaves/`), for device-mapper and md.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub below: Vec<String>,
    /// NVMe PCIe link: current and maximum speed and width, e.g. `8.0 GT/s PCIe x4`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<PcieLink>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PcieLink {
    pub current_speed: String,
    pub max_speed: String,
    pub current_width: u32,
    pub max_width: u32,
}

/// Read around one case: from just before it was set up to just after its last repetition.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CaseEvidence {
    /// Wall time between the two readings, seconds.
    pub wall_s: f64,
    /// CPU time of this process and its descendants (a loopback server, a reference tool):
    /// `/proc/self/stat` utime + stime, each live descendant's rise, and what the children
    /// reaped meanwhile used after the first reading (the rise of cutime + cstime less their
    /// time before it), seconds.
    pub own_cpu_s: f64,
    /// CPU time of everything else: user + nice + system of every CPU in `/proc/stat`, less this
    /// process's, seconds (interrupt time is not counted: it serves this process too).
    pub others_cpu_s: f64,
    /// Time the hypervisor ran something else on this guest's CPUs (`/proc/stat` steal), summed
    /// over CPUs, seconds.
    pub steal_s: f64,
    /// The same two times on the CPUs this process may run on, where they are fewer than those
    /// online (a cpuset, `taskset`, a launcher's binding): there others take time from its
    /// threads, elsewhere they do not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_allowed: Option<AllowedCpuTime>,
    /// The other processes that used the most CPU time meanwhile (at most 3, each over 5 % of
    /// one CPU), from `/proc/PID/stat`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub top_others: Vec<OtherProcess>,
    /// CFS throttling of this process's cgroup meanwhile (v1 and v2 `cpu.stat`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttled: Option<Throttling>,
    /// Thermal throttle events of the CPUs meanwhile (`thermal_throttle/*_throttle_count`),
    /// where the kernel has them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thermal_events: Option<u64>,
    /// The block device the case's file is on (`major:minor` of its whole disk).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<Read<String>>,
    /// The interface the case's traffic leaves by (`ip -j route get ADDRESS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<Read<String>>,
    /// What reading all this cost, seconds (both readings, outside the case's timed work).
    #[serde(default)]
    pub watch_s: f64,
    /// The other end of a network case, as its server read it and sent it back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<PeerEvidence>,
    /// Where the first two CPUs the case used sat, read around it (only where the run asked,
    /// as `peakbench check` does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<PlacementProbe>,
}

/// A cache line's round trip between the first two CPUs a case used (A→B→A, the median of
/// 0.1 s of batches, `sysinfo::c2c::pair_round_trip`), just before and just after the case:
/// inside a guest, pinning threads to vCPUs does not pin the vCPUs to host cores, and this is
/// where the host had put them (a few ns: one core's SMT threads; tens: a shared L3; 100 and
/// more: different L3 domains or sockets).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlacementProbe {
    pub cpus: [usize; 2],
    pub before_ns: f64,
    pub after_ns: f64,
}

impl PlacementProbe {
    /// The case's round trip: the larger of the two readings (the farther placement it saw).
    pub fn ns(&self) -> f64 {
        self.before_ns.max(self.after_ns)
    }

    /// Whether the placement changed during the case: the two readings apart by more than
    /// [`PLACEMENT_RATIO`].
    pub fn moved(&self) -> bool {
        !same_placement(self.before_ns, self.after_ns)
    }
}

/// Two round trips within this factor of each other are one placement: between the groups of
/// a matrix the round trip grows several times (about 28 ns in one L3, 130 across two on a
/// Zen 5 guest), within one it moves by a few tens of percent.
pub(crate) const PLACEMENT_RATIO: f64 = 1.6;

/// Whether round trips `a` and `b` (ns) are one placement ([`PLACEMENT_RATIO`]).
pub(crate) fn same_placement(a: f64, b: f64) -> bool {
    a > 0.0 && b > 0.0 && a.max(b) / a.min(b) <= PLACEMENT_RATIO
}

/// [`CaseEvidence::others_cpu_s`] and [`CaseEvidence::steal_s`] on the CPUs this process may
/// run on only: the `/proc/stat` lines of `cpus`, less this process's time (which runs there).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AllowedCpuTime {
    pub cpus: Vec<usize>,
    pub others_cpu_s: f64,
    pub steal_s: f64,
}

/// What a network test's server read on its side and sent back with its last message: the
/// qdiscs that shape its way back to the client (they hold a `--reverse` test, whose data the
/// server sends) and what the CPUs of its machine did meanwhile. It comes from the peer, so the
/// client keeps it only after [`PeerEvidence::sanitized`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PeerEvidence {
    /// The interface the server's traffic to the client leaves by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    /// The qdiscs on that interface that shape (have a rate).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shapers: Vec<Qdisc>,
    /// The server's CPU quota in CPUs, if its cgroup has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_quota: Option<f64>,
    /// Logical CPUs online on the server.
    #[serde(default)]
    pub cpus_online: usize,
    /// Wall time of the server's reading, and the CPU time of the server process, of every
    /// other process and of the hypervisor's steal meanwhile, seconds.
    #[serde(default)]
    pub wall_s: f64,
    #[serde(default)]
    pub own_cpu_s: f64,
    #[serde(default)]
    pub others_cpu_s: f64,
    #[serde(default)]
    pub steal_s: f64,
    /// The server's busiest other processes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub top_others: Vec<OtherProcess>,
    /// The server's boot id: the same as the client's when both run on one machine (loopback,
    /// or another network namespace), whose load the client's own evidence already holds (and
    /// whose "other processes" include the client).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
}

impl PeerEvidence {
    /// Most shapers and processes a peer may report.
    const MAX_ITEMS: usize = 8;
    /// Longest name a peer may report (interfaces are at most 15 bytes, commands 16, a boot
    /// id 36).
    const MAX_NAME: usize = 40;

    /// What the server of a test read on its side between `watch` and now, `client` being the
    /// address its traffic goes to.
    pub fn of_server(watch: CaseWatch, client: std::net::IpAddr) -> PeerEvidence {
        let case = watch.finish(None, Some(&client.to_string()));
        let run = RunEvidence::read_for_peer();
        let route = case.route.map(|r| r.value);
        let shapers = route
            .as_deref()
            .map(|r| run.shapers(r).cloned().collect())
            .unwrap_or_default();
        PeerEvidence {
            route,
            shapers,
            cpu_quota: run.cpu_quota.map(|q| q.value.cpus()),
            cpus_online: run.cpus_online,
            wall_s: case.wall_s,
            own_cpu_s: case.own_cpu_s,
            others_cpu_s: case.others_cpu_s,
            steal_s: case.steal_s,
            top_others: case.top_others,
            boot_id: procstat::read_trimmed("/proc/sys/kernel/random/boot_id"),
        }
    }

    /// The evidence as a peer sent it made safe to keep and print: names printable and short,
    /// lists short, times finite and not negative, the source of each shaper said to be the
    /// server's.
    pub fn sanitized(mut self) -> PeerEvidence {
        let name = |s: &str| {
            let cut: String = s.chars().take(Self::MAX_NAME).collect();
            crate::text::printable(&cut)
        };
        let time = |t: f64| {
            if t.is_finite() && t > 0.0 {
                t.min(1e9)
            } else {
                0.0
            }
        };
        self.route = self.route.as_deref().map(name);
        self.boot_id = self.boot_id.as_deref().map(name);
        self.shapers.truncate(Self::MAX_ITEMS);
        for q in &mut self.shapers {
            q.interface = name(&q.interface);
            q.kind = name(&q.kind);
            q.handle = name(&q.handle);
            q.parent = name(&q.parent);
            q.source = "the server's `tc -j qdisc show`, sent back with its results".to_string();
        }
        self.cpu_quota = self.cpu_quota.filter(|q| q.is_finite() && *q > 0.0);
        self.cpus_online = self.cpus_online.min(1 << 16);
        self.wall_s = time(self.wall_s);
        self.own_cpu_s = time(self.own_cpu_s);
        self.others_cpu_s = time(self.others_cpu_s);
        self.steal_s = time(self.steal_s);
        self.top_others.truncate(Self::MAX_ITEMS);
        for p in &mut self.top_others {
            p.command = name(&p.command);
            p.cpu_s = time(p.cpu_s);
        }
        self
    }

    /// Several tests' evidence as one: the first route and shapers, the times added.
    pub fn merged(all: impl IntoIterator<Item = PeerEvidence>) -> Option<PeerEvidence> {
        all.into_iter().reduce(|mut a, b| {
            if a.route.is_none() {
                a.route = b.route;
                a.shapers = b.shapers;
            }
            a.cpu_quota = a.cpu_quota.or(b.cpu_quota);
            a.cpus_online = a.cpus_online.max(b.cpus_online);
            a.wall_s += b.wall_s;
            a.own_cpu_s += b.own_cpu_s;
            a.others_cpu_s += b.others_cpu_s;
            a.steal_s += b.steal_s;
            if a.top_others.is_empty() {
                a.top_others = b.top_others;
            }
            a
        })
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OtherProcess {
    pub pid: u32,
    /// The command name (`comm`), escaped for a terminal.
    pub command: String,
    pub cpu_s: f64,
}

/// CFS bandwidth throttling of one cgroup over a window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Throttling {
    /// Enforcement periods that elapsed.
    pub periods: u64,
    /// Periods in which the cgroup ran out of quota.
    pub throttled_periods: u64,
    /// Time its threads were held, seconds.
    pub throttled_s: f64,
    /// The file it was read from.
    pub source: String,
}

/// The machine's counters at the start of a case; [`CaseWatch::finish`] reads them again.
pub struct CaseWatch {
    started: std::time::Instant,
    /// What the first reading cost.
    cost: std::time::Duration,
    cpu: Option<CpuTimes>,
    /// The CPUs this process may run on where they are fewer than those online, and their
    /// counters.
    allowed: Option<(Vec<usize>, CpuTimes)>,
    own: Option<(f64, f64)>,
    processes: procstat::Processes,
    throttling: Option<Throttling>,
    thermal: Option<u64>,
}

impl CaseWatch {
    /// Reads the counters now.
    pub fn start() -> CaseWatch {
        let reading = std::time::Instant::now();
        let affinity = procstat::affinity();
        let narrower = !affinity.is_empty() && affinity.len() < procstat::cpus_online();
        let cpus = if narrower { &affinity[..] } else { &[] };
        let (cpu, on_cpus) = procstat::read_cpu_times(cpus);
        let mut watch = CaseWatch {
            started: reading,
            cost: std::time::Duration::ZERO,
            cpu,
            allowed: on_cpus.filter(|_| narrower).map(|t| (affinity.clone(), t)),
            own: procstat::read_own_cpu_s(),
            processes: procstat::read_processes(),
            throttling: cgroup::read_throttling(),
            thermal: procstat::read_thermal_events(),
        };
        watch.cost = reading.elapsed();
        watch
    }

    /// Reads them again and says what happened in between; `path` is the case's file (a disk
    /// case) and `server` the address its traffic goes to (a network case), to find the device
    /// and the route.
    pub fn finish(self, path: Option<&str>, server: Option<&str>) -> CaseEvidence {
        let reading = std::time::Instant::now();
        let wall_s = self.started.elapsed().as_secs_f64();
        let processes = procstat::read_processes();
        // This process's time, and its descendants' (a loopback server, a reference tool):
        // theirs is the case's too, not another process's.
        let own_cpu_s = match (self.own, procstat::read_own_cpu_s()) {
            (Some((a, a_children)), Some((b, b_children))) => {
                (b - a).max(0.0)
                    + procstat::family_cpu_s(&self.processes, &processes, b_children - a_children)
            }
            _ => 0.0,
        };
        let cpus = self.allowed.as_ref().map_or(&[][..], |(cpus, _)| &cpus[..]);
        let (cpu, on_cpus) = procstat::read_cpu_times(cpus);
        let (busy_s, steal_s) = match (&self.cpu, cpu) {
            (Some(a), Some(b)) => (b.busy_s() - a.busy_s(), b.steal_s - a.steal_s),
            _ => (0.0, 0.0),
        };
        let on_allowed = match (self.allowed, on_cpus) {
            (Some((cpus, a)), Some(b)) => Some(AllowedCpuTime {
                cpus,
                others_cpu_s: procstat::to_microseconds(
                    (b.busy_s() - a.busy_s() - own_cpu_s).max(0.0),
                ),
                steal_s: procstat::to_microseconds((b.steal_s - a.steal_s).max(0.0)),
            }),
            _ => None,
        };
        let top_others = procstat::top_others(&self.processes.others, &processes.others, wall_s);
        let throttled = match (self.throttling, cgroup::read_throttling()) {
            (Some(a), Some(b)) => Some(Throttling {
                periods: b.periods.saturating_sub(a.periods),
                throttled_periods: b.throttled_periods.saturating_sub(a.throttled_periods),
                throttled_s: procstat::to_microseconds((b.throttled_s - a.throttled_s).max(0.0)),
                source: b.source,
            }),
            _ => None,
        };
        let thermal_events = match (self.thermal, procstat::read_thermal_events()) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        let device = path.and_then(block::device_of_path);
        let route = server.and_then(net::route_to);
        CaseEvidence {
            wall_s,
            own_cpu_s: procstat::to_microseconds(own_cpu_s),
            others_cpu_s: procstat::to_microseconds((busy_s - own_cpu_s).max(0.0)),
            steal_s: procstat::to_microseconds(steal_s.max(0.0)),
            on_allowed,
            top_others,
            throttled,
            thermal_events,
            device,
            route,
            watch_s: procstat::to_microseconds((self.cost + reading.elapsed()).as_secs_f64()),
            peer: None,
            placement: None,
        }
    }
}

impl RunEvidence {
    /// Reads everything once (a few milliseconds of files, and `tc`).
    pub fn read() -> RunEvidence {
        let reading = std::time::Instant::now();
        let mut unreadable = Vec::new();
        let mut evidence = RunEvidence {
            affinity: procstat::affinity(),
            launch_affinity: procstat::narrowed_at_launch(),
            cpus_online: procstat::cpus_online(),
            thp: procstat::read_thp(),
            sysctls: net::read_sysctls(),
            block_devices: block::read_block_devices(),
            boot_id: procstat::read_trimmed("/proc/sys/kernel/random/boot_id"),
            machine_id: procstat::read_trimmed("/etc/machine-id"),
            ..RunEvidence::default()
        };
        cgroup::read_limits(&mut evidence, &mut unreadable);
        evidence.qdiscs = net::read_qdiscs(&mut unreadable);
        evidence.offloads = net::read_offloads();
        evidence.unreadable = unreadable;
        evidence.read_s = procstat::to_microseconds(reading.elapsed().as_secs_f64());
        evidence
    }

    /// What a network test's server needs of its machine at the end of a test: the CPU quota,
    /// the CPUs online and the qdiscs (no block devices, sysctls or ids).
    fn read_for_peer() -> RunEvidence {
        let mut unreadable = Vec::new();
        let mut evidence = RunEvidence {
            cpus_online: procstat::cpus_online(),
            ..RunEvidence::default()
        };
        cgroup::read_limits(&mut evidence, &mut unreadable);
        evidence.qdiscs = net::read_qdiscs(&mut unreadable);
        evidence
    }

    /// The I/O throttle on the device `major:minor`, if any.
    pub fn io_throttle(&self, device: &str) -> Option<&IoThrottle> {
        self.io_throttles.iter().find(|t| t.device == device)
    }

    /// The block device `major:minor`, if it was read.
    pub fn block_device(&self, device: &str) -> Option<&BlockQueue> {
        self.block_devices.iter().find(|b| b.device == device)
    }

    /// The offloads of `interface`, if they were read.
    pub fn offloads_of(&self, interface: &str) -> Option<&Offloads> {
        self.offloads.iter().find(|o| o.interface == interface)
    }

    /// The qdiscs of `interface` that shape traffic (have a rate).
    pub fn shapers<'a>(&'a self, interface: &'a str) -> impl Iterator<Item = &'a Qdisc> + 'a {
        self.qdiscs
            .iter()
            .filter(move |q| q.interface == interface && q.rate_bps.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_bound_to_one_cpu_is_widened_to_every_cpu_it_may_use() {
        let all = procstat::affinity();
        if all.len() < 2 {
            return; // nothing to widen to
        }
        // A thread of its own: the binding and the widening are the calling thread's.
        std::thread::spawn(move || {
            // SAFETY: cpu_set_t is plain data; the set names one CPU below CPU_SETSIZE.
            let rc = unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(all[1], &mut set);
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
            };
            assert_eq!(rc, 0);
            assert_eq!(widen_affinity(), Some(vec![all[1]]));
            assert_eq!(procstat::affinity(), all);
            assert_eq!(procstat::narrowed_at_launch(), [all[1]]);
            assert_eq!(widen_affinity(), None, "not narrower: nothing to widen");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn run_evidence_of_this_machine_is_read_quickly() {
        let started = std::time::Instant::now();
        let evidence = RunEvidence::read();
        let took = started.elapsed();
        assert!(evidence.cpus_online >= 1);
        assert!(!evidence.affinity.is_empty());
        // The kernel answers sched_getaffinity with the allowed CPUs that are active.
        assert!(
            evidence.affinity.len() <= evidence.cpus_online,
            "{evidence:?}"
        );
        // A correctness bound, not a timing target: the readers are a few files and one `tc`.
        assert!(took < std::time::Duration::from_secs(5), "{took:?}");
        let json = serde_json::to_string(&evidence).unwrap();
        let back: RunEvidence = serde_json::from_str(&json).unwrap();
        assert_eq!(back, evidence);
    }

    #[test]
    fn a_case_watch_sees_this_thread_spin() {
        let watch = CaseWatch::start();
        // 50 ms of this thread's CPU time, however long a loaded machine takes to give it
        // (bounded, so a broken clock cannot hang the test).
        let from = crate::sysinfo::clock::thread_cpu_ns();
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while crate::sysinfo::clock::thread_cpu_ns() - from < 50_000_000
            && std::time::Instant::now() < give_up
        {
            std::hint::black_box(0u64);
        }
        let case = watch.finish(Some("/"), Some("127.0.0.1:9"));
        assert!(case.wall_s >= 0.05, "{case:?}");
        // Ticks are 10 ms: 50 ms of CPU reads as at least 40 ms, 20 ms is a safe floor.
        assert!(case.own_cpu_s > 0.02, "{case:?}");
        assert!(case.others_cpu_s >= 0.0 && case.steal_s >= 0.0);
        assert!(case.top_others.len() <= 3);
        // Without `ip` there is no route (net's own test insists on it).
        if let Some(route) = case.route {
            assert_eq!(route.value, "lo");
        }
    }

    /// Prints what [`RunEvidence::read`] finds here, and a [`CaseWatch`] around 300 ms of
    /// spinning, for a person checking them by hand under a cgroup or in a network namespace:
    /// `cargo test --release --lib evidence::tests::print_run_evidence -- --ignored --nocapture`.
    /// `PEAKBENCH_EVIDENCE_PATH` and `PEAKBENCH_EVIDENCE_SERVER` set the case's file and server
    /// (default `./peakbench-evidence.tmp` and `127.0.0.1:5201`).
    #[test]
    #[ignore = "prints the machine's evidence; run by hand"]
    fn print_run_evidence() {
        let started = std::time::Instant::now();
        let evidence = RunEvidence::read();
        let took = started.elapsed();
        println!("{}", serde_json::to_string_pretty(&evidence).unwrap());
        println!("read in {took:?}");
        let watch_started = std::time::Instant::now();
        let watch = CaseWatch::start();
        let start_took = watch_started.elapsed();
        let until = std::time::Instant::now() + std::time::Duration::from_millis(300);
        let mut spins = 0u64;
        while std::time::Instant::now() < until {
            spins = std::hint::black_box(spins + 1);
        }
        let finish_started = std::time::Instant::now();
        let path = std::env::var("PEAKBENCH_EVIDENCE_PATH")
            .unwrap_or_else(|_| "./peakbench-evidence.tmp".to_string());
        let server = std::env::var("PEAKBENCH_EVIDENCE_SERVER")
            .unwrap_or_else(|_| "127.0.0.1:5201".to_string());
        let case = watch.finish(Some(&path), Some(&server));
        let finish_took = finish_started.elapsed();
        println!("{}", serde_json::to_string_pretty(&case).unwrap());
        println!("CaseWatch::start {start_took:?}, finish {finish_took:?}");
    }
}
