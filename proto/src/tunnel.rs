//! The cluster proxy's tunnel, as hub and agent both speak it.
//!
//! A klusterlet opens a TLS connection of its own to the hub's HTTPS port, with its agent
//! certificate and the ALPN protocol [`ALPN`]. Over it the roles turn: the hub is the HTTP/2
//! client and the agent the HTTP/2 server, so each proxied request is one HTTP/2 stream the hub
//! opens and the agent answers from its cluster's API server. The hub says who the caller is
//! in the headers named here, after removing every header of those names the caller sent; the
//! agent removes them again before it calls its cluster.
//!
//! [`confined_path`] is the one rule, on both ends, for which paths a proxied request may
//! name: a path of the cluster's own API server and nothing that a server or another proxy
//! could read as somewhere else.

/// The path of `cluster`'s proxy on a hub (its server URL is put before it).
pub fn proxy_path(cluster: &str) -> String {
    format!("/apis/cluster.open-cluster-management.io/v1/managedclusters/{cluster}/proxy")
}

/// The ALPN protocol of a tunnel connection (never offered by ordinary clients).
pub const ALPN: &[u8] = b"ocm-tunnel/1";

/// The hub user a proxied request acts for (one value).
pub const USER_HEADER: &str = "x-ocm-proxy-user";

/// One of that user's hub groups (one header per group).
pub const GROUP_HEADER: &str = "x-ocm-proxy-group";

/// A ManagedServiceAccount token of the cluster the hub recognised as the caller's
/// credential: the agent passes it on as the bearer and impersonates nobody.
pub const TOKEN_HEADER: &str = "x-ocm-proxy-token";

/// The prefix of every header the tunnel itself sets.
pub const HEADER_PREFIX: &str = "x-ocm-proxy-";

/// Removes every header that could say who the caller is or carry a credential:
/// `Authorization`, `Proxy-Authorization`, cookies, `Impersonate-*`, `X-Remote-*` and the
/// tunnel's own. A caller's own must never reach a cluster (CVE-2026-17107's lesson), and
/// each end removes them before it sets any.
pub fn strip_identity(headers: &mut http::HeaderMap) {
    let names: Vec<http::HeaderName> = headers
        .keys()
        .filter(|name| {
            let n = name.as_str();
            n.starts_with("impersonate-")
                || n.starts_with("x-remote-")
                || n.starts_with(HEADER_PREFIX)
        })
        .cloned()
        .collect();
    for name in names {
        headers.remove(name);
    }
    for name in
        [http::header::AUTHORIZATION, http::header::PROXY_AUTHORIZATION, http::header::COOKIE]
    {
        headers.remove(name);
    }
}

/// Removes the hop-by-hop headers (RFC 9110 §7.6.1) and those `Connection` names, which
/// belong to one connection and are not passed on.
pub fn strip_hop_by_hop(headers: &mut http::HeaderMap) {
    let named: Vec<http::HeaderName> = headers
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| http::HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in [
        http::header::CONNECTION,
        http::header::TE,
        http::header::TRAILER,
        http::header::TRANSFER_ENCODING,
        http::header::UPGRADE,
        http::header::PROXY_AUTHENTICATE,
        http::HeaderName::from_static("keep-alive"),
        http::HeaderName::from_static("proxy-connection"),
    ] {
        headers.remove(name);
    }
}

/// Why a proxied path is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// Not an absolute path (`/…`).
    #[error("the path must start with '/'")]
    NotAbsolute,
    /// An empty segment (`//`), which some parsers read as a host.
    #[error("the path has an empty segment ('//')")]
    EmptySegment,
    /// `.` or `..`, however encoded.
    #[error("the path has a '.' or '..' segment")]
    DotSegment,
    /// A backslash, NUL, or an escape that decodes to a slash, backslash, NUL or `%` (which a
    /// second decoder would read again), or a malformed escape.
    #[error("the path has an encoded slash, a backslash, a NUL or a malformed escape")]
    Encoded,
}

