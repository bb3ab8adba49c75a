//! Authentication: the chain that names the user of a request, in kube-apiserver's order
//! (front-proxy headers, client certificate, bearer token; the first that succeeds wins), the
//! bootstrap tokens kept as `kube-system/bootstrap-token-<id>` Secrets, the hub-signed
//! service-account tokens, and `TokenRequest` / `TokenReview`. Anonymous requests are refused
//! here; the health and version paths are answered before this runs.

use std::collections::BTreeMap;
use std::sync::Arc;

use http::HeaderMap;
use serde_json::{Value, json};
use sha2::Digest as _;

use crate::auth::authz;
use crate::auth::tls::Peer;
use crate::auth::tokens::{MAX_EXPIRATION_SECONDS, MIN_EXPIRATION_SECONDS, TokenAuthority};
use crate::machinery::error::ApiError;
use crate::machinery::object;
use crate::machinery::requester::Identity;
use crate::machinery::requester::UserInfo;
use crate::store::cache::CachedObject;
use crate::store::registry::Registry;
use ocm_proto::validation::FieldError;

/// The header naming the front-proxy's user (kube's `requestheader-username-headers`).
pub const REMOTE_USER: &str = "x-remote-user";
/// The header naming its groups, repeated.
pub const REMOTE_GROUP: &str = "x-remote-group";
/// The prefix of its extra values (`X-Remote-Extra-<key>`).
pub const REMOTE_EXTRA_PREFIX: &str = "x-remote-extra-";
/// The front-proxy uid header (1.32+, RemoteRequestHeaderUID).
pub const REMOTE_UID: &str = "x-remote-uid";

/// The namespace and name prefix of bootstrap token Secrets.
pub const BOOTSTRAP_NAMESPACE: &str = "kube-system";
/// `bootstrap-token-<id>`.
pub const BOOTSTRAP_SECRET_PREFIX: &str = "bootstrap-token-";
/// The Secret type of bootstrap tokens.
pub const BOOTSTRAP_SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";
/// The user prefix of bootstrap tokens (`system:bootstrap:<id>`).
pub const BOOTSTRAP_USER_PREFIX: &str = "system:bootstrap:";
/// The group every bootstrap token is in.
pub const BOOTSTRAPPERS_GROUP: &str = "system:bootstrappers";
/// The extra key kube-apiserver records a service-account token's id under.
pub const CREDENTIAL_ID_EXTRA: &str = "authentication.kubernetes.io/credential-id";

/// A request nothing authenticated (a 401), with the bearer token it carried, if any.
#[derive(Debug)]
pub struct Unauthenticated {
    /// The token this hub did not accept.
    pub token: Option<String>,
}

/// The authenticator of one hub.
#[derive(Debug)]
pub struct Authenticator {
    /// Signs and verifies the hub's service-account tokens.
    pub tokens: TokenAuthority,
    registry: Registry,
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

pub use ocm_proto::validation::{is_bootstrap_token_id, parse_bootstrap_token};

impl Authenticator {
    /// An authenticator over the registry's cached Secrets and ServiceAccounts.
    pub fn new(tokens: TokenAuthority, registry: Registry) -> Authenticator {
        Authenticator { tokens, registry }
    }

    /// The user of a request: front-proxy headers (only from a front-proxy connection; they are
    /// always removed from the request), then the client certificate, then a bearer token.
    /// Nothing that authenticates is [`Unauthenticated`], carrying a bearer token this hub did
    /// not accept (for a delegate to try).
    pub fn authenticate(
        &self,
        peer: &Peer,
        headers: &mut HeaderMap,
    ) -> Result<Identity, Unauthenticated> {
        let now = crate::machinery::clock::now().unix_timestamp();
        let proxied = take_request_headers(headers);
        let mut why = String::new();
        match peer {
            Peer::FrontProxy { not_after } if *not_after > now => {
                if let Some(user) = proxied {
                    return Ok(Identity::new(user));
                }
            }
            Peer::FrontProxy { .. } => why = "the front-proxy certificate has expired".into(),
            // The connection's user, shared: nothing is copied per request.
            Peer::User { user, not_after } if *not_after > now => return Ok(Arc::clone(user)),
            Peer::User { .. } => why = "the client certificate has expired".into(),
            Peer::Rejected(reason) => why.clone_from(reason),
            Peer::Anonymous => {}
        }
        let mut refused_token = None;
        if let Some(token) = bearer(headers) {
            let user = self.authenticate_token(&token, now);
            headers.remove(http::header::AUTHORIZATION);
            match user {
                Ok(user) => return Ok(Identity::new(user)),
                Err(reason) => {
                    why = reason;
                    refused_token = Some(token);
                }
            }
        }
        if !why.is_empty() {
            tracing::debug!(reason = %why, "authentication failed");
        }
        Err(Unauthenticated { token: refused_token })
    }

