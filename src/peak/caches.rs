//! The caches' bandwidth peaks: the row's bytes per cycle at L1, L2 or L3 (the load and store
//! ports, the L2's fills and write-backs, the L3's per core) × the clock measured on the core ×
//! the cores the threads use.
//!
//! What a kernel moves per cycle depends on its mix of loads and stores, so the peak is per
//! access pattern: a kernel of `loads` loads and `stores` stores of one vector each
//! - at L1 takes max(loads × w / load bytes, stores × w / store bytes) cycles per vector;
//! - at L2 (or L3) fetches loads + stores lines into the level above (each stored line is
//!   fetched for ownership first) and writes `stores` lines back. Where write-backs have a path
//!   of their own (AMD's cores), the slower of the two paths sets the time; where they share the
//!   fills' path (Intel's), both add up on it.
//!
//! The peak counts the bytes the kernel's counting rule counts (loads + stores), so a copy at
//! L1 of a core with 128 bytes of loads and 64 of stores per cycle peaks at 128 counted bytes
//! per cycle (64 read + 64 written).

use super::{ClockPair, CpuFactors, Factor, PeakRef, trim_float};
use crate::sysinfo::SysInfo;
use crate::sysinfo::microarch::cache_bandwidth;

/// The cache level a working set is held in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheLevel {
    L1,
    L2,
    /// The shared last level, where each core's share sweeps past its own L2.
    L3,
}

