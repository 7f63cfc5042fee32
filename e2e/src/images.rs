//! The images the suite needs on this machine's engine before `up` copies
//! them into the nodes. The suite never builds them (`make images` does,
//! and `up --no-build` is used so a missing one fails fast, by name).

use std::process::Command;
use std::time::Duration;

/// The rank image every job of the suite runs, and the node image of `up --nodes`.
pub const RANK: &str = "mpiswarm/openmpi:0.1.0";
pub const NODE: &str = "mpiswarm/node:0.1.0";

/// Panics naming the first image that is missing.
pub fn require() {
    for image in [RANK, NODE] {
        let mut cmd = Command::new("docker");
        cmd.args(["image", "inspect", "-f", "{{.Id}}", image]);
        let out = mpiswarm_testkit::output_within(cmd, None, Duration::from_secs(60));
        assert!(out.status.success(), "{image} is missing on this machine: run `make images` first");
    }
}
