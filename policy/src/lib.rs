//! mpiswarm's placement policy engine: decides on which agents the ranks of an
//! MPI job run, following the job's workload profile (the Scylla paper's
//! idea): network-intensive jobs are packed onto few nodes so that co-located
//! ranks talk over shared memory, CPU- and memory-intensive jobs are spread so
//! that ranks do not contend for a node's cores, caches and memory bandwidth.
//!
//! Pure functions over plain data: no I/O, no clock (time is an argument), no
//! async runtime, and no dependency on other mpiswarm crates. The controller
//! maps the MpiJob spec into [`JobDemand`] and the offers into
//! [`AgentCapacity`].
//!
//! Gang semantics hold everywhere: a job gets all its ranks or nothing, one
//! worker per agent hosts all the ranks placed there (`slots = ranks`), and
//! the launcher takes its own share on the first node.
//!
//! ```
//! use mpiswarm_policy::{place, AgentCapacity, FreeResources, JobDemand, Profile, Resources};
//!
//! let offers: Vec<_> = (1..=4)
//!     .map(|i| AgentCapacity::new(&format!("a{i}"), &format!("node{i}"), FreeResources::new(4.5, 8192.0)))
//!     .collect();
//! let job = JobDemand::new(8, Resources::new(1.0, 512.0, 0.0)).with_profile(Profile::Network);
//! let placement = place(&job, &offers).expect("fits");
//! assert_eq!(placement.shape(), vec![4, 4]);
//! ```

mod auto;
mod candidate;
mod capacity;
mod cluster;
mod demand;
mod engine;
mod explain;
mod ledger;
mod pack;
mod placement;
mod queue;
mod quota;
mod score;
mod spread;
mod unfit;

pub use auto::{AppliedPolicy, Rule, decide};
pub use capacity::{AgentCapacity, FreeResources};
pub use cluster::Cluster;
pub use demand::{DEFAULT_LAUNCHER, JobDemand, Policy, Profile, Resources};
pub use placement::{LauncherAssignment, NodeAssignment, Placement};
pub use queue::{Backfill, QueuedJob, Round, RoundOptions, Started, WaitReason, Waiting, queue_round};
pub use quota::{QuotaLimit, exceeds_quota};
pub use score::{NoScorer, Scorer, TopologyScorer};
pub use unfit::{Unfit, UnfitKind};

/// Places one job on the offered capacity with the default [`TopologyScorer`].
pub fn place(job: &JobDemand, offers: &[AgentCapacity]) -> Result<Placement, Unfit> {
    place_with(job, offers, &TopologyScorer::default())
}

/// Places one job, letting `scorer` break the ties the policy leaves open.
/// To place several jobs against the same offers, build a [`Cluster`] once.
pub fn place_with(job: &JobDemand, offers: &[AgentCapacity], scorer: &dyn Scorer) -> Result<Placement, Unfit> {
    Cluster::new(offers, scorer).place(job)
}
