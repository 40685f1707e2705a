//! A real Slurm on one machine: Debian's `slurm-wlm` and `munge` run a controller in the root
//! network namespace and one `slurmd` per "host", each host a network namespace on a bridge
//! with only the test's own subnet, named by a UTS namespace of its own; then `peakbench
//! cluster run` is launched as a user launches it: `sbatch examples/cluster.sbatch` (mpirun
//! inside the batch job), `salloc … mpirun …`, and `srun --mpi=pmix` directly; and
//! `examples/slurm-healthcheck.sh` as the nodes' HealthCheckProgram (docs/check.md), one node's
//! slurmd under a CPU quota that its health checks inherit.
//!
//! How the lab is built, and why (docs/cluster.md, "Tests: a real Slurm"):
//! - every daemon reads the lab's own files: `slurm.conf` and `mpi.conf` in the lab's directory
//!   (`-f`, and `SLURM_CONF` for the clients), munged on the lab's own socket and key
//!   (`AuthInfo=socket=`), the nodes' addresses in `NodeAddr=`: /etc/slurm, /etc/munge and
//!   /etc/hosts are not touched;
//! - `slurmctld` in the root namespace under the host name `ctl` (`unshare --uts`) on the
//!   bridge's address; each `slurmd` entered into its host's network namespace with `nsenter`
//!   (not `ip netns exec`, which remounts /sys, where slurmd then finds no cgroup tree), in a
//!   UTS namespace named after the host and a mount namespace of its own, where the lab's PMIx
//!   client directory is bind-mounted from a directory of that host: Slurm's PMIx plugin names
//!   that directory by job and step only (`spmix_appdir_UID_JOB.STEP`), so hosts that share a
//!   /tmp collide on it and `srun --mpi=pmix` launches nothing;
//! - `ProctrackType=proctrack/linuxproc`, `TaskPlugin=task/none`: no cgroups.
//!
//! Built only with the cargo feature `mpi`; each test needs root and the Slurm, munge, Open MPI
//! and iproute2 programs; without them it prints why and passes, except in CI's strict mode
//! (`PEAKBENCH_STRICT_TESTS=1`), where it fails. A guard ends every daemon and every process
//! in the namespaces and removes the namespaces, links and files, on success and on failure.
#![cfg(feature = "mpi")]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

