//! Arithmetic over unreserved resources: [`Quantities`] adds, subtracts and
//! compares lists of `Resource` by name (scalars by value, ranges and sets by
//! their members). Roles and reservations are not part of a quantity; the
//! caller decides whose resources these are.

use crate::resources::{Range, Resource, ValueType};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// Scalars below this are treated as zero, as Mesos' fixed-point scalars do.
const EPSILON: f64 = 1e-6;

/// A bag of resources by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Quantities {
    pub scalars: BTreeMap<String, f64>,
    /// Inclusive, sorted, non-overlapping, coalesced ranges.
    pub ranges: BTreeMap<String, Vec<(u64, u64)>>,
    pub sets: BTreeMap<String, BTreeSet<String>>,
}

impl Quantities {
    pub fn new() -> Self {
        Self::default()
    }

    /// The quantities of `resources` (wrongly typed entries count as empty).
    pub fn from_resources(resources: &[Resource]) -> Self {
        let mut q = Self::new();
        for r in resources {
            q.add_resource(r);
        }
        q
    }

    fn add_resource(&mut self, r: &Resource) {
        match r.kind {
            ValueType::Scalar => {
                let v = r.scalar.as_ref().map_or(0.0, |s| s.value);
                if v > EPSILON {
                    *self.scalars.entry(r.name.clone()).or_default() += v;
                }
            }
            ValueType::Ranges => {
                let list = r.ranges.as_ref().map(|rs| rs.range.as_slice()).unwrap_or_default();
                let ranges: Vec<(u64, u64)> = list.iter().map(|Range { begin, end }| (*begin, *end)).collect();
                if !ranges.is_empty() {
                    let merged = merge(self.ranges.remove(&r.name).unwrap_or_default().into_iter().chain(ranges));
                    self.ranges.insert(r.name.clone(), merged);
                }
            }
            ValueType::Set => {
                let items = r.set.as_ref().map(|s| s.item.as_slice()).unwrap_or_default();
                if !items.is_empty() {
                    self.sets.entry(r.name.clone()).or_default().extend(items.iter().cloned());
                }
            }
            ValueType::Text => {}
        }
    }

    /// A single scalar quantity, e.g. `Quantities::scalar("cpus", 1.0)`.
    pub fn scalar(name: &str, value: f64) -> Self {
        let mut q = Self::new();
        if value > EPSILON {
            q.scalars.insert(name.to_owned(), value);
        }
        q
    }

    pub fn get_scalar(&self, name: &str) -> f64 {
        self.scalars.get(name).copied().unwrap_or(0.0)
    }

    pub fn is_empty(&self) -> bool {
        self.scalars.is_empty() && self.ranges.is_empty() && self.sets.is_empty()
    }

    /// Whether every resource of `other` is within `self`.
    pub fn contains(&self, other: &Quantities) -> bool {
        other.scalars.iter().all(|(k, v)| self.get_scalar(k) + EPSILON >= *v)
            && other.ranges.iter().all(|(k, theirs)| {
                let ours = self.ranges.get(k).map(Vec::as_slice).unwrap_or_default();
                theirs.iter().all(|r| ours.iter().any(|o| o.0 <= r.0 && r.1 <= o.1))
            })
            && other.sets.iter().all(|(k, theirs)| self.sets.get(k).is_some_and(|ours| theirs.is_subset(ours)))
    }

    pub fn add(&mut self, other: &Quantities) {
        for (k, v) in &other.scalars {
            *self.scalars.entry(k.clone()).or_default() += v;
        }
        for (k, theirs) in &other.ranges {
            let merged = merge(self.ranges.remove(k).unwrap_or_default().into_iter().chain(theirs.iter().copied()));
            self.ranges.insert(k.clone(), merged);
        }
        for (k, theirs) in &other.sets {
            self.sets.entry(k.clone()).or_default().extend(theirs.iter().cloned());
        }
    }

    /// Removes `other` from `self`; what `self` lacks is simply not removed,
    /// so callers check [`Quantities::contains`] first when that matters.
    pub fn subtract(&mut self, other: &Quantities) {
        for (k, v) in &other.scalars {
            if let Some(ours) = self.scalars.get_mut(k) {
                *ours -= v;
                if *ours <= EPSILON {
                    self.scalars.remove(k);
                }
            }
        }
        for (k, theirs) in &other.ranges {
            if let Some(ours) = self.ranges.get_mut(k) {
                *ours = subtract_ranges(ours, theirs);
                if ours.is_empty() {
                    self.ranges.remove(k);
                }
            }
        }
        for (k, theirs) in &other.sets {
            if let Some(ours) = self.sets.get_mut(k) {
                ours.retain(|i| !theirs.contains(i));
                if ours.is_empty() {
                    self.sets.remove(k);
                }
            }
        }
    }

    /// `self - other` as a new value.
    pub fn minus(&self, other: &Quantities) -> Quantities {
        let mut q = self.clone();
        q.subtract(other);
        q
    }

    /// The wire form, each resource allocated to `role` when given.
    pub fn to_resources(&self, role: Option<&str>) -> Vec<Resource> {
        let mut out: Vec<Resource> = self
            .scalars
            .iter()
            .map(|(k, v)| Resource::scalar(k, round_scalar(*v)))
            .chain(self.ranges.iter().map(|(k, rs)| Resource::ranges(k, rs.iter().copied())))
            .chain(self.sets.iter().map(|(k, s)| Resource::set(k, s.iter().cloned())))
            .collect();
        for r in &mut out {
            r.role = Some("*".to_owned());
            if let Some(role) = role {
                *r = r.clone().allocated_to(role);
            }
        }
        out
    }
}

