//! The registry: the little the master must not forget across a restart
//! (agent ids and hostnames, framework ids and infos, and which of them were
//! removed for good). Tasks are not here: agents re-report them, as in
//! Mesos. The file is rewritten atomically (temporary file, fsync, rename,
//! fsync of the directory), so a `kill -9` at any moment leaves either the
//! old or the new registry, never a torn one. This module reads and writes
//! the file; it never decides when: the server writes through the
//! [`Registrar`](crate::registrar::Registrar)'s thread, never on an async
//! worker or under the master's lock.

use mpiswarm_mesos::FrameworkInfo;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("cannot create the data directory {path}: {source}")]
    CreateDir { path: PathBuf, source: std::io::Error },
    #[error("cannot read the registry {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("the registry {path} is corrupt ({source}); move it away to start empty")]
    Corrupt { path: PathBuf, source: serde_json::Error },
    #[error(
        "cannot write the registry {path}: {source}; agent and framework ids changed since the last good write would not survive a restart: make the data directory writable"
    )]
    Write { path: PathBuf, source: std::io::Error },
    #[error("cannot start the registry writer thread: {0}")]
    Writer(std::io::Error),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegisteredAgent {
    pub hostname: String,
    /// The principal that registered it; only that principal may subscribe
    /// as this agent again (absent: registered while no one authenticated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RegistryState {
    #[serde(default)]
    pub agents: BTreeMap<String, RegisteredAgent>,
    #[serde(default)]
    pub removed_agents: Vec<String>,
    #[serde(default)]
    pub frameworks: BTreeMap<String, FrameworkInfo>,
    #[serde(default)]
    pub removed_frameworks: Vec<String>,
}

/// How many removed ids are remembered (oldest forgotten first): enough to
/// refuse a stale framework or agent, without growing forever.
pub const REMOVED_IDS_KEPT: usize = 10_000;

impl RegistryState {
    /// Remembers that framework `id` was removed for good.
    pub fn framework_removed(&mut self, id: &str) {
        self.frameworks.remove(id);
        remember(&mut self.removed_frameworks, id);
    }

    /// Remembers that agent `id` was removed (it may come back).
    pub fn agent_removed(&mut self, id: &str) {
        self.agents.remove(id);
        remember(&mut self.removed_agents, id);
    }
}

fn remember(list: &mut Vec<String>, id: &str) {
    if !list.iter().any(|x| x == id) {
        list.push(id.to_owned());
    }
    if list.len() > REMOVED_IDS_KEPT {
        let excess = list.len() - REMOVED_IDS_KEPT;
        list.drain(..excess);
    }
}

/// The registry file `DIR/registry.json`, as read at start.
#[derive(Debug)]
pub struct Registry {
    path: PathBuf,
    pub state: RegistryState,
}

impl Registry {
    /// Opens (or starts) the registry in `dir`.
    pub fn open(dir: &Path) -> Result<Self, RegistryError> {
        mpiswarm_guard::private::dir(dir)
            .map_err(|source| RegistryError::CreateDir { path: dir.to_owned(), source })?;
        let path = dir.join("registry.json");
        let state = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|source| RegistryError::Corrupt { path: path.clone(), source })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => RegistryState::default(),
            Err(source) => return Err(RegistryError::Read { path, source }),
        };
        Ok(Self { path, state })
    }

    /// The file it lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the current state durably, blocking the caller: for tools and
    /// tests. The server writes through its [`Registrar`](crate::registrar::Registrar).
    pub fn save(&self) -> Result<(), RegistryError> {
        write_atomically(&self.path, &self.state)
    }
}

/// Rewrites `path` with `state`, owner-only, through
/// [`mpiswarm_guard::private::write`]: temporary file, fsync, rename, fsync
/// of the directory. Blocking; never call it on an async worker.
pub fn write_atomically(path: &Path, state: &RegistryState) -> Result<(), RegistryError> {
    let err = |source| RegistryError::Write { path: path.to_owned(), source };
    let bytes = serde_json::to_vec_pretty(state).map_err(|e| err(std::io::Error::other(e)))?;
    mpiswarm_guard::private::write(path, &bytes).map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_registry_reopens_with_the_same_state() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = Registry::open(dir.path()).unwrap();
        r.state.agents.insert("A-1".into(), RegisteredAgent { hostname: "node1".into(), principal: None });
        r.state.frameworks.insert("F-1".into(), FrameworkInfo::new("root", "mpi", &["mpi"]));
        r.save().unwrap();
        assert_eq!(Registry::open(dir.path()).unwrap().state, r.state);
    }

    #[test]
    fn a_corrupt_registry_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("registry.json"), b"{not json").unwrap();
        let err = Registry::open(dir.path()).unwrap_err();
        assert!(err.to_string().contains("registry.json"), "{err}");
    }
}
