//! Agents: SUBSCRIBE with their resources and running tasks, UPDATEs of
//! task state, disconnection and loss. A re-registering agent's running
//! tasks are adopted, never killed, unless the master already reported
//! them lost; tasks the master knows on it but the agent no longer reports
//! are reported lost (REASON_RECONCILIATION).

use super::books::TaskKey;
use super::{CallError, Connection, Framework, Master, Opened, Task};
use mpiswarm_mesos::agent_api::{self, Subscribe, Update};
use mpiswarm_mesos::quantities::Quantities;
use mpiswarm_mesos::{AgentId, FrameworkId, Reason, Source, TaskState};
use std::collections::{BTreeSet, VecDeque};
use std::net::IpAddr;
use std::time::Duration;

/// The role a reported task's resources were allocated to.
fn role_of(task: &mpiswarm_mesos::TaskInfo, framework: Option<&Framework>) -> String {
    task.resources
        .iter()
        .find_map(|r| r.allocation_info.as_ref().and_then(|a| a.role.clone()))
        .or_else(|| framework.and_then(|f| f.roles.first().cloned()))
        .unwrap_or_else(|| "*".to_owned())
}

/// The key of a task an agent reports: its framework's id and its own.
fn key_of(reported: &agent_api::ReportedTask) -> TaskKey {
    (reported.framework_id.value.clone(), reported.task_info.task_id.value.clone())
}

/// The first resource that is not a finite, non-negative quantity, described.
fn invalid_resource<'a>(mut resources: impl Iterator<Item = &'a mpiswarm_mesos::Resource>) -> Option<String> {
    resources.find_map(|r| {
        r.scalar_value()
            .filter(|v| !v.is_finite() || *v < 0.0)
            .map(|v| format!("resource '{}' has invalid value {v}", r.name))
    })
}

/// How tasks the master has on an agent that the agent does not list end.
struct Unknown {
    /// Their state for a partition-aware framework (TASK_LOST for others).
    aware_state: TaskState,
    reason: Reason,
    message: String,
    /// What the log says of each.
    what: &'static str,
}

impl Master {
    /// Whether a task agent `id` reports at SUBSCRIBE is its own: the task
    /// names this agent (every launched TaskInfo carries its agent's id),
    /// and the master does not know it on another.
    fn reported_task_is_of(&self, reported: &agent_api::ReportedTask, id: &str) -> bool {
        let key = key_of(reported);
        reported.task_info.agent_id.value == id && self.tasks.get(&key).is_none_or(|t| t.agent_id.value == id)
    }

