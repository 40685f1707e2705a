//! The memory kernels: what one access does, with explicit AVX-512 where the CPU has it, explicit
//! AVX2 (with FMA) where it has that, and portable Rust elsewhere, chosen at run time. The
//! portable code is compiled for the baseline x86-64 (SSE2): 16-byte loads, a quarter of what an
//! AVX-512 core loads per cycle, which is why the AVX2 family exists.
//!
//! Reads fold every 8-byte word they load into a sum (the checksum) with independent
//! accumulators, so that the adds never wait on each other; the checksum is compared with its
//! closed form after the run, so the loads cannot be removed. The AVX-512 kernel adds the words
//! as `f64`: on a Golden Cove server core a 512-bit load folded into a floating-point add
//! issues about 1.2 times as often as one folded into an integer add (docs/memory.md). Its
//! sources hold [`READ_WORD`], a small whole number, so every partial sum is exact and the order
//! of the adds does not matter. The other families add the words as wrapping `u64`, which is
//! as fast there. Each family's checksum of a block is therefore defined as follows: the whole
//! words at offsets 0, 8, 16, … of the block, summed as `f64` (AVX-512, taken as a whole
//! number) or as wrapping `u64` (the others), plus each remaining byte.
//! Writes store one known byte value; copies move bytes unchanged. Non-temporal variants
//! (`--nt`) store with `vmovntdq`/`vmovntpd` from 64-byte-aligned addresses (the unaligned head
//! and the tail are stored normally); the caller issues `sfence` before it stops its clock.
//! The STREAM kernels work on `f64` arrays as McCalpin's STREAM does.

/// The kernel family the CPU runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MemIsa {
    Avx512,
    /// 256-bit AVX2, with FMA for the triad.
    Avx2,
    Portable,
}

impl MemIsa {
    /// The widest this CPU has.
    pub(crate) fn detect() -> MemIsa {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f") {
            return MemIsa::Avx512;
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return MemIsa::Avx2;
        }
        MemIsa::Portable
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            MemIsa::Avx512 => "avx512",
            MemIsa::Avx2 => "avx2",
            MemIsa::Portable => "portable",
        }
    }

    /// Whether this family has non-temporal stores.
    pub(crate) fn has_nt(self) -> bool {
        self != MemIsa::Portable
    }
}

/// One of STREAM's four kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stream {
    /// c = a
    Copy,
    /// b = q·c
    Scale,
    /// c = a + b
    Add,
    /// a = b + q·c
    Triad,
}

/// STREAM's scalar.
pub(crate) const Q: f64 = 3.0;

impl Stream {
    /// Bytes per element as STREAM counts them: arrays read + arrays written, 8 B each.
    pub(crate) fn bytes_per_element(self) -> u64 {
        match self {
            Stream::Copy | Stream::Scale => 16,
            Stream::Add | Stream::Triad => 24,
        }
    }

    /// Arrays the kernel touches (the working set is split among them).
    pub(crate) fn arrays(self) -> u64 {
        self.bytes_per_element() / 8
    }
}

/// The word every read source holds: 1.0 as an `f64`, so that the AVX-512 kernel's sums of
/// products are exact whole numbers. The block of a read is a whole number of these words
/// (`--block`).
pub(crate) const READ_WORD: u64 = 0x3ff0_0000_0000_0000;

/// Whether `isa`'s read kernel sums its words as `f64` (each pair of 64-byte vectors
/// multiplied lane by lane) rather than adding them as wrapping `u64`.
fn reads_as_f64(isa: MemIsa) -> bool {
    isa == MemIsa::Avx512
}

