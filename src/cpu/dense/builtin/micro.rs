//! The micro-kernels of the built-in GEMM: each computes one tile of C, MR rows by NR columns,
//! from a packed panel of A (MR rows) and one of B (NR columns) over their whole depth.
//!
//! One macro, `micro_kernel!`, is instantiated per instruction set and element, so the AVX2
//! tests exercise the code the AVX-512 kernel is made of. The tile is MV vectors tall
//! (MR = MV · lanes rows) and NR columns wide, held in MV·NR accumulators; each step of k loads
//! MV vectors of the packed A column, broadcasts each of the NR packed B values and issues
//! MV·NR FMAs, unrolled by 4, prefetching the C tile before the loop (the A panel streams from
//! L2 by the hardware prefetcher: a software prefetch 8 steps ahead measured slower on Zen 3 and
//! on a Golden Cove server core).
//!
//! The AVX-512 tile is 3 vectors by 8 columns rather than 2 by 12: each step loads 11 values for
//! 24 FMAs instead of 14. On a Golden Cove server core, loads beside 512-bit FMAs cost FMA
//! throughput (24 FMA chains kept 0.99–1.00 of their rate beside 8 loads a turn, 0.94–0.99
//! beside 11 and 0.92–0.96 beside 14), and the 24 × 8 tile read 0.81–0.82 of the chains' rate
//! with its A panels streamed from L2 against 0.77–0.78 for 16 × 12 (`bench/gemm-tile.c`, two
//! runs; the whole DGEMM in docs/cpu.md). AMD's AOCL-BLIS runs a tile of about the same load
//! share on Zen 4 (its `zen4` DGEMM kernel is 32 × 6: 10 loads for 24 FMAs).
//! An f32 kernel keeps the f64 kernel's registers: the same MV and NR, twice the lanes, so
//! twice the rows.
//!
//! | kernel | f64 MR × NR | f32 MR × NR | accumulators |
//! |---|---|---|---|
//! | `avx512` | 24 × 8 | 48 × 8 | 24 of 32 zmm |
//! | `avx2-fma` | 8 × 6 | 16 × 6 | 12 of 16 ymm |
//! | `portable` | 4 × 4 | 4 × 4 | 16 scalars |

use std::ops::{Add, Mul};

/// One tile: C[..mm, ..nn] (at `c`, leading dimension ldc) = α·Ap·Bp + β·C over `k` packed
/// steps. Unsafe: the pointers must cover the packed panels and the tile, and the CPU must have
/// the kernel's instructions.
pub(super) type TileFn<T> = unsafe fn(usize, *const T, *const T, *mut T, usize, T, T, usize, usize);

