//! Where a BLAS library is looked for: the distributions' paths, then its file names in the
//! places users install it (conda, a Python prefix, `~/.local`, `LD_LIBRARY_PATH`), then the
//! dynamic linker's cache.

use std::path::Path;

use super::Vendor;

impl Vendor {
    /// Where Debian and Ubuntu (multi-arch paths), Fedora and Intel's installer put it.
    pub(super) fn system_paths(self) -> &'static [&'static str] {
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

    /// The file names the library goes by, newest first.
    fn file_names(self) -> &'static [&'static str] {
        match self {
            Vendor::OpenBlas => &["libopenblas.so.0", "libopenblasp.so.0", "libopenblas.so"],
            Vendor::Blis => &["libblis.so.4", "libblis.so"],
            Vendor::Mkl => &["libmkl_rt.so.3", "libmkl_rt.so.2", "libmkl_rt.so"],
        }
    }

    /// Every path it may be at, in the order they are tried: the system's paths, then its file
    /// names in the places users install it ([`search_dirs`]: `pip install mkl`, conda,
    /// `LD_LIBRARY_PATH`), then the dynamic linker's cache.
    pub(super) fn candidates(self) -> Vec<String> {
        let mut paths: Vec<String> = self.system_paths().iter().map(|p| p.to_string()).collect();
        for dir in search_dirs() {
            for name in self.file_names() {
                paths.push(format!("{}/{name}", dir.trim_end_matches('/')));
            }
        }
        for name in self.file_names() {
            paths.extend(linker_cache(name));
        }
        let mut seen = std::collections::HashSet::new();
        paths.retain(|p| seen.insert(p.clone()));
        paths
    }

    /// Whether one of its files is there.
    pub fn installed(self) -> bool {
        self.installed_path().is_some()
    }

    /// The first of its files that is there.
    pub fn installed_path(self) -> Option<String> {
        self.candidates()
            .into_iter()
            .find(|p| Path::new(p).exists())
    }
}

/// The library directories where users install a BLAS outside the system's paths, in order:
/// `$CONDA_PREFIX/lib` (conda), the `lib` of every Python prefix whose `python3` is on `PATH`
/// (`pip install mkl` puts `libmkl_rt.so.*` there, in a virtual environment too), the user's
/// `~/.local/lib` (`pip install --user`), and each directory of `LD_LIBRARY_PATH`.
fn search_dirs() -> Vec<String> {
    let mut dirs = Vec::new();
    if let Some(conda) = std::env::var_os("CONDA_PREFIX") {
        dirs.push(format!("{}/lib", conda.to_string_lossy()));
    }
    if let Some(path) = std::env::var_os("PATH") {
        for bin in std::env::split_paths(&path) {
            // A venv's python3 is a link to the system's, but its prefix is the venv: the
            // directory above the bin it was found in, not where the link points.
            if bin.join("python3").exists()
                && let Some(prefix) = bin.parent()
            {
                dirs.push(format!("{}/lib", prefix.display()));
            }
        }
    }
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(format!("{}/.local/lib", home.to_string_lossy()));
    }
    if let Some(ld) = std::env::var_os("LD_LIBRARY_PATH") {
        dirs.extend(
            std::env::split_paths(&ld)
                .filter(|d| d.is_absolute())
                .map(|d| d.display().to_string()),
        );
    }
    dirs
}

/// The paths the dynamic linker's cache (`ldconfig -p`) lists for the file `name`, read once.
fn linker_cache(name: &str) -> Vec<String> {
    static CACHE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let listing = CACHE.get_or_init(|| {
        ["/sbin/ldconfig", "/usr/sbin/ldconfig"]
            .iter()
            .find_map(|tool| std::process::Command::new(tool).arg("-p").output().ok())
            .filter(|out| out.status.success())
            .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
            .unwrap_or_default()
    });
    parse_linker_cache(listing, name)
}

/// The x86-64 paths of `name` in `ldconfig -p`'s listing, whose lines read
/// "\tlibmkl_rt.so.2 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libmkl_rt.so.2".
fn parse_linker_cache(listing: &str, name: &str) -> Vec<String> {
    listing
        .lines()
        .filter_map(|line| {
            let (lib, path) = line.trim().split_once(" => ")?;
            let (soname, tags) = lib.split_once(' ')?;
            (soname == name && tags.contains("x86-64")).then(|| path.trim().to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_linker_cache_gives_x86_64_paths_of_the_name() {
        let listing = "1234 libs found in cache `/etc/ld.so.cache'\n\
            \tlibmkl_rt.so.2 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libmkl_rt.so.2\n\
            \tlibmkl_rt.so.2 (libc6) => /usr/lib/i386-linux-gnu/libmkl_rt.so.2\n\
            \tlibmkl_rt.so (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libmkl_rt.so\n";
        assert_eq!(
            parse_linker_cache(listing, "libmkl_rt.so.2"),
            ["/usr/lib/x86_64-linux-gnu/libmkl_rt.so.2"]
        );
        assert!(parse_linker_cache(listing, "libblis.so.4").is_empty());
    }

    /// MKL from `pip install mkl` is looked for in the Python prefix's lib/, and a library in a
    /// directory of `LD_LIBRARY_PATH` is found by its file name.
    #[test]
    fn a_blas_is_looked_for_where_users_install_it() {
        let mkl = Vendor::Mkl.candidates();
        if let Some(prefix) = std::env::var_os("PATH")
            .and_then(|p| std::env::split_paths(&p).find(|d| d.join("python3").exists()))
            .and_then(|bin| bin.parent().map(|p| p.display().to_string()))
        {
            let pip = format!("{prefix}/lib/libmkl_rt.so.3");
            assert!(mkl.contains(&pip), "{pip} not in {mkl:?}");
        }
        assert!(mkl.iter().any(|p| p.ends_with("/libmkl_rt.so.2")));
        let unique: std::collections::HashSet<&String> = mkl.iter().collect();
        assert_eq!(unique.len(), mkl.len(), "each place once");
    }
}
