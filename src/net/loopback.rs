//! The peak of a loopback throughput test. Loopback has no link speed: every byte goes from
//! the sender's buffer into the kernel and from the kernel into the receiver's by memory
//! copies, so the memory copy bandwidth bounds it. The net workload measures that copy itself
//! ([`crate::memory::bound`]): once per plan, by the first loopback throughput case that needs
//! it, before that case starts the loopback server and outside every timed test; each loopback
//! throughput result then takes that bandwidth (GB/s of bytes read + written) × 8000 as its
//! peak in Mb/s. `--nic-gbps` (the peak the user assumes) replaces it.

use std::sync::Mutex;

use anyhow::Result;

use crate::interrupt::Interrupted;
use crate::memory::bound::{CopyBound, copy_bandwidth};
use crate::peak::PeakRef;
use crate::plan::Context;

/// The memory copy of a plan's loopback tests, measured on first use and shared by its cases
/// (as the loopback server is).
#[derive(Default)]
pub(crate) struct LoopbackBound {
    measured: Mutex<Option<Result<CopyBound, String>>>,
}

impl LoopbackBound {
    /// The loopback peak, the copy measured if this is the first call; `Err(note)` (for the
    /// result's warnings) when the copy could not be measured. Ctrl-C during the copy is the
    /// outer error, as during a test.
    pub(crate) fn peak(&self, ctx: &Context) -> Result<Result<PeakRef, String>> {
        let mut measured = self.measured.lock().unwrap_or_else(|p| p.into_inner());
        if measured.is_none() {
            *measured = Some(match copy_bandwidth(ctx) {
                Ok(bound) => Ok(bound),
                Err(e) if e.downcast_ref::<Interrupted>().is_some() => return Err(e),
                Err(e) => Err(format!("{e:#}")),
            });
        }
        Ok(match measured.as_ref().expect("measured above") {
            Ok(bound) => Ok(peak(bound)),
            Err(why) => Err(unbound(why)),
        })
    }
}

/// A loopback throughput result's peak from the copy: GB/s × 8000 Mb/s per GB/s.
fn peak(bound: &CopyBound) -> PeakRef {
    PeakRef {
        value: bound.gbs * 8000.0,
        unit: "Mb/s".into(),
        source: format!(
            "memory copy bandwidth measured for this run's loopback tests ({}) × 8000 Mb/s per \
             GB/s; loopback moves every byte by memory copies, so this bounds it",
            bound.describe()
        ),
        pair: None,
    }
}

/// The note of a loopback throughput result whose copy could not be measured.
fn unbound(why: &str) -> String {
    format!(
        "loopback has no link speed: its bound is the memory copy bandwidth, which could not be \
         measured ({why}); give the peak you assume with --nic-gbps"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_is_measured_once_and_bounds_loopback_at_8000_mbps_per_gbs() {
        let bound = LoopbackBound::default();
        let ctx = Context::fixture();
        let first = bound.peak(&ctx).unwrap().unwrap();
        let again = bound.peak(&ctx).unwrap().unwrap();
        assert_eq!(first.value, again.value, "one measurement per plan");
        assert_eq!(first.unit, "Mb/s");
        assert!(first.value > 0.0);
        for word in ["memory copy", "1 MiB blocks", "threads", "GB/s", "× 8000"] {
            assert!(first.source.contains(word), "{word}: {}", first.source);
        }
        assert!(unbound("no memory").contains("--nic-gbps"));
    }
}
