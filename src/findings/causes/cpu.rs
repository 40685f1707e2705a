//! CPU time: the quota, the cpuset, other processes, steal; and SMT, the clock, thermal events.
//!
//! A case's threads need `t` CPUs. What they were given is read four ways: the quota allows
//! `quota / period` CPUs to the whole cgroup; the cpuset allows its CPUs; other processes
//! used `others` CPUs of the machine while the case ran, and the hypervisor stole `steal`.
//! Each leaves the threads a share — `q / t`, `allowed / t`, `(cpus − others − steal) / t` —
//! which bounds a CPU-bound case's figure at that share of its peak.

use super::{Candidate, Scene, num};
use crate::evidence::{AllowedCpuTime, OtherProcess};
use crate::result::{Evidence, Subsystem};

/// Under this share of what the threads need, a CPU-time limit holds the figure down.
const HOLDS: f64 = 0.90;

/// Other processes using this many CPUs, or steal of this share of the CPUs, can spread the
/// repetitions of any case.
const NOISY_OTHERS: f64 = 0.10;
const NOISY_STEAL: f64 = 0.02;

/// Whether the case's threads run on their CPUs the whole time (computing or streaming
/// memory), so that CPU time bounds its figure.
fn cpu_bound(s: &Scene) -> bool {
    match s.r.subsystem {
        Subsystem::Cpu => true,
        // A latency is timed on the thread's own CPU time: a thread held off its core does
        // not lengthen it.
        Subsystem::Memory => s.r.op != "latency",
        // The roofline's model is computed, not timed.
        Subsystem::Roofline => s.r.op != "model",
        _ => false,
    }
}

/// Whether the CPU time of other processes says anything about this case: a network case whose
/// server is another process counts that server among the others.
fn others_apply(s: &Scene) -> bool {
    match s.r.subsystem {
        Subsystem::Network => {
            s.r.params
                .other
                .get("in_process_server")
                .and_then(|v| v.as_bool())
                .unwrap_or(false)
        }
        _ => true,
    }
}

/// The CPUs' worth of time the case's threads can use: one each, at most the CPUs there are
/// (the peak counts no more cores than that either).
fn needed(s: &Scene) -> f64 {
    (s.threads() as f64).min(s.cpus())
}

/// The CPUs this process may run on (its affinity), at most those online.
fn allowed(s: &Scene) -> f64 {
    match s.run.affinity.len() {
        0 => s.cpus(),
        n => (n as f64).min(s.cpus()),
    }
}

pub(super) fn causes(s: &Scene, out: &mut Vec<Candidate>) {
    quota(s, out);
    cpuset(s, out);
    others(s, out);
    steal(s, out);
    off_core(s, out);
    smt(s, out);
    clock(s, out);
    clock_moved(s, out);
    governor(s, out);
    wide_clock(s, out);
    thermal(s, out);
}

/// The threads' own count of their time off their cores (the runner reads each thread's CPU
/// clock around its timed span), named only where no quota, cpuset, other process or steal
/// read on the machine already says why: then it is what is left to say.
fn off_core(s: &Scene, out: &mut Vec<Candidate>) {
    const EXPLAINED_BY: [&str; 4] = ["cpu-quota", "cpuset", "other-processes", "steal"];
    let Some(extra) = s.r.extra.iter().find(|e| e.metric == "off_core") else {
        return;
    };
    let share = extra.value / 100.0;
    if share <= crate::runner::OFF_CORE_WARNING
        || out
            .iter()
            .any(|c| EXPLAINED_BY.contains(&c.cause.kind.as_str()))
    {
        return;
    }
    let mut c = Candidate::new(
        "off-core",
        format!(
            "the threads were off their cores {:.0} % of their running time, and nothing read \
             on this machine (quota, cpuset, other processes, steal) took that time: an \
             interrupt storm, the hypervisor's own work, or a process that ended before the \
             case did",
            share * 100.0
        ),
        vec![Evidence::new(
            "each thread's CPU clock against its timed span (the result's off_core extra)",
            format!("median {:.1} % off core", extra.value),
        )],
        "run again on a quiet machine; watch `top -H` and /proc/interrupts during the case",
    )
    .value(extra.value, "%");
    c.factor = Some(1.0 - share);
    c.slows = true;
    c.noisy = true;
    out.push(c);
}

