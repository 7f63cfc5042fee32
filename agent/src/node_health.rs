//! Whether the Swarm node this agent serves is up, and what follows when it
//! is not. An agent that serves another node than its engine's (`--node`,
//! one agent per node beside one manager) keeps running when that node
//! dies, and Swarm itself marks the node's tasks orphaned only after 24 h.
//! So the agent asks the manager for the node's status every
//! `node_check` (Swarm marks a node `down` a few heartbeats after it went
//! silent) and, once the node has been down or disconnected for
//! `node_down_confirm` (an overloaded manager can call a live node down for
//! a heartbeat or two; a node ready again within that period keeps its
//! tasks), or at once when the node's own engine refuses connections (its
//! container or machine is gone, not slow; this needs no word from Swarm),
//! while it stays so:
//!
//! - every task it runs there goes `TASK_LOST` (`REASON_AGENT_DISCONNECTED`,
//!   the message naming the node), and the task's service is removed, so its
//!   container is stopped if the node ever comes back;
//! - a LAUNCH that comes from then on (the node's freed resources are still
//!   offered until the agent has withdrawn) starts nothing and is answered
//!   at once with `TASK_DROPPED` (`TASK_LOST` to a framework that is not
//!   partition-aware), reason `REASON_AGENT_DRAINING`, so the framework
//!   places the gang again instead of counting a lost run
//!   ([`crate::lifecycle`]);
//! - once those statuses are settled, the agent withdraws from the offer
//!   layer (no subscription, so nothing of the node is offered);
//! - when the node is `ready` again the agent subscribes again and serves it;
//!   the lost tasks stay lost.
//!
//! It never launches anything, and a node whose status cannot be read (the
//! manager does not answer) is left as it was: not knowing is not down.
//! The node's state and the serving flag are [`crate::node_watch`]'s; this
//! module is what the agent does with them.

use std::sync::Arc;
use std::time::Duration;

use mpiswarm_mesos::{Reason, TaskState};

use crate::agent::Agent;
use crate::node_watch::{Health, Verdict, classify};
use crate::observe::Observed;
use crate::swarm::Swarm;

/// How long a withdrawal waits for the lost tasks' statuses to reach the
/// offer layer before it drops the subscription anyway (they are then
/// reported in the next SUBSCRIBE).
const SETTLE_DEADLINE: Duration = Duration::from_secs(10);

impl<S: Swarm + 'static> Agent<S> {
    /// Asks the manager for the node's status once and acts on it.
    pub async fn check_node(self: &Arc<Self>) {
        match self.swarm.node_status(&self.node_id).await {
            Ok((state, message)) => {
                let mut health = classify(state, message.as_deref());
                // Is the node gone? Its own engine refusing connections says
                // so at once, before Swarm's heartbeats have called it down,
                // and keeps it lost while Swarm still calls it ready.
                if let Some(engine) = self.swarm.node_engine_gone().await {
                    health = match health {
                        Health::Down { state, message } => Health::Gone { state, message, engine },
                        _ => Health::Gone { state: "gone".into(), message: String::new(), engine },
                    };
                }
                self.node_is(health).await
            }
            Err(e) => tracing::warn!(node = %self.node_id, error = %e, "cannot read the node's swarm status"),
        }
    }

    /// Acts on the node's health: on the first sight of it down, its tasks
    /// are lost and the agent withdraws; while it stays down, tasks that
    /// were being launched are lost too; back to ready, the agent serves again.
    pub async fn node_is(self: &Arc<Self>, health: Health) {
        match self.node.saw(health) {
            Verdict::Unchanged => {}
            Verdict::Suspect { down_for } => {
                tracing::info!(node = %self.node.name(), ?down_for, confirm = ?self.config.node_down_confirm, "swarm calls the node down; its tasks are lost if it stays so");
            }
            Verdict::Flapped { down_for } => {
                self.counters.node_flaps.inc();
                tracing::warn!(node = %self.node.name(), ?down_for, "the node is ready again within the confirmation period: its tasks stay");
            }
            Verdict::BackUp { down_for } => {
                tracing::info!(node = %self.node.name(), ?down_for, "the node is ready again: serving it");
                self.node.set_serving(true);
            }
            Verdict::Down { first, why } => {
                let lost = self.lose_tasks(&why).await;
                if first {
                    self.counters.node_losses.inc();
                    tracing::warn!(node = %self.node.name(), tasks_lost = lost, "{why}; withdrawing from the offer layer until it is ready");
                    if !self.tasks.outbox().wait_settled(SETTLE_DEADLINE).await {
                        tracing::warn!(deadline = ?SETTLE_DEADLINE, "statuses not yet taken by the offer layer; they go with the next SUBSCRIBE");
                    }
                    self.node.set_serving(false);
                }
            }
        }
    }

    /// The node's name for messages (its hostname when known).
    pub fn node_name(&self) -> String {
        self.node.name()
    }

    /// Names the node in messages (the agent knows only its id at first).
    pub fn name_node(&self, name: &str) {
        self.node.rename(name);
    }

    /// Whether the agent serves its node now (false while the node is down).
    pub fn serving(&self) -> bool {
        self.node.serving()
    }

    /// Reports every live task LOST with `why`, then removes their services
    /// (and stops following their output: the node cannot answer). Returns
    /// how many went.
    async fn lose_tasks(&self, why: &str) -> usize {
        let mut lost = Vec::new();
        for task in self.tasks.live(true) {
            let observed = Observed {
                reason: Some(Reason::ReasonAgentDisconnected),
                ..Observed::simple(TaskState::Lost, format!("{why}; the task's container cannot be reached"))
            };
            if self.tasks.transition_from(&task.service, task.state, observed) {
                lost.push(task.service);
            }
        }
        let count = lost.len();
        for name in lost {
            self.outputs.stop(&name).await;
            if let Err(e) = self.swarm.remove_service(&name).await {
                tracing::warn!(service = name, error = %e, "could not remove the service of a lost task; the resync retries");
            }
            self.objects.collect_later();
        }
        count
    }
}

