//! peakbench's own DGEMM, built as BLIS builds it: C = α·A·B + β·C for column-major f64
//! matrices with leading dimensions, so it runs on sub-blocks (the LU's trailing update is
//! C −= L₂₁·U₁₂, α = −1, β = 1).
//!
//! **Loops.** Around one micro-kernel, five loops (BLIS's names):
//!
//! ```text
//! for jc in 0..n step NC            B block KC × NC, packed once per pc, shared by the threads
//!   for pc in 0..k step KC          (β applies at pc = 0 only; later passes add)
//!     pack B[pc.., jc..] into NR-column panels (zero-padded), in parallel by panel
//!     for ic in 0..m step MC        in parallel: each thread packs its own A block MC × KC
//!       pack A[ic.., pc..] into MR-row panels (zero-padded)
//!       for jr in 0..NC step NR     the B micro-panel KC × NR stays in L1
//!         for ir in 0..MC step MR   A micro-panels stream from L2
//!           micro-kernel: MR × NR tile of C += A panel · B panel over KC
//! ```
//!
//! **Blocking rule** (from the caches sysinfo reads, [`Blocking::from_caches`]): the B
//! micro-panel (KC × NR doubles) fills half the L1d, the other half holding the streaming A
//! micro-panel and the C tile: KC = L1d / 2 / (8·NR), a multiple of 8 in 128..=512; the A block
//! (MC × KC) fills half the L2 of a core: MC = L2 / 2 / (8·KC), a multiple of MR; the B block
//! (KC × NC) fills half the L3 a core's share: NC = L3 / sharing CPUs / 2 / (8·KC), a multiple
//! of NR in 16·NR..=8192 (4·L2 when there is no L3).
//!
//! **Micro-kernels** (one macro, [`micro_kernel!`], instantiated per instruction set so the
//! AVX2 tests exercise the code the AVX-512 kernel is made of): the tile is MV vectors tall
//! (MR = MV · lanes rows) and NR columns wide, held in MV·NR accumulators; each step of k loads
//! MV vectors of the packed A column, broadcasts each of the NR packed B values and issues MV·NR
//! FMAs, unrolled by 4, prefetching the C tile before the loop (the A panel streams from L2 by
//! the hardware prefetcher: a software prefetch 8 steps ahead measured slower on Zen 3).
//!
//! | kernel | MR × NR | accumulators |
//! |---|---|---|
//! | `avx512 16x12` | 2 zmm × 12 | 24 of 32 zmm |
//! | `avx2-fma 8x6` | 2 ymm × 6 | 12 of 16 ymm |
//! | `portable 4x4` | 4 f64 × 4 | scalars |
//!
//! A SIMD kernel is used only after a self-check: a 37 × 29 × 41 product (every edge case of its
//! tile) compared with the portable kernel's; a mismatch falls back to the next kernel down and
//! the engine text says so. `PEAKBENCH_DGEMM_KERNEL=avx512|avx2|portable` forces a kernel (an
//! absent one is refused).

use std::cell::RefCell;
use std::sync::OnceLock;

use anyhow::{Result, bail};
use rayon::prelude::*;

use crate::sysinfo::Cache;

/// The environment variable that forces a micro-kernel.
pub const KERNEL_ENV: &str = "PEAKBENCH_DGEMM_KERNEL";

/// The environment variable that overrides the blocking, `MC,KC,NC` (for tuning).
pub const BLOCKING_ENV: &str = "PEAKBENCH_DGEMM_BLOCKING";

/// The micro-kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    Avx512,
    Avx2Fma,
    Portable,
}

impl Kernel {
    /// Rows of the tile.
    pub fn mr(self) -> usize {
        match self {
            Kernel::Avx512 => 16,
            Kernel::Avx2Fma => 8,
            Kernel::Portable => 4,
        }
    }

    /// Columns of the tile.
    pub fn nr(self) -> usize {
        match self {
            Kernel::Avx512 => 12,
            Kernel::Avx2Fma => 6,
            Kernel::Portable => 4,
        }
    }