fn quota(s: &Scene, out: &mut Vec<Candidate>) {
    let Some(quota) = s.run.cpu_quota.as_ref() else {
        return;
    };
    let cpus = quota.value.cpus();
    let share = (cpus / needed(s)).min(1.0);
    let throttled = s
        .case
        .throttled
        .as_ref()
        .filter(|t| t.throttled_periods > 0);
    if share >= HOLDS && throttled.is_none() {
        return;
    }
    let mut evidence = vec![Evidence::new(
        quota.source.clone(),
        format!(
            "{} µs per {} µs = {:.2} CPU",
            quota.value.quota_us, quota.value.period_us, cpus
        ),
    )];
    if let Some(t) = throttled {
        evidence.push(Evidence::new(
            t.source.clone(),
            format!(
                "throttled in {} of {} periods while the case ran, {:.2} s held",
                t.throttled_periods, t.periods, t.throttled_s
            ),
        ));
    }
    let window = quota_window(s, quota.value.period_us);
    let ceiling = match window {
        Some((_, slack)) => (share * (1.0 + slack)).min(1.0),
        None => share,
    };
    let bound_text = quota_bound_text(s, share, ceiling, window);
    let mut c = Candidate::new(
        "cpu-quota",
        format!("the cgroup's CPU quota allows {:.2} CPU{bound_text}", cpus),
        evidence,
        "run outside the quota or raise it (cpu.cfs_quota_us, cpu.max), or ask for no more \
         --threads than the CPUs it allows",
    )
    .value(cpus, "CPU");
    if cpu_bound(s) && share < HOLDS {
        c.factor = Some(share);
        c.cause.bound = s.peak().map(|peak| peak * ceiling);
        c.binds = true;
    } else {
        c.slows = true;
    }
    c.noisy = true;
    out.push(c);
}

/// A repetition's length D and the slack a quota counted per period P gives it, P/D.
///
/// A repetition of D seconds overlaps up to D/P + 1 periods, so it can take one period's quota
/// more than its share (a 0.3 s repetition under 15 ms per 50 ms gets up to 0.35 CPU, not
/// 0.30). D is the case's duration, or for a case of fixed work its wall time over its
/// repetitions (which counts the warm-up too, so the slack is, if anything, too small).
fn quota_window(s: &Scene, period_us: u64) -> Option<(f64, f64)> {
    let repetition_s = s.r.params.duration_s.or_else(|| {
        let reps = s.r.samples.len();
        (reps > 0 && s.case.wall_s > 0.0).then(|| s.case.wall_s / reps as f64)
    });
    repetition_s
        .filter(|d| *d > 0.0)
        .map(|d| (d, period_us as f64 / 1e6 / d))
}

/// What the quota leaves a CPU-bound case's threads: its share, and the ceiling one repetition
/// can reach (the share stays what the gap is measured by).
fn quota_bound_text(s: &Scene, share: f64, ceiling: f64, window: Option<(f64, f64)>) -> String {
    if !(cpu_bound(s) && share < 1.0) {
        return String::new();
    }
    let t = s.threads();
    let granularity = match window {
        Some((d, _)) if ceiling > share + 0.005 => format!(
            ", up to {:.2} in one {:.0} ms repetition, which can catch one period's quota more",
            ceiling,
            d * 1e3
        ),
        _ => String::new(),
    };
    format!(
        " for {t} thread{}: at most {:.2} of the time they need{granularity}",
        if t == 1 { "" } else { "s" },
        share
    )
}