/// Checks the node every `every`, as long as the agent runs.
pub async fn watch_node<S: Swarm + 'static>(agent: Arc<Agent<S>>, every: Duration) {
    loop {
        agent.check_node().await;
        tokio::time::sleep(every).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::AgentConfig;
    use crate::fake_swarm::FakeSwarm;
    use crate::lifecycle::tests::{agent, agent_with, fw, task};

    fn down() -> Health {
        Health::Down { state: "down".into(), message: "heartbeat failure".into() }
    }

    #[tokio::test]
    async fn a_node_called_down_for_less_than_the_confirmation_period_keeps_its_tasks() {
        let mut f = agent(FakeSwarm::default());
        assert_eq!(f.agent.config.node_down_confirm, Duration::from_secs(3), "the default --node-down-seconds");
        let (id, info) = fw();
        f.agent.launch(id, &info, None, vec![task("t1")]).await;
        assert_eq!(f.statuses.try_recv().map(|o| o.status.state).ok(), Some(TaskState::Starting));
        f.agent.node_is(down()).await;
        f.agent.node_is(down()).await;
        assert!(f.statuses.try_recv().is_err(), "nothing lost within the period");
        assert!(f.agent.serving(), "still serving");
        f.agent.node_is(Health::Ready).await;
        assert_eq!(f.agent.snapshot()[0].2, TaskState::Starting);
        assert_eq!((f.agent.counters.node_losses.get(), f.agent.counters.node_flaps.get()), (0, 1));
        assert!(f.agent.swarm.names().iter().any(|(k, _)| k == "service"), "the task's service stays");
    }

    /// Stands in for the session: settles whatever statuses are queued.
    fn settle(agent: &Arc<crate::agent::Agent<FakeSwarm>>) -> tokio::task::JoinHandle<()> {
        let agent = Arc::clone(agent);
        tokio::spawn(async move {
            loop {
                agent.tasks.outbox().settle_all();
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    }

    /// An agent on a fake swarm running one task, its statuses settled.
    async fn one_task() -> (crate::lifecycle::tests::Fixture, tokio::task::JoinHandle<()>) {
        let mut f = agent(FakeSwarm::default());
        let (id, info) = fw();
        f.agent.launch(id, &info, None, vec![task("t1")]).await;
        assert_eq!(f.statuses.try_recv().map(|o| o.status.state).ok(), Some(TaskState::Starting));
        let session = settle(&f.agent);
        (f, session)
    }

    #[tokio::test]
    async fn a_node_called_down_whose_engine_refuses_connections_loses_its_tasks_at_once() {
        let (mut f, session) = one_task().await;
        // Down while its engine answers: slow, not gone; nothing is lost yet.
        *f.agent.swarm.node_down.lock().unwrap() = Some("heartbeat failure".into());
        f.agent.check_node().await;
        assert!(f.statuses.try_recv().is_err(), "down for less than 3 s, engine answering: nothing lost");
        // Its engine now refuses connections: lost at this reading.
        *f.agent.swarm.engine_gone.lock().unwrap() = Some("its engine refuses connections (refused)".into());
        f.agent.check_node().await;
        let lost = f.statuses.try_recv().expect("lost without waiting the confirmation period").status;
        assert_eq!(lost.state, TaskState::Lost);
        let message = lost.message.unwrap_or_default();
        assert!(message.contains("heartbeat failure; its engine refuses connections (refused)"), "{message}");
        assert_eq!(f.agent.counters.node_losses.get(), 1);
        assert!(!f.agent.serving());
        session.abort();
    }

    #[tokio::test]
    async fn a_node_whose_engine_refuses_connections_is_lost_before_swarm_calls_it_down() {
        let (mut f, session) = one_task().await;
        f.agent.name_node("node2");
        *f.agent.swarm.engine_gone.lock().unwrap() = Some("its engine refuses connections (refused)".into());
        f.agent.check_node().await;
        let lost = f.statuses.try_recv().expect("lost while Swarm still calls the node ready").status;
        assert_eq!(lost.state, TaskState::Lost);
        let message = lost.message.unwrap_or_default();
        assert!(message.starts_with("swarm node node2 is gone; its engine refuses connections (refused)"), "{message}");
        assert!(!f.agent.serving(), "withdrawn");
        // Swarm still calls it ready, but its engine refuses: it stays lost and withdrawn.
        f.agent.check_node().await;
        assert!(!f.agent.serving(), "not served again while its engine refuses connections");
        // The node is back (its engine answers, Swarm calls it ready): served again.
        *f.agent.swarm.engine_gone.lock().unwrap() = None;
        f.agent.check_node().await;
        assert!(f.agent.serving());
        session.abort();
    }

    #[tokio::test]
    async fn a_launch_to_a_lost_node_is_dropped_at_once_and_starts_nothing_until_the_node_is_back() {
        let (mut f, session) = one_task().await;
        f.agent.name_node("node2");
        *f.agent.swarm.engine_gone.lock().unwrap() = Some("its engine refuses connections (refused)".into());
        f.agent.check_node().await;
        assert_eq!(f.statuses.try_recv().map(|o| o.status.state).ok(), Some(TaskState::Lost));
        let services = f.agent.swarm.names().len();
        // The offer layer still offered the node until the agent withdrew: a
        // launch to it never starts; a partition-aware framework hears
        // TASK_DROPPED (it re-places), another TASK_LOST.
        let (id, info) = fw();
        let mut aware = info.clone();
        let kind = Some(mpiswarm_mesos::framework::CapabilityType::PartitionAware);
        aware.capabilities.push(mpiswarm_mesos::framework::Capability { kind });
        f.agent.launch(id.clone(), &aware, None, vec![task("t2")]).await;
        f.agent.launch(id.clone(), &info, None, vec![task("t3")]).await;
        let ends: Vec<(String, TaskState, Option<Reason>, String)> = std::iter::from_fn(|| f.statuses.try_recv().ok())
            .map(|o| (o.status.task_id.value, o.status.state, o.status.reason, o.status.message.unwrap_or_default()))
            .collect();
        assert_eq!(ends.len(), 2, "{ends:?}");
        assert_eq!((ends[0].0.as_str(), ends[0].1), ("t2", TaskState::Dropped), "{ends:?}");
        assert_eq!((ends[1].0.as_str(), ends[1].1), ("t3", TaskState::Lost), "{ends:?}");
        for (_, _, reason, message) in &ends {
            assert_eq!(*reason, Some(Reason::ReasonAgentDraining));
            assert!(message.starts_with("not launched, the node is lost: swarm node node2 is gone"), "{message}");
        }
        assert_eq!(f.agent.swarm.names().len(), services, "no service created for a lost node");
        // Back: launches start again.
        *f.agent.swarm.engine_gone.lock().unwrap() = None;
        f.agent.check_node().await;
        f.agent.launch(id, &info, None, vec![task("t4")]).await;
        assert_eq!(f.statuses.try_recv().map(|o| o.status.state).ok(), Some(TaskState::Starting));
        session.abort();
    }

    #[tokio::test]
    async fn a_down_node_loses_its_tasks_withdraws_and_serves_again_when_ready() {
        let config = AgentConfig { node_down_confirm: Duration::ZERO, ..AgentConfig::default() };
        let mut f = agent_with(FakeSwarm::default(), config);
        let (id, info) = fw();
        f.agent.launch(id, &info, None, vec![task("t1")]).await;
        assert_eq!(f.statuses.try_recv().map(|o| o.status.state).ok(), Some(TaskState::Starting));
        let session = settle(&f.agent);
        f.agent.name_node("node2");
        f.agent.node_is(down()).await;
        let lost = f.statuses.try_recv().expect("a status for the task").status;
        assert_eq!((lost.state, lost.reason), (TaskState::Lost, Some(Reason::ReasonAgentDisconnected)));
        let message = lost.message.unwrap_or_default();
        assert!(message.contains("swarm node node2 is down: heartbeat failure"), "{message}");
        assert!(!f.agent.serving(), "withdrawn while the node is down");
        assert!(f.agent.swarm.names().iter().all(|(k, _)| k != "service"), "the lost task's service is removed");
        // Still down: a lost task is reported once.
        f.agent.node_is(Health::Down { state: "down".into(), message: String::new() }).await;
        assert!(f.statuses.try_recv().is_err(), "reported once");
        f.agent.node_is(Health::Unsure).await;
        assert!(!f.agent.serving(), "unknown is not ready");
        f.agent.node_is(Health::Ready).await;
        assert!(f.agent.serving(), "serving again once ready");
        assert!(f.statuses.try_recv().is_err(), "the lost task is not reported again");
        assert_eq!(f.agent.snapshot()[0].2, TaskState::Lost);
        assert_eq!(f.agent.counters.node_losses.get(), 1);
        session.abort();
    }
}
