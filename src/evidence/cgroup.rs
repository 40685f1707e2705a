//! This process's cgroup: its CPU quota, cpuset, memory limit, I/O throttles (v1 and v2) and the
//! CFS throttling counters of `cpu.stat`.
//!
//! # Finding the groups
//!
//! `/proc/self/cgroup` names this process's group in each hierarchy: one line per cgroup v1
//! hierarchy (`4:memory:/user.slice`, `2:cpu,cpuacct:/`), and `0::/path` for the v2 (unified)
//! one. `/proc/self/mountinfo` says where each hierarchy is mounted (a v1 one by the
//! controllers among its super options, the v2 one by its file system type `cgroup2`) and which
//! of its groups the mount shows (its root field: `/` on a host, the container's own group in a
//! container that mounted only its subtree). A group's directory is the mount point joined with
//! its path less that root. A v1 controller that `mountinfo` does not show is looked for at
//! `/sys/fs/cgroup/<controllers>` (the usual place).
//!
//! A controller mounted as v1 is read there; otherwise the unified hierarchy is read (a hybrid
//! host has both, and its v2 hierarchy usually holds no controller at all).
//!
//! # Ancestors
//!
//! A limit binds a group's processes when it is set on the group or on any group above it: a
//! CPU quota, a memory limit or an I/O throttle is looked for from the process's group up to
//! the top of the mounted hierarchy, and the tightest one is kept (per device and direction
//! for I/O).

use std::path::{Path, PathBuf};

use super::{CpuQuota, IoThrottle, Read, RunEvidence, Throttling};

/// Which hierarchy a limit was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CgroupVersion {
    V1,
    V2,
}

impl CgroupVersion {
    /// The number the results document stores (`cgroup_version`).
    pub fn number(self) -> u8 {
        match self {
            CgroupVersion::V1 => 1,
            CgroupVersion::V2 => 2,
        }
    }
}

/// A v1 memory limit at or above this many bytes is no limit: the kernel writes "unlimited" as
/// the largest page-aligned `i64` (9223372036854771712 with 4 KiB pages). Used only when the
/// machine's memory is unknown; otherwise a limit must be below it to count.
const NO_MEMORY_LIMIT: u64 = 1 << 62;

/// One of this process's cgroups: its directory and the top of the mounted hierarchy it is in.
#[derive(Clone, Debug, PartialEq)]
struct Group {
    version: CgroupVersion,
    dir: PathBuf,
    top: PathBuf,
}

impl Group {
    /// The group's directory and its ancestors' up to the top of the mount, nearest first.
    fn lineage(&self) -> Vec<PathBuf> {
        let mut dirs = vec![self.dir.clone()];
        let mut dir = self.dir.as_path();
        while dir != self.top {
            match dir.parent() {
                Some(parent) if parent.starts_with(&self.top) => {
                    dirs.push(parent.to_path_buf());
                    dir = parent;
                }
                _ => break,
            }
        }
        dirs
    }
}

/// Where this process's groups are, per controller.
#[derive(Debug, Default)]
struct Groups {
    /// Each v1 controller this process's `/proc/self/cgroup` names and that is mounted.
    v1: std::collections::BTreeMap<String, Group>,
    /// The unified hierarchy's group, when it is mounted.
    v2: Option<Group>,
    /// Why the v1 group of a controller named in `/proc/self/cgroup` could not be found, by
    /// controller.
    missing_v1: std::collections::BTreeMap<String, String>,
    /// Why the v2 group named in `/proc/self/cgroup` could not be found.
    missing_v2: Option<String>,
}

impl Groups {
    /// The group to read `controller` from (`cpu`, `cpuset`, `memory`, `blkio`): its v1 group
    /// when that controller is mounted as v1, else the unified group.
    fn of(&self, controller: &str) -> Option<&Group> {
        self.v1.get(controller).or(self.v2.as_ref())
    }
}

/// One mount of a cgroup file system (a line of `/proc/self/mountinfo`).
#[derive(Debug)]
struct CgroupMount {
    /// The group the mount shows at its mount point (`/` unless a subtree is mounted).
    root: String,
    /// Where it is mounted.
    point: String,
    /// `cgroup` or `cgroup2`.
    fstype: String,
    /// The super options: for v1, the controllers (`rw,cpu,cpuacct`).
    options: Vec<String>,
}

/// The cgroup mounts of a `/proc/self/mountinfo` text.
fn cgroup_mounts(mountinfo: &str) -> Vec<CgroupMount> {
    let mut mounts = Vec::new();
    for line in mountinfo.lines() {
        // "36 25 0:31 / /sys/fs/cgroup/cpu rw,nosuid - cgroup cgroup rw,cpu,cpuacct": the
        // fields before " - " are fixed then optional, those after it fixed.
        let Some((before, after)) = line.split_once(" - ") else {
            continue;
        };
        let before: Vec<&str> = before.split_whitespace().collect();
        let after: Vec<&str> = after.split_whitespace().collect();
        let (Some(root), Some(point), Some(&fstype)) =
            (before.get(3), before.get(4), after.first())
        else {
            continue;
        };
        if fstype != "cgroup" && fstype != "cgroup2" {
            continue;
        }
        mounts.push(CgroupMount {
            root: unescape_mount_field(root),
            point: unescape_mount_field(point),
            fstype: fstype.to_string(),
            options: after
                .get(2)
                .map(|o| o.split(',').map(str::to_string).collect())
                .unwrap_or_default(),
        });
    }
    mounts
}

