//! The offer layer alone, for tests that must kill it with SIGKILL and for
//! running it without the rest of mpiswarm. `mpiswarm offers` is the same.

use clap::Parser;

#[derive(Parser)]
#[command(name = "mpiswarm-offers", about = "Mesos-compatible offer layer")]
struct Cli {
    #[command(flatten)]
    args: mpiswarm_offers::OffersArgs,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_env("MPISWARM_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    match mpiswarm_offers::run(Cli::parse().args).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mpiswarm-offers: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
