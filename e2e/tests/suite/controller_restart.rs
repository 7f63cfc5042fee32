//! `mpiswarm up` runs the controller inside its own process; a controller
//! that stops itself (its Lease lost, its framework driver ended) is started
//! again, as `--split` starts an exited process again. The case takes the
//! controller's Lease for another holder, as a second controller would: the
//! controller stops on the loss, `up` starts it again, it takes the Lease
//! back once the other holder stops renewing it, and a job runs as before.

use std::time::Duration;

use mpiswarm_e2e::{Cluster, Job, wait};

const LEASE: &str = "mpiswarm-controller";
/// The kube-lease-manager renews about every two thirds of the 15 s Lease,
/// and finds then that it is held by another.
const BACK_DEADLINE: Duration = Duration::from_secs(90);
const JOB_DEADLINE: Duration = Duration::from_secs(180);

fn holder(cluster: &Cluster) -> String {
    cluster.kubectl(&["get", "lease", LEASE, "-n", "default", "-o", "jsonpath={.spec.holderIdentity}"])
}

pub fn a_controller_that_loses_its_lease_is_started_again_and_takes_it_back(cluster: &Cluster) {
    let ours = holder(cluster);
    assert!(ours.starts_with("up-"), "the Lease is held by up's controller: {ours:?}");
    let said = |what: &str| cluster.log().matches(what).count();
    let (stopped_before, started_before) =
        (said("mpiswarm up: controller stopped ("), said("controller started again"));
    // Another holder, renewed now for 3 s and never again.
    let now = std::process::Command::new("date").args(["-u", "+%Y-%m-%dT%H:%M:%S.000000Z"]).output().expect("date");
    let now = String::from_utf8_lossy(&now.stdout).trim().to_owned();
    let patch = format!(
        r#"{{"spec":{{"holderIdentity":"e2e-intruder","leaseDurationSeconds":3,"acquireTime":"{now}","renewTime":"{now}"}}}}"#
    );
    cluster.kubectl(&["patch", "lease", LEASE, "-n", "default", "--type", "merge", "-p", &patch]);
    wait::until(BACK_DEADLINE, "up's controller stopped, started again and holds its Lease again", || {
        let (stopped, started, now) =
            (said("mpiswarm up: controller stopped ("), said("controller started again"), holder(cluster));
        if stopped > stopped_before && started > started_before && now == ours {
            Ok(())
        } else {
            Err(format!("stopped {stopped}, started again {started}, holder {now:?}"))
        }
    });
    let log = cluster.log();
    let line = log.lines().rev().find(|l| l.contains("mpiswarm up: controller stopped (")).unwrap_or_default();
    assert!(line.contains("e2e-intruder") || line.to_lowercase().contains("lease"), "the reason is said: {line}");
    println!("suite: {line}");
    let job = Job::pi("e2e-after-restart", 2, 0.2, 1_000_000);
    cluster.submit(&job);
    cluster.wait_job(&job.name, JOB_DEADLINE, "Succeeded", |s| s.phase() == "Succeeded");
    cluster.delete_jobs(&[&job.name]);
}