/// A `mountinfo` path with its octal escapes (`\040` for a space) decoded.
fn unescape_mount_field(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match octal.and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok()) {
            Some(byte) => {
                out.push(byte);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The directory of the group `path` (as `/proc/self/cgroup` writes it) in a hierarchy mounted
/// at `point` showing the group `root`; `None` when the group is outside what the mount shows.
fn group_dir(
    version: CgroupVersion,
    fs_root: &Path,
    point: &str,
    root: &str,
    path: &str,
) -> Option<Group> {
    let inside = if root == "/" {
        path
    } else {
        let rest = path.strip_prefix(root.trim_end_matches('/'))?;
        if !rest.is_empty() && !rest.starts_with('/') {
            return None;
        }
        rest
    };
    if inside.split('/').any(|part| part == "..") {
        return None;
    }
    let top = fs_root.join(point.trim_start_matches('/'));
    let dir = top.join(inside.trim_start_matches('/'));
    Some(Group { version, dir, top })
}

/// Finds this process's groups from the text of `/proc/self/cgroup` and
/// `/proc/self/mountinfo`; paths are taken under `fs_root` (`/`, or a test's tree).
fn find_groups(fs_root: &Path, self_cgroup: &str, mountinfo: &str) -> Groups {
    let mounts = cgroup_mounts(mountinfo);
    let mut groups = Groups::default();
    for line in self_cgroup.lines() {
        // "4:memory:/user.slice", "2:cpu,cpuacct:/", "0::/system.slice/x.service"
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            let found = mounts
                .iter()
                .filter(|m| m.fstype == "cgroup2")
                .find_map(|m| group_dir(CgroupVersion::V2, fs_root, &m.point, &m.root, path))
                .or_else(|| {
                    let top = fs_root.join("sys/fs/cgroup");
                    top.join("cgroup.controllers")
                        .exists()
                        .then(|| group_dir(CgroupVersion::V2, fs_root, "/sys/fs/cgroup", "/", path))
                        .flatten()
                });
            match found {
                Some(group) => groups.v2 = Some(group),
                None => {
                    groups.missing_v2 = Some(format!(
                        "the cgroup v2 group {path} of /proc/self/cgroup is not mounted"
                    ))
                }
            }
            continue;
        }
        let names: Vec<&str> = controllers.split(',').filter(|c| !c.is_empty()).collect();
        if names.is_empty() {
            continue;
        }
        let found = mounts
            .iter()
            .filter(|m| {
                m.fstype == "cgroup" && names.iter().all(|n| m.options.iter().any(|o| o == n))
            })
            .find_map(|m| group_dir(CgroupVersion::V1, fs_root, &m.point, &m.root, path))
            .or_else(|| {
                // Not in mountinfo (a container that hides it): the usual places.
                [names.join(","), names[0].to_string()]
                    .into_iter()
                    .map(|dir| format!("/sys/fs/cgroup/{dir}"))
                    .find(|point| fs_root.join(point.trim_start_matches('/')).is_dir())
                    .and_then(|point| group_dir(CgroupVersion::V1, fs_root, &point, "/", path))
            });
        match found {
            Some(group) => {
                for name in names {
                    groups.v1.insert(name.to_string(), group.clone());
                }
            }
            None => {
                for name in names {
                    groups.missing_v1.insert(
                        name.to_string(),
                        format!(
                            "the cgroup v1 group {path} of {controllers} (/proc/self/cgroup) is \
                             not mounted"
                        ),
                    );
                }
            }
        }
    }
    groups
}

/// A small file of a group, trimmed; `None` when absent or unreadable.
fn read_file(dir: &Path, name: &str) -> Option<String> {
    std::fs::read_to_string(dir.join(name))
        .ok()
        .map(|s| s.trim().to_string())
}

/// The machine's memory in bytes: `MemTotal` of a `/proc/meminfo` text.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut words = line["MemTotal:".len()..].split_whitespace();
    let kib: u64 = words.next()?.parse().ok()?;
    (words.next() == Some("kB")).then_some(kib.checked_mul(1024)?)
}

/// Reads the limits of this process's cgroup into `evidence`; what cannot be read goes to
/// `unreadable`.
pub(super) fn read_limits(evidence: &mut RunEvidence, unreadable: &mut Vec<String>) {
    let (Ok(self_cgroup), Ok(mountinfo)) = (
        std::fs::read_to_string("/proc/self/cgroup"),
        std::fs::read_to_string("/proc/self/mountinfo"),
    ) else {
        unreadable.push(
            "cgroup limits: /proc/self/cgroup or /proc/self/mountinfo cannot be read (is /proc \
             mounted?)"
                .to_string(),
        );
        return;
    };
    let mem_total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| mem_total(&m));
    read_limits_at(
        Path::new("/"),
        &self_cgroup,
        &mountinfo,
        mem_total,
        evidence,
        unreadable,
    );
}

