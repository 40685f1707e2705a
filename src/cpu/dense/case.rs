//! A case of `cpu gemm` or `cpu linpack`: one order n on N threads, in one precision (f64 or
//! f32), on one engine or the fastest present. The two commands plan, name, estimate and report
//! their cases alike; they differ only in their [`Operation`]: what one repetition computes and
//! checks, how its FLOPs are counted and what it holds in memory.

use std::time::Duration;

use anyhow::Result;

use super::args::{DenseArgs, DenseDefaults};
use super::builtin::dgemm::{BuiltinGemm, Element};
use super::engine::blas::{self, Blas, Solver};
use super::engine::{self, DenseElement, probe};
use crate::options::unique;
use crate::peak::{Isa, PeakRef, Precision};
use crate::plan::{Case, CaseSpec, Context, Measured, Plan, guess};
use crate::result::{BenchResult, Params, Subsystem};
use crate::runner;

/// What `cpu gemm` and `cpu linpack` each are: the words and figures their cases differ by,
/// and the run of one case.
pub trait Operation: DenseDefaults + Copy + Send + Sync + 'static {
    /// The case's op, and the first word of its id and label: "gemm" or "linpack".
    const OP: &'static str;
    /// The FLOP/s per thread the estimate assumes in f64 (twice that in f32): modest, as the
    /// plan is a guide, not a promise.
    const ESTIMATE_RATE: f64;
    /// Whether generating the matrices (about 3n²/10⁸ s) is paid every repetition (Linpack, which
    /// also checks each answer) or once (a multiply).
    const SETUP_EVERY_REPETITION: bool;
    /// Whether the plan's configuration names the solvers too (Linpack's does).
    const CONFIGURATION_NAMES_SOLVERS: bool = false;
    /// The thread counts when `--threads` is not given, as [`crate::options::Defaults::THREADS`]
    /// says them.
    fn default_threads() -> Vec<usize>;
    /// FLOPs of one repetition of order n.
    fn flops(n: u64) -> f64;
    /// Bytes a case of order n in `precision` holds at once.
    fn memory_needed(n: u64, precision: Precision) -> u64;
    /// How the plan and the result name a case's solver.
    fn solver_name(solver: Solver, precision: Precision) -> String;
    /// Runs the case in elements of T: f64, or f32 for `--precision f32`.
    fn run<T: DenseElement>(case: &DenseCase<Self>, ctx: &Context) -> Result<BenchResult>;
}

/// One order n on N threads, in one precision, of the operation `op`.
#[derive(Clone, Copy, Debug)]
pub struct DenseCase<O> {
    pub op: O,
    pub n: u64,
    pub threads: usize,
    /// Thread i runs on the i-th CPU (a BLAS's threads on the first `threads` CPUs): `--pin`,
    /// or by default whenever the threads fit the CPUs ([`pins_by_default`]).
    pub pin: bool,
    /// The engine that computes, or the fastest present (picked when the case runs).
    pub solver: Solver,
    /// f64 or f32.
    pub precision: Precision,
}

/// A measured repetition of a dense case: GFLOP/s, the figure its check reports, and the share
/// of the time its threads waited for a CPU ([`runner::timed_waiting`]; `None` in the warm-up
/// or without schedstat).
pub type DenseRound = runner::Timed<(f64, f64, Option<f64>)>;

/// The cases of `op` for its flags: every precision, order, thread count and engine, each
/// order checked against the memory first.
pub fn plan<O: Operation>(op: O, args: &DenseArgs<O>, ctx: &Context) -> Result<Plan> {
    let orders = unique(&args.n);
    let threads = args.threads.or(&O::default_threads());
    let precisions = unique(&args.precision);
    let available = ctx.host.memory.available_bytes;
    let solvers = blas::choose(&args.blas)?;
    let mut cases: Vec<Box<dyn Case>> = Vec::new();
    for &precision in &precisions {
        for &n in &orders {
            engine::check_fits(n, O::memory_needed(n, precision), available)?;
            for &t in &threads {
                for &solver in &solvers {
                    cases.push(Box::new(DenseCase {
                        op,
                        n,
                        threads: t,
                        pin: ctx.runner.pin || pins_by_default(t),
                        solver,
                        precision,
                    }));
                }
            }
        }
    }
    let mut configuration = serde_json::json!({
        "n": orders,
        "threads": threads,
        "precision": precisions,
        "blas": args.blas,
    });
    if O::CONFIGURATION_NAMES_SOLVERS {
        let names: Vec<String> = precisions
            .iter()
            .flat_map(|&p| solvers.iter().map(move |&s| O::solver_name(s, p)))
            .collect();
        configuration["solver"] = names.into();
    }
    Plan::new(cases, Vec::new(), configuration)
}

/// Whether a dense case on `threads` threads pins them without `--pin`: whenever they fit the
/// CPUs this process may use, one each. A multiply's threads share every packed block and meet
/// at a barrier after each: the scheduler moving one onto the other's CPU stalls them all.
/// (Unpinned, the 2-thread DGEMM's rate varied by a CV of 23.7 % across rounds on a 2-vCPU
/// Zen 5 guest.)
pub fn pins_by_default(threads: usize) -> bool {
    threads <= runner::num_cpus()
}

