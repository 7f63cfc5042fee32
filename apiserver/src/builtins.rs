//! The built-in kinds, as one table. Each row says what a CRD would say
//! (group, version, names, scope, status subresource) plus, for the kinds
//! that are only stored, the schema k8s-openapi ships; every row becomes a
//! resource type through `resource::from_crd`, the path an applied CRD takes.
//! Schemas are annotated here with the list merge keys and the few defaults
//! that k8s-openapi's schemas leave out.
//!
//! This module owns no behaviour: which kinds get special handling is
//! `resource::Builtin`, and nothing here ever acts on a stored object (no
//! controller runs a Deployment or a Pod; they are stored, validated and
//! served, nothing more). The exceptions are not here either: RBAC objects
//! are enforced by `authz`, and reviews are answered by `reviews`.

use std::sync::{Arc, OnceLock};

use k8s_openapi::api::{apps, authentication, authorization, batch, core, networking, rbac};
use schemars::JsonSchema;
use serde_json::{Value, json};

use crate::resource::{Builtin, ResourceType, from_crd};

/// The category every stored-only kind carries in discovery
/// (`kubectl get stored-only` lists them all).
pub const STORED_ONLY: &str = "stored-only";

/// What the OpenAPI description and the README say about stored-only kinds.
pub const STORED_ONLY_NOTE: &str = "Stored only: mpiswarm's API server stores, validates and serves this kind, but no controller acts on it (nothing is scheduled, run or reconciled).";

/// One built-in kind.
struct Row {
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
    categories: &'static [&'static str],
    status: bool,
    /// `metadata.generation` is bumped on spec changes.
    generation: bool,
    builtin: Builtin,
    /// Storage key prefix when it is not `<group or core>/<plural>`.
    storage: Option<&'static str>,
    /// The kind's k8s-openapi schema (definition name and schema).
    schema: Option<SchemaFn>,
}

/// What every row shares unless it says otherwise: a namespaced core/v1
/// kind without a status subresource, short names or schema.
const BASE: Row = Row {
    group: "",
    version: "v1",
    plural: "",
    kind: "",
    namespaced: true,
    short_names: &[],
    categories: &[],
    status: false,
    generation: false,
    builtin: Builtin::Stored,
    storage: None,
    schema: None,
};

/// The categories of stored-only kinds: `kubectl get stored-only` lists them.
const STORED: &[&str] = &[STORED_ONLY];
/// ... and of those a real cluster puts in `kubectl get all`.
const ALL_STORED: &[&str] = &["all", STORED_ONLY];

type SchemaFn = fn() -> (String, Value);

/// A stored-only workload (`kubectl get all`, status subresource, generation).
const WORKLOAD: Row = Row { categories: ALL_STORED, status: true, generation: true, ..BASE };

