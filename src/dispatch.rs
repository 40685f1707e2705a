//! The top of the program: parse the command line, run the command it names, turn the outcome
//! into an exit code. Only `main.rs` names this module.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::error::ErrorKind;

use crate::cli::{self, CompletionsArgs, ManArgs, Parsed, RunArgs, SysinfoArgs, TopCommand};
use crate::config;
use crate::error::{self, Exit, UsageError};
use crate::options::{OutputArgs, PeakArgs, PeakOverrides, RunnerArgs, RunnerOptions};
use crate::plan::LatencyProbe;
use crate::result::{SCHEMA_VERSION, Tool};
use crate::session::{self, HtmlReport};

/// The whole program.
pub fn main() -> ExitCode {
    // A closed pipe (`peakbench … | head`) ends the program quietly, as for any Unix filter.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if argv
        .get(1)
        .is_some_and(|a| a == crate::interrupt::GUARD_ARG)
    {
        return crate::interrupt::guard_main();
    }
    crate::interrupt::enable_guard();
    if let Some(line) = cli::negative_number(&argv) {
        eprintln!("Error: {line}");
        return Exit::Usage.into();
    }
    let matches = match cli::command().try_get_matches_from(argv) {
        Ok(matches) => matches,
        Err(error)
            if matches!(
                error.kind(),
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
            ) =>
        {
            let _ = error.print();
            return ExitCode::SUCCESS;
        }
        Err(error) if error.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = error.print();
            return Exit::Usage.into();
        }
        Err(error) => {
            eprintln!("Error: {}", one_line(&error));
            return Exit::Usage.into();
        }
    };
    if let Err(error) = crate::interrupt::install() {
        eprintln!("Error: cannot install the Ctrl-C handler: {error:#}");
        return Exit::Failed.into();
    }
    match run(&matches) {
        Ok(code) => code,
        Err(error) => {
            let (line, exit) = error::describe(&error);
            eprintln!("{line}");
            exit.into()
        }
    }
}

/// clap's message on one line: its first line, the values it would take, and its tip.
fn one_line(error: &clap::Error) -> String {
    let text = error.render().to_string();
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines
        .next()
        .unwrap_or("invalid arguments")
        .trim_start_matches("error: ")
        .to_string();
    let rest: Vec<&str> = lines.collect();
    let values = rest.iter().find(|l| l.starts_with("[possible values:"));
    let tip = rest.iter().find(|l| l.starts_with("tip:"));
    let mut line = first;
    // "the following required arguments were not provided:" lists them on the next lines.
    if line.ends_with(':') {
        let missing: Vec<&str> = rest
            .iter()
            .copied()
            .take_while(|l| l.starts_with('-') || l.starts_with('<'))
            .collect();
        if !missing.is_empty() {
            line = format!("{line} {}", missing.join(", "));
        }
    }
    if let Some(values) = values {
        line = format!("{line} {values}");
    }
    match tip {
        Some(tip) => format!("{line} ({tip}; see --help)"),
        None => format!("{line} (see --help)"),
    }
}

fn run(matches: &clap::ArgMatches) -> Result<ExitCode> {
    match cli::parse(matches)? {
        Parsed::Workload(workload, matches) => {
            let runner = RunnerOptions::from(&RunnerArgs::from_matches(matches)?);
            let output = OutputArgs::from_matches(matches)?;
            let peak = PeakOverrides::try_from(&PeakArgs::from_matches(matches)?)?;
            let mut ctx = session::context(runner, &peak, &crate::registry::probe());
            if !output.dry_run {
                ctx.latency_probe = LatencyProbe::live();
            }
            let mut plan = workload.plan(matches, &ctx)?;
            let config = std::mem::take(&mut plan.config);
            plan.config = serde_json::json!({ workload.name(): config, "runner": ctx.runner });
            session::execute(plan, &ctx, &output, HtmlReport::None)
        }
        Parsed::Direct(direct, matches) => direct.run(matches),
        Parsed::Top(top) => match *top {
            TopCommand::Sysinfo(args) => sysinfo(&args),
            TopCommand::Run(args) => run_matrix(&args),
            TopCommand::Cluster(args) => crate::cluster::run(&args),
            TopCommand::Check(args) => crate::check::run(&args),
            TopCommand::Baseline(command) => crate::check::baseline_cmd::run(&command),
            TopCommand::History(command) => crate::history::run(&command),
            TopCommand::Explain(args) => crate::findings::explain::run(&args),
            TopCommand::Completions(args) => completions(&args),
            TopCommand::Man(args) => man(&args),
        },
    }
}

