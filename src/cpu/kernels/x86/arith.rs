//! The element-wise kernels of every ISA: adds and FMAs (or interleaved adds and multiplies)
//! of f64 and f32, and integer adds of 8 to 64 bits, at 512, 256 and 128 bit and scalar.

use std::arch::asm;
use std::arch::x86_64::*;
use std::hint::black_box;

use super::{Kernel, k};
use crate::cpu::kernels::RunFn;
use crate::peak::{Isa, Precision};

/// A kernel applying `$tmpl` (operands {a}, {x}[, {y}]) to `$n` accumulators.
macro_rules! kernel_fn {
    ($name:ident, $feat:literal, $class:ident, $v:ty, $e:ty, $lanes:literal, $n:literal,
     $tmpl:literal, [$($i:tt)*]) => {
        #[target_feature(enable = $feat)]
        #[allow(unnecessary_transmutes)] // scalar kernels use the same macro as vectors
        fn $name(iters: u64) -> u64 {
            // SAFETY: same size, every bit pattern valid.
            let one: $v = unsafe { std::mem::transmute([black_box(1 as $e); $lanes]) };
            // SAFETY: same size, every bit pattern valid.
            let mut acc: [$v; $n] = unsafe { std::mem::transmute([[0 as $e; $lanes]; $n]) };
            for _ in 0..iters {
                for _ in 0..crate::cpu::kernels::UNROLL {
                    $(
                        // SAFETY: register-only arithmetic on values of the declared type.
                        unsafe {
                            asm!($tmpl, a = inout($class) acc[$i], x = in($class) one, options(nomem, nostack));
                        }
                    )*
                }
            }
            lane_sum!(acc, $e, $lanes, $n)
        }
    };
}

/// A kernel interleaving adds (`$add`) and multiplies (`$mul`) on separate accumulators.
macro_rules! mixed_fn {
    ($name:ident, $feat:literal, $class:ident, $v:ty, $e:ty, $lanes:literal, $half:literal,
     $add:literal, $mul:literal, [$($i:tt)*]) => {
        #[target_feature(enable = $feat)]
        #[allow(unnecessary_transmutes)] // scalar kernels use the same macro as vectors
        fn $name(iters: u64) -> u64 {
            // SAFETY: same size, every bit pattern valid.
            let one: $v = unsafe { std::mem::transmute([black_box(1 as $e); $lanes]) };
            // SAFETY: same size, every bit pattern valid.
            let mut sums: [$v; $half] = unsafe { std::mem::transmute([[0 as $e; $lanes]; $half]) };
            // SAFETY: as above.
            let mut products: [$v; $half] = unsafe { std::mem::transmute([[1 as $e; $lanes]; $half]) };
            for _ in 0..iters {
                for _ in 0..crate::cpu::kernels::UNROLL {
                    $(
                        // SAFETY: register-only arithmetic on values of the declared type.
                        unsafe {
                            asm!($add, a = inout($class) sums[$i], x = in($class) one, options(nomem, nostack));
                            asm!($mul, a = inout($class) products[$i], x = in($class) one, options(nomem, nostack));
                        }
                    )*
                }
            }
            lane_sum!(sums, $e, $lanes, $half).wrapping_add(lane_sum!(products, $e, $lanes, $half))
        }
    };
}

/// A kernel interleaving adds and multiplies on 16 registers without a constant: each product
/// squares itself (1.0 stays 1.0) and each sum adds its product. With 16 vector registers (no
/// AVX-512) this holds 8 chains of each kind where a register kept for the constant left 6;
/// 6 chains could not cover two pipes of a 4-cycle add or multiply (Zen 5's guest read these
/// kernels at 0.73-0.76 of their peak below 512 bits, and 0.90-0.95 at 512 with 8 chains).
macro_rules! squared_fn {
    ($name:ident, $feat:literal, $class:ident, $v:ty, $e:ty, $lanes:literal,
     $add:literal, $mul:literal, [$($i:tt)*]) => {
        #[target_feature(enable = $feat)]
        #[allow(unnecessary_transmutes)] // scalar kernels use the same macro as vectors
        fn $name(iters: u64) -> u64 {
            // SAFETY: same size, every bit pattern valid.
            let mut sums: [$v; 8] = unsafe { std::mem::transmute([[0 as $e; $lanes]; 8]) };
            // The products start at (and stay) one.
            let ones = [[black_box(1 as $e); $lanes]; 8];
            // SAFETY: same size, every bit pattern valid.
            let mut products: [$v; 8] = unsafe { std::mem::transmute(ones) };
            for _ in 0..iters {
                for _ in 0..crate::cpu::kernels::UNROLL {
                    $(
                        // SAFETY: register-only arithmetic on values of the declared type.
                        unsafe {
                            asm!($add, a = inout($class) sums[$i], x = in($class) products[$i], options(nomem, nostack));
                            asm!($mul, a = inout($class) products[$i], options(nomem, nostack));
                        }
                    )*
                }
            }
            lane_sum!(sums, $e, $lanes, 8).wrapping_add(lane_sum!(products, $e, $lanes, 8))
        }
    };
}

