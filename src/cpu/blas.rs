//! The machine's own BLAS and LAPACK, loaded at run time.
//!
//! HPL's speed is its BLAS's speed: on a 2-core Zen 4 guest OpenBLAS's Cooper Lake DGEMM reads
//! 0.9–1.3 × faer's matrix multiply (see `docs/cpu.md`), so a Linpack on faer alone reads a
//! third below HPL. peakbench therefore opens the BLAS the machine has (OpenBLAS, BLIS or MKL)
//! with `dlopen` when it runs; the binary neither links nor needs any of them, and `--blas
//! builtin` (alias `faer`; or a machine with none) uses peakbench's own DGEMM and LU. A library is opened once per process
//! and never closed: OpenBLAS starts its worker threads when it is loaded.
//!
//! Only the Fortran interface is used (`dgemm_`, `dgetrf_`, `dgetrs_`, 32-bit integers: the
//! LP64 interface every one of these libraries has), plus each library's calls that set its
//! thread count and name its version and the kernels it chose for this CPU.

use std::ffi::{CStr, c_char, c_int};
use std::path::Path;
use std::sync::{Mutex, OnceLock};

use anyhow::{Context as _, Result, bail};
use libloading::Library;

use crate::names::named_enum;

named_enum! {
    /// Which BLAS and LAPACK the dense-algebra cases run on.
    pub enum BlasChoice {
        /// the fastest engine present, by a short measured probe of each
        Auto = "auto",
        /// built into peakbench: its own DGEMM, and its own LU over it
        Builtin = "builtin" | "faer",
        /// every engine present, side by side
        All = "all",
        /// OpenBLAS (libopenblas.so.0)
        Openblas = "openblas",
        /// BLIS (libblis.so.4), with the LAPACK of liblapack.so.3
        Blis = "blis",
        /// Intel MKL (libmkl_rt.so)
        Mkl = "mkl",
    }
}

/// A BLAS library peakbench knows how to open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vendor {
    OpenBlas,
    Blis,
    Mkl,
}

impl Vendor {
    pub const ALL: [Vendor; 3] = [Vendor::OpenBlas, Vendor::Blis, Vendor::Mkl];

    pub fn name(self) -> &'static str {
        match self {
            Vendor::OpenBlas => "OpenBLAS",
            Vendor::Blis => "BLIS",
            Vendor::Mkl => "MKL",
        }
    }

    /// Where Debian and Ubuntu (multi-arch paths), Fedora and Intel's installer put it.
    fn candidates(self) -> &'static [&'static str] {
        match self {
            Vendor::OpenBlas => &[
                "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0",
                "/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0",
                "/usr/lib/x86_64-linux-gnu/openblas-serial/libopenblas.so.0",
                "/usr/lib64/libopenblasp.so.0",
                "/usr/lib64/libopenblas.so.0",
            ],
            Vendor::Blis => &[
                "/usr/lib/x86_64-linux-gnu/blis-pthread/libblis.so.4",
                "/usr/lib/x86_64-linux-gnu/blis-openmp/libblis.so.4",
                "/usr/lib/x86_64-linux-gnu/blis-serial/libblis.so.4",
                "/usr/lib64/libblis.so.4",
            ],
            Vendor::Mkl => &[
                "/usr/lib/x86_64-linux-gnu/libmkl_rt.so",
                "/opt/intel/oneapi/mkl/latest/lib/libmkl_rt.so.2",
                "/opt/intel/oneapi/mkl/latest/lib/intel64/libmkl_rt.so.2",
            ],
        }
    }

    /// Whether one of its files is there.
    pub fn installed(self) -> bool {
        self.installed_path().is_some()
    }

    /// The first of its files that is there.
    pub fn installed_path(self) -> Option<&'static str> {
        self.candidates()
            .iter()
            .copied()
            .find(|p| Path::new(p).exists())
    }

    fn install(self) -> &'static str {
        match self {
            Vendor::OpenBlas => "apt-get install libopenblas0-pthread",
            Vendor::Blis => "apt-get install libblis4-pthread liblapack3",
            Vendor::Mkl => "apt-get install libmkl-rt",
        }
    }
}

type Dgemm = unsafe extern "C" fn(
    transa: *const c_char,
    transb: *const c_char,
    m: *const c_int,
    n: *const c_int,
    k: *const c_int,
    alpha: *const f64,
    a: *const f64,
    lda: *const c_int,
    b: *const f64,
    ldb: *const c_int,
    beta: *const f64,
    c: *mut f64,
    ldc: *const c_int,
    transa_len: usize,
    transb_len: usize,
);
type Dgetrf = unsafe extern "C" fn(
    m: *const c_int,
    n: *const c_int,
    a: *mut f64,
    lda: *const c_int,
    ipiv: *mut c_int,
    info: *mut c_int,
);
type Dgetrs = unsafe extern "C" fn(
    trans: *const c_char,
    n: *const c_int,
    nrhs: *const c_int,
    a: *const f64,
    lda: *const c_int,
    ipiv: *const c_int,
    b: *mut f64,
    ldb: *const c_int,
    info: *mut c_int,
    trans_len: usize,
);
type SetThreads = unsafe extern "C" fn(c_int);
type SetThreadsByRef = unsafe extern "C" fn(*const c_int);
type GetText = unsafe extern "C" fn() -> *const c_char;

