//! Frameworks: SUBSCRIBE, failover, removal, and the calls that are not
//! about offers (KILL, SHUTDOWN, ACKNOWLEDGE, RECONCILE, MESSAGE, REVIVE,
//! SUPPRESS, TEARDOWN, UPDATE_FRAMEWORK). Calls arrive checked
//! ([`crate::validation`]), their sub-messages in their types; semantic
//! problems become status updates, as in Mesos. Never parses HTTP.

use super::{CallError, Connection, Framework, Master, Opened};
use crate::validation::FrameworkCall;
use mpiswarm_mesos::scheduler::{Acknowledge, Event, Kill, Reconcile, Shutdown, Subscribe};
use mpiswarm_mesos::{FrameworkId, MasterError, MasterInfo, Reason, TaskState, agent_api, validate_role};
use std::collections::BTreeSet;
use std::time::Duration;

impl Master {
    fn master_info(&self) -> MasterInfo {
        let ip = self
            .config
            .hostname
            .parse::<std::net::Ipv4Addr>()
            .map(|ip| u32::from_le_bytes(ip.octets()))
            .unwrap_or(u32::from_le_bytes([127, 0, 0, 1]));
        MasterInfo {
            id: self.master_id.clone(),
            ip,
            port: u32::from(self.config.port),
            pid: Some(self.config.pid()),
            hostname: Some(self.config.hostname.clone()),
            version: Some(super::MESOS_VERSION.to_owned()),
            address: Some(mpiswarm_mesos::Address {
                hostname: Some(self.config.hostname.clone()),
                ip: Some(self.config.hostname.clone()),
                port: i32::from(self.config.port),
            }),
        }
    }

    /// SUBSCRIBE by `principal` (see [`super::authz`]). Like Mesos, problems
    /// with the FrameworkInfo arrive as an ERROR event on an otherwise empty
    /// stream; a caller that may not subscribe so is refused (403) instead.
    pub fn subscribe_framework(
        &mut self,
        subscribe: Subscribe,
        principal: Option<&str>,
        now: Duration,
    ) -> Result<Opened, CallError> {
        let mut info = subscribe.framework_info;
        let (conn, events) = Connection::open();
        let stream_id = conn.stream_id.clone();
        let roles = info.effective_roles();
        let refuse = |conn: Connection, message: String| {
            conn.send(&Event::error(message));
            drop(conn);
        };
        if let Some(err) = roles.iter().find_map(|r| validate_role(r).err()) {
            refuse(conn, err.to_string());
            return Ok(Opened { id: String::new(), stream_id, events });
        }
        if let Some(bad) = subscribe.suppressed_roles.iter().find(|r| !roles.contains(r)) {
            refuse(conn, format!("suppressed role '{bad}' is not one of the framework's roles {roles:?}"));
            return Ok(Opened { id: String::new(), stream_id, events });
        }
        self.authorize_framework(principal, &info)?;
        let id = match &info.id {
            Some(id) if self.registry.removed_frameworks.contains(&id.value) => {
                refuse(conn, MasterError::FrameworkRemoved.message().to_owned());
                return Ok(Opened { id: id.value.clone(), stream_id, events });
            }
            Some(id) => id.value.clone(),
            None => self.next_id(""),
        };
        info.id = Some(FrameworkId::new(&id));
        let failover = self.frameworks.get_mut(&id).map(|fw| fw.conn.take());
        if let Some(Some(old)) = failover {
            old.send(&Event::error(MasterError::FrameworkFailedOver.message()));
            tracing::info!(framework = %id, "framework failed over to a new stream");
        }
        // Outstanding offers belong to the old subscription.
        self.discard_offers(|o| o.framework == id, now, false);
        let fw = self
            .frameworks
            .entry(id.clone())
            .or_insert_with(|| Framework::recovered(FrameworkId::new(&id), Some(info.clone())));
        fw.info = info.clone();
        fw.roles = roles.clone();
        fw.conn = Some(conn);
        fw.failover_deadline = None;
        fw.recovered = false;
        self.allocator.add_framework(&id, &roles, &subscribe.suppressed_roles);
        self.allocator.set_framework_active(&id, true);
        self.registry.frameworks.insert(id.clone(), info);
        self.persist_registry();
        let subscribed =
            Event::subscribed(FrameworkId::new(&id), self.config.heartbeat_interval.as_secs_f64(), self.master_info());
        if let Some(fw) = self.frameworks.get(&id) {
            fw.send(&subscribed);
        }
        tracing::info!(framework = %id, ?roles, "framework subscribed");
        let keys: Vec<_> = self.tasks.keys().filter(|k| k.0 == id).cloned().collect();
        for key in keys {
            self.send_update_head(&key, now);
        }
        self.allocate(now, None);
        Ok(Opened { id, stream_id, events })
    }

