//! Rank 0's side of the run: the inventories gathered, the document started, the phases in
//! order, the references, the end; a leader's counterpart ([`Leader::member`]); and rank 0's
//! analysis after each step.

use std::collections::{BTreeMap, HashMap};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::super::{Phase, analysis, job};
use super::leader::Leader;
use super::matrix::matrices;
use super::messages::{Cases, Inventory, Step};
use super::transport::{SETUP, TAG, far};
use crate::net::auth::{Key, Nonce};
use crate::plan::Case;
use crate::report::Format;
use crate::result::{BenchResult, Cluster, RunStatus};
use crate::session::{self, HtmlReport, Session};

impl Leader<'_> {
    /// Rank 0: gathers, decides, writes.
    pub(super) fn root(&mut self, plan: crate::plan::Plan, start: Instant) -> Result<ExitCode> {
        let comm = self.comm;
        let others: Vec<usize> = self.leaders[1..].to_vec();
        let (inventories, missing) = comm.gather::<Inventory>(&others, start + SETUP);
        self.start_document(&plan, inventories.into_values())?;
        if !missing.is_empty() {
            self.give_up(&missing, "setup", "sent no inventory in time");
        }
        self.save();
        let list = Cases {
            cases: self.case_deadlines(&plan),
            key: Nonce::random().0.to_vec(),
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
        hosts.insert(self.ctx.host.hostname.clone(), self.ctx.host.clone());
        peaks.insert(self.ctx.host.hostname.clone(), self.ctx.peaks.clone());
        for inventory in inventories {
            peaks.insert(inventory.host.hostname.clone(), inventory.peaks);
            hosts.insert(inventory.host.hostname.clone(), inventory.host);
        }
        let differences = analysis::differences(&hosts);
        self.session().report.hosts = hosts;
        self.session().report.config["peaks"] = serde_json::to_value(&peaks)?;
        self.session().report.cluster = Some(Cluster {
            ranks: self.comm.size,
            hosts: self.layout.hosts.clone(),
            job: job::from_env(std::env::vars()),
            phase: "setup".into(),
            threshold: self.args.threshold,
            differences,
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
        session.judge(&self.args.output.history.db)?;
        let format = if self.args.output.json {
            Format::Json
        } else if self.args.output.csv {
            Format::Csv
        } else {
            Format::Table
        };
        let printed = session.print(format);
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
                let rows =
                    super::super::reference::compare(&self.session().report.results, &hpcc, mpi4py);
                self.cluster().references = rows;
            }
            Err(e) => eprintln!("peakbench cluster: --reference: {e:#}"),
        }
        self.save();
    }

    /// A leader other than rank 0: sends, runs what rank 0 says, sends again.
    pub(super) fn member(&mut self, plan: crate::plan::Plan, start: Instant) -> Result<ExitCode> {
        let comm = self.comm;
        let inventory = Inventory {
            host: self.ctx.host.clone(),
            peaks: self.ctx.peaks.clone(),
        };
        comm.send(0, TAG, &inventory, start + SETUP);
        let list: Cases = comm.recv_root(far(), "list of cases");
        self.key = Some(Key::from_bytes(&list.key)?);
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
        let matrices = matrices(&report.results, &names, threshold, nic_gbps);
        let cluster = report.cluster.as_mut().expect("a cluster document");
        cluster.spread = spread;
        cluster.flagged = flagged;
        cluster.matrices = matrices;
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
