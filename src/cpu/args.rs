//! The flags of `peakbench cpu` (those of `cpu gemm` and `cpu linpack` are in
//! [`super::dense::args`]).

use std::time::Duration;

use clap::builder::PossibleValue;
use clap::{Args, ValueEnum};

use crate::names::{Named, named_enum};
use crate::options::{Defaults, Threads, Timing, positive_count, positive_duration, positive_u32};
use crate::peak::{Isa, Precision};
use crate::runner::Scaling;

named_enum! {
    /// A width that stands for the element types of that size, the only names a precision
    /// choice has beside [`Precision`]'s own.
    pub(crate) enum Width {
        /// quarter precision, 8 bit: i8 adds and dot products (x86 has no 8-bit float arithmetic)
        Qp = "qp",
        /// half precision, 16 bit: f16, bf16 and i16 (adds and dot products)
        Hp = "hp",
        /// single precision, 32 bit: f32 and i32
        Sp = "sp",
        /// double precision, 64 bit: f64 and i64
        Dp = "dp",
    }
}

impl Width {
    /// The element types this width stands for.
    pub(crate) fn precisions(self) -> &'static [Precision] {
        match self {
            Width::Qp => &[Precision::I8],
            Width::Hp => &[Precision::F16, Precision::Bf16, Precision::I16],
            Width::Sp => &[Precision::F32, Precision::I32],
            Width::Dp => &[Precision::F64, Precision::I64],
        }
    }
}

/// A precision as users list it: one element type, by [`Precision`]'s names (so that the two
/// lists cannot drift), or a [`Width`] that stands for several.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PrecisionChoice {
    One(Precision),
    Width(Width),
}

/// Every choice: the element types, then the widths.
const CHOICES: [PrecisionChoice; Precision::ALL.len() + Width::ALL.len()] = {
    let mut all = [PrecisionChoice::Width(Width::Qp); Precision::ALL.len() + Width::ALL.len()];
    let mut i = 0;
    while i < Precision::ALL.len() {
        all[i] = PrecisionChoice::One(Precision::ALL[i]);
        i += 1;
    }
    let mut j = 0;
    while j < Width::ALL.len() {
        all[Precision::ALL.len() + j] = PrecisionChoice::Width(Width::ALL[j]);
        j += 1;
    }
    all
};

impl PrecisionChoice {
    /// The element types this choice stands for.
    pub(crate) fn precisions(self) -> Vec<Precision> {
        match self {
            PrecisionChoice::One(precision) => vec![precision],
            PrecisionChoice::Width(width) => width.precisions().to_vec(),
        }
    }
}

impl ValueEnum for PrecisionChoice {
    fn value_variants<'a>() -> &'a [Self] {
        &CHOICES
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        match self {
            PrecisionChoice::One(precision) => precision.to_possible_value(),
            PrecisionChoice::Width(width) => width.to_possible_value(),
        }
    }
}

named_enum! {
    /// An ISA as users list it: one ISA, or the widest or all the CPU has.
    pub(crate) enum IsaChoice {
        Scalar = "scalar",
        /// 128-bit SSE2
        Sse = "sse" | "sse2",
        /// 256-bit AVX2 (integer) and AVX (float)
        Avx2 = "avx2" | "avx",
        /// 512-bit AVX-512
        Avx512 = "avx512",
        /// the widest ISA this CPU has
        Auto = "auto",
        /// every ISA this CPU has
        All = "all",
    }
}

impl IsaChoice {
    /// The ISAs this choice stands for on a CPU that has `available` (narrowest first).
    pub(crate) fn isas(self, available: &[Isa]) -> Vec<Isa> {
        let widest = *available.last().unwrap_or(&Isa::Scalar);
        match self {
            IsaChoice::Scalar => vec![Isa::Scalar],
            IsaChoice::Sse => vec![Isa::Sse],
            IsaChoice::Avx2 => vec![Isa::Avx2],
            IsaChoice::Avx512 => vec![Isa::Avx512],
            IsaChoice::Auto => vec![widest],
            IsaChoice::All => available.to_vec(),
        }
    }
}

named_enum! {
    /// Whether floating-point kernels use fused multiply-add.
    pub(crate) enum FmaChoice {
        /// fused multiply-add
        Yes = "yes",
        /// separate multiplies and adds
        No = "no",
        /// one case of each
        Both = "both",
    }
}

impl FmaChoice {
    pub(crate) fn values(self) -> &'static [bool] {
        match self {
            FmaChoice::Yes => &[true],
            FmaChoice::No => &[false],
            FmaChoice::Both => &[true, false],
        }
    }
}

/// The defaults of `cpu`: 1 and every CPU, the single core and the whole chip, the two points
/// of every scaling curve.
#[derive(Debug, Clone)]
pub(crate) struct CpuDefaults;

impl Defaults for CpuDefaults {
    const DURATION_NOTE: &'static str = ": the work of one repetition is sized so that one \
        thread needs about this long (--ops fixes it instead)";
}

#[derive(Args, Debug)]
pub(crate) struct CpuArgs {
    /// Precisions (list)
    #[arg(
        long,
        short = 'p',
        value_name = "LIST",
        value_delimiter = ',',
        ignore_case = true,
        default_value = "f64,f32,i64,i32,i16,i8"
    )]
    pub precision: Vec<PrecisionChoice>,
    /// ISAs (list)
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        ignore_case = true,
        default_value = "auto"
    )]
    pub isa: Vec<IsaChoice>,
    /// Floating-point kernels with fused multiply-add, without (separate adds and multiplies), or both
    #[arg(long, value_enum, default_value = "yes")]
    pub fma: FmaChoice,
    #[command(flatten)]
    pub threads: Threads<CpuDefaults>,
    /// strong: a fixed total of work split among threads; weak: the same work per thread
    #[arg(long, value_enum, default_value = "strong")]
    pub scaling: Scaling,
    /// Work of one repetition in ops (total for strong, per thread for weak), e.g. 100G
    #[arg(long, value_name = "COUNT", value_parser = positive_count)]
    pub ops: Option<u64>,
    #[command(flatten)]
    pub timing: Timing<CpuDefaults>,
    /// Sampling run: record this many samples with all threads busy (e.g. 600)
    #[arg(long, value_name = "N", value_parser = positive_u32)]
    pub samples: Option<u32>,
    /// Length of one sample of a sampling run
    #[arg(long, default_value = "1s", value_name = "DURATION", value_parser = positive_duration, requires = "samples")]
    pub interval: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every element type parses as a choice under its own name and stands for itself; the
    /// widths are the only other names.
    #[test]
    fn every_precision_name_is_a_choice_for_itself() {
        for &precision in Precision::ALL {
            let choice = PrecisionChoice::from_str(precision.name(), true).unwrap();
            assert_eq!(choice, PrecisionChoice::One(precision));
            assert_eq!(choice.precisions(), [precision]);
        }
        let names: Vec<String> = PrecisionChoice::value_variants()
            .iter()
            .map(|c| c.to_possible_value().unwrap().get_name().to_string())
            .collect();
        let widths = &names[Precision::ALL.len()..];
        assert_eq!(widths, ["qp", "hp", "sp", "dp"]);
        assert_eq!(
            PrecisionChoice::from_str("HP", true).unwrap().precisions(),
            [Precision::F16, Precision::Bf16, Precision::I16]
        );
    }
}
