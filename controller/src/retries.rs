//! How soon a failed reconcile is retried: per MpiJob, exponentially from
//! 1 s, doubling up to 5 minutes, back to 1 s after a reconcile of that job
//! succeeds (kube-runtime's `error_policy` gets no attempt count, so the
//! count lives here, as kube-rs controllers keep it). One job that keeps
//! failing (an API server refusing its writes, tasks that never end) is
//! retried less and less often instead of every 2 s; the others are not
//! slowed. The delays are `mpiswarm_mesos::client::Backoff`'s, the one
//! doubling-with-a-cap rule of the workspace. Never holds its lock across
//! an `.await`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use kube::runtime::reflector::ObjectRef;
use mpiswarm_crds::MpiJob;
use mpiswarm_mesos::client::Backoff;

/// The retry delays of a reconcile that keeps failing.
pub const BACKOFF: Backoff = Backoff { initial: Duration::from_secs(1), max: Duration::from_secs(300) };

/// Consecutive failed reconciles per job; only failing jobs have an entry.
#[derive(Debug, Default)]
pub struct Retries {
    failures: Mutex<HashMap<ObjectRef<MpiJob>, u32>>,
}

impl Retries {
    /// A reconcile of `job` failed: how long until the next attempt.
    pub fn failed(&self, job: &ObjectRef<MpiJob>) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = failures.entry(job.clone()).or_default();
        let delay = BACKOFF.delay(*n);
        *n = n.saturating_add(1);
        delay
    }

    /// A reconcile of `job` succeeded: its next failure waits 1 s again.
    pub fn succeeded(&self, job: &ObjectRef<MpiJob>) {
        self.failures.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(job);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use kube::runtime::reflector::ObjectRef;

    use super::Retries;

    #[test]
    fn failures_back_off_from_one_second_doubling_to_five_minutes_per_job_and_success_resets() {
        let retries = Retries::default();
        let a = ObjectRef::new("a").within("default");
        let b = ObjectRef::new("b").within("default");
        let secs = |r: &Retries, job| r.failed(job).as_secs();
        let first: Vec<u64> = (0..12).map(|_| secs(&retries, &a)).collect();
        assert_eq!(first, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
        assert_eq!(secs(&retries, &b), 1, "another job's failures do not slow this one");
        retries.succeeded(&a);
        assert_eq!(retries.failed(&a), Duration::from_secs(1), "a success starts over");
        assert_eq!(secs(&retries, &b), 2, "nor does its success reset the other");
        for _ in 0..100 {
            retries.failed(&b);
        }
        assert_eq!(secs(&retries, &b), 300, "capped however long it fails");
    }
}
