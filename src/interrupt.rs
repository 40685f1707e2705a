//! Ctrl-C (SIGINT) and SIGTERM: the first one asks the run to stop at the end of the current
//! chunk of work, so the cases already measured are written out and temporary files are removed
//! by their owners as usual; a second one removes the registered temporary files and exits at
//! once with status 130.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);
static TEMPORARY: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// The error a run returns when it stopped because the user asked it to.
#[derive(Debug, thiserror::Error)]
#[error("interrupted")]
pub struct Interrupted;

/// Whether the user asked the run to stop.
#[inline]
pub fn requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
}

/// Asks the run to stop, as Ctrl-C does (also used by tests and time limits).
pub fn request() {
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Installs the handler for SIGINT and SIGTERM. Call once, early in main.
pub fn install() -> anyhow::Result<()> {
    ctrlc::set_handler(|| {
        if REQUESTED.swap(true, Ordering::SeqCst) {
            remove_temporary_files();
            std::process::exit(130);
        }
        eprintln!("\nstopping after the current step (Ctrl-C again to quit at once)");
    })?;
    Ok(())
}

/// Registers a file this process created, to be removed if the process must exit at once.
pub fn register_temporary(path: &Path) {
    TEMPORARY.lock().unwrap().push(path.to_path_buf());
}

/// Forgets a file that its owner has removed (or decided to keep).
pub fn unregister_temporary(path: &Path) {
    TEMPORARY.lock().unwrap().retain(|p| p != path);
}

fn remove_temporary_files() {
    if let Ok(paths) = TEMPORARY.try_lock() {
        for path in paths.iter() {
            let _ = std::fs::remove_file(path);
        }
    }
}
