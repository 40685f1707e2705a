//! `peakbench mem c2c`: the core-to-core latency matrix, a cache line's round trip between
//! every pair of the CPUs this process may use, with the topology it shows beside the
//! kernel's and CPUID's, and `core-to-core-latency` beside it with `--reference`.
//!
//! How a round trip is driven and counted, and how groups and cores are read off the matrix,
//! is in [`crate::sysinfo::c2c`], where the placement probe other commands call lives too.
//!
//! **Time.** One case measures the whole matrix once per repetition (3 by default: the cores
//! count needs siblings in 3 of 3). Each pair gets `--budget` / (repetitions × pairs), at most
//! 20 ms and at least 2 ms: 16 CPUs (120 pairs) take about 7 s, 2 CPUs a fraction of a second.
//! Past `--max-pairs` pairs (1024: 46 CPUs) the pairs are sampled, each CPU with its two
//! neighbours in the list, the CPU half the list away (where enumerations put SMT siblings)
//! and random partners up to the limit, and the output says so.

mod case;
mod reference;

use std::time::Duration;

use anyhow::Result;

use super::args::C2cArgs;
use crate::error::usage;
use crate::plan::{Context, Plan};
use crate::rng::Rng;
use crate::workload::Benchmark;
use case::C2cCase;

/// `peakbench mem c2c`.
pub(crate) struct MemC2c;

/// A pair's time per repetition, at most and at least.
const PAIR_TIME_MAX: Duration = Duration::from_millis(20);
const PAIR_TIME_MIN: Duration = Duration::from_millis(2);

impl Benchmark for MemC2c {
    const NAME: &'static str = "mem-c2c";
    const PATH: &'static [&'static str] = &["mem", "c2c"];
    const ABOUT: &'static str = "Core-to-core latency: a cache line's round trip between every pair of CPUs, and the topology it shows";
    type Args = C2cArgs;

    fn plan(args: &C2cArgs, ctx: &Context) -> Result<Plan> {
        let allowed = crate::sysinfo::affinity::allowed_cpus();
        let cpus = match args.cpus.as_ref().map(|c| &c.0) {
            Some(asked) => {
                if let Some(cpu) = asked.iter().find(|c| !allowed.contains(c)) {
                    return Err(usage(format!(
                        "--cpus: CPU {cpu} is not one this process may use ({}): give CPUs of that list",
                        crate::sysinfo::format_cpu_list(&allowed)
                    )));
                }
                asked.clone()
            }
            None => allowed,
        };
        if cpus.len() < 2 {
            return Err(usage(
                "--cpus: this process may use only one CPU: a matrix needs two (widen its affinity or cpuset)",
            ));
        }
        if let Some(path) = &args.svg {
            crate::options::check_svg_path(path, "c2c.svg")?;
        }
        let max = usize::try_from(args.max_pairs).unwrap_or(usize::MAX);
        let (pairs, sampled) = choose_pairs(&cpus, max);
        let reps = ctx.runner.repetitions.max(1) as usize;
        let pair_time = pair_time(args.budget, reps, pairs.len());
        let mut notes = Vec::new();
        if let Some(how) = &sampled {
            notes.push(how.clone());
        }
        let case = C2cCase {
            mode: args.mode,
            cpus: cpus.clone(),
            pairs,
            sampled,
            pair_time,
            svg: args.svg.clone(),
        };
        let config = serde_json::json!({
            "mode": args.mode,
            "cpus": crate::sysinfo::format_cpu_list(&cpus),
            "budget_s": args.budget.as_secs_f64(),
            "pair_time_s": pair_time.as_secs_f64(),
            "max_pairs": args.max_pairs,
        });
        Ok(Plan::new(vec![Box::new(case)], notes, config)?.with_summary(case::summary))
    }
}

/// Each pair's time per repetition: the budget split between all pairs of all repetitions,
/// within [`PAIR_TIME_MIN`] and [`PAIR_TIME_MAX`].
fn pair_time(budget: Duration, repetitions: usize, pairs: usize) -> Duration {
    let share = budget.as_secs_f64() / (repetitions.max(1) * pairs.max(1)) as f64;
    Duration::from_secs_f64(share).clamp(PAIR_TIME_MIN, PAIR_TIME_MAX)
}

