//! RBAC as kube-apiserver evaluates it: which Role and ClusterRole rules
//! are bound, by RoleBindings and ClusterRoleBindings, to a user or one of
//! its groups, and whether one of them allows a request. Pure data in and
//! out: the policy is built from the stored objects by the caller
//! (`authz`), and nothing here reads storage, a clock or a file, so every
//! rule kind is unit-tested below and the evaluation can be benchmarked
//! alone (`benches/rbac.rs`).
//!
//! The rules, as Kubernetes states them:
//! - a rule matches a verb, API group or resource when its list holds it or
//!   `*`; `resource/subresource` names one subresource, `*/subresource` that
//!   subresource of every resource, and `*` every resource and subresource;
//! - `resourceNames`, when not empty, restricts the rule to those names (so
//!   it never allows a create or a list without a name);
//! - `nonResourceURLs` match a path exactly or, ending in `*`, by prefix;
//! - a ClusterRoleBinding grants everywhere; a RoleBinding grants only in
//!   its namespace (its role a Role there, or a ClusterRole), and never
//!   cluster-scoped resources or non-resource paths;
//! - subjects are a User (by name), a Group, or a ServiceAccount, which is
//!   user `system:serviceaccount:NAMESPACE:NAME`;
//! - group `system:masters` is allowed everything without any rule.
//!
//! Nothing ever denies: a request is allowed when one rule allows it.
//! `uncovered` is the escalation check's half: which rights a role would
//! grant that a user's own rules do not hold.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

/// Members of this group may do everything, whatever the RBAC objects say.
pub const MASTERS: &str = "system:masters";
/// Every authenticated user is in this group.
pub const AUTHENTICATED: &str = "system:authenticated";

/// Who makes a request, as authentication found it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct User {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
}

impl User {
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}

/// What a request does, in RBAC's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attributes {
    Resource(ResourceAttributes),
    /// A path outside the resource URLs (discovery, OpenAPI, `/metrics`).
    NonResource {
        verb: String,
        path: String,
    },
}

/// A request on a resource: empty strings where the request has none.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResourceAttributes {
    pub verb: String,
    pub namespace: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
}

impl Attributes {
    pub fn verb(&self) -> &str {
        match self {
            Attributes::Resource(r) => &r.verb,
            Attributes::NonResource { verb, .. } => verb,
        }
    }

    /// The namespace whose RoleBindings may grant the request ("" for none).
    fn namespace(&self) -> &str {
        match self {
            Attributes::Resource(r) => &r.namespace,
            Attributes::NonResource { .. } => "",
        }
    }
}

/// One rule of a Role or ClusterRole (`rbac.authorization.k8s.io/v1` PolicyRule).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rule {
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
    pub non_resource_urls: Vec<String>,
}

/// `list` holds `value` or `*`.
fn has(list: &[String], value: &str) -> bool {
    list.iter().any(|x| x == "*" || x == value)
}

impl Rule {
    /// A PolicyRule as stored (`verbs`, `apiGroups`, `resources`,
    /// `resourceNames`, `nonResourceURLs`); missing lists are empty.
    pub fn from_json(v: &Value) -> Self {
        Self {
            verbs: strings(&v["verbs"]),
            api_groups: strings(&v["apiGroups"]),
            resources: strings(&v["resources"]),
            resource_names: strings(&v["resourceNames"]),
            non_resource_urls: strings(&v["nonResourceURLs"]),
        }
    }

    /// Whether this rule allows the request.
    pub fn allows(&self, request: &Attributes) -> bool {
        match request {
            Attributes::Resource(r) => {
                has(&self.verbs, &r.verb)
                    && has(&self.api_groups, &r.group)
                    && self.covers_resource(&r.resource, &r.subresource)
                    && (self.resource_names.is_empty() || self.resource_names.contains(&r.name))
            }
            Attributes::NonResource { verb, path } => {
                has(&self.verbs, verb)
                    && self.non_resource_urls.iter().any(|u| match u.strip_suffix('*') {
                        Some(prefix) => path.starts_with(prefix),
                        None => u == path,
                    })
            }
        }
    }

