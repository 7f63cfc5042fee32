//! The agent's side of keeping Swarm and the framework in agreement: the
//! resync compares every task's service with the state last reported and
//! reports the difference (a task the engine could not start is started
//! again first, [`crate::start_retries`]), removes the services of tasks that ended, removes
//! services no task owns once their grace period is over, and collects the
//! networks, secrets and configs nothing references. It never creates
//! anything, and reaches the agent's state only through its parts.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use mpiswarm_mesos::{Reason, TaskState};

use crate::agent::Agent;
use crate::observe::{self, Observed};
use crate::output::Owner;
use crate::start_retries::Next;
use crate::swarm::{Swarm, SwarmError};

impl<S: Swarm + 'static> Agent<S> {
    /// Compares every task's service with what the framework last heard,
    /// reports changes, removes finished services, adopts nothing unknown
    /// until its grace period ends (then removes it), and collects garbage.
    pub async fn resync(self: &Arc<Self>) -> Result<(), SwarmError> {
        let Some(agent_id) = self.agent_id() else { return Ok(()) };
        self.counters.resyncs.inc();
        // What to check is fixed before Swarm is asked: every task in the
        // snapshot had its service created before the listing below, so a
        // missing service really is missing.
        let launching = self.tasks.launching();
        let snapshot = self.tasks.live(false);
        let services = self.swarm.services(&agent_id.value).await?;
        let swarm_tasks = self.swarm.tasks(&self.node_id).await?;
        let ids: HashMap<String, String> =
            services.iter().filter_map(|s| Some((s.spec.as_ref()?.name.clone()?, s.id.clone()?))).collect();
        // A task that ended but whose service survived (the agent died
        // between reporting and removing): finish the removal.
        let leftovers = self.tasks.ended_with_service(|name| ids.contains_key(name));
        for name in leftovers {
            if self.swarm.remove_service(&name).await.is_ok() {
                self.objects.collect_later();
            }
        }
        let mut endings = Vec::new();
        for task in snapshot {
            let (name, last, image) = (task.service, task.state, task.image);
            let owner = Owner::new(&task.framework_id, &task.task_id);
            let (mut observed, current) = match ids.get(&name) {
                None => (
                    Observed {
                        reason: Some(Reason::ReasonContainerLaunchFailed),
                        ..Observed::simple(TaskState::Lost, format!("service {name} was removed outside the agent"))
                    },
                    None,
                ),
                Some(id) => {
                    // A start that failed and was made again is not the task's state.
                    let mine: Vec<_> = swarm_tasks
                        .iter()
                        .filter(|t| t.service_id.as_deref() == Some(id.as_str()))
                        .filter(|t| !self.retries.superseded(&name, t.id.as_deref().unwrap_or_default()))
                        .cloned()
                        .collect();
                    match observe::newest(&mine) {
                        None => (Observed::simple(TaskState::Starting, "waiting for swarm to schedule the task"), None),
                        Some(t) => (observe::observe(t, &image), t.id.clone()),
                    }
                }
            };
            if observed.state == last {
                continue;
            }
            if let (true, Some(swarm_task)) = (observed.retryable, &current) {
                match self.retries.failed(&name, swarm_task) {
                    Next::Restart { attempt, of } => {
                        tracing::warn!(service = name, attempt, of, reason = %observed.message, "the engine could not start the task; starting it again");
                        match self.swarm.restart_service(&name).await {
                            Ok(()) => {
                                self.counters.start_retries.inc();
                                continue;
                            }
                            Err(e) => {
                                tracing::warn!(service = name, error = %e, "could not start the task again; reporting its failure");
                                self.retries.restart_refused(&name, swarm_task);
                            }
                        }
                    }
                    Next::Report { attempts } => {
                        if attempts > 1 {
                            observed.message = format!("after {attempts} attempts, {}", observed.message);
                        }
                    }
                }
            }
            if observed.state.is_terminal() {
                // All of the output reaches the sandbox before the service goes.
                self.outputs.finish(&name, owner).await;
                if observed.wants_logs {
                    match self.swarm.logs_tail(&name, self.config.log_lines).await {
                        Ok(logs) if !logs.trim().is_empty() => {
                            observed.message = format!("{}; last log lines:\n{}", observed.message, logs.trim_end());
                        }
                        Ok(_) => {}
                        Err(e) => tracing::debug!(error = %e, "no logs"),
                    }
                }
                // The framework hears of the end once Swarm is done with
                // the service; the removals of one pass run side by side.
                if self.tasks.begin_end(&name, last) {
                    endings.push(self.end_task(name, observed));
                }
            } else {
                self.tasks.transition_from(&name, last, observed);
            }
        }
        futures::future::join_all(endings).await;
        let tracked = self.tasks.services();
        self.retries.retain(|name| tracked.contains(name));
        self.collect_orphans(&services, &launching).await;
        if self.objects.due() {
            self.collect_garbage().await;
        }
        let live = self.tasks.live(true).into_iter().map(|t| {
            let owner = Owner::new(&t.framework_id, &t.task_id);
            (t.service, owner)
        });
        self.outputs.follow_all(live);
        self.outputs.expire_if_due(|| self.tasks.owners()).await;
        Ok(())
    }

    async fn collect_orphans(&self, services: &[bollard::models::Service], launching: &HashSet<String>) {
        let present: HashSet<String> = services.iter().filter_map(|s| s.spec.as_ref()?.name.clone()).collect();
        // Fixed before the orphans are looked at: no part's lock is taken under another's.
        let known = self.tasks.services();
        let owned = |name: &str| known.contains(name) || launching.contains(name);
        let expired = self.orphans.expired(present, owned, Instant::now());
        for name in expired {
            tracing::warn!(service = name, "removing a service no task owns (orphan past its grace period)");
            if self.swarm.remove_service(&name).await.is_ok() {
                self.counters.orphans_removed.inc();
                self.orphans.removed(&name);
                self.objects.collect_later();
            }
        }
    }

    pub(crate) async fn collect_garbage(&self) {
        let Some(agent_id) = self.agent_id() else { return };
        match self.objects.collect(&*self.swarm, &agent_id.value).await {
            Ok(collected) => self.removed_objects(&collected.removed),
            Err(e) => tracing::warn!(error = %e, "garbage collection failed; retrying at the next resync"),
        }
    }

    /// Ends a task whose end [`crate::tasks::TaskTable::begin_end`] claimed:
    /// removes its service, reports `observed` once Swarm is done with it (a
    /// KILL that came meanwhile reported TASK_KILLED first; then nothing
    /// more is), and releases the claim.
    async fn end_task(&self, name: String, observed: Observed) {
        if let Err(e) = self.remove_service(&name).await {
            tracing::warn!(service = name, error = %e, "could not remove a finished service");
        }
        self.tasks.transition(&name, observed);
        self.tasks.end_kill(&name);
    }

    /// Removes a task's service and returns once Swarm is done with it (see
    /// [`crate::launch::Objects::remove_service`]).
    pub(crate) async fn remove_service(&self, name: &str) -> Result<(), SwarmError> {
        let Some(agent_id) = self.agent_id() else { return self.swarm.remove_service(name).await };
        let removed = self.objects.remove_service(&*self.swarm, &self.node_id, &agent_id.value, name).await?;
        self.removed_objects(&removed);
        Ok(())
    }

    fn removed_objects(&self, removed: &[String]) {
        if !removed.is_empty() {
            self.counters.objects_removed.inc_by(removed.len() as u64);
            tracing::info!(?removed, "removed unused swarm objects");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::Outgoing;
    use crate::fake_swarm::{FakeSwarm, swarm_task};
    use crate::lifecycle::tests::{Fixture, agent, fw, task};
    use bollard::models::TaskState as SwarmState;
    use tokio::sync::mpsc::UnboundedReceiver;

    const BUSY: &str = "starting container failed: error mounting \"/var/lib/docker/x\": unable to remount dir as readonly: device or resource busy";

    fn reported(rx: &mut UnboundedReceiver<Outgoing>) -> Vec<(TaskState, Option<Reason>, String)> {
        std::iter::from_fn(|| rx.try_recv().ok())
            .map(|o| (o.status.state, o.status.reason, o.status.message.unwrap_or_default()))
            .collect()
    }

    /// An agent with task `t1` launched (its STARTING taken) and its service's name.
    async fn launched(swarm: FakeSwarm) -> (Fixture, String) {
        let mut f = agent(swarm);
        let (id, info) = fw();
        f.agent.launch(id, &info, None, vec![task("t1")]).await;
        assert_eq!(reported(&mut f.statuses).len(), 1, "STARTING");
        let service = f.agent.snapshot()[0].0.clone();
        (f, service)
    }

    /// Sets the newest Swarm task of the fake to `state` with `err`.
    fn newest_is(f: &Fixture, state: SwarmState, err: &str) {
        let mut tasks = f.agent.swarm.swarm_tasks.lock().unwrap();
        let newest = tasks.iter_mut().max_by_key(|t| t.version.as_ref().and_then(|v| v.index)).unwrap();
        let status = newest.status.get_or_insert_with(Default::default);
        (status.state, status.err) = (Some(state), (!err.is_empty()).then(|| err.to_owned()));
    }

    #[tokio::test]
    async fn a_start_the_engine_failed_is_made_again_and_the_new_task_is_the_one_reported() {
        let (mut f, service) = launched(FakeSwarm::default()).await;
        f.agent.swarm.swarm_tasks.lock().unwrap().push(swarm_task(&service, 1, SwarmState::FAILED, BUSY));
        f.agent.resync().await.unwrap();
        assert_eq!(reported(&mut f.statuses), vec![], "no failure reported while another start may succeed");
        assert_eq!(*f.agent.swarm.restarted.lock().unwrap(), vec![service.clone()]);
        assert_eq!(f.agent.counters.start_retries.get(), 1);
        // Swarm marks the old task for shutdown after it made the new one,
        // so the old one's version is the higher: it must still not count.
        f.agent.swarm.swarm_tasks.lock().unwrap()[0].version = Some(bollard::models::ObjectVersion { index: Some(9) });
        f.agent.resync().await.unwrap();
        assert_eq!(reported(&mut f.statuses), vec![], "the new task is starting, as the task already was");
        {
            let mut tasks = f.agent.swarm.swarm_tasks.lock().unwrap();
            tasks[1].status.get_or_insert_with(Default::default).state = Some(SwarmState::RUNNING);
        }
        f.agent.resync().await.unwrap();
        let states: Vec<_> = reported(&mut f.statuses).into_iter().map(|(s, ..)| s).collect();
        assert_eq!(states, vec![TaskState::Running]);
        assert_eq!(f.agent.swarm.restarted.lock().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn a_start_that_fails_every_attempt_is_reported_once_naming_the_attempts() {
        let (mut f, service) = launched(FakeSwarm::default()).await;
        f.agent.swarm.swarm_tasks.lock().unwrap().push(swarm_task(&service, 1, SwarmState::FAILED, BUSY));
        for _ in 0..2 {
            f.agent.resync().await.unwrap();
            newest_is(&f, SwarmState::FAILED, BUSY);
        }
        f.agent.resync().await.unwrap();
        let reports = reported(&mut f.statuses);
        assert_eq!(reports.len(), 1, "{reports:?}");
        let (state, reason, message) = &reports[0];
        assert_eq!((*state, *reason), (TaskState::Failed, Some(Reason::ReasonContainerLaunchFailed)));
        assert!(message.starts_with("after 3 attempts, the container did not start"), "{message}");
        assert!(message.contains("device or resource busy"), "{message}");
        assert_eq!(f.agent.swarm.restarted.lock().unwrap().len(), 2, "3 starts in all (the default)");
        f.agent.resync().await.unwrap();
        assert_eq!(reported(&mut f.statuses), vec![], "reported once");
    }

    #[tokio::test]
    async fn a_program_that_exited_and_a_missing_image_are_reported_at_once() {
        for (state, err) in
            [(SwarmState::FAILED, "task: non-zero exit (3)"), (SwarmState::REJECTED, "No such image: img:latest")]
        {
            let (mut f, service) = launched(FakeSwarm::default()).await;
            f.agent.swarm.swarm_tasks.lock().unwrap().push(swarm_task(&service, 1, state, err));
            f.agent.resync().await.unwrap();
            let states: Vec<_> = reported(&mut f.statuses).into_iter().map(|(s, ..)| s).collect();
            assert_eq!(states, vec![TaskState::Failed], "{err}");
            assert!(f.agent.swarm.restarted.lock().unwrap().is_empty(), "{err}");
        }
    }

    #[tokio::test]
    async fn a_restart_swarm_refuses_reports_the_failure_at_once() {
        let (mut f, service) = launched(FakeSwarm { refuse_restart: true, ..FakeSwarm::default() }).await;
        f.agent.swarm.swarm_tasks.lock().unwrap().push(swarm_task(&service, 1, SwarmState::FAILED, BUSY));
        f.agent.resync().await.unwrap();
        let reports = reported(&mut f.statuses);
        assert_eq!(reports.len(), 1, "{reports:?}");
        assert_eq!(reports[0].0, TaskState::Failed);
        assert!(reports[0].2.starts_with("the container did not start"), "{}", reports[0].2);
    }

    #[tokio::test]
    async fn an_ended_task_is_reported_once_swarm_let_its_service_go_and_once_only() {
        let swarm = FakeSwarm { lingering: std::sync::Mutex::new(2), ..FakeSwarm::default() };
        let (mut f, service) = launched(swarm).await;
        f.agent.swarm.swarm_tasks.lock().unwrap().push(swarm_task(&service, 1, SwarmState::COMPLETE, ""));
        // Two passes at once: the second finds the removal under way and leaves it.
        let (a, b) = tokio::join!(f.agent.resync(), f.agent.resync());
        a.unwrap();
        b.unwrap();
        assert_eq!(*f.agent.swarm.lingering.lock().unwrap(), 0, "the end waited while Swarm still held containers");
        let states: Vec<_> = reported(&mut f.statuses).into_iter().map(|(s, ..)| s).collect();
        assert_eq!(states, vec![TaskState::Finished], "reported once, after the service went");
        assert!(!f.agent.swarm.names().iter().any(|(kind, _)| kind == "service"), "{:?}", f.agent.swarm.names());
        f.agent.resync().await.unwrap();
        assert_eq!(reported(&mut f.statuses), vec![]);
    }
}
