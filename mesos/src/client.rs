//! Async HTTP clients of the offer layer (or a real Mesos master): the
//! scheduler API for frameworks ([`SchedulerClient`]) and the agent API for
//! node agents ([`AgentClient`]).
//!
//! Both follow Mesos' rules: a SUBSCRIBE answers with a `Mesos-Stream-Id` and
//! a RecordIO event stream; later calls carry that id; a non-leading master
//! answers 307 with a protocol-relative `Location`, which is followed as
//! [`crate::redirect`] allows (same scheme, a configured master); 503
//! (recovering, no leader) and connection failures are retried with
//! exponential backoff. Nothing here holds a lock across an await.
//!
//! [`args`]: the command-line flags that say which master to talk to.

pub mod args;

use crate::master_error::MasterError;
use crate::recordio::{RecordIoCodec, RecordIoError};
use crate::redirect::{Masters, RedirectRefusal};
use crate::{agent_api, scheduler};
use futures::{Stream, StreamExt, TryStreamExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::codec::FramedRead;
use tokio_util::io::StreamReader;

/// The header that ties calls to a subscription.
pub const STREAM_ID_HEADER: &str = "Mesos-Stream-Id";

/// How long a call, or a SUBSCRIBE until its first event, may take before
/// the client gives up on the master. A master answers a call at once (200
/// or 202; the work happens after), so only a master that accepted the
/// connection and then fell silent (stopped, wedged, partitioned) reaches
/// it; without it a framework or agent would wait on that master forever
/// instead of reconnecting.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a call or subscription failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("HTTP request to {url} failed: {source}")]
    Http { url: String, source: reqwest::Error },
    #[error("{url} answered {status}: {body}")]
    Status { url: String, status: u16, body: String },
    #[error("{url} redirected more than {max} times; last Location was {location:?}")]
    TooManyRedirects { url: String, max: usize, location: String },
    #[error("{url} redirected to {location:?}, which is not followed: {reason}")]
    RedirectRefused { url: String, location: String, reason: RedirectRefusal },
    #[error("SUBSCRIBE response from {url} has no {STREAM_ID_HEADER} header")]
    MissingStreamId { url: String },
    #[error("event stream broken: {0}")]
    RecordIo(#[from] RecordIoError),
    #[error("event is not valid JSON for this API: {source}; record: {record}")]
    Json { source: serde_json::Error, record: String },
    #[error("the event stream ended before {expected}")]
    StreamEnded { expected: &'static str },
    #[error("the first event was {got}, expected {expected}")]
    UnexpectedFirstEvent { got: String, expected: &'static str },
    #[error("{url} refused the subscription with an ERROR event: {error}")]
    Refused { url: String, error: MasterError },
    #[error("not subscribed: call subscribe() first")]
    NotSubscribed,
    #[error("{url} did not answer {what} within {seconds} s")]
    TimedOut { url: String, what: &'static str, seconds: u64 },
}

impl ClientError {
    /// Whether retrying later can help (network trouble, 503, 5xx).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Http { .. } | Self::RecordIo(_) | Self::StreamEnded { .. } | Self::TimedOut { .. } => true,
            Self::Status { status, .. } => *status == 503 || *status >= 500,
            _ => false,
        }
    }

    /// The HTTP status the server answered, if it answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// Exponential backoff between retries: `initial`, doubling up to `max`.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self { initial: Duration::from_millis(100), max: Duration::from_secs(10) }
    }
}

impl Backoff {
    /// The delay before retry number `attempt` (0-based).
    pub fn delay(&self, attempt: u32) -> Duration {
        self.initial.saturating_mul(1u32 << attempt.min(16)).min(self.max)
    }
}

/// A stream of decoded events.
pub type EventStream<E> = Pin<Box<dyn Stream<Item = Result<E, ClientError>> + Send>>;

const MAX_REDIRECTS: usize = 5;

/// One HTTP endpoint (`/api/v1/scheduler` or `/api/v1/agent`) of a master,
/// following leader redirects.
#[derive(Debug, Clone)]
pub struct Endpoint {
    http: reqwest::Client,
    url: Arc<Mutex<String>>,
    masters: Masters,
    credentials: Option<(String, String)>,
    /// [`CALL_TIMEOUT`] unless set otherwise (tests).
    call_timeout: Duration,
}

impl Endpoint {
    /// `base` is the master's address, e.g. `http://127.0.0.1:5050`, or the
    /// addresses of an offer layer's replicas separated by commas (called in
    /// that order until one answers, see [`Masters::parse`]); `path` the
    /// API path.
    pub fn new(base: &str, path: &str, credentials: Option<(String, String)>) -> Self {
        let (masters, first) = Masters::parse(base);
        Self {
            http: crate::tls::http_client(None),
            url: Arc::new(Mutex::new(format!("{}{path}", first.trim_end_matches('/')))),
            masters,
            credentials,
            call_timeout: CALL_TIMEOUT,
        }
    }

    /// Gives up on a call (or a SUBSCRIBE's first event) after `timeout`
    /// instead of [`CALL_TIMEOUT`].
    pub fn with_call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// Also follow redirects to (and send the credentials to) these other
    /// replicas of the master, e.g. `https://offers-1:5050`.
    pub fn with_replicas(mut self, replicas: &[&str]) -> Self {
        self.masters = replicas.iter().fold(self.masters, |m, r| m.with(r));
        self
    }

    /// Trust `ca` only (an https master with a private CA).
    pub fn trusting(mut self, ca: Option<&crate::tls::CaFile>) -> Self {
        self.http = crate::tls::http_client(ca);
        self
    }

    /// The URL calls currently go to (after any redirect).
    pub fn url(&self) -> String {
        self.url.lock().map(|u| u.clone()).unwrap_or_default()
    }

    /// After the current master failed to answer (refused the connection,
    /// fell silent, or answered 5xx): calls go to the next configured
    /// replica from now on ([`Masters::next_after`]). Whether there was one.
    pub fn move_on(&self) -> Option<String> {
        let next = self.masters.next_after(&self.url())?;
        self.set_url(next.clone());
        Some(next)
    }

    /// Polls the other configured replicas every `every` (`GET
    /// /master/redirect`, one second each) and returns once one of them
    /// says it leads itself, having pointed calls at it: a replica says so
    /// only while it holds the offer layer's Lease, so a client whose
    /// leader went silent (stopped, cut off) follows the new leader as soon
    /// as there is one, without waiting out its heartbeats or a SUBSCRIBE
    /// timeout against the silent one. Never returns with one master.
    pub async fn leader_elsewhere(&self, every: Duration) -> String {
        loop {
            tokio::time::sleep(every).await;
            let current = self.url();
            for base in self.masters.others(&current) {
                let mut req = self.http.get(format!("{base}/master/redirect")).timeout(Duration::from_secs(1));
                if let Some((user, pass)) = &self.credentials {
                    req = req.basic_auth(user, Some(pass));
                }
                let Ok(resp) = req.send().await else { continue };
                let location = resp.headers().get("Location").and_then(|l| l.to_str().ok()).unwrap_or_default();
                if resp.status().is_redirection()
                    && let Some(next) = self.masters.claimed_lead(&current, &base, location)
                {
                    self.set_url(next.clone());
                    return next;
                }
            }
        }
    }

    fn set_url(&self, url: String) {
        if let Ok(mut u) = self.url.lock() {
            *u = url;
        }
    }

    /// POSTs `body` as JSON; `2xx` comes back as the response, anything else
    /// as [`ClientError::Status`]. With a `timeout` the whole exchange,
    /// body included, must end within it: for calls, never for a
    /// SUBSCRIBE, whose body is the event stream.
    pub async fn post<B: Serialize>(
        &self,
        body: &B,
        stream_id: Option<&str>,
        timeout: Option<Duration>,
    ) -> Result<reqwest::Response, ClientError> {
        let json = serde_json::to_vec(body).map_err(|source| ClientError::Json { source, record: String::new() })?;
        self.send(|url| {
            let req = self
                .http
                .post(url)
                .header("Content-Type", "application/json")
                .header("Accept", "application/json")
                .body(json.clone());
            let req = match timeout {
                Some(t) => req.timeout(t),
                None => req,
            };
            match stream_id {
                Some(id) => req.header(STREAM_ID_HEADER, id),
                None => req,
            }
        })
        .await
    }

    /// POSTs a call on subscription `stream_id`, within the call timeout.
    async fn call<B: Serialize>(&self, body: &B, stream_id: &str) -> Result<(), ClientError> {
        self.post(body, Some(stream_id), Some(self.call_timeout)).await.map(drop)
    }

    /// GETs the endpoint's JSON (an operator endpoint such as `/quota`),
    /// the whole exchange within `timeout`.
    pub async fn get_json<T: DeserializeOwned>(&self, timeout: Duration) -> Result<T, ClientError> {
        let resp = self.send(|url| self.http.get(url).header("Accept", "application/json").timeout(timeout)).await?;
        let url = self.url();
        let body = resp.bytes().await.map_err(|source| ClientError::Http { url, source })?;
        serde_json::from_slice(&body)
            .map_err(|source| ClientError::Json { source, record: String::from_utf8_lossy(&body).into_owned() })
    }

    /// Sends the request `build` makes for the current URL, with the
    /// credentials, following redirects as [`Masters`] allows.
    async fn send(&self, build: impl Fn(&str) -> reqwest::RequestBuilder) -> Result<reqwest::Response, ClientError> {
        for _ in 0..=MAX_REDIRECTS {
            let url = self.url();
            let mut req = build(&url);
            if let Some((user, pass)) = &self.credentials {
                req = req.basic_auth(user, Some(pass));
            }
            let resp = req.send().await.map_err(|source| ClientError::Http { url: url.clone(), source })?;
            let status = resp.status();
            if status.is_redirection() {
                let location = resp.headers().get("Location").and_then(|l| l.to_str().ok()).unwrap_or_default();
                let next = self.masters.follow(&url, location).map_err(|reason| ClientError::RedirectRefused {
                    url: url.clone(),
                    location: location.to_owned(),
                    reason,
                })?;
                self.set_url(next);
                continue;
            }
            if status.is_success() {
                return Ok(resp);
            }
            let body = resp.text().await.unwrap_or_default();
            return Err(ClientError::Status { url, status: status.as_u16(), body });
        }
        Err(ClientError::TooManyRedirects { url: self.url(), max: MAX_REDIRECTS, location: self.url() })
    }
}

/// Decodes a RecordIO response body into JSON events.
pub fn decode_events<E: DeserializeOwned + Send + 'static>(resp: reqwest::Response) -> EventStream<E> {
    let bytes = resp.bytes_stream().map_err(std::io::Error::other);
    let records = FramedRead::new(StreamReader::new(bytes), RecordIoCodec::default());
    Box::pin(records.map(|record| {
        let record = record?;
        serde_json::from_slice(&record)
            .map_err(|source| ClientError::Json { source, record: String::from_utf8_lossy(&record).into_owned() })
    }))
}

