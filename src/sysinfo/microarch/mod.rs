//! Microarchitectures: which CPUs CPUID names each one for, and the execution pipes of a core.
//!
//! One table, `TABLE`, holds both sides, so that no name can be told from CPUID without pipes,
//! and no pipes exist that no CPU is named for. [`identify`] goes from CPUID to a name (sysinfo
//! reports it); [`resources`] from the name to the pipes (the CPU peaks multiply them out).
//!
//! The pipe counts are from the vendors' optimisation manuals, each row with its sources. A
//! 512-bit count of 0 means the ISA is absent; 1 on a double-pumped design (Zen 4) means one
//! 512-bit instruction per cycle. Every row states every instruction a CPU kernel runs (the
//! dot products, f16 and AMX included), so no kernel is left without a peak on a known CPU.

use std::ops::RangeInclusive;

use super::Fact;
use Cpuid::{Amd, Intel, IntelSteppings};
use PipeEntry::{Absent, OnFmaPipes, PerCycle};

mod flags;
mod caches;

pub(crate) use caches::{
    CacheBandwidth, cache_bandwidth, cache_kernel_share, far_latency, load_latency,
};
pub(crate) use flags::by_flags;

/// The microarchitectures: a name, the CPUs CPUID tells it for, and the pipes of one core,
/// `pipes(FMA, FADD, vector integer add, scalar integer ALUs)`, the first three at 128, 256 and
/// 512 bit, then `.extensions(VNNI, BF16 dot, FP16 FMA, AMX tile)`: the 512-bit instructions
/// beyond them, each an [`PipeEntry`] that every row states (`Absent` where the ISA is not there).
///
/// Sources: "SOG" is the vendor's optimisation guide (Intel 64 and IA-32 Architectures
/// Optimization Reference Manual; AMD Software Optimization Guide for family 17h pub. 56305,
/// 19h pub. 57647, 1Ah pub. 58455); "LLVM model" is LLVM's scheduling model of the core (the
/// llvm-mca resource tables), which cites the SOG; "measured" is a peakbench run, with its
/// figure. A count nobody could check through those is marked "unverified" with the reasoning.
const TABLE: &[Microarch] = &[
    // Sandy Bridge and Ivy Bridge have no FMA: the first column is their one FP multiply pipe
    // (port 0), the second their one FP add pipe (port 1), both 256 bit wide for AVX floats, so
    // a multiply and an add per cycle (8 DP FLOP per cycle at 256 bit). Integer vectors are 128
    // bit only (AVX2 came with Haswell): `paddd` issues on ports 1 and 5; three scalar ALUs
    // (ports 0, 1, 5). Intel SOG. No AVX-512, so none of the extensions.
    row(
        "sandybridge",
        Intel(&[0x2A, 0x2D]),
        pipes([1., 1., 0.], [1., 1., 0.], [2., 0., 0.], 3.)
            .extensions(Absent, Absent, Absent, Absent),
    ),
    row(
        "ivybridge",
        Intel(&[0x3A, 0x3E]),
        pipes([1., 1., 0.], [1., 1., 0.], [2., 0., 0.], 3.)
            .extensions(Absent, Absent, Absent, Absent),
    ),
    // Haswell to client Skylake: two 256-bit FMA pipes (ports 0, 1), integer adds on ports 0, 1
    // (Haswell, Broadwell) or 0, 1, 5 (Skylake), four scalar ALUs. Intel SOG. No AVX-512.
    row(
        "haswell",
        Intel(&[0x3C, 0x3F, 0x45, 0x46]),
        pipes([2., 2., 0.], NONE, [2., 2., 0.], 4.).extensions(Absent, Absent, Absent, Absent),
    ),
    row(
        "broadwell",
        Intel(&[0x3D, 0x47, 0x4F, 0x56]),
        pipes([2., 2., 0.], NONE, [2., 2., 0.], 4.).extensions(Absent, Absent, Absent, Absent),
    ),
    row(
        "skylake",
        Intel(&[0x4E, 0x5E, 0x8E, 0x9E, 0xA5, 0xA6]),
        pipes([2., 2., 0.], NONE, [3., 3., 0.], 4.).extensions(Absent, Absent, Absent, Absent),
    ),
    // Skylake-SP, Cascade Lake and Cooper Lake share model 0x55 and differ by stepping. Two
    // 512-bit FMA pipes (ports 0+1 fused, and port 5) on Platinum, Gold 6xxx and Xeon W parts;
    // one on Gold 5xxx (but 5122), Silver and Bronze (Intel SOG, "Intel AVX-512 FMA units").
    // 512-bit integer adds on ports 0 and 5. Skylake-SP has AVX-512F/BW but no VNNI, BF16,
    // FP16 or AMX (Intel ISA extensions reference, per CPUID).
    row(
        "skylake-sp",
        IntelSteppings(0x55, 0..=4),
        pipes([2., 2., 2.], NONE, [3., 3., 2.], 4.)
            .avx512_fma_by_sku()
            .extensions(Absent, Absent, Absent, Absent),
    ),
    // Cascade Lake adds AVX512_VNNI: `vpdpbusd`/`vpdpwssd` zmm issue on the 512-bit FMA ports
    // (p0, p5), as on Ice Lake-SP below. Unverified for Cascade Lake itself: it shares the
    // Skylake-SP core, whose 512-bit integer multiplies (`vpmaddwd`) use the same two ports.
    row(
        "cascadelake",
        IntelSteppings(0x55, 5..=7),
        pipes([2., 2., 2.], NONE, [3., 3., 2.], 4.)
            .avx512_fma_by_sku()
            .extensions(OnFmaPipes, Absent, Absent, Absent),
    ),
    // Cooper Lake adds AVX512_BF16. `vdpbf16ps` on the FMA ports: unverified (no throughput
    // table found for Cooper Lake); reasoning: the dot product is a pair of bf16 FMAs per
    // 32-bit lane, done in the FMA units as on Sapphire Rapids.
    row(
        "cooperlake",
        IntelSteppings(0x55, 10..=u32::MAX),
        pipes([2., 2., 2.], NONE, [3., 3., 2.], 4.)
            .avx512_fma_by_sku()
            .extensions(OnFmaPipes, OnFmaPipes, Absent, Absent),
    ),
    // Ice Lake client and Tiger Lake: one 512-bit FMA pipe (ports 0+1 fused), so one 512-bit
    // VNNI dot per cycle; no BF16 (Tiger Lake has VP2INTERSECT, not BF16), FP16 or AMX.
    row(
        "icelake",
        Intel(&[0x7D, 0x7E]),
        pipes([2., 2., 1.], NONE, [3., 3., 2.], 4.).extensions(OnFmaPipes, Absent, Absent, Absent),
    ),
    // Ice Lake-SP: two 512-bit FMA pipes; `vpdpbusd`/`vpdpwssd` zmm 1 uop on p0 or p5,
    // reciprocal throughput 0.5 (LLVM model IceLakeServer, llvm-mca resources-avx512vnni.s).
    // No BF16, FP16 or AMX.
    row(
        "icelake-sp",
        Intel(&[0x6A, 0x6C]),
        pipes([2., 2., 2.], NONE, [3., 3., 2.], 5.).extensions(OnFmaPipes, Absent, Absent, Absent),
    ),
    row(
        "tigerlake",
        Intel(&[0x8C, 0x8D]),
        pipes([2., 2., 1.], NONE, [3., 3., 2.], 4.).extensions(OnFmaPipes, Absent, Absent, Absent),
    ),
    // Rocket Lake (Cypress Cove, Ice Lake's core back-ported to 14 nm): one 512-bit FMA pipe
    // (ports 0+1 fused), VNNI on it; no BF16, FP16 or AMX. Intel SOG. Hypervisors present its
    // model number (0xA7) for other cores, which `identify` catches by their flags.
    row(
        "rocketlake",
        Intel(&[0xA7]),
        pipes([2., 2., 1.], NONE, [3., 3., 2.], 4.).extensions(OnFmaPipes, Absent, Absent, Absent),
    ),
    // Alder Lake: AVX-512 is fused off (the E-cores lack it); its AVX-VNNI is 256 bit, which
    // no peakbench kernel runs. Its P-cores are Golden Cove: one add-only FP pipe beside the two
    // FMA pipes, as on Sapphire Rapids below.
    row(
        "alderlake",
        Intel(&[0x97, 0x9A, 0xB7, 0xBA, 0xBF]),
        pipes([2., 2., 0.], [1., 1., 0.], [3., 3., 0.], 4.)
            .extensions(Absent, Absent, Absent, Absent),
    ),
    // Sapphire Rapids (model 0x8F), Emerald Rapids (0xCF) and Granite Rapids (0xAD, 0xAE), the
    // Golden Cove server class: two 512-bit FMA pipes (p0+p1 fused, p5) on every Xeon SKU.
    // - FADD: Golden Cove adds fast FP adders on ports 1 and 5 (Intel SOG, Golden Cove
    //   microarchitecture). Port 1 also holds an FMA pipe, so multiplies and adds share three
    //   ports: one add-only pipe beside the two FMA pipes at 128 and 256 bit, none at 512 (port 1
    //   is fused into port 0 there). Measured without FMA (`cpu --fma no`, 1 thread, at the
    //   clock of clock-independent.txt): 2.2-2.6 instructions per cycle at 128/256 bit, above
    //   the 2 the FMA pipes alone allow (tests/fixtures/machines/, tests/machines.rs), 1.74 at
    //   512 bit.
    // - VNNI on the FMA ports, 2 per cycle: Intel gives AVX-512 VNNI as 256 int8 ops per cycle
    //   per core beside AMX's 2048 (Sapphire Rapids AMX material) = 2 × 64 pairs × 2 ops.
    //   Measured: `vpdpbusd` and `vpdpwssd` 1.85 per cycle on both fixture machines, so 2 ports
    //   (LLVM's SapphireRapids model, p0 only, is refuted).
    // - BF16 `vdpbf16ps` zmm: 0.5 per cycle. Measured by bench/dot-throughput.c: 0.44 per cycle
    //   with 4, 8, 12, 16 or 24 independent accumulators (0.116 with one: a latency of about 9
    //   cycles), where `vfmadd231ps` zmm reads 1.75 in the same run; the fixtures' kernel reads
    //   0.45-0.53. The core's throughput, not the kernel's chains.
    // - FP16 `vfmadd231ph` on the FMA ports: AVX512-FP16 runs on the same FMA units with twice
    //   the f32 lanes (Intel AVX512-FP16 architecture specification); measured 1.84 per cycle.
    // - AMX: one tile multiply per 16 cycles, [`AMX_TILE_CYCLES`]: 2048 int8 ops and 1024 bf16
    //   FLOP per cycle per core, Intel's AMX figures (measured: one per 18-19 cycles). Granite
    //   Rapids adds AMX-FP16, which no peakbench kernel runs.
    row(
        "sapphirerapids",
        Intel(&[0x8F]),
        pipes([2., 2., 2.], [1., 1., 0.], [3., 3., 2.], 5.).extensions(
            OnFmaPipes,
            PerCycle(GOLDEN_COVE_BF16_DOT),
            OnFmaPipes,
            PerCycle(1. / AMX_TILE_CYCLES),
        ),
    ),
    row(
        "emeraldrapids",
        Intel(&[0xCF]),
        pipes([2., 2., 2.], [1., 1., 0.], [3., 3., 2.], 5.).extensions(
            OnFmaPipes,
            PerCycle(GOLDEN_COVE_BF16_DOT),
            OnFmaPipes,
            PerCycle(1. / AMX_TILE_CYCLES),
        ),
    ),
    row(
        "graniterapids",
        Intel(&[0xAD, 0xAE]),
        pipes([2., 2., 2.], [1., 1., 0.], [3., 3., 2.], 5.).extensions(
            OnFmaPipes,
            PerCycle(GOLDEN_COVE_BF16_DOT),
            OnFmaPipes,
            PerCycle(1. / AMX_TILE_CYCLES),
        ),
    ),
    // Zen and Zen+: four 128-bit FP pipes, two of them multiply/FMA (FP0, FP1), two add (FP2,
    // FP3); 256-bit ops split in two. AMD SOG 17h. No AVX-512.
    row(
        "zen",
        Amd(0x17, &[0x00..=0x2F]),
        pipes([2., 1., 0.], [2., 1., 0.], [4., 2., 0.], 4.)
            .extensions(Absent, Absent, Absent, Absent),
    ),
    // Zen 2 and Zen 3: the same four pipes, 256 bit wide: 2 × 256-bit FMA + 2 × 256-bit FADD.
    // AMD SOG 17h (Zen 2) and 19h (Zen 3). No AVX-512, so no 512-bit VNNI, BF16, FP16 or AMX
    // (Zen 3 has no VNNI of any width).
    row(
        "zen2",
        Amd(0x17, &[0x30..=u32::MAX]),
        pipes([2., 2., 0.], [2., 2., 0.], [3., 3., 0.], 4.)
            .extensions(Absent, Absent, Absent, Absent),
    ),
    row(
        "zen3",
        Amd(0x19, &[0x00..=0x0F, 0x20..=0x5F]),
        pipes([2., 2., 0.], [2., 2., 0.], [4., 4., 0.], 4.)
            .extensions(Absent, Absent, Absent, Absent),
    ),
    // Zen 4: the Zen 3 pipes run 512-bit ops over both 256-bit halves (double-pumped), so one
    // 512-bit FMA and one 512-bit FADD per cycle. AVX512_VNNI and AVX512_BF16: one 512-bit
    // `vpdpbusd`/`vpdpwssd`/`vdpbf16ps` per cycle (AMD SOG 19h pub. 57647; measured: 99-100 %
    // of that peak by `peakbench cpu -p i8,i16,bf16` on an EPYC 9004 guest, docs/cpu.md; LLVM's
    // Znver4 model has reciprocal throughput 2.0 for them, which the measurement refutes). No
    // AVX512-FP16, no AMX.
    row(
        "zen4",
        Amd(0x19, &[0x10..=0x1F, 0x60..=0x7F, 0xA0..=0xAF]),
        pipes([2., 2., 1.], [2., 2., 1.], [4., 4., 2.], 4.).extensions(
            PerCycle(1.),
            PerCycle(1.),
            Absent,
            Absent,
        ),
    ),
    // Zen 5 (full-width desktop and server parts): four 512-bit FP pipes, FMA on FP0/FP1, FADD
    // on FP2/FP3; six ALUs. AMD SOG 1Ah pub. 58455 via LLVM's Znver5 model.
    // - VNNI: "VNNIs execute in the first two pipes" (FP0, FP1), 512 bit wide: 2 per cycle.
    // - BF16 `vdpbf16ps`: on FP2/FP3 in LLVM's Znver5 model: 2 per cycle. Unverified against
    //   the guide's own latency table.
    // Measured: 540 GFLOP/s `vdpbf16ps` and 541 GIOP/s `vpdpwssd` on the 2 cores of a 2-vCPU KVM
    // guest of an AMD Zen 5 EPYC (family 26 model 2): 270 G ops/s per core, 64 ops per instruction,
    // so about 1.55 per cycle at the 2.7 GHz that guest's clock probe reads
    // (tests/fixtures/report.json), more than one pipe can give. No AVX512-FP16, no AMX.
    row(
        "zen5",
        Amd(0x1A, &[0..=u32::MAX]),
        pipes([2., 2., 2.], [2., 2., 2.], [4., 4., 4.], 6.).extensions(
            PerCycle(2.),
            PerCycle(2.),
            Absent,
            Absent,
        ),
    ),
];

