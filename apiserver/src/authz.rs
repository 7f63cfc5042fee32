//! Authorization of every request (but the unauthenticated health
//! endpoints): what a request does in RBAC's terms, derived from its method
//! and URL alone as kube-apiserver's request info is (so a forbidden
//! request is refused before routing, and an unknown resource in a
//! forbidden namespace is a 403, not a 404), the RBAC policy of the stored
//! objects, and the 403 `Status` of a refusal.
//!
//! The policy is cached, not read per request: building it walks every
//! Role, ClusterRole and binding, and most requests change none. A request
//! compares the store's resourceVersion with the one the cache last
//! checked (one read of a counter); only when they differ does it look at
//! the changes in between (in memory, the store's change log) and rebuild
//! the policy if one of them is an RBAC object. Every path that changes an
//! object goes through that log (writes, cascades, garbage collection, a
//! namespace's deletion), so no change is missed; if the log no longer
//! reaches back that far, the policy is rebuilt. No I/O and no lock held
//! while building; the swap is one pointer.

use std::sync::{Arc, RwLock};

use axum::http::Method;
use serde_json::Value;

use crate::error::ApiError;
use crate::locks;
use crate::query::Query;
use crate::rbac::{Attributes, Policy, ResourceAttributes, Rule, User, forbidden_message, uncovered};
use crate::store::{Since, Store};

/// The API group of Roles, ClusterRoles and their bindings.
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Where RBAC objects are stored (every key of the four kinds starts so).
const RBAC_KEYS: &str = "rbac.authorization.k8s.io/";

/// Which stored objects make up the policy.
const RBAC_PREFIXES: [&str; 4] = [
    "rbac.authorization.k8s.io/clusterroles/",
    "rbac.authorization.k8s.io/clusterrolebindings/",
    "rbac.authorization.k8s.io/roles/",
    "rbac.authorization.k8s.io/rolebindings/",
];

/// Subresources of a namespace (`/api/v1/namespaces/NAME/status`), which
/// are not a resource inside it.
const NAMESPACE_SUBRESOURCES: [&str; 2] = ["status", "finalize"];

/// The RBAC attributes of a request, as kube-apiserver derives them:
/// `/api/v1/...` and `/apis/GROUP/VERSION/...` with at least a resource are
/// resource requests (a namespace's own path is in that namespace), all
/// else a non-resource path with the lowercase method as its verb. A GET
/// without a name is a list, or a watch with `watch=true`; a list whose
/// field selector names one object (`metadata.name=N`) is about that
/// object; a DELETE without a name is a deletecollection.
pub fn attributes(method: &Method, path: &str, query: &Query) -> Attributes {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (group, rest) = match segs.as_slice() {
        ["api", _version, rest @ ..] if !rest.is_empty() => ("", rest),
        ["apis", group, _version, rest @ ..] if !rest.is_empty() => (*group, rest),
        _ => return Attributes::NonResource { verb: method.as_str().to_ascii_lowercase(), path: path.to_owned() },
    };
    let mut r = ResourceAttributes { group: group.to_owned(), ..ResourceAttributes::default() };
    let mut parts = rest;
    if rest[0] == "namespaces" && rest.len() > 1 {
        r.namespace = rest[1].to_owned();
        if rest.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&rest[2]) {
            parts = &rest[2..];
        }
    }
    r.resource = parts[0].to_owned();
    r.name = parts.get(1).map(|s| s.to_string()).unwrap_or_default();
    r.subresource = parts.get(2).map(|s| s.to_string()).unwrap_or_default();
    let named = !r.name.is_empty();
    let verb = match *method {
        Method::GET | Method::HEAD if named => "get",
        Method::GET | Method::HEAD => {
            if let Some(name) = query.get("fieldSelector").and_then(single_name) {
                r.name = name.to_owned();
            }
            // An unparsable flag is refused later by the handler (400); here it is not a watch.
            if query.flag("watch").unwrap_or(false) { "watch" } else { "list" }
        }
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if named => "delete",
        Method::DELETE => "deletecollection",
        _ => "",
    };
    r.verb = verb.to_owned();
    Attributes::Resource(r)
}

