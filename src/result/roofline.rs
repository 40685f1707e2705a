//! The empirical roofline's model: what a run's roofline results say once put together. The
//! compute ceilings and bandwidth roofs, where each roof meets each ceiling (the ridge points),
//! the intensity sweep held against them (the self-check), and the user's points placed under
//! them.
//!
//! The model is a pure function of the results, so any stored document can be turned into
//! one ([`model_of`]). The `roofline` workload also stores it, with the user's `--point`s, in
//! `params.other.roofline` of its `model` result (docs/schema.md). It lives here, beside the
//! document, because both the exporters (its text and chart, `report/roofline/`) and the
//! workload read it.
//!
//! **Two byte counts.** A roof's bandwidth is given twice: with the application's bytes (what
//! a programmer counts: triad 24 B per element, copy 16 B, read 8 B) and with the write-allocate
//! reads a written line costs on the bus (triad 32 B, copy 24 B, read 8 B). Ridge points follow
//! both: `intensity` against the application's bytes, `intensity_write_allocate` against the
//! bus's.

use serde::{Deserialize, Serialize};

use crate::result::{BenchResult, Report, Subsystem};
use crate::units::{format_size_approx, format_value};

/// How far a sweep plateau may be from the ceiling it meets and still agree.
pub(crate) const TOLERANCE: f64 = 0.05;
/// A bandwidth plateau whose points spread more than this is not flat.
const FLATNESS: f64 = 0.10;

/// How FLOP and bytes are counted; every model states it.
pub(crate) const COUNTING: &str = "intensity = FLOP / byte; ceilings count an FMA as 2 FLOP per lane; \
roofs count the application's bytes (read 8 B, copy 16 B, triad 24 B per f64 element) and, in \
the *_write_allocate fields, the bus's bytes too (a written line is read first: copy 24 B, \
triad 32 B); the sweep reads 8 B per element and writes nothing, so its two counts agree";

/// Memory levels from the fastest to the slowest.
pub(crate) const LEVELS: [&str; 4] = ["L1", "L2", "L3", "DRAM"];

/// The place of a level in [`LEVELS`]; an unknown level comes after them all.
pub(crate) fn level_rank(level: &str) -> usize {
    LEVELS
        .iter()
        .position(|l| *l == level)
        .unwrap_or(LEVELS.len())
}

/// The roofline of one run at one thread count.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct Model {
    /// The thread count the chart draws and the sweep ran at (all cores by default).
    pub threads: usize,
    /// How FLOP and bytes are counted, in words.
    pub counting: String,
    /// Compute ceilings, every thread count measured.
    pub ceilings: Vec<Ceiling>,
    /// Bandwidth roofs, per level, traffic and thread count.
    pub roofs: Vec<Roof>,
    /// Where each roof meets each ceiling of the same thread count.
    pub ridges: Vec<Ridge>,
    /// The intensity sweep's points.
    pub sweep: Vec<SweepPoint>,
    /// The sweep's plateaus against the ceilings they meet: the self-check.
    pub checks: Vec<Check>,
    /// The user's kernels (`--point`), placed under the roofs.
    pub points: Vec<Placed>,
    /// Levels whose plateau is not flat or not distinct, checks that failed.
    pub warnings: Vec<String>,
}

/// A compute ceiling, drawn flat: what one kernel of one precision and ISA reaches.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub(crate) struct Ceiling {
    /// "f64 avx2 fma", "f32 sse no-fma", "bf16 avx512 dot".
    pub name: String,
    pub threads: usize,
    pub gflops: f64,
    /// The theoretical peak of the same kernel, GFLOP/s.
    pub peak_gflops: Option<f64>,
}

/// A bandwidth roof, drawn slanted: what one traffic pattern reaches at one level's working
/// set. At intensity I (FLOP per byte) it allows I × GB/s GFLOP/s.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub(crate) struct Roof {
    /// "L1", "L2", "L3", "DRAM".
    pub level: String,
    /// "read", "triad" or "copy".
    pub traffic: String,
    pub threads: usize,
    pub working_set_bytes: u64,
    /// GB/s counting the application's bytes (10^9 B/s).
    pub gbps: f64,
    /// GB/s counting write-allocate reads too (the bus's bytes).
    pub gbps_write_allocate: f64,
}

impl Roof {
    /// "DRAM read", "L1 triad".
    pub(crate) fn name(&self) -> String {
        format!("{} {}", self.level, self.traffic)
    }
}

