//! The allocation loop: which free resources go to which framework, and
//! when. It owns per-agent capacity and allocation, frameworks' roles and
//! suppression, and refusal filters; it asks the [`DrfSorter`] for the
//! order. It never talks to the network and never reads a clock: callers
//! pass `now` (time since the master started), so tests need no sleeps.
//!
//! Mesos' rules (hierarchical allocator):
//! - each allocation gives one framework, in one role, everything that is
//!   free on one agent;
//! - an agent is only offered if what is free is allocatable (by default at
//!   least `cpus:0.01` or `mem:32`);
//! - a refusal filter (from DECLINE or the unused part of an ACCEPT) keeps
//!   an agent's resources from that (framework, role) until it expires, but
//!   only while the free resources are a subset of the refused ones; each
//!   refusal is its own filter, never merged with an earlier one (a
//!   framework that refused 0.1 cpu and later 0.9 cpu of an agent has not
//!   refused the 1 cpu that is free once both are back);
//! - SUPPRESS takes a framework's role out of the sorter, REVIVE puts it
//!   back and clears that role's filters;
//! - a role's quota limit (Mesos quota `limit`) caps what the role holds,
//!   offered or used, summed over all agents: a grant is what is free cut
//!   down to the role's headroom, and a role without allocatable headroom
//!   is passed over (the next role in DRF order gets the agent).

use crate::drf::{DrfSorter, Scalars};
use mpiswarm_mesos::quantities::Quantities;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

/// One grant of resources: the master turns each into an offer.
#[derive(Debug, Clone, PartialEq)]
pub struct Allocation {
    pub framework: String,
    pub role: String,
    pub agent: String,
    pub resources: Quantities,
}

#[derive(Debug)]
struct AgentEntry {
    total: Quantities,
    allocated: Quantities,
    /// What each (framework, role) holds on this agent, offered or used.
    allocations: HashMap<(String, String), Quantities>,
    active: bool,
    /// Behind on its launches ([`Allocator::set_backlogged`]): offered to no
    /// one until it caught up.
    backlogged: bool,
}

#[derive(Debug, Default)]
struct FrameworkEntry {
    roles: BTreeSet<String>,
    suppressed: BTreeSet<String>,
    active: bool,
}

#[derive(Debug, Clone)]
struct RefusalFilter {
    resources: Quantities,
    expires: Duration,
}

impl RefusalFilter {
    /// Whether this refusal keeps `free` from its (framework, role) at `now`:
    /// it has not expired and `free` is no more than what was refused.
    fn refuses(&self, free: &Quantities, now: Duration) -> bool {
        self.expires > now && self.resources.contains(free)
    }
}

/// Tunables of the loop.
#[derive(Debug, Clone)]
pub struct AllocatorConfig {
    /// Free resources are offered if they contain at least one of these.
    pub min_allocatable: Vec<Quantities>,
    /// Filters last at least this long (MESOS-4302).
    pub allocation_interval: Duration,
}

impl Default for AllocatorConfig {
    fn default() -> Self {
        Self {
            min_allocatable: vec![Quantities::scalar("cpus", 0.01), Quantities::scalar("mem", 32.0)],
            allocation_interval: Duration::from_secs(1),
        }
    }
}

/// The allocator's books.
#[derive(Debug, Default)]
pub struct Allocator {
    config: AllocatorConfig,
    sorter: DrfSorter,
    agents: BTreeMap<String, AgentEntry>,
    frameworks: HashMap<String, FrameworkEntry>,
    /// The live refusals of each (framework, role, agent).
    filters: HashMap<(String, String, String), Vec<RefusalFilter>>,
    /// Quota limits by role: the most of each named scalar the role may hold.
    limits: BTreeMap<String, Scalars>,
}

/// `free` with every scalar `headroom` names cut down to it (others whole).
fn within(free: &Quantities, headroom: &Scalars) -> Quantities {
    let mut q = free.clone();
    for (name, room) in headroom {
        if let Some(v) = q.scalars.get_mut(name) {
            *v = v.min(room.max(0.0));
        }
    }
    q.scalars.retain(|_, v| *v > 1e-6);
    q
}

fn scalars(q: &Quantities) -> Scalars {
    q.scalars.clone()
}

impl Allocator {
    pub fn new(config: AllocatorConfig) -> Self {
        Self { config, ..Self::default() }
    }