fn sh(program: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Every program a Slurm lab runs.
const TOOLS: [&str; 11] = [
    "ip",
    "nsenter",
    "unshare",
    "setpriv",
    "munged",
    "slurmctld",
    "slurmd",
    "sbatch",
    "salloc",
    "srun",
    "mpirun",
];

/// A Slurm cluster of network namespaces; everything it started or made is ended and removed
/// when dropped.
struct Slurm {
    net: u8,
    bridge: String,
    subnet: String,
    /// The node names, which are also the hosts' names.
    hosts: Vec<String>,
    namespaces: Vec<String>,
    veths: Vec<String>,
    /// munged, slurmctld and each slurmd, in that order.
    daemons: Vec<Child>,
    /// The HealthCheckProgram's text, where the lab has one (`{d}` is the lab's directory).
    health: Option<String>,
    dir: tempfile::TempDir,
}

impl Slurm {
    /// `count` Slurm hosts on the bridge of subnet 10.231.`net`.0/24, every node idle.
    fn new(net: u8, count: usize) -> Result<Slurm, String> {
        Slurm::with_health(net, count, None)
    }

    /// The same, with `health` as its HealthCheckProgram, run every 5 s on every node.
    fn with_health(net: u8, count: usize, health: Option<&str>) -> Result<Slurm, String> {
        common::root()?;
        for tool in TOOLS {
            common::on_path(tool)?;
        }
        // Under /tmp, not the target dir: the Unix sockets of munge, slurmd and PMIx live
        // here, and a socket's path has at most 107 bytes.
        let dir = tempfile::Builder::new()
            .prefix("pbslurm")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let id = std::process::id() % 100_000;
        let mut lab = Slurm {
            net,
            bridge: format!("pbsb{id}n{net}"),
            subnet: format!("10.231.{net}.0/24"),
            hosts: Vec::new(),
            namespaces: Vec::new(),
            veths: Vec::new(),
            daemons: Vec::new(),
            health: health.map(str::to_string),
            dir,
        };
        lab.bridge.truncate(15);
        lab.network(count)?;
        lab.configure()?;
        lab.start()?;
        Ok(lab)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn network(&mut self, count: usize) -> Result<(), String> {
        let net = self.net;
        let id = std::process::id() % 100_000;
        sh("ip", &["link", "add", &self.bridge, "type", "bridge"])?;
        let ctl = format!("10.231.{net}.254/24");
        sh("ip", &["addr", "add", &ctl, "dev", &self.bridge])?;
        sh("ip", &["link", "set", &self.bridge, "up"])?;
        for i in 0..count {
            let ns = format!("pbs{id}n{net}h{i}");
            let veth = format!("pbw{id}n{net}h{i}");
            sh("ip", &["netns", "add", &ns])?;
            self.namespaces.push(ns.clone());
            sh(
                "ip",
                &[
                    "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns,
                ],
            )?;
            self.veths.push(veth.clone());
            sh("ip", &["link", "set", &veth, "master", &self.bridge, "up"])?;
            let addr = format!("10.231.{net}.{}/24", i + 1);
            sh("ip", &["-n", &ns, "addr", "add", &addr, "dev", "eth0"])?;
            sh("ip", &["-n", &ns, "link", "set", "eth0", "up"])?;
            sh("ip", &["-n", &ns, "link", "set", "lo", "up"])?;
            self.hosts.push(format!("node-{i}"));
        }
        Ok(())
    }

    /// slurm.conf, mpi.conf, the munge key and the directories.
    fn configure(&self) -> Result<(), String> {
        let d = self.dir.path().display().to_string();
        let net = self.net;
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let io = |e: std::io::Error| e.to_string();
        // munged runs as the munge user: it must reach the socket's directory.
        sh("chmod", &["755", &d])?;
        for sub in ["state", "munge", "pmix"] {
            std::fs::create_dir_all(self.path(sub)).map_err(io)?;
        }
        for host in &self.hosts {
            std::fs::create_dir_all(self.path(&format!("spool/{host}"))).map_err(io)?;
            std::fs::create_dir_all(self.path(&format!("pmix-{host}"))).map_err(io)?;
        }
        let nodes: String = self
            .hosts
            .iter()
            .enumerate()
            .map(|(i, h)| {
                format!(
                    "NodeName={h} NodeAddr=10.231.{net}.{} CPUs={cpus} State=UNKNOWN\n",
                    i + 1
                )
            })
            .collect();
        let conf = format!(
            "ClusterName=pblab{net}\n\
             SlurmctldHost=ctl(10.231.{net}.254)\n\
             SlurmctldPort={ctl_port}\n\
             SlurmdPort={ctl_port_1}\n\
             AuthType=auth/munge\n\
             CredType=cred/munge\n\
             AuthInfo=socket={d}/munge/socket\n\
             SlurmUser=root\n\
             SlurmdUser=root\n\
             StateSaveLocation={d}/state\n\
             SlurmdSpoolDir={d}/spool/%n\n\
             SlurmctldPidFile={d}/slurmctld.pid\n\
             SlurmdPidFile={d}/slurmd-%n.pid\n\
             SlurmctldLogFile={d}/slurmctld.log\n\
             SlurmdLogFile={d}/slurmd-%n.log\n\
             ProctrackType=proctrack/linuxproc\n\
             TaskPlugin=task/none\n\
             JobAcctGatherType=jobacct_gather/none\n\
             AccountingStorageType=accounting_storage/none\n\
             SchedulerType=sched/builtin\n\
             SelectType=select/linear\n\
             MpiDefault=none\n\
             ReturnToService=2\n\
             {nodes}\
             PartitionName=lab Nodes=ALL Default=YES MaxTime=10 State=UP\n",
            ctl_port = 17000 + 2 * u32::from(net),
            ctl_port_1 = 17001 + 2 * u32::from(net),
        );
        let conf = match &self.health {
            Some(text) => {
                let program = self.path("healthcheck.sh");
                std::fs::write(&program, text.replace("{d}", &d)).map_err(io)?;
                sh("chmod", &["755", program.to_str().unwrap()])?;
                format!(
                    "{conf}HealthCheckProgram={}\nHealthCheckInterval=5\nHealthCheckNodeState=ANY\n",
                    program.display()
                )
            }
            None => conf,
        };
        std::fs::write(self.path("slurm.conf"), conf).map_err(io)?;
        // Each slurmd sees its own directory here (a bind mount in its mount namespace).
        std::fs::write(
            self.path("mpi.conf"),
            format!("PMIxCliTmpDirBase={d}/pmix\n"),
        )
        .map_err(io)?;
        let key: Vec<u8> = (0..1024).map(|_| rand_byte()).collect();
        std::fs::write(self.path("munge/key"), key).map_err(io)?;
        sh("chmod", &["700", &format!("{d}/munge")])?;
        sh("chmod", &["600", &format!("{d}/munge/key")])?;
        sh("chown", &["-R", "munge:munge", &format!("{d}/munge")])?;
        Ok(())
    }

    fn daemon(&mut self, cmd: &mut Command) -> Result<(), String> {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("{cmd:?}: {e}"))?;
        self.daemons.push(child);
        Ok(())
    }

    /// munged, slurmctld, every slurmd (each in the foreground, a child of the test), then
    /// waits until every node is idle.
    fn start(&mut self) -> Result<(), String> {
        let d = self.dir.path().display().to_string();
        let conf = format!("{d}/slurm.conf");
        // setpriv execs munged (runuser would stay its parent, and killing it would leave
        // munged running).
        self.daemon(Command::new("setpriv").args([
            "--reuid=munge",
            "--regid=munge",
            "--init-groups",
            "munged",
            "-F",
            "--force",
            &format!("--socket={d}/munge/socket"),
            &format!("--key-file={d}/munge/key"),
            &format!("--pid-file={d}/munge/pid"),
            &format!("--log-file={d}/munge/log"),
            &format!("--seed-file={d}/munge/seed"),
        ]))?;
        wait_for(Duration::from_secs(10), || {
            self.path("munge/socket").exists()
        })
        .map_err(|_| format!("munged did not start: {}", self.log("munge/log")))?;
        self.daemon(Command::new("unshare").args([
            "--uts",
            "sh",
            "-c",
            "hostname ctl; exec slurmctld -D -f \"$0\"",
            &conf,
        ]))?;
        for (host, ns) in self.hosts.clone().iter().zip(self.namespaces.clone()) {
            self.daemon(Command::new("nsenter").args([
                &format!("--net=/run/netns/{ns}"),
                "unshare",
                "--uts",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                "hostname \"$0\" && mount --bind \"$1\" \"$2\" && exec slurmd -D -f \"$3\"",
                host,
                &format!("{d}/pmix-{host}"),
                &format!("{d}/pmix"),
                &conf,
            ]))?;
        }
        let idle = wait_for(Duration::from_secs(60), || {
            self.client("sinfo")
                .args(["-h", "-N", "-o", "%T"])
                .output()
                .is_ok_and(|o| {
                    let text = String::from_utf8_lossy(&o.stdout).into_owned();
                    text.lines().filter(|l| l.trim() == "idle").count() == self.hosts.len()
                })
        });
        idle.map_err(|_| {
            format!(
                "the Slurm nodes did not become idle within 60 s: {}",
                self.log("slurmctld.log")
            )
        })
    }

    /// A Slurm client command of this lab (`SLURM_CONF`), its history and home isolated, the
    /// Open MPI settings of the lab in its environment (the jobs inherit them).
    fn client(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.env("SLURM_CONF", self.path("slurm.conf"))
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .env("OMPI_MCA_btl", "tcp,self")
            .env("OMPI_MCA_btl_tcp_if_include", &self.subnet)
            .env("OMPI_MCA_oob_tcp_if_include", &self.subnet)
            .current_dir(self.dir.path());
        common::isolate(&mut cmd);
        cmd
    }

    /// The end of a log of the lab, for a failure's message.
    fn log(&self, name: &str) -> String {
        let text = std::fs::read_to_string(self.path(name)).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(20).collect();
        format!(
            "{name}:\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        )
    }

    /// Every log of the lab's daemons.
    fn logs(&self) -> String {
        let mut all = vec![self.log("slurmctld.log")];
        for host in &self.hosts {
            all.push(self.log(&format!("slurmd-{host}.log")));
        }
        all.join("\n")
    }

    /// Runs `cmd` with a deadline (killed past it: the guard ends what the job left).
    fn run(&self, cmd: &mut Command, deadline: Duration) -> Output {
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the Slurm client starts");
        let pid = child.id();
        let start = Instant::now();
        let watchdog = std::thread::spawn(move || {
            while start.elapsed() < deadline {
                std::thread::sleep(Duration::from_millis(200));
                // SAFETY: signal 0 only checks that the process exists.
                if unsafe { libc::kill(pid as i32, 0) } != 0 {
                    return;
                }
            }
            // SAFETY: ends the Slurm client (this test's child).
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        });
        let output = child.wait_with_output().expect("the Slurm client ends");
        let _ = watchdog.join();
        output
    }

    /// The document a job wrote.
    fn document(&self, path: &Path) -> serde_json::Value {
        let bytes = std::fs::read(path)
            .unwrap_or_else(|e| panic!("{}: {e}\n{}", path.display(), self.logs()));
        serde_json::from_slice(&bytes).expect("the document is JSON")
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        // What the jobs left (slurmstepd, ranks, orted) and the slurmds: every process in the
        // namespaces; then the controller and munged.
        for ns in &self.namespaces {
            if let Ok(out) = Command::new("ip").args(["netns", "pids", ns]).output() {
                for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                    if let Ok(pid) = pid.parse::<i32>() {
                        // SAFETY: a process in this test's own namespace.
                        unsafe { libc::kill(pid, libc::SIGKILL) };
                    }
                }
            }
        }
        for child in self.daemons.iter_mut().rev() {
            let _ = child.kill();
            let _ = child.wait();
        }
        for ns in &self.namespaces {
            let _ = sh("ip", &["netns", "del", ns]);
        }
        for veth in &self.veths {
            let _ = sh("ip", &["link", "del", veth]);
        }
        let _ = sh("ip", &["link", "del", &self.bridge]);
    }
}

/// One byte of the munge key from the kernel's random source.
fn rand_byte() -> u8 {
    use std::io::Read;
    thread_local! {
        static URANDOM: std::cell::RefCell<Option<std::fs::File>> =
            std::cell::RefCell::new(std::fs::File::open("/dev/urandom").ok());
    }
    URANDOM.with(|f| {
        let mut b = [0u8];
        if let Some(f) = f.borrow_mut().as_mut() {
            let _ = f.read_exact(&mut b);
        }
        b[0]
    })
}

/// Polls `ready` every 200 ms until it holds or `limit` passes.
fn wait_for(limit: Duration, mut ready: impl FnMut() -> bool) -> Result<(), ()> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if ready() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(())
}

