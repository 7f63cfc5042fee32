//! The ClusterRoles and ClusterRoleBindings every cluster starts with, so
//! that a user with no rights of its own can still use kubectl: discovery
//! and OpenAPI (`system:discovery`), asking what it may do and who it is
//! (`system:basic-user`), both bound to every authenticated user. Also, for
//! an operator to bind: `cluster-admin` (everything; bound to
//! `system:masters`, which is allowed everything anyway), `system:monitoring`
//! (`/metrics` and the health paths) and `system:auth-delegator` (token and
//! access reviews, what a server that delegates its checks here needs).
//!
//! They are stored objects, as on a real cluster (`kubectl get clusterrole
//! system:discovery`), labelled `kubernetes.io/bootstrapping:
//! rbac-defaults`, and created at start when missing; one an operator
//! changed is left as it is.

use serde_json::{Value, json};

use crate::api::{Api, Target, WriteOpts};
use crate::error::ApiResult;
use crate::query::Query;
use crate::rbac::AUTHENTICATED;

const GROUP: &str = "rbac.authorization.k8s.io";

fn meta(name: &str) -> Value {
    json!({"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}})
}

fn cluster_role(name: &str, rules: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta(name), "rules": rules})
}

fn bound_to_group(name: &str, group: &str) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": meta(name),
        "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": GROUP, "kind": "Group", "name": group}]})
}

/// The default ClusterRoles, then their ClusterRoleBindings.
pub fn objects() -> (Vec<Value>, Vec<Value>) {
    let roles = vec![
        cluster_role(
            "cluster-admin",
            json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
        ),
        cluster_role(
            "system:discovery",
            json!([{"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"], "verbs": ["get"]}]),
        ),
        cluster_role(
            "system:basic-user",
            json!([
                {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
                {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
            ]),
        ),
        cluster_role(
            "system:monitoring",
            json!([{"nonResourceURLs": ["/metrics", "/healthz", "/livez", "/readyz"], "verbs": ["get"]}]),
        ),
        cluster_role(
            "system:auth-delegator",
            json!([
                {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
                {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
            ]),
        ),
    ];
    let bindings = vec![
        bound_to_group("cluster-admin", crate::rbac::MASTERS),
        bound_to_group("system:discovery", AUTHENTICATED),
        bound_to_group("system:basic-user", AUTHENTICATED),
    ];
    (roles, bindings)
}

/// Creates the default objects that are missing.
pub async fn ensure(api: &Api) -> ApiResult<()> {
    let (roles, bindings) = objects();
    for (plural, objects) in [("clusterroles", roles), ("clusterrolebindings", bindings)] {
        let Some(rt) = api.registry.find(GROUP, "v1", plural) else { continue };
        for o in objects {
            let name = o["metadata"]["name"].as_str().unwrap_or_default();
            if api.store.get(&rt.key(None, name)).is_some() {
                continue;
            }
            let t = Target { rt: rt.clone(), namespace: None, name: None, status: false };
            let q = Query::default();
            api.create(&t, o, &WriteOpts::new(&q, "mpiswarm-apiserver")).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rbac::{Attributes, Policy, ResourceAttributes, User};

    #[tokio::test]
    async fn every_authenticated_user_may_discover_and_ask_about_itself_and_nothing_more() {
        let t = crate::api::testing::api().await;
        ensure(&t.api).await.expect("created");
        ensure(&t.api).await.expect("a second start changes nothing");
        let stored = ["clusterroles/", "clusterrolebindings/"].map(|p| t.api.store.list(&format!("{GROUP}/{p}")));
        assert_eq!((stored[0].items.len(), stored[1].items.len()), (5, 3));
        let policy = Policy::from_objects(stored.iter().flat_map(|s| s.items.iter().map(|o| o.as_ref())));
        let u = User { name: "team-a".into(), uid: String::new(), groups: vec![AUTHENTICATED.into()] };
        let get = |p: &str| Attributes::NonResource { verb: "get".into(), path: p.into() };
        for p in ["/api", "/api/v1", "/apis", "/apis/mpiswarm.io/v1alpha1", "/openapi/v3", "/openapi/v2", "/version"] {
            assert!(policy.authorize(&u, &get(p)).allowed(), "{p}");
        }
        assert!(!policy.authorize(&u, &get("/metrics")).allowed());
        let create = |group: &str, resource: &str| {
            Attributes::Resource(ResourceAttributes {
                verb: "create".into(),
                group: group.into(),
                resource: resource.into(),
                ..ResourceAttributes::default()
            })
        };
        assert!(policy.authorize(&u, &create("authorization.k8s.io", "selfsubjectaccessreviews")).allowed());
        assert!(policy.authorize(&u, &create("authorization.k8s.io", "selfsubjectrulesreviews")).allowed());
        assert!(policy.authorize(&u, &create("authentication.k8s.io", "selfsubjectreviews")).allowed());
        assert!(!policy.authorize(&u, &create("authorization.k8s.io", "subjectaccessreviews")).allowed());
        assert!(!policy.authorize(&u, &create("authentication.k8s.io", "tokenreviews")).allowed());
        assert!(!policy.authorize(&u, &create("", "namespaces")).allowed());
    }
}
