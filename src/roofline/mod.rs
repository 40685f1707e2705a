//! `peakbench roofline`: the empirical roofline of this machine.
//!
//! Three kinds of cases, then the model:
//!
//! 1. **Compute ceilings**: the `cpu` workload's own kernels and cases (f64 and f32, and f16 or
//!    bf16 where this CPU has a kernel for them; every ISA the CPU has; with and without FMA;
//!    each thread count), run unchanged, so each ceiling is what `peakbench cpu` measures for the
//!    same precision, ISA and threads. Each carries its theoretical peak.
//! 2. **Bandwidth roofs**: the `mem` workload's cases (`read` in blocks, `stream-triad`,
//!    `stream-copy`) at each level's working set ([`levels`]; the L3's from where a short latency
//!    probe, [`probe`], finds the cache ending, where that is before sysinfo's L3 ends), 1 thread
//!    and all of them, so each
//!    roof is what `peakbench mem --op … --size … --threads …` measures. Each gives its GB/s with
//!    the application's bytes and with write-allocate reads (`throughput_with_write_allocate`).
//! 3. **The intensity sweep** ([`sweep`]): one read-only kernel with 1 to 1024 FLOP per loaded
//!    element, at each level's working set on all threads. Its threads are **pinned** by default
//!    (`--unpinned` to leave them): a thread the scheduler moves to another core leaves its
//!    L1/L2-sized set behind and streams it again from the next level, which blurs exactly the
//!    plateaus the sweep is there to show.
//! 4. **The model** ([`crate::result::roofline::Model`]), after them: ceilings, roofs, ridge
//!    points (each roof × each ceiling), the sweep's plateaus held against the roofs and
//!    ceilings they should meet (the self-check, ±5 %) and the user's `--point`s placed. It is
//!    stored in the run's last result, printed as text after the run and drawn as a chart
//!    (`--svg FILE`, and a section of the HTML report) by [`crate::report::roofline`]. The
//!    workload writes no file: the model case hands the `--svg` chart back with its result
//!    ([`Case::files`]) and the session writes it.

pub(crate) mod levels;
mod params;
pub(crate) mod probe;
pub(crate) mod sweep;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use clap::Args;

use crate::cpu::{CpuOptions, kernels};
use crate::error::usage;
use crate::memory::kernels::MemIsa;
use crate::memory::{BandwidthCase, MemOp};
use crate::options::{Defaults, Threads, Timing, positive_count, positive_size};
use crate::peak::{Isa, Precision};
use crate::plan::{Case, CaseFile, CaseSpec, Context, Plan};
use crate::report::roofline::{lines, svg};
use crate::result::roofline::{COUNTING, Model, UserPoint};
use crate::result::{BenchResult, Subsystem};
use crate::runner::{self, Scaling};
use crate::units::format_size_approx;
use crate::workload::Benchmark;
use levels::MemoryLevel;
use sweep::{Intensity, STEP, SweepCase, SweepIsa};

/// The defaults of `roofline`: 1 and every CPU; 200 ms repetitions, so that the whole
/// roofline (some 90 cases) takes about a minute and a half.
#[derive(Debug, Clone)]
pub(crate) struct RooflineDefaults;

impl Defaults for RooflineDefaults {
    const DURATION: &'static str = "200ms";
    const DURATION_NOTE: &'static str = " (every ceiling, roof and sweep point; a compute ceiling's work is sized so that one thread needs about this long)";
}

#[derive(Args, Debug)]
pub(crate) struct RooflineArgs {
    #[command(flatten)]
    pub threads: Threads<RooflineDefaults>,
    #[command(flatten)]
    pub timing: Timing<RooflineDefaults>,
    /// Memory levels (list of L1, L2, L3, DRAM; default: every cache level sysinfo reads, and DRAM)
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = level_name)]
    pub levels: Option<Vec<String>>,
    /// DRAM working set of all threads (default 8 × the last-level caches, at least 256 MiB)
    #[arg(long, value_name = "SIZE", value_parser = positive_size)]
    pub dram_size: Option<u64>,
    /// FLOP per loaded element of the sweep (list of 1 and even numbers; default 1,2,4,…,1024)
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = flop_per_element)]
    pub flops: Option<Vec<u64>>,
    /// Leave the sweep's threads unpinned (pinned by default: a moved thread loses its cached set)
    #[arg(long)]
    pub unpinned: bool,
    /// Place your kernel on the roofline: NAME:INTENSITY:GFLOPS (FLOP/byte, GFLOP/s; repeatable)
    #[arg(long, value_name = "NAME:INTENSITY:GFLOPS", value_parser = user_point)]
    pub point: Vec<UserPoint>,
    /// Also write the chart as a standalone SVG file
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

