//! The klusterlet's end of the cluster proxy (`ocm_proto::tunnel`): a TLS connection the agent
//! opens to each hub replica with its own certificate, over which the hub sends requests for
//! this cluster's API server as HTTP/2 streams and the agent answers them.
//!
//! The managed cluster decides what hub users may do on it. Every request loses each header
//! that could carry an identity or a credential (`Authorization`, cookies, `Impersonate-*`,
//! `X-Remote-*`, and the tunnel's own once read); then the agent calls its cluster with its own
//! credentials, impersonating the hub user the hub named under a prefix (hub user `alice` in
//! group `devs` acts as `ocm-hub:alice` in `ocm-hub:devs` and `system:authenticated`), so the
//! hub's `system:masters` is never the cluster's. A request that carried a
//! ManagedServiceAccount token of this cluster goes with that token as its bearer instead,
//! impersonating nobody. Paths outside the cluster's API are refused here too. Answers
//! stream back as the cluster sends them (watches, long lists); a request body, at most
//! kube-apiserver's 3 MiB, is read whole first, as the `kube` client sends bodies.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderName, HeaderValue, Request, Response, StatusCode, header};
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use ocm_proto::tunnel;

use crate::error::AgentError;

/// The largest request body carried (kube-apiserver's limit).
const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// The prefix of impersonated hub users and groups unless `--proxy-identity-prefix` says
/// otherwise.
pub const DEFAULT_PREFIX: &str = "ocm-hub:";

/// Refuses a prefix under which a hub user could act as one of the cluster's own: an empty
/// one, or one in Kubernetes' reserved `system:` namespace of names.
pub fn check_prefix(prefix: &str) -> Result<(), &'static str> {
    if prefix.is_empty() {
        return Err("is empty: hub users would act as the cluster's own users of the same name");
    }
    if prefix.starts_with("system:") {
        return Err("starts with \"system:\", Kubernetes' reserved names");
    }
    Ok(())
}

/// The group every impersonated hub user is also in, as kube-apiserver adds it.
const AUTHENTICATED: &str = "system:authenticated";

/// The cluster's API server as the proxy calls it.
#[derive(Clone)]
pub struct ClusterApi {
    /// With the agent's own credentials (which must allow impersonation), for hub users.
    impersonating: kube::Client,
    /// With no credentials, for requests that bring a token of the cluster's.
    bearer: kube::Client,
}

impl ClusterApi {
    /// Clients of the cluster `config` names, for proxying: no read timeout (watches run as
    /// long as the caller keeps them), no retries (a caller's request is sent once), and no
    /// impersonation of the config's own (the proxy sets its own or none).
    pub fn new(config: &kube::Config) -> Result<ClusterApi, AgentError> {
        let mut own = config.clone();
        own.read_timeout = None;
        own.default_retry = false;
        own.auth_info.impersonate = None;
        own.auth_info.impersonate_groups = None;
        own.auth_info.impersonate_uid = None;
        own.auth_info.impersonate_user_extra = None;
        let mut bare = own.clone();
        bare.auth_info = kube::config::AuthInfo::default();
        let client = |c: kube::Config| {
            kube::Client::try_from(c).map_err(|e| AgentError::Cluster(e.to_string()))
        };
        Ok(ClusterApi { impersonating: client(own)?, bearer: client(bare)? })
    }
}

/// What a tunnel needs: where the hub is, the agent's credentials, the cluster and the prefix.
#[derive(Clone)]
pub struct Tunnel {
    /// The hub's CA (PEM), the only one trusted.
    pub ca_pem: String,
    /// The agent's data dir, whose certificate and key are read at every connect (a rotated
    /// certificate is used from the next connection on).
    pub data_dir: crate::state::DataDir,
    /// The cluster's API server.
    pub api: ClusterApi,
    /// The prefix of impersonated users and groups (`--proxy-identity-prefix`).
    pub prefix: Arc<str>,
}

/// The most requests one tunnel carries at once (hyper's default is 200); the hub's own
/// stream and connection limits bound what reaches it.
const MAX_STREAMS: u32 = 10_000;

/// After this long open, a tunnel that ends is opened again at once (its backoff starts over).
const HEALTHY_AFTER: Duration = Duration::from_secs(60);

/// Keeps a tunnel open to the hub replica at `url`, opening it again whenever it ends.
pub async fn keep_open(url: String, tunnel: Tunnel) {
    let mut backoff = crate::backoff::Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
    loop {
        let opened = Instant::now();
        match tunnel.serve(&url).await {
            Ok(()) => tracing::info!(hub = %url, "cluster proxy tunnel closed by the hub"),
            Err(e) => tracing::warn!(hub = %url, error = %e, "cluster proxy tunnel failed"),
        }
        if opened.elapsed() >= HEALTHY_AFTER {
            backoff.reset();
        }
        backoff.wait().await;
    }
}

