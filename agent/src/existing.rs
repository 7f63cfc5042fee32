//! What a task finds already there under a name it asks for: a named Docker
//! volume on the node, an overlay network on the swarm. Anyone with a
//! Docker socket, or an agent started with other flags, may have made
//! either, so a name alone proves nothing:
//!
//! - a task mounts an existing volume only if a task could have created it
//!   so on this agent (its driver and options pass the same test,
//!   [`VolumeOptions`]: never a `local` volume that binds a node path), or
//!   if the operator vouched for it by name (`--allow-existing-volume`);
//! - a task joins an existing network only if an mpiswarm agent made it for
//!   the same job: labelled `managed-by=mpiswarm-agent`, with the task's
//!   framework id and job uid ([`NetworkOwner`]). Every agent of a job
//!   derives the same owner from its LAUNCH, so whichever agent comes first
//!   makes the network and the others join it.
//!
//! Pure: what Docker reported in, a verdict out. Each refusal names the
//! object, the rule and what to do instead; it reaches the framework as the
//! TASK_FAILED's message.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::labels;
use crate::mounts::{LOCAL_DRIVER, VolumeOptions};

/// A named volume as the node's engine reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExistingVolume {
    pub driver: String,
    /// The driver options it was created with (unique keys).
    pub options: BTreeMap<String, String>,
}

/// What the agent learnt about a named volume on its node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeLookup {
    /// No volume of that name: Docker creates it from the task's mount,
    /// whose driver options were checked when the task was planned.
    Absent,
    Found(ExistingVolume),
    /// The agent reaches no engine of the node it serves (only a manager's,
    /// which does not see other nodes' volumes).
    Unseen,
}

/// The volumes the operator vouches for (`--allow-existing-volume NAME`):
/// mounted as they are, whatever they were made with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedVolumes(BTreeSet<String>);

impl TrustedVolumes {
    pub fn new(names: impl IntoIterator<Item = String>) -> Self {
        Self(names.into_iter().collect())
    }

    pub fn contains(&self, name: &str) -> bool {
        self.0.contains(name)
    }
}

/// Why a task may not mount a volume that exists on the node.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VolumeRefusal {
    #[error(
        "volume '{name}' already exists on node {node} with driver '{driver}' and options {options}, which a task could not have created: {rule}. An existing volume is mounted only if a task could have made it so, or if the agent's operator vouches for it (--allow-existing-volume {name})"
    )]
    Unsafe { name: String, node: String, driver: String, options: String, rule: String },
    #[error(
        "volume '{name}' cannot be inspected on node {node}: the agent reaches only a manager's engine, which does not see that node's volumes, and an existing volume is mounted only once inspected. Give the agent --node-docker (node {node}'s own engine), or vouch for the volume with --allow-existing-volume {name}"
    )]
    Unseen { name: String, node: String },
}

/// Whether a task may mount the volume `name` of node `node`, found as `found`.
pub fn check_volume(
    name: &str,
    node: &str,
    found: &VolumeLookup,
    allowed: &VolumeOptions,
    trusted: &TrustedVolumes,
) -> Result<(), VolumeRefusal> {
    if trusted.contains(name) {
        return Ok(());
    }
    let existing = match found {
        VolumeLookup::Absent => return Ok(()),
        VolumeLookup::Unseen => return Err(VolumeRefusal::Unseen { name: name.to_owned(), node: node.to_owned() }),
        VolumeLookup::Found(existing) => existing,
    };
    let driver = if existing.driver.is_empty() { LOCAL_DRIVER } else { existing.driver.as_str() };
    let options: Vec<(String, String)> = existing.options.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    allowed.rule(driver, &options).map_err(|rule| VolumeRefusal::Unsafe {
        name: name.to_owned(),
        node: node.to_owned(),
        driver: driver.to_owned(),
        options: shown(&options),
        rule,
    })
}

fn shown(options: &[(String, String)]) -> String {
    if options.is_empty() {
        return "none".to_owned();
    }
    options.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

/// The job a network belongs to, as every agent of the job reads it from
/// its LAUNCH: the framework's id and the task's `mpiswarm.io/job-uid`
/// label (the controller sets it; a framework that sets none has one
/// network scope, itself).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NetworkOwner {
    pub framework_id: String,
    pub job_uid: Option<String>,
}

impl NetworkOwner {
    /// The labels that say so on the network (with the agent's own).
    pub fn labels(&self) -> Vec<(String, String)> {
        let mut out = vec![(labels::FRAMEWORK_ID.to_owned(), self.framework_id.clone())];
        if let Some(uid) = &self.job_uid {
            out.push((labels::JOB_UID.to_owned(), uid.clone()));
        }
        out
    }
}

/// A network of the swarm as the manager lists it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExistingNetwork {
    pub name: String,
    /// Empty while another agent is creating it this moment: the manager
    /// lists a swarm network before its driver is filled in.
    pub driver: String,
    pub scope: String,
    pub labels: HashMap<String, String>,
}

