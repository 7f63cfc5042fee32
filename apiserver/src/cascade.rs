//! What a deletion sets off, as kube-controller-manager's garbage collector,
//! the namespace controller and the CRD finalizer do on a real cluster:
//! dependents (by `ownerReferences`) deleted, or marked when they have
//! finalizers, down the chain; a deleted namespace's contents; a deleted
//! CRD's custom resources. Errors are returned, never dropped: the caller's
//! delete has committed, and the client is told which dependent failed. An
//! object that is already gone is not an error.

use serde_json::{Value, json};

use crate::api::{Api, now};
use crate::error::{ApiError, ApiResult};
use crate::store::{Mutation, Written};

/// `old` with its deletion started: what a delete of an object with pending
/// finalizers stores.
pub fn marked_for_deletion(old: &Value, now: &str) -> Value {
    let mut marked = old.clone();
    marked["metadata"]["deletionTimestamp"] = json!(now);
    marked["metadata"]["deletionGracePeriodSeconds"] = json!(0);
    marked
}

fn has_finalizers(o: &Value) -> bool {
    o["metadata"]["finalizers"].as_array().is_some_and(|f| !f.is_empty())
}

/// The error of a cascade step, saying what had already happened.
fn failed(what: &str, key: &str, e: ApiError) -> ApiError {
    ApiError::new(
        e.code.max(500),
        "InternalError",
        format!("{what} was deleted, but deleting {key} with it failed: {}; delete {key} again", e.message),
    )
}

/// Marker for "the object was gone when the cascade got to it".
fn gone() -> ApiError {
    ApiError::no_route()
}

impl Api {
    /// Delete (or mark, with finalizers) the object under `key`; Ok(None)
    /// when it is already gone.
    async fn cascade_one(&self, key: &str) -> ApiResult<Option<Written>> {
        let now = now();
        let result = self
            .store
            .mutate(key, |cur| {
                let cur = cur.ok_or_else(gone)?;
                if !has_finalizers(cur) {
                    return Ok(Mutation::Delete((**cur).clone()));
                }
                if cur["metadata"]["deletionTimestamp"].is_string() {
                    return Ok(Mutation::Unchanged(cur.clone()));
                }
                Ok(Mutation::Put(marked_for_deletion(cur, &now)))
            })
            .await;
        match result {
            Ok(w) => Ok(Some(w)),
            Err(e) if e.code == 404 => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Background garbage collection: objects whose ownerReferences name a
    /// deleted object are deleted too (or marked, if they have finalizers),
    /// and so on down the chain.
    pub(crate) async fn collect_garbage(&self, deleted: &Value) -> ApiResult<()> {
        let what = deleted["metadata"]["name"].as_str().unwrap_or("the object").to_string();
        let mut owners: Vec<String> = deleted["metadata"]["uid"].as_str().map(String::from).into_iter().collect();
        while let Some(uid) = owners.pop() {
            for key in self.store.dependents(&uid) {
                let done = self.cascade_one(&key).await.map_err(|e| failed(&what, &key, e))?;
                if let Some(Written::Deleted(d)) = done {
                    owners.extend(d["metadata"]["uid"].as_str().map(String::from));
                }
            }
        }
        Ok(())
    }

    /// A deleted namespace takes everything in it along (finalizers are not waited for).
    pub(crate) async fn delete_namespace_contents(&self, ns: &str) -> ApiResult<()> {
        let mut prefixes: Vec<String> =
            self.registry.all().iter().filter(|t| t.namespaced).map(|t| t.prefix(Some(ns))).collect();
        prefixes.sort();
        prefixes.dedup();
        for prefix in prefixes {
            for obj in self.store.list(&prefix).items {
                let key = format!("{prefix}{}", obj["metadata"]["name"].as_str().unwrap_or_default());
                self.remove(&key).await.map_err(|e| failed(&format!("namespace {ns}"), &key, e))?;
            }
        }
        Ok(())
    }

    /// When a CRD goes, its custom resources go with it.
    pub(crate) async fn delete_instances_of(&self, crd: &Value) -> ApiResult<()> {
        let group = crd["spec"]["group"].as_str().unwrap_or_default();
        let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or_default();
        if group.is_empty() || plural.is_empty() {
            return Ok(());
        }
        let prefix = format!("{group}/{plural}/");
        for obj in self.store.list(&prefix).items {
            let ns = obj["metadata"]["namespace"].as_str().unwrap_or_default();
            let name = obj["metadata"]["name"].as_str().unwrap_or_default();
            let key = if ns.is_empty() { format!("{prefix}{name}") } else { format!("{prefix}{ns}/{name}") };
            self.remove(&key).await.map_err(|e| failed(&format!("CRD {plural}.{group}"), &key, e))?;
        }
        Ok(())
    }

    /// Remove the object under `key` whatever its finalizers (no-op if gone).
    async fn remove(&self, key: &str) -> ApiResult<()> {
        let result = self.store.mutate(key, |cur| Ok(Mutation::Delete((**cur.ok_or_else(gone)?).clone()))).await;
        match result {
            Ok(_) => Ok(()),
            Err(e) if e.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::testing::*;
    use crate::query::Query;

    fn owned(name: &str, owner_uid: &str, finalizers: &[&str]) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "finalizers": finalizers,
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": owner_uid}]}})
    }

    #[tokio::test]
    async fn garbage_collection_follows_the_owner_chain_and_marks_finalized_dependents() {
        let t = api().await;
        let cms = target(&t.api, "", "configmaps", Some("default"), None);
        let root =
            create(&t.api, &cms, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "root"}})).await;
        let root_uid = root["metadata"]["uid"].as_str().expect("uid").to_string();
        let child = create(&t.api, &cms, owned("child", &root_uid, &[])).await;
        let child_uid = child["metadata"]["uid"].as_str().expect("uid").to_string();
        create(&t.api, &cms, owned("grandchild", &child_uid, &[])).await;
        create(&t.api, &cms, owned("held", &root_uid, &["x/hold"])).await;
        let one = target(&t.api, "", "configmaps", Some("default"), Some("root"));
        t.api.delete(&one, &json!({}), &Query::default()).await.expect("delete");
        assert!(t.api.store.get("core/configmaps/default/child").is_none());
        assert!(t.api.store.get("core/configmaps/default/grandchild").is_none(), "down the chain");
        let held = t.api.store.get("core/configmaps/default/held").expect("a finalizer keeps it");
        assert!(held["metadata"]["deletionTimestamp"].is_string());
    }

    #[tokio::test]
    async fn a_deleted_namespace_takes_its_contents_and_a_gone_object_is_no_error() {
        let t = api().await;
        let nss = target(&t.api, "", "namespaces", None, None);
        create(&t.api, &nss, json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})).await;
        let cms = target(&t.api, "", "configmaps", Some("team"), None);
        create(
            &t.api,
            &cms,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "finalizers": ["x/hold"]}}),
        )
        .await;
        t.api.delete_namespace_contents("team").await.expect("contents");
        assert!(t.api.store.get("core/configmaps/team/c").is_none(), "finalizers are not waited for");
        t.api.delete_namespace_contents("team").await.expect("nothing left is no error");
        assert!(t.api.cascade_one("core/configmaps/team/c").await.expect("gone is fine").is_none());
    }
}