/// The checksum of a block by definition, the reference the kernels are tested against.
#[cfg(test)]
pub(crate) fn checksum_reference(isa: MemIsa, block: &[u8]) -> u64 {
    let word = |w: &[u8]| f64::from_bits(u64::from_le_bytes(w.try_into().expect("8 bytes")));
    let mut real = 0f64;
    let mut words = block.chunks_exact(8);
    if reads_as_f64(isa) {
        // Vectors 2j and 2j + 1 from the block's start give their lanes' products; a last
        // vector without a partner gives its words; the words after the vectors are added.
        let mut vectors = block.chunks_exact(128);
        for pair in &mut vectors {
            for lane in 0..8 {
                real += word(&pair[8 * lane..][..8]) * word(&pair[64 + 8 * lane..][..8]);
            }
        }
        words = vectors.remainder().chunks_exact(8);
    }
    let mut sum = 0u64;
    for w in &mut words {
        if reads_as_f64(isa) {
            real += word(w);
        } else {
            sum = sum.wrapping_add(word(w).to_bits());
        }
    }
    for &b in words.remainder() {
        sum = sum.wrapping_add(u64::from(b));
    }
    sum.wrapping_add(real as u64)
}

/// The checksum that `isa`'s read kernel returns for `len` bytes of a source filled with
/// [`READ_WORD`] from a word boundary, without reading them.
pub(crate) fn read_checksum(isa: MemIsa, len: usize) -> u64 {
    let words = (len / 8) as u64;
    let whole = if reads_as_f64(isa) {
        // A pair of vectors gives 1.0 per lane, a last vector without a partner 1.0 per word,
        // and so does each word after the vectors: a count, exact below 2^53.
        let vectors = (len / 64) as u64;
        (vectors / 2 + vectors % 2) * 8 + (len % 64 / 8) as u64
    } else {
        words.wrapping_mul(READ_WORD)
    };
    READ_WORD.to_le_bytes()[..len % 8]
        .iter()
        .fold(whole, |s, &b| s.wrapping_add(u64::from(b)))
}

/// Fills `bytes` (which start on a word boundary) with [`READ_WORD`], the way every read
/// source is filled.
pub(crate) fn fill_read_source(bytes: &mut [u8]) {
    let word = READ_WORD.to_le_bytes();
    let mut chunks = bytes.chunks_exact_mut(8);
    for c in &mut chunks {
        c.copy_from_slice(&word);
    }
    let rest = chunks.into_remainder();
    let n = rest.len();
    rest.copy_from_slice(&word[..n]);
}

/// Reads `len` bytes at `p` and returns their checksum.
///
/// # Safety
/// `p..p+len` must be readable.
pub(crate) unsafe fn read(isa: MemIsa, p: *const u8, len: usize) -> u64 {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: Avx512 is only chosen when the CPU has avx512f; the range is the caller's.
        MemIsa::Avx512 => unsafe { x86::read(p, len) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: Avx2 is only chosen when the CPU has avx2 and fma; the range is the caller's.
        MemIsa::Avx2 => unsafe { avx2::read(p, len) },
        // SAFETY: the range is the caller's.
        _ => unsafe { portable::read(p, len) },
    }
}

/// Stores `byte` into `len` bytes at `p`, non-temporally where `nt` (only on ISAs that have it).
///
/// # Safety
/// `p..p+len` must be writable.
pub(crate) unsafe fn write(isa: MemIsa, p: *mut u8, len: usize, byte: u8, nt: bool) {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in `read`.
        MemIsa::Avx512 => unsafe { x86::write(p, len, byte, nt) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in `read`.
        MemIsa::Avx2 => unsafe { avx2::write(p, len, byte, nt) },
        // SAFETY: the range is the caller's.
        _ => unsafe { portable::write(p, len, byte) },
    }
}

/// Copies `len` bytes from `src` to `dst` (not overlapping), non-temporally where `nt`.
///
/// # Safety
/// Both ranges must be valid and must not overlap.
pub(crate) unsafe fn copy(isa: MemIsa, dst: *mut u8, src: *const u8, len: usize, nt: bool) {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in `read`.
        MemIsa::Avx512 => unsafe { x86::copy(dst, src, len, nt) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in `read`.
        MemIsa::Avx2 => unsafe { avx2::copy(dst, src, len, nt) },
        // SAFETY: the ranges are the caller's.
        _ => unsafe { portable::copy(dst, src, len) },
    }
}