/// The names of the table's rows, as [`identify`] gives them (the tests walk every row).
#[cfg(test)]
pub(crate) fn names() -> impl Iterator<Item = &'static str> {
    TABLE.iter().map(|row| row.name)
}

/// Cycles one AMX tile multiply (`tdpbssd`, `tdpbf16ps`, 16 × 16 results) occupies the TMUL
/// unit on Sapphire Rapids and its successors: 16 (Intel 64 and IA-32 Architectures
/// Optimization Reference Manual, AMX chapter). 16 × 16 results × 64 int8 pairs / 16 cycles =
/// 1024 multiply-adds (2048 ops) per cycle per core; × 32 bf16 pairs = 512 (1024 FLOP).
const AMX_TILE_CYCLES: f64 = 16.;

/// `vdpbf16ps` zmm per cycle on Golden Cove server cores, measured (the table's comment).
const GOLDEN_COVE_BF16_DOT: f64 = 0.5;

/// No pipes of a kind, at any width.
const NONE: [f64; 3] = [0.; 3];

/// Per-core execution resources of a microarchitecture, per cycle.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CoreResources {
    /// FMA-capable FP pipes for 128/256/512-bit vectors (scalar uses the 128-bit value).
    pub fma_units: [f64; 3],
    /// Add-only FP pipes beside them (AMD's FADD pipes), same widths.
    pub fadd_units: [f64; 3],
    /// Vector integer add pipes, same widths.
    pub vec_int_units: [f64; 3],
    /// Scalar integer ALUs.
    pub scalar_int_units: f64,
    /// 512-bit VNNI dot products (`vpdpbusd`, `vpdpwssd`) per cycle: 0 where the ISA is
    /// absent, `None` where the row has no entry (which a test forbids).
    pub vnni_units: Option<f64>,
    /// 512-bit bf16 dot products (`vdpbf16ps`) per cycle; 0 and `None` as above.
    pub bf16_dot_units: Option<f64>,
    /// 512-bit f16 FMAs (`vfmadd231ph`) per cycle; 0 and `None` as above.
    pub f16_fma_units: Option<f64>,
    /// AMX tile multiplies per cycle (1 / cycles per instruction); 0 and `None` as above.
    pub amx_tiles_per_cycle: Option<f64>,
    /// Where these numbers come from.
    pub reference: &'static str,
}

