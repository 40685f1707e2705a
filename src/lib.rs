//! peakbench: how close a machine comes to the peak of its CPU, memory, disk and network.
//!
//! # The pipeline
//!
//! Data flows one way: the command line ([`cli`]) is parsed into validated options (each
//! workload's own flags and the shared groups of [`options`]), a workload turns them into a
//! [`plan::Plan`] of cases (values that describe themselves; nothing starts while planning), the
//! [`session`] runs the plan, each case measures through the [`runner`] and says what it measured
//! with the [`plan::Measured`] builder, the results document ([`result`]) goes to the exporters
//! ([`report`]) and the [`history`]. [`dispatch`] ties the steps together for `main`.
//!
//! # Layers
//!
//! The modules below are declared bottom-up, and **a module uses only modules declared before
//! it** (`tests/architecture.rs` checks every `crate::` path of every file against this order,
//! so no import cycle can form and no lower layer reaches up):
//!
//! 1. foundation: errors and exit codes, names of enum values, units, text tables, the random
//!    generator, statistics (whose bootstrap resamples with it), the interrupt flag, the shared
//!    option groups and value parsers;
//! 2. the machine: its inventory ([`sysinfo`]), what it imposes on a run ([`evidence`]: cgroup
//!    limits, qdiscs, the CPU time of other processes) and its theoretical peaks ([`peak`]);
//! 3. the results document ([`result`]), with the roofline's model, which is built from it;
//! 4. measuring: the [`runner`] and the standard tools ([`reference`]);
//! 5. output and storage: the exporters ([`report`], which also write the inventory and the
//!    peaks as text) and the [`history`]; the [`findings`], which judge a document with its
//!    evidence (read by [`evidence`], layer 2) and its past;
//! 6. planning and running: the [`plan`] types, the [`workload`] trait and the [`session`],
//!    which runs any plan and names no workload (the caller hands it the clock probe);
//! 7. the workloads: [`cpu`], [`memory`], [`disk`], [`net`], each one folder, and the
//!    [`roofline`], built on the CPU and memory workloads' cases;
//! 8. the [`registry`] of workloads (one line each);
//! 9. the commands: `peakbench run`'s [`config`], `peakbench check` and `peakbench baseline`
//!    ([`check`]), `peakbench cluster` ([`cluster`], its MPI part
//!    behind the cargo feature `mpi`), the [`cli`] tree and the [`dispatch`]er, which only
//!    `main.rs` names.
//!
//! Adding a workload is a folder under `src/`, a `pub(crate) mod` line here and a line in
//! [`registry`] (see `docs/architecture.md`).

#![warn(unreachable_pub)]

pub(crate) mod interrupt;
pub(crate) mod error;
pub(crate) mod names;
pub(crate) mod units;
pub(crate) mod text;
pub mod rng;
pub(crate) mod stats;
pub(crate) mod options;

pub mod sysinfo;
pub(crate) mod evidence;
pub mod peak;

pub mod result;

pub mod runner;
pub(crate) mod reference;

pub(crate) mod report;
pub(crate) mod history;
pub(crate) mod findings;

pub(crate) mod plan;
pub(crate) mod workload;
pub(crate) mod session;

pub mod cpu;
pub(crate) mod memory;
pub(crate) mod disk;
pub(crate) mod net;
pub(crate) mod roofline;

// What the fuzz targets (fuzz/) and their property tests (tests/fuzz_props.rs) call: above
// every parser of outside input it drives, below the commands.
#[doc(hidden)]
pub mod fuzzing;

pub(crate) mod registry;

pub mod config;
pub(crate) mod check;
pub(crate) mod cluster;
pub(crate) mod cli;
pub mod dispatch;
