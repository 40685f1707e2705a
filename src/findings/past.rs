//! The past: the same case on the same hardware in the history, and whether this run differs
//! from it by more than its repetitions' noise.
//!
//! Hardware is the same when its [`Fingerprint`] is, the rule the baselines of `peakbench
//! check` use too (`sysinfo/fingerprint.rs` says which fields and why). Repetitions of the
//! earlier runs are pooled and compared with this run's by a two-sided Mann–Whitney U test:
//! below the past only when the test rejects at p < 0.05 *and* the median is below 0.90 of the
//! past's (a difference that is both real and large enough to matter).

use crate::options::DbArgs;
use crate::result::{Against, BenchResult, Expectation, Report, Test, Verdict, higher_is_better};
use crate::sysinfo::Fingerprint;
use crate::units::format_value;

/// An earlier run of the same hardware, from the history.
#[derive(Clone, Debug)]
pub(crate) struct PastRun {
    /// Its id in the history.
    pub id: i64,
    pub report: Report,
}

/// How many earlier runs the past is read from.
pub(crate) const PAST_RUNS: usize = 20;

/// How many stored runs are opened to find them (newest first).
const SCANNED: usize = 60;

/// Significance level of the test.
pub(crate) const ALPHA: f64 = 0.05;

/// Below this share of the past's median (with a significant test) is below the past.
pub(crate) const PAST_BAND: f64 = 0.90;

/// The earlier runs in the history at `db` of the hardware `report` was measured on, newest
/// first, at most [`PAST_RUNS`], among those stored before `before` (its own id, when it is
/// stored). A history that cannot be read has no past: judging never fails on it.
pub(crate) fn past_runs(db: &DbArgs, report: &Report, before: Option<i64>) -> Vec<PastRun> {
    let Ok(path) = crate::history::db_path(db) else {
        return Vec::new();
    };
    if !path.is_file() {
        return Vec::new();
    }
    let Ok(store) = crate::history::store::Store::open(&path, false) else {
        return Vec::new();
    };
    let Ok(ids) = store.recent(before, SCANNED) else {
        return Vec::new();
    };
    let mine = Fingerprint::of(&report.host);
    ids.into_iter()
        .filter_map(|id| store.load(id).ok().map(|report| PastRun { id, report }))
        .filter(|run| {
            Fingerprint::of(&run.report.host) == mine
                && !matches!(run.report.status, crate::result::RunStatus::Failed)
        })
        .take(PAST_RUNS)
        .collect()
}

/// The earlier results of each case, found once for a whole judgement: keyed by the case's
/// id, its unit and, in a cluster run, its host (a cluster's hosts are judged against their own
/// past). A 2,000-host document judged against itself compared every result with every earlier
/// one, 19 s; looked up by key, a fraction of a second.
pub(crate) struct Index<'a> {
    cluster: bool,
    /// Below this share of the past's median (with a significant test) is below the past.
    band: f64,
    cases: std::collections::HashMap<CaseKey<'a>, Vec<(i64, &'a [f64])>>,
    /// The round trip between the case's first two CPUs each earlier run read around it
    /// (`evidence.placement`), where it read one.
    placements: std::collections::HashMap<CaseKey<'a>, Vec<f64>>,
}

/// A case's id, its unit and (in a cluster run) its host.
type CaseKey<'a> = (&'a str, &'a str, &'a str);

impl<'a> Index<'a> {
    pub(crate) fn new(report: &Report, past: &'a [PastRun]) -> Index<'a> {
        let cluster = report.hosts.len() > 1;
        let mut cases: std::collections::HashMap<_, Vec<_>> = std::collections::HashMap::new();
        let mut placements: std::collections::HashMap<_, Vec<_>> = Default::default();
        for run in past {
            for earlier in &run.report.results {
                if earlier.samples.iter().all(|v| v.is_finite()) {
                    let host = if cluster { earlier.host.as_str() } else { "" };
                    let key = (earlier.id.as_str(), earlier.unit.as_str(), host);
                    cases
                        .entry(key)
                        .or_default()
                        .push((run.id, earlier.samples.as_slice()));
                    if let Some(p) = earlier.evidence.as_ref().and_then(|e| e.placement.as_ref()) {
                        placements.entry(key).or_default().push(p.ns());
                    }
                }
            }
        }
        Index {
            cluster,
            band: PAST_BAND,
            cases,
            placements,
        }
    }

    /// The past given as samples rather than runs (a baseline of `peakbench check`): for each
    /// case its id, its unit, the runs its samples come from and the samples pooled; a result
    /// is below it under `band` of its median.
    pub(crate) fn from_samples(
        cases: impl IntoIterator<Item = (&'a str, &'a str, &'a [i64], &'a [f64])>,
        band: f64,
    ) -> Index<'a> {
        let mut index: std::collections::HashMap<_, Vec<_>> = std::collections::HashMap::new();
        for (id, unit, runs, samples) in cases {
            let entry = index.entry((id, unit, "")).or_default();
            // The pooled samples under the first run, the other runs named with none.
            entry.push((runs.first().copied().unwrap_or(0), samples));
            entry.extend(runs.iter().skip(1).map(|run| (*run, &[][..])));
        }
        Index {
            cluster: false,
            band,
            cases: index,
            placements: Default::default(),
        }
    }

