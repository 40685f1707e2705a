//! The library directories where users install a BLAS outside the system's paths, each with
//! how it was found.
//!
//! `pip install mkl` puts `libmkl_rt.so.*` in `<prefix>/lib` of the Python it ran under. The
//! prefix cannot be read off the path of the `python3` on `PATH` in general: under pyenv, the
//! most common way to install Python on a workstation, that `python3` is a shell script in
//! `~/.pyenv/shims` and the prefix is `~/.pyenv/versions/X.Y.Z`. So the Pythons on `PATH` are
//! asked for `sys.prefix` and `sys.base_prefix` (with a deadline: a broken shim may hang), and
//! pyenv's choice of version is also resolved the way pyenv does, without running anything.
//!
//! Everything read from the user's environment comes in an [`Env`], so tests fake one.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// How long a Python on `PATH` may take to print its prefix before it (and all it started) is
/// killed: a pyenv shim runs bash and pyenv first, which takes a tenth of a second.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);

/// The environment variables the search reads.
const VARS: [&str; 5] = [
    "CONDA_PREFIX",
    "VIRTUAL_ENV",
    "PYENV_ROOT",
    "PYENV_VERSION",
    "LD_LIBRARY_PATH",
];

/// What the search reads of the user's environment.
#[derive(Clone, Debug, Default)]
pub(crate) struct Env {
    /// `$HOME`.
    pub(crate) home: Option<PathBuf>,
    /// `$PATH`.
    pub(crate) path: Option<OsString>,
    /// The working directory (pyenv reads `.python-version` from it and its parents).
    pub(crate) cwd: Option<PathBuf>,
    /// The variables of [`VARS`] that are set.
    pub(crate) vars: BTreeMap<&'static str, OsString>,
    /// How long each Python asked may take.
    pub(crate) ask_timeout: Duration,
}

impl Env {
    /// This process's environment.
    pub(crate) fn current() -> Env {
        Env {
            home: std::env::var_os("HOME").map(PathBuf::from),
            path: std::env::var_os("PATH"),
            cwd: std::env::current_dir().ok(),
            vars: VARS
                .iter()
                .filter_map(|&name| Some((name, std::env::var_os(name)?)))
                .collect(),
            ask_timeout: ASK_TIMEOUT,
        }
    }

    /// A variable's value; set but empty counts as unset, as in the shells.
    fn var(&self, name: &str) -> Option<&OsStr> {
        self.vars
            .get(name)
            .map(OsString::as_os_str)
            .filter(|v| !v.is_empty())
    }

    /// Gives `cmd` this environment's `PATH`, `HOME`, working directory and variables (the
    /// rest it inherits), so a Python asked sees what the search sees.
    fn apply(&self, cmd: &mut Command) {
        let set = [
            ("PATH", self.path.as_deref()),
            ("HOME", self.home.as_deref().map(Path::as_os_str)),
        ]
        .into_iter()
        .chain(VARS.iter().map(|&name| (name, self.var(name))));
        for (name, value) in set {
            match value {
                Some(value) => cmd.env(name, value),
                None => cmd.env_remove(name),
            };
        }
        if let Some(cwd) = &self.cwd {
            cmd.current_dir(cwd);
        }
    }
}

/// A directory to look in, and how it was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Place {
    pub(crate) dir: PathBuf,
    /// E.g. "found by asking /root/.pyenv/shims/python3 for sys.prefix".
    pub(crate) how: String,
}

/// Places in order, each directory once (the first way it was found is kept).
#[derive(Default)]
struct Places(Vec<Place>);

impl Places {
    fn push(&mut self, dir: PathBuf, how: String) {
        if !self.0.iter().any(|p| p.dir == dir) {
            self.0.push(Place { dir, how });
        }
    }

    /// `<prefix>/lib`, and when the prefix is a virtual environment, its base's lib too.
    fn push_prefix(&mut self, prefix: &Path, how: &str) {
        self.push(prefix.join("lib"), how.to_string());
        if let Some(base) = venv_base(prefix) {
            self.push(
                base.join("lib"),
                format!(
                    "the base of the venv {} (home in its pyvenv.cfg)",
                    prefix.display()
                ),
            );
        }
    }
}