/// How a library's thread count is set.
#[derive(Clone, Copy)]
enum Threads {
    ByValue(SetThreads),
    ByReference(SetThreadsByRef),
}

/// An opened BLAS and LAPACK.
pub struct Blas {
    pub vendor: Vendor,
    /// The file the BLAS was opened from.
    pub path: String,
    /// Where LAPACK's dgetrf/dgetrs came from, when not the BLAS file itself.
    pub lapack_path: Option<String>,
    /// The version as the library states it, e.g. "OpenBLAS 0.3.21".
    pub version: String,
    /// The kernel set it chose for this CPU, e.g. "Cooperlake", when it says.
    pub kernel: Option<String>,
    dgemm: Dgemm,
    dgetrf: Dgetrf,
    dgetrs: Dgetrs,
    threads: Option<Threads>,
    // Kept open for the life of the process: the function pointers above point into them.
    _libraries: Vec<Library>,
}

/// Libraries opened so far, one slot per vendor (`None`: not installed, with why).
static OPENED: [OnceLock<Result<Blas, String>>; 3] =
    [OnceLock::new(), OnceLock::new(), OnceLock::new()];

/// Serialises calls that set a library's thread count and then compute with it.
static IN_USE: Mutex<()> = Mutex::new(());

/// The library of `vendor`, opened on first use; `Err` says why it cannot be used.
pub fn open(vendor: Vendor) -> Result<&'static Blas, String> {
    let slot = &OPENED[Vendor::ALL.iter().position(|v| *v == vendor).unwrap_or(0)];
    slot.get_or_init(|| load(vendor).map_err(|e| format!("{e:#}")))
        .as_ref()
        .map_err(Clone::clone)
}

/// An engine that multiplies and solves: built into peakbench, or a library's BLAS and LAPACK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// peakbench's own DGEMM ([`super::dgemm`]); for Linpack, its own LU ([`super::lu`]) over it.
    Builtin,
    Library(Vendor),
}

impl Engine {
    /// "builtin", "OpenBLAS", …
    pub fn name(self) -> &'static str {
        match self {
            Engine::Builtin => "builtin",
            Engine::Library(vendor) => vendor.name(),
        }
    }
}

/// What a case runs on: one engine, or the fastest present, picked by a probe when it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Solver {
    Auto,
    Fixed(Engine),
}

/// The engines present: the built-in one and every installed library (by its files).
pub fn present() -> Vec<Engine> {
    std::iter::once(Engine::Builtin)
        .chain(
            Vendor::ALL
                .into_iter()
                .filter(|v| v.installed())
                .map(Engine::Library),
        )
        .collect()
}

/// What a choice stands for on this machine: one solver, or (`all`) one per engine present.
/// Looks at files only (planning starts nothing); [`open`] loads a library when a case runs.
pub fn choose(choice: BlasChoice) -> Result<Vec<Solver>> {
    let vendor = match choice {
        BlasChoice::Builtin => return Ok(vec![Solver::Fixed(Engine::Builtin)]),
        BlasChoice::Auto => return Ok(vec![Solver::Auto]),
        BlasChoice::All => return Ok(present().into_iter().map(Solver::Fixed).collect()),
        BlasChoice::Openblas => Vendor::OpenBlas,
        BlasChoice::Blis => Vendor::Blis,
        BlasChoice::Mkl => Vendor::Mkl,
    };
    if !vendor.installed() {
        return Err(crate::error::usage(format!(
            "--blas {}: {} is not installed (none of {}); install it ({}) or choose --blas auto or builtin",
            choice.name(),
            vendor.name(),
            vendor.candidates().join(", "),
            vendor.install()
        )));
    }
    Ok(vec![Solver::Fixed(Engine::Library(vendor))])
}

/// The first file of `candidates` that opens.
fn open_first(candidates: &[&str]) -> Result<(Library, String)> {
    let mut errors = Vec::new();
    for &path in candidates {
        if path.starts_with('/') && !Path::new(path).exists() {
            continue;
        }
        // SAFETY: opening a shared library runs its initialisers; these are the system's
        // BLAS libraries, whose initialisers only set up their own state and threads.
        match unsafe { Library::new(path) } {
            Ok(lib) => return Ok((lib, path.to_string())),
            Err(e) => errors.push(e.to_string()),
        }
    }
    bail!(
        "not installed ({})",
        if errors.is_empty() {
            format!("none of {} exists", candidates.join(", "))
        } else {
            errors.join("; ")
        }
    )
}

