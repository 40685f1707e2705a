//! The experiment matrix of `peakbench run`: a TOML file (`--config`) or a built-in preset.
//!
//! Each table of the file is one experiment of a subsystem, written with the long names of that
//! subcommand's flags, so a config means exactly what the same command line means and is
//! checked by the same parser:
//!
//! ```toml
//! [[mem]]
//! op = ["read", "copy"]        # a list becomes "read,copy"
//! block = ["8B", "8KB"]
//! threads = [1, 2]
//! nt = true                    # true becomes the bare flag --nt; false leaves it out
//! ```
//!
//! Repetitions, output, peak factors and `--reference` belong to the run as a whole and are set
//! on the `run` command line, not in a table.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use clap::Args;

use crate::error::{PlaceError, UsageError};
use crate::names::named_enum;
use crate::options::{OutputArgs, PeakArgs, RunnerArgs};
use crate::registry;
use crate::workload::Workload;

/// One experiment of the matrix: a workload and its flags, as on a command line.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// The table's name, the workload's name, e.g. "mem-latency".
    pub section: String,
    /// Position of the table among those of its kind, from 1, for messages.
    pub index: usize,
    /// The workload's command word followed by its flags, e.g. `latency --sizes=4KiB`.
    pub argv: Vec<String>,
}

impl Entry {
    /// How messages name this table, e.g. "[[mem]] #2".
    pub fn name(&self) -> String {
        format!("[[{}]] #{}", self.section, self.index)
    }
}

/// Flags that belong to the whole run, refused inside a table.
fn run_wide_flags() -> BTreeSet<String> {
    let mut cmd = clap::Command::new("run-wide");
    cmd = RunnerArgs::augment_args(cmd);
    cmd = OutputArgs::augment_args(cmd);
    cmd = PeakArgs::augment_args(cmd);
    cmd.get_arguments()
        .filter_map(|a| a.get_long().map(str::to_string))
        .collect()
}

/// Parses a config's text into entries, in the order of the file's sections.
pub fn parse(text: &str, origin: &str) -> Result<Vec<Entry>, UsageError> {
    let doc: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| UsageError(format!("{origin}: {}", one_line(&e))))?;
    let reserved = run_wide_flags();
    let mut entries = Vec::new();
    for (key, value) in &doc {
        let Some(workload) = registry::by_name(key) else {
            return Err(UsageError(format!(
                "{origin}: unknown table [[{key}]]: use one of {}",
                registry::names().join(", ")
            )));
        };
        let tables = match value {
            toml::Value::Array(items) => items.clone(),
            toml::Value::Table(_) => vec![value.clone()],
            _ => {
                return Err(UsageError(format!(
                    "{origin}: '{key}' must be a table ([[{key}]]), not a value"
                )));
            }
        };
        for (i, table) in tables.iter().enumerate() {
            let name = format!("[[{key}]] #{}", i + 1);
            let toml::Value::Table(table) = table else {
                return Err(UsageError(format!("{origin}: {name} is not a table")));
            };
            let word = workload
                .path()
                .last()
                .expect("a workload has a command word");
            let mut argv = vec![word.to_string()];
            for (flag, value) in table {
                if reserved.contains(flag) {
                    return Err(UsageError(format!(
                        "{origin}: {name}: '{flag}' applies to the whole run: give it on the \
                         command line (peakbench run --{flag} …)"
                    )));
                }
                match value {
                    toml::Value::Boolean(true) => argv.push(format!("--{flag}")),
                    toml::Value::Boolean(false) => {}
                    other => argv.push(format!(
                        "--{flag}={}",
                        flag_value(other).map_err(|why| UsageError(format!(
                            "{origin}: {name}: '{flag}': {why}"
                        )),)?
                    )),
                }
            }
            entries.push(Entry {
                section: key.clone(),
                index: i + 1,
                argv,
            });
        }
    }
    Ok(entries)
}

/// A TOML value as the text a flag takes: lists are joined with commas.
fn flag_value(value: &toml::Value) -> Result<String, String> {
    match value {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        toml::Value::Array(items) => items
            .iter()
            .map(|item| match item {
                toml::Value::Array(_) | toml::Value::Table(_) | toml::Value::Boolean(_) => {
                    Err("a list may hold only strings and numbers".to_string())
                }
                other => flag_value(other),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|parts| parts.join(",")),
        // A boolean alone is a flag (handled by the caller); in a list it is refused above.
        toml::Value::Boolean(_) => Err("a boolean is a flag: give true or false alone".into()),
        toml::Value::Datetime(_) | toml::Value::Table(_) => {
            Err("give a string, a number, a boolean or a list".into())
        }
    }
}

/// Reads and parses a config file.
pub fn load(path: &Path) -> Result<Vec<Entry>, UsageError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        UsageError(format!(
            "--config: cannot read '{}': {e}; give the path of a TOML file",
            path.display()
        ))
    })?;
    parse(&text, &format!("--config {}", path.display()))
}

