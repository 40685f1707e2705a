//! A real cluster on one machine: network namespaces joined by a bridge (only the test's own
//! addresses), each "host" with its own host name (a UTS namespace), launched with the real
//! `mpirun` through an rsh agent script that runs each host's daemon with `ip netns exec`.
//! Ground truths are imposed and peakbench must read them.
//!
//! Built only with the cargo feature `mpi` (`cargo test --release --features mpi --test
//! cluster`, which `.ci/run` runs). Each test needs root, `ip`, `tc`, `unshare` and `mpirun`;
//! without them it prints why and passes, except in CI's strict mode, where it fails. Every
//! namespace, link and file is removed by a guard, on success and on failure.
#![cfg(feature = "mpi")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
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

/// The namespaces of one test, removed when dropped.
struct Lab {
    bridge: String,
    subnet: String,
    hosts: Vec<String>,
    namespaces: Vec<String>,
    veths: Vec<String>,
    dir: PathBuf,
}

impl Lab {
    /// Shapes both directions of host `i`'s link to 300 Mbit/s: a tbf on its namespace's
    /// eth0 and on the bridge's port.
    ///
    /// The bucket holds 2 MiB, 56 ms at the rate. The tbf sends from the NET_TX softirq when
    /// its timer fires, and tokens that arrive while the bucket is full are lost: a stall of
    /// the sender, of that softirq (in ksoftirqd while the other pair of the round floods the
    /// bridge on the same 2 CPUs) or of the whole guest (a loaded CI host) longer than the
    /// bucket lowers the sample. CI runs read 252 Mb/s through 64 KiB (1.7 ms) and 269.8
    /// through 512 KiB (14 ms); this machine, with or without two spinning processes, reads
    /// 286.3–287.3 through either. The flow is backlogged from the omitted first 250 ms on, so
    /// the bucket is empty when a sample starts, unless a stall at that very moment lets it
    /// fill: then a 1 s sample reads at most 5.6 % above the rate, and the test's three
    /// repetitions (whose median it checks) leave such a sample out.
    fn shape_300mbit(&self, i: usize) {
        let tbf = ["rate", "300mbit", "burst", "2mb", "latency", "50ms"];
        let mut inside = vec!["-n", &self.namespaces[i], "qdisc", "add", "dev", "eth0"];
        inside.extend(["root", "tbf"]);
        inside.extend(tbf);
        sh("tc", &inside).unwrap();
        let mut outside = vec!["qdisc", "add", "dev", &self.veths[i], "root", "tbf"];
        outside.extend(tbf);
        sh("tc", &outside).unwrap();
    }