/// A symbol of one of `libs`, the first that has it.
fn symbol<T: Copy>(libs: &[Library], name: &str) -> Option<T> {
    libs.iter().find_map(|lib| {
        // SAFETY: each name is looked up with the C type the library documents for it.
        unsafe { lib.get::<T>(name.as_bytes()).ok().map(|s| *s) }
    })
}

/// The text a library function returns, if it has that function.
fn text_of(libs: &[Library], name: &str) -> Option<String> {
    let get: GetText = symbol(libs, name)?;
    // SAFETY: these functions return a pointer to a static NUL-terminated string (or NULL).
    let ptr = unsafe { get() };
    if ptr.is_null() {
        return None;
    }
    // SAFETY: checked non-null; the string is static and NUL-terminated.
    let text = unsafe { CStr::from_ptr(ptr) };
    Some(text.to_string_lossy().trim().to_string())
}

fn load(vendor: Vendor) -> Result<Blas> {
    let (lib, path) = open_first(vendor.candidates())?;
    let mut libs = vec![lib];
    let mut lapack_path = None;
    if symbol::<Dgetrf>(&libs, "dgetrf_").is_none() {
        // BLIS has no LAPACK: the system's liblapack.so.3 calls the BLIS opened above.
        let (lapack, at) = open_first(&["liblapack.so.3"]).context("no LAPACK beside it")?;
        libs.push(lapack);
        lapack_path = Some(at);
    }
    let dgemm = symbol(&libs, "dgemm_").context("no dgemm_ in it")?;
    let dgetrf = symbol(&libs, "dgetrf_").context("no dgetrf_ in it")?;
    let dgetrs = symbol(&libs, "dgetrs_").context("no dgetrs_ in it")?;
    let (version, kernel, threads) = match vendor {
        Vendor::OpenBlas => {
            let config = text_of(&libs, "openblas_get_config").unwrap_or_default();
            // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Cooperlake MAX_THREADS=64"
            let version = config
                .split_whitespace()
                .take(2)
                .collect::<Vec<_>>()
                .join(" ");
            (
                if version.is_empty() {
                    "OpenBLAS".into()
                } else {
                    version
                },
                text_of(&libs, "openblas_get_corename"),
                symbol(&libs, "openblas_set_num_threads").map(Threads::ByValue),
            )
        }
        Vendor::Blis => (
            text_of(&libs, "bli_info_get_version_str")
                .map_or("BLIS".into(), |v| format!("BLIS {v}")),
            text_of(&libs, "bli_arch_string_for_current"),
            symbol(&libs, "bli_thread_set_num_threads").map(Threads::ByValue),
        ),
        Vendor::Mkl => (
            "MKL".into(),
            None,
            symbol(&libs, "MKL_Set_Num_Threads")
                .map(Threads::ByValue)
                .or_else(|| symbol(&libs, "mkl_set_num_threads_").map(Threads::ByReference)),
        ),
    };
    Ok(Blas {
        vendor,
        path,
        lapack_path,
        version,
        kernel,
        dgemm,
        dgetrf,
        dgetrs,
        threads,
        _libraries: libs,
    })
}

/// A column-major matrix dimension as LAPACK takes it.
fn dim(n: usize) -> Result<c_int> {
    c_int::try_from(n).context("the order exceeds the 32-bit BLAS interface")
}

impl Blas {
    /// "OpenBLAS 0.3.21 (Cooperlake kernels)", for results.
    pub fn describe(&self) -> String {
        match &self.kernel {
            Some(kernel) => format!("{} ({kernel} kernels)", self.version),
            None => self.version.clone(),
        }
    }

    /// Runs `work` with the library set to `threads` threads; other users wait.
    pub fn with_threads<T>(&self, threads: usize, work: impl FnOnce() -> T) -> T {
        let _guard = IN_USE.lock().unwrap_or_else(|e| e.into_inner());
        let n = c_int::try_from(threads).unwrap_or(c_int::MAX);
        match self.threads {
            // SAFETY: the thread-count setters take a plain int (by value or by reference).
            Some(Threads::ByValue(set)) => unsafe { set(n) },
            // SAFETY: as above; the reference lives across the call.
            Some(Threads::ByReference(set)) => unsafe { set(&n) },
            None => {}
        }
        work()
    }

    /// Whether the library lets peakbench set its thread count.
    pub fn sets_threads(&self) -> bool {
        self.threads.is_some()
    }