/// Parses an entry's flags with its workload's own parser.
pub fn parse_entry(
    entry: &Entry,
    origin: &str,
) -> Result<(&'static dyn Workload, clap::ArgMatches), UsageError> {
    let workload = registry::by_name(&entry.section).expect("parse only makes known tables");
    let matches = workload
        .command()
        .try_get_matches_from(&entry.argv)
        .map_err(|e| {
            let text = e.to_string();
            let first = text
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("invalid value");
            UsageError(format!(
                "{origin}: {}: {}",
                entry.name(),
                first.trim_start_matches("error: ")
            ))
        })?;
    Ok((workload, matches))
}

fn one_line(e: &toml::de::Error) -> String {
    let mut text = e.message().to_string();
    if let Some(span) = e.span() {
        text = format!("at byte {}: {text}", span.start);
    }
    text
}

named_enum! {
    /// A built-in matrix of experiments (`run --preset`, `cluster run --preset`).
    pub enum Preset {
        /// every subsystem in about a minute
        Quick = "quick",
        /// the users' whole matrix
        Standard = "standard",
        /// every size, hours
        Full = "full",
        /// the health check's short plan (`peakbench check`), about 30 s
        Check = "check",
    }
}

impl Preset {
    /// The preset, written as a config.
    pub fn text(self) -> &'static str {
        match self {
            Preset::Quick => include_str!("../presets/quick.toml"),
            Preset::Standard => include_str!("../presets/standard.toml"),
            Preset::Full => include_str!("../presets/full.toml"),
            Preset::Check => include_str!("../presets/check.toml"),
        }
    }
}

/// Where a command's tables come from and where the disk tables put their file: the flags
/// `run`, `cluster run` and `check` share.
#[derive(Args, Debug, Clone, Default)]
pub struct TableSource {
    /// A TOML file of experiments instead of the preset, one table per subcommand run (see
    /// presets/*.toml)
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Directory for the disk tables' test file, on every host of a cluster (default: each
    /// table's own, else the current one)
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

impl TableSource {
    /// The tables to run, `--config`'s or else `preset`'s, with where they came from ("preset
    /// quick", "--config FILE"); `--dir` is given to every disk table that does not name its own.
    pub fn entries(&self, preset: Preset) -> Result<(String, Vec<Entry>), UsageError> {
        let (origin, mut entries) = match &self.config {
            Some(path) => (format!("--config {}", path.display()), load(path)?),
            None => (
                format!("preset {preset}"),
                parse(preset.text(), preset.name())?,
            ),
        };
        if let Some(dir) = &self.dir {
            apply_run_wide(&mut entries, "disk", "dir", &dir.display().to_string());
        }
        Ok((origin, entries))
    }
}

/// `--server`: the `peakbench net serve` the network tables of `run` and `check` measure against.
#[derive(Args, Debug, Clone, Default)]
pub struct ServerArg {
    /// Run the network tables against this 'peakbench net serve' (default: one on loopback)
    #[arg(long, value_name = "HOST[:PORT]")]
    pub server: Option<String>,
}

impl ServerArg {
    /// Gives `--server` to every network table that does not name its own.
    pub fn apply(&self, entries: &mut [Entry]) {
        if let Some(server) = &self.server {
            apply_run_wide(entries, "net", "server", server);
        }
    }
}

/// What `run` and `cluster run` measure, and where they put the disk tables' file and the
/// report: the flags both commands share.
#[derive(Args, Debug, Clone, Default)]
pub struct SuiteArgs {
    /// The matrix to run [default: quick]
    #[arg(long, value_enum, conflicts_with = "config")]
    pub preset: Option<Preset>,
    #[command(flatten)]
    pub tables: TableSource,
    /// Write the HTML report here (`run` writes one next to the history by default,
    /// reports/run-<id>.html; `cluster run` only when given)
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

impl SuiteArgs {
    /// The tables to run: the preset's (quick by default) or `--config`'s, with `--dir` given.
    pub fn entries(&self) -> Result<(String, Vec<Entry>), UsageError> {
        self.tables.entries(self.preset.unwrap_or(Preset::Quick))
    }

