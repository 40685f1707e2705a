//! The empirical roofline: the model built from a run's roofline results (compute ceilings,
//! bandwidth roofs, the intensity sweep), its ridge points and self-check, the user's points
//! placed under it, and its chart (log–log SVG) for the HTML report and `roofline --svg`.
//!
//! The model is a pure function of the results, so the report can rebuild it from any stored
//! document; the `roofline` workload stores it once more, with the user's `--point`s, as the
//! `params.other.roofline` of its `model` result (docs/schema.md).
//!
//! **Two byte counts.** A roof's bandwidth is given twice: with the application's bytes (what
//! a programmer counts: triad 24 B per element, copy 16 B, read 8 B) and with the write-allocate
//! reads a written line costs on the bus (triad 32 B, copy 24 B, read 8 B). Ridge points follow
//! both: `intensity` against the application's bytes, `intensity_write_allocate` against the
//! bus's.

use std::fmt::Write;

use serde::{Deserialize, Serialize};

use crate::report::charts::{PALETTE, escape};
use crate::result::{BenchResult, Report, Subsystem};
use crate::units::{format_size_approx, format_value};

/// How far a sweep plateau may be from the ceiling it meets and still agree.
pub const TOLERANCE: f64 = 0.05;
/// A bandwidth plateau whose points spread more than this is not flat.
const FLATNESS: f64 = 0.10;

/// The roofline of one run at one thread count.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Model {
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

/// One flat roof: what one kernel of one precision and ISA reaches.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Ceiling {
    /// "f64 avx2 fma", "f32 sse no-fma", "bf16 avx512 dot".
    pub name: String,
    pub threads: usize,
    pub gflops: f64,
    /// The theoretical peak of the same kernel, GFLOP/s.
    pub peak_gflops: Option<f64>,
}

/// One slanted roof: what one traffic pattern reaches at one level's working set.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Roof {
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
    pub fn name(&self) -> String {
        format!("{} {}", self.level, self.traffic)
    }
}

/// Where a roof meets a ceiling.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Ridge {
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
pub struct SweepPoint {
    pub level: String,
    pub threads: usize,
    pub working_set_bytes: u64,
    pub flop_per_element: u64,
    /// FLOP per byte (read only: both counts agree).
    pub intensity: f64,
    pub gflops: f64,
}

/// A plateau of the sweep against the ceiling it should meet.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Check {
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

/// A user's kernel, as `--point NAME:INTENSITY:GFLOPS` gives it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct UserPoint {
    pub name: String,
    pub intensity: f64,
    pub gflops: f64,
}

impl UserPoint {
    /// Parses `NAME:INTENSITY:GFLOPS` (the name may hold colons; the last two fields are the
    /// numbers, both positive).
    pub fn parse(text: &str) -> Result<UserPoint, String> {
        let mut parts = text.rsplitn(3, ':');
        let (gflops, intensity, name) = (parts.next(), parts.next(), parts.next());
        let (Some(gflops), Some(intensity), Some(name)) = (gflops, intensity, name) else {
            return Err(format!(
                "'{text}' is not NAME:INTENSITY:GFLOPS (e.g. spmv:0.25:3.1)"
            ));
        };
        let number = |s: &str, what: &str| -> Result<f64, String> {
            match s.trim().parse::<f64>() {
                Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
                _ => Err(format!(
                    "'{s}' in '{text}' is not a positive {what} (NAME:INTENSITY:GFLOPS)"
                )),
            }
        };
        if name.trim().is_empty() {
            return Err(format!("'{text}' has no name (NAME:INTENSITY:GFLOPS)"));
        }
        Ok(UserPoint {
            name: name.trim().to_string(),
            intensity: number(intensity, "intensity in FLOP/byte")?,
            gflops: number(gflops, "GFLOP/s")?,
        })
    }
}

/// A user's kernel placed under the roofs: the lowest roof (or the ceiling) above it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Placed {
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

fn text_param(r: &BenchResult, key: &str) -> Option<String> {
    r.params
        .other
        .get(key)
        .and_then(|v| v.as_str())
        .map(str::to_string)
}

