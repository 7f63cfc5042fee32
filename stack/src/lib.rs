//! mpiswarm's local-stack tooling: what makes a one-machine mpiswarm out of
//! the product crates, for users trying it and for the tests.
//! - [`images`]: `mpiswarm images`, the rank, node and mpiswarm images built
//!   with no registry, and loaded into nodes in containers;
//! - [`up`]: `mpiswarm up`, every component in this process;
//! - [`split`]: `mpiswarm up --split`, every component a child process,
//!   started again when it exits;
//! - [`components`]: the flags of `up` and the command line of each
//!   component, shared by both ways of running;
//! - [`credentials`]: `DATA/credentials/`, a principal and secret for every
//!   component and the offer layer's ACLs, so every hop authenticates;
//! - [`nodes`]: `mpiswarm up --nodes N`, a multi-node swarm of containers;
//! - [`offers_identity`]: the API server user, Role and kubeconfig of the
//!   offer layer's replicas (`--offers-replicas`);
//! - [`down`]: `mpiswarm down`, everything of a data dir stopped and removed;
//! - [`stack_file`]: `DATA/stack.json`, where a running stack is found;
//! - [`tenant`]: `mpiswarm tenant add`, a team's token, namespace, roles,
//!   RBAC and kubeconfig on the local stack;
//! - [`docker`]: the `docker` command line for the host engine;
//! - [`error`]: [`StackError`], what can go wrong in all of it.
//!
//! It drives the product crates (API server, offer layer, agent,
//! controller) only through their public starts and their command lines;
//! none of them depends on it, and nothing here is needed to run mpiswarm
//! on a real cluster.

pub mod components;
pub mod credentials;
pub mod docker;
pub mod down;
pub mod error;
pub mod images;
pub mod nodes;
pub mod offers_identity;
mod restarts;
pub mod split;
pub mod stack_file;
pub mod tenant;
pub mod up;

pub use components::UpArgs;
pub use down::DownArgs;
pub use error::StackError;
pub use images::{ImagesArgs, MPICH_IMAGE, MPISWARM_IMAGE, NODE_IMAGE, RANK_IMAGE, STOCK_IMAGE};
pub use stack_file::{DEFAULT_DATA_DIR, StackFile};
