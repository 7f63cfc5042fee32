//! The DRF sorter: orders roles, and frameworks inside each role, by
//! weighted dominant share (Ghodsi et al., NSDI 2011; Mesos'
//! `sorter/drf`). Pure data: no I/O, no clock, no knowledge of agents or
//! offers. The allocation loop asks it "who is furthest below their fair
//! share" and tells it what was allocated or given back.
//!
//! A client's share is `max over scalar resources r of allocated_r /
//! total_r`, divided by its weight; ties go to the client with fewer
//! allocations, then to the smaller name. Orders are kept in `BTreeSet`s
//! and updated per allocation, so picking the next client is O(log n)
//! rather than a full sort per agent; a change of the cluster total marks
//! every share stale and the next query rebuilds them once.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

/// Scalar amounts by resource name.
pub type Scalars = BTreeMap<String, f64>;

#[derive(Debug, Clone, PartialEq)]
struct Key {
    share: f64,
    count: u64,
    name: String,
}

impl Eq for Key {}

impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        self.share.total_cmp(&other.share).then(self.count.cmp(&other.count)).then_with(|| self.name.cmp(&other.name))
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[derive(Debug, Default)]
struct Client {
    allocation: Scalars,
    count: u64,
    active: bool,
    /// The key under which the client sits in its role's order, if active.
    key: Option<Key>,
}

#[derive(Debug)]
struct Role {
    allocation: Scalars,
    count: u64,
    clients: BTreeMap<String, Client>,
    /// Active clients in DRF order.
    order: BTreeSet<Key>,
    key: Option<Key>,
}

/// Two-level DRF: roles by weighted share, then frameworks by share within
/// their role.
#[derive(Debug, Default)]
pub struct DrfSorter {
    total: Scalars,
    weights: BTreeMap<String, f64>,
    roles: BTreeMap<String, Role>,
    role_order: BTreeSet<Key>,
    stale: bool,
}

fn add_into(into: &mut Scalars, amounts: &Scalars) {
    for (k, v) in amounts {
        *into.entry(k.clone()).or_default() += v;
    }
}

fn subtract_from(from: &mut Scalars, amounts: &Scalars) {
    for (k, v) in amounts {
        if let Some(x) = from.get_mut(k) {
            *x -= v;
            if *x <= 1e-9 {
                from.remove(k);
            }
        }
    }
}

/// The dominant share of `allocation` in `total`.
pub fn dominant_share(allocation: &Scalars, total: &Scalars) -> f64 {
    allocation.iter().filter_map(|(k, v)| total.get(k).filter(|t| **t > 0.0).map(|t| v / t)).fold(0.0, f64::max)
}

