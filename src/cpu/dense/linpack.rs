//! `peakbench cpu linpack`: a Linpack-style dense solve, counted and checked as HPL does.
//!
//! A random n × n system (entries uniform in [−0.5, 0.5), as HPL's generator) is solved by LU
//! with partial pivoting: by peakbench's own blocked LU with look-ahead over its own DGEMM
//! ([`super::builtin::lu`], the built-in engine) or by a machine's LAPACK (`dgetrf` + `dgetrs`
//! of OpenBLAS, BLIS or MKL, loaded at run time by [`super::engine::blas`]); `--blas auto` runs
//! the engine whose multiply a short probe finds fastest ([`super::engine::probe`]). The timed
//! region holds the factorisation and the two triangular solves only: A is copied into the
//! buffer the factorisation overwrites before the clock starts; generating A and checking the
//! answer are outside it. LAPACK runs on a thread of its own with a 64 MiB stack (OpenBLAS's
//! recursive LU overflows the 2 MiB a Rust thread gets by default, and dies of a segmentation
//! fault). `--warmup` is spent on unmeasured, checked solves of a smaller system before the
//! repetitions; with `--pin` the solver's thread i runs on the i-th CPU. FLOPs are counted as
//! HPL counts them (`HPL_pdtest.c`), 2/3·n³ + 3/2·n², whatever the library really executes.
//! After every repetition the scaled residual ‖Ax − b‖∞ / (ε · (‖A‖∞·‖x‖∞ + ‖b‖∞) · n) must
//! be below 16, HPL's threshold.
//!
//! `--precision f32` solves in single precision (`sgetrf` + `sgetrs`, or peakbench's LU over its
//! SGEMM), a case of its own against the f32 peak. HPL has no single precision, so the count
//! and the check are HPL's with ε of f32; the residual is computed in f64 from the f32 A, x
//! and b, so the check's own rounding is not what it measures.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use faer::Mat;
use faer::linalg::solvers::Solve as _;

use super::args::{DenseArgs, DenseDefaults};
use super::builtin::lu::{self, LuElement, LuProfile};
use super::case::{self, DenseCase, DenseRound, Operation};
use super::engine::blas::{Blas, DenseEngine, Solver};
use super::engine::{self, DenseElement};
use crate::options::Defaults;
use crate::peak::Precision;
use crate::plan::{Context, Plan};
use crate::result::BenchResult;
use crate::rng::Rng;
use crate::runner::{self, Round};
use crate::workload::Benchmark;

/// Set (test builds only), the system solved has a zero column: a singular matrix, which every
/// engine must refuse.
#[cfg(feature = "test-hooks")]
pub const SINGULAR_ENV: &str = "PEAKBENCH_TEST_SINGULAR_MATRIX";

/// HPL's pass threshold for the scaled residual.
pub const RESIDUAL_THRESHOLD: f64 = 16.0;

/// `peakbench cpu linpack`.
#[derive(Clone, Copy, Debug)]
pub struct Linpack;

impl Benchmark for Linpack {
    const NAME: &'static str = "linpack";
    const PATH: &'static [&'static str] = &["cpu", "linpack"];
    const ABOUT: &'static str = "Dense LU solve with partial pivoting (dgesv, sgesv with -p f32; peakbench's LU or the machine's LAPACK, the fastest), GFLOP/s and HPL's residual check";
    type Args = DenseArgs<Linpack>;

    fn plan(args: &DenseArgs<Linpack>, ctx: &Context) -> Result<Plan> {
        case::plan(Linpack, args, ctx)
    }
}

// Threads: every CPU only, as HPL runs. Linpack's figure is the machine's; the one-core solve
// is asked for with `-t 1`.
impl Defaults for Linpack {
    const THREADS: &'static str = "every CPU, as HPL runs; Linpack's figure is the \
        machine's, add 1 for the one-core solve";
}

impl DenseDefaults for Linpack {
    const N: &'static str = "2000";
    const N_HELP: &'static str = "Orders of the system (list), e.g. 1000,5000,10000";
    const PRECISION_HELP: &'static str = "Element types (list): f64 (dgesv, as HPL), f32 \
        (sgesv), each its own case with its own peak";
    const BLAS_HELP: &'static str = "The BLAS and LAPACK that solve, loaded at run time: a name \
        below, or the path of a shared library (with a '/', e.g. /opt/blis/lib/libblis.so)";
}

