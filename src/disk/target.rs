//! The target of a plan: the test file every case of it shares, opened by the first case to
//! run and closed when the last one is dropped.

use std::sync::{Arc, Mutex};

use anyhow::Result;

use super::error::name_flag;
use super::file::{self, Place, TargetSpec, TestFile};

/// The test file of a plan: created by the first case that runs, shared by all of them, and
/// removed when the last of them is dropped.
pub(super) struct DiskTarget {
    spec: TargetSpec,
    file: Mutex<Option<Arc<TestFile>>>,
}

impl DiskTarget {
    pub(super) fn new(spec: TargetSpec) -> DiskTarget {
        DiskTarget {
            spec,
            file: Mutex::new(None),
        }
    }

    /// What the plan found out about the target.
    pub(super) fn spec(&self) -> &TargetSpec {
        &self.spec
    }

    /// Bytes of the data region the cases work in.
    pub(super) fn data_bytes(&self) -> u64 {
        self.spec.data_bytes
    }

    pub(super) fn open(&self) -> Result<Arc<TestFile>> {
        let mut slot = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(file) = slot.as_ref() {
            return Ok(file.clone());
        }
        let flag = match self.spec.place {
            Place::Dir(_) => "--dir",
            Place::File(_) | Place::Device(_) => "--file",
        };
        let file = Arc::new(file::open(&self.spec).map_err(|e| name_flag(e, flag))?);
        *slot = Some(file.clone());
        Ok(file)
    }
}