/// The directories to look in, in order: `$CONDA_PREFIX/lib` (conda), `$VIRTUAL_ENV/lib` and
/// its base's (a venv), the `sys.prefix` and `sys.base_prefix` of the `python3` and `python`
/// on `PATH` (asked), the prefix above each `python3` on `PATH`, pyenv's version
/// (`$PYENV_VERSION`, `.python-version`, `$PYENV_ROOT/version`) and then every pyenv version,
/// `~/.local/lib` (`pip install --user`), and each directory of `LD_LIBRARY_PATH`.
pub(crate) fn places(env: &Env) -> Vec<Place> {
    let mut found = Places::default();
    if let Some(conda) = env.var("CONDA_PREFIX") {
        found.push_prefix(
            Path::new(conda),
            "$CONDA_PREFIX (an active conda environment)",
        );
    }
    if let Some(venv) = env.var("VIRTUAL_ENV") {
        found.push_prefix(
            Path::new(venv),
            "$VIRTUAL_ENV (an active virtual environment)",
        );
    }
    for (python, answer) in ask_pythons(env) {
        for (attribute, prefix) in answer {
            let how = format!("found by asking {} for sys.{attribute}", python.display());
            found.push_prefix(&prefix, &how);
        }
    }
    for bin in path_dirs(env) {
        // A venv's python3 is a link to the system's, but its prefix is the venv: the
        // directory above the bin it was found in, not where the link points.
        if bin.join("python3").exists()
            && let Some(prefix) = bin.parent()
        {
            let how = format!("the prefix of {} on PATH", bin.join("python3").display());
            found.push_prefix(prefix, &how);
        }
    }
    pyenv(env, &mut found);
    if let Some(home) = &env.home {
        found.push(
            home.join(".local/lib"),
            "~/.local (pip install --user)".into(),
        );
    }
    if let Some(ld) = env.var("LD_LIBRARY_PATH") {
        for dir in std::env::split_paths(ld).filter(|d| d.is_absolute()) {
            found.push(dir, "$LD_LIBRARY_PATH".into());
        }
    }
    found.0
}

/// The directories of `PATH`, in order.
fn path_dirs(env: &Env) -> Vec<PathBuf> {
    env.path
        .as_deref()
        .map(|p| std::env::split_paths(p).collect())
        .unwrap_or_default()
}

