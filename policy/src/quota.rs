//! A role's quota limit (the offer layer's `--quota`, Mesos quota `limit`)
//! against a gang. The offer layer never lets a role hold more than its
//! limit, offered or used, so a gang whose whole demand (every rank and the
//! launcher) is larger can never be placed in that role, however much the
//! cluster frees: the job is told so at once, naming the limit, instead of
//! waiting for an offer that cannot come.

use std::collections::BTreeMap;

use crate::capacity::{Milli, Vector, to_milli};
use crate::demand::JobDemand;
use crate::explain::{amount, cpus};
use crate::unfit::{Unfit, UnfitKind};

/// The most of each resource a role may hold, by Mesos resource name
/// (`cpus`; `mem` in MiB). Names the placement does not count are ignored.
pub type QuotaLimit = BTreeMap<String, f64>;

/// Why `demand` can never run in `role` under `limit`, naming the limit;
/// `None` when the whole gang fits under it.
pub fn exceeds_quota(demand: &JobDemand, role: &str, limit: &QuotaLimit) -> Option<Unfit> {
    let ranks = Vector::of(&demand.per_rank).times(demand.ranks);
    let launcher = Vector::of(&demand.launcher);
    let need_cpus = ranks.cpus.saturating_add(launcher.cpus);
    let need_mem = ranks.mem.saturating_add(launcher.mem);
    let over = |name: &str, need: Milli| {
        let cap = limit.get(name).and_then(|v| to_milli(*v))?;
        (need > cap).then_some(cap)
    };
    let (need, cap) = if let Some(cap) = over("cpus", need_cpus) {
        (cpus(need_cpus), cpus(cap))
    } else {
        let cap = over("mem", need_mem)?;
        (format!("{} MiB of memory", amount(need_mem)), format!("{} MiB", amount(cap)))
    };
    let ranks = demand.ranks;
    Some(Unfit::new(
        UnfitKind::ExceedsQuota,
        format!(
            "the gang needs {need} in all ({ranks} rank{} and the launcher), more than the quota limit of role {role} ({cap}); \
             it can never run in this role: ask for fewer or smaller ranks, or the operator for a higher limit",
            if ranks == 1 { "" } else { "s" },
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demand::Resources;

    fn limit(pairs: &[(&str, f64)]) -> QuotaLimit {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    #[test]
    fn a_gang_over_its_roles_cpu_or_memory_limit_is_told_the_limit_and_one_under_it_is_not() {
        // 4 ranks of 1 cpu and 512 MiB, plus the default launcher (0.1 cpu, 64 MiB).
        let demand = JobDemand::new(4, Resources::new(1.0, 512.0, 0.0));
        let unfit = exceeds_quota(&demand, "team-a", &limit(&[("cpus", 4.0)])).expect("4.1 cpus > 4");
        assert_eq!(unfit.kind, UnfitKind::ExceedsQuota);
        assert!(
            unfit.reason.starts_with(
                "the gang needs 4.1 cpus in all (4 ranks and the launcher), more than the quota limit of role team-a (4 cpus)"
            ),
            "{}",
            unfit.reason
        );
        let mem = exceeds_quota(&demand, "team-a", &limit(&[("cpus", 8.0), ("mem", 2048.0)])).expect("2112 MiB > 2048");
        assert!(
            mem.reason.contains("needs 2112 MiB of memory in all") && mem.reason.contains("(2048 MiB)"),
            "{}",
            mem.reason
        );
        assert_eq!(
            exceeds_quota(&demand, "team-a", &limit(&[("cpus", 4.1), ("mem", 2112.0)])),
            None,
            "exactly at the limit"
        );
        assert_eq!(exceeds_quota(&demand, "team-a", &limit(&[("disk", 1.0)])), None, "names not placed are ignored");
        assert_eq!(exceeds_quota(&demand, "team-a", &QuotaLimit::new()), None);
        let one = exceeds_quota(&JobDemand::new(1, Resources::new(1.0, 1.0, 0.0)), "r", &limit(&[("cpus", 1.0)]));
        assert!(one.is_some_and(|u| u.reason.contains("(1 rank and the launcher)")));
    }
}
