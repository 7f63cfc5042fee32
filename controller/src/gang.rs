//! One gang generation as the controller knows it: where its tasks went,
//! the last state each reported, and the one verdict that follows from them
//! (launching, running, succeeded, or failed and why). Pure: no I/O, time is
//! passed in.

use std::collections::BTreeMap;

use mpiswarm_crds::ConditionReason;
use mpiswarm_mesos::{Reason, TaskState, TaskStatus};
use mpiswarm_policy::Placement;

use crate::names::{self, TaskName, TaskRole};

/// How far the gang got on the Mesos side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Placed; its status is being written, nothing was sent to Mesos yet.
    Planned,
    /// The ACCEPTs were sent (or, after a controller restart, may have been).
    Launched,
}

/// What the controller knows of one task.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskBook {
    pub role: TaskRole,
    pub agent_id: String,
    pub hostname: String,
    /// `None` until the first update (after a controller restart: until RECONCILE answers).
    pub state: Option<TaskState>,
    pub reason: Option<Reason>,
    pub message: Option<String>,
    pub exit_code: Option<i32>,
    /// When its terminal update was recorded (Unix seconds); `None` while
    /// it runs, and for tasks restored after a controller restart.
    pub ended_at: Option<i64>,
}

/// How long a failed launcher's verdict waits for the other tasks of its
/// gang (seconds): mpirun exits at once when it loses the ranks of a node
/// that died, while the node's agent needs a few seconds (at most 10) to
/// report that node's tasks LOST. Deciding at once would blame mpirun's
/// exit code instead of the lost node, so the verdict waits until the other
/// tasks have ended or this long has passed, whichever comes first.
pub const SETTLE_SECONDS: i64 = 10;

/// One gang generation.
#[derive(Debug, Clone, PartialEq)]
pub struct GangBook {
    pub generation: u32,
    pub role: String,
    pub placement: Placement,
    pub stage: Stage,
    /// Task id -> what we know.
    pub tasks: BTreeMap<String, TaskBook>,
    /// KILLs were sent for the tasks that had not ended.
    pub kill_sent: bool,
    /// When the ACCEPTs went out (Unix seconds), for the launch timeout.
    pub launched_at: Option<i64>,
    /// Rebuilt after a controller restart from a status that said the gang
    /// was placed but not whether its ACCEPTs went out: if the offer layer
    /// does not know its tasks, they never launched, and that costs no restart.
    pub maybe_never_launched: bool,
    /// Rebuilt from a status: tasks not heard from yet are unknown, not launching.
    pub restored: bool,
}

/// Why a gang failed; `counts` says whether it uses up one of `backoffLimit`'s restarts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The reason the `Restarting` or `Failed` condition carries.
    pub reason: ConditionReason,
    pub message: String,
    pub exit_code: Option<i32>,
    /// The node whose loss caused it, if any.
    pub lost_node: Option<String>,
    pub counts: bool,
}

/// The gang's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// States not known yet (after a restart, before RECONCILE answered).
    Unknown,
    Planned,
    Launching,
    Running,
    Succeeded,
    Failed(Failure),
    /// The launcher failed while other tasks of the gang still run: the
    /// verdict waits this many more seconds for them ([`SETTLE_SECONDS`]).
    Settling(i64),
}

impl GangBook {
    /// A fresh gang: one worker per placed node, the launcher on the first.
    pub fn new(uid: &str, generation: u32, role: &str, placement: Placement, stage: Stage) -> Self {
        let mut tasks = BTreeMap::new();
        for (i, node) in placement.nodes.iter().enumerate() {
            let r = TaskRole::Worker(i as u32);
            tasks.insert(
                TaskName::new(uid, generation, r).to_string(),
                TaskBook::new(r, &node.agent_id, &node.hostname),
            );
        }
        let l = &placement.launcher;
        tasks.insert(
            TaskName::new(uid, generation, TaskRole::Launcher).to_string(),
            TaskBook::new(TaskRole::Launcher, &l.agent_id, &l.hostname),
        );
        Self {
            generation,
            role: role.to_owned(),
            placement,
            stage,
            tasks,
            kill_sent: false,
            launched_at: None,
            maybe_never_launched: false,
            restored: false,
        }
    }

