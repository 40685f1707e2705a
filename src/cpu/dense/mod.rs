//! Dense linear algebra: `peakbench cpu gemm` (C = A·B) and `peakbench cpu linpack` (an LU
//! solve, as HPL), each on an engine, peakbench's own or a BLAS the machine has.
//!
//! The modules, each using only those listed before it:
//!
//! * [`builtin`]: peakbench's own engine, a GEMM built as BLIS builds them and an LU over it;
//! * [`engine`]: what the operations share about an engine: loading a BLAS and LAPACK, naming
//!   engines, the memory check, the multiply and its check, the probe that picks the fastest for
//!   `--blas auto`, and what a result says of the engine that ran;
//! * [`args`]: the flags both commands take (`--n`, `--threads`, `--precision`, `--blas`);
//! * [`case`]: the case both commands plan (an order on a thread count, in one precision, on one
//!   engine), its id, estimate and plan, generic over the [`case::Operation`];
//! * [`gemm`] and [`linpack`]: the two operations: what a repetition computes, times and
//!   checks, and how its FLOPs are counted.

pub(crate) mod args;
pub mod builtin;
pub mod case;
pub mod engine;
pub(crate) mod gemm;
pub mod linpack;

#[cfg(test)]
mod tests {
    use super::gemm::Gemm;
    use super::linpack::Linpack;
    use crate::plan::Context;
    use crate::workload::plan_for;

    /// `cpu gemm -p f64,f32` plans a case per precision (f64's ids as with f64 alone), only f64
    /// and f32 are taken, and `--blas PATH` is checked before anything opens.
    #[test]
    fn gemm_plans_each_precision_and_checks_a_blas_path() {
        let ctx = Context::fixture();
        let ids = |argv: &[&str]| -> Vec<String> {
            plan_for::<Gemm>(argv, &ctx)
                .unwrap()
                .cases
                .iter()
                .map(|c| c.spec().id)
                .collect()
        };
        assert_eq!(
            ids(&["gemm", "-n", "100", "-t", "1", "--blas", "builtin"]),
            ["cpu-gemm-n100-t1"]
        );
        assert_eq!(
            ids(&[
                "gemm", "-p", "F64,f32", "-n", "100", "-t", "1", "--blas", "builtin"
            ]),
            ["cpu-gemm-n100-t1", "cpu-gemm-f32-n100-t1"]
        );
        let refused = plan_for::<Gemm>(&["gemm", "-p", "f16"], &ctx)
            .err()
            .unwrap();
        assert!(refused.to_string().contains("--precision"), "{refused}");
        let missing = plan_for::<Gemm>(&["gemm", "--blas", "/nonexistent/libblas.so"], &ctx)
            .err()
            .unwrap();
        assert!(missing.is::<crate::error::UsageError>());
        assert!(
            missing
                .to_string()
                .starts_with("--blas /nonexistent/libblas.so: no such file;"),
            "{missing}"
        );
        let linpack = plan_for::<Linpack>(&["linpack", "--blas", "/nonexistent/x.so"], &ctx)
            .err()
            .unwrap();
        assert!(
            linpack.to_string().starts_with("--blas /nonexistent/x.so"),
            "{linpack}"
        );
    }

    #[test]
    fn linpack_refuses_an_order_beyond_the_memory() {
        let ctx = Context::fixture();
        let e = plan_for::<Linpack>(&["linpack", "-n", "100000"], &ctx)
            .err()
            .unwrap();
        assert!(e.to_string().starts_with("--n: 100000 needs"), "{e}");
        assert_eq!(
            plan_for::<Linpack>(&["linpack", "-n", "1000,1000", "-t", "1,2"], &ctx)
                .unwrap()
                .cases
                .len(),
            2
        );
    }
}
