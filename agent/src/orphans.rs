//! Services labelled as this agent's that no task owns (a previous
//! incarnation's, or of an old agent id): each is left alone for a grace
//! period from when the agent first saw it, then it is due for removal.
//! Pure bookkeeping with time passed in; it owns its one lock, held only
//! inside its methods, and never touches Swarm.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::locks::lock;

pub(crate) struct Orphans {
    grace: Duration,
    /// When each unowned service was first seen.
    since: Mutex<HashMap<String, Instant>>,
}

impl Orphans {
    pub(crate) fn new(grace: Duration) -> Self {
        Self { grace, since: Mutex::default() }
    }

    /// Takes in the services that exist now; returns those unowned (not
    /// `owned`) for at least the grace period at `now`. A service that
    /// went, or that a task owns, is forgotten.
    pub(crate) fn expired(&self, present: HashSet<String>, owned: impl Fn(&str) -> bool, now: Instant) -> Vec<String> {
        let mut since = lock(&self.since);
        since.retain(|name, _| present.contains(name) && !owned(name));
        let mut expired = Vec::new();
        for name in present {
            if owned(&name) {
                continue;
            }
            let first = *since.entry(name.clone()).or_insert(now);
            if now.duration_since(first) >= self.grace {
                expired.push(name);
            }
        }
        expired.sort();
        expired
    }

    /// `service` was removed.
    pub(crate) fn removed(&self, service: &str) {
        lock(&self.since).remove(service);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unowned_service_is_due_after_its_grace_and_an_owned_one_never() {
        let orphans = Orphans::new(Duration::from_secs(60));
        let t0 = Instant::now();
        let present = || HashSet::from(["mine".to_owned(), "stray".to_owned()]);
        let owned = |name: &str| name == "mine";
        assert!(orphans.expired(present(), owned, t0).is_empty(), "first seen now");
        assert!(orphans.expired(present(), owned, t0 + Duration::from_secs(59)).is_empty());
        assert_eq!(orphans.expired(present(), owned, t0 + Duration::from_secs(60)), vec!["stray"]);
        // Claimed meanwhile (a LAUNCH of it): its clock starts again when it is unowned again.
        assert!(orphans.expired(present(), |_| true, t0 + Duration::from_secs(61)).is_empty());
        assert!(orphans.expired(present(), owned, t0 + Duration::from_secs(62)).is_empty());
        orphans.removed("stray");
        assert!(
            orphans.expired(present(), owned, t0 + Duration::from_secs(121)).is_empty(),
            "seen again after removal"
        );
        assert_eq!(orphans.expired(present(), owned, t0 + Duration::from_secs(182)), vec!["stray"]);
    }
}
