//! The disk workload's errors: why a target is refused ([`TargetError`], the user's input at
//! fault) and the usage error that names the flag it came from, and an I/O failure with its
//! offset ([`io_error`]). Every other file of the folder may raise them; it uses none of them.

use std::path::PathBuf;

use anyhow::anyhow;

use crate::error::{Lack, PlaceError, usage};
use crate::units::format_size_approx;

/// Why a place cannot hold the test file, or a path or device cannot be used. These are the
/// user's input at fault; the disk plan names the flag that gave it and the fix.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TargetError {
    #[error("{} cannot be used ({source})", path.display())]
    Missing {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not a directory", path.display())]
    NotADirectory { path: PathBuf },
    #[error("cannot read the free space of {} ({source})", path.display())]
    FreeSpaceUnknown {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is on a read-only file system", path.display())]
    ReadOnly { path: PathBuf },
    #[error(
        "the test file needs {} and {} has {} free (peakbench leaves {} + 1 % free)",
        format_size_approx(*need), path.display(), format_size_approx(*free),
        format_size_approx(*margin)
    )]
    NoSpace {
        need: u64,
        path: PathBuf,
        free: u64,
        /// The fixed part of the free space peakbench leaves ([`super::file::SPACE_MARGIN`]).
        margin: u64,
    },
    #[error("{} has {} free, too little for a test file", path.display(), format_size_approx(*free))]
    TooLittleRoom { path: PathBuf, free: u64 },
    #[error("cannot create a file in {} ({source})", path.display())]
    NotWritable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not a regular file", path.display())]
    NotRegular { path: PathBuf },
    #[error(
        "{} exists and was not created by peakbench (no complete peakbench header)",
        path.display()
    )]
    Foreign { path: PathBuf },
    #[error("{} cannot be read ({why})", path.display())]
    Unreadable { path: PathBuf, why: String },
    #[error("{} {why}", path.display())]
    NotOurs { path: PathBuf, why: String },
    #[error("the peakbench file {} holds {has} B of data and this run needs {need} B", path.display())]
    TooSmall { path: PathBuf, has: u64, need: u64 },
    #[error("{} is a block device", path.display())]
    DeviceNotAllowed { path: PathBuf },
    #[error("{} {why}", path.display())]
    DeviceInUse { path: PathBuf, why: String },
}

/// The usage error for a target the user gave with `flag` (`--dir` or `--file`); a place short
/// of space or read-only gives a [`PlaceError`].
pub(crate) fn target_usage(error: TargetError, flag: &str) -> anyhow::Error {
    use TargetError as E;
    let place = |flag: &str, lack, fix: String| -> anyhow::Error {
        PlaceError {
            flag: flag.into(),
            lack,
            reason: error.to_string(),
            fix,
        }
        .into()
    };
    let fix = match &error {
        E::Missing { .. } => format!("give an existing path with {flag}"),
        E::NotADirectory { .. } => {
            "give the directory the test file goes in with --dir, or its path with --file".into()
        }
        E::ReadOnly { .. } => {
            return place(flag, Lack::Writes, format!("give a writable {flag}"));
        }
        E::FreeSpaceUnknown { .. } | E::NotWritable { .. } => format!("give another {flag}"),
        E::TooLittleRoom { .. } => return place(flag, Lack::Room, format!("give another {flag}")),
        E::NoSpace { .. } => {
            return place(
                "--size",
                Lack::Room,
                format!("give a smaller --size or another {flag}"),
            );
        }
        E::TooSmall { .. } => {
            return usage(format!(
                "--size: {error}: give a smaller --size, or remove the file or give another {flag}"
            ));
        }
        E::NotRegular { .. } => {
            "give a new path, or a block device with --allow-device-write".into()
        }
        E::Foreign { .. } => "peakbench never writes to a file it did not create: give a new \
                               path or use --dir"
            .into(),
        E::Unreadable { .. } => "give a new path".into(),
        E::NotOurs { .. } => format!(
            "peakbench reuses only its own regular file with one link; it is left as it is: \
             remove it or give another {flag}"
        ),
        E::DeviceNotAllowed { path } => format!(
            "peakbench writes to a device only when it is named with --allow-device-write {} \
             and is unmounted, unused and blank",
            path.display()
        ),
        E::DeviceInUse { .. } => {
            return usage(format!(
                "--allow-device-write: {error}; peakbench will not write to it"
            ));
        }
    };
    usage(format!("{flag}: {error}: {fix}"))
}

/// Turns a target error anywhere in `error`'s chain into the usage error naming `flag`.
pub(crate) fn name_flag(error: anyhow::Error, flag: &str) -> anyhow::Error {
    match error.downcast::<TargetError>() {
        Ok(target) => target_usage(target, flag),
        Err(other) => other,
    }
}

/// An I/O error with its offset; a full disk gets a message that says what happens next.
pub(crate) fn io_error(e: std::io::Error, what: &str, offset: u64) -> anyhow::Error {
    if e.raw_os_error() == Some(libc::ENOSPC) {
        anyhow!(
            "the disk is full (ENOSPC) {what} at offset {offset}: the run stops and the test \
             file is removed (with --keep, kept only if its fill had finished); free some space \
             or give a smaller --size"
        )
    } else {
        anyhow!("{what} at offset {offset}: {e}")
    }
}
