//! The machine's own BLAS and LAPACK, loaded at run time.
//!
//! HPL's speed is its BLAS's speed: on a 2-vCPU KVM guest of an AMD EPYC Zen 4, OpenBLAS's Cooper
//! Lake DGEMM reads 0.9–1.3 × faer's matrix multiply (see `docs/cpu.md`), so a Linpack on faer
//! alone reads a third below HPL. peakbench therefore opens the BLAS the machine has (OpenBLAS,
//! BLIS or MKL) with `dlopen` when it runs; the binary neither links nor needs any of them, and
//! `--blas builtin` (alias `faer`; or a machine with none) uses peakbench's own DGEMM and LU. A
//! library is opened once per process and never closed: OpenBLAS starts its worker threads when it
//! is loaded.
//!
//! Only the Fortran interface is used (`dgemm_`, `sgemm_`, `dgetrf_`, `dgetrs_`, 32-bit
//! integers: the LP64 interface every one of these libraries has), plus each library's calls
//! that set its thread count and name its version and the kernels it chose for this CPU.
//!
//! `--blas PATH` opens the file named instead of a known library's: what it is comes from the
//! symbols it exports (`openblas_get_config`: OpenBLAS, `bli_info_get_version_str`: BLIS,
//! `MKL_Get_Version_String`: MKL, otherwise "BLAS at PATH", of which only the routines a case
//! calls are required). Planning checks that the file is an ELF shared object without opening
//! it; a routine it lacks is found when the case opens it, and both are usage errors naming
//! `--blas`.

use std::ffi::{CStr, OsStr, c_char, c_int};
use std::io::Read as _;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

use anyhow::{Context as _, Result, anyhow, bail};
use clap::ValueEnum as _;
use clap::builder::{PossibleValue, StringValueParser, TypedValueParser};
use libloading::Library;

use crate::cpu::dense::builtin::dgemm::Element;
use crate::error::usage;
use crate::names::{Named as _, named_enum};

mod search;

named_enum! {
    /// Which BLAS and LAPACK the dense-algebra cases run on.
    pub enum BlasChoice {
        /// the fastest engine present, by a short measured probe of each
        Auto = "auto",
        /// built into peakbench: its own DGEMM and SGEMM, and its own LU over the DGEMM
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

/// What `--blas` takes: one of the named choices, or the path of a BLAS shared library.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BlasFlag {
    Named(BlasChoice),
    /// A file given by its path (as typed: relative paths are the working directory's).
    File(String),
}

impl BlasFlag {
    /// A choice's name or alias (any case), else a path, which has a `/`.
    pub fn parse(text: &str) -> Result<BlasFlag, String> {
        if let Some(choice) = BlasChoice::from_name(text) {
            return Ok(BlasFlag::Named(choice));
        }
        if text.contains('/') {
            return Ok(BlasFlag::File(text.to_string()));
        }
        Err(format!(
            "'{text}' is not one of {}, nor a path: give a name or the path of a BLAS shared \
             library (with a '/', e.g. ./libblas.so)",
            BlasChoice::choices()
        ))
    }
}

impl std::fmt::Display for BlasFlag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BlasFlag::Named(choice) => f.write_str(choice.name()),
            BlasFlag::File(path) => f.write_str(path),
        }
    }
}

impl serde::Serialize for BlasFlag {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// clap's parser of `--blas`: [`BlasFlag::parse`], with the named choices as the values the
/// help and the completions list.
#[derive(Clone, Copy, Debug)]
pub struct BlasFlagParser;

impl TypedValueParser for BlasFlagParser {
    type Value = BlasFlag;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<BlasFlag, clap::Error> {
        StringValueParser::new()
            .try_map(|text| BlasFlag::parse(&text))
            .parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(
            BlasChoice::value_variants()
                .iter()
                .filter_map(|choice| choice.to_possible_value()),
        ))
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

    fn install(self) -> &'static str {
        match self {
            Vendor::OpenBlas => "apt-get install libopenblas0-pthread",
            Vendor::Blis => "apt-get install libblis4-pthread liblapack3",
            Vendor::Mkl => "pip install mkl, or apt-get install libmkl-rt (non-free)",
        }
    }
}

