//! The served node's health as the agent last saw it, and whether the agent
//! serves it now: [`classify`] reads Swarm's node status, [`NodeWatch::saw`]
//! turns each reading into what follows (nothing, serve again, or the tasks
//! are lost), with the message the lost tasks carry.
//!
//! A node is lost only once Swarm has called it down for the confirmation
//! period (`--node-down-seconds`): on an overloaded machine a manager can
//! mark a live node down for a heartbeat or two, and losing its tasks then
//! would make a slow machine fail jobs. A node that is ready again within
//! the period has only flapped; its tasks stay. A node Swarm calls down
//! whose own engine refuses connections ([`Health::Gone`]) is gone, not
//! slow: it is lost at once. Readings the manager could
//! not give (`unknown`) neither start nor end an outage. What the agent then
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
    /// Down, and its own engine refuses connections (`engine` says how): its
    /// container or machine stopped, so there is nothing to wait for.
    Gone {
        state: String,
        message: String,
        engine: String,
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
    /// Down, but not yet for the confirmation period: nothing is done yet.
    Suspect { down_for: Duration },
    /// Ready again within the confirmation period: it only flapped, its
    /// tasks stay.
    Flapped { down_for: Duration },
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
    /// Why the node is lost, once this outage is confirmed (its tasks were
    /// lost): nothing can be launched there until it is ready again.
    outage: Option<String>,
}

/// The node as the agent last saw it, and whether the agent serves it.
pub(crate) struct NodeWatch {
    seen: Mutex<Seen>,
    /// How long Swarm must call the node down before its tasks are lost.
    confirm: Duration,
    /// False while the node is down: the session then holds no subscription.
    serving: watch::Sender<bool>,
}

