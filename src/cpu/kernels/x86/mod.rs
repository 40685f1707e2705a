//! The x86-64 kernels: the macros and constructors they share, and the tables of all of them.

use super::{Kernel, RunFn, Sum};
use crate::peak::{Form, Isa, Precision};

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

mod amx;
mod arith;
mod special;

pub(super) use amx::{AMX_BF16, AMX_INT8, amx_usable};
pub(super) use arith::KERNELS;
#[cfg(test)]
pub(crate) use special::FOLDED_F32;
pub(super) use special::SPECIAL;

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
