//! Offer-layer failover on `mpiswarm up --nodes 3 --node-cpus 2 --split
//! --offers-replicas 3`: three replicas elect their leader with a Lease and
//! keep their registry in the API server; the agents and the controller are
//! given all three. The leader changes four times; each time a replica
//! leads and offers within 15 s, and `up` starts the old leader again:
//!
//! - while a 6-rank job runs (its ranks held, so it outlives the changes)
//!   and a job too large to fit beside it waits: `kill -9` of the leader
//!   (`up` starts it again on its address, which is its identity in the
//!   Lease, so it may take its own Lease back at once), SIGSTOP of the
//!   leader (alive and silent: a standby takes the Lease over; continued,
//!   the old leader exits, having lost it), and `kill -9` again; then the
//!   running job is released and succeeds on its first gang (no rank
//!   killed), and the waiting job starts after it;
//! - `kill -9` during a burst of 20 small jobs (`backoffLimit: 0`): every
//!   one succeeds, none restarted.
//!
//! Swarm's event log on the manager shows exactly the services the jobs ran,
//! each created once: no task was launched twice across the changes. The
//! case prints each change's time to the first offer and its wall time.
//!
//!   cargo test -p mpiswarm-e2e --features mpiswarm-testkit/engine --test master_failover

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use mpiswarm_e2e::components::{Component, Thaw};
use mpiswarm_e2e::events::now;
use mpiswarm_e2e::{Cluster, Job, Status, Watched, runner, wait};

const REPLICAS: usize = 3;
const RANKS: u32 = 6;
const RANK_CPUS: f64 = 0.45;
const SAMPLES: u64 = 20_000_000;
/// Beside the running job (2.8 cpus packed on two nodes) no node has 1.9
/// cpus left for 2 of these ranks with the launcher, and the cluster has
/// 3.2: this one waits until the running job has ended.
const WAITING_RANKS: u32 = 4;
const WAITING_RANK_CPUS: f64 = 0.9;
/// 20 jobs of 2 ranks and the launcher, 0.5 cpus each: 12 fit at once, so
/// jobs still wait (and the controller asks for offers) when the leader is
/// killed.
const BURST_JOBS: usize = 20;
const BURST_RANK_CPUS: f64 = 0.2;
/// The promise of issue #25: a new leader offers within this time of the kill.
const OFFERS_WITHIN: Duration = Duration::from_secs(15);
const JOB_DEADLINE: Duration = Duration::from_secs(420);

fn main() {
    runner::run(
        "master_failover",
        || Cluster::up(3, 2.0, &["--split", "--offers-replicas", &REPLICAS.to_string()]),
        &[(
            "master_failover_three_kills_and_a_sigstop_of_the_leader_each_offered_within_15_s_no_rank_killed_no_task_launched_twice",
            master_failover,
        )],
    )
}

/// The replicas as stack.json lists them: component name and URL.
fn replicas(cluster: &Cluster) -> Vec<(String, String)> {
    let stack = cluster.stack();
    let urls: Vec<String> = stack["offersReplicas"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|u| u.as_str().map(str::to_owned))
        .collect();
    assert_eq!(urls.len(), REPLICAS, "stack.json lists every replica: {stack}");
    cluster
        .components()
        .into_iter()
        .filter(|c| c.name.starts_with("offers-"))
        .map(|c| {
            let listen = c.args.iter().skip_while(|a| *a != "--listen").nth(1).cloned().unwrap_or_default();
            let url = urls.iter().find(|u| u.ends_with(&listen)).cloned().unwrap_or_default();
            (c.name, url)
        })
        .collect()
}

/// `/metrics/snapshot` of one replica, read as the stack's operator.
fn snapshot(cluster: &Cluster, url: &str) -> Result<serde_json::Value, String> {
    let operator = mpiswarm_testkit::http::stack_operator(&cluster.stack())?;
    let body = mpiswarm_testkit::http::get_ok_as(&format!("{url}/metrics/snapshot"), operator.as_ref())?;
    serde_json::from_str(&body).map_err(|e| format!("{url}: {e}: {body}"))
}

/// The one replica that leads and has offered since it was elected; the
/// replica `stopped` (SIGSTOP: it would not answer) is not asked.
fn offering_leader(cluster: &Cluster, stopped: Option<&str>) -> Result<String, String> {
    let mut seen = Vec::new();
    let mut leaders = Vec::new();
    for (name, url) in replicas(cluster).into_iter().filter(|(n, _)| Some(n.as_str()) != stopped) {
        let Ok(m) = snapshot(cluster, &url) else {
            seen.push(format!("{name}: no answer"));
            continue;
        };
        let (elected, offered) = (m["master/elected"] == 1.0, m["master/elected_to_first_offer_seconds"].as_f64());
        seen.push(format!("{name}: elected {elected}, first offer after {offered:?} s"));
        if elected && offered.is_some() {
            leaders.push(name);
        }
    }
    match leaders.as_slice() {
        [one] => Ok(one.clone()),
        _ => Err(seen.join("; ")),
    }
}

