//! `mpiswarm down`: stops the local stack of a data dir and removes every
//! Swarm object its agent made on this engine (services, then the networks,
//! secrets and configs they used), also after a crash left them behind, or
//! with `up --nodes` the node containers that hold them. Running jobs end
//! with it; their MpiJobs stay in the data dir. Another stack's objects on
//! the same engine are not touched: only those labelled with this data
//! dir's agent id go.

use std::path::PathBuf;
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
    // The agent of `up` on this engine labels every object with the id it
    // keeps in DATA/agent; without one it never registered, so made nothing.
    // The agent's store is the one home of where that id is kept.
    let agent_dir = dir.join("agent");
    let stored = agent_dir.is_dir().then(|| mpiswarm_agent::store::Store::open(&agent_dir).ok()).flatten();
    let Some(agent_id) = stored.and_then(|s| s.agent_id().ok().flatten()) else { return Ok(()) };
    let owned = format!("label={}", mpiswarm_agent::labels::owned_by(&agent_id.value));
    for (kind, ls) in [("service", "ls"), ("network", "ls"), ("secret", "ls"), ("config", "ls")] {
        let out = Command::new("docker")
            .args([kind, ls, "-q", "--filter", &owned])
            .output()
            .map_err(StackError::DockerMissing)?;
        let ids: Vec<String> = String::from_utf8_lossy(&out.stdout).split_whitespace().map(str::to_owned).collect();
        if ids.is_empty() {
            continue;
        }
        eprintln!("mpiswarm down: removing {} {kind}(s)", ids.len());
        // Networks stay busy until the services' containers are gone.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let removed =
                Command::new("docker").arg(kind).arg("rm").args(&ids).output().map_err(StackError::DockerMissing)?;
            if removed.status.success() || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    Ok(())
}
