//! Packing for the built-in GEMM: the blocks of A and B are copied into micro-panels laid out
//! in the order the micro-kernels read them (zero-padded at the edges, so every kernel runs on
//! whole tiles), and the next B micro-panel is fetched into L2 while the current one is in use.

use super::micro::{prefetch, prefetch_l2};

/// Packs rows `ic..ic + mb` of A's columns `pc..pc + kb` into `dst`, as ⌈mb/MR⌉ micro-panels
/// of kb × MR values (for each column, MR consecutive rows), the last zero-padded below mb.
///
/// A is read down each column, so its reads are sequential runs of mb values rather than MR
/// values from kb columns a leading dimension apart; the copies are of MR values known at
/// compile time, so they are vector moves, not a `memmove` call each (which cost 3 % of a
/// 1-thread n = 4000 DGEMM). `mr` is one of the kernels' MR values.
pub(super) fn pack_a<T: Copy + Default>(
    a: &[T],
    lda: usize,
    (ic, mb): (usize, usize),
    (pc, kb): (usize, usize),
    mr: usize,
    dst: &mut [T],
) {
    let pack = match mr {
        4 => pack_a_by::<T, 4>,
        8 => pack_a_by::<T, 8>,
        16 => pack_a_by::<T, 16>,
        24 => pack_a_by::<T, 24>,
        48 => pack_a_by::<T, 48>,
        _ => unreachable!("no kernel has MR = {mr}"),
    };
    pack(a, lda, (ic, mb), (pc, kb), dst)
}

/// How many columns ahead [`pack_a`] asks for A's lines: each column is a run of mb values a
/// leading dimension from the next, too short for the hardware's stream prefetcher to follow.
const PACK_AHEAD: usize = 8;

fn pack_a_by<T: Copy + Default, const MR: usize>(
    a: &[T],
    lda: usize,
    (ic, mb): (usize, usize),
    (pc, kb): (usize, usize),
    dst: &mut [T],
) {
    let full = mb / MR;
    for p in 0..kb {
        if p + PACK_AHEAD < kb {
            let ahead = &a[ic + (pc + p + PACK_AHEAD) * lda..][..mb];
            for line in ahead.iter().step_by(64 / std::mem::size_of::<T>()) {
                prefetch(line);
            }
        }
        let column = &a[ic + (pc + p) * lda..][..mb];
        let mut chunks = column.chunks_exact(MR);
        for (t, src) in (&mut chunks).enumerate() {
            let out: &mut [T; MR] = (&mut dst[(t * kb + p) * MR..][..MR]).try_into().unwrap();
            *out = src.try_into().unwrap();
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let out = &mut dst[(full * kb + p) * MR..][..MR];
            out[..rest.len()].copy_from_slice(rest);
            out[rest.len()..].fill(T::default());
        }
    }
}

/// Packs columns `col..col + cols` (≤ NR) of B's rows `pc..pc + kb` into `dst`: for each row,
/// NR consecutive values, zero-padded right of `cols`. `nr` is one of the kernels' NR values.
#[allow(clippy::too_many_arguments)]
pub(super) fn pack_b<T: Copy + Default>(
    b: &[T],
    ldb: usize,
    pc: usize,
    kb: usize,
    col: usize,
    cols: usize,
    nr: usize,
    dst: &mut [T],
) {
    let pack = match nr {
        4 => pack_b_by::<T, 4>,
        6 => pack_b_by::<T, 6>,
        8 => pack_b_by::<T, 8>,
        _ => unreachable!("no kernel has NR = {nr}"),
    };
    pack(b, ldb, (pc, kb), (col, cols), dst)
}

/// [`pack_b`] with NR known: the NR columns are read side by side and each row of the panel
/// written whole.
fn pack_b_by<T: Copy + Default, const NR: usize>(
    b: &[T],
    ldb: usize,
    (pc, kb): (usize, usize),
    (col, cols): (usize, usize),
    dst: &mut [T],
) {
    let empty: &[T] = &[];
    let columns: [&[T]; NR] = std::array::from_fn(|j| {
        if j < cols {
            &b[pc + (col + j) * ldb..][..kb]
        } else {
            empty
        }
    });
    for (p, out) in dst[..kb * NR].chunks_exact_mut(NR).enumerate() {
        let out: &mut [T; NR] = out.try_into().unwrap();
        if cols == NR {
            *out = std::array::from_fn(|j| columns[j][p]);
        } else {
            *out = std::array::from_fn(|j| columns[j].get(p).copied().unwrap_or(T::default()));
        }
    }
}

/// A pack buffer aligned to 64 bytes (a cache line, a zmm register), grown as needed.
pub struct Aligned<T>(Vec<T>);

impl<T> Aligned<T> {
    /// An empty buffer.
    pub const fn new() -> Aligned<T> {
        Aligned(Vec::new())
    }
}

impl<T: Copy + Default> Aligned<T> {
    /// `len` values starting at a 64-byte boundary.
    pub(super) fn slice(&mut self, len: usize) -> &mut [T] {
        let line = 64 / std::mem::size_of::<T>();
        if self.0.len() < len + line {
            self.0.resize(len + line, T::default());
        }
        let skip = self.0.as_ptr().align_offset(64).min(line - 1);
        &mut self.0[skip..skip + len]
    }
}

/// Asks for the `t`-th of `parts` shares of `panel` in L2: the next B micro-panel, a share
/// before each tile of the current one, so that it is in L2 when its first tile starts
/// instead of streaming from L3 or DRAM at the speed one tile consumes it.
#[inline(always)]
pub(super) fn prefetch_share<T>(panel: &[T], t: usize, parts: usize) {
    let base = panel.as_ptr() as *const u8;
    for offset in share_lines(std::mem::size_of_val(panel), t, parts) {
        // SAFETY: offset < the panel's length in bytes, so the address is inside it.
        prefetch_l2(unsafe { base.add(offset) });
    }
}

/// The byte offsets, one per 64-byte line, of the `t`-th of `parts` shares of `bytes` bytes.
fn share_lines(bytes: usize, t: usize, parts: usize) -> impl Iterator<Item = usize> {
    let (from, to) = (bytes * t / parts, bytes * (t + 1) / parts);
    (from & !63..to).step_by(64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shares_of_a_prefetched_panel_cover_each_line_inside_it() {
        for (bytes, parts) in [(16_128, 12), (64, 5), (100, 3), (0, 4), (8 * 336 * 6, 1)] {
            let mut lines: Vec<usize> = (0..parts)
                .flat_map(|t| share_lines(bytes, t, parts))
                .collect();
            assert!(
                lines.iter().all(|&o| o < bytes && o % 64 == 0),
                "{bytes}/{parts}"
            );
            lines.dedup();
            let every: Vec<usize> = (0..bytes).step_by(64).collect();
            assert_eq!(lines, every, "{bytes} bytes in {parts} shares");
        }
    }
}
