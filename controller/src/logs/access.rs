//! Who the caller is and whether it may read a job's output, decided as the
//! kubelet decides for its own API: the bearer token goes to the API server
//! in a TokenReview, and the user it names (with its uid, groups and extra)
//! in a SubjectAccessReview of `get mpijobs/log` (group `mpiswarm.io`) on
//! the job in its namespace. This module builds those reviews and reads
//! their answers; the endpoint sends them. Pure.
//!
//! The answers are kept a short while ([`crate::logs::cache`]), as the
//! kubelet keeps them: an authenticated token [`AUTHENTICATED_TTL`], an
//! unknown one [`UNAUTHENTICATED_TTL`], an allowed access [`ALLOWED_TTL`],
//! a denied one [`DENIED_TTL`]. So a revoked token or RoleBinding still
//! reads for up to that long; a new grant works within [`DENIED_TTL`].

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, TokenReviewStatus};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec, SubjectAccessReviewStatus,
};

use crate::logs::error::LogError;

/// How long a token the API server accepted is taken without asking again
/// (the kubelet's `--authentication-token-webhook-cache-ttl` default).
pub const AUTHENTICATED_TTL: Duration = Duration::from_secs(120);
/// How long a token the API server refused is refused without asking again.
pub const UNAUTHENTICATED_TTL: Duration = Duration::from_secs(10);
/// How long an allowed access is kept (the kubelet's
/// `--authorization-webhook-cache-authorized-ttl` default).
pub const ALLOWED_TTL: Duration = Duration::from_secs(300);
/// How long a denied access is kept (`--authorization-webhook-cache-unauthorized-ttl`).
pub const DENIED_TTL: Duration = Duration::from_secs(30);

/// The API group, resource, subresource and verb a log read is authorized as.
pub const GROUP: &str = "mpiswarm.io";
pub const RESOURCE: &str = "mpijobs";
pub const SUBRESOURCE: &str = "log";
pub const VERB: &str = "get";

/// The user a TokenReview named.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Caller {
    pub username: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The TokenReview of `token`.
pub fn token_review(token: &str) -> TokenReview {
    TokenReview { spec: TokenReviewSpec { token: token.to_owned(), audiences: None }, ..TokenReview::default() }
}

/// The caller a TokenReview's answer names, or why it names none.
pub fn caller(status: Option<&TokenReviewStatus>) -> Result<Caller, LogError> {
    let Some(status) = status else {
        return Err(LogError::Unauthenticated { why: Some("the TokenReview came back without a status".into()) });
    };
    let user = status.user.as_ref().filter(|_| status.authenticated == Some(true));
    let Some(user) = user.filter(|u| u.username.as_deref().is_some_and(|n| !n.is_empty())) else {
        return Err(LogError::Unauthenticated { why: status.error.clone().filter(|e| !e.is_empty()) });
    };
    Ok(Caller {
        username: user.username.clone().unwrap_or_default(),
        uid: user.uid.clone().unwrap_or_default(),
        groups: user.groups.clone().unwrap_or_default(),
        extra: user.extra.clone().unwrap_or_default(),
    })
}

/// The SubjectAccessReview of `caller` reading the output of `job` in `namespace`.
pub fn access_review(caller: &Caller, namespace: &str, job: &str) -> SubjectAccessReview {
    let some = |s: &str| Some(s.to_owned());
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: some(&caller.username),
            uid: Some(caller.uid.clone()).filter(|u| !u.is_empty()),
            groups: Some(caller.groups.clone()),
            extra: Some(caller.extra.clone()).filter(|e| !e.is_empty()),
            resource_attributes: Some(ResourceAttributes {
                group: some(GROUP),
                resource: some(RESOURCE),
                subresource: some(SUBRESOURCE),
                verb: some(VERB),
                namespace: some(namespace),
                name: some(job),
                ..ResourceAttributes::default()
            }),
            non_resource_attributes: None,
        },
        ..SubjectAccessReview::default()
    }
}

