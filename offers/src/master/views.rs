//! Read-only views of the master for operators: `/master/state` (in the
//! shape of Mesos' endpoint: agents, frameworks, tasks, offers, roles) and
//! the flat `/metrics/snapshot` map.

use super::Master;
use mpiswarm_mesos::quantities::Quantities;
use mpiswarm_mesos::quota::{QuotaConfig, QuotaStatus};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// `/metrics/snapshot`: Mesos-style metric names to values.
pub type MetricsSnapshot = BTreeMap<String, f64>;

/// Mesos' JSON form of resources: `{"cpus":2.0,"mem":1024.0,"ports":"[31000-32000]"}`.
fn resources_json(q: &Quantities) -> Value {
    let mut m = Map::new();
    for (k, v) in &q.scalars {
        m.insert(k.clone(), json!((v * 1000.0).round() / 1000.0));
    }
    for (k, rs) in &q.ranges {
        let inner: Vec<String> = rs.iter().map(|(b, e)| format!("{b}-{e}")).collect();
        m.insert(k.clone(), json!(format!("[{}]", inner.join(", "))));
    }
    for (k, s) in &q.sets {
        m.insert(k.clone(), json!(format!("{{{}}}", s.iter().cloned().collect::<Vec<_>>().join(", "))));
    }
    Value::Object(m)
}

impl Master {
    /// The `/master/state` document.
    pub fn state_json(&self, uptime_secs: f64) -> Value {
        let mut used_by_fw: BTreeMap<&str, Quantities> = BTreeMap::new();
        let mut offered_by_fw: BTreeMap<&str, Quantities> = BTreeMap::new();
        let mut used_by_agent: BTreeMap<&str, Quantities> = BTreeMap::new();
        let mut offered_by_agent: BTreeMap<&str, Quantities> = BTreeMap::new();
        for ((fw, _), t) in &self.tasks {
            if !t.state.is_terminal() {
                used_by_fw.entry(fw).or_default().add(&t.resources);
                used_by_agent.entry(&t.agent_id.value).or_default().add(&t.resources);
            }
        }
        for ((agent, fw, _), e) in &self.executors {
            used_by_fw.entry(fw).or_default().add(&e.resources);
            used_by_agent.entry(agent).or_default().add(&e.resources);
        }
        for o in self.offers.values() {
            offered_by_fw.entry(&o.framework).or_default().add(&o.resources);
            offered_by_agent.entry(&o.agent).or_default().add(&o.resources);
        }
        let empty = Quantities::new();
        let mut agents: Vec<Value> = self
            .agents
            .values()
            .map(|a| {
                let used = used_by_agent.get(a.id.value.as_str()).unwrap_or(&empty);
                let offered = offered_by_agent.get(a.id.value.as_str()).unwrap_or(&empty);
                json!({
                    "id": a.id.value,
                    "hostname": a.info.hostname,
                    "port": a.port(),
                    "pid": a.pid(),
                    "active": a.conn.is_some(),
                    "resources": resources_json(&a.total),
                    "used_resources": resources_json(used),
                    "offered_resources": resources_json(offered),
                    "unreserved_resources": resources_json(&a.total),
                    "attributes": a.info.attributes.iter().map(|at| {
                        let v = at.text_value().map(|t| json!(t))
                            .or_else(|| at.scalar.as_ref().map(|s| json!(s.value)))
                            .unwrap_or(Value::Null);
                        (at.name.clone(), v)
                    }).collect::<Map<String, Value>>(),
                })
            })
            .collect();
        agents.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
        let mut frameworks: Vec<Value> = self
            .frameworks
            .values()
            .map(|f| {
                let id = f.id.value.as_str();
                let tasks: Vec<Value> = self
                    .tasks
                    .iter()
                    .filter(|((fw, _), _)| fw == id)
                    .map(|(_, t)| {
                        json!({
                            "id": t.info.task_id.value,
                            "name": t.info.name,
                            "framework_id": id,
                            "slave_id": t.agent_id.value,
                            "agent_id": t.agent_id.value,
                            "executor_id": t.executor_id.as_ref().map(|e| e.value.clone()).unwrap_or_default(),
                            "state": t.state.as_str(),
                            "role": t.role,
                            "resources": resources_json(&t.resources),
                            "statuses": [t.latest],
                        })
                    })
                    .collect();
                let offers: Vec<Value> = self
                    .offers
                    .iter()
                    .filter(|(_, o)| o.framework == id)
                    .map(|(oid, o)| json!({"id": oid, "framework_id": id, "slave_id": o.agent, "agent_id": o.agent, "role": o.role, "resources": resources_json(&o.resources)}))
                    .collect();
                json!({
                    "id": id,
                    "name": f.info.name,
                    "user": f.info.user,
                    "role": f.roles.first().cloned().unwrap_or_else(|| "*".into()),
                    "roles": f.roles,
                    "principal": f.info.principal,
                    "capabilities": f.info.capabilities,
                    "failover_timeout": f.info.failover_timeout.unwrap_or(0.0),
                    "active": f.conn.is_some(),
                    "connected": f.conn.is_some(),
                    "recovered": f.recovered,
                    "suppressed_roles": f.roles.iter().filter(|r| self.allocator.is_suppressed(id, r)).collect::<Vec<_>>(),
                    "used_resources": resources_json(used_by_fw.get(id).unwrap_or(&empty)),
                    "offered_resources": resources_json(offered_by_fw.get(id).unwrap_or(&empty)),
                    "tasks": tasks,
                    "offers": offers,
                })
            })
            .collect();
        frameworks.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
        let sorter = self.allocator.sorter();
        let limits = self.allocator.limits();
        let known: std::collections::BTreeSet<&str> = sorter.roles().chain(limits.keys().map(String::as_str)).collect();
        let mut roles: Vec<Value> = known
            .into_iter()
            .map(|role| {
                let frameworks: Vec<&str> = self
                    .frameworks
                    .values()
                    .filter(|f| f.roles.iter().any(|r| r == role))
                    .map(|f| f.id.value.as_str())
                    .collect();
                json!({
                    "name": role,
                    "weight": sorter.weight(role),
                    "frameworks": frameworks,
                    "allocated": sorter.role_allocation(role),
                    "dominant_share": sorter.role_share(role) * sorter.weight(role),
                    "quota": limits.get(role).map(|limit| json!({"limit": limit, "consumed": sorter.role_allocation(role)})),
                })
            })
            .collect();
        roles.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
        json!({
            "version": super::MESOS_VERSION,
            "id": self.master_id,
            "pid": self.config.pid(),
            "hostname": self.config.hostname,
            "elected_time": 0,
            "uptime_secs": uptime_secs,
            "recovering": self.is_recovering(),
            "activated_slaves": self.agents.values().filter(|a| a.conn.is_some()).count(),
            "deactivated_slaves": self.agents.values().filter(|a| a.conn.is_none()).count(),
            "slaves": agents,
            "frameworks": frameworks,
            "completed_tasks": self.completed_tasks.iter().collect::<Vec<_>>(),
            "roles": roles,
            "weights": self.config.weights,
        })
    }

