//! Test support for mpiswarm, kept out of every production binary.
//!
//! - [`agent`]: [`TestAgent`], an in-process node agent that speaks the real
//!   agent API over HTTP and keeps no containers.
//!
//! Nothing here is used by `mpiswarm` itself; crates depend on it as a
//! dev-dependency only.

pub mod agent;

pub use agent::{TestAgent, TestTask};