    fn covers_resource(&self, resource: &str, subresource: &str) -> bool {
        self.resources.iter().any(|r| {
            if r == "*" {
                return true;
            }
            if subresource.is_empty() {
                return r == resource;
            }
            match r.split_once('/') {
                Some((res, sub)) => sub == subresource && (res == resource || res == "*"),
                None => false,
            }
        })
    }

    pub fn is_resource_rule(&self) -> bool {
        !self.resources.is_empty()
    }

    pub fn is_non_resource_rule(&self) -> bool {
        !self.non_resource_urls.is_empty()
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect()).unwrap_or_default()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SubjectKind {
    User,
    Group,
    ServiceAccount,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Subject {
    kind: SubjectKind,
    name: String,
    /// A ServiceAccount's namespace; empty means the binding's.
    namespace: String,
}

impl Subject {
    fn from_json(v: &Value) -> Option<Self> {
        let kind = match v["kind"].as_str()? {
            "User" => SubjectKind::User,
            "Group" => SubjectKind::Group,
            "ServiceAccount" => SubjectKind::ServiceAccount,
            _ => return None,
        };
        let name = v["name"].as_str()?.to_owned();
        Some(Self { kind, name, namespace: v["namespace"].as_str().unwrap_or_default().to_owned() })
    }

    fn matches(&self, user: &User, binding_namespace: &str) -> bool {
        match self.kind {
            SubjectKind::User => self.name == user.name,
            SubjectKind::Group => user.in_group(&self.name),
            SubjectKind::ServiceAccount => {
                let ns = if self.namespace.is_empty() { binding_namespace } else { &self.namespace };
                user.name
                    .strip_prefix("system:serviceaccount:")
                    .and_then(|rest| rest.strip_prefix(ns))
                    .and_then(|rest| rest.strip_prefix(':'))
                    .is_some_and(|name| !ns.is_empty() && name == self.name)
            }
        }
    }

    fn describe(&self) -> String {
        match self.kind {
            SubjectKind::User => format!("User {:?}", self.name),
            SubjectKind::Group => format!("Group {:?}", self.name),
            SubjectKind::ServiceAccount => format!("ServiceAccount \"{}:{}\"", self.namespace, self.name),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum RoleRef {
    Role(String),
    ClusterRole(String),
}

/// A RoleBinding (with its namespace) or a ClusterRoleBinding (without).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Binding {
    name: String,
    namespace: Option<String>,
    role: RoleRef,
    subjects: Vec<Subject>,
}

impl Binding {
    fn from_json(v: &Value, namespace: Option<String>) -> Option<Self> {
        let role_name = v["roleRef"]["name"].as_str()?.to_owned();
        let role = match v["roleRef"]["kind"].as_str()? {
            "Role" if namespace.is_some() => RoleRef::Role(role_name),
            "ClusterRole" => RoleRef::ClusterRole(role_name),
            _ => return None,
        };
        let subjects = v["subjects"].as_array().into_iter().flatten().filter_map(Subject::from_json).collect();
        Some(Self { name: v["metadata"]["name"].as_str()?.to_owned(), namespace, role, subjects })
    }

    /// The subject that makes this binding apply to `user`, if any.
    fn subject_for(&self, user: &User) -> Option<&Subject> {
        let ns = self.namespace.as_deref().unwrap_or_default();
        self.subjects.iter().find(|s| s.matches(user, ns))
    }

    /// How a decision names this binding, as kube-apiserver's RBAC reasons do.
    fn describe(&self, subject: &Subject) -> String {
        let binding = match &self.namespace {
            Some(ns) => format!("RoleBinding \"{}/{ns}\"", self.name),
            None => format!("ClusterRoleBinding {:?}", self.name),
        };
        let role = match &self.role {
            RoleRef::Role(r) => format!("Role {r:?}"),
            RoleRef::ClusterRole(r) => format!("ClusterRole {r:?}"),
        };
        format!("{binding} of {role} to {}", subject.describe())
    }
}

/// The outcome of an authorization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed; the reason names the binding, role and subject that allowed it.
    Allowed(String),
    /// No rule allows it.
    Denied,
}

impl Decision {
    pub fn allowed(&self) -> bool {
        matches!(self, Decision::Allowed(_))
    }
}

/// Every Role, ClusterRole and binding, ready to evaluate.
#[derive(Debug, Default)]
pub struct Policy {
    cluster_roles: HashMap<String, Arc<[Rule]>>,
    /// namespace -> role name -> rules
    roles: HashMap<String, HashMap<String, Arc<[Rule]>>>,
    cluster_bindings: Vec<Binding>,
    /// namespace -> its RoleBindings
    role_bindings: HashMap<String, Vec<Binding>>,
}

fn rules_of(v: &Value) -> Arc<[Rule]> {
    v["rules"].as_array().into_iter().flatten().map(Rule::from_json).collect()
}

impl Policy {
    /// The policy the given objects make: Roles, ClusterRoles, RoleBindings
    /// and ClusterRoleBindings in their stored JSON form (`kind` tells them
    /// apart). A binding whose role does not exist grants nothing, as on a
    /// real cluster; malformed objects are skipped (the API validated them).
    pub fn from_objects<'a>(objects: impl IntoIterator<Item = &'a Value>) -> Self {
        let mut p = Policy::default();
        for o in objects {
            let name = o["metadata"]["name"].as_str().unwrap_or_default().to_owned();
            let namespace = o["metadata"]["namespace"].as_str().unwrap_or_default().to_owned();
            match o["kind"].as_str() {
                Some("ClusterRole") => {
                    p.cluster_roles.insert(name, rules_of(o));
                }
                Some("Role") => {
                    p.roles.entry(namespace).or_default().insert(name, rules_of(o));
                }
                Some("ClusterRoleBinding") => p.cluster_bindings.extend(Binding::from_json(o, None)),
                Some("RoleBinding") => {
                    if let Some(b) = Binding::from_json(o, Some(namespace.clone())) {
                        p.role_bindings.entry(namespace).or_default().push(b);
                    }
                }
                _ => {}
            }
        }
        p
    }

    fn rules(&self, binding: &Binding) -> &[Rule] {
        let rules = match (&binding.role, &binding.namespace) {
            (RoleRef::ClusterRole(r), _) => self.cluster_roles.get(r),
            (RoleRef::Role(r), Some(ns)) => self.roles.get(ns).and_then(|roles| roles.get(r)),
            (RoleRef::Role(_), None) => None,
        };
        rules.map(|r| &r[..]).unwrap_or_default()
    }

    /// The bindings that may grant something in `namespace` ("" for the
    /// cluster scope): every ClusterRoleBinding, then that namespace's
    /// RoleBindings.
    fn bindings<'a>(&'a self, namespace: &str) -> impl Iterator<Item = &'a Binding> {
        let local = if namespace.is_empty() { None } else { self.role_bindings.get(namespace) };
        self.cluster_bindings.iter().chain(local.into_iter().flatten())
    }

