//! CPU time from `/proc`: every CPU's (`/proc/stat`), this process's and every other process's
//! (`/proc/PID/stat`), and the CPUs this process may use.
//!
//! `/proc` counts CPU time in clock ticks (`sysconf(_SC_CLK_TCK)`, 100 per second on every
//! common kernel), so every time here is good to about 10 ms: enough to tell a case that shared
//! its CPUs from one that did not, not to time anything.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read as _;

use super::{OtherProcess, Read};

pub(crate) use crate::sysinfo::parse_cpu_list;

/// A process counts in [`top_others`] when it used more than this share of one CPU.
const OTHER_MIN_SHARE: f64 = 0.05;

/// [`top_others`] names at most this many processes.
const OTHER_MAX: usize = 3;

/// The CPU time counters of `/proc/stat`'s `cpu` line, seconds, summed over CPUs.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct CpuTimes {
    /// Time in user mode (guest time included, as the kernel counts it).
    pub user_s: f64,
    /// Time in user mode at a positive nice value.
    pub nice_s: f64,
    /// Time in the kernel on behalf of processes (interrupt time is apart).
    pub system_s: f64,
    /// Time the hypervisor ran something else while this guest's CPUs wanted to run.
    pub steal_s: f64,
}

impl CpuTimes {
    /// Time the CPUs ran processes: user + nice + system.
    pub(crate) fn busy_s(&self) -> f64 {
        self.user_s + self.nice_s + self.system_s
    }
}

/// One process's CPU time and name.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ProcessTimes {
    /// `comm`, as the kernel holds it (up to 15 bytes, not escaped).
    pub command: String,
    /// The parent's pid (field 4), to leave out this process's own children.
    pub parent: u32,
    /// When the process started, clock ticks after boot (field 22): a pid that now names
    /// another process has another start.
    pub started: u64,
    /// utime + stime (+ cutime + cstime when read with children), seconds.
    pub cpu_s: f64,
}

/// Clock ticks per second of the counters of `/proc/stat` and `/proc/PID/stat`.
fn ticks_per_second() -> f64 {
    // SAFETY: sysconf reads a constant of the C library; it takes no pointer.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

/// `/proc/stat`: the counters of its first line, `cpu  user nice system idle iowait irq softirq
/// steal …` (ticks, summed over CPUs), in seconds. `None` when there is no such line or it is
/// cut short; a kernel without the steal column (before 2.6.11) reads as no steal.
pub(crate) fn parse_proc_stat(text: &str) -> Option<CpuTimes> {
    text.lines()
        .find_map(|l| l.strip_prefix("cpu "))
        .and_then(cpu_times)
}

/// `/proc/stat`: the sum of the `cpuN` lines of `cpus` (`None` if one is missing or cut short).
pub(super) fn parse_proc_stat_of(text: &str, cpus: &[usize]) -> Option<CpuTimes> {
    let mut sum = CpuTimes::default();
    for cpu in cpus {
        let name = format!("cpu{cpu} ");
        let t = text
            .lines()
            .find_map(|l| l.strip_prefix(&name))
            .and_then(cpu_times)?;
        sum.user_s += t.user_s;
        sum.nice_s += t.nice_s;
        sum.system_s += t.system_s;
        sum.steal_s += t.steal_s;
    }
    Some(sum)
}

/// The times of one `/proc/stat` line after its name, in clock ticks.
fn cpu_times(fields: &str) -> Option<CpuTimes> {
    let ticks: Vec<u64> = fields
        .split_whitespace()
        .map_while(|w| w.parse().ok())
        .collect();
    if ticks.len() < 4 {
        return None;
    }
    let per_second = ticks_per_second();
    let seconds = |i: usize| ticks.get(i).copied().unwrap_or(0) as f64 / per_second;
    Some(CpuTimes {
        user_s: seconds(0),
        nice_s: seconds(1),
        system_s: seconds(2),
        steal_s: seconds(7),
    })
}

/// `/proc/PID/stat`: the command and utime + stime (+ cutime + cstime with `children`).
///
/// The command sits in parentheses and may itself hold spaces and parentheses, so the fields
/// are counted from the *last* `)`: after it come state (field 3), ppid (4), … utime (14),
/// stime (15), cutime (16), cstime (17), … starttime (22).
pub(crate) fn parse_pid_stat(text: &str, children: bool) -> Option<ProcessTimes> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    if close < open {
        return None;
    }
    let command = text[open + 1..close].to_string();
    let fields: Vec<&str> = text[close + 1..].split_whitespace().collect();
    // fields[0] is field 3 (state): field n is fields[n - 3].
    let field = |n: usize| -> Option<u64> { fields.get(n - 3)?.parse().ok() };
    let parent = u32::try_from(field(4)?).ok()?;
    let started = field(22)?;
    // Saturating: garbled numbers must not overflow.
    let mut ticks = field(14)?.saturating_add(field(15)?);
    if children {
        // cutime and cstime are signed in the kernel's format; a negative one reads as absent.
        ticks = ticks
            .saturating_add(field(16).unwrap_or(0))
            .saturating_add(field(17).unwrap_or(0));
    }
    Some(ProcessTimes {
        command,
        parent,
        started,
        cpu_s: ticks as f64 / ticks_per_second(),
    })
}

