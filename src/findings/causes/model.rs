//! The model of the machine checked against what its kernels measured.
//!
//! Every CPU peak is cores × clock × the pipes of the microarchitecture table. A kernel cannot
//! run faster than the pipes it uses allow, so a kernel above its peak proves the model wrong
//! (too few pipes in the table, or a clock too low), not the hardware above its limit. And
//! where every kernel of a run reads the same fraction of its peak, or every kernel at N
//! threads does the same fraction of N times its one-thread rate, the factor the kernels
//! share (the clock, the core count) is off, not each kernel.

use super::{Candidate, Scene};
use crate::peak::PeakRef;
use crate::result::{BenchResult, Cause, Evidence, Expectation, Report, Subsystem};

/// A kernel this much above its peak at its own clock proves the model wrong.
pub(super) const ABOVE_MODEL: f64 = 1.03;

/// Kernels whose fractions of their peaks lie within this share of each other share a factor.
const SAME_FRACTION: f64 = 0.03;

/// Below this fraction of their peaks, kernels that share a fraction are all short.
const SHORT: f64 = 0.90;

/// Whether `r` is a CPU throughput kernel (`cpu` flops, iops, dot products, tiles), whose peak
/// is the model's product alone.
fn kernel(r: &BenchResult) -> bool {
    r.subsystem == Subsystem::Cpu
        && matches!(
            r.op.as_str(),
            "flops" | "iops" | "dot-flops" | "dot-iops" | "tile-flops" | "tile-iops"
        )
}

/// The clock a peak stands on, GHz: the one it records (`used_ghz`), else its value over its
/// value at the base clock, times the base clock (documents written before it was recorded).
pub(in crate::findings) fn peak_clock(peak: &PeakRef) -> Option<f64> {
    let pair = peak.pair.as_ref()?;
    if let Some(ghz) = pair.used_ghz.as_ref().and_then(|f| f.value) {
        return (ghz > 0.0).then_some(ghz);
    }
    let (at_base, base) = (pair.at_base?, pair.base_ghz.value?);
    (at_base > 0.0).then(|| base * peak.value / at_base)
}

/// The clock the peak of `r` was computed at, and the clock measured right after it, when both
/// are known.
fn clocks(r: &BenchResult) -> Option<(f64, f64)> {
    let peak_ghz = peak_clock(r.peak.as_ref()?)?;
    let after = r.extra.iter().find(|e| e.metric == "clock_after")?.value;
    (after > 0.0).then_some((peak_ghz, after))
}

/// Every clock read right after a case on `r`'s host, each as a multiple of the clock of that
/// case's own peak (so a reading after a licensed kernel scales a licensed peak and a reading
/// after plain work the clock at rest), with the case that read it.
///
/// The peaks stand on one reading at the start of the run, and a shared host's boost clock moves
/// from second to second: on a 2-vCPU Sapphire Rapids-class guest twelve readings a second apart
/// spread from 3.56 to 3.87 GHz, and a quick run's 1-thread i32 AVX-512 add kernel read 124
/// GIOP/s, 1.03 of its peak at the run's first 3.74 GHz and 1.05 at the 3.66 read right after
/// it, which is 2 per cycle at 3.88 GHz, the top of that spread. A reading right after a case
/// is one moment of that clock, and which moment a case ran at is not known: a verdict holds
/// only where it holds at every clock the run saw.
fn clock_scales<'a>(
    report: &'a Report,
    r: &'a BenchResult,
) -> impl Iterator<Item = (f64, &'a BenchResult)> + 'a {
    // Only a peak that stands on the core's clock moves with it: not a DRAM peak of channels ×
    // transfers, a disk's rating or a loopback bound.
    let on_the_clock = r.peak.as_ref().and_then(peak_clock).is_some();
    readings(report, &r.host)
        .filter(move |_| on_the_clock)
        .map(|(scale, q, _)| (scale, q))
}

/// Each case on `host` with a clock read right after it: that reading over the clock of the
/// case's own peak, the case, and the reading in GHz.
fn readings<'a>(
    report: &'a Report,
    host: &'a str,
) -> impl Iterator<Item = (f64, &'a BenchResult, f64)> + 'a {
    report
        .results
        .iter()
        .filter(move |q| q.host == host)
        .filter_map(|q| clocks(q).map(|(peak_clock, after)| (after / peak_clock, q, after)))
}

/// The fastest the cores were seen to run during the run ([`clock_scales`]), where that is above
/// the clock `r`'s peak stands on: the pipes of any case could do that much more.
pub(in crate::findings) fn fastest_clock<'a>(
    report: &'a Report,
    r: &'a BenchResult,
) -> Option<(f64, &'a BenchResult)> {
    clock_scales(report, r)
        .filter(|(scale, _)| *scale > 1.0)
        .max_by(|a, b| a.0.total_cmp(&b.0))
}