/// The name of a compute ceiling from its result's parameters.
pub fn ceiling_name(r: &BenchResult) -> String {
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

/// Levels from the fastest to the slowest.
const LEVELS: [&str; 4] = ["L1", "L2", "L3", "DRAM"];

fn level_rank(level: &str) -> usize {
    LEVELS
        .iter()
        .position(|l| *l == level)
        .unwrap_or(LEVELS.len())
}

impl Model {
    /// The model of a run's roofline results (those of [`Subsystem::Roofline`]), drawn at
    /// `threads` (0: the most threads measured), with the user's points.
    pub fn build(results: &[&BenchResult], threads: usize, points: &[UserPoint]) -> Model {
        let mine: Vec<&BenchResult> = results
            .iter()
            .copied()
            .filter(|r| r.subsystem == Subsystem::Roofline)
            .collect();
        let threads_of = |r: &BenchResult| r.params.threads.unwrap_or(1);
        let mut ceilings: Vec<Ceiling> = mine
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
        let mut roofs: Vec<Roof> = mine
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
        let sweep: Vec<SweepPoint> = mine
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
            .collect();
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
        let mut ridges = Vec::new();
        for roof in &roofs {
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
    /// warnings for levels that are not flat or not distinct.
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
            let mut top_gbps = bandwidths.iter().copied().fold(0.0, f64::max);
            let top_gflops = points.iter().map(|p| p.gflops).fold(0.0, f64::max);
            if let Some(roof) = roof {
                // The memory-bound points: well left of where the read roof meets the ceiling.
                // Their median is the plateau where there are several: the highest of a few
                // noisy points (each a median of its repetitions) leans high by the noise.
                let bound: Vec<f64> = ceiling
                    .map(|ceiling| {
                        let ridge = ceiling.gflops / roof.gbps;
                        points
                            .iter()
                            .filter(|p| p.intensity > 0.0 && p.intensity <= ridge / 4.0)
                            .map(|p| p.gflops / p.intensity)
                            .collect()
                    })
                    .unwrap_or_default();
                if bound.len() >= 2 {
                    top_gbps = crate::stats::median(&bound);
                }
                self.checks.push(check(
                    &level,
                    "bandwidth",
                    threads,
                    &roof.name(),
                    top_gbps,
                    roof.gbps,
                ));
                {
                    let (lo, hi) = bound.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
                        (lo.min(*v), hi.max(*v))
                    });
                    if bound.len() >= 2 && hi > 0.0 && (hi - lo) / hi > FLATNESS {
                        self.warnings.push(format!(
                            "{level} ({}, {threads} threads): the sweep's bandwidth plateau is not \
                             flat ({} to {} GB/s over its memory-bound intensities); reported \
                             as measured. A level the guest sees less of than sysinfo reports \
                             (a VM sharing its L3), or a busy machine, does this",
                            format_size_approx(points[0].working_set_bytes),
                            format_value(lo),
                            format_value(hi)
                        ));
                    }
                }
            }
            if let Some(ceiling) = ceiling {
                self.checks.push(check(
                    &level,
                    "compute",
                    threads,
                    &ceiling.name,
                    top_gflops,
                    ceiling.gflops,
                ));
            }
            plateaus.push((level, threads, top_gbps));
        }
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
    pub fn top_ceiling(&self) -> Option<&Ceiling> {
        let at = || self.ceilings.iter().filter(|c| c.threads == self.threads);
        at().filter(|c| c.name.starts_with("f64 "))
            .max_by(|a, b| a.gflops.total_cmp(&b.gflops))
            .or_else(|| at().max_by(|a, b| a.gflops.total_cmp(&b.gflops)))
    }

    /// The lowest bound above a user's point at its intensity: each level's read roof capped
    /// by the top f64 ceiling, from DRAM up.
    fn place(&self, p: &UserPoint) -> Placed {
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
    pub fn balance(&self) -> Option<f64> {
        let top = self.top_ceiling()?;
        self.ridges
            .iter()
            .find(|r| r.threads == self.threads && r.roof == "DRAM read" && r.ceiling == top.name)
            .map(|r| r.intensity)
    }

    /// The model as lines of text, for the terminal.
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![format!("Roofline ({} threads drawn)", self.threads)];
        out.push("  compute ceilings (GFLOP/s, 10^9 FLOP/s):".into());
        for c in &self.ceilings {
            out.push(format!(
                "    {:<22} {:>2} threads {:>9}   peak {}",
                c.name,
                c.threads,
                format_value(c.gflops),
                c.peak_gflops
                    .map(|p| format!("{} ({} of it)", format_value(p), percent(c.gflops / p)))
                    .unwrap_or_else(|| "unknown".into())
            ));
        }
        out.push(
            "  bandwidth roofs (GB/s, 10^9 B/s; application bytes / with write-allocate):".into(),
        );
        for r in &self.roofs {
            out.push(format!(
                "    {:<12} {:>2} threads {:>10} set {:>9} / {}",
                r.name(),
                r.threads,
                format_size_approx(r.working_set_bytes),
                format_value(r.gbps),
                format_value(r.gbps_write_allocate)
            ));
        }
        if let Some(top) = self.top_ceiling() {
            out.push(format!(
                "  ridge points with {} at {} threads (FLOP/byte; application / with write-allocate):",
                top.name, self.threads
            ));
            for r in self
                .ridges
                .iter()
                .filter(|r| r.threads == self.threads && r.ceiling == top.name)
            {
                out.push(format!(
                    "    {:<12} {:>8} / {}",
                    r.roof,
                    format_value(r.intensity),
                    format_value(r.intensity_write_allocate)
                ));
            }
            out.push(format!(
                "    ({} ridge points in all, every roof × every ceiling, in the JSON)",
                self.ridges.len()
            ));
        }
        if !self.checks.is_empty() {
            out.push(format!(
                "  self-check: the sweep's plateaus against the ceilings (within ±{:.0} %):",
                TOLERANCE * 100.0
            ));
            for c in &self.checks {
                out.push(format!(
                    "    {:<5} {:<9} {} vs {} {}: {} {}",
                    c.level,
                    c.plateau,
                    format_value(c.sweep),
                    c.against,
                    format_value(c.ceiling),
                    percent(c.ratio),
                    if c.agrees { "agrees" } else { "DISAGREES" }
                ));
            }
        }
        for p in &self.points {
            out.push(format!(
                "  {}: {} GFLOP/s at {} FLOP/B is bound by the {} ({} GFLOP/s there): {} of it",
                p.name,
                format_value(p.gflops),
                format_value(p.intensity),
                p.bound_by,
                format_value(p.attainable_gflops),
                percent(p.fraction)
            ));
        }
        for w in &self.warnings {
            out.push(format!("  warning: {w}"));
        }
        out
    }
}

