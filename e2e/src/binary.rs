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
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(set_by_cargo_for_this_test) {
            cmd.env_remove(&name);
        }
    }
    cmd.current_dir(crate::repo());
    let out = mpiswarm_testkit::output_within(cmd, None, BUILD_DEADLINE);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "building mpiswarm failed:\n{}", String::from_utf8_lossy(&out.stderr));
    executable(&stdout).unwrap_or_else(|| panic!("cargo reported no mpiswarm executable:\n{stdout}"))
}

/// Variables cargo sets for the crate under test (not cargo configuration).
/// They must not reach the nested build: build scripts such as ring's ask
/// to rerun when `CARGO_PKG_NAME` or `CARGO_MANIFEST_DIR` change, and cargo
/// compares its own environment's values, so the nested build and the next
/// outer one would rebuild ring and everything above it, each undoing the other.
fn set_by_cargo_for_this_test(name: &str) -> bool {
    const PREFIXES: [&str; 5] = ["CARGO_PKG_", "CARGO_MANIFEST_", "CARGO_BIN_EXE_", "CARGO_CFG_", "CARGO_FEATURE_"];
    const NAMES: [&str; 6] = [
        "CARGO_CRATE_NAME",
        "CARGO_BIN_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "CARGO_RUSTC_CURRENT_DIR",
        "OUT_DIR",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p)) || NAMES.contains(&name)
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

    #[test]
    fn only_what_cargo_sets_for_the_test_is_kept_from_the_nested_build() {
        for name in ["CARGO_PKG_NAME", "CARGO_MANIFEST_DIR", "CARGO_BIN_EXE_mpiswarm", "OUT_DIR", "CARGO_CRATE_NAME"] {
            assert!(set_by_cargo_for_this_test(name), "{name}");
        }
        for name in ["CARGO_TARGET_DIR", "CARGO_HOME", "CARGO_PROFILE_DEV_DEBUG", "CARGO", "PATH", "RUSTUP_TOOLCHAIN"] {
            assert!(!set_by_cargo_for_this_test(name), "{name}");
        }
    }
}
