//! The CSR approver and the `kubernetes.io/kube-apiserver-client` signer. The approver checks
//! an agent's request exactly as OCM does after its 2026 fix (ocm.md §3.3 step 3: the cluster
//! label, the signer, the Os, a CN of `system:open-cluster-management:<cluster>:<agent>` whose
//! cluster equals the label exactly, never as a prefix) and then approves renewals by the same
//! identity when RBAC lets it `renew` (§3.6), and bootstrap requests of the identities the hub
//! was told to trust (`--auto-approve-identities`, whose clusters it also accepts). Anything
//! else stays pending for an admin. The signer issues every approved request it can read, with
//! the hub CA, for `expirationSeconds` (at most `--cluster-signing-duration`).

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};

use super::Ctx;
use crate::controllers::runtime::{Action, Runtime};
use crate::machinery::error::ApiError;
use crate::machinery::object;
use crate::machinery::requester::{Attributes, UserInfo};
use crate::machinery::scheme::ResourceType;
use crate::store::registry::{Patch, Registry, WriteOptions};

// The signer this hub implements, and the group its agents carry besides their cluster's.
use ocm_proto::api::addon::KUBE_APISERVER_CLIENT_SIGNER_NAME as KUBE_APISERVER_CLIENT;
use ocm_proto::api::cluster::GROUP_MANAGED_CLUSTERS as MANAGED_CLUSTERS_GROUP;
const AGENT_PREFIX: &str = "system:open-cluster-management:";
/// The shortest certificate the signer issues (kube's minimum `expirationSeconds`).
const MIN_EXPIRATION: Duration = Duration::from_secs(600);
/// The reason of the approver's approvals.
const APPROVED_REASON: &str = "AutoApprovedByHubCSRApprovingController";

/// An agent's request, once it passed the checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsrCheck {
    /// The cluster it is for.
    pub cluster: String,
    /// The agent name of its CN.
    pub agent: String,
    /// Its CN (the user its certificate will name).
    pub common_name: String,
}

/// Checks a CSR object as OCM's approver does: the request must be an agent's for the cluster
/// its label names. `Err` says why not (the request then waits for an admin).
pub fn check_agent_request(csr: &Value) -> Result<CsrCheck, String> {
    let cluster = object::label(csr, crate::auth::cluster_rbac::CLUSTER_NAME_LABEL)
        .filter(|c| !c.is_empty())
        .ok_or("the request has no open-cluster-management.io/cluster-name label")?;
    let signer = csr.pointer("/spec/signerName").and_then(Value::as_str).unwrap_or("");
    if signer != KUBE_APISERVER_CLIENT {
        return Err(format!("signer {signer:?} is not {KUBE_APISERVER_CLIENT}"));
    }
    check_client_usages(csr)?;
    let (cn, groups) = request_subject_of(csr)?;
    let own_group = crate::auth::cluster_rbac::agent_group(cluster);
    let others: Vec<&String> = groups.iter().filter(|g| *g != MANAGED_CLUSTERS_GROUP).collect();
    if others != [&own_group] {
        return Err(format!("organizations {groups:?} are not exactly [{own_group:?}]"));
    }
    let rest = cn
        .strip_prefix(AGENT_PREFIX)
        .ok_or_else(|| format!("CN {cn:?} is not {AGENT_PREFIX}<cluster>:<agent>"))?;
    let (cn_cluster, agent) = rest
        .split_once(':')
        .ok_or_else(|| format!("CN {cn:?} is not {AGENT_PREFIX}<cluster>:<agent>"))?;
    if cn_cluster != cluster {
        return Err(format!("CN {cn:?} is for cluster {cn_cluster:?}, not {cluster:?}"));
    }
    if agent.is_empty() || agent.contains(':') {
        return Err(format!("CN {cn:?} has an invalid agent name {agent:?}"));
    }
    Ok(CsrCheck { cluster: cluster.to_owned(), agent: agent.to_owned(), common_name: cn })
}

