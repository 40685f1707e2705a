//! Block devices: each one's queue, and the whole disk a file is on.

use super::{BlockQueue, Read};

pub(super) fn read_block_devices() -> Vec<BlockQueue> {
    Vec::new()
}

/// `major:minor` of the whole disk under the file or directory `path` (its directory, when the
/// file is gone).
pub(super) fn device_of_path(path: &str) -> Option<Read<String>> {
    let _ = path;
    None
}