    /// Why a reported task's role cannot be adopted: a role that is not a
    /// valid role name, or one its framework, when the master knows it,
    /// did not register in. Adopting it would charge another role (another
    /// team's share and quota) for the task.
    fn reported_role_refusal(&self, reported: &agent_api::ReportedTask) -> Option<&'static str> {
        let framework = self.frameworks.get(&reported.framework_id.value);
        let role = role_of(&reported.task_info, framework);
        if role != "*" && mpiswarm_mesos::roles::validate_role(&role).is_err() {
            return Some("its role is not a valid role name");
        }
        let known = framework.map(|f| &f.roles).filter(|roles| !roles.is_empty());
        match known {
            Some(roles) if !roles.contains(&role) => Some("its role is not one of its framework's roles"),
            _ => None,
        }
    }

    /// Splits the tasks agent `id` reports into its own, which together
    /// (with their executors) fit in the agent's `total`, and the rest:
    /// tasks of another agent, tasks in a role their framework is not in
    /// ([`Master::reported_role_refusal`]), and live tasks past what the
    /// agent has (an agent cannot run more than it offers; adopting them
    /// would let it charge a framework's role for resources that do not
    /// exist).
    fn own_reported_tasks(
        &self,
        id: &str,
        tasks: Vec<agent_api::ReportedTask>,
        total: &Quantities,
    ) -> (Vec<agent_api::ReportedTask>, Vec<(agent_api::ReportedTask, &'static str)>) {
        let mut used = Quantities::new();
        let (mut own, mut ignored) = (Vec::new(), Vec::new());
        for t in tasks {
            if !self.reported_task_is_of(&t, id) {
                ignored.push((t, "it names another agent"));
                continue;
            }
            if let Some(why) = self.reported_role_refusal(&t) {
                ignored.push((t, why));
                continue;
            }
            if !t.status.state.is_terminal() {
                let mut with = used.clone();
                with.add(&Quantities::from_resources(&t.task_info.resources));
                if let Some(e) = &t.executor_info {
                    with.add(&Quantities::from_resources(&e.resources));
                }
                if !total.contains(&with) {
                    ignored.push((t, "the agent's tasks would hold more than the agent has"));
                    continue;
                }
                used = with;
            }
            own.push(t);
        }
        (own, ignored)
    }

    /// Agent SUBSCRIBE by `principal` from `peer_ip`: registers or
    /// re-registers the agent and adopts the tasks it reports. Tasks it
    /// reports for another agent are ignored; a task with an invalid
    /// resource refuses the whole call.
    pub fn subscribe_agent(
        &mut self,
        subscribe: Subscribe,
        peer_ip: Option<IpAddr>,
        principal: Option<&str>,
        now: Duration,
    ) -> Result<Opened, CallError> {
        let info = subscribe.agent_info;
        if info.hostname.trim().is_empty() {
            return Err(CallError::bad_request("agent_info.hostname must not be empty"));
        }
        invalid_resource(info.resources.iter())
            .map_or(Ok(()), |e| Err(CallError::bad_request(format!("agent {e}"))))?;
        for t in &subscribe.tasks {
            let executor = t.executor_info.iter().flat_map(|e| &e.resources);
            if let Some(e) = invalid_resource(t.task_info.resources.iter().chain(executor)) {
                return Err(CallError::bad_request(format!("task '{}' reports a {e}", t.task_info.task_id)));
            }
        }
        let asked = info.id.as_ref().map(|id| id.value.as_str()).filter(|id| !id.is_empty());
        self.authorize_agent(principal, asked)?;
        let id = match asked {
            Some(id) => id.to_owned(),
            None => self.next_id("S"),
        };
        let (subscribe_tasks, ignored) =
            self.own_reported_tasks(&id, subscribe.tasks, &Quantities::from_resources(&info.resources));
        for (t, why) in &ignored {
            tracing::warn!(agent = %id, task = %t.task_info.task_id, why, "agent reported a task that is not its own; ignored");
        }
        let was_removed = self.registry.removed_agents.contains(&id);
        if let Some(old) = self.agents.get_mut(&id).and_then(|a| a.conn.take()) {
            old.send(&agent_api::Event::error("Agent reconnected on a new stream"));
        }
        self.discard_offers(|o| o.agent == id, now, true);
        let (conn, events) = Connection::open();
        let stream_id = conn.stream_id.clone();
        let mut info = info;
        info.id = Some(AgentId::new(&id));
        let total = Quantities::from_resources(&info.resources);
        let mut after_subscribe: Vec<agent_api::Event> = Vec::new();
        let mut shutdown_frameworks = BTreeSet::new();
        let mut new_updates: Vec<(TaskKey, mpiswarm_mesos::TaskStatus)> = Vec::new();
        let reported_keys: BTreeSet<TaskKey> = subscribe_tasks.iter().map(key_of).collect();
        self.forget_tasks_unknown_to_agent(&id, &reported_keys, now);
        for reported in subscribe_tasks {
            let fw = reported.framework_id.value.clone();
            let key: TaskKey = (fw.clone(), reported.task_info.task_id.value.clone());
            let terminal = reported.status.state.is_terminal();
            let acknowledged = |uuid: Option<mpiswarm_mesos::Bytes>| {
                uuid.map(|uuid| {
                    agent_api::Event::acknowledged(agent_api::Acknowledged {
                        framework_id: reported.framework_id.clone(),
                        task_id: reported.task_info.task_id.clone(),
                        uuid,
                    })
                })
            };
            if was_removed || self.registry.removed_frameworks.contains(&fw) {
                // Its framework was told the task is lost, or is gone: end it.
                if terminal {
                    after_subscribe.extend(acknowledged(reported.status.uuid.clone()));
                } else if was_removed {
                    after_subscribe.push(agent_api::Event::kill(agent_api::Kill {
                        framework_id: reported.framework_id.clone(),
                        task_id: reported.task_info.task_id.clone(),
                        kill_policy: None,
                    }));
                } else {
                    shutdown_frameworks.insert(fw);
                }
                continue;
            }
            if let Some(task) = self.tasks.get_mut(&key) {
                if task.state != reported.status.state && !task.state.is_terminal() {
                    new_updates.push((key.clone(), reported.status.clone()));
                }
                if task.kill_requested {
                    task.kill_requested = false;
                    after_subscribe.push(agent_api::Event::kill(agent_api::Kill {
                        framework_id: reported.framework_id.clone(),
                        task_id: reported.task_info.task_id.clone(),
                        kill_policy: None,
                    }));
                }
                continue;
            }
            let framework = self
                .frameworks
                .entry(fw.clone())
                .or_insert_with(|| Framework::recovered(reported.framework_id.clone(), None));
            let role = role_of(&reported.task_info, Some(framework));
            let mut latest = reported.status.clone();
            latest.agent_id = Some(AgentId::new(&id));
            let executor_id = reported.executor_info.as_ref().map(|e| e.executor_id.clone());
            if let Some(executor) = &reported.executor_info {
                let ekey = (id.clone(), fw.clone(), executor.executor_id.value.clone());
                let entry = self.executors.entry(ekey).or_insert_with(|| super::ExecutorEntry {
                    role: role.clone(),
                    resources: Quantities::from_resources(&executor.resources),
                    tasks: 0,
                });
                if !terminal {
                    entry.tasks += 1;
                }
            }
            self.tasks.insert(
                key.clone(),
                Task {
                    framework_id: reported.framework_id.clone(),
                    agent_id: AgentId::new(&id),
                    info: reported.task_info.clone(),
                    executor_id,
                    role,
                    resources: Quantities::from_resources(&reported.task_info.resources),
                    state: reported.status.state,
                    latest: latest.clone(),
                    pending: VecDeque::new(),
                    last_sent: None,
                    kill_requested: false,
                },
            );
            if terminal {
                // The framework may never have heard of the end: tell it.
                new_updates.push((key, latest));
            }
        }
        self.executors.retain(|_, e| e.tasks > 0);
        let used: Vec<(String, String, Quantities)> = self
            .tasks
            .iter()
            .filter(|(_, t)| t.agent_id.value == id && !t.state.is_terminal())
            .map(|((fw, _), t)| (fw.clone(), t.role.clone(), t.resources.clone()))
            .chain(
                self.executors
                    .iter()
                    .filter(|((a, _, _), _)| *a == id)
                    .map(|((_, fw, _), e)| (fw.clone(), e.role.clone(), e.resources.clone())),
            )
            .collect();
        self.allocator.add_agent(&id, total.clone(), &used);
        let agent = self.agents.entry(id.clone()).or_insert_with(|| super::Agent {
            id: AgentId::new(&id),
            info: info.clone(),
            total: total.clone(),
            conn: None,
            lost_deadline: None,
            peer_ip,
        });
        agent.info = info.clone();
        agent.total = total;
        agent.lost_deadline = None;
        agent.peer_ip = peer_ip;
        conn.send(&agent_api::Event::subscribed(AgentId::new(&id), self.config.heartbeat_interval.as_secs_f64()));
        for event in &after_subscribe {
            conn.send(event);
        }
        for fw in shutdown_frameworks {
            conn.send(&agent_api::Event::shutdown(agent_api::Shutdown {
                framework_id: FrameworkId::new(fw),
                executor_id: None,
            }));
        }
        agent.conn = Some(conn);
        let record = crate::registry::RegisteredAgent {
            hostname: info.hostname.clone(),
            // Bound to the first principal that registers it (see authz.rs).
            principal: principal
                .map(str::to_owned)
                .or_else(|| self.registry.agents.get(&id).and_then(|a| a.principal.clone())),
        };
        if was_removed || self.registry.agents.get(&id) != Some(&record) {
            self.registry.removed_agents.retain(|a| *a != id);
            self.registry.agents.insert(id.clone(), record);
            self.persist_registry();
        }
        if let Some(awaited) = &mut self.awaited_agents {
            awaited.ids.remove(&id);
        }
        for (key, status) in new_updates {
            self.apply_status(&key, status, now);
        }
        tracing::info!(agent = %id, hostname = %info.hostname, "agent subscribed");
        self.allocate(now, Some(std::slice::from_ref(&id)));
        Ok(Opened { id, stream_id, events })
    }

    /// Mesos' reconcileKnownSlave: a task the master thinks runs on the
    /// agent but that the re-registering agent does not report is gone (its
    /// LAUNCH died with the old stream, or the agent lost it). Without this
    /// the task would stay RUNNING forever; its framework gets TASK_LOST
    /// (TASK_GONE if partition-aware) with REASON_RECONCILIATION.
    fn forget_tasks_unknown_to_agent(&mut self, agent: &str, reported: &BTreeSet<TaskKey>, now: Duration) {
        let unknown = Unknown {
            aware_state: TaskState::Gone,
            reason: Reason::ReasonReconciliation,
            message: "Task is unknown to the agent".to_owned(),
            what: "task unknown to the re-registering agent",
        };
        self.end_tasks_not_listed(agent, reported, &unknown, now);
    }

    /// Ends every non-terminal task the master has on `agent` that is not
    /// in `listed`, as `unknown` says.
    fn end_tasks_not_listed(&mut self, agent: &str, listed: &BTreeSet<TaskKey>, unknown: &Unknown, now: Duration) {
        let missing: Vec<TaskKey> = self
            .tasks
            .iter()
            .filter(|(k, t)| t.agent_id.value == agent && !t.state.is_terminal() && !listed.contains(*k))
            .map(|(k, _)| k.clone())
            .collect();
        for key in missing {
            let partition_aware = self.frameworks.get(&key.0).is_some_and(Framework::partition_aware);
            let state = if partition_aware { unknown.aware_state } else { TaskState::Lost };
            let Some(task) = self.tasks.get(&key) else { continue };
            let status = self.master_status(
                &task.info.task_id,
                Some(&task.agent_id),
                state,
                unknown.reason,
                unknown.message.clone(),
                now,
            );
            tracing::warn!(agent, task = %key.1, state = state.as_str(), "{}", unknown.what);
            self.release_task_resources(&key, now);
            self.send_master_status(&key, status, state);
            self.complete_task(&key);
        }
    }

    /// The agent named by a call other than SUBSCRIBE (`call` names it in
    /// errors), once `principal` may act as it and `stream_id` is its
    /// current subscription's.
    fn on_current_stream<'a>(
        &self,
        agent_id: Option<&'a AgentId>,
        stream_id: Option<&str>,
        principal: Option<&str>,
        call: &str,
    ) -> Result<&'a AgentId, CallError> {
        let agent_id = agent_id.ok_or_else(|| CallError::bad_request("Expecting 'agent_id' to be present"))?;
        self.check_agent_owner(principal, &agent_id.value)?;
        let not_subscribed = || CallError::forbidden(format!("Agent {agent_id} is not subscribed"));
        let agent = self.agents.get(&agent_id.value).ok_or_else(not_subscribed)?;
        let conn = agent.conn.as_ref().ok_or_else(not_subscribed)?;
        match stream_id {
            None => Err(CallError::bad_request(format!("{call} calls must include the 'Mesos-Stream-Id' header"))),
            Some(s) if s != conn.stream_id => Err(CallError::bad_request(format!(
                "The stream ID '{s}' does not match the current stream of agent {agent_id}"
            ))),
            Some(_) => Ok(agent_id),
        }
    }

    /// Agent WITHDRAW ([`agent_api::Withdraw`]): the agent stops serving and
    /// lists the tasks it knows. A task the master has on it that the list
    /// lacks was launched on the stream the agent no longer read: it never
    /// started, and ends now as TASK_DROPPED (TASK_LOST if not
    /// partition-aware), REASON_AGENT_DRAINING, so its framework places it
    /// again instead of waiting for the agent's loss. Then the agent is
    /// disconnected, as when its stream closes.
    pub fn agent_withdraw(
        &mut self,
        agent_id: Option<&AgentId>,
        stream_id: Option<&str>,
        withdraw: agent_api::Withdraw,
        principal: Option<&str>,
        now: Duration,
    ) -> Result<(), CallError> {
        let id = self.on_current_stream(agent_id, stream_id, principal, "WITHDRAW")?.value.clone();
        let listed: BTreeSet<TaskKey> = withdraw.tasks.iter().map(key_of).collect();
        let unknown = Unknown {
            aware_state: TaskState::Dropped,
            reason: Reason::ReasonAgentDraining,
            message: format!(
                "agent {id} withdrew (it cannot serve its node) before it received the launch; nothing was started"
            ),
            what: "task launched on the stream of an agent that withdrew before reading it",
        };
        self.end_tasks_not_listed(&id, &listed, &unknown, now);
        tracing::info!(agent = %id, tasks = listed.len(), "agent withdrew");
        // `on_current_stream` checked that the call came on the agent's current stream.
        self.agent_stream_closed(&id, stream_id.unwrap_or_default(), now);
        Ok(())
    }

    /// The agent's stream closed: no more offers of it; its tasks keep
    /// running until it is declared lost.
    pub fn agent_stream_closed(&mut self, id: &str, stream_id: &str, now: Duration) {
        let fenced = self.is_fenced(now);
        let Some(agent) = self.agents.get_mut(id) else { return };
        if agent.conn.as_ref().is_none_or(|c| c.stream_id != stream_id) {
            return;
        }
        agent.conn = None;
        if fenced {
            // Not leading: it lets the stream go and sends nothing.
            return;
        }
        agent.lost_deadline = Some(now + self.config.agent_reregister_timeout);
        tracing::warn!(agent = %id, "agent disconnected");
        self.allocator.set_agent_active(id, false);
        self.discard_offers(|o| o.agent == id, now, true);
    }

    /// Agent UPDATE: a task changed state.
    pub fn agent_update(
        &mut self,
        agent_id: Option<&AgentId>,
        stream_id: Option<&str>,
        update: Update,
        principal: Option<&str>,
        now: Duration,
    ) -> Result<(), CallError> {
        let agent_id = self.on_current_stream(agent_id, stream_id, principal, "UPDATE")?;
        let not_subscribed = || CallError::forbidden(format!("Agent {agent_id} is not subscribed"));
        let mut status = update.status;
        if let Some(uuid) = &status.uuid
            && uuid.as_slice().len() != 16
        {
            return Err(CallError::bad_request(format!("status.uuid must be 16 bytes, got {}", uuid.as_slice().len())));
        }
        status.agent_id = Some(agent_id.clone());
        status.source.get_or_insert(Source::SourceExecutor);
        status.timestamp.get_or_insert_with(|| self.clock.timestamp(now));
        let key: TaskKey = (update.framework_id.value.clone(), status.task_id.value.clone());
        match self.tasks.get(&key) {
            Some(task) if task.agent_id != *agent_id => {
                return Err(CallError::bad_request(format!(
                    "task '{}' of framework {} runs on agent {}, not {agent_id}",
                    status.task_id, update.framework_id, task.agent_id
                )));
            }
            Some(_) => self.apply_status(&key, status, now),
            None => {
                tracing::warn!(agent = %agent_id, task = %status.task_id, "update for a task the master does not know");
                let Some(agent) = self.agents.get(&agent_id.value) else { return Err(not_subscribed()) };
                if status.state.is_terminal() {
                    if let Some(uuid) = status.uuid {
                        agent.send(&agent_api::Event::acknowledged(agent_api::Acknowledged {
                            framework_id: update.framework_id,
                            task_id: status.task_id,
                            uuid,
                        }));
                    }
                } else {
                    agent.send(&agent_api::Event::kill(agent_api::Kill {
                        framework_id: update.framework_id,
                        task_id: status.task_id,
                        kill_policy: None,
                    }));
                }
            }
        }
        Ok(())
    }

    /// The agent is gone: its tasks are LOST (UNREACHABLE for
    /// partition-aware frameworks) and every framework gets FAILURE.
    pub fn remove_agent(&mut self, id: &str, now: Duration, why: &str) {
        tracing::warn!(agent = %id, why, "agent lost");
        self.discard_offers(|o| o.agent == id, now, true);
        let keys: Vec<TaskKey> =
            self.tasks.iter().filter(|(_, t)| t.agent_id.value == id).map(|(k, _)| k.clone()).collect();
        for key in keys {
            let Some(task) = self.tasks.get(&key) else { continue };
            if !task.state.is_terminal() {
                let partition_aware = self.frameworks.get(&key.0).is_some_and(Framework::partition_aware);
                let state = if partition_aware { TaskState::Unreachable } else { TaskState::Lost };
                let status = self.master_status(
                    &task.info.task_id,
                    Some(&task.agent_id),
                    state,
                    Reason::ReasonAgentRemoved,
                    format!("Agent {id} was lost: {why}"),
                    now,
                );
                self.send_master_status(&key, status, state);
            }
            self.complete_task(&key);
        }
        self.executors.retain(|(a, _, _), _| a != id);
        self.allocator.remove_agent(id);
        self.agents.remove(id);
        self.registry.agent_removed(id);
        self.persist_registry();
        self.counters.agents_removed += 1;
        self.broadcast_failure(id);
    }
}
