//! Mesos v1 wire types and codecs: the one home of the Mesos vocabulary in
//! mpiswarm.
//!
//! - [`scheduler`]: the v1 scheduler API `Call` / `Event` (scheduler.proto),
//!   and everything they carry ([`ids`], [`resources`], [`framework`],
//!   [`task`], [`status`], [`offer`]).
//! - [`agent_api`]: the mpiswarm agent API spoken between node agents and
//!   the offer layer (documented in `offers/README.md`).
//! - [`master_error`]: what a master's ERROR message means (Mesos' own words).
//! - [`recordio`]: the RecordIO framing of event streams.
//! - [`roles`]: which strings are Mesos roles (`roles::validate`);
//!   [`quota`]: the operator API's `GET /quota` answer.
//! - [`client`]: async clients of the scheduler API (frameworks) and the
//!   agent API (node agents); [`redirect`]: which redirect they follow;
//! - [`agent_session`]: the agent's one subscribe / re-subscribe / UPDATE
//!   delivery loop, shared by `mpiswarm agent` and the test agent.
//! - [`basic_auth`]: how a server checks HTTP basic credentials against its
//!   Mesos credentials file, in constant time.
//! - [`credential`] and [`tls`]: principal and secret files, certificates,
//!   CA files, and the rule that nothing listens beyond loopback without them.
//!
//! JSON follows protobuf's JSON mapping as Mesos' stout writes and reads it:
//! field names in snake_case, enums as their names, `bytes` as base64,
//! unknown fields ignored, missing required fields rejected. This crate
//! does no I/O except in [`client`], [`agent_session`] and the file reading
//! of [`credential`] and [`tls`].

pub mod agent_api;
pub mod agent_session;
pub mod base64_bytes;
pub mod basic_auth;
pub mod client;
pub mod credential;

pub mod framework;
pub mod ids;
pub mod master_error;
pub mod offer;
pub mod quantities;
pub mod quota;

pub mod recordio;
pub mod redirect;
pub mod resources;
pub mod roles;
pub mod scheduler;
pub mod status;
pub mod task;
pub mod tls;

pub use base64_bytes::Bytes;
pub use framework::{Address, Filters, FrameworkInfo, MasterInfo, Url};
pub use ids::{AgentId, ExecutorId, FrameworkId, OfferId, TaskId};
pub use master_error::MasterError;
pub use offer::{Offer, Operation, OperationType};
pub use resources::{Attribute, Label, Labels, Resource, ValueType};
pub use roles::{RoleError, validate_role};
pub use status::{Reason, Source, TaskState, TaskStatus};
pub use task::{CommandInfo, ContainerInfo, ExecutorInfo, NetworkInfo, TaskGroupInfo, TaskInfo};
