//! CPU throughput: integer and floating-point kernels at every precision and ISA.
//!
//! A case runs one kernel (see [`kernels`]) on N threads. With strong scaling (the default) the
//! total number of iterations is fixed: what one thread does in `--duration`, calibrated once
//! per kernel and shared by every thread count of that kernel, or `--ops` given by the user,
//! split among the threads. With weak scaling each thread does that amount. The rate is the ops
//! of all threads divided by the wall time of the group. A sampling run (`--samples N
//! --interval D`) keeps all threads busy and records the rate of every interval instead.
//!
//! The dense linear algebra commands, `cpu gemm` and `cpu linpack`, are in [`dense`].

pub(crate) mod args;
pub mod dense;
pub mod kernels;
mod params;
pub(crate) mod reference;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use crate::error::usage;
use crate::options::unique;
use crate::peak::{Form, Isa, MeasuredFactors, Precision};
use crate::plan::{Case, CaseSpec, Context, Plan, guess};
use crate::result::{BenchResult, Params, Subsystem, TimePoint};
use crate::runner::{self, Quota, Round, RunSettings, Scaling, Stop, Tally, Worker};
use crate::workload::Benchmark;
use args::CpuArgs;
use kernels::Kernel;

pub use dense::gemm::Gemm;
pub use dense::linpack::Linpack;

/// Iterations per call into a kernel: about a millisecond of work, so the clock and the
/// interrupt flag are read rarely.
const CHUNK: u64 = 1 << 16;

/// `peakbench cpu`.
pub struct Cpu;

impl Benchmark for Cpu {
    const NAME: &'static str = "cpu";
    const PATH: &'static [&'static str] = &["cpu"];
    const ABOUT: &'static str =
        "CPU throughput (GFLOP/s, GIOP/s) per precision, ISA and thread count; `cpu linpack`";
    type Args = CpuArgs;

    fn plan(args: &CpuArgs, ctx: &Context) -> Result<Plan> {
        let available = crate::peak::isas_of(&ctx.host);
        let options = CpuOptions {
            precisions: unique(
                &args
                    .precision
                    .iter()
                    .flat_map(|p| p.precisions())
                    .collect::<Vec<_>>(),
            ),
            isas: unique(
                &args
                    .isa
                    .iter()
                    .flat_map(|i| i.isas(&available))
                    .collect::<Vec<_>>(),
            ),
            fma: args.fma.values().to_vec(),
            threads: args.threads.or(&default_threads()),
            scaling: args.scaling,
            ops: args.ops,
            duration: args.timing.duration,
            samples: args.samples.map(|n| (n, args.interval)),
        };
        let (cases, mut notes) = plan(&options, ctx);
        if args
            .precision
            .contains(&args::PrecisionChoice::Width(args::Width::Qp))
        {
            notes.push(
                "QP float: x86 has no 8-bit float arithmetic; QP is measured as i8 adds and dot products"
                    .to_string(),
            );
        }
        if cases.is_empty() {
            return Err(usage(format!(
                "--precision/--isa: nothing this CPU can run ({}); see 'peakbench sysinfo' for its ISAs",
                notes.join("; ")
            )));
        }
        Plan::new(cases, notes, &options)
    }
}

/// 1 and every CPU.
fn default_threads() -> Vec<usize> {
    unique(&[1, runner::num_cpus()])
}

/// Validated settings of `peakbench cpu`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CpuOptions {
    pub precisions: Vec<Precision>,
    pub isas: Vec<Isa>,
    pub fma: Vec<bool>,
    pub threads: Vec<usize>,
    pub scaling: Scaling,
    /// Total ops (strong) or ops per thread (weak); calibrated from `duration` when absent.
    pub ops: Option<u64>,
    pub duration: Duration,
    /// Sampling run: number of samples and their interval.
    pub samples: Option<(u32, Duration)>,
}

