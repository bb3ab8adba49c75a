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
pub const GZIP_THRESHOLD: usize = 128 * 1024;

/// Response extension marking a streamed body (a watch): left as it is.
#[derive(Debug, Clone, Copy)]
pub struct Streaming;

/// How a request wants its response encoded.
#[derive(Debug, Clone, Copy, Default)]
pub struct Wanted {
    /// The first acceptable media type of `Accept` is `application/yaml`.
    pub yaml: bool,
    /// `Accept-Encoding` lists gzip.
    pub gzip: bool,
}

impl Wanted {
    /// Reads `Accept` and `Accept-Encoding`.
    pub fn of(headers: &HeaderMap) -> Wanted {
        let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
        let yaml = accept
            .split(',')
            .map(|part| part.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
            .find(|m| matches!(m.as_str(), "application/json" | "application/yaml" | "*/*"))
            .is_some_and(|m| m == "application/yaml");
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
pub async fn finish(resp: Response, wanted: Wanted) -> Response {
    if resp.extensions().get::<Streaming>().is_some() || !(wanted.yaml || wanted.gzip) {
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
    }
}
