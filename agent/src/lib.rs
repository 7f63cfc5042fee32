//! The mpiswarm node agent: turns Mesos tasks into Docker Swarm services on
//! per-job overlay networks, pinned to its own node, and reports their states
//! back to the offer layer. [`images`] builds the rank image those services
//! run. Wire types come from `mpiswarm-mesos`; nothing here redefines them.

pub mod images;
