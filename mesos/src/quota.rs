//! What `GET /quota` answers (Mesos' `QuotaStatus` as the operator
//! endpoint writes it since Mesos 1.9): one config per role with quota,
//! its guarantees and limits as resource name -> amount (`cpus`, `mem` in
//! MiB). The offer layer also says what each role holds now (`consumed`,
//! not in Mesos; absent from a Mesos master's answer).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A resource name -> amount map (`{"cpus": 4, "mem": 8192}`).
pub type Amounts = BTreeMap<String, f64>;

/// The whole answer of `GET /quota`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QuotaStatus {
    #[serde(default)]
    pub configs: Vec<QuotaConfig>,
}

/// One role's quota.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QuotaConfig {
    pub role: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub guarantees: Amounts,
    /// The most the role may hold, offered or used.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: Amounts,
    /// What the role holds now (offer layer only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumed: Option<Amounts>,
}

impl QuotaStatus {
    /// The limits by role (roles without a limit left out).
    pub fn limits(&self) -> BTreeMap<String, Amounts> {
        self.configs.iter().filter(|c| !c.limits.is_empty()).map(|c| (c.role.clone(), c.limits.clone())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mesos_masters_answer_and_the_offer_layers_both_read() {
        // As Mesos 1.9+ writes it (guarantees and limits; no consumption).
        let mesos: QuotaStatus = serde_json::from_str(
            r#"{"infos":[],"configs":[{"role":"dev","guarantees":{"cpus":1},"limits":{"cpus":4,"mem":2048}},{"role":"ops","guarantees":{"cpus":1}}]}"#,
        )
        .unwrap();
        assert_eq!(
            mesos.limits(),
            BTreeMap::from([("dev".to_owned(), Amounts::from([("cpus".to_owned(), 4.0), ("mem".to_owned(), 2048.0)]))])
        );
        let ours: QuotaStatus =
            serde_json::from_str(r#"{"configs":[{"role":"team-a","limits":{"cpus":4},"consumed":{"cpus":1.5}}]}"#)
                .unwrap();
        assert_eq!(ours.configs[0].consumed.as_ref().map(|c| c["cpus"]), Some(1.5));
        assert_eq!(serde_json::from_str::<QuotaStatus>("{}").unwrap().limits().len(), 0);
    }
}