    /// The framework's stream closed: keep its tasks for `failover_timeout`.
    pub fn framework_stream_closed(&mut self, id: &str, stream_id: &str, now: Duration) {
        let fenced = self.is_fenced(now);
        let Some(fw) = self.frameworks.get_mut(id) else { return };
        if fw.conn.as_ref().is_none_or(|c| c.stream_id != stream_id) {
            return;
        }
        fw.conn = None;
        if fenced {
            // Not leading: it lets the stream go and sends nothing.
            return;
        }
        let timeout = fw.info.failover_timeout.filter(|t| t.is_finite() && *t > 0.0).unwrap_or(0.0);
        fw.failover_deadline = Some(now + Duration::from_secs_f64(timeout.min(1e9)));
        tracing::info!(framework = %id, failover_timeout = timeout, "framework disconnected");
        self.allocator.set_framework_active(id, false);
        self.discard_offers(|o| o.framework == id, now, false);
    }

    /// Removes a framework for good: its tasks are killed and its offers go.
    pub fn remove_framework(&mut self, id: &str, now: Duration) {
        self.discard_offers(|o| o.framework == id, now, false);
        let keys: Vec<_> = self.tasks.keys().filter(|k| k.0 == id).cloned().collect();
        let mut agents = BTreeSet::new();
        for key in keys {
            let live = self.tasks.get(&key).filter(|t| !t.state.is_terminal()).map(|t| t.agent_id.value.clone());
            if let Some(agent) = live {
                self.release_task_resources(&key, now);
                agents.insert(agent);
            }
            self.complete_task(&key);
        }
        self.executors.retain(|(_, fw, _), _| fw != id);
        let shutdown =
            agent_api::Event::shutdown(agent_api::Shutdown { framework_id: FrameworkId::new(id), executor_id: None });
        for agent in agents {
            if let Some(a) = self.agents.get(&agent) {
                a.send(&shutdown);
            }
        }
        self.allocator.remove_framework(id);
        self.frameworks.remove(id);
        self.registry.framework_removed(id);
        self.persist_registry();
        self.counters.frameworks_removed += 1;
        tracing::info!(framework = %id, "framework removed");
    }

    /// An operator's teardown of framework `id` (`POST /master/teardown`),
    /// as the ACL list `teardown_frameworks` allows.
    pub fn teardown_framework(&mut self, id: &str, principal: Option<&str>, now: Duration) -> Result<(), CallError> {
        self.authorize_teardown(principal, id)?;
        if !self.frameworks.contains_key(id) {
            return Err(CallError::bad_request(format!("No framework found with specified ID '{id}'")));
        }
        tracing::info!(framework = %id, by = %crate::acl::caller_name(principal), "framework torn down by an operator");
        self.remove_framework(id, now);
        Ok(())
    }