/// Where a roof meets a ceiling: the intensity above which the ceiling, not the roof, limits.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub(crate) struct Ridge {
    pub roof: String,
    pub ceiling: String,
    pub threads: usize,
    /// FLOP per application byte.
    pub intensity: f64,
    /// FLOP per bus byte (write-allocate counted).
    pub intensity_write_allocate: f64,
    pub gflops: f64,
}

/// One point of the intensity sweep.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub(crate) struct SweepPoint {
    pub level: String,
    pub threads: usize,
    pub working_set_bytes: u64,
    pub flop_per_element: u64,
    /// FLOP per byte (read only: both counts agree).
    pub intensity: f64,
    pub gflops: f64,
}

/// A plateau of the sweep against the roof or ceiling it should meet.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub(crate) struct Check {
    pub level: String,
    /// "bandwidth" (GB/s against the read roof) or "compute" (GFLOP/s against the ceiling).
    pub plateau: String,
    pub threads: usize,
    /// The roof or ceiling it is held against.
    pub against: String,
    pub sweep: f64,
    pub ceiling: f64,
    pub ratio: f64,
    /// Within [`TOLERANCE`].
    pub agrees: bool,
}

impl Check {
    fn new(
        level: &str,
        plateau: &str,
        threads: usize,
        against: &str,
        sweep: f64,
        ceiling: f64,
    ) -> Check {
        let ratio = sweep / ceiling;
        Check {
            level: level.to_string(),
            plateau: plateau.to_string(),
            threads,
            against: against.to_string(),
            sweep,
            ceiling,
            ratio,
            agrees: (ratio - 1.0).abs() <= TOLERANCE,
        }
    }
}

/// A user's kernel, as `--point NAME:INTENSITY:GFLOPS` gives it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub(crate) struct UserPoint {
    pub name: String,
    pub intensity: f64,
    pub gflops: f64,
}

/// A user's kernel placed under the roofs: the lowest roof (or the ceiling) above it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub(crate) struct Placed {
    pub name: String,
    pub intensity: f64,
    pub gflops: f64,
    /// "DRAM read roof", "f64 avx2 fma ceiling", …
    pub bound_by: String,
    /// What the bound allows at this intensity.
    pub attainable_gflops: f64,
    /// gflops / attainable_gflops.
    pub fraction: f64,
}

/// A ratio in percent with one decimal: "97.3 %".
pub(crate) fn percent(ratio: f64) -> String {
    format!("{:.1} %", ratio * 100.0)
}

fn text_param(r: &BenchResult, key: &str) -> Option<String> {
    r.params
        .other
        .get(key)
        .and_then(|v| v.as_str())
        .map(str::to_string)
}

/// The name of a compute ceiling from its result's parameters.
pub(crate) fn ceiling_name(r: &BenchResult) -> String {
    let precision = r.params.precision.clone().unwrap_or_default();
    let isa = r.params.isa.clone().unwrap_or_default();
    let form = text_param(r, "form");
    let tail = match (form, r.params.fma) {
        (Some(form), _) => format!(" {form}"),
        (None, Some(true)) => " fma".into(),
        (None, Some(false)) => " no-fma".into(),
        (None, None) => String::new(),
    };
    format!("{precision} {isa}{tail}")
}

fn threads_of(r: &BenchResult) -> usize {
    r.params.threads.unwrap_or(1)
}

/// The ceilings among a run's roofline results (`op: compute`), by thread count, fastest first.
fn ceilings_of(results: &[&BenchResult]) -> Vec<Ceiling> {
    let mut ceilings: Vec<Ceiling> = results
        .iter()
        .filter(|r| r.op == "compute")
        .map(|r| Ceiling {
            name: ceiling_name(r),
            threads: threads_of(r),
            gflops: r.value,
            peak_gflops: r.peak.as_ref().map(|p| p.value),
        })
        .collect();
    ceilings.sort_by(|a, b| {
        a.threads
            .cmp(&b.threads)
            .then(b.gflops.total_cmp(&a.gflops))
    });
    ceilings
}

