//! Dense linear algebra: `peakbench cpu gemm` and `peakbench cpu linpack`.

pub mod builtin;