    /// Any call but SUBSCRIBE, by `principal`, after the Mesos checks of
    /// framework id, owner, subscription and stream id.
    pub fn framework_call(
        &mut self,
        framework_id: &FrameworkId,
        call: FrameworkCall,
        stream_id: Option<&str>,
        principal: Option<&str>,
        now: Duration,
    ) -> Result<(), CallError> {
        if let Some(refused) = self.fence_refusal(now) {
            return Err(refused);
        }
        let id = framework_id.value.clone();
        if !self.frameworks.contains_key(&id) {
            return Err(CallError::bad_request("Framework cannot be found"));
        }
        self.check_framework_owner(principal, &id)?;
        if let FrameworkCall::UpdateFramework(update) = &call {
            let mut info = update.framework_info.clone();
            info.id = Some(framework_id.clone());
            self.authorize_framework(principal, &info)?;
        }
        let fw = self.frameworks.get(&id).ok_or_else(|| CallError::bad_request("Framework cannot be found"))?;
        let conn = fw.conn.as_ref().ok_or_else(|| CallError::forbidden("Framework is not subscribed"))?;
        match stream_id {
            None => {
                return Err(CallError::bad_request(
                    "All non-subscribe calls should include the 'Mesos-Stream-Id' header",
                ));
            }
            Some(s) if s != conn.stream_id => {
                return Err(CallError::bad_request(format!(
                    "The stream ID '{s}' included in this request didn't match the stream ID currently associated with framework ID {id}"
                )));
            }
            Some(_) => {}
        }
        match call {
            FrameworkCall::Accept(accept) => self.accept(&id, accept, now),
            FrameworkCall::Decline(decline) => self.decline(&id, decline, now),
            FrameworkCall::Revive(roles) => {
                self.allocator.revive(&id, &roles);
                self.allocate(now, None);
            }
            FrameworkCall::Suppress(roles) => self.allocator.suppress(&id, &roles),
            FrameworkCall::Kill(kill) => self.kill(&id, kill, now),
            FrameworkCall::Shutdown(shutdown) => self.shutdown_executor(&id, shutdown),
            FrameworkCall::Acknowledge(ack) => self.acknowledge(&id, ack, now),
            FrameworkCall::Reconcile(reconcile) => self.reconcile(&id, reconcile, now),
            FrameworkCall::Message(m) => {
                if let Some(a) = self.agents.get(&m.agent_id.value) {
                    a.send(&agent_api::Event::message(agent_api::Message {
                        framework_id: FrameworkId::new(&id),
                        executor_id: m.executor_id,
                        data: m.data,
                    }));
                }
            }
            FrameworkCall::Teardown => self.remove_framework(&id, now),
            FrameworkCall::UpdateFramework(update) => self.update_framework(&id, update)?,
            // Mesos' allocator ignores REQUEST; inverse offers and operation
            // feedback have nothing to act on here.
            FrameworkCall::Ignored(_) => {}
            FrameworkCall::Unknown => {
                return Err(CallError { status: 501, message: "Received an unexpected 'UNKNOWN' call".into() });
            }
        }
        Ok(())
    }

    fn update_framework(&mut self, id: &str, update: Subscribe) -> Result<(), CallError> {
        let roles = update.framework_info.effective_roles();
        if let Some(err) = roles.iter().find_map(|r| validate_role(r).err()) {
            return Err(CallError::bad_request(err.to_string()));
        }
        if let Some(fw) = self.frameworks.get_mut(id) {
            fw.info = update.framework_info;
            fw.info.id = Some(FrameworkId::new(id));
            fw.roles = roles.clone();
            self.registry.frameworks.insert(id.to_owned(), fw.info.clone());
        }
        self.persist_registry();
        self.allocator.add_framework(id, &roles, &update.suppressed_roles);
        self.allocator.set_framework_active(id, true);
        Ok(())
    }

