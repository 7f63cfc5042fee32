//! `Resource`, `Attribute`, `Value` and `Labels` (mesos.proto): what agents
//! have and offers carry. Only the wire shape lives here; arithmetic over
//! resources lives in [`crate::quantities`].

use serde::{Deserialize, Serialize};

/// `Value.Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ValueType {
    Scalar,
    Ranges,
    Set,
    Text,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scalar {
    pub value: f64,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Range {
    pub begin: u64,
    pub end: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Ranges {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub range: Vec<Range>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Set {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub item: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Text {
    pub value: String,
}

/// `Resource.AllocationInfo`: the role an offered or allocated resource is for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct AllocationInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
}

/// `Resource.ReservationInfo.Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ReservationType {
    Unknown,
    Static,
    Dynamic,
}

/// `Resource.ReservationInfo`. Carried through for compatibility; the offer
/// layer does not implement reservations.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ReservationInfo {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ReservationType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Labels>,
}

/// `Resource`: one named quantity (scalar `cpus`, ranges `ports`, set `gpus`...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resource {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: ValueType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scalar: Option<Scalar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranges: Option<Ranges>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set: Option<Set>,
    /// Deprecated pre-MULTI_ROLE reservation role; `"*"` when unreserved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation_info: Option<AllocationInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<ReservationInfo>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reservations: Vec<ReservationInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revocable: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<serde_json::Value>,
}

impl Resource {
    fn bare(name: &str, kind: ValueType) -> Self {
        Self {
            name: name.to_owned(),
            kind,
            scalar: None,
            ranges: None,
            set: None,
            role: None,
            allocation_info: None,
            reservation: None,
            reservations: Vec::new(),
            disk: None,
            revocable: None,
            shared: None,
            provider_id: None,
        }
    }

    /// An unreserved scalar resource, e.g. `Resource::scalar("cpus", 2.0)`.
    pub fn scalar(name: &str, value: f64) -> Self {
        Self { scalar: Some(Scalar { value }), ..Self::bare(name, ValueType::Scalar) }
    }

    /// An unreserved ranges resource, e.g. ports `[(31000, 32000)]`.
    pub fn ranges(name: &str, ranges: impl IntoIterator<Item = (u64, u64)>) -> Self {
        let range = ranges.into_iter().map(|(begin, end)| Range { begin, end }).collect();
        Self { ranges: Some(Ranges { range }), ..Self::bare(name, ValueType::Ranges) }
    }

    /// An unreserved set resource.
    pub fn set(name: &str, items: impl IntoIterator<Item = String>) -> Self {
        Self { set: Some(Set { item: items.into_iter().collect() }), ..Self::bare(name, ValueType::Set) }
    }

    /// The scalar value, if this is a scalar resource.
    pub fn scalar_value(&self) -> Option<f64> {
        (self.kind == ValueType::Scalar).then(|| self.scalar.as_ref().map_or(0.0, |s| s.value))
    }

    /// This resource as allocated to `role` (sets `allocation_info`).
    pub fn allocated_to(mut self, role: &str) -> Self {
        self.allocation_info = Some(AllocationInfo { role: Some(role.to_owned()) });
        self
    }
}

/// Sum of the scalar resources called `name` in `resources` (e.g. all `cpus`).
pub fn scalar_sum(resources: &[Resource], name: &str) -> f64 {
    resources.iter().filter(|r| r.name == name).filter_map(Resource::scalar_value).sum()
}

/// `Attribute`: a fact about an agent (rack, zone, node id...) that
/// frameworks can place by.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attribute {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: ValueType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scalar: Option<Scalar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranges: Option<Ranges>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set: Option<Set>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<Text>,
}

impl Attribute {
    pub fn text(name: &str, value: &str) -> Self {
        Self {
            name: name.to_owned(),
            kind: ValueType::Text,
            scalar: None,
            ranges: None,
            set: None,
            text: Some(Text { value: value.to_owned() }),
        }
    }

    pub fn scalar(name: &str, value: f64) -> Self {
        Self {
            name: name.to_owned(),
            kind: ValueType::Scalar,
            scalar: Some(Scalar { value }),
            ranges: None,
            set: None,
            text: None,
        }
    }

    /// The attribute as text if it is a TEXT attribute.
    pub fn text_value(&self) -> Option<&str> {
        self.text.as_ref().map(|t| t.value.as_str())
    }
}

/// `Label`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Label {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// `Labels`: `{"labels": [{"key": ..., "value": ...}]}`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Labels {
    #[serde(default)]
    pub labels: Vec<Label>,
}

impl Labels {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.labels.iter().find(|l| l.key == key).and_then(|l| l.value.as_deref())
    }

    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        Self {
            labels: pairs.into_iter().map(|(k, v)| Label { key: k.to_owned(), value: Some(v.to_owned()) }).collect(),
        }
    }
}