/// Runs a STREAM kernel over elements `range` of the arrays `a`, `b`, `c`, `passes` times in
/// one call: a pass over arrays in L1 takes a hundred-odd cycles, and a call per pass (with its
/// alignment head and its tail) cost the L1 triad a tenth of its rate.
///
/// # Safety
/// The three arrays must hold at least `range.end` elements each, be 64-byte aligned, and not
/// overlap.
pub(crate) unsafe fn stream(
    isa: MemIsa,
    kernel: Stream,
    arrays: [*mut f64; 3],
    range: std::ops::Range<usize>,
    nt: bool,
    passes: usize,
) {
    let [a, b, c] = arrays;
    let n = range.end - range.start;
    // SAFETY: the offsets stay inside the arrays (caller's contract).
    let (a, b, c) = unsafe { (a.add(range.start), b.add(range.start), c.add(range.start)) };
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in `read`; alignment is kept because `range.start` steps are whole
        // vectors only at the fast path, the head being handled by the kernel.
        MemIsa::Avx512 => unsafe { x86::stream(kernel, a, b, c, n, nt, passes) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as for Avx512.
        MemIsa::Avx2 => unsafe { avx2::stream(kernel, a, b, c, n, nt, passes) },
        _ => {
            for _ in 0..passes {
                // SAFETY: as above.
                unsafe { portable::stream(kernel, a, b, c, n) }
            }
        }
    }
}

/// Makes stores issued so far (non-temporal ones included) globally visible.
pub(crate) fn store_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: sfence has no operands and is part of SSE, which x86-64 always has.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
    #[cfg(not(target_arch = "x86_64"))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

mod portable {
    use super::{Q, Stream};

    pub(super) unsafe fn read(p: *const u8, len: usize) -> u64 {
        let mut acc = [0u64; 8];
        let mut i = 0;
        while i + 64 <= len {
            for (k, a) in acc.iter_mut().enumerate() {
                // SAFETY: i + 8k + 8 <= len.
                let w = unsafe { (p.add(i + 8 * k) as *const u64).read_unaligned() };
                *a = a.wrapping_add(u64::from_le(w));
            }
            i += 64;
        }
        let mut sum = acc.iter().fold(0u64, |s, a| s.wrapping_add(*a));
        while i + 8 <= len {
            // SAFETY: i + 8 <= len.
            let w = unsafe { (p.add(i) as *const u64).read_unaligned() };
            sum = sum.wrapping_add(u64::from_le(w));
            i += 8;
        }
        while i < len {
            // SAFETY: i < len.
            sum = sum.wrapping_add(u64::from(unsafe { *p.add(i) }));
            i += 1;
        }
        sum
    }

    pub(super) unsafe fn write(p: *mut u8, len: usize, byte: u8) {
        // SAFETY: the range is the caller's.
        unsafe { std::ptr::write_bytes(p, byte, len) }
    }

    pub(super) unsafe fn copy(dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: the ranges are the caller's and do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, len) }
    }

    pub(super) unsafe fn stream(kernel: Stream, a: *mut f64, b: *mut f64, c: *mut f64, n: usize) {
        // SAFETY: each array holds n elements from here (caller's contract).
        let (a, b, c) = unsafe {
            (
                std::slice::from_raw_parts_mut(a, n),
                std::slice::from_raw_parts_mut(b, n),
                std::slice::from_raw_parts_mut(c, n),
            )
        };
        match kernel {
            Stream::Copy => c.copy_from_slice(a),
            Stream::Scale => b.iter_mut().zip(c.iter()).for_each(|(b, c)| *b = Q * c),
            Stream::Add => c
                .iter_mut()
                .zip(a.iter().zip(b.iter()))
                .for_each(|(c, (a, b))| *c = a + b),
            Stream::Triad => a
                .iter_mut()
                .zip(b.iter().zip(c.iter()))
                .for_each(|(a, (b, c))| *a = b + Q * c),
        }
    }
}