fn slurm(net: u8, count: usize) -> Option<Slurm> {
    match Slurm::new(net, count) {
        Ok(lab) => Some(lab),
        Err(why) => {
            common::prerequisite(Err(why));
            None
        }
    }
}

/// A node-local suite of one short case, so that a job takes seconds.
fn tiny_config(lab: &Slurm) -> PathBuf {
    let path = lab.path("tiny.toml");
    std::fs::write(
        &path,
        "[[cpu]]\nprecision = [\"f64\"]\nthreads = [1]\nduration = \"200ms\"\n",
    )
    .unwrap();
    path
}

/// The options of every job here: the tiny suite, then a short matrix.
fn short_run(config: &Path) -> Vec<String> {
    [
        "--config",
        config.to_str().unwrap(),
        "--phases",
        "local,matrix",
        "-r",
        "1",
        "--warmup",
        "0",
        "--matrix-duration",
        "200ms",
    ]
    .map(String::from)
    .to_vec()
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The document has every host of the allocation, each host's node-local result and every
/// link, and records job `id`: its node list, partition, scheduler and variables.
fn check_document(doc: &serde_json::Value, lab: &Slurm, id: &str) {
    assert_eq!(doc["status"], "complete");
    let hosts: Vec<&String> = doc["hosts"].as_object().unwrap().keys().collect();
    assert_eq!(hosts, lab.hosts.iter().collect::<Vec<_>>());
    let cluster = &doc["cluster"];
    assert_eq!(cluster["phase"], "done");
    assert_eq!(cluster["ranks"], lab.hosts.len());
    // The node-local case once per host (in the order the hosts answered).
    let mut local: Vec<&str> = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["subsystem"] == "cpu")
        .map(|r| r["host"].as_str().unwrap())
        .collect();
    local.sort_unstable();
    assert_eq!(
        local,
        lab.hosts.iter().map(String::as_str).collect::<Vec<_>>()
    );
    for m in cluster["matrices"].as_array().unwrap() {
        for (i, row) in m["values"].as_array().unwrap().iter().enumerate() {
            for (j, v) in row.as_array().unwrap().iter().enumerate() {
                assert_eq!(v.is_null(), i == j, "{} [{i}][{j}]", m["metric"]);
            }
        }
    }
    let job = &cluster["job"];
    assert_eq!(job["scheduler"], "slurm", "{job}");
    assert_eq!(job["id"], id);
    assert_eq!(job["partition"], "lab");
    let nodes: Vec<String> = serde_json::from_value(job["nodes"].clone()).unwrap();
    assert_eq!(nodes, lab.hosts);
    let count = lab.hosts.len().to_string();
    assert_eq!(job["variables"]["SLURM_JOB_NUM_NODES"], count.as_str());
    assert_eq!(
        job["variables"]["SLURM_CLUSTER_NAME"],
        format!("pblab{}", lab.net)
    );
}

