//! The machine's inventory ([`crate::sysinfo`]) as text for a person: one aligned "key: value"
//! section each for the CPU, caches, NUMA, memory, disks, network and OS. `peakbench sysinfo`
//! prints it and the HTML report embeds it.

use crate::sysinfo::{BlockDevice, Cache, Dimm, Fact, NetInterface, NumaNode, SysInfo};

/// One titled block of "key: value" rows.
struct Section {
    title: &'static str,
    rows: Vec<(String, String)>,
}

impl Section {
    fn new(title: &'static str) -> Self {
        Section {
            title,
            rows: Vec::new(),
        }
    }

    fn row(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.rows.push((key.into(), value.into()));
    }

    fn lines(&self) -> Vec<String> {
        let width = self
            .rows
            .iter()
            .map(|(k, _)| k.len() + 1)
            .max()
            .unwrap_or(0);
        let mut lines = vec![self.title.to_string()];
        if self.rows.is_empty() {
            lines.push("  (none found)".to_string());
        }
        for (key, value) in &self.rows {
            lines.push(format!("  {:<width$} {value}", format!("{key}:")));
        }
        lines
    }
}

/// Renders the inventory as plain text: every [`Fact`] is its value followed by its source in
/// parentheses, or "unknown: " and the reason.
pub(crate) fn render(info: &SysInfo) -> String {
    let sections = [
        cpu_section(info),
        cache_section(&info.cpu.caches),
        numa_section(&info.cpu.numa_nodes),
        memory_section(info),
        disk_section(&info.disks),
        network_section(&info.nics),
        os_section(info),
    ];
    let mut text = sections
        .iter()
        .map(|s| s.lines().join("\n"))
        .collect::<Vec<_>>()
        .join("\n\n");
    text.push('\n');
    text
}

/// A fact as "value (source)", or "unknown: reason".
fn fact<T>(fact: &Fact<T>, show: impl Fn(&T) -> String) -> String {
    match (&fact.value, &fact.source) {
        (Some(value), Some(source)) => format!("{} ({source})", show(value)),
        (Some(value), None) => show(value),
        (None, _) => format!(
            "unknown: {}",
            fact.reason.as_deref().unwrap_or("no reason given")
        ),
    }
}

/// A byte count in binary units: "512 B", "96 KiB", "23.5 GiB".
fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut unit = 0;
    while unit + 1 < UNITS.len() && n >= 1u64 << (10 * (unit + 1)) {
        unit += 1;
    }
    let scale = 1u64 << (10 * unit);
    if n.is_multiple_of(scale) {
        format!("{} {}", n / scale, UNITS[unit])
    } else {
        format!("{:.1} {}", n as f64 / scale as f64, UNITS[unit])
    }
}

/// A link speed given in Mb/s: "100 Mb/s", "10 Gb/s", "2.5 Gb/s".
fn link_speed(mbps: u64) -> String {
    match mbps {
        0..1000 => format!("{mbps} Mb/s"),
        _ if mbps.is_multiple_of(1000) => format!("{} Gb/s", mbps / 1000),
        _ => format!("{:.1} Gb/s", mbps as f64 / 1000.0),
    }
}

fn ghz(value: &f64) -> String {
    format!("{value:.2} GHz")
}

/// "1 CPU", "2 CPUs".
fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The text, or "unknown" when it is missing or empty.
fn or_unknown(value: Option<&str>) -> String {
    match value {
        Some(text) if !text.is_empty() => text.to_string(),
        _ => "unknown".to_string(),
    }
}