/// `kill -9` of the leading replica; waits until a replica leads again and
/// has offered (the time from the kill is returned and must be within
/// [`OFFERS_WITHIN`]), and until `up` has started the killed one again.
/// The new leader is a standby that took the Lease over, or the killed
/// replica started again by `up` on its address, which is the Lease's
/// holder identity, so it may take its own Lease back at once.
fn kill_leader(cluster: &Cluster, which: &str) -> Duration {
    let leader = leading(cluster);
    let killed = cluster.signal(&leader, "KILL");
    let at = Instant::now();
    let next = wait::until(Duration::from_secs(60), "a replica leads again and offers", || {
        let next = offering_leader(cluster, None)?;
        if next == leader && cluster.component(&next).pid == killed.pid {
            return Err(format!("{next} is still the killed process"));
        }
        Ok(next)
    });
    let took = at.elapsed();
    let how = if next == leader { "started again by up, took its Lease back" } else { "took the Lease over" };
    println!(
        "master_failover: {which}: {leader} killed; {next} ({how}) leads and offered {:.1} s later",
        took.as_secs_f64()
    );
    assert!(took <= OFFERS_WITHIN, "{which}: the new leader offered {took:?} after the kill, over {OFFERS_WITHIN:?}");
    started_again(cluster, &killed);
    took
}

fn leading(cluster: &Cluster) -> String {
    wait::until(Duration::from_secs(60), "one replica leads and offers", || offering_leader(cluster, None))
}

/// Waits until `up` has started the replica `before` again (a new process).
fn started_again(cluster: &Cluster, before: &Component) {
    wait::until(Duration::from_secs(90), &format!("up starts {} again", before.name), || {
        let now = cluster.component(&before.name);
        if now.pid != before.pid && now.restarts > before.restarts { Ok(()) } else { Err(format!("{now:?}")) }
    });
}

/// SIGSTOP of the leading replica (alive, silent, its port held): a
/// standby takes the Lease over and offers within [`OFFERS_WITHIN`];
/// continued, the old leader finds it lost the Lease and exits, and `up`
/// starts it again as a standby. Whatever it still held, it launched
/// nothing: the jobs' services are each created once (checked by the case).
fn stop_leader(cluster: &Cluster, which: &str) -> Duration {
    let leader = leading(cluster);
    let stopped = cluster.signal(&leader, "STOP");
    let thaw = Thaw { cluster, name: leader.clone() };
    let at = Instant::now();
    let next =
        wait::until(Duration::from_secs(60), "a standby leads and offers", || offering_leader(cluster, Some(&leader)));
    let took = at.elapsed();
    println!(
        "master_failover: {which}: {leader} stopped; {next} took the Lease over and offered {:.1} s later",
        took.as_secs_f64()
    );
    assert!(took <= OFFERS_WITHIN, "{which}: the new leader offered {took:?} after SIGSTOP, over {OFFERS_WITHIN:?}");
    drop(thaw);
    started_again(cluster, &stopped);
    took
}

/// Every task of the job (a role on a node, in a generation) ran as one
/// Swarm service: a task launched twice would show as a second service.
/// (Docker keeps only its last 256 events, too few to read a burst's
/// service creations from the event log as `Cluster::assert_services_created_once` does.)
fn one_service_per_task(w: &Watched) -> Result<(), String> {
    let mut services = std::collections::BTreeMap::<(&str, &str, &str), BTreeSet<&str>>::new();
    for t in &w.tasks {
        services.entry((t.generation.as_str(), t.role.as_str(), t.node.as_str())).or_default().insert(&t.service_id);
    }
    let twice: Vec<String> =
        services.iter().filter(|(_, ids)| ids.len() > 1).map(|(task, ids)| format!("{task:?}: {ids:?}")).collect();
    if twice.is_empty() {
        Ok(())
    } else {
        Err(format!("{}: launched twice: {twice:?}", w.status.0["metadata"]["name"]))
    }
}

