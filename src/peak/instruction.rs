//! What a CPU peak row is about: the vector ISA (by register width), the element type and the
//! form of the instruction (element-wise, dot product, AMX tile).

use crate::names::named_enum;

named_enum! {
    /// Vector ISAs, by register width.
    pub enum Isa {
        /// one element per instruction
        Scalar = "scalar",
        /// 128-bit SSE2 (and its successors)
        Sse = "sse" | "sse2",
        /// 256-bit AVX2 (integer) and AVX (float)
        Avx2 = "avx2" | "avx",
        /// 512-bit AVX-512
        Avx512 = "avx512",
    }
}

impl Isa {
    /// Register width in bits (64 for scalar: one element of up to 64 bits).
    pub fn bits(self) -> u32 {
        match self {
            Isa::Scalar => 64,
            Isa::Sse => 128,
            Isa::Avx2 => 256,
            Isa::Avx512 => 512,
        }
    }
}

named_enum! {
    /// Element types. Their names are also the single-type values of `cpu --precision`
    /// (`cpu::args::PrecisionChoice`), so the doc lines below are its help.
    pub enum Precision {
        I8 = "i8",
        I16 = "i16",
        I32 = "i32",
        I64 = "i64",
        /// 16-bit IEEE float, vfmadd231ph (needs AVX512-FP16)
        F16 = "f16",
        /// bfloat16 dot products, vdpbf16ps (AVX512_BF16) and AMX-BF16 tiles
        Bf16 = "bf16",
        F32 = "f32",
        F64 = "f64",
    }
}

impl Precision {
    pub const fn bits(self) -> u32 {
        match self {
            Precision::I8 => 8,
            Precision::I16 | Precision::F16 | Precision::Bf16 => 16,
            Precision::I32 | Precision::F32 => 32,
            Precision::I64 | Precision::F64 => 64,
        }
    }

    pub const fn is_float(self) -> bool {
        matches!(
            self,
            Precision::F16 | Precision::Bf16 | Precision::F32 | Precision::F64
        )
    }

    /// "GFLOP/s" for floating point, "GIOP/s" for integers.
    pub fn unit(self) -> &'static str {
        if self.is_float() { "GFLOP/s" } else { "GIOP/s" }
    }

    /// Lanes of this precision in one register of `isa` (1 for scalar).
    pub fn lanes(self, isa: Isa) -> u32 {
        match isa {
            Isa::Scalar => 1,
            _ => isa.bits() / self.bits(),
        }
    }
}

named_enum! {
    /// The form of a kernel's instruction.
    pub enum Form {
        /// one operation per lane: an add, a multiply or an FMA
        Arith = "arith",
        /// a dot product of 8- or 16-bit pairs into 32-bit lanes (VNNI, AVX512_BF16)
        Dot = "dot",
        /// an AMX tile multiply (16 × 16 32-bit results per instruction)
        Tile = "tile",
    }
}

impl Form {
    pub(super) fn is_arith(&self) -> bool {
        *self == Form::Arith
    }
}

#[allow(clippy::derivable_impls)] // named_enum! takes no #[default] on a variant
impl Default for Form {
    fn default() -> Self {
        Form::Arith
    }
}

/// Which entry of the [`CoreResources`] arrays (128, 256, 512 bit) an ISA uses.
pub(super) fn width_index(isa: Isa) -> usize {
    match isa {
        Isa::Scalar | Isa::Sse => 0,
        Isa::Avx2 => 1,
        Isa::Avx512 => 2,
    }
}
