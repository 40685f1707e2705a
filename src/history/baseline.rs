//! Baselines: the samples of chosen runs of the history, kept under a name for `peakbench
//! check`, and moved between machines as a versioned JSON file.
//!
//! A baseline belongs to the hardware it was learned on, its [`Fingerprint`] (the one rule of
//! "the same hardware" that the findings' past, `check`, `compare` and `history` share).
//!
//! A baseline file comes from elsewhere (a shared directory, another machine), so it is read as
//! `import` reads a results document: its size bounded first, then every number finite, every
//! string bounded and printable, every list bounded ([`Baseline::parse`]); a refusal names the
//! field.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::inventory::Inventory;
use crate::result::validate;
use crate::result::{Report, RunStatus};
use crate::sysinfo::Fingerprint;

/// What the `format` field of a baseline file holds.
pub(crate) const FORMAT: &str = "peakbench-baseline";
/// The version of the file this build writes and reads.
pub(crate) const FORMAT_VERSION: u32 = 1;
/// The largest baseline file read: a few hundred cases of a few hundred samples fit in 1 MB.
pub(crate) const MAX_BYTES: u64 = 16 << 20;
/// The most cases of one baseline.
pub(crate) const MAX_CASES: usize = 4096;
/// The most samples of one case.
pub(crate) const MAX_SAMPLES: usize = 65_536;
/// The fewest learning runs of a case `baseline save` keeps it from. A regime that a fraction p
/// of the runs fall into is missed by n runs with chance (1 − p)^n: 33 % for a fifth of the
/// runs and 5 runs, 7 % for 12 (3 % for a quarter); and the false failures an unseen regime
/// causes, p (1 − p)^n, are at most 1 / (e (n + 1)) of all checks whatever p is: 6.7 % at 5
/// runs, 2.9 % at 12. Each run is a check of about 30 s, so 12 cost about 6 minutes once.
pub(crate) const MIN_RUNS: usize = 12;
/// How many runs of each case `baseline save` keeps by default.
pub(crate) const DEFAULT_RUNS: usize = MIN_RUNS;
/// The gate must be able to catch a halving: a case whose slowest learning run, less the
/// tolerance, is below this share of its runs' median is too noisy to gate.
pub(crate) const GATEABLE_SHARE: f64 = 0.5;

/// The samples of one case in a baseline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct BaselineCase {
    /// The case's id, as results carry it.
    pub id: String,
    /// The case as the tables name it.
    pub label: String,
    /// What part of the machine it measures (`cpu`, `memory`, …); empty in a baseline saved
    /// before it was kept.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subsystem: String,
    pub metric: String,
    pub unit: String,
    /// The runs of the history the samples come from, newest first.
    pub runs: Vec<i64>,
    /// Every repetition of those runs.
    pub samples: Vec<f64>,
    /// Each run's median of the case, in the order of `runs`: what the runs spread over,
    /// which the gate judges by. Empty in a baseline saved before they were kept (such a case
    /// is judged by its pooled samples alone).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub run_medians: Vec<f64>,
    /// Each run's placement, in the order of `runs`: a cache line's round trip between the
    /// first two CPUs the case used, ns ([`crate::evidence::PlacementProbe::ns`]). Empty where
    /// a run did not read it (a case on one CPU, a baseline saved before it was read).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placements: Vec<f64>,
    /// Runs left out of this case because their own findings named a disturbance while it ran
    /// ([`DISTURBANCES`]), with the kind named, newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disturbed: Vec<DisturbedRun>,
}

/// A learning run left out of a case: its findings named a disturbance of that case.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct DisturbedRun {
    pub run: i64,
    /// The cause's kind, e.g. `other-processes`.
    pub cause: String,
}

/// The causes that disturb one run and not the machine: a learning run whose findings name one
/// of them for a case is left out of that case, since a single such run would set the slowest
/// learning run, and with it how far below every later check must fall before it fails (one
/// run at 0.34 of the others made a triad ungateable). Causes the machine keeps (a quota, a
/// cpuset, a shaper) are its normal, and stay.
pub(crate) const DISTURBANCES: [&str; 4] =
    ["other-processes", "steal", "off-core", "thermal-throttle"];

/// One run's result of a case, as [`Baseline::from_runs`] chooses among them.
struct Candidate<'a> {
    run: i64,
    result: &'a crate::result::BenchResult,
    disturbance: Option<String>,
}

