//! The agent's side of keeping Swarm and the framework in agreement: the
//! resync compares every task's service with the state last reported and
//! reports the difference, removes the services of tasks that ended, removes
//! services no task owns once their grace period is over, and collects the
//! networks, secrets and configs nothing references. It never creates
//! anything.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use mpiswarm_mesos::{Reason, TaskState};

use crate::agent::Agent;
use crate::launch;
use crate::locks::lock;
use crate::observe::{self, Observed};
use crate::output::Owner;
use crate::swarm::{Swarm, SwarmError};

/// How often kept output is checked against its retention period.
const OUTPUT_EXPIRY_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

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
        let launching = lock(&self.launching).clone();
        let snapshot: Vec<(String, TaskState, String, Owner)> = {
            let tasks = lock(&self.tasks);
            tasks
                .iter()
                .filter(|(name, t)| !t.killing && !launching.contains(*name) && !t.record.status.state.is_terminal())
                .map(|(name, t)| {
                    let owner = Owner::new(&t.record.framework_id, &t.record.task_info.task_id);
                    (name.clone(), t.record.status.state, t.record.image.clone(), owner)
                })
                .collect()
        };
        let services = self.swarm.services(&agent_id.value).await?;
        let swarm_tasks = self.swarm.tasks(&self.node_id).await?;
        let ids: HashMap<String, String> =
            services.iter().filter_map(|s| Some((s.spec.as_ref()?.name.clone()?, s.id.clone()?))).collect();
        // A task that ended but whose service survived (the agent died
        // between reporting and removing): finish the removal.
        let leftovers: Vec<String> = {
            let tasks = lock(&self.tasks);
            tasks
                .iter()
                .filter(|(name, t)| !t.killing && t.record.status.state.is_terminal() && ids.contains_key(*name))
                .map(|(name, _)| name.clone())
                .collect()
        };
        for name in leftovers {
            if self.swarm.remove_service(&name).await.is_ok() {
                *lock(&self.gc_pending) = true;
            }
        }
        for (name, last, image, owner) in snapshot {
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
                self.finish_output(&name, owner).await;
                if observed.wants_logs {
                    match self.swarm.logs_tail(&name, self.config.log_lines).await {
                        Ok(logs) if !logs.trim().is_empty() => {
                            observed.message = format!("{}; last log lines:\n{}", observed.message, logs.trim_end());
                        }
                        Ok(_) => {}
                        Err(e) => tracing::debug!(error = %e, "no logs"),
                    }
                }
                if !self.transition_from(&name, last, observed) {
                    continue;
                }
                if let Err(e) = self.swarm.remove_service(&name).await {
                    tracing::warn!(service = name, error = %e, "could not remove a finished service");
                }
                *lock(&self.gc_pending) = true;
            } else {
                self.transition_from(&name, last, observed);
            }
        }
        self.collect_orphans(&services, &launching).await;
        if *lock(&self.gc_pending) {
            self.collect_garbage().await;
        }
        self.follow_live_outputs();
        let expire_now = {
            let mut last = lock(&self.last_output_expiry);
            let due = last.is_none_or(|at| at.elapsed() >= OUTPUT_EXPIRY_EVERY);
            if due {
                *last = Some(Instant::now());
            }
            due
        };
        if expire_now {
            self.expire_outputs().await;
        }
        Ok(())
    }

    async fn collect_orphans(&self, services: &[bollard::models::Service], launching: &HashSet<String>) {
        let known: HashSet<String> = lock(&self.tasks).keys().cloned().collect();
        let now = Instant::now();
        let mut expired = Vec::new();
        {
            let mut orphans = lock(&self.orphans);
            let present: HashSet<String> = services.iter().filter_map(|s| s.spec.as_ref()?.name.clone()).collect();
            orphans.retain(|name, _| present.contains(name) && !known.contains(name));
            for name in present {
                if known.contains(&name) || launching.contains(&name) {
                    continue;
                }
                let since = *orphans.entry(name.clone()).or_insert(now);
                if now.duration_since(since) >= self.config.orphan_grace {
                    expired.push(name);
                }
            }
        }
        for name in expired {
            tracing::warn!(service = name, "removing a service no task owns (orphan past its grace period)");
            if self.swarm.remove_service(&name).await.is_ok() {
                self.counters.orphans_removed.inc();
                lock(&self.orphans).remove(&name);
                *lock(&self.gc_pending) = true;
            }
        }
    }

    pub(crate) async fn collect_garbage(&self) {
        let Some(agent_id) = self.agent_id() else { return };
        let _objects = self.objects.lock().await;
        *lock(&self.gc_pending) = false;
        match launch::collect_garbage(&self.swarm, &agent_id.value).await {
            Ok(collected) => {
                if !collected.removed.is_empty() {
                    self.counters.objects_removed.inc_by(collected.removed.len() as u64);
                    tracing::info!(removed = ?collected.removed, "removed unused swarm objects");
                }
                if collected.busy > 0 {
                    *lock(&self.gc_pending) = true;
                }
            }
            Err(e) => {
                *lock(&self.gc_pending) = true;
                tracing::warn!(error = %e, "garbage collection failed; retrying at the next resync");
            }
        }
    }
}
