//! Managed service accounts (ocm-wave2.md §4.6), the built-in add-on `managed-serviceaccount`:
//! for every ManagedServiceAccount in the cluster's namespace on the hub, a ServiceAccount of
//! its name in the add-on's namespace on the cluster, a token for it from the cluster's
//! TokenRequest API, and that token projected back to the hub as the Secret of the same name
//! (`ca.crt`, `token`; owned by the ManagedServiceAccount), with the expiry and the Secret in
//! the object's status. A token is refreshed when its Secret is missing, it names another
//! account, the cluster no longer authenticates it, or 80 % of its real lifetime passed.
//!
//! It runs with the add-on's own hub identity (the Secret `managed-serviceaccount-hub-kubeconfig`
//! the add-on loop keeps), so it can do on the hub what the add-on's `hubPermissions` grant in
//! its cluster's namespace and nothing else.

use std::collections::BTreeSet;
use std::sync::Mutex;

use base64::Engine as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use ocm_proto::api::meta::{CONDITION_TRUE, Condition, condition, set_condition};
use serde_json::{Value, json};

use ocm_proto::api::authentication::v1beta1::{
    CONDITION_SECRET_CREATED, CONDITION_TOKEN_REPORTED, DEFAULT_VALIDITY, REASON_SECRET_CREATED,
    REASON_TOKEN_REPORTED,
};
use ocm_proto::api::authentication::{GROUP, LABEL_IS_MANAGED_SERVICE_ACCOUNT as LABEL};

use crate::cluster::{Cluster, Strategy};
use crate::error::AgentError;

/// The add-on's name.
pub const ADDON: &str = "managed-serviceaccount";

/// One round's inputs.
pub struct ManagedServiceAccounts<'a> {
    /// The hub, as the add-on's identity.
    pub hub: kube::Client,
    pub hub_url: &'a str,
    pub cluster_name: &'a str,
    /// The add-on's namespace on the cluster, where the ServiceAccounts live.
    pub namespace: &'a str,
    pub cluster: &'a dyn Cluster,
    /// The accounts made so far, to delete when their object goes.
    pub made: &'a Mutex<BTreeSet<String>>,
}

fn resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk(GROUP, "v1beta1", "ManagedServiceAccount");
    ApiResource::from_gvk_with_plural(&gvk, "managedserviceaccounts")
}

