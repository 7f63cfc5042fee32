//! HTTP: bearer-token authentication (`authn`) and RBAC authorization
//! (`authz`) of every request but the health endpoints, path routing in the
//! Kubernetes URL scheme, the request body limit, and rendering of answers
//! (JSON, Table, watch streams, Status errors), and the request's audit
//! event. Every request is answered; a bad one never takes the server down.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::api::{Api, Target, WriteOpts};
use crate::audit::{self, AuditLog, RequestAttributes};
use crate::authn::Authenticator;
use crate::authz::{self, PolicyCache};
use crate::discovery;
use crate::error::{ApiError, ApiResult};
use crate::patch::PatchType;
use crate::published::{self, V2_MEDIA_TYPES, V2Format};
use crate::query::Query;
use crate::rbac::{self, Attributes, Decision, User};
use crate::resource::Builtin;
use crate::reviews;
use crate::table::{self, Format};
use crate::views::{parse_body, view_cow};
use crate::watch::{self, WatchRequest};

/// Everything a request handler needs.
pub struct Shared {
    pub api: Arc<Api>,
    /// Who holds which token: the admin token and `--token-auth-file`.
    pub authn: Authenticator,
    /// The RBAC policy of the stored Roles and bindings.
    pub policy: PolicyCache,
    pub max_body: usize,
    pub server_address: String,
    pub watch_timeout: Duration,
    pub bookmark_every: Duration,
    /// `--audit-log`: every request, as a Kubernetes audit event.
    pub audit: Option<AuditLog>,
    /// The OpenAPI documents of the current registry snapshot.
    pub openapi: published::Cache,
}

pub fn router(shared: Arc<Shared>) -> Router {
    Router::new().fallback(handle).with_state(shared)
}

/// Percent-encode a query component (used by clients of this module's tests too).
pub fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn json_response(code: u16, v: &Value, content_type: &'static str) -> Response {
    let code = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    let mut r = (code, v.to_string()).into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn bytes_response(body: bytes::Bytes, content_type: &'static str) -> Response {
    let mut r = (StatusCode::OK, body).into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// `/openapi/v2` in the form the Accept header asks for, with kube-openapi's
/// `Vary` and `ETag` (and 304 for a matching `If-None-Match`).
async fn openapi_v2(
    shared: &Shared,
    types: &Arc<Vec<Arc<crate::resource::ResourceType>>>,
    headers: &HeaderMap,
) -> ApiResult<Response> {
    let format = V2Format::negotiate(header_str(headers, header::ACCEPT)).ok_or_else(|| {
        ApiError::new(
            406,
            "NotAcceptable",
            format!(
                "/openapi/v2 cannot be served as {:?}; ask for one of: {V2_MEDIA_TYPES}",
                header_str(headers, header::ACCEPT)
            ),
        )
    })?;
    let published = shared.openapi.get(types);
    let v2 = published.v2().await;
    let etag = format!("\"{}\"", v2.etag);
    let fresh =
        header_str(headers, header::IF_NONE_MATCH).split(',').any(|t| t.trim().trim_start_matches("W/") == etag);
    let mut r = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let body = match format {
            V2Format::Json => v2.json.clone(),
            V2Format::Protobuf => v2.protobuf.clone(),
        };
        bytes_response(body, format.content_type())
    };
    let h = r.headers_mut();
    h.insert(header::VARY, HeaderValue::from_static("Accept"));
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, v);
    }
    Ok(r)
}

fn ok(v: &Value) -> Response {
    json_response(200, v, "application/json")
}

fn unauthorized() -> Response {
    json_response(
        401,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "Unauthorized", "reason": "Unauthorized", "code": 401}),
        "application/json",
    )
}

