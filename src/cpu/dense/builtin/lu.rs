//! peakbench's own LU factorisation with partial pivoting, computed as HPL computes it.
//!
//! The matrix (n × n, column-major, leading dimension n) is factored in place by a blocked,
//! right-looking algorithm over panels of `nb` columns:
//!
//! * **Panel**: recursive, as HPL's `RFACT`/`PFACT` with `NDIV = 2`: the left half of the
//!   panel is factored, its row swaps applied to the right half, the right half's top rows
//!   solved against the left half's unit lower triangle and its lower rows updated by one
//!   multiply, then the right half is factored the same way, down to [`LEAF`] columns, which
//!   are factored column by column.
//! * **Trailing update**, in two phases over every column to the right of the panel: first
//!   the panel's row swaps and the triangular solve of its top rows (`U₁₂ = L₁₁⁻¹ A₁₂`), in
//!   parallel column blocks; then the multiply `A₂₂ −= L₂₁ U₁₂` by the built-in GEMM spread
//!   over all threads by rows (U₁₂ packed once for all of them; L₂₁ once per row block).
//!   An update split into column blocks, one task each, packed L₂₁ again in every block and
//!   left threads idle when the last blocks ended unevenly: 8 % slower at n = 10 000 on 2
//!   threads.
//! * **Look-ahead of depth 1**: the columns of the next panel are multiplied first (by all
//!   threads); then the next panel is factored on one thread *while* the rest of the trailing
//!   matrix is multiplied on the others, and the panel's thread joins that multiply when it is
//!   done, so the panel, which is sequential, leaves the critical path.
//! * The row swaps of later panels are applied to the columns left of them once, at the end,
//!   in parallel.
//!
//! The trailing updates' multiplies, nearly all the FLOPs, are peakbench's own GEMM
//! ([`super::dgemm`]); the multiplies inside the recursive panel (under 3 % of the FLOPs at
//! n = 10 000) and the triangular solves are faer's, run sequentially inside each task. The
//! same code factors f64 (as `dgetrf`) and f32 (as `sgetrf`).

use std::time::Instant;

use anyhow::{Result, bail};
use faer::linalg::triangular_solve::{
    solve_unit_lower_triangular_in_place, solve_upper_triangular_in_place,
};
use faer::traits::ComplexField;
use faer::{Accum, MatMut, MatRef, Par};

use super::dgemm::{BuiltinGemm, Element};
use rayon::prelude::*;

/// An element the LU factors: one the built-in GEMM multiplies and faer solves in (f64, f32).
pub trait LuElement: Element + ComplexField {}

impl<T: Element + ComplexField> LuElement for T {}

/// Columns below which a panel is factored column by column instead of split in two.
pub const LEAF: usize = 8;

/// The panel width: HPL's NB. A rank-`nb` update is as fast as a square multiply from about
/// 192 columns on (the micro-kernel's packed `k` depth); wider panels lengthen the sequential
/// panel factorisation, which look-ahead must hide.
pub const NB: usize = 256;

/// What the engine says of itself in results, factoring elements T.
pub fn engine_text<T: Element>(nb: usize) -> String {
    format!(
        "peakbench LU {} (right-looking, NB={nb}, recursive panel, look-ahead 1); trailing updates by {}; panel and triangular solves by faer {}",
        env!("CARGO_PKG_VERSION"),
        BuiltinGemm::<T>::current().describe(),
        super::FAER_VERSION
    )
}

