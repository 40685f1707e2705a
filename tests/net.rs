//! Runs the real binary over loopback: both protocols and modes, a shared server with several
//! clients, a client killed mid-test, garbage on the control port, an unreachable server.
//! Network-namespace tests (shaped and delayed links) are in `tests/net_netns.rs`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

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
        let port = TcpListener::bind((ip, 0))
            .ok()?
            .local_addr()
            .unwrap()
            .port();
        let child = common::command(&[])
            .args(["net", "serve", "--bind", ip, "--port", &port.to_string()])
            .args(flags)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the server starts");
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
    // Loopback has no link speed: no peak, and a warning that says so.
    assert!(tcp["peak"].is_null());
    assert!(tcp["warnings"].to_string().contains("loopback"));
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
    let doc = net(&["--mode", "latency", "--count", "500", "--streams", "2"]);
    let r = &doc["results"][0];
    assert_eq!(r["latency_ns"]["count"], 1000);
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
        // Issue 18, item 4: 1 bit/s put the sender to sleep for hours per datagram.
        (vec!["net", "--proto", "udp", "--rate", "1"], "--rate"),
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

/// A control connection spoken by hand, as a hostile client would.
struct RawClient {
    writer: TcpStream,
    reader: std::io::BufReader<TcpStream>,
}

impl RawClient {
    fn connect(port: u16) -> RawClient {
        let writer = TcpStream::connect(("127.0.0.1", port)).unwrap();
        writer
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let reader = std::io::BufReader::new(writer.try_clone().unwrap());
        RawClient { writer, reader }
    }

    fn send(&mut self, line: &str) {
        self.writer.write_all(line.as_bytes()).unwrap();
        self.writer.write_all(b"\n").unwrap();
    }

    /// The next message other than the server's challenge.
    fn recv(&mut self) -> serde_json::Value {
        use std::io::BufRead;
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).unwrap();
            assert!(!line.is_empty(), "the server closed the control connection");
            let msg: serde_json::Value = serde_json::from_str(&line).unwrap();
            if msg["type"] != "challenge" {
                return msg;
            }
        }
    }

    fn hello(&mut self, test: serde_json::Value) -> serde_json::Value {
        let hello = serde_json::json!({"type": "hello", "peakbench": 2, "test": test});
        self.send(&hello.to_string());
        self.recv()
    }
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

/// Issue 18, item 3: the duplicate bitmap grew to the sequence number a datagram claimed, so
/// one datagram with sequence 2^32 − 1 made the server allocate 512 MiB.
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

/// Issue 18, item 5: `net serve --key FILE` serves only clients given the same key; the client
/// without it is told which flag to give (exit 2).
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
