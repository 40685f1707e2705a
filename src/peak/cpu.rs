//! The CPU peaks: the factors every row shares (cores, clocks, the pipes of the
//! microarchitecture table) and one row per precision × ISA × FMA × form a kernel measures.

use serde::{Deserialize, Serialize};

use super::clock::{clock_factor, turbo_factor};
use super::instruction::width_index;
use super::{Factor, Form, Isa, PeakRef, Precision, trim_float};
use crate::options::PeakOverrides;
use crate::sysinfo::SysInfo;
use crate::sysinfo::microarch::{self, CoreResources};

/// Measurements that can stand in for unknown factors.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MeasuredFactors {
    /// Clock measured on one core, GHz, when its two chains agree (`sysinfo::clock`).
    pub ghz: Option<f64>,
    /// What the clock probe read: both chains' figures, or why they are no clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ghz_detail: Option<String>,
    /// FMA instructions retired per cycle on one core at the widest vector ISA.
    pub fma_per_cycle: Option<f64>,
    /// The ISA the FMA probe used.
    pub fma_isa: Option<Isa>,
    /// The clock right after 512-bit FMAs over the clock right after plain adds
    /// (`sysinfo::clock::ratio_after`): a core's AVX-512 frequency licence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avx512_clock_ratio: Option<f64>,
    /// The same right after AMX tile multiplies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amx_clock_ratio: Option<f64>,
    /// Cores counted from a core-to-core matrix that shows siblings the kernel hides
    /// (`sysinfo::c2c::measured_cores`, on its clear-signal rule); the cores factor then
    /// counts these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_cores: Option<crate::sysinfo::c2c::MeasuredCores>,
}

/// The factors shared by every CPU peak.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CpuFactors {
    pub cores: Factor,
    pub ghz: Factor,
    /// The turbo clock, for the peak at turbo beside the one at the base clock.
    #[serde(default, skip_serializing_if = "Factor::is_unrecorded")]
    pub turbo_ghz: Factor,
    /// The clock measured while running, when a probe ran (for efficiency at the real clock).
    pub measured_ghz: Factor,
    /// FMA pipes at 128/256/512 bits.
    pub fma_units: [Factor; 3],
    pub fadd_units: [Factor; 3],
    pub vec_int_units: [Factor; 3],
    pub scalar_int_units: Factor,
    /// 512-bit VNNI dot products (`vpdpbusd`, `vpdpwssd`) per cycle.
    #[serde(default, skip_serializing_if = "Factor::is_unrecorded")]
    pub vnni_units: Factor,
    /// 512-bit bf16 dot products (`vdpbf16ps`) per cycle.
    #[serde(default, skip_serializing_if = "Factor::is_unrecorded")]
    pub bf16_dot_units: Factor,
    /// AMX tile multiplies per cycle.
    #[serde(default, skip_serializing_if = "Factor::is_unrecorded")]
    pub amx_tiles_per_cycle: Factor,
    /// The clock of the 512-bit floating-point and dot-product rows, where the core runs them
    /// slower than the measured clock (its AVX-512 licence; see [`licence_factor`]).
    #[serde(default, skip_serializing_if = "Factor::is_unrecorded")]
    pub avx512_ghz: Factor,
    /// The clock of the AMX rows, likewise.
    #[serde(default, skip_serializing_if = "Factor::is_unrecorded")]
    pub amx_ghz: Factor,
}