fn header_str(h: &HeaderMap, name: header::HeaderName) -> &str {
    h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

async fn handle(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    let received = chrono::Utc::now();
    let (parts, body) = req.into_parts();
    let mut attrs = RequestAttributes::default();
    let response = authenticated(&shared, parts, body, &mut attrs).await;
    if let Some(log) = &shared.audit {
        log.record(&audit_event(received, &response, &attrs));
    }
    response.response
}

/// A response with what the audit event needs of its request.
struct Answered {
    response: Response,
    method: Method,
    uri: String,
    user_agent: String,
    peer: Option<SocketAddr>,
    user: Option<Arc<User>>,
}

fn audit_event(received: chrono::DateTime<chrono::Utc>, a: &Answered, attrs: &RequestAttributes) -> audit::Event {
    audit::Event {
        kind: "Event".into(),
        api_version: "audit.k8s.io/v1".into(),
        level: "Metadata".into(),
        audit_id: uuid::Uuid::new_v4().to_string(),
        stage: if attrs.watch { "ResponseStarted" } else { "ResponseComplete" }.into(),
        request_uri: a.uri.clone(),
        verb: attrs.verb.map(str::to_owned).unwrap_or_else(|| a.method.as_str().to_ascii_lowercase()),
        user: a.user.as_deref().map_or_else(audit::UserInfo::anonymous, audit::UserInfo::of),
        source_ips: a.peer.map(|p| p.ip().to_string()).into_iter().collect(),
        user_agent: a.user_agent.clone(),
        object_ref: attrs.object_ref.clone(),
        response_status: audit::ResponseStatus { code: a.response.status().as_u16() },
        request_received_timestamp: audit::timestamp(received),
        stage_timestamp: audit::timestamp(chrono::Utc::now()),
    }
}

async fn authenticated(
    shared: &Arc<Shared>,
    parts: axum::http::request::Parts,
    body: Body,
    attrs: &mut RequestAttributes,
) -> Answered {
    let path = parts.uri.path().to_string();
    let public = matches!(path.as_str(), "/healthz" | "/readyz" | "/livez" | "/version");
    let user = shared.authn.bearer(header_str(&parts.headers, header::AUTHORIZATION));
    let query = Query::parse(parts.uri.query());
    let mut answered = Answered {
        response: Response::default(),
        method: parts.method.clone(),
        // Under HTTP/2 the URI carries scheme and authority; the audit log wants the path.
        uri: parts.uri.path_and_query().map_or_else(|| path.clone(), |p| p.as_str().to_owned()),
        user_agent: header_str(&parts.headers, header::USER_AGENT).to_owned(),
        peer: parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|c| c.0),
        user: user.clone(),
    };
    answered.response = match user {
        _ if public => answer(shared, parts, body, &path, &query, &User::default(), attrs).await,
        None => unauthorized(),
        Some(user) => {
            let request = authz::attributes(&parts.method, &path, &query);
            // The admin needs no policy: no cache check on its requests.
            let decision = rbac::privileged(&user)
                .unwrap_or_else(|| shared.policy.current(&shared.api.store).authorize(&user, &request));
            match decision {
                Decision::Allowed(_) => answer(shared, parts, body, &path, &query, &user, attrs).await,
                Decision::Denied => refuse(shared, &user, &request, attrs),
            }
        }
    };
    answered
}

/// A request RBAC does not allow: 403, counted and audited like any answer.
fn refuse(shared: &Shared, user: &User, request: &Attributes, attrs: &mut RequestAttributes) -> Response {
    if let Attributes::Resource(r) = request {
        shared.api.metrics.request(&r.verb, &r.group, &r.resource, 403);
        *attrs = RequestAttributes {
            verb: audit::known_verb(&r.verb),
            watch: false,
            object_ref: Some(audit::ObjectRef {
                resource: r.resource.clone(),
                namespace: r.namespace.clone(),
                name: r.name.clone(),
                api_group: r.group.clone(),
                api_version: String::new(),
                subresource: r.subresource.clone(),
            }),
        };
    }
    tracing::debug!(user = %user.name, verb = request.verb(), "forbidden");
    authz::forbidden(user, request).into_response()
}

async fn answer(
    shared: &Arc<Shared>,
    parts: axum::http::request::Parts,
    body: Body,
    path: &str,
    query: &Query,
    user: &User,
    attrs: &mut RequestAttributes,
) -> Response {
    let body = match axum::body::to_bytes(body, shared.max_body).await {
        Ok(b) => b,
        Err(_) => {
            return ApiError::new(
                413,
                "RequestEntityTooLarge",
                format!("Request entity too large: limit is {}", shared.max_body),
            )
            .into_response();
        }
    };
    let started = std::time::Instant::now();
    let request = Incoming { method: &parts.method, path, query, headers: &parts.headers, body: &body, user };
    let response = match route(shared, &request, attrs).await {
        Ok(r) => r,
        Err(e) => {
            if e.code >= 500 {
                tracing::error!(method = %parts.method, path, error = %e, "request failed");
            }
            e.into_response()
        }
    };
    tracing::debug!(method = %parts.method, uri = %parts.uri, code = response.status().as_u16(), elapsed_ms = started.elapsed().as_millis() as u64, "request");
    response
}

