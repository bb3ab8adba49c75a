//! The REST layer: parses a Kubernetes API path into request info, negotiates content, reads
//! bodies under the size limit, calls the one generic registry recipe and writes JSON answers,
//! watch streams and `Status` errors. No kind has its own handler.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use bytes::Bytes;
use futures::{Stream, StreamExt as _};
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use http_body_util::BodyExt as _;
use ocm_proto::selector::{FieldSelector, LabelSelector};
use ocm_proto::validation::FieldError;
use serde_json::{Value, json};

use crate::auth::authz;
use crate::auth::limits::Inflight;
use crate::machinery::discovery::Discovery;
use crate::machinery::error::ApiError;
use crate::machinery::metrics::{Metrics, RequestLabels};
use crate::machinery::object;
use crate::machinery::openapi::OpenApi;
use crate::machinery::scheme::ResourceType;
use crate::machinery::table::{self, Include, TableRequest};
use crate::serve::encoding;
use crate::store::cache::{CacheEvent, CachedObject, EventType, Msg, Start};
use crate::store::registry::{
    DeleteOptions, DeleteOutcome, FieldValidation, ListQuery, Patch, Registry, WriteOptions,
    parse_rv, selectors_match,
};

/// The largest request body (kube-apiserver's default, 3 MiB).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Who sent a request, as the authenticator established it. Shared, so a request carries it
/// without copying.
use crate::machinery::requester::{Identity, Requester};

/// Everything a request handler needs.
#[derive(Debug)]
pub struct ApiState {
    /// The registry.
    pub registry: Registry,
    /// Discovery documents.
    pub discovery: Discovery,
    /// OpenAPI v3 documents.
    pub openapi: OpenApi,
    /// Whether the server is ready (storage open, cache loaded, listening).
    pub ready: AtomicBool,
    /// Interval of watch bookmarks.
    pub bookmark_every: Duration,
    /// The in-flight request limits.
    pub inflight: Inflight,
    /// The authorizer (RBAC).
    pub access: Arc<crate::auth::access::Access>,
    /// The authenticator (front-proxy headers, certificates, tokens).
    pub authn: crate::auth::authn::Authenticator,
    /// The kube-apiserver asked about tokens this hub did not issue (aggregated mode).
    pub delegate_authn: Option<Arc<crate::auth::delegate::Delegate>>,
    /// The kube-apiserver asked about requests this hub's RBAC denies (aggregated mode).
    pub delegate_authz: Option<Arc<crate::auth::delegate::Delegate>>,
    /// The placement scheduler, for `placements/explain` (`None` without controllers).
    pub placement: Option<Arc<crate::controllers::placement::Scheduler>>,
    /// The hub's metrics (`/metrics`).
    pub metrics: Arc<Metrics>,
}

/// The router: every path goes through [`handle`].
pub fn router(state: Arc<ApiState>) -> axum::Router {
    axum::Router::new().fallback(handle).with_state(state)
}

fn json_response(code: StatusCode, body: impl Into<Body>) -> Response {
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body.into())
        .expect("static headers are valid")
}

/// 200 with `v` as its JSON body.
fn value_response(v: &Value) -> Result<Response, ApiError> {
    Ok(json_response(StatusCode::OK, serde_json::to_vec(v).map_err(ApiError::internal)?))
}

fn error_response(err: &ApiError) -> Response {
    let mut resp = json_response(
        StatusCode::from_u16(err.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        serde_json::to_vec(&err.to_status()).unwrap_or_default(),
    );
    if let Some(secs) = err.details.retry_after {
        resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    resp
}

fn text(code: StatusCode, body: &'static str) -> Response {
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Body::from(body))
        .expect("static headers are valid")
}

/// Query parameters (empty pairs ignored, last value wins).
#[derive(Debug, Default)]
struct Query(HashMap<String, String>);

impl Query {
    fn parse(raw: Option<&str>) -> Query {
        let mut map = HashMap::new();
        if let Some(raw) = raw {
            for (k, v) in form_urlencoded::parse(raw.as_bytes()) {
                if !k.is_empty() {
                    map.insert(k.into_owned(), v.into_owned());
                }
            }
        }
        Query(map)
    }

    fn get(&self, k: &str) -> Option<&str> {
        self.0.get(k).map(String::as_str)
    }

    fn flag(&self, k: &str) -> Result<bool, ApiError> {
        match self.get(k) {
            None | Some("") | Some("false") | Some("0") => Ok(false),
            Some("true") | Some("1") => Ok(true),
            Some(other) => {
                Err(ApiError::bad_request(format!("invalid boolean for {k}: {other:?}")))
            }
        }
    }

    /// The options of a write to `target` with these request headers.
    fn write_options(
        &self,
        target: &Target,
        headers: &HeaderMap,
    ) -> Result<WriteOptions, ApiError> {
        let dry_run = dry_run(self.get("dryRun"))?;
        let field_validation = match self.get("fieldValidation") {
            None | Some("") | Some("Warn") => FieldValidation::Warn,
            Some("Strict") => FieldValidation::Strict,
            Some("Ignore") => FieldValidation::Ignore,
            Some(other) => {
                let err = FieldError::new(
                    ocm_proto::validation::FieldErrorKind::NotSupported,
                    "fieldValidation",
                    Some(Value::String(other.into())),
                    r#"supported values: "Ignore", "Strict", "Warn""#,
                );
                return Err(ApiError::invalid_options("CreateOptions", &[err]));
            }
        };
        if let Some(fm) = self.get("fieldManager") {
            if fm.len() > 128 || fm.chars().any(|c| c.is_control()) {
                let err = FieldError::invalid(
                    "fieldManager",
                    fm,
                    "must be at most 128 printable characters",
                );
                return Err(ApiError::invalid_options("CreateOptions", &[err]));
            }
        }
        // Like kube-apiserver, a write without fieldManager is recorded under the product name
        // of its User-Agent (`kubectl/v1.32.0 ...` -> `kubectl`).
        let field_manager = match self.get("fieldManager").filter(|m| !m.is_empty()) {
            Some(m) => m.to_owned(),
            None => headers
                .get(header::USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .map(|ua| ua.split('/').next().unwrap_or("").chars().take(128).collect())
                .unwrap_or_default(),
        };
        Ok(WriteOptions {
            dry_run,
            field_validation,
            field_manager,
            force: false,
            api_version: target.rt.api_version(&target.version),
            requester: None,
        })
    }
}

fn dry_run(v: Option<&str>) -> Result<bool, ApiError> {
    match v {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(other) => {
            let err = FieldError::new(
                ocm_proto::validation::FieldErrorKind::NotSupported,
                "dryRun",
                Some(Value::String(other.into())),
                r#"supported values: "All""#,
            );
            Err(ApiError::invalid_options("CreateOptions", &[err]))
        }
    }
}

/// What a resource path names.
#[derive(Debug)]
struct Target {
    rt: Arc<ResourceType>,
    version: String,
    namespace: String,
    name: Option<String>,
    sub: Option<String>,
}

/// Splits `namespaces/<ns>/<resource>...` into the namespace and the rest; the namespace
/// object's own paths (`namespaces/<n>`, `namespaces/<n>/status|finalize`) stay whole.
/// Routing and authorization both use it, so they never disagree on what a path names.
fn namespace_scope<'a>(parts: &'a [&'a str]) -> (&'a str, &'a [&'a str]) {
    match parts {
        ["namespaces", ns, next, ..] if !matches!(*next, "status" | "finalize") => {
            (ns, &parts[2..])
        }
        _ => ("", parts),
    }
}

/// Parses `/api/v1/...` or `/apis/<g>/<v>/...` after the group-version.
fn resolve(
    state: &ApiState,
    group: &str,
    version: &str,
    parts: &[&str],
) -> Result<Target, ApiError> {
    let scheme = &state.registry.scheme;
    let (namespace, rest) = namespace_scope(parts);
    let namespace = namespace.to_owned();
    let rt = scheme.lookup(group, version, rest[0]).ok_or_else(ApiError::path_not_found)?;
    if !namespace.is_empty() && !rt.namespaced {
        return Err(ApiError::path_not_found());
    }
    if rest.len() > 3 {
        return Err(ApiError::path_not_found());
    }
    if rt.namespaced && namespace.is_empty() && rest.len() > 1 {
        return Err(ApiError::path_not_found());
    }
    let sub = rest.get(2).map(|s| (*s).to_owned());
    if let Some(s) = &sub {
        if rt.subresource(s).is_none() {
            return Err(ApiError::path_not_found());
        }
    }
    Ok(Target {
        rt: Arc::clone(rt),
        version: version.to_owned(),
        namespace,
        name: rest.get(1).map(|s| (*s).to_owned()),
        sub,
    })
}

/// The media types of an `Accept` header, in order, without quality sorting (clients list their
/// preference first).
fn accepts(headers: &HeaderMap) -> Vec<(String, HashMap<String, String>)> {
    let Some(raw) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return vec![("application/json".into(), HashMap::new())];
    };
    raw.split(',')
        .map(|part| {
            let mut pieces = part.split(';');
            let media = pieces.next().unwrap_or("").trim().to_ascii_lowercase();
            let params = pieces
                .filter_map(|p| {
                    let (k, v) = p.split_once('=')?;
                    Some((k.trim().to_owned(), v.trim().to_owned()))
                })
                .collect();
            (media, params)
        })
        .filter(|(m, _)| !m.is_empty())
        .collect()
}

