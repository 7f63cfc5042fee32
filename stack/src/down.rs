//! `mpiswarm down`: stops the local stack of a data dir and removes every
//! Swarm object its agent made on this engine (services, then the networks,
//! secrets and configs they used), also after a crash left them behind, or
//! with `up --nodes` the node containers that hold them. Running jobs end
//! with it; their MpiJobs stay in the data dir. Another stack's objects on
//! the same engine are not touched: only those labelled with this data
//! dir's agent id go, and `down` returns once the engine lists none of
//! them (containers included: Swarm removes those after their service).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::error::{Result, StackError};

use crate::stack_file as stack;

#[derive(clap::Args, Debug, Clone)]
pub struct DownArgs {
    #[arg(long, env = "MPISWARM_DATA_DIR", default_value = stack::DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
}

pub fn run(args: DownArgs) -> Result<()> {
    // Read before `up` stops: it removes the file, and with --split the
    // file lists the components to stop should `up` itself be gone.
    let file = stack::read(&args.data_dir).ok();
    if let Ok(s) = stack::running(&args.data_dir) {
        eprintln!("mpiswarm down: stopping the stack (process {})", s.pid);
        let _sent = Command::new("kill").args(["-TERM", &s.pid.to_string()]).status();
        // `up --split` stops its components one after the other, 10 s each at most.
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::path::Path::new(&format!("/proc/{}", s.pid)).exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    let dir = args.data_dir.canonicalize().unwrap_or_else(|_| args.data_dir.clone());
    if let Some(file) = &file {
        crate::split::stop_leftovers(&dir, file);
    }
    stack::remove(&args.data_dir);
    // Node containers of `up --nodes` take their engines' swarm objects with
    // them; the engine of this machine then holds none of this stack's, but
    // may hold another stack's, which are not ours to remove.
    let had_nodes = crate::nodes::read(&dir).ok().flatten().is_some();
    let removed = crate::nodes::remove(&dir)?;
    if had_nodes || removed > 0 {
        return Ok(());
    }
    let Some(agent_id) = agent_id(&dir) else { return Ok(()) };
    remove_agent_objects(&agent_id)
}

/// How long `down` waits for Swarm to remove what the stack's agent made.
const GONE_DEADLINE: Duration = Duration::from_secs(60);

/// The id the stack's agent of `data_dir` labels every object with; `None`
/// when it never registered, so made nothing. The agent's store is the one
/// home of where that id is kept.
pub fn agent_id(data_dir: &Path) -> Option<String> {
    let agent_dir = data_dir.join("agent");
    let stored = agent_dir.is_dir().then(|| mpiswarm_agent::store::Store::open(&agent_dir).ok()).flatten();
    stored.and_then(|s| s.agent_id().ok().flatten()).map(|id| id.value)
}

/// What of the agent `agent_id` this engine still holds, one `KIND ID` per
/// object: services, networks, secrets, configs, and containers in any state.
pub fn left_on_engine(agent_id: &str) -> Result<Vec<String>> {
    let owned = format!("label={}", mpiswarm_agent::labels::owned_by(agent_id));
    let mut left = Vec::new();
    for kind in KINDS {
        let listed = match kind {
            "container" => ["ps", "-aq", "--filter", &owned].map(str::to_owned).to_vec(),
            _ => [kind, "ls", "-q", "--filter", &owned].map(str::to_owned).to_vec(),
        };
        let out = Command::new("docker").args(&listed).output().map_err(StackError::DockerMissing)?;
        if !out.status.success() {
            return Err(crate::docker::failed(&listed, &out.stderr));
        }
        left.extend(String::from_utf8_lossy(&out.stdout).split_whitespace().map(|id| format!("{kind} {id}")));
    }
    Ok(left)
}

/// The kinds of objects the agent makes, in the order they can be removed:
/// Swarm removes a service's containers itself, and a network goes only
/// once no container uses it.
const KINDS: [&str; 5] = ["service", "container", "secret", "config", "network"];

/// Removes every object of the agent `agent_id` and returns once this
/// engine lists none of them (at most [`GONE_DEADLINE`]), saying what it
/// still waits for.
fn remove_agent_objects(agent_id: &str) -> Result<()> {
    let deadline = Instant::now() + GONE_DEADLINE;
    let mut said = String::new();
    loop {
        let left = left_on_engine(agent_id)?;
        if left.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(StackError::LeftBehind { left, waited: GONE_DEADLINE });
        }
        let line = format!("mpiswarm down: removing {}", count_by_kind(&left));
        if line != said {
            eprintln!("{line}");
            said = line;
        }
        for kind in KINDS.into_iter().filter(|k| *k != "container") {
            let ids: Vec<&str> = left.iter().filter_map(|l| l.strip_prefix(kind)?.strip_prefix(' ')).collect();
            if !ids.is_empty() {
                // Refused while in use (a network whose containers are still
                // going): the next pass tries again.
                let _refused = Command::new("docker").args([kind, "rm"]).args(&ids).output();
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// "2 service(s), 1 network(s)": what `left` holds, by kind.
fn count_by_kind(left: &[String]) -> String {
    KINDS
        .into_iter()
        .filter_map(|kind| {
            let n = left.iter().filter(|l| l.split(' ').next() == Some(kind)).count();
            (n > 0).then(|| format!("{n} {kind}(s)"))
        })
        .collect::<Vec<_>>()
        .join(", ")
}
