//! Durable object storage and the change log behind watches, in the manner of
//! k3s's kine: SQLite holds every object and a log of changes, one write
//! transaction per mutation, and the log's row id is the global
//! `resourceVersion`. An in-memory copy of the objects and of the retained log
//! serves reads and watches; SQLite stays the source of truth on restart.
//!
//! This module knows nothing of HTTP or of resource kinds: it stores JSON
//! under string keys and stamps `metadata.resourceVersion`.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;
use tokio::sync::watch;

use crate::error::{ApiError, ApiResult};

/// What a watch sees: ADDED, MODIFIED or DELETED.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeType {
    Added,
    Modified,
    Deleted,
}

impl ChangeType {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeType::Added => "ADDED",
            ChangeType::Modified => "MODIFIED",
            ChangeType::Deleted => "DELETED",
        }
    }

    fn parse(s: &str) -> Self {
        match s {
            "ADDED" => ChangeType::Added,
            "DELETED" => ChangeType::Deleted,
            _ => ChangeType::Modified,
        }
    }
}

/// One committed change: the object as it is after the change (for DELETED,
/// its last state carrying the deletion's resourceVersion).
#[derive(Debug, Clone)]
pub struct Change {
    pub rv: u64,
    pub kind: ChangeType,
    pub key: String,
    pub object: Arc<Value>,
    /// The object before the change, while in memory (None after a restart),
    /// so a filtered watch can tell "stopped matching" from "never matched".
    pub prev: Option<Arc<Value>>,
}

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

struct Inner {
    conn: Connection,
    objects: BTreeMap<String, Arc<Value>>,
    log: VecDeque<Arc<Change>>,
    rv: u64,
    /// Highest resourceVersion no longer in the log: a watch must start at or after it.
    compacted: u64,
    writes_since_compaction: u64,
    /// owner uid -> keys of objects whose ownerReferences name it (for GC).
    dependents: HashMap<String, BTreeSet<String>>,
}

fn owner_uids(object: &Value) -> impl Iterator<Item = &str> {
    object["metadata"]["ownerReferences"].as_array().into_iter().flatten().filter_map(|r| r["uid"].as_str())
}

impl Inner {
    fn index(&mut self, key: &str, old: Option<&Value>, new: Option<&Value>) {
        for uid in old.into_iter().flat_map(owner_uids) {
            if let Some(set) = self.dependents.get_mut(uid) {
                set.remove(key);
                if set.is_empty() {
                    self.dependents.remove(uid);
                }
            }
        }
        for uid in new.into_iter().flat_map(owner_uids) {
            self.dependents.entry(uid.to_string()).or_default().insert(key.to_string());
        }
    }
}

/// Shared handle to the storage.
pub struct Store {
    inner: Mutex<Inner>,
    history: usize,
    notify: watch::Sender<u64>,
}

/// A consistent view for a list: the matching objects and the RV they are current at.
pub struct Snapshot {
    pub rv: u64,
    pub items: Vec<Arc<Value>>,
}

/// Changes after some resourceVersion, or the fact that they are compacted away.
pub enum Since {
    Changes(Vec<Arc<Change>>, u64),
    Expired { requested: u64, oldest: u64 },
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS objects (key TEXT PRIMARY KEY, rv INTEGER NOT NULL, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS changes (rv INTEGER PRIMARY KEY, type TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
";

fn meta_get(conn: &Connection, name: &str) -> rusqlite::Result<u64> {
    let v: Option<i64> = conn.query_row("SELECT value FROM meta WHERE name = ?1", [name], |r| r.get(0)).optional()?;
    Ok(v.unwrap_or(0) as u64)
}

fn parse_json(text: &str) -> ApiResult<Value> {
    serde_json::from_str(text).map_err(|e| ApiError::internal(format!("corrupt stored object: {e}")))
}

impl Store {
    /// Open (or create) `path`. `history` is how many changes are kept for
    /// watches; a watch from an older resourceVersion gets 410 Expired.
    pub fn open(path: &Path, history: usize) -> ApiResult<Self> {
        let conn = Connection::open(path)?;
        // WAL with synchronous=NORMAL survives a killed process: a commit is in
        // the WAL file before the call returns. Only power loss can drop the
        // last commits, which the design accepts for a one-machine server.
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.execute_batch(SCHEMA)?;
        let rv = meta_get(&conn, "rv")?;
        let compacted = meta_get(&conn, "compacted")?;
        let mut objects = BTreeMap::new();
        {
            let mut stmt = conn.prepare("SELECT key, value FROM objects")?;
            let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
            for row in rows {
                let (key, value) = row?;
                objects.insert(key, Arc::new(parse_json(&value)?));
            }
        }
        let mut log = VecDeque::new();
        {
            let mut stmt = conn.prepare("SELECT rv, type, key, value FROM changes WHERE rv > ?1 ORDER BY rv")?;
            let rows = stmt.query_map([compacted as i64], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?, r.get::<_, String>(3)?))
            })?;
            for row in rows {
                let (crv, kind, key, value) = row?;
                log.push_back(Arc::new(Change {
                    rv: crv as u64,
                    kind: ChangeType::parse(&kind),
                    key,
                    object: Arc::new(parse_json(&value)?),
                    prev: None,
                }));
            }
        }
        let mut inner =
            Inner { conn, objects, log, rv, compacted, writes_since_compaction: 0, dependents: HashMap::new() };
        let all: Vec<(String, Arc<Value>)> = inner.objects.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        for (key, obj) in all {
            inner.index(&key, None, Some(&obj));
        }
        trim_log(&mut inner, history);
        let (notify, _) = watch::channel(rv);
        Ok(Self { inner: Mutex::new(inner), history, notify })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves the maps consistent with SQLite
        // (the transaction is committed or rolled back before maps change).
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The current global resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// The highest resourceVersion no longer in the change log.
    pub fn compacted(&self) -> u64 {
        self.lock().compacted
    }

    /// Subscribe to "something was committed" notifications (the value is the new RV).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.notify.subscribe()
    }

