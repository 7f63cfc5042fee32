//! The registry in the API server, for replicas elected with a Lease
//! (`--lease-name`): one `OfferRegistry` object (group `offers.mpiswarm.io`,
//! named like the Lease, in its namespace) holds what a single replica keeps
//! in `DATA/registry.json` ([`crate::registry`]), so the replica that wins
//! the Lease starts from the last state its predecessor committed.
//!
//! Every write is a PUT carrying the resourceVersion this replica last read
//! or wrote. A new leader first *claims* the object (reads it and writes it
//! back naming itself as holder), so a late write of the replica it replaced
//! fails with 409 instead of overwriting its state: the registry is fenced
//! by its own resourceVersion, as the Lease is. Writes run on the
//! registrar's thread ([`crate::registrar`]), never under the master's lock.

use crate::registry::RegistryState;
use kube::api::{Api, PostParams};
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};

/// The offer layer's registry, shared by its replicas.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
#[kube(group = "offers.mpiswarm.io", version = "v1", kind = "OfferRegistry", plural = "offerregistries", namespaced)]
#[kube(printcolumn = r#"{"name":"Holder","type":"string","jsonPath":".spec.holder"}"#)]
#[serde(rename_all = "camelCase")]
pub struct OfferRegistrySpec {
    /// The replica (its advertised HOST:PORT) that claimed it last: the
    /// leader that writes it.
    pub holder: String,
    /// Agents, frameworks and the ids removed for good, as the master keeps them.
    #[schemars(schema_with = "any_object")]
    pub state: RegistryState,
}

fn any_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true })
}

/// The CustomResourceDefinition of [`OfferRegistry`] (installed by `mpiswarm
/// up` and by the manifests; the offer layer never installs it).
pub fn crd() -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    OfferRegistry::crd()
}

#[derive(Debug, thiserror::Error)]
pub enum ApiRegistryError {
    #[error("cannot read the registry {object}: {source}")]
    Read { object: String, source: Box<kube::Error> },
    #[error("cannot claim the registry {object}: {source}")]
    Claim { object: String, source: Box<kube::Error> },
    #[error(
        "the registry {object} was claimed by {holder} after this replica claimed it: this replica no longer leads, and its change is not written"
    )]
    Claimed { object: String, holder: String },
    #[error("cannot write the registry {object}: {source}")]
    Write { object: String, source: Box<kube::Error> },
    #[error(
        "the API server did not take the write of the registry {object} within {after:?}; the change is not known to be written"
    )]
    WriteTimedOut { object: String, after: std::time::Duration },
    #[error("the API server did not answer in time while the registry {object} was claimed")]
    TimedOut { object: String },
    #[error("the registry {object} is written only by the replica that claimed it; this one has not")]
    NotClaimed { object: String },
}

/// One replica's handle on the shared registry object; clones share the
/// resourceVersion last read or written.
#[derive(Clone)]
pub struct ApiRegistry {
    api: Api<OfferRegistry>,
    namespace: String,
    name: String,
    identity: String,
    version: Arc<Mutex<Option<String>>>,
}

