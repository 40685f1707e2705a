//! The parameters of the disk results, as the exporters need to know them.

use linkme::distributed_slice;

use crate::result::{AxisScale, PARAMS, ParamInfo};

#[distributed_slice(PARAMS)]
static DISK_PARAMS: &[ParamInfo] = &[
    ParamInfo::THREADS,
    ParamInfo::BLOCK_BYTES,
    ParamInfo::axis(
        "queue_depth",
        "queue depth",
        "queue depth (I/Os in flight per thread)",
        AxisScale::Count,
        5,
    ),
    ParamInfo::derived("file_bytes"),
    ParamInfo::derived("direct"),
    ParamInfo::derived("io"),
    ParamInfo::derived("bytes_per_repetition"),
    ParamInfo::derived("submit_batch"),
    ParamInfo::bookkeeping("bytes_moved"),
    ParamInfo::bookkeeping("region_bytes"),
    ParamInfo::bookkeeping("stamps_checked"),
    ParamInfo::bookkeeping("path"),
    ParamInfo::bookkeeping("ios_per_repetition"),
];