impl Operation for Linpack {
    const OP: &'static str = "linpack";
    const ESTIMATE_RATE: f64 = 20e9;
    const SETUP_EVERY_REPETITION: bool = true;
    const CONFIGURATION_NAMES_SOLVERS: bool = true;

    fn default_threads() -> Vec<usize> {
        vec![runner::num_cpus()]
    }

    /// HPL's count.
    fn flops(n: u64) -> f64 {
        let n = n as f64;
        2.0 / 3.0 * n * n * n + 1.5 * n * n
    }

    /// A, its factorised copy, b and x.
    fn memory_needed(n: u64, precision: Precision) -> u64 {
        let size = if precision == Precision::F32 { 4 } else { 8 };
        2 * n * n * size + 4 * n * size
    }

    /// LAPACK's routines of a library, or peakbench's LU.
    fn solver_name(solver: Solver, precision: Precision) -> String {
        let p = if precision == Precision::F32 {
            's'
        } else {
            'd'
        };
        match solver {
            Solver::Fixed(engine @ (DenseEngine::Library(_) | DenseEngine::File(_))) => {
                format!("LAPACK {p}getrf + {p}getrs ({})", engine.name())
            }
            other => engine::solver_label(
                other,
                &format!("builtin (peakbench LU over peakbench {p}gemm)"),
            ),
        }
    }

    fn run<T: DenseElement>(case: &DenseCase<Linpack>, ctx: &Context) -> Result<BenchResult> {
        #[allow(unused_mut)]
        let (mut a, b) = random_system::<T>(case.n as usize, 42 + case.n);
        #[cfg(feature = "test-hooks")]
        if std::env::var_os(SINGULAR_ENV).is_some() {
            // A zero column: U(j, j) is exactly zero whatever the engine.
            a.col_mut(a.ncols() / 2).fill(T::ZERO);
        }
        let (library, why) = case.engine::<T>(ctx)?;
        if let Some(blas) = library {
            blas.require_lapack::<T>()?;
        }
        let (rounds, profile) = repetitions(case, ctx, library, (&a, &b))?;
        let residual_max = rounds.iter().map(|r| r.value.1).fold(0.0, f64::max);
        let counting = format!(
            "HPL's count 2/3·n³ + 3/2·n² FLOP per solve; timed: LU with partial pivoting \
             and the two triangular solves by {}; scaled residual \
             ‖Ax−b‖∞/(ε(‖A‖∞‖x‖∞+‖b‖∞)n) < {RESIDUAL_THRESHOLD} checked",
            match library {
                Some(blas) => format!(
                    "{} {} + {}",
                    blas.describe(),
                    T::GETRF.trim_end_matches('_'),
                    T::GETRS.trim_end_matches('_')
                ),
                None => lu::engine_text::<T>(lu::NB),
            }
        );
        let measured = case
            .measured(ctx, counting, &rounds)?
            .param("scaled_residual_max", residual_max)
            .warn(runner::oversubscription_warning(case.threads))
            .warn(case.waiting_warning(&rounds));
        let mut result =
            case::with_engine::<T>(measured, library, why, true, (case.threads, case.pin));
        if let Some(profile) = profile {
            // Where the built-in LU's time went, over every measured solve together.
            result = result
                .param("lu_time_split", profile.describe())
                .param("lu_time_split_s", serde_json::to_value(profile)?);
        }
        // HPL solves in f64 only: an f32 solve has no reference to stand beside.
        if ctx.runner.reference && !case.f32() {
            result = result.reference(crate::cpu::reference::hpcc_hpl(case.n, case.threads)?);
        }
        Ok(result.finish())
    }
}

/// A random system A, b of order n: the same values in every precision, rounded to T.
pub fn random_system<T: LuElement>(n: usize, seed: u64) -> (Mat<T>, Mat<T>) {
    let mut rng = Rng::new(seed);
    let a = Mat::from_fn(n, n, |_, _| T::from_f64(rng.centered_f64()));
    let b = Mat::from_fn(n, 1, |_, _| T::from_f64(rng.centered_f64()));
    (a, b)
}

/// Solves Ax = b by LU with partial pivoting.
pub fn faer_solve(a: &Mat<f64>, b: &Mat<f64>) -> Mat<f64> {
    let lu = a.partial_piv_lu();
    lu.solve(b)
}

