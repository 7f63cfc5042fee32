//! Access control lists, Mesos style (`--acls FILE`): which principals may
//! register frameworks in which roles, tear down which principals'
//! frameworks, register as agents, and read which operator endpoints.
//! Pure: the file's text in, a decision out; the HTTP layer asks.
//!
//! The file has Mesos' JSON shape:
//!
//! ```json
//! {
//!   "permissive": false,
//!   "register_frameworks": [
//!     {"principals": {"values": ["team-a"]}, "roles": {"values": ["team-a"]}},
//!     {"principals": {"type": "ANY"}, "roles": {"type": "NONE"}}
//!   ],
//!   "teardown_frameworks": [{"principals": {"values": ["ops"]}, "framework_principals": {"type": "ANY"}}],
//!   "register_agents": [{"principals": {"values": ["agent"]}, "agents": {"type": "ANY"}}],
//!   "get_endpoints": [{"principals": {"values": ["ops", "controller"]}, "paths": {"type": "ANY"}}]
//! }
//! ```
//!
//! An entity is `{"values": [...]}` (those names), `{"type": "ANY"}` or
//! `{"type": "NONE"}`. The rules of an action are read in order; the first
//! whose subject (`principals`) covers the caller and whose object covers
//! what is asked decides: it allows unless one of the two is `NONE`. `ANY`
//! and `NONE` cover every caller and object, a list only its names; an
//! unauthenticated caller (no `--credentials`) is covered only by `ANY` and
//! `NONE`. When no rule decides, `permissive` does (default `true`, as in
//! Mesos; the ACLs `mpiswarm up` writes say `false`). A refusal names the
//! rule that made it.

use serde::Deserialize;
use std::collections::BTreeSet;
use std::path::Path;

/// A set of names, or everyone (`ANY`), or everyone and denied (`NONE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entity {
    Any,
    None,
    Some(BTreeSet<String>),
}

impl Entity {
    /// Whether this entity covers `name` (`None`: the unauthenticated caller,
    /// or a framework registered without a principal).
    fn covers(&self, name: Option<&str>) -> bool {
        match self {
            Self::Any | Self::None => true,
            Self::Some(values) => name.is_some_and(|n| values.contains(n)),
        }
    }
}

/// Mesos' entity: `type` (SOME by default, ANY, NONE) and `values`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntity {
    #[serde(rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    values: Option<Vec<String>>,
}

impl<'de> Deserialize<'de> for Entity {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let raw = RawEntity::deserialize(d)?;
        match (raw.kind.as_deref(), raw.values) {
            (Some("ANY"), None) => Ok(Self::Any),
            (Some("NONE"), None) => Ok(Self::None),
            (Some("ANY" | "NONE"), Some(_)) => Err(D::Error::custom("an entity of type ANY or NONE takes no 'values'")),
            (None | Some("SOME"), Some(values)) if !values.is_empty() => Ok(Self::Some(values.into_iter().collect())),
            (None | Some("SOME"), _) => {
                Err(D::Error::custom("an entity needs 'values' (at least one name) or 'type' ANY or NONE"))
            }
            (Some(other), _) => Err(D::Error::custom(format!("entity type '{other}' is not SOME, ANY or NONE"))),
        }
    }
}

/// One rule: who (`principals`) may do it to what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub subject: Entity,
    pub object: Entity,
}

macro_rules! rule_shape {
    ($name:ident, $object:ident) => {
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        struct $name {
            principals: Entity,
            $object: Entity,
        }
        impl From<$name> for Rule {
            fn from(r: $name) -> Self {
                Rule { subject: r.principals, object: r.$object }
            }
        }
    };
}
rule_shape!(RegisterFrameworkRule, roles);
rule_shape!(TeardownFrameworkRule, framework_principals);
rule_shape!(RegisterAgentRule, agents);
rule_shape!(GetEndpointRule, paths);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AclFile {
    #[serde(default = "permissive_by_default")]
    permissive: bool,
    #[serde(default)]
    register_frameworks: Vec<RegisterFrameworkRule>,
    #[serde(default)]
    teardown_frameworks: Vec<TeardownFrameworkRule>,
    #[serde(default)]
    register_agents: Vec<RegisterAgentRule>,
    #[serde(default)]
    get_endpoints: Vec<GetEndpointRule>,
}

