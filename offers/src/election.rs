//! Which replica of the offer layer leads: an election over a
//! `coordination.k8s.io/v1` Lease, and the fence that keeps a replica that
//! may have lost it from offering or launching.
//!
//! The Lease's `holderIdentity` is the leader's `HOST:PORT` (what its
//! MasterInfo advertises), so a standby knows where to redirect callers.
//!
//! Timing, for a lease of `L` seconds (`--lease-seconds`, default 8):
//! - every replica reads the Lease every `L/8` s; the leader renews it then,
//!   with a `resourceVersion` precondition (a PUT), so a renewal can never
//!   overwrite another replica's acquisition;
//! - a standby takes the Lease over once the same record (same
//!   resourceVersion) has stood unchanged for `L` s **by its own clock**,
//!   counted from when it first read that record, so clocks of different
//!   machines are never compared (as client-go's leader election does);
//! - the leader may act (offer, launch) only until `2L/3` s after it *sent*
//!   its last successful renewal: the fence. A standby can take over no
//!   sooner than `L` s after it *read* that renewal, which is later, so two
//!   replicas never act at once; the `L/3` s between them absorb clock-rate
//!   differences and scheduling delay. A leader that cannot renew (API
//!   server gone, process stopped with SIGSTOP) stops acting when its fence
//!   passes, whatever its tasks believe, because every offer and launch
//!   checks the fence against the monotonic clock;
//! - a replica that led and lost the Lease exits (as a Mesos master that
//!   loses leadership does): its in-memory books are stale, and its
//!   supervisor starts it again as a standby.
//!
//! With `L` = 8: a killed leader's Lease is taken over 8 to 9 s after its
//! last renewal, and the new leader offers at its next allocation run.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};

/// The election's timing, derived from the lease duration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// How long a record stands before a standby may take the Lease.
    pub lease: Duration,
    /// How long after sending its last successful renewal the leader may act.
    pub fence: Duration,
    /// How often the Lease is read (and renewed by its holder).
    pub retry: Duration,
}

impl Timing {
    pub fn of_lease(lease: Duration) -> Timing {
        Timing { lease, fence: lease * 2 / 3, retry: (lease / 8).max(Duration::from_millis(100)) }
    }
}

/// A Lease record as the election reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub holder: Option<String>,
    pub resource_version: String,
    pub transitions: i32,
}

impl Record {
    pub fn of(lease: &Lease) -> Record {
        let spec = lease.spec.as_ref();
        Record {
            holder: spec.and_then(|s| s.holder_identity.clone()).filter(|h| !h.is_empty()),
            resource_version: lease.metadata.resource_version.clone().unwrap_or_default(),
            transitions: spec.and_then(|s| s.lease_transitions).unwrap_or(0),
        }
    }
}

/// What to do after reading the Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// No Lease yet: create it, held by this replica.
    Create,
    /// This replica holds it: renew.
    Renew,
    /// Nobody holds it, or its holder let it stand for a whole lease: take it.
    TakeOver,
    /// Another replica holds it and renews it.
    Follow { leader: String },
}

/// The standby's memory of the record it last read: the record and when
/// (by this replica's clock) it first read it.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    seen: Option<(String, Duration)>,
}

impl Observed {
    /// What to do with `record` (None: no Lease) read at `now`. Pure but for
    /// remembering when this record was first read.
    pub fn step(&mut self, me: &str, record: Option<&Record>, now: Duration, timing: Timing) -> Step {
        let Some(record) = record else {
            self.seen = None;
            return Step::Create;
        };
        let first_read = match &self.seen {
            Some((rv, at)) if *rv == record.resource_version => *at,
            _ => {
                self.seen = Some((record.resource_version.clone(), now));
                now
            }
        };
        match record.holder.as_deref() {
            Some(holder) if holder == me => Step::Renew,
            None => Step::TakeOver,
            Some(_) if now.saturating_sub(first_read) >= timing.lease => Step::TakeOver,
            Some(holder) => Step::Follow { leader: holder.to_owned() },
        }
    }
}

/// Why the election stopped this replica.
#[derive(Debug, thiserror::Error)]
pub enum ElectionError {
    #[error(
        "this offer layer lost the Lease {namespace}/{name} (now held by {holder}); it stops, as a Mesos master that loses leadership does, and starts again as a standby"
    )]
    Lost { namespace: String, name: String, holder: String },
    #[error(
        "this offer layer could not renew the Lease {namespace}/{name} within {deadline:?} (last error: {last}); it stopped offering and launching when its fence passed and stops, to start again as a standby"
    )]
    NotRenewed { namespace: String, name: String, deadline: Duration, last: String },
}