/// Checks a CSR asks for client authentication only (with digital signature and key
/// encipherment).
pub fn check_client_usages(csr: &Value) -> Result<(), String> {
    let usages = object::strings(csr.pointer("/spec/usages"));
    if !usages.iter().any(|u| u == "client auth")
        || usages.iter().any(|u| {
            !matches!(u.as_str(), "client auth" | "digital signature" | "key encipherment")
        })
    {
        return Err(format!(
            "usages {usages:?} are not client auth (with digital signature, key encipherment)"
        ));
    }
    Ok(())
}

/// The subject a CSR's request names: its CN and its Os.
pub fn request_subject_of(csr: &Value) -> Result<(String, Vec<String>), String> {
    let pem = request_pem(csr)?;
    let der = rustls::pki_types::pem::PemObject::from_pem_slice(pem.as_bytes())
        .map(|d: rustls::pki_types::CertificateSigningRequestDer<'_>| d.as_ref().to_vec())
        .map_err(|_| "spec.request is not a PEM CERTIFICATE REQUEST".to_owned())?;
    crate::auth::pki::request_subject(&der).map_err(|e| e.to_string())
}

/// The PEM of a CSR's `spec.request`.
pub fn request_pem(csr: &Value) -> Result<String, String> {
    let b64 = csr.pointer("/spec/request").and_then(Value::as_str).unwrap_or("");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|_| "spec.request is not base64".to_owned())?;
    String::from_utf8(bytes).map_err(|_| "spec.request is not PEM".to_owned())
}

/// The types of a CSR's conditions whose status is True.
pub fn condition_types(csr: &Value) -> Vec<String> {
    csr.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| c["status"].as_str().unwrap_or("True") == "True")
        .filter_map(|c| c["type"].as_str().map(str::to_owned))
        .collect()
}

/// The requester of a CSR as its spec records it.
pub fn requester(csr: &Value) -> UserInfo {
    let spec = &csr["spec"];
    UserInfo {
        name: spec["username"].as_str().unwrap_or("").to_owned(),
        uid: spec["uid"].as_str().unwrap_or("").to_owned(),
        groups: object::strings(spec.get("groups")),
        extra: spec
            .get("extra")
            .and_then(Value::as_object)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), object::strings(Some(v)))).collect())
            .unwrap_or_default(),
    }
}

struct Csrs {
    ctx: Arc<Ctx>,
}

impl Csrs {
    async fn run(&self, name: String) -> Result<Action, ApiError> {
        let rt = &self.ctx.kinds.csrs;
        let Some(cached) = self.ctx.registry.cached(rt, "", &name) else { return Ok(Action::Done) };
        let value = cached.value();
        let csr = &*value;
        if csr.pointer("/spec/signerName").and_then(Value::as_str) != Some(KUBE_APISERVER_CLIENT) {
            return Ok(Action::Done);
        }
        let conditions = condition_types(csr);
        if conditions.iter().any(|c| c == "Denied" || c == "Failed") {
            return Ok(Action::Done);
        }
        if conditions.iter().any(|c| c == "Approved") {
            return self.sign(&name, csr).await;
        }
        let Ok(check) = check_agent_request(csr) else {
            // Not an agent's request for its own cluster: an admin decides.
            return Ok(Action::Done);
        };
        let user = requester(csr);
        let renewal = user.name == check.common_name && self.may_renew(&user);
        let trusted = self.ctx.config.auto_approve_identities.contains(&user.name);
        if !renewal && !trusted {
            return Ok(Action::Done);
        }
        let message = if renewal {
            "Auto approving Managed cluster agent certificate after SubjectAccessReview."
        } else {
            "Auto approving Managed cluster agent certificate of a trusted bootstrap identity."
        };
        // A trusted identity's cluster is accepted first: once the request is approved, this
        // branch is never taken again.
        if trusted && !renewal {
            self.auto_accept(&check.cluster).await?;
        }
        approve(&self.ctx, &name, csr, APPROVED_REASON, message).await?;
        let reason = if renewal { "renewal" } else { "trusted_identity" };
        self.ctx.metrics.csr_approvals.with_label_values(&[reason]).inc();
        Ok(Action::Done)
    }

