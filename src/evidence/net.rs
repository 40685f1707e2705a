//! The network path: qdiscs (`tc -j`), the route to an address (`ip -j route get`) and the
//! socket sysctls.
//!
//! # Rates
//!
//! `tc -j` writes every rate as a number of **bytes** per second (tbf `rate`, fq `maxrate`,
//! cake `bandwidth`, htb `rate` and `ceil`): a tbf of `rate 150mbit` reads back as `18750000`.
//! Its text output writes bits with a decimal prefix (`120Mbit`, or `Kibit` with `-iec`).
//! [`Qdisc::rate_bps`] is bits per second either way.
//!
//! iproute2 6.1 (Debian 12) prints classes as text even with `-j`
//! (`class htb 1:10 root rate 80Mbit ceil 120Mbit burst 1600b cburst 1575b`); later versions
//! print a JSON array whose objects name the kind `class`. [`parse_tc_classes`] reads both.

use std::time::Duration;

use serde_json::Value;

use super::{Offloads, Qdisc, Read};

/// How long `tc` or `ip` may take before it is killed.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(2);

/// What to do when `tc` or `ip` is missing.
const INSTALL_IPROUTE2: &str = "install iproute2 (apt-get install iproute2, dnf install iproute)";

/// The socket sysctls [`read_sysctls`] reads, by their dotted names.
const SYSCTLS: [&str; 5] = [
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_congestion_control",
];

/// The program `name` of iproute2: its usual place (`/usr/sbin`, `/sbin`; not every user has
/// them on `PATH`), else `name` for `PATH` to find.
fn iproute2_program(name: &str) -> String {
    ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
        .into_iter()
        .map(|dir| format!("{dir}/{name}"))
        .find(|path| std::path::Path::new(path).is_file())
        .unwrap_or_else(|| name.to_string())
}

