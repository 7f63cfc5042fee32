//! The agent's data directory: its agent id, and one record per task it runs
//! (what was launched and the latest status), so that a restarted agent
//! re-registers as the same agent and can report every task. Writes are
//! atomic (write to a temporary file, then rename). Secret file contents are
//! never written here.

use std::path::{Path, PathBuf};

use mpiswarm_mesos::task::Volume;
use mpiswarm_mesos::{AgentId, ExecutorInfo, FrameworkId, TaskInfo, TaskStatus};
use serde::{Deserialize, Serialize};

#[derive(Debug, thiserror::Error)]
#[error("data directory {path}: {source}")]
pub struct StoreError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// A task as the agent remembers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    pub framework_id: FrameworkId,
    #[serde(default)]
    pub framework_role: Option<String>,
    #[serde(default)]
    pub executor_info: Option<ExecutorInfo>,
    /// The TaskInfo as launched, with secret data removed.
    pub task_info: TaskInfo,
    pub service_name: String,
    pub image: String,
    pub status: TaskStatus,
    /// The framework acknowledged the latest (terminal) status.
    #[serde(default)]
    pub acknowledged: bool,
}

pub struct Store {
    dir: PathBuf,
}

impl Store {
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        let tasks = dir.join("tasks");
        std::fs::create_dir_all(&tasks).map_err(|source| StoreError { path: tasks.clone(), source })?;
        Ok(Self { dir: dir.to_owned() })
    }

    pub fn agent_id(&self) -> Result<Option<AgentId>, StoreError> {
        let path = self.dir.join("agent_id");
        match std::fs::read_to_string(&path) {
            Ok(s) if !s.trim().is_empty() => Ok(Some(AgentId::new(s.trim()))),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(StoreError { path, source }),
        }
    }

    pub fn save_agent_id(&self, id: &AgentId) -> Result<(), StoreError> {
        write_atomic(&self.dir.join("agent_id"), id.value.as_bytes())
    }

    pub fn tasks(&self) -> Result<Vec<TaskRecord>, StoreError> {
        let dir = self.dir.join("tasks");
        let entries = std::fs::read_dir(&dir).map_err(|source| StoreError { path: dir.clone(), source })?;
        let mut out = Vec::new();
        for entry in entries {
            let path = entry.map_err(|source| StoreError { path: dir.clone(), source })?.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let text = std::fs::read(&path).map_err(|source| StoreError { path: path.clone(), source })?;
            match serde_json::from_slice(&text) {
                Ok(record) => out.push(record),
                // A record this agent cannot read is left for a human, not deleted.
                Err(e) => tracing::warn!(path = %path.display(), error = %e, "ignoring unreadable task record"),
            }
        }
        Ok(out)
    }

    pub fn save_task(&self, record: &TaskRecord) -> Result<(), StoreError> {
        let mut record = record.clone();
        strip_secrets(&mut record.task_info);
        let json = serde_json::to_vec_pretty(&record).expect("task records serialize");
        write_atomic(&self.task_path(&record.service_name), &json)
    }

    pub fn forget_task(&self, service_name: &str) -> Result<(), StoreError> {
        let path = self.task_path(service_name);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(StoreError { path, source }),
        }
    }

    fn task_path(&self, service_name: &str) -> PathBuf {
        self.dir.join("tasks").join(format!("{service_name}.json"))
    }
}

/// Drops inline secret data: the record only needs to say what ran.
fn strip_secrets(task: &mut TaskInfo) {
    if let Some(container) = &mut task.container {
        container.volumes.retain(|v: &Volume| {
            v.source.as_ref().and_then(|s| s.get("type")).and_then(|t| t.as_str()) != Some("SECRET")
        });
    }
}

fn write_atomic(path: &Path, data: &[u8]) -> Result<(), StoreError> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, data).map_err(|source| StoreError { path: tmp.clone(), source })?;
    std::fs::rename(&tmp, path).map_err(|source| StoreError { path: path.to_owned(), source })
}