/// `dgemm_` (T = f64) or `sgemm_` (T = f32).
pub type GemmFn<T> = unsafe extern "C" fn(
    transa: *const c_char,
    transb: *const c_char,
    m: *const c_int,
    n: *const c_int,
    k: *const c_int,
    alpha: *const T,
    a: *const T,
    lda: *const c_int,
    b: *const T,
    ldb: *const c_int,
    beta: *const T,
    c: *mut T,
    ldc: *const c_int,
    transa_len: usize,
    transb_len: usize,
);
/// `dgetrf_` (T = f64) or `sgetrf_` (T = f32).
pub type Getrf<T> = unsafe extern "C" fn(
    m: *const c_int,
    n: *const c_int,
    a: *mut T,
    lda: *const c_int,
    ipiv: *mut c_int,
    info: *mut c_int,
);
/// `dgetrs_` (T = f64) or `sgetrs_` (T = f32).
pub type Getrs<T> = unsafe extern "C" fn(
    trans: *const c_char,
    n: *const c_int,
    nrhs: *const c_int,
    a: *const T,
    lda: *const c_int,
    ipiv: *const c_int,
    b: *mut T,
    ldb: *const c_int,
    info: *mut c_int,
    trans_len: usize,
);
type SetThreads = unsafe extern "C" fn(c_int);
type SetThreadsByRef = unsafe extern "C" fn(*const c_int);
type GetText = unsafe extern "C" fn() -> *const c_char;
type GetTextInto = unsafe extern "C" fn(*mut c_char, c_int);

/// An element a library multiplies and solves in: its routines' names and the routines, if
/// the library has them.
pub trait BlasElement: Element {
    /// `dgemm_` or `sgemm_`.
    const GEMM: &'static str;
    /// `dgetrf_` or `sgetrf_`.
    const GETRF: &'static str;
    /// `dgetrs_` or `sgetrs_`.
    const GETRS: &'static str;
    fn routine(blas: &Blas) -> Option<GemmFn<Self>>;
    fn lu(blas: &Blas) -> (Option<Getrf<Self>>, Option<Getrs<Self>>);
}

impl BlasElement for f64 {
    const GEMM: &'static str = "dgemm_";
    const GETRF: &'static str = "dgetrf_";
    const GETRS: &'static str = "dgetrs_";
    fn routine(blas: &Blas) -> Option<GemmFn<f64>> {
        blas.dgemm
    }
    fn lu(blas: &Blas) -> (Option<Getrf<f64>>, Option<Getrs<f64>>) {
        (blas.dgetrf, blas.dgetrs)
    }
}

impl BlasElement for f32 {
    const GEMM: &'static str = "sgemm_";
    const GETRF: &'static str = "sgetrf_";
    const GETRS: &'static str = "sgetrs_";
    fn routine(blas: &Blas) -> Option<GemmFn<f32>> {
        blas.sgemm
    }
    fn lu(blas: &Blas) -> (Option<Getrf<f32>>, Option<Getrs<f32>>) {
        (blas.sgetrf, blas.sgetrs)
    }
}

/// How a library's thread count is set.
#[derive(Clone, Copy)]
enum ThreadSetter {
    ByValue(SetThreads),
    ByReference(SetThreadsByRef),
}

/// An opened BLAS and LAPACK.
pub struct Blas {
    /// What the library is: the one asked for by name, or for `--blas PATH` the one its
    /// symbols say (`None`: a BLAS peakbench does not know).
    pub vendor: Option<Vendor>,
    /// The file the BLAS was opened from.
    pub path: String,
    /// How the search found that file (e.g. "found by asking ~/.pyenv/shims/python3 for
    /// sys.prefix"); `None` for a file `--blas PATH` gave.
    pub(crate) found_by: Option<String>,
    /// Whether `--blas PATH` named the file (a routine it lacks is then a usage error).
    pub given: bool,
    /// Where LAPACK's dgetrf/dgetrs came from, when not the BLAS file itself.
    pub lapack_path: Option<String>,
    /// The version as the library states it, e.g. "OpenBLAS 0.3.21".
    pub version: String,
    /// The kernel set it chose for this CPU, e.g. "Cooperlake", when it says.
    pub kernel: Option<String>,
    dgemm: Option<GemmFn<f64>>,
    sgemm: Option<GemmFn<f32>>,
    dgetrf: Option<Getrf<f64>>,
    dgetrs: Option<Getrs<f64>>,
    sgetrf: Option<Getrf<f32>>,
    sgetrs: Option<Getrs<f32>>,
    threads: Option<ThreadSetter>,
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

/// Libraries opened by `--blas PATH`, one per file, never closed.
static FILES: Mutex<Vec<&'static Blas>> = Mutex::new(Vec::new());

/// The library at `path` (as `--blas PATH` gave it), opened on first use. Errors are usage
/// errors naming `--blas`: the file is not a shared library, or it exports no GEMM routine.
pub fn open_file(path: &str) -> Result<&'static Blas> {
    let mut files = FILES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(blas) = files.iter().copied().find(|b| b.path == path) {
        return Ok(blas);
    }
    let blas: &'static Blas = Box::leak(Box::new(load_file(path)?));
    files.push(blas);
    Ok(blas)
}

