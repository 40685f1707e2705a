//! The working sets of the memory levels, chosen from the caches sysinfo reads.
//!
//! A cache level's working set is half of each thread's share of it (the cache's size divided
//! by the CPUs sharing it), so that the set stays in that level with room for the code, the
//! stack and the level above; with T threads the whole set is T such shares. DRAM's is 8 × the
//! last-level cache of the whole machine, at least 256 MiB and at most a quarter of the memory
//! available, split among the threads. The sizes chosen are printed and kept in every result.
//!
//! A guest may be shown its host's whole L3 (a 2-vCPU KVM guest of a Golden Cove server Xeon was
//! told of 480 MiB, and its pointer chase read 45 ns at 8 MiB but 160 ns at 32 MiB): an L3 set
//! sized from sysinfo is then in memory. Where the latency probe ([`super::probe`]) finds such a
//! step before sysinfo's L3 ends, the L3 set is the largest working set the chase still found in
//! the cache ([`CacheEdge`]), all the threads' together, as a shared cache's. L1 and L2, private to
//! a core, are taken as sysinfo reads them; a smaller L1 or L2 than reported is not corrected here:
//! its roof and plateau are measured as they are, and the model warns when the plateau is not flat
//! or not distinct from the next level.

use crate::sysinfo::SysInfo;
use crate::units::format_size_approx;

/// One memory level and the bytes each thread works on there.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub(crate) struct MemoryLevel {
    /// "L1", "L2", "L3", "DRAM".
    pub name: String,
    /// Bytes of each thread's working set (a multiple of 4 KiB).
    pub per_thread: u64,
    /// Whether `per_thread` is the whole machine's set divided among the threads (DRAM), so
    /// that it depends on the thread count.
    pub split: bool,
    /// How the size was chosen, for the output.
    pub source: String,
}

impl MemoryLevel {
    /// Each thread's bytes at `threads` threads, a multiple of 4 KiB.
    pub(crate) fn per_thread(&self, threads: usize) -> u64 {
        let bytes = if self.split {
            self.per_thread / threads as u64
        } else {
            self.per_thread
        };
        (bytes / 4096 * 4096).max(4096)
    }
}

/// Where a pointer chase left the cache before the L3 sysinfo reports ends.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CacheEdge {
    /// The largest working set still in the cache (bytes), and its ns per load.
    pub cached: (u64, f64),
    /// The next working set measured, in memory, and its ns per load.
    pub beyond: (u64, f64),
}

impl CacheEdge {
    /// How the L3 set was chosen, for the plan's note and every L3 result.
    fn source(&self, sysinfo_l3: u64) -> String {
        let ((low, low_ns), (high, high_ns)) = (self.cached, self.beyond);
        format!(
            "measured: the chase steps ×{:.1} from {} ({low_ns:.1} ns) to {} ({high_ns:.1} ns); \
             sysinfo's L3 of {} is not all this guest's; the largest set still in the cache, \
             split among the threads",
            high_ns / low_ns,
            format_size_approx(low),
            format_size_approx(high),
            format_size_approx(sysinfo_l3),
        )
    }
}

/// Every level name, fastest first.
pub(crate) const NAMES: [&str; 4] = ["L1", "L2", "L3", "DRAM"];

