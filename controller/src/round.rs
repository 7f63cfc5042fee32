//! The framework driver's decisions, pure over plain data. One offer round:
//! the waiting jobs and the offers just received go through
//! `policy::queue_round`, one round per Mesos role (an offer belongs to one
//! role, so roles never book the same resources), and come out as the gangs
//! to launch, the offers each one uses, and why the rest still wait. Then,
//! once the reconciler has written the placed gangs' statuses: which ACCEPTs
//! to send and which offers to decline with what `refuse_seconds`
//! ([`answers`]), which gangs a failed ACCEPT takes with it ([`fates`]), and
//! which task of ours that the books do not know is a stray ([`is_stray`]).
//! Pure: no I/O and no clock; the driver carries the result out. The round's
//! input is kept as data so that replaying it through `queue_round` gives
//! the same placements.

use std::collections::{BTreeMap, BTreeSet};

use mpiswarm_mesos::{Offer, OfferId, Operation, Reason, TaskId, TaskState, TaskStatus};
use mpiswarm_policy::{
    AgentCapacity, Placement, QueuedJob, QuotaLimit, Round, RoundOptions, TopologyScorer, WaitReason, exceeds_quota,
    place, queue_round,
};
use serde::Serialize;

use crate::books::QueueEntry;
use crate::context::Settings;
use crate::demand;
use crate::launch::{AgentLaunch, Gang};
use crate::plan::NeverFits;
use crate::volumes::SharedVolumes;

/// A job the round starts.
#[derive(Debug, Clone)]
pub struct StartedGang {
    pub uid: String,
    pub generation: u32,
    pub role: String,
    pub placement: Placement,
    pub launches: Vec<AgentLaunch>,
}

/// A job the round leaves waiting, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct StillWaiting {
    pub uid: String,
    pub reason: String,
    pub never_fits: Option<NeverFits>,
}

/// One role's input to `queue_round`, as logged.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RoleRound {
    pub role: String,
    pub jobs: Vec<QueuedJob>,
    pub offers: Vec<AgentCapacity>,
    pub options: RoundOptions,
    pub round: Round,
}

#[derive(Debug, Default)]
pub struct Outcome {
    pub started: Vec<StartedGang>,
    pub waiting: Vec<StillWaiting>,
    /// Offer ids per (agent, role).
    pub offers: BTreeMap<(String, String), Vec<OfferId>>,
    pub log: Vec<RoleRound>,
    /// Waiting jobs past the round's depth, not tried against these offers.
    pub untried: usize,
}

/// The role an offer's resources are allocated to (MULTI_ROLE), `*` if unset.
pub fn offer_role(offer: &Offer) -> String {
    offer
        .allocation_info
        .as_ref()
        .and_then(|a| a.role.clone())
        .or_else(|| offer.resources.iter().find_map(|r| r.allocation_info.as_ref().and_then(|a| a.role.clone())))
        .unwrap_or_else(|| "*".to_owned())
}

