//! The results document: plain serde structs, versioned, the same for every output format.
//!
//! Schema (version [`SCHEMA_VERSION`]), documented field by field in `docs/schema.md`:
//! the top level holds the tool, the host inventory, the theoretical peaks, the effective
//! configuration and the results; each result holds its case (`id`, `subsystem`, `op`,
//! `params`), the headline `metric`/`unit`/`value` (the median of the repetitions), the
//! statistics and raw samples, and where they apply latency percentiles, the peak, the
//! efficiency and the reference tool's value.
//!
//! [`roofline`] holds the roofline's model: the data of a `model` result's
//! `params.other.roofline` and how it is built from a run's roofline results (a pure
//! function), here so that both the roofline workload, which stores it, and the exporters,
//! which draw it, can reach it.

mod findings;
pub(crate) mod roofline;
pub(crate) mod significance;
pub(crate) mod validate;

use serde::{Deserialize, Serialize};

pub use findings::{
    Against, Cause, Evidence, Expectation, Finding, Findings, NO_CAUSE, Test, Verdict,
    missing_kinds,
};

use crate::evidence::{CaseEvidence, RunEvidence};
use crate::names::named_enum;
use crate::peak::{PeakRef, Peaks};
use crate::stats::{LatencySummary, Summary};
use crate::sysinfo::SysInfo;

/// Version of the JSON layout; bumped on any incompatible change. Version 2 added the `hosts`
/// map and the `cluster` section of `peakbench cluster run`; version 3 the `evidence` read
/// from the machine (the run's and each result's) and the `findings`; version 4 a matrix of
/// more than 64 hosts keeps its measured links in `cells` in place of `values` (an older
/// reader would refuse it; every version 3 document is a version 4 one). An older document
/// reads as a current one without them ([`Report::parse`]).
pub const SCHEMA_VERSION: u32 = 4;

/// One run: everything measured by one invocation.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    pub schema_version: u32,
    pub tool: Tool,
    /// The command line that produced this document.
    pub command: Vec<String>,
    /// RFC 3339 UTC time the run started.
    pub started_at: String,
    /// RFC 3339 UTC time the run ended; `null` while it is running.
    pub finished_at: Option<String>,
    /// `running`, `complete`, `interrupted` or `failed`.
    pub status: RunStatus,
    /// The machine that measured every result in this document.
    pub host: SysInfo,
    /// Theoretical peaks with the source of every factor.
    pub peaks: Peaks,
    /// The effective settings of the run, defaults included.
    pub config: serde_json::Value,
    /// Warnings about the run as a whole (each result has its own too).
    pub warnings: Vec<String>,
    /// One entry per measured case, in the order they ran.
    pub results: Vec<BenchResult>,
    /// Every host's inventory by host name, for documents measured on several hosts at once
    /// (`peakbench cluster run`); each result's `host` is a key. Empty for one machine, whose
    /// inventory is `host`.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub hosts: std::collections::BTreeMap<String, SysInfo>,
    /// What only a cluster run has: the hosts and their ranks, the spread of every node-local
    /// case, the network matrices, the collectives, the failures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<Cluster>,
    /// What the machine imposed on the run, read when it started (schema version 3): the
    /// cgroup's limits, the qdiscs, the block queues, the boot id. `null` in older documents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<RunEvidence>,
    /// Every result judged against its peak, the standard tool, its past and its fleet, with
    /// the causes of every shortfall (schema version 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub findings: Option<Findings>,
}

