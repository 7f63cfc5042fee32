//! Every fault of the design's fault model, survived by a multi-node job on
//! one `mpiswarm up --nodes 3 --node-cpus 2 --split` (each component its
//! own process, started again by `up` when it exits). Each case runs a
//! 6-rank job packed 4+2 on two nodes whose ranks are held (they wait, see
//! `Job::held`), strikes at a random moment while it runs, and releases the
//! ranks to run pi (real MPI across the nodes) once it has seen the system
//! recover, so the job outlives each fault and the recovery from it:
//!
//! - `kill -9` of the controller: once the new one is ready (subscribed
//!   again), the job succeeds, and its gang was launched once (Swarm's
//!   event log on the manager shows exactly the gang's services created,
//!   generation 0, no restart);
//! - `kill -9` of the offer layer while one agent is frozen (SIGSTOP: it is
//!   registered and never comes back): the controller's framework is let in
//!   again within 5 s, the job succeeds with no rank killed;
//! - `kill -9` of an agent: started again, it adopts its services (the same
//!   ones, running) and the job succeeds;
//! - `kill -9` of the API server: the controller (not restarted) resumes its
//!   watches: a job created after the restart runs, and the status of the
//!   first converges to Succeeded;
//! - a node container killed (`docker kill`, a crash: nothing inside gets to
//!   say goodbye): within 10 s the offer layer has its tasks LOST and the
//!   MpiJob's status says NodeLost, naming the node Swarm marked down (both
//!   delays printed); its agent is withdrawn (nothing of it offered). With
//!   `backoffLimit: 1` the gang restarts on the other nodes (released once
//!   all its tasks run there) and succeeds, the
//!   status and an Event naming the lost node; with `backoffLimit: 0` the job
//!   fails saying why. The node is started again after each; its agent
//!   serves it again, and a job that needs all three nodes runs.
//!
//! - a node container killed during a burst of 30 small jobs
//!   (`backoffLimit: 1`): the jobs that had a task there (the offer layer
//!   has one of their first gang's tasks LOST) restart once and succeed;
//!   every other job succeeds without a restart.
//!
//! The kill moments come from one seed, printed at the start; set
//! `MPISWARM_FAULTS_SEED` to replay a run. Needs the images of `make images`.
//!
//!   cargo test -p mpiswarm-e2e --features mpiswarm-testkit/engine --test faults [-- WORD...]

use std::collections::BTreeSet;
use std::hash::{BuildHasher, Hasher};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use mpiswarm_e2e::components::Thaw;
use mpiswarm_e2e::events::now;
use mpiswarm_e2e::{Cluster, Job, Node, Status, Watched, runner, wait};

const RANKS: u32 = 6;
const RANK_CPUS: f64 = 0.45;
/// 4 ranks of 0.45 and the 0.1-cpu launcher fill one node of 2 cpus to 1.9,
/// so a packed 6-rank job always spans two nodes.
const SHAPE: [i64; 2] = [4, 2];
const SAMPLES: u64 = 20_000_000;
/// A kill falls this long after the job runs, at a random moment between.
const STRIKE_MS: (u64, u64) = (2_000, 15_000);
/// One job from apply to its end, gang restarts included.
const JOB_DEADLINE: Duration = Duration::from_secs(420);
/// The promises measured here.
const FRAMEWORK_BACK_WITHIN: Duration = Duration::from_secs(5);
const LOST_WITHIN: Duration = Duration::from_secs(10);

fn main() {
    seed();
    runner::run(
        "faults",
        || Cluster::up(3, 2.0, &["--split"]),
        &[
            ("controller_kill_9_job_completes_and_its_gang_is_launched_once", controller_kill_9),
            ("offers_kill_9_framework_back_within_5_s_with_an_agent_gone_and_no_rank_killed", offers_kill_9),
            ("agent_kill_9_adopts_its_services_and_the_job_completes", agent_kill_9),
            ("apiserver_kill_9_watches_resume_and_status_converges", apiserver_kill_9),
            (
                "node_lost_tasks_lost_within_10_s_gang_restarts_elsewhere_with_backoff_1_and_the_node_serves_again",
                node_lost_restarts_gang,
            ),
            ("node_lost_with_backoff_0_fails_saying_why", node_lost_fails),
            ("node_killed_during_a_burst_restarts_only_the_jobs_it_hit_and_all_succeed", node_killed_during_a_burst),
        ],
    )
}

