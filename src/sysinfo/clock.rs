//! The clock of the core the calling thread runs on, measured twice, two ways.
//!
//! A chain of dependent instructions whose latency is known counts cycles: instructions per
//! second × cycles per instruction = cycles per second. Two chains are timed:
//!
//! - register–register adds (`add x, y`), 1 cycle each on every x86-64 core;
//! - 64-bit multiplies (`imul x, y`), 3 cycles each on every x86-64 core since Core 2 and Zen 1.
//!
//! An add of an *immediate* (`add x, 1`) is not used: Golden Cove cores (Alder and Raptor Lake
//! P-cores, Sapphire, Emerald and Granite Rapids) fold chains of immediate adds at rename, about
//! 5.6 a cycle, so such a chain read 23 GHz on a 4 GHz Sapphire Rapids-class core. No core is
//! known to fold either chain used here, and the two do not share a unit: where a future core
//! shortcuts one of them, the two readings disagree, and the clock is unknown, not wrong.
//!
//! Each chain is timed by the thread's CPU time, not by the wall time: on a busy machine the wall
//! time also counts the time the thread waits for a core, and reads a clock several times too
//! slow. The windows of the two chains alternate, six each of 15 ms (up to thirty-six while the two
//! disagree), and the fastest of each chain is kept, the one least disturbed.

/// Two chains may disagree by at most this fraction before the clock is called unknown.
pub const AGREEMENT: f64 = 0.05;

/// How far below the clock at rest the clock right after some instructions must read
/// ([`ratio_after`]) before the peaks of those instructions use it: the spread of the short
/// reading on a quiet core is well under this.
pub const LICENCE: f64 = 0.02;

/// The clock a core holds under some instructions (its frequency licence for them): the clock
/// at rest × `ratio` from [`ratio_after`], where the ratio lies more than [`LICENCE`] below 1;
/// `None` where it does not (the instructions keep the clock at rest).
pub fn licence_clock(rest_ghz: f64, ratio: f64) -> Option<f64> {
    (1.0 - ratio > LICENCE).then_some(rest_ghz * ratio)
}

/// How the reason a disagreeing reading is no clock begins ([`ClockReading::agreed`]): the
/// peaks' warning looks for it.
pub const DISAGREEMENT: &str = "the add chain read";

/// The clock read by the two chains, GHz.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClockReading {
    /// From the chain of dependent register–register adds (1 cycle each).
    pub add_ghz: f64,
    /// From the chain of dependent 64-bit multiplies (3 cycles each).
    pub imul_ghz: f64,
}

impl ClockReading {
    /// How far apart the two readings are, as a fraction of the lower one.
    pub fn spread(&self) -> f64 {
        let (lo, hi) = if self.add_ghz < self.imul_ghz {
            (self.add_ghz, self.imul_ghz)
        } else {
            (self.imul_ghz, self.add_ghz)
        };
        if lo > 0.0 {
            hi / lo - 1.0
        } else {
            f64::INFINITY
        }
    }

    /// The clock when the two readings agree within [`AGREEMENT`] (the add chain's, the finer
    /// grained), else why it is unknown.
    pub fn agreed(&self) -> Result<f64, String> {
        if self.spread() <= AGREEMENT {
            Ok(self.add_ghz)
        } else {
            Err(format!(
                "{DISAGREEMENT} {:.2} GHz and the imul chain {:.2} GHz, {:.0} % apart (more than \
                 {:.0} %): one of them was shortcut or disturbed, so neither is trusted",
                self.add_ghz,
                self.imul_ghz,
                self.spread() * 100.0,
                AGREEMENT * 100.0
            ))
        }
    }

    /// "add chain 4.01 GHz, imul chain 4.02 GHz": both readings, for a factor's detail.
    pub fn describe(&self) -> String {
        format!(
            "dependent register add chain (1 cycle each) {:.3} GHz, imul chain (3 cycles each) \
             {:.3} GHz",
            self.add_ghz, self.imul_ghz
        )
    }
}

