//! A workload is one benchmark command: its flags, and how it turns them into a [`Plan`].
//!
//! A subsystem implements [`Benchmark`] for each command it has (`cpu`, `cpu linpack`, …) and
//! adds one line to [`crate::registry`]; the command line, the dispatch, the table names of
//! `peakbench run` configs and `--dry-run` all follow from that list. The flags every benchmark
//! shares (repetitions, output, peak factors) are added by the command line, not by each
//! workload, and reach the plan through the [`Context`].

use std::marker::PhantomData;
use std::process::ExitCode;

use anyhow::Result;
use clap::{ArgMatches, Args, FromArgMatches};

use crate::plan::{Context, Plan};

/// One benchmark command, as the registry holds it.
pub trait Workload: Sync {
    /// Its table in a config file and its key in the document's configuration, e.g. `mem-latency`.
    fn name(&self) -> &'static str;
    /// The words of its command, e.g. `["mem", "latency"]`.
    fn path(&self) -> &'static [&'static str];
    /// One line for `--help`.
    fn about(&self) -> &'static str;
    /// Its own flags, on a command named after the last word of its path.
    fn command(&self) -> clap::Command;
    /// Its cases for the flags in `matches`.
    fn plan(&self, matches: &ArgMatches, ctx: &Context) -> Result<Plan>;
    /// A command of the same subsystem that is not a benchmark (`net serve`), if any.
    fn direct(&self) -> Option<&'static dyn Direct> {
        None
    }
}

/// A command that runs on its own rather than as a plan of cases (`net serve`).
pub trait Direct: Sync {
    /// The words of its command, e.g. `["net", "serve"]`.
    fn path(&self) -> &'static [&'static str];
    fn about(&self) -> &'static str;
    fn command(&self) -> clap::Command;
    fn run(&self, matches: &ArgMatches) -> Result<ExitCode>;
}

/// What a subsystem writes for each of its benchmark commands.
pub(crate) trait Benchmark: Sync + 'static {
    const NAME: &'static str;
    const PATH: &'static [&'static str];
    const ABOUT: &'static str;
    /// The command's own flags.
    type Args: Args + FromArgMatches;
    fn plan(args: &Self::Args, ctx: &Context) -> Result<Plan>;
    /// A direct command of the same subsystem.
    fn direct() -> Option<&'static dyn Direct> {
        None
    }
}

/// A [`Benchmark`] as a [`Workload`]: the registry's entries are `&Registered::<B>::NEW`.
pub(crate) struct Registered<B>(PhantomData<fn() -> B>);

impl<B> Registered<B> {
    pub(crate) const NEW: Registered<B> = Registered(PhantomData);
}

impl<B: Benchmark> Workload for Registered<B> {
    fn name(&self) -> &'static str {
        B::NAME
    }

    fn path(&self) -> &'static [&'static str] {
        B::PATH
    }

    fn about(&self) -> &'static str {
        B::ABOUT
    }

    fn command(&self) -> clap::Command {
        let name = B::PATH.last().expect("a workload has a command word");
        B::Args::augment_args(clap::Command::new(*name).about(B::ABOUT))
    }

    fn plan(&self, matches: &ArgMatches, ctx: &Context) -> Result<Plan> {
        let args = B::Args::from_arg_matches(matches).map_err(|e| {
            crate::error::usage(format!("{}: {}", B::PATH.join(" "), e.to_string().trim()))
        })?;
        B::plan(&args, ctx)
    }

    fn direct(&self) -> Option<&'static dyn Direct> {
        B::direct()
    }
}

/// The plan of benchmark `B` for a command line (its own flags and the shared groups, as
/// `argv` after the program name), for tests of planning against a fixture context.
#[cfg(test)]
pub(crate) fn plan_for<B: Benchmark>(argv: &[&str], ctx: &Context) -> Result<Plan> {
    let command = Registered::<B>::NEW.command();
    let matches = command
        .try_get_matches_from(argv)
        .map_err(|e| crate::error::usage(e.to_string()))?;
    Registered::<B>::NEW.plan(&matches, ctx)
}
