//! What the ranks tell each other: the values sent as JSON between rank 0 and the others, and
//! between the two hosts of a pair.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::evidence::RunEvidence;
use crate::peak::Peaks;
use crate::result::{BenchResult, ClusterHost};
use crate::sysinfo::SysInfo;

#[derive(Serialize, Deserialize)]
pub(super) struct Hello {
    pub(super) host: String,
}

#[derive(Serialize, Deserialize)]
pub(super) struct Layout {
    pub(super) hosts: Vec<ClusterHost>,
}

#[derive(Serialize, Deserialize)]
pub(super) struct Inventory {
    pub(super) host: SysInfo,
    pub(super) peaks: Peaks,
    /// What this host imposes on its runs (its cgroup, qdiscs, boot and machine ids).
    pub(super) evidence: RunEvidence,
}

/// Rank 0's plan for the leaders: the node-local cases in order, each with its deadline, and
/// the run's shared key for the matrix's servers (random, new for every run, sent only through
/// MPI: a server accepts no client but this job's).
#[derive(Serialize, Deserialize)]
pub(super) struct CaseList {
    pub(super) cases: Vec<(String, f64)>,
    pub(super) key: Vec<u8>,
    /// The seed of the matrix's random peers (`--matrix sample:K`): every leader derives the
    /// same rounds from it.
    pub(super) matrix_seed: u64,
}

/// "Ready for case i", "go", the collectives (to the ranks that are not leaders), and the end
/// of the run.
#[derive(Serialize, Deserialize, PartialEq)]
pub(super) enum Step {
    Ready(usize),
    Go(usize),
    Collectives,
    Done,
}

#[derive(Serialize, Deserialize)]
pub(super) struct RankOutcome {
    pub(super) result: Result<BenchResult, String>,
}

/// A leader's part in a matrix round.
#[derive(Serialize, Deserialize, Clone, Copy)]
pub(super) struct Role {
    /// The other host's index, none when this host sits the round out.
    pub(super) peer: Option<usize>,
    /// Whether this host serves (the other is the client, and times the MPI ping-pong).
    pub(super) server: bool,
    pub(super) deadline_s: f64,
}

#[derive(Serialize, Deserialize)]
pub(super) struct ServerAt {
    pub(super) port: u16,
    pub(super) addrs: Vec<(IpAddr, u8)>,
}

/// What a leader measured in a round: the client's results, or why it failed.
#[derive(Serialize, Deserialize, Default)]
pub(super) struct RoundReport {
    pub(super) results: Vec<BenchResult>,
    pub(super) error: Option<String>,
    /// The rank whose silence is the error (the peer that stopped answering), if so.
    pub(super) silent: Option<usize>,
}
