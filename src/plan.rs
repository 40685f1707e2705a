//! What a workload hands the session: a [`Plan`] of [`Case`]s, each a value that can describe
//! itself before it runs, and the builder every case uses to say what it measured.
//!
//! Planning is pure: it reads the [`Context`] (the machine, its peaks, the runner settings) and
//! the workload's options, checks what it can (sizes against memory, the disk target against
//! free space), and returns values. It starts no thread, server or file: a case creates what it
//! needs when it first runs (the disk test file, the loopback server) and lets go of it when
//! the last case that shares it has run. The one measurement a plan may ask for is a fact of
//! the machine the context gathers on demand, once per process ([`LatencyProbe`]: the
//! roofline's cache edge), and only where the context allows it (not in a dry run or a test).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::{Result, bail};
use serde::Serialize;

use crate::error::Lack;
use crate::options::{PeakOverrides, RunnerOptions};
use crate::peak::{MeasuredFactors, PeakRef, Peaks};
use crate::result::Reference;
use crate::result::{BenchResult, Extra, Params, Subsystem, TimePoint};
use crate::stats::{LatencyHistogram, Summary};
use crate::sysinfo::SysInfo;

/// What every case may use: the machine, its peaks and the runner's settings.
pub struct Context {
    pub host: SysInfo,
    pub peaks: Peaks,
    /// Repetitions, warm-up, pinning and `--reference` (threads and stop are per case).
    pub runner: RunnerOptions,
    /// The latency curve a plan may ask for (off unless a run is about to start).
    pub latency_probe: LatencyProbe,
}

/// A pointer chase's latency by working set, measured when a plan first asks for it and kept
/// for the process, so that planning again (`check`'s reruns) plans the same sizes. Off in a
/// dry run and for tests' fixtures: planning then times nothing, and the plan says what a run
/// would measure.
#[derive(Clone, Debug, Default)]
pub struct LatencyProbe {
    live: bool,
    curve: Arc<OnceLock<Result<ProbedCurve, String>>>,
}

/// What a latency probe measured.
#[derive(Clone, Debug, PartialEq)]
pub struct ProbedCurve {
    /// (working set in bytes, ns per dependent load), by size.
    pub points: Vec<(u64, f64)>,
    /// The probe's wall time, linking included.
    pub took: Duration,
}

impl LatencyProbe {
    /// A probe that measures when asked: the context of a run about to start.
    pub fn live() -> LatencyProbe {
        LatencyProbe {
            live: true,
            ..LatencyProbe::default()
        }
    }

    /// The curve, measured by `measure` the first time it is asked for (an error says why it
    /// could not be); `None` where the probe is off.
    pub fn curve(
        &self,
        measure: impl FnOnce() -> Result<ProbedCurve, String>,
    ) -> Option<&Result<ProbedCurve, String>> {
        self.live.then(|| self.curve.get_or_init(measure))
    }
}

impl Context {
    /// A context from facts already gathered (the session measures them on the live machine;
    /// tests give a fixture).
    pub fn new(
        host: SysInfo,
        peak: &PeakOverrides,
        probes: &MeasuredFactors,
        runner: RunnerOptions,
    ) -> Context {
        let peaks = Peaks::compute(&host, peak, probes);
        Context {
            host,
            peaks,
            runner,
            latency_probe: LatencyProbe::default(),
        }
    }
}

#[cfg(test)]
impl Context {
    /// The context of the machine in `tests/fixtures/report.json` (a 2-CPU AMD EPYC with
    /// AVX-512 and 22 GiB available), with a fixed measured clock: planning tested without
    /// depending on the machine the tests run on.
    pub fn fixture() -> Context {
        let doc: serde_json::Value =
            serde_json::from_str(include_str!("../tests/fixtures/report.json")).unwrap();
        let host: SysInfo = serde_json::from_value(doc["host"].clone()).unwrap();
        let probes = MeasuredFactors {
            ghz: Some(2.5),
            fma_per_cycle: None,
            fma_isa: None,
            ghz_detail: None,
            ..MeasuredFactors::default()
        };
        Context::new(
            host,
            &PeakOverrides::default(),
            &probes,
            RunnerOptions::default(),
        )
    }
}

/// What a case is, before it runs: its stable id and its parameters, as `--dry-run --json`
/// prints them and as its result will carry them (plus what only the run can know).
#[derive(Clone, Debug, Serialize)]
pub struct CaseSpec {
    /// Stable id: the same parameters give the same id in every run.
    pub id: String,
    /// One line for plans and progress.
    pub label: String,
    pub subsystem: Subsystem,
    pub op: String,
    pub params: Params,
}

