//! Invariants of the allocator under random sequences of events
//! (proptest): no agent is over-offered; offered + used + free is the
//! total; a declined resource is not re-offered to the same framework
//! within its filter; a suppressed framework gets no offers.

use mpiswarm_mesos::quantities::Quantities;
use mpiswarm_offers::allocator::{Allocation, Allocator, AllocatorConfig};
use proptest::prelude::*;
use std::collections::BTreeSet;
use std::time::Duration;

#[derive(Debug, Clone)]
enum Step {
    AddAgent {
        cpus: u8,
        mem: u16,
    },
    Allocate {
        advance_ms: u16,
    },
    /// Decline offer `i` with a filter of `refuse_ms`.
    Decline {
        i: usize,
        refuse_ms: u16,
    },
    /// Accept offer `i` launching a task of `cpus`, refusing the rest for `refuse_ms`.
    Accept {
        i: usize,
        cpus: u8,
        refuse_ms: u16,
    },
    Finish {
        i: usize,
    },
    Suppress {
        fw: usize,
    },
    Revive {
        fw: usize,
    },
    DeactivateAgent {
        i: usize,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (1u8..16, 64u16..8192).prop_map(|(cpus, mem)| Step::AddAgent { cpus, mem }),
        (0u16..3000).prop_map(|advance_ms| Step::Allocate { advance_ms }),
        (0usize..8, 0u16..5000).prop_map(|(i, refuse_ms)| Step::Decline { i, refuse_ms }),
        (0usize..8, 1u8..4, 0u16..5000).prop_map(|(i, cpus, refuse_ms)| Step::Accept { i, cpus, refuse_ms }),
        (0usize..8).prop_map(|i| Step::Finish { i }),
        (0usize..3).prop_map(|fw| Step::Suppress { fw }),
        (0usize..3).prop_map(|fw| Step::Revive { fw }),
        (0usize..4).prop_map(|i| Step::DeactivateAgent { i }),
    ]
}

struct Filter {
    fw: String,
    agent: String,
    resources: Quantities,
    until: Duration,
}

const FRAMEWORKS: [&str; 3] = ["f0", "f1", "f2"];

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn allocator_invariants_hold(steps in proptest::collection::vec(step(), 1..80)) {
        let mut alloc = Allocator::new(AllocatorConfig::default());
        for (i, fw) in FRAMEWORKS.iter().enumerate() {
            let role = if i == 2 { "batch" } else { "mpi" };
            alloc.add_framework(fw, &[role.to_owned()], &[]);
        }
        let role_of = |fw: &str| if fw == "f2" { "batch".to_owned() } else { "mpi".to_owned() };
        let mut now = Duration::ZERO;
        let mut agents: Vec<(String, Quantities)> = Vec::new();
        let mut offers: Vec<Allocation> = Vec::new();
        let mut tasks: Vec<Allocation> = Vec::new();
        let mut filters: Vec<Filter> = Vec::new();
        let mut suppressed: BTreeSet<String> = BTreeSet::new();
        for s in steps {
            match s {
                Step::AddAgent { cpus, mem } => {
                    let id = format!("a{}", agents.len());
                    let mut total = Quantities::scalar("cpus", f64::from(cpus));
                    total.add(&Quantities::scalar("mem", f64::from(mem)));
                    alloc.add_agent(&id, total.clone(), &[]);
                    agents.push((id, total));
                }
                Step::Allocate { advance_ms } => {
                    now += Duration::from_millis(u64::from(advance_ms));
                    for a in alloc.allocate(now, None) {
                        prop_assert!(!suppressed.contains(&a.framework), "suppressed {} got an offer", a.framework);
                        for f in &filters {
                            let blocked = f.fw == a.framework && f.agent == a.agent && now < f.until && f.resources.contains(&a.resources);
                            prop_assert!(!blocked, "{} was re-offered {} on {} within its filter", a.framework, a.resources, a.agent);
                        }
                        offers.push(a);
                    }
                }
                Step::Decline { i, refuse_ms } if i < offers.len() => {
                    let o = offers.remove(i);
                    let refuse = Duration::from_millis(u64::from(refuse_ms));
                    alloc.recover(&o.framework, &o.role, &o.agent, &o.resources, Some(refuse), now);
                    if !refuse.is_zero() {
                        filters.push(Filter { fw: o.framework, agent: o.agent, resources: o.resources, until: now + refuse.max(Duration::from_secs(1)) });
                    }
                }
                Step::Accept { i, cpus, refuse_ms } if i < offers.len() => {
                    let o = offers.remove(i);
                    let task = Quantities::scalar("cpus", f64::from(cpus));
                    let refuse = Duration::from_millis(u64::from(refuse_ms));
                    if o.resources.contains(&task) {
                        let rest = o.resources.minus(&task);
                        alloc.recover(&o.framework, &o.role, &o.agent, &rest, Some(refuse), now);
                        if !refuse.is_zero() {
                            filters.push(Filter { fw: o.framework.clone(), agent: o.agent.clone(), resources: rest, until: now + refuse.max(Duration::from_secs(1)) });
                        }
                        tasks.push(Allocation { resources: task, ..o });
                    } else {
                        alloc.recover(&o.framework, &o.role, &o.agent, &o.resources, None, now);
                    }
                }
                Step::Finish { i } if i < tasks.len() => {
                    let t = tasks.remove(i);
                    alloc.recover(&t.framework, &t.role, &t.agent, &t.resources, None, now);
                }
                Step::Suppress { fw } => {
                    alloc.suppress(FRAMEWORKS[fw], &[]);
                    suppressed.insert(FRAMEWORKS[fw].to_owned());
                }
                Step::Revive { fw } => {
                    alloc.revive(FRAMEWORKS[fw], &[role_of(FRAMEWORKS[fw])]);
                    suppressed.remove(FRAMEWORKS[fw]);
                    filters.retain(|f| f.fw != FRAMEWORKS[fw]);
                }
                Step::DeactivateAgent { i } if i < agents.len() => {
                    alloc.set_agent_active(&agents[i].0, false);
                }
                _ => {}
            }
            for (id, total) in &agents {
                let (t, allocated) = alloc.agent_resources(id).unwrap();
                prop_assert_eq!(&t, total);
                prop_assert!(total.contains(&allocated), "agent {} over-offered: {} of {}", id, allocated, total);
                let mut held = Quantities::new();
                for a in offers.iter().chain(tasks.iter()).filter(|a| a.agent == *id) {
                    held.add(&a.resources);
                }
                let free = total.minus(&allocated);
                let mut sum = held.clone();
                sum.add(&free);
                prop_assert!(sum.contains(total) && total.contains(&sum), "offered+used+free {} != total {} on {}", sum, total, id);
                prop_assert!(held.contains(&allocated) && allocated.contains(&held), "allocator books {} != offered+used {}", allocated, held);
            }
        }
    }
}
