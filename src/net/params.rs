//! The parameters of the network results, as the exporters need to know them.

use linkme::distributed_slice;

use crate::result::{AxisScale, PARAMS, ParamInfo};

#[distributed_slice(PARAMS)]
static NET_PARAMS: &[ParamInfo] = &[
    ParamInfo::axis(
        "message_bytes",
        "message size",
        "message size (bytes)",
        AxisScale::Bytes,
        3,
    ),
    ParamInfo::axis(
        "streams",
        "streams",
        "parallel streams (count)",
        AxisScale::Count,
        4,
    ),
    ParamInfo::axis(
        "rate_bps",
        "offered rate",
        "offered rate per stream (bit/s)",
        AxisScale::BitRate,
        7,
    ),
    ParamInfo::derived("receiver_spun"),
    ParamInfo::bookkeeping("server"),
    ParamInfo::bookkeeping("in_process_server"),
    ParamInfo::bookkeeping("loopback"),
    ParamInfo::bookkeeping("placement"),
];
