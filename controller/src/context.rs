//! What the reconcilers and the framework driver share: the Kubernetes
//! client, the books, the Event publisher, metrics, settings, the status
//! writer's expectations, and the two channels between them (commands to
//! the driver, reconcile triggers back). Only the reconciler writes MpiJob
//! status; nothing here lets another task write it or serialises access to
//! a job (kube-runtime's Controller never reconciles one object twice at
//! once, and the driver asks for status writes through the books).

use std::sync::OnceLock;
use std::sync::atomic::AtomicBool;
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use mpiswarm_crds::MpiJob;
use mpiswarm_policy::Backfill;
use tokio::sync::{Notify, mpsc};

use crate::books::{Books, TaskRef};
use crate::events::Publisher;
use crate::expectations::Expectations;
use crate::metrics::Metrics;
use crate::retries::Retries;

/// The field manager of every status write.
pub const FIELD_MANAGER: &str = "mpiswarm-controller";

/// The default of [`Settings::queue_depth`]: a round of that many gangs
/// writes its statuses in about a second on two cores and holds a few MiB
/// of launch messages; a burst of thousands of jobs goes through in rounds
/// of this size, each offer coming back at the next allocation.
pub const DEFAULT_QUEUE_DEPTH: u32 = 500;

/// Tunables, with the defaults `mpiswarm controller` uses.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Seconds a launched gang may take until every task runs.
    pub launch_timeout: i64,
    /// Decline filter while jobs wait (short: capacity frees up as jobs end).
    pub refuse_seconds_waiting: f64,
    /// Decline filter when nothing waits (the framework also SUPPRESSes).
    pub refuse_seconds_idle: f64,
    /// Whether small jobs may start past a head of their role that does not fit.
    pub backfill: Backfill,
    /// Mesos `failover_timeout`: how long the master keeps our tasks while we are away.
    pub failover_timeout: f64,
    /// Where each round's input and outcome is appended as a JSON line.
    pub round_log: Option<std::path::PathBuf>,
    /// MpiJobs reconciled at the same time.
    pub concurrency: u16,
    /// Waiting jobs of a role one offer round tries at most, oldest first
    /// (as Slurm's `default_queue_depth`); the rest are tried in the next.
    pub queue_depth: usize,
    /// The CA an https master's certificate must chain to (`--ca-file`).
    pub master_ca: Option<mpiswarm_mesos::tls::CaFile>,
    /// How long a deletion waits in one pass for the gang's tasks to end
    /// (then the reconcile fails and is retried, sending the KILLs again).
    pub teardown_wait: std::time::Duration,
    /// How long the driver waits for the reconciler to write a placed
    /// gang's status (then the gang goes back to the queue unlaunched).
    pub status_write_wait: std::time::Duration,
    /// The Docker volume names every namespace shares (`--shared-volume`);
    /// any other is its namespace's own ([`crate::volumes`]).
    pub shared_volumes: crate::volumes::SharedVolumes,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            launch_timeout: 300,
            refuse_seconds_waiting: 1.0,
            refuse_seconds_idle: 30.0,
            backfill: Backfill::WhileHeadWaitsLessThan { max_head_wait_secs: 60 },
            failover_timeout: 7.0 * 24.0 * 3600.0,
            round_log: None,
            concurrency: 16,
            queue_depth: DEFAULT_QUEUE_DEPTH as usize,
            master_ca: None,
            teardown_wait: std::time::Duration::from_secs(20),
            status_write_wait: std::time::Duration::from_secs(30),
            shared_volumes: crate::volumes::SharedVolumes::default(),
        }
    }
}

/// What reconcilers ask of the framework driver.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// A job started waiting: REVIVE its role.
    Revive { role: String },
    /// KILL these tasks.
    Kill(Vec<TaskRef>),
    /// Ask the master what became of these tasks (after a restart).
    Reconcile(Vec<TaskRef>),
}

pub struct Context {
    pub client: kube::Client,
    pub books: Books,
    pub events: Publisher,
    pub metrics: Metrics,
    pub settings: Settings,
    pub commands: mpsc::UnboundedSender<Command>,
    pub trigger: futures::channel::mpsc::UnboundedSender<ObjectRef<MpiJob>>,
    /// The reconciler's cache of MpiJobs, once the controller runs.
    pub store: OnceLock<Store<MpiJob>>,
    /// The cache of Namespaces (their role policy), set and synced before
    /// the first reconcile.
    pub namespaces: OnceLock<Store<Namespace>>,
    /// Signalled whenever a task update changed the books (cleanup waits on it).
    pub task_changed: Notify,
    /// Subscribed to the master (for /readyz).
    pub subscribed: AtomicBool,
    /// What the reconciler's own status writes returned (the reconciler's alone to change).
    pub expectations: Expectations,
    /// Consecutive failed reconciles per job (`error_policy`'s backoff).
    pub retries: Retries,
}

impl Context {
    pub fn new(
        client: kube::Client,
        events: Publisher,
        settings: Settings,
        commands: mpsc::UnboundedSender<Command>,
        trigger: futures::channel::mpsc::UnboundedSender<ObjectRef<MpiJob>>,
    ) -> Self {
        Self {
            client,
            books: Books::default(),
            events,
            metrics: Metrics::default(),
            settings,
            commands,
            trigger,
            store: OnceLock::new(),
            namespaces: OnceLock::new(),
            task_changed: Notify::new(),
            subscribed: AtomicBool::new(false),
            expectations: Expectations::default(),
            retries: Retries::default(),
        }
    }

    /// The job is gone for good: its books and expectations go.
    pub fn forget_job(&self, uid: &str) {
        self.expectations.forget(uid);
        self.books.remove(uid);
    }

    /// The cached MpiJob of a job the books know, by key (no scan of the cache).
    pub fn cached_job(&self, uid: &str) -> Option<std::sync::Arc<MpiJob>> {
        let key = self.books.key(uid)?;
        self.store.get()?.get(&key)
    }

    /// Whether the job's namespace allows its `spec.role`
    /// ([`crate::role_policy`]); `None` while the namespace is not in the
    /// cache (just created: ask again). Without a namespace cache (a
    /// controller under test that set none) every role is allowed.
    pub fn role_allowed(&self, job: &MpiJob) -> Option<Result<(), String>> {
        let Some(namespaces) = self.namespaces.get() else { return Some(Ok(())) };
        let name = job.namespace().unwrap_or_default();
        let ns = namespaces.get(&ObjectRef::new(&name))?;
        Some(crate::role_policy::check(&name, ns.metadata.annotations.as_ref(), &job.spec.role))
    }

    pub fn send(&self, command: Command) {
        // The driver lives as long as the controller; if it is gone we are shutting down.
        let _ignored = self.commands.send(command);
    }

    /// Asks the controller to reconcile a job soon.
    pub fn wake(&self, key: ObjectRef<MpiJob>) {
        let _ignored = self.trigger.unbounded_send(key);
    }
}

/// Wall-clock Unix seconds: the only clock the controller reads.
pub fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}
