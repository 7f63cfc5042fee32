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
    SshKey(#[from] ssh_key::Error),
    #[error("the SSH key Secret {secret} has no {key}: delete the Secret and the controller makes a new key")]
    SshKeyMissing { secret: String, key: &'static str },
    #[error("the finalizer {FINALIZER} could not be handled: {0}", FINALIZER = mpiswarm_crds::FINALIZER)]
    Finalizer(&'static str),
    #[error("the tasks of {job} have not ended {seconds}s after KILL; the KILLs are sent again")]
    TeardownPending { job: String, seconds: f64 },
    #[error("Mesos scheduler API: {0}")]
    Mesos(#[from] mpiswarm_mesos::client::ClientError),
    #[error("leader election: {0}")]
    Lease(#[from] kube_lease_manager::LeaseManagerError),
    #[error("leader election: the lease manager stopped")]
    LeaseManagerStopped,
    #[error("the Namespaces (their role policy, mpiswarm.io/allowed-roles) could not be read: the watch stopped")]
    NamespacesUnread,
    #[error("leader election: {identity} lost the lease")]
    LeaseLost { identity: String },
    #[error("serving {what} on {addr}: {source}")]
    Serve { what: &'static str, addr: String, source: std::io::Error },
    #[error("--master-credentials: {0}")]
    MasterCredentials(#[source] mpiswarm_mesos::credential::CredentialError),
    #[error("the log endpoint: {0}")]
    LogsTls(#[source] mpiswarm_mesos::tls::TlsError),
    #[error(
        "--logs-listen {listen} is every address of the host, which is no URL a tenant can use: pass --logs-url with the address tenants reach"
    )]
    LogsUrlNeeded { listen: std::net::SocketAddr },
    #[error("--ca-file: {0}")]
    CaFile(#[source] mpiswarm_mesos::tls::TlsError),
    #[error("kubeconfig {path}: {source}")]
    Kubeconfig { path: std::path::PathBuf, source: kube::config::KubeconfigError },
    #[error("no kubeconfig given and none found (in-cluster, $KUBECONFIG, ~/.kube/config): {0}")]
    InferConfig(#[from] kube::config::InferConfigError),
    #[error("encoding the framework-id ConfigMap: {0}")]
    Encode(#[from] serde_json::Error),
    #[error("the controller task panicked: {0}")]
    Panicked(#[from] tokio::task::JoinError),
    /// The framework driver ended while the controller still led: without
    /// it nothing is offered, launched or heard of, so the controller stops
    /// too (and is restarted) rather than reconcile jobs that never run.
    #[error("the framework driver ended while leading: {0}")]
    DriverEnded(String),
}

impl Error {
    /// The metric label of this error.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::MissingNamespace => "missing_namespace",
            Error::MissingUid => "missing_uid",
            Error::SshKey(_) | Error::SshKeyMissing { .. } => "ssh_key",
            Error::Finalizer(_) | Error::TeardownPending { .. } => "finalizer",
            Error::Mesos(_) => "mesos",
            Error::Lease(_) | Error::LeaseManagerStopped | Error::LeaseLost { .. } => "lease",
            Error::Serve { .. } => "serve",
            Error::NamespacesUnread => "namespaces",
            Error::MasterCredentials(_)
            | Error::CaFile(_)
            | Error::LogsTls(_)
            | Error::LogsUrlNeeded { .. }
            | Error::Kubeconfig { .. }
            | Error::InferConfig(_)
            | Error::Encode(_)
            | Error::Panicked(_) => "config",
            Error::DriverEnded(_) => "driver",
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
    #[error("another replica of the offer layer leads now ({0})")]
    LeaderMoved(String),
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
