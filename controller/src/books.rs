//! The controller's memory of the Mesos side, shared by the reconcilers and
//! the framework driver: which jobs wait for resources (and why), which gang
//! each job has and the last state of each task, and what the cluster has
//! offered. Everything else (phase, conditions) lives in the MpiJob status.
//! After a restart the books are rebuilt from statuses and RECONCILE.
//!
//! One `std::sync::Mutex`, held only for bookkeeping: never across an
//! `.await`, never around I/O.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use kube::runtime::reflector::ObjectRef;
use mpiswarm_crds::MpiJob;
use mpiswarm_mesos::TaskStatus;
use mpiswarm_policy::{AgentCapacity, JobDemand};

use crate::gang::{GangBook, Stage};
use crate::launch::JobIdentity;
use crate::names::TaskName;
use crate::plan::{QueueView, first_clause};

/// What a driver round needs to launch a job without reading the API.
#[derive(Debug)]
pub struct LaunchInputs {
    pub identity: JobIdentity,
    /// The object in the reflector's cache (shared, not a copy of its spec):
    /// every reconcile of a waiting job swaps in the current one, so the
    /// books never keep an old version alive.
    pub job: Arc<MpiJob>,
    pub ssh_private_key: Vec<u8>,
}

/// A job waiting for resources.
#[derive(Debug, Clone)]
pub struct QueueEntry {
    pub generation: u32,
    pub role: String,
    /// The MpiJob's creation time (Unix seconds): FIFO order within a role.
    pub created_at: i64,
    pub demand: JobDemand,
    pub view: QueueView,
    pub launch: Arc<LaunchInputs>,
}

#[derive(Debug)]
struct JobEntry {
    key: ObjectRef<MpiJob>,
    queue: Option<QueueEntry>,
    gang: Option<GangBook>,
}

#[derive(Debug, Default)]
struct Inner {
    jobs: HashMap<String, JobEntry>,
    /// Short uid (as in task ids) -> uid.
    short: HashMap<String, String>,
    /// The most each agent has ever offered, per resource: what "the whole cluster" means.
    capacity: BTreeMap<String, AgentCapacity>,
    /// Bumped whenever `capacity` changes.
    capacity_epoch: u64,
}

/// A task to KILL: (task id, agent id).
pub type TaskRef = (String, String);

#[derive(Debug, Default)]
pub struct Books {
    inner: Mutex<Inner>,
}