/// The `python3` and the `python` a shell would run (the first on `PATH` of each), each asked
/// at once for its prefixes; a Python that fails or does not answer in time says none.
fn ask_pythons(env: &Env) -> Vec<(PathBuf, Vec<(&'static str, PathBuf)>)> {
    let mut pythons: Vec<PathBuf> = Vec::new();
    for name in ["python3", "python"] {
        if let Some(python) = path_dirs(env)
            .into_iter()
            .map(|bin| bin.join(name))
            .find(|p| p.is_file())
            && !pythons.contains(&python)
        {
            pythons.push(python);
        }
    }
    std::thread::scope(|scope| {
        let asking: Vec<_> = pythons
            .iter()
            .map(|python| scope.spawn(|| ask(env, python)))
            .collect();
        pythons
            .iter()
            .cloned()
            .zip(asking.into_iter().map(|a| a.join().unwrap_or_default()))
            .collect()
    })
}

/// What Python prints: its prefix, then its base prefix (a venv's base holds the libraries
/// installed in the base; Python 2 has no `base_prefix`).
const PREFIX_SCRIPT: &str =
    "import sys; print(sys.prefix); print(getattr(sys, 'base_prefix', sys.prefix))";

/// `sys.prefix` and `sys.base_prefix` of `python`, run in `env` for at most its deadline.
fn ask(env: &Env, python: &Path) -> Vec<(&'static str, PathBuf)> {
    let mut cmd = Command::new(python);
    cmd.args(["-c", PREFIX_SCRIPT]);
    env.apply(&mut cmd);
    let name = python.display().to_string();
    match crate::reference::run_for_at_most(&mut cmd, &name, env.ask_timeout) {
        Ok(out) if out.status.success() => parse_prefixes(&out.stdout),
        _ => Vec::new(),
    }
}

/// The absolute paths among the first two lines of [`PREFIX_SCRIPT`]'s output.
fn parse_prefixes(stdout: &str) -> Vec<(&'static str, PathBuf)> {
    ["prefix", "base_prefix"]
        .into_iter()
        .zip(stdout.lines().map(str::trim))
        .filter(|(_, line)| line.starts_with('/'))
        .map(|(attribute, line)| (attribute, PathBuf::from(line)))
        .collect()
}

/// The base prefix of the virtual environment at `prefix`: the directory above the `home` (the
/// base Python's bin) its `pyvenv.cfg` names; `None` when it is not a venv.
fn venv_base(prefix: &Path) -> Option<PathBuf> {
    let cfg = std::fs::read_to_string(prefix.join("pyvenv.cfg")).ok()?;
    let home = cfg.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        (key.trim() == "home").then(|| PathBuf::from(value.trim()))
    })?;
    if !home.is_absolute() {
        return None;
    }
    match home.file_name() {
        Some(name) if name == "bin" => home.parent().map(Path::to_path_buf),
        _ => Some(home),
    }
}

/// pyenv's versions: the one pyenv would run (by its own rules), then every one installed,
/// sorted by name so the choice is the same on every run.
fn pyenv(env: &Env, found: &mut Places) {
    let Some(root) = env
        .var("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| env.home.as_ref().map(|h| h.join(".pyenv")))
    else {
        return;
    };
    let versions = root.join("versions");
    if let Some((names, source)) = pyenv_version(env, &root) {
        for name in names {
            let prefix = versions.join(&name);
            if prefix.is_dir() {
                found.push_prefix(&prefix, &format!("pyenv's version {name}, set by {source}"));
            }
        }
    }
    let mut all: Vec<PathBuf> = std::fs::read_dir(&versions)
        .map(|entries| {
            entries
                .filter_map(|e| Some(e.ok()?.path()))
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    all.sort();
    let how = format!("one of pyenv's versions ({}/*)", versions.display());
    for prefix in all {
        found.push_prefix(&prefix, &how);
    }
}

/// The version names pyenv would use, and where they were set: `$PYENV_VERSION`
/// (colon-separated), else the `.python-version` of the working directory or the nearest
/// parent, else `$PYENV_ROOT/version`.
fn pyenv_version(env: &Env, root: &Path) -> Option<(Vec<String>, String)> {
    if let Some(version) = env.var("PYENV_VERSION") {
        let names = version.to_string_lossy();
        let names = names.split(':').filter_map(version_name).collect();
        return Some((names, "$PYENV_VERSION".into()));
    }
    let local = env
        .cwd
        .iter()
        .flat_map(|cwd| cwd.ancestors())
        .map(|dir| dir.join(".python-version"));
    for file in local.chain(std::iter::once(root.join("version"))) {
        if let Ok(text) = std::fs::read_to_string(&file) {
            let names = text
                .lines()
                .filter_map(|line| line.split_whitespace().next())
                .filter_map(version_name)
                .collect();
            return Some((names, file.display().to_string()));
        }
    }
    None
}

/// A version name as pyenv reads it from a file or `$PYENV_VERSION`; `None` for a comment,
/// `system` (the Python outside pyenv, asked already if it is on `PATH`), or a name that would
/// leave `versions/`.
fn version_name(word: &str) -> Option<String> {
    let word = word.trim();
    let usable = !word.is_empty()
        && !word.starts_with('#')
        && word != "system"
        && !word.starts_with('/')
        && !word.split('/').any(|part| part == "..");
    usable.then(|| word.to_string())
}

#[cfg(test)]
mod tests;