/// The counting rule every model states.
pub const COUNTING: &str = "intensity = FLOP / byte; ceilings count an FMA as 2 FLOP per lane; \
roofs count the application's bytes (read 8 B, copy 16 B, triad 24 B per f64 element) and, in \
the *_write_allocate fields, the bus's bytes too (a written line is read first: copy 24 B, \
triad 32 B); the sweep reads 8 B per element and writes nothing, so its two counts agree";

fn check(
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

fn percent(ratio: f64) -> String {
    format!("{:.1} %", ratio * 100.0)
}

/// The model stored in a run's `model` result, or rebuilt from its results.
pub fn model_of(report: &Report) -> Option<Model> {
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

// ---------------------------------------------------------------------------------------------
// The chart

const W: f64 = 1000.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 670.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 560.0;

/// A log10 axis from `lo` to `hi` onto pixels `a` to `b`.
struct Log {
    lo: f64,
    hi: f64,
    a: f64,
    b: f64,
}

impl Log {
    /// An axis a little wider than `lo`..`hi`, at least one decade long.
    fn new(lo: f64, hi: f64, a: f64, b: f64) -> Log {
        let (lo, hi) = (lo / 1.6, (hi * 1.6).max(lo * 10.0));
        Log { lo, hi, a, b }
    }

    fn map(&self, v: f64) -> f64 {
        let t = (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10());
        self.a + t * (self.b - self.a)
    }

    fn ticks(&self) -> Vec<f64> {
        let (lo, hi) = (
            self.lo.log10().ceil() as i32,
            self.hi.log10().floor() as i32,
        );
        (lo..=hi).map(|e| 10f64.powi(e)).collect()
    }
}

fn tick_text(v: f64) -> String {
    if v >= 1.0 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.6}");
        s.trim_end_matches('0').to_string()
    }
}

