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

/// The v1 tree read as a machine with 8 GiB: every file is readable.
fn read_v1_tree() -> (FakeRoot, RunEvidence) {
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
    (root, evidence)
}

#[test]
fn v1_limits_are_the_tightest_of_the_group_and_its_ancestors() {
    let (root, evidence) = read_v1_tree();
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
}

/// What a group may still take is the least, over the binding limits, of each limit less its
/// own group's usage: an ancestor's limit is charged with everything under it, not only with
/// this group's usage.
#[test]
fn the_memory_headroom_is_the_least_binding_limit_less_its_groups_usage() {
    let root = v1_tree();
    let groups = find_groups(&root.0, SELF_CGROUP_V1, MOUNTINFO_V1);
    let group = groups.of("memory").unwrap();
    // bench's own usage is unread: the group's 50 MiB stands in under bench's 1 GiB.
    let headroom = memory_headroom(group, Some(8 << 30)).unwrap();
    assert_eq!(headroom.value, (1 << 30) - (50 << 20));
    let limit = root.path("sys/fs/cgroup/mem ory/bench/memory.limit_in_bytes");
    assert!(headroom.source.contains(&limit), "{}", headroom.source);
    // bench's other groups use 900 MiB beside this one's 50.
    root.write(
        "sys/fs/cgroup/mem ory/bench/memory.usage_in_bytes",
        &format!("{}\n", 950u64 << 20),
    );
    let headroom = memory_headroom(group, Some(8 << 30)).unwrap();
    assert_eq!(headroom.value, 74 << 20);
    // A machine with less memory than every limit: none binds.
    assert_eq!(memory_headroom(group, Some(512 << 20)), None);
}

#[test]
fn v1_io_throttles_are_the_tightest_per_device_and_the_binding_quotas_counters_are_read() {
    let (root, evidence) = read_v1_tree();
    let cg = "sys/fs/cgroup";
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
    let mountinfo =
        "700 690 0:29 /docker/abc /sys/fs/cgroup/cpu ro,nosuid - cgroup cgroup rw,cpu,cpuacct\n";
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