fn norm_inf_vector(v: &[f64]) -> f64 {
    v.iter().fold(0.0, |m, x| m.max(x.abs()))
}

/// HPL's scaled residual of a solution x, ε that of T, every sum in f64.
pub fn scaled_residual<T: LuElement>(a: &Mat<T>, x: &Mat<T>, b: &Mat<T>) -> f64 {
    let to_f64 = |column: &[T]| column.iter().map(|v| v.to_f64()).collect::<Vec<f64>>();
    let (xs, bs) = (to_f64(x.col_as_slice(0)), to_f64(b.col_as_slice(0)));
    let mut r: Vec<f64> = bs.iter().map(|v| -v).collect();
    let mut row_sums = vec![0.0; a.nrows()];
    for (j, &xj) in xs.iter().enumerate() {
        for ((ri, sum), aij) in r.iter_mut().zip(&mut row_sums).zip(a.col_as_slice(j)) {
            let aij = aij.to_f64();
            *ri += aij * xj;
            *sum += aij.abs();
        }
    }
    let norm_a = row_sums.iter().fold(0.0f64, |m, &s| m.max(s));
    norm_inf_vector(&r)
        / (T::EPSILON * (norm_a * norm_inf_vector(&xs) + norm_inf_vector(&bs)) * a.nrows() as f64)
}

/// The order of the warm-up solves of a case of order n: about `budget` of work at 10 GFLOP/s,
/// at most n.
fn warmup_order(n: u64, budget: Duration) -> usize {
    let order = (budget.as_secs_f64() * 10e9 * 1.5).cbrt() as u64;
    order.clamp(1, n) as usize
}

/// The repetitions of a case on its engine (a library's LAPACK, or for `None` peakbench's LU
/// on a pool of the case's threads): GFLOP/s and HPL's scaled residual of each; and for
/// peakbench's LU, where the measured solves' time went, summed.
fn repetitions<T: DenseElement>(
    case: &DenseCase<Linpack>,
    ctx: &Context,
    library: Option<&Blas>,
    (a, b): (&Mat<T>, &Mat<T>),
) -> Result<(Vec<DenseRound>, Option<LuProfile>)> {
    let n = case.n as usize;
    let name = if library.is_some() {
        "LAPACK"
    } else {
        "linpack"
    };
    engine::run_on_threads(name, library, case.threads, case.pin, || {
        let mut factors = vec![T::ZERO; n * n];
        let mut x = vec![T::ZERO; n];
        let (mut piv, mut ipiv) = (vec![0; n], vec![0; n]);
        let mut profile: Option<LuProfile> = None;
        // Factors the m × m A in `factors` and solves for the b in `x`, by the case's engine;
        // peakbench's LU says where its time went.
        let mut solve = |m: usize, factors: &mut [T], x: &mut [T]| match library {
            Some(blas) => blas.solve(m, factors, x, &mut ipiv).map(|()| None),
            None => lu::factor_and_solve(factors, m, x, &mut piv, lu::NB).map(Some),
        };
        let rounds = runner::repeat(&ctx.runner, ctx.runner.repetitions, |round| match round {
            Round::Warmup(budget) => {
                // Unmeasured solves of a smaller system until the budget is spent: the
                // threads, the caches and the clock get going; the result is checked.
                let (wa, wb) = random_system::<T>(warmup_order(case.n, budget), 7);
                let m = wa.nrows();
                let start = Instant::now();
                while start.elapsed() < budget && !crate::interrupt::requested() {
                    copy_system(&wa, &wb, &mut factors, &mut x);
                    solve(m, &mut factors[..m * m], &mut x[..m])?;
                    check(&wa, &column(&x[..m]), &wb, case.n)?;
                }
                Ok((0.0, 0.0, None))
            }
            Round::Measured(_) => {
                copy_system(a, b, &mut factors, &mut x);
                let (solved, elapsed, waited) =
                    runner::timed_waiting(case.threads, || solve(n, &mut factors, &mut x));
                if let Some(split) = solved? {
                    profile.get_or_insert_default().add(&split);
                }
                let residual = check(a, &column(&x), b, case.n)?;
                Ok((
                    Linpack::flops(case.n) / elapsed.as_secs_f64() / 1e9,
                    residual,
                    waited,
                ))
            }
        })?;
        Ok((rounds, profile))
    })
}