fn cpu_section(info: &SysInfo) -> Section {
    let cpu = &info.cpu;
    let mut s = Section::new("CPU");
    let number = |n: Option<u32>| n.map_or_else(|| "?".to_string(), |n| n.to_string());
    s.row("model", or_unknown(Some(&cpu.model_name)));
    s.row(
        "vendor",
        format!(
            "{} (family {}, model {}, stepping {})",
            or_unknown(Some(&cpu.vendor)),
            number(cpu.family),
            number(cpu.model),
            number(cpu.stepping)
        ),
    );
    s.row("microarch", fact(&cpu.microarch, String::clone));
    s.row(
        "topology",
        format!(
            "{}, {}, {}, {} per core (SMT {})",
            plural(cpu.sockets, "socket", "sockets"),
            plural(cpu.physical_cores, "core", "cores"),
            plural(cpu.logical_cpus, "logical CPU", "logical CPUs"),
            plural(cpu.threads_per_core, "thread", "threads"),
            if cpu.smt { "on" } else { "off" }
        ),
    );
    s.row("base clock", fact(&cpu.base_ghz, ghz));
    s.row("max clock", fact(&cpu.max_ghz, ghz));
    s.row("current clock", fact(&cpu.current_ghz, ghz));
    s.row("governor", fact(&cpu.governor, String::clone));
    let simd = if cpu.simd.is_empty() {
        "none reported".to_string()
    } else {
        cpu.simd.join(" ")
    };
    s.row("simd", simd);
    s
}

fn cache_name(cache: &Cache) -> String {
    let suffix = match cache.kind.as_str() {
        "Data" => "d",
        "Instruction" => "i",
        _ => "",
    };
    format!("L{}{suffix}", cache.level)
}

fn cache_section(caches: &[Cache]) -> Section {
    let mut s = Section::new("Caches");
    for cache in caches {
        let line = cache
            .line_bytes
            .map_or_else(String::new, |b| format!(", {b} B lines"));
        s.row(
            cache_name(cache),
            format!(
                "{} x {}, each shared by {}{line}",
                bytes(cache.size_bytes),
                plural(cache.instances, "instance", "instances"),
                plural(cache.shared_by_cpus, "CPU", "CPUs"),
            ),
        );
    }
    s
}

fn numa_section(nodes: &[NumaNode]) -> Section {
    let mut s = Section::new("NUMA");
    for node in nodes {
        let memory = node
            .memory_bytes
            .map_or_else(|| "unknown".to_string(), bytes);
        s.row(
            format!("node{}", node.id),
            format!("CPUs {}, memory {memory}", or_unknown(Some(&node.cpus))),
        );
    }
    s
}

fn dimm_line(dimm: &Dimm) -> String {
    let mut parts = vec![
        dimm.size_bytes
            .map_or_else(|| "size unknown".to_string(), bytes),
        or_unknown(dimm.kind.as_deref()),
    ];
    parts.extend(dimm.speed_mts.map(|m| format!("rated {m} MT/s")));
    parts.extend(dimm.configured_mts.map(|m| format!("configured {m} MT/s")));
    parts.extend(dimm.data_width_bits.map(|w| format!("{w}-bit")));
    parts.join(", ")
}

fn memory_section(info: &SysInfo) -> Section {
    let memory = &info.memory;
    let mut s = Section::new("Memory");
    s.row(
        "total",
        format!("{} (/proc/meminfo)", bytes(memory.total_bytes)),
    );
    s.row(
        "available",
        format!(
            "{} ({})",
            bytes(memory.available_bytes),
            memory
                .available_source
                .as_deref()
                .unwrap_or("/proc/meminfo")
        ),
    );
    s.row(
        "DIMMs",
        fact(&memory.dimms, |d| plural(d.len(), "populated", "populated")),
    );
    for dimm in memory.dimms.as_ref().into_iter().flatten() {
        s.row(format!("  {}", dimm.locator), dimm_line(dimm));
    }
    let dimm_reason = memory.dimms.reason.as_deref();
    s.row(
        "channels",
        fact_after(&memory.channels, dimm_reason, u32::to_string),
    );
    s.row(
        "speed",
        fact_after(&memory.mts, dimm_reason, |m| format!("{m} MT/s")),
    );
    s.row("type", fact_after(&memory.kind, dimm_reason, String::clone));
    s
}

