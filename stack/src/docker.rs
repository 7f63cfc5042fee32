//! The `docker` command line, for what the binary does on the host engine
//! (node containers, their networks and volumes): the flags that were found
//! to work on this machine kind are spelled out where they are used
//! ([`crate::nodes`]), and the command line applies them as they were
//! tested, with no client library in between. A failure names the command
//! and carries Docker's own message. It never decides what to run.

use crate::error::{Result, StackError};

/// Runs `docker ARGS` and returns its stdout, or an error with its stderr.
pub async fn docker<S: AsRef<str>>(args: &[S]) -> Result<String> {
    let args: Vec<&str> = args.iter().map(AsRef::as_ref).collect();
    let out = tokio::process::Command::new("docker")
        .args(&args)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(StackError::DockerMissing)?;
    if !out.status.success() {
        return Err(failed(&args, &out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `docker ARGS` for its effect.
pub async fn docker_ok<S: AsRef<str>>(args: &[S]) -> Result<()> {
    docker(args).await.map(drop)
}

/// `docker ARGS` failed: Docker's own message, trimmed.
pub fn failed<S: AsRef<str>>(args: &[S], stderr: &[u8]) -> StackError {
    let command: Vec<&str> = args.iter().map(AsRef::as_ref).collect();
    StackError::Docker { command: command.join(" "), stderr: String::from_utf8_lossy(stderr).trim().to_owned() }
}
