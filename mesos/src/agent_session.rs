//! The agent side of the agent API as one loop, shared by `mpiswarm agent`
//! and the test agent of `mpiswarm-testkit`:
//!
//! - the **subscription**: SUBSCRIBE with the agent's id (if it has one) and
//!   every task it reports, hand each event to the agent, and re-subscribe
//!   with backoff when the stream ends, breaks, sends ERROR or falls silent;
//! - the **outbox**: each status POSTed as UPDATE, in order, until the offer
//!   layer takes it (retried with backoff across reconnects); a 400 means it
//!   never will, and the status is dropped with an error log.
//!
//! - **withdrawal**: an agent that cannot serve for a while (its node is
//!   down) says so through [`AgentSide::serving`]; the loop then stops
//!   reading the stream, posts WITHDRAW with the tasks the agent knows (a
//!   LAUNCH it never read is dropped by the offer layer) and drops its
//!   subscription, so the offer layer rescinds the agent's offers and makes
//!   no new ones, and subscribes again as soon as it can serve.
//!
//! Deadlines: one SUBSCRIBE (connecting and receiving SUBSCRIBED) has an
//! overall deadline that nothing extends; a subscribed stream is given up
//! when no event at all arrives for `silent_heartbeats` heartbeat intervals
//! (each event proves the stream alive, so the silence is counted from the
//! last one); each UPDATE POST has its own deadline.
//!
//! What a task is and what an event means is the [`AgentSide`]'s business;
//! this module never looks inside an event.

use crate::agent_api::{AgentInfo, Event, EventType, ReportedTask};
use crate::client::{AgentClient, Backoff, ClientError};
use crate::{AgentId, FrameworkId, TaskStatus};
use futures::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// A status on its way to the offer layer.
#[derive(Debug, Clone, PartialEq)]
pub struct Outgoing {
    pub framework_id: FrameworkId,
    pub status: TaskStatus,
}

/// What the loop needs from an agent. Every method is called without any
/// lock of the loop held, and must not block.
pub trait AgentSide: Send + Sync + 'static {
    /// The AgentInfo to SUBSCRIBE with; its `id` is the id the agent has now
    /// (none on its very first SUBSCRIBE).
    fn agent_info(&self) -> AgentInfo;
    /// The id the offer layer assigned, once it did (UPDATEs need it).
    fn agent_id(&self) -> Option<AgentId>;
    /// The tasks to report on SUBSCRIBE (terminal ones until acknowledged).
    fn reported_tasks(&self) -> Vec<ReportedTask>;
    /// SUBSCRIBED assigned (or confirmed) `agent_id`: keep it for the next SUBSCRIBE.
    fn subscribed(&self, agent_id: &AgentId);
    /// One event of the stream (SUBSCRIBED excepted).
    fn handle(&self, event: Event);
    /// The event stream went up (`true`) or down (`false`).
    fn connected(&self, _up: bool) {}
    /// The offer layer accepted this UPDATE.
    fn delivered(&self, _update: &Outgoing) {}
    /// The loop is done with this UPDATE: accepted, or refused for good
    /// (400). Called after [`Self::delivered`], in the outbox's order.
    fn settled(&self, _update: &Outgoing) {}
    /// Whether the agent can serve now; `None` (the default): always. While
    /// it says `false` the loop holds no subscription (UPDATEs wait); when
    /// it turns `true` the loop subscribes at once. An agent that withdraws
    /// should wait until the statuses it queued before are settled.
    fn serving(&self) -> Option<watch::Receiver<bool>> {
        None
    }
}

/// Timing of the loop.
#[derive(Debug, Clone, Copy)]
pub struct SessionConfig {
    /// Between failed SUBSCRIBEs (and before re-subscribing after a stream ended).
    pub subscribe_backoff: Backoff,
    /// Between attempts to deliver one UPDATE.
    pub update_backoff: Backoff,
    /// Overall deadline of one SUBSCRIBE, from the POST to the SUBSCRIBED event.
    pub subscribe_timeout: Duration,
    /// Deadline of one UPDATE POST.
    pub update_timeout: Duration,
    /// A stream without any event for this many heartbeat intervals is dead.
    pub silent_heartbeats: f64,
    /// The least silence that counts as dead, however short the heartbeats.
    pub min_silence: Duration,
    /// How often the other replicas of the offer layer are asked who leads
    /// ([`AgentClient::leader_elsewhere`]), when there are others.
    pub leader_check: Duration,
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            subscribe_backoff: Backoff { initial: Duration::from_millis(200), max: Duration::from_secs(10) },
            update_backoff: Backoff { initial: Duration::from_millis(100), max: Duration::from_secs(5) },
            subscribe_timeout: Duration::from_secs(30),
            update_timeout: Duration::from_secs(30),
            silent_heartbeats: 3.0,
            min_silence: Duration::from_secs(3),
            leader_check: Duration::from_secs(2),
        }
    }
}