/// A case learned from `list` (its results, newest run first): the newest `last` undisturbed
/// runs; where fewer than `last` are undisturbed (a machine busy through most of its learning),
/// the newest disturbed ones make up the count, so that the case is still learned, from what
/// the machine is. The disturbed runs left out are listed.
fn learned_case(list: &[Candidate], last: usize) -> BaselineCase {
    let clean = list.iter().filter(|c| c.disturbance.is_none()).count();
    let mut room = last.saturating_sub(clean);
    let mut kept: Vec<&Candidate> = Vec::new();
    let mut disturbed = Vec::new();
    for c in list {
        let take = match &c.disturbance {
            None => kept.iter().filter(|k| k.disturbance.is_none()).count() < last,
            Some(_) if room > 0 => {
                room -= 1;
                true
            }
            Some(cause) => {
                disturbed.push(DisturbedRun {
                    run: c.run,
                    cause: cause.clone(),
                });
                false
            }
        };
        if take && kept.len() < last {
            kept.push(c);
        }
    }
    let r = list[0].result;
    let placements: Vec<f64> = kept
        .iter()
        .filter_map(|c| {
            c.result
                .evidence
                .as_ref()?
                .placement
                .as_ref()
                .map(|p| p.ns())
        })
        .collect();
    BaselineCase {
        id: r.id.clone(),
        label: format!(
            "{} {}",
            r.op,
            crate::report::cells::describe_params(&r.params)
        ),
        subsystem: r.subsystem.to_string(),
        metric: r.metric.clone(),
        unit: r.unit.clone(),
        runs: kept.iter().map(|c| c.run).collect(),
        samples: kept
            .iter()
            .flat_map(|c| c.result.samples.iter().copied())
            .collect(),
        run_medians: kept
            .iter()
            .map(|c| crate::stats::median(&c.result.samples).expect("finite samples"))
            .collect(),
        // One per run or none: a run that did not read it leaves the case without.
        placements: if placements.len() == kept.len() {
            placements
        } else {
            Vec::new()
        },
        disturbed,
    }
}

/// The disturbance the findings of `report` name for its result `id`, if any.
pub(crate) fn disturbance(report: &Report, id: &str) -> Option<String> {
    let finding = report
        .findings
        .as_ref()?
        .results
        .iter()
        .find(|f| f.id == id)?;
    finding
        .causes
        .iter()
        .find(|c| DISTURBANCES.contains(&c.kind.as_str()))
        .map(|c| c.kind.clone())
}

/// What the learning runs of a case spread over, from their medians, in the direction of
/// performance (a latency's slowest run is its highest).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct RunSpread {
    /// How many runs.
    pub runs: usize,
    /// The slowest run's median, in the case's unit.
    pub slowest: f64,
    /// The fastest run's median, in the case's unit.
    pub fastest: f64,
    /// The median of the runs' medians, in the case's unit.
    pub typical: f64,
    /// The slowest run's performance against `typical` (at most 1).
    pub slowest_share: f64,
    /// The largest tolerance at which the gate still catches a halving of `typical`
    /// (at or below 0: none).
    pub max_tolerance: f64,
    /// Two regimes among the runs' medians (`stats::regimes`), when there are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regimes: Option<RunRegimes>,
}

/// Two regimes of a case's learning runs: the runs' medians fell into two tight groups far
/// apart (two placements of the vCPUs, two paths).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct RunRegimes {
    /// The lower group's median, in the case's unit, and how many runs it holds.
    pub low: f64,
    pub low_runs: usize,
    /// The upper group's median and how many runs it holds.
    pub high: f64,
    pub high_runs: usize,
}

impl RunSpread {
    /// Whether a gate at `tolerance` could not even catch a halving: the slowest run less the
    /// tolerance is below [`GATEABLE_SHARE`] of the runs' median.
    pub(crate) fn ungateable(&self, tolerance: f64) -> bool {
        self.slowest_share * (1.0 - tolerance) < GATEABLE_SHARE
    }
}

impl BaselineCase {
    /// Whether a higher figure is better (not a latency).
    pub(crate) fn higher_is_better(&self) -> bool {
        crate::result::higher_is_better(&self.metric, &self.unit)
    }

