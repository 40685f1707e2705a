//! Causes: what the machine imposed on a result while it ran, read from the evidence the run
//! stored, each with the bound it puts on the result where that can be computed.
//!
//! A cause is a [`Candidate`] until the verdict is known; then only those that fit it are kept
//! (a limit that holds the figure down for `below`, noise for `unstable`, a cache for
//! `above-limit`). Nothing is named without evidence read on the machine during the run.
//!
//! - [`cpu`]: the CPU quota, the cpuset, other processes, steal, SMT, the clock, thermal events;
//! - [`memory`]: the memory limit, transparent huge pages, NUMA;
//! - [`disk`]: the I/O throttle on the file's device, the page cache, the queue, the device;
//! - [`net`]: the shaping qdiscs on the route to the server, its MTU, the receiver's mode;
//! - [`placement`]: where a guest's vCPUs sat for the case, against the run and the past.

mod cpu;
mod disk;
mod memory;
mod model;
mod net;
mod placement;
mod topology;

use crate::evidence::{CaseEvidence, RunEvidence};
use crate::result::{BenchResult, Cause, Evidence, Report};
use crate::sysinfo::SysInfo;

pub(super) use model::{above_peak, at_fastest_clock, at_own_lower_clock};
pub(super) use placement::against_past as placement_against_past;

/// A cause before the verdict: what it is and which verdicts it can explain.
pub(super) struct Candidate {
    pub cause: Cause,
    /// The share of the result's work it leaves (0.5 for a quota of half the CPU time the
    /// threads need), where it can be computed.
    pub factor: Option<f64>,
    /// It holds the figure at an imposed limit: the figure is the limit's, not the hardware's.
    pub binds: bool,
    /// It can make a figure lower than the hardware's without an exact bound.
    pub slows: bool,
    /// It is a setting of this machine (a virtual disk, THP off), named only where the figure
    /// is below the hardware's physics: the result's own past and the standard tool ran with
    /// the same settings, so it cannot explain a gap to those.
    pub structural: bool,
    /// It can spread the repetitions.
    pub noisy: bool,
    /// It can make a figure higher than the hardware can (a cache).
    pub inflates: bool,
}

impl Candidate {
    fn new(kind: &str, text: String, evidence: Vec<Evidence>, remedy: &str) -> Candidate {
        Candidate {
            cause: Cause {
                kind: kind.to_string(),
                value: None,
                unit: String::new(),
                text,
                evidence,
                bound: None,
                explains: None,
                remedy: remedy.to_string(),
            },
            factor: None,
            binds: false,
            slows: false,
            structural: false,
            noisy: false,
            inflates: false,
        }
    }

    fn value(mut self, value: f64, unit: &str) -> Candidate {
        self.cause.value = Some(value);
        self.cause.unit = unit.to_string();
        self
    }
}

/// Every candidate cause of one result.
pub(super) struct Candidates {
    pub causes: Vec<Candidate>,
}

impl Candidates {
    /// Whether an imposed limit holds the figure down.
    pub(super) fn holds(&self) -> bool {
        self.causes.iter().any(|c| c.binds)
    }
}

/// A figure over this multiple of a limit's bound was not held by the limit.
const ABOVE_BOUND: f64 = 1.10;

/// What judging one result needs: the result, its run and its evidence.
pub(super) struct Scene<'a> {
    pub report: &'a Report,
    /// The inventory of the host that measured `r` (in a cluster run, its own).
    pub host: &'a SysInfo,
    pub r: &'a BenchResult,
    pub run: &'a RunEvidence,
    pub case: &'a CaseEvidence,
}

impl Scene<'_> {
    /// The threads the case asked for (1 where it names none).
    fn threads(&self) -> usize {
        self.r.params.threads.unwrap_or(1).max(1)
    }

    /// Logical CPUs online when the run started.
    fn cpus(&self) -> f64 {
        let online = self.run.cpus_online.max(self.host.cpu.logical_cpus);
        online.max(1) as f64
    }

    /// The peak the result is compared with, in its unit.
    fn peak(&self) -> Option<f64> {
        self.r.peak.as_ref().map(|p| p.value).filter(|v| *v > 0.0)
    }
}

/// The evidence of the run on the host that measured `r`: in a cluster run each host's own
/// (`cluster.evidence`), else the run's (`evidence`, read on `host`). None where that host's
/// was not read (a cluster document of a peakbench before per-host evidence).
pub(super) fn run_evidence<'a>(report: &'a Report, r: &BenchResult) -> Option<&'a RunEvidence> {
    let own = report
        .cluster
        .as_ref()
        .and_then(|c| c.evidence.get(&r.host));
    match own {
        Some(e) => Some(e),
        None if r.host.is_empty() || r.host == report.host.hostname => report.evidence.as_ref(),
        None => None,
    }
}

