//! Theoretical peaks, each factor with where it came from.
//!
//! CPU: peak op/s = cores × clock × lanes × units × ops per instruction, where
//! - *cores* are physical cores (SMT siblings share the execution units), capped by the threads
//!   a case uses;
//! - *clock* is the nominal clock: a `--cpu-ghz` flag, else sysfs `base_frequency`, else the
//!   model string's "@ 2.50GHz", else the kernel's `cpu MHz` (under a hypervisor the host's
//!   nominal clock), else the clock measured on one core by a dependent chain of adds timed by
//!   the thread's CPU time (`sysinfo::clock::measure_ghz`). Between the model string and
//!   `cpu MHz` comes the small table of known models (`sysinfo::clocks`), for names that carry
//!   no clock (AMD's);
//! - beside it, the *turbo* clock: a `--cpu-turbo-ghz` flag, else sysfs `cpuinfo_max_freq`,
//!   else the table of known models (the vendor's max turbo of one core). Every CPU peak is
//!   also given at the base and at the turbo clock, the pair, with the clock the probe measured
//!   beside them, and says which of the two is unknown;
//! - *lanes* = vector width / precision (512/64 = 8 doubles for AVX-512);
//! - *units* are the vector pipes that can start one such instruction per cycle, from the table
//!   of microarchitectures in `sysinfo::microarch` (vendor optimisation manuals), a
//!   `--fma-units` flag, or a measurement;
//! - *ops per instruction*: an FMA is 2 FLOPs (a multiply and an add); an add or multiply is 1;
//!   an integer add is 1 op per lane.
//!
//! Memory: channels × transfer rate (MT/s) × 8 bytes per transfer (a 64-bit channel), in GB/s.
//! NIC: the link speed. Disk: only the rating the user gives. A factor that is unknown makes the
//! peak unknown, and the output says which flag supplies it.

use serde::{Deserialize, Serialize};

use crate::names::named_enum;
use crate::options::PeakArgs;
use crate::sysinfo::SysInfo;
use crate::sysinfo::clocks;
use crate::sysinfo::microarch::{self, CoreResources};

/// A theoretical peak a result is compared with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeakRef {
    pub value: f64,
    pub unit: String,
    /// How the peak was derived, with the source of each factor.
    pub source: String,
    /// A CPU peak at the base and at the turbo clock, with the measured clock beside them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair: Option<ClockPair>,
}

/// A CPU peak at the base and at the turbo clock (each `null` when its clock is unknown; the
/// factor says why), with the clock the probe measured on one core beside them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClockPair {
    /// The peak at the base clock, in the peak's unit.
    pub at_base: Option<f64>,
    /// The base clock in GHz and its source.
    pub base_ghz: Factor,
    /// The peak at the turbo clock, in the peak's unit.
    pub at_turbo: Option<f64>,
    /// The turbo clock in GHz and its source.
    pub turbo_ghz: Factor,
    /// The clock measured by the probe (a dependent add chain on one core), GHz.
    pub measured_ghz: Option<f64>,
}

impl ClockPair {
    /// "at base 2.3 GHz: 73.6, at turbo 3.1 GHz: 99.2 GFLOP/s (base: …; turbo: …); measured
    /// 2.6 GHz", or which of the two is unknown and why.
    pub fn describe(&self, unit: &str) -> String {
        let at = |name: &str, peak: Option<f64>, clock: &Factor| match (peak, clock.value) {
            (Some(p), Some(g)) => format!(
                "at {name} {} GHz: {} {unit} ({}: {})",
                trim_float(g),
                trim_float((p * 10.0).round() / 10.0),
                clock.source,
                clock.detail
            ),
            _ => format!("{name} clock unknown ({})", clock.detail),
        };
        let mut out = format!(
            "{}; {}",
            at("base", self.at_base, &self.base_ghz),
            at("turbo", self.at_turbo, &self.turbo_ghz)
        );
        if let Some(m) = self.measured_ghz {
            out.push_str(&format!("; measured {} GHz", trim_float(m)));
        }
        out
    }
}

/// One factor of a peak: a value and where it came from, or why it is unknown.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Factor {
    pub value: Option<f64>,
    /// `flag`, `sysfs`, `cpuinfo`, `model-string`, `known-models`, `microarch-table`,
    /// `measured`, `dmi`, `definition` or `unknown`.
    pub source: String,
    /// The detail: which file, which table row, which flag, or how to supply it.
    pub detail: String,
}

impl Default for Factor {
    /// A factor a document written before it existed does not carry.
    fn default() -> Self {
        Factor::unknown("not recorded")
    }
}

impl Factor {
    /// Whether this is the default of a document that did not record the factor.
    fn is_unrecorded(&self) -> bool {
        *self == Factor::default()
    }

    pub fn known(value: f64, source: &str, detail: impl Into<String>) -> Self {
        Factor {
            value: Some(value),
            source: source.to_string(),
            detail: detail.into(),
        }
    }

