//! Dense matrix multiply (DGEMM), the rate that bounds Linpack and that users quote as
//! "sustained FLOPS".
//!
//! C = A·B for random n × n f64 matrices (column-major, entries uniform in [−0.5, 0.5)), by the
//! machine's BLAS `dgemm_` (loaded at run time by [`super::blas`]) or by peakbench's own
//! ([`super::dgemm`], `--blas builtin`). The timed region is the one multiply; the matrices are generated before it.
//! FLOPs are counted as every BLAS benchmark counts them, 2·n³ per multiply (n³ multiplies and
//! n³ adds), whatever the library really executes. After every repetition 16 entries of C, at
//! random places, are recomputed by a plain dot product; each must agree within
//! 2·n·ε·Σ|aᵢₖ·bₖⱼ| (the forward error bound of a dot product), or the run fails: a library
//! that skipped work cannot pass.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use faer::{Accum, MatMut, MatRef, Par};

use super::blas::{self, Blas, Engine, Solver};
use super::dgemm::Dgemm;
use super::library;
use super::linpack::library_params;
use crate::plan::{Case, CaseSpec, Context};
use crate::reference::{Invocation, Reading, Tool};
use crate::result::{BenchResult, Params, Reference, Subsystem};
use crate::rng::Rng;
use crate::runner::{self, Round};

/// Entries of C recomputed after every multiply.
pub const CHECKED_ENTRIES: usize = 16;

/// FLOPs of one n × n multiply.
pub fn flops(n: u64) -> f64 {
    2.0 * (n as f64).powi(3)
}

/// Bytes the three matrices hold.
pub fn memory_needed(n: u64) -> u64 {
    3 * n * n * 8
}

/// A random n × n column-major matrix.
fn random_matrix(n: usize, rng: &mut Rng) -> Vec<f64> {
    (0..n * n).map(|_| rng.centered_f64()).collect()
}

/// Recomputes `CHECKED_ENTRIES` entries of C = A·B; the largest error relative to its bound.
pub fn check(n: usize, a: &[f64], b: &[f64], c: &[f64], seed: u64) -> Result<f64> {
    let mut rng = Rng::new(seed);
    let mut worst: f64 = 0.0;
    for _ in 0..CHECKED_ENTRIES {
        let (i, j) = (rng.index(n), rng.index(n));
        let (mut sum, mut magnitude) = (0.0f64, 0.0f64);
        for k in 0..n {
            let p = a[i + k * n] * b[k + j * n];
            sum += p;
            magnitude += p.abs();
        }
        let bound = 2.0 * n as f64 * f64::EPSILON * magnitude;
        let error = (c[i + j * n] - sum).abs();
        if error.is_nan() || error > bound {
            bail!(
                "gemm n = {n}: C({i},{j}) = {} where the dot product gives {sum} (error {error:.3e} > bound {bound:.3e}): the multiply is wrong",
                c[i + j * n]
            );
        }
        if bound > 0.0 {
            worst = worst.max(error / bound);
        }
    }
    Ok(worst)
}

/// One order n on N threads.
pub struct GemmCase {
    pub n: u64,
    pub threads: usize,
    pub pin: bool,
    /// The engine that multiplies, or the fastest present (picked when the case runs).
    pub solver: Solver,
}

/// C = A·B for n × n column-major matrices, by the library's dgemm or (`None`) peakbench's
/// own ([`Dgemm::current`]), on `threads` threads of the current rayon pool.
pub fn multiply(
    library: Option<&Blas>,
    n: usize,
    a: &[f64],
    b: &[f64],
    c: &mut [f64],
    threads: usize,
) -> Result<()> {
    match library {
        Some(blas) => blas.dgemm(n, a, b, c),
        None => {
            Dgemm::current().gemm(
                (n, n, n),
                1.0,
                (&a[..n * n], n),
                (&b[..n * n], n),
                0.0,
                (&mut c[..n * n], n),
                threads > 1,
            );
            Ok(())
        }
    }
}

/// C = A·B by faer's `matmul` (for comparisons: `examples/dense_cycles.rs`).
pub fn faer_multiply(n: usize, a: &[f64], b: &[f64], c: &mut [f64], threads: usize) {
    let par = if threads == 1 {
        Par::Seq
    } else {
        Par::rayon(threads)
    };
    faer::linalg::matmul::matmul(
        MatMut::from_column_major_slice_mut(&mut c[..n * n], n, n),
        Accum::Replace,
        MatRef::from_column_major_slice(&a[..n * n], n, n),
        MatRef::from_column_major_slice(&b[..n * n], n, n),
        1.0,
        par,
    );
}

/// A case id's suffix naming a library engine (`-openblas`), so `--blas all` gives each its own.
pub(crate) fn engine_suffix(solver: Solver) -> String {
    match solver {
        Solver::Fixed(Engine::Library(vendor)) => format!("-{}", vendor.name().to_lowercase()),
        _ => String::new(),
    }
}

