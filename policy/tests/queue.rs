//! Queue rounds: FIFO within a role, head-of-line blocking, bounded backfill,
//! and one ledger shared by all the jobs of a round.

use mpiswarm_policy::{
    AgentCapacity, Backfill, FreeResources, JobDemand, Profile, QueuedJob, Resources, Round, RoundOptions,
    TopologyScorer, WaitReason, queue_round,
};

fn nodes(n: usize, cpus: f64) -> Vec<AgentCapacity> {
    (1..=n)
        .map(|i| AgentCapacity::new(&format!("a{i}"), &format!("node{i}"), FreeResources::new(cpus, 65536.0)))
        .collect()
}

fn queued(id: &str, role: &str, created_at: i64, ranks: u32) -> QueuedJob {
    QueuedJob {
        id: id.into(),
        role: role.into(),
        created_at,
        demand: JobDemand::new(ranks, Resources::new(1.0, 256.0, 0.0)).with_profile(Profile::Network),
    }
}

fn round(jobs: &[QueuedJob], offers: &[AgentCapacity], now: i64, backfill: Backfill) -> Round {
    queue_round(jobs, offers, &RoundOptions { now, backfill, depth: None }, &TopologyScorer::default())
}

fn started(r: &Round) -> Vec<&str> {
    r.started.iter().map(|s| s.job_id.as_str()).collect()
}

fn reason<'a>(r: &'a Round, id: &str) -> &'a WaitReason {
    &r.waiting.iter().find(|w| w.job_id == id).expect("waiting").reason
}

#[test]
fn jobs_start_in_creation_order_not_input_order() {
    // Room for one 6-rank job only: the older one must win.
    let jobs = [queued("young", "r", 20, 6), queued("old", "r", 10, 6)];
    let r = round(&jobs, &nodes(2, 4.0), 30, Backfill::Off);
    assert_eq!(started(&r), vec!["old"]);
    assert!(matches!(reason(&r, "young"), WaitReason::Unfit { .. }));
}

#[test]
fn two_jobs_never_get_the_same_capacity() {
    // Each job alone fits on the single 4-cpu agent; together they do not.
    let jobs = [queued("j1", "r", 1, 3), queued("j2", "r", 2, 3)];
    let r = round(&jobs, &nodes(1, 4.0), 5, Backfill::Off);
    assert_eq!(started(&r), vec!["j1"]);
    let WaitReason::Unfit { unfit } = reason(&r, "j2") else { panic!("j2 should be unfit") };
    // What is left after j1: 4 - 3 ranks - 0.1 launcher.
    assert_eq!(unfit.reason, "needs 3.1 cpus; 0.9 offered across 1 agent");
}

#[test]
fn strict_fifo_holds_later_jobs_behind_a_head_that_does_not_fit() {
    let jobs = [queued("big", "r", 1, 100), queued("small", "r", 2, 1)];
    let r = round(&jobs, &nodes(2, 4.0), 10, Backfill::Off);
    assert!(started(&r).is_empty());
    assert_eq!(reason(&r, "small"), &WaitReason::BehindHead { head: "big".into() });
}

#[test]
fn backfill_starts_a_small_job_while_the_head_has_waited_less_than_the_bound() {
    let jobs = [queued("big", "r", 100, 100), queued("small", "r", 101, 1)];
    let backfill = Backfill::WhileHeadWaitsLessThan { max_head_wait_secs: 60 };
    let r = round(&jobs, &nodes(2, 4.0), 159, backfill);
    assert_eq!(started(&r), vec!["small"]);
    assert!(r.started[0].backfilled);
}

#[test]
fn backfill_stops_once_the_head_has_waited_past_the_bound() {
    let jobs = [queued("big", "r", 100, 100), queued("small", "r", 101, 1)];
    let backfill = Backfill::WhileHeadWaitsLessThan { max_head_wait_secs: 60 };
    let r = round(&jobs, &nodes(2, 4.0), 160, backfill);
    assert!(started(&r).is_empty());
    assert_eq!(reason(&r, "small"), &WaitReason::BehindHead { head: "big".into() });
}

#[test]
fn a_role_whose_head_does_not_fit_does_not_block_another_role() {
    let jobs = [queued("big", "a", 1, 100), queued("other", "b", 2, 2), queued("behind", "a", 3, 1)];
    let r = round(&jobs, &nodes(2, 4.0), 10, Backfill::Off);
    assert_eq!(started(&r), vec!["other"]);
    assert_eq!(reason(&r, "behind"), &WaitReason::BehindHead { head: "big".into() });
}

#[test]
fn an_invalid_job_does_not_hold_up_its_role() {
    let jobs = [queued("broken", "r", 1, 0), queued("fine", "r", 2, 2)];
    let r = round(&jobs, &nodes(1, 4.0), 10, Backfill::Off);
    assert_eq!(started(&r), vec!["fine"]);
    assert!(!r.started[0].backfilled);
}

#[test]
fn a_job_that_fits_after_earlier_starts_uses_what_is_left() {
    let jobs = [queued("j1", "r", 1, 4), queued("j2", "r", 2, 4), queued("j3", "r", 3, 4)];
    let r = round(&jobs, &nodes(2, 4.1), 10, Backfill::Off);
    assert_eq!(started(&r), vec!["j1", "j2"]);
    let agents: Vec<&str> = r.started.iter().map(|s| s.placement.nodes[0].agent_id.as_str()).collect();
    assert_ne!(agents[0], agents[1], "each 4-rank job fills one agent");
}

#[test]
fn a_round_tries_only_the_first_depth_jobs_in_queue_order_and_counts_the_rest() {
    // Five one-rank jobs that would all fit, given out of order; depth 2.
    let jobs: Vec<_> = [5, 3, 1, 4, 2].iter().map(|&t| queued(&format!("j{t}"), "r", t, 1)).collect();
    let options = RoundOptions { now: 10, backfill: Backfill::Off, depth: Some(2) };
    let r = queue_round(&jobs, &nodes(4, 8.0), &options, &TopologyScorer::default());
    assert_eq!(started(&r), vec!["j1", "j2"]);
    assert!(r.waiting.is_empty(), "untried jobs get no verdict: {:?}", r.waiting);
    assert_eq!(r.untried, 3);
    // A depth the queue does not reach changes nothing.
    let all =
        queue_round(&jobs, &nodes(4, 8.0), &RoundOptions { depth: Some(5), ..options }, &TopologyScorer::default());
    assert_eq!((all.started.len(), all.untried), (5, 0));
}