    /// What its learning runs spread over; `None` for a baseline without run medians.
    pub(crate) fn spread(&self) -> Option<RunSpread> {
        let perf = |v: f64| if self.higher_is_better() { v } else { 1.0 / v };
        let slowest = *self
            .run_medians
            .iter()
            .min_by(|a, b| perf(**a).total_cmp(&perf(**b)))?;
        let fastest = *self
            .run_medians
            .iter()
            .max_by(|a, b| perf(**a).total_cmp(&perf(**b)))?;
        let typical = crate::stats::median(&self.run_medians)?;
        let slowest_share = perf(slowest) / perf(typical);
        let regimes = crate::stats::regimes(&self.run_medians).map(|r| RunRegimes {
            low: r.low_median,
            low_runs: r.low.len(),
            high: r.high_median,
            high_runs: r.high.len(),
        });
        Some(RunSpread {
            runs: self.run_medians.len(),
            slowest,
            fastest,
            typical,
            slowest_share,
            max_tolerance: 1.0 - GATEABLE_SHARE / slowest_share,
            regimes,
        })
    }
}

/// A baseline: what is normal for one hardware fingerprint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Baseline {
    /// Always [`FORMAT`].
    pub format: String,
    /// The file's version, [`FORMAT_VERSION`].
    pub version: u32,
    pub name: String,
    /// When it was saved (RFC 3339).
    pub created_at: String,
    /// The peakbench that saved it.
    pub tool_version: String,
    pub fingerprint: Fingerprint,
    /// The host it was learned on.
    pub host: String,
    /// What the node had when it was learned (its newest learning run's): the check fails a
    /// node that lost any of it. Absent in a baseline saved before inventories were kept,
    /// which is compared by its fingerprint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inventory: Option<Inventory>,
    pub cases: Vec<BaselineCase>,
}

impl Baseline {
    /// A baseline named `name` of the runs `runs` (newest first), keeping for each case the
    /// samples of the newest `last` runs that have it undisturbed. Failed runs are left out,
    /// and so is a run from a case whose findings name a disturbance of it ([`DISTURBANCES`]).
    pub(crate) fn from_runs(
        name: &str,
        fingerprint: Fingerprint,
        runs: &[(i64, Report)],
        last: usize,
    ) -> Baseline {
        // Each case's results, newest run first, each with the disturbance its run's findings
        // name for it.
        let mut found: BTreeMap<(String, String), Vec<Candidate>> = BTreeMap::new();
        let mut host = String::new();
        let mut inventory = None;
        for (id, report) in runs {
            if matches!(report.status, RunStatus::Failed) {
                continue;
            }
            if host.is_empty() {
                host = report.host.hostname.clone();
                inventory = Some(Inventory::of(report));
            }
            for r in &report.results {
                if r.samples.is_empty() || r.samples.iter().any(|v| !v.is_finite()) {
                    continue;
                }
                let list = found.entry((r.id.clone(), r.unit.clone())).or_default();
                if !list.iter().any(|c| c.run == *id) {
                    list.push(Candidate {
                        run: *id,
                        result: r,
                        disturbance: disturbance(report, &r.id),
                    });
                }
            }
        }
        let cases = found
            .into_values()
            .map(|list| learned_case(&list, last))
            .collect();
        Baseline {
            format: FORMAT.into(),
            version: FORMAT_VERSION,
            name: name.into(),
            created_at: crate::result::now_rfc3339(),
            tool_version: env!("CARGO_PKG_VERSION").into(),
            fingerprint,
            host,
            inventory,
            cases,
        }
    }

    /// Whether its cases carry their runs' medians (saved since the gate learns spreads).
    pub(crate) fn learned_spreads(&self) -> bool {
        self.cases.iter().any(|c| !c.run_medians.is_empty())
    }

    /// Leaves out the cases learned from fewer than `min` runs; returns their ids.
    pub(crate) fn keep_learned_from(&mut self, min: usize) -> Vec<String> {
        let (kept, left): (Vec<_>, Vec<_>) = std::mem::take(&mut self.cases)
            .into_iter()
            .partition(|c| c.runs.len() >= min);
        self.cases = kept;
        left.into_iter().map(|c| c.id).collect()
    }

    /// What the node had: the inventory saved with the baseline, else what its fingerprint
    /// says.
    pub(crate) fn inventory(&self) -> Inventory {
        self.inventory
            .clone()
            .unwrap_or_else(|| Inventory::from_fingerprint(&self.fingerprint))
    }

