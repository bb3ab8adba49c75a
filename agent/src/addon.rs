//! The klusterlet's part in add-ons (ocm-wave2.md §2.4–§2.5, ocm.md §7.3–§7.4), run every
//! [`PERIOD`] over the ManagedClusterAddOns of its cluster on the hub:
//! - each `kubeClient` registration gets a hub identity: a new key, a CSR with OCM's subject
//!   (the registration's user and groups, DNS name `<addon>.addon.open-cluster-management.io`),
//!   and, once the hub issued it, the Secret `<addon>-hub-kubeconfig` in the add-on's install
//!   namespace on the managed cluster (`kubeconfig`, `tls.crt`, `tls.key`, `cluster-name`),
//!   renewed when a fifth of its lifetime is left or the subject changed; the driver (`csr`) is
//!   recorded in the add-on's status;
//! - each `customSigner` registration gets a certificate of that signer the same way, in the
//!   Secret `<addon>-<signer, / → ->-client-cert` (`tls.crt`, `tls.key`, `cluster-name`);
//! - an add-on in `Lease` health mode is Available as its Lease `<addon>` in the install
//!   namespace on the cluster says: renewed within 5 minutes (True), older (False), missing
//!   (Unknown);
//! - the Secret of an add-on that is gone from the hub is deleted;
//! - with the `managed-serviceaccount` add-on installed, its managed service accounts
//!   (`msa.rs`), under that add-on's own hub identity.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use ocm_proto::api::addon::v1beta1::{ManagedClusterAddOn, REGISTRATION_TYPE_KUBE_CLIENT};
use ocm_proto::api::addon::{
    ANNOTATION_V1ALPHA1_INSTALL_NAMESPACE, CONDITION_AVAILABLE, DEFAULT_INSTALL_NAMESPACE,
    HEALTH_CHECK_MODE_LEASE, LABEL_ADDON_NAME, REASON_LEASE_NOT_FOUND, REASON_LEASE_UPDATE_STOPPED,
    REASON_LEASE_UPDATED,
};
use ocm_proto::api::cluster::LABEL_CLUSTER_NAME;
use ocm_proto::api::meta::{
    CONDITION_FALSE, CONDITION_TRUE, CONDITION_UNKNOWN, Condition, condition, find_condition,
    set_condition,
};
use serde_json::{Value, json};

use crate::cluster::{Cluster, Strategy};
use crate::error::AgentError;
use crate::registration as reg;

/// How often the add-ons are looked at (OCM checks leases every 30 s).
pub const PERIOD: Duration = Duration::from_secs(30);
/// A Lease renewed longer ago than this says the add-on stopped.
const LEASE_GRACE: Duration = Duration::from_secs(5 * 60);
/// How long a CSR may wait for approval before the agent asks again next round.
const ISSUE_WAIT: Duration = Duration::from_secs(30);

/// What the add-on loop needs of the running agent.
pub struct Addons<'a> {
    pub hub: kube::Client,
    pub hub_url: &'a str,
    pub ca_pem: &'a str,
    pub cluster_name: &'a str,
    pub cluster: &'a dyn Cluster,
    pub expiration: Option<Duration>,
    /// The Secrets written, by add-on: (namespace, name), to delete when the add-on goes.
    pub written: &'a Mutex<BTreeMap<String, BTreeSet<(String, String)>>>,
    /// The managed service accounts made (`msa.rs`).
    pub accounts: &'a Mutex<std::collections::BTreeSet<String>>,
}

fn mca_resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk(ocm_proto::api::addon::GROUP, "v1beta1", "ManagedClusterAddOn");
    ApiResource::from_gvk_with_plural(&gvk, "managedclusteraddons")
}

