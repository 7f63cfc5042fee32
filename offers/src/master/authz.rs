//! Who may do what to which framework or agent: the ACLs of
//! [`MasterConfig::acls`](super::MasterConfig) and the bindings of ids to
//! the principals that registered them. Every refusal is a 403 whose message
//! names its rule. `principal` is the caller that authenticated (HTTP basic,
//! `--credentials`), `None` when the offer layer authenticates no one; the
//! bindings are then not checked, since anyone could claim any principal.
//!
//! The rules besides the ACLs, as in Mesos:
//! - an authenticated framework's `FrameworkInfo.principal` is its caller;
//! - a framework id belongs to the principal that registered it: only that
//!   principal re-subscribes with it, updates it or calls as it;
//! - an agent id belongs likewise to the principal that registered it (kept
//!   in the registry, so a restart does not free it);
//! - an id recorded without a principal (registered while no one was
//!   authenticated) is bound to the first authenticated principal the ACLs
//!   allow to register it: how an existing cluster turns authentication on.

use super::{CallError, Master};
use crate::acl::{Action, caller_name};
use mpiswarm_mesos::FrameworkInfo;

impl Master {
    fn acl(&self, principal: Option<&str>, action: Action<'_>) -> Result<(), CallError> {
        self.config.acls.authorize(principal, &action).map_err(|refusal| CallError::forbidden(refusal.to_string()))
    }

    /// SUBSCRIBE or UPDATE_FRAMEWORK of `info` (its `id`, if any, is the
    /// framework's): the principal is the caller's, every role is allowed,
    /// and an existing id is the caller's.
    pub(super) fn authorize_framework(&self, principal: Option<&str>, info: &FrameworkInfo) -> Result<(), CallError> {
        if let Some(caller) = principal
            && info.principal.as_deref() != Some(caller)
        {
            return Err(CallError::forbidden(match &info.principal {
                Some(p) => format!("Framework principal '{p}' does not match authenticated principal '{caller}'"),
                None => format!("Framework has no principal; it must be the authenticated principal '{caller}'"),
            }));
        }
        for role in info.effective_roles() {
            self.acl(principal, Action::RegisterFramework { role: &role })?;
        }
        match &info.id {
            Some(id) => self.check_framework_owner(principal, &id.value),
            None => Ok(()),
        }
    }

    /// A call as framework `id` comes from the principal that registered it.
    pub(super) fn check_framework_owner(&self, principal: Option<&str>, id: &str) -> Result<(), CallError> {
        let Some(caller) = principal else { return Ok(()) };
        match self.framework_principal(id) {
            Some(Some(owner)) if owner != caller => Err(CallError::forbidden(format!(
                "Framework {id} belongs to principal '{owner}'; {} may not act as it",
                caller_name(principal)
            ))),
            _ => Ok(()),
        }
    }

    /// The principal framework `id` was registered by: `None` for an id the
    /// master does not know, `Some(None)` for one registered without.
    fn framework_principal(&self, id: &str) -> Option<Option<&str>> {
        let info = self.registry.frameworks.get(id).or_else(|| self.frameworks.get(id).map(|f| &f.info))?;
        Some(info.principal.as_deref())
    }

    /// An operator's teardown of framework `id` (`/master/teardown`).
    pub(super) fn authorize_teardown(&self, principal: Option<&str>, id: &str) -> Result<(), CallError> {
        let Some(owner) = self.framework_principal(id) else {
            return Err(CallError::bad_request(format!("No framework found with specified ID '{id}'")));
        };
        self.acl(principal, Action::TeardownFramework { framework_principal: owner })
    }

    /// Agent SUBSCRIBE, with the id it asks for: the ACLs allow the caller
    /// to register agents, and an existing id is the caller's.
    pub(super) fn authorize_agent(&self, principal: Option<&str>, id: Option<&str>) -> Result<(), CallError> {
        self.acl(principal, Action::RegisterAgent)?;
        match id {
            Some(id) => self.check_agent_owner(principal, id),
            None => Ok(()),
        }
    }

    /// A call as agent `id` comes from the principal that registered it.
    pub(super) fn check_agent_owner(&self, principal: Option<&str>, id: &str) -> Result<(), CallError> {
        let Some(caller) = principal else { return Ok(()) };
        match self.registry.agents.get(id).and_then(|a| a.principal.as_deref()) {
            Some(owner) if owner != caller => Err(CallError::forbidden(format!(
                "Agent {id} belongs to principal '{owner}'; {} may not act as it",
                caller_name(principal)
            ))),
            _ => Ok(()),
        }
    }

    /// `GET path` of an operator endpoint.
    pub fn authorize_endpoint(&self, principal: Option<&str>, path: &str) -> Result<(), CallError> {
        self.acl(principal, Action::GetEndpoint { path })
    }
}