/// Which aggregated discovery version the client asked for first, if any.
fn aggregated_wanted(headers: &HeaderMap) -> Option<usize> {
    for (media, params) in accepts(headers) {
        if media != "application/json" {
            continue;
        }
        match (
            params.get("g").map(String::as_str),
            params.get("v").map(String::as_str),
            params.get("as").map(String::as_str),
        ) {
            (Some("apidiscovery.k8s.io"), Some("v2"), Some("APIGroupDiscoveryList")) => {
                return Some(0);
            }
            (Some("apidiscovery.k8s.io"), Some("v2beta1"), Some("APIGroupDiscoveryList")) => {
                return Some(1);
            }
            (None, None, None) => return None,
            _ => {}
        }
    }
    None
}

/// The one path anonymous requests may read (then subject to RBAC).
const CLUSTER_INFO_PATH: &str = "/api/v1/namespaces/kube-public/configmaps/cluster-info";

/// The one entry point of every request.
pub async fn handle(State(state): State<Arc<ApiState>>, req: Request) -> Response {
    let started = Instant::now();
    // The query and the request's attributes, computed once for the metrics and the handler.
    let q = Query::parse(req.uri().query());
    let path = req.uri().path();
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
    let attrs = attributes(req.method(), path, &segments, &q);
    let labels = request_labels(&state, &req, &q, &attrs);
    let wanted = encoding::Wanted::of(req.headers());
    let resp = match serve(&state, req, q, attrs).await {
        Ok(resp) => resp,
        Err(err) => error_response(&err),
    };
    let resp = encoding::finish(resp, wanted).await;
    let code = resp.status().as_u16();
    if labels.verb == "WATCH" && resp.status() == StatusCode::OK {
        // Served until the stream ends: counted now, timed (and long-running) until then.
        let guard = state.metrics.long_running(labels, code);
        let (parts, body) = resp.into_parts();
        let body = body.into_data_stream().map(move |chunk| {
            let _held = &guard;
            chunk
        });
        return Response::from_parts(parts, Body::from_stream(body));
    }
    let size = axum::body::HttpBody::size_hint(resp.body()).exact();
    state.metrics.observe_request(&labels, code, started.elapsed(), size);
    resp
}

/// A request's metric labels, cleaned as kube-apiserver cleans them: resources this hub does not
/// serve, subresources they lack and unknown methods are not named (bounded label values).
fn request_labels(
    state: &ApiState,
    req: &Request,
    q: &Query,
    attrs: &crate::machinery::requester::Attributes,
) -> RequestLabels {
    let method = match *req.method() {
        Method::GET | Method::HEAD | Method::POST | Method::PUT | Method::PATCH => {
            req.method().as_str()
        }
        Method::DELETE | Method::OPTIONS | Method::CONNECT => req.method().as_str(),
        _ => "other",
    };
    let dry_run = if q.get("dryRun") == Some("All") { "All" } else { "" };
    let mut labels = RequestLabels { verb: method.to_owned(), dry_run, ..RequestLabels::default() };
    if !attrs.resource_request {
        return labels;
    }
    let Some(rt) =
        state.registry.scheme.lookup(&attrs.api_group, &attrs.api_version, &attrs.resource)
    else {
        return labels;
    };
    let apply = req
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/apply-patch"));
    labels.verb = match attrs.verb.as_str() {
        "get" => "GET",
        "list" => "LIST",
        "watch" => "WATCH",
        "create" => "POST",
        "update" => "PUT",
        "patch" if apply => "APPLY",
        "patch" => "PATCH",
        "delete" => "DELETE",
        "deletecollection" => "DELETECOLLECTION",
        _ => "other",
    }
    .to_owned();
    labels.scope = if !attrs.name.is_empty() || attrs.verb == "create" {
        "resource"
    } else if !attrs.namespace.is_empty() {
        "namespace"
    } else {
        "cluster"
    };
    if rt.subresources.iter().any(|sub| sub.name == attrs.subresource) {
        labels.subresource = attrs.subresource.clone();
    }
    labels.group = attrs.api_group.clone();
    labels.version = attrs.api_version.clone();
    labels.resource = attrs.resource.clone();
    labels
}

