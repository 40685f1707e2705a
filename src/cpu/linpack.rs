//! A Linpack-style dense solve, counted and checked as HPL does.
//!
//! A random n × n system (entries uniform in [−0.5, 0.5), as HPL's generator) is solved by LU
//! with partial pivoting, using the `faer` crate's blocked, multithreaded factorisation. The
//! timed region holds the factorisation of a fresh copy of A and the two triangular solves;
//! generating A and checking the answer are outside it. FLOPs are counted as HPL counts them,
//! 2/3·n³ + 2·n², whatever the library really executes. After every repetition the scaled
//! residual ‖Ax − b‖∞ / (ε · (‖A‖∞·‖x‖∞ + ‖b‖∞) · n) must be below 16, HPL's threshold.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use faer::linalg::solvers::Solve as _;
use faer::{Mat, Par};

use crate::peak::{Isa, Precision};
use crate::result::{BenchResult, CaseInfo, Params, Subsystem};
use crate::rng::Rng;
use crate::session::{Case, Context};

/// HPL's pass threshold for the scaled residual.
pub const RESIDUAL_THRESHOLD: f64 = 16.0;

/// HPL's FLOP count for an order-n solve.
pub fn flops(n: u64) -> f64 {
    let n = n as f64;
    2.0 / 3.0 * n * n * n + 2.0 * n * n
}

/// Bytes a solve of order n holds at once: A, its factorised copy, b and x.
pub fn memory_needed(n: u64) -> u64 {
    2 * n * n * 8 + 4 * n * 8
}

/// A random system A, b of order n.
pub fn random_system(n: usize, seed: u64) -> (Mat<f64>, Mat<f64>) {
    let mut rng = Rng::new(seed);
    let a = Mat::from_fn(n, n, |_, _| rng.centered_f64());
    let b = Mat::from_fn(n, 1, |_, _| rng.centered_f64());
    (a, b)
}

/// Solves Ax = b by LU with partial pivoting.
pub fn solve(a: &Mat<f64>, b: &Mat<f64>) -> Mat<f64> {
    let lu = a.partial_piv_lu();
    lu.solve(b)
}

fn norm_inf_matrix(a: &Mat<f64>) -> f64 {
    (0..a.nrows())
        .map(|i| (0..a.ncols()).map(|j| a[(i, j)].abs()).sum::<f64>())
        .fold(0.0, f64::max)
}

fn norm_inf_vector(v: &Mat<f64>) -> f64 {
    (0..v.nrows()).map(|i| v[(i, 0)].abs()).fold(0.0, f64::max)
}

/// HPL's scaled residual of a solution x.
pub fn scaled_residual(a: &Mat<f64>, x: &Mat<f64>, b: &Mat<f64>) -> f64 {
    let r = a * x - b;
    let n = a.nrows() as f64;
    norm_inf_vector(&r)
        / (f64::EPSILON * (norm_inf_matrix(a) * norm_inf_vector(x) + norm_inf_vector(b)) * n)
}

/// One order n on N threads.
pub struct LinpackCase {
    pub n: u64,
    pub threads: usize,
}

impl Case for LinpackCase {
    fn id(&self) -> String {
        format!("cpu-linpack-n{}-t{}", self.n, self.threads)
    }

    fn label(&self) -> String {
        format!("linpack n={} {} threads", self.n, self.threads)
    }

    fn estimate(&self, ctx: &Context) -> Duration {
        // At a modest 20 GFLOP/s per thread; the plan is a guide, not a promise.
        let rate = 20e9 * self.threads.min(crate::runner::num_cpus()) as f64;
        let generate_and_check = 3.0 * (self.n * self.n) as f64 / 1e8;
        Duration::from_secs_f64(
            (flops(self.n) / rate + generate_and_check) * ctx.runner.repetitions as f64,
        )
    }