    /// `avx2-fma 8x6`, as the result names it.
    pub fn name(self) -> String {
        let isa = match self {
            Kernel::Avx512 => "avx512",
            Kernel::Avx2Fma => "avx2-fma",
            Kernel::Portable => "portable",
        };
        format!("{isa} {}x{}", self.mr(), self.nr())
    }

    /// Whether this CPU can run it.
    pub fn available(self) -> bool {
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2Fma => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
            }
            Kernel::Portable => true,
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }

    /// The kernel named by `avx512`, `avx2` or `portable`.
    pub fn parse(text: &str) -> Option<Kernel> {
        match text.trim() {
            "avx512" => Some(Kernel::Avx512),
            "avx2" | "avx2-fma" => Some(Kernel::Avx2Fma),
            "portable" => Some(Kernel::Portable),
            _ => None,
        }
    }

    /// The function computing one tile.
    fn function(self) -> TileFn {
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 => avx512::tile,
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2Fma => avx2::tile,
            _ => portable::tile,
        }
    }
}

/// The cache blocking: MC rows of A, KC of the shared dimension, NC columns of B per block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blocking {
    pub mc: usize,
    pub kc: usize,
    pub nc: usize,
}

impl Blocking {
    /// The rule of the module doc from the per-core L1d, L2 and the L3 share of a core, in
    /// bytes (0 when the inventory lacks a level: 32 KiB, 512 KiB and 4 × L2 are assumed).
    pub fn from_sizes(l1d: u64, l2: u64, l3_share: u64, kernel: Kernel) -> Blocking {
        let (mr, nr) = (kernel.mr(), kernel.nr());
        let l1d = if l1d == 0 { 32 << 10 } else { l1d } as usize;
        let l2 = if l2 == 0 { 512 << 10 } else { l2 } as usize;
        let l3 = if l3_share == 0 {
            4 * l2 as u64
        } else {
            l3_share
        } as usize;
        let kc = (l1d / 2 / (8 * nr) / 8 * 8).clamp(128, 512);
        let mc = (l2 / 2 / (8 * kc) / mr * mr).max(mr);
        let nc = (l3 / 2 / (8 * kc) / nr * nr).clamp(16 * nr, 8192 / nr * nr);
        Blocking { mc, kc, nc }
    }

    /// The rule applied to the caches of the inventory.
    pub fn from_caches(caches: &[Cache], kernel: Kernel) -> Blocking {
        let size = |level: u32, per_core: bool| {
            caches
                .iter()
                .filter(|c| c.level == level && c.kind != "Instruction")
                .map(|c| {
                    if per_core {
                        c.size_bytes / c.shared_by_cpus.max(1) as u64
                    } else {
                        c.size_bytes
                    }
                })
                .max()
                .unwrap_or(0)
        };
        Blocking::from_sizes(size(1, false), size(2, false), size(3, true), kernel)
    }
}

/// A configured DGEMM: the micro-kernel and the blocking.
#[derive(Clone, Debug)]
pub struct Dgemm {
    pub kernel: Kernel,
    pub blocking: Blocking,
    /// Why a faster kernel the CPU has is not used (a failed self-check), if so.
    pub fallback: Option<String>,
}

static GLOBAL: OnceLock<Dgemm> = OnceLock::new();

