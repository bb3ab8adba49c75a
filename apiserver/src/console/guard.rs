//! What a console request must show to be served, beyond its session: that it comes from a page
//! of this origin. Browsers name where a request comes from (`Sec-Fetch-Site`, `Origin`); the
//! console's data and actions answer only requests from its own pages, so another site (or
//! another port of this host, which the cookie's `SameSite` alone does not tell apart) can
//! neither read through a signed-in user's session nor act with it. Actions and sign-out also
//! carry the session's own token, which only the console's pages know.

use http::{HeaderMap, header};

use super::session::{Session, same_secret};

/// The header a console page sends its session's token in.
pub(super) const CSRF_HEADER: &str = "x-csrf-token";

/// Why a request was refused.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct CrossOrigin(pub &'static str);

/// This request's own origin, `https://<host>` as the browser addressed it.
fn own_origin(headers: &HeaderMap, authority: Option<&str>) -> Option<String> {
    let host = authority.or_else(|| headers.get(header::HOST).and_then(|h| h.to_str().ok()))?;
    Some(format!("https://{host}"))
}

/// A read of data (`/ui/api/`): a browser's own `Sec-Fetch-Site` must be `same-origin`, and an
/// `Origin` it sends must be this one.
pub(super) fn same_origin_read(
    headers: &HeaderMap,
    authority: Option<&str>,
) -> Result<(), CrossOrigin> {
    if let Some(site) = headers.get("sec-fetch-site") {
        if site.as_bytes() != b"same-origin" {
            return Err(CrossOrigin("the request does not come from a page of this console"));
        }
    }
    origin_matches(headers, authority)
}

/// A write (sign-in, sign-out, an action): `Origin` must be present and this one, or, from a
/// browser that sends none, `Sec-Fetch-Site` must say `same-origin`.
pub(super) fn same_origin_write(
    headers: &HeaderMap,
    authority: Option<&str>,
) -> Result<(), CrossOrigin> {
    if headers.get(header::ORIGIN).is_some() {
        return origin_matches(headers, authority);
    }
    match headers.get("sec-fetch-site") {
        Some(site) if site.as_bytes() == b"same-origin" => Ok(()),
        _ => Err(CrossOrigin("the request names no origin")),
    }
}

fn origin_matches(headers: &HeaderMap, authority: Option<&str>) -> Result<(), CrossOrigin> {
    let Some(origin) = headers.get(header::ORIGIN) else { return Ok(()) };
    let own = own_origin(headers, authority);
    match (origin.to_str(), own) {
        (Ok(origin), Some(own)) if origin.eq_ignore_ascii_case(&own) => Ok(()),
        _ => Err(CrossOrigin("the request comes from another origin")),
    }
}

/// A write's token against cross-site requests: `given` (a header or a form field) must be the
/// session's.
pub(super) fn csrf_matches(session: &Session, given: Option<&str>) -> Result<(), CrossOrigin> {
    match given {
        Some(given) if same_secret(given, &session.csrf) => Ok(()),
        _ => Err(CrossOrigin("the request lacks this session's token")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn reads_from_another_site_or_port_are_refused() {
        let own = Some("127.0.0.1:6443");
        assert!(same_origin_read(&headers(&[("sec-fetch-site", "same-origin")]), own).is_ok());
        assert!(same_origin_read(&headers(&[]), own).is_ok());
        assert!(same_origin_read(&headers(&[("sec-fetch-site", "same-site")]), own).is_err());
        assert!(same_origin_read(&headers(&[("sec-fetch-site", "cross-site")]), own).is_err());
        let other_port = headers(&[("origin", "https://127.0.0.1:6444")]);
        assert!(same_origin_read(&other_port, own).is_err());
        assert!(same_origin_read(&headers(&[("origin", "https://127.0.0.1:6443")]), own).is_ok());
    }

    #[test]
    fn writes_must_name_this_origin() {
        let own = Some("hub.example:6443");
        assert!(same_origin_write(&headers(&[]), own).is_err());
        assert!(same_origin_write(&headers(&[("origin", "null")]), own).is_err());
        assert!(
            same_origin_write(&headers(&[("origin", "http://hub.example:6443")]), own).is_err()
        );
        assert!(
            same_origin_write(&headers(&[("origin", "https://hub.example:6443")]), own).is_ok()
        );
        assert!(same_origin_write(&headers(&[("sec-fetch-site", "same-origin")]), own).is_ok());
        let host_only =
            headers(&[("host", "hub.example:6443"), ("origin", "https://hub.example:6443")]);
        assert!(same_origin_write(&host_only, None).is_ok());
    }
}