/// Microarchitecture told from the CPUID vendor, family, model and stepping, as the name of a
/// row of the table; where the model is missing from the table, or names a core that lacks a
/// feature the CPU reports (a hypervisor presenting a false model), told from the feature flags
/// by [`by_flags`] instead, with the rule that matched; else unknown with the reason.
pub(crate) fn identify(
    vendor: &str,
    family: Option<u32>,
    model: Option<u32>,
    stepping: Option<u32>,
    model_name: &str,
    flags: &[String],
) -> Fact<String> {
    let (Some(family), Some(model)) = (family, model) else {
        return Fact::unknown(format!(
            "no cpu family and model in /proc/cpuinfo for '{model_name}' ({vendor})"
        ));
    };
    let stepping_text = match stepping {
        Some(s)
            if TABLE
                .iter()
                .any(|row| row.cpuid.needs_stepping(vendor, family, model)) =>
        {
            format!(" stepping {s}")
        }
        _ => String::new(),
    };
    let told = format!("CPUID family {family} model {model}{stepping_text} ({vendor})");
    let found = TABLE
        .iter()
        .find(|row| row.cpuid.matches(vendor, family, model, stepping));
    let why_not = match found {
        Some(row) => match row.lacks(flags) {
            None => return Fact::read(row.name.to_string(), told),
            Some(missing) => format!(
                "{told} names {}, which has no {missing}, yet the CPU reports it: the \
                 hypervisor's model is overridden",
                row.name
            ),
        },
        None => format!("{told}, model 0x{model:02X}, '{model_name}', is not in the table"),
    };
    match by_flags(vendor, family, flags) {
        Some((name, rule)) => Fact::read(
            name.to_string(),
            format!("{why_not}; identified by its feature flags: {rule}"),
        ),
        None => Fact::unknown(format!(
            "{told}, model 0x{model:02X}, '{model_name}', is not in the microarchitecture table{}",
            if found.is_some() {
                format!(" that agrees with its flags ({why_not})")
            } else {
                String::new()
            }
        )),
    }
}