    /// The user a bearer token names, or why it names none.
    pub fn authenticate_token(&self, token: &str, now: i64) -> Result<UserInfo, String> {
        if let Some((id, secret)) = parse_bootstrap_token(token) {
            return self.bootstrap_user(id, secret, now);
        }
        if !crate::auth::tokens::looks_like_jwt(token) {
            return Err("the bearer token is neither a bootstrap token nor a JWT".into());
        }
        let claims = self.tokens.verify(token).map_err(|e| e.to_string())?;
        self.service_account_user(claims)
    }

    /// The user of a verified service-account token: the account must still exist as the one
    /// the token was issued for.
    fn service_account_user(
        &self,
        claims: crate::auth::tokens::Claims,
    ) -> Result<UserInfo, String> {
        let ns = &claims.kube.namespace;
        let sa = &claims.kube.serviceaccount;
        let account = self.cached("serviceaccounts", ns, &sa.name)?;
        if *account.uid != *sa.uid {
            return Err(format!("service account {ns}/{} has been deleted", sa.name));
        }
        let mut extra = BTreeMap::new();
        extra.insert(CREDENTIAL_ID_EXTRA.to_owned(), vec![format!("JTI={}", claims.jti)]);
        Ok(UserInfo {
            name: claims.sub,
            uid: sa.uid.clone(),
            groups: vec![
                authz::ALL_SERVICE_ACCOUNTS_GROUP.to_owned(),
                format!("{}:{ns}", authz::ALL_SERVICE_ACCOUNTS_GROUP),
                authz::AUTHENTICATED_GROUP.to_owned(),
            ],
            extra,
        })
    }