const TABLE: &[Row] = &[
    Row {
        plural: "namespaces",
        kind: "Namespace",
        namespaced: false,
        short_names: &["ns"],
        status: true,
        builtin: Builtin::Namespace,
        ..BASE
    },
    Row { plural: "events", kind: "Event", short_names: &["ev"], builtin: Builtin::CoreEvent, ..BASE },
    Row { plural: "secrets", kind: "Secret", builtin: Builtin::Secret, ..BASE },
    Row { plural: "configmaps", kind: "ConfigMap", short_names: &["cm"], builtin: Builtin::ConfigMap, ..BASE },
    Row {
        group: "events.k8s.io",
        plural: "events",
        kind: "Event",
        short_names: &["ev"],
        builtin: Builtin::EventsV1,
        storage: Some("core/events"),
        ..BASE
    },
    Row { group: "coordination.k8s.io", plural: "leases", kind: "Lease", builtin: Builtin::Lease, ..BASE },
    Row {
        group: "apiextensions.k8s.io",
        plural: "customresourcedefinitions",
        kind: "CustomResourceDefinition",
        namespaced: false,
        short_names: &["crd", "crds"],
        status: true,
        generation: true,
        builtin: Builtin::Crd,
        ..BASE
    },
    Row {
        plural: "pods",
        kind: "Pod",
        short_names: &["po"],
        categories: ALL_STORED,
        status: true,
        schema: Some(schema_of::<core::v1::Pod> as SchemaFn),
        ..BASE
    },
    Row {
        plural: "services",
        kind: "Service",
        short_names: &["svc"],
        categories: ALL_STORED,
        status: true,
        schema: Some(schema_of::<core::v1::Service>),
        ..BASE
    },
    Row {
        plural: "endpoints",
        kind: "Endpoints",
        short_names: &["ep"],
        categories: STORED,
        schema: Some(schema_of::<core::v1::Endpoints>),
        ..BASE
    },
    Row {
        plural: "serviceaccounts",
        kind: "ServiceAccount",
        short_names: &["sa"],
        categories: STORED,
        schema: Some(schema_of::<core::v1::ServiceAccount>),
        ..BASE
    },
    Row {
        plural: "persistentvolumeclaims",
        kind: "PersistentVolumeClaim",
        short_names: &["pvc"],
        categories: STORED,
        status: true,
        schema: Some(schema_of::<core::v1::PersistentVolumeClaim>),
        ..BASE
    },
    Row {
        plural: "persistentvolumes",
        kind: "PersistentVolume",
        namespaced: false,
        short_names: &["pv"],
        categories: STORED,
        status: true,
        schema: Some(schema_of::<core::v1::PersistentVolume>),
        ..BASE
    },
    Row {
        plural: "replicationcontrollers",
        kind: "ReplicationController",
        short_names: &["rc"],
        schema: Some(schema_of::<core::v1::ReplicationController>),
        ..WORKLOAD
    },
    Row {
        group: "apps",
        plural: "deployments",
        kind: "Deployment",
        short_names: &["deploy"],
        schema: Some(schema_of::<apps::v1::Deployment>),
        ..WORKLOAD
    },
    Row {
        group: "apps",
        plural: "daemonsets",
        kind: "DaemonSet",
        short_names: &["ds"],
        schema: Some(schema_of::<apps::v1::DaemonSet>),
        ..WORKLOAD
    },
    Row {
        group: "apps",
        plural: "statefulsets",
        kind: "StatefulSet",
        short_names: &["sts"],
        schema: Some(schema_of::<apps::v1::StatefulSet>),
        ..WORKLOAD
    },
    Row {
        group: "apps",
        plural: "replicasets",
        kind: "ReplicaSet",
        short_names: &["rs"],
        schema: Some(schema_of::<apps::v1::ReplicaSet>),
        ..WORKLOAD
    },
    Row { group: "batch", plural: "jobs", kind: "Job", schema: Some(schema_of::<batch::v1::Job>), ..WORKLOAD },
    Row {
        group: "batch",
        plural: "cronjobs",
        kind: "CronJob",
        short_names: &["cj"],
        schema: Some(schema_of::<batch::v1::CronJob>),
        ..WORKLOAD
    },
    Row {
        group: "networking.k8s.io",
        plural: "ingresses",
        kind: "Ingress",
        short_names: &["ing"],
        categories: STORED,
        status: true,
        generation: true,
        schema: Some(schema_of::<networking::v1::Ingress>),
        ..BASE
    },
    Row {
        group: "rbac.authorization.k8s.io",
        plural: "roles",
        kind: "Role",
        builtin: Builtin::Rbac,
        schema: Some(as_shipped::<rbac::v1::Role>),
        ..BASE
    },
    Row {
        group: "rbac.authorization.k8s.io",
        plural: "rolebindings",
        kind: "RoleBinding",
        builtin: Builtin::Rbac,
        schema: Some(as_shipped::<rbac::v1::RoleBinding>),
        ..BASE
    },
    Row {
        group: "rbac.authorization.k8s.io",
        plural: "clusterroles",
        kind: "ClusterRole",
        namespaced: false,
        builtin: Builtin::Rbac,
        schema: Some(as_shipped::<rbac::v1::ClusterRole>),
        ..BASE
    },
    Row {
        group: "rbac.authorization.k8s.io",
        plural: "clusterrolebindings",
        kind: "ClusterRoleBinding",
        namespaced: false,
        builtin: Builtin::Rbac,
        schema: Some(as_shipped::<rbac::v1::ClusterRoleBinding>),
        ..BASE
    },
    Row {
        group: "authorization.k8s.io",
        plural: "selfsubjectaccessreviews",
        kind: "SelfSubjectAccessReview",
        namespaced: false,
        builtin: Builtin::Review,
        schema: Some(as_shipped::<authorization::v1::SelfSubjectAccessReview>),
        ..BASE
    },
    Row {
        group: "authorization.k8s.io",
        plural: "subjectaccessreviews",
        kind: "SubjectAccessReview",
        namespaced: false,
        builtin: Builtin::Review,
        schema: Some(as_shipped::<authorization::v1::SubjectAccessReview>),
        ..BASE
    },
    Row {
        group: "authorization.k8s.io",
        plural: "localsubjectaccessreviews",
        kind: "LocalSubjectAccessReview",
        builtin: Builtin::Review,
        schema: Some(as_shipped::<authorization::v1::LocalSubjectAccessReview>),
        ..BASE
    },
    Row {
        group: "authorization.k8s.io",
        plural: "selfsubjectrulesreviews",
        kind: "SelfSubjectRulesReview",
        namespaced: false,
        builtin: Builtin::Review,
        schema: Some(as_shipped::<authorization::v1::SelfSubjectRulesReview>),
        ..BASE
    },
    Row {
        group: "authentication.k8s.io",
        plural: "selfsubjectreviews",
        kind: "SelfSubjectReview",
        namespaced: false,
        builtin: Builtin::Review,
        schema: Some(as_shipped::<authentication::v1::SelfSubjectReview>),
        ..BASE
    },
    Row {
        group: "authentication.k8s.io",
        plural: "tokenreviews",
        kind: "TokenReview",
        namespaced: false,
        builtin: Builtin::Review,
        schema: Some(as_shipped::<authentication::v1::TokenReview>),
        ..BASE
    },
];