    /// Whether the agent may renew: RBAC grants `renew` on `managedclusters/clientcertificates`
    /// only to an accepted cluster's agents.
    fn may_renew(&self, user: &UserInfo) -> bool {
        let attrs = Attributes::resource(
            "renew",
            "register.open-cluster-management.io",
            "managedclusters",
            "",
            "",
        )
        .with_subresource("clientcertificates");
        self.ctx.access.decide(user, &attrs).is_allowed()
    }

    /// Accepts a cluster of a trusted identity once (OCM's ManagedClusterAutoApproval: a later
    /// denial sticks).
    async fn auto_accept(&self, cluster: &str) -> Result<(), ApiError> {
        let rt = &self.ctx.kinds.clusters;
        let Some(mc) = self.ctx.registry.cached(rt, "", cluster) else {
            // The agent creates its cluster before its request: not seen yet, so look again.
            return Err(ApiError::internal(format!("ManagedCluster {cluster} not seen yet")));
        };
        let key = ocm_proto::api::cluster::ANNOTATION_AUTOMATICALLY_ACCEPTED_ON;
        if mc.value().pointer("/metadata/annotations").and_then(|a| a.get(key)).is_some() {
            return Ok(());
        }
        let body = json!({
            "metadata": {"annotations": {key: object::now_rfc3339()}},
            "spec": {"hubAcceptsClient": true},
        });
        self.ctx.patch(rt, "", cluster, body, None).await.map(drop)
    }

    /// Issues the certificate of an approved request (or marks it Failed with the reason).
    async fn sign(&self, name: &str, csr: &Value) -> Result<Action, ApiError> {
        let rt = &self.ctx.kinds.csrs;
        if csr.pointer("/status/certificate").and_then(Value::as_str).is_some_and(|c| !c.is_empty())
        {
            return Ok(Action::Done);
        }
        let max = self.ctx.config.signing_duration;
        let asked = csr
            .pointer("/spec/expirationSeconds")
            .and_then(Value::as_u64)
            .map(Duration::from_secs)
            .unwrap_or(max);
        // A request may not ask for less than kube's minimum; the hub's maximum may be lower still
        // (short-lived certificates for tests).
        let lifetime = asked.max(MIN_EXPIRATION).min(max);
        let not_after = crate::machinery::clock::now()
            + time::Duration::try_from(lifetime).unwrap_or(time::Duration::DAY);
        let rv = object::meta_str(csr, "resourceVersion");
        let signed = request_pem(csr)
            .map_err(crate::auth::pki::SignError::Request)
            .and_then(|pem| self.ctx.pki.sign_client_request(&pem, not_after));
        let result = if signed.is_ok() { "issued" } else { "failed" };
        let body = match signed {
            Ok(pem) => json!({
                "metadata": {"resourceVersion": rv},
                "status": {"certificate": base64::engine::general_purpose::STANDARD.encode(pem)},
            }),
            Err(crate::auth::pki::SignError::Request(why)) => {
                let mut conditions = csr
                    .pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let now = object::now_rfc3339();
                conditions.push(json!({
                    "type": "Failed", "status": "True", "reason": "SignerValidationFailure",
                    "message": why, "lastUpdateTime": now, "lastTransitionTime": now,
                }));
                json!({"metadata": {"resourceVersion": rv}, "status": {"conditions": conditions}})
            }
            Err(e) => return Err(ApiError::internal(e)),
        };
        self.ctx.patch(rt, "", name, body, Some("status")).await?;
        self.ctx.metrics.csr_signings.with_label_values(&[result]).inc();
        Ok(Action::Done)
    }
}

/// Approves a request (the `approval` subresource), keeping its other conditions.
pub(super) async fn approve(
    ctx: &Ctx,
    name: &str,
    csr: &Value,
    reason: &str,
    message: &str,
) -> Result<(), ApiError> {
    let opts = Ctx::opts();
    approve_request(&ctx.registry, &ctx.kinds.csrs, name, csr, reason, message, &opts).await
}

