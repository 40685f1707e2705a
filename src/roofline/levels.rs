//! The working sets of the memory levels, chosen from the caches sysinfo reads.
//!
//! A cache level's working set is half of each thread's share of it (the cache's size divided
//! by the CPUs sharing it), so that the set stays in that level with room for the code, the
//! stack and the level above; with T threads the whole set is T such shares. DRAM's is 8 × the
//! last-level cache of the whole machine, at least 256 MiB and at most a quarter of the memory
//! available, split among the threads. The sizes chosen are printed and kept in every result.
//!
//! A level a guest sees less of than sysinfo reports (a VM given 8 MiB of a 32 MiB L3) is not
//! corrected here: its roof and plateau are measured as they are, and the model warns when the
//! plateau is not flat or not distinct from the next level.

use crate::sysinfo::SysInfo;
use crate::units::format_size_approx;

/// One memory level and the bytes each thread works on there.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Level {
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

impl Level {
    /// Each thread's bytes at `threads` threads, a multiple of 4 KiB.
    pub fn per_thread(&self, threads: usize) -> u64 {
        let bytes = if self.split {
            self.per_thread / threads as u64
        } else {
            self.per_thread
        };
        (bytes / 4096 * 4096).max(4096)
    }
}

/// Every level name, fastest first.
pub const NAMES: [&str; 4] = ["L1", "L2", "L3", "DRAM"];

/// The levels of `host`: each data cache level it reports, then DRAM (`dram`: the whole
/// machine's DRAM set, when the user gives it).
pub fn levels(host: &SysInfo, dram: Option<u64>) -> Vec<Level> {
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
        let share = cache.size_bytes / cache.shared_by_cpus.max(1) as u64;
        out.push(Level {
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
    out.push(Level {
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
        let levels = levels(&ctx.host, None);
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
        let given = super::levels(&ctx.host, Some(64 << 20));
        assert_eq!(given.last().unwrap().per_thread(1), 64 << 20);
    }
}
