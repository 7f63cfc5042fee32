//! A streaming response body fed by the master's channel. When the client
//! goes away the body is dropped, and the drop tells the master, so a
//! disconnect is noticed at once rather than at the next heartbeat. The
//! drop runs in a connection task where a panic would vanish, so it is
//! reported to [`Fatal`] instead.

use crate::fatal::Fatal;
use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use futures::Stream;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::mpsc;

pub struct EventBody {
    events: mpsc::UnboundedReceiver<Bytes>,
    on_close: Option<Box<dyn FnOnce() + Send>>,
    fatal: Fatal,
}

impl Stream for EventBody {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.events.poll_recv(cx).map(|e| e.map(Ok))
    }
}

impl Drop for EventBody {
    fn drop(&mut self) {
        if let Some(on_close) = self.on_close.take() {
            self.fatal.guard("closing an event stream", on_close);
        }
    }
}

/// `200 OK`, JSON, chunked, with `Mesos-Stream-Id`, streaming `events`.
pub fn response(
    stream_id: &str,
    events: mpsc::UnboundedReceiver<Bytes>,
    on_close: impl FnOnce() + Send + 'static,
    fatal: &Fatal,
) -> Response {
    let body = EventBody { events, on_close: Some(Box::new(on_close)), fatal: fatal.clone() };
    let mut resp = Response::new(Body::from_stream(body));
    *resp.status_mut() = StatusCode::OK;
    let headers = resp.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Ok(v) = HeaderValue::from_str(stream_id) {
        headers.insert(mpiswarm_mesos::client::STREAM_ID_HEADER, v);
    }
    resp
}
