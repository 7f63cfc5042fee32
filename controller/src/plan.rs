//! The reconcile decision, as a pure function: from an MpiJob, what the
//! controller knows of its gang and its place in the queue, and the time,
//! compute the status the job should have and what must happen (queue it,
//! kill its tasks, forget an ended gang, delete it after its TTL). No I/O and
//! no clock, so every transition is a table row in the tests.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use mpiswarm_crds::{
    CleanPolicy, ConditionReason as R, ConditionType as C, LauncherStatus, MpiJob, MpiJobStatus, Phase, WorkersStatus,
};
use mpiswarm_mesos::TaskState;

use crate::demand;
use crate::gang::{GangBook, Health, Stage};

/// Where a waiting job stands in the queue, from the last offer round.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueView {
    /// When it started waiting (Unix seconds).
    pub since: i64,
    /// Why the last round did not start it.
    pub wait: Option<String>,
    /// Set when the job can never be placed as things stand.
    pub never_fits: Option<NeverFits>,
    /// The capacity epoch (see `Books::known_capacity`) a
    /// [`NeverFits::Cluster`] was computed at; it is not computed again
    /// until the capacity changes.
    pub never_fits_epoch: Option<u64>,
}

/// Why a waiting job can never be placed as things stand (it keeps
/// waiting: the cluster may grow, the limit may be raised).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NeverFits {
    /// It does not fit even on everything the cluster ever offered.
    Cluster(String),
    /// It needs more than its role's quota limit lets the role hold.
    Quota(String),
}

impl NeverFits {
    /// The `Unschedulable` reason and message.
    fn condition(&self) -> (R, &str) {
        match self {
            NeverFits::Cluster(why) => (R::ExceedsCluster, why),
            NeverFits::Quota(why) => (R::ExceedsQuota, why),
        }
    }
}

/// What must happen besides the status write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Wait for resources with this gang generation.
    Enqueue { generation: u32 },
    /// Leave the queue (finished, suspended, invalid, or placed).
    Dequeue,
    /// KILL every task of the gang in the books that has not ended.
    Kill,
    /// Drop the gang from the books: every task has ended.
    Forget,
    /// Delete the MpiJob (`ttlSecondsAfterFinished` passed).
    Delete,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub status: MpiJobStatus,
    pub actions: Vec<Action>,
    /// Reconcile again after this many seconds (deadline, TTL, scheduling timeout).
    pub requeue_after: Option<i64>,
}

pub struct Inputs<'a> {
    pub job: &'a MpiJob,
    pub gang: Option<&'a GangBook>,
    pub queue: Option<&'a QueueView>,
    /// Unix seconds.
    pub now: i64,
    /// Seconds a launched gang may take until every task runs.
    pub launch_timeout: i64,
    /// What `validate()`, the demand translation or the namespace's role
    /// policy found wrong, if anything, with the `Invalid` condition's reason.
    pub invalid: Option<(R, String)>,
}

fn time(secs: i64) -> Time {
    Time(Timestamp::from_second(secs).unwrap_or(Timestamp::UNIX_EPOCH))
}

fn secs(t: &Time) -> i64 {
    t.0.as_second()
}

struct Builder<'a> {
    st: MpiJobStatus,
    generation: Option<i64>,
    now: i64,
    actions: Vec<Action>,
    requeue_after: Option<i64>,
    inputs: &'a Inputs<'a>,
}