/// [`read_limits`] with the files under `fs_root`, the two `/proc/self` texts and the
/// machine's memory given, so that a test builds the tree.
fn read_limits_at(
    fs_root: &Path,
    self_cgroup: &str,
    mountinfo: &str,
    mem_total: Option<u64>,
    evidence: &mut RunEvidence,
    unreadable: &mut Vec<String>,
) {
    let groups = find_groups(fs_root, self_cgroup, mountinfo);
    let controllers = ["cpu", "cpuset", "memory", "blkio"];
    evidence.cgroup_version = if controllers.iter().any(|c| groups.v1.contains_key(*c)) {
        Some(CgroupVersion::V1.number())
    } else if groups.v2.is_some() {
        Some(CgroupVersion::V2.number())
    } else {
        // One line for all: `ip netns exec` (a /sys of its own, without the cgroup mounts)
        // and some containers have none of them.
        unreadable.push(
            "cgroup limits: none of this process's cgroups (/proc/self/cgroup) is mounted \
             (/proc/self/mountinfo; a /sys mounted anew, as by `ip netns exec`, has none)"
                .to_string(),
        );
        return;
    };
    // Only what hides a limit is said: a hierarchy that holds none of these controllers (a
    // hybrid host's empty unified one, `name=systemd`, `misc`) may be missing unremarked.
    for controller in controllers {
        if groups.of(controller).is_none()
            && let Some(why) = groups
                .missing_v1
                .get(controller)
                .or(groups.missing_v2.as_ref())
            && !unreadable.contains(why)
        {
            unreadable.push(why.clone());
        }
    }
    let mut absent: Vec<&Path> = Vec::new();
    for controller in controllers {
        if let Some(group) = groups.of(controller)
            && !group.dir.is_dir()
            && !absent.contains(&group.dir.as_path())
        {
            absent.push(&group.dir);
            unreadable.push(format!(
                "cgroup {controller}: this process's group {} is not there (a cgroup mount \
                 from another namespace?)",
                group.dir.display()
            ));
        }
    }
    if let Some(group) = groups.of("cpu") {
        evidence.cpu_quota = cpu_quota(group).map(|(quota, _)| quota);
    }
    if let Some(group) = groups.of("cpuset") {
        evidence.cpuset = cpuset(group);
    }
    if let Some(group) = groups.of("memory") {
        evidence.memory_limit = memory_limit(group, mem_total);
        evidence.memory_usage = memory_usage(group);
    }
    if let Some(group) = groups.of("blkio") {
        evidence.io_throttles = io_throttles(group, fs_root);
    }
}

/// The tightest CPU quota over the group and its ancestors, with the directory it is set on.
fn cpu_quota(group: &Group) -> Option<(Read<CpuQuota>, PathBuf)> {
    let mut tightest: Option<(Read<CpuQuota>, PathBuf)> = None;
    for dir in group.lineage() {
        let found = match group.version {
            CgroupVersion::V1 => cfs_quota(&dir),
            // The top of a v2 hierarchy has no cpu.max: a group without one is skipped.
            CgroupVersion::V2 => read_file(&dir, "cpu.max")
                .and_then(|text| parse_cpu_max(&text))
                .map(|q| Read::new(q, dir.join("cpu.max").display().to_string())),
        };
        if let Some(found) = found
            && tightest
                .as_ref()
                .is_none_or(|(t, _)| found.value.cpus() < t.value.cpus())
        {
            tightest = Some((found, dir));
        }
    }
    tightest
}

/// The v1 quota of one group (`cpu.cfs_quota_us`, -1 for none, per `cpu.cfs_period_us`).
fn cfs_quota(dir: &Path) -> Option<Read<CpuQuota>> {
    let quota: i64 = read_file(dir, "cpu.cfs_quota_us")?.parse().ok()?;
    let period_us: u64 = read_file(dir, "cpu.cfs_period_us")?.parse().ok()?;
    let quota_us = u64::try_from(quota).ok().filter(|&q| q > 0)?;
    if period_us == 0 {
        return None;
    }
    let source = format!(
        "{}, {}",
        dir.join("cpu.cfs_quota_us").display(),
        dir.join("cpu.cfs_period_us").display()
    );
    Some(Read::new(
        CpuQuota {
            quota_us,
            period_us,
        },
        source,
    ))
}

/// The CPUs of the group's cpuset, as the kernel writes them.
fn cpuset(group: &Group) -> Option<Read<String>> {
    match group.version {
        CgroupVersion::V1 => ["cpuset.effective_cpus", "cpuset.cpus"]
            .into_iter()
            .find_map(|name| {
                let cpus = read_file(&group.dir, name).filter(|c| !c.is_empty())?;
                Some(Read::new(cpus, group.dir.join(name).display().to_string()))
            }),
        // A group without the cpuset controller enabled has no file: its parent's CPUs apply.
        CgroupVersion::V2 => group.lineage().into_iter().find_map(|dir| {
            let cpus = read_file(&dir, "cpuset.cpus.effective").filter(|c| !c.is_empty())?;
            Some(Read::new(
                cpus,
                dir.join("cpuset.cpus.effective").display().to_string(),
            ))
        }),
    }
}

/// The tightest memory limit over the group and its ancestors, when below the machine's
/// memory (a limit above it never binds).
fn memory_limit(group: &Group, mem_total: Option<u64>) -> Option<Read<u64>> {
    let name = match group.version {
        CgroupVersion::V1 => "memory.limit_in_bytes",
        CgroupVersion::V2 => "memory.max",
    };
    let ceiling = mem_total.unwrap_or(NO_MEMORY_LIMIT).min(NO_MEMORY_LIMIT);
    group
        .lineage()
        .into_iter()
        .filter_map(|dir| {
            // v2 writes "max" for no limit: it does not parse.
            let bytes: u64 = read_file(&dir, name)?.parse().ok()?;
            Some(Read::new(bytes, dir.join(name).display().to_string()))
        })
        .filter(|limit| limit.value < ceiling)
        .min_by_key(|limit| limit.value)
}