    fn run(&self, ctx: &Context) -> Result<BenchResult> {
        let available = ctx.host.memory.available_bytes;
        if available > 0 && memory_needed(self.n) > available {
            bail!(
                "n = {} needs {} of memory and {} is available: choose a smaller --n",
                self.n,
                crate::units::format_size_approx(memory_needed(self.n)),
                crate::units::format_size_approx(available)
            );
        }
        let n = self.n as usize;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(self.threads)
            .build()?;
        let par = if self.threads == 1 {
            Par::Seq
        } else {
            Par::rayon(self.threads)
        };
        let (a, b) = random_system(n, 42 + self.n);
        let mut samples = Vec::new();
        let mut residuals = Vec::new();
        pool.install(|| -> Result<()> {
            faer::set_global_parallelism(par);
            for _ in 0..ctx.runner.repetitions {
                if crate::interrupt::requested() {
                    bail!(crate::interrupt::Interrupted);
                }
                let start = Instant::now();
                let x = solve(&a, &b);
                let elapsed = start.elapsed();
                let residual = scaled_residual(&a, &x, &b);
                if residual.is_nan() || residual >= RESIDUAL_THRESHOLD {
                    bail!(
                        "linpack n = {} failed HPL's residual check: {residual:.3e} ≥ {RESIDUAL_THRESHOLD}",
                        self.n
                    );
                }
                residuals.push(residual);
                samples.push(flops(self.n) / elapsed.as_secs_f64() / 1e9);
            }
            Ok(())
        })?;
        let mut params = Params {
            threads: Some(self.threads),
            n: Some(self.n),
            precision: Some("f64".into()),
            ..Params::default()
        };
        params.other.insert(
            "library".into(),
            "faer (blocked LU, partial pivoting)".into(),
        );
        params.other.insert(
            "scaled_residual_max".into(),
            residuals.iter().cloned().fold(0.0, f64::max).into(),
        );
        let info = CaseInfo {
            id: self.id(),
            subsystem: Subsystem::Cpu,
            op: "linpack".into(),
            params,
            metric: "throughput".into(),
            unit: "GFLOP/s".into(),
            counting: format!(
                "HPL's count 2/3·n³ + 2·n² FLOP per solve; LU with partial pivoting by faer {}; \
                 scaled residual ‖Ax−b‖∞/(ε(‖A‖∞‖x‖∞+‖b‖∞)n) < {RESIDUAL_THRESHOLD} checked",
                FAER_VERSION
            ),
        };
        let Some(result) = BenchResult::from_samples(&ctx.host.hostname, info, samples) else {
            bail!("no repetition produced a finite rate");
        };
        // The peak of a DP solve: f64 FMA at the widest ISA the CPU has.
        let cpu = &ctx.peaks.cpu;
        let widest = *cpu.isas.last().unwrap_or(&Isa::Scalar);
        let peak = cpu
            .row(Precision::F64, widest, true)
            .and_then(|row| cpu.for_threads(row, self.threads, None));
        let result = result.with_peak(peak);
        Ok(if ctx.runner.reference {
            result.with_reference(super::reference::hpcc_hpl(self.n, self.threads)?)
        } else {
            result
        })
    }
}

/// The faer version this binary was built with.
const FAER_VERSION: &str = "0.24";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_solve_passes_the_residual_check() {
        for n in [1, 7, 64, 200] {
            let (a, b) = random_system(n, 7);
            let x = solve(&a, &b);
            let residual = scaled_residual(&a, &x, &b);
            assert!(residual < RESIDUAL_THRESHOLD, "n={n}: {residual}");
        }
    }

    #[test]
    fn a_wrong_solution_fails_the_residual_check() {
        let (a, b) = random_system(100, 3);
        let mut x = solve(&a, &b);
        x[(17, 0)] += 1e-6;
        assert!(scaled_residual(&a, &x, &b) > RESIDUAL_THRESHOLD);
    }

    #[test]
    fn hpl_flop_count() {
        assert_eq!(flops(3), 2.0 / 3.0 * 27.0 + 18.0);
        assert_eq!(flops(10_000), 2.0 / 3.0 * 1e12 + 2e8);
    }
}
