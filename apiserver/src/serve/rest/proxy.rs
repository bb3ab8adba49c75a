//! The cluster proxy: `/apis/cluster.open-cluster-management.io/v1/managedclusters/{name}/proxy/{path}`
//! carries a request to cluster `{name}`'s API server through the tunnel its klusterlet keeps
//! open (`serve::tunnel`), and streams the answer back.
//!
//! By the time a request gets here the hub has authenticated the caller and authorized the
//! subresource like `pods/proxy` (the verb follows the HTTP method; `resourceNames` can limit it
//! to some clusters). Here it refuses what must not reach a cluster: a path outside the
//! cluster's API (`ocm_proto::tunnel::confined_path`), upgrades (exec, attach, port-forward),
//! and every header that could carry an identity or a credential (`Authorization`, cookies,
//! `Impersonate-*`, `X-Remote-*`, the tunnel's own). It then names the caller in the tunnel's
//! headers; the agent impersonates that user, under its prefix, on its cluster. Bodies stream
//! through the hub both ways: the request's as the caller sends it, the answer's (watches, long
//! lists) as the cluster sends it.
//!
//! A request whose bearer token is a ManagedServiceAccount token of the cluster, as the hub holds
//! it (the Secret a ManagedServiceAccount in the cluster's namespace names in its status, which
//! the cluster's agent writes), is authenticated by that match instead ([`cluster_token`]) and
//! carries the token to the cluster, which authenticates and authorizes it as its service
//! account; nobody is impersonated.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use http::{HeaderMap, HeaderName, HeaderValue, Method, header};
use ocm_proto::tunnel;

use super::ApiState;
use super::encoding::Streaming;
use crate::machinery::error::{ApiError, Subject};
use crate::machinery::requester::{Attributes, Identity};

/// The path the proxy subresource lives under.
pub(super) const GROUP: &str = "cluster.open-cluster-management.io";
pub(super) const VERSION: &str = "v1";
pub(super) const RESOURCE: &str = "managedclusters";
pub(super) const SUBRESOURCE: &str = "proxy";

/// Whether a request's attributes name the proxy subresource.
pub(super) fn is_proxy(attrs: &Attributes) -> bool {
    attrs.resource_request
        && attrs.api_group == GROUP
        && attrs.resource == RESOURCE
        && attrs.subresource == SUBRESOURCE
}

fn subject(cluster: &str) -> Subject {
    Subject { group: GROUP.to_owned(), kind: RESOURCE.to_owned(), name: cluster.to_owned() }
}

/// Who a proxied request acts as on the cluster.
pub(super) enum Caller<'a> {
    /// A hub user, impersonated under the agent's prefix.
    User(&'a Identity),
    /// A ManagedServiceAccount token of the cluster, sent as the bearer.
    Token(String),
}

/// The ManagedServiceAccount token of the cluster a proxied request names that the request
/// carries as its bearer token, if it does.
pub(super) fn cluster_token(state: &ApiState, req: &Request, attrs: &Attributes) -> Option<String> {
    if !is_proxy(attrs) {
        return None;
    }
    let token = crate::auth::authn::bearer(req.headers())?;
    let registry = &state.registry;
    let accounts = registry.scheme.lookup(
        ocm_proto::api::authentication::GROUP,
        "v1beta1",
        "managedserviceaccounts",
    )?;
    let secrets = registry.scheme.lookup("", "v1", "secrets")?;
    let cluster = attrs.name.as_str();
    let held = registry.cached_list(accounts, cluster).into_iter().filter_map(|account| {
        let name = account.value().pointer("/status/tokenSecretRef/name")?.as_str()?.to_owned();
        let secret = registry.cached(secrets, cluster, &name)?.value();
        let label = ocm_proto::api::authentication::LABEL_IS_MANAGED_SERVICE_ACCOUNT;
        (secret.pointer("/metadata/labels")?.get(label)? == "true").then_some(())?;
        ocm_proto::api::meta::secret_data(&secret, "token")
    });
    // Compared as digests (as bootstrap tokens are), so the time taken says nothing about a
    // stored token.
    use sha2::Digest as _;
    let digest = |s: &str| sha2::Sha256::digest(s.as_bytes());
    let wanted = digest(&token);
    held.into_iter().any(|h| digest(&h) == wanted).then_some(token)
}

/// Proxies `req` to `cluster`'s API server as `caller`.
pub(super) async fn proxy(
    state: &Arc<ApiState>,
    cluster: &str,
    req: Request,
    caller: Caller<'_>,
) -> Result<Response, ApiError> {
    if !matches!(
        *req.method(),
        Method::GET | Method::HEAD | Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    ) {
        return Err(ApiError::method_not_allowed(req.method().as_str(), "proxy"));
    }
    if is_upgrade(req.headers()) {
        return Err(ApiError::bad_request(
            "upgrade requests (exec, attach, port-forward) are not supported through the cluster proxy",
        ));
    }
    let path = inner_path(req.uri().path(), cluster)?;
    match crate::serve::tunnel::accepted(&state.registry, cluster) {
        None => return Err(ApiError::not_found(subject(cluster))),
        Some(false) => {
            return Err(ApiError::unavailable(format!(
                "cluster {cluster:?} is not accepted by the hub: nothing is proxied to it"
            )));
        }
        Some(true) => {}
    }
    let Some(mut send) = state.tunnels.get(cluster) else {
        return Err(ApiError::unavailable(format!(
            "cluster {cluster:?} has no proxy tunnel open: its klusterlet is not connected, or \
             its cluster's admin refuses proxying (klusterlet --enable-proxy=false)"
        )));
    };
    let watch = is_watch(req.uri().query());
    let forwarded = forwarded_request(req, cluster, &path, &caller)?;
    let broken = |e: hyper::Error| {
        ApiError::unavailable(format!("the proxy tunnel to cluster {cluster:?} failed: {e}"))
    };
    send.ready().await.map_err(broken)?;
    let answer = send.send_request(forwarded).await.map_err(broken)?;
    let (mut parts, body) = answer.into_parts();
    tunnel::strip_hop_by_hop(&mut parts.headers);
    let body = if watch { Body::new(EndOnBreak(body)) } else { Body::new(body) };
    let mut resp = Response::from_parts(parts, body);
    // The cluster's answer goes out as it came (no YAML or gzip of the hub's).
    resp.extensions_mut().insert(Streaming);
    Ok(resp)
}

