//! Throughput kernels: independent chains of one instruction, written in inline assembly.
//!
//! Each kernel keeps N accumulators in registers (N × instruction latency covers the pipes: 16
//! for 512-bit, 12 for 256/128-bit and scalar floating point, 8 for scalar integers) and applies
//! one instruction to each per iteration, unrolled 4 times. The instruction is written in
//! `asm!`, so the compiler can neither fold the loop into a closed form nor change the
//! instruction; the loop count, and so the op count, is then proved by the result: every
//! accumulator starts at 0 and gains exactly 1 per iteration (`a += 1 × 1` for an FMA,
//! `a += 1` for an add), so after `iters` iterations the sum of all lanes must be
//! `accumulators × lanes × iters` (modulo 2^bits per lane for integers). Floating-point chunks
//! stay below 2^24 iterations so that f32 counts are exact. Kernels without FMA interleave
//! independent adds and multiplies (`a *= 1`, which keeps its accumulator at 1), so machines
//! with separate add pipes can use them; both are counted as 1 FLOP.
//!
//! Counting: an FMA is 2 FLOPs per lane; an add or a multiply is 1 FLOP per lane; an integer
//! add is 1 op per lane.

use crate::peak::{Isa, Precision};

/// What one kernel does and how to count it.
#[derive(Clone, Copy, Debug)]
pub struct Kernel {
    pub precision: Precision,
    pub isa: Isa,
    pub fma: bool,
    /// CPU features the kernel needs (as `is_x86_feature_detected!` names them).
    pub features: &'static [&'static str],
    /// The instruction(s), for the output.
    pub instruction: &'static str,
    /// Accumulators doing counted adds or FMAs.
    pub add_accumulators: u32,
    /// Accumulators doing multiplies (kept at 1), in kernels without FMA.
    pub mul_accumulators: u32,
    pub lanes: u32,
    /// Runs `iters` iterations from fresh accumulators and returns the sum of all lanes.
    run: RunFn,
}

type RunFn = fn(u64) -> u64;

/// Iterations one kernel call may run with exact f32 counts (2^24 per accumulator).
pub const MAX_CHUNK: u64 = 1 << 22;

/// Copies of the instruction block per loop iteration.
pub const UNROLL: u64 = 4;

impl Kernel {
    /// Ops counted per iteration (all accumulators, all lanes, the unrolled copies; an FMA is 2).
    pub fn ops_per_iteration(&self) -> u64 {
        let per_lane = if self.fma { 2 } else { 1 };
        let instructions = (self.add_accumulators * per_lane + self.mul_accumulators) as u64;
        instructions * self.lanes as u64 * UNROLL
    }

    /// The sum of lanes the kernel must return after `iters` iterations.
    pub fn expected_checksum(&self, iters: u64) -> u64 {
        let mut per_lane = iters * UNROLL;
        if !self.precision.is_float() && self.precision.bits() < 64 {
            per_lane %= 1 << self.precision.bits();
        }
        let lanes = self.lanes as u64;
        (self.add_accumulators as u64 * lanes)
            .wrapping_mul(per_lane)
            .wrapping_add(self.mul_accumulators as u64 * lanes)
    }

    /// Whether this CPU can run the kernel.
    pub fn supported(&self) -> bool {
        self.features.iter().all(|f| feature_detected(f))
    }

    /// Runs `iters` iterations (at most [`MAX_CHUNK`]) and returns the checksum.
    ///
    /// Panics if the CPU lacks a feature the kernel needs; check [`Kernel::supported`] first.
    pub fn run(&self, iters: u64) -> u64 {
        assert!(self.supported(), "kernel run on a CPU without its features");
        assert!(iters <= MAX_CHUNK);
        (self.run)(iters)
    }