    pub fn sorter(&self) -> &DrfSorter {
        &self.sorter
    }

    pub fn set_weight(&mut self, role: &str, weight: f64) {
        self.sorter.set_weight(role, weight);
    }

    /// Caps what `role` may hold (offered or used) at `limit`, by scalar
    /// name; an empty limit removes the cap. What the role holds already
    /// stays; it is only offered no more until it is under the limit.
    pub fn set_limit(&mut self, role: &str, limit: Scalars) {
        if limit.is_empty() {
            self.limits.remove(role);
        } else {
            self.limits.insert(role.to_owned(), limit);
        }
    }

    /// The quota limits, by role.
    pub fn limits(&self) -> &BTreeMap<String, Scalars> {
        &self.limits
    }

    /// Adds an agent with `total` capacity; `used` lists what its running
    /// tasks already hold, per (framework, role).
    pub fn add_agent(&mut self, agent: &str, total: Quantities, used: &[(String, String, Quantities)]) {
        self.remove_agent(agent);
        self.sorter.add_total(&scalars(&total));
        self.agents.insert(
            agent.to_owned(),
            AgentEntry {
                total,
                allocated: Quantities::new(),
                allocations: HashMap::new(),
                active: true,
                backlogged: false,
            },
        );
        for (framework, role, resources) in used {
            self.allocate_to(framework, role, agent, resources);
        }
    }

    /// Removes an agent and everything allocated on it.
    pub fn remove_agent(&mut self, agent: &str) {
        let Some(entry) = self.agents.remove(agent) else { return };
        for ((framework, role), q) in &entry.allocations {
            self.sorter.unallocated(role, framework, &scalars(q));
        }
        self.sorter.remove_total(&scalars(&entry.total));
        self.filters.retain(|(_, _, a), _| a != agent);
    }

    /// Marks which agents are behind on their launches: each of them keeps
    /// its allocations but is offered to no one while it is. Returns how
    /// many agents are marked.
    pub fn set_backlogged(&mut self, backlogged: impl Fn(&str) -> bool) -> usize {
        let mut marked = 0;
        for (id, a) in &mut self.agents {
            a.backlogged = backlogged(id);
            marked += usize::from(a.backlogged);
        }
        marked
    }

    /// Whether `agent` is marked behind on its launches.
    pub fn is_backlogged(&self, agent: &str) -> bool {
        self.agents.get(agent).is_some_and(|a| a.backlogged)
    }

    /// An inactive agent keeps its allocations but is offered to no one.
    pub fn set_agent_active(&mut self, agent: &str, active: bool) {
        if let Some(a) = self.agents.get_mut(agent) {
            a.active = active;
        }
    }

    /// Adds (or updates) a framework subscribed to `roles`, with some of them suppressed.
    pub fn add_framework(&mut self, framework: &str, roles: &[String], suppressed: &[String]) {
        let entry = self.frameworks.entry(framework.to_owned()).or_default();
        let new_roles: BTreeSet<String> = roles.iter().cloned().collect();
        let old_roles = std::mem::replace(&mut entry.roles, new_roles.clone());
        entry.suppressed = suppressed.iter().filter(|r| new_roles.contains(*r)).cloned().collect();
        entry.active = true;
        for role in old_roles.difference(&new_roles) {
            // A role the framework left keeps its allocations until they are recovered.
            self.sorter.deactivate(role, framework);
        }
        for role in &new_roles {
            if !self.sorter.contains(role, framework) {
                self.sorter.add(role, framework);
            }
        }
        self.sync_framework(framework);
    }

    /// Removes a framework; anything still allocated to it is recovered.
    pub fn remove_framework(&mut self, framework: &str) {
        if self.frameworks.remove(framework).is_none() {
            return;
        }
        for agent in self.agents.values_mut() {
            let keys: Vec<_> = agent.allocations.keys().filter(|(f, _)| f == framework).cloned().collect();
            for key in keys {
                if let Some(q) = agent.allocations.remove(&key) {
                    agent.allocated.subtract(&q);
                }
            }
        }
        for role in self.sorter.roles().map(str::to_owned).collect::<Vec<_>>() {
            if self.sorter.contains(&role, framework) {
                self.sorter.remove(&role, framework);
            }
        }
        self.filters.retain(|(f, _, _), _| f != framework);
    }

