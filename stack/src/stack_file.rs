//! Where a running one-machine stack can be found: `mpiswarm up` writes
//! `DATA/stack.json` with the address of every component once they all
//! serve, and removes it when it stops; `run`, `status`, `logs` and `down`
//! read it. Ports are chosen per data directory (any free port the first
//! time, the same ones again on the next `up` when they are still free), so
//! two stacks with different data directories run side by side.
//! With `up --split` the file also lists each component's process and
//! command line, so one can be found, killed alone, and told apart from
//! an unrelated process that got its pid later.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::error::{FileAction, Result, StackError, file};
use serde::{Deserialize, Serialize};

pub const DEFAULT_DATA_DIR: &str = ".mpiswarm";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StackFile {
    /// The `mpiswarm up` process (with `--split`, the one that supervises the components).
    pub pid: u32,
    pub kubeconfig: PathBuf,
    pub apiserver: String,
    /// The offer layer (with `--offers-replicas N`, its first replica).
    pub offers: String,
    /// With `up --split --offers-replicas N` (N > 1): every replica's URL;
    /// one leads, the others redirect to it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offers_replicas: Vec<String>,
    /// Every node agent's HTTP address (one per node).
    pub agents: Vec<SocketAddr>,
    pub controller: SocketAddr,
    /// The controller's log endpoint (`--logs-listen`, on loopback): where
    /// `mpiswarm logs` reads tenants' output; its URL is also in the
    /// controller's framework ConfigMap (`logsUrl`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller_logs: Option<SocketAddr>,
    /// The operator's credential file (`crate::credentials`): how `logs`
    /// and the tests authenticate to the offer layer and the agents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_credential: Option<PathBuf>,
    /// With `up --split`: every component's own process.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub components: Vec<Component>,
}

/// One component of an `up --split` stack: a child process of `up` running
/// `mpiswarm ARGS...`; a restart runs the same command line again, so it
/// serves on the same port from the same data.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Component {
    /// `apiserver`, `offers`, `controller`, `agent` or `agent-NODE`.
    pub name: String,
    pub pid: u32,
    /// The command line after the binary's name (the subcommand first).
    pub args: Vec<String>,
    /// Its stdout and stderr, appended to across restarts.
    pub log: PathBuf,
    /// How often `up` started it again after it exited.
    pub restarts: u32,
}

impl Component {
    /// Whether process `pid` is still this component (and not another
    /// process that got its pid): its command line is the one recorded.
    pub fn is_alive(&self) -> bool {
        let Ok(raw) = std::fs::read(format!("/proc/{}/cmdline", self.pid)) else { return false };
        let mut argv = raw.split(|b| *b == 0).filter(|a| !a.is_empty()).skip(1);
        self.args.iter().all(|a| argv.next() == Some(a.as_bytes())) && argv.next().is_none()
    }
}

pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join("stack.json")
}

/// The ports the last `up` of this data dir used (to reuse them), if any.
pub fn previous(data_dir: &Path) -> Option<StackFile> {
    read(data_dir).ok()
}

pub fn read(data_dir: &Path) -> Result<StackFile> {
    let p = path(data_dir);
    let text =
        std::fs::read_to_string(&p).map_err(|source| StackError::NoStack { dir: data_dir.to_owned(), source })?;
    serde_json::from_str(&text).map_err(|source| StackError::NotAFile { path: p, kind: "stack", source })
}

/// The stack of `data_dir` if its `up` process is alive.
pub fn running(data_dir: &Path) -> Result<StackFile> {
    let stack = read(data_dir)?;
    if !Path::new(&format!("/proc/{}", stack.pid)).exists() {
        return Err(StackError::StackGone { dir: data_dir.to_owned(), pid: stack.pid });
    }
    Ok(stack)
}

pub fn write(data_dir: &Path, stack: &StackFile) -> Result<()> {
    let p = path(data_dir);
    let json =
        serde_json::to_vec_pretty(stack).map_err(|source| StackError::Encode { what: "the stack file", source })?;
    file(FileAction::Writing, &p, mpiswarm_guard::private::write(&p, &json))
}

pub fn remove(data_dir: &Path) {
    let _gone = std::fs::remove_file(path(data_dir));
}

/// `port` if it can be bound on loopback now, else a port that is free now
/// (a concrete one, so that a component started with it can be started
/// again on the same port).
pub fn reuse_or_any(port: Option<u16>) -> SocketAddr {
    let wanted = SocketAddr::from(([127, 0, 0, 1], port.unwrap_or(0)));
    let free = std::net::TcpListener::bind(wanted)
        .or_else(|_| std::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))))
        .and_then(|l| l.local_addr());
    free.unwrap_or(SocketAddr::from(([127, 0, 0, 1], 0)))
}

pub fn port_of(url: &str) -> Option<u16> {
    url.rsplit(':').next()?.trim_end_matches('/').parse().ok()
}
