//! [`Root`]: the directory every reader of the inventory reads through, "/" on the live
//! machine and a fixture tree in tests (`write_fixture` builds one).

use std::path::{Path, PathBuf};
use std::str::FromStr;

/// A directory standing for "/": "/" itself on the live machine, a fixture tree in tests.
///
/// Paths are given as they are on a live machine ("/proc/cpuinfo"), and errors name them so.
#[derive(Clone, Copy)]
pub(super) struct Root<'a>(pub(super) &'a Path);

impl Root<'_> {
    fn path(self, abs: &str) -> PathBuf {
        self.0.join(abs.trim_start_matches('/'))
    }

    pub(super) fn exists(self, abs: &str) -> bool {
        self.path(abs).exists()
    }

    /// The whole file, or why it cannot be read.
    pub(super) fn read(self, abs: &str) -> Result<String, String> {
        std::fs::read_to_string(self.path(abs)).map_err(|e| format!("cannot read {abs}: {e}"))
    }

    /// The file trimmed, `None` when it is unreadable or blank.
    pub(super) fn read_trim(self, abs: &str) -> Option<String> {
        let text = self.read(abs).ok()?;
        let text = text.trim();
        (!text.is_empty()).then(|| text.to_string())
    }

    /// The trimmed file parsed as a `T`.
    pub(super) fn parse<T: FromStr>(self, abs: &str) -> Option<T> {
        self.read_trim(abs)?.parse().ok()
    }

    /// Last component of the target of a symbolic link.
    pub(super) fn link_name(self, abs: &str) -> Option<String> {
        let target = std::fs::read_link(self.path(abs)).ok()?;
        Some(target.file_name()?.to_string_lossy().into_owned())
    }

    /// Names of the subdirectories of a directory (following links), sorted.
    pub(super) fn subdirs(self, abs: &str) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.path(abs)) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .filter(|e| e.path().is_dir())
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort();
        names
    }

    /// Subdirectories named `prefix` then a number ("cpu3", "index0", "node1"), with the
    /// number, sorted by number.
    pub(super) fn numbered<N: FromStr + Ord>(self, abs: &str, prefix: &str) -> Vec<(N, String)> {
        let mut found: Vec<(N, String)> = self
            .subdirs(abs)
            .into_iter()
            .filter_map(|name| {
                let number = name.strip_prefix(prefix)?;
                if !number.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                Some((number.parse().ok()?, name))
            })
            .collect();
        found.sort_by(|a, b| a.0.cmp(&b.0));
        found
    }
}

/// Writes a file of a fixture tree at the path it has on a live machine ("/proc/cpuinfo").
#[cfg(test)]
pub(super) fn write_fixture(root: &Path, abs: &str, text: &str) {
    let path = root.join(abs.trim_start_matches('/'));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}
