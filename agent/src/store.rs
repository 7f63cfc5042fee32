//! The agent's data directory: its agent id, and one record per task it runs
//! (what was launched and the latest status), so that a restarted agent
//! re-registers as the same agent and can report every task. Writes are
//! atomic and durable (write a temporary file, fsync it, rename it over the
//! record, fsync the directory). Secret file contents are never written
//! here. Every call blocks on the disk: the agent calls them from its
//! writer thread ([`crate::writer`]) only, never from an async worker.

use std::path::{Path, PathBuf};

use mpiswarm_mesos::task::Volume;
use mpiswarm_mesos::{AgentId, ExecutorInfo, FrameworkId, TaskInfo, TaskStatus};
use serde::{Deserialize, Serialize};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("data directory {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("task record of service {service} cannot be written as JSON: {source}")]
    Encode {
        service: String,
        #[source]
        source: serde_json::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError {
    let path = path.to_owned();
    move |source| StoreError::Io { path, source }
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
        std::fs::create_dir_all(&tasks).map_err(io(&tasks))?;
        Ok(Self { dir: dir.to_owned() })
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn agent_id(&self) -> Result<Option<AgentId>, StoreError> {
        let path = self.dir.join("agent_id");
        match std::fs::read_to_string(&path) {
            Ok(s) if !s.trim().is_empty() => Ok(Some(AgentId::new(s.trim()))),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(StoreError::Io { path, source }),
        }
    }

    pub fn save_agent_id(&self, id: &AgentId) -> Result<(), StoreError> {
        write_atomic(&self.dir.join("agent_id"), id.value.as_bytes())
    }

    pub fn tasks(&self) -> Result<Vec<TaskRecord>, StoreError> {
        let dir = self.dir.join("tasks");
        let entries = std::fs::read_dir(&dir).map_err(io(&dir))?;
        let mut out = Vec::new();
        for entry in entries {
            let path = entry.map_err(io(&dir))?.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let text = std::fs::read(&path).map_err(io(&path))?;
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
        let json = serde_json::to_vec_pretty(&record)
            .map_err(|source| StoreError::Encode { service: record.service_name.clone(), source })?;
        write_atomic(&self.task_path(&record.service_name), &json)
    }

    pub fn forget_task(&self, service_name: &str) -> Result<(), StoreError> {
        let path = self.task_path(service_name);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(StoreError::Io { path, source }),
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

/// Replaces `path` with `data` so that after a crash it holds either the old
/// or the new content, and the new content once this returns.
fn write_atomic(path: &Path, data: &[u8]) -> Result<(), StoreError> {
    use std::io::Write as _;
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::File::create(&tmp).map_err(io(&tmp))?;
    file.write_all(data).map_err(io(&tmp))?;
    file.sync_all().map_err(io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io(path))?;
    sync_dir(path)
}

/// Makes a rename or removal in `path`'s directory durable.
fn sync_dir(path: &Path) -> Result<(), StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use mpiswarm_mesos::{TaskId, TaskState};

    pub(crate) fn record(service: &str) -> TaskRecord {
        let mut task_info = TaskInfo::new(service, service, &AgentId::new("A"));
        let secret = serde_json::json!({"type": "SECRET", "secret": {"type": "VALUE", "value": {"data": "c2VjcmV0"}}});
        task_info.container = Some(
            serde_json::from_value(serde_json::json!({
                "type": "DOCKER",
                "docker": {"image": "img"},
                "volumes": [{"container_path": "/run/secrets/k", "mode": "RO", "source": secret}]
            }))
            .unwrap(),
        );
        TaskRecord {
            framework_id: FrameworkId::new("fw"),
            framework_role: None,
            executor_info: None,
            task_info,
            service_name: service.to_owned(),
            image: "img".into(),
            status: TaskStatus::new(TaskId::new(service), TaskState::Running),
            acknowledged: false,
        }
    }

    #[test]
    fn records_round_trip_without_their_secrets_and_a_forgotten_one_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.save_task(&record("s1")).unwrap();
        store.save_task(&record("s2")).unwrap();
        store.forget_task("s1").unwrap();
        store.forget_task("never-there").unwrap();
        let tasks = store.tasks().unwrap();
        assert_eq!(tasks.len(), 1);
        assert_eq!(tasks[0].service_name, "s2");
        assert!(tasks[0].task_info.container.as_ref().unwrap().volumes.is_empty(), "the secret was not stored");
        let raw = std::fs::read_to_string(dir.path().join("tasks/s2.json")).unwrap();
        assert!(!raw.contains("c2VjcmV0"), "{raw}");
        assert!(!dir.path().join("tasks/s2.tmp").exists(), "no temporary file is left");
    }

    #[test]
    fn a_store_that_cannot_be_written_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        std::fs::remove_dir_all(dir.path().join("tasks")).unwrap();
        let err = store.save_task(&record("s1")).unwrap_err().to_string();
        assert!(err.contains("tasks/s1.tmp"), "{err}");
    }
}