    /// The samples of case `id` in `unit`, if the baseline has it.
    #[cfg(test)]
    pub(crate) fn case(&self, id: &str, unit: &str) -> Option<&BaselineCase> {
        self.cases.iter().find(|c| c.id == id && c.unit == unit)
    }

    /// Reads a baseline file's text, checked as a document from elsewhere; the error names
    /// the field.
    pub(crate) fn parse(text: &str) -> Result<Baseline, String> {
        if text.len() as u64 > MAX_BYTES {
            return Err(format!(
                "the file: {} bytes, more than a baseline holds ({MAX_BYTES})",
                text.len()
            ));
        }
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            let at = validate::path_at(text, validate::offset_of(text, e.line(), e.column()));
            format!("{at}: not JSON: {}", crate::text::printable(&e.to_string()))
        })?;
        match value.get("format").and_then(|f| f.as_str()) {
            Some(FORMAT) => {}
            _ => {
                return Err(format!(
                    "format: not \"{FORMAT}\": not a peakbench baseline"
                ));
            }
        }
        match value.get("version").and_then(|v| v.as_u64()) {
            Some(v) if v == u64::from(FORMAT_VERSION) => {}
            Some(v) => {
                return Err(format!(
                    "version: {v}, this peakbench reads baselines of version {FORMAT_VERSION}: use \
                     the peakbench that wrote it"
                ));
            }
            None => return Err("version: missing or not a number".into()),
        }
        validate::check_json(&value)?;
        let baseline: Baseline = serde_json::from_value(value)
            .map_err(|e| format!("not a baseline: {}", crate::text::printable(&e.to_string())))?;
        baseline.check()?;
        Ok(baseline)
    }

    /// What the typed baseline must hold beyond its JSON: printable text, bounded lists,
    /// every case with samples, positive ones.
    fn check(&self) -> Result<(), String> {
        let fp = &self.fingerprint;
        let mut texts: Vec<(String, &str)> = vec![
            ("name".into(), &self.name),
            ("created_at".into(), &self.created_at),
            ("tool_version".into(), &self.tool_version),
            ("host".into(), &self.host),
            ("fingerprint.microarch".into(), &fp.microarch),
            ("fingerprint.cpu_model".into(), &fp.cpu_model),
            ("fingerprint.kernel_major".into(), &fp.kernel_major),
        ];
        for (list, name) in [(&fp.disks, "disks"), (&fp.nics, "nics")] {
            if list.len() > 256 {
                return Err(format!("fingerprint.{name}: more than 256 entries"));
            }
            for (i, item) in list.iter().enumerate() {
                texts.push((format!("fingerprint.{name}[{i}]"), item));
            }
        }
        if let Some(inventory) = &self.inventory {
            match inventory.texts() {
                Some(more) => texts.extend(more),
                None => return Err("inventory: more disks, NICs or CPUs than a node has".into()),
            }
        }
        if self.cases.len() > MAX_CASES {
            return Err(format!("cases: more than {MAX_CASES} cases"));
        }
        for (i, case) in self.cases.iter().enumerate() {
            for (field, text) in [
                ("id", &case.id),
                ("label", &case.label),
                ("subsystem", &case.subsystem),
                ("metric", &case.metric),
                ("unit", &case.unit),
            ] {
                texts.push((format!("cases[{i}].{field}"), text));
            }
            check_samples(i, case)?;
            if !case.placements.is_empty() && case.placements.len() != case.runs.len() {
                return Err(format!(
                    "cases[{i}].placements: {} values for {} runs: give one per run, or none",
                    case.placements.len(),
                    case.runs.len()
                ));
            }
            if let Some(j) = case
                .placements
                .iter()
                .position(|v| !(v.is_finite() && *v > 0.0))
            {
                return Err(format!(
                    "cases[{i}].placements[{j}]: not a finite number above 0"
                ));
            }
            if case.disturbed.len() > MAX_SAMPLES {
                return Err(format!("cases[{i}].disturbed: more than {MAX_SAMPLES}"));
            }
            for (j, d) in case.disturbed.iter().enumerate() {
                texts.push((format!("cases[{i}].disturbed[{j}].cause"), &d.cause));
            }
        }
        for (field, text) in texts {
            check_text(&field, text)?;
        }
        Ok(())
    }

    /// The baseline as JSON text.
    pub(crate) fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a baseline serialises")
    }

    /// What `baseline show` prints: the fingerprint, then one line per case.
    pub(crate) fn render(&self) -> String {
        use crate::text::printable;
        let fp = &self.fingerprint;
        let mut out = format!(
            "baseline {} (fingerprint {}), learned on {} at {} by peakbench {}\n  cpu {} ({}), \
             {} CPUs, {} GiB, kernel {}, disks {}, nics {}\n\n",
            printable(&self.name),
            fp.key(),
            printable(&self.host),
            printable(&self.created_at),
            printable(&self.tool_version),
            printable(&fp.cpu_model),
            printable(&fp.microarch),
            fp.cpus,
            fp.memory_gib,
            printable(&fp.kernel_major),
            printable(&fp.disks.join(",")),
            printable(&fp.nics.join(",")),
        );
        if let Some(inventory) = &self.inventory {
            // The blank line closing the header moves below the inventory.
            out.pop();
            out.push_str(&format!(
                "  inventory: {}\n\n",
                printable(&inventory.describe())
            ));
        }
        out.push_str(&self.cases_table());
        for note in self.notes() {
            out.push_str(&format!("note: {note}\n"));
        }
        crate::text::terminal(&out)
    }

    /// Each case's pooled median and spread, and what its runs spread over.
    fn cases_table(&self) -> String {
        use crate::text::{Align, Table};
        use crate::units::format_value;
        let mut table = Table::new(&[
            ("case", Align::Left),
            ("median", Align::Right),
            ("unit", Align::Left),
            ("CV", Align::Right),
            ("samples", Align::Right),
            ("runs", Align::Right),
            ("slowest run", Align::Right),
            ("max tolerance", Align::Right),
            ("regimes", Align::Left),
        ]);
        for c in &self.cases {
            let summary = crate::stats::Summary::of(&c.samples);
            let spread = c.spread();
            table.row([
                c.id.clone(),
                summary
                    .as_ref()
                    .map(|s| format_value(s.median))
                    .unwrap_or_default(),
                c.unit.clone(),
                summary
                    .and_then(|s| s.cv)
                    .map(|cv| format!("{:.1} %", cv * 100.0))
                    .unwrap_or_default(),
                c.samples.len().to_string(),
                c.runs.len().to_string(),
                spread
                    .as_ref()
                    .map(|s| format!("{:.2}", s.slowest_share))
                    .unwrap_or_else(|| "n/a".into()),
                spread
                    .as_ref()
                    .map(|s| match s.max_tolerance {
                        t if t > 0.0 => format!("{:.0} %", (t * 100.0).floor()),
                        _ => "none".into(),
                    })
                    .unwrap_or_else(|| "n/a".into()),
                spread
                    .and_then(|s| s.regimes)
                    .map(|r| format!("{} | {}", format_value(r.low), format_value(r.high)))
                    .unwrap_or_default(),
            ]);
        }
        table.render()
    }

    /// What `show` and `save` say of the baseline beside its table: that it predates learned
    /// spreads, the cases whose runs fell into two regimes, the cases learned from too few runs.
    pub(crate) fn notes(&self) -> Vec<String> {
        use crate::units::format_value;
        let mut notes = Vec::new();
        if !self.learned_spreads() {
            notes.push(format!(
                "this baseline predates learned spreads (no run medians): check judges it by \
                 its pooled samples alone; save the baseline again (peakbench check --learn \
                 {MIN_RUNS})"
            ));
        }
        for c in &self.cases {
            let Some(spread) = c.spread() else { continue };
            if let Some(r) = &spread.regimes {
                notes.push(format!(
                    "{}: its runs fell into two regimes, about {} {unit} ({} runs) and {} {unit} \
                     ({} runs): both are learned as normal, and a slowdown fails only below the \
                     slowest run by the tolerance",
                    c.id,
                    format_value(r.low),
                    r.low_runs,
                    format_value(r.high),
                    r.high_runs,
                    unit = c.unit,
                ));
            }
            if !c.disturbed.is_empty() {
                let runs: Vec<String> = c
                    .disturbed
                    .iter()
                    .map(|d| format!("run {} ({})", d.run, d.cause))
                    .collect();
                notes.push(format!(
                    "{}: left out {}, disturbed while it ran, by its own findings",
                    c.id,
                    runs.join(", ")
                ));
            }
            if spread.runs < MIN_RUNS {
                notes.push(format!(
                    "{}: learned from {} runs, fewer than {MIN_RUNS}: a regime its runs missed \
                     would fail a healthy check",
                    c.id, spread.runs
                ));
            }
        }
        notes
    }

    /// What `baseline show --json` prints: the file, with `learned_spreads` and each case's
    /// `spread` (its runs' slowest, fastest and typical median, the largest tolerance that
    /// still catches a halving, and two regimes where its runs show them).
    pub(crate) fn show_json(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(self).expect("a baseline serialises");
        value["learned_spreads"] = self.learned_spreads().into();
        if let Some(cases) = value["cases"].as_array_mut() {
            for (shown, case) in cases.iter_mut().zip(&self.cases) {
                if let Some(spread) = case.spread() {
                    shown["spread"] = serde_json::to_value(spread).expect("a spread serialises");
                }
            }
        }
        value["notes"] = self.notes().into();
        value
    }
}