impl ManagedServiceAccounts<'_> {
    /// Reconciles every ManagedServiceAccount of the cluster; one's failure is logged and the
    /// others go on.
    pub async fn round(&self) -> Result<(), AgentError> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.hub.clone(), self.cluster_name, &resource());
        let list = api
            .list(&Default::default())
            .await
            .map_err(|e| crate::hub::explain(self.hub_url, e))?;
        let mut present = BTreeSet::new();
        for obj in list.items {
            let msa = serde_json::to_value(&obj).unwrap_or_default();
            let name = msa["metadata"]["name"].as_str().unwrap_or_default().to_owned();
            present.insert(name.clone());
            if msa["metadata"]["deletionTimestamp"].is_string() {
                continue;
            }
            if let Err(e) = self.account(&api, &msa).await {
                tracing::warn!(account = %name, error = %e, "managed service account failed");
            }
        }
        self.remove_gone(&present).await
    }

    async fn account(&self, api: &Api<DynamicObject>, msa: &Value) -> Result<(), AgentError> {
        let name = msa["metadata"]["name"].as_str().unwrap_or_default();
        let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": self.namespace, "labels": {LABEL: "true"}}});
        crate::cluster::ensure_namespace(self.cluster, self.namespace).await?;
        self.cluster.apply(&sa, None, &Strategy::Update).await?;
        self.made.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(name.to_owned());
        let secrets: Api<k8s_openapi::api::core::v1::Secret> =
            Api::namespaced(self.hub.clone(), self.cluster_name);
        let held = secrets.get_opt(name).await.map_err(|e| crate::hub::explain(self.hub_url, e))?;
        let token = held
            .as_ref()
            .and_then(|s| s.data.as_ref()?.get("token").cloned())
            .and_then(|b| String::from_utf8(b.0).ok());
        if !self.needs_refresh(msa, token.as_deref()).await? {
            return Ok(());
        }
        let validity = msa
            .pointer("/spec/rotation/validity")
            .and_then(Value::as_str)
            .unwrap_or(DEFAULT_VALIDITY);
        let seconds = ocm_proto::duration::parse_duration(validity)
            .map_err(|e| {
                AgentError::Invalid(format!("{name}: rotation.validity {validity:?}: {e}"))
            })?
            .as_secs();
        let (token, expires) = self
            .cluster
            .request_token(self.namespace, name, i64::try_from(seconds).unwrap_or(i64::MAX))
            .await?;
        self.write_secret(&secrets, msa, &token, held.is_some()).await?;
        self.report(api, msa, &expires).await?;
        tracing::info!(account = %name, expires = %expires, "managed service account token projected");
        Ok(())
    }

    /// Whether the account's token must be (re)issued.
    async fn needs_refresh(&self, msa: &Value, token: Option<&str>) -> Result<bool, AgentError> {
        let name = msa["metadata"]["name"].as_str().unwrap_or_default();
        let Some(token) = token.filter(|t| !t.is_empty()) else { return Ok(true) };
        let status = &msa["status"];
        let refreshed =
            status.pointer("/tokenSecretRef/lastRefreshTimestamp").and_then(Value::as_str);
        let expires = status["expirationTimestamp"].as_str();
        let (Some(refreshed), Some(expires)) = (refreshed, expires) else { return Ok(true) };
        let subject = format!("system:serviceaccount:{}:{name}", self.namespace);
        if jwt_subject(token).as_deref() != Some(subject.as_str()) {
            return Ok(true);
        }
        let at = |t: &str| t.parse::<k8s_openapi::jiff::Timestamp>().map(|t| t.as_second()).ok();
        let (Some(from), Some(to)) = (at(refreshed), at(expires)) else { return Ok(true) };
        if crate::clock::unix_now() > from + (to - from) * 4 / 5 {
            return Ok(true);
        }
        Ok(!self.cluster.token_authenticated(token).await?)
    }

    /// Creates or replaces the hub Secret of the account's token.
    async fn write_secret(
        &self,
        secrets: &Api<k8s_openapi::api::core::v1::Secret>,
        msa: &Value,
        token: &str,
        exists: bool,
    ) -> Result<(), AgentError> {
        let name = msa["metadata"]["name"].as_str().unwrap_or_default();
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let owner = json!({
            "apiVersion": msa["apiVersion"], "kind": msa["kind"], "name": name,
            "uid": msa["metadata"]["uid"], "controller": true, "blockOwnerDeletion": false,
        });
        let secret = json!({
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": self.cluster_name, "labels": {LABEL: "true"},
                         "ownerReferences": [owner]},
            "data": {"ca.crt": b64(&self.cluster.ca_bundle()), "token": b64(token)},
        });
        let secret: k8s_openapi::api::core::v1::Secret =
            serde_json::from_value(secret).map_err(|e| AgentError::Invalid(e.to_string()))?;
        let explain = |e| crate::hub::explain(self.hub_url, e);
        if exists {
            let params = PatchParams::default();
            secrets.patch(name, &params, &Patch::Merge(&secret)).await.map_err(explain)?;
        } else {
            secrets.create(&PostParams::default(), &secret).await.map_err(explain)?;
        }
        Ok(())
    }

    /// Writes the account's status: the Secret, its refresh time, the token's expiry.
    async fn report(
        &self,
        api: &Api<DynamicObject>,
        msa: &Value,
        expires: &str,
    ) -> Result<(), AgentError> {
        let name = msa["metadata"]["name"].as_str().unwrap_or_default();
        let mut conditions: Vec<Condition> =
            serde_json::from_value(msa["status"]["conditions"].clone()).unwrap_or_default();
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        for c in [
            condition(
                CONDITION_SECRET_CREATED,
                CONDITION_TRUE,
                REASON_SECRET_CREATED,
                "Secret created",
            ),
            condition(
                CONDITION_TOKEN_REPORTED,
                CONDITION_TRUE,
                REASON_TOKEN_REPORTED,
                "Token refreshed",
            ),
        ] {
            set_condition(&mut conditions, c, now.clone());
        }
        let body = json!({
            "metadata": {"resourceVersion": msa["metadata"]["resourceVersion"]},
            "status": {
                "conditions": conditions,
                "expirationTimestamp": expires,
                "tokenSecretRef": {"name": name, "lastRefreshTimestamp": now.0.to_string()},
            },
        });
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&body))
            .await
            .map_err(|e| crate::hub::explain(self.hub_url, e))?;
        Ok(())
    }

    /// Deletes the ServiceAccounts of accounts gone from the hub.
    async fn remove_gone(&self, present: &BTreeSet<String>) -> Result<(), AgentError> {
        let gone: Vec<String> = {
            let made = self.made.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            made.difference(present).cloned().collect()
        };
        for name in gone {
            let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": name, "namespace": self.namespace}});
            if self.cluster.get(&sa).await?.is_some() {
                let resource = self.cluster.resolve(&sa).await?;
                self.cluster.delete(&resource).await?;
            }
            self.made.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&name);
        }
        Ok(())
    }
}

/// The `sub` claim of a JWT (unverified: only to tell whose token it is).
fn jwt_subject(token: &str) -> Option<String> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: Value = serde_json::from_slice(&bytes).ok()?;
    claims["sub"].as_str().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_subject_of_a_jwt() {
        let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(br#"{"sub":"system:serviceaccount:ns:a","exp":1}"#);
        assert_eq!(
            jwt_subject(&format!("h.{claims}.s")).as_deref(),
            Some("system:serviceaccount:ns:a")
        );
        assert_eq!(jwt_subject("not a token"), None);
    }
}