fn stream_id_of(resp: &reqwest::Response, url: &str) -> Result<String, ClientError> {
    resp.headers()
        .get(STREAM_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .ok_or_else(|| ClientError::MissingStreamId { url: url.to_owned() })
}

/// Retries `attempt` with `backoff` while it fails with a retryable error,
/// at most `max_attempts` times.
pub async fn with_backoff<T, F, Fut>(backoff: Backoff, max_attempts: u32, mut attempt: F) -> Result<T, ClientError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ClientError>>,
{
    let mut n = 0;
    loop {
        match attempt().await {
            Err(e) if e.is_retryable() && n + 1 < max_attempts => {
                tracing::debug!(error = %e, attempt = n, "retrying");
                tokio::time::sleep(backoff.delay(n)).await;
                n += 1;
            }
            other => return other,
        }
    }
}

/// What the first event of a subscription turned out to be.
enum FirstEvent<S> {
    Subscribed(S),
    /// An ERROR event with this message.
    Error(String),
    Other,
}

/// POSTs a SUBSCRIBE `call`, reads the first event, which `first_event`
/// tells apart (SUBSCRIBED and its payload, or ERROR and its message), and
/// remembers the stream id for later calls.
async fn open_subscription<C, E, S>(
    endpoint: &Endpoint,
    stream_id_slot: &Mutex<Option<String>>,
    call: &C,
    first_event: impl FnOnce(&mut E) -> FirstEvent<S>,
) -> Result<Subscription<S, E>, ClientError>
where
    C: Serialize,
    E: DeserializeOwned + Serialize + Send + 'static,
{
    // The stream itself has no deadline (heartbeats watch it); the answer
    // up to its first event has the call timeout, as a call does.
    let opened = async {
        let resp = endpoint.post(call, None, None).await?;
        let stream_id = stream_id_of(&resp, &endpoint.url())?;
        let mut events = decode_events::<E>(resp);
        let first = events.next().await.ok_or(ClientError::StreamEnded { expected: "SUBSCRIBED" })??;
        Ok::<_, ClientError>((stream_id, events, first))
    };
    let limit = endpoint.call_timeout;
    let opened = tokio::time::timeout(limit, opened)
        .await
        .map_err(|_| ClientError::TimedOut { url: endpoint.url(), what: "SUBSCRIBE", seconds: limit.as_secs() })
        .and_then(|r| r);
    let (stream_id, events, mut first) = match opened {
        Ok(opened) => opened,
        Err(e) => {
            // A master that does not answer gives way to the next replica:
            // the caller's next SUBSCRIBE goes there.
            if e.is_retryable()
                && let Some(next) = endpoint.move_on()
            {
                tracing::warn!(error = %e, next, "the master did not answer the SUBSCRIBE; trying the next replica");
            }
            return Err(e);
        }
    };
    let subscribed = match first_event(&mut first) {
        FirstEvent::Subscribed(s) => s,
        FirstEvent::Error(message) => {
            return Err(ClientError::Refused { url: endpoint.url(), error: MasterError::parse(&message) });
        }
        FirstEvent::Other => {
            let got = serde_json::to_string(&first).unwrap_or_default();
            return Err(ClientError::UnexpectedFirstEvent { got, expected: "SUBSCRIBED" });
        }
    };
    if let Ok(mut slot) = stream_id_slot.lock() {
        *slot = Some(stream_id.clone());
    }
    Ok(Subscription { subscribed, stream_id, events })
}

/// A framework's connection to a master's scheduler API.
#[derive(Debug, Clone)]
pub struct SchedulerClient {
    endpoint: Endpoint,
    stream_id: Arc<Mutex<Option<String>>>,
}

/// A live subscription: the SUBSCRIBED event and the events after it.
pub struct Subscription<S, E> {
    pub subscribed: S,
    pub stream_id: String,
    pub events: EventStream<E>,
}

impl SchedulerClient {
    /// A client of the master at `base` (e.g. `http://127.0.0.1:5050`).
    pub fn new(base: &str, credentials: Option<(String, String)>) -> Self {
        Self { endpoint: Endpoint::new(base, "/api/v1/scheduler", credentials), stream_id: Arc::default() }
    }

    /// Trust `ca` only (an https master with a private CA).
    pub fn trusting(mut self, ca: Option<&crate::tls::CaFile>) -> Self {
        self.endpoint = self.endpoint.trusting(ca);
        self
    }

    /// Also follow a redirect to these other replicas ([`Endpoint::with_replicas`]).
    pub fn with_replicas(mut self, replicas: &[&str]) -> Self {
        self.endpoint = self.endpoint.with_replicas(replicas);
        self
    }

    /// The current master fell silent: the next SUBSCRIBE goes to the next
    /// configured replica ([`Endpoint::move_on`]), if there is one.
    pub fn move_on(&self) -> Option<String> {
        self.endpoint.move_on()
    }

    /// Returns once another configured replica says it leads, calls pointed
    /// at it ([`Endpoint::leader_elsewhere`]).
    pub async fn leader_elsewhere(&self, every: Duration) -> String {
        self.endpoint.leader_elsewhere(every).await
    }

    /// [`Endpoint::with_call_timeout`].
    pub fn with_call_timeout(mut self, timeout: Duration) -> Self {
        self.endpoint = self.endpoint.with_call_timeout(timeout);
        self
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// SUBSCRIBEs once (set `framework_info.id` to re-subscribe) and waits
    /// for SUBSCRIBED. An ERROR first event becomes [`ClientError::Refused`].
    pub async fn subscribe(
        &self,
        framework_info: crate::FrameworkInfo,
    ) -> Result<Subscription<scheduler::Subscribed, scheduler::Event>, ClientError> {
        open_subscription(
            &self.endpoint,
            &self.stream_id,
            &scheduler::Call::subscribe(framework_info),
            |e: &mut scheduler::Event| match e.kind {
                scheduler::EventType::Subscribed => {
                    e.subscribed.take().map_or(FirstEvent::Other, FirstEvent::Subscribed)
                }
                scheduler::EventType::Error => FirstEvent::Error(e.error.take().map(|e| e.message).unwrap_or_default()),
                _ => FirstEvent::Other,
            },
        )
        .await
    }

    /// [`Self::subscribe`] retried with `backoff` through 503s and network
    /// errors, up to `max_attempts`.
    pub async fn subscribe_with_backoff(
        &self,
        framework_info: crate::FrameworkInfo,
        backoff: Backoff,
        max_attempts: u32,
    ) -> Result<Subscription<scheduler::Subscribed, scheduler::Event>, ClientError> {
        with_backoff(backoff, max_attempts, || self.subscribe(framework_info.clone())).await
    }

    /// Sends a non-SUBSCRIBE call on the current subscription.
    pub async fn call(&self, call: &scheduler::Call) -> Result<(), ClientError> {
        let stream_id = self.stream_id.lock().ok().and_then(|s| s.clone()).ok_or(ClientError::NotSubscribed)?;
        self.endpoint.call(call, &stream_id).await
    }
}

/// A node agent's connection to the offer layer's agent API.
#[derive(Debug, Clone)]
pub struct AgentClient {
    endpoint: Endpoint,
    stream_id: Arc<Mutex<Option<String>>>,
}

impl AgentClient {
    pub fn new(base: &str, credentials: Option<(String, String)>) -> Self {
        Self { endpoint: Endpoint::new(base, agent_api::PATH, credentials), stream_id: Arc::default() }
    }

    /// Trust `ca` only (an https offer layer with a private CA).
    pub fn trusting(mut self, ca: Option<&crate::tls::CaFile>) -> Self {
        self.endpoint = self.endpoint.trusting(ca);
        self
    }

    /// Also follow a redirect to these other replicas ([`Endpoint::with_replicas`]).
    pub fn with_replicas(mut self, replicas: &[&str]) -> Self {
        self.endpoint = self.endpoint.with_replicas(replicas);
        self
    }

    /// The current master fell silent: the next SUBSCRIBE goes to the next
    /// configured replica ([`Endpoint::move_on`]), if there is one.
    pub fn move_on(&self) -> Option<String> {
        self.endpoint.move_on()
    }

    /// Returns once another configured replica says it leads, calls pointed
    /// at it ([`Endpoint::leader_elsewhere`]).
    pub async fn leader_elsewhere(&self, every: Duration) -> String {
        self.endpoint.leader_elsewhere(every).await
    }

    /// SUBSCRIBEs and waits for SUBSCRIBED (which carries the agent id to persist).
    pub async fn subscribe(
        &self,
        agent_info: agent_api::AgentInfo,
        tasks: Vec<agent_api::ReportedTask>,
    ) -> Result<Subscription<agent_api::Subscribed, agent_api::Event>, ClientError> {
        open_subscription(
            &self.endpoint,
            &self.stream_id,
            &agent_api::Call::subscribe(agent_info, tasks),
            |e: &mut agent_api::Event| match e.kind {
                agent_api::EventType::Subscribed => {
                    e.subscribed.take().map_or(FirstEvent::Other, FirstEvent::Subscribed)
                }
                agent_api::EventType::Error => FirstEvent::Error(e.error.take().map(|e| e.message).unwrap_or_default()),
                _ => FirstEvent::Other,
            },
        )
        .await
    }

    /// POSTs an UPDATE on the current subscription.
    pub async fn update(
        &self,
        agent_id: &crate::AgentId,
        framework_id: &crate::FrameworkId,
        status: crate::TaskStatus,
    ) -> Result<(), ClientError> {
        let stream_id = self.stream_id.lock().ok().and_then(|s| s.clone()).ok_or(ClientError::NotSubscribed)?;
        let call = agent_api::Call::update(agent_id.clone(), framework_id.clone(), status);
        self.endpoint.call(&call, &stream_id).await
    }

    /// POSTs a WITHDRAW on the current subscription, listing the tasks the
    /// agent knows ([`agent_api::Withdraw`]); the offer layer then ends the
    /// stream.
    pub async fn withdraw(
        &self,
        agent_id: &crate::AgentId,
        tasks: Vec<agent_api::ReportedTask>,
    ) -> Result<(), ClientError> {
        let stream_id = self.stream_id.lock().ok().and_then(|s| s.clone()).ok_or(ClientError::NotSubscribed)?;
        self.endpoint.call(&agent_api::Call::withdraw(agent_id.clone(), tasks), &stream_id).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A master that takes the connection and never answers: a call and a
    /// SUBSCRIBE give up after the call timeout (a retryable error the
    /// driver and the agent reconnect on), not wait forever.
    #[tokio::test]
    async fn a_master_that_accepts_and_never_answers_times_calls_and_subscribes_out() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let silent = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((conn, _)) = listener.accept().await {
                held.push(conn);
            }
        });
        let client = SchedulerClient::new(&base, None).with_call_timeout(Duration::from_millis(300));
        if let Ok(mut slot) = client.stream_id.lock() {
            *slot = Some("s-1".into());
        }
        let call = scheduler::Call::new(scheduler::CallType::Revive, Some(crate::FrameworkId::new("F-1")));
        let err = tokio::time::timeout(Duration::from_secs(20), client.call(&call)).await.expect("the call ends");
        let err = err.expect_err("nobody answered");
        assert!(
            err.is_retryable() && matches!(err, ClientError::Http { ref source, .. } if source.is_timeout()),
            "{err}"
        );
        let info: crate::FrameworkInfo = serde_json::from_value(serde_json::json!({"user": "u", "name": "n"})).unwrap();
        let sub = tokio::time::timeout(Duration::from_secs(20), client.subscribe(info)).await.expect("SUBSCRIBE ends");
        let err = sub.err().expect("nobody answered");
        assert!(err.is_retryable() && matches!(err, ClientError::TimedOut { what: "SUBSCRIBE", .. }), "{err}");
        silent.abort();
    }

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let b = Backoff { initial: Duration::from_millis(100), max: Duration::from_secs(1) };
        assert_eq!(b.delay(0), Duration::from_millis(100));
        assert_eq!(b.delay(3), Duration::from_millis(800));
        assert_eq!(b.delay(30), Duration::from_secs(1));
    }
}