    /// `count` hosts on the bridge of subnet 10.231.`net`.0/24; `cgroup(i)` is the cpuset and
    /// cpu cgroup directory (under the v1 hierarchies) host i's processes join, if any.
    fn new(net: u8, count: usize, cgroups: &[Option<String>]) -> Result<Lab, String> {
        common::root()?;
        for tool in ["ip", "tc", "unshare", "mpirun"] {
            common::on_path(tool)?;
        }
        let id = std::process::id() % 100_000;
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cluster-{id}-{net}"));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let mut lab = Lab {
            bridge: format!("pbcb{id}n{net}"),
            subnet: format!("10.231.{net}.0/24"),
            hosts: Vec::new(),
            namespaces: Vec::new(),
            veths: Vec::new(),
            dir,
        };
        lab.bridge.truncate(15);
        sh("ip", &["link", "add", &lab.bridge, "type", "bridge"])?;
        sh(
            "ip",
            &[
                "addr",
                "add",
                &format!("10.231.{net}.254/24"),
                "dev",
                &lab.bridge,
            ],
        )?;
        sh("ip", &["link", "set", &lab.bridge, "up"])?;
        let mut cases = String::new();
        for i in 0..count {
            let ns = format!("pbc{id}n{net}h{i}");
            let host = format!("pbc{net}h{i}");
            let veth = format!("pbv{id}n{net}h{i}");
            sh("ip", &["netns", "add", &ns])?;
            lab.namespaces.push(ns.clone());
            sh(
                "ip",
                &[
                    "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns,
                ],
            )?;
            lab.veths.push(veth.clone());
            sh("ip", &["link", "set", &veth, "master", &lab.bridge, "up"])?;
            let addr = format!("10.231.{net}.{}/24", i + 1);
            sh("ip", &["-n", &ns, "addr", "add", &addr, "dev", "eth0"])?;
            sh("ip", &["-n", &ns, "link", "set", "eth0", "up"])?;
            sh("ip", &["-n", &ns, "link", "set", "lo", "up"])?;
            let join = match cgroups.get(i).cloned().flatten() {
                Some(group) => format!(
                    "echo $$ > /sys/fs/cgroup/cpuset/{group}/tasks; \
                     echo $$ > /sys/fs/cgroup/cpu/{group}/tasks; "
                ),
                None => String::new(),
            };
            cases.push_str(&format!("  {host}) {join}ns={ns} ;;\n"));
            lab.hosts.push(host);
        }
        // Open MPI runs `agent HOST COMMAND…` for each host's daemon, as it would run ssh:
        // here the host's processes join its cgroups, then its network namespace, then a UTS
        // namespace of its own named after it.
        let agent = format!(
            "#!/bin/sh\nhost=$1; shift\ncase \"$host\" in\n{cases}  *) echo \"no host $host\" >&2; \
             exit 1 ;;\nesac\nexec ip netns exec \"$ns\" unshare --uts sh -c 'hostname \"$0\"; \
             eval \"$1\"' \"$host\" \"$*\"\n"
        );
        let path = lab.agent();
        std::fs::write(&path, agent).map_err(|e| e.to_string())?;
        sh("chmod", &["+x", path.to_str().unwrap()])?;
        Ok(lab)
    }

    fn agent(&self) -> PathBuf {
        self.dir.join("agent.sh")
    }

    /// `peakbench cluster run ARGS` on every host, one rank each, with a deadline; the document
    /// it wrote and the output.
    fn run(&self, args: &[&str], deadline: Duration) -> (Option<serde_json::Value>, Output) {
        self.run_with(args, &[], deadline)
    }

    /// As [`Lab::run`], with environment variables set on every rank (`mpirun -x`).
    fn run_with(
        &self,
        args: &[&str],
        env: &[(&str, &str)],
        deadline: Duration,
    ) -> (Option<serde_json::Value>, Output) {
        let child = self.spawn(args, env);
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
            // SAFETY: ends mpirun (this test's child), which ends its ranks.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        });
        let output = child.wait_with_output().expect("mpirun ends");
        let _ = watchdog.join();
        (self.document(), output)
    }

    /// The document the job wrote so far, if it parses.
    fn document(&self) -> Option<serde_json::Value> {
        std::fs::read(self.dir.join("out.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
    }

    /// Starts `peakbench cluster run ARGS` on every host (the output file removed first).
    fn spawn(&self, args: &[&str], env: &[(&str, &str)]) -> std::process::Child {
        self.spawn_on(self.hosts.len(), args, env)
    }

    /// [`Lab::run`] on the first `n` hosts only.
    fn run_on(
        &self,
        n: usize,
        args: &[&str],
        deadline: Duration,
    ) -> (Option<serde_json::Value>, Output) {
        let child = self.spawn_on(n, args, &[]);
        let pid = child.id() as i32;
        let watchdog = std::thread::spawn(move || {
            let start = Instant::now();
            while start.elapsed() < deadline {
                std::thread::sleep(Duration::from_millis(200));
                // SAFETY: signal 0 only checks that the process exists.
                if unsafe { libc::kill(pid, 0) } != 0 {
                    return;
                }
            }
            // SAFETY: ends mpirun (this test's child), which ends its ranks.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        });
        let output = child.wait_with_output().expect("mpirun ends");
        let _ = watchdog.join();
        (self.document(), output)
    }

    /// Starts `peakbench cluster run ARGS` on the first `n` hosts.
    fn spawn_on(&self, n: usize, args: &[&str], env: &[(&str, &str)]) -> std::process::Child {
        let out_file = self.dir.join("out.json");
        let _ = std::fs::remove_file(&out_file);
        let mut cmd = Command::new("mpirun");
        cmd.args(["--allow-run-as-root", "-np"])
            .arg(n.to_string())
            .arg("--host")
            .arg(self.hosts[..n].join(","))
            .args(["--mca", "plm_rsh_agent"])
            .arg(self.agent())
            .args(["--mca", "btl", "tcp,self"])
            .args(["--mca", "btl_tcp_if_include", &self.subnet])
            .args(["--mca", "oob_tcp_if_include", &self.subnet]);
        for (name, value) in env {
            cmd.arg("-x").arg(name).env(name, value);
        }
        cmd.arg(common::binary())
            .args(["cluster", "run", "--no-history", "-o"])
            .arg(&out_file)
            .args(args);
        common::isolate(&mut cmd);
        cmd.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("mpirun starts")
    }

    /// The peakbench processes in host `i`'s namespace.
    fn peakbench_pids(&self, i: usize) -> Vec<i32> {
        let out = Command::new("ip")
            .args(["netns", "pids", &self.namespaces[i]])
            .output()
            .expect("ip netns pids");
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .filter(|p| {
                std::fs::read_to_string(format!("/proc/{p}/comm"))
                    .is_ok_and(|c| c.trim() == "peakbench")
            })
            .collect()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for ns in &self.namespaces {
            let _ = sh("ip", &["netns", "del", ns]);
        }
        for veth in &self.veths {
            let _ = sh("ip", &["link", "del", veth]);
        }
        let _ = sh("ip", &["link", "del", &self.bridge]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn lab(net: u8, count: usize, cgroups: &[Option<String>]) -> Option<Lab> {
    let lab = Lab::new(net, count, cgroups);
    match lab {
        Ok(lab) => Some(lab),
        Err(why) => {
            common::prerequisite(Err(why));
            None
        }
    }
}

fn tiny_config(lab: &Lab) -> PathBuf {
    let path = lab.dir.join("tiny.toml");
    std::fs::write(
        &path,
        "[[cpu]]\nprecision = [\"f64\"]\nthreads = [1]\nduration = \"200ms\"\n",
    )
    .unwrap();
    path
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn three_hosts_run_the_suite_at_once_and_every_pair_of_the_matrix() {
    let Some(lab) = lab(41, 3, &[]) else { return };
    let config = tiny_config(&lab);
    let html = lab.dir.join("report.html");
    let (doc, out) = lab.run(
        &[
            "--html",
            html.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
            "--phases",
            "local,matrix",
            "-r",
            "2",
            "--warmup",
            "0",
            "--matrix-duration",
            "300ms",
        ],
        Duration::from_secs(150),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = doc.expect("the output file");
    assert_eq!(doc["schema_version"], 4);
    let hosts: Vec<&String> = doc["hosts"].as_object().unwrap().keys().collect();
    assert_eq!(hosts, lab.hosts.iter().collect::<Vec<_>>());
    let cluster = &doc["cluster"];
    assert_eq!(cluster["phase"], "done");
    assert_eq!(cluster["ranks"], 3);
    // The node-local case once per host, each tied to its host.
    let results = doc["results"].as_array().unwrap();
    let local: Vec<&str> = results
        .iter()
        .filter(|r| r["subsystem"] == "cpu")
        .map(|r| r["host"].as_str().unwrap())
        .collect();
    assert_eq!(local.len(), 3, "{local:?}");
    for host in &lab.hosts {
        assert!(local.contains(&host.as_str()));
    }
    let spread = &cluster["spread"][0];
    assert_eq!(spread["values"].as_object().unwrap().len(), 3);
    // Every metric of the matrix: every ordered pair measured, the diagonal empty.
    let matrices = cluster["matrices"].as_array().unwrap();
    let metrics: Vec<&str> = matrices
        .iter()
        .map(|m| m["metric"].as_str().unwrap())
        .collect();
    assert_eq!(
        metrics,
        [
            "TCP throughput",
            "TCP round trip",
            "MPI one-way latency",
            "MPI ping-pong bandwidth"
        ]
    );
    for m in matrices {
        for (i, row) in m["values"].as_array().unwrap().iter().enumerate() {
            for (j, v) in row.as_array().unwrap().iter().enumerate() {
                assert_eq!(v.is_null(), i == j, "{} [{i}][{j}]", m["metric"]);
            }
        }
    }
    // The HTML report's cluster section: the hosts, the differences, a heat map per metric
    // with a cell per measured link (3 × 2), loaded by Chromium without console messages.
    let page = std::fs::read_to_string(&html).expect("the HTML report");
    assert!(
        page.contains("<h2 id=\"cluster\">Cluster: 3 hosts"),
        "{page}"
    );
    assert!(page.contains("<h3>Hosts</h3>") && page.contains("Inventory differences"));
    for host in &lab.hosts {
        assert!(page.contains(&format!("<tr><td>{host}</td>")), "{host}");
    }
    assert_eq!(
        page.matches("<svg class=\"heat-map\"").count(),
        metrics.len()
    );
    // The namespace hosts are one machine: the ping-pong matrices' cells say they are not
    // compared.
    assert_eq!(
        page.matches("× the median)</title>").count()
            + page.matches("(not compared: one machine)</title>").count(),
        6 * metrics.len()
    );
    assert_eq!(
        page.matches("(not compared: one machine)</title>").count(),
        6 * 3
    );
    if let Some(browser) = common::chromium() {
        let (dom, console) = common::chromium_dom(browser, &html, &lab.dir);
        assert!(console.is_empty(), "{console:?}");
        assert!(dom.contains("heat-map"));
    }
}

#[test]
fn a_link_shaped_to_300_mbits_reads_its_goodput_and_only_its_links_are_flagged() {
    let Some(lab) = lab(42, 4, &[]) else { return };
    // Both directions of host 1's link: its namespace's eth0 and the bridge's port.
    let shaped = &lab.hosts[1];
    lab.shape_300mbit(1);
    let (doc, out) = lab.run(
        &[
            "--phases",
            "matrix",
            "-r",
            "3",
            "--warmup",
            "0",
            "--matrix-duration",
            "1s",
        ],
        Duration::from_secs(200),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = doc.expect("the output file");
    let matrix = doc["cluster"]["matrices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == "TCP throughput")
        .expect("the TCP throughput matrix")
        .clone();
    // The TCP goodput of a 300 Mbit/s link: 1448 payload bytes per 1514-byte frame.
    let goodput = 300.0 * 1448.0 / 1514.0;
    let hosts: Vec<String> = serde_json::from_value(matrix["hosts"].clone()).unwrap();
    let mut expected = Vec::new();
    for (i, row) in matrix["values"].as_array().unwrap().iter().enumerate() {
        for (j, v) in row.as_array().unwrap().iter().enumerate() {
            if i == j {
                continue;
            }
            let v = v.as_f64().unwrap();
            if hosts[i] == *shaped || hosts[j] == *shaped {
                assert!(
                    (v / goodput - 1.0).abs() < 0.05,
                    "{} → {}: {v:.1} Mb/s, expected {goodput:.1} ± 5 %",
                    hosts[i],
                    hosts[j]
                );
                expected.push([hosts[i].clone(), hosts[j].clone()]);
            } else {
                assert!(
                    v > 2.0 * goodput,
                    "{} → {}: {v:.1} Mb/s",
                    hosts[i],
                    hosts[j]
                );
            }
        }
    }
    let flagged: Vec<[String; 2]> = serde_json::from_value(matrix["flagged"].clone()).unwrap();
    assert_eq!(
        flagged, expected,
        "exactly the shaped host's links are flagged"
    );
    // Slow on all of its links: the host is named, not only the links.
    assert_eq!(matrix["slow_hosts"][0]["host"], shaped.as_str(), "{matrix}");
    assert_eq!(matrix["slow_hosts"].as_array().unwrap().len(), 1);
    // The four namespace hosts are one machine: the document says so, and the matrices timed
    // by a ping-pong (whose ranks spin on the same 2 CPUs) compare none of their links, so no
    // latency link is flagged; the throughput through the tbf (a truth) still is, above.
    one_machine_and_no_ping_pong_compared(&doc, &lab.hosts);
}

/// The document of a run on `hosts`, all namespaces of this machine: one shared machine of
/// every host, and no link flagged or judged below the fleet in the matrices timed by a
/// ping-pong (each says why it compares none).
fn one_machine_and_no_ping_pong_compared(doc: &serde_json::Value, hosts: &[String]) {
    let shared = &doc["cluster"]["shared_machines"];
    assert_eq!(shared.as_array().unwrap().len(), 1, "{shared}");
    let named: Vec<String> = serde_json::from_value(shared[0]["hosts"].clone()).unwrap();
    assert_eq!(named, hosts);
    assert!(shared[0]["boot_id"].as_str().is_some_and(|b| !b.is_empty()));
    for m in doc["cluster"]["matrices"].as_array().unwrap() {
        if m["op"] == "tcp-throughput" {
            assert!(m["not_compared"].is_null(), "{m}");
            continue;
        }
        assert_eq!(m["flagged"].as_array().unwrap().len(), 0, "{m}");
        let left_out: Vec<String> =
            serde_json::from_value(m["not_compared"]["hosts"].clone()).unwrap();
        assert_eq!(left_out, hosts, "{}", m["metric"]);
        assert!(
            m["not_compared"]["why"]
                .as_str()
                .unwrap()
                .contains("boot id")
        );
    }
    // Nor do the findings judge a ping-pong link against the fleet's median link.
    for f in doc["findings"]["results"].as_array().unwrap() {
        let id = f["id"].as_str().unwrap();
        if id.starts_with("matrix-tcp-latency") || id.starts_with("matrix-mpi-") {
            let fleet = f["expectations"]
                .as_array()
                .is_some_and(|es| es.iter().any(|e| e["against"] == "fleet"));
            assert!(!fleet, "{f}");
        }
    }
    let shared_cause = doc["findings"]["run"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["kind"] == "shared-machine");
    assert!(shared_cause, "{}", doc["findings"]["run"]);
}

#[test]
fn a_sampled_matrix_of_six_hosts_finds_the_shaped_host_and_flags_no_latency() {
    let Some(lab) = lab(49, 6, &[]) else { return };
    let shaped = &lab.hosts[4];
    lab.shape_300mbit(4);
    // The ring and one random peer per host: 3 rounds where every pair would take 5.
    let (doc, out) = lab.run(
        &[
            "--phases",
            "matrix",
            "--matrix",
            "sample:1",
            "-r",
            "1",
            "--warmup",
            "0",
            "--matrix-duration",
            "500ms",
        ],
        Duration::from_secs(200),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = doc.expect("the output file");
    let plan = &doc["cluster"]["matrix_plan"];
    assert_eq!(plan["plan"], "sample:1", "{plan}");
    assert_eq!(plan["chosen"], "--matrix");
    assert_eq!(plan["rounds"], 3, "{plan}");
    let matrix = doc["cluster"]["matrices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["op"] == "tcp-throughput")
        .expect("the TCP throughput matrix")
        .clone();
    let hosts: Vec<String> = serde_json::from_value(matrix["hosts"].clone()).unwrap();
    let values = matrix["values"].as_array().unwrap();
    let flagged: Vec<[String; 2]> = serde_json::from_value(matrix["flagged"].clone()).unwrap();
    let mut measured = 0;
    for (i, row) in values.iter().enumerate() {
        let links = row
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| !v.is_null())
            .count();
        assert!(
            links >= 2,
            "{} has {links} links: the ring gives each two",
            hosts[i]
        );
        for (j, v) in row.as_array().unwrap().iter().enumerate() {
            if v.is_null() {
                continue;
            }
            measured += 1;
            if hosts[i] == *shaped || hosts[j] == *shaped {
                let link = [hosts[i].clone(), hosts[j].clone()];
                assert!(flagged.contains(&link), "{link:?} not flagged: {matrix}");
            }
        }
    }
    assert!(
        measured < 30,
        "a sample, not every pair: {measured} directions"
    );
    let slow: Vec<&str> = matrix["slow_hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["host"].as_str().unwrap())
        .collect();
    assert_eq!(slow, [shaped.as_str()], "{matrix}");
    one_machine_and_no_ping_pong_compared(&doc, &lab.hosts);
}

#[test]
fn the_document_per_host_stays_the_same_from_two_to_eight_hosts() {
    let Some(lab) = lab(50, 8, &[]) else { return };
    let mut per_host = Vec::new();
    for n in [2, 4, 8] {
        let (doc, out) = lab.run_on(
            n,
            &[
                "--phases",
                "matrix,collectives",
                "-r",
                "1",
                "--warmup",
                "0",
                "--matrix-duration",
                "100ms",
                "--collective-max-bytes",
                "64KiB",
            ],
            Duration::from_secs(240),
        );
        assert!(out.status.success(), "{n} hosts: {}", stderr(&out));
        let doc = doc.expect("the output file");
        // The default plan: every pair up to 4 hosts, the ring and 3 random peers above.
        let plan = &doc["cluster"]["matrix_plan"];
        assert_eq!(
            plan["plan"],
            if n <= 4 { "pairs" } else { "sample:3" },
            "{plan}"
        );
        assert!(plan["chosen"].as_str().unwrap().contains("default"));
        assert!(doc["cluster"]["rank0_peak_memory_bytes"].as_u64().unwrap() > 0);
        let bytes = std::fs::metadata(lab.dir.join("out.json")).unwrap().len();
        per_host.push((n, bytes as f64 / n as f64));
    }
    eprintln!("document bytes per host: {per_host:?}");
    let mean = per_host.iter().map(|(_, b)| b).sum::<f64>() / per_host.len() as f64;
    for (n, b) in &per_host {
        assert!(
            (b / mean - 1.0).abs() <= 0.20,
            "{n} hosts: {b:.0} B per host, the mean {mean:.0}: {per_host:?}"
        );
    }
}

#[test]
fn collectives_over_all_ranks_give_time_and_bus_bandwidth_per_size() {
    // Two hosts: three ranks whose collectives all spin would share 2 cores.
    let Some(lab) = lab(43, 2, &[]) else { return };
    let html = lab.dir.join("report.html");
    let (doc, out) = lab.run(
        &[
            "--html",
            html.to_str().unwrap(),
            "--phases",
            "collectives",
            "-r",
            "2",
            "--warmup",
            "0",
            "--collective-max-bytes",
            "1MiB",
        ],
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = doc.expect("the output file");
    let results = doc["results"].as_array().unwrap();
    let ops: Vec<&str> = results.iter().map(|r| r["op"].as_str().unwrap()).collect();
    assert_eq!(ops, ["mpi-allreduce", "mpi-allgather", "mpi-alltoall"]);
    let n = 2.0;
    for r in results {
        assert_eq!(r["params"]["other"]["ranks"], 2);
        let curve = r["params"]["other"]["curve"].as_array().unwrap();
        // 8 B … 1 MiB doubling: 18 sizes (the gathered ones rounded down to n parts).
        assert_eq!(curve.len(), 18, "{}", r["op"]);
        let factor = if r["op"] == "mpi-allreduce" {
            2.0 * (n - 1.0) / n
        } else {
            (n - 1.0) / n
        };
        for p in curve {
            let (bytes, t) = (p["bytes"].as_f64().unwrap(), p["time_us"].as_f64().unwrap());
            assert!(t > 0.0 && t.is_finite(), "{p}");
            let algbw = bytes / (t * 1e-6) / 1e9;
            let rel = |a: f64, b: f64| ((a - b) / b).abs() < 1e-9;
            assert!(rel(p["algbw_gbs"].as_f64().unwrap(), algbw), "{p}");
            assert!(rel(p["busbw_gbs"].as_f64().unwrap(), algbw * factor), "{p}");
        }
        let last = curve.last().unwrap();
        assert_eq!(r["params"]["message_bytes"], last["bytes"]);
        assert!(r["value"].as_f64().unwrap() > 0.0);
        assert!(r["counting"].as_str().unwrap().contains("busbw"));
    }
    // The report's chart of bus bandwidth against size: a line of 18 points per collective.
    let page = std::fs::read_to_string(&html).expect("the HTML report");
    assert!(page.contains("<svg class=\"collectives\""), "{page}");
    assert_eq!(page.matches("<polyline").count(), 3);
    for op in ["allreduce", "allgather", "alltoall"] {
        assert!(page.contains(&format!(">{op}</text>")), "{op}");
    }
}

#[test]
fn reference_runs_hpcc_over_the_same_hosts_and_launch_and_records_the_ratios() {
    if !common::prerequisite(common::on_path("hpcc").map(|_| ())) {
        return;
    }
    let Some(lab) = lab(46, 2, &[]) else { return };
    let html = lab.dir.join("report.html");
    let (doc, out) = lab.run(
        &[
            "--html",
            html.to_str().unwrap(),
            "--phases",
            "matrix",
            "--reference",
            "-r",
            "2",
            "--warmup",
            "0",
            "--matrix-duration",
            "300ms",
        ],
        Duration::from_secs(300),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = doc.expect("the output file");
    let refs = doc["cluster"]["references"].as_array().expect("references");
    let metrics: Vec<&str> = refs.iter().map(|r| r["metric"].as_str().unwrap()).collect();
    assert_eq!(refs.len(), 7, "{metrics:?}");
    // hpcc ran as a second job on the same hosts, one rank each, launched the same way.
    let hpl = &refs[0]["reference"];
    let command = hpl["command"].as_str().unwrap();
    assert!(hpl["value"].as_f64().is_some_and(|v| v > 0.0), "HPL: {hpl}");
    for part in [
        format!("--host {}:1,{}:1", lab.hosts[0], lab.hosts[1]),
        "-np 2".into(),
        format!("plm_rsh_agent {}", lab.agent().display()),
        format!("btl_tcp_if_include {}", lab.subnet),
        // Unbound, as the job's measuring ranks: mpirun's default binds each of 2 ranks to a
        // core, the same core of this one machine for both.
        "--bind-to none hpcc".into(),
    ] {
        assert!(command.contains(&part), "{part} not in {command}");
    }
    // Each host's measuring rank runs on every CPU this machine gives the test, whatever core
    // mpirun bound it to; the evidence says which, if it did.
    let cpus: Vec<serde_json::Value> = peakbench::runner::online_cpus()
        .into_iter()
        .map(Into::into)
        .collect();
    for host in &lab.hosts {
        let evidence = &doc["cluster"]["evidence"][host];
        assert_eq!(evidence["affinity"].as_array().unwrap(), &cpus, "{host}");
        if let Some(bound) = evidence["launch_affinity"].as_array() {
            assert!(!bound.is_empty() && bound.len() < cpus.len(), "{evidence}");
        }
    }
    // The ping-pong rows: the one link's best batch (hpcc counts each pair's best
    // measurement) over hpcc's figure; the bandwidth at hpcc's size, 2,000,000 B, against the
    // best batch of the curve's nearest size, 2 MiB (not the 4 MiB headline).
    let latency = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["op"] == "mpi-pingpong-latency")
        .expect("the ping-pong's latency");
    let two_mib = latency["params"]["other"]["curve"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["bytes"] == 2 << 20)
        .expect("2 MiB in the curve");
    let best_batch = |row: usize| -> f64 {
        if row <= 2 {
            latency["stats"]["min"].as_f64().unwrap()
        } else {
            two_mib["bandwidth_best_gbs"].as_f64().unwrap()
        }
    };
    assert!(
        two_mib["bandwidth_best_gbs"].as_f64().unwrap()
            >= two_mib["bandwidth_gbs"].as_f64().unwrap(),
        "{two_mib}"
    );
    for (row, r) in refs.iter().enumerate().take(5).skip(1) {
        let theirs = r["reference"]["value"]
            .as_f64()
            .unwrap_or_else(|| panic!("{r}"));
        assert_eq!(r["value"].as_f64().unwrap(), best_batch(row), "{r}");
        let ratio = r["reference"]["ratio"].as_f64().unwrap();
        assert!((ratio - best_batch(row) / theirs).abs() < 1e-9, "{r}");
    }
    assert!(
        refs[3]["metric"]
            .as_str()
            .unwrap()
            .contains("peakbench at 2 MiB")
    );
    // mpi4py (4.0 or later on PATH): its latency and bandwidth on the link of ranks 0 and 1,
    // each with a ratio; else why there is none.
    let pingpong = std::process::Command::new("python3")
        .args([
            "-c",
            "import mpi4py.bench as b; assert hasattr(b, 'pingpong')",
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    for r in &refs[5..7] {
        assert_eq!(r["reference"]["value"].is_f64(), pingpong, "{r}");
        assert!(
            r["reference"]["tool"].as_str().unwrap().contains("mpi4py"),
            "{r}"
        );
        match r["reference"]["value"].as_f64() {
            Some(theirs) => {
                assert!(theirs > 0.0, "{r}");
                let ratio = r["reference"]["ratio"].as_f64().expect("a ratio");
                let ours = r["value"].as_f64().expect("the link's value");
                assert!((ratio - ours / theirs).abs() < 1e-9, "{r}");
            }
            None => assert!(r["reference"]["note"].is_string(), "{r}"),
        }
    }
    let page = std::fs::read_to_string(&html).expect("the HTML report");
    assert!(
        page.contains("Standard tools over the same ranks"),
        "{page}"
    );
}

/// Runs the lab's job with host `host` told to stop answering at `step`
/// (`PEAKBENCH_CLUSTER_FAULT`) and a case deadline of 4 s: the job must end by itself, soon
/// after the deadline, with exit status non-zero and the document naming the host and step.
fn stalls(lab: &Lab, host: &str, step: &str, args: &[&str]) -> serde_json::Value {
    let fault = format!("{host}:{step}");
    let mut all = vec!["-r", "1", "--warmup", "0", "--case-deadline", "4s"];
    all.extend(args);
    let start = Instant::now();
    let (doc, out) = lab.run_with(
        &all,
        &[("PEAKBENCH_CLUSTER_FAULT", &fault)],
        Duration::from_secs(90),
    );
    let took = start.elapsed();
    assert!(!out.status.success(), "{}", stderr(&out));
    // Launch, the steps before the fault, the 4 s deadline (+ 5 s for a matrix round): the
    // test's own limit (90 s, which kills mpirun) is far.
    assert!(
        took < Duration::from_secs(60),
        "took {took:?}: {}",
        stderr(&out)
    );
    let doc = doc.expect("the partial output file");
    assert_eq!(doc["status"], "failed", "{}", stderr(&out));
    let failures = doc["cluster"]["failures"].as_array().unwrap().clone();
    assert!(
        failures
            .iter()
            .any(|f| f["host"] == host && f["case"].as_str().unwrap().starts_with(step)),
        "{host} at {step} not among {failures:?}; {}",
        stderr(&out)
    );
    assert!(stderr(&out).contains(host), "{}", stderr(&out));
    doc
}

#[test]
fn a_host_that_stops_answering_ends_the_job_by_the_deadline_with_host_and_case_named() {
    let Some(lab) = lab(44, 3, &[]) else { return };
    let config = tiny_config(&lab);
    let config = config.to_str().unwrap();
    // In a node-local case: the others' results of the cases before are kept.
    let hung = lab.hosts[2].clone();
    let doc = stalls(
        &lab,
        &hung,
        "cpu",
        &["--config", config, "--phases", "local"],
    );
    assert_eq!(doc["cluster"]["phase"], "local");
    // In the first matrix round, whose pair is hosts 1 and 2 (host 0 sits it out): host 2
    // tells rank 0 that host 1 stopped answering.
    let hung = lab.hosts[1].clone();
    let doc = stalls(&lab, &hung, "matrix", &["--phases", "matrix"]);
    let seen = doc["cluster"]["failures"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["host"] == hung.as_str() && f["why"].as_str().unwrap().contains("seen from"));
    assert!(seen, "{}", doc["cluster"]["failures"]);
    // Before a collective.
    stalls(
        &lab,
        &hung,
        "collective",
        &["--phases", "collectives", "--collective-max-bytes", "64KiB"],
    );
    // A host that never joins (its rank started, its inventory never sent): named with the
    // setup, the hosts that joined in the document.
    let doc = stalls(&lab, &hung, "setup", &["--phases", "matrix"]);
    let joined: Vec<&String> = doc["hosts"].as_object().unwrap().keys().collect();
    assert_eq!(joined, [&lab.hosts[0], &lab.hosts[2]], "{}", doc["hosts"]);
}

/// Starts a job whose one node-local case lasts 6 s on every host of `lab` and returns once
/// the case runs (the document names it: rank 0 writes it before the case starts) and host
/// `host`'s peakbench is there, with that process's id.
// The child is returned to the caller, who waits for it (clippy sees only this function).
#[allow(clippy::zombie_processes)]
fn in_a_long_case(lab: &Lab, host: usize) -> (std::process::Child, i32) {
    let config = lab.dir.join("long.toml");
    std::fs::write(
        &config,
        "[[cpu]]\nprecision = [\"f64\"]\nthreads = [1]\nduration = \"6s\"\n",
    )
    .unwrap();
    let mut child = lab.spawn(
        &[
            "--config",
            config.to_str().unwrap(),
            "--phases",
            "local",
            "-r",
            "1",
            "--warmup",
            "0",
        ],
        &[],
    );
    let start = Instant::now();
    loop {
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the case never started");
        }
        let started = lab.document().is_some_and(|d| {
            d["cluster"]["step"]
                .as_str()
                .is_some_and(|s| s.starts_with("cpu"))
        });
        let pids = lab.peakbench_pids(host);
        if started && !pids.is_empty() {
            std::thread::sleep(Duration::from_millis(1500));
            return (child, pids[0]);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn ctrl_c_on_mpirun_stops_the_job_in_its_case_and_blames_no_host() {
    let Some(lab) = lab(48, 3, &[]) else { return };
    let (child, _) = in_a_long_case(&lab, 2);
    // SAFETY: this test's own mpirun; SIGINT as Ctrl-C sends it.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().expect("mpirun ends");
    let doc = lab.document().expect("the partial document");
    assert_eq!(doc["status"], "interrupted", "{doc}\n{}", stderr(&out));
    assert!(
        doc["cluster"]["step"].as_str().unwrap().starts_with("cpu"),
        "{doc}"
    );
    assert!(doc["cluster"]["failures"].is_null(), "{doc}");
}

/// Kills `victim` (a rank of `child`'s job) and waits for `child`, an mpirun, to end (killed
/// itself after 90 s): its output and how long it took after the kill.
fn kill_and_wait(child: std::process::Child, victim: i32) -> (Output, Duration) {
    let pid = child.id() as i32;
    let killed_at = Instant::now();
    // SAFETY: a process of this test's own job, in its own namespace.
    unsafe { libc::kill(victim, libc::SIGKILL) };
    let watchdog = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(90));
        // SAFETY: this test's mpirun, if still there.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    });
    let out = child.wait_with_output().expect("mpirun ends");
    let took = killed_at.elapsed();
    drop(watchdog);
    (out, took)
}

#[test]
fn a_rank_killed_mid_case_ends_the_job_with_the_host_and_the_case_named() {
    let Some(lab) = lab(47, 3, &[]) else { return };
    // Host 2's peakbench is killed outright in the middle of the case.
    let killed = &lab.hosts[2];
    let (child, victim) = in_a_long_case(&lab, 2);
    let (out, took) = kill_and_wait(child, victim);
    assert!(!out.status.success(), "{}", stderr(&out));
    // Well before the case's deadline (3 × its estimate + 30 s): mpirun ends the job at once.
    assert!(
        took < Duration::from_secs(30),
        "took {took:?}: {}",
        stderr(&out)
    );
    let doc = lab.document().expect("the partial document");
    assert_eq!(doc["status"], "failed", "{doc}\n{}", stderr(&out));
    let failures = doc["cluster"]["failures"].as_array().unwrap();
    let named: Vec<&serde_json::Value> = failures
        .iter()
        .filter(|f| f["host"] == killed.as_str())
        .collect();
    assert_eq!(named.len(), 1, "{failures:?}\n{}", stderr(&out));
    assert!(
        named[0]["case"].as_str().unwrap().starts_with("cpu"),
        "{failures:?}"
    );
    assert!(
        named[0]["why"]
            .as_str()
            .unwrap()
            .contains("killed or crashed"),
        "{failures:?}"
    );
    // The other hosts answered: none of them is named.
    assert_eq!(failures.len(), 1, "{failures:?}");

    // Rank 0's own host dies: no rank is left to write; mpirun ends the job, and the document
    // rank 0 wrote before the step stands, naming the step, with status `running`.
    let (child, victim) = in_a_long_case(&lab, 0);
    let (out, took) = kill_and_wait(child, victim);
    assert!(!out.status.success(), "{}", stderr(&out));
    assert!(
        took < Duration::from_secs(30),
        "took {took:?}: {}",
        stderr(&out)
    );
    let doc = lab
        .document()
        .expect("the document written before the step");
    assert_eq!(doc["status"], "running", "{doc}");
    assert!(doc["finished_at"].is_null());
    assert!(
        doc["cluster"]["step"].as_str().unwrap().starts_with("cpu"),
        "{doc}"
    );
    assert_eq!(doc["hosts"].as_object().unwrap().len(), 3);
}

/// Cgroup v1 directories (cpuset and cpu) made for a test, removed when dropped (after the
/// processes in them ended).
struct Cgroups(Vec<PathBuf>);

impl Cgroups {
    /// One cgroup named `name` in the cpuset and cpu hierarchies, on CPU `cpu`, with a CPU
    /// quota of `quota_us` per 100 ms if given.
    fn add(&mut self, name: &str, cpu: usize, quota_us: Option<u64>) -> Result<(), String> {
        let write = |path: &Path, value: &str| {
            std::fs::write(path, value).map_err(|e| format!("{}: {e}", path.display()))
        };
        let cpuset = Path::new("/sys/fs/cgroup/cpuset").join(name);
        std::fs::create_dir_all(&cpuset).map_err(|e| format!("{}: {e}", cpuset.display()))?;
        self.0.push(cpuset.clone());
        write(&cpuset.join("cpuset.cpus"), &cpu.to_string())?;
        write(&cpuset.join("cpuset.mems"), "0")?;
        let cpu_group = Path::new("/sys/fs/cgroup/cpu").join(name);
        std::fs::create_dir_all(&cpu_group).map_err(|e| format!("{}: {e}", cpu_group.display()))?;
        self.0.push(cpu_group.clone());
        // The most weight against the machine's other processes (1024 each), so that the
        // host's core is its own while it measures, also on a busy machine.
        write(&cpu_group.join("cpu.shares"), "262144")?;
        if let Some(quota) = quota_us {
            write(&cpu_group.join("cpu.cfs_period_us"), "100000")?;
            write(&cpu_group.join("cpu.cfs_quota_us"), &quota.to_string())?;
        }
        Ok(())
    }
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        for dir in &self.0 {
            // The job's processes are gone (mpirun ended); a moment for the kernel to see it.
            for _ in 0..50 {
                if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// The half-core test's CPU case (f64, 1 thread, 1 s, 3 repetitions after a 500 ms warm-up)
/// run alone in cgroup `group` with its quota lifted: what a host on that group's vCPU reads
/// without the quota. The process joins the group as it starts, long before its warm-up ends.
fn unthrottled_in(group: &str) -> f64 {
    let cpu = Path::new("/sys/fs/cgroup/cpu").join(group);
    std::fs::write(cpu.join("cpu.cfs_quota_us"), "-1").unwrap();
    let child = common::command(&["cpu", "-p", "f64", "-t", "1", "--duration", "1s"])
        .args(["-r", "3", "--warmup", "500ms", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    for dir in [Path::new("/sys/fs/cgroup/cpuset").join(group), cpu] {
        std::fs::write(dir.join("cgroup.procs"), child.id().to_string()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["results"][0]["value"].as_f64().unwrap()
}

#[test]
fn a_host_held_to_half_a_core_reads_half_the_cpu_result_and_is_flagged() {
    let cgroup_v1 = if Path::new("/sys/fs/cgroup/cpuset/cpuset.cpus").exists()
        && Path::new("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").exists()
    {
        Ok(())
    } else {
        Err("no cgroup v1 cpuset and cpu hierarchies under /sys/fs/cgroup".to_string())
    };
    if !common::prerequisite(cgroup_v1) {
        return;
    }
    let id = std::process::id() % 100_000;
    let names = [format!("pbcg{id}h0"), format!("pbcg{id}h1")];
    let mut groups = Cgroups(Vec::new());
    // Each host on a core of its own (hosts measured at once must not share one), host 1
    // allowed 50 ms of CPU time per 100 ms.
    let quota_us = 50_000;
    let made = groups
        .add(&names[0], 0, None)
        .and_then(|()| groups.add(&names[1], 1, Some(quota_us)));
    if !common::prerequisite(made) {
        return;
    }
    let Some(lab) = lab(45, 2, &[Some(names[0].clone()), Some(names[1].clone())]) else {
        return;
    };
    let config = lab.dir.join("cpu.toml");
    std::fs::write(
        &config,
        "[[cpu]]\nprecision = [\"f64\"]\nthreads = [1]\nduration = \"1s\"\n",
    )
    .unwrap();
    let in_band = |ratio: f64| (ratio / 0.5 - 1.0).abs() < 0.12;
    // Where the job's figure misses both comparisons, the job runs once more: this machine's
    // hypervisor can slow a vCPU by a third for tens of seconds, during the job or during the
    // measurement without the quota (0.431 and 0.436 were seen once, and 0.5 twice right
    // after). A quota that did not halve the result misses in both runs.
    let mut missed = Vec::new();
    let cluster = loop {
        let (doc, out) = lab.run(
            &[
                "--config",
                config.to_str().unwrap(),
                "--phases",
                "local",
                "-r",
                "3",
                // A warm-up: the first timed second of the job's first case can overlap the
                // start of the other hosts' ranks on this machine's two CPUs.
                "--warmup",
                "500ms",
            ],
            Duration::from_secs(120),
        );
        assert!(out.status.success(), "{}", stderr(&out));
        let cluster = doc.expect("the output file")["cluster"].clone();
        let spread = &cluster["spread"][0];
        let value = |h: usize| {
            spread["values"][format!("pbc45h{h}")]
                .as_f64()
                .unwrap_or_else(|| panic!("host {h} in {spread}"))
        };
        let ratio = value(1) / value(0);
        eprintln!("the half-core host reads {ratio:.3} × the other");
        if in_band(ratio) {
            break cluster;
        }
        // The other host ran on the other vCPU, which the hypervisor can slow while this one
        // runs at full speed (a ratio of 0.600 was seen). Then the truth to compare with is
        // this vCPU's own figure without the quota, measured now.
        let alone = unthrottled_in(&names[1]);
        let own = value(1) / alone;
        eprintln!("against its own vCPU without the quota ({alone:.1}): {own:.3}");
        if in_band(own) {
            break cluster;
        }
        std::fs::write(
            Path::new("/sys/fs/cgroup/cpu")
                .join(&names[1])
                .join("cpu.cfs_quota_us"),
            quota_us.to_string(),
        )
        .unwrap();
        missed.push(format!(
            "{ratio:.3} × the other and {own:.3} × its own vCPU without the quota ({alone:.1}): \
             {spread}"
        ));
        assert!(
            missed.len() < 2,
            "the half-core host read, expected 0.5 ± 12 %: {missed:#?}"
        );
    };
    drop(lab);
    drop(groups);
    let flagged: Vec<&str> = cluster["flagged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["host"].as_str().unwrap())
        .collect();
    assert_eq!(flagged, ["pbc45h1"], "{}", cluster["flagged"]);
}