/// Dash patterns of the traffic kinds, and of further runs.
fn traffic_dash(traffic: &str) -> &'static str {
    match traffic {
        "read" => "",
        "triad" => r#" stroke-dasharray="8 4""#,
        _ => r#" stroke-dasharray="2 3""#,
    }
}

/// Labels placed top-down at `y` with at least `gap` pixels between them.
fn spread(mut ys: Vec<(usize, f64)>, gap: f64, lo: f64, hi: f64) -> Vec<(usize, f64)> {
    ys.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut last = f64::NEG_INFINITY;
    for (_, y) in ys.iter_mut() {
        *y = y.max(last + gap).max(lo);
        last = *y;
    }
    // Pushed past the bottom: shift the tail back up.
    let mut next = f64::INFINITY;
    for (_, y) in ys.iter_mut().rev() {
        *y = y.min(next - gap).min(hi);
        next = *y;
    }
    ys
}

/// The roofline chart of one or several runs (`report A B` overlays them; the n-th run's lines
/// are drawn thinner and its labels prefixed with its name).
pub fn svg(models: &[(String, &Model)]) -> String {
    let drawn = |m: &Model| -> (Vec<Ceiling>, Vec<Roof>) {
        (
            m.ceilings
                .iter()
                .filter(|c| c.threads == m.threads)
                .cloned()
                .collect(),
            m.roofs
                .iter()
                .filter(|r| r.threads == m.threads)
                .cloned()
                .collect(),
        )
    };
    let mut xs: Vec<f64> = vec![1.0 / 8.0, 128.0];
    let mut ys: Vec<f64> = Vec::new();
    for (_, m) in models {
        let (ceilings, roofs) = drawn(m);
        xs.extend(m.sweep.iter().map(|p| p.intensity));
        xs.extend(m.points.iter().map(|p| p.intensity));
        ys.extend(ceilings.iter().map(|c| c.gflops));
        ys.extend(m.sweep.iter().map(|p| p.gflops));
        ys.extend(m.points.iter().map(|p| p.gflops));
        ys.extend(roofs.iter().map(|r| r.gbps / 8.0));
    }
    let ok = |v: &f64| v.is_finite() && *v > 0.0;
    let x_lo = xs.iter().copied().filter(ok).fold(f64::INFINITY, f64::min);
    let x_hi = xs.iter().copied().filter(ok).fold(0.0, f64::max);
    let y_lo = ys.iter().copied().filter(ok).fold(f64::INFINITY, f64::min);
    let y_hi = ys.iter().copied().filter(ok).fold(0.0, f64::max);
    let (y_lo, y_hi) = if y_hi > 0.0 {
        (y_lo, y_hi * 1.5)
    } else {
        (1.0, 10.0)
    };
    let x = Log::new(x_lo, x_hi, LEFT, RIGHT);
    let y = Log::new(y_lo, y_hi, BOTTOM, TOP);
    // The roofs' legend (a row per level and run), then the notes.
    let legend_rows = models.len() * (LEVELS.len() + 1) + 3;
    let height = BOTTOM + 70.0 + 17.0 * legend_rows as f64;
    let title = match models {
        [(name, m)] => format!("Roofline of {name} ({} threads)", m.threads),
        _ => format!(
            "Rooflines of {}",
            models
                .iter()
                .map(|(n, m)| format!("{n} ({} threads)", m.threads))
                .collect::<Vec<_>>()
                .join(" and ")
        ),
    };
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg class="chart roofline" data-kind="roofline" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {height}" width="{W}" height="{height}" role="img" aria-label="{t}" font-family="sans-serif" font-size="12"><title>{t}</title><rect width="{W}" height="{height}" fill="white"/><text x="{cx}" y="26" text-anchor="middle" font-size="16" font-weight="600">{t}</text>"#,
        t = escape(&title),
        cx = (LEFT + RIGHT) / 2.0
    );
    for t in x.ticks() {
        let px = x.map(t);
        let _ = write!(
            out,
            r##"<line x1="{px:.1}" y1="{TOP}" x2="{px:.1}" y2="{BOTTOM}" stroke="#e6e6e6"/><text x="{px:.1}" y="{ty}" text-anchor="middle" fill="#444">{l}</text>"##,
            ty = BOTTOM + 16.0,
            l = tick_text(t)
        );
    }
    for t in y.ticks() {
        let py = y.map(t);
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" y1="{py:.1}" x2="{RIGHT}" y2="{py:.1}" stroke="#e6e6e6"/><text x="{tx}" y="{ty:.1}" text-anchor="end" fill="#444">{l}</text>"##,
            tx = LEFT - 6.0,
            ty = py + 4.0,
            l = tick_text(t)
        );
    }
    let _ = write!(
        out,
        r##"<rect x="{LEFT}" y="{TOP}" width="{w}" height="{h}" fill="none" stroke="#888"/><text x="{cx}" y="{xy}" text-anchor="middle" font-size="13">arithmetic intensity (FLOP/byte, log scale)</text><text transform="translate(22 {cy}) rotate(-90)" text-anchor="middle" font-size="13">attainable GFLOP/s (10^9 FLOP/s, log scale)</text>"##,
        w = RIGHT - LEFT,
        h = BOTTOM - TOP,
        cx = (LEFT + RIGHT) / 2.0,
        xy = BOTTOM + 36.0,
        cy = (TOP + BOTTOM) / 2.0
    );
    // Lines are clipped to the plot; labels are not.
    let _ = write!(
        out,
        r#"<defs><clipPath id="roofline-plot"><rect x="{LEFT}" y="{TOP}" width="{w}" height="{h}"/></clipPath></defs><g clip-path="url(#roofline-plot)">"#,
        w = RIGHT - LEFT,
        h = BOTTOM - TOP
    );
    let clip = |v: f64, lo: f64, hi: f64| v.max(lo).min(hi);
    let mut right_labels: Vec<(String, String, f64)> = Vec::new();
    // (label, colour, traffic, legend row: run and level)
    let mut roof_labels: Vec<(String, String, String, usize)> = Vec::new();
    for (run, (name, m)) in models.iter().enumerate() {
        let prefix = if models.len() > 1 {
            format!("{name}: ")
        } else {
            String::new()
        };
        let width = if run == 0 { 2.0 } else { 1.2 };
        let opacity = if run == 0 { 1.0 } else { 0.75 };
        let (ceilings, roofs) = drawn(m);
        let top = m.top_ceiling().map(|c| c.gflops);
        let fastest = roofs.iter().map(|r| r.gbps).fold(0.0, f64::max);
        // Ceilings: from where the fastest roof meets them to the right edge.
        let top_name = m.top_ceiling().map(|c| c.name.clone());
        for c in &ceilings {
            let color = "#333";
            let from = if fastest > 0.0 {
                c.gflops / fastest
            } else {
                x.lo
            };
            let (x1, x2, py) = (clip(x.map(from), LEFT, RIGHT), RIGHT, y.map(c.gflops));
            let dash = if Some(&c.name) == top_name.as_ref() {
                ""
            } else {
                r#" stroke-dasharray="6 3""#
            };
            let label = format!(
                "{prefix}{} {} GFLOP/s{}",
                c.name,
                format_value(c.gflops),
                c.peak_gflops
                    .map(|p| format!(" (peak {})", format_value(p)))
                    .unwrap_or_default()
            );
            let _ = write!(
                out,
                r#"<g class="ceiling" data-name="{n}" data-gflops="{v}"><line x1="{x1:.1}" y1="{py:.1}" x2="{x2:.1}" y2="{py:.1}" stroke="{color}" stroke-width="{sw}" opacity="{opacity}"{dash}/></g>"#,
                n = escape(&c.name),
                v = c.gflops,
                sw = width * 0.75
            );
            right_labels.push((label, color.to_string(), py));
        }
        // Roofs: from the left edge to where they meet the top ceiling.
        for r in &roofs {
            let color = PALETTE[level_rank(&r.level) % PALETTE.len()];
            let end = top.map_or(x.hi, |t| t / r.gbps).min(x.hi);
            let (px1, py1) = (x.map(x.lo), y.map(r.gbps * x.lo));
            let (px2, py2) = (x.map(end), y.map(r.gbps * end));
            let label = format!(
                "{prefix}{} {} GB/s ({} set)",
                r.name(),
                format_value(r.gbps),
                format_size_approx(r.working_set_bytes)
            );
            let _ = write!(
                out,
                r#"<g class="roof" data-name="{n}" data-gbps="{v}"><line x1="{px1:.1}" y1="{py1:.1}" x2="{px2:.1}" y2="{py2:.1}" stroke="{color}" stroke-width="{width}" opacity="{opacity}"{dash}/></g>"#,
                n = escape(&r.name()),
                v = r.gbps,
                dash = traffic_dash(&r.traffic)
            );
            // Labelled in the legend under the plot, by level (row) and traffic (column).
            roof_labels.push((
                label,
                color.to_string(),
                r.traffic.clone(),
                run * LEVELS.len() + level_rank(&r.level),
            ));
        }
        // Ridge points of each roof with the top ceiling.
        if let Some(t) = m.top_ceiling() {
            for ridge in m
                .ridges
                .iter()
                .filter(|g| g.threads == m.threads && g.ceiling == t.name)
            {
                let (px, py) = (x.map(ridge.intensity), y.map(ridge.gflops));
                let _ = write!(
                    out,
                    r##"<g class="ridge" data-roof="{r}" data-intensity="{i}"><circle cx="{px:.1}" cy="{py:.1}" r="4" fill="white" stroke="#000" stroke-width="1.5"/><title>ridge {r} × {c}: {iv} FLOP/B</title></g>"##,
                    r = escape(&ridge.roof),
                    c = escape(&ridge.ceiling),
                    i = ridge.intensity,
                    iv = format_value(ridge.intensity)
                );
            }
        }
        // The sweep: one line of points per level.
        for level in LEVELS {
            let mut points: Vec<&SweepPoint> = m
                .sweep
                .iter()
                .filter(|p| p.level == level && p.threads == m.threads)
                .collect();
            if points.is_empty() {
                continue;
            }
            points.sort_by(|a, b| a.intensity.total_cmp(&b.intensity));
            let color = PALETTE[level_rank(level) % PALETTE.len()];
            let path: Vec<String> = points
                .iter()
                .map(|p| format!("{:.1},{:.1}", x.map(p.intensity), y.map(p.gflops)))
                .collect();
            let _ = write!(
                out,
                r#"<g class="sweep" data-level="{level}" data-points="{n}"><polyline points="{pts}" fill="none" stroke="{color}" stroke-width="1" opacity="0.6"/>"#,
                n = points.len(),
                pts = path.join(" ")
            );
            for p in &points {
                let _ = write!(
                    out,
                    r#"<rect x="{a:.1}" y="{b:.1}" width="6" height="6" fill="{color}" opacity="{opacity}"><title>{level} sweep: {f} FLOP/element, {i} FLOP/B, {g} GFLOP/s</title></rect>"#,
                    a = x.map(p.intensity) - 3.0,
                    b = y.map(p.gflops) - 3.0,
                    f = p.flop_per_element,
                    i = format_value(p.intensity),
                    g = format_value(p.gflops)
                );
            }
            out.push_str("</g>");
        }
        // The user's points.
        for p in &m.points {
            let (px, py) = (x.map(p.intensity), y.map(p.gflops));
            let _ = write!(
                out,
                r##"<g class="point" data-name="{n}"><path d="M{px:.1} {a:.1}L{b:.1} {py:.1}L{px:.1} {c:.1}L{d:.1} {py:.1}Z" fill="#000"/><text x="{tx:.1}" y="{ty:.1}" font-size="11">{l}</text></g>"##,
                n = escape(&p.name),
                a = py - 6.0,
                b = px + 6.0,
                c = py + 6.0,
                d = px - 6.0,
                tx = px + 8.0,
                ty = py - 6.0,
                l = escape(&format!(
                    "{prefix}{} {} GFLOP/s: {} of the {}",
                    p.name,
                    format_value(p.gflops),
                    percent(p.fraction),
                    p.bound_by
                ))
            );
        }
    }
    out.push_str("</g>");
    // Ceiling labels right of the plot, roof labels inside its left edge.
    let placed = spread(
        right_labels
            .iter()
            .enumerate()
            .map(|(i, l)| (i, l.2 + 4.0))
            .collect(),
        13.0,
        TOP,
        BOTTOM + 40.0,
    );
    for (i, py) in placed {
        let (label, color, _) = &right_labels[i];
        let _ = write!(
            out,
            r#"<text class="ceiling-label" x="{tx}" y="{py:.1}" fill="{color}">{l}</text>"#,
            tx = RIGHT + 6.0,
            l = escape(label)
        );
    }
    // The roofs' legend: a row per level (and run), a column per traffic kind, each entry a
    // sample of the line and its label.
    let mut rows: Vec<usize> = roof_labels.iter().map(|l| l.3).collect();
    rows.sort_unstable();
    rows.dedup();
    for (label, color, traffic, row) in &roof_labels {
        let r = rows.iter().position(|x| x == row).unwrap_or(0);
        let c = ["read", "triad", "copy"]
            .iter()
            .position(|t| t == traffic)
            .unwrap_or(2);
        let (lx, ly) = (LEFT + 300.0 * c as f64, BOTTOM + 62.0 + 17.0 * r as f64);
        let _ = write!(
            out,
            r#"<line x1="{lx}" y1="{a:.1}" x2="{b}" y2="{a:.1}" stroke="{color}" stroke-width="2"{dash}/><text class="roof-label" x="{tx}" y="{ly:.1}" fill="{color}">{l}</text>"#,
            a = ly - 4.0,
            b = lx + 28.0,
            tx = lx + 34.0,
            dash = traffic_dash(traffic),
            l = escape(label)
        );
    }
    let roof_rows = rows.len();
    // What the lines mean.
    let mut ly = BOTTOM + 66.0 + 17.0 * roof_rows as f64;
    let legend = [
        "flat lines: compute ceilings (solid: the top f64 one); slanted: bandwidth roofs, \
         colour = level, solid = read, dashed = triad, dotted = copy (application bytes)",
        "squares: the intensity sweep (read-only FMA chains) at each level's working set; \
         circles: ridge points with the top ceiling; diamonds: your --point kernels",
    ];
    for line in legend {
        let _ = write!(
            out,
            r##"<text x="{LEFT}" y="{ly:.1}" font-size="11" fill="#555">{}</text>"##,
            escape(line)
        );
        ly += 16.0;
    }
    for (name, m) in models {
        let checks = m.checks.iter().filter(|c| c.threads == m.threads);
        let (good, all) = checks.fold((0, 0), |(g, a), c| (g + usize::from(c.agrees), a + 1));
        let _ = write!(
            out,
            r##"<text x="{LEFT}" y="{ly:.1}" font-size="11" fill="#555">{}</text>"##,
            escape(&format!(
                "{name}: self-check {good} of {all} sweep plateaus within ±{:.0} % of their roof or ceiling; {} warning(s)",
                TOLERANCE * 100.0,
                m.warnings.len()
            ))
        );
        ly += 16.0;
    }
    out.push_str("</svg>");
    out
}

