//! C = A·B on an engine, and the check of a product: what one repetition of `cpu gemm` times
//! and what the probe of `--blas auto` ([`super::probe`]) measures.
//!
//! FLOPs are counted as every BLAS benchmark counts them, 2·n³ per multiply (n³ multiplies and
//! n³ adds), whatever the library really executes. The check recomputes [`CHECKED_ENTRIES`]
//! entries of C, at random places, by a plain dot product in f64; each must agree within
//! 2·n·ε·Σ|aᵢₖ·bₖⱼ| (the forward error bound of a dot product, with ε of the element type:
//! 2⁻⁵² for f64, 2⁻²³ for f32), so an engine that skipped work cannot pass.

use anyhow::{Result, bail};
use faer::{Accum, MatMut, MatRef, Par};

use super::blas::{Blas, BlasElement};
use crate::cpu::dense::builtin::dgemm::BuiltinGemm;
use crate::rng::Rng;

/// Entries of C recomputed after every multiply.
pub const CHECKED_ENTRIES: usize = 16;

/// FLOPs of one n × n multiply.
pub fn flops(n: u64) -> f64 {
    2.0 * (n as f64).powi(3)
}

/// A random n × n column-major matrix, entries uniform in [−0.5, 0.5).
pub fn random_matrix<T: BlasElement>(n: usize, rng: &mut Rng) -> Vec<T> {
    (0..n * n)
        .map(|_| T::from_f64(rng.centered_f64()))
        .collect()
}

/// Recomputes `CHECKED_ENTRIES` entries of C = A·B in f64; the largest error relative to its
/// bound, 2nε·Σ|aᵢₖbₖⱼ| with ε of T.
pub fn check<T: BlasElement>(n: usize, a: &[T], b: &[T], c: &[T], seed: u64) -> Result<f64> {
    let mut rng = Rng::new(seed);
    let mut worst: f64 = 0.0;
    for _ in 0..CHECKED_ENTRIES {
        let (i, j) = (rng.index(n), rng.index(n));
        let (mut sum, mut magnitude) = (0.0f64, 0.0f64);
        for k in 0..n {
            let p = a[i + k * n].to_f64() * b[k + j * n].to_f64();
            sum += p;
            magnitude += p.abs();
        }
        let bound = 2.0 * n as f64 * T::EPSILON * magnitude;
        let got = c[i + j * n].to_f64();
        let error = (got - sum).abs();
        if error.is_nan() || error > bound {
            bail!(
                "{}gemm n = {n}: C({i},{j}) = {got} where the dot product gives {sum} (error {error:.3e} > bound {bound:.3e}): the multiply is wrong",
                &T::ROUTINE[..1]
            );
        }
        if bound > 0.0 {
            worst = worst.max(error / bound);
        }
    }
    Ok(worst)
}

/// C = A·B for n × n column-major matrices, by the library's dgemm_/sgemm_ or (`None`)
/// peakbench's own ([`BuiltinGemm::current`]), on `threads` threads of the current rayon pool.
pub fn multiply<T: BlasElement>(
    library: Option<&Blas>,
    n: usize,
    a: &[T],
    b: &[T],
    c: &mut [T],
    threads: usize,
) -> Result<()> {
    match library {
        Some(blas) => blas.gemm(n, a, b, c),
        None => {
            BuiltinGemm::<T>::current().gemm(
                (n, n, n),
                T::ONE,
                (&a[..n * n], n),
                (&b[..n * n], n),
                T::ZERO,
                (&mut c[..n * n], n),
                threads > 1,
            );
            Ok(())
        }
    }
}

/// C = A·B by faer's `matmul` (for comparisons: `examples/dense_cycles.rs`).
pub fn faer_multiply(n: usize, a: &[f64], b: &[f64], c: &mut [f64], threads: usize) {
    let par = if threads == 1 {
        Par::Seq
    } else {
        Par::rayon(threads)
    };
    faer::linalg::matmul::matmul(
        MatMut::from_column_major_slice_mut(&mut c[..n * n], n, n),
        Accum::Replace,
        MatRef::from_column_major_slice(&a[..n * n], n, n),
        MatRef::from_column_major_slice(&b[..n * n], n, n),
        1.0,
        par,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_accepts_a_right_product_and_refuses_a_wrong_one() {
        let n = 40;
        let mut rng = Rng::new(3);
        let (a, b): (Vec<f64>, Vec<f64>) = (random_matrix(n, &mut rng), random_matrix(n, &mut rng));
        let mut c = vec![0.0; n * n];
        for j in 0..n {
            for i in 0..n {
                c[i + j * n] = (0..n).map(|k| a[i + k * n] * b[k + j * n]).sum();
            }
        }
        assert!(check(n, &a, &b, &c, 1).unwrap() <= 1.0);
        // Every entry off by a little more than the bound allows: any sample catches it.
        let wrong: Vec<f64> = c.iter().map(|x| x + 1e-9).collect();
        assert!(check(n, &a, &b, &wrong, 1).is_err());
    }

    /// The f32 check's bound is f32's: a product computed in f32 passes, one off by a few
    /// thousandths of its size fails, and an f64 product rounded to f32 passes.
    #[test]
    fn the_f32_check_has_an_f32_bound() {
        let n = 40;
        let mut rng = Rng::new(4);
        let (a, b): (Vec<f32>, Vec<f32>) = (random_matrix(n, &mut rng), random_matrix(n, &mut rng));
        let mut c = vec![0.0f32; n * n];
        for j in 0..n {
            for i in 0..n {
                c[i + j * n] = (0..n).map(|k| a[i + k * n] * b[k + j * n]).sum();
            }
        }
        assert!(check(n, &a, &b, &c, 1).unwrap() <= 1.0);
        let wrong: Vec<f32> = c.iter().map(|x| x + 1e-3).collect();
        assert!(check(n, &a, &b, &wrong, 1).is_err());
    }
}
