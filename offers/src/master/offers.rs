//! Offers: turning allocations into OFFERS events, and what frameworks do
//! with them (ACCEPT with LAUNCH / LAUNCH_GROUP, DECLINE), plus rescinding
//! on timeout. Invalid offers or tasks never produce an HTTP error; they
//! produce TASK_LOST / TASK_ERROR updates, as in Mesos.

use super::books::TaskKey;
use super::{ExecutorEntry, Master, OfferEntry, Task};
use mpiswarm_mesos::offer::OperationType;
use mpiswarm_mesos::quantities::Quantities;
use mpiswarm_mesos::resources::AllocationInfo;
use mpiswarm_mesos::scheduler::{Accept, Decline, Event};
use mpiswarm_mesos::{
    AgentId, ExecutorInfo, Filters, FrameworkId, Offer, OfferId, Reason, Resource, TaskInfo, TaskState, TaskStatus,
    agent_api,
};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// What a task group's executor (if new on the agent) and each task use.
type GroupResources = (Quantities, Vec<Quantities>);

fn refuse_duration(filters: Option<&Filters>) -> Duration {
    Duration::from_secs_f64(Filters::effective_refuse_seconds(filters))
}

impl Master {
    /// Runs the allocator and sends the resulting offers.
    pub fn allocate(&mut self, now: Duration, agents: Option<&[String]>) {
        if self.is_fenced(now) {
            return;
        }
        let span = tracing::debug_span!("allocation_cycle", agents = agents.map_or(0, <[String]>::len));
        let _entered = span.enter();
        let started = std::time::Instant::now();
        self.mark_backlogs();
        let allocations = self.allocator.allocate(now, agents);
        tracing::debug!(allocations = allocations.len(), elapsed = ?started.elapsed(), "allocation cycle");
        self.counters.allocation_runs += 1;
        self.counters.allocation_seconds_total += started.elapsed().as_secs_f64();
        // A run over some agents (one that subscribed or caught up) does
        // not put off the batch run over all of them.
        if agents.is_none() {
            self.last_allocation = now;
        }
        let mut by_framework: BTreeMap<String, Vec<Offer>> = BTreeMap::new();
        for a in allocations {
            // Taken first (ids are cheap): one goes unused when the allocation goes back.
            let id = self.next_id("O");
            let connected = self.frameworks.get(&a.framework).filter(|f| f.conn.is_some());
            let (Some(framework), Some(agent)) = (connected, self.agents.get(&a.agent)) else {
                self.allocator.recover(&a.framework, &a.role, &a.agent, &a.resources, None, now);
                continue;
            };
            let multi_role = framework.multi_role();
            let role_tag = multi_role.then_some(a.role.as_str());
            let executor_ids = self
                .executors
                .keys()
                .filter(|(ag, fw, _)| *ag == a.agent && *fw == a.framework)
                .map(|(_, _, e)| mpiswarm_mesos::ExecutorId::new(e))
                .collect();
            let offer = Offer {
                id: OfferId::new(&id),
                framework_id: FrameworkId::new(&a.framework),
                agent_id: agent.id.clone(),
                hostname: agent.info.hostname.clone(),
                url: agent.url(),
                domain: None,
                resources: a.resources.to_resources(role_tag),
                attributes: agent.info.attributes.clone(),
                executor_ids,
                unavailability: None,
                allocation_info: multi_role.then(|| AllocationInfo { role: Some(a.role.clone()) }),
            };
            self.offers.insert(
                id,
                OfferEntry {
                    framework: a.framework.clone(),
                    role: a.role,
                    agent: a.agent,
                    resources: a.resources,
                    created: now,
                },
            );
            by_framework.entry(a.framework).or_default().push(offer);
        }
        for (fw, offers) in by_framework {
            self.offered(offers.len(), now);
            if let Some(f) = self.frameworks.get(&fw) {
                f.send(&Event::offers(offers));
            }
        }
    }

    /// Removes an offer and gives its resources back (with a filter when
    /// `refuse` is set); with `rescind` the framework is told.
    pub(super) fn discard_offer(&mut self, id: &str, refuse: Option<Duration>, now: Duration, rescind: bool) {
        let Some(o) = self.offers.remove(id) else { return };
        self.allocator.recover(&o.framework, &o.role, &o.agent, &o.resources, refuse, now);
        if rescind {
            self.counters.offers_rescinded += 1;
            if let Some(f) = self.frameworks.get(&o.framework) {
                f.send(&Event::rescind(OfferId::new(id)));
            }
        }
    }