    pub fn set_framework_active(&mut self, framework: &str, active: bool) {
        if let Some(f) = self.frameworks.get_mut(framework) {
            f.active = active;
        }
        self.sync_framework(framework);
    }

    fn sync_framework(&mut self, framework: &str) {
        let Some(f) = self.frameworks.get(framework) else { return };
        for role in &f.roles {
            if f.active && !f.suppressed.contains(role) {
                self.sorter.activate(role, framework);
            } else {
                self.sorter.deactivate(role, framework);
            }
        }
    }

    /// SUPPRESS: no offers for `roles` (all of the framework's roles if empty).
    pub fn suppress(&mut self, framework: &str, roles: &[String]) {
        let Some(f) = self.frameworks.get_mut(framework) else { return };
        let roles: Vec<String> = if roles.is_empty() { f.roles.iter().cloned().collect() } else { roles.to_vec() };
        f.suppressed.extend(roles.into_iter().filter(|r| f.roles.contains(r)));
        self.sync_framework(framework);
    }

    /// REVIVE: offers again for `roles` (all if empty), and their filters are cleared.
    pub fn revive(&mut self, framework: &str, roles: &[String]) {
        let Some(f) = self.frameworks.get_mut(framework) else { return };
        let roles: Vec<String> = if roles.is_empty() { f.roles.iter().cloned().collect() } else { roles.to_vec() };
        for role in &roles {
            f.suppressed.remove(role);
        }
        self.filters.retain(|(fw, role, _), _| fw != framework || !roles.contains(role));
        self.sync_framework(framework);
    }

    pub fn is_suppressed(&self, framework: &str, role: &str) -> bool {
        self.frameworks.get(framework).is_some_and(|f| f.suppressed.contains(role))
    }

    /// Records resources held by `framework` in `role` on `agent` outside of
    /// the loop (tasks found on a re-registering agent).
    pub fn allocate_to(&mut self, framework: &str, role: &str, agent: &str, resources: &Quantities) {
        let Some(a) = self.agents.get_mut(agent) else { return };
        a.allocated.add(resources);
        a.allocations.entry((framework.to_owned(), role.to_owned())).or_default().add(resources);
        if !self.sorter.contains(role, framework) {
            // A framework not (yet) subscribed to the role: count it, but inactive.
            self.sorter.add(role, framework);
            let active = self.frameworks.get(framework).is_some_and(|f| f.active && f.roles.contains(role));
            if !active {
                self.sorter.deactivate(role, framework);
            }
        }
        self.sorter.allocated(role, framework, &scalars(resources));
    }

    /// Gives `resources` back from (framework, role) on `agent`. With
    /// `refuse` the framework will not be offered them again in that role
    /// until `now + max(refuse, allocation_interval)`; `Duration::ZERO` or
    /// `None` installs no filter.
    pub fn recover(
        &mut self,
        framework: &str,
        role: &str,
        agent: &str,
        resources: &Quantities,
        refuse: Option<Duration>,
        now: Duration,
    ) {
        let Some(a) = self.agents.get_mut(agent) else { return };
        let key = (framework.to_owned(), role.to_owned());
        let Some(held) = a.allocations.get_mut(&key) else { return };
        // Never give back more than is held: books stay consistent even if
        // the master double-recovers.
        let mut back = resources.clone();
        back.scalars.retain(|k, v| {
            *v = v.min(held.get_scalar(k));
            *v > 0.0
        });
        held.subtract(&back);
        if held.is_empty() {
            a.allocations.remove(&key);
        }
        a.allocated.subtract(&back);
        self.sorter.unallocated(role, framework, &scalars(&back));
        if let Some(refuse) = refuse.filter(|d| !d.is_zero()) {
            let expires = now + refuse.max(self.config.allocation_interval);
            let filter_key = (framework.to_owned(), role.to_owned(), agent.to_owned());
            let live = self.filters.entry(filter_key).or_default();
            live.retain(|f| f.expires > now);
            match live.iter_mut().find(|f| f.resources == back) {
                // The same refusal again only extends the filter it already has.
                Some(f) => f.expires = f.expires.max(expires),
                None => live.push(RefusalFilter { resources: back, expires }),
            }
        }
    }

    fn allocatable(config: &AllocatorConfig, free: &Quantities) -> bool {
        !free.is_empty() && config.min_allocatable.iter().any(|m| free.contains(m))
    }

