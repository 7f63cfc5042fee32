//! The components of an `up --split` cluster (stack/src/split.rs): each runs
//! as its own process, listed in DATA/stack.json with its pid and command
//! line; a test signals one alone (`kill -9`, or SIGSTOP for a component
//! that is there but never answers) and sees `up` start it again (a new pid,
//! the same command line). Also the components' own views over plain HTTP:
//! the offer layer's `/master/state` and an agent's `/state`.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::cluster::{COMMAND_DEADLINE, Cluster};
use crate::wait;

/// `up` starts an exited component again after 1 s (longer when it keeps
/// failing at once), and the component needs a few seconds to serve.
pub const RESTART_DEADLINE: Duration = Duration::from_secs(90);

/// One component as stack.json lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct Component {
    /// `apiserver`, `offers`, `controller` or `agent-NODE`.
    pub name: String,
    pub pid: u32,
    pub restarts: u64,
    pub args: Vec<String>,
}

impl Cluster {
    /// Every component of the stack, in the order `up` started them; empty
    /// unless the cluster runs with `--split`.
    pub fn components(&self) -> Vec<Component> {
        let stack = self.stack();
        let listed = stack["components"].as_array().cloned().unwrap_or_default();
        listed
            .iter()
            .filter_map(|c| {
                Some(Component {
                    name: c["name"].as_str()?.to_owned(),
                    pid: c["pid"].as_u64()? as u32,
                    restarts: c["restarts"].as_u64()?,
                    args: c["args"].as_array()?.iter().filter_map(|a| a.as_str().map(str::to_owned)).collect(),
                })
            })
            .collect()
    }

    pub fn component(&self, name: &str) -> Component {
        let all = self.components();
        all.iter().find(|c| c.name == name).cloned().unwrap_or_else(|| panic!("no component {name} in {all:?}"))
    }

    /// `kill -SIGNAL` to component `name`'s process; the component as it was.
    pub fn signal(&self, name: &str, signal: &str) -> Component {
        let c = self.component(name);
        let mut kill = Command::new("kill");
        kill.args([&format!("-{signal}"), &c.pid.to_string()]);
        let out = mpiswarm_testkit::output_within(kill, None, COMMAND_DEADLINE);
        assert!(out.status.success(), "kill -{signal} {} ({name}): {}", c.pid, String::from_utf8_lossy(&out.stderr));
        eprintln!("e2e: kill -{signal} {name} (process {})", c.pid);
        c
    }

    /// `kill -9` of component `name`, then waits until `up` has started it
    /// again with the same command line; returns the new one.
    pub fn kill_9(&self, name: &str) -> Component {
        let old = self.signal(name, "KILL");
        let new = wait::until(RESTART_DEADLINE, &format!("up starts {name} again"), || {
            let now = self.component(name);
            if now.pid != old.pid && now.restarts > old.restarts { Ok(now) } else { Err(format!("{now:?}")) }
        });
        assert_eq!(new.args, old.args, "{name} started again with the same command line (same port, same data)");
        eprintln!("e2e: {name} runs again (process {})", new.pid);
        new
    }

    /// The offer layer's `/master/state`.
    pub fn master_state(&self) -> Result<Value, String> {
        self.offers_json("/master/state")
    }

    /// The offer layer's `/metrics/snapshot` (Mesos' names, as the operator reads them).
    pub fn master_metrics(&self) -> Result<Value, String> {
        self.offers_json("/metrics/snapshot")
    }

    /// The offer layer's JSON endpoint `path`, read as the stack's operator.
    fn offers_json(&self, path: &str) -> Result<Value, String> {
        let stack = self.stack();
        let offers = stack["offers"].as_str().unwrap_or_default().to_owned();
        let operator = mpiswarm_testkit::http::stack_operator(&stack)?;
        let body = mpiswarm_testkit::http::get_ok_as(&format!("{offers}{path}"), operator.as_ref())?;
        serde_json::from_str(&body).map_err(|e| format!("{path}: {e}: {body}"))
    }

    /// The agent id the offer layer has for node `hostname`, if registered.
    pub fn agent_id(&self, hostname: &str) -> Option<String> {
        let state = self.master_state().ok()?;
        let agents = state["slaves"].as_array()?;
        let agent = agents.iter().find(|a| a["hostname"] == hostname)?;
        agent["id"].as_str().map(str::to_owned)
    }

    /// The agent of node `hostname`'s `/state`: the tasks it knows, with
    /// their state, read as the stack's operator (after checking that the
    /// agent refuses a caller without credentials).
    pub fn agent_state(&self, hostname: &str) -> Result<Value, String> {
        let stack = self.stack();
        let index = self.nodes().iter().position(|n| n.hostname == hostname).ok_or(format!("no node {hostname}"))?;
        // stack.json lists the agents' addresses sorted by hostname, as `nodes()` is.
        let addr = stack["agents"][index].as_str().ok_or(format!("no agent address for {hostname}: {stack}"))?;
        let operator = mpiswarm_testkit::http::stack_operator(&stack)?;
        let url = format!("http://{addr}/state");
        let anonymous = mpiswarm_testkit::http::get(&url)?;
        if anonymous.0 != 401 {
            return Err(format!("the agent of {hostname} answered {url} without authentication: {anonymous:?}"));
        }
        let body = mpiswarm_testkit::http::get_ok_as(&url, operator.as_ref())?;
        serde_json::from_str(&body).map_err(|e| format!("/state of {hostname}: {e}: {body}"))
    }
}

/// SIGCONT to component `name` of `cluster` when dropped: a test that
/// stops one (SIGSTOP) continues it also when it fails half-way.
pub struct Thaw<'a> {
    pub cluster: &'a Cluster,
    pub name: String,
}

impl Drop for Thaw<'_> {
    fn drop(&mut self) {
        self.cluster.signal(&self.name, "CONT");
    }
}
