//! Console sessions: a signed-in user's bearer token kept on the hub under a random session id,
//! which the browser holds only as a `Secure`, `HttpOnly`, `SameSite=Strict` cookie. The token
//! never reaches a URL or a script; each session has its own token against cross-site requests
//! (the synchronizer token pattern). Sessions end at sign-out, after [`IDLE`] unused, after
//! [`LIFETIME`] in all, or when the hub stops; they are this replica's own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use http::HeaderMap;

/// The cookie that names a session.
pub(super) const COOKIE: &str = "ocm-console";
/// A session unused this long ends.
pub(super) const IDLE: Duration = Duration::from_secs(60 * 60);
/// A session ends this long after sign-in, however much it is used.
pub(super) const LIFETIME: Duration = Duration::from_secs(12 * 60 * 60);
/// The most sessions one replica keeps; past it the least recently used ends.
pub(super) const MAX_SESSIONS: usize = 10_000;

/// One signed-in user.
#[derive(Debug)]
pub(super) struct Session {
    /// The bearer token every API call of this session carries.
    pub(super) token: Arc<str>,
    /// The user the token named at sign-in (shown, never used to authorize).
    pub(super) user: String,
    /// The session's token against cross-site requests.
    pub(super) csrf: String,
    started: Instant,
    used: Mutex<Instant>,
}

impl Session {
    fn live(&self, now: Instant) -> bool {
        let used = *self.used.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        now.duration_since(self.started) < LIFETIME && now.duration_since(used) < IDLE
    }

    fn touch(&self, now: Instant) {
        *self.used.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = now;
    }

    fn last_used(&self) -> Instant {
        *self.used.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The sessions of this replica.
#[derive(Debug, Default)]
pub(super) struct Sessions {
    by_id: Mutex<HashMap<String, Arc<Session>>>,
}

/// 32 random bytes, URL-safe base64 without padding.
fn random_id() -> String {
    let bytes: [u8; 32] = rand::random();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

impl Sessions {
    /// Starts a session for `user` with `token`; returns its id (the cookie's value).
    pub(super) fn start(&self, token: &str, user: String) -> (String, Arc<Session>) {
        let now = Instant::now();
        let id = random_id();
        let session = Arc::new(Session {
            token: Arc::from(token),
            user,
            csrf: random_id(),
            started: now,
            used: Mutex::new(now),
        });
        let mut by_id = self.by_id.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        by_id.retain(|_, s| s.live(now));
        if by_id.len() >= MAX_SESSIONS {
            let oldest = by_id.iter().min_by_key(|(_, s)| s.last_used()).map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                by_id.remove(&oldest);
            }
        }
        by_id.insert(id.clone(), Arc::clone(&session));
        (id, session)
    }

    /// The live session a request's cookie names, marked used.
    pub(super) fn of(&self, headers: &HeaderMap) -> Option<Arc<Session>> {
        let id = cookie(headers, COOKIE)?;
        let now = Instant::now();
        let mut by_id = self.by_id.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let session = by_id.get(id)?;
        if !session.live(now) {
            by_id.remove(id);
            return None;
        }
        session.touch(now);
        Some(Arc::clone(session))
    }

    /// Ends the session a request's cookie names, if any.
    pub(super) fn end(&self, headers: &HeaderMap) {
        if let Some(id) = cookie(headers, COOKIE) {
            self.by_id.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(id);
        }
    }

    /// Ends every session that signed in with `token` (the token stopped authenticating).
    pub(super) fn end_token(&self, token: &str) {
        let mut by_id = self.by_id.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        by_id.retain(|_, s| &*s.token != token);
    }
}

/// The value of cookie `name` in a request's `Cookie` headers.
pub(super) fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// The `Set-Cookie` value that hands the browser session `id`.
pub(super) fn set_cookie(id: &str) -> String {
    format!(
        "{COOKIE}={id}; Path=/ui; Max-Age={}; Secure; HttpOnly; SameSite=Strict",
        LIFETIME.as_secs()
    )
}

/// The `Set-Cookie` value that makes the browser forget its session.
pub(super) fn clear_cookie() -> String {
    format!("{COOKIE}=; Path=/ui; Max-Age=0; Secure; HttpOnly; SameSite=Strict")
}

/// Whether two secrets are equal, in time that does not depend on where they differ.
pub(super) fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_cookie(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(http::header::COOKIE, value.parse().unwrap());
        h
    }

    #[test]
    fn a_session_is_found_by_its_cookie_and_ended() {
        let sessions = Sessions::default();
        let (id, s) = sessions.start("tok", "alice".into());
        assert_ne!(id, s.csrf);
        assert_eq!(id.len(), 43);
        let headers = with_cookie(&format!("other=1; {COOKIE}={id}"));
        assert_eq!(sessions.of(&headers).unwrap().user, "alice");
        assert!(sessions.of(&with_cookie(&format!("{COOKIE}=x{id}"))).is_none());
        sessions.end(&headers);
        assert!(sessions.of(&headers).is_none());
    }

    #[test]
    fn sessions_of_a_token_end_together() {
        let sessions = Sessions::default();
        let (a, _) = sessions.start("tok", "alice".into());
        let (b, _) = sessions.start("other", "bob".into());
        sessions.end_token("tok");
        assert!(sessions.of(&with_cookie(&format!("{COOKIE}={a}"))).is_none());
        assert!(sessions.of(&with_cookie(&format!("{COOKIE}={b}"))).is_some());
    }

    #[test]
    fn cookies_are_secure_http_only_and_strict() {
        let c = set_cookie("abc");
        for part in ["ocm-console=abc", "Path=/ui", "Secure", "HttpOnly", "SameSite=Strict"] {
            assert!(c.split("; ").any(|p| p == part), "{c} lacks {part}");
        }
        assert!(clear_cookie().contains("Max-Age=0"));
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "ab"));
    }
}
