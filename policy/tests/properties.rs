//! Invariants over random clusters and jobs. The model here is integer
//! (tenths of a cpu, whole MiB and Mbit/s), independent of the engine's own
//! arithmetic, so a rounding slip in the engine shows up as a violation.

use std::collections::HashMap;

use mpiswarm_policy::{
    AgentCapacity, Backfill, FreeResources, JobDemand, Placement, Policy, Profile, QueuedJob, Resources, RoundOptions,
    TopologyScorer, Unfit, place, queue_round,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Agent {
    cpus: u32, // tenths
    mem: u32,
    net: Option<u32>,
    rack: u8,
}

#[derive(Debug, Clone)]
struct Job {
    ranks: u32,
    cpus: u32, // tenths, >= 1
    mem: u32,
    net: u32,
    launcher_cpus: u32,
    launcher_mem: u32,
    profile: Profile,
    policy: Policy,
    max_per_node: Option<u32>,
    rack: Option<u8>,
}

impl Job {
    fn demand(&self) -> JobDemand {
        let mut d = JobDemand::new(
            self.ranks,
            Resources::new(f64::from(self.cpus) / 10.0, f64::from(self.mem), f64::from(self.net)),
        )
        .with_profile(self.profile)
        .with_policy(self.policy)
        .with_launcher(Resources::new(f64::from(self.launcher_cpus) / 10.0, f64::from(self.launcher_mem), 0.0));
        d.max_ranks_per_node = self.max_per_node;
        if let Some(r) = self.rack {
            d = d.with_selector("rack", &format!("r{r}"));
        }
        d
    }

    fn with_policy(&self, policy: Policy) -> Self {
        Self { policy, ..self.clone() }
    }

    fn caps_at_cores(&self) -> bool {
        self.policy == Policy::Auto && self.profile == Profile::Balanced
    }

    /// Most ranks agent `a` can hold, with or without the launcher, in the
    /// integer model; `None` when the agent is off limits or the launcher
    /// does not fit.
    fn room(&self, a: &Agent, launcher: bool) -> Option<u32> {
        if self.rack.is_some_and(|r| r != a.rack) {
            return None;
        }
        let (lc, lm) = if launcher { (self.launcher_cpus, self.launcher_mem) } else { (0, 0) };
        let cpus = a.cpus.checked_sub(lc)?;
        let mem = a.mem.checked_sub(lm)?;
        let mut n = cpus / self.cpus;
        if let Some(fit) = mem.checked_div(self.mem) {
            n = n.min(fit);
        }
        if let (Some(net), true) = (a.net, self.net > 0) {
            n = n.min(net / self.net);
        }
        if let Some(m) = self.max_per_node {
            n = n.min(m);
        }
        if self.caps_at_cores() {
            n = n.min(a.cpus / 10);
        }
        Some(n)
    }
}

fn offers(agents: &[Agent]) -> Vec<AgentCapacity> {
    agents
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let mut free = FreeResources::new(f64::from(a.cpus) / 10.0, f64::from(a.mem));
            free.network_mbps = a.net.map(f64::from);
            AgentCapacity::new(&format!("a{i:02}"), &format!("node{i}"), free)
                .with_attribute("rack", &format!("r{}", a.rack))
        })
        .collect()
}

fn index(agent_id: &str) -> usize {
    agent_id[1..].parse().expect("test agent ids are a<number>")
}

fn agent() -> impl Strategy<Value = Agent> {
    (0u32..=80, 0u32..=16, prop::option::of(0u32..=20), 0u8..3).prop_map(|(cpus, mem, net, rack)| Agent {
        cpus,
        mem: mem * 256,
        net: net.map(|n| n * 100),
        rack,
    })
}

fn job(max_ranks: u32) -> impl Strategy<Value = Job> {
    (
        (1..=max_ranks, 1u32..=30, 0u32..=16, prop_oneof![Just(0u32), 1u32..=5]),
        (0u32..=5, 0u32..=4),
        (
            prop_oneof![Just(Profile::Cpu), Just(Profile::Memory), Just(Profile::Network), Just(Profile::Balanced)],
            prop_oneof![Just(Policy::Auto), Just(Policy::Pack), Just(Policy::Spread)],
            prop::option::of(1u32..=5),
            prop::option::of(0u8..3),
        ),
    )
        .prop_map(|((ranks, cpus, mem, net), (lc, lm), (profile, policy, max_per_node, rack))| Job {
            ranks,
            cpus,
            mem: mem * 128,
            net: net * 100,
            launcher_cpus: lc,
            launcher_mem: lm * 32,
            profile,
            policy,
            max_per_node,
            rack,
        })
}