/// Where the time of one solve went, in seconds of the thread that drives it (the phases follow
/// each other, so they add up to the solve's time), and the panel's own time on the thread that
/// factors it beside the multiply.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct LuProfile {
    /// The first panel, factored before anything else can start (one thread).
    pub first_panel_s: f64,
    /// Each step's row swaps and U₁₂ = L₁₁⁻¹A₁₂ over the columns right of its panel (all
    /// threads).
    pub swaps_and_solve_s: f64,
    /// The look-ahead: the multiply of the next panel's columns (all threads).
    pub next_panel_update_s: f64,
    /// The rest of each step's multiply, with the next panel factored beside it on one thread,
    /// until both have ended.
    pub update_beside_panel_s: f64,
    /// Of that, the time the panels took on their own thread.
    pub panel_s: f64,
    /// Of that, the time the multiply had ended and the step still waited for its panel: the
    /// panel on the critical path.
    pub panel_exposed_s: f64,
    /// The row swaps applied left of each panel at the end (all threads).
    pub final_swaps_s: f64,
    /// The two triangular solves for x after the factorisation.
    pub triangular_solves_s: f64,
}

impl LuProfile {
    /// The sum of the phases: the solve's time as its driving thread saw it.
    pub fn total_s(&self) -> f64 {
        self.first_panel_s
            + self.swaps_and_solve_s
            + self.next_panel_update_s
            + self.update_beside_panel_s
            + self.final_swaps_s
            + self.triangular_solves_s
    }

    /// Adds another solve's times.
    pub fn add(&mut self, other: &LuProfile) {
        self.first_panel_s += other.first_panel_s;
        self.swaps_and_solve_s += other.swaps_and_solve_s;
        self.next_panel_update_s += other.next_panel_update_s;
        self.update_beside_panel_s += other.update_beside_panel_s;
        self.panel_s += other.panel_s;
        self.panel_exposed_s += other.panel_exposed_s;
        self.final_swaps_s += other.final_swaps_s;
        self.triangular_solves_s += other.triangular_solves_s;
    }

    /// The split as results state it: each phase's share of the total, e.g. "multiply beside
    /// the panel 88 % (panel 21 % on one thread, 0.4 % waited for)".
    pub fn describe(&self) -> String {
        let total = self.total_s();
        if total <= 0.0 {
            return "no time measured".into();
        }
        let pct = |s: f64| format!("{:.1} %", 100.0 * s / total);
        format!(
            "of {total:.3} s: first panel {}, row swaps and U12 solves {}, look-ahead multiply \
             of the next panel's columns {}, multiply beside the next panel {} (the panel {} \
             on one thread, {} waited for), final row swaps {}, triangular solves for x {}",
            pct(self.first_panel_s),
            pct(self.swaps_and_solve_s),
            pct(self.next_panel_update_s),
            pct(self.update_beside_panel_s),
            pct(self.panel_s),
            pct(self.panel_exposed_s),
            pct(self.final_swaps_s),
            pct(self.triangular_solves_s),
        )
    }
}

/// A factorisation that met an exactly zero pivot: U(j, j) = 0, A is singular.
#[derive(Debug)]
pub struct Singular {
    /// The column (from 0) whose pivot is zero.
    pub column: usize,
}

/// Factors the n × n column-major `a` in place into P·A = L·U (L unit lower, U upper, both in
/// `a`); `piv[i]` is the row swapped with row i at step i (LAPACK's `ipiv`, from 0). Runs on
/// the current rayon pool. Err names the first zero pivot.
pub fn factor<T: LuElement>(
    a: &mut [T],
    n: usize,
    piv: &mut [usize],
    nb: usize,
) -> Result<(), Singular> {
    factor_timed(a, n, piv, nb, &mut LuProfile::default())
}