/// Every pair of `cpus` (the lower CPU first), or, past `max`, a sample: each CPU with the
/// next in the list and the one half the list away, then random pairs up to `max`. Returns the
/// pairs, sorted, and how they were sampled (none when all were kept).
pub(crate) fn choose_pairs(cpus: &[usize], max: usize) -> (Vec<[usize; 2]>, Option<String>) {
    let n = cpus.len();
    let all = n * (n - 1) / 2;
    if all <= max {
        let mut pairs = Vec::with_capacity(all);
        for (i, &a) in cpus.iter().enumerate() {
            pairs.extend(cpus[i + 1..].iter().map(|&b| [a, b]));
        }
        return (pairs, None);
    }
    let mut chosen = std::collections::BTreeSet::new();
    let ordered = |i: usize, j: usize| [cpus[i.min(j)], cpus[i.max(j)]];
    for i in 0..n {
        for j in [(i + 1) % n, (i + n / 2) % n] {
            if j != i && chosen.len() < max {
                chosen.insert(ordered(i, j));
            }
        }
    }
    let mut rng = Rng::new(0xc2c0_5eed);
    while chosen.len() < max {
        let (i, j) = (rng.index(n), rng.index(n));
        if i != j {
            chosen.insert(ordered(i, j));
        }
    }
    let how = format!(
        "{n} CPUs have {all} pairs, more than --max-pairs {max}: {} sampled (each CPU with the \
         next in the list and the one half the list away, then random pairs); a group the \
         sample misses is not inferred",
        chosen.len()
    );
    (chosen.into_iter().collect(), Some(how))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Case;
    use crate::sysinfo::c2c::C2cMode;
    use crate::workload::plan_for;

    #[test]
    fn pairs_past_the_limit_are_sampled_and_said_to_be() {
        let cpus: Vec<usize> = (0..256).collect();
        let (all, none) = choose_pairs(&cpus[..16], 1024);
        assert_eq!((all.len(), none), (120, None));
        let (some, how) = choose_pairs(&cpus, 1024);
        assert_eq!(some.len(), 1024);
        assert!(
            some.contains(&[0, 1]) && some.contains(&[0, 128]),
            "neighbours and halves"
        );
        assert!(some.iter().all(|p| p[0] < p[1]));
        assert!(how.unwrap().contains("32640 pairs"));
    }

    #[test]
    fn bad_cpus_and_svg_paths_are_refused_naming_the_flag() {
        let ctx = Context::fixture();
        for (argv, flag) in [
            (vec!["c2c", "--cpus", "0,100000"], "--cpus"),
            (vec!["c2c", "--svg", "/nonexistent-dir/x.svg"], "--svg"),
        ] {
            let e = plan_for::<MemC2c>(&argv, &ctx).err().unwrap().to_string();
            assert!(e.starts_with(flag), "{argv:?}: {e}");
        }
    }

    /// 16 CPUs in under 10 s and 256 CPUs in about the budget, by the case's own estimate
    /// (thread start and calibration included), with the default budget and repetitions.
    #[test]
    fn the_default_budget_scales_from_16_to_256_cpus() {
        let ctx = Context::fixture();
        for (n, most) in [(16usize, 10.0), (256, 14.0)] {
            let cpus: Vec<usize> = (0..n).collect();
            let (pairs, sampled) = choose_pairs(&cpus, 1024);
            let case = C2cCase {
                mode: C2cMode::Cas,
                pair_time: pair_time(Duration::from_secs(10), 3, pairs.len()),
                cpus,
                pairs,
                sampled,
                svg: None,
            };
            let estimate = case.estimate(&ctx).as_secs_f64();
            assert!(estimate < most, "{n} CPUs: {estimate} s");
        }
    }

    #[test]
    fn the_budget_sets_each_pairs_time_within_its_bounds() {
        let ctx = Context::fixture();
        let plan = plan_for::<MemC2c>(&["c2c", "--budget", "1h"], &ctx).unwrap();
        assert_eq!(plan.config["pair_time_s"], 0.02);
        assert_eq!(plan.config["mode"], C2cMode::Cas.name());
    }
}
