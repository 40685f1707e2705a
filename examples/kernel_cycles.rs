//! Ops per cycle of each CPU kernel on one core, against its peak row, by the thread's CPU time.
//!
//! On a shared machine the wall time of `peakbench cpu` also counts the time a thread waits for a
//! core; this harness times each kernel by the CPU time of its thread (as the clock probe is
//! timed), so ops per CPU-second ÷ the measured clock is the kernel's ops per cycle, the figure
//! the "≥ 95 % of peak at the measured clock" target speaks of. Seven windows of 200 ms of CPU
//! time per kernel; the median, min and max are printed.
//!
//!     cargo run --release --example kernel_cycles -- [ID-SUBSTRING ...]
//!
//! e.g. `-- -dot -amx f16` for the dot products, the AMX tiles and f16.

use peakbench::cpu::kernels;
use peakbench::sysinfo::clock::{measure_ghz, thread_cpu_ns};

fn main() {
    let filters: Vec<String> = std::env::args().skip(1).collect();
    let info = peakbench::sysinfo::collect();
    let peaks = peakbench::peak::Peaks::compute(&info, &Default::default(), &Default::default());
    println!("kernel                 ops/cycle  peak/cycle  efficiency (median, min..max of 7)");
    for kernel in kernels::all() {
        let id = kernel.id();
        if !filters.is_empty() && !filters.iter().any(|f| id.contains(f.as_str())) {
            continue;
        }
        if !kernel.supported() {
            println!(
                "{id:<22} skipped: this CPU lacks {}",
                kernel.features.join("+")
            );
            continue;
        }
        let peak = peaks
            .cpu
            .form_row(kernel.precision, kernel.isa, kernel.fma, kernel.form)
            .and_then(|row| row.per_cycle_per_core);
        let mut per_cycle = Vec::new();
        for _ in 0..7 {
            let ghz = measure_ghz().expect("x86-64");
            let start = thread_cpu_ns();
            let (mut iters, mut checksum, mut expected) = (0u64, 0u64, 0u64);
            while thread_cpu_ns() - start < 200_000_000 {
                checksum = checksum.wrapping_add(kernel.run(4096));
                expected = expected.wrapping_add(kernel.expected_checksum(4096));
                iters += 4096;
            }
            let ns = (thread_cpu_ns() - start) as f64;
            assert_eq!(checksum, expected, "{id}: checksum");
            per_cycle.push(iters as f64 * kernel.ops_per_iteration() as f64 / ns / ghz);
        }
        per_cycle.sort_by(f64::total_cmp);
        let median = per_cycle[3];
        match peak {
            Some(p) => println!(
                "{id:<22} {median:>9.1}  {p:>10.1}  {:.1} % ({:.1} .. {:.1})",
                100.0 * median / p,
                100.0 * per_cycle[0] / p,
                100.0 * per_cycle[6] / p
            ),
            None => println!("{id:<22} {median:>9.1}  {:>10}  no peak row", "?"),
        }
    }
}
