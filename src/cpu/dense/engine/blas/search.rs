//! Where a BLAS library is looked for: the distributions' paths, then its file names in the
//! places users install it ([`places`]: conda, a venv, the prefix of every Python on `PATH`
//! (asked, so pyenv's shims lead to the real one), pyenv's versions, `~/.local`,
//! `LD_LIBRARY_PATH`), then the dynamic linker's cache. Each path keeps how it was found.

use std::path::Path;

use super::Vendor;

mod places;

use places::{Env, Place, places};

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

    /// Every path it may be at, in the order they are tried, with how it was found: the
    /// system's paths, then its file names in the places users install it ([`places()`]:
    /// `pip install mkl` under any Python, conda, `LD_LIBRARY_PATH`), then the dynamic linker's
    /// cache.
    pub(super) fn candidates(self) -> Vec<Candidate> {
        self.candidates_in(user_places(), linker_cache)
    }

    /// [`Vendor::candidates`] with the places and the linker's cache given.
    fn candidates_in(
        self,
        places: &[Place],
        cache: impl Fn(&str) -> Vec<String>,
    ) -> Vec<Candidate> {
        let system = self.system_paths().iter().map(|p| Candidate {
            path: p.to_string(),
            how: "a system path (Debian, Fedora or Intel's installer)".into(),
        });
        let user = places.iter().flat_map(|place| {
            self.file_names().iter().map(|name| Candidate {
                path: place.dir.join(name).display().to_string(),
                how: place.how.clone(),
            })
        });
        let cached = self.file_names().iter().flat_map(|name| {
            cache(name).into_iter().map(|path| Candidate {
                path,
                how: "the dynamic linker's cache (ldconfig -p)".into(),
            })
        });
        let mut seen = std::collections::HashSet::new();
        system
            .chain(user)
            .chain(cached)
            .filter(|c| seen.insert(c.path.clone()))
            .collect()
    }

    /// Whether one of its files is there.
    pub fn installed(self) -> bool {
        self.installed_path().is_some()
    }

    /// The first of its files that is there.
    pub fn installed_path(self) -> Option<String> {
        self.found().map(|c| c.path)
    }

    /// The first of its files that is there, with how it was found.
    pub(crate) fn found(self) -> Option<Candidate> {
        self.candidates()
            .into_iter()
            .find(|c| Path::new(&c.path).exists())
    }
}

/// A path a library may be at, and how the search came to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub(crate) path: String,
    /// E.g. "found by asking /root/.pyenv/shims/python3 for sys.prefix".
    pub(crate) how: String,
}

/// The [`places()`] of this process's environment, found once (finding them runs Python).
fn user_places() -> &'static [Place] {
    static PLACES: std::sync::OnceLock<Vec<Place>> = std::sync::OnceLock::new();
    PLACES.get_or_init(|| places(&Env::current()))
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

    /// A library's file names in each place, after the system's paths and before the linker's
    /// cache, each path once with the first way it was found.
    #[test]
    fn each_place_is_searched_for_the_library_s_file_names() {
        let places = [
            Place {
                dir: "/p/versions/3.11.7/lib".into(),
                how: "found by asking /p/shims/python3 for sys.prefix".into(),
            },
            Place {
                dir: "/opt/lib".into(),
                how: "$LD_LIBRARY_PATH".into(),
            },
        ];
        let cache = |name: &str| vec![format!("/opt/lib/{name}"), format!("/cache/{name}")];
        let mkl = Vendor::Mkl.candidates_in(&places, cache);
        let system = Vendor::Mkl.system_paths().len();
        assert!(
            mkl[..system]
                .iter()
                .all(|c| c.how.starts_with("a system path"))
        );
        assert_eq!(
            mkl[system],
            Candidate {
                path: "/p/versions/3.11.7/lib/libmkl_rt.so.3".into(),
                how: "found by asking /p/shims/python3 for sys.prefix".into(),
            }
        );
        let opt = mkl
            .iter()
            .find(|c| c.path == "/opt/lib/libmkl_rt.so.2")
            .unwrap();
        assert_eq!(opt.how, "$LD_LIBRARY_PATH");
        let last = mkl.last().unwrap();
        assert_eq!(last.path, "/cache/libmkl_rt.so");
        assert_eq!(last.how, "the dynamic linker's cache (ldconfig -p)");
        let unique: std::collections::HashSet<&String> = mkl.iter().map(|c| &c.path).collect();
        assert_eq!(unique.len(), mkl.len(), "each place once");
    }
}
