//! What a master's ERROR event means, parsed once: the one place in
//! mpiswarm that reads the text of a master's error message. A framework
//! must act on two of them (its id is spent; another subscription took its
//! place), and the scheduler API says so only in words, so this module
//! matches Mesos' own words exactly. The offer layer sends the same words
//! through [`MasterError::message`], so it and a real Mesos master are read
//! alike. Owns no reaction to an error; that is the framework's.

/// A real Mesos master's refusal of a SUBSCRIBE whose framework id belongs
/// to a framework it has removed (torn down, or past its failover timeout):
/// `Error("Framework has been removed")` in `validateFramework`,
/// `src/master/master.cpp`.
pub const FRAMEWORK_REMOVED: &str = "Framework has been removed";

/// What a real Mesos master tells the old subscription when another one
/// subscribes with the same framework id:
/// `message.set_message("Framework failed over")` in `Master::subscribe`
/// and `Master::failoverFramework`, `src/master/master.cpp`.
pub const FRAMEWORK_FAILED_OVER: &str = "Framework failed over";

/// The message of an ERROR event (scheduler or agent API), or of the
/// ERROR that came first instead of SUBSCRIBED.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MasterError {
    /// [`FRAMEWORK_REMOVED`]: the framework id can never subscribe again;
    /// subscribe without it to become a new framework.
    FrameworkRemoved,
    /// [`FRAMEWORK_FAILED_OVER`]: another subscription took this framework
    /// id over; this stream gets no more events.
    FrameworkFailedOver,
    /// Any other message, verbatim (an invalid role, an authorization failure, ...).
    Other(String),
}

impl MasterError {
    /// Reads a master's message. Mesos sends the texts above verbatim, so
    /// only an exact match (surrounding whitespace aside) is one of them.
    pub fn parse(message: &str) -> Self {
        match message.trim() {
            FRAMEWORK_REMOVED => Self::FrameworkRemoved,
            FRAMEWORK_FAILED_OVER => Self::FrameworkFailedOver,
            _ => Self::Other(message.to_owned()),
        }
    }

    /// The message as a master sends it.
    pub fn message(&self) -> &str {
        match self {
            Self::FrameworkRemoved => FRAMEWORK_REMOVED,
            Self::FrameworkFailedOver => FRAMEWORK_FAILED_OVER,
            Self::Other(message) => message,
        }
    }
}

impl std::fmt::Display for MasterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::FrameworkRemoved => write!(
                f,
                "{FRAMEWORK_REMOVED:?}: the master removed this framework (torn down, or disconnected longer than its failover timeout); subscribe without a framework id"
            ),
            Self::FrameworkFailedOver => write!(
                f,
                "{FRAMEWORK_FAILED_OVER:?}: another scheduler subscribed with this framework id; this subscription is over"
            ),
            Self::Other(message) => write!(f, "{message:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_real_masters_words_are_recognised_exactly() {
        assert_eq!(MasterError::parse("Framework has been removed"), MasterError::FrameworkRemoved);
        assert_eq!(MasterError::parse("Framework failed over\n"), MasterError::FrameworkFailedOver);
        // Other messages that merely mention the words are not these errors.
        let role = "role 'a b' contains ' '; the framework has been removed from nothing";
        assert_eq!(MasterError::parse(role), MasterError::Other(role.to_owned()));
        assert_eq!(MasterError::parse("Framework disconnected").message(), "Framework disconnected");
    }

    #[test]
    fn every_known_error_parses_back_from_its_message() {
        for e in [MasterError::FrameworkRemoved, MasterError::FrameworkFailedOver, MasterError::Other("x".into())] {
            assert_eq!(MasterError::parse(e.message()), e);
        }
    }
}