#[test]
fn sbatch_of_the_example_script_gives_one_document_with_every_host_and_the_job() {
    let Some(lab) = slurm(51, 3) else { return };
    let config = tiny_config(&lab);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cluster.sbatch");
    let out_file = lab.path("cluster.json");
    let log = lab.path("job-%j.out");
    let mut sbatch = lab.client("sbatch");
    sbatch
        .env("PEAKBENCH", common::binary())
        .env("PEAKBENCH_OUTPUT", &out_file)
        .args(["--parsable", "--wait", "--nodes=3", "--time=2"])
        .arg(format!("--output={}", log.display()))
        .arg(&script)
        .args(short_run(&config))
        .arg("--no-history");
    let out = lab.run(&mut sbatch, Duration::from_secs(120));
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let job_log = std::fs::read_to_string(lab.path(&format!("job-{id}.out"))).unwrap_or_default();
    assert!(
        out.status.success(),
        "{}\njob output: {job_log}\n{}",
        text(&out),
        lab.logs()
    );
    check_document(&lab.document(&out_file), &lab, &id);
}

#[test]
fn salloc_then_mpirun_records_the_allocation() {
    let Some(lab) = slurm(52, 2) else { return };
    let config = tiny_config(&lab);
    let out_file = lab.path("cluster.json");
    let mut salloc = lab.client("salloc");
    salloc
        .args(["--nodes=2", "--ntasks-per-node=1", "--time=2", "mpirun"])
        .arg(common::binary())
        .args(["cluster", "run", "--no-history", "-o"])
        .arg(&out_file)
        .args(short_run(&config));
    let out = lab.run(&mut salloc, Duration::from_secs(90));
    assert!(out.status.success(), "{}\n{}", text(&out), lab.logs());
    // salloc says "Granted job allocation ID" on stderr.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let id = stderr
        .lines()
        .find_map(|l| l.split("Granted job allocation ").nth(1))
        .expect("salloc names the job")
        .trim()
        .to_string();
    check_document(&lab.document(&out_file), &lab, &id);
}