/// Like [`fact`], but an unknown whose reason was just shown refers to it instead of repeating
/// it.
fn fact_after<T>(f: &Fact<T>, shown: Option<&str>, show: impl Fn(&T) -> String) -> String {
    match (f.value.is_none(), f.reason.as_deref()) {
        (true, Some(reason)) if Some(reason) == shown => "unknown: as above".to_string(),
        _ => fact(f, show),
    }
}

fn disk_line(disk: &BlockDevice) -> String {
    let mut parts = vec![
        disk.size_bytes
            .map_or_else(|| "size unknown".to_string(), bytes),
    ];
    parts.extend(disk.model.clone());
    parts.extend(
        disk.rotational
            .map(|r| if r { "rotational" } else { "non-rotational" }.to_string()),
    );
    if let (Some(logical), Some(physical)) = (disk.logical_sector_bytes, disk.physical_sector_bytes)
    {
        parts.push(format!("sectors {logical}/{physical} B"));
    }
    parts.extend(disk.queue_depth.map(|q| format!("queue depth {q}")));
    parts.extend(disk.scheduler.as_ref().map(|s| format!("scheduler {s}")));
    parts.join(", ")
}

fn disk_section(disks: &[BlockDevice]) -> Section {
    let mut s = Section::new("Disks");
    for disk in disks {
        s.row(disk.name.clone(), disk_line(disk));
    }
    s
}

fn nic_line(nic: &NetInterface) -> String {
    let mut parts = vec![
        nic.driver
            .clone()
            .unwrap_or_else(|| "no driver".to_string()),
    ];
    if nic.loopback {
        parts.push("loopback".to_string());
    }
    parts.extend(nic.state.as_ref().map(|s| format!("state {s}")));
    parts.extend(nic.mtu.map(|m| format!("mtu {m}")));
    parts.push(format!(
        "speed {}",
        fact(&nic.speed_mbps, |m| link_speed(*m))
    ));
    parts.join(", ")
}

fn network_section(nics: &[NetInterface]) -> Section {
    let mut s = Section::new("Network");
    for nic in nics {
        s.row(nic.name.clone(), nic_line(nic));
    }
    s
}

