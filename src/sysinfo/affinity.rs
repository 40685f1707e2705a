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
    if cpu >= libc::CPU_SETSIZE as usize {
        bail!(
            "cannot pin a thread to CPU {cpu}: beyond the {} CPUs a set holds",
            libc::CPU_SETSIZE
        );
    }
    // SAFETY: cpu_set_t is plain data; the set names one CPU below CPU_SETSIZE.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        bail!(
            "cannot pin a thread to CPU {cpu}: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}
