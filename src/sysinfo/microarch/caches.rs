//! The caches of each row: the load-to-use latencies and bandwidths of a core's private caches
//! (L1, L2) in cycles and bytes per cycle, and the latency bands of the shared L3 and of DRAM
//! in nanoseconds, each with its source.

/// Load-to-use latency of a core's private caches, in cycles: a dependent chain of integer
/// loads with simple addressing (`mov rax, [rax]`), which is what `mem latency` chases.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct LoadLatency {
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
/// the core (`mem latency`: 4.95 cycles at 16 KiB on a 2-vCPU KVM guest of a Golden Cove server
/// Xeon, tests/fixtures/machines/xeon-amx-kvm-2vcpu). The shared L3 and DRAM have no cycle count
/// a table can give: their latency is the mesh's or the fabric's and the memory's, banded in
/// nanoseconds by [`far_latency`].
pub(crate) fn load_latency(name: &str) -> Option<LoadLatency> {
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

/// What a core's private caches move per cycle: the load and store ports' bytes at L1 (ports ×
/// the widest access the core does in one go), and the lines the L2 hands the L1 per cycle.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct CacheBandwidth {
    /// Bytes loaded from L1 per cycle.
    pub l1_load: f64,
    /// Bytes stored to L1 per cycle.
    pub l1_store: f64,
    /// Bytes between L2 and L1 per cycle (fills; write-backs are counted against it too).
    pub l2: f64,
    /// Where the figures come from.
    pub source: &'static str,
}

/// The private caches' bandwidth of the row `name`, from the vendors' optimisation guides
/// (Intel's tables "L1 peak bandwidth (bytes/cycle)" and "L2 peak bandwidth" per
/// microarchitecture; AMD's load/store unit chapters of the family 17h, 19h and 1Ah guides).
pub(crate) fn cache_bandwidth(name: &str) -> Option<CacheBandwidth> {
    let (l1_load, l1_store, l2, source) = match name {
        "sandybridge" | "ivybridge" => (
            32.,
            16.,
            32.,
            "Intel SOG, Sandy Bridge: two 16-byte loads and one 16-byte store per cycle (a \
             256-bit access takes two), L2 32 bytes per cycle",
        ),
        "haswell" | "broadwell" | "skylake" => (
            64.,
            32.,
            64.,
            "Intel SOG, Haswell and Skylake: two 32-byte loads and one 32-byte store per cycle, \
             L2 64 bytes per cycle peak",
        ),
        "skylake-sp" | "cascadelake" | "cooperlake" => (
            128.,
            64.,
            64.,
            "Intel SOG, Skylake Server: L1 128 bytes per cycle of loads (two 64-byte) and 64 of \
             stores, L2 64 bytes per cycle peak (52 sustained)",
        ),
        "icelake" | "tigerlake" | "rocketlake" | "icelake-sp" => (
            128.,
            64.,
            64.,
            "Intel SOG, Ice Lake (Sunny Cove): two 64-byte loads and 64 bytes of stores (two \
             store ports) per cycle, L2 64 bytes per cycle peak (48 sustained)",
        ),
        "alderlake" => (
            96.,
            64.,
            64.,
            "Intel SOG, Golden Cove: three 32-byte loads and two 32-byte stores per cycle (no \
             AVX-512 on Alder Lake), L2 64 bytes per cycle",
        ),
        "sapphirerapids" | "emeraldrapids" | "graniterapids" => (
            128.,
            64.,
            64.,
            "Intel SOG, Golden Cove and Redwood Cove server: two 64-byte loads (three at 256 \
             bits) and 64 bytes of stores per cycle, L2 64 bytes per cycle",
        ),
        "zen" => (
            32.,
            16.,
            32.,
            "AMD SOG family 17h: two 128-bit loads and one 128-bit store per cycle, L2 to L1 32 \
             bytes per cycle",
        ),
        "zen2" | "zen3" | "zen4" => (
            64.,
            32.,
            32.,
            "AMD SOG families 17h (Zen 2) and 19h: two 256-bit loads and one 256-bit store per \
             cycle (Zen 4 splits a 512-bit access in two), L2 to L1 32 bytes per cycle",
        ),
        "zen5" => (
            128.,
            64.,
            64.,
            "AMD SOG family 1Ah: two 512-bit loads and one 512-bit store per cycle, L2 to L1 64 \
             bytes per cycle (twice Zen 4's)",
        ),
        _ => return None,
    };
    Some(CacheBandwidth {
        l1_load,
        l1_store,
        l2,
        source,
    })
}