/// Measures the clock and the FMA throughput of one core, for peaks whose factors are unknown.
pub fn probe() -> MeasuredFactors {
    let reading = crate::sysinfo::clock::read();
    let (ghz, ghz_detail) = match reading.map(|r| (r.agreed(), r)) {
        Some((Ok(ghz), r)) => (
            Some(ghz),
            Some(format!(
                "{}, agreeing within {} %",
                r.describe(),
                crate::sysinfo::clock::AGREEMENT * 100.0
            )),
        ),
        Some((Err(why), _)) => (None, Some(why)),
        None => (None, None),
    };
    let widest = [Isa::Avx512, Isa::Avx2, Isa::Sse]
        .into_iter()
        .filter_map(|isa| kernels::find(Precision::F64, isa, true, Form::Arith))
        .find(|k| k.supported());
    // The clock under 512-bit FMAs and under AMX, where the CPU has them: a core's frequency
    // licence for them (`peak::cpu::licence_factor`).
    let under = |precision, fma, form| {
        let kernel = kernels::find(precision, Isa::Avx512, fma, form).filter(|k| k.supported())?;
        ghz?;
        crate::sysinfo::clock::ratio_after(&mut || {
            std::hint::black_box(kernel.run(1024));
        })
    };
    let avx512_clock_ratio = under(Precision::F64, true, Form::Arith);
    let amx_clock_ratio = under(Precision::Bf16, false, Form::Tile);
    // The FMA rate per cycle at the clock the core holds while it runs them.
    let fma_ghz = match (widest.map(|k| k.isa), avx512_clock_ratio, ghz) {
        (Some(Isa::Avx512), Some(ratio), Some(rest)) => {
            crate::sysinfo::clock::licence_clock(rest, ratio).or(ghz)
        }
        _ => ghz,
    };
    let fma_per_cycle = match (fma_ghz, widest) {
        (Some(ghz), Some(kernel)) => {
            let start = Instant::now();
            let mut iterations = 0;
            while start.elapsed() < Duration::from_millis(30) {
                kernel.run(4096);
                iterations += 4096;
            }
            let instructions = iterations * kernels::UNROLL * kernel.add_accumulators as u64;
            Some(instructions as f64 / start.elapsed().as_secs_f64() / (ghz * 1e9))
        }
        _ => None,
    };
    MeasuredFactors {
        ghz,
        ghz_detail,
        fma_per_cycle,
        fma_isa: widest.map(|k| k.isa),
        avx512_clock_ratio,
        amx_clock_ratio,
        measured_cores: hidden_siblings(),
    }
}

/// Up to this many allowed CPUs, every run's probe measures a core-to-core matrix (3
/// repetitions of every pair at [`MATRIX_PAIR_TIME`] each: about 0.8 s for 16 CPUs' 120 pairs,
/// a few milliseconds for 2); beyond, `peakbench mem c2c` measures it when asked.
const MATRIX_CPUS: usize = 16;

/// Each pair's time per repetition in the probe's matrix: hundreds of batches of round trips,
/// enough for a median a few nanoseconds wide.
const MATRIX_PAIR_TIME: Duration = Duration::from_millis(2);

/// The cores a short core-to-core matrix counts where it shows SMT siblings the kernel hides (a
/// hypervisor that shows each vCPU as a core), on the clear-signal rule of
/// [`crate::sysinfo::c2c::measured_cores`] (sibling round trips under half the next group's in
/// 3 of 3 repetitions); `None` otherwise, and whenever a pair cannot be measured. Two CPUs have
/// no second group to compare with, so they never count fewer cores.
fn hidden_siblings() -> Option<crate::sysinfo::c2c::MeasuredCores> {
    use crate::sysinfo::c2c::{KernelTopology, measured_cores, pingpong};
    let cpus = crate::sysinfo::affinity::allowed_cpus();
    if !(3..=MATRIX_CPUS).contains(&cpus.len()) {
        return None;
    }
    let kernel = KernelTopology::read(&cpus);
    let hidden: usize = kernel.siblings.iter().map(|g| g.len() - 1).sum();
    let settings = pingpong::PairSettings {
        time: MATRIX_PAIR_TIME,
        ..pingpong::PairSettings::default()
    };
    let mut repetitions = Vec::new();
    for _ in 0..3 {
        let mut pairs = Vec::new();
        for (i, &a) in cpus.iter().enumerate() {
            for &b in &cpus[i + 1..] {
                let pair = pingpong::measure_pair([a, b], &settings).ok()?;
                pairs.push((a, b, pair.median_ns));
            }
        }
        repetitions.push(pairs);
    }
    measured_cores(&repetitions, cpus.len(), cpus.len() - hidden, cpus.len())
}

