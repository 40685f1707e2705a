//! `peakbench cpu gemm`: dense matrix multiply (DGEMM, and SGEMM with `--precision f32`), the
//! rate that bounds Linpack and that users quote as "sustained FLOPS".
//!
//! C = A·B for random n × n f64 (or f32) matrices (column-major, entries uniform in
//! [−0.5, 0.5)), by the machine's BLAS `dgemm_` or `sgemm_` (loaded at run time by
//! [`super::engine::blas`]) or by peakbench's own ([`super::builtin::dgemm`], `--blas builtin`).
//! The timed region is the one multiply; the matrices are generated before it. FLOPs are
//! counted as every BLAS benchmark counts them, 2·n³ per multiply (n³ multiplies and n³ adds),
//! whatever the library really executes. After every repetition 16 entries of C, at random
//! places, are recomputed by a plain dot product in f64; each must agree within
//! 2·n·ε·Σ|aᵢₖ·bₖⱼ| (the forward error bound of a dot product, with ε of the element type:
//! 2⁻⁵² for f64, 2⁻²³ for f32), or the run fails: a library that skipped work cannot pass
//! ([`super::engine::product`]). Each precision's peak is the FMA peak of that element type at
//! the widest ISA the CPU has (f32 has twice f64's lanes).

use std::time::{Duration, Instant};

use anyhow::Result;

use super::args::{DenseArgs, DenseDefaults};
use super::builtin::dgemm::BuiltinGemm;
use super::case::{self, DenseCase, DenseRound, Operation};
use super::engine::blas::{self, Blas, BlasElement, Solver};
use super::engine::product::{self, CHECKED_ENTRIES, check, multiply, random_matrix};
use super::engine::{self, DenseElement};
use crate::options::{Defaults, unique};
use crate::peak::Precision;
use crate::plan::{Context, Plan};
use crate::reference::{Invocation, Reading, ToolSpec};
use crate::result::{BenchResult, Reference};
use crate::rng::Rng;
use crate::runner::{self, Round};
use crate::workload::Benchmark;

/// `peakbench cpu gemm`.
#[derive(Clone, Copy, Debug)]
pub struct Gemm;

impl Benchmark for Gemm {
    const NAME: &'static str = "gemm";
    const PATH: &'static [&'static str] = &["cpu", "gemm"];
    const ABOUT: &'static str = "Dense matrix multiply C = A·B (DGEMM, SGEMM with -p f32; the fastest of peakbench's own and the machine's BLAS), GFLOP/s, entries of C checked";
    type Args = DenseArgs<Gemm>;

    fn plan(args: &DenseArgs<Gemm>, ctx: &Context) -> Result<Plan> {
        case::plan(Gemm, args, ctx)
    }
}

// Threads: 1 and every CPU, the single core and the whole chip, the two points of every
// scaling curve.
impl Defaults for Gemm {}

impl DenseDefaults for Gemm {
    const N: &'static str = "4000";
    const N_HELP: &'static str = "Orders of the matrices (list), e.g. 2000,4000";
    const PRECISION_HELP: &'static str =
        "Element types (list): f64 (DGEMM), f32 (SGEMM), each its own case with its own peak";
    const BLAS_HELP: &'static str = "The BLAS that multiplies, loaded at run time: a name below, \
        or the path of a shared library (with a '/', e.g. /opt/blis/lib/libblis.so)";
}

impl Operation for Gemm {
    const OP: &'static str = "gemm";
    const ESTIMATE_RATE: f64 = 30e9;
    const SETUP_EVERY_REPETITION: bool = false;

    fn default_threads() -> Vec<usize> {
        unique(&[1, runner::num_cpus()])
    }

    fn flops(n: u64) -> f64 {
        product::flops(n)
    }

    /// The three matrices.
    fn memory_needed(n: u64, precision: Precision) -> u64 {
        let size = if precision == Precision::F32 { 4 } else { 8 };
        3 * n * n * size
    }

    fn solver_name(solver: Solver, precision: Precision) -> String {
        let routine = if precision == Precision::F32 {
            "sgemm"
        } else {
            "dgemm"
        };
        engine::solver_label(solver, &format!("builtin (peakbench {routine})"))
    }