/// The memory the group uses now.
fn memory_usage(group: &Group) -> Option<Read<u64>> {
    let name = match group.version {
        CgroupVersion::V1 => "memory.usage_in_bytes",
        CgroupVersion::V2 => "memory.current",
    };
    let bytes = read_file(&group.dir, name)?.parse().ok()?;
    Some(Read::new(bytes, group.dir.join(name).display().to_string()))
}

/// The I/O throttles of the group and its ancestors, the tightest per device and field, each
/// device named from `/sys/dev/block` under `fs_root`.
fn io_throttles(group: &Group, fs_root: &Path) -> Vec<IoThrottle> {
    let mut tightest = Vec::new();
    for dir in group.lineage() {
        match group.version {
            CgroupVersion::V1 => {
                for field in ["read_bps", "write_bps", "read_iops", "write_iops"] {
                    let path = dir.join(format!("blkio.throttle.{field}_device"));
                    let Ok(text) = std::fs::read_to_string(&path) else {
                        continue;
                    };
                    let mut here = Vec::new();
                    parse_blkio_throttle(&text, field, &path.display().to_string(), &mut here);
                    for throttle in here {
                        keep_tighter(&mut tightest, throttle);
                    }
                }
            }
            CgroupVersion::V2 => {
                let path = dir.join("io.max");
                if let Ok(text) = std::fs::read_to_string(&path) {
                    for throttle in parse_io_max(&text, &path.display().to_string()) {
                        keep_tighter(&mut tightest, throttle);
                    }
                }
            }
        }
    }
    tightest
        .into_iter()
        .map(|mut t| {
            t.throttle.name = block_device_name(fs_root, &t.throttle.device);
            // The files the kept limits came from, in the order of the fields, each once.
            let mut sources: Vec<String> = Vec::new();
            for source in t.sources.into_iter().flatten() {
                if !sources.contains(&source) {
                    sources.push(source);
                }
            }
            t.throttle.source = sources.join(", ");
            t.throttle
        })
        .collect()
}

/// One device's tightest limits so far, and the file each one came from.
struct Tightest {
    throttle: IoThrottle,
    /// The source of `read_bps`, `write_bps`, `read_iops`, `write_iops`.
    sources: [Option<String>; 4],
}

/// The four limits of a throttle, in a fixed order.
fn limits(throttle: &mut IoThrottle) -> [&mut Option<u64>; 4] {
    [
        &mut throttle.read_bps,
        &mut throttle.write_bps,
        &mut throttle.read_iops,
        &mut throttle.write_iops,
    ]
}

/// Adds the limits of `new` (read from one file, `new.source`) to `tightest`: each field keeps
/// the smaller limit and the file it came from.
fn keep_tighter(tightest: &mut Vec<Tightest>, mut new: IoThrottle) {
    let index = match tightest
        .iter()
        .position(|t| t.throttle.device == new.device)
    {
        Some(index) => index,
        None => {
            tightest.push(Tightest {
                throttle: IoThrottle {
                    device: new.device.clone(),
                    ..IoThrottle::default()
                },
                sources: Default::default(),
            });
            tightest.len() - 1
        }
    };
    let kept = &mut tightest[index];
    let source = new.source.clone();
    for (i, (old, new)) in limits(&mut kept.throttle)
        .into_iter()
        .zip(limits(&mut new))
        .enumerate()
    {
        if let Some(value) = *new
            && old.is_none_or(|o| value < o)
        {
            *old = Some(value);
            kept.sources[i] = Some(source.clone());
        }
    }
}

/// The name of the block device `major:minor`: `DEVNAME` of its `uevent`, else the last part
/// of the `/sys/dev/block` link.
fn block_device_name(fs_root: &Path, device: &str) -> Option<String> {
    let link = fs_root.join("sys/dev/block").join(device);
    if let Ok(uevent) = std::fs::read_to_string(link.join("uevent"))
        && let Some(name) = uevent.lines().find_map(|l| l.strip_prefix("DEVNAME="))
    {
        return Some(name.trim().to_string());
    }
    let target = std::fs::read_link(&link).ok()?;
    Some(target.file_name()?.to_string_lossy().into_owned())
}

/// Appends the files of `more` (", "-separated) to `sources`, each once.
fn add_source(sources: &mut String, more: &str) {
    for file in more.split(", ") {
        if !sources.split(", ").any(|s| s == file) {
            if !sources.is_empty() {
                sources.push_str(", ");
            }
            sources.push_str(file);
        }
    }
}

/// Whether `text` is a device number, `major:minor`.
fn is_device(text: &str) -> bool {
    text.split_once(':').is_some_and(|(major, minor)| {
        !major.is_empty()
            && !minor.is_empty()
            && major.bytes().all(|b| b.is_ascii_digit())
            && minor.bytes().all(|b| b.is_ascii_digit())
    })
}