/// Runs `program args…` for at most [`COMMAND_TIMEOUT`]: its standard output, or what went
/// wrong, said for the reader of `unreadable`.
fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let shown = format!("{program} {}", args.join(" "));
    let output = crate::sysinfo::run_for_at_most(&iproute2_program(program), args, COMMAND_TIMEOUT)
        .map_err(|e| {
            if e.ends_with("not installed") {
                format!("`{shown}`: {program} is not installed: {INSTALL_IPROUTE2}")
            } else {
                format!("`{shown}`: {e}")
            }
        })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let said = stderr.lines().map(str::trim).find(|l| !l.is_empty());
        return Err(format!(
            "`{shown}` failed ({}){}",
            output.status,
            said.map(|s| format!(": {s}")).unwrap_or_default()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Every qdisc of this network namespace (`tc -j qdisc show`, one command) and the classes of
/// each interface with an htb qdisc (`tc -j class show dev IF`, one command each).
pub(super) fn read_qdiscs(unreadable: &mut Vec<String>) -> Vec<Qdisc> {
    const SHOW: &str = "tc -j qdisc show";
    let json = match run("tc", &["-j", "qdisc", "show"]) {
        Ok(json) => json,
        Err(e) => {
            unreadable.push(format!("qdiscs: {e}"));
            return Vec::new();
        }
    };
    if serde_json::from_str::<Value>(&json).is_err() {
        unreadable.push(format!(
            "qdiscs: `{SHOW}` printed no JSON (an iproute2 older than 4.x?): {INSTALL_IPROUTE2}"
        ));
        return Vec::new();
    }
    let mut qdiscs = parse_tc_qdiscs(&json, SHOW);
    let mut htb_interfaces: Vec<String> = qdiscs
        .iter()
        .filter(|q| q.kind == "htb")
        .map(|q| q.interface.clone())
        .collect();
    htb_interfaces.sort();
    htb_interfaces.dedup();
    for interface in htb_interfaces {
        let source = format!("tc -j class show dev {interface}");
        match run("tc", &["-j", "class", "show", "dev", &interface]) {
            Ok(text) => qdiscs.extend(parse_tc_classes(&text, &interface, &source)),
            Err(e) => unreadable.push(format!("htb classes of {interface}: {e}")),
        }
    }
    qdiscs
}

/// `tc -j qdisc show` output: every root qdisc, and every other one that shapes (has a rate),
/// with that rate. Qdiscs that neither sit at a root nor shape (the per-queue children of
/// `mq`, `ingress`) tell nothing and are left out; so is an object without `dev` (the output of
/// `tc -j qdisc show dev IF` has none: read all interfaces at once).
pub(crate) fn parse_tc_qdiscs(json: &str, source: &str) -> Vec<Qdisc> {
    let Ok(Value::Array(objects)) = serde_json::from_str::<Value>(json) else {
        return Vec::new();
    };
    objects
        .iter()
        .filter_map(|object| {
            let kind = object.get("kind")?.as_str()?.to_string();
            let interface = object.get("dev")?.as_str()?.to_string();
            let options = object.get("options");
            let option = |key: &str| options.and_then(|o| o.get(key));
            let rate_bps = match kind.as_str() {
                "tbf" => option("rate").and_then(json_rate_bps),
                "fq" => option("maxrate").and_then(json_rate_bps),
                "cake" => option("bandwidth").and_then(json_rate_bps),
                _ => None,
            };
            let parent = parent_of(object);
            if parent != "root" && rate_bps.is_none() {
                return None;
            }
            Some(Qdisc {
                interface,
                kind,
                handle: string_of(object.get("handle")),
                parent,
                rate_bps,
                source: source.to_string(),
            })
        })
        .collect()
}

/// `root` when the object says `"root": true`, else its `parent` handle (`?` when it has none).
fn parent_of(object: &Value) -> String {
    if object.get("root").and_then(Value::as_bool) == Some(true) {
        return "root".to_string();
    }
    match object.get("parent").and_then(Value::as_str) {
        Some(parent) => parent.to_string(),
        None => "?".to_string(),
    }
}

/// A JSON string's text, or `?`.
fn string_of(value: Option<&Value>) -> String {
    value
        .and_then(Value::as_str)
        .map_or_else(|| "?".to_string(), str::to_string)
}

/// A rate of `tc -j` in bits per second: a number is bytes per second; a string is tc's text
/// form (`150Mbit`); `unlimited` and anything else is no rate. 0 is no rate too.
fn json_rate_bps(value: &Value) -> Option<u64> {
    let bps = match value {
        Value::Number(n) => {
            let bytes = n.as_u64().or_else(|| {
                n.as_f64()
                    .filter(|f| f.is_finite() && *f >= 0.0)
                    .map(|f| f as u64)
            })?;
            bytes.checked_mul(8)?
        }
        Value::String(text) => parse_tc_rate(text)?,
        _ => return None,
    };
    (bps > 0).then_some(bps)
}

/// A rate as tc writes it (`80Mbit`, `1Gbit`, `500Kibit`, `1.5Mbit`, or bytes: `10mbps`), in
/// bits per second.
fn parse_tc_rate(text: &str) -> Option<u64> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let number: f64 = number.parse().ok()?;
    let unit = unit.to_ascii_lowercase();
    let (prefix, per_unit) = if let Some(prefix) = unit.strip_suffix("bit") {
        (prefix, 1.0)
    } else if let Some(prefix) = unit.strip_suffix("bps") {
        (prefix, 8.0)
    } else {
        return None;
    };
    let scale = match prefix {
        "" => 1.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        "t" => 1e12,
        "ki" => 1024.0,
        "mi" => 1024.0 * 1024.0,
        "gi" => 1024.0 * 1024.0 * 1024.0,
        "ti" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    let bps = number * scale * per_unit;
    (bps.is_finite() && bps >= 0.0 && bps < u64::MAX as f64).then(|| bps.round() as u64)
}

/// `tc -j class show dev IF` output: htb classes with their ceil (the most a class may send,
/// borrowing included), as kind `htb-class`. Reads the JSON of recent iproute2 and the text
/// that iproute2 6.1 prints instead; other kinds of class are left out.
pub(crate) fn parse_tc_classes(json: &str, interface: &str, source: &str) -> Vec<Qdisc> {
    let class = |handle: String, parent: String, rate_bps: Option<u64>| Qdisc {
        interface: interface.to_string(),
        kind: "htb-class".to_string(),
        handle,
        parent,
        rate_bps,
        source: source.to_string(),
    };
    if let Ok(Value::Array(objects)) = serde_json::from_str::<Value>(json) {
        return objects
            .iter()
            .filter(|o| {
                let kind = o.get("class").or_else(|| o.get("kind"));
                kind.and_then(Value::as_str) == Some("htb")
            })
            .map(|o| {
                // The options sit beside the class's fields, or under "options".
                let field = |key: &str| {
                    o.get(key)
                        .or_else(|| o.get("options").and_then(|opt| opt.get(key)))
                };
                let rate = field("ceil").or_else(|| field("rate"));
                class(
                    string_of(o.get("handle")),
                    parent_of(o),
                    rate.and_then(json_rate_bps),
                )
            })
            .collect();
    }
    json.lines()
        .filter_map(|line| {
            // "class htb 1:20 parent 1:10 prio 0 rate 10Mbit ceil 1Gbit burst 1600b …"
            let words: Vec<&str> = line.split_whitespace().collect();
            if words.first() != Some(&"class") || words.get(1) != Some(&"htb") {
                return None;
            }
            let after = |key: &str| {
                let at = words.iter().position(|w| *w == key)?;
                words.get(at + 1).copied()
            };
            let parent = if words.contains(&"root") {
                "root".to_string()
            } else {
                after("parent").unwrap_or("?").to_string()
            };
            let rate = after("ceil").or_else(|| after("rate"));
            Some(class(
                words.get(2)?.to_string(),
                parent,
                rate.and_then(parse_tc_rate),
            ))
        })
        .collect()
}

/// `ip -j route get ADDR` output: the interface.
pub(crate) fn parse_route_get(json: &str) -> Option<String> {
    let value: Value = serde_json::from_str(json).ok()?;
    let dev = value.as_array()?.first()?.get("dev")?.as_str()?;
    (!dev.is_empty()).then(|| dev.to_string())
}

/// The IP address of `server`: a socket address (`127.0.0.1:38623`, `[::1]:5201`) or a bare
/// address (`10.0.0.2`, `::1`, `[::1]`); `None` for anything else (a host name is not
/// resolved here).
fn server_ip(server: &str) -> Option<std::net::IpAddr> {
    let server = server.trim();
    if let Ok(socket) = server.parse::<std::net::SocketAddr>() {
        return Some(socket.ip());
    }
    let bare = server
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .unwrap_or(server);
    bare.parse().ok()
}

/// The interface traffic to `server` leaves by (`ip -j route get IP`, at most 2 s).
pub(super) fn route_to(server: &str) -> Option<Read<String>> {
    let ip = server_ip(server)?.to_string();
    let json = run("ip", &["-j", "route", "get", &ip]).ok()?;
    Some(Read::new(
        parse_route_get(&json)?,
        format!("ip -j route get {ip}"),
    ))
}

/// The socket buffer and TCP sysctls, by dotted name, white space collapsed to single spaces
/// (`net.ipv4.tcp_rmem` = `4096 131072 6291456`).
pub(super) fn read_sysctls() -> std::collections::BTreeMap<String, String> {
    SYSCTLS
        .iter()
        .filter_map(|name| {
            let path = format!("/proc/sys/{}", name.replace('.', "/"));
            let text = std::fs::read_to_string(path).ok()?;
            let value = text.split_whitespace().collect::<Vec<_>>().join(" ");
            (!value.is_empty()).then(|| (name.to_string(), value))
        })
        .collect()
}

/// `ETHTOOL_GTSO`, `ETHTOOL_GGSO` and `ETHTOOL_GGRO` of `<linux/ethtool.h>`: each answers a
/// `struct ethtool_value { u32 cmd; u32 data; }` with `data` 1 (on) or 0 (off).
const ETHTOOL_GTSO: u32 = 0x1e;
const ETHTOOL_GGSO: u32 = 0x23;
const ETHTOOL_GGRO: u32 = 0x2b;
/// `SIOCETHTOOL` of `<linux/sockios.h>`.
const SIOCETHTOOL: libc::c_ulong = 0x8946;
/// More interfaces than this in one namespace are not read (a host with thousands of veths
/// would pay three ioctls for each).
const MAX_INTERFACES: usize = 256;

/// The offloads of every interface of this network namespace (`/sys/class/net`), three
/// ioctls each on one datagram socket; none where no socket can be opened.
pub(super) fn read_offloads() -> Vec<Offloads> {
    let Ok(entries) = std::fs::read_dir("/sys/class/net") else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| !n.is_empty() && n.len() < libc::IFNAMSIZ)
        .collect();
    names.sort();
    names.truncate(MAX_INTERFACES);
    // SAFETY: socket(2) with constant arguments; the descriptor is owned below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Vec::new();
    }
    // SAFETY: `fd` was just opened and nothing else owns it.
    let socket = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    names
        .into_iter()
        .map(|interface| {
            let get = |cmd| ethtool_value(&socket, &interface, cmd);
            Offloads {
                tso: get(ETHTOOL_GTSO),
                gso: get(ETHTOOL_GGSO),
                gro: get(ETHTOOL_GGRO),
                software: !std::path::Path::new("/sys/class/net")
                    .join(&interface)
                    .join("device")
                    .exists(),
                source: format!("SIOCETHTOOL ETHTOOL_GTSO/GGSO/GGRO on {interface} (ethtool -k)"),
                interface,
            }
        })
        .collect()
}

