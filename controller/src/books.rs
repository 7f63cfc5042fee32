//! The controller's memory of the Mesos side, shared by the reconcilers and
//! the framework driver: which jobs wait for resources (and why), which gang
//! each job has and the last state of each task, and what the cluster has
//! offered. Everything else (phase, conditions) lives in the MpiJob status,
//! which only the reconciler writes. When the driver has placed a gang it
//! books it here with its ask for the status write, and the reconciler
//! answers the ask once the status is written ([`Books::plan_gang`],
//! [`Books::answer`]). When the driver has launched a gang, the updates of
//! its tasks are held here until the reconciler has written the status it
//! planned with the launched gang (`Launching`), so that every job's story
//! has `Launching` before `Running`, however fast its tasks start, without
//! the driver waiting for it ([`Books::mark_launched`]). After a restart the
//! books are rebuilt from statuses and RECONCILE.
//!
//! One `std::sync::Mutex`, held only for bookkeeping: never across an
//! `.await`, never around I/O.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use kube::runtime::reflector::ObjectRef;
use mpiswarm_crds::MpiJob;
use mpiswarm_mesos::TaskStatus;
use mpiswarm_policy::{AgentCapacity, JobDemand, QuotaLimit};
use tokio::sync::oneshot;

use crate::gang::{GangBook, Stage};
use crate::launch::JobIdentity;
use crate::names::TaskName;
use crate::plan::{NeverFits, QueueView, first_clause};

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
    /// The driver's open ask for the status write of a placed `gang`; it goes with the gang.
    ask: Option<Ask>,
    /// Task updates of the launched `gang` (with when they were seen), held
    /// until its `Launching` status is written; they go with the gang.
    held: Option<Held>,
}

/// The driver asks that the status record placed gang `generation`.
#[derive(Debug)]
struct Ask {
    generation: u32,
    answer: oneshot::Sender<()>,
}

/// The updates of launched gang `generation` not applied yet.
#[derive(Debug)]
struct Held {
    generation: u32,
    updates: Vec<(TaskStatus, i64)>,
}

/// The reconciler's answer to the driver's ask for a status write: `Ok`
/// once the status records the gang; an error when it never will (the job
/// was suspended or deleted meanwhile, or the gang was forgotten or
/// replaced), so the driver need not wait for its deadline.
pub type Answer = oneshot::Receiver<()>;