/// The CFS counters of this process's cgroup now (cumulative).
pub(super) fn read_throttling() -> Option<Throttling> {
    let self_cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    read_throttling_at(Path::new("/"), &self_cgroup, &mountinfo)
}

/// [`read_throttling`] with the files under `fs_root`: the `cpu.stat` of the group that sets
/// the quota that binds (the process's own group or an ancestor); `None` when no quota applies.
fn read_throttling_at(fs_root: &Path, self_cgroup: &str, mountinfo: &str) -> Option<Throttling> {
    let groups = find_groups(fs_root, self_cgroup, mountinfo);
    let group = groups.of("cpu")?;
    let (_, dir) = cpu_quota(group)?;
    let path = dir.join("cpu.stat");
    parse_cpu_stat(
        &std::fs::read_to_string(&path).ok()?,
        &path.display().to_string(),
    )
}

/// `cpu.stat`: v1 `nr_periods`, `nr_throttled`, `throttled_time` (ns), or v2 `nr_periods`,
/// `nr_throttled`, `throttled_usec`. `None` without the throttling counters.
fn parse_cpu_stat(text: &str, source: &str) -> Option<Throttling> {
    let mut periods = None;
    let mut throttled_periods = None;
    let mut throttled_s = None;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(' ') else {
            continue;
        };
        let Ok(value) = value.trim().parse::<u64>() else {
            continue;
        };
        match key {
            "nr_periods" => periods = Some(value),
            "nr_throttled" => throttled_periods = Some(value),
            "throttled_time" => throttled_s = Some(value as f64 / 1e9),
            "throttled_usec" => throttled_s = Some(value as f64 / 1e6),
            _ => {}
        }
    }
    Some(Throttling {
        periods: periods?,
        throttled_periods: throttled_periods?,
        throttled_s: throttled_s?,
        source: source.to_string(),
    })
}

/// v2 `cpu.max` ("max 100000" or "50000 100000"): the quota, `None` for no limit.
pub fn parse_cpu_max(text: &str) -> Option<CpuQuota> {
    let mut words = text.split_whitespace();
    let quota_us: u64 = words.next()?.parse().ok()?;
    let period_us: u64 = words.next()?.parse().ok()?;
    (quota_us > 0 && period_us > 0).then_some(CpuQuota {
        quota_us,
        period_us,
    })
}

/// v2 `io.max` lines ("8:0 rbps=1048576 wbps=max riops=max wiops=120"); a device with no
/// limit left is not listed.
pub fn parse_io_max(text: &str, source: &str) -> Vec<IoThrottle> {
    let mut throttles = Vec::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let Some(device) = words.next().filter(|d| is_device(d)) else {
            continue;
        };
        let mut throttle = IoThrottle {
            device: device.to_string(),
            source: source.to_string(),
            ..IoThrottle::default()
        };
        for word in words {
            let Some((key, value)) = word.split_once('=') else {
                continue;
            };
            // "max" is no limit: it does not parse.
            let value = value.parse::<u64>().ok();
            match key {
                "rbps" => throttle.read_bps = value,
                "wbps" => throttle.write_bps = value,
                "riops" => throttle.read_iops = value,
                "wiops" => throttle.write_iops = value,
                _ => {}
            }
        }
        let limited = [
            throttle.read_bps,
            throttle.write_bps,
            throttle.read_iops,
            throttle.write_iops,
        ]
        .iter()
        .any(Option::is_some);
        if limited {
            throttles.push(throttle);
        }
    }
    throttles
}

