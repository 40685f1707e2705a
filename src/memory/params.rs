//! The parameters of the memory results, as the exporters need to know them.

use linkme::distributed_slice;

use crate::result::{AxisScale, PARAMS, ParamInfo};

#[distributed_slice(PARAMS)]
static MEMORY_PARAMS: &[ParamInfo] = &[
    ParamInfo::axis("threads", "threads", "threads (count)", AxisScale::Count, 1),
    ParamInfo::axis(
        "block_bytes",
        "block size",
        "block size (bytes)",
        AxisScale::Bytes,
        2,
    ),
    ParamInfo::derived("working_set_bytes"),
    ParamInfo::derived("bytes_per_repetition"),
    ParamInfo::derived("cache_level"),
    ParamInfo::derived("nodes"),
    ParamInfo::bookkeeping("ops_per_repetition"),
    ParamInfo::bookkeeping("clock_ghz_measured"),
    ParamInfo::bookkeeping("step_from_previous"),
];