    /// An object as the watch cache holds it now (deleted objects are gone at once), shared
    /// rather than copied.
    fn cached(
        &self,
        plural: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<CachedObject>, String> {
        let rt = self
            .registry
            .scheme
            .lookup("", "v1", plural)
            .ok_or_else(|| format!("this hub serves no {plural}"))?;
        match self.registry.cache.get(&rt.prefix, &rt.key(namespace, name)) {
            Ok(Some(obj)) if !obj.deleting => Ok(obj),
            Ok(_) => Err(format!("{plural} {namespace}/{name} not found")),
            Err(e) => Err(e.message),
        }
    }

    /// kube-apiserver's bootstrap token authenticator: the Secret `bootstrap-token-<id>` of
    /// type `bootstrap.kubernetes.io/token` with the same `token-id` and `token-secret`
    /// (compared as digests), `usage-bootstrap-authentication: "true"`, an `expiration` not
    /// passed and extra groups only under `system:bootstrappers:`.
    fn bootstrap_user(&self, id: &str, secret: &str, now: i64) -> Result<UserInfo, String> {
        let name = format!("{BOOTSTRAP_SECRET_PREFIX}{id}");
        let cached = self.cached("secrets", BOOTSTRAP_NAMESPACE, &name)?;
        let value = cached.value();
        let obj = &*value;
        if str_at(obj, "/type") != BOOTSTRAP_SECRET_TYPE {
            return Err(format!("secret {name} is not a bootstrap token"));
        }
        let field = |key: &str| ocm_proto::api::meta::secret_data(obj, key).unwrap_or_default();
        // Compared as digests, so the time taken says nothing about the stored secret.
        let digest = |s: &str| sha2::Sha256::digest(s.as_bytes());
        if digest(&field("token-secret")) != digest(secret) {
            return Err(format!("bootstrap token {id}: wrong secret"));
        }
        if field("token-id") != id {
            return Err(format!("secret {name} holds another token id"));
        }
        if field("usage-bootstrap-authentication") != "true" {
            return Err(format!("bootstrap token {id} is not for authentication"));
        }
        let expiration = field("expiration");
        if !expiration.is_empty() {
            let at = time::OffsetDateTime::parse(
                &expiration,
                &time::format_description::well_known::Rfc3339,
            )
            .map_err(|_| format!("bootstrap token {id}: unreadable expiration"))?;
            if at.unix_timestamp() <= now {
                return Err(format!("bootstrap token {id} expired at {expiration}"));
            }
        }
        let mut groups = vec![BOOTSTRAPPERS_GROUP.to_owned()];
        for g in field("auth-extra-groups").split(',').map(str::trim).filter(|g| !g.is_empty()) {
            // As kube-apiserver: a group outside system:bootstrappers:* fails the token.
            if !g.starts_with("system:bootstrappers:") {
                return Err(format!("bootstrap token {id}: extra group {g:?} is not allowed"));
            }
            if !groups.iter().any(|h| h == g) {
                groups.push(g.to_owned());
            }
        }
        groups.push(authz::AUTHENTICATED_GROUP.to_owned());
        Ok(UserInfo { name: format!("{BOOTSTRAP_USER_PREFIX}{id}"), groups, ..UserInfo::default() })
    }

    /// `POST .../serviceaccounts/<name>/token`: a `TokenRequest` answered with a signed token
    /// for that account (`kubectl create token`). The account is read from storage, and the
    /// answer waits until the watch cache (which authentication reads) holds it, so the token
    /// works from the moment it is returned.
    pub async fn token_request(
        &self,
        rt: &crate::machinery::scheme::ResourceType,
        namespace: &str,
        name: &str,
        body: &Value,
    ) -> Result<Value, ApiError> {
        let account = self.registry.get(rt, namespace, name, None).await?;
        let rev = object::meta_str(&account, "resourceVersion").parse().unwrap_or(0);
        self.registry.cache.wait_for(rev, std::time::Duration::from_secs(1)).await;
        let spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
        let seconds = match spec.get("expirationSeconds") {
            None | Some(Value::Null) => 3600,
            Some(v) => v.as_i64().ok_or_else(|| {
                invalid_token_request(
                    name,
                    FieldError::invalid("spec.expirationSeconds", v.clone(), "must be an integer"),
                )
            })?,
        };
        if seconds < MIN_EXPIRATION_SECONDS {
            return Err(invalid_token_request(
                name,
                FieldError::invalid(
                    "spec.expirationSeconds",
                    json!(seconds),
                    "may not specify a duration less than 10 minutes",
                ),
            ));
        }
        // Longer requests are shortened to the maximum, as kube-apiserver does with
        // --service-account-max-token-expiration.
        let seconds = seconds.min(MAX_EXPIRATION_SECONDS);
        if spec.get("boundObjectRef").is_some_and(|b| !b.is_null()) {
            return Err(invalid_token_request(
                name,
                FieldError::invalid(
                    "spec.boundObjectRef",
                    spec["boundObjectRef"].clone(),
                    "bound tokens are not supported by this hub",
                ),
            ));
        }
        let audiences = object::strings(spec.get("audiences"));
        let now = crate::machinery::clock::now().unix_timestamp();
        let uid = object::uid(&account);
        let (token, claims) = self
            .tokens
            .issue(namespace, name, uid, &audiences, now, seconds)
            .map_err(ApiError::internal)?;
        let expires = time::OffsetDateTime::from_unix_timestamp(claims.exp)
            .map(object::rfc3339)
            .unwrap_or_default();
        Ok(json!({
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": null},
            "spec": {"audiences": claims.aud, "expirationSeconds": seconds, "boundObjectRef": null},
            "status": {"token": token, "expirationTimestamp": expires},
        }))
    }

    /// `TokenReview`: whether `spec.token` authenticates for one of `spec.audiences` (the
    /// hub's own when none are given), and as whom; `status.audiences` is the overlap.
    pub fn token_review(&self, spec: &Value) -> Value {
        let token = str_at(spec, "/token");
        let asked = object::strings(spec.get("audiences"));
        let wanted = if asked.is_empty() { &self.tokens.audiences } else { &asked };
        let overlap_of = |auds: &[String]| -> Vec<String> {
            auds.iter().filter(|a| wanted.contains(a)).cloned().collect()
        };
        let now = crate::machinery::clock::now().unix_timestamp();
        // One verification, whatever the token's audience; then the overlap decides.
        let (user, overlap) = if let Some((id, secret)) = parse_bootstrap_token(token) {
            // Bootstrap tokens carry no audience: they are for this hub's own API only.
            (self.bootstrap_user(id, secret, now), overlap_of(&self.tokens.audiences))
        } else {
            match self.tokens.verify_any_audience(token) {
                Ok(claims) => {
                    let overlap = overlap_of(&claims.aud);
                    (self.service_account_user(claims), overlap)
                }
                Err(e) => (Err(e.to_string()), Vec::new()),
            }
        };
        let user = if overlap.is_empty() {
            Err("the token is not for the audiences asked".to_owned())
        } else {
            user
        };
        match user {
            Ok(user) => json!({
                "authenticated": true,
                "user": user_json(&user),
                "audiences": overlap,
            }),
            Err(_) => json!({"authenticated": false, "error": "invalid bearer token"}),
        }
    }
}

fn invalid_token_request(name: &str, err: FieldError) -> ApiError {
    ApiError::invalid("authentication.k8s.io", "TokenRequest", name, &[err])
}

/// A user as the review kinds write it (`username`, `uid`, `groups`, `extra`).
pub fn user_json(user: &UserInfo) -> Value {
    let mut out = json!({"username": user.name, "groups": user.groups});
    if !user.uid.is_empty() {
        out["uid"] = json!(user.uid);
    }
    if !user.extra.is_empty() {
        out["extra"] = json!(user.extra);
    }
    out
}

/// The bearer token of an `Authorization` header.
pub(crate) fn bearer(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then(|| token.to_owned())
}

/// Removes the front-proxy headers from a request, returning the user they name (the first
/// non-empty `X-Remote-User`; groups from every `X-Remote-Group`; extra keys percent-decoded
/// and lower-cased). The caller decides whether the connection may name users at all.
fn take_request_headers(headers: &mut HeaderMap) -> Option<UserInfo> {
    let values = |headers: &HeaderMap, name: &str| -> Vec<String> {
        headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).map(str::to_owned).collect()
    };
    let name = values(headers, REMOTE_USER).into_iter().find(|u| !u.is_empty());
    let uid = values(headers, REMOTE_UID).into_iter().next().unwrap_or_default();
    let mut groups = values(headers, REMOTE_GROUP);
    let extra_keys: Vec<http::HeaderName> =
        headers.keys().filter(|k| k.as_str().starts_with(REMOTE_EXTRA_PREFIX)).cloned().collect();
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for key in extra_keys {
        let raw = &key.as_str()[REMOTE_EXTRA_PREFIX.len()..];
        let decoded = percent_decode(raw).to_lowercase();
        extra.entry(decoded).or_default().extend(values(headers, key.as_str()));
        headers.remove(&key);
    }
    for h in [REMOTE_USER, REMOTE_GROUP, REMOTE_UID] {
        headers.remove(h);
    }
    let name = name?;
    if !groups.iter().any(|g| g == authz::AUTHENTICATED_GROUP) {
        groups.push(authz::AUTHENTICATED_GROUP.to_owned());
    }
    Some(UserInfo { name, uid, groups, extra })
}

/// URL path unescaping (`%2F` → `/`); malformed escapes are kept as written.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = &bytes[i + 1..i + 3];
            let text =
                std::str::from_utf8(hex).ok().filter(|_| hex.iter().all(u8::is_ascii_hexdigit));
            if let Some(b) = text.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bootstrap_token_format() {
        assert_eq!(
            parse_bootstrap_token("abcdef.0123456789abcdef"),
            Some(("abcdef", "0123456789abcdef"))
        );
        for bad in [
            "abcde.0123456789abcdef",
            "ABCDEF.0123456789abcdef",
            "abcdef.0123456789abcde",
            "abcdef0123456789abcdef",
            "abcdef.0123456789abcdef.x",
        ] {
            assert_eq!(parse_bootstrap_token(bad), None, "{bad}");
        }
    }

