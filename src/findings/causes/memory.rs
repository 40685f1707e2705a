//! Memory: the cgroup's memory limit against the working set, transparent huge pages, NUMA,
//! and the memory channels populated against the CPU's.

use super::{Candidate, Scene};
use crate::result::{Evidence, Subsystem};
use crate::units::format_size;

/// A working set over this share of what the memory limit leaves is at risk of reclaim.
const NEAR_LIMIT: f64 = 0.8;

/// From this working set on, 4 KiB pages need more TLB entries than any core has.
const TLB_REACH: u64 = 64 << 20;

pub(super) fn causes(s: &Scene, out: &mut Vec<Candidate>) {
    if s.r.subsystem != Subsystem::Memory {
        return;
    }
    let set = s.r.params.working_set_bytes.unwrap_or(0);
    limit(s, set, out);
    huge_pages(s, set, out);
    numa(s, out);
    channels(s, set, out);
}

/// The memory channels of one socket of `cpu`, and where that comes from: the vendors'
/// specifications by family, for the server parts whose model name says which they are.
/// `None` where the name does not (a guest's "AMD EPYC" alone, an unknown part).
pub(super) fn cpu_channels(cpu: &crate::sysinfo::CpuInfo) -> Option<(u32, &'static str)> {
    let name = cpu.model_name.as_str();
    let number = name
        .split_whitespace()
        .find(|w| w.len() == 4 && w.chars().all(|c| c.is_ascii_digit()));
    if name.contains("EPYC") {
        let number = number?;
        return match (number.as_bytes()[0], number.as_bytes()[3]) {
            (b'7', b'1'..=b'3') => Some((8, "AMD EPYC 7001/7002/7003: 8 DDR4 channels a socket")),
            (b'9', b'4' | b'5') => Some((12, "AMD EPYC 9004/9005: 12 DDR5 channels a socket")),
            (b'8', b'4') => Some((6, "AMD EPYC 8004: 6 DDR5 channels a socket")),
            (b'4', b'4' | b'5') => Some((2, "AMD EPYC 4004/4005: 2 DDR5 channels")),
            _ => None,
        };
    }
    let scalable = ["Platinum", "Gold", "Silver", "Bronze"]
        .iter()
        .any(|tier| name.contains(tier));
    if name.contains("Xeon") && scalable {
        return match cpu.model? {
            85 => Some((
                6,
                "Intel Xeon Scalable 1st/2nd generation: 6 DDR4 channels a socket",
            )),
            106 | 108 => Some((
                8,
                "Intel Xeon Scalable 3rd generation: 8 DDR4 channels a socket",
            )),
            143 | 207 => Some((
                8,
                "Intel Xeon Scalable 4th/5th generation: 8 DDR5 channels a socket",
            )),
            173 => Some((
                12,
                "Intel Xeon 6 (Granite Rapids): 12 DDR5 channels a socket",
            )),
            _ => None,
        };
    }
    if name.contains("Ryzen") || name.contains("Core(TM)") || name.contains("Core Ultra") {
        return Some((2, "desktop and laptop parts: 2 memory channels"));
    }
    None
}

/// Fewer memory channels populated than the CPU has: DRAM bandwidth is the populated
/// channels', a share of what the sockets can draw.
fn channels(s: &Scene, set: u64, out: &mut Vec<Candidate>) {
    let host = &s.report.host;
    let last_level = host
        .cpu
        .caches
        .iter()
        .map(|c| c.size_bytes)
        .max()
        .unwrap_or(0);
    let Some(populated) = host.memory.channels.value else {
        return;
    };
    let Some((per_socket, source)) = cpu_channels(&host.cpu) else {
        return;
    };
    let all = per_socket * host.cpu.sockets.max(1) as u32;
    if populated >= all || set < 4 * last_level || s.r.unit != "GB/s" {
        return;
    }
    let mut c = Candidate::new(
        "memory-channels",
        format!(
            "{populated} of the CPU's {all} memory channels are populated: DRAM bandwidth is at \
             most {populated}/{all} of what the {} can draw",
            if host.cpu.sockets > 1 {
                "sockets"
            } else {
                "socket"
            }
        ),
        vec![
            Evidence::new(
                host.memory
                    .channels
                    .source
                    .clone()
                    .unwrap_or_else(|| "the DIMM table".into()),
                format!("{populated} channels populated"),
            ),
            Evidence::new(source, format!("{all} channels")),
        ],
        "populate one DIMM (or a matched set) in every channel",
    )
    .value(f64::from(populated), "channels");
    c.factor = Some(f64::from(populated) / f64::from(all));
    c.slows = true;
    c.structural = true;
    out.push(c);
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
    // Not the build alone: where the threads land varies from run to run, and a standard tool
    // that pins its own (likwid-bench) does not stand under it.
    c.slows = true;
    c.noisy = true;
    out.push(c);
}