/// The peak of one precision × ISA × kind of instruction.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CpuPeak {
    pub precision: Precision,
    pub isa: Isa,
    /// Whether the peak assumes fused multiply-add instructions.
    pub fma: bool,
    /// Element-wise arithmetic, a dot product or an AMX tile multiply.
    #[serde(default, skip_serializing_if = "Form::is_arith")]
    pub form: Form,
    /// Elements per instruction (for a dot product, the 8- or 16-bit inputs; for a tile, its
    /// multiply-adds).
    pub lanes: u32,
    /// Instructions per cycle per core (the units factor).
    pub units: Factor,
    /// Ops one instruction counts per lane (2 for an FMA).
    pub ops_per_lane: u32,
    /// Ops per cycle per core = lanes × units × ops per lane.
    pub per_cycle_per_core: Option<f64>,
    /// All cores at the effective clock (see [`CpuFactors::effective_clock`]), in G op/s.
    pub value: Option<f64>,
    /// All cores at the base clock, when it is known (not only measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_base: Option<f64>,
    /// All cores at the turbo clock, when it is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_turbo: Option<f64>,
    pub unit: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CpuPeaks {
    pub factors: CpuFactors,
    /// ISAs the CPU has, as the kernel reports them.
    pub isas: Vec<Isa>,
    pub table: Vec<CpuPeak>,
}

/// The ISAs the kernel reports (and the OS has enabled).
pub fn isas_of(info: &SysInfo) -> Vec<Isa> {
    let has = |f: &str| info.cpu.simd.iter().any(|s| s == f);
    let mut isas = vec![Isa::Scalar];
    if has("sse2") {
        isas.push(Isa::Sse);
    }
    if has("avx2") {
        isas.push(Isa::Avx2);
    }
    if has("avx512f") {
        isas.push(Isa::Avx512);
    }
    isas
}

pub(super) fn cpu_peaks(
    info: &SysInfo,
    flags: &PeakOverrides,
    probes: &MeasuredFactors,
) -> CpuPeaks {
    let isas = isas_of(info);
    let factors = cpu_factors(info, flags, probes, &isas);
    let table = peak_rows(info, &factors, &isas);
    CpuPeaks {
        factors,
        isas,
        table,
    }
}

/// The factors every row shares: the cores, the clocks and the pipes.
fn cpu_factors(
    info: &SysInfo,
    flags: &PeakOverrides,
    probes: &MeasuredFactors,
    isas: &[Isa],
) -> CpuFactors {
    let cores = match (flags.cores, &probes.measured_cores) {
        (Some(c), _) => Factor::known(c as f64, "flag", "--cores"),
        // Only fewer cores than the kernel shows: the matrix found siblings it hides.
        (None, Some(m)) if m.cores > 0 && m.cores < info.cpu.physical_cores => {
            Factor::known(m.cores as f64, "measured", m.detail.clone())
        }
        (None, _) => Factor::known(
            info.cpu.physical_cores as f64,
            "cpuinfo",
            "physical cores (SMT siblings share execution units)",
        ),
    };
    let ghz = clock_factor(info, flags, probes);
    let turbo_ghz = turbo_factor(info, flags, &ghz);
    let measured_ghz = match (probes.ghz, &probes.ghz_detail) {
        (Some(g), Some(detail)) => Factor::known(g, "measured", detail.clone()),
        (Some(g), None) => Factor::known(g, "measured", "dependent chains on one core"),
        (None, Some(why)) => Factor::unknown(why.clone()),
        (None, None) => Factor::unknown("no clock probe ran"),
    };
    let pipes = pipe_factors(info, flags, probes, isas);
    let avx512_ghz = licence_factor(probes.avx512_clock_ratio, &measured_ghz, "512-bit FMAs");
    let amx_ghz = licence_factor(probes.amx_clock_ratio, &measured_ghz, "AMX tile multiplies");
    CpuFactors {
        cores,
        ghz,
        turbo_ghz,
        measured_ghz,
        fma_units: pipes.fma_units,
        fadd_units: pipes.fadd_units,
        vec_int_units: pipes.vec_int_units,
        scalar_int_units: pipes.scalar_int_units,
        vnni_units: pipes.vnni_units,
        bf16_dot_units: pipes.bf16_dot_units,
        amx_tiles_per_cycle: pipes.amx_tiles_per_cycle,
        avx512_ghz,
        amx_ghz,
    }
}

