//! The private caches' bandwidth peaks: the row's bytes per cycle at L1 or L2 (the load and
//! store ports, the L2's fills) × the clock measured on the core × the cores the threads use.
//!
//! What a kernel moves per cycle depends on its mix of loads and stores, so the peak is per
//! access pattern: a kernel of `loads` loads and `stores` stores of one vector each
//! - at L1 takes max(loads × w / load bytes, stores × w / store bytes) cycles per vector;
//! - at L2 moves loads + 2 × stores lines through the L2 (each stored line is fetched for
//!   ownership and written back), at the row's L2 bytes per cycle.
//!
//! The peak counts the bytes the kernel's counting rule counts (loads + stores), so a copy at
//! L1 of a core with 128 bytes of loads and 64 of stores per cycle peaks at 128 counted bytes
//! per cycle (64 read + 64 written).

use super::{CpuFactors, Factor, PeakRef, trim_float};
use crate::sysinfo::SysInfo;
use crate::sysinfo::microarch::cache_bandwidth;

/// A private cache level a working set is held in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrivateLevel {
    L1,
    L2,
}

impl PrivateLevel {
    pub fn name(self) -> &'static str {
        match self {
            PrivateLevel::L1 => "L1",
            PrivateLevel::L2 => "L2",
        }
    }

    /// The level a core's share of a working set stays in: within 3/4 of the cache (the rest
    /// is the stack, the page tables' lines and the ways a set's addresses collide in).
    pub fn holding(info: &SysInfo, bytes_per_core: u64) -> Option<PrivateLevel> {
        let size = |level: u32| {
            info.cpu
                .data_caches()
                .find(|c| c.level == level)
                .map(|c| c.size_bytes)
        };
        let fits = |level: u32| size(level).is_some_and(|s| bytes_per_core <= s / 4 * 3);
        if fits(1) {
            Some(PrivateLevel::L1)
        } else if fits(2) && info.cpu.data_caches().any(|c| c.level > 2) {
            Some(PrivateLevel::L2) // an L2 that is the last level is shared: no private peak
        } else {
            None
        }
    }
}

/// A kernel's accesses per vector: how many loads and stores of one vector width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Accesses {
    pub loads: u32,
    pub stores: u32,
}

impl Accesses {
    /// Counted bytes per cycle of one core at `level`, from the row's bytes per cycle.
    fn bytes_per_cycle(self, level: PrivateLevel, load: f64, store: f64, l2: f64) -> f64 {
        let (l, s) = (f64::from(self.loads), f64::from(self.stores));
        match level {
            PrivateLevel::L1 => (l + s) / (l / load).max(s / store),
            PrivateLevel::L2 => l2 * (l + s) / (l + 2.0 * s),
        }
    }
}

/// The peak of a kernel of `accesses` over a working set held in `level` by `threads` threads:
/// bytes per cycle × the clock × cores, or why there is none.
pub fn cache_peak(
    info: &SysInfo,
    factors: &CpuFactors,
    level: PrivateLevel,
    accesses: Accesses,
    threads: usize,
) -> Result<PeakRef, String> {
    let name = info
        .cpu
        .microarch
        .value
        .as_deref()
        .ok_or("a cache peak: the microarchitecture is unknown")?;
    let row = cache_bandwidth(name)
        .ok_or_else(|| format!("a cache peak: the table has no cache bandwidth for {name}"))?;
    let clock = clock(factors);
    let ghz = clock
        .value
        .ok_or_else(|| format!("a cache peak: no clock ({})", clock.detail))?;
    let cores = threads.min(info.cpu.physical_cores.max(1));
    let per_cycle = accesses.bytes_per_cycle(level, row.l1_load, row.l1_store, row.l2);
    let value = per_cycle * ghz * cores as f64;
    let what = match level {
        PrivateLevel::L1 => format!(
            "{} B of loads and {} B of stores per cycle",
            trim_float(row.l1_load),
            trim_float(row.l1_store)
        ),
        PrivateLevel::L2 => format!(
            "{} B per cycle between L2 and L1, each stored line fetched and written back",
            trim_float(row.l2)
        ),
    };
    Ok(PeakRef {
        value,
        unit: "GB/s".into(),
        source: format!(
            "{} of {name}: {what} ({}); {} loads and {} stores per vector move {} counted B per \
             cycle × {} × {cores} cores = {} GB/s",
            level.name(),
            row.source,
            accesses.loads,
            accesses.stores,
            trim_float((per_cycle * 100.0).round() / 100.0),
            clock.describe("GHz"),
            trim_float(value.round()),
        ),
        pair: None,
    })
}

