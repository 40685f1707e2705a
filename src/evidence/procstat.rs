//! CPU time from `/proc`: every CPU's (`/proc/stat`), this process's and every other process's
//! (`/proc/PID/stat`), and the CPUs this process may use.

use super::OtherProcess;

/// The CPU time counters of `/proc/stat`'s `cpu` line, seconds, summed over CPUs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CpuTimes {
    pub user_s: f64,
    pub nice_s: f64,
    pub system_s: f64,
    pub steal_s: f64,
}

impl CpuTimes {
    /// Time the CPUs ran processes: user + nice + system.
    pub fn busy_s(&self) -> f64 {
        self.user_s + self.nice_s + self.system_s
    }
}

/// One process's CPU time and name.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcessTimes {
    pub command: String,
    pub cpu_s: f64,
}

pub fn parse_proc_stat(text: &str) -> Option<CpuTimes> {
    let _ = text;
    None
}

/// `/proc/PID/stat`: the command and utime + stime (+ cutime + cstime with `children`).
pub fn parse_pid_stat(text: &str, children: bool) -> Option<ProcessTimes> {
    let _ = (text, children);
    None
}

pub(super) fn read_cpu_times() -> Option<CpuTimes> {
    None
}

pub(super) fn read_own_cpu_s() -> Option<f64> {
    None
}

pub(super) fn read_processes() -> std::collections::BTreeMap<u32, ProcessTimes> {
    Default::default()
}

pub(super) fn top_others(
    before: &std::collections::BTreeMap<u32, ProcessTimes>,
    after: &std::collections::BTreeMap<u32, ProcessTimes>,
    wall_s: f64,
) -> Vec<OtherProcess> {
    let _ = (before, after, wall_s);
    Vec::new()
}

pub(super) fn read_thermal_events() -> Option<u64> {
    None
}

pub(super) fn affinity() -> Vec<usize> {
    Vec::new()
}

pub(super) fn cpus_online() -> usize {
    0
}

pub(super) fn read_thp() -> Option<super::Read<String>> {
    None
}

pub(super) fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}
