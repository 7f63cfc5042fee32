//! What each event of the offer layer's stream does to the agent: LAUNCH and
//! LAUNCH_GROUP start a group, KILL kills a task, SHUTDOWN kills every task
//! of a framework (or of one executor), ACKNOWLEDGED lets a task be
//! forgotten. Long work runs in its own watched task so the stream keeps
//! flowing; this module decides nothing about Swarm.

use std::sync::Arc;

use mpiswarm_mesos::agent_api::{Event, EventType};
use tracing::Instrument as _;

use crate::agent::Agent;
use crate::swarm::Swarm;

impl<S: Swarm + 'static> Agent<S> {
    /// Handles one event of the offer layer's stream.
    pub fn handle(self: &Arc<Self>, event: Event) {
        match event.kind {
            EventType::Launch => {
                if let Some(l) = event.launch {
                    let me = Arc::clone(self);
                    let name = format!("launch {}", l.task_info.task_id);
                    let span = tracing::info_span!("launch", framework = %l.framework_id, task = %l.task_info.task_id);
                    let work =
                        async move { me.launch(l.framework_id, &l.framework_info, None, vec![l.task_info]).await };
                    self.spawner.spawn(name, work.instrument(span));
                }
            }
            EventType::LaunchGroup => {
                if let Some(l) = event.launch_group {
                    let me = Arc::clone(self);
                    let name = format!("launch group {}", l.executor_info.executor_id);
                    let span = tracing::info_span!("launch_group", framework = %l.framework_id, executor = %l.executor_info.executor_id);
                    let work = async move {
                        me.launch(l.framework_id, &l.framework_info, Some(l.executor_info), l.task_group.tasks).await
                    };
                    self.spawner.spawn(name, work.instrument(span));
                }
            }
            EventType::Kill => {
                if let Some(k) = event.kill {
                    let me = Arc::clone(self);
                    let name = format!("kill {}", k.task_id);
                    self.spawner.spawn(name, async move { me.kill_task(&k.framework_id, &k.task_id).await });
                }
            }
            EventType::Shutdown => {
                if let Some(s) = event.shutdown {
                    let victims = self.tasks.shutdown_victims(&s);
                    for task_id in victims {
                        let me = Arc::clone(self);
                        let fw = s.framework_id.clone();
                        self.spawner.spawn(format!("kill {task_id}"), async move { me.kill_task(&fw, &task_id).await });
                    }
                }
            }
            EventType::Acknowledged => {
                if let Some(a) = event.acknowledged {
                    self.acknowledged(&a.framework_id, &a.task_id, &a.uuid);
                }
            }
            EventType::Subscribed | EventType::Heartbeat | EventType::Message | EventType::Unknown => {}
            EventType::Error => {
                tracing::warn!(message = ?event.error.map(|e| e.message), "offer layer sent ERROR");
            }
        }
    }
}
