//! One scheduling round over many waiting jobs: which start now on the
//! current offers. Owns queue order, head-of-line blocking, backfill and the
//! shared ledger that keeps two jobs from booking the same capacity.
//!
//! Order is FIFO by creation time within a role; roles do not block each
//! other (fairness between roles is the offer layer's DRF, not ours).
//!
//! Backfill trade-off: when a role's head job does not fit, starting later,
//! smaller jobs of that role uses capacity that would otherwise sit idle, but
//! those jobs may keep taking the capacity the head is waiting for, so a big
//! job could wait forever (starvation). Without run-time estimates we cannot
//! prove a backfilled job finishes before the head could start (EASY
//! backfilling needs them), so the guard is a bound on the head's wait:
//! backfill is allowed only while the head has waited less than
//! `max_head_wait_secs`. Past that, the role's queue holds behind its head,
//! and capacity freed by finishing jobs accumulates until the head fits.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::capacity::AgentCapacity;
use crate::demand::JobDemand;
use crate::engine::place_on;
use crate::ledger::Ledger;
use crate::placement::Placement;
use crate::score::Scorer;
use crate::unfit::{Unfit, UnfitKind};

/// A job waiting for resources.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueuedJob {
    /// Unique within the round, e.g. the MpiJob's `namespace/name` or uid.
    pub id: String,
    /// The Mesos role the job runs under; FIFO holds within one role.
    pub role: String,
    /// Creation time in Unix seconds; the queue order.
    pub created_at: i64,
    pub demand: JobDemand,
}

/// Whether later jobs may start while the head of their role does not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "mode")]
pub enum Backfill {
    /// Strict FIFO: nothing in a role starts before its head.
    #[default]
    Off,
    /// Later jobs that fit may start while the head has waited less than the bound.
    WhileHeadWaitsLessThan { max_head_wait_secs: u64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoundOptions {
    /// The current time in Unix seconds (passed in: the engine has no clock).
    pub now: i64,
    pub backfill: Backfill,
    /// How many jobs of the queue, in queue order, one round tries at most
    /// (Slurm's `default_queue_depth`); the rest wait untried for the next
    /// round. `None`: all of them. A bound keeps a round, and what it
    /// places at once, small when thousands of jobs arrive together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<usize>,
}

/// A job that starts in this round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Started {
    pub job_id: String,
    pub placement: Placement,
    /// Started ahead of an earlier job of its role that did not fit.
    pub backfilled: bool,
}

/// Why a job keeps waiting after this round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum WaitReason {
    /// It does not fit on what is left of the offers.
    Unfit { unfit: Unfit },
    /// An earlier job of its role does not fit, and backfill is off or the
    /// head has waited past the bound.
    BehindHead { head: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Waiting {
    pub job_id: String,
    pub reason: WaitReason,
}

/// The outcome of a round: started jobs in start order, waiting jobs in queue order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Round {
    pub started: Vec<Started>,
    pub waiting: Vec<Waiting>,
    /// Jobs past `RoundOptions::depth`: not tried in this round.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub untried: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A role whose head job did not fit.
struct Blocked {
    head: String,
    backfill: bool,
}

/// Decides which of `jobs` start now on `offers`. Each started job's workers
/// and launcher are subtracted before the next job is tried.
pub fn queue_round(jobs: &[QueuedJob], offers: &[AgentCapacity], options: &RoundOptions, scorer: &dyn Scorer) -> Round {
    let mut ledger = Ledger::new(offers, scorer.locality_key());
    let mut queue: Vec<&QueuedJob> = jobs.iter().collect();
    queue.sort_by(|a, b| a.created_at.cmp(&b.created_at).then_with(|| a.id.cmp(&b.id)));
    let mut round = Round::default();
    if let Some(depth) = options.depth
        && queue.len() > depth
    {
        round.untried = queue.len() - depth;
        queue.truncate(depth);
    }
    let mut blocked: HashMap<&str, Blocked> = HashMap::new();
    for job in queue {
        let block = blocked.get(job.role.as_str());
        if let Some(b) = block.filter(|b| !b.backfill) {
            round
                .waiting
                .push(Waiting { job_id: job.id.clone(), reason: WaitReason::BehindHead { head: b.head.clone() } });
            continue;
        }
        let backfilled = block.is_some();
        match place_on(&job.demand, &ledger, scorer) {
            Ok(placed) => {
                for (agent, used) in placed.usage {
                    ledger.free[agent] = ledger.free[agent].saturating_sub(&used);
                }
                round.started.push(Started { job_id: job.id.clone(), placement: placed.placement, backfilled });
            }
            Err(unfit) => {
                // An invalid job can never start; it must not hold up its role.
                if unfit.kind != UnfitKind::InvalidDemand && !backfilled {
                    let waited = options.now.saturating_sub(job.created_at).max(0) as u64;
                    let backfill = match options.backfill {
                        Backfill::Off => false,
                        Backfill::WhileHeadWaitsLessThan { max_head_wait_secs } => waited < max_head_wait_secs,
                    };
                    blocked.insert(&job.role, Blocked { head: job.id.clone(), backfill });
                }
                round.waiting.push(Waiting { job_id: job.id.clone(), reason: WaitReason::Unfit { unfit } });
            }
        }
    }
    round
}
