//! What the library-driven cases, Linpack ([`super::linpack`]) and DGEMM ([`super::gemm`]), do
//! alike: the memory check before a large order, the estimate, opening the BLAS, and running
//! the repetitions on the threads the library owns (the BLAS's, set to the case's count, or a
//! rayon pool for faer), pinned as `--pin` asks.

use std::time::Duration;

use anyhow::{Context as _, Result, anyhow, bail};

use super::blas::{self, Blas, BlasElement, Engine, Solver};
use crate::error::usage;
use crate::peak::{Isa, PeakRef, Precision};
use crate::plan::{Context, guess};
use crate::runner;

/// The stack of the thread that calls the BLAS or LAPACK: OpenBLAS's recursive LU overflows the
/// 2 MiB a Rust thread gets by default, and dies of a segmentation fault.
pub const LAPACK_STACK: usize = 64 << 20;

/// A measured repetition of a library-driven case: GFLOP/s, the figure its check reports, and
/// the share of the time its threads waited for a CPU ([`runner::timed_waiting`]; `None` in the
/// warm-up or without schedstat).
pub(crate) type LibraryRound = runner::Timed<(f64, f64, Option<f64>)>;

/// The peak of a dense solve or multiply in `precision` (f64 or f32) on `threads` cores: FMA
/// of that element type at the widest ISA the CPU has (what HPL, DGEMM and SGEMM kernels run).
pub(crate) fn fma_peak(ctx: &Context, threads: usize, precision: Precision) -> Option<PeakRef> {
    let cpu = &ctx.peaks.cpu;
    let widest = *cpu.isas.last().unwrap_or(&Isa::Scalar);
    cpu.row(precision, widest, true)
        .and_then(|row| cpu.for_threads(row, threads, None))
}

/// Refuses an order `n` whose matrices (`needed` bytes) do not fit in the available memory.
pub(crate) fn check_fits(n: u64, needed: u64, available: u64) -> Result<()> {
    if available > 0 && needed > available {
        return Err(usage(format!(
            "--n: {n} needs {} of memory and {} is available: give a smaller order",
            crate::units::format_size_approx(needed),
            crate::units::format_size_approx(available)
        )));
    }
    Ok(())
}

/// Refuses at run time an order whose matrices (`needed` bytes) no longer fit in the memory
/// available (the plan checked it, but memory may have gone since); `what` starts the message.
pub(crate) fn check_memory(what: &str, n: u64, needed: u64, available: u64) -> Result<()> {
    if available > 0 && needed > available {
        bail!(
            "{what}n = {n} needs {} of memory and {} is available: choose a smaller --n",
            crate::units::format_size_approx(needed),
            crate::units::format_size_approx(available)
        );
    }
    Ok(())
}

/// The time a case takes at a modest `per_thread` FLOP/s on each of its threads: `flops` and
/// `per_repetition_s` every repetition, `once_s` once, and the warm-up. The plan is a guide,
/// not a promise.
pub(crate) fn estimate(
    ctx: &Context,
    threads: usize,
    flops: f64,
    per_thread: f64,
    per_repetition_s: f64,
    once_s: f64,
) -> Duration {
    let rate = per_thread * threads.min(runner::num_cpus()) as f64;
    guess::sum([
        guess::secs((flops / rate + per_repetition_s) * ctx.runner.repetitions as f64 + once_s),
        ctx.runner.warmup,
    ])
}

/// Loads the engine's library, or none for the built-in engine. Called on the case's own
/// thread, which is not pinned: OpenBLAS starts its worker threads when it is loaded, and they
/// would inherit a pinned thread's single CPU.
pub(crate) fn open(engine: Engine) -> Result<Option<&'static Blas>> {
    match engine {
        Engine::Builtin => Ok(None),
        Engine::Library(vendor) => blas::open(vendor)
            .map(Some)
            .map_err(|why| anyhow!("{}: {why}", vendor.name())),
        Engine::File(path) => blas::open_file(path).map(Some),
    }
}

/// The largest order of the probe multiply on one thread: large enough that every library runs
/// its blocked kernels, small enough (2 GFLOP) to cost a fraction of a second. A case of a
/// smaller order probes at its own.
pub const PROBE_N: usize = 1000;

/// The pause before each engine's turn in the probe, on more than one thread: longer than
/// the spin of the previous library's idle workers.
const PROBE_SETTLE: std::time::Duration = std::time::Duration::from_millis(250);

/// The order of the probe multiply for a case of `order` on `threads`: [`PROBE_N`] × ∛threads
/// (the same work per thread, 2 GFLOP), at most the case's own order, a multiple of 8. At
/// n = 1000 on 16 threads each thread's share is too small for a library's threading to pay:
/// on a 16-core Emerald Rapids guest the probe picked OpenBLAS (500 GFLOP/s at n = 4000) over
/// MKL (812).
pub fn probe_order(order: u64, threads: usize) -> usize {
    let scaled = PROBE_N as f64 * (threads.max(1) as f64).cbrt();
    let n = ((scaled / 8.0).round() * 8.0) as usize;
    n.min(order.max(1) as usize)
}