/// The share of its peak a result reads at the fastest clock of its run ([`fastest_clock`]),
/// where that clock is above the one its peak was computed at: a boost clock that rose during
/// the run raised the hardware's limit with it. CPU kernels and bandwidths held in a cache read
/// the clock after them; their peaks are the core's cycles.
pub(in crate::findings) fn at_fastest_clock(report: &Report, r: &BenchResult) -> Option<f64> {
    let peak = r.peak.as_ref().filter(|p| p.value > 0.0)?;
    let (scale, _) = fastest_clock(report, r)?;
    Some(r.value / peak.value / scale)
}

/// The share of its peak a result reads at the clock read right after it, where that clock is
/// below the one its peak was computed at: the best estimate of the clock the case ran at, so a
/// figure is below its band only where it is below it there too. Only its own reading: another
/// case's lower clock says nothing of the clock this one ran at, and a figure that is short at
/// every clock it could have run at is what "below" must mean.
pub(in crate::findings) fn at_own_lower_clock(r: &BenchResult) -> Option<f64> {
    let peak = r.peak.as_ref().filter(|p| p.value > 0.0)?;
    let (peak_clock, after) = clocks(r)?;
    (after < peak_clock).then(|| r.value / peak.value * peak_clock / after)
}

/// Beyond this share either way of the clock the peaks stand on, the run's clock moved enough to
/// be named for the run: the spread of the reading itself on a quiet core is well under it.
const CLOCK_SPREAD: f64 = 0.03;

/// The clock read right after the run's cases, on its own host, spread more than
/// [`CLOCK_SPREAD`] from the clock its peaks stand on: a figure on the core's clock was judged
/// above its peak only at the fastest reading ([`fastest_clock`]) and below its band only at its
/// own reading where that fell ([`at_own_lower_clock`]), and the efficiencies, at the one clock
/// of the peaks, carry that spread.
pub(super) fn clock_spread(report: &Report) -> Option<Cause> {
    let readings: Vec<(f64, &BenchResult, f64)> = readings(report, &report.host.hostname).collect();
    let low = readings.iter().min_by(|a, b| a.0.total_cmp(&b.0))?;
    let high = readings.iter().max_by(|a, b| a.0.total_cmp(&b.0))?;
    if 1.0 - low.0 <= CLOCK_SPREAD && high.0 - 1.0 <= CLOCK_SPREAD {
        return None;
    }
    let percent = |scale: f64| format!("{:+.0} %", (scale - 1.0) * 100.0);
    Some(Cause {
        kind: "clock-spread".into(),
        value: Some(high.0 / low.0 - 1.0),
        unit: "of the clock".into(),
        text: format!(
            "the core's clock, read right after each of {} cases, ran from {} to {} of the clock \
             their peaks stand on (a shared host's boost clock): a figure on the core's clock is \
             above its peak only at the fastest of these readings, below its band only at its \
             own where that fell, and its efficiency, at the peak's one clock, carries the spread",
            readings.len(),
            percent(low.0),
            percent(high.0)
        ),
        evidence: [low, high]
            .iter()
            .map(|(scale, q, after)| {
                Evidence::new(
                    format!("clock right after {} (its clock_after extra)", q.id),
                    format!("{after:.3} GHz, {scale:.3} × its peak's clock"),
                )
            })
            .collect(),
        bound: None,
        explains: None,
        remedy: "compare runs by alternating them and reading medians, or give --cpu-ghz the \
                 clock the cores hold"
            .into(),
    })
}

