//! Reads the inventory of the machine from /proc, /sys, /etc/os-release, CPUID and dmidecode.
//!
//! The parsers are pure functions over text. Files are read through [`Root`], a directory that
//! stands for "/", so the tests can point the whole collection at a fixture tree. What is not a
//! file (CPUID, the output of dmidecode) comes in through [`Probes`].

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::str::FromStr;

use super::{
    BlockDevice, Cache, CpuInfo, Dimm, Fact, MemoryInfo, NetInterface, NumaNode, OsInfo, SysInfo,
};

/// What a user can do when the DIMM inventory cannot be read.
const MEM_ADVICE: &str = "give --mem-channels and --mem-mts";

/// cpufreq directory of CPU 0, where the clocks and the governor are read.
const CPUFREQ: &str = "/sys/devices/system/cpu/cpu0/cpufreq";

/// Why no cpufreq file can be read when the cpufreq directory is missing.
const NO_CPUFREQ: &str = "no cpufreq driver in sysfs (typical under a hypervisor)";

/// SIMD features in report order, each with the name /proc/cpuinfo gives the flag.
const SIMD_FLAGS: [(&str, &str); 30] = [
    ("sse", "sse"),
    ("sse2", "sse2"),
    ("sse3", "pni"),
    ("ssse3", "ssse3"),
    ("sse4_1", "sse4_1"),
    ("sse4_2", "sse4_2"),
    ("avx", "avx"),
    ("avx2", "avx2"),
    ("fma", "fma"),
    ("f16c", "f16c"),
    ("avx512f", "avx512f"),
    ("avx512cd", "avx512cd"),
    ("avx512bw", "avx512bw"),
    ("avx512dq", "avx512dq"),
    ("avx512vl", "avx512vl"),
    ("avx512ifma", "avx512ifma"),
    ("avx512vbmi", "avx512vbmi"),
    ("avx512_vbmi2", "avx512_vbmi2"),
    ("avx512_vnni", "avx512_vnni"),
    ("avx512_bitalg", "avx512_bitalg"),
    ("avx512_vpopcntdq", "avx512_vpopcntdq"),
    ("avx512_bf16", "avx512_bf16"),
    ("avx512_fp16", "avx512_fp16"),
    ("avx_vnni", "avx_vnni"),
    ("amx_tile", "amx_tile"),
    ("amx_bf16", "amx_bf16"),
    ("amx_int8", "amx_int8"),
    ("asimd", "asimd"),
    ("sve", "sve"),
    ("sve2", "sve2"),
];

/// Longest CPU range accepted in a CPU list, so that an odd file cannot exhaust memory.
const MAX_CPU_RANGE: usize = 1 << 16;

/// Reads the inventory of this machine. Never fails: what cannot be read is unknown, with the
/// reason.
pub fn collect() -> SysInfo {
    let probes = Probes {
        dmidecode: run_dmidecode(),
        cpuid_hypervisor: cpuid_hypervisor_vendor(),
    };
    collect_from(Path::new("/"), &probes)
}

/// What is learnt by running something rather than by reading a file, kept apart so that tests
/// can supply it.
#[derive(Clone, Debug)]
pub struct Probes {
    /// Output of `dmidecode -t 17`, or why it could not be had.
    pub dmidecode: Result<String, String>,
    /// Hypervisor vendor from CPUID leaf 0x40000000, already named by [`hypervisor_name`].
    pub cpuid_hypervisor: Option<String>,
}

/// Reads the inventory from the tree under `root`, which stands for "/", taking what is not a
/// file from `probes`.
pub fn collect_from(root: &Path, probes: &Probes) -> SysInfo {
    let root = Root(root);
    let processors = root
        .read("/proc/cpuinfo")
        .map(|text| parse_cpuinfo(&text))
        .unwrap_or_default();
    let (hostname, os) = read_os(root);
    SysInfo {
        hostname,
        os,
        hypervisor: hypervisor(root, processors.first(), probes.cpuid_hypervisor.as_deref()),
        cpu: read_cpu(root, &processors),
        memory: read_memory(root, &probes.dmidecode),
        disks: read_disks(root),
        nics: read_nics(root),
    }
}

/// A directory standing for "/": "/" itself on the live machine, a fixture tree in tests.
///
/// Paths are given as they are on a live machine ("/proc/cpuinfo"), and errors name them so.
#[derive(Clone, Copy)]
struct Root<'a>(&'a Path);

impl Root<'_> {
    fn path(self, abs: &str) -> PathBuf {
        self.0.join(abs.trim_start_matches('/'))
    }

    fn exists(self, abs: &str) -> bool {
        self.path(abs).exists()
    }

    /// The whole file, or why it cannot be read.
    fn read(self, abs: &str) -> Result<String, String> {
        std::fs::read_to_string(self.path(abs)).map_err(|e| format!("cannot read {abs}: {e}"))
    }

    /// The file trimmed, `None` when it is unreadable or blank.
    fn read_trim(self, abs: &str) -> Option<String> {
        let text = self.read(abs).ok()?;
        let text = text.trim();
        (!text.is_empty()).then(|| text.to_string())
    }

    /// The trimmed file parsed as a `T`.
    fn parse<T: FromStr>(self, abs: &str) -> Option<T> {
        self.read_trim(abs)?.parse().ok()
    }

    /// Last component of the target of a symbolic link.
    fn link_name(self, abs: &str) -> Option<String> {
        let target = std::fs::read_link(self.path(abs)).ok()?;
        Some(target.file_name()?.to_string_lossy().into_owned())
    }

    /// Names of the subdirectories of a directory (following links), sorted.
    fn subdirs(self, abs: &str) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.path(abs)) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .filter(|e| e.path().is_dir())
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort();
        names
    }

    /// Subdirectories named `prefix` then a number ("cpu3", "index0", "node1"), with the
    /// number, sorted by number.
    fn numbered<N: FromStr + Ord>(self, abs: &str, prefix: &str) -> Vec<(N, String)> {
        let mut found: Vec<(N, String)> = self
            .subdirs(abs)
            .into_iter()
            .filter_map(|name| {
                let number = name.strip_prefix(prefix)?;
                if !number.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                Some((number.parse().ok()?, name))
            })
            .collect();
        found.sort_by(|a, b| a.0.cmp(&b.0));
        found
    }
}

// ---------------------------------------------------------------------------------------------
// /proc/cpuinfo

/// One processor block of /proc/cpuinfo.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CpuinfoEntry {
    /// The `processor` number.
    pub processor: Option<usize>,
    /// `vendor_id` (x86), or `CPU implementer` (ARM).
    pub vendor: Option<String>,
    /// `model name`.
    pub model_name: Option<String>,
    /// `cpu family`.
    pub family: Option<u32>,
    /// `model`.
    pub model: Option<u32>,
    /// `stepping`.
    pub stepping: Option<u32>,
    /// `cpu MHz`.
    pub mhz: Option<f64>,
    /// `physical id`.
    pub physical_id: Option<i64>,
    /// `core id`.
    pub core_id: Option<i64>,
    /// The `flags` line (x86) or the `Features` line (ARM), split on whitespace.
    pub flags: Vec<String>,
    /// Whether the block has an x86 `flags` line, where a `hypervisor` flag would show.
    pub x86_flags: bool,
}

/// Parses /proc/cpuinfo into its processor blocks. Blocks without a `processor` line (such as
/// the trailing `Hardware` block of some ARM kernels) are left out.
pub fn parse_cpuinfo(text: &str) -> Vec<CpuinfoEntry> {
    let mut entries = Vec::new();
    let mut block = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            entries.extend(parse_cpuinfo_block(&block));
            block.clear();
        } else {
            block.push(line);
        }
    }
    entries.extend(parse_cpuinfo_block(&block));
    entries
}

fn parse_cpuinfo_block(lines: &[&str]) -> Option<CpuinfoEntry> {
    let mut entry = CpuinfoEntry::default();
    let mut is_processor = false;
    for line in lines {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key.trim() {
            "processor" => {
                is_processor = true;
                entry.processor = value.parse().ok();
            }
            "vendor_id" => entry.vendor = Some(value.to_string()),
            "CPU implementer" if entry.vendor.is_none() => {
                entry.vendor = Some(format!("CPU implementer {value}"));
            }
            "model name" => entry.model_name = Some(value.to_string()),
            "cpu family" => entry.family = value.parse().ok(),
            "model" => entry.model = value.parse().ok(),
            "stepping" => entry.stepping = value.parse().ok(),
            "cpu MHz" => entry.mhz = value.parse().ok(),
            "physical id" => entry.physical_id = value.parse().ok(),
            "core id" => entry.core_id = value.parse().ok(),
            "flags" => {
                entry.flags = split_words(value);
                entry.x86_flags = true;
            }
            "Features" => entry.flags = split_words(value),
            _ => {}
        }
    }
    is_processor.then_some(entry)
}