/// Expands the options into cases; also returns notes about combinations that were skipped.
pub fn plan(options: &CpuOptions, ctx: &Context) -> (Vec<Box<dyn Case>>, Vec<String>) {
    let mut cases: Vec<Box<dyn Case>> = Vec::new();
    let mut notes = Vec::new();
    let mut missing = Missing::default();
    for &precision in &options.precisions {
        for &isa in &options.isas {
            for (fma, form) in variants(precision, isa, &options.fma, ctx, &mut missing) {
                let label = case_label(precision, isa, fma, form);
                let Some(kernel) = kernels::find(precision, isa, fma, form) else {
                    let place = label
                        .trim_start_matches(precision.name())
                        .trim()
                        .to_string();
                    missing.add(precision, place, no_kernel_reason(precision, isa));
                    continue;
                };
                if !kernel.supported() {
                    notes.push(format!(
                        "{label}: skipped, this CPU lacks {}",
                        kernel.features.join("+")
                    ));
                    continue;
                }
                cases.extend(kernel_cases(kernel, options, ctx.runner.pin));
            }
        }
    }
    notes.extend(missing.notes());
    (cases, notes)
}

/// The forms one precision is measured in at one ISA: element-wise arithmetic (with and
/// without FMA as asked, for floats), then at 512 bit the dot products and AMX tiles. A
/// combination no form covers (bf16 below 512 bit) is noted in `missing`.
fn variants(
    precision: Precision,
    isa: Isa,
    fma: &[bool],
    ctx: &Context,
    missing: &mut Missing,
) -> Vec<(bool, Form)> {
    let fmas: &[bool] = if precision.is_float() { fma } else { &[false] };
    let mut variants: Vec<(bool, Form)> = Vec::new();
    if precision != Precision::Bf16 {
        variants.extend(unique(fmas).into_iter().map(|fma| (fma, Form::Arith)));
    }
    if isa == Isa::Avx512 {
        if matches!(precision, Precision::I8 | Precision::I16 | Precision::Bf16) {
            variants.push((false, Form::Dot));
        }
        // AMX tiles where the CPU has AMX; bf16, which has no adds, says so otherwise.
        let amx = ctx.host.cpu.simd.iter().any(|f| f == "amx_tile");
        if precision == Precision::Bf16 || (precision == Precision::I8 && amx) {
            variants.push((false, Form::Tile));
        }
    } else if precision == Precision::Bf16 {
        missing.add(
            precision,
            isa.name().to_string(),
            "bf16 is measured by 512-bit vdpbf16ps dot products and AMX tiles".to_string(),
        );
    }
    variants
}

/// "f64 avx2 fma", "i8 avx512 dot", "bf16 amx": how notes name a combination.
fn case_label(precision: Precision, isa: Isa, fma: bool, form: Form) -> String {
    format!(
        "{} {}{}",
        precision.name(),
        if form == Form::Tile {
            "amx"
        } else {
            isa.name()
        },
        match form {
            Form::Dot => " dot",
            Form::Tile => "",
            Form::Arith if precision.is_float() && fma => " fma",
            Form::Arith if precision.is_float() => " no-fma",
            Form::Arith => "",
        }
    )
}

