//! The MPI side of `peakbench cluster run`: the ranks, how they wait, and the phases.
//!
//! Every message is a JSON value sent point to point; a rank that waits for one probes for it
//! between short sleeps ([`POLL`]) instead of blocking in MPI, whose waits spin by default: the
//! idle ranks of a host would otherwise steal cores from the measuring one. Rank 0 is the only
//! rank that gathers: each step (the start of a case, its results, a matrix round) is a gather
//! at rank 0 with a deadline and, where all must start together, an answer from rank 0 to each
//! rank. A rank that does not answer in time is named in the document with the case it was in,
//! the document is written, and the job ends with `MPI_Abort`.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow};
use mpi::environment::Universe;
use mpi::request::{Request, Scope};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::analysis;
use super::schedule;
use super::{ClusterRunArgs, Phase, plan_local};
use crate::error::{Exit, UsageError};
use crate::net::auth::{Key, Nonce};
use crate::net::proto::{ReceiverWait, TestSpec};
use crate::net::server::LocalServer;
use crate::net::{Mode, NetCase, Proto, Target};
use crate::peak::Peaks;
use crate::plan::{Case, Context};
use crate::report::Format;
use crate::result::{
    BenchResult, Cluster, ClusterHost, Failure, Matrix, Params, RunStatus, Subsystem,
};
use crate::session::{self, HtmlReport, Session};
use crate::sysinfo::SysInfo;

/// What a handler of a stuck step returns: nothing (it ends the job), as `!` can't be named in
/// a closure's type on stable Rust.
type Never = std::convert::Infallible;

/// How long a waiting rank sleeps between two probes.
const POLL: Duration = Duration::from_micros(500);
/// Control messages between rank 0 and the others (in order between any two ranks).
const TAG: i32 = 11;
/// Messages between the two hosts of a pair.
const TAG_PAIR: i32 = 12;
/// The MPI ping-pong's own messages.
const TAG_PING: i32 = 13;
/// "I am alive and was asked to stop": each rank's answer to SIGTERM or Ctrl-C (see
/// [`Leader::stopped`]).
const TAG_STOP: i32 = 14;
/// How long rank 0, asked to stop, waits for every other rank to say it is alive: well within
/// the time Open MPI leaves between the SIGTERM and the SIGKILL with which it ends a job.
const STOP_GRACE: Duration = Duration::from_millis(600);
/// The time the ranks have to say hello, and the setup steps.
const SETUP: Duration = Duration::from_secs(120);

/// The world and this rank.
struct Comm {
    world: SimpleCommunicator,
    rank: usize,
    size: usize,
    /// Whether this rank told rank 0 that it was asked to stop.
    told_stop: std::cell::Cell<bool>,
}

impl Comm {
    fn process(&self, rank: usize) -> mpi::topology::Process<'_> {
        self.world.process_at_rank(rank as i32)
    }

    /// A rank other than 0 that was asked to stop (SIGTERM: mpirun ending the job because a
    /// rank died, or because it was itself stopped) tells rank 0, once, that it is alive, so
    /// that rank 0 can name the ranks that are not. Called from every wait.
    fn tell_stop(&self) {
        if self.rank == 0 || self.told_stop.get() || !crate::interrupt::requested() {
            return;
        }
        self.told_stop.set(true);
        // One byte: sent eagerly, the call returns without rank 0 receiving it.
        self.process(0).send_with_tag(&[1u8][..], TAG_STOP);
    }

    /// Sends `value` to `to`; a send that cannot complete before `deadline` (the peer gone)
    /// ends the job.
    fn send<T: Serialize>(&self, to: usize, tag: i32, value: &T, deadline: Instant) {
        self.send_or(to, tag, value, deadline, &mut || {
            eprintln!(
                "peakbench cluster: rank {}: rank {to} took no message within its deadline; \
                 ending the job",
                self.rank
            );
            self.world.abort(Exit::Failed as i32)
        });
    }

    /// Sends `value` to `to`, testing between sleeps; a send that cannot complete before
    /// `deadline` (the peer gone: even a small message waits for a peer that never made its
    /// connection) calls `stuck`, the request still pending.
    fn send_or<T: Serialize>(
        &self,
        to: usize,
        tag: i32,
        value: &T,
        deadline: Instant,
        stuck: &mut dyn FnMut() -> Never,
    ) {
        let bytes = serde_json::to_vec(value).expect("messages serialise");
        let process = self.process(to);
        mpi::request::scope(|scope| {
            let mut request = process.immediate_send_with_tag(scope, &bytes[..], tag);
            loop {
                match request.test() {
                    Ok(_) => return,
                    Err(pending) => request = pending,
                }
                self.tell_stop();
                if Instant::now() > deadline || (self.rank == 0 && crate::interrupt::requested()) {
                    stuck();
                }
                std::thread::sleep(POLL);
            }
        });
    }

    /// Whether a message from `from` has arrived; if so, receives it.
    fn try_recv<T: DeserializeOwned>(&self, from: usize, tag: i32) -> Option<Result<T>> {
        let process = self.process(from);
        process.immediate_probe_with_tag(tag)?;
        let (bytes, _) = process.receive_vec_with_tag::<u8>(tag);
        Some(
            serde_json::from_slice(&bytes)
                .with_context(|| format!("a message from rank {from} does not parse")),
        )
    }

    /// Waits for a message from `from` until `deadline`, sleeping between probes.
    fn recv<T: DeserializeOwned>(&self, from: usize, tag: i32, deadline: Instant) -> Option<T> {
        loop {
            if let Some(message) = self.try_recv(from, tag) {
                return Some(message.unwrap_or_else(|e| self.fatal(&format!("{e:#}"))));
            }
            self.tell_stop();
            if Instant::now() > deadline || (self.rank == 0 && crate::interrupt::requested()) {
                return None;
            }
            std::thread::sleep(POLL);
        }
    }

    /// Waits for a message from rank 0; rank 0 silent past `deadline` ends the job.
    fn recv_root<T: DeserializeOwned>(&self, deadline: Instant, what: &str) -> T {
        self.recv(0, TAG, deadline)
            .unwrap_or_else(|| self.fatal(&format!("rank 0 sent no {what} within the deadline")))
    }

    /// Rank 0: a message from each of `from`, those that did not send by `deadline` apart.
    fn gather<T: DeserializeOwned>(
        &self,
        from: &[usize],
        deadline: Instant,
    ) -> (BTreeMap<usize, T>, Vec<usize>) {
        let mut got = BTreeMap::new();
        let mut pending: Vec<usize> = from.iter().copied().filter(|&r| r != 0).collect();
        loop {
            pending.retain(|&r| match self.try_recv::<T>(r, TAG) {
                Some(Ok(message)) => {
                    got.insert(r, message);
                    false
                }
                Some(Err(e)) => self.fatal(&format!("{e:#}")),
                None => true,
            });
            // Asked to stop: the caller gives up on the ranks pending, which turns into
            // naming the ranks that do not answer the stop (`Leader::stopped`).
            if pending.is_empty() || Instant::now() > deadline || crate::interrupt::requested() {
                return (got, pending);
            }
            std::thread::sleep(POLL);
        }
    }

    /// Every rank here, without spinning: a non-blocking barrier tested between sleeps.
    fn barrier(&self, deadline: Instant) {
        let mut request = self.world.immediate_barrier();
        loop {
            match request.test() {
                Ok(_) => return,
                Err(pending) => request = pending,
            }
            self.tell_stop();
            if Instant::now() > deadline {
                self.fatal("the other ranks did not reach the final barrier");
            }
            std::thread::sleep(POLL);
        }
    }

    fn fatal(&self, why: &str) -> ! {
        self.tell_stop();
        eprintln!(
            "peakbench cluster: rank {}: {why}; ending the job",
            self.rank
        );
        self.world.abort(Exit::Failed as i32)
    }
}

