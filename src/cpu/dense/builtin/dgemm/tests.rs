//! The built-in GEMM against the portable kernel and a plain product: every kernel, edge and
//! blocking.
use super::*;
use crate::rng::Rng;

/// C = α·A·B + β·C by a triple loop in f64 from the T inputs, and the bound of each
/// entry's error in T: 2(k+2)ε·(Σ|aᵢₖbₖⱼ| + |cᵢⱼ|), ε of T.
#[allow(clippy::too_many_arguments)]
fn naive<T: Element>(
    (m, n, k): (usize, usize, usize),
    alpha: T,
    a: &[T],
    lda: usize,
    b: &[T],
    ldb: usize,
    beta: T,
    c: &[T],
    ldc: usize,
) -> (Vec<f64>, Vec<f64>) {
    let (alpha, beta) = (alpha.to_f64(), beta.to_f64());
    let mut want = vec![0.0; m * n];
    let mut bounds = vec![0.0; m * n];
    for j in 0..n {
        for i in 0..m {
            let (mut sum, mut mag) = (0.0, 0.0);
            for p in 0..k {
                let t = a[i + p * lda].to_f64() * b[p + j * ldb].to_f64();
                sum += t;
                mag += t.abs();
            }
            let old = if beta == 0.0 {
                0.0
            } else {
                c[i + j * ldc].to_f64()
            };
            want[i + j * m] = alpha * sum + beta * old;
            bounds[i + j * m] = 2.0 * (k as f64 + 2.0) * T::EPSILON * (mag + old.abs());
        }
    }
    (want, bounds)
}

fn kernels<T: Element>() -> Vec<MicroKernel> {
    [
        MicroKernel::Avx512,
        MicroKernel::Avx2Fma,
        MicroKernel::Portable,
    ]
    .into_iter()
    .filter(|k| {
        if !k.available() {
            eprintln!("skipped: this CPU cannot run the {} kernel", k.name::<T>());
        }
        k.available()
    })
    .collect()
}

/// One product at the given shape, leading dimensions `pad` above the rows, against the
/// naive loop; C's padding rows must be untouched.
#[allow(clippy::too_many_arguments)]
fn check_shape<T: Element>(
    d: &BuiltinGemm<T>,
    (m, n, k): (usize, usize, usize),
    pad: usize,
    alpha: f64,
    beta: f64,
    parallel: bool,
    seed: u64,
) {
    let (lda, ldb, ldc) = (m + pad, k + pad, m + pad);
    let (alpha, beta) = (T::from_f64(alpha), T::from_f64(beta));
    let mut rng = Rng::new(seed);
    let mut fill = |len: usize| {
        (0..len)
            .map(|_| T::from_f64(rng.centered_f64()))
            .collect::<Vec<T>>()
    };
    let a = fill(lda * k.max(1));
    let b = fill(ldb * n);
    let mut c = fill(ldc * n);
    if beta == T::ZERO {
        // β = 0 must not read C: NaNs there must not come out.
        for j in 0..n {
            c[j * ldc..j * ldc + m].fill(T::from_f64(f64::NAN));
        }
    }
    let (want, bounds) = naive((m, n, k), alpha, &a, lda, &b, ldb, beta, &c, ldc);
    let mut got = c.clone();
    d.gemm(
        (m, n, k),
        alpha,
        (&a, lda),
        (&b, ldb),
        beta,
        (&mut got, ldc),
        parallel,
    );
    let name = format!("{} {}", T::ROUTINE, d.kernel_name());
    for j in 0..n {
        for i in 0..ldc {
            let g = got[i + j * ldc].to_f64();
            if i >= m {
                assert!(
                    g.to_bits() == c[i + j * ldc].to_f64().to_bits(),
                    "{name}: padding C({i},{j}) written"
                );
                continue;
            }
            let w = want[i + j * m];
            assert!(
                (g - w).abs() <= bounds[i + j * m],
                "{name} m={m} n={n} k={k} pad={pad} α={alpha:?} β={beta:?}: C({i},{j}) = {g}, want {w}"
            );
        }
    }
}