    /// Discards (without filters) every offer for which `which` holds.
    pub(super) fn discard_offers(&mut self, which: impl Fn(&OfferEntry) -> bool, now: Duration, rescind: bool) {
        let ids: Vec<String> = self.offers.iter().filter(|(_, o)| which(o)).map(|(k, _)| k.clone()).collect();
        for id in ids {
            self.discard_offer(&id, None, now, rescind);
        }
    }

    pub(super) fn expire_offers(&mut self, now: Duration) {
        let Some(timeout) = self.config.offer_timeout else { return };
        let expired: Vec<String> = self
            .offers
            .iter()
            .filter(|(_, o)| now.saturating_sub(o.created) >= timeout)
            .map(|(k, _)| k.clone())
            .collect();
        for id in expired {
            tracing::debug!(offer = %id, "offer timed out; rescinding");
            self.discard_offer(&id, None, now, true);
        }
    }

    pub(super) fn decline(&mut self, fw: &str, decline: Decline, now: Duration) {
        let refuse = refuse_duration(decline.filters.as_ref());
        for id in decline.offer_ids {
            // Unknown or foreign offers are ignored, as in Mesos.
            if self.offers.get(&id.value).is_some_and(|o| o.framework == fw) {
                self.counters.offers_declined += 1;
                self.discard_offer(&id.value, Some(refuse), now, false);
            }
        }
    }

    fn tasks_of(accept: &Accept) -> Vec<&TaskInfo> {
        accept
            .operations
            .iter()
            .flat_map(|op| {
                let launch = op.launch.iter().flat_map(|l| l.task_infos.iter());
                let group = op.launch_group.iter().flat_map(|g| g.task_group.tasks.iter());
                launch.chain(group)
            })
            .collect()
    }

    /// Checks the offers of an ACCEPT: all known, all this framework's, all
    /// on one agent and for one role.
    fn validate_offers(&self, fw: &str, offer_ids: &[OfferId]) -> Result<(String, String), String> {
        let mut seen = std::collections::HashSet::new();
        let mut target: Option<(String, String)> = None;
        for id in offer_ids {
            if !seen.insert(&id.value) {
                return Err(format!("Offer {id} appears more than once"));
            }
            let o = self.offers.get(&id.value).ok_or_else(|| format!("Offer {id} is no longer valid"))?;
            if o.framework != fw {
                return Err(format!("Offer {id} has invalid framework"));
            }
            match &target {
                None => target = Some((o.agent.clone(), o.role.clone())),
                Some((agent, _)) if *agent != o.agent => {
                    return Err(format!("Aggregated offers must belong to one single agent; offer {id} does not"));
                }
                Some((_, role)) if *role != o.role => {
                    return Err(format!("Aggregated offers must be for one single role; offer {id} is not"));
                }
                Some(_) => {}
            }
        }
        let Some((agent, role)) = target else { return Err("No offers specified".into()) };
        if self.agents.get(&agent).is_none_or(|a| a.conn.is_none()) {
            return Err(format!("Agent {agent} is not connected"));
        }
        Ok((agent, role))
    }

