//! A small cache of review answers with a time to live per entry, as the
//! kubelet keeps the API server's TokenReview and SubjectAccessReview
//! answers: the log endpoint asks the API server once per caller and rule
//! every few minutes, not once per chunk a following client reads. Pure:
//! the time is passed in, and callers lock it only around a `get` or an
//! `insert`, never across an await.
//!
//! It holds at most `capacity` entries, so a flood of made-up tokens cannot
//! grow it without bound: when full, expired entries go first, then the one
//! that would expire soonest.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct TtlCache<K, V> {
    entries: HashMap<K, (V, Instant)>,
    capacity: usize,
}

impl<K: Eq + Hash + Clone, V: Clone> TtlCache<K, V> {
    pub fn new(capacity: usize) -> Self {
        Self { entries: HashMap::new(), capacity: capacity.max(1) }
    }

    /// The answer kept for `key`, if it has not expired at `now`.
    pub fn get(&self, key: &K, now: Instant) -> Option<V> {
        self.entries.get(key).filter(|(_, until)| now < *until).map(|(v, _)| v.clone())
    }

    /// Keeps `value` for `key` until `now + ttl`.
    pub fn insert(&mut self, key: K, value: V, ttl: Duration, now: Instant) {
        if !self.entries.contains_key(&key) && self.entries.len() >= self.capacity {
            self.entries.retain(|_, (_, until)| now < *until);
            if self.entries.len() >= self.capacity
                && let Some(soonest) = self.entries.iter().min_by_key(|(_, (_, until))| *until).map(|(k, _)| k.clone())
            {
                self.entries.remove(&soonest);
            }
        }
        self.entries.insert(key, (value, now + ttl));
    }

    /// Forgets `key` (an answer found wrong, e.g. an agent address that no longer answers).
    pub fn remove(&mut self, key: &K) {
        self.entries.remove(key);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn an_answer_is_kept_for_its_own_time_to_live_only() {
        let t0 = Instant::now();
        let mut c = TtlCache::new(10);
        c.insert("allowed", true, 300 * S, t0);
        c.insert("denied", false, 30 * S, t0);
        assert_eq!(c.get(&"allowed", t0 + 299 * S), Some(true));
        assert_eq!(c.get(&"denied", t0 + 29 * S), Some(false));
        assert_eq!(c.get(&"denied", t0 + 30 * S), None, "a denial is asked again after 30 s");
        assert_eq!(c.get(&"allowed", t0 + 300 * S), None);
        assert_eq!(c.get(&"never", t0), None);
    }

    #[test]
    fn a_full_cache_drops_expired_entries_first_then_the_soonest_to_expire_and_never_grows() {
        let t0 = Instant::now();
        let mut c = TtlCache::new(3);
        c.insert(1, 'a', 10 * S, t0);
        c.insert(2, 'b', 100 * S, t0);
        c.insert(3, 'c', 50 * S, t0);
        c.insert(4, 'd', 100 * S, t0 + 20 * S);
        assert_eq!((c.len(), c.get(&1, t0)), (3, None), "1 had expired at t0+20s and made room");
        c.insert(5, 'e', 100 * S, t0 + 20 * S);
        assert_eq!(c.len(), 3);
        assert_eq!(c.get(&3, t0 + 20 * S), None, "3 would have expired soonest");
        assert_eq!(c.get(&2, t0 + 20 * S), Some('b'));
        c.insert(2, 'B', S, t0 + 20 * S);
        assert_eq!((c.len(), c.get(&2, t0 + 20 * S)), (3, Some('B')), "a key already held is replaced in place");
        c.remove(&2);
        assert_eq!(c.len(), 2);
    }
}
