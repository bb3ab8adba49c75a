//! Delegation to a kube-apiserver, for the hub running aggregated behind one (kube-api.md §9.5,
//! §9.6): bearer tokens the hub did not issue are checked with a `TokenReview`, and requests the
//! hub's own RBAC denies are asked again with a `SubjectAccessReview`. Answers, allow and deny
//! alike, are cached for 10 s, as k8s.io/apiserver's delegating authenticator and authorizer do.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::Digest as _;

use crate::machinery::error::ApiError;
use crate::machinery::requester::{Attributes, UserInfo};

/// How long an answer is reused.
const CACHE_TTL: Duration = Duration::from_secs(10);
/// Answers kept at most; the cache is emptied when full (answers are cheap to ask again).
const CACHE_MAX: usize = 10_000;

/// Why the delegate could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum DelegateError {
    /// The kubeconfig or in-cluster configuration did not load.
    #[error("delegation to kube-apiserver ({source_name}): {detail}")]
    Config {
        /// `in-cluster` or the kubeconfig path.
        source_name: String,
        /// Why.
        detail: String,
    },
}

/// Answers by key, each until an instant.
type Cache<K, V> = Mutex<HashMap<K, (Instant, V)>>;

/// A client for the kube-apiserver answering reviews.
pub struct Delegate {
    client: kube::Client,
    /// By the SHA-256 of the token.
    tokens: Cache<[u8; 32], Option<UserInfo>>,
    /// By the review's spec.
    decisions: Cache<String, bool>,
}

impl std::fmt::Debug for Delegate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delegate").finish_non_exhaustive()
    }
}

fn remember<K: std::hash::Hash + Eq, V>(cache: &Cache<K, V>, key: K, value: V) {
    let mut map = cache.lock().unwrap_or_else(|e| e.into_inner());
    if map.len() >= CACHE_MAX {
        map.clear();
    }
    map.insert(key, (Instant::now() + CACHE_TTL, value));
}

fn recall<K: std::hash::Hash + Eq, V: Clone>(cache: &Cache<K, V>, key: &K) -> Option<V> {
    let map = cache.lock().unwrap_or_else(|e| e.into_inner());
    map.get(key).filter(|(until, _)| *until > Instant::now()).map(|(_, v)| v.clone())
}

impl Delegate {
    /// Connects with `source`: `in-cluster` (the pod's ServiceAccount) or a kubeconfig path.
    pub async fn connect(source: &str) -> Result<Delegate, DelegateError> {
        let bad = |detail: String| DelegateError::Config { source_name: source.to_owned(), detail };
        let client = if source == "in-cluster" {
            let config = kube::Config::incluster().map_err(|e| bad(e.to_string()))?;
            kube::Client::try_from(config).map_err(|e| bad(e.to_string()))?
        } else {
            crate::auth::pki::kubeconfig_client(std::path::Path::new(source)).await.map_err(bad)?
        };
        Ok(Delegate { client, tokens: Mutex::default(), decisions: Mutex::default() })
    }

    async fn create(&self, path: &str, body: &Value) -> Option<Value> {
        let bytes = serde_json::to_vec(body).ok()?;
        let req = http::Request::post(path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(bytes)
            .ok()?;
        match self.client.request::<Value>(req).await {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::warn!(error = %e, path, "delegated review failed");
                None
            }
        }
    }

    /// The user kube-apiserver says `token` belongs to, if any.
    pub async fn authenticate(&self, token: &str) -> Option<UserInfo> {
        let key: [u8; 32] = sha2::Sha256::digest(token.as_bytes()).into();
        if let Some(answer) = recall(&self.tokens, &key) {
            return answer;
        }
        let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                          "spec": {"token": token}});
        // An unreachable kube-apiserver is not remembered: the next request asks again.
        let review = self.create("/apis/authentication.k8s.io/v1/tokenreviews", &body).await?;
        let status = &review["status"];
        let user = (status["authenticated"] == true).then(|| {
            let strings = |v: &Value| crate::machinery::object::strings(Some(v));
            let u = &status["user"];
            let mut groups = strings(&u["groups"]);
            if !groups.iter().any(|g| g == crate::auth::authz::AUTHENTICATED_GROUP) {
                groups.push(crate::auth::authz::AUTHENTICATED_GROUP.to_owned());
            }
            UserInfo {
                name: u["username"].as_str().unwrap_or_default().to_owned(),
                uid: u["uid"].as_str().unwrap_or_default().to_owned(),
                groups,
                extra: u["extra"]
                    .as_object()
                    .map(|m| m.iter().map(|(k, v)| (k.clone(), strings(v))).collect())
                    .unwrap_or_default(),
            }
        });
        let user = user.filter(|u| !u.name.is_empty());
        remember(&self.tokens, key, user.clone());
        user
    }

    /// Whether kube-apiserver allows `user` to do `attrs`; a review that cannot be had is a 500,
    /// as k8s.io/apiserver answers it.
    pub async fn allowed(&self, user: &UserInfo, attrs: &Attributes) -> Result<bool, ApiError> {
        let mut spec = json!({
            "user": user.name,
            "groups": user.groups,
        });
        if !user.uid.is_empty() {
            spec["uid"] = json!(user.uid);
        }
        if !user.extra.is_empty() {
            spec["extra"] = json!(user.extra);
        }
        if attrs.resource_request {
            spec["resourceAttributes"] = json!({
                "namespace": attrs.namespace,
                "verb": attrs.verb,
                "group": attrs.api_group,
                "version": attrs.api_version,
                "resource": attrs.resource,
                "subresource": attrs.subresource,
                "name": attrs.name,
            });
        } else {
            spec["nonResourceAttributes"] = json!({"path": attrs.path, "verb": attrs.verb});
        }
        let key = spec.to_string();
        if let Some(allowed) = recall(&self.decisions, &key) {
            return Ok(allowed);
        }
        let body = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                          "spec": spec});
        let review = self
            .create("/apis/authorization.k8s.io/v1/subjectaccessreviews", &body)
            .await
            .ok_or_else(|| ApiError::internal("the delegated SubjectAccessReview failed"))?;
        let allowed = review["status"]["allowed"] == true;
        remember(&self.decisions, key, allowed);
        Ok(allowed)
    }
}
