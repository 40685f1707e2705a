//! The command line: the commands that are not workloads (`sysinfo`, `run`, the history), and
//! the whole tree with every registered workload (and its direct command) in its place, each
//! with the option groups every benchmark shares.

use std::path::PathBuf;

use anyhow::Result;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::history::HistoryCommand;
use crate::options::{Json, OutputArgs, PeakArgs, RunnerArgs};
// `peakbench run --preset` and `cluster run --preset` take the same presets (config.rs).
pub(crate) use crate::config::{ServerArg, SuiteArgs};
use crate::registry::WORKLOADS;
use crate::workload::{Direct, Workload};

#[derive(Parser, Debug)]
#[command(
    name = "peakbench",
    version,
    about = "How close this machine comes to the peak of its CPU, memory, disk and network",
    after_help = "Exit codes: 0 done, 1 a measurement failed (check: a regression), 2 bad input, 3 check: no baseline for this hardware, 130 interrupted (results so far kept).\n\
                  Sizes: KB, MB, GB are powers of 1000; KiB, MiB, GiB powers of 1024; a bare number is bytes."
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: TopCommand,
}

/// The commands that measure nothing themselves or run a whole matrix.
#[derive(Subcommand, Debug)]
pub(crate) enum TopCommand {
    /// The machine's inventory and theoretical peaks, each value with its source
    Sysinfo(SysinfoArgs),
    /// Runs a preset of every benchmark peakbench has
    Run(RunArgs),
    /// Every host of an MPI job at once: the node-local suite, the all-pairs network matrix, the slow node (build with --features mpi)
    Cluster(crate::cluster::ClusterArgs),
    /// Judges a short run against this hardware's baseline: exit 0 healthy, 1 a regression, 3 no baseline
    ///
    /// Runs the check preset (about 30 s on 2 cores), judges each case against the baseline of
    /// this hardware fingerprint by the findings' Mann–Whitney U test and a tolerance, measures a
    /// suspect case again with more repetitions before it fails, and names the causes read on
    /// the machine. For Slurm's HealthCheckProgram (--reason) and CI (--junit); see docs/check.md.
    Check(crate::check::CheckArgs),
    /// Baselines for 'peakbench check': saved from the history, exported, imported, listed, shown
    #[command(subcommand)]
    Baseline(crate::check::baseline_cmd::BaselineCommand),
    #[command(flatten)]
    History(HistoryCommand),
    /// Judges a stored or imported run from the evidence it carries (never re-reads this machine)
    ///
    /// Prints each result's verdict (at-limit, below, above-limit, unstable, unknown), what it
    /// was judged against (the peak × the band of its class, the standard tool, the earlier runs
    /// of the same hardware in the history, the fleet, a limit the machine imposed) and the
    /// causes read on the machine while the run ran, each with its evidence and remedy; the
    /// same findings the text output and the reports open with. A run imported from another
    /// machine is judged as it was measured there.
    Explain(crate::findings::explain::ExplainArgs),
    /// Shell completions on stdout, e.g. `peakbench completions bash > /etc/bash_completion.d/peakbench`
    Completions(CompletionsArgs),
    /// The manual page (roff) on stdout, or one page per command into a directory with --dir
    Man(ManArgs),
}

#[derive(Args, Debug)]
pub(crate) struct CompletionsArgs {
    /// The shell to complete in
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Args, Debug)]
pub(crate) struct ManArgs {
    /// Write peakbench.1 and a page for every command (peakbench-cpu.1, peakbench-net-serve.1, …)
    /// into this directory instead
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub(crate) struct SysinfoArgs {
    #[command(flatten)]
    pub json: Json,
    /// Read the inventory from a folder of a machine read off earlier (bench/read-machine.sh),
    /// with the clock its clock-independent.txt gives, instead of from this machine (tests)
    #[arg(long, value_name = "DIR", hide = true)]
    pub sysroot: Option<PathBuf>,
    #[command(flatten)]
    pub peak: PeakArgs,
}

#[derive(Args, Debug)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub suite: SuiteArgs,
    #[command(flatten)]
    pub net: ServerArg,
    #[command(flatten)]
    pub runner: RunnerArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub peak: PeakArgs,
}

/// The option groups of every benchmark command, after its own flags.
pub(crate) fn with_shared_groups(cmd: clap::Command) -> clap::Command {
    PeakArgs::augment_args(OutputArgs::augment_args(RunnerArgs::augment_args(cmd)))
}