/// One `ethtool_value` query of `interface`: on, off, or `None` where it is not answered.
fn ethtool_value(socket: &std::os::fd::OwnedFd, interface: &str, cmd: u32) -> Option<bool> {
    use std::os::fd::AsRawFd;
    #[repr(C)]
    struct EthtoolValue {
        cmd: u32,
        data: u32,
    }
    let mut value = EthtoolValue { cmd, data: 0 };
    // SAFETY: an all-zero ifreq is valid (a name of NULs, a null data pointer).
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    // The name was checked shorter than IFNAMSIZ, so a NUL ends it.
    for (slot, byte) in request.ifr_name.iter_mut().zip(interface.bytes()) {
        *slot = byte as libc::c_char;
    }
    request.ifr_ifru.ifru_data = (&mut value as *mut EthtoolValue).cast();
    // SAFETY: SIOCETHTOOL reads the interface name and the command from `request` and writes
    // only `value.data`, through the pointer set just above to a live local.
    let answer = unsafe { libc::ioctl(socket.as_raw_fd(), SIOCETHTOOL as _, &mut request) };
    (answer == 0).then_some(value.data != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `tc -j qdisc show` in a network namespace of the machine this was written on (iproute2
    /// 6.1, kernel 6.18): `tc qdisc add dev va root tbf rate 150mbit burst 32kbit latency
    /// 50ms`, `… dev vd root handle 2: tbf rate 1gbit burst 64kb latency 10ms`, `… dev vc root
    /// handle 1: htb default 10`.
    const QDISCS: &str = r#"[{"kind":"noqueue","handle":"0:","dev":"vb","root":true,"refcnt":2,"options":{}},{"kind":"tbf","handle":"8013:","dev":"va","root":true,"refcnt":3,"options":{"rate":18750000,"burst":4087,"lat":50000}},{"kind":"tbf","handle":"2:","dev":"vd","root":true,"refcnt":3,"options":{"rate":125000000,"burst":65500,"lat":10000}},{"kind":"htb","handle":"1:","dev":"vc","root":true,"refcnt":3,"options":{"r2q":10,"default":"0x10","direct_packets_stat":0,"direct_qlen":1000}}]"#;

    /// `tc -j class show dev vc` on the same machine after `tc class add dev vc parent 1:
    /// classid 1:10 htb rate 80mbit ceil 120mbit` and `… parent 1:10 classid 1:20 htb rate
    /// 10mbit ceil 1gbit`: text, not JSON.
    const CLASSES_TEXT: &str = "\
class htb 1:10 root rate 80Mbit ceil 120Mbit burst 1600b cburst 1575b 
class htb 1:20 parent 1:10 prio 0 rate 10Mbit ceil 1Gbit burst 1600b cburst 1375b 
";

    /// The same classes as later iproute2 prints them: written from its `print_class`
    /// (tc_class.c) and `htb_print_opt` (q_htb.c), which put `class`, `handle`, `root` or
    /// `parent` and the options, rates in bytes per second, in one object. Not captured: this
    /// machine's iproute2 prints text.
    const CLASSES_JSON: &str = r#"[{"class":"htb","handle":"1:10","root":true,"rate":10000000,"ceil":15000000,"burst":1600,"cburst":1575},{"class":"htb","handle":"1:20","parent":"1:10","prio":0,"rate":1250000,"ceil":125000000,"burst":1600,"cburst":1375}]"#;

    fn qdisc(interface: &str, kind: &str, handle: &str, rate_bps: Option<u64>) -> Qdisc {
        Qdisc {
            interface: interface.into(),
            kind: kind.into(),
            handle: handle.into(),
            parent: "root".into(),
            rate_bps,
            source: "tc -j qdisc show".into(),
        }
    }

    #[test]
    fn tc_qdiscs_rates_are_bytes_per_second_read_as_bits() {
        assert_eq!(
            parse_tc_qdiscs(QDISCS, "tc -j qdisc show"),
            vec![
                qdisc("vb", "noqueue", "0:", None),
                qdisc("va", "tbf", "8013:", Some(150_000_000)),
                qdisc("vd", "tbf", "2:", Some(1_000_000_000)),
                qdisc("vc", "htb", "1:", None),
            ]
        );
    }

    #[test]
    fn fq_and_cake_rates_and_children_without_one() {
        // fq and cake are not in this machine's kernel: shapes from iproute2's q_fq.c and
        // q_cake.c (tc_print_rate: bytes per second; cake without a bandwidth says
        // "unlimited").
        let json = r#"[
            {"kind":"fq","handle":"8001:","dev":"eth0","root":true,"options":{"limit":10000,"maxrate":11250000}},
            {"kind":"fq","handle":"8002:","dev":"eth1","root":true,"options":{"limit":10000}},
            {"kind":"cake","handle":"8003:","dev":"eth2","root":true,"options":{"bandwidth":8750000}},
            {"kind":"cake","handle":"8004:","dev":"eth3","root":true,"options":{"bandwidth":"unlimited"}},
            {"kind":"mq","handle":"0:","dev":"eth4","root":true,"options":{}},
            {"kind":"fq_codel","handle":"0:","dev":"eth4","parent":":1","options":{}},
            {"kind":"tbf","handle":"10:","dev":"eth4","parent":"1:1","options":{"rate":1250000}},
            {"kind":"ingress","handle":"ffff:","dev":"eth4","parent":"ffff:fff1","options":{}},
            {"kind":"tbf","handle":"3:","root":true,"options":{"rate":1250000}}
        ]"#;
        let read: Vec<(String, String, Option<u64>)> = parse_tc_qdiscs(json, "s")
            .into_iter()
            .map(|q| (q.interface, q.parent, q.rate_bps))
            .collect();
        let expected = [
            ("eth0", "root", Some(90_000_000)),
            ("eth1", "root", None),
            ("eth2", "root", Some(70_000_000)),
            ("eth3", "root", None),
            ("eth4", "root", None),
            ("eth4", "1:1", Some(10_000_000)),
        ];
        let expected: Vec<(String, String, Option<u64>)> = expected
            .iter()
            .map(|(i, p, r)| (i.to_string(), p.to_string(), *r))
            .collect();
        assert_eq!(read, expected);
        assert_eq!(parse_tc_qdiscs("not json", "s"), Vec::new());
        assert_eq!(parse_tc_qdiscs("{}", "s"), Vec::new());
    }

    #[test]
    fn htb_classes_from_text_and_from_json() {
        let class = |handle: &str, parent: &str, rate_bps: u64| Qdisc {
            interface: "vc".into(),
            kind: "htb-class".into(),
            handle: handle.into(),
            parent: parent.into(),
            rate_bps: Some(rate_bps),
            source: "src".into(),
        };
        let expected = vec![
            class("1:10", "root", 120_000_000),
            class("1:20", "1:10", 1_000_000_000),
        ];
        assert_eq!(parse_tc_classes(CLASSES_TEXT, "vc", "src"), expected);
        assert_eq!(parse_tc_classes(CLASSES_JSON, "vc", "src"), expected);
        // The tbf's internal class (`tc class show dev va` prints "class tbf 8013:1 parent
        // 8013:") is no htb class.
        assert_eq!(
            parse_tc_classes("class tbf 8013:1 parent 8013: \n", "va", "src"),
            Vec::new()
        );
        assert_eq!(parse_tc_classes("", "vc", "src"), Vec::new());
    }

    #[test]
    fn tc_rates() {
        assert_eq!(parse_tc_rate("80Mbit"), Some(80_000_000));
        assert_eq!(parse_tc_rate("1Gbit"), Some(1_000_000_000));
        assert_eq!(parse_tc_rate("1.5Mbit"), Some(1_500_000));
        assert_eq!(parse_tc_rate("100bit"), Some(100));
        assert_eq!(parse_tc_rate("2Kibit"), Some(2048));
        assert_eq!(parse_tc_rate("10mbps"), Some(80_000_000));
        assert_eq!(parse_tc_rate("fast"), None);
        assert_eq!(parse_tc_rate("10Xbit"), None);
        assert_eq!(parse_tc_rate(""), None);
    }

    #[test]
    fn route_get() {
        // `ip -j route get` on the machine this was written on.
        let local = r#"[{"type":"local","dst":"127.0.0.1","dev":"lo","prefsrc":"127.0.0.1","flags":[],"uid":0,"cache":["local"]}]"#;
        let remote = r#"[{"dst":"8.8.8.8","gateway":"192.0.2.1","dev":"eth0","prefsrc":"192.0.2.2","flags":[],"uid":0,"cache":[]}]"#;
        assert_eq!(parse_route_get(local).as_deref(), Some("lo"));
        assert_eq!(parse_route_get(remote).as_deref(), Some("eth0"));
        assert_eq!(parse_route_get("[]"), None);
        assert_eq!(parse_route_get(""), None);
    }

    #[test]
    fn server_addresses() {
        let ip = |s: &str| server_ip(s).map(|ip| ip.to_string());
        assert_eq!(ip("127.0.0.1:38623").as_deref(), Some("127.0.0.1"));
        assert_eq!(ip("[::1]:5201").as_deref(), Some("::1"));
        assert_eq!(ip("10.0.0.2").as_deref(), Some("10.0.0.2"));
        assert_eq!(ip("[::1]").as_deref(), Some("::1"));
        assert_eq!(ip("::1").as_deref(), Some("::1"));
        assert_eq!(ip("example.com:80"), None);
        assert_eq!(ip("-j; rm -rf /"), None);
    }

    #[test]
    fn this_machine_routes_loopback_through_lo() {
        let route = route_to("127.0.0.1:9").expect("ip -j route get 127.0.0.1");
        assert_eq!(route.value, "lo");
        assert_eq!(route.source, "ip -j route get 127.0.0.1");
        assert_eq!(route_to("localhost:9"), None);
        let sysctls = read_sysctls();
        assert!(sysctls.contains_key("net.core.rmem_max"), "{sysctls:?}");
        assert!(sysctls.values().all(|v| !v.contains('\t')));
    }

    #[test]
    fn offloads_of_loopback_are_read() {
        let offloads = read_offloads();
        let lo = offloads
            .iter()
            .find(|o| o.interface == "lo")
            .expect("every namespace has lo");
        // The kernel's loopback driver segments and coalesces in software: all three on by
        // default, and always answered.
        assert!(
            lo.tso.is_some() && lo.gso.is_some() && lo.gro.is_some(),
            "{lo:?}"
        );
        assert!(lo.source.contains("lo"));
    }

    #[test]
    fn offloads_that_are_off_are_named() {
        let o = Offloads {
            interface: "veth0".into(),
            tso: Some(false),
            gso: Some(true),
            gro: Some(false),
            software: false,
            source: String::new(),
        };
        assert_eq!(o.off(), ["tso", "gro"]);
        // A veth passes GSO packets on whole: its GRO does not matter.
        let veth = Offloads {
            software: true,
            ..o
        };
        assert_eq!(veth.off(), ["tso"]);
    }
}