/// Arithmetic for estimates. An estimate is computed from any accepted input (2^64 − 1 I/Os,
/// 2^32 − 1 repetitions), so it saturates at `Duration::MAX` instead of overflowing (a
/// `Duration` product panics, a float beyond `u64::MAX` seconds too).
pub(crate) mod guess {
    use std::time::Duration;

    /// `seconds` as a Duration: NaN and negatives are zero, beyond the range is `Duration::MAX`.
    pub(crate) fn secs(seconds: f64) -> Duration {
        if seconds.is_nan() || seconds <= 0.0 {
            return Duration::ZERO;
        }
        Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX)
    }

    /// `d × n`, saturating.
    pub(crate) fn times(d: Duration, n: u64) -> Duration {
        u32::try_from(n)
            .ok()
            .and_then(|n| d.checked_mul(n))
            .unwrap_or(if d.is_zero() || n == 0 {
                Duration::ZERO
            } else {
                Duration::MAX
            })
    }

    /// The sum, saturating.
    pub(crate) fn sum(parts: impl IntoIterator<Item = Duration>) -> Duration {
        parts
            .into_iter()
            .fold(Duration::ZERO, Duration::saturating_add)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn estimates_saturate_instead_of_overflowing() {
            assert_eq!(secs(1e300), Duration::MAX);
            assert_eq!(secs(f64::INFINITY), Duration::MAX);
            assert_eq!(secs(f64::NAN), Duration::ZERO);
            assert_eq!(secs(1.5), Duration::from_millis(1500));
            assert_eq!(times(Duration::from_secs(u64::MAX / 2), 3), Duration::MAX);
            assert_eq!(times(Duration::from_micros(100), u64::MAX), Duration::MAX);
            assert_eq!(times(Duration::ZERO, u64::MAX), Duration::ZERO);
            assert_eq!(times(Duration::from_secs(2), 3), Duration::from_secs(6));
            assert_eq!(sum([Duration::MAX, Duration::from_secs(1)]), Duration::MAX);
        }
    }
}

/// The cases of a plan, in the order they run.
pub(crate) type Cases = Vec<Box<dyn Case>>;

/// One concrete experiment of a plan.
pub trait Case: Send {
    /// The case's id, label and parameters.
    fn spec(&self) -> CaseSpec;
    /// Expected duration, warm-up and repetitions included.
    fn estimate(&self, ctx: &Context) -> Duration;
    /// Measures the case.
    fn run(&self, ctx: &Context) -> Result<BenchResult>;
    /// The files drawn from this case's `result` that its flags asked for (the roofline's
    /// `--svg` chart), none by default. The session writes them once the case has run: a case
    /// hands back what it drew and writes no file itself.
    fn files(&self, _result: &BenchResult) -> Result<Vec<CaseFile>> {
        Ok(Vec::new())
    }
}

/// A file a case hands back with its result, for the session to write.
pub struct CaseFile {
    /// The flag that named the file (`--svg`): a write that fails names it.
    pub flag: &'static str,
    pub path: PathBuf,
    pub bytes: Vec<u8>,
}

/// Lines to print after a run from the results of one plan (e.g. where the latency curve steps
/// up, next to the cache sizes).
pub(crate) type Summarize = fn(&Context, &[&BenchResult]) -> Vec<String>;

/// The cases of one workload (or of a whole `peakbench run`), the notes on what was left out
/// or changed and why, and the effective configuration for the record.
pub struct Plan {
    pub cases: Vec<Box<dyn Case>>,
    pub notes: Vec<String>,
    /// Why tables were left out because a place the run was given lacks room or writes (each
    /// reason once; the notes say which tables): a health check fails on them.
    pub(crate) unusable: Vec<(Lack, String)>,
    pub config: serde_json::Value,
    /// Summaries, each with the ids of the cases whose results it reads.
    pub summaries: Vec<(Summarize, Vec<String>)>,
}

impl Plan {
    /// A plan of `cases`; a case whose id is already planned is measured once (two tables of
    /// a config, or a list that names a value twice, may ask for the same case).
    pub fn new(
        cases: Vec<Box<dyn Case>>,
        notes: Vec<String>,
        config: impl Serialize,
    ) -> Result<Plan> {
        let mut plan = Plan {
            cases: Vec::new(),
            notes,
            unusable: Vec::new(),
            config: serde_json::to_value(config)?,
            summaries: Vec::new(),
        };
        plan.extend(cases);
        Ok(plan)
    }

