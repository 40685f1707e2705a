//! Which CPUs this process may run on, and pinning the calling thread to one of them: the one
//! place that calls `sched_getaffinity` and `sched_setaffinity` for measurements (the runner's
//! `--pin` and the core-to-core probe of [`super::c2c`] alike).

use anyhow::{Result, bail};

/// The CPUs `sched_getaffinity` allows the calling thread, in order; every CPU the C library
/// counts when the call fails.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it for the calling thread, and
    // CPU_ISSET reads it for indexes below CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            let all = std::thread::available_parallelism().map_or(1, |n| n.get());
            return (0..all).collect();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&cpu| libc::CPU_ISSET(cpu, &set))
            .collect()
    }
}

/// Pins the calling thread to one CPU.
pub fn pin_to(cpu: usize) -> Result<()> {
    pin_to_set(&[cpu])
}

/// Confines the calling thread, and the threads it starts after, to `cpus` (a BLAS's own
/// threads inherit the set of the thread that starts them).
pub fn pin_to_set(cpus: &[usize]) -> Result<()> {
    if let Some(&bad) = cpus.iter().find(|&&c| c >= libc::CPU_SETSIZE as usize) {
        bail!(
            "cannot pin a thread to CPU {bad}: beyond the {} CPUs a set holds",
            libc::CPU_SETSIZE
        );
    }
    // SAFETY: cpu_set_t is plain data; every CPU set is below CPU_SETSIZE (checked above).
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        bail!(
            "cannot pin a thread to CPU {}: {}",
            super::format_cpu_list(cpus),
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}
