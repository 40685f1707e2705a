//! The engines that multiply and solve, and everything `cpu gemm` and `cpu linpack` share about
//! them: an engine is peakbench's own ([`super::builtin`]) or a BLAS and LAPACK loaded at run
//! time ([`blas`]).
//!
//! Here: opening an engine, its multiply and the check of a product ([`product`]), picking the
//! fastest with a short measured multiply for `--blas auto` ([`probe`]), the memory check of an
//! order, running on the threads the library owns (the BLAS's, set to the case's count, or a
//! rayon pool for the built-in engine, pinned as `--pin` asks), and what a case and its result
//! say of the engine.

pub mod blas;
pub(crate) mod probe;
pub mod product;

use anyhow::{Context as _, Result, anyhow};

use super::builtin::FAER_VERSION;
use super::builtin::dgemm::{BuiltinGemm, Element};
use super::builtin::lu::{self, LuElement};
use crate::error::usage;
use crate::runner;
use blas::{Blas, BlasElement, DenseEngine, Solver};

/// The stack of the thread that calls the BLAS or LAPACK: OpenBLAS's recursive LU overflows the
/// 2 MiB a Rust thread gets by default, and dies of a segmentation fault.
pub const LAPACK_STACK: usize = 64 << 20;

/// An element every engine computes in, f64 or f32: a library's GEMM and LAPACK take it, and
/// the built-in GEMM and LU.
pub trait DenseElement: BlasElement + LuElement {}

impl<T: BlasElement + LuElement> DenseElement for T {}

/// Refuses an order `n` whose matrices (`needed` bytes) do not fit in the `available` memory
/// (0: unknown, not checked). The plan checks every order before anything runs, and a case
/// again when it starts, since memory may have gone in between.
pub fn check_fits(n: u64, needed: u64, available: u64) -> Result<()> {
    if available > 0 && needed > available {
        return Err(usage(format!(
            "--n: {n} needs {} of memory and {} is available: give a smaller order",
            crate::units::format_size_approx(needed),
            crate::units::format_size_approx(available)
        )));
    }
    Ok(())
}

/// Loads the engine's library, or none for the built-in engine. Called on the case's own
/// thread, which is not pinned: OpenBLAS starts its worker threads when it is loaded, and they
/// would inherit a pinned thread's single CPU.
pub fn open(engine: DenseEngine) -> Result<Option<&'static Blas>> {
    match engine {
        DenseEngine::Builtin => Ok(None),
        DenseEngine::Library(vendor) => blas::open(vendor)
            .map(Some)
            .map_err(|why| anyhow!("{}: {why}", vendor.name())),
        DenseEngine::File(path) => blas::open_file(path).map(Some),
    }
}

/// Runs `work` with the library's threads: for a BLAS, on a thread of its own with a
/// [`LAPACK_STACK`] stack, confined with `pin` to the first `threads` CPUs (which the library's
/// threads inherit), and the library set to `threads`; for the built-in engine, in a rayon
/// pool of `threads` threads, thread i pinned to the i-th CPU with `pin`. `name` names the
/// thread in errors and warnings.
pub fn run_on_threads<T: Send>(
    name: &str,
    library: Option<&Blas>,
    threads: usize,
    pin: bool,
    work: impl FnOnce() -> Result<T> + Send,
) -> Result<T> {
    match library {
        Some(blas) => std::thread::scope(|scope| {
            let worker = std::thread::Builder::new()
                .name(name.into())
                .stack_size(LAPACK_STACK)
                .spawn_scoped(scope, || {
                    // The library's own threads inherit this thread's CPUs: one CPU would
                    // put them all on it, so it gets the first `threads` CPUs.
                    let cpus: Vec<usize> = (0..threads)
                        .filter_map(|i| runner::cpu_for(pin, i))
                        .collect();
                    if !cpus.is_empty() {
                        runner::pin_to_set(&cpus)?;
                    }
                    blas.with_threads(threads, work)
                })
                .with_context(|| format!("cannot start the {name} thread"))?;
            worker
                .join()
                .map_err(|_| anyhow!("the {name} thread panicked"))?
        }),
        None => {
            let name = name.to_string();
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .start_handler(move |index| {
                    // A thread that cannot be pinned runs unpinned; the result says pinned
                    // only as asked, so report it.
                    if let Some(cpu) = runner::cpu_for(pin, index)
                        && let Err(e) = runner::pin_to(cpu)
                    {
                        eprintln!("warning: {name} thread {index}: {e:#}");
                    }
                })
                .build()?;
            pool.install(work)
        }
    }
}

