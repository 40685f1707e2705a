//! peakbench's own DGEMM and SGEMM, built as BLIS builds them: C = α·A·B + β·C for
//! column-major f64 (or f32) matrices with leading dimensions, so it runs on sub-blocks (the
//! LU's trailing update is C −= L₂₁·U₁₂, α = −1, β = 1). One generic code, [`BuiltinGemm`] over
//! an [`Element`]: [`Dgemm`] and [`Sgemm`] are its two instances.
//!
//! **Loops.** Around one micro-kernel, five loops (BLIS's names):
//!
//! ```text
//! for jc in 0..n step NC            B block KC × NC, packed once per pc, shared by the threads
//!   for pc in 0..k step KC          (β applies at pc = 0 only; later passes add)
//!     pack B[pc.., jc..] into NR-column panels (zero-padded), in parallel by panel
//!     for each row block (≤ MC)     in parallel: each thread packs its own A block ≤ MC × KC
//!                                   (the blocks a multiple of the threads in number, equal in
//!                                   work, `row_blocks`)
//!       pack A[ic.., pc..] into MR-row panels (zero-padded)
//!       for jr in 0..NC step NR     the B micro-panel KC × NR stays in L1
//!         for ir in 0..MC step MR   A micro-panels stream from L2; before each tile, a
//!                                   share of the next B micro-panel is fetched into L2
//!           micro-kernel: MR × NR tile of C += A panel · B panel over KC
//! ```
//!
//! **Blocking rule** (from the caches sysinfo reads, [`Blocking::from_caches`]), with s the
//! element's size (8 bytes for f64, 4 for f32): the B micro-panel (KC × NR elements) fills half
//! the L1d, the other half holding the streaming A micro-panel and the C tile:
//! KC = L1d / 2 / (s·NR), a multiple of 8 in 128..=512; the A block (MC × KC) fills half the L2
//! of a core: MC = L2 / 2 / (s·KC), a multiple of MR; the B block (KC × NC) fills half the L3 a
//! core's share: NC = L3 / sharing CPUs / 2 / (s·KC), a multiple of NR in 16·NR..=8192 (4·L2
//! when there is no L3).
//!
//! The micro-kernels, one per instruction set, are in `micro.rs`; the packing of the
//! blocks into micro-panels in `pack.rs`.
//!
//! A SIMD kernel is used only after a self-check: a 37 × 29 × 41 product (every edge case of its
//! tile) compared with the portable kernel's; a mismatch falls back to the next kernel down and
//! the engine text says so. `PEAKBENCH_DGEMM_KERNEL=avx512|avx2|portable` forces the DGEMM's
//! kernel and `PEAKBENCH_SGEMM_KERNEL` the SGEMM's (an absent one is refused).

use std::cell::RefCell;
use std::fmt::Debug;
use std::ops::{Add, Div, Mul, Sub};
use std::sync::OnceLock;
use std::thread::LocalKey;

use anyhow::{Result, bail};
use rayon::prelude::*;

use super::micro::{self, TileFn};
use super::pack::{self, Aligned};
use crate::sysinfo::Cache;

/// The environment variable that forces the DGEMM's micro-kernel.
pub const KERNEL_ENV: &str = "PEAKBENCH_DGEMM_KERNEL";

/// The environment variable that overrides the DGEMM's blocking, `MC,KC,NC` (for tuning).
pub const BLOCKING_ENV: &str = "PEAKBENCH_DGEMM_BLOCKING";

/// The environment variable that forces the SGEMM's micro-kernel.
pub const SGEMM_KERNEL_ENV: &str = "PEAKBENCH_SGEMM_KERNEL";

/// The environment variable that overrides the SGEMM's blocking, `MC,KC,NC`.
pub const SGEMM_BLOCKING_ENV: &str = "PEAKBENCH_SGEMM_BLOCKING";

