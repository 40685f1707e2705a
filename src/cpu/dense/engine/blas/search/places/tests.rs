//! Each installer's layout faked in a temporary directory, with a shell script standing in for
//! the Python it asks.

use std::os::unix::fs::PermissionsExt as _;
use std::time::{Duration, Instant};

use super::*;

const MKL: &str = "libmkl_rt.so.2";

/// An empty file at `root/rel` (the search looks for file names only), its directories made.
fn touch(root: &Path, rel: &str) -> PathBuf {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "").unwrap();
    path
}

/// An executable shell script at `root/rel` with `body`.
fn script(root: &Path, rel: &str, body: &str) -> PathBuf {
    let path = touch(root, rel);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// An environment with only `HOME` (= `root`), an empty `PATH` and the working directory
/// `root`, so nothing of the machine's is found.
fn bare(root: &Path) -> Env {
    Env {
        home: Some(root.to_path_buf()),
        path: Some(OsString::new()),
        cwd: Some(root.to_path_buf()),
        vars: BTreeMap::new(),
        ask_timeout: Duration::from_secs(10),
    }
}

/// The first place holding MKL: its directory, and how it was found.
fn where_mkl(env: &Env) -> Option<(PathBuf, String)> {
    places(env)
        .into_iter()
        .find(|p| p.dir.join(MKL).exists())
        .map(|p| (p.dir, p.how))
}

/// Under pyenv, `python3` on PATH is a shim whose path says nothing of the prefix: asking it
/// finds the version's lib.
#[test]
fn a_pyenv_shim_is_asked_for_its_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let prefix = root.join(".pyenv/versions/3.11.7");
    touch(&prefix, &format!("lib/{MKL}"));
    let shim = script(
        root,
        ".pyenv/shims/python3",
        &format!("echo {0}; echo {0}", prefix.display()),
    );
    let mut env = bare(root);
    env.path = Some(root.join(".pyenv/shims").into());
    let found = places(&env);
    assert_eq!(
        found[0],
        Place {
            dir: prefix.join("lib"),
            how: format!("found by asking {} for sys.prefix", shim.display()),
        }
    );
    // The prefix above the shim is kept, below what the shim said.
    assert!(found.iter().any(|p| p.dir == root.join(".pyenv/lib")));
    assert_eq!(where_mkl(&env).unwrap().0, prefix.join("lib"));
}

/// A venv's Python answers with the venv and its base: both libs are looked in.
#[test]
fn a_python_in_a_venv_gives_its_base_prefix_too() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let (venv, base) = (root.join("venv"), root.join("base"));
    touch(&base, &format!("lib/{MKL}"));
    script(
        root,
        "venv/bin/python",
        &format!("echo {}; echo {}", venv.display(), base.display()),
    );
    let mut env = bare(root);
    env.path = Some(venv.join("bin").into());
    let (at, how) = where_mkl(&env).unwrap();
    assert_eq!(at, base.join("lib"));
    assert!(
        how.ends_with("/venv/bin/python for sys.base_prefix"),
        "{how}"
    );
}

/// A Python that hangs (its `PATH` is the fake one: `sleep` by its full path) is killed at the
/// deadline, with what it started, and the search still ends with every other place.
#[test]
fn a_python_that_hangs_is_killed_and_the_search_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    script(root, "bin/python3", "/bin/sleep 30 & wait; echo /never");
    touch(root, &format!(".local/lib/{MKL}"));
    let mut env = bare(root);
    env.path = Some(root.join("bin").into());
    env.ask_timeout = Duration::from_millis(300);
    let start = Instant::now();
    let found = places(&env);
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert!(!found.iter().any(|p| p.how.contains("asking")), "{found:?}");
    assert!(!found.iter().any(|p| p.dir.starts_with("/never")));
    assert_eq!(where_mkl(&env).unwrap().0, root.join(".local/lib"));
}

/// A Python that fails, or prints no path, gives no place.
#[test]
fn a_python_that_fails_or_prints_nonsense_gives_nothing() {
    assert!(parse_prefixes("").is_empty());
    assert!(parse_prefixes("Python 2.7\nrelative\n").is_empty());
    assert_eq!(
        parse_prefixes("/a\n/b\n/c\n"),
        [
            ("prefix", PathBuf::from("/a")),
            ("base_prefix", PathBuf::from("/b"))
        ]
    );
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    script(root, "bin/python3", "echo /nowhere; exit 1");
    let mut env = bare(root);
    env.path = Some(root.join("bin").into());
    assert!(!places(&env).iter().any(|p| p.how.contains("asking")));
}

