//! The verbs that write an object: create (POST), update (PUT, main
//! resource or status) and patch (JSON merge, JSON patch, strategic merge
//! for built-ins, server-side apply), each honouring `dryRun`. Every write
//! decides its new object with `admission` on the object as last read, and
//! the store commits it only if that object is still current (else the
//! decision is made again). Deletes are in `delete`.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::admission::{admit_create, admit_update};
use crate::api::{Api, Target, WriteOpts, now};
use crate::error::{ApiError, ApiResult};
use crate::patch::{PatchType, apply_json_patch, strategic_merge, strip_directives};
use crate::store::{Mutation, Written};
use crate::views::{check_type, parse_body, to_storage, view};

/// A change to an object's main resource or status, as a PATCH body says it.
fn patched(
    rt: &crate::resource::ResourceType,
    name: &str,
    patch_type: PatchType,
    old: &Value,
    patch: &Value,
) -> ApiResult<Value> {
    let mut doc = view(rt, old);
    // A patch that does not mention the resourceVersion has no precondition.
    let live_rv = doc["metadata"]["resourceVersion"].clone();
    match patch_type {
        PatchType::Json => apply_json_patch(rt, name, &mut doc, patch)?,
        PatchType::Strategic => {
            if !patch.is_object() {
                return Err(ApiError::bad_request("a merge patch must be a JSON object"));
            }
            strategic_merge(&mut doc, patch, rt.schema.as_ref());
        }
        _ => {
            let mut p = patch.clone();
            strip_directives(&mut p);
            if !p.is_object() {
                return Err(ApiError::bad_request("a merge patch must be a JSON object"));
            }
            json_patch::merge(&mut doc, &p);
        }
    }
    if doc["metadata"]["resourceVersion"] == live_rv
        && let Some(m) = doc.get_mut("metadata").and_then(Value::as_object_mut)
    {
        m.remove("resourceVersion");
    }
    Ok(doc)
}

/// What a dry run answers: the decided object, keeping the stored
/// resourceVersion (a dry run commits nothing).
fn preview(current: Option<&Arc<Value>>, decided: &Mutation) -> (u16, Value) {
    let mut p = match decided {
        Mutation::Put(v) | Mutation::Delete(v) => v.clone(),
        Mutation::Unchanged(v) => (**v).clone(),
    };
    if let Some(old_rv) = current.map(|c| c["metadata"]["resourceVersion"].clone()) {
        p["metadata"]["resourceVersion"] = old_rv;
    }
    (if current.is_none() { 201 } else { 200 }, p)
}

impl Api {
    /// POST: 201 with the stored object.
    pub async fn create(&self, t: &Target, mut body: Value, opts: &WriteOpts<'_>) -> ApiResult<(u16, Value)> {
        if t.status || t.name.is_some() {
            return Err(ApiError::method_not_allowed("POST is only allowed on a collection"));
        }
        check_type(&t.rt, &mut body, false)?;
        self.ensure_namespace(t)?;
        let dry_run = opts.query.dry_run()?;
        let (manager, now, av) = (opts.manager(), now(), t.rt.api_version());
        let cx = self.ctx(t, &manager, &av, &now, opts, false)?;
        let obj = admit_create(&cx, to_storage(&t.rt, body))?;
        let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let key = t.rt.key(t.namespace.as_deref(), &name);
        let exists = || ApiError::already_exists(&t.rt.plural, &t.rt.group, &name);
        if dry_run {
            if self.store.get(&key).is_some() {
                return Err(exists());
            }
            return Ok((201, view(&t.rt, &obj)));
        }
        let written = self
            .store
            .mutate(&key, |cur| if cur.is_some() { Err(exists()) } else { Ok(Mutation::Put(obj.clone())) })
            .await?;
        self.after_write(t, &written);
        Ok((201, view(&t.rt, written.object())))
    }