/// The roofs among a run's roofline results (`op: bandwidth`), by thread count and level.
fn roofs_of(results: &[&BenchResult]) -> Vec<Roof> {
    let mut roofs: Vec<Roof> = results
        .iter()
        .filter(|r| r.op == "bandwidth")
        .map(|r| Roof {
            level: text_param(r, "level").unwrap_or_default(),
            traffic: text_param(r, "traffic").unwrap_or_default(),
            threads: threads_of(r),
            working_set_bytes: r.params.working_set_bytes.unwrap_or(0),
            gbps: r.value,
            gbps_write_allocate: r
                .extra
                .iter()
                .find(|e| e.metric == "throughput_with_write_allocate")
                .map_or(r.value, |e| e.value),
        })
        .collect();
    roofs.sort_by_key(|r| (r.threads, level_rank(&r.level)));
    roofs
}

/// The sweep's points among a run's roofline results (`op: sweep`), in the order run.
fn sweep_of(results: &[&BenchResult]) -> Vec<SweepPoint> {
    results
        .iter()
        .filter(|r| r.op == "sweep")
        .map(|r| SweepPoint {
            level: text_param(r, "level").unwrap_or_default(),
            threads: threads_of(r),
            working_set_bytes: r.params.working_set_bytes.unwrap_or(0),
            flop_per_element: r
                .params
                .other
                .get("flop_per_element")
                .and_then(|v| v.as_u64())
                .unwrap_or(0),
            intensity: r
                .params
                .other
                .get("intensity")
                .and_then(|v| v.as_f64())
                .unwrap_or(f64::NAN),
            gflops: r.value,
        })
        .collect()
}

/// Every roof against every ceiling of its thread count: the ceiling's GFLOP/s over the roof's
/// GB/s is the intensity where they meet.
fn ridges_of(roofs: &[Roof], ceilings: &[Ceiling]) -> Vec<Ridge> {
    let mut ridges = Vec::new();
    for roof in roofs {
        for ceiling in ceilings.iter().filter(|c| c.threads == roof.threads) {
            if roof.gbps > 0.0 && roof.gbps_write_allocate > 0.0 {
                ridges.push(Ridge {
                    roof: roof.name(),
                    ceiling: ceiling.name.clone(),
                    threads: roof.threads,
                    intensity: ceiling.gflops / roof.gbps,
                    intensity_write_allocate: ceiling.gflops / roof.gbps_write_allocate,
                    gflops: ceiling.gflops,
                });
            }
        }
    }
    ridges
}

/// What the sweep showed at one level and thread count, held against its roof and ceiling.
struct LevelCheck {
    /// The bandwidth check (against the read roof), then the compute one (against the ceiling).
    checks: Vec<Check>,
    /// The bandwidth plateau's spread, when it is not flat.
    not_flat: Option<String>,
    /// The bandwidth plateau in GB/s, to tell this level from the next.
    plateau_gbps: f64,
}

impl Model {
    /// The model of a run's roofline results (those of [`Subsystem::Roofline`]), drawn at
    /// `threads` (0: the most threads measured), with the user's points.
    pub(crate) fn build(results: &[&BenchResult], threads: usize, points: &[UserPoint]) -> Model {
        let mine: Vec<&BenchResult> = results
            .iter()
            .copied()
            .filter(|r| r.subsystem == Subsystem::Roofline)
            .collect();
        let ceilings = ceilings_of(&mine);
        let roofs = roofs_of(&mine);
        let sweep = sweep_of(&mine);
        let threads = if threads > 0 {
            threads
        } else {
            sweep
                .iter()
                .map(|p| p.threads)
                .chain(ceilings.iter().map(|c| c.threads))
                .chain(roofs.iter().map(|r| r.threads))
                .max()
                .unwrap_or(1)
        };
        let ridges = ridges_of(&roofs, &ceilings);
        // The sweep's kernel is one of the ceilings' kernels: its compute plateau meets that one.
        let sweep_ceiling = mine
            .iter()
            .find(|r| r.op == "sweep")
            .map(|r| ceiling_name(r));
        let mut model = Model {
            threads,
            counting: COUNTING.to_string(),
            ceilings,
            roofs,
            ridges,
            sweep,
            checks: Vec::new(),
            points: Vec::new(),
            warnings: Vec::new(),
        };
        model.check(sweep_ceiling.as_deref());
        model.points = points.iter().map(|p| model.place(p)).collect();
        model
    }