/// Why this build has no kernel for a combination.
fn no_kernel_reason(precision: Precision, isa: Isa) -> String {
    match precision {
        Precision::F16 if isa == Isa::Avx512 => "f16 is measured with vfmadd231ph only".to_string(),
        Precision::F16 => "16-bit float arithmetic needs AVX512-FP16".to_string(),
        p => format!("no {} kernel at this width", p.name()),
    }
}

/// The cases of one kernel: one per thread count, sharing one calibration, or one sampling run
/// on the most threads.
fn kernel_cases(kernel: &'static Kernel, options: &CpuOptions, pin: bool) -> Vec<Box<dyn Case>> {
    match options.samples {
        Some((count, interval)) => {
            let threads = *options.threads.iter().max().unwrap_or(&1);
            vec![Box::new(SamplingCase {
                kernel,
                threads,
                count,
                interval,
                pin,
            })]
        }
        None => {
            let calibration = Arc::new(OnceLock::new());
            options
                .threads
                .iter()
                .map(|&threads| -> Box<dyn Case> {
                    Box::new(ThroughputCase {
                        kernel,
                        threads,
                        scaling: options.scaling,
                        ops: options.ops,
                        duration: options.duration,
                        pin,
                        calibration: calibration.clone(),
                    })
                })
                .collect()
        }
    }
}

/// Combinations without a kernel, one note per precision and reason: (precision, why) → the
/// places (ISAs, forms) it covers.
#[derive(Default)]
struct Missing(Vec<((Precision, String), Vec<String>)>);

impl Missing {
    fn add(&mut self, precision: Precision, place: String, why: String) {
        match self
            .0
            .iter_mut()
            .find(|(key, _)| *key == (precision, why.clone()))
        {
            Some((_, places)) => {
                if !places.contains(&place) {
                    places.push(place)
                }
            }
            None => self.0.push(((precision, why), vec![place])),
        }
    }

    fn notes(self) -> impl Iterator<Item = String> {
        self.0.into_iter().map(|((precision, why), places)| {
            format!(
                "{} {}: no kernel ({why})",
                precision.name(),
                places.join(", ")
            )
        })
    }
}

fn case_params(kernel: &Kernel, threads: usize, pinned: bool) -> Params {
    let mut params = Params {
        threads: Some(threads),
        pinned: Some(pinned),
        precision: Some(kernel.precision.name().to_string()),
        isa: Some(
            if kernel.form == Form::Tile {
                "amx"
            } else {
                kernel.isa.name()
            }
            .to_string(),
        ),
        fma: (kernel.precision.is_float() && kernel.form == Form::Arith).then_some(kernel.fma),
        ..Params::default()
    };
    if kernel.form != Form::Arith {
        params
            .other
            .insert("form".into(), kernel.form.name().into());
        params
            .other
            .insert("instruction".into(), kernel.instruction.into());
    }
    params
}

fn kernel_id(kernel: &Kernel) -> String {
    kernel.id()
}

/// The result's op: `flops`/`iops` for element-wise arithmetic, `dot-…` for dot products,
/// `tile-…` for AMX, so each is its own op next to the adds.
fn kernel_op(kernel: &Kernel) -> String {
    let unit = if kernel.precision.is_float() {
        "flops"
    } else {
        "iops"
    };
    match kernel.form {
        Form::Arith => unit.to_string(),
        form => format!("{}-{unit}", form.name()),
    }
}

/// The peak of `kernel` on `threads` threads, from the peak table.
fn kernel_peak(kernel: &Kernel, threads: usize, ctx: &Context) -> Option<crate::peak::PeakRef> {
    let cpu = &ctx.peaks.cpu;
    cpu.form_row(kernel.precision, kernel.isa, kernel.fma, kernel.form)
        .and_then(|row| cpu.for_threads(row, threads, None))
}

/// Runs the kernel in chunks for as long as the quota says.
struct KernelWorker {
    kernel: &'static Kernel,
}