    /// A plan with no case yet, for `peakbench run` to fill.
    pub fn empty(config: serde_json::Value) -> Plan {
        Plan {
            cases: Vec::new(),
            notes: Vec::new(),
            unusable: Vec::new(),
            config,
            summaries: Vec::new(),
        }
    }

    /// Adds the cases whose ids are not planned yet; returns how many were added.
    pub fn extend(&mut self, cases: Vec<Box<dyn Case>>) -> usize {
        let mut seen: HashSet<String> = self.cases.iter().map(|c| c.spec().id).collect();
        let before = self.cases.len();
        self.cases
            .extend(cases.into_iter().filter(|c| seen.insert(c.spec().id)));
        self.cases.len() - before
    }

    /// Records that a table was left out because its place lacks room or writes, `reason` once.
    pub(crate) fn left_out(&mut self, lack: Lack, reason: String) {
        if !self.unusable.iter().any(|(_, r)| *r == reason) {
            self.unusable.push((lack, reason));
        }
    }

    /// Prints `summary` after the run, from the results of this plan's cases.
    pub fn with_summary(mut self, summary: Summarize) -> Plan {
        let ids = self.cases.iter().map(|c| c.spec().id).collect();
        self.summaries.push((summary, ids));
        self
    }

    /// Takes in another plan's cases, notes (prefixed with `origin`), unusable places and
    /// summaries.
    pub fn absorb(&mut self, other: Plan, origin: &str) -> usize {
        self.notes
            .extend(other.notes.into_iter().map(|n| format!("{origin}: {n}")));
        for (lack, reason) in other.unusable {
            self.left_out(lack, reason);
        }
        self.summaries.extend(other.summaries);
        self.extend(other.cases)
    }
}

impl CaseSpec {
    /// Starts the result of this case from the values of its repetitions (the headline value
    /// is their median), with what it measures, its unit and how the work is counted.
    pub fn measured(
        self,
        host: &str,
        metric: &str,
        unit: &str,
        counting: String,
        samples: Vec<f64>,
    ) -> Result<Measured> {
        let Some(stats) = Summary::of(&samples) else {
            bail!("no repetition produced a finite {metric}");
        };
        Ok(Measured {
            result: BenchResult {
                id: self.id,
                host: host.to_string(),
                subsystem: self.subsystem,
                op: self.op,
                params: self.params,
                metric: metric.to_string(),
                unit: unit.to_string(),
                value: stats.median,
                stats,
                samples,
                counting,
                extra: Vec::new(),
                latency_ns: None,
                peak: None,
                efficiency: None,
                reference: None,
                other_references: Vec::new(),
                series: Vec::new(),
                warnings: Vec::new(),
                evidence: None,
            },
            walls: Vec::new(),
        })
    }
}

/// A result being put together: "measure, then say what was measured".
pub struct Measured {
    result: BenchResult,
    walls: Vec<Duration>,
}

impl Measured {
    /// The wall time of each repetition, for the warning about repetitions too short to time.
    pub fn walls(mut self, walls: impl IntoIterator<Item = Duration>) -> Self {
        self.walls = walls.into_iter().collect();
        self
    }

    /// A parameter only the run could know (bytes moved, the clock measured, …).
    pub fn param(mut self, key: &str, value: impl Into<serde_json::Value>) -> Self {
        self.result
            .params
            .other
            .insert(key.to_string(), value.into());
        self
    }

    /// Another metric from the same repetitions (left out when no value is finite).
    pub fn extra(mut self, metric: impl Into<String>, unit: &str, values: &[f64]) -> Self {
        if let Some(stats) = Summary::of(values) {
            self.result.extra.push(Extra {
                metric: metric.into(),
                unit: unit.to_string(),
                value: stats.median,
                stats,
            });
        }
        self
    }