    /// The sweep's plateaus against the roofs and ceilings of the same thread count, and the
    /// warnings for levels that are not flat or not distinct, and for checks that disagree.
    fn check(&mut self, sweep_ceiling: Option<&str>) {
        let mut levels: Vec<(String, usize)> = self
            .sweep
            .iter()
            .map(|p| (p.level.clone(), p.threads))
            .collect();
        levels.sort_by_key(|(l, t)| (*t, level_rank(l)));
        levels.dedup();
        let mut plateaus: Vec<(String, usize, f64)> = Vec::new();
        for (level, threads) in levels {
            let found = self.check_level(&level, threads, sweep_ceiling);
            self.checks.extend(found.checks);
            self.warnings.extend(found.not_flat);
            plateaus.push((level, threads, found.plateau_gbps));
        }
        self.warn_indistinct(&plateaus);
        self.warn_disagreements();
    }

    /// The sweep at one level and thread count: its bandwidth plateau against the level's read
    /// roof, its compute plateau against the sweep's ceiling.
    fn check_level(&self, level: &str, threads: usize, sweep_ceiling: Option<&str>) -> LevelCheck {
        let points: Vec<&SweepPoint> = self
            .sweep
            .iter()
            .filter(|p| p.level == level && p.threads == threads)
            .collect();
        let ceiling = sweep_ceiling.and_then(|name| {
            self.ceilings
                .iter()
                .find(|c| c.name == name && c.threads == threads)
        });
        let roof = self
            .roofs
            .iter()
            .find(|r| r.level == level && r.traffic == "read" && r.threads == threads);
        let bandwidths: Vec<f64> = points
            .iter()
            .filter(|p| p.intensity > 0.0)
            .map(|p| p.gflops / p.intensity)
            .collect();
        let mut found = LevelCheck {
            checks: Vec::new(),
            not_flat: None,
            plateau_gbps: bandwidths.iter().copied().fold(0.0, f64::max),
        };
        let top_gflops = points.iter().map(|p| p.gflops).fold(0.0, f64::max);
        if let Some(roof) = roof {
            let bound = ceiling
                .map(|ceiling| memory_bound(&points, ceiling.gflops / roof.gbps))
                .unwrap_or_default();
            // Their median is the plateau where there are several: the highest of a few
            // noisy points (each a median of its repetitions) leans high by the noise.
            if bound.len() >= 2 {
                found.plateau_gbps = crate::stats::median(&bound).unwrap_or(found.plateau_gbps);
            }
            found.checks.push(Check::new(
                level,
                "bandwidth",
                threads,
                &roof.name(),
                found.plateau_gbps,
                roof.gbps,
            ));
            found.not_flat = not_flat(level, threads, &points, &bound);
        }
        if let Some(ceiling) = ceiling {
            found.checks.push(Check::new(
                level,
                "compute",
                threads,
                &ceiling.name,
                top_gflops,
                ceiling.gflops,
            ));
        }
        found
    }

    /// Two levels whose plateaus are within [`FLATNESS`] of each other are one level to the
    /// sweep: the faster one's working set did not stay in it.
    fn warn_indistinct(&mut self, plateaus: &[(String, usize, f64)]) {
        for pair in plateaus.windows(2) {
            let ((upper, t1, fast), (lower, t2, slow)) = (&pair[0], &pair[1]);
            if t1 == t2 && *fast > 0.0 && *slow > 0.0 && fast / slow < 1.0 + FLATNESS {
                self.warnings.push(format!(
                    "{upper} and {lower} ({t1} threads): the sweep reaches {} and {} GB/s, not a \
                     distinct level; the {upper} working set may not stay in {upper} (reported \
                     as measured)",
                    format_value(*fast),
                    format_value(*slow)
                ));
            }
        }
    }

    /// A warning per check outside [`TOLERANCE`].
    fn warn_disagreements(&mut self) {
        for c in self.checks.iter().filter(|c| !c.agrees) {
            self.warnings.push(format!(
                "self-check: the sweep's {} plateau at {} ({} threads) is {} of {} ({} against {}), \
                 outside ±{:.0} %",
                c.plateau,
                c.level,
                c.threads,
                percent(c.ratio),
                c.against,
                format_value(c.sweep),
                format_value(c.ceiling),
                TOLERANCE * 100.0
            ));
        }
    }

    /// The top compute ceiling at the chart's thread count, of the sweep's precision (f64) if
    /// there is one.
    pub(crate) fn top_ceiling(&self) -> Option<&Ceiling> {
        let at = || self.ceilings.iter().filter(|c| c.threads == self.threads);
        at().filter(|c| c.name.starts_with("f64 "))
            .max_by(|a, b| a.gflops.total_cmp(&b.gflops))
            .or_else(|| at().max_by(|a, b| a.gflops.total_cmp(&b.gflops)))
    }

