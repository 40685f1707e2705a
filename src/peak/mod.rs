//! Theoretical peaks, each factor with where it came from.
//!
//! CPU: peak op/s = cores × clock × lanes × units × ops per instruction, where
//! - *cores* are physical cores (SMT siblings share the execution units), capped by the threads
//!   a case uses;
//! - *clock* is the nominal clock: a `--cpu-ghz` flag, else sysfs `base_frequency`, else the
//!   model string's "@ 2.50GHz", else the kernel's `cpu MHz` (under a hypervisor the host's
//!   nominal clock), else the clock measured on one core by dependent chains of adds and of
//!   multiplies that must agree, timed by the thread's CPU time (`sysinfo::clock`). Between the model string and
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
//! A working set held in a core's L1 or L2: the row's bytes per cycle there × the measured
//! clock × the cores ([`caches`]).
//! NIC: the link speed. Disk: only the rating the user gives. A factor that is unknown makes the
//! peak unknown, and the output says which flag supplies it.
//!
//! The parts: [`instruction`] names what a CPU peak row is about (ISA, element type, form);
//! [`cpu`] multiplies the CPU factors out into the table of rows; [`clock`] finds the base and
//! turbo clocks and gives a peak at each; [`caches`] gives the private caches' bandwidth;
//! [`devices`] holds the memory, NIC and disk peaks. `crate::report::peaks` prints them all for
//! a person.

mod caches;
mod clock;
mod cpu;
mod devices;
mod instruction;

use serde::{Deserialize, Serialize};

use crate::options::PeakOverrides;
use crate::sysinfo::SysInfo;

pub use caches::{Accesses, CacheLevel, cache_peak};
pub use clock::ClockPair;
pub use cpu::{CpuFactors, CpuPeak, CpuPeaks, MeasuredFactors, Pipe, isas_of, tile_multiply_adds};
pub use devices::{DiskPeak, MemoryPeak, NicPeak};
pub use instruction::{Form, Isa, Precision};