/// Plans one round. `known` is everything the cluster has ever offered, and
/// the epoch of that knowledge: whether a waiting job could never fit is
/// worked out once per job and epoch, not on every round (with a thousand
/// waiting jobs and rounds every few tens of milliseconds, that placement
/// against the whole cluster was done a thousand times per round).
/// `quotas` are the offer layer's quota limits by role: a job larger than
/// its role's limit is left out of the round (it would hold up its role's
/// queue for good) and told so.
pub fn plan_round(
    offers: &[Offer],
    waiting: &[(String, QueueEntry)],
    (known, epoch): (&[AgentCapacity], u64),
    quotas: &BTreeMap<String, QuotaLimit>,
    options: RoundOptions,
    shared_volumes: &SharedVolumes,
) -> Outcome {
    let mut out = Outcome::default();
    let mut by_role: BTreeMap<String, Vec<&Offer>> = BTreeMap::new();
    for o in offers {
        let role = offer_role(o);
        out.offers.entry((o.agent_id.value.clone(), role.clone())).or_default().push(o.id.clone());
        by_role.entry(role).or_default().push(o);
    }
    let roles: BTreeSet<&str> = waiting.iter().map(|(_, q)| q.role.as_str()).collect();
    let entries: BTreeMap<&str, &QueueEntry> = waiting.iter().map(|(uid, q)| (uid.as_str(), q)).collect();
    let scorer = TopologyScorer::default();
    for role in roles {
        let role_offers = by_role.get(role).map(Vec::as_slice).unwrap_or(&[]);
        let caps = demand::capacities(role_offers.iter().copied());
        let network_accounted: BTreeSet<String> =
            caps.iter().filter(|c| c.free.network_mbps.is_some()).map(|c| c.agent_id.clone()).collect();
        let mut jobs: Vec<QueuedJob> = Vec::new();
        for (uid, q) in waiting.iter().filter(|(_, q)| q.role == role) {
            if let Some(unfit) = quotas.get(role).and_then(|limit| exceeds_quota(&q.demand, role, limit)) {
                let never_fits = Some(NeverFits::Quota(unfit.reason.clone()));
                out.waiting.push(StillWaiting { uid: uid.clone(), reason: unfit.reason, never_fits });
                continue;
            }
            jobs.push(QueuedJob {
                id: uid.clone(),
                role: q.role.clone(),
                created_at: q.created_at,
                demand: q.demand.clone(),
            });
        }
        let round = queue_round(&jobs, &caps, &options, &scorer);
        out.untried += round.untried;
        for s in &round.started {
            let Some(q) = entries.get(s.job_id.as_str()) else { continue };
            let gang = Gang {
                job: &q.launch.identity,
                spec: &q.launch.job.spec,
                generation: q.generation,
                role,
                placement: &s.placement,
                ssh_private_key: &q.launch.ssh_private_key,
                network_accounted: &network_accounted,
                shared_volumes,
            };
            out.started.push(StartedGang {
                uid: s.job_id.clone(),
                generation: q.generation,
                role: role.to_owned(),
                placement: s.placement.clone(),
                launches: gang.launches(),
            });
        }
        for w in &round.waiting {
            let reason = match &w.reason {
                WaitReason::Unfit { unfit } => unfit.reason.clone(),
                WaitReason::BehindHead { head } => {
                    format!("queued behind an earlier job of role {role} that does not fit yet ({head})")
                }
            };
            let Some(q) = entries.get(w.job_id.as_str()) else { continue };
            let cached = matches!(q.view.never_fits, None | Some(NeverFits::Cluster(_)));
            let never_fits = if cached && q.view.never_fits_epoch == Some(epoch) {
                q.view.never_fits.clone()
            } else if known.is_empty() {
                None
            } else {
                place(&q.demand, known).err().map(|unfit| {
                    NeverFits::Cluster(format!(
                        "does not fit even on everything the {} agents of the cluster offer: {}",
                        known.len(),
                        unfit.reason
                    ))
                })
            };
            out.waiting.push(StillWaiting { uid: w.job_id.clone(), reason, never_fits });
        }
        out.log.push(RoleRound { role: role.to_owned(), jobs, offers: caps, options, round });
    }
    out
}

/// One ACCEPT: every offer of one (agent, role), and the LAUNCH_GROUPs of
/// the gangs placed there.
#[derive(Debug, Clone, PartialEq)]
pub struct Accept {
    pub agent_id: String,
    pub role: String,
    pub offer_ids: Vec<OfferId>,
    pub operations: Vec<Operation>,
    /// The gangs (indexes into the written gangs) this ACCEPT carries a part of.
    pub gangs: BTreeSet<usize>,
}

/// How the driver answers a round's offers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answers {
    pub accepts: Vec<Accept>,
    pub declined: Vec<OfferId>,
}