/// Copies A (column by column, leading dimension its order) and b into LAPACK's buffers.
fn copy_system<T: LuElement>(a: &Mat<T>, b: &Mat<T>, lu: &mut [T], x: &mut [T]) {
    let m = a.nrows();
    for j in 0..a.ncols() {
        lu[j * m..(j + 1) * m].copy_from_slice(a.col_as_slice(j));
    }
    x[..m].copy_from_slice(b.col_as_slice(0));
}

/// A vector as a one-column matrix.
fn column<T: LuElement>(x: &[T]) -> Mat<T> {
    Mat::from_fn(x.len(), 1, |i, _| x[i])
}

/// HPL's residual check of a solution; the scaled residual when it passes.
fn check<T: LuElement>(a: &Mat<T>, x: &Mat<T>, b: &Mat<T>, n: u64) -> Result<f64> {
    let residual = scaled_residual(a, x, b);
    if residual.is_nan() || residual >= RESIDUAL_THRESHOLD {
        bail!("linpack n = {n} failed HPL's residual check: {residual:.3e} ≥ {RESIDUAL_THRESHOLD}");
    }
    Ok(residual)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_solve_passes_the_residual_check() {
        for n in [1, 7, 64, 200] {
            let (a, b) = random_system(n, 7);
            let x = faer_solve(&a, &b);
            let residual = scaled_residual(&a, &x, &b);
            assert!(residual < RESIDUAL_THRESHOLD, "n={n}: {residual}");
        }
    }

    #[test]
    fn a_wrong_solution_fails_the_residual_check() {
        let (a, b) = random_system(100, 3);
        let mut x = faer_solve(&a, &b);
        x[(17, 0)] += 1e-6;
        assert!(scaled_residual(&a, &x, &b) > RESIDUAL_THRESHOLD);
    }

    /// HPL's scaled residual (ε of T) of a solve by peakbench's LU on `threads` threads at
    /// order n with NB = 256, so the trailing updates run through peakbench's DGEMM or SGEMM
    /// (several panels from n = 257 on).
    fn solve_residual<T: LuElement>(n: usize, threads: usize) -> (f64, Vec<T>) {
        let (a, b) = random_system::<T>(n, 4);
        let mut factors: Vec<T> = (0..n).flat_map(|j| a.col_as_slice(j).to_vec()).collect();
        let mut x = b.col_as_slice(0).to_vec();
        let mut piv = vec![0; n];
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| lu::factor_and_solve(&mut factors, n, &mut x, &mut piv, lu::NB))
            .unwrap();
        let xm = faer::Mat::from_fn(n, 1, |i, _| x[i]);
        (scaled_residual(&a, &xm, &b), x)
    }

    #[test]
    fn solves_with_the_own_dgemm_pass_hpl_s_check_on_1_and_2_threads() {
        solves_on_1_and_2_threads::<f64>(1e-9);
    }

    #[test]
    fn solves_with_the_own_sgemm_pass_hpl_s_check_in_f32_on_1_and_2_threads() {
        solves_on_1_and_2_threads::<f32>(1e-2);
    }

    /// Every order passes HPL's check on 1 and 2 threads, and the two thread counts give the
    /// same solution within `agree` relative (the update order differs between them).
    fn solves_on_1_and_2_threads<T: LuElement>(agree: f64) {
        for n in [1, 2, 127, 1000] {
            for threads in [1, 2] {
                let (residual, _) = solve_residual::<T>(n, threads);
                assert!(
                    residual < RESIDUAL_THRESHOLD,
                    "{} n={n} threads={threads}: scaled residual {residual}",
                    T::NAME
                );
            }
        }
        let (one, two) = (solve_residual::<T>(600, 1).1, solve_residual::<T>(600, 2).1);
        for (x1, x2) in one.iter().zip(&two) {
            let (x1, x2) = (x1.to_f64(), x2.to_f64());
            assert!((x1 - x2).abs() <= agree * (1.0 + x1.abs()), "{x1} vs {x2}");
        }
    }

    #[test]
    fn hpl_flop_count() {
        assert_eq!(Linpack::flops(3), 2.0 / 3.0 * 27.0 + 13.5);
        assert_eq!(Linpack::flops(10_000), 2.0 / 3.0 * 1e12 + 1.5e8);
    }
}