/// Scalar integer adds of a register holding 1 on 12 accumulators: with the constant and the
/// loop's counter, 14 of the 15 general registers. 8 chains, as the vector kernels have, are too
/// few: a core assigns each add its ALU when it enters the scheduler, not when it is ready, and
/// with 8 chains on 5 ALUs a Golden Cove server core issued 4.55 adds a cycle (0.91), with 12
/// chains 4.83-4.88 (`bench/int-adds.c`). The constant is not an immediate: that core's
/// renamer executes a 64-bit add of a small immediate itself, and read 5.5 adds a cycle.
macro_rules! scalar_add_fn {
    ($name:ident, $class:ident, $e:ty, $tmpl:literal, [$($i:tt)*]) => {
        #[target_feature(enable = "sse2")]
        fn $name(iters: u64) -> u64 {
            let one: $e = black_box(1);
            let mut acc: [$e; 12] = [black_box(0 as $e); 12];
            for _ in 0..iters {
                for _ in 0..crate::cpu::kernels::UNROLL {
                    $(
                        // SAFETY: register-only arithmetic on a value of the declared type.
                        unsafe {
                            asm!($tmpl, a = inout($class) acc[$i], x = in($class) one, options(nomem, nostack));
                        }
                    )*
                }
            }
            acc.iter().map(|v| *v as u64).fold(0u64, u64::wrapping_add)
        }
    };
}