/// Checks that `path` (as sent, percent-encoded, without its query) names a path of the
/// cluster's API server: absolute, no empty, `.` or `..` segment (decoded or not), and no
/// backslash, NUL or escape that decodes to `/`, `\`, `%` or NUL. A trailing `/` is allowed.
pub fn confined_path(path: &str) -> Result<(), PathError> {
    let rest = path.strip_prefix('/').ok_or(PathError::NotAbsolute)?;
    if rest.is_empty() {
        return Ok(());
    }
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    for segment in rest.split('/') {
        if segment.is_empty() {
            return Err(PathError::EmptySegment);
        }
        let decoded = decode(segment)?;
        if decoded == b"." || decoded == b".." {
            return Err(PathError::DotSegment);
        }
        if decoded.iter().any(|b| matches!(b, b'/' | b'\\' | b'%' | 0)) {
            return Err(PathError::Encoded);
        }
    }
    Ok(())
}

/// A path segment's bytes with its `%XX` escapes decoded.
fn decode(segment: &str) -> Result<Vec<u8>, PathError> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).ok_or(PathError::Encoded)?;
            let text = std::str::from_utf8(hex).map_err(|_| PathError::Encoded)?;
            out.push(u8::from_str_radix(text, 16).map_err(|_| PathError::Encoded)?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_and_hop_by_hop_headers_are_removed() {
        let mut h = http::HeaderMap::new();
        for (k, v) in [
            ("impersonate-user", "system:admin"),
            ("impersonate-group", "system:masters"),
            ("impersonate-extra-scopes", "x"),
            ("impersonate-uid", "1"),
            ("x-remote-user", "root"),
            ("x-remote-group", "system:masters"),
            ("x-ocm-proxy-user", "mallory"),
            ("authorization", "Bearer hub-token"),
            ("cookie", "s=1"),
            ("connection", "keep-alive, x-private"),
            ("x-private", "1"),
            ("te", "trailers"),
            ("accept", "application/json"),
        ] {
            h.append(http::HeaderName::from_static(k), http::HeaderValue::from_static(v));
        }
        strip_identity(&mut h);
        strip_hop_by_hop(&mut h);
        let left: Vec<&str> = h.keys().map(http::HeaderName::as_str).collect();
        assert_eq!(left, ["accept"]);
    }

    #[test]
    fn paths_of_the_api_pass() {
        for ok in [
            "/",
            "/api",
            "/api/v1/namespaces/default/pods",
            "/apis/apps/v1/deployments/",
            "/api/v1/namespaces/a%3Ab/configmaps",
            "/openapi/v3/apis/apps/v1",
            "/version",
        ] {
            assert_eq!(confined_path(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn escapes_are_refused() {
        let cases = [
            ("api/v1", PathError::NotAbsolute),
            ("http://evil.example/api", PathError::NotAbsolute),
            ("//evil.example/api", PathError::EmptySegment),
            ("/api//v1", PathError::EmptySegment),
            ("/api/../../metrics", PathError::DotSegment),
            ("/api/./v1", PathError::DotSegment),
            ("/api/%2e%2e/x", PathError::DotSegment),
            ("/api/%2E./x", PathError::DotSegment),
            ("/api/.%2e", PathError::DotSegment),
            ("/api/v1%2F..%2Fx", PathError::Encoded),
            ("/api/v1%2fx", PathError::Encoded),
            ("/api/v1%5Cx", PathError::Encoded),
            ("/api/v1\\..\\x", PathError::Encoded),
            ("/api/v1%00", PathError::Encoded),
            ("/api/v1%", PathError::Encoded),
            ("/api/v1%zz", PathError::Encoded),
            ("/api/%252e%252e", PathError::Encoded),
        ];
        // `%252e` decodes once to `%2e`, not a dot segment, yet one to a second decoder: an
        // escaped `%` is refused too.
        for (path, want) in cases {
            assert_eq!(confined_path(path), Err(want), "{path}");
        }
    }
}
