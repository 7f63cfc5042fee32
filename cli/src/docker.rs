//! The `docker` command line, for what the binary does on the host engine
//! (node containers, their networks and volumes): the recipe in
//! ENVIRONMENT.md is in its flags, and the CLI applies them as tested. A
//! failure names the command and carries Docker's own message.

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
