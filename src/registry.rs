//! Every workload peakbench has, one line each. The command line, the dispatch, the table names
//! of `peakbench run` configs and `--dry-run` follow from this list.

use crate::workload::{Registered, Workload};

/// The workloads, in the order `peakbench run` measures a config's tables of each kind when a
/// preset lists them so, and `--help` shows them.
pub(crate) const WORKLOADS: &[&dyn Workload] = &[
    &Registered::<crate::cpu::Cpu>::NEW,
    &Registered::<crate::cpu::Linpack>::NEW,
    &Registered::<crate::cpu::Gemm>::NEW,
    &Registered::<crate::memory::Mem>::NEW,
    &Registered::<crate::memory::MemLatency>::NEW,
    &Registered::<crate::memory::c2c::MemC2c>::NEW,
    &Registered::<crate::disk::Disk>::NEW,
    &Registered::<crate::net::Net>::NEW,
    &Registered::<crate::roofline::Roofline>::NEW,
];

/// The probes every run's context starts from: the clock of one core and the FMA instructions
/// it retires per cycle, which the CPU workload measures. The commands reach it here, so that
/// nothing above the registry names a workload.
pub(crate) fn probe() -> crate::peak::MeasuredFactors {
    crate::cpu::probe()
}

/// The workload whose config table is `name`.
pub(crate) fn by_name(name: &str) -> Option<&'static dyn Workload> {
    WORKLOADS.iter().copied().find(|w| w.name() == name)
}

/// The workload whose command is `path`.
pub(crate) fn by_path(path: &[&str]) -> Option<&'static dyn Workload> {
    WORKLOADS.iter().copied().find(|w| w.path() == path)
}

/// Every config table name, for messages.
pub(crate) fn names() -> Vec<&'static str> {
    WORKLOADS.iter().map(|w| w.name()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_paths_are_unique_and_parents_come_first() {
        let mut names = names();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), WORKLOADS.len());
        for (i, w) in WORKLOADS.iter().enumerate() {
            let path = w.path();
            assert_eq!(by_path(path).map(|f| f.name()), Some(w.name()));
            if path.len() > 1 {
                let parent = &path[..path.len() - 1];
                let at = WORKLOADS.iter().position(|p| p.path() == parent);
                assert!(
                    at.is_some_and(|at| at < i),
                    "{path:?} needs {parent:?} before it"
                );
            }
        }
    }
}