    /// The round trips the earlier runs of `r`'s case read between its first two CPUs (none
    /// where they read none).
    pub(crate) fn placements<'s>(&'s self, r: &'s BenchResult) -> &'s [f64] {
        let host = if self.cluster { r.host.as_str() } else { "" };
        self.placements
            .get(&(r.id.as_str(), r.unit.as_str(), host))
            .map_or(&[], Vec::as_slice)
    }
}

/// The result against the same case in the past runs `past` indexes, or why there is none.
pub(super) fn expect(r: &BenchResult, past: &Index) -> Result<Expectation, String> {
    let host = if past.cluster { r.host.as_str() } else { "" };
    let band = past.band;
    let mut samples = Vec::new();
    let mut runs = Vec::new();
    for (run, earlier) in past
        .cases
        .get(&(r.id.as_str(), r.unit.as_str(), host))
        .into_iter()
        .flatten()
    {
        samples.extend_from_slice(earlier);
        runs.push(*run);
    }
    if runs.is_empty() {
        return Err(
            "the past: no earlier run of this case on this hardware in the history (run it \
             again, or give --db the history that has them)"
                .into(),
        );
    }
    let test = crate::stats::mann_whitney(&r.samples, &samples)
        .ok_or_else(|| "the past: its repetitions are not comparable".to_string())?;
    let past = crate::stats::Summary::of(&samples)
        .ok_or_else(|| "the past: its repetitions are not comparable".to_string())?;
    let past_median = past.median;
    let here = crate::stats::Summary::of(&r.samples)
        .map(|s| s.median)
        .unwrap_or(r.value);
    let up = higher_is_better(&r.metric, &r.unit);
    let ratio = if up {
        here / past_median
    } else {
        past_median / here
    };
    if !ratio.is_finite() {
        return Err("the past: its median is not a number".into());
    }
    let verdict = if test.min_p >= ALPHA {
        Verdict::Unknown
    } else if test.p < ALPHA && ratio < band {
        Verdict::Below
    } else {
        Verdict::AtLimit
    };
    let source = past_source(r, &runs, &samples, past.cv, past_median, &test);
    Ok(Expectation {
        against: Against::Past,
        verdict,
        expected: past_median,
        ratio,
        class: None,
        band: None,
        source,
        test: Some(Test {
            name: "mann-whitney-u".into(),
            statistic: test.u,
            p: test.p,
            n: [r.samples.len(), samples.len()],
            ratio_of_medians: here / past_median,
            runs,
        }),
    })
}

/// Where the past's expectation comes from: the runs, their median and spread, and the test.
fn past_source(
    r: &BenchResult,
    runs: &[i64],
    samples: &[f64],
    cv: Option<f64>,
    median: f64,
    test: &crate::stats::MannWhitney,
) -> String {
    let spread = cv
        .map(|cv| format!(", CV {:.1} %", cv * 100.0))
        .unwrap_or_default();
    let untestable = if test.min_p >= ALPHA {
        format!(
            " (with {} and {} repetitions no test can reach p < {ALPHA}: raise --repetitions)",
            r.samples.len(),
            samples.len()
        )
    } else {
        String::new()
    };
    format!(
        "{} earlier run{} of this case on this hardware (runs {}): median {} {}{spread} over {} \
         repetitions; Mann–Whitney U p = {:.3}{untestable}",
        runs.len(),
        if runs.len() == 1 { "" } else { "s" },
        runs.iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        format_value(median),
        r.unit,
        samples.len(),
        test.p,
    )
}
