//! Ctrl-C (SIGINT) and SIGTERM: the first one asks the run to stop at the end of the current
//! chunk of work, so the cases already measured are written out and temporary files are removed
//! by their owners as usual; a second one removes the registered temporary files and exits at
//! once with status 130.
//!
//! Code that blocks for long (waiting on a reference tool) can sleep in poll(2) on
//! [`wake_fd`], which becomes readable with the request, instead of waking now and then to look
//! at the flag.
//!
//! External tools run as a [`Group`]: a session of their own (and so a process group), so that
//! ending it ends everything the tool started, not only the program peakbench started: mpirun
//! puts each rank in a process group of its own, but every rank stays in mpirun's session. The
//! second Ctrl-C ends every group still running before it exits.
//!
//! peakbench's own death by SIGKILL runs none of its code. The binary therefore starts a
//! guard ([`GUARD_ARG`], [`guard_main`]) with the first tool: a small copy of itself that
//! reads, on a pipe only peakbench writes, the sessions of the tools running now. When the
//! pipe closes (peakbench exited, however it ended) the guard kills whatever is left in those
//! sessions, then exits.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

static REQUESTED: AtomicBool = AtomicBool::new(false);
/// Temporary files by name, each with the device and inode of the file peakbench created there.
static TEMPORARY: Mutex<Vec<(PathBuf, (u64, u64))>> = Mutex::new(Vec::new());
static WAKE: OnceLock<Option<OwnedFd>> = OnceLock::new();
/// Process groups of the tools running now ([`Group`]), ended if the process must exit at once.
static GROUPS: Mutex<Vec<libc::pid_t>> = Mutex::new(Vec::new());
/// Whether this process may start a guard (set by the binary's `main`; unit tests run none).
static GUARD_ENABLED: AtomicBool = AtomicBool::new(false);
/// The write end of the pipe to the guard, once started; `None` inside if it could not start.
static GUARD: Mutex<Option<Option<std::fs::File>>> = Mutex::new(None);

/// The hidden first argument that makes the binary run as the guard ([`guard_main`]).
pub(crate) const GUARD_ARG: &str = "__peakbench-guard";

/// The error a run returns when it stopped because the user asked it to.
#[derive(Debug, thiserror::Error)]
#[error("interrupted")]
pub(crate) struct Interrupted;

/// Whether the user asked the run to stop.
#[inline]
pub(crate) fn requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
}

/// An eventfd that is readable once the run has been asked to stop (it stays readable), or
/// `None` where the kernel gives none; waiters then fall back to looking at [`requested`].
pub(crate) fn wake_fd() -> Option<RawFd> {
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
pub(crate) fn install() -> anyhow::Result<()> {
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

/// Registers a file this process created at `path` and holds open as `file`, to be removed if
/// the process must exit at once. Its device and inode are taken from the open file, so the
/// name is removed then only while it is still that file: a name another process renamed,
/// removed and replaced (with its own file, or a link to one) is left alone.
pub(crate) fn register_temporary(path: &Path, file: &std::fs::File) {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = file.metadata() else {
        return; // unknown identity: never removed by name
    };
    TEMPORARY
        .lock()
        .unwrap()
        .push((path.to_path_buf(), (meta.dev(), meta.ino())));
}

/// Forgets a file that its owner has removed (or decided to keep).
pub(crate) fn unregister_temporary(path: &Path) {
    TEMPORARY.lock().unwrap().retain(|(p, _)| p != path);
}

fn remove_temporary_files() {
    if let Ok(files) = TEMPORARY.try_lock() {
        for (path, created) in files.iter() {
            remove_if_same(path, *created);
        }
    }
}

/// Removes `path` if it is, without following a link, the regular file of device and inode
/// `created`. (The name is looked at, then removed: a swap between the two by a process that
/// can write the directory is not excluded; what is excluded is removing a file that was put
/// there at any earlier time.)
fn remove_if_same(path: &Path, created: (u64, u64)) -> bool {
    use std::os::unix::fs::MetadataExt;
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_file() && (meta.dev(), meta.ino()) == created => {
            std::fs::remove_file(path).is_ok()
        }
        _ => false,
    }
}

fn end_groups() {
    if let Ok(groups) = GROUPS.try_lock() {
        for &group in groups.iter() {
            kill_session(group);
        }
    }
}

/// The session of process `pid` from `/proc/PID/stat` (the sixth field, counted after the
/// command name, which may itself hold spaces and parentheses).
fn session_of(stat: &str) -> Option<libc::pid_t> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(3)?.parse().ok()
}