/// A case's samples: at least one, at most [`MAX_SAMPLES`], each finite and above 0.
fn check_samples(i: usize, case: &BaselineCase) -> Result<(), String> {
    if case.samples.is_empty() {
        return Err(format!("cases[{i}].samples: empty: a case needs samples"));
    }
    if case.samples.len() > MAX_SAMPLES {
        return Err(format!("cases[{i}].samples: more than {MAX_SAMPLES}"));
    }
    if let Some(j) = case
        .samples
        .iter()
        .position(|v| !(v.is_finite() && *v > 0.0))
    {
        return Err(format!(
            "cases[{i}].samples[{j}]: not a finite number above 0"
        ));
    }
    if case.runs.len() > MAX_SAMPLES {
        return Err(format!("cases[{i}].runs: more than {MAX_SAMPLES}"));
    }
    check_run_medians(i, case)
}

/// A case's run medians: none (a baseline saved before they were kept), or one per run, each
/// within its samples' range (a median of some of them cannot lie outside it).
fn check_run_medians(i: usize, case: &BaselineCase) -> Result<(), String> {
    if case.run_medians.is_empty() {
        return Ok(());
    }
    if case.run_medians.len() != case.runs.len() {
        return Err(format!(
            "cases[{i}].run_medians: {} values for {} runs: give one per run, or none",
            case.run_medians.len(),
            case.runs.len()
        ));
    }
    let low = case.samples.iter().copied().fold(f64::INFINITY, f64::min);
    let high = case
        .samples
        .iter()
        .copied()
        .fold(f64::NEG_INFINITY, f64::max);
    if let Some(j) = case
        .run_medians
        .iter()
        .position(|m| !(m.is_finite() && *m >= low && *m <= high))
    {
        return Err(format!(
            "cases[{i}].run_medians[{j}]: not a median of its samples (outside {low} to {high})"
        ));
    }
    Ok(())
}