/// The engine a case is forced to, for the tables (`builtin`, `openblas`, …): `--blas all`
/// gives one row per engine, told apart by it; `None` for `auto`, whose pick the result names.
pub(crate) fn engine_name(solver: Solver) -> Option<String> {
    match solver {
        Solver::Auto => None,
        Solver::Fixed(Engine::Builtin) => Some("builtin".into()),
        Solver::Fixed(Engine::Library(vendor)) => Some(vendor.name().to_lowercase()),
    }
}

/// How a case's plan names its solver.
pub(crate) fn solver_label(solver: Solver, what: &str) -> String {
    match solver {
        Solver::Auto => "auto (the fastest engine present, probed when the case runs)".into(),
        Solver::Fixed(Engine::Builtin) => what.into(),
        Solver::Fixed(Engine::Library(vendor)) => vendor.name().into(),
    }
}

impl GemmCase {
    /// The repetitions: GFLOP/s and the worst checked error relative to its bound.
    fn repetitions(
        &self,
        ctx: &Context,
        library: Option<&Blas>,
        a: &[f64],
        b: &[f64],
        c: &mut [f64],
    ) -> Result<Vec<library::LibraryRound>> {
        let n = self.n as usize;
        let threads = self.threads;
        let multiply = |c: &mut [f64]| multiply(library, n, a, b, c, threads);
        runner::repeat(&ctx.runner, ctx.runner.repetitions, |round| match round {
            Round::Warmup(budget) => {
                let start = Instant::now();
                while start.elapsed() < budget && !crate::interrupt::requested() {
                    multiply(c)?;
                }
                check(n, a, b, c, 5)?;
                Ok((0.0, 0.0, None))
            }
            Round::Measured(i) => {
                c.fill(0.0);
                let (done, elapsed, waited) = runner::timed_waiting(threads, || multiply(c));
                done?;
                let worst = check(n, a, b, c, 100 + u64::from(i))?;
                Ok((flops(self.n) / elapsed.as_secs_f64() / 1e9, worst, waited))
            }
        })
    }
}

impl Case for GemmCase {
    fn spec(&self) -> CaseSpec {
        let mut params = Params {
            threads: Some(self.threads),
            pinned: Some(self.pin),
            n: Some(self.n),
            precision: Some("f64".into()),
            engine: engine_name(self.solver),
            ..Params::default()
        };
        params.other.insert(
            "solver".into(),
            solver_label(self.solver, "builtin (peakbench dgemm)").into(),
        );
        let suffix = engine_suffix(self.solver);
        CaseSpec {
            id: format!("cpu-gemm-n{}-t{}{suffix}", self.n, self.threads),
            label: format!(
                "gemm n={} {} threads{}",
                self.n,
                self.threads,
                suffix.replace('-', " ")
            ),
            subsystem: Subsystem::Cpu,
            op: "gemm".into(),
            params,
        }
    }

    fn estimate(&self, ctx: &Context) -> Duration {
        // At 30 GFLOP/s per thread, generating the matrices once.
        let generate = 3.0 * (self.n * self.n) as f64 / 1e8;
        library::estimate(ctx, self.threads, flops(self.n), 30e9, 0.0, generate)
    }

    fn run(&self, ctx: &Context) -> Result<BenchResult> {
        library::check_memory(
            "gemm ",
            self.n,
            memory_needed(self.n),
            ctx.host.memory.available_bytes,
        )?;
        let n = self.n as usize;
        let mut rng = Rng::new(17 + self.n);
        let (a, b) = (random_matrix(n, &mut rng), random_matrix(n, &mut rng));
        let mut c = vec![0.0; n * n];
        Dgemm::global(&ctx.host.cpu.caches)?;
        let (engine, why) = library::resolve(self.solver, self.n, self.threads, self.pin)?;
        let library = library::open(engine)?;
        let rounds = library::run_on_threads("gemm", library, self.threads, self.pin, || {
            self.repetitions(ctx, library, &a, &b, &mut c)
        })?;
        let samples: Vec<f64> = rounds.iter().map(|r| r.value.0).collect();
        let worst = rounds.iter().map(|r| r.value.1).fold(0.0, f64::max);
        let peak = library::f64_fma_peak(ctx, self.threads);
        let mut result = self
            .spec()
            .measured(
                &ctx.host.hostname,
                "throughput",
                "GFLOP/s",
                format!(
                    "2·n³ FLOP per multiply C = A·B of n × n f64 matrices; timed: one call of {}; \
                     {CHECKED_ENTRIES} random entries of C recomputed, each within 2nε·Σ|aᵢₖbₖⱼ|",
                    match library {
                        Some(blas) => format!("{} dgemm", blas.describe()),
                        None => Dgemm::current().describe(),
                    }
                ),
                samples,
            )?
            .param("dense_engine", engine.name())
            .param("dense_engine_choice", why)
            .walls(rounds.iter().map(|r| r.wall))
            .param("checked_error_of_bound_max", worst)
            .peak(peak)
            .warn(runner::oversubscription_warning(self.threads))
            .warn(runner::waiting_warning(
                &rounds.iter().map(|r| r.value.2).collect::<Vec<_>>(),
                self.threads,
            ));
        for (key, value) in library_params(library) {
            result = result.param(key, value);
        }
        if ctx.runner.reference {
            result = result.reference(openblas_dgemm(
                self.n,
                self.threads,
                ctx.runner.repetitions,
            )?);
        }
        Ok(result.finish())
    }
}

