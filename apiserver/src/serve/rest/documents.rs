//! The discovery and OpenAPI documents: legacy and aggregated discovery (by `Accept`), group
//! versions, the OpenAPI v3 root and per group-version documents with their caching rules.

use super::*;

pub(super) fn discovery_root(
    state: &ApiState,
    headers: &HeaderMap,
    core: bool,
) -> Result<Response, ApiError> {
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

pub(super) fn group_version(
    state: &ApiState,
    group: &str,
    version: &str,
) -> Result<Response, ApiError> {
    match state.discovery.resources.get(&format!("{group}/{version}")) {
        Some(doc) => Ok(json_response(StatusCode::OK, doc.clone())),
        None => Err(ApiError::path_not_found()),
    }
}

/// Whether the client's cached copy (`If-None-Match`) is the one tagged `etag`.
pub(super) fn if_none_match(headers: &HeaderMap, etag: &str) -> bool {
    headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()).is_some_and(|v| v == etag)
}

/// `/openapi/v3`, with an ETag kubectl can revalidate.
pub(super) fn openapi_root(state: &ApiState, headers: &HeaderMap) -> Response {
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
pub(super) fn openapi_document(
    state: &ApiState,
    key: &str,
    q: &Query,
) -> Result<Response, ApiError> {
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
                httpdate::fmt_http_date(
                    SystemTime::from(crate::machinery::clock::now())
                        + Duration::from_secs(365 * 86_400),
                ),
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

/// Which aggregated discovery version the client asked for first, if any.
pub(super) fn aggregated_wanted(headers: &HeaderMap) -> Option<usize> {
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
