//! The framework driver: the controller's one subscription to the Mesos
//! master (our offer layer, or a real Mesos master: it speaks only the v1
//! scheduler API). It REVIVEs while jobs wait and SUPPRESSes when none do,
//! runs an offer round on every OFFERS event, launches each placed gang as
//! one ACCEPT per agent (after its status says so), declines what it does
//! not use, maps UPDATEs onto the books and acknowledges them, and
//! RECONCILEs after every (re)subscribe. The framework id lives in a
//! ConfigMap so that a new leader fails over as the same framework.
//!
//! It never writes an MpiJob's status: it books a placed gang with an ask
//! for that write, wakes the job, and ACCEPTs only once the reconciler has
//! answered that the status records the gang (bounded by
//! `Settings::status_write_wait`; the gangs of one round are written
//! concurrently). A launched gang's task updates wait in the books until
//! the reconciler has written `Launching` (see [`crate::books`]). What to
//! accept, decline and drop, and what is a stray, are pure decisions in
//! [`round`]; this file carries them out.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use kube::ResourceExt;
use mpiswarm_mesos::client::{Backoff, ClientError, Endpoint, SchedulerClient};
use mpiswarm_mesos::framework::{Capability, CapabilityType};
use mpiswarm_mesos::quota::QuotaStatus;
use mpiswarm_mesos::scheduler::{Call, CallType, Event, EventType, ReconcileTask, Subscribe};
use mpiswarm_mesos::{AgentId, Filters, FrameworkId, FrameworkInfo, MasterError, Offer, TaskId, TaskStatus};
use mpiswarm_policy::RoundOptions;
use tokio::sync::{mpsc, watch};

use crate::books::TaskRef;
use crate::context::{Command, Context, now};
use crate::error::{Error, SubscriptionEnded};
use crate::framework_id::FrameworkIdStore;
use crate::gang::{GangBook, Stage};
use crate::names::TaskName;
use crate::quota_record;
use crate::round::{self, Fate, Owner, StartedGang};

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

