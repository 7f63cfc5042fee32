//! The `mpiswarm` binary: one executable for every component, in the spirit
//! of k3s. Each subcommand lives in a library crate (the components in
//! theirs, the local-stack tooling `images`, `up` and `down` in
//! `mpiswarm-stack`); this file only parses arguments, sets up logging and
//! hands over. It owns no logic of its own.

use clap::{Parser, Subcommand};

/// mimalloc, not glibc's malloc: glibc keeps what a burst freed in its
/// per-thread arenas, so the controller's resident set after 10,000 gangs
/// were placed stayed at the burst's peak (658 MiB, of which 123 MiB live:
/// `malloc_trim` brought it there); mimalloc returns freed pages to the
/// system. `cli/benches/controller.rs` measures it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod logs;
mod run;
mod version;

/// Run MPI jobs as containers on Docker Swarm.
///
/// An `MpiJob` (mpiswarm.io/v1alpha1) is applied with kubectl; a controller
/// gets resources from a Mesos-compatible offer layer, places the ranks with
/// a pack/spread policy engine, and node agents run them as Swarm services.
#[derive(Parser, Debug)]
#[command(name = "mpiswarm", version = version::VERSION, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the MpiJob CustomResourceDefinition as YAML (apply it with kubectl).
    ///
    /// The committed crds/mpijob.yaml is this output, and with --offer-registry
    /// manifests/11-offer-registry-crd.yaml; tests fail if they drift.
    Crd {
        /// Print the offer layer's instead: OfferRegistry, where replicas run
        /// with --lease-name keep their registry.
        #[arg(long)]
        offer_registry: bool,
    },
    /// Print version information for this binary and the APIs it speaks.
    Version,
    /// Run the embedded Kubernetes-compatible API server (writes DIR/kubeconfig).
    Apiserver(mpiswarm_apiserver::ApiserverArgs),
    /// Build the rank image locally (no registry) or load it into nodes in containers.
    Images(mpiswarm_stack::ImagesArgs),
    /// Run the node agent: register this Docker Swarm node with the offer layer and run its tasks as services.
    Agent(mpiswarm_agent::AgentArgs),
    /// Run the Mesos-compatible offer layer (v1 scheduler API, agent API, DRF allocator).
    Offers(mpiswarm_offers::OffersArgs),
    /// Run the MpiJob controller: reconcile MpiJobs and launch them as a Mesos framework of the offer layer.
    Controller(mpiswarm_controller::ControllerArgs),
    /// Run the whole one-machine stack in this process (API server, offer layer, agent, controller) until Ctrl-C.
    Up(mpiswarm_stack::UpArgs),
    /// Stop the local stack and remove every Swarm object mpiswarm made on this engine.
    Down(mpiswarm_stack::DownArgs),
    /// Submit an MpiJob (server-side apply) and follow it to its end; exit 0 on Succeeded.
    Run(run::RunArgs),
    /// Show jobs: phase, placement, conditions and (for one job) its last events.
    Status(run::StatusArgs),
    /// Print a job's output (the launcher's, or a worker's), while it runs and after it ended.
    Logs(logs::LogsArgs),
    /// Manage the teams of the local stack: `tenant add NAME` gives one a token, namespace, roles, RBAC and kubeconfig.
    Tenant(mpiswarm_stack::tenant::TenantArgs),
}

fn main() -> anyhow::Result<()> {
    init_tracing();
    let cli = Cli::parse();
    match cli.command {
        Command::Crd { offer_registry: false } => print!("{}", mpiswarm_crds::crd_yaml()?),
        Command::Crd { offer_registry: true } => {
            print!("{}", serde_yaml::to_string(&mpiswarm_offers::registry_api::crd())?)
        }
        Command::Version => version::print(),
        Command::Apiserver(args) => block_on(mpiswarm_apiserver::run(args))?,
        Command::Images(args) => block_on(mpiswarm_stack::images::run(args))?,
        Command::Agent(args) => block_on(mpiswarm_agent::run(args))?,
        Command::Offers(args) => block_on(mpiswarm_offers::run(args))?,
        Command::Controller(args) => block_on(mpiswarm_controller::run(args))?,
        Command::Up(args) => tokio::runtime::Runtime::new()?.block_on(mpiswarm_stack::up::run(args))?,
        Command::Down(args) => mpiswarm_stack::down::run(args)?,
        Command::Run(args) => {
            let code = tokio::runtime::Runtime::new()?.block_on(run::run(args))?;
            std::process::exit(code);
        }
        Command::Status(args) => tokio::runtime::Runtime::new()?.block_on(run::status(args))?,
        Command::Logs(args) => tokio::runtime::Runtime::new()?.block_on(logs::run(args))?,
        Command::Tenant(args) => tokio::runtime::Runtime::new()?.block_on(mpiswarm_stack::tenant::run(args))?,
    }
    Ok(())
}

/// Runs one long-lived component on a multi-threaded runtime until it returns.
fn block_on<E>(component: impl Future<Output = Result<(), E>>) -> anyhow::Result<()>
where
    E: std::error::Error + Send + Sync + 'static,
{
    Ok(tokio::runtime::Runtime::new()?.block_on(component)?)
}

/// Logs go to stderr, coloured only on a terminal: redirected into a file
/// (`up.log`, `up --split`'s `logs/NAME.log`, a test's log) or a pipe they
/// are read in pagers and editors, where ANSI escapes are noise.
fn init_tracing() {
    use std::io::IsTerminal;
    use tracing_subscriber::{EnvFilter, fmt};
    let filter = EnvFilter::try_from_env("MPISWARM_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    fmt().with_env_filter(filter).with_ansi(std::io::stderr().is_terminal()).with_writer(std::io::stderr).init();
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Swarm templates such as `{{.Node.ID}}` reach a process only through
    /// its environment, so every flag of a long-running component must be
    /// settable from a `MPISWARM_...` (or Kubernetes') environment variable.
    #[test]
    fn every_flag_of_every_component_has_an_environment_variable() {
        let cli = Cli::command();
        let mut missing = Vec::new();
        let mut seen = 0;
        for name in ["agent", "offers", "controller", "apiserver"] {
            let sub = cli.find_subcommand(name).unwrap_or_else(|| panic!("no subcommand {name}"));
            for arg in sub.get_arguments() {
                let id = arg.get_id().as_str();
                if matches!(id, "help" | "version") || arg.is_positional() {
                    continue;
                }
                seen += 1;
                match arg.get_env() {
                    Some(env) if env.to_str().is_some_and(|e| e.starts_with("MPISWARM_") || e == "POD_NAMESPACE") => {}
                    other => missing.push(format!("mpiswarm {name} --{id} (env: {other:?})")),
                }
            }
        }
        assert!(seen > 40, "only {seen} flags walked: the walk is broken");
        assert!(missing.is_empty(), "flags without an environment variable: {missing:#?}");
    }
}