/// The run's seed: `MPISWARM_FAULTS_SEED`, else a fresh one; printed either way.
fn seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(|| {
        let seed = std::env::var("MPISWARM_FAULTS_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| std::collections::hash_map::RandomState::new().build_hasher().finish());
        println!("faults: kill moments from seed {seed} (replay with MPISWARM_FAULTS_SEED={seed})");
        seed
    })
}

/// Waits a moment drawn for `case` from the seed, within [`STRIKE_MS`].
fn strike_after(case: &str) {
    // FNV-1a of the case name mixed with the seed, then splitmix64: the same
    // seed gives every case the same moment in any selection of cases.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed();
    for b in case.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let mut z = h.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    let ms = STRIKE_MS.0 + z % (STRIKE_MS.1 - STRIKE_MS.0);
    println!("faults::{case}: striking {ms} ms into the run");
    std::thread::sleep(Duration::from_millis(ms)); // the random moment itself
}

/// The suite's long job: every rank waits until [`Cluster::release`], then runs pi.
fn long_job(name: &str) -> Job {
    Job::held(name, RANKS, RANK_CPUS, SAMPLES).policy("pack")
}

/// A job applied and seen running.
struct Started {
    name: String,
    uid: String,
    /// Seconds since the epoch just before it was applied (for Swarm's event log).
    since: u64,
    /// Hostnames of the nodes it runs on.
    nodes: BTreeSet<String>,
    status: Status,
}

fn start(cluster: &Cluster, job: &Job) -> Started {
    let since = now().saturating_sub(1);
    let uid = cluster.submit(job);
    let status = cluster
        .wait_job(&job.name, JOB_DEADLINE, "runs on 2 nodes", |s| s.phase() == "Running" && s.placement().len() == 2);
    let nodes: BTreeSet<String> = status.placement().into_keys().collect();
    println!("faults: {} runs on {nodes:?}", job.name);
    Started { name: job.name.clone(), uid, since, nodes, status }
}

/// Follows the job to its end: it succeeded on its first gang, as its
/// status and Swarm agree, and every rank ran pi to the end.
fn succeeds_first_time(cluster: &Cluster, job: &Started) -> Watched {
    let watched = cluster.watch_job(&job.name, &job.uid, JOB_DEADLINE);
    let st = &watched.status;
    assert_eq!(st.phase(), "Succeeded", "{}: {}", job.name, st.0["status"]);
    assert_eq!(st.0["status"]["restarts"].as_i64().unwrap_or(0), 0, "no gang restart: {}", st.0["status"]);
    assert_eq!(st.0["status"]["gangGeneration"].as_i64().unwrap_or(0), 0, "generation 0: {}", st.0["status"]);
    let generations: BTreeSet<&str> = watched.tasks.iter().map(|t| t.generation.as_str()).collect();
    assert_eq!(generations, BTreeSet::from(["0"]), "Swarm ran generation 0 only: {:?}", watched.tasks);
    watched.assert_placement(RANK_CPUS, &SHAPE);
    every_rank_ran(cluster, &job.name);
    watched
}

