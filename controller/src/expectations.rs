//! The status writer's expectations, as Kubernetes controllers keep them:
//! for each job, the `resourceVersion` its own last status write returned,
//! until the reflector's cache has caught up with it. Owned by the
//! reconciler, the only task that writes MpiJob status; the framework
//! driver only reads the gang generation of a write still on its way.
//!
//! Why: a reconcile can be woken (a task update, the driver asking for a
//! status write) before the watch has brought back the status the
//! reconciler wrote a moment ago. Planning from that older object would
//! tell its transitions again (duplicate Events) and write a status built
//! on stale fields. So a reconcile whose cached object is older than its
//! own last write does nothing and comes back shortly; the watch event of
//! that write wakes it as well. resourceVersions are compared as
//! Kubernetes defines it since 1.35 (KEP-5504, client-go's
//! `CompareResourceVersion`: positive decimal integers without leading
//! zeros, of any length); one that is not comparable counts as caught up,
//! so an API server with opaque versions gets a controller without
//! expectations rather than one that waits forever.
//!
//! Never holds its lock across an `.await` or around I/O.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

/// One job's last status write.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Written {
    resource_version: String,
    gang_generation: u32,
}

#[derive(Debug, Default)]
pub struct Expectations {
    written: Mutex<HashMap<String, Written>>,
}

impl Expectations {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Written>> {
        // Plain inserts and removals: the map stays consistent even if a holder panicked.
        self.written.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The reconciler wrote the job's status; the API server answered with
    /// `resource_version` (none: nothing to expect).
    pub fn wrote(&self, uid: &str, resource_version: Option<String>, gang_generation: u32) {
        match resource_version {
            Some(resource_version) => {
                self.lock().insert(uid.to_owned(), Written { resource_version, gang_generation });
            }
            None => self.forget(uid),
        }
    }

    /// Whether the cached object (at `cached`) is older than the
    /// reconciler's own last write of it. Once it is not, the expectation
    /// is dropped: the reflector only moves forward.
    pub fn is_stale(&self, uid: &str, cached: Option<&str>) -> bool {
        let mut written = self.lock();
        let Some(w) = written.get(uid) else { return false };
        if cached.and_then(|c| compare(c, &w.resource_version)) == Some(Ordering::Less) {
            return true;
        }
        written.remove(uid);
        false
    }

    /// The gang generation of a status write the cache has not shown yet.
    pub fn gang_generation(&self, uid: &str) -> Option<u32> {
        self.lock().get(uid).map(|w| w.gang_generation)
    }

    pub fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }
}

/// Orders two resourceVersions of one resource (KEP-5504); `None` if
/// either is not a positive decimal integer without leading zeros.
pub fn compare(a: &str, b: &str) -> Option<Ordering> {
    let valid = |v: &str| !v.is_empty() && !v.starts_with('0') && v.bytes().all(|c| c.is_ascii_digit());
    (valid(a) && valid(b)).then(|| a.len().cmp(&b.len()).then_with(|| a.cmp(b)))
}

#[cfg(test)]
mod tests {
    use std::cmp::Ordering::{Equal, Greater, Less};

    use super::{Expectations, compare};

    #[test]
    fn resource_versions_compare_as_integers_of_any_length_and_malformed_ones_not_at_all() {
        let rows = [
            ("9", "10", Some(Less)),
            ("10", "9", Some(Greater)),
            ("42", "42", Some(Equal)),
            ("18446744073709551616", "18446744073709551615", Some(Greater)),
            ("123", "124", Some(Less)),
            ("0", "1", None),
            ("007", "8", None),
            ("", "1", None),
            ("12a", "13", None),
            ("-1", "1", None),
        ];
        for (a, b, want) in rows {
            assert_eq!(compare(a, b), want, "compare({a:?}, {b:?})");
        }
    }

    #[test]
    fn a_cache_older_than_the_own_write_is_stale_until_it_catches_up() {
        let e = Expectations::default();
        assert!(!e.is_stale("u", Some("5")), "nothing written: nothing expected");
        e.wrote("u", Some("10".into()), 2);
        assert_eq!(e.gang_generation("u"), Some(2));
        assert!(e.is_stale("u", Some("9")), "the watch has not brought the write yet");
        assert!(e.is_stale("u", Some("9")), "still not");
        assert!(!e.is_stale("u", Some("10")), "caught up");
        assert_eq!(e.gang_generation("u"), None, "the expectation went once the cache caught up");

        e.wrote("u", Some("12".into()), 3);
        assert!(!e.is_stale("u", Some("15")), "a newer object (someone edited the spec) is not stale");
        assert_eq!(e.gang_generation("u"), None);

        e.wrote("u", Some("20".into()), 3);
        assert!(!e.is_stale("u", Some("opaque")), "incomparable versions: act on the cache");
        assert!(!e.is_stale("u", Some("19")), "and the expectation is gone");

        e.wrote("u", Some("30".into()), 3);
        e.wrote("u", None, 3);
        assert!(!e.is_stale("u", Some("29")), "a write without a version expects nothing");
        e.wrote("u", Some("40".into()), 4);
        e.forget("u");
        assert!(!e.is_stale("u", Some("39")), "a forgotten job expects nothing");
    }
}
