//! The framework driver: the controller's one subscription to the Mesos
//! master (our offer layer, or a real Mesos master: it speaks only the v1
//! scheduler API). It REVIVEs while jobs wait and SUPPRESSes when none do,
//! runs an offer round on every OFFERS event, launches each placed gang as
//! one ACCEPT per agent (after its status says so), declines what it does
//! not use, maps UPDATEs onto the books and acknowledges them, and
//! RECONCILEs after every (re)subscribe. The framework id lives in a
//! ConfigMap so that a new leader fails over as the same framework.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::{FutureExt, StreamExt, stream};
use kube::ResourceExt;
use mpiswarm_mesos::client::{Backoff, ClientError, SchedulerClient};
use mpiswarm_mesos::framework::{Capability, CapabilityType};
use mpiswarm_mesos::scheduler::{Call, CallType, Event, EventType, ReconcileTask, Subscribe};
use mpiswarm_mesos::{
    AgentId, Filters, FrameworkId, FrameworkInfo, MasterError, Offer, Reason, TaskId, TaskState, TaskStatus,
};
use mpiswarm_policy::RoundOptions;
use tokio::sync::{mpsc, watch};

use crate::books::TaskRef;
use crate::context::{Command, Context, now};
use crate::error::{Error, SubscriptionEnded};
use crate::framework_id::FrameworkIdStore;
use crate::gang::{GangBook, Stage};
use crate::names::TaskName;
use crate::round::{self, StartedGang};

/// How to reach the master and who we are to it.
#[derive(Clone)]
pub struct DriverConfig {
    pub master: String,
    pub credentials: Option<(String, String)>,
    /// The CA to trust for an https master.
    pub ca: Option<mpiswarm_mesos::tls::CaFile>,
    pub framework_name: String,
    pub user: String,
    pub framework_ids: FrameworkIdStore,
}

/// Concurrent status writes of freshly placed gangs in one round.
const STATUS_WRITES_IN_FLIGHT: usize = 32;

/// Runs until `shutdown` turns true, re-subscribing with backoff whenever
/// the connection ends.
pub async fn run(
    ctx: Arc<Context>,
    config: DriverConfig,
    mut commands: mpsc::UnboundedReceiver<Command>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), Error> {
    let client = SchedulerClient::new(&config.master, config.credentials.clone()).trusting(config.ca.as_ref());
    let backoff = Backoff { initial: Duration::from_millis(200), max: Duration::from_secs(5) };
    let mut roles: BTreeSet<String> = BTreeSet::from(["*".to_owned()]);
    let mut attempt = 0u32;
    while !*shutdown.borrow() {
        roles.extend(ctx.books.waiting_roles());
        let info = match framework_info(&ctx, &config, &roles).await {
            Ok(info) => info,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the framework id; retrying");
                sleep_or_shutdown(backoff.delay(attempt), &mut shutdown).await;
                attempt += 1;
                continue;
            }
        };
        let subscription = tokio::select! {
            s = client.subscribe(info) => s,
            _ = shutdown.changed() => break,
        };
        match subscription {
            Ok(sub) => {
                attempt = 0;
                let mut session = Session {
                    ctx: &ctx,
                    client: &client,
                    config: &config,
                    framework_id: sub.subscribed.framework_id.clone(),
                    roles: roles.clone(),
                    suppressed: false,
                };
                let heartbeat = sub.subscribed.heartbeat_interval_seconds.unwrap_or(15.0).max(1.0);
                let ended = session.serve(sub.events, heartbeat, &mut commands, &mut shutdown).await;
                roles = session.roles;
                ctx.subscribed.store(false, Ordering::SeqCst);
                tracing::warn!(reason = %ended, master = %config.master, "subscription ended; re-subscribing");
            }
            Err(ClientError::Refused { error: error @ MasterError::FrameworkRemoved, .. }) => {
                tracing::warn!(%error, "the master no longer knows our framework id; subscribing afresh");
                if let Err(e) = config.framework_ids.clear().await {
                    tracing::warn!(error = %e, "could not clear the framework id");
                }
            }
            Err(e) => tracing::warn!(error = %e, master = %config.master, "SUBSCRIBE failed; retrying"),
        }
        sleep_or_shutdown(backoff.delay(attempt), &mut shutdown).await;
        attempt += 1;
    }
    Ok(())
}