fn split_words(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_string).collect()
}

/// The SIMD features among the cpuinfo flags, in the fixed order of [`SIMD_FLAGS`] and with its
/// spelling ("pni" is reported as "sse3").
pub fn simd_features(flags: &[String]) -> Vec<String> {
    let present: BTreeSet<&str> = flags.iter().map(String::as_str).collect();
    SIMD_FLAGS
        .iter()
        .filter(|(_, flag)| present.contains(flag))
        .map(|(name, _)| (*name).to_string())
        .collect()
}

/// The clock in GHz written after "@" in a model name ("… CPU @ 2.50GHz" gives 2.5).
pub fn clock_from_model_name(name: &str) -> Option<f64> {
    let (_, tail) = name.rsplit_once('@')?;
    let tail: String = tail.split_whitespace().collect();
    let (number, scale) = if let Some(number) = tail.strip_suffix("GHz") {
        (number, 1.0)
    } else {
        (tail.strip_suffix("MHz")?, 1e-3)
    };
    let value: f64 = number.parse().ok()?;
    (value.is_finite() && value > 0.0).then_some(value * scale)
}

// ---------------------------------------------------------------------------------------------
// Microarchitecture

/// Microarchitecture told from the CPUID vendor, family, model and stepping, as one of the
/// names the throughput table is keyed on, or unknown with the reason.
pub fn microarch(
    vendor: &str,
    family: Option<u32>,
    model: Option<u32>,
    stepping: Option<u32>,
    model_name: &str,
) -> Fact<String> {
    let (Some(family), Some(model)) = (family, model) else {
        return Fact::unknown(format!(
            "no cpu family and model in /proc/cpuinfo for '{model_name}' ({vendor})"
        ));
    };
    let name = match vendor {
        "GenuineIntel" if family == 6 => intel_family6(model, stepping),
        "AuthenticAMD" => amd_zen(family, model),
        _ => None,
    };
    let stepping_text = match stepping {
        Some(s) if vendor == "GenuineIntel" && family == 6 && model == 0x55 => {
            format!(" stepping {s}")
        }
        _ => String::new(),
    };
    let told = format!("CPUID family {family} model {model}{stepping_text} ({vendor})");
    match name {
        Some(name) => Fact::read(name.to_string(), told),
        None => Fact::unknown(format!(
            "{told}, model 0x{model:02X}, '{model_name}', is not in the microarchitecture table"
        )),
    }
}

fn intel_family6(model: u32, stepping: Option<u32>) -> Option<&'static str> {
    Some(match model {
        0x3C | 0x3F | 0x45 | 0x46 => "haswell",
        0x3D | 0x47 | 0x4F | 0x56 => "broadwell",
        0x4E | 0x5E | 0x8E | 0x9E | 0xA5 | 0xA6 => "skylake",
        0x55 => match stepping? {
            0..=4 => "skylake-sp",
            5..=7 => "cascadelake",
            10.. => "cooperlake",
            _ => return None,
        },
        0x7D | 0x7E => "icelake",
        0x6A | 0x6C => "icelake-sp",
        0x8C | 0x8D => "tigerlake",
        0x97 | 0x9A | 0xB7 | 0xBA | 0xBF => "alderlake",
        0x8F => "sapphirerapids",
        0xCF => "emeraldrapids",
        0xAD | 0xAE => "graniterapids",
        _ => return None,
    })
}

fn amd_zen(family: u32, model: u32) -> Option<&'static str> {
    match (family, model) {
        (0x17, 0x00..0x30) => Some("zen"),
        (0x17, _) => Some("zen2"),
        (0x19, 0x00..=0x0F | 0x20..=0x5F) => Some("zen3"),
        (0x19, 0x10..=0x1F | 0x60..=0x7F | 0xA0..=0xAF) => Some("zen4"),
        (0x1A, _) => Some("zen5"),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// CPU: topology, clocks, caches, NUMA

/// How the logical CPUs group into cores and sockets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Topology {
    /// Distinct physical packages.
    pub sockets: usize,
    /// Distinct (package, core) pairs.
    pub physical_cores: usize,
    /// Logical CPUs counted.
    pub logical_cpus: usize,
    /// Most logical CPUs on one core.
    pub threads_per_core: usize,
    /// Whether any core runs more than one logical CPU.
    pub smt: bool,
}

/// Groups logical CPUs, each given by its (package, core) pair when known, into sockets and
/// cores. A CPU whose pair is unknown counts as a core of its own; when no pair at all is known
/// the CPUs count as one socket.
pub fn summarize_topology(cpus: &[Option<(i64, i64)>]) -> Topology {
    let mut threads: BTreeMap<(i64, i64), usize> = BTreeMap::new();
    for pair in cpus.iter().flatten() {
        *threads.entry(*pair).or_default() += 1;
    }
    let unpaired = cpus.iter().filter(|pair| pair.is_none()).count();
    let packages: BTreeSet<i64> = threads.keys().map(|(package, _)| *package).collect();
    let threads_per_core = threads.values().copied().max().unwrap_or(1);
    Topology {
        sockets: packages.len().max(usize::from(!cpus.is_empty())),
        physical_cores: threads.len() + unpaired,
        logical_cpus: cpus.len(),
        threads_per_core,
        smt: threads_per_core > 1,
    }
}

/// Parses a kernel CPU list ("0-3,8") into CPU numbers, sorted and without repeats. Malformed
/// parts are skipped.
pub fn parse_cpu_list(text: &str) -> Vec<usize> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').map(str::trim) {
        match part.split_once('-') {
            Some((first, last)) => {
                let (Ok(first), Ok(last)) = (first.parse::<usize>(), last.parse::<usize>()) else {
                    continue;
                };
                if first <= last && last - first < MAX_CPU_RANGE {
                    cpus.extend(first..=last);
                }
            }
            None => cpus.extend(part.parse::<usize>().ok()),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    cpus
}

/// Parses a sysfs cache size ("32K", "1024K", "8M", "512") into bytes.
pub fn parse_cache_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let scale: u64 = match unit.trim() {
        "" | "B" => 1,
        "K" | "KB" | "KiB" => 1 << 10,
        "M" | "MB" | "MiB" => 1 << 20,
        "G" | "GB" | "GiB" => 1 << 30,
        _ => return None,
    };
    number.parse::<u64>().ok()?.checked_mul(scale)
}

fn read_cpu(root: Root, processors: &[CpuinfoEntry]) -> CpuInfo {
    let first = processors.first();
    let text = |field: fn(&CpuinfoEntry) -> &Option<String>| {
        first.and_then(|p| field(p).clone()).unwrap_or_default()
    };
    let vendor = text(|p| &p.vendor);
    let model_name = text(|p| &p.model_name);
    let family = first.and_then(|p| p.family);
    let model = first.and_then(|p| p.model);
    let stepping = first.and_then(|p| p.stepping);
    let topology = read_topology(root, processors);
    CpuInfo {
        microarch: microarch(&vendor, family, model, stepping, &model_name),
        sockets: topology.sockets,
        physical_cores: topology.physical_cores,
        logical_cpus: topology.logical_cpus,
        threads_per_core: topology.threads_per_core,
        smt: topology.smt,
        base_ghz: base_clock(root, &model_name),
        max_ghz: cpufreq_fact(root, "cpuinfo_max_freq", khz_to_ghz),
        current_ghz: current_clock(first),
        governor: cpufreq_fact(root, "scaling_governor", |s| Some(s.to_string())),
        simd: first.map(|p| simd_features(&p.flags)).unwrap_or_default(),
        caches: summarize_caches(&read_cache_indexes(root)),
        numa_nodes: read_numa(root),
        vendor,
        model_name,
        family,
        model,
        stepping,
    }
}

/// Online CPUs with their (package, core) pairs, from sysfs topology or else /proc/cpuinfo.
fn read_topology(root: Root, processors: &[CpuinfoEntry]) -> Topology {
    let online = root
        .read_trim("/sys/devices/system/cpu/online")
        .map(|list| parse_cpu_list(&list))
        .filter(|cpus| !cpus.is_empty());
    let cpus: Vec<usize> = online.unwrap_or_else(|| {
        processors
            .iter()
            .enumerate()
            .map(|(i, p)| p.processor.unwrap_or(i))
            .collect()
    });
    let pairs: Vec<Option<(i64, i64)>> = cpus
        .iter()
        .map(|&cpu| sysfs_core(root, cpu).or_else(|| cpuinfo_core(processors, cpu)))
        .collect();
    summarize_topology(&pairs)
}

