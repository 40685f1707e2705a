//! FLOPs per cycle of the dense engines (DGEMM, SGEMM and the Linpack LU), by CPU time, against
//! the FMA peak per core of the element type (f64, or f32 for SGEMM).
//!
//! On a shared machine the wall time also counts the time a thread waits for a core, so this
//! harness divides each call's FLOPs by the CPU time it took (the process's CPU time, which
//! sums every thread's, over the threads) and by the clock measured by peakbench's add-chain
//! probe: FLOPs per core-cycle, against 2 × lanes × FMA units. Counting as `cpu gemm` (2n³)
//! and `cpu linpack` (HPL's count) do. The best of `--reps` calls per engine is printed.
//!
//!     cargo run --release --example dense_cycles -- [N_GEMM] [N_LU] [THREADS] [REPS]

use std::time::Instant;

use peakbench::cpu::dense::builtin::{dgemm, lu};
use peakbench::cpu::dense::case::Operation as _;
use peakbench::cpu::dense::engine::blas::{self, Vendor};
use peakbench::cpu::dense::engine::product;
use peakbench::cpu::dense::linpack::{self, Linpack};
use peakbench::peak::{Isa, Precision};
use peakbench::sysinfo::clock::measure_ghz;

fn process_cpu_s() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: t is a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// (FLOPs per core-cycle, GFLOP/s by the wall clock) of the best of `reps` calls.
fn best(reps: usize, threads: usize, flops: f64, mut call: impl FnMut()) -> (f64, f64) {
    let ghz = measure_ghz().expect("x86-64");
    let (mut per_cycle, mut wall): (f64, f64) = (0.0, 0.0);
    for _ in 0..reps {
        let (cpu, start) = (process_cpu_s(), Instant::now());
        call();
        let seconds = process_cpu_s() - cpu;
        per_cycle =
            per_cycle.max(flops / (seconds / threads as f64) / (ghz * 1e9) / threads as f64);
        wall = wall.max(flops / start.elapsed().as_secs_f64() / 1e9);
    }
    (per_cycle, wall)
}

fn main() {
    let arg = |i: usize, default: usize| {
        std::env::args()
            .nth(i)
            .map_or(default, |s| s.parse().expect("a number"))
    };
    let (ng, nl, threads, reps) = (arg(1, 4000), arg(2, 4000), arg(3, 1), arg(4, 3));
    let info = peakbench::sysinfo::collect();
    dgemm::Dgemm::global(&info.cpu.caches).expect("a dgemm kernel");
    dgemm::Sgemm::global(&info.cpu.caches).expect("an sgemm kernel");
    let peaks = peakbench::peak::Peaks::compute(&info, &Default::default(), &Default::default());
    let widest = *peaks.cpu.isas.last().unwrap_or(&Isa::Scalar);
    let peak = peaks
        .cpu
        .row(Precision::F64, widest, true)
        .and_then(|row| row.per_cycle_per_core)
        .expect("an f64 FMA peak row");
    let peak32 = peaks
        .cpu
        .row(Precision::F32, widest, true)
        .and_then(|row| row.per_cycle_per_core)
        .expect("an f32 FMA peak row");
    println!(
        "f64 FMA peak: {peak} FLOP/cycle/core ({}); {threads} threads",
        widest.name()
    );
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let mut rng = peakbench::rng::Rng::new(1);
    let a: Vec<f64> = (0..ng * ng).map(|_| rng.centered_f64()).collect();
    let b: Vec<f64> = (0..ng * ng).map(|_| rng.centered_f64()).collect();
    let mut c = vec![0.0; ng * ng];
    let mut libraries = vec![None];
    for vendor in Vendor::ALL {
        if let Ok(library) = blas::open(vendor) {
            libraries.push(Some(library));
        }
    }
    let (cycle, wall) = pool.install(|| {
        best(reps, threads, product::flops(ng as u64), || {
            product::faer_multiply(ng, &a, &b, &mut c, threads)
        })
    });
    product::check(ng, &a, &b, &c, 1).expect("a right product");
    println!(
        "dgemm n={ng} {:<40} {:.1} % of peak per CPU-second ({wall:.1} GFLOP/s wall)",
        "faer matmul",
        100.0 * cycle / peak
    );
    for library in &libraries {
        let name = library.map_or(
            format!("builtin ({})", dgemm::Dgemm::current().describe()),
            |l| l.describe(),
        );
        let (cycle, wall) = pool.install(|| {
            let mut run = || {
                best(reps, threads, product::flops(ng as u64), || {
                    product::multiply(*library, ng, &a, &b, &mut c, threads).unwrap()
                })
            };
            match library {
                Some(l) => l.with_threads(threads, run),
                None => run(),
            }
        });
        product::check(ng, &a, &b, &c, 1).expect("a right product");
        println!(
            "dgemm n={ng} {name:<40} {:.1} % of peak per CPU-second ({wall:.1} GFLOP/s wall)",
            100.0 * cycle / peak
        );
    }
    let (a32, b32): (Vec<f32>, Vec<f32>) = (
        a.iter().map(|&x| x as f32).collect(),
        b.iter().map(|&x| x as f32).collect(),
    );
    let mut c32 = vec![0.0f32; ng * ng];
    for library in &libraries {
        let name = library.map_or(
            format!("builtin ({})", dgemm::Sgemm::current().describe()),
            |l| l.describe(),
        );
        let (cycle, wall) = pool.install(|| {
            let mut run = || {
                best(reps, threads, product::flops(ng as u64), || {
                    product::multiply(*library, ng, &a32, &b32, &mut c32, threads).unwrap()
                })
            };
            match library {
                Some(l) => l.with_threads(threads, run),
                None => run(),
            }
        });
        product::check(ng, &a32, &b32, &c32, 1).expect("a right product");
        println!(
            "sgemm n={ng} {name:<40} {:.1} % of the f32 peak per CPU-second ({wall:.1} GFLOP/s wall)",
            100.0 * cycle / peak32
        );
    }
    let (sa, sb) = linpack::random_system(nl, 3);
    let mut factors = vec![0.0; nl * nl];
    let mut x = vec![0.0; nl];
    let mut piv = vec![0; nl];
    let mut ipiv = vec![0; nl];
    for library in &libraries {
        let name = library.map_or(lu::engine_text::<f64>(lu::NB), |l| {
            format!("{} dgetrf", l.describe())
        });
        let (cycle, wall) = pool.install(|| {
            let mut run = || {
                best(reps, threads, Linpack::flops(nl as u64), || {
                    for j in 0..nl {
                        factors[j * nl..(j + 1) * nl].copy_from_slice(sa.col_as_slice(j));
                    }
                    x.copy_from_slice(sb.col_as_slice(0));
                    match library {
                        Some(l) => l.solve(nl, &mut factors, &mut x, &mut ipiv).unwrap(),
                        None => {
                            lu::factor_and_solve(&mut factors, nl, &mut x, &mut piv, lu::NB)
                                .unwrap();
                        }
                    }
                })
            };
            match library {
                Some(l) => l.with_threads(threads, run),
                None => run(),
            }
        });
        let xm = faer::Mat::from_fn(nl, 1, |i, _| x[i]);
        let residual = linpack::scaled_residual(&sa, &xm, &sb);
        assert!(
            residual < linpack::RESIDUAL_THRESHOLD,
            "residual {residual}"
        );
        println!(
            "LU n={nl} {name:<40} {:.1} % of peak per CPU-second ({wall:.1} GFLOP/s wall, residual {residual:.3})",
            100.0 * cycle / peak
        );
    }
}