async fn serve(
    state: &Arc<ApiState>,
    mut req: Request,
    q: Query,
    attrs: crate::machinery::requester::Attributes,
) -> Result<Response, ApiError> {
    let path = req.uri().path().to_owned();
    match path.as_str() {
        "/healthz" | "/livez" | "/livez/ping" | "/healthz/ping" => {
            return Ok(text(StatusCode::OK, "ok"));
        }
        "/readyz" => {
            return Ok(if state.ready.load(Ordering::Acquire) {
                text(StatusCode::OK, "ok")
            } else {
                text(StatusCode::INTERNAL_SERVER_ERROR, "[-]storage not ready\nreadyz check failed")
            });
        }
        "/version" | "/version/" => {
            return Ok(json_response(StatusCode::OK, state.discovery.version.clone()));
        }
        _ => {}
    }
    let peer = req.extensions().get::<crate::auth::tls::PeerInfo>().cloned();
    let peer = peer.as_deref().unwrap_or(&crate::auth::tls::Peer::Anonymous);
    // Whether the host cluster named the user (front-proxy headers or its TokenReview): only
    // such users may be authorized by the host cluster's RBAC.
    let mut named_by_host = matches!(peer, crate::auth::tls::Peer::FrontProxy { .. });
    let user = match state.authn.authenticate(peer, req.headers_mut()) {
        Ok(user) => user,
        // A token this hub did not issue may be the cluster's (aggregated mode).
        Err(crate::auth::authn::Unauthenticated { token: Some(token) }) => {
            match &state.delegate_authn {
                Some(delegate) => {
                    named_by_host = true;
                    Identity::new(
                        delegate.authenticate(&token).await.ok_or_else(ApiError::unauthorized)?,
                    )
                }
                None => return Err(ApiError::unauthorized()),
            }
        }
        // Without any credential, only the hub's public cluster-info may be read (kube-
        // apiserver's anonymous authentication limited to that path, as kubeadm uses it).
        Err(crate::auth::authn::Unauthenticated { token: None })
            if matches!(peer, crate::auth::tls::Peer::Anonymous)
                && req.method() == axum::http::Method::GET
                && path == CLUSTER_INFO_PATH =>
        {
            Identity::new(crate::machinery::requester::UserInfo {
                name: authz::ANONYMOUS_USER.to_owned(),
                groups: vec![authz::UNAUTHENTICATED_GROUP.to_owned()],
                ..crate::machinery::requester::UserInfo::default()
            })
        }
        Err(_) => return Err(ApiError::unauthorized()),
    };
    let identity = state.access.impersonate(user, req.headers())?;
    let trimmed = path.trim_end_matches('/');
    let segments: Vec<&str> = trimmed.split('/').skip(1).collect();
    // `//` would name nothing here, yet could name something else to a parser that skipped
    // it: refused before anything reads the path.
    if segments.iter().any(|s| s.is_empty()) {
        return Err(ApiError::path_not_found());
    }
    let local = state.access.check(&identity, &attrs);
    if local.is_ok() && attrs.verb == "watch" {
        // Allowed by the hub's own RBAC: the watch is checked again when RBAC changes.
        req.extensions_mut().insert(Reauthorize(attrs.clone()));
    }
    if let Err(denied) = local {
        // What the hub's RBAC denies, the host cluster's may allow (aggregated mode), for users
        // the host named and for what the APIServices serve: the OCM groups and discovery. The
        // hub's own core objects (its Secrets, ServiceAccounts, RBAC) are not the host's.
        let delegable = named_by_host
            && (!attrs.resource_request
                || attrs.api_group.ends_with(".open-cluster-management.io"));
        let allowed = match &state.delegate_authz {
            Some(delegate) if delegable => delegate.allowed(&identity, &attrs).await?,
            _ => false,
        };
        if !allowed {
            return Err(denied);
        }
    }
    // Seats are taken once the request is authorized (design §3's order), so what a caller may
    // not do never occupies one.
    let _seat =
        state.inflight.admit(req.method(), attrs.verb == "watch", &identity, &attrs).await?;
    match segments.as_slice() {
        ["api"] => discovery_root(state, req.headers(), true),
        ["apis"] => discovery_root(state, req.headers(), false),
        ["apis", group] => match state.discovery.groups.get(*group) {
            Some(doc) => Ok(json_response(StatusCode::OK, doc.clone())),
            None => Err(ApiError::path_not_found()),
        },
        ["metrics"] => Ok(metrics_response(state).await),
        ["openapi", "v3"] => Ok(openapi_root(state, req.headers())),
        ["openapi", "v3", rest @ ..] => openapi_document(state, &rest.join("/"), &q),
        ["api", "v1"] => group_version(state, "", "v1"),
        ["apis", group, version] => group_version(state, group, version),
        ["api", "v1", rest @ ..] => {
            let target = resolve(state, "", "v1", rest)?;
            resource(state, target, req, q, &identity).await
        }
        ["apis", group, version, rest @ ..] => {
            let target = resolve(state, group, version, rest)?;
            resource(state, target, req, q, &identity).await
        }
        _ => Err(ApiError::path_not_found()),
    }
}

/// `/metrics`: Prometheus' text format, version 0.0.4.
async fn metrics_response(state: &ApiState) -> Response {
    let body =
        crate::serve::scrape::render(&state.metrics, &state.registry, state.inflight.load()).await;
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")
        .body(Body::from(body))
        .expect("static headers are valid")
}

fn discovery_root(state: &ApiState, headers: &HeaderMap, core: bool) -> Result<Response, ApiError> {
    if let Some(i) = aggregated_wanted(headers) {
        let agg = &state.discovery.aggregated[i];
        let (body, tag) = if core { &agg.api } else { &agg.apis };
        let content_type = format!(
            "application/json;g=apidiscovery.k8s.io;v={};as=APIGroupDiscoveryList",
            agg.version
        );
        let not_modified = if_none_match(headers, tag);
        let builder = Response::builder()
            .header(header::CONTENT_TYPE, content_type)
            .header(header::ETAG, tag.as_str())
            .header(header::VARY, "Accept")
            .header(header::CACHE_CONTROL, "public");
        let resp = if not_modified {
            builder.status(StatusCode::NOT_MODIFIED).body(Body::empty())
        } else {
            builder.status(StatusCode::OK).body(Body::from(body.clone()))
        };
        return resp.map_err(ApiError::internal);
    }
    let body = if core { &state.discovery.api } else { &state.discovery.apis };
    Ok(json_response(StatusCode::OK, body.clone()))
}

fn group_version(state: &ApiState, group: &str, version: &str) -> Result<Response, ApiError> {
    match state.discovery.resources.get(&format!("{group}/{version}")) {
        Some(doc) => Ok(json_response(StatusCode::OK, doc.clone())),
        None => Err(ApiError::path_not_found()),
    }
}

/// Whether the client's cached copy (`If-None-Match`) is the one tagged `etag`.
fn if_none_match(headers: &HeaderMap, etag: &str) -> bool {
    headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()).is_some_and(|v| v == etag)
}

/// `/openapi/v3`, with an ETag kubectl can revalidate.
fn openapi_root(state: &ApiState, headers: &HeaderMap) -> Response {
    let api = &state.openapi;
    let not_modified = if_none_match(headers, &api.root_etag);
    let builder = Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ETAG, api.root_etag.as_str());
    let resp = if not_modified {
        builder.status(StatusCode::NOT_MODIFIED).body(Body::empty())
    } else {
        builder.status(StatusCode::OK).body(Body::from(api.root.clone()))
    };
    resp.expect("static headers are valid")
}

/// `/openapi/v3/<api/v1 | apis/g/v>`: immutable when fetched by its current hash, a redirect
/// to the current URL for a stale hash (as kube-openapi's handler3 does).
fn openapi_document(state: &ApiState, key: &str, q: &Query) -> Result<Response, ApiError> {
    let doc = state.openapi.documents.get(key).ok_or_else(ApiError::path_not_found)?;
    let asked = q.get("hash");
    let current = format!("/openapi/v3/{key}?hash={}", doc.hash);
    let builder = Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ETAG, format!("\"{}\"", doc.hash))
        .header(header::VARY, "Accept");
    let resp = match asked {
        Some(h) if h == doc.hash => builder
            .header(header::CACHE_CONTROL, "public, immutable")
            .header(
                header::EXPIRES,
                httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(365 * 86_400)),
            )
            .status(StatusCode::OK)
            .body(Body::from(doc.body.clone())),
        Some(_) => builder
            .header(header::LOCATION, current)
            .status(StatusCode::MOVED_PERMANENTLY)
            .body(Body::empty()),
        None => builder.status(StatusCode::OK).body(Body::from(doc.body.clone())),
    };
    resp.map_err(ApiError::internal)
}

/// Reads the body under the limit and decodes JSON (or YAML).
async fn read_body(req: Request) -> Result<Value, ApiError> {
    let content_type = media_type(req.headers());
    let limited = http_body_util::Limited::new(req.into_body(), MAX_BODY_BYTES);
    let bytes = match limited.collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return Err(ApiError::too_large(format!(
                "the request body is over {MAX_BODY_BYTES} bytes"
            )));
        }
        Err(e) => return Err(ApiError::bad_request(format!("reading the body: {e}"))),
    };
    decode(&content_type, &bytes)
}

