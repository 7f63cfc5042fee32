//! End-to-end tests of mpiswarm on a multi-node swarm, driven from outside
//! the way a user and an operator see it: the real `mpiswarm` binary
//! (`up --nodes N` makes the swarm of Docker engines in containers),
//! kubectl against its API server, and Swarm's own records on the manager.
//! Every check compares Swarm's truth with the MpiJob's status.
//!
//! - [`binary`]: the `mpiswarm` executable. `MPISWARM_BIN` if set, else
//!   `$CARGO build -p mpiswarm --bin mpiswarm --message-format=json`, once
//!   per test process, taking the executable from cargo's JSON. A crate
//!   cannot use another package's `CARGO_BIN_EXE_*`, and a guessed
//!   `target/debug/mpiswarm` may be stale; cargo releases its build lock
//!   before it runs tests, so the nested build does not deadlock, and after
//!   `make images` (which builds the same target) it is a no-op.
//! - [`cluster`]: [`Cluster`], one `up --nodes N --node-cpus C` in a fresh
//!   temp data dir; kubectl, `mpiswarm`, `docker exec` into nodes; `down`,
//!   which must leave no node container, volume or network behind.
//! - [`swarm`]: Swarm's tasks of mpiswarm's (node, state, reservation, job,
//!   role) from the manager's engine ([`engine`]: one GET over its socket).
//! - [`job`]: MpiJobs to apply and their status; following a job to its end
//!   while recording where Swarm ran it.
//! - [`leftovers`]: nothing of mpiswarm's left on any node.
//! - [`components`]: the processes of an `up --split` cluster, killed alone
//!   and seen started again; the offer layer's and agents' own state.
//! - [`events`]: the services Swarm created in a time window.
//! - [`shares`]: whether two roles' shares over a run follow their weights,
//!   within a bound derived from the run (pure).
//! - [`runner`]: one cluster per test binary, its cases in order, `down`, wall time.
//! - [`wait`]: polling with an overall deadline.
//! - [`images`]: the images the suite needs (built by `make images`), and
//!   the image of the binary under test, built for the stack test.

pub mod binary;
pub mod cluster;
pub mod components;
pub mod engine;
pub mod events;
pub mod images;
pub mod job;
pub mod leftovers;
pub mod runner;
pub mod shares;
pub mod swarm;
pub mod wait;

pub use cluster::{Cluster, Node};
pub use job::{Job, Status, Watched};
pub use leftovers::assert_nothing_left;
pub use swarm::{Swarm, Task};

/// The workspace root (examples/, stack/images/ are relative to it).
pub fn repo() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}
