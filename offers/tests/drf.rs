//! Dominant Resource Fairness end to end: the classic example of the DRF
//! paper over real HTTP, and role weights in the allocator and from the
//! `--weights` flag of `mpiswarm offers`.

mod common;

use common::{Cluster, next_event, within};
use mpiswarm_mesos::quantities::Quantities;
use mpiswarm_mesos::scheduler::{Call, EventType};
use mpiswarm_mesos::{Filters, FrameworkInfo, Offer, Operation, Resource, resources::scalar_sum};
use mpiswarm_offers::allocator::{Allocator, AllocatorConfig};
use mpiswarm_testkit::TestAgent;
use std::time::Duration;

/// Launches one `cpus`/`mem` task on the offer if it fits, declines otherwise.
async fn answer(f: &common::Framework, offer: &Offer, cpus: f64, mem: f64, n: &mut usize) -> bool {
    let fits = scalar_sum(&offer.resources, "cpus") >= cpus && scalar_sum(&offer.resources, "mem") >= mem;
    let no_filter = Some(Filters::refuse(0.0));
    let call = if fits {
        *n += 1;
        let t = common::task(&format!("{}-{n}", f.info.name), offer, cpus, mem, "sleep 1000");
        Call::accept(f.id(), vec![offer.id.clone()], vec![Operation::launch(vec![t])], no_filter)
    } else {
        Call::decline(f.id(), vec![offer.id.clone()], no_filter)
    };
    f.client.call(&call).await.unwrap();
    fits
}

#[tokio::test]
async fn the_classic_example_converges_to_three_tasks_for_a_and_two_for_b() {
    let c = Cluster::start().await;
    // Both frameworks are there before the agent, so neither gets a head start.
    let mut a = c.framework("A", &["r"]).await;
    let mut b = c.framework("B", &["r"]).await;
    let _agent = c.agent("node1", 9.0, 18432.0);
    let (mut na, mut nb) = (0, 0);
    // Run until an offer fits neither framework: the cluster is full.
    let mut misses = (false, false);
    within("full cluster", async {
        while !(misses.0 && misses.1) {
            tokio::select! {
                e = next_event(&mut a.events) => if e.kind == EventType::Offers {
                    for o in e.offers.unwrap().offers { misses.0 = !answer(&a, &o, 1.0, 4096.0, &mut na).await; }
                },
                e = next_event(&mut b.events) => if e.kind == EventType::Offers {
                    for o in e.offers.unwrap().offers { misses.1 = !answer(&b, &o, 3.0, 1024.0, &mut nb).await; }
                },
            }
        }
    })
    .await;
    assert_eq!((na, nb), (3, 2), "A gets 3 tasks (1 cpu, 4 GiB), B gets 2 (3 cpus, 1 GiB)");
    let state = c.state().await;
    assert_eq!(state["slaves"][0]["used_resources"]["cpus"], 9.0);
}

#[tokio::test]
async fn the_flag_weights_mpi_2_batch_1_is_reported_and_splits_a_node_eight_to_four() {
    let master = Cluster::from_flags(&["--weights", "mpi=2,batch=1"]).await;
    let url = master.url();
    let mut m = common::Framework::subscribe(&url, FrameworkInfo::new("root", "m", &["mpi"])).await;
    let mut b = common::Framework::subscribe(&url, FrameworkInfo::new("root", "b", &["batch"])).await;
    // One agent: each offer is all of its free resources, so every task goes
    // to the role with the lowest weighted share, one at a time.
    let _agent =
        TestAgent::start(&url, "node1", vec![Resource::scalar("cpus", 12.0), Resource::scalar("mem", 16384.0)]);
    let (mut nm, mut nb) = (0, 0);
    within("12 launched tasks", async {
        while nm + nb < 12 {
            tokio::select! {
                e = next_event(&mut m.events) => if e.kind == EventType::Offers {
                    for o in e.offers.unwrap().offers { answer(&m, &o, 1.0, 512.0, &mut nm).await; }
                },
                e = next_event(&mut b.events) => if e.kind == EventType::Offers {
                    for o in e.offers.unwrap().offers { answer(&b, &o, 1.0, 512.0, &mut nb).await; }
                },
            }
        }
    })
    .await;
    // Weighted DRF stops favouring mpi once its share is twice batch's:
    // 8 : 4 of 12 cpus (weights ignored would give 6 : 6).
    assert_eq!((nm, nb), (8, 4), "tasks launched by the mpi and batch frameworks");
    let state: serde_json::Value = reqwest::get(format!("{url}/master/state")).await.unwrap().json().await.unwrap();
    let roles: Vec<(String, f64, f64)> = state["roles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_owned(),
                r["weight"].as_f64().unwrap(),
                r["allocated"]["cpus"].as_f64().unwrap_or(0.0),
            )
        })
        .collect();
    assert_eq!(
        roles,
        vec![("batch".to_owned(), 1.0, 4.0), ("mpi".to_owned(), 2.0, 8.0)],
        "/master/state roles: {}",
        state["roles"]
    );
}

