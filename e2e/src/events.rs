//! Swarm's own event log on the manager: which services were created in a
//! time window. A gang launched twice shows here as more service creations
//! than the gang has tasks, however briefly the extra services lived (Docker
//! keeps its last 256 events: enough for a few jobs, not for a burst).

use std::time::{SystemTime, UNIX_EPOCH};

use std::collections::BTreeSet;

use crate::cluster::Cluster;
use crate::job::Watched;

/// Seconds since the epoch on this machine's clock (the node containers share its kernel).
pub fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl Cluster {
    /// Ids of the services the manager created from `since` to `until` (seconds since the epoch, inclusive).
    pub fn services_created(&self, since: u64, until: u64) -> Vec<String> {
        self.services_created_named(since, until).into_iter().map(|(id, _)| id).collect()
    }

    /// [`Cluster::services_created`] with each service's name (its job, generation and role).
    pub fn services_created_named(&self, since: u64, until: u64) -> Vec<(String, String)> {
        let (since, until) = (since.to_string(), until.to_string());
        let args = ["docker", "events", "--since", &since, "--until", &until, "--filter", "type=service"];
        let mut full = args.to_vec();
        full.extend(["--filter", "event=create", "--format", "{{.Actor.ID}} {{.Actor.Attributes.name}}"]);
        let out = self.exec(self.manager(), &full);
        assert!(out.status.success(), "docker events on the manager: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let (id, name) = l.trim().split_once(' ').unwrap_or((l.trim(), ""));
                (!id.is_empty()).then(|| (id.to_owned(), name.to_owned()))
            })
            .collect()
    }

    /// Swarm's event log: from `since` on, the manager created exactly the
    /// services Swarm ran for `jobs`, each once; a second launch of any gang
    /// would show as more. A service created and never seen running is
    /// named, with what the components logged of it.
    pub fn assert_services_created_once(&self, since: u64, jobs: &[&Watched]) {
        let created = self.services_created_named(since, now() + 1);
        let ran: BTreeSet<&str> = jobs.iter().flat_map(|w| w.tasks.iter().map(|t| t.service_id.as_str())).collect();
        let unique: BTreeSet<&str> = created.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(created.len(), unique.len(), "a service id created twice: {created:?}");
        let unseen: Vec<&(String, String)> = created.iter().filter(|(id, _)| !ran.contains(id.as_str())).collect();
        let told = unseen.iter().map(|(_, name)| self.components_said(name)).collect::<Vec<_>>().join("\n");
        assert_eq!(
            unique, ran,
            "services created (left) and the jobs' services Swarm ran (right); created, never seen running: \
             {unseen:?}; what the components logged of them:\n{told}"
        );
    }

    /// The lines of the components' logs (DATA/logs/NAME.log, `up --split`) that name `what`.
    fn components_said(&self, what: &str) -> String {
        let Ok(logs) = std::fs::read_dir(self.dir().join("logs")) else { return "no logs".into() };
        let mut said = Vec::new();
        for log in logs.flatten() {
            let text = std::fs::read_to_string(log.path()).unwrap_or_default();
            let name = log.file_name().to_string_lossy().into_owned();
            said.extend(text.lines().filter(|l| !what.is_empty() && l.contains(what)).map(|l| format!("{name}: {l}")));
        }
        said.join("\n")
    }
}