impl SessionConfig {
    /// How long a stream whose heartbeat interval is `heartbeat_seconds` may stay silent.
    pub fn silence(&self, heartbeat_seconds: f64) -> Duration {
        Duration::try_from_secs_f64(heartbeat_seconds * self.silent_heartbeats)
            .unwrap_or(self.min_silence)
            .max(self.min_silence)
    }
}

/// Runs the subscription and the outbox of `side` until the outbox closes
/// (in practice: until the task running it is aborted).
pub async fn run<A: AgentSide>(
    client: AgentClient,
    side: Arc<A>,
    outbox: mpsc::UnboundedReceiver<Outgoing>,
    config: SessionConfig,
) {
    let subscription = subscribe_forever(client.clone(), Arc::clone(&side), config);
    let delivery = deliver(client, side, outbox, config);
    tokio::select! {
        () = subscription => {}
        () = delivery => {}
    }
}

/// Why one subscription ended.
#[derive(Debug)]
enum Ended {
    Failed(ClientError),
    SubscribeTimedOut,
    Stream(&'static str),
    Silent(Duration),
    /// Another replica holds the lead; calls now go to it.
    LeaderMoved(String),
    Withdrawn,
}

async fn subscribe_forever<A: AgentSide>(client: AgentClient, side: Arc<A>, config: SessionConfig) {
    let mut attempt = 0u32;
    let mut serving = side.serving();
    loop {
        if let Some(serving) = serving.as_mut()
            && !*serving.borrow()
        {
            tracing::info!("not serving: no subscription until the agent can serve again");
            until(serving, true).await;
            tracing::info!("serving again: subscribing");
            attempt = 0;
        }
        let ended = session(&client, side.as_ref(), config, &mut attempt, serving.as_mut()).await;
        side.connected(false);
        match &ended {
            Ended::Withdrawn => {
                tracing::warn!("the agent cannot serve: subscription dropped, the offer layer offers nothing of it");
                continue;
            }
            Ended::Failed(e) => tracing::warn!(error = %e, attempt, "SUBSCRIBE failed; retrying"),
            Ended::SubscribeTimedOut => {
                tracing::warn!(timeout = ?config.subscribe_timeout, attempt, "no SUBSCRIBED in time; retrying")
            }
            Ended::Stream(why) => tracing::warn!(why, "event stream ended; re-subscribing"),
            Ended::LeaderMoved(leader) => {
                tracing::warn!(leader, "another replica leads the offer layer; re-subscribing there")
            }
            Ended::Silent(silence) => {
                // A silent master may be alive and stopped (no connection
                // is refused): the next replica is asked first.
                let next = client.move_on();
                tracing::warn!(?silence, next, "no event (not even a heartbeat); re-subscribing");
            }
        }
        tokio::time::sleep(config.subscribe_backoff.delay(attempt)).await;
        attempt = attempt.saturating_add(1);
    }
}

/// Resolves once `serving` says `wanted`; never if its sender is gone (the
/// agent is ending, and its loop with it).
async fn until(serving: &mut watch::Receiver<bool>, wanted: bool) {
    if serving.wait_for(|now| *now == wanted).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// One SUBSCRIBE and, if it succeeds, its stream until it ends. `attempt`
/// is reset once SUBSCRIBED arrives. When `serving` turns false the
/// session ends: before SUBSCRIBED by dropping the call; on the stream by
/// reading no further event and posting WITHDRAW ([`withdraw`]).
async fn session<A: AgentSide>(
    client: &AgentClient,
    side: &A,
    config: SessionConfig,
    attempt: &mut u32,
    serving: Option<&mut watch::Receiver<bool>>,
) -> Ended {
    let withdrawn = async {
        match serving {
            Some(serving) => until(serving, false).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(withdrawn);
    let subscribe = client.subscribe(side.agent_info(), side.reported_tasks());
    // Also while the SUBSCRIBE waits: a standby may have sent it on to a
    // leader that is silent, and another replica may lead already.
    let moved = client.leader_elsewhere(config.leader_check);
    tokio::pin!(moved);
    let subscribed = tokio::select! {
        subscribed = tokio::time::timeout(config.subscribe_timeout, subscribe) => subscribed,
        leader = &mut moved => return Ended::LeaderMoved(leader),
        () = &mut withdrawn => return Ended::Withdrawn,
    };
    let mut sub = match subscribed {
        Err(_) => return Ended::SubscribeTimedOut,
        Ok(Err(e)) => return Ended::Failed(e),
        Ok(Ok(sub)) => sub,
    };
    *attempt = 0;
    tracing::info!(agent_id = %sub.subscribed.agent_id, "subscribed");
    side.subscribed(&sub.subscribed.agent_id);
    side.connected(true);
    let silence = config.silence(sub.subscribed.heartbeat_interval_seconds);
    loop {
        let event = tokio::select! {
            event = tokio::time::timeout(silence, sub.events.next()) => event,
            leader = &mut moved => return Ended::LeaderMoved(leader),
            () = &mut withdrawn => {
                withdraw(client, side, config).await;
                return Ended::Withdrawn;
            }
        };
        match event {
            Err(_) => return Ended::Silent(silence),
            Ok(None) => return Ended::Stream("the offer layer closed it"),
            Ok(Some(Err(e))) => {
                tracing::warn!(error = %e, "event stream broken");
                return Ended::Stream("it broke");
            }
            Ok(Some(Ok(event))) => {
                let error = event.kind == EventType::Error;
                if error {
                    tracing::warn!(message = ?event.error.as_ref().map(|e| &e.message), "offer layer sent ERROR");
                }
                side.handle(event);
                if error {
                    return Ended::Stream("the offer layer sent ERROR");
                }
            }
        }
    }
}

/// Tells the offer layer that the agent withdraws, listing the tasks it
/// knows once it has stopped reading the stream: a LAUNCH still on the
/// stream never reaches the agent, and the offer layer ends it as dropped
/// rather than holding it until the agent is lost. One attempt within the
/// UPDATE deadline; if it fails, the subscription is dropped all the same
/// (the offer layer then treats the agent as disconnected, as before).
async fn withdraw<A: AgentSide>(client: &AgentClient, side: &A, config: SessionConfig) {
    let Some(agent_id) = side.agent_id() else { return };
    let tasks = side.reported_tasks();
    match tokio::time::timeout(config.update_timeout, client.withdraw(&agent_id, tasks)).await {
        Ok(Ok(())) => tracing::info!("WITHDRAW taken: the offer layer ends the stream"),
        Ok(Err(e)) => tracing::warn!(error = %e, "WITHDRAW failed; dropping the subscription anyway"),
        Err(_) => {
            tracing::warn!(timeout = ?config.update_timeout, "WITHDRAW not answered; dropping the subscription anyway")
        }
    }
}

/// POSTs each status in order, retrying until the offer layer takes it.
async fn deliver<A: AgentSide>(
    client: AgentClient,
    side: Arc<A>,
    mut outbox: mpsc::UnboundedReceiver<Outgoing>,
    config: SessionConfig,
) {
    while let Some(item) = outbox.recv().await {
        let mut attempt = 0u32;
        loop {
            let Some(agent_id) = side.agent_id() else {
                tokio::time::sleep(config.update_backoff.delay(attempt)).await;
                attempt = attempt.saturating_add(1);
                continue;
            };
            let post = client.update(&agent_id, &item.framework_id, item.status.clone());
            match tokio::time::timeout(config.update_timeout, post).await {
                Ok(Ok(())) => {
                    side.delivered(&item);
                    side.settled(&item);
                    break;
                }
                Ok(Err(e)) if e.status() == Some(400) => {
                    tracing::error!(error = %e, task = %item.status.task_id, "offer layer refused an update; dropped");
                    side.settled(&item);
                    break;
                }
                Ok(Err(e)) => tracing::debug!(error = %e, attempt, "UPDATE not accepted yet; retrying"),
                Err(_) => tracing::debug!(timeout = ?config.update_timeout, attempt, "UPDATE timed out; retrying"),
            }
            tokio::time::sleep(config.update_backoff.delay(attempt)).await;
            attempt = attempt.saturating_add(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silence_is_heartbeats_times_the_interval_but_never_below_the_floor() {
        let c = SessionConfig { min_silence: Duration::from_secs(1), ..SessionConfig::default() };
        assert_eq!(c.silence(15.0), Duration::from_secs(45));
        assert_eq!(c.silence(0.1), Duration::from_secs(1));
        assert_eq!(c.silence(f64::NAN), Duration::from_secs(1));
        assert_eq!(c.silence(-1.0), Duration::from_secs(1));
    }
}
