//! The exact API requests of one reconcile, table-driven over the job's
//! state transitions: each row sets up a job and what the books know, runs
//! `reconcile` against an [`ApiServerVerifier`], and checks the requests in
//! order (finalizer patches, the server-side-applied status, Events, the SSH
//! key Secret, the TTL delete), the commands sent to the framework driver,
//! the outcome, what the books know afterwards, and the answer the driver
//! gets to its ask for a status write (the reconciler is the only writer).

use std::sync::Arc;
use std::time::Duration;

use mpiswarm_crds::{ConditionType as C, MpiJob, MpiJobStatus, Phase};
use mpiswarm_mesos::TaskState;
use tokio::sync::oneshot::error::TryRecvError;

use crate::books::{Answer, TaskRef};
use crate::context::{Command, Context, Settings};
use crate::fixtures::{Expect, Harness, JobFixture as _, OnKill, T0, UID, gang, set_tasks};
use crate::gang::{GangBook, Stage};
use crate::names::TaskRole;
use crate::plan::{Inputs, plan};

/// What the books know of the job before the reconcile.
enum Known {
    Nothing,
    /// Waiting for resources with gang generation 0.
    Queued,
    Gang(GangBook),
    /// Placed by the driver (queued, then booked with its ask for the status write).
    Placed(GangBook),
    /// Placed, its status written, its ACCEPTs sent, and the updates of its
    /// tasks, all RUNNING at once, read by the driver (held in the books).
    Launched(GangBook),
}

/// What the driver hears back about its ask: `Ok(())` yes, `Closed` never, `Empty` not yet.
type Heard = Result<(), TryRecvError>;

struct Row {
    name: &'static str,
    job: MpiJob,
    known: Known,
    on_kill: OnKill,
    settings: Settings,
    requests: Vec<Expect>,
    commands: Vec<Command>,
    /// `Ok(())` or the metric label of the error.
    outcome: Result<(), &'static str>,
    queued_after: bool,
    gang_after: bool,
    /// The driver's ask (rows with `Known::Placed`) and what it hears.
    answer: Option<Heard>,
    /// The state of every task of the gang in the books afterwards, if any.
    tasks_after: Option<TaskState>,
    /// The resourceVersion of the cached job, and the one the reconciler's
    /// own last status write returned (the cache lags behind it).
    versions: Option<(&'static str, &'static str)>,
}

impl Row {
    fn new(name: &'static str, job: MpiJob) -> Self {
        Self {
            name,
            job,
            known: Known::Nothing,
            on_kill: OnKill::Ignore,
            settings: Settings::default(),
            requests: Vec::new(),
            commands: Vec::new(),
            outcome: Ok(()),
            queued_after: false,
            gang_after: false,
            answer: None,
            versions: None,
            tasks_after: None,
        }
    }
    fn answer(mut self, heard: Heard) -> Self {
        self.answer = Some(heard);
        self
    }
    fn known(mut self, known: Known) -> Self {
        self.known = known;
        self
    }
    fn requests(mut self, requests: Vec<Expect>) -> Self {
        self.requests = requests;
        self
    }
    fn commands(mut self, commands: Vec<Command>) -> Self {
        self.commands = commands;
        self
    }
    fn queued_after(mut self) -> Self {
        self.queued_after = true;
        self
    }
    fn gang_after(mut self) -> Self {
        self.gang_after = true;
        self
    }

