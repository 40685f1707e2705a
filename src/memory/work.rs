//! The fixed work of one repetition (`--bytes`, `--ops`), which the options carry and a case
//! turns into its stop.

use serde::Serialize;

/// A fixed amount of work for one repetition of a case, shared by its threads (strong scaling).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Work {
    /// Bytes as the case counts them (`--bytes`), rounded down to whole accesses.
    Bytes(u64),
    /// Accesses of a block op, elements of a STREAM kernel (`--ops`).
    Ops(u64),
}

impl Work {
    /// Accesses (or elements) for a case that counts `per_access` bytes per access.
    pub(crate) fn units(self, per_access: u64) -> u64 {
        match self {
            Work::Bytes(b) => b / per_access,
            Work::Ops(n) => n,
        }
    }
}
