//! Running the standard tool of a field (likwid-bench, hpcc, fio, iperf3, sockperf, mbw) on the
//! same case, so that each result can carry the tool's value and the ratio to it.
//!
//! The subsystems only describe their tools: an [`Invocation`] names the program, its arguments,
//! its environment and input files if any, how long it may take, a server to start on this
//! machine first if it needs one, and how to read its value from what it printed or wrote.
//! [`Invocation::run`] does the rest the same way for every tool:
//!
//! - A tool that is not installed is not an error: the result gets a [`Reference`] with no value
//!   and a note that names the program and how to install it, and the run goes on. So does a
//!   tool that fails, runs past its time limit (it is killed), or prints nothing usable: the
//!   note says which.
//! - The command recorded is the one that ran, with the program's full path, so that a user can
//!   run it again.
//! - Ctrl-C while a tool (or its server) runs kills it and interrupts the run: `run` returns
//!   [`Interrupted`], so the case ends as any case interrupted in peakbench's own loops does,
//!   instead of being kept with a reference cut short.
//! - A tool and its server each run in a process group of their own ([`Group`]): a timeout,
//!   Ctrl-C, a second Ctrl-C or the tool's normal end kills the whole group, so nothing the
//!   tool started (mpirun's ranks, fio's job processes) outlives it, and the terminal's SIGINT
//!   reaches peakbench alone. If peakbench itself dies, the kernel kills each group's leader.
//!
//! This file holds what a tool run is ([`ToolSpec`], [`Invocation`], its [`Server`]) and how its value
//! becomes a [`Reference`]; `process.rs` holds how a program is run: in a process group of its
//! own, bounded in time, stopped by Ctrl-C, with its output read as it comes.

mod process;

use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::interrupt::Interrupted;
use crate::result::Reference;

use process::{CtrlC, StopSignal, last_line, run_bounded};
pub(crate) use process::{command_line, dup_for_child, inherit_fd, run_for_at_most};

/// A standard tool: the program to look for and how to get it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ToolSpec {
    /// Name shown in results, e.g. "likwid-bench".
    pub name: &'static str,
    /// Executable looked up on `PATH`.
    pub program: &'static str,
    /// How to install it, e.g. "apt-get install likwid".
    pub install: &'static str,
}

/// The full path of `program` on `PATH`, if it is there and executable.
pub(crate) fn find_program(program: &str) -> Option<PathBuf> {
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

impl ToolSpec {
    pub(crate) fn path(&self) -> Option<PathBuf> {
        find_program(self.program)
    }

    /// The reference recorded when the tool is not installed.
    pub(crate) fn missing(&self, command: &str) -> Reference {
        self.failed(
            command,
            format!(
                "{} is not installed; install it with `{}` to compare",
                self.program, self.install
            ),
        )
    }

    /// The reference recorded when the tool gave no value (or was not run: `command` is then
    /// empty), with why.
    pub(crate) fn failed(&self, command: &str, why: impl std::fmt::Display) -> Reference {
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
    pub(crate) fn value(&self, command: &str, value: f64, note: Option<String>) -> Reference {
        Reference {
            tool: self.name.to_string(),
            command: command.to_string(),
            value: Some(value),
            ratio: None,
            note,
        }
    }
}

/// What a tool's parser read: the value in the result's unit, and anything the reader of the
/// result should know about it (how it was converted, what differs from peakbench's case).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Reading {
    pub value: f64,
    pub note: Option<String>,
}

/// Where the value is read from.
#[derive(Clone, Debug)]
pub(crate) enum Source {
    Stdout,
    /// Standard output, then standard error (sockperf prints its figures on either).
    StdoutAndStderr,
    /// A file the tool wrote in its working directory (hpcc's `hpccoutf.txt`).
    File(String),
}

/// A server for a client-server tool, started on this machine before the tool (same program,
/// its own arguments) and killed after it.
#[derive(Clone, Debug)]
pub(crate) struct Server {
    pub args: Vec<String>,
    pub ready: Ready,
}

/// How to know that a [`Server`] is ready for the tool.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Ready {
    /// A TCP socket listens on this loopback port, as /proc/net/tcp shows: without connecting,
    /// for a server that would take a probe for its one client (`iperf3 -s -1`).
    Listening(u16),
    /// A TCP connection to this address succeeds.
    Accepting(SocketAddr),
    /// Nothing to look at (a UDP server): wait this long.
    After(Duration),
}

