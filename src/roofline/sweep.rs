//! The intensity sweep: one read-only kernel whose FLOP per loaded element goes from 1 to 1024,
//! run at each level's working set, so that attained GFLOP/s can be read against intensity.
//!
//! **The kernel.** Each thread streams its own slice of f64 elements (all 1.0, written before
//! timing) eight vectors at a time into eight accumulators, with the widest FMA the CPU has:
//! 512-bit (AVX-512F) where it has it, else 256-bit (AVX2 and FMA); the compute ceiling the
//! plateau is held against is that width's. At 1 FLOP per element each
//! vector is added into its accumulator (`vaddpd`); at 2·k FLOP per element each loaded vector
//! goes through a chain of k FMAs into its accumulator (`a = x·x + a`, `vfmadd231pd`). Eight
//! accumulators are eight independent chains: enough to keep two FMA pipes of latency 4 busy, as
//! ERT's kernel keeps its own. The loaded values are not known to the compiler, which may not
//! split, fuse or reassociate floating-point operations, so every FLOP is executed.
//!
//! **Proof of work.** Every element is 1.0, so each FMA and each add raises its lane by exactly
//! 1: after a call over `n` elements the lanes of all accumulators sum to `n` (1 FLOP per
//! element) or `n · k` (2·k FLOP). Each call's sum is checked against that closed form; a wrong
//! sum fails the case.
//!
//! **Counting.** FLOP: an add is 1 per lane, an FMA 2 per lane. Bytes: 8 read per element and
//! nothing written, so the application's bytes and the bus's (with write-allocate) are the same:
//! intensity = FLOP per element / 8.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Result, bail};

use crate::memory::region::{HugePages, Region};
use crate::plan::{Case, CaseSpec, Context, guess};
use crate::result::{BenchResult, Params, Subsystem};
use crate::runner::{self, Quota, RunSettings, Stop, Tally, Worker};
use crate::units::format_size_approx;

/// Bytes per element (f64, read only).
pub(crate) const BYTES_PER_ELEMENT: u64 = 8;
/// Elements per step of the widest kernel (8 vectors of 8 lanes); a slice is a whole number of
/// steps, so the 256-bit kernel (8 vectors of 4 lanes) takes two steps where this takes one.
pub(crate) const STEP: u64 = 64;

/// The FLOP per element the sweep measures by default: 1, 2, 4, …, 1024.
pub(crate) fn default_flops() -> Vec<u64> {
    (0..=10).map(|p| 1u64 << p).collect()
}

/// How one FLOP-per-element setting is computed and counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Intensity {
    /// FLOP per loaded element: 1, or an even number (2 per FMA).
    pub flop_per_element: u64,
}

impl Intensity {
    /// `flop` must be 1 or even.
    pub(crate) fn new(flop: u64) -> Option<Intensity> {
        (flop == 1 || (flop >= 2 && flop.is_multiple_of(2))).then_some(Intensity {
            flop_per_element: flop,
        })
    }

    /// FMAs applied to each loaded element (0: one add instead).
    pub(crate) fn fmas(self) -> u64 {
        self.flop_per_element / 2
    }

    /// FLOP done over `elements` elements.
    pub(crate) fn flop(self, elements: u64) -> u64 {
        elements * self.flop_per_element
    }

    /// Bytes the application reads over `elements` elements; the bus moves the same (nothing
    /// is written, so no line is read for ownership).
    pub(crate) fn bytes(self, elements: u64) -> u64 {
        elements * BYTES_PER_ELEMENT
    }

    /// FLOP per byte.
    pub(crate) fn flop_per_byte(self) -> f64 {
        self.flop_per_element as f64 / BYTES_PER_ELEMENT as f64
    }

    /// The sum of the accumulators' lanes after `elements` elements of 1.0 (all passes).
    pub(crate) fn expected_checksum(self, elements: u64) -> u64 {
        elements * self.fmas().max(1)
    }

    /// Elements between two readings of the clock: about 2^20 FLOP, a whole number of steps;
    /// so the clock and the interrupt flag are read every few hundred microseconds whatever the
    /// working set. A slice smaller than that (an L1 or L2 working set) is read in several
    /// passes per chunk, rather than with a reading of the clock after each pass (16 KiB is
    /// read in about 100 ns, not much more than a reading of the clock under a hypervisor).
    pub(crate) fn chunk(self) -> u64 {
        let wanted = ((1u64 << 20) / self.flop_per_element).max(STEP);
        wanted / STEP * STEP
    }
}

