//! The review kinds: questions a client asks the server, answered from the
//! RBAC policy and the token users and never stored (`kubectl auth can-i`,
//! `kubectl auth can-i --list`, `kubectl auth whoami`, and a delegating
//! server such as a log endpoint that checks a caller's token and rights).
//!
//! - `authorization.k8s.io/v1` SelfSubjectAccessReview (may the caller ...),
//!   SubjectAccessReview (may this user ...), LocalSubjectAccessReview (the
//!   same, within the namespace of its path), SelfSubjectRulesReview (what
//!   may the caller do in a namespace);
//! - `authentication.k8s.io/v1` SelfSubjectReview (who is the caller) and
//!   TokenReview (whose token is this).
//!
//! Who may ask is decided before this module runs, like any create: every
//! authenticated user may ask about itself (ClusterRole `system:basic-user`),
//! only those allowed `create subjectaccessreviews` or `create tokenreviews`
//! (`system:masters`, or a binding to `system:auth-delegator`) about others.
//! Answers follow kube-apiserver: 201 with the review and its `status`; a
//! denial carries no reason, as RBAC gives none (`kubectl auth can-i`
//! prints `no`). Pure: the policy and the authenticator are passed in.

use serde_json::{Value, json};

use crate::api::Target;
use crate::authn::Authenticator;
use crate::error::{ApiError, ApiResult, Cause};
use crate::rbac::{Attributes, Decision, Policy, ResourceAttributes, Rule, User};
use crate::views::check_type;

/// What a review is answered with: the caller, the policy and who holds which token.
pub struct Context<'a> {
    pub user: &'a User,
    pub policy: &'a Policy,
    pub authn: &'a Authenticator,
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_owned()
}

fn invalid(t: &Target, field: &str, message: &str) -> ApiError {
    ApiError::invalid(
        &t.rt.kind,
        &t.rt.group,
        "",
        vec![Cause { reason: "FieldValueInvalid", field: field.into(), message: message.into() }],
    )
}