/// Why a task may not join a network that exists.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NetworkRefusal {
    #[error(
        "network '{name}' exists with driver '{driver}' (scope '{scope}'); a task needs an attachable swarm overlay"
    )]
    NotOverlay { name: String, driver: String, scope: String },
    #[error(
        "network '{name}' exists but no mpiswarm agent made it (no label {MANAGED}): a task joins only the overlay the agents made for its own job; name another network",
        MANAGED = MANAGED_LABEL
    )]
    NotMpiswarm { name: String },
    #[error(
        "network '{name}' belongs to another job ({theirs}), not to this task's ({ours}): a task joins only the overlay the agents made for its own job; name another network"
    )]
    OtherJob { name: String, theirs: String, ours: String },
}

/// The only Swarm network driver a task may ask for or join: services can
/// join only swarm-scoped networks, and only overlay gives MPI ranks one L3
/// segment across nodes.
pub const OVERLAY: &str = "overlay";

const MANAGED_LABEL: &str = "mpiswarm.io/managed-by=mpiswarm-agent";

/// Whether a task of `owner`'s job may join `existing`.
pub fn check_network(existing: &ExistingNetwork, owner: &NetworkOwner) -> Result<(), NetworkRefusal> {
    let name = || existing.name.clone();
    if (existing.driver != OVERLAY && !existing.driver.is_empty()) || existing.scope != "swarm" {
        return Err(NetworkRefusal::NotOverlay {
            name: name(),
            driver: existing.driver.clone(),
            scope: existing.scope.clone(),
        });
    }
    if existing.labels.get(labels::MANAGED_BY).map(String::as_str) != Some(labels::MANAGED_BY_VALUE) {
        return Err(NetworkRefusal::NotMpiswarm { name: name() });
    }
    let theirs = NetworkOwner {
        framework_id: existing.labels.get(labels::FRAMEWORK_ID).cloned().unwrap_or_default(),
        job_uid: existing.labels.get(labels::JOB_UID).cloned(),
    };
    if theirs != *owner {
        return Err(NetworkRefusal::OtherJob { name: name(), theirs: theirs.to_string(), ours: owner.to_string() });
    }
    Ok(())
}