/// The STREAM kernels of one vector width (`$lanes` f64s; the intrinsics of that width), run
/// `passes` times over elements `0..n`. Streaming stores need 64-byte alignment, so an unaligned
/// head is done by the portable code, as is the tail under one vector.
///
/// Four vectors a step: every load of the step first, then its stores, so that no load waits
/// behind a store it might alias (the L1 triad read 90 B a cycle with each vector's store before
/// the next vector's loads, 113-116 grouped, on a Golden Cove server core:
/// bench/triad-offsets.c). The store's kind is chosen once, outside the loop.
#[cfg(target_arch = "x86_64")]
macro_rules! stream_kernel {
    ($feature:literal, $lanes:literal, $set1:ident, $load:ident, $store:ident, $stream:ident,
     $mul:ident, $add:ident, $fmadd:ident) => {
        #[target_feature(enable = $feature)]
        pub(super) unsafe fn stream(
            kernel: Stream,
            a: *mut f64,
            b: *mut f64,
            c: *mut f64,
            n: usize,
            nt: bool,
            passes: usize,
        ) {
            let q = $set1(Q);
            let dst = match kernel {
                Stream::Copy | Stream::Add => c,
                Stream::Scale => b,
                Stream::Triad => a,
            };
            let head = (((64 - (dst as usize % 64)) % 64) / 8).min(n);
            for _ in 0..passes {
                // SAFETY: elements below n of each array are the caller's.
                unsafe {
                    super::portable::stream(kernel, a, b, c, head);
                    let (a, b, c, n) = (a.add(head), b.add(head), c.add(head), n - head);
                    let mut i = 0;
                    macro_rules! sweep {
                        ($value:expr, $dst:expr) => {
                            if nt {
                                sweep!($value, $dst, $stream);
                            } else {
                                sweep!($value, $dst, $store);
                            }
                        };
                        ($value:expr, $dst:expr, $put:ident) => {
                            while i + 4 * $lanes <= n {
                                let v = [
                                    $value(i),
                                    $value(i + $lanes),
                                    $value(i + 2 * $lanes),
                                    $value(i + 3 * $lanes),
                                ];
                                for (k, v) in v.into_iter().enumerate() {
                                    $put($dst.add(i + $lanes * k), v);
                                }
                                i += 4 * $lanes;
                            }
                            while i + $lanes <= n {
                                $put($dst.add(i), $value(i));
                                i += $lanes;
                            }
                        };
                    }
                    match kernel {
                        Stream::Copy => sweep!(|j: usize| $load(a.add(j)), c),
                        Stream::Scale => sweep!(|j: usize| $mul(q, $load(c.add(j))), b),
                        Stream::Add => sweep!(|j: usize| $add($load(a.add(j)), $load(b.add(j))), c),
                        Stream::Triad => {
                            sweep!(|j: usize| $fmadd(q, $load(c.add(j)), $load(b.add(j))), a)
                        }
                    }
                    super::portable::stream(kernel, a.add(i), b.add(i), c.add(i), n - i);
                }
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Q, Stream};
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn read(p: *const u8, len: usize) -> u64 {
        let mut acc = [_mm512_setzero_pd(); 8];
        // SAFETY: every load stays below p + len, which the caller owns.
        unsafe {
            // Vectors in pairs: one FMA multiplies a pair and adds the product to an
            // accumulator, so every loaded byte reaches the checksum at one 512-bit operation
            // per two loads. An add per load needs both of the ports (0 and 5) a Golden Cove
            // server core has for 512-bit work at two loads a cycle: it read 0.93-0.97 of a
            // bare-load loop's rate in 32 KiB blocks and 0.83-0.86 in 8 KB ones, the pairs
            // 0.95-0.99 and 0.92-0.93 (bench/l1-read.c, docs/memory.md). 16 vectors a turn:
            // the loop's own instructions once per kilobyte. The loop steps a pointer so that
            // each load is addressed as pointer + constant: a load folded into an operation
            // with an index register is split in two when it is renamed on Intel cores.
            let end = p.add(len / 1024 * 1024);
            let mut q = p;
            while q < end {
                // Eight chains, each added to once a turn: more than a 4-cycle FMA at one a
                // cycle needs.
                for (k, a) in acc.iter_mut().enumerate() {
                    let x = _mm512_loadu_pd(q.add(128 * k) as *const f64);
                    let y = _mm512_loadu_pd(q.add(128 * k + 64) as *const f64);
                    *a = _mm512_fmadd_pd(x, y, *a);
                }
                q = q.add(1024);
            }
            let mut i = len / 1024 * 1024;
            // `n` pairs from p + i, pair k into accumulator first + k.
            macro_rules! pairs {
                ($n:expr, $first:expr) => {
                    for k in 0..$n {
                        let x = _mm512_loadu_pd(p.add(i + 128 * k) as *const f64);
                        let y = _mm512_loadu_pd(p.add(i + 128 * k + 64) as *const f64);
                        acc[$first + k] = _mm512_fmadd_pd(x, y, acc[$first + k]);
                    }
                    i += 128 * $n;
                };
            }
            // The 0-15 whole vectors left, in straight steps rather than a loop: a block size
            // is the same on every call, so each step's branch is always predicted, where a
            // short loop's exit is mispredicted once a block (which cost a Golden Cove core
            // half its L1 rate at 8 KB blocks). A last vector without a partner is added.
            let left = (len - i) / 64;
            if left & 8 != 0 {
                pairs!(4, 0);
            }
            if left & 4 != 0 {
                pairs!(2, 4);
            }
            if left & 2 != 0 {
                pairs!(1, 6);
            }
            if left & 1 != 0 {
                acc[7] = _mm512_add_pd(acc[7], _mm512_loadu_pd(p.add(i) as *const f64));
                i += 64;
            }
            let mut width = 8;
            while width > 1 {
                width /= 2;
                for k in 0..width {
                    acc[k] = _mm512_add_pd(acc[k], acc[k + width]);
                }
            }
            let mut real = _mm512_reduce_add_pd(acc[0]);
            while i + 8 <= len {
                real += f64::from_bits(u64::from_le((p.add(i) as *const u64).read_unaligned()));
                i += 8;
            }
            let mut sum = real as u64;
            while i < len {
                sum = sum.wrapping_add(u64::from(*p.add(i)));
                i += 1;
            }
            sum
        }
    }

    /// Bytes from `p` to the next 64-byte boundary, at most `len`.
    fn head(p: usize, len: usize) -> usize {
        ((64 - (p % 64)) % 64).min(len)
    }

    /// Stores `x` at `p`: streaming when `nt` (p is 64-byte aligned then), else ordinary. The
    /// flag is loop-invariant in every caller, so the compiler moves the choice out of the loop.
    #[inline(always)]
    unsafe fn put_si(p: *mut u8, x: __m512i, nt: bool) {
        // SAFETY: the caller's; alignment is the caller's for `nt`.
        unsafe {
            if nt {
                _mm512_stream_si512(p as *mut _, x)
            } else {
                _mm512_storeu_si512(p as *mut _, x)
            }
        }
    }

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn write(p: *mut u8, len: usize, byte: u8, nt: bool) {
        let v = _mm512_set1_epi8(byte as i8);
        // SAFETY: every store stays below p + len, which the caller owns;
        // streaming stores go to 64-byte-aligned addresses only (after the head).
        unsafe {
            let mut i = 0;
            if nt {
                i = head(p as usize, len);
                std::ptr::write_bytes(p, byte, i);
            }
            while i + 256 <= len {
                let q = p.add(i);
                put_si(q, v, nt);
                put_si(q.add(64), v, nt);
                put_si(q.add(128), v, nt);
                put_si(q.add(192), v, nt);
                i += 256;
            }
            while i + 64 <= len {
                put_si(p.add(i), v, nt);
                i += 64;
            }
            let word = u64::from(byte).wrapping_mul(0x0101_0101_0101_0101);
            while i + 8 <= len {
                (p.add(i) as *mut u64).write_unaligned(word);
                i += 8;
            }
            while i < len {
                *p.add(i) = byte;
                i += 1;
            }
        }
    }

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn copy(dst: *mut u8, src: *const u8, len: usize, nt: bool) {
        // SAFETY: loads below src + len, stores below dst + len, both the
        // caller's; streaming stores go to 64-byte-aligned addresses only (after the head).
        unsafe {
            let mut i = 0;
            if nt {
                i = head(dst as usize, len);
                std::ptr::copy_nonoverlapping(src, dst, i);
            }
            while i + 256 <= len {
                let (s, d) = (src.add(i), dst.add(i));
                let x0 = _mm512_loadu_si512(s as *const _);
                let x1 = _mm512_loadu_si512(s.add(64) as *const _);
                let x2 = _mm512_loadu_si512(s.add(128) as *const _);
                let x3 = _mm512_loadu_si512(s.add(192) as *const _);
                put_si(d, x0, nt);
                put_si(d.add(64), x1, nt);
                put_si(d.add(128), x2, nt);
                put_si(d.add(192), x3, nt);
                i += 256;
            }
            while i + 64 <= len {
                let x = _mm512_loadu_si512(src.add(i) as *const _);
                put_si(dst.add(i), x, nt);
                i += 64;
            }
            std::ptr::copy_nonoverlapping(src.add(i), dst.add(i), len - i);
        }
    }

    stream_kernel!(
        "avx512f",
        8,
        _mm512_set1_pd,
        _mm512_loadu_pd,
        _mm512_storeu_pd,
        _mm512_stream_pd,
        _mm512_mul_pd,
        _mm512_add_pd,
        _mm512_fmadd_pd
    );
}

/// The AVX2 family: the AVX-512 kernels' structure in 256-bit vectors (twice the vectors per
/// step, the same bytes in flight). Streaming stores (`vmovntdq`/`vmovntpd` ymm) go to 64-byte
/// aligned addresses after a normally stored head, as there.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{Q, Stream};
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn read(p: *const u8, len: usize) -> u64 {
        let mut acc = [_mm256_setzero_si256(); 8];
        let mut i = 0;
        // SAFETY: every load stays below p + len, which the caller owns.
        unsafe {
            while i + 256 <= len {
                let q = p.add(i);
                for (k, a) in acc.iter_mut().enumerate() {
                    let x = _mm256_loadu_si256(q.add(32 * k) as *const __m256i);
                    *a = _mm256_add_epi64(*a, x);
                }
                i += 256;
            }
            // The 0-7 whole vectors left in straight steps, as the AVX-512 kernel does.
            let left = (len - i) / 32;
            for (bit, first) in [(4, 0), (2, 4), (1, 6)] {
                if left & bit != 0 {
                    for k in 0..bit {
                        let x = _mm256_loadu_si256(p.add(i + 32 * k) as *const __m256i);
                        acc[first + k] = _mm256_add_epi64(acc[first + k], x);
                    }
                    i += 32 * bit;
                }
            }
            let mut lanes = [0u64; 4];
            for a in &acc {
                let mut l = [0u64; 4];
                _mm256_storeu_si256(l.as_mut_ptr() as *mut __m256i, *a);
                for (s, x) in lanes.iter_mut().zip(l) {
                    *s = s.wrapping_add(x);
                }
            }
            let mut sum = lanes.iter().fold(0u64, |s, x| s.wrapping_add(*x));
            while i + 8 <= len {
                sum = sum.wrapping_add(u64::from_le((p.add(i) as *const u64).read_unaligned()));
                i += 8;
            }
            while i < len {
                sum = sum.wrapping_add(u64::from(*p.add(i)));
                i += 1;
            }
            sum
        }
    }

    /// Bytes from `p` to the next 64-byte boundary, at most `len`.
    fn head(p: usize, len: usize) -> usize {
        ((64 - (p % 64)) % 64).min(len)
    }

    /// Stores `x` at `p`: streaming when `nt` (p is 32-byte aligned then), else ordinary.
    #[inline(always)]
    unsafe fn put_si(p: *mut u8, x: __m256i, nt: bool) {
        // SAFETY: the caller's; alignment is the caller's for `nt`.
        unsafe {
            if nt {
                _mm256_stream_si256(p as *mut __m256i, x)
            } else {
                _mm256_storeu_si256(p as *mut __m256i, x)
            }
        }
    }

    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn write(p: *mut u8, len: usize, byte: u8, nt: bool) {
        let v = _mm256_set1_epi8(byte as i8);
        // SAFETY: every store stays below p + len, which the caller owns; streaming stores go
        // to 32-byte-aligned addresses only (after the head).
        unsafe {
            let mut i = 0;
            if nt {
                i = head(p as usize, len);
                std::ptr::write_bytes(p, byte, i);
            }
            while i + 128 <= len {
                let q = p.add(i);
                put_si(q, v, nt);
                put_si(q.add(32), v, nt);
                put_si(q.add(64), v, nt);
                put_si(q.add(96), v, nt);
                i += 128;
            }
            while i + 32 <= len {
                put_si(p.add(i), v, nt);
                i += 32;
            }
            std::ptr::write_bytes(p.add(i), byte, len - i);
        }
    }

    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn copy(dst: *mut u8, src: *const u8, len: usize, nt: bool) {
        // SAFETY: loads below src + len, stores below dst + len, both the caller's; streaming
        // stores go to 32-byte-aligned addresses only (after the head).
        unsafe {
            let mut i = 0;
            if nt {
                i = head(dst as usize, len);
                std::ptr::copy_nonoverlapping(src, dst, i);
            }
            while i + 128 <= len {
                let (s, d) = (src.add(i), dst.add(i));
                let x0 = _mm256_loadu_si256(s as *const __m256i);
                let x1 = _mm256_loadu_si256(s.add(32) as *const __m256i);
                let x2 = _mm256_loadu_si256(s.add(64) as *const __m256i);
                let x3 = _mm256_loadu_si256(s.add(96) as *const __m256i);
                put_si(d, x0, nt);
                put_si(d.add(32), x1, nt);
                put_si(d.add(64), x2, nt);
                put_si(d.add(96), x3, nt);
                i += 128;
            }
            while i + 32 <= len {
                put_si(
                    dst.add(i),
                    _mm256_loadu_si256(src.add(i) as *const __m256i),
                    nt,
                );
                i += 32;
            }
            std::ptr::copy_nonoverlapping(src.add(i), dst.add(i), len - i);
        }
    }

    stream_kernel!(
        "avx2,fma",
        4,
        _mm256_set1_pd,
        _mm256_loadu_pd,
        _mm256_storeu_pd,
        _mm256_stream_pd,
        _mm256_mul_pd,
        _mm256_add_pd,
        _mm256_fmadd_pd
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn isas() -> Vec<MemIsa> {
        let mut list = vec![MemIsa::Portable];
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            list.push(MemIsa::Avx2);
        }
        if MemIsa::detect() == MemIsa::Avx512 {
            list.push(MemIsa::Avx512);
        }
        list
    }

    fn pattern(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    /// Bytes whose 8-byte words from `start` hold small whole numbers as `f64`, different
    /// from word to word, so that a sum that skips or repeats a word is wrong either way.
    fn whole_words(len: usize, start: usize) -> Vec<u8> {
        let mut data = pattern(len, 7);
        for (k, w) in data[start..].chunks_exact_mut(8).enumerate() {
            w.copy_from_slice(&((k % 1000) as f64 + 1.0).to_le_bytes());
        }
        data
    }

    #[test]
    fn reads_sum_every_byte_of_any_block_at_any_alignment() {
        for isa in isas() {
            for start in [0, 1, 7, 63, 64] {
                let data = whole_words(5000, start);
                for len in [
                    0, 1, 7, 8, 9, 63, 64, 65, 511, 512, 513, 1000, 1024, 1088, 4000,
                ] {
                    let block = &data[start..start + len];
                    // SAFETY: the block is a live slice.
                    let got = unsafe { read(isa, block.as_ptr(), len) };
                    assert_eq!(got, checksum_reference(isa, block), "{isa:?} {start} {len}");
                }
            }
        }
    }

    /// A word left out or read twice changes the checksum: the kernel reads each word once.
    #[test]
    fn reads_miss_no_word() {
        for isa in isas() {
            for len in [8, 64, 1000, 1024, 3000] {
                let data = whole_words(len, 0);
                let all = checksum_reference(isa, &data);
                for w in 0..len / 8 {
                    let mut changed = data.clone();
                    changed[8 * w..8 * w + 8].copy_from_slice(&2000.0f64.to_le_bytes());
                    // SAFETY: a live slice.
                    let got = unsafe { read(isa, changed.as_ptr(), len) };
                    assert_eq!(got, checksum_reference(isa, &changed), "{isa:?} {len} {w}");
                    assert_ne!(got, all, "{isa:?} {len}: word {w} was not read");
                }
            }
        }
    }

    #[test]
    fn read_checksum_is_the_kernels_on_a_filled_source() {
        for isa in isas() {
            for len in [0, 5, 8, 64, 1000, 8000, 65536, 1 << 20] {
                let mut data = vec![0u8; len];
                fill_read_source(&mut data);
                // SAFETY: a live slice.
                let got = unsafe { read(isa, data.as_ptr(), len) };
                assert_eq!(got, read_checksum(isa, len), "{isa:?} {len}");
            }
        }
    }

    #[test]
    fn writes_and_copies_touch_exactly_their_block() {
        for isa in isas() {
            for nt in [false, true] {
                for start in [0, 1, 64, 100] {
                    for len in [1, 8, 63, 64, 200, 256, 777, 2048] {
                        let mut buf = vec![0u8; 3000];
                        // SAFETY: start + len < 3000.
                        unsafe { write(isa, buf.as_mut_ptr().add(start), len, 0xa5, nt) };
                        store_fence();
                        assert!(buf[..start].iter().all(|&b| b == 0));
                        assert!(buf[start..start + len].iter().all(|&b| b == 0xa5));
                        assert!(buf[start + len..].iter().all(|&b| b == 0));

                        let src = pattern(3000, 3);
                        let mut dst = vec![0u8; 3000];
                        // SAFETY: distinct vectors, start + len < 3000.
                        unsafe {
                            copy(
                                isa,
                                dst.as_mut_ptr().add(start),
                                src.as_ptr().add(start),
                                len,
                                nt,
                            )
                        };
                        store_fence();
                        assert_eq!(dst[start..start + len], src[start..start + len]);
                        assert!(
                            dst[..start]
                                .iter()
                                .chain(&dst[start + len..])
                                .all(|&b| b == 0)
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn stream_kernels_compute_what_stream_computes() {
        for isa in isas() {
            for nt in [false, true] {
                for kernel in [Stream::Copy, Stream::Scale, Stream::Add, Stream::Triad] {
                    let n = 1037;
                    let mut a: Vec<f64> = (0..n).map(|i| i as f64).collect();
                    let mut b: Vec<f64> = (0..n).map(|i| 2.0 * i as f64 + 1.0).collect();
                    let mut c: Vec<f64> = (0..n).map(|i| 0.5 * i as f64).collect();
                    let (a0, b0, c0) = (a.clone(), b.clone(), c.clone());
                    // SAFETY: three distinct vectors of n elements; from 3 to n.
                    unsafe {
                        stream(
                            isa,
                            kernel,
                            [a.as_mut_ptr(), b.as_mut_ptr(), c.as_mut_ptr()],
                            3..n,
                            nt,
                            2,
                        )
                    };
                    store_fence();
                    for i in 0..n {
                        let touched = i >= 3;
                        let (ea, eb, ec) = match kernel {
                            Stream::Copy if touched => (a0[i], b0[i], a0[i]),
                            Stream::Scale if touched => (a0[i], Q * c0[i], c0[i]),
                            Stream::Add if touched => (a0[i], b0[i], a0[i] + b0[i]),
                            Stream::Triad if touched => (b0[i] + Q * c0[i], b0[i], c0[i]),
                            _ => (a0[i], b0[i], c0[i]),
                        };
                        assert_eq!((a[i], b[i], c[i]), (ea, eb, ec), "{isa:?} {kernel:?} {i}");
                    }
                }
            }
        }
    }
}