/// The clock a core holds while it runs `what`: the measured clock × `ratio`, the clock right
/// after them over the clock right after plain adds (`sysinfo::clock::ratio_after`). Known
/// where the ratio lies more than [`LICENCE`](crate::sysinfo::clock::LICENCE) below 1, else
/// unknown with the ratio (the instructions keep the clock). Intel's server cores lower their
/// clock for 512-bit floating-point and multiply work and for AMX ("licences"), and only when
/// the clock at rest is above the licence's: a peak at the clock at rest is then too high by
/// the drop.
fn licence_factor(ratio: Option<f64>, measured: &Factor, what: &str) -> Factor {
    let (Some(ratio), Some(rest)) = (ratio, measured.value) else {
        return Factor::default();
    };
    let reading = format!(
        "a dependent add chain timed right after 2 ms of {what} ran at {ratio:.3} of its rate \
         right after 2 ms of plain adds (the fastest of 9 each, alternating)"
    );
    if let Some(ghz) = crate::sysinfo::clock::licence_clock(rest, ratio) {
        Factor::known(
            ghz,
            "measured",
            format!("{reading}: the core's clock for them, {ghz:.3} GHz at the measured {rest:.3}"),
        )
    } else {
        Factor::unknown(format!(
            "{reading}: within {:.0} %, so they keep the measured clock",
            crate::sysinfo::clock::LICENCE * 100.0
        ))
    }
}

/// The pipe factors of [`CpuFactors`].
struct PipeFactors {
    fma_units: [Factor; 3],
    fadd_units: [Factor; 3],
    vec_int_units: [Factor; 3],
    scalar_int_units: Factor,
    vnni_units: Factor,
    bf16_dot_units: Factor,
    amx_tiles_per_cycle: Factor,
}

/// The pipes of the microarchitecture table, with `--fma-units` and `--int-units` over the
/// widest ISA's, and the FMA probe's count where the table has none.
fn pipe_factors(
    info: &SysInfo,
    flags: &PeakOverrides,
    probes: &MeasuredFactors,
    isas: &[Isa],
) -> PipeFactors {
    let name = info.cpu.microarch.value.clone().unwrap_or_default();
    let table = microarch::resources(&name, &info.cpu.model_name);

    // Each factor's detail names its own figures of the row; the FMA pipes' line is the row's.
    let named =
        |row: &CoreResources, figures: String| format!("{name}: {figures} ({})", row.reference);
    let from_table = |pick: fn(&CoreResources) -> [f64; 3], what: &str| -> [Factor; 3] {
        [0, 1, 2].map(|i| match &table {
            Some((row, detail)) => {
                let detail = match what {
                    "FMA units" => detail.clone(),
                    _ => {
                        let per_width = pick(row).map(|u| u.to_string()).join("/");
                        let pipes = what.split(';').next().unwrap_or(what);
                        named(row, format!("{per_width} {pipes} at 128/256/512 bit"))
                    }
                };
                Factor::known(pick(row)[i], "microarch-table", detail)
            }
            None => Factor::unknown(format!(
                "{what}: microarchitecture '{}' of '{}' is not in the table{}",
                if name.is_empty() { "unknown" } else { &name },
                info.cpu.model_name,
                if what == "FMA units" {
                    "; give --fma-units or let the FMA probe measure it"
                } else {
                    ""
                }
            )),
        })
    };
    let fma_units = fma_units(
        from_table(|r| r.fma_units, "FMA units"),
        flags,
        probes,
        isas,
    );
    let mut vec_int_units = from_table(
        |r| r.vec_int_units,
        "vector integer units; give --int-units",
    );
    let mut scalar_int_units = match &table {
        Some((row, _)) => Factor::known(
            row.scalar_int_units,
            "microarch-table",
            named(row, format!("{} scalar integer ALUs", row.scalar_int_units)),
        ),
        None => Factor::unknown(
            "scalar integer ALUs: microarchitecture not in the table; give --int-units on a CPU \
             without vectors",
        ),
    };
    if let Some(units) = flags.int_units {
        // As --fma-units: the units of the widest ISA the CPU has.
        let flag = Factor::known(units, "flag", "--int-units");
        match isas.last() {
            Some(&isa) if isa != Isa::Scalar => vec_int_units[width_index(isa)] = flag,
            _ => scalar_int_units = flag,
        }
    }
    // An entry of 0 says the ISA is absent there: a CPU that reports it anyway (a table out of
    // date) gets no peak rather than a peak of 0.
    let extension = |pick: fn(&CoreResources) -> Option<f64>, what: &str| match &table {
        Some((row, _)) => match pick(row) {
            Some(units) if units > 0.0 => Factor::known(
                units,
                "microarch-table",
                named(row, format!("{units} {what}")),
            ),
            Some(_) => Factor::unknown(format!("{what}: absent on '{name}' by the table")),
            None => Factor::unknown(format!("{what}: the table has no figure for '{name}'")),
        },
        None => Factor::unknown(format!("{what}: microarchitecture not in the table")),
    };
    PipeFactors {
        fma_units,
        fadd_units: from_table(|r| r.fadd_units, "FP add-only pipes"),
        vec_int_units,
        scalar_int_units,
        vnni_units: extension(|r| r.vnni_units, "VNNI dot products per cycle"),
        bf16_dot_units: extension(|r| r.bf16_dot_units, "bf16 dot products per cycle"),
        amx_tiles_per_cycle: extension(|r| r.amx_tiles_per_cycle, "AMX tile multiplies per cycle"),
    }
}