impl std::fmt::Display for NetworkOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let framework = if self.framework_id.is_empty() { "none" } else { &self.framework_id };
        write!(f, "framework '{framework}', job uid '{}'", self.job_uid.as_deref().unwrap_or("none"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(driver: &str, options: &[(&str, &str)]) -> VolumeLookup {
        VolumeLookup::Found(ExistingVolume {
            driver: driver.to_owned(),
            options: options.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
        })
    }

    #[test]
    fn an_existing_volume_is_mounted_only_if_a_task_could_have_created_it_so() {
        let none = VolumeOptions::none();
        let trusted = TrustedVolumes::default();
        let check =
            |lookup: &VolumeLookup, allowed: &VolumeOptions| check_volume("v", "node1", lookup, allowed, &trusted);
        assert_eq!(check(&VolumeLookup::Absent, &none), Ok(()), "Docker makes it from the checked mount");
        assert_eq!(check(&found("local", &[]), &none), Ok(()), "a plain local volume");
        assert_eq!(check(&found("", &[]), &none), Ok(()), "no driver reported is local");
        let bind = found("local", &[("type", "none"), ("o", "bind"), ("device", "/tmp/x")]);
        let everything = VolumeOptions::allow(&["local:type".into(), "local:o".into(), "local:device".into()]).unwrap();
        for allowed in [&none, &everything] {
            let err = check(&bind, allowed).unwrap_err();
            let text = err.to_string();
            assert!(
                text.starts_with("volume 'v' already exists on node node1 with driver 'local' and options device=/tmp/x,o=bind,type=none")
                    && text.contains("the local driver would bind a host directory (o=bind)")
                    && text.contains("--allow-existing-volume v"),
                "{text}"
            );
        }
        let ext4 = found("local", &[("type", "ext4"), ("device", "/dev/sda1")]);
        assert!(check(&ext4, &everything).unwrap_err().to_string().contains("type=ext4"));
        let nfs = found("local", &[("type", "nfs"), ("o", "addr=10.0.0.1"), ("device", ":/export")]);
        assert!(
            check(&nfs, &none).unwrap_err().to_string().contains("--allow-volume-option local:"),
            "an option this agent does not allow"
        );
        assert_eq!(check(&nfs, &everything), Ok(()));
        let plugin = found("rexray", &[("size", "1G")]);
        assert!(check(&plugin, &everything).is_err(), "options are allowed per driver");
    }

    #[test]
    fn a_volume_the_operator_vouches_for_is_mounted_as_it_is_and_an_unseen_one_is_refused() {
        let bind = found("local", &[("type", "none"), ("o", "bind"), ("device", "/srv/data")]);
        let trusted = TrustedVolumes::new(["datasets".to_owned()]);
        let none = VolumeOptions::none();
        assert_eq!(check_volume("datasets", "n", &bind, &none, &trusted), Ok(()));
        assert_eq!(check_volume("datasets", "n", &VolumeLookup::Unseen, &none, &trusted), Ok(()));
        assert!(check_volume("other", "n", &bind, &none, &trusted).is_err());
        let unseen = check_volume("other", "node2", &VolumeLookup::Unseen, &none, &trusted).unwrap_err();
        assert_eq!(unseen, VolumeRefusal::Unseen { name: "other".into(), node: "node2".into() });
        let text = unseen.to_string();
        assert!(text.contains("--node-docker") && text.contains("--allow-existing-volume other"), "{text}");
    }

    fn owner(uid: Option<&str>) -> NetworkOwner {
        NetworkOwner { framework_id: "fw-1".into(), job_uid: uid.map(str::to_owned) }
    }

    fn network(driver: &str, scope: &str, labels: &[(&str, &str)]) -> ExistingNetwork {
        ExistingNetwork {
            name: "mpiswarm-job-g0".into(),
            driver: driver.into(),
            scope: scope.into(),
            labels: labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
        }
    }

    const MANAGED: (&str, &str) = (labels::MANAGED_BY, labels::MANAGED_BY_VALUE);

    #[test]
    fn a_task_joins_only_the_overlay_the_agents_made_for_its_own_job() {
        let ours = owner(Some("uid-a"));
        let mut labels: Vec<(&str, &str)> = vec![MANAGED, (labels::FRAMEWORK_ID, "fw-1"), (labels::JOB_UID, "uid-a")];
        assert_eq!(check_network(&network("overlay", "swarm", &labels), &ours), Ok(()));
        // Another node's agent is creating it this moment: no driver yet.
        assert_eq!(check_network(&network("", "swarm", &labels), &ours), Ok(()));
        // Made by another agent (another agent id) of the same job: still the job's.
        labels.push((labels::AGENT_ID, "another-agent"));
        assert_eq!(check_network(&network("overlay", "swarm", &labels), &ours), Ok(()));

        let other_job = [MANAGED, (labels::FRAMEWORK_ID, "fw-1"), (labels::JOB_UID, "uid-b")];
        assert_eq!(
            check_network(&network("overlay", "swarm", &other_job), &ours).unwrap_err().to_string(),
            "network 'mpiswarm-job-g0' belongs to another job (framework 'fw-1', job uid 'uid-b'), not to this task's (framework 'fw-1', job uid 'uid-a'): a task joins only the overlay the agents made for its own job; name another network"
        );
        let other_framework = [MANAGED, (labels::FRAMEWORK_ID, "fw-2"), (labels::JOB_UID, "uid-a")];
        assert!(matches!(
            check_network(&network("overlay", "swarm", &other_framework), &ours),
            Err(NetworkRefusal::OtherJob { .. })
        ));
        // A network of an agent before job labels: no owner to match.
        assert!(check_network(&network("overlay", "swarm", &[MANAGED]), &ours).is_err());
        // A framework that labels no job shares its networks among its own tasks only.
        let framework_only = [MANAGED, (labels::FRAMEWORK_ID, "fw-1")];
        assert_eq!(check_network(&network("overlay", "swarm", &framework_only), &owner(None)), Ok(()));
        assert!(check_network(&network("overlay", "swarm", &labels), &owner(None)).is_err());
    }

    #[test]
    fn a_network_nobody_of_mpiswarm_made_or_of_another_kind_is_refused_naming_the_rule() {
        let ours = owner(Some("uid-a"));
        let unlabelled = check_network(&network("overlay", "swarm", &[]), &ours).unwrap_err();
        assert_eq!(unlabelled, NetworkRefusal::NotMpiswarm { name: "mpiswarm-job-g0".into() });
        assert!(unlabelled.to_string().contains("no label mpiswarm.io/managed-by=mpiswarm-agent"), "{unlabelled}");
        let claimed =
            [(labels::MANAGED_BY, "someone-else"), (labels::FRAMEWORK_ID, "fw-1"), (labels::JOB_UID, "uid-a")];
        assert!(matches!(
            check_network(&network("overlay", "swarm", &claimed), &ours),
            Err(NetworkRefusal::NotMpiswarm { .. })
        ));
        let all = [MANAGED, (labels::FRAMEWORK_ID, "fw-1"), (labels::JOB_UID, "uid-a")];
        for (driver, scope) in [("bridge", "local"), ("overlay", "local"), ("", "local"), ("macvlan", "swarm")] {
            assert!(
                matches!(check_network(&network(driver, scope, &all), &ours), Err(NetworkRefusal::NotOverlay { .. })),
                "{driver}/{scope}"
            );
        }
    }
}