    /// Whether `user` may do `request`.
    pub fn authorize(&self, user: &User, request: &Attributes) -> Decision {
        if let Some(allowed) = privileged(user) {
            return allowed;
        }
        for binding in self.bindings(request.namespace()) {
            let Some(subject) = binding.subject_for(user) else { continue };
            if self.rules(binding).iter().any(|rule| rule.allows(request)) {
                return Decision::Allowed(format!("RBAC: allowed by {}", binding.describe(subject)));
            }
        }
        Decision::Denied
    }

    /// The rules of a Role in `namespace` or of a ClusterRole, if it exists.
    pub fn role(&self, cluster: bool, namespace: &str, name: &str) -> Option<&[Rule]> {
        let rules = if cluster {
            self.cluster_roles.get(name)
        } else {
            self.roles.get(namespace).and_then(|roles| roles.get(name))
        };
        rules.map(|r| &r[..])
    }

    /// Every rule bound to `user` that applies in `namespace` (what
    /// SelfSubjectRulesReview lists), in binding order, without repeats.
    pub fn rules_for(&self, user: &User, namespace: &str) -> Vec<Rule> {
        let mut out: Vec<Rule> = Vec::new();
        if user.in_group(MASTERS) {
            out.push(Rule {
                verbs: vec!["*".into()],
                api_groups: vec!["*".into()],
                resources: vec!["*".into()],
                ..Rule::default()
            });
            out.push(Rule { verbs: vec!["*".into()], non_resource_urls: vec!["*".into()], ..Rule::default() });
        }
        for binding in self.bindings(namespace) {
            if binding.subject_for(user).is_none() {
                continue;
            }
            for rule in self.rules(binding) {
                // A RoleBinding never grants non-resource paths.
                if binding.namespace.is_some() && !rule.is_resource_rule() {
                    continue;
                }
                if !out.contains(rule) {
                    out.push(rule.clone());
                }
            }
        }
        out
    }
}

