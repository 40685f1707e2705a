//! What a node had when its baseline was learned, item by item, and what it has lost since.
//!
//! A health check exists to catch a node that lost hardware: a CPU taken offline or out of its
//! cpuset, a DIMM gone, a disk or a NIC missing, a link that trained at a lower speed. Such a
//! node runs a smaller plan (fewer threads, no case for the missing disk) and its remaining
//! cases may all pass, so the check compares the inventory itself with the baseline's and fails
//! on every item that shrank, naming it and where it was read. Only losses count: a node with
//! more than its baseline had is not degraded (its all-CPU cases have other ids).
//!
//! The items and the rule for each:
//! - CPUs online (`/sys/devices/system/cpu/online`) and CPUs this process may use (its affinity,
//!   with the cpuset that set it): fewer than the baseline's is a loss;
//! - memory (`MemTotal`, and a cgroup's memory limit below it): more than [`MEMORY_SLACK`] below
//!   the baseline's is a loss (`MemTotal` moves by megabytes between kernels and boots; a
//!   DIMM is gigabytes);
//! - physical disks (virtual ones come and go with containers and tests): one of the baseline's
//!   missing (by name and model), or smaller, is a loss;
//! - physical NICs: one of the baseline's missing (by name), or its link speed lower, is a loss.

use serde::{Deserialize, Serialize};

use crate::evidence::Read;
use crate::result::Report;
use crate::sysinfo::{Fingerprint, format_cpu_list, virtual_disk, virtual_nic};

/// How far memory may fall below the baseline's before it is lost: `MemTotal` moves by a few
/// megabytes between kernels (what the kernel reserves), a DIMM is an eighth or more.
pub(crate) const MEMORY_SLACK: f64 = 0.03;

/// Every kind of [`Loss`], as the check's Prometheus `kind` label names them: items of
/// hardware, and the disk cases' place ([`NO_ROOM`], [`READ_ONLY`]).
pub(crate) const LOSS_KINDS: [&str; 9] = [
    "cpus-online",
    "cpus-allowed",
    "memory",
    "memory-limit",
    "disk",
    "nic",
    "link-speed",
    NO_ROOM,
    READ_ONLY,
];

/// The [`Loss`] of room: the place the disk cases' test file goes in has too little free space
/// for it, where the baseline had room. Not hardware, but a node short of it cannot run what
/// its baseline ran.
pub(crate) const NO_ROOM: &str = "disk-space";

/// The [`Loss`] of writes: the directory the disk cases' test file goes in is on a file system
/// mounted read-only (as ext4 remounts itself after an I/O error), where the baseline wrote it.
pub(crate) const READ_ONLY: &str = "read-only";

/// A physical disk of the inventory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct InventoryDisk {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
}

/// A physical NIC of the inventory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct InventoryNic {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// Link speed, Mb/s, where the NIC reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed_mbps: Option<u64>,
}

/// What a node had: its CPUs, memory, disks and NICs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Inventory {
    /// Logical CPUs online.
    pub cpus_online: usize,
    /// The CPUs the process may use (its affinity); empty where unknown.
    #[serde(default)]
    pub cpus_allowed: Vec<usize>,
    /// The cpuset's CPUs, with where they were read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpuset: Option<Read<String>>,
    /// `MemTotal`, bytes.
    pub memory_bytes: u64,
    /// A cgroup's memory limit below `memory_bytes`, with where it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit: Option<Read<u64>>,
    #[serde(default)]
    pub disks: Vec<InventoryDisk>,
    #[serde(default)]
    pub nics: Vec<InventoryNic>,
}

/// One item a node has lost since its baseline.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Loss {
    /// What kind of item: one of [`LOSS_KINDS`].
    pub kind: &'static str,
    /// "1 of 2 CPUs allowed: cpuset 0".
    pub text: String,
    /// Where this machine's figure was read.
    pub source: String,
}

impl Loss {
    /// Whether the item lost is hardware (everything but the disk cases' place).
    pub(crate) fn is_hardware(&self) -> bool {
        self.kind != NO_ROOM && self.kind != READ_ONLY
    }
}