/// `peakbench completions SHELL`: the script for the whole tree, workloads included.
fn completions(args: &CompletionsArgs) -> Result<ExitCode> {
    let mut stdout = std::io::stdout().lock();
    clap_complete::generate(args.shell, &mut cli::command(), "peakbench", &mut stdout);
    stdout.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// `peakbench man`: the page of the top command on stdout, or with `--dir` one page per
/// command of the tree (`peakbench-mem-latency.1`), as `man -l` and a `man1` directory read them.
fn man(args: &ManArgs) -> Result<ExitCode> {
    let cmd = cli::command();
    match &args.dir {
        None => {
            let mut stdout = std::io::stdout().lock();
            clap_mangen::Man::new(cmd).render(&mut stdout)?;
            stdout.flush()?;
        }
        Some(dir) => {
            if !dir.is_dir() {
                return Err(crate::error::usage(format!(
                    "--dir: {} is not a directory; create it first",
                    dir.display()
                )));
            }
            clap_mangen::generate_to(cmd, dir)
                .with_context(|| format!("writing the pages into {}", dir.display()))?;
            eprintln!("manual pages written to {}", dir.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The option groups read back from a command's matches.
trait FromMatches: Sized {
    fn from_matches(matches: &clap::ArgMatches) -> Result<Self>;
}

impl<T: clap::FromArgMatches> FromMatches for T {
    fn from_matches(matches: &clap::ArgMatches) -> Result<Self> {
        T::from_arg_matches(matches)
            .map_err(|e| UsageError(e.to_string().trim().to_string()).into())
    }
}

fn sysinfo(args: &SysinfoArgs) -> Result<ExitCode> {
    let peak = PeakOverrides::try_from(&args.peak)?;
    let (host, probes) = match &args.sysroot {
        None => (session::host(), crate::registry::probe()),
        Some(dir) => {
            let host = crate::sysinfo::replay(dir)
                .map_err(|why| crate::error::usage(format!("--sysroot: {why}")))?;
            (host, replayed_probes(dir))
        }
    };
    let peaks = crate::peak::Peaks::compute(&host, &peak, &probes);
    if args.json.on {
        let doc = serde_json::json!({
            "schema_version": SCHEMA_VERSION,
            "tool": Tool::this(),
            "host": host,
            "peaks": peaks,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", crate::report::inventory::render(&host));
        print!("{}", crate::report::peaks::render(&peaks));
    }
    Ok(ExitCode::SUCCESS)
}

/// The clock probe of a machine read off earlier, from its `clock-independent.txt`; no FMA
/// probe (the fixture's own runs hold its rates).
fn replayed_probes(dir: &std::path::Path) -> crate::peak::MeasuredFactors {
    let Some(reading) = crate::sysinfo::clock::from_fixture(dir) else {
        return crate::peak::MeasuredFactors::default();
    };
    let (ghz, detail) = match reading.agreed() {
        Ok(ghz) => (
            Some(ghz),
            format!("clock-independent.txt: {}", reading.describe()),
        ),
        Err(why) => (None, why),
    };
    crate::peak::MeasuredFactors {
        ghz,
        ghz_detail: Some(detail),
        ..Default::default()
    }
}

/// `peakbench run`: every table of a preset or config file, in one session.
fn run_matrix(args: &RunArgs) -> Result<ExitCode> {
    let peak = PeakOverrides::try_from(&args.peak)?;
    let (origin, mut entries) = args.suite.entries()?;
    // The run-wide server applies to every network table that does not name its own.
    args.net.apply(&mut entries);
    // Every table is checked before anything is measured: a typo costs nothing.
    let parsed = entries
        .iter()
        .map(|entry| config::parse_entry(entry, &origin))
        .collect::<Result<Vec<_>, _>>()?;
    let runner = RunnerOptions::from(&args.runner);
    let mut ctx = session::context(runner, &peak, &crate::registry::probe());
    if !args.output.dry_run {
        ctx.latency_probe = LatencyProbe::live();
    }
    let (mut plan, experiments) = config::plan(&entries, &parsed, &ctx, &origin)?;
    plan.config = serde_json::json!({ "experiments": experiments, "runner": ctx.runner });
    args.suite.record(&mut plan.config);
    let html = match &args.suite.html {
        Some(path) => HtmlReport::At(path.clone()),
        None => HtmlReport::Default,
    };
    session::execute(plan, &ctx, &args.output, html)
}
