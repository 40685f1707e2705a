//! The first rank of a host, which measures: its state, and how rank 0 ends a job that cannot
//! go on (a rank that stopped answering, or the job being stopped) with the document written.

use std::time::Instant;

use mpi::traits::*;

use super::super::ClusterRunArgs;
use super::messages::Layout;
use super::transport::{Comm, POLL, STOP_GRACE, TAG_STOP};
use crate::error::Exit;
use crate::net::auth::Key;
use crate::plan::Context;
use crate::result::{Cluster, Failure, RunStatus};
use crate::session::Session;

/// The first rank of a host: it measures.
pub(super) struct Leader<'a> {
    pub(super) comm: &'a Comm,
    pub(super) args: &'a ClusterRunArgs,
    pub(super) ctx: &'a Context,
    pub(super) layout: &'a Layout,
    pub(super) leaders: &'a [usize],
    pub(super) me: usize,
    /// Rank 0's document.
    pub(super) session: Option<Session>,
    pub(super) html: Option<std::path::PathBuf>,
    /// The run's shared key, from rank 0.
    pub(super) key: Option<Key>,
    /// The seed of the matrix's random peers, from rank 0.
    pub(super) seed: u64,
    /// Rank 0: the MPI ping-pong curves of the links not flagged, kept out of the document
    /// (unless `--matrix-curves`) and put back if a later round flags the link, by
    /// `host/result id`.
    pub(super) curves: std::collections::HashMap<String, serde_json::Value>,
}

impl Leader<'_> {
    pub(super) fn session(&mut self) -> &mut Session {
        self.session.as_mut().expect("rank 0 has the document")
    }

    pub(super) fn cluster(&mut self) -> &mut Cluster {
        self.session()
            .report
            .cluster
            .as_mut()
            .expect("a cluster document")
    }

    pub(super) fn host_of(&self, rank: usize) -> String {
        self.layout
            .hosts
            .iter()
            .find(|h| h.ranks.contains(&rank))
            .map(|h| h.name.clone())
            .unwrap_or_default()
    }

    /// Rank 0 records that `missing` did not answer in `case`, writes the document and ends
    /// the job.
    /// No rank missing: a collective did not complete, and MPI does not say which rank
    /// stopped in it (the failure's host is `unknown`).
    pub(super) fn give_up(&mut self, missing: &[usize], case: &str, why: &str) -> ! {
        if crate::interrupt::requested() {
            self.stopped(case);
        }
        self.record_and_end(missing, case, why)
    }

    /// Rank 0, asked to stop (SIGTERM, with which mpirun ends the job when a rank dies or
    /// when it is itself stopped; or Ctrl-C) in `step`: waits [`STOP_GRACE`] for every other
    /// rank to say it is alive ([`Comm::tell_stop`]); the ranks that do not are named, with
    /// the step, as killed or crashed. If every rank answers, the run was stopped, not
    /// failed. Writes the document and ends the job.
    pub(super) fn stopped(&mut self, step: &str) -> ! {
        let comm = self.comm;
        let until = Instant::now() + STOP_GRACE;
        let mut alive = vec![false; comm.size];
        alive[0] = true;
        loop {
            for (r, seen) in alive.iter_mut().enumerate().skip(1) {
                if !*seen && comm.process(r).immediate_probe_with_tag(TAG_STOP).is_some() {
                    let _ = comm.process(r).receive_vec_with_tag::<u8>(TAG_STOP);
                    *seen = true;
                }
            }
            if alive.iter().all(|a| *a) || Instant::now() > until {
                break;
            }
            std::thread::sleep(POLL);
        }
        let silent: Vec<usize> = (0..comm.size).filter(|&r| !alive[r]).collect();
        if silent.is_empty() {
            eprintln!("peakbench cluster: stopped in {step}; every rank answered the stop");
            let _ = self.session().finish(RunStatus::Interrupted);
            if let Some(path) = self.session().output_path() {
                eprintln!("results so far written to {}", path.display());
            }
            self.comm.world.abort(Exit::Interrupted as i32)
        }
        self.record_and_end(
            &silent,
            step,
            &format!(
                "its rank ended (killed or crashed) in this step: the job was being ended \
                 (SIGTERM) and every other rank answered within {} ms, this one did not",
                STOP_GRACE.as_millis()
            ),
        )
    }

    /// Rank 0 records that `missing` did not answer in `case`, writes the document and ends
    /// the job (see [`Leader::give_up`]).
    pub(super) fn record_and_end(&mut self, missing: &[usize], case: &str, why: &str) -> ! {
        let mut failures: Vec<Failure> = missing
            .iter()
            .map(|&rank| Failure {
                host: self.host_of(rank),
                rank,
                case: case.to_string(),
                why: why.to_string(),
            })
            .collect();
        if missing.is_empty() {
            failures.push(Failure {
                host: "unknown".into(),
                rank: 0,
                case: case.to_string(),
                why: format!(
                    "{why} (a rank stopped inside the collective; MPI does not say which)"
                ),
            });
        }
        for f in &failures {
            eprintln!(
                "peakbench cluster: host {} (rank {}) in {}: {}",
                f.host, f.rank, f.case, f.why
            );
        }
        self.cluster().failures.extend(failures);
        let _ = self.session().finish(RunStatus::Failed);
        if let Some(path) = self.session().output_path() {
            eprintln!("results so far written to {}", path.display());
        }
        self.comm.world.abort(Exit::Failed as i32)
    }

    /// Rank 0: the document names `step` as the one in progress and is written before it
    /// starts, so that it names the step even when the job ends without a word from rank 0.
    pub(super) fn begin(&mut self, step: &str) {
        self.cluster().step = Some(step.to_string());
        self.save();
    }

    pub(super) fn save(&mut self) {
        self.cluster().rank0_peak_memory_bytes = peak_memory();
        if let Err(e) = self.session().save() {
            eprintln!("warning: the output file was not written: {e:#}");
        }
    }
}

/// This process's peak resident memory (`VmHWM` of /proc/self/status), bytes.
fn peak_memory() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
