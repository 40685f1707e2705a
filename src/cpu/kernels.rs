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
//!
//! Dot products (`vpdpbusd` i8, `vpdpwssd` i16, `vdpbf16ps` bf16) multiply pairs of 8- or 16-bit
//! elements and add the products into 32-bit lanes: each pair is a multiply and an add, 2 ops
//! per input element (`vdpbf16ps`: 4 FLOP per 32-bit lane, two multiplies and two adds). Their
//! inputs are 1 × 1 (i8, i16) or 1 × 0.5 (bf16), so a lane gains 4, 2 or 1 per instruction. AMX
//! tile multiplies (`tdpbssd`, `tdpbf16ps`) do 16 × 16 results of 64 int8 or 32 bf16 pairs each,
//! counted the same way, in one `asm!` block since tile registers are not Rust values.
//!
//! f16 (`vfmadd231ph`) counts exactly only to 2048, so its kernel folds the accumulators into
//! 16-bit integer totals (`vcvtph2w`, `vpaddw`) every [`F16_BLOCK`] iterations and clears them;
//! the fold is not counted (under 0.5 % of the instructions).

use crate::peak::{Form, Isa, Precision};

/// What one kernel does and how to count it.
#[derive(Clone, Copy, Debug)]
pub struct Kernel {
    pub precision: Precision,
    pub isa: Isa,
    pub fma: bool,
    pub form: Form,
    /// CPU features the kernel needs (as `is_x86_feature_detected!` names them).
    pub features: &'static [&'static str],
    /// The instruction(s), for the output.
    pub instruction: &'static str,
    /// Accumulators doing counted adds or FMAs.
    pub add_accumulators: u32,
    /// Accumulators doing multiplies (kept at 1), in kernels without FMA.
    pub mul_accumulators: u32,
    /// Input elements per instruction (for a tile, its multiply-adds).
    pub lanes: u32,
    /// How the checksum is formed: `sum.vectors` registers of `sum.lanes` lanes are summed, each
    /// lane gaining `sum.gain` per instruction copy, wrapping at `sum.wrap_bits` (0: exact).
    sum: Sum,
    /// Runs `iters` iterations from fresh accumulators and returns the sum of all lanes.
    run: RunFn,
}

/// The shape of a kernel's checksum.
#[derive(Clone, Copy, Debug)]
struct Sum {
    vectors: u64,
    lanes: u64,
    gain: u64,
    wrap_bits: u32,
}

/// Iterations of the f16 kernel between folds: 256 × 4 unrolled = 1024 per accumulator, exact
/// in f16 (whose integers are exact up to 2048).
pub const F16_BLOCK: u64 = 256;

type RunFn = fn(u64) -> u64;

/// Iterations one kernel call may run with exact f32 counts (2^24 per accumulator).
pub const MAX_CHUNK: u64 = 1 << 22;

/// Copies of the instruction block per loop iteration.
pub const UNROLL: u64 = 4;

impl Kernel {
    /// Ops counted per iteration (all accumulators, all lanes, the unrolled copies; an FMA is 2).
    pub fn ops_per_iteration(&self) -> u64 {
        let per_lane = if self.fma || self.form != Form::Arith {
            2
        } else {
            1
        };
        let instructions = (self.add_accumulators * per_lane + self.mul_accumulators) as u64;
        instructions * self.lanes as u64 * UNROLL
    }

    /// The sum of lanes the kernel must return after `iters` iterations.
    pub fn expected_checksum(&self, iters: u64) -> u64 {
        let Sum {
            vectors,
            lanes,
            gain,
            wrap_bits,
        } = self.sum;
        let mut per_lane = (iters * UNROLL).wrapping_mul(gain);
        if wrap_bits > 0 && wrap_bits < 64 {
            per_lane %= 1 << wrap_bits;
        }
        (vectors * lanes)
            .wrapping_mul(per_lane)
            .wrapping_add(self.mul_accumulators as u64 * lanes)
    }

