//! Where a panic in any server task is reported, so that the server stops
//! with an error instead of serving on with half-updated books (the panic
//! policy in README.md). Request handlers are wrapped by
//! [`Fatal::catch_panic_layer`], stream-closing callbacks by [`Fatal::guard`],
//! and the clock task is awaited by the server itself. Never recovers from a
//! panic: it only makes sure one is seen and ends the process.

use axum::http::{HeaderValue, StatusCode, header};
use std::any::Any;
use std::sync::Arc;
use tokio::sync::watch;

/// The first panic of a server, once there is one.
#[derive(Debug, Clone)]
pub struct Fatal {
    first: Arc<watch::Sender<Option<String>>>,
}

impl Default for Fatal {
    fn default() -> Self {
        Self { first: Arc::new(watch::channel(None).0) }
    }
}

/// The text a panic was raised with.
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

impl Fatal {
    /// Records that `what` panicked; the first report is the one the server stops with.
    pub fn report(&self, what: &str, payload: &(dyn Any + Send)) {
        let message = format!("{what} panicked: {}", panic_message(payload));
        tracing::error!(%message, "a server task panicked; the offer layer stops");
        self.first.send_if_modified(|first| {
            if first.is_none() {
                *first = Some(message);
                true
            } else {
                false
            }
        });
    }

    /// The first report, if any.
    pub fn reported(&self) -> Option<String> {
        self.first.borrow().clone()
    }

    /// Waits for the first report.
    pub async fn wait(&self) -> String {
        let mut rx = self.first.subscribe();
        let first = rx.wait_for(Option::is_some).await.map(|first| first.clone());
        match first {
            Ok(first) => first.unwrap_or_default(),
            // The sender lives in `self`, so this cannot end; wait forever.
            Err(_) => std::future::pending().await,
        }
    }

    /// Runs `f`, reporting (not propagating) a panic in it: for code that
    /// runs where a panic would vanish, such as a response body's `Drop`.
    pub fn guard(&self, what: &str, f: impl FnOnce()) {
        if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
            self.report(what, payload.as_ref());
        }
    }

    /// A layer that turns a panicking request handler into a 500 answer and
    /// a report, so the server stops.
    pub fn catch_panic_layer(
        &self,
    ) -> tower_http::catch_panic::CatchPanicLayer<
        impl Fn(Box<dyn Any + Send + 'static>) -> axum::http::Response<String> + Clone + Send + Sync + 'static,
    > {
        let fatal = self.clone();
        tower_http::catch_panic::CatchPanicLayer::custom(move |payload: Box<dyn Any + Send + 'static>| {
            fatal.report("a request handler", payload.as_ref());
            let mut resp = axum::http::Response::new(format!(
                "The offer layer hit a bug and is stopping ({}); retry against its restarted instance",
                panic_message(payload.as_ref())
            ));
            *resp.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
            resp
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_panic_is_the_one_reported() {
        let fatal = Fatal::default();
        fatal.guard("the first", || panic!("boom"));
        fatal.guard("the second", || panic!("{}", "again".to_owned()));
        assert_eq!(fatal.reported().as_deref(), Some("the first panicked: boom"));
    }

    #[test]
    fn a_guard_without_a_panic_reports_nothing() {
        let fatal = Fatal::default();
        fatal.guard("fine", || {});
        assert_eq!(fatal.reported(), None);
    }
}