    pub fn unknown(detail: impl Into<String>) -> Self {
        Factor {
            value: None,
            source: "unknown".to_string(),
            detail: detail.into(),
        }
    }

    fn describe(&self, name: &str) -> String {
        match self.value {
            Some(v) => format!(
                "{name} {} ({}: {})",
                trim_float(v),
                self.source,
                self.detail
            ),
            None => format!("{name} unknown ({})", self.detail),
        }
    }
}

fn trim_float(v: f64) -> String {
    let s = format!("{v:.4}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

named_enum! {
    /// Vector ISAs, by register width.
    pub enum Isa {
        /// one element per instruction
        Scalar = "scalar",
        /// 128-bit SSE2 (and its successors)
        Sse = "sse" | "sse2",
        /// 256-bit AVX2 (integer) and AVX (float)
        Avx2 = "avx2" | "avx",
        /// 512-bit AVX-512
        Avx512 = "avx512",
    }
}

impl Isa {
    /// Register width in bits (64 for scalar: one element of up to 64 bits).
    pub fn bits(self) -> u32 {
        match self {
            Isa::Scalar => 64,
            Isa::Sse => 128,
            Isa::Avx2 => 256,
            Isa::Avx512 => 512,
        }
    }
}

named_enum! {
    /// Element types.
    pub enum Precision {
        I8 = "i8",
        I16 = "i16",
        I32 = "i32",
        I64 = "i64",
        /// IEEE half precision (AVX512-FP16)
        F16 = "f16",
        /// bfloat16: 8-bit exponent, 8-bit significand (AVX512_BF16 dot products, AMX-BF16)
        Bf16 = "bf16",
        F32 = "f32",
        F64 = "f64",
    }
}

impl Precision {
    pub const fn bits(self) -> u32 {
        match self {
            Precision::I8 => 8,
            Precision::I16 | Precision::F16 | Precision::Bf16 => 16,
            Precision::I32 | Precision::F32 => 32,
            Precision::I64 | Precision::F64 => 64,
        }
    }

    pub const fn is_float(self) -> bool {
        matches!(
            self,
            Precision::F16 | Precision::Bf16 | Precision::F32 | Precision::F64
        )
    }

    /// "GFLOP/s" for floating point, "GIOP/s" for integers.
    pub fn unit(self) -> &'static str {
        if self.is_float() { "GFLOP/s" } else { "GIOP/s" }
    }

    /// Lanes of this precision in one register of `isa` (1 for scalar).
    pub fn lanes(self, isa: Isa) -> u32 {
        match isa {
            Isa::Scalar => 1,
            _ => isa.bits() / self.bits(),
        }
    }
}

named_enum! {
    /// The form of a kernel's instruction.
    pub enum Form {
        /// one operation per lane: an add, a multiply or an FMA
        Arith = "arith",
        /// a dot product of 8- or 16-bit pairs into 32-bit lanes (VNNI, AVX512_BF16)
        Dot = "dot",
        /// an AMX tile multiply (16 × 16 32-bit results per instruction)
        Tile = "tile",
    }
}

impl Form {
    fn is_arith(&self) -> bool {
        *self == Form::Arith
    }
}

#[allow(clippy::derivable_impls)] // named_enum! takes no #[default] on a variant
impl Default for Form {
    fn default() -> Self {
        Form::Arith
    }
}

/// Which entry of the [`CoreResources`] arrays (128, 256, 512 bit) an ISA uses.
fn width_index(isa: Isa) -> usize {
    match isa {
        Isa::Scalar | Isa::Sse => 0,
        Isa::Avx2 => 1,
        Isa::Avx512 => 2,
    }
}

/// Inputs of the peak computation that do not come from `SysInfo`: flags and measurements.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PeakOverrides {
    pub cpu_ghz: Option<f64>,
    pub cores: Option<u32>,
    pub fma_units: Option<f64>,
    pub mem_channels: Option<u32>,
    pub mem_mts: Option<u32>,
    pub nic_gbps: Option<f64>,
    pub disk_mbps: Option<f64>,
    pub disk_iops: Option<f64>,
}

/// Measurements that can stand in for unknown factors.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Probes {
    /// Clock measured by a dependent add chain on one core, GHz.
    pub ghz: Option<f64>,
    /// FMA instructions retired per cycle on one core at the widest vector ISA.
    pub fma_per_cycle: Option<f64>,
    /// The ISA the FMA probe used.
    pub fma_isa: Option<Isa>,
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

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MemoryPeak {
    pub channels: Factor,
    pub mts: Factor,
    pub bytes_per_transfer: Factor,
    /// GB/s (decimal), when every factor is known.
    pub value: Option<f64>,
    pub unit: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NicPeak {
    pub interface: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub loopback: bool,
    pub gbps: Factor,
}

/// The device's ratings, which only the user can give. `mbps` and `iops` are the flags that rate
/// reads and writes alike (`--disk-mbps`, `--disk-iops`); the per-op fields are what read and
/// write cases use: the per-op flag, else the shared one.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DiskPeak {
    pub mbps: Factor,
    pub iops: Factor,
    #[serde(default, skip_serializing_if = "Factor::is_unrecorded")]
    pub read_mbps: Factor,
    #[serde(default, skip_serializing_if = "Factor::is_unrecorded")]
    pub write_mbps: Factor,
    #[serde(default, skip_serializing_if = "Factor::is_unrecorded")]
    pub read_iops: Factor,
    #[serde(default, skip_serializing_if = "Factor::is_unrecorded")]
    pub write_iops: Factor,
}

