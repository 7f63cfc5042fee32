//! What one served resource is (group, version, names, scope, schema,
//! storage prefix) and how a CRD object's served versions become resource
//! types. Nothing here is specific to any kind, and nothing here knows which
//! resources are served right now (that is `registry`).

use std::sync::Arc;

use serde_json::Value;

/// Built-in kinds that need special handling somewhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    Namespace,
    /// `events` in core/v1 (the same store as `EventsV1`, another view).
    CoreEvent,
    EventsV1,
    Lease,
    Secret,
    ConfigMap,
    Crd,
    /// Served and stored with the schema k8s-openapi ships; no controller
    /// acts on it (Deployments, Pods, Services, RBAC...).
    Stored,
    /// Roles, ClusterRoles and their bindings: stored, and enforced by the
    /// server itself on every request (`rbac`, `authz`).
    Rbac,
    /// A question to the server, answered and never stored: access reviews
    /// (`authorization.k8s.io`), token and self-subject reviews
    /// (`authentication.k8s.io`). Create only.
    Review,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PrinterColumn {
    pub name: String,
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    pub json_path: String,
}

/// One served resource in one group/version.
#[derive(Debug, Clone)]
pub struct ResourceType {
    pub group: String,
    pub version: String,
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub list_kind: String,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub namespaced: bool,
    pub status_subresource: bool,
    /// `metadata.generation` is tracked (custom resources and CRDs).
    pub generation: bool,
    /// The version's `openAPIV3Schema`, for custom resources.
    pub schema: Option<Value>,
    pub printer_columns: Vec<PrinterColumn>,
    /// Storage key prefix shared by every version (and by both event views).
    pub storage: String,
    pub builtin: Option<Builtin>,
    /// The OpenAPI definition name of a built-in kind with a schema.
    pub definition: Option<String>,
    /// The schema's patterns and CEL rules, compiled when the kind is registered.
    pub compiled: Option<Arc<crate::schema::Compiled>>,
}

impl ResourceType {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }

    pub fn group_version_path(&self) -> String {
        if self.group.is_empty() { "api/v1".into() } else { format!("apis/{}/{}", self.group, self.version) }
    }

    /// The storage key of one object.
    pub fn key(&self, namespace: Option<&str>, name: &str) -> String {
        match namespace {
            Some(ns) if self.namespaced => format!("{}{ns}/{name}", self.storage),
            _ => format!("{}{name}", self.storage),
        }
    }

    /// The key prefix of a list: one namespace, or all of them.
    pub fn prefix(&self, namespace: Option<&str>) -> String {
        match namespace {
            Some(ns) if self.namespaced => format!("{}{ns}/", self.storage),
            _ => self.storage.clone(),
        }
    }

    pub fn is_custom(&self) -> bool {
        self.builtin.is_none()
    }

    /// The verbs discovery lists for this resource.
    pub fn verbs(&self) -> &'static [&'static str] {
        match self.builtin {
            Some(Builtin::Review) => &["create"],
            _ => &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
        }
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect()).unwrap_or_default()
}

/// The served versions of one CRD object, as resource types.
pub fn from_crd(crd: &Value) -> Vec<ResourceType> {
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or_default();
    let names = &spec["names"];
    let plural = names["plural"].as_str().unwrap_or_default();
    let kind = names["kind"].as_str().unwrap_or_default();
    if group.is_empty() || plural.is_empty() || kind.is_empty() {
        return vec![];
    }
    let singular = names["singular"].as_str().map(String::from).unwrap_or_else(|| kind.to_lowercase());
    let list_kind = names["listKind"].as_str().map(String::from).unwrap_or_else(|| format!("{kind}List"));
    let namespaced = spec["scope"].as_str() != Some("Cluster");
    let mut out = vec![];
    for v in spec["versions"].as_array().into_iter().flatten() {
        if v["served"].as_bool() == Some(false) {
            continue;
        }
        let Some(version) = v["name"].as_str() else { continue };
        let printer_columns = v["additionalPrinterColumns"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| PrinterColumn {
                name: c["name"].as_str().unwrap_or_default().into(),
                type_: c["type"].as_str().unwrap_or("string").into(),
                format: c["format"].as_str().unwrap_or_default().into(),
                description: c["description"].as_str().unwrap_or_default().into(),
                priority: c["priority"].as_i64().unwrap_or(0),
                json_path: c["jsonPath"].as_str().unwrap_or_default().into(),
            })
            .collect();
        out.push(ResourceType {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
            singular: singular.clone(),
            kind: kind.into(),
            list_kind: list_kind.clone(),
            short_names: strings(&names["shortNames"]),
            categories: strings(&names["categories"]),
            namespaced,
            status_subresource: v["subresources"]["status"].is_object(),
            generation: true,
            compiled: v["schema"].get("openAPIV3Schema").map(|s| Arc::new(crate::schema::Compiled::new(s))),
            schema: v["schema"].get("openAPIV3Schema").cloned(),
            printer_columns,
            storage: format!("{group}/{plural}/"),
            builtin: None,
            definition: None,
        });
    }
    out
}
