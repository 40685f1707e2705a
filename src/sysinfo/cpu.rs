//! The CPU: the processor blocks of /proc/cpuinfo, how the logical CPUs group into cores and
//! sockets, the clocks (cpufreq, the model name, "cpu MHz"), the SIMD features, the caches and
//! the NUMA nodes.

use std::collections::{BTreeMap, BTreeSet};

use super::memory::parse_meminfo;
use super::root::Root;
use super::{Cache, CpuInfo, Fact, NumaNode, microarch};

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

// ---------------------------------------------------------------------------------------------
// /proc/cpuinfo

/// One processor block of /proc/cpuinfo.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct CpuinfoEntry {
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
pub(super) fn parse_cpuinfo(text: &str) -> Vec<CpuinfoEntry> {
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
pub(super) fn simd_features(flags: &[String]) -> Vec<String> {
    let present: BTreeSet<&str> = flags.iter().map(String::as_str).collect();
    SIMD_FLAGS
        .iter()
        .filter(|(_, flag)| present.contains(flag))
        .map(|(name, _)| (*name).to_string())
        .collect()
}

/// The clock in GHz written after "@" in a model name ("… CPU @ 2.50GHz" gives 2.5).
pub(super) fn clock_from_model_name(name: &str) -> Option<f64> {
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
// Topology, clocks, caches, NUMA

/// How the logical CPUs group into cores and sockets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Topology {
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
pub(super) fn summarize_topology(cpus: &[Option<(i64, i64)>]) -> Topology {
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

/// Writes CPU numbers as the kernel writes a CPU list: runs as ranges, "0-3,8".
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            sorted[i].to_string()
        } else {
            format!("{}-{}", sorted[i], sorted[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// Parses a sysfs cache size ("32K", "1024K", "8M", "512") into bytes.
pub(super) fn parse_cache_size(text: &str) -> Option<u64> {
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

pub(super) fn read_cpu(root: Root, processors: &[CpuinfoEntry]) -> CpuInfo {
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
        microarch: microarch::identify(
            &vendor,
            family,
            model,
            stepping,
            &model_name,
            first.map(|p| p.flags.as_slice()).unwrap_or_default(),
        ),
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
pub(super) struct CacheIndex {
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
pub(super) fn summarize_caches(indexes: &[CacheIndex]) -> Vec<Cache> {
    type GroupKey<'a> = (u32, &'a str, u64, usize);
    let mut groups: BTreeMap<GroupKey, (BTreeSet<&[usize]>, Option<u64>)> = BTreeMap::new();
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::root::write_fixture as write;
    use super::*;

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

    /// The CPU as read from `cpuinfo` alone, in a tree with nothing else.
    fn cpu_from_cpuinfo(cpuinfo: &str) -> CpuInfo {
        let dir = tempfile::tempdir().unwrap();
        read_cpu(Root(dir.path()), &parse_cpuinfo(cpuinfo))
    }

    #[test]
    fn intel_xeon_two_sockets_with_hyperthreading() {
        let cpu = &cpu_from_cpuinfo(&intel_cpuinfo());
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
    }

    #[test]
    fn amd_epyc_under_kvm_without_clock_in_name() {
        let cpu = &cpu_from_cpuinfo(AMD_KVM_CPUINFO);
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
        assert!(cpu.simd.contains(&"avx512_bf16".to_string()));
        assert!(cpu.simd.contains(&"avx_vnni".to_string()));
        assert!(!cpu.simd.contains(&"avx512_fp16".to_string()));
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
        for list in ["0-3,8", "0", "1-2,5,7-9", ""] {
            assert_eq!(format_cpu_list(&parse_cpu_list(list)), list);
        }
        assert_eq!(format_cpu_list(&[3, 1, 2, 2]), "1-3");
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

    /// A sysfs-like tree of two CPUs with caches, cpufreq and topology, and one NUMA node.
    fn sysfs_fixture(root: &Path) {
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
    }

    #[test]
    fn sysfs_tree() {
        let dir = tempfile::tempdir().unwrap();
        sysfs_fixture(dir.path());
        let cpu = &read_cpu(Root(dir.path()), &parse_cpuinfo(AMD_KVM_CPUINFO));
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
    }
}
