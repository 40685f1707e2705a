//! `peakbench check --learn N`: N learning checks in one command, each stored in the history as
//! a check without a baseline stores it, then the baseline saved from exactly those runs (as
//! `peakbench baseline save NAME --runs …` would).

use std::process::ExitCode;

use anyhow::{Result, anyhow};

use super::baseline_cmd::{self, Learning};
use super::{CheckArgs, Prepared};
use crate::error::{Exit, UsageError};
use crate::history::baseline;
use crate::session::{Ending, Session};

/// Runs `n` learning checks and saves the baseline `--save-as`; refuses `n` below
/// [`baseline::MIN_RUNS`] and a name already saved (without `--force`) before measuring.
pub(crate) fn run(args: &CheckArgs, prepared: &Prepared, n: u32) -> Result<ExitCode> {
    let n = n as usize;
    baseline_cmd::too_few(
        n,
        "--learn",
        &format!("give --learn {}", baseline::MIN_RUNS),
    )?;
    let name = baseline_cmd::checked_name(&args.save_as, "--save-as")?;
    let file = baseline::saved_dir(&crate::history::db_path(&args.history.db)?)
        .join(format!("{name}.json"));
    if file.exists() && !args.force {
        return Err(UsageError(format!(
            "--save-as: a baseline '{name}' is already saved ({}): give --force to replace it, \
             or another --save-as",
            file.display()
        ))
        .into());
    }
    let mut ids = Vec::with_capacity(n);
    // Each case's runs that no disturbance touched: a run whose findings name one for a case
    // is left out of that case (`baseline::DISTURBANCES`), so up to half as many checks again
    // are run until every case has n clean ones.
    let mut clean: std::collections::BTreeMap<String, usize> = Default::default();
    let most = n + n / 2;
    for i in 1..=most {
        let short = clean.values().filter(|&&c| c < n).count();
        if i > n && short == 0 {
            break;
        }
        if i == n + 1 {
            eprintln!(
                "{short} case{} had a disturbed run among the {n}: learning more, up to \
                 {most} checks",
                if short == 1 { "" } else { "s" }
            );
        }
        let Some((id, report)) = learning_check(args, prepared, i, n)? else {
            return Ok(Exit::Interrupted.into());
        };
        for r in &report.results {
            let count = clean.entry(r.id.clone()).or_default();
            if baseline::disturbance(&report, &r.id).is_none() {
                *count += 1;
            }
        }
        ids.push(id);
    }
    let learning = Learning {
        db: &args.history.db,
        runs: &ids,
        last: n,
        force: args.force,
        tolerance: args.tolerance,
    };
    let (b, _) = baseline_cmd::save_learned(name, &learning)?;
    if args.json.on {
        let json = serde_json::to_string_pretty(&b.show_json())?;
        println!("{}", crate::text::json_for_terminal(&json));
    } else {
        print!("{}", b.render());
    }
    Ok(ExitCode::SUCCESS)
}

/// Learning check `i` (of `n`): measured, judged by the findings, stored in the history; its
/// run id and document, or `None` when it was interrupted (nothing is saved then).
fn learning_check(
    args: &CheckArgs,
    prepared: &Prepared,
    i: usize,
    n: usize,
) -> Result<Option<(i64, crate::result::Report)>> {
    let started = std::time::Instant::now();
    let plan = prepared.plan(args)?;
    if i == 1 {
        for note in &plan.notes {
            eprintln!("note: {note}");
        }
    }
    let mut session = Session::start(prepared.ctx(), plan.config, plan.notes, None)?;
    let ending = session.run(plan.cases, prepared.ctx())?;
    session.add_findings(&args.history.db)?;
    let id = crate::history::store_run(&args.history, &session.report);
    if ending == Ending::Interrupted {
        eprintln!(
            "interrupted after {} learning checks: no baseline saved",
            i - 1
        );
        return Ok(None);
    }
    let id = id.ok_or_else(|| {
        anyhow!("learning check {i} was not stored in the history: nothing to learn from")
    })?;
    eprintln!(
        "learning check {i} of {n}: run {id}, {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(Some((id, session.report)))
}