impl Dgemm {
    /// The fastest kernel this CPU has that passes its self-check (or the one
    /// [`KERNEL_ENV`] forces), blocked for `caches`.
    pub fn for_host(caches: &[Cache]) -> Result<Dgemm> {
        let forced = match std::env::var(KERNEL_ENV) {
            Ok(text) if !text.trim().is_empty() => match Kernel::parse(&text) {
                Some(k) if k.available() => Some(k),
                Some(k) => bail!(
                    "{KERNEL_ENV}={text}: this CPU cannot run the {} kernel; unset it or choose one it has",
                    k.name()
                ),
                None => bail!("{KERNEL_ENV}={text}: choose avx512, avx2 or portable, or unset it"),
            },
            _ => None,
        };
        let mut notes = Vec::new();
        let kernel = match forced {
            Some(k) => k,
            None => {
                let mut chosen = Kernel::Portable;
                for k in [Kernel::Avx512, Kernel::Avx2Fma] {
                    if !k.available() {
                        continue;
                    }
                    match self_check(k) {
                        Ok(()) => {
                            chosen = k;
                            break;
                        }
                        Err(e) => notes.push(format!("{} failed its self-check ({e})", k.name())),
                    }
                }
                chosen
            }
        };
        let mut blocking = Blocking::from_caches(caches, kernel);
        if let Ok(text) = std::env::var(BLOCKING_ENV)
            && !text.trim().is_empty()
        {
            let sizes: Vec<usize> = text
                .split(',')
                .filter_map(|v| v.trim().parse().ok())
                .collect();
            match sizes[..] {
                [mc, kc, nc] if mc > 0 && kc > 0 && nc > 0 => blocking = Blocking { mc, kc, nc },
                _ => bail!(
                    "{BLOCKING_ENV}={text}: write MC,KC,NC (three positive numbers), or unset it"
                ),
            }
        }
        Ok(Dgemm {
            kernel,
            blocking,
            fallback: (!notes.is_empty()).then(|| notes.join("; ")),
        })
    }

    /// A given kernel with a given blocking (tests).
    pub fn with(kernel: Kernel, blocking: Blocking) -> Dgemm {
        Dgemm {
            kernel,
            blocking,
            fallback: None,
        }
    }

    /// The process's DGEMM, configured on first use from `caches` (later calls get the first).
    pub fn global(caches: &[Cache]) -> Result<&'static Dgemm> {
        if let Some(d) = GLOBAL.get() {
            return Ok(d);
        }
        let d = Dgemm::for_host(caches)?;
        Ok(GLOBAL.get_or_init(|| d))
    }

    /// The process's DGEMM if configured; otherwise one configured now with the assumed cache
    /// sizes of [`Blocking::from_sizes`] (cases configure it from the inventory first, with
    /// [`Dgemm::global`]).
    pub fn current() -> &'static Dgemm {
        if let Some(d) = GLOBAL.get() {
            return d;
        }
        Dgemm::global(&[]).unwrap_or_else(|e| {
            GLOBAL.get_or_init(|| Dgemm {
                kernel: Kernel::Portable,
                blocking: Blocking::from_sizes(0, 0, 0, Kernel::Portable),
                fallback: Some(format!("{e:#}")),
            })
        })
    }

    /// What the results say: `peakbench dgemm avx2-fma 8x6, MC=96 KC=336 NC=3120`.
    pub fn describe(&self) -> String {
        let Blocking { mc, kc, nc } = self.blocking;
        let mut text = format!(
            "peakbench dgemm {} {}, MC={mc} KC={kc} NC={nc}",
            env!("CARGO_PKG_VERSION"),
            self.kernel.name()
        );
        if let Some(why) = &self.fallback {
            text.push_str(&format!(" ({why})"));
        }
        text
    }

    /// C = α·A·B + β·C: A is m × k (leading dimension `lda`), B k × n (`ldb`), C m × n
    /// (`ldc`), all column-major. β = 0 overwrites C without reading it. `parallel` spreads
    /// the work over the current rayon pool; otherwise it runs on the calling thread.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm(
        &self,
        (m, n, k): (usize, usize, usize),
        alpha: f64,
        (a, lda): (&[f64], usize),
        (b, ldb): (&[f64], usize),
        beta: f64,
        (c, ldc): (&mut [f64], usize),
        parallel: bool,
    ) {
        if m == 0 || n == 0 {
            return;
        }
        assert!(
            lda >= m && ldb >= k && ldc >= m,
            "dgemm: a leading dimension below the rows"
        );
        assert!(
            c.len() >= ldc * (n - 1) + m,
            "dgemm: C smaller than m × n at ldc"
        );
        if k > 0 {
            assert!(
                a.len() >= lda * (k - 1) + m && b.len() >= ldb * (n - 1) + k,
                "dgemm: A or B smaller than its shape"
            );
        }
        if k == 0 || alpha == 0.0 {
            scale(c, ldc, m, n, beta);
            return;
        }
        let (mr, nr) = (self.kernel.mr(), self.kernel.nr());
        let Blocking { mc, kc, nc } = self.blocking;
        let tile = self.kernel.function();
        let c_ptr = SendPtr(c.as_mut_ptr());
        let mut packed_b = Vec::new();
        for jc in (0..n).step_by(nc) {
            let nb = nc.min(n - jc);
            for pc in (0..k).step_by(kc) {
                let kb = kc.min(k - pc);
                let beta = if pc == 0 { beta } else { 1.0 };
                let panels = nb.div_ceil(nr);
                packed_b.resize(panels * nr * kb, 0.0);
                let pack_panel = |(p, dst): (usize, &mut [f64])| {
                    pack_b(b, ldb, pc, kb, jc + p * nr, (nb - p * nr).min(nr), nr, dst)
                };
                if parallel {
                    packed_b
                        .par_chunks_mut(nr * kb)
                        .enumerate()
                        .for_each(pack_panel);
                } else {
                    packed_b
                        .chunks_mut(nr * kb)
                        .enumerate()
                        .for_each(pack_panel);
                }
                let packed_b = &packed_b[..];
                let block = |ic: usize| {
                    let mb = mc.min(m - ic);
                    PACKED_A.with(|buf| {
                        let mut buf = buf.borrow_mut();
                        let rows = mb.div_ceil(mr) * mr;
                        let packed_a = buf.slice(rows * kb);
                        for (p, dst) in packed_a.chunks_mut(mr * kb).enumerate() {
                            pack_a(a, lda, ic + p * mr, (mb - p * mr).min(mr), pc, kb, mr, dst);
                        }
                        for jr in (0..nb).step_by(nr) {
                            let nn = nr.min(nb - jr);
                            let bp = &packed_b[jr * kb..];
                            for ir in (0..mb).step_by(mr) {
                                let mm = mr.min(mb - ir);
                                let ap = &packed_a[ir * kb..];
                                let offset = (ic + ir) + (jc + jr) * ldc;
                                // SAFETY: the tile (rows ic+ir.., mm of them; columns jc+jr..,
                                // nn of them) lies inside C (checked above: m, n within ldc and
                                // c.len()); the packed panels hold kb × MR and kb × NR values;
                                // tiles of different ic blocks are disjoint, so the threads
                                // never write the same element; `tile` is only chosen for a
                                // kernel this CPU has (Kernel::function of an available one).
                                unsafe {
                                    tile(
                                        kb,
                                        ap.as_ptr(),
                                        bp.as_ptr(),
                                        c_ptr.get().add(offset),
                                        ldc,
                                        alpha,
                                        beta,
                                        mm,
                                        nn,
                                    )
                                }
                            }
                        }
                    })
                };
                if parallel {
                    (0..m).into_par_iter().step_by(mc).for_each(block);
                } else {
                    (0..m).step_by(mc).for_each(block);
                }
            }
        }
    }
}