/// Where a case's `threads` run, as its result states it: for the built-in engine each
/// thread's CPU when pinned ("thread 0 on CPU 0, thread 1 on CPU 1"), for a library the CPUs
/// its threads are confined to; otherwise that the scheduler places them.
pub fn placement(library: Option<&Blas>, threads: usize, pin: bool) -> String {
    let cpus: Vec<usize> = (0..threads)
        .filter_map(|i| runner::cpu_for(pin, i))
        .collect();
    if cpus.is_empty() {
        return format!("{threads} threads, unpinned: the scheduler places them");
    }
    match library {
        None => cpus
            .iter()
            .enumerate()
            .map(|(i, cpu)| format!("thread {i} on CPU {cpu}"))
            .collect::<Vec<_>>()
            .join(", "),
        Some(blas) => {
            let mut set = cpus.clone();
            set.sort_unstable();
            set.dedup();
            format!(
                "{threads} threads of {} confined to CPUs {} (the library places them inside)",
                blas.name(),
                crate::sysinfo::format_cpu_list(&set)
            )
        }
    }
}

/// A case id's suffix naming a library engine (`-openblas`, or for `--blas PATH` the file's
/// name in lower-case letters, digits and dashes: `-libblis-so-4`), so `--blas all` gives each
/// its own.
pub fn engine_suffix(solver: Solver) -> String {
    match solver {
        Solver::Fixed(DenseEngine::Library(vendor)) => format!("-{}", vendor.name().to_lowercase()),
        Solver::Fixed(DenseEngine::File(path)) => {
            let file = std::path::Path::new(path)
                .file_name()
                .map_or(path.into(), |f| f.to_string_lossy());
            let slug: String = file
                .to_lowercase()
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                .collect();
            format!("-{}", slug.trim_matches('-'))
        }
        _ => String::new(),
    }
}

/// The engine a case is forced to, for the tables (`builtin`, `openblas`, …, or the path
/// `--blas` gave): `--blas all` gives one row per engine, told apart by it; `None` for `auto`,
/// whose pick the result names.
pub fn engine_name(solver: Solver) -> Option<String> {
    match solver {
        Solver::Auto => None,
        Solver::Fixed(DenseEngine::Builtin) => Some("builtin".into()),
        Solver::Fixed(DenseEngine::Library(vendor)) => Some(vendor.name().to_lowercase()),
        Solver::Fixed(DenseEngine::File(path)) => Some(path.into()),
    }
}

/// How a case's plan names its solver; `builtin` is the built-in engine's words.
pub fn solver_label(solver: Solver, builtin: &str) -> String {
    match solver {
        Solver::Auto => "auto (the fastest engine present, probed when the case runs)".into(),
        Solver::Fixed(DenseEngine::Builtin) => builtin.into(),
        Solver::Fixed(engine) => engine.name().into(),
    }
}

/// What the result of a case says of the engine that ran: "builtin", or the library's name
/// ("OpenBLAS", or "BLAS at PATH" for a file `--blas` gave that peakbench does not know).
pub fn engine_ran(library: Option<&Blas>) -> String {
    library.map_or("builtin".into(), Blas::name)
}

/// How `dense_engine_choice` states a forced engine: "forced by --blas", with the path when
/// `--blas PATH` gave one.
pub fn forced_text(engine: DenseEngine) -> String {
    match engine {
        DenseEngine::File(path) => format!("forced by --blas {path}"),
        _ => "forced by --blas".into(),
    }
}

/// What a result says of the library that ran: name, version, kernel set, file; for the
/// built-in engine, its GEMM of T (and with `with_lu`, the LU over it).
pub fn library_params<T: Element>(
    library: Option<&Blas>,
    with_lu: bool,
) -> Vec<(&'static str, serde_json::Value)> {
    match library {
        Some(blas) => {
            let mut params = vec![
                ("library", blas.describe().into()),
                ("library_version", blas.version.clone().into()),
                ("library_path", blas.path.clone().into()),
            ];
            if let Some(how) = &blas.found_by {
                params.push(("library_found_by", how.clone().into()));
            }
            if let Some(kernel) = &blas.kernel {
                params.push(("library_kernel", kernel.clone().into()));
            }
            if let Some(lapack) = &blas.lapack_path {
                params.push(("lapack_path", lapack.clone().into()));
            }
            params
        }
        None => {
            let gemm = BuiltinGemm::<T>::current();
            let mut params = vec![
                (
                    "library",
                    format!("peakbench {}, faer {FAER_VERSION}", T::ROUTINE).into(),
                ),
                ("library_version", FAER_VERSION.into()),
            ];
            if with_lu {
                params.push(("lu_engine", lu::engine_text::<T>(lu::NB).into()));
            }
            params.extend([
                ("gemm_engine", gemm.describe().into()),
                ("gemm_kernel", gemm.kernel_name().into()),
                (
                    "gemm_blocking",
                    format!(
                        "MC={} KC={} NC={}",
                        gemm.blocking.mc, gemm.blocking.kc, gemm.blocking.nc
                    )
                    .into(),
                ),
                ("gemm_blocking_source", gemm.blocking_source.clone().into()),
                ("gemm_tile_source", gemm.tile_source().into()),
            ]);
            params
        }
    }
}

/// The warning of a library without a call to set its thread count, which ran on its own
/// default instead of the case's threads.
pub fn threads_warning(library: Option<&Blas>) -> Option<String> {
    library.filter(|l| !l.sets_threads()).map(|blas| {
        format!(
            "{} has no call to set its thread count: it ran with its own default",
            blas.name()
        )
    })
}