    #[test]
    fn front_proxy_headers_are_read_and_always_removed() {
        let mut h = HeaderMap::new();
        h.append("X-Remote-User", "".parse().unwrap());
        h.append("X-Remote-User", "alice".parse().unwrap());
        h.append("X-Remote-Group", "g1".parse().unwrap());
        h.append("X-Remote-Group", "g2".parse().unwrap());
        h.append("X-Remote-Extra-Acme.com%2Fproject", "p1".parse().unwrap());
        h.append("X-Remote-Extra-Scopes", "s1".parse().unwrap());
        h.append("X-Remote-Extra-Scopes", "s2".parse().unwrap());
        h.append("Accept", "application/json".parse().unwrap());
        let user = take_request_headers(&mut h).unwrap();
        assert_eq!(user.name, "alice");
        assert_eq!(user.groups, ["g1", "g2", "system:authenticated"]);
        assert_eq!(user.extra["acme.com/project"], ["p1"]);
        assert_eq!(user.extra["scopes"], ["s1", "s2"]);
        assert_eq!(h.len(), 1, "only Accept is left: {h:?}");
        let mut none = HeaderMap::new();
        none.append("X-Remote-Group", "g1".parse().unwrap());
        assert!(take_request_headers(&mut none).is_none());
        assert!(none.is_empty());
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%2Fb"), "a/b");
        assert_eq!(percent_decode("a%2"), "a%2");
        assert_eq!(percent_decode("%zz"), "%zz");
        assert_eq!(percent_decode("x%41"), "xA");
        assert_eq!(percent_decode("%+1"), "%+1");
    }
}