/// The CRD object a row stands for.
fn crd_of(r: &Row, schema: Option<&Value>) -> Value {
    let mut version = json!({"name": r.version, "served": true, "storage": true});
    if let Some(s) = schema {
        version["schema"] = json!({"openAPIV3Schema": s});
    }
    if r.status {
        version["subresources"] = json!({"status": {}});
    }
    json!({"spec": {
        "group": r.group,
        "names": {"plural": r.plural, "kind": r.kind, "shortNames": r.short_names, "categories": r.categories},
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "versions": [version],
    }})
}

fn resource_type(r: &Row) -> Option<ResourceType> {
    let (definition, schema) = match r.schema {
        Some(f) => {
            let (name, s) = f();
            (Some(name), Some(s))
        }
        None => (None, None),
    };
    // from_crd wants a group; the core group has none, so it is added back below.
    let mut crd = crd_of(r, schema.as_ref());
    crd["spec"]["group"] = json!(if r.group.is_empty() { "core.builtin" } else { r.group });
    let mut t = from_crd(&crd).into_iter().next()?;
    t.group = r.group.to_string();
    t.generation = r.generation;
    t.builtin = Some(r.builtin);
    t.definition = definition;
    t.storage = match r.storage {
        Some(s) => format!("{s}/"),
        None => format!("{}/{}/", if r.group.is_empty() { "core" } else { r.group }, r.plural),
    };
    Some(t)
}