#[test]
fn srun_with_pmix_launches_the_ranks_directly() {
    let Some(lab) = slurm(53, 2) else { return };
    let config = tiny_config(&lab);
    let out_file = lab.path("cluster.json");
    let mut srun = lab.client("srun");
    srun.args([
        "--nodes=2",
        "--ntasks-per-node=1",
        "--time=2",
        "--mpi=pmix",
        "--label",
    ])
    .arg(common::binary())
    .args(["cluster", "run", "--no-history", "-o"])
    .arg(&out_file)
    .args(short_run(&config));
    let out = lab.run(&mut srun, Duration::from_secs(90));
    assert!(out.status.success(), "{}\n{}", text(&out), lab.logs());
    let doc = lab.document(&out_file);
    // srun names no job on its output; the lab's controller is new, so its first job is 1.
    check_document(&doc, &lab, "1");
    assert_eq!(doc["cluster"]["job"]["variables"]["SLURM_MPI_TYPE"], "pmix");
}

/// The lab's HealthCheckProgram: once the test has made `{d}/hc-go`, the example script with
/// this host's settings (slurmd gives it a bare environment, as on a real node), then a line
/// in `{d}/hc-runs` saying the host ran it.
fn health_wrapper(script: &Path) -> String {
    format!(
        "#!/bin/sh\n\
         [ -e {{d}}/hc-go ] || exit 0\n\
         node=${{SLURMD_NODENAME:-$(hostname -s)}}\n\
         export PEAKBENCH_HEALTHCHECK_CONF=/nonexistent SLURMD_NODENAME=$node HOME={{d}}\n\
         export PEAKBENCH={bin} SLURM_CONF={{d}}/slurm.conf\n\
         export PEAKBENCH_BASELINE={{d}}/baseline-$node.json\n\
         export PEAKBENCH_DB={{d}}/hc-$node/history.db PEAKBENCH_LOG={{d}}/hc-$node.log\n\
         export PEAKBENCH_LOCK={{d}}/hc.lock\n\
         export PEAKBENCH_ARGS=\"--config {{d}}/hc-plan.toml -r 5 --remeasure 8\"\n\
         sh {script}\n\
         echo \"$node\" >> {{d}}/hc-runs\n",
        bin = common::binary(),
        script = script.display()
    )
}

