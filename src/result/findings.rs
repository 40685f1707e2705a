//! The findings of a run, as the document stores them: every result judged against what it
//! should reach, and every shortfall's causes with their evidence (schema version 3).
//!
//! `crate::findings` computes them from the document alone (and the history, for the past), so
//! that a stored or imported run is judged from what it carries; the exporters print them.

use serde::{Deserialize, Serialize};

use crate::names::named_enum;
use crate::result::Subsystem;

named_enum! {
    /// What a result is, against what it was judged.
    pub enum Verdict {
        /// within the band a well-run machine reaches for this kind of case
        AtLimit = "at-limit",
        /// under that band
        Below = "below",
        /// over what the hardware can do: a counting error, a cache hit, a wrong clock or peak
        AboveLimit = "above-limit",
        /// repetitions in two regimes, drifting, or spread over the threshold
        Unstable = "unstable",
        /// nothing to judge against
        Unknown = "unknown",
    }
}

named_enum! {
    /// What a result was judged against.
    pub enum Against {
        /// the theoretical peak × the band of the case's class
        Physics = "physics",
        /// the standard tool's figure on the same case (`--reference`)
        Reference = "reference",
        /// the same case on the same hardware in the history
        Past = "past",
        /// the median over the hosts of a cluster run
        Fleet = "fleet",
        /// a limit the machine imposed on this run (a quota, a throttle, a shaper)
        Imposed = "imposed",
    }
}

/// The findings of one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Findings {
    /// One line per subsystem: what is at its limit and what is not, and why.
    pub summary: Vec<String>,
    /// One finding per result, in the order of the results.
    pub results: Vec<Finding>,
    /// What concerns the run as a whole: a hypervisor, hosts that are one machine.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub run: Vec<Cause>,
    /// How long judging took, seconds (the evidence is read while the cases run).
    pub judged_in_s: f64,
}

/// The verdict on one result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The result's case id.
    pub id: String,
    /// The host that measured it.
    pub host: String,
    pub subsystem: Subsystem,
    /// The case as the tables name it.
    pub label: String,
    pub value: f64,
    pub unit: String,
    pub verdict: Verdict,
    /// The verdict in one line, with the figure that decided it.
    pub line: String,
    /// Everything it was judged against, each with its own verdict.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expectations: Vec<Expectation>,
    /// The causes read on the machine, the one that explains most of the gap first. Empty for
    /// a result that is below, unstable or above its limit with no cause found.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<Cause>,
    /// What would let it be judged where something is unknown, each with the flag that
    /// supplies it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
}

/// One expectation a result was judged against.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Expectation {
    pub against: Against,
    /// What this expectation alone says.
    pub verdict: Verdict,
    /// The value expected, in the result's unit: the lower edge of the band (physics), the
    /// tool's figure, the median of the past runs, the fleet's median, the imposed limit.
    pub expected: f64,
    /// How the result performs against it: value / expected, or expected / value where lower
    /// is better (a latency); below 1 is worse.
    pub ratio: f64,
    /// For physics: the class of the case and its band as fractions of the peak.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub band: Option<[f64; 2]>,
    /// Where the expected value comes from, with its factors.
    pub source: String,
    /// For the past: the statistical test that decided it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<Test>,
}

/// A two-sample test of this run's repetitions against others.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Test {
    /// `mann-whitney-u`.
    pub name: String,
    /// The statistic (U of this run's sample).
    pub statistic: f64,
    /// Two-sided p-value.
    pub p: f64,
    /// Repetitions in this run and in the others.
    pub n: [usize; 2],
    /// This run's median / the others' median.
    pub ratio_of_medians: f64,
    /// The earlier runs compared with, by their run ids where stored.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<i64>,
}

/// A cause read on the machine during the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cause {
    /// What it is: `cpu-quota`, `cpuset`, `other-processes`, `steal`, `cfs-throttled`, …; every
    /// kind is listed in docs/findings.md.
    pub kind: String,
    /// Its value and unit, e.g. 0.5 `CPU`, 150 `Mbit/s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub unit: String,
    /// What it is and what it does to this result, in one line.
    pub text: String,
    /// What was read, and where.
    pub evidence: Vec<Evidence>,
    /// The bound it puts on the result, in the result's unit, where it can be computed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<f64>,
    /// The share of the gap between the result and its expectation this cause explains
    /// (0 to 1), where it can be computed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explains: Option<f64>,
    /// What to do about it.
    pub remedy: String,
}

/// One thing read on the machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// The file and field, the command, or the measurement.
    pub source: String,
    pub value: String,
}

impl Evidence {
    pub fn new(source: impl Into<String>, value: impl Into<String>) -> Evidence {
        Evidence {
            source: source.into(),
            value: value.into(),
        }
    }
}

/// What a finding that should have causes says when none was read.
pub const NO_CAUSE: &str = "no cause found on this machine during the run";

/// What an unknown verdict's line names after "nothing to judge it against": each missing
/// thing's name (its text before the first ':', where its remedy starts), " (a, b, c)"; empty
/// when nothing is named.
pub fn missing_kinds(missing: &[String]) -> String {
    if missing.is_empty() {
        return String::new();
    }
    let kinds: Vec<&str> = missing
        .iter()
        .map(|m| m.split(':').next().unwrap_or(m))
        .collect();
    format!(" ({})", kinds.join(", "))
}
