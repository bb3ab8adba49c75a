//! The hub binary's client commands (`ocm-hub token create|list|revoke`): they talk to a running
//! hub through the `kube` client and the data dir's `admin.kubeconfig`, as clusteradm talks to
//! a hub through client-go.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

use crate::auth::authn::{BOOTSTRAP_NAMESPACE, BOOTSTRAP_SECRET_PREFIX, BOOTSTRAP_SECRET_TYPE};
use crate::auth::bootstrap::bootstrap_token_secret;

/// Longest bootstrap token lifetime `token create` grants (kubeadm's default is a day; a week
/// at most keeps joins short-lived).
pub const MAX_TOKEN_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// A client command's failure.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The admin kubeconfig could not be read.
    #[error("reading {path}: {detail} (is DIR the hub's --data-dir?)")]
    Kubeconfig {
        /// The file.
        path: String,
        /// Why.
        detail: String,
    },
    /// The hub answered with an error or could not be reached.
    #[error("the hub: {}", hub_message(.0))]
    Hub(#[from] kube::Error),
    /// What the user asked for is not possible.
    #[error("{0}")]
    Usage(String),
    /// What the command needs is not on the hub (or not in a state it can act on).
    #[error("{0}")]
    HubState(String),
}

impl From<crate::auth::identity::IdentityError> for CliError {
    fn from(e: crate::auth::identity::IdentityError) -> CliError {
        CliError::Usage(e.to_string())
    }
}

/// What the hub said: a Status's message and reason, or the client's error.
fn hub_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) if !status.message.is_empty() => {
            format!("{} ({})", status.message, status.reason)
        }
        e => e.to_string(),
    }
}

/// A client for the hub whose data dir is `data_dir`.
pub async fn client(data_dir: &Path) -> Result<kube::Client, CliError> {
    let path = data_dir.join("admin.kubeconfig");
    crate::auth::pki::kubeconfig_client(&path)
        .await
        .map_err(|detail| CliError::Kubeconfig { path: path.display().to_string(), detail })
}

pub use ocm_proto::duration::parse_duration;

/// Checks a token lifetime: more than zero, at most [`MAX_TOKEN_TTL`].
pub fn check_ttl(ttl: Duration) -> Result<Duration, String> {
    if ttl.is_zero() {
        return Err("--ttl must be more than 0s".into());
    }
    if ttl > MAX_TOKEN_TTL {
        return Err(format!("--ttl must be at most {}h", MAX_TOKEN_TTL.as_secs() / 3600));
    }
    Ok(ttl)
}

/// Creates a bootstrap token valid for `ttl` and returns it as `<id>.<secret>`.
pub async fn token_create(client: kube::Client, ttl: Duration) -> Result<String, CliError> {
    let secrets: Api<Secret> = Api::namespaced(client, BOOTSTRAP_NAMESPACE);
    let (token, obj) =
        bootstrap_token_secret(ttl, "created by ocm-hub token create for joining managed clusters");
    let obj: Secret = serde_json::from_value(obj).map_err(|e| CliError::Usage(e.to_string()))?;
    secrets.create(&PostParams::default(), &obj).await?;
    Ok(token)
}

/// One listed bootstrap token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenInfo {
    /// Its id (the part before the dot; the secret is never listed).
    pub id: String,
    /// RFC 3339 expiry, empty for none.
    pub expiration: String,
    /// Its extra groups.
    pub groups: String,
}

