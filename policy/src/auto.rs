//! The `auto` rules: which placement strategy a job's profile gets, and the
//! sentence that says why. Owns only the decision, never the placement.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::demand::{Policy, Profile};

/// The strategy that actually placed a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AppliedPolicy {
    Pack,
    Spread,
}

impl fmt::Display for AppliedPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Pack => "pack",
            Self::Spread => "spread",
        })
    }
}

/// The rule that chose the strategy; the controller can publish it as a
/// status field or an event reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Rule {
    /// `policy: pack` was asked for.
    RequestedPack,
    /// `policy: spread` was asked for.
    RequestedSpread,
    /// `auto` + `network` -> pack.
    AutoNetworkPacks,
    /// `auto` + `cpu` -> spread.
    AutoCpuSpreads,
    /// `auto` + `memory` -> spread.
    AutoMemorySpreads,
    /// `auto` + `balanced` -> pack, at most one rank per free core.
    AutoBalancedPacksWithinCores,
}

impl Rule {
    /// The strategy this rule applies.
    pub fn policy(self) -> AppliedPolicy {
        match self {
            Self::RequestedPack | Self::AutoNetworkPacks | Self::AutoBalancedPacksWithinCores => AppliedPolicy::Pack,
            Self::RequestedSpread | Self::AutoCpuSpreads | Self::AutoMemorySpreads => AppliedPolicy::Spread,
        }
    }

    /// Whether a node may host no more ranks than it has whole free cpus.
    pub fn caps_ranks_at_cores(self) -> bool {
        self == Self::AutoBalancedPacksWithinCores
    }

    /// Why the rule exists, in words a user can follow.
    pub fn explanation(self) -> &'static str {
        match self {
            Self::RequestedPack => "policy pack was requested: fewest nodes, fullest first",
            Self::RequestedSpread => "policy spread was requested: as many nodes as possible, ranks balanced",
            Self::AutoNetworkPacks => {
                "policy auto with profile network packs: co-located ranks talk over shared memory \
                 instead of the network"
            }
            Self::AutoCpuSpreads => {
                "policy auto with profile cpu spreads: ranks on one node would contend for its cores"
            }
            Self::AutoMemorySpreads => {
                "policy auto with profile memory spreads: ranks on one node would contend for its \
                 caches and memory bandwidth"
            }
            Self::AutoBalancedPacksWithinCores => {
                "policy auto with profile balanced packs for shared-memory communication, but never \
                 more ranks on a node than its whole free cpus, so computing ranks do not share a core"
            }
        }
    }
}

/// Picks the rule for a requested policy and profile.
pub fn decide(policy: Policy, profile: Profile) -> Rule {
    match (policy, profile) {
        (Policy::Pack, _) => Rule::RequestedPack,
        (Policy::Spread, _) => Rule::RequestedSpread,
        (Policy::Auto, Profile::Network) => Rule::AutoNetworkPacks,
        (Policy::Auto, Profile::Cpu) => Rule::AutoCpuSpreads,
        (Policy::Auto, Profile::Memory) => Rule::AutoMemorySpreads,
        (Policy::Auto, Profile::Balanced) => Rule::AutoBalancedPacksWithinCores,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_policy_and_profile_maps_to_the_documented_rule() {
        let table = [
            (Policy::Auto, Profile::Network, Rule::AutoNetworkPacks, AppliedPolicy::Pack),
            (Policy::Auto, Profile::Cpu, Rule::AutoCpuSpreads, AppliedPolicy::Spread),
            (Policy::Auto, Profile::Memory, Rule::AutoMemorySpreads, AppliedPolicy::Spread),
            (Policy::Auto, Profile::Balanced, Rule::AutoBalancedPacksWithinCores, AppliedPolicy::Pack),
            (Policy::Pack, Profile::Cpu, Rule::RequestedPack, AppliedPolicy::Pack),
            (Policy::Spread, Profile::Network, Rule::RequestedSpread, AppliedPolicy::Spread),
        ];
        for (policy, profile, rule, applied) in table {
            let got = decide(policy, profile);
            assert_eq!(got, rule, "{policy} + {profile}");
            assert_eq!(got.policy(), applied, "{policy} + {profile}");
            assert_eq!(got.caps_ranks_at_cores(), rule == Rule::AutoBalancedPacksWithinCores);
        }
    }
}
