//! `mpiswarm images`: builds the rank image, the node image and the image of
//! the `mpiswarm` binary itself with no registry, and loads them into
//! Docker engines that run as containers (the nodes of a multi-node swarm on
//! one machine). The build recipe lives in this crate's `images/` and is
//! compiled into the binary, so a bare `mpiswarm` can build the image; the
//! rank bootstrap in it is the controller's own copy
//! ([`mpiswarm_controller::launch::BOOTSTRAP`]), the one the controller ships
//! with every task. This module only drives the recipe. It never pulls or
//! pushes.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use clap::{Args, Subcommand};
use tokio::process::Command;

/// The tag the agent and the controller use for MPI ranks by default.
pub const RANK_IMAGE: &str = concat!("mpiswarm/openmpi:", env!("CARGO_PKG_VERSION"));

/// The image of a swarm node in a container (`images build --node`).
pub const NODE_IMAGE: &str = concat!("mpiswarm/node:", env!("CARGO_PKG_VERSION"));

/// The image holding this `mpiswarm` binary (`images build --mpiswarm`): what
/// the manifests' Deployment and the agents' stack file run.
pub const MPISWARM_IMAGE: &str = concat!("mpiswarm/mpiswarm:", env!("CARGO_PKG_VERSION"));

/// The stock Debian image with Open MPI and sshd and nothing of mpiswarm's,
/// tagged by every rank image build (`examples/stock-image.yaml`).
pub const STOCK_IMAGE: &str = "mpiswarm/debian-openmpi:bookworm";

/// The stock Debian image with MPICH and sshd (`images build --mpich`):
/// nothing of mpiswarm's but the example program `pi` built against MPICH
/// (`examples/mpich.yaml`).
pub const MPICH_IMAGE: &str = "mpiswarm/debian-mpich:trixie";

/// The files of the build context, byte for byte: `build.sh` hashes them, so
/// an embedded copy and a checkout produce the same cache key. All but the
/// rank bootstrap are this crate's `images/`.
const RECIPE: &[(&str, &str)] = &[
    ("build.sh", include_str!("../images/build.sh")),
    ("Dockerfile", include_str!("../images/Dockerfile")),
    ("pi.c", include_str!("../images/pi.c")),
    (BOOTSTRAP_NAME, mpiswarm_controller::launch::BOOTSTRAP),
    ("mpiswarm-hpcc", include_str!("../images/mpiswarm-hpcc")),
    ("mpiswarm-node", include_str!("../images/mpiswarm-node")),
    ("sshd-mpiswarm.conf", include_str!("../images/sshd-mpiswarm.conf")),
    ("ssh-mpiswarm.conf", include_str!("../images/ssh-mpiswarm.conf")),
    ("hpccinf.txt", include_str!("../images/hpccinf.txt")),
];

/// The rank bootstrap's name in the build context (the Dockerfile copies it).
const BOOTSTRAP_NAME: &str = "mpiswarm-rank";

#[derive(Args, Debug, Clone)]
pub struct ImagesArgs {
    #[command(subcommand)]
    pub command: ImagesCommand,
}

