//! The loopback server as a child process: `peakbench net serve --announce` on 127.0.0.1.
//!
//! A server thread inside the client's process shares its allocator, its scheduler slot and
//! its page-cache of socket buffers with the client: on 2 cores a one-stream 128 KiB TCP test
//! against it read 0.89 × iperf3, and the gap closed against a separate server process (as
//! iperf3 runs). So the loopback server is a child: started by the first case that needs it,
//! killed and reaped when the last case that shares it is dropped.
//!
//! The child runs in a process group of its own (the terminal's Ctrl-C reaches peakbench, which
//! stops it, not the child directly) and asks the kernel to kill it when its parent dies
//! (`PR_SET_PDEATHSIG`), so a peakbench killed by SIGKILL leaves no server behind. The kernel
//! sends that signal when the *thread* that forked exits, not the process: the child must be
//! spawned from a thread that lives as long as the run (the session's thread, which runs the
//! cases). `PEAKBENCH_LOOPBACK_SERVER=thread` keeps the in-process server instead, for
//! measuring one against the other.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow, bail};

use super::auth::Key;

/// The environment variable that chooses where the loopback server runs.
pub(crate) const ENV: &str = "PEAKBENCH_LOOPBACK_SERVER";

/// How long the child may take to announce its port.
const ANNOUNCE_DEADLINE: Duration = Duration::from_secs(10);

/// Where the loopback server runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Placement {
    /// A thread of peakbench's own process.
    Thread,
    /// A child process (the default).
    Process,
}

impl Placement {
    /// From `PEAKBENCH_LOOPBACK_SERVER`: `thread` or `process` (the default when unset).
    pub(crate) fn from_env() -> Result<Placement> {
        match std::env::var(ENV) {
            Err(_) => Ok(Placement::Process),
            Ok(v) if v.eq_ignore_ascii_case("process") => Ok(Placement::Process),
            Ok(v) if v.eq_ignore_ascii_case("thread") => Ok(Placement::Thread),
            Ok(v) => Err(crate::error::usage(format!(
                "{ENV}={v}: give thread or process (or leave it unset)"
            ))),
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Placement::Thread => "thread",
            Placement::Process => "process",
        }
    }
}

/// `peakbench net serve` running as a child on a loopback port; killed when dropped.
pub(crate) struct ChildServer {
    pub addr: SocketAddr,
    child: Child,
}

impl ChildServer {
    /// Starts the server from `program` (peakbench itself) and waits for its port.
    /// With a key, the child reads it as one hex line on its stdin (a pipe: never in its
    /// arguments or environment, where other users could read it).
    pub(crate) fn start(program: &std::path::Path, key: Option<&Key>) -> Result<ChildServer> {
        let mut command = Command::new(program);
        command
            .args([
                "net",
                "serve",
                "--bind",
                "127.0.0.1",
                "--port",
                "0",
                "--announce",
            ])
            .args(key.map(|_| "--key-stdin"))
            .stdin(if key.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .process_group(0);
        // SAFETY: the closure runs in the child between fork and exec and calls only prctl
        // and getppid, which are async-signal-safe.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent may have died before prctl: then nobody would reap us.
                if libc::getppid() == 1 {
                    return Err(std::io::Error::other("parent exited"));
                }
                Ok(())
            });
        }
        let mut child = command
            .spawn()
            .with_context(|| format!("starting the loopback server {}", program.display()))?;
        if let Some(key) = key {
            use std::io::Write as _;
            let mut stdin = child.stdin.take().context("the server's stdin")?;
            writeln!(stdin, "{}", key.to_hex())
                .context("handing the key to the loopback server")?;
        }
        let stdout = child.stdout.take().context("the server's stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let read = BufReader::new(stdout).read_line(&mut line).map(|_| line);
            let _ = tx.send(read);
        });
        let mut server = ChildServer {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            child,
        };
        let line = match rx.recv_timeout(ANNOUNCE_DEADLINE) {
            Ok(Ok(line)) => line,
            Ok(Err(e)) => bail!("reading the loopback server's port: {e}"),
            Err(_) => bail!(
                "the loopback server announced no port within {} s",
                ANNOUNCE_DEADLINE.as_secs()
            ),
        };
        let port = parse_announce(&line).ok_or_else(|| {
            anyhow!(
                "the loopback server announced '{}', not a port",
                line.trim()
            )
        })?;
        server.addr.set_port(port);
        Ok(server)
    }
}

/// The port of the announce line, "port N".
pub(crate) fn parse_announce(line: &str) -> Option<u16> {
    line.trim()
        .strip_prefix("port ")?
        .parse()
        .ok()
        .filter(|&p| p != 0)
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_announce_line_carries_the_port() {
        assert_eq!(parse_announce("port 40123\n"), Some(40123));
        assert_eq!(parse_announce("port 0\n"), None);
        assert_eq!(parse_announce("listening\n"), None);
    }
}