/// Which code runs the sweep on this CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub(crate) enum SweepIsa {
    /// 512-bit AVX-512F (which has FMA).
    Avx512Fma,
    /// 256-bit AVX2 with FMA.
    Avx2Fma,
    /// Portable Rust: separate multiply and add (each 1 FLOP), as the compiler emits them.
    Portable,
}

impl SweepIsa {
    /// The widest FMA this CPU has.
    pub(crate) fn detect() -> SweepIsa {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                return SweepIsa::Avx512Fma;
            }
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                return SweepIsa::Avx2Fma;
            }
        }
        SweepIsa::Portable
    }

    /// The ISA name the compute ceilings use, and whether the kernel fuses.
    pub(crate) fn ceiling(self) -> (&'static str, bool) {
        match self {
            SweepIsa::Avx512Fma => ("avx512", true),
            SweepIsa::Avx2Fma => ("avx2", true),
            SweepIsa::Portable => ("scalar", false),
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            SweepIsa::Avx512Fma => "avx512-fma",
            SweepIsa::Avx2Fma => "avx2-fma",
            SweepIsa::Portable => "portable",
        }
    }

    /// Runs the kernel `passes` times over `data` (a multiple of [`STEP`] elements) into the
    /// same accumulators and returns the sum of their lanes: an L1 slice is read in passes of
    /// a few hundred cycles, which a reduction and a check after each would slow by a third.
    pub(crate) fn run(self, data: &[f64], intensity: Intensity, passes: u64) -> u64 {
        assert!((data.len() as u64).is_multiple_of(STEP));
        match self {
            #[cfg(target_arch = "x86_64")]
            SweepIsa::Avx512Fma => {
                assert!(std::arch::is_x86_feature_detected!("avx512f"));
                // SAFETY: the CPU has AVX-512F (checked above); the kernel reads only `data`,
                // in bounds (its length is a multiple of the 64-element step).
                unsafe { avx512::run(data, intensity.fmas(), passes) }
            }
            #[cfg(target_arch = "x86_64")]
            SweepIsa::Avx2Fma => {
                assert!(
                    std::arch::is_x86_feature_detected!("avx2")
                        && std::arch::is_x86_feature_detected!("fma")
                );
                // SAFETY: the CPU has AVX2 and FMA (checked above); the kernel reads only
                // `data`, in bounds (its length is a multiple of the 32-element step).
                unsafe { avx2::run(data, intensity.fmas(), passes) }
            }
            _ => portable(data, intensity.fmas(), passes),
        }
    }
}

/// The sum of the lanes, as an exact integer (every lane holds a whole number below 2^53).
fn lanes_sum(lanes: &[f64]) -> u64 {
    lanes.iter().map(|&v| v as u64).sum()
}

