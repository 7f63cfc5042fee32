//! The reconcile plumbing around [`plan`](crate::plan::plan): the finalizer,
//! the status write (server-side apply, only when it changed), the Events
//! of each transition, and carrying out the plan's actions through the books
//! and the framework driver. The decisions themselves are all in `plan`.
//!
//! The only writer of MpiJob status: the framework driver never writes it.
//! It books a placed gang with an ask and wakes the job; the reconcile that
//! follows writes the status and answers the ask
//! ([`crate::books::Books::answer`]); a launched gang's task updates wait in
//! the books until the reconcile has written the status it plans with that
//! gang (`Launching`), then apply. kube-runtime's Controller never runs
//! two reconciles of one object at once, so no lock keeps writers apart. A
//! reconcile whose cached object is older than its own last status write
//! waits for the cache ([`crate::expectations`]) instead of acting on it.
//! Failed reconciles are retried with a per-job backoff ([`crate::retries`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::controller::Action as Requeue;
use kube::runtime::finalizer::{self, Event as Finalizer, finalizer};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use mpiswarm_crds::{ConditionReason, FINALIZER, MpiJob, MpiJobStatus, Phase};
use serde_json::json;
use tracing::Instrument;

use crate::books::{LaunchInputs, QueueEntry};
use crate::context::{Command, Context, FIELD_MANAGER, now};
use crate::error::Error;
use crate::gang::Stage;
use crate::launch::JobIdentity;
use crate::plan::{Action, Inputs, plan};
use crate::{demand, events, keys, restore};

/// How soon a reconcile that found its cached object older than its own last
/// status write looks again (the watch event of that write wakes it sooner).
const STALE_CACHE_RETRY: Duration = Duration::from_secs(1);

/// The entry point `kube::runtime::Controller` calls.
pub async fn reconcile(job: Arc<MpiJob>, ctx: Arc<Context>) -> Result<Requeue, Error> {
    let started = Instant::now();
    let key = ObjectRef::from_obj(job.as_ref());
    let span =
        tracing::info_span!("reconcile", job = %format!("{}/{}", job.namespace().unwrap_or_default(), job.name_any()));
    let ns = job.namespace().ok_or(Error::MissingNamespace)?;
    let api: Api<MpiJob> = Api::namespaced(ctx.client.clone(), &ns);
    let result = finalizer(&api, FINALIZER, job, |event| async {
        match event {
            Finalizer::Apply(job) => apply(&job, &ctx).await,
            Finalizer::Cleanup(job) => cleanup(&job, &ctx).await,
        }
    })
    .instrument(span)
    .await
    .map_err(|e| match e {
        finalizer::Error::ApplyFailed(e) | finalizer::Error::CleanupFailed(e) => e,
        finalizer::Error::AddFinalizer(e) | finalizer::Error::RemoveFinalizer(e) => Error::Kube(e),
        finalizer::Error::UnnamedObject => Error::Finalizer("the object has no name"),
        finalizer::Error::InvalidFinalizer => Error::Finalizer("the finalizer's JSON patch path is invalid"),
    });
    ctx.metrics.reconcile_seconds.observe(started.elapsed().as_secs_f64());
    if result.is_ok() {
        ctx.retries.succeeded(&key);
    }
    result
}

/// What the Controller does after an error: count it by type, retry after
/// the job's backoff (1 s doubling to 5 min, reset by a success).
pub fn error_policy(job: Arc<MpiJob>, error: &Error, ctx: Arc<Context>) -> Requeue {
    ctx.metrics.reconcile_error(error.metric_label());
    let delay = ctx.retries.failed(&ObjectRef::from_obj(job.as_ref()));
    tracing::warn!(%error, retry_in_seconds = delay.as_secs(), "reconcile failed; retrying");
    Requeue::requeue(delay)
}