/// The candidate causes of `r`, from the evidence its run stored (none without evidence):
/// each host's results by that host's evidence and inventory.
pub(super) fn of_result(report: &Report, r: &BenchResult) -> Candidates {
    let (Some(run), Some(case)) = (run_evidence(report, r), r.evidence.as_ref()) else {
        return Candidates { causes: Vec::new() };
    };
    let scene = Scene {
        report,
        host: report.inventory(&r.host).unwrap_or(&report.host),
        r,
        run,
        case,
    };
    let mut causes = Vec::new();
    cpu::causes(&scene, &mut causes);
    model::model_wrong(&scene, &mut causes);
    model::sibling_placement(&scene, &mut causes);
    model::shared_cores_case(&scene, &mut causes);
    placement::causes(&scene, &mut causes);
    memory::causes(&scene, &mut causes);
    disk::causes(&scene, &mut causes);
    net::causes(&scene, &mut causes);
    for c in &mut causes {
        if c.cause.bound.is_none()
            && let (Some(factor), Some(peak)) = (c.factor, scene.peak())
        {
            c.cause.bound = Some(peak * factor);
        }
        // A limit the figure passed did not hold it.
        if c.binds
            && let Some(bound) = c.cause.bound
            && super::performance(r, bound) > ABOVE_BOUND
        {
            c.binds = false;
        }
    }
    Candidates { causes }
}

/// What concerns the run as a whole: a hypervisor, hosts that are one machine.
pub(super) fn run_causes(report: &Report) -> Vec<Cause> {
    let mut causes = Vec::new();
    if let Some(vendor) = report.host.hypervisor.value.as_deref()
        && vendor != "none"
    {
        causes.push(Cause {
            kind: "hypervisor".into(),
            value: None,
            unit: String::new(),
            text: format!(
                "the run is a guest of the {vendor} hypervisor: other guests may share its cores, \
                 caches, memory bandwidth and disk (the steal time of each case says how much of \
                 its CPUs they took)"
            ),
            evidence: vec![Evidence::new(
                report
                    .host
                    .hypervisor
                    .source
                    .clone()
                    .unwrap_or_else(|| "sysinfo".into()),
                vendor,
            )],
            bound: None,
            explains: None,
            remedy: "compare runs by alternating them and reading medians; ask for dedicated \
                     (pinned) vCPUs for figures of the hardware"
                .into(),
        });
    }
    causes.extend(shared_machines(report));
    causes.extend(model::shared_fraction(report));
    causes.extend(model::shared_cores(report));
    causes.extend(model::clock_spread(report));
    causes.extend(topology::c2c_causes(report));
    causes.extend(placement::run_changes(report));
    causes.extend(super::boundaries::cache_sizes_wrong(report));
    causes
}

/// Hosts of a cluster run that report the same boot id: one running kernel, so their ranks
/// share CPUs and their timings are not independent links.
fn shared_machines(report: &Report) -> Option<Cause> {
    let mut by_boot: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for (name, host) in &report.hosts {
        if let Some(boot) = host.boot_id.as_deref() {
            by_boot.entry(boot).or_default().push(name);
        }
    }
    let groups: Vec<(&str, Vec<&str>)> = by_boot.into_iter().filter(|(_, h)| h.len() > 1).collect();
    if groups.is_empty() {
        return None;
    }
    let text = groups
        .iter()
        .map(|(_, hosts)| hosts.join(", "))
        .collect::<Vec<_>>()
        .join("; ");
    Some(Cause {
        kind: "shared-machine".into(),
        value: Some(groups.iter().map(|(_, h)| h.len()).sum::<usize>() as f64),
        unit: "hosts".into(),
        text: format!(
            "hosts {text} are one running machine (the same boot id): their ranks share its \
             CPUs, so the matrix links between them and their spread are not independent (the \
             matrices timed by a ping-pong leave their links out: cluster.shared_machines, \
             matrices[].not_compared)"
        ),
        evidence: groups
            .iter()
            .map(|(boot, hosts)| {
                Evidence::new(
                    "/proc/sys/kernel/random/boot_id of each host",
                    format!("{boot} on {}", hosts.join(", ")),
                )
            })
            .collect(),
        bound: None,
        explains: None,
        remedy: "run one rank per machine for figures of links and hosts; namespaces and \
                 containers on one kernel test the software, not the fleet"
            .into(),
    })
}

/// A value for cause texts: a whole number as one ("2"), else 3 significant digits.
fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        crate::units::format_value(v)
    }
}
