//! Mesos identifiers. Each is a message `{"value": "..."}` on the wire and a
//! distinct Rust type, so a task id can never be passed where an agent id is
//! expected.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! mesos_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub struct $name {
            pub value: String,
        }

        impl $name {
            pub fn new(value: impl Into<String>) -> Self {
                Self { value: value.into() }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.value)
            }
        }

        impl From<&str> for $name {
            fn from(value: &str) -> Self {
                Self::new(value)
            }
        }
    };
}

mesos_id!(
    /// `FrameworkID`: assigned by the master on the first SUBSCRIBE.
    FrameworkId
);
mesos_id!(
    /// `OfferID`: one per offer; stale ones are ignored by the master.
    OfferId
);
mesos_id!(
    /// `AgentID` (formerly `SlaveID`): assigned by the master on agent registration.
    AgentId
);
mesos_id!(
    /// `TaskID`: chosen by the framework, unique within it.
    TaskId
);
mesos_id!(
    /// `ExecutorID`: chosen by the framework.
    ExecutorId
);
