//! `mpiswarm up --split`: the stack of `up`, but each component runs as its
//! own child process of this binary (`mpiswarm apiserver`, `offers`, one
//! `agent` per node, `controller`), so that one can be killed alone, as a
//! crash would, while the others keep running.
//!
//! This module owns those processes: it starts them in order, each once the
//! one before serves; records every pid and command line in DATA/stack.json
//! and their output in DATA/logs/NAME.log; starts a component that exited
//! again with the same command line (same port, same data dir, so the same
//! registry, framework id and agent ids); and on Ctrl-C or SIGTERM stops
//! them in the reverse order. It never speaks a component's API beyond
//! waiting for it to serve, and keeps no state a component needs.

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use crate::error::{FileAction, Result, StackError, file, with_causes};
use tokio::process::{Child, Command};
use tokio::time::Instant;

use crate::components::{self as up, UpArgs, say};
use crate::error::text;
use crate::restarts::Restarts;
use crate::stack_file::{self as stack, Component, StackFile};

/// How long a component has to serve after it starts.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a component has to stop after SIGTERM before it gets SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// The controller's identity in its Lease: the same across restarts, so a
/// restarted controller takes its own Lease back without waiting it out.
const CONTROLLER_IDENTITY: &str = "mpiswarm-up";

struct Proc {
    component: Component,
    child: Child,
    restarts: Restarts,
}

impl Proc {
    fn spawn(name: &str, args: Vec<String>, logs: &Path) -> Result<Self> {
        let component =
            Component { name: name.to_owned(), pid: 0, args, log: logs.join(format!("{name}.log")), restarts: 0 };
        let mut proc = Proc { child: start(&component)?, component, restarts: Restarts::new() };
        proc.component.pid = proc.child.id().ok_or_else(|| proc.no_pid())?;
        Ok(proc)
    }

    fn restart(&mut self) -> Result<()> {
        self.child = start(&self.component)?;
        self.component.pid = self.child.id().ok_or_else(|| self.no_pid())?;
        self.component.restarts += 1;
        self.restarts.started();
        Ok(())
    }

    /// Fails naming the component and its last lines if it has exited.
    fn check_alive(&mut self) -> Result<()> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(StackError::ExitedAtStart {
                component: self.component.name.clone(),
                status,
                log: self.component.log.clone(),
                tail: tail(&self.component.log),
            }),
            Err(source) => Err(StackError::CannotCheck { component: self.component.name.clone(), source }),
        }
    }

    /// A child that exited before its pid was read.
    fn no_pid(&self) -> StackError {
        StackError::NoPid { component: self.component.name.clone(), log: self.component.log.clone() }
    }
}

/// Runs `mpiswarm ARGS` as a child in its own process group (so a Ctrl-C
/// in the terminal reaches `up` only, which stops the children in order),
/// its output appended to its log.
fn start(c: &Component) -> Result<Child> {
    let exe = std::env::current_exe().map_err(StackError::CurrentExe)?;
    let log = file(FileAction::Opening, &c.log, std::fs::OpenOptions::new().create(true).append(true).open(&c.log))?;
    let err = file(FileAction::Opening, &c.log, log.try_clone())?;
    Command::new(exe)
        .args(&c.args)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .process_group(0)
        .kill_on_drop(false)
        .spawn()
        .map_err(|source| StackError::Spawn { command: c.args.clone(), source })
}

fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// The value after `flag` in a command line.
fn flag<'a>(cli: &'a [String], flag: &'static str) -> Result<&'a str> {
    cli.iter()
        .position(|a| a == flag)
        .and_then(|i| cli.get(i + 1))
        .map(String::as_str)
        .ok_or_else(|| StackError::NoFlag { flag, command: cli.to_vec() })
}

pub async fn run(args: &UpArgs, dir: &Path, before: Option<StackFile>) -> Result<()> {
    if let Some(before) = &before {
        let dir = dir.to_owned();
        let before = before.clone();
        tokio::task::spawn_blocking(move || stop_leftovers(&dir, &before)).await?;
    }
    let logs = dir.join("logs");
    file(FileAction::Creating, &logs, std::fs::create_dir_all(&logs))?;
    let mut procs = Vec::new();
    let file = match start_all(args, dir, before.as_ref(), &logs, &mut procs).await {
        Ok(file) => file,
        Err(e) => {
            stop_all(&mut procs).await;
            return Err(e);
        }
    };
    up::say_ready(&file, dir);
    let outcome = supervise(dir, file, &mut procs).await;
    say("stopping every component (running tasks keep running; `mpiswarm up --split` again picks them up)");
    stack::remove(dir);
    stop_all(&mut procs).await;
    outcome
}

