//! Hostile and unlucky clients against a real `peakbench net serve` on loopback: an echo never
//! read, a client killed mid-test, silent connections before the key, eight clients of one host at
//! once, strangers on a test's data port, the server's budgets, and peer text on its way to a log
//! or a terminal. Each test stops by itself within seconds.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::FromRawFd;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod common;

use common::RawClient;

/// The server's margin beyond a test's length (`server::MARGIN`) and its time for the data
/// connections (`server::STEP`): a slot is back within STEP + length + MARGIN at most.
const MARGIN: Duration = Duration::from_secs(10);
/// Slack for a loaded 2-core machine on top of the promised bound.
const SLACK: Duration = Duration::from_secs(3);

/// A `net serve` on a free loopback port, its whole stderr kept; killed when dropped.
struct Server {
    child: Child,
    port: u16,
    log: Arc<Mutex<Vec<u8>>>,
}

impl Server {
    fn start(flags: &[&str]) -> Server {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = common::command(&[])
            .args([
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
            .stderr(Stdio::piped())
            .spawn()
            .expect("the server starts");
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut stderr = child.stderr.take().unwrap();
        let kept = log.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                kept.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        let until = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < until, "the server did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        Server { child, port, log }
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn log(&self) -> String {
        String::from_utf8_lossy(&self.log.lock().unwrap()).into_owned()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn test_spec(mode: &str, streams: u32, msg: u64, duration_ms: u64) -> serde_json::Value {
    serde_json::json!({"proto": "tcp", "mode": mode, "msg_bytes": msg, "streams": streams,
        "omit_ms": 0, "duration_ms": duration_ms, "reverse": false, "rate_bps": null})
}

/// Opens the data connections of an accepted TCP test (token and stream index first).
fn join_data(accepted: &serde_json::Value, streams: u32) -> Vec<TcpStream> {
    let port = accepted["ports"][0].as_u64().unwrap() as u16;
    let token = accepted["token"].as_u64().unwrap();
    (0..streams)
        .map(|i| {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            let mut hello = token.to_le_bytes().to_vec();
            hello.extend_from_slice(&i.to_le_bytes());
            s.write_all(&hello).unwrap();
            s
        })
        .collect()
}

/// Asks for a short latency test until the server accepts one; how long that took, or the
/// last refusal once `within` has passed. The accepted probe is completed (its data
/// connection opened, then everything closed) so it frees its own slot at once.
fn probe_until_accepted(port: u16, within: Duration) -> Result<Duration, String> {
    let start = Instant::now();
    loop {
        let mut probe = RawClient::connect(port);
        let reply = probe.hello(test_spec("latency", 1, 1, 100));
        if reply["type"] == "accepted" {
            let data = join_data(&reply, 1);
            assert_eq!(probe.recv()["type"], "ready");
            drop((data, probe));
            return Ok(start.elapsed());
        }
        let why = reply["error"].as_str().unwrap_or_default().to_string();
        assert!(why.starts_with("busy"), "{reply}");
        if start.elapsed() > within {
            return Err(why);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A latency client that sends but never reads its echo gets its slot back within the test's
/// length plus the margin, while the client still holds every connection (the echo once blocked
/// in `write_all` on a zero window and held the server's slot for good).
#[test]
fn a_client_that_never_reads_its_echo_gets_its_slot_back_within_length_and_margin() {
    let server = Server::start(&["--max-per-address", "1"]);
    let mut hostile = RawClient::connect(server.port);
    let length = Duration::from_millis(1000);
    let accepted = hostile.hello(test_spec("latency", 1, 65_536, length.as_millis() as u64));
    assert_eq!(accepted["type"], "accepted", "{accepted}");
    let data = join_data(&accepted, 1);
    assert_eq!(hostile.recv()["type"], "ready");
    let ready = Instant::now();
    // Fill both sides' buffers with messages to echo, reading nothing back.
    data[0]
        .set_write_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let chunk = vec![1u8; 65_536];
    let mut blocked = 0;
    while blocked < 3 && ready.elapsed() < Duration::from_secs(5) {
        if (&data[0]).write(&chunk).is_err() {
            blocked += 1;
        }
    }
    assert!(
        blocked >= 3,
        "the server read everything: the test proves nothing"
    );
    // The address's one slot is held while the test runs...
    let mut early = RawClient::connect(server.port);
    let refused = early.hello(test_spec("latency", 1, 1, 100));
    assert!(
        refused["error"]
            .as_str()
            .is_some_and(|e| e.contains("--max-per-address")),
        "{refused}"
    );
    // ...and back within the length and the margin, the hostile client still connected.
    let bound = length + MARGIN + SLACK;
    let waited = probe_until_accepted(server.port, bound.saturating_sub(ready.elapsed()));
    assert!(
        waited.is_ok(),
        "slot still held {:?} after the test was ready: {waited:?}",
        ready.elapsed()
    );
    drop((data, hostile));
}

/// A client killed mid-test (throughput, then latency) gives its slot back within the test's
/// length and the margin.
#[test]
fn a_client_killed_mid_test_gives_its_slot_back() {
    let server = Server::start(&["--max-per-address", "1"]);
    for mode in ["throughput", "latency"] {
        let mut victim = common::command(&[])
            .args([
                "net",
                "--no-history",
                "--server",
                &server.addr(),
                "--mode",
                mode,
                "--duration",
                "3s",
                "--omit",
                "0s",
                "--warmup",
                "0s",
                "-r",
                "1",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(1000));
        victim.kill().unwrap();
        victim.wait().unwrap();
        let waited = probe_until_accepted(server.port, Duration::from_secs(3) + MARGIN + SLACK);
        assert!(waited.is_ok(), "{mode}: {waited:?}");
    }
}

/// With `--key`, connections that never answer the challenge hold no test slot (a keyed client is
/// served at once beside them, with one slot per address), and are dropped after the short hello
/// deadline (3 s).
#[test]
fn silent_connections_before_the_key_take_no_test_slot_and_are_dropped_soon() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    std::fs::write(&key, b"0123456789abcdef0123456789abcdef\n").unwrap();
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let key = key.to_str().unwrap();
    let server = Server::start(&["--key", key, "--max-per-address", "1"]);
    // Each silent connection notes when the server closed it.
    let silent: Vec<_> = (0..8)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
            let opened = Instant::now();
            std::thread::spawn(move || {
                s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
                let mut seen = Vec::new();
                let _ = s.read_to_end(&mut seen);
                (
                    opened.elapsed(),
                    String::from_utf8_lossy(&seen).into_owned(),
                )
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let out = common::run(&[
        "net",
        "--json",
        "--server",
        &server.addr(),
        "--mode",
        "latency",
        "--key",
        key,
        "-r",
        "1",
        "--warmup",
        "0s",
        "--duration",
        "200ms",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for s in silent {
        let (dropped, said) = s.join().unwrap();
        assert!(said.contains("challenge"), "{said}");
        assert!(
            dropped < Duration::from_secs(3) + SLACK,
            "a silent connection held for {dropped:?}: {said}"
        );
    }
}

/// Eight `peakbench net --server` clients at once from one host, three repetitions each of
/// throughput and latency, against one default `net serve`: every client gets its figures (one
/// was once refused "busy … --max-per-address").
#[test]
fn eight_clients_three_repetitions_from_one_address_all_get_figures() {
    let server = Server::start(&[]);
    let clients: Vec<Child> = (0..8)
        .map(|_| {
            common::command(&[])
                .args([
                    "net",
                    "--json",
                    "--server",
                    &server.addr(),
                    "--mode",
                    "throughput,latency",
                    "-r",
                    "3",
                    "--omit",
                    "0s",
                    "--warmup",
                    "0s",
                    "--duration",
                    "150ms",
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (i, client) in clients.into_iter().enumerate() {
        let out = client.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "client {i}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let results = doc["results"].as_array().unwrap();
        assert_eq!(results.len(), 2, "client {i}");
        for r in results {
            assert!(
                r["value"].as_f64().is_some_and(|v| v > 0.0),
                "client {i}: {r}"
            );
        }
    }
}

/// A TCP connection to `port` on 127.0.0.1 from the source address 127.0.0.2.
fn connect_from_127_0_0_2(port: u16) -> TcpStream {
    // SAFETY: plain socket calls on a descriptor this function owns; sockaddr_in structs of
    // the right size; the descriptor is handed to a TcpStream, which closes it, once only.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 2]);
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        assert_eq!(
            libc::bind(fd, (&addr as *const libc::sockaddr_in).cast(), len),
            0
        );
        addr.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        addr.sin_port = port.to_be();
        assert_eq!(
            libc::connect(fd, (&addr as *const libc::sockaddr_in).cast(), len),
            0,
            "{}",
            std::io::Error::last_os_error()
        );
        TcpStream::from_raw_fd(fd)
    }
}

/// A test's data port closes connections from other addresses unread, and silent connections
/// (from anywhere) delay nobody: when they were read one after another, each silent one cost the
/// test up to 1 s, so twenty of them failed it.
#[test]
fn data_ports_drop_strangers_and_silent_connections_without_delay() {
    let server = Server::start(&[]);
    let mut client = RawClient::connect(server.port);
    let accepted = client.hello(test_spec("throughput", 2, 1000, 300));
    assert_eq!(accepted["type"], "accepted", "{accepted}");
    let port = accepted["ports"][0].as_u64().unwrap() as u16;
    let mut strangers: Vec<TcpStream> = (0..10).map(|_| connect_from_127_0_0_2(port)).collect();
    let silent: Vec<TcpStream> = (0..10)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    let start = Instant::now();
    let data = join_data(&accepted, 2);
    assert_eq!(client.recv()["type"], "ready");
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "ready after {:?}",
        start.elapsed()
    );
    // The strangers were closed without a byte read: the server's end is gone.
    for s in &mut strangers {
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut byte = [0u8; 1];
        assert!(matches!(s.read(&mut byte), Ok(0) | Err(_)));
    }
    drop((data, silent, client));
}

/// The streams and buffers of all the tests are budgets of the server, refused `busy` with the
/// reason; a client refused `busy` retries, and is served once the room is back.
#[test]
fn the_servers_budgets_refuse_with_a_clear_reason_and_clients_retry() {
    let server = Server::start(&["--max-total-streams", "3", "--max-buffers", "1MiB"]);
    let mut holder = RawClient::connect(server.port);
    let held = holder.hello(test_spec("throughput", 2, 1000, 300));
    assert_eq!(held["type"], "accepted", "{held}");
    for (test, why) in [
        (test_spec("throughput", 2, 1000, 300), "--max-total-streams"),
        (test_spec("throughput", 1, 1_000_000, 300), "--max-buffers"),
    ] {
        let reply = RawClient::connect(server.port).hello(test);
        assert_eq!(reply["type"], "refused", "{reply}");
        let error = reply["error"].as_str().unwrap();
        assert!(error.starts_with("busy") && error.contains(why), "{error}");
    }
    // The holder never opens its data connections: its slot is back after the server's 5 s
    // for them, and a client that was refused meanwhile is then served.
    let start = Instant::now();
    let client = common::command(&[])
        .args([
            "net",
            "--json",
            "--server",
            &server.addr(),
            "--mode",
            "throughput",
            "-P",
            "2",
            "-r",
            "1",
            "--omit",
            "0s",
            "--warmup",
            "0s",
            "--duration",
            "200ms",
        ])
        .output()
        .unwrap();
    assert!(
        client.status.success(),
        "{}",
        String::from_utf8_lossy(&client.stderr)
    );
    assert!(
        start.elapsed() > Duration::from_secs(2),
        "was it ever refused?"
    );
    drop(holder);
}

/// Peer text reaches the server's log escaped (serde quotes an unknown field's name as it
/// came), every line bounded, and a flood from one address rate-limited.
#[test]
fn peer_text_reaches_the_log_escaped_bounded_and_rate_limited() {
    let server = Server::start(&[]);
    let field = format!("\\u001b]52;c;{}\\u0007\\u001b[2J", "QUJD".repeat(500));
    for _ in 0..60 {
        let mut s = RawClient::connect(server.port);
        s.send(&format!(
            r#"{{"type":"hello","peakbench":2,"test":{{"{field}":1}}}}"#
        ));
        let reply = s.recv();
        assert_eq!(reply["type"], "refused", "{reply}");
    }
    std::thread::sleep(Duration::from_millis(500));
    let log = server.log();
    assert!(!log.contains('\u{1b}') && !log.contains('\u{7}'), "{log}");
    let about: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("unknown field"))
        .collect();
    assert!(!about.is_empty(), "{log}");
    assert!(about[0].contains("\\u{1b}]52"), "{}", about[0]);
    assert!(about.len() <= 20, "{} lines about one address", about.len());
    for line in log.lines().filter(|l| l.contains("127.0.0.1:")) {
        assert!(line.chars().count() <= 420, "{line}");
    }
}

/// A hostile server's text reaches the client's terminal escaped: a challenge whose type is a
/// terminal sequence, and a refusal that carries one.
#[test]
fn a_hostile_servers_text_reaches_the_terminal_escaped() {
    for reply in [
        r#"{"type":"\u001b]52;c;QUJD\u0007\u001b[2J"}"#.to_string(),
        r#"{"type":"refused","error":"\u001b]0;owned\u0007\u001b[2J"}"#.to_string(),
    ] {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        let serving = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let _ = s.write_all(format!("{reply}\n").as_bytes());
            std::thread::sleep(Duration::from_millis(500));
        });
        let out = common::run(&[
            "net",
            "--no-history",
            "--server",
            &addr.to_string(),
            "--mode",
            "latency",
            "-r",
            "1",
            "--warmup",
            "0s",
        ]);
        serving.join().unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains('\u{1b}') && !err.contains('\u{7}'), "{err}");
        assert!(err.contains("\\u{1b}"), "{err}");
    }
}