impl Inventory {
    /// The inventory of the machine a results document was measured on.
    pub(crate) fn of(report: &Report) -> Inventory {
        let host = &report.host;
        let evidence = report.evidence.as_ref();
        let cpus_online = evidence
            .map(|e| e.cpus_online)
            .filter(|&n| n > 0)
            .unwrap_or(host.cpu.logical_cpus);
        let disks = host
            .disks
            .iter()
            .filter(|d| !virtual_disk(&d.name))
            .map(|d| InventoryDisk {
                name: d.name.clone(),
                model: d.model.clone(),
                size_bytes: d.size_bytes,
            })
            .collect();
        let nics = host
            .nics
            .iter()
            .filter(|n| !n.loopback && n.driver.as_deref().is_some_and(|d| !virtual_nic(d)))
            .map(|n| InventoryNic {
                name: n.name.clone(),
                driver: n.driver.clone(),
                speed_mbps: n.speed_mbps.value,
            })
            .collect();
        Inventory {
            cpus_online,
            cpus_allowed: evidence.map(|e| e.affinity.clone()).unwrap_or_default(),
            cpuset: evidence.and_then(|e| e.cpuset.clone()),
            memory_bytes: host.memory.total_bytes,
            memory_limit: evidence
                .and_then(|e| e.memory_limit.clone())
                .filter(|l| l.value < host.memory.total_bytes),
            disks,
            nics,
        }
    }

    /// What a baseline saved before inventories were kept knew of its node: its fingerprint's
    /// CPUs online, memory (to the GiB), disks and NIC drivers.
    pub(crate) fn from_fingerprint(fp: &Fingerprint) -> Inventory {
        let disks = fp
            .disks
            .iter()
            .map(|d| {
                let (name, model) = d.split_once('=').unwrap_or((d, "?"));
                InventoryDisk {
                    name: name.into(),
                    model: (model != "?").then(|| model.to_string()),
                    size_bytes: None,
                }
            })
            .collect();
        Inventory {
            cpus_online: fp.cpus as usize,
            cpus_allowed: Vec::new(),
            cpuset: None,
            memory_bytes: fp.memory_gib << 30,
            memory_limit: None,
            disks,
            // The fingerprint keeps drivers, not names: a NIC is known by its driver.
            nics: fp
                .nics
                .iter()
                .map(|d| InventoryNic {
                    name: d.clone(),
                    driver: Some(d.clone()),
                    speed_mbps: None,
                })
                .collect(),
        }
    }

    /// One line for `baseline show`: "2 CPUs online, 2 allowed, 23.4 GiB, disk vda 256 GiB,
    /// NIC eth0 (virtio_net)".
    pub(crate) fn describe(&self) -> String {
        let mut parts = vec![format!("{} CPUs online", self.cpus_online)];
        if !self.cpus_allowed.is_empty() {
            parts.push(format!(
                "{} allowed ({})",
                self.cpus_allowed.len(),
                format_cpu_list(&self.cpus_allowed)
            ));
        }
        parts.push(crate::units::format_size_approx(self.usable_memory()));
        for d in &self.disks {
            parts.push(match d.size_bytes {
                Some(size) => format!("disk {} {}", d.name, crate::units::format_size_approx(size)),
                None => format!("disk {}", d.name),
            });
        }
        for n in &self.nics {
            let speed = n
                .speed_mbps
                .map(|s| format!(" {s} Mb/s"))
                .unwrap_or_default();
            parts.push(format!(
                "NIC {} ({}){speed}",
                n.name,
                n.driver.as_deref().unwrap_or("?")
            ));
        }
        parts.join(", ")
    }

    /// The memory the node may use: `MemTotal`, or a cgroup's limit below it.
    fn usable_memory(&self) -> u64 {
        self.memory_limit
            .as_ref()
            .map_or(self.memory_bytes, |l| l.value.min(self.memory_bytes))
    }

    /// What this inventory has lost against `before` (the baseline's), item by item.
    pub(crate) fn losses(&self, before: &Inventory) -> Vec<Loss> {
        let mut out = self.cpu_losses(before);
        out.extend(self.memory_losses(before));
        out.extend(self.disk_losses(before));
        out.extend(self.nic_losses(before));
        out
    }

    fn cpu_losses(&self, before: &Inventory) -> Vec<Loss> {
        let mut out = Vec::new();
        if self.cpus_online < before.cpus_online {
            out.push(Loss {
                kind: "cpus-online",
                text: format!("{} of {} CPUs online", self.cpus_online, before.cpus_online),
                source: "/sys/devices/system/cpu/online".into(),
            });
        }
        let (now, then) = (self.cpus_allowed.len(), before.cpus_allowed.len());
        if now > 0 && now < then {
            let (by, source) = match &self.cpuset {
                Some(set) => (format!("cpuset {}", set.value), set.source.clone()),
                None => (
                    format!("affinity {}", format_cpu_list(&self.cpus_allowed)),
                    "sched_getaffinity(2)".into(),
                ),
            };
            out.push(Loss {
                kind: "cpus-allowed",
                text: format!("{now} of {then} CPUs allowed: {by}"),
                source,
            });
        }
        out
    }

