//! The clocks of the CPU peaks: the nominal (base) clock and the turbo clock with where each
//! came from, which of them a peak uses, and a peak at each of the two.

use serde::{Deserialize, Serialize};

use super::{CpuFactors, Factor, Form, Isa, MeasuredFactors, Precision, trim_float};
use crate::options::PeakOverrides;
use crate::sysinfo::SysInfo;
use crate::sysinfo::clocks;

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
    /// The clock measured by the probe (dependent add and imul chains on one core), GHz.
    pub measured_ghz: Option<f64>,
    /// The clock the peak itself stands on (the one its efficiency uses), with its source:
    /// measured, an instruction set's licence, cpuinfo's nominal clock or a flag. Absent in
    /// documents written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_ghz: Option<Factor>,
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

pub(super) fn clock_factor(
    info: &SysInfo,
    flags: &PeakOverrides,
    probes: &MeasuredFactors,
) -> Factor {
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
        Some(ghz) => Factor::known(
            ghz,
            "measured",
            probes
                .ghz_detail
                .clone()
                .unwrap_or_else(|| "dependent chains on one core".to_string()),
        ),
        None => {
            Factor::unknown("no clock in sysfs, the model string or /proc/cpuinfo: give --cpu-ghz")
        }
    }
}

/// The turbo clock: the flag, else cpufreq's highest clock (when above the base one), else
/// the table of known models.
pub(super) fn turbo_factor(info: &SysInfo, flags: &PeakOverrides, base: &Factor) -> Factor {
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

impl CpuFactors {
    /// A warning when the clock probe ran but its two chains disagreed: the peaks then stand
    /// on the nominal clock, which a turbo core runs above.
    pub fn clock_warning(&self) -> Option<String> {
        let disagreed = self
            .measured_ghz
            .detail
            .starts_with(crate::sysinfo::clock::DISAGREEMENT);
        if self.measured_ghz.value.is_some() || !disagreed {
            return None;
        }
        let fallback = match self.ghz.value {
            Some(g) => format!(
                "the peaks use the base clock, {} GHz ({})",
                trim_float(g),
                self.ghz.source
            ),
            None => "no clock is known: give --cpu-ghz".to_string(),
        };
        Some(format!(
            "the clock probe read no clock: {}; {fallback}; give --cpu-ghz to set it",
            self.measured_ghz.detail
        ))
    }

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

    /// The clock of a row of `isa`, `precision` and `form`: the core's clock under those
    /// instructions ([`CpuFactors::licence`]) where it is measured lower, else the
    /// [effective clock](CpuFactors::effective_clock).
    pub fn clock_for(&self, isa: Isa, precision: Precision, form: Form) -> &Factor {
        self.licence(isa, precision, form)
            .unwrap_or_else(|| self.effective_clock())
    }

    /// The clock the core runs the instructions of a row at, where a measurement found it lower
    /// than the measured clock at rest: the AVX-512 one for 512-bit floating point and dot
    /// products, the AMX one for tiles. `None` for every other row, and when the peaks do not
    /// stand on the measured clock (a `--cpu-ghz` flag, or a nominal clock above it).
    pub fn licence(&self, isa: Isa, precision: Precision, form: Form) -> Option<&Factor> {
        if self.effective_clock().source != "measured" {
            return None;
        }
        let factor = match form {
            Form::Tile => &self.amx_ghz,
            Form::Dot if isa == Isa::Avx512 => &self.avx512_ghz,
            Form::Arith if isa == Isa::Avx512 && precision.is_float() => &self.avx512_ghz,
            _ => return None,
        };
        factor.value.is_some().then_some(factor)
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
    pub(super) fn pair(&self, per_cycle_per_core: f64, cores: f64) -> ClockPair {
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
            used_ghz: None,
        }
    }
}