/// C = β·C (β = 0 writes zeros without reading).
fn scale(c: &mut [f64], ldc: usize, m: usize, n: usize, beta: f64) {
    for col in c.chunks_mut(ldc).take(n) {
        for x in &mut col[..m] {
            *x = if beta == 0.0 { 0.0 } else { beta * *x };
        }
    }
}

/// Packs rows `row..row + rows` (≤ MR) of A's columns `pc..pc + kb` into `dst`: for each
/// column, MR consecutive values, zero-padded below `rows`.
#[allow(clippy::too_many_arguments)]
fn pack_a(
    a: &[f64],
    lda: usize,
    row: usize,
    rows: usize,
    pc: usize,
    kb: usize,
    mr: usize,
    dst: &mut [f64],
) {
    for (p, out) in dst.chunks_exact_mut(mr).take(kb).enumerate() {
        let start = row + (pc + p) * lda;
        out[..rows].copy_from_slice(&a[start..start + rows]);
        out[rows..].fill(0.0);
    }
}

/// Packs columns `col..col + cols` (≤ NR) of B's rows `pc..pc + kb` into `dst`: for each row,
/// NR consecutive values, zero-padded right of `cols`.
#[allow(clippy::too_many_arguments)]
fn pack_b(
    b: &[f64],
    ldb: usize,
    pc: usize,
    kb: usize,
    col: usize,
    cols: usize,
    nr: usize,
    dst: &mut [f64],
) {
    for j in 0..nr {
        if j < cols {
            let src = &b[pc + (col + j) * ldb..][..kb];
            for (p, &v) in src.iter().enumerate() {
                dst[p * nr + j] = v;
            }
        } else {
            for p in 0..kb {
                dst[p * nr + j] = 0.0;
            }
        }
    }
}

