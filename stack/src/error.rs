//! What can go wrong in the local-stack tooling, one enum for the crate.
//! Each variant says what failed, with the offending path, command, flag or
//! component, and what to do; a cause from below (an I/O error, Docker's
//! own message, a component's error) stays its source, so `mpiswarm` prints
//! it under "Caused by" as before. This module decides nothing.

use std::path::PathBuf;
use std::time::Duration;

/// What was being done to a file or directory when it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileAction {
    Creating,
    Resolving,
    Opening,
    Reading,
    Writing,
}

impl std::fmt::Display for FileAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FileAction::Creating => "creating",
            FileAction::Resolving => "resolving",
            FileAction::Opening => "opening",
            FileAction::Reading => "reading",
            FileAction::Writing => "writing",
        })
    }
}

/// A component of the stack, as the errors name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    ApiServer,
    OfferLayer,
    Controller,
}

impl std::fmt::Display for Part {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Part::ApiServer => "the API server",
            Part::OfferLayer => "the offer layer",
            Part::Controller => "the controller",
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StackError {
    #[error("{action} {}", path.display())]
    File {
        action: FileAction,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the data dir path {} is not UTF-8: use a data dir whose path is", .0.display())]
    NotUtf8(PathBuf),
    #[error("could not encode {what} as JSON")]
    Encode {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "the stack credential {} cannot be read ({why}); remove DATA/credentials/ to make new ones (the agents keep their ids)",
        path.display()
    )]
    Credential { path: PathBuf, why: String },
    #[error("{} is not a {kind} file; remove it", path.display())]
    NotAFile {
        path: PathBuf,
        kind: &'static str,
        #[source]
        source: serde_json::Error,
    },

    #[error(
        "no mpiswarm stack runs with data dir {dir}: start one with `mpiswarm up --data-dir {dir}` (or pass --kubeconfig for a cluster)",
        dir = dir.display()
    )]
    NoStack {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the mpiswarm stack of {dir} is not running (process {pid} is gone): start it with `mpiswarm up --data-dir {dir}`",
        dir = dir.display()
    )]
    StackGone { dir: PathBuf, pid: u32 },
    #[error(
        "a stack already runs with data dir {dir} (process {pid}): use it, or stop it with `mpiswarm down --data-dir {dir}`",
        dir = dir.display()
    )]
    AlreadyRunning { dir: PathBuf, pid: u32 },

    #[error(
        "the engine still holds {} of this stack's objects {}s after they were removed: {}; remove them with `docker <kind> rm <id>`",
        left.len(), waited.as_secs(), left.join(", ")
    )]
    LeftBehind { left: Vec<String>, waited: Duration },
    #[error("running docker: is Docker installed and its daemon running?")]
    DockerMissing(#[source] std::io::Error),
    #[error("`docker {command}` failed: {stderr}")]
    Docker { command: String, stderr: String },

    #[error("the command line `mpiswarm {}` is refused", command.join(" "))]
    CommandLine {
        command: Vec<String>,
        #[source]
        source: clap::Error,
    },
    #[error("no {flag} in `mpiswarm {}`", command.join(" "))]
    NoFlag { flag: &'static str, command: Vec<String> },
    #[error("starting {part}")]
    Start {
        part: Part,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("making a Kubernetes client from the kubeconfig {}", kubeconfig.display())]
    Client {
        kubeconfig: PathBuf,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("installing the MpiJob CRD")]
    InstallCrd(#[source] kube::Error),
    #[error("node agent {agent} stopped at start: {why}")]
    AgentStoppedAtStart { agent: usize, why: String },
    #[error("node agent {agent} stopped: {why}")]
    AgentStopped { agent: usize, why: String },
    #[error("not all {count} node agents registered with the offer layer within 60 s")]
    AgentsNotRegistered { count: usize },

    #[error("finding this mpiswarm binary")]
    CurrentExe(#[source] std::io::Error),
    #[error("starting `mpiswarm {}`", command.join(" "))]
    Spawn {
        command: Vec<String>,
        #[source]
        source: std::io::Error,
    },
    #[error("{component} exited before its process id could be read; see {}", log.display())]
    NoPid { component: String, log: PathBuf },
    #[error("{component} exited at start ({status}); the end of {}:\n{tail}", log.display())]
    ExitedAtStart { component: String, status: std::process::ExitStatus, log: PathBuf, tail: String },
    #[error("cannot check on {component}: {source}")]
    CannotCheck { component: String, source: std::io::Error },
    #[error("the API server did not serve within {timeout:?}: {why}")]
    ApiServerNotServing { timeout: Duration, why: String },
    #[error("{url} answered {status} for {timeout:?}")]
    NotHealthy { url: String, status: reqwest::StatusCode, timeout: Duration },
    #[error("{url} did not answer within {timeout:?}: {source}")]
    NoAnswer { url: String, timeout: Duration, source: reqwest::Error },
    #[error("could not make an HTTP client")]
    HttpClient(#[source] reqwest::Error),
    #[error("a blocking task of `up` failed")]
    Join(#[from] tokio::task::JoinError),

    #[error("--nodes 0: a cluster needs at least one node")]
    NoNodes,
    #[error("no --nodes given")]
    NodesNotGiven,
    #[error("--node-cpus {0}: give a positive number of cpus, e.g. --node-cpus 0.5")]
    NodeCpus(f64),
    #[error(
        "--node-cpus {cpus} is more than this machine's {cores} cores: each node's engine reports {cores} cpus and \
         Swarm refuses reservations beyond them; use at most --node-cpus {cores}"
    )]
    NodeCpusOverMachine { cpus: f64, cores: f64 },
    #[error("--link-mbit 0 would cut the nodes off each other; give a rate such as --link-mbit 1000")]
    LinkMbitZero,
    #[error(
        "the data dir {dir} already has a {nodes}-node cluster{cpus}; stop it with `mpiswarm down --data-dir {dir}` to make another",
        dir = dir.display(),
        cpus = node_cpus.map(|c| format!(" of {c} cpus a node")).unwrap_or_default()
    )]
    OtherCluster { dir: PathBuf, nodes: u32, node_cpus: Option<f64> },
    #[error("the Docker engine of node {node} did not answer within 60 s; its last lines:\n{logs}")]
    EngineSilent { node: String, logs: String },
    #[error("node {node} has no address on {network}")]
    NoAddress { node: String, network: String },

    #[error(transparent)]
    Images(#[from] crate::images::ImagesError),

    #[error("tenant name '{0}' is not a user name: letters, digits, '-', '.' and '_', starting with a letter or digit")]
    TenantName(String),
    #[error("--role: {0}")]
    TenantRole(String),
    #[error("{what} of the tenant")]
    Tenant {
        what: &'static str,
        #[source]
        source: kube::Error,
    },
    #[error("{what} of the offer layer's replicas")]
    OffersIdentity {
        what: &'static str,
        #[source]
        source: kube::Error,
    },
    #[error("the admin kubeconfig {} names no cluster; start the stack again to write it anew", path.display())]
    Kubeconfig { path: PathBuf },
}

/// An error with its causes, `a: b: c`, as one line.
pub(crate) fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

pub type Result<T, E = StackError> = std::result::Result<T, E>;

/// `path` as a command-line argument.
pub fn text(path: &std::path::Path) -> Result<String> {
    path.to_str().map(str::to_owned).ok_or_else(|| StackError::NotUtf8(path.to_owned()))
}

/// `op` on `path`, its I/O error named.
pub(crate) fn file<T>(action: FileAction, path: &std::path::Path, op: std::io::Result<T>) -> Result<T> {
    op.map_err(|source| StackError::File { action, path: path.to_owned(), source })
}
