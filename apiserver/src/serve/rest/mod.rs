//! The REST layer: parses a Kubernetes API path into request info, negotiates content, reads
//! bodies under the size limit, calls the one generic registry recipe and writes JSON answers,
//! watch streams and `Status` errors. No kind has its own handler.

mod backup;
mod body;
mod documents;
mod duplicates;
mod encoding;
mod proxy;
mod request;
mod resource;
mod watch;

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
use crate::auth::visibility::Visibility;
use crate::machinery::discovery::Discovery;
use crate::machinery::error::ApiError;
use crate::machinery::metrics::{Metrics, RequestLabels};
use crate::machinery::object;
use crate::machinery::openapi::OpenApi;
use crate::machinery::scheme::ResourceType;
use crate::machinery::table::{self, Include, TableRequest};

use crate::store::cache::{CacheEvent, CachedObject, EventType, Msg, Start};
use crate::store::registry::{
    DeleteOptions, DeleteOutcome, FieldValidation, ListQuery, Patch, Registry, WriteOptions,
    parse_rv, selectors_match,
};

use crate::machinery::requester::{Identity, Requester};

use body::*;
use documents::*;
use request::*;
use resource::*;
use watch::*;

/// The largest request body (kube-apiserver's default, 3 MiB).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

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
    /// The controllers' views (`placements/explain`, `manifestworkreplicasets/render`).
    pub views: crate::controllers::Views,
    /// The hub's metrics (`/metrics`).
    pub metrics: Arc<Metrics>,
    /// The backend the store runs on (`memory`, `sled`, `etcd`), as a backup records it.
    pub storage_backend: &'static str,
    /// The cluster proxy's open tunnels (`serve::tunnel`).
    pub tunnels: Arc<crate::serve::tunnel::Tunnels>,
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

/// A `Status` answer for `err`, with `Retry-After` when it names one.
pub fn error_response(err: &ApiError) -> Response {
    let mut resp = json_response(
        StatusCode::from_u16(err.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        serde_json::to_vec(&err.to_status()).unwrap_or_default(),
    );
    if let Some(secs) = err.details.retry_after {
        resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    resp
}

fn text(code: StatusCode, body: impl Into<Body>) -> Response {
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(body.into())
        .expect("static headers are valid")
}

/// Whether an API path names the cluster proxy subresource (`managedclusters/{name}/proxy/...`).
pub fn is_proxy_path(path: &str) -> bool {
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    matches!(
        segments.as_slice(),
        ["apis", proxy::GROUP, proxy::VERSION, proxy::RESOURCE, _, proxy::SUBRESOURCE, ..]
    )
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
    if let Some(answer) = public_endpoint(state, &path).await {
        return Ok(answer);
    }
    // A cluster's own ManagedServiceAccount token, proxied to that cluster, which decides.
    if let Some(token) = proxy::cluster_token(state, &req, &attrs) {
        let cluster = attrs.name.clone();
        return proxy::proxy(state, &cluster, req, proxy::Caller::Token(token)).await;
    }
    let (user, named_by_host) = authenticate(state, &mut req, &path).await?;
    let identity = state.access.impersonate(user, req.headers())?;
    let trimmed = path.trim_end_matches('/');
    let segments: Vec<&str> = trimmed.split('/').skip(1).collect();
    // `//` would name nothing here, yet could name something else to a parser that skipped
    // it: refused before anything reads the path.
    if segments.iter().any(|s| s.is_empty()) {
        return Err(ApiError::path_not_found());
    }
    authorize(state, &mut req, &identity, &attrs, named_by_host).await?;
    // Seats are taken once the request is authorized (design §3's order), so what a caller may
    // not do never occupies one.
    // Watches and proxied requests are long-running, as in kube-apiserver: they take no seat.
    let long_running = attrs.verb == "watch" || proxy::is_proxy(&attrs);
    let _seat = state.inflight.admit(req.method(), long_running, &identity, &attrs).await?;
    route(state, &segments, req, q, &identity).await
}

/// The health endpoints and `/version`, answered to anyone.
async fn public_endpoint(state: &ApiState, path: &str) -> Option<Response> {
    match path {
        "/livez/ping" | "/healthz/ping" => Some(text(StatusCode::OK, "ok")),
        "/healthz" | "/livez" => Some(livez(state)),
        "/readyz" => Some(readyz(state).await),
        "/version" | "/version/" => {
            Some(json_response(StatusCode::OK, state.discovery.version.clone()))
        }
        _ => None,
    }
}

/// `/livez`: alive unless the store will not serve again until the hub opens it again (an
/// embedded store that could not heal in place after a failed write), so a supervisor that
/// restarts on a failing liveness probe (systemd, a kubelet) brings the hub back, its
/// acknowledged writes intact, or has it refuse to start naming the damage. A store that only
/// cannot write now (a full disk) heals without a restart: the hub stays alive.
fn livez(state: &ApiState) -> Response {
    if state.registry.storage.failed() {
        let cause = state.registry.storage.cannot_write().unwrap_or_default();
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "[-]storage failed: the store will not recover until the hub restarts: {cause}\n\
                 livez check failed"
            ),
        );
    }
    text(StatusCode::OK, "ok")
}