impl Builder<'_> {
    fn cond(&mut self, t: C, status: bool, reason: R, message: &str) {
        let (g, now) = (self.generation, time(self.now));
        self.st.set_condition(t, status, reason, message, g, now);
    }

    /// Flips a condition to False only if it is present and True.
    fn clear(&mut self, t: C, reason: R, message: &str) {
        if self.st.is_true(t) {
            self.cond(t, false, reason, message);
        }
    }

    fn requeue(&mut self, after: i64) {
        let after = after.max(1);
        self.requeue_after = Some(self.requeue_after.map_or(after, |r| r.min(after)));
    }

    fn finish(&mut self, phase: Phase, reason: R, message: &str) {
        self.st.phase = Some(phase);
        self.st.message = Some(message.to_owned());
        self.st.completion_time.get_or_insert(time(self.now));
        self.clear(C::Running, reason, message);
        self.clear(C::Restarting, reason, message);
        self.clear(C::Unschedulable, reason, message);
        match phase {
            Phase::Succeeded => self.cond(C::Succeeded, true, reason, message),
            _ => self.cond(C::Failed, true, reason, message),
        }
        self.actions.push(Action::Dequeue);
    }

    /// Tear down what is left of the gang: KILL live tasks, forget it once ended.
    fn tear_down(&mut self, gang: &GangBook) {
        if gang.all_ended() {
            self.actions.push(Action::Forget);
        } else {
            self.actions.push(Action::Kill);
        }
    }

    fn describe_gang(&mut self, gang: &GangBook) {
        let p = &gang.placement;
        self.st.placement = Some(demand::placement_status(p));
        let mut w = WorkersStatus { total: demand::status_count(p.nodes.len()), ..WorkersStatus::default() };
        for t in gang.workers() {
            match t.state {
                Some(TaskState::Running) => w.running += 1,
                Some(TaskState::Finished) => w.succeeded += 1,
                Some(s) if s.is_terminal() => w.failed += 1,
                _ => {}
            }
        }
        self.st.workers = Some(w);
        if let Some(l) = gang.launcher() {
            let prev = self.st.launcher.clone().unwrap_or_default();
            self.st.launcher = Some(LauncherStatus {
                node: Some(l.hostname.clone()),
                state: l.state.map(|s| s.as_str().to_owned()).or(prev.state),
                exit_code: l.exit_code,
                message: l.message.clone().filter(|m| !m.is_empty()).or(prev.message),
            });
        }
    }
}

/// The decision. Idempotent: planning again from the status it returned
/// and the same books yields the same status and no new transitions.
pub fn plan(inputs: &Inputs<'_>) -> Plan {
    let job = inputs.job;
    let spec = &job.spec;
    let old = job.status.clone().unwrap_or_default();
    let mut b = Builder {
        st: old.clone(),
        generation: job.metadata.generation,
        now: inputs.now,
        actions: Vec::new(),
        requeue_after: None,
        inputs,
    };
    b.st.observed_generation = job.metadata.generation;
    if b.st.condition(C::Created).is_none() {
        b.cond(C::Created, true, R::Created, "MpiJob accepted by the mpiswarm controller");
    }
    let gang = b.inputs.gang;
    let phase = b.st.phase.unwrap_or_default();

    // A finished job only cleans up and waits for its TTL.
    if phase.is_finished() {
        if let Some(g) = gang {
            let keep_workers = spec.run_policy.clean_policy == CleanPolicy::None && phase == Phase::Succeeded;
            if g.all_ended() {
                b.actions.push(Action::Forget);
            } else if !keep_workers {
                b.actions.push(Action::Kill);
            }
        }
        b.actions.push(Action::Dequeue);
        if let (Some(ttl), Some(done)) = (spec.run_policy.ttl_seconds_after_finished, b.st.completion_time.as_ref()) {
            let left = secs(done) + ttl - b.now;
            if left <= 0 {
                b.actions.push(Action::Delete);
            } else {
                b.requeue(left);
            }
        }
        return b.done();
    }

    if let Some((reason, why)) = &b.inputs.invalid {
        b.cond(C::Invalid, true, *reason, why);
        b.finish(Phase::Failed, R::Invalid, &format!("the MpiJob is invalid: {why}"));
        return b.done();
    }

    let mut generation = b.st.gang_generation.and_then(|g| u32::try_from(g).ok()).unwrap_or(0);
    // The books may be one step ahead of the status (a gang was just placed).
    if let Some(g) = gang
        && g.generation > generation
    {
        generation = g.generation;
        b.st.gang_generation = Some(demand::status_count(generation));
    }

    if spec.run_policy.suspend {
        if let Some(g) = gang {
            b.tear_down(g);
            if g.generation == generation {
                // Those task ids are spent; a resume launches fresh ones.
                b.st.gang_generation = Some(demand::status_count(generation + 1));
            }
        }
        b.actions.push(Action::Dequeue);
        b.st.phase = Some(Phase::Suspended);
        b.st.start_time = None;
        b.st.message = Some("suspended: runPolicy.suspend is true; its resources are released".to_owned());
        b.clear(C::Running, R::Suspended, "the job was suspended");
        b.clear(C::Unschedulable, R::Suspended, "the job was suspended");
        b.cond(C::Suspended, true, R::Suspended, "runPolicy.suspend is true");
        return b.done();
    }
    if b.st.is_true(C::Suspended) {
        b.cond(C::Suspended, false, R::Resumed, "runPolicy.suspend was set to false");
        b.st.phase = Some(Phase::Pending);
    }

    if let (Some(limit), Some(start)) = (spec.run_policy.active_deadline_seconds, b.st.start_time.as_ref()) {
        let left = secs(start) + limit - b.now;
        if left <= 0 {
            if let Some(g) = gang {
                b.tear_down(g);
            }
            b.finish(
                Phase::Failed,
                R::DeadlineExceeded,
                &format!("the job ran longer than runPolicy.activeDeadlineSeconds ({limit}s)"),
            );
            return b.done();
        }
        b.requeue(left);
    }

    match gang {
        Some(g) if g.generation < generation && !g.all_ended() => {
            // A failed generation is still being torn down; the next waits for it.
            b.tear_down(g);
            b.actions.push(Action::Dequeue);
        }
        Some(g) if g.generation < generation => {
            // Its last task just ended: forget it and queue the next one in
            // the same step, since forgetting changes no status and so
            // brings no further reconcile.
            b.tear_down(g);
            wait_step(&mut b, generation);
        }
        Some(g) => gang_step(&mut b, g, generation),
        None => wait_step(&mut b, generation),
    }
    b.done()
}

