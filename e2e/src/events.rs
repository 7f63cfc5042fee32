//! Swarm's own event log on the manager: which services were created in a
//! time window. A gang launched twice shows here as more service creations
//! than the gang has tasks, however briefly the extra services lived.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::cluster::Cluster;

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
}
