//! Launch failures the agent tries again before it reports them, as the
//! kubelet retries a container it could not create: a busy engine fails a
//! start at times ("unable to remount dir as readonly ... device or resource
//! busy") that succeeds a second later, and a slow machine must make a job
//! slow, never failed. Only what [`crate::observe`] marks `retryable` comes
//! here (the container never ran, its image is there); a program that ran
//! and exited is the framework's to retry, never the agent's.
//!
//! Each service gets `attempts` starts in all. A restart replaces the
//! failed Swarm task with a new one (a forced service update); the failed
//! tasks are remembered as superseded, so that the resync reads the new
//! one's state, not the old failure again. Pure bookkeeping: it owns its one
//! lock, held only inside its methods, and never touches Swarm.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use crate::locks::lock;

pub(crate) struct StartRetries {
    attempts: u32,
    services: Mutex<HashMap<String, Tried>>,
}

#[derive(Default)]
struct Tried {
    /// Starts made so far beyond the first.
    restarts: u32,
    /// Swarm task ids of the starts that failed.
    superseded: HashSet<String>,
    /// Swarm refused a restart: the next failure is reported.
    refused: bool,
}

/// What to do with a retryable launch failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Next {
    /// Start the service again: this is start number `attempt` of `of`.
    Restart { attempt: u32, of: u32 },
    /// Report the failure: every one of the `attempts` starts failed.
    Report { attempts: u32 },
}

impl StartRetries {
    /// At most `attempts` starts per service (1: no retry).
    pub(crate) fn new(attempts: u32) -> Self {
        Self { attempts: attempts.max(1), services: Mutex::default() }
    }

    /// Swarm task `swarm_task` of `service` failed to start: whether to
    /// start the service again or to report. A restart marks the task as
    /// superseded before Swarm is asked, so a resync that reads the tasks
    /// before the new one exists waits instead of seeing the failure again.
    pub(crate) fn failed(&self, service: &str, swarm_task: &str) -> Next {
        let mut services = lock(&self.services);
        let tried = services.entry(service.to_owned()).or_default();
        if tried.refused || tried.restarts + 1 >= self.attempts {
            return Next::Report { attempts: tried.restarts + 1 };
        }
        tried.restarts += 1;
        tried.superseded.insert(swarm_task.to_owned());
        Next::Restart { attempt: tried.restarts + 1, of: self.attempts }
    }

    /// The restart could not be asked of Swarm: the failed task is current
    /// again, so the next resync reports it.
    pub(crate) fn restart_refused(&self, service: &str, swarm_task: &str) {
        if let Some(tried) = lock(&self.services).get_mut(service) {
            tried.superseded.remove(swarm_task);
            tried.restarts = tried.restarts.saturating_sub(1);
            tried.refused = true;
        }
    }

    /// Whether `swarm_task` of `service` failed and was replaced.
    pub(crate) fn superseded(&self, service: &str, swarm_task: &str) -> bool {
        lock(&self.services).get(service).is_some_and(|t| t.superseded.contains(swarm_task))
    }

    /// Forgets the services no task tracks any more.
    pub(crate) fn retain(&self, tracked: impl Fn(&str) -> bool) {
        lock(&self.services).retain(|name, _| tracked(name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_attempts_are_two_restarts_then_the_failure_is_reported() {
        let retries = StartRetries::new(3);
        assert_eq!(retries.failed("svc", "t1"), Next::Restart { attempt: 2, of: 3 });
        assert!(retries.superseded("svc", "t1"));
        assert!(!retries.superseded("svc", "t2"));
        assert_eq!(retries.failed("svc", "t2"), Next::Restart { attempt: 3, of: 3 });
        assert_eq!(retries.failed("svc", "t3"), Next::Report { attempts: 3 });
        assert!(!retries.superseded("svc", "t3"), "the last failure is the one reported");
    }

    #[test]
    fn one_attempt_reports_at_once_and_services_are_counted_apart() {
        let once = StartRetries::new(1);
        assert_eq!(once.failed("a", "t1"), Next::Report { attempts: 1 });
        let retries = StartRetries::new(2);
        assert_eq!(retries.failed("a", "t1"), Next::Restart { attempt: 2, of: 2 });
        assert_eq!(retries.failed("b", "t9"), Next::Restart { attempt: 2, of: 2 });
        assert_eq!(retries.failed("a", "t2"), Next::Report { attempts: 2 });
    }

    #[test]
    fn a_refused_restart_makes_the_failure_current_and_final() {
        let retries = StartRetries::new(3);
        assert_eq!(retries.failed("svc", "t1"), Next::Restart { attempt: 2, of: 3 });
        retries.restart_refused("svc", "t1");
        assert!(!retries.superseded("svc", "t1"));
        assert_eq!(retries.failed("svc", "t1"), Next::Report { attempts: 1 });
    }

    #[test]
    fn untracked_services_are_forgotten() {
        let retries = StartRetries::new(3);
        retries.failed("gone", "t1");
        retries.failed("kept", "t2");
        retries.retain(|name| name == "kept");
        assert!(!retries.superseded("gone", "t1"));
        assert_eq!(retries.failed("gone", "t3"), Next::Restart { attempt: 2, of: 3 }, "counted from the start again");
        assert_eq!(retries.failed("kept", "t4"), Next::Restart { attempt: 3, of: 3 });
    }
}