    /// Latency percentiles from histograms merged bucket by bucket (never averaged).
    pub fn latency<'a>(
        mut self,
        histograms: impl IntoIterator<Item = &'a LatencyHistogram>,
    ) -> Self {
        let mut merged = LatencyHistogram::new();
        for h in histograms {
            merged.merge(h);
        }
        self.result.latency_ns = merged.summary();
        self
    }

    /// The theoretical peak and the efficiency against it.
    pub fn peak(mut self, peak: Option<PeakRef>) -> Self {
        self.result.efficiency = peak
            .as_ref()
            .filter(|p| p.value > 0.0)
            .map(|p| self.result.value / p.value);
        self.result.peak = peak;
        self
    }

    pub fn series(mut self, series: Vec<TimePoint>) -> Self {
        self.result.series = series;
        self
    }

    pub fn warn(mut self, warnings: impl IntoIterator<Item = String>) -> Self {
        self.result.warnings.extend(warnings);
        self
    }

    /// The standard tool's value and the ratio to it.
    pub fn reference(mut self, mut reference: Reference) -> Self {
        reference.ratio = reference
            .value
            .filter(|v| *v > 0.0)
            .map(|v| self.result.value / v);
        self.result.reference = Some(reference);
        self
    }

    /// Another standard tool on the same case, beside [`Measured::reference`], with the ratio
    /// to it computed the same way (ours / theirs).
    pub fn other_reference(mut self, mut reference: Reference) -> Self {
        reference.ratio = reference
            .value
            .filter(|v| *v > 0.0)
            .map(|v| self.result.value / v);
        self.result.other_references.push(reference);
        self
    }

    /// The headline value so far (for cases that derive something from it).
    pub fn value(&self) -> f64 {
        self.result.value
    }

    /// The result, with the warnings every case gets: repetitions that vary, repetitions too
    /// short to time.
    /// What the other end of a network case read on its machine (kept in the case's
    /// evidence, beside what this side reads around the case).
    pub fn peer(mut self, peer: Option<crate::evidence::PeerEvidence>) -> Self {
        if peer.is_some() {
            self.result.evidence = Some(crate::evidence::CaseEvidence {
                peer,
                ..Default::default()
            });
        }
        self
    }

    pub fn finish(mut self) -> BenchResult {
        let warnings = crate::runner::repetition_warnings(&self.walls, self.result.stats.cv);
        self.result.warnings.extend(warnings);
        self.result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(&'static str);

    impl Case for Fixed {
        fn spec(&self) -> CaseSpec {
            CaseSpec {
                id: self.0.to_string(),
                label: self.0.to_string(),
                subsystem: Subsystem::Cpu,
                op: "op".into(),
                params: Params::default(),
            }
        }
        fn estimate(&self, _: &Context) -> Duration {
            Duration::ZERO
        }
        fn run(&self, _: &Context) -> Result<BenchResult> {
            bail!("not run in this test")
        }
    }

    #[test]
    fn a_case_asked_for_twice_is_planned_once() {
        let cases: Vec<Box<dyn Case>> = vec![
            Box::new(Fixed("a")),
            Box::new(Fixed("b")),
            Box::new(Fixed("a")),
        ];
        let mut plan = Plan::new(cases, vec![], serde_json::json!({})).unwrap();
        assert_eq!(plan.cases.len(), 2);
        let other = Plan::new(
            vec![Box::new(Fixed("b")), Box::new(Fixed("c"))],
            vec!["n".into()],
            1,
        )
        .unwrap();
        assert_eq!(plan.absorb(other, "[[x]] #1"), 1);
        assert_eq!(plan.notes, ["[[x]] #1: n"]);
    }

    #[test]
    fn the_builder_sets_efficiency_ratio_and_the_standard_warnings() {
        let spec = Fixed("a").spec();
        let result = spec
            .measured(
                "h",
                "throughput",
                "GB/s",
                "bytes".into(),
                vec![10.0, 10.0, 20.0],
            )
            .unwrap()
            .walls([Duration::from_micros(10); 3])
            .peak(Some(PeakRef {
                value: 40.0,
                unit: "GB/s".into(),
                source: "s".into(),
                pair: None,
            }))
            .reference(Reference {
                tool: "t".into(),
                command: "t".into(),
                value: Some(5.0),
                ratio: None,
                note: None,
            })
            .extra("iops", "IOPS", &[1.0, f64::NAN])
            .finish();
        assert_eq!(result.value, 10.0);
        assert_eq!(result.efficiency, Some(0.25));
        assert_eq!(result.reference.unwrap().ratio, Some(2.0));
        assert!(result.extra.is_empty(), "a non-finite extra is left out");
        assert!(result.warnings.iter().any(|w| w.contains("CV > 10 %")));
        assert!(result.warnings.iter().any(|w| w.contains("short")));
    }
}
