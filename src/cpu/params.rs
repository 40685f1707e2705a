//! The parameters of the CPU results, as the exporters need to know them.

use linkme::distributed_slice;

use crate::result::{AxisScale, PARAMS, ParamInfo};

#[distributed_slice(PARAMS)]
static CPU_PARAMS: &[ParamInfo] = &[
    ParamInfo::THREADS,
    ParamInfo::axis(
        "n",
        "n",
        "problem size n (order of the matrix)",
        AxisScale::Count,
        6,
    ),
    ParamInfo::derived("instruction"),
    ParamInfo::derived("form"),
    ParamInfo::bookkeeping("ops_per_repetition"),
    ParamInfo::bookkeeping("scaled_residual_max"),
    ParamInfo::bookkeeping("checked_error_of_bound_max"),
    ParamInfo::bookkeeping("library"),
    ParamInfo::bookkeeping("library_kernel"),
    ParamInfo::bookkeeping("library_path"),
    ParamInfo::bookkeeping("library_found_by"),
    ParamInfo::bookkeeping("library_version"),
    ParamInfo::bookkeeping("solver"),
    ParamInfo::bookkeeping("dense_engine"),
    ParamInfo::bookkeeping("dense_engine_choice"),
    ParamInfo::bookkeeping("lu_engine"),
    ParamInfo::bookkeeping("gemm_engine"),
    ParamInfo::bookkeeping("gemm_kernel"),
    ParamInfo::bookkeeping("gemm_blocking"),
    ParamInfo::bookkeeping("gemm_blocking_source"),
    ParamInfo::bookkeeping("gemm_tile_source"),
    ParamInfo::bookkeeping("lu_time_split"),
    ParamInfo::bookkeeping("lu_time_split_s"),
    ParamInfo::bookkeeping("placement"),
];