/// Spins on `request` (testing it, no sleep: the timed parts, where every rank of the
/// operation is busy) until it completes or `deadline` passes; then `stuck` is called with the
/// request still pending (it never returns: the request is never dropped incomplete).
fn spin<'a, D: ?Sized, S: Scope<'a>>(
    mut request: Request<'a, D, S>,
    deadline: Instant,
    stuck: &mut dyn FnMut() -> Never,
) {
    let mut tests = 0u32;
    loop {
        match request.test() {
            Ok(_) => return,
            Err(pending) => request = pending,
        }
        tests = tests.wrapping_add(1);
        if tests.is_multiple_of(256) && (Instant::now() > deadline || crate::interrupt::requested())
        {
            stuck();
        }
    }
}

/// For the tests of the deadlines only: `PEAKBENCH_CLUSTER_FAULT=HOST:STEP` makes the ranks of
/// host HOST stop answering (sleep for good) when they reach the first step that starts with
/// STEP: a node-local case id (`cpu` for the first CPU case), `matrix` (the first round) or
/// `collectives`.
fn fault(host: &str, step: &str) {
    let Ok(fault) = std::env::var("PEAKBENCH_CLUSTER_FAULT") else {
        return;
    };
    if fault
        .split_once(':')
        .is_some_and(|(h, s)| h == host && !s.is_empty() && step.starts_with(s))
    {
        eprintln!("peakbench cluster: PEAKBENCH_CLUSTER_FAULT: {host} stops answering at {step}");
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
}

#[derive(Serialize, Deserialize)]
struct Hello {
    host: String,
}

#[derive(Serialize, Deserialize)]
struct Layout {
    hosts: Vec<ClusterHost>,
}

#[derive(Serialize, Deserialize)]
struct Inventory {
    host: SysInfo,
    peaks: Peaks,
}

/// Rank 0's plan for the leaders: the node-local cases in order, each with its deadline, and
/// the run's shared key for the matrix's servers (random, new for every run, sent only through
/// MPI: a server accepts no client but this job's).
#[derive(Serialize, Deserialize)]
struct Cases {
    cases: Vec<(String, f64)>,
    key: Vec<u8>,
}

/// "Ready for case i", "go", the collectives (to the ranks that are not leaders), and the end
/// of the run.
#[derive(Serialize, Deserialize, PartialEq)]
enum Step {
    Ready(usize),
    Go(usize),
    Collectives,
    Done,
}

#[derive(Serialize, Deserialize)]
struct Outcome {
    result: Result<BenchResult, String>,
}

/// A leader's part in a matrix round.
#[derive(Serialize, Deserialize, Clone, Copy)]
struct Role {
    /// The other host's index, none when this host sits the round out.
    peer: Option<usize>,
    /// Whether this host serves (the other is the client, and times the MPI ping-pong).
    server: bool,
    deadline_s: f64,
}

#[derive(Serialize, Deserialize)]
struct ServerAt {
    port: u16,
    addrs: Vec<(IpAddr, u8)>,
}

/// What a leader measured in a round: the client's results, or why it failed.
#[derive(Serialize, Deserialize, Default)]
struct RoundReport {
    results: Vec<BenchResult>,
    error: Option<String>,
    /// The rank whose silence is the error (the peer that stopped answering), if so.
    silent: Option<usize>,
}

/// The host name the kernel gives this process (its UTS namespace's).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| mpi::environment::processor_name().ok())
        .unwrap_or_else(|| "unknown".into())
}

/// `peakbench cluster run`, on every rank.
pub fn run(args: &ClusterRunArgs) -> Result<ExitCode> {
    if args.output.dry_run {
        return Err(UsageError(
            "--dry-run: a cluster run has no dry run; see the node-local plan with 'peakbench \
             run --dry-run' (same --preset or --config) on one host"
                .into(),
        )
        .into());
    }
    let (universe, _) = mpi::initialize_with_threading(mpi::Threading::Funneled)
        .ok_or_else(|| anyhow!("MPI was already initialised"))?;
    let code = job(&universe, args);
    drop(universe);
    code
}

fn job(universe: &Universe, args: &ClusterRunArgs) -> Result<ExitCode> {
    let world = universe.world();
    let comm = Comm {
        rank: world.rank() as usize,
        size: world.size() as usize,
        world,
        told_stop: std::cell::Cell::new(false),
    };
    let start = Instant::now();
    let name = host_name();
    let layout: Layout = if comm.rank == 0 {
        let others: Vec<usize> = (1..comm.size).collect();
        let (hellos, missing) = comm.gather::<Hello>(&others, start + SETUP);
        if !missing.is_empty() {
            comm.fatal(&format!("ranks {missing:?} did not say hello"));
        }
        let mut hosts: Vec<ClusterHost> = Vec::new();
        let names =
            std::iter::once((0, name.clone())).chain(hellos.into_iter().map(|(r, h)| (r, h.host)));
        for (rank, host) in names {
            match hosts.iter_mut().find(|h| h.name == host) {
                Some(h) => h.ranks.push(rank),
                None => hosts.push(ClusterHost {
                    name: host,
                    ranks: vec![rank],
                }),
            }
        }
        let layout = Layout { hosts };
        for r in 1..comm.size {
            comm.send(r, TAG, &layout, start + SETUP);
        }
        layout
    } else {
        comm.send(0, TAG, &Hello { host: name.clone() }, start + SETUP);
        comm.recv_root(start + SETUP, "layout")
    };
    let me = layout
        .hosts
        .iter()
        .position(|h| h.ranks.contains(&comm.rank))
        .expect("every rank has a host");
    let leaders: Vec<usize> = layout.hosts.iter().map(|h| h.ranks[0]).collect();
    if leaders[me] != comm.rank {
        // Not a leader: nothing to measure but the collectives, over all ranks; wait for them
        // and for the end without taking a core.
        loop {
            match comm.recv_root(far(), "end of the run") {
                Step::Collectives => {
                    let reps = args.runner.repetitions as usize;
                    let limit = collective_deadline(args);
                    let _ = collectives(
                        &comm,
                        args.collective_max_bytes,
                        reps,
                        &name,
                        limit,
                        &mut |_, case, why| comm.fatal(&format!("{case}: {why}")),
                    );
                }
                Step::Done => break,
                _ => {}
            }
        }
        comm.barrier(far());
        return Ok(ExitCode::SUCCESS);
    }
    let ctx = session::context(&args.runner, &args.peak, &crate::cpu::probe());
    let plan = plan_local(args, &ctx)?;
    let mut leader = Leader {
        comm: &comm,
        args,
        ctx: &ctx,
        layout: &layout,
        leaders: &leaders,
        me,
        session: None,
        html: args.html.clone(),
        key: None,
    };
    if comm.rank == 0 {
        leader.root(plan, start)
    } else {
        leader.member(plan, start)
    }
}

