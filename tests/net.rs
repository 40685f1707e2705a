//! Runs the real binary over loopback: both protocols and modes, a shared server with several
//! clients, a client killed mid-test, garbage on the control port, an unreachable server.
//! Network-namespace tests (shaped and delayed links) are in `tests/net_netns.rs`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::RawClient;

fn peakbench(args: &[&str]) -> Output {
    common::run(args)
}

fn json(output: &Output) -> serde_json::Value {
    assert!(
        output.status.success(),
        "exit {:?}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

/// Short runs: one repetition, no warm-up, no omitted start.
const SHORT: [&str; 6] = ["--omit", "0s", "-r", "1", "--warmup", "0s"];

fn net(extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["net", "--json"];
    args.extend_from_slice(&SHORT);
    if !extra.contains(&"--duration") {
        args.extend_from_slice(&["--duration", "300ms"]);
    }
    args.extend_from_slice(extra);
    json(&peakbench(&args))
}

/// A `peakbench net serve` on a free loopback port, killed when dropped.
struct Server {
    child: Child,
    port: u16,
    ip: String,
}

impl Server {
    fn start() -> Server {
        Server::on("127.0.0.1").expect("a loopback server")
    }

    /// A loopback server with these extra flags.
    fn with(flags: &[&str]) -> Server {
        Server::on_with("127.0.0.1", flags).expect("a loopback server")
    }

    /// A server on `ip`, or `None` where this machine cannot listen there (no IPv6).
    fn on(ip: &str) -> Option<Server> {
        Server::on_with(ip, &[])
    }

    fn on_with(ip: &str, flags: &[&str]) -> Option<Server> {
        Server::logging_to(ip, flags, Stdio::null(), false)
    }

    /// A server whose stderr is `stderr`, or closed (`2>&-`) when `close_stderr`.
    fn logging_to(ip: &str, flags: &[&str], stderr: Stdio, close_stderr: bool) -> Option<Server> {
        let port = TcpListener::bind((ip, 0))
            .ok()?
            .local_addr()
            .unwrap()
            .port();
        let mut command = common::command(&[]);
        command
            .args(["net", "serve", "--bind", ip, "--port", &port.to_string()])
            .args(flags)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        if close_stderr {
            use std::os::unix::process::CommandExt;
            // SAFETY: close(2) is async-signal-safe; nothing else runs between fork and exec.
            unsafe {
                command.pre_exec(|| {
                    libc::close(2);
                    Ok(())
                });
            }
        }
        let child = command.spawn().expect("the server starts");
        let until = Instant::now() + Duration::from_secs(10);
        let mut server = Server {
            child,
            port,
            ip: ip.to_string(),
        };
        while TcpStream::connect((ip, port)).is_err() {
            assert!(Instant::now() < until, "the server did not listen");
            assert!(
                server.child.try_wait().unwrap().is_none(),
                "the server exited"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(server)
    }

    fn addr(&self) -> String {
        std::net::SocketAddr::new(self.ip.parse().unwrap(), self.port).to_string()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn extra<'a>(result: &'a serde_json::Value, metric: &str) -> &'a serde_json::Value {
    result["extra"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["metric"] == metric)
        .unwrap_or_else(|| panic!("no {metric} in {result}"))
}

#[test]
fn loopback_tcp_and_udp_in_both_modes() {
    let doc = net(&["--proto", "tcp,udp", "--mode", "throughput,latency"]);
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 4, "{doc}");
    for r in results {
        assert_eq!(r["subsystem"], "network");
        assert!(r["value"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["counting"].as_str().unwrap().len() > 20);
    }
    let tcp = &results[0];
    assert_eq!(tcp["unit"], "Mb/s");
    assert_eq!(tcp["params"]["message_bytes"], 131072);
    // Loopback has no link speed: the peak is the memory copy net measured itself.
    assert!(
        tcp["peak"]["source"]
            .as_str()
            .unwrap()
            .contains("memory copy"),
        "{tcp}"
    );
    let gbps = extra(tcp, "throughput")["value"].as_f64().unwrap();
    assert!((gbps * 1e3 - tcp["value"].as_f64().unwrap()).abs() < 1e-6);
    let udp = &results[1];
    let sent = extra(udp, "packets sent")["value"].as_f64().unwrap();
    let received = extra(udp, "packets received")["value"].as_f64().unwrap();
    let lost = extra(udp, "packets lost")["value"].as_f64().unwrap();
    assert!(received > 0.0 && received <= sent, "{udp}");
    assert_eq!(lost, sent - received);
    extra(udp, "jitter");
    extra(udp, "packets reordered");
    for r in &results[2..] {
        assert_eq!(r["unit"], "µs");
        let lat = &r["latency_ns"];
        let (p50, p99, max) = (
            lat["p50"].as_f64().unwrap(),
            lat["p99"].as_f64().unwrap(),
            lat["max"].as_f64().unwrap(),
        );
        assert!(p50 > 0.0 && p50 <= p99 && p99 <= max, "{lat}");
        assert!(lat["count"].as_u64().unwrap() > 100);
        // The headline value is the p50 in µs (one repetition).
        assert!((r["value"].as_f64().unwrap() * 1e3 - p50).abs() < 1.0);
    }
}

/// `--receiver-wait`: a spinning and a sleeping TCP receiver both count the stream, and the
/// result says which ran (the setting, what the server did, and the counting rule); UDP has no
/// such setting. `auto` on loopback spins only when the client's and the server's threads fit
/// in the CPUs.
#[test]
fn the_tcp_receiver_spins_or_sleeps_as_asked_and_says_which() {
    for (wait, spun, rule) in [
        ("spin", true, "spun for up to 200 µs"),
        ("sleep", false, "slept in a blocking read"),
    ] {
        let doc = net(&[
            "--proto",
            "tcp,udp",
            "--mode",
            "throughput",
            "--receiver-wait",
            wait,
        ]);
        let (tcp, udp) = (&doc["results"][0], &doc["results"][1]);
        assert!(tcp["value"].as_f64().unwrap() > 0.0, "{tcp}");
        assert_eq!(tcp["params"]["other"]["receiver_wait"], wait, "{tcp}");
        assert_eq!(tcp["params"]["other"]["receiver_spun"], spun, "{tcp}");
        assert!(tcp["counting"].as_str().unwrap().contains(rule), "{tcp}");
        assert!(
            udp["params"]["other"].get("receiver_wait").is_none(),
            "{udp}"
        );
        // The receiving threads' wake-ups per MB, the findings' evidence for a sleeping
        // receiver; TCP only.
        let woke = extra(tcp, "receiver_wakeups");
        assert!(woke["value"].as_f64().unwrap() >= 0.0, "{tcp}");
        assert_eq!(woke["unit"], "per MB", "{tcp}");
        let udp_extras = udp["extra"].as_array().unwrap();
        assert!(
            udp_extras.iter().all(|e| e["metric"] != "receiver_wakeups"),
            "{udp}"
        );
    }
    let cpus = std::thread::available_parallelism().unwrap().get();
    for streams in [1, 2] {
        let doc = net(&[
            "--proto",
            "tcp",
            "--mode",
            "throughput",
            "--streams",
            &streams.to_string(),
        ]);
        let tcp = &doc["results"][0];
        assert_eq!(tcp["params"]["other"]["receiver_wait"], "auto");
        assert_eq!(
            tcp["params"]["other"]["receiver_spun"],
            2 * streams <= cpus,
            "{streams} streams on {cpus} CPUs: {tcp}"
        );
    }
}

/// A loopback network run alone has a peak. Its throughput results take the memory copy bandwidth
/// that net measured itself (once for the plan, before the first of them) × 8000, with a source
/// saying what was copied; latency results have none.
#[test]
fn a_loopback_throughput_result_of_a_net_run_alone_has_the_memory_copy_as_its_peak() {
    let doc = net(&["--proto", "tcp,udp", "--mode", "throughput"]);
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{doc}");
    for r in results {
        let peak = &r["peak"];
        let source = peak["source"].as_str().unwrap_or_else(|| panic!("{r}"));
        for word in ["memory copy", "1 MiB blocks", "threads", "GB/s", "× 8000"] {
            assert!(source.contains(word), "{word}: {source}");
        }
        assert_eq!(peak["unit"], "Mb/s");
        let (value, peak) = (
            r["value"].as_f64().unwrap(),
            peak["value"].as_f64().unwrap(),
        );
        assert!(peak > 0.0, "{r}");
        let efficiency = r["efficiency"].as_f64().unwrap();
        assert!((efficiency - value / peak).abs() < 1e-9, "{r}");
        assert!(
            !r["warnings"].to_string().contains("could not be measured"),
            "{r}"
        );
    }
    // One copy for the plan: both results share its figure.
    assert_eq!(results[0]["peak"], results[1]["peak"]);
}

#[test]
fn nic_gbps_is_the_assumed_loopback_peak() {
    let doc = net(&["--proto", "tcp", "--mode", "throughput", "--nic-gbps", "25"]);
    let r = &doc["results"][0];
    assert_eq!(r["peak"]["value"], 25_000.0, "{r}");
    assert!(
        r["peak"]["source"].as_str().unwrap().contains("--nic-gbps"),
        "{r}"
    );
    let eff = r["efficiency"].as_f64().unwrap();
    assert!((eff - r["value"].as_f64().unwrap() / 25_000.0).abs() < 1e-9);
    assert!(!r["warnings"].to_string().contains("memory copy"), "{r}");
}

#[test]
fn reverse_mode_and_parallel_streams_count_per_stream() {
    let doc = net(&[
        "--proto",
        "tcp,udp",
        "--mode",
        "throughput",
        "--reverse",
        "--streams",
        "2",
        "--msg",
        "1000",
        "--rate",
        "50M",
    ]);
    for r in doc["results"].as_array().unwrap() {
        assert_eq!(r["params"]["other"]["reverse"], true);
        let total = r["value"].as_f64().unwrap();
        let s0 = extra(r, "stream 0 throughput")["value"].as_f64().unwrap();
        let s1 = extra(r, "stream 1 throughput")["value"].as_f64().unwrap();
        assert!(s0 > 0.0 && s1 > 0.0);
        assert!((s0 + s1 - total).abs() / total < 1e-6, "{r}");
        if r["params"]["protocol"] == "udp" {
            // Two streams paced at 50 Mb/s each.
            assert!(
                (80.0..=110.0).contains(&total),
                "{total} Mb/s for 2 × 50 Mb/s"
            );
        }
    }
}

#[test]
fn count_gives_that_many_round_trips() {
    // The count, not the (much shorter) duration, ends the test: the server is told the count.
    let doc = net(&[
        "--mode",
        "latency",
        "--count",
        "500",
        "--streams",
        "2",
        "--msg",
        "64",
        "--duration",
        "1ms",
    ]);
    let r = &doc["results"][0];
    assert_eq!(r["latency_ns"]["count"], 1000);
    assert_eq!(r["params"]["other"]["round_trips"], 500);
    // Ping-pong throughput as users compute it: 2 × message bytes per round trip.
    let trips = extra(r, "round trips")["value"].as_f64().unwrap();
    let mbps = extra(r, "ping-pong throughput")["value"].as_f64().unwrap();
    assert!(trips > 0.0);
    assert!(
        (mbps - 2.0 * 64.0 * 8.0 * trips / 1e6).abs() <= 1e-9 * mbps.max(1.0),
        "{r}"
    );
    assert!(r["counting"].as_str().unwrap().contains("2 × 64 B"), "{r}");
}

#[test]
fn several_clients_share_one_server() {
    let server = Server::start();
    let addr = server.addr();
    let clients: Vec<_> = (0..3)
        .map(|i| {
            let proto = if i % 2 == 0 { "tcp" } else { "udp" };
            common::command(&[])
                .args([
                    "net",
                    "--json",
                    "--no-history",
                    "--server",
                    &addr,
                    "--proto",
                    proto,
                ])
                .args(SHORT)
                .args(["--duration", "1s"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for client in clients {
        let doc = json(&client.wait_with_output().unwrap());
        assert_eq!(doc["results"].as_array().unwrap().len(), 2);
        assert_eq!(doc["results"][0]["params"]["other"]["server"], addr);
    }
}

#[test]
fn ipv6_works_end_to_end() {
    let Some(server) = Server::on("::1") else {
        eprintln!("skipped: this machine cannot listen on ::1");
        return;
    };
    let doc = net(&[
        "--server",
        &server.addr(),
        "--proto",
        "tcp,udp",
        "--reverse",
    ]);
    assert_eq!(doc["results"].as_array().unwrap().len(), 4);
    assert!(
        doc["results"][0]["params"]["other"]["server"]
            .as_str()
            .unwrap()
            .starts_with("[::1]")
    );
}

#[test]
fn a_killed_client_does_not_stop_the_server() {
    let server = Server::start();
    let addr = server.addr();
    for mode in ["throughput", "latency"] {
        let mut victim = common::command(&[])
            .args([
                "net",
                "--no-history",
                "--server",
                &addr,
                "--mode",
                mode,
                "--duration",
                "20s",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(700));
        victim.kill().unwrap();
        victim.wait().unwrap();
    }
    let start = Instant::now();
    let doc = net(&["--server", &addr]);
    assert_eq!(doc["results"].as_array().unwrap().len(), 2);
    assert!(start.elapsed() < Duration::from_secs(20));
}

#[test]
fn garbage_on_the_control_port_is_refused_and_the_server_goes_on() {
    let server = Server::start();
    for garbage in [
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\n".to_vec(),
        b"{\"type\":\"hello\",\"peakbench\":2,\"test\":{\"proto\":\"tcp\",\"mode\":\"throughput\",\"msg_bytes\":0,\"streams\":1,\"omit_ms\":0,\"duration_ms\":1,\"reverse\":false,\"rate_bps\":null}}\n".to_vec(),
        b"{\"type\":\"hello\",\"peakbench\":2,\"test\":{\"proto\":\"tcp\",\"mode\":\"throughput\",\"msg_bytes\":1,\"streams\":1,\"omit_ms\":0,\"duration_ms\":99999999,\"reverse\":false,\"rate_bps\":null}}\n".to_vec(),
        vec![b'{'; 100_000],
    ] {
        let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = s.write_all(&garbage);
        let mut reply = String::new();
        let _ = s.read_to_string(&mut reply);
        assert!(reply.contains("\"refused\""), "{reply}");
    }
    // A port scan: connect and leave.
    for _ in 0..20 {
        drop(TcpStream::connect(("127.0.0.1", server.port)).unwrap());
    }
    let doc = net(&["--server", &server.addr(), "--mode", "latency"]);
    assert_eq!(doc["results"].as_array().unwrap().len(), 1);
}

#[test]
fn an_unreachable_server_is_exit_1_with_a_clear_message_soon() {
    // A port nobody listens on.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let start = Instant::now();
    let out = peakbench(&["net", "--server", &format!("127.0.0.1:{port}")]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot reach the peakbench server"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(10));

    // A port that accepts but never answers: the handshake deadline ends it.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap().to_string();
    let start = Instant::now();
    let out = peakbench(&["net", "--server", &addr]);
    assert_eq!(out.status.code(), Some(1));
    assert!(start.elapsed() < Duration::from_secs(20));
    drop(silent);
}

#[test]
fn bad_input_is_exit_2_naming_the_flag() {
    for (args, flag) in [
        (vec!["net", "--proto", "udp", "--msg", "65508"], "--msg"),
        (vec!["net", "--msg", "2MB"], "--msg"),
        (vec!["net", "--proto", "sctp"], "--proto"),
        (
            vec!["net", "--mode", "throughput", "--count", "10"],
            "--count",
        ),
        (vec!["net", "--server", "no.such.host.invalid"], "--server"),
        // 1 bit/s would put the sender to sleep for hours per datagram.
        (vec!["net", "--proto", "udp", "--rate", "1"], "--rate"),
        // Refused at the flag, not at run time after earlier cases ran.
        (vec!["net", "--duration", "601s"], "--duration"),
        (vec!["net", "--receiver-wait", "nap"], "--receiver-wait"),
        (
            vec!["net", "--omit", "5s", "--duration", "598s"],
            "--duration",
        ),
    ] {
        let out = peakbench(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(flag), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
}

#[test]
fn reference_tools_run_beside_when_installed() {
    if Command::new("iperf3").arg("--version").output().is_err()
        || Command::new("sockperf").arg("--version").output().is_err()
    {
        eprintln!("skipped: iperf3 or sockperf is not installed");
        return;
    }
    let doc = net(&["--reference", "--duration", "1s"]);
    for r in doc["results"].as_array().unwrap() {
        let reference = &r["reference"];
        assert!(reference["value"].as_f64().unwrap() > 0.0, "{reference}");
        assert!(reference["ratio"].as_f64().unwrap() > 0.0);
    }
}

/// ICMP ping runs beside sockperf on every round-trip case, to the address the client targets,
/// its payload the message where ICMP allows it.
#[test]
fn ping_is_the_icmp_reference_beside_the_round_trip() {
    if !common::prerequisite(common::on_path("ping").map(|_| ())) {
        return;
    }
    let doc = net(&[
        "--reference",
        "--mode",
        "latency",
        "--proto",
        "tcp",
        "-m",
        "1,64",
        "--duration",
        "1s",
    ]);
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    for r in results {
        let others = r["other_references"].as_array().expect("other references");
        let ping = others
            .iter()
            .find(|o| o["tool"] == "ping")
            .unwrap_or_else(|| panic!("no ping beside the round trip: {r}"));
        let command = ping["command"].as_str().unwrap();
        let server = r["params"]["other"]["server"].as_str().unwrap();
        let ip = server.rsplit_once(':').unwrap().0.trim_matches(['[', ']']);
        assert!(
            command.ends_with(&format!(" {ip}")),
            "ping goes to the server the client targets ({server}): {command}"
        );
        let note = ping["note"].as_str().unwrap_or_default();
        let Some(value) = ping["value"].as_f64() else {
            // A ping refused an ICMP socket is a note, not a failure; CI runs as root.
            assert!(!common::strict(), "strict mode: ping gave no value: {note}");
            assert!(note.contains("ping"), "{note}");
            eprintln!("ping gave no value here: {note}");
            continue;
        };
        assert!(value > 0.0, "{ping}");
        let ratio = ping["ratio"].as_f64().unwrap();
        let ours = r["value"].as_f64().unwrap();
        assert!((ratio - ours / value).abs() < 1e-9 * ratio, "{ping}");
        assert!(note.contains("ratio = our p50 ÷ ping's p50"), "{note}");
        assert!(note.contains("interval"), "{note}");
        let msg = r["params"]["message_bytes"].as_u64().unwrap();
        if msg < 16 {
            assert!(command.contains(" -s 16 "), "{command}");
            assert!(
                note.contains("below 16 B ping carries no timestamp"),
                "{note}"
            );
        } else {
            assert!(command.contains(&format!(" -s {msg} ")), "{command}");
            assert!(note.contains("as the case's message"), "{note}");
        }
    }
    let table = common::run(&[
        "net",
        "--reference",
        "--mode",
        "latency",
        "--proto",
        "udp",
        "-r",
        "1",
        "--warmup",
        "0s",
        "--duration",
        "1s",
    ]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(table.status.success(), "{text}");
    assert!(text.contains("Other references (ours / theirs):"), "{text}");
    assert!(text.contains(": ping "), "{text}");
}

fn udp_test(rate_bps: Option<u64>, duration_ms: u64) -> serde_json::Value {
    serde_json::json!({"proto": "udp", "mode": "throughput", "msg_bytes": 100, "streams": 1,
        "omit_ms": 0, "duration_ms": duration_ms, "reverse": false, "rate_bps": rate_bps})
}

#[test]
fn a_rate_below_one_datagram_per_100_ms_is_refused_by_the_server() {
    let server = Server::start();
    let reply = RawClient::connect(server.port).hello(udp_test(Some(1), 500));
    assert_eq!(reply["type"], "refused", "{reply}");
    assert!(
        reply["error"].as_str().unwrap().contains("100 ms"),
        "{reply}"
    );
    // 100-byte datagrams at 8000 bit/s: exactly one per 100 ms is still accepted.
    let reply = RawClient::connect(server.port).hello(udp_test(Some(8000), 500));
    assert_eq!(reply["type"], "accepted", "{reply}");
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A datagram's claimed sequence number leaves the server's memory alone: when the duplicate
/// bitmap grew to it, one datagram with sequence 2^32 − 1 made the server allocate 512 MiB.
#[test]
fn a_crafted_sequence_number_leaves_the_server_memory_alone() {
    let server = Server::start();
    let mut client = RawClient::connect(server.port);
    let accepted = client.hello(udp_test(None, 1500));
    assert_eq!(accepted["type"], "accepted", "{accepted}");
    let port = accepted["ports"][0].as_u64().unwrap() as u16;
    let token = accepted["token"].as_u64().unwrap();
    let data = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    data.connect(("127.0.0.1", port)).unwrap();
    data.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    data.send(&token.to_le_bytes()).unwrap();
    let mut ack = [0u8; 8];
    data.recv(&mut ack).unwrap();
    assert_eq!(client.recv()["type"], "ready");
    std::thread::sleep(Duration::from_millis(100));
    let before = rss_kib(server.child.id());
    for seq in [(1u64 << 32) - 1, u64::MAX, 5] {
        let mut datagram = vec![0u8; 100];
        datagram[0..4].copy_from_slice(&(token as u32).to_le_bytes());
        datagram[4..12].copy_from_slice(&seq.to_le_bytes());
        data.send(&datagram).unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    let after = rss_kib(server.child.id());
    assert!(
        after < before + 8 * 1024,
        "the server grew from {before} KiB to {after} KiB"
    );
    let window = client.recv();
    assert_eq!(window["type"], "window", "{window}");
    client.send(r#"{"type":"sent","per_stream":[3]}"#);
    let last = client.recv();
    assert_eq!(last["type"], "final", "{last}");
    assert_eq!(last["udp"][0]["received"], 3, "{last}");
}

/// `net serve --key FILE` serves only clients given the same key; the client without it is told
/// which flag to give (exit 2).
#[test]
fn a_server_with_a_key_serves_its_holders_only() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    std::fs::write(&key, b"0123456789abcdef0123456789abcdef\n").unwrap();
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let key = key.to_str().unwrap();
    let server = Server::with(&["--key", key]);
    let out = peakbench(&[
        "net",
        "--server",
        &server.addr(),
        "--mode",
        "latency",
        "-d",
        "100ms",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--key") && err.contains("requires"), "{err}");
    let doc = net(&[
        "--server",
        &server.addr(),
        "--mode",
        "latency",
        "--key",
        key,
    ]);
    assert_eq!(doc["results"].as_array().unwrap().len(), 1);
    let reply = RawClient::connect(server.port).hello(udp_test(None, 500));
    assert_eq!(reply["type"], "refused", "{reply}");
}

/// A `net serve` on loopback with these flags and, optionally, these open-file limits (soft,
/// hard); returns the server (killed when dropped) and its first two lines on stderr.
fn serve_logged(flags: &[&str], nofile: Option<(u64, u64)>) -> (Server, String) {
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cmd = common::command(&[]);
    cmd.args([
        "net",
        "serve",
        "--bind",
        "127.0.0.1",
        "--port",
        &port.to_string(),
    ])
    .args(flags)
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    if let Some((soft, hard)) = nofile {
        // SAFETY: between fork and exec only setrlimit runs, which is async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                let limit = libc::rlimit {
                    rlim_cur: soft,
                    rlim_max: hard,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut child = cmd.spawn().expect("the server starts");
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut lines = String::new();
    for _ in 0..2 {
        stderr.read_line(&mut lines).unwrap();
    }
    // Keep reading (the server logs every connection), until it exits.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    let server = Server {
        child,
        port,
        ip: "127.0.0.1".into(),
    };
    let until = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < until, "the server did not listen: {lines}");
        std::thread::sleep(Duration::from_millis(20));
    }
    (server, lines)
}

fn tcp_test(streams: u32, duration_ms: u64) -> serde_json::Value {
    serde_json::json!({"proto": "tcp", "mode": "throughput", "msg_bytes": 1000, "streams": streams,
        "omit_ms": 0, "duration_ms": duration_ms, "reverse": false, "rate_bps": null})
}

/// The startup line says what is open and how to close it; --allow closes the port to everyone
/// else, before a single byte is sent.
#[test]
fn the_server_says_what_is_open_and_allow_closes_it() {
    let (_open, said) = serve_logged(&[], None);
    assert!(
        said.contains("open to every address") && said.contains("no key"),
        "{said}"
    );
    assert!(
        said.contains("--allow") && said.contains("Ctrl-C"),
        "{said}"
    );
    let (closed, said) = serve_logged(&["--allow", "192.0.2.0/24,2001:db8::/32"], None);
    assert!(
        said.contains("open to 192.0.2.0/24, 2001:db8::/32 only"),
        "{said}"
    );
    let mut s = TcpStream::connect(("127.0.0.1", closed.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    assert!(reply.is_empty(), "{}", String::from_utf8_lossy(&reply));
    let (allowed, _) = serve_logged(&["--allow", "127.0.0.0/8"], None);
    let reply = RawClient::connect(allowed.port).hello(tcp_test(1, 100));
    assert_eq!(reply["type"], "accepted", "{reply}");
}

/// The operator's caps and the per-address limit refuse a test with the reason.
#[test]
fn the_operators_caps_and_per_address_limit_refuse_with_the_reason() {
    let (server, said) = serve_logged(
        &[
            "--max-duration",
            "1s",
            "--max-streams",
            "2",
            "--max-rate",
            "1M",
            "--max-per-address",
            "2",
        ],
        None,
    );
    assert!(
        said.contains("tests up to 1 s and 2 streams, 2 at once"),
        "{said}"
    );
    for (test, why) in [
        (tcp_test(1, 2000), "at most 1 s"),
        (tcp_test(3, 100), "streams must be 1 to 2"),
        (udp_test(None, 100), "--rate 1000000"),
        (udp_test(Some(2_000_000), 100), "--rate 1000000"),
    ] {
        // The handler of the previous refusal may still hold its slot for a moment.
        let mut reply = RawClient::connect(server.port).hello(test.clone());
        for _ in 0..50 {
            if !reply.to_string().contains("max-per-address") {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
            reply = RawClient::connect(server.port).hello(test.clone());
        }
        assert_eq!(reply["type"], "refused", "{reply}");
        assert!(reply["error"].as_str().unwrap().contains(why), "{reply}");
    }
    // Two accepted tests whose data connections never come hold this address's two slots
    // (for the server's 5 s wait for them); idle connections hold none.
    let idle: Vec<RawClient> = (0..4).map(|_| RawClient::connect(server.port)).collect();
    let held: Vec<RawClient> = (0..2)
        .map(|_| {
            let mut c = RawClient::connect(server.port);
            assert_eq!(c.hello(tcp_test(1, 100))["type"], "accepted");
            c
        })
        .collect();
    let reply = RawClient::connect(server.port).hello(tcp_test(1, 100));
    assert_eq!(reply["type"], "refused", "{reply}");
    assert!(
        reply["error"]
            .as_str()
            .unwrap()
            .contains("--max-per-address"),
        "{reply}"
    );
    drop((held, idle));
}

/// The open-file soft limit is raised to the hard one at start, and a test whose sockets would not
/// fit under it is refused (instead of failing half-way).
#[test]
fn the_open_file_limit_is_raised_and_a_test_beyond_it_refused() {
    let (server, said) = serve_logged(&[], Some((64, 160)));
    assert!(said.contains("open-file limit 160"), "{said}");
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", server.child.id())).unwrap();
    let files = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    assert_eq!(files.split_whitespace().nth(3), Some("160"), "{files}");
    let reply = RawClient::connect(server.port).hello(tcp_test(100, 100));
    assert_eq!(reply["type"], "refused", "{reply}");
    assert!(
        reply["error"].as_str().unwrap().contains("files open"),
        "{reply}"
    );
    let reply = RawClient::connect(server.port).hello(tcp_test(2, 100));
    assert_eq!(reply["type"], "accepted", "{reply}");
}

/// The children of process `pid`, from /proc (every thread's list).
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|s| {
            s.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

#[test]
fn the_loopback_server_is_a_child_process_unless_asked_for_a_thread() {
    let doc = net(&["--mode", "latency", "--duration", "100ms"]);
    let other = &doc["results"][0]["params"]["other"];
    assert_eq!(other["loopback_server"], "process", "{other}");
    let output = common::command(&["net", "--json", "--mode", "latency", "--duration", "100ms"])
        .args(SHORT)
        .env("PEAKBENCH_LOOPBACK_SERVER", "thread")
        .output()
        .unwrap();
    assert_eq!(
        json(&output)["results"][0]["params"]["other"]["loopback_server"],
        "thread"
    );
    let bad = common::command(&["net", "--mode", "latency"])
        .env("PEAKBENCH_LOOPBACK_SERVER", "fiber")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("PEAKBENCH_LOOPBACK_SERVER"), "{stderr}");
}

#[test]
fn a_killed_peakbench_leaves_no_loopback_server_behind() {
    let mut client = common::command(&[])
        .args([
            "net",
            "--no-history",
            "--mode",
            "throughput",
            "--duration",
            "20s",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let server = loop {
        if let Some(&pid) = children(client.id()).first() {
            break pid;
        }
        assert!(Instant::now() < deadline, "no loopback server started");
        std::thread::sleep(Duration::from_millis(50));
    };
    client.kill().unwrap(); // SIGKILL: peakbench cannot stop it, the kernel must
    client.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(server) {
        assert!(
            Instant::now() < deadline,
            "the loopback server {server} outlived its parent"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_rate_list_paces_udp_throughput_only_and_latency_runs_once() {
    let plan = json(&peakbench(&[
        "net",
        "--proto",
        "tcp,udp",
        "--mode",
        "throughput,latency",
        "--rate",
        "100M,200M",
        "--dry-run",
        "--json",
    ]));
    let names: Vec<&str> = plan["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    // TCP throughput, UDP throughput at each of the two rates, TCP and UDP latency once each.
    assert_eq!(names.len(), 5, "{names:?}");
}

/// The server outlives its stderr. Its log once used eprintln!, which panics when stderr cannot
/// be written (a full device), and a reader of the log that went away (`2>&1 | head -1`) killed
/// it with SIGPIPE. Each way of losing stderr, then one loopback test against the server, which
/// lives on.
#[test]
fn the_server_outlives_its_stderr() {
    let full = || {
        Stdio::from(
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap(),
        )
    };
    type Stderr = Box<dyn Fn() -> Stdio>;
    let ways: [(&str, Stderr, bool); 3] = [
        ("2>/dev/full", Box::new(full), false),
        ("a reader that is gone", Box::new(Stdio::piped), false),
        ("2>&-", Box::new(Stdio::inherit), true),
    ];
    for (how, stderr, close) in ways {
        let mut server = Server::logging_to("127.0.0.1", &[], stderr(), close).expect("a server");
        // The reader of the pipe goes away before the server writes again.
        drop(server.child.stderr.take());
        let doc = net(&["--server", &server.addr(), "--mode", "latency"]);
        assert_eq!(doc["status"], "complete", "{how}");
        // The server logs the test's end after the client has its result.
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            server.child.try_wait().unwrap().is_none(),
            "{how}: the server died"
        );
    }
}