/// The Lease of the offer layer: where it is and who this replica is.
#[derive(Clone)]
pub struct LeaseLock {
    pub api: Api<Lease>,
    pub namespace: String,
    pub name: String,
    /// `HOST:PORT`, as the MasterInfo advertises it.
    pub identity: String,
    pub timing: Timing,
}

/// What a successful write or read tells the election loop.
pub enum Outcome {
    /// This replica holds the Lease; its fence runs from `sent`.
    Holds { sent: Duration },
    /// Another replica holds it.
    Follows { leader: String },
    /// The write lost a race (409) or the read failed: try again at the next period.
    Retry { error: String },
}

impl LeaseLock {
    /// One round: read the Lease, decide, write if needed. `now` is the
    /// master's clock (monotonic); `sent` is read just before the write.
    pub async fn round(&self, observed: &mut Observed, now: impl Fn() -> Duration) -> Outcome {
        let read = match self.api.get_opt(&self.name).await {
            Ok(read) => read,
            Err(e) => return Outcome::Retry { error: format!("reading the Lease: {e}") },
        };
        let record = read.as_ref().map(Record::of);
        let step = observed.step(&self.identity, record.as_ref(), now(), self.timing);
        let sent = now();
        let written = match (step, read) {
            (Step::Follow { leader }, _) => return Outcome::Follows { leader },
            (Step::Create, _) => self.api.create(&PostParams::default(), &self.lease(None, 0, true)).await,
            (Step::Renew, Some(lease)) => {
                let transitions = record.map_or(0, |r| r.transitions);
                let mut next = self.lease(lease.metadata.resource_version.clone(), transitions, false);
                if let (Some(spec), Some(old)) = (next.spec.as_mut(), lease.spec.as_ref()) {
                    spec.acquire_time = old.acquire_time.clone();
                }
                self.api.replace(&self.name, &PostParams::default(), &next).await
            }
            (Step::TakeOver, Some(lease)) => {
                let transitions = record.map_or(0, |r| r.transitions) + 1;
                let next = self.lease(lease.metadata.resource_version.clone(), transitions, true);
                self.api.replace(&self.name, &PostParams::default(), &next).await
            }
            (Step::Renew | Step::TakeOver, None) => return Outcome::Retry { error: "the Lease vanished".into() },
        };
        match written {
            Ok(_) => Outcome::Holds { sent },
            Err(e) => Outcome::Retry { error: format!("writing the Lease: {e}") },
        }
    }

    fn lease(&self, resource_version: Option<String>, transitions: i32, acquired: bool) -> Lease {
        let now = MicroTime(Timestamp::now());
        Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                resource_version,
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.identity.clone()),
                lease_duration_seconds: Some(i32::try_from(self.timing.lease.as_secs().max(1)).unwrap_or(i32::MAX)),
                acquire_time: acquired.then(|| now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(transitions),
                ..LeaseSpec::default()
            }),
        }
    }
}

/// Runs the election until this replica, having led, loses the Lease (or
/// cannot renew it past its fence): then every stream is closed, the master
/// is fenced for good, and the error says why. Never ends while standing by.
/// Once it holds the Lease, a replica claims the shared `registry` and
/// recovers from it before it acts; while the claim fails it holds the
/// Lease without acting, and tries again on the next round.
pub async fn run(
    shared: &std::sync::Arc<crate::http::Shared>,
    lock: &LeaseLock,
    registry: &crate::registry_api::ApiRegistry,
) -> ElectionError {
    let mut observed = Observed::default();
    let mut led = false;
    let mut holder: Option<String> = None;
    let mut ticks = tokio::time::interval(lock.timing.retry);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        // A read and a write each within the period: a hung API server
        // must not keep this loop from seeing its fence pass.
        let round = tokio::time::timeout(lock.timing.retry * 2, lock.round(&mut observed, || shared.now()));
        let outcome =
            round.await.unwrap_or_else(|_| Outcome::Retry { error: "the API server did not answer in time".into() });
        let now = shared.now();
        let held_by = match &outcome {
            Outcome::Holds { .. } => Some(lock.identity.as_str()),
            Outcome::Follows { leader } => Some(leader.as_str()),
            Outcome::Retry { .. } => None,
        };
        if let Some(now_held) = held_by
            && holder.as_deref() != Some(now_held)
        {
            holder = Some(now_held.to_owned());
            shared.master().counters.leader_changes += 1;
            tracing::info!(leader = now_held, "the offer layer's leader changed");
        }
        match outcome {
            Outcome::Holds { sent } => {
                let recovered = if led {
                    None
                } else {
                    let claim = tokio::time::timeout(lock.timing.retry * 2, registry.claim()).await;
                    match claim.unwrap_or_else(|_| {
                        Err(crate::registry_api::ApiRegistryError::TimedOut { object: registry.object() })
                    }) {
                        Ok(state) => Some(state),
                        Err(e) => {
                            tracing::warn!(error = %e, "holding the Lease, but the registry is not claimed; not leading yet");
                            continue;
                        }
                    }
                };
                let mut master = shared.master();
                if let Some(state) = recovered {
                    master.adopt(state);
                    master.begin_leading(shared.now());
                    tracing::info!(identity = %lock.identity, "leading: this offer layer holds the Lease");
                }
                master.set_fence(Some(sent + lock.timing.fence));
                drop(master);
                shared.leadership.set(crate::leadership::Leadership::Leading);
                led = true;
            }
            Outcome::Follows { leader } if led => {
                return step_down(
                    shared,
                    lock,
                    ElectionError::Lost { namespace: lock.namespace.clone(), name: lock.name.clone(), holder: leader },
                );
            }
            Outcome::Follows { leader } => {
                shared.leadership.set(crate::leadership::Leadership::Following { leader: Some(leader) });
            }
            Outcome::Retry { error } => {
                tracing::warn!(%error, "the offer layer's Lease was not read or written; retrying");
                if led && shared.master().is_fenced(now) {
                    return step_down(
                        shared,
                        lock,
                        ElectionError::NotRenewed {
                            namespace: lock.namespace.clone(),
                            name: lock.name.clone(),
                            deadline: lock.timing.fence,
                            last: error,
                        },
                    );
                }
            }
        }
    }
}