fn gang_step(b: &mut Builder<'_>, g: &GangBook, generation: u32) {
    b.describe_gang(g);
    let nodes: Vec<&str> = g.placement.nodes.iter().map(|n| n.hostname.as_str()).collect();
    let ranks = g.placement.total_ranks();
    match g.health(b.now, b.inputs.launch_timeout) {
        Health::Unknown => {
            // After a restart, until RECONCILE answers: keep what the status says.
            b.requeue(5);
        }
        Health::Planned => {
            b.st.phase = Some(Phase::Scheduling);
            b.st.message = Some(format!("placed: {}", g.placement.reason));
            b.cond(C::Scheduled, true, R::Placed, &g.placement.reason);
            b.clear(C::Unschedulable, R::Placed, &g.placement.reason);
            b.actions.push(Action::Dequeue);
        }
        Health::Launching => {
            b.st.phase = Some(Phase::Launching);
            b.st.start_time.get_or_insert(time(b.now));
            b.st.message = Some(format!("launching {} tasks on {}", g.tasks.len(), nodes.join(", ")));
            b.cond(C::Scheduled, true, R::Placed, &g.placement.reason);
            b.clear(C::Unschedulable, R::Placed, &g.placement.reason);
            b.requeue(b.inputs.launch_timeout);
        }
        Health::Running => {
            b.st.phase = Some(Phase::Running);
            b.st.start_time.get_or_insert(time(b.now));
            let msg = format!("all {ranks} ranks run on {}", nodes.join(", "));
            b.st.message = Some(msg.clone());
            b.cond(C::Running, true, R::GangRunning, &msg);
            // The cause of the last restart stays readable in the status
            // after the restarted gang runs (which node was lost, and why).
            let cause =
                b.st.condition(C::Restarting)
                    .filter(|c| c.status == "True")
                    .map(|c| (c.reason.clone(), c.message.clone()));
            if let Some((reason, message)) = cause {
                let restarts = b.st.restarts;
                b.clear(
                    C::Restarting,
                    R::GangRunning,
                    &format!("{msg}; restart {restarts} was for {reason}: {message}"),
                );
            }
        }
        Health::Settling(left) => {
            // mpirun failed; its gang's other tasks have a moment to say
            // whether a node was lost (their update wakes the job sooner).
            b.requeue(left);
        }
        Health::Succeeded => {
            if let Some(l) = b.st.launcher.as_mut() {
                l.exit_code.get_or_insert(0);
            }
            b.finish(Phase::Succeeded, R::LauncherSucceeded, "mpirun exited with code 0");
            if !(b.inputs.job.spec.run_policy.clean_policy == CleanPolicy::None) {
                b.tear_down(g);
            }
        }
        Health::Failed(f) => {
            let limit = b.inputs.job.spec.run_policy.backoff_limit;
            b.tear_down(g);
            if f.counts && b.st.restarts >= limit {
                let msg = if limit > 0 {
                    format!("{} (backoffLimit {limit} reached after {} restarts)", f.message, b.st.restarts)
                } else {
                    f.message.clone()
                };
                b.finish(Phase::Failed, f.reason, &msg);
            } else {
                if f.counts {
                    b.st.restarts += 1;
                }
                b.st.gang_generation = Some(demand::status_count(generation + 1));
                b.st.phase = Some(Phase::Pending);
                let msg = if f.counts {
                    format!("restarting the gang (restart {} of {limit}): {}", b.st.restarts, f.message)
                } else {
                    format!("relaunching the gang: {}", f.message)
                };
                b.st.message = Some(msg.clone());
                b.clear(C::Running, f.reason, &msg);
                b.cond(C::Restarting, true, f.reason, &msg);
                b.actions.push(Action::Dequeue);
                if g.all_ended() {
                    // Nothing left to wait for: the next generation queues now.
                    b.actions.push(Action::Enqueue { generation: generation + 1 });
                }
            }
        }
    }
}

