//! The hub's registration controllers (ocm.md §3, §6, §14): the CSR approver and signer, the
//! managed-cluster controller (acceptance, per-cluster namespace and RBAC, the Lease,
//! availability, clock sync, taints, cleanup on deletion), the cluster-set controllers and the
//! ClusterProfile producer (ocm-wave2.md §4.7). Each
//! is a level-triggered reconciler (`reconcile.rs`) over the watch cache; they write through the
//! registry as the hub itself.

mod cluster;
mod clusterprofile;
mod clusterset;
pub mod csr;

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::auth::access::Access;
use crate::auth::pki::Pki;
use crate::controllers::runtime::{self, Runtime};
use crate::machinery::error::ApiError;
use crate::machinery::scheme::ResourceType;
use crate::store::registry::{DeleteOptions, Patch, Registry, WriteOptions, Written};

pub use clusterprofile::HubAccess;
pub use clusterset::set_selector;
pub use csr::{CsrCheck, check_agent_request};

/// How registration behaves (`ocm-hub serve` flags).
#[derive(Debug, Clone)]
pub struct RegistrationConfig {
    /// Whether the registration controllers run (`--controllers`; an API server alone, as
    /// kube-apiserver runs without kube-controller-manager, for API-machinery tests).
    pub enabled: bool,
    /// CSR requesters (`spec.username`) whose valid bootstrap requests are approved and whose
    /// clusters are accepted without an admin (`--auto-approve-identities`; OCM's
    /// ManagedClusterAutoApproval with `autoApproveUsers`).
    pub auto_approve_identities: Vec<String>,
    /// The longest certificate the signer issues (`--cluster-signing-duration`, kube-controller-
    /// manager's flag; a request's `expirationSeconds` may ask for less).
    pub signing_duration: Duration,
}

impl Default for RegistrationConfig {
    fn default() -> RegistrationConfig {
        RegistrationConfig {
            enabled: true,
            auto_approve_identities: Vec::new(),
            signing_duration: Duration::from_secs(365 * 24 * 3600),
        }
    }
}

/// The kinds registration reads and writes.
struct Kinds {
    clusters: Arc<ResourceType>,
    sets: Arc<ResourceType>,
    bindings: Arc<ResourceType>,
    csrs: Arc<ResourceType>,
    leases: Arc<ResourceType>,
    namespaces: Arc<ResourceType>,
    works: Arc<ResourceType>,
    addons: Arc<ResourceType>,
    cluster_roles: Arc<ResourceType>,
    cluster_role_bindings: Arc<ResourceType>,
    role_bindings: Arc<ResourceType>,
}

impl Kinds {
    fn of(registry: &Registry) -> Option<Kinds> {
        let s = &registry.scheme;
        let rbac = "rbac.authorization.k8s.io";
        let cluster = ocm_proto::api::cluster::GROUP;
        let kind = |g: &str, v: &str, p: &str| s.lookup(g, v, p).cloned();
        Some(Kinds {
            clusters: kind(cluster, "v1", "managedclusters")?,
            sets: kind(cluster, "v1beta2", "managedclustersets")?,
            bindings: kind(cluster, "v1beta2", "managedclustersetbindings")?,
            csrs: kind("certificates.k8s.io", "v1", "certificatesigningrequests")?,
            leases: kind("coordination.k8s.io", "v1", "leases")?,
            namespaces: kind("", "v1", "namespaces")?,
            works: kind("work.open-cluster-management.io", "v1", "manifestworks")?,
            addons: kind(ocm_proto::api::addon::GROUP, "v1alpha1", "managedclusteraddons")?,
            cluster_roles: kind(rbac, "v1", "clusterroles")?,
            cluster_role_bindings: kind(rbac, "v1", "clusterrolebindings")?,
            role_bindings: kind(rbac, "v1", "rolebindings")?,
        })
    }

    /// The kind of an object, by its apiVersion and kind.
    fn of_object(&self, obj: &Value) -> Option<&Arc<ResourceType>> {
        let kind = obj.get("kind").and_then(Value::as_str)?;
        [&self.cluster_roles, &self.cluster_role_bindings, &self.role_bindings, &self.namespaces]
            .into_iter()
            .find(|rt| rt.kind == kind)
    }
}

/// What every registration controller shares.
struct Ctx {
    registry: Registry,
    kinds: Kinds,
    access: Arc<Access>,
    pki: Arc<Pki>,
    config: RegistrationConfig,
    metrics: Arc<crate::machinery::metrics::Metrics>,
}

/// The field manager of registration's writes.
const MANAGER: &str = "ocm-hub-registration";

impl Ctx {
    fn opts() -> WriteOptions {
        WriteOptions { field_manager: MANAGER.to_owned(), ..WriteOptions::default() }
    }

    /// A merge patch of the main resource (`sub` = `None`) or a subresource.
    async fn patch(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        body: Value,
        sub: Option<&str>,
    ) -> Result<Written, ApiError> {
        let sub = sub.and_then(|s| rt.subresource(s));
        self.registry.patch(rt, namespace, name, &Patch::Merge(body), sub, &Self::opts()).await
    }

    /// [`Registry::ensure`] for the kinds registration keeps.
    async fn ensure(&self, desired: Value) -> Result<(), ApiError> {
        let rt = self
            .kinds
            .of_object(&desired)
            .ok_or_else(|| ApiError::internal("registration ensures a kind it does not know"))?;
        self.registry.ensure(rt, desired, &Self::opts()).await
    }

    /// Deletes an object if it is there.
    async fn remove(&self, rt: &ResourceType, namespace: &str, name: &str) -> Result<(), ApiError> {
        if self.registry.cached(rt, namespace, name).is_none() {
            return Ok(());
        }
        match self.registry.delete(rt, namespace, name, &DeleteOptions::default()).await {
            Ok(_) => Ok(()),
            Err(e) if e.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// Starts the registration controllers; `hub_url` is the hub's advertised URL (cluster-info's
/// server), which ClusterProfiles name as the way to their clusters.
pub fn start(
    runtime: &Runtime,
    access: Arc<Access>,
    pki: Arc<Pki>,
    config: RegistrationConfig,
    metrics: Arc<crate::machinery::metrics::Metrics>,
    hub_url: &str,
) {
    let registry = &runtime.registry;
    if !config.enabled {
        return;
    }
    let Some(kinds) = Kinds::of(registry) else { return };
    let ctx = Arc::new(Ctx { registry: registry.clone(), kinds, access, pki, config, metrics });
    csr::start(&ctx, runtime);
    cluster::start(&ctx, runtime);
    clusterset::start(&ctx, runtime);
    let hub = HubAccess { server: hub_url.to_owned(), ca_pem: ctx.pki.ca_pem.clone() };
    clusterprofile::start(&ctx, runtime, hub);
}

/// The watch of a kind whose objects concern the key of their own name.
fn by_name(rt: &Arc<ResourceType>) -> runtime::Watch {
    runtime::Watch::new(rt, |o| vec![o.namespace_name().1.to_owned()])
}