    /// Records an update seen at `now` (Unix seconds); returns whether it changed anything.
    pub fn record(&mut self, status: &TaskStatus, now: i64) -> bool {
        let Some(task) = self.tasks.get_mut(&status.task_id.value) else { return false };
        let exit_code = status
            .labels
            .as_ref()
            .and_then(|l| l.get(names::LABEL_EXIT_CODE))
            .and_then(|c| c.parse().ok())
            .or(task.exit_code);
        // A terminal state is final: a late RUNNING (retried delivery) cannot revive it.
        if task.state.is_some_and(TaskState::is_terminal) && !status.state.is_terminal() {
            return false;
        }
        let changed = task.state != Some(status.state) || task.message != status.message || task.exit_code != exit_code;
        task.state = Some(status.state);
        task.reason = status.reason;
        task.message = status.message.clone();
        task.exit_code = exit_code;
        if status.state.is_terminal() {
            task.ended_at.get_or_insert(now);
        }
        changed
    }

    pub fn all_ended(&self) -> bool {
        self.tasks.values().all(|t| t.state.is_some_and(TaskState::is_terminal))
    }

    /// Tasks that may still hold resources (to KILL).
    pub fn live_tasks(&self) -> impl Iterator<Item = (&String, &TaskBook)> {
        self.tasks.iter().filter(|(_, t)| !t.state.is_some_and(TaskState::is_terminal))
    }

    pub fn launcher(&self) -> Option<&TaskBook> {
        self.tasks.values().find(|t| t.role == TaskRole::Launcher)
    }

    pub fn workers(&self) -> impl Iterator<Item = &TaskBook> {
        self.tasks.values().filter(|t| matches!(t.role, TaskRole::Worker(_)))
    }

    /// The verdict. `launch_timeout` bounds how long tasks may take to start.
    pub fn health(&self, now: i64, launch_timeout: i64) -> Health {
        if self.stage == Stage::Planned {
            return Health::Planned;
        }
        // A task that could not start at all is the cause; its group's other
        // tasks were only killed because of it.
        if let Some(t) = self.tasks.values().find(|t| {
            t.state == Some(TaskState::Error)
                || (t.state == Some(TaskState::Failed) && t.reason == Some(Reason::ReasonContainerLaunchFailed))
        }) {
            let state = t.state.unwrap_or(TaskState::Failed);
            return Health::Failed(failure_of(t, state, t.role == TaskRole::Launcher, self.maybe_never_launched));
        }
        // A lost node is the cause even when mpirun, losing its ranks there,
        // exited first or at the same moment: its exit code only echoes it.
        if let Some((t, state)) = self.tasks.values().find_map(|t| t.state.filter(|s| s.is_lost()).map(|s| (t, s))) {
            return Health::Failed(failure_of(t, state, t.role == TaskRole::Launcher, self.maybe_never_launched));
        }
        // The launcher's end decides the job, as mpirun's exit does.
        if let Some(l) = self.launcher()
            && let Some(state) = l.state.filter(|s| s.is_terminal())
        {
            let others_run = self.workers().any(|w| !w.state.is_some_and(TaskState::is_terminal));
            let settle_left = l.ended_at.map(|at| SETTLE_SECONDS - (now - at)).filter(|left| others_run && *left > 0);
            return match (state, settle_left) {
                (TaskState::Finished, _) => Health::Succeeded,
                (_, Some(left)) => Health::Settling(left),
                _ => Health::Failed(failure_of(l, state, true, self.maybe_never_launched)),
            };
        }
        // A worker that ends while mpirun runs takes its ranks with it.
        if let Some((w, state)) = self.workers().find_map(|w| w.state.filter(|s| s.is_terminal()).map(|s| (w, s))) {
            return Health::Failed(failure_of(w, state, false, self.maybe_never_launched));
        }
        if self.tasks.values().any(|t| t.state.is_none() || t.state == Some(TaskState::Unknown)) {
            if self.launched_at.is_some_and(|at| now - at >= launch_timeout) {
                return Health::Failed(self.launch_timeout(launch_timeout));
            }
            return if self.restored { Health::Unknown } else { Health::Launching };
        }
        if self.tasks.values().all(|t| t.state == Some(TaskState::Running)) {
            return Health::Running;
        }
        if self.launched_at.is_some_and(|at| now - at >= launch_timeout) {
            return Health::Failed(self.launch_timeout(launch_timeout));
        }
        Health::Launching
    }

