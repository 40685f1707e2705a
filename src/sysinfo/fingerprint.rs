//! What makes two runs the same hardware: one fingerprint, which the findings' past, the
//! baselines of `peakbench check`, `compare` and `history` all use.
//!
//! Two hosts are the same hardware when they have the same CPU microarchitecture and model
//! name, the same number of logical CPUs online, the same memory to the GiB, the same physical
//! disks (name and model, sorted), the same physical NICs' drivers (sorted, each once) and the
//! same kernel major version. Virtual devices (loop, ram, device-mapper disks; veth, bridge and
//! tun interfaces) come and go with containers and tests, so they are left out. The kernel counts
//! by its major version only: a minor update or a distribution's rebuild (6.1.0-18 to 6.1.0-21)
//! patches security and drivers without making the machine another one, while a new major
//! version may change the scheduler, the I/O and the network paths the cases measure.

use serde::{Deserialize, Serialize};

use super::SysInfo;

/// Whether a block device is virtual (loop, ram, device-mapper …): it comes and goes with
/// containers and tests, so no fingerprint or inventory counts it.
pub(crate) fn virtual_disk(name: &str) -> bool {
    ["loop", "ram", "zram", "dm-", "nbd", "md"]
        .iter()
        .any(|p| name.starts_with(p))
}

/// Whether a network interface's driver is a virtual one (veth, bridge, tun …).
pub(crate) fn virtual_nic(driver: &str) -> bool {
    matches!(driver, "veth" | "bridge" | "tun" | "dummy" | "ifb")
}

/// What makes two machines the same hardware for a baseline.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// The microarchitecture, e.g. "Zen 3", or "unknown".
    pub microarch: String,
    /// The CPU's model name as it reports it.
    pub cpu_model: String,
    /// Logical CPUs online.
    pub cpus: u64,
    /// Memory, GiB, rounded.
    pub memory_gib: u64,
    /// The physical disks' models, sorted ("name=model").
    pub disks: Vec<String>,
    /// The physical NICs' drivers, sorted, each once.
    pub nics: Vec<String>,
    /// The kernel's major version, e.g. "6".
    pub kernel_major: String,
}

impl Fingerprint {
    /// The fingerprint of `host`.
    pub fn of(host: &SysInfo) -> Fingerprint {
        let mut disks: Vec<String> = host
            .disks
            .iter()
            .filter(|d| !virtual_disk(&d.name))
            .map(|d| format!("{}={}", d.name, d.model.as_deref().unwrap_or("?")))
            .collect();
        disks.sort();
        let mut nics: Vec<String> = host
            .nics
            .iter()
            .filter_map(|n| n.driver.clone())
            .filter(|d| !virtual_nic(d))
            .collect();
        nics.sort();
        nics.dedup();
        Fingerprint {
            microarch: host
                .cpu
                .microarch
                .value
                .clone()
                .unwrap_or_else(|| "unknown".into()),
            cpu_model: host.cpu.model_name.clone(),
            cpus: host.cpu.logical_cpus as u64,
            memory_gib: (host.memory.total_bytes as f64 / f64::from(1u32 << 30)).round() as u64,
            disks,
            nics,
            kernel_major: host.os.kernel.split('.').next().unwrap_or("").to_string(),
        }
    }

    /// The fields that differ from `other`, each as "field (here vs there)".
    pub fn differences(&self, other: &Fingerprint) -> Vec<String> {
        let mut out = Vec::new();
        let mut field = |name: &str, a: String, b: String| {
            if a != b {
                out.push(format!(
                    "{name} ({} vs {})",
                    crate::text::printable_at_most(&a, 60),
                    crate::text::printable_at_most(&b, 60)
                ));
            }
        };
        field("microarch", self.microarch.clone(), other.microarch.clone());
        field("cpu_model", self.cpu_model.clone(), other.cpu_model.clone());
        field("cpus", self.cpus.to_string(), other.cpus.to_string());
        field(
            "memory_gib",
            self.memory_gib.to_string(),
            other.memory_gib.to_string(),
        );
        field("disks", self.disks.join(","), other.disks.join(","));
        field("nics", self.nics.join(","), other.nics.join(","));
        field(
            "kernel_major",
            self.kernel_major.clone(),
            other.kernel_major.clone(),
        );
        out
    }

    /// Whether `self` could be the machine of `baseline` after losing hardware: the same CPU
    /// and kernel, no more CPUs or memory, and no disk or NIC driver the baseline lacked. A
    /// health check judges such a node against that baseline and fails it for what it lost,
    /// instead of finding no baseline for the smaller machine it has become.
    pub fn degraded_from(&self, baseline: &Fingerprint) -> bool {
        let subset = |a: &[String], b: &[String]| a.iter().all(|x| b.contains(x));
        self.microarch == baseline.microarch
            && self.cpu_model == baseline.cpu_model
            && self.kernel_major == baseline.kernel_major
            && self.cpus <= baseline.cpus
            && self.memory_gib <= baseline.memory_gib
            && subset(&self.disks, &baseline.disks)
            && subset(&self.nics, &baseline.nics)
            && self != baseline
    }

    /// A short stable name of the fingerprint (16 hex digits of FNV-1a over its fields): the
    /// file name of its baseline in a directory of baselines.
    pub fn key(&self) -> String {
        let text = format!(
            "{}\n{}\n{}\n{}\n{}\n{}\n{}",
            self.microarch,
            self.cpu_model,
            self.cpus,
            self.memory_gib,
            self.disks.join(","),
            self.nics.join(","),
            self.kernel_major
        );
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in text.bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        format!("{hash:016x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> Fingerprint {
        Fingerprint {
            microarch: "Zen 5".into(),
            cpu_model: "AMD EPYC 9B45".into(),
            cpus: 2,
            memory_gib: 24,
            disks: vec!["vda=QEMU".into(), "vdb=QEMU".into()],
            nics: vec!["virtio_net".into()],
            kernel_major: "6".into(),
        }
    }

    #[test]
    fn a_node_that_lost_hardware_is_degraded_from_its_baseline() {
        let mut lost = node();
        lost.cpus = 1;
        lost.memory_gib = 16;
        lost.disks.pop();
        assert!(lost.degraded_from(&node()));
        // The same node is itself, not degraded; a bigger one or another CPU is other hardware.
        assert!(!node().degraded_from(&node()));
        let mut bigger = node();
        bigger.cpus = 4;
        assert!(!bigger.degraded_from(&node()));
        let mut other = lost.clone();
        other.cpu_model = "AMD EPYC 9654".into();
        assert!(!other.degraded_from(&node()));
        let mut new_disk = lost;
        new_disk.disks.push("nvme0n1=Samsung".into());
        assert!(!new_disk.degraded_from(&node()));
    }
}