fn wait_step(b: &mut Builder<'_>, generation: u32) {
    b.st.phase = Some(Phase::Pending);
    b.actions.push(Action::Enqueue { generation });
    let spec = &b.inputs.job.spec;
    let timeout = spec.run_policy.scheduling_timeout_seconds;
    // The round-by-round reason (numbers move with every offer) is not
    // written here: it would rewrite the status on every round. It goes into
    // Unschedulable once the job has waited too long.
    b.st.message = Some(format!("waiting for resources in role {}", spec.role));
    let Some(q) = b.inputs.queue else { return };
    let waited = b.now - q.since;
    let (reason, why) = match (&q.never_fits, &q.wait) {
        (Some(never), _) => {
            let (reason, why) = never.condition();
            (reason, why.to_owned())
        }
        (None, _) if waited < timeout => {
            b.requeue(timeout - waited);
            return;
        }
        (None, Some(wait)) => (R::GangDoesNotFit, format!("no fit within {timeout}s: {wait}")),
        (None, None) => (R::GangDoesNotFit, format!("no offer round placed it within {timeout}s")),
    };
    // Keep the first explanation while the kind of obstacle stays the same.
    let same = b.st.condition(C::Unschedulable).is_some_and(|c| {
        c.status == "True" && c.reason == reason.as_str() && first_clause(&c.message) == first_clause(&why)
    });
    if !same {
        b.cond(C::Unschedulable, true, reason, &why);
    }
}

/// Whether `status`, planned with `gang`, records it as the framework
/// driver needs before it goes on. A placed gang (`Planned`) must stand in
/// it as `Scheduling` with its generation and placement before any ACCEPT
/// (a controller that dies after the ACCEPT finds the gang there and asks
/// the master about it instead of launching it twice); a status that does
/// not (the job was suspended meanwhile...) withdraws the ask: the gang is
/// not launched. For a launched gang any status planned with it will do:
/// with no update of its tasks applied yet, it says `Launching` (or what
/// the job came to meanwhile), and the updates held for it may follow.
pub fn records(status: &MpiJobStatus, gang: &GangBook) -> bool {
    match gang.stage {
        Stage::Planned => {
            u32::try_from(status.gang_generation.unwrap_or(0)).ok() == Some(gang.generation)
                && status.placement.is_some()
                && status.phase == Some(Phase::Scheduling)
        }
        Stage::Launched => true,
    }
}