/// Every built-in resource type, built once.
pub fn all() -> &'static [Arc<ResourceType>] {
    static TYPES: OnceLock<Vec<Arc<ResourceType>>> = OnceLock::new();
    TYPES.get_or_init(|| TABLE.iter().filter_map(resource_type).map(Arc::new).collect())
}

/// A type's schema from k8s-openapi, inlined (no `$ref`), with the list
/// merge keys added: its definition name and schema.
fn generated<T: JsonSchema>() -> (String, Value) {
    let generator = schemars::generate::SchemaSettings::openapi3()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    annotate(&mut schema);
    (T::schema_name().into_owned(), schema)
}

/// `ObjectMeta` as k8s-openapi ships it: the one definition every kind's
/// `metadata` refers to in the published OpenAPI documents.
pub fn object_meta() -> &'static (String, Value) {
    static META: OnceLock<(String, Value)> = OnceLock::new();
    META.get_or_init(generated::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>)
}

/// A kind's schema from k8s-openapi, inlined (no `$ref`), with list merge
/// keys and defaults added and the stored-only note in its description.
fn schema_of<T: JsonSchema>() -> (String, Value) {
    let (name, mut schema) = generated::<T>();
    let described = format!("{STORED_ONLY_NOTE} {}", schema["description"].as_str().unwrap_or_default());
    schema["description"] = json!(described.trim_end());
    defaults(&mut schema);
    (name, schema)
}

/// A kind's schema from k8s-openapi as it is (with list merge keys), for the
/// kinds the server itself acts on: RBAC (enforced) and reviews (answered,
/// never stored). They need neither defaults nor the stored-only note.
fn as_shipped<T: JsonSchema>() -> (String, Value) {
    generated::<T>()
}

/// How lists of the built-in kinds merge, by field name: the key an item is
/// known by (Kubernetes' `patchMergeKey`, also the server-side apply list-map
/// key). A rule applies only where the item schema has that key. Lists not
/// named here are atomic.
const LIST_KEYS: &[(&str, &str)] = &[
    ("containers", "name"),
    ("initContainers", "name"),
    ("ephemeralContainers", "name"),
    ("env", "name"),
    ("volumes", "name"),
    ("imagePullSecrets", "name"),
    ("resourceClaims", "name"),
    ("volumeMounts", "mountPath"),
    ("volumeDevices", "devicePath"),
    ("ports", "containerPort"),
    ("ports", "port"),
    ("hostAliases", "ip"),
    ("conditions", "type"),
    ("ownerReferences", "uid"),
    ("topologySpreadConstraints", "topologyKey"),
];

fn annotate(schema: &mut Value) {
    let Some(m) = schema.as_object_mut() else { return };
    if let Some(props) = m.get_mut("properties").and_then(Value::as_object_mut) {
        for (name, sub) in props.iter_mut() {
            let item_has = |key: &str| sub["items"]["properties"].get(key).is_some();
            if sub["type"] == "array"
                && let Some((_, key)) = LIST_KEYS.iter().find(|(field, key)| field == name && item_has(key))
                && let Some(s) = sub.as_object_mut()
            {
                s.insert("x-kubernetes-list-type".into(), json!("map"));
                s.insert("x-kubernetes-list-map-keys".into(), json!([key]));
                s.insert("x-kubernetes-patch-merge-key".into(), json!(key));
                s.insert("x-kubernetes-patch-strategy".into(), json!("merge"));
            }
            annotate(sub);
        }
    }
    for k in ["items", "additionalProperties"] {
        if let Some(sub) = m.get_mut(k).filter(|s| s.is_object()) {
            annotate(sub);
        }
    }
}

/// Defaults kube-apiserver applies in code that k8s-openapi's schemas do not
/// carry, as (path of property names from the kind's root, value). Paths
/// through lists name the list; the default goes on its items.
/// A schema default: the property path from the kind's root, and the value.
type SchemaDefault = (&'static [&'static str], fn() -> Value);