/// Kills every process of session `sid` (a [`Group`]'s leader's pid) with SIGKILL: its
/// process group first, then whatever /proc shows in the session, in a few passes for
/// processes forked meanwhile. Never this process itself.
pub(crate) fn kill_session(sid: libc::pid_t) {
    if sid <= 1 {
        return;
    }
    // SAFETY: killpg takes a group id and a signal, no pointers.
    unsafe { libc::killpg(sid, libc::SIGKILL) };
    let me = std::process::id() as libc::pid_t;
    for _ in 0..3 {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return;
        };
        let mut found = false;
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<libc::pid_t>().ok())
            else {
                continue;
            };
            if pid == me {
                continue;
            }
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue; // gone in between
            };
            if session_of(&stat) == Some(sid) {
                found = true;
                // SAFETY: kill takes a pid and a signal, no pointers.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        if !found {
            return;
        }
    }
}

/// Lets this process start a guard with its first tool: for the binary's `main` only (a
/// test harness is no peakbench to re-run as a guard).
pub(crate) fn enable_guard() {
    GUARD_ENABLED.store(true, Ordering::SeqCst);
}

/// Tells the guard, starting it first if need be, that session `sid` opened (`+`) or closed
/// (`-`). Without a guard (not enabled, or it could not start) nothing is said: peakbench then
/// keeps only the kernel's guarantee for the leader (`PR_SET_PDEATHSIG`).
fn tell_guard(sign: char, sid: libc::pid_t) {
    use std::io::Write;
    if !GUARD_ENABLED.load(Ordering::SeqCst) {
        return;
    }
    let mut guard = GUARD.lock().unwrap_or_else(|e| e.into_inner());
    let pipe = guard.get_or_insert_with(start_guard);
    if let Some(pipe) = pipe {
        let _ = writeln!(pipe, "{sign}{sid}");
    }
}

/// Starts the guard: this binary with [`GUARD_ARG`], its standard input the read end of a pipe
/// whose write end only this process holds (close-on-exec, so no tool inherits it).
fn start_guard() -> Option<std::fs::File> {
    let exe = std::env::current_exe().ok()?;
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into a live array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return None;
    }
    // SAFETY: both descriptors are new and owned by nobody else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let child = Command::new(exe)
        .arg(GUARD_ARG)
        .stdin(std::process::Stdio::from(read))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    // Reaped by a thread of its own, so an early guard exit leaves no zombie; at peakbench's
    // exit it is re-parented and reaped by init.
    let mut child = child;
    let _ = std::thread::Builder::new()
        .name("guard-reaper".into())
        .spawn(move || child.wait());
    Some(std::fs::File::from(write))
}

/// The guard's whole life: ignore the terminal's signals (Ctrl-C reaches the whole foreground
/// group, and peakbench handles it), read `+SID` and `-SID` lines until the pipe closes, then
/// kill what is left in every session still open. Returns the exit status.
pub(crate) fn guard_main() -> std::process::ExitCode {
    use std::io::BufRead;
    // SAFETY: setting dispositions to SIG_IGN, before any thread starts.
    unsafe {
        for signal in [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGPIPE,
            libc::SIGQUIT,
        ] {
            libc::signal(signal, libc::SIG_IGN);
        }
    }
    let mut open: Vec<libc::pid_t> = Vec::new();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let (sign, sid) = line.split_at(line.len().min(1));
        let Ok(sid) = sid.parse::<libc::pid_t>() else {
            continue;
        };
        match sign {
            "+" => open.push(sid),
            "-" => open.retain(|&s| s != sid),
            _ => {}
        }
    }
    for sid in open {
        kill_session(sid);
    }
    std::process::ExitCode::SUCCESS
}