    async fn run(self) {
        let name = self.name;
        let mut job = self.job.clone();
        let harness = Harness::with_settings(&job, self.requests, self.on_kill, self.settings);
        let ctx = harness.ctx.clone();
        if let Some((cached, written)) = self.versions {
            job.metadata.resource_version = Some(cached.to_owned());
            ctx.expectations.wrote(UID, Some(written.to_owned()), 0);
        }
        let mut asked = seed(&ctx, &job, self.known);
        let outcome = crate::reconcile::reconcile(Arc::new(job), ctx.clone()).await;
        let (queued, known_gang) = (ctx.books.queue_view(UID).is_some(), ctx.books.gang(UID).is_some());
        let tasks_after: Option<Vec<_>> = ctx.books.gang(UID).map(|g| g.tasks.values().map(|t| t.state).collect());
        // (Heard before the Context goes: the books drop every ask with it.)
        let heard = asked.as_mut().map(|a| a.try_recv());
        drop(ctx);
        let commands = harness.finish().await;
        assert_eq!(outcome.as_ref().map(|_| ()).map_err(|e| e.metric_label()), self.outcome, "{name}: {outcome:?}");
        assert_eq!(commands, self.commands, "{name}: commands to the framework driver");
        assert_eq!((queued, known_gang), (self.queued_after, self.gang_after), "{name}: (queued, gang) afterwards");
        assert_eq!(heard, self.answer, "{name}: the driver's ask, answered");
        if let Some(state) = self.tasks_after {
            let tasks = tasks_after.unwrap_or_default();
            assert!(
                !tasks.is_empty() && tasks.iter().all(|s| *s == Some(state)),
                "{name}: tasks afterwards: {tasks:?}"
            );
        }
    }
}

/// Sets up the books; returns the driver's pending ask, if the row has one.
fn seed(ctx: &Context, job: &MpiJob, known: Known) -> Option<Answer> {
    let key = kube::runtime::reflector::ObjectRef::from_obj(job);
    let queue = || {
        let entry =
            crate::reconcile::queue_entry(&Arc::new(job.clone()), UID, 0, b"key".to_vec(), crate::context::now())
                .unwrap()
                .unwrap();
        assert!(ctx.books.enqueue(UID, &key, entry));
    };
    match known {
        Known::Nothing => None,
        Known::Queued => {
            queue();
            None
        }
        Known::Gang(g) => {
            assert!(ctx.books.seed_gang(UID, &key, g));
            None
        }
        Known::Placed(g) => {
            queue();
            ctx.books.plan_gang(UID, g).map(|(_, answer)| answer)
        }
        Known::Launched(g) => {
            queue();
            let (generation, now) = (g.generation, crate::context::now());
            let tasks: Vec<String> = g.tasks.keys().cloned().collect();
            ctx.books.plan_gang(UID, g).unwrap();
            ctx.books.answer(UID, generation, Stage::Planned, true);
            ctx.books.mark_launched(UID, generation, now).unwrap();
            for task in tasks {
                let running = mpiswarm_mesos::TaskStatus::new(mpiswarm_mesos::TaskId::new(task), TaskState::Running);
                assert_eq!(ctx.books.record(&running, now), None, "held until Launching is written");
            }
            None
        }
    }
}

/// The status the controller would have written after seeing the gang go
/// through these books, one reconcile each (the first with no gang).
fn status_through(job: &MpiJob, gangs: &[&GangBook]) -> MpiJobStatus {
    let mut job = job.clone();
    for gang in std::iter::once(None).chain(gangs.iter().map(|g| Some(*g))) {
        let p = plan(&Inputs { job: &job, gang, queue: None, now: T0, launch_timeout: 300, invalid: None });
        job.status = Some(p.status);
    }
    job.status.unwrap_or_default()
}

fn kill(g: &GangBook, pick: impl Fn(TaskRole) -> bool) -> Command {
    let tasks: Vec<TaskRef> =
        g.live_tasks().filter(|(_, t)| pick(t.role)).map(|(id, t)| (id.clone(), t.agent_id.clone())).collect();
    assert!(!tasks.is_empty());
    Command::Kill(tasks)
}

fn status(phase: Phase, conditions: &[(C, &'static str, &'static str)]) -> Expect {
    Expect::Status { phase, conditions: conditions.to_vec() }
}

fn event(type_: &'static str, reason: &'static str) -> Expect {
    Expect::Event { type_, reason }
}

const CREATED: (C, &str, &str) = (C::Created, "True", "Created");
const SCHEDULED: (C, &str, &str) = (C::Scheduled, "True", "Placed");

