//! The in-memory copy of the store: the current objects by key, the retained
//! change log (what watches replay), the owner-uid index garbage collection
//! follows, and the global resourceVersion. Pure data: no I/O, no locks and
//! no clock; the store wraps it in a lock and only the writer thread changes
//! it, after a commit.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use serde_json::Value;

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

    pub fn parse(s: &str) -> Self {
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

fn owner_uids(object: &Value) -> impl Iterator<Item = &str> {
    object["metadata"]["ownerReferences"].as_array().into_iter().flatten().filter_map(|r| r["uid"].as_str())
}

pub struct State {
    objects: BTreeMap<String, Arc<Value>>,
    log: VecDeque<Arc<Change>>,
    rv: u64,
    /// Highest resourceVersion no longer in the log: a watch must start at or after it.
    compacted: u64,
    /// How many changes the log keeps.
    history: usize,
    /// owner uid -> keys of objects whose ownerReferences name it (for GC).
    dependents: HashMap<String, BTreeSet<String>>,
}

impl State {
    /// The state as loaded from storage; the log is trimmed to `history`.
    pub fn new(
        objects: BTreeMap<String, Arc<Value>>,
        log: VecDeque<Arc<Change>>,
        rv: u64,
        compacted: u64,
        history: usize,
    ) -> Self {
        let mut s = Self { objects, log, rv, compacted, history: history.max(1), dependents: HashMap::new() };
        let all: Vec<(String, Arc<Value>)> = s.objects.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        for (key, obj) in all {
            s.index(&key, None, Some(&obj));
        }
        s.trim();
        s
    }

    pub fn rv(&self) -> u64 {
        self.rv
    }

    pub fn compacted(&self) -> u64 {
        self.compacted
    }

    pub fn get(&self, key: &str) -> Option<&Arc<Value>> {
        self.objects.get(key)
    }

    /// What `compacted` becomes once one more change is logged.
    pub fn compacted_after_one_more(&self) -> u64 {
        let over = (self.log.len() + 1).saturating_sub(self.history);
        match over {
            0 => self.compacted,
            n => self.log.get(n - 1).map(|c| c.rv).unwrap_or(self.compacted),
        }
    }

    /// Record a committed change: the object map, the owner index, the log
    /// (trimmed to the history) and the resourceVersion.
    pub fn apply(&mut self, change: Arc<Change>) {
        let key = change.key.clone();
        match change.kind {
            ChangeType::Deleted => {
                let old = self.objects.remove(&key);
                self.index(&key, old.as_deref(), None);
            }
            _ => {
                let old = self.objects.insert(key.clone(), change.object.clone());
                self.index(&key, old.as_deref(), Some(&change.object));
            }
        }
        self.rv = self.rv.max(change.rv);
        self.log.push_back(change);
        self.trim();
    }

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

    fn trim(&mut self) {
        while self.log.len() > self.history {
            if let Some(c) = self.log.pop_front() {
                self.compacted = c.rv;
            }
        }
    }

    /// Objects under `prefix` with keys strictly after `after` ("" for all).
    pub fn list(&self, prefix: &str, after: &str) -> Snapshot {
        let start = if after.is_empty() { prefix.to_string() } else { format!("{after}\u{0}") };
        let items =
            self.objects.range(start..).take_while(|(k, _)| k.starts_with(prefix)).map(|(_, v)| v.clone()).collect();
        Snapshot { rv: self.rv, items }
    }

    /// Keys of the objects whose ownerReferences name `uid`.
    pub fn dependents(&self, uid: &str) -> Vec<String> {
        self.dependents.get(uid).map(|s| s.iter().cloned().collect()).unwrap_or_default()
    }

    /// The retained changes with rv > `after`.
    pub fn since(&self, after: u64) -> Since {
        if after < self.compacted {
            return Since::Expired { requested: after, oldest: self.compacted + 1 };
        }
        let start = self.log.partition_point(|c| c.rv <= after);
        Since::Changes(self.log.range(start..).cloned().collect(), self.rv)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn change(rv: u64, kind: ChangeType, key: &str, object: Value) -> Arc<Change> {
        Arc::new(Change { rv, kind, key: key.into(), object: Arc::new(object), prev: None })
    }

    fn empty(history: usize) -> State {
        State::new(BTreeMap::new(), VecDeque::new(), 0, 0, history)
    }

    #[test]
    fn the_log_keeps_its_history_and_older_watches_expire() {
        let mut s = empty(2);
        for rv in 1..=5u64 {
            assert_eq!(s.compacted_after_one_more(), rv.saturating_sub(2), "before rv {rv}");
            s.apply(change(rv, ChangeType::Added, &format!("k{rv}"), json!({})));
        }
        assert_eq!((s.rv(), s.compacted()), (5, 3));
        assert!(matches!(s.since(1), Since::Expired { requested: 1, oldest: 4 }));
        assert!(matches!(s.since(3), Since::Changes(ref c, 5) if c.len() == 2));
    }

    #[test]
    fn the_owner_index_follows_changes() {
        let mut s = empty(10);
        let owned = json!({"metadata": {"ownerReferences": [{"uid": "u1"}]}});
        s.apply(change(1, ChangeType::Added, "d", owned.clone()));
        assert_eq!(s.dependents("u1"), ["d"]);
        s.apply(change(2, ChangeType::Modified, "d", json!({"metadata": {}})));
        assert!(s.dependents("u1").is_empty());
        s.apply(change(3, ChangeType::Modified, "d", owned));
        s.apply(change(4, ChangeType::Deleted, "d", json!({})));
        assert!(s.dependents("u1").is_empty() && s.get("d").is_none());
        let reloaded = State::new(
            [("e".to_string(), Arc::new(json!({"metadata": {"ownerReferences": [{"uid": "u2"}]}})))].into(),
            VecDeque::new(),
            4,
            0,
            10,
        );
        assert_eq!(reloaded.dependents("u2"), ["e"], "the index is rebuilt on load");
    }

    #[test]
    fn lists_are_by_prefix_and_resume_after_a_key() {
        let mut s = empty(10);
        for (rv, k) in [(1, "a/x/1"), (2, "a/x/2"), (3, "a/y/1"), (4, "b/x/1")] {
            s.apply(change(rv, ChangeType::Added, k, json!({"k": k})));
        }
        let keys =
            |snap: Snapshot| snap.items.iter().map(|o| o["k"].as_str().unwrap_or("").to_string()).collect::<Vec<_>>();
        assert_eq!(keys(s.list("a/", "")), ["a/x/1", "a/x/2", "a/y/1"]);
        assert_eq!(keys(s.list("a/", "a/x/2")), ["a/y/1"]);
        assert_eq!(s.list("a/x/", "").rv, 4);
    }
}
