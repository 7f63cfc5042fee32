//! The event TTL, as kube-apiserver's `--event-ttl`: events last seen longer
//! ago than the TTL are deleted by a sweep that runs every minute (or every
//! TTL, if shorter). A failed sweep is logged and tried again next time; it
//! never stops the server.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::api::Api;
use crate::error::{ApiError, ApiResult};
use crate::store::{Mutation, Written};

/// When an event was last seen: the latest of its timestamps.
fn last_seen(e: &Value) -> Option<DateTime<Utc>> {
    [
        &e["series"]["lastObservedTime"],
        &e["deprecatedLastTimestamp"],
        &e["eventTime"],
        &e["metadata"]["creationTimestamp"],
    ]
    .into_iter()
    .filter_map(|v| v.as_str())
    .filter_map(|t| DateTime::parse_from_rfc3339(t).ok())
    .map(|t| t.with_timezone(&Utc))
    .max()
}

impl Api {
    /// Delete events last seen before `cutoff`; returns how many went.
    pub async fn expire_events(&self, cutoff: DateTime<Utc>) -> ApiResult<usize> {
        let mut expired = 0;
        for e in self.store.list("core/events/").items {
            if last_seen(&e).is_none_or(|t| t >= cutoff) {
                continue;
            }
            let ns = e["metadata"]["namespace"].as_str().unwrap_or_default();
            let name = e["metadata"]["name"].as_str().unwrap_or_default();
            let key = format!("core/events/{ns}/{name}");
            let gone = self
                .store
                .mutate(&key, |cur| match cur {
                    // Checked again on the current object: a repeat may have refreshed it.
                    Some(c) if last_seen(c).is_some_and(|t| t < cutoff) => Ok(Mutation::Delete((**c).clone())),
                    Some(c) => Ok(Mutation::Unchanged(c.clone())),
                    None => Err(ApiError::no_route()),
                })
                .await;
            match gone {
                Ok(Written::Deleted(_)) => expired += 1,
                Ok(_) => {}
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(ApiError::internal(format!("expiring event {key}: {}", e.message))),
            }
        }
        Ok(expired)
    }
}

/// Sweep expired events until the server stops.
pub async fn sweep(api: Arc<Api>, ttl: Duration) {
    let every = ttl.clamp(Duration::from_secs(1), Duration::from_secs(60));
    loop {
        tokio::time::sleep(every).await;
        let cutoff = Utc::now() - chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::MAX);
        match api.expire_events(cutoff).await {
            Ok(0) => {}
            Ok(expired) => tracing::debug!(expired, "expired events deleted"),
            Err(e) => tracing::error!(error = %e, "the event TTL sweep failed; it runs again in {every:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::testing::*;
    use serde_json::json;

    #[tokio::test]
    async fn events_last_seen_before_the_cutoff_go_and_newer_ones_stay() {
        let t = api().await;
        let events = target(&t.api, "events.k8s.io", "events", Some("default"), None);
        let event = |name: &str, time: &str| {
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name},
                "eventTime": time, "reason": "R", "type": "Normal", "action": "A", "reportingController": "c", "reportingInstance": "i"})
        };
        create(&t.api, &events, event("old", "2020-01-01T00:00:00.000000Z")).await;
        let mut repeated = event("repeated", "2020-01-01T00:00:00.000000Z");
        repeated["series"] = json!({"count": 2, "lastObservedTime": "2100-01-01T00:00:00.000000Z"});
        create(&t.api, &events, repeated).await;
        // Past every timestamp of "old" (its creation included), before the repeat.
        let cutoff = Utc::now() + chrono::Duration::days(1);
        assert_eq!(t.api.expire_events(cutoff).await.expect("sweep"), 1);
        assert!(t.api.store.get("core/events/default/old").is_none());
        assert!(t.api.store.get("core/events/default/repeated").is_some(), "its series was seen after the cutoff");
        assert_eq!(t.api.expire_events(cutoff).await.expect("sweep again"), 0);
    }
}