fn level_name(text: &str) -> Result<String, String> {
    levels::NAMES
        .iter()
        .find(|n| n.eq_ignore_ascii_case(text.trim()))
        .map(|n| n.to_string())
        .ok_or_else(|| {
            format!(
                "'{text}' is not a level: give some of {}",
                levels::NAMES.join(", ")
            )
        })
}

/// `--point NAME:INTENSITY:GFLOPS` (the name may hold colons; the last two fields are the
/// numbers, both positive).
fn user_point(text: &str) -> Result<UserPoint, String> {
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

fn flop_per_element(text: &str) -> Result<u64, String> {
    let n = positive_count(text)?;
    match Intensity::new(n) {
        Some(_) if n <= 1 << 16 => Ok(n),
        _ => Err(format!(
            "{n} FLOP per element: the sweep does 1 add or a chain of FMAs (2 FLOP each): give 1 \
             or an even number up to 65536"
        )),
    }
}

/// `peakbench roofline`.
pub(crate) struct Roofline;

/// What the roofline was asked for, for the record.
#[derive(serde::Serialize)]
struct RooflineOptions {
    threads: Vec<usize>,
    sweep_threads: usize,
    duration_s: f64,
    precisions: Vec<&'static str>,
    isas: Vec<&'static str>,
    levels: Vec<MemoryLevel>,
    flop_per_element: Vec<u64>,
    sweep_pinned: bool,
    sweep_isa: &'static str,
    points: Vec<UserPoint>,
    svg: Option<PathBuf>,
}

impl Benchmark for Roofline {
    const NAME: &'static str = "roofline";
    const PATH: &'static [&'static str] = &["roofline"];
    const ABOUT: &'static str = "Empirical roofline: compute ceilings, bandwidth roofs per memory level, an intensity sweep, ridge points, chart";
    type Args = RooflineArgs;

    fn plan(args: &RooflineArgs, ctx: &Context) -> Result<Plan> {
        let threads = args.threads.or(&unique_sorted(&[1, runner::num_cpus()]));
        let sweep_threads = *threads.iter().max().expect("at least one thread count");
        if let Some(path) = &args.svg {
            crate::options::check_svg_path(path, "roofline.svg")?;
        }
        let mut plan = Builder::new(args.timing.duration);
        let (precisions, isas) = plan.ceilings(ctx, &threads);
        let (levels, probe_note) = chosen_levels(args, ctx, sweep_threads)?;
        plan.notes.extend(probe_note);
        plan.roofs(ctx, &levels, &threads);
        let flops = args.flops.clone().unwrap_or_else(sweep::default_flops);
        let isa = plan.sweep(&levels, &flops, sweep_threads, !args.unpinned);
        // Step 4, the model, after every measured case.
        let model = ModelCase {
            threads: sweep_threads,
            points: args.point.clone(),
            svg: args.svg.clone(),
            collector: plan.collector.clone(),
        };
        plan.cases.push(Box::new(model));
        let options = RooflineOptions {
            threads,
            sweep_threads,
            duration_s: plan.duration.as_secs_f64(),
            precisions: precisions.iter().map(|p| p.name()).collect(),
            isas: isas.iter().map(|i| i.name()).collect(),
            levels,
            flop_per_element: flops,
            sweep_pinned: !args.unpinned,
            sweep_isa: isa.name(),
            points: args.point.clone(),
            svg: args.svg.clone(),
        };
        Ok(Plan::new(plan.cases, plan.notes, &options)?.with_summary(summary))
    }
}