/// Both readings of the current core's clock; `None` off x86-64.
pub fn read() -> Option<ClockReading> {
    #[cfg(target_arch = "x86_64")]
    {
        let mut reading = ClockReading {
            add_ghz: 0.0,
            imul_ghz: 0.0,
        };
        // The first window of a pair can start on a core still waking (from a cgroup's
        // throttle, or a halted vCPU): the order flips every pair so that neither chain
        // always takes it. A disturbance only slows a window, so the fastest of each chain
        // can only come nearer its true clock: where six pairs still disagree (a host that
        // disturbed every window of one chain; CI saw it twice in a loaded test run), up to
        // thirty more, about a second, are added before the disagreement stands. A chain a
        // core shortcuts reads several times off, which no number of windows mends.
        for i in 0..ROUNDS * 6 {
            if i % 2 == 0 {
                reading.add_ghz = reading.add_ghz.max(chain_ghz(add_chain, 1.0));
                reading.imul_ghz = reading.imul_ghz.max(chain_ghz(imul_chain, 3.0));
            } else {
                reading.imul_ghz = reading.imul_ghz.max(chain_ghz(imul_chain, 3.0));
                reading.add_ghz = reading.add_ghz.max(chain_ghz(add_chain, 1.0));
            }
            if i % 6 == 5 && reading.agreed().is_ok() {
                break;
            }
        }
        Some(reading)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

/// The clock in GHz when both chains agree; `None` when they do not, or off x86-64.
pub fn measure_ghz() -> Option<f64> {
    read()?.agreed().ok()
}

/// The clock right now, in about 5 ms: the fastest of [`GLANCES`] add chains and of as many imul
/// chains of [`CHAIN`] instructions each (25 and 75 µs at 4 GHz), alternating, timed by the wall
/// clock; `None` where the two disagree ([`ClockReading::agreed`]) or off x86-64. Short enough
/// to read right after every case whose peak stands on the core's clock, where [`read`] takes a
/// fifth of a second: a preempted chain only reads slower, and the fastest of forty is one that
/// was not.
pub fn glance_ghz() -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        let timed = |chain: fn(u64) -> u64, cycles_each: f64| {
            let start = std::time::Instant::now();
            std::hint::black_box(chain(std::hint::black_box(1)));
            CHAIN as f64 * cycles_each / start.elapsed().as_nanos().max(1) as f64
        };
        let mut reading = ClockReading {
            add_ghz: 0.0,
            imul_ghz: 0.0,
        };
        for _ in 0..GLANCES {
            reading.add_ghz = reading.add_ghz.max(timed(add_chain, 1.0));
            reading.imul_ghz = reading.imul_ghz.max(timed(imul_chain, 3.0));
        }
        reading.agreed().ok()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

/// Chains of each kind a [`glance_ghz`] times.
#[cfg(target_arch = "x86_64")]
const GLANCES: usize = 40;

/// How much slower the clock runs right after `burst` than right after plain adds: the fastest
/// of nine add chains of [`CHAIN`] adds (about 25 µs) timed at once after 2 ms of `burst`, over
/// the fastest of nine timed after 2 ms of adds, the two alternating so that a host's clock
/// drifting between them moves both alike. A core that lowers its clock for wide vector work
/// (the AVX-512 and AMX frequency licences of Intel's server cores) and keeps the lower clock
/// for milliseconds after the last such instruction, as older Xeons do, runs the chain at it.
/// One that raises it again at once stalls while it does: on a 2-vCPU KVM guest of a Golden Cove
/// server core (a Sapphire Rapids-class Xeon) the clock is back within 3 µs of the last 512-bit
/// FMA after a stall of about 1.6 µs, and the 25 µs chain read 0.943-0.945 of the clock after
/// adds where a chain run *beside* the FMAs, which needs no assumption on how long the licence
/// lasts, read 0.944-0.946 (`bench/licence.c`, docs/cpu.md). `None` off x86-64.
pub fn ratio_after(burst: &mut dyn FnMut()) -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        let spell = std::time::Duration::from_millis(2);
        let chain_after = |work: &mut dyn FnMut()| {
            let start = std::time::Instant::now();
            while start.elapsed() < spell {
                work();
            }
            let start = std::time::Instant::now();
            std::hint::black_box(add_chain(std::hint::black_box(1)));
            CHAIN as f64 / start.elapsed().as_nanos() as f64
        };
        let (mut rest, mut after) = (0.0f64, 0.0f64);
        for _ in 0..9 {
            rest = rest.max(chain_after(&mut || {
                std::hint::black_box(add_chain(std::hint::black_box(1)));
            }));
            after = after.max(chain_after(burst));
        }
        (rest > 0.0).then(|| after / rest)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = burst;
        None
    }
}

/// The reading of a machine read off earlier: its `clock-independent.txt` ("ADD_GHZ IMUL_GHZ",
/// as `bench/clock.c` prints it).
pub fn from_fixture(dir: &std::path::Path) -> Option<ClockReading> {
    let text = std::fs::read_to_string(dir.join("clock-independent.txt")).ok()?;
    let mut numbers = text.split_whitespace().map(str::parse::<f64>);
    match (numbers.next(), numbers.next()) {
        (Some(Ok(add_ghz)), Some(Ok(imul_ghz))) if add_ghz > 0.0 && imul_ghz > 0.0 => {
            Some(ClockReading { add_ghz, imul_ghz })
        }
        _ => None,
    }
}

/// At most this many rounds of six window pairs ([`read`]).
#[cfg(target_arch = "x86_64")]
const ROUNDS: usize = 6;

/// Instructions in one call of a chain.
#[cfg(target_arch = "x86_64")]
const CHAIN: u64 = 100 * 1_000;

/// Runs `chain` for one 15 ms window of thread CPU time; GHz = instructions × cycles each / ns.
#[cfg(target_arch = "x86_64")]
fn chain_ghz(chain: fn(u64) -> u64, cycles_each: f64) -> f64 {
    let start = thread_cpu_ns();
    let mut calls = 0u64;
    let mut x = 1u64;
    while thread_cpu_ns() - start < 15_000_000 {
        x = chain(std::hint::black_box(x));
        calls += 1;
    }
    std::hint::black_box(x);
    let ns = (thread_cpu_ns() - start) as f64;
    (calls * CHAIN) as f64 * cycles_each / ns
}