/// One authenticated, authorized request, as routing sees it.
struct Incoming<'a> {
    method: &'a Method,
    path: &'a str,
    query: &'a Query,
    headers: &'a HeaderMap,
    body: &'a [u8],
    user: &'a User,
}

async fn route(shared: &Arc<Shared>, r: &Incoming<'_>, attrs: &mut RequestAttributes) -> ApiResult<Response> {
    let Incoming { method, path, query: q, headers, body, user } = *r;
    let segs: Vec<&str> = path.trim_matches('/').split('/').filter(|s| !s.is_empty()).collect();
    let accept = header_str(headers, header::ACCEPT);
    let types = shared.api.registry.all();
    let is_get = method == Method::GET;
    match segs.as_slice() {
        // Answered here rather than by `mpiswarm_health::router`, so that the
        // token check and the audit log above see these requests too.
        ["healthz" | "readyz" | "livez"] => return Ok(mpiswarm_health::Probe::pass("ok").into_response()),
        ["metrics"] if is_get => {
            shared.api.metrics.resource_version.set(shared.api.store.current_rv());
            return Ok(mpiswarm_health::encode(shared.api.metrics.registry()));
        }
        ["version"] => {
            return Ok(ok(
                &json!({"major": "1", "minor": "32", "gitVersion": "v1.32.0-mpiswarm", "gitCommit": "", "gitTreeState": "clean",
                "buildDate": "2025-01-01T00:00:00Z", "goVersion": "n/a", "compiler": "rustc", "platform": "linux/amd64"}),
            ));
        }
        ["api"] if is_get => {
            return Ok(if discovery::wants_aggregated(accept) {
                json_response(200, &discovery::aggregated(&types, true), discovery::AGGREGATED_CONTENT_TYPE)
            } else {
                ok(&discovery::api_versions(&shared.server_address))
            });
        }
        ["apis"] if is_get => {
            return Ok(if discovery::wants_aggregated(accept) {
                json_response(200, &discovery::aggregated(&types, false), discovery::AGGREGATED_CONTENT_TYPE)
            } else {
                ok(&discovery::api_group_list(&types))
            });
        }
        ["api", "v1"] if is_get => {
            return discovery::resource_list(&types, "", "v1").map(|v| ok(&v)).ok_or_else(ApiError::no_route);
        }
        ["apis", g] if is_get => return discovery::api_group(&types, g).map(|v| ok(&v)).ok_or_else(ApiError::no_route),
        ["apis", g, v] if is_get => {
            return discovery::resource_list(&types, g, v).map(|v| ok(&v)).ok_or_else(ApiError::no_route);
        }
        ["openapi", "v3"] if is_get => {
            return Ok(bytes_response(shared.openapi.get(&types).index(), "application/json"));
        }
        ["openapi", "v3", gv @ ..] if is_get => {
            let doc = shared.openapi.get(&types).v3(&gv.join("/")).ok_or_else(ApiError::no_route)?;
            return Ok(bytes_response(doc, "application/json"));
        }
        ["openapi", "v2"] if is_get => return openapi_v2(shared, &types, headers).await,
        _ => {}
    }
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] if !rest.is_empty() => ("", *v, rest),
        ["apis", g, v, rest @ ..] if !rest.is_empty() => (*g, *v, rest),
        _ => return Err(ApiError::no_route()),
    };
    let target = resolve(shared, group, version, rest)?;
    let verb = verb_of(method, &target, q);
    *attrs = RequestAttributes {
        verb: Some(verb),
        watch: verb == "watch",
        object_ref: Some(audit::ObjectRef {
            resource: target.rt.plural.clone(),
            namespace: target.namespace.clone().unwrap_or_default(),
            name: target.name.clone().unwrap_or_default(),
            api_group: target.rt.group.clone(),
            api_version: version.to_owned(),
            subresource: if target.status { "status".into() } else { String::new() },
        }),
    };
    let (group, resource) = (target.rt.group.clone(), target.rt.plural.clone());
    let result = if target.rt.builtin == Some(Builtin::Rbac)
        && matches!(*method, Method::POST | Method::PUT | Method::PATCH)
        && rbac::privileged(user).is_none()
    {
        match no_escalation(shared, r, &target) {
            Ok(()) => dispatch(shared, method, target, q, headers, body).await,
            Err(e) => Err(e),
        }
    } else if target.rt.builtin == Some(Builtin::Review) {
        review(shared, r, &target)
    } else {
        dispatch(shared, method, target, q, headers, body).await
    };
    let code = match &result {
        Ok(r) => r.status().as_u16(),
        Err(e) => e.code,
    };
    shared.api.metrics.request(verb, &group, &resource, code);
    result
}