/// The FMA units: `--fma-units` over the widest ISA's figure, or where the table has none at
/// the width the FMA probe ran, the count read from the probe's rate.
fn fma_units(
    mut units: [Factor; 3],
    flags: &PeakOverrides,
    probes: &MeasuredFactors,
    isas: &[Isa],
) -> [Factor; 3] {
    if let Some(flag) = flags.fma_units {
        // The flag names the units of the widest ISA the CPU has (what a user reads in a spec).
        let widest = width_index(*isas.last().unwrap_or(&Isa::Scalar));
        units[widest] = Factor::known(flag, "flag", "--fma-units");
    } else if let (Some(per_cycle), Some(isa)) = (probes.fma_per_cycle, probes.fma_isa) {
        let i = width_index(isa);
        if units[i].value.is_none() {
            units[i] = units_from_rate(
                per_cycle,
                &format!(
                    "FMA instructions per cycle measured at {} on one core",
                    isa.name()
                ),
            );
        }
    }
    units
}

/// How far from a whole number a measured rate may lie and still be read as a unit count.
pub(super) const UNIT_ROUNDING: f64 = 0.15;

/// A unit count from a measured rate per cycle: the nearest whole number when the rate lies
/// within [`UNIT_ROUNDING`] of it, else unknown with the rate stated (0.31 FMA per cycle is not
/// "1 unit": it says the clock the rate was divided by is wrong, or the core was shared).
pub(super) fn units_from_rate(per_cycle: f64, what: &str) -> Factor {
    let whole = per_cycle.round();
    if whole >= 1.0 && (per_cycle - whole).abs() <= UNIT_ROUNDING {
        Factor::known(
            whole,
            "measured",
            format!("{} {what} (rounded)", trim_float(per_cycle)),
        )
    } else {
        Factor::unknown(format!(
            "{} {what}, more than {UNIT_ROUNDING} from a whole number of units: no count is read              from it; give --fma-units",
            trim_float(per_cycle)
        ))
    }
}

