//! Where a running one-machine stack can be found: `mpiswarm up` writes
//! `DATA/stack.json` with the address of every component once they all
//! serve, and removes it when it stops; `run`, `status`, `logs` and `down`
//! read it. Ports are chosen per data directory (any free port the first
//! time, the same ones again on the next `up` when they are still free), so
//! two stacks with different data directories run side by side.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

pub const DEFAULT_DATA_DIR: &str = ".mpiswarm";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StackFile {
    /// The `mpiswarm up` process.
    pub pid: u32,
    pub kubeconfig: PathBuf,
    pub apiserver: String,
    pub offers: String,
    /// Every node agent's HTTP address (one per node).
    pub agents: Vec<SocketAddr>,
    pub controller: SocketAddr,
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
    let text = std::fs::read_to_string(&p)
        .with_context(|| format!("no mpiswarm stack runs with data dir {}: start one with `mpiswarm up --data-dir {}` (or pass --kubeconfig for a cluster)", data_dir.display(), data_dir.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not a stack file; remove it", p.display()))
}

/// The stack of `data_dir` if its `up` process is alive.
pub fn running(data_dir: &Path) -> Result<StackFile> {
    let stack = read(data_dir)?;
    if !Path::new(&format!("/proc/{}", stack.pid)).exists() {
        anyhow::bail!(
            "the mpiswarm stack of {} is not running (process {} is gone): start it with `mpiswarm up --data-dir {}`",
            data_dir.display(),
            stack.pid,
            data_dir.display()
        );
    }
    Ok(stack)
}

pub fn write(data_dir: &Path, stack: &StackFile) -> Result<()> {
    let p = path(data_dir);
    let tmp = p.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(stack)?).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &p).with_context(|| format!("writing {}", p.display()))?;
    Ok(())
}

pub fn remove(data_dir: &Path) {
    let _gone = std::fs::remove_file(path(data_dir));
}

/// `port` if it can be bound on loopback now, else any free port.
pub fn reuse_or_any(port: Option<u16>) -> SocketAddr {
    let wanted = SocketAddr::from(([127, 0, 0, 1], port.unwrap_or(0)));
    match std::net::TcpListener::bind(wanted) {
        Ok(_free) => wanted,
        Err(_) => SocketAddr::from(([127, 0, 0, 1], 0)),
    }
}
