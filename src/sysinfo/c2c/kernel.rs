//! What the kernel and the CPU claim about the topology of the CPUs a matrix measured, to set
//! beside what the matrix shows: sysfs `topology/thread_siblings_list` (SMT siblings),
//! `cache/index3/shared_cpu_list` (who shares the L3), `topology/physical_package_id`
//! (sockets), and CPUID leaf 0xB's logical processors per core.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::Level;
use crate::sysinfo::parse_cpu_list;

/// The kernel's and CPUID's view of the measured CPUs' topology.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelTopology {
    /// SMT sibling groups of two CPUs or more (`thread_siblings_list`), within the measured CPUs.
    pub siblings: Vec<Vec<usize>>,
    /// Groups sharing an L3 (`cache/index3/shared_cpu_list`), when sysfs has an L3.
    pub l3: Vec<Vec<usize>>,
    /// CPUs by package (`physical_package_id`).
    pub sockets: Vec<Vec<usize>>,
    /// CPUID leaf 0xB, level 0: logical processors per core, when the leaf exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpuid_threads_per_core: Option<u32>,
    /// What could not be read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unread: Vec<String>,
}

impl KernelTopology {
    /// Reads the live machine's topology of `cpus`.
    pub fn read(cpus: &[usize]) -> KernelTopology {
        let mut unread = Vec::new();
        let mut groups = |file: &str| -> Vec<Vec<usize>> {
            let mut seen: BTreeSet<Vec<usize>> = BTreeSet::new();
            for &cpu in cpus {
                let path = format!("/sys/devices/system/cpu/cpu{cpu}/{file}");
                match std::fs::read_to_string(&path) {
                    Ok(text) => {
                        let group: Vec<usize> = parse_cpu_list(&text)
                            .into_iter()
                            .filter(|c| cpus.contains(c))
                            .collect();
                        seen.insert(group);
                    }
                    Err(_) if !unread.iter().any(|u: &String| u.ends_with(file)) => {
                        unread.push(format!("cpu{cpu}/{file}"));
                    }
                    Err(_) => {}
                }
            }
            seen.into_iter().filter(|g| g.len() > 1).collect()
        };
        let siblings = groups("topology/thread_siblings_list");
        let l3 = groups("cache/index3/shared_cpu_list");
        let mut by_package: std::collections::BTreeMap<String, Vec<usize>> = Default::default();
        for &cpu in cpus {
            let path = format!("/sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id");
            if let Ok(id) = std::fs::read_to_string(path) {
                by_package
                    .entry(id.trim().to_string())
                    .or_default()
                    .push(cpu);
            }
        }
        KernelTopology {
            siblings,
            l3,
            sockets: by_package.into_values().collect(),
            cpuid_threads_per_core: cpuid_threads_per_core(),
            unread,
        }
    }

    /// Lines that set the matrix's levels beside the kernel's and CPUID's claims, and name
    /// where they disagree.
    pub fn compare(&self, levels: &[Level]) -> Vec<String> {
        let matrix_siblings: &[Vec<usize>] = levels
            .iter()
            .find(|l| l.is_siblings())
            .map_or(&[], |l| &l.groups);
        let mut lines = vec![format!(
            "kernel: siblings {}; L3 shared by {}; sockets {}; CPUID leaf 0xB: {}",
            lists(&self.siblings),
            lists(&self.l3),
            lists(&self.sockets),
            self.cpuid_threads_per_core
                .map_or("not read".to_string(), |t| format!(
                    "{t} thread{} per core",
                    plural(t as usize)
                ))
        )];
        lines.extend(self.disagreements(matrix_siblings));
        lines
    }

    /// Where the matrix's siblings and the kernel's differ, one line each.
    pub fn disagreements(&self, matrix_siblings: &[Vec<usize>]) -> Vec<String> {
        let mut lines = Vec::new();
        let hidden: Vec<&Vec<usize>> = matrix_siblings
            .iter()
            .filter(|g| !self.siblings.contains(g))
            .collect();
        if !hidden.is_empty() {
            lines.push(format!(
                "the matrix shows siblings the kernel does not: {}",
                hidden
                    .iter()
                    .map(|g| super::super::format_cpu_list(g))
                    .collect::<Vec<_>>()
                    .join(" ")
            ));
        }
        let unseen: Vec<&Vec<usize>> = self
            .siblings
            .iter()
            .filter(|g| !matrix_siblings.contains(g))
            .collect();
        if !unseen.is_empty() {
            lines.push(format!(
                "the kernel lists siblings the matrix does not show: {}",
                unseen
                    .iter()
                    .map(|g| super::super::format_cpu_list(g))
                    .collect::<Vec<_>>()
                    .join(" ")
            ));
        }
        lines
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn lists(groups: &[Vec<usize>]) -> String {
    if groups.is_empty() {
        return "none".into();
    }
    groups
        .iter()
        .map(|g| super::super::format_cpu_list(g))
        .collect::<Vec<_>>()
        .join(" ")
}

/// CPUID leaf 0xB, sub-leaf 0 (the SMT level): EBX[15:0] logical processors per core.
fn cpuid_threads_per_core() -> Option<u32> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::__cpuid_count;
        // Leaf 0 gives the highest leaf; 0xB is asked for only when it is at or below it.
        if __cpuid_count(0, 0).eax < 0xB {
            return None;
        }
        let leaf = __cpuid_count(0xB, 0);
        let level_type = (leaf.ecx >> 8) & 0xff;
        let threads = leaf.ebx & 0xffff;
        (level_type == 1 && threads > 0).then_some(threads)
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}