/// The attributes a SubjectAccessReview spec asks about: exactly one of
/// `resourceAttributes` and `nonResourceAttributes`.
fn asked(t: &Target, spec: &Value) -> ApiResult<Attributes> {
    let resource = spec.get("resourceAttributes").filter(|v| v.is_object());
    let path = spec.get("nonResourceAttributes").filter(|v| v.is_object());
    match (resource, path) {
        (Some(r), None) => Ok(Attributes::Resource(ResourceAttributes {
            verb: text(&r["verb"]),
            namespace: text(&r["namespace"]),
            group: text(&r["group"]),
            resource: text(&r["resource"]),
            subresource: text(&r["subresource"]),
            name: text(&r["name"]),
        })),
        (None, Some(p)) => Ok(Attributes::NonResource { verb: text(&p["verb"]), path: text(&p["path"]) }),
        _ => Err(invalid(
            t,
            "spec.resourceAttributes",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
    }
}

fn access_status(decision: &Decision) -> Value {
    match decision {
        Decision::Allowed(reason) => json!({"allowed": true, "reason": reason}),
        Decision::Denied => json!({"allowed": false}),
    }
}

fn user_info(u: &User) -> Value {
    let mut v = json!({"username": u.name, "groups": u.groups});
    if !u.uid.is_empty() {
        v["uid"] = json!(u.uid);
    }
    v
}

fn resource_rule(r: &Rule) -> Value {
    let mut v = json!({"verbs": r.verbs, "apiGroups": r.api_groups, "resources": r.resources});
    if !r.resource_names.is_empty() {
        v["resourceNames"] = json!(r.resource_names);
    }
    v
}

/// Answers one review: the object that was sent with its `status` filled in.
pub fn answer(t: &Target, mut body: Value, ctx: &Context<'_>) -> ApiResult<Value> {
    check_type(&t.rt, &mut body, false)?;
    let spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
    let status = match t.rt.kind.as_str() {
        "SelfSubjectAccessReview" => access_status(&ctx.policy.authorize(ctx.user, &asked(t, &spec)?)),
        "SubjectAccessReview" | "LocalSubjectAccessReview" => {
            let mut request = asked(t, &spec)?;
            if let Some(ns) = &t.namespace {
                match &mut request {
                    Attributes::Resource(r) if r.namespace.is_empty() || r.namespace == *ns => r.namespace = ns.clone(),
                    Attributes::Resource(_) => {
                        return Err(invalid(
                            t,
                            "spec.resourceAttributes.namespace",
                            &format!("must match the namespace of the request path ({ns})"),
                        ));
                    }
                    Attributes::NonResource { .. } => {
                        return Err(invalid(
                            t,
                            "spec.nonResourceAttributes",
                            "a LocalSubjectAccessReview asks about a namespace: use resourceAttributes",
                        ));
                    }
                }
            }
            let who = User {
                name: text(&spec["user"]),
                uid: text(&spec["uid"]),
                groups: spec["groups"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|g| g.as_str().map(String::from))
                    .collect(),
            };
            if who.name.is_empty() && who.groups.is_empty() {
                return Err(invalid(t, "spec.user", "at least one of user or group must be specified"));
            }
            access_status(&ctx.policy.authorize(&who, &request))
        }
        "SelfSubjectRulesReview" => {
            let namespace = text(&spec["namespace"]);
            let rules = ctx.policy.rules_for(ctx.user, &namespace);
            let resource_rules: Vec<Value> = rules.iter().filter(|r| r.is_resource_rule()).map(resource_rule).collect();
            let path_rules: Vec<Value> = rules
                .iter()
                .filter(|r| r.is_non_resource_rule())
                .map(|r| json!({"verbs": r.verbs, "nonResourceURLs": r.non_resource_urls}))
                .collect();
            json!({"resourceRules": resource_rules, "nonResourceRules": path_rules, "incomplete": false})
        }
        "SelfSubjectReview" => json!({"userInfo": user_info(ctx.user)}),
        "TokenReview" => {
            if spec["audiences"].as_array().is_some_and(|a| !a.is_empty()) {
                json!({"authenticated": false,
                    "error": "this server's tokens are bound to no audience; ask without spec.audiences"})
            } else {
                match ctx.authn.authenticate(spec["token"].as_str().unwrap_or_default()) {
                    Some(u) => json!({"authenticated": true, "user": user_info(&u)}),
                    None => json!({"authenticated": false}),
                }
            }
        }
        other => return Err(ApiError::internal(format!("{other} is not a review this server answers"))),
    };
    let metadata = body.get("metadata").cloned().unwrap_or_else(|| json!({}));
    body["metadata"] = metadata;
    body["status"] = status;
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rbac::{AUTHENTICATED, MASTERS};

    fn target(group: &str, plural: &str, namespace: Option<&str>) -> Target {
        let rt = crate::registry::Registry::default()
            .all()
            .iter()
            .find(|t| t.group == group && t.plural == plural)
            .cloned()
            .unwrap_or_else(|| panic!("{plural} is served"));
        Target { rt, namespace: namespace.map(String::from), name: None, status: false }
    }

    fn policy() -> Policy {
        Policy::from_objects(&[
            json!({"kind": "Role", "metadata": {"name": "jobs", "namespace": "team-a"},
                "rules": [{"apiGroups": ["mpiswarm.io"], "resources": ["mpijobs", "mpijobs/log"], "verbs": ["*"]}]}),
            json!({"kind": "RoleBinding", "metadata": {"name": "jobs", "namespace": "team-a"},
                "roleRef": {"kind": "Role", "name": "jobs"}, "subjects": [{"kind": "User", "name": "team-a"}]}),
        ])
    }

    fn team_a() -> User {
        User { name: "team-a".into(), uid: "a".into(), groups: vec![AUTHENTICATED.into()] }
    }

    fn ask(group: &str, plural: &str, ns: Option<&str>, body: Value, user: &User) -> ApiResult<Value> {
        let policy = policy();
        let authn = Authenticator::new("admin-token".into(), None);
        answer(&target(group, plural, ns), body, &Context { user, policy: &policy, authn: &authn })
    }

    fn can_i(verb: &str, resource: &str, sub: &str, ns: &str) -> Value {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": verb, "group": "mpiswarm.io", "resource": resource, "subresource": sub, "namespace": ns}}})
    }

    #[test]
    fn a_self_subject_access_review_answers_for_the_caller() {
        let a = team_a();
        let yes =
            ask("authorization.k8s.io", "selfsubjectaccessreviews", None, can_i("create", "mpijobs", "", "team-a"), &a)
                .expect("answered");
        assert_eq!(yes["status"]["allowed"], true);
        assert!(yes["status"]["reason"].as_str().is_some_and(|r| r.contains("RoleBinding \"jobs/team-a\"")), "{yes}");
        assert_eq!(yes["spec"]["resourceAttributes"]["verb"], "create", "the question comes back");
        let log =
            ask("authorization.k8s.io", "selfsubjectaccessreviews", None, can_i("get", "mpijobs", "log", "team-a"), &a)
                .expect("answered");
        assert_eq!(log["status"]["allowed"], true);
        let no =
            ask("authorization.k8s.io", "selfsubjectaccessreviews", None, can_i("create", "mpijobs", "", "team-b"), &a)
                .expect("answered");
        assert_eq!(no["status"], json!({"allowed": false}));
        let path = json!({"kind": "SelfSubjectAccessReview", "spec": {"nonResourceAttributes": {"verb": "get", "path": "/metrics"}}});
        let no = ask("authorization.k8s.io", "selfsubjectaccessreviews", None, path, &a).expect("answered");
        assert_eq!(no["status"]["allowed"], false);
    }

    #[test]
    fn a_review_must_ask_exactly_one_question_and_be_of_its_endpoints_kind() {
        let a = team_a();
        let neither = json!({"kind": "SelfSubjectAccessReview", "spec": {}});
        let e = ask("authorization.k8s.io", "selfsubjectaccessreviews", None, neither, &a).expect_err("422");
        assert_eq!(e.code, 422);
        assert!(e.message.contains("exactly one of nonResourceAttributes or resourceAttributes"), "{}", e.message);
        let wrong = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {}});
        assert_eq!(
            ask("authorization.k8s.io", "selfsubjectaccessreviews", None, wrong, &a).expect_err("400").code,
            400
        );
        let nobody = json!({"kind": "SubjectAccessReview", "spec": {"resourceAttributes": {"verb": "get"}}});
        let e = ask("authorization.k8s.io", "subjectaccessreviews", None, nobody, &a).expect_err("422");
        assert!(e.message.contains("at least one of user or group"), "{}", e.message);
    }

    #[test]
    fn a_subject_access_review_answers_for_the_user_it_names() {
        let admin = User { name: "admin".into(), uid: String::new(), groups: vec![MASTERS.into()] };
        let about = |user: &str, ns: &str| {
            json!({"kind": "SubjectAccessReview", "spec": {"user": user, "groups": [AUTHENTICATED],
                "resourceAttributes": {"verb": "get", "group": "mpiswarm.io", "resource": "mpijobs", "subresource": "log", "namespace": ns, "name": "pi"}}})
        };
        let yes = ask("authorization.k8s.io", "subjectaccessreviews", None, about("team-a", "team-a"), &admin)
            .expect("answered");
        assert_eq!(yes["status"]["allowed"], true, "asked about team-a, not about the admin");
        let no = ask("authorization.k8s.io", "subjectaccessreviews", None, about("team-b", "team-a"), &admin)
            .expect("answered");
        assert_eq!(no["status"]["allowed"], false);
        let local = json!({"kind": "LocalSubjectAccessReview", "spec": {"user": "team-a",
            "resourceAttributes": {"verb": "list", "group": "mpiswarm.io", "resource": "mpijobs"}}});
        let yes = ask("authorization.k8s.io", "localsubjectaccessreviews", Some("team-a"), local.clone(), &admin)
            .expect("answered");
        assert_eq!(yes["status"]["allowed"], true, "the path's namespace");
        let mut elsewhere = local;
        elsewhere["spec"]["resourceAttributes"]["namespace"] = json!("team-b");
        let e = ask("authorization.k8s.io", "localsubjectaccessreviews", Some("team-a"), elsewhere, &admin)
            .expect_err("422");
        assert!(e.message.contains("must match the namespace"), "{}", e.message);
    }

    #[test]
    fn rules_who_am_i_and_token_reviews() {
        let a = team_a();
        let rules = json!({"kind": "SelfSubjectRulesReview", "spec": {"namespace": "team-a"}});
        let r = ask("authorization.k8s.io", "selfsubjectrulesreviews", None, rules, &a).expect("answered");
        assert_eq!(r["status"]["resourceRules"][0]["resources"], json!(["mpijobs", "mpijobs/log"]));
        assert_eq!(r["status"]["incomplete"], false);
        let me = ask("authentication.k8s.io", "selfsubjectreviews", None, json!({"kind": "SelfSubjectReview"}), &a)
            .expect("answered");
        assert_eq!(me["status"]["userInfo"], json!({"username": "team-a", "uid": "a", "groups": [AUTHENTICATED]}));
        let token = |t: &str| json!({"kind": "TokenReview", "spec": {"token": t}});
        let ok = ask("authentication.k8s.io", "tokenreviews", None, token("admin-token"), &a).expect("answered");
        assert_eq!(ok["status"]["authenticated"], true);
        assert_eq!(ok["status"]["user"]["groups"][0], MASTERS);
        let bad = ask("authentication.k8s.io", "tokenreviews", None, token("guess"), &a).expect("answered");
        assert_eq!(bad["status"], json!({"authenticated": false}));
    }
}