/// Every CPU's counters now (`/proc/stat`), and the sum of those of `cpus`.
pub(super) fn read_cpu_times(cpus: &[usize]) -> (Option<CpuTimes>, Option<CpuTimes>) {
    match std::fs::read_to_string("/proc/stat") {
        Ok(text) => (parse_proc_stat(&text), parse_proc_stat_of(&text, cpus)),
        Err(_) => (None, None),
    }
}

/// This process's own CPU time and that of the children it waited for, seconds, apart.
pub(super) fn read_own_cpu_s() -> Option<(f64, f64)> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    let own = parse_pid_stat(&text, false)?.cpu_s;
    let with_children = parse_pid_stat(&text, true)?.cpu_s;
    Some((own, (with_children - own).max(0.0)))
}

/// Every process but this one, by pid: the others, and this process's descendants apart.
#[derive(Default)]
pub(super) struct Processes {
    pub others: BTreeMap<u32, ProcessTimes>,
    pub family: BTreeMap<u32, ProcessTimes>,
}

/// The CPU time this process's descendants used between two readings: the difference of
/// each one alive at both (all of a new one's), plus what the children reaped meanwhile used
/// after the first reading — the rise of `cutime + cstime` (`children_s`) less the time they
/// had used before it. A descendant's own reaped children are not seen (they land among the
/// others' time).
pub(super) fn family_cpu_s(before: &Processes, after: &Processes, children_s: f64) -> f64 {
    let mut total = 0.0;
    for (pid, now) in &after.family {
        let earlier = before
            .family
            .get(pid)
            .filter(|b| b.started == now.started)
            .map_or(0.0, |b| b.cpu_s);
        total += (now.cpu_s - earlier).max(0.0);
    }
    let own = std::process::id();
    let reaped_before: f64 = before
        .family
        .iter()
        .filter(|(pid, p)| p.parent == own && !after.family.contains_key(pid))
        .map(|(_, p)| p.cpu_s)
        .sum();
    total + (children_s - reaped_before).max(0.0)
}

/// Every other process's CPU time now, by pid: every numeric entry of `/proc` but this process
/// and its descendants (their time is this process's own once it waits for them).
///
/// Children are not added (`cutime`): a process's reaped children would otherwise bring all
/// their past time into the window at once. A process that starts and ends inside a window is
/// therefore not named, though its time is in [`super::CaseEvidence::others_cpu_s`]. A process
/// that ends while it is being read is skipped.
pub(super) fn read_processes() -> Processes {
    let own = std::process::id();
    let mut processes = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Processes::default();
    };
    let mut text = String::with_capacity(512);
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == own {
            continue;
        }
        text.clear();
        let Ok(mut file) = std::fs::File::open(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if file.read_to_string(&mut text).is_err() {
            continue;
        }
        if let Some(times) = parse_pid_stat(&text, false) {
            processes.insert(pid, times);
        }
    }
    split_descendants(processes, own)
}

/// `processes` split into the others and the descendants of `root` (children, their
/// children, …).
fn split_descendants(mut processes: BTreeMap<u32, ProcessTimes>, root: u32) -> Processes {
    let mut family = BTreeSet::from([root]);
    // Each pass adds the children of the family found so far; a pid tree is a few levels deep.
    loop {
        let found: Vec<u32> = processes
            .iter()
            .filter(|(pid, p)| family.contains(&p.parent) && !family.contains(pid))
            .map(|(&pid, _)| pid)
            .collect();
        if found.is_empty() {
            break;
        }
        family.extend(found);
    }
    let (family, others) = std::mem::take(&mut processes)
        .into_iter()
        .partition(|(pid, _)| family.contains(pid));
    Processes { others, family }
}