    fn run<T: DenseElement>(case: &DenseCase<Gemm>, ctx: &Context) -> Result<BenchResult> {
        let n = case.n as usize;
        let mut rng = Rng::new(17 + case.n);
        let (a, b) = (
            random_matrix::<T>(n, &mut rng),
            random_matrix::<T>(n, &mut rng),
        );
        let mut c = vec![T::ZERO; n * n];
        let (library, why) = case.engine::<T>(ctx)?;
        if let Some(blas) = library {
            blas.require::<T>()?;
        }
        let rounds = engine::run_on_threads("gemm", library, case.threads, case.pin, || {
            repetitions(case, ctx, library, (&a, &b), &mut c)
        })?;
        let worst = rounds.iter().map(|r| r.value.1).fold(0.0, f64::max);
        let epsilon = if case.f32() {
            " (ε = 2⁻²³, f32's; the dot product in f64)"
        } else {
            ""
        };
        let counting = format!(
            "2·n³ FLOP per multiply C = A·B of n × n {} matrices; timed: one call of {}; \
             {CHECKED_ENTRIES} random entries of C recomputed, each within \
             2nε·Σ|aᵢₖbₖⱼ|{epsilon}",
            T::NAME,
            match library {
                Some(blas) => format!("{} {}", blas.describe(), T::ROUTINE),
                None => BuiltinGemm::<T>::current().describe(),
            }
        );
        let measured = case
            .measured(ctx, counting, &rounds)?
            .param("checked_error_of_bound_max", worst)
            .warn(runner::oversubscription_warning(case.threads))
            .warn(case.waiting_warning(&rounds));
        let mut result = case::with_engine::<T>(
            measured,
            library,
            why,
            !case.f32(),
            (case.threads, case.pin),
        );
        if ctx.runner.reference {
            result = result.reference(openblas_gemm(
                case.n,
                case.threads,
                ctx.runner.repetitions,
                case.precision,
            )?);
        }
        Ok(result.finish())
    }
}

/// The repetitions of a case: GFLOP/s and the worst checked error relative to its bound.
fn repetitions<T: BlasElement>(
    case: &DenseCase<Gemm>,
    ctx: &Context,
    library: Option<&Blas>,
    (a, b): (&[T], &[T]),
    c: &mut [T],
) -> Result<Vec<DenseRound>> {
    let n = case.n as usize;
    let threads = case.threads;
    let multiply = |c: &mut [T]| multiply(library, n, a, b, c, threads);
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
            c.fill(T::ZERO);
            let (done, elapsed, waited) = runner::timed_waiting(threads, || multiply(c));
            done?;
            let worst = check(n, a, b, c, 100 + u64::from(i))?;
            Ok((
                product::flops(case.n) / elapsed.as_secs_f64() / 1e9,
                worst,
                waited,
            ))
        }
    })
}

/// OpenBLAS's `cblas_dgemm`, called from Python through ctypes: the BLAS a user would reach
/// for, at the same n and threads, timed by the harness around the one call.
pub(crate) const OPENBLAS_DGEMM: ToolSpec = ToolSpec {
    name: "OpenBLAS cblas_dgemm",
    program: "python3",
    install: "apt-get install python3 libopenblas0-pthread",
};

/// OpenBLAS's `cblas_sgemm`, by the same harness, for the f32 cases.
pub(crate) const OPENBLAS_SGEMM: ToolSpec = ToolSpec {
    name: "OpenBLAS cblas_sgemm",
    program: "python3",
    install: "apt-get install python3 libopenblas0-pthread",
};

/// The harness: loads OpenBLAS, fills A and B, times `reps` multiplies, prints the median;
/// its fifth argument, `d` or `s`, picks cblas_dgemm (doubles) or cblas_sgemm (floats).
const HARNESS: &str = r#"import ctypes, random, sys, time
path, n, threads, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
kind = sys.argv[5] if len(sys.argv) > 5 else "d"
real, size_of = (ctypes.c_float, 4) if kind == "s" else (ctypes.c_double, 8)
blas = ctypes.CDLL(path)
blas.openblas_set_num_threads(threads)
size = n * n
def matrix(seed):
    # Random values for the first 4093 entries, repeated by memmove until full (filling 16M
    # entries one by one in Python takes seconds); DGEMM's speed does not depend on the values.
    m = (real * size)()
    rng = random.Random(seed)
    first = min(size, 4093)
    for i in range(first):
        m[i] = rng.random() - 0.5
    done = first
    while done < size:
        step = min(done, size - done)
        ctypes.memmove(ctypes.byref(m, done * size_of), m, step * size_of)
        done += step
    return m