    /// The name cases use: `f64-avx512-fma`, `i32-avx2`, `i8-avx512-dot`, `bf16-amx`.
    pub fn id(&self) -> String {
        match self.form {
            Form::Tile => format!("{}-amx", self.precision.name()),
            Form::Dot => format!("{}-{}-dot", self.precision.name(), self.isa.name()),
            Form::Arith => format!(
                "{}-{}{}",
                self.precision.name(),
                self.isa.name(),
                match (self.precision.is_float(), self.fma) {
                    (false, _) => "",
                    (true, true) => "-fma",
                    (true, false) => "-nofma",
                }
            ),
        }
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
        let op = if self.form == Form::Tile {
            "a multiply-add of one pair = 2 ops (16 × 16 results × pairs per tile instruction)"
        } else if self.form == Form::Dot {
            "a dot product = 2 ops per input pair (a multiply and an add; 4 per 32-bit lane for 16-bit inputs, 8 for 8-bit)"
        } else if self.fma {
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
            "avx512vnni" => std::arch::is_x86_feature_detected!("avx512vnni"),
            "avx512bf16" => std::arch::is_x86_feature_detected!("avx512bf16"),
            "avx512fp16" => std::arch::is_x86_feature_detected!("avx512fp16"),
            "amx-int8" => x86::amx_usable(x86::AMX_INT8),
            "amx-bf16" => x86::amx_usable(x86::AMX_BF16),
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
        static ALL: std::sync::OnceLock<Vec<Kernel>> = std::sync::OnceLock::new();
        ALL.get_or_init(|| [x86::KERNELS, x86::SPECIAL].concat())
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        &[]
    }
}

/// The kernel for a precision, ISA, FMA choice and form, if this build has one.
pub fn find(precision: Precision, isa: Isa, fma: bool, form: Form) -> Option<&'static Kernel> {
    all()
        .iter()
        .find(|k| k.precision == precision && k.isa == isa && k.fma == fma && k.form == form)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{F16_BLOCK, Kernel, RunFn, Sum};
    use crate::peak::{Form, Isa, Precision};
    use std::arch::asm;
    use std::arch::x86_64::*;
    use std::hint::black_box;
    use std::sync::OnceLock;

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
                    for _ in 0..super::UNROLL {
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
                        for _ in 0..super::UNROLL {
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

    /// CPUID leaf 7 EDX bits of AMX.
    pub const AMX_BF16: u32 = 22;
    pub const AMX_TILE: u32 = 24;
    pub const AMX_INT8: u32 = 25;

    /// Whether the CPU has AMX-TILE and the AMX feature `bit`, and Linux lets this process use
    /// the tile data (asked once, `arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`).
    pub fn amx_usable(bit: u32) -> bool {
        // CPUID leaf 7 (an absent leaf reads as zeros: no AMX).
        let edx = __cpuid_count(7, 0).edx;
        let has = |b: u32| edx & (1 << b) != 0;
        if !(has(AMX_TILE) && has(bit)) {
            return false;
        }
        static PERMITTED: OnceLock<bool> = OnceLock::new();
        *PERMITTED.get_or_init(|| {
            const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
            const XFEATURE_XTILEDATA: libc::c_long = 18;
            // SAFETY: arch_prctl with this request only changes the process's permission to use
            // AMX state; it reads and writes no memory of ours.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_arch_prctl,
                    ARCH_REQ_XCOMP_PERM,
                    XFEATURE_XTILEDATA,
                )
            };
            rc == 0
        })
    }

    /// A 64-byte tile configuration: palette 1, all eight tiles 16 rows × 64 bytes.
    #[repr(C, align(64))]
    struct TileConfig([u8; 64]);

