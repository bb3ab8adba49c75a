//! The add-on CSR approver (ocm-wave2.md §2.3, §7): a request an agent makes for an add-on's
//! `KubeClient` identity is approved only when every part of it is exactly what the add-on's
//! registration on that cluster names. The request carries the `cluster-name` and `addon-name`
//! labels; the add-on is installed on that cluster with a KubeClient registration; the
//! requester is that cluster's agent (`system:open-cluster-management:<cluster>:<agent>`, in the
//! group `system:open-cluster-management:<cluster>`; no prefix test, so `c10`'s agent never
//! passes for `c1`); the signer is `kubernetes.io/kube-apiserver-client`; the usages are client
//! auth (with digital signature and key encipherment); the subject's CN is the registration's
//! user and its Os are exactly its groups. Anything else waits for an admin. Registration's
//! signer issues approved `kube-apiserver-client` requests; a `CustomSigner` registration's
//! requests are checked the same way against its signer and subject (OCM approves them
//! unchecked) and issued here, for 24 hours, with the CA of the Secret its template names
//! (`signingCA`, in `open-cluster-management-hub` unless it says).

use std::collections::BTreeSet;
use std::sync::Arc;

use base64::Engine as _;
use ocm_proto::api::addon::v1beta1::{
    ManagedClusterAddOn, REGISTRATION_TYPE_CUSTOM_SIGNER, REGISTRATION_TYPE_KUBE_CLIENT,
};
use ocm_proto::api::addon::{KUBE_APISERVER_CLIENT_SIGNER_NAME, LABEL_ADDON_NAME};
use ocm_proto::api::cluster::{LABEL_CLUSTER_NAME, agent_group};
use serde_json::Value;

use super::{AddonManager, WORKERS};
use crate::controllers::registration::csr::{
    approve_request, check_client_usages, condition_types, request_pem, request_subject_of,
    requester,
};
use crate::controllers::runtime::{Action, Runtime, Watch};
use crate::machinery::error::ApiError;
use crate::machinery::object;
use crate::store::cache::CachedObject;

const AGENT_PREFIX: &str = "system:open-cluster-management:";
const APPROVED_REASON: &str = "AutoApprovedByAddonManager";
/// Where a custom signer's CA Secret is when its template names no namespace.
const DEFAULT_SIGNING_NAMESPACE: &str = "open-cluster-management-hub";
/// How long a custom signer's certificates are valid (OCM: 24 h).
const CUSTOM_SIGNER_VALIDITY: time::Duration = time::Duration::hours(24);

/// Starts the approver: one key per CertificateSigningRequest of an add-on.
pub(super) fn start(m: &Arc<AddonManager>, runtime: &Runtime) {
    let Some(csrs) =
        runtime.registry.scheme.lookup("certificates.k8s.io", "v1", "certificatesigningrequests")
    else {
        return;
    };
    let of_addon = |c: &CachedObject| match c.label(LABEL_ADDON_NAME) {
        Some(_) => vec![c.namespace_name().1.to_owned()],
        None => Vec::new(),
    };
    let watches = vec![Watch::new(csrs, of_addon)];
    let m = Arc::clone(m);
    let csrs = Arc::clone(csrs);
    runtime.run("addon-csr", watches, WORKERS, move |key| {
        let (m, csrs) = (Arc::clone(&m), Arc::clone(&csrs));
        async move { m.approve(&csrs, &key).await }
    });
}

impl AddonManager {
    async fn approve(
        &self,
        csrs: &crate::machinery::scheme::ResourceType,
        name: &str,
    ) -> Result<Action, ApiError> {
        let Some(cached) = self.registry.cached(csrs, "", name) else { return Ok(Action::Done) };
        let csr = cached.value();
        let (Some(cluster), Some(addon)) =
            (object::label(&csr, LABEL_CLUSTER_NAME), object::label(&csr, LABEL_ADDON_NAME))
        else {
            return Ok(Action::Done);
        };
        let conditions = condition_types(&csr);
        if conditions.iter().any(|c| c == "Denied" || c == "Failed") {
            return Ok(Action::Done);
        }
        let Some((_, mca)) = self.read_mca(cluster, addon) else { return Ok(Action::Done) };
        if conditions.iter().any(|c| c == "Approved") {
            return self.sign_custom(csrs, name, &csr, &mca).await;
        }
        if let Err(why) = check(&csr, cluster, &mca) {
            tracing::info!(csr = %name, cluster, addon, reason = %why, "add-on CSR left for an admin");
            return Ok(Action::Done);
        }
        let message = "Auto approving the add-on agent's certificate: its request is exactly the add-on's registration.";
        approve_request(&self.registry, csrs, name, &csr, APPROVED_REASON, message, &Self::opts())
            .await?;
        Ok(Action::Done)
    }

