//! Ctrl-C (SIGINT) and SIGTERM: the first one asks the run to stop at the end of the current
//! chunk of work, so the cases already measured are written out and temporary files are removed
//! by their owners as usual; a second one removes the registered temporary files and exits at
//! once with status 130.
//!
//! Code that blocks for long (waiting on a reference tool) can sleep in poll(2) on
//! [`wake_fd`], which becomes readable with the request, instead of waking now and then to look
//! at the flag.
//!
//! External tools run as a [`Group`]: a process group of their own, so that ending it ends
//! everything the tool started (mpirun's ranks, a server's children), not only the program
//! peakbench started. The second Ctrl-C ends every group still running before it exits.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

static REQUESTED: AtomicBool = AtomicBool::new(false);
static TEMPORARY: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static WAKE: OnceLock<Option<OwnedFd>> = OnceLock::new();
/// Process groups of the tools running now ([`Group`]), ended if the process must exit at once.
static GROUPS: Mutex<Vec<libc::pid_t>> = Mutex::new(Vec::new());

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
            end_groups();
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

fn end_groups() {
    if let Ok(groups) = GROUPS.try_lock() {
        for &group in groups.iter() {
            // SAFETY: killpg takes a group id and a signal, no pointers.
            unsafe { libc::killpg(group, libc::SIGKILL) };
        }
    }
}

/// A child process that leads a process group of its own, with everything it starts. Ending it
/// ([`Group::end`], or dropping it) kills the whole group before the leader is reaped, so
/// nothing the tool started outlives it; the kernel kills the leader if the thread that
/// started it dies (`PR_SET_PDEATHSIG`), and a second Ctrl-C kills every group.
pub struct Group {
    child: Child,
    ended: Option<ExitStatus>,
}

impl Group {
    /// Spawns `cmd` as the leader of a new process group.
    pub fn spawn(cmd: &mut Command) -> std::io::Result<Group> {
        use std::os::unix::process::CommandExt;
        let parent = std::process::id() as libc::pid_t;
        cmd.process_group(0);
        // SAFETY: the closure runs in the child between fork and exec and only makes two
        // async-signal-safe system calls (prctl, getppid) on no shared state.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                ) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent died before the prctl: nobody would kill us.
                if libc::getppid() != parent {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            })
        };
        let mut groups = GROUPS.lock().unwrap_or_else(|e| e.into_inner());
        let child = cmd.spawn()?;
        groups.push(child.id() as libc::pid_t);
        Ok(Group { child, ended: None })
    }

    /// The leader, e.g. to take its pipes. Do not wait on it: [`Group::exited`] and
    /// [`Group::end`] do, in the order that keeps its group id from being reused.
    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Whether the leader has exited; it is not reaped, so its group id stays its own.
    pub fn exited(&self) -> std::io::Result<bool> {
        if self.ended.is_some() {
            return Ok(true);
        }
        // SAFETY: an all-zero siginfo_t is a valid value to be written over.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is a live siginfo_t; WNOWAIT leaves the child waitable.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                self.child.id(),
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: waitid filled `info` (or left it zeroed: no child has changed state).
        Ok(unsafe { info.si_pid() } != 0)
    }

    /// Kills the whole group (whatever is left of it) and reaps the leader: its exit status.
    pub fn end(&mut self) -> std::io::Result<ExitStatus> {
        if let Some(status) = self.ended {
            return Ok(status);
        }
        let leader = self.child.id() as libc::pid_t;
        // SAFETY: killpg takes a group id and a signal, no pointers. The leader is not reaped
        // yet, so the group id is still this group's.
        unsafe { libc::killpg(leader, libc::SIGKILL) };
        let status = self.child.wait();
        GROUPS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|&g| g != leader);
        let status = status?;
        self.ended = Some(status);
        Ok(status)
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let _ = self.end();
    }
}
