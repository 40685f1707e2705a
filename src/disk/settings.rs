//! The values a disk case is set with (its op, engine, O_DIRECT choice and stop) and the
//! limits on its block: what the other files of the folder share. It uses none of them.

use serde::Serialize;

use crate::names::named_enum;

/// The largest block of one I/O (a single read or write moves at most ~2 GiB on Linux).
pub(crate) const MAX_BLOCK: u64 = 1 << 30;
/// Blocks below this report IOPS as the headline (with MB/s as an extra); larger ones MB/s.
pub(crate) const IOPS_HEADLINE_BELOW: u64 = 64 * 1024;

named_enum! {
    /// A disk operation.
    pub(crate) enum Op {
        /// sequential reads
        SeqRead = "seqread",
        /// sequential writes
        SeqWrite = "seqwrite",
        /// reads at random block-aligned offsets
        RandRead = "randread",
        /// writes at random block-aligned offsets
        RandWrite = "randwrite",
        /// a random mix of reads and writes, --rwmix percent reads
        ReadWrite = "readwrite",
        /// each block read sequentially, then written back in place
        Rewrite = "rewrite",
    }
}

impl Op {
    pub(crate) fn writes(self) -> bool {
        !matches!(self, Op::SeqRead | Op::RandRead)
    }

    pub(crate) fn reads(self) -> bool {
        !matches!(self, Op::SeqWrite | Op::RandWrite)
    }
}

named_enum! {
    /// The engine a case runs with.
    pub(crate) enum IoEngine {
        IoUring = "io_uring",
        Sync = "sync",
    }
}

named_enum! {
    /// The engine asked for.
    pub(crate) enum IoEngineChoice {
        /// io_uring where the kernel allows it, else sync with a note
        Auto = "auto",
        /// io_uring, queue depths per thread
        IoUring = "io_uring" | "io-uring",
        /// pread/pwrite, one I/O in flight per thread
        Sync = "sync",
    }
}

named_enum! {
    /// O_DIRECT or the page cache.
    pub(crate) enum DirectChoice {
        /// O_DIRECT; a block it cannot do is an error
        Always = "always",
        /// buffered (page cache) for every case
        Never = "never",
        /// O_DIRECT where the block allows it, buffered (and labelled so) where not
        WhereAligned = "where_aligned",
    }
}

/// When a repetition stops.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Stopping {
    Duration(std::time::Duration),
    /// Bytes moved by all threads together.
    Bytes(u64),
    /// I/Os completed by all threads together, split equally among them.
    Ios(u64),
}