/// [`factor`], adding the time of each phase to `profile`.
fn factor_timed<T: LuElement>(
    a: &mut [T],
    n: usize,
    piv: &mut [usize],
    nb: usize,
    profile: &mut LuProfile,
) -> Result<(), Singular> {
    assert!(
        a.len() >= n * n && piv.len() >= n,
        "lu::factor: buffers smaller than n"
    );
    if n == 0 {
        return Ok(());
    }
    let a = &mut a[..n * n];
    let nb = nb.max(1);
    let mut zero: Option<usize> = None;
    let mut note = |r: Result<(), Singular>| {
        if let Err(s) = r {
            zero = Some(zero.map_or(s.column, |z| z.min(s.column)));
        }
    };
    let clock = Instant::now();
    note(factor_panel(
        &mut a[..nb.min(n) * n],
        n,
        0,
        &mut piv[..nb.min(n)],
    ));
    profile.first_panel_s += clock.elapsed().as_secs_f64();
    let threads = rayon::current_num_threads();
    // U₁₂ of one step (kb × the columns right of its panel), allocated once.
    let mut u = vec![T::ZERO; nb.min(n) * n];
    let mut k = 0;
    while k < n {
        let kb = nb.min(n - k);
        let next = k + kb;
        if next >= n {
            break;
        }
        let (done, trailing) = a.split_at_mut(next * n);
        let panel = &done[k * n..];
        let (earlier, later) = piv.split_at_mut(next);
        let pivots = &earlier[k..];
        let cols = trailing.len() / n;
        // Every column right of the panel: its row swaps and U₁₂ = L₁₁⁻¹ A₁₂, in parallel
        // blocks, U₁₂ copied out for the multiplies.
        let u = &mut u[..kb * cols];
        let width = cols.div_ceil(4 * threads).max(1);
        let clock = Instant::now();
        trailing
            .par_chunks_mut(width * n)
            .zip(u.par_chunks_mut(width * kb))
            .for_each(|(cols, u)| solve_rows(panel, n, k, pivots, cols, u));
        let solved = Instant::now();
        profile.swaps_and_solve_s += (solved - clock).as_secs_f64();
        let next_b = nb.min(n - next);
        let (next_cols, rest) = trailing.split_at_mut(next_b * n);
        let (u_next, u_rest) = u.split_at(next_b * kb);
        // Look-ahead: the next panel's columns are brought up to date first, by all threads;
        // then the panel is factored on one thread while the others multiply the rest, which
        // the panel's thread joins when it is done.
        multiply(panel, n, k, u_next, next_cols);
        let updated = Instant::now();
        profile.next_panel_update_s += (updated - solved).as_secs_f64();
        let next_piv = &mut later[..next_b];
        let ((factored, panel_end), multiply_end) = rayon::join(
            || (factor_panel(next_cols, n, next, next_piv), Instant::now()),
            || {
                multiply(panel, n, k, u_rest, rest);
                Instant::now()
            },
        );
        let joined = Instant::now();
        profile.update_beside_panel_s += (joined - updated).as_secs_f64();
        profile.panel_s += (panel_end - updated).as_secs_f64();
        profile.panel_exposed_s += panel_end
            .saturating_duration_since(multiply_end)
            .as_secs_f64();
        note(factored);
        k = next;
    }
    // The row swaps of each panel, applied to the columns left of it.
    let clock = Instant::now();
    let piv = &piv[..n];
    a.par_chunks_mut(n).enumerate().for_each(|(j, col)| {
        let from = (j / nb + 1) * nb;
        for (i, &p) in piv.iter().enumerate().skip(from) {
            col.swap(i, p);
        }
    });
    profile.final_swaps_s += clock.elapsed().as_secs_f64();
    match zero {
        Some(column) => Err(Singular { column }),
        None => Ok(()),
    }
}

/// The first half of bringing the columns `cols` (full height n) up to date with the panel of
/// columns k..k+kb (`panel`, full height, its pivots `pivots`): the row swaps and
/// `U₁₂ = L₁₁⁻¹ A₁₂`, U₁₂ also copied to `u` (kb × the columns, leading dimension kb), where
/// the multiply reads it while it writes A₂₂ in the same columns.
fn solve_rows<T: LuElement>(
    panel: &[T],
    n: usize,
    k: usize,
    pivots: &[usize],
    cols: &mut [T],
    u: &mut [T],
) {
    let kb = pivots.len();
    let w = cols.len() / n;
    for col in cols.chunks_mut(n) {
        for (i, &p) in pivots.iter().enumerate() {
            col.swap(k + i, p);
        }
    }
    let l = MatRef::from_column_major_slice_with_stride(panel, n, kb, n);
    let c = MatMut::from_column_major_slice_with_stride_mut(cols, n, w, n);
    let l11 = l.subrows(k, kb);
    let mut u12 = c.subrows_mut(k, kb);
    solve_unit_lower_triangular_in_place(l11, u12.as_mut(), Par::Seq);
    for (col, out) in cols.chunks(n).zip(u.chunks_mut(kb)) {
        out.copy_from_slice(&col[k..k + kb]);
    }
}