    fn memory_losses(&self, before: &Inventory) -> Vec<Loss> {
        let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
        let short = |now: u64, then: u64| (now as f64) < then as f64 * (1.0 - MEMORY_SLACK);
        if short(self.memory_bytes, before.memory_bytes) {
            return vec![Loss {
                kind: "memory",
                text: format!(
                    "{:.1} of {:.1} GiB of memory",
                    gib(self.memory_bytes),
                    gib(before.memory_bytes)
                ),
                source: "/proc/meminfo MemTotal".into(),
            }];
        }
        match &self.memory_limit {
            Some(limit) if short(self.usable_memory(), before.usable_memory()) => vec![Loss {
                kind: "memory-limit",
                text: format!(
                    "{:.1} of {:.1} GiB of memory usable: a cgroup limit",
                    gib(self.usable_memory()),
                    gib(before.usable_memory())
                ),
                source: limit.source.clone(),
            }],
            _ => Vec::new(),
        }
    }

    fn disk_losses(&self, before: &Inventory) -> Vec<Loss> {
        let mut out = Vec::new();
        for disk in &before.disks {
            let model = disk.model.as_deref().unwrap_or("no model");
            let here = self
                .disks
                .iter()
                .find(|d| d.name == disk.name && (disk.model.is_none() || d.model == disk.model));
            match here {
                None => out.push(Loss {
                    kind: "disk",
                    text: format!("disk {} ({model}) missing", disk.name),
                    source: "/sys/block".into(),
                }),
                Some(d) => {
                    if let (Some(now), Some(then)) = (d.size_bytes, disk.size_bytes)
                        && now < then
                    {
                        out.push(Loss {
                            kind: "disk",
                            text: format!(
                                "disk {} ({model}) {} of {}",
                                disk.name,
                                crate::units::format_size_approx(now),
                                crate::units::format_size_approx(then)
                            ),
                            source: format!("/sys/block/{}/size", disk.name),
                        });
                    }
                }
            }
        }
        out
    }

    fn nic_losses(&self, before: &Inventory) -> Vec<Loss> {
        let mut out = Vec::new();
        for nic in &before.nics {
            let driver = nic.driver.as_deref().unwrap_or("no driver");
            let here = self
                .nics
                .iter()
                .find(|n| n.name == nic.name || (n.driver == nic.driver && nic.name == driver));
            match here {
                None => out.push(Loss {
                    kind: "nic",
                    text: format!("NIC {} ({driver}) missing", nic.name),
                    source: "/sys/class/net".into(),
                }),
                Some(n) => {
                    if let (Some(now), Some(then)) = (n.speed_mbps, nic.speed_mbps)
                        && now < then
                    {
                        out.push(Loss {
                            kind: "link-speed",
                            text: format!("NIC {} link at {now} of {then} Mb/s", n.name),
                            source: format!("/sys/class/net/{}/speed", n.name),
                        });
                    }
                }
            }
        }
        out
    }

