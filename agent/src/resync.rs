//! The agent's side of keeping Swarm and the framework in agreement: the
//! resync compares every task's service with the state last reported and
//! reports the difference, removes the services of tasks that ended, removes
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
        for task in snapshot {
            let (name, last, image) = (task.service, task.state, task.image);
            let owner = Owner::new(&task.framework_id, &task.task_id);
            let mut observed = match ids.get(&name) {
                None => Observed {
                    reason: Some(Reason::ReasonContainerLaunchFailed),
                    ..Observed::simple(TaskState::Lost, format!("service {name} was removed outside the agent"))
                },
                Some(id) => {
                    let mine: Vec<_> =
                        swarm_tasks.iter().filter(|t| t.service_id.as_deref() == Some(id.as_str())).cloned().collect();
                    match observe::newest(&mine) {
                        None => Observed::simple(TaskState::Starting, "waiting for swarm to schedule the task"),
                        Some(t) => observe::observe(t, &image),
                    }
                }
            };
            if observed.state == last {
                continue;
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
                if !self.tasks.transition_from(&name, last, observed) {
                    continue;
                }
                if let Err(e) = self.swarm.remove_service(&name).await {
                    tracing::warn!(service = name, error = %e, "could not remove a finished service");
                }
                self.objects.collect_later();
            } else {
                self.tasks.transition_from(&name, last, observed);
            }
        }
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
            Ok(collected) => {
                if !collected.removed.is_empty() {
                    self.counters.objects_removed.inc_by(collected.removed.len() as u64);
                    tracing::info!(removed = ?collected.removed, "removed unused swarm objects");
                }
            }
            Err(e) => tracing::warn!(error = %e, "garbage collection failed; retrying at the next resync"),
        }
    }
}