fn sysfs_core(root: Root, cpu: usize) -> Option<(i64, i64)> {
    let dir = format!("/sys/devices/system/cpu/cpu{cpu}/topology");
    let package = root.parse(&format!("{dir}/physical_package_id"))?;
    let core = root.parse(&format!("{dir}/core_id"))?;
    Some((package, core))
}

fn cpuinfo_core(processors: &[CpuinfoEntry], cpu: usize) -> Option<(i64, i64)> {
    let entry = processors.iter().find(|p| p.processor == Some(cpu))?;
    Some((entry.physical_id?, entry.core_id?))
}

fn khz_to_ghz(text: &str) -> Option<f64> {
    let khz: f64 = text.parse().ok()?;
    (khz.is_finite() && khz > 0.0).then_some(khz / 1e6)
}

/// A value read from a file of CPU 0's cpufreq directory, or why it cannot be.
fn cpufreq_fact<T>(root: Root, file: &str, parse: impl FnOnce(&str) -> Option<T>) -> Fact<T> {
    if !root.exists(CPUFREQ) {
        return Fact::unknown(NO_CPUFREQ);
    }
    let path = format!("{CPUFREQ}/{file}");
    match root.read(&path) {
        Ok(text) => match parse(text.trim()) {
            Some(value) => Fact::read(value, path),
            None => Fact::unknown(format!("{path} holds '{}', not a value", text.trim())),
        },
        Err(e) => Fact::unknown(e),
    }
}

/// Base clock from cpufreq's base_frequency, else from the model name, never from "cpu MHz".
fn base_clock(root: Root, model_name: &str) -> Fact<f64> {
    let from_sysfs = cpufreq_fact(root, "base_frequency", khz_to_ghz);
    if from_sysfs.value.is_some() {
        return from_sysfs;
    }
    if let Some(ghz) = clock_from_model_name(model_name) {
        return Fact::read(ghz, "model name string");
    }
    let sysfs = if root.exists(CPUFREQ) {
        "no base_frequency in cpufreq"
    } else {
        "no cpufreq in sysfs"
    };
    Fact::unknown(format!(
        "{sysfs} and no clock in the model name '{model_name}'"
    ))
}

fn current_clock(first: Option<&CpuinfoEntry>) -> Fact<f64> {
    match first.and_then(|p| p.mhz).filter(|mhz| *mhz > 0.0) {
        Some(mhz) => Fact::read(mhz / 1e3, "/proc/cpuinfo: cpu MHz"),
        None => Fact::unknown("no cpu MHz line in /proc/cpuinfo"),
    }
}

/// One cache index of one CPU, as sysfs describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheIndex {
    /// `level`.
    pub level: u32,
    /// `type`: "Data", "Instruction" or "Unified".
    pub kind: String,
    /// `size`, in bytes.
    pub size_bytes: u64,
    /// `shared_cpu_list`, parsed.
    pub shared_cpus: Vec<usize>,
    /// `coherency_line_size`.
    pub line_bytes: Option<u64>,
}

fn read_cache_indexes(root: Root) -> Vec<CacheIndex> {
    let mut indexes = Vec::new();
    for (cpu, cpu_dir) in root.numbered::<usize>("/sys/devices/system/cpu", "cpu") {
        let cache_dir = format!("/sys/devices/system/cpu/{cpu_dir}/cache");
        for (_, index) in root.numbered::<u32>(&cache_dir, "index") {
            indexes.extend(read_cache_index(root, &format!("{cache_dir}/{index}"), cpu));
        }
    }
    indexes
}

fn read_cache_index(root: Root, dir: &str, cpu: usize) -> Option<CacheIndex> {
    let file = |name: &str| format!("{dir}/{name}");
    let shared = root
        .read_trim(&file("shared_cpu_list"))
        .map(|list| parse_cpu_list(&list))
        .filter(|cpus| !cpus.is_empty());
    Some(CacheIndex {
        level: root.parse(&file("level"))?,
        kind: root.read_trim(&file("type"))?,
        size_bytes: parse_cache_size(&root.read_trim(&file("size"))?)?,
        shared_cpus: shared.unwrap_or_else(|| vec![cpu]),
        line_bytes: root.parse(&file("coherency_line_size")),
    })
}

/// Merges the per-CPU cache indexes into one entry per kind of cache (level, type, size and
/// sharing), counting distinct instances by their shared CPU lists. Sorted by level, then type.
pub fn summarize_caches(indexes: &[CacheIndex]) -> Vec<Cache> {
    type Key<'a> = (u32, &'a str, u64, usize);
    let mut groups: BTreeMap<Key, (BTreeSet<&[usize]>, Option<u64>)> = BTreeMap::new();
    for index in indexes {
        let key = (
            index.level,
            index.kind.as_str(),
            index.size_bytes,
            index.shared_cpus.len(),
        );
        let (instances, line) = groups.entry(key).or_default();
        instances.insert(&index.shared_cpus);
        *line = line.or(index.line_bytes);
    }
    groups
        .into_iter()
        .map(
            |((level, kind, size_bytes, shared_by_cpus), (instances, line_bytes))| Cache {
                level,
                kind: kind.to_string(),
                size_bytes,
                shared_by_cpus,
                instances: instances.len(),
                line_bytes,
            },
        )
        .collect()
}

