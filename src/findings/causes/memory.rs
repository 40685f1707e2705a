//! Memory: the cgroup's memory limit against the working set, transparent huge pages, NUMA.

use super::{Candidate, Scene};
use crate::result::{Evidence, Subsystem};
use crate::units::format_size;

/// A working set over this share of what the memory limit leaves is at risk of reclaim.
const NEAR_LIMIT: f64 = 0.8;

/// From this working set on, 4 KiB pages need more TLB entries than any core has.
const TLB_REACH: u64 = 64 << 20;

pub fn causes(s: &Scene, out: &mut Vec<Candidate>) {
    if s.r.subsystem != Subsystem::Memory {
        return;
    }
    let set = s.r.params.working_set_bytes.unwrap_or(0);
    limit(s, set, out);
    huge_pages(s, set, out);
    numa(s, out);
}

fn limit(s: &Scene, set: u64, out: &mut Vec<Candidate>) {
    let Some(limit) = s.run.memory_limit.as_ref() else {
        return;
    };
    let used = s.run.memory_usage.as_ref().map_or(0, |u| u.value);
    let left = limit.value.saturating_sub(used);
    if set == 0 || (set as f64) < NEAR_LIMIT * left as f64 {
        return;
    }
    let mut c = Candidate::new(
        "memory-limit",
        format!(
            "the working set of {} is near what the cgroup's memory limit leaves ({} of {}): \
             the kernel reclaims or swaps pages while the case runs",
            format_size(set),
            format_size(left),
            format_size(limit.value)
        ),
        vec![Evidence::new(limit.source.clone(), limit.value.to_string())],
        "raise the memory limit or use a smaller working set (--size)",
    )
    .value(limit.value as f64, "B");
    c.slows = true;
    c.noisy = true;
    out.push(c);
}

fn huge_pages(s: &Scene, set: u64, out: &mut Vec<Candidate>) {
    let Some(thp) = s.run.thp.as_ref() else {
        return;
    };
    let asked = s.r.params.other.get("huge_pages").and_then(|v| v.as_bool());
    if thp.value == "always" || asked == Some(true) || set < TLB_REACH {
        return;
    }
    let mut c = Candidate::new(
        "transparent-huge-pages",
        format!(
            "transparent huge pages are '{}': a {} working set in 4 KiB pages misses the TLB, \
             and each miss walks the page table",
            thp.value,
            format_size(set)
        ),
        vec![Evidence::new(thp.source.clone(), thp.value.clone())],
        "echo always > /sys/kernel/mm/transparent_hugepage/enabled, or use the case's huge \
         page option",
    );
    c.slows = true;
    c.structural = true;
    out.push(c);
}

fn numa(s: &Scene, out: &mut Vec<Candidate>) {
    let nodes = &s.host.cpu.numa_nodes;
    if nodes.len() < 2 || s.r.params.pinned == Some(true) {
        return;
    }
    let mut c = Candidate::new(
        "numa",
        format!(
            "{} NUMA nodes and threads not pinned: a thread may run on one node and touch \
             memory on another",
            nodes.len()
        ),
        vec![Evidence::new(
            "/sys/devices/system/node",
            nodes
                .iter()
                .map(|n| format!("node{}: CPUs {}", n.id, n.cpus))
                .collect::<Vec<_>>()
                .join("; "),
        )],
        "pin the threads with --pin (first touch then places their memory on their node)",
    )
    .value(nodes.len() as f64, "nodes");
    c.slows = true;
    c.structural = true;
    c.noisy = true;
    out.push(c);
}
