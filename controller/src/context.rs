//! What the reconcilers and the framework driver share: the Kubernetes
//! client, the books, the Event publisher, metrics, settings, and the two
//! channels between them (commands to the driver, reconcile triggers back).

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use kube::runtime::reflector::{ObjectRef, Store};
use mpiswarm_crds::{MpiJob, MpiJobStatus};
use mpiswarm_policy::Backfill;
use tokio::sync::{Notify, mpsc};

use crate::books::{Books, TaskRef};
use crate::events::Publisher;
use crate::metrics::Metrics;

/// The field manager of every status write.
pub const FIELD_MANAGER: &str = "mpiswarm-controller";

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
    /// The CA an https master's certificate must chain to (`--ca-file`).
    pub master_ca: Option<mpiswarm_mesos::tls::CaFile>,
    /// How long a deletion waits in one pass for the gang's tasks to end
    /// (then the reconcile fails and is retried, sending the KILLs again).
    pub teardown_wait: std::time::Duration,
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
            master_ca: None,
            teardown_wait: std::time::Duration::from_secs(20),
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
    /// Signalled whenever a task update changed the books (cleanup waits on it).
    pub task_changed: Notify,
    /// Subscribed to the master (for /readyz).
    pub subscribed: AtomicBool,
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    written: Mutex<HashMap<String, MpiJobStatus>>,
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
            task_changed: Notify::new(),
            subscribed: AtomicBool::new(false),
            locks: Mutex::default(),
            written: Mutex::default(),
        }
    }

    /// One async lock per job: the reconciler and the driver's status write
    /// of a freshly placed gang never interleave. The lock exists only while
    /// someone holds or awaits it (thousands of idle jobs keep none).
    pub async fn lock_job(&self, uid: &str) -> JobGuard<'_> {
        let lock = self
            .locks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(uid.to_owned())
            .or_default()
            .clone();
        let held = lock.lock_owned().await;
        JobGuard { ctx: self, uid: uid.to_owned(), held: Some(held) }
    }

    /// The status this controller last wrote for the job, while the cached
    /// object (whose status is `cached`) has not caught up with it. Once it
    /// has, the copy is dropped: the reflector only moves forward, so the
    /// cache is at least as new from then on.
    pub fn written_status(&self, uid: &str, cached: Option<&MpiJobStatus>) -> Option<MpiJobStatus> {
        let mut written = self.written.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let last = written.get(uid)?;
        if cached == Some(last) {
            written.remove(uid);
            return None;
        }
        Some(last.clone())
    }

    pub fn remember_status(&self, uid: &str, status: MpiJobStatus) {
        self.written.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(uid.to_owned(), status);
    }

    pub fn forget_job(&self, uid: &str) {
        self.written.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(uid);
        self.locks.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(uid);
        self.books.remove(uid);
    }

    /// The cached MpiJob of a job the books know, by key (no scan of the cache).
    pub fn cached_job(&self, uid: &str) -> Option<std::sync::Arc<MpiJob>> {
        let key = self.books.key(uid)?;
        self.store.get()?.get(&key)
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

/// A held job lock (see [`Context::lock_job`]).
pub struct JobGuard<'a> {
    ctx: &'a Context,
    uid: String,
    held: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Drop for JobGuard<'_> {
    fn drop(&mut self) {
        let Some(held) = self.held.take() else { return };
        // Under the map's lock nobody can take a new handle to this mutex, and
        // every holder or waiter owns one: the map's and ours only means idle.
        let mut locks = self.ctx.locks.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mutex = tokio::sync::OwnedMutexGuard::mutex(&held).clone();
        drop(held);
        if Arc::strong_count(&mutex) == 2 && locks.get(&self.uid).is_some_and(|m| Arc::ptr_eq(m, &mutex)) {
            locks.remove(&self.uid);
        }
    }
}

/// Wall-clock Unix seconds: the only clock the controller reads.
pub fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}
