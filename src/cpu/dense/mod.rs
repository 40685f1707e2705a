//! Dense linear algebra: `peakbench cpu gemm` and `peakbench cpu linpack`.

pub mod builtin;
pub mod case;
pub mod engine;
pub mod gemm;
pub mod linpack;