/// One row per kind of instruction a kernel measures on this CPU: f64, f32 (and f16 where the
/// CPU has AVX512-FP16) with and without FMA, the integer adds, and at 512 bit the dot
/// products and AMX tiles the CPU has.
fn peak_rows(info: &SysInfo, factors: &CpuFactors, isas: &[Isa]) -> Vec<CpuPeak> {
    let mut rows = Vec::new();
    let has = |f: &str| info.cpu.simd.iter().any(|s| s == f);
    for &isa in isas {
        for precision in [Precision::F64, Precision::F32, Precision::F16] {
            if precision == Precision::F16 && !(isa == Isa::Avx512 && has("avx512_fp16")) {
                continue;
            }
            for fma in [true, false] {
                if fma && isa != Isa::Scalar && !has("fma") && isa != Isa::Avx512 {
                    continue;
                }
                // f16 is measured with vfmadd231ph only.
                if precision == Precision::F16 && !fma {
                    continue;
                }
                rows.push(cpu_row(factors, precision, isa, fma, Form::Arith));
            }
        }
        for precision in [
            Precision::I8,
            Precision::I16,
            Precision::I32,
            Precision::I64,
        ] {
            rows.push(cpu_row(factors, precision, isa, false, Form::Arith));
        }
        if isa == Isa::Avx512 {
            // The dot products and tiles a kernel measures, where the CPU has them.
            let dots = [
                ("avx512_bf16", Precision::Bf16, Form::Dot),
                ("avx512_vnni", Precision::I8, Form::Dot),
                ("avx512_vnni", Precision::I16, Form::Dot),
                ("amx_bf16", Precision::Bf16, Form::Tile),
                ("amx_int8", Precision::I8, Form::Tile),
            ];
            for (flag, precision, form) in dots {
                if has(flag) {
                    rows.push(cpu_row(factors, precision, isa, false, form));
                }
            }
        }
    }
    rows
}

/// The execution resource that bounds one kind of instruction: the entry of the
/// microarchitecture table (and the factor of [`CpuFactors`]) its units come from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pipe {
    /// The FMA pipes (FP multiply where there is no FMA) at a width (index into the arrays).
    Fma(usize),
    /// Separate multiplies and adds: the FMA pipes and the FADD pipes.
    MulAdd(usize),
    /// The vector integer add pipes at a width.
    VecInt(usize),
    /// The scalar integer ALUs.
    ScalarInt,
    /// 512-bit f16 FMAs (on the FMA pipes where present).
    F16Fma,
    /// 512-bit VNNI dot products.
    Vnni,
    /// 512-bit bf16 dot products.
    Bf16Dot,
    /// AMX tile multiplies.
    AmxTile,
}

impl Pipe {
    /// The pipe one kind of instruction runs on.
    pub fn of(precision: Precision, isa: Isa, fma: bool, form: Form) -> Pipe {
        let w = width_index(isa);
        match form {
            Form::Dot if precision == Precision::Bf16 => Pipe::Bf16Dot,
            Form::Dot => Pipe::Vnni,
            Form::Tile => Pipe::AmxTile,
            Form::Arith if !precision.is_float() && isa == Isa::Scalar => Pipe::ScalarInt,
            Form::Arith if !precision.is_float() => Pipe::VecInt(w),
            Form::Arith if precision == Precision::F16 => Pipe::F16Fma,
            Form::Arith if fma => Pipe::Fma(w),
            Form::Arith => Pipe::MulAdd(w),
        }
    }

    /// This pipe's entry in a row of the microarchitecture table: per cycle, 0 where the ISA
    /// is absent, `None` where the row has no entry.
    pub fn in_table(self, core: &CoreResources) -> Option<f64> {
        match self {
            Pipe::Fma(w) => Some(core.fma_units[w]),
            Pipe::MulAdd(w) => Some(core.fma_units[w] + core.fadd_units[w]),
            Pipe::VecInt(w) => Some(core.vec_int_units[w]),
            Pipe::ScalarInt => Some(core.scalar_int_units),
            Pipe::F16Fma => core.f16_fma_units,
            Pipe::Vnni => core.vnni_units,
            Pipe::Bf16Dot => core.bf16_dot_units,
            Pipe::AmxTile => core.amx_tiles_per_cycle,
        }
    }
}