    fn kill(&mut self, fw: &str, kill: Kill, now: Duration) {
        let key = (fw.to_owned(), kill.task_id.value.clone());
        match self.tasks.get_mut(&key) {
            Some(task) if task.state.is_terminal() => {}
            Some(task) => {
                let event = agent_api::Event::kill(agent_api::Kill {
                    framework_id: FrameworkId::new(fw),
                    task_id: kill.task_id.clone(),
                    kill_policy: kill.kill_policy.clone(),
                });
                let delivered = self.agents.get(&task.agent_id.value).is_some_and(|a| a.send(&event));
                // An agent that is away gets the KILL when it re-subscribes.
                task.kill_requested = !delivered;
            }
            None => {
                let status = self.master_status(
                    &kill.task_id,
                    kill.agent_id.as_ref(),
                    self.unknown_task_state(fw),
                    Reason::ReasonReconciliation,
                    format!("Cannot kill task '{}': it is unknown to the master", kill.task_id),
                    now,
                );
                self.send_status(fw, status);
            }
        }
    }

    fn shutdown_executor(&mut self, fw: &str, shutdown: Shutdown) {
        if let Some(a) = self.agents.get(&shutdown.agent_id.value) {
            a.send(&agent_api::Event::shutdown(agent_api::Shutdown {
                framework_id: FrameworkId::new(fw),
                executor_id: Some(shutdown.executor_id),
            }));
        }
    }

    fn acknowledge(&mut self, fw: &str, ack: Acknowledge, now: Duration) {
        let key = (fw.to_owned(), ack.task_id.value.clone());
        let Some(task) = self.tasks.get_mut(&key) else { return };
        if task.pending.front().and_then(|s| s.uuid.as_ref()) != Some(&ack.uuid) {
            tracing::debug!(framework = fw, task = %ack.task_id, "acknowledgement of a stale update ignored");
            return;
        }
        task.pending.pop_front();
        task.last_sent = None;
        let agent = task.agent_id.value.clone();
        let terminal_and_done = task.pending.is_empty() && task.state.is_terminal();
        if let Some(a) = self.agents.get(&agent) {
            a.send(&agent_api::Event::acknowledged(agent_api::Acknowledged {
                framework_id: FrameworkId::new(fw),
                task_id: ack.task_id.clone(),
                uuid: ack.uuid,
            }));
        }
        if terminal_and_done {
            self.complete_task(&key);
        } else {
            self.send_update_head(&key, now);
        }
    }

    fn reconcile(&mut self, fw: &str, reconcile: Reconcile, now: Duration) {
        let Some(framework) = self.frameworks.get(fw) else { return };
        let mut statuses = Vec::new();
        let reconciled = |mut s: mpiswarm_mesos::TaskStatus| {
            s.uuid = None;
            s.reason = Some(Reason::ReasonReconciliation);
            s.source = Some(mpiswarm_mesos::Source::SourceMaster);
            s
        };
        if reconcile.tasks.is_empty() {
            for ((f, _), t) in &self.tasks {
                if f == fw {
                    statuses.push(reconciled(t.latest.clone()));
                }
            }
        } else {
            for rt in &reconcile.tasks {
                if let Some(t) = self.tasks.get(&(fw.to_owned(), rt.task_id.value.clone())) {
                    statuses.push(reconciled(t.latest.clone()));
                    continue;
                }
                // An agent that is away but not yet lost, or one the registry
                // lists that has not re-registered since a restart: no answer
                // yet, as in Mesos. Without an agent id, no answer while any
                // registered agent is still awaited: the task may be on it.
                let agent_away = match &rt.agent_id {
                    Some(a) => {
                        self.agents.get(&a.value).is_some_and(|a| a.conn.is_none()) || self.is_awaiting_agent(&a.value)
                    }
                    None => self.is_recovering(),
                };
                if agent_away {
                    continue;
                }
                let state = if framework.partition_aware() {
                    let removed = rt.agent_id.as_ref().is_some_and(|a| self.registry.removed_agents.contains(&a.value));
                    if removed { TaskState::Unreachable } else { TaskState::Unknown }
                } else {
                    TaskState::Lost
                };
                statuses.push(self.master_status(
                    &rt.task_id,
                    rt.agent_id.as_ref(),
                    state,
                    Reason::ReasonReconciliation,
                    "Reconciliation: task is unknown to the master".to_owned(),
                    now,
                ));
            }
        }
        for s in statuses {
            framework.send(&Event::update(s));
        }
    }
}