/// The roofline's plan as it is built, step by step: its cases in the order they run, its
/// notes, and where the measured cases hand their results to the model.
struct Builder {
    cases: Vec<Box<dyn Case>>,
    notes: Vec<String>,
    collector: Collector,
    duration: Duration,
}

impl Builder {
    fn new(duration: Duration) -> Builder {
        Builder {
            cases: Vec::new(),
            notes: Vec::new(),
            collector: Arc::new(Mutex::new(Vec::new())),
            duration,
        }
    }

    /// Step 1, the compute ceilings: the cpu workload's cases for every precision this CPU has
    /// a kernel for and every ISA, with and without FMA. Returns the precisions and ISAs, for
    /// the record.
    fn ceilings(&mut self, ctx: &Context, threads: &[usize]) -> (Vec<Precision>, Vec<Isa>) {
        let precisions: Vec<Precision> = [
            Precision::F64,
            Precision::F32,
            Precision::F16,
            Precision::Bf16,
        ]
        .into_iter()
        .filter(|p| {
            kernels::all()
                .iter()
                .any(|k| k.precision == *p && k.supported())
        })
        .collect();
        for missing in [Precision::F16, Precision::Bf16] {
            if !precisions.contains(&missing) {
                self.notes.push(format!(
                    "no {} ceiling: this CPU has no {} kernel peakbench can run",
                    missing.name(),
                    missing.name()
                ));
            }
        }
        let isas = crate::peak::isas_of(&ctx.host);
        let cpu = CpuOptions {
            precisions: precisions.clone(),
            isas: isas.clone(),
            fma: vec![true, false],
            threads: threads.to_vec(),
            scaling: Scaling::Strong,
            ops: None,
            duration: self.duration,
            samples: None,
        };
        let (compute, cpu_notes) = crate::cpu::plan(&cpu, ctx);
        self.notes.extend(
            cpu_notes
                .into_iter()
                .map(|n| format!("compute ceilings: {n}")),
        );
        for inner in compute {
            let case = Wrapped::compute(inner, self.duration, self.collector.clone());
            self.cases.push(Box::new(case));
        }
        (precisions, isas)
    }

    /// Step 2, the bandwidth roofs: the mem workload's cases, each traffic kind at each level's
    /// working set and each thread count.
    fn roofs(&mut self, ctx: &Context, levels: &[MemoryLevel], threads: &[usize]) {
        for level in levels {
            self.notes.push(level_note(level));
            for &t in threads {
                for traffic in [Traffic::Read, Traffic::Triad, Traffic::Copy] {
                    let inner = bandwidth_case(traffic, level, t, self.duration, ctx.runner.pin);
                    self.cases.push(Box::new(Wrapped::bandwidth(
                        Box::new(inner),
                        level,
                        traffic,
                        self.duration,
                        self.collector.clone(),
                    )));
                }
            }
        }
    }

    /// Step 3, the intensity sweep: each FLOP count at each level's working set, on the most
    /// threads, pinned unless asked otherwise. Returns the code the sweep runs.
    fn sweep(
        &mut self,
        levels: &[MemoryLevel],
        flops: &[u64],
        threads: usize,
        pin: bool,
    ) -> SweepIsa {
        let isa = SweepIsa::detect();
        for level in levels {
            let slice_elements =
                (level.per_thread(threads) / sweep::BYTES_PER_ELEMENT / STEP * STEP).max(STEP);
            for &f in flops {
                let intensity = Intensity::new(f).expect("checked by the flag's parser");
                self.cases.push(Box::new(Collected {
                    level_source: level.source.clone(),
                    inner: Box::new(SweepCase {
                        level: level.name.clone(),
                        intensity,
                        threads,
                        slice_elements,
                        duration: self.duration,
                        pin,
                        isa,
                    }),
                    collector: self.collector.clone(),
                }));
            }
        }
        if isa == SweepIsa::Portable {
            self.notes.push(
                "the sweep runs portable code (no AVX2 and FMA): its compute plateau is held against the scalar no-fma ceiling"
                    .into(),
            );
        }
        isa
    }
}