// 512-bit: 16 accumulators (8 + 8 mixed).
kernel_fn!(fma_f64_512, "avx512f", zmm_reg, __m512d, f64, 8, 16, "vfmadd231pd {a}, {x}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]);
kernel_fn!(fma_f32_512, "avx512f", zmm_reg, __m512, f32, 16, 16, "vfmadd231ps {a}, {x}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]);
mixed_fn!(mix_f64_512, "avx512f", zmm_reg, __m512d, f64, 8, 8, "vaddpd {a}, {a}, {x}", "vmulpd {a}, {a}, {x}", [0 1 2 3 4 5 6 7]);
mixed_fn!(mix_f32_512, "avx512f", zmm_reg, __m512, f32, 16, 8, "vaddps {a}, {a}, {x}", "vmulps {a}, {a}, {x}", [0 1 2 3 4 5 6 7]);
kernel_fn!(add_i8_512, "avx512bw", zmm_reg, __m512i, u8, 64, 16, "vpaddb {a}, {a}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]);
kernel_fn!(add_i16_512, "avx512bw", zmm_reg, __m512i, u16, 32, 16, "vpaddw {a}, {a}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]);
kernel_fn!(add_i32_512, "avx512f", zmm_reg, __m512i, u32, 16, 16, "vpaddd {a}, {a}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]);
kernel_fn!(add_i64_512, "avx512f", zmm_reg, __m512i, u64, 8, 16, "vpaddq {a}, {a}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]);

// 256-bit: 12 accumulators, 16 mixed (8 + 8, no constant); 16 ymm registers without AVX-512.
kernel_fn!(fma_f64_256, "avx2,fma", ymm_reg, __m256d, f64, 4, 12, "vfmadd231pd {a}, {x}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11]);
kernel_fn!(fma_f32_256, "avx2,fma", ymm_reg, __m256, f32, 8, 12, "vfmadd231ps {a}, {x}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11]);
squared_fn!(mix_f64_256, "avx", ymm_reg, __m256d, f64, 4, "vaddpd {a}, {a}, {x}", "vmulpd {a}, {a}, {a}", [0 1 2 3 4 5 6 7]);
squared_fn!(mix_f32_256, "avx", ymm_reg, __m256, f32, 8, "vaddps {a}, {a}, {x}", "vmulps {a}, {a}, {a}", [0 1 2 3 4 5 6 7]);
kernel_fn!(add_i8_256, "avx2", ymm_reg, __m256i, u8, 32, 12, "vpaddb {a}, {a}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11]);
kernel_fn!(add_i16_256, "avx2", ymm_reg, __m256i, u16, 16, 12, "vpaddw {a}, {a}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11]);
kernel_fn!(add_i32_256, "avx2", ymm_reg, __m256i, u32, 8, 12, "vpaddd {a}, {a}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11]);
kernel_fn!(add_i64_256, "avx2", ymm_reg, __m256i, u64, 4, 12, "vpaddq {a}, {a}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11]);

// 128-bit: SSE2 encodings, FMA3 on xmm for the FMA kernels.
kernel_fn!(fma_f64_128, "fma", xmm_reg, __m128d, f64, 2, 12, "vfmadd231pd {a}, {x}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11]);
kernel_fn!(fma_f32_128, "fma", xmm_reg, __m128, f32, 4, 12, "vfmadd231ps {a}, {x}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11]);
squared_fn!(mix_f64_128, "sse2", xmm_reg, __m128d, f64, 2, "addpd {a}, {x}", "mulpd {a}, {a}", [0 1 2 3 4 5 6 7]);
squared_fn!(mix_f32_128, "sse2", xmm_reg, __m128, f32, 4, "addps {a}, {x}", "mulps {a}, {a}", [0 1 2 3 4 5 6 7]);
kernel_fn!(add_i8_128, "sse2", xmm_reg, __m128i, u8, 16, 12, "paddb {a}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11]);
kernel_fn!(add_i16_128, "sse2", xmm_reg, __m128i, u16, 8, 12, "paddw {a}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11]);
kernel_fn!(add_i32_128, "sse2", xmm_reg, __m128i, u32, 4, 12, "paddd {a}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11]);
kernel_fn!(add_i64_128, "sse2", xmm_reg, __m128i, u64, 2, 12, "paddq {a}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11]);

// Scalar: one element per instruction.
kernel_fn!(fma_f64_1, "fma", xmm_reg, f64, f64, 1, 12, "vfmadd231sd {a}, {x}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11]);
kernel_fn!(fma_f32_1, "fma", xmm_reg, f32, f32, 1, 12, "vfmadd231ss {a}, {x}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11]);
squared_fn!(mix_f64_1, "sse2", xmm_reg, f64, f64, 1, "addsd {a}, {x}", "mulsd {a}, {a}", [0 1 2 3 4 5 6 7]);
squared_fn!(mix_f32_1, "sse2", xmm_reg, f32, f32, 1, "addss {a}, {x}", "mulss {a}, {a}", [0 1 2 3 4 5 6 7]);
scalar_add_fn!(add_i8_1, reg_byte, u8, "add {a}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11]);
scalar_add_fn!(add_i16_1, reg, u16, "add {a:x}, {x:x}", [0 1 2 3 4 5 6 7 8 9 10 11]);
scalar_add_fn!(add_i32_1, reg, u32, "add {a:e}, {x:e}", [0 1 2 3 4 5 6 7 8 9 10 11]);
scalar_add_fn!(add_i64_1, reg, u64, "add {a}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11]);

use Isa::{Avx2, Avx512, Scalar, Sse};
use Precision::{F32, F64, I8, I16, I32, I64};

pub(crate) static KERNELS: &[Kernel] = &[
    k(
        F64,
        Avx512,
        true,
        &["avx512f"],
        "vfmadd231pd zmm",
        16,
        0,
        8,
        entry!(fma_f64_512),
    ),
    k(
        F32,
        Avx512,
        true,
        &["avx512f"],
        "vfmadd231ps zmm",
        16,
        0,
        16,
        entry!(fma_f32_512),
    ),
    k(
        F64,
        Avx512,
        false,
        &["avx512f"],
        "vaddpd/vmulpd zmm",
        8,
        8,
        8,
        entry!(mix_f64_512),
    ),
    k(
        F32,
        Avx512,
        false,
        &["avx512f"],
        "vaddps/vmulps zmm",
        8,
        8,
        16,
        entry!(mix_f32_512),
    ),
    k(
        I8,
        Avx512,
        false,
        &["avx512bw"],
        "vpaddb zmm",
        16,
        0,
        64,
        entry!(add_i8_512),
    ),
    k(
        I16,
        Avx512,
        false,
        &["avx512bw"],
        "vpaddw zmm",
        16,
        0,
        32,
        entry!(add_i16_512),
    ),
    k(
        I32,
        Avx512,
        false,
        &["avx512f"],
        "vpaddd zmm",
        16,
        0,
        16,
        entry!(add_i32_512),
    ),
    k(
        I64,
        Avx512,
        false,
        &["avx512f"],
        "vpaddq zmm",
        16,
        0,
        8,
        entry!(add_i64_512),
    ),
    k(
        F64,
        Avx2,
        true,
        &["avx2", "fma"],
        "vfmadd231pd ymm",
        12,
        0,
        4,
        entry!(fma_f64_256),
    ),
    k(
        F32,
        Avx2,
        true,
        &["avx2", "fma"],
        "vfmadd231ps ymm",
        12,
        0,
        8,
        entry!(fma_f32_256),
    ),
    k(
        F64,
        Avx2,
        false,
        &["avx"],
        "vaddpd/vmulpd ymm",
        8,
        8,
        4,
        entry!(mix_f64_256),
    ),
    k(
        F32,
        Avx2,
        false,
        &["avx"],
        "vaddps/vmulps ymm",
        8,
        8,
        8,
        entry!(mix_f32_256),
    ),
    k(
        I8,
        Avx2,
        false,
        &["avx2"],
        "vpaddb ymm",
        12,
        0,
        32,
        entry!(add_i8_256),
    ),
    k(
        I16,
        Avx2,
        false,
        &["avx2"],
        "vpaddw ymm",
        12,
        0,
        16,
        entry!(add_i16_256),
    ),
    k(
        I32,
        Avx2,
        false,
        &["avx2"],
        "vpaddd ymm",
        12,
        0,
        8,
        entry!(add_i32_256),
    ),
    k(
        I64,
        Avx2,
        false,
        &["avx2"],
        "vpaddq ymm",
        12,
        0,
        4,
        entry!(add_i64_256),
    ),
    k(
        F64,
        Sse,
        true,
        &["fma"],
        "vfmadd231pd xmm",
        12,
        0,
        2,
        entry!(fma_f64_128),
    ),
    k(
        F32,
        Sse,
        true,
        &["fma"],
        "vfmadd231ps xmm",
        12,
        0,
        4,
        entry!(fma_f32_128),
    ),
    k(
        F64,
        Sse,
        false,
        &["sse2"],
        "addpd/mulpd xmm",
        8,
        8,
        2,
        entry!(mix_f64_128),
    ),
    k(
        F32,
        Sse,
        false,
        &["sse2"],
        "addps/mulps xmm",
        8,
        8,
        4,
        entry!(mix_f32_128),
    ),
    k(
        I8,
        Sse,
        false,
        &["sse2"],
        "paddb xmm",
        12,
        0,
        16,
        entry!(add_i8_128),
    ),
    k(
        I16,
        Sse,
        false,
        &["sse2"],
        "paddw xmm",
        12,
        0,
        8,
        entry!(add_i16_128),
    ),
    k(
        I32,
        Sse,
        false,
        &["sse2"],
        "paddd xmm",
        12,
        0,
        4,
        entry!(add_i32_128),
    ),
    k(
        I64,
        Sse,
        false,
        &["sse2"],
        "paddq xmm",
        12,
        0,
        2,
        entry!(add_i64_128),
    ),
    k(
        F64,
        Scalar,
        true,
        &["fma"],
        "vfmadd231sd",
        12,
        0,
        1,
        entry!(fma_f64_1),
    ),
    k(
        F32,
        Scalar,
        true,
        &["fma"],
        "vfmadd231ss",
        12,
        0,
        1,
        entry!(fma_f32_1),
    ),
    k(
        F64,
        Scalar,
        false,
        &["sse2"],
        "addsd/mulsd",
        8,
        8,
        1,
        entry!(mix_f64_1),
    ),
    k(
        F32,
        Scalar,
        false,
        &["sse2"],
        "addss/mulss",
        8,
        8,
        1,
        entry!(mix_f32_1),
    ),
    k(
        I8,
        Scalar,
        false,
        &["sse2"],
        "add r8",
        12,
        0,
        1,
        entry!(add_i8_1),
    ),
    k(
        I16,
        Scalar,
        false,
        &["sse2"],
        "add r16",
        12,
        0,
        1,
        entry!(add_i16_1),
    ),
    k(
        I32,
        Scalar,
        false,
        &["sse2"],
        "add r32",
        12,
        0,
        1,
        entry!(add_i32_1),
    ),
    k(
        I64,
        Scalar,
        false,
        &["sse2"],
        "add r64",
        12,
        0,
        1,
        entry!(add_i64_1),
    ),
];