/// A pack buffer aligned to 64 bytes (a cache line, a zmm register), grown as needed.
struct Aligned(Vec<f64>);

impl Aligned {
    /// `len` values starting at a 64-byte boundary.
    fn slice(&mut self, len: usize) -> &mut [f64] {
        if self.0.len() < len + 8 {
            self.0.resize(len + 8, 0.0);
        }
        let skip = self.0.as_ptr().align_offset(64).min(7);
        &mut self.0[skip..skip + len]
    }
}

thread_local! {
    /// Each thread's packed A block.
    static PACKED_A: RefCell<Aligned> = const { RefCell::new(Aligned(Vec::new())) };
}

/// C's pointer, shared by the threads that write disjoint tiles of it.
#[derive(Clone, Copy)]
struct SendPtr(*mut f64);

impl SendPtr {
    fn get(self) -> *mut f64 {
        self.0
    }
}

// SAFETY: the threads write disjoint tiles of C (different ic blocks), and the gemm call
// holds the only &mut to C until they have all finished.
unsafe impl Send for SendPtr {}
// SAFETY: as above.
unsafe impl Sync for SendPtr {}

/// One tile: C[..mm, ..nn] (at `c`, leading dimension ldc) = α·Ap·Bp + β·C over `k` packed
/// steps. Unsafe: the pointers must cover the packed panels and the tile, and the CPU must have
/// the kernel's instructions.
type TileFn = unsafe fn(usize, *const f64, *const f64, *mut f64, usize, f64, f64, usize, usize);

/// The micro-kernel of one instruction set: `$mv` vectors of `$lanes` doubles tall, `$nr`
/// columns wide; the vector operations are passed in, so every kernel is this same code.
macro_rules! micro_kernel {
    (
        $(#[$attr:meta])*
        vector: $v:ty,
        lanes: $lanes:literal,
        mv: $mv:literal,
        nr: $nr:literal,
        zero: $zero:path,
        load: $load:path,
        store: $store:path,
        splat: $splat:path,
        fma: $fma:path,
        mul: $mul:path,
        prefetch: $prefetch:path $(,)?
    ) => {
        const MR: usize = $mv * $lanes;
        const NR: usize = $nr;

        /// One tile, as [`super::TileFn`] states.
        ///
        /// # Safety
        /// `a` holds k × MR values, `b` k × NR, `c` an mm × nn tile at leading dimension ldc
        /// (mm ≤ MR, nn ≤ NR), and the CPU has the instructions this kernel was built for.
        $(#[$attr])*
        #[allow(clippy::too_many_arguments)]
        pub unsafe fn tile(
            k: usize,
            a: *const f64,
            b: *const f64,
            c: *mut f64,
            ldc: usize,
            alpha: f64,
            beta: f64,
            mm: usize,
            nn: usize,
        ) {
            // SAFETY: the caller's contract: every pointer offset below stays inside the
            // packed panels (p < k) or the tile (i < mm, j < nn, or the full MR × NR when the
            // tile is full).
            unsafe {
                let mut acc: [[$v; $mv]; $nr] = [[$zero(); $mv]; $nr];
                if mm == MR && nn == NR {
                    for j in 0..NR {
                        $prefetch(c.add(j * ldc) as *const f64);
                        $prefetch(c.add(j * ldc + MR - 1) as *const f64);
                    }
                }
                let (mut ap, mut bp) = (a, b);
                macro_rules! step {
                    () => {{
                        let mut av: [$v; $mv] = [$zero(); $mv];
                        for v in 0..$mv {
                            av[v] = $load(ap.add(v * $lanes));
                        }
                        for j in 0..NR {
                            let bj = $splat(*bp.add(j));
                            for v in 0..$mv {
                                acc[j][v] = $fma(av[v], bj, acc[j][v]);
                            }
                        }
                        ap = ap.add(MR);
                        bp = bp.add(NR);
                    }};
                }
                let mut left = k;
                while left >= 4 {
                    step!();
                    step!();
                    step!();
                    step!();
                    left -= 4;
                }
                while left > 0 {
                    step!();
                    left -= 1;
                }
                let valpha = $splat(alpha);
                if mm == MR && nn == NR {
                    let vbeta = $splat(beta);
                    for j in 0..NR {
                        for v in 0..$mv {
                            let dst = c.add(j * ldc + v * $lanes);
                            let sum = if beta == 0.0 {
                                $mul(acc[j][v], valpha)
                            } else if beta == 1.0 {
                                $fma(acc[j][v], valpha, $load(dst))
                            } else {
                                $fma(acc[j][v], valpha, $mul($load(dst), vbeta))
                            };
                            $store(dst, sum);
                        }
                    }
                } else {
                    let mut out = [0.0f64; MR * NR];
                    for j in 0..NR {
                        for v in 0..$mv {
                            $store(out.as_mut_ptr().add(j * MR + v * $lanes), acc[j][v]);
                        }
                    }
                    for j in 0..nn {
                        for i in 0..mm {
                            let dst = c.add(j * ldc + i);
                            let sum = alpha * out[j * MR + i];
                            *dst = if beta == 0.0 { sum } else { sum + beta * *dst };
                        }
                    }
                }
            }
        }
    };
}

/// Fetches the line at `p` into L1 (the SIMD kernels' prefetch of C).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch(p: *const f64) {
    // SAFETY: a prefetch is a hint that never faults, and x86-64 always has SSE.
    unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8) }
}