impl Report {
    /// Reads a document of any schema version this peakbench knows, upgraded to the current
    /// one: a version 1 document is a version 2 document of one host (no `hosts`, no
    /// `cluster`), a version 2 document one of version 3 without evidence and findings, and
    /// a version 3 document is a version 4 one (its matrices are dense), so upgrading only sets
    /// the version.
    ///
    /// Every document from outside comes through here and is checked once ([`validate`]):
    /// its size, every number finite, every string and list bounded, the shapes one field's
    /// length ties to another's; an error names the field.
    pub fn parse(text: &str) -> Result<Report, String> {
        validate::check_size(text.len() as u64, crate::sysinfo::available_memory)?;
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            let at = validate::path_at(text, validate::offset_of(text, e.line(), e.column()));
            format!("{at}: not JSON: {e}")
        })?;
        let version = value
            .get("schema_version")
            .and_then(serde_json::Value::as_u64)
            .ok_or("no schema_version: not a peakbench results document")?;
        if version == 0 || version > u64::from(SCHEMA_VERSION) {
            return Err(format!(
                "results schema v{version}, this peakbench reads v1 to v{SCHEMA_VERSION}: use \
                 the peakbench that wrote it"
            ));
        }
        validate::check_json(&value)?;
        let mut report: Report = serde_json::from_value(value).map_err(|e| {
            format!(
                "not a v{version} results document: {}",
                crate::text::printable(&e.to_string())
            )
        })?;
        validate::check_shapes(&report)?;
        report.schema_version = SCHEMA_VERSION;
        Ok(report)
    }

    /// The inventory of the host named `name`: its entry in `hosts`, else `host` if it is
    /// that host.
    pub fn inventory(&self, name: &str) -> Option<&SysInfo> {
        self.hosts
            .get(name)
            .or((self.host.hostname == name).then_some(&self.host))
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

impl Tool {
    pub fn this() -> Self {
        Tool {
            name: env!("CARGO_PKG_NAME").to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }
}

named_enum! {
    /// How a run ended (or that it is still going).
    pub enum RunStatus {
        Running = "running",
        Complete = "complete",
        Interrupted = "interrupted",
        Failed = "failed",
    }
}

named_enum! {
    /// The part of the machine a result measures.
    pub enum Subsystem {
        Cpu = "cpu",
        Memory = "memory",
        Disk = "disk",
        Network = "network",
        /// the empirical roofline: compute ceilings, bandwidth roofs, the intensity sweep
        Roofline = "roofline",
    }
}

impl Params {
    /// The host at the other end of a link of a cluster's matrix (`other.peer`), or None for a
    /// result that is not a link.
    pub fn peer(&self) -> Option<&str> {
        self.other.get("peer").and_then(serde_json::Value::as_str)
    }

    /// Every field's name as it appears in the JSON document, in the order of the struct; the
    /// CSV has a column for each (and `other` as one JSON column).
    pub const FIELDS: &'static [&'static str] = &[
        "threads",
        "scaling",
        "pinned",
        "precision",
        "isa",
        "fma",
        "n",
        "block_bytes",
        "working_set_bytes",
        "file_bytes",
        "queue_depth",
        "engine",
        "direct",
        "protocol",
        "message_bytes",
        "streams",
        "duration_s",
        "other",
    ];
}

/// The parameters of a case; only those that apply are present.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Params {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// `strong` or `weak`, for work-based CPU cases.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scaling: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pinned: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precision: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub isa: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fma: Option<bool>,
    /// Problem size (e.g. the order of a linear system).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub working_set_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_depth: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub direct: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streams: Option<usize>,
    /// Length of one repetition, seconds, for duration-based cases.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    /// Any other parameter a subsystem needs, by name.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub other: serde_json::Map<String, serde_json::Value>,
}

/// How a parameter takes part in telling results apart. The exporters that group results (the
/// HTML report's lines, the pasted tables' parameter column) ask [`param_role`]; a parameter no
/// workload declares in [`PARAMS`] is a setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamRole {
    /// Chosen by the user or the plan: where it varies among results of one op, it names a line.
    Setting,
    /// Follows from the settings (a working set from the block size and threads, buffered I/O
    /// for an unaligned block, a cache level from a size): it names a line only when the
    /// settings alone would put two results at the same point.
    Derived,
    /// What the measurement counted or where it ran (bytes moved, stamps checked, a path, a
    /// measured clock): kept in the JSON, never in a chart's lines or a table's parameters.
    Bookkeeping,
}