/// An element type the built-in GEMM multiplies: f64 (DGEMM) or f32 (SGEMM). Everything that
/// differs between the two is here; the loops, the packing and the micro-kernel macro are one.
pub trait Element:
    Copy
    + Default
    + Debug
    + PartialEq
    + Send
    + Sync
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + 'static
{
    const ZERO: Self;
    const ONE: Self;
    /// The machine epsilon, as an f64 (error bounds are computed in f64).
    const EPSILON: f64;
    /// "dgemm" or "sgemm", as results and messages name the routine.
    const ROUTINE: &'static str;
    /// "f64" or "f32".
    const NAME: &'static str;
    /// The variable that forces this routine's micro-kernel.
    const KERNEL_ENV: &'static str;
    /// The variable that overrides this routine's blocking.
    const BLOCKING_ENV: &'static str;
    fn from_f64(x: f64) -> Self;
    fn to_f64(self) -> f64;
    /// The tile function of `kernel` for this element.
    fn tile(kernel: MicroKernel) -> TileFn<Self>;
    /// The process's configured GEMM of this element.
    fn global() -> &'static OnceLock<BuiltinGemm<Self>>;
    /// Each thread's buffer for its packed A block.
    fn packed_a() -> &'static LocalKey<RefCell<Aligned<Self>>>;
}

static GLOBAL_F64: OnceLock<BuiltinGemm<f64>> = OnceLock::new();
static GLOBAL_F32: OnceLock<BuiltinGemm<f32>> = OnceLock::new();

thread_local! {
    /// Each thread's packed A block, f64.
    static PACKED_A_F64: RefCell<Aligned<f64>> = const { RefCell::new(Aligned::new()) };
    /// Each thread's packed A block, f32.
    static PACKED_A_F32: RefCell<Aligned<f32>> = const { RefCell::new(Aligned::new()) };
}

impl Element for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    const EPSILON: f64 = f64::EPSILON;
    const ROUTINE: &'static str = "dgemm";
    const NAME: &'static str = "f64";
    const KERNEL_ENV: &'static str = KERNEL_ENV;
    const BLOCKING_ENV: &'static str = BLOCKING_ENV;
    fn from_f64(x: f64) -> f64 {
        x
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn tile(kernel: MicroKernel) -> TileFn<f64> {
        match kernel {
            #[cfg(target_arch = "x86_64")]
            MicroKernel::Avx512 => micro::avx512::double::tile,
            #[cfg(target_arch = "x86_64")]
            MicroKernel::Avx2Fma => micro::avx2::double::tile,
            _ => micro::portable::double::tile,
        }
    }
    fn global() -> &'static OnceLock<BuiltinGemm<f64>> {
        &GLOBAL_F64
    }
    fn packed_a() -> &'static LocalKey<RefCell<Aligned<f64>>> {
        &PACKED_A_F64
    }
}

impl Element for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
    const EPSILON: f64 = f32::EPSILON as f64;
    const ROUTINE: &'static str = "sgemm";
    const NAME: &'static str = "f32";
    const KERNEL_ENV: &'static str = SGEMM_KERNEL_ENV;
    const BLOCKING_ENV: &'static str = SGEMM_BLOCKING_ENV;
    fn from_f64(x: f64) -> f32 {
        x as f32
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn tile(kernel: MicroKernel) -> TileFn<f32> {
        match kernel {
            #[cfg(target_arch = "x86_64")]
            MicroKernel::Avx512 => micro::avx512::single::tile,
            #[cfg(target_arch = "x86_64")]
            MicroKernel::Avx2Fma => micro::avx2::single::tile,
            _ => micro::portable::single::tile,
        }
    }
    fn global() -> &'static OnceLock<BuiltinGemm<f32>> {
        &GLOBAL_F32
    }
    fn packed_a() -> &'static LocalKey<RefCell<Aligned<f32>>> {
        &PACKED_A_F32
    }
}