/// Text of a baseline: at most 1,024 bytes, no control character, no bidirectional override.
fn check_text(field: &str, text: &str) -> Result<(), String> {
    if text.len() > 1024 {
        return Err(format!("{field}: more than 1024 bytes"));
    }
    if text
        .chars()
        .any(|c| c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'))
    {
        return Err(format!("{field}: not printable text"));
    }
    Ok(())
}

/// Reads a baseline file; the error names the file and the field.
pub(crate) fn read_file(path: &Path) -> Result<Baseline, String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{shown} is not a file"));
    }
    if meta.len() > MAX_BYTES {
        return Err(format!(
            "{shown}: {} bytes, more than a baseline holds ({MAX_BYTES})",
            meta.len()
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    Baseline::parse(&text).map_err(|why| format!("{shown}: {why}"))
}

/// Whether `name` may name a saved baseline: 1 to 64 letters, digits, '.', '-' or '_', not
/// starting with '.'.
pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

/// Where saved baselines are: `baselines/` beside the history file.
pub(crate) fn saved_dir(db: &Path) -> PathBuf {
    db.parent().unwrap_or(Path::new(".")).join("baselines")
}

/// The saved baselines in `dir` with their file names, sorted by name; files that cannot be
/// read are returned as errors (with the file), so that `list` can show them.
pub(crate) fn saved(dir: &Path) -> Vec<Result<Baseline, String>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files.truncate(MAX_CASES);
    files.iter().map(|f| read_file(f)).collect()
}

#[cfg(test)]
mod tests;
