//! The hub's add-on manager (ocm.md §7, ocm-wave2.md §2): what OCM's `addon-manager` does for
//! every ClusterManagementAddOn it manages (those not annotated `lifecycle: self`).
//!
//! `install.rs`: the install strategy, one ManagedClusterAddOn per cluster the `Placements`
//! strategy selects, each owned by its ClusterManagementAddOn; nothing for `Manual`.

mod install;
mod template;

use std::sync::Arc;

use crate::controllers::runtime::Runtime;
use crate::machinery::scheme::ResourceType;
use crate::store::registry::{Registry, WriteOptions};

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
        })
    }
}

/// The add-on manager: the registry it writes through and the kinds it uses.
pub struct AddonManager {
    registry: Registry,
    kinds: Kinds,
}

impl AddonManager {
    fn opts() -> WriteOptions {
        WriteOptions { field_manager: MANAGER.to_owned(), ..WriteOptions::default() }
    }
}

/// Starts the add-on manager's controllers (none where the add-on kinds are not served).
pub fn start(runtime: &Runtime) {
    let Some(kinds) = Kinds::of(&runtime.registry) else { return };
    let manager = Arc::new(AddonManager { registry: runtime.registry.clone(), kinds });
    install::start(&manager, runtime);
}