/// Starts the components in order, each once the one before serves.
async fn start_all(
    args: &UpArgs,
    dir: &Path,
    before: Option<&StackFile>,
    logs: &Path,
    procs: &mut Vec<Proc>,
) -> Result<StackFile> {
    let listen = stack::reuse_or_any(before.and_then(|b| stack::port_of(&b.apiserver)));
    let tokens = crate::tenant::ensure_tokens_file(dir)?;
    let api_cli = vec![
        "apiserver".to_owned(),
        "--listen".into(),
        listen.to_string(),
        "--data-dir".into(),
        text(dir)?,
        "--token-auth-file".into(),
        text(&tokens)?,
    ];
    procs.push(Proc::spawn("apiserver", api_cli, logs)?);
    let kubeconfig = dir.join("kubeconfig");
    let apiserver = format!("https://{listen}");
    install_crd_when_serving(&kubeconfig, procs).await?;
    say(&format!("API server on {apiserver} (process {})", procs[0].component.pid));

    let offers_clis = if args.offers_replicas > 1 {
        crate::offers_identity::prepare(dir, &kubeconfig).await?;
        up::offers_replica_commands(args, dir, before)?
    } else {
        vec![("offers".to_owned(), up::offers_command(args, dir, before)?)]
    };
    let mut replicas = Vec::new();
    for (name, cli) in offers_clis {
        let url = format!("http://{}", flag(&cli, "--listen")?);
        procs.push(Proc::spawn(&name, cli, logs)?);
        replicas.push(url);
    }
    for url in &replicas {
        serving(&format!("{url}/health"), procs).await?;
    }
    let pids: Vec<String> = procs[1..].iter().map(|p| p.component.pid.to_string()).collect();
    say(&format!("offer layer on {} (process {})", replicas.join(", "), pids.join(", ")));
    let offers = replicas[0].clone();
    // Agents and the controller are given every replica.
    let masters = replicas.join(",");

    let commands = up::agent_commands(args, dir, &masters, before).await?;
    let count = commands.len();
    for (name, cli) in commands {
        procs.push(Proc::spawn(&name, cli, logs)?);
    }
    let operator = crate::credentials::read(dir, crate::credentials::OPERATOR)?;
    let agents =
        up::wait_for_agents(&replicas, &operator, count, &mut || procs.iter_mut().try_for_each(Proc::check_alive))
            .await?;
    up::say_agents(args, &agents);

    let controller = stack::reuse_or_any(before.map(|b| b.controller.port()));
    let logs_listen = stack::reuse_or_any(before.and_then(|b| b.controller_logs).map(|a| a.port()));
    let controller_cli = vec![
        "controller".to_owned(),
        "--kubeconfig".into(),
        text(&kubeconfig)?,
        "--master".into(),
        masters,
        "--listen".into(),
        controller.to_string(),
        "--logs-listen".into(),
        logs_listen.to_string(),
        "--identity".into(),
        CONTROLLER_IDENTITY.into(),
        "--lease-seconds".into(),
        up::LEASE_SECONDS.to_string(),
        "--master-credentials".into(),
        text(&crate::credentials::credential_file(dir, crate::credentials::CONTROLLER))?,
    ];
    procs.push(Proc::spawn("controller", controller_cli, logs)?);
    serving(&format!("http://{controller}/healthz"), procs).await?;
    say(&format!("controller on {controller} (process {})", procs.last().map_or(0, |p| p.component.pid)));

    let file = StackFile {
        pid: std::process::id(),
        kubeconfig,
        apiserver,
        offers,
        offers_replicas: if replicas.len() > 1 { replicas } else { Vec::new() },
        agents,
        controller,
        controller_logs: Some(logs_listen),
        operator_credential: Some(crate::credentials::credential_file(dir, crate::credentials::OPERATOR)),
        components: procs.iter().map(|p| p.component.clone()).collect(),
    };
    stack::write(dir, &file)?;
    Ok(file)
}

