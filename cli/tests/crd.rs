//! The binary users run: `mpiswarm crd` prints exactly the committed CRDs, and
//! every subcommand explains itself under `--help`.

use std::process::Command;

fn mpiswarm(args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mpiswarm"));
    cmd.args(args);
    mpiswarm_testkit::output_within(cmd, None, std::time::Duration::from_secs(60))
}

#[test]
fn mpiswarm_crd_prints_the_committed_crd() {
    let out = mpiswarm(&["crd"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let committed =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../crds/mpijob.yaml")).expect("crds/mpijob.yaml");
    assert!(String::from_utf8_lossy(&out.stdout) == committed, "`mpiswarm crd` differs from crds/mpijob.yaml");
}

#[test]
fn the_manifests_ship_the_same_crd() {
    let out = mpiswarm(&["crd"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let shipped = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/10-crd.yaml"))
        .expect("manifests/10-crd.yaml");
    assert!(String::from_utf8_lossy(&out.stdout) == shipped, "manifests/10-crd.yaml differs: run `make crds`");
}

#[test]
fn the_manifests_ship_the_offer_registry_crd() {
    let out = mpiswarm(&["crd", "--offer-registry"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(printed.contains("name: offerregistries.offers.mpiswarm.io"), "{printed}");
    let shipped =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/11-offer-registry-crd.yaml"))
            .expect("manifests/11-offer-registry-crd.yaml");
    assert!(printed == shipped, "manifests/11-offer-registry-crd.yaml differs: run `make crds`");
}

#[test]
fn every_subcommand_has_help() {
    let out = mpiswarm(&["--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout).to_string();
    let commands: Vec<String> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect();
    assert!(commands.contains(&"crd".to_string()) && commands.contains(&"version".to_string()), "{help}");
    for c in commands {
        let out = mpiswarm(&[&c, "--help"]);
        assert!(out.status.success(), "mpiswarm {c} --help failed");
        assert!(out.stdout.len() > 40, "mpiswarm {c} --help says too little");
    }
}

#[test]
fn version_names_the_api() {
    let out = mpiswarm(&["version"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("mpiswarm.io/v1alpha1"));
}