    /// PUT of a full object (main resource or status).
    pub async fn update(&self, t: &Target, mut body: Value, opts: &WriteOpts<'_>) -> ApiResult<(u16, Value)> {
        check_type(&t.rt, &mut body, false)?;
        let key = t.key()?;
        let dry_run = opts.query.dry_run()?;
        let (manager, now, av) = (opts.manager(), now(), t.rt.api_version());
        let cx = self.ctx(t, &manager, &av, &now, opts, false)?;
        let body = to_storage(&t.rt, body);
        self.write(t, &key, dry_run, true, |cur| {
            let old = cur.ok_or_else(|| t.not_found())?;
            admit_update(&cx, old, body.clone())
        })
        .await
    }

    /// Decide and commit one write (or only decide, for a dry run), then
    /// answer (code, view); a write that deleted the object collects its
    /// dependents unless `collect` is false (an orphaning delete).
    pub(crate) async fn write<F>(
        &self,
        t: &Target,
        key: &str,
        dry_run: bool,
        collect: bool,
        mut decide: F,
    ) -> ApiResult<(u16, Value)>
    where
        F: FnMut(Option<&Value>) -> ApiResult<Mutation>,
    {
        if dry_run {
            let current = self.store.get(key);
            let decided = decide(current.as_deref())?;
            let (code, p) = preview(current.as_ref(), &decided);
            return Ok((code, view(&t.rt, &p)));
        }
        let written = self.store.mutate(key, |cur| decide(cur.map(|a| a.as_ref()))).await?;
        self.after_write(t, &written);
        if let (true, Written::Deleted(gone)) = (collect, &written) {
            self.collect_garbage(gone).await?;
        }
        let code = if matches!(written, Written::Created(_)) { 201 } else { 200 };
        Ok((code, view(&t.rt, written.object())))
    }