fn media_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
        .unwrap_or_default()
}

fn decode(content_type: &str, bytes: &Bytes) -> Result<Value, ApiError> {
    match content_type {
        ""
        | "application/json"
        | "application/json-patch+json"
        | "application/merge-patch+json"
        | "application/strategic-merge-patch+json" => serde_json::from_slice(bytes)
            .map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}"))),
        // An apply configuration is YAML, of which JSON (what kubectl and kube-rs send) is the
        // common case.
        "application/apply-patch+yaml" => match serde_json::from_slice(bytes) {
            Ok(v) => Ok(v),
            Err(_) => decode("application/yaml", bytes),
        },
        "application/yaml" | "application/x-yaml" | "text/yaml" => {
            let text = std::str::from_utf8(bytes)
                .map_err(|_| ApiError::bad_request("the YAML body is not UTF-8"))?;
            serde_saphyr::from_str(text)
                .map_err(|e| ApiError::bad_request(format!("the body is not valid YAML: {e}")))
        }
        crate::machinery::protobuf::MEDIA_TYPE => Ok(crate::machinery::protobuf::decode(bytes)?),
        other => Err(ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: \
             application/json, application/yaml, application/vnd.kubernetes.protobuf (got \
             {other:?})"
        ))),
    }
}

/// Checks the body's apiVersion and kind against the endpoint.
fn check_type(target: &Target, body: &Value) -> Result<(), ApiError> {
    check_type_is(body, &target.rt.api_version(&target.version), &target.rt.kind)
}

/// Checks a body's apiVersion and kind, when it names them, against `expected` and `kind`.
fn check_type_is(body: &Value, expected: &str, expected_kind: &str) -> Result<(), ApiError> {
    let api_version = body.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = body.get("kind").and_then(Value::as_str).unwrap_or("");
    if !api_version.is_empty() && api_version != expected {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({expected})"
        )));
    }
    if !kind.is_empty() && kind != expected_kind {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind ({expected_kind})"
        )));
    }
    Ok(())
}

/// Converts a body of the request's version to the storage version.
fn to_storage(target: &Target, body: Value) -> Result<Value, ApiError> {
    target.rt.to_storage(&target.version, body)
}

/// Converts a stored object to the request's version.
fn to_wire(target: &Target, obj: Value) -> Result<Value, ApiError> {
    target.rt.to_version(&target.version, obj)
}

/// Serialized form of a cached object at the request's version.
/// Whether a target's objects go out exactly as stored (no conversion).
fn is_storage_form(target: &Target) -> bool {
    target.rt.stored_as.is_none() && target.version == target.rt.storage_version
}

fn wire_bytes(target: &Target, obj: &CachedObject) -> Result<Bytes, ApiError> {
    if is_storage_form(target) {
        return Ok(obj.json());
    }
    let v = to_wire(target, Arc::unwrap_or_clone(obj.value()))?;
    Ok(Bytes::from(serde_json::to_vec(&v).map_err(ApiError::internal)?))
}

fn object_response(
    code: StatusCode,
    target: &Target,
    obj: Value,
    warnings: &[String],
    out: Output,
) -> Result<Response, ApiError> {
    let obj = match out {
        Output::Json => to_wire(target, obj)?,
        Output::Table(req) => {
            let obj = to_wire(target, obj)?;
            let meta = table::object_metadata(&obj);
            let columns = target.rt.strategy.columns(&target.version);
            table::build(&columns, vec![obj], meta, req, true)
        }
        // Metadata is the same at every version: no conversion of the whole object.
        Output::Metadata(version) => table::partial_metadata(&obj, version),
    };
    let mut resp = json_response(code, serde_json::to_vec(&obj).map_err(ApiError::internal)?);
    for w in warnings {
        let value = format!("299 - {:?}", w);
        if let Ok(v) = HeaderValue::from_str(&value) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    Ok(resp)
}

fn list_query(target: &Target, q: &Query) -> Result<ListQuery, ApiError> {
    let labels = match q.get("labelSelector").filter(|s| !s.is_empty()) {
        Some(s) => Some(LabelSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?),
        None => None,
    };
    let fields = match q.get("fieldSelector").filter(|s| !s.is_empty()) {
        Some(s) => {
            let sel = FieldSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?;
            for req in &sel.requirements {
                if !target.rt.selectable(&req.field) {
                    return Err(ApiError::bad_request(format!(
                        "field label not supported: {}",
                        req.field
                    )));
                }
            }
            Some(sel)
        }
        None => None,
    };
    let limit = match q.get("limit").filter(|s| !s.is_empty()) {
        Some(l) => l
            .parse::<i64>()
            .map_err(|_| ApiError::bad_request(format!("invalid limit: {l:?}")))?
            .max(0) as usize,
        None => 0,
    };
    let rv = q.get("resourceVersion").filter(|s| !s.is_empty()).map(str::to_owned);
    let rv_match = q.get("resourceVersionMatch").filter(|s| !s.is_empty()).map(str::to_owned);
    let cont = q.get("continue").filter(|s| !s.is_empty()).map(str::to_owned);
    let mut errs = Vec::new();
    if let Some(m) = &rv_match {
        if !matches!(m.as_str(), "Exact" | "NotOlderThan") {
            errs.push(FieldError::new(
                ocm_proto::validation::FieldErrorKind::NotSupported,
                "resourceVersionMatch",
                Some(Value::String(m.clone())),
                r#"supported values: "Exact", "NotOlderThan""#,
            ));
        } else if rv.is_none() {
            errs.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        } else if m == "Exact" && rv.as_deref() == Some("0") {
            errs.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
    }
    if cont.is_some() && (rv.as_deref().is_some_and(|r| r != "0") || rv_match.is_some()) {
        errs.push(FieldError::forbidden(
            "resourceVersionMatch",
            "resourceVersionMatch is forbidden when continue is provided",
        ));
    }
    if !errs.is_empty() {
        return Err(ApiError::invalid_options("ListOptions", &errs));
    }
    Ok(ListQuery {
        labels,
        fields,
        limit,
        continue_token: cont,
        resource_version: rv,
        resource_version_match: rv_match,
    })
}

fn delete_options(q: &Query, body: Option<Value>) -> Result<DeleteOptions, ApiError> {
    let body = body.unwrap_or(Value::Null);
    let pick = |k: &str| {
        body.get(k)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| q.get(k).map(str::to_owned))
    };
    let mut opts = DeleteOptions {
        uid: body.pointer("/preconditions/uid").and_then(Value::as_str).map(str::to_owned),
        resource_version: body
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_owned),
        propagation: pick("propagationPolicy"),
        dry_run: false,
    };
    if opts.propagation.is_none() {
        let orphan = body.get("orphanDependents").and_then(Value::as_bool).or(
            match q.get("orphanDependents") {
                Some("true") => Some(true),
                Some("false") => Some(false),
                _ => None,
            },
        );
        if orphan == Some(true) {
            opts.propagation = Some("Orphan".into());
        }
    }
    if let Some(p) = &opts.propagation {
        if !matches!(p.as_str(), "Orphan" | "Background" | "Foreground") {
            let err = FieldError::new(
                ocm_proto::validation::FieldErrorKind::NotSupported,
                "propagationPolicy",
                Some(Value::String(p.clone())),
                r#"supported values: "Foreground", "Background", "Orphan""#,
            );
            return Err(ApiError::invalid_options("DeleteOptions", &[err]));
        }
    }
    let dry = match body.get("dryRun").and_then(Value::as_array) {
        Some(list) => list.first().and_then(Value::as_str).map(str::to_owned),
        None => q.get("dryRun").map(str::to_owned),
    };
    opts.dry_run = dry_run(dry.as_deref())?;
    Ok(opts)
}