impl ApiRegistry {
    pub fn new(client: kube::Client, namespace: &str, name: &str, identity: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            identity: identity.to_owned(),
            version: Arc::new(Mutex::new(None)),
        }
    }

    /// `namespace/name`, for messages.
    pub fn object(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    fn version(&self) -> Option<String> {
        self.version.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    fn set_version(&self, v: Option<String>) {
        *self.version.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = v;
    }

    fn record(&self, resource_version: Option<String>, state: RegistryState) -> OfferRegistry {
        let mut r = OfferRegistry::new(&self.name, OfferRegistrySpec { holder: self.identity.clone(), state });
        r.metadata.namespace = Some(self.namespace.clone());
        r.metadata.resource_version = resource_version;
        r
    }

    /// Reads the registry and writes it back naming this replica its
    /// holder (creates it empty if there is none): from then on a write of
    /// any other replica fails. Returns the state to recover from.
    pub async fn claim(&self) -> Result<RegistryState, ApiRegistryError> {
        let object = self.object();
        let read = self
            .api
            .get_opt(&self.name)
            .await
            .map_err(|e| ApiRegistryError::Read { object: object.clone(), source: Box::new(e) })?;
        let pp = PostParams::default();
        let (state, written) = match read {
            None => {
                let state = RegistryState::default();
                (state.clone(), self.api.create(&pp, &self.record(None, state)).await)
            }
            Some(current) => {
                let state = current.spec.state;
                let next = self.record(current.metadata.resource_version, state.clone());
                (state, self.api.replace(&self.name, &pp, &next).await)
            }
        };
        let written = written.map_err(|e| ApiRegistryError::Claim { object, source: Box::new(e) })?;
        self.set_version(written.metadata.resource_version);
        Ok(state)
    }

    /// [`Self::write`] within `deadline` overall (every request it makes
    /// included): an API server that takes the connection and never
    /// answers must not hold the registrar's thread, and the calls waiting
    /// for their change to be durable, past what a leader may act for. A
    /// write that timed out may still have gone through: the next one then
    /// meets a conflict with this replica as holder and is retried.
    pub async fn write_within(
        &self,
        state: &RegistryState,
        deadline: std::time::Duration,
    ) -> Result<(), ApiRegistryError> {
        tokio::time::timeout(deadline, self.write(state))
            .await
            .unwrap_or_else(|_| Err(ApiRegistryError::WriteTimedOut { object: self.object(), after: deadline }))
    }

    /// Writes `state` over the version this replica last wrote. A conflict
    /// is retried once if the object still names this replica (an earlier
    /// write went through though its answer was lost); if another replica
    /// claimed it, the write fails and says so.
    pub async fn write(&self, state: &RegistryState) -> Result<(), ApiRegistryError> {
        let object = self.object();
        let Some(version) = self.version() else { return Err(ApiRegistryError::NotClaimed { object }) };
        let pp = PostParams::default();
        let mut attempt = self.api.replace(&self.name, &pp, &self.record(Some(version), state.clone())).await;
        if let Err(kube::Error::Api(status)) = &attempt
            && status.code == 409
        {
            let current = self
                .api
                .get_opt(&self.name)
                .await
                .map_err(|e| ApiRegistryError::Read { object: object.clone(), source: Box::new(e) })?;
            match current {
                Some(c) if c.spec.holder == self.identity => {
                    let next = self.record(c.metadata.resource_version, state.clone());
                    attempt = self.api.replace(&self.name, &pp, &next).await;
                }
                other => {
                    self.set_version(None);
                    let holder = other.map_or_else(|| "nobody (it was deleted)".to_owned(), |c| c.spec.holder);
                    return Err(ApiRegistryError::Claimed { object, holder });
                }
            }
        }
        let written = attempt.map_err(|e| ApiRegistryError::Write { object, source: Box::new(e) })?;
        self.set_version(written.metadata.resource_version);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An API server that takes the connection and never answers: the
    /// write gives up at its deadline, saying so, instead of holding the
    /// registrar's thread for as long as the kube client would wait.
    #[tokio::test]
    async fn a_write_to_an_api_server_that_never_answers_fails_at_its_deadline() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url: axum::http::Uri = format!("http://{}", listener.local_addr().unwrap()).parse().unwrap();
        let silent = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((conn, _)) = listener.accept().await {
                held.push(conn);
            }
        });
        let client = kube::Client::try_from(kube::Config::new(url)).unwrap();
        let registry = ApiRegistry::new(client, "ns", "mpiswarm-offers", "a:1");
        registry.set_version(Some("7".into()));
        let deadline = std::time::Duration::from_millis(300);
        let written = tokio::time::timeout(
            std::time::Duration::from_secs(30),
            registry.write_within(&RegistryState::default(), deadline),
        )
        .await
        .expect("the write ends");
        let err = written.expect_err("nobody answered");
        assert!(matches!(err, ApiRegistryError::WriteTimedOut { .. }), "{err}");
        assert!(err.to_string().contains("ns/mpiswarm-offers"), "{err}");
        silent.abort();
    }

    #[test]
    fn the_crd_keeps_the_state_as_written_and_shows_the_holder() {
        let crd = serde_json::to_value(crd()).unwrap();
        assert_eq!(crd["metadata"]["name"], "offerregistries.offers.mpiswarm.io");
        let version = &crd["spec"]["versions"][0];
        let state = &version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["state"];
        assert_eq!(state["x-kubernetes-preserve-unknown-fields"], true, "{state}");
        assert_eq!(version["additionalPrinterColumns"][0]["jsonPath"], ".spec.holder");
    }
}
