//! The images the suite needs on this machine's engine before `up` copies
//! them into the nodes. The suite never builds them (`make images` does,
//! and `up --no-build` is used so a missing one fails fast, by name).

use std::process::Command;
use std::time::Duration;

/// The rank image every job of the suite runs, and the node image of `up --nodes`.
pub const RANK: &str = "mpiswarm/openmpi:0.1.0";
pub const NODE: &str = "mpiswarm/node:0.1.0";
/// The stock Debian MPICH image of `examples/mpich.yaml` (`images build --mpich`).
pub const MPICH: &str = "mpiswarm/debian-mpich:trixie";
/// The image of the `mpiswarm` binary itself (the manifests' and the agents' stack file's).
pub const MPISWARM: &str = "mpiswarm/mpiswarm:0.1.0";

/// Panics naming the first image that is missing.
pub fn require() {
    for image in [RANK, NODE, MPICH] {
        let mut cmd = Command::new("docker");
        cmd.args(["image", "inspect", "-f", "{{.Id}}", image]);
        let out = mpiswarm_testkit::output_within(cmd, None, Duration::from_secs(60));
        assert!(out.status.success(), "{image} is missing on this machine: run `make images` first");
    }
}

/// Builds [`MPISWARM`] from the very binary under test (`images build
/// --mpiswarm`, cached: seconds when it is unchanged), so that components run
/// from the image run the code under test. Before `up --nodes`, which loads
/// it into every node.
pub fn build_mpiswarm() {
    let mut cmd = Command::new(crate::binary::mpiswarm());
    cmd.args(["images", "build", "--mpiswarm"]).current_dir(crate::repo());
    let out = mpiswarm_testkit::output_within(cmd, None, Duration::from_secs(600));
    let built = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "mpiswarm images build --mpiswarm: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(built.trim(), MPISWARM, "the image built");
}