/// A kernel above its peak at the fastest clock its run saw: the model is wrong.
pub(super) fn model_wrong(s: &Scene, out: &mut Vec<Candidate>) {
    let r = s.r;
    let Some(peak) = r.peak.as_ref().filter(|p| p.value > 0.0 && kernel(r)) else {
        return;
    };
    let fastest = fastest_clock(s.report, r);
    let own = r.value / peak.value / fastest.map_or(1.0, |(scale, _)| scale);
    if own <= ABOVE_MODEL {
        return;
    }
    let at = fastest
        .zip(peak_clock(peak))
        .map(|((scale, q), ghz)| {
            let after = if q.id == r.id {
                "right after it".to_string()
            } else {
                format!("right after {}", q.id)
            };
            format!(
                " at {:.2} GHz, the fastest clock the run saw ({after})",
                ghz * scale
            )
        })
        .unwrap_or_default();
    let mut c = Candidate::new(
        "model-wrong",
        format!(
            "the kernel reads {own:.2} of its peak{at}: no kernel runs faster than its pipes \
             allow, so the model of this machine is wrong (the table's pipe count for this core, \
             or the clock), not the hardware above its limit"
        ),
        vec![Evidence::new(
            "the peak and its factors",
            peak.source.clone(),
        )],
        "give the core's unit count (--fma-units, --int-units) or its clock (--cpu-ghz), and \
         report 'peakbench sysinfo --json' with this run so that the table is corrected",
    )
    .value(own, "of the peak");
    c.inflates = true;
    out.push(c);
}

/// "3.9 GHz (measured)", or "unknown (why)".
fn short(factor: &crate::peak::Factor, unit: &str) -> String {
    match factor.value {
        Some(v) => format!("{v:.4} {unit}, {}", factor.source).replacen(".0000 ", " ", 1),
        None => format!("unknown: {}", factor.detail),
    }
}

/// The run's CPU kernels, each with its fraction of its peak at its own clock.
fn fractions(report: &Report) -> Vec<(&BenchResult, f64)> {
    report
        .results
        .iter()
        .filter(|r| kernel(r))
        .filter_map(|r| {
            let peak = r.peak.as_ref().filter(|p| p.value > 0.0)?;
            let own = match clocks(r) {
                Some((peak_clock, after)) => r.value / peak.value * peak_clock / after,
                None => r.value / peak.value,
            };
            Some((r, own))
        })
        .collect()
}

/// Every CPU kernel of the run short of its peak by the same fraction: the clock or the core
/// count the peaks share is off (a clock probe 6 × too high read every kernel at 0.31).
pub(super) fn shared_fraction(report: &Report) -> Option<Cause> {
    let all = fractions(report);
    if all.len() < 3 {
        return None;
    }
    let lo = all.iter().map(|(_, f)| *f).fold(f64::INFINITY, f64::min);
    let hi = all.iter().map(|(_, f)| *f).fold(0.0, f64::max);
    if hi >= SHORT || hi / lo - 1.0 > SAME_FRACTION {
        return None;
    }
    let factors = &report.peaks.cpu.factors;
    let clock = factors.effective_clock();
    Some(Cause {
        kind: "shared-factor".into(),
        value: Some((lo + hi) / 2.0),
        unit: "of the peak".into(),
        text: format!(
            "all {} CPU kernels read {lo:.2}-{hi:.2} of their peaks: one factor every peak \
             shares is off, not each kernel: the clock ({}) or the cores ({})",
            all.len(),
            short(clock, "GHz"),
            short(&factors.cores, "cores")
        ),
        evidence: all
            .iter()
            .take(6)
            .map(|(r, f)| Evidence::new(r.id.clone(), format!("{f:.3} of its peak")))
            .collect(),
        bound: None,
        explains: None,
        remedy: "check the clock against an independent reading (bench/clock.c) and give \
                 --cpu-ghz, or the physical cores with --cores"
            .into(),
    })
}