/// The pipes of the microarchitecture `name` (as [`identify`] gives it), with a line that says
/// where they come from; `None` when the name is not in the table, or when the pipes depend on
/// the SKU and the model name does not tell it.
pub(crate) fn resources(name: &str, model_name: &str) -> Option<(CoreResources, String)> {
    let row = TABLE.iter().find(|row| row.name == name)?;
    let pipes = &row.pipes;
    let mut fma_units = pipes.fma;
    if pipes.avx512_fma_by_sku {
        fma_units[2] = xeon_avx512_units(model_name)?;
    }
    let entry = |e: PipeEntry| match e {
        PipeEntry::Unlisted => None,
        Absent => Some(0.),
        OnFmaPipes => Some(fma_units[2]),
        PerCycle(units) => Some(units),
    };
    let core = CoreResources {
        fma_units,
        fadd_units: pipes.fadd,
        vec_int_units: pipes.vector_int,
        scalar_int_units: pipes.int_alus,
        vnni_units: entry(pipes.vnni),
        bf16_dot_units: entry(pipes.bf16),
        f16_fma_units: entry(pipes.f16),
        amx_tiles_per_cycle: entry(pipes.amx),
        reference: row.cpuid.manual(),
    };
    let fma = fma_units.map(|units| units.to_string()).join("/");
    // The first column is the FP multiply pipes where there is no FMA.
    let what = if matches!(name, "sandybridge" | "ivybridge") {
        "FP multiply (no FMA)"
    } else {
        "FMA"
    };
    let detail = format!(
        "{name}: {fma} {what} pipes at 128/256/512 bit ({})",
        core.reference
    );
    Some((core, detail))
}