async fn sleep_or_shutdown(d: Duration, shutdown: &mut watch::Receiver<bool>) {
    tokio::select! {
        _ = tokio::time::sleep(d) => {}
        _ = shutdown.changed() => {}
    }
}

async fn framework_info(
    ctx: &Context,
    config: &DriverConfig,
    roles: &BTreeSet<String>,
) -> Result<FrameworkInfo, Error> {
    let id = config.framework_ids.load().await?.map(|id| FrameworkId::new(&id));
    Ok(described(ctx, config, roles, id))
}

/// The one home of what this framework says it is (SUBSCRIBE and
/// UPDATE_FRAMEWORK alike): its roles, id, failover timeout, checkpointing,
/// capabilities, and the principal it authenticates as, as Mesos frameworks
/// declare it so the master can attribute and authorize them.
fn described(ctx: &Context, config: &DriverConfig, roles: &BTreeSet<String>, id: Option<FrameworkId>) -> FrameworkInfo {
    let roles: Vec<&str> = roles.iter().map(String::as_str).collect();
    let mut info = FrameworkInfo::new(&config.user, &config.framework_name, &roles);
    info.id = id;
    info.principal = config.credentials.as_ref().map(|(principal, _)| principal.clone());
    info.failover_timeout = Some(ctx.settings.failover_timeout);
    info.checkpoint = Some(true);
    info.capabilities.push(Capability { kind: Some(CapabilityType::TaskKillingState) });
    info
}

struct Session<'a> {
    ctx: &'a Arc<Context>,
    client: &'a SchedulerClient,
    config: &'a DriverConfig,
    framework_id: FrameworkId,
    roles: BTreeSet<String>,
    suppressed: bool,
}