#[derive(Subcommand, Debug, Clone)]
pub enum ImagesCommand {
    /// Build mpiswarm/openmpi:<version> (debootstrap + docker import + Dockerfile).
    ///
    /// Takes seconds when nothing changed: the image carries the hash of its
    /// inputs, and the debootstrap rootfs is cached under /var/cache/mpiswarm.
    Build {
        /// Tag to build (`--version` belongs to the binary).
        #[arg(long, default_value = env!("CARGO_PKG_VERSION"))]
        tag: String,
        /// Rebuild the image even if its inputs did not change (the rootfs cache is kept).
        #[arg(long)]
        force: bool,
        /// Build mpiswarm/node:<version> instead: a Docker engine to run as a
        /// swarm node inside a container, for a multi-node swarm on one machine.
        #[arg(long, conflicts_with_all = ["mpiswarm", "mpich"])]
        node: bool,
        /// Build mpiswarm/debian-mpich:trixie instead: stock Debian with
        /// MPICH and sshd, and the example program pi built against MPICH.
        #[arg(long, conflicts_with = "mpiswarm")]
        mpich: bool,
        /// Build mpiswarm/mpiswarm:<version> instead: this very binary on the
        /// rank image's runtime rootfs, for manifests/ and the agents' stack.
        #[arg(long)]
        mpiswarm: bool,
    },
    /// Copy an image into Docker engines running inside containers
    /// (`docker save | docker exec -i NODE docker load`).
    Load {
        /// Container name or id of a node; repeat for several nodes.
        #[arg(long = "into", required = true)]
        nodes: Vec<String>,
        /// Image to copy.
        #[arg(long, default_value = RANK_IMAGE)]
        image: String,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum ImagesError {
    #[error("could not prepare the build context in {dir}: {source}")]
    Context { dir: PathBuf, source: std::io::Error },
    #[error("could not run `{command}`: {source} (is it installed and on PATH?)")]
    Spawn { command: String, source: std::io::Error },
    #[error("`{command}` failed with {status}")]
    Failed { command: String, status: std::process::ExitStatus },
    #[error("cannot find this mpiswarm binary to put it into the image: {0}")]
    CurrentExe(std::io::Error),
}

pub async fn run(args: ImagesArgs) -> Result<(), ImagesError> {
    match args.command {
        ImagesCommand::Build { tag, force, mpiswarm: true, .. } => {
            println!("{}", build_mpiswarm(&tag, force).await?);
        }
        ImagesCommand::Build { tag, force, mpich: true, .. } => {
            println!("{}", run_recipe(&tag, force, &["--mpich"]).await?);
        }
        ImagesCommand::Build { tag, force, node, mpich: false, mpiswarm: false } => {
            let image = build(&tag, force, node).await?;
            println!("{image}");
        }
        ImagesCommand::Load { nodes, image } => {
            for node in &nodes {
                load_into(&[image.as_str()], node).await?;
                tracing::info!(%image, %node, "image loaded");
            }
        }
    }
    Ok(())
}

/// Builds the rank image (or with `node`, the node image) tagged `version`
/// and returns its name.
pub async fn build(version: &str, force: bool, node: bool) -> Result<String, ImagesError> {
    let what: &[&str] = if node { &["--node"] } else { &[] };
    run_recipe(version, force, what).await
}

/// Builds mpiswarm/mpiswarm:`version` holding the running binary (copied
/// as it is: the image has exactly what runs here) and returns its name.
/// Cached on the binary's hash, so an unchanged binary costs a hash.
pub async fn build_mpiswarm(version: &str, force: bool) -> Result<String, ImagesError> {
    let binary = std::env::current_exe().map_err(ImagesError::CurrentExe)?;
    let binary = binary.to_str().ok_or_else(|| {
        ImagesError::CurrentExe(std::io::Error::other(format!("the path {} is not UTF-8", binary.display())))
    })?;
    run_recipe(version, force, &["--mpiswarm", binary]).await
}

/// Runs the embedded `build.sh` with `what` (its options choosing the image).
async fn run_recipe(version: &str, force: bool, what: &[&str]) -> Result<String, ImagesError> {
    let context = tempfile::tempdir().map_err(|source| ImagesError::Context { dir: std::env::temp_dir(), source })?;
    write_recipe(context.path())?;
    let script = context.path().join("build.sh");
    let mut command = Command::new("bash");
    command.arg(&script).arg(version).args(what);
    if force {
        command.arg("--force");
    }
    command.stderr(Stdio::inherit()).stdout(Stdio::piped());
    let describe = format!("bash {} {version}", script.display());
    let output = command.output().await.map_err(|source| ImagesError::Spawn { command: describe.clone(), source })?;
    if !output.status.success() {
        return Err(ImagesError::Failed { command: describe, status: output.status });
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

fn write_recipe(dir: &Path) -> Result<(), ImagesError> {
    for (name, text) in RECIPE {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|source| ImagesError::Context { dir: dir.to_owned(), source })?;
    }
    Ok(())
}

/// `docker save IMAGE... | docker exec -i NODE docker load`, streamed so a
/// 300 MB image never sits in memory. Images saved together carry the
/// layers they share once: the rank image, the stock Open MPI, MPICH and
/// mpiswarm images are 496 MB in one stream and 894 MB in four (one node
/// loaded them in 12 s instead of 17 s).
pub async fn load_into(images: &[&str], node: &str) -> Result<(), ImagesError> {
    let save_cmd = format!("docker save {}", images.join(" "));
    let mut save = Command::new("docker")
        .arg("save")
        .args(images)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|source| ImagesError::Spawn { command: save_cmd.clone(), source })?;
    let pipe: Stdio = save
        .stdout
        .take()
        .ok_or_else(|| std::io::Error::other("the child has no stdout pipe"))
        .and_then(TryInto::try_into)
        .map_err(|source| ImagesError::Spawn { command: save_cmd.clone(), source })?;
    let load_cmd = format!("docker exec -i {node} docker load");
    let load =
        Command::new("docker").args(["exec", "-i", node, "docker", "load"]).stdin(pipe).stdout(Stdio::null()).status();
    let (saved, loaded) = tokio::join!(save.wait(), load);
    let saved = saved.map_err(|source| ImagesError::Spawn { command: save_cmd.clone(), source })?;
    let loaded = loaded.map_err(|source| ImagesError::Spawn { command: load_cmd.clone(), source })?;
    if !saved.success() {
        return Err(ImagesError::Failed { command: save_cmd, status: saved });
    }
    if !loaded.success() {
        return Err(ImagesError::Failed { command: load_cmd, status: loaded });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    /// The `mpiswarm` binary propagates `--version` into every subcommand;
    /// an argument of that name would make clap panic at startup.
    #[derive(Parser)]
    #[command(name = "mpiswarm", version, propagate_version = true)]
    struct Binary {
        #[command(subcommand)]
        command: Sub,
    }

    #[derive(clap::Subcommand)]
    enum Sub {
        Images(ImagesArgs),
        Agent(mpiswarm_agent::AgentArgs),
    }

    #[test]
    fn the_subcommands_fit_a_binary_that_propagates_version() {
        Binary::command().debug_assert();
        let parsed = Binary::try_parse_from(["mpiswarm", "images", "build", "--tag", "9.9", "--node"]).unwrap();
        let Sub::Images(ImagesArgs { command: ImagesCommand::Build { tag, node, force, mpiswarm, mpich } }) =
            parsed.command
        else {
            panic!("parsed as something else");
        };
        assert_eq!((tag.as_str(), node, force, mpiswarm, mpich), ("9.9", true, false, false, false));
        for pair in [["--node", "--mpiswarm"], ["--node", "--mpich"], ["--mpich", "--mpiswarm"]] {
            let both = Binary::try_parse_from(["mpiswarm", "images", "build", pair[0], pair[1]]);
            assert!(both.is_err(), "one image at a time: {pair:?}");
        }
    }

    #[test]
    fn every_file_of_the_images_directory_is_embedded() {
        let images = Path::new(env!("CARGO_MANIFEST_DIR")).join("images");
        let listed: std::collections::BTreeSet<_> = RECIPE.iter().map(|(n, _)| n.to_string()).collect();
        let mut sources: std::collections::BTreeSet<_> = std::fs::read_dir(&images)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != "README.md")
            .collect();
        assert!(!sources.contains(BOOTSTRAP_NAME), "the rank bootstrap has one home, the controller's; not images/");
        sources.insert(BOOTSTRAP_NAME.to_owned());
        assert_eq!(listed, sources, "every file of images/ (README.md excepted) and the bootstrap must be embedded");
    }
}