/// The levels `--levels` asks for (every one found by default), each refused if its largest
/// working set (one thread's, or all the sweep's threads' together) is more than the memory
/// available. With an L3 among them, the latency probe first looks for its real end (in a run,
/// not a dry run); its note comes back with the levels.
fn chosen_levels(
    args: &RooflineArgs,
    ctx: &Context,
    sweep_threads: usize,
) -> Result<(Vec<MemoryLevel>, Option<String>)> {
    let wanted = |name: &str| {
        args.levels
            .as_ref()
            .is_none_or(|want| want.iter().any(|w| w == name))
    };
    let (edge, note) = if wanted("L3") {
        probe::l3_edge(ctx)
    } else {
        (None, None)
    };
    let chosen: Vec<MemoryLevel> = levels::levels(&ctx.host, args.dram_size, edge.as_ref())
        .into_iter()
        .filter(|l| wanted(&l.name))
        .collect();
    if chosen.is_empty() {
        return Err(usage(
            "--levels: none of them is on this machine: give some of L1, L2, L3, DRAM (see 'peakbench sysinfo' for its caches)",
        ));
    }
    let available = ctx.host.memory.available_bytes;
    for level in &chosen {
        let largest = level
            .per_thread(1)
            .max(level.per_thread(sweep_threads) * sweep_threads as u64);
        if available > 0 && largest > available {
            return Err(usage(format!(
                "--dram-size: {} is more than the {} of memory available: give a smaller --dram-size",
                format_size_approx(largest),
                format_size_approx(available)
            )));
        }
    }
    Ok((chosen, note))
}

/// A level's working set and where its size comes from, for the plan's notes.
fn level_note(level: &MemoryLevel) -> String {
    let share = if level.split { "in all" } else { "per thread" };
    format!(
        "{}: {} {share} ({})",
        level.name,
        format_size_approx(level.per_thread(1)),
        level.source
    )
}

fn unique_sorted(items: &[usize]) -> Vec<usize> {
    let mut v = items.to_vec();
    v.sort_unstable();
    v.dedup();
    v
}

/// The traffic kinds of the roofs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Traffic {
    /// `mem --op read`: 8 B per element, read only.
    Read,
    /// `mem --op stream-triad`: 24 B (32 B with write-allocate).
    Triad,
    /// `mem --op stream-copy`: 16 B (24 B with write-allocate).
    Copy,
}

impl Traffic {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Traffic::Read => "read",
            Traffic::Triad => "triad",
            Traffic::Copy => "copy",
        }
    }

    fn op(self) -> MemOp {
        match self {
            Traffic::Read => MemOp::Read,
            Traffic::Triad => MemOp::StreamTriad,
            Traffic::Copy => MemOp::StreamCopy,
        }
    }

    /// Bus bytes per application byte: a written line is read first (write-allocate).
    pub(crate) fn write_allocate_factor(self) -> f64 {
        match self {
            Traffic::Read => 1.0,
            Traffic::Triad => 32.0 / 24.0,
            Traffic::Copy => 24.0 / 16.0,
        }
    }
}

/// The `mem` case of `traffic` at `level` on `threads` threads: the case `peakbench mem --op …
/// --size <level's set> --threads …` plans (`--block` for reads: the largest power of two up to
/// 1 MiB within each thread's share), built with the same arithmetic.
fn bandwidth_case(
    traffic: Traffic,
    level: &MemoryLevel,
    threads: usize,
    duration: Duration,
    pin: bool,
) -> BandwidthCase {
    let size = level.per_thread(threads) * threads as u64;
    let op = traffic.op();
    let isa = MemIsa::detect();
    match op.stream() {
        Some(kernel) => BandwidthCase {
            op,
            block: None,
            threads,
            slice: (size / (kernel.arrays() * 8 * threads as u64)).max(1) * 8,
            nt: false,
            duration,
            work: None,
            isa,
            pin,
        },
        None => {
            let slice = size / threads as u64;
            let block = read_block(slice);
            BandwidthCase {
                op,
                block: Some(block),
                threads,
                slice: slice / block * block,
                nt: false,
                duration,
                work: None,
                isa,
                pin,
            }
        }
    }
}

