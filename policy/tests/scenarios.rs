//! Table-driven scenarios: one row per behaviour, named by the sentence it
//! pins down. A failing run lists every failing sentence, not just the first.

use mpiswarm_policy::{
    AgentCapacity, AppliedPolicy, Cluster, FreeResources, JobDemand, Placement, Policy, Profile, Resources, Rule,
    TopologyScorer, Unfit, UnfitKind, place,
};

fn node(i: usize, cpus: f64, mem: f64) -> AgentCapacity {
    AgentCapacity::new(&format!("a{i}"), &format!("node{i}"), FreeResources::new(cpus, mem))
}

/// `n` identical agents a1..an on hosts node1..noden.
fn nodes(n: usize, cpus: f64, mem: f64) -> Vec<AgentCapacity> {
    (1..=n).map(|i| node(i, cpus, mem)).collect()
}

fn in_rack(mut agents: Vec<AgentCapacity>, rack: &str) -> Vec<AgentCapacity> {
    for a in &mut agents {
        a.attributes.insert("rack".into(), rack.into());
    }
    agents
}

fn rank(cpus: f64, mem: f64) -> Resources {
    Resources::new(cpus, mem, 0.0)
}

fn job(ranks: u32, profile: Profile) -> JobDemand {
    JobDemand::new(ranks, rank(1.0, 512.0)).with_profile(profile)
}