/// The roofline section of the HTML report: the chart of every run that has one (overlaid),
/// the self-check and the warnings.
pub fn html_section(out: &mut String, runs: &[(i64, &Report)]) {
    let models: Vec<(String, Model)> = runs
        .iter()
        .filter_map(|(id, r)| model_of(r).map(|m| (format!("run {id} ({})", r.host.hostname), m)))
        .collect();
    if models.is_empty() {
        return;
    }
    let refs: Vec<(String, &Model)> = models.iter().map(|(n, m)| (n.clone(), m)).collect();
    let _ = writeln!(
        out,
        "<h3>The roofline</h3>\n<figure>{}</figure>",
        svg(&refs)
    );
    let _ = writeln!(out, "<p class=\"shared\">{}</p>", escape(COUNTING));
    for (name, m) in &models {
        let _ = writeln!(
            out,
            "<details><summary>{} in text</summary><pre>",
            escape(name)
        );
        for line in m.lines() {
            let _ = writeln!(out, "{}", escape(&line));
        }
        out.push_str("</pre></details>\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_parse_and_refuse_bad_input() {
        let p = UserPoint::parse("my:spmv:0.25:3.5").unwrap();
        assert_eq!(
            (p.name.as_str(), p.intensity, p.gflops),
            ("my:spmv", 0.25, 3.5)
        );
        for bad in ["x:1", "x:-1:2", "x:1:nan", ":1:2", "x:1:0"] {
            assert!(UserPoint::parse(bad).is_err(), "{bad}");
        }
    }

    fn model() -> Model {
        let mut m = Model {
            threads: 2,
            ceilings: vec![Ceiling {
                name: "f64 avx2 fma".into(),
                threads: 2,
                gflops: 100.0,
                peak_gflops: Some(110.0),
            }],
            roofs: vec![
                Roof {
                    level: "L1".into(),
                    traffic: "read".into(),
                    threads: 2,
                    working_set_bytes: 32 << 10,
                    gbps: 400.0,
                    gbps_write_allocate: 400.0,
                },
                Roof {
                    level: "DRAM".into(),
                    traffic: "triad".into(),
                    threads: 2,
                    working_set_bytes: 1 << 28,
                    gbps: 24.0,
                    gbps_write_allocate: 32.0,
                },
                Roof {
                    level: "DRAM".into(),
                    traffic: "read".into(),
                    threads: 2,
                    working_set_bytes: 1 << 28,
                    gbps: 20.0,
                    gbps_write_allocate: 20.0,
                },
            ],
            ..Model::default()
        };
        m.points = vec![
            m.place(&UserPoint::parse("stream:0.125:2").unwrap()),
            m.place(&UserPoint::parse("blocked:0.125:30").unwrap()),
            m.place(&UserPoint::parse("dense:50:80").unwrap()),
        ];
        m
    }

    #[test]
    fn the_bandwidth_plateau_is_the_median_of_the_memory_bound_points() {
        let mut m = model();
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
        let m = model();
        // 0.125 FLOP/B × 20 GB/s = 2.5 GFLOP/s under DRAM: 80 % of it.
        assert_eq!(m.points[0].bound_by, "DRAM read roof");
        assert!((m.points[0].fraction - 0.8).abs() < 1e-12);
        // 30 GFLOP/s is above DRAM's 2.5: the L1 roof (50) bounds it.
        assert_eq!(m.points[1].bound_by, "L1 read roof");
        assert_eq!(m.points[2].bound_by, "f64 avx2 fma ceiling");
    }

    #[test]
    fn the_chart_has_every_ceiling_and_roof_labelled() {
        let m = model();
        let svg = svg(&[("run 1".into(), &m)]);
        assert_eq!(svg.matches("class=\"ceiling\"").count(), 1);
        assert_eq!(svg.matches("class=\"roof\"").count(), 3);
        assert!(svg.contains("f64 avx2 fma 100 GFLOP/s (peak 110)"));
        assert!(svg.contains("DRAM triad 24.0 GB/s"));
        assert!(svg.contains("class=\"point\" data-name=\"dense\""));
    }
}