/// The levels of `host`: each data cache level it reports, then DRAM (`dram`: the whole
/// machine's DRAM set, when the user gives it). `edge`, where the latency probe found the L3
/// ending early, sizes the L3 instead of sysinfo's figure.
pub(crate) fn levels(
    host: &SysInfo,
    dram: Option<u64>,
    edge: Option<&CacheEdge>,
) -> Vec<MemoryLevel> {
    let mut out = Vec::new();
    for level in 1..=3u32 {
        let Some(cache) = host
            .cpu
            .data_caches()
            .filter(|c| c.level == level)
            .max_by_key(|c| c.size_bytes)
        else {
            continue;
        };
        if let (3, Some(edge)) = (level, edge) {
            out.push(MemoryLevel {
                name: "L3".into(),
                per_thread: edge.cached.0,
                split: true,
                source: edge.source(cache.size_bytes),
            });
            continue;
        }
        let share = cache.size_bytes / cache.shared_by_cpus.max(1) as u64;
        out.push(MemoryLevel {
            name: format!("L{level}"),
            per_thread: share / 2,
            split: false,
            source: format!(
                "half of each thread's share of L{level} ({} shared by {} CPU(s))",
                format_size_approx(cache.size_bytes),
                cache.shared_by_cpus.max(1)
            ),
        });
    }
    let total_llc: u64 = host
        .cpu
        .data_caches()
        .filter(|c| c.level >= 2)
        .map(|c| c.size_bytes * c.instances.max(1) as u64)
        .max()
        .unwrap_or(0);
    let available = host.memory.available_bytes;
    let (bytes, source) = match dram {
        Some(bytes) => (bytes, "--dram-size".to_string()),
        None => {
            let wanted = (8 * total_llc).max(256 << 20);
            if available > 0 && wanted > available / 4 {
                (
                    available / 4,
                    "a quarter of the memory available (8 × the last-level caches did not fit)"
                        .to_string(),
                )
            } else {
                (
                    wanted,
                    format!(
                        "8 × the last-level caches ({}), at least 256 MiB, split among the threads",
                        format_size_approx(total_llc)
                    ),
                )
            }
        }
    };
    out.push(MemoryLevel {
        name: "DRAM".into(),
        per_thread: bytes,
        split: true,
        source,
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Context;

    #[test]
    fn the_fixture_machine_gets_a_level_per_cache_and_dram() {
        let ctx = Context::fixture();
        let levels = levels(&ctx.host, None, None);
        let names: Vec<&str> = levels.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names.last(), Some(&"DRAM"));
        for l in &levels {
            for t in [1, 2] {
                assert_eq!(l.per_thread(t) % 4096, 0, "{l:?}");
            }
        }
        // Each cache level is half a thread's share of it, whatever the thread count.
        let l1 = ctx.host.cpu.data_caches().find(|c| c.level == 1).unwrap();
        let expected = l1.size_bytes / l1.shared_by_cpus as u64 / 2 / 4096 * 4096;
        assert_eq!(levels[0].per_thread(2), expected.max(4096));
        let dram = levels.last().unwrap();
        assert!(dram.per_thread(1) - dram.per_thread(2) * 2 < 2 * 4096);
        // A given DRAM size is kept.
        let given = super::levels(&ctx.host, Some(64 << 20), None);
        assert_eq!(given.last().unwrap().per_thread(1), 64 << 20);
    }

    /// A 2-vCPU KVM guest of a Golden Cove server Xeon, shown its host's 480 MiB L3, whose chase
    /// stepped from 8 MiB to 16 MiB: its L3 set is the 8 MiB still in the cache, split among the
    /// threads, and says where it came from.
    #[test]
    fn a_measured_edge_sizes_the_l3_as_a_shared_set() {
        let mut host = Context::fixture().host;
        let l3 = host.cpu.caches.iter_mut().find(|c| c.level == 3).unwrap();
        l3.size_bytes = 480 << 20;
        let edge = CacheEdge {
            cached: (8 << 20, 45.0),
            beyond: (16 << 20, 160.0),
        };
        let sized = levels(&host, None, Some(&edge));
        let l3 = sized.iter().find(|l| l.name == "L3").unwrap();
        assert_eq!((l3.per_thread(1), l3.per_thread(2)), (8 << 20, 4 << 20));
        assert_eq!(
            l3.source,
            "measured: the chase steps ×3.6 from 8 MiB (45.0 ns) to 16 MiB (160.0 ns); sysinfo's \
             L3 of 480 MiB is not all this guest's; the largest set still in the cache, split \
             among the threads"
        );
        // The other levels are sysinfo's, as without an edge.
        let plain = levels(&host, None, None);
        for (a, b) in sized.iter().zip(&plain).filter(|(a, _)| a.name != "L3") {
            assert_eq!(a, b);
        }
        assert_ne!(plain.iter().find(|l| l.name == "L3").unwrap(), l3);
    }
}
