//! Durable object storage and the change log behind watches, in the manner of
//! k3s's kine: SQLite holds every object and a log of changes, one write
//! transaction per mutation, and the log's row id is the global
//! `resourceVersion`. An in-memory copy of the objects and of the retained log
//! serves reads and watches; SQLite stays the source of truth on restart.
//!
//! Writes are serialised by one writer thread that owns the SQLite
//! connection (the `writer` module). A caller decides what to write without
//! any lock held (`mutate` runs its closure on the object as last read) and
//! the writer commits only if that object is still the current one, else the
//! caller decides again. The in-memory state is updated after the commit,
//! under a lock held only for map updates, so reads and watches never wait
//! behind a transaction.
//!
//! This module knows nothing of HTTP or of resource kinds: it stores JSON
//! under string keys and stamps `metadata.resourceVersion`.

use std::path::Path;
use std::sync::{Arc, RwLock, mpsc};

use serde_json::Value;
use tokio::sync::{oneshot, watch};

use crate::error::{ApiError, ApiResult};
use crate::locks;
use crate::state::State;
pub use crate::state::{Change, ChangeType, Since, Snapshot};
use crate::writer::{self, Request};

/// How often a write is decided again because its object changed under it
/// before it gives up with 409 (each retry means another write committed).
const MAX_ATTEMPTS: usize = 64;

/// What a mutation closure decides to do with the object under a key.
pub enum Mutation {
    /// Store this object (create or update). The store sets its resourceVersion.
    Put(Value),
    /// Remove the object; the value is its last state, sent with DELETED.
    Delete(Value),
    /// Nothing changes: no new resourceVersion, no event.
    Unchanged(Arc<Value>),
}

/// The outcome of a mutation as the caller reports it.
#[derive(Debug, Clone)]
pub enum Written {
    Created(Arc<Value>),
    Updated(Arc<Value>),
    Deleted(Arc<Value>),
    Unchanged(Arc<Value>),
}

impl Written {
    pub fn object(&self) -> &Arc<Value> {
        match self {
            Written::Created(o) | Written::Updated(o) | Written::Deleted(o) | Written::Unchanged(o) => o,
        }
    }
}

/// Shared handle to the storage.
pub struct Store {
    state: Arc<RwLock<State>>,
    writer: mpsc::Sender<Request>,
    notify: Arc<watch::Sender<u64>>,
    writer_exit: watch::Receiver<bool>,
}

fn writer_gone() -> ApiError {
    ApiError::internal(
        "the storage writer has stopped, so nothing can be written; the server is shutting down (see its log), restart it",
    )
}

impl Store {
    /// Open (or create) `path` and start its writer thread. `history` is how
    /// many changes are kept for watches; a watch from an older
    /// resourceVersion gets 410 Expired.
    pub fn open(path: &Path, history: usize) -> ApiResult<Self> {
        let (conn, state) = writer::open(path, history)?;
        let (notify, _) = watch::channel(state.rv());
        let notify = Arc::new(notify);
        let state = Arc::new(RwLock::new(state));
        let (writer, writer_exit) = writer::spawn(conn, state.clone(), notify.clone())
            .map_err(|e| ApiError::internal(format!("cannot start the storage writer thread: {e}")))?;
        Ok(Self { state, writer, notify, writer_exit })
    }

    /// The current global resourceVersion.
    pub fn current_rv(&self) -> u64 {
        locks::read(&self.state).rv()
    }

    /// The highest resourceVersion no longer in the change log.
    pub fn compacted(&self) -> u64 {
        locks::read(&self.state).compacted()
    }