/// What a resource response carries: the objects as JSON, a `meta.k8s.io` Table of them, or
/// only their metadata (`PartialObjectMetadata[List]` at that `meta.k8s.io` version).
#[derive(Debug, Clone, Copy)]
enum Output {
    Json,
    Table(TableRequest),
    Metadata(&'static str),
}

/// Whether the `Accept` entry [`negotiate`] answers is `application/yaml`: the first entry that
/// is YAML without an `as=` transform, or a JSON one it serves (plain, or a meta.k8s.io
/// transform). The response is then re-encoded by [`crate::serve::encoding`].
pub(crate) fn yaml_negotiated(headers: &HeaderMap) -> bool {
    for (media, params) in accepts(headers) {
        let transform = params.get("as").map(String::as_str);
        match media.as_str() {
            "application/yaml" if transform.is_none() => return true,
            "application/json" | "*/*" | "application/*" => {
                // The same test of the meta group and version as `negotiate`.
                let meta = params.get("g").map(String::as_str) == Some("meta.k8s.io")
                    && matches!(params.get("v").map(String::as_str), Some("v1" | "v1beta1"));
                let known = matches!(
                    transform,
                    None | Some("Table" | "PartialObjectMetadata" | "PartialObjectMetadataList")
                );
                if transform.is_none() || (meta && known) {
                    return false;
                }
            }
            _ => {}
        }
    }
    false
}

/// Picks the first `Accept` entry the resource can answer (kube-api.md §4.1, §8): plain JSON, a
/// Table (`as=Table;g=meta.k8s.io;v=v1|v1beta1`, main resources only), or metadata only
/// (`as=PartialObjectMetadataList` for a list, `as=PartialObjectMetadata` otherwise); none is 406.
fn negotiate(
    target: &Target,
    headers: &HeaderMap,
    q: &Query,
    is_list: bool,
) -> Result<Output, ApiError> {
    let list = accepts(headers);
    if list.is_empty() {
        return Ok(Output::Json);
    }
    for (media, params) in list {
        let param = |k: &str| params.get(k).map(String::as_str);
        // YAML is the same object re-encoded on the way out (crate::serve::encoding).
        if media == "application/yaml" && param("as").is_none() {
            return Ok(Output::Json);
        }
        if !matches!(media.as_str(), "application/json" | "*/*" | "application/*") {
            continue;
        }
        let meta_version = match (param("g"), param("v")) {
            (Some("meta.k8s.io"), Some("v1")) => Some("v1"),
            (Some("meta.k8s.io"), Some("v1beta1")) => Some("v1beta1"),
            _ => None,
        };
        match param("as") {
            None | Some("") => return Ok(Output::Json),
            Some("Table") if matches!(target.sub.as_deref(), None | Some("status")) => {
                if let Some(version) = meta_version {
                    let include = Include::parse(q.get("includeObject"))?;
                    return Ok(Output::Table(TableRequest { version, include }));
                }
            }
            Some("PartialObjectMetadataList") if is_list => {
                if let Some(v) = meta_version {
                    return Ok(Output::Metadata(v));
                }
            }
            Some("PartialObjectMetadata") if !is_list => {
                if let Some(v) = meta_version {
                    return Ok(Output::Metadata(v));
                }
            }
            _ => {}
        }
    }
    let raw = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
    Err(ApiError::not_acceptable(raw))
}

/// The requester of a write, for admission.
pub(crate) fn requester(state: &ApiState, user: &Identity) -> Requester {
    Requester { user: Arc::clone(user), authorizer: Arc::clone(&state.access) as _ }
}

async fn resource(
    state: &Arc<ApiState>,
    target: Target,
    req: Request,
    q: Query,
    user: &Identity,
) -> Result<Response, ApiError> {
    let method = req.method().clone();
    if let Some(review) = target.rt.review {
        // Review kinds are created and answered, never stored.
        if method != Method::POST || target.name.is_some() || target.sub.is_some() {
            let verb = method.as_str().to_ascii_lowercase();
            return Err(ApiError::method_not_allowed(&verb, &target.rt.plural));
        }
        let body = read_body(req).await?;
        check_type(&target, &body)?;
        let answered =
            crate::auth::reviews::answer(review, &state.access, &state.authn, user, body)?;
        return Ok(json_response(
            StatusCode::CREATED,
            serde_json::to_vec(&answered).map_err(ApiError::internal)?,
        ));
    }
    let action =
        target.sub.as_deref().and_then(|s| target.rt.subresource(s)).and_then(|s| s.action);
    if let Some(action) = action {
        // Action subresources are answered, never stored: a request created, or a view read.
        let verb = method.as_str().to_ascii_lowercase();
        let wanted = if action.verb() == "get" { Method::GET } else { Method::POST };
        if method != wanted {
            let sub = target.sub.as_deref().unwrap_or_default();
            return Err(ApiError::method_not_allowed(
                &verb,
                &format!("{}/{sub}", target.rt.plural),
            ));
        }
        let name = target.name.as_deref().unwrap_or_default();
        let (code, answered) = match action {
            crate::machinery::scheme::Action::TokenRequest => {
                let body = read_body(req).await?;
                let (group, version, kind) = action.kind();
                check_type_is(&body, &format!("{group}/{version}"), kind)?;
                let rt = &target.rt;
                (
                    StatusCode::CREATED,
                    state.authn.token_request(rt, &target.namespace, name, &body).await?,
                )
            }
            crate::machinery::scheme::Action::ExplainPlacement => {
                let scheduler = state.placement.as_ref().ok_or_else(|| {
                    ApiError::unavailable(
                        "the placement controller is not running on this hub (--controllers)",
                    )
                })?;
                (StatusCode::OK, scheduler.explain(&target.rt, &target.namespace, name)?)
            }
        };
        return Ok(json_response(code, serde_json::to_vec(&answered).map_err(ApiError::internal)?));
    }
    let registry = &state.registry;
    let rt = Arc::clone(&target.rt);
    let sub = target.sub.as_deref().and_then(|s| rt.subresource(s)).cloned();
    let watching = q.flag("watch")?;
    let is_list = method == Method::GET && target.name.is_none() && !watching;
    let out = negotiate(&target, req.headers(), &q, is_list)?;
    match (&method, target.name.clone()) {
        (&Method::GET, None) => {
            if watching {
                let reauth =
                    req.extensions().get::<Reauthorize>().map(|r| (Arc::clone(user), r.0.clone()));
                return watch(state, target, &q, out, reauth).await;
            }
            let lq = list_query(&target, &q)?;
            if q.get("sendInitialEvents").is_some() {
                let err = FieldError::forbidden(
                    "sendInitialEvents",
                    "sendInitialEvents is forbidden for list",
                );
                return Err(ApiError::invalid_options("ListOptions", &[err]));
            }
            let page = registry.list(&rt, &target.namespace, &lq).await?;
            list_response(&target, page.items, page.rev, page.continue_token, out)
        }
        (&Method::GET, Some(name)) => {
            let rv = match q.get("resourceVersion").filter(|s| !s.is_empty()) {
                Some(rv) => Some(parse_rv(rv)?),
                None => None,
            };
            let obj = registry.get(&rt, &target.namespace, &name, rv).await?;
            object_response(StatusCode::OK, &target, obj, &[], out)
        }
        (&Method::POST, None) => {
            let mut opts = q.write_options(&target, req.headers())?;
            opts.requester = Some(requester(state, user));
            let body = read_body(req).await?;
            check_type(&target, &body)?;
            let body = to_storage(&target, body)?;
            let written = registry.create(&rt, &target.namespace, body, &opts).await?;
            object_response(StatusCode::CREATED, &target, written.object, &written.warnings, out)
        }
        (&Method::PUT, Some(name)) => {
            let mut opts = q.write_options(&target, req.headers())?;
            opts.requester = Some(requester(state, user));
            let body = read_body(req).await?;
            check_type(&target, &body)?;
            let body = to_storage(&target, body)?;
            let written =
                registry.update(&rt, &target.namespace, &name, body, sub.as_ref(), &opts).await?;
            object_response(StatusCode::OK, &target, written.object, &written.warnings, out)
        }
        (&Method::PATCH, Some(name)) => {
            let mut opts = q.write_options(&target, req.headers())?;
            opts.requester = Some(requester(state, user));
            let content_type = media_type(req.headers());
            let apply = content_type == "application/apply-patch+yaml";
            opts.force = q.flag("force")?;
            if q.get("force").is_some() && !apply {
                let err =
                    FieldError::forbidden("force", "may not be specified for non-apply patch");
                return Err(ApiError::invalid_options("PatchOptions", &[err]));
            }
            if apply && q.get("fieldManager").is_none_or(str::is_empty) {
                let err = FieldError::required("fieldManager", "is required for apply patch");
                return Err(ApiError::invalid_options("PatchOptions", &[err]));
            }
            let patch = match content_type.as_str() {
                "application/merge-patch+json" => Patch::Merge(read_body(req).await?),
                "application/strategic-merge-patch+json" => Patch::Strategic(read_body(req).await?),
                "application/apply-patch+yaml" => {
                    let config = read_body(req).await?;
                    check_type(&target, &config)?;
                    if config.get("apiVersion").is_none() || config.get("kind").is_none() {
                        return Err(ApiError::bad_request(
                            "an apply configuration must set apiVersion and kind",
                        ));
                    }
                    Patch::Apply(config)
                }
                "application/json-patch+json" => {
                    let v = read_body(req).await?;
                    let ops: json_patch::Patch = serde_json::from_value(v).map_err(|e| {
                        ApiError::bad_request(format!("the JSON patch is not valid: {e}"))
                    })?;
                    if ops.0.len() > 10_000 {
                        return Err(ApiError::too_large(
                            "the JSON patch has more than 10000 operations",
                        ));
                    }
                    Patch::Json(ops)
                }
                _ => {
                    return Err(ApiError::unsupported_media_type(
                        "the body of the request was in an unknown format - accepted media types \
                         include: application/json-patch+json, application/merge-patch+json, \
                         application/apply-patch+yaml, application/strategic-merge-patch+json",
                    ));
                }
            };
            let written =
                registry.patch(&rt, &target.namespace, &name, &patch, sub.as_ref(), &opts).await?;
            let code = if written.created { StatusCode::CREATED } else { StatusCode::OK };
            object_response(code, &target, written.object, &written.warnings, out)
        }
        (&Method::DELETE, Some(name)) => {
            if sub.is_some() {
                return Err(ApiError::method_not_allowed(
                    "delete",
                    &format!("{}/{}", rt.plural, target.sub.clone().unwrap_or_default()),
                ));
            }
            let body = read_optional_body(req).await?;
            let opts = delete_options(&q, body)?;
            match registry.delete(&rt, &target.namespace, &name, &opts).await? {
                DeleteOutcome::Marked(obj) => {
                    object_response(StatusCode::OK, &target, obj, &[], out)
                }
                DeleteOutcome::Gone(obj) => {
                    let status = json!({
                        "kind": "Status",
                        "apiVersion": "v1",
                        "metadata": {},
                        "status": "Success",
                        "details": {
                            "name": name,
                            "group": rt.group,
                            "kind": rt.plural,
                            "uid": object::uid(&obj),
                        },
                    });
                    value_response(&status)
                }
            }
        }
        (&Method::DELETE, None) => {
            let lq = list_query(&target, &q)?;
            let body = read_optional_body(req).await?;
            let opts = delete_options(&q, body)?;
            let deleted = registry.delete_collection(&rt, &target.namespace, &lq, &opts).await?;
            let items =
                deleted.into_iter().map(|o| to_wire(&target, o)).collect::<Result<Vec<_>, _>>()?;
            let list = object::json_object([
                ("kind", Value::from(rt.list_kind.as_str())),
                ("apiVersion", Value::from(rt.api_version(&target.version))),
                ("metadata", json!({})),
                ("items", Value::Array(items)),
            ]);
            value_response(&list)
        }
        (m, name) => {
            let verb = match (m.as_str(), name.is_some()) {
                ("POST", true) => "create",
                ("PUT", false) => "update",
                ("PATCH", false) => "patch",
                (other, _) => other,
            };
            Err(ApiError::method_not_allowed(verb, &rt.plural))
        }
    }
}

async fn read_optional_body(req: Request) -> Result<Option<Value>, ApiError> {
    let content_type = media_type(req.headers());
    let limited = http_body_util::Limited::new(req.into_body(), MAX_BODY_BYTES);
    let bytes = limited
        .collect()
        .await
        .map_err(|_| {
            ApiError::too_large(format!("the request body is over {MAX_BODY_BYTES} bytes"))
        })?
        .to_bytes();
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    decode(&content_type, &bytes).map(Some)
}

fn list_response(
    target: &Target,
    items: Vec<Arc<CachedObject>>,
    rev: u64,
    cont: Option<String>,
    out: Output,
) -> Result<Response, ApiError> {
    let mut meta = json!({"resourceVersion": rev.to_string()});
    if let Some(c) = cont {
        meta["continue"] = Value::String(c);
    }
    match out {
        Output::Json => {}
        Output::Table(req) => {
            let objects = items
                .iter()
                .map(|o| to_wire(target, Arc::unwrap_or_clone(o.value())))
                .collect::<Result<Vec<_>, _>>()?;
            let columns = target.rt.strategy.columns(&target.version);
            return value_response(&table::build(&columns, objects, meta, req, true));
        }
        Output::Metadata(version) => {
            let items =
                items.iter().map(|o| table::partial_metadata(&o.value(), version)).collect();
            return value_response(&object::json_object([
                ("kind", Value::from("PartialObjectMetadataList")),
                ("apiVersion", Value::from(format!("meta.k8s.io/{version}"))),
                ("metadata", meta),
                ("items", Value::Array(items)),
            ]));
        }
    }
    let head = json!({
        "kind": target.rt.list_kind,
        "apiVersion": target.rt.api_version(&target.version),
        "metadata": meta,
    });
    let mut out = serde_json::to_vec(&head).map_err(ApiError::internal)?;
    out.pop(); // the closing brace
    out.extend_from_slice(b",\"items\":[");
    for (i, obj) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&wire_bytes(target, obj)?);
    }
    out.extend_from_slice(b"]}");
    Ok(json_response(StatusCode::OK, out))
}