/// AVX-512 FMA units of a Skylake-SP / Cascade Lake / Cooper Lake Xeon, from its model string.
fn xeon_avx512_units(model_name: &str) -> Option<f64> {
    let name = model_name.to_ascii_lowercase();
    if name.contains("platinum") || name.contains("xeon(r) w-") || name.contains("gold 6") {
        return Some(2.0);
    }
    if name.contains("gold 5122") {
        return Some(2.0);
    }
    if name.contains("gold 5") || name.contains("silver") || name.contains("bronze") {
        return Some(1.0);
    }
    None // the model string does not say (a VM often hides it)
}

/// One row of the table.
struct Microarch {
    /// The name sysinfo reports, e.g. "cascadelake".
    name: &'static str,
    /// The CPUs it is told for.
    cpuid: Cpuid,
    pipes: Pipes,
}

const fn row(name: &'static str, cpuid: Cpuid, pipes: Pipes) -> Microarch {
    Microarch { name, cpuid, pipes }
}

/// The CPUs a row stands for, by CPUID.
enum Cpuid {
    /// GenuineIntel family 6, any of these models.
    Intel(&'static [u32]),
    /// GenuineIntel family 6, this model, with a stepping in this range.
    IntelSteppings(u32, RangeInclusive<u32>),
    /// AuthenticAMD, this family, a model in one of these ranges.
    Amd(u32, &'static [RangeInclusive<u32>]),
}

impl Cpuid {
    fn matches(&self, vendor: &str, family: u32, model: u32, stepping: Option<u32>) -> bool {
        match self {
            Intel(models) => vendor == "GenuineIntel" && family == 6 && models.contains(&model),
            IntelSteppings(_, steppings) => {
                self.needs_stepping(vendor, family, model)
                    && stepping.is_some_and(|s| steppings.contains(&s))
            }
            Amd(row_family, models) => {
                vendor == "AuthenticAMD"
                    && family == *row_family
                    && models.iter().any(|range| range.contains(&model))
            }
        }
    }

    /// Whether this row tells the CPUs of this vendor, family and model apart by stepping.
    fn needs_stepping(&self, vendor: &str, family: u32, model: u32) -> bool {
        matches!(self, IntelSteppings(row_model, _)
            if vendor == "GenuineIntel" && family == 6 && model == *row_model)
    }

    /// The vendor's manual the pipe counts come from.
    fn manual(&self) -> &'static str {
        match self {
            Intel(_) | IntelSteppings(..) => {
                "Intel 64 and IA-32 Architectures Optimization Reference Manual"
            }
            Amd(..) => "AMD Software Optimization Guide for the family",
        }
    }
}

/// The execution pipes of one core, per cycle.
struct Pipes {
    /// FMA-capable FP pipes at 128/256/512 bit.
    fma: [f64; 3],
    /// Add-only FP pipes, same widths.
    fadd: [f64; 3],
    /// Vector integer add pipes, same widths.
    vector_int: [f64; 3],
    /// Scalar integer ALUs.
    int_alus: f64,
    /// Whether the 512-bit FMA pipes differ by SKU, so that the model name must say how many;
    /// `fma` then holds the most any SKU has.
    avx512_fma_by_sku: bool,
    /// 512-bit VNNI dot products per cycle.
    vnni: PipeEntry,
    /// 512-bit bf16 dot products per cycle.
    bf16: PipeEntry,
    /// 512-bit f16 FMAs per cycle.
    f16: PipeEntry,
    /// AMX tile multiplies per cycle.
    amx: PipeEntry,
}

/// How many of one 512-bit instruction beyond the FMA and add pipes a core starts per cycle.
#[derive(Clone, Copy)]
enum PipeEntry {
    /// The row says nothing (only before `.extensions` is called; a test forbids it).
    Unlisted,
    /// The ISA is absent on this microarchitecture: 0 per cycle.
    Absent,
    /// On the 512-bit FMA pipes, as many as they are (Intel: ports 0 and 5 where the SKU has
    /// both).
    OnFmaPipes,
    /// This many per cycle.
    PerCycle(f64),
}

const fn pipes(fma: [f64; 3], fadd: [f64; 3], vector_int: [f64; 3], int_alus: f64) -> Pipes {
    Pipes {
        fma,
        fadd,
        vector_int,
        int_alus,
        avx512_fma_by_sku: false,
        vnni: PipeEntry::Unlisted,
        bf16: PipeEntry::Unlisted,
        f16: PipeEntry::Unlisted,
        amx: PipeEntry::Unlisted,
    }
}

impl Microarch {
    /// The first feature the CPU reports that this core does not have, by its cpuinfo flag
    /// name; `None` where the flags agree with the row.
    fn lacks(&self, flags: &[String]) -> Option<&'static str> {
        let p = &self.pipes;
        let absent = |e: PipeEntry| matches!(e, Absent);
        let avx512 = p.fma[2] > 0.0;
        let fma = !matches!(self.name, "sandybridge" | "ivybridge");
        let avx2 = p.vector_int[1] > 0.0;
        [
            ("amx_tile", absent(p.amx)),
            ("avx512_fp16", absent(p.f16)),
            ("avx512_bf16", absent(p.bf16)),
            ("avx512_vnni", absent(p.vnni)),
            ("avx512f", !avx512),
            ("avx2", !avx2),
            ("fma", !fma),
        ]
        .into_iter()
        .find(|&(flag, missing)| missing && flags.iter().any(|f| f == flag))
        .map(|(flag, _)| flag)
    }
}

