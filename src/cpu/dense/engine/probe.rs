//! `--blas auto`: the engine a case runs on is the one whose multiply is the fastest in a short
//! probe, measured when the case starts, on the case's threads and in its element type; for
//! Linpack too, whose time is its trailing updates' multiplies.

use std::time::{Duration, Instant};

use anyhow::Result;

use super::blas::{self, Blas, BlasElement, DenseEngine, Solver};
use super::product::{self, random_matrix};
use super::{forced_text, open, run_on_threads};

/// The largest order of the probe multiply on one thread: large enough that every library runs
/// its blocked kernels, small enough (2 GFLOP) to cost a fraction of a second. A case of a
/// smaller order probes at its own.
pub(crate) const PROBE_N: usize = 1000;

/// The pause before each engine's turn in the probe, on more than one thread: longer than
/// the spin of the previous library's idle workers.
const PROBE_SETTLE: Duration = Duration::from_millis(250);

/// The order of the probe multiply for a case of `order` on `threads`: [`PROBE_N`] × ∛threads (the
/// same work per thread, 2 GFLOP), at most the case's own order, a multiple of 8. At n = 1000 on 16
/// threads each thread's share is too small for a library's threading to pay: on a 16-vCPU KVM
/// guest of an Emerald Rapids Xeon the probe picked OpenBLAS (500 GFLOP/s at n = 4000) over MKL
/// (812).
pub(crate) fn probe_order(order: u64, threads: usize) -> usize {
    let scaled = PROBE_N as f64 * (threads.max(1) as f64).cbrt();
    let n = ((scaled / 8.0).round() * 8.0) as usize;
    n.min(order.max(1) as usize)
}

/// The engine a case runs on, and why it was picked. `Auto` measures each engine present: the
/// best of three multiplies in T (the case's precision) of the case's order, at most
/// [`probe_order`] (after one unmeasured), on the case's threads, engine after engine with a
/// pause between them (`PROBE_SETTLE`); the fastest multiply wins. A library that does not
/// open, or lacks T's GEMM, is left out, and said so.
pub(crate) fn resolve<T: BlasElement>(
    solver: Solver,
    order: u64,
    threads: usize,
    pin: bool,
) -> Result<(DenseEngine, String)> {
    if let Solver::Fixed(engine) = solver {
        return Ok((engine, forced_text(engine)));
    }
    let engines = blas::present();
    if engines.len() == 1 {
        return Ok((
            DenseEngine::Builtin,
            "auto: no BLAS library installed".into(),
        ));
    }
    let n = probe_order(order, threads);
    let mut rng = crate::rng::Rng::new(99);
    let a: Vec<T> = random_matrix(n, &mut rng);
    let b: Vec<T> = random_matrix(n, &mut rng);
    let (opened, left_out) = open_each::<T>(engines);
    let rates = measure(&opened, n, (&a, &b), threads, pin)?;
    let (engine, _) = rates
        .iter()
        .copied()
        .fold((DenseEngine::Builtin, f64::MIN), |best, e| {
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

/// The engines that open and have T's GEMM, each with its library (`None`: the built-in
/// engine); and why each of the others was left out.
fn open_each<T: BlasElement>(
    engines: Vec<DenseEngine>,
) -> (Vec<(DenseEngine, Option<&'static Blas>)>, Vec<String>) {
    let mut opened = Vec::new();
    let mut left_out = Vec::new();
    for engine in engines {
        match open(engine).and_then(|library| {
            if let Some(blas) = library {
                blas.require::<T>()?;
            }
            Ok(library)
        }) {
            Ok(library) => opened.push((engine, library)),
            Err(e) => left_out.push(format!("{e:#}")),
        }
    }
    (opened, left_out)
}

/// Each engine's best rate, GFLOP/s, multiplying A and B (n × n) on `threads`.
///
/// Each engine multiplies four times in a row (the first unmeasured), after a pause in which
/// the previous library's worker threads stop spinning: OpenBLAS's spin for about 2^28 cycles
/// (0.1 s) after their last call, GNU OpenMP's too, and on 16 threads of 8 cores (SMT
/// siblings) those spinning threads halved the next library's rate. Taking turns multiply by
/// multiply read MKL at 180 GFLOP/s against its 812 in a case of its own.
fn measure<T: BlasElement>(
    opened: &[(DenseEngine, Option<&'static Blas>)],
    n: usize,
    (a, b): (&[T], &[T]),
    threads: usize,
    pin: bool,
) -> Result<Vec<(DenseEngine, f64)>> {
    let mut rates = Vec::new();
    let mut c = vec![T::ZERO; n * n];
    for (i, &(engine, library)) in opened.iter().enumerate() {
        if i > 0 && threads > 1 {
            std::thread::sleep(PROBE_SETTLE);
        }
        let mut best: f64 = 0.0;
        for round in 0..4 {
            let rate = run_on_threads("probe", library, threads, pin, || {
                let start = Instant::now();
                product::multiply(library, n, a, b, &mut c, threads)?;
                let rate = product::flops(n as u64) / start.elapsed().as_secs_f64() / 1e9;
                product::check(n, a, b, &c, 3)?;
                Ok(rate)
            })?;
            if round > 0 {
                best = best.max(rate);
            }
        }
        rates.push((engine, best));
    }
    Ok(rates)
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