fn portable(data: &[f64], fmas: u64, passes: u64) -> u64 {
    // 32 accumulators, as the 256-bit kernel's 8 vectors of 4.
    let mut acc = [0.0f64; 32];
    let steps = (0..passes).flat_map(|_| data.chunks_exact(32));
    for step in steps {
        if fmas == 0 {
            for (a, x) in acc.iter_mut().zip(step) {
                *a += std::hint::black_box(*x);
            }
        } else {
            for (a, x) in acc.iter_mut().zip(step) {
                let x = std::hint::black_box(*x);
                for _ in 0..fmas {
                    *a += x * x;
                }
            }
        }
    }
    lanes_sum(&acc)
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    /// Eight accumulators over eight loaded vectors per step: an add each (`fmas` = 0), or a
    /// chain of `fmas` FMAs each; `passes` passes over `data`.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA; `data.len()` must be a multiple of 32.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn run(data: &[f64], fmas: u64, passes: u64) -> u64 {
        let mut a = [_mm256_setzero_pd(); 8];
        let steps = data.len() / 32;
        for _ in 0..passes {
            // SAFETY: the kernel's contract (above), pass after pass.
            unsafe { pass(&mut a, data.as_ptr(), steps, fmas) };
        }
        let mut lanes = [0.0f64; 32];
        for (j, a) in a.iter().enumerate() {
            // SAFETY: 4 f64s fit at lanes[4j..4j+4].
            unsafe { _mm256_storeu_pd(lanes.as_mut_ptr().add(4 * j), *a) };
        }
        super::lanes_sum(&lanes)
    }

    /// One pass of `steps` steps of 32 elements from `p` into the accumulators `a`.
    ///
    /// # Safety
    /// As [`run`]: AVX2 and FMA, and `steps` × 32 elements readable at `p`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn pass(a: &mut [__m256d; 8], mut p: *const f64, steps: usize, fmas: u64) {
        for _ in 0..steps {
            // SAFETY: `p` stays within `data`: `steps` steps of 32 elements.
            let x: [__m256d; 8] = unsafe {
                [
                    _mm256_loadu_pd(p),
                    _mm256_loadu_pd(p.add(4)),
                    _mm256_loadu_pd(p.add(8)),
                    _mm256_loadu_pd(p.add(12)),
                    _mm256_loadu_pd(p.add(16)),
                    _mm256_loadu_pd(p.add(20)),
                    _mm256_loadu_pd(p.add(24)),
                    _mm256_loadu_pd(p.add(28)),
                ]
            };
            if fmas == 0 {
                for (a, x) in a.iter_mut().zip(&x) {
                    *a = _mm256_add_pd(*a, *x);
                }
            } else {
                for _ in 0..fmas {
                    for (a, x) in a.iter_mut().zip(&x) {
                        *a = _mm256_fmadd_pd(*x, *x, *a);
                    }
                }
            }
            // SAFETY: the next step, or one past the end (not read).
            p = unsafe { p.add(32) };
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    /// As the 256-bit kernel, with 512-bit vectors: eight accumulators over eight loaded
    /// vectors of 8 lanes per step; `passes` passes over `data`.
    ///
    /// # Safety
    /// The CPU must have AVX-512F; `data.len()` must be a multiple of 64.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn run(data: &[f64], fmas: u64, passes: u64) -> u64 {
        let mut a = [_mm512_setzero_pd(); 8];
        let steps = data.len() / 64;
        for _ in 0..passes {
            // SAFETY: the kernel's contract (above), pass after pass.
            unsafe { pass(&mut a, data.as_ptr(), steps, fmas) };
        }
        let mut lanes = [0.0f64; 64];
        for (j, a) in a.iter().enumerate() {
            // SAFETY: 8 f64s fit at lanes[8j..8j+8].
            unsafe { _mm512_storeu_pd(lanes.as_mut_ptr().add(8 * j), *a) };
        }
        super::lanes_sum(&lanes)
    }

    /// One pass of `steps` steps of 64 elements from `p` into the accumulators `a`.
    ///
    /// # Safety
    /// As [`run`]: AVX-512F, and `steps` × 64 elements readable at `p`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn pass(a: &mut [__m512d; 8], mut p: *const f64, steps: usize, fmas: u64) {
        for _ in 0..steps {
            // SAFETY: `p` stays within `data`: `steps` steps of 64 elements.
            let x: [__m512d; 8] = unsafe {
                [
                    _mm512_loadu_pd(p),
                    _mm512_loadu_pd(p.add(8)),
                    _mm512_loadu_pd(p.add(16)),
                    _mm512_loadu_pd(p.add(24)),
                    _mm512_loadu_pd(p.add(32)),
                    _mm512_loadu_pd(p.add(40)),
                    _mm512_loadu_pd(p.add(48)),
                    _mm512_loadu_pd(p.add(56)),
                ]
            };
            if fmas == 0 {
                for (a, x) in a.iter_mut().zip(&x) {
                    *a = _mm512_add_pd(*a, *x);
                }
            } else {
                for _ in 0..fmas {
                    for (a, x) in a.iter_mut().zip(&x) {
                        *a = _mm512_fmadd_pd(*x, *x, *a);
                    }
                }
            }
            // SAFETY: the next step, or one past the end (not read).
            p = unsafe { p.add(64) };
        }
    }
}

/// One point of the sweep: one FLOP-per-element setting at one level's working set.
pub(crate) struct SweepCase {
    /// The memory level the working set is sized for ("L1", "L2", "L3", "DRAM").
    pub level: String,
    pub intensity: Intensity,
    pub threads: usize,
    /// f64 elements of each thread's slice, a multiple of [`STEP`].
    pub slice_elements: u64,
    pub duration: Duration,
    /// Threads pinned (the sweep's default, unlike the other workloads).
    pub pin: bool,
    pub isa: SweepIsa,
}

impl SweepCase {
    pub(crate) fn working_set(&self) -> u64 {
        self.slice_elements * BYTES_PER_ELEMENT * self.threads as u64
    }

