//! The hub's add-on manager (ocm.md §7, ocm-wave2.md §2): what OCM's `addon-manager` does for
//! every ClusterManagementAddOn it manages (those not annotated `lifecycle: self`).
//!
//! `install.rs`: the install strategy, one ManagedClusterAddOn per cluster the `Placements`
//! strategy selects, each owned by its ClusterManagementAddOn; nothing for `Manual`.

mod config;
mod csr;
mod deploy;
mod health;
mod install;
mod permissions;
mod template;

use std::sync::Arc;

use ocm_proto::api::addon::v1beta1::{
    ClusterManagementAddOn, ClusterManagementAddOnStatus, ManagedClusterAddOn,
};
use serde_json::Value;

use crate::controllers::runtime::Runtime;
use crate::machinery::error::ApiError;
use crate::machinery::object;
use crate::machinery::scheme::ResourceType;
use crate::store::registry::{Registry, WriteOptions};

/// The version the add-on manager reads and writes add-ons at (OCM's controllers' version).
const BETA: &str = "v1beta1";
/// The field manager of the add-on manager's writes.
const MANAGER: &str = "ocm-hub-addon-manager";
/// Add-ons reconciled at once.
const WORKERS: usize = 2;
/// Writes of one run in flight at once.
const WRITES_AT_ONCE: usize = 32;

/// The kinds the add-on manager reads and writes (add-ons at their storage version).
struct Kinds {
    cmas: Arc<ResourceType>,
    mcas: Arc<ResourceType>,
    placements: Arc<ResourceType>,
    decisions: Arc<ResourceType>,
    clusters: Arc<ResourceType>,
    configs: Arc<ResourceType>,
    templates: Arc<ResourceType>,
    works: Arc<ResourceType>,
    rolebindings: Arc<ResourceType>,
}

impl Kinds {
    fn of(registry: &Registry) -> Option<Kinds> {
        let s = &registry.scheme;
        let addon = ocm_proto::api::addon::GROUP;
        let cluster = ocm_proto::api::cluster::GROUP;
        let kind = |g: &str, v: &str, p: &str| s.lookup(g, v, p).cloned();
        Some(Kinds {
            cmas: kind(addon, "v1alpha1", "clustermanagementaddons")?,
            mcas: kind(addon, "v1alpha1", "managedclusteraddons")?,
            placements: kind(cluster, "v1beta1", "placements")?,
            decisions: kind(cluster, "v1beta1", "placementdecisions")?,
            clusters: kind(cluster, "v1", "managedclusters")?,
            configs: kind(addon, "v1alpha1", "addondeploymentconfigs")?,
            templates: kind(addon, "v1alpha1", "addontemplates")?,
            works: kind(ocm_proto::api::work::GROUP, "v1", "manifestworks")?,
            rolebindings: kind("rbac.authorization.k8s.io", "v1", "rolebindings")?,
        })
    }
}

/// The add-on manager: the registry it writes through and the kinds it uses.
pub struct AddonManager {
    registry: Registry,
    kinds: Kinds,
}

impl AddonManager {
    /// The decisions of placement `name` in `ns`, if it exists.
    fn decided(&self, ns: &str, name: &str) -> Option<crate::controllers::rollout::Decisions> {
        let k = &self.kinds;
        crate::controllers::rollout::decided(&self.registry, &k.placements, &k.decisions, ns, name)
    }

    /// A ClusterManagementAddOn read at v1beta1: the object and its typed form.
    fn read_cma(&self, name: &str) -> Option<(Value, ClusterManagementAddOn)> {
        read(&self.registry, &self.kinds.cmas, "", name)
    }

    /// A ManagedClusterAddOn read at v1beta1: the object and its typed form.
    fn read_mca(&self, ns: &str, name: &str) -> Option<(Value, ManagedClusterAddOn)> {
        read(&self.registry, &self.kinds.mcas, ns, name)
    }

    /// Replaces a ManagedClusterAddOn's status (at the resourceVersion it was read at: a
    /// conflict reruns the caller).
    async fn store_mca_status(&self, mca: &ManagedClusterAddOn) -> Result<(), ApiError> {
        let body = serde_json::to_value(mca).map_err(ApiError::internal)?;
        store_status(&self.registry, &self.kinds.mcas, body).await
    }

    /// Replaces a ClusterManagementAddOn's status when it changed.
    async fn store_cma_status(
        &self,
        raw: &Value,
        cma: &ClusterManagementAddOn,
        status: ClusterManagementAddOnStatus,
    ) -> Result<(), ApiError> {
        if cma.status.as_ref() == Some(&status)
            || (cma.status.is_none() && status == ClusterManagementAddOnStatus::default())
        {
            return Ok(());
        }
        let mut body = raw.clone();
        body["status"] = serde_json::to_value(&status).map_err(ApiError::internal)?;
        store_status(&self.registry, &self.kinds.cmas, body).await
    }

    fn opts() -> WriteOptions {
        WriteOptions { field_manager: MANAGER.to_owned(), ..WriteOptions::default() }
    }
}

/// A watch of ClusterManagementAddOns woken by their spec, annotations and deletion, never
/// by their status (which the manager writes itself).
fn cma_watch(
    rt: &Arc<ResourceType>,
    map: impl Fn(&crate::store::cache::CachedObject) -> Vec<String> + Send + Sync + 'static,
) -> crate::controllers::runtime::Watch {
    crate::controllers::runtime::Watch::new(rt, map).on_changes(|a, b| {
        let (a, b) = (a.value(), b.value());
        ["/spec", "/metadata/annotations", "/metadata/deletionTimestamp"]
            .iter()
            .any(|p| a.pointer(p) != b.pointer(p))
    })
}

/// An add-on object from the cache, converted to v1beta1 (the shape the controllers read).
fn read<T: serde::de::DeserializeOwned>(
    registry: &Registry,
    rt: &ResourceType,
    ns: &str,
    name: &str,
) -> Option<(Value, T)> {
    let stored = registry.cached(rt, ns, name)?.value();
    let beta = rt.to_version(BETA, (*stored).clone()).ok()?;
    let typed = serde_json::from_value(beta.clone()).ok()?;
    Some((beta, typed))
}

/// Writes the status of a v1beta1 object, converted to storage, at its resourceVersion.
async fn store_status(registry: &Registry, rt: &ResourceType, beta: Value) -> Result<(), ApiError> {
    let stored = rt.to_storage(BETA, beta)?;
    let (ns, name) = (object::namespace(&stored).to_owned(), object::name(&stored).to_owned());
    let sub = rt.subresource("status");
    registry.update(rt, &ns, &name, stored, sub, &AddonManager::opts()).await.map(drop)
}

/// Starts the add-on manager's controllers (none where the add-on kinds are not served).
pub fn start(runtime: &Runtime) {
    let Some(kinds) = Kinds::of(&runtime.registry) else { return };
    let manager = Arc::new(AddonManager { registry: runtime.registry.clone(), kinds });
    install::start(&manager, runtime);
    config::start(&manager, runtime);
    deploy::start(&manager, runtime);
    health::start(&manager, runtime);
    csr::start(&manager, runtime);
}