const DEFAULTS: &[SchemaDefault] = &[
    (&["spec", "replicas"], || json!(1)),
    (&["spec", "revisionHistoryLimit"], || json!(10)),
    (&["spec", "progressDeadlineSeconds"], || json!(600)),
    (&["spec", "type"], || json!("ClusterIP")),
    (&["spec", "sessionAffinity"], || json!("None")),
    (&["spec", "ports", "protocol"], || json!("TCP")),
    (&["spec", "concurrencyPolicy"], || json!("Allow")),
    (&["spec", "successfulJobsHistoryLimit"], || json!(3)),
    (&["spec", "failedJobsHistoryLimit"], || json!(1)),
    (&["spec", "backoffLimit"], || json!(6)),
    (&["spec", "volumeMode"], || json!("Filesystem")),
];

/// Put each default on the schema node its path reaches, where that node
/// exists and has no default yet (so a row names only what its kind has).
fn defaults(schema: &mut Value) {
    for (path, value) in DEFAULTS {
        set_default(schema, path, value);
    }
}

fn set_default(node: &mut Value, path: &[&str], value: &fn() -> Value) {
    if node["type"] == "array" {
        if let Some(items) = node.get_mut("items") {
            set_default(items, path, value);
        }
        return;
    }
    match path.split_first() {
        None => {
            if let Some(m) = node.as_object_mut() {
                m.entry("default").or_insert_with(value);
            }
        }
        Some((first, rest)) => {
            if let Some(sub) = node.get_mut("properties").and_then(|p| p.get_mut(*first)) {
                set_default(sub, rest, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(plural: &str) -> Arc<ResourceType> {
        all().iter().find(|t| t.plural == plural).cloned().unwrap_or_else(|| panic!("{plural} is in the table"))
    }

    #[test]
    fn table_rows_become_resource_types_like_a_crd() {
        let d = find("deployments");
        assert_eq!((d.group.as_str(), d.version.as_str(), d.kind.as_str()), ("apps", "v1", "Deployment"));
        assert_eq!(d.short_names, ["deploy"]);
        assert_eq!(d.categories, ["all", STORED_ONLY]);
        assert!(d.namespaced && d.status_subresource && d.generation);
        assert_eq!(d.storage, "apps/deployments/");
        assert_eq!(d.definition.as_deref(), Some("io.k8s.api.apps.v1.Deployment"));
        let cr = find("clusterroles");
        assert!(!cr.namespaced && !cr.status_subresource);
        assert_eq!(find("services").storage, "core/services/");
        let ns = find("namespaces");
        assert_eq!(
            (ns.group.as_str(), ns.storage.as_str(), ns.builtin),
            ("", "core/namespaces/", Some(Builtin::Namespace))
        );
        assert!(ns.schema.is_none() && ns.status_subresource && !ns.generation);
    }

    #[test]
    fn schemas_are_inlined_and_carry_merge_keys_and_defaults() {
        let d = find("deployments");
        let s = d.schema.as_ref().expect("deployment schema");
        assert!(!s.to_string().contains("$ref"), "schemas are inlined");
        let spec = &s["properties"]["spec"]["properties"];
        assert_eq!(spec["replicas"]["default"], 1);
        let containers = &spec["template"]["properties"]["spec"]["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-list-map-keys"], json!(["name"]));
        let ports = &containers["items"]["properties"]["ports"];
        assert_eq!(ports["x-kubernetes-patch-merge-key"], "containerPort");
        let svc = find("services");
        let svc_ports = &svc.schema.as_ref().expect("service schema")["properties"]["spec"]["properties"]["ports"];
        assert_eq!(svc_ports["x-kubernetes-patch-merge-key"], "port");
        assert_eq!(svc_ports["items"]["properties"]["protocol"]["default"], "TCP");
        assert!(s["description"].as_str().is_some_and(|d| d.starts_with(STORED_ONLY_NOTE)));
    }
}