    pub async fn patch(
        &self,
        t: &Target,
        patch_type: PatchType,
        body: &[u8],
        opts: &WriteOpts<'_>,
    ) -> ApiResult<(u16, Value)> {
        let key = t.key()?;
        let name = t.name().to_string();
        let dry_run = opts.query.dry_run()?;
        let force = opts.query.flag("force")?;
        let now = now();
        let av = t.rt.api_version();
        let rt = t.rt.clone();
        if let PatchType::Apply = patch_type {
            let manager = opts
                .query
                .get("fieldManager")
                .ok_or_else(|| ApiError::bad_request("PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"))?
                .to_string();
            let mut applied = parse_body(&rt, body, true)?;
            check_type(&rt, &mut applied, true)?;
            if let Some(n) = applied["metadata"]["name"].as_str()
                && n != name
            {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )));
            }
            let cx = self.ctx(t, &manager, &av, &now, opts, true)?;
            let scope = cx.scope();
            let writer = cx.writer();
            if self.store.get(&key).is_none() {
                if t.status {
                    return Err(t.not_found());
                }
                self.ensure_namespace(t)?;
            }
            return self
                .write(t, &key, dry_run, true, |cur| match cur {
                    None => {
                        let skeleton = json!({"apiVersion": av, "kind": rt.kind, "metadata": {"name": name}});
                        let merged = crate::apply::apply(&skeleton, &applied, scope, force, &writer)?;
                        let obj = admit_create(&cx, to_storage(&rt, merged))?;
                        Ok(Mutation::Put(obj))
                    }
                    Some(old) => {
                        let live = view(&rt, old);
                        let merged = crate::apply::apply(&live, &applied, scope, force, &writer)?;
                        admit_update(&cx, old, to_storage(&rt, merged))
                    }
                })
                .await;
        }
        if let PatchType::Strategic = patch_type
            && rt.is_custom()
        {
            return Err(ApiError::unsupported_media_type(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            ));
        }
        let patch = parse_body(&rt, body, false)?;
        let manager = opts.manager();
        let cx = self.ctx(t, &manager, &av, &now, opts, false)?;
        self.write(t, &key, dry_run, true, |cur| {
            let old = cur.ok_or_else(|| t.not_found())?;
            let doc = patched(&rt, &name, patch_type, old, &patch)?;
            admit_update(&cx, old, to_storage(&rt, doc))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::testing::*;
    use crate::query::Query;

    fn cm(name: &str, v: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": v}})
    }

    #[tokio::test]
    async fn create_refuses_a_second_object_of_the_same_name_and_dry_runs_store_nothing() {
        let t = api().await;
        let cms = target(&t.api, "", "configmaps", Some("default"), None);
        let made = create(&t.api, &cms, cm("a", "1")).await;
        assert_eq!(made["metadata"]["resourceVersion"], t.api.store.current_rv().to_string());
        let q = Query::default();
        let again = t.api.create(&cms, cm("a", "2"), &WriteOpts::new(&q, "test")).await.expect_err("exists");
        assert_eq!((again.code, again.reason), (409, "AlreadyExists"));
        let dry = Query::parse(Some("dryRun=All"));
        let before = t.api.store.current_rv();
        let (code, _) = t.api.create(&cms, cm("b", "1"), &WriteOpts::new(&dry, "test")).await.expect("dry run");
        assert_eq!((code, t.api.store.current_rv()), (201, before));
        assert!(t.api.store.get("core/configmaps/default/b").is_none());
    }

    #[tokio::test]
    async fn patches_merge_and_a_dry_run_keeps_the_resource_version() {
        let t = api().await;
        let cms = target(&t.api, "", "configmaps", Some("default"), None);
        let made = create(&t.api, &cms, cm("a", "1")).await;
        let one = target(&t.api, "", "configmaps", Some("default"), Some("a"));
        let dry = Query::parse(Some("dryRun=All"));
        let (_, preview) = t
            .api
            .patch(&one, PatchType::Merge, br#"{"data":{"k":"2"}}"#, &WriteOpts::new(&dry, "test"))
            .await
            .expect("dry patch");
        assert_eq!(
            (preview["data"]["k"].as_str(), &preview["metadata"]["resourceVersion"]),
            (Some("2"), &made["metadata"]["resourceVersion"])
        );
        let q = Query::default();
        let (code, patched) = t
            .api
            .patch(&one, PatchType::Merge, br#"{"data":{"k":"3"}}"#, &WriteOpts::new(&q, "test"))
            .await
            .expect("patch");
        assert_eq!((code, patched["data"]["k"].as_str()), (200, Some("3")));
        let stale = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "resourceVersion": made["metadata"]["resourceVersion"]}});
        let e = t.api.update(&one, stale, &WriteOpts::new(&q, "test")).await.expect_err("stale resourceVersion");
        assert_eq!((e.code, e.reason), (409, "Conflict"));
    }

    #[tokio::test]
    async fn concurrent_patches_of_one_object_all_land() {
        let t = Arc::new(api().await);
        let cms = target(&t.api, "", "configmaps", Some("default"), None);
        create(&t.api, &cms, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "n"}, "data": {}}))
            .await;
        let mut tasks = vec![];
        for i in 0..16 {
            let t = t.clone();
            tasks.push(tokio::spawn(async move {
                let one = target(&t.api, "", "configmaps", Some("default"), Some("n"));
                let q = Query::default();
                let body = json!({"data": {format!("k{i}"): "x"}}).to_string();
                t.api.patch(&one, PatchType::Merge, body.as_bytes(), &WriteOpts::new(&q, "test")).await.map(|_| ())
            }));
        }
        for task in tasks {
            task.await.expect("join").expect("every patch is decided again until it lands");
        }
        let stored = t.api.store.get("core/configmaps/default/n").expect("stored");
        assert_eq!(stored["data"].as_object().map(|d| d.len()), Some(16), "no patch was lost: {stored}");
    }
}