/// The answers to a round's offers (`offers`: its offer ids per (agent,
/// role)), given the gangs whose status the reconciler has written: one
/// ACCEPT per (agent, role) such a gang uses, with all their operations
/// there; every other offer declined at once, so a job that does not fit
/// holds no offer. A gang whose status was not written is not launched and
/// its offers are declined like the rest.
pub fn answers(offers: &BTreeMap<(String, String), Vec<OfferId>>, written: &[StartedGang]) -> Answers {
    let mut ops: BTreeMap<(&str, &str), Vec<(usize, &Operation)>> = BTreeMap::new();
    for (i, s) in written.iter().enumerate() {
        for l in &s.launches {
            ops.entry((l.agent_id.as_str(), s.role.as_str())).or_default().push((i, &l.operation));
        }
    }
    let mut out = Answers::default();
    for ((agent, role), offer_ids) in offers {
        match ops.remove(&(agent.as_str(), role.as_str())) {
            None => out.declined.extend(offer_ids.iter().cloned()),
            Some(group) => out.accepts.push(Accept {
                agent_id: agent.clone(),
                role: role.clone(),
                offer_ids: offer_ids.clone(),
                gangs: group.iter().map(|(i, _)| *i).collect(),
                operations: group.into_iter().map(|(_, op)| op.clone()).collect(),
            }),
        }
    }
    out
}

/// The `refuse_seconds` of a round's ACCEPT and DECLINE filters. Some
/// waiting jobs were not tried against its offers (`untried`: past the
/// round's depth, or queued while its statuses were written): they may fit
/// in what is left, so the offers are to come back at the master's next
/// allocation (0). Otherwise short while jobs still wait (capacity frees up
/// as jobs end), long when none does.
pub fn refuse_seconds(jobs_wait: bool, untried: bool, settings: &Settings) -> f64 {
    match (untried, jobs_wait) {
        (true, _) => 0.0,
        (false, true) => settings.refuse_seconds_waiting,
        (false, false) => settings.refuse_seconds_idle,
    }
}

/// What became of a written gang once its ACCEPTs were sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Every ACCEPT with a part of it reached the master.
    Launched,
    /// One of them did not: a gang is all or nothing, so the whole gang is
    /// dropped (its tasks that did launch belong to no live gang any more
    /// and are killed as strays) and the job goes back to the queue without
    /// using a restart.
    Dropped,
}

/// The fate of each of `gangs` written gangs, from whether each of
/// `accepts` reached the master (`sent[i]` for `accepts[i]`).
pub fn fates(gangs: usize, accepts: &[Accept], sent: &[bool]) -> Vec<Fate> {
    let mut out = vec![Fate::Launched; gangs];
    for (a, ok) in accepts.iter().zip(sent) {
        if !ok {
            for &i in &a.gangs {
                if let Some(f) = out.get_mut(i) {
                    *f = Fate::Dropped;
                }
            }
        }
    }
    out
}

/// The updates the books record for a dropped gang's tasks: they never
/// reached the master, which the gang's verdict reads as an offer that was
/// gone (`OfferRescinded`: relaunched without using a restart).
pub fn dropped_updates(gang: &StartedGang, why: &str) -> Vec<TaskStatus> {
    gang.launches
        .iter()
        .flat_map(|l| &l.tasks)
        .map(|(name, _)| {
            let mut status = TaskStatus::new(TaskId::new(name.to_string()), TaskState::Dropped);
            status.reason = Some(Reason::ReasonInvalidOffers);
            status.message = Some(why.to_owned());
            status
        })
        .collect()
}

/// What the MpiJob cache says of the job a task id names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// The cache has not listed the MpiJobs yet (just after a (re)start).
    NotListed,
    /// No MpiJob has the task's uid.
    Gone,
    /// The job's current gang generation (the newest its status was written with).
    Generation(u32),
}