/// An engine that multiplies and solves: built into peakbench, or a library's BLAS and LAPACK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DenseEngine {
    /// peakbench's own DGEMM and SGEMM ([`crate::cpu::dense::builtin::dgemm`]); for Linpack,
    /// its own LU ([`crate::cpu::dense::builtin::lu`]) over the DGEMM.
    Builtin,
    Library(Vendor),
    /// The library at a path `--blas` gave.
    File(&'static str),
}

impl DenseEngine {
    /// "builtin", "OpenBLAS", …, or the path of a file.
    pub fn name(self) -> &'static str {
        match self {
            DenseEngine::Builtin => "builtin",
            DenseEngine::Library(vendor) => vendor.name(),
            DenseEngine::File(path) => path,
        }
    }
}

/// What a case runs on: one engine, or the fastest present, picked by a probe when it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Solver {
    Auto,
    Fixed(DenseEngine),
}

/// The engines present: the built-in one and every installed library (by its files).
pub fn present() -> Vec<DenseEngine> {
    std::iter::once(DenseEngine::Builtin)
        .chain(
            Vendor::ALL
                .into_iter()
                .filter(|v| v.installed())
                .map(DenseEngine::Library),
        )
        .collect()
}

/// What a choice stands for on this machine: one solver, or (`all`) one per engine present.
/// Looks at files only (planning starts nothing); [`open`] loads a library when a case runs.
pub fn choose(flag: &BlasFlag) -> Result<Vec<Solver>> {
    let choice = match flag {
        BlasFlag::Named(choice) => *choice,
        BlasFlag::File(path) => {
            check_library_file(Path::new(path)).map_err(|why| {
                usage(format!(
                    "--blas {path}: {why}; give the path of a BLAS shared library (e.g. {}) or \
                     one of {}",
                    Vendor::OpenBlas.system_paths()[0],
                    BlasChoice::choices()
                ))
            })?;
            return Ok(vec![Solver::Fixed(DenseEngine::File(intern(path)))]);
        }
    };
    let vendor = match choice {
        BlasChoice::Builtin => return Ok(vec![Solver::Fixed(DenseEngine::Builtin)]),
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
            vendor
                .candidates()
                .into_iter()
                .map(|c| c.path)
                .collect::<Vec<_>>()
                .join(", "),
            vendor.install()
        )));
    }
    Ok(vec![Solver::Fixed(DenseEngine::Library(vendor))])
}

/// Why the file at `path` cannot be a shared library, read from its ELF header without
/// opening it (planning loads nothing): missing, not a file, unreadable, not ELF, or an ELF
/// file that is not a shared object (an executable, an object file).
fn check_library_file(path: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_string(),
        _ => format!("cannot be read ({e})"),
    })?;
    if !meta.is_file() {
        return Err("not a file".into());
    }
    let mut header = Vec::with_capacity(18);
    std::fs::File::open(path)
        .and_then(|f| f.take(18).read_to_end(&mut header))
        .map_err(|e| format!("cannot be read ({e})"))?;
    if !header.starts_with(b"\x7fELF") {
        return Err("not a shared library (no ELF header)".into());
    }
    if header.len() < 18 {
        return Err("not a shared library (too short)".into());
    }
    // e_type, in the byte order EI_DATA states (1: little-endian, 2: big-endian).
    let kind = match header[5] {
        2 => u16::from_be_bytes([header[16], header[17]]),
        _ => u16::from_le_bytes([header[16], header[17]]),
    };
    const ET_DYN: u16 = 3;
    if kind != ET_DYN {
        return Err(format!(
            "an ELF file but not a shared library (e_type {kind}, not ET_DYN)"
        ));
    }
    Ok(())
}