/// How long `/readyz` waits for the store to answer (kube-apiserver's etcd check waits 2 s).
const READYZ_STORE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// `/readyz`, as kube-apiserver words it: ready once started and while the store answers (its
/// current revision within 2 s) and can write; a store that cannot serve (etcd down) or cannot
/// write (a full disk: reads still served) makes the hub not ready, so a load balancer sends
/// requests to another replica.
async fn readyz(state: &ApiState) -> Response {
    if !state.ready.load(Ordering::Acquire) {
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "[-]storage not ready\nreadyz check failed",
        );
    }
    if let Some(cause) = state.registry.storage.cannot_write() {
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("[-]storage failed: the store cannot write: {cause}\nreadyz check failed"),
        );
    }
    let revision = state.registry.storage.current_revision();
    match tokio::time::timeout(READYZ_STORE_TIMEOUT, revision).await {
        Ok(Ok(_)) => text(StatusCode::OK, "ok"),
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "readyz: the store does not answer");
            text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "[-]storage failed: the store cannot serve\nreadyz check failed",
            )
        }
        Err(_) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "[-]storage failed: the store did not answer within 2s\nreadyz check failed",
        ),
    }
}

/// Who sent the request, and whether the host cluster named them (front-proxy headers or its
/// TokenReview): only such users may be authorized by the host cluster's RBAC.
async fn authenticate(
    state: &ApiState,
    req: &mut Request,
    path: &str,
) -> Result<(Identity, bool), ApiError> {
    let peer = req.extensions().get::<crate::auth::tls::PeerInfo>().cloned();
    let peer = peer.as_deref().unwrap_or(&crate::auth::tls::Peer::Anonymous);
    let named_by_host = matches!(peer, crate::auth::tls::Peer::FrontProxy { .. });
    match state.authn.authenticate(peer, req.headers_mut()) {
        Ok(user) => Ok((user, named_by_host)),
        // A token this hub did not issue may be the cluster's (aggregated mode).
        Err(crate::auth::authn::Unauthenticated { token: Some(token) }) => {
            let delegate = state.delegate_authn.as_ref().ok_or_else(ApiError::unauthorized)?;
            let user = delegate.authenticate(&token).await.ok_or_else(ApiError::unauthorized)?;
            Ok((Identity::new(user), true))
        }
        // Without any credential, only the hub's public cluster-info may be read (kube-
        // apiserver's anonymous authentication limited to that path, as kubeadm uses it).
        Err(crate::auth::authn::Unauthenticated { token: None })
            if matches!(peer, crate::auth::tls::Peer::Anonymous)
                && req.method() == axum::http::Method::GET
                && path == CLUSTER_INFO_PATH =>
        {
            let anonymous = crate::machinery::requester::UserInfo {
                name: authz::ANONYMOUS_USER.to_owned(),
                groups: vec![authz::UNAUTHENTICATED_GROUP.to_owned()],
                ..crate::machinery::requester::UserInfo::default()
            };
            Ok((Identity::new(anonymous), named_by_host))
        }
        Err(_) => Err(ApiError::unauthorized()),
    }
}

/// Decides the request by the hub's RBAC and, for what it denies, by the host cluster's
/// (aggregated mode); a watch the hub's RBAC allowed is marked to be checked again when RBAC
/// changes.
async fn authorize(
    state: &ApiState,
    req: &mut Request,
    identity: &Identity,
    attrs: &crate::machinery::requester::Attributes,
    named_by_host: bool,
) -> Result<(), ApiError> {
    let Err(denied) = state.access.check(identity, attrs) else {
        if attrs.verb == "watch" {
            req.extensions_mut().insert(Reauthorize(attrs.clone()));
        }
        return Ok(());
    };
    // The host cluster decides for users it named and for what the APIServices serve: the
    // OCM groups, SIG-multicluster's ClusterProfiles and discovery. The hub's own core objects
    // (its Secrets, ServiceAccounts, RBAC) are not the host's.
    let served_group = attrs.api_group.ends_with(".open-cluster-management.io")
        || attrs.api_group == ocm_proto::api::multicluster::GROUP;
    let delegable = named_by_host && (!attrs.resource_request || served_group);
    let allowed = match &state.delegate_authz {
        Some(delegate) if delegable => delegate.allowed(identity, attrs).await?,
        _ => false,
    };
    if allowed { Ok(()) } else { Err(denied) }
}

/// The handler a path names: discovery and OpenAPI documents, `/metrics`, the backup stream,
/// or a resource.
async fn route(
    state: &Arc<ApiState>,
    segments: &[&str],
    req: Request,
    q: Query,
    identity: &Identity,
) -> Result<Response, ApiError> {
    match segments {
        ["api"] => discovery_root(state, req.headers(), true),
        ["apis"] => discovery_root(state, req.headers(), false),
        ["apis", group] => match state.discovery.groups.get(*group) {
            Some(doc) => Ok(json_response(StatusCode::OK, doc.clone())),
            None => Err(ApiError::path_not_found()),
        },
        ["metrics"] => Ok(metrics_response(state).await),
        ["ocm", "v1", "backup"] if req.method() == Method::GET => backup::backup(state).await,
        ["openapi", "v3"] => Ok(openapi_root(state, req.headers())),
        ["openapi", "v3", rest @ ..] => openapi_document(state, &rest.join("/"), &q),
        ["api", "v1"] => group_version(state, "", "v1"),
        ["apis", group, version] => group_version(state, group, version),
        ["api", "v1", rest @ ..] => {
            let target = resolve(state, "", "v1", rest)?;
            resource(state, target, req, q, identity).await
        }
        [
            "apis",
            proxy::GROUP,
            proxy::VERSION,
            proxy::RESOURCE,
            cluster,
            proxy::SUBRESOURCE,
            ..,
        ] => proxy::proxy(state, cluster, req, proxy::Caller::User(identity)).await,
        ["apis", group, version, rest @ ..] => {
            let target = resolve(state, group, version, rest)?;
            resource(state, target, req, q, identity).await
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

/// The requester of a write, for admission.
pub(crate) fn requester(state: &ApiState, user: &Identity) -> Requester {
    Requester { user: Arc::clone(user), authorizer: Arc::clone(&state.access) as _ }
}
