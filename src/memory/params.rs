//! The parameters of the memory results, as the exporters need to know them.

use linkme::distributed_slice;

use crate::result::{PARAMS, ParamInfo};

#[distributed_slice(PARAMS)]
static MEMORY_PARAMS: &[ParamInfo] = &[
    ParamInfo::THREADS,
    ParamInfo::BLOCK_BYTES,
    ParamInfo::derived("working_set_bytes"),
    ParamInfo::derived("bytes_per_repetition"),
    ParamInfo::derived("cache_level"),
    ParamInfo::derived("nodes"),
    ParamInfo::bookkeeping("ops_per_repetition"),
    ParamInfo::bookkeeping("clock_ghz_measured"),
    ParamInfo::bookkeeping("step_from_previous"),
];