    pub(super) fn accept(&mut self, fw: &str, accept: Accept, now: Duration) {
        let span = tracing::info_span!("accept", framework = fw, offers = accept.offer_ids.len());
        let _entered = span.enter();
        let (agent, role) = match self.validate_offers(fw, &accept.offer_ids) {
            Ok(target) => target,
            Err(error) => {
                for id in &accept.offer_ids {
                    if self.offers.get(&id.value).is_some_and(|o| o.framework == fw) {
                        self.discard_offer(&id.value, None, now, false);
                    }
                }
                let state = if self.frameworks.get(fw).is_some_and(super::Framework::partition_aware) {
                    TaskState::Dropped
                } else {
                    TaskState::Lost
                };
                for task in Self::tasks_of(&accept) {
                    let status = self.master_status(
                        &task.task_id,
                        Some(&task.agent_id),
                        state,
                        Reason::ReasonInvalidOffers,
                        format!("Task launched with invalid offers: {error}"),
                        now,
                    );
                    self.send_status(fw, status);
                }
                return;
            }
        };
        let mut available = Quantities::new();
        for id in &accept.offer_ids {
            if let Some(o) = self.offers.remove(&id.value) {
                available.add(&o.resources);
            }
        }
        self.counters.offers_accepted += accept.offer_ids.len() as u64;
        for op in &accept.operations {
            match (op.kind, &op.launch, &op.launch_group) {
                (Some(OperationType::Launch), Some(launch), _) => {
                    for task in &launch.task_infos {
                        match self.validate_task(fw, &agent, task, &available) {
                            Ok(q) => {
                                available.subtract(&q);
                                self.launch_task(fw, &role, &agent, task.clone(), q);
                            }
                            Err(message) => self.task_error(fw, task, Reason::ReasonTaskInvalid, message, now),
                        }
                    }
                }
                (Some(OperationType::LaunchGroup), _, Some(group)) => {
                    match self.validate_group(fw, &agent, &group.executor, &group.task_group.tasks, &available) {
                        Ok((executor_q, task_qs)) => {
                            available.subtract(&executor_q);
                            let mut executor = group.executor.clone();
                            executor.framework_id.get_or_insert_with(|| FrameworkId::new(fw));
                            let ekey = (agent.clone(), fw.to_owned(), executor.executor_id.value.clone());
                            let entry = self.executors.entry(ekey).or_insert_with(|| ExecutorEntry {
                                role: role.clone(),
                                resources: executor_q.clone(),
                                tasks: 0,
                            });
                            entry.tasks += group.task_group.tasks.len();
                            let mut tasks = Vec::new();
                            for (task, q) in group.task_group.tasks.iter().zip(task_qs) {
                                available.subtract(&q);
                                tasks.push(self.book_task(fw, &role, &agent, task.clone(), Some(&executor), q));
                            }
                            let launch = agent_api::LaunchGroup {
                                framework_id: FrameworkId::new(fw),
                                framework_info: self.framework_info(fw),
                                executor_info: with_role(executor, &role),
                                task_group: mpiswarm_mesos::TaskGroupInfo { tasks },
                            };
                            self.send_to_agent(&agent, &agent_api::Event::launch_group(launch));
                        }
                        Err(message) => {
                            for task in &group.task_group.tasks {
                                self.task_error(fw, task, Reason::ReasonTaskGroupInvalid, message.clone(), now);
                            }
                        }
                    }
                }
                (kind, _, _) => {
                    tracing::warn!(framework = fw, ?kind, "operation not supported by the offer layer; ignored");
                }
            }
        }
        // What was offered but not used goes back, filtered as the framework asked.
        let refuse = refuse_duration(accept.filters.as_ref());
        self.allocator.recover(fw, &role, &agent, &available, Some(refuse), now);
    }

    fn task_error(&self, fw: &str, task: &TaskInfo, reason: Reason, message: String, now: Duration) {
        let status = self.master_status(&task.task_id, Some(&task.agent_id), TaskState::Error, reason, message, now);
        self.send_status(fw, status);
    }

    /// The FrameworkInfo agents get with a launch (the framework may have
    /// been removed meanwhile: then the one the launch was accepted under is
    /// gone too, and a bare info with the id is all there is).
    fn framework_info(&self, fw: &str) -> mpiswarm_mesos::FrameworkInfo {
        self.frameworks.get(fw).map(|f| f.info.clone()).unwrap_or_else(|| {
            let mut info = mpiswarm_mesos::FrameworkInfo::new("", "", &[]);
            info.id = Some(FrameworkId::new(fw));
            info
        })
    }

    /// Sends a launch to an agent; one that went away gets the task reported by reconciliation.
    fn send_to_agent(&self, agent: &str, event: &agent_api::Event) {
        if !self.agents.get(agent).is_some_and(|a| a.send(event)) {
            tracing::warn!(agent, "launch not delivered: the agent's stream is closed");
        }
    }

    fn validate_resources(what: &str, resources: &[Resource]) -> Result<Quantities, String> {
        for r in resources {
            if let Some(v) = r.scalar_value()
                && (!v.is_finite() || v < 0.0)
            {
                return Err(format!("{what} has invalid resource {}: {v}", r.name));
            }
        }
        Ok(Quantities::from_resources(resources))
    }

    fn validate_task(
        &self,
        fw: &str,
        agent: &str,
        task: &TaskInfo,
        available: &Quantities,
    ) -> Result<Quantities, String> {
        let what = format!("Task '{}'", task.task_id);
        if task.task_id.value.is_empty() || task.task_id.value.chars().any(char::is_control) {
            return Err(format!("{what}: task_id must be non-empty and printable"));
        }
        if self.tasks.contains_key(&(fw.to_owned(), task.task_id.value.clone())) {
            return Err(format!("{what} already exists"));
        }
        if task.agent_id.value != agent {
            return Err(format!("{what} has agent_id {} but the offers are for agent {agent}", task.agent_id));
        }
        if task.command.is_some() == task.executor.is_some() {
            return Err(format!(
                "{what} should have at least one (but not both) of CommandInfo or ExecutorInfo present"
            ));
        }
        if let Some(c) = &task.container
            && c.kind == mpiswarm_mesos::task::ContainerType::Docker
            && c.docker.is_none()
        {
            return Err(format!("{what} has a DOCKER container without 'docker' (and its image)"));
        }
        let q = Self::validate_resources(&what, &task.resources)?;
        if q.is_empty() {
            return Err(format!("{what} uses no resources"));
        }
        if !available.contains(&q) {
            return Err(format!("{what} uses resources {q} that are not in the offered {available}"));
        }
        Ok(q)
    }