impl Session<'_> {
    async fn serve(
        &mut self,
        mut events: mpiswarm_mesos::client::EventStream<Event>,
        heartbeat: f64,
        commands: &mut mpsc::UnboundedReceiver<Command>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> SubscriptionEnded {
        if let Err(e) = self.on_subscribed().await {
            return SubscriptionEnded::AfterSubscribed(e);
        }
        // Mesos: a framework that misses several heartbeats should assume the connection is gone.
        let silence = Duration::from_secs_f64(heartbeat * 3.0);
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                event = tokio::time::timeout(silence, events.next()) => match event {
                    Err(_) => return SubscriptionEnded::Silent(silence.as_secs()),
                    Ok(None) => return SubscriptionEnded::StreamEnded,
                    Ok(Some(Err(e))) => return SubscriptionEnded::Broken(e),
                    Ok(Some(Ok(event))) => {
                        let started = std::time::Instant::now();
                        let kind = event.kind;
                        if let Err(e) = self.on_event(event).await {
                            return e;
                        }
                        tracing::debug!(?kind, ms = started.elapsed().as_millis() as u64, "event handled");
                    }
                },
                Some(command) = commands.recv() => {
                    if let Err(e) = self.on_command(command).await {
                        return SubscriptionEnded::Call(e);
                    }
                }
                _ = tick.tick() => {
                    if let Err(e) = self.keep_roles_and_interest().await {
                        return SubscriptionEnded::Call(e);
                    }
                }
                _ = shutdown.changed() => return SubscriptionEnded::Shutdown,
            }
        }
    }

    async fn call(&self, call: &Call) -> Result<(), ClientError> {
        self.client.call(call).await
    }

    async fn on_subscribed(&mut self) -> Result<(), Error> {
        let ctx = self.ctx;
        let fid = self.framework_id.value.clone();
        // Written on every subscribe: the id, and the master it belongs to.
        self.config.framework_ids.save(&fid).await?;
        ctx.subscribed.store(true, Ordering::SeqCst);
        ctx.metrics.subscriptions.inc();
        tracing::info!(framework_id = %fid, roles = ?self.roles, "subscribed");
        // Explicit reconciliation of every task we know, then implicit (the
        // master answers with every task of ours, including ones we forgot).
        let known: Vec<TaskRef> = ctx.books.unknown_tasks();
        if !known.is_empty() {
            self.reconcile(known).await?;
        }
        self.call(&Call::reconcile(&self.framework_id, Vec::new())).await?;
        self.suppressed = false;
        self.keep_roles_and_interest().await?;
        for key in ctx.books.keys() {
            ctx.wake(key);
        }
        Ok(())
    }

    async fn reconcile(&self, tasks: Vec<TaskRef>) -> Result<(), ClientError> {
        let tasks = tasks
            .into_iter()
            .map(|(task, agent)| ReconcileTask { task_id: TaskId::new(&task), agent_id: Some(AgentId::new(&agent)) })
            .collect();
        self.call(&Call::reconcile(&self.framework_id, tasks)).await
    }

    /// Subscribes to new roles (UPDATE_FRAMEWORK), REVIVEs while jobs wait, SUPPRESSes when none do.
    async fn keep_roles_and_interest(&mut self) -> Result<(), ClientError> {
        let wanted = self.ctx.books.waiting_roles();
        if !wanted.is_subset(&self.roles) {
            self.roles.extend(wanted.iter().cloned());
            let info = described(self.ctx, self.config, &self.roles, Some(self.framework_id.clone()));
            let mut call = Call::new(CallType::UpdateFramework, Some(self.framework_id.clone()));
            call.update_framework =
                Some(Subscribe { framework_info: info, suppressed_roles: Vec::new(), offer_constraints: None });
            self.call(&call).await?;
            tracing::info!(roles = ?self.roles, "UPDATE_FRAMEWORK with new roles");
            self.suppressed = true; // force a REVIVE below
        }
        if wanted.is_empty() && !self.suppressed {
            self.call(&Call::suppress(&self.framework_id, Vec::new())).await?;
            self.suppressed = true;
        } else if !wanted.is_empty() && self.suppressed {
            self.call(&Call::revive(&self.framework_id, wanted.into_iter().collect())).await?;
            self.suppressed = false;
        }
        Ok(())
    }

    async fn on_command(&mut self, command: Command) -> Result<(), ClientError> {
        match command {
            Command::Revive { role } => {
                if !self.roles.contains(&role) {
                    return self.keep_roles_and_interest().await;
                }
                self.call(&Call::revive(&self.framework_id, vec![role])).await?;
                self.suppressed = false;
            }
            Command::Kill(tasks) => {
                tracing::debug!(tasks = ?tasks, "KILL");
                for (task, agent) in tasks {
                    self.call(&Call::kill(&self.framework_id, TaskId::new(&task), Some(AgentId::new(&agent)))).await?;
                }
            }
            Command::Reconcile(tasks) => self.reconcile(tasks).await?,
        }
        Ok(())
    }

    async fn on_event(&mut self, event: Event) -> Result<(), SubscriptionEnded> {
        match event.kind {
            EventType::Offers => {
                let offers = event.offers.map(|o| o.offers).unwrap_or_default();
                self.on_offers(offers).await.map_err(SubscriptionEnded::OfferRound)
            }
            EventType::Update => {
                if let Some(update) = event.update {
                    self.on_update(update.status).await.map_err(SubscriptionEnded::Update)?;
                }
                Ok(())
            }
            EventType::Error => {
                let error = event.error.map_or(MasterError::Other(String::new()), |e| e.kind());
                if error == MasterError::FrameworkRemoved
                    && let Err(e) = self.config.framework_ids.clear().await
                {
                    tracing::warn!(error = %e, "could not clear the framework id");
                }
                Err(SubscriptionEnded::MasterError(error))
            }
            EventType::Failure => {
                if let Some(f) = event.failure {
                    tracing::warn!(agent = ?f.agent_id, executor = ?f.executor_id, status = ?f.status, "FAILURE from the master");
                }
                Ok(())
            }
            EventType::Rescind => {
                // Offers are only held inside one round; an ACCEPT on a rescinded
                // offer comes back as TASK_DROPPED/LOST and the gang is relaunched.
                Ok(())
            }
            _ => Ok(()),
        }
    }

    async fn on_update(&mut self, status: TaskStatus) -> Result<(), ClientError> {
        let ctx = self.ctx;
        tracing::debug!(task = %status.task_id.value, state = status.state.as_str(), "UPDATE");
        if let Some(key) = ctx.books.record(&status, now()) {
            ctx.wake(key);
        } else if !status.state.is_terminal()
            && !ctx.books.knows_task(&status.task_id.value)
            && self.is_stray(&status.task_id.value)
        {
            tracing::warn!(task = %status.task_id.value, "killing a task that belongs to no live gang");
            self.call(&Call::kill(&self.framework_id, status.task_id.clone(), status.agent_id.clone())).await?;
        }
        ctx.task_changed.notify_waiters();
        if let (Some(uuid), Some(agent)) = (status.uuid.clone(), status.agent_id.clone()) {
            self.call(&Call::acknowledge(&self.framework_id, agent, status.task_id.clone(), uuid)).await?;
        }
        Ok(())
    }

    /// A task of ours whose job is gone or has moved on to a later gang.
    fn is_stray(&self, task_id: &str) -> bool {
        let Some(name) = TaskName::parse(task_id) else { return false };
        let Some(store) = self.ctx.store.get() else { return false };
        // Updates of running tasks arrive as soon as we subscribe (a RECONCILE
        // answers for each), maybe before the cache has listed the MpiJobs:
        // against an empty cache every task looks like a stray, and a new
        // leader killed the launchers of the gangs it was taking over.
        if store.wait_until_ready().now_or_never().is_none_or(|r| r.is_err()) {
            return false;
        }
        let job =
            store.state().into_iter().find(|j| j.uid().is_some_and(|u| crate::names::short_uid(&u) == name.short_uid));
        match job {
            None => true,
            Some(job) => {
                let uid = job.uid().unwrap_or_default();
                let status = self.ctx.written_status(&uid, job.status.as_ref()).or_else(|| job.status.clone());
                let current = status.and_then(|s| s.gang_generation).unwrap_or(0).max(0) as u32;
                name.generation < current
            }
        }
    }

    async fn on_offers(&mut self, offers: Vec<Offer>) -> Result<(), Error> {
        let ctx = self.ctx.clone();
        ctx.metrics.offers_received.inc_by(offers.len() as u64);
        ctx.books.observe_capacity(&crate::demand::capacities(&offers));
        let waiting = ctx.books.waiting();
        let now = now();
        let span = tracing::info_span!("offer_round", offers = offers.len(), waiting = waiting.len());
        let entered = span.enter();
        // (Entered only around the pure round below; the awaits come after it is dropped.)
        let (known, epoch) = ctx.books.known_capacity();
        let outcome = round::plan_round(
            &offers,
            &waiting,
            (&known, epoch),
            RoundOptions { now, backfill: ctx.settings.backfill },
        );
        self.log_round(&outcome.log);
        drop(entered);
        for w in &outcome.waiting {
            if let Some(key) = ctx.books.set_wait(&w.uid, w.reason.clone(), w.never_fits.clone(), epoch, now) {
                ctx.wake(key);
            }
        }
        // Status first ("Scheduling", with the placement), then the ACCEPTs: a
        // controller that dies in between finds the gang in the status and asks
        // the master about it, so a gang is never launched twice.
        let persisted: Vec<StartedGang> = stream::iter(outcome.started)
            .map(|s| {
                let ctx = ctx.clone();
                async move { persist(&ctx, s).await }
            })
            .buffer_unordered(STATUS_WRITES_IN_FLIGHT)
            .filter_map(|s| async move { s })
            .collect()
            .await;
        let mut ops: BTreeMap<(String, String), Vec<(usize, mpiswarm_mesos::Operation)>> = BTreeMap::new();
        for (i, s) in persisted.iter().enumerate() {
            for l in &s.launches {
                ops.entry((l.agent_id.clone(), s.role.clone())).or_default().push((i, l.operation.clone()));
            }
        }
        let refuse =
            if ctx.books.is_waiting() { ctx.settings.refuse_seconds_waiting } else { ctx.settings.refuse_seconds_idle };
        let mut declined = Vec::new();
        let mut failed: BTreeSet<usize> = BTreeSet::new();
        for (key, offer_ids) in outcome.offers {
            let Some(group) = ops.remove(&key) else {
                declined.extend(offer_ids);
                continue;
            };
            let jobs: BTreeSet<usize> = group.iter().map(|(i, _)| *i).collect();
            let operations = group.into_iter().map(|(_, op)| op).collect();
            let n = offer_ids.len() as u64;
            let call = Call::accept(&self.framework_id, offer_ids, operations, Some(Filters::refuse(refuse)));
            match self.call(&call).await {
                Ok(()) => {
                    ctx.metrics.offers_accepted.inc_by(n);
                }
                Err(e) => {
                    tracing::warn!(error = %e, agent = %key.0, "ACCEPT failed; its gangs go back to the queue");
                    failed.extend(jobs);
                }
            }
        }
        for (i, s) in persisted.iter().enumerate() {
            if failed.contains(&i) {
                drop_gang(&ctx, s, "the ACCEPT call to the master failed");
            } else {
                ctx.books.mark_launched(&s.uid, s.generation, now);
                ctx.metrics.gangs_launched.inc();
            }
        }
        // "Launching" is written before any update of these tasks is read, so
        // every job's story has it, however fast its tasks start.
        stream::iter(persisted.iter().map(|s| s.uid.clone()))
            .for_each_concurrent(STATUS_WRITES_IN_FLIGHT, |uid| {
                let ctx = ctx.clone();
                async move { sync_job(&ctx, &uid).await }
            })
            .await;
        if !declined.is_empty() {
            ctx.metrics.offers_declined.inc_by(declined.len() as u64);
            self.call(&Call::decline(&self.framework_id, declined, Some(Filters::refuse(refuse)))).await?;
        }
        self.keep_roles_and_interest().await?;
        Ok(())
    }

    fn log_round(&self, log: &[round::RoleRound]) {
        if log.is_empty() {
            return;
        }
        for r in log {
            tracing::info!(
                role = %r.role,
                jobs = r.jobs.len(),
                agents = r.offers.len(),
                started = r.round.started.len(),
                waiting = r.round.waiting.len(),
                "offer round"
            );
        }
        if let Some(path) = &self.ctx.settings.round_log {
            match serde_json::to_string(log) {
                Ok(line) => crate::round_log::append(path, line),
                Err(e) => tracing::warn!(error = %e, "cannot serialise the round"),
            }
        }
    }
}

