//! The verbs: get, list, create, update (PUT), patch (merge, JSON patch,
//! strategic merge for built-ins, server-side apply), delete (finalizers and
//! deletionTimestamp) and deletecollection, over any served resource. Each
//! returns the served view of the object and the HTTP code. Lists live in
//! `list`, non-apply patch bodies in `patch`, write rules in `admission`,
//! routing and rendering in `http`.

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::admission::{FieldValidation, WriteCtx, admit_create, admit_update};
use crate::error::{ApiError, ApiResult};
use crate::events;
use crate::patch::{PatchType, apply_json_patch, strategic_merge, strip_directives};
use crate::query::Query;
use crate::registry::Registry;
use crate::resource::{Builtin, ResourceType};
use crate::store::{Mutation, Store, Written};

/// The resource, namespace, name and subresource a request addresses.
#[derive(Clone)]
pub struct Target {
    pub rt: Arc<ResourceType>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub status: bool,
}

impl Target {
    fn key(&self) -> ApiResult<String> {
        let name =
            self.name.as_deref().ok_or_else(|| ApiError::method_not_allowed("a name is required for this verb"))?;
        Ok(self.rt.key(self.namespace.as_deref(), name))
    }

    fn name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }

    fn not_found(&self) -> ApiError {
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

/// The served view of a stored object, borrowed when nothing changes.
pub fn view_cow<'a>(rt: &ResourceType, stored: &'a Value) -> Cow<'a, Value> {
    match rt.builtin {
        Some(Builtin::CoreEvent) => Cow::Owned(events::stored_to_core(stored)),
        Some(Builtin::EventsV1) => Cow::Owned(events::stored_to_v1(stored)),
        None if stored["apiVersion"].as_str() != Some(rt.api_version().as_str()) => {
            let mut v = stored.clone();
            v["apiVersion"] = json!(rt.api_version());
            Cow::Owned(v)
        }
        _ => Cow::Borrowed(stored),
    }
}

/// The served view of a stored object.
pub fn view(rt: &ResourceType, stored: &Value) -> Value {
    view_cow(rt, stored).into_owned()
}

/// A written view back into the stored shape.
fn to_storage(rt: &ResourceType, mut v: Value) -> Value {
    if rt.builtin == Some(Builtin::CoreEvent) {
        return events::core_to_stored(v);
    }
    if let Some(m) = v.as_object_mut() {
        m.insert("apiVersion".into(), json!(rt.api_version()));
        m.insert("kind".into(), json!(rt.kind));
    }
    v
}

fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Parse a request body as JSON (or YAML for apply), naming what is wrong.
pub fn parse_body(rt: &ResourceType, body: &[u8], yaml: bool) -> ApiResult<Value> {
    let parsed: Result<Value, String> = if yaml {
        serde_yaml::from_slice::<Value>(body).map_err(|e| e.to_string())
    } else {
        serde_json::from_slice::<Value>(body).map_err(|e| e.to_string())
    };
    parsed.map_err(|e| {
        ApiError::bad_request(format!(
            "the body of the request could not be decoded as {} ({}): {e}",
            if yaml { "YAML" } else { "JSON" },
            rt.kind
        ))
    })
}

/// The apiVersion and kind in a body must be the endpoint's.
fn check_type(rt: &ResourceType, body: &mut Value, required: bool) -> ApiResult<()> {
    let Some(m) = body.as_object_mut() else {
        return Err(ApiError::bad_request(format!("the body of the request must be a JSON object ({})", rt.kind)));
    };
    let want = rt.api_version();
    match m.get("apiVersion").and_then(Value::as_str) {
        Some(av) if av != want => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({want})"
            )));
        }
        None if required => {
            return Err(ApiError::bad_request(format!(
                "invalid object type: apiVersion is required (expected {want})"
            )));
        }
        _ => {}
    }
    match m.get("kind").and_then(Value::as_str) {
        Some(k) if k != rt.kind => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                rt.kind
            )));
        }
        None if required => {
            return Err(ApiError::bad_request(format!("invalid object type: kind is required (expected {})", rt.kind)));
        }
        _ => {}
    }
    m.insert("apiVersion".into(), json!(want));
    m.insert("kind".into(), json!(rt.kind));
    Ok(())
}