/// The name a field selector pins down, when it is exactly one
/// `metadata.name` equality.
fn single_name(selector: &str) -> Option<&str> {
    if selector.contains(',') {
        return None;
    }
    let rest = selector.trim().strip_prefix("metadata.name")?;
    let name = rest.strip_prefix("==").or_else(|| rest.strip_prefix('='))?;
    (!name.is_empty() && !name.contains('/')).then_some(name)
}

/// The 403 `Status` of a refused request, in kube-apiserver's words:
/// `configmaps is forbidden: User "team-a" cannot list resource
/// "configmaps" in API group "" in the namespace "team-b"`.
pub fn forbidden(user: &User, request: &Attributes) -> ApiError {
    let why = forbidden_message(user, request);
    match request {
        Attributes::NonResource { .. } => ApiError::new(403, "Forbidden", format!("forbidden: {why}")),
        Attributes::Resource(r) => ApiError::forbidden(&r.resource, &r.group, &r.name, &why),
    }
}

/// No user grants more than it holds, as kube-apiserver's RBAC escalation
/// check: creating or replacing a Role or ClusterRole needs every right it
/// lists (where it applies), or the `escalate` verb on it; a RoleBinding or
/// ClusterRoleBinding needs every right of the role it names (a
/// RoleBinding's only in its namespace), or the `bind` verb on that role.
/// A patch's result is known only inside the write, so patching an RBAC
/// object needs `escalate` (roles) or `bind` (bindings) outright. `object`
/// is the body of a create or replace, None for a patch. Called only for
/// users outside `system:masters`.
pub fn escalation(
    policy: &Policy,
    user: &User,
    plural: &str,
    namespace: &str,
    object: Option<&Value>,
) -> Result<(), ApiError> {
    let name = object.and_then(|o| o["metadata"]["name"].as_str()).unwrap_or_default();
    let may = |verb: &str, resource: &str, name: &str| {
        let a = Attributes::Resource(ResourceAttributes {
            verb: verb.into(),
            namespace: namespace.into(),
            group: RBAC_GROUP.into(),
            resource: resource.into(),
            name: name.into(),
            ..ResourceAttributes::default()
        });
        policy.authorize(user, &a).allowed()
    };
    let refuse = |why: String| Err(ApiError::forbidden(plural, RBAC_GROUP, name, &why));
    let (requested, cluster_scope, verb) = match plural {
        "roles" | "clusterroles" => {
            if may("escalate", plural, name) {
                return Ok(());
            }
            let Some(o) = object else {
                return refuse(format!(
                    "User {:?} may patch {plural} only with the escalate verb on them; replace the whole object instead (kubectl replace), whose rules are checked",
                    user.name
                ));
            };
            let rules: Vec<Rule> = o["rules"].as_array().into_iter().flatten().map(Rule::from_json).collect();
            (rules, plural == "clusterroles", "escalate")
        }
        "rolebindings" | "clusterrolebindings" => {
            let Some(o) = object else {
                return if may("bind", "roles", "") && may("bind", "clusterroles", "") {
                    Ok(())
                } else {
                    refuse(format!(
                        "User {:?} may patch {plural} only with the bind verb on roles and clusterroles; replace the whole object instead (kubectl replace), whose role is checked",
                        user.name
                    ))
                };
            };
            let role = o["roleRef"]["name"].as_str().unwrap_or_default();
            let cluster_role = o["roleRef"]["kind"].as_str() == Some("ClusterRole");
            if may("bind", if cluster_role { "clusterroles" } else { "roles" }, role) {
                return Ok(());
            }
            let Some(rules) = policy.role(cluster_role, namespace, role) else {
                let kind = if cluster_role { "ClusterRole" } else { "Role" };
                return refuse(format!(
                    "User {:?} cannot bind {kind} {role:?}: it does not exist, and without the bind verb on it only an existing role's rules can be checked",
                    user.name
                ));
            };
            // What a RoleBinding grants: resource rules, in its namespace.
            let rules =
                rules.iter().filter(|r| plural == "clusterrolebindings" || r.is_resource_rule()).cloned().collect();
            (rules, plural == "clusterrolebindings", "bind")
        }
        _ => return Ok(()),
    };
    let held = policy.rules_for(user, if cluster_scope { "" } else { namespace });
    let missing = uncovered(&held, &requested);
    if missing.is_empty() {
        return Ok(());
    }
    let shown: Vec<&str> = missing.iter().take(5).map(String::as_str).collect();
    let more =
        if missing.len() > shown.len() { format!(" and {} more", missing.len() - shown.len()) } else { String::new() };
    let scope =
        if cluster_scope { "at the cluster scope".to_owned() } else { format!("in the namespace {namespace:?}") };
    refuse(format!(
        "User {:?} is attempting to grant RBAC permissions not currently held {scope}: {}{more}; a user may grant only what it holds, unless it has the {verb} verb",
        user.name,
        shown.join(", ")
    ))
}