impl Tunnel {
    /// Opens the tunnel and answers the hub's requests on it until it ends.
    async fn serve(&self, url: &str) -> Result<(), AgentError> {
        let (cert, key) = self
            .data_dir
            .credentials()?
            .ok_or_else(|| AgentError::Invalid("the data dir holds no agent certificate".into()))?;
        let tls = crate::grpc::tls_connect(url, &self.ca_pem, &cert, &key, tunnel::ALPN).await?;
        if tls.get_ref().1.alpn_protocol() != Some(tunnel::ALPN) {
            return Err(AgentError::Invalid(format!(
                "the hub at {url} does not offer the cluster proxy tunnel (an older hub?)"
            )));
        }
        tracing::info!(hub = %url, "cluster proxy tunnel open");
        let (api, prefix) = (self.api.clone(), Arc::clone(&self.prefix));
        let service = hyper::service::service_fn(move |req| {
            let (api, prefix) = (api.clone(), Arc::clone(&prefix));
            async move { Ok::<_, Infallible>(answer(&api, &prefix, req).await) }
        });
        hyper::server::conn::http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .keep_alive_interval(Duration::from_secs(30))
            .keep_alive_timeout(Duration::from_secs(10))
            // Every proxied watch of this cluster is a stream held open.
            .max_concurrent_streams(MAX_STREAMS)
            .serve_connection(TokioIo::new(tls), service)
            .await
            .map_err(|e| AgentError::Unreachable { url: url.to_owned(), detail: e.to_string() })
    }
}

/// The answer to one proxied request: the cluster's, or a `Status` saying why there is none.
async fn answer(
    api: &ClusterApi,
    prefix: &str,
    req: Request<Incoming>,
) -> Response<kube::client::Body> {
    let (mut parts, body) = req.into_parts();
    let path = parts.uri.path();
    if let Err(e) = tunnel::confined_path(path) {
        return status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            &format!("the proxied path is refused: {e}"),
        );
    }
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
    let caller = Caller::take(&parts.headers);
    strip(&mut parts.headers);
    let body = match http_body_util::Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            return status(
                StatusCode::PAYLOAD_TOO_LARGE,
                "RequestEntityTooLarge",
                &format!("the request body was not read whole (at most 3 MiB): {e}"),
            );
        }
    };
    let client = match caller.credentials(prefix, &mut parts.headers) {
        Ok(Credentials::Own) => &api.impersonating,
        Ok(Credentials::Bearer) => &api.bearer,
        Err(message) => return status(StatusCode::FORBIDDEN, "Forbidden", message),
    };
    let mut request = Request::new(kube::client::Body::from(body));
    *request.method_mut() = parts.method;
    *request.headers_mut() = parts.headers;
    match target.parse() {
        Ok(uri) => *request.uri_mut() = uri,
        Err(_) => {
            return status(StatusCode::BAD_REQUEST, "BadRequest", "the proxied path is not a URI");
        }
    }
    match client.send(request).await {
        Ok(mut resp) => {
            tunnel::strip_hop_by_hop(resp.headers_mut());
            resp
        }
        Err(e) => status(
            StatusCode::BAD_GATEWAY,
            "InternalError",
            &format!("the cluster's API server did not answer: {e}"),
        ),
    }
}

/// Who the hub says the caller is, read from the tunnel's headers (which [`strip`] then
/// removes).
#[derive(Debug, Default, PartialEq, Eq)]
struct Caller {
    user: Option<String>,
    groups: Vec<String>,
    token: Option<String>,
}

/// Which credentials a request goes with.
#[derive(Debug, PartialEq, Eq)]
enum Credentials {
    /// The agent's own, impersonating the caller.
    Own,
    /// The caller's cluster token, set as the bearer.
    Bearer,
}

impl Caller {
    fn take(headers: &HeaderMap) -> Caller {
        let text = |v: &HeaderValue| v.to_str().ok().map(str::to_owned);
        Caller {
            user: headers.get(tunnel::USER_HEADER).and_then(text),
            groups: headers.get_all(tunnel::GROUP_HEADER).iter().filter_map(text).collect(),
            token: headers.get(tunnel::TOKEN_HEADER).and_then(text),
        }
    }