/// Checks a placement against the integer model: gang complete, launcher on
/// the first node, every agent within its room, no agent used twice.
fn holds(job: &Job, agents: &[Agent], p: &Placement) -> Result<(), TestCaseError> {
    prop_assert_eq!(p.total_ranks(), job.ranks, "gang incomplete: {:?}", p.shape());
    prop_assert_eq!(&p.launcher.agent_id, &p.nodes[0].agent_id);
    let mut seen = std::collections::HashSet::new();
    for (n, node) in p.nodes.iter().enumerate() {
        prop_assert!(seen.insert(node.agent_id.clone()), "{} used twice", node.agent_id);
        prop_assert!(node.ranks >= 1, "a worker without ranks on {}", node.agent_id);
        let room = job.room(&agents[index(&node.agent_id)], n == 0);
        prop_assert!(
            room.is_some_and(|r| node.ranks <= r),
            "{} ranks on {} whose room is {:?}",
            node.ranks,
            node.agent_id,
            room
        );
    }
    Ok(())
}

/// Every way to place the job, by brute force: the fewest nodes of any
/// feasible assignment, or `None` when none exists.
fn brute_force_fewest_nodes(job: &Job, agents: &[Agent]) -> Option<usize> {
    let n = agents.len();
    let mut best: Option<usize> = None;
    let mut ranks = vec![0u32; n];
    loop {
        if ranks.iter().sum::<u32>() == job.ranks {
            for leader in (0..n).filter(|&l| ranks[l] >= 1) {
                let fits =
                    (0..n).all(|i| ranks[i] == 0 || job.room(&agents[i], i == leader).is_some_and(|r| ranks[i] <= r));
                if fits {
                    let used = ranks.iter().filter(|&&r| r > 0).count();
                    best = Some(best.map_or(used, |b| b.min(used)));
                }
            }
        }
        // Next vector in base (ranks + 1).
        let mut i = 0;
        loop {
            if i == n {
                return best;
            }
            ranks[i] += 1;
            if ranks[i] <= job.ranks {
                break;
            }
            ranks[i] = 0;
            i += 1;
        }
    }
}

/// The fewest nodes any placement needs, computed the slow, obvious way: for
/// each possible launcher node, add the roomiest other agents until the
/// ranks fit. `None` when no launcher node works.
fn fewest_nodes_model(job: &Job, agents: &[Agent]) -> Option<usize> {
    (0..agents.len())
        .filter_map(|l| {
            let lead = job.room(&agents[l], true).filter(|&r| r >= 1)?;
            let mut others: Vec<u32> =
                (0..agents.len()).filter(|&i| i != l).filter_map(|i| job.room(&agents[i], false)).collect();
            others.sort_unstable_by(|a, b| b.cmp(a));
            let mut have = lead;
            let mut used = 1;
            for room in others {
                if have >= job.ranks {
                    break;
                }
                have += room;
                used += 1;
            }
            (have >= job.ranks).then_some(used)
        })
        .min()
}