/// The bootstrap tokens the hub holds, by id.
pub async fn token_list(client: kube::Client) -> Result<Vec<TokenInfo>, CliError> {
    let secrets: Api<Secret> = Api::namespaced(client, BOOTSTRAP_NAMESPACE);
    let lp = ListParams::default().fields(&format!("type={BOOTSTRAP_SECRET_TYPE}"));
    let mut out: Vec<TokenInfo> = secrets
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter_map(|s| {
            let data = s.data.unwrap_or_default();
            let text = |k: &str| {
                data.get(k).map(|b| String::from_utf8_lossy(&b.0).into_owned()).unwrap_or_default()
            };
            let id = text("token-id");
            (!id.is_empty()).then(|| TokenInfo {
                id,
                expiration: text("expiration"),
                groups: text("auth-extra-groups"),
            })
        })
        .collect();
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

/// Revokes a bootstrap token (given as its id or as the whole token): deletes its Secret, after
/// which the token stops working at once.
pub async fn token_revoke(client: kube::Client, token: &str) -> Result<String, CliError> {
    let id = token.split('.').next().unwrap_or_default();
    if !crate::auth::authn::is_bootstrap_token_id(id) {
        return Err(CliError::Usage(format!(
            "{token:?} is not a bootstrap token id (6 characters a-z, 0-9) or token"
        )));
    }
    let secrets: Api<Secret> = Api::namespaced(client, BOOTSTRAP_NAMESPACE);
    match secrets.delete(&format!("{BOOTSTRAP_SECRET_PREFIX}{id}"), &DeleteParams::default()).await
    {
        Ok(_) => Ok(id.to_owned()),
        Err(kube::Error::Api(e)) if e.code == 404 => {
            Err(CliError::Usage(format!("bootstrap token {id} does not exist")))
        }
        Err(e) => Err(e.into()),
    }
}

/// Whether a CSR's requester is a bootstrap identity (clusteradm accept's rule: a bootstrap
/// token user, or OCM's bootstrap service account).
fn from_bootstrap_identity(csr: &serde_json::Value) -> bool {
    let user = csr.pointer("/spec/username").and_then(serde_json::Value::as_str).unwrap_or("");
    user.starts_with(crate::auth::authn::BOOTSTRAP_USER_PREFIX)
        || user == "system:serviceaccount:open-cluster-management:agent-registration-bootstrap"
}

/// `ocm-hub accept`: for each cluster, approves its pending CSRs that are its agent's (the
/// approver's checks) and come from a bootstrap identity, then sets `hubAcceptsClient`. Tells
/// each step through `say`.
pub async fn accept(
    client: kube::Client,
    clusters: &[String],
    mut say: impl FnMut(String),
) -> Result<(), CliError> {
    use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
    use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
    let gvk =
        kube::api::GroupVersionKind::gvk(ocm_proto::api::cluster::GROUP, "v1", "ManagedCluster");
    let mcl: Api<DynamicObject> =
        Api::all_with(client.clone(), &ApiResource::from_gvk_with_plural(&gvk, "managedclusters"));
    let csrs: Api<CertificateSigningRequest> = Api::all(client);
    for cluster in clusters {
        match mcl.get_opt(cluster).await? {
            Some(_) => {}
            None => {
                return Err(CliError::HubState(format!(
                    "ManagedCluster {cluster} does not exist: run `klusterlet join ... --cluster-name {cluster}` on that cluster first"
                )));
            }
        }
        let lp = ListParams::default()
            .labels(&format!("{}={cluster}", crate::auth::cluster_rbac::CLUSTER_NAME_LABEL));
        let mut pending = Vec::new();
        for csr in csrs.list(&lp).await?.items {
            let name = csr.metadata.name.clone().unwrap_or_default();
            let decided =
                csr.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|c| {
                    c.iter().any(|c| matches!(c.type_.as_str(), "Approved" | "Denied" | "Failed"))
                });
            if decided {
                continue;
            }
            let value = serde_json::to_value(&csr).map_err(|e| CliError::Usage(e.to_string()))?;
            if !from_bootstrap_identity(&value) {
                say(format!(
                    "skipped CertificateSigningRequest {name}: not from a bootstrap identity"
                ));
                continue;
            }
            let requester = value
                .pointer("/spec/username")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("")
                .to_owned();
            match crate::controllers::registration::check_agent_request(&value) {
                Ok(check) => pending
                    .push((name, format!("{} (requested by {requester})", check.common_name))),
                Err(why) => say(format!("skipped CertificateSigningRequest {name}: {why}")),
            }
        }
        let mut agents: Vec<&str> = pending.iter().map(|(_, cn)| cn.as_str()).collect();
        agents.sort_unstable();
        agents.dedup();
        if agents.len() > 1 {
            return Err(CliError::HubState(format!(
                "several agents asked to join as {cluster} ({}): approve the right one with `kubectl certificate approve`",
                agents.join(", ")
            )));
        }
        if pending.is_empty() {
            say(format!("no pending CertificateSigningRequest for {cluster}"));
        }
        for (name, cn) in &pending {
            let body = json!({"status": {"conditions": [{
                "type": "Approved", "status": "True", "reason": "OcmHubAccept",
                "message": "approved by ocm-hub accept",
                "lastUpdateTime": crate::machinery::object::now_rfc3339(),
            }]}});
            csrs.patch_subresource("approval", name, &PatchParams::default(), &Patch::Merge(&body))
                .await?;
            say(format!("approved CertificateSigningRequest {name} for {cn}"));
        }
        let body = json!({"spec": {"hubAcceptsClient": true}});
        mcl.patch(cluster, &PatchParams::default(), &Patch::Merge(&body)).await?;
        say(format!("set hubAcceptsClient=true on ManagedCluster {cluster}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_lifetimes() {
        assert!(check_ttl(Duration::ZERO).is_err());
        assert!(check_ttl(MAX_TOKEN_TTL + Duration::from_secs(1)).is_err());
        assert!(check_ttl(MAX_TOKEN_TTL).is_ok());
    }
}
