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
    // Measured (smaps), not chosen: the kernel backs a region with huge pages as it can, so
    // two sizes of one sweep may differ, and a setting would split the sweep's line.
    ParamInfo::bookkeeping("huge_page_share"),
    // `mem c2c`: the matrix itself (drawn by report::c2c), its size and how it was driven.
    ParamInfo::bookkeeping("c2c"),
    ParamInfo::derived("pairs"),
    ParamInfo::derived("cpus"),
];