fn agents_with_room(job: &Job, agents: &[Agent]) -> usize {
    agents.iter().filter(|a| job.room(a, false).is_some_and(|r| r >= 1)).count()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn never_over_commits_and_places_every_rank_or_none(
        agents in prop::collection::vec(agent(), 0..12),
        job in job(24),
    ) {
        match place(&job.demand(), &offers(&agents)) {
            Ok(p) => holds(&job, &agents, &p)?,
            Err(Unfit { reason, .. }) => prop_assert!(!reason.is_empty()),
        }
    }

    #[test]
    fn unfit_only_when_no_feasible_placement_exists_and_pack_uses_the_fewest_nodes(
        agents in prop::collection::vec(agent(), 1..=4),
        job in job(6),
    ) {
        let brute = brute_force_fewest_nodes(&job, &agents);
        let result = place(&job.demand(), &offers(&agents));
        match (&result, brute) {
            (Ok(p), Some(fewest)) => {
                holds(&job, &agents, p)?;
                if p.policy_applied == mpiswarm_policy::AppliedPolicy::Pack {
                    prop_assert_eq!(p.nodes.len(), fewest, "pack {:?} is not minimal", p.shape());
                }
            }
            (Err(u), None) => prop_assert!(!u.reason.is_empty()),
            (Ok(p), None) => prop_assert!(false, "placed {:?} where brute force finds nothing", p.shape()),
            (Err(u), Some(n)) => prop_assert!(false, "unfit ({}) but {} nodes would do", u.reason, n),
        }
    }

    #[test]
    fn pack_uses_the_fewest_nodes_on_clusters_larger_than_its_first_search(
        agents in prop::collection::vec(agent(), 60..200),
        job in job(300),
    ) {
        let job = job.with_policy(Policy::Pack);
        let result = place(&job.demand(), &offers(&agents));
        match (&result, fewest_nodes_model(&job, &agents)) {
            (Ok(p), Some(fewest)) => {
                holds(&job, &agents, p)?;
                prop_assert_eq!(p.nodes.len(), fewest, "pack {:?} is not minimal", p.shape());
            }
            (Err(_), None) => {}
            (Ok(p), None) => prop_assert!(false, "placed {:?} where the model finds nothing", p.shape()),
            (Err(u), Some(n)) => prop_assert!(false, "unfit ({}) but {} nodes would do", u.reason, n),
        }
    }

    #[test]
    fn pack_never_uses_more_nodes_than_spread(
        agents in prop::collection::vec(agent(), 0..12),
        job in job(24),
    ) {
        let cluster = offers(&agents);
        let packed = place(&job.with_policy(Policy::Pack).demand(), &cluster);
        let spread = place(&job.with_policy(Policy::Spread).demand(), &cluster);
        match (packed, spread) {
            (Ok(p), Ok(s)) => prop_assert!(p.nodes.len() <= s.nodes.len(), "pack {:?} spread {:?}", p.shape(), s.shape()),
            (Err(_), Err(_)) => {}
            (p, s) => prop_assert!(false, "same constraints, different feasibility: pack {:?} spread {:?}", p.map(|p| p.shape()), s.map(|s| s.shape())),
        }
    }

    #[test]
    fn spread_uses_every_agent_it_can_and_levels_ranks_where_capacity_allows(
        agents in prop::collection::vec(agent(), 0..120),
        job in job(200),
    ) {
        let job = job.with_policy(Policy::Spread);
        if let Ok(p) = place(&job.demand(), &offers(&agents)) {
            holds(&job, &agents, &p)?;
            let want = (job.ranks as usize).min(agents_with_room(&job, &agents));
            prop_assert_eq!(p.nodes.len(), want);
            // Water-filling: a node has more than one rank above another only
            // when the other is full.
            for (i, a) in p.nodes.iter().enumerate() {
                for (j, b) in p.nodes.iter().enumerate() {
                    let room_b = job.room(&agents[index(&b.agent_id)], j == 0).unwrap_or(0);
                    prop_assert!(a.ranks <= b.ranks + 1 || b.ranks == room_b,
                        "{:?}: node {} has {} ranks, node {} only {} of room {}", p.shape(), i, a.ranks, j, b.ranks, room_b);
                }
            }
        }
    }

    #[test]
    fn spread_is_level_within_one_rank_on_uniform_capacity(
        n in 1usize..16,
        cpus in 1u32..=80,
        job in job(48),
    ) {
        let agents = vec![Agent { cpus, mem: 1 << 20, net: None, rack: 0 }; n];
        let job = Job { launcher_cpus: 0, launcher_mem: 0, rack: None, ..job.with_policy(Policy::Spread) };
        if let Ok(p) = place(&job.demand(), &offers(&agents)) {
            let shape = p.shape();
            let (max, min) = (shape.iter().max().copied().unwrap_or(0), shape.iter().min().copied().unwrap_or(0));
            prop_assert!(max - min <= 1, "uneven spread {:?}", shape);
        }
    }

    #[test]
    fn a_queue_round_never_double_books_and_keeps_fifo_within_a_role(
        agents in prop::collection::vec(agent(), 1..10),
        jobs in prop::collection::vec((job(12), 0i64..100, 0u8..2), 1..10),
        backfill in any::<bool>(),
    ) {
        let queue: Vec<QueuedJob> = jobs
            .iter()
            .enumerate()
            .map(|(i, (j, created, role))| QueuedJob {
                id: format!("j{i}"),
                role: format!("role{role}"),
                created_at: *created,
                demand: j.demand(),
            })
            .collect();
        let options = RoundOptions {
            now: 100,
            backfill: if backfill { Backfill::WhileHeadWaitsLessThan { max_head_wait_secs: 1000 } } else { Backfill::Off },
            depth: None,
        };
        let round = queue_round(&queue, &offers(&agents), &options, &TopologyScorer::default());
        prop_assert_eq!(round.started.len() + round.waiting.len(), queue.len());
        if !backfill {
            // Strict FIFO within a role: nothing starts behind a valid job that waits.
            let by_id: HashMap<&str, &QueuedJob> = queue.iter().map(|q| (q.id.as_str(), q)).collect();
            for w in &round.waiting {
                let waiting = by_id[w.job_id.as_str()];
                if waiting.demand.validate().is_err() {
                    continue;
                }
                for s in &round.started {
                    let started = by_id[s.job_id.as_str()];
                    let later = (started.created_at, &started.id) > (waiting.created_at, &waiting.id);
                    prop_assert!(
                        started.role != waiting.role || !later,
                        "{} started ahead of the older {} in role {}", started.id, waiting.id, started.role
                    );
                }
            }
        }
        // Sum what every started job takes from each agent, in the integer model.
        let mut used: HashMap<usize, (u32, u32, u32)> = HashMap::new();
        for s in &round.started {
            let j = &jobs[s.job_id[1..].parse::<usize>().expect("job id")].0;
            holds(j, &agents, &s.placement)?;
            for (n, node) in s.placement.nodes.iter().enumerate() {
                let u = used.entry(index(&node.agent_id)).or_default();
                u.0 += node.ranks * j.cpus + if n == 0 { j.launcher_cpus } else { 0 };
                u.1 += node.ranks * j.mem + if n == 0 { j.launcher_mem } else { 0 };
                u.2 += node.ranks * j.net;
            }
        }
        for (i, (cpus, mem, net)) in used {
            let a = &agents[i];
            prop_assert!(cpus <= a.cpus && mem <= a.mem, "agent a{:02} booked {} tenth-cpus / {} MiB of {} / {}", i, cpus, mem, a.cpus, a.mem);
            prop_assert!(a.net.is_none_or(|free| net <= free), "agent a{:02} booked {} Mbit/s of {:?}", i, net, a.net);
        }
    }
}