    /// Issues an approved request of a custom signer the add-on registers, with the CA its
    /// template names.
    async fn sign_custom(
        &self,
        csrs: &crate::machinery::scheme::ResourceType,
        name: &str,
        csr: &Value,
        mca: &ManagedClusterAddOn,
    ) -> Result<Action, ApiError> {
        let signer = csr.pointer("/spec/signerName").and_then(Value::as_str).unwrap_or("");
        let issued = csr
            .pointer("/status/certificate")
            .and_then(Value::as_str)
            .is_some_and(|c| !c.is_empty());
        if signer == KUBE_APISERVER_CLIENT_SIGNER_NAME || issued {
            return Ok(Action::Done);
        }
        let Some(tpl) = self.desired_template(mca) else { return Ok(Action::Done) };
        let Some(ca) = tpl.spec.registration.iter().find_map(|r| {
            r.custom_signer
                .as_ref()
                .filter(|c| c.signer_name == signer)
                .map(|c| c.signing_ca.clone())
        }) else {
            return Ok(Action::Done);
        };
        let ns =
            ca.namespace.as_deref().filter(|n| !n.is_empty()).unwrap_or(DEFAULT_SIGNING_NAMESPACE);
        let Some(secrets) = self.registry.scheme.lookup("", "v1", "secrets") else {
            return Ok(Action::Done);
        };
        let Some(secret) = self.registry.cached(secrets, ns, &ca.name) else {
            tracing::info!(csr = %name, secret = %format!("{ns}/{}", ca.name), "the signing CA's Secret is missing");
            return Ok(Action::Done);
        };
        let secret = secret.value();
        let field = |k: &str| ocm_proto::api::meta::secret_data(&secret, k).unwrap_or_default();
        let not_after = crate::machinery::clock::now() + CUSTOM_SIGNER_VALIDITY;
        let signed =
            request_pem(csr).map_err(crate::auth::pki::SignError::Request).and_then(|pem| {
                crate::auth::pki::sign_with_ca(
                    &field("tls.crt"),
                    &field("tls.key"),
                    &pem,
                    not_after,
                )
            });
        let cert = match signed {
            Ok(cert) => cert,
            Err(e) => {
                tracing::warn!(csr = %name, error = %e, "custom signer failed");
                return Ok(Action::Done);
            }
        };
        let body = serde_json::json!({
            "metadata": {"resourceVersion": object::meta_str(csr, "resourceVersion")},
            "status": {"certificate": base64::engine::general_purpose::STANDARD.encode(cert)},
        });
        let sub = csrs.subresource("status");
        let patch = crate::store::registry::Patch::Merge(body);
        self.registry.patch(csrs, "", name, &patch, sub, &Self::opts()).await?;
        Ok(Action::Done)
    }
}

