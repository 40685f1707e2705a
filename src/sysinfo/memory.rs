//! Memory: the totals of /proc/meminfo, and the DIMM inventory of `dmidecode -t 17` with the
//! channels, transfer rate and type told from it.

use std::collections::BTreeSet;
use std::io;
use std::path::Path;
use std::process::{Command, Stdio};
use std::str::FromStr;

use super::root::Root;
use super::{Dimm, Fact, MemoryInfo};
use crate::interrupt::Group;

/// What a user can do when the DIMM inventory cannot be read.
const MEM_ADVICE: &str = "give --mem-channels and --mem-mts";

/// Total and available memory from /proc/meminfo (or a node's meminfo), in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Meminfo {
    /// `MemTotal`.
    pub total_bytes: Option<u64>,
    /// `MemAvailable` (absent from NUMA node meminfo).
    pub available_bytes: Option<u64>,
}

/// Parses /proc/meminfo, or /sys/devices/system/node/node*/meminfo whose keys carry a
/// "Node N" prefix.
pub(super) fn parse_meminfo(text: &str) -> Meminfo {
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
pub(super) struct MemoryDevice {
    /// The fields that describe the module.
    pub dimm: Dimm,
    /// `Bank Locator`, which some boards use to name the channel.
    pub bank_locator: Option<String>,
    /// False for "No Module Installed" slots.
    pub populated: bool,
}

/// Parses the output of `dmidecode -t 17` into its Memory Device records, empty slots
/// included.
pub(super) fn parse_dmidecode_type17(text: &str) -> Vec<MemoryDevice> {
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
pub(super) fn channel_key(locator: &str) -> Option<String> {
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

pub(super) fn read_memory(root: Root, dmidecode: &Result<String, String>) -> MemoryInfo {
    let meminfo = root
        .read("/proc/meminfo")
        .map(|text| parse_meminfo(&text))
        .unwrap_or_default();
    let facts = dimm_facts(dmidecode, root.exists("/sys/firmware/dmi"));
    MemoryInfo {
        total_bytes: meminfo.total_bytes.unwrap_or(0),
        available_bytes: meminfo.available_bytes.unwrap_or(0),
        available_source: None,
        dimms: facts.dimms,
        channels: facts.channels,
        mts: facts.mts,
        kind: facts.kind,
    }
}

/// How long `dmidecode` may take (it reads firmware tables, which a broken BIOS or a stuck
/// /dev/mem read can make hang).
const DMIDECODE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Runs `program` with `args` in a process group of its own; its output, or why there is none
/// (it and everything it started are killed after `timeout`).
pub fn run_for_at_most(
    program: &str,
    args: &[&str],
    timeout: std::time::Duration,
) -> Result<std::process::Output, String> {
    use std::io::Read;
    let shown = Path::new(program)
        .file_name()
        .map_or(program.into(), |n| n.to_string_lossy());
    let mut group = Group::spawn(
        Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => format!("{shown} not installed"),
        _ => format!("cannot run {shown}: {e}"),
    })?;
    let readers = [
        group
            .child()
            .stdout
            .take()
            .map(|o| Box::new(o) as Box<dyn Read + Send>),
        group
            .child()
            .stderr
            .take()
            .map(|e| Box::new(e) as Box<dyn Read + Send>),
    ]
    .map(|pipe| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    });
    let until = std::time::Instant::now() + timeout;
    while !group
        .exited()
        .map_err(|e| format!("waiting for {shown}: {e}"))?
    {
        if std::time::Instant::now() >= until {
            let _ = group.end();
            return Err(format!(
                "{shown} did not finish within {} and was killed",
                humantime::format_duration(timeout)
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let status = group
        .end()
        .map_err(|e| format!("waiting for {shown}: {e}"))?;
    let [stdout, stderr] = readers.map(|r| r.join().unwrap_or_default());
    Ok(std::process::Output {
        status,
        stdout,
        stderr,
    })
}

/// Runs `dmidecode -t 17`: its output, or why there is none.
pub(super) fn run_dmidecode() -> Result<String, String> {
    let program = [
        "/usr/sbin/dmidecode",
        "/sbin/dmidecode",
        "/usr/bin/dmidecode",
    ]
    .into_iter()
    .find(|p| Path::new(p).exists())
    .unwrap_or("dmidecode");
    let output = run_for_at_most(program, &["-t", "17"], DMIDECODE_TIMEOUT)?;
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

#[cfg(test)]
mod tests {
    use super::super::root::write_fixture as write;
    use super::*;

    #[test]
    fn a_hung_dmidecode_is_killed_with_everything_it_started() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("child.pid");
        let script = format!("sleep 30 & echo $! > {}; wait", pid_file.display());
        let start = std::time::Instant::now();
        let e = run_for_at_most(
            "/bin/sh",
            &["-c", &script],
            std::time::Duration::from_millis(300),
        )
        .unwrap_err();
        assert!(start.elapsed() < std::time::Duration::from_secs(5), "{e}");
        assert_eq!(e, "sh did not finish within 300ms and was killed");
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        // SIGKILL is delivered asynchronously: give the kernel up to 5 s to end it.
        let dead = || {
            std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).map_or(true, |s| {
                s.rsplit(')').next().unwrap().trim_start().starts_with('Z')
            })
        };
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !dead() && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let gone = dead();
        assert!(gone, "its child {} survived", pid.trim());
        let out = run_for_at_most("/bin/sh", &["-c", "echo out"], DMIDECODE_TIMEOUT).unwrap();
        assert_eq!(out.stdout, b"out\n");
        assert!(
            run_for_at_most("/nonexistent/dmidecode", &[], DMIDECODE_TIMEOUT)
                .unwrap_err()
                .ends_with("dmidecode not installed")
        );
    }

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
    fn meminfo_and_node_meminfo() {
        let meminfo = "MemTotal:       24684084 kB\nMemFree: 1 kB\nMemAvailable:   24379292 kB\n";
        let parsed = parse_meminfo(meminfo);
        assert_eq!(parsed.total_bytes, Some(24684084 * 1024));
        assert_eq!(parsed.available_bytes, Some(24379292 * 1024));
        let node = "Node 0 MemTotal:        4286668 kB\nNode 0 MemFree: 3 kB\n";
        assert_eq!(parse_meminfo(node).total_bytes, Some(4286668 * 1024));
    }

    #[test]
    fn totals_from_proc_meminfo() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "/proc/meminfo",
            "MemTotal: 2048 kB\nMemAvailable: 1024 kB\n",
        );
        let memory = read_memory(Root(dir.path()), &Err("not run".to_string()));
        assert_eq!(
            (memory.total_bytes, memory.available_bytes),
            (2 << 20, 1 << 20)
        );
    }
}
