//! The one thread that writes SQLite, as kine serialises writes: it owns the
//! connection, commits each request in its own transaction if the object the
//! request was decided on is still the current one, then applies the change
//! to the shared in-memory state (a lock held for map updates only) and wakes
//! the watchers. It runs no caller code (admission happens before a request
//! is sent) and is the only writer of the state, so resourceVersions are
//! handed out in commit order.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, RwLock, mpsc};

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;
use tokio::sync::{oneshot, watch};

use crate::error::{ApiError, ApiResult};
use crate::locks;
use crate::state::{Change, ChangeType, State};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS objects (key TEXT PRIMARY KEY, rv INTEGER NOT NULL, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS changes (rv INTEGER PRIMARY KEY, type TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
";

/// Old change rows are deleted from disk every this many commits.
const COMPACT_EVERY: u64 = 256;

/// One write: commit `object` under `key` as `kind`, if the current object
/// is still `seen` (the same allocation the caller decided on).
pub struct Request {
    pub key: String,
    pub seen: Option<Arc<Value>>,
    pub kind: ChangeType,
    pub object: Value,
    /// The committed change, or None when the object changed meanwhile.
    pub reply: oneshot::Sender<ApiResult<Option<Arc<Change>>>>,
}

fn meta_get(conn: &Connection, name: &str) -> rusqlite::Result<u64> {
    let v: Option<i64> = conn.query_row("SELECT value FROM meta WHERE name = ?1", [name], |r| r.get(0)).optional()?;
    Ok(v.unwrap_or(0) as u64)
}

fn parse_json(text: &str) -> ApiResult<Value> {
    serde_json::from_str(text).map_err(|e| ApiError::internal(format!("corrupt stored object: {e}")))
}

/// Open (or create) the database and load the state it holds.
pub fn open(path: &Path, history: usize) -> ApiResult<(Connection, State)> {
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
    Ok((conn, State::new(objects, log, rv, compacted, history)))
}

/// Sets `true` when the writer thread ends, however it ends (a panic included).
struct Exit(watch::Sender<bool>);

impl Drop for Exit {
    fn drop(&mut self) {
        self.0.send_replace(true);
    }
}

/// Start the writer thread. It ends when every request sender is dropped.
pub fn spawn(
    conn: Connection,
    state: Arc<RwLock<State>>,
    notify: Arc<watch::Sender<u64>>,
) -> std::io::Result<(mpsc::Sender<Request>, watch::Receiver<bool>)> {
    let (tx, rx) = mpsc::channel::<Request>();
    let (exit_tx, exit_rx) = watch::channel(false);
    std::thread::Builder::new().name("apiserver-writer".into()).spawn(move || {
        let _exit = Exit(exit_tx);
        let mut writer = Writer { conn, state, notify, commits: 0 };
        while let Ok(req) = rx.recv() {
            let Request { key, seen, kind, object, reply } = req;
            let answer = writer.commit(key, seen.as_ref(), kind, object);
            // The caller may have gone away (client disconnected): nothing to tell.
            let _ = reply.send(answer);
        }
    })?;
    Ok((tx, exit_rx))
}

struct Writer {
    conn: Connection,
    state: Arc<RwLock<State>>,
    notify: Arc<watch::Sender<u64>>,
    commits: u64,
}

fn set_rv(object: &mut Value, rv: u64) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

fn same(a: Option<&Arc<Value>>, b: Option<&Arc<Value>>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        _ => false,
    }
}

impl Writer {
    fn commit(
        &mut self,
        key: String,
        seen: Option<&Arc<Value>>,
        kind: ChangeType,
        mut object: Value,
    ) -> ApiResult<Option<Arc<Change>>> {
        let (current, next_rv, compacted_before, compacted) = {
            let s = locks::read(&self.state);
            let current = s.get(&key).cloned();
            if !same(current.as_ref(), seen) {
                return Ok(None);
            }
            (current, s.rv() + 1, s.compacted(), s.compacted_after_one_more())
        };
        set_rv(&mut object, next_rv);
        let text = object.to_string();
        let tx = self.conn.transaction()?;
        // Cached statements: parsing the SQL again on every commit cost
        // more than running it.
        match kind {
            ChangeType::Deleted => {
                tx.prepare_cached("DELETE FROM objects WHERE key = ?1")?.execute([&key])?;
            }
            _ => {
                tx.prepare_cached(
                    "INSERT INTO objects (key, rv, value) VALUES (?1, ?2, ?3) ON CONFLICT(key) DO UPDATE SET rv = excluded.rv, value = excluded.value",
                )?
                .execute(params![key, next_rv as i64, text])?;
            }
        }
        tx.prepare_cached("INSERT INTO changes (rv, type, key, value) VALUES (?1, ?2, ?3, ?4)")?.execute(params![
            next_rv as i64,
            kind.as_str(),
            key,
            text
        ])?;
        let set_meta =
            "INSERT INTO meta (name, value) VALUES (?1, ?2) ON CONFLICT(name) DO UPDATE SET value = excluded.value";
        tx.prepare_cached(set_meta)?.execute(params!["rv", next_rv as i64])?;
        if compacted != compacted_before {
            // In the same transaction: on restart the log must never claim
            // history that the periodic cleanup below already deleted.
            tx.prepare_cached(set_meta)?.execute(params!["compacted", compacted as i64])?;
        }
        tx.commit()?;
        let change = Arc::new(Change { rv: next_rv, kind, key, object: Arc::new(object), prev: current });
        locks::write(&self.state).apply(change.clone());
        self.notify.send_replace(next_rv);
        self.commits += 1;
        if self.commits.is_multiple_of(COMPACT_EVERY)
            && let Err(e) = self.conn.execute("DELETE FROM changes WHERE rv <= ?1", [compacted as i64])
        {
            // Only disk space: the rows are past the compacted mark and never read.
            tracing::warn!(error = %e, compacted, "deleting compacted changes failed; will retry");
        }
        Ok(Some(change))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn send(
        tx: &mpsc::Sender<Request>,
        key: &str,
        seen: Option<Arc<Value>>,
        object: Value,
    ) -> ApiResult<Option<Arc<Change>>> {
        let (reply, answer) = oneshot::channel();
        let kind = if seen.is_some() { ChangeType::Modified } else { ChangeType::Added };
        tx.send(Request { key: key.into(), seen, kind, object, reply }).expect("writer alive");
        answer.blocking_recv().expect("writer answers")
    }

    #[test]
    fn the_writer_commits_only_on_the_object_it_was_decided_on_and_stamps_the_rv() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("db");
        let (conn, state) = open(&path, 10).expect("open");
        let state = Arc::new(RwLock::new(state));
        let (notify, seen_rv) = watch::channel(0);
        let (tx, mut exit) = spawn(conn, state.clone(), Arc::new(notify)).expect("spawn");
        let first = send(&tx, "k", None, json!({"metadata": {"name": "k"}})).expect("commit").expect("committed");
        assert_eq!((first.rv, first.object["metadata"]["resourceVersion"].as_str()), (1, Some("1")));
        assert!(seen_rv.has_changed().expect("sender alive"), "watchers are woken");
        assert!(send(&tx, "k", None, json!({"metadata": {}})).expect("answer").is_none(), "k exists now: stale");
        let current = locks::read(&state).get("k").cloned();
        let second = send(&tx, "k", current, json!({"metadata": {"name": "k"}, "v": 2})).expect("commit");
        assert_eq!(second.map(|c| c.rv), Some(2));
        drop(tx);
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("runtime");
        let ended = rt
            .block_on(async { tokio::time::timeout(std::time::Duration::from_secs(30), exit.wait_for(|e| *e)).await });
        assert!(ended.is_ok_and(|r| r.is_ok()), "the writer ends when its last sender goes");
        let (_, reloaded) = open(&path, 10).expect("reopen");
        assert_eq!((reloaded.rv(), reloaded.get("k").map(|o| o["v"].clone())), (2, Some(json!(2))));
    }
}
