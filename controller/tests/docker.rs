//! End to end on the machine's real Docker engine (a single-node swarm): the
//! embedded API server, the offer layer, the real node agent and the
//! controller run `examples/pi.yaml` with real Open MPI, applied and awaited
//! with kubectl; a stock Debian image with nothing of mpiswarm's runs too;
//! after `kubectl delete` nothing of the jobs is left on the swarm.
//! Needs the images of `make images`; fails (never skips) without them.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::{Agents, DEADLINE, Stack, require_image};
use mpiswarm_crds::Phase;

fn example(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples").join(name);
    path.to_str().expect("utf-8 path").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pi_and_a_stock_debian_image_run_real_open_mpi_on_swarm_and_leave_nothing_behind() {
    require_image("mpiswarm/openmpi:0.1.0");
    require_image("mpiswarm/debian-openmpi:bookworm");
    let s = Stack::start_with(Agents::Docker, |_| {}).await;

    s.kubectl_ok(&["apply", "-f", &example("pi.yaml")], None);
    let waited = s.kubectl(&["wait", "--for=condition=Succeeded", "mpijob/pi", "--timeout=240s"], None);
    let job = s.jobs().get("pi").await.expect("pi exists");
    assert!(waited.status.success(), "pi did not succeed: {:#?}", job.status);
    let st = job.status.clone().unwrap();
    let output = st.launcher.as_ref().and_then(|l| l.message.clone()).unwrap_or_default();
    assert!(output.contains("ranks: 4"), "{output}");
    let pi: f64 = output
        .lines()
        .find_map(|l| l.trim().strip_prefix("pi: "))
        .unwrap_or_else(|| panic!("no pi line in {output}"))
        .trim()
        .parse()
        .expect("pi is a number");
    assert!((pi - std::f64::consts::PI).abs() < 0.01, "pi = {pi}");
    let row = s.kubectl_ok(&["get", "mpij", "pi", "--no-headers"], None);
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&cols[..5], ["pi", "Succeeded", "4", "pack", "1"], "{row}");

    s.kubectl_ok(&["apply", "-f", &example("stock-image.yaml")], None);
    let stock = s.until_phase("stock-image", Phase::Succeeded).await;
    let output =
        stock.status.as_ref().and_then(|st| st.launcher.as_ref()).and_then(|l| l.message.clone()).unwrap_or_default();
    assert!(output.matches("worker-0").count() >= 2, "both ranks ran on the worker: {output}");

    // Data in and out: a named Docker volume written by one job is read by the next.
    let volume = format!("mpiswarm-test-{}", std::process::id());
    let job = |name: &str, command: &str| {
        format!(
            "apiVersion: mpiswarm.io/v1alpha1\nkind: MpiJob\nmetadata:\n  name: {name}\nspec:\n  image: mpiswarm/openmpi:0.1.0\n  command: [sh, -c, '{command}']\n  ranks: 1\n  resources: {{cpus: 0.25, memory: 64Mi}}\n  volumes:\n    - {{name: results, mountPath: /data, dockerVolume: {{name: {volume}}}}}\n    - {{name: scratch, mountPath: /scratch, tmpfs: {{size: 16Mi}}}}\n"
        )
    };
    s.kubectl_ok(
        &["apply", "-f", "-"],
        Some(&job("writer", "echo written-by-$(hostname) > /data/msg && df /scratch | tail -1")),
    );
    let writer = s.until_phase("writer", Phase::Succeeded).await;
    let out = writer.status.and_then(|st| st.launcher).and_then(|l| l.message).unwrap_or_default();
    assert!(out.contains("tmpfs"), "the tmpfs is mounted: {out}");
    s.kubectl_ok(&["apply", "-f", "-"], Some(&job("reader", "cat /data/msg")));
    let reader = s.until_phase("reader", Phase::Succeeded).await;
    let out = reader.status.and_then(|st| st.launcher).and_then(|l| l.message).unwrap_or_default();
    assert!(out.contains("written-by-worker-0"), "the reader sees what the writer left: {out}");

    for name in ["pi", "stock-image", "writer", "reader"] {
        s.delete_leaving_nothing("default", name).await;
    }
    // The volume outlives the jobs (mpiswarm never removes named volumes),
    // under its namespace's name; the test removes its own once Swarm has
    // removed the containers that used it.
    let on_node = format!("default.{volume}");
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let mut cmd = std::process::Command::new("docker");
        cmd.args(["volume", "rm", &on_node]);
        let removed = mpiswarm_testkit::output_within(cmd, None, common::COMMAND_DEADLINE);
        if removed.status.success() {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{}", String::from_utf8_lossy(&removed.stderr));
        tokio::time::sleep(Duration::from_millis(500)).await; // Swarm removes containers asynchronously
    }
}
