//! One job's view of each agent: how many of its ranks fit there with and
//! without the launcher, and the preference order the strategies walk.
//! Computed per job from the ledger; never mutates it.

use std::cmp::Reverse;

use crate::capacity::{Vector, ranks_fitting};
use crate::demand::JobDemand;
use crate::ledger::Ledger;

/// The preference order of candidates, smallest first: most room, then the
/// biggest locality group (so ties cluster in one rack), then the scorer's
/// preference, then one group before the next, then offer order.
pub(crate) type OrderKey = (Reverse<u32>, Reverse<u64>, Reverse<u64>, u32, usize);

/// How many ranks of one job an agent can host, as a worker alone (`cap`) and
/// as the first node that also runs the launcher (`cap_with_launcher`), plus
/// what orders it among the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub agent: usize,
    pub cap: u32,
    pub cap_with_launcher: u32,
    /// Whether the launcher fits here at all (even with no rank).
    pub launcher_fits: bool,
    /// Locality group (e.g. rack).
    pub group: u32,
    /// Total rank capacity of the group; set by the engine.
    pub group_weight: u64,
    /// The scorer's preference, as order-preserving bits; set by the engine.
    pub score: u64,
}

impl Candidate {
    /// Ranks of capacity lost by putting the launcher here.
    pub fn launcher_loss(&self) -> u32 {
        self.cap - self.cap_with_launcher
    }

    /// Whether this agent can be the first node: launcher plus at least one rank.
    pub fn can_lead(&self) -> bool {
        self.launcher_fits && self.cap_with_launcher >= 1
    }

    pub fn key(&self) -> OrderKey {
        (Reverse(self.cap), Reverse(self.group_weight), Reverse(self.score), self.group, self.agent)
    }
}

/// Maps a score to bits that sort like the number (higher score, higher bits).
pub(crate) fn score_bits(score: f64) -> u64 {
    let bits = score.to_bits();
    if bits >> 63 == 1 { !bits } else { bits | 1 << 63 }
}

/// Sorts the `m` most preferred candidates to the front in order, leaving the
/// rest unordered behind them: O(n + m log m) instead of a full sort.
pub(crate) fn sort_head(cands: &mut [Candidate], m: usize) {
    if m < cands.len() {
        cands.select_nth_unstable_by_key(m, Candidate::key);
    }
    let m = m.min(cands.len());
    cands[..m].sort_unstable_by_key(Candidate::key);
}

/// The agents that match the job's selector and fit at least one rank, with
/// their rank capacities. `cores_cap` additionally limits ranks to the whole
/// free cores of the agent (the `auto` rule for balanced jobs).
pub(crate) fn candidates(job: &JobDemand, ledger: &Ledger<'_>, cores_cap: bool) -> Vec<Candidate> {
    let per_rank = Vector::of(&job.per_rank);
    let launcher = Vector::of(&job.launcher);
    // Not capped at the job's ranks: best fit needs to see how much room is left.
    let limit = job.max_ranks_per_node.unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity(ledger.len());
    for (i, free) in ledger.free.iter().enumerate() {
        if !job.node_selector.is_empty() && !ledger.agents[i].matches(&job.node_selector) {
            continue;
        }
        let limit = if cores_cap { limit.min(u32::try_from(free.cpus / 1000).unwrap_or(u32::MAX)) } else { limit };
        let cap = ranks_fitting(free, &per_rank, limit);
        if cap == 0 {
            continue;
        }
        let launcher_fits = launcher.fits_in(free);
        let cap_with_launcher =
            if launcher_fits { ranks_fitting(&free.saturating_sub(&launcher), &per_rank, limit) } else { 0 };
        out.push(Candidate {
            agent: i,
            cap,
            cap_with_launcher,
            launcher_fits,
            group: ledger.group[i],
            group_weight: 0,
            score: 0,
        });
    }
    out
}

/// Candidates given as `(cap, cap_with_launcher)` in preference order, agent
/// number = position, for the strategies' unit tests.
#[cfg(test)]
pub(crate) fn test_candidates(spec: &[(u32, u32)]) -> Vec<Candidate> {
    spec.iter()
        .enumerate()
        .map(|(agent, &(cap, cap_with_launcher))| Candidate {
            agent,
            cap,
            cap_with_launcher,
            launcher_fits: true,
            group: 0,
            group_weight: 0,
            score: 0,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn score_bits_sort_like_the_scores() {
        let scores = [f64::NEG_INFINITY, -1e9, -1.5, -0.0, 0.0, 1e-9, 2.0, 1e12, f64::INFINITY];
        for pair in scores.windows(2) {
            assert!(score_bits(pair[0]) <= score_bits(pair[1]), "{} vs {}", pair[0], pair[1]);
        }
        assert!(score_bits(-1.0) < score_bits(1.0));
    }

    proptest! {
        #[test]
        fn sort_head_puts_exactly_the_sorted_prefix_first(
            spec in prop::collection::vec((1u32..20, 0u32..20), 0..200),
            m in 0usize..220,
        ) {
            let mut cands = test_candidates(&spec.iter().map(|&(c, l)| (c, l.min(c))).collect::<Vec<_>>());
            let mut full = cands.clone();
            full.sort_unstable_by_key(Candidate::key);
            sort_head(&mut cands, m);
            let m = m.min(full.len());
            prop_assert_eq!(&cands[..m], &full[..m]);
        }
    }
}