/// The micro-kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MicroKernel {
    Avx512,
    Avx2Fma,
    Portable,
}

impl MicroKernel {
    /// Rows of the tile for elements of type T: three vectors of the ISA's width for AVX-512,
    /// two for AVX2 (f32 has twice f64's lanes), or four scalars.
    pub fn mr<T: Element>(self) -> usize {
        let size = std::mem::size_of::<T>();
        match self {
            MicroKernel::Avx512 => 3 * 64 / size,
            MicroKernel::Avx2Fma => 2 * 32 / size,
            MicroKernel::Portable => 4,
        }
    }

    /// Columns of the tile (the same for both elements: one broadcast register each).
    pub fn nr(self) -> usize {
        match self {
            MicroKernel::Avx512 => 8,
            MicroKernel::Avx2Fma => 6,
            MicroKernel::Portable => 4,
        }
    }

    /// `avx2-fma 8x6` (f64) or `avx2-fma 16x6` (f32), as the result names it.
    pub fn name<T: Element>(self) -> String {
        let isa = match self {
            MicroKernel::Avx512 => "avx512",
            MicroKernel::Avx2Fma => "avx2-fma",
            MicroKernel::Portable => "portable",
        };
        format!("{isa} {}x{}", self.mr::<T>(), self.nr())
    }

    /// Whether this CPU can run it.
    pub fn available(self) -> bool {
        match self {
            #[cfg(target_arch = "x86_64")]
            MicroKernel::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
            #[cfg(target_arch = "x86_64")]
            MicroKernel::Avx2Fma => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
            }
            MicroKernel::Portable => true,
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }

    /// The kernel named by `avx512`, `avx2` or `portable`.
    pub fn parse(text: &str) -> Option<MicroKernel> {
        match text.trim() {
            "avx512" => Some(MicroKernel::Avx512),
            "avx2" | "avx2-fma" => Some(MicroKernel::Avx2Fma),
            "portable" => Some(MicroKernel::Portable),
            _ => None,
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
    /// bytes (0 when the inventory lacks a level: 32 KiB, 512 KiB and 4 × L2 are assumed), for
    /// elements of type T.
    pub fn from_sizes<T: Element>(
        l1d: u64,
        l2: u64,
        l3_share: u64,
        kernel: MicroKernel,
    ) -> Blocking {
        let (mr, nr) = (kernel.mr::<T>(), kernel.nr());
        let s = std::mem::size_of::<T>();
        let l1d = if l1d == 0 { 32 << 10 } else { l1d } as usize;
        let l2 = if l2 == 0 { 512 << 10 } else { l2 } as usize;
        let l3 = if l3_share == 0 {
            4 * l2 as u64
        } else {
            l3_share
        } as usize;
        let kc = (l1d / 2 / (s * nr) / 8 * 8).clamp(128, 512);
        let mc = (l2 / 2 / (s * kc) / mr * mr).max(mr);
        let nc = (l3 / 2 / (s * kc) / nr * nr).clamp(16 * nr, 8192 / nr * nr);
        Blocking { mc, kc, nc }
    }

    /// The rule applied to the caches of the inventory.
    pub fn from_caches<T: Element>(caches: &[Cache], kernel: MicroKernel) -> Blocking {
        let (l1d, l2, l3) = Self::cache_sizes(caches);
        Blocking::from_sizes::<T>(l1d, l2, l3, kernel)
    }

    /// How [`Blocking::from_caches`] came to its sizes, as results state it: each block, the
    /// cache it is sized for and that cache's size (or the size assumed where the inventory
    /// has none).
    pub fn source<T: Element>(&self, caches: &[Cache], kernel: MicroKernel) -> String {
        let (l1d, l2, l3) = Self::cache_sizes(caches);
        let size = |bytes: u64, assumed: &str| {
            if bytes == 0 {
                format!("{assumed} assumed")
            } else {
                crate::units::format_size_approx(bytes)
            }
        };
        let s = std::mem::size_of::<T>();
        format!(
            "KC={}: the B micro-panel KC×NR×{s} B in half the L1d ({}); MC={}: the A block \
             MC×KC×{s} B in half the L2 ({}); NC={}: the B block KC×NC×{s} B in half a core's \
             share of the L3 ({}), at most {}",
            self.kc,
            size(l1d, "32 KiB"),
            self.mc,
            size(l2, "512 KiB"),
            self.nc,
            size(l3, "4 × L2"),
            8192 / kernel.nr() * kernel.nr()
        )
    }

    /// The per-core L1d and L2 and the L3 share of a core, in bytes, from the inventory (0
    /// where it lacks a level).
    fn cache_sizes(caches: &[Cache]) -> (u64, u64, u64) {
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
        (size(1, false), size(2, false), size(3, true))
    }
}

/// A configured GEMM of elements T: the micro-kernel and the blocking.
#[derive(Clone, Debug)]
pub struct BuiltinGemm<T> {
    pub kernel: MicroKernel,
    pub blocking: Blocking,
    /// Why a faster kernel the CPU has is not used (a failed self-check), if so.
    pub fallback: Option<String>,
    /// How the blocking was chosen: from which caches ([`Blocking::source`]), or the variable
    /// that set it.
    pub blocking_source: String,
    element: std::marker::PhantomData<T>,
}

/// The built-in DGEMM.
pub type Dgemm = BuiltinGemm<f64>;

/// The built-in SGEMM.
pub type Sgemm = BuiltinGemm<f32>;

impl<T: Element> BuiltinGemm<T> {
    /// The fastest kernel this CPU has that passes its self-check (or the one
    /// [`Element::KERNEL_ENV`] forces), blocked for `caches`.
    pub fn for_host(caches: &[Cache]) -> Result<BuiltinGemm<T>> {
        let env = T::KERNEL_ENV;
        let forced = match std::env::var(env) {
            Ok(text) if !text.trim().is_empty() => match MicroKernel::parse(&text) {
                Some(k) if k.available() => Some(k),
                Some(k) => bail!(
                    "{env}={text}: this CPU cannot run the {} kernel; unset it or choose one it has",
                    k.name::<T>()
                ),
                None => bail!("{env}={text}: choose avx512, avx2 or portable, or unset it"),
            },
            _ => None,
        };
        let mut notes = Vec::new();
        let kernel = match forced {
            Some(k) => k,
            None => {
                let mut chosen = MicroKernel::Portable;
                for k in [MicroKernel::Avx512, MicroKernel::Avx2Fma] {
                    if !k.available() {
                        continue;
                    }
                    match self_check::<T>(k) {
                        Ok(()) => {
                            chosen = k;
                            break;
                        }
                        Err(e) => {
                            notes.push(format!("{} failed its self-check ({e})", k.name::<T>()))
                        }
                    }
                }
                chosen
            }
        };
        let mut blocking = Blocking::from_caches::<T>(caches, kernel);
        let mut blocking_source = blocking.source::<T>(caches, kernel);
        let env = T::BLOCKING_ENV;
        if let Ok(text) = std::env::var(env)
            && !text.trim().is_empty()
        {
            let sizes: Vec<usize> = text
                .split(',')
                .filter_map(|v| v.trim().parse().ok())
                .collect();
            match sizes[..] {
                [mc, kc, nc] if mc > 0 && kc > 0 && nc > 0 => {
                    blocking = Blocking { mc, kc, nc };
                    blocking_source = format!("set by {env}={text}");
                }
                _ => bail!("{env}={text}: write MC,KC,NC (three positive numbers), or unset it"),
            }
        }
        Ok(BuiltinGemm {
            kernel,
            blocking,
            fallback: (!notes.is_empty()).then(|| notes.join("; ")),
            blocking_source,
            element: std::marker::PhantomData,
        })
    }

    /// A given kernel with a given blocking (tests).
    pub fn with(kernel: MicroKernel, blocking: Blocking) -> BuiltinGemm<T> {
        BuiltinGemm {
            kernel,
            blocking,
            fallback: None,
            blocking_source: "given".into(),
            element: std::marker::PhantomData,
        }
    }

    /// The process's GEMM of T, configured on first use from `caches` (later calls get the
    /// first).
    pub fn global(caches: &[Cache]) -> Result<&'static BuiltinGemm<T>> {
        if let Some(d) = T::global().get() {
            return Ok(d);
        }
        let d = Self::for_host(caches)?;
        Ok(T::global().get_or_init(|| d))
    }

    /// The process's GEMM of T if configured; otherwise one configured now with the assumed
    /// cache sizes of [`Blocking::from_sizes`] (cases configure it from the inventory first,
    /// with [`BuiltinGemm::global`]).
    pub fn current() -> &'static BuiltinGemm<T> {
        if let Some(d) = T::global().get() {
            return d;
        }
        Self::global(&[]).unwrap_or_else(|e| {
            T::global().get_or_init(|| BuiltinGemm {
                kernel: MicroKernel::Portable,
                blocking: Blocking::from_sizes::<T>(0, 0, 0, MicroKernel::Portable),
                fallback: Some(format!("{e:#}")),
                blocking_source: "assumed caches".into(),
                element: std::marker::PhantomData,
            })
        })
    }