    /// The ceilings at the chart's thread count.
    pub(crate) fn drawn_ceilings(&self) -> impl Iterator<Item = &Ceiling> {
        self.ceilings.iter().filter(|c| c.threads == self.threads)
    }

    /// The roofs at the chart's thread count.
    pub(crate) fn drawn_roofs(&self) -> impl Iterator<Item = &Roof> {
        self.roofs.iter().filter(|r| r.threads == self.threads)
    }

    /// The ridge points of `ceiling` with every roof, at the chart's thread count.
    pub(crate) fn ridges_with<'a>(
        &'a self,
        ceiling: &'a Ceiling,
    ) -> impl Iterator<Item = &'a Ridge> {
        self.ridges
            .iter()
            .filter(move |r| r.threads == self.threads && r.ceiling == ceiling.name)
    }

    /// The sweep's points at one level and the chart's thread count, by intensity.
    pub(crate) fn sweep_line(&self, level: &str) -> Vec<&SweepPoint> {
        let mut points: Vec<&SweepPoint> = self
            .sweep
            .iter()
            .filter(|p| p.level == level && p.threads == self.threads)
            .collect();
        points.sort_by(|a, b| a.intensity.total_cmp(&b.intensity));
        points
    }

    /// How many of the checks at the chart's thread count agree, and of how many.
    pub(crate) fn checks_agreeing(&self) -> (usize, usize) {
        self.checks
            .iter()
            .filter(|c| c.threads == self.threads)
            .fold((0, 0), |(g, a), c| (g + usize::from(c.agrees), a + 1))
    }

    /// The lowest bound above a user's point at its intensity: each level's read roof capped
    /// by the top f64 ceiling, from DRAM up.
    pub(crate) fn place(&self, p: &UserPoint) -> Placed {
        let top = self.top_ceiling();
        let mut bounds: Vec<(String, f64)> = self
            .roofs
            .iter()
            .filter(|r| r.threads == self.threads && r.traffic == "read")
            .map(|r| {
                let roof = r.gbps * p.intensity;
                match top {
                    Some(c) if c.gflops < roof => (format!("{} ceiling", c.name), c.gflops),
                    _ => (format!("{} roof", r.name()), roof),
                }
            })
            .collect();
        if bounds.is_empty()
            && let Some(c) = top
        {
            bounds.push((format!("{} ceiling", c.name), c.gflops));
        }
        bounds.sort_by(|a, b| a.1.total_cmp(&b.1));
        let (bound_by, attainable) = bounds
            .iter()
            .find(|(_, v)| *v >= p.gflops)
            .or(bounds.last())
            .cloned()
            .unwrap_or_else(|| ("nothing measured".into(), f64::NAN));
        Placed {
            name: p.name.clone(),
            intensity: p.intensity,
            gflops: p.gflops,
            bound_by,
            attainable_gflops: attainable,
            fraction: p.gflops / attainable,
        }
    }

    /// The machine balance: where the DRAM read roof meets the top ceiling (FLOP per
    /// application byte), the headline of the model.
    pub(crate) fn balance(&self) -> Option<f64> {
        let top = self.top_ceiling()?;
        self.ridges
            .iter()
            .find(|r| r.threads == self.threads && r.roof == "DRAM read" && r.ceiling == top.name)
            .map(|r| r.intensity)
    }
}

/// The bandwidths (GB/s) of the memory-bound points: those well left of the ridge, at a quarter
/// of its intensity or less.
fn memory_bound(points: &[&SweepPoint], ridge: f64) -> Vec<f64> {
    points
        .iter()
        .filter(|p| p.intensity > 0.0 && p.intensity <= ridge / 4.0)
        .map(|p| p.gflops / p.intensity)
        .collect()
}

/// The warning for a bandwidth plateau (`bound`, its memory-bound points' GB/s) that spreads
/// more than [`FLATNESS`].
fn not_flat(level: &str, threads: usize, points: &[&SweepPoint], bound: &[f64]) -> Option<String> {
    let (lo, hi) = bound.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
        (lo.min(*v), hi.max(*v))
    });
    (bound.len() >= 2 && hi > 0.0 && (hi - lo) / hi > FLATNESS).then(|| {
        format!(
            "{level} ({}, {threads} threads): the sweep's bandwidth plateau is not \
             flat ({} to {} GB/s over its memory-bound intensities); reported \
             as measured. A level the guest sees less of than sysinfo reports \
             (a VM sharing its L3), or a busy machine, does this",
            format_size_approx(points[0].working_set_bytes),
            format_value(lo),
            format_value(hi)
        )
    })
}