/// The units factor for one kind of instruction.
fn units_for(f: &CpuFactors, precision: Precision, isa: Isa, fma: bool, form: Form) -> Factor {
    match Pipe::of(precision, isa, fma, form) {
        Pipe::Bf16Dot => f.bf16_dot_units.clone(),
        Pipe::Vnni => f.vnni_units.clone(),
        Pipe::AmxTile => f.amx_tiles_per_cycle.clone(),
        Pipe::ScalarInt => f.scalar_int_units.clone(),
        Pipe::VecInt(w) => f.vec_int_units[w].clone(),
        Pipe::Fma(w) => f.fma_units[w].clone(),
        // The table's test holds f16 to the 512-bit FMA pipes wherever it is present.
        Pipe::F16Fma => f.fma_units[width_index(Isa::Avx512)].clone(),
        // Separate multiplies and adds: multiplies on the FMA pipes, adds on FMA or FADD pipes.
        Pipe::MulAdd(w) => match (f.fma_units[w].value, f.fadd_units[w].value) {
            (Some(a), Some(b)) => Factor::known(
                a + b,
                &f.fma_units[w].source,
                format!("{} FMA/FMUL + {} FADD pipes", trim_float(a), trim_float(b)),
            ),
            _ => f.fma_units[w].clone(),
        },
    }
}

fn cpu_row(f: &CpuFactors, precision: Precision, isa: Isa, fma: bool, form: Form) -> CpuPeak {
    let units = units_for(f, precision, isa, fma, form);
    let lanes = match form {
        Form::Tile => tile_multiply_adds(precision),
        _ => precision.lanes(isa),
    };
    // A multiply-add (FMA, or one pair of a dot product) is 2 ops.
    let ops_per_lane = if fma || !form.is_arith() { 2 } else { 1 };
    let per_cycle = units.value.map(|u| u * lanes as f64 * ops_per_lane as f64);
    let at = |clock: Option<&Factor>| match (per_cycle, f.cores.value, clock?.value) {
        (Some(p), Some(c), Some(g)) => Some(p * c * g),
        _ => None,
    };
    CpuPeak {
        precision,
        isa,
        fma,
        form,
        lanes,
        units,
        ops_per_lane,
        per_cycle_per_core: per_cycle,
        value: at(Some(f.clock_for(isa, precision, form))),
        at_base: at(f.base_clock()),
        at_turbo: at(f.turbo_clock()),
        unit: precision.unit().to_string(),
    }
}

/// Multiply-adds of one AMX tile instruction: 16 × 16 32-bit results, each of 64 int8 or 32
/// bf16 pairs.
pub const fn tile_multiply_adds(precision: Precision) -> u32 {
    16 * 16 * (512 / precision.bits())
}

impl CpuPeaks {
    /// The peak row of element-wise arithmetic.
    pub fn row(&self, precision: Precision, isa: Isa, fma: bool) -> Option<&CpuPeak> {
        self.form_row(precision, isa, fma, Form::Arith)
    }

    /// The peak row for a case of any form.
    pub fn form_row(
        &self,
        precision: Precision,
        isa: Isa,
        fma: bool,
        form: Form,
    ) -> Option<&CpuPeak> {
        self.table
            .iter()
            .find(|r| r.precision == precision && r.isa == isa && r.fma == fma && r.form == form)
    }

    /// Peak for `threads` threads (capped at the core count) at `ghz` (default: the
    /// [effective clock](CpuFactors::effective_clock)), with the formula and the source of each
    /// factor.
    pub fn for_threads(
        &self,
        row: &CpuPeak,
        threads: usize,
        ghz: Option<&Factor>,
    ) -> Option<PeakRef> {
        let clock = ghz.unwrap_or_else(|| self.factors.clock_for(row.isa, row.precision, row.form));
        let cores = self.factors.cores.value?;
        let used = (threads as f64).min(cores);
        let value = used * clock.value? * row.per_cycle_per_core?;
        let mut pair = self.factors.pair(row.per_cycle_per_core?, used);
        pair.used_ghz = Some(clock.clone());
        let source = format!(
            "{} cores × {} GHz × {} lanes × {} units × {} op = {} {}; {}; {}; {}",
            trim_float(used),
            trim_float(clock.value?),
            row.lanes,
            trim_float(row.units.value?),
            row.ops_per_lane,
            trim_float(value),
            row.unit,
            clock.describe("clock"),
            row.units.describe("units"),
            pair.describe(&row.unit),
        );
        Some(PeakRef {
            value,
            unit: row.unit.clone(),
            source,
            pair: Some(pair),
        })
    }
}