fn manager(q: &Query, user_agent: &str) -> String {
    match q.get("fieldManager") {
        Some(m) => m.to_string(),
        None => user_agent.split('/').next().filter(|s| !s.is_empty()).unwrap_or("unknown").to_string(),
    }
}

/// Per-request options every write shares.
pub struct WriteOpts<'a> {
    pub query: &'a Query,
    pub user_agent: &'a str,
    /// Warnings for the client (`Warning: 299` headers), e.g. unknown fields
    /// dropped under `fieldValidation=Warn`.
    pub warnings: RefCell<Vec<String>>,
}

impl<'a> WriteOpts<'a> {
    pub fn new(query: &'a Query, user_agent: &'a str) -> Self {
        Self { query, user_agent, warnings: RefCell::default() }
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
    pub fn ensure_namespaces(&self) -> ApiResult<()> {
        let Some(rt) = self.registry.find("", "v1", "namespaces") else { return Ok(()) };
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            if self.store.get(&rt.key(None, ns)).is_none() {
                let t = Target { rt: rt.clone(), namespace: None, name: None, status: false };
                let q = Query::default();
                self.create(
                    &t,
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
                    &WriteOpts::new(&q, "mpiswarm-apiserver"),
                )?;
            }
        }
        Ok(())
    }

    fn ctx<'a>(
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

    fn after_write(&self, t: &Target, w: &Written) {
        if t.rt.builtin == Some(Builtin::Crd) && !matches!(w, Written::Unchanged(_)) {
            self.reload_crds();
        }
    }

    pub fn get(&self, t: &Target) -> ApiResult<Value> {
        let obj = self.store.get(&t.key()?).ok_or_else(|| t.not_found())?;
        Ok(view(&t.rt, &obj))
    }

    fn ensure_namespace(&self, t: &Target) -> ApiResult<()> {
        if let (true, Some(ns)) = (t.rt.namespaced, t.namespace.as_deref())
            && self.store.get(&format!("core/namespaces/{ns}")).is_none()
        {
            return Err(ApiError::not_found("namespaces", "", ns));
        }
        Ok(())
    }

    /// POST: 201 with the stored object.
    pub fn create(&self, t: &Target, mut body: Value, opts: &WriteOpts<'_>) -> ApiResult<(u16, Value)> {
        if t.status || t.name.is_some() {
            return Err(ApiError::method_not_allowed("POST is only allowed on a collection"));
        }
        check_type(&t.rt, &mut body, false)?;
        self.ensure_namespace(t)?;
        let dry_run = opts.query.dry_run()?;
        let (manager, now, av) = (manager(opts.query, opts.user_agent), now(), t.rt.api_version());
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
        let written =
            self.store.mutate(&key, |cur, _| if cur.is_some() { Err(exists()) } else { Ok(Mutation::Put(obj)) })?;
        self.after_write(t, &written);
        Ok((201, view(&t.rt, written.object())))
    }

    /// PUT of a full object (main resource or status).
    pub fn update(&self, t: &Target, mut body: Value, opts: &WriteOpts<'_>) -> ApiResult<(u16, Value)> {
        check_type(&t.rt, &mut body, false)?;
        let key = t.key()?;
        let dry_run = opts.query.dry_run()?;
        let (manager, now, av) = (manager(opts.query, opts.user_agent), now(), t.rt.api_version());
        let cx = self.ctx(t, &manager, &av, &now, opts, false)?;
        let body = to_storage(&t.rt, body);
        self.write(t, &key, dry_run, true, |cur| {
            let old = cur.ok_or_else(|| t.not_found())?;
            admit_update(&cx, old, body)
        })
    }