impl DrfSorter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets a role's weight (default 1). Higher weight = larger fair share.
    pub fn set_weight(&mut self, role: &str, weight: f64) {
        self.weights.insert(role.to_owned(), weight);
        self.rekey_role(role);
    }

    pub fn weight(&self, role: &str) -> f64 {
        self.weights.get(role).copied().filter(|w| *w > 0.0).unwrap_or(1.0)
    }

    pub fn add_total(&mut self, amounts: &Scalars) {
        add_into(&mut self.total, amounts);
        self.stale = true;
    }

    pub fn remove_total(&mut self, amounts: &Scalars) {
        subtract_from(&mut self.total, amounts);
        self.stale = true;
    }

    pub fn total(&self) -> &Scalars {
        &self.total
    }

    /// Adds framework `client` to `role` (active).
    pub fn add(&mut self, role: &str, client: &str) {
        let entry = self.roles.entry(role.to_owned()).or_insert_with(|| Role {
            allocation: Scalars::new(),
            count: 0,
            clients: BTreeMap::new(),
            order: BTreeSet::new(),
            key: None,
        });
        entry.clients.entry(client.to_owned()).or_default();
        self.activate(role, client);
        self.rekey_role(role);
    }

    /// Removes `client` from `role`, with whatever it still had allocated.
    pub fn remove(&mut self, role: &str, client: &str) {
        let Some(r) = self.roles.get_mut(role) else { return };
        if let Some(c) = r.clients.remove(client) {
            if let Some(k) = c.key {
                r.order.remove(&k);
            }
            subtract_from(&mut r.allocation, &c.allocation);
        }
        if r.clients.is_empty() {
            if let Some(k) = r.key.take() {
                self.role_order.remove(&k);
            }
            self.roles.remove(role);
        } else {
            self.rekey_role(role);
        }
    }

    pub fn contains(&self, role: &str, client: &str) -> bool {
        self.roles.get(role).is_some_and(|r| r.clients.contains_key(client))
    }

    /// Puts `client` back in its role's order (it receives offers again).
    pub fn activate(&mut self, role: &str, client: &str) {
        let total = &self.total;
        let Some(r) = self.roles.get_mut(role) else { return };
        let Some(c) = r.clients.get_mut(client) else { return };
        c.active = true;
        if c.key.is_none() {
            let key = Key { share: dominant_share(&c.allocation, total), count: c.count, name: client.to_owned() };
            r.order.insert(key.clone());
            c.key = Some(key);
        }
    }

    /// Takes `client` out of its role's order (suppressed or disconnected);
    /// its allocation still counts towards its role's share.
    pub fn deactivate(&mut self, role: &str, client: &str) {
        let Some(r) = self.roles.get_mut(role) else { return };
        let Some(c) = r.clients.get_mut(client) else { return };
        c.active = false;
        if let Some(k) = c.key.take() {
            r.order.remove(&k);
        }
    }

    /// Records that `amounts` were allocated to `client` in `role`.
    pub fn allocated(&mut self, role: &str, client: &str, amounts: &Scalars) {
        self.change(role, client, amounts, true);
    }

    /// Records that `amounts` came back from `client` in `role`.
    pub fn unallocated(&mut self, role: &str, client: &str, amounts: &Scalars) {
        self.change(role, client, amounts, false);
    }

    fn change(&mut self, role: &str, client: &str, amounts: &Scalars, allocate: bool) {
        let total = &self.total;
        let Some(r) = self.roles.get_mut(role) else { return };
        let Some(c) = r.clients.get_mut(client) else { return };
        if allocate {
            add_into(&mut c.allocation, amounts);
            add_into(&mut r.allocation, amounts);
            c.count += 1;
            r.count += 1;
        } else {
            subtract_from(&mut c.allocation, amounts);
            subtract_from(&mut r.allocation, amounts);
        }
        if let Some(old) = c.key.take() {
            r.order.remove(&old);
            let key = Key { share: dominant_share(&c.allocation, total), count: c.count, name: client.to_owned() };
            r.order.insert(key.clone());
            c.key = Some(key);
        }
        self.rekey_role(role);
    }

    fn rekey_role(&mut self, role: &str) {
        let weight = self.weight(role);
        let Some(r) = self.roles.get_mut(role) else { return };
        if let Some(old) = r.key.take() {
            self.role_order.remove(&old);
        }
        let key =
            Key { share: dominant_share(&r.allocation, &self.total) / weight, count: r.count, name: role.to_owned() };
        self.role_order.insert(key.clone());
        r.key = Some(key);
    }

    /// Recomputes every share after the cluster total changed.
    fn refresh(&mut self) {
        if !self.stale {
            return;
        }
        self.stale = false;
        self.role_order.clear();
        let names: Vec<String> = self.roles.keys().cloned().collect();
        for name in names {
            let total = &self.total;
            if let Some(r) = self.roles.get_mut(&name) {
                r.order.clear();
                for (client, c) in &mut r.clients {
                    c.key = c.active.then(|| Key {
                        share: dominant_share(&c.allocation, total),
                        count: c.count,
                        name: client.clone(),
                    });
                    if let Some(k) = &c.key {
                        r.order.insert(k.clone());
                    }
                }
                r.key = None;
            }
            self.rekey_role(&name);
        }
    }

    /// The first (role, framework) in DRF order for which `eligible` holds.
    /// Roles are visited by weighted share, frameworks within each role by
    /// share; inactive frameworks are never offered.
    pub fn pick(&mut self, mut eligible: impl FnMut(&str, &str) -> bool) -> Option<(String, String)> {
        self.refresh();
        for role_key in &self.role_order {
            let Some(r) = self.roles.get(&role_key.name) else { continue };
            for client_key in &r.order {
                if eligible(&role_key.name, &client_key.name) {
                    return Some((role_key.name.clone(), client_key.name.clone()));
                }
            }
        }
        None
    }

    /// Roles in DRF order.
    pub fn sorted_roles(&mut self) -> Vec<String> {
        self.refresh();
        self.role_order.iter().map(|k| k.name.clone()).collect()
    }

    /// Active frameworks of `role` in DRF order.
    pub fn sorted_clients(&mut self, role: &str) -> Vec<String> {
        self.refresh();
        self.roles.get(role).map(|r| r.order.iter().map(|k| k.name.clone()).collect()).unwrap_or_default()
    }

    /// The weighted dominant share of `role`.
    pub fn role_share(&self, role: &str) -> f64 {
        self.roles.get(role).map_or(0.0, |r| dominant_share(&r.allocation, &self.total) / self.weight(role))
    }

    /// What `role` has allocated in total.
    pub fn role_allocation(&self, role: &str) -> Scalars {
        self.roles.get(role).map(|r| r.allocation.clone()).unwrap_or_default()
    }

    pub fn roles(&self) -> impl Iterator<Item = &str> {
        self.roles.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scalars(pairs: &[(&str, f64)]) -> Scalars {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    #[test]
    fn the_framework_with_the_lowest_dominant_share_comes_first() {
        let mut s = DrfSorter::new();
        s.add_total(&scalars(&[("cpus", 9.0), ("mem", 18.0)]));
        s.add("r", "a");
        s.add("r", "b");
        s.allocated("r", "a", &scalars(&[("cpus", 1.0), ("mem", 4.0)])); // share 4/18
        s.allocated("r", "b", &scalars(&[("cpus", 3.0), ("mem", 1.0)])); // share 3/9
        assert_eq!(s.sorted_clients("r"), vec!["a", "b"]);
        s.allocated("r", "a", &scalars(&[("cpus", 1.0), ("mem", 4.0)])); // 8/18 > 3/9
        assert_eq!(s.sorted_clients("r"), vec!["b", "a"]);
    }

    #[test]
    fn role_weights_divide_the_share() {
        let mut s = DrfSorter::new();
        s.add_total(&scalars(&[("cpus", 10.0)]));
        s.set_weight("mpi", 2.0);
        s.add("mpi", "a");
        s.add("batch", "b");
        s.allocated("mpi", "a", &scalars(&[("cpus", 4.0)])); // 0.4 / 2 = 0.2
        s.allocated("batch", "b", &scalars(&[("cpus", 3.0)])); // 0.3
        assert_eq!(s.sorted_roles(), vec!["mpi", "batch"]);
    }

    #[test]
    fn an_inactive_framework_is_never_picked() {
        let mut s = DrfSorter::new();
        s.add_total(&scalars(&[("cpus", 1.0)]));
        s.add("r", "a");
        s.deactivate("r", "a");
        assert_eq!(s.pick(|_, _| true), None);
        s.activate("r", "a");
        assert_eq!(s.pick(|_, _| true), Some(("r".into(), "a".into())));
    }

    #[test]
    fn a_changed_total_reorders_by_the_new_shares() {
        let mut s = DrfSorter::new();
        s.add_total(&scalars(&[("cpus", 10.0), ("gpus", 1.0)]));
        s.add("r", "a");
        s.add("r", "b");
        s.allocated("r", "a", &scalars(&[("gpus", 0.5)])); // 0.5
        s.allocated("r", "b", &scalars(&[("cpus", 4.0)])); // 0.4
        assert_eq!(s.sorted_clients("r"), vec!["b", "a"]);
        s.add_total(&scalars(&[("gpus", 9.0)])); // a: 0.05
        assert_eq!(s.sorted_clients("r"), vec!["a", "b"]);
    }
}
