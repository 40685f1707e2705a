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
//!
//! This file holds what a kernel is and how it is counted; the x86-64 kernels themselves are in
//! `x86/`: the element-wise arithmetic of every ISA (`arith.rs`), the 512-bit dot products and
//! f16 (`special.rs`) and the AMX tiles (`amx.rs`).

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
mod x86;

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
        // 12 accumulators, 300 iterations × 4 unrolled = 1200 ≡ 176 (mod 256) each.
        assert_eq!(kernel.expected_checksum(300), 12 * ((300 * 4) % 256));
        assert_eq!(kernel.run(300), 12 * 176);
    }

    #[test]
    fn op_counts_follow_the_counting_rule() {
        let fma = find(Precision::F64, Isa::Avx512, true, Form::Arith).unwrap();
        assert_eq!(fma.ops_per_iteration(), 16 * 8 * 2 * UNROLL);
        let mixed = find(Precision::F64, Isa::Avx2, false, Form::Arith).unwrap();
        assert_eq!(mixed.ops_per_iteration(), 16 * 4 * UNROLL); // 8 adds and 8 multiplies
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

    /// Every kernel has an entry (a count, or 0 where its ISA is absent) on every
    /// microarchitecture of the table, so that no measured kernel goes without a peak on a CPU
    /// the table knows.
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
