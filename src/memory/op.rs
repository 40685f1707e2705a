//! [`MemOp`]: the memory operations, named as scripts name them, with what each reads, writes
//! and counts per access; what the other files of the folder share.

use super::kernels::Stream;
use crate::names::named_enum;
use crate::peak::Accesses;

named_enum! {
    /// One memory operation, named as scripts name it.
    pub(crate) enum MemOp {
        /// sequential read
        Read = "read",
        /// sequential write
        Write = "write",
        /// sequential read + write of the same blocks (alias RWS)
        Copy = "copy" | "rws",
        /// read of random blocks
        RandRead = "randread",
        /// write of random blocks
        RandWrite = "randwrite",
        /// a random copy: a block read at a random offset, written at another (alias RWR)
        RandRw = "randrw" | "rwr",
        /// STREAM copy, c = a
        StreamCopy = "stream-copy",
        /// STREAM scale, b = 3·c
        StreamScale = "stream-scale",
        /// STREAM add, c = a + b
        StreamAdd = "stream-add",
        /// STREAM triad, a = b + 3·c
        StreamTriad = "stream-triad",
    }
}

impl MemOp {
    pub(crate) fn stream(self) -> Option<Stream> {
        match self {
            MemOp::StreamCopy => Some(Stream::Copy),
            MemOp::StreamScale => Some(Stream::Scale),
            MemOp::StreamAdd => Some(Stream::Add),
            MemOp::StreamTriad => Some(Stream::Triad),
            _ => None,
        }
    }

    pub(crate) fn random(self) -> bool {
        matches!(self, MemOp::RandRead | MemOp::RandWrite | MemOp::RandRw)
    }

    /// Operations that have a non-temporal variant.
    pub(crate) fn has_nt(self) -> bool {
        matches!(self, MemOp::Write | MemOp::Copy) || self.stream().is_some()
    }

    /// Regions of a block operation: a source (read from), a destination (written to).
    pub(crate) fn regions(self) -> (bool, bool) {
        match self {
            MemOp::Read | MemOp::RandRead => (true, false),
            MemOp::Write | MemOp::RandWrite => (false, true),
            _ => (true, true),
        }
    }

    /// The loads and stores per vector of a sequential kernel, for its peak in a private cache;
    /// `None` for random ones, whose offsets and calls per block no port count covers.
    pub(crate) fn accesses(self) -> Option<Accesses> {
        let (loads, stores) = match self {
            MemOp::Read => (1, 0),
            MemOp::Write => (0, 1),
            MemOp::Copy | MemOp::StreamCopy | MemOp::StreamScale => (1, 1),
            MemOp::StreamAdd | MemOp::StreamTriad => (2, 1),
            MemOp::RandRead | MemOp::RandWrite | MemOp::RandRw => return None,
        };
        Some(Accesses { loads, stores })
    }

    /// Bytes read and written by one block access of `block` bytes.
    pub(crate) fn bytes_per_access(self, block: u64) -> u64 {
        let (reads, writes) = self.regions();
        block * (u64::from(reads) + u64::from(writes))
    }
}
