//! Rank 0's side of the run: the inventories gathered, the document started, the phases in
//! order, the references, the end; a leader's counterpart ([`Leader::member`]); and rank 0's
//! analysis after each step.

use std::collections::{BTreeMap, HashMap};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::super::schedule::{DEFAULT_SAMPLE, PAIRS_UP_TO};
use super::super::{Phase, analysis, job};
use super::fault::fault;
use super::leader::Leader;
use super::matrix::matrices;
use super::messages::{CaseList, Inventory, Step};
use super::transport::{SETUP, TAG, far};
use crate::net::auth::{Key, Nonce};
use crate::plan::Case;
use crate::result::{BenchResult, Cluster, MatrixSchedule, RunStatus};
use crate::session::{self, HtmlReport, Session};

impl Leader<'_> {
    /// Rank 0: gathers, decides, writes.
    pub(super) fn root(&mut self, plan: crate::plan::Plan, start: Instant) -> Result<ExitCode> {
        let comm = self.comm;
        let others: Vec<usize> = self.leaders[1..].to_vec();
        // A host that never joins (its node down, its rank never started) is named after the
        // setup's deadline, or `--case-deadline` if shorter; the hosts that joined are in the
        // document.
        let joined = match self.args.case_deadline {
            Some(d) => (start + SETUP).min(Instant::now() + d),
            None => start + SETUP,
        };
        let (inventories, missing) = comm.gather::<Inventory>(&others, joined);
        self.seed = u64::from_le_bytes(Nonce::random().0[..8].try_into().expect("8 bytes"));
        self.start_document(&plan, inventories.into_values())?;
        if !missing.is_empty() {
            self.give_up(&missing, "setup", "sent no inventory in time");
        }
        self.save();
        let list = CaseList {
            cases: self.case_deadlines(&plan),
            key: Nonce::random().0.to_vec(),
            matrix_seed: self.seed,
        };
        self.key = Some(Key::from_bytes(&list.key)?);
        for &r in &others {
            comm.send(r, TAG, &list, far());
        }
        let mut cases: HashMap<String, Box<dyn Case>> =
            plan.cases.into_iter().map(|c| (c.spec().id, c)).collect();
        for phase in &self.args.phases {
            self.cluster().phase = phase.name().into();
            self.save();
            match phase {
                Phase::Local => self.local(&mut cases, &list),
                Phase::Matrix => self.matrix(),
                Phase::Collectives => self.collectives(),
            }
        }
        drop(cases);
        if self.args.runner.reference {
            self.references();
        }
        // Every rank, leaders or not, waits for this word to end.
        for r in 1..comm.size {
            comm.send(r, TAG, &Step::Done, far());
        }
        comm.barrier(Instant::now() + SETUP);
        self.finish_document()
    }

    /// Rank 0: the document of the run, with every host's inventory and peaks (this one's and
    /// the `inventories` gathered) and the differences between the hosts.
    fn start_document(
        &mut self,
        plan: &crate::plan::Plan,
        inventories: impl Iterator<Item = Inventory>,
    ) -> Result<()> {
        let file = session::output_file(&self.args.output)?;
        let mut warnings: Vec<String> = plan.notes.clone();
        warnings.retain(|w| !w.is_empty());
        let mut config = plan.config.clone();
        config["cluster"] = serde_json::json!({
            "phases": self.args.phases,
            "threshold": self.args.threshold,
            "matrix_duration_s": self.args.matrix_duration.as_secs_f64(),
        });
        self.session = Some(Session::start(self.ctx, config, warnings, file)?);
        let mut hosts = BTreeMap::new();
        let mut peaks = BTreeMap::new();
        let mut evidence = BTreeMap::new();
        hosts.insert(self.ctx.host.hostname.clone(), self.ctx.host.clone());
        peaks.insert(self.ctx.host.hostname.clone(), self.ctx.peaks.clone());
        if let Some(mine) = self.session().report.evidence.clone() {
            evidence.insert(self.ctx.host.hostname.clone(), mine);
        }
        for inventory in inventories {
            let name = inventory.host.hostname.clone();
            peaks.insert(name.clone(), inventory.peaks);
            hosts.insert(name.clone(), inventory.host);
            evidence.insert(name, inventory.evidence);
        }
        let differences = analysis::differences(&hosts);
        let shared_machines = analysis::shared_machines(&hosts, &evidence);
        for group in &shared_machines {
            eprintln!(
                "peakbench cluster: hosts {} are one machine (boot id {}): the links between \
                 them are not compared in the matrices timed by a ping-pong",
                group.hosts.join(", "),
                group.boot_id
            );
        }
        let matrix_plan = self.args.phases.contains(&Phase::Matrix).then(|| {
            let (plan, rounds) = self.schedule();
            let n = self.leaders.len();
            MatrixSchedule {
                plan: plan.text(),
                chosen: match self.args.matrix {
                    Some(_) => "--matrix".into(),
                    None => format!(
                        "the default for {n} hosts: every pair up to {PAIRS_UP_TO} hosts, \
                         sample:{DEFAULT_SAMPLE} above"
                    ),
                },
                rounds: rounds.len(),
                pairs: rounds.iter().map(Vec::len).sum(),
                seed: self.seed,
                curves: if self.keep_curves() {
                    "every link".into()
                } else {
                    "the flagged links".into()
                },
            }
        });
        self.session().report.hosts = hosts;
        self.session().report.config["peaks"] = serde_json::to_value(&peaks)?;
        self.session().report.cluster = Some(Cluster {
            ranks: self.comm.size,
            hosts: self.layout.hosts.clone(),
            job: job::from_env(std::env::vars()),
            phase: "setup".into(),
            threshold: self.args.threshold,
            differences,
            matrix_plan,
            shared_machines,
            evidence,
            ..Cluster::default()
        });
        Ok(())
    }

    /// The node-local cases rank 0 planned, in order, each with its deadline in seconds
    /// (`--case-deadline`, else 3 × its estimate + 30 s); none without the local phase.
    fn case_deadlines(&self, plan: &crate::plan::Plan) -> Vec<(String, f64)> {
        if !self.args.phases.contains(&Phase::Local) {
            return Vec::new();
        }
        plan.cases
            .iter()
            .map(|c| {
                let deadline = self.args.case_deadline.unwrap_or(crate::plan::guess::sum([
                    crate::plan::guess::times(c.estimate(self.ctx), 3),
                    Duration::from_secs(30),
                ]));
                (c.spec().id, deadline.as_secs_f64())
            })
            .collect()
    }

    /// Rank 0, every rank done: the document finished and written, printed, summarised,
    /// stored in the history and, with `--html`, written as a report.
    fn finish_document(&mut self) -> Result<ExitCode> {
        self.cluster().phase = "done".into();
        self.cluster().step = None;
        let mut session = self.session.take().expect("rank 0 has the document");
        session.finish(RunStatus::Complete)?;
        session.add_findings(&self.args.output.history.db)?;
        let printed = session.print(crate::report::for_stdout(&self.args.output));
        if let Some(path) = session.output_path() {
            eprintln!("results written to {}", path.display());
        }
        print_summary(&session.report);
        let run_id = crate::history::store_run(&self.args.output.history, &session.report);
        let html = match &self.html {
            Some(path) => HtmlReport::At(path.clone()),
            None => HtmlReport::None,
        };
        session::write_html_report(&html, run_id, &session.report, &self.args.output);
        printed?;
        Ok(ExitCode::SUCCESS)
    }

    /// Rank 0, `--reference`: hpcc over the job's hosts and ranks, as a second mpirun job
    /// with the job's launch parameters, while the other ranks sleep between probes; its
    /// figures beside the matrix's (see [`super::super::reference`]).
    pub(super) fn references(&mut self) {
        self.cluster().phase = "reference".into();
        self.begin("reference");
        let hosts: Vec<(String, usize)> = self
            .layout
            .hosts
            .iter()
            .map(|h| (h.name.clone(), h.ranks.len()))
            .collect();
        let env = std::env::vars_os().map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        });
        let mca = super::super::reference::launch_parameters(env);
        eprintln!(
            "peakbench cluster: --reference: hpcc over the same {} ranks",
            self.comm.size
        );
        let run = || -> anyhow::Result<_> {
            let hpcc = super::super::reference::run_hpcc(&hosts, &mca)?;
            let mpi4py = match super::super::reference::find_mpi4py() {
                Ok(python) => {
                    eprintln!(
                        "peakbench cluster: --reference: mpi4py's ping-pong ({})",
                        python.display()
                    );
                    super::super::reference::run_mpi4py(&hosts, &mca, &python)?
                }
                Err(why) => super::super::reference::Mpi4py::absent(why),
            };
            Ok((hpcc, mpi4py))
        };
        match run() {
            Ok((hpcc, mpi4py)) => {
                let rows = super::super::reference::against_tools(
                    &self.session().report.results,
                    &hpcc,
                    mpi4py,
                );
                self.cluster().references = rows;
            }
            Err(e) => eprintln!("peakbench cluster: --reference: {e:#}"),
        }
        self.save();
    }

    /// A leader other than rank 0: sends, runs what rank 0 says, sends again.
    pub(super) fn member(&mut self, plan: crate::plan::Plan, start: Instant) -> Result<ExitCode> {
        let comm = self.comm;
        fault(&self.layout.hosts[self.me].name, "setup");
        let inventory = Inventory {
            host: self.ctx.host.clone(),
            peaks: self.ctx.peaks.clone(),
            evidence: crate::evidence::RunEvidence::read(),
        };
        comm.send(0, TAG, &inventory, start + SETUP);
        let list: CaseList = comm.recv_root(far(), "list of cases");
        self.key = Some(Key::from_bytes(&list.key)?);
        self.seed = list.matrix_seed;
        let mut cases: HashMap<String, Box<dyn Case>> =
            plan.cases.into_iter().map(|c| (c.spec().id, c)).collect();
        for phase in &self.args.phases {
            match phase {
                Phase::Local => self.local(&mut cases, &list),
                Phase::Matrix => self.matrix(),
                Phase::Collectives => self.collectives(),
            }
        }
        drop(cases);
        let _: Step = comm.recv_root(far(), "end of the run");
        comm.barrier(Instant::now() + SETUP);
        Ok(ExitCode::SUCCESS)
    }

    /// Rank 0: the spread of the node-local cases, the flagged hosts, the matrices.
    pub(super) fn analyse(&mut self) {
        let threshold = self.args.threshold;
        let nic_gbps = self.args.peak.nic_gbps;
        let names: Vec<String> = self.layout.hosts.iter().map(|h| h.name.clone()).collect();
        let (_, rounds) = self.schedule();
        let report = &mut self.session().report;
        let local: Vec<BenchResult> = report
            .results
            .iter()
            .filter(|r| {
                r.params.other.get("peer").is_none() && r.params.other.get("ranks").is_none()
            })
            .cloned()
            .collect();
        let spread = analysis::spread(&local);
        let flagged = analysis::flagged(&spread, threshold);
        let cluster = report.cluster.as_mut().expect("a cluster document");
        // Each host of a shared machine, with the most pairs measured at once there in a round.
        let mut shared = BTreeMap::new();
        for group in &cluster.shared_machines {
            let on = |h: usize| group.hosts.contains(&names[h]);
            let at_once = rounds
                .iter()
                .map(|pairs| pairs.iter().filter(|&&(a, b)| on(a) || on(b)).count())
                .max()
                .unwrap_or(1);
            for h in &group.hosts {
                shared.insert(h.clone(), at_once.max(1));
            }
        }
        let matrices = matrices(&report.results, &names, threshold, nic_gbps, &shared);
        cluster.spread = spread;
        cluster.flagged = flagged;
        cluster.matrices = matrices;
        if !self.keep_curves() {
            self.curves_of_flagged_links();
        }
    }

    /// Whether every link's ping-pong curve stays in the document: `--matrix-curves`, or
    /// `--reference` (which compares each link's best batch at 2 MiB with hpcc's).
    pub(super) fn keep_curves(&self) -> bool {
        self.args.matrix_curves || self.args.runner.reference
    }

    /// Rank 0: the per-link curves (`params.curve` of the MPI latency results) stay in the
    /// document only for the links a matrix flags; the others are kept aside, and put back if
    /// a later round's median flags their link. The headline figures of every link stay.
    fn curves_of_flagged_links(&mut self) {
        let report = &mut self
            .session
            .as_mut()
            .expect("rank 0 has the document")
            .report;
        let cluster = report.cluster.as_ref().expect("a cluster document");
        let flagged: std::collections::HashSet<(&str, &str)> = cluster
            .matrices
            .iter()
            .flat_map(|m| m.flagged.iter())
            .flat_map(|[a, b]| [(a.as_str(), b.as_str()), (b.as_str(), a.as_str())])
            .collect();
        for r in report.results.iter_mut() {
            let Some(peer) = r.params.peer() else {
                continue;
            };
            let key = format!("{}/{}", r.host, r.id);
            if flagged.contains(&(r.host.as_str(), peer)) {
                if let Some(curve) = self.curves.remove(&key) {
                    r.params.other.insert("curve".into(), curve);
                }
            } else if let Some(curve) = r.params.other.remove("curve") {
                self.curves.insert(key, curve);
            }
        }
    }
}