/// The Kubernetes verb of a resource request, for metrics and logs.
fn verb_of(method: &Method, t: &Target, q: &Query) -> &'static str {
    match *method {
        Method::GET if q.flag("watch").unwrap_or(false) => "watch",
        Method::GET if t.name.is_some() => "get",
        Method::GET => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if t.name.is_some() => "delete",
        Method::DELETE => "deletecollection",
        _ => "other",
    }
}

fn resolve(shared: &Shared, group: &str, version: &str, rest: &[&str]) -> ApiResult<Target> {
    let reg = &shared.api.registry;
    let namespaced_path =
        rest.len() >= 3 && rest[0] == "namespaces" && !(group.is_empty() && rest.len() == 3 && rest[2] == "status");
    let (namespace, rest) = if namespaced_path { (Some(rest[1].to_string()), &rest[2..]) } else { (None, rest) };
    let (plural, name, sub) = match rest {
        [p] => (*p, None, None),
        [p, n] => (*p, Some(n.to_string()), None),
        [p, n, s] => (*p, Some(n.to_string()), Some(*s)),
        _ => return Err(ApiError::no_route()),
    };
    let rt = reg.find(group, version, plural).ok_or_else(ApiError::no_route)?;
    if namespace.is_some() && !rt.namespaced {
        return Err(ApiError::no_route());
    }
    if namespace.is_none() && rt.namespaced && name.is_some() {
        return Err(ApiError::no_route());
    }
    let status = match sub {
        None => false,
        Some("status") if rt.status_subresource => true,
        Some(_) => return Err(ApiError::no_route()),
    };
    Ok(Target { rt, namespace, name, status })
}

/// The object in a POST/PUT body: JSON (or YAML), or protobuf for the
/// built-in kinds kubectl's typed clients send that way.
fn object_body(t: &Target, headers: &HeaderMap, body: &[u8]) -> ApiResult<Value> {
    let ct = header_str(headers, header::CONTENT_TYPE);
    if crate::proto::is_protobuf(ct) {
        return crate::proto::decode(&t.rt, body);
    }
    check_json_content_type(headers)?;
    parse_body(&t.rt, body, false)
}

/// A review's body: JSON, or protobuf as kubectl's typed clients send it.
fn review_body(t: &Target, headers: &HeaderMap, body: &[u8]) -> ApiResult<Value> {
    if crate::proto::is_protobuf(header_str(headers, header::CONTENT_TYPE)) {
        return crate::proto::decode(&t.rt, body);
    }
    check_json_content_type(headers)?;
    parse_body(&t.rt, body, false)
}

fn check_json_content_type(headers: &HeaderMap) -> ApiResult<()> {
    let ct = header_str(headers, header::CONTENT_TYPE);
    if ct.contains("protobuf") || ct.contains("cbor") {
        return Err(ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got {ct:?})"
        )));
    }
    Ok(())
}

