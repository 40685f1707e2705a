use std::process::ExitCode;

use clap::Parser;
use clap::error::ErrorKind;
use peakbench::app::{self, UsageError};
use peakbench::cli::Cli;

fn main() -> ExitCode {
    // A closed pipe (`peakbench … | head`) ends the program quietly, as for any Unix filter.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
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
            return ExitCode::from(2);
        }
        Err(error) => {
            eprintln!("Error: {}", one_line(&error));
            return ExitCode::from(2);
        }
    };
    if let Err(error) = peakbench::interrupt::install() {
        eprintln!("Error: cannot install the Ctrl-C handler: {error:#}");
        return ExitCode::from(1);
    }
    match app::run(cli) {
        Ok(code) => code,
        Err(error) if error.is::<UsageError>() => {
            eprintln!("Error: {error}");
            ExitCode::from(2)
        }
        Err(error) => {
            eprintln!("Error: {error:#}");
            ExitCode::from(1)
        }
    }
}

/// clap's message on one line: the first line of its rendering, and its tip if it has one.
fn one_line(error: &clap::Error) -> String {
    let text = error.render().to_string();
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines
        .next()
        .unwrap_or("invalid arguments")
        .trim_start_matches("error: ")
        .to_string();
    match lines.find(|l| l.starts_with("tip:")) {
        Some(tip) => format!("{first} ({tip}; see --help)"),
        None => format!("{first} (see --help)"),
    }
}
