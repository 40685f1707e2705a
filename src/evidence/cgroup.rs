//! This process's cgroup: its CPU quota, cpuset, memory limit, I/O throttles (v1 and v2) and the
//! CFS throttling counters of `cpu.stat`.

use super::{CpuQuota, IoThrottle, RunEvidence, Throttling};

/// Which hierarchy a limit was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CgroupVersion {
    V1,
    V2,
}

/// Reads the limits of this process's cgroup into `evidence`; what cannot be read goes to
/// `unreadable`.
pub(super) fn read_limits(evidence: &mut RunEvidence, unreadable: &mut Vec<String>) {
    let _ = (evidence, unreadable);
}

/// The CFS counters of this process's cgroup now (cumulative).
pub(super) fn read_throttling() -> Option<Throttling> {
    None
}

/// v2 `cpu.max` ("max 100000" or "50000 100000"): the quota, `None` for no limit.
pub fn parse_cpu_max(text: &str) -> Option<CpuQuota> {
    let _ = text;
    None
}

/// v2 `io.max` lines ("8:0 rbps=1048576 wbps=max riops=max wiops=120").
pub fn parse_io_max(text: &str, source: &str) -> Vec<IoThrottle> {
    let _ = (text, source);
    Vec::new()
}

/// One v1 `blkio.throttle.*_device` file ("8:0 1048576" per line) into `throttles`, as the
/// field `field` (`read_bps`, `write_bps`, `read_iops`, `write_iops`).
pub fn parse_blkio_throttle(
    text: &str,
    field: &str,
    source: &str,
    throttles: &mut Vec<IoThrottle>,
) {
    let _ = (text, field, source, throttles);
}
