//! The controller's errors. Variant names double as the `error` label of the
//! reconcile-error metric, so they stay few and stable.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("the MpiJob has no namespace (it is namespaced; was it read from a file?)")]
    MissingNamespace,
    #[error("the MpiJob has no uid (it must come from the API server)")]
    MissingUid,
    #[error("per-job SSH key: {0}")]
    SshKey(String),
    #[error("finalizer: {0}")]
    Finalizer(String),
    #[error("Mesos scheduler API: {0}")]
    Mesos(#[from] mpiswarm_mesos::client::ClientError),
    #[error("leader election: {0}")]
    Lease(String),
    #[error("serving {what} on {addr}: {source}")]
    Serve { what: &'static str, addr: String, source: std::io::Error },
    #[error("configuration: {0}")]
    Config(String),
}

impl Error {
    /// The metric label of this error.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::MissingNamespace => "missing_namespace",
            Error::MissingUid => "missing_uid",
            Error::SshKey(_) => "ssh_key",
            Error::Finalizer(_) => "finalizer",
            Error::Mesos(_) => "mesos",
            Error::Lease(_) => "lease",
            Error::Serve { .. } => "serve",
            Error::Config(_) => "config",
        }
    }
}
