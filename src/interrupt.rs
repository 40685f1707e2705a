//! Ctrl-C (SIGINT) and SIGTERM: the first one asks the run to stop at the end of the current
//! chunk of work, so the cases already measured are written out and temporary files are removed
//! by their owners as usual; a second one removes the registered temporary files and exits at
//! once with status 130.
//!
//! Code that blocks for long (waiting on a reference tool) can sleep in poll(2) on
//! [`wake_fd`], which becomes readable with the request, instead of waking now and then to look
//! at the flag.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

static REQUESTED: AtomicBool = AtomicBool::new(false);
static TEMPORARY: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static WAKE: OnceLock<Option<OwnedFd>> = OnceLock::new();

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
    wake_waiters();
}

/// An eventfd that is readable once the run has been asked to stop (it stays readable), or
/// `None` where the kernel gives none; waiters then fall back to looking at [`requested`].
pub fn wake_fd() -> Option<RawFd> {
    WAKE.get_or_init(|| {
        // SAFETY: eventfd takes no pointers; a non-negative result is a new descriptor we own.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        // SAFETY: a non-negative `fd` is the new eventfd, owned by nobody else.
        (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
    })
    .as_ref()
    .map(|fd| fd.as_raw_fd())
}

fn wake_waiters() {
    if let Some(fd) = wake_fd() {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live buffer to our eventfd; a full counter (EAGAIN)
        // only means it is readable already.
        unsafe { libc::write(fd, one.as_ptr().cast(), one.len()) };
    }
}

/// Installs the handler for SIGINT and SIGTERM. Call once, early in main.
pub fn install() -> anyhow::Result<()> {
    ctrlc::set_handler(|| {
        if REQUESTED.swap(true, Ordering::SeqCst) {
            remove_temporary_files();
            std::process::exit(130);
        }
        wake_waiters();
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
