//! Watch streams: newline-delimited JSON events over a chunked response.
//! A watch from resourceVersion N replays every retained change after N
//! exactly once, in order, then follows live commits; N older than the
//! retained history gets one ERROR 410 Expired event. Unset or "0" starts
//! with synthetic ADDED events for the current state. Objects moving in or
//! out of a selector produce ADDED / DELETED, as in the watch cache.
//! A watch lasts as long as its `timeoutSeconds` asks, clamped to the
//! server's longest watch; every instant is computed with checked
//! arithmetic, so no query value can panic the watch's task (whose panic
//! no one would see).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::api::{Api, Target};
use crate::error::{ApiError, ApiResult};
use crate::list::Filter;
use crate::query::Query;
use crate::store::{ChangeType, Since};
use crate::table::{self, Format};
use crate::views::view_cow;

/// Settings of one watch request.
pub struct WatchRequest {
    pub target: Target,
    pub filter: Filter,
    pub from: Option<u64>,
    pub send_initial: bool,
    pub bookmarks: bool,
    pub timeout: Duration,
    pub bookmark_every: Duration,
    pub format: Format,
}

/// `{"type":KIND,"object":OBJECT}` and a newline, serialised straight from
/// the borrowed object: every watcher renders each change, so neither a
/// copy of the object nor an envelope value is built for it.
fn event_line(kind: &str, object: &Value) -> Bytes {
    let mut out = Vec::with_capacity(4096);
    out.extend_from_slice(b"{\"type\":");
    // Writing JSON into a Vec cannot fail: a string and a Value always serialise.
    let _ = serde_json::to_writer(&mut out, kind);
    out.extend_from_slice(b",\"object\":");
    let _ = serde_json::to_writer(&mut out, object);
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

impl WatchRequest {
    /// `longest`: the server's longest watch, which is also the timeout of
    /// a watch that asks for none.
    pub fn new(
        target: Target,
        q: &Query,
        format: Format,
        longest: Duration,
        bookmark_every: Duration,
    ) -> ApiResult<Self> {
        let filter = Filter::new(&target.rt, q)?;
        let from = match q.get("resourceVersion") {
            None | Some("0") => None,
            Some(rv) => Some(
                rv.parse::<u64>()
                    .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {rv:?}: not a number")))?,
            ),
        };
        let timeout = q.number("timeoutSeconds")?.map_or(longest, |s| Duration::from_secs(s).min(longest));
        Ok(Self {
            target,
            filter,
            from,
            send_initial: q.flag("sendInitialEvents")?,
            bookmarks: q.flag("allowWatchBookmarks")?,
            timeout,
            bookmark_every,
            format,
        })
    }
}

/// `after` from now; past what the clock can count (a huge interval), a
/// year from now, which no watch outlives.
fn instant_after(after: Duration) -> tokio::time::Instant {
    let now = tokio::time::Instant::now();
    now.checked_add(after).or_else(|| now.checked_add(Duration::from_secs(365 * 24 * 3600))).unwrap_or(now)
}

type Tx = mpsc::Sender<Result<Bytes, std::io::Error>>;

fn line(v: &Value) -> Bytes {
    let mut s = v.to_string();
    s.push('\n');
    Bytes::from(s)
}

impl WatchRequest {
    fn event(&self, kind: &str, object: &Value) -> Bytes {
        let converted;
        let object = match self.format {
            Format::Table => {
                let rv = object["metadata"]["resourceVersion"].as_str().and_then(|r| r.parse().ok()).unwrap_or(0);
                converted = table::table(&self.target.rt, std::slice::from_ref(object), rv, None);
                &converted
            }
            Format::Metadata => {
                converted = table::partial(object);
                &converted
            }
            Format::Object => object,
        };
        event_line(kind, object)
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let rt = &self.target.rt;
        let api_version = if rt.group.is_empty() { "v1".to_string() } else { rt.api_version() };
        line(&json!({"type": "BOOKMARK", "object": {"kind": rt.kind, "apiVersion": api_version, "metadata": meta}}))
    }

    fn in_scope(&self, key: &str) -> bool {
        key.starts_with(&self.target.rt.prefix(self.target.namespace.as_deref()))
    }
}

/// Run one watch until the client goes away, the timeout passes, or the
/// requested history is gone.
pub async fn run(api: Arc<Api>, w: WatchRequest, tx: Tx) {
    let _open = crate::metrics::WatchGuard::new(&api.metrics.watches);
    let mut notify = api.store.subscribe();
    let mut stopping = api.stopping.subscribe();
    if *stopping.borrow_and_update() {
        return;
    }
    let deadline = instant_after(w.timeout);
    let send = |b: Bytes| {
        let tx = tx.clone();
        async move { tx.send(Ok(b)).await.is_ok() }
    };
    let mut last = match w.from {
        Some(rv) if !w.send_initial => rv,
        _ => {
            let snap = api.store.list(&w.target.rt.prefix(w.target.namespace.as_deref()));
            for obj in &snap.items {
                let v = view_cow(&w.target.rt, obj);
                if w.filter.matches(&v) && !send(w.event("ADDED", &v)).await {
                    return;
                }
            }
            if w.send_initial && !send(w.bookmark(snap.rv, true)).await {
                return;
            }
            snap.rv
        }
    };
    let mut bookmark_at = instant_after(w.bookmark_every);
    loop {
        match api.store.since(last) {
            Since::Expired { requested, oldest } => {
                let e = ApiError::expired(format!("too old resource version: {requested} ({oldest})"));
                let _ = send(line(&json!({"type": "ERROR", "object": e.to_status()}))).await;
                return;
            }
            Since::Changes(changes, current) => {
                for c in changes {
                    if !w.in_scope(&c.key) {
                        continue;
                    }
                    let now_view = view_cow(&w.target.rt, &c.object);
                    let matches_now = w.filter.matches(&now_view);
                    let before = match &c.prev {
                        Some(p) if !w.filter.is_everything() => w.filter.matches(&view_cow(&w.target.rt, p)),
                        _ => matches_now,
                    };
                    let kind = match (c.kind, before, matches_now) {
                        (ChangeType::Deleted, true, _) => Some("DELETED"),
                        (ChangeType::Added, _, true) => Some("ADDED"),
                        (ChangeType::Modified, false, true) => Some("ADDED"),
                        (ChangeType::Modified, true, true) => Some("MODIFIED"),
                        (ChangeType::Modified, true, false) => Some("DELETED"),
                        _ => None,
                    };
                    if let Some(kind) = kind
                        && !send(w.event(kind, &now_view)).await
                    {
                        return;
                    }
                }
                last = current.max(last);
            }
        }
        tokio::select! {
            changed = notify.changed() => if changed.is_err() { return },
            _ = tx.closed() => return,
            _ = stopping.changed() => return,
            _ = tokio::time::sleep_until(deadline) => {
                if w.bookmarks {
                    let _ = send(w.bookmark(last, false)).await;
                }
                return;
            }
            _ = tokio::time::sleep_until(bookmark_at) => {
                bookmark_at = instant_after(w.bookmark_every);
                if w.bookmarks && !send(w.bookmark(last, false)).await {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target {
        let crd = json!({"spec": {"group": "g.io", "names": {"plural": "ws", "kind": "W"}, "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}}]}});
        let rt = crate::resource::from_crd(&crd).remove(0);
        Target { rt: Arc::new(rt), namespace: Some("default".into()), name: None, status: false }
    }

    fn timeout_of(query: &str) -> Duration {
        let longest = Duration::from_secs(1800);
        let w = WatchRequest::new(target(), &Query::parse(Some(query)), Format::Object, longest, longest);
        w.unwrap_or_else(|e| panic!("{query}: {e}")).timeout
    }

    #[test]
    fn a_watch_timeout_is_clamped_to_the_longest_watch() {
        assert_eq!(timeout_of("watch=1&timeoutSeconds=18446744073709551615"), Duration::from_secs(1800));
        assert_eq!(timeout_of("watch=1&timeoutSeconds=290"), Duration::from_secs(290));
        assert_eq!(timeout_of("watch=1"), Duration::from_secs(1800));
        let past_u64 = Query::parse(Some("timeoutSeconds=18446744073709551616"));
        let e = WatchRequest::new(target(), &past_u64, Format::Object, Duration::ZERO, Duration::ZERO).err();
        assert_eq!(e.map(|e| e.code), Some(400));
    }

    #[test]
    fn an_instant_past_what_the_clock_counts_is_a_year_away_not_a_panic() {
        let far = instant_after(Duration::MAX);
        assert!(far > tokio::time::Instant::now() + Duration::from_secs(364 * 24 * 3600));
        let soon = instant_after(Duration::from_secs(5));
        assert!(soon <= tokio::time::Instant::now() + Duration::from_secs(5));
    }
}