/// The other processes that used the most CPU time between `before` and `after`: each one's
/// difference (all of its time when it is new in `after`, or when its pid now names a process
/// started at another time), those over 5 % of one CPU over `wall_s`, at most 3, largest
/// first. The start time tells a reused pid, not the command: a kernel worker renames itself
/// after the work it does (`kworker/u8:1-events_unbound`, then `kworker/u8:1-writeback`).
pub(super) fn top_others(
    before: &BTreeMap<u32, ProcessTimes>,
    after: &BTreeMap<u32, ProcessTimes>,
    wall_s: f64,
) -> Vec<OtherProcess> {
    let floor = OTHER_MIN_SHARE * wall_s.max(0.0);
    let mut others: Vec<OtherProcess> = after
        .iter()
        .map(|(&pid, now)| {
            let earlier = before
                .get(&pid)
                .filter(|b| b.started == now.started)
                .map_or(0.0, |b| b.cpu_s);
            OtherProcess {
                pid,
                command: crate::text::printable(&now.command),
                cpu_s: to_microseconds((now.cpu_s - earlier).max(0.0)),
            }
        })
        .filter(|o| o.cpu_s > floor && o.cpu_s > 0.0)
        .collect();
    others.sort_by(|a, b| b.cpu_s.total_cmp(&a.cpu_s).then(a.pid.cmp(&b.pid)));
    others.truncate(OTHER_MAX);
    others
}

/// `seconds` rounded to the microsecond: the counters are sums of 10 ms ticks, and the
/// difference of two such sums would otherwise be stored as `0.48999999999898136`.
pub(super) fn to_microseconds(seconds: f64) -> f64 {
    (seconds * 1e6).round() / 1e6
}

/// Thermal throttle events of the CPUs so far: `core_throttle_count` summed over CPUs, plus
/// `package_throttle_count` once per package (every CPU of a package repeats its count).
/// `None` where the kernel has no such counter (AMD, most virtual machines).
pub(super) fn read_thermal_events() -> Option<u64> {
    let entries = std::fs::read_dir("/sys/devices/system/cpu").ok()?;
    let mut found = false;
    let mut events = 0u64;
    let mut packages = BTreeSet::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(number) = name.to_str().and_then(|n| n.strip_prefix("cpu")) else {
            continue;
        };
        if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let dir = entry.path();
        let count = |file: &str| -> Option<u64> {
            read_trimmed(&dir.join("thermal_throttle").join(file).to_string_lossy())?
                .parse()
                .ok()
        };
        if let Some(core) = count("core_throttle_count") {
            found = true;
            events = events.saturating_add(core);
        }
        if let Some(package) = count("package_throttle_count") {
            found = true;
            let id = read_trimmed(&dir.join("topology/physical_package_id").to_string_lossy());
            // A CPU whose package is unknown counts on its own.
            if packages.insert(id.unwrap_or_else(|| format!("cpu{number}"))) {
                events = events.saturating_add(package);
            }
        }
    }
    found.then_some(events)
}

/// The CPUs this process was bound to before [`widen_affinity`] widened it; empty if it never
/// did.
static NARROWED_AT_LAUNCH: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();

/// Widens the calling thread's affinity (and so that of the threads and processes it starts
/// later) to every CPU its cpuset allows: the kernel intersects a mask of all CPUs with the
/// cpuset. Returns the CPUs it was bound to before, when they were fewer; `None` when it was
/// not narrower or the kernel refused.
#[cfg(any(feature = "mpi", test))]
pub(crate) fn widen_affinity() -> Option<Vec<usize>> {
    let before = affinity();
    // SAFETY: cpu_set_t is plain data; every bit set names a CPU below CPU_SETSIZE.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for cpu in 0..libc::CPU_SETSIZE as usize {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 || affinity().len() <= before.len() {
        return None;
    }
    let _ = NARROWED_AT_LAUNCH.set(before.clone());
    Some(before)
}

/// The CPUs this process was bound to before [`widen_affinity`] widened it (empty: it was not).
pub(super) fn narrowed_at_launch() -> Vec<usize> {
    NARROWED_AT_LAUNCH.get().cloned().unwrap_or_default()
}

/// The CPUs `sched_getaffinity` allows this process, in order; empty when it fails.
pub(super) fn affinity() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data, zero is a valid value; sched_getaffinity writes at most
    // size_of::<cpu_set_t>() bytes into it, and CPU_ISSET reads it for indexes below
    // CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&cpu| libc::CPU_ISSET(cpu, &set))
            .collect()
    }
}

