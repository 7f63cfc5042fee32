//! The node agent alone, for tests that must kill it with SIGKILL and for
//! running it on a node without the rest of mpiswarm. `mpiswarm agent` is the same.

use clap::Parser;

#[derive(Parser)]
#[command(name = "mpiswarm-agent", about = "mpiswarm node agent: Mesos tasks as Docker Swarm services")]
struct Cli {
    #[command(flatten)]
    args: mpiswarm_agent::AgentArgs,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_env("MPISWARM_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    match mpiswarm_agent::run(Cli::parse().args).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mpiswarm-agent: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