    /// Checks a task group; returns what the executor and each task use.
    fn validate_group(
        &self,
        fw: &str,
        agent: &str,
        executor: &ExecutorInfo,
        tasks: &[TaskInfo],
        available: &Quantities,
    ) -> Result<GroupResources, String> {
        if tasks.is_empty() {
            return Err("Task group is empty".into());
        }
        if executor.kind != Some(mpiswarm_mesos::task::ExecutorType::Default) {
            return Err(format!("Executor '{}' of a task group must be of type DEFAULT", executor.executor_id));
        }
        let ekey = (agent.to_owned(), fw.to_owned(), executor.executor_id.value.clone());
        let executor_q = if self.executors.contains_key(&ekey) {
            Quantities::new()
        } else {
            Self::validate_resources(&format!("Executor '{}'", executor.executor_id), &executor.resources)?
        };
        let mut remaining = available.clone();
        if !remaining.contains(&executor_q) {
            return Err(format!(
                "Executor '{}' uses {executor_q} beyond the offered {available}",
                executor.executor_id
            ));
        }
        remaining.subtract(&executor_q);
        let mut ids = std::collections::HashSet::new();
        let mut qs = Vec::new();
        for task in tasks {
            if !ids.insert(&task.task_id.value) {
                return Err(format!("Task '{}' appears twice in the task group", task.task_id));
            }
            if task.executor.is_some() {
                return Err(format!("Task '{}' in a task group must not set 'executor'", task.task_id));
            }
            let mut probe = task.clone();
            // Group tasks run under the group's executor: they need no command of their own.
            if probe.command.is_none() {
                probe.command = Some(Default::default());
            }
            let q =
                self.validate_task(fw, agent, &probe, &remaining).map_err(|e| format!("Invalid task group: {e}"))?;
            remaining.subtract(&q);
            qs.push(q);
        }
        Ok((executor_q, qs))
    }

    /// Records a task in the books (state STAGING) and returns the TaskInfo
    /// as the agent gets it (resources tagged with the role).
    fn book_task(
        &mut self,
        fw: &str,
        role: &str,
        agent: &str,
        mut task: TaskInfo,
        executor: Option<&ExecutorInfo>,
        resources: Quantities,
    ) -> TaskInfo {
        for r in &mut task.resources {
            r.allocation_info = Some(AllocationInfo { role: Some(role.to_owned()) });
        }
        let mut latest = TaskStatus::new(task.task_id.clone(), TaskState::Staging);
        latest.agent_id = Some(AgentId::new(agent));
        latest.executor_id = executor.map(|e| e.executor_id.clone());
        let key: TaskKey = (fw.to_owned(), task.task_id.value.clone());
        self.tasks.insert(
            key,
            Task {
                framework_id: FrameworkId::new(fw),
                agent_id: AgentId::new(agent),
                info: task.clone(),
                executor_id: executor.map(|e| e.executor_id.clone()),
                role: role.to_owned(),
                resources,
                state: TaskState::Staging,
                latest,
                pending: VecDeque::new(),
                last_sent: None,
                kill_requested: false,
            },
        );
        self.counters.tasks_launched += 1;
        task
    }

    fn launch_task(&mut self, fw: &str, role: &str, agent: &str, task: TaskInfo, resources: Quantities) {
        tracing::info!(framework = fw, agent, task = %task.task_id, %resources, "launching task");
        let task = self.book_task(fw, role, agent, task, None, resources);
        let launch = agent_api::Launch {
            framework_id: FrameworkId::new(fw),
            framework_info: self.framework_info(fw),
            task_info: task,
        };
        self.send_to_agent(agent, &agent_api::Event::launch(launch));
    }
}

fn with_role(mut executor: ExecutorInfo, role: &str) -> ExecutorInfo {
    for r in &mut executor.resources {
        r.allocation_info = Some(AllocationInfo { role: Some(role.to_owned()) });
    }
    executor
}