    fn counting(&self) -> String {
        let per = self.intensity.flop_per_element;
        let how = if per == 1 {
            "1 add per loaded f64 element = 1 FLOP".to_string()
        } else {
            format!(
                "a chain of {} FMAs on each loaded f64 element = {per} FLOP (an FMA = 2 FLOP per lane)",
                self.intensity.fmas()
            )
        };
        format!(
            "{how}; 8 B read per element, nothing written: application bytes = bus bytes \
             (no write-allocate), intensity {} FLOP/B; GFLOP/s = FLOP of all threads / wall \
             time (10^9 FLOP/s); checksum of every call verified",
            crate::units::format_value(self.intensity.flop_per_byte())
        )
    }
}

impl Case for SweepCase {
    fn spec(&self) -> CaseSpec {
        let per = self.intensity.flop_per_element;
        let mut params = Params {
            threads: Some(self.threads),
            pinned: Some(self.pin),
            precision: Some("f64".into()),
            isa: Some(self.isa.ceiling().0.into()),
            fma: Some(self.isa.ceiling().1),
            working_set_bytes: Some(self.working_set()),
            duration_s: Some(self.duration.as_secs_f64()),
            ..Params::default()
        };
        params
            .other
            .insert("level".into(), self.level.clone().into());
        params.other.insert("flop_per_element".into(), per.into());
        params
            .other
            .insert("intensity".into(), self.intensity.flop_per_byte().into());
        params.other.insert("traffic".into(), "read".into());
        CaseSpec {
            id: format!(
                "roofline-sweep-{}-f{per}-s{}-t{}",
                self.level.to_lowercase(),
                self.working_set(),
                self.threads
            ),
            label: format!(
                "roofline sweep {} {} {per} FLOP/element {} threads",
                self.level,
                format_size_approx(self.working_set()),
                self.threads
            ),
            subsystem: Subsystem::Roofline,
            op: "sweep".into(),
            params,
        }
    }

    fn estimate(&self, ctx: &Context) -> Duration {
        guess::sum([
            guess::secs(self.working_set() as f64 / 4e9),
            ctx.runner.warmup,
            guess::times(self.duration, ctx.runner.repetitions.into()),
        ])
    }

    fn run(&self, ctx: &Context) -> Result<BenchResult> {
        let mut settings =
            RunSettings::new(&ctx.runner, self.threads, Stop::Duration(self.duration));
        settings.pin = self.pin;
        let failures = Arc::new(Mutex::new(Vec::<String>::new()));
        let reps = runner::measure(&settings, |_| SweepWorker::prepare(self, failures.clone()))?;
        if let Some(failure) = failures.lock().unwrap().first() {
            bail!("{failure}");
        }
        let samples: Vec<f64> = reps.iter().map(|r| r.units_per_sec() / 1e9).collect();
        let bandwidth: Vec<f64> = reps
            .iter()
            .map(|r| self.intensity.bytes(r.ops) as f64 / r.wall.as_secs_f64() / 1e9)
            .collect();
        Ok(self
            .spec()
            .measured(
                &ctx.host.hostname,
                "throughput",
                "GFLOP/s",
                self.counting(),
                samples,
            )?
            .walls(reps.iter().map(|r| r.wall))
            .extra("bandwidth", "GB/s", &bandwidth)
            .warn(runner::oversubscription_warning(self.threads))
            .warn(runner::off_core_warning(&reps, self.threads))
            .finish())
    }
}

/// One thread of the sweep: its slice, where it is in it, the failures it saw.
struct SweepWorker {
    data: Region,
    elements: u64,
    position: u64,
    intensity: Intensity,
    isa: SweepIsa,
    failures: Arc<Mutex<Vec<String>>>,
}

impl SweepWorker {
    fn prepare(case: &SweepCase, failures: Arc<Mutex<Vec<String>>>) -> Result<SweepWorker> {
        let elements = case.slice_elements;
        let data = Region::map((elements * BYTES_PER_ELEMENT) as usize, HugePages::System)?;
        // SAFETY: the mapping is page-aligned and holds `elements` f64s.
        let values = unsafe {
            std::slice::from_raw_parts_mut(data.as_ptr().cast::<f64>(), elements as usize)
        };
        values.fill(1.0); // first touch, by this thread
        Ok(SweepWorker {
            data,
            elements,
            position: 0,
            intensity: case.intensity,
            isa: case.isa,
            failures,
        })
    }