/// How long a [`Server`] may take to be ready.
const SERVER_START: Duration = Duration::from_secs(3);

/// A file written in the tool's working directory before it runs.
struct InputFile {
    name: String,
    contents: String,
    /// What the command line says of it, e.g. "N=4000, NB=192".
    shown: String,
}

type Parser<'a> = Box<dyn FnOnce(&str) -> Result<Reading, String> + 'a>;

/// One run of a tool on one case: everything needed to run it and read its value.
pub(crate) struct Invocation<'a> {
    tool: ToolSpec,
    launcher: Option<ToolSpec>,
    args: Vec<String>,
    env: Vec<(String, String)>,
    /// Prefixes of inherited environment variables the tool must not see.
    env_removed: Vec<String>,
    files: Vec<InputFile>,
    timeout: Duration,
    server: Option<Server>,
    source: Source,
    any_exit_status: bool,
    refusal: Option<String>,
    /// Descriptors the tool inherits under their own numbers, with what each is open on.
    inherited: Vec<(RawFd, String)>,
    parse: Parser<'a>,
}

impl<'a> Invocation<'a> {
    /// `tool` run with `args`, killed after `timeout`; `parse` reads its standard output and
    /// returns the value, or why there is none.
    pub(crate) fn new(
        tool: ToolSpec,
        args: Vec<String>,
        timeout: Duration,
        parse: impl FnOnce(&str) -> Result<Reading, String> + 'a,
    ) -> Invocation<'a> {
        Invocation {
            tool,
            launcher: None,
            args,
            env: Vec::new(),
            env_removed: Vec::new(),
            files: Vec::new(),
            timeout,
            server: None,
            source: Source::Stdout,
            any_exit_status: false,
            refusal: None,
            inherited: Vec::new(),
            parse: Box::new(parse),
        }
    }

    /// Runs `launcher` with the arguments instead (mpirun starting hpcc); both must be installed.
    pub(crate) fn launched_by(mut self, launcher: ToolSpec) -> Self {
        self.launcher = Some(launcher);
        self
    }

    /// Sets an environment variable for the tool.
    pub(crate) fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    /// Removes the inherited environment variables whose names start with `prefix` (an MPI
    /// rank's `OMPI_*`, which would make an mpirun it starts think it runs inside the job).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn env_remove_prefixed(mut self, prefix: &str) -> Self {
        self.env_removed.push(prefix.to_string());
        self
    }

    /// Runs the tool in a new temporary directory holding this file; the command line shows
    /// `shown` for its contents.
    pub(crate) fn input_file(mut self, name: &str, contents: String, shown: String) -> Self {
        self.files.push(InputFile {
            name: name.to_string(),
            contents,
            shown,
        });
        self
    }

    /// Starts `server` before the tool and kills it after.
    pub(crate) fn server(mut self, server: Server) -> Self {
        self.server = Some(server);
        self
    }

    /// Reads the value from `source` instead of standard output (a file: the tool runs in a new
    /// temporary directory).
    pub(crate) fn read_from(mut self, source: Source) -> Self {
        self.source = source;
        self
    }

    /// Parses the output whatever the exit status: for a tool whose output says more about a
    /// failure than its status does (iperf3's JSON `error`).
    pub(crate) fn any_exit_status(mut self) -> Self {
        self.any_exit_status = true;
        self
    }

    /// Lets the tool inherit descriptor `fd` (it names it `/proc/self/fd/N`); the command line
    /// shows that it is open on `shown`. The caller keeps `fd` open until the tool has run.
    pub(crate) fn inherit_fd(mut self, fd: RawFd, shown: impl Into<String>) -> Self {
        self.inherited.push((fd, shown.into()));
        self
    }

    /// Does not run the tool: the reference carries the command line and `why`.
    pub(crate) fn refuse(mut self, why: impl Into<String>) -> Self {
        self.refusal = Some(why.into());
        self
    }

    /// The command line shown to users: the program and the arguments, then in parentheses
    /// the input files and the environment, if any.
    pub(crate) fn command_line(&self, program: &Path) -> String {
        let mut line = command_line(program, &self.args);
        let mut context = Vec::new();
        if !self.files.is_empty() {
            let files: Vec<String> = self
                .files
                .iter()
                .map(|f| format!("{}: {}", f.name, f.shown))
                .collect();
            context.push(format!("in a directory holding {}", files.join(", ")));
        }
        if !self.env.is_empty() {
            let env: Vec<String> = self.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
            context.push(env.join(" "));
        }
        for (fd, shown) in &self.inherited {
            context.push(format!("descriptor {fd} open on {shown}"));
        }
        if !context.is_empty() {
            line = format!("{line} ({})", context.join("; "));
        }
        line
    }

    /// Runs the tool and returns its reference: with a value, or with a note saying why there
    /// is none. `Err` only when the run was interrupted ([`Interrupted`]).
    pub(crate) fn run(self) -> anyhow::Result<Reference> {
        self.run_with(&CtrlC)
    }

    fn run_with(mut self, stop: &dyn StopSignal) -> anyhow::Result<Reference> {
        if stop.requested() {
            return Err(Interrupted.into());
        }
        let runs = self.launcher.unwrap_or(self.tool);
        let mut needed = [Some(self.tool), self.launcher].into_iter().flatten();
        if let Some(absent) = needed.find(|t| t.path().is_none()) {
            return Ok(absent.missing(&self.command_line(Path::new(runs.program))));
        }
        let Some(program) = runs.path() else {
            return Ok(runs.missing(&self.command_line(Path::new(runs.program))));
        };
        let line = self.command_line(&program);
        let tool = self.tool;
        if let Some(why) = self.refusal.take() {
            return Ok(tool.failed(&line, why));
        }
        match self.attempt(&program, runs.program, stop) {
            Ok(reading) => Ok(tool.value(&line, reading.value, reading.note)),
            Err(NoValue::Why(why)) => Ok(tool.failed(&line, why)),
            Err(NoValue::Interrupted) => Err(Interrupted.into()),
        }
    }

    /// Sets up, runs and parses; `name` is the program's name for notes.
    fn attempt(
        self,
        program: &Path,
        name: &str,
        stop: &dyn StopSignal,
    ) -> Result<Reading, NoValue> {
        let needs_dir = !self.files.is_empty() || matches!(self.source, Source::File(_));
        let dir = if needs_dir {
            let dir = tempfile::tempdir()
                .map_err(|e| NoValue::Why(format!("no temporary directory: {e}")))?;
            Some(dir)
        } else {
            None
        };
        if let Some(dir) = &dir {
            for file in &self.files {
                std::fs::write(dir.path().join(&file.name), &file.contents)
                    .map_err(|e| NoValue::Why(format!("cannot write {}: {e}", file.name)))?;
            }
        }
        let _server = match &self.server {
            Some(server) => Some(server.start(program, name, stop)?),
            None => None,
        };
        let mut cmd = Command::new(program);
        cmd.args(&self.args);
        for (key, _) in std::env::vars_os() {
            let name = key.to_string_lossy();
            if self
                .env_removed
                .iter()
                .any(|p| name.starts_with(p.as_str()))
            {
                cmd.env_remove(&key);
            }
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        for &(fd, _) in &self.inherited {
            inherit_fd(&mut cmd, fd);
        }
        if let Some(dir) = &dir {
            cmd.current_dir(dir.path());
        }
        let output = run_bounded(&mut cmd, name, self.timeout, stop)?;
        if stop.requested() {
            return Err(NoValue::Interrupted);
        }
        let said = last_line(&output.stderr);
        if !output.status.success() && !self.any_exit_status {
            return Err(NoValue::Why(format!(
                "{name} failed ({}): {said}",
                output.status
            )));
        }
        let text = match &self.source {
            Source::Stdout => output.stdout,
            Source::StdoutAndStderr => format!("{}\n{}", output.stdout, output.stderr),
            Source::File(file) => {
                let dir = dir
                    .as_ref()
                    .expect("a file source makes a working directory");
                std::fs::read_to_string(dir.path().join(file))
                    .map_err(|e| NoValue::Why(format!("{name} wrote no {file}: {e}")))?
            }
        };
        (self.parse)(&text).map_err(|why| {
            NoValue::Why(match said {
                "" => why,
                said => format!("{why}: {said}"),
            })
        })
    }
}

