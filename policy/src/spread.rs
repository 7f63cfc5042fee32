//! The `spread` strategy: as many nodes as the gang has ranks (or as there are
//! agents), ranks levelled so that max - min <= 1 wherever capacity allows.
//! Pure arithmetic over rank capacities in the caller's preference order.

use crate::capacity::Candidate;
use crate::pack::Assignment;

/// Spreads `ranks` over `cands`, ordered by preference (most room first).
/// `None` when they cannot host the gang.
pub(crate) fn spread(cands: &[Candidate], ranks: u32) -> Option<Assignment> {
    let leader = leader(cands)?;
    let room = |i: usize| {
        if i == leader { cands[i].cap_with_launcher } else { cands[i].cap }
    };
    let order: Vec<usize> = std::iter::once(leader).chain((0..cands.len()).filter(|&i| i != leader)).collect();
    if ranks as usize <= order.len() {
        let nodes = order.iter().take(ranks as usize).map(|&i| (i, 1)).collect();
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
/// room (this keeps every feasible gang feasible), then the roomiest.
fn leader(cands: &[Candidate]) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, c) in cands.iter().enumerate() {
        if !c.can_lead() {
            continue;
        }
        let better = best.is_none_or(|b| {
            let b = &cands[b];
            (c.launcher_loss(), std::cmp::Reverse(c.cap_with_launcher))
                < (b.launcher_loss(), std::cmp::Reverse(b.cap_with_launcher))
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

    fn cand(cap: u32, cap_with_launcher: u32) -> Candidate {
        Candidate { agent: 0, cap, cap_with_launcher, launcher_fits: true, group: 0 }
    }

    #[test]
    fn a_small_node_takes_less_and_the_rest_stay_level() {
        let cands = [cand(8, 8), cand(8, 8), cand(8, 8), cand(1, 1)];
        let got = spread(&cands, 10).expect("fits");
        let mut shape: Vec<u32> = got.nodes.iter().map(|n| n.1).collect();
        shape.sort_unstable();
        assert_eq!(shape, vec![1, 3, 3, 3]);
    }

    #[test]
    fn more_nodes_than_ranks_gives_one_rank_each() {
        let cands = [cand(8, 8), cand(8, 8), cand(8, 8)];
        let got = spread(&cands, 2).expect("fits");
        assert_eq!(got.nodes, vec![(0, 1), (1, 1)]);
    }
}