/// `CHAIN` dependent `add x, y` with y in a register (never folded at rename, unlike `add x, imm`).
#[cfg(target_arch = "x86_64")]
fn add_chain(mut x: u64) -> u64 {
    let one = std::hint::black_box(1u64);
    for _ in 0..1_000 {
        // SAFETY: register-only adds; no memory, no stack, flags clobbered only.
        unsafe {
            std::arch::asm!(
                ".rept 100", "add {x}, {y}", ".endr",
                x = inout(reg) x, y = in(reg) one, options(nomem, nostack)
            );
        }
    }
    x
}

/// `CHAIN` dependent `imul x, y` (3 cycles each); y = 1 keeps x unchanged.
#[cfg(target_arch = "x86_64")]
fn imul_chain(mut x: u64) -> u64 {
    let one = std::hint::black_box(1u64);
    for _ in 0..1_000 {
        // SAFETY: register-only multiplies; no memory, no stack, flags clobbered only.
        unsafe {
            std::arch::asm!(
                ".rept 100", "imul {x}, {y}", ".endr",
                x = inout(reg) x, y = in(reg) one, options(nomem, nostack)
            );
        }
    }
    x
}

/// CPU time of the calling thread, ns: it stops while the thread is descheduled (and, with
/// paravirtual steal accounting, while the hypervisor runs another guest on the core).
pub fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: t is a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What holds on every CPU: the two chains agree (a folded chain would not), and the clock
    /// they agree on is one a core can have.
    #[test]
    fn the_two_clock_chains_agree_on_a_plausible_clock() {
        // A descheduled window only slows a chain; `read` adds windows while they disagree.
        let Some(reading) = read() else { return };
        let ghz = reading.agreed().unwrap_or_else(|why| panic!("{why}"));
        assert!((0.3..7.0).contains(&ghz), "{ghz} GHz");
    }

    /// What holds on every CPU: a glance reads the clock the full reading does. A busy host
    /// slows one reading at a time and a boost clock moves between them, so each side gets a
    /// second try before a difference stands.
    #[test]
    fn a_glance_reads_the_clock_the_full_reading_does() {
        let Some(full) = measure_ghz() else { return };
        let near = |glance: Option<f64>| glance.is_some_and(|g| (g / full - 1.0).abs() < 0.1);
        let glance = glance_ghz();
        if near(glance) {
            return;
        }
        let (full, glance) = (measure_ghz().unwrap(), glance_ghz());
        assert!(
            near(glance),
            "glance {glance:?} GHz, full reading {full} GHz"
        );
    }

    /// What holds on every CPU: the clock right after plain adds is the clock right after
    /// plain adds, and no core runs faster after 512-bit FMAs than after adds.
    #[test]
    fn the_clock_after_a_burst_is_read_against_the_same_adds() {
        let adds = || {
            std::hint::black_box(add_chain(std::hint::black_box(1)));
        };
        let Some(same) = ratio_after(&mut || adds()) else {
            return;
        };
        // The fastest of nine short windows each; a busy host only slows one side at a time,
        // so retry once before calling it a difference.
        let same = if (0.9..1.1).contains(&same) {
            same
        } else {
            ratio_after(&mut || adds()).unwrap()
        };
        assert!((0.9..1.1).contains(&same), "{same}");
        if std::arch::is_x86_feature_detected!("avx512f") {
            let wide = ratio_after(&mut || {
                // SAFETY: register-only 512-bit FMAs on a CPU with AVX-512F.
                unsafe {
                    std::arch::asm!(
                        "vpxorq zmm0, zmm0, zmm0",
                        "vpxorq zmm1, zmm1, zmm1",
                        "vpxorq zmm2, zmm2, zmm2",
                        ".rept 64", "vfmadd231pd zmm0, zmm1, zmm2", ".endr",
                        out("zmm0") _, out("zmm1") _, out("zmm2") _, options(nomem, nostack)
                    );
                }
            })
            .unwrap();
            assert!(wide < 1.1, "{wide}");
        }
    }

    #[test]
    fn readings_apart_by_more_than_five_percent_are_no_clock() {
        // The Golden Cove case: an immediate-add chain folded 5.6 a cycle.
        let folded = ClockReading {
            add_ghz: 22.7,
            imul_ghz: 4.02,
        };
        let why = folded.agreed().unwrap_err();
        assert!(
            why.contains("22.70 GHz") && why.contains("4.02 GHz"),
            "{why}"
        );
        let close = ClockReading {
            add_ghz: 4.0,
            imul_ghz: 4.19,
        };
        assert_eq!(close.agreed(), Ok(4.0));
        let apart = ClockReading {
            add_ghz: 4.0,
            imul_ghz: 4.21,
        };
        assert!(apart.agreed().is_err());
        assert!((apart.spread() - 0.0525).abs() < 1e-9);
    }
}
