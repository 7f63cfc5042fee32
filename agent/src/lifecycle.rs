//! A task's life on this agent as the framework drives it: LAUNCH (a group
//! starts whole or not at all), KILL (the service is removed, then
//! TASK_KILLED), and ACKNOWLEDGED (a terminal task is forgotten). Swarm work
//! goes through [`crate::launch::Objects`]; states and statuses through the
//! task table ([`crate::tasks`]); output through [`crate::output`].

use std::sync::Arc;

use mpiswarm_mesos::framework::CapabilityType;
use mpiswarm_mesos::{
    Bytes, ExecutorInfo, FrameworkId, FrameworkInfo, Reason, TaskId, TaskInfo, TaskState, TaskStatus,
};

use crate::agent::Agent;
use crate::launch::{LaunchFailure, VolumeRules};
use crate::observe::Observed;
use crate::output::Owner;
use crate::plan::{self, LaunchContext, TaskPlan};
use crate::store::TaskRecord;
use crate::swarm::Swarm;
use crate::tasks::{KillStart, LaunchStart};

impl<S: Swarm + 'static> Agent<S> {
    /// LAUNCH (one task) and LAUNCH_GROUP: all tasks start, or none does.
    pub async fn launch(
        self: &Arc<Self>,
        framework_id: FrameworkId,
        framework_info: &FrameworkInfo,
        executor: Option<ExecutorInfo>,
        tasks: Vec<TaskInfo>,
    ) {
        let Some(agent_id) = self.agent_id() else {
            tracing::error!("LAUNCH before SUBSCRIBED; ignoring");
            return;
        };
        let role = framework_info.roles.first().cloned().or_else(|| framework_info.role.clone());
        let executor_id = executor.as_ref().map(|e| e.executor_id.clone());
        // A node whose loss is confirmed starts nothing until it is ready
        // again. Its resources are offered until the agent has withdrawn, so
        // a launch can still come: it is dropped at once, as a draining Mesos
        // agent drops it (REASON_AGENT_DRAINING: nothing started, a framework
        // places it again), not reported as a task that ran and was lost.
        if let Some(why) = self.node.outage() {
            let state = if framework_info.has_capability(CapabilityType::PartitionAware) {
                TaskState::Dropped
            } else {
                TaskState::Lost
            };
            tracing::warn!(tasks = tasks.len(), "{why}: launch dropped");
            self.counters.refused.inc();
            for task in &tasks {
                let message = format!("not launched, the node is lost: {why}");
                let reason = Reason::ReasonAgentDraining;
                self.tasks.send_untracked(&framework_id, &task.task_id, executor_id.as_ref(), state, reason, message);
            }
            return;
        }
        // Planning resolves host paths on disk: off this worker.
        let plans = {
            let (tasks, agent_id, framework_id, role, executor_id) =
                (tasks.clone(), agent_id.clone(), framework_id.clone(), role.clone(), executor_id.clone());
            let host_paths = self.config.host_paths.clone();
            let volume_options = self.config.volume_options.clone();
            tokio::task::spawn_blocking(move || {
                let ctx = LaunchContext {
                    agent_id: &agent_id.value,
                    framework_id: &framework_id,
                    framework_role: role.as_deref(),
                    executor_id: executor_id.as_ref(),
                    host_paths: &host_paths,
                    volume_options: &volume_options,
                };
                tasks.iter().map(|t| TaskPlan::from_task_info(t, &ctx)).collect::<Result<Vec<TaskPlan>, _>>()
            })
            .await
        };
        let plans = match plans {
            Ok(plans) => plans,
            // A panic while planning is this task's panic (the watchdog ends the process).
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // Cancelled: the runtime is shutting down.
            Err(_) => return,
        };
        let plans = match plans {
            Ok(p) => p,
            Err(invalid) => {
                tracing::warn!(error = %invalid, "refusing task group");
                self.counters.refused.inc();
                let ends = group_ends(
                    &tasks,
                    &invalid.task_id,
                    (TaskState::Error, Reason::ReasonTaskInvalid, invalid.to_string()),
                    (Reason::ReasonTaskGroupInvalid, format!("not launched because its group is invalid: {invalid}")),
                );
                for (task_id, state, reason, message) in ends {
                    self.tasks.send_untracked(&framework_id, &task_id, executor_id.as_ref(), state, reason, message);
                }
                return;
            }
        };
        let names: Vec<String> = plans.iter().map(|p| p.service_name.clone()).collect();
        // What the table tracks once each service exists; until then a
        // SUBSCRIBE reports each as TASK_STAGING.
        let records: Vec<TaskRecord> = plans
            .iter()
            .zip(&tasks)
            .map(|(plan, task)| TaskRecord {
                framework_id: framework_id.clone(),
                framework_role: role.clone(),
                executor_info: executor.clone(),
                task_info: task.clone(),
                service_name: plan.service_name.clone(),
                image: plan.image.clone(),
                status: TaskStatus::new(task.task_id.clone(), TaskState::Staging),
                acknowledged: false,
            })
            .collect();
        let group = records.iter().map(|r| (r.service_name.clone(), crate::tasks::staging(r))).collect();
        // Duplicate launches (a retried ACCEPT) re-report instead of relaunching.
        match self.tasks.begin_launch(group) {
            LaunchStart::Go => {}
            LaunchStart::Known(existing) => {
                tracing::warn!(task = %existing.status.task_id, "task already known; re-sending its status");
                self.tasks.resend(*existing);
                return;
            }
            LaunchStart::InFlight(service) => {
                tracing::warn!(service, "task already being launched; its launch reports it");
                return;
            }
        }
        let volumes = VolumeRules { allowed: &self.config.volume_options, trusted: &self.config.trusted_volumes };
        let result = self.objects.launch(&*self.swarm, &self.node_id, &agent_id.value, &plans, volumes).await;
        match result {
            Ok(()) => {
                for record in records {
                    let (service, task_id) = (record.service_name.clone(), record.task_info.task_id.clone());
                    let created = format!("service {service} created");
                    self.tasks.launched(record, Observed::simple(TaskState::Starting, created));
                    self.outputs.follow(&service, Owner::new(&framework_id, &task_id));
                }
                tracing::info!(services = ?names, "launched");
                self.counters.launched.inc_by(plans.len() as u64);
            }
            Err(LaunchFailure { task_id, source }) => {
                tracing::warn!(%task_id, error = %source, "launch failed; the group is rolled back");
                self.counters.launch_failures.inc();
                let ends = group_ends(
                    &tasks,
                    &task_id,
                    (TaskState::Failed, Reason::ReasonContainerLaunchFailed, source.to_string()),
                    (
                        Reason::ReasonTaskKilledDuringLaunch,
                        format!("not launched because task '{task_id}' of its group failed: {source}"),
                    ),
                );
                for (task_id, state, reason, message) in ends {
                    self.tasks.send_untracked(&framework_id, &task_id, executor_id.as_ref(), state, reason, message);
                }
            }
        }
        let killed = self.tasks.end_launch(&names);
        for name in killed {
            self.kill_service(&name).await;
        }
    }

    /// KILL: remove the service; TASK_KILLED once it is gone.
    pub async fn kill_task(self: &Arc<Self>, framework_id: &FrameworkId, task_id: &TaskId) {
        let name = plan::service_name(framework_id, task_id);
        match self.tasks.begin_kill(&name) {
            // The launch runs the KILL when it ends.
            KillStart::Deferred => {}
            KillStart::Unknown => {
                // A task already forgotten may still have output kept: a KILL
                // means its job is gone, and the output goes with it.
                self.outputs.remove(Owner::new(framework_id, task_id));
                self.tasks.send_untracked(
                    framework_id,
                    task_id,
                    None,
                    TaskState::Lost,
                    Reason::ReasonTaskUnknown,
                    format!("task '{task_id}' is not known on this agent"),
                );
            }
            // Already over: the framework gets the terminal state again.
            KillStart::Ended(status) => self.tasks.resend(*status),
            KillStart::Live => self.remove_killed(&name).await,
        }
    }

    /// Kills a launched task whose KILL came while it was being launched.
    async fn kill_service(self: &Arc<Self>, name: &str) {
        if let KillStart::Live = self.tasks.begin_kill(name) {
            self.remove_killed(name).await;
        }
    }

    /// Removes the service of a task marked as being killed; TASK_KILLED
    /// once it is gone.
    async fn remove_killed(self: &Arc<Self>, name: &str) {
        // No TASK_KILLING: Mesos sends it only to frameworks with the
        // TASK_KILLING_STATE capability, and the kill is quick here.
        // TASK_KILLED once Swarm is done: the service, its containers and,
        // for the node's last task of a job, the job's objects are gone.
        match self.remove_service(name).await {
            Ok(()) => {
                self.tasks.transition(name, Observed::simple(TaskState::Killed, "killed: service removed"));
                self.outputs.stop(name).await;
                self.tasks.end_kill(name);
            }
            Err(e) => {
                tracing::error!(service = name, error = %e, "could not remove service");
                self.tasks.end_kill(name);
            }
        }
    }

    pub(crate) fn acknowledged(&self, framework_id: &FrameworkId, task_id: &TaskId, uuid: &Bytes) {
        let name = plan::service_name(framework_id, task_id);
        if let Some(ended) = self.tasks.acknowledged(&name, uuid)
            && crate::output::dropped_at_acknowledgement(ended)
        {
            self.outputs.remove(Owner::new(framework_id, task_id));
        }
    }
}