/// The namespace an add-on's agent runs in (its status, else the v1alpha1 annotation, else
/// OCM's default).
pub fn install_namespace(mca: &ManagedClusterAddOn) -> String {
    let from_status = mca.status.as_ref().and_then(|s| s.namespace.clone());
    let from_annotation = mca
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_V1ALPHA1_INSTALL_NAMESPACE).cloned());
    from_status
        .or(from_annotation)
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| DEFAULT_INSTALL_NAMESPACE.to_owned())
}

impl Addons<'_> {
    /// One round over the cluster's add-ons; an add-on's failure is logged and the others go on.
    pub async fn round(&self) -> Result<(), AgentError> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.hub.clone(), self.cluster_name, &mca_resource());
        let list = api
            .list(&Default::default())
            .await
            .map_err(|e| crate::hub::explain(self.hub_url, e))?;
        let mut present = Vec::new();
        let mut msa_namespace = None;
        for obj in list.items {
            let raw = serde_json::to_value(&obj).unwrap_or_default();
            let Ok(mca) = serde_json::from_value::<ManagedClusterAddOn>(raw) else { continue };
            let name = mca.metadata.name.clone().unwrap_or_default();
            present.push(name.clone());
            if name == crate::msa::ADDON && mca.metadata.deletion_timestamp.is_none() {
                msa_namespace = Some(install_namespace(&mca));
            }
            if let Err(e) = self.addon(&api, mca).await {
                tracing::warn!(addon = %name, error = %e, "add-on round failed");
            }
        }
        self.forget_gone(&present).await?;
        match msa_namespace {
            Some(ns) => self.service_accounts(&ns).await,
            None => Ok(()),
        }
    }

    /// The managed service accounts, with the `managed-serviceaccount` add-on's own identity
    /// once it has one.
    async fn service_accounts(&self, ns: &str) -> Result<(), AgentError> {
        let name = format!("{}-hub-kubeconfig", crate::msa::ADDON);
        let probe = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns}});
        let Some(secret) = self.cluster.get(&probe).await? else { return Ok(()) };
        let field = |k: &str| ocm_proto::api::meta::secret_data(&secret, k);
        let (Some(cert), Some(key)) = (field("tls.crt"), field("tls.key")) else { return Ok(()) };
        let hub = crate::hub::with_certificate(self.hub_url, self.ca_pem, &cert, &key)?;
        let accounts = crate::msa::ManagedServiceAccounts {
            hub,
            hub_url: self.hub_url,
            cluster_name: self.cluster_name,
            namespace: ns,
            cluster: self.cluster,
            made: self.accounts,
        };
        accounts.round().await
    }

    async fn addon(
        &self,
        api: &Api<DynamicObject>,
        mut mca: ManagedClusterAddOn,
    ) -> Result<(), AgentError> {
        let name = mca.metadata.name.clone().unwrap_or_default();
        let ns = install_namespace(&mca);
        let before = mca.status.clone();
        let status = mca.status.get_or_insert_with(Default::default);
        for r in &mut status.registrations {
            if r.type_ == REGISTRATION_TYPE_KUBE_CLIENT {
                let Some(kc) = r.kube_client.as_mut() else { continue };
                let Some(subject) = kc.subject.clone() else { continue };
                let user = subject.user.clone().unwrap_or_default();
                if user.is_empty() {
                    continue;
                }
                let identity = Identity::kube_client(&name, &user, &subject.groups);
                self.ensure_identity(&name, &ns, &identity).await?;
                kc.driver = Some(ocm_proto::api::addon::v1beta1::KUBE_CLIENT_DRIVER_CSR.to_owned());
            } else if let Some(cs) = r.custom_signer.as_ref() {
                let Some(subject) = cs.subject.clone() else { continue };
                let user = subject.user.clone().unwrap_or_default();
                if user.is_empty() {
                    continue;
                }
                let identity = Identity::custom(&name, &cs.signer_name, &user, &subject.groups);
                self.ensure_identity(&name, &ns, &identity).await?;
            }
        }
        let lease_mode = status
            .health_check
            .as_ref()
            .and_then(|h| h.mode.as_deref())
            .is_none_or(|m| m == HEALTH_CHECK_MODE_LEASE);
        if lease_mode {
            let c = self.lease_health(&name, &ns).await?;
            let same = find_condition(&status.conditions, CONDITION_AVAILABLE)
                .is_some_and(|o| o.status == c.status && o.reason == c.reason);
            if !same {
                set_condition(&mut status.conditions, c, Time(k8s_openapi::jiff::Timestamp::now()));
            }
        }
        if mca.status == before {
            return Ok(());
        }
        let status =
            serde_json::to_value(&mca.status).map_err(|e| AgentError::Invalid(e.to_string()))?;
        let rv = mca.metadata.resource_version.clone();
        let body = json!({"metadata": {"resourceVersion": rv}, "status": status});
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&body))
            .await
            .map_err(|e| crate::hub::explain(self.hub_url, e))?;
        Ok(())
    }

    /// The add-on's Available from its Lease on the cluster.
    async fn lease_health(&self, addon: &str, ns: &str) -> Result<Condition, AgentError> {
        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                           "metadata": {"name": addon, "namespace": ns}});
        let live = self.cluster.get(&lease).await?;
        let renewed = live
            .as_ref()
            .and_then(|l| l.pointer("/spec/renewTime").and_then(Value::as_str).map(str::to_owned))
            .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok());
        let c = |s: &str, r: &str, m: String| condition(CONDITION_AVAILABLE, s, r, m);
        Ok(match (live, renewed) {
            (None, _) => c(
                CONDITION_UNKNOWN,
                REASON_LEASE_NOT_FOUND,
                format!("The status of {addon} add-on is unknown."),
            ),
            (Some(_), Some(t))
                if t.as_second() + LEASE_GRACE.as_secs() as i64 > crate::clock::unix_now() =>
            {
                c(CONDITION_TRUE, REASON_LEASE_UPDATED, format!("{addon} add-on is available."))
            }
            (Some(_), _) => c(
                CONDITION_FALSE,
                REASON_LEASE_UPDATE_STOPPED,
                format!("{addon} add-on is not available."),
            ),
        })
    }

    /// Keeps an identity's Secret current: a new key and certificate when it is missing, names
    /// another subject, or has a fifth of its lifetime left.
    async fn ensure_identity(
        &self,
        addon: &str,
        ns: &str,
        id: &Identity,
    ) -> Result<(), AgentError> {
        let probe = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": id.secret, "namespace": ns}});
        self.written
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(addon.to_owned())
            .or_default()
            .insert((ns.to_owned(), id.secret.clone()));
        if let Some(live) = self.cluster.get(&probe).await? {
            if current(&live, &id.user) {
                return Ok(());
            }
        }
        let dns = format!("{addon}.addon.open-cluster-management.io");
        let (key, request) = reg::subject_request(&id.user, &id.groups, Some(&dns))?;
        let labels = json!({LABEL_CLUSTER_NAME: self.cluster_name, LABEL_ADDON_NAME: addon});
        let generate = format!("addon-{}-{addon}-", self.cluster_name);
        let csr = reg::create_request(
            &self.hub,
            self.hub_url,
            &generate,
            labels,
            &id.signer,
            &request,
            self.expiration,
        )
        .await?;
        let issued = reg::issued_certificate(&self.hub, self.hub_url, &csr, |_| {});
        let cert = tokio::time::timeout(ISSUE_WAIT, issued).await.map_err(|_| {
            AgentError::Invalid(format!(
                "add-on request {csr} was not issued within {} s",
                ISSUE_WAIT.as_secs()
            ))
        })??;
        reg::check_certificate(&cert, &key, &id.user)?;
        let secret = self.secret(addon, ns, id, &cert, &key);
        crate::cluster::ensure_namespace(self.cluster, ns).await?;
        self.cluster.apply(&secret, None, &Strategy::Update).await?;
        tracing::info!(addon, namespace = ns, secret = %id.secret, csr = %csr, "add-on credentials written");
        Ok(())
    }

    /// The Secret of an identity: the certificate and key, the cluster's name, and for a hub
    /// client a kubeconfig naming them.
    fn secret(&self, addon: &str, ns: &str, id: &Identity, cert: &str, key: &str) -> Value {
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let mut data = json!({"tls.crt": b64(cert), "tls.key": b64(key), "cluster-name": b64(self.cluster_name)});
        if id.kubeconfig {
            let kubeconfig = json!({
                "apiVersion": "v1", "kind": "Config",
                "clusters": [{"name": "hub", "cluster": {"server": self.hub_url, "certificate-authority-data": b64(self.ca_pem)}}],
                "users": [{"name": "user", "user": {"client-certificate": "tls.crt", "client-key": "tls.key"}}],
                "contexts": [{"name": "default-context", "context": {"cluster": "hub", "user": "user", "namespace": "configuration"}}],
                "current-context": "default-context",
            });
            data["kubeconfig"] = json!(b64(&kubeconfig.to_string()));
        }
        json!({
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": id.secret, "namespace": ns, "labels": {LABEL_ADDON_NAME: addon}},
            "data": data,
        })
    }

    /// Deletes the Secrets of add-ons no longer on the hub.
    async fn forget_gone(&self, present: &[String]) -> Result<(), AgentError> {
        let gone: Vec<(String, BTreeSet<(String, String)>)> = {
            let written = self.written.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            written
                .iter()
                .filter(|(a, _)| !present.contains(a))
                .map(|(a, s)| (a.clone(), s.clone()))
                .collect()
        };
        for (addon, secrets) in gone {
            for (ns, name) in secrets {
                let probe = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns}});
                if self.cluster.get(&probe).await?.is_some() {
                    let resource = self.cluster.resolve(&probe).await?;
                    self.cluster.delete(&resource).await?;
                    tracing::info!(addon = %addon, namespace = %ns, secret = %name, "add-on credentials removed");
                }
            }
            self.written.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&addon);
        }
        Ok(())
    }
}