impl<O: Operation> DenseCase<O> {
    pub fn f32(&self) -> bool {
        self.precision == Precision::F32
    }

    /// The engine the case runs on, opened, and why it was picked: configures the built-in
    /// GEMM of T for the machine's caches, then [`probe::resolve`].
    pub fn engine<T: DenseElement>(
        &self,
        ctx: &Context,
    ) -> Result<(Option<&'static Blas>, String)> {
        BuiltinGemm::<T>::global(&ctx.host.cpu.caches)?;
        let (engine, why) = probe::resolve::<T>(self.solver, self.n, self.threads, self.pin)?;
        Ok((engine::open(engine)?, why))
    }

    /// The result of the repetitions `rounds`, counted as `counting` says, against the FMA peak
    /// of the case's element type.
    pub fn measured(
        &self,
        ctx: &Context,
        counting: String,
        rounds: &[DenseRound],
    ) -> Result<Measured> {
        let samples: Vec<f64> = rounds.iter().map(|r| r.value.0).collect();
        Ok(self
            .spec()
            .measured(
                &ctx.host.hostname,
                "throughput",
                "GFLOP/s",
                counting,
                samples,
            )?
            .walls(rounds.iter().map(|r| r.wall))
            .peak(fma_peak(ctx, self.threads, self.precision)))
    }

    /// The warning of repetitions whose threads waited for a CPU.
    pub fn waiting_warning(&self, rounds: &[DenseRound]) -> Option<String> {
        runner::waiting_warning(
            &rounds.iter().map(|r| r.value.2).collect::<Vec<_>>(),
            self.threads,
        )
    }
}

/// What every dense result says of the engine that ran (`library`, `None` for the built-in
/// one): its name and why it was picked (`why`), where its `threads` ran (pinned with `pin`),
/// its library's parameters (with `with_lu`, the built-in LU's too), and the warning of a
/// library that could not be given the threads.
pub fn with_engine<T: Element>(
    mut result: Measured,
    library: Option<&Blas>,
    why: String,
    with_lu: bool,
    (threads, pin): (usize, bool),
) -> Measured {
    result = result
        .param("dense_engine", engine::engine_ran(library))
        .param("dense_engine_choice", why)
        .param("placement", engine::placement(library, threads, pin));
    for (key, value) in engine::library_params::<T>(library, with_lu) {
        result = result.param(key, value);
    }
    result.warn(engine::threads_warning(library))
}

impl<O: Operation> Case for DenseCase<O> {
    fn spec(&self) -> CaseSpec {
        let mut params = Params {
            threads: Some(self.threads),
            pinned: Some(self.pin),
            n: Some(self.n),
            precision: Some(self.precision.name().into()),
            engine: engine::engine_name(self.solver),
            ..Params::default()
        };
        params.other.insert(
            "solver".into(),
            O::solver_name(self.solver, self.precision).into(),
        );
        let suffix = engine::engine_suffix(self.solver);
        // f64 keeps the ids it had before f32 existed; f32 says so in its id and label.
        let (id_precision, label_precision) = if self.f32() {
            ("-f32", " f32")
        } else {
            ("", "")
        };
        CaseSpec {
            id: format!(
                "cpu-{}{id_precision}-n{}-t{}{suffix}",
                O::OP,
                self.n,
                self.threads
            ),
            label: format!(
                "{}{label_precision} n={} {} threads{}",
                O::OP,
                self.n,
                self.threads,
                suffix.replace('-', " ")
            ),
            subsystem: Subsystem::Cpu,
            op: O::OP.into(),
            params,
        }
    }

    fn estimate(&self, ctx: &Context) -> Duration {
        let setup = 3.0 * (self.n * self.n) as f64 / 1e8;
        let (each, once) = if O::SETUP_EVERY_REPETITION {
            (setup, 0.0)
        } else {
            (0.0, setup)
        };
        let per_thread = if self.f32() {
            2.0 * O::ESTIMATE_RATE
        } else {
            O::ESTIMATE_RATE
        };
        let rate = per_thread * self.threads.min(runner::num_cpus()) as f64;
        guess::sum([
            guess::secs((O::flops(self.n) / rate + each) * ctx.runner.repetitions as f64 + once),
            ctx.runner.warmup,
        ])
    }

    fn run(&self, ctx: &Context) -> Result<BenchResult> {
        engine::check_fits(
            self.n,
            O::memory_needed(self.n, self.precision),
            ctx.host.memory.available_bytes,
        )?;
        if self.f32() {
            O::run::<f32>(self, ctx)
        } else {
            O::run::<f64>(self, ctx)
        }
    }
}

/// The peak of a dense solve or multiply in `precision` (f64 or f32) on `threads` cores: FMA
/// of that element type at the widest ISA the CPU has (what HPL, DGEMM and SGEMM kernels run).
pub fn fma_peak(ctx: &Context, threads: usize, precision: Precision) -> Option<PeakRef> {
    let cpu = &ctx.peaks.cpu;
    let widest = *cpu.isas.last().unwrap_or(&Isa::Scalar);
    cpu.row(precision, widest, true)
        .and_then(|row| cpu.for_threads(row, threads, None))
}