#[derive(Debug, Default)]
struct Inner {
    jobs: HashMap<String, JobEntry>,
    /// Short uid (as in task ids) -> uid.
    short: HashMap<String, String>,
    /// The most each agent has ever offered, per resource: what "the whole cluster" means.
    capacity: BTreeMap<String, AgentCapacity>,
    /// Bumped whenever `capacity` changes.
    capacity_epoch: u64,
    /// The offer layer's quota limits by role, as last read from it.
    quota_limits: BTreeMap<String, QuotaLimit>,
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
        inner.jobs.entry(uid.to_owned()).or_insert_with(|| JobEntry {
            key: key.clone(),
            queue: None,
            gang: None,
            ask: None,
            held: None,
        })
    }

    /// Puts the job in the queue (or refreshes its entry, keeping how long it
    /// has waited). Returns true if it was not waiting before. A job whose
    /// gang of this generation is booked already is not queued again: a
    /// reconcile that read the books just before the driver placed the job
    /// would otherwise queue it for a second placement.
    pub fn enqueue(&self, uid: &str, key: &ObjectRef<MpiJob>, mut entry: QueueEntry) -> bool {
        let mut inner = self.lock();
        let job = Self::entry(&mut inner, uid, key);
        if job.gang.as_ref().is_some_and(|g| g.generation >= entry.generation) {
            return false;
        }
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
    /// current object and returns true (nothing else to fetch). Also true
    /// for a job placed with that generation meanwhile (see [`Books::enqueue`]).
    pub fn refresh(&self, uid: &str, generation: u32, job: &Arc<MpiJob>) -> bool {
        let mut inner = self.lock();
        let Some(entry) = inner.jobs.get_mut(uid) else { return false };
        if entry.gang.as_ref().is_some_and(|g| g.generation >= generation) {
            return true;
        }
        let Some(q) = entry.queue.as_mut() else { return false };
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

    /// Whether a job waits that is not in `uids` (one queued since they were read).
    pub fn waits_outside(&self, uids: &std::collections::HashSet<&str>) -> bool {
        self.lock().jobs.iter().any(|(uid, j)| j.queue.is_some() && !uids.contains(uid.as_str()))
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
        never_fits: Option<NeverFits>,
        never_fits_epoch: u64,
        now: i64,
    ) -> Option<ObjectRef<MpiJob>> {
        let mut inner = self.lock();
        let job = inner.jobs.get_mut(uid)?;
        let q = job.queue.as_mut()?;
        if q.view.since == 0 {
            q.view.since = now;
        }
        let kind = |n: &Option<NeverFits>| n.as_ref().map(std::mem::discriminant);
        let changed = kind(&q.view.never_fits) != kind(&never_fits)
            || q.view.wait.as_deref().map(first_clause) != Some(first_clause(&wait));
        q.view.wait = Some(wait);
        q.view.never_fits = never_fits;
        q.view.never_fits_epoch = Some(never_fits_epoch);
        changed.then(|| job.key.clone())
    }

    /// A round placed the job: it leaves the queue and gets a Planned gang,
    /// and the driver asks for the status that records it (`Scheduling`,
    /// with the placement), which must be written before any ACCEPT.
    /// Returns the job's key (to wake its reconcile) and the answer to await.
    pub fn plan_gang(&self, uid: &str, gang: GangBook) -> Option<(ObjectRef<MpiJob>, Answer)> {
        let mut inner = self.lock();
        let job = inner.jobs.get_mut(uid)?;
        let (answer, answered) = oneshot::channel();
        job.ask = Some(Ask { generation: gang.generation, answer });
        job.held = None;
        job.queue = None;
        job.gang = Some(gang);
        Some((job.key.clone(), answered))
    }

    /// The ACCEPTs of generation `generation` went out. The updates of its
    /// tasks are held from now on until the reconciler has written the
    /// status it plans with the launched gang ([`Books::answer`]). Returns
    /// the job's key (to wake its reconcile), `None` if it has no such gang.
    pub fn mark_launched(&self, uid: &str, generation: u32, now: i64) -> Option<ObjectRef<MpiJob>> {
        let mut inner = self.lock();
        let job = inner.jobs.get_mut(uid)?;
        let g = job.gang.as_mut().filter(|g| g.generation == generation)?;
        g.stage = Stage::Launched;
        g.launched_at = Some(now);
        job.held = Some(Held { generation, updates: Vec::new() });
        Some(job.key.clone())
    }

    /// The ACCEPT of generation `generation` did not reach the master: its
    /// tasks never existed. Records `updates` (what the driver makes of
    /// that, [`crate::round::dropped_updates`]) at once, unheld: there is no
    /// launch to tell. Returns the job's key (to wake its reconcile).
    pub fn mark_dropped(
        &self,
        uid: &str,
        generation: u32,
        updates: &[TaskStatus],
        now: i64,
    ) -> Option<ObjectRef<MpiJob>> {
        let mut inner = self.lock();
        let job = inner.jobs.get_mut(uid)?;
        let g = job.gang.as_mut().filter(|g| g.generation == generation)?;
        g.stage = Stage::Launched;
        g.launched_at = Some(now);
        for update in updates {
            g.record(update, now);
        }
        job.ask = None;
        Some(job.key.clone())
    }

    /// The reconciler has written the status it planned with gang
    /// `generation` at `stage`. For a placed gang, `recorded` says whether
    /// that status records it as the driver asked ([`crate::plan::records`]):
    /// the ask is answered yes, or (dropped) never. For a launched gang, the
    /// updates held for it are applied; returns whether they changed it (the
    /// job is then worth reconciling again).
    pub fn answer(&self, uid: &str, generation: u32, stage: Stage, recorded: bool) -> bool {
        let mut inner = self.lock();
        let Some(job) = inner.jobs.get_mut(uid) else { return false };
        match stage {
            Stage::Planned => {
                if let Some(ask) = job.ask.take_if(|a| a.generation == generation)
                    && recorded
                {
                    // The driver may have stopped waiting (its deadline passed): nothing to tell then.
                    let _unheard = ask.answer.send(());
                }
                false
            }
            Stage::Launched => {
                let Some(held) = job.held.take_if(|h| h.generation == generation) else { return false };
                let Some(g) = job.gang.as_mut().filter(|g| g.generation == generation) else { return false };
                let mut changed = false;
                for (update, seen) in &held.updates {
                    changed |= g.record(update, *seen);
                }
                changed
            }
        }
    }

    /// The driver gave up on a placed gang whose status was not written in
    /// time, or will not be: nothing was sent to Mesos for it, so it is
    /// forgotten and the job queues again. A gang that has moved on (another
    /// generation, or launched) is left alone.
    pub fn forget_planned(&self, uid: &str, generation: u32) -> Option<ObjectRef<MpiJob>> {
        let mut inner = self.lock();
        let job = inner.jobs.get_mut(uid)?;
        if !job.gang.as_ref().is_some_and(|g| g.generation == generation && g.stage == Stage::Planned) {
            return None;
        }
        job.gang = None;
        job.ask = None;
        Some(job.key.clone())
    }

    /// Applies a task update seen at `now`; returns the job to reconcile if it
    /// is one of ours and changed. An update of a launched gang whose
    /// `Launching` status is not written yet is held (see [`Books::answer`]).
    pub fn record(&self, status: &TaskStatus, now: i64) -> Option<ObjectRef<MpiJob>> {
        let name = TaskName::parse(&status.task_id.value)?;
        let mut inner = self.lock();
        let uid = inner.short.get(&name.short_uid)?.clone();
        let job = inner.jobs.get_mut(&uid)?;
        let g = job.gang.as_mut()?;
        if g.generation != name.generation {
            return None;
        }
        if let Some(held) = job.held.as_mut().filter(|h| h.generation == g.generation) {
            held.updates.push((status.clone(), now));
            return None;
        }
        g.record(status, now).then(|| job.key.clone())
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
            j.ask = None;
            j.held = None;
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

    /// Records the offer layer's quota limits; says whether they changed.
    pub fn set_quota_limits(&self, limits: BTreeMap<String, QuotaLimit>) -> bool {
        let mut inner = self.lock();
        let changed = inner.quota_limits != limits;
        inner.quota_limits = limits;
        changed
    }

    /// The offer layer's quota limits by role, as last read from it.
    pub fn quota_limits(&self) -> BTreeMap<String, QuotaLimit> {
        self.lock().quota_limits.clone()
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
    use std::sync::Arc;

    use kube::runtime::reflector::ObjectRef;
    use mpiswarm_crds::MpiJob;
    use mpiswarm_mesos::{TaskId, TaskState, TaskStatus};
    use mpiswarm_policy::{AgentCapacity, FreeResources};
    use tokio::sync::oneshot::error::TryRecvError;

    use super::{Answer, Books};
    use crate::fixtures::{JobFixture as _, T0, UID, gang};
    use crate::gang::Stage;

    /// Books where the fixture job waits with gang generation 0.
    fn waiting() -> (Books, ObjectRef<MpiJob>) {
        let books = Books::default();
        let job = Arc::new(MpiJob::test());
        let key = ObjectRef::from_obj(job.as_ref());
        let entry = crate::reconcile::queue_entry(&job, UID, 0, Vec::new(), T0).unwrap().unwrap();
        assert!(books.enqueue(UID, &key, entry));
        (books, key)
    }

    fn heard(answer: &mut Answer) -> Result<(), TryRecvError> {
        answer.try_recv()
    }

    #[test]
    fn the_drivers_ask_is_answered_only_for_the_gang_and_stage_it_asked_about() {
        // (name, what the reconciler answers: generation, stage, recorded; what the driver hears)
        let rows = [
            ("recorded as asked", (0, Stage::Planned, true), Ok(())),
            ("not recorded: withdrawn at once", (0, Stage::Planned, false), Err(TryRecvError::Closed)),
            ("another generation: still waiting", (1, Stage::Planned, true), Err(TryRecvError::Empty)),
            ("a launched gang's write: still waiting", (0, Stage::Launched, true), Err(TryRecvError::Empty)),
        ];
        for (name, (generation, stage, recorded), want) in rows {
            let (books, key) = waiting();
            let (k, mut answer) = books.plan_gang(UID, gang(Stage::Planned, 0)).unwrap();
            assert_eq!(k, key);
            assert!(books.queue_view(UID).is_none(), "{name}: a placed job leaves the queue");
            books.answer(UID, generation, stage, recorded);
            assert_eq!(heard(&mut answer), want, "{name}");
        }
    }

    #[test]
    fn a_job_queued_after_a_round_read_the_queue_is_one_it_did_not_try() {
        let (books, _) = waiting();
        let read: Vec<(String, _)> = books.waiting();
        let tried: std::collections::HashSet<&str> = read.iter().map(|(uid, _)| uid.as_str()).collect();
        assert!(!books.waits_outside(&tried), "the round read every waiting job");
        assert!(books.waits_outside(&std::collections::HashSet::new()), "a round that read none tried none");
        books.dequeue(UID);
        assert!(!books.waits_outside(&std::collections::HashSet::new()), "nothing waits");
    }

    #[test]
    fn the_ask_goes_with_its_gang_and_with_its_job() {
        let (books, _) = waiting();
        let (_, mut placed) = books.plan_gang(UID, gang(Stage::Planned, 0)).unwrap();
        books.forget_gang(UID);
        assert_eq!(heard(&mut placed), Err(TryRecvError::Closed), "the gang was forgotten");

        let (books, _) = waiting();
        let (_, mut gone) = books.plan_gang(UID, gang(Stage::Planned, 0)).unwrap();
        books.remove(UID);
        assert_eq!(heard(&mut gone), Err(TryRecvError::Closed), "the job is gone");
    }

    /// Every task of the fixture gang, as an update in `state`.
    fn updates(state: TaskState) -> Vec<TaskStatus> {
        gang(Stage::Planned, 0).tasks.keys().map(|id| TaskStatus::new(TaskId::new(id), state)).collect()
    }

    fn states(books: &Books) -> Vec<Option<TaskState>> {
        books.gang(UID).map(|g| g.tasks.values().map(|t| t.state).collect()).unwrap_or_default()
    }

    #[test]
    fn a_launched_gangs_updates_wait_until_the_reconciler_has_written_its_launching_status() {
        let (books, key) = waiting();
        books.plan_gang(UID, gang(Stage::Planned, 0)).unwrap();
        books.answer(UID, 0, Stage::Planned, true);
        assert!(books.mark_launched(UID, 1, T0).is_none(), "no gang of generation 1");
        assert_eq!(books.mark_launched(UID, 0, T0), Some(key.clone()));
        assert_eq!(books.gang(UID).map(|g| (g.stage, g.launched_at)), Some((Stage::Launched, Some(T0))));
        // Its tasks start at once; the driver reads their updates before the reconciler ran.
        for u in updates(TaskState::Running) {
            assert_eq!(books.record(&u, T0), None, "held: nothing to reconcile for it yet");
        }
        assert_eq!(states(&books), [None, None, None], "held, not applied");
        assert!(books.knows_task(&updates(TaskState::Running)[0].task_id.value), "held tasks are not strays");
        assert!(!books.answer(UID, 1, Stage::Launched, true), "another generation's write releases nothing");
        assert!(!books.answer(UID, 0, Stage::Planned, true), "nor does a placed gang's");
        assert_eq!(states(&books), [None, None, None]);
        // The reconciler wrote the status it planned with the launched gang (Launching).
        assert!(books.answer(UID, 0, Stage::Launched, true), "the held updates changed the gang");
        assert_eq!(states(&books), [Some(TaskState::Running); 3]);
        // From then on updates apply at once.
        let finished = updates(TaskState::Finished);
        assert_eq!(books.record(&finished[0], T0), Some(key));
        assert!(!books.answer(UID, 0, Stage::Launched, true), "nothing held any more");
    }

    #[test]
    fn held_updates_go_with_their_gang_and_a_dropped_gangs_updates_are_not_held() {
        let (books, _) = waiting();
        books.plan_gang(UID, gang(Stage::Planned, 0)).unwrap();
        books.mark_launched(UID, 0, T0).unwrap();
        books.record(&updates(TaskState::Running)[0], T0);
        books.forget_gang(UID);
        let next = gang(Stage::Planned, 0);
        let key = ObjectRef::from_obj(&MpiJob::test());
        assert!(books.seed_gang(UID, &key, next));
        assert!(!books.answer(UID, 0, Stage::Launched, true), "the forgotten gang's updates went with it");
        assert_eq!(states(&books), [None, None, None]);

        let (books, key) = waiting();
        books.plan_gang(UID, gang(Stage::Planned, 0)).unwrap();
        let dropped = updates(TaskState::Dropped);
        assert_eq!(books.mark_dropped(UID, 0, &dropped, T0), Some(key));
        assert_eq!(states(&books), [Some(TaskState::Dropped); 3], "no launch to tell first");
        assert_eq!(books.gang(UID).map(|g| g.stage), Some(Stage::Launched));
    }

    #[test]
    fn the_driver_forgets_only_a_placed_gang_of_the_generation_it_gave_up_on() {
        let (books, key) = waiting();
        let (_, mut answer) = books.plan_gang(UID, gang(Stage::Planned, 0)).unwrap();
        assert!(books.forget_planned(UID, 1).is_none(), "another generation stays");
        assert_eq!(books.forget_planned(UID, 0), Some(key));
        assert!(books.gang(UID).is_none());
        assert_eq!(heard(&mut answer), Err(TryRecvError::Closed));

        let (books, _) = waiting();
        books.plan_gang(UID, gang(Stage::Planned, 0)).unwrap();
        books.mark_launched(UID, 0, T0).unwrap();
        assert!(books.forget_planned(UID, 0).is_none(), "a launched gang has tasks: it stays");
        assert!(books.gang(UID).is_some());
    }

    #[test]
    fn a_job_placed_meanwhile_is_not_queued_again_for_the_same_generation() {
        let (books, key) = waiting();
        let job = Arc::new(MpiJob::test());
        books.plan_gang(UID, gang(Stage::Planned, 0)).unwrap();
        // A reconcile that read the books before the placement wants to queue it (again).
        assert!(books.refresh(UID, 0, &job), "nothing to fetch for a placed job");
        let entry = crate::reconcile::queue_entry(&job, UID, 0, Vec::new(), T0).unwrap().unwrap();
        assert!(!books.enqueue(UID, &key, entry), "not queued");
        assert!(books.queue_view(UID).is_none() && books.waiting().is_empty(), "so no round places it twice");
        // The next generation queues (a restart) once the old gang is forgotten.
        books.forget_gang(UID);
        let next = crate::reconcile::queue_entry(&job, UID, 1, Vec::new(), T0).unwrap().unwrap();
        assert!(books.enqueue(UID, &key, next));
    }

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