/// The second half: `A₂₂ −= L₂₁ U₁₂` for the columns `cols`, U₁₂ in `u` (kb × the columns),
/// by the built-in GEMM spread over the rayon pool (the rows of A₂₂ shared out, U₁₂ packed
/// once for all of them).
fn multiply<T: LuElement>(panel: &[T], n: usize, k: usize, u: &[T], cols: &mut [T]) {
    let w = cols.len() / n;
    let kb = u.len() / w.max(1);
    let rows = n - k - kb;
    if rows == 0 || w == 0 {
        return;
    }
    BuiltinGemm::<T>::current().gemm(
        (rows, w, kb),
        T::from_f64(-1.0),
        (&panel[k + kb..], n),
        (u, kb),
        T::ONE,
        (&mut cols[k + kb..], n),
        true,
    );
}

/// Factors the panel `cols` (its columns full height n; rows k.. are factored) and writes its
/// pivots as absolute rows.
fn factor_panel<T: LuElement>(
    cols: &mut [T],
    n: usize,
    k: usize,
    piv: &mut [usize],
) -> Result<(), Singular> {
    let w = cols.len() / n;
    let a = MatMut::from_column_major_slice_with_stride_mut(cols, n, w, n);
    let result = recursive(a.subrows_mut(k, n - k), piv);
    for p in piv.iter_mut() {
        *p += k;
    }
    result.map_err(|s| Singular {
        column: s.column + k,
    })
}

/// Recursive LU of an m × w block (m ≥ w); pivots relative to its first row.
fn recursive<T: LuElement>(mut a: MatMut<'_, T>, piv: &mut [usize]) -> Result<(), Singular> {
    let w = a.ncols();
    if w <= LEAF {
        return leaf(a, piv);
    }
    let w1 = w / 2;
    let (mut left, mut right) = a.as_mut().split_at_col_mut(w1);
    let (piv1, piv2) = piv.split_at_mut(w1);
    let first = recursive(left.as_mut(), piv1);
    swap_rows(right.as_mut(), piv1, 0);
    let (l11, l21) = left.as_ref().split_at_row(w1);
    let (mut u12, a22) = right.split_at_row_mut(w1);
    solve_unit_lower_triangular_in_place(l11, u12.as_mut(), Par::Seq);
    faer::linalg::matmul::matmul(
        a22,
        Accum::Add,
        l21,
        u12.as_ref(),
        T::from_f64(-1.0),
        Par::Seq,
    );
    let (_, right_bottom) = a.as_mut().split_at_col_mut(w1).1.split_at_row_mut(w1);
    let second = recursive(right_bottom, piv2);
    let (_, left_bottom) = a.as_mut().split_at_col_mut(w1).0.split_at_row_mut(w1);
    swap_rows(left_bottom, piv2, 0);
    for p in piv2.iter_mut() {
        *p += w1;
    }
    first.and(second.map_err(|s| Singular {
        column: s.column + w1,
    }))
}

