//! The served node's health as the agent last saw it, and whether the agent
//! serves it now: [`classify`] reads Swarm's node status, [`NodeWatch::saw`]
//! turns each reading into what follows (nothing, serve again, or the tasks
//! are lost), with the message the lost tasks carry. What the agent then
//! does (reports the tasks LOST, removes their services, withdraws) is
//! [`crate::node_health`]'s.
//!
//! It owns its state behind one lock, held only inside its plain methods
//! (never across an `.await`); it never touches Swarm or the tasks.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use bollard::models::NodeState;
use tokio::sync::watch;

use crate::locks::lock;

/// What the manager says of the node, as the agent acts on it.
#[derive(Debug, Clone, PartialEq)]
pub enum Health {
    Ready,
    /// `down` or `disconnected`: its tasks are lost.
    Down {
        state: String,
        message: String,
    },
    /// `unknown` (a manager that just started has not heard from it yet):
    /// nothing is done either way.
    Unsure,
}

/// Classifies the node's Swarm status. Pure.
pub fn classify(state: Option<NodeState>, message: Option<&str>) -> Health {
    match state {
        Some(NodeState::READY) => Health::Ready,
        Some(s @ (NodeState::DOWN | NodeState::DISCONNECTED)) => {
            Health::Down { state: s.to_string(), message: message.unwrap_or_default().to_owned() }
        }
        Some(NodeState::UNKNOWN) | None => Health::Unsure,
    }
}

/// What a reading of the node's health means for the agent.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Verdict {
    /// Unsure, or ready as before.
    Unchanged,
    /// Ready again after it was seen down for this long: serve it again.
    BackUp { down_for: Duration },
    /// Down: its live tasks are lost with `why`; `first` on the first
    /// reading of this outage (then the agent withdraws).
    Down { first: bool, why: String },
}

#[derive(Debug)]
struct Seen {
    /// The node's hostname (or id), for messages.
    name: String,
    last_ready: Instant,
    /// When the agent first saw it down, while it is.
    down_since: Option<Instant>,
}

/// The node as the agent last saw it, and whether the agent serves it.
pub(crate) struct NodeWatch {
    seen: Mutex<Seen>,
    /// False while the node is down: the session then holds no subscription.
    serving: watch::Sender<bool>,
}

impl NodeWatch {
    /// A node named `name`, ready and served.
    pub(crate) fn new(name: String) -> Self {
        Self {
            seen: Mutex::new(Seen { name, last_ready: Instant::now(), down_since: None }),
            serving: watch::channel(true).0,
        }
    }

    /// The node's name for messages (its hostname when known).
    pub(crate) fn name(&self) -> String {
        lock(&self.seen).name.clone()
    }

    /// Names the node in messages (the agent knows only its id at first).
    pub(crate) fn rename(&self, name: &str) {
        lock(&self.seen).name = name.to_owned();
    }

    /// Takes in one reading of the node's health.
    pub(crate) fn saw(&self, health: Health) -> Verdict {
        let mut seen = lock(&self.seen);
        match health {
            Health::Unsure => Verdict::Unchanged,
            Health::Ready => {
                seen.last_ready = Instant::now();
                match seen.down_since.take() {
                    Some(since) => Verdict::BackUp { down_for: since.elapsed() },
                    None => Verdict::Unchanged,
                }
            }
            Health::Down { state, message } => {
                let first = seen.down_since.is_none();
                if first {
                    seen.down_since = Some(Instant::now());
                }
                let why = format!(
                    "swarm node {} is {state}{} (noticed {:.1} s after it was last seen ready)",
                    seen.name,
                    if message.is_empty() { String::new() } else { format!(": {message}") },
                    seen.last_ready.elapsed().as_secs_f64()
                );
                Verdict::Down { first, why }
            }
        }
    }

    /// Serves the node (true) or withdraws from the offer layer (false).
    pub(crate) fn set_serving(&self, serving: bool) {
        self.serving.send_replace(serving);
    }

    /// Whether the agent serves its node now.
    pub(crate) fn serving(&self) -> bool {
        *self.serving.borrow()
    }

    /// Whether the agent serves, as a receiver for the session.
    pub(crate) fn serving_updates(&self) -> watch::Receiver<bool> {
        self.serving.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn down_and_disconnected_lose_tasks_and_unknown_does_nothing() {
        assert_eq!(classify(Some(NodeState::READY), None), Health::Ready);
        assert_eq!(
            classify(Some(NodeState::DOWN), Some("heartbeat failure")),
            Health::Down { state: "down".into(), message: "heartbeat failure".into() }
        );
        assert!(matches!(classify(Some(NodeState::DISCONNECTED), None), Health::Down { .. }));
        assert_eq!(classify(Some(NodeState::UNKNOWN), None), Health::Unsure);
        assert_eq!(classify(None, None), Health::Unsure);
    }

    #[test]
    fn an_outage_is_first_once_names_the_node_and_ends_at_the_next_ready() {
        let watch = NodeWatch::new("id".into());
        watch.rename("node2");
        assert_eq!(watch.saw(Health::Ready), Verdict::Unchanged);
        let down = || Health::Down { state: "down".into(), message: "heartbeat failure".into() };
        let Verdict::Down { first: true, why } = watch.saw(down()) else { panic!("the first reading of an outage") };
        assert!(why.starts_with("swarm node node2 is down: heartbeat failure (noticed "), "{why}");
        assert!(matches!(watch.saw(down()), Verdict::Down { first: false, .. }));
        assert_eq!(watch.saw(Health::Unsure), Verdict::Unchanged, "not knowing is not ready");
        assert!(matches!(watch.saw(Health::Ready), Verdict::BackUp { .. }));
        assert_eq!(watch.saw(Health::Ready), Verdict::Unchanged);
        assert!(matches!(watch.saw(down()), Verdict::Down { first: true, .. }), "a new outage");
    }
}