impl Worker for KernelWorker {
    fn run(&mut self, quota: &Quota) -> Result<Tally> {
        let (mut done, mut checksum, mut expected) = (0u64, 0u64, 0u64);
        loop {
            let n = quota.next_chunk(done, CHUNK);
            if n == 0 {
                break;
            }
            checksum = checksum.wrapping_add(self.kernel.run(n));
            expected = expected.wrapping_add(self.kernel.expected_checksum(n));
            done += n;
        }
        if checksum != expected {
            bail!(
                "kernel {} returned checksum {checksum}, expected {expected}: the counted work was not done",
                kernel_id(self.kernel)
            );
        }
        Ok(Tally {
            units: done * self.kernel.ops_per_iteration(),
            ops: done,
            latency: None,
            checksum,
        })
    }
}

/// One kernel on N threads, fixed work.
struct ThroughputCase {
    kernel: &'static Kernel,
    threads: usize,
    scaling: Scaling,
    ops: Option<u64>,
    duration: Duration,
    pin: bool,
    /// Iterations one thread does in `duration`, shared by the thread counts of one kernel so
    /// that strong scaling compares the same total work.
    calibration: Arc<OnceLock<u64>>,
}

impl ThroughputCase {
    fn iterations(&self) -> u64 {
        if let Some(ops) = self.ops {
            return ops.div_ceil(self.kernel.ops_per_iteration()).max(1);
        }
        *self.calibration.get_or_init(|| {
            let probe = Duration::from_millis(50);
            let start = Instant::now();
            let mut done = 0;
            while start.elapsed() < probe {
                self.kernel.run(CHUNK / 4);
                done += CHUNK / 4;
            }
            let per_second = done as f64 / start.elapsed().as_secs_f64();
            (per_second * self.duration.as_secs_f64()).max(1.0) as u64
        })
    }
}

impl Case for ThroughputCase {
    fn spec(&self) -> CaseSpec {
        let mut params = case_params(self.kernel, self.threads, self.pin);
        params.scaling = Some(self.scaling.name().to_string());
        CaseSpec {
            id: format!(
                "cpu-{}-t{}-{}",
                kernel_id(self.kernel),
                self.threads,
                self.scaling
            ),
            label: format!("cpu {} {} threads", kernel_id(self.kernel), self.threads),
            subsystem: Subsystem::Cpu,
            op: kernel_op(self.kernel),
            params,
        }
    }

    fn estimate(&self, ctx: &Context) -> Duration {
        // Fixed work: the ops of all threads at the peak of this kernel (a lower bound).
        let fixed = self.ops.and_then(|ops| {
            let peak = kernel_peak(self.kernel, self.threads, ctx)?.value * 1e9;
            let total = match self.scaling {
                Scaling::Strong => ops as f64,
                Scaling::Weak => ops as f64 * self.threads as f64,
            };
            (peak > 0.0).then(|| guess::secs(total / peak))
        });
        let per_rep = match (fixed, self.scaling) {
            (Some(time), _) => time,
            (None, Scaling::Strong) => self
                .duration
                .div_f64(self.threads.min(runner::num_cpus()) as f64),
            (None, Scaling::Weak) => self
                .duration
                .mul_f64((self.threads as f64 / runner::num_cpus() as f64).max(1.0)),
        };
        guess::sum([
            guess::times(per_rep, ctx.runner.repetitions.into()),
            ctx.runner.warmup,
            Duration::from_millis(50),
        ])
    }