/// Unblocked right-looking LU of an m × w block, column by column. (Magnitudes are compared
/// as f64, exact for f32 and f64.)
fn leaf<T: LuElement>(mut a: MatMut<'_, T>, piv: &mut [usize]) -> Result<(), Singular> {
    let (m, w) = (a.nrows(), a.ncols());
    let mut zero = None;
    for j in 0..w.min(m) {
        let mut p = j;
        let mut best = a[(j, j)].to_f64().abs();
        for i in j + 1..m {
            let v = a[(i, j)].to_f64().abs();
            if v > best {
                best = v;
                p = i;
            }
        }
        piv[j] = p;
        if p != j {
            for c in 0..w {
                let t = a[(j, c)];
                a[(j, c)] = a[(p, c)];
                a[(p, c)] = t;
            }
        }
        let pivot = a[(j, j)];
        if pivot == T::ZERO {
            zero.get_or_insert(j);
            continue;
        }
        let inverse = T::ONE / pivot;
        for i in j + 1..m {
            a[(i, j)] *= inverse;
        }
        for c in j + 1..w {
            let u = a[(j, c)];
            if u != T::ZERO {
                for i in j + 1..m {
                    let l = a[(i, j)];
                    a[(i, c)] -= l * u;
                }
            }
        }
    }
    match zero {
        Some(column) => Err(Singular { column }),
        None => Ok(()),
    }
}

/// Swaps row `i + offset` with row `piv[i] + offset` of `a`, for each i in order.
fn swap_rows<T: LuElement>(mut a: MatMut<'_, T>, piv: &[usize], offset: usize) {
    for c in 0..a.ncols() {
        for (i, &p) in piv.iter().enumerate() {
            let (i, p) = (i + offset, p + offset);
            if i != p {
                let t = a[(i, c)];
                a[(i, c)] = a[(p, c)];
                a[(p, c)] = t;
            }
        }
    }
}

/// Solves A x = b in place from the factors of [`factor`]: the row swaps, L y = P b, U x = y.
pub fn solve<T: LuElement>(lu: &[T], n: usize, piv: &[usize], b: &mut [T], par: Par) {
    for (i, &p) in piv[..n].iter().enumerate() {
        b.swap(i, p);
    }
    let f = MatRef::from_column_major_slice(&lu[..n * n], n, n);
    let mut x = MatMut::from_column_major_slice_mut(&mut b[..n], n, 1);
    solve_unit_lower_triangular_in_place(f, x.as_mut(), par);
    solve_upper_triangular_in_place(f, x, par);
}

