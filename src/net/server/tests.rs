use std::net::Ipv6Addr;

use super::admission::{Need, block};
use super::log::fit;
use super::*;
use crate::net::limits::MAX_TEST;
use crate::net::proto::MAX_LINE;

#[test]
fn a_counted_ping_pong_is_served_until_the_client_is_done_not_until_its_duration() {
    let mut spec = TestSpec {
        proto: Proto::Tcp,
        mode: Mode::Latency,
        msg_bytes: 1,
        streams: 1,
        omit_ms: 0,
        duration_ms: 2000,
        reverse: false,
        rate_bps: None,
        count: None,
        receiver_wait: proto::ReceiverWait::Auto,
    };
    assert_eq!(serving_time(&spec, MAX_TEST), Duration::from_secs(12));
    spec.count = Some(1_000_000);
    assert_eq!(
        serving_time(&spec, MAX_TEST),
        MAX_TEST + Duration::from_secs(10)
    );
    spec.count = Some(0);
    assert!(
        invalid(&spec, &Policy::default())
            .unwrap()
            .contains("count")
    );
    // An older client's hello has no count and is still understood.
    let old = r#"{"type":"hello","peakbench":1,"test":{"proto":"tcp","mode":"latency","msg_bytes":1,"streams":1,"omit_ms":0,"duration_ms":5,"reverse":false,"rate_bps":null}}"#;
    let Msg::Hello { test, .. } = serde_json::from_str(old).unwrap() else {
        panic!("not a hello");
    };
    assert_eq!(test.count, None);
}

