//! The `spread` strategy: as many nodes as the gang has ranks (or as there are
//! agents), ranks levelled so that max - min <= 1 wherever capacity allows.
//! Pure arithmetic over rank capacities in the caller's preference order.

use std::cmp::Reverse;

use crate::candidate::{Candidate, sort_head};
use crate::pack::Assignment;

/// Spreads `ranks` over `cands`. `None` when they cannot host the gang.
/// Reorders `cands`; the answer's indices refer to the new order.
pub(crate) fn spread(cands: &mut [Candidate], ranks: u32) -> Option<Assignment> {
    // With more agents than ranks only the most preferred `ranks` matter;
    // otherwise all are used and there are at most `ranks` of them.
    sort_head(cands, ranks as usize);
    let cands = &*cands;
    let leader = leader(cands)?;
    let room = |i: usize| {
        if i == leader { cands[i].cap_with_launcher } else { cands[i].cap }
    };
    let order: Vec<usize> =
        std::iter::once(leader).chain((0..cands.len()).filter(|&i| i != leader)).take(ranks as usize).collect();
    if ranks as usize <= cands.len() {
        let nodes = order.iter().map(|&i| (i, 1)).collect();
        return Some(Assignment { nodes });
    }
    let total: u64 = order.iter().map(|&i| u64::from(room(i))).sum();
    if total < u64::from(ranks) {
        return None;
    }
    // The lowest water level that holds every rank.
    let level_holds = |t: u32| order.iter().map(|&i| u64::from(room(i).min(t))).sum::<u64>() >= u64::from(ranks);
    let (mut lo, mut hi) = (1u32, ranks);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if level_holds(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let level = lo;
    let mut nodes: Vec<(usize, u32)> = order.iter().map(|&i| (i, room(i).min(level))).collect();
    let mut excess = nodes.iter().map(|&(_, r)| u64::from(r)).sum::<u64>() - u64::from(ranks);
    // Fewer than "nodes at the level" ranks are too many (the level is the
    // lowest that holds), and level >= 2 here, so each cut leaves >= 1 rank.
    // Cut from the least preferred end.
    for node in nodes.iter_mut().rev() {
        if excess == 0 {
            break;
        }
        if node.1 == level {
            node.1 -= 1;
            excess -= 1;
        }
    }
    Some(Assignment { nodes })
}

/// The launcher node: the one where the launcher costs the fewest ranks of
/// room (this keeps every feasible gang feasible), then the roomiest, then
/// the most preferred.
fn leader(cands: &[Candidate]) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, c) in cands.iter().enumerate() {
        if !c.can_lead() {
            continue;
        }
        let better = best.is_none_or(|b| {
            let b = &cands[b];
            (c.launcher_loss(), Reverse(c.cap_with_launcher), c.key())
                < (b.launcher_loss(), Reverse(b.cap_with_launcher), b.key())
        });
        if better {
            best = Some(i);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::candidate::test_candidates;

    /// Ranks per agent of spreading `ranks` over candidates given as
    /// `(cap, cap_with_launcher)`, agent number = position.
    fn spread_over(spec: &[(u32, u32)], ranks: u32) -> Option<Vec<(usize, u32)>> {
        let mut cands = test_candidates(spec);
        let a = spread(&mut cands, ranks)?;
        Some(a.nodes.iter().map(|&(i, r)| (cands[i].agent, r)).collect())
    }

    #[test]
    fn a_small_node_takes_less_and_the_rest_stay_level() {
        let got = spread_over(&[(8, 8), (8, 8), (8, 8), (1, 1)], 10).expect("fits");
        assert_eq!(got, vec![(0, 3), (1, 3), (2, 3), (3, 1)]);
    }

    #[test]
    fn more_nodes_than_ranks_gives_one_rank_each_on_the_roomiest() {
        let got = spread_over(&[(2, 2), (8, 8), (4, 4)], 2).expect("fits");
        assert_eq!(got, vec![(1, 1), (2, 1)]);
    }

    #[test]
    fn the_launcher_goes_where_it_costs_no_rank() {
        let got = spread_over(&[(4, 3), (4, 4), (4, 3)], 11).expect("fits");
        assert_eq!(got[0], (1, 4));
        assert_eq!(got.iter().map(|n| n.1).sum::<u32>(), 11);
    }

    #[test]
    fn too_little_room_is_unfit() {
        assert_eq!(spread_over(&[(4, 3), (4, 3)], 8), None);
    }
}