    /// One allocation cycle over `agents` (all active agents if `None`).
    pub fn allocate(&mut self, now: Duration, agents: Option<&[String]>) -> Vec<Allocation> {
        self.filters.retain(|_, live| {
            live.retain(|f| f.expires > now);
            !live.is_empty()
        });
        // Filters by agent, so each agent costs one lookup at most.
        let mut filters_by_agent: HashMap<&str, Vec<(&str, &str, &RefusalFilter)>> = HashMap::new();
        for ((fw, role, agent), live) in &self.filters {
            let list = filters_by_agent.entry(agent.as_str()).or_default();
            list.extend(live.iter().map(|f| (fw.as_str(), role.as_str(), f)));
        }
        let Self { config, sorter, agents: all_agents, limits, .. } = self;
        // What each capped role may still be given, kept up to date as this cycle grants.
        let mut headroom: HashMap<String, Scalars> = limits
            .iter()
            .map(|(role, limit)| {
                let held = sorter.role_allocation(role);
                let room = limit.iter().map(|(k, v)| (k.clone(), v - held.get(k).copied().unwrap_or(0.0))).collect();
                (role.clone(), room)
            })
            .collect();
        let mut out = Vec::new();
        let mut visit = |agent: &String, a: &mut AgentEntry| {
            if !a.active || a.backlogged {
                return;
            }
            let free = a.total.minus(&a.allocated);
            if !Self::allocatable(config, &free) {
                return;
            }
            let refusals = filters_by_agent.get(agent.as_str());
            let grant_for = |role: &str, headroom: &HashMap<String, Scalars>| match headroom.get(role) {
                Some(room) => within(&free, room),
                None => free.clone(),
            };
            // A capped role with no room left in one of its limited scalars
            // is passed over: memory without cpus runs no task.
            let exhausted = |role: &str| headroom.get(role).is_some_and(|room| room.values().any(|v| *v <= 1e-6));
            let picked = sorter.pick(|role, framework| {
                let grant = grant_for(role, &headroom);
                !exhausted(role)
                    && Self::allocatable(config, &grant)
                    && !refusals.is_some_and(|list| {
                        list.iter().any(|(fw, r, f)| *fw == framework && *r == role && f.refuses(&grant, now))
                    })
            });
            let Some((role, framework)) = picked else { return };
            let grant = grant_for(&role, &headroom);
            if let Some(room) = headroom.get_mut(&role) {
                for (k, v) in room.iter_mut() {
                    *v -= grant.get_scalar(k);
                }
            }
            a.allocated.add(&grant);
            a.allocations.entry((framework.clone(), role.clone())).or_default().add(&grant);
            sorter.allocated(&role, &framework, &scalars(&grant));
            out.push(Allocation { framework, role, agent: agent.clone(), resources: grant });
        };
        match agents {
            None => all_agents.iter_mut().for_each(|(id, a)| visit(id, a)),
            Some(list) => {
                for id in list {
                    if let Some(a) = all_agents.get_mut(id) {
                        visit(id, a);
                    }
                }
            }
        }
        out
    }

    /// Capacity, allocated and free resources of `agent`.
    pub fn agent_resources(&self, agent: &str) -> Option<(Quantities, Quantities)> {
        self.agents.get(agent).map(|a| (a.total.clone(), a.allocated.clone()))
    }