/// Installs the MpiJob CRD as soon as the API server takes it.
async fn install_crd_when_serving(kubeconfig: &Path, procs: &mut [Proc]) -> Result<()> {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        procs.iter_mut().try_for_each(Proc::check_alive)?;
        let attempt = async {
            let client = mpiswarm_controller::client(Some(kubeconfig))
                .await
                .map_err(|e| StackError::Client { kubeconfig: kubeconfig.to_owned(), source: Box::new(e) })?;
            up::install_crd(&client).await
        };
        match attempt.await {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() > deadline => {
                return Err(StackError::ApiServerNotServing { timeout: START_TIMEOUT, why: with_causes(&e) });
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Waits until `url` answers 200.
async fn serving(url: &str, procs: &mut [Proc]) -> Result<()> {
    let deadline = Instant::now() + START_TIMEOUT;
    let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().map_err(StackError::HttpClient)?;
    loop {
        procs.iter_mut().try_for_each(Proc::check_alive)?;
        match http.get(url).send().await {
            Ok(r) if r.status().is_success() => return Ok(()),
            Ok(r) if Instant::now() > deadline => {
                return Err(StackError::NotHealthy { url: url.to_owned(), status: r.status(), timeout: START_TIMEOUT });
            }
            Err(source) if Instant::now() > deadline => {
                return Err(StackError::NoAnswer { url: url.to_owned(), timeout: START_TIMEOUT, source });
            }
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Until Ctrl-C or SIGTERM: a component that exits is started again with
/// its command line, after a pause that grows while it keeps failing at
/// once, and DATA/stack.json gets its new pid.
async fn supervise(dir: &Path, mut file: StackFile, procs: &mut [Proc]) -> Result<()> {
    let shutdown = up::shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        let (i, status) = tokio::select! {
            _ = &mut shutdown => return Ok(()),
            ended = any_exit(procs) => ended,
        };
        let p = &mut procs[i];
        let (ran, wait) = p.restarts.stopped();
        say(&format!(
            "{} (process {}) exited ({}) after {:.1} s; starting it again in {} s",
            p.component.name,
            p.component.pid,
            status.map_or_else(|e| e.to_string(), |s| s.to_string()),
            ran.as_secs_f64(),
            wait.as_secs()
        ));
        tokio::select! {
            _ = &mut shutdown => return Ok(()),
            _ = tokio::time::sleep(wait) => {}
        }
        let p = &mut procs[i];
        p.restart()?;
        say(&format!("{} started again (process {})", p.component.name, p.component.pid));
        file.components = procs.iter().map(|p| p.component.clone()).collect();
        stack::write(dir, &file)?;
    }
}

/// The first component to exit, and how.
async fn any_exit(procs: &mut [Proc]) -> (usize, std::io::Result<ExitStatus>) {
    let waits = procs.iter_mut().map(|p| Box::pin(p.child.wait()));
    let (status, i, _) = futures::future::select_all(waits).await;
    (i, status)
}

/// Stops the components in the reverse order of their start: SIGTERM, then
/// SIGKILL for one that has not stopped within [`STOP_TIMEOUT`]. The agents
/// stop together.
async fn stop_all(procs: &mut [Proc]) {
    let mut groups: Vec<Vec<&mut Proc>> = Vec::new();
    for p in procs.iter_mut().rev() {
        let agent = p.component.name.starts_with("agent");
        match groups.last_mut() {
            Some(g) if agent && g.first().is_some_and(|q| q.component.name.starts_with("agent")) => g.push(p),
            _ => groups.push(vec![p]),
        }
    }
    for group in groups {
        futures::future::join_all(group.into_iter().map(stop)).await;
    }
}

async fn stop(p: &mut Proc) {
    if matches!(p.child.try_wait(), Ok(Some(_))) {
        return;
    }
    signal(p.component.pid, "TERM");
    if tokio::time::timeout(STOP_TIMEOUT, p.child.wait()).await.is_err() {
        say(&format!("{} did not stop within {STOP_TIMEOUT:?} of SIGTERM; killing it", p.component.name));
        let _killed = p.child.kill().await;
    }
}

fn signal(pid: u32, name: &str) {
    let _sent = std::process::Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Stops the components a stack file lists that still run (their `up` was
/// killed, so nobody stopped them): SIGTERM, then SIGKILL after
/// [`STOP_TIMEOUT`]. Blocks; for `down`, or off the async workers.
pub fn stop_leftovers(dir: &Path, file: &StackFile) {
    let alive: Vec<&Component> = file.components.iter().filter(|c| c.is_alive()).collect();
    if alive.is_empty() {
        return;
    }
    let names: Vec<String> = alive.iter().map(|c| format!("{} ({})", c.name, c.pid)).collect();
    eprintln!("mpiswarm: stopping the components of {} left running: {}", dir.display(), names.join(", "));
    for c in &alive {
        signal(c.pid, "TERM");
    }
    let deadline = std::time::Instant::now() + STOP_TIMEOUT;
    while alive.iter().any(|c| c.is_alive()) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    for c in alive.iter().filter(|c| c.is_alive()) {
        signal(c.pid, "KILL");
    }
}