impl CacheLevel {
    pub fn name(self) -> &'static str {
        match self {
            CacheLevel::L1 => "L1",
            CacheLevel::L2 => "L2",
            CacheLevel::L3 => "L3",
        }
    }

    /// The level a working set of `total` bytes, `bytes_per_core` of it per core, stays in:
    /// - a private level within 3/4 of it (the rest is the stack, the page tables' lines and
    ///   the ways a set's addresses collide in);
    /// - the L3 where each core's share is past its whole L2 (a sequential sweep then misses
    ///   the L2 on every line) and the set fills at most half the L3 sysinfo reports. A guest
    ///   can be shown more L3 than it gets; the findings hold such a set against the run's own
    ///   latency curve, and `roofline` sizes its L3 set from it.
    pub fn holding(info: &SysInfo, bytes_per_core: u64, total: u64) -> Option<CacheLevel> {
        let size = |level: u32| {
            info.cpu
                .data_caches()
                .find(|c| c.level == level)
                .map(|c| c.size_bytes)
        };
        let fits = |level: u32| size(level).is_some_and(|s| bytes_per_core <= s / 4 * 3);
        if fits(1) {
            Some(CacheLevel::L1)
        } else if fits(2) && size(3).is_some() {
            Some(CacheLevel::L2) // an L2 that is the last level is shared: no private peak
        } else if let (Some(l2), Some(l3)) = (size(2), size(3))
            && bytes_per_core > l2
            && total <= l3 / 2
        {
            Some(CacheLevel::L3)
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
    fn bytes_per_cycle(self, level: CacheLevel, row: &Row) -> f64 {
        let (l, s) = (f64::from(self.loads), f64::from(self.stores));
        // Lines into the level above per vector (loads and stores' fetches for ownership),
        // lines written back.
        let lines = |fill: f64, write: f64| {
            let cycles = if write > 0.0 {
                ((l + s) / fill).max(s / write)
            } else {
                (l + 2.0 * s) / fill
            };
            (l + s) / cycles
        };
        match level {
            CacheLevel::L1 => (l + s) / (l / row.l1_load).max(s / row.l1_store),
            CacheLevel::L2 => lines(row.l2, row.l2_write),
            CacheLevel::L3 => lines(row.l3, row.l3_write),
        }
    }
}

/// The row's figures a peak uses.
type Row = crate::sysinfo::microarch::CacheBandwidth;

/// The peak of a kernel of `accesses` over a working set held in `level` by `threads` threads:
/// bytes per cycle × the clock × cores, or why there is none.
pub fn cache_peak(
    info: &SysInfo,
    factors: &CpuFactors,
    level: CacheLevel,
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
    let per_cycle = accesses.bytes_per_cycle(level, &row);
    let value = per_cycle * ghz * cores as f64;
    let paths = |fill: f64, write: f64, from: &str, to: &str| {
        if write > 0.0 {
            format!(
                "{} B per cycle from {from} to {to} and {} B back on a path of their own, each \
                 stored line fetched first",
                trim_float(fill),
                trim_float(write)
            )
        } else {
            format!(
                "{} B per cycle between {from} and {to}, each stored line fetched and written \
                 back on the same path",
                trim_float(fill)
            )
        }
    };
    let what = match level {
        CacheLevel::L1 => format!(
            "{} B of loads and {} B of stores per cycle",
            trim_float(row.l1_load),
            trim_float(row.l1_store)
        ),
        CacheLevel::L2 => paths(row.l2, row.l2_write, "L2", "L1"),
        CacheLevel::L3 => paths(row.l3, row.l3_write, "the L3", "each core's L2"),
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
        // The caches run at the core's clock: the same peak at the base and the turbo clock,
        // and the clock this one stands on, which the findings compare with the clock read
        // right after the case.
        pair: Some(ClockPair {
            used_ghz: Some(clock.clone()),
            ..factors.pair(per_cycle, cores as f64)
        }),
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
        let (l1, l2, l3) = (size(1), size(2), size(3));
        assert_eq!(CacheLevel::holding(&info, l1 / 2, l1), Some(CacheLevel::L1));
        assert_eq!(CacheLevel::holding(&info, l1, 2 * l1), Some(CacheLevel::L2));
        // Between 3/4 of the L2 and all of it, part hits the L2 and part the L3: no level.
        assert_eq!(CacheLevel::holding(&info, l2, 2 * l2), None);
        assert_eq!(
            CacheLevel::holding(&info, 2 * l2, l3 / 2),
            Some(CacheLevel::L3)
        );
        assert_eq!(CacheLevel::holding(&info, 2 * l2, l3), None);
        let peak = cache_peak(&info, &factors, CacheLevel::L1, READ, 2).unwrap();
        let cores = 2.min(info.cpu.physical_cores) as f64;
        assert!((peak.value - 64.0 * 4.0 * cores).abs() < 1e-9, "{peak:?}");
        assert!(peak.source.contains("AMD SOG"), "{}", peak.source);
        let mut unknown = info.clone();
        unknown.cpu.microarch = Fact::unknown("test");
        assert!(cache_peak(&unknown, &factors, CacheLevel::L1, READ, 1).is_err());
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

    /// The closed forms on Golden Cove server's ports (128 B of loads, 64 of stores, L2 64 on
    /// one path, L3 32): a stored line is fetched and written back on the fills' path.
    #[test]
    fn bytes_per_cycle_follow_the_ports_and_the_lines_on_a_shared_path() {
        let row = cache_bandwidth("sapphirerapids").unwrap();
        let at = |a: Accesses, level| a.bytes_per_cycle(level, &row);
        assert_eq!(at(READ, CacheLevel::L1), 128.0);
        assert_eq!(at(WRITE, CacheLevel::L1), 64.0);
        assert_eq!(at(COPY, CacheLevel::L1), 128.0); // 64 read + 64 written
        assert_eq!(at(TRIAD, CacheLevel::L1), 192.0); // two loads and the store in a cycle
        assert_eq!(at(READ, CacheLevel::L2), 64.0);
        assert_eq!(at(WRITE, CacheLevel::L2), 32.0);
        assert!((at(COPY, CacheLevel::L2) - 128.0 / 3.0).abs() < 1e-9);
        assert_eq!(at(TRIAD, CacheLevel::L2), 48.0);
        assert_eq!(at(READ, CacheLevel::L3), 32.0);
        assert_eq!(at(TRIAD, CacheLevel::L3), 24.0);
    }

    /// Zen 5 writes back on a path of its own: a copy at L2 fetches two lines (the source and
    /// the destination's, for ownership) in 2 cycles at 64 B and writes one back beside them,
    /// 64 counted bytes a cycle. Its quick run read an L2 copy at 468 GB/s on 2 cores at
    /// 4.05 GHz (tests/fixtures/machines/zen5-kvm-2vcpu), 57.8 B per cycle and core: 0.90 of
    /// this, where one shared path's 42.7 made it 1.35.
    #[test]
    fn write_backs_on_their_own_path_leave_the_fills_the_whole_width() {
        let row = cache_bandwidth("zen5").unwrap();
        let at = |a: Accesses, level| a.bytes_per_cycle(level, &row);
        assert_eq!(at(READ, CacheLevel::L2), 64.0);
        assert_eq!(at(WRITE, CacheLevel::L2), 64.0);
        assert_eq!(at(COPY, CacheLevel::L2), 64.0);
        assert_eq!(at(TRIAD, CacheLevel::L2), 64.0);
        assert_eq!(at(COPY, CacheLevel::L3), 32.0);
        let measured = 468.2 / (4.05 * 2.0);
        assert!((0.85..=1.0).contains(&(measured / at(COPY, CacheLevel::L2))));
    }
}