    /// C = A·B for n × n column-major matrices (leading dimension n).
    pub fn dgemm(&self, n: usize, a: &[f64], b: &[f64], c: &mut [f64]) -> Result<()> {
        let len = n.checked_mul(n).context("n² overflows")?;
        if a.len() < len || b.len() < len || c.len() < len {
            bail!("dgemm: a matrix holds fewer than n² = {len} elements");
        }
        let nn = dim(n)?;
        let (one, zero) = (1.0f64, 0.0f64);
        let no = b"N".as_ptr().cast::<c_char>();
        // SAFETY: a, b and c hold n² elements each (checked above), column-major with leading
        // dimension n; c is exclusively borrowed; the character arguments are one byte long.
        unsafe {
            (self.dgemm)(
                no,
                no,
                &nn,
                &nn,
                &nn,
                &one,
                a.as_ptr(),
                &nn,
                b.as_ptr(),
                &nn,
                &zero,
                c.as_mut_ptr(),
                &nn,
                1,
                1,
            );
        }
        Ok(())
    }

    /// Solves A x = b in place: `a` (n × n, column-major) becomes its LU factors, `b` the
    /// solution. Err when A is singular.
    pub fn solve(&self, n: usize, a: &mut [f64], b: &mut [f64], ipiv: &mut [c_int]) -> Result<()> {
        let len = n.checked_mul(n).context("n² overflows")?;
        if a.len() < len || b.len() < n || ipiv.len() < n {
            bail!("dgesv: buffers smaller than the order {n}");
        }
        let nn = dim(n)?;
        let one: c_int = 1;
        let mut info: c_int = 0;
        // SAFETY: a holds n² elements with leading dimension n, ipiv n entries; both are
        // exclusively borrowed for the call.
        unsafe { (self.dgetrf)(&nn, &nn, a.as_mut_ptr(), &nn, ipiv.as_mut_ptr(), &mut info) };
        if info != 0 {
            bail!(
                "dgetrf returned info = {info} (U({info},{info}) is exactly zero or an argument is bad)"
            );
        }
        // SAFETY: a holds the factors and ipiv the pivots dgetrf wrote; b holds n elements
        // (one right-hand side, leading dimension n); the character argument is one byte long.
        unsafe {
            (self.dgetrs)(
                b"N".as_ptr().cast::<c_char>(),
                &nn,
                &one,
                a.as_ptr(),
                &nn,
                ipiv.as_ptr(),
                b.as_mut_ptr(),
                &nn,
                &mut info,
                1,
            )
        };
        if info != 0 {
            bail!("dgetrs returned info = {info}");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faer_needs_no_library_and_a_missing_one_is_not_opened() {
        assert_eq!(
            choose(BlasChoice::Builtin).unwrap(),
            [Solver::Fixed(Engine::Builtin)]
        );
        let all = choose(BlasChoice::All).unwrap();
        assert_eq!(all[0], Solver::Fixed(Engine::Builtin));
        assert_eq!(all.len(), present().len());
        // The loader's search cannot find a library of a made-up name.
        assert!(open_first(&["libpeakbench-no-such-blas.so.9"]).is_err());
        assert!(open_first(&["/nonexistent/libopenblas.so.0"]).is_err());
    }

    #[test]
    fn an_installed_openblas_multiplies_and_solves() {
        let blas = match open(Vendor::OpenBlas) {
            Ok(blas) => blas,
            // CI installs libopenblas0-pthread; elsewhere a machine without it skips.
            Err(why) if std::env::var_os("PEAKBENCH_STRICT_TESTS").is_none_or(|v| v != "1") => {
                eprintln!("skipped: {why}");
                return;
            }
            Err(why) => panic!("PEAKBENCH_STRICT_TESTS=1 and OpenBLAS does not open: {why}"),
        };
        assert!(blas.version.starts_with("OpenBLAS"), "{}", blas.version);
        // [[2,1],[1,3]] column-major; times identity is itself.
        let a = [2.0, 1.0, 1.0, 3.0];
        let id = [1.0, 0.0, 0.0, 1.0];
        let mut c = [0.0; 4];
        blas.with_threads(1, || blas.dgemm(2, &a, &id, &mut c))
            .unwrap();
        assert_eq!(c, a);
        let (mut lu, mut b, mut ipiv) = (a, [3.0, 5.0], [0; 2]);
        blas.with_threads(1, || blas.solve(2, &mut lu, &mut b, &mut ipiv))
            .unwrap();
        // 2x + y = 3, x + 3y = 5: x = 0.8, y = 1.4
        assert!(
            (b[0] - 0.8).abs() < 1e-12 && (b[1] - 1.4).abs() < 1e-12,
            "{b:?}"
        );
        let mut singular = [1.0, 2.0, 2.0, 4.0];
        assert!(
            blas.solve(2, &mut singular, &mut [1.0, 1.0], &mut ipiv)
                .is_err()
        );
    }
}