    /// Sets the headers that say who the request acts as on the cluster, to `headers` from
    /// which every identity header was removed.
    fn credentials(
        &self,
        prefix: &str,
        headers: &mut HeaderMap,
    ) -> Result<Credentials, &'static str> {
        if let Some(token) = &self.token {
            let value = HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| "the cluster token cannot be carried in a header")?;
            headers.insert(header::AUTHORIZATION, value);
            return Ok(Credentials::Bearer);
        }
        let user = self.user.as_deref().filter(|u| !u.is_empty()).ok_or("the hub named no user")?;
        let value = |v: &str| {
            HeaderValue::from_str(v).map_err(|_| "the hub user cannot be carried in a header")
        };
        headers.insert(
            HeaderName::from_static("impersonate-user"),
            value(&format!("{prefix}{user}"))?,
        );
        let group = HeaderName::from_static("impersonate-group");
        for g in &self.groups {
            headers.append(group.clone(), value(&format!("{prefix}{g}"))?);
        }
        headers.append(group, HeaderValue::from_static(AUTHENTICATED));
        Ok(Credentials::Own)
    }
}

/// Removes every identity and credential header, the tunnel's own, `Host` and the hop-by-hop
/// ones.
fn strip(headers: &mut HeaderMap) {
    tunnel::strip_identity(headers);
    tunnel::strip_hop_by_hop(headers);
    headers.remove(header::HOST);
}

/// A Kubernetes `Status` answer.
fn status(code: StatusCode, reason: &str, message: &str) -> Response<kube::client::Body> {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code.as_u16(),
    });
    let mut resp = Response::new(kube::client::Body::from(body.to_string().into_bytes()));
    *resp.status_mut() = code;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

/// The tunnels the agent keeps, one per hub replica URL, each a task ended when dropped.
#[derive(Default)]
pub struct Tunnels(HashMap<String, tokio::task::JoinHandle<()>>);

impl Tunnels {
    /// Opens a tunnel to every URL of `urls` without one, and closes those to URLs not in it.
    pub fn follow(&mut self, urls: &[String], tunnel: &Tunnel) {
        self.0.retain(|url, task| {
            let keep = urls.contains(url);
            if !keep {
                task.abort();
            }
            keep
        });
        for url in urls {
            self.0
                .entry(url.clone())
                .or_insert_with(|| tokio::spawn(keep_open(url.clone(), tunnel.clone())));
        }
    }
}

impl Drop for Tunnels {
    fn drop(&mut self) {
        for task in self.0.values() {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(HeaderName::from_static(k), HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn a_hub_user_is_impersonated_under_the_prefix_and_the_callers_own_headers_are_gone() {
        let mut h = headers(&[
            ("x-ocm-proxy-user", "alice"),
            ("x-ocm-proxy-group", "devs"),
            ("x-ocm-proxy-group", "system:masters"),
            ("impersonate-user", "system:admin"),
            ("impersonate-group", "system:masters"),
            ("impersonate-extra-scopes", "all"),
            ("x-remote-user", "root"),
            ("authorization", "Bearer stolen"),
            ("accept", "application/json"),
        ]);
        let caller = Caller::take(&h);
        strip(&mut h);
        assert_eq!(caller.credentials("ocm-hub:", &mut h), Ok(Credentials::Own));
        let all = |name: &str| -> Vec<&str> {
            h.get_all(name).iter().map(|v| v.to_str().unwrap()).collect()
        };
        assert_eq!(all("impersonate-user"), ["ocm-hub:alice"]);
        assert_eq!(
            all("impersonate-group"),
            ["ocm-hub:devs", "ocm-hub:system:masters", "system:authenticated"]
        );
        assert!(all("impersonate-extra-scopes").is_empty());
        assert!(all("x-remote-user").is_empty());
        assert!(all("authorization").is_empty());
        assert!(all("x-ocm-proxy-user").is_empty());
        assert_eq!(all("accept"), ["application/json"]);
    }

    #[test]
    fn a_cluster_token_goes_as_the_bearer_without_impersonation() {
        let mut h = headers(&[("x-ocm-proxy-token", "abc"), ("impersonate-user", "system:admin")]);
        let caller = Caller::take(&h);
        strip(&mut h);
        assert_eq!(caller.credentials("ocm-hub:", &mut h), Ok(Credentials::Bearer));
        assert_eq!(h.get("authorization").unwrap(), "Bearer abc");
        assert!(h.get("impersonate-user").is_none());
    }

    #[test]
    fn a_request_naming_nobody_is_refused() {
        let mut h = headers(&[("impersonate-user", "system:admin")]);
        let caller = Caller::take(&h);
        strip(&mut h);
        assert!(caller.credentials("ocm-hub:", &mut h).is_err());
        assert!(h.is_empty());
    }
}