/// The clock of a cache peak: the one measured on the core (the caches run at the core's
/// clock, turbo included), else the clock the CPU peaks use.
fn clock(factors: &CpuFactors) -> &Factor {
    if factors.measured_ghz.value.is_some() {
        &factors.measured_ghz
    } else {
        factors.effective_clock()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sysinfo::Fact;

    /// The machine of `tests/fixtures/report.json`, told it is a Zen 3 measured at 4 GHz.
    fn zen3() -> (SysInfo, CpuFactors) {
        let doc: serde_json::Value =
            serde_json::from_str(include_str!("../../tests/fixtures/report.json")).unwrap();
        let mut info: SysInfo = serde_json::from_value(doc["host"].clone()).unwrap();
        info.cpu.microarch = Fact::read("zen3".to_string(), "test");
        let mut factors: CpuFactors =
            serde_json::from_value(doc["peaks"]["cpu"]["factors"].clone()).unwrap();
        factors.measured_ghz = Factor::known(4.0, "measured", "test");
        (info, factors)
    }

    /// Each core's share stays in the first private cache it fits 3/4 of; an L2 that is the
    /// last level (shared) gives no private peak; the peak is the ports × clock × cores.
    #[test]
    fn a_share_held_in_l1_or_l2_gets_the_ports_peak_at_the_measured_clock() {
        let (info, factors) = zen3();
        let size = |level| {
            info.cpu
                .data_caches()
                .find(|c| c.level == level)
                .unwrap()
                .size_bytes
        };
        let (l1, l2) = (size(1), size(2));
        assert_eq!(PrivateLevel::holding(&info, l1 / 2), Some(PrivateLevel::L1));
        assert_eq!(PrivateLevel::holding(&info, l1), Some(PrivateLevel::L2));
        assert_eq!(PrivateLevel::holding(&info, l2), None);
        let peak = cache_peak(&info, &factors, PrivateLevel::L1, READ, 2).unwrap();
        let cores = 2.min(info.cpu.physical_cores) as f64;
        assert!((peak.value - 64.0 * 4.0 * cores).abs() < 1e-9, "{peak:?}");
        assert!(peak.source.contains("AMD SOG"), "{}", peak.source);
        let mut unknown = info.clone();
        unknown.cpu.microarch = Fact::unknown("test");
        assert!(cache_peak(&unknown, &factors, PrivateLevel::L1, READ, 1).is_err());
    }

    const READ: Accesses = Accesses {
        loads: 1,
        stores: 0,
    };
    const WRITE: Accesses = Accesses {
        loads: 0,
        stores: 1,
    };
    const COPY: Accesses = Accesses {
        loads: 1,
        stores: 1,
    };
    const TRIAD: Accesses = Accesses {
        loads: 2,
        stores: 1,
    };

    /// The closed forms on Golden Cove server's ports (128 B of loads, 64 of stores, L2 64).
    #[test]
    fn bytes_per_cycle_follow_the_ports_and_the_l2s_lines() {
        let at = |a: Accesses, level| a.bytes_per_cycle(level, 128.0, 64.0, 64.0);
        assert_eq!(at(READ, PrivateLevel::L1), 128.0);
        assert_eq!(at(WRITE, PrivateLevel::L1), 64.0);
        assert_eq!(at(COPY, PrivateLevel::L1), 128.0); // 64 read + 64 written
        assert_eq!(at(TRIAD, PrivateLevel::L1), 192.0); // two loads and the store in a cycle
        assert_eq!(at(READ, PrivateLevel::L2), 64.0);
        assert_eq!(at(WRITE, PrivateLevel::L2), 32.0);
        assert!((at(COPY, PrivateLevel::L2) - 128.0 / 3.0).abs() < 1e-9);
        assert_eq!(at(TRIAD, PrivateLevel::L2), 48.0);
    }
}