impl Books {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Nothing panics while holding this lock; if something ever did, the
        // books are still consistent maps, so keep going with them.
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn entry<'a>(inner: &'a mut Inner, uid: &str, key: &ObjectRef<MpiJob>) -> &'a mut JobEntry {
        inner.short.entry(crate::names::short_uid(uid)).or_insert_with(|| uid.to_owned());
        inner.jobs.entry(uid.to_owned()).or_insert_with(|| JobEntry { key: key.clone(), queue: None, gang: None })
    }

    /// Puts the job in the queue (or refreshes its entry, keeping how long it
    /// has waited). Returns true if it was not waiting before.
    pub fn enqueue(&self, uid: &str, key: &ObjectRef<MpiJob>, mut entry: QueueEntry) -> bool {
        let mut inner = self.lock();
        let job = Self::entry(&mut inner, uid, key);
        match &job.queue {
            Some(old) if old.generation == entry.generation => {
                entry.view = old.view.clone();
                job.queue = Some(entry);
                false
            }
            _ => {
                job.queue = Some(entry);
                true
            }
        }
    }

    /// For a job already waiting with this gang generation: swaps in the
    /// current object and returns true (nothing else to fetch).
    pub fn refresh(&self, uid: &str, generation: u32, job: &Arc<MpiJob>) -> bool {
        let mut inner = self.lock();
        let Some(q) = inner.jobs.get_mut(uid).and_then(|j| j.queue.as_mut()) else { return false };
        if q.generation != generation {
            return false;
        }
        if !Arc::ptr_eq(&q.launch.job, job) {
            q.launch = Arc::new(LaunchInputs {
                identity: q.launch.identity.clone(),
                job: job.clone(),
                ssh_private_key: q.launch.ssh_private_key.clone(),
            });
        }
        true
    }

    pub fn dequeue(&self, uid: &str) {
        if let Some(job) = self.lock().jobs.get_mut(uid) {
            job.queue = None;
        }
    }

    pub fn queue_view(&self, uid: &str) -> Option<QueueView> {
        self.lock().jobs.get(uid).and_then(|j| j.queue.as_ref()).map(|q| q.view.clone())
    }

    pub fn gang(&self, uid: &str) -> Option<GangBook> {
        self.lock().jobs.get(uid).and_then(|j| j.gang.clone())
    }

    /// Adopts a gang rebuilt from a status (after a restart), unless one is known.
    pub fn seed_gang(&self, uid: &str, key: &ObjectRef<MpiJob>, gang: GangBook) -> bool {
        let mut inner = self.lock();
        let job = Self::entry(&mut inner, uid, key);
        if job.gang.is_some() {
            return false;
        }
        job.gang = Some(gang);
        true
    }

    /// Every waiting job, for one offer round.
    pub fn waiting(&self) -> Vec<(String, QueueEntry)> {
        self.lock().jobs.iter().filter_map(|(uid, j)| j.queue.clone().map(|q| (uid.clone(), q))).collect()
    }

    pub fn is_waiting(&self) -> bool {
        self.lock().jobs.values().any(|j| j.queue.is_some())
    }

    /// The Mesos roles of waiting jobs.
    pub fn waiting_roles(&self) -> BTreeSet<String> {
        self.lock().jobs.values().filter_map(|j| j.queue.as_ref().map(|q| q.role.clone())).collect()
    }

    /// Records why a round left the job waiting; returns the job's key if the
    /// kind of reason changed (so its status is worth rewriting).
    pub fn set_wait(
        &self,
        uid: &str,
        wait: String,
        never_fits: Option<String>,
        never_fits_epoch: u64,
        now: i64,
    ) -> Option<ObjectRef<MpiJob>> {
        let mut inner = self.lock();
        let job = inner.jobs.get_mut(uid)?;
        let q = job.queue.as_mut()?;
        if q.view.since == 0 {
            q.view.since = now;
        }
        let changed = q.view.never_fits.is_some() != never_fits.is_some()
            || q.view.wait.as_deref().map(first_clause) != Some(first_clause(&wait));
        q.view.wait = Some(wait);
        q.view.never_fits = never_fits;
        q.view.never_fits_epoch = Some(never_fits_epoch);
        changed.then(|| job.key.clone())
    }

    /// A round placed the job: it leaves the queue and gets a Planned gang.
    pub fn plan_gang(&self, uid: &str, gang: GangBook) -> Option<ObjectRef<MpiJob>> {
        let mut inner = self.lock();
        let job = inner.jobs.get_mut(uid)?;
        job.queue = None;
        job.gang = Some(gang);
        Some(job.key.clone())
    }

    /// The ACCEPTs of generation `generation` went out.
    pub fn mark_launched(&self, uid: &str, generation: u32, now: i64) {
        if let Some(g) = self.lock().jobs.get_mut(uid).and_then(|j| j.gang.as_mut())
            && g.generation == generation
        {
            g.stage = Stage::Launched;
            g.launched_at = Some(now);
        }
    }

    /// Applies a task update seen at `now`; returns the job to reconcile if it is one of ours.
    pub fn record(&self, status: &TaskStatus, now: i64) -> Option<ObjectRef<MpiJob>> {
        let name = TaskName::parse(&status.task_id.value)?;
        let mut inner = self.lock();
        let uid = inner.short.get(&name.short_uid)?.clone();
        let job = inner.jobs.get_mut(&uid)?;
        let g = job.gang.as_mut()?;
        (g.generation == name.generation && g.record(status, now)).then(|| job.key.clone())
    }

    /// Whether a task id belongs to a gang the books know.
    pub fn knows_task(&self, task_id: &str) -> bool {
        let Some(name) = TaskName::parse(task_id) else { return false };
        let inner = self.lock();
        inner
            .short
            .get(&name.short_uid)
            .and_then(|uid| inner.jobs.get(uid))
            .and_then(|j| j.gang.as_ref())
            .is_some_and(|g| g.tasks.contains_key(task_id))
    }

    /// Tasks of the job's gang that have not ended; marks the kill as sent.
    pub fn to_kill(&self, uid: &str) -> Vec<TaskRef> {
        let mut inner = self.lock();
        let Some(g) = inner.jobs.get_mut(uid).and_then(|j| j.gang.as_mut()) else { return Vec::new() };
        g.kill_sent = true;
        g.live_tasks().map(|(id, t)| (id.clone(), t.agent_id.clone())).collect()
    }

    pub fn forget_gang(&self, uid: &str) {
        if let Some(j) = self.lock().jobs.get_mut(uid) {
            j.gang = None;
        }
    }

    /// The job is gone for good.
    pub fn remove(&self, uid: &str) {
        let mut inner = self.lock();
        inner.jobs.remove(uid);
        inner.short.remove(&crate::names::short_uid(uid));
    }

    /// Tasks whose state is not known (to RECONCILE after a (re)subscribe).
    pub fn unknown_tasks(&self) -> Vec<TaskRef> {
        self.lock()
            .jobs
            .values()
            .filter_map(|j| j.gang.as_ref())
            .filter(|g| g.stage == Stage::Launched)
            .flat_map(|g| g.live_tasks().map(|(id, t)| (id.clone(), t.agent_id.clone())).collect::<Vec<_>>())
            .collect()
    }

    /// The key of a job the books know (to find it in the reflector's cache).
    pub fn key(&self, uid: &str) -> Option<ObjectRef<MpiJob>> {
        self.lock().jobs.get(uid).map(|j| j.key.clone())
    }

    /// Every job key, to reconcile all after a resubscribe.
    pub fn keys(&self) -> Vec<ObjectRef<MpiJob>> {
        self.lock().jobs.values().map(|j| j.key.clone()).collect()
    }

    /// Remembers the most each agent has offered (per resource).
    pub fn observe_capacity(&self, offered: &[AgentCapacity]) {
        let mut inner = self.lock();
        let mut changed = false;
        for cap in offered {
            let Some(seen) = inner.capacity.get_mut(&cap.agent_id) else {
                inner.capacity.insert(cap.agent_id.clone(), cap.clone());
                changed = true;
                continue;
            };
            let before = seen.clone();
            seen.free.cpus = seen.free.cpus.max(cap.free.cpus);
            seen.free.memory_mib = seen.free.memory_mib.max(cap.free.memory_mib);
            seen.free.network_mbps = match (seen.free.network_mbps, cap.free.network_mbps) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            seen.attributes.clone_from(&cap.attributes);
            changed |= *seen != before;
        }
        if changed {
            inner.capacity_epoch += 1;
        }
    }

    /// Everything the cluster has ever offered, one capacity per agent, and
    /// its epoch (which changes whenever the capacity does).
    pub fn known_capacity(&self) -> (Vec<AgentCapacity>, u64) {
        let inner = self.lock();
        (inner.capacity.values().cloned().collect(), inner.capacity_epoch)
    }
}

#[cfg(test)]
mod tests {
    use mpiswarm_policy::{AgentCapacity, FreeResources};

    use super::Books;

    #[test]
    fn the_capacity_epoch_moves_only_when_the_known_capacity_changes() {
        let books = Books::default();
        let cap = |cpus| AgentCapacity::new("a1", "n1", FreeResources::new(cpus, 1024.0));
        assert_eq!(books.known_capacity().1, 0);
        books.observe_capacity(&[cap(2.0)]);
        assert_eq!(books.known_capacity().1, 1, "a new agent");
        books.observe_capacity(&[cap(1.0)]);
        assert_eq!(books.known_capacity().1, 1, "less than the most it ever offered");
        books.observe_capacity(&[cap(4.0)]);
        assert_eq!(books.known_capacity(), (vec![cap(4.0)], 2), "more than ever");
    }
}