/// One registration's identity: its signer, subject and the Secret that holds it.
struct Identity {
    signer: String,
    user: String,
    groups: Vec<String>,
    secret: String,
    /// Whether the Secret carries a hub kubeconfig (`kubeClient`).
    kubeconfig: bool,
}

impl Identity {
    /// A `kubeClient` registration's: `<addon>-hub-kubeconfig`.
    fn kube_client(addon: &str, user: &str, groups: &[String]) -> Identity {
        Identity {
            signer: ocm_proto::api::addon::KUBE_APISERVER_CLIENT_SIGNER_NAME.to_owned(),
            user: user.to_owned(),
            groups: groups.to_vec(),
            secret: format!("{addon}-hub-kubeconfig"),
            kubeconfig: true,
        }
    }

    /// A `customSigner` registration's: `<addon>-<signer, / → ->-client-cert`.
    fn custom(addon: &str, signer: &str, user: &str, groups: &[String]) -> Identity {
        Identity {
            signer: signer.to_owned(),
            user: user.to_owned(),
            groups: groups.to_vec(),
            secret: format!("{addon}-{}-client-cert", signer.replace('/', "-")),
            kubeconfig: false,
        }
    }
}

/// Whether a hub kubeconfig Secret holds a certificate for `user` with more than a fifth of its
/// lifetime left.
fn current(secret: &Value, user: &str) -> bool {
    let field = |k: &str| ocm_proto::api::meta::secret_data(secret, k);
    let (Some(cert), Some(key)) = (field("tls.crt"), field("tls.key")) else { return false };
    let Ok((nb, na)) = reg::check_certificate(&cert, &key, user) else { return false };
    na - (na - nb) / 5 > crate::clock::unix_now()
}