/// The model stored in a run's `model` result, or else built from its roofline results (a run
/// stopped before its model, say); none for a run without ceilings or roofs.
pub(crate) fn model_of(report: &Report) -> Option<Model> {
    let stored = report
        .results
        .iter()
        .filter(|r| r.subsystem == Subsystem::Roofline && r.op == "model")
        .find_map(|r| r.params.other.get("roofline"))
        .and_then(|v| serde_json::from_value::<Model>(v.clone()).ok());
    stored.or_else(|| {
        let results: Vec<&BenchResult> = report.results.iter().collect();
        let model = Model::build(&results, 0, &[]);
        (!model.ceilings.is_empty() || !model.roofs.is_empty()).then_some(model)
    })
}

/// A small model for the tests of the model and of its text and chart: one ceiling, three
/// roofs at 2 threads, three user points.
#[cfg(test)]
pub(crate) fn example() -> Model {
    let roof = |level: &str, traffic: &str, set: u64, gbps: f64, bus: f64| Roof {
        level: level.into(),
        traffic: traffic.into(),
        threads: 2,
        working_set_bytes: set,
        gbps,
        gbps_write_allocate: bus,
    };
    let mut m = Model {
        threads: 2,
        ceilings: vec![Ceiling {
            name: "f64 avx2 fma".into(),
            threads: 2,
            gflops: 100.0,
            peak_gflops: Some(110.0),
        }],
        roofs: vec![
            roof("L1", "read", 32 << 10, 400.0, 400.0),
            roof("DRAM", "triad", 1 << 28, 24.0, 32.0),
            roof("DRAM", "read", 1 << 28, 20.0, 20.0),
        ],
        ..Model::default()
    };
    let point = |name: &str, intensity: f64, gflops: f64| UserPoint {
        name: name.into(),
        intensity,
        gflops,
    };
    m.points = vec![
        m.place(&point("stream", 0.125, 2.0)),
        m.place(&point("blocked", 0.125, 30.0)),
        m.place(&point("dense", 50.0, 80.0)),
    ];
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bandwidth_plateau_is_the_median_of_the_memory_bound_points() {
        let mut m = example();
        // DRAM read 20 GB/s against a 100 GFLOP/s ceiling: the ridge at 5 FLOP/B, so the
        // points up to 1.25 FLOP/B are memory-bound; one of them is a noisy 28 GB/s.
        let point = |flop: u64, gbps: f64| SweepPoint {
            level: "DRAM".into(),
            threads: 2,
            working_set_bytes: 1 << 28,
            flop_per_element: flop,
            intensity: flop as f64 / 8.0,
            gflops: gbps * flop as f64 / 8.0,
        };
        m.sweep = vec![
            point(1, 20.0),
            point(2, 21.0),
            point(4, 28.0),
            point(8, 19.0),
            point(512, 1.5),
        ];
        m.check(Some("f64 avx2 fma"));
        let bw = m.checks.iter().find(|c| c.plateau == "bandwidth").unwrap();
        assert_eq!((bw.sweep, bw.ceiling), (20.5, 20.0), "{bw:?}");
        assert!(bw.agrees);
        // Not flat: 19 to 28 GB/s is said, and the plateau stays the median.
        assert!(
            m.warnings.iter().any(|w| w.contains("not flat")),
            "{:?}",
            m.warnings
        );
    }

    #[test]
    fn a_point_is_bound_by_the_lowest_roof_above_it() {
        let m = example();
        // 0.125 FLOP/B × 20 GB/s = 2.5 GFLOP/s under DRAM: 80 % of it.
        assert_eq!(m.points[0].bound_by, "DRAM read roof");
        assert!((m.points[0].fraction - 0.8).abs() < 1e-12);
        // 30 GFLOP/s is above DRAM's 2.5: the L1 roof (50) bounds it.
        assert_eq!(m.points[1].bound_by, "L1 read roof");
        assert_eq!(m.points[2].bound_by, "f64 avx2 fma ceiling");
    }
}