    /// The micro-kernel's name for this element, e.g. `avx2-fma 8x6`.
    pub fn kernel_name(&self) -> String {
        self.kernel.name::<T>()
    }

    /// Why the micro-kernel's tile is its size, as results state it.
    pub fn tile_source(&self) -> String {
        let (mr, nr) = (self.kernel.mr::<T>(), self.kernel.nr());
        match self.kernel {
            MicroKernel::Portable => format!("{mr}×{nr} scalars: the portable fallback"),
            k => {
                let (registers, width) = if k == MicroKernel::Avx512 {
                    (32, "zmm")
                } else {
                    (16, "ymm")
                };
                let vectors =
                    mr * std::mem::size_of::<T>() / if k == MicroKernel::Avx512 { 64 } else { 32 };
                let accumulators = vectors * nr;
                format!(
                    "{mr}×{nr}: {accumulators} {width} accumulators of {registers}, {vectors} for \
                     the A column and 1 for a broadcast; {accumulators} independent FMA chains, \
                     {:.1}× the 8 that keep 2 FMA units of 4 cycles' latency busy; per k step \
                     {vectors} vector loads and {nr} broadcasts feed {accumulators} FMAs \
                     ({} cycles), within the L1d's 2 loads a cycle",
                    accumulators as f64 / 8.0,
                    accumulators / 2
                )
            }
        }
    }

