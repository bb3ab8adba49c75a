//! Response encodings beyond plain JSON, applied to a finished response: YAML bodies when the
//! client asks for `application/yaml`, and gzip for non-watch responses over 128 KiB when it
//! sends `Accept-Encoding: gzip` (kube-apiserver's rule, with `Vary: Accept-Encoding`). Watch
//! streams are marked [`Streaming`] and never buffered or compressed.

use std::io::Write as _;

use axum::body::Body;
use axum::response::Response;
use http::{HeaderMap, HeaderValue, header};
use http_body_util::BodyExt as _;
use serde_json::Value;

/// The smallest body that is compressed (kube-apiserver's `defaultGzipThresholdBytes`).
pub(super) const GZIP_THRESHOLD: usize = 128 * 1024;

/// Response extension marking a streamed body (a watch): left as it is.
#[derive(Debug, Clone, Copy)]
pub(super) struct Streaming;

/// How a request wants its response encoded.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Wanted {
    /// The first acceptable media type of `Accept` is `application/yaml`.
    pub(super) yaml: bool,
    /// `Accept-Encoding` lists gzip.
    pub(super) gzip: bool,
}

impl Wanted {
    /// Reads `Accept` (with the REST layer's negotiation, so both agree on YAML) and
    /// `Accept-Encoding`.
    pub(super) fn of(headers: &HeaderMap) -> Wanted {
        let yaml = super::yaml_negotiated(headers);
        let gzip = headers
            .get_all(header::ACCEPT_ENCODING)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|e| {
                let mut parts = e.split(';');
                let name = parts.next().unwrap_or("").trim();
                let refused =
                    parts.any(|p| matches!(p.trim(), "q=0" | "q=0.0" | "q=0.00" | "q=0.000"));
                name.eq_ignore_ascii_case("gzip") && !refused
            });
        Wanted { yaml, gzip }
    }
}

/// Re-encodes a finished response as `wanted` says: YAML for a JSON body, then gzip when the
/// body is large enough. A body that cannot be re-encoded is sent as it is.
pub(super) async fn finish(resp: Response, wanted: Wanted) -> Response {
    if resp.extensions().get::<Streaming>().is_some() || !(wanted.yaml || wanted.gzip) {
        return resp;
    }
    // Most responses kubectl gets (it always accepts gzip) are small: a body whose size is
    // known and under the threshold is left alone, without buffering it again.
    let small = axum::body::HttpBody::size_hint(resp.body())
        .exact()
        .is_some_and(|n| n <= GZIP_THRESHOLD as u64);
    if !wanted.yaml && small {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let Ok(collected) = body.collect().await else {
        return Response::from_parts(parts, Body::empty());
    };
    let mut bytes = collected.to_bytes();
    let is_json = parts
        .headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes() == b"application/json");
    // A 406 says the client's types cannot be served: it is answered in JSON.
    if wanted.yaml && is_json && parts.status != http::StatusCode::NOT_ACCEPTABLE {
        if let Some(yaml) = serde_json::from_slice::<Value>(&bytes)
            .ok()
            .and_then(|v| serde_saphyr::to_string(&v).ok())
        {
            bytes = yaml.into_bytes().into();
            parts
                .headers
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/yaml"));
        }
    }
    if wanted.gzip && bytes.len() > GZIP_THRESHOLD {
        let mut enc = flate2::write::GzEncoder::new(
            Vec::with_capacity(bytes.len() / 4),
            flate2::Compression::default(),
        );
        if enc.write_all(&bytes).is_ok() {
            if let Ok(zipped) = enc.finish() {
                bytes = zipped.into();
                parts.headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
                parts.headers.append(header::VARY, HeaderValue::from_static("Accept-Encoding"));
            }
        }
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn negotiation_reads_the_first_acceptable_type() {
        assert!(Wanted::of(&headers(&[("accept", "application/yaml, application/json")])).yaml);
        assert!(!Wanted::of(&headers(&[("accept", "application/json, application/yaml")])).yaml);
        assert!(Wanted::of(&headers(&[("accept-encoding", "deflate, gzip")])).gzip);
        assert!(!Wanted::of(&headers(&[("accept-encoding", "gzip;q=0")])).gzip);
        assert!(!Wanted::of(&headers(&[])).gzip);
        // As the REST negotiation answers: `application/*` is JSON, a YAML transform is skipped.
        assert!(!Wanted::of(&headers(&[("accept", "application/*, application/yaml")])).yaml);
        let skipped = "application/yaml;as=Table;g=meta.k8s.io;v=v1, application/json";
        assert!(!Wanted::of(&headers(&[("accept", skipped)])).yaml);
        let unknown = "application/json;as=Widget;g=example.com;v=v1, application/yaml";
        assert!(Wanted::of(&headers(&[("accept", unknown)])).yaml);
    }

    fn json(code: http::StatusCode, body: &'static str) -> Response {
        let mut resp = Response::new(Body::from(body));
        *resp.status_mut() = code;
        resp.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        resp
    }

    async fn text(resp: Response) -> String {
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn finish_writes_yaml_keeps_406_and_streams_json() {
        let yaml = Wanted { yaml: true, gzip: false };
        let resp = finish(json(http::StatusCode::OK, r#"{"kind":"X","a":[1]}"#), yaml).await;
        assert_eq!(resp.headers()[header::CONTENT_TYPE], "application/yaml");
        let back: Value = serde_saphyr::from_str(&text(resp).await).unwrap();
        assert_eq!(back, serde_json::json!({"kind": "X", "a": [1]}));
        let refused =
            finish(json(http::StatusCode::NOT_ACCEPTABLE, r#"{"kind":"Status"}"#), yaml).await;
        assert_eq!(refused.headers()[header::CONTENT_TYPE], "application/json");
        let mut streamed = json(http::StatusCode::OK, r#"{"type":"ADDED"}"#);
        streamed.extensions_mut().insert(Streaming);
        let streamed = finish(streamed, Wanted { yaml: true, gzip: true }).await;
        assert_eq!(text(streamed).await, r#"{"type":"ADDED"}"#);
        // Small bodies are not compressed.
        let small =
            finish(json(http::StatusCode::OK, "{}"), Wanted { yaml: false, gzip: true }).await;
        assert!(small.headers().get(header::CONTENT_ENCODING).is_none());
    }
}