fn odd_shapes<T: Element>() {
    let sizes = [1, 2, 7, 127, 129];
    for kernel in kernels::<T>() {
        // Small blocks so the loops around the kernel run many times at these sizes.
        let small = BuiltinGemm::<T>::with(
            kernel,
            Blocking {
                mc: 3 * kernel.mr::<T>(),
                kc: 24,
                nc: 5 * kernel.nr(),
            },
        );
        let mut seed = 0;
        for &m in &sizes {
            for &n in &sizes {
                for &k in &[1, 7, 129] {
                    seed += 1;
                    check_shape(&small, (m, n, k), 3, 1.0, 0.0, false, seed);
                }
            }
        }
        for (alpha, beta) in [(-1.0, 1.0), (0.5, -2.0), (2.0, 0.0)] {
            check_shape(&small, (129, 127, 67), 5, alpha, beta, true, 7);
        }
        check_shape(&small, (5, 3, 0), 1, 1.0, 0.5, false, 8);
    }
}

#[test]
fn every_kernel_matches_a_naive_product_at_odd_shapes() {
    odd_shapes::<f64>();
}

#[test]
fn every_sgemm_kernel_matches_a_naive_product_at_odd_shapes() {
    odd_shapes::<f32>();
}

fn host_blocking_shapes<T: Element>() {
    for kernel in kernels::<T>() {
        let d = BuiltinGemm::<T>::with(
            kernel,
            Blocking::from_sizes::<T>(32 << 10, 512 << 10, 0, kernel),
        );
        check_shape(&d, (1000, 1000, 1000), 0, 1.0, 0.0, true, 11);
        check_shape(&d, (1000, 37, 256), 9, -1.0, 1.0, false, 12);
        check_shape(&d, (33, 700, 300), 2, 1.0, 1.0, true, 13);
    }
}

#[test]
fn every_kernel_at_n_1000_and_rectangular_with_the_host_blocking() {
    host_blocking_shapes::<f64>();
}

#[test]
fn every_sgemm_kernel_at_n_1000_and_rectangular_with_the_host_blocking() {
    host_blocking_shapes::<f32>();
}

#[test]
fn one_and_two_threads_give_the_same_product() {
    let d = Dgemm::with(
        MicroKernel::Portable,
        Blocking {
            mc: 8,
            kc: 16,
            nc: 12,
        },
    );
    let (m, n, k) = (61, 45, 50);
    let mut rng = Rng::new(5);
    let mut fill = |len: usize| (0..len).map(|_| rng.centered_f64()).collect::<Vec<f64>>();
    let (a, b) = (fill(m * k), fill(k * n));
    let run = |threads: usize| {
        let mut c = vec![0.0; m * n];
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| d.gemm((m, n, k), 1.0, (&a, m), (&b, k), 0.0, (&mut c, m), true));
        c
    };
    assert_eq!(run(1), run(2), "each tile is computed the same way");
}

#[test]
fn the_row_blocks_cover_c_once_in_equal_shares_per_thread() {
    for (m, mc, mr, threads) in [
        (4000, 512, 16, 2),
        (4000, 512, 16, 1),
        (9743, 512, 16, 2),
        (1, 512, 16, 2),
        (37, 16, 8, 3),
        (100, 1000, 4, 8),
    ] {
        let blocks = row_blocks(m, mc, mr, threads);
        let mut next = 0;
        for &(first, rows) in &blocks {
            assert_eq!(first, next, "{m} rows: blocks are contiguous");
            assert!(
                rows <= mc.max(mr) && first % mr == 0,
                "{m} rows: {blocks:?}"
            );
            next = first + rows;
        }
        assert_eq!(next, m, "{m} rows: blocks cover C");
        if blocks.len() >= threads && m % mr == 0 {
            // Each thread's contiguous share of the blocks differs by at most one tile.
            let shares: Vec<usize> = blocks
                .chunks(blocks.len() / threads)
                .map(|s| s.iter().map(|b| b.1).sum())
                .collect();
            let (lo, hi) = (shares.iter().min().unwrap(), shares.iter().max().unwrap());
            assert!(hi - lo <= mr, "{m} rows on {threads} threads: {shares:?}");
        }
    }
    assert_eq!(row_blocks(4000, 512, 16, 2).len(), 8);
}

