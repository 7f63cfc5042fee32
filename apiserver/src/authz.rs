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

use crate::error::ApiError;
use crate::locks;
use crate::query::Query;
use crate::rbac::{Attributes, Policy, ResourceAttributes, User, forbidden_message};
use crate::store::{Since, Store};

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
}