/// What the exporters know of one parameter (a field of [`Params`] or a key of `params.other`):
/// its role and, for a setting that a sweep varies, the chart axis it makes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ParamInfo {
    pub key: &'static str,
    pub role: ParamRole,
    pub axis: Option<Axis>,
}

/// A parameter as the x axis of a chart.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Axis {
    /// What the chart is against, e.g. "block size".
    pub name: &'static str,
    /// The axis label with its unit, e.g. "block size (bytes)".
    pub label: &'static str,
    pub scale: AxisScale,
    /// The charts of a run come axis by axis in this order (threads first).
    pub rank: u8,
}

/// How an axis's ticks read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AxisScale {
    Count,
    Bytes,
    BitRate,
}

impl ParamInfo {
    /// A setting that charts put on their x axis.
    pub const fn axis(
        key: &'static str,
        name: &'static str,
        label: &'static str,
        scale: AxisScale,
        rank: u8,
    ) -> ParamInfo {
        let axis = Axis {
            name,
            label,
            scale,
            rank,
        };
        ParamInfo {
            key,
            role: ParamRole::Setting,
            axis: Some(axis),
        }
    }

    /// `threads`, a field of every result that has threads, as the x axis of the charts.
    pub const THREADS: ParamInfo =
        ParamInfo::axis("threads", "threads", "threads (count)", AxisScale::Count, 1);

    /// `block_bytes`, the bytes of one access or I/O (memory and disk), as an x axis.
    pub const BLOCK_BYTES: ParamInfo = ParamInfo::axis(
        "block_bytes",
        "block size",
        "block size (bytes)",
        AxisScale::Bytes,
        2,
    );

    pub const fn derived(key: &'static str) -> ParamInfo {
        ParamInfo {
            key,
            role: ParamRole::Derived,
            axis: None,
        }
    }

    pub const fn bookkeeping(key: &'static str) -> ParamInfo {
        ParamInfo {
            key,
            role: ParamRole::Bookkeeping,
            axis: None,
        }
    }
}

/// The parameters every workload declares, beside its cases in its own folder:
/// `#[distributed_slice(crate::result::PARAMS)] static PARAMS: &[ParamInfo] = &[…];`. The
/// exporters sit below the workloads and name none of them; the linker gathers the lists.
#[linkme::distributed_slice]
pub static PARAMS: [&'static [ParamInfo]];

/// Every declared parameter, the first declaration of each key (the tests check that two
/// declarations of one key agree).
pub fn declared_params() -> Vec<&'static ParamInfo> {
    let mut seen: Vec<&'static ParamInfo> = Vec::new();
    for info in PARAMS.iter().flat_map(|list| list.iter()) {
        if !seen.iter().any(|s| s.key == info.key) {
            seen.push(info);
        }
    }
    seen
}

