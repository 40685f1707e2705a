//! The latency probe that finds where this machine's L3 really ends, before the roofline plans
//! its L3 level.
//!
//! A guest may be shown its host's whole L3: a 2-vCPU KVM guest of a Golden Cove server Xeon was
//! told of 480 MiB while its pointer chase (huge pages) read ~45 ns at 8 MiB, ~160 ns at 32 MiB and
//! ~184 ns at 256 MiB, so an L3 roof sized from sysinfo (120 MiB) read the DRAM figure. The probe
//! chases pointers ([`crate::memory::latency::chase_ns`]) over working sets from 2 × the L2 up to
//! sysinfo's last level, ×2 each, [`PER_SIZE`] of chasing at each, and stops at the first step to
//! memory by the rule the run-wide finding uses ([`crate::findings::memory_step`]), or when
//! [`BUDGET`] is spent. It runs once per process, only when a run is about to start (never in
//! a dry run), and only when the plan has an L3 level.

use std::time::{Duration, Instant};

use crate::findings::{MEMORY_STEP, STEP_SPAN, memory_step, private_cache_bytes};
use crate::memory::latency::{NODE, chase_ns};
use crate::memory::region::HugePages;
use crate::plan::{Context, ProbedCurve};
use crate::sysinfo::SysInfo;
use crate::units::format_size_approx;

use super::levels::CacheEdge;

/// The thread CPU time of chasing at each working set, after linking and one warm pass.
pub(crate) const PER_SIZE: Duration = Duration::from_millis(25);
/// The most the whole probe may take: no size is started that would end past it.
pub(crate) const BUDGET: Duration = Duration::from_secs(2);

/// The working sets the probe chases: 2 × the L2, ×2 each, up to sysinfo's last-level cache
/// and a quarter of the memory available; none where sysinfo reads no L3.
pub(crate) fn sizes(host: &SysInfo) -> Vec<u64> {
    let private = private_cache_bytes(host);
    let llc = host.cpu.last_level_cache_bytes();
    let available = host.memory.available_bytes;
    let top = if available > 0 {
        llc.min(available / 4)
    } else {
        llc
    };
    let has_l3 = host.cpu.data_caches().any(|c| c.level >= 3);
    if !has_l3 || private == 0 || llc <= private {
        return Vec::new();
    }
    std::iter::successors(Some(2 * private), |s| Some(s * 2))
        .take_while(|&s| s <= top)
        .collect()
}

/// A guess at one size's wall time: linking writes every node in a random order (~30 ns each,
/// page faults included), then the warm pass and the chase.
fn guess(size: u64) -> Duration {
    Duration::from_secs_f64((size / NODE as u64) as f64 * 30e-9) + 2 * PER_SIZE
}

/// Chases at each of `sizes` in turn until the curve steps to memory or the budget is spent.
pub(crate) fn measure(host: &SysInfo, sizes: &[u64]) -> Result<ProbedCurve, String> {
    let (private, llc) = (private_cache_bytes(host), host.cpu.last_level_cache_bytes());
    let start = Instant::now();
    let mut points = Vec::new();
    for &size in sizes {
        if !points.is_empty() && start.elapsed() + guess(size) > BUDGET {
            break;
        }
        let ns = chase_ns(size, HugePages::Ask, PER_SIZE)
            .map_err(|e| format!("the chase over {}: {e:#}", format_size_approx(size)))?;
        points.push((size, ns));
        if memory_step(&points, private, llc).is_some() {
            break;
        }
    }
    Ok(ProbedCurve {
        points,
        took: start.elapsed(),
    })
}

/// The edge in a probed curve: where it steps to memory before sysinfo's last level ends.
pub(crate) fn edge(host: &SysInfo, curve: &[(u64, f64)]) -> Option<CacheEdge> {
    let llc = host.cpu.last_level_cache_bytes();
    let (i, j) = memory_step(curve, private_cache_bytes(host), llc)?;
    Some(CacheEdge {
        cached: curve[i],
        beyond: curve[j],
    })
}