impl Pipes {
    const fn avx512_fma_by_sku(mut self) -> Pipes {
        self.avx512_fma_by_sku = true;
        self
    }

    /// The 512-bit VNNI dot products, bf16 dot products, f16 FMAs and AMX tile multiplies
    /// per cycle, each stated (`Absent` where the ISA is not there).
    const fn extensions(
        mut self,
        vnni: PipeEntry,
        bf16: PipeEntry,
        f16: PipeEntry,
        amx: PipeEntry,
    ) -> Pipes {
        self.vnni = vnni;
        self.bf16 = bf16;
        self.f16 = f16;
        self.amx = amx;
        self
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// A model name that tells the SKU of every row that needs one.
    const PLATINUM: &str = "Intel(R) Xeon(R) Platinum 8280 CPU @ 2.70GHz";

    /// Every name `identify` gives for the families in the table, over all models and steppings.
    fn every_identified_name() -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        for vendor in ["GenuineIntel", "AuthenticAMD"] {
            for family in [6, 0x17, 0x18, 0x19, 0x1A] {
                for model in 0..=0xFF {
                    for stepping in (0..=0xF).map(Some).chain([None]) {
                        let fact =
                            identify(vendor, Some(family), Some(model), stepping, PLATINUM, &[]);
                        names.extend(fact.value);
                    }
                }
            }
        }
        names
    }

    #[test]
    fn every_name_identify_gives_has_resources() {
        let names = every_identified_name();
        for name in &names {
            assert!(resources(name, PLATINUM).is_some(), "{name} has no pipes");
        }
        let rows: BTreeSet<String> = TABLE.iter().map(|row| row.name.to_string()).collect();
        assert_eq!(names, rows, "every row is told for some CPU");
        assert_eq!(rows.len(), TABLE.len(), "no name has two rows");
    }