/// The parameters charts put on their x axis, in their order.
pub fn chart_axes() -> Vec<(&'static str, Axis)> {
    let mut axes: Vec<(&'static str, Axis)> = declared_params()
        .into_iter()
        .filter_map(|p| p.axis.map(|a| (p.key, a)))
        .collect();
    axes.sort_by_key(|(key, axis)| (axis.rank, *key));
    axes
}

/// The role of the parameter `name` (a field of [`Params`] or a key of `params.other`).
pub fn param_role(name: &str) -> ParamRole {
    let name = name.strip_prefix(OTHER_PREFIX).unwrap_or(name);
    PARAMS
        .iter()
        .flat_map(|list| list.iter())
        .find(|p| p.key == name)
        .map_or(ParamRole::Setting, |p| p.role)
}

/// How [`Params::flat`] names a key of `other` that is also the name of a field.
const OTHER_PREFIX: &str = "other.";

impl Params {
    /// Every parameter by name, those of `other` beside the fields (one that has a field's name
    /// as `other.NAME`).
    pub fn flat(&self) -> std::collections::BTreeMap<String, serde_json::Value> {
        let value = serde_json::to_value(self).expect("parameters serialise");
        let mut map = std::collections::BTreeMap::new();
        if let serde_json::Value::Object(fields) = value {
            for (key, value) in fields {
                match (key.as_str(), value) {
                    ("other", serde_json::Value::Object(other)) => {
                        for (key, value) in other {
                            let key = if Params::FIELDS.contains(&key.as_str()) {
                                format!("{OTHER_PREFIX}{key}")
                            } else {
                                key
                            };
                            map.insert(key, value);
                        }
                    }
                    (_, value) => {
                        map.insert(key, value);
                    }
                }
            }
        }
        map
    }

    /// The parameters of `flat` (as [`Params::flat`] gives them) back in their places.
    pub fn from_flat(flat: &std::collections::BTreeMap<String, serde_json::Value>) -> Params {
        let mut fields = serde_json::Map::new();
        let mut other = serde_json::Map::new();
        for (key, value) in flat {
            if let Some(key) = key.strip_prefix(OTHER_PREFIX) {
                other.insert(key.to_string(), value.clone());
            } else if key != "other" && Params::FIELDS.contains(&key.as_str()) {
                fields.insert(key.clone(), value.clone());
            } else {
                other.insert(key.clone(), value.clone());
            }
        }
        fields.insert("other".into(), serde_json::Value::Object(other));
        serde_json::from_value(serde_json::Value::Object(fields)).unwrap_or_default()
    }

    /// These parameters without the bookkeeping ones.
    pub fn without_bookkeeping(&self) -> Params {
        let mut flat = self.flat();
        flat.retain(|k, _| param_role(k) != ParamRole::Bookkeeping);
        Params::from_flat(&flat)
    }
}

/// The standard tool's value for the same case.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reference {
    pub tool: String,
    /// The exact command that was run, so a user can rerun it.
    pub command: String,
    /// In the result's unit; `null` when the tool ran but gave no usable value.
    pub value: Option<f64>,
    /// Our value / the tool's value.
    pub ratio: Option<f64>,
    /// Why there is no value, when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The extra metric of a TCP throughput result: how often its receiving threads slept and were
/// woken per MB received in the window (voluntary context switches; the findings' evidence
/// for a sleeping receiver). Here, below both `net`, which writes it, and `findings`, which
/// reads it.
pub const RECEIVER_WAKEUPS: &str = "receiver_wakeups";

/// A secondary metric measured in the same repetitions (e.g. IOPS next to MB/s).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Extra {
    pub metric: String,
    pub unit: String,
    pub value: f64,
    pub stats: Summary,
}

/// One point of a sampling run's time series.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimePoint {
    /// Seconds since the start of the series (end of the interval).
    pub t_s: f64,
    pub value: f64,
    /// Clock observed during the interval, GHz, where the machine exposes it.
    pub ghz: Option<f64>,
}

/// The measurement of one case.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BenchResult {
    /// Stable id of the case, the same for the same parameters in every run.
    pub id: String,
    /// Host name of the machine that measured it.
    pub host: String,
    pub subsystem: Subsystem,
    pub op: String,
    pub params: Params,
    /// What is measured, e.g. "throughput".
    pub metric: String,
    /// e.g. "GFLOP/s", "GB/s", "MB/s", "Mb/s", "ns".
    pub unit: String,
    /// The median of the repetitions.
    pub value: f64,
    pub stats: Summary,
    /// Each repetition's value, in order.
    pub samples: Vec<f64>,
    /// How the work is counted, e.g. "FMA = 2 FLOP; 16 accumulators × 8 lanes".
    pub counting: String,
    /// Other metrics from the same repetitions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra: Vec<Extra>,
    /// Latency percentiles, nanoseconds, merged over threads and repetitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<LatencySummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak: Option<PeakRef>,
    /// value / peak.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efficiency: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<Reference>,
    /// Further standard tools on the same case, each as `reference` (ICMP `ping` beside
    /// sockperf for a round trip): the ratio is ours / theirs, each tool's note says what it
    /// measured differently.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_references: Vec<Reference>,
    /// Time series of a sampling run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<TimePoint>,
    /// What to be careful about with this value, each with a remedy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// What the machine did while the case ran: the CPU time of this process and of the
    /// others, the time stolen, the throttling, the device and route (schema version 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<CaseEvidence>,
}