async fn dispatch(
    shared: &Arc<Shared>,
    method: &Method,
    t: Target,
    q: &Query,
    headers: &HeaderMap,
    body: &[u8],
) -> ApiResult<Response> {
    let api = &shared.api;
    let accept = header_str(headers, header::ACCEPT);
    let format = Format::from_accept(accept);
    let user_agent = header_str(headers, header::USER_AGENT);
    let opts = WriteOpts::new(q, user_agent);
    let (code, v) = match *method {
        Method::GET if t.name.is_some() && q.flag("watch")? => {
            // The deprecated single-object watch path: a watch filtered by name.
            let name = t.name.clone().unwrap_or_default();
            let q = q.with("fieldSelector", &format!("metadata.name={name}"));
            let t = Target { name: None, ..t };
            let w = WatchRequest::new(t, &q, format, shared.watch_timeout, shared.bookmark_every)?;
            return Ok(start_watch(api.clone(), w, format));
        }
        Method::GET if t.name.is_some() => {
            let v = api.get(&t)?;
            let rv = v["metadata"]["resourceVersion"].as_str().and_then(|r| r.parse().ok()).unwrap_or(0);
            match format {
                Format::Table => {
                    return Ok(json_response(200, &table::table(&t.rt, &[v], rv, None), format.content_type()));
                }
                Format::Metadata => return Ok(json_response(200, &table::partial(&v), format.content_type())),
                Format::Object => (200, v),
            }
        }
        Method::GET if q.flag("watch")? => {
            let w = WatchRequest::new(t, q, format, shared.watch_timeout, shared.bookmark_every)?;
            return Ok(start_watch(api.clone(), w, format));
        }
        Method::GET => {
            let page = api.list(&t, q)?;
            if format != Format::Object {
                let views: Vec<_> = page.items.iter().map(|o| view_cow(&t.rt, o)).collect();
                let body = match format {
                    Format::Table => table::table(&t.rt, &views, page.rv, page.next.as_deref()),
                    _ => table::partial_list(&views, page.rv, page.next.as_deref()),
                };
                return Ok(json_response(200, &body, format.content_type()));
            }
            let mut r = (StatusCode::OK, api.list_json(&t, &page)).into_response();
            r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            return Ok(r);
        }
        Method::POST => {
            if t.namespace.is_none() && t.rt.namespaced {
                return Err(ApiError::method_not_allowed(format!(
                    "POST to {} requires a namespace in the path",
                    t.rt.plural
                )));
            }
            api.create(&t, object_body(&t, headers, body)?, &opts).await?
        }
        Method::PUT => api.update(&t, object_body(&t, headers, body)?, &opts).await?,
        Method::PATCH => {
            let pt = PatchType::from_content_type(header_str(headers, header::CONTENT_TYPE))?;
            api.patch(&t, pt, body, &opts).await?
        }
        Method::DELETE => {
            let options =
                if body.iter().all(u8::is_ascii_whitespace) { json!({}) } else { parse_body(&t.rt, body, false)? };
            if let Some(p) = q.get("propagationPolicy").or(options["propagationPolicy"].as_str())
                && !matches!(p, "Background" | "Foreground" | "Orphan")
            {
                return Err(ApiError::bad_request(format!(
                    "unsupported propagationPolicy {p:?}: use Background, Foreground or Orphan"
                )));
            }
            if t.name.is_some() {
                api.delete(&t, &options, q).await?
            } else {
                api.delete_collection(&t, &options, q).await?
            }
        }
        _ => return Err(ApiError::method_not_allowed(format!("method {method} is not supported on this resource"))),
    };
    let mut r = json_response(code, &v, "application/json");
    for w in opts.warnings() {
        // RFC 7234 warn-text is a quoted string; kubectl prints "Warning: <text>".
        let text = format!("299 - \"{}\"", w.replace('\\', "\\\\").replace('"', "\\\""));
        if let Ok(h) = HeaderValue::from_str(&text) {
            r.headers_mut().append(header::WARNING, h);
        }
    }
    Ok(r)
}

/// A Role or binding written by someone outside `system:masters` grants
/// nothing its writer does not hold (`authz::escalation`).
fn no_escalation(shared: &Shared, r: &Incoming<'_>, t: &Target) -> ApiResult<()> {
    let object = if *r.method == Method::PATCH { None } else { Some(object_body(t, r.headers, r.body)?) };
    let policy = shared.policy.current(&shared.api.store);
    authz::escalation(&policy, r.user, &t.rt.plural, t.namespace.as_deref().unwrap_or_default(), object.as_ref())
}

/// A review is created and answered, never stored (`reviews`).
fn review(shared: &Shared, r: &Incoming<'_>, t: &Target) -> ApiResult<Response> {
    if *r.method != Method::POST || t.name.is_some() {
        return Err(ApiError::method_not_allowed(format!(
            "{} can only be created (POST to the collection); they are answered, never stored",
            t.rt.plural
        )));
    }
    let policy = shared.policy.current(&shared.api.store);
    let ctx = reviews::Context { user: r.user, policy: &policy, authn: &shared.authn };
    let answered = reviews::answer(t, review_body(t, r.headers, r.body)?, &ctx)?;
    Ok(json_response(201, &answered, "application/json"))
}

fn start_watch(api: Arc<Api>, w: WatchRequest, format: Format) -> Response {
    let (tx, rx) = mpsc::channel(256);
    tokio::spawn(watch::run(api, w, tx));
    let stream = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) });
    let mut r = Response::new(Body::from_stream(stream));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(format.content_type()));
    r
}