/// The whole command tree.
pub(crate) fn command() -> clap::Command {
    let mut cmd = Cli::command();
    let mut order = 1;
    let mut place = |cmd: clap::Command, path: &[&str], sub: clap::Command| -> clap::Command {
        order += 1;
        let sub = sub.display_order(order);
        match path {
            [_] => cmd.subcommand(sub),
            [parent, ..] => cmd.mut_subcommand(*parent, |p| {
                p.args_conflicts_with_subcommands(true).subcommand(sub)
            }),
            [] => unreachable!("a command has a name"),
        }
    };
    for workload in WORKLOADS {
        // The groups' own doc lines would become the command's about: it is set last.
        let sub = with_shared_groups(workload.command()).about(workload.about());
        cmd = place(cmd, workload.path(), sub);
        if let Some(direct) = workload.direct() {
            cmd = place(cmd, direct.path(), direct.command().about(direct.about()));
        }
    }
    cmd = cmd.mut_subcommand("sysinfo", |c| c.display_order(1));
    let later: Vec<String> = cmd
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .filter(|n| n != "sysinfo" && !WORKLOADS.iter().any(|w| w.path()[0] == n))
        .collect();
    for (i, name) in later.iter().enumerate() {
        cmd = cmd.mut_subcommand(name, |c| c.display_order(100 + i));
    }
    cmd
}

/// A negative number given as a flag's value (`--threads -1`, `--size -5GiB`): clap takes such a
/// token for an unknown flag and names none, so every command line is scanned for one first, and
/// the refusal names the flag it follows. No flag of peakbench takes a negative value (the
/// `--flag=-1` form reaches the flag's own parser, which refuses it too).
pub(crate) fn negative_number<S: AsRef<std::ffi::OsStr>>(argv: &[S]) -> Option<String> {
    let argv: Vec<std::borrow::Cow<str>> =
        argv.iter().map(|a| a.as_ref().to_string_lossy()).collect();
    for (i, token) in argv.iter().enumerate().skip(1) {
        if token == "--" {
            return None;
        }
        let rest = token.strip_prefix('-').unwrap_or("");
        let digits = rest.strip_prefix('.').unwrap_or(rest);
        if !digits.starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        let flag = argv[i - 1].as_ref();
        let flag = flag.split('=').next().unwrap_or(flag);
        return Some(if flag.starts_with('-') {
            format!("{flag}: '{token}' is negative; give a positive value (see --help)")
        } else {
            format!("'{token}': a negative number is not accepted here (see --help)")
        });
    }
    None
}

/// What the command line asks for.
pub(crate) enum Parsed<'a> {
    /// A benchmark command and its matches (own flags and the shared groups).
    Workload(&'static dyn Workload, &'a ArgMatches),
    /// A direct command of a workload (`net serve`).
    Direct(&'static dyn Direct, &'a ArgMatches),
    Top(Box<TopCommand>),
}

/// Finds the command the matches are for.
pub(crate) fn parse(matches: &ArgMatches) -> Result<Parsed<'_>> {
    let mut path: Vec<&str> = Vec::new();
    let mut deepest = matches;
    while let Some((name, sub)) = deepest.subcommand() {
        path.push(name);
        deepest = sub;
    }
    if let Some(workload) = crate::registry::by_path(&path) {
        return Ok(Parsed::Workload(workload, deepest));
    }
    if let Some(direct) = WORKLOADS
        .iter()
        .filter_map(|w| w.direct())
        .find(|d| d.path() == path.as_slice())
    {
        return Ok(Parsed::Direct(direct, deepest));
    }
    Ok(Parsed::Top(Box::new(TopCommand::from_arg_matches(
        matches,
    )?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_negative_number_is_refused_naming_the_flag_it_follows() {
        let refused = |argv: &[&str]| negative_number(argv);
        assert_eq!(
            refused(&["peakbench", "cpu", "--threads", "-1"]).unwrap(),
            "--threads: '-1' is negative; give a positive value (see --help)"
        );
        assert!(
            refused(&["peakbench", "disk", "-s", "-5GiB"])
                .unwrap()
                .starts_with("-s: '-5GiB'")
        );
        assert!(
            refused(&["peakbench", "mem", "-b", "-.5KiB"])
                .unwrap()
                .starts_with("-b:")
        );
        assert!(
            refused(&["peakbench", "show", "-3"])
                .unwrap()
                .contains("'-3'")
        );
        assert_eq!(
            refused(&["peakbench", "cpu", "--threads", "1", "-d", "1s"]),
            None
        );
        assert_eq!(refused(&["peakbench", "disk", "--dir", "-x"]), None);
        assert_eq!(refused(&["peakbench", "x", "--", "-1"]), None);
    }

    #[test]
    fn the_command_line_is_consistent() {
        command().debug_assert();
    }

    #[test]
    fn every_workload_and_direct_command_is_reachable() {
        for workload in WORKLOADS {
            let mut argv = vec!["peakbench"];
            argv.extend(workload.path());
            let matches = command().try_get_matches_from(&argv).unwrap();
            match parse(&matches).unwrap() {
                Parsed::Workload(w, _) => assert_eq!(w.name(), workload.name()),
                _ => panic!("{argv:?} is not the workload"),
            }
        }
        let matches = command()
            .try_get_matches_from(["peakbench", "net", "serve", "--port", "0"])
            .unwrap();
        assert!(matches!(parse(&matches).unwrap(), Parsed::Direct(..)));
        let matches = command()
            .try_get_matches_from(["peakbench", "history"])
            .unwrap();
        assert!(
            matches!(parse(&matches).unwrap(), Parsed::Top(top) if matches!(*top, TopCommand::History(_)))
        );
    }
}
