//! The API server as a standalone process, for tests that need a real process
//! (kill -9 durability) and for benchmarks: the same code `mpiswarm apiserver` runs.

use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: mpiswarm_apiserver::ApiserverArgs,
}

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    if let Err(e) = mpiswarm_apiserver::run(Cli::parse().args).await {
        eprintln!("mpiswarm-apiserver: {e}");
        std::process::exit(1);
    }
}