/// Approves the request `csr` named `name` through the registry, at the revision it was read.
pub async fn approve_request(
    registry: &Registry,
    rt: &ResourceType,
    name: &str,
    csr: &Value,
    reason: &str,
    message: &str,
    opts: &WriteOptions,
) -> Result<(), ApiError> {
    let mut conditions =
        csr.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    let now = object::now_rfc3339();
    conditions.push(json!({
        "type": "Approved", "status": "True", "reason": reason, "message": message,
        "lastUpdateTime": now, "lastTransitionTime": now,
    }));
    let body = json!({
        "metadata": {"resourceVersion": object::meta_str(csr, "resourceVersion")},
        "status": {"conditions": conditions},
    });
    let sub = rt.subresource("approval");
    registry.patch(rt, "", name, &Patch::Merge(body), sub, opts).await.map(drop)
}

pub(super) fn start(ctx: &Arc<Ctx>, runtime: &Runtime) {
    let watches = vec![super::by_name(&ctx.kinds.csrs)];
    let csrs = Arc::new(Csrs { ctx: Arc::clone(ctx) });
    runtime.run("csr", watches, 8, move |key| {
        let csrs = Arc::clone(&csrs);
        async move { csrs.run(key).await }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(cn: &str, orgs: &[&str]) -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::default();
        params.distinguished_name = crate::auth::pki::subject(cn, orgs).unwrap();
        params.serialize_request(&key).unwrap().pem().unwrap()
    }

    fn csr(label: &str, cn: &str, orgs: &[&str]) -> Value {
        json!({
            "metadata": {"name": "x", "labels": {"open-cluster-management.io/cluster-name": label}},
            "spec": {
                "signerName": KUBE_APISERVER_CLIENT,
                "usages": ["digital signature", "key encipherment", "client auth"],
                "request": base64::engine::general_purpose::STANDARD.encode(request(cn, orgs)),
            }
        })
    }

    const MC: &str = MANAGED_CLUSTERS_GROUP;

    #[test]
    fn an_agents_own_request_passes() {
        let ok = csr(
            "c1",
            "system:open-cluster-management:c1:agent1",
            &["system:open-cluster-management:c1", MC],
        );
        let check = check_agent_request(&ok).unwrap();
        assert_eq!((check.cluster.as_str(), check.agent.as_str()), ("c1", "agent1"));
    }

    #[test]
    fn forged_requests_are_refused() {
        let own = "system:open-cluster-management:c1";
        let cases = [
            // another cluster's CN under this cluster's label
            csr("c1", "system:open-cluster-management:c2:agent", &[own, MC]),
            // a cluster whose name extends this one's (the prefix bug OCM fixed)
            csr("c1", "system:open-cluster-management:c1-evil:agent", &[own, MC]),
            csr("c1", "system:open-cluster-management:c1:agent:extra", &[own, MC]),
            csr("c1", "system:open-cluster-management:c1:", &[own, MC]),
            // another cluster's group
            csr(
                "c1",
                "system:open-cluster-management:c1:agent",
                &["system:open-cluster-management:c2", MC],
            ),
            csr("c1", "system:open-cluster-management:c1:agent", &[own, "system:masters"]),
            csr("c1", "system:open-cluster-management:c1:agent", &[MC]),
            csr("c1", "admin", &[own]),
            csr("", "system:open-cluster-management:c1:agent", &[own]),
        ];
        for (i, c) in cases.iter().enumerate() {
            assert!(check_agent_request(c).is_err(), "case {i} passed: {c}");
        }
        let mut other_signer = csr("c1", "system:open-cluster-management:c1:a", &[own]);
        other_signer["spec"]["signerName"] = json!("example.com/other");
        assert!(check_agent_request(&other_signer).is_err());
        let mut server_usage = csr("c1", "system:open-cluster-management:c1:a", &[own]);
        server_usage["spec"]["usages"] = json!(["server auth", "client auth"]);
        assert!(check_agent_request(&server_usage).is_err());
    }
}
