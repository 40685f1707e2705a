//! Where a run's tests go: a remote server, or the loopback one, started by the first case
//! that needs it and shared by the cases of the plan.

use std::net::SocketAddr;
use std::sync::Mutex;

use anyhow::{Context as _, Result};

use super::auth::Key;
use super::child::{ChildServer, Placement};
use super::loopback::LoopbackBound;
use super::server::LocalServer;

/// The loopback server: a child process (the default) or a thread of this process.
enum Loopback {
    Thread(LocalServer),
    Process(ChildServer),
}

impl Loopback {
    fn addr(&self) -> SocketAddr {
        match self {
            Loopback::Thread(s) => s.addr,
            Loopback::Process(s) => s.addr,
        }
    }
}

/// Where the tests go: a remote server, or the loopback one (a child process, see
/// [`super::child`]), started when the first case needs it and stopped when the last case that
/// shares it is dropped.
pub(crate) struct NetTarget {
    remote: Option<SocketAddr>,
    local: Mutex<Option<Loopback>>,
    /// The remote server's key, or a random one shared with the loopback server, so no
    /// other local user can run tests on it.
    key: Option<Key>,
    /// The memory copy that bounds loopback throughput, measured by the first case that needs it.
    bound: LoopbackBound,
}

impl NetTarget {
    pub(crate) fn new(remote: Option<SocketAddr>, key: Option<Key>) -> NetTarget {
        let key = match remote {
            Some(_) => key,
            None => Some(key.unwrap_or_else(Key::random)),
        };
        NetTarget {
            remote,
            local: Mutex::new(None),
            key,
            bound: LoopbackBound::default(),
        }
    }

    /// The loopback peak the cases of this target share.
    pub(crate) fn bound(&self) -> &LoopbackBound {
        &self.bound
    }

    pub(crate) fn key(&self) -> Option<&Key> {
        self.key.as_ref()
    }

    /// The server's address, starting the loopback server if this is its first use.
    pub(crate) fn addr(&self) -> Result<SocketAddr> {
        if let Some(addr) = self.remote {
            return Ok(addr);
        }
        let mut local = self.local.lock().unwrap_or_else(|p| p.into_inner());
        if local.is_none() {
            *local = Some(match Self::placement()? {
                Placement::Thread => Loopback::Thread(LocalServer::start(self.key.clone())?),
                Placement::Process => {
                    let program = std::env::current_exe().context("peakbench's own path")?;
                    Loopback::Process(ChildServer::start(&program, self.key.as_ref())?)
                }
            });
        }
        Ok(local.as_ref().expect("started above").addr())
    }

    /// Where the loopback server runs: `PEAKBENCH_LOOPBACK_SERVER`, a child process by
    /// default; a thread in unit tests, whose executable is not peakbench.
    pub(crate) fn placement() -> Result<Placement> {
        if cfg!(test) {
            return Ok(Placement::Thread);
        }
        Placement::from_env()
    }

    pub(crate) fn loopback(&self) -> bool {
        self.remote.is_none_or(|a| a.ip().is_loopback())
    }

    /// The remote server's address as text (empty for the loopback server peakbench starts).
    pub(crate) fn remote_ip(&self) -> String {
        self.remote.map(|a| a.ip().to_string()).unwrap_or_default()
    }

    /// Whether the loopback server is running (for tests: planning must not start it).
    #[cfg(test)]
    pub(crate) fn started(&self) -> bool {
        self.local.lock().unwrap().is_some()
    }

    /// Whether the tests go to the loopback server peakbench starts (a child process, or with
    /// `PEAKBENCH_LOOPBACK_SERVER=thread` a thread of this one).
    pub(crate) fn in_process(&self) -> bool {
        self.remote.is_none()
    }
}