    /// Run a mutation, honouring dryRun, and turn the outcome into (code, view).
    fn write<F>(&self, t: &Target, key: &str, dry_run: bool, collect: bool, f: F) -> ApiResult<(u16, Value)>
    where
        F: FnOnce(Option<&Value>) -> ApiResult<Mutation>,
    {
        let mut preview = None;
        let written = self.store.mutate(key, |cur, _| {
            let m = f(cur.map(|a| a.as_ref()))?;
            if dry_run {
                let mut p = match &m {
                    Mutation::Put(v) | Mutation::Delete(v) => v.clone(),
                    Mutation::Unchanged(v) => (**v).clone(),
                };
                // A dry run commits nothing, so the object keeps its resourceVersion.
                if let Some(old_rv) = cur.map(|c| c["metadata"]["resourceVersion"].clone()) {
                    p["metadata"]["resourceVersion"] = old_rv;
                }
                preview = Some((if cur.is_none() { 201 } else { 200 }, p));
                return Ok(Mutation::Unchanged(cur.cloned().unwrap_or_else(|| Arc::new(Value::Null))));
            }
            Ok(m)
        })?;
        if let Some((code, p)) = preview {
            return Ok((code, view(&t.rt, &p)));
        }
        self.after_write(t, &written);
        if let (true, Written::Deleted(gone)) = (collect, &written) {
            self.collect_garbage(gone);
        }
        let code = if matches!(written, Written::Created(_)) { 201 } else { 200 };
        Ok((code, view(&t.rt, written.object())))
    }