fn read_numa(root: Root) -> Vec<NumaNode> {
    root.numbered::<u32>("/sys/devices/system/node", "node")
        .into_iter()
        .map(|(id, name)| {
            let dir = format!("/sys/devices/system/node/{name}");
            NumaNode {
                id,
                cpus: root
                    .read_trim(&format!("{dir}/cpulist"))
                    .unwrap_or_default(),
                memory_bytes: root
                    .read(&format!("{dir}/meminfo"))
                    .ok()
                    .and_then(|text| parse_meminfo(&text).total_bytes),
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Memory

/// Total and available memory from /proc/meminfo (or a node's meminfo), in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Meminfo {
    /// `MemTotal`.
    pub total_bytes: Option<u64>,
    /// `MemAvailable` (absent from NUMA node meminfo).
    pub available_bytes: Option<u64>,
}

/// Parses /proc/meminfo, or /sys/devices/system/node/node*/meminfo whose keys carry a
/// "Node N" prefix.
pub fn parse_meminfo(text: &str) -> Meminfo {
    let mut info = Meminfo::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let slot = match key.split_whitespace().last() {
            Some("MemTotal") => &mut info.total_bytes,
            Some("MemAvailable") => &mut info.available_bytes,
            _ => continue,
        };
        *slot = parse_kb(value);
    }
    info
}

fn parse_kb(value: &str) -> Option<u64> {
    let mut words = value.split_whitespace();
    let number: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => number.checked_mul(1024),
        _ => None,
    }
}

/// One type-17 (Memory Device) record of `dmidecode -t 17`, populated or not.
#[derive(Clone, Debug)]
pub struct MemoryDevice {
    /// The fields that describe the module.
    pub dimm: Dimm,
    /// `Bank Locator`, which some boards use to name the channel.
    pub bank_locator: Option<String>,
    /// False for "No Module Installed" slots.
    pub populated: bool,
}

/// Parses the output of `dmidecode -t 17` into its Memory Device records, empty slots
/// included.
pub fn parse_dmidecode_type17(text: &str) -> Vec<MemoryDevice> {
    let mut records: Vec<Vec<(&str, &str)>> = Vec::new();
    let mut in_type17 = false;
    for line in text.lines() {
        if line.starts_with("Handle ") {
            in_type17 = line.contains("DMI type 17,");
            if in_type17 {
                records.push(Vec::new());
            }
            continue;
        }
        // Fields are indented by one tab; deeper lines are items of a list field.
        let field = line.strip_prefix('\t').filter(|f| !f.starts_with('\t'));
        let pair = field.and_then(|f| f.split_once(':'));
        if let (true, Some((key, value)), Some(record)) = (in_type17, pair, records.last_mut()) {
            record.push((key.trim(), value.trim()));
        }
    }
    records.iter().map(|fields| memory_device(fields)).collect()
}

fn memory_device(fields: &[(&str, &str)]) -> MemoryDevice {
    let get = |key: &str| {
        fields
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
            .filter(|v| !v.is_empty() && !matches!(*v, "Unknown" | "Other" | "Not Specified"))
    };
    let size = get("Size").unwrap_or("Unknown");
    let size_bytes = parse_dimm_size(size);
    let populated = !size.starts_with("No Module")
        && !size.starts_with("Not Installed")
        && size_bytes != Some(0);
    MemoryDevice {
        dimm: Dimm {
            locator: get("Locator").unwrap_or_default().to_string(),
            kind: get("Type").map(str::to_string),
            size_bytes,
            speed_mts: get("Speed").and_then(parse_leading_number),
            configured_mts: get("Configured Memory Speed")
                .or_else(|| get("Configured Clock Speed"))
                .and_then(parse_leading_number),
            data_width_bits: get("Data Width").and_then(parse_leading_number),
        },
        bank_locator: get("Bank Locator").map(str::to_string),
        populated,
    }
}

/// Parses a dmidecode size ("16 GB", "16384 MB"; dmidecode's units are binary) into bytes.
fn parse_dimm_size(text: &str) -> Option<u64> {
    let mut words = text.split_whitespace();
    let number: u64 = words.next()?.parse().ok()?;
    let shift = match words.next()? {
        "bytes" => 0,
        "kB" | "KB" => 10,
        "MB" => 20,
        "GB" => 30,
        "TB" => 40,
        _ => return None,
    };
    number.checked_mul(1 << shift)
}

fn parse_leading_number<T: FromStr>(text: &str) -> Option<T> {
    text.split_whitespace().next()?.parse().ok()
}

/// The channel a DIMM locator names, with whatever precedes it (so channel A of CPU0 and of
/// CPU1 differ): "DIMM_A1" gives "A", "CPU0_DIMM_B2" gives "CPU0_B", "ChannelA-DIMM0" gives
/// "A", "P0 CHANNEL A" gives "P0 A". `None` when the locator names no channel.
pub fn channel_key(locator: &str) -> Option<String> {
    let upper = locator.to_ascii_uppercase();
    let separators: &[char] = &[' ', '_', '-'];
    if let Some(pos) = upper.find("CHANNEL") {
        let rest = upper[pos + "CHANNEL".len()..].trim_start_matches(separators);
        let letter = rest.chars().next().filter(char::is_ascii_alphabetic)?;
        return Some(format!("{}{letter}", &upper[..pos]));
    }
    let pos = upper.find("DIMM")?;
    let mut rest = upper[pos + "DIMM".len()..]
        .trim_start_matches(separators)
        .chars();
    let letter = rest.next().filter(char::is_ascii_alphabetic)?;
    rest.next().filter(char::is_ascii_digit)?;
    Some(format!("{}{letter}", &upper[..pos]))
}

/// The memory facts told from the DIMM inventory.
struct DimmFacts {
    dimms: Fact<Vec<Dimm>>,
    channels: Fact<u32>,
    mts: Fact<u32>,
    kind: Fact<String>,
}

impl DimmFacts {
    fn unknown(reason: &str) -> Self {
        DimmFacts {
            dimms: Fact::unknown(reason),
            channels: Fact::unknown(reason),
            mts: Fact::unknown(reason),
            kind: Fact::unknown(reason),
        }
    }
}

/// Tells DIMMs, channels, speed and type from the output of `dmidecode -t 17`, or from why it
/// could not be had.
fn dimm_facts(dmidecode: &Result<String, String>, dmi_in_sysfs: bool) -> DimmFacts {
    let text = match dmidecode {
        Ok(text) => text,
        Err(error) => {
            let sysfs = if dmi_in_sysfs {
                ""
            } else {
                "; /sys/firmware/dmi absent"
            };
            return DimmFacts::unknown(&format!(
                "no DMI table readable ({error}{sysfs}); {MEM_ADVICE}"
            ));
        }
    };
    let populated: Vec<MemoryDevice> = parse_dmidecode_type17(text)
        .into_iter()
        .filter(|d| d.populated)
        .collect();
    if populated.is_empty() {
        let said = text.lines().map(str::trim).find(|l| !l.is_empty());
        return DimmFacts::unknown(&format!(
            "dmidecode -t 17 lists no populated memory device ({}); {MEM_ADVICE}",
            said.unwrap_or("no output")
        ));
    }
    DimmFacts {
        channels: channel_count(&populated),
        mts: configured_speed(&populated),
        kind: memory_kind(&populated),
        dimms: Fact::read(
            populated.into_iter().map(|d| d.dimm).collect(),
            "dmidecode -t 17",
        ),
    }
}

fn count_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn channel_count(populated: &[MemoryDevice]) -> Fact<u32> {
    let keys: Option<BTreeSet<String>> = populated
        .iter()
        .map(|d| {
            channel_key(&d.dimm.locator).or_else(|| d.bank_locator.as_deref().and_then(channel_key))
        })
        .collect();
    match keys {
        Some(keys) => Fact::read(
            count_u32(keys.len()),
            "dmidecode: distinct channel letters of populated DIMM locators",
        ),
        None => Fact::read(
            count_u32(populated.len()),
            "dmidecode: populated DIMMs, assuming one DIMM per channel",
        ),
    }
}

fn configured_speed(populated: &[MemoryDevice]) -> Fact<u32> {
    if let Some(mts) = populated.iter().filter_map(|d| d.dimm.configured_mts).min() {
        return Fact::read(
            mts,
            "dmidecode: lowest Configured Memory Speed of populated DIMMs",
        );
    }
    let rated = match populated.iter().filter_map(|d| d.dimm.speed_mts).min() {
        Some(mts) => format!(" (rated speed {mts} MT/s)"),
        None => String::new(),
    };
    Fact::unknown(format!(
        "dmidecode reports no configured speed for the populated DIMMs{rated}; give --mem-mts"
    ))
}

fn memory_kind(populated: &[MemoryDevice]) -> Fact<String> {
    let kinds: BTreeSet<&str> = populated
        .iter()
        .filter_map(|d| d.dimm.kind.as_deref())
        .collect();
    match kinds.len() {
        0 => Fact::unknown("dmidecode reports no type for the populated DIMMs"),
        1 => Fact::read(kinds.into_iter().collect(), "dmidecode: Type"),
        _ => Fact::unknown(format!(
            "populated DIMMs differ in type: {}",
            kinds.into_iter().collect::<Vec<_>>().join(", ")
        )),
    }
}

fn read_memory(root: Root, dmidecode: &Result<String, String>) -> MemoryInfo {
    let meminfo = root
        .read("/proc/meminfo")
        .map(|text| parse_meminfo(&text))
        .unwrap_or_default();
    let facts = dimm_facts(dmidecode, root.exists("/sys/firmware/dmi"));
    MemoryInfo {
        total_bytes: meminfo.total_bytes.unwrap_or(0),
        available_bytes: meminfo.available_bytes.unwrap_or(0),
        dimms: facts.dimms,
        channels: facts.channels,
        mts: facts.mts,
        kind: facts.kind,
    }
}

/// Runs `dmidecode -t 17`: its output, or why there is none.
fn run_dmidecode() -> Result<String, String> {
    let program = [
        "/usr/sbin/dmidecode",
        "/sbin/dmidecode",
        "/usr/bin/dmidecode",
    ]
    .into_iter()
    .find(|p| Path::new(p).exists())
    .unwrap_or("dmidecode");
    let output = Command::new(program)
        .args(["-t", "17"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => "dmidecode not installed".to_string(),
            _ => format!("cannot run dmidecode: {e}"),
        })?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let said = stderr.lines().map(str::trim).find(|l| !l.is_empty());
    Err(format!(
        "dmidecode -t 17 failed, {}: {}",
        output.status,
        said.unwrap_or("no message")
    ))
}

// ---------------------------------------------------------------------------------------------
// Disks and network interfaces

/// The active scheduler of a queue/scheduler file: the bracketed one, or the only one listed.
pub fn parse_scheduler(text: &str) -> Option<String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let active = words
        .iter()
        .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'));
    match (active, words.as_slice()) {
        (Some(active), _) => Some(active.to_string()),
        (None, [only]) => Some((*only).to_string()),
        _ => None,
    }
}

fn read_disks(root: Root) -> Vec<BlockDevice> {
    root.subdirs("/sys/block")
        .into_iter()
        .filter(|name| !["loop", "ram", "zram"].iter().any(|p| name.starts_with(p)))
        .map(|name| read_disk(root, name))
        .collect()
}

fn read_disk(root: Root, name: String) -> BlockDevice {
    let file = |rel: &str| format!("/sys/block/{name}/{rel}");
    BlockDevice {
        model: root.read_trim(&file("device/model")),
        size_bytes: root
            .parse::<u64>(&file("size"))
            .and_then(|sectors| sectors.checked_mul(512)),
        rotational: match root.read_trim(&file("queue/rotational")).as_deref() {
            Some("1") => Some(true),
            Some("0") => Some(false),
            _ => None,
        },
        logical_sector_bytes: root.parse(&file("queue/logical_block_size")),
        physical_sector_bytes: root.parse(&file("queue/physical_block_size")),
        queue_depth: root.parse(&file("queue/nr_requests")),
        scheduler: root
            .read_trim(&file("queue/scheduler"))
            .and_then(|text| parse_scheduler(&text)),
        name,
    }
}

