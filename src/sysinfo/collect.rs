//! Reads the inventory of the machine from /proc, /sys, /etc/os-release, CPUID and dmidecode.
//!
//! Each part of the machine has its module: `cpu` (cpuinfo, topology, clocks, caches, NUMA),
//! `memory` (meminfo, the DIMMs), `devices` (disks, NICs) and `os` (os-release, uname, the
//! hypervisor). Their parsers are pure functions over text. Files are read through [`Root`], a
//! directory that stands for "/" ([`super::root`]), so the tests can point the whole collection
//! at a fixture tree.
//! What is not a file (CPUID, the output of dmidecode) comes in through [`ToolOutputs`].

use std::path::Path;

use super::root::Root;
use super::{SysInfo, cpu, devices, memory, os};

/// Reads the inventory of this machine. Never fails: what cannot be read is unknown, with the
/// reason.
pub fn collect() -> SysInfo {
    let probes = ToolOutputs {
        dmidecode: memory::run_dmidecode(),
        cpuid_hypervisor: os::cpuid_hypervisor_vendor(),
    };
    collect_from(Path::new("/"), &probes)
}

/// What is learnt by running something rather than by reading a file, kept apart so that tests
/// can supply it.
#[derive(Clone, Debug)]
pub(super) struct ToolOutputs {
    /// Output of `dmidecode -t 17`, or why it could not be had.
    pub dmidecode: Result<String, String>,
    /// Hypervisor vendor from CPUID leaf 0x40000000, already named by `os::hypervisor_name`.
    pub cpuid_hypervisor: Option<String>,
}

/// Reads the inventory from the tree under `root`, which stands for "/", taking what is not a
/// file from `probes`.
pub(super) fn collect_from(root: &Path, probes: &ToolOutputs) -> SysInfo {
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
        boot_id: root.read_trim("/proc/sys/kernel/random/boot_id"),
    }
}

/// The inventory of a machine read off earlier into a folder (`tests/fixtures/machines/*`, as
/// `bench/read-machine.sh` writes it: `cpuinfo.txt`, `meminfo.txt`, `lscpu.json`,
/// `sys/cpu0-cache/indexN/`), or of a folder laid out as "/" is. The fixture's files are laid
/// into a temporary tree at their live paths, and the inventory is read from it as from "/";
/// nothing of this machine is read.
pub fn replay(dir: &Path) -> Result<SysInfo, String> {
    if !dir.is_dir() {
        return Err(format!("{} is not a directory", dir.display()));
    }
    let cpuid_hypervisor = std::fs::read_to_string(dir.join("lscpu.json"))
        .ok()
        .and_then(|text| lscpu_field(&text, "Hypervisor vendor:"));
    let probes = ToolOutputs {
        dmidecode: Err(format!("replayed from {}: no dmidecode", dir.display())),
        cpuid_hypervisor,
    };
    if !dir.join("cpuinfo.txt").exists() {
        return Ok(collect_from(dir, &probes));
    }
    let tree = tempfile::tempdir().map_err(|e| format!("a temporary directory: {e}"))?;
    let lay = |from: &Path, to: &str| -> Result<(), String> {
        let target = tree.path().join(to);
        std::fs::create_dir_all(target.parent().expect("a live path has a parent"))
            .and_then(|()| std::fs::copy(from, &target).map(drop))
            .map_err(|e| format!("{}: {e}", from.display()))
    };
    lay(&dir.join("cpuinfo.txt"), "proc/cpuinfo")?;
    if dir.join("meminfo.txt").exists() {
        lay(&dir.join("meminfo.txt"), "proc/meminfo")?;
    }
    let caches = dir.join("sys/cpu0-cache");
    for index in std::fs::read_dir(&caches).into_iter().flatten().flatten() {
        for file in std::fs::read_dir(index.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let to = format!(
                "sys/devices/system/cpu/cpu0/cache/{}/{}",
                index.file_name().to_string_lossy(),
                file.file_name().to_string_lossy()
            );
            lay(&file.path(), &to)?;
        }
    }
    Ok(collect_from(tree.path(), &probes))
}

/// The `data` of the field named `name` in `lscpu -J`'s output.
fn lscpu_field(text: &str, name: &str) -> Option<String> {
    let doc: serde_json::Value = serde_json::from_str(text).ok()?;
    doc["lscpu"].as_array()?.iter().find_map(|entry| {
        (entry["field"].as_str()? == name).then(|| entry["data"].as_str().map(str::to_string))?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_everything_is_unknown_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let probes = ToolOutputs {
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