    fn launch_timeout(&self, secs: i64) -> Failure {
        let slow: Vec<String> = self
            .tasks
            .values()
            .filter(|t| t.state != Some(TaskState::Running))
            .map(|t| format!("{} on {}", t.role, t.hostname))
            .collect();
        Failure {
            reason: ConditionReason::LaunchTimeout,
            message: format!("not running {secs}s after launch: {}", slow.join(", ")),
            exit_code: None,
            lost_node: None,
            counts: true,
        }
    }
}

impl TaskBook {
    fn new(role: TaskRole, agent_id: &str, hostname: &str) -> Self {
        Self {
            role,
            agent_id: agent_id.to_owned(),
            hostname: hostname.to_owned(),
            state: None,
            reason: None,
            message: None,
            exit_code: None,
            ended_at: None,
        }
    }
}

fn failure_of(t: &TaskBook, state: TaskState, launcher: bool, maybe_never_launched: bool) -> Failure {
    let who = if launcher { "launcher".to_owned() } else { format!("{} on {}", t.role, t.hostname) };
    let detail = t.message.clone().unwrap_or_default();
    let lost = state.is_lost();
    let (reason, counts, message) = match (state, t.reason) {
        // The offer was gone before the launch: not the job's fault, try again.
        (_, Some(Reason::ReasonInvalidOffers)) => {
            (ConditionReason::OfferRescinded, false, format!("{who} was not launched: {detail}"))
        }
        // Dropped, or refused by an agent that is going away (its node is
        // lost): nothing started, place it again.
        (TaskState::Dropped, _) | (_, Some(Reason::ReasonAgentDraining)) => {
            (ConditionReason::LaunchDropped, false, format!("{who} was dropped before it started: {detail}"))
        }
        // Unknown to the master after a controller restart.
        (_, Some(Reason::ReasonReconciliation)) => (
            ConditionReason::TaskUnknown,
            !maybe_never_launched,
            format!("{who} is unknown to the offer layer ({}): {detail}", state.as_str()),
        ),
        _ if lost => {
            (ConditionReason::NodeLost, true, format!("node {} was lost ({}): {detail}", t.hostname, state.as_str()))
        }
        (TaskState::Error, _) => (ConditionReason::LaunchFailed, true, format!("{who} was refused: {detail}")),
        (TaskState::Failed, Some(Reason::ReasonContainerLaunchFailed)) => {
            (ConditionReason::LaunchFailed, true, format!("{who} could not start: {detail}"))
        }
        (TaskState::Failed, _) if launcher => (
            ConditionReason::LauncherFailed,
            true,
            format!("mpirun exited with code {}: {detail}", t.exit_code.map_or("?".to_owned(), |c| c.to_string())),
        ),
        (TaskState::Failed, _) => (ConditionReason::WorkerFailed, true, format!("{who} failed: {detail}")),
        (TaskState::Finished, _) => {
            (ConditionReason::WorkerExited, true, format!("{who} exited while mpirun was running: {detail}"))
        }
        (TaskState::Killed, _) => (ConditionReason::TaskKilled, true, format!("{who} was killed: {detail}")),
        _ => (ConditionReason::TaskEnded, true, format!("{who} ended in {}: {detail}", state.as_str())),
    };
    Failure {
        reason,
        message: message.trim_end_matches(": ").trim_end().to_owned(),
        exit_code: t.exit_code,
        lost_node: lost.then(|| t.hostname.clone()),
        counts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpiswarm_mesos::{Labels, TaskId};
    use mpiswarm_policy::{AgentCapacity, FreeResources, JobDemand, Resources, place};

    const UID: &str = "0c5e7a1b-93f2-4d1e-8a77-2f0a9d1b3c4e";

    fn gang() -> GangBook {
        let offers = vec![
            AgentCapacity::new("a1", "n1", FreeResources::new(1.0, 4096.0)),
            AgentCapacity::new("a2", "n2", FreeResources::new(1.0, 4096.0)),
        ];
        let demand = JobDemand::new(3, Resources::new(0.3, 64.0, 0.0)).with_policy(mpiswarm_policy::Policy::Spread);
        let p = place(&demand, &offers).unwrap();
        let mut g = GangBook::new(UID, 0, "*", p, Stage::Launched);
        g.launched_at = Some(100);
        g
    }

    fn status(g: &GangBook, role: TaskRole, state: TaskState) -> TaskStatus {
        let id = g.tasks.iter().find(|(_, t)| t.role == role).map(|(id, _)| id.clone()).unwrap();
        TaskStatus::new(TaskId::new(&id), state)
    }

    fn all(g: &mut GangBook, state: TaskState) {
        let ids: Vec<String> = g.tasks.keys().cloned().collect();
        for id in ids {
            g.record(&TaskStatus::new(TaskId::new(&id), state), 100);
        }
    }

    #[test]
    fn a_gang_runs_only_when_every_task_runs_and_succeeds_with_its_launcher() {
        let mut g = gang();
        assert_eq!(g.health(101, 60), Health::Launching);
        g.restored = true;
        assert_eq!(g.health(101, 60), Health::Unknown, "after a restart, silence is not news");
        g.restored = false;
        all(&mut g, TaskState::Starting);
        assert_eq!(g.health(101, 60), Health::Launching);
        g.record(&status(&g, TaskRole::Worker(0), TaskState::Running), 100);
        assert_eq!(g.health(101, 60), Health::Launching);
        all(&mut g, TaskState::Running);
        assert_eq!(g.health(101, 60), Health::Running);
        g.record(&status(&g, TaskRole::Launcher, TaskState::Finished), 100);
        assert_eq!(g.health(101, 60), Health::Succeeded);
    }

    #[test]
    fn the_launchers_exit_code_and_a_lost_node_are_named() {
        let mut g = gang();
        all(&mut g, TaskState::Running);
        let mut s = status(&g, TaskRole::Launcher, TaskState::Failed);
        s.labels = Some(Labels::from_pairs([("mpiswarm.io/exit-code", "3")]));
        s.message = Some("container exited with code 3".into());
        g.record(&s, 100);
        // Its workers still run: the verdict waits for them a moment.
        assert_eq!(g.health(101, 60), Health::Settling(SETTLE_SECONDS - 1));
        let Health::Failed(f) = g.health(100 + SETTLE_SECONDS, 60) else { panic!() };
        assert_eq!((f.reason, f.exit_code, f.counts), (ConditionReason::LauncherFailed, Some(3), true));
        assert!(f.message.contains("code 3"), "{}", f.message);

        let mut g = gang();
        all(&mut g, TaskState::Running);
        g.record(&status(&g, TaskRole::Worker(1), TaskState::Lost), 100);
        let Health::Failed(f) = g.health(101, 60) else { panic!() };
        assert_eq!(f.reason, ConditionReason::NodeLost);
        assert_eq!(f.lost_node.as_deref(), Some(g.placement.nodes[1].hostname.as_str()));

        // mpirun exits 255 as its ranks on the lost node vanish: the node is the cause.
        let mut g = gang();
        all(&mut g, TaskState::Running);
        let mut s = status(&g, TaskRole::Launcher, TaskState::Failed);
        s.labels = Some(Labels::from_pairs([("mpiswarm.io/exit-code", "255")]));
        g.record(&s, 100);
        g.record(&status(&g, TaskRole::Worker(1), TaskState::Lost), 100);
        let Health::Failed(f) = g.health(101, 60) else { panic!() };
        assert_eq!(f.reason, ConditionReason::NodeLost, "{}", f.message);
        assert_eq!(f.lost_node.as_deref(), Some(g.placement.nodes[1].hostname.as_str()));

        // ... also when mpirun's exit is recorded first and the node's
        // agent reports the loss seconds later, within the settling time.
        let mut g = gang();
        all(&mut g, TaskState::Running);
        let mut s = status(&g, TaskRole::Launcher, TaskState::Failed);
        s.labels = Some(Labels::from_pairs([("mpiswarm.io/exit-code", "255")]));
        g.record(&s, 100);
        assert_eq!(g.health(103, 60), Health::Settling(SETTLE_SECONDS - 3));
        g.record(&status(&g, TaskRole::Worker(1), TaskState::Lost), 104);
        let Health::Failed(f) = g.health(104, 60) else { panic!() };
        assert_eq!(f.reason, ConditionReason::NodeLost, "{}", f.message);

        // When every other task has ended, nothing is left to wait for.
        let mut g = gang();
        all(&mut g, TaskState::Running);
        g.record(&status(&g, TaskRole::Worker(0), TaskState::Killed), 100);
        g.record(&status(&g, TaskRole::Worker(1), TaskState::Killed), 100);
        g.record(&status(&g, TaskRole::Launcher, TaskState::Failed), 100);
        assert!(matches!(g.health(100, 60), Health::Failed(_)));
    }

    #[test]
    fn a_rescinded_offer_does_not_count_against_the_backoff_limit() {
        let f = worker_lost_with(Reason::ReasonInvalidOffers);
        assert_eq!((f.reason, f.counts), (ConditionReason::OfferRescinded, false));
    }

    /// How a gang fails whose worker 0 went LOST with `reason`.
    fn worker_lost_with(reason: Reason) -> Failure {
        let mut g = gang();
        let mut s = status(&g, TaskRole::Worker(0), TaskState::Lost);
        s.reason = Some(reason);
        g.record(&s, 100);
        let Health::Failed(f) = g.health(101, 60) else { panic!("LOST with {reason:?} fails the gang") };
        f
    }

    #[test]
    fn a_launch_refused_by_a_draining_agent_does_not_count_and_a_lost_node_does() {
        let f = worker_lost_with(Reason::ReasonAgentDraining);
        assert_eq!((f.reason, f.counts), (ConditionReason::LaunchDropped, false), "{}", f.message);
        let f = worker_lost_with(Reason::ReasonAgentDisconnected);
        assert_eq!((f.reason, f.counts), (ConditionReason::NodeLost, true), "{}", f.message);
    }

    #[test]
    fn a_launch_that_never_starts_times_out_and_late_updates_do_not_revive_ended_tasks() {
        let mut g = gang();
        all(&mut g, TaskState::Starting);
        let Health::Failed(f) = g.health(160, 60) else { panic!() };
        assert_eq!(f.reason, ConditionReason::LaunchTimeout);
        g.record(&status(&g, TaskRole::Worker(0), TaskState::Killed), 100);
        assert!(!g.record(&status(&g, TaskRole::Worker(0), TaskState::Running), 100));
        assert_eq!(g.live_tasks().count(), 2);
    }
}