/// Link speed from the text of a /sys/class/net/*/speed file (or why it could not be read),
/// which `source` names.
pub fn link_speed(read: Result<String, String>, loopback: bool, source: &str) -> Fact<u64> {
    if loopback {
        return Fact::unknown("loopback has no link speed");
    }
    let text = match read {
        Ok(text) => text,
        Err(error) => {
            return Fact::unknown(format!(
                "{error} (the link is down or the driver reports no speed)"
            ));
        }
    };
    let text = text.trim();
    match text.parse::<i64>() {
        Ok(mbps) if mbps > 0 && mbps != i64::from(u32::MAX) => {
            Fact::read(mbps.unsigned_abs(), source)
        }
        Ok(mbps) => Fact::unknown(format!("the driver reports no link speed ({mbps})")),
        Err(_) => Fact::unknown(format!("{source} holds '{text}', not a speed")),
    }
}

fn read_nics(root: Root) -> Vec<NetInterface> {
    root.subdirs("/sys/class/net")
        .into_iter()
        .map(|name| read_nic(root, name))
        .collect()
}

fn read_nic(root: Root, name: String) -> NetInterface {
    let file = |rel: &str| format!("/sys/class/net/{name}/{rel}");
    let loopback = name == "lo" || root.parse::<u32>(&file("type")) == Some(772);
    let speed_file = file("speed");
    NetInterface {
        driver: root.link_name(&file("device/driver")),
        mtu: root.parse(&file("mtu")),
        speed_mbps: link_speed(root.read(&speed_file), loopback, &speed_file),
        state: root.read_trim(&file("operstate")),
        loopback,
        name,
    }
}

// ---------------------------------------------------------------------------------------------
// OS and hypervisor

/// PRETTY_NAME of an os-release file, unquoted.
pub fn parse_os_release(text: &str) -> Option<String> {
    let value = text
        .lines()
        .find_map(|line| line.trim().strip_prefix("PRETTY_NAME="))?
        .trim();
    let unquoted = ['"', '\'']
        .into_iter()
        .find_map(|q| value.strip_prefix(q)?.strip_suffix(q))
        .unwrap_or(value);
    (!unquoted.is_empty()).then(|| unquoted.to_string())
}

fn read_os(root: Root) -> (String, OsInfo) {
    let uname = uname();
    let hostname = root
        .read_trim("/proc/sys/kernel/hostname")
        .or_else(|| uname.as_ref().map(|u| u.0.clone()))
        .unwrap_or_default();
    let kernel = root
        .read_trim("/proc/sys/kernel/osrelease")
        .or_else(|| uname.map(|u| u.1))
        .unwrap_or_default();
    let os = OsInfo {
        kernel,
        distribution: distribution(root),
        arch: std::env::consts::ARCH.to_string(),
    };
    (hostname, os)
}

fn distribution(root: Root) -> Fact<String> {
    let mut problems = Vec::new();
    for path in ["/etc/os-release", "/usr/lib/os-release"] {
        match root.read(path) {
            Ok(text) => match parse_os_release(&text) {
                Some(name) => return Fact::read(name, format!("{path}: PRETTY_NAME")),
                None => problems.push(format!("no PRETTY_NAME in {path}")),
            },
            Err(error) => problems.push(error),
        }
    }
    Fact::unknown(problems.join("; "))
}

/// Node name and release from uname(2).
fn uname() -> Option<(String, String)> {
    // SAFETY: utsname is plain arrays of c_char, for which all zero bytes are a valid value.
    let mut name: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `name` is a valid, writable utsname.
    if unsafe { libc::uname(&mut name) } != 0 {
        return None;
    }
    Some((c_chars(&name.nodename), c_chars(&name.release)))
}