/// The policy as of some resourceVersion.
struct Cached {
    policy: Arc<Policy>,
    /// Every change up to this resourceVersion is reflected in `policy`.
    checked: u64,
}

/// The RBAC policy of the stored objects, rebuilt only when one of them changes.
pub struct PolicyCache {
    cached: RwLock<Arc<Cached>>,
}

fn build(store: &Store) -> Policy {
    let snapshots: Vec<_> = RBAC_PREFIXES.iter().map(|p| store.list(p)).collect();
    Policy::from_objects(snapshots.iter().flat_map(|s| s.items.iter().map(|o| o.as_ref())))
}

impl PolicyCache {
    pub fn new(store: &Store) -> Self {
        let checked = store.current_rv();
        let policy = Arc::new(build(store));
        Self { cached: RwLock::new(Arc::new(Cached { policy, checked })) }
    }

    /// The policy reflecting every change committed before the call.
    pub fn current(&self, store: &Store) -> Arc<Policy> {
        let rv = store.current_rv();
        let cached = locks::read(&self.cached).clone();
        if cached.checked >= rv {
            return cached.policy.clone();
        }
        let rbac_changed = match store.since(cached.checked) {
            Since::Changes(changes, _) => changes.iter().any(|c| c.key.starts_with(RBAC_KEYS)),
            Since::Expired { .. } => true,
        };
        // Built from objects at `rv` or later: a change after `rv` is looked at again next time.
        let policy = if rbac_changed { Arc::new(build(store)) } else { cached.policy.clone() };
        let mut slot = locks::write(&self.cached);
        if slot.checked < rv {
            *slot = Arc::new(Cached { policy: policy.clone(), checked: rv });
        }
        policy
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rbac::Decision;

    fn res(method: Method, path: &str, query: &str) -> ResourceAttributes {
        match attributes(&method, path, &Query::parse(Some(query))) {
            Attributes::Resource(r) => r,
            other => panic!("{path} is a resource request: {other:?}"),
        }
    }

    fn tuple(r: &ResourceAttributes) -> (&str, &str, &str, &str, &str, &str) {
        (&r.verb, &r.namespace, &r.group, &r.resource, &r.subresource, &r.name)
    }

    #[test]
    fn verbs_and_attributes_come_from_method_and_path_as_kube_apiserver_derives_them() {
        let jobs = "/apis/mpiswarm.io/v1alpha1/namespaces/team-a/mpijobs";
        assert_eq!(tuple(&res(Method::GET, jobs, "")), ("list", "team-a", "mpiswarm.io", "mpijobs", "", ""));
        assert_eq!(tuple(&res(Method::GET, jobs, "watch=1")).0, "watch");
        assert_eq!(
            tuple(&res(Method::GET, jobs, "watch=true&fieldSelector=metadata.name%3Dpi")),
            ("watch", "team-a", "mpiswarm.io", "mpijobs", "", "pi")
        );
        assert_eq!(
            tuple(&res(Method::GET, &format!("{jobs}/pi"), "")),
            ("get", "team-a", "mpiswarm.io", "mpijobs", "", "pi")
        );
        assert_eq!(tuple(&res(Method::GET, &format!("{jobs}/pi/log"), "")).4, "log");
        assert_eq!(
            tuple(&res(Method::PATCH, &format!("{jobs}/pi/status"), "")),
            ("patch", "team-a", "mpiswarm.io", "mpijobs", "status", "pi")
        );
        assert_eq!(res(Method::POST, jobs, "").verb, "create");
        assert_eq!(res(Method::PUT, &format!("{jobs}/pi"), "").verb, "update");
        assert_eq!(res(Method::DELETE, &format!("{jobs}/pi"), "").verb, "delete");
        assert_eq!(res(Method::DELETE, jobs, "").verb, "deletecollection");
        assert_eq!(
            tuple(&res(Method::GET, "/apis/mpiswarm.io/v1alpha1/mpijobs", "")),
            ("list", "", "mpiswarm.io", "mpijobs", "", "")
        );
        assert_eq!(tuple(&res(Method::GET, "/api/v1/namespaces", "")), ("list", "", "", "namespaces", "", ""));
        assert_eq!(
            tuple(&res(Method::GET, "/api/v1/namespaces/team-a", "")),
            ("get", "team-a", "", "namespaces", "", "team-a")
        );
        assert_eq!(
            tuple(&res(Method::PUT, "/api/v1/namespaces/team-a/status", "")),
            ("update", "team-a", "", "namespaces", "status", "team-a")
        );
        assert_eq!(
            tuple(&res(Method::GET, "/api/v1/namespaces/team-b/configmaps", "")),
            ("list", "team-b", "", "configmaps", "", "")
        );
        assert_eq!(
            res(
                Method::GET,
                "/api/v1/namespaces/x/configmaps",
                "fieldSelector=metadata.name%3Da,metadata.namespace%3Dx"
            )
            .name,
            "",
            "two requirements name no single object"
        );
        assert_eq!(
            res(Method::POST, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "").resource,
            "selfsubjectaccessreviews"
        );
    }

    #[test]
    fn discovery_openapi_and_metrics_are_paths_with_the_lowercase_method_as_verb() {
        for p in [
            "/api",
            "/api/v1",
            "/apis",
            "/apis/mpiswarm.io",
            "/apis/mpiswarm.io/v1alpha1",
            "/openapi/v3/apis/apps/v1",
            "/metrics",
        ] {
            assert_eq!(
                attributes(&Method::GET, p, &Query::default()),
                Attributes::NonResource { verb: "get".into(), path: p.into() },
                "{p}"
            );
        }
        assert_eq!(attributes(&Method::POST, "/metrics", &Query::default()).verb(), "post");
    }

    #[test]
    fn a_refusal_is_a_403_status_naming_user_verb_resource_and_namespace() {
        let u = User { name: "team-a".into(), ..User::default() };
        let e = forbidden(&u, &attributes(&Method::GET, "/api/v1/namespaces/team-b/configmaps", &Query::default()));
        assert_eq!((e.code, e.reason), (403, "Forbidden"));
        assert_eq!(
            e.message,
            "configmaps is forbidden: User \"team-a\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"team-b\""
        );
        let e = forbidden(
            &u,
            &attributes(&Method::GET, "/apis/mpiswarm.io/v1alpha1/namespaces/team-b/mpijobs/pi", &Query::default()),
        );
        assert_eq!(
            e.message,
            "mpijobs.mpiswarm.io \"pi\" is forbidden: User \"team-a\" cannot get resource \"mpijobs\" in API group \"mpiswarm.io\" in the namespace \"team-b\""
        );
        let status = e.to_status();
        assert_eq!(
            (
                status["details"]["kind"].as_str(),
                status["details"]["group"].as_str(),
                status["details"]["name"].as_str()
            ),
            (Some("mpijobs"), Some("mpiswarm.io"), Some("pi"))
        );
        let e = forbidden(&u, &attributes(&Method::GET, "/metrics", &Query::default()));
        assert_eq!(e.message, "forbidden: User \"team-a\" cannot get path \"/metrics\"");
    }

    #[tokio::test]
    async fn the_cached_policy_follows_every_rbac_change_and_only_those() {
        use crate::api::testing::{api, create, target};
        use serde_json::json;
        let t = api().await;
        let cache = PolicyCache::new(&t.api.store);
        let u = User { name: "team-a".into(), groups: vec!["system:authenticated".into()], ..User::default() };
        let list = attributes(&Method::GET, "/api/v1/namespaces/default/configmaps", &Query::default());
        assert_eq!(cache.current(&t.api.store).authorize(&u, &list), Decision::Denied);
        let before = cache.current(&t.api.store);
        create(&t.api, &target(&t.api, "", "configmaps", Some("default"), None), json!({"metadata": {"name": "c"}}))
            .await;
        assert!(Arc::ptr_eq(&before, &cache.current(&t.api.store)), "a configmap does not rebuild the policy");
        create(
            &t.api,
            &target(&t.api, "rbac.authorization.k8s.io", "roles", Some("default"), None),
            json!({"metadata": {"name": "r"}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]}),
        )
        .await;
        create(
            &t.api,
            &target(&t.api, "rbac.authorization.k8s.io", "rolebindings", Some("default"), None),
            json!({"metadata": {"name": "r"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
                "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "team-a"}]}),
        )
        .await;
        assert!(cache.current(&t.api.store).authorize(&u, &list).allowed(), "the new binding counts at once");
    }

    #[test]
    fn a_user_grants_only_what_it_holds_unless_it_may_escalate_or_bind() {
        use serde_json::json;
        let rbac_group = "rbac.authorization.k8s.io";
        let policy = Policy::from_objects(&[
            json!({"kind": "Role", "metadata": {"name": "jobs", "namespace": "team-a"}, "rules": [
                {"apiGroups": ["mpiswarm.io"], "resources": ["mpijobs"], "verbs": ["*"]},
                {"apiGroups": [rbac_group], "resources": ["roles", "rolebindings"], "verbs": ["create", "update", "patch"]}]}),
            json!({"kind": "RoleBinding", "metadata": {"name": "jobs", "namespace": "team-a"},
                "roleRef": {"kind": "Role", "name": "jobs"}, "subjects": [{"kind": "User", "name": "team-a"}]}),
            json!({"kind": "ClusterRole", "metadata": {"name": "cluster-admin"}, "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}),
            json!({"kind": "ClusterRole", "metadata": {"name": "escalator"}, "rules": [{"apiGroups": [rbac_group], "resources": ["roles"], "verbs": ["escalate"]}]}),
            json!({"kind": "ClusterRoleBinding", "metadata": {"name": "escalator"},
                "roleRef": {"kind": "ClusterRole", "name": "escalator"}, "subjects": [{"kind": "User", "name": "trusted"}]}),
        ]);
        let a = User { name: "team-a".into(), ..User::default() };
        let role = |rules: serde_json::Value| json!({"metadata": {"name": "r"}, "rules": rules});
        let jobs_only = role(json!([{"apiGroups": ["mpiswarm.io"], "resources": ["mpijobs"], "verbs": ["get"]}]));
        assert!(escalation(&policy, &a, "roles", "team-a", Some(&jobs_only)).is_ok());
        assert!(escalation(&policy, &a, "roles", "team-b", Some(&jobs_only)).is_err(), "held in team-a only");
        let secrets = role(json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]));
        let e = escalation(&policy, &a, "roles", "team-a", Some(&secrets)).expect_err("not held");
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            "roles.rbac.authorization.k8s.io \"r\" is forbidden: User \"team-a\" is attempting to grant RBAC permissions not currently held in the namespace \"team-a\": get \"secrets\" in API group \"\"; a user may grant only what it holds, unless it has the escalate verb"
        );
        let trusted = User { name: "trusted".into(), ..User::default() };
        assert!(escalation(&policy, &trusted, "roles", "team-a", Some(&secrets)).is_ok(), "escalate");
        let e = escalation(&policy, &a, "roles", "team-a", None).expect_err("a patch needs escalate");
        assert!(e.message.contains("only with the escalate verb"), "{}", e.message);

        let binding = |kind: &str, name: &str| {
            json!({"metadata": {"name": "b"}, "roleRef": {"kind": kind, "name": name},
            "subjects": [{"kind": "User", "name": "team-b"}]})
        };
        assert!(
            escalation(&policy, &a, "rolebindings", "team-a", Some(&binding("Role", "jobs"))).is_ok(),
            "its own rights"
        );
        let e = escalation(&policy, &a, "rolebindings", "team-a", Some(&binding("ClusterRole", "cluster-admin")))
            .expect_err("more than it holds");
        assert!(e.message.contains("attempting to grant RBAC permissions not currently held"), "{}", e.message);
        let e =
            escalation(&policy, &a, "rolebindings", "team-a", Some(&binding("Role", "ghost"))).expect_err("missing");
        assert!(e.message.contains("Role \"ghost\": it does not exist"), "{}", e.message);
        assert!(escalation(&policy, &a, "rolebindings", "team-a", None).is_err(), "a patch needs bind");
    }
}