    fn run(&self, ctx: &Context) -> Result<BenchResult> {
        let iterations = self.iterations();
        let mut settings = RunSettings::new(&ctx.runner, self.threads, Stop::Work(iterations));
        settings.scaling = self.scaling;
        let kernel = self.kernel;
        let reps = runner::measure(&settings, |_| Ok(KernelWorker { kernel }))?;
        // The clock again, right after the timed repetitions: the peak's was measured once, at
        // the start of the run, and a shared host's boost clock moves from minute to minute.
        // Where the peak stands on the core's clock under these instructions (a licence), it
        // is read the same way: right after more of them.
        let licensed = ctx
            .peaks
            .cpu
            .factors
            .licence(kernel.isa, kernel.precision, kernel.form)
            .is_some();
        let rest = crate::sysinfo::clock::measure_ghz();
        let clock_after: Vec<f64> = if licensed {
            rest.zip(crate::sysinfo::clock::ratio_after(&mut || {
                std::hint::black_box(kernel.run(1024));
            }))
            .map(|(ghz, ratio)| ghz * ratio)
        } else {
            rest
        }
        .into_iter()
        .collect();
        let samples: Vec<f64> = reps.iter().map(|r| r.units_per_sec() / 1e9).collect();
        let total_ops = runner::split_work(iterations, self.threads, self.scaling)
            .iter()
            .sum::<u64>()
            * kernel.ops_per_iteration();
        let mut result = self
            .spec()
            .measured(
                &ctx.host.hostname,
                "throughput",
                kernel.precision.unit(),
                kernel.counting(),
                samples,
            )?
            .walls(reps.iter().map(|r| r.wall))
            .param("ops_per_repetition", total_ops)
            .peak(kernel_peak(kernel, self.threads, ctx))
            .warn(runner::oversubscription_warning(self.threads))
            .warn(runner::off_core_warning(&reps, self.threads))
            .extra("off_core", "%", &runner::off_core_percent(&reps))
            .extra("clock_after", "GHz", &clock_after);
        if ctx.runner.reference {
            result = result.reference(reference::likwid_peakflops(
                kernel.precision,
                kernel.isa,
                kernel.fma,
                self.threads,
            )?);
        }
        Ok(result.finish())
    }
}

/// One kernel on all threads for `count` intervals, one value per interval.
struct SamplingCase {
    kernel: &'static Kernel,
    threads: usize,
    count: u32,
    interval: Duration,
    pin: bool,
}

impl SamplingCase {
    /// Runs the kernel on every thread until `stop`, counting iterations in `iterations`.
    fn spin(&self, index: usize, iterations: &AtomicU64, stop: &AtomicBool) -> Result<()> {
        if let Some(cpu) = runner::cpu_for(self.pin, index) {
            runner::pin_to(cpu)?;
        }
        let kernel = self.kernel;
        while !stop.load(Ordering::Relaxed) {
            let sum = kernel.run(CHUNK);
            if sum != kernel.expected_checksum(CHUNK) {
                bail!("kernel {} checksum mismatch", kernel_id(kernel));
            }
            iterations.fetch_add(CHUNK, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Keeps every thread busy while `watch` runs on the calling thread.
    fn busy<T>(&self, watch: impl FnOnce(&AtomicU64) -> T) -> Result<T> {
        let iterations = AtomicU64::new(0);
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..self.threads)
                .map(|index| {
                    let (iterations, stop) = (&iterations, &stop);
                    scope.spawn(move || self.spin(index, iterations, stop))
                })
                .collect();
            let watched = watch(&iterations);
            stop.store(true, Ordering::Relaxed);
            for handle in handles {
                handle.join().expect("kernel thread panicked")?;
            }
            Ok(watched)
        })
    }

    /// One value per interval: the ops of all threads in it over its length.
    fn series(&self, iterations: &AtomicU64) -> Vec<TimePoint> {
        let mut series = Vec::with_capacity(self.count as usize);
        let start = Instant::now();
        let (mut last_time, mut last_count) = (start, iterations.load(Ordering::Relaxed));
        for i in 1..=self.count {
            let target = start + self.interval * i;
            if !sleep_until(target) {
                break;
            }
            let (now, count) = (Instant::now(), iterations.load(Ordering::Relaxed));
            let ops = (count - last_count) * self.kernel.ops_per_iteration();
            series.push(TimePoint {
                t_s: (now - start).as_secs_f64(),
                value: ops as f64 / (now - last_time).as_secs_f64() / 1e9,
                ghz: observed_ghz(),
            });
            (last_time, last_count) = (now, count);
        }
        series
    }
}

