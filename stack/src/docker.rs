//! The `docker` command line, for what the binary does on the host engine
//! (node containers, their networks and volumes): the flags that were found
//! to work on this machine kind are spelled out where they are used
//! ([`crate::nodes`]), and the command line applies them as they were
//! tested, with no client library in between. A failure names the command
//! and carries Docker's own message. It never decides what to run.

use anyhow::{Context, Result, bail};

/// Runs `docker ARGS` and returns its stdout, or an error with its stderr.
pub async fn docker<S: AsRef<str>>(args: &[S]) -> Result<String> {
    let args: Vec<&str> = args.iter().map(AsRef::as_ref).collect();
    let out = tokio::process::Command::new("docker")
        .args(&args)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .context("running docker: is Docker installed and its daemon running?")?;
    if !out.status.success() {
        bail!("`docker {}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `docker ARGS` for its effect.
pub async fn docker_ok<S: AsRef<str>>(args: &[S]) -> Result<()> {
    docker(args).await.map(drop)
}