#[test]
fn the_self_check_passes_on_every_kernel_present() {
    for kernel in kernels::<f64>() {
        self_check::<f64>(kernel).unwrap();
        self_check::<f32>(kernel).unwrap();
    }
}

#[test]
fn the_blocking_follows_the_caches() {
    // Zen 3: 32 KiB L1d, 512 KiB L2, 32 MiB L3 over 8 cores.
    let b = Blocking::from_sizes::<f64>(32 << 10, 512 << 10, 4 << 20, MicroKernel::Avx2Fma);
    assert_eq!(b.kc, 336);
    assert_eq!(b.mc, 96);
    assert_eq!(b.nc, 780);
    // Sapphire Rapids: 48 KiB L1d, 2 MiB L2.
    let b = Blocking::from_sizes::<f64>(48 << 10, 2 << 20, 0, MicroKernel::Avx512);
    assert_eq!((b.kc, b.mc), (384, 336));
    assert_eq!(b.nc % 8, 0);
    assert!(b.kc * b.nc * 8 <= 4 * (2 << 20));
    // f32 on Zen 3: half the bytes per element, so KC reaches its cap of 512 and MC is a
    // multiple of the 16 rows of the f32 tile.
    let s = Blocking::from_sizes::<f32>(32 << 10, 512 << 10, 4 << 20, MicroKernel::Avx2Fma);
    assert_eq!((s.kc, s.mc), (512, 128));
    assert_eq!(s.nc % 6, 0);
    assert!(s.kc * s.nc * 4 <= 2 << 20);
}

#[test]
fn the_kernel_names_and_parse() {
    assert_eq!(MicroKernel::Avx2Fma.name::<f64>(), "avx2-fma 8x6");
    assert_eq!(MicroKernel::Avx512.name::<f64>(), "avx512 24x8");
    assert_eq!(MicroKernel::Avx2Fma.name::<f32>(), "avx2-fma 16x6");
    assert_eq!(MicroKernel::Avx512.name::<f32>(), "avx512 48x8");
    assert_eq!(MicroKernel::Portable.name::<f32>(), "portable 4x4");
    assert_eq!(MicroKernel::parse("avx2"), Some(MicroKernel::Avx2Fma));
    assert_eq!(MicroKernel::parse("sse"), None);
}

/// The table of [`MicroKernel::mr`] and [`MicroKernel::nr`] that packs the panels must be the tile
/// each instantiation of the macro computes.
#[test]
fn the_kernel_table_is_the_tile_each_macro_instance_computes() {
    // A kernel, then the (MR, NR) of its f64 and f32 instances.
    type Tile = (usize, usize);
    let pairs: Vec<(MicroKernel, Tile, Tile)> = vec![
        #[cfg(target_arch = "x86_64")]
        (
            MicroKernel::Avx512,
            (micro::avx512::double::MR, micro::avx512::double::NR),
            (micro::avx512::single::MR, micro::avx512::single::NR),
        ),
        #[cfg(target_arch = "x86_64")]
        (
            MicroKernel::Avx2Fma,
            (micro::avx2::double::MR, micro::avx2::double::NR),
            (micro::avx2::single::MR, micro::avx2::single::NR),
        ),
        (
            MicroKernel::Portable,
            (micro::portable::double::MR, micro::portable::double::NR),
            (micro::portable::single::MR, micro::portable::single::NR),
        ),
    ];
    for (kernel, f64_tile, f32_tile) in pairs {
        assert_eq!(f64_tile, (kernel.mr::<f64>(), kernel.nr()), "{kernel:?}");
        assert_eq!(f32_tile, (kernel.mr::<f32>(), kernel.nr()), "{kernel:?}");
    }
}
