//! `peakbench explain RUN`: the findings of a stored run or of a JSON results file, judged
//! from what the document carries (its results, their evidence, the run's evidence) and the
//! earlier runs of the same hardware in the history. It never reads this machine: a run
//! imported from another machine, or measured here before something changed, is judged as it
//! was measured.

use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::Args;

use crate::history::{load_named, short_command};
use crate::options::{DbArgs, Json};
use crate::text::printable;

#[derive(Args, Debug)]
pub(crate) struct ExplainArgs {
    /// The run: an id from 'peakbench history', `latest`, `previous`, or a JSON results file
    #[arg(default_value = "latest")]
    pub run: String,
    #[command(flatten)]
    pub json: Json,
    #[command(flatten)]
    pub db: DbArgs,
}

/// Loads the run, judges it against its past and prints the findings.
pub(crate) fn run(args: &ExplainArgs) -> Result<ExitCode> {
    let (id, report) = load_named(&args.run, &args.db)
        .with_context(|| format!("cannot explain {}", printable(&args.run)))?;
    let past = super::past_runs(&args.db, &report, id);
    let findings = super::judge(&report, &past);
    if args.json.on {
        let json = serde_json::to_string_pretty(&findings)?;
        println!("{}", crate::text::json_for_terminal(&json));
        return Ok(ExitCode::SUCCESS);
    }
    let which = match id {
        Some(id) => format!("run {id}"),
        None => args.run.clone(),
    };
    println!(
        "{}: {} on {}, {} ({} earlier run{} of this hardware in the history)\n",
        printable(&which),
        printable(&short_command(&report.command.join(" "))),
        printable(&report.host.hostname),
        printable(&report.started_at),
        past.len(),
        if past.len() == 1 { "" } else { "s" }
    );
    print!("{}", crate::report::findings::render_text(&findings));
    Ok(ExitCode::SUCCESS)
}
