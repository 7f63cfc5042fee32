//! The one home of every name the controller gives to things outside the
//! MpiJob: Mesos task ids, the per-job overlay, container hostnames, the SSH
//! key Secret, labels. Task ids encode the job and the gang generation, so an
//! UPDATE (or a reconciliation answer after a restart) maps back to its job
//! without any other state. Pure: no I/O.

use std::fmt;

/// Prefix of every task id the controller launches.
const TASK_PREFIX: &str = "mpijob";
/// How many hex digits of the job uid name its objects (48 bits: collisions
/// between live jobs are not a practical concern, and names stay short).
const UID_DIGITS: usize = 12;

/// Label keys the agent copies onto every Swarm object (see agent/README.md).
pub const LABEL_JOB_UID: &str = "mpiswarm.io/job-uid";
pub const LABEL_JOB_NAME: &str = "mpiswarm.io/job-name";
pub const LABEL_JOB_NAMESPACE: &str = "mpiswarm.io/job-namespace";
pub const LABEL_ROLE: &str = "mpiswarm.io/role";
pub const LABEL_GENERATION: &str = "mpiswarm.io/gang-generation";
/// Set by agents on terminal updates.
pub const LABEL_EXIT_CODE: &str = "mpiswarm.io/exit-code";

/// Where the per-job files land inside every container.
pub const SSH_KEY_PATH: &str = "/run/secrets/mpiswarm-ssh-key";
pub const HOSTFILE_PATH: &str = "/etc/mpi/hostfile";
pub const BOOTSTRAP_PATH: &str = "/etc/mpiswarm/rank";

/// What a task does in its gang.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TaskRole {
    /// Hosts `slots` ranks on one node (sshd).
    Worker(u32),
    /// Runs `mpirun`.
    Launcher,
}

impl TaskRole {
    /// The container hostname, also its DNS alias on the job's overlay and
    /// the name in the hostfile. Unique within one job's overlay.
    pub fn hostname(self) -> String {
        match self {
            TaskRole::Worker(i) => format!("worker-{i}"),
            TaskRole::Launcher => "launcher".to_owned(),
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            TaskRole::Worker(_) => "worker",
            TaskRole::Launcher => "launcher",
        }
    }
}

impl fmt::Display for TaskRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hostname())
    }
}

/// The short form of a job uid used in names: its first hex digits.
pub fn short_uid(uid: &str) -> String {
    uid.chars().filter(char::is_ascii_hexdigit).take(UID_DIGITS).collect::<String>().to_ascii_lowercase()
}

/// The start of the name of every overlay of the job (one a gang generation).
pub fn network_prefix(uid: &str) -> String {
    format!("mpiswarm-{}-", short_uid(uid))
}

/// The attachable overlay every container of one gang generation joins.
/// Each generation has its own: agents remove a network once none of their
/// own services uses it, and a restarted gang sharing the old generation's
/// network could find it gone between making sure it exists and creating
/// its services on it (seen after a lost node: "network ... not found").
pub fn network(uid: &str, generation: u32) -> String {
    format!("{}g{generation}", network_prefix(uid))
}

/// The Mesos executor of one gang generation on one agent (LAUNCH_GROUP needs one).
pub fn executor_id(uid: &str, generation: u32, agent_id: &str) -> String {
    format!("{TASK_PREFIX}-{}-g{generation}-exec-{agent_id}", short_uid(uid))
}

/// The Secret that holds the job's SSH key pair (owned by the MpiJob). The
/// uid keeps a re-created job of the same name from picking up the old key
/// before garbage collection removed it.
pub fn ssh_secret(job_name: &str, uid: &str) -> String {
    // Secret names are DNS subdomains of at most 253 characters; job names are too.
    let suffix = format!("-ssh-{}", short_uid(uid));
    let mut name = job_name.to_owned();
    name.truncate(253 - suffix.len());
    name + &suffix
}

/// A task id: `mpijob-<uid12>-g<generation>-worker-<i>` or `...-launcher`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskName {
    pub short_uid: String,
    pub generation: u32,
    pub role: TaskRole,
}

impl TaskName {
    pub fn new(uid: &str, generation: u32, role: TaskRole) -> Self {
        Self { short_uid: short_uid(uid), generation, role }
    }

    /// Reads a task id written by [`TaskName::to_string`]; `None` for any
    /// other task (another framework's naming, or garbage).
    pub fn parse(task_id: &str) -> Option<Self> {
        let rest = task_id.strip_prefix(TASK_PREFIX)?.strip_prefix('-')?;
        let (short_uid, rest) = rest.split_once('-')?;
        if short_uid.len() != UID_DIGITS || !short_uid.chars().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        let rest = rest.strip_prefix('g')?;
        let (generation, role) = rest.split_once('-')?;
        let generation = generation.parse().ok()?;
        let role = match role {
            "launcher" => TaskRole::Launcher,
            w => TaskRole::Worker(w.strip_prefix("worker-")?.parse().ok()?),
        };
        Some(Self { short_uid: short_uid.to_owned(), generation, role })
    }
}

impl fmt::Display for TaskName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{TASK_PREFIX}-{}-g{}-{}", self.short_uid, self.generation, self.role)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "0c5e7a1b-93f2-4d1e-8a77-2f0a9d1b3c4e";

    #[test]
    fn task_ids_round_trip_for_workers_and_the_launcher() {
        for role in [TaskRole::Worker(0), TaskRole::Worker(17), TaskRole::Launcher] {
            let name = TaskName::new(UID, 3, role);
            assert_eq!(TaskName::parse(&name.to_string()), Some(name.clone()), "{name}");
        }
        assert_eq!(TaskName::new(UID, 0, TaskRole::Worker(2)).to_string(), "mpijob-0c5e7a1b93f2-g0-worker-2");
    }

    #[test]
    fn foreign_task_ids_are_not_ours() {
        for id in [
            "",
            "task-1",
            "mpijob-",
            "mpijob-xyz-g0-launcher",
            "mpijob-0c5e7a1b93f2-gx-launcher",
            "mpijob-0c5e7a1b93f2-g1-driver",
            "mpijob-0c5e7a1b93f2-g1-worker-a",
        ] {
            assert_eq!(TaskName::parse(id), None, "{id}");
        }
    }

    #[test]
    fn names_are_short_and_stable() {
        assert_eq!(network(UID, 2), "mpiswarm-0c5e7a1b93f2-g2");
        assert_eq!(ssh_secret("pi", UID), "pi-ssh-0c5e7a1b93f2");
        assert!(ssh_secret(&"x".repeat(300), UID).len() <= 253);
    }
}