/// Fences the master for good and ends every stream, so that frameworks and
/// agents reconnect to whoever leads now.
fn step_down(shared: &crate::http::Shared, lock: &LeaseLock, why: ElectionError) -> ElectionError {
    let mut master = shared.master();
    master.set_fence(Some(Duration::ZERO));
    master.close_all_streams();
    drop(master);
    shared.leadership.set(crate::leadership::Leadership::Following { leader: None });
    tracing::error!(identity = %lock.identity, error = %why, "stepping down");
    why
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Timing =
        Timing { lease: Duration::from_secs(8), fence: Duration::from_millis(5333), retry: Duration::from_secs(1) };

    fn held(by: &str, rv: &str) -> Record {
        Record { holder: Some(by.into()), resource_version: rv.into(), transitions: 0 }
    }

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    #[test]
    fn the_timing_fences_the_leader_well_before_a_standby_may_take_over() {
        let t = Timing::of_lease(s(8));
        assert_eq!(t.retry, s(1));
        assert!(t.fence < t.lease && t.lease - t.fence >= Duration::from_secs(2), "{t:?}");
        assert_eq!(Timing::of_lease(Duration::from_millis(400)).retry, Duration::from_millis(100));
    }

    #[test]
    fn no_lease_is_created_and_an_own_lease_is_renewed() {
        let mut o = Observed::default();
        assert_eq!(o.step("a:1", None, s(0), T), Step::Create);
        assert_eq!(o.step("a:1", Some(&held("a:1", "5")), s(1), T), Step::Renew);
        let free = Record { holder: None, resource_version: "6".into(), transitions: 1 };
        assert_eq!(o.step("a:1", Some(&free), s(2), T), Step::TakeOver);
    }

    #[test]
    fn a_standby_takes_over_only_after_the_same_record_stood_a_whole_lease_by_its_own_clock() {
        let mut o = Observed::default();
        let follow = Step::Follow { leader: "b:1".into() };
        // First read at 100 s (whatever the record's renewTime says).
        assert_eq!(o.step("a:1", Some(&held("b:1", "7")), s(100), T), follow);
        assert_eq!(o.step("a:1", Some(&held("b:1", "7")), s(107), T), follow);
        // Renewed: a new resourceVersion starts the count again.
        assert_eq!(o.step("a:1", Some(&held("b:1", "8")), s(108), T), follow);
        assert_eq!(o.step("a:1", Some(&held("b:1", "8")), s(115), T), follow);
        assert_eq!(o.step("a:1", Some(&held("b:1", "8")), s(116), T), Step::TakeOver);
    }

    #[test]
    fn the_fence_ends_before_any_standby_can_read_the_lease_as_expired() {
        // The leader sends a renewal at `sent`; the earliest a standby can
        // read it is `sent`; it takes over no sooner than a lease later.
        for lease in [1, 3, 8, 15, 60] {
            let t = Timing::of_lease(s(lease));
            let sent = s(1000);
            let mut o = Observed::default();
            o.step("a:1", Some(&held("b:1", "9")), sent, t);
            let takeover = (0..=lease * 1000)
                .map(|ms| sent + Duration::from_millis(ms))
                .find(|at| o.step("a:1", Some(&held("b:1", "9")), *at, t) == Step::TakeOver)
                .expect("takes over within a lease");
            assert!(sent + t.fence < takeover, "lease {lease}: fence {:?} takeover {takeover:?}", sent + t.fence);
        }
    }
}