/// The block of a read roof: the largest power of two up to 1 MiB within `slice`.
fn read_block(slice: u64) -> u64 {
    let cap = slice.clamp(1, 1 << 20);
    1u64 << (63 - cap.leading_zeros())
}

/// What the roofline's cases hand its model.
type Collector = Arc<Mutex<Vec<BenchResult>>>;

/// A sweep case whose result the model reads, with where its level's size came from.
struct Collected {
    inner: Box<dyn Case>,
    level_source: String,
    collector: Collector,
}

impl Case for Collected {
    fn spec(&self) -> CaseSpec {
        let mut spec = self.inner.spec();
        spec.params
            .other
            .insert("level_size".into(), self.level_source.clone().into());
        spec
    }
    fn estimate(&self, ctx: &Context) -> Duration {
        self.inner.estimate(ctx)
    }
    fn run(&self, ctx: &Context) -> Result<BenchResult> {
        let mut result = self.inner.run(ctx)?;
        result
            .params
            .other
            .insert("level_size".into(), self.level_source.clone().into());
        self.collector.lock().unwrap().push(result.clone());
        Ok(result)
    }
}

/// A `cpu` or `mem` case run unchanged, its result renamed as a roofline ceiling or roof (its
/// own id, the roofline subsystem, the level and traffic), and the command that measures the
/// same case alone recorded for comparison.
struct Wrapped {
    inner: Box<dyn Case>,
    op: &'static str,
    /// The level's name and where its size came from.
    level: Option<(String, String)>,
    traffic: Option<Traffic>,
    /// The standalone command measuring the same case.
    command: String,
    collector: Collector,
}

impl Wrapped {
    fn compute(inner: Box<dyn Case>, duration: Duration, collector: Collector) -> Wrapped {
        let spec = inner.spec();
        let p = &spec.params;
        let command = format!(
            "peakbench cpu --precision {} --isa {} --fma {} --threads {} --duration {}ms",
            p.precision.as_deref().unwrap_or("?"),
            // AMX tiles run under `cpu --isa avx512`, beside the 512-bit dot products: `cpu`
            // has no `--isa amx` (the same_as of an AMX ceiling was a usage error).
            match p.isa.as_deref() {
                Some("amx") => "avx512",
                isa => isa.unwrap_or("?"),
            },
            match p.fma {
                Some(false) => "no",
                _ => "yes",
            },
            p.threads.unwrap_or(1),
            duration.as_millis()
        );
        Wrapped {
            inner,
            op: "compute",
            level: None,
            traffic: None,
            command,
            collector,
        }
    }

    fn bandwidth(
        inner: Box<BandwidthCase>,
        level: &MemoryLevel,
        traffic: Traffic,
        duration: Duration,
        collector: Collector,
    ) -> Wrapped {
        let threads = inner.threads;
        let size = level.per_thread(threads) * threads as u64;
        let block = inner
            .block
            .map(|b| format!(" --block {b}B"))
            .unwrap_or_default();
        let command = format!(
            "peakbench mem --op {} --size {size}B{block} --threads {threads} --duration {}ms",
            traffic.op().name(),
            duration.as_millis()
        );
        Wrapped {
            inner,
            op: "bandwidth",
            level: Some((level.name.clone(), level.source.clone())),
            traffic: Some(traffic),
            command,
            collector,
        }
    }

    fn rename(&self, spec: &mut CaseSpec) {
        let inner_op = std::mem::replace(&mut spec.op, self.op.to_string());
        spec.subsystem = Subsystem::Roofline;
        spec.params
            .other
            .insert("kernel_op".into(), inner_op.into());
        let mut tag = String::new();
        if let (Some((level, source)), Some(traffic)) = (&self.level, self.traffic) {
            spec.params
                .other
                .insert("level".into(), level.clone().into());
            spec.params
                .other
                .insert("level_size".into(), source.clone().into());
            spec.params
                .other
                .insert("traffic".into(), traffic.name().into());
            tag = format!("{}-{}-", level.to_lowercase(), traffic.name());
        }
        spec.params
            .other
            .insert("same_as".into(), self.command.clone().into());
        spec.id = format!("roofline-{}-{tag}{}", self.op, spec.id);
        spec.label = format!("roofline {}: {}", self.op, spec.label);
    }
}