    /// Subscribe to "something was committed" notifications (the value is the new RV).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.notify.subscribe()
    }

    /// Resolves when the writer thread has ended (it panicked, or the store
    /// is being dropped): a server cannot go on without it.
    pub async fn writer_stopped(&self) {
        let mut exit = self.writer_exit.clone();
        // An Err means the thread's flag itself is gone, which also means it ended.
        let _ = exit.wait_for(|ended| *ended).await;
    }

    pub fn get(&self, key: &str) -> Option<Arc<Value>> {
        locks::read(&self.state).get(key).cloned()
    }

    /// Every object whose key starts with `prefix`, at one resourceVersion.
    pub fn list(&self, prefix: &str) -> Snapshot {
        locks::read(&self.state).list(prefix, "")
    }

    /// Keys (and objects) under `prefix`, starting strictly after `after`.
    pub fn list_after(&self, prefix: &str, after: &str) -> Snapshot {
        locks::read(&self.state).list(prefix, after)
    }

    /// Keys of the objects whose ownerReferences name `uid`.
    pub fn dependents(&self, uid: &str) -> Vec<String> {
        locks::read(&self.state).dependents(uid)
    }

    /// The retained changes with rv > `after`.
    pub fn since(&self, after: u64) -> Since {
        locks::read(&self.state).since(after)
    }

    /// Read the object under `key`, let `decide` choose what to write (no
    /// lock is held while it runs), and commit that through the writer if
    /// the object is still the one `decide` saw; if another write got there
    /// first, `decide` runs again on the newer object. Preconditions it
    /// checks (resourceVersion, uid, existence) therefore cannot race.
    pub async fn mutate<F>(&self, key: &str, mut decide: F) -> ApiResult<Written>
    where
        F: FnMut(Option<&Arc<Value>>) -> ApiResult<Mutation>,
    {
        for _ in 0..MAX_ATTEMPTS {
            let seen = self.get(key);
            let (kind, object) = match decide(seen.as_ref())? {
                Mutation::Unchanged(o) => return Ok(Written::Unchanged(o)),
                Mutation::Put(o) if seen.is_some() => (ChangeType::Modified, o),
                Mutation::Put(o) => (ChangeType::Added, o),
                Mutation::Delete(_) if seen.is_none() => {
                    return Err(ApiError::internal(format!("delete of missing key {key}")));
                }
                Mutation::Delete(o) => (ChangeType::Deleted, o),
            };
            let (reply, answer) = oneshot::channel();
            self.writer.send(Request { key: key.to_string(), seen, kind, object, reply }).map_err(|_| writer_gone())?;
            if let Some(change) = answer.await.map_err(|_| writer_gone())?? {
                let object = change.object.clone();
                return Ok(match kind {
                    ChangeType::Added => Written::Created(object),
                    ChangeType::Modified => Written::Updated(object),
                    ChangeType::Deleted => Written::Deleted(object),
                });
            }
        }
        Err(ApiError::new(
            409,
            "Conflict",
            format!(
                "{key} was changed by other writers {MAX_ATTEMPTS} times while this write was being decided; retry it"
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(name: &str) -> Value {
        json!({"metadata": {"name": name}})
    }

    #[tokio::test]
    async fn resource_versions_continue_after_reopen_and_objects_survive() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("db.sqlite");
        {
            let store = Store::open(&path, 100).expect("open");
            store.mutate("a", |_| Ok(Mutation::Put(obj("a")))).await.expect("a");
            store.mutate("b", |_| Ok(Mutation::Put(obj("b")))).await.expect("b");
            assert_eq!(store.current_rv(), 2);
        }
        let store = Store::open(&path, 100).expect("reopen");
        assert_eq!(store.current_rv(), 2);
        assert_eq!(store.get("a").expect("a")["metadata"]["resourceVersion"], "1");
        let w = store
            .mutate("a", |cur| Ok(Mutation::Delete(cur.map(|c| (**c).clone()).unwrap_or_default())))
            .await
            .expect("delete");
        assert!(matches!(w, Written::Deleted(_)));
        assert_eq!(store.current_rv(), 3);
        match store.since(1) {
            Since::Changes(c, _) => assert_eq!(c.iter().map(|c| c.rv).collect::<Vec<_>>(), vec![2, 3]),
            Since::Expired { .. } => panic!("history should be kept"),
        }
    }

    #[tokio::test]
    async fn compaction_survives_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("db");
        {
            let store = Store::open(&path, 2).expect("open");
            for i in 0..5 {
                store.mutate(&format!("k{i}"), |_| Ok(Mutation::Put(obj("x")))).await.expect("put");
            }
            assert!(matches!(store.since(1), Since::Expired { requested: 1, oldest: 4 }));
        }
        let store = Store::open(&path, 2).expect("reopen");
        assert_eq!(store.compacted(), 3);
        assert!(matches!(store.since(3), Since::Changes(ref c, 5) if c.len() == 2));
    }

    #[tokio::test]
    async fn an_unchanged_mutation_does_not_bump_the_resource_version() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(&dir.path().join("db"), 10).expect("open");
        store.mutate("a", |_| Ok(Mutation::Put(obj("a")))).await.expect("put");
        let w = store
            .mutate("a", |cur| cur.cloned().map(Mutation::Unchanged).ok_or_else(|| ApiError::internal("gone")))
            .await
            .expect("unchanged");
        assert!(matches!(w, Written::Unchanged(_)));
        assert_eq!(store.current_rv(), 1);
    }

    #[tokio::test]
    async fn a_write_decided_on_a_stale_object_is_decided_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Arc::new(Store::open(&dir.path().join("db"), 10).expect("open"));
        store.mutate("n", |_| Ok(Mutation::Put(json!({"metadata": {}, "n": 0})))).await.expect("seed");
        let mut attempts = 0;
        let sneaky = store.clone();
        let w = store
            .mutate("n", |cur| {
                attempts += 1;
                let n = cur.map(|c| c["n"].as_i64().unwrap_or(0)).unwrap_or(0);
                if attempts == 1 {
                    // Another writer commits between this decision and its commit.
                    let other = sneaky.clone();
                    std::thread::spawn(move || {
                        let rt = tokio::runtime::Builder::new_current_thread().build().expect("rt");
                        rt.block_on(other.mutate("n", |_| Ok(Mutation::Put(json!({"metadata": {}, "n": 10})))))
                    })
                    .join()
                    .expect("join")
                    .expect("other write");
                }
                Ok(Mutation::Put(json!({"metadata": {}, "n": n + 1})))
            })
            .await
            .expect("write");
        assert_eq!(attempts, 2, "the first decision was on a stale object");
        assert_eq!(w.object()["n"], 11, "the retry saw the other writer's value");
        assert_eq!(store.current_rv(), 3);
    }

    #[tokio::test]
    async fn reads_do_not_wait_for_a_commit_in_progress() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(&dir.path().join("db"), 10).expect("open");
        store.mutate("a", |_| Ok(Mutation::Put(obj("a")))).await.expect("put");
        // Hold SQLite's write lock from another connection: the writer's next
        // transaction blocks in SQLite, while reads are served from memory.
        let blocker = rusqlite::Connection::open(dir.path().join("db")).expect("second connection");
        blocker.execute_batch("BEGIN IMMEDIATE").expect("lock");
        let write = store.mutate("b", |_| Ok(Mutation::Put(obj("b"))));
        tokio::pin!(write);
        tokio::select! {
            _ = &mut write => panic!("the write cannot commit while SQLite is locked"),
            _ = tokio::task::yield_now() => {}
        }
        assert!(store.get("a").is_some(), "a read during a blocked commit is served");
        assert_eq!(store.list("").items.len(), 1);
        blocker.execute_batch("COMMIT").expect("unlock");
        tokio::time::timeout(std::time::Duration::from_secs(30), write)
            .await
            .expect("commits once unlocked")
            .expect("b");
        assert!(store.get("b").is_some());
    }
}