fn os_section(info: &SysInfo) -> Section {
    let mut s = Section::new("OS");
    s.row("hostname", or_unknown(Some(&info.hostname)));
    s.row("kernel", or_unknown(Some(&info.os.kernel)));
    s.row("distribution", fact(&info.os.distribution, String::clone));
    s.row("arch", info.os.arch.clone());
    s.row("hypervisor", fact(&info.hypervisor, String::clone));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sysinfo::{CpuInfo, MemoryInfo, OsInfo};

    fn sample() -> SysInfo {
        let no_dmi = "no DMI table readable; give --mem-channels and --mem-mts";
        SysInfo {
            hostname: "box".to_string(),
            os: OsInfo {
                kernel: "6.1.0".to_string(),
                distribution: Fact::read("Debian 12".to_string(), "/etc/os-release: PRETTY_NAME"),
                arch: "x86_64".to_string(),
            },
            hypervisor: Fact::read("KVM".to_string(), "CPUID leaf 0x40000000"),
            cpu: CpuInfo {
                vendor: "AuthenticAMD".to_string(),
                model_name: "AMD EPYC".to_string(),
                family: Some(26),
                model: Some(2),
                stepping: None,
                microarch: Fact::read("zen5".to_string(), "CPUID family 26 model 2"),
                sockets: 1,
                physical_cores: 2,
                logical_cpus: 2,
                threads_per_core: 1,
                smt: false,
                base_ghz: Fact::unknown("no cpufreq in sysfs"),
                max_ghz: Fact::read(3.9, "cpuinfo_max_freq"),
                current_ghz: Fact::read(2.59612, "/proc/cpuinfo: cpu MHz"),
                governor: Fact::unknown("no cpufreq driver"),
                simd: vec!["sse2".to_string(), "avx2".to_string()],
                caches: vec![Cache {
                    level: 1,
                    kind: "Data".to_string(),
                    size_bytes: 48 << 10,
                    shared_by_cpus: 1,
                    instances: 2,
                    line_bytes: Some(64),
                }],
                numa_nodes: vec![NumaNode {
                    id: 0,
                    cpus: "0-1".to_string(),
                    memory_bytes: Some(4 << 30),
                }],
            },
            memory: MemoryInfo {
                total_bytes: 25_276_502_016,
                available_bytes: 1 << 30,
                available_source: None,
                dimms: Fact::unknown(no_dmi),
                channels: Fact::unknown(no_dmi),
                mts: Fact::unknown(no_dmi),
                kind: Fact::read("DDR5".to_string(), "dmidecode: Type"),
            },
            disks: vec![BlockDevice {
                name: "nvme0n1".to_string(),
                model: Some("Fast Disk".to_string()),
                size_bytes: Some(1 << 40),
                rotational: Some(false),
                logical_sector_bytes: Some(512),
                physical_sector_bytes: Some(4096),
                queue_depth: Some(1023),
                scheduler: Some("none".to_string()),
            }],
            nics: vec![
                NetInterface {
                    name: "ens5".to_string(),
                    driver: Some("ena".to_string()),
                    mtu: Some(9001),
                    speed_mbps: Fact::read(25_000, "/sys/class/net/ens5/speed"),
                    state: Some("up".to_string()),
                    loopback: false,
                },
                NetInterface {
                    name: "lo".to_string(),
                    driver: None,
                    mtu: Some(65536),
                    speed_mbps: Fact::unknown("loopback has no link speed"),
                    state: Some("unknown".to_string()),
                    loopback: true,
                },
            ],
            boot_id: None,
        }
    }

    #[test]
    fn binary_sizes() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(96 << 10), "96 KiB");
        assert_eq!(bytes(32 << 20), "32 MiB");
        assert_eq!(bytes(25_276_502_016), "23.5 GiB");
        assert_eq!(bytes(1 << 40), "1 TiB");
        assert_eq!(bytes(0), "0 B");
    }

    #[test]
    fn link_speeds() {
        assert_eq!(link_speed(100), "100 Mb/s");
        assert_eq!(link_speed(10_000), "10 Gb/s");
        assert_eq!(link_speed(2_500), "2.5 Gb/s");
    }

    #[test]
    fn renders_every_section_with_sources_and_reasons() {
        let text = render(&sample());
        for title in ["CPU", "Caches", "NUMA", "Memory", "Disks", "Network", "OS"] {
            assert!(
                text.lines().any(|l| l == title),
                "no {title} section in\n{text}"
            );
        }
        let expected = [
            "  model:         AMD EPYC",
            "  microarch:     zen5 (CPUID family 26 model 2)",
            "  base clock:    unknown: no cpufreq in sysfs",
            "  current clock: 2.60 GHz (/proc/cpuinfo: cpu MHz)",
            "  L1d: 48 KiB x 2 instances, each shared by 1 CPU, 64 B lines",
            "  node0: CPUs 0-1, memory 4 GiB",
            "  total:     23.5 GiB (/proc/meminfo)",
            "  channels:  unknown: as above",
            "  type:      DDR5 (dmidecode: Type)",
            "  ens5: ena, state up, mtu 9001, speed 25 Gb/s (/sys/class/net/ens5/speed)",
            "  hypervisor:   KVM (CPUID leaf 0x40000000)",
        ];
        for line in expected {
            assert!(
                text.lines().any(|l| l == line),
                "no line {line:?} in\n{text}"
            );
        }
        assert!(text.contains("stepping ?"));
        assert!(text.contains("1 TiB, Fast Disk, non-rotational, sectors 512/4096 B"));
    }

    #[test]
    fn empty_sections_say_so() {
        let mut info = sample();
        info.disks.clear();
        let text = render(&info);
        assert!(text.contains("Disks\n  (none found)\n"));
    }
}