/// Checks an add-on CSR against the add-on's KubeClient registration on `cluster`.
pub(super) fn check(csr: &Value, cluster: &str, mca: &ManagedClusterAddOn) -> Result<(), String> {
    if mca.metadata.deletion_timestamp.is_some() {
        return Err("the add-on is being removed".into());
    }
    let signer = csr.pointer("/spec/signerName").and_then(Value::as_str).unwrap_or("");
    let registrations = mca.status.iter().flat_map(|s| &s.registrations);
    let (want_user, groups) = if signer == KUBE_APISERVER_CLIENT_SIGNER_NAME {
        let s = registrations
            .filter(|r| r.type_ == REGISTRATION_TYPE_KUBE_CLIENT)
            .find_map(|r| r.kube_client.as_ref()?.subject.clone())
            .ok_or("the add-on has no KubeClient registration")?;
        (s.user, s.groups)
    } else {
        let s = registrations
            .filter(|r| r.type_ == REGISTRATION_TYPE_CUSTOM_SIGNER)
            .filter_map(|r| r.custom_signer.as_ref())
            .find(|c| c.signer_name == signer)
            .ok_or_else(|| format!("the add-on registers no signer {signer:?}"))?
            .subject
            .clone()
            .ok_or("the add-on's custom signer has no subject")?;
        (s.user, s.groups)
    };
    let user = requester(csr);
    let agent = user
        .name
        .strip_prefix(AGENT_PREFIX)
        .and_then(|rest| rest.strip_prefix(cluster))
        .and_then(|rest| rest.strip_prefix(':'))
        .ok_or_else(|| {
            format!("requester {:?} is not an agent of cluster {cluster:?}", user.name)
        })?;
    if agent.is_empty() || agent.contains(':') || !user.groups.contains(&agent_group(cluster)) {
        return Err(format!("requester {:?} is not an agent of cluster {cluster:?}", user.name));
    }
    check_client_usages(csr)?;
    let (cn, groups_of_request) = request_subject_of(csr)?;
    if Some(&cn) != want_user.as_ref() {
        return Err(format!("CN {cn:?} is not the registration's user {want_user:?}"));
    }
    let want: BTreeSet<&String> = groups.iter().collect();
    let have: BTreeSet<&String> = groups_of_request.iter().collect();
    if want != have || groups_of_request.len() != have.len() {
        return Err(format!(
            "organizations {groups_of_request:?} are not the registration's groups {groups:?}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;
    use serde_json::json;

    use super::*;

    fn csr(requester: &str, group: &str, cn: &str, orgs: &[&str]) -> Value {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::default();
        params.distinguished_name = crate::auth::pki::subject(cn, orgs).expect("subject");
        let pem = params.serialize_request(&key).expect("request").pem().expect("pem");
        json!({"spec": {
            "signerName": KUBE_APISERVER_CLIENT_SIGNER_NAME,
            "usages": ["digital signature", "key encipherment", "client auth"],
            "username": requester, "groups": [group, "system:authenticated"],
            "request": base64::engine::general_purpose::STANDARD.encode(pem),
        }})
    }

    fn mca(cluster: &str) -> ManagedClusterAddOn {
        let (user, groups) = super::super::deploy::default_subject(cluster, "hello");
        serde_json::from_value(json!({
            "metadata": {"name": "hello", "namespace": cluster},
            "spec": {},
            "status": {"registrations": [{"type": "kubeClient",
                "kubeClient": {"subject": {"user": user, "groups": groups}}}]},
        }))
        .expect("an add-on")
    }

    #[test]
    fn only_the_exact_request_of_the_clusters_agent_passes() {
        let (user, groups) = super::super::deploy::default_subject("c1", "hello");
        let orgs: Vec<&str> = groups.iter().map(String::as_str).collect();
        let agent = "system:open-cluster-management:c1:a1";
        let group = "system:open-cluster-management:c1";
        assert_eq!(check(&csr(agent, group, &user, &orgs), "c1", &mca("c1")), Ok(()));
        // c10's agent asking for c1's add-on: refused (OCM's approver takes a prefix).
        let c10 = csr(
            "system:open-cluster-management:c10:a1",
            "system:open-cluster-management:c10",
            &user,
            &orgs,
        );
        assert!(check(&c10, "c1", &mca("c1")).is_err());
        // Another cluster's add-on identity, or an extra group, or a missing one.
        let (other, _) = super::super::deploy::default_subject("c2", "hello");
        assert!(check(&csr(agent, group, &other, &orgs), "c1", &mca("c1")).is_err());
        let swapped = [orgs[0], "system:open-cluster-management:addon:other"];
        assert!(check(&csr(agent, group, &user, &swapped), "c1", &mca("c1")).is_err());
        assert!(check(&csr(agent, group, &user, &orgs[..1]), "c1", &mca("c1")).is_err());
        let mut server = csr(agent, group, &user, &orgs);
        server["spec"]["usages"] = json!(["server auth"]);
        assert!(check(&server, "c1", &mca("c1")).is_err());
    }
}
