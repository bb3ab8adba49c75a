//! Bootstrap tokens as the hub creates them: a random `<id>.<secret>` and its
//! `kube-system/bootstrap-token-<id>` Secret in kubeadm's form, with OCM's bootstrap group.

use std::time::Duration;

use rand::Rng as _;
use serde_json::json;

use crate::auth::authn::{BOOTSTRAP_NAMESPACE, BOOTSTRAP_SECRET_PREFIX, BOOTSTRAP_SECRET_TYPE};

fn random_chars(n: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    (0..n).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char).collect()
}

/// A new bootstrap token valid for `ttl`: the token (`<id>.<secret>`) and its
/// `kube-system/bootstrap-token-<id>` Secret, as kubeadm keeps them.
pub fn bootstrap_token_secret(ttl: Duration, description: &str) -> (String, serde_json::Value) {
    let (id, secret) = (random_chars(6), random_chars(16));
    let expires = crate::machinery::clock::now()
        + time::Duration::seconds(i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX / 2));
    let obj = bootstrap_token_object(
        &id,
        &secret,
        &crate::machinery::object::rfc3339(expires),
        description,
    );
    (format!("{id}.{secret}"), obj)
}

/// The Secret of bootstrap token `id.secret` expiring at `expiration` (RFC 3339), with OCM's
/// bootstrap group: what `token create` stores, for callers that choose the token themselves.
pub fn bootstrap_token_object(
    id: &str,
    secret: &str,
    expiration: &str,
    description: &str,
) -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": format!("{BOOTSTRAP_SECRET_PREFIX}{id}"),
            "namespace": BOOTSTRAP_NAMESPACE,
            "labels": {"app.kubernetes.io/managed-by": "ocm-hub"},
        },
        "type": BOOTSTRAP_SECRET_TYPE,
        "stringData": {
            "description": description,
            "token-id": id,
            "token-secret": secret,
            "expiration": expiration,
            "usage-bootstrap-authentication": "true",
            "auth-extra-groups": crate::auth::authz::OCM_BOOTSTRAP_GROUP,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_tokens_are_bootstrap_tokens() {
        let (token, secret) = bootstrap_token_secret(Duration::from_secs(60), "a test");
        assert!(crate::auth::authn::parse_bootstrap_token(&token).is_some());
        assert_eq!(secret["stringData"]["token-id"], token.split('.').next().unwrap());
    }
}