/// At N threads every kernel does the same share, about half, of N times its one-thread rate:
/// the N CPUs are SMT siblings of N/2 cores (a hypervisor that shows each vCPU as a core), or
/// a host that shares its cores. Half the peak at N threads is then the hardware's, not a
/// shortfall.
pub(super) fn shared_cores(report: &Report) -> Option<Cause> {
    shared_cores_at(report).map(|(cause, _)| cause)
}

/// [`shared_cores`] with the thread count its kernels ran at.
fn shared_cores_at(report: &Report) -> Option<(Cause, usize)> {
    let one: Vec<&BenchResult> = report
        .results
        .iter()
        .filter(|r| kernel(r) && r.params.threads == Some(1))
        .collect();
    let mut scaling: Vec<(String, usize, f64)> = Vec::new();
    for r in report.results.iter().filter(|r| kernel(r)) {
        let Some(n) = r.params.threads.filter(|&n| n > 1) else {
            continue;
        };
        let Some(single) = one.iter().find(|o| {
            o.op == r.op
                && o.params.precision == r.params.precision
                && o.params.isa == r.params.isa
                && o.params.fma == r.params.fma
        }) else {
            continue;
        };
        if single.value > 0.0 {
            scaling.push((r.id.clone(), n, r.value / (n as f64 * single.value)));
        }
    }
    if scaling.len() < 3 {
        return None;
    }
    let mut shares: Vec<f64> = scaling.iter().map(|s| s.2).collect();
    shares.sort_by(f64::total_cmp);
    let median = shares[shares.len() / 2];
    // Most kernels near a half: SMT siblings, not a noisy neighbour on one kernel. Kernels
    // that leave ports idle (add and multiply without FMA) scale further on SMT siblings, so
    // two thirds near a half suffice.
    let near = shares.iter().filter(|s| (0.40..=0.62).contains(*s)).count();
    if !(0.40..=0.62).contains(&median) || near * 3 < shares.len() * 2 {
        return None;
    }
    let n = scaling[0].1;
    Some((
        Cause {
            kind: "shared-cores".into(),
            value: Some(median),
            unit: "of N × 1 thread".into(),
            text: format!(
                "at {n} threads the kernels do {median:.2} (median of {}) of {n} × their one-thread \
             rate: the {n} CPUs do the work of about {} (SMT siblings the hypervisor shows \
             as cores, or cores the host shares), so their peak at {n} threads is about half \
             the one computed",
                scaling.len(),
                cores(n as f64 * median),
            ),
            evidence: scaling
                .iter()
                .take(6)
                .map(|(id, n, s)| Evidence::new(id.clone(), format!("{s:.3} of {n} × 1 thread")))
                .collect(),
            bound: None,
            explains: None,
            remedy:
                "give --cores the physical cores (the host's lscpu), or ask for dedicated cores \
                 with their SMT siblings"
                    .into(),
        },
        n,
    ))
}

/// "1 core", "8 cores": the cores a number of CPUs' work amounts to, rounded.
fn cores(work: f64) -> String {
    let n = work.round();
    if n == 1.0 {
        "1 core".to_string()
    } else {
        format!("{n} cores")
    }
}

