//! Where the Mesos framework id lives: a ConfigMap in the cluster, so a new
//! leader (another process, another machine) re-subscribes as the same
//! framework inside `failover_timeout` and the master hands it the running
//! tasks instead of killing them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};

use crate::context::FIELD_MANAGER;
use crate::error::Error;

const KEY: &str = "frameworkId";
/// The master the framework is subscribed to: `mpiswarm logs` finds the
/// agents (and their `/files`) through its `/master/state`.
pub const MASTER_KEY: &str = "master";
/// Where the controller serves the tenants' log endpoint (`--logs-listen`,
/// or `--logs-url` when given): `mpiswarm logs` reads output through it.
/// Absent when the controller serves none.
pub const LOGS_URL_KEY: &str = "logsUrl";
/// The ConfigMap's name, in the controller's lease namespace.
pub const CONFIG_MAP: &str = "mpiswarm-framework";

/// The field manager of the quota record's writes.
const QUOTAS_MANAGER: &str = "mpiswarm-controller-quotas";

#[derive(Clone)]
pub struct FrameworkIdStore {
    api: Api<ConfigMap>,
    name: String,
    master: String,
    logs_url: Option<String>,
}

impl FrameworkIdStore {
    pub fn new(client: kube::Client, namespace: &str, name: &str, master: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
            master: master.to_owned(),
            logs_url: None,
        }
    }

    /// Also records where the log endpoint is ([`LOGS_URL_KEY`]).
    pub fn with_logs_url(mut self, url: Option<String>) -> Self {
        self.logs_url = url;
        self
    }

    pub async fn load(&self) -> Result<Option<String>, Error> {
        Ok(self.api.get_opt(&self.name).await?.and_then(|cm| cm.data).and_then(|d| d.get(KEY).cloned()))
    }

    pub async fn save(&self, id: &str) -> Result<(), Error> {
        let mut data = BTreeMap::from([(KEY.to_owned(), id.to_owned()), (MASTER_KEY.to_owned(), self.master.clone())]);
        if let Some(url) = &self.logs_url {
            data.insert(LOGS_URL_KEY.to_owned(), url.clone());
        }
        let cm = ConfigMap {
            metadata: ObjectMeta { name: Some(self.name.clone()), ..ObjectMeta::default() },
            data: Some(data),
            ..ConfigMap::default()
        };
        let mut value = serde_json::to_value(&cm)?;
        value["apiVersion"] = "v1".into();
        value["kind"] = "ConfigMap".into();
        self.api.patch(&self.name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&value)).await?;
        Ok(())
    }

    /// Publishes the roles' quota record ([`crate::quota_record`]) in the
    /// same ConfigMap, under a field manager of its own, so that this write
    /// and [`Self::save`] never remove each other's keys.
    pub async fn save_quotas(&self, quotas: &crate::quota_record::Quotas) -> Result<(), Error> {
        let value = serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": self.name},
            "data": {crate::quota_record::QUOTAS_KEY: serde_json::to_string(quotas)?},
        });
        self.api.patch(&self.name, &PatchParams::apply(QUOTAS_MANAGER).force(), &Patch::Apply(&value)).await?;
        Ok(())
    }

    /// The master no longer knows the id (framework removed): start afresh.
    pub async fn clear(&self) -> Result<(), Error> {
        match self.api.delete(&self.name, &Default::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
