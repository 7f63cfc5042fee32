//! The shortfall analysis behind an [`Unfit`]: after a strategy found no
//! placement, says in one sentence with numbers what is missing (offers,
//! matching agents, resources, whole-rank pieces, room for the launcher). It
//! only runs after a failure, so it may take its time to be precise. Never
//! decides a placement.

use crate::auto::Rule;
use crate::candidate::Candidate;
use crate::capacity::{Milli, UNLIMITED, Vector, from_milli};
use crate::demand::JobDemand;
use crate::ledger::Ledger;
use crate::unfit::{Unfit, UnfitKind};

/// Formats thousandths the way a user writes them: `16`, `9.5`, `0.125`.
pub(crate) fn amount(milli: Milli) -> String {
    let s = format!("{:.3}", from_milli(milli));
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// `1 cpu`, `0.5 cpus`, `16 cpus`.
pub(crate) fn cpus(milli: Milli) -> String {
    if milli == 1000 { "1 cpu".to_owned() } else { format!("{} cpus", amount(milli)) }
}

fn describe(v: &Vector) -> String {
    let mut s = format!("{}, {} MiB", cpus(v.cpus), amount(v.mem));
    if v.net > 0 {
        s.push_str(&format!(", {} Mbit/s", amount(v.net)));
    }
    s
}

/// Reads one resource out of a vector.
type Component = fn(&Vector) -> Milli;

fn plural(n: usize, one: &str) -> String {
    if n == 1 { format!("1 {one}") } else { format!("{n} {one}s") }
}

/// Explains why `job` found no placement on `ledger`, given the candidates
/// the strategy saw.
pub(crate) fn explain(job: &JobDemand, ledger: &Ledger<'_>, cands: &[Candidate], rule: Rule) -> Unfit {
    let ignored =
        if ledger.ignored.is_empty() { String::new() } else { format!(" (left out: {})", ledger.ignored.join("; ")) };
    if ledger.len() == 0 {
        return Unfit::new(UnfitKind::NoOffers, format!("no agent offers resources right now{ignored}"));
    }
    let selector: Vec<String> = job.node_selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let selector = selector.join(",");
    let scope = if selector.is_empty() { String::new() } else { format!(" on nodes with {selector}") };
    let matching: Vec<usize> = (0..ledger.len()).filter(|&i| ledger.agents[i].matches(&job.node_selector)).collect();
    if matching.is_empty() {
        return Unfit::new(
            UnfitKind::NoMatchingAgent,
            format!(
                "no agent matches nodeSelector {selector}; {} offered resources{ignored}",
                plural(ledger.len(), "agent")
            ),
        );
    }
    let per_rank = Vector::of(&job.per_rank);
    let launcher = Vector::of(&job.launcher);
    let across = plural(matching.len(), "agent");

    let mut short = Vec::new();
    let resources: [(&str, Component); 3] =
        [("cpus", |v| v.cpus), ("MiB of memory", |v| v.mem), ("Mbit/s of network", |v| v.net)];
    for (unit, get) in resources {
        let need = u128::from(get(&per_rank)) * u128::from(job.ranks) + u128::from(get(&launcher));
        let free: Vec<Milli> = matching.iter().map(|&i| get(&ledger.free[i])).collect();
        if free.contains(&UNLIMITED) {
            continue; // some agent does not account this resource
        }
        let offered: u128 = free.iter().map(|&m| u128::from(m)).sum();
        if need > offered {
            let fmt = |m: u128| amount(Milli::try_from(m).unwrap_or(Milli::MAX));
            short.push(format!("needs {} {unit}{scope}; {} offered across {across}", fmt(need), fmt(offered)));
        }
    }
    if !short.is_empty() {
        return Unfit::new(UnfitKind::InsufficientResources, format!("{}{ignored}", short.join("; ")));
    }

    if cands.is_empty() {
        return Unfit::new(
            UnfitKind::Fragmented,
            format!(
                "no agent{scope} has room for one rank ({}); {across} offer less each{ignored}",
                describe(&per_rank)
            ),
        );
    }
    let Some(least_loss) = cands.iter().filter(|c| c.can_lead()).map(|c| c.launcher_loss()).min() else {
        return Unfit::new(
            UnfitKind::NoRoomForLauncher,
            format!(
                "no agent{scope} has room for the launcher ({}) next to a rank ({}){ignored}",
                describe(&launcher),
                describe(&per_rank)
            ),
        );
    };
    let most: u64 = cands.iter().map(|c| u64::from(c.cap)).sum::<u64>() - u64::from(least_loss);
    let mut limits = Vec::new();
    if let Some(max) = job.max_ranks_per_node {
        limits.push(format!("maxRanksPerNode {max}"));
    }
    if rule.caps_ranks_at_cores() {
        limits.push("at most one rank per whole free cpu (profile balanced)".to_owned());
    }
    let limits = if limits.is_empty() { String::new() } else { format!(" with {}", limits.join(" and ")) };
    Unfit::new(
        UnfitKind::Fragmented,
        format!(
            "needs {} ranks of {} each{scope}, plus the launcher ({}) on the first node; \
             the {} with room for a rank can host at most {most}{limits}{ignored}",
            job.ranks,
            describe(&per_rank),
            describe(&launcher),
            plural(cands.len(), "agent"),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_read_like_a_user_writes_them() {
        for (milli, text) in [(16_000, "16"), (9_500, "9.5"), (125, "0.125"), (0, "0"), (100, "0.1")] {
            assert_eq!(amount(milli), text);
        }
    }
}
