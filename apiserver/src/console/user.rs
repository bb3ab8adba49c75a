//! The hub's API called as a console user: a request built afresh (nothing of the browser's but
//! what the console chooses to pass on) with the session's bearer token, served by the REST
//! layer's one entry point, so authentication, RBAC, limits, metrics and every answer are the
//! API's own. Also a `kube::Client` over the same path, for the client commands the console's
//! actions share with `ocm-hub`.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use http::{HeaderValue, Method, Request, header};

use crate::serve::rest::ApiState;

/// One API call as a user.
#[derive(Debug)]
pub(super) struct Call<'a> {
    /// The method.
    pub(super) method: Method,
    /// The API path and query (`/apis/...?...`).
    pub(super) path: &'a str,
    /// `Accept`, passed on as the browser sent it.
    pub(super) accept: Option<HeaderValue>,
    /// `Accept-Encoding`, likewise.
    pub(super) accept_encoding: Option<HeaderValue>,
    /// `Content-Type` of the body.
    pub(super) content_type: Option<&'static str>,
    /// The body.
    pub(super) body: Body,
}

impl Call<'_> {
    /// A GET of `path` asking for JSON.
    pub(super) fn get(path: &str) -> Call<'_> {
        Call {
            method: Method::GET,
            path,
            accept: Some(HeaderValue::from_static("application/json")),
            accept_encoding: None,
            content_type: None,
            body: Body::empty(),
        }
    }
}

/// Serves `call` as the user `token` authenticates: the request carries that token and no
/// client certificate, whatever connection the console's own request came on.
pub(super) async fn call(state: &Arc<ApiState>, token: &str, call: Call<'_>) -> Response {
    let mut req = Request::builder().method(call.method).uri(call.path);
    if let Ok(bearer) = HeaderValue::from_str(&format!("Bearer {token}")) {
        req = req.header(header::AUTHORIZATION, bearer);
    }
    if let Some(accept) = call.accept {
        req = req.header(header::ACCEPT, accept);
    }
    if let Some(encoding) = call.accept_encoding {
        req = req.header(header::ACCEPT_ENCODING, encoding);
    }
    if let Some(ct) = call.content_type {
        req = req.header(header::CONTENT_TYPE, ct);
    }
    match req.body(call.body) {
        Ok(req) => crate::serve::rest::handle(State(Arc::clone(state)), req).await,
        Err(e) => {
            crate::serve::rest::error_response(&crate::machinery::error::ApiError::bad_request(
                format!("the console cannot make this request: {e}"),
            ))
        }
    }
}

/// A `kube::Client` whose every request is served in process as the user `token` names.
pub(super) fn kube_client(state: &Arc<ApiState>, token: &Arc<str>) -> kube::Client {
    let service = AsUser { state: Arc::clone(state), token: Arc::clone(token) };
    kube::Client::new(service, "default")
}

/// The tower service behind [`kube_client`].
#[derive(Clone)]
struct AsUser {
    state: Arc<ApiState>,
    token: Arc<str>,
}

impl tower::Service<Request<kube::client::Body>> for AsUser {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<kube::client::Body>) -> Self::Future {
        let (state, token) = (Arc::clone(&self.state), Arc::clone(&self.token));
        Box::pin(async move {
            let (parts, body) = req.into_parts();
            let path = parts.uri.path_and_query().map_or("/", |pq| pq.as_str()).to_owned();
            let content_type = match parts.headers.get(header::CONTENT_TYPE) {
                Some(v) => patch_type(v),
                None => None,
            };
            let call = Call {
                method: parts.method,
                path: &path,
                accept: Some(HeaderValue::from_static("application/json")),
                accept_encoding: None,
                content_type: content_type.or(Some("application/json")),
                body: Body::new(body),
            };
            Ok(self::call(&state, &token, call).await)
        })
    }
}

/// The media types a client's write may carry, as static strings.
fn patch_type(v: &HeaderValue) -> Option<&'static str> {
    let v = v.to_str().ok()?;
    let media = v.split(';').next().unwrap_or("").trim();
    [
        "application/json",
        "application/merge-patch+json",
        "application/json-patch+json",
        "application/strategic-merge-patch+json",
        "application/apply-patch+yaml",
    ]
    .into_iter()
    .find(|m| *m == media)
}
