//! The clock of the core the calling thread runs on, measured.
//!
//! A chain of dependent 64-bit adds retires one add per cycle on every x86-64 core since the P6,
//! so adds per second are cycles per second. The chain is timed by the thread's CPU time, not by
//! the wall time: on a busy machine the wall time also counts the time the thread waits for a
//! core, and reads a clock several times too slow. Of five 20 ms windows the fastest is kept,
//! the one least disturbed.

/// The clock of the current core in GHz, from a dependent add chain timed by the thread's CPU
/// time (best of five 20 ms windows); `None` off x86-64.
pub fn measure_ghz() -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        let mut best: f64 = 0.0;
        for _ in 0..5 {
            let start = thread_cpu_ns();
            let mut rounds = 0u64;
            let mut x = 0u64;
            while thread_cpu_ns() - start < 20_000_000 {
                for _ in 0..10_000 {
                    // SAFETY: register-only adds; no memory, no stack, flags clobbered only.
                    unsafe {
                        std::arch::asm!(
                            ".rept 100", "add {x}, 1", ".endr",
                            x = inout(reg) x, options(nomem, nostack)
                        );
                    }
                }
                rounds += 1;
            }
            std::hint::black_box(x);
            let ns = (thread_cpu_ns() - start) as f64;
            best = best.max(rounds as f64 * 1_000_000.0 / ns);
        }
        Some(best)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
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

    #[test]
    fn the_clock_probe_reads_a_plausible_clock() {
        if let Some(ghz) = measure_ghz() {
            assert!((0.3..10.0).contains(&ghz), "{ghz} GHz");
        }
    }
}
