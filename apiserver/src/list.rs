//! Lists: selection by label and field selectors over served views,
//! `limit`/`continue` pagination (the token carries the last key and the
//! first page's resourceVersion; 410 once that is compacted), and the
//! `<Kind>List` body serialised straight from the stored objects.

use std::borrow::Cow;
use std::sync::Arc;

use base64::Engine;
use serde_json::{Value, json};

use crate::api::{Api, Target};
use crate::error::{ApiError, ApiResult};
use crate::events;
use crate::query::Query;
use crate::resource::{Builtin, ResourceType};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::views::view_cow;

/// One page of a list: the matching stored objects, the list RV and the
/// continue token when more remain.
pub struct Page {
    pub items: Vec<Arc<Value>>,
    pub rv: u64,
    pub next: Option<String>,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ListBody<'a> {
    api_version: String,
    kind: &'a str,
    metadata: Value,
    items: Vec<Cow<'a, Value>>,
}

fn field_selector(rt: &ResourceType, q: &Query) -> ApiResult<FieldSelector> {
    let allowed: &[&str] = match rt.builtin {
        Some(Builtin::CoreEvent) => events::CORE_FIELDS,
        Some(Builtin::EventsV1) => events::V1_FIELDS,
        Some(Builtin::Secret) => &["type"],
        Some(Builtin::Namespace) => &["status.phase"],
        _ => &[],
    };
    FieldSelector::parse(q.get("fieldSelector").unwrap_or(""), allowed)
}

/// Label and field selection over served views.
pub struct Filter {
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    pub fn new(rt: &ResourceType, q: &Query) -> ApiResult<Self> {
        Ok(Self { labels: LabelSelector::parse(q.get("labelSelector").unwrap_or(""))?, fields: field_selector(rt, q)? })
    }

    pub fn matches(&self, view: &Value) -> bool {
        self.labels.matches(view) && self.fields.matches(view)
    }

    /// Whether it matches every object (no selector), whatever it holds.
    pub fn is_everything(&self) -> bool {
        self.labels.is_everything() && self.fields.is_everything()
    }
}

fn encode_continue(key: &str, rv: u64) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json!({"k": key, "rv": rv}).to_string())
}

/// The last key of the previous page and the resourceVersion of the first page.
fn decode_continue(token: &str) -> ApiResult<(String, u64)> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|v| Some((v["k"].as_str()?.to_string(), v["rv"].as_u64()?)))
        .ok_or_else(|| ApiError::bad_request(format!("invalid continue token {token:?}")))
}

impl Api {
    /// A list page of the stored objects whose served view matches the selectors.
    pub fn list(&self, t: &Target, q: &Query) -> ApiResult<Page> {
        let filter = Filter::new(&t.rt, q)?;
        let prefix = t.rt.prefix(t.namespace.as_deref());
        let (after, first_rv) = match q.get("continue") {
            Some(tok) => {
                let (key, rv) = decode_continue(tok)?;
                if rv < self.store.compacted() {
                    return Err(ApiError::expired(format!(
                        "The provided continue parameter is too old to display a consistent list result (resourceVersion {rv} is compacted). Start a new list without the continue parameter."
                    )));
                }
                (key, Some(rv))
            }
            None => (String::new(), None),
        };
        let limit = q.number("limit")?.filter(|l| *l > 0).map(|l| l as usize);
        let snap = self.store.list_after(&prefix, &after);
        let mut items: Vec<Arc<Value>> = vec![];
        let mut next = None;
        for obj in snap.items {
            if !filter.matches(&view_cow(&t.rt, &obj)) {
                continue;
            }
            if limit.is_some_and(|l| items.len() >= l) {
                let last = items.last().map(|i| &i["metadata"]);
                let last_key = t.rt.key(
                    last.and_then(|m| m["namespace"].as_str()),
                    last.and_then(|m| m["name"].as_str()).unwrap_or_default(),
                );
                next = Some(encode_continue(&last_key, first_rv.unwrap_or(snap.rv)));
                break;
            }
            items.push(obj);
        }
        // Later pages are served from the current state, not a snapshot, so
        // every page reports the first page's resourceVersion: a watch from it
        // replays whatever changed in between, and no update is lost.
        Ok(Page { items, rv: first_rv.unwrap_or(snap.rv), next })
    }

    /// The `<Kind>List` JSON of a page, serialised without copying the objects.
    pub fn list_json(&self, t: &Target, page: &Page) -> String {
        let mut metadata = json!({"resourceVersion": page.rv.to_string()});
        if let Some(c) = &page.next {
            metadata["continue"] = json!(c);
        }
        let api_version = if t.rt.builtin == Some(Builtin::CoreEvent) { "v1".into() } else { t.rt.api_version() };
        let body = ListBody {
            api_version,
            kind: &t.rt.list_kind,
            metadata,
            items: page.items.iter().map(|o| view_cow(&t.rt, o)).collect(),
        };
        serde_json::to_string(&body)
            .unwrap_or_else(|e| ApiError::internal(format!("list encoding: {e}")).to_status().to_string())
    }
}