/// What a cluster run adds to the document (schema version 2).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Cluster {
    /// MPI ranks in the job.
    pub ranks: usize,
    /// The hosts in the order of their first rank, each with its ranks; the first rank of each
    /// runs the node-local suite and the host's side of the matrix.
    pub hosts: Vec<ClusterHost>,
    /// The batch job the run is part of (Slurm's `SLURM_*` variables, as rank 0 sees them);
    /// none when launched outside a scheduler.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<BatchJob>,
    /// The phase the run was in when the document was last written: `local`, `matrix`,
    /// `collectives`, `done`.
    pub phase: String,
    /// The step in progress when the document was written (a node-local case id, `matrix
    /// round 2 of 3`, `collective allreduce`, `reference`): rank 0 writes the document before
    /// each step starts, so whatever ends the job, the document names the step it was in.
    /// None once the run is done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// A host is flagged where a case's value / the cluster median is below this.
    pub threshold: f64,
    /// Every node-local case: the value of each host, the median, each host's ratio.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spread: Vec<Spread>,
    /// Hosts below the threshold, each with the cases that flagged it.
    #[serde(default)]
    pub flagged: Vec<Flagged>,
    /// Inventory fields that differ between hosts.
    #[serde(default)]
    pub differences: Vec<Difference>,
    /// The all-pairs network matrices, one per metric.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub matrices: Vec<Matrix>,
    /// Collective operations over all ranks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub collectives: Vec<Collective>,
    /// Hosts that failed or did not answer in time, with the case and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<Failure>,
    /// `--reference`: the standard tools run over the same ranks (hpcc's HPL and ping-pong,
    /// mpi4py's ping-pong), each beside peakbench's figure over the same links.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub references: Vec<ClusterReference>,
    /// Which pairs of hosts the matrix measures, and why that plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matrix_plan: Option<MatrixSchedule>,
    /// Hosts that are one running machine (the same boot id, and the same machine id where
    /// read), grouped: their ranks share its CPUs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared_machines: Vec<SharedMachine>,
    /// Every host's evidence (its cgroup's limits, qdiscs, boot id, …) read when the run
    /// started, by host name; the findings judge each host's results by its own.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub evidence: std::collections::BTreeMap<String, RunEvidence>,
    /// Rank 0's peak resident memory (`VmHWM`) when the document was last written, bytes: what
    /// gathering the run costs the rank that writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank0_peak_memory_bytes: Option<u64>,
}

/// How the network matrix chose its pairs (`--matrix`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatrixSchedule {
    /// `pairs`, `ring` or `sample:K`.
    pub plan: String,
    /// Why this plan: `--matrix`, or the default for the host count.
    pub chosen: String,
    /// Rounds of disjoint pairs.
    pub rounds: usize,
    /// Pairs of hosts measured (each pair both ways).
    pub pairs: usize,
    /// The seed of `sample:K`'s random peers (the same seed and hosts, the same pairs).
    pub seed: u64,
    /// Whose MPI ping-pong curves (`params.curve`, every size) the document keeps: `the
    /// flagged links` (default) or `every link` (`--matrix-curves`, `--reference`).
    pub curves: String,
}

