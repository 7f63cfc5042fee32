//! `mpiswarm down`: stops the local stack of a data dir and removes every
//! Swarm object mpiswarm made on this engine (services, then the networks,
//! secrets and configs they used), also after a crash left them behind.
//! Running jobs end with it; their MpiJobs stay in the data dir.

use std::path::PathBuf;
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

pub fn run(args: DownArgs) -> Result<()> {
    if let Ok(s) = stack::running(&args.data_dir) {
        eprintln!("mpiswarm down: stopping the stack (process {})", s.pid);
        let _sent = Command::new("kill").args(["-TERM", &s.pid.to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::path::Path::new(&format!("/proc/{}", s.pid)).exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    stack::remove(&args.data_dir);
    // Node containers of `up --nodes` take their engines' swarm objects with them.
    let dir = args.data_dir.canonicalize().unwrap_or_else(|_| args.data_dir.clone());
    crate::nodes::remove(&dir)?;
    for (kind, ls) in [("service", "ls"), ("network", "ls"), ("secret", "ls"), ("config", "ls")] {
        let out = Command::new("docker")
            .args([kind, ls, "-q", "--filter", MANAGED])
            .output()
            .context("running docker: is Docker installed and its daemon running?")?;
        let ids: Vec<String> = String::from_utf8_lossy(&out.stdout).split_whitespace().map(str::to_owned).collect();
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