/// The micro-kernel of one instruction set and element: `$mv` vectors of `$lanes` elements
/// tall, `$nr` columns wide; the vector operations are passed in, so every kernel is this same
/// code.
macro_rules! micro_kernel {
    (
        $(#[$attr:meta])*
        element: $t:ty,
        vector: $v:ty,
        lanes: $lanes:literal,
        mv: $mv:literal,
        nr: $nr:literal,
        zero: $zero:path,
        load: $load:path,
        store: $store:path,
        splat: $splat:path,
        fma: $fma:path,
        mul: $mul:path $(,)?
    ) => {
        pub(in crate::cpu::dense::builtin) const MR: usize = $mv * $lanes;
        pub(in crate::cpu::dense::builtin) const NR: usize = $nr;

        /// One tile, as [`TileFn`](crate::cpu::dense::builtin::micro::TileFn) states.
        ///
        /// # Safety
        /// `a` holds k × MR values, `b` k × NR, `c` an mm × nn tile at leading dimension ldc
        /// (mm ≤ MR, nn ≤ NR), and the CPU has the instructions this kernel was built for.
        $(#[$attr])*
        #[allow(clippy::too_many_arguments)]
        pub(crate) unsafe fn tile(
            k: usize,
            a: *const $t,
            b: *const $t,
            c: *mut $t,
            ldc: usize,
            alpha: $t,
            beta: $t,
            mm: usize,
            nn: usize,
        ) {
            // SAFETY: the caller's contract: every pointer offset below stays inside the
            // packed panels (p < k) or the tile (i < mm, j < nn, or the full MR × NR when the
            // tile is full).
            unsafe {
                let mut acc: [[$v; $mv]; $nr] = [[$zero(); $mv]; $nr];
                if mm == MR && nn == NR {
                    // Every line a column of the tile touches: MR values are 128 bytes, so
                    // three lines where C is not 64-byte aligned (a matrix from the allocator
                    // starts 16 bytes into a line), and a middle line left out stalled the
                    // tile's first read of C on memory.
                    for j in 0..NR {
                        let column = c.add(j * ldc);
                        for i in (0..MR).step_by(64 / std::mem::size_of::<$t>()) {
                            super::super::prefetch(column.add(i));
                        }
                        super::super::prefetch(column.add(MR - 1));
                    }
                }
                let (mut ap, mut bp) = (a, b);
                macro_rules! step {
                    () => {{
                        let mut av: [$v; $mv] = [$zero(); $mv];
                        for v in 0..$mv {
                            av[v] = $load(ap.add(v * $lanes));
                        }
                        for j in 0..NR {
                            let bj = $splat(*bp.add(j));
                            for v in 0..$mv {
                                acc[j][v] = $fma(av[v], bj, acc[j][v]);
                            }
                        }
                        ap = ap.add(MR);
                        bp = bp.add(NR);
                    }};
                }
                let mut left = k;
                while left >= 4 {
                    step!();
                    step!();
                    step!();
                    step!();
                    left -= 4;
                }
                while left > 0 {
                    step!();
                    left -= 1;
                }
                if mm == MR && nn == NR {
                    let (valpha, vbeta) = ($splat(alpha), $splat(beta));
                    for j in 0..NR {
                        for v in 0..$mv {
                            let dst = c.add(j * ldc + v * $lanes);
                            let sum = if beta == 0.0 {
                                $mul(acc[j][v], valpha)
                            } else if beta == 1.0 {
                                $fma(acc[j][v], valpha, $load(dst))
                            } else {
                                $fma(acc[j][v], valpha, $mul($load(dst), vbeta))
                            };
                            $store(dst, sum);
                        }
                    }
                } else {
                    let mut out: [$t; MR * NR] = [0.0; MR * NR];
                    for j in 0..NR {
                        for v in 0..$mv {
                            $store(out.as_mut_ptr().add(j * MR + v * $lanes), acc[j][v]);
                        }
                    }
                    super::super::write_edge(&out, MR, c, ldc, alpha, beta, mm, nn);
                }
            }
        }
    };
}

/// Writes a tile at the edge of C, whose accumulators the kernel stored in `out` (column j at
/// j · `mr`): C[..mm, ..nn] = α·out + β·C, reading no C when β = 0.
///
/// # Safety
/// `c` holds an mm × nn tile at leading dimension ldc, and `out` mr × nn values.
#[allow(clippy::too_many_arguments)]
unsafe fn write_edge<T>(
    out: &[T],
    mr: usize,
    c: *mut T,
    ldc: usize,
    alpha: T,
    beta: T,
    mm: usize,
    nn: usize,
) where
    T: Copy + PartialEq + Default + Add<Output = T> + Mul<Output = T>,
{
    for j in 0..nn {
        for i in 0..mm {
            // SAFETY: i < mm and j < nn: inside the tile the caller vouched for.
            unsafe {
                let dst = c.add(j * ldc + i);
                let sum = alpha * out[j * mr + i];
                *dst = if beta == T::default() {
                    sum
                } else {
                    sum + beta * *dst
                };
            }
        }
    }
}

/// Fetches the line at `p` into L1 (the SIMD kernels' prefetch of C).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn prefetch<T>(p: *const T) {
    // SAFETY: a prefetch is a hint that never faults, and x86-64 always has SSE.
    unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8) }
}

/// No prefetch where the ISA has none peakbench uses.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub(super) fn prefetch<T>(_: *const T) {}

/// Fetches the line at `p` into L2.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn prefetch_l2(p: *const u8) {
    // SAFETY: a prefetch is a hint that never faults, and x86-64 always has SSE.
    unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(p as *const i8) }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub(super) fn prefetch_l2(_: *const u8) {}