/// Whether a task update the books cannot place is a stray to KILL: a task
/// still alive whose job is gone or has moved on to a later gang. Updates
/// arrive as soon as the driver subscribes (RECONCILE answers for every
/// task), maybe before the cache has listed the MpiJobs; against an empty
/// cache every task would look like a stray, and a new leader once killed
/// the launchers of the gangs it was taking over: nothing is a stray then.
pub fn is_stray(task_generation: u32, task_ended: bool, owner: Owner) -> bool {
    if task_ended {
        return false;
    }
    match owner {
        Owner::NotListed => false,
        Owner::Gone => true,
        Owner::Generation(current) => task_generation < current,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::Arc;

    use mpiswarm_crds::MpiJob;
    use mpiswarm_mesos::{OfferId, Reason, TaskState};
    use mpiswarm_policy::{
        AgentCapacity, Backfill, FreeResources, JobDemand, Policy, QuotaLimit, Resources, RoundOptions, place,
    };

    use super::{Fate, Owner, StartedGang, answers, dropped_updates, fates, is_stray, plan_round, refuse_seconds};
    use crate::context::Settings;
    use crate::fixtures::{JobFixture as _, T0, UID};
    use crate::launch::Gang;
    use crate::plan::NeverFits;
    use crate::volumes::SharedVolumes;

    /// A gang of two 0.5-cpu ranks per agent, one worker on each of `agents`.
    fn started(uid: &str, role: &str, agents: &[&str]) -> StartedGang {
        let caps: Vec<AgentCapacity> = agents
            .iter()
            .map(|a| AgentCapacity::new(a, &format!("host-{a}"), FreeResources::new(2.0, 4096.0)))
            .collect();
        let demand =
            JobDemand::new(2 * agents.len() as u32, Resources::new(0.5, 64.0, 0.0)).with_policy(Policy::Spread);
        let placement = place(&demand, &caps).unwrap();
        let entry = crate::reconcile::queue_entry(&Arc::new(MpiJob::test()), uid, 0, Vec::new(), T0).unwrap().unwrap();
        let launches = Gang {
            job: &entry.launch.identity,
            spec: &entry.launch.job.spec,
            generation: 0,
            role,
            placement: &placement,
            ssh_private_key: &[],
            network_accounted: &BTreeSet::new(),
            shared_volumes: &SharedVolumes::default(),
        }
        .launches();
        StartedGang { uid: uid.to_owned(), generation: 0, role: role.to_owned(), placement, launches }
    }

    fn offers(rows: &[(&str, &str, &[&str])]) -> BTreeMap<(String, String), Vec<OfferId>> {
        rows.iter()
            .map(|(agent, role, ids)| {
                ((agent.to_string(), role.to_string()), ids.iter().map(|id| OfferId::new(*id)).collect())
            })
            .collect()
    }

    fn ids(ids: &[&str]) -> Vec<OfferId> {
        ids.iter().map(|id| OfferId::new(*id)).collect()
    }

    #[test]
    fn the_offers_are_accepted_where_written_gangs_go_and_declined_everywhere_else() {
        let a = started("uid-a", "*", &["a1", "a2"]);
        let b = started("uid-b", "*", &["a2"]);
        let gpu = started("uid-c", "gpu", &["a3"]);
        /// An ACCEPT as (agent, role, offers, gangs, how many operations).
        type Accepted<'a> = (&'a str, &'a str, Vec<OfferId>, Vec<usize>, usize);
        struct Row<'a> {
            name: &'a str,
            offers: BTreeMap<(String, String), Vec<OfferId>>,
            written: Vec<&'a StartedGang>,
            accepts: Vec<Accepted<'a>>,
            declined: Vec<OfferId>,
        }
        let rows = [
            Row {
                name: "nothing written: every offer is declined",
                offers: offers(&[("a1", "*", &["o1"]), ("a2", "*", &["o2", "o3"])]),
                written: vec![],
                accepts: vec![],
                declined: ids(&["o1", "o2", "o3"]),
            },
            Row {
                name: "one gang over two agents: one ACCEPT per agent, with every offer of that agent",
                offers: offers(&[("a1", "*", &["o1"]), ("a2", "*", &["o2", "o3"]), ("a3", "*", &["o4"])]),
                written: vec![&a],
                accepts: vec![("a1", "*", ids(&["o1"]), vec![0], 1), ("a2", "*", ids(&["o2", "o3"]), vec![0], 1)],
                declined: ids(&["o4"]),
            },
            Row {
                name: "two gangs on one agent share its ACCEPT",
                offers: offers(&[("a1", "*", &["o1"]), ("a2", "*", &["o2"])]),
                written: vec![&a, &b],
                accepts: vec![("a1", "*", ids(&["o1"]), vec![0], 1), ("a2", "*", ids(&["o2"]), vec![0, 1], 2)],
                declined: vec![],
            },
            Row {
                name: "an agent's offers of another role are not the gang's",
                offers: offers(&[("a3", "*", &["o1"]), ("a3", "gpu", &["o2"])]),
                written: vec![&gpu],
                accepts: vec![("a3", "gpu", ids(&["o2"]), vec![0], 1)],
                declined: ids(&["o1"]),
            },
        ];
        for Row { name, offers, written, accepts: want_accepts, declined: want_declined } in rows {
            let written: Vec<StartedGang> = written.into_iter().cloned().collect();
            let got = answers(&offers, &written);
            let accepts: Vec<Accepted<'_>> = got
                .accepts
                .iter()
                .map(|a| {
                    let gangs = a.gangs.iter().copied().collect();
                    (a.agent_id.as_str(), a.role.as_str(), a.offer_ids.clone(), gangs, a.operations.len())
                })
                .collect();
            assert_eq!(accepts, want_accepts, "{name}: ACCEPTs");
            assert_eq!(got.declined, want_declined, "{name}: declined");
            for a in &got.accepts {
                let want: Vec<_> = a
                    .gangs
                    .iter()
                    .flat_map(|&i| written[i].launches.iter().filter(|l| l.agent_id == a.agent_id))
                    .map(|l| l.operation.clone())
                    .collect();
                assert_eq!(a.operations, want, "{name}: the LAUNCH_GROUPs of the gangs on {}", a.agent_id);
            }
        }
    }

    #[test]
    fn a_failed_accept_drops_every_gang_with_a_part_in_it_and_no_other() {
        let a = started("uid-a", "*", &["a1", "a2"]);
        let b = started("uid-b", "*", &["a3"]);
        let written = [a, b];
        let got = answers(&offers(&[("a1", "*", &["o1"]), ("a2", "*", &["o2"]), ("a3", "*", &["o3"])]), &written);
        use Fate::{Dropped, Launched};
        // (name, which ACCEPTs reached the master, the fate of each gang)
        let rows = [
            ("all sent: all launched", vec![true, true, true], vec![Launched, Launched]),
            (
                "one part of a two-agent gang failed: the whole gang drops",
                vec![true, false, true],
                vec![Dropped, Launched],
            ),
            ("the other gang's ACCEPT failed", vec![true, true, false], vec![Launched, Dropped]),
            ("none sent", vec![false, false, false], vec![Dropped, Dropped]),
        ];
        for (name, sent, want) in rows {
            assert_eq!(fates(written.len(), &got.accepts, &sent), want, "{name}");
        }
    }

    #[test]
    fn a_dropped_gangs_tasks_are_recorded_as_never_launched() {
        let s = started(UID, "*", &["a1", "a2"]);
        let updates = dropped_updates(&s, "the ACCEPT call to the master failed");
        let want: Vec<String> = s.launches.iter().flat_map(|l| &l.tasks).map(|(n, _)| n.to_string()).collect();
        assert_eq!(updates.iter().map(|u| u.task_id.value.clone()).collect::<Vec<_>>(), want);
        assert_eq!(want.len(), 3, "two workers and the launcher");
        for u in &updates {
            assert_eq!((u.state, u.reason), (TaskState::Dropped, Some(Reason::ReasonInvalidOffers)));
            assert_eq!(u.message.as_deref(), Some("the ACCEPT call to the master failed"));
        }
        // The gang's verdict: relaunched, no restart used.
        let mut g = crate::gang::GangBook::new(UID, 0, "*", s.placement.clone(), crate::gang::Stage::Launched);
        for u in &updates {
            g.record(u, T0);
        }
        let crate::gang::Health::Failed(f) = g.health(T0, 60) else { panic!("{:?}", g.health(T0, 60)) };
        assert!(!f.counts, "{f:?}");
    }

    #[test]
    fn offers_are_refused_briefly_while_jobs_wait_and_long_when_none_does() {
        let settings = Settings { refuse_seconds_waiting: 1.0, refuse_seconds_idle: 30.0, ..Settings::default() };
        assert_eq!(refuse_seconds(true, false, &settings), 1.0);
        assert_eq!(refuse_seconds(false, false, &settings), 30.0);
        // Jobs the round did not try: the offers come back at the next allocation.
        assert_eq!(refuse_seconds(true, true, &settings), 0.0);
    }

    #[test]
    fn a_live_task_of_a_gone_job_or_an_older_gang_is_a_stray_and_nothing_is_before_the_cache_lists_jobs() {
        // (name, the task's generation, whether its update ends it, what the cache says of its job, stray)
        let rows = [
            ("the job is gone", 0, false, Owner::Gone, true),
            ("an older gang of the job", 1, false, Owner::Generation(2), true),
            ("the job's current gang", 2, false, Owner::Generation(2), false),
            ("a gang newer than the status the cache shows", 3, false, Owner::Generation(2), false),
            ("the cache has not listed the jobs yet", 0, false, Owner::NotListed, false),
            ("an update that ends the task: nothing to kill", 0, true, Owner::Gone, false),
            ("an ended task of an older gang", 1, true, Owner::Generation(2), false),
        ];
        for (name, generation, ended, owner, want) in rows {
            assert_eq!(is_stray(generation, ended, owner), want, "{name}");
        }
    }

    #[test]
    fn whether_a_job_never_fits_is_worked_out_once_per_capacity_epoch() {
        let mut entry =
            crate::reconcile::queue_entry(&Arc::new(MpiJob::test()), UID, 0, Vec::new(), T0).unwrap().unwrap();
        entry.view.never_fits = Some(NeverFits::Cluster("worked out before".into()));
        entry.view.never_fits_epoch = Some(7);
        let waiting = vec![(UID.to_owned(), entry)];
        // One 1-cpu agent: the 4 x 0.5-cpu job can never fit.
        let known = [AgentCapacity::new("a1", "n1", FreeResources::new(1.0, 4096.0))];
        let options = RoundOptions { now: T0, backfill: Backfill::Off, depth: None };
        let never_fits = |epoch| {
            plan_round(&[], &waiting, (&known, epoch), &BTreeMap::new(), options, &SharedVolumes::default()).waiting[0]
                .never_fits
                .clone()
        };
        assert_eq!(never_fits(7), Some(NeverFits::Cluster("worked out before".into())), "same epoch: not placed again");
        let Some(NeverFits::Cluster(fresh)) = never_fits(8) else { panic!("new epoch: placed again") };
        assert!(fresh.starts_with("does not fit even on everything the 1 agents"), "new epoch: placed again: {fresh}");
    }

    #[test]
    fn a_job_over_its_roles_quota_limit_is_told_so_and_left_out_of_its_roles_round() {
        let entry = crate::reconcile::queue_entry(&Arc::new(MpiJob::test()), UID, 0, Vec::new(), T0).unwrap().unwrap();
        let role = entry.role.clone();
        let waiting = vec![(UID.to_owned(), entry)];
        let known = [AgentCapacity::new("a1", "n1", FreeResources::new(8.0, 8192.0))];
        let options = RoundOptions { now: T0, backfill: Backfill::Off, depth: None };
        let limit = |cpus: f64| BTreeMap::from([(role.clone(), QuotaLimit::from([("cpus".to_owned(), cpus)]))]);
        // The 4 x 0.5-cpu job and its launcher need 2.1 cpus.
        let out = plan_round(&[], &waiting, (&known, 1), &limit(2.0), options, &SharedVolumes::default());
        let Some(NeverFits::Quota(why)) = &out.waiting[0].never_fits else { panic!("{:?}", out.waiting) };
        assert!(why.contains(&format!("more than the quota limit of role {role} (2 cpus)")), "{why}");
        assert_eq!(out.waiting[0].reason, *why);
        assert!(out.log.iter().all(|r| r.jobs.is_empty()), "not queued, so it holds up nothing: {:?}", out.log);
        let out = plan_round(&[], &waiting, (&known, 1), &limit(2.1), options, &SharedVolumes::default());
        assert_eq!(out.waiting[0].never_fits, None, "at the limit it waits for offers as usual");
        assert_eq!(out.log[0].jobs.len(), 1);
    }
}