fn permissive_by_default() -> bool {
    true
}

/// What a caller asks to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action<'a> {
    /// SUBSCRIBE or UPDATE_FRAMEWORK in this role (asked once per role).
    RegisterFramework { role: &'a str },
    /// Tear down a framework registered by this principal.
    TeardownFramework { framework_principal: Option<&'a str> },
    /// Agent SUBSCRIBE.
    RegisterAgent,
    /// GET of an operator endpoint (`/master/state`, `/metrics`...).
    GetEndpoint { path: &'a str },
}

impl Action<'_> {
    /// The ACL list that decides this action.
    pub fn list(&self) -> &'static str {
        match self {
            Self::RegisterFramework { .. } => "register_frameworks",
            Self::TeardownFramework { .. } => "teardown_frameworks",
            Self::RegisterAgent => "register_agents",
            Self::GetEndpoint { .. } => "get_endpoints",
        }
    }

    fn object(&self) -> Option<&str> {
        match self {
            Self::RegisterFramework { role } => Some(role),
            Self::TeardownFramework { framework_principal } => *framework_principal,
            Self::RegisterAgent => None,
            Self::GetEndpoint { path } => Some(path),
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::RegisterFramework { role } => format!("register a framework in role '{role}'"),
            Self::TeardownFramework { framework_principal: Some(p) } => {
                format!("tear down a framework of principal '{p}'")
            }
            Self::TeardownFramework { framework_principal: None } => {
                "tear down a framework registered without a principal".to_owned()
            }
            Self::RegisterAgent => "register an agent".to_owned(),
            Self::GetEndpoint { path } => format!("read {path}"),
        }
    }
}

/// Why an action was refused: the caller, the action and the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{caller} may not {action}: {rule}")]
pub struct Refusal {
    caller: String,
    action: String,
    rule: String,
}

/// Names a caller in a message: `principal 'x'` or `an unauthenticated caller`.
pub fn caller_name(principal: Option<&str>) -> String {
    principal.map_or_else(|| "an unauthenticated caller".to_owned(), |p| format!("principal '{p}'"))
}

#[derive(Debug, thiserror::Error)]
pub enum AclError {
    #[error("cannot read the ACL file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("the ACL file {path} is not valid: {source}")]
    Invalid { path: String, source: serde_json::Error },
}

/// The ACLs in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acls {
    permissive: bool,
    register_frameworks: Vec<Rule>,
    teardown_frameworks: Vec<Rule>,
    register_agents: Vec<Rule>,
    get_endpoints: Vec<Rule>,
}

impl Default for Acls {
    /// No `--acls`: every action is allowed (Mesos without ACLs).
    fn default() -> Self {
        Self::permissive()
    }
}

impl Acls {
    /// No rules, everything allowed.
    pub fn permissive() -> Self {
        Self {
            permissive: true,
            register_frameworks: vec![],
            teardown_frameworks: vec![],
            register_agents: vec![],
            get_endpoints: vec![],
        }
    }

    /// Parses the file's text; unknown fields and malformed entities are errors.
    pub fn parse(text: &str) -> Result<Self, serde_json::Error> {
        let f: AclFile = serde_json::from_str(text)?;
        Ok(Self {
            permissive: f.permissive,
            register_frameworks: f.register_frameworks.into_iter().map(Rule::from).collect(),
            teardown_frameworks: f.teardown_frameworks.into_iter().map(Rule::from).collect(),
            register_agents: f.register_agents.into_iter().map(Rule::from).collect(),
            get_endpoints: f.get_endpoints.into_iter().map(Rule::from).collect(),
        })
    }