/// A CPU quota of `cpus` on process `pid` (and what it forks), in a cgroup of its own (v1's
/// cpu controller or v2); the cgroup's directory, removed by the caller.
fn cpu_quota(pid: u32, cpus: f64) -> Result<PathBuf, String> {
    let io = |e: std::io::Error| e.to_string();
    let v2 = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    let dir = if v2 {
        PathBuf::from(format!("/sys/fs/cgroup/pbhc{pid}"))
    } else {
        PathBuf::from(format!("/sys/fs/cgroup/cpu/pbhc{pid}"))
    };
    std::fs::create_dir_all(&dir).map_err(io)?;
    let quota = (cpus * 100_000.0) as u64;
    if v2 {
        let _ = std::fs::write("/sys/fs/cgroup/cgroup.subtree_control", "+cpu");
        std::fs::write(dir.join("cpu.max"), format!("{quota} 100000")).map_err(io)?;
    } else {
        std::fs::write(dir.join("cpu.cfs_period_us"), "100000").map_err(io)?;
        std::fs::write(dir.join("cpu.cfs_quota_us"), quota.to_string()).map_err(io)?;
    }
    std::fs::write(dir.join("cgroup.procs"), pid.to_string()).map_err(io)?;
    Ok(dir)
}

/// A baseline of this machine learned from twelve checks of the health check's plan, run in
/// the network namespace of the lab's first host (where slurmd runs the health check).
fn learn_baseline(lab: &Slurm) -> PathBuf {
    let db = lab.path("learn/history.db");
    let plan = lab.path("hc-plan.toml");
    let check = |extra: &[&str]| {
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--net=/run/netns/{}", lab.namespaces[0]))
            .arg(common::binary());
        common::isolate(&mut cmd);
        cmd.env("PEAKBENCH_DB", &db).args(extra);
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{extra:?}: {}", text(&out));
    };
    // The fewest learning checks a baseline is learned from, in one command.
    check(&[
        "check",
        "--learn",
        "12",
        "--config",
        plan.to_str().unwrap(),
        "-r",
        "5",
    ]);
    let file = lab.path("learned.json");
    check(&["baseline", "export", "node", file.to_str().unwrap()]);
    file
}

/// The state and reason of every node, by `sinfo`.
fn node_states(lab: &Slurm) -> Vec<(String, String, String)> {
    let out = lab
        .client("sinfo")
        .args(["-h", "-N", "-o", "%N|%T|%E"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, '|');
            Some((
                parts.next()?.to_string(),
                parts.next()?.to_string(),
                parts.next()?.to_string(),
            ))
        })
        .collect()
}

