//! [`AgentSpec`]: what a test agent is (hostname, resources, attributes,
//! maybe a known id), built with chainable setters. Plain data: starting an
//! agent from it (`AgentSpec::start`) is [`crate::agent`]'s, which imports
//! this module and is never imported by it.

use mpiswarm_mesos::agent_api::AgentInfo;
use mpiswarm_mesos::{AgentId, Attribute, Resource};

/// What a test agent is: hostname, resources, attributes (and an id to
/// re-register as a known agent). Build with [`AgentSpec::new`] and the
/// chainable setters.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSpec {
    pub hostname: String,
    pub resources: Vec<Resource>,
    pub attributes: Vec<Attribute>,
    pub id: Option<AgentId>,
    pub port: Option<i32>,
}

impl AgentSpec {
    /// An agent called `hostname` with no resources yet.
    pub fn new(hostname: &str) -> Self {
        Self { hostname: hostname.to_owned(), resources: Vec::new(), attributes: Vec::new(), id: None, port: None }
    }

    pub fn cpus(self, cpus: f64) -> Self {
        self.resource(Resource::scalar("cpus", cpus))
    }

    /// Memory in MiB.
    pub fn mem(self, mib: f64) -> Self {
        self.resource(Resource::scalar("mem", mib))
    }

    pub fn resource(mut self, resource: Resource) -> Self {
        self.resources.push(resource);
        self
    }

    /// A TEXT attribute, e.g. `("rack", "r1")`.
    pub fn attribute(mut self, name: &str, value: &str) -> Self {
        self.attributes.push(Attribute::text(name, value));
        self
    }

    pub fn with_attribute(mut self, attribute: Attribute) -> Self {
        self.attributes.push(attribute);
        self
    }

    /// The HTTP port the agent registers (a test agent serves nothing; set it
    /// to test what the offer layer makes of it).
    pub fn port(mut self, port: i32) -> Self {
        self.port = Some(port);
        self
    }

    /// Re-register as the agent `id` (as a restarted agent does).
    pub fn id(mut self, id: AgentId) -> Self {
        self.id = Some(id);
        self
    }

    pub fn info(&self) -> AgentInfo {
        AgentInfo {
            hostname: self.hostname.clone(),
            id: self.id.clone(),
            resources: self.resources.clone(),
            attributes: self.attributes.clone(),
            port: self.port,
        }
    }
}
