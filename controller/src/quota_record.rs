//! The roles' quota as the controller last read it from the offer layer
//! (`GET /quota`: each limited role's limits and what it holds now),
//! published in the framework ConfigMap under [`QUOTAS_KEY`], so that
//! `mpiswarm status` shows a tenant its role's use against its limit: a
//! tenant may read that one ConfigMap and nothing else of the controller's,
//! and never the offer layer. The record is written under a field manager
//! of its own, so the framework id's writes and this one never remove each
//! other's keys, and only when it changed.

use std::collections::BTreeMap;

use mpiswarm_mesos::quota::{Amounts, QuotaStatus};
use serde::{Deserialize, Serialize};

/// The ConfigMap key of the record (JSON: role -> [`RoleQuota`]).
pub const QUOTAS_KEY: &str = "quotas";

/// One role's limits and what it holds (offered or used), `cpus` and `mem`
/// (MiB), as the offer layer counts them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RoleQuota {
    pub limits: Amounts,
    #[serde(default)]
    pub consumed: Amounts,
}

/// Every limited role's quota.
pub type Quotas = BTreeMap<String, RoleQuota>;

/// The record of `status`: roles with a limit, amounts rounded to
/// thousandths (what the placement counts), so that noise in the last
/// digits does not make a new write.
pub fn from_status(status: &QuotaStatus) -> Quotas {
    let round = |a: &Amounts| a.iter().map(|(k, v)| (k.clone(), (v * 1000.0).round() / 1000.0)).collect();
    status
        .configs
        .iter()
        .filter(|c| !c.limits.is_empty())
        .map(|c| {
            let consumed = c.consumed.as_ref().map(round).unwrap_or_default();
            (c.role.clone(), RoleQuota { limits: round(&c.limits), consumed })
        })
        .collect()
}

/// `role team-a: 0.6 of 1 cpus, 192 of 4096 MiB` (a resource without a
/// limit is left out; what the role holds is 0 when the offer layer did
/// not say).
pub fn describe(role: &str, quota: &RoleQuota) -> String {
    let parts: Vec<String> = quota
        .limits
        .iter()
        .map(|(name, limit)| {
            let held = quota.consumed.get(name).copied().unwrap_or(0.0);
            let unit = if name == "mem" { " MiB" } else { "" };
            format!("{} of {}{unit} {name}", number(held), number(*limit))
        })
        .collect();
    format!("role {role}: {}", parts.join(", "))
}

fn number(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpiswarm_mesos::quota::QuotaConfig;

    fn amounts(pairs: &[(&str, f64)]) -> Amounts {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    #[test]
    fn the_record_keeps_limited_roles_rounded_and_reads_back() {
        let status = QuotaStatus {
            configs: vec![
                QuotaConfig {
                    role: "team-a".into(),
                    limits: amounts(&[("cpus", 1.0), ("mem", 4096.0)]),
                    consumed: Some(amounts(&[("cpus", 0.6000000001), ("mem", 192.0)])),
                    ..Default::default()
                },
                QuotaConfig {
                    role: "guaranteed-only".into(),
                    guarantees: amounts(&[("cpus", 1.0)]),
                    ..Default::default()
                },
                QuotaConfig {
                    role: "mesos".into(),
                    limits: amounts(&[("cpus", 4.0)]),
                    consumed: None,
                    ..Default::default()
                },
            ],
        };
        let record = from_status(&status);
        assert_eq!(record.keys().collect::<Vec<_>>(), ["mesos", "team-a"], "only roles with a limit");
        assert_eq!(record["team-a"].consumed["cpus"], 0.6);
        let text = serde_json::to_string(&record).unwrap();
        assert_eq!(serde_json::from_str::<Quotas>(&text).unwrap(), record);
        assert_eq!(describe("team-a", &record["team-a"]), "role team-a: 0.6 of 1 cpus, 192 of 4096 MiB mem");
        assert_eq!(describe("mesos", &record["mesos"]), "role mesos: 0 of 4 cpus", "a Mesos master says no use");
    }
}
