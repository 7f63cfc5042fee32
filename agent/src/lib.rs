//! The mpiswarm node agent: turns Mesos tasks into Docker Swarm services on
//! per-job overlay networks, pinned to its own node, and reports their states
//! back to the offer layer. Wire types come from `mpiswarm-mesos`; nothing
//! here redefines them.
//!
//! - [`plan`]: TaskInfo -> a checked, Docker-free [`plan::TaskPlan`] (all refusals);
//! - [`mounts`]: Mesos volumes -> named volumes, allowed host paths, tmpfs;
//! - [`existing`]: whether a task may use a volume or network found
//!   already there under the name it asks for;
//! - [`spec`]: plan -> Swarm service, network, secret and config specs;
//! - [`swarm`]: the Docker operations used, as a trait, over bollard;
//! - [`observe`]: Swarm task state -> Mesos task state;
//! - [`agent`]: the agent, made of owned parts (its module doc says why
//!   parts and not one actor):
//!   - [`tasks`]: the task table (records, statuses, launch and kill marks);
//!   - [`launch`]: group launch with rollback, and garbage collection, one
//!     at a time;
//!   - [`output`]: each task's stdout and stderr followed from Docker into
//!     its [`sandbox`] (bounded, kept like a Mesos sandbox);
//!   - [`node_watch`]: the served node's health, and whether it is served;
//!   - [`orphans`]: services no task owns, until their grace ends;
//!   - [`start_retries`]: tasks the engine could not start, started again
//!     before their failure is reported;
//! - [`events`]: what each offer-layer event does;
//! - [`lifecycle`]: launch (all or nothing), kill, acknowledge;
//! - [`statuses`]: the outbox of statuses and the TaskStatus they carry;
//! - [`files`]: `/files/read` and `/files/browse` over the sandbox;
//! - [`resync`]: Swarm -> statuses, removal of what ended or nobody owns;
//! - [`store`]: agent id and task records on disk, for restarts;
//! - [`writer`]: the one thread that writes the data directory, in order;
//! - [`locks`]: the one policy for poisoned locks;
//! - [`watchdog`]: spawned work whose panic ends the process;
//! - [`node`]: Docker connection, swarm init, resources and attributes;
//! - [`node_health`]: the served node down in Swarm -> its tasks LOST, the
//!   agent withdrawn from the offer layer until the node is ready;
//! - [`http`]: `/healthz`, `/readyz`, `/metrics`, `/state`;
//! - [`run`]: `mpiswarm agent`.

pub mod agent;
pub mod events;
pub mod existing;
#[cfg(test)]
mod fake_swarm;
pub mod files;
pub mod http;
pub mod labels;
pub mod launch;
pub mod lifecycle;
mod locks;
pub mod mounts;
pub mod node;
pub mod node_health;
pub mod node_watch;
pub mod observe;
mod orphans;
pub mod output;
pub mod plan;
pub mod resync;
pub mod run;
pub mod sandbox;
pub mod spec;
mod start_retries;
pub mod statuses;
pub mod store;
pub mod swarm;
pub mod tasks;
pub mod watchdog;
pub mod writer;

pub use run::{AgentArgs, AgentError, run};
