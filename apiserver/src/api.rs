//! The API itself: what a request addresses (`Target`), the shared state
//! every verb works on (`Api`: store, registry, metrics), the per-request
//! write options, and the read verb `get`. The write verbs live in `write`
//! (create, update, patch) and `delete` (delete, deletecollection); what a
//! deletion sets off in `cascade`; lists in `list`; the event TTL in
//! `event_ttl`; admission rules in `admission`; routing in `http`. This
//! module imports none of them.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::admission::{FieldValidation, WriteCtx};
use crate::error::{ApiError, ApiResult};
use crate::locks;
use crate::query::Query;
use crate::registry::Registry;
use crate::resource::{Builtin, ResourceType};
use crate::store::{Store, Written};
use crate::views::view;

/// The resource, namespace, name and subresource a request addresses.
#[derive(Clone)]
pub struct Target {
    pub rt: Arc<ResourceType>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub status: bool,
}

impl Target {
    pub(crate) fn key(&self) -> ApiResult<String> {
        let name =
            self.name.as_deref().ok_or_else(|| ApiError::method_not_allowed("a name is required for this verb"))?;
        Ok(self.rt.key(self.namespace.as_deref(), name))
    }

    pub(crate) fn name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }

    pub(crate) fn not_found(&self) -> ApiError {
        ApiError::not_found(&self.rt.plural, &self.rt.group, self.name())
    }
}

pub struct Api {
    pub store: Store,
    pub registry: Registry,
    pub metrics: crate::metrics::Metrics,
    /// Set to true when the server stops, so open watches end with it.
    pub stopping: tokio::sync::watch::Sender<bool>,
}

/// Timestamps as kube-apiserver writes them (RFC 3339, seconds).
pub(crate) fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Per-request options every write shares.
pub struct WriteOpts<'a> {
    pub query: &'a Query,
    pub user_agent: &'a str,
    /// Warnings for the client (`Warning: 299` headers), e.g. unknown fields
    /// dropped under `fieldValidation=Warn`.
    pub warnings: Mutex<Vec<String>>,
}

impl<'a> WriteOpts<'a> {
    pub fn new(query: &'a Query, user_agent: &'a str) -> Self {
        Self { query, user_agent, warnings: Mutex::default() }
    }

    /// The field manager: `fieldManager`, else the client's name from its User-Agent.
    pub(crate) fn manager(&self) -> String {
        match self.query.get("fieldManager") {
            Some(m) => m.to_string(),
            None => self.user_agent.split('/').next().filter(|s| !s.is_empty()).unwrap_or("unknown").to_string(),
        }
    }

    /// The warnings collected so far.
    pub fn warnings(&self) -> Vec<String> {
        locks::lock(&self.warnings).clone()
    }
}

impl Api {
    pub fn new(store: Store) -> Self {
        let api = Self {
            store,
            registry: Registry::default(),
            metrics: Default::default(),
            stopping: tokio::sync::watch::Sender::new(false),
        };
        api.reload_crds();
        api
    }

    pub fn reload_crds(&self) {
        let crds = self.store.list("apiextensions.k8s.io/customresourcedefinitions/");
        self.registry.reload(crds.items.iter().map(|a| a.as_ref()));
    }