impl std::str::FromStr for Quantities {
    type Err = String;

    /// Mesos' resource text: `cpus:4;mem:4096;ports:[31000-32000,33000-33010];gpus:{g0,g1}`.
    fn from_str(text: &str) -> Result<Self, String> {
        let mut q = Quantities::new();
        for part in text.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = part.split_once(':').ok_or_else(|| format!("resource '{part}' is not NAME:VALUE"))?;
            let (name, value) = (name.trim(), value.trim());
            if name.is_empty() {
                return Err(format!("resource '{part}' has no name"));
            }
            if let Some(inner) = value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
                let mut ranges = Vec::new();
                for r in inner.split(',').map(str::trim).filter(|r| !r.is_empty()) {
                    let (b, e) =
                        r.split_once('-').ok_or_else(|| format!("range '{r}' of '{name}' is not BEGIN-END"))?;
                    let parse = |x: &str| {
                        x.trim().parse::<u64>().map_err(|_| format!("range '{r}' of '{name}' is not numeric"))
                    };
                    let (b, e) = (parse(b)?, parse(e)?);
                    if b > e {
                        return Err(format!("range '{r}' of '{name}' ends before it begins"));
                    }
                    ranges.push((b, e));
                }
                q.add_resource(&Resource::ranges(name, ranges));
            } else if let Some(inner) = value.strip_prefix('{').and_then(|v| v.strip_suffix('}')) {
                let items = inner.split(',').map(str::trim).filter(|i| !i.is_empty()).map(str::to_owned);
                q.add_resource(&Resource::set(name, items));
            } else {
                let v: f64 =
                    value.parse().map_err(|_| format!("value '{value}' of resource '{name}' is not a number"))?;
                if !v.is_finite() || v < 0.0 {
                    return Err(format!("value {v} of resource '{name}' must be a non-negative number"));
                }
                q.add_resource(&Resource::scalar(name, v));
            }
        }
        Ok(q)
    }
}

/// Mesos keeps scalars at three decimal places; so do we on the wire.
fn round_scalar(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

fn merge(ranges: impl Iterator<Item = (u64, u64)>) -> Vec<(u64, u64)> {
    let mut all: Vec<(u64, u64)> = ranges.filter(|(b, e)| b <= e).collect();
    all.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(all.len());
    for (b, e) in all {
        match out.last_mut() {
            Some(last) if b <= last.1.saturating_add(1) => last.1 = last.1.max(e),
            _ => out.push((b, e)),
        }
    }
    out
}

fn subtract_ranges(ours: &[(u64, u64)], theirs: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = ours.to_vec();
    for &(tb, te) in theirs {
        out = out
            .into_iter()
            .flat_map(|(b, e)| {
                if te < b || tb > e {
                    return vec![(b, e)];
                }
                let mut pieces = Vec::new();
                if tb > b {
                    pieces.push((b, tb - 1));
                }
                if te < e {
                    pieces.push((te + 1, e));
                }
                pieces
            })
            .collect();
    }
    out
}

impl fmt::Display for Quantities {
    /// Mesos' text form: `cpus:2;mem:1024;ports:[31000-32000]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = self.scalars.iter().map(|(k, v)| format!("{k}:{}", round_scalar(*v))).collect();
        for (k, rs) in &self.ranges {
            let inner: Vec<String> = rs.iter().map(|(b, e)| format!("{b}-{e}")).collect();
            parts.push(format!("{k}:[{}]", inner.join(",")));
        }
        for (k, s) in &self.sets {
            parts.push(format!("{k}:{{{}}}", s.iter().cloned().collect::<Vec<_>>().join(",")));
        }
        f.write_str(&parts.join(";"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(resources: &[Resource]) -> Quantities {
        Quantities::from_resources(resources)
    }

    #[test]
    fn scalars_ranges_and_sets_add_and_subtract() {
        let mut total = q(&[
            Resource::scalar("cpus", 4.0),
            Resource::ranges("ports", [(31000, 31010)]),
            Resource::set("gpus", ["g0".to_owned(), "g1".to_owned()]),
        ]);
        let used = q(&[
            Resource::scalar("cpus", 1.5),
            Resource::ranges("ports", [(31005, 31005)]),
            Resource::set("gpus", ["g1".to_owned()]),
        ]);
        assert!(total.contains(&used));
        total.subtract(&used);
        assert_eq!(total.to_string(), "cpus:2.5;ports:[31000-31004,31006-31010];gpus:{g0}");
        assert!(!total.contains(&used));
        total.add(&used);
        assert_eq!(total.to_string(), "cpus:4;ports:[31000-31010];gpus:{g0,g1}");
    }

    #[test]
    fn mesos_resource_text_parses_and_prints_back() {
        let q: Quantities = "cpus:4;mem:4096;ports:[31000-31010,31011-31020];gpus:{g0,g1}".parse().unwrap();
        assert_eq!(q.to_string(), "cpus:4;mem:4096;ports:[31000-31020];gpus:{g0,g1}");
        assert_eq!("cpus:x".parse::<Quantities>().unwrap_err(), "value 'x' of resource 'cpus' is not a number");
        assert_eq!("cpus".parse::<Quantities>().unwrap_err(), "resource 'cpus' is not NAME:VALUE");
        assert!("ports:[9-1]".parse::<Quantities>().unwrap_err().contains("'9-1'"));
    }

    #[test]
    fn subtracting_everything_leaves_an_empty_bag() {
        let all = q(&[Resource::scalar("cpus", 0.1), Resource::scalar("mem", 32.0)]);
        assert!(all.minus(&all).is_empty());
    }
}
