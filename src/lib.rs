//! peakbench: how close a machine comes to the peak of its CPU, memory, disk and network.
//!
//! The binary is a thin layer over [`app::run`]; each subsystem adds cases that the
//! [`session`] runs through the [`runner`], and every result is a [`result::BenchResult`].

pub mod app;
pub mod cli;
pub mod config;
pub mod cpu;
pub mod disk;
pub mod history;
pub mod interrupt;
pub mod memory;
pub mod net;
pub mod peak;
pub mod reference;
pub mod report;
pub mod result;
pub mod rng;
pub mod runner;
pub mod session;
pub mod stats;
pub mod sysinfo;
pub mod units;
