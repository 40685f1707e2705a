//! Load-to-use latencies of the cores' private caches.

/// Load-to-use latency of a core's private caches, in cycles: a dependent chain of integer
/// loads with simple addressing (`mov rax, [rax]`), which is what `mem latency` chases.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LoadLatency {
    /// L1 data cache, cycles.
    pub l1_cycles: f64,
    /// L2 cache, cycles.
    pub l2_cycles: f64,
    /// Where the figures come from.
    pub source: &'static str,
}

/// The load-to-use latencies of the row `name`: the vendors' optimisation guides (Intel 64 and
/// IA-32 Architectures Optimization Reference Manual, cache tables per microarchitecture; AMD
/// Software Optimization Guides for families 17h, 19h and 1Ah), checked where this project ran
/// the core (`mem latency`: 4.95 cycles at 16 KiB on the Golden Cove server guest of the
/// fixtures). The shared L3 and DRAM have no cycle count a table can give: their latency is the
/// mesh's or the fabric's and the memory's.
pub fn load_latency(name: &str) -> Option<LoadLatency> {
    const INTEL: &str = "Intel optimization manual, load-to-use latency";
    const AMD: &str = "AMD software optimization guide, load-to-use latency";
    let (l1, l2, source) = match name {
        "sandybridge" | "ivybridge" | "haswell" | "broadwell" | "skylake" => (4., 12., INTEL),
        "skylake-sp" | "cascadelake" | "cooperlake" => (4., 14., INTEL),
        "icelake" | "tigerlake" | "rocketlake" | "icelake-sp" => (5., 14., INTEL),
        "alderlake" | "sapphirerapids" | "emeraldrapids" | "graniterapids" => (5., 16., INTEL),
        "zen" | "zen2" | "zen3" => (4., 12., AMD),
        "zen4" | "zen5" => (4., 14., AMD),
        _ => return None,
    };
    Some(LoadLatency {
        l1_cycles: l1,
        l2_cycles: l2,
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::super::*;

    /// Every row of the table has its private caches' load latencies.
    #[test]
    fn every_row_states_its_load_latencies() {
        for name in names() {
            let l = load_latency(name).unwrap_or_else(|| panic!("{name}: no load latency"));
            assert!(
                l.l1_cycles >= 3.0 && l.l2_cycles > l.l1_cycles,
                "{name}: {l:?}"
            );
        }
    }
}
