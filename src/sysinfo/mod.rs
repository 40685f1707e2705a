//! What the machine is: CPU, caches, NUMA, memory, block devices, network interfaces, OS.
//!
//! Every field that can fail to be read is a [`Fact`]: either a value with the place it was read
//! from, or `null` with the reason it could not be read. Nothing here is guessed: a value derived
//! from another one (for example a clock taken from the model string) names that derivation in
//! its source.

pub mod affinity;
pub mod c2c;
pub mod clock;
pub(crate) mod clocks;
mod collect;
mod cpu;
mod devices;
mod fingerprint;
mod memory;
pub(crate) mod microarch;
mod os;
mod root;

pub use collect::{collect, replay};
pub use cpu::{format_cpu_list, parse_cpu_list};
pub use fingerprint::Fingerprint;
pub(crate) use fingerprint::{virtual_disk, virtual_nic};
pub use memory::run_for_at_most;

use serde::{Deserialize, Serialize};

/// A value read from the machine, with where it came from, or the reason it is unknown.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fact<T> {
    /// The value, or `null` when it could not be read.
    pub value: Option<T>,
    /// Where the value was read (a file and field, a command), when there is a value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Why there is no value, when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl<T> Fact<T> {
    pub fn read(value: T, source: impl Into<String>) -> Self {
        Fact {
            value: Some(value),
            source: Some(source.into()),
            reason: None,
        }
    }

    pub fn unknown(reason: impl Into<String>) -> Self {
        Fact {
            value: None,
            source: None,
            reason: Some(reason.into()),
        }
    }

    pub fn as_ref(&self) -> Option<&T> {
        self.value.as_ref()
    }
}

/// The whole inventory of one host.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SysInfo {
    /// Host name from uname.
    pub hostname: String,
    pub os: OsInfo,
    /// Hypervisor vendor (e.g. "KVM") when running virtualised, `null` with a reason otherwise.
    pub hypervisor: Fact<String>,
    pub cpu: CpuInfo,
    pub memory: MemoryInfo,
    /// Block devices from /sys/block (loop, ram and zram devices left out).
    pub disks: Vec<BlockDevice>,
    /// Network interfaces from /sys/class/net, loopback included.
    pub nics: Vec<NetInterface>,
    /// `/proc/sys/kernel/random/boot_id`: two hosts with the same one are one running machine
    /// (network namespaces or containers on one kernel), whose timings are not independent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OsInfo {
    /// Kernel release, e.g. "6.1.0-18-amd64".
    pub kernel: String,
    /// PRETTY_NAME from /etc/os-release.
    pub distribution: Fact<String>,
    /// Machine architecture, e.g. "x86_64".
    pub arch: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CpuInfo {
    /// Vendor id, e.g. "GenuineIntel", "AuthenticAMD".
    pub vendor: String,
    /// Model name as the CPU reports it.
    pub model_name: String,
    /// CPUID family, model and stepping.
    pub family: Option<u32>,
    pub model: Option<u32>,
    pub stepping: Option<u32>,
    /// Microarchitecture told from vendor, family, model and stepping (the name of a row of the
    /// [`microarch`] table), or unknown with the reason.
    pub microarch: Fact<String>,
    /// Number of physical packages.
    pub sockets: usize,
    /// Physical cores over all sockets.
    pub physical_cores: usize,
    /// Logical CPUs online.
    pub logical_cpus: usize,
    /// Logical CPUs per physical core.
    pub threads_per_core: usize,
    /// Whether simultaneous multithreading is active.
    pub smt: bool,
    /// Base (nominal) clock in GHz.
    pub base_ghz: Fact<f64>,
    /// Maximum (turbo) clock in GHz.
    pub max_ghz: Fact<f64>,
    /// Clock the kernel reports now ("cpu MHz"), in GHz.
    pub current_ghz: Fact<f64>,
    /// cpufreq scaling governor of CPU 0.
    pub governor: Fact<String>,
    /// SIMD and related features the kernel reports, in a fixed order (sse2 … amx_tile).
    pub simd: Vec<String>,
    /// Caches, one entry per level and type.
    pub caches: Vec<Cache>,
    /// NUMA nodes.
    pub numa_nodes: Vec<NumaNode>,
}

impl CpuInfo {
    /// The data and unified caches (instruction caches hold no data), in the inventory's order.
    pub fn data_caches(&self) -> impl Iterator<Item = &Cache> {
        self.caches.iter().filter(|c| c.kind != "Instruction")
    }

    /// The size of the largest data cache, the last level; 0 when the inventory has none.
    pub fn last_level_cache_bytes(&self) -> u64 {
        self.data_caches().map(|c| c.size_bytes).max().unwrap_or(0)
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Cache {
    /// 1, 2, 3 …
    pub level: u32,
    /// "Data", "Instruction" or "Unified".
    pub kind: String,
    /// Size of one instance in bytes.
    pub size_bytes: u64,
    /// How many logical CPUs share one instance.
    pub shared_by_cpus: usize,
    /// Number of instances on the machine.
    pub instances: usize,
    /// Line size in bytes.
    pub line_bytes: Option<u64>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NumaNode {
    pub id: u32,
    /// CPU list as the kernel prints it, e.g. "0-1".
    pub cpus: String,
    /// Memory of the node in bytes.
    pub memory_bytes: Option<u64>,
}

/// MemAvailable from /proc/meminfo now (None where it does not say): what a step that is about
/// to take memory checks first.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    memory::parse_meminfo(&text).available_bytes
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MemoryInfo {
    /// MemTotal from /proc/meminfo, bytes.
    pub total_bytes: u64,
    /// MemAvailable from /proc/meminfo, bytes; less where this process's memory cgroup allows
    /// less (what a run may take: every step sizes its buffers from it).
    pub available_bytes: u64,
    /// Where `available_bytes` is not MemAvailable: the cgroup files it was read from and
    /// what /proc/meminfo said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_source: Option<String>,
    /// DIMM inventory (dmidecode type 17 or sysfs EDAC), or unknown with the reason.
    pub dimms: Fact<Vec<Dimm>>,
    /// Populated memory channels, derived from the DIMM inventory.
    pub channels: Fact<u32>,
    /// Configured transfer rate in MT/s, from the DIMM inventory.
    pub mts: Fact<u32>,
    /// Memory type, e.g. "DDR4".
    pub kind: Fact<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Dimm {
    pub locator: String,
    pub kind: Option<String>,
    pub size_bytes: Option<u64>,
    pub speed_mts: Option<u32>,
    pub configured_mts: Option<u32>,
    pub data_width_bits: Option<u32>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BlockDevice {
    /// Kernel name, e.g. "vda", "nvme0n1".
    pub name: String,
    pub model: Option<String>,
    pub size_bytes: Option<u64>,
    pub rotational: Option<bool>,
    pub logical_sector_bytes: Option<u64>,
    pub physical_sector_bytes: Option<u64>,
    /// Block layer queue depth (queue/nr_requests).
    pub queue_depth: Option<u64>,
    /// Active I/O scheduler (the bracketed one in queue/scheduler).
    pub scheduler: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NetInterface {
    pub name: String,
    /// Kernel driver, e.g. "virtio_net"; `null` for virtual interfaces without one.
    pub driver: Option<String>,
    pub mtu: Option<u32>,
    /// Link speed in Mb/s, or unknown with the reason (loopback and many virtual NICs have none).
    pub speed_mbps: Fact<u64>,
    /// operstate, e.g. "up".
    pub state: Option<String>,
    pub loopback: bool,
}