    pub fn patch(
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
            let to_create = self.store.get(&key).is_none();
            if to_create {
                if t.status {
                    return Err(t.not_found());
                }
                self.ensure_namespace(t)?;
            }
            return self.write(t, &key, dry_run, true, |cur| match cur {
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
            });
        }
        if let PatchType::Strategic = patch_type
            && rt.is_custom()
        {
            return Err(ApiError::unsupported_media_type(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            ));
        }
        let patch = parse_body(&rt, body, false)?;
        let manager = manager(opts.query, opts.user_agent);
        let cx = self.ctx(t, &manager, &av, &now, opts, false)?;
        self.write(t, &key, dry_run, true, |cur| {
            let old = cur.ok_or_else(|| t.not_found())?;
            let mut doc = view(&rt, old);
            // A patch that does not mention the resourceVersion has no precondition.
            let live_rv = doc["metadata"]["resourceVersion"].clone();
            match patch_type {
                PatchType::Json => apply_json_patch(&rt, &name, &mut doc, &patch)?,
                PatchType::Strategic => {
                    if !patch.is_object() {
                        return Err(ApiError::bad_request("a merge patch must be a JSON object"));
                    }
                    strategic_merge(&mut doc, &patch, rt.schema.as_ref());
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
            admit_update(&cx, old, to_storage(&rt, doc))
        })
    }

    /// DELETE one object: marks it when finalizers are pending, else removes it.
    pub fn delete(&self, t: &Target, options: &Value, q: &Query) -> ApiResult<(u16, Value)> {
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
        let result = self.write(t, &key, dry_run, !orphan, |cur| {
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
            let mut marked = old.clone();
            marked["metadata"]["deletionTimestamp"] = json!(now);
            marked["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            if rt.builtin == Some(Builtin::Namespace) {
                marked["status"] = json!({"phase": "Terminating"});
            }
            if rt.generation {
                let g = old["metadata"]["generation"].as_i64().unwrap_or(1);
                marked["metadata"]["generation"] = json!(g + 1);
            }
            Ok(Mutation::Put(marked))
        })?;
        if rt.builtin == Some(Builtin::Crd) && !dry_run {
            self.delete_instances_of(&result.1);
        }
        if rt.builtin == Some(Builtin::Namespace) && !dry_run && self.store.get(&key).is_none() {
            self.delete_namespace_contents(t.name());
        }
        if matches!(
            rt.builtin,
            Some(
                Builtin::ConfigMap
                    | Builtin::Secret
                    | Builtin::Lease
                    | Builtin::CoreEvent
                    | Builtin::EventsV1
                    | Builtin::Stored
            )
        ) {
            let details =
                json!({"name": t.name(), "group": rt.group, "kind": rt.plural, "uid": result.1["metadata"]["uid"]});
            return Ok((
                200,
                json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}),
            ));
        }
        Ok(result)
    }

    /// Background garbage collection: objects whose ownerReferences name a
    /// deleted object are deleted too (or marked, if they have finalizers),
    /// and so on down the chain, as kube-controller-manager's GC does.
    fn collect_garbage(&self, gone: &Value) {
        let mut owners: Vec<String> = gone["metadata"]["uid"].as_str().map(String::from).into_iter().collect();
        while let Some(uid) = owners.pop() {
            for key in self.store.dependents(&uid) {
                let now = now();
                let result = self.store.mutate(&key, |cur, _| {
                    let Some(cur) = cur else { return Err(ApiError::no_route()) };
                    if cur["metadata"]["finalizers"].as_array().is_some_and(|f| !f.is_empty()) {
                        if cur["metadata"]["deletionTimestamp"].is_string() {
                            return Ok(Mutation::Unchanged(cur.clone()));
                        }
                        let mut marked = (**cur).clone();
                        marked["metadata"]["deletionTimestamp"] = json!(now);
                        marked["metadata"]["deletionGracePeriodSeconds"] = json!(0);
                        return Ok(Mutation::Put(marked));
                    }
                    Ok(Mutation::Delete((**cur).clone()))
                });
                if let Ok(Written::Deleted(d)) = result
                    && let Some(u) = d["metadata"]["uid"].as_str()
                {
                    owners.push(u.to_string());
                }
            }
        }
    }

    /// Delete events last seen before `cutoff`; returns how many went.
    pub fn expire_events(&self, cutoff: chrono::DateTime<chrono::Utc>) -> usize {
        let last_seen = |e: &Value| -> Option<chrono::DateTime<chrono::Utc>> {
            [
                &e["series"]["lastObservedTime"],
                &e["deprecatedLastTimestamp"],
                &e["eventTime"],
                &e["metadata"]["creationTimestamp"],
            ]
            .into_iter()
            .filter_map(|v| v.as_str())
            .filter_map(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&chrono::Utc))
            .max()
        };
        let mut expired = 0;
        for e in self.store.list("core/events/").items {
            if last_seen(&e).is_some_and(|t| t < cutoff) {
                let ns = e["metadata"]["namespace"].as_str().unwrap_or_default();
                let name = e["metadata"]["name"].as_str().unwrap_or_default();
                let gone = self.store.mutate(&format!("core/events/{ns}/{name}"), |cur, _| match cur {
                    // Re-checked under the lock: a repeat may have refreshed it.
                    Some(c) if last_seen(c).is_some_and(|t| t < cutoff) => Ok(Mutation::Delete((**c).clone())),
                    Some(c) => Ok(Mutation::Unchanged(c.clone())),
                    None => Err(ApiError::no_route()),
                });
                if matches!(gone, Ok(Written::Deleted(_))) {
                    expired += 1;
                }
            }
        }
        expired
    }

    /// A deleted namespace takes everything in it along (the namespace
    /// controller's job on a real cluster; finalizers are not waited for).
    fn delete_namespace_contents(&self, ns: &str) {
        let mut prefixes: Vec<String> =
            self.registry.all().iter().filter(|t| t.namespaced).map(|t| t.prefix(Some(ns))).collect();
        prefixes.sort();
        prefixes.dedup();
        for prefix in prefixes {
            for obj in self.store.list(&prefix).items {
                let name = obj["metadata"]["name"].as_str().unwrap_or_default();
                let _ = self.store.mutate(&format!("{prefix}{name}"), |cur, _| match cur {
                    Some(o) => Ok(Mutation::Delete((**o).clone())),
                    None => Err(ApiError::no_route()),
                });
            }
        }
    }

    /// When a CRD goes, its custom resources go with it.
    fn delete_instances_of(&self, crd: &Value) {
        let group = crd["spec"]["group"].as_str().unwrap_or_default();
        let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or_default();
        if group.is_empty() || plural.is_empty() {
            return;
        }
        let prefix = format!("{group}/{plural}/");
        for obj in self.store.list(&prefix).items {
            let ns = obj["metadata"]["namespace"].as_str().unwrap_or_default();
            let name = obj["metadata"]["name"].as_str().unwrap_or_default();
            let key = if ns.is_empty() { format!("{prefix}{name}") } else { format!("{prefix}{ns}/{name}") };
            let _ = self.store.mutate(&key, |cur, _| match cur {
                Some(o) => Ok(Mutation::Delete((**o).clone())),
                None => Err(ApiError::no_route()),
            });
        }
    }

    pub fn delete_collection(&self, t: &Target, options: &Value, q: &Query) -> ApiResult<(u16, Value)> {
        let page = self.list(t, &q.without(&["limit", "continue"]))?;
        let mut deleted = vec![];
        for item in page.items {
            let one = Target {
                rt: t.rt.clone(),
                namespace: item["metadata"]["namespace"].as_str().map(String::from),
                name: item["metadata"]["name"].as_str().map(String::from),
                status: false,
            };
            match self.delete(&one, options, q) {
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
