//! The 512-bit kernels beyond element-wise arithmetic: the VNNI and BF16 dot products, the f16
//! FMA with its fold into integer totals, and the table of them with the AMX tiles.

use std::arch::asm;
use std::arch::x86_64::*;
use std::hint::black_box;

use super::amx::{tile_bf16, tile_i8};
use super::{Kernel, special, sum};
use crate::cpu::kernels::{F16_BLOCK, RunFn};
use crate::peak::{Form, Precision};

/// A kernel applying the dot product `$tmpl` (operands {a}, {x}, {y}) to `$n` accumulators of
/// `$lanes` 32-bit lanes of `$e`; `x` holds `$x` and `y` holds `$y` in every input element.
macro_rules! dot_fn {
    ($name:ident, $feat:literal, $in:ty, $inputs:literal, $x:expr, $y:expr, $e:ty, $lanes:literal,
     $n:literal, $tmpl:literal, [$($i:tt)*]) => {
        #[target_feature(enable = $feat)]
        fn $name(iters: u64) -> u64 {
            // SAFETY: same size (64 bytes), every bit pattern valid.
            let x: __m512i = unsafe { std::mem::transmute([black_box($x as $in); $inputs]) };
            // SAFETY: as above.
            let y: __m512i = unsafe { std::mem::transmute([black_box($y as $in); $inputs]) };
            // SAFETY: as above.
            let mut acc: [__m512i; $n] = unsafe { std::mem::transmute([[0 as $e; $lanes]; $n]) };
            for _ in 0..iters {
                for _ in 0..crate::cpu::kernels::UNROLL {
                    $(
                        // SAFETY: register-only arithmetic on 512-bit values.
                        unsafe {
                            asm!($tmpl, a = inout(zmm_reg) acc[$i], x = in(zmm_reg) x, y = in(zmm_reg) y, options(nomem, nostack));
                        }
                    )*
                }
            }
            lane_sum!(acc, $e, $lanes, $n)
        }
    };
}

/// An FMA kernel whose accumulators count exactly only to a few thousand: every
/// [`F16_BLOCK`] iterations each accumulator is converted to integers (`$cvt`), added into
/// one integer total (`$add`) and cleared. `$one` is the bit pattern of 1.0 in `$in`.
macro_rules! folded_fma_fn {
    ($name:ident, $feat:literal, $in:ty, $inputs:literal, $one:expr, $e:ty, $lanes:literal,
     $fma:literal, $cvt:literal, $add:literal, [$($i:tt)*]) => {
        #[target_feature(enable = $feat)]
        fn $name(iters: u64) -> u64 {
            // SAFETY: same size (64 bytes), every bit pattern valid.
            let one: __m512i = unsafe { std::mem::transmute([black_box($one as $in); $inputs]) };
            let mut acc = [_mm512_setzero_si512(); 16];
            let mut total = _mm512_setzero_si512();
            let mut left = iters;
            while left > 0 {
                let block = left.min(F16_BLOCK);
                for _ in 0..block {
                    for _ in 0..crate::cpu::kernels::UNROLL {
                        $(
                            // SAFETY: register-only arithmetic on 512-bit values.
                            unsafe {
                                asm!($fma, a = inout(zmm_reg) acc[$i], x = in(zmm_reg) one, options(nomem, nostack));
                            }
                        )*
                    }
                }
                $(
                    // SAFETY: register-only conversion and integer add.
                    unsafe {
                        asm!($cvt, $add, "vpxord {a}, {a}, {a}", a = inout(zmm_reg) acc[$i], t = inout(zmm_reg) total, options(nomem, nostack));
                    }
                )*
                left -= block;
            }
            lane_sum!([total], $e, $lanes, 1)
        }
    };
}

dot_fn!(dot_i8_512, "avx512bw,avx512vnni", u8, 64, 1, 1, u32, 16, 16, "vpdpbusd {a}, {x}, {y}", [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]);
dot_fn!(dot_i16_512, "avx512bw,avx512vnni", u16, 32, 1, 1, u32, 16, 16, "vpdpwssd {a}, {x}, {y}", [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]);
// bf16 1.0 (0x3F80) × 0.5 (0x3F00), two pairs per lane: each f32 lane gains exactly 1.
dot_fn!(dot_bf16_512, "avx512bf16", u16, 32, 0x3F80, 0x3F00, f32, 16, 16, "vdpbf16ps {a}, {x}, {y}", [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]);
// f16 1.0 is 0x3C00.
folded_fma_fn!(fma_f16_512, "avx512bw,avx512fp16", u16, 32, 0x3C00, u16, 32,
    "vfmadd231ph {a}, {x}, {x}", "vcvtph2w {a}, {a}", "vpaddw {t}, {t}, {a}",
    [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]);
// The same fold in f32, so that the fold's closed form is tested on CPUs without FP16.
#[cfg(test)]
folded_fma_fn!(folded_f32_512, "avx512f", u32, 16, 0x3F80_0000, u32, 16,
    "vfmadd231ps {a}, {x}, {x}", "vcvtps2dq {a}, {a}", "vpaddd {t}, {t}, {a}",
    [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]);

/// Kernels beyond the element-wise arithmetic (16 accumulators of 512 bits, or 4 tiles).
pub(crate) static SPECIAL: &[Kernel] = &[
    special(
        Precision::I8,
        Form::Dot,
        false,
        &["avx512bw", "avx512vnni"],
        "vpdpbusd zmm",
        16,
        64,
        sum(16, 16, 4, 32),
        entry!(dot_i8_512),
    ),
    special(
        Precision::I16,
        Form::Dot,
        false,
        &["avx512bw", "avx512vnni"],
        "vpdpwssd zmm",
        16,
        32,
        sum(16, 16, 2, 32),
        entry!(dot_i16_512),
    ),
    special(
        Precision::Bf16,
        Form::Dot,
        false,
        &["avx512bf16"],
        "vdpbf16ps zmm",
        16,
        32,
        sum(16, 16, 1, 0),
        entry!(dot_bf16_512),
    ),
    special(
        Precision::F16,
        Form::Arith,
        true,
        &["avx512bw", "avx512fp16"],
        "vfmadd231ph zmm",
        16,
        32,
        sum(1, 32, 16, 16),
        entry!(fma_f16_512),
    ),
    special(
        Precision::I8,
        Form::Tile,
        false,
        &["amx-int8"],
        "tdpbssd tmm",
        4,
        crate::peak::tile_multiply_adds(Precision::I8),
        sum(4, 256, 64, 32),
        tile_i8 as RunFn,
    ),
    special(
        Precision::Bf16,
        Form::Tile,
        false,
        &["amx-bf16"],
        "tdpbf16ps tmm",
        4,
        crate::peak::tile_multiply_adds(Precision::Bf16),
        sum(4, 256, 1, 0),
        tile_bf16 as RunFn,
    ),
];

/// The fold of the f16 kernel, in f32, for the tests.
#[cfg(test)]
pub(crate) static FOLDED_F32: Kernel = special(
    Precision::F32,
    Form::Arith,
    true,
    &["avx512f"],
    "vfmadd231ps zmm (folded)",
    16,
    16,
    sum(1, 16, 16, 32),
    entry!(folded_f32_512),
);
