//! The `pack` strategy: the fewest nodes that can host the gang, fullest
//! first, with the remainder and the launcher on the agent that fits them most
//! tightly (best-fit decreasing). Pure arithmetic over rank capacities; the
//! caller decides the candidate order, which carries the rack tie-break.

use crate::capacity::Candidate;

/// Where a strategy puts ranks: `(candidate index, ranks)`, the launcher node
/// first, every entry with at least one rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Assignment {
    pub nodes: Vec<(usize, u32)>,
}

/// Packs `ranks` onto the fewest of `cands`, which must be ordered by
/// preference (largest capacity first). `None` when they cannot host the gang.
///
/// The node count is exact, not greedy: for every `k` it finds the best
/// launcher node `L` given that the other `k - 1` nodes are the largest ones,
/// which is the optimal `k`-set containing `L`.
pub(crate) fn pack(cands: &[Candidate], ranks: u32) -> Option<Assignment> {
    let n = cands.len();
    let need = u64::from(ranks);
    // best_leader_from[j]: the leader with the most room among cands[j..].
    let mut best_leader_from: Vec<Option<usize>> = vec![None; n + 1];
    for j in (0..n).rev() {
        let next = best_leader_from[j + 1];
        best_leader_from[j] =
            if cands[j].can_lead() && next.is_none_or(|b| cands[j].cap_with_launcher >= cands[b].cap_with_launcher) {
                Some(j)
            } else {
                next
            };
    }
    let mut top = 0u64; // sum of the caps of cands[..k-1]
    let mut cheapest_leader: Option<usize> = None; // least launcher loss in cands[..k]
    for k in 1..=n {
        let j = k - 1;
        let outside = best_leader_from[j].map(|l| (top + u64::from(cands[l].cap_with_launcher), l));
        top += u64::from(cands[j].cap);
        if cands[j].can_lead() && cheapest_leader.is_none_or(|m| cands[j].launcher_loss() < cands[m].launcher_loss()) {
            cheapest_leader = Some(j);
        }
        let inside = cheapest_leader.map(|l| (top - u64::from(cands[l].launcher_loss()), l));
        for (room, leader) in [inside, outside].into_iter().flatten() {
            if room >= need {
                let others: Vec<usize> = (0..k).filter(|&i| i != leader).take(k - 1).collect();
                return Some(fill(cands, leader, &others, ranks));
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
    // Reserve one rank for the launcher node: it must host a worker.
    let mut budget = ranks - 1;
    for &i in others {
        let take = cands[i].cap.min(budget);
        budget -= take;
        left -= take;
        if take > 0 {
            placed.push((i, take));
        }
    }
    let mut used = vec![false; cands.len()];
    for &(i, _) in &placed {
        used[i] = true;
    }
    let leader = best_fit_leader(cands, leader, &used, left, placed.first().map(|&(i, _)| i));
    let mut nodes = Vec::with_capacity(placed.len() + 1);
    nodes.push((leader, left));
    nodes.extend(placed);
    Assignment { nodes }
}

/// The free candidate that can lead with `ranks` and wastes the least room,
/// preferring the locality group of `near`, then the caller's order.
fn best_fit_leader(cands: &[Candidate], current: usize, used: &[bool], ranks: u32, near: Option<usize>) -> usize {
    let group = cands[near.unwrap_or(current)].group;
    let mut best = current;
    for (i, c) in cands.iter().enumerate() {
        if used[i] || !c.can_lead() || c.cap_with_launcher < ranks {
            continue;
        }
        let b = &cands[best];
        let tighter = c.cap_with_launcher < b.cap_with_launcher;
        let as_tight_nearer = c.cap_with_launcher == b.cap_with_launcher && c.group == group && b.group != group;
        if tighter || as_tight_nearer {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(cap: u32, cap_with_launcher: u32) -> Candidate {
        Candidate { agent: 0, cap, cap_with_launcher, launcher_fits: true, group: 0 }
    }

    #[test]
    fn a_leader_outside_the_first_nodes_saves_a_node() {
        // The first two nodes lose a rank to the launcher; the third loses none.
        // Launching on the first node would need three nodes for 8 ranks.
        let cands = [cand(4, 3), cand(4, 3), cand(4, 4)];
        let got = pack(&cands, 8).expect("fits");
        assert_eq!(got.nodes, vec![(2, 4), (0, 4)]);
    }

    #[test]
    fn the_remainder_goes_to_the_tightest_fitting_node() {
        let cands = [cand(8, 8), cand(8, 8), cand(4, 4), cand(2, 2)];
        let got = pack(&cands, 10).expect("fits");
        assert_eq!(got.nodes, vec![(3, 2), (1, 8)]);
    }

    #[test]
    fn no_room_for_the_launcher_anywhere_is_unfit() {
        let cands = [cand(4, 0), cand(4, 0)];
        assert_eq!(pack(&cands, 2), None);
    }
}