impl DiskPeak {
    fn from_flags(flags: &PeakArgs) -> DiskPeak {
        let per_op = |own: Option<f64>, own_flag: &str, both: Option<f64>, both_flag: &str| match (
            own, both,
        ) {
            (Some(v), _) => Factor::known(v, "flag", own_flag),
            (None, Some(v)) => Factor::known(v, "flag", both_flag),
            (None, None) => Factor::unknown(format!(
                "not readable from the system: give the device's rating with {own_flag} \
                     or {both_flag}"
            )),
        };
        DiskPeak {
            mbps: flag_or_unknown(flags.disk_mbps, "--disk-mbps", "the device's rated MB/s"),
            iops: flag_or_unknown(flags.disk_iops, "--disk-iops", "the device's rated IOPS"),
            read_mbps: per_op(
                flags.disk_read_mbps,
                "--disk-read-mbps",
                flags.disk_mbps,
                "--disk-mbps",
            ),
            write_mbps: per_op(
                flags.disk_write_mbps,
                "--disk-write-mbps",
                flags.disk_mbps,
                "--disk-mbps",
            ),
            read_iops: per_op(
                flags.disk_read_iops,
                "--disk-read-iops",
                flags.disk_iops,
                "--disk-iops",
            ),
            write_iops: per_op(
                flags.disk_write_iops,
                "--disk-write-iops",
                flags.disk_iops,
                "--disk-iops",
            ),
        }
    }

    /// The (read, write) ratings in MB/s or IOPS; a document written before the per-op ratings
    /// existed falls back to the shared one.
    pub fn ratings(&self, iops: bool) -> (&Factor, &Factor) {
        let (shared, read, write) = if iops {
            (&self.iops, &self.read_iops, &self.write_iops)
        } else {
            (&self.mbps, &self.read_mbps, &self.write_mbps)
        };
        fn or_shared<'a>(f: &'a Factor, shared: &'a Factor) -> &'a Factor {
            if f.is_unrecorded() { shared } else { f }
        }
        (or_shared(read, shared), or_shared(write, shared))
    }

    /// The rated peak of a case whose bytes (or I/Os) are `read_fraction` reads (1 for a read
    /// case, 0 for a write case), in MB/s (`iops` false) or IOPS, with its source. A mix uses
    /// the time the device needs: a fraction f of reads at rating R and 1 − f of writes at W take
    /// f/R + (1 − f)/W per unit, so the peak is the weighted harmonic mean 1 / (f/R + (1 − f)/W)
    /// (reads and writes served one after another, not overlapped).
    pub fn for_mix(&self, read_fraction: f64, iops: bool) -> Option<(f64, String)> {
        let (read, write) = self.ratings(iops);
        let name = |f: &Factor| format!("{}: {}", f.source, f.detail);
        if read_fraction >= 1.0 {
            return read
                .value
                .map(|v| (v, format!("the device's read rating ({})", name(read))));
        }
        if read_fraction <= 0.0 {
            return write
                .value
                .map(|v| (v, format!("the device's write rating ({})", name(write))));
        }
        let (r, w) = (read.value?, write.value?);
        let f = read_fraction;
        let value = 1.0 / (f / r + (1.0 - f) / w);
        Some((
            value,
            format!(
                "the device's ratings weighted by the mix: {} % reads at {} ({}), {} % writes at \
                 {} ({}); peak = 1 / (f/R + (1 − f)/W), the harmonic mean by the time each \
                 part takes",
                trim_float(f * 100.0),
                trim_float(r),
                name(read),
                trim_float((1.0 - f) * 100.0),
                trim_float(w),
                name(write)
            ),
        ))
    }
}

/// Every theoretical peak of the host.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Peaks {
    pub cpu: CpuPeaks,
    pub memory: MemoryPeak,
    pub nics: Vec<NicPeak>,
    pub disk: DiskPeak,
}

impl Peaks {
    pub fn compute(info: &SysInfo, flags: &PeakArgs, probes: &Probes) -> Peaks {
        Peaks {
            cpu: cpu_peaks(info, flags, probes),
            memory: memory_peak(info, flags),
            nics: nic_peaks(info, flags),
            disk: DiskPeak::from_flags(flags),
        }
    }
}