/// pyenv's version is found without running anything: `$PYENV_VERSION` first, then the
/// nearest `.python-version`, then `$PYENV_ROOT/version`; then every version, sorted.
#[test]
fn pyenv_s_version_is_resolved_as_pyenv_does() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let pyenv = root.join("pyenv");
    for version in ["3.12.1", "3.10.13", "3.11.7"] {
        touch(&pyenv, &format!("versions/{version}/lib/{MKL}"));
    }
    std::fs::write(pyenv.join("version"), "3.12.1\n").unwrap();
    let mut env = bare(root);
    env.vars.insert("PYENV_ROOT", pyenv.clone().into());
    let lib = |v: &str| pyenv.join(format!("versions/{v}/lib"));

    let (at, how) = where_mkl(&env).unwrap();
    assert_eq!(at, lib("3.12.1"));
    assert_eq!(
        how,
        format!(
            "pyenv's version 3.12.1, set by {}",
            pyenv.join("version").display()
        )
    );

    std::fs::write(root.join(".python-version"), "# pinned\n3.10.13\n").unwrap();
    env.cwd = Some(root.join("project/src"));
    let (at, how) = where_mkl(&env).unwrap();
    assert_eq!(at, lib("3.10.13"));
    assert!(how.ends_with("/.python-version"), "{how}");

    env.vars.insert("PYENV_VERSION", "system:3.11.7".into());
    let (at, how) = where_mkl(&env).unwrap();
    assert_eq!(at, lib("3.11.7"));
    assert_eq!(how, "pyenv's version 3.11.7, set by $PYENV_VERSION");

    // Nothing names a version: every one, in sorted order.
    env.vars.insert("PYENV_VERSION", "3.9.99".into());
    let all: Vec<PathBuf> = places(&env)
        .into_iter()
        .filter(|p| p.how.starts_with("one of pyenv's versions"))
        .map(|p| p.dir)
        .collect();
    assert_eq!(all, [lib("3.10.13"), lib("3.11.7"), lib("3.12.1")]);
}

/// pyenv's root defaults to `~/.pyenv`; a version name never leaves `versions/`.
#[test]
fn pyenv_s_root_defaults_to_the_home_and_names_stay_inside_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    touch(root, &format!(".pyenv/versions/3.11.7/lib/{MKL}"));
    let env = bare(root);
    let (at, how) = where_mkl(&env).unwrap();
    assert_eq!(at, root.join(".pyenv/versions/3.11.7/lib"));
    assert!(how.starts_with("one of pyenv's versions"), "{how}");
    assert_eq!(version_name("../../etc"), None);
    assert_eq!(version_name("/usr"), None);
    assert_eq!(version_name("system"), None);
    assert_eq!(
        version_name("3.11.7/envs/work"),
        Some("3.11.7/envs/work".into())
    );
}

/// conda's active environment comes first.
#[test]
fn conda_s_prefix_is_looked_in_first() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    touch(root, &format!("conda/envs/work/lib/{MKL}"));
    touch(root, &format!(".local/lib/{MKL}"));
    let mut env = bare(root);
    env.vars
        .insert("CONDA_PREFIX", root.join("conda/envs/work").into());
    let (at, how) = where_mkl(&env).unwrap();
    assert_eq!(at, root.join("conda/envs/work/lib"));
    assert_eq!(how, "$CONDA_PREFIX (an active conda environment)");
}

/// An active venv's lib, and its base's, which `home` in its `pyvenv.cfg` names.
#[test]
fn a_venv_s_base_is_read_from_its_pyvenv_cfg() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let base = root.join("base");
    touch(&base, &format!("lib/{MKL}"));
    let venv = root.join("venv");
    touch(&venv, "lib/python3.11/site-packages/x.py");
    std::fs::write(
        venv.join("pyvenv.cfg"),
        format!(
            "home = {}\ninclude-system-site-packages = false\n",
            base.join("bin").display()
        ),
    )
    .unwrap();
    let mut env = bare(root);
    env.vars.insert("VIRTUAL_ENV", venv.clone().into());
    let found = places(&env);
    assert_eq!(found[0].dir, venv.join("lib"));
    assert_eq!(found[0].how, "$VIRTUAL_ENV (an active virtual environment)");
    let (at, how) = where_mkl(&env).unwrap();
    assert_eq!(at, base.join("lib"));
    assert_eq!(
        how,
        format!(
            "the base of the venv {} (home in its pyvenv.cfg)",
            venv.display()
        )
    );
}

/// `pip install --user` puts it in `~/.local/lib`; `LD_LIBRARY_PATH`'s absolute directories
/// come last.
#[test]
fn the_user_s_local_lib_and_ld_library_path_are_looked_in() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    touch(root, &format!(".local/lib/{MKL}"));
    let mut env = bare(root);
    env.vars
        .insert("LD_LIBRARY_PATH", "relative:/opt/lib:".into());
    let found = places(&env);
    let (at, how) = where_mkl(&env).unwrap();
    assert_eq!(at, root.join(".local/lib"));
    assert_eq!(how, "~/.local (pip install --user)");
    let last = found.last().unwrap();
    assert_eq!(
        (last.dir.as_path(), last.how.as_str()),
        (Path::new("/opt/lib"), "$LD_LIBRARY_PATH")
    );
    assert!(!found.iter().any(|p| p.dir.is_relative()));
}

/// Each directory is looked in once, under the first way it was found.
#[test]
fn each_directory_is_listed_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut env = bare(root);
    env.vars.insert("CONDA_PREFIX", root.join(".local").into());
    let found = places(&env);
    let local: Vec<&Place> = found
        .iter()
        .filter(|p| p.dir == root.join(".local/lib"))
        .collect();
    assert_eq!(local.len(), 1);
    assert!(local[0].how.starts_with("$CONDA_PREFIX"));
}