/// A child process that leads a session (and process group) of its own, with everything it
/// starts. Ending it ([`Group::end`], or dropping it) kills the whole session before the leader
/// is reaped, so nothing the tool started outlives it; the kernel kills the leader if the
/// thread that started it dies (`PR_SET_PDEATHSIG`), the guard kills the session if peakbench
/// dies, and a second Ctrl-C kills every group.
pub(crate) struct Group {
    child: Child,
    ended: Option<ExitStatus>,
}

impl Group {
    /// Spawns `cmd` as the leader of a new session (and so of a new process group).
    pub(crate) fn spawn(cmd: &mut Command) -> std::io::Result<Group> {
        use std::os::unix::process::CommandExt;
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: the closure runs in the child between fork and exec and only makes three
        // async-signal-safe system calls (setsid, prctl, getppid) on no shared state.
        unsafe {
            cmd.pre_exec(move || {
                // A new session: mpirun's ranks, each in a process group of its own, stay in
                // it, so one scan of /proc finds them all.
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
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
        drop(groups);
        tell_guard('+', child.id() as libc::pid_t);
        Ok(Group { child, ended: None })
    }

    /// The leader, e.g. to take its pipes. Do not wait on it: [`Group::exited`] and
    /// [`Group::end`] do, in the order that keeps its group id from being reused.
    pub(crate) fn child(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Whether the leader has exited; it is not reaped, so its group id stays its own.
    pub(crate) fn exited(&self) -> std::io::Result<bool> {
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
    pub(crate) fn end(&mut self) -> std::io::Result<ExitStatus> {
        if let Some(status) = self.ended {
            return Ok(status);
        }
        let leader = self.child.id() as libc::pid_t;
        // The leader is not reaped yet, so the session id is still this group's; the guard
        // forgets it before the reaping frees the number for reuse.
        kill_session(leader);
        tell_guard('-', leader);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The second Ctrl-C removes a temporary file only while its name is still the file
    /// peakbench created.
    #[test]
    fn a_temporary_file_is_removed_only_while_its_name_is_the_one_created() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("peakbench-test.tmp");
        let ours = std::fs::File::create_new(&path).unwrap();
        let created = {
            use std::os::unix::fs::MetadataExt;
            let m = ours.metadata().unwrap();
            (m.dev(), m.ino())
        };
        // Replaced under the same name (a victim's file moved there): left alone.
        std::fs::remove_file(&path).unwrap();
        let keep = ours; // still open: its inode cannot be reused for the victim
        std::fs::write(&path, b"victim").unwrap();
        assert!(!remove_if_same(&path, created));
        assert_eq!(std::fs::read(&path).unwrap(), b"victim");
        // A symbolic link at the name: never followed, never removed.
        std::fs::remove_file(&path).unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"victim").unwrap();
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        assert!(!remove_if_same(&path, created));
        assert!(path.symlink_metadata().is_ok() && victim.exists());
        // The file peakbench created, still at its name: removed.
        std::fs::remove_file(&path).unwrap();
        let mine = dir.path().join("mine.tmp");
        let file = std::fs::File::create_new(&mine).unwrap();
        register_temporary(&mine, &file);
        remove_temporary_files();
        assert!(!mine.exists());
        unregister_temporary(&mine);
        drop(keep);
    }

    #[test]
    fn the_session_is_read_after_the_command_name() {
        assert_eq!(session_of("42 (sleep) S 1 42 40 0 -1"), Some(40));
        // A command name with spaces and a parenthesis of its own.
        assert_eq!(session_of("7 (a) b (c) R 1 7 5 0"), Some(5));
        assert_eq!(session_of("garbage"), None);
    }
}
