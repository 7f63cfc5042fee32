//! `--audit-log FILE`: one JSON line per request in the shape of a
//! Kubernetes audit `Event` (`audit.k8s.io/v1`, level `Metadata`: who, which
//! verb on which object, the answer's code; never a body), so that what a
//! client really does can be read afterwards -- for example to check that
//! an RBAC role covers every request a controller makes, or to feed tools
//! made for kube-apiserver's audit log.
//!
//! A request handler only queues its event; one thread of its own owns the
//! file and writes, so no handler ever waits for the disk or holds a lock
//! across I/O. The queue is bounded: when the disk cannot keep up, events
//! are dropped and counted (`apiserver_audit_event_dropped_total`) rather
//! than slowing the API down, as kube-apiserver's batch backend does.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use crate::rbac::User;

/// Events queued before new ones are dropped.
const QUEUE: usize = 16_384;

/// One audit event, with kube-apiserver's field names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    pub kind: String,
    pub api_version: String,
    pub level: String,
    #[serde(rename = "auditID")]
    pub audit_id: String,
    /// `ResponseComplete`, or `ResponseStarted` for a watch (logged once, when its stream starts).
    pub stage: String,
    #[serde(rename = "requestURI")]
    pub request_uri: String,
    /// The Kubernetes verb (`get`, `list`, `watch`, `create`, `update`,
    /// `patch`, `delete`, `deletecollection`) of a resource request, the
    /// lowercase HTTP method of any other.
    pub verb: String,
    pub user: UserInfo,
    #[serde(rename = "sourceIPs", default, skip_serializing_if = "Vec::is_empty")]
    pub source_ips: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub user_agent: String,
    /// Absent for requests that address no resource (discovery, /metrics, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_ref: Option<ObjectRef>,
    pub response_status: ResponseStatus,
    pub request_received_timestamp: String,
    pub stage_timestamp: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserInfo {
    pub username: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(default)]
    pub groups: Vec<String>,
}

impl UserInfo {
    /// The user authentication found (the admin, or one of the token file).
    pub fn of(user: &User) -> Self {
        Self { username: user.name.clone(), uid: user.uid.clone(), groups: user.groups.clone() }
    }

    /// A request without a known token.
    pub fn anonymous() -> Self {
        Self { username: "system:anonymous".into(), uid: String::new(), groups: vec!["system:unauthenticated".into()] }
    }
}

/// The Kubernetes verb as the `'static` name the audit event keeps.
pub fn known_verb(verb: &str) -> Option<&'static str> {
    ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"].into_iter().find(|v| *v == verb)
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    pub resource: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The group; empty for the core group.
    #[serde(default)]
    pub api_group: String,
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subresource: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResponseStatus {
    pub code: u16,
}

/// What routing learned about a request: its verb and object, if it addressed one.
#[derive(Debug, Default)]
pub struct RequestAttributes {
    pub verb: Option<&'static str>,
    pub object_ref: Option<ObjectRef>,
    pub watch: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("audit log {0}: {1}")]
    Open(String, #[source] std::io::Error),
    #[error("cannot start the audit log writer thread: {0}")]
    Thread(#[source] std::io::Error),
}

enum Message {
    Line(String),
    /// Answered once every line queued before it is written and flushed.
    Flush(oneshot::Sender<()>),
}

/// The queue to the writer thread. Cheap to clone.
#[derive(Clone)]
pub struct AuditLog {
    tx: mpsc::Sender<Message>,
    dropped: Arc<AtomicU64>,
    path: Arc<PathBuf>,
}

impl AuditLog {
    /// Opens (appends to) `path` and starts the writer thread. Called once
    /// at startup, before the server accepts requests.
    pub fn open(path: &Path) -> Result<Self, Error> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| Error::Open(path.display().to_string(), e))?;
        let (tx, rx) = mpsc::channel(QUEUE);
        let shown = path.display().to_string();
        std::thread::Builder::new()
            .name("audit-log".into())
            .spawn(move || write_lines(file, rx, &shown))
            .map_err(Error::Thread)?;
        Ok(Self { tx, dropped: Arc::default(), path: Arc::new(path.to_owned()) })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Queues one event; never waits. Returns false if it was dropped.
    pub fn record(&self, event: &Event) -> bool {
        let line = match serde_json::to_string(event) {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "an audit event cannot be serialised");
                return false;
            }
        };
        match self.tx.try_send(Message::Line(line)) {
            Ok(()) => true,
            Err(_) => {
                // Warn on the first drop and then every 1000th, not on each.
                let n = self.dropped.fetch_add(1, Ordering::Relaxed);
                if n.is_multiple_of(1000) {
                    tracing::warn!(path = %self.path.display(), dropped = n + 1, "the audit log cannot keep up; events are dropped");
                }
                false
            }
        }
    }

    /// Events dropped because the queue was full (or the writer stopped).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Resolves once every event recorded before the call is in the file.
    pub async fn flush(&self) {
        let (done, written) = oneshot::channel();
        if self.tx.send(Message::Flush(done)).await.is_ok() {
            let _stopped = written.await;
        }
    }
}