fn cpuset(s: &Scene, out: &mut Vec<Candidate>) {
    let allowed = s.run.affinity.len();
    let t = s.threads();
    if allowed == 0 || t <= allowed || !cpu_bound(s) {
        return;
    }
    let share = (allowed as f64 / needed(s)).min(1.0);
    let mut evidence = vec![Evidence::new(
        "sched_getaffinity(2)",
        format!(
            "{allowed} CPU{}: {:?}",
            if allowed == 1 { "" } else { "s" },
            s.run.affinity
        ),
    )];
    if let Some(set) = s.run.cpuset.as_ref() {
        evidence.push(Evidence::new(set.source.clone(), set.value.clone()));
    }
    // In an MPI job the launcher's binding is what narrowed it (peakbench widens mpirun's
    // default one; a binding the user or Slurm's share of the node gave stays).
    let launcher = match s.report.cluster.as_ref() {
        Some(cluster) if cluster.job.is_some() => {
            "; in a Slurm job, give each task its CPUs (--cpus-per-task=N), or the job the \
             whole node (--exclusive)"
        }
        Some(_) => "; in an MPI job, leave out mpirun's --bind-to (or give --bind-to none)",
        None => "",
    };
    let mut c = Candidate::new(
        "cpuset",
        format!(
            "the process may run on {allowed} CPU{} for {t} threads: they take turns, at most \
             {:.2} of the {} CPUs' time the peak counts",
            if allowed == 1 { "" } else { "s" },
            share,
            num(needed(s))
        ),
        evidence,
        &format!(
            "give the process every CPU (cpuset.cpus, taskset) or ask for --threads no more \
             than the CPUs it may use{launcher}"
        ),
    )
    .value(allowed as f64, "CPU");
    c.factor = Some(share);
    c.binds = share < HOLDS;
    c.slows = true;
    c.noisy = true;
    out.push(c);
}

fn others(s: &Scene, out: &mut Vec<Candidate>) {
    let wall = s.case.wall_s;
    if wall <= 0.0 || !others_apply(s) {
        return;
    }
    let others = s.case.others_cpu_s / wall;
    let steal = s.case.steal_s / wall;
    // What others and the hypervisor took on the CPUs this process may run on: read there
    // where the evidence has it; else assumed to go to the CPUs it may not use first, only
    // what is beyond those taken from its threads.
    let allowed = allowed(s);
    let on_allowed = s.case.on_allowed.as_ref().filter(|a| !a.cpus.is_empty());
    let taken = match on_allowed {
        Some(a) => (a.others_cpu_s + a.steal_s) / wall,
        None => (others + steal - (s.cpus() - allowed)).max(0.0),
    };
    // The share others leave of what the threads could have had where they may run (the
    // cpuset's own share is its cause's).
    let share = ((allowed - taken) / needed(s).min(allowed)).clamp(0.0, 1.0);
    let bound = cpu_bound(s) && share < HOLDS && others >= NOISY_OTHERS;
    if !bound && others < NOISY_OTHERS {
        return;
    }
    let evidence = others_evidence(s, on_allowed, others);
    let names = process_names(&s.case.top_others);
    let mut c = Candidate::new(
        "other-processes",
        others_line(s, &names, others, on_allowed, share),
        evidence,
        "stop the other work (the processes named) or run when the machine is idle",
    )
    .value(others, "CPU");
    if bound {
        c.factor = Some(share);
        c.binds = true;
    }
    c.slows = others >= NOISY_OTHERS;
    c.noisy = others >= NOISY_OTHERS;
    out.push(c);
}