/// A deadline no step reaches: the waits whose end rank 0 decides.
fn far() -> Instant {
    Instant::now() + Duration::from_secs(7 * 24 * 3600)
}

/// The first rank of a host: it measures.
struct Leader<'a> {
    comm: &'a Comm,
    args: &'a ClusterRunArgs,
    ctx: &'a Context,
    layout: &'a Layout,
    leaders: &'a [usize],
    me: usize,
    /// Rank 0's document.
    session: Option<Session>,
    html: Option<std::path::PathBuf>,
    /// The run's shared key, from rank 0.
    key: Option<Key>,
}

impl Leader<'_> {
    fn session(&mut self) -> &mut Session {
        self.session.as_mut().expect("rank 0 has the document")
    }

    fn cluster(&mut self) -> &mut Cluster {
        self.session()
            .report
            .cluster
            .as_mut()
            .expect("a cluster document")
    }

    fn host_of(&self, rank: usize) -> String {
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
    fn give_up(&mut self, missing: &[usize], case: &str, why: &str) -> ! {
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
    fn stopped(&mut self, step: &str) -> ! {
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
    fn record_and_end(&mut self, missing: &[usize], case: &str, why: &str) -> ! {
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
    fn begin(&mut self, step: &str) {
        self.cluster().step = Some(step.to_string());
        self.save();
    }

    fn save(&mut self) {
        if let Err(e) = self.session().save() {
            eprintln!("warning: the output file was not written: {e:#}");
        }
    }

    /// Rank 0: gathers, decides, writes.
    fn root(&mut self, plan: crate::plan::Plan, start: Instant) -> Result<ExitCode> {
        let comm = self.comm;
        let others: Vec<usize> = self.leaders[1..].to_vec();
        let (inventories, missing) = comm.gather::<Inventory>(&others, start + SETUP);
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
        for inventory in inventories.into_values() {
            peaks.insert(inventory.host.hostname.clone(), inventory.peaks);
            hosts.insert(inventory.host.hostname.clone(), inventory.host);
        }
        let differences = analysis::differences(&hosts);
        self.session().report.hosts = hosts;
        self.session().report.config["peaks"] = serde_json::to_value(&peaks)?;
        self.session().report.cluster = Some(Cluster {
            ranks: comm.size,
            hosts: self.layout.hosts.clone(),
            phase: "setup".into(),
            threshold: self.args.threshold,
            differences,
            ..Cluster::default()
        });
        if !missing.is_empty() {
            self.give_up(&missing, "setup", "sent no inventory in time");
        }
        self.save();
        let cases: Vec<(String, f64)> = if self.args.phases.contains(&Phase::Local) {
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
        } else {
            Vec::new()
        };
        let list = Cases {
            cases,
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
        self.cluster().phase = "done".into();
        self.cluster().step = None;
        let mut session = self.session.take().expect("rank 0 has the document");
        session.finish(RunStatus::Complete)?;
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
    /// figures beside the matrix's (see [`super::reference`]).
    fn references(&mut self) {
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
        let mca = super::reference::launch_parameters(env);
        eprintln!(
            "peakbench cluster: --reference: hpcc over the same {} ranks",
            self.comm.size
        );
        let run = || -> anyhow::Result<_> {
            let hpcc = super::reference::run_hpcc(&hosts, &mca)?;
            let mpi4py = match super::reference::find_mpi4py() {
                Ok(python) => {
                    eprintln!(
                        "peakbench cluster: --reference: mpi4py's ping-pong ({})",
                        python.display()
                    );
                    super::reference::run_mpi4py(&hosts, &mca, &python)?
                }
                Err(why) => super::reference::Mpi4py::absent(why),
            };
            Ok((hpcc, mpi4py))
        };
        match run() {
            Ok((hpcc, mpi4py)) => {
                let rows = super::reference::compare(&self.session().report.results, &hpcc, mpi4py);
                self.cluster().references = rows;
            }
            Err(e) => eprintln!("peakbench cluster: --reference: {e:#}"),
        }
        self.save();
    }

    /// A leader other than rank 0: sends, runs what rank 0 says, sends again.
    fn member(&mut self, plan: crate::plan::Plan, start: Instant) -> Result<ExitCode> {
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

    /// The node-local suite: every leader starts each case when all are ready, and rank 0
    /// gathers the results of each case before the next starts.
    fn local(&mut self, cases: &mut HashMap<String, Box<dyn Case>>, list: &Cases) {
        let comm = self.comm;
        let others: Vec<usize> = self.leaders[1..].to_vec();
        for (i, (id, deadline_s)) in list.cases.iter().enumerate() {
            let deadline = Duration::from_secs_f64(*deadline_s);
            if comm.rank == 0 {
                self.begin(id);
                let (_, missing) = comm.gather::<Step>(&others, Instant::now() + deadline);
                if !missing.is_empty() {
                    self.give_up(
                        &missing,
                        id,
                        &format!(
                            "did not reach the start of the case within {} s",
                            deadline.as_secs()
                        ),
                    );
                }
                for &r in &others {
                    comm.send(r, TAG, &Step::Go(i), far());
                }
            } else {
                fault(&self.layout.hosts[self.me].name, id);
                comm.send(0, TAG, &Step::Ready(i), far());
                let _: Step = comm.recv_root(far(), "start of the case");
            }
            let result = match cases.remove(id) {
                Some(case) => case.run(self.ctx).map_err(|e| format!("{e:#}")),
                None => Err(format!(
                    "this host did not plan the case (its planning differs from rank 0's: \
                     memory, disk space?): see 'peakbench run --dry-run' on {}",
                    self.layout.hosts[self.me].name
                )),
            };
            if comm.rank != 0 {
                comm.send(0, TAG, &Outcome { result }, far());
                continue;
            }
            let (outcomes, missing) = comm.gather::<Outcome>(&others, Instant::now() + deadline);
            if crate::interrupt::requested() {
                // The job is being ended: the case was cut short on every host that still
                // runs; what matters is which host did not answer the stop.
                self.give_up(&missing, id, "");
            }
            let mut all = vec![(0, Outcome { result })];
            all.extend(outcomes);
            for (rank, outcome) in all {
                match outcome.result {
                    Ok(result) => self.session().report.results.push(result),
                    Err(why) => {
                        let failure = Failure {
                            host: self.host_of(rank),
                            rank,
                            case: id.clone(),
                            why,
                        };
                        eprintln!(
                            "peakbench cluster: {} failed on {}: {}",
                            failure.case, failure.host, failure.why
                        );
                        self.cluster().failures.push(failure);
                    }
                }
            }
            if !missing.is_empty() {
                self.give_up(
                    &missing,
                    id,
                    &format!("did not finish the case within {} s", deadline.as_secs()),
                );
            }
            self.analyse();
            self.save();
        }
    }

    /// Rank 0: the spread of the node-local cases, the flagged hosts, the matrices.
    fn analyse(&mut self) {
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

    /// The network matrix: the rounds of disjoint pairs, each pair measuring TCP both ways
    /// and the MPI ping-pong, rank 0 gathering each round.
    fn matrix(&mut self) {
        let comm = self.comm;
        let others: Vec<usize> = self.leaders[1..].to_vec();
        let rounds = schedule::rounds(self.leaders.len());
        let per_test = self.args.matrix_duration + Duration::from_millis(250);
        let estimate = (per_test * 2 + Duration::from_secs(1)) * self.args.runner.repetitions
            + Duration::from_secs(5);
        let deadline = self
            .args
            .case_deadline
            .unwrap_or(estimate * 3 + Duration::from_secs(30));
        for (r, pairs) in rounds.iter().enumerate() {
            let role_of = |h: usize| {
                let pair = pairs.iter().find(|&&(a, b)| a == h || b == h);
                Role {
                    peer: pair.map(|&(a, b)| if a == h { b } else { a }),
                    server: pair.is_some_and(|&(_, b)| b == h),
                    deadline_s: deadline.as_secs_f64(),
                }
            };
            let round_start = Instant::now();
            let step = format!("matrix round {} of {}", r + 1, rounds.len());
            let role = if comm.rank == 0 {
                self.begin(&step);
                for (h, &rank) in self.leaders.iter().enumerate().skip(1) {
                    comm.send(rank, TAG, &role_of(h), far());
                }
                role_of(0)
            } else {
                comm.recv_root(far(), "matrix round")
            };
            if r == 0 {
                fault(&self.layout.hosts[self.me].name, "matrix");
            }
            let report = self.pair(role, &step);
            if comm.rank != 0 {
                comm.send(0, TAG, &report, far());
                continue;
            }
            // A pair's hosts give up on each other after `deadline`, and tell: rank 0 waits
            // a little longer to hear which one stopped answering.
            let (reports, missing) = comm
                .gather::<RoundReport>(&others, round_start + deadline + Duration::from_secs(5));
            let mut all = vec![(0, report)];
            all.extend(reports);
            for (rank, report) in all {
                self.session().report.results.extend(report.results);
                if let Some(why) = report.error {
                    let host = self.host_of(report.silent.unwrap_or(rank));
                    let rank = report.silent.unwrap_or(rank);
                    eprintln!("peakbench cluster: {step} failed on {host}: {why}");
                    self.cluster().failures.push(Failure {
                        host,
                        rank,
                        case: step.clone(),
                        why,
                    });
                }
            }
            if !missing.is_empty() {
                self.give_up(
                    &missing,
                    &step,
                    &format!("did not finish the round within {} s", deadline.as_secs()),
                );
            }
            self.analyse();
            self.save();
        }
    }

    /// The collectives over all ranks (the ranks that are not leaders told to join); rank 0
    /// records them.
    fn collectives(&mut self) {
        let comm = self.comm;
        if comm.rank == 0 {
            self.begin("collectives");
            for r in (1..comm.size).filter(|r| !self.leaders.contains(r)) {
                comm.send(r, TAG, &Step::Collectives, far());
            }
        }
        let reps = self.args.runner.repetitions as usize;
        let host = self.ctx.host.hostname.clone();
        let limit = collective_deadline(self.args);
        let max_bytes = self.args.collective_max_bytes;
        let outcomes = collectives(
            comm,
            max_bytes,
            reps,
            &host,
            limit,
            &mut |missing, case, why| self.give_up(&missing, &case, &why),
        );
        if comm.rank != 0 {
            return;
        }
        for outcome in outcomes {
            match outcome {
                Ok(result) => self.session().report.results.push(result),
                Err(e) => {
                    let failure = Failure {
                        host: host.clone(),
                        rank: 0,
                        case: "collectives".into(),
                        why: format!("{e:#}"),
                    };
                    eprintln!("peakbench cluster: collectives failed: {}", failure.why);
                    self.cluster().failures.push(failure);
                }
            }
        }
        self.save();
    }

    /// This host's part of a round (`step`, for the failures).
    fn pair(&mut self, role: Role, step: &str) -> RoundReport {
        let Some(peer) = role.peer else {
            return RoundReport::default();
        };
        let comm = self.comm;
        let peer_rank = self.leaders[peer];
        let peer_name = self.layout.hosts[peer].name.clone();
        let limit = role.deadline_s;
        let deadline = Instant::now() + Duration::from_secs_f64(limit);
        if role.server {
            let server = LocalServer::start_on(IpAddr::V4(Ipv4Addr::UNSPECIFIED), self.key.clone());
            let at = match &server {
                Ok(s) => Some(ServerAt {
                    port: s.addr.port(),
                    addrs: addresses(),
                }),
                Err(_) => None,
            };
            comm.send_or(peer_rank, TAG_PAIR, &at, deadline, &mut || {
                self.stuck(
                    peer,
                    step,
                    Vec::new(),
                    format!("{peer_name} took no server address within {limit} s"),
                )
            });
            // The client says when its TCP tests are over.
            let done: Option<Option<bool>> = comm.recv(peer_rank, TAG_PAIR, deadline);
            drop(server);
            if done.is_none() {
                self.stuck(
                    peer,
                    step,
                    Vec::new(),
                    format!("{peer_name} did not end its TCP tests within {limit} s"),
                );
            }
            ping_pong(comm, peer_rank, false, 0, deadline, &mut |why| {
                self.stuck(peer, step, Vec::new(), format!("{peer_name} {why}"))
            });
            return RoundReport::default();
        }
        let at: Option<ServerAt> = match comm.recv(peer_rank, TAG_PAIR, deadline) {
            Some(at) => at,
            None => self.stuck(
                peer,
                step,
                Vec::new(),
                format!("{peer_name} sent no server address within {limit} s"),
            ),
        };
        let mut report = RoundReport::default();
        match at {
            Some(at) => match self.tcp(&at, &peer_name) {
                Ok(results) => report.results = results,
                Err(e) => report.error = Some(format!("TCP to {peer_name}: {e:#}")),
            },
            None => report.error = Some(format!("{peer_name} could not start its server")),
        }
        comm.send_or(peer_rank, TAG_PAIR, &Some(true), deadline, &mut || {
            let measured = std::mem::take(&mut report.results);
            self.stuck(
                peer,
                step,
                measured,
                format!("{peer_name} took no word of the end of the TCP tests within {limit} s"),
            )
        });
        let reps = self.args.runner.repetitions as usize;
        let curve = ping_pong(comm, peer_rank, true, reps, deadline, &mut |why| {
            let measured = std::mem::take(&mut report.results);
            self.stuck(peer, step, measured, format!("{peer_name} {why}"))
        });
        match pingpong_results(&curve, &self.ctx.host.hostname, &peer_name) {
            Ok(results) => report.results.extend(results),
            Err(e) => report.error = Some(format!("MPI ping-pong with {peer_name}: {e:#}")),
        }
        report
    }

    /// The host `peer` (an index of the hosts) stopped answering this one in `step`: rank 0
    /// records it with what this host measured and ends the job; another leader tells rank 0
    /// (as its report of the round, naming the peer) and waits for rank 0 to end the job.
    fn stuck(&mut self, peer: usize, step: &str, measured: Vec<BenchResult>, why: String) -> ! {
        let comm = self.comm;
        let peer_rank = self.leaders[peer];
        let why = format!("{why} (seen from {})", self.layout.hosts[self.me].name);
        if comm.rank == 0 {
            self.session().report.results.extend(measured);
            self.give_up(&[peer_rank], step, &why);
        }
        let report = RoundReport {
            results: measured,
            error: Some(why),
            silent: Some(peer_rank),
        };
        comm.send(0, TAG, &report, far());
        let _: Option<serde_json::Value> = comm.recv(0, TAG, far());
        comm.fatal("rank 0 went on after this host's peer stopped answering")
    }

    /// The client's TCP tests against the peer's server: throughput each way, then RTT.
    fn tcp(&self, at: &ServerAt, peer: &str) -> Result<Vec<BenchResult>> {
        let ip = choose(&at.addrs, &addresses())
            .ok_or_else(|| anyhow!("{peer} has no IPv4 address to reach"))?;
        let addr = SocketAddr::new(ip, at.port);
        // The matrix measures the link, not a reference tool (which has no server there).
        let mut runner = self.ctx.runner.clone();
        runner.reference = false;
        let ctx = Context {
            host: self.ctx.host.clone(),
            peaks: self.ctx.peaks.clone(),
            runner,
        };
        let target = Arc::new(Target::new(Some(addr), self.key.clone()));
        let duration_ms = self.args.matrix_duration.as_millis().max(1) as u64;
        let tests = [
            (Mode::Throughput, false, 128 * 1024),
            (Mode::Throughput, true, 128 * 1024),
            (Mode::Latency, false, 1),
        ];
        let mut results = Vec::new();
        for (mode, reverse, msg) in tests {
            let case = NetCase {
                spec: TestSpec {
                    proto: Proto::Tcp,
                    mode,
                    msg_bytes: msg,
                    streams: 1,
                    omit_ms: if mode == Mode::Throughput { 250 } else { 0 },
                    duration_ms: if mode == Mode::Throughput {
                        duration_ms
                    } else {
                        duration_ms.min(500)
                    },
                    reverse,
                    rate_bps: None,
                    count: None,
                    // The pairs of a round run at once, and hosts that share physical CPUs
                    // (VMs on one hypervisor, this project's namespace cluster) would lose a
                    // CPU to another pair's spinning receiver: every link sleeps alike, as
                    // `auto` does for a peer that is not on loopback.
                    receiver_wait: ReceiverWait::Sleep,
                },
                count: None,
                pin: false,
                target: target.clone(),
            };
            let mut result = case.run(&ctx)?;
            result.id = format!("matrix-{}-{peer}", result.id);
            result.params.other.insert("peer".into(), peer.into());
            results.push(result);
        }
        Ok(results)
    }
}

/// The hosts' lines after the run: the flagged hosts, the differences, the slow links.
fn print_summary(report: &crate::result::Report) {
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

/// The message sizes of the MPI ping-pong: 8 B to 4 MiB, doubling.
pub fn ping_sizes() -> Vec<usize> {
    (3..=22).map(|k| 1usize << k).collect()
}

/// The most round trips in one timed batch: enough for a batch of tens of milliseconds at the
/// small sizes on an idle pair, at least 10 at the largest.
fn ping_iterations(size: usize) -> usize {
    ((64 << 20) / size).clamp(10, 1000)
}

/// How long a timed batch goes on at most once it has one round trip (a loaded machine's round
/// trips can take milliseconds: the batch stops by time, and counts what it did).
const PING_BATCH: f64 = 0.05;

/// One size of the ping-pong: the one-way time of each repetition, seconds, and the round
/// trips each took.
#[derive(Serialize, Deserialize)]
struct PingPoint {
    bytes: usize,
    one_way_s: Vec<f64>,
    round_trips: Vec<usize>,
}

/// Sends `buf` to `peer` (the ping-pong's tag), waiting for the send to complete by spinning;
/// past `deadline`, `stuck`.
fn ping_send(
    comm: &Comm,
    peer: usize,
    buf: &[u8],
    deadline: Instant,
    stuck: &mut dyn FnMut() -> Never,
) {
    let process = comm.process(peer);
    mpi::request::scope(|scope| {
        spin(
            process.immediate_send_with_tag(scope, buf, TAG_PING),
            deadline,
            stuck,
        );
    });
}

/// Receives the peer's message into `buf` (the ping-pong's tag), spinning; past `deadline`,
/// `stuck`.
fn ping_recv(
    comm: &Comm,
    peer: usize,
    buf: &mut [u8],
    deadline: Instant,
    stuck: &mut dyn FnMut() -> Never,
) {
    let process = comm.process(peer);
    mpi::request::scope(|scope| {
        spin(
            process.immediate_receive_into_with_tag(scope, buf, TAG_PING),
            deadline,
            stuck,
        );
    });
}

/// MPI's own ping-pong between this rank and `peer` (as `osu_latency` and hpcc's ping-pong
/// measure it): a send and a receive at a time, `reps` timed batches per size after an untimed
/// warm-up batch; the initiator times and decides when a batch ends (the first byte of its
/// message is 0 on the last round trip), the other echoes. Each send and receive is
/// non-blocking and tested in a loop until it completes (spinning, as MPI's blocking calls do:
/// only the two ranks of the pair are busy), so that a peer that stops answering is noticed at
/// `deadline`: then `stuck` is called with what stopped.
fn ping_pong(
    comm: &Comm,
    peer: usize,
    initiator: bool,
    reps: usize,
    deadline: Instant,
    stuck: &mut dyn FnMut(String) -> Never,
) -> Vec<PingPoint> {
    // Both sides must run the same number of batches: the initiator tells.
    let mut count = [0u8; 8];
    let batches: usize = {
        let mut stop = || -> Never { stuck("did not start the MPI ping-pong in time".into()) };
        if initiator {
            count = (reps as u64 + 1).to_le_bytes();
            ping_send(comm, peer, &count, deadline, &mut stop);
            reps + 1
        } else {
            ping_recv(comm, peer, &mut count, deadline, &mut stop);
            u64::from_le_bytes(count) as usize
        }
    };
    let mut curve = Vec::new();
    for size in ping_sizes() {
        let mut stop = || -> Never {
            stuck(format!(
                "stopped answering the MPI ping-pong at {size} B in time"
            ))
        };
        let mut buf = vec![1u8; size];
        let most = ping_iterations(size);
        let mut times = Vec::with_capacity(batches);
        let mut counts = Vec::with_capacity(batches);
        for _ in 0..batches {
            if !initiator {
                loop {
                    ping_recv(comm, peer, &mut buf, deadline, &mut stop);
                    let last = buf[0] == 0;
                    ping_send(comm, peer, &buf, deadline, &mut stop);
                    if last {
                        break;
                    }
                }
                continue;
            }
            let t0 = mpi::time();
            let mut count = 0;
            loop {
                let last = count + 1 >= most || mpi::time() - t0 >= PING_BATCH;
                buf[0] = u8::from(!last);
                ping_send(comm, peer, &buf, deadline, &mut stop);
                ping_recv(comm, peer, &mut buf, deadline, &mut stop);
                count += 1;
                if last {
                    break;
                }
            }
            times.push((mpi::time() - t0) / count as f64 / 2.0);
            counts.push(count);
        }
        if initiator {
            // The first batch warms the path up and is not kept.
            curve.push(PingPoint {
                bytes: size,
                one_way_s: times.split_off(1),
                round_trips: counts.split_off(1),
            });
        }
    }
    curve
}

/// The ping-pong's results: the latency at the smallest size and the bandwidth at the largest,
/// the whole curve with the latency.
fn pingpong_results(curve: &[PingPoint], host: &str, peer: &str) -> Result<Vec<BenchResult>> {
    let (Some(first), Some(last)) = (curve.first(), curve.last()) else {
        anyhow::bail!("no ping-pong size measured");
    };
    let table: Vec<serde_json::Value> = curve
        .iter()
        .map(|p| {
            let t = analysis::median(&p.one_way_s).unwrap_or(f64::NAN);
            // hpcc's and OSU's counting: the best (shortest) timed batch of the size.
            let best = p
                .one_way_s
                .iter()
                .copied()
                .reduce(f64::min)
                .unwrap_or(f64::NAN);
            serde_json::json!({
                "bytes": p.bytes,
                "latency_us": t * 1e6,
                "bandwidth_gbs": p.bytes as f64 / t / 1e9,
                "latency_best_us": best * 1e6,
                "bandwidth_best_gbs": p.bytes as f64 / best / 1e9,
            })
        })
        .collect();
    let spec = |op: &str, bytes: usize| {
        let mut params = Params {
            protocol: Some("mpi".into()),
            message_bytes: Some(bytes as u64),
            ..Params::default()
        };
        params.other.insert("peer".into(), peer.into());
        crate::plan::CaseSpec {
            id: format!("matrix-mpi-{op}-m{bytes}-{peer}"),
            label: format!("MPI ping-pong {op} to {peer}"),
            subsystem: Subsystem::Network,
            op: format!("mpi-pingpong-{op}"),
            params,
        }
    };
    let mut latency_spec = spec("latency", first.bytes);
    latency_spec
        .params
        .other
        .insert("round_trips".into(), first.round_trips.clone().into());
    latency_spec
        .params
        .other
        .insert("curve".into(), table.into());
    let latency = latency_spec
        .measured(
            host,
            "latency",
            "µs",
            format!(
                "one-way latency = the time of a batch of round trips of {} B (up to {} or \
                 {} ms, counted in params.round_trips) / their count / 2 (one send and one \
                 receive at a time, as osu_latency; each an MPI_Isend or MPI_Irecv tested to \
                 completion); params.curve holds every size's median and best batch",
                first.bytes,
                ping_iterations(first.bytes),
                PING_BATCH * 1e3
            ),
            first.one_way_s.iter().map(|t| t * 1e6).collect(),
        )?
        .finish();
    let mut bandwidth_spec = spec("bandwidth", last.bytes);
    bandwidth_spec
        .params
        .other
        .insert("round_trips".into(), last.round_trips.clone().into());
    let bandwidth = bandwidth_spec
        .measured(
            host,
            "bandwidth",
            "GB/s",
            format!(
                "{} B / the one-way time of a ping-pong (round trip / 2), 1 GB = 10^9 B, as \
                 hpcc's PingPongBandwidth",
                last.bytes
            ),
            last.one_way_s
                .iter()
                .map(|t| last.bytes as f64 / t / 1e9)
                .collect(),
        )?
        .finish();
    Ok(vec![latency, bandwidth])
}

/// The matrices of the links measured so far.
fn matrices(
    results: &[BenchResult],
    hosts: &[String],
    threshold: f64,
    nic_gbps: Option<f64>,
) -> Vec<Matrix> {
    let n = hosts.len();
    let index = |name: &str| hosts.iter().position(|h| h == name);
    let kinds = [
        ("tcp-throughput", "TCP throughput", "Mb/s", true),
        ("tcp-latency", "TCP round trip", "µs", false),
        ("mpi-pingpong-latency", "MPI one-way latency", "µs", false),
        (
            "mpi-pingpong-bandwidth",
            "MPI ping-pong bandwidth",
            "GB/s",
            true,
        ),
    ];
    let mut out = Vec::new();
    for (op, metric, unit, up) in kinds {
        let mut values = vec![vec![None; n]; n];
        let mut counting = String::new();
        for r in results.iter().filter(|r| r.op == op) {
            let Some(peer) = r.params.other.get("peer").and_then(|p| p.as_str()) else {
                continue;
            };
            let (Some(client), Some(server)) = (index(&r.host), index(peer)) else {
                continue;
            };
            counting.clone_from(&r.counting);
            let reverse = r
                .params
                .other
                .get("reverse")
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(false);
            if op == "tcp-throughput" {
                let (from, to) = if reverse {
                    (server, client)
                } else {
                    (client, server)
                };
                values[from][to] = Some(r.value);
            } else {
                values[client][server] = Some(r.value);
                values[server][client] = Some(r.value);
            }
        }
        if values.iter().flatten().all(Option::is_none) {
            continue;
        }
        let mut matrix = Matrix {
            metric: metric.into(),
            unit: unit.into(),
            higher_is_better: up,
            counting,
            hosts: hosts.to_vec(),
            values,
            median: None,
            flagged: Vec::new(),
            peak: match unit {
                "Mb/s" => nic_gbps.map(|g| g * 1000.0),
                "GB/s" => nic_gbps.map(|g| g / 8.0),
                _ => None,
            },
        };
        analysis::judge(&mut matrix, threshold);
        out.push(matrix);
    }
    out
}

/// This host's IPv4 addresses, loopback left out, each with its prefix length.
fn addresses() -> Vec<(IpAddr, u8)> {
    let mut out = Vec::new();
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a list that freeifaddrs releases below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return out;
    }
    let mut at = list;
    while !at.is_null() {
        // SAFETY: `at` is a node of the list getifaddrs returned, not yet freed.
        let node = unsafe { &*at };
        at = node.ifa_next;
        if node.ifa_addr.is_null() || node.ifa_netmask.is_null() {
            continue;
        }
        // SAFETY: ifa_addr points to a sockaddr whose family says its type.
        if i32::from(unsafe { (*node.ifa_addr).sa_family }) != libc::AF_INET {
            continue;
        }
        // SAFETY: an AF_INET address and its netmask are sockaddr_in.
        let (addr, mask) = unsafe {
            (
                (*(node.ifa_addr as *const libc::sockaddr_in))
                    .sin_addr
                    .s_addr,
                (*(node.ifa_netmask as *const libc::sockaddr_in))
                    .sin_addr
                    .s_addr,
            )
        };
        let ip = Ipv4Addr::from(u32::from_be(addr));
        if !ip.is_loopback() {
            out.push((IpAddr::V4(ip), u32::from_be(mask).count_ones() as u8));
        }
    }
    // SAFETY: `list` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(list) };
    out
}

/// The server's address to use: the first on a subnet of one of the client's own, else its
/// first.
fn choose(server: &[(IpAddr, u8)], client: &[(IpAddr, u8)]) -> Option<IpAddr> {
    let net = |ip: IpAddr, prefix: u8| match ip {
        IpAddr::V4(v4) => u32::from(v4)
            .checked_shr(32 - u32::from(prefix.min(32)))
            .unwrap_or(0),
        IpAddr::V6(_) => 0,
    };
    server
        .iter()
        .find(|&&(s, _)| {
            client
                .iter()
                .any(|&(c, prefix)| prefix > 0 && net(s, prefix) == net(c, prefix))
        })
        .or(server.first())
        .map(|&(ip, _)| ip)
}

/// A collective of MPI over all ranks.
#[derive(Clone, Copy)]
enum Collective {
    Reduce,
    Gather,
    ToAll,
}

impl Collective {
    fn name(self) -> &'static str {
        match self {
            Collective::Reduce => "allreduce",
            Collective::Gather => "allgather",
            Collective::ToAll => "alltoall",
        }
    }

    /// Bus bandwidth / algorithm bandwidth for `n` ranks (nccl-tests' factors).
    fn bus_factor(self, n: usize) -> f64 {
        let n = n as f64;
        match self {
            Collective::Reduce => 2.0 * (n - 1.0) / n,
            Collective::Gather | Collective::ToAll => (n - 1.0) / n,
        }
    }

    fn rule(self) -> &'static str {
        match self {
            Collective::Reduce => {
                "bytes = one rank's buffer of f32 summed (MPI_Allreduce, MPI_SUM); \
                 busbw = algbw × 2(n − 1)/n"
            }
            Collective::Gather => {
                "bytes = the whole gathered buffer (n × each rank's part, MPI_Allgather); \
                 busbw = algbw × (n − 1)/n"
            }
            Collective::ToAll => {
                "bytes = one rank's send buffer (n × the part for each rank, MPI_Alltoall); \
                 busbw = algbw × (n − 1)/n"
            }
        }
    }
}

/// The collectives' message sizes: 8 B to `max`, doubling.
pub fn collective_sizes(max: usize) -> Vec<usize> {
    (3..=30)
        .map(|k| 1usize << k)
        .take_while(|&s| s <= max)
        .collect()
}

/// The operations in one timed batch of a size, from the warm-up's time per operation: the
/// same on every rank (each must call the collective as often), about [`PING_BATCH`] long,
/// between 1 and 200.
fn collective_iterations(op_s: f64) -> usize {
    (PING_BATCH / op_s.max(1e-9)).clamp(1.0, 200.0) as usize
}

/// One size of a collective: the bytes (nccl-tests' size), the operations per batch, and each
/// timed batch's time per operation (the slowest rank's), seconds.
struct CollectivePoint {
    bytes: usize,
    iterations: usize,
    op_s: Vec<f64>,
}

/// Every rank: one collective at every size, `reps` timed batches after an untimed warm-up
/// batch; a batch starts after a barrier and its time per operation is the slowest rank's
/// (the operation is over when every rank has its data). Returns the curve on rank 0 (the
/// others get the same, unused). MPI's blocking calls spin here: every rank is busy.
fn collective(
    comm: &Comm,
    op: Collective,
    max_bytes: usize,
    reps: usize,
    deadline: Instant,
    stuck: &mut dyn FnMut(String) -> Never,
) -> Result<Vec<CollectivePoint>> {
    use mpi::collective::SystemOperation;
    let world = &comm.world;
    let n = comm.size;
    let mut curve = Vec::new();
    let mut wrong = None;
    for size in collective_sizes(max_bytes) {
        // The element counts: f32 for the sum, bytes for the others, each rank's part at least one.
        let (count, bytes) = match op {
            Collective::Reduce => {
                let count = (size / 4).max(1);
                (count, count * 4)
            }
            Collective::Gather | Collective::ToAll => {
                let part = (size / n).max(1);
                (part, part * n)
            }
        };
        let mut floats_in = vec![0f32; 0];
        let mut floats_out = vec![0f32; 0];
        let mut bytes_in = vec![0u8; 0];
        let mut bytes_out = vec![0u8; 0];
        match op {
            Collective::Reduce => {
                floats_in = vec![1.0; count];
                floats_out = vec![0.0; count];
            }
            Collective::Gather => {
                bytes_in = vec![comm.rank as u8; count];
                bytes_out = vec![0; count * n];
            }
            Collective::ToAll => {
                bytes_in = (0..count * n).map(|i| (i / count) as u8).collect();
                bytes_out = vec![0; count * n];
            }
        }
        let mut op_s = Vec::with_capacity(reps);
        // The untimed warm-up is one operation; its slowest time (the same on every rank)
        // sets the batch: as many operations as fill PING_BATCH, from 1 to 200.
        let mut iterations = 1;
        let mut stop = || -> Never {
            stuck(format!(
                "{} of {bytes} B did not complete by the deadline",
                op.name()
            ))
        };
        for batch in 0..=reps {
            spin(world.immediate_barrier(), deadline, &mut stop);
            let t0 = mpi::time();
            for _ in 0..iterations {
                mpi::request::scope(|scope| match op {
                    Collective::Reduce => spin(
                        world.immediate_all_reduce_into(
                            scope,
                            &floats_in[..],
                            &mut floats_out[..],
                            SystemOperation::sum(),
                        ),
                        deadline,
                        &mut stop,
                    ),
                    Collective::Gather => spin(
                        world.immediate_all_gather_into(scope, &bytes_in[..], &mut bytes_out[..]),
                        deadline,
                        &mut stop,
                    ),
                    Collective::ToAll => spin(
                        world.immediate_all_to_all_into(scope, &bytes_in[..], &mut bytes_out[..]),
                        deadline,
                        &mut stop,
                    ),
                });
            }
            let mine = (mpi::time() - t0) / iterations as f64;
            let mut slowest = 0.0f64;
            mpi::request::scope(|scope| {
                spin(
                    world.immediate_all_reduce_into(
                        scope,
                        &mine,
                        &mut slowest,
                        SystemOperation::max(),
                    ),
                    deadline,
                    &mut stop,
                )
            });
            if batch > 0 {
                op_s.push(slowest);
            } else {
                iterations = collective_iterations(slowest);
            }
        }
        // The data arrived: the sum is n everywhere, each rank's part where it belongs.
        let right = match op {
            Collective::Reduce => floats_out.iter().all(|&v| v == n as f32),
            Collective::Gather => bytes_out
                .iter()
                .enumerate()
                .all(|(i, &b)| b == (i / count) as u8),
            Collective::ToAll => bytes_out.iter().all(|&b| b == comm.rank as u8),
        };
        // Every rank goes on through the sizes, as the others do, and reports at the end.
        if !right && wrong.is_none() {
            wrong = Some(format!("{} of {bytes} B delivered wrong data", op.name()));
        }
        curve.push(CollectivePoint {
            bytes,
            iterations,
            op_s,
        });
    }
    match wrong {
        Some(why) => Err(anyhow!(why)),
        None => Ok(curve),
    }
}

/// Rank 0: a collective's result: the bus bandwidth at the largest size as the value, the
/// curve (time per operation, algorithm and bus bandwidth per size) in params.curve.
fn collective_result(
    curve: &[CollectivePoint],
    op: Collective,
    ranks: usize,
    host: &str,
) -> Result<BenchResult> {
    let Some(last) = curve.last() else {
        anyhow::bail!("no size of {} measured", op.name());
    };
    let factor = op.bus_factor(ranks);
    let table: Vec<serde_json::Value> = curve
        .iter()
        .map(|p| {
            let t = analysis::median(&p.op_s).unwrap_or(f64::NAN);
            let algbw = p.bytes as f64 / t / 1e9;
            serde_json::json!({
                "bytes": p.bytes,
                "iterations": p.iterations,
                "time_us": t * 1e6,
                "algbw_gbs": algbw,
                "busbw_gbs": algbw * factor,
            })
        })
        .collect();
    let mut params = Params {
        protocol: Some("mpi".into()),
        message_bytes: Some(last.bytes as u64),
        ..Params::default()
    };
    params.other.insert("ranks".into(), ranks.into());
    params.other.insert("curve".into(), table.into());
    let spec = crate::plan::CaseSpec {
        id: format!("collective-{}-n{ranks}", op.name()),
        label: format!("MPI {} over {ranks} ranks", op.name()),
        subsystem: Subsystem::Network,
        op: format!("mpi-{}", op.name()),
        params,
    };
    Ok(spec
        .measured(
            host,
            "bus bandwidth",
            "GB/s",
            format!(
                "{}; algbw = bytes / the time of one operation (a batch of {} after a barrier, \
                 the slowest rank's time / the count; params.curve has every size from 8 B), \
                 1 GB = 10^9 B, n = {ranks} ranks, as nccl-tests",
                op.rule(),
                last.iterations
            ),
            last.op_s
                .iter()
                .map(|t| last.bytes as f64 / t / 1e9 * factor)
                .collect(),
        )?
        .finish())
}

/// The longest one collective (all its sizes) may take: `--case-deadline`, else 60 s + 1 s
/// per batch.
fn collective_deadline(args: &ClusterRunArgs) -> Duration {
    let batches =
        collective_sizes(args.collective_max_bytes).len() as u32 * (args.runner.repetitions + 1);
    args.case_deadline
        .unwrap_or(Duration::from_secs(60) + Duration::from_secs(1) * batches)
}

/// Every rank: the three collectives; rank 0 gets their results. Before each, every rank tells
/// rank 0 it is there and rank 0 waits for all until `limit` (so a rank that stopped answering
/// is named); each must end within `limit` (on the other ranks 30 s more, so that rank 0 is
/// the first to notice). Past either, `stuck` with the ranks missing (none when they stopped
/// inside the collective, where MPI does not say which), the step and why.
// The `stuck` call ends the job (its result is uninhabited), which rustc reports as making
// the rest of its branch unreachable.
#[allow(unreachable_code)]
fn collectives(
    comm: &Comm,
    max_bytes: usize,
    reps: usize,
    host: &str,
    limit: Duration,
    stuck: &mut dyn FnMut(Vec<usize>, String, String) -> Never,
) -> Vec<Result<BenchResult>> {
    let mut out = Vec::new();
    for op in [Collective::Reduce, Collective::Gather, Collective::ToAll] {
        let step = format!("collective {}", op.name());
        let start = Instant::now();
        if comm.rank == 0 {
            let all: Vec<usize> = (1..comm.size).collect();
            let (_, missing) = comm.gather::<Step>(&all, start + limit);
            if !missing.is_empty() {
                let why = format!("did not reach its start within {} s", limit.as_secs());
                stuck(missing, step, why);
            }
        } else {
            fault(host, "collectives");
            comm.send(0, TAG, &Step::Ready(0), start + limit);
        }
        let deadline = if comm.rank == 0 {
            start + limit
        } else {
            start + limit + Duration::from_secs(30)
        };
        let curve = collective(comm, op, max_bytes, reps, deadline, &mut |why| {
            stuck(Vec::new(), step.clone(), why)
        });
        out.push(curve.and_then(|curve| collective_result(&curve, op, comm.size, host)));
    }
    out
}