/// Why a run gave no value.
#[derive(Debug)]
enum NoValue {
    /// The user asked the run to stop.
    Interrupted,
    /// Anything else: the reference's note.
    Why(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::time::Instant;

    use crate::interrupt::Group;
    use std::sync::atomic::{AtomicBool, Ordering};

    const SH: ToolSpec = ToolSpec {
        name: "the shell",
        program: "sh",
        install: "apt-get install dash",
    };

    const ABSENT: ToolSpec = ToolSpec {
        name: "nope",
        program: "peakbench-no-such-program",
        install: "apt-get install nope",
    };

    /// `sh -c script`.
    fn sh<'a>(
        script: &str,
        parse: impl FnOnce(&str) -> Result<Reading, String> + 'a,
    ) -> Invocation<'a> {
        Invocation::new(
            SH,
            vec!["-c".into(), script.into()],
            Duration::from_secs(60),
            parse,
        )
    }

    /// The figure after `rate:` in the text.
    fn rate(text: &str) -> Result<Reading, String> {
        text.lines()
            .find_map(|l| l.strip_prefix("rate:"))
            .and_then(|v| v.trim().parse().ok())
            .map(|value| Reading {
                value,
                note: Some("rate as printed".into()),
            })
            .ok_or_else(|| "no rate line".to_string())
    }

    /// A stop of the test's own, requested from another thread.
    struct TestStop {
        flag: AtomicBool,
        wake: OwnedFd,
    }

    impl TestStop {
        fn new() -> TestStop {
            // SAFETY: eventfd takes no pointers; a non-negative result is a descriptor we own.
            let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
            assert!(fd >= 0, "eventfd");
            TestStop {
                flag: AtomicBool::new(false),
                // SAFETY: just created, owned by nothing else.
                wake: unsafe { OwnedFd::from_raw_fd(fd) },
            }
        }

        fn request(&self) {
            self.flag.store(true, Ordering::SeqCst);
            let one = 1u64.to_ne_bytes();
            // SAFETY: writes 8 bytes from a live buffer to our eventfd.
            unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), one.len()) };
        }
    }

    impl StopSignal for TestStop {
        fn requested(&self) -> bool {
            self.flag.load(Ordering::SeqCst)
        }

        fn wake_fd(&self) -> Option<RawFd> {
            Some(self.wake.as_raw_fd())
        }
    }

    fn never() -> TestStop {
        TestStop::new()
    }

    #[test]
    fn a_missing_tool_is_named_with_its_install_hint() {
        let r = Invocation::new(
            ABSENT,
            vec!["--x".into(), "a b".into()],
            Duration::from_secs(1),
            |_| panic!("nothing to parse"),
        )
        .run_with(&never())
        .unwrap();
        assert_eq!(r.tool, "nope");
        assert_eq!(r.command, "peakbench-no-such-program --x 'a b'");
        assert_eq!(r.value, None);
        let note = r.note.unwrap();
        assert!(
            note.contains("peakbench-no-such-program is not installed"),
            "{note}"
        );
        assert!(note.contains("apt-get install nope"), "{note}");
    }

    #[test]
    fn a_missing_launcher_is_named_too() {
        let r = sh("true", |_| panic!("nothing to parse"))
            .launched_by(ABSENT)
            .run_with(&never())
            .unwrap();
        assert_eq!(r.tool, "nope", "the program that is missing");
        assert!(r.note.unwrap().contains("apt-get install nope"));
        let r = Invocation::new(ABSENT, vec![], Duration::from_secs(1), |_| {
            panic!("nothing to parse")
        })
        .launched_by(SH)
        .run_with(&never())
        .unwrap();
        assert_eq!(r.tool, "nope", "the tool the launcher would start");
        assert!(r.command.starts_with("sh"), "{}", r.command);
    }

    #[test]
    fn the_value_is_parsed_from_the_output_with_the_full_command_line() {
        let r = sh("echo chatter; echo rate: 42.5", rate)
            .run_with(&never())
            .unwrap();
        assert_eq!(r.tool, "the shell");
        assert_eq!(r.value, Some(42.5));
        assert_eq!(r.note.as_deref(), Some("rate as printed"));
        let sh = find_program("sh").unwrap();
        assert_eq!(
            r.command,
            format!("{} -c 'echo chatter; echo rate: 42.5'", sh.display())
        );
    }

    #[test]
    fn input_files_environment_and_output_files_live_in_a_working_directory() {
        let r = sh(
            "cat in.txt > out.txt; echo \"rate: $EXTRA\" >> out.txt",
            |text| {
                assert!(text.starts_with("rate: 7\n"), "{text}");
                rate(text)
            },
        )
        .input_file("in.txt", "rate: 7\n".into(), "a rate of 7".into())
        .env("EXTRA", "8")
        .read_from(Source::File("out.txt".into()))
        .run_with(&never())
        .unwrap();
        assert_eq!(r.value, Some(7.0), "{:?}", r.note);
        assert!(
            r.command
                .ends_with(" (in a directory holding in.txt: a rate of 7; EXTRA=8)"),
            "{}",
            r.command
        );
    }

    #[test]
    fn no_value_is_a_note_with_the_tools_last_words() {
        let r = sh("echo nothing; echo 'it broke' >&2", rate)
            .run_with(&never())
            .unwrap();
        assert_eq!(r.value, None);
        assert_eq!(r.note.as_deref(), Some("no rate line: it broke"));
        let r = sh("echo 'rate: 1'; echo 'bad flag' >&2; exit 3", rate)
            .run_with(&never())
            .unwrap();
        assert_eq!(r.value, None, "a failed run's output is not trusted");
        let note = r.note.unwrap();
        assert!(note.starts_with("sh failed (exit status: 3)"), "{note}");
        assert!(note.ends_with("bad flag"), "{note}");
        let r = sh("echo 'rate: 1'; exit 3", rate)
            .any_exit_status()
            .run_with(&never())
            .unwrap();
        assert_eq!(r.value, Some(1.0), "unless the output is what counts");
        let r = sh("echo 'rate: 1'", rate)
            .refuse("not on this case")
            .run_with(&never())
            .unwrap();
        assert_eq!(r.value, None);
        assert_eq!(r.note.as_deref(), Some("not on this case"));
        assert!(r.command.contains("-c"), "the command is still shown");
    }

    #[test]
    fn a_tool_that_runs_too_long_is_killed_with_a_note() {
        let start = Instant::now();
        let mut run = sh("sleep 5", |_| panic!("nothing to parse"));
        run.timeout = Duration::from_millis(200);
        let r = run.run_with(&never()).unwrap();
        assert!(start.elapsed() < Duration::from_secs(3));
        let note = r.note.unwrap();
        assert!(note.contains("did not finish within 200ms"), "{note}");
    }

    #[test]
    fn a_stop_during_the_tool_kills_it_and_interrupts_the_run() {
        let stop = TestStop::new();
        let start = Instant::now();
        let r = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(200));
                stop.request();
            });
            sh("sleep 30", |_| panic!("an interrupted tool is not parsed")).run_with(&stop)
        });
        let e = r.unwrap_err();
        assert!(e.is::<Interrupted>(), "{e:#}");
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the tool was not killed at once"
        );
    }

    /// Whether process `pid` is alive (and not a zombie).
    fn alive(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|stat| {
                let state = stat.rsplit(')').next().unwrap_or("").trim_start();
                !state.starts_with('Z') && !state.starts_with('X')
            })
            .unwrap_or(false)
    }

    /// Waits up to 5 s for process `pid` to be gone.
    fn gone(pid: i32) -> bool {
        let until = Instant::now() + Duration::from_secs(5);
        while alive(pid) {
            if Instant::now() > until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    }

    /// A tool that starts a sleeping grandchild, writes its pid to a file and waits for it.
    fn forking_tool(pid_file: &Path) -> Invocation<'static> {
        sh(
            &format!("sleep 30 & echo $! > {}; wait", pid_file.display()),
            |_| panic!("nothing to parse"),
        )
    }

    fn read_pid(pid_file: &Path) -> i32 {
        let until = Instant::now() + Duration::from_secs(5);
        loop {
            let text = std::fs::read_to_string(pid_file).unwrap_or_default();
            if let Ok(pid) = text.trim().parse() {
                return pid;
            }
            assert!(Instant::now() < until, "the tool wrote no pid");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn a_timeout_ends_everything_the_tool_started() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("grandchild.pid");
        let mut run = forking_tool(&pid_file);
        run.timeout = Duration::from_millis(300);
        let start = Instant::now();
        let r = run.run_with(&never()).unwrap();
        assert!(start.elapsed() < Duration::from_secs(5), "the wait hung");
        assert!(r.note.unwrap().contains("did not finish"));
        let grandchild = read_pid(&pid_file);
        assert!(
            gone(grandchild),
            "the tool's child {grandchild} survived the timeout"
        );
    }

    #[test]
    fn a_timeout_ends_a_child_in_a_process_group_of_its_own() {
        // mpirun puts each rank in a process group of its own: killing the tool's group
        // alone left them running. The session holds them all. (perl is Debian's perl-base,
        // always there: setpgrp, then exec, so $! is the rank's pid.)
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("rank.pid");
        let mut run = sh(
            &format!(
                "perl -e 'setpgrp(0, 0); exec \"sleep\", \"30\"' & echo $! > {}; wait",
                pid_file.display()
            ),
            |_| panic!("nothing to parse"),
        );
        run.timeout = Duration::from_millis(500);
        let r = run.run_with(&never()).unwrap();
        assert!(r.note.unwrap().contains("did not finish"));
        let rank = read_pid(&pid_file);
        assert!(
            gone(rank),
            "the tool's child {rank} in its own process group survived"
        );
    }

    #[test]
    fn a_stop_ends_everything_the_tool_started() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("grandchild.pid");
        let stop = TestStop::new();
        let r = std::thread::scope(|s| {
            s.spawn(|| {
                read_pid(&pid_file);
                stop.request();
            });
            forking_tool(&pid_file).run_with(&stop)
        });
        assert!(r.unwrap_err().is::<Interrupted>());
        let grandchild = read_pid(&pid_file);
        assert!(
            gone(grandchild),
            "the tool's child {grandchild} survived the stop"
        );
    }

    #[test]
    fn a_tools_leftovers_are_ended_when_it_exits() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("grandchild.pid");
        let script = format!(
            "sleep 30 > /dev/null 2>&1 & echo $! > {}; echo 'rate: 1'",
            pid_file.display()
        );
        let start = Instant::now();
        let r = sh(&script, rate).run_with(&never()).unwrap();
        assert_eq!(r.value, Some(1.0));
        assert!(start.elapsed() < Duration::from_secs(5), "the wait hung");
        let grandchild = read_pid(&pid_file);
        assert!(
            gone(grandchild),
            "the tool's child {grandchild} outlived it"
        );
    }

    #[test]
    fn the_leader_dies_with_the_thread_that_started_it() {
        // peakbench's death, as the kernel sees it: the thread that forked the leader ends.
        let leader = std::thread::spawn(|| {
            let sh = find_program("sh").unwrap();
            let mut group = Group::spawn(Command::new(sh).args(["-c", "sleep 30"])).unwrap();
            let pid = group.child().id() as i32;
            std::mem::forget(group);
            pid
        })
        .join()
        .unwrap();
        let mut status = 0;
        // SAFETY: waits for our own child `leader`, writing its status into a live int.
        let r = unsafe { libc::waitpid(leader, &mut status, 0) };
        assert_eq!(r, leader);
        assert!(
            libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL,
            "the leader was not killed when its parent died: status {status:#x}"
        );
    }

    #[test]
    fn a_stop_before_the_tool_runs_nothing() {
        let stop = TestStop::new();
        stop.request();
        let e = sh("echo 'rate: 1'", rate).run_with(&stop).unwrap_err();
        assert!(e.is::<Interrupted>(), "{e:#}");
    }

    #[test]
    fn a_local_server_runs_during_the_tool_and_is_gone_after() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("server.pid");
        let server = Server {
            args: vec![
                "-c".into(),
                format!("echo $$ > {}; exec sleep 30", pid_file.display()),
            ],
            ready: Ready::After(Duration::from_millis(100)),
        };
        let script = format!(
            "while [ ! -s {0} ]; do sleep 0.01; done; echo \"rate: $(cat {0})\"",
            pid_file.display()
        );
        let r = sh(&script, rate).server(server).run_with(&never()).unwrap();
        let pid = r.value.expect("the server was up when the tool ran") as i32;
        assert!(pid > 0);
        // SAFETY: signal 0 only asks whether the process exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0;
        assert!(!alive, "the server outlived the tool");
    }

    #[test]
    fn a_server_that_dies_at_once_is_a_note() {
        let server = Server {
            args: vec!["-c".into(), "exit 1".into()],
            ready: Ready::Listening(1),
        };
        let r = sh("echo 'rate: 1'", rate)
            .server(server)
            .run_with(&never())
            .unwrap();
        assert_eq!(r.value, None);
        let note = r.note.unwrap();
        assert!(note.starts_with("sh -c ended (exit status: 1)"), "{note}");
    }

    #[test]
    fn output_is_captured_as_soon_as_the_tool_exits() {
        let sh = find_program("sh").expect("sh on PATH");
        let start = Instant::now();
        let r = run_bounded(
            Command::new(sh).args(["-c", "sleep 0.2; echo out; echo err >&2"]),
            "sh",
            Duration::from_secs(60),
            &never(),
        )
        .unwrap();
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the wait outlived the tool"
        );
        assert!(r.status.success());
        assert_eq!(r.stdout.trim(), "out");
        assert_eq!(last_line(&r.stderr), "err");
    }

    #[test]
    fn command_lines_quote_spaces() {
        let line = command_line(
            Path::new("/bin/x"),
            &["a b".into(), "c".into(), "it's".into(), String::new()],
        );
        assert_eq!(line, r"/bin/x 'a b' c 'it'\''s' ''");
    }
}
