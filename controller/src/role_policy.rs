//! Which Mesos roles a namespace's MpiJobs may use: the operator's policy,
//! an annotation on the Namespace, so that a team cannot run under another
//! team's role (its DRF weight and, with quotas, its share).
//!
//! `mpiswarm.io/allowed-roles: "team-a, team-a-batch"` lists the roles the
//! namespace's jobs may set in `spec.role`; `*` allows every role. A
//! Namespace **without** the annotation allows every role: the stated
//! default, so a cluster that sets no policy runs as before;
//! `mpiswarm tenant add` (and any operator) sets it for each tenant. Pure:
//! the annotations in, a decision out.

use std::collections::BTreeMap;

/// The annotation on a Namespace that lists the roles its jobs may use.
pub const ALLOWED_ROLES: &str = "mpiswarm.io/allowed-roles";

/// Whether a job in `namespace` (whose annotations are `annotations`) may
/// use `role`; the refusal names the namespace, the annotation and what it allows.
pub fn check(namespace: &str, annotations: Option<&BTreeMap<String, String>>, role: &str) -> Result<(), String> {
    let Some(listed) = annotations.and_then(|a| a.get(ALLOWED_ROLES)) else { return Ok(()) };
    let allowed: Vec<&str> = listed.split(',').map(str::trim).filter(|r| !r.is_empty()).collect();
    if allowed.iter().any(|r| *r == "*" || *r == role) {
        return Ok(());
    }
    let shown = if allowed.is_empty() { "no role".to_owned() } else { allowed.join(", ") };
    Err(format!(
        "spec.role '{role}' is not allowed in namespace '{namespace}': its annotation {ALLOWED_ROLES} allows {shown}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotated(value: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(ALLOWED_ROLES.to_owned(), value.to_owned()), ("other".to_owned(), "x".to_owned())])
    }

    #[test]
    fn a_namespace_allows_the_roles_it_lists_and_refuses_others_by_name() {
        let a = annotated("team-a, team-a-batch");
        assert_eq!(check("team-a", Some(&a), "team-a"), Ok(()));
        assert_eq!(check("team-a", Some(&a), "team-a-batch"), Ok(()));
        assert_eq!(
            check("team-a", Some(&a), "team-b"),
            Err("spec.role 'team-b' is not allowed in namespace 'team-a': its annotation mpiswarm.io/allowed-roles allows team-a, team-a-batch".to_owned())
        );
        assert_eq!(check("ops", Some(&annotated("*")), "anything"), Ok(()));
        let none = check("locked", Some(&annotated(" , ")), "mpi").unwrap_err();
        assert!(none.ends_with("allows no role"), "{none}");
    }

    #[test]
    fn without_the_annotation_every_role_is_allowed() {
        assert_eq!(check("default", None, "mpi"), Ok(()));
        assert_eq!(check("default", Some(&BTreeMap::new()), "mpi"), Ok(()));
    }
}