impl Case for Wrapped {
    fn spec(&self) -> CaseSpec {
        let mut spec = self.inner.spec();
        self.rename(&mut spec);
        spec
    }

    fn estimate(&self, ctx: &Context) -> Duration {
        self.inner.estimate(ctx)
    }

    fn run(&self, ctx: &Context) -> Result<BenchResult> {
        let mut result = self.inner.run(ctx)?;
        let spec = self.spec();
        result.id = spec.id;
        result.subsystem = spec.subsystem;
        result.op = spec.op;
        result.params.other.extend(spec.params.other);
        if let Some(traffic) = self.traffic {
            let factor = traffic.write_allocate_factor();
            let scaled: Vec<f64> = result.samples.iter().map(|v| v * factor).collect();
            if let Some(stats) = crate::stats::Summary::of(&scaled) {
                result.extra.push(crate::result::Extra {
                    metric: "throughput_with_write_allocate".into(),
                    unit: "GB/s".into(),
                    value: stats.median,
                    stats,
                });
            }
            result.counting.push_str(&format!(
                "; throughput_with_write_allocate counts the bus's bytes too: {}",
                match traffic {
                    Traffic::Read => "the same (nothing written)",
                    Traffic::Triad => "32 B per element (each written line read first)",
                    Traffic::Copy => "24 B per element (each written line read first)",
                }
            ));
        }
        self.collector.lock().unwrap().push(result.clone());
        Ok(result)
    }
}

/// The model: built from the results collected, after every measured case.
struct ModelCase {
    threads: usize,
    points: Vec<UserPoint>,
    svg: Option<PathBuf>,
    collector: Collector,
}

impl Case for ModelCase {
    fn spec(&self) -> CaseSpec {
        let mut params = crate::result::Params {
            threads: Some(self.threads),
            ..Default::default()
        };
        params.other.insert(
            "points".into(),
            serde_json::to_value(&self.points).unwrap_or_default(),
        );
        CaseSpec {
            id: format!("roofline-model-t{}", self.threads),
            label: "roofline model (ridge points, self-check; nothing timed)".into(),
            subsystem: Subsystem::Roofline,
            op: "model".into(),
            params,
        }
    }

    fn estimate(&self, _: &Context) -> Duration {
        Duration::ZERO
    }

    fn run(&self, ctx: &Context) -> Result<BenchResult> {
        let results = self.collector.lock().unwrap().clone();
        let refs: Vec<&BenchResult> = results.iter().collect();
        let model = Model::build(&refs, self.threads, &self.points);
        // Without a DRAM roof, the headline is the highest ridge of the top ceiling.
        let Some(balance) = model.balance().or_else(|| {
            let top = model.top_ceiling()?;
            model
                .ridges_with(top)
                .map(|r| r.intensity)
                .max_by(f64::total_cmp)
        }) else {
            bail!(
                "the roofline needs at least one compute ceiling and one roof at {} threads",
                self.threads
            );
        };
        let warnings = model.warnings.clone();
        Ok(self
            .spec()
            .measured(
                &ctx.host.hostname,
                "machine_balance",
                "FLOP/B",
                format!(
                    "computed, not timed: where the DRAM read roof meets the top f64 ceiling at {} threads (FLOP per application byte); {}",
                    self.threads,
                    COUNTING
                ),
                vec![balance],
            )?
            .param("roofline", serde_json::to_value(&model)?)
            .warn(warnings)
            .finish())
    }

    /// With `--svg FILE`, the chart of the model the result carries, drawn as the HTML report
    /// draws a stored run's: the session writes it.
    fn files(&self, result: &BenchResult) -> Result<Vec<CaseFile>> {
        let Some(path) = &self.svg else {
            return Ok(Vec::new());
        };
        let stored = result.params.other.get("roofline").cloned();
        let model: Model = serde_json::from_value(stored.unwrap_or_default())
            .context("--svg: the result carries no model to draw")?;
        Ok(vec![CaseFile {
            flag: "--svg",
            path: path.clone(),
            bytes: svg(&[(result.host.clone(), &model)]).into_bytes(),
        }])
    }
}