/// Logical CPUs online: `/sys/devices/system/cpu/online` ("0-3,8,10-11"), or the C library's
/// count of online processors where sysfs is not mounted.
pub(crate) fn cpus_online() -> usize {
    if let Some(text) = read_trimmed("/sys/devices/system/cpu/online") {
        let cpus = parse_cpu_list(&text);
        if !cpus.is_empty() {
            return cpus.len();
        }
    }
    // SAFETY: sysconf reads a value of the C library; it takes no pointer.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(online).unwrap_or(0)
}

/// Transparent huge pages: the bracketed word of
/// `/sys/kernel/mm/transparent_hugepage/enabled` ("always [madvise] never" → `madvise`).
pub(super) fn read_thp() -> Option<Read<String>> {
    const PATH: &str = "/sys/kernel/mm/transparent_hugepage/enabled";
    Some(Read::new(bracketed(&read_trimmed(PATH)?)?, PATH))
}

/// The word in brackets of a sysfs choice ("none [mq-deadline] kyber" → `mq-deadline`).
pub(super) fn bracketed(text: &str) -> Option<String> {
    let start = text.find('[')?;
    let end = start + text[start..].find(']')?;
    let word = text[start + 1..end].trim();
    (!word.is_empty()).then(|| word.to_string())
}