/// The launcher's output: pi's line per rank and its total.
fn every_rank_ran(cluster: &Cluster, name: &str) {
    let out = cluster.mpiswarm(&["logs", name]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "mpiswarm logs {name}: {}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains(&format!("ranks: {RANKS}")), "pi ran on {RANKS} ranks: {text}");
    let ranks = text.lines().filter(|l| l.starts_with("rank ") && l.contains(" on ")).count();
    assert_eq!(ranks, RANKS as usize, "every rank reported its host: {text}");
}

fn pids_but(cluster: &Cluster, name: &str) -> Vec<(String, u32)> {
    cluster.components().into_iter().filter(|c| c.name != name).map(|c| (c.name, c.pid)).collect()
}

pub fn controller_kill_9(cluster: &Cluster) {
    let job = start(cluster, &long_job("fault-controller"));
    strike_after("controller_kill_9");
    let others = pids_but(cluster, "controller");
    let restarted = cluster.kill_9("controller");
    assert_eq!(pids_but(cluster, "controller"), others, "only the controller was restarted");
    // The job still runs held while the new controller takes over.
    let listen = restarted.args.iter().skip_while(|a| *a != "--listen").nth(1).expect("the controller's --listen");
    wait::until(Duration::from_secs(60), "the restarted controller is ready (leads, subscribed)", || {
        mpiswarm_testkit::http::get_ok(&format!("http://{listen}/readyz"))
    });
    cluster.release(&job.uid);
    let watched = succeeds_first_time(cluster, &job);
    cluster.assert_services_created_once(job.since, &[&watched]);
    cluster.delete_jobs(&[&job.name]);
}

pub fn offers_kill_9(cluster: &Cluster) {
    let job = start(cluster, &long_job("fault-offers"));
    let idle = cluster.nodes().iter().find(|n| !job.nodes.contains(&n.hostname)).expect("a node without the job");
    let framework = framework_id(cluster);
    strike_after("offers_kill_9");
    // Registered, and never back to the new offer layer while frozen.
    let frozen = format!("agent-{}", idle.hostname);
    cluster.signal(&frozen, "STOP");
    let thaw = Thaw { cluster, name: frozen.clone() };
    cluster.kill_9("offers");
    let serving = wait::until(Duration::from_secs(60), "the new offer layer serves", || {
        cluster.master_state().map(|_| Instant::now())
    });
    let back = wait::until(Duration::from_secs(60), "the controller's framework is connected again", || {
        let state = cluster.master_state()?;
        let fw = state["frameworks"].as_array().and_then(|f| f.iter().find(|f| f["id"] == framework.as_str()).cloned());
        match fw {
            Some(f) if f["connected"] == true => Ok(state),
            _ => Err(format!("frameworks: {}", state["frameworks"])),
        }
    });
    let took = serving.elapsed();
    println!("faults: framework {framework} back {:.2} s after the offer layer served again", took.as_secs_f64());
    assert_eq!(back["recovering"], true, "an agent was still awaited when the framework came back: {back}");
    assert!(
        !back["slaves"].as_array().into_iter().flatten().any(|a| a["hostname"] == idle.hostname.as_str()),
        "the frozen agent of {} had not come back: {}",
        idle.hostname,
        back["slaves"]
    );
    assert!(took <= FRAMEWORK_BACK_WITHIN, "framework back after {took:?}, more than {FRAMEWORK_BACK_WITHIN:?}");
    drop(thaw);
    cluster.release(&job.uid);
    let watched = succeeds_first_time(cluster, &job);
    cluster.assert_services_created_once(job.since, &[&watched]);
    all_agents_active(cluster);
    cluster.delete_jobs(&[&job.name]);
}

fn framework_id(cluster: &Cluster) -> String {
    wait::until(Duration::from_secs(60), "one framework is connected", || {
        let state = cluster.master_state()?;
        let ids: Vec<String> = state["frameworks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|f| f["connected"] == true)
            .filter_map(|f| f["id"].as_str().map(str::to_owned))
            .collect();
        match ids.as_slice() {
            [one] => Ok(one.clone()),
            _ => Err(format!("frameworks: {}", state["frameworks"])),
        }
    })
}

/// Every node's agent registered and connected.
fn all_agents_active(cluster: &Cluster) {
    wait::until(Duration::from_secs(120), "all 3 agents are active", || {
        let state = cluster.master_state()?;
        let active = state["slaves"].as_array().into_iter().flatten().filter(|a| a["active"] == true).count();
        if active == cluster.nodes().len() { Ok(()) } else { Err(format!("agents: {}", state["slaves"])) }
    });
}

/// The services an agent reports running.
fn running_services(cluster: &Cluster, node: &str) -> Result<BTreeSet<String>, String> {
    let state = cluster.agent_state(node)?;
    if state["subscribed"] != true {
        return Err(format!("the agent of {node} is not subscribed: {state}"));
    }
    Ok(state["tasks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["state"] == "TASK_RUNNING")
        .filter_map(|t| t["service"].as_str().map(str::to_owned))
        .collect())
}

pub fn agent_kill_9(cluster: &Cluster) {
    let job = start(cluster, &long_job("fault-agent"));
    let node = job.status.launcher_node().expect("the launcher's node").to_owned();
    let before = wait::until(Duration::from_secs(60), "the agent reports the job's tasks running", || {
        let services = running_services(cluster, &node)?;
        if services.len() == 2 { Ok(services) } else { Err(format!("{services:?}")) }
    });
    strike_after("agent_kill_9");
    let name = format!("agent-{node}");
    let others = pids_but(cluster, &name);
    cluster.kill_9(&name);
    assert_eq!(pids_but(cluster, &name), others, "only the agent of {node} was restarted");
    wait::until(Duration::from_secs(60), "the restarted agent adopted the same services, running", || {
        let after = running_services(cluster, &node)?;
        if after == before { Ok(()) } else { Err(format!("{after:?}, before the kill {before:?}")) }
    });
    cluster.release(&job.uid);
    let watched = succeeds_first_time(cluster, &job);
    cluster.assert_services_created_once(job.since, &[&watched]);
    cluster.delete_jobs(&[&job.name]);
}

pub fn apiserver_kill_9(cluster: &Cluster) {
    let job = start(cluster, &long_job("fault-apiserver"));
    strike_after("apiserver_kill_9");
    let controller = cluster.component("controller");
    cluster.kill_9("apiserver");
    // Created after the restart: the controller learns of it only through a resumed watch.
    let probe = Job::pi("fault-apiserver-probe", 1, RANK_CPUS, SAMPLES);
    let probe_uid = wait::until(Duration::from_secs(60), "the API server takes a new job", || {
        let out = cluster.kubectl_with(&["apply", "-f", "-"], Some(&probe.manifest()));
        if out.status.success() {
            cluster.job(&probe.name).map(|s| s.uid().to_owned()).ok_or("not readable yet".to_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    });
    let probed = cluster.watch_job(&probe.name, &probe_uid, JOB_DEADLINE);
    assert_eq!(probed.status.phase(), "Succeeded", "the job created after the restart: {}", probed.status.0["status"]);
    cluster.release(&job.uid);
    let watched = succeeds_first_time(cluster, &job);
    let st = &watched.status.0["status"];
    assert!(st["completionTime"].is_string() && st["launcher"]["exitCode"] == 0, "the status converged: {st}");
    cluster.assert_services_created_once(job.since, &[&watched, &probed]);
    let now = cluster.component("controller");
    assert_eq!((now.pid, now.restarts), (controller.pid, controller.restarts), "the controller itself never restarted");
    cluster.delete_jobs(&[&job.name, &probe.name]);
}

/// Kills the container of a node the job runs on (not the manager, whose
/// engine every agent goes through) at a random moment; it is started again
/// when the returned guard drops. Then, within [`LOST_WITHIN`], its tasks
/// must be LOST at the offer layer and the job's status must say NodeLost,
/// naming the node Swarm marked down; and its agent must be withdrawn.
fn kill_a_node_of<'a>(cluster: &'a Cluster, job: &Started, case: &str) -> Revive<'a> {
    let manager = cluster.manager().hostname.clone();
    let victim = job.nodes.iter().find(|n| **n != manager).expect("the job uses a worker node");
    let node = cluster.node(victim).clone();
    let agent_id = cluster.agent_id(&node.hostname).expect("the victim's agent is registered");
    // A node killed before (by an earlier case) left LOST tasks of the same agent id.
    let lost_before = lost_tasks(&cluster.master_state().unwrap_or_else(|e| panic!("{e}")), &agent_id);
    strike_after(case);
    let mut kill = Command::new("docker");
    kill.args(["kill", &node.container]);
    let out = mpiswarm_testkit::output_within(kill, None, Duration::from_secs(60));
    let killed = Instant::now();
    assert!(out.status.success(), "docker kill {}: {}", node.container, String::from_utf8_lossy(&out.stderr));
    println!("faults: node {} ({}) killed", node.hostname, node.container);
    let revive = Revive { cluster, node: node.clone() };
    // Each moment is taken when first seen: the NodeLost reason lasts only
    // until the restarted gang runs.
    let (mut lost, mut noticed) = (None, None);
    let what = "the offer layer has the lost node's tasks LOST and the job's status says NodeLost";
    let (lost, (noticed, message)) = wait::until(Duration::from_secs(120), what, || {
        if lost.is_none() && !lost_tasks(&cluster.master_state()?, &agent_id).is_subset(&lost_before) {
            lost = Some(killed.elapsed());
        }
        if noticed.is_none() {
            let status = cluster.job(&job.name).ok_or("the MpiJob is gone")?;
            noticed = node_lost_message(&status).map(|m| (killed.elapsed(), m));
        }
        match (lost, &noticed) {
            (Some(l), Some(n)) => Ok((l, n.clone())),
            _ => Err(format!("TASK_LOST after {lost:?}, NodeLost in the status: {noticed:?}")),
        }
    });
    println!(
        "faults: {} killed -> its tasks LOST in {:.1} s, NodeLost in the MpiJob's status in {:.1} s ({message})",
        node.hostname,
        lost.as_secs_f64(),
        noticed.as_secs_f64()
    );
    assert!(lost <= LOST_WITHIN, "tasks of {} went LOST after {lost:?}, more than {LOST_WITHIN:?}", node.hostname);
    assert!(noticed <= LOST_WITHIN, "NodeLost in the status after {noticed:?}, more than {LOST_WITHIN:?}");
    assert!(message.contains(&node.hostname), "the condition names the lost node {}: {message}", node.hostname);
    assert!(
        message.contains("is down") || message.contains("is gone; its engine refuses connections"),
        "and says why (Swarm marked it down, or its engine is gone): {message}"
    );
    // Nothing of the lost node is offered while it is down.
    let withdrawn = wait::until(LOST_WITHIN, "the lost node's agent is withdrawn", || {
        let state = cluster.master_state()?;
        let agent = state["slaves"].as_array().into_iter().flatten().find(|a| a["hostname"] == node.hostname.as_str());
        match agent {
            Some(a) if a["active"] == false => Ok(a.clone()),
            _ => Err(format!("agents: {}", state["slaves"])),
        }
    });
    assert_eq!(withdrawn["offered_resources"]["cpus"].as_f64().unwrap_or(0.0), 0.0, "{withdrawn}");
    revive
}

/// The ids of the tasks on agent `agent_id` that the offer layer has LOST
/// (not those its agent refused to launch, REASON_AGENT_DRAINING).
fn lost_tasks(state: &serde_json::Value, agent_id: &str) -> BTreeSet<String> {
    let tasks = state["completed_tasks"].as_array().into_iter().flatten();
    tasks
        .filter(|t| t["state"] == "TASK_LOST" && (t["agent_id"]["value"] == agent_id || t["agent_id"] == agent_id))
        // A launch the lost node's agent refused started nothing: not a loss.
        .filter(|t| t["reason"] != "REASON_AGENT_DRAINING")
        .map(|t| t["task_id"].to_string())
        .collect()
}

/// The message of the job's condition whose reason is NodeLost, if any.
fn node_lost_message(status: &Status) -> Option<String> {
    let conditions = status.0["status"]["conditions"].as_array()?;
    let lost = conditions.iter().find(|c| c["reason"] == "NodeLost")?;
    Some(lost["message"].as_str().unwrap_or_default().to_owned())
}

/// Starts a killed node again and waits until Swarm and its agent have it back.
struct Revive<'a> {
    cluster: &'a Cluster,
    node: Node,
}

impl Drop for Revive<'_> {
    fn drop(&mut self) {
        let mut start = Command::new("docker");
        start.args(["start", &self.node.container]);
        let out = mpiswarm_testkit::output_within(start, None, Duration::from_secs(60));
        assert!(out.status.success(), "docker start {}: {}", self.node.container, String::from_utf8_lossy(&out.stderr));
        let host = self.node.hostname.clone();
        wait::until(Duration::from_secs(180), &format!("{host} is Ready in the swarm again"), || {
            let out = self
                .cluster
                .exec(self.cluster.manager(), &["docker", "node", "ls", "--format", "{{.Hostname}} {{.Status}}"]);
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            if text.lines().any(|l| l == format!("{host} Ready")) { Ok(()) } else { Err(text) }
        });
        all_agents_active(self.cluster);
    }
}

/// The MpiJob's Events with reason `reason`: their notes.
fn event_notes(cluster: &Cluster, job: &str, reason: &str) -> Vec<String> {
    let out = cluster.kubectl(&["get", "events.events.k8s.io", "-o", "json"]);
    let events: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
    events["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["regarding"]["name"] == job && e["reason"] == reason)
        .filter_map(|e| e["note"].as_str().map(str::to_owned))
        .collect()
}

fn conditions_text(status: &Status) -> String {
    status.0["status"]["conditions"].to_string() + status.message()
}

pub fn node_lost_restarts_gang(cluster: &Cluster) {
    let job = start(cluster, &long_job("fault-node-lost").backoff_limit(1));
    let revive = kill_a_node_of(cluster, &job, "node_lost_restarts_gang");
    let node = revive.node.clone();
    second_gang_runs(cluster, &job);
    cluster.release(&job.uid);
    let watched = cluster.watch_job(&job.name, &job.uid, JOB_DEADLINE);
    let st = &watched.status;
    assert_eq!(st.phase(), "Succeeded", "{}: {}", job.name, st.0["status"]);
    assert_eq!(st.0["status"]["restarts"], 1, "one gang restart: {}", st.0["status"]);
    let second: Vec<_> = watched.tasks.iter().filter(|t| t.generation == "1").collect();
    assert!(!second.is_empty(), "Swarm ran a second generation: {:?}", watched.tasks);
    assert!(second.iter().all(|t| t.node != node.hostname), "the new gang avoided {}: {second:?}", node.hostname);
    assert!(
        !st.placement().contains_key(&node.hostname),
        "status.placement without {}: {:?}",
        node.hostname,
        st.placement()
    );
    every_rank_ran(cluster, &job.name);
    // The controller's Event for a gang restart is `Restarting`, its note
    // the cause: "NodeLost: ... node node3 was lost ...".
    let notes = event_notes(cluster, &job.name, "Restarting");
    assert!(
        notes.iter().any(|n| n.starts_with("NodeLost") && n.contains(&node.hostname)),
        "a Restarting Event says NodeLost and names {}: {notes:?}",
        node.hostname
    );
    assert!(conditions_text(st).contains(&node.hostname), "the status names {}: {}", node.hostname, st.0["status"]);
    drop(revive);
    cluster.delete_jobs(&[&job.name]);
    // The node is served again: a job that needs all three nodes runs.
    let everywhere = Job::pi("fault-node-back", 3, RANK_CPUS, SAMPLES).policy("spread").max_ranks_per_node(1);
    let uid = cluster.submit(&everywhere);
    let watched = cluster.watch_job(&everywhere.name, &uid, JOB_DEADLINE);
    assert_eq!(watched.status.phase(), "Succeeded", "{}: {}", everywhere.name, watched.status.0["status"]);
    watched.assert_placement(RANK_CPUS, &[1, 1, 1]);
    assert_eq!(watched.status.0["status"]["restarts"].as_i64().unwrap_or(0), 0, "{}", watched.status.0["status"]);
    cluster.delete_jobs(&[&everywhere.name]);
}

/// Waits until the job's gang of generation 1 runs: its status says so and
/// Swarm runs every task of it (a worker per node and the launcher), so a
/// release reaches every rank.
fn second_gang_runs(cluster: &Cluster, job: &Started) {
    let status = cluster.wait_job(&job.name, JOB_DEADLINE, "runs its second gang", |s| {
        s.phase() == "Running" && s.0["status"]["gangGeneration"] == 1
    });
    let expected = status.placement().len() + 1;
    wait::until(Duration::from_secs(120), "Swarm runs every task of the second gang", || {
        let tasks = cluster.swarm().job_tasks(&job.uid)?;
        let running = tasks.iter().filter(|t| t.generation == "1" && t.state == "running").count();
        if running == expected { Ok(()) } else { Err(format!("{running} of {expected} running: {tasks:?}")) }
    });
}

pub fn node_lost_fails(cluster: &Cluster) {
    let job = start(cluster, &long_job("fault-node-lost-0").backoff_limit(0));
    let revive = kill_a_node_of(cluster, &job, "node_lost_fails");
    let node = revive.node.clone();
    let watched = cluster.watch_job(&job.name, &job.uid, JOB_DEADLINE);
    let st = &watched.status;
    assert_eq!(st.phase(), "Failed", "{}: {}", job.name, st.0["status"]);
    let (_, reason, message) = st.condition("Failed").unwrap_or_default();
    assert!(
        message.contains(&node.hostname) && message.contains("lost"),
        "the Failed condition says {} was lost: {reason}: {message}",
        node.hostname
    );
    drop(revive);
    cluster.delete_jobs(&[&job.name]);
}

/// The burst: 30 jobs of 2 ranks x 0.1 cpu (and the 0.1-cpu launcher), 20 of
/// which fit the 3 nodes at a time; each runs pi (100 M darts) for some
/// seconds at its 0.1-cpu quota.
const BURST_JOBS: usize = 30;
const BURST_RANK_CPUS: f64 = 0.1;
const BURST_DEADLINE: Duration = Duration::from_secs(600);

pub fn node_killed_during_a_burst(cluster: &Cluster) {
    let names: Vec<String> = (0..BURST_JOBS).map(|i| format!("fault-burst-{i:02}")).collect();
    let manifests: Vec<String> =
        names.iter().map(|n| Job::pi(n, 2, BURST_RANK_CPUS, 5 * SAMPLES).backoff_limit(1).manifest()).collect();
    let started = Instant::now();
    cluster.apply(&manifests.join("\n"));
    let manager = cluster.manager().hostname.clone();
    strike_after("node_killed_during_a_burst");
    // The worker node running the most of the burst's tasks now.
    let victim = wait::until(Duration::from_secs(120), "a worker node runs tasks of the burst", || {
        let tasks = cluster.swarm().tasks()?;
        let mut by_node = std::collections::BTreeMap::<String, usize>::new();
        for t in tasks.iter().filter(|t| t.state == "running" && t.job_name.starts_with("fault-burst-")) {
            *by_node.entry(t.node.clone()).or_default() += 1;
        }
        by_node.remove(&manager);
        by_node.into_iter().max_by_key(|(_, n)| *n).map(|(node, _)| node).ok_or(format!("{tasks:?}"))
    });
    let node = cluster.node(&victim).clone();
    let agent_id = cluster.agent_id(&node.hostname).expect("the victim's agent is registered");
    let lost_before = lost_tasks(&cluster.master_state().unwrap_or_else(|e| panic!("{e}")), &agent_id);
    let mut kill = Command::new("docker");
    kill.args(["kill", &node.container]);
    let out = mpiswarm_testkit::output_within(kill, None, Duration::from_secs(60));
    assert!(out.status.success(), "docker kill {}: {}", node.container, String::from_utf8_lossy(&out.stderr));
    let killed_at = started.elapsed();
    println!("faults: node {} killed {:.1} s into the burst", node.hostname, killed_at.as_secs_f64());
    let revive = Revive { cluster, node: node.clone() };
    let jobs: Vec<Status> = wait::until(BURST_DEADLINE, "every job of the burst ended", || {
        let jobs: Vec<Status> = names.iter().filter_map(|n| cluster.job(n)).collect();
        let ended = jobs.iter().filter(|s| s.is_finished()).count();
        if jobs.len() == BURST_JOBS && ended == BURST_JOBS { Ok(jobs) } else { Err(format!("{ended} ended")) }
    });
    let took = started.elapsed();
    // The first gangs that lost a task on the killed node, by short uid.
    let lost_now = lost_tasks(&cluster.master_state().unwrap_or_else(|e| panic!("{e}")), &agent_id);
    let hit: BTreeSet<String> = lost_now
        .difference(&lost_before)
        .filter_map(|id| {
            // The task id as /master/state gives it (`{"value":"mpijob-..."}`).
            let rest = &id[id.find("mpijob-")? + "mpijob-".len()..];
            let (short, rest) = rest.split_once('-')?;
            rest.starts_with("g0-").then(|| short.to_owned())
        })
        .collect();
    let short = |uid: &str| uid.chars().filter(char::is_ascii_hexdigit).take(12).collect::<String>();
    let mut wrong = Vec::new();
    for st in &jobs {
        let restarts = st.0["status"]["restarts"].as_i64().unwrap_or(0);
        let was_hit = hit.contains(&short(st.uid()));
        let expected = i64::from(was_hit);
        if st.phase() != "Succeeded" || restarts != expected {
            wrong.push(format!(
                "{}: {} with {restarts} restarts (hit: {was_hit}): {}",
                st.0["metadata"]["name"],
                st.phase(),
                st.message()
            ));
        }
    }
    println!(
        "faults: burst of {BURST_JOBS} jobs ended in {:.1} s; {} hit by the loss of {} (restarted once), the others \
         not restarted; {} wrong",
        took.as_secs_f64(),
        hit.len(),
        node.hostname,
        wrong.len()
    );
    assert!(wrong.is_empty(), "jobs not as expected: {wrong:#?}");
    assert!(!hit.is_empty(), "the kill of {} hit no job (no first-gang task LOST there)", node.hostname);
    drop(revive);
    cluster.delete_jobs(&names.iter().map(String::as_str).collect::<Vec<_>>());
}
