//! The mpiswarm offer layer: a Mesos-compatible master.
//!
//! - [`acl`]: the access control lists (`--acls`), Mesos style, pure;
//! - [`drf`]: the pure DRF sorter;
//! - [`allocator`]: the allocation loop (agents, filters, suppression);
//! - [`master`]: the master's bookkeeping (frameworks, agents, offers, tasks,
//!   status updates, failover) that turns calls into events;
//! - [`registry`]: what survives a restart, on disk (one replica);
//! - [`registry_api`]: the same in the API server, shared by replicas elected
//!   with a Lease, fenced by its resourceVersion;
//! - [`rbac`]: what those replicas may do in the API server (their Role);
//! - [`registrar`]: the thread that writes the registry, in order, off the
//!   async workers and the master's lock;
//! - [`http`]: the HTTP surface (scheduler API, agent API, state, metrics);
//! - [`leadership`]: which replica leads, and what a standby answers;
//! - [`election`]: the Lease election among replicas, and the fence on
//!   every offer and launch;
//! - [`server`]: arguments and the running server;
//! - [`fatal`]: where a panicked server task is reported, so the server stops;
//! - [`validation`]: stateless checks of scheduler calls, as Mesos words them.
//!
//! The test agent (no containers) lives in the `mpiswarm-testkit` crate.

pub mod acl;
pub mod allocator;
pub mod drf;
pub mod election;
pub mod fatal;
pub mod http;
pub mod leadership;
pub mod master;
pub mod rbac;
pub mod registrar;
pub mod registry;
pub mod registry_api;
pub mod server;
pub mod validation;

pub use server::{Error, OffersArgs, Running, USER_AGENT, run, start};