    /// Reads and parses `path` (blocking: call it before serving).
    pub fn read(path: &Path) -> Result<Self, AclError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| AclError::Read { path: shown.clone(), source })?;
        Self::parse(&text).map_err(|source| AclError::Invalid { path: shown, source })
    }

    fn rules(&self, action: &Action<'_>) -> &[Rule] {
        match action {
            Action::RegisterFramework { .. } => &self.register_frameworks,
            Action::TeardownFramework { .. } => &self.teardown_frameworks,
            Action::RegisterAgent => &self.register_agents,
            Action::GetEndpoint { .. } => &self.get_endpoints,
        }
    }

    /// Whether `principal` (None: unauthenticated) may do `action`.
    pub fn authorize(&self, principal: Option<&str>, action: &Action<'_>) -> Result<(), Refusal> {
        let list = action.list();
        let decided = self
            .rules(action)
            .iter()
            .enumerate()
            .find(|(_, r)| r.subject.covers(principal) && r.object.covers(action.object()));
        let rule = match decided {
            Some((_, r)) if r.subject != Entity::None && r.object != Entity::None => return Ok(()),
            Some((i, _)) => format!("denied by ACL {list}[{i}]"),
            None if self.permissive => return Ok(()),
            None => format!("no rule of the ACL list {list} allows it, and the ACLs are not permissive"),
        };
        Err(Refusal { caller: caller_name(principal), action: action.describe(), rule })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acls(json: &str) -> Acls {
        Acls::parse(json).unwrap()
    }

    fn role(role: &str) -> Action<'_> {
        Action::RegisterFramework { role }
    }

    const TENANTS: &str = r#"{
        "permissive": false,
        "register_frameworks": [
            {"principals": {"values": ["controller"]}, "roles": {"type": "ANY"}},
            {"principals": {"values": ["team-a"]}, "roles": {"values": ["team-a"]}},
            {"principals": {"type": "ANY"}, "roles": {"type": "NONE"}}
        ]
    }"#;

    #[test]
    fn unknown_fields_and_malformed_entities_are_errors_that_say_what_is_wrong() {
        let unknown = Acls::parse(&TENANTS.replace(r#""type": "NONE"}}"#, r#""type": "NONE"}, "_": 0}"#));
        let unknown = unknown.unwrap_err().to_string();
        assert!(unknown.contains("unknown field `_`"), "{unknown}");
        for (json, says) in [
            (
                r#"{"register_agents": [{"principals": {"type": "ANY", "values": ["a"]}, "agents": {"type": "ANY"}}]}"#,
                "takes no 'values'",
            ),
            (
                r#"{"register_agents": [{"principals": {"values": []}, "agents": {"type": "ANY"}}]}"#,
                "at least one name",
            ),
            (
                r#"{"register_agents": [{"principals": {"type": "ALL"}, "agents": {"type": "ANY"}}]}"#,
                "'ALL' is not SOME",
            ),
            (r#"{"register_agents": [{"principals": {"type": "ANY"}}]}"#, "missing field `agents`"),
            (r#"{"shutdown_frameworks": []}"#, "unknown field `shutdown_frameworks`"),
        ] {
            let e = Acls::parse(json).unwrap_err().to_string();
            assert!(e.contains(says), "{json}: {e}");
        }
    }

    #[test]
    fn the_first_rule_that_covers_caller_and_object_decides() {
        let a = acls(TENANTS);
        assert_eq!(a.authorize(Some("controller"), &role("team-b")), Ok(()));
        assert_eq!(a.authorize(Some("team-a"), &role("team-a")), Ok(()));
        let e = a.authorize(Some("team-b"), &role("team-a")).unwrap_err().to_string();
        assert_eq!(
            e,
            "principal 'team-b' may not register a framework in role 'team-a': denied by ACL register_frameworks[2]"
        );
        // team-a asking for team-b: rule 1 does not cover the role, rule 2 (ANY, NONE) denies.
        let e = a.authorize(Some("team-a"), &role("team-b")).unwrap_err().to_string();
        assert!(e.ends_with("denied by ACL register_frameworks[2]"), "{e}");
    }

    #[test]
    fn with_no_rule_deciding_permissive_decides_and_the_refusal_says_so() {
        let strict = acls(
            r#"{"permissive": false, "get_endpoints": [{"principals": {"values": ["ops"]}, "paths": {"values": ["/master/state"]}}]}"#,
        );
        assert_eq!(strict.authorize(Some("ops"), &Action::GetEndpoint { path: "/master/state" }), Ok(()));
        let e = strict.authorize(Some("ops"), &Action::GetEndpoint { path: "/metrics" }).unwrap_err().to_string();
        assert_eq!(
            e,
            "principal 'ops' may not read /metrics: no rule of the ACL list get_endpoints allows it, and the ACLs are not permissive"
        );
        let e = strict.authorize(None, &Action::RegisterAgent).unwrap_err().to_string();
        assert!(
            e.starts_with(
                "an unauthenticated caller may not register an agent: no rule of the ACL list register_agents"
            ),
            "{e}"
        );
        let open =
            acls(r#"{"get_endpoints": [{"principals": {"values": ["ops"]}, "paths": {"values": ["/master/state"]}}]}"#);
        assert_eq!(open.authorize(Some("team-a"), &Action::GetEndpoint { path: "/master/state" }), Ok(()));
        assert_eq!(Acls::default().authorize(None, &Action::RegisterAgent), Ok(()));
    }

    #[test]
    fn a_listed_subject_never_covers_the_unauthenticated_caller_any_does() {
        let a = acls(
            r#"{"permissive": false, "register_agents": [
            {"principals": {"values": ["agent"]}, "agents": {"type": "ANY"}}]}"#,
        );
        assert_eq!(a.authorize(Some("agent"), &Action::RegisterAgent), Ok(()));
        assert!(a.authorize(None, &Action::RegisterAgent).is_err());
        let any = acls(
            r#"{"permissive": false, "register_agents": [{"principals": {"type": "ANY"}, "agents": {"type": "ANY"}}]}"#,
        );
        assert_eq!(any.authorize(None, &Action::RegisterAgent), Ok(()));
    }

    #[test]
    fn teardown_is_decided_by_the_frameworks_principal() {
        let a = acls(
            r#"{"permissive": false, "teardown_frameworks": [
            {"principals": {"values": ["ops"]}, "framework_principals": {"type": "ANY"}},
            {"principals": {"values": ["team-a"]}, "framework_principals": {"values": ["team-a"]}}]}"#,
        );
        let of = |p| Action::TeardownFramework { framework_principal: p };
        assert_eq!(a.authorize(Some("ops"), &of(Some("team-b"))), Ok(()));
        assert_eq!(a.authorize(Some("ops"), &of(None)), Ok(()));
        assert_eq!(a.authorize(Some("team-a"), &of(Some("team-a"))), Ok(()));
        let e = a.authorize(Some("team-a"), &of(Some("team-b"))).unwrap_err().to_string();
        assert!(e.starts_with("principal 'team-a' may not tear down a framework of principal 'team-b'"), "{e}");
        assert!(a.authorize(Some("team-a"), &of(None)).is_err(), "a list never covers a missing principal");
    }

    #[test]
    fn a_none_subject_denies_everyone_it_reaches() {
        let a = acls(
            r#"{"register_frameworks": [
            {"principals": {"values": ["a"]}, "roles": {"values": ["analytics"]}},
            {"principals": {"type": "NONE"}, "roles": {"values": ["analytics"]}}]}"#,
        );
        assert_eq!(a.authorize(Some("a"), &role("analytics")), Ok(()));
        assert!(a.authorize(Some("b"), &role("analytics")).is_err());
        assert!(a.authorize(None, &role("analytics")).is_err());
        assert_eq!(a.authorize(Some("b"), &role("other")), Ok(()), "permissive by default");
    }
}