/// `path` as a string that lives as long as the process (an [`DenseEngine`] is `Copy`); each
/// distinct path is kept once.
fn intern(path: &str) -> &'static str {
    static PATHS: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut paths = PATHS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = paths.iter().copied().find(|p| *p == path) {
        return p;
    }
    let p: &'static str = Box::leak(path.to_string().into_boxed_str());
    paths.push(p);
    p
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
    let candidates = vendor.candidates();
    let paths: Vec<&str> = candidates.iter().map(|c| c.path.as_str()).collect();
    let (lib, path) = open_first(&paths)?;
    let found_by = candidates
        .iter()
        .find(|c| c.path == path)
        .map(|c| c.how.clone());
    let mut blas = from_library(lib, path, Some(vendor), false)?;
    blas.found_by = found_by;
    blas.dgemm.context("no dgemm_ in it")?;
    blas.dgetrf.context("no dgetrf_ in it")?;
    blas.dgetrs.context("no dgetrs_ in it")?;
    Ok(blas)
}

/// Opens the file `--blas PATH` named and tells what it is by its symbols.
fn load_file(path: &str) -> Result<Blas> {
    let fix = "give the path of a BLAS shared library, or choose --blas auto or builtin";
    check_library_file(Path::new(path))
        .map_err(|why| usage(format!("--blas {path}: {why}; {fix}")))?;
    // SAFETY: opening a shared library runs its initialisers; the user named this file as
    // their BLAS, and BLAS initialisers only set up their own state and threads.
    let lib = unsafe { Library::new(path) }
        .map_err(|e| usage(format!("--blas {path}: cannot be opened ({e}); {fix}")))?;
    let libs = [lib];
    let vendor = if symbol::<GetText>(&libs, "openblas_get_config").is_some() {
        Some(Vendor::OpenBlas)
    } else if symbol::<GetText>(&libs, "bli_info_get_version_str").is_some() {
        Some(Vendor::Blis)
    } else if symbol::<GetTextInto>(&libs, "MKL_Get_Version_String").is_some() {
        Some(Vendor::Mkl)
    } else {
        None
    };
    let [lib] = libs;
    let blas = from_library(lib, path.to_string(), vendor, true)?;
    if blas.dgemm.is_none() && blas.sgemm.is_none() {
        return Err(usage(format!(
            "--blas {path}: exports neither dgemm_ nor sgemm_, so it is not a BLAS; {fix}"
        )));
    }
    Ok(blas)
}

/// The routines, version, kernel set and thread call of an opened library; BLIS, which has no
/// LAPACK, gets the system's liblapack.so.3 beside it.
fn from_library(lib: Library, path: String, vendor: Option<Vendor>, given: bool) -> Result<Blas> {
    let mut libs = vec![lib];
    let mut lapack_path = None;
    if vendor == Some(Vendor::Blis) && symbol::<Getrf<f64>>(&libs, "dgetrf_").is_none() {
        // BLIS has no LAPACK: the system's liblapack.so.3 calls the BLIS opened above.
        let (lapack, at) = open_first(&["liblapack.so.3"]).context("no LAPACK beside it")?;
        libs.push(lapack);
        lapack_path = Some(at);
    }
    let (version, kernel, threads) = match vendor {
        Some(Vendor::OpenBlas) => {
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
                symbol(&libs, "openblas_set_num_threads").map(ThreadSetter::ByValue),
            )
        }
        Some(Vendor::Blis) => (
            text_of(&libs, "bli_info_get_version_str")
                .map_or("BLIS".into(), |v| format!("BLIS {v}")),
            text_of(&libs, "bli_arch_string_for_current"),
            symbol(&libs, "bli_thread_set_num_threads").map(ThreadSetter::ByValue),
        ),
        Some(Vendor::Mkl) => (
            mkl_version(&libs),
            None,
            symbol(&libs, "MKL_Set_Num_Threads")
                .map(ThreadSetter::ByValue)
                .or_else(|| symbol(&libs, "mkl_set_num_threads_").map(ThreadSetter::ByReference)),
        ),
        None => (format!("BLAS at {path}"), None, None),
    };
    let blas = Blas {
        vendor,
        given,
        lapack_path,
        version,
        kernel,
        dgemm: symbol(&libs, "dgemm_"),
        sgemm: symbol(&libs, "sgemm_"),
        dgetrf: symbol(&libs, "dgetrf_"),
        dgetrs: symbol(&libs, "dgetrs_"),
        sgetrf: symbol(&libs, "sgetrf_"),
        sgetrs: symbol(&libs, "sgetrs_"),
        threads,
        path,
        found_by: None,
        _libraries: libs,
    };
    if blas.sets_threads() {
        start_pool(&blas);
    }
    Ok(blas)
}