/// A small file's content without the surrounding white space; `None` when it cannot be read
/// or is empty.
pub(super) fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/proc/stat` of the machine this was written on (2 vCPUs under KVM), cut in its `intr` line.
    const PROC_STAT: &str = "\
cpu  1679386 459 186014 614076 10986 0 20852 8723 0 0
cpu0 805020 244 110278 326213 3480 0 10204 4292 0 0
cpu1 874366 215 75735 287862 7505 0 10648 4430 0 0
intr 27248663 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 1 10 0 0 0 0 2528 841
";

    #[test]
    fn proc_stat_reads_the_all_cpus_line() {
        let t = parse_proc_stat(PROC_STAT).unwrap();
        let hz = ticks_per_second();
        assert_eq!(t.user_s, 1679386.0 / hz);
        assert_eq!(t.nice_s, 459.0 / hz);
        assert_eq!(t.system_s, 186014.0 / hz);
        assert_eq!(t.steal_s, 8723.0 / hz);
        assert_eq!(t.busy_s(), (1679386.0 + 459.0 + 186014.0) / hz);
    }

    #[test]
    fn proc_stat_of_some_cpus_sums_their_lines() {
        let hz = ticks_per_second();
        let one = parse_proc_stat_of(PROC_STAT, &[1]).unwrap();
        assert_eq!(one.busy_s(), (874366.0 + 215.0 + 75735.0) / hz);
        assert_eq!(one.steal_s, 4430.0 / hz);
        let both = parse_proc_stat_of(PROC_STAT, &[0, 1]).unwrap();
        assert_eq!(
            both.busy_s(),
            (805020.0 + 244.0 + 110278.0 + 874366.0 + 215.0 + 75735.0) / hz
        );
        // cpu1 is not cpu10; a CPU without a line is none.
        assert_eq!(parse_proc_stat_of(PROC_STAT, &[2]), None);
    }

    #[test]
    fn proc_stat_without_a_cpu_line_or_cut_short_is_none() {
        assert_eq!(parse_proc_stat("intr 1 2 3\n"), None);
        assert_eq!(parse_proc_stat("cpu  1 2\n"), None);
        assert_eq!(parse_proc_stat(""), None);
        // An old kernel without steal: no steal.
        let old = parse_proc_stat("cpu  10 0 5 100 0 0 0\n").unwrap();
        assert_eq!(old.steal_s, 0.0);
    }

    #[test]
    fn pid_stat_splits_at_the_last_parenthesis() {
        // A comm with spaces and parentheses, as a process may name itself (prctl PR_SET_NAME).
        let text = "4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 \
                    250 50 30 20 20 0 1 0 100 1000 10 18446744073709551615 0 0 0 0 0 0 0 0 0 0 \
                    0 0 17 1 0 0 0 0 0\n";
        let hz = ticks_per_second();
        let alone = parse_pid_stat(text, false).unwrap();
        assert_eq!(alone.command, "a) b (c)");
        assert_eq!(alone.parent, 1);
        assert_eq!(alone.started, 100);
        assert_eq!(alone.cpu_s, 300.0 / hz);
        let with_children = parse_pid_stat(text, true).unwrap();
        assert_eq!(with_children.cpu_s, 350.0 / hz);
    }

    #[test]
    fn pid_stat_cut_short_or_garbled_is_none() {
        assert_eq!(parse_pid_stat("", false), None);
        assert_eq!(parse_pid_stat("12 (x) S 1 2 3", false), None);
        assert_eq!(parse_pid_stat("12 )x( S 1 2 3", false), None);
    }

    fn times(command: &str, parent: u32, cpu_s: f64) -> ProcessTimes {
        ProcessTimes {
            command: command.to_string(),
            parent,
            started: 7,
            cpu_s,
        }
    }

    #[test]
    fn top_others_keeps_three_over_five_percent_largest_first() {
        let before = BTreeMap::from([
            (10, times("idle", 1, 5.0)),
            (11, times("busy", 1, 1.0)),
            (12, times("half", 1, 2.0)),
            (13, times("little", 1, 0.0)),
            (14, times("reused", 1, 100.0)),
            (15, times("kworker/0:1-events", 1, 0.0)),
        ]);
        let after = BTreeMap::from([
            (10, times("idle", 1, 5.0)),
            (11, times("busy", 1, 3.0)),
            (12, times("half", 1, 3.0)),
            (13, times("little", 1, 0.04)),
            (
                14,
                ProcessTimes {
                    started: 9,
                    ..times("reused", 1, 0.5)
                },
            ),
            (15, times("kworker/0:1-mm", 1, 0.05)),
            (20, times("new\u{1b}[31m", 1, 1.5)),
        ]);
        let top = top_others(&before, &after, 2.0);
        let shown: Vec<(u32, &str, f64)> = top
            .iter()
            .map(|o| (o.pid, o.command.as_str(), o.cpu_s))
            .collect();
        // 5 % of one CPU over 2 s is 0.1 s: "little" and the renamed kernel worker are under
        // it, "idle" did nothing; the pid 14 names a process started later, so all of its
        // time counts (0.5 s, fourth).
        assert_eq!(
            shown,
            vec![
                (11, "busy", 2.0),
                (20, "new\\u{1b}[31m", 1.5),
                (12, "half", 1.0),
            ]
        );
        assert_eq!(top_others(&before, &before, 2.0), Vec::new());
    }

    #[test]
    fn descendants_are_left_out() {
        let processes = BTreeMap::from([
            (1, times("init", 0, 1.0)),
            (50, times("child", 42, 1.0)),
            (51, times("grandchild", 50, 1.0)),
            (60, times("stranger", 1, 1.0)),
        ]);
        let split = split_descendants(processes, 42);
        assert_eq!(
            split.others.keys().copied().collect::<Vec<_>>(),
            vec![1, 60]
        );
        assert_eq!(
            split.family.keys().copied().collect::<Vec<_>>(),
            vec![50, 51]
        );
    }

    #[test]
    fn named_commands_hold_no_control_character() {
        let before = BTreeMap::new();
        let after = BTreeMap::from([(7, times("a\u{1b}]0;x\u{7}\u{202e}b", 1, 1.0))]);
        let named = top_others(&before, &after, 1.0);
        assert_eq!(named[0].command, "a\\u{1b}]0;x\\u{7}\\u{202e}b");
        assert!(!named[0].command.chars().any(char::is_control));
    }

    #[test]
    fn bracketed_words() {
        assert_eq!(
            bracketed("always [madvise] never").as_deref(),
            Some("madvise")
        );
        assert_eq!(bracketed("[none] mq-deadline").as_deref(), Some("none"));
        assert_eq!(bracketed("none"), None);
        assert_eq!(bracketed("[]"), None);
    }

    #[test]
    fn this_machine_has_cpus_and_this_process_runs_on_some() {
        assert!(cpus_online() >= 1);
        let allowed = affinity();
        assert!(!allowed.is_empty());
        // (The CPUs' own lines need not add up to the all-CPU line to the tick: the kernel
        // rounds each to ticks apart.)
        let (all, mine) = read_cpu_times(&allowed);
        assert!(all.is_some() && mine.is_some());
        assert!(read_own_cpu_s().is_some());
        let now = read_processes();
        assert!(!now.others.contains_key(&std::process::id()));
        assert!(!now.family.contains_key(&std::process::id()));
    }
}
