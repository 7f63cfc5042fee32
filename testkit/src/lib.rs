//! Test support for mpiswarm, kept out of every production binary.
//!
//! - [`agent`]: [`TestAgent`] and [`TestAgents`], in-process node agents
//!   that speak the real agent API over HTTP and keep no containers;
//! - [`spec`]: [`AgentSpec`], what an agent is;
//! - [`pki`]: [`TestPki`], a throwaway CA, server certificate and credentials as files;
//! - [`http`]: one plain-HTTP GET to a component on loopback (no client crate, no curl);
//! - [`books`]: the tasks an agent holds and how events move them;
//! - [`scheduler`]: the framework side: a subscribed [`scheduler::Framework`]
//!   and waits for its events, each under one overall deadline;
//! - [`program`]: how a test agent ends a task by its command's last words
//!   (`true`, `false`, `exit N`, `sleep N`, or never), and the
//!   [`program::FAIL_LAUNCH_LABEL`] that makes a launch fail on purpose.
//!
//! Nothing here is used by `mpiswarm` itself; crates depend on it as a
//! dev-dependency only. `README.md` has the whole API with examples.
//!
//! ```no_run
//! # async fn demo(offers_url: &str) {
//! use mpiswarm_testkit::{AgentSpec, TestAgents};
//! let mut agents = TestAgents::start(offers_url, [
//!     AgentSpec::new("node1").cpus(2.0).mem(1024.0).attribute("rack", "r1"),
//!     AgentSpec::new("node2").cpus(2.0).mem(1024.0).attribute("rack", "r2"),
//! ]);
//! agents.subscribed().await;
//! // ... a framework launches `sh /etc/mpiswarm/rank launcher mpirun ... true` ...
//! assert!(agents.running_tasks().is_empty(), "no partial gang keeps running");
//! # }
//! ```
//!
//! A task ends by the last word(s) of its command: `true` / `exit 0`
//! (FINISHED, exit code 0), `false` (FAILED, 1), `exit N` (FAILED, N),
//! `sleep N` (FINISHED after N seconds of tokio time); anything else runs
//! until KILL. Statuses carry the label `mpiswarm.io/exit-code` as the real
//! agent's do. A task labelled `mpiswarm.io/test-fail-launch=true` fails its
//! launch (TASK_FAILED, REASON_CONTAINER_LAUNCH_FAILED; the rest of its group
//! TASK_KILLED). See [`program`].

pub mod agent;
pub mod books;
pub mod http;
pub mod pki;
pub mod process;
pub mod program;
pub mod scheduler;
pub mod spec;

pub use agent::{DEADLINE, TestAgent, TestAgents};
pub use books::TestTask;
pub use pki::TestPki;
pub use process::{output_within, try_output_within};
pub use program::{FAIL_LAUNCH_LABEL, Outcome};
pub use spec::AgentSpec;