    impl TileConfig {
        fn full() -> TileConfig {
            let mut c = [0u8; 64];
            c[0] = 1; // palette 1
            for t in 0..8 {
                c[16 + 2 * t] = 64; // bytes per row (u16, little endian)
                c[48 + t] = 16; // rows
            }
            TileConfig(c)
        }
    }

    /// One 16 × 64-byte tile in memory.
    #[repr(C, align(64))]
    struct Tile([u8; 1024]);

    /// Runs `$op` (tmm0..tmm3 += tmm4 · tmm5) `iters × UNROLL` times on each of the four
    /// accumulator tiles, from zero, with A filled with `$a` and B with `$b` (16-bit patterns for
    /// bf16, bytes for int8), and returns the sum of all 4 × 256 32-bit results (as `$e`).
    macro_rules! tile_fn {
        ($name:ident, $in:ty, $a:expr, $b:expr, $e:ty, $op:literal) => {
            fn $name(iters: u64) -> u64 {
                let config = TileConfig::full();
                let mut a = Tile([0; 1024]);
                let mut b = Tile([0; 1024]);
                for (dst, src) in [(&mut a, black_box($a as $in)), (&mut b, black_box($b as $in))] {
                    for chunk in dst.0.chunks_exact_mut(size_of::<$in>()) {
                        chunk.copy_from_slice(&src.to_le_bytes());
                    }
                }
                let mut c = [Tile([0; 1024]), Tile([0; 1024]), Tile([0; 1024]), Tile([0; 1024])];
                let [c0, c1, c2, c3] = &mut c;
                // SAFETY: the caller checked AMX-TILE and the data type, and that Linux permits
                // the tile state (`amx_usable`); every pointer is to a 64-byte-aligned 1 KiB tile
                // read or written as 16 rows of 64 bytes with a stride of 64; the tiles are
                // released before the block ends.
                unsafe {
                    asm!(
                        "ldtilecfg [{config}]",
                        "tilezero tmm0",
                        "tilezero tmm1",
                        "tilezero tmm2",
                        "tilezero tmm3",
                        "tileloadd tmm4, [{a} + {stride}*1]",
                        "tileloadd tmm5, [{b} + {stride}*1]",
                        "test {n}, {n}",
                        "jz 3f",
                        "2:",
                        concat!($op, " tmm0, tmm4, tmm5"), concat!($op, " tmm1, tmm4, tmm5"),
                        concat!($op, " tmm2, tmm4, tmm5"), concat!($op, " tmm3, tmm4, tmm5"),
                        concat!($op, " tmm0, tmm4, tmm5"), concat!($op, " tmm1, tmm4, tmm5"),
                        concat!($op, " tmm2, tmm4, tmm5"), concat!($op, " tmm3, tmm4, tmm5"),
                        concat!($op, " tmm0, tmm4, tmm5"), concat!($op, " tmm1, tmm4, tmm5"),
                        concat!($op, " tmm2, tmm4, tmm5"), concat!($op, " tmm3, tmm4, tmm5"),
                        concat!($op, " tmm0, tmm4, tmm5"), concat!($op, " tmm1, tmm4, tmm5"),
                        concat!($op, " tmm2, tmm4, tmm5"), concat!($op, " tmm3, tmm4, tmm5"),
                        "dec {n}",
                        "jnz 2b",
                        "3:",
                        "tilestored [{c0} + {stride}*1], tmm0",
                        "tilestored [{c1} + {stride}*1], tmm1",
                        "tilestored [{c2} + {stride}*1], tmm2",
                        "tilestored [{c3} + {stride}*1], tmm3",
                        "tilerelease",
                        config = in(reg) config.0.as_ptr(),
                        a = in(reg) a.0.as_ptr(),
                        b = in(reg) b.0.as_ptr(),
                        c0 = in(reg) c0.0.as_mut_ptr(),
                        c1 = in(reg) c1.0.as_mut_ptr(),
                        c2 = in(reg) c2.0.as_mut_ptr(),
                        c3 = in(reg) c3.0.as_mut_ptr(),
                        stride = in(reg) 64usize,
                        n = inout(reg) iters => _,
                        options(nostack),
                    );
                }
                c.iter()
                    .flat_map(|tile| tile.0.chunks_exact(4))
                    .map(|v| <$e>::from_le_bytes([v[0], v[1], v[2], v[3]]) as u64)
                    .fold(0u64, u64::wrapping_add)
            }
        };
    }

