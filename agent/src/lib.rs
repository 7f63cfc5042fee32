//! The mpiswarm node agent: turns Mesos tasks into Docker Swarm services on
//! per-job overlay networks, pinned to its own node, and reports their states
//! back to the offer layer. Wire types come from `mpiswarm-mesos`; nothing
//! here redefines them.
//!
//! - [`plan`]: TaskInfo -> a checked, Docker-free [`plan::TaskPlan`] (all refusals);
//! - [`spec`]: plan -> Swarm service, network, secret and config specs;
//! - [`swarm`]: the Docker operations used, as a trait, over bollard;
//! - [`launch`]: group launch with rollback, and garbage collection;
//! - [`observe`]: Swarm task state -> Mesos task state;
//! - [`agent`]: the bookkeeping between events, Swarm and statuses;
//! - [`resync`]: Swarm -> statuses, removal of what ended or nobody owns;
//! - [`store`]: agent id and task records on disk, for restarts;
//! - [`node`]: Docker connection, swarm init, resources and attributes;
//! - [`http`]: `/healthz`, `/readyz`, `/metrics`, `/state`;
//! - [`run`]: `mpiswarm agent`;
//! - [`images`]: `mpiswarm images` (the rank image).

pub mod agent;
pub mod http;
pub mod images;
pub mod labels;
pub mod launch;
pub mod node;
pub mod observe;
pub mod plan;
pub mod resync;
pub mod run;
pub mod spec;
pub mod store;
pub mod swarm;

pub use run::{AgentArgs, AgentError, run};
