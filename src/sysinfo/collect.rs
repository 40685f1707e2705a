//! Reads the inventory of the machine from /proc, /sys, /etc/os-release, CPUID and dmidecode.
//!
//! Each part of the machine has its module: `cpu` (cpuinfo, topology, clocks, caches, NUMA),
//! `memory` (meminfo, the DIMMs), `devices` (disks, NICs) and `os` (os-release, uname, the
//! hypervisor). Their parsers are pure functions over text. Files are read through [`Root`], a
//! directory that stands for "/", so the tests can point the whole collection at a fixture tree.
//! What is not a file (CPUID, the output of dmidecode) comes in through [`Probes`].

use std::path::{Path, PathBuf};
use std::str::FromStr;

use super::{SysInfo, cpu, devices, memory, os};

/// Reads the inventory of this machine. Never fails: what cannot be read is unknown, with the
/// reason.
pub fn collect() -> SysInfo {
    let probes = Probes {
        dmidecode: memory::run_dmidecode(),
        cpuid_hypervisor: os::cpuid_hypervisor_vendor(),
    };
    collect_from(Path::new("/"), &probes)
}

/// What is learnt by running something rather than by reading a file, kept apart so that tests
/// can supply it.
#[derive(Clone, Debug)]
pub struct Probes {
    /// Output of `dmidecode -t 17`, or why it could not be had.
    pub dmidecode: Result<String, String>,
    /// Hypervisor vendor from CPUID leaf 0x40000000, already named by `os::hypervisor_name`.
    pub cpuid_hypervisor: Option<String>,
}

/// Reads the inventory from the tree under `root`, which stands for "/", taking what is not a
/// file from `probes`.
pub fn collect_from(root: &Path, probes: &Probes) -> SysInfo {
    let root = Root(root);
    let processors = root
        .read("/proc/cpuinfo")
        .map(|text| cpu::parse_cpuinfo(&text))
        .unwrap_or_default();
    let (hostname, os_info) = os::read_os(root);
    SysInfo {
        hostname,
        os: os_info,
        hypervisor: os::hypervisor(root, processors.first(), probes.cpuid_hypervisor.as_deref()),
        cpu: cpu::read_cpu(root, &processors),
        memory: memory::read_memory(root, &probes.dmidecode),
        disks: devices::read_disks(root),
        nics: devices::read_nics(root),
    }
}

/// A directory standing for "/": "/" itself on the live machine, a fixture tree in tests.
///
/// Paths are given as they are on a live machine ("/proc/cpuinfo"), and errors name them so.
#[derive(Clone, Copy)]
pub(super) struct Root<'a>(pub(super) &'a Path);

impl Root<'_> {
    fn path(self, abs: &str) -> PathBuf {
        self.0.join(abs.trim_start_matches('/'))
    }

    pub(super) fn exists(self, abs: &str) -> bool {
        self.path(abs).exists()
    }

    /// The whole file, or why it cannot be read.
    pub(super) fn read(self, abs: &str) -> Result<String, String> {
        std::fs::read_to_string(self.path(abs)).map_err(|e| format!("cannot read {abs}: {e}"))
    }

    /// The file trimmed, `None` when it is unreadable or blank.
    pub(super) fn read_trim(self, abs: &str) -> Option<String> {
        let text = self.read(abs).ok()?;
        let text = text.trim();
        (!text.is_empty()).then(|| text.to_string())
    }

    /// The trimmed file parsed as a `T`.
    pub(super) fn parse<T: FromStr>(self, abs: &str) -> Option<T> {
        self.read_trim(abs)?.parse().ok()
    }

    /// Last component of the target of a symbolic link.
    pub(super) fn link_name(self, abs: &str) -> Option<String> {
        let target = std::fs::read_link(self.path(abs)).ok()?;
        Some(target.file_name()?.to_string_lossy().into_owned())
    }

    /// Names of the subdirectories of a directory (following links), sorted.
    pub(super) fn subdirs(self, abs: &str) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.path(abs)) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .filter(|e| e.path().is_dir())
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort();
        names
    }

    /// Subdirectories named `prefix` then a number ("cpu3", "index0", "node1"), with the
    /// number, sorted by number.
    pub(super) fn numbered<N: FromStr + Ord>(self, abs: &str, prefix: &str) -> Vec<(N, String)> {
        let mut found: Vec<(N, String)> = self
            .subdirs(abs)
            .into_iter()
            .filter_map(|name| {
                let number = name.strip_prefix(prefix)?;
                if !number.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                Some((number.parse().ok()?, name))
            })
            .collect();
        found.sort_by(|a, b| a.0.cmp(&b.0));
        found
    }
}

/// Writes a file of a fixture tree at the path it has on a live machine ("/proc/cpuinfo").
#[cfg(test)]
pub(super) fn write_fixture(root: &Path, abs: &str, text: &str) {
    let path = root.join(abs.trim_start_matches('/'));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_everything_is_unknown_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let probes = Probes {
            dmidecode: Err("dmidecode not run in tests".to_string()),
            cpuid_hypervisor: None,
        };
        let info = collect_from(dir.path(), &probes);
        assert_eq!(info.cpu.logical_cpus, 0);
        assert!(info.cpu.microarch.value.is_none());
        assert!(info.cpu.current_ghz.value.is_none());
        assert!(info.hypervisor.value.is_none());
        assert!(info.os.distribution.value.is_none());
        assert!(info.disks.is_empty() && info.nics.is_empty());
        assert_eq!(info.memory.total_bytes, 0);
    }
}