    /// Every row states the 512-bit extensions, and f16 runs on the FMA pipes wherever it is
    /// present (the CPU peaks take the f16 units from them).
    #[test]
    fn every_row_states_every_extension() {
        for name in names() {
            let (core, _) = resources(name, PLATINUM).unwrap();
            for (what, entry) in [
                ("VNNI", core.vnni_units),
                ("BF16 dot", core.bf16_dot_units),
                ("FP16 FMA", core.f16_fma_units),
                ("AMX tile", core.amx_tiles_per_cycle),
            ] {
                assert!(entry.is_some_and(|u| u >= 0.0), "{name}: no {what} entry");
            }
            let f16 = core.f16_fma_units.unwrap();
            assert!(f16 == 0.0 || f16 == core.fma_units[2], "{name}: f16 {f16}");
            if core.fma_units[2] == 0.0 {
                assert_eq!(core.vnni_units, Some(0.0), "{name}: VNNI without AVX-512");
                assert_eq!(
                    core.bf16_dot_units,
                    Some(0.0),
                    "{name}: BF16 without AVX-512"
                );
            }
        }
    }

    /// Zen 5's dot products have a peak: two 512-bit pipes each for VNNI and BF16.
    #[test]
    fn zen5_has_its_dot_products() {
        let (core, _) = resources("zen5", "AMD EPYC").unwrap();
        assert_eq!(core.vnni_units, Some(2.0));
        assert_eq!(core.bf16_dot_units, Some(2.0));
        assert_eq!(core.f16_fma_units, Some(0.0));
        assert_eq!(core.amx_tiles_per_cycle, Some(0.0));
    }