/// The AVX-512F kernel: 16 × 12, 24 zmm accumulators.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::prefetch;

    micro_kernel! {
        #[target_feature(enable = "avx512f")]
        vector: __m512d,
        lanes: 8,
        mv: 2,
        nr: 12,
        zero: _mm512_setzero_pd,
        load: _mm512_loadu_pd,
        store: _mm512_storeu_pd,
        splat: _mm512_set1_pd,
        fma: _mm512_fmadd_pd,
        mul: _mm512_mul_pd,
        prefetch: prefetch,
    }
}

/// The AVX2 + FMA kernel: 8 × 6, 12 ymm accumulators.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::prefetch;

    micro_kernel! {
        #[target_feature(enable = "avx2,fma")]
        vector: __m256d,
        lanes: 4,
        mv: 2,
        nr: 6,
        zero: _mm256_setzero_pd,
        load: _mm256_loadu_pd,
        store: _mm256_storeu_pd,
        splat: _mm256_set1_pd,
        fma: _mm256_fmadd_pd,
        mul: _mm256_mul_pd,
        prefetch: prefetch,
    }
}

/// The portable kernel: 4 × 4 scalars, the same code with f64 as the vector.
mod portable {
    #[inline(always)]
    fn zero() -> f64 {
        0.0
    }
    #[inline(always)]
    unsafe fn load(p: *const f64) -> f64 {
        // SAFETY: the kernel's caller guarantees p is inside a panel or the tile.
        unsafe { *p }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f64, v: f64) {
        // SAFETY: as for load.
        unsafe { *p = v }
    }
    #[inline(always)]
    fn splat(x: f64) -> f64 {
        x
    }
    #[inline(always)]
    fn fma(a: f64, b: f64, c: f64) -> f64 {
        a * b + c
    }
    #[inline(always)]
    fn mul(a: f64, b: f64) -> f64 {
        a * b
    }
    #[inline(always)]
    fn prefetch(_: *const f64) {}

    micro_kernel! {
        vector: f64,
        lanes: 1,
        mv: 4,
        nr: 4,
        zero: zero,
        load: load,
        store: store,
        splat: splat,
        fma: fma,
        mul: mul,
        prefetch: prefetch,
    }
}

