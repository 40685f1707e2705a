//! Running the standard tool of a field (likwid-bench, hpcc, fio, iperf3, sockperf, mbw) on the
//! same case, so that each result can carry the tool's value and the ratio to it.
//!
//! A tool that is not installed is not an error: the result gets a [`Reference`] with no value
//! and a note that names the tool and how to install it, and the run goes on. A tool that runs
//! is bounded by a deadline and killed when it passes it, or when the user presses Ctrl-C.

use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::interrupt;
use crate::result::Reference;

/// A standard tool: the program to look for and how to get it.
#[derive(Clone, Copy, Debug)]
pub struct Tool {
    /// Name shown in results, e.g. "likwid-bench".
    pub name: &'static str,
    /// Executable looked up on `PATH`.
    pub program: &'static str,
    /// How to install it, e.g. "apt-get install likwid".
    pub install: &'static str,
}

/// The full path of `program` on `PATH`, if it is there and executable.
pub fn find_program(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

impl Tool {
    pub fn path(&self) -> Option<PathBuf> {
        find_program(self.program)
    }

    /// The reference recorded when the tool is not installed.
    pub fn missing(&self, command: &str) -> Reference {
        Reference {
            tool: self.name.to_string(),
            command: command.to_string(),
            value: None,
            ratio: None,
            note: Some(format!(
                "{} is not installed; install it with `{}` to compare",
                self.program, self.install
            )),
        }
    }

    /// The reference recorded when the tool ran but gave no usable value.
    pub fn failed(&self, command: &str, why: impl std::fmt::Display) -> Reference {
        Reference {
            tool: self.name.to_string(),
            command: command.to_string(),
            value: None,
            ratio: None,
            note: Some(why.to_string()),
        }
    }

    /// The reference recorded when the tool gave a value (the ratio is set by
    /// [`crate::result::BenchResult::with_reference`]).
    pub fn value(&self, command: &str, value: f64, note: Option<String>) -> Reference {
        Reference {
            tool: self.name.to_string(),
            command: command.to_string(),
            value: Some(value),
            ratio: None,
            note,
        }
    }
}

/// What a finished tool printed.
#[derive(Debug)]
pub struct ToolOutput {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

/// The command line as a user would type it (arguments with spaces quoted).
pub fn command_line(program: &Path, args: &[String]) -> String {
    std::iter::once(program.display().to_string())
        .chain(args.iter().map(|a| {
            if a.is_empty() || a.contains(char::is_whitespace) {
                format!("'{a}'")
            } else {
                a.clone()
            }
        }))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `cmd` to completion or until `timeout`, killing it then or on Ctrl-C.
///
/// Output is read on helper threads so a chatty tool cannot block on a full pipe.
pub fn run_bounded(cmd: &mut Command, timeout: Duration) -> anyhow::Result<ToolOutput> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut out = child.stdout.take().expect("piped stdout");
    let mut err = child.stderr.take().expect("piped stderr");
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
    let Some(status) = wait_until(&mut child, Instant::now() + timeout)? else {
        let _ = child.kill();
        let _ = child.wait();
        if interrupt::requested() {
            return Err(interrupt::Interrupted.into());
        }
        anyhow::bail!("timed out after {}", humantime::format_duration(timeout));
    };
    Ok(ToolOutput {
        success: status.success(),
        stdout: out_reader.join().unwrap_or_default(),
        stderr: err_reader.join().unwrap_or_default(),
    })
}

/// Waits until the child exits (its status), or `deadline` passes or the run is interrupted
/// (`None`, the child still running).
///
/// It sleeps in one poll(2) on the child's pidfd and the interrupt's eventfd rather than
/// waking every few milliseconds to look: such a wake-up is a timer firing on some CPU for the
/// tool's whole run, and on a VM a periodic timer on the CPU where a thread waits for I/O
/// changes how fast that thread wakes (docs/disk.md), so it would change what fio measures at
/// QD 1. Kernels without pidfd_open (before 5.3) get the 20 ms look instead.
fn wait_until(child: &mut Child, deadline: Instant) -> std::io::Result<Option<ExitStatus>> {
    // SAFETY: pidfd_open takes a pid and flags; a non-negative result is a descriptor we own.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, child.id() as libc::pid_t, 0) };
    let pidfd = (pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd as i32) });
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        let now = Instant::now();
        if interrupt::requested() || now >= deadline {
            return Ok(None);
        }
        let left = deadline - now;
        match (&pidfd, interrupt::wake_fd()) {
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

/// The last non-empty line of a tool's stderr, for notes.
pub fn last_line(text: &str) -> &str {
    text.lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_tool_is_named_with_its_install_hint() {
        let tool = Tool {
            name: "nope",
            program: "peakbench-no-such-program",
            install: "apt-get install nope",
        };
        assert!(tool.path().is_none());
        let r = tool.missing("nope --x");
        assert_eq!(r.value, None);
        assert!(r.note.unwrap().contains("apt-get install nope"));
    }

    #[test]
    fn a_tool_that_runs_too_long_is_killed() {
        let sh = find_program("sh").expect("sh on PATH");
        let start = Instant::now();
        let r = run_bounded(
            Command::new(sh).args(["-c", "sleep 5"]),
            Duration::from_millis(200),
        );
        assert!(r.is_err());
        assert!(start.elapsed() < Duration::from_secs(3));
    }

    #[test]
    fn output_is_captured_as_soon_as_the_tool_exits() {
        let sh = find_program("sh").expect("sh on PATH");
        let start = Instant::now();
        let r = run_bounded(
            Command::new(sh).args(["-c", "sleep 0.2; echo out; echo err >&2"]),
            Duration::from_secs(60),
        )
        .unwrap();
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the wait outlived the tool"
        );
        assert!(r.success);
        assert_eq!(r.stdout.trim(), "out");
        assert_eq!(last_line(&r.stderr), "err");
    }

    #[test]
    fn command_lines_quote_spaces() {
        let line = command_line(Path::new("/bin/x"), &["a b".into(), "c".into()]);
        assert_eq!(line, "/bin/x 'a b' c");
    }
}
