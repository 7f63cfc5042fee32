//! Which replica of the offer layer leads, as this replica knows it, and the
//! one rule that follows from it for every API call: the leader answers; a
//! standby sends the caller on to the leader (307 to the same path, the
//! `Location` protocol-relative as Mesos writes it), or, while it knows of no
//! leader, answers 503 so the caller retries or tries another replica.
//!
//! Today the state is fixed at start (`--redirect-to HOST:PORT` makes a
//! standby); it lives in a [`watch`] so that an election can change it while
//! the server runs, and every handler reads it per request.

use tokio::sync::watch;

/// This replica's view of the leadership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leadership {
    /// This replica leads: it answers calls.
    Leading,
    /// Another replica leads, at `HOST:PORT` when known.
    Following { leader: Option<String> },
}

/// What a standby answers instead of handling a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotLeading {
    /// 307 with this `Location`.
    Redirect { location: String, message: String },
    /// 503: no leader is known.
    NoLeader { message: String },
}

impl Leadership {
    /// `Following` the leader at `redirect_to` when given, else `Leading`.
    pub fn from_flag(redirect_to: Option<&str>) -> Self {
        match redirect_to {
            Some(leader) => Self::Following { leader: Some(leader.to_owned()) },
            None => Self::Leading,
        }
    }

    /// The answer to a call for `path` (e.g. `/api/v1/scheduler`), or `None`
    /// when this replica leads and handles it. Pure.
    pub fn refuse(&self, path: &str) -> Option<NotLeading> {
        match self {
            Self::Leading => None,
            Self::Following { leader: Some(leader) } => Some(NotLeading::Redirect {
                location: format!("//{leader}{path}"),
                message: format!("This offer layer is not the leader; the leader is {leader}"),
            }),
            Self::Following { leader: None } => Some(NotLeading::NoLeader {
                message: "This offer layer is not the leader and no leader is known yet; retry, or call another \
                          replica"
                    .to_owned(),
            }),
        }
    }

    /// `HOST:PORT` of the leader, `own` (this replica's) when it leads.
    pub fn leader<'a>(&'a self, own: &'a str) -> Option<&'a str> {
        match self {
            Self::Leading => Some(own),
            Self::Following { leader } => leader.as_deref(),
        }
    }
}

/// The leadership every handler reads, and the handle that changes it.
#[derive(Debug)]
pub struct LeadershipCell {
    tx: watch::Sender<Leadership>,
}

impl LeadershipCell {
    pub fn new(initial: Leadership) -> Self {
        Self { tx: watch::channel(initial).0 }
    }

    /// The leadership now.
    pub fn get(&self) -> Leadership {
        self.tx.borrow().clone()
    }

    /// Changes it (an election won or lost).
    pub fn set(&self, leadership: Leadership) {
        self.tx.send_if_modified(|l| {
            let changed = *l != leadership;
            *l = leadership;
            changed
        });
    }

    /// Follows its changes.
    pub fn subscribe(&self) -> watch::Receiver<Leadership> {
        self.tx.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_leader_handles_a_standby_redirects_to_the_same_path_and_one_without_a_leader_says_so() {
        assert_eq!(Leadership::from_flag(None).refuse("/api/v1/scheduler"), None);
        let standby = Leadership::from_flag(Some("10.0.0.2:5050"));
        let Some(NotLeading::Redirect { location, message }) = standby.refuse("/api/v1/agent") else {
            panic!("a standby that knows the leader redirects")
        };
        assert_eq!(location, "//10.0.0.2:5050/api/v1/agent");
        assert!(message.ends_with("the leader is 10.0.0.2:5050"), "{message}");
        let lost = Leadership::Following { leader: None };
        assert!(matches!(lost.refuse("/api/v1/scheduler"), Some(NotLeading::NoLeader { .. })));
        assert_eq!(Leadership::Leading.leader("a:1"), Some("a:1"));
        assert_eq!(standby.leader("a:1"), Some("10.0.0.2:5050"));
        assert_eq!(lost.leader("a:1"), None);
    }

    #[test]
    fn a_change_reaches_the_subscribers_and_an_unchanged_value_does_not_wake_them() {
        let cell = LeadershipCell::new(Leadership::Leading);
        let rx = cell.subscribe();
        cell.set(Leadership::Leading);
        assert!(!rx.has_changed().unwrap_or(true), "same value, no wake-up");
        cell.set(Leadership::Following { leader: Some("b:2".into()) });
        assert!(rx.has_changed().unwrap_or(false));
        assert_eq!(cell.get(), Leadership::Following { leader: Some("b:2".into()) });
    }
}