/// Starts a threaded library's workers from this thread, which is not pinned. An OpenMP
/// runtime (MKL's; BLIS or OpenBLAS built with OpenMP) starts its workers at the first parallel
/// call and counts the CPUs it may use then, from the calling thread's affinity: a first call
/// from a case pinned to CPU 0 (a 1-thread case) left every later call at one thread's rate
/// (MKL at 2 threads read 83 GFLOP/s after a 1-thread case, 169 alone, on a 2-vCPU Golden Cove
/// guest). One product on every CPU this process may use, large enough that MKL runs it in
/// parallel, starts them all; a library that started its threads when it was loaded (Debian's
/// OpenBLAS) only multiplies once more.
fn start_pool(blas: &Blas) {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let n = 512;
    let (a, b) = (vec![1.0_f64; n * n], vec![1.0_f64; n * n]);
    let mut c = vec![0.0_f64; n * n];
    // A library without dgemm_ fails later, naming the routine a case calls.
    let _ = blas.with_threads(cpus, || blas.gemm::<f64>(n, &a, &b, &mut c));
}

/// "MKL 2024.0.0" from `MKL_Get_Version_String` ("Intel(R) oneAPI Math Kernel Library Version
/// 2024.0.0 Product Build …"), or "MKL".
fn mkl_version(libs: &[Library]) -> String {
    let Some(get) = symbol::<GetTextInto>(libs, "MKL_Get_Version_String") else {
        return "MKL".into();
    };
    let mut buffer = [0 as c_char; 256];
    // SAFETY: MKL writes at most `len` bytes, NUL-terminated, into the buffer it is given.
    unsafe { get(buffer.as_mut_ptr(), buffer.len() as c_int - 1) };
    // SAFETY: the buffer's last byte is never written, so it is NUL-terminated.
    let text = unsafe { CStr::from_ptr(buffer.as_ptr()) }.to_string_lossy();
    text.split_once("Version ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .map_or("MKL".into(), |v| format!("MKL {v}"))
}

/// A column-major matrix dimension as LAPACK takes it.
fn dim(n: usize) -> Result<c_int> {
    c_int::try_from(n).context("the order exceeds the 32-bit BLAS interface")
}

impl Blas {
    /// "OpenBLAS", "BLIS", "MKL", or "BLAS at PATH" for a library `--blas PATH` gave that
    /// peakbench does not know.
    pub fn name(&self) -> String {
        match self.vendor {
            Some(vendor) => vendor.name().into(),
            None => format!("BLAS at {}", self.path),
        }
    }

    /// The error of a routine the library lacks: a usage error naming `--blas` for a file the
    /// user gave.
    fn missing(&self, routine: &str) -> anyhow::Error {
        if self.given {
            usage(format!(
                "--blas {}: {} has no {routine}, which this case calls; give a library that \
                 has it, or choose --blas auto or builtin",
                self.path,
                self.name()
            ))
        } else {
            anyhow!("{} ({}) has no {routine}", self.name(), self.path)
        }
    }

    /// Fails, naming the routine, when the library lacks the GEMM of T (planning cannot know:
    /// it does not open libraries).
    pub fn require<T: BlasElement>(&self) -> Result<()> {
        T::routine(self)
            .map(|_| ())
            .ok_or_else(|| self.missing(T::GEMM))
    }

    /// Fails, naming the routine, when the library lacks `dgetrf_` or `dgetrs_` (f64), or
    /// `sgetrf_` or `sgetrs_` (f32).
    pub fn require_lapack<T: BlasElement>(&self) -> Result<()> {
        let (getrf, getrs) = T::lu(self);
        getrf.ok_or_else(|| self.missing(T::GETRF))?;
        getrs.ok_or_else(|| self.missing(T::GETRS))?;
        Ok(())
    }

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
            Some(ThreadSetter::ByValue(set)) => unsafe { set(n) },
            // SAFETY: as above; the reference lives across the call.
            Some(ThreadSetter::ByReference(set)) => unsafe { set(&n) },
            None => {}
        }
        work()
    }

    /// Whether the library lets peakbench set its thread count.
    pub fn sets_threads(&self) -> bool {
        self.threads.is_some()
    }

    /// C = A·B for n × n column-major matrices (leading dimension n), by `dgemm_` (f64) or
    /// `sgemm_` (f32).
    pub fn gemm<T: BlasElement>(&self, n: usize, a: &[T], b: &[T], c: &mut [T]) -> Result<()> {
        let routine = T::routine(self).ok_or_else(|| self.missing(T::GEMM))?;
        let len = n.checked_mul(n).context("n² overflows")?;
        if a.len() < len || b.len() < len || c.len() < len {
            bail!("{}: a matrix holds fewer than n² = {len} elements", T::GEMM);
        }
        let nn = dim(n)?;
        let (one, zero) = (T::ONE, T::ZERO);
        let no = b"N".as_ptr().cast::<c_char>();
        // SAFETY: a, b and c hold n² elements each (checked above), column-major with leading
        // dimension n; c is exclusively borrowed; the character arguments are one byte long;
        // `routine` is the library's GEMM of T (dgemm_ for f64, sgemm_ for f32).
        unsafe {
            routine(
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

    /// Solves A x = b in place by `dgetrf_` + `dgetrs_` (f64) or `sgetrf_` + `sgetrs_`
    /// (f32): `a` (n × n, column-major) becomes its LU factors, `b` the solution. Err when A
    /// is singular.
    pub fn solve<T: BlasElement>(
        &self,
        n: usize,
        a: &mut [T],
        b: &mut [T],
        ipiv: &mut [c_int],
    ) -> Result<()> {
        let (getrf, getrs) = T::lu(self);
        let getrf = getrf.ok_or_else(|| self.missing(T::GETRF))?;
        let getrs = getrs.ok_or_else(|| self.missing(T::GETRS))?;
        let len = n.checked_mul(n).context("n² overflows")?;
        if a.len() < len || b.len() < n || ipiv.len() < n {
            bail!("{}: buffers smaller than the order {n}", T::GETRF);
        }
        let nn = dim(n)?;
        let one: c_int = 1;
        let mut info: c_int = 0;
        // SAFETY: a holds n² elements with leading dimension n, ipiv n entries; both are
        // exclusively borrowed for the call.
        unsafe { getrf(&nn, &nn, a.as_mut_ptr(), &nn, ipiv.as_mut_ptr(), &mut info) };
        if info != 0 {
            bail!(
                "{} returned info = {info} (U({info},{info}) is exactly zero or an argument is bad)",
                T::GETRF.trim_end_matches('_')
            );
        }
        // SAFETY: a holds the factors and ipiv the pivots dgetrf wrote; b holds n elements
        // (one right-hand side, leading dimension n); the character argument is one byte long.
        unsafe {
            getrs(
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
            bail!("{} returned info = {info}", T::GETRS.trim_end_matches('_'));
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
            choose(&BlasFlag::Named(BlasChoice::Builtin)).unwrap(),
            [Solver::Fixed(DenseEngine::Builtin)]
        );
        let all = choose(&BlasFlag::Named(BlasChoice::All)).unwrap();
        assert_eq!(all[0], Solver::Fixed(DenseEngine::Builtin));
        assert_eq!(all.len(), present().len());
        // The loader's search cannot find a library of a made-up name.
        assert!(open_first(&["libpeakbench-no-such-blas.so.9"]).is_err());
        assert!(open_first(&["/nonexistent/libopenblas.so.0"]).is_err());
    }

    #[test]
    fn the_flag_takes_a_name_in_any_case_or_a_path() {
        assert_eq!(
            BlasFlag::parse("OpenBLAS"),
            Ok(BlasFlag::Named(BlasChoice::Openblas))
        );
        assert_eq!(
            BlasFlag::parse("faer"),
            Ok(BlasFlag::Named(BlasChoice::Builtin))
        );
        assert_eq!(
            BlasFlag::parse("./libblas.so"),
            Ok(BlasFlag::File("./libblas.so".into()))
        );
        let e = BlasFlag::parse("atlas").unwrap_err();
        assert!(e.contains("nor a path") && e.contains("openblas"), "{e}");
        assert_eq!(
            serde_json::to_value(BlasFlag::File("/x/libblas.so".into())).unwrap(),
            "/x/libblas.so"
        );
        assert_eq!(
            serde_json::to_value(BlasFlag::Named(BlasChoice::Auto)).unwrap(),
            "auto"
        );
    }

    #[test]
    fn a_path_that_is_not_a_shared_library_is_refused_before_anything_opens() {
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("libnot.so");
        std::fs::write(&text, "INPUT(-lblas)\n").unwrap();
        let short = dir.path().join("libshort.so");
        std::fs::write(&short, b"\x7fELF").unwrap();
        let mut object = b"\x7fELF\x02\x01\x01".to_vec();
        object.resize(16, 0);
        object.extend([1, 0]); // ET_REL: an object file
        let relocatable = dir.path().join("libobject.so");
        std::fs::write(&relocatable, object).unwrap();
        for (path, why) in [
            (dir.path().join("missing.so"), "no such file"),
            (dir.path().to_path_buf(), "not a file"),
            (text, "no ELF header"),
            (short, "too short"),
            (relocatable, "not ET_DYN"),
        ] {
            let path = path.to_str().unwrap().to_string();
            let e = choose(&BlasFlag::File(path.clone())).unwrap_err();
            assert!(e.is::<crate::error::UsageError>(), "{e}");
            let line = e.to_string();
            assert!(
                line.starts_with(&format!("--blas {path}: ")) && line.contains(why),
                "{line}"
            );
            let e = open_file(&path).err().unwrap();
            assert!(e.is::<crate::error::UsageError>(), "{e}");
        }
    }

    #[test]
    fn a_library_by_path_is_told_by_its_symbols() {
        let Some(path) = Vendor::OpenBlas.installed_path() else {
            eprintln!("skipped: no OpenBLAS installed");
            return;
        };
        let path = intern(&path);
        assert_eq!(
            choose(&BlasFlag::File(path.into())).unwrap(),
            [Solver::Fixed(DenseEngine::File(path))]
        );
        let blas = open_file(path).unwrap();
        assert_eq!(blas.vendor, Some(Vendor::OpenBlas));
        assert!(blas.given && blas.path == path);
        assert!(blas.require::<f32>().is_ok() && blas.require_lapack::<f64>().is_ok());
        assert!(blas.require_lapack::<f32>().is_ok());
        // Opened once: the same library for the same path.
        assert!(std::ptr::eq(blas, open_file(path).unwrap()));
        // A shared library that is no BLAS: libm has no dgemm_.
        let libm = "/lib/x86_64-linux-gnu/libm.so.6";
        if Path::new(libm).exists() {
            let e = open_file(libm).err().unwrap();
            assert!(e.is::<crate::error::UsageError>(), "{e}");
            assert!(e.to_string().contains("neither dgemm_ nor sgemm_"), "{e}");
        }
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
        blas.with_threads(1, || blas.gemm(2, &a, &id, &mut c))
            .unwrap();
        assert_eq!(c, a);
        let (a32, id32) = (a.map(|x| x as f32), id.map(|x| x as f32));
        let mut c32 = [0.0f32; 4];
        blas.with_threads(1, || blas.gemm(2, &a32, &id32, &mut c32))
            .unwrap();
        assert_eq!(c32, a32);
        let (mut lu, mut b, mut ipiv) = (a, [3.0f64, 5.0], [0; 2]);
        blas.with_threads(1, || blas.solve(2, &mut lu, &mut b, &mut ipiv))
            .unwrap();
        // 2x + y = 3, x + 3y = 5: x = 0.8, y = 1.4
        assert!(
            (b[0] - 0.8).abs() < 1e-12 && (b[1] - 1.4).abs() < 1e-12,
            "{b:?}"
        );
        // The same in f32, by sgetrf + sgetrs.
        let (mut lu32, mut b32) = (a32, [3.0f32, 5.0]);
        blas.with_threads(1, || blas.solve(2, &mut lu32, &mut b32, &mut ipiv))
            .unwrap();
        assert!(
            (b32[0] - 0.8).abs() < 1e-6 && (b32[1] - 1.4).abs() < 1e-6,
            "{b32:?}"
        );
        let mut singular = [1.0f64, 2.0, 2.0, 4.0];
        assert!(
            blas.solve(2, &mut singular, &mut [1.0, 1.0], &mut ipiv)
                .is_err()
        );
        let err = blas
            .solve(2, &mut [1.0f32, 2.0, 2.0, 4.0], &mut [1.0, 1.0], &mut ipiv)
            .unwrap_err();
        assert!(err.to_string().contains("sgetrf returned info"), "{err}");
    }
}