    const _: () = assert!(
        super::UNROLL == 4,
        "the tile loops are unrolled 4 times by hand"
    );

    // int8 1 × 1, 64 pairs: each result gains 64 per instruction.
    tile_fn!(tile_i8, i8, 1, 1, u32, "tdpbssd");
    // bf16 1.0 × 2^-5 (0x3D00), 32 pairs: each f32 result gains exactly 1 per instruction.
    tile_fn!(tile_bf16, u16, 0x3F80, 0x3D00, f32, "tdpbf16ps");

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
        let wraps = !precision.is_float() && precision.bits() < 64;
        Kernel {
            precision,
            isa,
            fma,
            form: Form::Arith,
            features,
            instruction,
            add_accumulators,
            mul_accumulators,
            lanes,
            sum: Sum {
                vectors: add_accumulators as u64,
                lanes: lanes as u64,
                gain: 1,
                wrap_bits: if wraps { precision.bits() } else { 0 },
            },
            run,
        }
    }

    /// A kernel whose checksum is not one lane per input element gaining 1: dot products,
    /// tiles, the folded f16 FMA.
    #[allow(clippy::too_many_arguments)]
    const fn special(
        precision: Precision,
        form: Form,
        fma: bool,
        features: &'static [&'static str],
        instruction: &'static str,
        accumulators: u32,
        lanes: u32,
        sum: Sum,
        run: RunFn,
    ) -> Kernel {
        Kernel {
            precision,
            isa: Isa::Avx512,
            fma,
            form,
            features,
            instruction,
            add_accumulators: accumulators,
            mul_accumulators: 0,
            lanes,
            sum,
            run,
        }
    }

    const fn sum(vectors: u64, lanes: u64, gain: u64, wrap_bits: u32) -> Sum {
        Sum {
            vectors,
            lanes,
            gain,
            wrap_bits,
        }
    }

    /// Kernels beyond the element-wise arithmetic (16 accumulators of 512 bits, or 4 tiles).
    pub static SPECIAL: &[Kernel] = &[
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
    pub static FOLDED_F32: Kernel = special(
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
        let kernel = find(Precision::F32, Isa::Sse, false, Form::Arith).unwrap();
        if kernel.supported() {
            assert_eq!(kernel.run(MAX_CHUNK), kernel.expected_checksum(MAX_CHUNK));
        }
    }

    #[test]
    fn integer_counts_wrap_like_the_hardware() {
        let kernel = find(Precision::I8, Isa::Scalar, false, Form::Arith).unwrap();
        // 8 accumulators, 300 iterations × 4 unrolled = 1200 ≡ 176 (mod 256) each.
        assert_eq!(kernel.expected_checksum(300), 8 * ((300 * 4) % 256));
        assert_eq!(kernel.run(300), 8 * 176);
    }

    #[test]
    fn op_counts_follow_the_counting_rule() {
        let fma = find(Precision::F64, Isa::Avx512, true, Form::Arith).unwrap();
        assert_eq!(fma.ops_per_iteration(), 16 * 8 * 2 * UNROLL);
        let mixed = find(Precision::F64, Isa::Avx2, false, Form::Arith).unwrap();
        assert_eq!(mixed.ops_per_iteration(), 12 * 4 * UNROLL);
        let int = find(Precision::I8, Isa::Sse, false, Form::Arith).unwrap();
        assert_eq!(int.ops_per_iteration(), 12 * 16 * UNROLL);
        // vpdpbusd: 64 byte pairs, a multiply and an add each = 8 ops per 32-bit lane.
        let dot = find(Precision::I8, Isa::Avx512, false, Form::Dot).unwrap();
        assert_eq!(dot.ops_per_iteration(), 16 * 16 * 8 * UNROLL);
        // vdpbf16ps: 4 FLOP per 32-bit lane.
        let bf16 = find(Precision::Bf16, Isa::Avx512, false, Form::Dot).unwrap();
        assert_eq!(bf16.ops_per_iteration(), 16 * 16 * 4 * UNROLL);
        // tdpbssd: 16 × 16 results × 64 pairs × 2 ops, on 4 tiles.
        let tile = find(Precision::I8, Isa::Avx512, false, Form::Tile).unwrap();
        assert_eq!(tile.ops_per_iteration(), 4 * 16 * 16 * 64 * 2 * UNROLL);
    }

    #[test]
    fn dot_product_checksums_follow_their_pairs() {
        // i8: 16 accumulators × 16 lanes, each +4 per instruction, wrapping at 2^32.
        let i8 = find(Precision::I8, Isa::Avx512, false, Form::Dot).unwrap();
        assert_eq!(i8.expected_checksum(10), 16 * 16 * 4 * 40);
        // (2^30 + 1) × 4 unrolled × 4 = 2^34 + 16 ≡ 16 (mod 2^32).
        assert_eq!(i8.expected_checksum((1 << 30) + 1), 16 * 16 * 16);
        // f16 folds 16 accumulators into one 16-bit total per lane: 32 lanes × (64 × iters mod 2^16).
        let f16 = find(Precision::F16, Isa::Avx512, true, Form::Arith).unwrap();
        assert_eq!(f16.expected_checksum(1500), 32 * (96_000 - 65_536));
        for kernel in [i8, f16] {
            if kernel.supported() {
                for iters in [0, 1, 255, 256, 257, 5000] {
                    assert_eq!(kernel.run(iters), kernel.expected_checksum(iters));
                }
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_f16_fold_keeps_its_closed_form_across_blocks() {
        // The same fold in f32 (vcvtps2dq, vpaddd) runs where AVX512-FP16 is missing.
        let folded = &x86::FOLDED_F32;
        if folded.supported() {
            for iters in [
                0,
                1,
                F16_BLOCK - 1,
                F16_BLOCK,
                F16_BLOCK + 1,
                10 * F16_BLOCK + 7,
            ] {
                assert_eq!(
                    folded.run(iters),
                    folded.expected_checksum(iters),
                    "{iters}"
                );
            }
        }
    }

    /// Issue 30 item 7: every kernel has an entry (a count, or 0 where its ISA is absent) on
    /// every microarchitecture of the table, so that no measured kernel goes without a peak on
    /// a CPU the table knows.
    #[test]
    fn every_kernel_has_an_entry_on_every_microarchitecture() {
        use crate::peak::Pipe;
        use crate::sysinfo::microarch;
        // A model name that tells the SKU of the rows that need one.
        let platinum = "Intel(R) Xeon(R) Platinum 8280 CPU @ 2.70GHz";
        for name in microarch::names() {
            let (core, _) = microarch::resources(name, platinum).unwrap();
            for kernel in all() {
                let pipe = Pipe::of(kernel.precision, kernel.isa, kernel.fma, kernel.form);
                assert!(
                    pipe.in_table(&core).is_some(),
                    "{} ({pipe:?}) has no entry on {name}",
                    kernel.id()
                );
            }
        }
    }

    #[test]
    fn a_cpu_without_a_feature_is_told_not_run() {
        // No CPU lacks SSE2 on x86-64; AMX is on Intel Xeons from Sapphire Rapids only.
        for kernel in all().iter().filter(|k| k.form == Form::Tile) {
            if !kernel.supported() {
                assert!(!feature_detected(kernel.features[0]));
            }
        }
    }
}
