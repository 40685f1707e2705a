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
pub(crate) enum CgroupVersion {
    V1,
    V2,
}

impl CgroupVersion {
    /// The number the results document stores (`cgroup_version`).
    pub(crate) fn number(self) -> u8 {
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
struct CgroupDir {
    version: CgroupVersion,
    dir: PathBuf,
    top: PathBuf,
}

impl CgroupDir {
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
    v1: std::collections::BTreeMap<String, CgroupDir>,
    /// The unified hierarchy's group, when it is mounted.
    v2: Option<CgroupDir>,
    /// Why the v1 group of a controller named in `/proc/self/cgroup` could not be found, by
    /// controller.
    missing_v1: std::collections::BTreeMap<String, String>,
    /// Why the v2 group named in `/proc/self/cgroup` could not be found.
    missing_v2: Option<String>,
}

impl Groups {
    /// The group to read `controller` from (`cpu`, `cpuset`, `memory`, `blkio`): its v1 group
    /// when that controller is mounted as v1, else the unified group.
    fn of(&self, controller: &str) -> Option<&CgroupDir> {
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
) -> Option<CgroupDir> {
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
    Some(CgroupDir { version, dir, top })
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
fn cpu_quota(group: &CgroupDir) -> Option<(Read<CpuQuota>, PathBuf)> {
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
fn cpuset(group: &CgroupDir) -> Option<Read<String>> {
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

/// The files of a memory group's limit and usage.
fn memory_files(version: CgroupVersion) -> (&'static str, &'static str) {
    match version {
        CgroupVersion::V1 => ("memory.limit_in_bytes", "memory.usage_in_bytes"),
        CgroupVersion::V2 => ("memory.max", "memory.current"),
    }
}

/// The memory limits of the group and its ancestors that bind, each with its directory: those
/// below the machine's memory (a limit above it never binds).
fn binding_memory_limits(group: &CgroupDir, mem_total: Option<u64>) -> Vec<(PathBuf, u64)> {
    let (name, _) = memory_files(group.version);
    let ceiling = mem_total.unwrap_or(NO_MEMORY_LIMIT).min(NO_MEMORY_LIMIT);
    group
        .lineage()
        .into_iter()
        .filter_map(|dir| {
            // v2 writes "max" for no limit: it does not parse.
            let bytes: u64 = read_file(&dir, name)?.parse().ok()?;
            (bytes < ceiling).then_some((dir, bytes))
        })
        .collect()
}

/// The tightest memory limit over the group and its ancestors, when below the machine's
/// memory.
fn memory_limit(group: &CgroupDir, mem_total: Option<u64>) -> Option<Read<u64>> {
    let (name, _) = memory_files(group.version);
    binding_memory_limits(group, mem_total)
        .into_iter()
        .min_by_key(|(_, bytes)| *bytes)
        .map(|(dir, bytes)| Read::new(bytes, dir.join(name).display().to_string()))
}

/// The memory the group uses now.
fn memory_usage(group: &CgroupDir) -> Option<Read<u64>> {
    let (_, name) = memory_files(group.version);
    let bytes = read_file(&group.dir, name)?.parse().ok()?;
    Some(Read::new(bytes, group.dir.join(name).display().to_string()))
}

/// What the group may still take: the least, over the group and its ancestors that have a
/// binding limit, of that limit less that group's usage. An ancestor's usage holds its
/// descendants', so it is at least this group's, which stands in where the ancestor's cannot
/// be read. Usage counts page cache the kernel could reclaim, so this errs low.
fn memory_headroom(group: &CgroupDir, mem_total: Option<u64>) -> Option<Read<u64>> {
    let (limit_name, usage_name) = memory_files(group.version);
    let own = memory_usage(group).map_or(0, |u| u.value);
    binding_memory_limits(group, mem_total)
        .into_iter()
        .map(|(dir, limit)| {
            let used = read_file(&dir, usage_name)
                .and_then(|u| u.parse().ok())
                .unwrap_or(0)
                .max(own);
            Read::new(
                limit.saturating_sub(used),
                format!(
                    "the memory cgroup's limit {} ({}) less the {} it uses",
                    dir.join(limit_name).display(),
                    crate::units::format_size_approx(limit),
                    crate::units::format_size_approx(used)
                ),
            )
        })
        .min_by_key(|headroom| headroom.value)
}

/// [`memory_headroom`] of this process's memory group; `None` where no limit binds or the
/// group cannot be found.
pub(super) fn read_memory_headroom() -> Option<Read<u64>> {
    let self_cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mem_total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| mem_total(&m));
    let groups = find_groups(Path::new("/"), &self_cgroup, &mountinfo);
    memory_headroom(groups.of("memory")?, mem_total)
}

/// The I/O throttles of the group and its ancestors, the tightest per device and field, each
/// device named from `/sys/dev/block` under `fs_root`.
fn io_throttles(group: &CgroupDir, fs_root: &Path) -> Vec<IoThrottle> {
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
pub(crate) fn parse_cpu_max(text: &str) -> Option<CpuQuota> {
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
pub(crate) fn parse_io_max(text: &str, source: &str) -> Vec<IoThrottle> {
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
pub(crate) fn parse_blkio_throttle(
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
mod tests;