/// Brings one live job's status and books in line with what is known, and
/// answers the driver's ask about its gang once the status records it.
async fn apply(job: &Arc<MpiJob>, ctx: &Context) -> Result<Requeue, Error> {
    let uid = job.uid().ok_or(Error::MissingUid)?;
    if ctx.expectations.is_stale(&uid, job.metadata.resource_version.as_deref()) {
        tracing::debug!(uid = %uid, "the cache has not caught up with our last status write; waiting for it");
        return Ok(Requeue::requeue(STALE_CACHE_RETRY));
    }
    let key = ObjectRef::from_obj(job.as_ref());
    let now = now();

    // After a restart the books do not know the gang yet: rebuild it from the status.
    if ctx.books.gang(&uid).is_none()
        && let Some(gang) = restore::gang_from_status(job, &uid, now)
    {
        let tasks: Vec<_> = gang.tasks.iter().map(|(id, t)| (id.clone(), t.agent_id.clone())).collect();
        if ctx.books.seed_gang(&uid, &key, gang) {
            tracing::info!(tasks = tasks.len(), "gang rebuilt from status; asking the master about its tasks");
            ctx.send(Command::Reconcile(tasks));
        }
    }
    let old = job.status.clone().unwrap_or_default();
    // Never reconciled before: its SSH key Secret cannot exist yet.
    let fresh = old.condition(mpiswarm_crds::ConditionType::Created).is_none();
    let mut invalid = match (job.spec.validate(), demand::job_demand(&job.spec)) {
        (Err(e), _) => Some((ConditionReason::InvalidSpec, e.to_string())),
        (Ok(()), Err(e)) => Some((ConditionReason::InvalidSpec, e.to_string())),
        _ => None,
    };
    // The role is admitted once, when the job is first seen, as admission
    // would: a later change of the namespace's policy stops no running job.
    if fresh && invalid.is_none() {
        match ctx.role_allowed(job) {
            Some(Ok(())) => {}
            Some(Err(why)) => invalid = Some((ConditionReason::RoleNotAllowed, why)),
            None => {
                tracing::debug!("the job's namespace is not in the cache yet; its role policy is asked again");
                return Ok(Requeue::requeue(STALE_CACHE_RETRY));
            }
        }
    }
    let gang = ctx.books.gang(&uid);
    let queue = ctx.books.queue_view(&uid);
    let planned = plan(&Inputs {
        job,
        gang: gang.as_ref(),
        queue: queue.as_ref(),
        now,
        launch_timeout: ctx.settings.launch_timeout,
        invalid,
    });

    tracing::debug!(
        uid = %uid,
        from = ?old.phase,
        to = ?planned.status.phase,
        actions = ?planned.actions,
        "planned"
    );
    if planned.status != old {
        let t = std::time::Instant::now();
        let written = write_status(ctx, job, &planned.status).await?;
        tracing::debug!(ms = t.elapsed().as_millis() as u64, "status written");
        let gang_generation = u32::try_from(planned.status.gang_generation.unwrap_or(0)).unwrap_or(0);
        ctx.expectations.wrote(&uid, written.metadata.resource_version, gang_generation);
    }
    // The status now stored records the placed gang (or never will): the
    // driver may ACCEPT it. Or it was planned with the launched gang: the
    // updates held for it apply now, and the job is reconciled again for them.
    if let Some(g) = &gang
        && ctx.books.answer(&uid, g.generation, g.stage, crate::plan::records(&planned.status, g))
    {
        ctx.task_changed.notify_waiters();
        ctx.wake(key.clone());
    }
    if planned.status != old {
        observe_transition(ctx, job, &old, &planned.status, now);
        for event in events::transitions(&old, &planned.status) {
            // An Event that cannot be written must not undo a status that was.
            if let Err(e) = ctx.events.publish(&event, &job.object_ref(&())).await {
                tracing::warn!(error = %e, reason = %event.reason, "could not publish an Event");
            }
        }
    }

    let mut requeue = planned.requeue_after;
    for action in &planned.actions {
        match *action {
            Action::Enqueue { generation } => enqueue(ctx, job, &uid, &key, generation, fresh).await?,
            Action::Dequeue => ctx.books.dequeue(&uid),
            Action::Kill => {
                let tasks = ctx.books.to_kill(&uid);
                if !tasks.is_empty() {
                    ctx.send(Command::Kill(tasks));
                    // KILLs are idempotent; send them again if the tasks have not ended by then.
                    requeue = Some(requeue.map_or(5, |r| r.min(5)));
                }
            }
            Action::Forget => ctx.books.forget_gang(&uid),
            Action::Delete => {
                let api: Api<MpiJob> = Api::namespaced(ctx.client.clone(), &job.namespace().unwrap_or_default());
                tracing::info!("ttlSecondsAfterFinished passed; deleting the MpiJob");
                api.delete(&job.name_any(), &DeleteParams::background()).await?;
            }
        }
    }
    Ok(requeue.map_or_else(Requeue::await_change, |s| Requeue::requeue(Duration::from_secs(s as u64))))
}