/// The writer thread: lines in order, one flush per burst, so a busy server
/// costs one write call per burst rather than per request.
fn write_lines(file: std::fs::File, mut rx: mpsc::Receiver<Message>, path: &str) {
    let mut out = std::io::BufWriter::new(file);
    let mut failed = false;
    while let Some(first) = rx.blocking_recv() {
        let mut waiting = Vec::new();
        let mut next = Some(first);
        while let Some(m) = next {
            match m {
                Message::Line(line) => {
                    if let Err(e) = writeln!(out, "{line}")
                        && !failed
                    {
                        failed = true;
                        tracing::error!(path, error = %e, "cannot write the audit log");
                    }
                }
                Message::Flush(done) => waiting.push(done),
            }
            next = rx.try_recv().ok();
        }
        if let Err(e) = out.flush()
            && !failed
        {
            failed = true;
            tracing::error!(path, error = %e, "cannot write the audit log");
        }
        for done in waiting {
            let _gone = done.send(());
        }
    }
}

/// RFC 3339 with microseconds, as kube-apiserver stamps audit events.
pub(crate) fn timestamp(t: chrono::DateTime<chrono::Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(verb: &str) -> Event {
        Event {
            kind: "Event".into(),
            api_version: "audit.k8s.io/v1".into(),
            level: "Metadata".into(),
            audit_id: "id".into(),
            stage: "ResponseComplete".into(),
            request_uri: "/api/v1/namespaces/default/secrets/s".into(),
            verb: verb.into(),
            user: UserInfo::of(&User {
                name: "team-a".into(),
                uid: "a".into(),
                groups: vec!["system:authenticated".into()],
            }),
            source_ips: vec!["127.0.0.1".into()],
            user_agent: "test/1".into(),
            object_ref: Some(ObjectRef {
                resource: "secrets".into(),
                namespace: "default".into(),
                name: "s".into(),
                api_group: String::new(),
                api_version: "v1".into(),
                subresource: String::new(),
            }),
            response_status: ResponseStatus { code: 200 },
            request_received_timestamp: "t".into(),
            stage_timestamp: "t".into(),
        }
    }

    #[tokio::test]
    async fn recorded_events_are_in_the_file_in_order_once_flushed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open(&path).expect("opens");
        let verbs = ["get", "list", "watch", "create", "patch", "delete"];
        for v in verbs {
            assert!(log.record(&event(v)));
        }
        log.flush().await;
        let text = std::fs::read_to_string(&path).expect("the log");
        let read: Vec<Event> = text.lines().map(|l| serde_json::from_str(l).expect("an event")).collect();
        assert_eq!(read.iter().map(|e| e.verb.as_str()).collect::<Vec<_>>(), verbs);
        assert_eq!(read[0], event("get"), "an event reads back as it was written");
        assert_eq!(log.dropped(), 0);
    }

    #[test]
    fn a_log_in_a_missing_directory_is_refused_with_its_path() {
        let err = AuditLog::open(Path::new("/nonexistent-dir/audit.jsonl")).err().expect("refused");
        assert!(err.to_string().contains("/nonexistent-dir/audit.jsonl"), "{err}");
    }
}
