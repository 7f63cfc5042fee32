//! `mpiswarm down`: stops the local stack of a data dir and removes every
//! Swarm object its agents made on this engine (services, then the networks,
//! secrets and configs they used), also after a crash left them behind.
//! Objects are found by the agent ids kept in the data dir, so a second
//! stack on the same engine (another data dir) keeps its running jobs.
//! Running jobs of this stack end with it; their MpiJobs stay in the data dir.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::stack;

#[derive(clap::Args, Debug, Clone)]
pub struct DownArgs {
    #[arg(long, env = "MPISWARM_DATA_DIR", default_value = stack::DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
}

/// Every object the agents label as theirs.
const MANAGED: &str = "label=mpiswarm.io/managed-by=mpiswarm-agent";

/// The ids of the agents of this data dir (`agent/` of the one-node stack,
/// `agents/NODE/` with `--nodes`), as their stores keep them.
fn agent_ids(data_dir: &Path) -> Vec<String> {
    let mut dirs = vec![data_dir.join("agent")];
    if let Ok(nodes) = std::fs::read_dir(data_dir.join("agents")) {
        dirs.extend(nodes.flatten().map(|e| e.path()));
    }
    dirs.into_iter()
        .filter(|d| d.is_dir())
        .filter_map(|d| mpiswarm_agent::store::Store::open(&d).ok()?.agent_id().ok().flatten())
        .map(|id| id.value)
        .collect()
}

pub fn run(args: DownArgs) -> Result<()> {
    if let Ok(s) = stack::running(&args.data_dir) {
        eprintln!("mpiswarm down: stopping the stack (process {})", s.pid);
        let _sent = Command::new("kill").args(["-TERM", &s.pid.to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Path::new(&format!("/proc/{}", s.pid)).exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    stack::remove(&args.data_dir);
    // Node containers of `up --nodes` take their engines' swarm objects with them.
    let dir = args.data_dir.canonicalize().unwrap_or_else(|_| args.data_dir.clone());
    crate::nodes::remove(&dir)?;
    let agents = agent_ids(&dir);
    for (kind, ls) in [("service", "ls"), ("network", "ls"), ("secret", "ls"), ("config", "ls")] {
        let mut ids: Vec<String> = Vec::new();
        for agent in &agents {
            let owner = format!("label={}", mpiswarm_agent::labels::owned_by(agent));
            let out = Command::new("docker")
                .args([kind, ls, "-q", "--filter", MANAGED, "--filter", &owner])
                .output()
                .context("running docker: is Docker installed and its daemon running?")?;
            ids.extend(String::from_utf8_lossy(&out.stdout).split_whitespace().map(str::to_owned));
        }
        if ids.is_empty() {
            continue;
        }
        eprintln!("mpiswarm down: removing {} {kind}(s)", ids.len());
        // Networks stay busy until the services' containers are gone.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let removed = Command::new("docker").arg(kind).arg("rm").args(&ids).output()?;
            if removed.status.success() || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    Ok(())
}
