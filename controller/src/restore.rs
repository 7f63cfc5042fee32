//! Rebuilding a gang from an MpiJob's status after a controller restart (or
//! leader change): the status holds the placement and the gang generation,
//! and task ids follow from them, so RECONCILE can ask the offer layer what
//! became of each task. Pure.

use mpiswarm_crds::{MpiJob, Phase};

use crate::demand;
use crate::gang::{GangBook, Stage};

/// The gang the status describes, if the job had one on the Mesos side.
pub fn gang_from_status(job: &MpiJob, uid: &str, now: i64) -> Option<GangBook> {
    let st = job.status.as_ref()?;
    let phase = st.phase?;
    if !matches!(phase, Phase::Scheduling | Phase::Launching | Phase::Running) {
        return None;
    }
    let generation = u32::try_from(st.gang_generation.unwrap_or(0)).ok()?;
    let placed = st.placement.as_ref()?;
    let d = demand::job_demand(&job.spec).ok()?;
    let placement = demand::placement_from_status(placed, &d).ok().flatten()?;
    let role = job.spec.role.clone();
    let mut gang = GangBook::new(uid, generation, &role, placement, Stage::Launched);
    gang.launched_at = Some(now);
    gang.maybe_never_launched = phase == Phase::Scheduling;
    gang.restored = true;
    Some(gang)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::TaskRole;

    #[test]
    fn a_running_jobs_status_gives_back_its_gang_and_task_ids() {
        let job: MpiJob = serde_yaml::from_str(
            r#"
apiVersion: mpiswarm.io/v1alpha1
kind: MpiJob
metadata: {name: j, uid: 0c5e7a1b-93f2-4d1e-8a77-2f0a9d1b3c4e}
spec: {image: i, command: [x], ranks: 3, resources: {cpus: 0.5, memory: 64Mi}}
status:
  phase: Running
  gangGeneration: 2
  restarts: 2
  placement:
    policy: pack
    reason: r
    nodeCount: 2
    nodes:
      - {node: n1, agentId: a1, ranks: 2, worker: worker-0}
      - {node: n2, agentId: a2, ranks: 1, worker: worker-1}
"#,
        )
        .unwrap();
        let g = gang_from_status(&job, "0c5e7a1b-93f2-4d1e-8a77-2f0a9d1b3c4e", 50).unwrap();
        assert_eq!(g.generation, 2);
        let ids: Vec<&str> = g.tasks.keys().map(String::as_str).collect();
        assert_eq!(
            ids,
            ["mpijob-0c5e7a1b93f2-g2-launcher", "mpijob-0c5e7a1b93f2-g2-worker-0", "mpijob-0c5e7a1b93f2-g2-worker-1"]
        );
        assert_eq!(g.launcher().map(|l| l.agent_id.as_str()), Some("a1"));
        assert!(g.tasks.values().any(|t| t.role == TaskRole::Worker(1) && t.agent_id == "a2"));
        assert!(!g.maybe_never_launched);
    }
}
