//! peakbench's own dense engine (`--blas builtin`, and the `auto` pick where it is the fastest):
//! a GEMM built as BLIS builds them, for f64 and f32 (`dgemm.rs`: the loops and the blocking;
//! `pack.rs`: the packed panels; `micro.rs`: the micro-kernels), and an LU factorisation over it
//! (`lu.rs`), whose panels and triangular solves are faer's.

pub mod dgemm;
pub mod lu;
mod micro;
mod pack;

/// The faer version this binary was built with.
pub const FAER_VERSION: &str = "0.24";
