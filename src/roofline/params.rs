//! The parameters of the roofline results, as the exporters need to know them.

use linkme::distributed_slice;

use crate::result::{PARAMS, ParamInfo};

#[distributed_slice(PARAMS)]
static ROOFLINE_PARAMS: &[ParamInfo] = &[
    ParamInfo::THREADS,
    ParamInfo::derived("working_set_bytes"),
    ParamInfo::derived("intensity"),
    ParamInfo::bookkeeping("kernel_op"),
    ParamInfo::bookkeeping("same_as"),
    ParamInfo::bookkeeping("points"),
    ParamInfo::bookkeeping("roofline"),
];
