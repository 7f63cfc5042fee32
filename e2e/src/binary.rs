//! Where the suite's `mpiswarm` executable comes from: `MPISWARM_BIN` if
//! set, else the one `$CARGO build -p mpiswarm --bin mpiswarm` reports, built
//! once per test process. A crate cannot name another package's binary
//! (`CARGO_BIN_EXE_*` covers only its own), and guessing `target/debug/`
//! could run a stale build; asking cargo gives the fresh path.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

/// Building mpiswarm from scratch on a 2-core machine takes minutes; when
/// `make images` ran first (as in `make test`) it is a no-op.
const BUILD_DEADLINE: Duration = Duration::from_secs(1500);

/// The `mpiswarm` executable every test runs.
pub fn mpiswarm() -> &'static PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| match std::env::var_os("MPISWARM_BIN") {
        Some(path) => PathBuf::from(path),
        None => build(),
    })
}

/// `cargo build` with JSON messages; the `executable` of the mpiswarm bin
/// artifact. Cargo releases its build-directory lock before it runs test
/// binaries, so this nested build does not wait on the `cargo test` that
/// started us.
fn build() -> PathBuf {
    // Cargo sets CARGO for the processes it runs, tests included.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "-p", "mpiswarm", "--bin", "mpiswarm", "--message-format=json"]);
    cmd.current_dir(crate::repo());
    let out = mpiswarm_testkit::output_within(cmd, None, BUILD_DEADLINE);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "building mpiswarm failed:\n{}", String::from_utf8_lossy(&out.stderr));
    executable(&stdout).unwrap_or_else(|| panic!("cargo reported no mpiswarm executable:\n{stdout}"))
}

/// The last `compiler-artifact` message of the `mpiswarm` bin target names its executable.
fn executable(messages: &str) -> Option<PathBuf> {
    messages
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "mpiswarm")
        .filter(|m| m["target"]["kind"].as_array().is_some_and(|k| k.iter().any(|k| k == "bin")))
        .filter_map(|m| m["executable"].as_str().map(PathBuf::from))
        .next_back()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bin_artifact_names_the_executable() {
        let messages = r#"{"reason":"compiler-artifact","target":{"name":"mpiswarm_crds","kind":["lib"]},"executable":null}
not json
{"reason":"compiler-artifact","target":{"name":"mpiswarm","kind":["bin"]},"executable":"/t/debug/mpiswarm"}
{"reason":"build-finished","success":true}"#;
        assert_eq!(executable(messages), Some(PathBuf::from("/t/debug/mpiswarm")));
        assert_eq!(executable(r#"{"reason":"build-finished","success":true}"#), None);
    }
}
