//! Mesos role names: the one home of the rule that says which strings are
//! roles (Mesos' `roles::validate`, hierarchical roles included). Every
//! mpiswarm crate that accepts a role checks it here, or (crds, which may not
//! depend on this crate) proves by test that its pattern agrees with it.
//! Owns no other role logic (weights, quotas) and never allocates a role.

/// The characters Mesos refuses anywhere in a role: ASCII whitespace
/// (tab, line feed, vertical tab, form feed, carriage return, space) and DEL.
/// Other characters, `+` and `\` and non-ASCII included, are allowed.
pub const INVALID_CHARACTERS: [char; 7] = ['\t', '\n', '\u{0b}', '\u{0c}', '\r', ' ', '\u{7f}'];

/// Why a string is not a Mesos role; each message names the role and says
/// what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoleError {
    #[error("role name must not be empty; use '*' for the default role")]
    Empty,
    #[error("role '{0}' must not start with '/'; write it without the leading slash")]
    LeadingSlash(String),
    #[error("role '{0}' must not end with '/'; write it without the trailing slash")]
    TrailingSlash(String),
    #[error("role '{0}' must not contain '//'; separate its parts with one slash")]
    EmptyComponent(String),
    #[error("role '{role}' must not have '{component}' as a part; '.', '..' and '*' are reserved")]
    ReservedComponent { role: String, component: String },
    #[error("role '{role}' has a part '{component}' that starts with '-'; start it with another character")]
    LeadingDash { role: String, component: String },
    #[error("role '{role}' contains {found:?}; role names may not contain whitespace or DEL")]
    InvalidCharacter { role: String, found: char },
}

/// Checks `role` as Mesos does: `*`, or one or more `/`-separated parts,
/// none of them empty, `.`, `..` or `*`, none starting with `-`, and no
/// whitespace or DEL anywhere.
pub fn validate_role(role: &str) -> Result<(), RoleError> {
    if role == "*" {
        return Ok(());
    }
    if role.is_empty() {
        return Err(RoleError::Empty);
    }
    if role.starts_with('/') {
        return Err(RoleError::LeadingSlash(role.to_owned()));
    }
    if role.ends_with('/') {
        return Err(RoleError::TrailingSlash(role.to_owned()));
    }
    if role.contains("//") {
        return Err(RoleError::EmptyComponent(role.to_owned()));
    }
    for component in role.split('/') {
        if matches!(component, "." | ".." | "*") {
            return Err(RoleError::ReservedComponent { role: role.to_owned(), component: component.to_owned() });
        }
        if component.starts_with('-') {
            return Err(RoleError::LeadingDash { role: role.to_owned(), component: component.to_owned() });
        }
        if let Some(found) = component.chars().find(|c| INVALID_CHARACTERS.contains(c)) {
            return Err(RoleError::InvalidCharacter { role: role.to_owned(), found });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_mesos_accepts() {
        for ok in
            ["*", "mpi", "a+b", "a\\b", "team/mpi", "a/b/c", "x.y", "_", "a-", "a*", "*a", ".a", "..a", "é", "a\u{1}b"]
        {
            assert_eq!(validate_role(ok), Ok(()), "{ok:?} is a Mesos role");
        }
    }

    #[test]
    fn names_mesos_refuses_each_with_its_reason() {
        assert_eq!(validate_role(""), Err(RoleError::Empty));
        assert_eq!(validate_role("/a"), Err(RoleError::LeadingSlash("/a".into())));
        assert_eq!(validate_role("/"), Err(RoleError::LeadingSlash("/".into())));
        assert_eq!(validate_role("a/"), Err(RoleError::TrailingSlash("a/".into())));
        assert_eq!(validate_role("a//b"), Err(RoleError::EmptyComponent("a//b".into())));
        for (role, component) in [(".", "."), ("..", ".."), ("a/./b", "."), ("a/..", ".."), ("a/*", "*")] {
            assert_eq!(
                validate_role(role),
                Err(RoleError::ReservedComponent { role: role.into(), component: component.into() })
            );
        }
        assert_eq!(validate_role("a/-b"), Err(RoleError::LeadingDash { role: "a/-b".into(), component: "-b".into() }));
        assert_eq!(validate_role("a b"), Err(RoleError::InvalidCharacter { role: "a b".into(), found: ' ' }));
        assert_eq!(
            validate_role("a\u{7f}"),
            Err(RoleError::InvalidCharacter { role: "a\u{7f}".into(), found: '\u{7f}' })
        );
    }

    #[test]
    fn messages_name_the_role_and_what_to_do() {
        let e = validate_role("-mpi").unwrap_err().to_string();
        assert!(e.contains("'-mpi'") && e.contains("start it with another character"), "{e}");
    }
}