/// The hosts' lines after the run: the flagged hosts, the differences, the slow links.
pub(super) fn print_summary(report: &crate::result::Report) {
    let Some(cluster) = &report.cluster else {
        return;
    };
    for f in &cluster.flagged {
        eprintln!(
            "slow host: {} at {:.2} × the cluster median in {}",
            f.host,
            f.worst_ratio,
            f.cases.join(", ")
        );
    }
    for d in &cluster.differences {
        let values: Vec<String> = d.values.iter().map(|(h, v)| format!("{h}: {v}")).collect();
        eprintln!("hosts differ in {}: {}", d.field, values.join("; "));
    }
    for m in &cluster.matrices {
        for [a, b] in &m.flagged {
            eprintln!("slow link: {a} → {b} in {}", m.metric);
        }
        for h in &m.slow_hosts {
            eprintln!(
                "slow host in {}: {} ({} of its {} links flagged: the host, not the links)",
                m.metric, h.host, h.slow_links, h.links
            );
        }
        if let Some(left_out) = &m.not_compared {
            eprintln!(
                "{}: links of {} not compared: one machine's CPUs shared (cluster.shared_machines)",
                m.metric,
                left_out.hosts.join(", ")
            );
        }
    }
    for f in &cluster.failures {
        eprintln!("failed: {} on {}: {}", f.case, f.host, f.why);
    }
    for r in &cluster.references {
        let tool = &r.reference;
        let theirs = match tool.value {
            Some(v) => format!("{v:.3} {}", r.unit),
            None => tool.note.clone().unwrap_or_default(),
        };
        let ours = match r.value {
            Some(v) => format!("peakbench {v:.3} {}", r.unit),
            None => "peakbench: none".into(),
        };
        let ratio = tool
            .ratio
            .map(|x| format!(" (ratio {x:.3})"))
            .unwrap_or_default();
        eprintln!("{}: {ours}, {} {theirs}{ratio}", r.metric, tool.tool);
    }
}