/// OpenBLAS's `cblas_dgemm`, called from Python through ctypes: the BLAS a user would reach
/// for, at the same n and threads, timed by the harness around the one call.
pub const OPENBLAS_DGEMM: Tool = Tool {
    name: "OpenBLAS cblas_dgemm",
    program: "python3",
    install: "apt-get install python3 libopenblas0-pthread",
};

/// The harness: loads OpenBLAS, fills A and B, times `reps` multiplies, prints the median.
const HARNESS: &str = r#"import ctypes, random, sys, time
path, n, threads, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
blas = ctypes.CDLL(path)
blas.openblas_set_num_threads(threads)
size = n * n
def matrix(seed):
    # Random values for the first 4093 entries, repeated by memmove until full (filling 16M
    # entries one by one in Python takes seconds); DGEMM's speed does not depend on the values.
    m = (ctypes.c_double * size)()
    rng = random.Random(seed)
    first = min(size, 4093)
    for i in range(first):
        m[i] = rng.random() - 0.5
    done = first
    while done < size:
        step = min(done, size - done)
        ctypes.memmove(ctypes.byref(m, done * 8), m, step * 8)
        done += step
    return m
a, b, c = matrix(1), matrix(2), (ctypes.c_double * size)()
f = blas.cblas_dgemm
f.restype = None
f.argtypes = [ctypes.c_int] * 6 + [ctypes.c_double, ctypes.c_void_p, ctypes.c_int,
              ctypes.c_void_p, ctypes.c_int, ctypes.c_double, ctypes.c_void_p, ctypes.c_int]
def once():
    t = time.perf_counter()
    f(102, 111, 111, n, n, n, 1.0, a, n, b, n, 0.0, c, n)
    return time.perf_counter() - t
once()
rates = sorted(2.0 * n ** 3 / once() / 1e9 for _ in range(reps))
print("GFLOPS", rates[len(rates) // 2])
"#;

/// Runs the harness on the installed OpenBLAS at order n on `threads` threads, GFLOP/s.
pub fn openblas_dgemm(n: u64, threads: usize, reps: u32) -> Result<Reference> {
    let Some(path) = blas::Vendor::OpenBlas.installed_path() else {
        return Ok(OPENBLAS_DGEMM.missing("python3 gemm.py"));
    };
    let args = vec![
        "gemm.py".to_string(),
        path.to_string(),
        n.to_string(),
        threads.to_string(),
        reps.max(1).to_string(),
    ];
    let seconds = (flops(n) / 1e9 * f64::from(reps + 1)) + 60.0;
    Invocation::new(OPENBLAS_DGEMM, args, Duration::from_secs_f64(seconds), |stdout| {
        let value = parse_gflops(stdout).ok_or("no GFLOPS line in the harness's output")?;
        Ok(Reading {
            value,
            note: Some(format!(
                "median of {reps} calls of cblas_dgemm (CblasColMajor, no transposes), after one unmeasured"
            )),
        })
    })
    .input_file(
        "gemm.py",
        HARNESS.to_string(),
        "the ctypes harness of src/cpu/gemm.rs".into(),
    )
    .env("OPENBLAS_NUM_THREADS", &threads.to_string())
    .run()
}

/// The `GFLOPS` figure of the harness's output.
pub fn parse_gflops(text: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("GFLOPS "))
        .and_then(|v| v.trim().parse().ok())
        .filter(|v: &f64| v.is_finite() && *v > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_accepts_a_right_product_and_refuses_a_wrong_one() {
        let n = 40;
        let mut rng = Rng::new(3);
        let (a, b) = (random_matrix(n, &mut rng), random_matrix(n, &mut rng));
        let mut c = vec![0.0; n * n];
        for j in 0..n {
            for i in 0..n {
                c[i + j * n] = (0..n).map(|k| a[i + k * n] * b[k + j * n]).sum();
            }
        }
        assert!(check(n, &a, &b, &c, 1).unwrap() <= 1.0);
        // Every entry off by a little more than the bound allows: any sample catches it.
        let wrong: Vec<f64> = c.iter().map(|x| x + 1e-9).collect();
        assert!(check(n, &a, &b, &wrong, 1).is_err());
    }

    #[test]
    fn flops_and_the_harness_output() {
        assert_eq!(flops(1000), 2e9);
        assert_eq!(parse_gflops("GFLOPS 101.5\n"), Some(101.5));
        assert_eq!(parse_gflops("GFLOPS nan\n"), None);
    }
}