async fn enqueue(
    ctx: &Context,
    job: &Arc<MpiJob>,
    uid: &str,
    key: &ObjectRef<MpiJob>,
    generation: u32,
    fresh: bool,
) -> Result<(), Error> {
    // A waiting job is reconciled again on every change of its object; its
    // key is already in the books, so that costs no request.
    if ctx.books.refresh(uid, generation, job) {
        return Ok(());
    }
    let ssh_private_key = keys::ensure(&ctx.client, job, fresh).await?;
    let Some(entry) = queue_entry(job, uid, generation, ssh_private_key, now())? else { return Ok(()) };
    if ctx.books.enqueue(uid, key, entry) {
        ctx.send(Command::Revive { role: job.spec.role.clone() });
    }
    Ok(())
}

/// What the books keep of a waiting job; `None` for a job whose demand
/// cannot be read (it is `Invalid` and never queued).
pub fn queue_entry(
    job: &Arc<MpiJob>,
    uid: &str,
    generation: u32,
    ssh_private_key: Vec<u8>,
    now: i64,
) -> Result<Option<QueueEntry>, Error> {
    let Ok(demand) = demand::job_demand(&job.spec) else { return Ok(None) };
    let launch = Arc::new(LaunchInputs {
        identity: JobIdentity {
            namespace: job.namespace().ok_or(Error::MissingNamespace)?,
            name: job.name_any(),
            uid: uid.to_owned(),
            labels: job.labels().clone(),
        },
        job: job.clone(),
        ssh_private_key,
    });
    let created_at = job.metadata.creation_timestamp.as_ref().map_or(0, |t| t.0.as_second());
    Ok(Some(QueueEntry {
        generation,
        role: job.spec.role.clone(),
        created_at,
        demand,
        view: crate::plan::QueueView { since: now, ..Default::default() },
        launch,
    }))
}

/// Deletion: no new gang, KILL the tasks, wait for their terminal updates,
/// then let the finalizer go. The Secret goes with the job (owner reference).
async fn cleanup(job: &MpiJob, ctx: &Context) -> Result<Requeue, Error> {
    let uid = job.uid().ok_or(Error::MissingUid)?;
    ctx.books.dequeue(&uid);
    // A gang placed but not launched has no task to wait for: it is
    // withdrawn (its ask answered never), so the driver does not ACCEPT it.
    // A launched one's held updates apply now: no status is to come first.
    if let Some(g) = ctx.books.gang(&uid) {
        match g.stage {
            Stage::Planned => {
                let _withdrawn = ctx.books.forget_planned(&uid, g.generation);
            }
            Stage::Launched => {
                let _applied = ctx.books.answer(&uid, g.generation, Stage::Launched, false);
            }
        }
    }
    if ctx.books.gang(&uid).is_none()
        && let Some(gang) = restore::gang_from_status(job, &uid, now())
    {
        ctx.books.seed_gang(&uid, &ObjectRef::from_obj(job), gang);
    }
    let deadline = tokio::time::Instant::now() + ctx.settings.teardown_wait;
    while let Some(gang) = ctx.books.gang(&uid) {
        if gang.all_ended() {
            break;
        }
        let waiting = ctx.task_changed.notified();
        let tasks = ctx.books.to_kill(&uid);
        tracing::info!(tasks = tasks.len(), "deleting: killing the gang's tasks");
        ctx.send(Command::Kill(tasks));
        if tokio::time::timeout_at(deadline, waiting).await.is_err() {
            return Err(Error::TeardownPending {
                job: job.name_any(),
                seconds: ctx.settings.teardown_wait.as_secs_f64(),
            });
        }
    }
    ctx.forget_job(&uid);
    Ok(Requeue::await_change())
}

/// The one status write of the controller; returns the object as stored.
async fn write_status(ctx: &Context, job: &MpiJob, status: &MpiJobStatus) -> Result<MpiJob, Error> {
    let api: Api<MpiJob> = Api::namespaced(ctx.client.clone(), &job.namespace().ok_or(Error::MissingNamespace)?);
    let patch = json!({
        "apiVersion": mpiswarm_crds::API_VERSION,
        "kind": "MpiJob",
        "status": status,
    });
    Ok(api.patch_status(&job.name_any(), &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&patch)).await?)
}

fn observe_transition(ctx: &Context, job: &MpiJob, old: &MpiJobStatus, new: &MpiJobStatus, now: i64) {
    if new.phase == Some(Phase::Running)
        && old.phase != Some(Phase::Running)
        && let Some(created) = job.metadata.creation_timestamp.as_ref()
    {
        ctx.metrics.creation_to_running.observe((now - created.0.as_second()).max(0) as f64);
    }
}

#[cfg(test)]
#[path = "reconcile_tests.rs"]
mod tests;
