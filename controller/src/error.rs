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

/// Why a subscription to the master ended; the driver logs it and
/// subscribes again (with backoff), so each says what happened and where.
#[derive(Debug, thiserror::Error)]
pub enum SubscriptionEnded {
    #[error("the set-up after SUBSCRIBED (framework id ConfigMap, RECONCILE, REVIVE) failed: {0}")]
    AfterSubscribed(#[source] Error),
    #[error("no event or heartbeat from the master for {0}s: it is down or unreachable")]
    Silent(u64),
    #[error("the master closed the event stream")]
    StreamEnded,
    #[error("the event stream from the master broke: {0}")]
    Broken(#[source] mpiswarm_mesos::client::ClientError),
    #[error("the offer round failed: {0}")]
    OfferRound(#[source] Error),
    #[error("handling a task UPDATE (KILL of a stray task, ACKNOWLEDGE) failed: {0}")]
    Update(#[source] mpiswarm_mesos::client::ClientError),
    #[error("the master sent ERROR {0}")]
    MasterError(mpiswarm_mesos::MasterError),
    #[error("a call to the master failed: {0}")]
    Call(#[source] mpiswarm_mesos::client::ClientError),
    #[error("the controller is shutting down")]
    Shutdown,
}