/// The AVX-512F kernels: 24 × 8 f64 or 48 × 8 f32, 24 zmm accumulators.
#[cfg(target_arch = "x86_64")]
pub(super) mod avx512 {
    pub(crate) mod double {
        use std::arch::x86_64::*;

        micro_kernel! {
            #[target_feature(enable = "avx512f")]
            element: f64,
            vector: __m512d,
            lanes: 8,
            mv: 3,
            nr: 8,
            zero: _mm512_setzero_pd,
            load: _mm512_loadu_pd,
            store: _mm512_storeu_pd,
            splat: _mm512_set1_pd,
            fma: _mm512_fmadd_pd,
            mul: _mm512_mul_pd,
        }
    }

    pub(crate) mod single {
        use std::arch::x86_64::*;

        micro_kernel! {
            #[target_feature(enable = "avx512f")]
            element: f32,
            vector: __m512,
            lanes: 16,
            mv: 3,
            nr: 8,
            zero: _mm512_setzero_ps,
            load: _mm512_loadu_ps,
            store: _mm512_storeu_ps,
            splat: _mm512_set1_ps,
            fma: _mm512_fmadd_ps,
            mul: _mm512_mul_ps,
        }
    }
}

/// The AVX2 + FMA kernels: 8 × 6 f64 or 16 × 6 f32, 12 ymm accumulators.
#[cfg(target_arch = "x86_64")]
pub(super) mod avx2 {
    pub(crate) mod double {
        use std::arch::x86_64::*;

        micro_kernel! {
            #[target_feature(enable = "avx2,fma")]
            element: f64,
            vector: __m256d,
            lanes: 4,
            mv: 2,
            nr: 6,
            zero: _mm256_setzero_pd,
            load: _mm256_loadu_pd,
            store: _mm256_storeu_pd,
            splat: _mm256_set1_pd,
            fma: _mm256_fmadd_pd,
            mul: _mm256_mul_pd,
        }
    }

    pub(crate) mod single {
        use std::arch::x86_64::*;

        micro_kernel! {
            #[target_feature(enable = "avx2,fma")]
            element: f32,
            vector: __m256,
            lanes: 8,
            mv: 2,
            nr: 6,
            zero: _mm256_setzero_ps,
            load: _mm256_loadu_ps,
            store: _mm256_storeu_ps,
            splat: _mm256_set1_ps,
            fma: _mm256_fmadd_ps,
            mul: _mm256_mul_ps,
        }
    }
}

/// The portable kernels: 4 × 4 scalars, the same code with the element as the vector.
pub(super) mod portable {
    use std::ops::{Add, Mul};

    #[inline(always)]
    fn zero<T: Default>() -> T {
        T::default()
    }
    #[inline(always)]
    unsafe fn load<T: Copy>(p: *const T) -> T {
        // SAFETY: the kernel's caller guarantees p is inside a panel or the tile.
        unsafe { *p }
    }
    #[inline(always)]
    unsafe fn store<T>(p: *mut T, v: T) {
        // SAFETY: as for load.
        unsafe { *p = v }
    }
    #[inline(always)]
    fn splat<T>(x: T) -> T {
        x
    }
    #[inline(always)]
    fn fma<T: Add<Output = T> + Mul<Output = T>>(a: T, b: T, c: T) -> T {
        a * b + c
    }
    #[inline(always)]
    fn mul<T: Mul<Output = T>>(a: T, b: T) -> T {
        a * b
    }

    pub(crate) mod double {
        use super::{fma, load, mul, splat, store, zero};

        micro_kernel! {
            element: f64,
            vector: f64,
            lanes: 1,
            mv: 4,
            nr: 4,
            zero: zero::<f64>,
            load: load::<f64>,
            store: store::<f64>,
            splat: splat::<f64>,
            fma: fma::<f64>,
            mul: mul::<f64>,
        }
    }

    pub(crate) mod single {
        use super::{fma, load, mul, splat, store, zero};

        micro_kernel! {
            element: f32,
            vector: f32,
            lanes: 1,
            mv: 4,
            nr: 4,
            zero: zero::<f32>,
            load: load::<f32>,
            store: store::<f32>,
            splat: splat::<f32>,
            fma: fma::<f32>,
            mul: mul::<f32>,
        }
    }
}
