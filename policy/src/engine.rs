//! One job against one ledger: validate, pick the rule, order the candidate
//! agents, run the strategy, and turn the result into a [`Placement`] or an
//! [`Unfit`]. Never mutates the ledger; the queue round does that.

use std::cmp::{Ordering, Reverse};

use crate::auto::{self, AppliedPolicy, Rule};
use crate::candidate::{Candidate, candidates, score_bits};
use crate::capacity::Vector;
use crate::demand::JobDemand;
use crate::explain::explain;
use crate::ledger::Ledger;
use crate::pack::{Assignment, pack};
use crate::placement::{LauncherAssignment, NodeAssignment, Placement};
use crate::score::Scorer;
use crate::spread::spread;
use crate::unfit::Unfit;

/// How many single-rack alternatives `pack` weighs against its global answer.
/// Enough for any real rack layout; bounds the cost on clusters without racks.
const MAX_LOCALITY_ALTERNATIVES: usize = 32;

/// A placement plus what it takes from each agent of the ledger.
pub(crate) struct Placed {
    pub placement: Placement,
    pub usage: Vec<(usize, Vector)>,
}

pub(crate) fn place_on(job: &JobDemand, ledger: &Ledger<'_>, scorer: &dyn Scorer) -> Result<Placed, Unfit> {
    job.validate()?;
    let rule = auto::decide(job.policy, job.profile);
    let mut cands = candidates(job, ledger, rule.caps_ranks_at_cores());
    let weights = weigh(&mut cands, job, ledger, scorer);
    let nodes = match rule.policy() {
        AppliedPolicy::Spread => spread(&mut cands, job.ranks).map(|a| to_agents(&cands, &a)),
        AppliedPolicy::Pack => pack_with_locality(&mut cands, &weights, job, ledger, scorer),
    };
    match nodes {
        Some(nodes) => Ok(build(job, ledger, rule, &nodes)),
        None => Err(explain(job, ledger, &cands, rule)),
    }
}

/// Fills in what orders the candidates: their locality group's total rank
/// capacity and the scorer's preference. Returns the group totals.
fn weigh(cands: &mut [Candidate], job: &JobDemand, ledger: &Ledger<'_>, scorer: &dyn Scorer) -> Vec<u64> {
    let mut weights = vec![0u64; ledger.groups as usize];
    for c in cands.iter() {
        weights[c.group as usize] += u64::from(c.cap);
    }
    for c in cands.iter_mut() {
        c.group_weight = weights[c.group as usize];
        c.score = score_bits(scorer.agent_score(job, ledger.agents[c.agent]));
    }
    weights
}

fn to_agents(cands: &[Candidate], a: &Assignment) -> Vec<(usize, u32)> {
    a.nodes.iter().map(|&(i, r)| (cands[i].agent, r)).collect()
}

/// Packs globally, then tries to do as well inside a single locality group;
/// the scorer picks among answers with the same node count.
fn pack_with_locality(
    cands: &mut [Candidate],
    weights: &[u64],
    job: &JobDemand,
    ledger: &Ledger<'_>,
    scorer: &dyn Scorer,
) -> Option<Vec<(usize, u32)>> {
    let global = pack(cands, job.ranks)?;
    let global = to_agents(cands, &global);
    if global.len() == 1 || weights.len() <= 1 {
        return Some(global);
    }
    let need = u64::from(job.ranks);
    let mut groups: Vec<u32> = (0..weights.len() as u32).filter(|&g| weights[g as usize] >= need).collect();
    groups.sort_unstable_by_key(|&g| (Reverse(weights[g as usize]), g));
    groups.truncate(MAX_LOCALITY_ALTERNATIVES);
    if groups.is_empty() {
        return Some(global);
    }
    // One pass puts each candidate of a chosen group in that group's bucket.
    let mut bucket_of = vec![usize::MAX; weights.len()];
    for (b, &g) in groups.iter().enumerate() {
        bucket_of[g as usize] = b;
    }
    let mut buckets: Vec<Vec<Candidate>> = vec![Vec::new(); groups.len()];
    for c in cands.iter() {
        if let Some(bucket) = buckets.get_mut(bucket_of[c.group as usize]) {
            bucket.push(*c);
        }
    }
    let score = |nodes: &[(usize, u32)]| {
        let agents: Vec<_> = nodes.iter().map(|&(i, _)| ledger.agents[i]).collect();
        scorer.placement_score(job, &agents)
    };
    let mut best_score = score(&global);
    let mut best = global;
    for mut sub in buckets {
        let Some(a) = pack(&mut sub, job.ranks) else { continue };
        if a.nodes.len() != best.len() {
            continue;
        }
        let nodes = to_agents(&sub, &a);
        let s = score(&nodes);
        if s.total_cmp(&best_score) == Ordering::Greater {
            best_score = s;
            best = nodes;
        }
    }
    Some(best)
}

fn build(job: &JobDemand, ledger: &Ledger<'_>, rule: Rule, nodes: &[(usize, u32)]) -> Placed {
    let per_rank = Vector::of(&job.per_rank);
    let launcher = Vector::of(&job.launcher);
    let first = ledger.agents[nodes[0].0];
    let shape: Vec<String> = nodes.iter().map(|&(_, r)| r.to_string()).collect();
    let reason = format!(
        "{}; {} ranks on {} ({})",
        rule.explanation(),
        job.ranks,
        if nodes.len() == 1 { "1 node".to_owned() } else { format!("{} nodes", nodes.len()) },
        shape.join("-"),
    );
    let placement = Placement {
        policy_applied: rule.policy(),
        rule,
        reason,
        nodes: nodes
            .iter()
            .map(|&(i, ranks)| NodeAssignment {
                agent_id: ledger.agents[i].agent_id.clone(),
                hostname: ledger.agents[i].hostname.clone(),
                ranks,
                resources: job.per_rank.times(ranks),
            })
            .collect(),
        launcher: LauncherAssignment {
            agent_id: first.agent_id.clone(),
            hostname: first.hostname.clone(),
            resources: job.launcher,
        },
    };
    let usage = nodes
        .iter()
        .enumerate()
        .map(|(n, &(i, ranks))| {
            let mut v = per_rank.times(ranks);
            if n == 0 {
                v.cpus += launcher.cpus;
                v.mem += launcher.mem;
                v.net += launcher.net;
            }
            (i, v)
        })
        .collect();
    Placed { placement, usage }
}