    /// What the results say: `peakbench dgemm avx2-fma 8x6, MC=96 KC=336 NC=3120`.
    pub fn describe(&self) -> String {
        let Blocking { mc, kc, nc } = self.blocking;
        let mut text = format!(
            "peakbench {} {} {}, MC={mc} KC={kc} NC={nc}",
            T::ROUTINE,
            env!("CARGO_PKG_VERSION"),
            self.kernel_name()
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
        alpha: T,
        (a, lda): (&[T], usize),
        (b, ldb): (&[T], usize),
        beta: T,
        (c, ldc): (&mut [T], usize),
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
        if k == 0 || alpha == T::ZERO {
            scale(c, ldc, m, n, beta);
            return;
        }
        let Blocking { mc, kc, nc } = self.blocking;
        let threads = if parallel {
            rayon::current_num_threads()
        } else {
            1
        };
        let row_blocks = row_blocks(m, mc, self.kernel.mr::<T>(), threads);
        let c = SendPtr(c.as_mut_ptr());
        let mut packed_b = Vec::new();
        for jc in (0..n).step_by(nc) {
            let nb = nc.min(n - jc);
            for pc in (0..k).step_by(kc) {
                let kb = kc.min(k - pc);
                self.pack_b_block((b, ldb), (pc, kb), (jc, nb), &mut packed_b, parallel);
                let pass = Pass {
                    packed_b: &packed_b,
                    jc,
                    nb,
                    pc,
                    kb,
                    alpha,
                    beta: if pc == 0 { beta } else { T::ONE },
                };
                let block = |rows: (usize, usize)| self.block(&pass, (a, lda), rows, (c, ldc));
                if parallel {
                    row_blocks.par_iter().copied().for_each(block);
                } else {
                    row_blocks.iter().copied().for_each(block);
                }
            }
        }
    }

    /// Packs the B block of rows `pc..pc + kb` and columns `jc..jc + nb` into `packed_b`, as
    /// NR-column micro-panels, in parallel by panel when `parallel`.
    fn pack_b_block(
        &self,
        (b, ldb): (&[T], usize),
        (pc, kb): (usize, usize),
        (jc, nb): (usize, usize),
        packed_b: &mut Vec<T>,
        parallel: bool,
    ) {
        let nr = self.kernel.nr();
        packed_b.resize(nb.div_ceil(nr) * nr * kb, T::ZERO);
        let pack_panel = |(p, dst): (usize, &mut [T])| {
            pack::pack_b(b, ldb, pc, kb, jc + p * nr, (nb - p * nr).min(nr), nr, dst)
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
    }

    /// One A block of the pass: rows `ic..ic + mb` of A packed into this thread's buffer, then
    /// every tile of C those rows and the pass's B block make, by the micro-kernel.
    fn block(
        &self,
        pass: &Pass<'_, T>,
        (a, lda): (&[T], usize),
        (ic, mb): (usize, usize),
        (c, ldc): (SendPtr<T>, usize),
    ) {
        let (mr, nr) = (self.kernel.mr::<T>(), self.kernel.nr());
        let tile = T::tile(self.kernel);
        let Pass {
            packed_b,
            jc,
            nb,
            pc,
            kb,
            alpha,
            beta,
        } = *pass;
        T::packed_a().with(|buf| {
            let mut buf = buf.borrow_mut();
            let tiles = mb.div_ceil(mr);
            let packed_a = buf.slice(tiles * mr * kb);
            pack::pack_a(a, lda, (ic, mb), (pc, kb), mr, packed_a);
            for jr in (0..nb).step_by(nr) {
                let nn = nr.min(nb - jr);
                let bp = &packed_b[jr * kb..];
                let next_b = packed_b.get((jr + nr) * kb..).unwrap_or(&[]);
                let next_b = &next_b[..next_b.len().min(nr * kb)];
                for (t, ir) in (0..mb).step_by(mr).enumerate() {
                    pack::prefetch_share(next_b, t, tiles);
                    let mm = mr.min(mb - ir);
                    let ap = &packed_a[ir * kb..];
                    let offset = (ic + ir) + (jc + jr) * ldc;
                    // SAFETY: the tile (rows ic+ir.., mm of them; columns jc+jr.., nn of
                    // them) lies inside C (checked in gemm: m, n within ldc and c.len()); the
                    // packed panels hold kb × MR and kb × NR values; tiles of different ic
                    // blocks are disjoint, so the threads never write the same element; `tile`
                    // is the kernel this GEMM was configured with, which this CPU can run
                    // (`MicroKernel::available`).
                    unsafe {
                        tile(
                            kb,
                            ap.as_ptr(),
                            bp.as_ptr(),
                            c.get().add(offset),
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
    }
}

/// One pass of the loops over a block of B: the block packed, where it lies in B and C
/// (columns `jc..jc + nb`, rows `pc..pc + kb` of B), and the α and β its tiles apply (β only in
/// the first pass over k; later passes add).
struct Pass<'a, T> {
    packed_b: &'a [T],
    jc: usize,
    nb: usize,
    pc: usize,
    kb: usize,
    alpha: T,
    beta: T,
}

/// The row blocks (first row, rows) of an m-row C that the threads share out: at most `mc` rows
/// each, a number of them that is a multiple of `threads`, and tiles of `mr` rows spread over
/// them as evenly as whole tiles allow, so each thread's half (or third, …) of the blocks holds
/// the same work. Blocks of MC rows with the rest in a short last one left one of 2 threads
/// idle for most of a block at every pass over k (at n = 4000: 7 blocks of 512 rows and one
/// of 416, 4 % of a pass).
fn row_blocks(m: usize, mc: usize, mr: usize, threads: usize) -> Vec<(usize, usize)> {
    let tiles = m.div_ceil(mr);
    let threads = threads.clamp(1, tiles.max(1));
    let blocks = m.div_ceil(mc.max(mr)).div_ceil(threads) * threads;
    let blocks = blocks.clamp(1, tiles.max(1));
    let edge = |b: usize| (tiles * b / blocks * mr).min(m);
    (0..blocks)
        .map(|b| (edge(b), edge(b + 1) - edge(b)))
        .filter(|&(_, rows)| rows > 0)
        .collect()
}

/// C = β·C (β = 0 writes zeros without reading).
fn scale<T: Element>(c: &mut [T], ldc: usize, m: usize, n: usize, beta: T) {
    for col in c.chunks_mut(ldc).take(n) {
        for x in &mut col[..m] {
            *x = if beta == T::ZERO { T::ZERO } else { beta * *x };
        }
    }
}

/// C's pointer, shared by the threads that write disjoint tiles of it.
struct SendPtr<T>(*mut T);

impl<T> Clone for SendPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for SendPtr<T> {}

impl<T> SendPtr<T> {
    fn get(self) -> *mut T {
        self.0
    }
}

// SAFETY: the threads write disjoint tiles of C (different ic blocks), and the gemm call
// holds the only &mut to C until they have all finished.
unsafe impl<T> Send for SendPtr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for SendPtr<T> {}

/// Runs `kernel` and the portable kernel on a 37 × 29 × 41 product (edges in every
/// direction for every tile size, α and β not 1) and compares them within the forward error
/// bound of the dot products.
pub fn self_check<T: Element>(kernel: MicroKernel) -> Result<()> {
    let (m, n, k) = (37, 29, 41);
    let mut rng = crate::rng::Rng::new(31);
    let mut fill = |len: usize| {
        (0..len)
            .map(|_| T::from_f64(rng.centered_f64()))
            .collect::<Vec<T>>()
    };
    let (a, b, c0) = (fill(m * k), fill(k * n), fill(m * n));
    let blocking = Blocking {
        mc: 2 * kernel.mr::<T>(),
        kc: 16,
        nc: 2 * kernel.nr(),
    };
    let (alpha, beta) = (T::from_f64(0.75), T::from_f64(-0.5));
    let mut got = c0.clone();
    BuiltinGemm::<T>::with(kernel, blocking).gemm(
        (m, n, k),
        alpha,
        (&a, m),
        (&b, k),
        beta,
        (&mut got, m),
        false,
    );
    let mut want = c0.clone();
    BuiltinGemm::<T>::with(MicroKernel::Portable, blocking).gemm(
        (m, n, k),
        alpha,
        (&a, m),
        (&b, k),
        beta,
        (&mut want, m),
        false,
    );
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let bound = 4.0 * k as f64 * T::EPSILON;
        let error = (g.to_f64() - w.to_f64()).abs();
        if error.is_nan() || error > bound {
            bail!(
                "C({},{}) = {g:?} where the portable kernel gives {w:?}",
                i % m,
                i / m
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