/// The ends of a group that does not start: `culprit` gets `culprit_end`,
/// every other task TASK_KILLED with `others`' reason and message.
pub(crate) fn group_ends(
    tasks: &[TaskInfo],
    culprit: &str,
    culprit_end: (TaskState, Reason, String),
    others: (Reason, String),
) -> Vec<(TaskId, TaskState, Reason, String)> {
    tasks
        .iter()
        .map(|t| {
            let (state, reason, message) = if t.task_id.value == culprit {
                culprit_end.clone()
            } else {
                (TaskState::Killed, others.0, others.1.clone())
            };
            (t.task_id.clone(), state, reason, message)
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::agent::Outgoing;
    use crate::fake_swarm::FakeSwarm;
    use crate::store::Store;
    use mpiswarm_mesos::{AgentId, CommandInfo, ContainerInfo};
    use tokio::sync::mpsc;

    /// An agent over a fake swarm, its statuses, and its data directory.
    pub(crate) struct Fixture {
        pub(crate) agent: Arc<Agent<FakeSwarm>>,
        pub(crate) statuses: mpsc::UnboundedReceiver<Outgoing>,
        pub(crate) dir: tempfile::TempDir,
    }

    pub(crate) fn agent(swarm: FakeSwarm) -> Fixture {
        agent_with(swarm, crate::agent::AgentConfig::default())
    }

    pub(crate) fn agent_with(swarm: FakeSwarm, config: crate::agent::AgentConfig) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.save_agent_id(&AgentId::new("A")).unwrap();
        let (spawner, _failures) = crate::watchdog::watchdog();
        let (agent, statuses) = Agent::new(swarm, "node".into(), store, config, spawner).unwrap();
        Fixture { agent, statuses, dir }
    }

    pub(crate) fn task(id: &str) -> TaskInfo {
        let mut t = TaskInfo::new(id, id, &AgentId::new("A"));
        t.command = Some(CommandInfo::shell("sleep 100"));
        t.container = Some(ContainerInfo::docker("img"));
        t
    }

    pub(crate) fn fw() -> (FrameworkId, FrameworkInfo) {
        (FrameworkId::new("F"), FrameworkInfo::new("root", "fw", &["mpi"]))
    }

    fn ends(rx: &mut mpsc::UnboundedReceiver<Outgoing>) -> Vec<(String, TaskState, Option<Reason>)> {
        std::iter::from_fn(|| rx.try_recv().ok())
            .map(|o| (o.status.task_id.value, o.status.state, o.status.reason))
            .collect()
    }

    #[tokio::test]
    async fn a_group_starts_whole_is_recorded_and_a_kill_then_ack_forgets_it() {
        let mut f = agent(FakeSwarm::default());
        let (id, info) = fw();
        f.agent.launch(id.clone(), &info, None, vec![task("t1"), task("t2")]).await;
        assert_eq!(
            ends(&mut f.statuses),
            vec![("t1".into(), TaskState::Starting, None), ("t2".into(), TaskState::Starting, None)]
        );
        f.agent.flush().await;
        assert_eq!(Store::open(f.dir.path()).unwrap().tasks().unwrap().len(), 2, "both records are on disk");

        f.agent.kill_task(&id, &TaskId::new("t1")).await;
        let killed = f.statuses.try_recv().unwrap().status;
        assert_eq!(killed.state, TaskState::Killed);
        let services: Vec<_> = f.agent.swarm.names().into_iter().filter(|(k, _)| k == "service").collect();
        assert_eq!(services.len(), 1, "t1's service is gone: {services:?}");
        f.agent.acknowledged(&id, &TaskId::new("t1"), killed.uuid.as_ref().unwrap());
        f.agent.flush().await;
        let left: Vec<_> = Store::open(f.dir.path())
            .unwrap()
            .tasks()
            .unwrap()
            .into_iter()
            .map(|r| r.task_info.task_id.value)
            .collect();
        assert_eq!(left, vec!["t2"]);
        assert_eq!(f.agent.snapshot().len(), 1);
    }

    #[tokio::test]
    async fn an_invalid_task_refuses_its_group_and_nothing_is_created() {
        let mut f = agent(FakeSwarm::default());
        let mut bad = task("bad");
        bad.container = None;
        let (id, info) = fw();
        f.agent.launch(id, &info, None, vec![task("ok"), bad]).await;
        assert_eq!(
            ends(&mut f.statuses),
            vec![
                ("ok".into(), TaskState::Killed, Some(Reason::ReasonTaskGroupInvalid)),
                ("bad".into(), TaskState::Error, Some(Reason::ReasonTaskInvalid)),
            ]
        );
        assert!(f.agent.swarm.names().is_empty());
        assert!(f.agent.snapshot().is_empty());
    }

    #[tokio::test]
    async fn a_service_swarm_refuses_fails_its_task_and_kills_the_rest_of_the_group() {
        let (id, info) = fw();
        let refused = plan::service_name(&id, &TaskId::new("t2"));
        let mut f = agent(FakeSwarm { refuse_service: Some(refused), ..FakeSwarm::default() });
        f.agent.launch(id, &info, None, vec![task("t1"), task("t2")]).await;
        assert_eq!(
            ends(&mut f.statuses),
            vec![
                ("t1".into(), TaskState::Killed, Some(Reason::ReasonTaskKilledDuringLaunch)),
                ("t2".into(), TaskState::Failed, Some(Reason::ReasonContainerLaunchFailed)),
            ]
        );
        assert!(f.agent.swarm.names().iter().all(|(k, _)| k != "service"), "{:?}", f.agent.swarm.names());
    }

    #[test]
    fn the_culprit_gets_its_own_end_and_the_others_are_killed() {
        let tasks = [task("a"), task("b"), task("c")];
        let got = group_ends(
            &tasks,
            "b",
            (TaskState::Error, Reason::ReasonTaskInvalid, "bad".into()),
            (Reason::ReasonTaskGroupInvalid, "group".into()),
        );
        let got: Vec<_> = got.into_iter().map(|(t, s, r, m)| (t.value, s, r, m)).collect();
        assert_eq!(
            got,
            vec![
                ("a".into(), TaskState::Killed, Reason::ReasonTaskGroupInvalid, "group".into()),
                ("b".into(), TaskState::Error, Reason::ReasonTaskInvalid, "bad".into()),
                ("c".into(), TaskState::Killed, Reason::ReasonTaskGroupInvalid, "group".into()),
            ]
        );
    }
}