/// Factors and solves, the whole timed work of a Linpack repetition: `a` becomes the factors,
/// `b` the solution, and the time of each phase is returned. Err when A is singular.
pub fn factor_and_solve<T: LuElement>(
    a: &mut [T],
    n: usize,
    b: &mut [T],
    piv: &mut [usize],
    nb: usize,
) -> Result<LuProfile> {
    let mut profile = LuProfile::default();
    if let Err(s) = factor_timed(a, n, piv, nb, &mut profile) {
        bail!(
            "the matrix is singular: U({0},{0}) is exactly zero after partial pivoting (column {0}, from 0)",
            s.column
        );
    }
    let par = match rayon::current_num_threads() {
        1 => Par::Seq,
        t => Par::rayon(t),
    };
    let clock = Instant::now();
    solve(a, n, piv, b, par);
    profile.triangular_solves_s = clock.elapsed().as_secs_f64();
    Ok(profile)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    /// P·A = L·U checked entry by entry against the original, by a plain triple loop in f64,
    /// within 64·n·ε of T times A's largest entry.
    fn check_factors<T: LuElement>(original: &[T], lu: &[T], piv: &[usize], n: usize) {
        let mut pa: Vec<f64> = original.iter().map(|v| v.to_f64()).collect();
        let lu: Vec<f64> = lu.iter().map(|v| v.to_f64()).collect();
        for (i, &p) in piv.iter().enumerate() {
            for j in 0..n {
                pa.swap(i + j * n, p + j * n);
            }
        }
        let scale = pa.iter().fold(0.0f64, |m, v| m.max(v.abs())) * n as f64;
        for j in 0..n {
            for i in 0..n {
                let mut sum = 0.0;
                for t in 0..=i.min(j) {
                    let l = if t == i { 1.0 } else { lu[i + t * n] };
                    sum += l * lu[t + j * n];
                }
                let err = (sum - pa[i + j * n]).abs();
                assert!(
                    err <= 64.0 * T::EPSILON * scale,
                    "{} n={n}: (PA − LU)({i},{j}) = {err:e}",
                    T::NAME
                );
            }
        }
        for j in 0..n {
            for i in j + 1..n {
                assert!(lu[i + j * n].abs() <= 1.0 + 1e-12, "|L({i},{j})| > 1");
            }
        }
    }

    fn random<T: LuElement>(n: usize, seed: u64) -> Vec<T> {
        let mut rng = Rng::new(seed);
        (0..n * n)
            .map(|_| T::from_f64(rng.centered_f64()))
            .collect()
    }

    #[test]
    fn factors_match_a_naive_product_at_odd_sizes_and_blocks() {
        odd_sizes::<f64>();
        odd_sizes::<f32>();
    }

    fn odd_sizes<T: LuElement>() {
        for (n, nb) in [
            (1, 4),
            (2, 4),
            (3, 2),
            (17, 4),
            (33, 8),
            (127, 16),
            (130, 32),
        ] {
            let a = random::<T>(n, n as u64);
            let mut lu = a.clone();
            let mut piv = vec![0; n];
            factor(&mut lu, n, &mut piv, nb).unwrap();
            check_factors(&a, &lu, &piv, n);
        }
    }

    #[test]
    fn factors_with_the_own_dgemm_match_a_naive_product() {
        // n = 300 and NB = 64: four panels, so most of L·U comes from the trailing updates.
        let n = 300;
        let a = random::<f64>(n, 21);
        let mut lu = a.clone();
        let mut piv = vec![0; n];
        factor(&mut lu, n, &mut piv, 64).unwrap();
        check_factors(&a, &lu, &piv, n);
    }

    #[test]
    fn the_profile_splits_the_solve_into_phases_that_add_up() {
        let n = 300;
        let mut a = random::<f64>(n, 4);
        let mut b = vec![1.0; n];
        let mut piv = vec![0; n];
        let p = factor_and_solve(&mut a, n, &mut b, &mut piv, 64).unwrap();
        assert!(
            p.first_panel_s > 0.0 && p.update_beside_panel_s > 0.0,
            "{p:?}"
        );
        assert!(p.panel_exposed_s <= p.panel_s, "{p:?}");
        let text = p.describe();
        assert!(text.contains("first panel") && text.contains('%'), "{text}");
        let mut twice = p;
        twice.add(&p);
        assert!((twice.total_s() - 2.0 * p.total_s()).abs() < 1e-12);
    }

    #[test]
    fn pivots_pick_the_largest_entry() {
        // Column 0 is [1, 3, 2]: row 1 must be the first pivot.
        let a = [1.0, 3.0, 2.0, 4.0, 1.0, 0.5, 2.0, 2.0, 9.0];
        let mut lu = a;
        let mut piv = [0; 3];
        factor(&mut lu, 3, &mut piv, 2).unwrap();
        assert_eq!(piv[0], 1);
        check_factors(&a, &lu, &piv, 3);
    }

    #[test]
    fn a_singular_matrix_is_refused() {
        // A zero column stays exactly zero through every update: U(5,5) = 0 in the blocked
        // path (several panels) and the solve refuses it.
        let n = 40;
        let mut a = random::<f64>(n, 9);
        a[5 * n..6 * n].fill(0.0);
        let mut piv = vec![0; n];
        assert_eq!(
            factor(&mut a.clone(), n, &mut piv, 8).unwrap_err().column,
            5
        );
        let mut b = vec![1.0; n];
        let err = factor_and_solve(&mut a, n, &mut b, &mut piv, 8).unwrap_err();
        assert!(err.to_string().contains("singular"), "{err}");
        assert_eq!(
            factor(&mut [0.0f64; 9], 3, &mut [0; 3], 2)
                .unwrap_err()
                .column,
            0
        );
        // The same in f32.
        let mut a = random::<f32>(n, 9);
        a[5 * n..6 * n].fill(0.0);
        let mut b = vec![1.0f32; n];
        let err = factor_and_solve(&mut a, n, &mut b, &mut piv, 8).unwrap_err();
        assert!(err.to_string().contains("U(5,5)"), "{err}");
    }
}