    pub fn get(&self, key: &str) -> Option<Arc<Value>> {
        self.lock().objects.get(key).cloned()
    }

    /// Every object whose key starts with `prefix`, at one resourceVersion.
    pub fn list(&self, prefix: &str) -> Snapshot {
        let inner = self.lock();
        let items = inner
            .objects
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(_, v)| v.clone())
            .collect();
        Snapshot { rv: inner.rv, items }
    }

    /// Keys (and objects) under `prefix`, starting strictly after `after`.
    pub fn list_after(&self, prefix: &str, after: &str) -> Snapshot {
        let inner = self.lock();
        let start = if after.is_empty() { prefix.to_string() } else { format!("{after}\u{0}") };
        let items =
            inner.objects.range(start..).take_while(|(k, _)| k.starts_with(prefix)).map(|(_, v)| v.clone()).collect();
        Snapshot { rv: inner.rv, items }
    }

    /// Keys of the objects whose ownerReferences name `uid`.
    pub fn dependents(&self, uid: &str) -> Vec<String> {
        self.lock().dependents.get(uid).map(|s| s.iter().cloned().collect()).unwrap_or_default()
    }

    /// The retained changes with rv > `after`.
    pub fn since(&self, after: u64) -> Since {
        let inner = self.lock();
        if after < inner.compacted {
            return Since::Expired { requested: after, oldest: inner.compacted + 1 };
        }
        let start = inner.log.partition_point(|c| c.rv <= after);
        Since::Changes(inner.log.range(start..).cloned().collect(), inner.rv)
    }

    /// Atomically read the object under `key`, let `f` decide, and commit the
    /// decision in one SQLite transaction. `f` runs under the store lock, so
    /// preconditions it checks (resourceVersion, uid) cannot race.
    pub fn mutate<F>(&self, key: &str, f: F) -> ApiResult<Written>
    where
        F: FnOnce(Option<&Arc<Value>>, u64) -> ApiResult<Mutation>,
    {
        let mut inner = self.lock();
        let current = inner.objects.get(key).cloned();
        let next_rv = inner.rv + 1;
        let decision = f(current.as_ref(), next_rv)?;
        let (kind, mut object) = match decision {
            Mutation::Unchanged(o) => return Ok(Written::Unchanged(o)),
            Mutation::Put(o) => (if current.is_some() { ChangeType::Modified } else { ChangeType::Added }, o),
            Mutation::Delete(o) => {
                if current.is_none() {
                    return Err(ApiError::internal(format!("delete of missing key {key}")));
                }
                (ChangeType::Deleted, o)
            }
        };
        set_rv(&mut object, next_rv);
        let text = object.to_string();
        {
            let tx = inner.conn.transaction()?;
            match kind {
                ChangeType::Deleted => {
                    tx.execute("DELETE FROM objects WHERE key = ?1", [key])?;
                }
                _ => {
                    tx.execute(
                        "INSERT INTO objects (key, rv, value) VALUES (?1, ?2, ?3) ON CONFLICT(key) DO UPDATE SET rv = excluded.rv, value = excluded.value",
                        params![key, next_rv as i64, text],
                    )?;
                }
            }
            tx.execute(
                "INSERT INTO changes (rv, type, key, value) VALUES (?1, ?2, ?3, ?4)",
                params![next_rv as i64, kind.as_str(), key, text],
            )?;
            tx.execute("INSERT INTO meta (name, value) VALUES ('rv', ?1) ON CONFLICT(name) DO UPDATE SET value = excluded.value", [next_rv as i64])?;
            tx.commit()?;
        }
        let object = Arc::new(object);
        inner.rv = next_rv;
        match kind {
            ChangeType::Deleted => {
                inner.objects.remove(key);
                inner.index(key, current.as_deref(), None);
            }
            _ => {
                inner.objects.insert(key.to_string(), object.clone());
                inner.index(key, current.as_deref(), Some(&object));
            }
        }
        inner.log.push_back(Arc::new(Change {
            rv: next_rv,
            kind,
            key: key.to_string(),
            object: object.clone(),
            prev: current,
        }));
        trim_log(&mut inner, self.history);
        inner.writes_since_compaction += 1;
        if inner.writes_since_compaction >= 256 {
            inner.writes_since_compaction = 0;
            let compacted = inner.compacted as i64;
            // Compaction of the on-disk log is best effort: a failure only
            // keeps more history than needed.
            let _ = inner.conn.execute("DELETE FROM changes WHERE rv <= ?1", [compacted]);
        }
        drop(inner);
        self.notify.send_replace(next_rv);
        Ok(match kind {
            ChangeType::Added => Written::Created(object),
            ChangeType::Modified => Written::Updated(object),
            ChangeType::Deleted => Written::Deleted(object),
        })
    }
}

