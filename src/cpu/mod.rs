//! CPU throughput: integer and floating-point kernels at every precision and ISA.
//!
//! A case runs one kernel (see [`kernels`]) on N threads. With strong scaling (the default) the
//! total number of iterations is fixed: what one thread does in `--duration`, calibrated once
//! per kernel and shared by every thread count of that kernel, or `--ops` given by the user,
//! split among the threads. With weak scaling each thread does that amount. The rate is the ops
//! of all threads divided by the wall time of the group. A sampling run (`--samples N
//! --interval D`) keeps all threads busy and records the rate of every interval instead.

pub mod kernels;
pub mod linpack;
pub mod reference;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use crate::peak::{Isa, Precision, Probes};
use crate::result::{BenchResult, CaseInfo, Params, Subsystem, TimePoint};
use crate::runner::{self, Quota, Scaling, Stop, Tally, Worker};
use crate::session::{Case, Context};
use kernels::Kernel;

/// Iterations per call into a kernel: about a millisecond of work, so the clock and the
/// interrupt flag are read rarely.
const CHUNK: u64 = 1 << 16;

/// Validated settings of `peakbench cpu`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CpuOptions {
    pub precisions: Vec<Precision>,
    /// `None` stands for `auto`: the widest ISA the CPU has.
    pub isas: Vec<Option<Isa>>,
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
pub fn probe() -> Probes {
    let ghz = kernels::measure_clock_ghz();
    let widest = [Isa::Avx512, Isa::Avx2, Isa::Sse]
        .into_iter()
        .filter_map(|isa| kernels::find(Precision::F64, isa, true))
        .find(|k| k.supported());
    let fma_per_cycle = match (ghz, widest) {
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
    Probes {
        ghz,
        fma_per_cycle,
        fma_isa: widest.map(|k| k.isa),
    }
}

/// Expands the options into cases; also returns notes about combinations that were skipped.
pub fn plan(options: &CpuOptions, ctx: &Context) -> (Vec<Box<dyn Case>>, Vec<String>) {
    let mut cases: Vec<Box<dyn Case>> = Vec::new();
    let mut notes = Vec::new();
    let available = crate::peak::isas_of(&ctx.host);
    let widest = *available.last().unwrap_or(&Isa::Scalar);
    let mut seen = Vec::new();
    for &precision in &options.precisions {
        for &isa in &options.isas {
            let isa = isa.unwrap_or(widest);
            let fmas: &[bool] = if precision.is_float() {
                &options.fma
            } else {
                &[false]
            };
            for &fma in fmas {
                if seen.contains(&(precision, isa, fma)) {
                    continue;
                }
                seen.push((precision, isa, fma));
                let label = format!(
                    "{} {}{}",
                    precision.name(),
                    isa.name(),
                    if precision.is_float() {
                        if fma { " fma" } else { " no-fma" }
                    } else {
                        ""
                    }
                );
                let Some(kernel) = kernels::find(precision, isa, fma) else {
                    notes.push(format!("{label}: no kernel (this CPU has no {} arithmetic at this width; x86 has no 8-bit float and 16-bit float needs AVX512-FP16)", precision.name()));
                    continue;
                };
                if !kernel.supported() {
                    notes.push(format!(
                        "{label}: skipped, this CPU lacks {}",
                        kernel.features.join("+")
                    ));
                    continue;
                }
                let calibration = Arc::new(OnceLock::new());
                match options.samples {
                    Some((count, interval)) => {
                        let threads = *options.threads.iter().max().unwrap_or(&1);
                        cases.push(Box::new(SamplingCase {
                            kernel,
                            threads,
                            count,
                            interval,
                        }));
                    }
                    None => {
                        for &threads in &options.threads {
                            cases.push(Box::new(ThroughputCase {
                                kernel,
                                threads,
                                scaling: options.scaling,
                                ops: options.ops,
                                duration: options.duration,
                                calibration: calibration.clone(),
                            }));
                        }
                    }
                }
            }
        }
    }
    (cases, notes)
}

fn case_params(kernel: &Kernel, threads: usize, pinned: bool) -> Params {
    Params {
        threads: Some(threads),
        pinned: Some(pinned),
        precision: Some(kernel.precision.name().to_string()),
        isa: Some(kernel.isa.name().to_string()),
        fma: kernel.precision.is_float().then_some(kernel.fma),
        ..Params::default()
    }
}

fn kernel_id(kernel: &Kernel) -> String {
    format!(
        "{}-{}{}",
        kernel.precision.name(),
        kernel.isa.name(),
        match (kernel.precision.is_float(), kernel.fma) {
            (false, _) => "",
            (true, true) => "-fma",
            (true, false) => "-nofma",
        }
    )
}

fn with_peak(result: BenchResult, kernel: &Kernel, threads: usize, ctx: &Context) -> BenchResult {
    let cpu = &ctx.peaks.cpu;
    let peak = cpu
        .row(kernel.precision, kernel.isa, kernel.fma)
        .and_then(|row| cpu.for_threads(row, threads, None));
    result.with_peak(peak)
}

fn oversubscription_warning(threads: usize) -> Option<String> {
    let cpus = runner::num_cpus();
    (threads > cpus).then(|| {
        format!(
            "{threads} threads on {cpus} CPUs: threads take turns on the cores, so the rate is \
             the machine's, shared; the peak is capped at the cores there are"
        )
    })
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
    fn id(&self) -> String {
        let scaling = match self.scaling {
            Scaling::Strong => "strong",
            Scaling::Weak => "weak",
        };
        format!("cpu-{}-t{}-{scaling}", kernel_id(self.kernel), self.threads)
    }

    fn label(&self) -> String {
        format!("cpu {} {} threads", kernel_id(self.kernel), self.threads)
    }

    fn estimate(&self, ctx: &Context) -> Duration {
        let per_rep = match self.scaling {
            Scaling::Strong => self
                .duration
                .div_f64(self.threads.min(runner::num_cpus()) as f64),
            Scaling::Weak => self
                .duration
                .mul_f64((self.threads as f64 / runner::num_cpus() as f64).max(1.0)),
        };
        per_rep * ctx.runner.repetitions + ctx.runner.warmup + Duration::from_millis(50)
    }

    fn run(&self, ctx: &Context) -> Result<BenchResult> {
        let iterations = self.iterations();
        let mut settings = ctx.runner.settings(self.threads, Stop::Work(iterations));
        settings.scaling = self.scaling;
        let kernel = self.kernel;
        let reps = runner::measure(&settings, |_| Ok(KernelWorker { kernel }))?;
        let samples: Vec<f64> = reps.iter().map(|r| r.units_per_sec() / 1e9).collect();
        let mut params = case_params(kernel, self.threads, ctx.runner.pin);
        params.scaling = Some(format!("{:?}", self.scaling).to_lowercase());
        let total_ops = runner::split_work(iterations, self.threads, self.scaling)
            .iter()
            .sum::<u64>()
            * kernel.ops_per_iteration();
        params
            .other
            .insert("ops_per_repetition".into(), total_ops.into());
        let info = CaseInfo {
            id: self.id(),
            subsystem: Subsystem::Cpu,
            op: if kernel.precision.is_float() {
                "flops"
            } else {
                "iops"
            }
            .to_string(),
            params,
            metric: "throughput".into(),
            unit: kernel.precision.unit().into(),
            counting: kernel.counting(),
        };
        let Some(result) = BenchResult::from_samples(&ctx.host.hostname, info, samples) else {
            bail!("no repetition produced a finite rate");
        };
        let mut result = with_peak(result, kernel, self.threads, ctx);
        if ctx.runner.reference {
            result = result.with_reference(reference::likwid_peakflops(
                kernel.precision,
                kernel.isa,
                kernel.fma,
                self.threads,
            )?);
        }
        result.warnings = runner::repetition_warnings(&reps, result.stats.cv);
        result
            .warnings
            .extend(oversubscription_warning(self.threads));
        Ok(result)
    }
}

/// One kernel on all threads for `count` intervals, one value per interval.
struct SamplingCase {
    kernel: &'static Kernel,
    threads: usize,
    count: u32,
    interval: Duration,
}

impl Case for SamplingCase {
    fn id(&self) -> String {
        format!(
            "cpu-series-{}-t{}-{}x{}ms",
            kernel_id(self.kernel),
            self.threads,
            self.count,
            self.interval.as_millis()
        )
    }

    fn label(&self) -> String {
        format!(
            "cpu {} {} threads, {} samples",
            kernel_id(self.kernel),
            self.threads,
            self.count
        )
    }

    fn estimate(&self, _ctx: &Context) -> Duration {
        self.interval * self.count
    }

    fn run(&self, ctx: &Context) -> Result<BenchResult> {
        let iterations = AtomicU64::new(0);
        let stop = std::sync::atomic::AtomicBool::new(false);
        let mut series = Vec::with_capacity(self.count as usize);
        let cpus = runner::online_cpus();
        let pin = ctx.runner.pin;
        let kernel = self.kernel;
        std::thread::scope(|scope| -> Result<()> {
            let mut handles = Vec::new();
            for index in 0..self.threads {
                let (iterations, stop, cpus) = (&iterations, &stop, &cpus);
                handles.push(scope.spawn(move || -> Result<()> {
                    if pin && !cpus.is_empty() {
                        runner::pin_to(cpus[index % cpus.len()])?;
                    }
                    while !stop.load(Ordering::Relaxed) {
                        let sum = kernel.run(CHUNK);
                        if sum != kernel.expected_checksum(CHUNK) {
                            bail!("kernel {} checksum mismatch", kernel_id(kernel));
                        }
                        iterations.fetch_add(CHUNK, Ordering::Relaxed);
                    }
                    Ok(())
                }));
            }
            let start = Instant::now();
            let (mut last_time, mut last_count) = (start, iterations.load(Ordering::Relaxed));
            for i in 1..=self.count {
                let target = start + self.interval * i;
                while Instant::now() < target && !crate::interrupt::requested() {
                    std::thread::sleep((target - Instant::now()).min(Duration::from_millis(50)));
                }
                if crate::interrupt::requested() {
                    break;
                }
                let (now, count) = (Instant::now(), iterations.load(Ordering::Relaxed));
                let ops = (count - last_count) * kernel.ops_per_iteration();
                series.push(TimePoint {
                    t_s: (now - start).as_secs_f64(),
                    value: ops as f64 / (now - last_time).as_secs_f64() / 1e9,
                    ghz: observed_ghz(),
                });
                (last_time, last_count) = (now, count);
            }
            stop.store(true, Ordering::Relaxed);
            for handle in handles {
                handle.join().expect("kernel thread panicked")?;
            }
            Ok(())
        })?;
        if crate::interrupt::requested() && series.is_empty() {
            bail!(crate::interrupt::Interrupted);
        }
        let samples: Vec<f64> = series.iter().map(|p| p.value).collect();
        let mut params = case_params(kernel, self.threads, pin);
        params
            .other
            .insert("interval_s".into(), self.interval.as_secs_f64().into());
        let info = CaseInfo {
            id: self.id(),
            subsystem: Subsystem::Cpu,
            op: if kernel.precision.is_float() {
                "flops-series"
            } else {
                "iops-series"
            }
            .into(),
            params,
            metric: "throughput".into(),
            unit: kernel.precision.unit().into(),
            counting: format!(
                "{}; one value per interval: ops of all threads in the interval / its length",
                kernel.counting()
            ),
        };
        let Some(mut result) = BenchResult::from_samples(&ctx.host.hostname, info, samples) else {
            bail!("the sampling run produced no samples");
        };
        result.series = series;
        if result.series.iter().all(|p| p.ghz.is_none()) {
            result.warnings.push(
                "the machine exposes no current clock (no cpufreq); samples carry no GHz".into(),
            );
        }
        Ok(with_peak(result, kernel, self.threads, ctx))
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