    /// Create the namespaces every cluster has.
    pub async fn ensure_namespaces(&self) -> ApiResult<()> {
        let Some(rt) = self.registry.find("", "v1", "namespaces") else { return Ok(()) };
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            if self.store.get(&rt.key(None, ns)).is_none() {
                let t = Target { rt: rt.clone(), namespace: None, name: None, status: false };
                let q = Query::default();
                let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
                self.create(&t, body, &WriteOpts::new(&q, "mpiswarm-apiserver")).await?;
            }
        }
        Ok(())
    }

    pub(crate) fn ctx<'a>(
        &self,
        t: &'a Target,
        manager: &'a str,
        api_version: &'a str,
        now: &'a str,
        opts: &'a WriteOpts<'_>,
        applied: bool,
    ) -> ApiResult<WriteCtx<'a>> {
        let validation = match opts.query.get("fieldValidation") {
            None | Some("Warn") => FieldValidation::Warn,
            Some("Strict") => FieldValidation::Strict,
            Some("Ignore") => FieldValidation::Ignore,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "fieldValidation {other:?} is not one of Strict, Warn, Ignore"
                )));
            }
        };
        Ok(WriteCtx {
            rt: &t.rt,
            namespace: t.namespace.as_deref(),
            name: t.name.as_deref(),
            status: t.status,
            manager,
            api_version,
            now,
            validation,
            warnings: &opts.warnings,
            applied,
        })
    }

    /// A changed CRD changes what is served.
    pub(crate) fn after_write(&self, t: &Target, w: &Written) {
        if t.rt.builtin == Some(Builtin::Crd) && !matches!(w, Written::Unchanged(_)) {
            self.reload_crds();
        }
    }

    pub fn get(&self, t: &Target) -> ApiResult<Value> {
        let obj = self.store.get(&t.key()?).ok_or_else(|| t.not_found())?;
        Ok(view(&t.rt, &obj))
    }

    /// A namespaced write needs its namespace to exist.
    pub(crate) fn ensure_namespace(&self, t: &Target) -> ApiResult<()> {
        if let (true, Some(ns)) = (t.rt.namespaced, t.namespace.as_deref())
            && self.store.get(&format!("core/namespaces/{ns}")).is_none()
        {
            return Err(ApiError::not_found("namespaces", "", ns));
        }
        Ok(())
    }
}

/// An `Api` over a fresh store in a temporary directory, for unit tests.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    pub struct TestApi {
        pub api: Api,
        _dir: tempfile::TempDir,
    }

    pub async fn api() -> TestApi {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(&dir.path().join("db"), 1000).expect("store");
        let api = Api::new(store);
        api.ensure_namespaces().await.expect("namespaces");
        TestApi { api, _dir: dir }
    }

    pub fn target(api: &Api, group: &str, plural: &str, namespace: Option<&str>, name: Option<&str>) -> Target {
        let rt = api.registry.all().iter().find(|t| t.group == group && t.plural == plural).cloned();
        Target {
            rt: rt.unwrap_or_else(|| panic!("{group}/{plural} is served")),
            namespace: namespace.map(String::from),
            name: name.map(String::from),
            status: false,
        }
    }

    /// Create an object through the create verb.
    pub async fn create(api: &Api, t: &Target, body: Value) -> Value {
        let q = Query::default();
        api.create(t, body, &WriteOpts::new(&q, "test")).await.expect("create").1
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    #[tokio::test]
    async fn the_namespaces_every_cluster_has_exist_and_get_serves_the_view() {
        let t = api().await;
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let got = t.api.get(&target(&t.api, "", "namespaces", None, Some(ns))).expect("namespace exists");
            assert_eq!(got["status"]["phase"], "Active");
        }
        let missing = t.api.get(&target(&t.api, "", "configmaps", Some("default"), Some("nope"))).expect_err("404");
        assert_eq!((missing.code, missing.message.as_str()), (404, "configmaps \"nope\" not found"));
        let no_ns = target(&t.api, "", "configmaps", Some("ghost"), None);
        assert_eq!(t.api.ensure_namespace(&no_ns).expect_err("no such namespace").code, 404);
    }

    #[test]
    fn the_field_manager_defaults_to_the_clients_name() {
        let q = Query::parse(Some("fieldManager=ctl"));
        assert_eq!(WriteOpts::new(&q, "kubectl/v1.32").manager(), "ctl");
        let q = Query::default();
        assert_eq!(WriteOpts::new(&q, "kubectl/v1.32 (linux)").manager(), "kubectl");
        assert_eq!(WriteOpts::new(&q, "").manager(), "unknown");
    }
}
