//! One offer round: the waiting jobs and the offers just received go
//! through `policy::queue_round`, one round per Mesos role (an offer belongs
//! to one role, so roles never book the same resources), and come out as the
//! gangs to launch, the offers each one uses, and why the rest still wait.
//! Pure: the driver carries the result out. The round's input is kept as
//! data so that replaying it through `queue_round` gives the same placements.

use std::collections::{BTreeMap, BTreeSet};

use mpiswarm_mesos::{Offer, OfferId};
use mpiswarm_policy::{
    AgentCapacity, Placement, QueuedJob, Round, RoundOptions, TopologyScorer, WaitReason, place, queue_round,
};
use serde::Serialize;

use crate::books::QueueEntry;
use crate::demand;
use crate::launch::{AgentLaunch, Gang};

/// A job the round starts.
#[derive(Debug)]
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
    pub never_fits: Option<String>,
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
pub fn plan_round(
    offers: &[Offer],
    waiting: &[(String, QueueEntry)],
    (known, epoch): (&[AgentCapacity], u64),
    options: RoundOptions,
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
        let jobs: Vec<QueuedJob> = waiting
            .iter()
            .filter(|(_, q)| q.role == role)
            .map(|(uid, q)| QueuedJob {
                id: uid.clone(),
                role: q.role.clone(),
                created_at: q.created_at,
                demand: q.demand.clone(),
            })
            .collect();
        let round = queue_round(&jobs, &caps, &options, &scorer);
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
            let never_fits = if q.view.never_fits_epoch == Some(epoch) {
                q.view.never_fits.clone()
            } else if known.is_empty() {
                None
            } else {
                place(&q.demand, known).err().map(|unfit| {
                    format!(
                        "does not fit even on everything the {} agents of the cluster offer: {}",
                        known.len(),
                        unfit.reason
                    )
                })
            };
            out.waiting.push(StillWaiting { uid: w.job_id.clone(), reason, never_fits });
        }
        out.log.push(RoleRound { role: role.to_owned(), jobs, offers: caps, options, round });
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use mpiswarm_crds::MpiJob;
    use mpiswarm_policy::{AgentCapacity, Backfill, FreeResources, RoundOptions};

    use super::plan_round;
    use crate::fixtures::{JobFixture as _, T0, UID};

    #[test]
    fn whether_a_job_never_fits_is_worked_out_once_per_capacity_epoch() {
        let mut entry =
            crate::reconcile::queue_entry(&Arc::new(MpiJob::test()), UID, 0, Vec::new(), T0).unwrap().unwrap();
        entry.view.never_fits = Some("worked out before".into());
        entry.view.never_fits_epoch = Some(7);
        let waiting = vec![(UID.to_owned(), entry)];
        // One 1-cpu agent: the 4 x 0.5-cpu job can never fit.
        let known = [AgentCapacity::new("a1", "n1", FreeResources::new(1.0, 4096.0))];
        let options = RoundOptions { now: T0, backfill: Backfill::Off };
        let never_fits = |epoch| plan_round(&[], &waiting, (&known, epoch), options).waiting[0].never_fits.clone();
        assert_eq!(never_fits(7).as_deref(), Some("worked out before"), "same epoch: not placed again");
        let fresh = never_fits(8).unwrap_or_default();
        assert!(fresh.starts_with("does not fit even on everything the 1 agents"), "new epoch: placed again: {fresh}");
    }
}