fn c_chars(chars: &[libc::c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c.to_ne_bytes()[0])
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The usual name of a hypervisor from its CPUID signature or /sys/hypervisor/type; other
/// signatures are returned as they are.
pub fn hypervisor_name(signature: &str) -> String {
    let name = match signature.trim_matches('\0').trim() {
        "KVMKVMKVM" => "KVM",
        "Microsoft Hv" => "Hyper-V",
        "VMwareVMware" => "VMware",
        "XenVMMXenVMM" | "xen" => "Xen",
        "TCGTCGTCGTCG" => "QEMU TCG",
        other => other,
    };
    name.to_string()
}

fn hypervisor(root: Root, cpu0: Option<&CpuinfoEntry>, cpuid: Option<&str>) -> Fact<String> {
    let sysfs = root
        .read_trim("/sys/hypervisor/type")
        .map(|t| Fact::read(hypervisor_name(&t), "/sys/hypervisor/type"));
    let Some(cpu0) = cpu0.filter(|c| c.x86_flags) else {
        return sysfs.unwrap_or_else(|| {
            Fact::unknown("no x86 flags in /proc/cpuinfo and no /sys/hypervisor/type")
        });
    };
    if !cpu0.flags.iter().any(|f| f == "hypervisor") {
        // A Xen dom0 can lack the flag while /sys/hypervisor/type still names Xen.
        return sysfs.unwrap_or_else(|| {
            Fact::read(
                "none".to_string(),
                "/proc/cpuinfo flags (no hypervisor flag)",
            )
        });
    }
    sysfs
        .or_else(|| cpuid.map(|name| Fact::read(name.to_string(), "CPUID leaf 0x40000000")))
        .unwrap_or_else(|| {
            Fact::unknown(
                "hypervisor flag in /proc/cpuinfo, but neither /sys/hypervisor/type nor CPUID \
                 leaf 0x40000000 names the vendor",
            )
        })
}

/// The hypervisor's name from CPUID leaf 0x40000000, when CPUID says one is present.
#[cfg(target_arch = "x86_64")]
fn cpuid_hypervisor_vendor() -> Option<String> {
    use core::arch::x86_64::__cpuid;
    // Leaf 1, ECX bit 31: a hypervisor is present; only then does leaf 0x40000000 mean anything.
    if __cpuid(1).ecx & (1 << 31) == 0 {
        return None;
    }
    let leaf = __cpuid(0x4000_0000);
    let bytes: Vec<u8> = [leaf.ebx, leaf.ecx, leaf.edx]
        .iter()
        .flat_map(|r| r.to_le_bytes())
        .collect();
    let signature = String::from_utf8_lossy(&bytes);
    let name = hypervisor_name(&signature);
    (!name.is_empty()).then_some(name)
}

/// CPUID exists only on x86.
#[cfg(not(target_arch = "x86_64"))]
fn cpuid_hypervisor_vendor() -> Option<String> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// One processor of a two-socket Xeon Platinum 8259CL with Hyper-Threading; CPU, SOCKET
    /// and CORE are filled in by [`intel_cpuinfo`].
    const INTEL_BLOCK: &str = "processor\t: CPU
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 85
model name\t: Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz
stepping\t: 7
microcode\t: 0x5003604
cpu MHz\t\t: 3100.000
cache size\t: 36608 KB
physical id\t: SOCKET
siblings\t: 4
core id\t\t: CORE
cpu cores\t: 2
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush \
mmx fxsr sse sse2 ss ht syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology \
nonstop_tsc cpuid aperfmperf pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe \
popcnt aes xsave avx f16c rdrand lahf_lm abm 3dnowprefetch fsgsbase bmi1 avx2 smep bmi2 erms \
invpcid avx512f avx512dq rdseed adx smap clflushopt clwb avx512cd avx512bw avx512vl xsaveopt \
xsavec xgetbv1 xsaves ida arat pku ospke avx512_vnni
bogomips\t: 5000.00
";

    /// CPUs 0-3 are the first threads of cores 0-1 on sockets 0-1; CPUs 4-7 their siblings.
    fn intel_cpuinfo() -> String {
        (0..8)
            .map(|cpu: usize| {
                INTEL_BLOCK
                    .replace("CPU\n", &format!("{cpu}\n"))
                    .replace("SOCKET", &((cpu / 2) % 2).to_string())
                    .replace("CORE", &(cpu % 2).to_string())
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Two vCPUs of an AMD EPYC (Zen 5) guest under KVM; the model name carries no clock.
    const AMD_KVM_CPUINFO: &str = "processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 26
model\t\t: 2
model name\t: AMD EPYC
stepping\t: 1
cpu MHz\t\t: 2596.120
physical id\t: 0
core id\t\t: 0
flags\t\t: fpu tsc sse sse2 ht pni ssse3 fma sse4_1 sse4_2 avx f16c hypervisor avx2 avx512f \
avx512dq avx512ifma avx512cd avx512bw avx512vl avx_vnni avx512_bf16 avx512vbmi avx512_vbmi2 \
avx512_vnni avx512_bitalg avx512_vpopcntdq

processor\t: 1
vendor_id\t: AuthenticAMD
cpu family\t: 26
model\t\t: 2
model name\t: AMD EPYC
stepping\t: 1
cpu MHz\t\t: 2596.120
physical id\t: 0
core id\t\t: 1
flags\t\t: fpu tsc sse sse2 ht pni hypervisor
";

    /// `dmidecode -t 17` with two populated and two empty slots.
    const DMIDECODE_T17: &str = "# dmidecode 3.4
Getting SMBIOS data from sysfs.
SMBIOS 3.2.0 present.

Handle 0x0040, DMI type 17, 84 bytes
Memory Device
\tArray Handle: 0x003F
\tTotal Width: 72 bits
\tData Width: 64 bits
\tSize: 16 GB
\tForm Factor: DIMM
\tLocator: CPU0_DIMM_A1
\tBank Locator: NODE 1
\tType: DDR4
\tType Detail: Synchronous Registered (Buffered)
\tSpeed: 3200 MT/s
\tManufacturer: Samsung
\tConfigured Memory Speed: 2933 MT/s

Handle 0x0041, DMI type 17, 84 bytes
Memory Device
\tData Width: Unknown
\tSize: No Module Installed
\tLocator: CPU0_DIMM_A2
\tType: Unknown
\tSpeed: Unknown
\tConfigured Memory Speed: Unknown

Handle 0x0042, DMI type 17, 84 bytes
Memory Device
\tData Width: 64 bits
\tSize: 16384 MB
\tLocator: CPU0_DIMM_B1
\tType: DDR4
\tSpeed: 3200 MT/s
\tConfigured Memory Speed: 2666 MT/s

Handle 0x0043, DMI type 17, 84 bytes
Memory Device
\tData Width: Unknown
\tSize: No Module Installed
\tLocator: CPU0_DIMM_B2
\tType: Unknown
";

    fn write(root: &Path, abs: &str, text: &str) {
        let path = root.join(abs.trim_start_matches('/'));
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    fn probes(cpuid_hypervisor: Option<&str>) -> Probes {
        Probes {
            dmidecode: Err("dmidecode not run in tests".to_string()),
            cpuid_hypervisor: cpuid_hypervisor.map(str::to_string),
        }
    }

    fn collect_cpuinfo(cpuinfo: &str, cpuid_hypervisor: Option<&str>) -> SysInfo {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "/proc/cpuinfo", cpuinfo);
        collect_from(dir.path(), &probes(cpuid_hypervisor))
    }

    #[test]
    fn intel_xeon_two_sockets_with_hyperthreading() {
        let info = collect_cpuinfo(&intel_cpuinfo(), None);
        let cpu = &info.cpu;
        assert_eq!(cpu.vendor, "GenuineIntel");
        assert_eq!(
            (cpu.family, cpu.model, cpu.stepping),
            (Some(6), Some(85), Some(7))
        );
        assert_eq!(
            cpu.microarch.as_ref().map(String::as_str),
            Some("cascadelake")
        );
        assert_eq!(
            cpu.microarch.source.as_deref(),
            Some("CPUID family 6 model 85 stepping 7 (GenuineIntel)")
        );
        assert_eq!(
            (cpu.sockets, cpu.physical_cores, cpu.logical_cpus),
            (2, 4, 8)
        );
        assert_eq!((cpu.threads_per_core, cpu.smt), (2, true));
        assert_eq!(cpu.base_ghz, Fact::read(2.5, "model name string"));
        assert_eq!(cpu.current_ghz.value, Some(3.1));
        assert_eq!(
            cpu.current_ghz.source.as_deref(),
            Some("/proc/cpuinfo: cpu MHz")
        );
        assert_eq!(cpu.max_ghz.reason.as_deref(), Some(NO_CPUFREQ));
        assert_eq!(cpu.governor.reason.as_deref(), Some(NO_CPUFREQ));
        let expected = [
            "sse",
            "sse2",
            "sse3",
            "ssse3",
            "sse4_1",
            "sse4_2",
            "avx",
            "avx2",
            "fma",
            "f16c",
            "avx512f",
            "avx512cd",
            "avx512bw",
            "avx512dq",
            "avx512vl",
            "avx512_vnni",
        ];
        assert_eq!(cpu.simd, expected);
        assert_eq!(
            info.hypervisor,
            Fact::read(
                "none".to_string(),
                "/proc/cpuinfo flags (no hypervisor flag)"
            )
        );
    }

    #[test]
    fn amd_epyc_under_kvm_without_clock_in_name() {
        let info = collect_cpuinfo(AMD_KVM_CPUINFO, Some("KVM"));
        let cpu = &info.cpu;
        assert_eq!(
            cpu.microarch,
            Fact::read("zen5".to_string(), "CPUID family 26 model 2 (AuthenticAMD)")
        );
        assert_eq!(
            cpu.base_ghz,
            Fact::unknown("no cpufreq in sysfs and no clock in the model name 'AMD EPYC'")
        );
        assert_eq!(
            (cpu.sockets, cpu.physical_cores, cpu.logical_cpus, cpu.smt),
            (1, 2, 2, false)
        );
        assert_eq!(
            info.hypervisor,
            Fact::read("KVM".to_string(), "CPUID leaf 0x40000000")
        );
        assert!(cpu.simd.contains(&"avx512_bf16".to_string()));
        assert!(cpu.simd.contains(&"avx_vnni".to_string()));
        assert!(!cpu.simd.contains(&"avx512_fp16".to_string()));
    }

    #[test]
    fn hypervisor_vendor_sources() {
        let unnamed = collect_cpuinfo(AMD_KVM_CPUINFO, None);
        assert!(unnamed.hypervisor.value.is_none());
        assert!(
            unnamed
                .hypervisor
                .reason
                .unwrap()
                .contains("hypervisor flag")
        );

        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "/proc/cpuinfo", AMD_KVM_CPUINFO);
        write(dir.path(), "/sys/hypervisor/type", "xen\n");
        let xen = collect_from(dir.path(), &probes(Some("KVM")));
        assert_eq!(
            xen.hypervisor,
            Fact::read("Xen".to_string(), "/sys/hypervisor/type")
        );

        assert_eq!(hypervisor_name("KVMKVMKVM\0\0\0"), "KVM");
        assert_eq!(hypervisor_name("Microsoft Hv"), "Hyper-V");
        assert_eq!(hypervisor_name("VMwareVMware"), "VMware");
        assert_eq!(hypervisor_name("XenVMMXenVMM"), "Xen");
        assert_eq!(hypervisor_name("TCGTCGTCGTCG"), "QEMU TCG");
        assert_eq!(hypervisor_name("bhyve bhyve "), "bhyve bhyve");
    }

    #[test]
    fn missing_everything_is_unknown_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let info = collect_from(dir.path(), &probes(None));
        assert_eq!(info.cpu.logical_cpus, 0);
        assert!(info.cpu.microarch.value.is_none());
        assert!(info.cpu.current_ghz.value.is_none());
        assert!(info.hypervisor.value.is_none());
        assert!(info.os.distribution.value.is_none());
        assert!(info.disks.is_empty() && info.nics.is_empty());
        assert_eq!(info.memory.total_bytes, 0);
    }

    #[test]
    fn cache_sizes() {
        assert_eq!(parse_cache_size("32K"), Some(32 << 10));
        assert_eq!(parse_cache_size("32768K\n"), Some(32 << 20));
        assert_eq!(parse_cache_size("8M"), Some(8 << 20));
        assert_eq!(parse_cache_size("512"), Some(512));
        assert_eq!(parse_cache_size("1 GiB"), Some(1 << 30));
        assert_eq!(parse_cache_size("K"), None);
        assert_eq!(parse_cache_size("12Q"), None);
        assert_eq!(parse_cache_size(""), None);
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,8"), [0, 1, 2, 3, 8]);
        assert_eq!(parse_cpu_list("0\n"), [0]);
        assert_eq!(parse_cpu_list("5,1-2,2"), [1, 2, 5]);
        assert_eq!(parse_cpu_list("x,3,4-2,7-"), [3]);
        assert_eq!(parse_cpu_list("0-4294967295"), Vec::<usize>::new());
        assert!(parse_cpu_list("").is_empty());
    }

    #[test]
    fn caches_merge_instances_and_sort() {
        let index = |level, kind: &str, size_bytes, shared_cpus: Vec<usize>| CacheIndex {
            level,
            kind: kind.to_string(),
            size_bytes,
            shared_cpus,
            line_bytes: Some(64),
        };
        let indexes = [
            index(3, "Unified", 32 << 20, vec![0, 1, 2, 3]),
            index(1, "Instruction", 32 << 10, vec![0, 2]),
            index(1, "Data", 48 << 10, vec![0, 2]),
            index(3, "Unified", 32 << 20, vec![0, 1, 2, 3]),
            index(1, "Data", 48 << 10, vec![1, 3]),
            index(1, "Instruction", 32 << 10, vec![1, 3]),
            index(1, "Data", 48 << 10, vec![0, 2]),
        ];
        let caches = summarize_caches(&indexes);
        let shape: Vec<_> = caches
            .iter()
            .map(|c| {
                (
                    c.level,
                    c.kind.as_str(),
                    c.size_bytes,
                    c.shared_by_cpus,
                    c.instances,
                )
            })
            .collect();
        assert_eq!(
            shape,
            [
                (1, "Data", 48 << 10, 2, 2),
                (1, "Instruction", 32 << 10, 2, 2),
                (3, "Unified", 32 << 20, 4, 1),
            ]
        );
    }

    #[test]
    fn dmidecode_two_populated_two_empty() {
        let devices = parse_dmidecode_type17(DMIDECODE_T17);
        assert_eq!(devices.len(), 4);
        assert_eq!(devices.iter().filter(|d| d.populated).count(), 2);
        let first = &devices[0].dimm;
        assert_eq!(first.locator, "CPU0_DIMM_A1");
        assert_eq!(first.kind.as_deref(), Some("DDR4"));
        assert_eq!(first.size_bytes, Some(16 << 30));
        assert_eq!(
            (first.speed_mts, first.configured_mts),
            (Some(3200), Some(2933))
        );
        assert_eq!(first.data_width_bits, Some(64));
        assert_eq!(devices[1].dimm.kind, None);

        let facts = dimm_facts(&Ok(DMIDECODE_T17.to_string()), true);
        let dimms = facts.dimms.value.unwrap();
        assert_eq!(dimms.len(), 2);
        assert_eq!(dimms[1].size_bytes, Some(16 << 30));
        assert_eq!(facts.channels.value, Some(2));
        assert_eq!(
            facts.channels.source.as_deref(),
            Some("dmidecode: distinct channel letters of populated DIMM locators")
        );
        assert_eq!(facts.mts.value, Some(2666));
        assert_eq!(facts.kind.value.as_deref(), Some("DDR4"));
    }

    #[test]
    fn dimm_channels_without_channel_letters() {
        let text = DMIDECODE_T17
            .replace("CPU0_DIMM_A1", "DIMM 0")
            .replace("CPU0_DIMM_B1", "DIMM 1")
            .replace(
                "Configured Memory Speed: 2",
                "Configured Memory Speed: Unknown 2",
            );
        let facts = dimm_facts(&Ok(text), true);
        assert_eq!(
            facts.channels,
            Fact::read(
                2,
                "dmidecode: populated DIMMs, assuming one DIMM per channel"
            )
        );
        assert!(facts.mts.reason.unwrap().contains("rated speed 3200 MT/s"));
    }

    #[test]
    fn dimm_inventory_missing() {
        let facts = dimm_facts(&Err("dmidecode not installed".to_string()), false);
        let reason = "no DMI table readable (dmidecode not installed; /sys/firmware/dmi absent); \
                      give --mem-channels and --mem-mts";
        assert_eq!(facts.channels, Fact::unknown(reason));
        assert_eq!(facts.mts, Fact::unknown(reason));
        assert_eq!(facts.kind, Fact::unknown(reason));
        let empty = "# dmidecode 3.4\n# No SMBIOS nor DMI entry point found, sorry.\n";
        let facts = dimm_facts(&Ok(empty.to_string()), false);
        assert!(facts.dimms.reason.unwrap().contains("lists no populated"));
    }

    #[test]
    fn channel_keys() {
        assert_eq!(channel_key("DIMM_A1").as_deref(), Some("A"));
        assert_eq!(channel_key("CPU0_DIMM_B2").as_deref(), Some("CPU0_B"));
        assert_eq!(channel_key("CPU1_DIMM_B1").as_deref(), Some("CPU1_B"));
        assert_eq!(channel_key("ChannelA-DIMM0").as_deref(), Some("A"));
        assert_eq!(channel_key("P0 CHANNEL C").as_deref(), Some("P0 C"));
        assert_eq!(channel_key("DIMM 0"), None);
        assert_eq!(channel_key("BANK 0"), None);
    }

    #[test]
    fn microarch_corner_cases() {
        let intel = |model, stepping| {
            microarch("GenuineIntel", Some(6), Some(model), Some(stepping), "Xeon")
                .value
                .unwrap_or_default()
        };
        assert_eq!(intel(0x55, 4), "skylake-sp");
        assert_eq!(intel(0x55, 7), "cascadelake");
        assert_eq!(intel(0x55, 5), "cascadelake");
        assert_eq!(intel(0x55, 11), "cooperlake");
        assert_eq!(intel(0x55, 8), "");
        assert_eq!(intel(0x8F, 8), "sapphirerapids");
        assert_eq!(intel(0x3F, 2), "haswell");
        assert_eq!(intel(0xAD, 1), "graniterapids");
        let amd = |family, model| {
            microarch("AuthenticAMD", Some(family), Some(model), Some(0), "EPYC")
                .value
                .unwrap_or_default()
        };
        assert_eq!(amd(0x17, 0x01), "zen");
        assert_eq!(amd(0x17, 0x2F), "zen");
        assert_eq!(amd(0x17, 0x31), "zen2");
        assert_eq!(amd(0x19, 0x01), "zen3");
        assert_eq!(amd(0x19, 0x11), "zen4");
        assert_eq!(amd(0x19, 0x21), "zen3");
        assert_eq!(amd(0x19, 0x61), "zen4");
        assert_eq!(amd(0x19, 0xA0), "zen4");
        assert_eq!(amd(0x19, 0x90), "");
        assert_eq!(amd(0x1A, 0x02), "zen5");

        let no_stepping = microarch("GenuineIntel", Some(6), Some(0x55), None, "Xeon");
        assert!(no_stepping.value.is_none());
        let unknown = microarch("GenuineIntel", Some(6), Some(0x99), Some(1), "Mystery");
        assert_eq!(
            unknown.reason.as_deref(),
            Some(
                "CPUID family 6 model 153 (GenuineIntel), model 0x99, 'Mystery', is not in \
                 the microarchitecture table"
            )
        );
        assert!(
            microarch("HygonGenuine", Some(0x18), Some(1), Some(1), "Hygon")
                .value
                .is_none()
        );
    }

    #[test]
    fn clocks_from_model_names() {
        let xeon = "Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz";
        assert_eq!(clock_from_model_name(xeon), Some(2.5));
        assert_eq!(clock_from_model_name("Some CPU @ 2.50 GHz"), Some(2.5));
        assert_eq!(clock_from_model_name("Old CPU @ 800MHz"), Some(0.8));
        assert_eq!(clock_from_model_name("AMD EPYC"), None);
        assert_eq!(clock_from_model_name("AMD EPYC 7R13 Processor"), None);
        assert_eq!(clock_from_model_name("CPU @ fastGHz"), None);
    }

    #[test]
    fn small_parsers() {
        assert_eq!(
            parse_scheduler("none [mq-deadline] kyber bfq\n").as_deref(),
            Some("mq-deadline")
        );
        assert_eq!(
            parse_scheduler("[none] mq-deadline").as_deref(),
            Some("none")
        );
        assert_eq!(parse_scheduler("none").as_deref(), Some("none"));
        assert_eq!(parse_scheduler("none kyber"), None);
        let os = "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n";
        assert_eq!(
            parse_os_release(os).as_deref(),
            Some("Debian GNU/Linux 12 (bookworm)")
        );
        assert_eq!(
            parse_os_release("PRETTY_NAME=Alpine\n").as_deref(),
            Some("Alpine")
        );
        assert_eq!(parse_os_release("NAME=x\n"), None);
        let meminfo = "MemTotal:       24684084 kB\nMemFree: 1 kB\nMemAvailable:   24379292 kB\n";
        let parsed = parse_meminfo(meminfo);
        assert_eq!(parsed.total_bytes, Some(24684084 * 1024));
        assert_eq!(parsed.available_bytes, Some(24379292 * 1024));
        let node = "Node 0 MemTotal:        4286668 kB\nNode 0 MemFree: 3 kB\n";
        assert_eq!(parse_meminfo(node).total_bytes, Some(4286668 * 1024));
    }

    #[test]
    fn link_speeds() {
        let src = "/sys/class/net/eth0/speed";
        assert_eq!(
            link_speed(Ok("25000\n".into()), false, src),
            Fact::read(25000, src)
        );
        assert_eq!(
            link_speed(Ok("-1\n".into()), false, src),
            Fact::unknown("the driver reports no link speed (-1)")
        );
        assert!(
            link_speed(Ok("4294967295".into()), false, src)
                .value
                .is_none()
        );
        assert_eq!(
            link_speed(Err("x".into()), true, src),
            Fact::unknown("loopback has no link speed")
        );
        let unreadable = link_speed(Err("cannot read it".into()), false, src);
        assert!(unreadable.reason.unwrap().starts_with("cannot read it"));
    }

    #[test]
    fn topology_without_pairs() {
        let topology = summarize_topology(&[None, None, None, None]);
        assert_eq!(
            (
                topology.sockets,
                topology.physical_cores,
                topology.logical_cpus
            ),
            (1, 4, 4)
        );
        assert!(!topology.smt);
        let hybrid = summarize_topology(&[Some((0, 0)), Some((0, 0)), Some((0, 8)), Some((0, 9))]);
        assert_eq!((hybrid.physical_cores, hybrid.threads_per_core), (3, 2));
    }

    /// A sysfs-like tree: two CPUs with caches, cpufreq and topology, one NUMA node, disks and
    /// network interfaces.
    fn sysfs_fixture(root: &Path) {
        write(root, "/proc/cpuinfo", AMD_KVM_CPUINFO);
        write(
            root,
            "/proc/meminfo",
            "MemTotal: 2048 kB\nMemAvailable: 1024 kB\n",
        );
        write(root, "/proc/sys/kernel/hostname", "fixture\n");
        write(root, "/proc/sys/kernel/osrelease", "6.1.0-test\n");
        write(root, "/usr/lib/os-release", "PRETTY_NAME=\"Test Linux\"\n");
        let cpu = "/sys/devices/system/cpu";
        write(root, &format!("{cpu}/online"), "0-1\n");
        write(
            root,
            &format!("{cpu}/cpu0/cpufreq/base_frequency"),
            "2100000\n",
        );
        write(
            root,
            &format!("{cpu}/cpu0/cpufreq/cpuinfo_max_freq"),
            "3900000\n",
        );
        write(
            root,
            &format!("{cpu}/cpu0/cpufreq/scaling_governor"),
            "performance\n",
        );
        for n in 0..2 {
            write(
                root,
                &format!("{cpu}/cpu{n}/topology/physical_package_id"),
                "0\n",
            );
            // Both CPUs on core 0: SMT siblings, whatever cpuinfo says.
            write(root, &format!("{cpu}/cpu{n}/topology/core_id"), "0\n");
            let caches = [
                (1, "Data", "48K", n.to_string()),
                (1, "Instruction", "32K", n.to_string()),
                (2, "Unified", "1024K", n.to_string()),
                (3, "Unified", "32768K", "0-1".to_string()),
            ];
            for (i, (level, kind, size, shared)) in caches.iter().enumerate() {
                let dir = format!("{cpu}/cpu{n}/cache/index{i}");
                write(root, &format!("{dir}/level"), &format!("{level}\n"));
                write(root, &format!("{dir}/type"), &format!("{kind}\n"));
                write(root, &format!("{dir}/size"), &format!("{size}\n"));
                write(
                    root,
                    &format!("{dir}/shared_cpu_list"),
                    &format!("{shared}\n"),
                );
                write(root, &format!("{dir}/coherency_line_size"), "64\n");
            }
        }
        write(root, "/sys/devices/system/node/node0/cpulist", "0-1\n");
        write(
            root,
            "/sys/devices/system/node/node0/meminfo",
            "Node 0 MemTotal: 2048 kB\n",
        );
        write(root, "/sys/devices/system/node/possible", "0\n");

        write(root, "/sys/block/vda/size", "1048576\n");
        write(root, "/sys/block/vda/queue/rotational", "1\n");
        write(root, "/sys/block/vda/queue/logical_block_size", "512\n");
        write(root, "/sys/block/vda/queue/physical_block_size", "4096\n");
        write(root, "/sys/block/vda/queue/nr_requests", "256\n");
        write(
            root,
            "/sys/block/vda/queue/scheduler",
            "none [mq-deadline] kyber\n",
        );
        write(
            root,
            "/sys/block/nvme0n1/device/model",
            "Fast NVMe Disk          \n",
        );
        write(root, "/sys/block/nvme0n1/queue/rotational", "0\n");
        write(
            root,
            "/sys/block/nvme0n1/queue/scheduler",
            "[none] mq-deadline\n",
        );
        write(root, "/sys/block/loop0/size", "0\n");
        write(root, "/sys/block/zram0/size", "0\n");

        let net = "/sys/class/net";
        write(root, &format!("{net}/bonding_masters"), "\n");
        write(root, &format!("{net}/lo/mtu"), "65536\n");
        write(root, &format!("{net}/lo/type"), "772\n");
        write(root, &format!("{net}/lo/operstate"), "unknown\n");
        write(root, &format!("{net}/ens5/mtu"), "9001\n");
        write(root, &format!("{net}/ens5/speed"), "25000\n");
        write(root, &format!("{net}/ens5/type"), "1\n");
        write(root, &format!("{net}/ens5/operstate"), "up\n");
        write(root, "/sys/bus/pci/drivers/ena/.keep", "");
        fs::create_dir_all(root.join("sys/class/net/ens5/device")).unwrap();
        std::os::unix::fs::symlink(
            root.join("sys/bus/pci/drivers/ena"),
            root.join("sys/class/net/ens5/device/driver"),
        )
        .unwrap();
        write(root, &format!("{net}/eth1/speed"), "-1\n");
        write(root, &format!("{net}/eth1/type"), "1\n");
    }

    #[test]
    fn sysfs_tree() {
        let dir = tempfile::tempdir().unwrap();
        sysfs_fixture(dir.path());
        let info = collect_from(dir.path(), &probes(Some("KVM")));
        assert_eq!(info.hostname, "fixture");
        assert_eq!(info.os.kernel, "6.1.0-test");
        assert_eq!(
            info.os.distribution,
            Fact::read("Test Linux".to_string(), "/usr/lib/os-release: PRETTY_NAME")
        );

        let cpu = &info.cpu;
        assert_eq!(
            (cpu.sockets, cpu.physical_cores, cpu.logical_cpus),
            (1, 1, 2)
        );
        assert_eq!((cpu.threads_per_core, cpu.smt), (2, true));
        let cpufreq = "/sys/devices/system/cpu/cpu0/cpufreq";
        assert_eq!(
            cpu.base_ghz,
            Fact::read(2.1, format!("{cpufreq}/base_frequency"))
        );
        assert_eq!(
            cpu.max_ghz,
            Fact::read(3.9, format!("{cpufreq}/cpuinfo_max_freq"))
        );
        assert_eq!(cpu.governor.value.as_deref(), Some("performance"));

        let caches: Vec<_> = cpu
            .caches
            .iter()
            .map(|c| {
                (
                    c.level,
                    c.kind.as_str(),
                    c.size_bytes,
                    c.shared_by_cpus,
                    c.instances,
                )
            })
            .collect();
        assert_eq!(
            caches,
            [
                (1, "Data", 48 << 10, 1, 2),
                (1, "Instruction", 32 << 10, 1, 2),
                (2, "Unified", 1 << 20, 1, 2),
                (3, "Unified", 32 << 20, 2, 1),
            ]
        );
        assert!(cpu.caches.iter().all(|c| c.line_bytes == Some(64)));

        assert_eq!(cpu.numa_nodes.len(), 1);
        assert_eq!(cpu.numa_nodes[0].cpus, "0-1");
        assert_eq!(cpu.numa_nodes[0].memory_bytes, Some(2 << 20));
        assert_eq!(
            (info.memory.total_bytes, info.memory.available_bytes),
            (2 << 20, 1 << 20)
        );

        let names: Vec<_> = info.disks.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["nvme0n1", "vda"]);
        let nvme = &info.disks[0];
        assert_eq!(nvme.model.as_deref(), Some("Fast NVMe Disk"));
        assert_eq!(
            (nvme.rotational, nvme.scheduler.as_deref(), nvme.size_bytes),
            (Some(false), Some("none"), None)
        );
        let vda = &info.disks[1];
        assert_eq!(vda.size_bytes, Some(512 << 20));
        assert_eq!(
            (vda.logical_sector_bytes, vda.physical_sector_bytes),
            (Some(512), Some(4096))
        );
        assert_eq!(
            (vda.queue_depth, vda.scheduler.as_deref()),
            (Some(256), Some("mq-deadline"))
        );

        let names: Vec<_> = info.nics.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["ens5", "eth1", "lo"]);
        let ens5 = &info.nics[0];
        assert_eq!(ens5.driver.as_deref(), Some("ena"));
        assert_eq!((ens5.mtu, ens5.state.as_deref()), (Some(9001), Some("up")));
        assert_eq!(
            ens5.speed_mbps,
            Fact::read(25000, "/sys/class/net/ens5/speed")
        );
        assert_eq!(
            info.nics[1].speed_mbps.reason.as_deref(),
            Some("the driver reports no link speed (-1)")
        );
        let lo = &info.nics[2];
        assert!(lo.loopback && lo.driver.is_none());
        assert_eq!(
            lo.speed_mbps.reason.as_deref(),
            Some("loopback has no link speed")
        );
    }
}
