//! The errors that decide how peakbench exits, shared by every layer.
//!
//! Bad input is a [`UsageError`]: one line that names the flag and the fix, exit code 2,
//! wherever in a run it is found (a case that finds its input impossible raises one too). Lower
//! layers that do not know which flag fed them (the file system, a parser of a tool's output)
//! return their own typed errors; the layer that read the flag turns those into usage errors
//! with the flag's name, so no message is patched after the fact.

use std::process::ExitCode;

/// Bad input: exit code 2, one line naming the flag and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// A place the user gave that the machine cannot give the run (`--dir` on a file system short
/// of space, or mounted read-only). It ends a run as a [`UsageError`] does (exit code 2, one
/// line), and it is typed apart because a health check treats it otherwise: a node whose
/// scratch file system filled up, or was remounted read-only after an I/O error, since its
/// baseline has lost something it needs, and fails, naming `reason`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{flag}: {reason}: {fix}")]
pub(crate) struct PlaceError {
    pub(crate) flag: String,
    pub(crate) lack: Lack,
    /// "/scratch has 98.5 MiB free, too little for a test file".
    pub(crate) reason: String,
    pub(crate) fix: String,
}

/// What a [`PlaceError`]'s place lacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lack {
    /// Free space for the test file.
    Room,
    /// Writes: the file system is read-only.
    Writes,
}

/// A [`UsageError`] as an `anyhow::Error`, for functions that return `anyhow::Result`.
pub(crate) fn usage(message: impl Into<String>) -> anyhow::Error {
    UsageError(message.into()).into()
}

/// The process exit codes peakbench documents in `--help`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Everything asked for was measured.
    Done = 0,
    /// A measurement failed (the cause is printed).
    Failed = 1,
    /// Bad input.
    Usage = 2,
    /// `peakbench check`: no baseline for this hardware, so nothing could be judged.
    NoBaseline = 3,
    /// Interrupted by the user; what was measured is kept.
    Interrupted = 130,
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit as u8)
    }
}

/// How an error ends the program: the line to print and the exit code.
///
/// The line holds the whole chain of causes (`case disk …: --block: 3 B is not …`), so that a
/// usage error raised inside a case shows its reason and not only the case that raised it;
/// the exit code is 2 when a usage error is anywhere in the chain, 130 for an interrupt.
pub(crate) fn describe(error: &anyhow::Error) -> (String, Exit) {
    let exit = if error
        .chain()
        .any(|e| e.is::<UsageError>() || e.is::<PlaceError>())
    {
        Exit::Usage
    } else if error
        .chain()
        .any(|e| e.is::<crate::interrupt::Interrupted>())
    {
        Exit::Interrupted
    } else {
        Exit::Failed
    };
    (format!("Error: {error:#}"), exit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context as _;

    #[test]
    fn a_usage_error_inside_a_case_prints_its_reason_and_exits_2() {
        let inner: anyhow::Result<()> = Err(usage("--block: 3 B is not a multiple of 512 B"));
        let error = inner.context("case disk seqread 3 B").unwrap_err();
        let (line, exit) = describe(&error);
        assert_eq!(exit, Exit::Usage);
        assert_eq!(
            line,
            "Error: case disk seqread 3 B: --block: 3 B is not a multiple of 512 B"
        );
    }

    #[test]
    fn a_place_without_room_ends_a_run_as_bad_input_does() {
        let short = anyhow::Error::new(PlaceError {
            flag: "--dir".into(),
            lack: Lack::Room,
            reason: "/scratch has 98.5 MiB free, too little for a test file".into(),
            fix: "give another --dir".into(),
        })
        .context("[[disk]] #1");
        assert_eq!(
            describe(&short),
            (
                "Error: [[disk]] #1: --dir: /scratch has 98.5 MiB free, too little for a test \
                 file: give another --dir"
                    .into(),
                Exit::Usage
            )
        );
    }

    #[test]
    fn other_errors_exit_1_and_interrupts_130() {
        let failed = anyhow::anyhow!("the disk went away").context("case disk");
        assert_eq!(describe(&failed).1, Exit::Failed);
        let interrupted = anyhow::Error::new(crate::interrupt::Interrupted).context("case cpu");
        assert_eq!(describe(&interrupted).1, Exit::Interrupted);
    }
}
