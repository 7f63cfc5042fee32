//! The `pack` strategy: the fewest nodes that can host the gang, fullest
//! first, with the remainder and the launcher on the agent that fits them most
//! tightly (best-fit decreasing). Pure arithmetic over rank capacities; the
//! caller decides the candidate order, which carries the rack tie-break.

use std::cmp::Reverse;

use crate::candidate::{Candidate, sort_head};

/// Where a strategy puts ranks: `(candidate index, ranks)`, the launcher node
/// first, every entry with at least one rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Assignment {
    pub nodes: Vec<(usize, u32)>,
}

/// How many candidates are ordered before the first search; doubled until
/// the search succeeds. Real jobs need far fewer nodes than this.
const FIRST_HEAD: usize = 64;

/// Packs `ranks` onto the fewest of `cands`. `None` when they cannot host
/// the gang. Reorders `cands`; the answer's indices refer to the new order.
///
/// The node count is exact, not greedy: for every `k` it finds the best
/// launcher node `L` given that the other `k - 1` nodes are the largest ones,
/// which is the optimal `k`-set containing `L`. Only the head of the
/// preference order that can matter is sorted.
pub(crate) fn pack(cands: &mut [Candidate], ranks: u32) -> Option<Assignment> {
    let n = cands.len();
    let mut head = FIRST_HEAD.min(n);
    loop {
        sort_head(cands, head);
        if let Some((leader, k)) = fewest_nodes(cands, head, ranks) {
            let others: Vec<usize> = (0..k).filter(|&i| i != leader).take(k - 1).collect();
            return Some(fill(cands, leader, &others, ranks));
        }
        if head == n {
            return None;
        }
        head = (head * 2).min(n);
    }
}

/// Whichever of two leaders has more room with the launcher; ties go to the
/// more preferred.
fn roomier(cands: &[Candidate], a: Option<usize>, b: Option<usize>) -> Option<usize> {
    match (a, b) {
        (Some(a), Some(b)) => {
            let (ca, cb) = (&cands[a], &cands[b]);
            let a_wins = (Reverse(ca.cap_with_launcher), ca.key()) <= (Reverse(cb.cap_with_launcher), cb.key());
            Some(if a_wins { a } else { b })
        }
        (a, b) => a.or(b),
    }
}

/// The fewest nodes `k <= head` and the leader achieving it, searching the
/// sorted `cands[..head]`; `cands[head..]` may be in any order.
fn fewest_nodes(cands: &[Candidate], head: usize, ranks: u32) -> Option<(usize, usize)> {
    let need = u64::from(ranks);
    let tail_leader =
        (head..cands.len()).filter(|&i| cands[i].can_lead()).fold(None, |best, i| roomier(cands, best, Some(i)));
    // best_leader_from[j]: the leader with the most room among cands[j..].
    let mut best_leader_from: Vec<Option<usize>> = vec![tail_leader; head + 1];
    for j in (0..head).rev() {
        let here = cands[j].can_lead().then_some(j);
        best_leader_from[j] = roomier(cands, here, best_leader_from[j + 1]);
    }
    let mut top = 0u64; // sum of the caps of cands[..k-1]
    let mut cheapest_leader: Option<usize> = None; // least launcher loss in cands[..k]
    for k in 1..=head {
        let j = k - 1;
        let outside = best_leader_from[j].map(|l| (top + u64::from(cands[l].cap_with_launcher), l));
        top += u64::from(cands[j].cap);
        if cands[j].can_lead() && cheapest_leader.is_none_or(|m| cands[j].launcher_loss() < cands[m].launcher_loss()) {
            cheapest_leader = Some(j);
        }
        let inside = cheapest_leader.map(|l| (top - u64::from(cands[l].launcher_loss()), l));
        for (room, leader) in [inside, outside].into_iter().flatten() {
            if room >= need {
                return Some((leader, k));
            }
        }
    }
    None
}

/// Fills `others` completely in order and gives the rest to the launcher
/// node, then moves that node to the tightest-fitting free candidate.
fn fill(cands: &[Candidate], leader: usize, others: &[usize], ranks: u32) -> Assignment {
    let mut left = ranks;
    let mut placed: Vec<(usize, u32)> = Vec::with_capacity(others.len() + 1);
    // Keep one rank for the launcher node: it must host a worker.
    let mut budget = ranks - 1;
    for &i in others {
        let take = cands[i].cap.min(budget);
        budget -= take;
        left -= take;
        if take > 0 {
            placed.push((i, take));
        }
    }
    let near = cands[placed.first().map_or(leader, |&(i, _)| i)].group;
    let leader = best_fit_leader(cands, leader, &placed, left, near);
    let mut nodes = Vec::with_capacity(placed.len() + 1);
    nodes.push((leader, left));
    nodes.extend(placed);
    Assignment { nodes }
}

/// The free candidate that can lead with `ranks` and wastes the least room;
/// among equally tight ones, the locality group `near`, then preference.
fn best_fit_leader(cands: &[Candidate], current: usize, placed: &[(usize, u32)], ranks: u32, near: u32) -> usize {
    let fit = |c: &Candidate| (c.cap_with_launcher, c.group != near, c.key());
    // The placed nodes all sit in the sorted head, so a small table covers them.
    let mut taken = vec![false; placed.iter().map(|&(i, _)| i + 1).max().unwrap_or(0)];
    for &(i, _) in placed {
        taken[i] = true;
    }
    let mut best = current;
    for (i, c) in cands.iter().enumerate() {
        if !c.can_lead() || c.cap_with_launcher < ranks || taken.get(i).copied().unwrap_or(false) {
            continue;
        }
        if fit(c) < fit(&cands[best]) {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::candidate::test_candidates;

    /// `(agent, ranks)` of packing `ranks` onto candidates given as
    /// `(cap, cap_with_launcher)`, agent number = position.
    fn packed(spec: &[(u32, u32)], ranks: u32) -> Option<Vec<(usize, u32)>> {
        let mut cands = test_candidates(spec);
        let a = pack(&mut cands, ranks)?;
        Some(a.nodes.iter().map(|&(i, r)| (cands[i].agent, r)).collect())
    }

    #[test]
    fn a_leader_outside_the_first_nodes_saves_a_node() {
        // The first two nodes lose a rank to the launcher; the third loses none.
        // Launching on the first node would need three nodes for 8 ranks.
        assert_eq!(packed(&[(4, 3), (4, 3), (4, 4)], 8), Some(vec![(2, 4), (0, 4)]));
    }

    #[test]
    fn the_remainder_goes_to_the_tightest_fitting_node() {
        assert_eq!(packed(&[(8, 8), (8, 8), (4, 4), (2, 2)], 10), Some(vec![(3, 2), (1, 8)]));
    }

    #[test]
    fn no_room_for_the_launcher_anywhere_is_unfit() {
        assert_eq!(packed(&[(4, 0), (4, 0)], 2), None);
    }

    #[test]
    fn a_job_needing_more_nodes_than_the_first_head_still_packs() {
        let spec = vec![(1, 1); 300];
        let got = packed(&spec, 200).expect("fits");
        assert_eq!(got.len(), 200);
        assert_eq!(got.iter().map(|n| n.1).sum::<u32>(), 200);
    }
}