#[test]
fn the_health_check_drains_exactly_the_host_under_a_cpu_quota_naming_it_and_resumes_only_its_own() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/slurm-healthcheck.sh");
    let Some(lab) = common::on_path("flock")
        .and_then(|_| common::on_path("scontrol"))
        .map_err(|why| common::prerequisite(Err(why)))
        .ok()
        .and_then(
            |_| match Slurm::with_health(54, 3, Some(&health_wrapper(&script))) {
                Ok(lab) => Some(lab),
                Err(why) => {
                    common::prerequisite(Err(why));
                    None
                }
            },
        )
    else {
        return;
    };
    std::fs::write(
        lab.path("hc-plan.toml"),
        "[[cpu]]\nprecision = [\"f64\"]\nfma = \"yes\"\nthreads = [1]\nduration = \"100ms\"\n",
    )
    .unwrap();
    let learned = learn_baseline(&lab);
    for host in &lab.hosts {
        std::fs::copy(&learned, lab.path(&format!("baseline-{host}.json"))).unwrap();
    }
    // node-1's slurmd (the daemon after munged, slurmctld and node-0's) under 0.4 CPU.
    let slow = &lab.hosts[1];
    let cgroup = cpu_quota(lab.daemons[3].id(), 0.4).expect("a CPU quota");
    std::fs::write(lab.path("hc-go"), "").unwrap();
    let ran = |host: &str| {
        std::fs::read_to_string(lab.path("hc-runs"))
            .unwrap_or_default()
            .lines()
            .any(|l| l == host)
    };
    let done = wait_for(Duration::from_secs(150), || {
        lab.hosts.iter().all(|h| ran(h))
            && node_states(&lab)
                .iter()
                .any(|(n, s, _)| n == slow && s.contains("drain"))
    });
    let states = node_states(&lab);
    let logs: Vec<String> = lab
        .hosts
        .iter()
        .map(|h| lab.log(&format!("hc-{h}.log")))
        .collect();
    lift_quota(&cgroup);
    eprintln!("node states: {states:?}");
    assert!(
        done.is_ok(),
        "{states:?}\n{}\n{}",
        logs.join("\n"),
        lab.logs()
    );
    for (node, state, reason) in &states {
        if node == slow {
            assert!(state.contains("drain"), "{states:?}");
            assert!(reason.starts_with("peakbench: cpu-quota"), "{reason}");
            assert!(reason.len() <= 100, "{reason}");
        } else {
            assert_eq!(state, "idle", "{states:?}\n{}", logs.join("\n"));
        }
    }
    // The quota lifted, node-1 passes and is resumed. node-2, drained by an administrator,
    // then fails its check (under the same quota): it stays drained with the administrator's
    // reason, not the check's, or a later passing check would take the drain for its own and
    // resume the node. (CI once saw node-2 fail by the host's noise and lose "maintenance".)
    let admin = lab
        .client("scontrol")
        .args([
            "update",
            "NodeName=node-2",
            "State=DRAIN",
            "Reason=maintenance",
        ])
        .output()
        .unwrap();
    assert!(admin.status.success(), "{}", text(&admin));
    let node2_quota = cpu_quota(lab.daemons[4].id(), 0.4).expect("a CPU quota");
    // A check of node-2's that began before the quota runs outside it and passes: wait for
    // one that ran under it.
    let failed_under_quota = || {
        lab.log("hc-node-2.log")
            .contains("already drained for another reason, left as it is: peakbench: cpu-quota")
    };
    let resumed = wait_for(Duration::from_secs(150), || {
        failed_under_quota()
            && node_states(&lab)
                .iter()
                .any(|(n, s, _)| n == slow && s == "idle")
    });
    let states = node_states(&lab);
    let node2_log = lab.log("hc-node-2.log");
    lift_quota(&node2_quota);
    eprintln!("after: {states:?}");
    assert!(
        resumed.is_ok(),
        "{states:?}\n{}\n{node2_log}",
        lab.log("hc-node-1.log")
    );
    let node2 = states.iter().find(|(n, _, _)| n == "node-2").unwrap();
    assert!(node2.1.starts_with("drain"), "{states:?}");
    assert_eq!(node2.2, "maintenance");
}

/// Moves the quota host's slurmd (and what it runs) out of its cgroup, again while a health
/// check it started before the move is still in it, and removes the cgroup.
fn lift_quota(cgroup: &Path) {
    let root = cgroup.parent().unwrap().join("cgroup.procs");
    for _ in 0..200 {
        let procs = std::fs::read_to_string(cgroup.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.split_whitespace() {
            let _ = std::fs::write(&root, pid);
        }
        if std::fs::remove_dir(cgroup).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