enum Check {
    /// Ranks per node, largest first.
    Shape(Vec<u32>),
    /// The agents used, in any order.
    Agents(Vec<&'static str>),
    Applied(AppliedPolicy, Rule),
    ReasonContains(&'static str),
    Unfit(UnfitKind),
    UnfitReasonIs(&'static str),
    UnfitReasonContains(&'static str),
}

struct Case {
    name: &'static str,
    job: JobDemand,
    cluster: Vec<AgentCapacity>,
    checks: Vec<Check>,
}

fn check(result: &Result<Placement, Unfit>, c: &Check) -> Result<(), String> {
    match (c, result) {
        (Check::Shape(want), Ok(p)) => {
            let mut got = p.shape();
            got.sort_unstable_by(|a, b| b.cmp(a));
            (&got == want).then_some(()).ok_or(format!("shape {got:?}, want {want:?}"))
        }
        (Check::Agents(want), Ok(p)) => {
            let mut got: Vec<&str> = p.nodes.iter().map(|n| n.agent_id.as_str()).collect();
            got.sort_unstable();
            let mut want = want.clone();
            want.sort_unstable();
            (got == want).then_some(()).ok_or(format!("agents {got:?}, want {want:?}"))
        }
        (Check::Applied(policy, rule), Ok(p)) => (p.policy_applied == *policy && p.rule == *rule)
            .then_some(())
            .ok_or(format!("applied {} by {:?}, want {policy} by {rule:?}", p.policy_applied, p.rule)),
        (Check::ReasonContains(s), Ok(p)) => {
            p.reason.contains(s).then_some(()).ok_or(format!("reason {:?} lacks {s:?}", p.reason))
        }
        (Check::Unfit(kind), Err(u)) => {
            (u.kind == *kind).then_some(()).ok_or(format!("unfit {:?} ({}), want {kind:?}", u.kind, u.reason))
        }
        (Check::UnfitReasonIs(s), Err(u)) => {
            (u.reason == *s).then_some(()).ok_or(format!("reason {:?}, want {s:?}", u.reason))
        }
        (Check::UnfitReasonContains(s), Err(u)) => {
            u.reason.contains(s).then_some(()).ok_or(format!("reason {:?} lacks {s:?}", u.reason))
        }
        (_, Ok(p)) => Err(format!("placed {:?} ({}), want unfit", p.shape(), p.reason)),
        (_, Err(u)) => Err(format!("unfit: {}", u.reason)),
    }
}

/// Whatever the case checks, a placement must hold the gang: every rank, the
/// launcher on the first node, and no agent twice.
fn gang_holds(job: &JobDemand, result: &Result<Placement, Unfit>) -> Result<(), String> {
    let Ok(p) = result else { return Ok(()) };
    let mut ids: Vec<&str> = p.nodes.iter().map(|n| n.agent_id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    if p.total_ranks() != job.ranks {
        return Err(format!("{} ranks placed, job has {}", p.total_ranks(), job.ranks));
    }
    if p.launcher.agent_id != p.nodes[0].agent_id || ids.len() != p.nodes.len() {
        return Err(format!("launcher on {}, nodes {:?}", p.launcher.agent_id, ids));
    }
    if p.nodes.iter().any(|n| n.ranks == 0) {
        return Err("a worker with no rank".into());
    }
    Ok(())
}

/// A prepared [`Cluster`] must answer exactly as `place` does.
fn same_on_a_prepared_cluster(case: &Case, result: &Result<Placement, Unfit>) -> Result<(), String> {
    let scorer = TopologyScorer::default();
    let prepared = Cluster::new(&case.cluster, &scorer).place(&case.job);
    (&prepared == result).then_some(()).ok_or(format!("prepared cluster answered {prepared:?}"))
}

fn cases() -> Vec<Case> {
    use Check::*;
    vec![
        Case {
            name: "a network job of 8 ranks on 4 nodes with 4 free cpus each (plus the launcher's share) lands on 2 nodes",
            job: job(8, Profile::Network),
            cluster: nodes(4, 4.1, 8192.0),
            checks: vec![
                Shape(vec![4, 4]),
                Applied(AppliedPolicy::Pack, Rule::AutoNetworkPacks),
                ReasonContains("co-located ranks talk over shared memory"),
                ReasonContains("8 ranks on 2 nodes (4-4)"),
            ],
        },
        Case {
            name: "with exactly 4 free cpus each, the launcher's share pushes a network job of 8 ranks onto 3 nodes",
            job: job(8, Profile::Network),
            cluster: nodes(4, 4.0, 8192.0),
            checks: vec![Shape(vec![4, 3, 1])],
        },
        Case {
            name: "a cpu job of 8 ranks spreads 2-2-2-2",
            job: job(8, Profile::Cpu),
            cluster: nodes(4, 8.0, 8192.0),
            checks: vec![
                Shape(vec![2, 2, 2, 2]),
                Applied(AppliedPolicy::Spread, Rule::AutoCpuSpreads),
                ReasonContains("contend for its cores"),
            ],
        },
        Case {
            name: "a memory job spreads to one rank per node when there are more nodes than ranks",
            job: job(3, Profile::Memory),
            cluster: nodes(5, 8.0, 8192.0),
            checks: vec![Shape(vec![1, 1, 1]), Applied(AppliedPolicy::Spread, Rule::AutoMemorySpreads)],
        },
        Case {
            name: "maxRanksPerNode 3 turns 8 ranks into 3-3-2",
            job: job(8, Profile::Network).with_max_ranks_per_node(3),
            cluster: nodes(4, 16.0, 16384.0),
            checks: vec![Shape(vec![3, 3, 2])],
        },
        Case {
            name: "spread honours maxRanksPerNode when it binds before capacity does",
            job: job(8, Profile::Cpu).with_max_ranks_per_node(1),
            cluster: nodes(4, 16.0, 16384.0),
            checks: vec![
                Unfit(UnfitKind::Fragmented),
                UnfitReasonIs(
                    "needs 8 ranks of 1 cpu, 512 MiB each, plus the launcher (0.1 cpus, 64 MiB) on the first node; \
                     the 4 agents with room for a rank can host at most 4 with maxRanksPerNode 1",
                ),
            ],
        },
        Case {
            name: "spread over uneven nodes gives the small one what fits and levels the rest",
            job: job(10, Profile::Cpu),
            cluster: vec![node(1, 8.0, 8192.0), node(2, 8.0, 8192.0), node(3, 8.0, 8192.0), node(4, 1.0, 8192.0)],
            checks: vec![Shape(vec![3, 3, 3, 1])],
        },
        Case {
            name: "nodeSelector rack=r2 excludes r1",
            job: job(4, Profile::Cpu).with_selector("rack", "r2"),
            cluster: [
                in_rack(nodes(2, 8.0, 8192.0), "r1"),
                in_rack(vec![node(3, 8.0, 8192.0), node(4, 8.0, 8192.0)], "r2"),
            ]
            .concat(),
            checks: vec![Agents(vec!["a3", "a4"]), Shape(vec![2, 2])],
        },
        Case {
            name: "nodeSelector hostname=node3 pins the job to that host",
            job: job(2, Profile::Cpu).with_selector("hostname", "node3"),
            cluster: nodes(4, 8.0, 8192.0),
            checks: vec![Agents(vec!["a3"])],
        },
        Case {
            name: "a nodeSelector no agent matches names the selector",
            job: job(2, Profile::Cpu).with_selector("rack", "r9"),
            cluster: in_rack(nodes(4, 8.0, 8192.0), "r1"),
            checks: vec![
                Unfit(UnfitKind::NoMatchingAgent),
                UnfitReasonIs("no agent matches nodeSelector rack=r9; 4 agents offered resources"),
            ],
        },
        Case {
            name: "one cpu short anywhere gives Unfit naming the shortfall",
            job: job(8, Profile::Network),
            cluster: vec![node(1, 2.0, 8192.0), node(2, 2.0, 8192.0), node(3, 2.0, 8192.0), node(4, 1.1, 8192.0)],
            checks: vec![
                Unfit(UnfitKind::InsufficientResources),
                UnfitReasonIs("needs 8.1 cpus; 7.1 offered across 4 agents"),
            ],
        },
        Case {
            name: "a selector-scoped shortfall reads 'needs 16 cpus on nodes with rack=r1; 9.5 offered across 3 agents'",
            job: job(16, Profile::Network).with_selector("rack", "r1").with_launcher(Resources::new(0.0, 64.0, 0.0)),
            cluster: [
                in_rack(vec![node(1, 4.0, 65536.0), node(2, 4.0, 65536.0), node(3, 1.5, 65536.0)], "r1"),
                in_rack(vec![node(4, 64.0, 65536.0)], "r2"),
            ]
            .concat(),
            checks: vec![UnfitReasonIs("needs 16 cpus on nodes with rack=r1; 9.5 offered across 3 agents")],
        },
        Case {
            name: "memory short anywhere names memory",
            job: JobDemand::new(4, rank(1.0, 4096.0)),
            cluster: nodes(2, 8.0, 4096.0),
            checks: vec![UnfitReasonIs("needs 16448 MiB of memory; 8192 offered across 2 agents")],
        },
        Case {
            name: "enough cpus in total but not in whole ranks per node is fragmentation",
            job: job(4, Profile::Cpu),
            cluster: nodes(5, 0.9, 8192.0),
            checks: vec![
                Unfit(UnfitKind::Fragmented),
                UnfitReasonIs("no agent has room for one rank (1 cpu, 512 MiB); 5 agents offer less each"),
            ],
        },
        Case {
            name: "a launcher that fits next to no rank gives NoRoomForLauncher",
            job: job(2, Profile::Network),
            cluster: nodes(4, 1.0, 8192.0),
            checks: vec![
                Unfit(UnfitKind::NoRoomForLauncher),
                UnfitReasonContains("room for the launcher (0.1 cpus, 64 MiB) next to a rank (1 cpu, 512 MiB)"),
            ],
        },
        Case {
            name: "a balanced job packs but never more ranks on a node than its whole free cpus",
            job: JobDemand::new(8, rank(0.5, 256.0)),
            cluster: nodes(4, 4.1, 8192.0),
            checks: vec![
                Shape(vec![4, 4]),
                Applied(AppliedPolicy::Pack, Rule::AutoBalancedPacksWithinCores),
                ReasonContains("never more ranks on a node than its whole free cpus"),
            ],
        },
        Case {
            name: "an explicit pack of the same balanced job shares cores on one node",
            job: JobDemand::new(8, rank(0.5, 256.0)).with_policy(Policy::Pack),
            cluster: nodes(4, 4.1, 8192.0),
            checks: vec![Shape(vec![8]), Applied(AppliedPolicy::Pack, Rule::RequestedPack)],
        },
        Case {
            name: "an explicit spread of a network job spreads",
            job: job(4, Profile::Network).with_policy(Policy::Spread),
            cluster: nodes(4, 8.0, 8192.0),
            checks: vec![Shape(vec![1, 1, 1, 1]), Applied(AppliedPolicy::Spread, Rule::RequestedSpread)],
        },
        Case {
            name: "pack keeps a job in one rack when the node count ties",
            job: job(8, Profile::Network),
            cluster: vec![
                node(1, 4.1, 8192.0).with_attribute("rack", "r1"),
                node(2, 4.1, 8192.0).with_attribute("rack", "r2"),
                node(3, 4.1, 8192.0).with_attribute("rack", "r1"),
                node(4, 4.1, 8192.0).with_attribute("rack", "r2"),
                node(5, 4.1, 8192.0).with_attribute("rack", "r2"),
            ],
            checks: vec![Shape(vec![4, 4]), Agents(vec!["a2", "a4"])],
        },
        Case {
            name: "pack prefers a single rack even when its nodes are not the largest",
            job: job(8, Profile::Network),
            cluster: vec![
                node(1, 6.1, 8192.0).with_attribute("rack", "r1"),
                node(2, 6.1, 8192.0).with_attribute("rack", "r2"),
                node(3, 4.1, 8192.0).with_attribute("rack", "r2"),
            ],
            checks: vec![Shape(vec![4, 4]), Agents(vec!["a2", "a3"])],
        },
        Case {
            name: "pack puts a small job on the tightest node that holds it (best fit)",
            job: job(2, Profile::Network),
            cluster: vec![node(1, 8.1, 8192.0), node(2, 8.1, 8192.0), node(3, 2.1, 8192.0)],
            checks: vec![Agents(vec!["a3"])],
        },
        Case {
            name: "a network job prefers the agent with more measured bandwidth when capacity ties",
            job: job(2, Profile::Network),
            cluster: vec![
                node(1, 8.0, 8192.0).with_bandwidth(1000.0),
                node(2, 8.0, 8192.0).with_bandwidth(10000.0),
                node(3, 8.0, 8192.0),
            ],
            checks: vec![Agents(vec!["a2"])],
        },
        Case {
            name: "accounted network bandwidth limits ranks per node",
            job: JobDemand::new(4, Resources::new(1.0, 512.0, 500.0)).with_profile(Profile::Network),
            cluster: (1..=3)
                .map(|i| {
                    AgentCapacity::new(&format!("a{i}"), "h", FreeResources::new(8.0, 8192.0).with_network(1000.0))
                })
                .collect(),
            checks: vec![Shape(vec![2, 2])],
        },
        Case {
            name: "two offers from one agent add up",
            job: job(3, Profile::Network),
            cluster: vec![node(1, 2.0, 4096.0), node(1, 2.0, 4096.0)],
            checks: vec![Agents(vec!["a1"]), Shape(vec![3])],
        },
        Case {
            name: "an agent offering NaN cpus is left out and named",
            job: job(4, Profile::Network),
            cluster: vec![node(1, 2.0, 8192.0), node(2, f64::NAN, 8192.0)],
            checks: vec![
                Unfit(UnfitKind::InsufficientResources),
                UnfitReasonIs("needs 4.1 cpus; 2 offered across 1 agent (left out: agent a2 offers cpus = NaN)"),
            ],
        },
        Case {
            name: "no offers at all says so",
            job: job(1, Profile::Cpu),
            cluster: vec![],
            checks: vec![Unfit(UnfitKind::NoOffers), UnfitReasonIs("no agent offers resources right now")],
        },
        Case {
            name: "zero ranks is an invalid demand",
            job: job(0, Profile::Cpu),
            cluster: nodes(2, 8.0, 8192.0),
            checks: vec![Unfit(UnfitKind::InvalidDemand), UnfitReasonIs("ranks must be at least 1, got 0")],
        },
        Case {
            name: "negative memory per rank is an invalid demand naming the value",
            job: JobDemand::new(2, rank(1.0, -5.0)),
            cluster: nodes(2, 8.0, 8192.0),
            checks: vec![UnfitReasonIs("memory per rank (MiB) must be a finite number >= 0, got -5")],
        },
        Case {
            name: "zero cpus per rank is an invalid demand",
            job: JobDemand::new(2, rank(0.0, 1.0)),
            cluster: nodes(2, 8.0, 8192.0),
            checks: vec![UnfitReasonIs("cpus per rank must be a positive number, got 0")],
        },
    ]
}

#[test]
fn placement_scenarios() {
    let mut failures = Vec::new();
    let all = cases();
    for case in &all {
        let result = place(&case.job, &case.cluster);
        let problems: Vec<String> = case
            .checks
            .iter()
            .map(|c| check(&result, c))
            .chain([gang_holds(&case.job, &result), same_on_a_prepared_cluster(case, &result)])
            .filter_map(Result::err)
            .collect();
        if problems.is_empty() {
            println!("ok   {}", case.name);
        } else {
            failures.push(format!("FAIL {}: {}", case.name, problems.join("; ")));
        }
    }
    assert!(failures.is_empty(), "{} of {} scenarios failed:\n{}", failures.len(), all.len(), failures.join("\n"));
}

#[test]
fn placements_and_unfits_serialize_for_the_controller() {
    let p = place(&job(8, Profile::Network), &nodes(4, 4.1, 8192.0)).expect("fits");
    let json = serde_json::to_value(&p).expect("serializes");
    assert_eq!(json["policyApplied"], "pack");
    assert_eq!(json["rule"], "autoNetworkPacks");
    assert_eq!(json["nodes"][0]["ranks"], 4);
    assert_eq!(json["launcher"]["agentId"], p.nodes[0].agent_id);

    let u = place(&job(0, Profile::Cpu), &nodes(1, 1.0, 1.0)).expect_err("invalid");
    let json = serde_json::to_value(&u).expect("serializes");
    assert_eq!(json["kind"], "invalidDemand");

    let demand: JobDemand = serde_json::from_value(serde_json::json!({
        "ranks": 4,
        "perRank": {"cpus": 1.0, "memoryMib": 512.0},
        "profile": "network",
        "maxRanksPerNode": 2,
        "nodeSelector": {"rack": "r1"}
    }))
    .expect("a demand in MpiJob vocabulary deserializes");
    assert_eq!(demand.policy, Policy::Auto);
    assert_eq!(demand.launcher, mpiswarm_policy::DEFAULT_LAUNCHER);
    assert_eq!(demand.max_ranks_per_node, Some(2));
}