    fn values(&self, from: u64, len: u64) -> &[f64] {
        // SAFETY: the mapping holds `elements` f64s, filled in `prepare`; from + len ≤ elements.
        let all = unsafe {
            std::slice::from_raw_parts(self.data.as_ptr().cast::<f64>(), self.elements as usize)
        };
        &all[from as usize..(from + len) as usize]
    }
}

impl Worker for SweepWorker {
    fn run(&mut self, quota: &Quota) -> Result<Tally> {
        let chunk = self.intensity.chunk();
        let mut done = 0u64;
        loop {
            let n = quota.next_chunk(done, chunk);
            if n == 0 {
                break;
            }
            // The chunk, in passes over the slice from where the last one stopped.
            let mut left = n;
            while left > 0 {
                // Whole passes in one call where the chunk holds them, else the rest of a pass.
                let (len, passes) = if self.position == 0 && left >= self.elements {
                    (self.elements, left / self.elements)
                } else {
                    (left.min(self.elements - self.position), 1)
                };
                let sum = self
                    .isa
                    .run(self.values(self.position, len), self.intensity, passes);
                let len = len * passes;
                let expected = self.intensity.expected_checksum(len);
                if sum != expected {
                    self.failures.lock().unwrap().push(format!(
                        "the sweep kernel's checksum is {sum}, not {expected}: FLOPs were lost"
                    ));
                    return Ok(Tally {
                        units: self.intensity.flop(done),
                        ops: done,
                        latency: None,
                        checksum: 0,
                    });
                }
                left -= len;
                done += len;
                self.position = (self.position + len) % self.elements;
            }
        }
        Ok(Tally {
            units: self.intensity.flop(done),
            ops: done,
            latency: None,
            checksum: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flop_and_bytes_follow_the_hand_count() {
        // 1 FLOP per element: 1 add, 8 B, 1/8 FLOP/B.
        let one = Intensity::new(1).unwrap();
        assert_eq!(
            (one.fmas(), one.flop(1000), one.bytes(1000)),
            (0, 1000, 8000)
        );
        assert_eq!(one.flop_per_byte(), 0.125);
        // 1024 FLOP per element: 512 FMAs; 64 elements = 65536 FLOP over 512 B = 128 FLOP/B.
        let top = Intensity::new(1024).unwrap();
        assert_eq!(
            (top.fmas(), top.flop(64), top.bytes(64)),
            (512, 65_536, 512)
        );
        assert_eq!(top.flop_per_byte(), 128.0);
        assert_eq!(Intensity::new(3), None);
        assert_eq!(Intensity::new(0), None);
    }

    #[test]
    fn every_kernel_returns_its_closed_form() {
        let data = vec![1.0f64; 64 * 5];
        for flop in [1, 2, 4, 6, 64] {
            let i = Intensity::new(flop).unwrap();
            let mut isas = vec![SweepIsa::Portable, SweepIsa::detect()];
            // The 256-bit kernel too where the widest is the 512-bit one.
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                isas.push(SweepIsa::Avx2Fma);
            }
            for isa in isas {
                assert_eq!(
                    isa.run(&data, i, 1),
                    i.expected_checksum(320),
                    "{isa:?} {flop}"
                );
                assert_eq!(isa.run(&data[..64], i, 1), i.expected_checksum(64));
                assert_eq!(isa.run(&data, i, 3), i.expected_checksum(960));
            }
        }
    }

    #[test]
    fn a_wrong_element_changes_the_checksum() {
        let mut data = vec![1.0f64; 64];
        data[17] = 2.0;
        let i = Intensity::new(2).unwrap();
        assert_ne!(SweepIsa::detect().run(&data, i, 1), i.expected_checksum(64));
        assert_ne!(
            SweepIsa::detect().run(&data, i, 5),
            i.expected_checksum(320)
        );
    }

    #[test]
    fn chunks_are_whole_steps_of_about_a_million_flop() {
        for flop in default_flops() {
            let c = Intensity::new(flop).unwrap().chunk();
            assert_eq!(c % STEP, 0);
            assert!(
                c * flop <= 1 << 20 && c * flop > (1 << 20) - STEP * flop,
                "{flop} {c}"
            );
        }
        assert_eq!(Intensity::new(1).unwrap().chunk(), 1 << 20);
        assert_eq!(Intensity::new(1024).unwrap().chunk(), 1024);
    }
}