    /// How the result is counted, for the output.
    pub fn counting(&self) -> String {
        let op = if self.fma {
            "an FMA = 2 FLOP per lane"
        } else if self.precision.is_float() {
            "an add or a multiply = 1 FLOP per lane"
        } else {
            "an integer add = 1 op per lane"
        };
        let accumulators = if self.mul_accumulators > 0 {
            format!(
                "{} add + {} multiply accumulators",
                self.add_accumulators, self.mul_accumulators
            )
        } else {
            format!("{} accumulators", self.add_accumulators)
        };
        format!(
            "{op}; {} × {accumulators} × {} lanes × {UNROLL} unrolled = {} ops per iteration; checksum verified",
            self.instruction,
            self.lanes,
            self.ops_per_iteration()
        )
    }
}

/// Whether the running CPU (and OS) supports a feature.
pub fn feature_detected(feature: &str) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        match feature {
            "sse2" => std::arch::is_x86_feature_detected!("sse2"),
            "avx" => std::arch::is_x86_feature_detected!("avx"),
            "avx2" => std::arch::is_x86_feature_detected!("avx2"),
            "fma" => std::arch::is_x86_feature_detected!("fma"),
            "avx512f" => std::arch::is_x86_feature_detected!("avx512f"),
            "avx512bw" => std::arch::is_x86_feature_detected!("avx512bw"),
            _ => false,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = feature;
        false
    }
}

/// Every kernel of this build, supported by this CPU or not.
pub fn all() -> &'static [Kernel] {
    #[cfg(target_arch = "x86_64")]
    {
        x86::KERNELS
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        &[]
    }
}