/// Where [`others`] read the CPU time of other processes: every CPU, the CPUs this process may
/// run on, and the busiest other processes.
fn others_evidence(s: &Scene, on_allowed: Option<&AllowedCpuTime>, others: f64) -> Vec<Evidence> {
    let wall = s.case.wall_s;
    let mut evidence = vec![Evidence::new(
        "/proc/stat user + nice + system of every CPU, less this process's /proc/self/stat",
        format!(
            "{:.2} CPU-s in {:.2} s = {:.2} CPU",
            s.case.others_cpu_s, wall, others
        ),
    )];
    if let Some(a) = on_allowed {
        evidence.push(Evidence::new(
            format!(
                "/proc/stat user + nice + system of CPU {} (the CPUs it may run on), less this \
                 process's",
                crate::sysinfo::format_cpu_list(&a.cpus)
            ),
            format!(
                "{:.2} CPU-s in {:.2} s = {:.2} CPU, and steal {:.2} CPU",
                a.others_cpu_s,
                wall,
                a.others_cpu_s / wall,
                a.steal_s / wall
            ),
        ));
    }
    for p in &s.case.top_others {
        evidence.push(Evidence::new(
            format!("/proc/{}/stat", p.pid),
            format!("{} used {:.2} CPU-s", p.command, p.cpu_s),
        ));
    }
    evidence
}