/// Sleeps until `target` in slices that look at the interrupt flag; false if interrupted.
fn sleep_until(target: Instant) -> bool {
    while Instant::now() < target && !crate::interrupt::requested() {
        std::thread::sleep((target - Instant::now()).min(Duration::from_millis(50)));
    }
    !crate::interrupt::requested()
}

impl Case for SamplingCase {
    fn spec(&self) -> CaseSpec {
        let mut params = case_params(self.kernel, self.threads, self.pin);
        params
            .other
            .insert("interval_s".into(), self.interval.as_secs_f64().into());
        CaseSpec {
            id: format!(
                "cpu-series-{}-t{}-{}x{}ms",
                kernel_id(self.kernel),
                self.threads,
                self.count,
                self.interval.as_millis()
            ),
            label: format!(
                "cpu {} {} threads, {} samples",
                kernel_id(self.kernel),
                self.threads,
                self.count
            ),
            subsystem: Subsystem::Cpu,
            op: format!("{}-series", kernel_op(self.kernel)),
            params,
        }
    }

    fn estimate(&self, ctx: &Context) -> Duration {
        guess::sum([
            guess::times(self.interval, self.count.into()),
            ctx.runner.warmup,
        ])
    }

    fn run(&self, ctx: &Context) -> Result<BenchResult> {
        // One measured round: the series is the sample; its intervals are the values.
        let rounds = runner::repeat(&ctx.runner, 1, |round| match round {
            Round::Warmup(budget) => self
                .busy(|_| sleep_until(Instant::now() + budget))
                .map(|_| Vec::new()),
            Round::Measured(_) => self.busy(|iterations| self.series(iterations)),
        });
        let series = rounds?.remove(0).value;
        if series.is_empty() {
            bail!(crate::interrupt::Interrupted);
        }
        let kernel = self.kernel;
        let samples: Vec<f64> = series.iter().map(|p| p.value).collect();
        let no_clock = series.iter().all(|p| p.ghz.is_none());
        let result = self
            .spec()
            .measured(
                &ctx.host.hostname,
                "throughput",
                kernel.precision.unit(),
                format!(
                    "{}; one value per interval: ops of all threads in the interval / its length",
                    kernel.counting()
                ),
                samples,
            )?
            .series(series)
            .warn(no_clock.then(|| {
                "the machine exposes no current clock (no cpufreq); samples carry no GHz"
                    .to_string()
            }))
            .peak(kernel_peak(kernel, self.threads, ctx));
        Ok(result.finish())
    }
}

