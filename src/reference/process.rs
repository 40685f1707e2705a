//! Running a program bounded: in a process group of its own ([`Group`]), killed with all it
//! started when its time passes or a stop is requested, its output read on helper threads; the
//! server a tool needs, started first and waited for; descriptors handed to a child.

use std::io::Read;
use std::net::TcpStream;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::interrupt::{self, Group};

use super::{NoValue, Ready, SERVER_START, Server};

/// Where a run learns that it must stop: Ctrl-C ([`interrupt`]), or in tests a flag of their
/// own (the process's flag would stop every other test running beside them).
pub(super) trait StopSignal {
    fn requested(&self) -> bool;
    /// A descriptor that becomes readable when the stop is requested, to sleep on.
    fn wake_fd(&self) -> Option<RawFd>;
}

/// The process's Ctrl-C and SIGTERM.
pub(super) struct CtrlC;

impl StopSignal for CtrlC {
    fn requested(&self) -> bool {
        interrupt::requested()
    }

    fn wake_fd(&self) -> Option<RawFd> {
        interrupt::wake_fd()
    }
}

impl Server {
    /// Starts the server and waits until it is ready.
    pub(super) fn start(
        &self,
        program: &Path,
        name: &str,
        stop: &dyn StopSignal,
    ) -> Result<Group, NoValue> {
        let shown = match self.args.first() {
            Some(first) => format!("{name} {first}"),
            None => name.to_string(),
        };
        let mut server = Group::spawn(
            Command::new(program)
                .args(&self.args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        )
        .map_err(|e| NoValue::Why(format!("cannot start {shown}: {e}")))?;
        let until = Instant::now() + SERVER_START;
        loop {
            let ready = match self.ready {
                Ready::Listening(port) => tcp_listening(port),
                Ready::Accepting(addr) => {
                    TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok()
                }
                Ready::After(wait) => !pause(wait, stop),
            };
            if stop.requested() {
                return Err(NoValue::Interrupted);
            }
            if ready {
                return Ok(server);
            }
            if server.exited().unwrap_or(false) {
                let status = server.end().map_err(|e| NoValue::Why(e.to_string()))?;
                return Err(NoValue::Why(format!(
                    "{shown} ended ({status}) before it was ready"
                )));
            }
            if Instant::now() >= until {
                return Err(NoValue::Why(format!(
                    "{shown} did not start listening within {}",
                    humantime::format_duration(SERVER_START)
                )));
            }
            if pause(Duration::from_millis(20), stop) {
                return Err(NoValue::Interrupted);
            }
        }
    }
}

/// Whether a TCP socket listens on `port` (any address), from /proc/net/tcp and tcp6.
fn tcp_listening(port: u16) -> bool {
    let wanted = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|table| {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        text.lines().skip(1).any(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.len() > 3 && fields[1].ends_with(&wanted) && fields[3] == "0A"
        })
    })
}

/// Sleeps for `wait` or until a stop is requested; whether it was.
fn pause(wait: Duration, stop: &dyn StopSignal) -> bool {
    if stop.requested() {
        return true;
    }
    match stop.wake_fd() {
        Some(fd) => {
            let mut wake = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = wait.as_millis().min(i32::MAX as u128) as i32;
            // SAFETY: one live pollfd; EINTR and a timeout both end in the check below.
            unsafe { libc::poll(&mut wake, 1, ms) };
        }
        None => std::thread::sleep(wait),
    }
    stop.requested()
}

