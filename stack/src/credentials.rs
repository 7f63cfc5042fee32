//! The credentials of one `up` stack, so that every component
//! authenticates, also on loopback: in `DATA/credentials/` (0700), one
//! Mesos credential file per principal (0600, made once with a random
//! secret and kept, so restarts and `up --split`'s restarted children agree),
//! the offer layer's `--credentials` list and its `--acls`:
//!
//! | principal | may |
//! |---|---|
//! | `mpiswarm-controller` | register its framework in any role, read the operator endpoints, read agents' `/files` (for its log endpoint, which `mpiswarm logs` uses) and `/state` |
//! | `mpiswarm-agent-N` | register as an agent: node agent N (1, 2, ...) of the stack, each its own principal, so that one agent cannot re-register as another (the offer layer binds an agent id to the principal that registered it) |
//! | `mpiswarm-operator` | read the operator endpoints, tear frameworks down, read agents' `/files` and `/state` (`up` itself, the tests) |
//!
//! Nothing else may do anything: the ACLs are not permissive. Blocking file
//! work: `up` calls it before it starts serving.

use std::path::{Path, PathBuf};

use mpiswarm_mesos::credential::Credential;

use crate::error::{FileAction, Result, StackError, file};

pub const CONTROLLER: &str = "mpiswarm-controller";
/// The prefix of the agents' principals ([`agent_principal`]).
pub const AGENT: &str = "mpiswarm-agent";
pub const OPERATOR: &str = "mpiswarm-operator";

/// The principal of the stack's agent `index` (0-based; the node agents
/// in the order `up` starts them): `mpiswarm-agent-1`, `-2`, ...
pub fn agent_principal(index: usize) -> String {
    format!("{AGENT}-{}", index + 1)
}

/// Where the credentials of the stack in `data_dir` are.
pub fn dir(data_dir: &Path) -> PathBuf {
    data_dir.join("credentials")
}

/// The credential file of `principal` (Mesos' `{"principal":..,"secret":..}`).
pub fn credential_file(data_dir: &Path, principal: &str) -> PathBuf {
    dir(data_dir).join(format!("{principal}.json"))
}

/// The offer layer's `--credentials` file: every principal of the stack.
pub fn offers_credentials(data_dir: &Path) -> PathBuf {
    dir(data_dir).join("offers-credentials.json")
}

/// The offer layer's `--acls` file.
pub fn offers_acls(data_dir: &Path) -> PathBuf {
    dir(data_dir).join("offers-acls.json")
}

/// The agents' `--http-credentials` file: who may read `/files` and `/state`.
pub fn agent_readers(data_dir: &Path) -> PathBuf {
    dir(data_dir).join("agent-readers.json")
}

/// The ACLs `up` gives its offer layer for a stack of `agents` agents (see
/// the module's table).
pub fn acls_json(agents: usize) -> serde_json::Value {
    let only = |names: &[&str]| serde_json::json!({"values": names});
    let agent_principals: Vec<String> = (0..agents).map(agent_principal).collect();
    let any = serde_json::json!({"type": "ANY"});
    serde_json::json!({
        "permissive": false,
        "register_frameworks": [{"principals": only(&[CONTROLLER]), "roles": any}],
        "teardown_frameworks": [{"principals": only(&[OPERATOR]), "framework_principals": any}],
        "register_agents": [{"principals": {"values": agent_principals}, "agents": any}],
        "get_endpoints": [{"principals": only(&[OPERATOR, CONTROLLER]), "paths": any}],
    })
}

/// A secret of 256 random bits, hex.
pub(crate) fn new_secret() -> String {
    format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple())
}

fn write(path: &Path, value: &serde_json::Value) -> Result<()> {
    let text =
        serde_json::to_vec_pretty(value).map_err(|source| StackError::Encode { what: "a credentials file", source })?;
    file(FileAction::Writing, path, mpiswarm_guard::private::write(path, &text))
}

/// Makes (once) and reads the credentials of the stack in `data_dir` with
/// `agents` agents, and writes the offer layer's and the agents' files from
/// them.
pub fn ensure(data_dir: &Path, agents: usize) -> Result<()> {
    let d = dir(data_dir);
    file(FileAction::Creating, &d, mpiswarm_guard::private::dir(&d))?;
    let mut all = Vec::new();
    let agent_principals: Vec<String> = (0..agents).map(agent_principal).collect();
    let principals = [CONTROLLER, OPERATOR].into_iter().chain(agent_principals.iter().map(String::as_str));
    for principal in principals {
        let path = credential_file(data_dir, principal);
        let credential = match read(data_dir, principal) {
            Ok(c) => c,
            Err(_) if !path.exists() => {
                let secret = new_secret();
                write(&path, &serde_json::json!({"principal": principal, "secret": secret}))?;
                Credential { principal: principal.to_owned(), secret }
            }
            Err(e) => return Err(e),
        };
        all.push(credential);
    }
    let listed = |c: &Credential| serde_json::json!({"principal": c.principal, "secret": c.secret});
    write(
        &offers_credentials(data_dir),
        &serde_json::json!({"credentials": all.iter().map(listed).collect::<Vec<_>>()}),
    )?;
    let readers: Vec<_> = all.iter().filter(|c| !agent_principals.contains(&c.principal)).map(listed).collect();
    write(&agent_readers(data_dir), &serde_json::json!({"credentials": readers}))?;
    write(&offers_acls(data_dir), &acls_json(agents))
}