use cpu::cpu_peaks;
use devices::{memory_peak, nic_peaks};

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

    /// The factor as "name value (source: detail)", or "name unknown (detail)": how to supply
    /// it.
    pub fn describe(&self, name: &str) -> String {
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

/// A number with at most four decimals and no trailing zeros, as the peaks write them.
pub fn trim_float(v: f64) -> String {
    let s = format!("{v:.4}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
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
    pub fn compute(info: &SysInfo, flags: &PeakOverrides, probes: &MeasuredFactors) -> Peaks {
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::sysinfo::Fact;

    /// The machine of `tests/fixtures/report.json` (no cpufreq, "AMD EPYC", `cpu MHz` 2.596).
    pub(crate) fn fixture_host() -> SysInfo {
        let doc: serde_json::Value =
            serde_json::from_str(include_str!("../../tests/fixtures/report.json")).unwrap();
        serde_json::from_value(doc["host"].clone()).unwrap()
    }

    /// A clock of 2.7 GHz measured at rest.
    pub(crate) fn probes() -> MeasuredFactors {
        MeasuredFactors {
            ghz: Some(2.7),
            ..MeasuredFactors::default()
        }
    }

    /// A 16-vCPU guest that is 8 cores × 2 threads, the hypervisor showing 16 cores: the
    /// matrix's siblings (3 of 3 repetitions) make the cores factor 8, measured, and halve
    /// every all-thread peak; a matrix without siblings changes nothing.
    #[test]
    fn hidden_siblings_in_the_matrix_halve_the_all_thread_peaks() {
        let mut host = fixture_host();
        host.cpu.physical_cores = 16;
        host.cpu.logical_cpus = 16;
        let matrix = |sibling_ns: f64| -> Vec<(usize, usize, f64)> {
            let mut pairs = Vec::new();
            for a in 0..16 {
                for b in a + 1..16 {
                    let ns = if a % 8 == b % 8 { sibling_ns } else { 60.0 };
                    pairs.push((a, b, ns + (a + b) as f64 * 0.1));
                }
            }
            pairs
        };
        let reps = vec![matrix(16.0); 3];
        let cores = crate::sysinfo::c2c::measured_cores(&reps, 16, 16, 16);
        let flags = PeakOverrides::default();
        let plain = Peaks::compute(&host, &flags, &probes());
        let measured = Peaks::compute(
            &host,
            &flags,
            &MeasuredFactors {
                measured_cores: cores,
                ..probes()
            },
        );
        let factor = &measured.cpu.factors.cores;
        assert_eq!(
            (factor.value, factor.source.as_str()),
            (Some(8.0), "measured")
        );
        assert!(
            factor.detail.contains("core-to-core matrix"),
            "{}",
            factor.detail
        );
        for (a, b) in plain.cpu.table.iter().zip(&measured.cpu.table) {
            if let (Some(a), Some(b)) = (a.value, b.value) {
                assert!((b / a - 0.5).abs() < 1e-9, "{a} → {b}");
            }
        }
        let uniform = vec![matrix(60.0); 3];
        assert_eq!(
            crate::sysinfo::c2c::measured_cores(&uniform, 16, 16, 16),
            None
        );
    }

    /// Each factor read from the microarchitecture table names its own figures of the row:
    /// the scalar ALUs' peak once cited the row's FMA pipes.
    #[test]
    fn each_table_factor_names_its_own_figures() {
        let peaks = Peaks::compute(&fixture_host(), &PeakOverrides::default(), &probes());
        let f = &peaks.cpu.factors;
        let zen5 = |factor: &Factor, figures: &str| {
            assert_eq!(factor.source, "microarch-table");
            assert!(
                factor.detail.starts_with(&format!("zen5: {figures} (")),
                "{}",
                factor.detail
            );
        };
        zen5(&f.fma_units[1], "2/2/2 FMA pipes at 128/256/512 bit");
        zen5(
            &f.fadd_units[1],
            "2/2/2 FP add-only pipes at 128/256/512 bit",
        );
        zen5(&f.scalar_int_units, "6 scalar integer ALUs");
        assert!(
            f.vec_int_units[1]
                .detail
                .contains("vector integer units at 128/256/512 bit"),
            "{}",
            f.vec_int_units[1].detail
        );
        assert!(f.vnni_units.detail.contains("VNNI dot products per cycle"));
    }

    /// Chains that disagree leave the clock unknown, the peaks on the base clock with a warning;
    /// a unit count is read only from a rate near a whole number.
    #[test]
    fn a_disagreeing_clock_falls_back_to_the_base_clock_with_a_warning() {
        let host = fixture_host();
        let folded = crate::sysinfo::clock::ClockReading {
            add_ghz: 22.7,
            imul_ghz: 4.02,
        };
        let disagreeing = MeasuredFactors {
            ghz: None,
            ghz_detail: Some(folded.agreed().unwrap_err()),
            ..MeasuredFactors::default()
        };
        let peaks = Peaks::compute(&host, &PeakOverrides::default(), &disagreeing);
        let factors = &peaks.cpu.factors;
        assert_eq!(factors.measured_ghz.value, None);
        assert_eq!(factors.effective_clock().value, factors.ghz.value);
        let warning = factors.clock_warning().expect("a warning");
        assert!(
            warning.contains("22.70 GHz") && warning.contains("base clock"),
            "{warning}"
        );
        assert_eq!(
            Peaks::compute(&host, &PeakOverrides::default(), &probes())
                .cpu
                .factors
                .clock_warning(),
            None
        );
        assert_eq!(cpu::units_from_rate(1.9, "FMA").value, Some(2.0));
        assert_eq!(cpu::units_from_rate(2.15, "FMA").value, Some(2.0));
        let odd = cpu::units_from_rate(0.311, "FMA per cycle");
        assert_eq!(odd.value, None);
        assert!(odd.detail.contains("0.311"), "{}", odd.detail);
        assert_eq!(cpu::units_from_rate(1.5, "FMA").value, None);
    }

    /// A core that runs 512-bit floating point slower than plain adds (its AVX-512 licence):
    /// those rows and the dot products stand on the clock measured right after them, every
    /// other row on the clock at rest. A drop within the noise, or a clock from --cpu-ghz,
    /// leaves every row on the one clock.
    #[test]
    fn the_rows_of_a_licence_use_the_clock_measured_under_it() {
        let host = fixture_host();
        let licensed = MeasuredFactors {
            avx512_clock_ratio: Some(0.93),
            amx_clock_ratio: Some(0.99),
            ..probes()
        };
        let clock_of = |peaks: &Peaks, precision, isa, fma, form| {
            let row = peaks.cpu.form_row(precision, isa, fma, form).unwrap();
            row.value.unwrap()
                / row.per_cycle_per_core.unwrap()
                / peaks.cpu.factors.cores.value.unwrap()
        };
        let near = |a: f64, b: f64| (a - b).abs() < 1e-9;
        let peaks = Peaks::compute(&host, &PeakOverrides::default(), &licensed);
        let f = &peaks.cpu.factors;
        assert!(
            near(f.avx512_ghz.value.unwrap(), 2.7 * 0.93),
            "{:?}",
            f.avx512_ghz
        );
        assert_eq!(f.amx_ghz.value, None);
        assert!(f.amx_ghz.detail.contains("0.990"), "{}", f.amx_ghz.detail);
        let heavy = clock_of(&peaks, Precision::F64, Isa::Avx512, true, Form::Arith);
        assert!(near(heavy, 2.7 * 0.93), "{heavy}");
        let dot = clock_of(&peaks, Precision::I8, Isa::Avx512, false, Form::Dot);
        assert!(near(dot, 2.7 * 0.93), "{dot}");
        for (precision, isa, fma) in [
            (Precision::F64, Isa::Avx2, true),
            (Precision::I32, Isa::Avx512, false),
            (Precision::F64, Isa::Scalar, false),
        ] {
            let ghz = clock_of(&peaks, precision, isa, fma, Form::Arith);
            assert!(near(ghz, 2.7), "{precision} {isa}: {ghz}");
        }
        let row = peaks.cpu.row(Precision::F64, Isa::Avx512, true).unwrap();
        let one = peaks.cpu.for_threads(row, 1, None).unwrap();
        assert!(one.source.contains("× 2.511 GHz ×"), "{}", one.source);
        let given = PeakOverrides {
            cpu_ghz: Some(3.0),
            ..PeakOverrides::default()
        };
        let peaks = Peaks::compute(&host, &given, &licensed);
        let ghz = clock_of(&peaks, Precision::F64, Isa::Avx512, true, Form::Arith);
        assert!(near(ghz, 3.0), "{ghz}");
        let noise = MeasuredFactors {
            avx512_clock_ratio: Some(0.985),
            ..probes()
        };
        let peaks = Peaks::compute(&host, &PeakOverrides::default(), &noise);
        assert_eq!(peaks.cpu.factors.avx512_ghz.value, None);
        let ghz = clock_of(&peaks, Precision::F64, Isa::Avx512, true, Form::Arith);
        assert!(near(ghz, 2.7), "{ghz}");
    }

    /// A model that users reported from (a Xeon E5-2670 v3), seen without cpufreq, gets its base
    /// clock from the model name and its turbo from the table of known models.
    #[test]
    fn a_known_model_gives_the_pair_with_both_sources() {
        let mut host = fixture_host();
        host.cpu.model_name = "Intel(R) Xeon(R) CPU E5-2670 v3 @ 2.30GHz".into();
        host.cpu.base_ghz = Fact::read(2.3, "model name string");
        let peaks = Peaks::compute(&host, &PeakOverrides::default(), &probes());
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
    }

    #[test]
    fn flags_give_the_pair_and_cpufreq_gives_the_turbo() {
        let flags = PeakOverrides {
            cpu_ghz: Some(2.0),
            cpu_turbo_ghz: Some(3.0),
            ..PeakOverrides::default()
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
        let peaks = Peaks::compute(&host, &PeakOverrides::default(), &probes());
        assert_eq!(peaks.cpu.factors.turbo_ghz.value, Some(3.5));
        assert_eq!(peaks.cpu.factors.turbo_ghz.source, "sysfs");
    }

    /// This machine's case: a base clock (the host's nominal `cpu MHz`) and no turbo anywhere.
    #[test]
    fn only_one_clock_known_says_which_and_how_to_give_the_other() {
        let peaks = Peaks::compute(&fixture_host(), &PeakOverrides::default(), &probes());
        let f = &peaks.cpu.factors;
        assert_eq!(f.turbo_ghz.value, None);
        assert!(
            f.turbo_ghz.detail.contains("--cpu-turbo-ghz"),
            "{}",
            f.turbo_ghz.detail
        );
        let row = peaks.cpu.row(Precision::F64, Isa::Scalar, false).unwrap();
        let pair = peaks.cpu.for_threads(row, 1, None).unwrap().pair.unwrap();
        assert!(pair.at_base.is_some());
        assert_eq!(pair.at_turbo, None);
        assert!(pair.describe("GFLOP/s").contains("turbo clock unknown"));
        // Only a turbo: the base is not the measured clock.
        let mut host = fixture_host();
        host.cpu.current_ghz = Fact::unknown("none");
        let flags = PeakOverrides {
            cpu_turbo_ghz: Some(3.0),
            ..PeakOverrides::default()
        };
        let peaks = Peaks::compute(&host, &flags, &probes());
        assert_eq!(peaks.cpu.factors.ghz.source, "measured");
    }

    /// Zen 5's bf16, i16 and i8 dot products have a peak: on Zen 5 (the fixture's host, family
    /// 26) `cpu -p HP` once printed no peak for `vdpbf16ps` and `vpdpwssd`, as the table had no
    /// dot-product pipes for it.
    #[test]
    fn zen5_dot_products_have_a_peak() {
        let mut host = fixture_host();
        assert_eq!(host.cpu.microarch.value.as_deref(), Some("zen5"));
        for flag in ["avx512f", "avx512_bf16", "avx512_vnni"] {
            host.cpu.simd.push(flag.to_string());
        }
        let peaks = Peaks::compute(&host, &PeakOverrides::default(), &probes());
        for precision in [Precision::Bf16, Precision::I16, Precision::I8] {
            let row = peaks
                .cpu
                .form_row(precision, Isa::Avx512, false, Form::Dot)
                .unwrap();
            // Two 512-bit dot products per cycle, 32 pairs (64 for i8) of 2 ops each.
            let pairs = f64::from(512 / precision.bits());
            assert_eq!(
                row.per_cycle_per_core,
                Some(2.0 * pairs * 2.0),
                "{precision}"
            );
            assert!(peaks.cpu.for_threads(row, 2, None).is_some(), "{precision}");
        }
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