    /// The text fields a baseline file carries, for its check of printable, bounded text;
    /// `None` when a list is longer than a baseline holds.
    pub(crate) fn texts(&self) -> Option<Vec<(String, &str)>> {
        if self.disks.len() > 256 || self.nics.len() > 256 || self.cpus_allowed.len() > 65_536 {
            return None;
        }
        let mut out: Vec<(String, &str)> = Vec::new();
        for (i, d) in self.disks.iter().enumerate() {
            out.push((format!("inventory.disks[{i}].name"), &d.name));
            if let Some(m) = &d.model {
                out.push((format!("inventory.disks[{i}].model"), m));
            }
        }
        for (i, n) in self.nics.iter().enumerate() {
            out.push((format!("inventory.nics[{i}].name"), &n.name));
            if let Some(d) = &n.driver {
                out.push((format!("inventory.nics[{i}].driver"), d));
            }
        }
        for (field, read) in [("cpuset", &self.cpuset)] {
            if let Some(r) = read {
                out.push((format!("inventory.{field}.value"), &r.value));
                out.push((format!("inventory.{field}.source"), &r.source));
            }
        }
        if let Some(l) = &self.memory_limit {
            out.push(("inventory.memory_limit.source".into(), &l.source));
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> Inventory {
        Inventory {
            cpus_online: 2,
            cpus_allowed: vec![0, 1],
            cpuset: Some(Read::new(
                "0-1".into(),
                "/sys/fs/cgroup/cpuset/cpuset.effective_cpus",
            )),
            memory_bytes: 24 << 30,
            memory_limit: None,
            disks: vec![InventoryDisk {
                name: "vda".into(),
                model: Some("QEMU disk".into()),
                size_bytes: Some(256 << 30),
            }],
            nics: vec![InventoryNic {
                name: "eth0".into(),
                driver: Some("mlx5_core".into()),
                speed_mbps: Some(100_000),
            }],
        }
    }

    #[test]
    fn the_same_node_or_a_bigger_one_lost_nothing() {
        assert!(node().losses(&node()).is_empty());
        let mut bigger = node();
        bigger.cpus_online = 4;
        bigger.cpus_allowed = vec![0, 1, 2, 3];
        bigger.memory_bytes = 48 << 30;
        bigger.nics[0].speed_mbps = Some(200_000);
        assert!(bigger.losses(&node()).is_empty());
        // MemTotal a few megabytes lower after a kernel update is the same memory.
        let mut update = node();
        update.memory_bytes -= 40 << 20;
        assert!(update.losses(&node()).is_empty());
    }

    #[test]
    fn a_cpuset_of_one_cpu_is_named_with_its_file() {
        let mut one = node();
        one.cpus_allowed = vec![0];
        one.cpuset = Some(Read::new(
            "0".into(),
            "/sys/fs/cgroup/cpuset/check/cpuset.effective_cpus",
        ));
        let lost = one.losses(&node());
        assert_eq!(lost.len(), 1, "{lost:?}");
        assert_eq!(lost[0].kind, "cpus-allowed");
        assert_eq!(lost[0].text, "1 of 2 CPUs allowed: cpuset 0");
        assert!(lost[0].source.ends_with("check/cpuset.effective_cpus"));
        // An affinity narrowed without a cpuset (taskset) names the affinity.
        one.cpuset = None;
        assert_eq!(
            one.losses(&node())[0].text,
            "1 of 2 CPUs allowed: affinity 0"
        );
    }

    #[test]
    fn each_lost_item_is_named() {
        let mut worn = node();
        worn.cpus_online = 1;
        worn.memory_bytes = 16 << 30;
        worn.disks.clear();
        worn.nics[0].speed_mbps = Some(25_000);
        let texts: Vec<String> = worn.losses(&node()).into_iter().map(|l| l.text).collect();
        assert_eq!(
            texts,
            [
                "1 of 2 CPUs online",
                "16.0 of 24.0 GiB of memory",
                "disk vda (QEMU disk) missing",
                "NIC eth0 link at 25000 of 100000 Mb/s",
            ]
        );
        let mut limited = node();
        limited.memory_limit = Some(Read::new(8 << 30, "/sys/fs/cgroup/memory/x/memory.limit"));
        let lost = limited.losses(&node());
        assert_eq!(lost[0].kind, "memory-limit");
        assert_eq!(
            lost[0].text,
            "8.0 of 24.0 GiB of memory usable: a cgroup limit"
        );
        let mut unplugged = node();
        unplugged.nics.clear();
        assert_eq!(
            unplugged.losses(&node())[0].text,
            "NIC eth0 (mlx5_core) missing"
        );
    }

    #[test]
    fn a_baseline_without_an_inventory_is_compared_by_its_fingerprint() {
        let fp = Fingerprint {
            microarch: "Zen 5".into(),
            cpu_model: "AMD EPYC".into(),
            cpus: 2,
            memory_gib: 24,
            disks: vec!["vda=QEMU disk".into()],
            nics: vec!["mlx5_core".into()],
            kernel_major: "6".into(),
        };
        let old = Inventory::from_fingerprint(&fp);
        assert!(node().losses(&old).is_empty(), "{:?}", node().losses(&old));
        let mut less = node();
        less.cpus_online = 1;
        less.nics.clear();
        let kinds: Vec<&str> = less.losses(&old).iter().map(|l| l.kind).collect();
        assert_eq!(kinds, ["cpus-online", "nic"]);
    }
}