/// The credential of `principal` in the stack of `data_dir`.
pub fn read(data_dir: &Path, principal: &str) -> Result<Credential> {
    let path = credential_file(data_dir, principal);
    Credential::from_file(&path).map_err(|e| StackError::Credential { path, why: e.to_string() })
}

/// The operator's credential of the stack in `data_dir`, if it has one
/// (a stack started before `up` made credentials has none).
pub fn operator(data_dir: &Path) -> Option<Credential> {
    read(data_dir, OPERATOR).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn made_once_private_and_kept_across_restarts() {
        let data = tempfile::tempdir().unwrap();
        ensure(data.path(), 2).unwrap();
        let first = read(data.path(), CONTROLLER).unwrap().secret;
        assert_eq!(first.len(), 64);
        assert_eq!(mode(&dir(data.path())), 0o700);
        for f in [
            credential_file(data.path(), CONTROLLER),
            credential_file(data.path(), "mpiswarm-agent-1"),
            credential_file(data.path(), "mpiswarm-agent-2"),
            credential_file(data.path(), OPERATOR),
            offers_credentials(data.path()),
            offers_acls(data.path()),
            agent_readers(data.path()),
        ] {
            assert_eq!(mode(&f), 0o600, "{}", f.display());
        }
        ensure(data.path(), 2).unwrap();
        assert_eq!(read(data.path(), CONTROLLER).unwrap().secret, first, "kept, not made again");
        let (one, two) =
            (read(data.path(), "mpiswarm-agent-1").unwrap(), read(data.path(), "mpiswarm-agent-2").unwrap());
        assert!(one.secret != first && one.secret != two.secret, "each principal has its own secret");
        let listed = mpiswarm_mesos::credential::read_credentials(&offers_credentials(data.path())).unwrap();
        assert_eq!(listed.len(), 4);
        let readers = mpiswarm_mesos::credential::read_credentials(&agent_readers(data.path())).unwrap();
        // A map without an order: compared as a set.
        assert_eq!(
            readers.keys().map(String::as_str).collect::<std::collections::BTreeSet<_>>(),
            [CONTROLLER, OPERATOR].into_iter().collect(),
            "no agent reads agents"
        );
    }

    #[test]
    fn the_acls_parse_and_let_each_principal_do_only_its_part() {
        use mpiswarm_offers::acl::{Acls, Action};
        let acls = Acls::parse(&acls_json(2).to_string()).unwrap();
        let state = Action::GetEndpoint { path: "/master/state" };
        let agent = agent_principal(1);
        assert_eq!(agent, "mpiswarm-agent-2");
        assert!(acls.authorize(Some(CONTROLLER), &Action::RegisterFramework { role: "team-a" }).is_ok());
        assert!(acls.authorize(Some(&agent), &Action::RegisterFramework { role: "team-a" }).is_err());
        assert!(acls.authorize(Some(&agent), &Action::RegisterAgent).is_ok());
        assert!(acls.authorize(Some(&agent_principal(2)), &Action::RegisterAgent).is_err(), "no third agent");
        assert!(acls.authorize(Some(AGENT), &Action::RegisterAgent).is_err(), "the shared principal of old is gone");
        assert!(acls.authorize(Some(CONTROLLER), &Action::RegisterAgent).is_err());
        assert!(acls.authorize(Some(OPERATOR), &state).is_ok());
        assert!(acls.authorize(Some(&agent), &state).is_err());
        assert!(acls.authorize(None, &state).is_err());
    }

    #[test]
    fn a_damaged_credential_file_is_an_error_naming_it_not_replaced() {
        let data = tempfile::tempdir().unwrap();
        ensure(data.path(), 1).unwrap();
        let path = credential_file(data.path(), &agent_principal(0));
        std::fs::write(&path, "{").unwrap();
        let e = ensure(data.path(), 1).unwrap_err().to_string();
        assert!(e.contains(&path.display().to_string()), "{e}");
    }
}