a, b, c = matrix(1), matrix(2), (real * size)()
f = blas.cblas_sgemm if kind == "s" else blas.cblas_dgemm
f.restype = None
f.argtypes = [ctypes.c_int] * 6 + [real, ctypes.c_void_p, ctypes.c_int,
              ctypes.c_void_p, ctypes.c_int, real, ctypes.c_void_p, ctypes.c_int]
def once():
    t = time.perf_counter()
    f(102, 111, 111, n, n, n, 1.0, a, n, b, n, 0.0, c, n)
    return time.perf_counter() - t
once()
rates = sorted(2.0 * n ** 3 / once() / 1e9 for _ in range(reps))
print("GFLOPS", rates[len(rates) // 2])
"#;

/// Runs the harness on the installed OpenBLAS at order n on `threads` threads, GFLOP/s:
/// cblas_dgemm for f64, cblas_sgemm for f32.
pub(crate) fn openblas_gemm(
    n: u64,
    threads: usize,
    reps: u32,
    precision: Precision,
) -> Result<Reference> {
    let (tool, kind) = if precision == Precision::F32 {
        (OPENBLAS_SGEMM, "s")
    } else {
        (OPENBLAS_DGEMM, "d")
    };
    let Some(path) = blas::Vendor::OpenBlas.installed_path() else {
        return Ok(tool.missing("python3 gemm.py"));
    };
    let args = vec![
        "gemm.py".to_string(),
        path.to_string(),
        n.to_string(),
        threads.to_string(),
        reps.max(1).to_string(),
        kind.to_string(),
    ];
    let seconds = (product::flops(n) / 1e9 * f64::from(reps + 1)) + 60.0;
    let routine = tool.name.trim_start_matches("OpenBLAS ");
    Invocation::new(tool, args, Duration::from_secs_f64(seconds), move |stdout| {
        let value = parse_gflops(stdout).ok_or("no GFLOPS line in the harness's output")?;
        Ok(Reading {
            value,
            note: Some(format!(
                "median of {reps} calls of {routine} (CblasColMajor, no transposes), after one unmeasured"
            )),
        })
    })
    .input_file(
        "gemm.py",
        HARNESS.to_string(),
        "the ctypes harness of src/cpu/dense/gemm.rs".into(),
    )
    .env("OPENBLAS_NUM_THREADS", &threads.to_string())
    .run()
}

/// The `GFLOPS` figure of the harness's output.
pub(crate) fn parse_gflops(text: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("GFLOPS "))
        .and_then(|v| v.trim().parse().ok())
        .filter(|v: &f64| v.is_finite() && *v > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::dense::engine::blas::DenseEngine;
    use crate::plan::Case;

    #[test]
    fn f32_cases_have_their_own_ids_and_f64_ids_stay() {
        let case = |precision, solver| DenseCase {
            op: Gemm,
            n: 4000,
            threads: 2,
            pin: false,
            solver,
            precision,
        };
        let builtin = Solver::Fixed(DenseEngine::Builtin);
        assert_eq!(case(Precision::F64, builtin).spec().id, "cpu-gemm-n4000-t2");
        assert_eq!(
            case(Precision::F32, builtin).spec().id,
            "cpu-gemm-f32-n4000-t2"
        );
        let openblas = Solver::Fixed(DenseEngine::Library(blas::Vendor::OpenBlas));
        assert_eq!(
            case(Precision::F32, openblas).spec().id,
            "cpu-gemm-f32-n4000-t2-openblas"
        );
        let file = Solver::Fixed(DenseEngine::File("/opt/blis/lib/libblis.so.4"));
        let spec = case(Precision::F32, file).spec();
        assert_eq!(spec.id, "cpu-gemm-f32-n4000-t2-libblis-so-4");
        assert_eq!(
            spec.params.engine.as_deref(),
            Some("/opt/blis/lib/libblis.so.4")
        );
        assert_eq!(spec.params.precision.as_deref(), Some("f32"));
        assert_eq!(Gemm::memory_needed(1000, Precision::F32), 12_000_000);
        assert_eq!(Gemm::memory_needed(1000, Precision::F64), 24_000_000);
    }

    #[test]
    fn flops_and_the_harness_output() {
        assert_eq!(Gemm::flops(1000), 2e9);
        assert_eq!(parse_gflops("GFLOPS 101.5\n"), Some(101.5));
        assert_eq!(parse_gflops("GFLOPS nan\n"), None);
    }
}