/// Whether a query asks for a watch (`watch=true` or `watch=1`).
fn is_watch(query: Option<&str>) -> bool {
    query.unwrap_or_default().split('&').any(|kv| matches!(kv, "watch=true" | "watch=1"))
}

/// A proxied watch's answer, ended (not failed) when its tunnel breaks: a watch the server
/// ends is what every client expects and resumes from, while a failed stream is an error.
struct EndOnBreak(hyper::body::Incoming);

impl hyper::body::Body for EndOnBreak {
    type Data = bytes::Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, hyper::Error>>> {
        match std::pin::Pin::new(&mut self.0).poll_frame(cx) {
            std::task::Poll::Ready(Some(Err(e))) => {
                tracing::debug!(error = %e, "a proxied watch's tunnel broke: the watch ends");
                std::task::Poll::Ready(None)
            }
            polled => polled,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_end_stream()
    }
}

/// The path after `…/managedclusters/{cluster}/proxy` (`/` when there is none), checked to
/// stay within the cluster's API.
fn inner_path(path: &str, cluster: &str) -> Result<String, ApiError> {
    let prefix = format!("/apis/{GROUP}/{VERSION}/{RESOURCE}/{cluster}/{SUBRESOURCE}");
    let rest = path.strip_prefix(&prefix).ok_or_else(ApiError::path_not_found)?;
    let inner = if rest.is_empty() { "/" } else { rest };
    tunnel::confined_path(inner).map_err(|e| {
        ApiError::bad_request(format!("the proxied path {inner:?} is refused: {e}"))
    })?;
    Ok(inner.to_owned())
}

/// Whether a request asks to switch protocols (HTTP/1.1 `Upgrade`, or HTTP/2's CONNECT).
fn is_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE)
        || headers
            .get_all(header::CONNECTION)
            .iter()
            .any(|v| v.to_str().is_ok_and(|v| v.to_ascii_lowercase().contains("upgrade")))
}

/// The request the tunnel carries: the caller's method, path, query, body and end-to-end
/// headers, less every identity or credential header, plus who the caller is.
fn forwarded_request(
    req: Request,
    cluster: &str,
    path: &str,
    caller: &Caller<'_>,
) -> Result<http::Request<Body>, ApiError> {
    let (parts, body) = req.into_parts();
    let target = match parts.uri.query() {
        Some(q) => format!("http://{cluster}.tunnel{path}?{q}"),
        None => format!("http://{cluster}.tunnel{path}"),
    };
    let uri: http::Uri =
        target.parse().map_err(|e| ApiError::bad_request(format!("the proxied path: {e}")))?;
    let mut headers = parts.headers;
    tunnel::strip_hop_by_hop(&mut headers);
    tunnel::strip_identity(&mut headers);
    headers.remove(header::HOST);
    let value = |v: &str| {
        HeaderValue::from_str(v).map_err(|_| {
            ApiError::bad_request("the caller's name or groups cannot be carried in a header")
        })
    };
    match caller {
        Caller::User(identity) => {
            headers.insert(HeaderName::from_static(tunnel::USER_HEADER), value(&identity.name)?);
            for group in &identity.groups {
                headers.append(HeaderName::from_static(tunnel::GROUP_HEADER), value(group)?);
            }
        }
        Caller::Token(token) => {
            headers.insert(HeaderName::from_static(tunnel::TOKEN_HEADER), value(token)?);
        }
    }
    let mut forwarded = http::Request::new(body);
    *forwarded.method_mut() = parts.method;
    *forwarded.uri_mut() = uri;
    *forwarded.headers_mut() = headers;
    Ok(forwarded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_inner_path_stays_in_the_clusters_api() {
        let base = "/apis/cluster.open-cluster-management.io/v1/managedclusters/c1/proxy";
        assert_eq!(inner_path(base, "c1").unwrap(), "/");
        assert_eq!(inner_path(&format!("{base}/api/v1/pods"), "c1").unwrap(), "/api/v1/pods");
        for bad in ["/api/%2e%2e/x", "/api/v1%2F..%2Fmetrics", "/..", "/api/%5c"] {
            let err = inner_path(&format!("{base}{bad}"), "c1").unwrap_err();
            assert_eq!((err.code, err.reason), (400, "BadRequest"), "{bad}");
        }
    }

    #[test]
    fn upgrades_are_recognised() {
        let mut h = HeaderMap::new();
        h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        assert!(is_upgrade(&h));
        let mut h = HeaderMap::new();
        h.insert(header::UPGRADE, HeaderValue::from_static("SPDY/3.1"));
        assert!(is_upgrade(&h));
        assert!(!is_upgrade(&HeaderMap::new()));
    }
}