/// Hosts that report the same boot id: one running kernel, one machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SharedMachine {
    pub hosts: Vec<String>,
    /// `/proc/sys/kernel/random/boot_id`, the same on each.
    pub boot_id: String,
    /// `/etc/machine-id`, where every host of the group read the same one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_id: Option<String>,
}

/// Links a matrix does not compare with the others, and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NotCompared {
    /// Every link with one of these hosts at either end is left out of the median and the flags.
    pub hosts: Vec<String>,
    pub why: String,
}

/// Throughput links with an end on a shared machine, flagged only below a lower threshold.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Loosened {
    /// Every link with one of these hosts at either end.
    pub hosts: Vec<String>,
    /// The most pairs measured at once on their machine in a round.
    pub pairs_at_once: usize,
    /// The run's threshold / `pairs_at_once`: below it × the median such a link is flagged.
    pub threshold: f64,
    pub why: String,
}

/// A host slow on most of its measured links: the host, not the links.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SlowHost {
    pub host: String,
    /// Its flagged links (each direction of a link is one).
    pub slow_links: usize,
    /// Its compared links.
    pub links: usize,
}

/// A standard tool's figure over the whole job beside peakbench's (`--reference`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClusterReference {
    /// What is compared, e.g. "MPI ping-pong latency, 8 B: the fastest link".
    pub metric: String,
    pub unit: String,
    /// peakbench's figure over the same links, where it measures one; how it is taken from
    /// the matrix is in `metric`.
    pub value: Option<f64>,
    /// The tool, its command, its value and `value / the tool's` as `ratio`.
    pub reference: Reference,
}

/// The batch job of a cluster run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BatchJob {
    /// The scheduler that allocated the hosts: `slurm`.
    pub scheduler: String,
    /// The job id (`SLURM_JOB_ID`).
    pub id: String,
    /// The job name (`SLURM_JOB_NAME`; `sbatch`'s script name where not given).
    #[serde(default)]
    pub name: Option<String>,
    /// The partition (`SLURM_JOB_PARTITION`).
    #[serde(default)]
    pub partition: Option<String>,
    /// The allocation's node list as the scheduler writes it (`SLURM_JOB_NODELIST`).
    #[serde(default)]
    pub nodelist: Option<String>,
    /// That list expanded, one host name each, in its order.
    #[serde(default)]
    pub nodes: Vec<String>,
    /// The scheduler's variables that describe the job and the allocation (name → value).
    #[serde(default)]
    pub variables: std::collections::BTreeMap<String, String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClusterHost {
    pub name: String,
    pub ranks: Vec<usize>,
}

/// One node-local case across the hosts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub id: String,
    pub metric: String,
    pub unit: String,
    /// Whether a larger value is better (throughput) or worse (latency, time).
    pub higher_is_better: bool,
    pub median: f64,
    /// Host name → its value.
    pub values: std::collections::BTreeMap<String, f64>,
    /// Host name → its performance relative to the median (value / median, or median / value
    /// where lower is better): below 1 is slower.
    pub ratios: std::collections::BTreeMap<String, f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Flagged {
    pub host: String,
    /// The lowest ratio among the cases that flagged it.
    pub worst_ratio: f64,
    /// The cases whose ratio is below the threshold.
    pub cases: Vec<String>,
}

/// An inventory field that is not the same on every host.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Difference {
    pub field: String,
    /// Host name → its value.
    pub values: std::collections::BTreeMap<String, String>,
}