/// The engine a case runs on, and why it was picked. `Auto` measures each engine present: the
/// best of three multiplies in T (the case's precision) of the case's order, at most
/// [`probe_order`] (after one unmeasured), on the case's threads, engine after engine with a
/// pause between them ([`PROBE_SETTLE`]); the fastest multiply wins, for
/// Linpack too, whose time is its trailing updates'. A library that does not open, or lacks
/// T's GEMM, is left out, and said so.
pub(crate) fn resolve<T: BlasElement>(
    solver: Solver,
    order: u64,
    threads: usize,
    pin: bool,
) -> Result<(Engine, String)> {
    if let Solver::Fixed(engine) = solver {
        return Ok((engine, super::gemm::forced_text(engine)));
    }
    let engines = blas::present();
    if engines.len() == 1 {
        return Ok((Engine::Builtin, "auto: no BLAS library installed".into()));
    }
    let n = probe_order(order, threads);
    let mut rng = crate::rng::Rng::new(99);
    let a: Vec<T> = (0..n * n)
        .map(|_| T::from_f64(rng.centered_f64()))
        .collect();
    let b: Vec<T> = (0..n * n)
        .map(|_| T::from_f64(rng.centered_f64()))
        .collect();
    let mut rates: Vec<(Engine, f64)> = Vec::new();
    let mut libraries = Vec::new();
    let mut left_out = Vec::new();
    for engine in engines {
        match open(engine).and_then(|library| {
            if let Some(blas) = library {
                blas.require::<T>()?;
            }
            Ok(library)
        }) {
            Ok(library) => {
                libraries.push(library);
                rates.push((engine, 0.0));
            }
            Err(e) => left_out.push(format!("{e:#}")),
        }
    }
    // Each engine multiplies four times in a row (the first unmeasured), after a pause in
    // which the previous library's worker threads stop spinning: OpenBLAS's spin for about
    // 2^28 cycles (0.1 s) after their last call, GNU OpenMP's too, and on 16 threads of 8
    // cores (SMT siblings) those spinning threads halved the next library's rate. Taking turns
    // multiply by multiply read MKL at 180 GFLOP/s against its 812 in a case of its own.
    let mut c = vec![T::ZERO; n * n];
    for (i, (library, (_, best))) in libraries.iter().zip(rates.iter_mut()).enumerate() {
        if i > 0 && threads > 1 {
            std::thread::sleep(PROBE_SETTLE);
        }
        for round in 0..4 {
            let rate = run_on_threads("probe", *library, threads, pin, || {
                let start = std::time::Instant::now();
                super::gemm::multiply(*library, n, &a, &b, &mut c, threads)?;
                let rate = super::gemm::flops(n as u64) / start.elapsed().as_secs_f64() / 1e9;
                super::gemm::check(n, &a, &b, &c, 3)?;
                Ok(rate)
            })?;
            if round > 0 {
                *best = best.max(rate);
            }
        }
    }
    let (engine, _) = rates
        .iter()
        .copied()
        .fold((Engine::Builtin, f64::MIN), |best, e| {
            if e.1 > best.1 { e } else { best }
        });
    let mut why = format!(
        "auto: fastest multiply in a probe ({}, n = {n}, {threads} threads, best of 3): {}",
        T::NAME,
        rates
            .iter()
            .map(|(e, r)| format!("{} {r:.1} GFLOP/s", e.name()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if !left_out.is_empty() {
        why.push_str(&format!("; left out: {}", left_out.join("; ")));
    }
    Ok((engine, why))
}

/// Runs `work` with the library's threads: for a BLAS, on a thread of its own with a
/// [`LAPACK_STACK`] stack, pinned to the first CPU with `pin`, and the library set to
/// `threads`; for faer, in a rayon pool of `threads` threads, thread i pinned to the i-th CPU
/// with `pin`. `name` names the thread in errors and warnings.
pub(crate) fn run_on_threads<T: Send>(
    name: &str,
    library: Option<&Blas>,
    threads: usize,
    pin: bool,
    work: impl FnOnce() -> Result<T> + Send,
) -> Result<T> {
    match library {
        Some(blas) => std::thread::scope(|scope| {
            let worker = std::thread::Builder::new()
                .name(name.into())
                .stack_size(LAPACK_STACK)
                .spawn_scoped(scope, || {
                    if let Some(cpu) = runner::cpu_for(pin, 0) {
                        runner::pin_to(cpu)?;
                    }
                    blas.with_threads(threads, work)
                })
                .with_context(|| format!("cannot start the {name} thread"))?;
            worker
                .join()
                .map_err(|_| anyhow!("the {name} thread panicked"))?
        }),
        None => {
            let name = name.to_string();
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .start_handler(move |index| {
                    // A thread that cannot be pinned runs unpinned; the result says pinned
                    // only as asked, so report it.
                    if let Some(cpu) = runner::cpu_for(pin, index)
                        && let Err(e) = runner::pin_to(cpu)
                    {
                        eprintln!("warning: {name} thread {index}: {e:#}");
                    }
                })
                .build()?;
            pool.install(work)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_grows_with_the_threads_up_to_the_cases_order() {
        assert_eq!(probe_order(4000, 1), 1000);
        assert_eq!(probe_order(4000, 2), 1256);
        assert_eq!(probe_order(4000, 16), 2520);
        assert_eq!(probe_order(500, 16), 500);
        assert_eq!(probe_order(0, 0), 1);
    }
}