/// The decision for a member of `system:masters`, who needs no rule (so a
/// caller may decide without the policy at hand); None for anyone else.
pub fn privileged(user: &User) -> Option<Decision> {
    user.in_group(MASTERS).then(|| Decision::Allowed(format!("user {:?} is in group {MASTERS:?}", user.name)))
}

/// kube-apiserver's words for a refusal: who cannot do what, where. The
/// text names the verb, the resource (with its subresource) and API group,
/// and the namespace or cluster scope, or the path: the rule that was missing.
pub fn forbidden_message(user: &User, request: &Attributes) -> String {
    match request {
        Attributes::NonResource { verb, path } => format!("User {:?} cannot {verb} path {path:?}", user.name),
        Attributes::Resource(r) => {
            let resource =
                if r.subresource.is_empty() { r.resource.clone() } else { format!("{}/{}", r.resource, r.subresource) };
            let scope = if r.namespace.is_empty() {
                "at the cluster scope".to_owned()
            } else {
                format!("in the namespace {:?}", r.namespace)
            };
            format!("User {:?} cannot {} resource {resource:?} in API group {:?} {scope}", user.name, r.verb, r.group)
        }
    }
}

/// What of `requested` the `owner` rules do not cover, one verb, group,
/// resource and name (or path) at a time, worded for a refusal; empty when
/// `owner` holds every right `requested` would grant. A `*` in a requested
/// rule is covered only by a `*` (so nobody grants more than it holds).
/// This is the check kube-apiserver makes before a user may create a role
/// or bind one without the `escalate` or `bind` verbs.
pub fn uncovered(owner: &[Rule], requested: &[Rule]) -> Vec<String> {
    let held = |a: &Attributes| owner.iter().any(|r| r.allows(a));
    let mut missing = Vec::new();
    for rule in requested {
        for verb in &rule.verbs {
            for url in &rule.non_resource_urls {
                if !held(&Attributes::NonResource { verb: verb.clone(), path: url.clone() }) {
                    missing.push(format!("{verb} {url}"));
                }
            }
            let none = [String::new()];
            let names = if rule.resource_names.is_empty() { &none[..] } else { &rule.resource_names[..] };
            for group in &rule.api_groups {
                for resource in &rule.resources {
                    let (res, sub) = resource.split_once('/').unwrap_or((resource, ""));
                    for name in names {
                        let a = Attributes::Resource(ResourceAttributes {
                            verb: verb.clone(),
                            group: group.clone(),
                            resource: res.to_owned(),
                            subresource: sub.to_owned(),
                            name: name.clone(),
                            namespace: String::new(),
                        });
                        if !held(&a) {
                            let named = if name.is_empty() { String::new() } else { format!(" named {name:?}") };
                            missing.push(format!("{verb} {resource:?}{named} in API group {group:?}"));
                        }
                    }
                }
            }
        }
    }
    missing
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn user(name: &str, groups: &[&str]) -> User {
        User { name: name.into(), uid: String::new(), groups: groups.iter().map(|g| g.to_string()).collect() }
    }

    fn res(verb: &str, ns: &str, group: &str, resource: &str, sub: &str, name: &str) -> Attributes {
        Attributes::Resource(ResourceAttributes {
            verb: verb.into(),
            namespace: ns.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            name: name.into(),
        })
    }

    fn path(verb: &str, p: &str) -> Attributes {
        Attributes::NonResource { verb: verb.into(), path: p.into() }
    }

    fn role(kind: &str, ns: Option<&str>, name: &str, rules: Value) -> Value {
        let mut v = json!({"kind": kind, "metadata": {"name": name}, "rules": rules});
        if let Some(ns) = ns {
            v["metadata"]["namespace"] = json!(ns);
        }
        v
    }

    fn binding(kind: &str, ns: Option<&str>, name: &str, role_kind: &str, role: &str, subjects: Value) -> Value {
        let mut v = json!({"kind": kind, "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role}, "subjects": subjects});
        if let Some(ns) = ns {
            v["metadata"]["namespace"] = json!(ns);
        }
        v
    }

    fn user_subject(name: &str) -> Value {
        json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name}])
    }

    /// team-a may manage mpijobs (and read their log and status) and
    /// configmaps in namespace team-a.
    fn team_a() -> Vec<Value> {
        vec![
            role(
                "Role",
                Some("team-a"),
                "jobs",
                json!([
                    {"apiGroups": ["mpiswarm.io"], "resources": ["mpijobs"], "verbs": ["*"]},
                    {"apiGroups": ["mpiswarm.io"], "resources": ["mpijobs/log", "mpijobs/status"], "verbs": ["get"]},
                    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "create"]},
                ]),
            ),
            binding("RoleBinding", Some("team-a"), "jobs", "Role", "jobs", user_subject("team-a")),
        ]
    }

    fn allowed(p: &Policy, u: &User, a: &Attributes) -> bool {
        p.authorize(u, a).allowed()
    }

    #[test]
    fn a_role_binding_grants_its_roles_rules_in_its_namespace_only() {
        let p = Policy::from_objects(&team_a());
        let a = user("team-a", &[AUTHENTICATED]);
        for verb in ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"] {
            assert!(allowed(&p, &a, &res(verb, "team-a", "mpiswarm.io", "mpijobs", "", "")), "{verb}");
        }
        assert!(!allowed(&p, &a, &res("list", "team-b", "mpiswarm.io", "mpijobs", "", "")), "another namespace");
        assert!(!allowed(&p, &a, &res("list", "", "mpiswarm.io", "mpijobs", "", "")), "all namespaces");
        assert!(!allowed(&p, &user("team-b", &[]), &res("list", "team-a", "mpiswarm.io", "mpijobs", "", "")));
        assert!(!allowed(&p, &a, &res("delete", "team-a", "", "configmaps", "", "c")), "a verb the rule lacks");
        assert!(!allowed(&p, &a, &res("list", "team-a", "", "secrets", "", "")), "a resource the rule lacks");
        assert!(!allowed(&p, &a, &res("list", "team-a", "other.io", "mpijobs", "", "")), "a group the rule lacks");
        let reason = p.authorize(&a, &res("get", "team-a", "mpiswarm.io", "mpijobs", "", "pi"));
        assert_eq!(
            reason,
            Decision::Allowed(
                "RBAC: allowed by RoleBinding \"jobs/team-a\" of Role \"jobs\" to User \"team-a\"".into()
            )
        );
    }

    #[test]
    fn subresources_are_granted_by_name_or_by_star_and_not_by_the_resource_alone() {
        let p = Policy::from_objects(&team_a());
        let a = user("team-a", &[]);
        assert!(allowed(&p, &a, &res("get", "team-a", "mpiswarm.io", "mpijobs", "log", "pi")));
        assert!(allowed(&p, &a, &res("get", "team-a", "mpiswarm.io", "mpijobs", "status", "pi")));
        assert!(!allowed(&p, &a, &res("patch", "team-a", "mpiswarm.io", "mpijobs", "status", "pi")), "get only");
        let p = Policy::from_objects(&[
            role(
                "ClusterRole",
                None,
                "status-reader",
                json!([{"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["get"]}]),
            ),
            role(
                "ClusterRole",
                None,
                "cms",
                json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]),
            ),
            binding("ClusterRoleBinding", None, "s", "ClusterRole", "status-reader", user_subject("u")),
            binding("ClusterRoleBinding", None, "c", "ClusterRole", "cms", user_subject("v")),
        ]);
        assert!(allowed(&p, &user("u", &[]), &res("get", "x", "apps", "deployments", "status", "d")));
        assert!(
            !allowed(&p, &user("u", &[]), &res("get", "x", "apps", "deployments", "", "d")),
            "*/status is not the resource"
        );
        assert!(!allowed(&p, &user("u", &[]), &res("get", "x", "apps", "deployments", "scale", "d")));
        assert!(
            !allowed(&p, &user("v", &[]), &res("get", "x", "", "configmaps", "status", "c")),
            "the resource is not its subresources"
        );
    }

    #[test]
    fn star_matches_every_verb_group_resource_and_subresource() {
        let p = Policy::from_objects(&[
            role("ClusterRole", None, "all", json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}])),
            binding("ClusterRoleBinding", None, "all", "ClusterRole", "all", user_subject("root")),
        ]);
        let root = user("root", &[]);
        assert!(allowed(&p, &root, &res("deletecollection", "any", "apps", "deployments", "", "")));
        assert!(allowed(&p, &root, &res("update", "any", "mpiswarm.io", "mpijobs", "status", "j")));
        assert!(allowed(&p, &root, &res("escalate", "", "rbac.authorization.k8s.io", "clusterroles", "", "x")));
        assert!(!allowed(&p, &root, &path("get", "/metrics")), "resource rules never match a path");
    }

    #[test]
    fn resource_names_restrict_a_rule_to_those_objects() {
        let p = Policy::from_objects(&[
            role(
                "Role",
                Some("n"),
                "one",
                json!([{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["mine"], "verbs": ["get", "list", "update", "create"]}]),
            ),
            binding("RoleBinding", Some("n"), "one", "Role", "one", user_subject("u")),
        ]);
        let u = user("u", &[]);
        assert!(allowed(&p, &u, &res("get", "n", "", "configmaps", "", "mine")));
        assert!(allowed(&p, &u, &res("update", "n", "", "configmaps", "", "mine")));
        assert!(!allowed(&p, &u, &res("get", "n", "", "configmaps", "", "yours")));
        assert!(!allowed(&p, &u, &res("list", "n", "", "configmaps", "", "")), "a list has no name");
        assert!(!allowed(&p, &u, &res("create", "n", "", "configmaps", "", "")), "a create has no name");
    }

    #[test]
    fn non_resource_urls_match_exactly_or_by_a_trailing_star_and_only_through_cluster_bindings() {
        let p = Policy::from_objects(&[
            role(
                "ClusterRole",
                None,
                "discovery",
                json!([{"nonResourceURLs": ["/api", "/api/*", "/version"], "verbs": ["get"]}]),
            ),
            binding(
                "ClusterRoleBinding",
                None,
                "discovery",
                "ClusterRole",
                "discovery",
                json!([{"kind": "Group", "name": AUTHENTICATED}]),
            ),
            role("ClusterRole", None, "metrics", json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}])),
            binding("RoleBinding", Some("n"), "metrics", "ClusterRole", "metrics", user_subject("u")),
        ]);
        let u = user("u", &[AUTHENTICATED]);
        assert!(allowed(&p, &u, &path("get", "/api")));
        assert!(allowed(&p, &u, &path("get", "/api/v1")));
        assert!(allowed(&p, &u, &path("get", "/version")));
        assert!(!allowed(&p, &u, &path("get", "/version/x")), "no star, no prefix");
        assert!(!allowed(&p, &u, &path("get", "/apis")), "/api/* is not /apis");
        assert!(!allowed(&p, &u, &path("post", "/api")), "get only");
        assert!(!allowed(&p, &u, &path("get", "/metrics")), "a RoleBinding grants no path");
        assert!(!allowed(&p, &user("anonymous", &[]), &path("get", "/api")), "only the group's members");
    }

    #[test]
    fn a_role_binding_may_grant_a_cluster_roles_resource_rules_in_its_namespace() {
        let p = Policy::from_objects(&[
            role(
                "ClusterRole",
                None,
                "edit",
                json!([{"apiGroups": ["mpiswarm.io"], "resources": ["mpijobs"], "verbs": ["*"]}, {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}]),
            ),
            binding("RoleBinding", Some("team-a"), "edit", "ClusterRole", "edit", user_subject("team-a")),
        ]);
        let a = user("team-a", &[]);
        assert!(allowed(&p, &a, &res("create", "team-a", "mpiswarm.io", "mpijobs", "", "")));
        assert!(!allowed(&p, &a, &res("create", "team-b", "mpiswarm.io", "mpijobs", "", "")));
        assert!(!allowed(&p, &a, &res("get", "", "", "namespaces", "", "team-b")), "never cluster-scoped");
    }

    #[test]
    fn a_role_binding_to_a_role_of_another_namespace_or_to_a_missing_role_grants_nothing() {
        let p = Policy::from_objects(&[
            role("Role", Some("team-b"), "jobs", json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}])),
            binding("RoleBinding", Some("team-a"), "jobs", "Role", "jobs", user_subject("team-a")),
            binding("ClusterRoleBinding", None, "ghost", "ClusterRole", "ghost", user_subject("team-a")),
            binding("ClusterRoleBinding", None, "bad", "Role", "jobs", user_subject("team-a")),
        ]);
        let a = user("team-a", &[]);
        assert!(!allowed(&p, &a, &res("get", "team-a", "", "configmaps", "", "c")));
        assert!(!allowed(&p, &a, &res("get", "team-b", "", "configmaps", "", "c")));
    }

    #[test]
    fn subjects_are_users_groups_and_service_accounts() {
        let p = Policy::from_objects(&[
            role("Role", Some("n"), "r", json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}])),
            binding("RoleBinding", Some("n"), "group", "Role", "r", json!([{"kind": "Group", "name": "readers"}])),
            binding(
                "RoleBinding",
                Some("n"),
                "sa",
                "Role",
                "r",
                json!([{"kind": "ServiceAccount", "name": "bot"}, {"kind": "ServiceAccount", "name": "ci", "namespace": "tools"}]),
            ),
        ]);
        let get = res("get", "n", "", "configmaps", "", "c");
        assert!(allowed(&p, &user("x", &["readers"]), &get));
        assert!(!allowed(&p, &user("readers", &[]), &get), "a group is not a user of that name");
        assert!(allowed(&p, &user("system:serviceaccount:n:bot", &[]), &get), "the binding's namespace by default");
        assert!(allowed(&p, &user("system:serviceaccount:tools:ci", &[]), &get));
        assert!(!allowed(&p, &user("system:serviceaccount:other:bot", &[]), &get));
        assert!(!allowed(&p, &user("bot", &[]), &get));
        assert!(!allowed(&p, &user("system:serviceaccount:n:bot2", &[]), &get));
    }

    #[test]
    fn system_masters_may_do_everything_without_a_rule() {
        let p = Policy::default();
        let admin = user("admin", &[MASTERS, AUTHENTICATED]);
        assert!(allowed(&p, &admin, &res("delete", "", "", "namespaces", "", "team-a")));
        assert!(allowed(&p, &admin, &path("get", "/metrics")));
        assert!(!allowed(&p, &user("admin", &[AUTHENTICATED]), &path("get", "/metrics")), "the group, not the name");
    }

    #[test]
    fn the_rules_of_a_user_in_a_namespace_are_its_cluster_bindings_and_that_namespaces() {
        let mut objects = team_a();
        objects.push(role("ClusterRole", None, "discovery", json!([{"nonResourceURLs": ["/api"], "verbs": ["get"]}])));
        objects.push(binding(
            "ClusterRoleBinding",
            None,
            "d",
            "ClusterRole",
            "discovery",
            json!([{"kind": "Group", "name": AUTHENTICATED}]),
        ));
        let p = Policy::from_objects(&objects);
        let a = user("team-a", &[AUTHENTICATED]);
        let here = p.rules_for(&a, "team-a");
        assert_eq!(here.len(), 4, "{here:?}");
        assert_eq!(here.iter().filter(|r| r.is_non_resource_rule()).count(), 1);
        let elsewhere = p.rules_for(&a, "team-b");
        assert_eq!(elsewhere.len(), 1, "only discovery: {elsewhere:?}");
    }

    #[test]
    fn refusals_name_user_verb_resource_group_and_scope() {
        let u = user("team-a", &[]);
        assert_eq!(
            forbidden_message(&u, &res("list", "team-b", "mpiswarm.io", "mpijobs", "", "")),
            "User \"team-a\" cannot list resource \"mpijobs\" in API group \"mpiswarm.io\" in the namespace \"team-b\""
        );
        assert_eq!(
            forbidden_message(&u, &res("get", "", "", "namespaces", "", "x")),
            "User \"team-a\" cannot get resource \"namespaces\" in API group \"\" at the cluster scope"
        );
        assert_eq!(
            forbidden_message(&u, &res("get", "team-a", "mpiswarm.io", "mpijobs", "log", "pi")),
            "User \"team-a\" cannot get resource \"mpijobs/log\" in API group \"mpiswarm.io\" in the namespace \"team-a\""
        );
        assert_eq!(forbidden_message(&u, &path("get", "/metrics")), "User \"team-a\" cannot get path \"/metrics\"");
    }

    #[test]
    fn a_user_covers_only_the_rules_it_holds_and_a_star_only_with_a_star() {
        let owner = [
            Rule {
                verbs: vec!["get".into(), "list".into()],
                api_groups: vec!["mpiswarm.io".into()],
                resources: vec!["mpijobs".into(), "mpijobs/log".into()],
                ..Rule::default()
            },
            Rule {
                verbs: vec!["get".into()],
                api_groups: vec![String::new()],
                resources: vec!["configmaps".into()],
                resource_names: vec!["mine".into()],
                ..Rule::default()
            },
            Rule { verbs: vec!["get".into()], non_resource_urls: vec!["/api/*".into()], ..Rule::default() },
        ];
        let jobs = |verbs: &[&str], resources: &[&str]| Rule {
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
            api_groups: vec!["mpiswarm.io".into()],
            resources: resources.iter().map(|r| r.to_string()).collect(),
            ..Rule::default()
        };
        assert!(uncovered(&owner, &[jobs(&["get"], &["mpijobs", "mpijobs/log"])]).is_empty());
        assert_eq!(
            uncovered(&owner, &[jobs(&["delete"], &["mpijobs"])]),
            ["delete \"mpijobs\" in API group \"mpiswarm.io\""]
        );
        assert_eq!(uncovered(&owner, &[jobs(&["*"], &["mpijobs"])]).len(), 1, "a star verb needs a star");
        assert_eq!(uncovered(&owner, &[jobs(&["get"], &["*"])]).len(), 1, "a star resource needs a star");
        let mine = Rule {
            verbs: vec!["get".into()],
            api_groups: vec![String::new()],
            resources: vec!["configmaps".into()],
            resource_names: vec!["mine".into()],
            ..Rule::default()
        };
        assert!(uncovered(&owner, std::slice::from_ref(&mine)).is_empty());
        let all_configmaps = Rule { resource_names: vec![], ..mine };
        assert_eq!(
            uncovered(&owner, &[all_configmaps]),
            ["get \"configmaps\" in API group \"\""],
            "names held are not every name"
        );
        let urls = |u: &str| Rule { verbs: vec!["get".into()], non_resource_urls: vec![u.into()], ..Rule::default() };
        assert!(uncovered(&owner, &[urls("/api/v1"), urls("/api/*")]).is_empty());
        assert_eq!(uncovered(&owner, &[urls("/metrics")]), ["get /metrics"]);
        let all = Rule {
            verbs: vec!["*".into()],
            api_groups: vec!["*".into()],
            resources: vec!["*".into()],
            ..Rule::default()
        };
        assert!(
            uncovered(std::slice::from_ref(&all), &[jobs(&["*"], &["*"]), scale_deployments()]).is_empty(),
            "cluster-admin covers all"
        );
    }

    fn scale_deployments() -> Rule {
        Rule {
            verbs: vec!["update".into()],
            api_groups: vec!["apps".into()],
            resources: vec!["deployments/scale".into()],
            ..Rule::default()
        }
    }
}