/// What a finished tool printed.
#[derive(Debug)]
pub(crate) struct ToolOutput {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Makes `cmd`'s child inherit descriptor `fd` under the same number. peakbench opens every
/// descriptor close-on-exec; the flag is cleared in the child only, between fork and exec, so
/// no other program started meanwhile (by another thread) inherits it. `fd` must be 3 or more
/// (the child's standard streams are set up over 0–2) and stay open until the child is started.
pub(crate) fn inherit_fd(cmd: &mut Command, fd: RawFd) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the child between fork and exec and makes only
    // async-signal-safe calls (fcntl) on a descriptor of the child's own table.
    unsafe {
        cmd.pre_exec(move || {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags < 0 || libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
}

/// A duplicate of `fd` numbered 3 or more, close-on-exec: what [`inherit_fd`] passes on.
pub(crate) fn dup_for_child(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC takes a descriptor and a lowest number; a non-negative result is
    // a new descriptor that nothing else owns.
    let new = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if new < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: as above, `new` is ours alone.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// Runs `cmd` (`name` in messages) to its end in a process group of its own, killed with all
/// it started when `timeout` passes or Ctrl-C is pressed: what it printed, or why nothing.
pub(crate) fn run_for_at_most(
    cmd: &mut Command,
    name: &str,
    timeout: Duration,
) -> Result<ToolOutput, String> {
    run_bounded(cmd, name, timeout, &CtrlC).map_err(|e| match e {
        NoValue::Interrupted => format!("{name} was interrupted"),
        NoValue::Why(why) => why,
    })
}

/// The command line as a user would type it in a shell (arguments with spaces or quotes quoted).
pub(crate) fn command_line(program: &Path, args: &[String]) -> String {
    std::iter::once(program.display().to_string())
        .chain(args.iter().map(|a| {
            if a.is_empty() || a.contains(|c: char| c.is_whitespace() || c == '\'') {
                format!("'{}'", a.replace('\'', r"'\''"))
            } else {
                a.clone()
            }
        }))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `cmd` (`name` in notes) to completion, or kills it when `timeout` passes or a stop is
/// requested.
///
/// Output is read on helper threads so a chatty tool cannot block on a full pipe.
pub(super) fn run_bounded(
    cmd: &mut Command,
    name: &str,
    timeout: Duration,
    stop: &dyn StopSignal,
) -> Result<ToolOutput, NoValue> {
    let mut group = Group::spawn(
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .map_err(|e| NoValue::Why(format!("cannot start {name}: {e}")))?;
    let mut out = group.child().stdout.take().expect("piped stdout");
    let mut err = group.child().stderr.take().expect("piped stderr");
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    // Whatever happens, the whole group is killed before the leader is reaped: a process the
    // tool left behind would hold the output pipes open (and the readers with them).
    let status = match wait_until(&mut group, Instant::now() + timeout, stop) {
        Ok(true) => group
            .end()
            .map_err(|e| NoValue::Why(format!("waiting for {name}: {e}")))?,
        ended => {
            let _ = group.end();
            if stop.requested() {
                return Err(NoValue::Interrupted);
            }
            return Err(NoValue::Why(match ended {
                Err(e) => format!("waiting for {name}: {e}"),
                _ => format!(
                    "{name} did not finish within {} and was killed",
                    humantime::format_duration(timeout)
                ),
            }));
        }
    };
    Ok(ToolOutput {
        status,
        stdout: out_reader.join().unwrap_or_default(),
        stderr: err_reader.join().unwrap_or_default(),
    })
}

/// Waits until the group's leader exits (`true`, not yet reaped), or `deadline` passes or a
/// stop is requested (`false`, the leader still running).
///
/// It sleeps in one poll(2) on the child's pidfd and the stop's eventfd rather than waking
/// every few milliseconds to look: such a wake-up is a timer firing on some CPU for the tool's
/// whole run, and on a VM a periodic timer on the CPU where a thread waits for I/O changes how
/// fast that thread wakes (docs/disk.md), so it would change what fio measures at QD 1.
/// Kernels without pidfd_open (before 5.3) get the 20 ms look instead.
fn wait_until(
    group: &mut Group,
    deadline: Instant,
    stop: &dyn StopSignal,
) -> std::io::Result<bool> {
    let leader = group.child().id() as libc::pid_t;
    // SAFETY: pidfd_open takes a pid and flags; a non-negative result is a descriptor we own.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, leader, 0) };
    // SAFETY: as above, the descriptor is new and ours alone.
    let pidfd = (pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd as i32) });
    loop {
        if group.exited()? {
            return Ok(true);
        }
        let now = Instant::now();
        if stop.requested() || now >= deadline {
            return Ok(false);
        }
        let left = deadline - now;
        match (&pidfd, stop.wake_fd()) {
            (Some(pidfd), Some(wake)) => {
                let mut fds = [pidfd.as_raw_fd(), wake].map(|fd| libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                });
                let ms = left.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
                // SAFETY: `fds` is a live array of two pollfds. EINTR and a timeout both end
                // in the checks above.
                unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
            }
            _ => std::thread::sleep(left.min(Duration::from_millis(20))),
        }
    }
}

/// The last non-empty line of a tool's output, for notes.
pub(super) fn last_line(text: &str) -> &str {
    text.lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
}