fn trim_log(inner: &mut Inner, history: usize) {
    let mut changed = false;
    while inner.log.len() > history {
        if let Some(c) = inner.log.pop_front() {
            inner.compacted = c.rv;
            changed = true;
        }
    }
    if changed {
        let _ = inner.conn.execute(
            "INSERT INTO meta (name, value) VALUES ('compacted', ?1) ON CONFLICT(name) DO UPDATE SET value = excluded.value",
            [inner.compacted as i64],
        );
    }
}

fn set_rv(object: &mut Value, rv: u64) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(name: &str) -> Value {
        json!({"metadata": {"name": name}})
    }

    #[test]
    fn resource_versions_continue_after_reopen_and_objects_survive() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        {
            let store = Store::open(&path, 100).unwrap();
            store.mutate("a", |_, _| Ok(Mutation::Put(obj("a")))).unwrap();
            store.mutate("b", |_, _| Ok(Mutation::Put(obj("b")))).unwrap();
            assert_eq!(store.current_rv(), 2);
        }
        let store = Store::open(&path, 100).unwrap();
        assert_eq!(store.current_rv(), 2);
        assert_eq!(store.get("a").unwrap()["metadata"]["resourceVersion"], "1");
        let w = store.mutate("a", |cur, _| Ok(Mutation::Delete((**cur.unwrap()).clone()))).unwrap();
        assert!(matches!(w, Written::Deleted(_)));
        assert_eq!(store.current_rv(), 3);
        match store.since(1) {
            Since::Changes(c, _) => assert_eq!(c.iter().map(|c| c.rv).collect::<Vec<_>>(), vec![2, 3]),
            Since::Expired { .. } => panic!("history should be kept"),
        }
    }

    #[test]
    fn a_watch_from_before_the_kept_history_is_expired() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db"), 2).unwrap();
        for i in 0..5 {
            store.mutate(&format!("k{i}"), |_, _| Ok(Mutation::Put(obj("x")))).unwrap();
        }
        assert!(matches!(store.since(1), Since::Expired { requested: 1, oldest: 4 }));
        assert!(matches!(store.since(3), Since::Changes(ref c, 5) if c.len() == 2));
    }

    #[test]
    fn the_owner_index_follows_writes_and_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let owned = json!({"metadata": {"name": "d", "ownerReferences": [{"uid": "u1"}]}});
        {
            let store = Store::open(&path, 10).unwrap();
            store.mutate("d", |_, _| Ok(Mutation::Put(owned.clone()))).unwrap();
            assert_eq!(store.dependents("u1"), vec!["d".to_string()]);
        }
        let store = Store::open(&path, 10).unwrap();
        assert_eq!(store.dependents("u1"), vec!["d".to_string()]);
        store.mutate("d", |_, _| Ok(Mutation::Put(obj("d")))).unwrap();
        assert!(store.dependents("u1").is_empty(), "dropping the reference drops the index entry");
    }

    #[test]
    fn an_unchanged_mutation_does_not_bump_the_resource_version() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db"), 10).unwrap();
        store.mutate("a", |_, _| Ok(Mutation::Put(obj("a")))).unwrap();
        let w = store.mutate("a", |cur, _| Ok(Mutation::Unchanged(cur.unwrap().clone()))).unwrap();
        assert!(matches!(w, Written::Unchanged(_)));
        assert_eq!(store.current_rv(), 1);
    }
}