/// The kernel for a precision, ISA and FMA choice, if this build has one.
pub fn find(precision: Precision, isa: Isa, fma: bool) -> Option<&'static Kernel> {
    all()
        .iter()
        .find(|k| k.precision == precision && k.isa == isa && k.fma == fma)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Kernel, RunFn};
    use crate::peak::{Isa, Precision};
    use std::arch::asm;
    use std::arch::x86_64::*;
    use std::hint::black_box;

    /// Sums all lanes of the accumulators as integers.
    macro_rules! lane_sum {
        ($acc:expr, $e:ty, $lanes:literal, $n:literal) => {{
            // SAFETY: a vector of $lanes elements of $e has exactly that layout.
            let lanes: [[$e; $lanes]; $n] = unsafe { std::mem::transmute($acc) };
            lanes
                .iter()
                .flatten()
                .map(|v| *v as u64)
                .fold(0u64, u64::wrapping_add)
        }};
    }

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
                    for _ in 0..super::UNROLL {
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
                    for _ in 0..super::UNROLL {
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

    // 512-bit: 16 accumulators (8 + 8 mixed).
    kernel_fn!(fma_f64_512, "avx512f", zmm_reg, __m512d, f64, 8, 16, "vfmadd231pd {a}, {x}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]);
    kernel_fn!(fma_f32_512, "avx512f", zmm_reg, __m512, f32, 16, 16, "vfmadd231ps {a}, {x}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]);
    mixed_fn!(mix_f64_512, "avx512f", zmm_reg, __m512d, f64, 8, 8, "vaddpd {a}, {a}, {x}", "vmulpd {a}, {a}, {x}", [0 1 2 3 4 5 6 7]);
    mixed_fn!(mix_f32_512, "avx512f", zmm_reg, __m512, f32, 16, 8, "vaddps {a}, {a}, {x}", "vmulps {a}, {a}, {x}", [0 1 2 3 4 5 6 7]);
    kernel_fn!(add_i8_512, "avx512bw", zmm_reg, __m512i, u8, 64, 16, "vpaddb {a}, {a}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]);
    kernel_fn!(add_i16_512, "avx512bw", zmm_reg, __m512i, u16, 32, 16, "vpaddw {a}, {a}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]);
    kernel_fn!(add_i32_512, "avx512f", zmm_reg, __m512i, u32, 16, 16, "vpaddd {a}, {a}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]);
    kernel_fn!(add_i64_512, "avx512f", zmm_reg, __m512i, u64, 8, 16, "vpaddq {a}, {a}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]);

    // 256-bit: 12 accumulators (6 + 6 mixed); 16 ymm registers without AVX-512.
    kernel_fn!(fma_f64_256, "avx2,fma", ymm_reg, __m256d, f64, 4, 12, "vfmadd231pd {a}, {x}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11]);
    kernel_fn!(fma_f32_256, "avx2,fma", ymm_reg, __m256, f32, 8, 12, "vfmadd231ps {a}, {x}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11]);
    mixed_fn!(mix_f64_256, "avx", ymm_reg, __m256d, f64, 4, 6, "vaddpd {a}, {a}, {x}", "vmulpd {a}, {a}, {x}", [0 1 2 3 4 5]);
    mixed_fn!(mix_f32_256, "avx", ymm_reg, __m256, f32, 8, 6, "vaddps {a}, {a}, {x}", "vmulps {a}, {a}, {x}", [0 1 2 3 4 5]);
    kernel_fn!(add_i8_256, "avx2", ymm_reg, __m256i, u8, 32, 12, "vpaddb {a}, {a}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11]);
    kernel_fn!(add_i16_256, "avx2", ymm_reg, __m256i, u16, 16, 12, "vpaddw {a}, {a}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11]);
    kernel_fn!(add_i32_256, "avx2", ymm_reg, __m256i, u32, 8, 12, "vpaddd {a}, {a}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11]);
    kernel_fn!(add_i64_256, "avx2", ymm_reg, __m256i, u64, 4, 12, "vpaddq {a}, {a}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11]);

    // 128-bit: SSE2 encodings, FMA3 on xmm for the FMA kernels.
    kernel_fn!(fma_f64_128, "fma", xmm_reg, __m128d, f64, 2, 12, "vfmadd231pd {a}, {x}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11]);
    kernel_fn!(fma_f32_128, "fma", xmm_reg, __m128, f32, 4, 12, "vfmadd231ps {a}, {x}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11]);
    mixed_fn!(mix_f64_128, "sse2", xmm_reg, __m128d, f64, 2, 6, "addpd {a}, {x}", "mulpd {a}, {x}", [0 1 2 3 4 5]);
    mixed_fn!(mix_f32_128, "sse2", xmm_reg, __m128, f32, 4, 6, "addps {a}, {x}", "mulps {a}, {x}", [0 1 2 3 4 5]);
    kernel_fn!(add_i8_128, "sse2", xmm_reg, __m128i, u8, 16, 12, "paddb {a}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11]);
    kernel_fn!(add_i16_128, "sse2", xmm_reg, __m128i, u16, 8, 12, "paddw {a}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11]);
    kernel_fn!(add_i32_128, "sse2", xmm_reg, __m128i, u32, 4, 12, "paddd {a}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11]);
    kernel_fn!(add_i64_128, "sse2", xmm_reg, __m128i, u64, 2, 12, "paddq {a}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11]);

    // Scalar: one element per instruction.
    kernel_fn!(fma_f64_1, "fma", xmm_reg, f64, f64, 1, 12, "vfmadd231sd {a}, {x}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11]);
    kernel_fn!(fma_f32_1, "fma", xmm_reg, f32, f32, 1, 12, "vfmadd231ss {a}, {x}, {x}", [0 1 2 3 4 5 6 7 8 9 10 11]);
    mixed_fn!(mix_f64_1, "sse2", xmm_reg, f64, f64, 1, 6, "addsd {a}, {x}", "mulsd {a}, {x}", [0 1 2 3 4 5]);
    mixed_fn!(mix_f32_1, "sse2", xmm_reg, f32, f32, 1, 6, "addss {a}, {x}", "mulss {a}, {x}", [0 1 2 3 4 5]);
    kernel_fn!(add_i8_1, "sse2", reg_byte, u8, u8, 1, 8, "add {a}, {x}", [0 1 2 3 4 5 6 7]);
    kernel_fn!(add_i16_1, "sse2", reg, u16, u16, 1, 8, "add {a:x}, {x:x}", [0 1 2 3 4 5 6 7]);
    kernel_fn!(add_i32_1, "sse2", reg, u32, u32, 1, 8, "add {a:e}, {x:e}", [0 1 2 3 4 5 6 7]);
    kernel_fn!(add_i64_1, "sse2", reg, u64, u64, 1, 8, "add {a}, {x}", [0 1 2 3 4 5 6 7]);

    /// Wraps a `#[target_feature]` kernel into a plain function pointer.
    macro_rules! entry {
        ($f:ident) => {{
            fn call(iters: u64) -> u64 {
                // SAFETY: `Kernel::run` checks the CPU has the kernel's features first.
                unsafe { $f(iters) }
            }
            call as RunFn
        }};
    }

    #[allow(clippy::too_many_arguments)]
    const fn k(
        precision: Precision,
        isa: Isa,
        fma: bool,
        features: &'static [&'static str],
        instruction: &'static str,
        add_accumulators: u32,
        mul_accumulators: u32,
        lanes: u32,
        run: RunFn,
    ) -> Kernel {
        Kernel {
            precision,
            isa,
            fma,
            features,
            instruction,
            add_accumulators,
            mul_accumulators,
            lanes,
            run,
        }
    }

    use Isa::{Avx2, Avx512, Scalar, Sse};
    use Precision::{F32, F64, I8, I16, I32, I64};

    pub static KERNELS: &[Kernel] = &[
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
            6,
            6,
            4,
            entry!(mix_f64_256),
        ),
        k(
            F32,
            Avx2,
            false,
            &["avx"],
            "vaddps/vmulps ymm",
            6,
            6,
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
            6,
            6,
            2,
            entry!(mix_f64_128),
        ),
        k(
            F32,
            Sse,
            false,
            &["sse2"],
            "addps/mulps xmm",
            6,
            6,
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
            6,
            6,
            1,
            entry!(mix_f64_1),
        ),
        k(
            F32,
            Scalar,
            false,
            &["sse2"],
            "addss/mulss",
            6,
            6,
            1,
            entry!(mix_f32_1),
        ),
        k(
            I8,
            Scalar,
            false,
            &["sse2"],
            "add r8",
            8,
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
            8,
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
            8,
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
            8,
            0,
            1,
            entry!(add_i64_1),
        ),
    ];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_supported_kernel_returns_its_closed_form() {
        let mut ran = 0;
        for kernel in all().iter().filter(|k| k.supported()) {
            for iters in [0u64, 1, 3, 257, 70_001] {
                assert_eq!(
                    kernel.run(iters),
                    kernel.expected_checksum(iters),
                    "{:?} {:?} fma={} iters={iters}",
                    kernel.precision,
                    kernel.isa,
                    kernel.fma
                );
            }
            ran += 1;
        }
        #[cfg(target_arch = "x86_64")]
        assert!(ran >= 8, "x86-64 has at least the SSE2 and scalar kernels");
    }

    #[test]
    fn f32_counts_stay_exact_over_the_largest_chunk() {
        let kernel = find(Precision::F32, Isa::Sse, false).unwrap();
        if kernel.supported() {
            assert_eq!(kernel.run(MAX_CHUNK), kernel.expected_checksum(MAX_CHUNK));
        }
    }

    #[test]
    fn integer_counts_wrap_like_the_hardware() {
        let kernel = find(Precision::I8, Isa::Scalar, false).unwrap();
        // 8 accumulators, 300 iterations × 4 unrolled = 1200 ≡ 176 (mod 256) each.
        assert_eq!(kernel.expected_checksum(300), 8 * ((300 * 4) % 256));
        assert_eq!(kernel.run(300), 8 * 176);
    }

    #[test]
    fn op_counts_follow_the_counting_rule() {
        let fma = find(Precision::F64, Isa::Avx512, true).unwrap();
        assert_eq!(fma.ops_per_iteration(), 16 * 8 * 2 * UNROLL);
        let mixed = find(Precision::F64, Isa::Avx2, false).unwrap();
        assert_eq!(mixed.ops_per_iteration(), 12 * 4 * UNROLL);
        let int = find(Precision::I8, Isa::Sse, false).unwrap();
        assert_eq!(int.ops_per_iteration(), 12 * 16 * UNROLL);
    }
}