/// A watch request after validation.
/// A watch the hub's RBAC allowed, with what it was allowed for.
#[derive(Clone)]
struct Reauthorize(crate::machinery::requester::Attributes);

struct WatchRequest {
    /// Who watches and what was authorized, to check again on RBAC changes (`None`: allowed
    /// by the host cluster in aggregated mode, which the hub cannot re-ask cheaply).
    reauthorize: Option<(Identity, crate::machinery::requester::Attributes)>,
    target: Target,
    output: Output,
    /// The kind's Table columns at the request's version (looked up once per watch).
    columns: Arc<[table::Column]>,
    query: ListQuery,
    start: WatchStart,
    bookmarks: bool,
    send_initial: bool,
    timeout: Duration,
}

enum WatchStart {
    Consistent,
    Any,
    After(u64),
    NotOlderThan(u64),
}

async fn watch(
    state: &Arc<ApiState>,
    target: Target,
    q: &Query,
    output: Output,
    reauthorize: Option<(Identity, crate::machinery::requester::Attributes)>,
) -> Result<Response, ApiError> {
    let query = list_query_selectors_only(&target, q)?;
    let send_initial = q.flag("sendInitialEvents")?;
    let rv_match = q.get("resourceVersionMatch").filter(|s| !s.is_empty());
    let mut errs = Vec::new();
    if q.get("sendInitialEvents").is_some() && rv_match != Some("NotOlderThan") {
        errs.push(FieldError::forbidden(
            "sendInitialEvents",
            "sendInitialEvents is forbidden for watch unless resourceVersionMatch is set to NotOlderThan",
        ));
    }
    if rv_match.is_some() && q.get("sendInitialEvents").is_none() {
        errs.push(FieldError::forbidden(
            "resourceVersionMatch",
            "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        ));
    }
    if let Some(m) = rv_match {
        if m != "NotOlderThan" {
            errs.push(FieldError::new(
                ocm_proto::validation::FieldErrorKind::NotSupported,
                "resourceVersionMatch",
                Some(Value::String(m.to_owned())),
                r#"supported values: "NotOlderThan""#,
            ));
        }
    }
    if !errs.is_empty() {
        return Err(ApiError::invalid_options("ListOptions", &errs));
    }
    let rv = q.get("resourceVersion").filter(|s| !s.is_empty());
    let start = match (rv, send_initial) {
        (None, _) => WatchStart::Consistent,
        (Some("0"), _) => WatchStart::Any,
        (Some(rv), true) => WatchStart::NotOlderThan(parse_rv(rv)?),
        (Some(rv), false) => WatchStart::After(parse_rv(rv)?),
    };
    let timeout = match q.get("timeoutSeconds").filter(|s| !s.is_empty()) {
        // Capped at a year: a larger one would overflow the deadline.
        Some(t) => Duration::from_secs(
            t.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds: {t:?}")))?
                .min(365 * 24 * 3600),
        ),
        None => {
            use rand::Rng as _;
            Duration::from_secs(rand::rng().random_range(1800..3600))
        }
    };
    let wr = WatchRequest {
        reauthorize,
        columns: target.rt.strategy.columns(&target.version),
        target,
        output,
        query,
        start,
        bookmarks: q.flag("allowWatchBookmarks")?,
        send_initial,
        timeout,
    };
    let subscription = subscribe(state, &wr).await?;
    let body = Body::from_stream(watch_stream(Arc::clone(state), wr, subscription));
    let mut resp = json_response(StatusCode::OK, body);
    resp.extensions_mut().insert(encoding::Streaming);
    Ok(resp)
}

fn list_query_selectors_only(target: &Target, q: &Query) -> Result<ListQuery, ApiError> {
    let mut only = Query::default();
    for k in ["labelSelector", "fieldSelector"] {
        if let Some(v) = q.get(k) {
            only.0.insert(k.to_owned(), v.to_owned());
        }
    }
    list_query(target, &only)
}

fn event_line(kind: &str, object: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(object.len() + 32);
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    out.extend_from_slice(object);
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

fn bookmark_line(wr: &WatchRequest, rev: u64, initial_end: bool, headers: &mut bool) -> Bytes {
    let target = &wr.target;
    let mut meta = json!({"resourceVersion": rev.to_string(), "creationTimestamp": null});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let obj = json!({
        "kind": target.rt.kind,
        "apiVersion": target.rt.api_version(&target.version),
        "metadata": meta,
    });
    // A Table watch converts bookmarks too (a one-row Table), as kube-apiserver does.
    event_line("BOOKMARK", &table_or_json(wr, obj, headers).unwrap_or_default())
}

/// An event's object as this watch sends it: JSON at the request's version, or a one-row Table
/// whose `columnDefinitions` only the stream's first event carries.
/// One event's object as a watcher sees it. Renderings that every watcher of the same form
/// would make alike are made once per object and shared: JSON at another version, metadata,
/// and, for live events only, Table rows (their ages are of the moment; an object replayed
/// from the snapshot or history is rendered for its watcher, as kube-apiserver does).
fn event_object(
    wr: &WatchRequest,
    obj: &CachedObject,
    headers: &mut bool,
    live: bool,
) -> Result<Bytes, ApiError> {
    match wr.output {
        Output::Json if is_storage_form(&wr.target) => Ok(obj.json()),
        Output::Json => obj.rendered("json", &wr.target.version, || wire_bytes(&wr.target, obj)),
        // Metadata is the same at every version: no conversion of the whole object. Made once
        // per event, for every watcher.
        Output::Metadata(version) => obj.rendered(version, "", || {
            let meta = table::partial_metadata(&obj.value(), version);
            Ok(Bytes::from(serde_json::to_vec(&meta).map_err(ApiError::internal)?))
        }),
        // A watcher's first Table carries the column definitions; later live rows are shared.
        Output::Table(_) if *headers || !live => {
            let value = to_wire(&wr.target, Arc::unwrap_or_clone(obj.value()))?;
            Ok(Bytes::from(table_or_json(wr, value, headers)?))
        }
        Output::Table(req) => obj.rendered(table_form(req), &wr.target.version, || {
            let value = to_wire(&wr.target, Arc::unwrap_or_clone(obj.value()))?;
            Ok(Bytes::from(table_or_json(wr, value, &mut false)?))
        }),
    }
}

/// The name of a Table rendering, for [`CachedObject::rendered`].
fn table_form(req: TableRequest) -> &'static str {
    match (req.version, req.include) {
        ("v1", Include::Metadata) => "table/v1/metadata",
        ("v1", Include::Object) => "table/v1/object",
        ("v1", Include::None) => "table/v1/none",
        (_, Include::Metadata) => "table/v1beta1/metadata",
        (_, Include::Object) => "table/v1beta1/object",
        (_, Include::None) => "table/v1beta1/none",
    }
}

fn table_or_json(wr: &WatchRequest, obj: Value, headers: &mut bool) -> Result<Vec<u8>, ApiError> {
    let value = match wr.output {
        Output::Json => obj,
        Output::Table(req) => {
            let meta = table::object_metadata(&obj);
            let t = table::build(&wr.columns, vec![obj], meta, req, *headers);
            *headers = false;
            t
        }
        Output::Metadata(version) => table::partial_metadata(&obj, version),
    };
    serde_json::to_vec(&value).map_err(ApiError::internal)
}

fn error_line(err: &ApiError) -> Bytes {
    event_line("ERROR", &serde_json::to_vec(&err.to_status()).unwrap_or_default())
}

/// Turns one cache event into this watcher's line, applying its namespace and selectors:
/// an object that stops matching is sent as DELETED (its previous state at the new revision).
fn filter_event(
    wr: &WatchRequest,
    ev: &CacheEvent,
    headers: &mut bool,
    live: bool,
) -> Result<Option<Bytes>, ApiError> {
    let rt = &wr.target.rt;
    let prefix = rt.namespace_prefix(&wr.target.namespace);
    if !ev.object.key.starts_with(&prefix) {
        return Ok(None);
    }
    let labels = wr.query.labels.as_ref();
    let fields = wr.query.fields.as_ref();
    let now = selectors_match(rt, &ev.object, labels, fields);
    let before = ev.prev.as_ref().is_some_and(|p| selectors_match(rt, p, labels, fields));
    let line = match ev.kind {
        EventType::Added if now => {
            Some(event_line("ADDED", &event_object(wr, &ev.object, headers, live)?))
        }
        EventType::Modified if now && before => {
            Some(event_line("MODIFIED", &event_object(wr, &ev.object, headers, live)?))
        }
        EventType::Modified if now => {
            Some(event_line("ADDED", &event_object(wr, &ev.object, headers, live)?))
        }
        EventType::Modified if before => {
            let prev = ev.prev.as_ref().expect("before implies prev");
            let mut value = Arc::unwrap_or_clone(prev.value());
            object::set_resource_version(&mut value, ev.rev);
            let gone = CachedObject::new(ev.object.key.clone(), value, ev.rev);
            // A fresh object, seen by this watcher only: nothing to share.
            Some(event_line("DELETED", &event_object(wr, &gone, headers, false)?))
        }
        EventType::Deleted if now || before => {
            Some(event_line("DELETED", &event_object(wr, &ev.object, headers, live)?))
        }
        _ => None,
    };
    Ok(line)
}

/// Waits until the cache can serve the watch's start (a future resourceVersion is an HTTP 504
/// before any byte is streamed, as kube-apiserver answers), then registers it. A start older
/// than the kept history is not an HTTP error: it becomes the stream's one ERROR event.
async fn subscribe(
    state: &ApiState,
    wr: &WatchRequest,
) -> Result<Result<crate::store::cache::Subscription, ApiError>, ApiError> {
    let cache = &state.registry.cache;
    let start = match wr.start {
        WatchStart::Consistent => {
            cache.sync().await?;
            Start::Snapshot
        }
        WatchStart::Any => Start::Snapshot,
        WatchStart::NotOlderThan(n) | WatchStart::After(n) => {
            if !cache.wait_for(n, Duration::from_secs(3)).await {
                return Err(ApiError::too_large_resource_version(n, cache.revision()));
            }
            if matches!(wr.start, WatchStart::After(_)) { Start::After(n) } else { Start::Snapshot }
        }
    };
    let only = wr.query.single_key(&wr.target.rt, &wr.target.namespace);
    Ok(cache.subscribe(&wr.target.rt.prefix, start, only.as_deref()))
}

fn watch_stream(
    state: Arc<ApiState>,
    wr: WatchRequest,
    subscription: Result<crate::store::cache::Subscription, ApiError>,
) -> impl Stream<Item = Result<Bytes, Infallible>> {
    async_stream::stream! {
        let deadline = tokio::time::Instant::now() + wr.timeout;
        let mut sub = match subscription {
            Ok(s) => s,
            Err(e) => { yield Ok(error_line(&e)); return; }
        };
        let mut rev = sub.rev;
        let mut headers = true;
        let sent = state.metrics.watch_events(&wr.target.rt, &wr.target.version);
        for ev in std::mem::take(&mut sub.initial) {
            match filter_event(&wr, &ev, &mut headers, false) {
                Ok(Some(line)) => { sent.sent(line.len()); yield Ok(line) }
                Ok(None) => {}
                Err(e) => { yield Ok(error_line(&e)); return; }
            }
        }
        if wr.send_initial {
            yield Ok(bookmark_line(&wr, rev, true, &mut headers));
        }
        let mut last_bookmark = tokio::time::Instant::now();
        let final_bookmark = deadline.checked_sub(Duration::from_secs(2));
        let mut final_sent = false;
        let mut rbac = state.access.changes();
        loop {
            let final_at = final_bookmark.filter(|_| wr.bookmarks && !final_sent).unwrap_or(deadline);
            tokio::select! {
                Ok(()) = rbac.changed(), if wr.reauthorize.is_some() => {
                    if let Some((user, attrs)) = &wr.reauthorize {
                        if let Err(e) = state.access.check(user, attrs) {
                            yield Ok(error_line(&e));
                            return;
                        }
                    }
                }
                msg = sub.live.recv() => match msg {
                    None => return,
                    Some(Msg::Event(ev)) => {
                        if ev.rev <= rev { continue; }
                        rev = ev.rev;
                        match filter_event(&wr, &ev, &mut headers, true) {
                            Ok(Some(line)) => { sent.sent(line.len()); yield Ok(line) }
                            Ok(None) => {}
                            Err(e) => { yield Ok(error_line(&e)); return; }
                        }
                    }
                    Some(Msg::Progress(r)) => {
                        if r > rev { rev = r; }
                        if wr.bookmarks && last_bookmark.elapsed() >= state.bookmark_every {
                            last_bookmark = tokio::time::Instant::now();
                            yield Ok(bookmark_line(&wr, rev, false, &mut headers));
                        }
                    }
                },
                _ = tokio::time::sleep_until(final_at) => {
                    if final_at >= deadline { return; }
                    final_sent = true;
                    yield Ok(bookmark_line(&wr, rev, false, &mut headers));
                }
            }
        }
    }
}

/// The authorization attributes of a request (Kubernetes' RequestInfo): resource requests under
/// `/api/v1/...` and `/apis/<group>/<version>/...`, everything else (discovery documents,
/// OpenAPI, `/version`, `/metrics`) a non-resource request with the lower-case HTTP method.
fn attributes(
    method: &Method,
    path: &str,
    segments: &[&str],
    q: &Query,
) -> crate::machinery::requester::Attributes {
    let non_resource = || {
        crate::machinery::requester::Attributes::non_resource(
            &method.as_str().to_ascii_lowercase(),
            path,
        )
    };
    let (group, version, rest) = match segments {
        ["api", version, rest @ ..] if !rest.is_empty() => ("", *version, rest),
        ["apis", group, version, rest @ ..] if !rest.is_empty() => (*group, *version, rest),
        _ => return non_resource(),
    };
    let (namespace, parts) = namespace_scope(rest);
    let (resource, name, subresource) = match parts {
        [r] => (*r, "", ""),
        [r, n] => (*r, *n, ""),
        [r, n, s, ..] => (*r, *n, *s),
        [] => ("", "", ""),
    };
    // The namespace object is in its own namespace (Kubernetes' RequestInfo).
    let namespace = if resource == "namespaces" && namespace.is_empty() { name } else { namespace };
    let mut name = name.to_owned();
    let verb = match (method.as_str(), name.is_empty()) {
        // A named GET is a get, whatever `watch` says (it is served as one).
        ("GET" | "HEAD", false) => "get",
        ("GET" | "HEAD", true) if q.flag("watch").unwrap_or(false) => "watch",
        ("GET" | "HEAD", true) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "deletecollection",
        ("DELETE", false) => "delete",
        _ => return non_resource(),
    };
    // A list or watch narrowed to one name by `fieldSelector=metadata.name=<n>` is authorized
    // as that name (so resourceNames rules allow `kubectl get x -w`).
    if matches!(verb, "list" | "watch") {
        let selector = q.get("fieldSelector").and_then(|f| FieldSelector::parse(f).ok());
        let pinned = selector.as_ref().and_then(|s| s.pinned("metadata.name"));
        if let Some(n) = pinned.filter(|n| object::check_path_segment(n).is_ok()) {
            name = n.to_owned();
        }
    }
    let mut attrs =
        crate::machinery::requester::Attributes::resource(verb, group, resource, namespace, &name);
    attrs.api_version = version.to_owned();
    attrs.subresource = subresource.to_owned();
    attrs
}