/// One metric of the network matrix, from host i (client, sender) to host j (server), in one
/// of two forms: dense `values[i][j]` (`null` on the diagonal and where not measured) for up to
/// [`Matrix::DENSE_MAX_HOSTS`] hosts, and above that `cells`, the measured links alone, so that a
/// sampled matrix of N hosts takes O(N) bytes and memory, not O(N²).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Matrix {
    pub metric: String,
    pub unit: String,
    pub higher_is_better: bool,
    /// How the value is counted.
    pub counting: String,
    /// Row and column order.
    pub hosts: Vec<String>,
    /// Dense form: a row per host and a column per host; empty where `cells` holds the links.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<Vec<Option<f64>>>,
    /// Sparse form: every measured link as `[from, to, value]`, indices into `hosts`, sorted;
    /// empty where `values` holds them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cells: Vec<(usize, usize, f64)>,
    /// The median of the measured links.
    pub median: Option<f64>,
    /// Links below the threshold relative to the median, as `[from, to]`.
    #[serde(default)]
    pub flagged: Vec<[String; 2]>,
    /// The link peak from the NIC speed (or `--nic-gbps`), in `unit`, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak: Option<f64>,
    /// The `op` of the per-link results the matrix is made of (`tcp-throughput`, …).
    #[serde(default)]
    pub op: String,
    /// Links left out of the median and the flags (their values stay in `values`), and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_compared: Option<NotCompared>,
    /// Links flagged only further below the median (an end on a shared machine), and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loosened: Option<Loosened>,
    /// Hosts with more than half of their compared links flagged (at least two links): the
    /// host is slow, not each of those links.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slow_hosts: Vec<SlowHost>,
}

/// A matrix's cells by row (from) and column (to), `None` where not measured.
pub type Grid = Vec<Vec<Option<f64>>>;

impl Matrix {
    /// The most hosts a matrix keeps in the dense form: 64 hosts are 4,096 cells, a few tens of
    /// KB of JSON; above that most cells of a sampled matrix are empty.
    pub const DENSE_MAX_HOSTS: usize = 64;

    /// The measured links `(from, to, value)` of `n` hosts in the form their count calls for:
    /// `(values, cells)`, one of them empty. A link given twice keeps its last value.
    pub fn store(
        n: usize,
        links: impl IntoIterator<Item = (usize, usize, f64)>,
    ) -> (Grid, Vec<(usize, usize, f64)>) {
        let links: std::collections::BTreeMap<(usize, usize), f64> = links
            .into_iter()
            .filter(|&(i, j, _)| i < n && j < n)
            .map(|(i, j, v)| ((i, j), v))
            .collect();
        if n <= Self::DENSE_MAX_HOSTS {
            let mut values = vec![vec![None; n]; n];
            for ((i, j), v) in links {
                values[i][j] = Some(v);
            }
            (values, Vec::new())
        } else {
            (
                Vec::new(),
                links.into_iter().map(|((i, j), v)| (i, j, v)).collect(),
            )
        }
    }

    /// Every measured link as `(from, to, value)`, row by row, whichever form holds them.
    pub fn measured(&self) -> impl Iterator<Item = (usize, usize, f64)> + '_ {
        let dense = self.values.iter().enumerate().flat_map(|(i, row)| {
            row.iter()
                .enumerate()
                .filter_map(move |(j, v)| v.map(|v| (i, j, v)))
        });
        dense.chain(self.cells.iter().copied())
    }

    /// The dense grid of the cells, for a matrix of at most [`Self::DENSE_MAX_HOSTS`] hosts
    /// (the heat map); `None` above. Cells outside the host list are left out.
    pub fn grid(&self) -> Option<Grid> {
        let n = self.hosts.len();
        if n > Self::DENSE_MAX_HOSTS {
            return None;
        }
        let mut grid = vec![vec![None; n]; n];
        for (i, j, v) in self.measured() {
            if i < n && j < n {
                grid[i][j] = Some(v);
            }
        }
        Some(grid)
    }
}

/// One collective at one message size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Collective {
    pub op: String,
    pub message_bytes: u64,
    pub ranks: usize,
    /// Median time of one operation, microseconds (slowest rank of each repetition).
    pub time_us: f64,
    /// message_bytes / time.
    pub algbw_gbs: f64,
    /// algbw × the operation's bus factor (nccl-tests' definition).
    pub busbw_gbs: f64,
    pub samples_us: Vec<f64>,
}