/// Runs `kernel` and the portable kernel on a 37 × 29 × 41 product (edges in every
/// direction for every tile size, α and β not 1) and compares them within the forward error
/// bound of the dot products.
pub fn self_check(kernel: Kernel) -> Result<()> {
    let (m, n, k) = (37, 29, 41);
    let mut rng = crate::rng::Rng::new(31);
    let mut fill = |len: usize| (0..len).map(|_| rng.centered_f64()).collect::<Vec<f64>>();
    let (a, b, c0) = (fill(m * k), fill(k * n), fill(m * n));
    let blocking = Blocking {
        mc: 2 * kernel.mr(),
        kc: 16,
        nc: 2 * kernel.nr(),
    };
    let mut got = c0.clone();
    Dgemm::with(kernel, blocking).gemm(
        (m, n, k),
        0.75,
        (&a, m),
        (&b, k),
        -0.5,
        (&mut got, m),
        false,
    );
    let mut want = c0.clone();
    Dgemm::with(Kernel::Portable, blocking).gemm(
        (m, n, k),
        0.75,
        (&a, m),
        (&b, k),
        -0.5,
        (&mut want, m),
        false,
    );
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let bound = 4.0 * k as f64 * f64::EPSILON;
        let error = (g - w).abs();
        if error.is_nan() || error > bound {
            bail!(
                "C({},{}) = {g} where the portable kernel gives {w}",
                i % m,
                i / m
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    /// C = α·A·B + β·C by a triple loop, and the bound of each entry's error.
    #[allow(clippy::too_many_arguments)]
    fn naive(
        (m, n, k): (usize, usize, usize),
        alpha: f64,
        a: &[f64],
        lda: usize,
        b: &[f64],
        ldb: usize,
        beta: f64,
        c: &mut [f64],
        ldc: usize,
    ) -> Vec<f64> {
        let mut bounds = vec![0.0; m * n];
        for j in 0..n {
            for i in 0..m {
                let (mut sum, mut mag) = (0.0, 0.0);
                for p in 0..k {
                    let t = a[i + p * lda] * b[p + j * ldb];
                    sum += t;
                    mag += t.abs();
                }
                let old = if beta == 0.0 { 0.0 } else { c[i + j * ldc] };
                c[i + j * ldc] = alpha * sum + beta * old;
                bounds[i + j * m] = 2.0 * (k as f64 + 2.0) * f64::EPSILON * (mag + old.abs());
            }
        }
        bounds
    }

    fn kernels() -> Vec<Kernel> {
        [Kernel::Avx512, Kernel::Avx2Fma, Kernel::Portable]
            .into_iter()
            .filter(|k| {
                if !k.available() {
                    eprintln!("skipped: this CPU cannot run the {} kernel", k.name());
                }
                k.available()
            })
            .collect()
    }

    /// One product at the given shape, leading dimensions `pad` above the rows, against the
    /// naive loop; C's padding rows must be untouched.
    #[allow(clippy::too_many_arguments)]
    fn check_shape(
        d: &Dgemm,
        (m, n, k): (usize, usize, usize),
        pad: usize,
        alpha: f64,
        beta: f64,
        parallel: bool,
        seed: u64,
    ) {
        let (lda, ldb, ldc) = (m + pad, k + pad, m + pad);
        let mut rng = Rng::new(seed);
        let mut fill = |len: usize| (0..len).map(|_| rng.centered_f64()).collect::<Vec<f64>>();
        let a = fill(lda * k.max(1));
        let b = fill(ldb * n);
        let mut c = fill(ldc * n);
        if beta == 0.0 {
            // β = 0 must not read C: NaNs there must not come out.
            for j in 0..n {
                c[j * ldc..j * ldc + m].fill(f64::NAN);
            }
        }
        let mut want = c.clone();
        let bounds = naive((m, n, k), alpha, &a, lda, &b, ldb, beta, &mut want, ldc);
        let mut got = c.clone();
        d.gemm(
            (m, n, k),
            alpha,
            (&a, lda),
            (&b, ldb),
            beta,
            (&mut got, ldc),
            parallel,
        );
        for j in 0..n {
            for i in 0..ldc {
                let (g, w) = (got[i + j * ldc], want[i + j * ldc]);
                if i >= m {
                    assert!(
                        g.to_bits() == c[i + j * ldc].to_bits(),
                        "{}: padding C({i},{j}) written",
                        d.kernel.name()
                    );
                    continue;
                }
                assert!(
                    (g - w).abs() <= bounds[i + j * m],
                    "{} m={m} n={n} k={k} pad={pad} α={alpha} β={beta}: C({i},{j}) = {g}, want {w}",
                    d.kernel.name()
                );
            }
        }
    }

    #[test]
    fn every_kernel_matches_a_naive_product_at_odd_shapes() {
        let sizes = [1, 2, 7, 127, 129];
        for kernel in kernels() {
            // Small blocks so the loops around the kernel run many times at these sizes.
            let small = Dgemm::with(
                kernel,
                Blocking {
                    mc: 3 * kernel.mr(),
                    kc: 24,
                    nc: 5 * kernel.nr(),
                },
            );
            let mut seed = 0;
            for &m in &sizes {
                for &n in &sizes {
                    for &k in &[1, 7, 129] {
                        seed += 1;
                        check_shape(&small, (m, n, k), 3, 1.0, 0.0, false, seed);
                    }
                }
            }
            for (alpha, beta) in [(-1.0, 1.0), (0.5, -2.0), (2.0, 0.0)] {
                check_shape(&small, (129, 127, 67), 5, alpha, beta, true, 7);
            }
            check_shape(&small, (5, 3, 0), 1, 1.0, 0.5, false, 8);
        }
    }

    #[test]
    fn every_kernel_at_n_1000_and_rectangular_with_the_host_blocking() {
        for kernel in kernels() {
            let d = Dgemm::with(kernel, Blocking::from_sizes(32 << 10, 512 << 10, 0, kernel));
            check_shape(&d, (1000, 1000, 1000), 0, 1.0, 0.0, true, 11);
            check_shape(&d, (1000, 37, 256), 9, -1.0, 1.0, false, 12);
            check_shape(&d, (33, 700, 300), 2, 1.0, 1.0, true, 13);
        }
    }

    #[test]
    fn one_and_two_threads_give_the_same_product() {
        let d = Dgemm::with(
            Kernel::Portable,
            Blocking {
                mc: 8,
                kc: 16,
                nc: 12,
            },
        );
        let (m, n, k) = (61, 45, 50);
        let mut rng = Rng::new(5);
        let mut fill = |len: usize| (0..len).map(|_| rng.centered_f64()).collect::<Vec<f64>>();
        let (a, b) = (fill(m * k), fill(k * n));
        let run = |threads: usize| {
            let mut c = vec![0.0; m * n];
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| d.gemm((m, n, k), 1.0, (&a, m), (&b, k), 0.0, (&mut c, m), true));
            c
        };
        assert_eq!(run(1), run(2), "each tile is computed the same way");
    }

    #[test]
    fn the_self_check_passes_on_every_kernel_present() {
        for kernel in kernels() {
            self_check(kernel).unwrap();
        }
    }

    #[test]
    fn the_blocking_follows_the_caches() {
        // Zen 3: 32 KiB L1d, 512 KiB L2, 32 MiB L3 over 8 cores.
        let b = Blocking::from_sizes(32 << 10, 512 << 10, 4 << 20, Kernel::Avx2Fma);
        assert_eq!(b.kc, 336);
        assert_eq!(b.mc, 96);
        assert_eq!(b.nc, 780);
        // Sapphire Rapids: 48 KiB L1d, 2 MiB L2.
        let b = Blocking::from_sizes(48 << 10, 2 << 20, 0, Kernel::Avx512);
        assert_eq!((b.kc, b.mc), (256, 512));
        assert_eq!(b.nc % 12, 0);
        assert!(b.kc * b.nc * 8 <= 4 * (2 << 20));
    }

    #[test]
    fn the_kernel_names_and_parse() {
        assert_eq!(Kernel::Avx2Fma.name(), "avx2-fma 8x6");
        assert_eq!(Kernel::Avx512.name(), "avx512 16x12");
        assert_eq!(Kernel::parse("avx2"), Some(Kernel::Avx2Fma));
        assert_eq!(Kernel::parse("sse"), None);
    }
}
