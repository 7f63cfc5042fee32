//! Scoring hooks: new data changes the choice among equally good answers
//! through the `Scorer` trait alone, and can never change what is feasible.

use std::collections::HashMap;

use mpiswarm_policy::{
    AgentCapacity, FreeResources, JobDemand, NoScorer, Profile, Resources, Scorer, TopologyScorer, place_with,
};

/// What a later latency-aware scorer could look like: agents grouped by the
/// switch they hang off, and node sets judged by their worst measured
/// round trip.
struct LatencyScorer {
    rtt_us: HashMap<(String, String), f64>,
}

impl Scorer for LatencyScorer {
    fn locality_key(&self) -> Option<&str> {
        Some("switch")
    }

    fn placement_score(&self, _job: &JobDemand, nodes: &[&AgentCapacity]) -> f64 {
        let mut worst = 0.0f64;
        for a in nodes {
            for b in nodes {
                let key = (a.agent_id.clone(), b.agent_id.clone());
                worst = worst.max(self.rtt_us.get(&key).copied().unwrap_or(0.0));
            }
        }
        -worst
    }
}

fn agent(id: &str, switch: &str) -> AgentCapacity {
    AgentCapacity::new(id, id, FreeResources::new(4.1, 8192.0)).with_attribute("switch", switch)
}

fn network_job(ranks: u32) -> JobDemand {
    JobDemand::new(ranks, Resources::new(1.0, 512.0, 0.0)).with_profile(Profile::Network)
}

fn used(offers: &[AgentCapacity], job: &JobDemand, scorer: &dyn Scorer) -> Vec<String> {
    let p = place_with(job, offers, scorer).expect("fits");
    let mut ids: Vec<String> = p.nodes.into_iter().map(|n| n.agent_id).collect();
    ids.sort();
    ids
}

#[test]
fn a_latency_scorer_picks_the_closer_pair_among_equally_small_answers() {
    let offers = [agent("a1", "s1"), agent("a2", "s1"), agent("a3", "s2"), agent("a4", "s2")];
    let job = network_job(8);
    // Without latency data the first switch wins the tie.
    assert_eq!(used(&offers, &job, &TopologyScorer::default()), vec!["a1", "a2"]);
    let rtt = |a: &str, b: &str, us: f64| [((a.to_owned(), b.to_owned()), us), ((b.to_owned(), a.to_owned()), us)];
    let scorer = LatencyScorer { rtt_us: rtt("a1", "a2", 50.0).into_iter().chain(rtt("a3", "a4", 5.0)).collect() };
    assert_eq!(used(&offers, &job, &scorer), vec!["a3", "a4"]);
}

#[test]
fn a_scorer_cannot_add_nodes_or_make_a_job_fit() {
    // Two switches, but the job only fits on two nodes; no scorer may
    // trade that for a three-node answer, or place a job that does not fit.
    let offers = [agent("a1", "s1"), agent("a2", "s2"), agent("a3", "s2")];
    let scorer = LatencyScorer { rtt_us: HashMap::new() };
    assert_eq!(used(&offers, &network_job(8), &scorer).len(), 2);
    assert!(place_with(&network_job(13), &offers, &scorer).is_err());
    assert!(place_with(&network_job(13), &offers, &NoScorer).is_err());
}

#[test]
fn agent_scores_order_agents_of_equal_room() {
    struct Prefer(&'static str);
    impl Scorer for Prefer {
        fn agent_score(&self, _job: &JobDemand, agent: &AgentCapacity) -> f64 {
            if agent.agent_id == self.0 { 1.0 } else { 0.0 }
        }
    }
    let offers = [agent("a1", "s1"), agent("a2", "s1"), agent("a3", "s1")];
    for want in ["a1", "a2", "a3"] {
        assert_eq!(used(&offers, &network_job(2), &Prefer(want)), vec![want]);
    }
}