    /// `GET /quota`: each role's limit and what it holds (offered or used), as
    /// Mesos' quota configs name them.
    pub fn quota_json(&self) -> Value {
        let sorter = self.allocator.sorter();
        let configs = self
            .allocator
            .limits()
            .iter()
            .map(|(role, limit)| QuotaConfig {
                role: role.clone(),
                guarantees: Default::default(),
                limits: limit.clone(),
                consumed: Some(sorter.role_allocation(role)),
            })
            .collect();
        serde_json::to_value(QuotaStatus { configs }).unwrap_or_default()
    }

    /// `/metrics/snapshot`.
    pub fn metrics_snapshot(&self, uptime_secs: f64) -> MetricsSnapshot {
        let mut m = MetricsSnapshot::new();
        let mut put = |k: &str, v: f64| {
            m.insert(k.to_owned(), v);
        };
        let connected = self.frameworks.values().filter(|f| f.conn.is_some()).count() as f64;
        put("master/uptime_secs", uptime_secs);
        put("master/elected", 1.0);
        put("master/recovering", f64::from(u8::from(self.is_recovering())));
        put("master/frameworks_connected", connected);
        put("master/frameworks_disconnected", self.frameworks.len() as f64 - connected);
        put("master/frameworks_active", connected);
        let active_agents = self.agents.values().filter(|a| a.conn.is_some()).count() as f64;
        put("master/slaves_active", active_agents);
        put("master/slaves_connected", active_agents);
        put("master/slaves_disconnected", self.agents.len() as f64 - active_agents);
        put("master/outstanding_offers", self.offers.len() as f64);
        for state in [
            mpiswarm_mesos::TaskState::Staging,
            mpiswarm_mesos::TaskState::Starting,
            mpiswarm_mesos::TaskState::Running,
            mpiswarm_mesos::TaskState::Killing,
            mpiswarm_mesos::TaskState::Unreachable,
        ] {
            let n = self.tasks.values().filter(|t| t.state == state).count() as f64;
            put(&format!("master/tasks_{}", state.as_str().trim_start_matches("TASK_").to_lowercase()), n);
        }
        let mut total = Quantities::new();
        let mut used = Quantities::new();
        for a in self.agents.values() {
            total.add(&a.total);
        }
        for t in self.tasks.values().filter(|t| !t.state.is_terminal()) {
            used.add(&t.resources);
        }
        for name in ["cpus", "mem", "disk", "gpus"] {
            put(&format!("master/{name}_total"), total.get_scalar(name));
            put(&format!("master/{name}_used"), used.get_scalar(name));
        }
        let c = &self.counters;
        put("allocator/allocation_runs", c.allocation_runs as f64);
        put("allocator/allocation_run_seconds_total", c.allocation_seconds_total);
        put("master/offers_sent", c.offers_sent as f64);
        put("master/offers_declined", c.offers_declined as f64);
        put("master/offers_accepted", c.offers_accepted as f64);
        put("master/offers_rescinded", c.offers_rescinded as f64);
        put("master/tasks_launched", c.tasks_launched as f64);
        put("master/status_updates_forwarded", c.updates_forwarded as f64);
        put("master/status_updates_retried", c.updates_retried as f64);
        put("master/frameworks_removed", c.frameworks_removed as f64);
        put("master/slaves_removed", c.agents_removed as f64);
        put("master/invalid_calls", c.invalid_calls as f64);
        put("master/agents_launch_backlogged", c.agents_backlogged as f64);
        put("allocator/launch_backlog_holds", c.backlog_holds as f64);
        put("master/launch_backlog_limit", self.config.launch_backlog as f64);
        // As Mesos: whether this replica is the elected master (may act now).
        let now = std::time::Duration::try_from_secs_f64(uptime_secs).unwrap_or_default();
        put("master/elected", f64::from(u8::from(!self.is_fenced(now))));
        put("master/leader_changes", c.leader_changes as f64);
        if let Some(seconds) = c.elected_to_first_offer {
            put("master/elected_to_first_offer_seconds", seconds);
        }
        let sorter = self.allocator.sorter();
        for (role, limit) in self.allocator.limits() {
            let consumed = sorter.role_allocation(role);
            for (name, value) in limit {
                put(&format!("allocator/quota/roles/{role}/resources/{name}/limit"), *value);
                let used = consumed.get(name).copied().unwrap_or(0.0);
                put(&format!("allocator/quota/roles/{role}/resources/{name}/consumed"), used);
            }
        }
        let registry = self.registry_progress();
        put("registrar/registry_writes", registry.writes as f64);
        put("registrar/registry_write_failures", registry.failures as f64);
        put("registrar/registry_failing", f64::from(u8::from(registry.failing().is_some())));
        put("registrar/queued_operations", self.registry_seq().saturating_sub(registry.attempted) as f64);
        m
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{framework_with_stream, task_on, test_master};
    use super::*;

    #[test]
    fn resources_read_as_mesos_writes_them() {
        let q: Quantities = "cpus:2.5;mem:1024;ports:[31000-32000]".parse().unwrap();
        assert_eq!(resources_json(&q), json!({"cpus": 2.5, "mem": 1024.0, "ports": "[31000-32000]"}));
    }

    #[test]
    fn the_state_counts_a_running_task_for_its_framework_and_the_metrics_count_it_running() {
        let (mut m, _dir) = test_master();
        let _events = framework_with_stream(&mut m, "F-1");
        let key = task_on(&mut m, "F-1", "A-1", "t1");
        if let Some(t) = m.tasks.get_mut(&key) {
            t.resources = Quantities::scalar("cpus", 1.5);
        }
        let state = m.state_json(0.0);
        assert_eq!(state["frameworks"][0]["used_resources"]["cpus"], 1.5);
        assert_eq!(state["frameworks"][0]["tasks"][0]["state"], "TASK_RUNNING");
        assert_eq!(m.metrics_snapshot(0.0)["master/tasks_running"], 1.0);
        assert_eq!(m.metrics_snapshot(0.0)["registrar/registry_failing"], 0.0);
    }
}