    /// Records the preset or the config file in a plan's configuration.
    pub fn record(&self, config: &mut serde_json::Value) {
        match &self.tables.config {
            Some(path) => config["config"] = path.display().to_string().into(),
            None => config["preset"] = self.preset.unwrap_or(Preset::Quick).name().into(),
        }
    }
}

/// Gives `--flag=value` to every table of `section` that does not set the flag itself.
pub fn apply_run_wide(entries: &mut [Entry], section: &str, flag: &str, value: &str) {
    let given = format!("--{flag}=");
    for entry in entries.iter_mut().filter(|e| e.section == section) {
        if !entry.argv.iter().any(|a| a.starts_with(&given)) {
            entry.argv.push(format!("{given}{value}"));
        }
    }
}

/// One plan of every table of `entries` (each parsed with its workload's parser, in `parsed`),
/// with the experiments it holds for the document's config; a table that cannot run here (no
/// space, no server) is skipped with a note, and a place without room or writes is recorded
/// apart. No case at all is a usage error naming `origin`.
pub fn plan(
    entries: &[Entry],
    parsed: &[(&'static dyn Workload, clap::ArgMatches)],
    ctx: &crate::plan::Context,
    origin: &str,
) -> anyhow::Result<(crate::plan::Plan, Vec<serde_json::Value>)> {
    let mut plan = crate::plan::Plan::empty(serde_json::Value::Null);
    let mut experiments = Vec::new();
    for (entry, (workload, matches)) in entries.iter().zip(parsed) {
        let table = match workload.plan(matches, ctx) {
            Ok(table) => table,
            Err(e) => {
                plan.notes.push(format!("{} skipped: {e:#}", entry.name()));
                if let Some(place) = e.chain().find_map(|c| c.downcast_ref::<PlaceError>()) {
                    plan.left_out(place.lack, place.reason.clone());
                }
                continue;
            }
        };
        let options = table.config.clone();
        let added = plan.absorb(table, &entry.name());
        let argv: Vec<&str> = workload
            .path()
            .iter()
            .copied()
            .chain(entry.argv[1..].iter().map(String::as_str))
            .collect();
        experiments.push(serde_json::json!({
            "table": entry.name(),
            "argv": argv,
            "options": options,
            "cases": added,
        }));
    }
    if plan.cases.is_empty() {
        return Err(UsageError(format!(
            "{origin}: nothing to run: {}",
            plan.notes.join("; ")
        ))
        .into());
    }
    Ok((plan, experiments))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::Named;

    #[test]
    fn tables_become_the_subcommands_flags() {
        let entries = parse(
            "[[cpu]]\nprecision = [\"f64\", \"i8\"]\nthreads = [1, 2]\nduration = \"1s\"\n\
             [[linpack]]\nn = 1000\n",
            "test",
        )
        .unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(
            entries[0].argv,
            [
                "cpu",
                "--precision=f64,i8",
                "--threads=1,2",
                "--duration=1s"
            ]
        );
        assert_eq!(entries[1].argv, ["linpack", "--n=1000"]);
    }

    #[test]
    fn booleans_are_bare_flags() {
        let entries = parse("[[cpu]]\npin_me = true\nother = false\n", "t").unwrap();
        assert_eq!(entries[0].argv, ["cpu", "--pin_me"]);
    }

    /// A boolean inside a list is refused naming the key, not a panic: it once reached
    /// `unreachable!` (exit 101), as the config fuzz target's property test found first.
    #[test]
    fn a_boolean_in_a_list_is_refused_not_a_panic() {
        let e = parse("[[cpu]]\nthreads = [1, true]\n", "cfg").unwrap_err();
        assert!(
            e.0.contains("'threads': a list may hold only strings and numbers"),
            "{}",
            e.0
        );
    }

    #[test]
    fn run_wide_flags_and_unknown_tables_are_refused() {
        let e = parse("[[cpu]]\nrepetitions = 5\n", "cfg").unwrap_err();
        assert!(
            e.0.contains("'repetitions' applies to the whole run"),
            "{}",
            e.0
        );
        let e = parse("[[gpu]]\nx = 1\n", "cfg").unwrap_err();
        assert!(e.0.contains("unknown table [[gpu]]"), "{}", e.0);
        let e = parse("[[cpu]\n", "cfg").unwrap_err();
        assert!(e.0.starts_with("cfg: "), "{}", e.0);
    }

    #[test]
    fn a_bad_value_is_reported_by_the_subcommands_parser() {
        let entries = parse("[[cpu]]\nthreads = [0]\n", "cfg").unwrap();
        let Err(e) = parse_entry(&entries[0], "cfg") else {
            panic!("threads = [0] was accepted");
        };
        assert!(e.0.starts_with("cfg: [[cpu]] #1: "), "{}", e.0);
        assert!(e.0.contains("--threads"), "{}", e.0);
    }

    #[test]
    fn every_preset_parses() {
        for name in ["quick", "standard", "full"] {
            let text = Preset::from_name(name).unwrap().text();
            let entries = parse(text, name).unwrap();
            assert!(!entries.is_empty());
            for entry in &entries {
                if let Err(e) = parse_entry(entry, name) {
                    panic!("{name}: {}", e.0);
                }
            }
        }
    }

    /// The cases of every `[[section]]` table of a preset, planned against the fixture machine
    /// (disk tables with their test file in `dir`, which planning does not write to).
    fn preset_specs(name: &str, section: &str, dir: &Path) -> Vec<crate::plan::CaseSpec> {
        let ctx = crate::plan::Context::fixture();
        let entries = parse(Preset::from_name(name).unwrap().text(), name).unwrap();
        let mut specs = Vec::new();
        for mut entry in entries.into_iter().filter(|e| e.section == section) {
            if section == "disk" {
                entry.argv.push(format!("--dir={}", dir.display()));
            }
            let (workload, matches) = parse_entry(&entry, name).unwrap();
            let plan = workload
                .plan(&matches, &ctx)
                .unwrap_or_else(|e| panic!("{name} {}: {e:#}", entry.name()));
            specs.extend(plan.cases.iter().map(|c| c.spec()));
        }
        specs
    }

    #[test]
    fn preset_disk_cases_are_direct_unless_the_block_is_below_a_sector() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["quick", "standard", "full"] {
            let specs = preset_specs(name, "disk", dir.path());
            assert!(!specs.is_empty(), "{name}");
            for spec in &specs {
                let block = spec.params.block_bytes.unwrap();
                let direct = spec.params.direct.unwrap();
                // Every logical block is 512 B to 4 KiB: at or above 4 KiB a binary size is whole
                // sectors on any device, below 512 B it is not a sector on any.
                if block >= 4096 {
                    assert!(direct, "{name}: {} runs buffered", spec.id);
                    assert!(
                        block.is_power_of_two() || block % (1 << 20) == 0,
                        "{}",
                        spec.id
                    );
                }
                if block < 512 {
                    assert!(!direct, "{name}: {}", spec.id);
                    assert!(spec.label.contains("buffered"), "{}", spec.label);
                }
            }
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    /// The roofline is in the standard and full matrices, not in the quick one.
    #[test]
    fn the_standard_and_full_presets_draw_the_roofline_and_quick_does_not() {
        let dir = tempfile::tempdir().unwrap();
        for (name, wanted) in [("quick", false), ("standard", true), ("full", true)] {
            let specs = preset_specs(name, "roofline", dir.path());
            assert_eq!(!specs.is_empty(), wanted, "{name}");
            if wanted {
                for op in ["compute", "bandwidth", "sweep", "model"] {
                    assert!(specs.iter().any(|s| s.op == op), "{name}: no {op}");
                }
            }
        }
    }

    #[test]
    fn the_full_preset_has_the_disk_latency_sweep_and_one_byte_ops() {
        let dir = tempfile::tempdir().unwrap();
        let specs = preset_specs("full", "disk", dir.path());
        let find = |op: &str, block: u64, threads: usize, by_count: bool| {
            specs.iter().find(|s| {
                s.op == op
                    && s.params.block_bytes == Some(block)
                    && s.params.threads == Some(threads)
                    && s.params.queue_depth == Some(1)
                    && s.params.other.contains_key("ios_per_repetition") == by_count
            })
        };
        for op in ["randread", "randwrite"] {
            for threads in [1, 2, 4, 8, 16, 32, 64, 128] {
                let s =
                    find(op, 1024, threads, true).unwrap_or_else(|| panic!("{op} 1KiB t{threads}"));
                assert_eq!(s.params.other["ios_per_repetition"], 100_000, "{}", s.id);
                assert_eq!(s.params.direct, Some(true), "{}", s.id);
            }
        }
        for op in ["seqread", "seqwrite", "randread", "randwrite"] {
            for threads in [1, 2] {
                let s = find(op, 1, threads, false).unwrap_or_else(|| panic!("{op} 1B t{threads}"));
                assert_eq!(s.params.direct, Some(false), "{}", s.id);
            }
        }
    }

    #[test]
    fn the_standard_and_full_presets_time_round_trips_at_one_to_eight_streams() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["standard", "full"] {
            let specs = preset_specs(name, "net", dir.path());
            for proto in ["tcp", "udp"] {
                for streams in [1, 2, 4, 8] {
                    assert!(
                        specs.iter().any(|s| s.op == format!("{proto}-latency")
                            && s.params.streams == Some(streams)),
                        "{name}: no {proto} RTT at {streams} streams"
                    );
                }
            }
        }
    }
}