/// The flags whose values a peak can stand on: a peak whose source names one is the user's
/// rating, not the model's.
const RATING_FLAGS: &[&str] = &[
    "--disk-",
    "--mem-mts",
    "--mem-channels",
    "--nic-gbps",
    "--cpu-ghz",
    "--fma-units",
    "--int-units",
    "--cores",
];

/// A result above its physics' ceiling, whatever its subsystem: the peak it passed is wrong.
/// Where the peak stands on a flag the user gave, the rating is (`rating-wrong`); otherwise the
/// model is (`model-wrong`, with the peak's factors). No figure passes the hardware's limit,
/// so neither ever reads "above what the hardware can do".
pub(in crate::findings) fn above_peak(r: &BenchResult, physics: &Expectation) -> Cause {
    let flags: Vec<&str> = RATING_FLAGS
        .iter()
        .copied()
        .filter(|f| physics.source.contains(f))
        .collect();
    let top = physics.band.map_or(1.0, |b| b[1]);
    let what = match physics.class.as_deref() {
        Some("cache-latency" | "far-latency") => format!(
            "the load took {:.2} of the time the table allows as its shortest (faster than the \
             level can be)",
            1.0 / physics.ratio
        ),
        _ => format!(
            "{} {} is {:.2} of the peak, over the {top:.2} no honest figure passes",
            crate::units::format_value(r.value),
            r.unit,
            physics.ratio
        ),
    };
    let (kind, text, remedy) = if flags.is_empty() {
        (
            "model-wrong",
            format!(
                "{what}: the hardware cannot beat its own limit, so the model of this machine \
                 is wrong (a factor of the peak: the table's row for this core, the clock, the \
                 level the working set was held in, or the bytes the kernel is counted with), \
                 not the hardware above its limit"
            ),
            "report 'peakbench sysinfo --json' with this run so that the table is corrected; \
             meanwhile give the factor with its flag (--cpu-ghz, --fma-units, --mem-mts …)",
        )
    } else {
        (
            "rating-wrong",
            format!(
                "{what}: the peak stands on the rating given with {}, and the hardware did more, \
                 so the rating is wrong (or a cache the rating leaves out served the work)",
                flags.join(" and ")
            ),
            "give the device's real rating (its datasheet's figure at this block size and \
             queue depth), or leave the flag out",
        )
    };
    Cause {
        kind: kind.into(),
        value: Some(physics.ratio),
        unit: "of the peak".into(),
        text,
        evidence: vec![Evidence::new(
            "the peak and its factors",
            physics.source.clone(),
        )],
        bound: None,
        explains: None,
        remedy: remedy.into(),
    }
}

/// A result at N threads of a run whose kernels at N threads did about half their scaling
/// ([`shared_cores`]): the case's threads shared the cores the kernels shared. It applies to
/// what runs on a core's own units, the kernels (CPU, Linpack and GEMM) and the private caches
/// (L1 and L2, whose ports SMT siblings share), not to the shared L3 or memory. It needs no
/// CPU-time condition: on a 16-vCPU guest whose all-thread kernels did 0.49 of their scaling,
/// the threads that sat on a core alone finished first and waited, so the kernels' threads had
/// 0.56-0.58 of their CPU time.
pub(super) fn shared_cores_case(s: &Scene, out: &mut Vec<Candidate>) {
    let r = s.r;
    let n = s.threads();
    let own_units = matches!(r.subsystem, Subsystem::Cpu)
        || matches!(
            r.params.other.get("cache_level").and_then(|v| v.as_str()),
            Some("L1" | "L2")
        );
    if n < 2 || !own_units {
        return;
    }
    let Some((run, at)) = shared_cores_at(s.report) else {
        return;
    };
    let Some(share) = run.value.filter(|_| at == n) else {
        return;
    };
    let mut c = Candidate::new(
        "shared-cores",
        format!(
            "the run's kernels at {n} threads did {share:.2} of {n} × their one-thread rate: \
             its {n} CPUs do the work of about {}, and this case's threads shared them as \
             the kernels' did (SMT siblings the hypervisor shows as cores, or cores the host \
             shares)",
            cores(n as f64 * share)
        ),
        run.evidence.clone(),
        &run.remedy,
    )
    .value(share, "of N × 1 thread");
    c.factor = Some(share.clamp(0.0, 1.0));
    c.slows = true;
    out.push(c);
}