/// Succeeded without a restart, one gang generation seen in Swarm (a gang
/// whose launch never reached an agent may be relaunched under the next
/// generation without a restart: said on stdout, with the controller's why).
fn succeeded_without_restart(w: &Watched) -> Result<(), String> {
    let st = &w.status;
    let name = &st.0["metadata"]["name"];
    let restarts = st.0["status"]["restarts"].as_i64().unwrap_or(0);
    let generations: BTreeSet<&str> = w.tasks.iter().map(|t| t.generation.as_str()).collect();
    if generations.len() == 1 && !generations.contains("0") {
        let why = st.condition("Restarting").map(|(_, reason, message)| format!("{reason}: {message}"));
        println!("master_failover: {name} ran as generation {generations:?} (relaunched, no restart: {why:?})");
    }
    if st.phase() == "Succeeded" && restarts == 0 && generations.len() == 1 {
        Ok(())
    } else {
        Err(format!("{name}: {} with {restarts} restarts, generations {generations:?}: {}", st.phase(), st.message()))
    }
}

fn master_failover(cluster: &Cluster) {
    let wall = Instant::now();
    let since = now().saturating_sub(1);
    let held = Job::held("failover-held", RANKS, RANK_CPUS, SAMPLES).policy("pack");
    let held_uid = cluster.submit(&held);
    cluster
        .wait_job(&held.name, JOB_DEADLINE, "runs on 2 nodes", |s| s.phase() == "Running" && s.placement().len() == 2);
    let waiting = Job::pi("failover-waiting", WAITING_RANKS, WAITING_RANK_CPUS, SAMPLES);
    let waiting_uid = cluster.submit(&waiting);
    let mut changes = vec![kill_leader(cluster, "first kill")];
    changes.push(stop_leader(cluster, "a leader stopped"));
    changes.push(kill_leader(cluster, "second kill"));
    let w = cluster.job(&waiting.name).expect("the waiting job");
    assert_ne!(w.phase(), "Running", "the waiting job cannot fit beside the held one: {}", w.0["status"]);
    cluster.release(&held_uid);
    let watched = cluster.watch_jobs(&[(&held.name, &held_uid), (&waiting.name, &waiting_uid)], JOB_DEADLINE);
    for w in &watched {
        succeeded_without_restart(w).unwrap_or_else(|e| panic!("{e}"));
    }
    println!(
        "master_failover: the waiting job, still waiting after the last change, started at {}",
        watched[1].status.start_time()
    );
    cluster.assert_services_created_once(since, &watched.iter().collect::<Vec<_>>());
    cluster.delete_jobs(&[&held.name, &waiting.name]);

    // The last kill, during a burst.
    let names: Vec<String> = (0..BURST_JOBS).map(|i| format!("failover-burst-{i:02}")).collect();
    let manifests: Vec<String> =
        names.iter().map(|n| Job::pi(n, 2, BURST_RANK_CPUS, SAMPLES / 2).backoff_limit(0).manifest()).collect();
    let burst = Instant::now();
    cluster.apply(&manifests.join("\n"));
    let uids: Vec<(String, String)> = wait::until(Duration::from_secs(60), "every job of the burst has a uid", || {
        names
            .iter()
            .map(|n| cluster.job(n).map(|s: Status| (n.clone(), s.uid().to_owned())).ok_or(format!("{n} missing")))
            .collect()
    });
    let pairs: Vec<(&str, &str)> = uids.iter().map(|(n, u)| (n.as_str(), u.as_str())).collect();
    // Swarm is watched from the start of the burst, so that jobs that end
    // while the leader changes are seen too.
    let watched = std::thread::scope(|scope| {
        let watcher = scope.spawn(|| cluster.watch_jobs(&pairs, JOB_DEADLINE));
        wait::until(Duration::from_secs(120), "jobs of the burst run while others wait", || {
            let jobs: Vec<Status> = names.iter().filter_map(|n| cluster.job(n)).collect();
            let running = jobs.iter().filter(|s| s.phase() == "Running").count();
            let waiting = jobs.iter().filter(|s| s.phase() == "Pending" || s.phase().is_empty()).count();
            if running >= 3 && waiting >= 3 { Ok(()) } else { Err(format!("{running} running, {waiting} waiting")) }
        });
        changes.push(kill_leader(cluster, "third kill, during the burst"));
        watcher.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    });
    let wrong: Vec<String> = watched
        .iter()
        .filter_map(|w| succeeded_without_restart(w).and_then(|()| one_service_per_task(w)).err())
        .collect();
    println!(
        "master_failover: burst of {BURST_JOBS} jobs ended in {:.1} s with a leader change; {} not as expected",
        burst.elapsed().as_secs_f64(),
        wrong.len()
    );
    assert!(wrong.is_empty(), "jobs of the burst: {wrong:#?}");
    cluster.delete_jobs(&names.iter().map(String::as_str).collect::<Vec<_>>());
    let secs: Vec<String> = changes.iter().map(|d| format!("{:.1}", d.as_secs_f64())).collect();
    println!(
        "master_failover: {} leader changes, first offer {} s after each; wall time {:.1} s",
        changes.len(),
        secs.join(", "),
        wall.elapsed().as_secs_f64()
    );
}