    /// Whether a refusal filter currently blocks `free` from (framework, role) on agent.
    pub fn filtered(&self, framework: &str, role: &str, agent: &str, free: &Quantities, now: Duration) -> bool {
        self.filters
            .get(&(framework.to_owned(), role.to_owned(), agent.to_owned()))
            .is_some_and(|live| live.iter().any(|f| f.refuses(free, now)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(cpus: f64, mem: f64) -> Quantities {
        let mut q = Quantities::scalar("cpus", cpus);
        q.add(&Quantities::scalar("mem", mem));
        q
    }

    fn one_agent_one_framework() -> Allocator {
        let mut a = Allocator::new(AllocatorConfig::default());
        a.add_agent("s1", q(4.0, 4096.0), &[]);
        a.add_framework("f1", &["r".to_owned()], &[]);
        a
    }

    #[test]
    fn a_framework_gets_all_free_resources_of_an_agent() {
        let mut a = one_agent_one_framework();
        let out = a.allocate(Duration::ZERO, None);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].resources, q(4.0, 4096.0));
        assert!(a.allocate(Duration::ZERO, None).is_empty(), "nothing is free any more");
    }

    #[test]
    fn a_declined_resource_is_not_reoffered_within_refuse_seconds() {
        let mut a = one_agent_one_framework();
        let out = a.allocate(Duration::ZERO, None);
        a.recover("f1", "r", "s1", &out[0].resources, Some(Duration::from_secs(5)), Duration::ZERO);
        assert!(a.allocate(Duration::from_secs(4), None).is_empty());
        assert_eq!(a.allocate(Duration::from_secs(5), None).len(), 1);
    }

    #[test]
    fn a_filter_only_blocks_subsets_of_the_refused_resources() {
        let mut a = one_agent_one_framework();
        let out = a.allocate(Duration::ZERO, None);
        // The framework launches 1 cpu and refuses the rest.
        let used = q(1.0, 1024.0);
        a.recover("f1", "r", "s1", &out[0].resources.minus(&used), Some(Duration::from_secs(60)), Duration::ZERO);
        assert!(a.allocate(Duration::from_secs(1), None).is_empty());
        // The task ends: now more is free than was refused, so it is offered.
        a.recover("f1", "r", "s1", &used, None, Duration::from_secs(2));
        assert_eq!(a.allocate(Duration::from_secs(2), None)[0].resources, q(4.0, 4096.0));
    }

    #[test]
    fn two_refusals_are_two_filters_and_do_not_add_up_to_what_is_free_after_both() {
        let cpus = |c| Quantities::scalar("cpus", c);
        let mut a = one_agent_one_framework();
        a.allocate(Duration::ZERO, None);
        // A launcher of 0.1 cpu ends; the framework refuses that 0.1.
        a.recover("f1", "r", "s1", &cpus(0.1), Some(Duration::from_secs(60)), Duration::ZERO);
        assert!(a.allocate(Duration::from_secs(1), None).is_empty(), "the refused 0.1 is filtered");
        // Its 0.9-cpu workers end: 1 cpu free, more than was refused, offered ...
        a.recover("f1", "r", "s1", &cpus(0.9), None, Duration::from_secs(1));
        let out = a.allocate(Duration::from_secs(1), None);
        assert_eq!(out.len(), 1);
        // ... the framework keeps 0.1 of it and refuses 0.9; then the 0.1 comes back.
        a.recover("f1", "r", "s1", &cpus(0.9), Some(Duration::from_secs(60)), Duration::from_secs(2));
        a.recover("f1", "r", "s1", &cpus(0.1), None, Duration::from_secs(3));
        // Neither refusal holds the whole 1 cpu now free (merged, they would).
        assert!(a.filtered("f1", "r", "s1", &cpus(0.9), Duration::from_secs(3)));
        assert!(!a.filtered("f1", "r", "s1", &cpus(1.0), Duration::from_secs(3)));
        let out = a.allocate(Duration::from_secs(3), None);
        assert_eq!(out.len(), 1, "1 cpu is offered again");
        assert!((out[0].resources.get_scalar("cpus") - 1.0).abs() < 1e-9, "{:?}", out[0].resources);
    }

    #[test]
    fn refuse_seconds_zero_installs_no_filter_and_revive_clears_filters() {
        let mut a = one_agent_one_framework();
        let out = a.allocate(Duration::ZERO, None);
        a.recover("f1", "r", "s1", &out[0].resources, Some(Duration::ZERO), Duration::ZERO);
        let out = a.allocate(Duration::ZERO, None);
        assert_eq!(out.len(), 1);
        a.recover("f1", "r", "s1", &out[0].resources, Some(Duration::from_secs(3600)), Duration::ZERO);
        assert!(a.allocate(Duration::ZERO, None).is_empty());
        a.revive("f1", &[]);
        assert_eq!(a.allocate(Duration::ZERO, None).len(), 1);
    }

    #[test]
    fn a_suppressed_framework_gets_no_offers_until_revived() {
        let mut a = one_agent_one_framework();
        a.suppress("f1", &[]);
        assert!(a.allocate(Duration::ZERO, None).is_empty());
        a.revive("f1", &["r".to_owned()]);
        assert_eq!(a.allocate(Duration::ZERO, None).len(), 1);
    }

    #[test]
    fn a_backlogged_agent_is_not_offered_until_it_caught_up() {
        let mut a = Allocator::new(AllocatorConfig::default());
        a.add_agent("s1", Quantities::scalar("cpus", 4.0), &[]);
        a.add_agent("s2", Quantities::scalar("cpus", 4.0), &[]);
        a.add_framework("f1", &["r".to_owned()], &[]);
        assert_eq!(a.set_backlogged(|agent| agent == "s1"), 1);
        assert!(a.is_backlogged("s1") && !a.is_backlogged("s2"));
        let agents: Vec<String> = a.allocate(Duration::ZERO, None).into_iter().map(|x| x.agent).collect();
        assert_eq!(agents, vec!["s2".to_owned()]);
        assert_eq!(a.set_backlogged(|_| false), 0);
        let agents: Vec<String> = a.allocate(Duration::ZERO, None).into_iter().map(|x| x.agent).collect();
        assert_eq!(agents, vec!["s1".to_owned()], "s1 offered once it caught up");
    }

    #[test]
    fn an_inactive_agent_is_not_offered() {
        let mut a = one_agent_one_framework();
        a.set_agent_active("s1", false);
        assert!(a.allocate(Duration::ZERO, None).is_empty());
    }

    fn limit(cpus: f64) -> Scalars {
        Scalars::from([("cpus".to_owned(), cpus)])
    }

    #[test]
    fn a_role_at_its_quota_limit_gets_no_more_and_the_next_role_gets_the_agent() {
        let mut a = Allocator::new(AllocatorConfig::default());
        for s in ["s1", "s2", "s3"] {
            a.add_agent(s, q(2.0, 1024.0), &[]);
        }
        a.add_framework("capped", &["team-a".to_owned()], &[]);
        a.add_framework("other", &["team-b".to_owned()], &[]);
        a.set_weight("team-a", 100.0); // team-a first in DRF order whenever it may take
        a.set_limit("team-a", limit(3.0));
        let mut grants = a.allocate(Duration::ZERO, None);
        let of = |grants: &[Allocation], role: &str| {
            grants.iter().filter(|g| g.role == role).map(|g| g.resources.get_scalar("cpus")).sum::<f64>()
        };
        assert_eq!(of(&grants, "team-a"), 3.0, "capped at its limit: {grants:?}");
        assert_eq!(of(&grants, "team-b"), 2.0, "s3, passed over by the capped role: {grants:?}");
        let cut =
            grants.iter().find(|g| g.role == "team-a" && g.resources.get_scalar("cpus") < 2.0).expect("a cut grant");
        assert_eq!(cut.resources.get_scalar("mem"), 1024.0, "only the limited scalar is cut");
        grants.extend(a.allocate(Duration::ZERO, None));
        assert_eq!(of(&grants, "team-b"), 3.0, "what the cut left free went to the next role: {grants:?}");
        assert_eq!(of(&grants, "team-a"), 3.0, "and nothing more, not even memory alone: {grants:?}");
        assert_eq!(a.sorter().role_allocation("team-a")["cpus"], 3.0);
    }

    #[test]
    fn what_a_capped_role_gives_back_is_headroom_again_and_a_limit_can_be_lifted() {
        let mut a = Allocator::new(AllocatorConfig::default());
        a.add_agent("s1", q(4.0, 1024.0), &[]);
        a.add_agent("s2", q(4.0, 1024.0), &[]);
        a.add_framework("f", &["r".to_owned()], &[]);
        a.set_limit("r", limit(4.0));
        let first = a.allocate(Duration::ZERO, None);
        assert_eq!(first.len(), 1, "one agent's worth: {first:?}");
        assert!(a.allocate(Duration::ZERO, None).is_empty(), "at the limit");
        a.recover("f", "r", &first[0].agent, &q(1.0, 0.0), None, Duration::ZERO);
        let again = a.allocate(Duration::ZERO, None);
        assert_eq!(again.iter().map(|g| g.resources.get_scalar("cpus")).sum::<f64>(), 1.0, "{again:?}");
        a.set_limit("r", Scalars::new());
        let lifted = a.allocate(Duration::ZERO, None);
        assert_eq!(lifted.iter().map(|g| g.resources.get_scalar("cpus")).sum::<f64>(), 4.0, "all of s2: {lifted:?}");
        assert!(a.limits().is_empty());
    }
}