/// Runs until `shutdown` turns true, re-subscribing with backoff whenever
/// the connection ends.
pub async fn run(
    ctx: Arc<Context>,
    config: DriverConfig,
    mut commands: mpsc::UnboundedReceiver<Command>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), Error> {
    let client = SchedulerClient::new(&config.master, config.credentials.clone()).trusting(config.ca.as_ref());
    let quota = Endpoint::new(&config.master, "/quota", config.credentials.clone()).trusting(config.ca.as_ref());
    tokio::spawn(read_quota(ctx.clone(), quota, config.framework_ids.clone(), shutdown.clone()));
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
            // A standby may have sent the SUBSCRIBE on to a silent leader
            // while another replica leads already: subscribe there.
            leader = client.leader_elsewhere(LEADER_CHECK) => {
                tracing::warn!(leader, "another replica of the offer layer leads; subscribing there");
                continue;
            }
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
                // A silent master may be alive and stopped (it refuses no
                // connection): the next configured replica is asked first.
                if let SubscriptionEnded::Silent(_) = ended
                    && let Some(next) = client.move_on()
                {
                    tracing::warn!(next, "the master fell silent; subscribing at the next replica");
                }
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

/// How often the other replicas of the offer layer are asked who leads
/// (`SchedulerClient::leader_elsewhere`), when `--master` names several.
const LEADER_CHECK: Duration = Duration::from_secs(2);
/// How often the offer layer's quota limits are read.
const QUOTA_EVERY: Duration = Duration::from_secs(10);
/// How long one read of them (or one write of their record) may take.
const QUOTA_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the quota record is written even when it did not change.
const QUOTA_REPUBLISH_EVERY: Duration = Duration::from_secs(120);

/// Reads the master's quota limits (`GET /quota`) into the books every
/// [`QUOTA_EVERY`], beside the event loop so that a slow answer stalls
/// nothing; the offer rounds tell a job larger than its role's limit so.
/// A master that does not answer (an older one, or ACLs that keep the
/// controller from `/quota`) leaves the last limits read, and is warned of
/// once until it answers again. Each read is also published for
/// `mpiswarm status` ([`quota_record`]) when it changed.
async fn read_quota(
    ctx: Arc<Context>,
    endpoint: Endpoint,
    record: FrameworkIdStore,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut failing = false;
    let mut published: Option<(quota_record::Quotas, tokio::time::Instant)> = None;
    while !*shutdown.borrow() {
        match endpoint.get_json::<QuotaStatus>(QUOTA_TIMEOUT).await {
            Ok(status) => {
                let limits = status.limits();
                if ctx.books.set_quota_limits(limits.clone()) {
                    tracing::info!(?limits, "the offer layer's quota limits");
                }
                failing = false;
                let quotas = quota_record::from_status(&status);
                // When it changed, and again now and then (the ConfigMap
                // may have been removed with a framework id the master forgot).
                let due = published
                    .as_ref()
                    .is_none_or(|(last, at)| *last != quotas || at.elapsed() >= QUOTA_REPUBLISH_EVERY);
                if due && !(quotas.is_empty() && published.is_none()) {
                    match tokio::time::timeout(QUOTA_TIMEOUT, record.save_quotas(&quotas)).await {
                        Ok(Ok(())) => published = Some((quotas, tokio::time::Instant::now())),
                        Ok(Err(e)) => {
                            tracing::warn!(error = %e, "cannot publish the roles' quota in the framework ConfigMap")
                        }
                        Err(_) => tracing::warn!("publishing the roles' quota in the framework ConfigMap timed out"),
                    }
                }
            }
            Err(e) if !failing => {
                tracing::warn!(error = %e, "cannot read the offer layer's quota limits; keeping the last ones read");
                failing = true;
            }
            Err(_) => {}
        }
        sleep_or_shutdown(QUOTA_EVERY, &mut shutdown).await;
    }
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
        let moved = self.client.leader_elsewhere(LEADER_CHECK);
        tokio::pin!(moved);
        loop {
            tokio::select! {
                leader = &mut moved => return SubscriptionEnded::LeaderMoved(leader),
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
        } else if !ctx.books.knows_task(&status.task_id.value)
            && let Some(name) = TaskName::parse(&status.task_id.value)
            && round::is_stray(name.generation, status.state.is_terminal(), self.owner(&name))
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

    /// What the cache, and the status writer's last write, say of a task's job.
    fn owner(&self, name: &TaskName) -> Owner {
        let Some(store) = self.ctx.store.get() else { return Owner::NotListed };
        if store.wait_until_ready().now_or_never().is_none_or(|r| r.is_err()) {
            return Owner::NotListed;
        }
        let job =
            store.state().into_iter().find(|j| j.uid().is_some_and(|u| crate::names::short_uid(&u) == name.short_uid));
        let Some(job) = job else { return Owner::Gone };
        let uid = job.uid().unwrap_or_default();
        let cached = job.status.as_ref().and_then(|s| s.gang_generation).unwrap_or(0).max(0) as u32;
        // A status write the cache does not show yet is the newer one.
        Owner::Generation(self.ctx.expectations.gang_generation(&uid).unwrap_or(cached))
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
            &ctx.books.quota_limits(),
            RoundOptions { now, backfill: ctx.settings.backfill, depth: Some(ctx.settings.queue_depth) },
            &ctx.settings.shared_volumes,
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
        let started_any = !outcome.started.is_empty();
        let written: Vec<StartedGang> = futures::future::join_all(outcome.started.into_iter().map(|s| book(&ctx, s)))
            .await
            .into_iter()
            .flatten()
            .collect();
        let answers = round::answers(&outcome.offers, &written);
        let tried: std::collections::HashSet<&str> = waiting.iter().map(|(uid, _)| uid.as_str()).collect();
        // Jobs past the depth are worth new offers only if the round could
        // start some (a round that started none found the cluster full or
        // its head blocked, which the jobs behind it do not change).
        let untried = (outcome.untried > 0 && started_any) || ctx.books.waits_outside(&tried);
        let refuse = round::refuse_seconds(ctx.books.is_waiting(), untried, &ctx.settings);
        let mut sent = Vec::with_capacity(answers.accepts.len());
        for a in &answers.accepts {
            let call = Call::accept(
                &self.framework_id,
                a.offer_ids.clone(),
                a.operations.clone(),
                Some(Filters::refuse(refuse)),
            );
            match self.call(&call).await {
                Ok(()) => {
                    ctx.metrics.offers_accepted.inc_by(a.offer_ids.len() as u64);
                    sent.push(true);
                }
                Err(e) => {
                    tracing::warn!(error = %e, agent = %a.agent_id, "ACCEPT failed; its gangs go back to the queue");
                    sent.push(false);
                }
            }
        }
        // The updates of a launched gang's tasks are held in the books until
        // the reconciler has written "Launching", so every job's story has
        // it, however fast its tasks start; the driver need not wait for it.
        for (s, fate) in written.iter().zip(round::fates(written.len(), &answers.accepts, &sent)) {
            let woken = match fate {
                Fate::Launched => {
                    ctx.metrics.gangs_launched.inc();
                    ctx.books.mark_launched(&s.uid, s.generation, now)
                }
                Fate::Dropped => {
                    let updates = round::dropped_updates(s, "the ACCEPT call to the master failed");
                    ctx.books.mark_dropped(&s.uid, s.generation, &updates, now)
                }
            };
            if let Some(key) = woken {
                ctx.wake(key);
            }
        }
        if !answers.declined.is_empty() {
            ctx.metrics.offers_declined.inc_by(answers.declined.len() as u64);
            self.call(&Call::decline(&self.framework_id, answers.declined, Some(Filters::refuse(refuse)))).await?;
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

/// Books a placed gang and asks the reconciler to write the status that
/// records it; returns the gang once that status is written, `None` if it
/// was not within `status_write_wait` or never will be (the job went away
/// or was suspended): the gang is forgotten and the job queues again.
async fn book(ctx: &Arc<Context>, started: StartedGang) -> Option<StartedGang> {
    let job = ctx.cached_job(&started.uid)?;
    if job.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let gang =
        GangBook::new(&started.uid, started.generation, &started.role, started.placement.clone(), Stage::Planned);
    let (key, answer) = ctx.books.plan_gang(&started.uid, gang)?;
    ctx.wake(key);
    let why = match tokio::time::timeout(ctx.settings.status_write_wait, answer).await {
        Ok(Ok(())) => return Some(started),
        Ok(Err(_)) => "its status will not record the placement (the job changed meanwhile)",
        Err(_) => "its status was not written in time",
    };
    tracing::warn!(job = %job.name_any(), why, "the placed gang is not launched; the job waits for the next round");
    if let Some(key) = ctx.books.forget_planned(&started.uid, started.generation) {
        ctx.wake(key);
    }
    None
}