/// The load-to-use latency a chase over 2 MiB pages reads on an idle machine at the shared
/// last-level cache and at DRAM, each as a band `[fastest, slowest]` in nanoseconds: the mesh
/// or fabric and the memory set them, so the band spans the parts sold with the core.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct FarLatency {
    pub l3_ns: [f64; 2],
    pub dram_ns: [f64; 2],
    /// Where the bands come from.
    pub source: &'static str,
}

/// The L3 and DRAM latency bands of the row `name`. Sources: idle latencies by Intel's Memory
/// Latency Checker as published in the vendors' platform briefs and server reviews, and the
/// chase measurements Chips and Cheese published per core; AMD's guides give the L3 in cycles
/// (about 40 on Zen 1 and 2, 46 on Zen 3, 50 on Zen 4 and 5).
pub(crate) fn far_latency(name: &str) -> Option<FarLatency> {
    let (l3_ns, dram_ns, source) = match name {
        "sandybridge" | "ivybridge" | "haswell" | "broadwell" | "skylake" | "icelake"
        | "tigerlake" | "rocketlake" | "alderlake" => (
            [7., 20.],
            [55., 110.],
            "client ring: L3 about 30-60 cycles at 3-5 GHz, DDR4/DDR5 client DRAM 60-100 ns \
             idle (Intel MLC, Chips and Cheese)",
        ),
        "skylake-sp" | "cascadelake" | "cooperlake" => (
            [15., 28.],
            [70., 120.],
            "Skylake-SP mesh: L3 18-22 ns, local DDR4 80-95 ns idle (Intel MLC, Chips and \
             Cheese)",
        ),
        "icelake-sp" => (
            [17., 32.],
            [75., 125.],
            "Ice Lake-SP mesh: L3 20-26 ns, local DDR4 85-105 ns idle (Intel MLC, Chips and \
             Cheese)",
        ),
        "sapphirerapids" | "emeraldrapids" | "graniterapids" => (
            [25., 48.],
            [90., 150.],
            "Sapphire to Granite Rapids mesh: L3 30-40 ns, local DDR5/MRDIMM 105-135 ns idle \
             (Intel MLC, Chips and Cheese)",
        ),
        "zen" | "zen2" | "zen3" | "zen4" | "zen5" => (
            [7., 16.],
            [60., 140.],
            "Zen core complexes: L3 40-50 cycles (AMD SOG), 8-13 ns; DRAM 65-85 ns on Ryzen, \
             90-130 ns on EPYC idle (Chips and Cheese, AMD's EPYC tuning guides)",
        ),
        _ => return None,
    };
    Some(FarLatency {
        l3_ns,
        dram_ns,
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

    /// Every row states its private caches' bandwidth and its far latency bands, in a shape
    /// every x86-64 core since Sandy Bridge has: loads at least as wide as stores, an L2 no
    /// faster than the L1's loads, L3 faster than DRAM.
    #[test]
    fn every_row_states_its_cache_bandwidth_and_far_latencies() {
        for name in names() {
            let b = cache_bandwidth(name).unwrap_or_else(|| panic!("{name}: no bandwidth"));
            assert!(
                b.l1_load >= b.l1_store && b.l1_store >= 16.0 && b.l2 <= b.l1_load,
                "{name}: {b:?}"
            );
            let f = far_latency(name).unwrap_or_else(|| panic!("{name}: no far latency"));
            assert!(
                f.l3_ns[0] < f.l3_ns[1] && f.l3_ns[1] < f.dram_ns[0] && f.dram_ns[0] < f.dram_ns[1],
                "{name}: {f:?}"
            );
        }
    }
}