/// The L3's edge on this machine, measured when the context allows it, and the plan's note
/// on what the probe did (none where there is nothing to probe).
pub(crate) fn l3_edge(ctx: &Context) -> (Option<CacheEdge>, Option<String>) {
    let host = &ctx.host;
    let sizes = sizes(host);
    let (Some(&first), Some(&last)) = (sizes.first(), sizes.last()) else {
        return (None, None);
    };
    if sizes.len() < 2 {
        return (None, None);
    }
    let range = format!(
        "{} … {}",
        format_size_approx(first),
        format_size_approx(last)
    );
    let llc = format_size_approx(host.cpu.last_level_cache_bytes());
    let Some(probed) = ctx.latency_probe.curve(|| measure(host, &sizes)) else {
        return (
            None,
            Some(format!(
                "L3 at sysinfo's {llc}: a dry run times nothing; a run first chases pointers \
                 over {range} (at most {} s) and takes the L3 set from where the latency steps \
                 ×{MEMORY_STEP} to memory within ×{STEP_SPAN} in size, if that is before {llc}",
                BUDGET.as_secs()
            )),
        );
    };
    match probed {
        Err(why) => (
            None,
            Some(format!(
                "L3 at sysinfo's {llc}: the latency probe failed ({why})"
            )),
        ),
        Ok(curve) => {
            let found = edge(host, &curve.points);
            let measured = curve.points.last().map_or(0, |p| p.0);
            let verdict = match &found {
                Some(_) => "the L3 set is measured (below)".to_string(),
                None => format!(
                    "no step ×{MEMORY_STEP} to memory up to {}: sysinfo's {llc} L3 stands",
                    format_size_approx(measured)
                ),
            };
            let points: Vec<String> = curve
                .points
                .iter()
                .map(|&(set, ns)| format!("{} {ns:.1} ns", format_size_approx(set)))
                .collect();
            let note = format!(
                "L3 latency probe: pointer chase with huge pages asked for, {:.2} s before the \
                 plan ({}): {verdict}",
                curve.took.as_secs_f64(),
                points.join(", ")
            );
            (found, Some(note))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn the_sizes_run_from_twice_the_l2_to_the_last_level_by_doubling() {
        let mut host = Context::fixture().host;
        // The fixture: a 1 MiB L2 and a 32 MiB L3.
        assert_eq!(
            sizes(&host),
            [2 * MIB, 4 * MIB, 8 * MIB, 16 * MIB, 32 * MIB]
        );
        // A quarter of the memory available caps them.
        host.memory.available_bytes = 40 * MIB;
        assert_eq!(sizes(&host), [2 * MIB, 4 * MIB, 8 * MIB]);
        // No cache beyond the L2: nothing to probe.
        host.cpu.caches.retain(|c| c.level < 3);
        assert!(sizes(&host).is_empty());
    }

    #[test]
    fn a_plan_on_a_fixture_times_nothing_and_says_what_a_run_would() {
        let ctx = Context::fixture();
        let (edge, note) = l3_edge(&ctx);
        assert_eq!(edge, None);
        let note = note.unwrap();
        assert!(note.contains("dry run times nothing"), "{note}");
        assert!(note.contains("2 MiB … 32 MiB"), "{note}");
    }

    #[test]
    fn the_edge_is_read_from_a_probed_curve_by_the_findings_rule() {
        let mut host = Context::fixture().host;
        let l3 = host.cpu.caches.iter_mut().find(|c| c.level == 3).unwrap();
        l3.size_bytes = 480 * MIB;
        let curve = [
            (2 * MIB, 20.0),
            (4 * MIB, 30.0),
            (8 * MIB, 45.0),
            (16 * MIB, 150.0),
        ];
        let found = edge(&host, &curve).unwrap();
        assert_eq!(found.cached, (8 * MIB, 45.0));
        assert_eq!(found.beyond, (16 * MIB, 150.0));
        // A flat curve agrees with sysinfo.
        assert_eq!(edge(&host, &curve[..3]), None);
    }
}