    #[test]
    fn no_cpu_is_told_for_two_rows() {
        for vendor in ["GenuineIntel", "AuthenticAMD"] {
            for family in [6, 0x17, 0x19, 0x1A] {
                for model in 0..=0xFF {
                    for stepping in 0..=0xF {
                        let rows: Vec<&str> = TABLE
                            .iter()
                            .filter(|row| row.cpuid.matches(vendor, family, model, Some(stepping)))
                            .map(|row| row.name)
                            .collect();
                        assert!(
                            rows.len() <= 1,
                            "{vendor} family {family} model {model} stepping {stepping}: {rows:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_detail_names_the_row_and_the_manual() {
        let (_, detail) = resources("zen", "AMD EPYC").unwrap();
        assert_eq!(
            detail,
            "zen: 2/1/0 FMA pipes at 128/256/512 bit (AMD Software Optimization Guide for the \
             family)"
        );
        let (_, detail) = resources("cascadelake", "Intel(R) Xeon(R) Silver 4210").unwrap();
        assert_eq!(
            detail,
            "cascadelake: 2/2/1 FMA pipes at 128/256/512 bit (Intel 64 and IA-32 Architectures \
             Optimization Reference Manual)"
        );
    }

    /// Per-core DP FLOPs per cycle of published parts, against the table: FMA pipes at `bits` ×
    /// doubles per register × 2 FLOPs per FMA.
    fn dp_per_cycle(name: &str, model: &str, bits: u32) -> f64 {
        let (core, _) = resources(name, model).unwrap();
        let width = match bits {
            128 => 0,
            256 => 1,
            512 => 2,
            _ => panic!("no {bits}-bit vectors"),
        };
        core.fma_units[width] * f64::from(bits / 64) * 2.0
    }

    #[test]
    fn published_peaks_are_reproduced() {
        // Xeon Platinum 8280 (Cascade Lake): 28 cores × 2.7 GHz base × 32 DP FLOP/cycle
        // = 2419.2 GFLOP/s (Intel's "APP" sheet lists 2419.2 at base clock).
        let per_cycle = dp_per_cycle("cascadelake", PLATINUM, 512);
        assert_eq!(per_cycle, 32.0);
        assert!((28.0 * 2.7 * per_cycle - 2419.2).abs() < 1e-9);
        // Xeon Silver 4110 (Skylake-SP, one AVX-512 FMA unit): 8 cores × 2.1 GHz × 16 = 268.8.
        let per_cycle = dp_per_cycle(
            "skylake-sp",
            "Intel(R) Xeon(R) Silver 4110 CPU @ 2.10GHz",
            512,
        );
        assert!((8.0 * 2.1 * per_cycle - 268.8).abs() < 1e-9);
        // EPYC 7742 (Zen 2): 64 cores × 2.25 GHz × 16 DP FLOP/cycle (AVX2, 2 FMA) = 2304.
        let per_cycle = dp_per_cycle("zen2", "AMD EPYC 7742 64-Core Processor", 256);
        assert!((64.0 * 2.25 * per_cycle - 2304.0).abs() < 1e-9);
        // Core i7-4770 (Haswell): 4 cores × 3.4 GHz × 16 = 217.6.
        let per_cycle = dp_per_cycle("haswell", "Intel(R) Core(TM) i7-4770 CPU @ 3.40GHz", 256);
        assert!((4.0 * 3.4 * per_cycle - 217.6).abs() < 1e-9);
    }

    /// Sandy Bridge and Ivy Bridge, CPUs that users reported from, are identified by their CPUID
    /// models and have integer (and float) pipes in the table.
    #[test]
    fn sandy_and_ivy_bridge_have_integer_pipes() {
        let intel = |model| {
            identify("GenuineIntel", Some(6), Some(model), Some(7), "Xeon", &[])
                .value
                .unwrap_or_default()
        };
        assert_eq!(intel(0x2A), "sandybridge");
        assert_eq!(intel(0x2D), "sandybridge");
        assert_eq!(intel(0x3A), "ivybridge");
        assert_eq!(intel(0x3E), "ivybridge");
        for (name, model) in [
            ("sandybridge", "Intel(R) Xeon(R) CPU E5-2680 0 @ 2.70GHz"),
            ("ivybridge", "Intel(R) Xeon(R) CPU E5-2680 v2 @ 2.80GHz"),
        ] {
            let (core, _) = resources(name, model).unwrap();
            assert_eq!(core.scalar_int_units, 3.0);
            assert_eq!(core.vec_int_units, [2.0, 0.0, 0.0], "no 256-bit integers");
            // A multiply and an add per cycle at 256 bit: 8 DP FLOP per cycle.
            assert_eq!((core.fma_units[1] + core.fadd_units[1]) * 4.0, 8.0);
        }
        // Xeon E5-2680 (Sandy Bridge-EP): 8 cores × 2.7 GHz × 8 = 172.8 GFLOP/s, Intel's figure.
        let (snb, detail) = resources("sandybridge", "E5-2680").unwrap();
        let per_cycle = (snb.fma_units[1] + snb.fadd_units[1]) * 4.0;
        assert!((8.0 * 2.7 * per_cycle - 172.8).abs() < 1e-9);
        assert!(detail.contains("FP multiply (no FMA)"), "{detail}");
    }

    #[test]
    fn a_hidden_xeon_model_leaves_the_avx512_units_unknown() {
        assert!(resources("cascadelake", "Intel Xeon Processor (Cascadelake)").is_none());
        assert_eq!(
            xeon_avx512_units("Intel(R) Xeon(R) Gold 5218 CPU @ 2.30GHz"),
            Some(1.0)
        );
        assert_eq!(
            xeon_avx512_units("Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz"),
            Some(2.0)
        );
        assert!(resources("pentium-pro", "x").is_none());
    }

    #[test]
    fn microarch_corner_cases() {
        let intel = |model, stepping| {
            identify(
                "GenuineIntel",
                Some(6),
                Some(model),
                Some(stepping),
                "Xeon",
                &[],
            )
            .value
            .unwrap_or_default()
        };
        assert_eq!(intel(0x55, 4), "skylake-sp");
        assert_eq!(intel(0x55, 7), "cascadelake");
        assert_eq!(intel(0x55, 5), "cascadelake");
        assert_eq!(intel(0x55, 11), "cooperlake");
        assert_eq!(intel(0x55, 8), "");
        assert_eq!(intel(0x8F, 8), "sapphirerapids");
        assert_eq!(intel(0x3F, 2), "haswell");
        assert_eq!(intel(0xAD, 1), "graniterapids");
        let amd = |family, model| {
            identify(
                "AuthenticAMD",
                Some(family),
                Some(model),
                Some(0),
                "EPYC",
                &[],
            )
            .value
            .unwrap_or_default()
        };
        assert_eq!(amd(0x17, 0x01), "zen");
        assert_eq!(amd(0x17, 0x2F), "zen");
        assert_eq!(amd(0x17, 0x31), "zen2");
        assert_eq!(amd(0x19, 0x01), "zen3");
        assert_eq!(amd(0x19, 0x11), "zen4");
        assert_eq!(amd(0x19, 0x21), "zen3");
        assert_eq!(amd(0x19, 0x61), "zen4");
        assert_eq!(amd(0x19, 0xA0), "zen4");
        assert_eq!(amd(0x19, 0x90), "");
        assert_eq!(amd(0x1A, 0x02), "zen5");

        let no_stepping = identify("GenuineIntel", Some(6), Some(0x55), None, "Xeon", &[]);
        assert!(no_stepping.value.is_none());
        let unknown = identify("GenuineIntel", Some(6), Some(0x99), Some(1), "Mystery", &[]);
        assert_eq!(
            unknown.reason.as_deref(),
            Some(
                "CPUID family 6 model 153 (GenuineIntel), model 0x99, 'Mystery', is not in \
                 the microarchitecture table"
            )
        );
        assert!(
            identify("HygonGenuine", Some(0x18), Some(1), Some(1), "Hygon", &[])
                .value
                .is_none()
        );
    }
}