/// A host that failed a case or did not answer within the case's deadline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    pub host: String,
    pub rank: usize,
    /// The case (or phase step) it was in.
    pub case: String,
    pub why: String,
}

/// Whether a larger value of this metric is better: everything but latencies and times.
pub fn higher_is_better(metric: &str, unit: &str) -> bool {
    !(metric.contains("latency")
        || metric.contains("time")
        || matches!(unit, "ns" | "us" | "µs" | "ms" | "s"))
}

/// RFC 3339 UTC timestamp of now, to the second.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

#[cfg(test)]
impl BenchResult {
    /// A result with only what tests of the exporters and comparisons look at.
    pub fn example(id: &str, unit: &str, samples: Vec<f64>) -> BenchResult {
        let stats = crate::stats::Summary::of(&samples).expect("finite samples");
        BenchResult {
            id: id.to_string(),
            host: "h".into(),
            subsystem: Subsystem::Cpu,
            op: "op".into(),
            params: Params::default(),
            metric: "throughput".into(),
            unit: unit.into(),
            value: stats.median,
            stats,
            samples,
            counting: String::new(),
            extra: Vec::new(),
            latency_ns: None,
            peak: None,
            efficiency: None,
            reference: None,
            other_references: Vec::new(),
            series: Vec::new(),
            warnings: Vec::new(),
            evidence: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field set (a struct literal, so a new field fails to compile here until listed).
    fn every_field() -> Params {
        let mut other = serde_json::Map::new();
        other.insert("region_bytes".into(), 4096.into());
        other.insert("scaling".into(), "strong: split".into());
        Params {
            threads: Some(2),
            scaling: Some("strong".into()),
            pinned: Some(true),
            precision: Some("f64".into()),
            isa: Some("avx2".into()),
            fma: Some(true),
            n: Some(1000),
            block_bytes: Some(4096),
            working_set_bytes: Some(1 << 30),
            file_bytes: Some(1 << 30),
            queue_depth: Some(8),
            engine: Some("io_uring".into()),
            direct: Some(true),
            protocol: Some("tcp".into()),
            message_bytes: Some(1),
            streams: Some(4),
            duration_s: Some(1.0),
            other,
        }
    }

    #[test]
    fn fields_names_every_parameter() {
        let value = serde_json::to_value(every_field()).unwrap();
        let mut keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut fields = Params::FIELDS.to_vec();
        keys.sort();
        fields.sort();
        assert_eq!(keys, fields);
    }

    #[test]
    fn flat_parameters_go_back_to_their_places_and_bookkeeping_is_dropped() {
        let params = every_field();
        let flat = params.flat();
        assert_eq!(flat["region_bytes"], 4096);
        assert_eq!(flat["threads"], 2);
        assert_eq!(Params::from_flat(&flat), params);
        let kept = params.without_bookkeeping();
        assert_eq!(kept.other.len(), 1);
        assert_eq!(flat["other.scaling"], "strong: split");
        assert_eq!(kept.working_set_bytes, Some(1 << 30));
        assert_eq!(param_role("bytes_moved"), ParamRole::Bookkeeping);
        assert_eq!(param_role("working_set_bytes"), ParamRole::Derived);
        assert_eq!(param_role("threads"), ParamRole::Setting);
        // Measured per case: as a setting it split a latency sweep's line wherever the kernel
        // backed two sizes with different shares of huge pages (tests/report.rs saw 1 point).
        assert_eq!(param_role("huge_page_share"), ParamRole::Bookkeeping);
    }

    #[test]
    fn two_declarations_of_one_parameter_agree() {
        for a in PARAMS.iter().flat_map(|list| list.iter()) {
            for b in PARAMS.iter().flat_map(|list| list.iter()) {
                if a.key == b.key {
                    assert_eq!(a, b, "two workloads declare {} differently", a.key);
                }
            }
        }
    }
}
