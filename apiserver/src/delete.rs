//! The verbs that delete: DELETE of one object (preconditions, finalizers
//! turning a delete into a `deletionTimestamp`, orphaning, dry runs, the
//! namespaces that may not go) and deletecollection. What a deletion sets
//! off (dependents, a namespace's contents, a CRD's objects) is `cascade`.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::api::{Api, Target, now};
use crate::cascade::marked_for_deletion;
use crate::error::{ApiError, ApiResult};
use crate::query::Query;
use crate::resource::Builtin;
use crate::store::Mutation;

/// Kinds whose DELETE answers a `Status` rather than the object, as kube-apiserver's.
fn answers_status(b: Option<Builtin>) -> bool {
    matches!(
        b,
        Some(
            Builtin::ConfigMap
                | Builtin::Secret
                | Builtin::Lease
                | Builtin::CoreEvent
                | Builtin::EventsV1
                | Builtin::Stored
                | Builtin::Rbac
        )
    )
}

impl Api {
    /// DELETE one object: marks it when finalizers are pending, else removes it.
    pub async fn delete(&self, t: &Target, options: &Value, q: &Query) -> ApiResult<(u16, Value)> {
        let key = t.key()?;
        if t.status {
            return Err(ApiError::method_not_allowed("DELETE is not allowed on the status subresource"));
        }
        let dry_run = q.dry_run()? || options["dryRun"].as_array().is_some_and(|a| a.iter().any(|v| v == "All"));
        let orphan = q.get("propagationPolicy").or(options["propagationPolicy"].as_str()) == Some("Orphan")
            || options["orphanDependents"].as_bool() == Some(true);
        let now = now();
        let rt = t.rt.clone();
        if rt.builtin == Some(Builtin::Namespace) && matches!(t.name(), "default" | "kube-system" | "kube-public") {
            return Err(ApiError::new(
                403,
                "Forbidden",
                format!("namespaces \"{}\" is forbidden: this namespace may not be deleted", t.name()),
            ));
        }
        let result = self
            .write(t, &key, dry_run, !orphan, |cur| {
                let old = cur.ok_or_else(|| t.not_found())?;
                let pre = &options["preconditions"];
                let conflict = || ApiError::conflict(&rt.plural, &rt.group, t.name());
                if let Some(uid) = pre["uid"].as_str()
                    && Some(uid) != old["metadata"]["uid"].as_str()
                {
                    return Err(conflict());
                }
                if let Some(rv) = pre["resourceVersion"].as_str()
                    && Some(rv) != old["metadata"]["resourceVersion"].as_str()
                {
                    return Err(conflict());
                }
                let pending = old["metadata"]["finalizers"].as_array().is_some_and(|a| !a.is_empty());
                if !pending {
                    return Ok(Mutation::Delete(old.clone()));
                }
                if old["metadata"]["deletionTimestamp"].is_string() {
                    return Ok(Mutation::Unchanged(Arc::new(old.clone())));
                }
                let mut marked = marked_for_deletion(old, &now);
                if rt.builtin == Some(Builtin::Namespace) {
                    marked["status"] = json!({"phase": "Terminating"});
                }
                if rt.generation {
                    let g = old["metadata"]["generation"].as_i64().unwrap_or(1);
                    marked["metadata"]["generation"] = json!(g + 1);
                }
                Ok(Mutation::Put(marked))
            })
            .await?;
        if rt.builtin == Some(Builtin::Crd) && !dry_run {
            self.delete_instances_of(&result.1).await?;
        }
        if rt.builtin == Some(Builtin::Namespace) && !dry_run && self.store.get(&key).is_none() {
            self.delete_namespace_contents(t.name()).await?;
        }
        if answers_status(rt.builtin) {
            let details =
                json!({"name": t.name(), "group": rt.group, "kind": rt.plural, "uid": result.1["metadata"]["uid"]});
            return Ok((
                200,
                json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}),
            ));
        }
        Ok(result)
    }

    /// DELETE of a collection: every object the selectors match, one by one.
    pub async fn delete_collection(&self, t: &Target, options: &Value, q: &Query) -> ApiResult<(u16, Value)> {
        let page = self.list(t, &q.without(&["limit", "continue"]))?;
        let mut deleted = vec![];
        for item in page.items {
            let one = Target {
                rt: t.rt.clone(),
                namespace: item["metadata"]["namespace"].as_str().map(String::from),
                name: item["metadata"]["name"].as_str().map(String::from),
                status: false,
            };
            match self.delete(&one, options, q).await {
                Ok((_, v)) => deleted.push(v),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        let api_version = if t.rt.builtin == Some(Builtin::CoreEvent) { "v1".into() } else { t.rt.api_version() };
        let rv = self.store.current_rv().to_string();
        Ok((
            200,
            json!({"apiVersion": api_version, "kind": t.rt.list_kind, "metadata": {"resourceVersion": rv}, "items": deleted}),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::WriteOpts;
    use crate::api::testing::*;
    use crate::patch::PatchType;

    fn cm(name: &str, extra: Value) -> Value {
        let mut v = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"t": "x"}}});
        if let (Some(m), Some(e)) = (v["metadata"].as_object_mut(), extra.as_object()) {
            m.extend(e.clone());
        }
        v
    }

    #[tokio::test]
    async fn a_finalizer_turns_a_delete_into_a_deletion_timestamp_until_it_is_removed() {
        let t = api().await;
        let cms = target(&t.api, "", "configmaps", Some("default"), None);
        create(&t.api, &cms, cm("f", json!({"finalizers": ["x/hold"]}))).await;
        let one = target(&t.api, "", "configmaps", Some("default"), Some("f"));
        let q = Query::default();
        t.api.delete(&one, &json!({}), &q).await.expect("delete marks");
        let marked = t.api.store.get("core/configmaps/default/f").expect("still there");
        assert!(marked["metadata"]["deletionTimestamp"].is_string());
        t.api
            .patch(&one, PatchType::Merge, br#"{"metadata":{"finalizers":null}}"#, &WriteOpts::new(&q, "test"))
            .await
            .expect("finalizer removed");
        assert!(t.api.store.get("core/configmaps/default/f").is_none(), "the last finalizer's removal deletes it");
    }

    #[tokio::test]
    async fn preconditions_protected_namespaces_and_collections() {
        let t = api().await;
        let cms = target(&t.api, "", "configmaps", Some("default"), None);
        for n in ["a", "b", "c"] {
            create(&t.api, &cms, cm(n, json!({}))).await;
        }
        let q = Query::default();
        let a = target(&t.api, "", "configmaps", Some("default"), Some("a"));
        let e = t.api.delete(&a, &json!({"preconditions": {"uid": "other"}}), &q).await.expect_err("uid differs");
        assert_eq!(e.code, 409);
        let ns = target(&t.api, "", "namespaces", None, Some("default"));
        assert_eq!(t.api.delete(&ns, &json!({}), &q).await.expect_err("protected").code, 403);
        let (_, list) = t
            .api
            .delete_collection(&cms, &json!({}), &Query::parse(Some("labelSelector=t%3Dx")))
            .await
            .expect("collection");
        assert_eq!(list["items"].as_array().map(Vec::len), Some(3));
        assert!(t.api.store.list("core/configmaps/").items.is_empty());
    }
}