/// One v1 `blkio.throttle.*_device` file ("8:0 1048576" per line) into `throttles`, as the
/// field `field` (`read_bps`, `write_bps`, `read_iops`, `write_iops`); `source` is added to the
/// device's sources. A 0 (no limit) and an unknown field are skipped.
pub fn parse_blkio_throttle(
    text: &str,
    field: &str,
    source: &str,
    throttles: &mut Vec<IoThrottle>,
) {
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let (Some(device), Some(value)) = (words.next(), words.next()) else {
            continue;
        };
        let Some(value) = value.parse::<u64>().ok().filter(|&v| v > 0) else {
            continue;
        };
        if !is_device(device) {
            continue;
        }
        let index = match throttles.iter().position(|t| t.device == device) {
            Some(index) => index,
            None => {
                throttles.push(IoThrottle {
                    device: device.to_string(),
                    ..IoThrottle::default()
                });
                throttles.len() - 1
            }
        };
        let throttle = &mut throttles[index];
        let slot = match field {
            "read_bps" => &mut throttle.read_bps,
            "write_bps" => &mut throttle.write_bps,
            "read_iops" => &mut throttle.read_iops,
            "write_iops" => &mut throttle.write_iops,
            _ => return,
        };
        *slot = Some(value);
        add_source(&mut throttle.source, source);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory under the system's temporary one, removed when dropped.
    struct FakeRoot(PathBuf);

    impl FakeRoot {
        fn new(name: &str) -> FakeRoot {
            let dir = std::env::temp_dir().join(format!(
                "peakbench-evidence-{name}-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            FakeRoot(dir)
        }

        /// Writes `text` to `path` (relative to the root), making its directories.
        fn write(&self, path: &str, text: &str) {
            let path = self.0.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }

        fn path(&self, path: &str) -> String {
            self.0.join(path).display().to_string()
        }
    }

    impl Drop for FakeRoot {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// The cgroup mounts of the machine this was written on (a cgroup v1 host with the unified
    /// hierarchy beside it), with a mount point holding a space to check the unescaping.
    const MOUNTINFO_V1: &str = "\
22 1 254:0 / / rw,relatime - ext4 /dev/vda rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/mem\\040ory rw,relatime - cgroup cgroup rw,memory
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    const SELF_CGROUP_V1: &str = "\
9:name=systemd:/
7:blkio:/bench/run
4:memory:/bench/run
3:cpuset:/bench
2:cpuacct:/
1:cpu:/bench/run
0::/
";

    fn v1_tree() -> FakeRoot {
        let root = FakeRoot::new("v1");
        let cg = "sys/fs/cgroup";
        // The quota is on the parent (0.5 CPU), the group's own is looser (1.5 CPUs).
        root.write(&format!("{cg}/cpu/cpu.cfs_quota_us"), "-1\n");
        root.write(&format!("{cg}/cpu/cpu.cfs_period_us"), "100000\n");
        root.write(&format!("{cg}/cpu/bench/cpu.cfs_quota_us"), "50000\n");
        root.write(&format!("{cg}/cpu/bench/cpu.cfs_period_us"), "100000\n");
        root.write(
            &format!("{cg}/cpu/bench/cpu.stat"),
            "nr_periods 200\nnr_throttled 40\nthrottled_time 1500000000\nnr_bursts 0\n",
        );
        root.write(&format!("{cg}/cpu/bench/run/cpu.cfs_quota_us"), "150000\n");
        root.write(&format!("{cg}/cpu/bench/run/cpu.cfs_period_us"), "100000\n");
        root.write(
            &format!("{cg}/cpu/bench/run/cpu.stat"),
            "nr_periods 200\nnr_throttled 0\nthrottled_time 0\n",
        );
        root.write(&format!("{cg}/cpuset/bench/cpuset.cpus"), "0-1\n");
        root.write(&format!("{cg}/cpuset/bench/cpuset.effective_cpus"), "1\n");
        root.write(
            &format!("{cg}/mem ory/memory.limit_in_bytes"),
            "9223372036854771712\n",
        );
        root.write(
            &format!("{cg}/mem ory/bench/memory.limit_in_bytes"),
            "1073741824\n",
        );
        root.write(
            &format!("{cg}/mem ory/bench/run/memory.limit_in_bytes"),
            "2147483648\n",
        );
        root.write(
            &format!("{cg}/mem ory/bench/run/memory.usage_in_bytes"),
            "52428800\n",
        );
        root.write(
            &format!("{cg}/blkio/bench/blkio.throttle.read_bps_device"),
            "254:0 10485760\n",
        );
        root.write(
            &format!("{cg}/blkio/bench/run/blkio.throttle.read_bps_device"),
            "254:0 20971520\n",
        );
        root.write(
            &format!("{cg}/blkio/bench/run/blkio.throttle.write_iops_device"),
            "254:0 100\n8:0 200\n",
        );
        root.write(
            "sys/dev/block/254:0/uevent",
            "MAJOR=254\nMINOR=0\nDEVNAME=vda\n",
        );
        root
    }

    #[test]
    fn v1_limits_are_the_tightest_of_the_group_and_its_ancestors() {
        let root = v1_tree();
        let mut evidence = RunEvidence::default();
        let mut unreadable = Vec::new();
        read_limits_at(
            &root.0,
            SELF_CGROUP_V1,
            MOUNTINFO_V1,
            Some(8 << 30),
            &mut evidence,
            &mut unreadable,
        );
        assert_eq!(unreadable, Vec::<String>::new());
        assert_eq!(evidence.cgroup_version, Some(1));
        let cg = "sys/fs/cgroup";

        let quota = evidence.cpu_quota.unwrap();
        assert_eq!(
            quota.value,
            CpuQuota {
                quota_us: 50000,
                period_us: 100000
            }
        );
        assert_eq!(quota.value.cpus(), 0.5);
        assert_eq!(
            quota.source,
            format!(
                "{}, {}",
                root.path(&format!("{cg}/cpu/bench/cpu.cfs_quota_us")),
                root.path(&format!("{cg}/cpu/bench/cpu.cfs_period_us"))
            )
        );

        let cpuset = evidence.cpuset.unwrap();
        assert_eq!(cpuset.value, "1");
        assert_eq!(
            cpuset.source,
            root.path(&format!("{cg}/cpuset/bench/cpuset.effective_cpus"))
        );

        let limit = evidence.memory_limit.unwrap();
        assert_eq!(limit.value, 1 << 30);
        assert_eq!(
            limit.source,
            root.path(&format!("{cg}/mem ory/bench/memory.limit_in_bytes"))
        );
        assert_eq!(evidence.memory_usage.unwrap().value, 50 << 20);

        let read_bps = root.path(&format!("{cg}/blkio/bench/blkio.throttle.read_bps_device"));
        let write_iops = root.path(&format!(
            "{cg}/blkio/bench/run/blkio.throttle.write_iops_device"
        ));
        assert_eq!(
            evidence.io_throttles,
            vec![
                IoThrottle {
                    device: "254:0".into(),
                    name: Some("vda".into()),
                    read_bps: Some(10 << 20),
                    write_iops: Some(100),
                    source: format!("{read_bps}, {write_iops}"),
                    ..IoThrottle::default()
                },
                IoThrottle {
                    device: "8:0".into(),
                    write_iops: Some(200),
                    source: write_iops.clone(),
                    ..IoThrottle::default()
                },
            ]
        );

        // The binding quota is the parent's: its counters are read.
        let throttling = read_throttling_at(&root.0, SELF_CGROUP_V1, MOUNTINFO_V1).unwrap();
        assert_eq!(
            throttling,
            Throttling {
                periods: 200,
                throttled_periods: 40,
                throttled_s: 1.5,
                source: root.path(&format!("{cg}/cpu/bench/cpu.stat")),
            }
        );
    }

    #[test]
    fn a_v1_limit_at_or_above_the_machines_memory_is_none() {
        let root = v1_tree();
        let mut evidence = RunEvidence::default();
        read_limits_at(
            &root.0,
            SELF_CGROUP_V1,
            MOUNTINFO_V1,
            Some(1 << 30),
            &mut evidence,
            &mut Vec::new(),
        );
        assert_eq!(evidence.memory_limit, None);
    }

    #[test]
    fn no_quota_means_no_throttling_counters() {
        let root = FakeRoot::new("noquota");
        root.write("sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n");
        root.write("sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
        root.write(
            "sys/fs/cgroup/cpu/cpu.stat",
            "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n",
        );
        let self_cgroup = "1:cpu:/\n0::/\n";
        let mut evidence = RunEvidence::default();
        read_limits_at(
            &root.0,
            self_cgroup,
            MOUNTINFO_V1,
            None,
            &mut evidence,
            &mut Vec::new(),
        );
        assert_eq!(evidence.cpu_quota, None);
        assert_eq!(read_throttling_at(&root.0, self_cgroup, MOUNTINFO_V1), None);
    }

    /// A cgroup v2 host (systemd's layout); a container's mount of its own subtree beside it
    /// would have another root field.
    const MOUNTINFO_V2: &str = "\
22 1 254:0 / / rw,relatime - ext4 /dev/vda rw
30 23 0:27 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate
";

    fn v2_tree() -> FakeRoot {
        let root = FakeRoot::new("v2");
        let cg = "sys/fs/cgroup";
        root.write(
            &format!("{cg}/cgroup.controllers"),
            "cpuset cpu io memory pids\n",
        );
        root.write(&format!("{cg}/cpuset.cpus.effective"), "0-7\n");
        root.write(&format!("{cg}/bench.slice/cpu.max"), "30000 100000\n");
        root.write(&format!("{cg}/bench.slice/memory.max"), "536870912\n");
        root.write(
            &format!("{cg}/bench.slice/io.max"),
            "254:0 rbps=10485760 wbps=max riops=max wiops=max\n",
        );
        root.write(
            &format!("{cg}/bench.slice/cpu.stat"),
            "usage_usec 100\nnr_periods 10\nnr_throttled 3\nthrottled_usec 25000\n",
        );
        root.write(
            &format!("{cg}/bench.slice/run.scope/cpu.max"),
            "max 100000\n",
        );
        root.write(&format!("{cg}/bench.slice/run.scope/memory.max"), "max\n");
        root.write(
            &format!("{cg}/bench.slice/run.scope/memory.current"),
            "4096\n",
        );
        root.write(
            &format!("{cg}/bench.slice/run.scope/io.max"),
            "254:0 rbps=max wbps=max riops=500 wiops=max\n",
        );
        root.write(
            &format!("{cg}/bench.slice/run.scope/cpu.stat"),
            "usage_usec 50\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n",
        );
        root
    }

    #[test]
    fn v2_limits_are_the_tightest_of_the_group_and_its_ancestors() {
        let root = v2_tree();
        let self_cgroup = "0::/bench.slice/run.scope\n";
        let mut evidence = RunEvidence::default();
        let mut unreadable = Vec::new();
        read_limits_at(
            &root.0,
            self_cgroup,
            MOUNTINFO_V2,
            Some(16 << 30),
            &mut evidence,
            &mut unreadable,
        );
        assert_eq!(unreadable, Vec::<String>::new());
        assert_eq!(evidence.cgroup_version, Some(2));
        let cg = "sys/fs/cgroup";
        let quota = evidence.cpu_quota.unwrap();
        assert_eq!(quota.value.cpus(), 0.3);
        assert_eq!(
            quota.source,
            root.path(&format!("{cg}/bench.slice/cpu.max"))
        );
        // Neither group enables cpuset: the top's CPUs apply.
        let cpuset = evidence.cpuset.unwrap();
        assert_eq!(cpuset.value, "0-7");
        assert_eq!(
            cpuset.source,
            root.path(&format!("{cg}/cpuset.cpus.effective"))
        );
        assert_eq!(evidence.memory_limit.unwrap().value, 512 << 20);
        assert_eq!(evidence.memory_usage.unwrap().value, 4096);
        assert_eq!(
            evidence.io_throttles,
            vec![IoThrottle {
                device: "254:0".into(),
                name: None,
                read_bps: Some(10 << 20),
                read_iops: Some(500),
                source: format!(
                    "{}, {}",
                    root.path(&format!("{cg}/bench.slice/io.max")),
                    root.path(&format!("{cg}/bench.slice/run.scope/io.max"))
                ),
                ..IoThrottle::default()
            }]
        );
        let throttling = read_throttling_at(&root.0, self_cgroup, MOUNTINFO_V2).unwrap();
        assert_eq!(throttling.periods, 10);
        assert_eq!(throttling.throttled_periods, 3);
        assert_eq!(throttling.throttled_s, 0.025);
        assert_eq!(
            throttling.source,
            root.path(&format!("{cg}/bench.slice/cpu.stat"))
        );
    }

    #[test]
    fn a_container_mount_shows_its_own_subtree() {
        // The container's group is /docker/abc on the host; its mount shows that group at
        // /sys/fs/cgroup/cpu.
        let root = FakeRoot::new("container");
        root.write("sys/fs/cgroup/cpu/cpu.cfs_quota_us", "200000\n");
        root.write("sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
        let mountinfo = "700 690 0:29 /docker/abc /sys/fs/cgroup/cpu ro,nosuid - cgroup cgroup rw,cpu,cpuacct\n";
        let mut evidence = RunEvidence::default();
        read_limits_at(
            &root.0,
            "5:cpu,cpuacct:/docker/abc\n",
            mountinfo,
            None,
            &mut evidence,
            &mut Vec::new(),
        );
        assert_eq!(evidence.cpu_quota.unwrap().value.cpus(), 2.0);
    }

    #[test]
    fn no_mounted_hierarchy_is_said() {
        let root = FakeRoot::new("none");
        let mut evidence = RunEvidence::default();
        let mut unreadable = Vec::new();
        read_limits_at(
            &root.0,
            "1:cpu:/x\n0::/\n",
            "",
            None,
            &mut evidence,
            &mut unreadable,
        );
        assert_eq!(evidence.cgroup_version, None);
        assert_eq!(unreadable.len(), 1, "{unreadable:?}");
        assert!(unreadable[0].contains("none of this process's cgroups"));
    }

    #[test]
    fn a_missing_controller_is_said_once() {
        // memory is mounted, cpu is not (nor in /sys/fs/cgroup), misc is not and holds no
        // limit this module reads.
        let root = FakeRoot::new("partial");
        root.write("sys/fs/cgroup/memory/memory.limit_in_bytes", "1048576\n");
        let mountinfo = "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
        let mut evidence = RunEvidence::default();
        let mut unreadable = Vec::new();
        read_limits_at(
            &root.0,
            "12:misc:/\n4:memory:/\n1:cpu:/x\n",
            mountinfo,
            Some(1 << 30),
            &mut evidence,
            &mut unreadable,
        );
        assert_eq!(evidence.cgroup_version, Some(1));
        assert_eq!(evidence.memory_limit.unwrap().value, 1 << 20);
        assert_eq!(
            unreadable,
            ["the cgroup v1 group /x of cpu (/proc/self/cgroup) is not mounted"]
        );
    }

    #[test]
    fn cpu_max() {
        assert_eq!(parse_cpu_max("max 100000\n"), None);
        assert_eq!(
            parse_cpu_max("50000 100000\n"),
            Some(CpuQuota {
                quota_us: 50000,
                period_us: 100000
            })
        );
        assert_eq!(parse_cpu_max(""), None);
        assert_eq!(parse_cpu_max("50000"), None);
        assert_eq!(parse_cpu_max("0 100000"), None);
    }

    #[test]
    fn io_max() {
        let text = "8:0 rbps=1048576 wbps=max riops=max wiops=120\n\
                    8:16 rbps=max wbps=max riops=max wiops=max\n\
                    junk\n";
        assert_eq!(
            parse_io_max(text, "io.max"),
            vec![IoThrottle {
                device: "8:0".into(),
                read_bps: Some(1 << 20),
                write_iops: Some(120),
                source: "io.max".into(),
                ..IoThrottle::default()
            }]
        );
        assert_eq!(parse_io_max("", "io.max"), Vec::new());
    }

    #[test]
    fn blkio_throttle() {
        let mut throttles = Vec::new();
        parse_blkio_throttle("8:0 1048576\n8:16 0\n", "read_bps", "r", &mut throttles);
        parse_blkio_throttle("8:0 300\nbad line\n", "write_iops", "w", &mut throttles);
        parse_blkio_throttle("8:0 5\n", "nonsense", "n", &mut throttles);
        assert_eq!(
            throttles,
            vec![IoThrottle {
                device: "8:0".into(),
                read_bps: Some(1 << 20),
                write_iops: Some(300),
                source: "r, w".into(),
                ..IoThrottle::default()
            }]
        );
    }

    #[test]
    fn cpu_stat_needs_its_throttling_counters() {
        assert_eq!(parse_cpu_stat("usage_usec 5\n", "s"), None);
        let v1 = parse_cpu_stat("nr_periods 3\nnr_throttled 2\nthrottled_time 500\n", "s");
        assert_eq!(v1.unwrap().throttled_s, 5e-7);
    }

    #[test]
    fn mountinfo_escapes_and_meminfo() {
        assert_eq!(unescape_mount_field("/a\\040b\\134c"), "/a b\\c");
        assert_eq!(unescape_mount_field("/plain\\9"), "/plain\\9");
        assert_eq!(
            mem_total("MemTotal:        8130452 kB\nMemFree: 1 kB\n"),
            Some(8130452 * 1024)
        );
        assert_eq!(mem_total("MemFree: 1 kB\n"), None);
    }
}