/// The model in text, after the run.
fn summary(_: &Context, results: &[&BenchResult]) -> Vec<String> {
    results
        .iter()
        .filter(|r| r.op == "model" && r.subsystem == Subsystem::Roofline)
        .filter_map(|r| r.params.other.get("roofline"))
        .filter_map(|v| serde_json::from_value::<Model>(v.clone()).ok())
        .flat_map(|m| lines(&m))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::plan_for;

    #[test]
    fn the_plan_has_ceilings_roofs_sweep_and_model() {
        let ctx = Context::fixture();
        let plan = plan_for::<Roofline>(
            &[
                "roofline",
                "--threads",
                "1,2",
                "--levels",
                "L1,DRAM",
                "--flops",
                "1,8",
            ],
            &ctx,
        )
        .unwrap();
        let ops: Vec<String> = plan.cases.iter().map(|c| c.spec().op).collect();
        assert!(ops.iter().any(|o| o == "compute"));
        // 2 levels × 3 traffic kinds × 2 thread counts.
        assert_eq!(ops.iter().filter(|o| *o == "bandwidth").count(), 12);
        // 2 levels × 2 intensities on the most threads.
        assert_eq!(ops.iter().filter(|o| *o == "sweep").count(), 4);
        assert_eq!(ops.last().map(String::as_str), Some("model"));
        let ids: Vec<String> = plan.cases.iter().map(|c| c.spec().id).collect();
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), ids.len(), "every case has its own id");
    }

    #[test]
    fn bad_flags_name_the_flag() {
        let ctx = Context::fixture();
        for (argv, flag) in [
            (vec!["roofline", "--flops", "3"], "--flops"),
            (vec!["roofline", "--levels", "L4"], "--levels"),
            (vec!["roofline", "--point", "x:1"], "--point"),
            (vec!["roofline", "--svg", "/nonexistent-dir/x.svg"], "--svg"),
        ] {
            let error = plan_for::<Roofline>(&argv, &ctx).err().unwrap().to_string();
            assert!(error.contains(flag), "{argv:?}: {error}");
        }
    }

    /// With `--svg`, the model case hands back the chart its stored model draws (read back from
    /// the result exactly) for the session to write; without it, nothing.
    #[test]
    fn the_svg_chart_is_handed_back_not_written() {
        let model = crate::result::roofline::example();
        let mut result = BenchResult::example("roofline-model-t2", "FLOP/B", vec![1.0]);
        let stored = serde_json::to_value(&model).unwrap();
        result.params.other.insert("roofline".into(), stored);
        let case = |svg: Option<PathBuf>| ModelCase {
            threads: 2,
            points: Vec::new(),
            svg,
            collector: Collector::default(),
        };
        let path = PathBuf::from("/nonexistent-peakbench-dir/chart.svg");
        let files = case(Some(path.clone())).files(&result).unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!((files[0].flag, &files[0].path), ("--svg", &path));
        let drawn = svg(&[(result.host.clone(), &model)]);
        assert_eq!(files[0].bytes, drawn.into_bytes());
        assert!(!path.exists(), "the case writes no file");
        assert!(case(None).files(&result).unwrap().is_empty());
    }

    #[test]
    fn points_parse_and_refuse_bad_input() {
        let p = user_point("my:spmv:0.25:3.5").unwrap();
        assert_eq!(
            (p.name.as_str(), p.intensity, p.gflops),
            ("my:spmv", 0.25, 3.5)
        );
        for bad in ["x:1", "x:-1:2", "x:1:nan", ":1:2", "x:1:0"] {
            assert!(user_point(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn read_blocks_are_powers_of_two_within_the_slice() {
        assert_eq!(read_block(16 << 10), 16 << 10);
        assert_eq!(read_block(3 << 20), 1 << 20);
        assert_eq!(read_block(12_288), 8192);
    }
}