#[test]
fn garbage_and_overlong_lines_are_refused_and_the_server_goes_on() {
    let server = LocalServer::start(None).unwrap();
    for garbage in [
        b"GET / HTTP/1.0\r\n\r\n".to_vec(),
        vec![b'x'; MAX_LINE * 3],
        b"{\"type\":\"hello\",\"peakbench\":99,\"test\":{}}\n".to_vec(),
    ] {
        let mut s = TcpStream::connect(server.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = s.write_all(&garbage);
        let mut reply = String::new();
        let _ = s.read_to_string(&mut reply);
        assert!(reply.contains("refused"), "{reply}");
    }
}

#[test]
fn address_blocks_contain_what_they_should() {
    let net: Cidr = "10.1.0.0/16".parse().unwrap();
    assert!(net.contains("10.1.200.3".parse().unwrap()));
    assert!(net.contains("::ffff:10.1.0.9".parse().unwrap()));
    assert!(!net.contains("10.2.0.1".parse().unwrap()));
    assert!(!net.contains("::1".parse().unwrap()));
    let one: Cidr = "2001:db8::5".parse().unwrap();
    assert!(one.contains("2001:db8::5".parse().unwrap()));
    assert!(!one.contains("2001:db8::6".parse().unwrap()));
    let all: Cidr = "0.0.0.0/0".parse().unwrap();
    assert!(all.contains("192.0.2.1".parse().unwrap()));
    assert!("10.0.0.0/33".parse::<Cidr>().is_err());
    assert!("example.com".parse::<Cidr>().is_err());
}

fn spec(streams: u32, msg_bytes: u64) -> TestSpec {
    TestSpec {
        proto: Proto::Tcp,
        mode: Mode::Throughput,
        msg_bytes,
        streams,
        omit_ms: 0,
        duration_ms: 100,
        reverse: false,
        rate_bps: None,
        count: None,
        receiver_wait: proto::ReceiverWait::Auto,
    }
}

fn policy(per_address: usize) -> Policy {
    Policy {
        per_address,
        ..Policy::default()
    }
}

/// A handler that panics gives its slot back (the slot once leaked for good).
#[test]
fn a_slot_is_given_back_even_when_its_handler_panics() {
    let slots = Arc::new(Slots::default());
    let ip: IpAddr = "192.0.2.7".parse().unwrap();
    let (one, two) = (spec(1, 1000), policy(2));
    let taken = Slots::test(&slots, ip, &one, &two).unwrap();
    let held = slots.clone();
    let panicked = std::thread::spawn(move || {
        let _slot = Slots::test(&held, ip, &spec(1, 1000), &policy(2)).unwrap();
        panic!("a handler that panics");
    })
    .join();
    assert!(panicked.is_err());
    assert_eq!(slots.running().0, 1);
    let second = Slots::test(&slots, ip, &one, &two).unwrap();
    let Err(why) = Slots::test(&slots, ip, &one, &two) else {
        panic!("a third test from one address with a limit of 2");
    };
    assert!(why.contains("from 192.0.2.7"), "{why}");
    assert!(Slots::test(&slots, "192.0.2.8".parse().unwrap(), &one, &two).is_ok());
    drop((taken, second));
    assert_eq!(slots.running(), (0, 0, Need::default()));
}

/// IPv6 clients are counted per /64, tests and handshakes alike; an IPv4-mapped address counts
/// as its IPv4 address.
#[test]
fn ipv6_clients_are_counted_per_64() {
    let slots = Arc::new(Slots::default());
    let (one, two) = (spec(1, 1000), policy(2));
    let a = Slots::test(&slots, "2001:db8:1:2::1".parse().unwrap(), &one, &two).unwrap();
    let b = Slots::test(&slots, "2001:db8:1:2:ffff::9".parse().unwrap(), &one, &two).unwrap();
    let why = Slots::test(&slots, "2001:db8:1:2:abcd::1".parse().unwrap(), &one, &two)
        .err()
        .unwrap();
    assert!(why.contains("from 2001:db8:1:2::/64"), "{why}");
    assert!(Slots::test(&slots, "2001:db8:1:3::1".parse().unwrap(), &one, &two).is_ok());
    let _v4 = Slots::test(&slots, "::ffff:192.0.2.1".parse().unwrap(), &one, &two).unwrap();
    let _v4 = Slots::test(&slots, "192.0.2.1".parse().unwrap(), &one, &two).unwrap();
    assert!(Slots::test(&slots, "192.0.2.1".parse().unwrap(), &one, &two).is_err());
    let places: Vec<Slot> = (0..HANDSHAKES_PER_BLOCK as u128)
        .map(|i| {
            let ip = Ipv6Addr::from(0x2001_0db8_0000_0009_0000_0000_0000_0000 + i);
            Slots::handshake(&slots, IpAddr::V6(ip)).unwrap()
        })
        .collect();
    let why = Slots::handshake(&slots, "2001:db8:0:9:1::1".parse().unwrap())
        .err()
        .unwrap();
    assert!(
        why.contains("2001:db8:0:9::/64 are in their handshake"),
        "{why}"
    );
    drop((a, b, places));
}

/// Handshakes do not take test slots; the server's streams and buffers are budgets over all its
/// tests, refused `busy` with the reason and given back.
#[test]
fn the_whole_servers_budgets_refuse_with_the_reason() {
    let slots = Arc::new(Slots::default());
    let ip: IpAddr = "192.0.2.9".parse().unwrap();
    let tight = Policy {
        per_address: 100,
        total_streams: 10,
        buffer_bytes: 3 << 20,
        ..Policy::default()
    };
    let places: Vec<Slot> = (0..HANDSHAKES_PER_BLOCK)
        .map(|_| Slots::handshake(&slots, ip).unwrap())
        .collect();
    assert!(Slots::handshake(&slots, ip).is_err());
    let six = Slots::test(&slots, ip, &spec(6, 1000), &tight).unwrap();
    let why = Slots::test(&slots, ip, &spec(5, 1000), &tight)
        .err()
        .unwrap();
    assert!(
        why.starts_with("busy") && why.contains("6 of the server's 10 streams"),
        "{why}"
    );
    let four = Slots::test(&slots, ip, &spec(4, 1000), &tight).unwrap();
    drop(six);
    // 6 streams of 128 KiB reads and 3 of 1 MB messages: 768 KiB + 2.86 MiB > 3 MiB.
    let small = Slots::test(&slots, ip, &spec(6, 1000), &tight).unwrap();
    drop(four);
    let why = Slots::test(&slots, ip, &spec(3, 1_000_000), &tight)
        .err()
        .unwrap();
    assert!(
        why.starts_with("busy") && why.contains("--max-buffers"),
        "{why}"
    );
    drop((small, places));
    assert_eq!(slots.running(), (0, 0, Need::default()));
    assert!(Slots::test(&slots, ip, &spec(3, 1_000_000), &tight).is_ok());
}

/// The open-file check reserves each test's descriptors under the lock: two tests that each
/// fit, but not both, are not both admitted (when each only read the count of open files, both
/// read the same count before either opened its sockets).
#[test]
fn descriptors_are_reserved_per_test() {
    let open = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64;
    let room = open_file_limit().0.saturating_sub(open + SPARE_FILES);
    if room > 1 << 20 {
        eprintln!(
            "skipped: an open-file limit of {} leaves too much room",
            open_file_limit().0
        );
        return;
    }
    let streams = ((room * 6 / 10).saturating_sub(8) / 2) as u32;
    let slots = Arc::new(Slots::default());
    let lots = Policy {
        per_address: 100,
        total_streams: u64::MAX,
        buffer_bytes: u64::MAX,
        ..Policy::default()
    };
    let ip: IpAddr = "192.0.2.10".parse().unwrap();
    let first = Slots::test(&slots, ip, &spec(streams, 1), &lots).unwrap();
    let why = Slots::test(&slots, ip, &spec(streams, 1), &lots)
        .err()
        .unwrap();
    assert!(
        why.contains("files open") && why.contains("promised"),
        "{why}"
    );
    drop(first);
    assert!(Slots::test(&slots, ip, &spec(streams, 1), &lots).is_ok());
}

/// A failing accept (EMFILE) waits 10 ms doubling to 1 s, and is logged once per period, not
/// every 10 ms.
#[test]
fn a_failing_accept_backs_off_and_is_logged_once_per_period() {
    let mut backoff = AcceptBackoff::default();
    let t0 = Instant::now();
    let mut waits = Vec::new();
    let mut logged = 0;
    let mut now = t0;
    for _ in 0..30 {
        let (wait, log) = backoff.failed(now);
        waits.push(wait.as_millis());
        logged += usize::from(log);
        now += wait;
    }
    assert_eq!(&waits[..8], &[10, 20, 40, 80, 160, 320, 640, 1000]);
    assert!(waits[8..].iter().all(|&w| w == 1000));
    // About 24 s of failures: logged at 0, 10 and 20 s.
    assert_eq!(logged, 3, "{waits:?}");
    backoff.succeeded();
    assert_eq!(backoff.failed(now).0, Duration::from_millis(10));
}

/// Lines one address block causes are rate-limited per block, the dropped ones counted on the
/// next line; log lines are printable and bounded.
#[test]
fn log_lines_are_escaped_bounded_and_rate_limited_per_block() {
    let log = Log::new(true);
    let t0 = Instant::now();
    let noisy = block("2001:db8::1".parse().unwrap());
    let quiet = block("2001:db9::1".parse().unwrap());
    for i in 0..LOG_BURST {
        assert_eq!(log.admit(noisy, t0), Some(0), "line {i}");
    }
    for _ in 0..100 {
        assert_eq!(log.admit(noisy, t0), None);
    }
    // Another block is not silenced by the noisy one, nor is the same /64 spared.
    assert_eq!(log.admit(quiet, t0), Some(0));
    assert_eq!(log.admit(block("2001:db8::2".parse().unwrap()), t0), None);
    assert_eq!(log.admit(noisy, t0 + LOG_PERIOD), Some(101));
    assert_eq!(log.admit(noisy, t0 + LOG_PERIOD), Some(0));
    let line = fit(&format!("{}\u{1b}]52;c;x\u{7}", "é".repeat(5000)));
    assert!(
        line.chars().count() <= LOG_LINE + 1,
        "{}",
        line.chars().count()
    );
    assert!(!fit("a\u{1b}[2Jb\nc").chars().any(|c| c.is_control()));
}

#[test]
fn beyond_the_limit_a_connection_is_refused_politely() {
    let server = LocalServer::start(None).unwrap();
    // Idle control connections hold a handshake place each until the hello deadline.
    let idle: Vec<TcpStream> = (0..HANDSHAKES_PER_BLOCK)
        .map(|_| TcpStream::connect(server.addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut extra = TcpStream::connect(server.addr).unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let mut reply = String::new();
    let _ = extra.read_to_string(&mut reply);
    assert!(
        reply.contains("busy") && reply.contains("handshake"),
        "{reply}"
    );
    drop(idle);
}