/// The part of a reason that names the obstacle, not its numbers.
pub fn first_clause(s: &str) -> &str {
    s.split([':', ';', '(']).next().unwrap_or(s).trim()
}

impl Builder<'_> {
    fn done(mut self) -> Plan {
        // Deadlines and TTLs that started in this very step still need a wake-up.
        let rp = &self.inputs.job.spec.run_policy;
        let phase = self.st.phase.unwrap_or_default();
        if phase.is_finished() {
            if let (Some(ttl), Some(done)) = (rp.ttl_seconds_after_finished, self.st.completion_time.as_ref()) {
                let left = secs(done) + ttl - self.now;
                if left > 0 {
                    self.requeue(left);
                }
            }
        } else if let (Some(limit), Some(start)) = (rp.active_deadline_seconds, self.st.start_time.as_ref()) {
            let left = secs(start) + limit - self.now;
            if left > 0 {
                self.requeue(left);
            }
        }
        Plan { status: self.st, actions: self.actions, requeue_after: self.requeue_after }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{JobFixture as _, T0, UID, gang, set_tasks as set};
    use crate::names::TaskRole;
    use mpiswarm_mesos::{TaskId, TaskStatus};

    fn job(extra: &str) -> MpiJob {
        serde_yaml::from_str(&format!(
            "apiVersion: mpiswarm.io/v1alpha1\nkind: MpiJob\nmetadata: {{name: pi, namespace: default, uid: {UID}, generation: 1}}\nspec:\n  image: img:1\n  command: [pi]\n  ranks: 4\n  resources: {{cpus: 0.5, memory: 64Mi}}\n{extra}"
        ))
        .unwrap()
    }

    struct Row<'a> {
        job: MpiJob,
        gang: Option<&'a GangBook>,
        queue: Option<QueueView>,
        now: i64,
        invalid: Option<(R, String)>,
    }

    impl<'a> Row<'a> {
        fn new(job: MpiJob) -> Self {
            Self { job, gang: None, queue: None, now: T0, invalid: None }
        }
        fn gang(mut self, g: &'a GangBook) -> Self {
            self.gang = Some(g);
            self
        }
        fn plan(&self) -> Plan {
            plan(&Inputs {
                job: &self.job,
                gang: self.gang,
                queue: self.queue.as_ref(),
                now: self.now,
                launch_timeout: 60,
                invalid: self.invalid.clone(),
            })
        }
        /// Plans, stores the status in the job, and plans again: the second
        /// plan must not change the status (no churn).
        fn settle(&mut self) -> Plan {
            let first = self.plan();
            self.job.status = Some(first.status.clone());
            let again = self.plan();
            assert_eq!(again.status, first.status, "planning twice changed the status");
            first
        }
    }

    fn phase(p: &Plan) -> Phase {
        p.status.phase.unwrap()
    }

    #[test]
    fn a_new_job_is_created_and_queued_and_replanning_changes_nothing() {
        let mut row = Row::new(job(""));
        let p = row.settle();
        assert_eq!(phase(&p), Phase::Pending);
        assert!(p.status.is_true(C::Created));
        assert_eq!(p.status.observed_generation, Some(1));
        assert_eq!(p.actions, vec![Action::Enqueue { generation: 0 }]);
    }

    #[test]
    fn an_invalid_job_fails_with_the_reason_and_is_never_queued() {
        let mut row = Row::new(job(""));
        row.invalid = Some((R::InvalidSpec, "spec.image: Invalid value".into()));
        let p = row.settle();
        assert_eq!(phase(&p), Phase::Failed);
        assert!(p.status.is_true(C::Invalid));
        assert_eq!(p.status.condition(C::Failed).unwrap().reason, "Invalid");
        assert!(!p.actions.iter().any(|a| matches!(a, Action::Enqueue { .. })));
    }

    #[test]
    fn the_gang_moves_the_job_through_scheduling_launching_running_and_succeeded() {
        let mut g = gang(Stage::Planned, 0);
        let mut row = Row::new(job(""));
        row.settle();
        let p = Row { gang: Some(&g), ..Row::new(row.job.clone()) }.settle();
        assert_eq!(phase(&p), Phase::Scheduling);
        assert!(p.status.is_true(C::Scheduled));
        assert_eq!(p.status.placement.as_ref().unwrap().node_count, 2);
        assert!(p.actions.contains(&Action::Dequeue));

        g.stage = Stage::Launched;
        g.launched_at = Some(T0);
        set(&mut g, |_| true, TaskState::Starting, None);
        row.job.status = Some(p.status);
        let p = Row::new(row.job.clone()).gang(&g).settle();
        assert_eq!(phase(&p), Phase::Launching);
        assert!(p.status.start_time.is_some());

        set(&mut g, |_| true, TaskState::Running, None);
        row.job.status = Some(p.status);
        let p = Row::new(row.job.clone()).gang(&g).settle();
        assert_eq!(phase(&p), Phase::Running);
        assert!(p.status.is_true(C::Running));
        assert_eq!(p.status.workers.unwrap().running, 2);

        set(&mut g, |r| r == TaskRole::Launcher, TaskState::Finished, Some("0"));
        row.job.status = Some(p.status);
        let p = Row::new(row.job.clone()).gang(&g).settle();
        assert_eq!(phase(&p), Phase::Succeeded);
        assert!(p.status.is_true(C::Succeeded) && !p.status.is_true(C::Running));
        assert_eq!(p.status.launcher.as_ref().unwrap().exit_code, Some(0));
        assert!(p.status.completion_time.is_some());
        assert!(p.actions.contains(&Action::Kill), "running workers are cleaned up: {:?}", p.actions);
    }

    #[test]
    fn a_failed_launcher_fails_the_job_when_no_restart_is_left() {
        let mut g = gang(Stage::Launched, 0);
        set(&mut g, |_| true, TaskState::Running, None);
        set(&mut g, |r| r == TaskRole::Launcher, TaskState::Failed, Some("3"));
        let mut row = Row::new(job("")).gang(&g);
        // Its workers still run: for a moment they may still report a lost node.
        let waiting = row.settle();
        assert_ne!(waiting.status.phase, Some(Phase::Failed), "the verdict waits for the workers a moment");
        assert!(!waiting.actions.contains(&Action::Kill), "nothing is killed while it waits");
        row.now = T0 + crate::gang::SETTLE_SECONDS;
        let p = row.settle();
        assert_eq!(phase(&p), Phase::Failed);
        let c = p.status.condition(C::Failed).unwrap();
        assert_eq!(c.reason, "LauncherFailed");
        assert!(c.message.contains("code 3"), "{}", c.message);
        assert_eq!(p.status.launcher.unwrap().exit_code, Some(3));
        assert!(p.actions.contains(&Action::Kill));
    }

    #[test]
    fn a_lost_node_restarts_the_gang_under_a_new_generation_within_the_backoff_limit() {
        let mut g = gang(Stage::Launched, 0);
        set(&mut g, |_| true, TaskState::Running, None);
        set(&mut g, |r| r == TaskRole::Worker(1), TaskState::Lost, None);
        let mut row = Row::new(job("  runPolicy: {backoffLimit: 1}\n")).gang(&g);
        let p = row.settle();
        assert_eq!(phase(&p), Phase::Pending);
        assert_eq!((p.status.restarts, p.status.gang_generation), (1, Some(1)));
        let c = p.status.condition(C::Restarting).unwrap();
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("True", "NodeLost"));
        assert!(c.message.contains("n2"), "the lost node is named: {}", c.message);
        assert!(p.actions.contains(&Action::Kill) && !p.actions.iter().any(|a| matches!(a, Action::Enqueue { .. })));

        // Once the old gang has ended it is forgotten and generation 1 queues
        // in the same step: forgetting changes no status, so no later
        // reconcile would come to queue it (a job once sat Pending forever).
        let mut ended = g.clone();
        set(&mut ended, |_| true, TaskState::Killed, None);
        row.gang = Some(&ended);
        let actions = row.plan().actions;
        let forget = actions.iter().position(|a| *a == Action::Forget);
        let enqueue = actions.iter().position(|a| *a == Action::Enqueue { generation: 1 });
        assert!(matches!((forget, enqueue), (Some(f), Some(e)) if f < e), "forget, then queue: {actions:?}");
        row.gang = None;
        assert!(row.plan().actions.contains(&Action::Enqueue { generation: 1 }));

        // The restarted gang runs: Restarting goes False and still says why
        // the restart happened, naming the lost node.
        let mut running = gang(Stage::Launched, 1);
        set(&mut running, |_| true, TaskState::Running, None);
        row.gang = Some(&running);
        let p = row.settle();
        assert_eq!(phase(&p), Phase::Running);
        let c = p.status.condition(C::Restarting).unwrap();
        assert_eq!(c.status, "False");
        assert!(c.message.contains("NodeLost") && c.message.contains("n2"), "the cause stays: {}", c.message);

        // The second loss is one too many.
        let mut g1 = gang(Stage::Launched, 1);
        set(&mut g1, |_| true, TaskState::Running, None);
        set(&mut g1, |r| r == TaskRole::Worker(0), TaskState::Lost, None);
        row.gang = Some(&g1);
        let p = row.settle();
        assert_eq!(phase(&p), Phase::Failed);
        assert!(p.status.condition(C::Failed).unwrap().message.contains("backoffLimit 1"));
    }

    #[test]
    fn a_rescinded_offer_relaunches_without_using_a_restart() {
        let mut g = gang(Stage::Launched, 0);
        let id = g.tasks.keys().next().unwrap().clone();
        let mut s = TaskStatus::new(TaskId::new(&id), TaskState::Lost);
        s.reason = Some(mpiswarm_mesos::Reason::ReasonInvalidOffers);
        g.record(&s, T0);
        let p = Row::new(job("")).gang(&g).settle();
        assert_eq!((phase(&p), p.status.restarts, p.status.gang_generation), (Phase::Pending, 0, Some(1)));
    }

    #[test]
    fn suspend_kills_and_releases_and_resume_queues_a_fresh_generation() {
        let mut g = gang(Stage::Launched, 0);
        set(&mut g, |_| true, TaskState::Running, None);
        let mut row = Row::new(job("  runPolicy: {suspend: true}\n")).gang(&g);
        let p = row.settle();
        assert_eq!(phase(&p), Phase::Suspended);
        assert!(p.status.is_true(C::Suspended));
        assert_eq!(p.status.gang_generation, Some(1));
        assert!(p.actions.contains(&Action::Kill) && p.actions.contains(&Action::Dequeue));

        let mut resumed = job("");
        resumed.status = Some(p.status);
        let p = Row::new(resumed).settle();
        assert_eq!(phase(&p), Phase::Pending);
        assert_eq!(p.status.condition(C::Suspended).unwrap().reason, "Resumed");
        assert_eq!(p.actions, vec![Action::Enqueue { generation: 1 }]);
    }

    #[test]
    fn the_active_deadline_fails_a_running_job_and_kills_its_gang() {
        let mut g = gang(Stage::Launched, 0);
        set(&mut g, |_| true, TaskState::Running, None);
        let mut row = Row::new(job("  runPolicy: {activeDeadlineSeconds: 30}\n")).gang(&g);
        let p = row.settle();
        assert_eq!(p.requeue_after, Some(30));
        row.now = T0 + 31;
        let p = row.plan();
        assert_eq!(phase(&p), Phase::Failed);
        assert_eq!(p.status.condition(C::Failed).unwrap().reason, "DeadlineExceeded");
        assert!(p.actions.contains(&Action::Kill));
    }

    #[test]
    fn a_finished_job_is_deleted_after_its_ttl() {
        let mut g = gang(Stage::Launched, 0);
        set(&mut g, |_| true, TaskState::Running, None);
        set(&mut g, |r| r == TaskRole::Launcher, TaskState::Finished, Some("0"));
        let mut row = Row::new(job("  runPolicy: {ttlSecondsAfterFinished: 60}\n")).gang(&g);
        let p = row.settle();
        assert_eq!(phase(&p), Phase::Succeeded);
        assert_eq!(p.requeue_after, Some(60));
        row.now = T0 + 60;
        assert!(row.plan().actions.contains(&Action::Delete));
    }

    #[test]
    fn a_job_that_waits_too_long_or_can_never_fit_is_unschedulable_but_keeps_waiting() {
        let mut row = Row::new(job("  runPolicy: {schedulingTimeoutSeconds: 10}\n"));
        row.queue = Some(QueueView { since: T0, wait: Some("needs 2 cpus: 1 offered".into()), ..QueueView::default() });
        let p = row.settle();
        assert!(!p.status.is_true(C::Unschedulable));
        assert_eq!(p.requeue_after, Some(10));
        row.now = T0 + 10;
        let p = row.settle();
        let c = p.status.condition(C::Unschedulable).unwrap();
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("True", "GangDoesNotFit"));
        assert!(p.actions.contains(&Action::Enqueue { generation: 0 }));

        let mut row = Row::new(job(""));
        row.queue = Some(QueueView {
            since: T0,
            never_fits: Some(NeverFits::Cluster("needs 64 cpus; the cluster has 4".into())),
            ..QueueView::default()
        });
        let c = row.settle().status.condition(C::Unschedulable).cloned().unwrap();
        assert_eq!((c.reason.as_str(), c.message.as_str()), ("ExceedsCluster", "needs 64 cpus; the cluster has 4"));

        let mut row = Row::new(job(""));
        row.queue = Some(QueueView {
            since: T0,
            never_fits: Some(NeverFits::Quota("needs 8 cpus, the limit of role r is 4".into())),
            ..QueueView::default()
        });
        let p = row.settle();
        let c = p.status.condition(C::Unschedulable).cloned().unwrap();
        assert_eq!((c.reason.as_str(), c.message.as_str()), ("ExceedsQuota", "needs 8 cpus, the limit of role r is 4"));
        assert!(p.actions.contains(&Action::Enqueue { generation: 0 }), "it keeps waiting: the limit may be raised");
    }

    #[test]
    fn a_status_answers_the_drivers_ask_only_when_it_records_the_gang_as_asked() {
        let planned = gang(Stage::Planned, 1);
        let mut launched = gang(Stage::Launched, 1);
        set(&mut launched, |_| true, TaskState::Starting, None);
        let with = |status: MpiJobStatus| job("").with_status(status);
        // The status each gang brings a waiting job of generation 1 to.
        let pending = MpiJobStatus { gang_generation: Some(1), ..MpiJobStatus::default() };
        let scheduling = Row::new(with(pending.clone())).gang(&planned).settle().status;
        let launching = Row::new(with(scheduling.clone())).gang(&launched).settle().status;
        let suspended = Row::new(with(scheduling.clone()).run_policy("{suspend: true}")).gang(&planned).settle().status;
        let launched_suspended =
            Row::new(with(scheduling.clone()).run_policy("{suspend: true}")).gang(&launched).settle().status;
        let older = MpiJobStatus { gang_generation: Some(0), ..scheduling.clone() };
        // (name, status written, gang asked about, recorded)
        let rows = [
            ("Scheduling with the placed gang: ACCEPT may go", &scheduling, &planned, true),
            ("still Pending: not yet", &pending, &planned, false),
            ("Scheduling of an older generation", &older, &planned, false),
            ("suspended meanwhile: never", &suspended, &planned, false),
            ("Launching with the launched gang: its updates may be read", &launching, &launched, true),
            (
                "a launched gang of a job suspended meanwhile: its updates may follow",
                &launched_suspended,
                &launched,
                true,
            ),
        ];
        for (name, status, g, want) in rows {
            assert_eq!(records(status, g), want, "{name}: {:?}", status.phase);
        }
        assert_eq!(scheduling.phase, Some(Phase::Scheduling));
        assert_eq!(launching.phase, Some(Phase::Launching));
        assert_eq!(suspended.phase, Some(Phase::Suspended));
    }
}
