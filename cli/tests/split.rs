//! `mpiswarm up --split` runs every component as its own child process:
//! DATA/stack.json lists them (apiserver, offers, agent, controller) with
//! their pids; `kill -9` of the offer layer alone leaves the others running,
//! `up` starts it again on the same port with the same registry (the agent
//! comes back under its agent id, the controller under its framework id),
//! and a job then runs to the end. With `up` itself killed, `mpiswarm down`
//! still stops every component it had started. Every component's log
//! (DATA/logs/NAME.log) is plain text, without ANSI escapes. Uses the local
//! engine as a single-node swarm; needs the rank image of `make images`.

mod up;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;
use up::Up;

const DEADLINE: Duration = Duration::from_secs(240);

fn run(cmd: Command) -> Output {
    up::run(cmd, DEADLINE)
}

fn stack(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("stack.json")).expect("stack.json");
    serde_json::from_str(&text).expect("stack.json is JSON")
}

/// name -> (pid, restarts, args)
fn components(dir: &Path) -> Vec<(String, u32, u64, Vec<String>)> {
    stack(dir)["components"]
        .as_array()
        .expect("components listed")
        .iter()
        .map(|c| {
            let args = c["args"].as_array().expect("args").iter().map(|a| a.as_str().unwrap().to_owned()).collect();
            (
                c["name"].as_str().unwrap().to_owned(),
                c["pid"].as_u64().unwrap() as u32,
                c["restarts"].as_u64().unwrap(),
                args,
            )
        })
        .collect()
}

fn alive(pid: u32) -> bool {
    // A zombie (reaped later by its parent) is not running.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

fn parent_of(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let after = stat.rsplit_once(") ").expect("stat format").1;
    after.split_whitespace().nth(1).and_then(|p| p.parse().ok()).expect("ppid")
}

fn kill_9(pid: u32) {
    let mut cmd = Command::new("kill");
    cmd.args(["-KILL", &pid.to_string()]);
    assert!(run(cmd).status.success(), "kill -9 {pid}");
}

fn until<T>(what: &str, started: Instant, mut check: impl FnMut() -> Option<T>) -> T {
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(started.elapsed() < DEADLINE, "{what} within {DEADLINE:?}");
        std::thread::sleep(Duration::from_millis(200)); // polling other processes' files and endpoints
    }
}

/// The offer layer's view, asked as the stack's operator: (agent ids,
/// framework ids of connected frameworks).
fn master_state(offers: &str, operator: Option<&(String, String)>) -> Option<(Vec<String>, Vec<String>)> {
    let body = mpiswarm_testkit::http::get_ok_as(&format!("{offers}/master/state"), operator).ok()?;
    let state: Value = serde_json::from_str(&body).ok()?;
    let ids = |key: &str, connected: bool| {
        state[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|x| !connected || x["connected"].as_bool() == Some(true))
            .filter_map(|x| x["id"].as_str().map(str::to_owned))
            .collect::<Vec<_>>()
    };
    Some((ids("slaves", false), ids("frameworks", true)))
}

#[test]
fn split_components_restart_alone_with_their_port_and_ids_and_down_stops_them_all() {
    let image = "mpiswarm/openmpi:0.1.0";
    let mut inspect = Command::new("docker");
    inspect.args(["image", "inspect", image]);
    assert!(run(inspect).status.success(), "image {image} is missing: run `make images` first");

    let started = Instant::now();
    let mut up = Up::start(&["--split"], DEADLINE);
    let dir = up.dir.clone();

    let before = components(&dir);
    let names: Vec<&str> = before.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(names, ["apiserver", "offers", "agent", "controller"], "{before:?}");
    for (name, pid, restarts, args) in &before {
        assert!(alive(*pid), "{name} runs");
        assert_eq!(parent_of(*pid), up.child.id(), "{name} is a child of up");
        assert_eq!((*restarts, args[0].as_str()), (0, name.as_str()), "{name} runs `mpiswarm {name}`");
    }
    let offers = stack(&dir)["offers"].as_str().expect("offers url").to_owned();
    let operator = mpiswarm_testkit::http::stack_operator(&stack(&dir)).expect("a readable operator credential");
    assert!(operator.is_some(), "up recorded the operator's credential");
    let anonymous = mpiswarm_testkit::http::get(&format!("{offers}/master/state")).expect("an answer");
    assert_eq!(anonymous.0, 401, "the offer layer of up authenticates its callers: {anonymous:?}");
    let (agents, frameworks) = until("the controller subscribed", started, || {
        master_state(&offers, operator.as_ref()).filter(|(a, f)| a.len() == 1 && f.len() == 1)
    });
    let agent_id = std::fs::read_to_string(dir.join("agent/agent_id")).expect("the agent's persisted id");
    assert_eq!(agents, [agent_id.trim()], "the agent registered under its persisted id");

    let (_, offers_pid, _, offers_args) = before[1].clone();
    kill_9(offers_pid);
    let restarted = until("up started the offer layer again", started, || {
        let now = components(&dir);
        (now[1].1 != offers_pid && now[1].2 == 1).then_some(now)
    });
    assert_eq!(restarted[1].3, offers_args, "the same command line: same port, same registry");
    for (name, pid, restarts, _) in restarted.iter().filter(|c| c.0 != "offers") {
        assert!(alive(*pid) && *restarts == 0, "{name} kept running while the offer layer was down");
    }
    assert_eq!(stack(&dir)["offers"].as_str(), Some(offers.as_str()), "the same address");
    let (agents_after, frameworks_after) =
        until("agent and framework back on the restarted offer layer", started, || {
            master_state(&offers, operator.as_ref()).filter(|(a, f)| a.len() == 1 && f.len() == 1)
        });
    assert_eq!((agents_after, frameworks_after), (agents, frameworks), "the same agent and framework ids");

    let out = up.mpiswarm(&["run", "examples/pi.yaml"]);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}\n{}", up.report());
    assert!(stdout.contains("pi: 3.1"), "{stdout}");

    // Each component's log, written for people, is plain text.
    for (name, ..) in &restarted {
        let log = std::fs::read_to_string(dir.join(format!("logs/{name}.log"))).expect("the component's log");
        assert!(log.contains(" INFO "), "logs/{name}.log holds {name}'s log:\n{log}");
        assert!(!log.contains("\x1b["), "logs/{name}.log holds ANSI escapes:\n{log}");
    }

    // `up` itself killed: its components run on, and down stops them all.
    kill_9(up.child.id());
    let _ = up.child.wait();
    assert!(restarted.iter().all(|c| alive(c.1)), "the components outlive up");
    let down = up.mpiswarm(&["down"]);
    assert!(down.status.success(), "{}", String::from_utf8_lossy(&down.stderr));
    let left: Vec<_> = restarted.iter().filter(|c| alive(c.1)).map(|c| &c.0).collect();
    assert!(left.is_empty(), "still running after down: {left:?}");
    assert!(!dir.join("stack.json").exists(), "down removes the stack file");
}