/// Books the gang and writes the job's status; `None` if the job went away.
async fn persist(ctx: &Arc<Context>, started: StartedGang) -> Option<StartedGang> {
    let job = ctx.cached_job(&started.uid)?;
    if job.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let gang =
        GangBook::new(&started.uid, started.generation, &started.role, started.placement.clone(), Stage::Planned);
    ctx.books.plan_gang(&started.uid, gang)?;
    if let Err(e) = crate::reconcile::apply(&job, ctx).await {
        tracing::warn!(error = %e, job = %job.name_any(), "could not record the placement; the job waits for the next round");
        ctx.books.forget_gang(&started.uid);
        ctx.wake(kube::runtime::reflector::ObjectRef::from_obj(job.as_ref()));
        return None;
    }
    // A deletion may have taken the gang away while the status was written.
    let still =
        ctx.books.gang(&started.uid).is_some_and(|g| g.generation == started.generation && g.stage == Stage::Planned);
    still.then_some(started)
}

/// Reconciles one job now (the reconciler would, a moment later).
async fn sync_job(ctx: &Arc<Context>, uid: &str) {
    let Some(job) = ctx.cached_job(uid) else { return };
    if let Err(e) = crate::reconcile::apply(&job, ctx).await {
        tracing::warn!(error = %e, job = %job.name_any(), "status write after launch failed; the reconciler retries");
        ctx.wake(kube::runtime::reflector::ObjectRef::from_obj(job.as_ref()));
    }
}

/// A gang whose ACCEPT never reached the master: its tasks do not exist;
/// record that, so the job goes back to the queue without using a restart.
fn drop_gang(ctx: &Context, s: &StartedGang, why: &str) {
    ctx.books.mark_launched(&s.uid, s.generation, now());
    for l in &s.launches {
        for (name, _) in &l.tasks {
            let mut status = TaskStatus::new(TaskId::new(name.to_string()), TaskState::Dropped);
            status.reason = Some(Reason::ReasonInvalidOffers);
            status.message = Some(why.to_owned());
            ctx.books.record(&status, now());
        }
    }
}