impl NodeWatch {
    /// A node named `name`, ready and served, lost once it has been down
    /// for `confirm`.
    pub(crate) fn new(name: String, confirm: Duration) -> Self {
        Self {
            seen: Mutex::new(Seen { name, last_ready: Instant::now(), down_since: None, outage: None }),
            confirm,
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

    /// Takes in one reading of the node's health, made now.
    pub(crate) fn saw(&self, health: Health) -> Verdict {
        self.saw_at(health, Instant::now())
    }

    /// Takes in one reading of the node's health, made at `now`.
    fn saw_at(&self, health: Health, now: Instant) -> Verdict {
        let mut seen = lock(&self.seen);
        match health {
            Health::Unsure => Verdict::Unchanged,
            Health::Ready => {
                seen.last_ready = now;
                let Some(since) = seen.down_since.take() else { return Verdict::Unchanged };
                let down_for = now.saturating_duration_since(since);
                match seen.outage.take() {
                    Some(_) => Verdict::BackUp { down_for },
                    None => Verdict::Flapped { down_for },
                }
            }
            Health::Down { .. } | Health::Gone { .. } => {
                let since = *seen.down_since.get_or_insert(now);
                let down_for = now.saturating_duration_since(since);
                let (state, message, engine) = match health {
                    Health::Gone { state, message, engine } => (state, message, Some(engine)),
                    Health::Down { state, message } => (state, message, None),
                    Health::Ready | Health::Unsure => return Verdict::Unchanged,
                };
                if seen.outage.is_none() && engine.is_none() && down_for < self.confirm {
                    return Verdict::Suspect { down_for };
                }
                let first = seen.outage.is_none();
                let why = format!(
                    "swarm node {} is {state}{}{} (down for {:.1} s, {:.1} s after it was last seen ready)",
                    seen.name,
                    if message.is_empty() { String::new() } else { format!(": {message}") },
                    engine.map(|e| format!("; {e}")).unwrap_or_default(),
                    down_for.as_secs_f64(),
                    now.saturating_duration_since(seen.last_ready).as_secs_f64()
                );
                seen.outage = Some(why.clone());
                Verdict::Down { first, why }
            }
        }
    }

    /// Why the node is lost, while its outage is confirmed: from the reading
    /// that lost its tasks until it is ready again.
    pub(crate) fn outage(&self) -> Option<String> {
        lock(&self.seen).outage.clone()
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

    fn down() -> Health {
        Health::Down { state: "down".into(), message: "heartbeat failure".into() }
    }

    #[test]
    fn an_outage_is_first_once_names_the_node_and_ends_at_the_next_ready() {
        let watch = NodeWatch::new("id".into(), Duration::ZERO);
        watch.rename("node2");
        assert_eq!(watch.saw(Health::Ready), Verdict::Unchanged);
        let Verdict::Down { first: true, why } = watch.saw(down()) else { panic!("the first reading of an outage") };
        assert!(why.starts_with("swarm node node2 is down: heartbeat failure (down for "), "{why}");
        assert!(matches!(watch.saw(down()), Verdict::Down { first: false, .. }));
        assert_eq!(watch.saw(Health::Unsure), Verdict::Unchanged, "not knowing is not ready");
        assert!(matches!(watch.saw(Health::Ready), Verdict::BackUp { .. }));
        assert_eq!(watch.saw(Health::Ready), Verdict::Unchanged);
        assert!(matches!(watch.saw(down()), Verdict::Down { first: true, .. }), "a new outage");
    }

    #[test]
    fn a_node_is_lost_only_once_it_was_down_for_the_confirmation_period() {
        let watch = NodeWatch::new("node2".into(), Duration::from_secs(3));
        let t0 = Instant::now();
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        assert_eq!(watch.saw_at(Health::Ready, at(0.0)), Verdict::Unchanged);
        assert_eq!(watch.saw_at(down(), at(1.0)), Verdict::Suspect { down_for: Duration::ZERO });
        assert_eq!(watch.saw_at(Health::Unsure, at(2.0)), Verdict::Unchanged, "not knowing neither ends nor confirms");
        assert_eq!(watch.saw_at(down(), at(3.5)), Verdict::Suspect { down_for: Duration::from_secs_f64(2.5) });
        let Verdict::Down { first: true, why } = watch.saw_at(down(), at(4.0)) else { panic!("down for 3 s: lost") };
        assert!(why.contains("(down for 3.0 s, 4.0 s after it was last seen ready)"), "{why}");
        assert!(matches!(watch.saw_at(down(), at(5.0)), Verdict::Down { first: false, .. }));
        assert_eq!(watch.saw_at(Health::Ready, at(6.0)), Verdict::BackUp { down_for: Duration::from_secs(5) });
        // A flap shorter than the period: nothing was lost, nothing to serve again.
        assert_eq!(watch.saw_at(down(), at(7.0)), Verdict::Suspect { down_for: Duration::ZERO });
        assert_eq!(watch.saw_at(down(), at(9.5)), Verdict::Suspect { down_for: Duration::from_secs_f64(2.5) });
        assert_eq!(watch.saw_at(Health::Ready, at(10.0)), Verdict::Flapped { down_for: Duration::from_secs(3) });
        // The next outage counts from its own first reading.
        assert_eq!(watch.saw_at(down(), at(11.0)), Verdict::Suspect { down_for: Duration::ZERO });
        assert!(matches!(watch.saw_at(down(), at(14.0)), Verdict::Down { first: true, .. }));
    }

    #[test]
    fn a_node_whose_engine_is_gone_is_lost_at_the_first_reading() {
        let watch = NodeWatch::new("node2".into(), Duration::from_secs(3));
        let t0 = Instant::now();
        let gone = Health::Gone {
            state: "down".into(),
            message: "heartbeat failure".into(),
            engine: "its engine refuses connections (connection refused)".into(),
        };
        let Verdict::Down { first: true, why } = watch.saw_at(gone.clone(), t0) else { panic!("gone: lost at once") };
        assert_eq!(
            why,
            "swarm node node2 is down: heartbeat failure; its engine refuses connections (connection refused) \
             (down for 0.0 s, 0.0 s after it was last seen ready)"
        );
        assert!(matches!(watch.saw_at(down(), t0 + Duration::from_secs(1)), Verdict::Down { first: false, .. }));
        assert!(matches!(watch.saw_at(Health::Ready, t0 + Duration::from_secs(2)), Verdict::BackUp { .. }));
    }
}