/// Whether a SubjectAccessReview's answer allows the read; a refusal names
/// the user, the rule and the namespace, with the authorizer's reason or
/// evaluation error when it gave one.
pub fn decide(
    caller: &Caller,
    namespace: &str,
    job: &str,
    status: Option<&SubjectAccessReviewStatus>,
) -> Result<(), LogError> {
    if status.is_some_and(|s| s.allowed && s.denied != Some(true)) {
        return Ok(());
    }
    let why = status.and_then(|s| {
        [s.reason.as_deref(), s.evaluation_error.as_deref()]
            .into_iter()
            .flatten()
            .find(|w| !w.is_empty())
            .map(str::to_owned)
    });
    Err(LogError::Forbidden {
        user: caller.username.clone(),
        namespace: namespace.to_owned(),
        job: job.to_owned(),
        why,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::authentication::v1::UserInfo;

    fn team_a() -> Caller {
        Caller {
            username: "team-a".into(),
            uid: "a-1".into(),
            groups: vec!["mpiswarm:tenants".into(), "system:authenticated".into()],
            extra: BTreeMap::new(),
        }
    }

    #[test]
    fn an_authenticated_review_names_the_caller_and_anything_else_is_unauthenticated() {
        let user = UserInfo {
            username: Some("team-a".into()),
            uid: Some("a-1".into()),
            groups: Some(vec!["mpiswarm:tenants".into(), "system:authenticated".into()]),
            extra: None,
        };
        let ok = TokenReviewStatus { authenticated: Some(true), user: Some(user.clone()), ..Default::default() };
        assert_eq!(caller(Some(&ok)).unwrap(), team_a());

        let refused =
            TokenReviewStatus { authenticated: Some(false), error: Some("invalid token".into()), ..Default::default() };
        let err = caller(Some(&refused)).unwrap_err();
        assert!(matches!(err, LogError::Unauthenticated { why: Some(ref w) } if w == "invalid token"), "{err}");
        // A user without `authenticated: true`, or no name, or no status at all is no caller.
        let unsaid = TokenReviewStatus { user: Some(user), ..Default::default() };
        assert!(matches!(caller(Some(&unsaid)), Err(LogError::Unauthenticated { .. })));
        let nameless =
            TokenReviewStatus { authenticated: Some(true), user: Some(UserInfo::default()), ..Default::default() };
        assert!(matches!(caller(Some(&nameless)), Err(LogError::Unauthenticated { .. })));
        assert!(matches!(caller(None), Err(LogError::Unauthenticated { .. })));
        assert_eq!(token_review("t").spec.token, "t");
    }

    #[test]
    fn the_access_review_asks_for_get_on_the_jobs_log_subresource_as_the_reviewed_user() {
        let mut who = team_a();
        who.extra.insert("scopes".into(), vec!["x".into()]);
        let review = access_review(&who, "team-a", "pi");
        let spec = &review.spec;
        assert_eq!((spec.user.as_deref(), spec.uid.as_deref()), (Some("team-a"), Some("a-1")));
        assert_eq!(spec.groups.as_deref(), Some(&who.groups[..]));
        assert_eq!(spec.extra.as_ref(), Some(&who.extra));
        let r = spec.resource_attributes.as_ref().unwrap();
        let got = [&r.group, &r.resource, &r.subresource, &r.verb, &r.namespace, &r.name].map(|v| v.as_deref());
        assert_eq!(got, [Some("mpiswarm.io"), Some("mpijobs"), Some("log"), Some("get"), Some("team-a"), Some("pi")]);
        assert!(spec.non_resource_attributes.is_none());
    }

    #[test]
    fn only_an_allowed_answer_allows_and_a_refusal_names_the_rule_and_the_authorizers_reason() {
        let who = team_a();
        let allowed = SubjectAccessReviewStatus { allowed: true, ..Default::default() };
        assert!(decide(&who, "team-a", "pi", Some(&allowed)).is_ok());
        for status in [
            None,
            Some(SubjectAccessReviewStatus::default()),
            Some(SubjectAccessReviewStatus { allowed: true, denied: Some(true), ..Default::default() }),
        ] {
            let err = decide(&who, "team-b", "pi", status.as_ref()).unwrap_err();
            let text = err.to_string();
            assert!(matches!(err, LogError::Forbidden { .. }), "{text}");
            for part in ["\"team-a\"", "get", "mpijobs/log", "mpiswarm.io", "namespace \"team-b\""] {
                assert!(text.contains(part), "{part} missing from {text}");
            }
        }
        let reasoned =
            SubjectAccessReviewStatus { reason: Some("no RBAC policy matched".into()), ..Default::default() };
        let text = decide(&who, "team-b", "pi", Some(&reasoned)).unwrap_err().to_string();
        assert!(text.ends_with(": no RBAC policy matched"), "{text}");
    }
}