fn revive() -> Command {
    Command::Revive { role: "*".to_owned() }
}

fn table() -> Vec<Row> {
    let fresh = MpiJob::test().finalized();
    let planned = gang(Stage::Planned, 0);
    let mut launching = gang(Stage::Launched, 0);
    set_tasks(&mut launching, |_| true, TaskState::Starting, None);
    let mut running = launching.clone();
    set_tasks(&mut running, |_| true, TaskState::Running, None);
    let mut launcher_done = running.clone();
    set_tasks(&mut launcher_done, |r| r == TaskRole::Launcher, TaskState::Finished, Some("0"));
    let mut all_done = launcher_done.clone();
    set_tasks(&mut all_done, |_| true, TaskState::Killed, None);
    let is_worker = |r| matches!(r, TaskRole::Worker(_));
    let accepted = status_through(&fresh, &[]);
    let scheduling = status_through(&fresh, &[&planned]);
    let suspended = fresh.clone().run_policy("{suspend: true}");
    let running_status = status_through(&fresh, &[&planned, &launching, &running]);
    let ttl = fresh.clone().run_policy("{ttlSecondsAfterFinished: 60}");
    let finished_at_t0 = status_through(&ttl, &[&planned, &launching, &running, &all_done]);
    let quick_teardown = Settings { teardown_wait: Duration::from_millis(300), ..Settings::default() };

    vec![
        Row::new("a new job gets the finalizer and nothing else", MpiJob::test()).requests(vec![Expect::AddFinalizer]),
        Row::new("a finalized new job is Created, told, given its SSH key and queued", fresh.clone())
            .requests(vec![status(Phase::Pending, &[CREATED]), event("Normal", "Created"), Expect::CreateSecret])
            .commands(vec![revive()])
            .queued_after(),
        Row::new("an invalid job fails with Invalid, is told so and is never queued", fresh.clone().invalid())
            .requests(vec![
                status(Phase::Failed, &[CREATED, (C::Invalid, "True", "InvalidSpec"), (C::Failed, "True", "Invalid")]),
                event("Normal", "Created"),
                event("Warning", "Invalid"),
                event("Warning", "Failed"),
            ]),
        Row::new("a waiting job reconciled again makes no request", fresh.clone().with_status(accepted.clone()))
            .known(Known::Queued)
            .queued_after(),
        Row::new(
            "after a restart a waiting job is queued again with its key, without a status write",
            fresh.clone().with_status(accepted.clone()),
        )
        .requests(vec![Expect::GetSecret { exists: true }])
        .commands(vec![revive()])
        .queued_after(),
        Row::new("a placed gang writes Scheduling and tells Scheduled", fresh.clone().with_status(accepted.clone()))
            .known(Known::Gang(planned.clone()))
            .requests(vec![status(Phase::Scheduling, &[CREATED, SCHEDULED]), event("Normal", "Scheduled")])
            .gang_after(),
        Row::new(
            "a gang the driver placed: Scheduling is written and told, then the driver hears it may ACCEPT",
            fresh.clone().with_status(accepted.clone()),
        )
        .known(Known::Placed(planned.clone()))
        .requests(vec![status(Phase::Scheduling, &[CREATED, SCHEDULED]), event("Normal", "Scheduled")])
        .gang_after()
        .answer(Ok(())),
        Row {
            tasks_after: Some(TaskState::Running),
            ..Row::new(
                "a launched gang whose tasks all run already: Launching is written and told first, then their updates apply",
                fresh.clone().with_status(scheduling.clone()),
            )
            .known(Known::Launched(planned.clone()))
            .requests(vec![status(Phase::Launching, &[CREATED, SCHEDULED]), event("Normal", "Launching")])
            .gang_after()
        },
        Row::new(
            "a placed gang of a job suspended meanwhile is withdrawn: the driver hears never",
            suspended.clone().with_status(accepted.clone()),
        )
        .known(Known::Placed(planned.clone()))
        .requests(vec![
            status(Phase::Suspended, &[CREATED, (C::Suspended, "True", "Suspended")]),
            event("Normal", "Suspended"),
        ])
        .commands(vec![kill(&planned, |_| true)])
        .gang_after()
        .answer(Err(TryRecvError::Closed)),
        Row {
            versions: Some(("4", "5")),
            ..Row::new(
                "a cached job older than the reconciler's own last write: no request, the driver waits",
                fresh.clone().with_status(accepted.clone()),
            )
            .known(Known::Placed(planned.clone()))
            .gang_after()
            .answer(Err(TryRecvError::Empty))
        },
        Row {
            versions: Some(("5", "5")),
            ..Row::new(
                "once the cache has caught up with that write, the reconcile acts",
                fresh.clone().with_status(accepted.clone()),
            )
            .known(Known::Placed(planned.clone()))
            .requests(vec![status(Phase::Scheduling, &[CREATED, SCHEDULED]), event("Normal", "Scheduled")])
            .gang_after()
            .answer(Ok(()))
        },
        Row::new(
            "a deleted job whose gang was placed, not launched: withdrawn, and the finalizer goes",
            fresh.clone().with_status(accepted.clone()).deleting(),
        )
        .known(Known::Placed(planned.clone()))
        .requests(vec![Expect::RemoveFinalizer])
        .answer(Err(TryRecvError::Closed)),
        Row::new("a running job reconciled again makes no request", fresh.clone().with_status(running_status.clone()))
            .known(Known::Gang(running.clone()))
            .gang_after(),
        Row::new(
            "the launcher's exit 0 succeeds the job, tells it, and kills the workers",
            fresh.clone().with_status(running_status.clone()),
        )
        .known(Known::Gang(launcher_done.clone()))
        .requests(vec![
            status(
                Phase::Succeeded,
                &[
                    CREATED,
                    SCHEDULED,
                    (C::Running, "False", "LauncherSucceeded"),
                    (C::Succeeded, "True", "LauncherSucceeded"),
                ],
            ),
            event("Normal", "Succeeded"),
        ])
        .commands(vec![kill(&launcher_done, is_worker)])
        .gang_after(),
        Row::new(
            "a finished job past its TTL is deleted, with no status write",
            ttl.clone().with_status(finished_at_t0),
        )
        .requests(vec![Expect::DeleteJob]),
        Row::new("a deleted job that never ran loses its finalizer", fresh.clone().with_status(accepted).deleting())
            .requests(vec![Expect::RemoveFinalizer]),
        Row {
            on_kill: OnKill::Killed,
            ..Row::new(
                "a deleted running job: KILL, its tasks end, then the finalizer goes",
                fresh.clone().with_status(running_status.clone()).deleting(),
            )
            .known(Known::Gang(running.clone()))
            .requests(vec![Expect::RemoveFinalizer])
            .commands(vec![kill(&running, |_| true)])
        },
        Row {
            settings: quick_teardown,
            outcome: Err("finalizer"),
            ..Row::new(
                "a deleted job whose tasks do not end keeps its finalizer and retries",
                fresh.clone().with_status(running_status).deleting(),
            )
            .known(Known::Gang(running.clone()))
            .commands(vec![kill(&running, |_| true)])
            .gang_after()
        },
    ]
}

#[tokio::test]
async fn every_transition_makes_exactly_its_requests_in_order() {
    let mut failures = Vec::new();
    let rows = table();
    let count = rows.len();
    for row in rows {
        let name = row.name;
        // A row's panic (the verifier's or an assertion's) is reported with
        // the others instead of hiding the rows after it.
        if let Err(e) = tokio::spawn(row.run()).await {
            let why = e.try_into_panic().ok().and_then(|p| {
                p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            });
            failures.push(format!("- {name}:\n  {}", why.unwrap_or_default()));
        }
    }
    assert!(failures.is_empty(), "{} of {count} rows failed:\n{}", failures.len(), failures.join("\n"));
}