fn q(cpus: f64, mem: f64) -> Quantities {
    let mut q = Quantities::scalar("cpus", cpus);
    q.add(&Quantities::scalar("mem", mem));
    q
}

/// Drives the allocator like frameworks that launch one `task` per offer
/// and give the rest back; returns tasks launched per framework.
fn run_to_full(alloc: &mut Allocator, frameworks: &[(&str, &str, Quantities)]) -> Vec<usize> {
    let mut launched = vec![0; frameworks.len()];
    for step in 0..10_000u64 {
        let now = Duration::from_millis(step);
        let allocations = alloc.allocate(now, None);
        if allocations.is_empty() {
            break;
        }
        for a in allocations {
            let i = frameworks.iter().position(|(f, _, _)| *f == a.framework).unwrap();
            let task = &frameworks[i].2;
            if a.resources.contains(task) {
                launched[i] += 1;
                alloc.recover(&a.framework, &a.role, &a.agent, &a.resources.minus(task), None, now);
            } else {
                // Does not fit: refuse for long so the others get their turn.
                alloc.recover(&a.framework, &a.role, &a.agent, &a.resources, Some(Duration::from_secs(3600)), now);
            }
        }
    }
    launched
}

#[test]
fn the_classic_example_in_the_allocator_alone() {
    let mut alloc = Allocator::new(AllocatorConfig::default());
    alloc.add_agent("s1", q(9.0, 18432.0), &[]);
    alloc.add_framework("A", &["r".into()], &[]);
    alloc.add_framework("B", &["r".into()], &[]);
    let launched = run_to_full(&mut alloc, &[("A", "r", q(1.0, 4096.0)), ("B", "r", q(3.0, 1024.0))]);
    assert_eq!(launched, vec![3, 2]);
}

#[test]
fn with_role_weights_two_to_one_the_tasks_launched_settle_about_two_to_one() {
    let mut alloc = Allocator::new(AllocatorConfig::default());
    alloc.set_weight("mpi", 2.0);
    alloc.set_weight("batch", 1.0);
    for i in 0..10 {
        alloc.add_agent(&format!("s{i}"), q(10.0, 10240.0), &[]);
    }
    alloc.add_framework("m", &["mpi".into()], &[]);
    alloc.add_framework("b", &["batch".into()], &[]);
    let launched = run_to_full(&mut alloc, &[("m", "mpi", q(1.0, 512.0)), ("b", "batch", q(1.0, 512.0))]);
    // Counted from what the frameworks launched, not from the sorter's own
    // (weighted) shares: identical 1-cpu tasks on 100 cpus, so the unweighted
    // dominant share of a role is its task count / 100. Weighted DRF stops
    // giving mpi more once its share is twice batch's: 67 : 33 (ignoring the
    // weights would give 50 : 50).
    assert_eq!(launched.iter().sum::<usize>(), 100, "the cluster is used fully");
    assert!(
        (64..=70).contains(&launched[0]),
        "mpi (weight 2) : batch (weight 1) tasks = {launched:?}, expected about 67 : 33"
    );
}