fn flag_or_unknown(value: Option<f64>, flag: &str, what: &str) -> Factor {
    match value {
        Some(v) => Factor::known(v, "flag", flag),
        None => Factor::unknown(format!(
            "not readable from the system: give {what} with {flag}"
        )),
    }
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

fn clock_factor(info: &SysInfo, flags: &PeakArgs, probes: &Probes) -> Factor {
    if let Some(ghz) = flags.cpu_ghz {
        return Factor::known(ghz, "flag", "--cpu-ghz");
    }
    let cpu = &info.cpu;
    for fact in [&cpu.base_ghz, &cpu.current_ghz] {
        if std::ptr::eq(fact, &cpu.current_ghz)
            && let Some(known) = clocks::known(&cpu.model_name)
        {
            return Factor::known(
                known.base_ghz,
                "known-models",
                format!("{}, base clock", known.source),
            );
        }
        if let (Some(ghz), Some(source)) = (fact.value, &fact.source) {
            let kind = if source.contains("/sys") {
                "sysfs"
            } else if source.contains("model") {
                "model-string"
            } else {
                "cpuinfo"
            };
            let note = if std::ptr::eq(fact, &cpu.current_ghz) {
                " (the clock the kernel reports; under a hypervisor the host's nominal clock)"
            } else {
                ""
            };
            return Factor::known(ghz, kind, format!("{source}{note}"));
        }
    }
    match probes.ghz {
        Some(ghz) => Factor::known(ghz, "measured", "dependent add chain, 1 add per cycle"),
        None => {
            Factor::unknown("no clock in sysfs, the model string or /proc/cpuinfo: give --cpu-ghz")
        }
    }
}

/// The turbo clock: the flag, else cpufreq's highest clock (when above the base one), else
/// the table of known models.
fn turbo_factor(info: &SysInfo, flags: &PeakArgs, base: &Factor) -> Factor {
    if let Some(ghz) = flags.cpu_turbo_ghz {
        return Factor::known(ghz, "flag", "--cpu-turbo-ghz");
    }
    let cpu = &info.cpu;
    if let (Some(max), Some(source)) = (cpu.max_ghz.value, &cpu.max_ghz.source)
        && base.value.is_none_or(|b| max > b)
    {
        return Factor::known(
            max,
            "sysfs",
            format!("{source}, the highest clock cpufreq lets a core reach"),
        );
    }
    if let Some(known) = clocks::known(&cpu.model_name) {
        return Factor::known(
            known.turbo_ghz,
            "known-models",
            format!(
                "{}, max turbo of one core (all cores together run at or below it)",
                known.source
            ),
        );
    }
    Factor::unknown(format!(
        "no cpufreq cpuinfo_max_freq above the base clock and '{}' is not in the table of known \
         clocks: give --cpu-turbo-ghz",
        cpu.model_name
    ))
}

fn cpu_peaks(info: &SysInfo, flags: &PeakArgs, probes: &Probes) -> CpuPeaks {
    let cores = match flags.cores {
        Some(c) => Factor::known(c as f64, "flag", "--cores"),
        None => Factor::known(
            info.cpu.physical_cores as f64,
            "cpuinfo",
            "physical cores (SMT siblings share execution units)",
        ),
    };
    let ghz = clock_factor(info, flags, probes);
    let turbo_ghz = turbo_factor(info, flags, &ghz);
    let measured_ghz = match probes.ghz {
        Some(g) => Factor::known(
            g,
            "measured",
            "dependent add chain on one core, 1 add per cycle",
        ),
        None => Factor::unknown("no clock probe ran"),
    };
    let name = info.cpu.microarch.value.clone().unwrap_or_default();
    let table = microarch::resources(&name, &info.cpu.model_name);
    let isas = isas_of(info);

    let from_table = |pick: fn(&CoreResources) -> [f64; 3], what: &str| -> [Factor; 3] {
        [0, 1, 2].map(|i| match &table {
            Some((row, detail)) => Factor::known(pick(row)[i], "microarch-table", detail.clone()),
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
    let mut fma_units = from_table(|r| r.fma_units, "FMA units");
    if let Some(units) = flags.fma_units {
        // The flag names the units of the widest ISA the CPU has (what a user reads in a spec).
        let widest = width_index(*isas.last().unwrap_or(&Isa::Scalar));
        fma_units[widest] = Factor::known(units, "flag", "--fma-units");
    } else if let (Some(per_cycle), Some(isa)) = (probes.fma_per_cycle, probes.fma_isa) {
        let i = width_index(isa);
        if fma_units[i].value.is_none() {
            fma_units[i] = Factor::known(
                per_cycle.round().max(1.0),
                "measured",
                format!(
                    "{} FMA instructions per cycle measured at {} on one core (rounded)",
                    trim_float(per_cycle),
                    isa.name()
                ),
            );
        }
    }
    let fadd_units = from_table(|r| r.fadd_units, "FADD units");
    let mut vec_int_units = from_table(
        |r| r.vec_int_units,
        "vector integer units; give --int-units",
    );
    let mut scalar_int_units = match &table {
        Some((row, detail)) => {
            Factor::known(row.scalar_int_units, "microarch-table", detail.clone())
        }
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
    let optional = |pick: fn(&CoreResources) -> Option<f64>, what: &str| match &table {
        Some((row, detail)) => match pick(row) {
            Some(units) => Factor::known(units, "microarch-table", detail.clone()),
            None => Factor::unknown(format!("{what}: the table has no figure for '{name}'")),
        },
        None => Factor::unknown(format!("{what}: microarchitecture not in the table")),
    };
    let vnni_units = optional(|r| r.vnni_units, "VNNI dot products per cycle");
    let bf16_dot_units = optional(|r| r.bf16_dot_units, "bf16 dot products per cycle");
    let amx_tiles_per_cycle = optional(|r| r.amx_tiles_per_cycle, "AMX tile multiplies per cycle");
    let factors = CpuFactors {
        cores,
        ghz,
        turbo_ghz,
        measured_ghz,
        fma_units,
        fadd_units,
        vec_int_units,
        scalar_int_units,
        vnni_units,
        bf16_dot_units,
        amx_tiles_per_cycle,
    };
    let mut rows = Vec::new();
    let has = |f: &str| info.cpu.simd.iter().any(|s| s == f);
    for &isa in &isas {
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
                rows.push(cpu_row(&factors, precision, isa, fma, Form::Arith));
            }
        }
        for precision in [
            Precision::I8,
            Precision::I16,
            Precision::I32,
            Precision::I64,
        ] {
            rows.push(cpu_row(&factors, precision, isa, false, Form::Arith));
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
                    rows.push(cpu_row(&factors, precision, isa, false, form));
                }
            }
        }
    }
    CpuPeaks {
        factors,
        isas,
        table: rows,
    }
}

/// The units factor for one kind of instruction.
fn units_for(f: &CpuFactors, precision: Precision, isa: Isa, fma: bool, form: Form) -> Factor {
    match form {
        Form::Dot if precision == Precision::Bf16 => return f.bf16_dot_units.clone(),
        Form::Dot => return f.vnni_units.clone(),
        Form::Tile => return f.amx_tiles_per_cycle.clone(),
        Form::Arith => {}
    }
    let w = width_index(isa);
    if !precision.is_float() {
        return if isa == Isa::Scalar {
            f.scalar_int_units.clone()
        } else {
            f.vec_int_units[w].clone()
        };
    }
    if fma {
        return f.fma_units[w].clone();
    }
    // Separate multiplies and adds: multiplies on the FMA pipes, adds on FMA or FADD pipes.
    match (f.fma_units[w].value, f.fadd_units[w].value) {
        (Some(a), Some(b)) => Factor::known(
            a + b,
            &f.fma_units[w].source,
            format!("{} FMA/FMUL + {} FADD pipes", trim_float(a), trim_float(b)),
        ),
        _ => f.fma_units[w].clone(),
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
        value: at(Some(f.effective_clock())),
        at_base: at(f.base_clock()),
        at_turbo: at(f.turbo_clock()),
        unit: precision.unit().to_string(),
    }
}

impl CpuFactors {
    /// The clock per-result peaks use: a `--cpu-ghz` flag as given; otherwise the nominal
    /// clock, or the measured one when the cores were seen running faster (turbo), so that
    /// efficiency is against what the cores can really do and never above 100 % by boost alone.
    pub fn effective_clock(&self) -> &Factor {
        match (self.ghz.value, self.measured_ghz.value) {
            _ if self.ghz.source == "flag" => &self.ghz,
            (Some(nominal), Some(measured)) if measured > nominal => &self.measured_ghz,
            (None, Some(_)) => &self.measured_ghz,
            _ => &self.ghz,
        }
    }

    /// The base clock of the pair: the nominal clock, unless it is only the measured one.
    pub fn base_clock(&self) -> Option<&Factor> {
        (self.ghz.value.is_some() && self.ghz.source != "measured").then_some(&self.ghz)
    }

    /// The turbo clock of the pair, when known.
    pub fn turbo_clock(&self) -> Option<&Factor> {
        self.turbo_ghz.value.is_some().then_some(&self.turbo_ghz)
    }

    /// The peak of `per_core` op/s per GHz-core on `cores` at the base and the turbo clock.
    fn pair(&self, per_cycle_per_core: f64, cores: f64) -> ClockPair {
        let at = |clock: Option<&Factor>| Some(cores * per_cycle_per_core * clock?.value?);
        let base_ghz = match self.base_clock() {
            Some(f) => f.clone(),
            None => Factor::unknown(match self.ghz.value {
                Some(_) => "only measured, no nominal clock known: give --cpu-ghz".to_string(),
                None => self.ghz.detail.clone(),
            }),
        };
        ClockPair {
            at_base: at(self.base_clock()),
            base_ghz,
            at_turbo: at(self.turbo_clock()),
            turbo_ghz: self.turbo_ghz.clone(),
            measured_ghz: self.measured_ghz.value,
        }
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
        let clock = ghz.unwrap_or(self.factors.effective_clock());
        let cores = self.factors.cores.value?;
        let used = (threads as f64).min(cores);
        let value = used * clock.value? * row.per_cycle_per_core?;
        let pair = self.factors.pair(row.per_cycle_per_core?, used);
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

/// A reason with the flag that fixes it, unless the reason already names one.
fn with_fix(reason: Option<&str>, fix: &str) -> String {
    match reason {
        Some(r) if r.contains("--") => r.to_string(),
        Some(r) => format!("{r}; {fix}"),
        None => format!("no DIMM inventory; {fix}"),
    }
}

fn memory_peak(info: &SysInfo, flags: &PeakArgs) -> MemoryPeak {
    let mem = &info.memory;
    let channels = match (flags.mem_channels, &mem.channels) {
        (Some(c), _) => Factor::known(c as f64, "flag", "--mem-channels"),
        (None, fact) => match (fact.value, &fact.source) {
            (Some(c), Some(src)) => Factor::known(c as f64, "dmi", src.clone()),
            _ => Factor::unknown(with_fix(fact.reason.as_deref(), "give --mem-channels")),
        },
    };
    let mts = match (flags.mem_mts, &mem.mts) {
        (Some(m), _) => Factor::known(m as f64, "flag", "--mem-mts"),
        (None, fact) => match (fact.value, &fact.source) {
            (Some(m), Some(src)) => Factor::known(m as f64, "dmi", src.clone()),
            _ => Factor::unknown(with_fix(
                fact.reason.as_deref(),
                "give --mem-mts (e.g. 3200 for DDR4-3200)",
            )),
        },
    };
    let bytes = Factor::known(8.0, "definition", "a DDR channel is 64 bits wide");
    let value = match (channels.value, mts.value) {
        (Some(c), Some(m)) => Some(c * m * 8.0 / 1000.0),
        _ => None,
    };
    MemoryPeak {
        channels,
        mts,
        bytes_per_transfer: bytes,
        value,
        unit: "GB/s".to_string(),
    }
}

impl MemoryPeak {
    pub fn as_ref(&self) -> Option<PeakRef> {
        Some(PeakRef {
            value: self.value?,
            unit: self.unit.clone(),
            source: format!(
                "{} channels × {} MT/s × 8 B = {} GB/s; {}; {}",
                trim_float(self.channels.value?),
                trim_float(self.mts.value?),
                trim_float(self.value?),
                self.channels.describe("channels"),
                self.mts.describe("MT/s")
            ),
            pair: None,
        })
    }
}

fn nic_peaks(info: &SysInfo, flags: &PeakArgs) -> Vec<NicPeak> {
    info.nics
        .iter()
        .map(|nic| {
            let fact = &nic.speed_mbps;
            let gbps = if let Some(g) = flags.nic_gbps {
                Factor::known(
                    g,
                    "flag",
                    if nic.loopback {
                        "--nic-gbps, the user's assumed peak (loopback has no link speed)"
                    } else {
                        "--nic-gbps"
                    },
                )
            } else if nic.loopback {
                Factor::unknown(
                    "loopback has no link speed; its bound is the memory copy bandwidth (or give \
                     --nic-gbps)",
                )
            } else if let (Some(mbps), Some(source)) = (fact.value, &fact.source) {
                Factor::known(mbps as f64 / 1000.0, "sysfs", source.clone())
            } else {
                Factor::unknown(format!(
                    "{}; give --nic-gbps",
                    fact.reason.as_deref().unwrap_or("no link speed")
                ))
            };
            NicPeak {
                interface: nic.name.clone(),
                loopback: nic.loopback,
                gbps,
            }
        })
        .collect()
}

/// What the pair of clocks is: both with their sources and the measured one beside them, or
/// which one is unknown.
fn clock_pair_line(f: &CpuFactors) -> String {
    let measured = f
        .measured_ghz
        .value
        .map(|m| format!("; measured {} GHz", trim_float(m)))
        .unwrap_or_default();
    match (f.base_clock(), f.turbo_clock()) {
        (Some(b), Some(t)) => format!(
            "peaks at base and turbo: base {} GHz ({}), turbo {} GHz ({}){measured}",
            trim_float(b.value.unwrap_or_default()),
            b.source,
            trim_float(t.value.unwrap_or_default()),
            t.source
        ),
        (Some(b), None) => format!(
            "peaks at base only: base {} GHz ({}); the turbo clock is unknown ({}){measured}",
            trim_float(b.value.unwrap_or_default()),
            b.source,
            f.turbo_ghz.detail
        ),
        (None, Some(t)) => format!(
            "peaks at turbo only: turbo {} GHz ({}); the base clock is unknown (give \
             --cpu-ghz){measured}",
            trim_float(t.value.unwrap_or_default()),
            t.source
        ),
        (None, None) => format!(
            "no peak at base or turbo: neither clock is known (give --cpu-ghz and \
             --cpu-turbo-ghz){measured}"
        ),
    }
}

/// The peaks as a human table: the shared factors with their sources, then one row per
/// precision × ISA × FMA choice.
pub fn render(peaks: &Peaks) -> String {
    let f = &peaks.cpu.factors;
    let mut out = String::from("Peaks\n");
    out.push_str(&format!("  {}\n", f.cores.describe("cores")));
    out.push_str(&format!("  {}\n", f.ghz.describe("clock GHz")));
    out.push_str(&format!("  {}\n", f.measured_ghz.describe("measured GHz")));
    out.push_str(&format!("  {}\n", f.turbo_ghz.describe("turbo GHz")));
    out.push_str(&format!(
        "  peaks below use {}\n",
        f.effective_clock().describe("clock GHz")
    ));
    out.push_str(&format!("  {}\n", clock_pair_line(f)));
    for (i, width) in ["128", "256", "512"].iter().enumerate() {
        out.push_str(&format!(
            "  {}\n",
            f.fma_units[i].describe(&format!("FMA units at {width} bit"))
        ));
    }
    let paired = peaks
        .cpu
        .table
        .iter()
        .any(|r| r.at_base.is_some() || r.at_turbo.is_some());
    out.push_str("  precision  isa     fma    lanes  op/cycle/core  peak");
    out.push_str(if paired {
        "  (at base / at turbo)\n"
    } else {
        "\n"
    });
    for row in &peaks.cpu.table {
        let precision = match row.form {
            Form::Arith => row.precision.name().to_string(),
            Form::Dot => format!("{} dot", row.precision.name()),
            Form::Tile => format!("{} amx", row.precision.name()),
        };
        out.push_str(&format!(
            "  {:<9}  {:<6}  {:<5}  {:>5}  {:>13}  {}\n",
            precision,
            if row.form == Form::Tile {
                "amx"
            } else {
                row.isa.name()
            },
            if row.precision.is_float() && row.form.is_arith() {
                if row.fma { "yes" } else { "no" }
            } else {
                "-"
            },
            row.lanes,
            row.per_cycle_per_core
                .map(trim_float)
                .unwrap_or_else(|| "?".into()),
            row.value
                .map(|v| format!("{} {}", trim_float((v * 10.0).round() / 10.0), row.unit))
                .unwrap_or_else(|| format!("unknown ({})", row.units.detail)),
        ));
        if paired && row.value.is_some() {
            let cell = |v: Option<f64>| {
                v.map(|v| trim_float((v * 10.0).round() / 10.0))
                    .unwrap_or_else(|| "unknown".into())
            };
            // Inside the line just written, before its newline.
            out.pop();
            out.push_str(&format!(
                "  ({} / {})\n",
                cell(row.at_base),
                cell(row.at_turbo)
            ));
        }
    }
    let m = &peaks.memory;
    out.push_str(&format!(
        "  memory: {}\n",
        match m.value {
            Some(v) => format!(
                "{} GB/s = {} × {} × 8 B",
                trim_float(v),
                m.channels.describe("channels"),
                m.mts.describe("MT/s")
            ),
            None => format!(
                "unknown: {}; {}",
                m.channels.describe("channels"),
                m.mts.describe("MT/s")
            ),
        }
    ));
    for nic in &peaks.nics {
        out.push_str(&format!(
            "  nic {}: {}\n",
            nic.interface,
            nic.gbps.describe("Gb/s")
        ));
    }
    let (read_mbps, write_mbps) = peaks.disk.ratings(false);
    let (read_iops, write_iops) = peaks.disk.ratings(true);
    out.push_str(&format!(
        "  disk read: {}; {}\n  disk write: {}; {}\n",
        read_mbps.describe("MB/s"),
        read_iops.describe("IOPS"),
        write_mbps.describe("MB/s"),
        write_iops.describe("IOPS")
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sysinfo::Fact;

    /// The machine of `tests/fixtures/report.json` (no cpufreq, "AMD EPYC", `cpu MHz` 2.596).
    fn fixture_host() -> SysInfo {
        let doc: serde_json::Value =
            serde_json::from_str(include_str!("../tests/fixtures/report.json")).unwrap();
        serde_json::from_value(doc["host"].clone()).unwrap()
    }

    fn probes() -> Probes {
        Probes {
            ghz: Some(2.7),
            ..Probes::default()
        }
    }

    /// Issue 20 item 3: a model of the users' reports, seen without cpufreq, gets its base
    /// clock from the model name and its turbo from the table of known models.
    #[test]
    fn a_known_model_gives_the_pair_with_both_sources() {
        let mut host = fixture_host();
        host.cpu.model_name = "Intel(R) Xeon(R) CPU E5-2670 v3 @ 2.30GHz".into();
        host.cpu.base_ghz = Fact::read(2.3, "model name string");
        let peaks = Peaks::compute(&host, &PeakArgs::default(), &probes());
        let f = &peaks.cpu.factors;
        assert_eq!(f.ghz.value, Some(2.3));
        assert_eq!(f.turbo_ghz.value, Some(3.1));
        assert_eq!(f.turbo_ghz.source, "known-models");
        assert!(f.turbo_ghz.detail.contains("Intel ARK: Xeon E5-2670 v3"));
        let row = peaks.cpu.row(Precision::F64, Isa::Scalar, false).unwrap();
        let per_core = row.per_cycle_per_core.unwrap();
        let cores = f.cores.value.unwrap();
        assert_eq!(row.at_base, Some(per_core * cores * 2.3));
        assert_eq!(row.at_turbo, Some(per_core * cores * 3.1));
        let one = peaks.cpu.for_threads(row, 1, None).unwrap();
        let pair = one.pair.as_ref().unwrap();
        assert_eq!(pair.at_base, Some(per_core * 2.3));
        assert_eq!(pair.at_turbo, Some(per_core * 3.1));
        assert_eq!(pair.measured_ghz, Some(2.7));
        assert!(one.source.contains("at turbo 3.1 GHz"), "{}", one.source);
        let text = render(&peaks);
        assert!(
            text.contains("peaks at base and turbo: base 2.3 GHz (model-string), turbo 3.1 GHz (known-models); measured 2.7 GHz"),
            "{text}"
        );
        assert!(text.contains("(at base / at turbo)"), "{text}");
    }

    #[test]
    fn flags_give_the_pair_and_cpufreq_gives_the_turbo() {
        let flags = PeakArgs {
            cpu_ghz: Some(2.0),
            cpu_turbo_ghz: Some(3.0),
            ..PeakArgs::default()
        };
        let peaks = Peaks::compute(&fixture_host(), &flags, &probes());
        let f = &peaks.cpu.factors;
        assert_eq!(
            (f.turbo_ghz.source.as_str(), f.turbo_ghz.detail.as_str()),
            ("flag", "--cpu-turbo-ghz")
        );
        let row = peaks.cpu.row(Precision::F64, Isa::Scalar, false).unwrap();
        assert_eq!(row.at_turbo.unwrap() / row.at_base.unwrap(), 1.5);
        let mut host = fixture_host();
        host.cpu.max_ghz = Fact::read(3.5, "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
        let peaks = Peaks::compute(&host, &PeakArgs::default(), &probes());
        assert_eq!(peaks.cpu.factors.turbo_ghz.value, Some(3.5));
        assert_eq!(peaks.cpu.factors.turbo_ghz.source, "sysfs");
    }

    /// This machine's case: a base clock (the host's nominal `cpu MHz`) and no turbo anywhere.
    #[test]
    fn only_one_clock_known_says_which_and_how_to_give_the_other() {
        let peaks = Peaks::compute(&fixture_host(), &PeakArgs::default(), &probes());
        let f = &peaks.cpu.factors;
        assert_eq!(f.turbo_ghz.value, None);
        assert!(
            f.turbo_ghz.detail.contains("--cpu-turbo-ghz"),
            "{}",
            f.turbo_ghz.detail
        );
        let text = render(&peaks);
        assert!(text.contains("peaks at base only: base 2.596"), "{text}");
        assert!(text.contains("(at base / at turbo)"), "{text}");
        assert!(
            text.contains(" / unknown)\n"),
            "the turbo column says so: {text}"
        );
        let row = peaks.cpu.row(Precision::F64, Isa::Scalar, false).unwrap();
        let pair = peaks.cpu.for_threads(row, 1, None).unwrap().pair.unwrap();
        assert!(pair.at_base.is_some());
        assert_eq!(pair.at_turbo, None);
        assert!(pair.describe("GFLOP/s").contains("turbo clock unknown"));
        // Only a turbo: the base is not the measured clock.
        let mut host = fixture_host();
        host.cpu.current_ghz = Fact::unknown("none");
        let flags = PeakArgs {
            cpu_turbo_ghz: Some(3.0),
            ..PeakArgs::default()
        };
        let peaks = Peaks::compute(&host, &flags, &probes());
        assert_eq!(peaks.cpu.factors.ghz.source, "measured");
        let text = render(&peaks);
        assert!(
            text.contains("peaks at turbo only: turbo 3 GHz (flag)"),
            "{text}"
        );
    }

    #[test]
    fn a_turbo_below_the_base_is_refused_naming_both_flags() {
        let flags = PeakArgs {
            cpu_ghz: Some(3.0),
            cpu_turbo_ghz: Some(2.0),
            ..PeakArgs::default()
        };
        let e = flags.check().unwrap_err().0;
        assert!(
            e.contains("--cpu-turbo-ghz") && e.contains("--cpu-ghz"),
            "{e}"
        );
        let fine = PeakArgs {
            cpu_ghz: Some(2.0),
            cpu_turbo_ghz: Some(2.0),
            ..PeakArgs::default()
        };
        assert!(fine.check().is_ok());
    }

    #[test]
    fn lanes() {
        assert_eq!(Precision::F64.lanes(Isa::Avx512), 8);
        assert_eq!(Precision::F32.lanes(Isa::Avx2), 8);
        assert_eq!(Precision::I8.lanes(Isa::Avx512), 64);
        assert_eq!(Precision::I16.lanes(Isa::Sse), 8);
        assert_eq!(Precision::F64.lanes(Isa::Scalar), 1);
    }
}