/// At most this share of N × its one-thread rate, with its threads on the CPU, an N-thread
/// kernel did one core's work: its CPUs were SMT siblings of fewer cores for that case.
const ONE_CORE_SHARE: f64 = 0.62;

/// Its threads had at least this share of their CPU time (the rest is start-up and the watch).
const FULL_CPU: f64 = 0.85;

/// An N-thread kernel that ran at about its one-thread rate while its threads had their CPUs to
/// themselves (their CPU time all there, no steal, no other process): the vCPUs sat on SMT
/// siblings of one host core for that case. Execution units are per core, so that is what the
/// hardware gives two threads there. A hypervisor can move vCPUs onto siblings for a while (a
/// Zen 5 guest's 2-thread f64 AVX2 FMA kernel read 63.8 GFLOP/s, its one-thread rate, with
/// 2.35 CPU-seconds in 1.28 s and no steal, while the cases beside it scaled 2 ×): a placement,
/// not a shortfall of the hardware and not a wrong core count.
pub(super) fn sibling_placement(s: &Scene, out: &mut Vec<Candidate>) {
    let r = s.r;
    let n = s.threads();
    if !kernel(r) || n < 2 || s.case.wall_s <= 0.0 {
        return;
    }
    let Some(single) = s.report.results.iter().find(|o| {
        kernel(o)
            && o.params.threads == Some(1)
            && o.host == r.host
            && o.op == r.op
            && o.params.precision == r.params.precision
            && o.params.isa == r.params.isa
            && o.params.fma == r.params.fma
    }) else {
        return;
    };
    if single.value <= 0.0 {
        return;
    }
    let share = r.value / (n as f64 * single.value);
    let cpu = s.case.own_cpu_s / (n as f64 * s.case.wall_s);
    let stolen = s.case.steal_s / s.case.wall_s;
    let others = s.case.others_cpu_s / s.case.wall_s;
    if share > ONE_CORE_SHARE || cpu < FULL_CPU || stolen > 0.05 || others > 0.10 {
        return;
    }
    let cores = (n as f64 * share).round().max(1.0);
    let mut c = Candidate::new(
        "sibling-placement",
        format!(
            "the {n} threads did {share:.2} of {n} × the one-thread rate ({} against {} {}) \
             with their CPUs to themselves ({:.2} CPU-seconds in {:.2} s, {:.2} CPU stolen, \
             {:.2} CPU to other processes): for this case their vCPUs sat on SMT siblings of \
             {} host core{} (execution units are per core), a placement the hypervisor chose, \
             not a shortfall of the hardware",
            crate::units::format_value(r.value),
            crate::units::format_value(single.value),
            r.unit,
            s.case.own_cpu_s,
            s.case.wall_s,
            stolen,
            others,
            cores,
            if cores == 1.0 { "" } else { "s" },
        ),
        vec![
            Evidence::new(single.id.clone(), crate::units::format_value(single.value)),
            Evidence::new(
                "the case's CPU time",
                format!("{:.2} CPU-s in {:.2} s", s.case.own_cpu_s, s.case.wall_s),
            ),
        ],
        "re-run the case: a guest's vCPUs move between host cores; `peakbench mem c2c` beside \
         it reads a sibling pair as a round trip of a few nanoseconds; dedicated (pinned) vCPUs \
         keep them apart",
    )
    .value(share, "of N × 1 thread");
    c.factor = Some((cores / n as f64).clamp(0.0, 1.0));
    c.slows = true;
    c.noisy = true;
    out.push(c);
}