/// The other processes' commands, each once, with a count where several share a name:
/// "2 × stress, fio".
fn process_names(top: &[OtherProcess]) -> String {
    let mut names: Vec<(String, usize)> = Vec::new();
    for p in top {
        match names.iter_mut().find(|(name, _)| *name == p.command) {
            Some((_, n)) => *n += 1,
            None => names.push((p.command.clone(), 1)),
        }
    }
    names
        .iter()
        .map(|(name, n)| {
            if *n == 1 {
                name.clone()
            } else {
                format!("{n} × {name}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `other-processes` cause's line.
fn others_line(
    s: &Scene,
    names: &str,
    others: f64,
    on_allowed: Option<&AllowedCpuTime>,
    share: f64,
) -> String {
    let wall = s.case.wall_s;
    let t = s.threads() as f64;
    format!(
        "other processes{} used {:.2} CPU of the {} CPUs while the case ran{}{}",
        if names.is_empty() {
            String::new()
        } else {
            format!(" ({names})")
        },
        others,
        num(s.cpus()),
        match on_allowed {
            Some(a) => format!(
                ", {:.2} of it on the {} it may run on",
                a.others_cpu_s / wall,
                match a.cpus.len() {
                    1 => format!("CPU {}", a.cpus[0]),
                    n => format!("{n} CPUs"),
                }
            ),
            None => String::new(),
        },
        if cpu_bound(s) {
            format!(
                ", leaving its {} thread{} {:.2} of the time they need",
                t,
                if t == 1.0 { "" } else { "s" },
                share
            )
        } else {
            String::new()
        }
    )
}

fn steal(s: &Scene, out: &mut Vec<Candidate>) {
    let wall = s.case.wall_s;
    if wall <= 0.0 {
        return;
    }
    let stolen = s.case.steal_s / wall;
    let share_of_cpus = stolen / s.cpus();
    if share_of_cpus < NOISY_STEAL {
        return;
    }
    let mut c = Candidate::new(
        "steal",
        format!(
            "the hypervisor gave {:.2} CPU of this guest's {} to others while the case ran \
             ({:.0} % of its CPU time)",
            stolen,
            num(s.cpus()),
            share_of_cpus * 100.0
        ),
        vec![Evidence::new(
            "/proc/stat steal of every CPU",
            format!("{:.2} CPU-s in {:.2} s", s.case.steal_s, wall),
        )],
        "run on dedicated (pinned) vCPUs or bare metal; compare runs by alternating them",
    )
    .value(stolen, "CPU");
    if cpu_bound(s) {
        c.factor = Some((1.0 - share_of_cpus).clamp(0.0, 1.0));
    }
    c.slows = true;
    c.noisy = true;
    out.push(c);
}

fn smt(s: &Scene, out: &mut Vec<Candidate>) {
    let cpu = &s.host.cpu;
    let t = s.threads();
    if !cpu.smt || t <= cpu.physical_cores || s.r.subsystem != Subsystem::Cpu {
        return;
    }
    let mut c = Candidate::new(
        "smt",
        format!(
            "{t} threads on {} cores: SMT siblings share each core's execution units",
            cpu.physical_cores
        ),
        vec![Evidence::new(
            "sysinfo: threads per core",
            cpu.threads_per_core.to_string(),
        )],
        "compare with --threads equal to the physical cores",
    )
    .value(cpu.physical_cores as f64, "cores");
    c.slows = true;
    c.structural = true;
    out.push(c);
}

fn clock(s: &Scene, out: &mut Vec<Candidate>) {
    let Some(pair) = s.r.peak.as_ref().and_then(|p| p.pair.as_ref()) else {
        return;
    };
    let (Some(measured), Some(base)) = (pair.measured_ghz, pair.base_ghz.value) else {
        return;
    };
    if measured >= 0.95 * base {
        return;
    }
    let mut c = Candidate::new(
        "clock",
        format!(
            "the core ran at {measured:.2} GHz, under its base clock of {base:.2} GHz (a power \
             cap, a thermal limit, or a governor)"
        ),
        vec![
            Evidence::new(
                "measured: dependent add chain on one core",
                format!("{measured:.3} GHz"),
            ),
            Evidence::new(
                format!("{}: {}", pair.base_ghz.source, pair.base_ghz.detail),
                format!("{base:.3} GHz"),
            ),
        ],
        "check the power profile, cooling and governor ('cpupower frequency-info')",
    )
    .value(measured, "GHz");
    c.factor = Some(measured / base);
    c.slows = true;
    out.push(c);
}

/// Beyond this share between the clock measured right after a case and the clock of its peak,
/// the clock moved between the two.
const CLOCK_MOVED: f64 = 0.03;

/// The clock measured right after the case (its `clock_after` extra) against the clock its
/// peak was computed at (measured once, at the start of the run, unless given): a shared
/// host's boost clock moves from minute to minute, and a figure above its peak, or below it,
/// can be the clock's. The peak's clock is its value over its value at the base clock, times
/// the base clock, whichever clock it was computed at.
fn clock_moved(s: &Scene, out: &mut Vec<Candidate>) {
    let Some(after) = s.r.extra.iter().find(|e| e.metric == "clock_after") else {
        return;
    };
    let Some((peak, pair)) = s.r.peak.as_ref().and_then(|p| Some((p, p.pair.as_ref()?))) else {
        return;
    };
    let Some(peak_clock) = super::model::peak_clock(peak) else {
        return;
    };
    if after.value <= 0.0 {
        return;
    }
    let base = pair.base_ghz.value.unwrap_or(0.0);
    let ratio = after.value / peak_clock;
    if (ratio - 1.0).abs() <= CLOCK_MOVED {
        return;
    }
    let direction = if ratio > 1.0 { "above" } else { "below" };
    let efficiency = s.r.efficiency.unwrap_or(s.r.value / peak.value);
    let at_own = format!(
        "; at {:.2} GHz the figure is {:.2} of its peak",
        after.value,
        efficiency / ratio
    );
    // A clock the user gave (--cpu-ghz) is the peak's clock as it is given; one measured at the
    // start of the run moved since.
    let why = if pair.base_ghz.source == "flag" && (peak_clock - base).abs() < 1e-6 {
        "the cores do not run at the clock --cpu-ghz gave"
    } else {
        "the clock moves on this machine (a shared host's boost clock)"
    };
    let mut c = Candidate::new(
        "clock-moved",
        format!(
            "the core ran at {:.2} GHz right after this case, {:.0} % {direction} the {:.2} GHz \
             its peak was computed at: {why}{at_own}",
            after.value,
            (ratio - 1.0).abs() * 100.0,
            peak_clock
        ),
        vec![
            Evidence::new(
                "measured: dependent add chain on one core, right after the case (the result's \
                 clock_after extra)",
                format!("{:.3} GHz", after.value),
            ),
            Evidence::new(
                "the peak's clock (its value over its value at the base clock, times the base \
                 clock)",
                format!("{peak_clock:.3} GHz"),
            ),
        ],
        "compare figures taken at the same clock: alternate runs and read their medians, or give \
         --cpu-ghz the clock the cores hold",
    )
    .value(after.value, "GHz");
    c.factor = Some(ratio);
    if ratio > 1.0 {
        c.inflates = true;
    } else {
        c.slows = true;
        c.noisy = true;
    }
    out.push(c);
}

fn governor(s: &Scene, out: &mut Vec<Candidate>) {
    let fact = &s.host.cpu.governor;
    let Some(governor) = fact.value.as_deref().filter(|g| *g != "performance") else {
        return;
    };
    if s.r.subsystem != Subsystem::Cpu {
        return;
    }
    let mut c = Candidate::new(
        "governor",
        format!("the CPU frequency governor is '{governor}': the clock follows the load"),
        vec![Evidence::new(
            fact.source.clone().unwrap_or_else(|| "cpufreq".into()),
            governor.to_string(),
        )],
        "set the 'performance' governor: cpupower frequency-set -g performance",
    );
    c.slows = true;
    c.structural = true;
    c.noisy = true;
    out.push(c);
}

/// Below this share of the 256-bit kernel's efficiency, a 512-bit kernel runs at a lower clock.
const WIDE_CLOCK: f64 = 0.90;

/// The AVX-512 clock drop: a 512-bit kernel that reaches a smaller share of its peak than the
/// 256-bit kernel of the same precision, form and threads in the same run ran at a lower clock
/// (the peaks count one clock for both, unless the probe measured the core's AVX-512 licence:
/// then the 512-bit peak stands on it already, and this names a drop deeper than that one).
fn wide_clock(s: &Scene, out: &mut Vec<Candidate>) {
    let p = &s.r.params;
    if s.r.subsystem != Subsystem::Cpu || p.isa.as_deref() != Some("avx512") {
        return;
    }
    let Some(wide) = s.r.efficiency else {
        return;
    };
    let narrow = s.report.results.iter().find(|r| {
        r.op == s.r.op
            && r.host == s.r.host
            && r.params.isa.as_deref() == Some("avx2")
            && r.params.precision == p.precision
            && r.params.fma == p.fma
            && r.params.threads == p.threads
    });
    let Some((narrow, narrow_eff)) = narrow.and_then(|r| Some((r, r.efficiency?))) else {
        return;
    };
    if narrow_eff <= 0.0 || wide >= WIDE_CLOCK * narrow_eff {
        return;
    }
    let ratio = wide / narrow_eff;
    let mut c = Candidate::new(
        "avx512-clock",
        format!(
            "the 512-bit kernel reaches {:.2} of its peak where the 256-bit one reaches {:.2}: \
             the cores run AVX-512 at about {:.0} % of the clock they run AVX2 at",
            wide,
            narrow_eff,
            ratio * 100.0
        ),
        vec![Evidence::new(
            format!(
                "the run's {} {}",
                narrow.op,
                crate::report::cells::describe_params(&narrow.params)
            ),
            format!("{:.2} of its peak", narrow_eff),
        )],
        "expect AVX-512 code to run at the lower licence clock on this CPU; compare with --isa \
         avx2",
    )
    .value(ratio, "×");
    c.factor = Some(ratio);
    c.slows = true;
    out.push(c);
}

fn thermal(s: &Scene, out: &mut Vec<Candidate>) {
    let Some(events) = s.case.thermal_events.filter(|e| *e > 0) else {
        return;
    };
    let mut c = Candidate::new(
        "thermal-throttle",
        format!("the CPUs were thermally throttled {events} times while the case ran"),
        vec![Evidence::new(
            "/sys/devices/system/cpu/cpu*/thermal_throttle/*_throttle_count",
            format!("+{events}"),
        )],
        "check the cooling and the power limits; let the machine cool between runs",
    )
    .value(events as f64, "events");
    c.slows = true;
    c.noisy = true;
    out.push(c);
}
