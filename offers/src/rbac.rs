//! What the replicas of `--lease-name` may do in the API server, declared
//! once: read, create and replace their Lease and their OfferRegistry, in
//! their namespace, and nothing else. `mpiswarm up --offers-replicas`
//! grants exactly this to the replicas' own user; `manifests/20-rbac.yaml`
//! ships the same Role for the StatefulSet's service account, and
//! `controller/tests/rbac.rs` checks both that the manifest's rules are
//! these and that they cover every request replicas make.

use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::ObjectMeta;

/// The name of the Role, of its RoleBinding and of the service account the
/// replicas run as.
pub const NAME: &str = "mpiswarm-offers";

/// The user a service account `NAME` in `namespace` is to the API server.
pub fn service_account_user(namespace: &str) -> String {
    format!("system:serviceaccount:{namespace}:{NAME}")
}

/// The rules: the Lease (read, made by the first replica, renewed and
/// taken over by replace) and the registry (read by a new leader's claim,
/// made once, replaced on every change); writes are PUTs with the
/// resourceVersion last read, never PATCHes.
pub fn rules() -> Vec<PolicyRule> {
    let rule = |group: &str, resource: &str| PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(vec![resource.to_owned()]),
        verbs: ["get", "create", "update"].map(str::to_owned).to_vec(),
        ..PolicyRule::default()
    };
    use crate::registry_api::OfferRegistry;
    use kube::Resource;
    vec![rule("coordination.k8s.io", "leases"), rule(&OfferRegistry::group(&()), &OfferRegistry::plural(&()))]
}

/// The Role [`NAME`] in `namespace`, with [`rules`].
pub fn role(namespace: &str) -> Role {
    Role { metadata: meta(namespace), rules: Some(rules()) }
}

/// Binds the Role [`NAME`] in `namespace` to the service account [`NAME`] there.
pub fn role_binding(namespace: &str) -> RoleBinding {
    RoleBinding {
        metadata: meta(namespace),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            kind: "Role".to_owned(),
            name: NAME.to_owned(),
        },
        subjects: Some(vec![Subject {
            api_group: None,
            kind: "ServiceAccount".to_owned(),
            name: NAME.to_owned(),
            namespace: Some(namespace.to_owned()),
        }]),
    }
}

fn meta(namespace: &str) -> ObjectMeta {
    ObjectMeta { name: Some(NAME.to_owned()), namespace: Some(namespace.to_owned()), ..ObjectMeta::default() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_role_names_the_registry_crd_s_group_and_plural_and_the_binding_its_service_account() {
        let crd = crate::registry_api::crd();
        let rules = role("ns").rules.unwrap_or_default();
        assert!(rules.iter().any(|r| r.api_groups == Some(vec![crd.spec.group.clone()])
            && r.resources == Some(vec![crd.spec.names.plural.clone()])));
        let binding = role_binding("ns");
        assert_eq!(binding.role_ref.name, NAME);
        let subject = &binding.subjects.unwrap_or_default()[0];
        assert_eq!(
            (subject.kind.as_str(), subject.name.as_str(), subject.namespace.as_deref()),
            ("ServiceAccount", NAME, Some("ns"))
        );
        assert_eq!(service_account_user("ns"), "system:serviceaccount:ns:mpiswarm-offers");
    }
}