/// The mean current clock of all CPUs, GHz, from sysfs cpufreq where the machine has it.
/// `/proc/cpuinfo`'s "cpu MHz" is not used: under a hypervisor it is a constant, not a reading.
fn observed_ghz() -> Option<f64> {
    let mut sum = 0.0;
    let mut count = 0;
    for cpu in runner::online_cpus() {
        let path = format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq");
        let khz: f64 = std::fs::read_to_string(path).ok()?.trim().parse().ok()?;
        sum += khz / 1e6;
        count += 1;
    }
    (count > 0).then(|| sum / count as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::plan_for;

    fn ids(argv: &[&str]) -> Vec<String> {
        plan_for::<Cpu>(argv, &Context::fixture())
            .unwrap()
            .cases
            .iter()
            .map(|c| c.spec().id)
            .collect()
    }

    #[test]
    fn aliases_and_repeats_expand_to_each_case_once() {
        // dp is f64 and i64; f64 again and scalar twice add nothing.
        let planned = ids(&[
            "cpu",
            "-p",
            "dp,f64",
            "--isa",
            "scalar,scalar",
            "-t",
            "1,1,2",
            "--fma",
            "both",
        ]);
        assert_eq!(
            planned,
            [
                "cpu-f64-scalar-fma-t1-strong",
                "cpu-f64-scalar-fma-t2-strong",
                "cpu-f64-scalar-nofma-t1-strong",
                "cpu-f64-scalar-nofma-t2-strong",
                "cpu-i64-scalar-t1-strong",
                "cpu-i64-scalar-t2-strong",
            ]
        );
    }

    #[test]
    fn all_and_auto_follow_the_isas_of_the_inventory() {
        let available = crate::peak::isas_of(&Context::fixture().host);
        assert_eq!(available, [Isa::Scalar, Isa::Sse, Isa::Avx2, Isa::Avx512]);
        assert_eq!(args::IsaChoice::All.isas(&available), available);
        assert_eq!(args::IsaChoice::Auto.isas(&available), [Isa::Avx512]);
        assert_eq!(args::IsaChoice::Auto.isas(&[Isa::Scalar]), [Isa::Scalar]);
    }

    #[test]
    fn a_precision_no_kernel_computes_is_a_note_and_nothing_at_all_is_refused() {
        let plan = plan_for::<Cpu>(
            &["cpu", "-p", "f16,f64", "--isa", "scalar"],
            &Context::fixture(),
        )
        .unwrap();
        assert!(
            plan.notes.iter().any(|n| n.starts_with("f16 scalar")),
            "{:?}",
            plan.notes
        );
        let refused = plan_for::<Cpu>(
            &["cpu", "-p", "f16", "--isa", "scalar"],
            &Context::fixture(),
        )
        .err()
        .unwrap();
        assert!(
            refused.to_string().starts_with("--precision/--isa"),
            "{refused}"
        );
    }

    /// `--int-units` sets the vector integer units of the widest ISA, named as the source of the
    /// integer peaks there.
    #[test]
    fn int_units_flag_sets_the_widest_integer_pipes() {
        let ctx = Context::fixture();
        let widest = *crate::peak::isas_of(&ctx.host).last().unwrap();
        let flags = crate::options::PeakOverrides {
            int_units: Some(3.0),
            ..Default::default()
        };
        let peaks = crate::peak::Peaks::compute(&ctx.host, &flags, &MeasuredFactors::default());
        let row = peaks.cpu.row(Precision::I32, widest, false).unwrap();
        assert_eq!(row.units.value, Some(3.0));
        assert_eq!(
            (row.units.source.as_str(), row.units.detail.as_str()),
            ("flag", "--int-units")
        );
        assert_eq!(
            row.per_cycle_per_core,
            Some(3.0 * Precision::I32.lanes(widest) as f64)
        );
        // The floats keep their table pipes.
        let float = peaks.cpu.row(Precision::F64, widest, true).unwrap();
        assert_ne!(float.units.source, "flag");
    }

    #[test]
    fn the_estimate_of_fixed_work_follows_the_ops_at_the_peak() {
        let ctx = Context::fixture();
        let estimate = |argv: &[&str]| {
            plan_for::<Cpu>(argv, &ctx).unwrap().cases[0]
                .estimate(&ctx)
                .as_secs_f64()
        };
        // The widest ISA this CPU runs (the plan refuses one it lacks: Zen 2 has no AVX-512).
        #[cfg(target_arch = "x86_64")]
        let avx512 = std::arch::is_x86_feature_detected!("avx512f");
        #[cfg(not(target_arch = "x86_64"))]
        let avx512 = false;
        let isa = if avx512 { Isa::Avx512 } else { Isa::Avx2 };
        let base = ["cpu", "-p", "f64", "--isa", isa.name(), "-t", "1"];
        let small = estimate(&[&base[..], &["--ops", "1G"]].concat());
        let large = estimate(&[&base[..], &["--ops", "1T"]].concat());
        let peak = ctx
            .peaks
            .cpu
            .row(Precision::F64, isa, true)
            .and_then(|row| ctx.peaks.cpu.for_threads(row, 1, None))
            .unwrap()
            .value;
        let reps = ctx.runner.repetitions as f64;
        // 1T ops take 1000 times as long as 1G at the same peak (less the fixed warmup).
        assert!(
            ((large - small) - reps * 999e9 / (peak * 1e9)).abs() < 1e-6,
            "{small} {large} {peak}"
        );
    }
}
