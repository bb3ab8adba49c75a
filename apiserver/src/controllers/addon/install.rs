//! The install strategy of a ClusterManagementAddOn (ocm.md §7.2): with `Placements`, a
//! ManagedClusterAddOn named after the add-on in the namespace of every cluster any listed
//! placement decides (a missing placement selects nothing), owned by the add-on as its
//! controller, and none in other clusters (whoever made it); with `Manual`, nothing.
//!
//! A new ManagedClusterAddOn has an empty spec and the hosting cluster's name when its
//! ManagedCluster names one (`addon.open-cluster-management.io/hosting-cluster-name`). A
//! cluster without its namespace yet (not accepted) is skipped until the namespace appears.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::StreamExt as _;
use ocm_proto::api::addon::{
    ANNOTATION_HOSTING_CLUSTER_NAME, ANNOTATION_LIFECYCLE, INSTALL_STRATEGY_PLACEMENTS,
    InstallStrategy, LIFECYCLE_SELF,
};
use ocm_proto::api::cluster::LABEL_PLACEMENT;
use serde_json::{Value, json};

use super::{AddonManager, WORKERS, WRITES_AT_ONCE};
use crate::controllers::runtime::{Action, Runtime, Watch};
use crate::machinery::error::ApiError;
use crate::machinery::object;
use crate::machinery::scheme::ResourceType;
use crate::store::cache::CachedObject;
use crate::store::registry::DeleteOptions;

/// Starts the install controller: one key per ClusterManagementAddOn (its name).
pub(super) fn start(m: &Arc<AddonManager>, runtime: &Runtime) {
    let watches = watches(m, runtime);
    let m = Arc::clone(m);
    runtime.run("addon-install", watches, WORKERS, move |key| {
        let m = Arc::clone(&m);
        async move { m.install(&key).await }
    });
}

/// What changes an add-on's installs: the add-on itself, its ManagedClusterAddOns coming and
/// going, its placements and their decisions, and cluster namespaces appearing.
fn watches(m: &Arc<AddonManager>, runtime: &Runtime) -> Vec<Watch> {
    let k = &m.kinds;
    let by_name = |o: &CachedObject| vec![o.namespace_name().1.to_owned()];
    let of_namespace = {
        let m = Arc::clone(m);
        move |_: &CachedObject| m.addons_placing(|_| true)
    };
    let mut watches = vec![
        super::cma_watch(&k.cmas, by_name),
        Watch::new(&k.mcas, by_name).on_presence(),
        placement_watch(m, &k.placements).on_presence(),
        decision_watch(m, &k.decisions),
    ];
    if let Some(namespaces) = runtime.registry.scheme.lookup("", "v1", "namespaces") {
        watches.push(Watch::new(namespaces, of_namespace).on_presence());
    }
    watches
}

/// Placements, mapped to the add-ons whose strategy lists them.
pub(super) fn placement_watch(m: &Arc<AddonManager>, rt: &Arc<ResourceType>) -> Watch {
    let m = Arc::clone(m);
    Watch::new(rt, move |p: &CachedObject| {
        let (ns, name) = p.namespace_name();
        m.addons_placing(|listed| listed == (ns, name))
    })
}

/// PlacementDecisions, mapped to the add-ons whose strategy lists their placement.
pub(super) fn decision_watch(m: &Arc<AddonManager>, rt: &Arc<ResourceType>) -> Watch {
    let m = Arc::clone(m);
    Watch::new(rt, move |d: &CachedObject| match d.label(LABEL_PLACEMENT) {
        Some(p) => m.addons_placing(|listed| listed == (d.namespace_name().0, p)),
        None => Vec::new(),
    })
}

impl AddonManager {
    /// The add-ons installed by `Placements` whose strategy lists a placement `listed` accepts
    /// (`(namespace, name)`).
    fn addons_placing(&self, listed: impl Fn((&str, &str)) -> bool) -> Vec<String> {
        self.registry
            .cached_list(&self.kinds.cmas, "")
            .iter()
            .filter_map(|c| {
                let cma = c.value();
                let strategy = strategy(&cma)?;
                let lists = strategy
                    .placements
                    .iter()
                    .any(|p| listed((p.namespace.as_str(), p.name.as_str())));
                lists.then(|| object::name(&cma).to_owned())
            })
            .collect()
    }

    /// One run of the add-on `name`'s install strategy.
    async fn install(&self, name: &str) -> Result<Action, ApiError> {
        let Some(cached) = self.registry.cached(&self.kinds.cmas, "", name) else {
            return Ok(Action::Done); // its ManagedClusterAddOns go with it (owner references)
        };
        let cma = cached.value();
        if object::is_deleting(&cma) || !managed(&cma) {
            return Ok(Action::Done);
        }
        let Some(strategy) = strategy(&cma) else { return Ok(Action::Done) };
        let desired = self.selected(&strategy);
        let existing: Vec<Arc<CachedObject>> = self
            .registry
            .cached_list(&self.kinds.mcas, "")
            .into_iter()
            .filter(|a| a.namespace_name().1 == name)
            .collect();
        let installed: BTreeSet<&str> = existing.iter().map(|a| a.namespace_name().0).collect();
        let add: Vec<&str> =
            desired.iter().map(String::as_str).filter(|c| !installed.contains(c)).collect();
        let remove: Vec<&str> = existing
            .iter()
            .filter(|a| !a.deleting && !desired.contains(a.namespace_name().0))
            .map(|a| a.namespace_name().0)
            .collect();
        self.create_addons(&cma, &add).await?;
        self.delete_addons(name, &remove).await?;
        Ok(Action::Done)
    }

    /// The clusters the strategy's placements decide, all together.
    fn selected(&self, strategy: &InstallStrategy) -> BTreeSet<String> {
        strategy
            .placements
            .iter()
            .filter_map(|p| self.decided(&p.namespace, &p.name))
            .flat_map(|d| d.groups.into_iter().flat_map(|(_, cs)| cs))
            .collect()
    }

    /// Creates the add-on's ManagedClusterAddOn in each of `clusters`; a cluster whose
    /// namespace does not exist yet is left for when it does.
    async fn create_addons(&self, cma: &Value, clusters: &[&str]) -> Result<(), ApiError> {
        let rt = &self.kinds.mcas;
        let owned: Vec<String> = clusters.iter().map(ToString::to_string).collect();
        let results: Vec<Result<(), ApiError>> = futures::stream::iter(owned)
            .map(|cluster: String| async move {
                let addon = self.new_addon(cma, &cluster);
                match self.registry.create_if_absent(rt, addon, &Self::opts()).await {
                    Err(e) if e.code == 404 => Ok(()), // no namespace yet: woken when it comes
                    other => other,
                }
            })
            .buffer_unordered(WRITES_AT_ONCE)
            .collect()
            .await;
        results.into_iter().collect()
    }

    /// The ManagedClusterAddOn of `cma` in `cluster`'s namespace.
    fn new_addon(&self, cma: &Value, cluster: &str) -> Value {
        let mut addon = json!({
            "apiVersion": self.kinds.mcas.storage_api_version(),
            "kind": self.kinds.mcas.kind,
            "metadata": {
                "name": object::name(cma), "namespace": cluster,
                "ownerReferences": [object::controller_ref(cma)],
            },
            "spec": {},
        });
        let hosting = self
            .registry
            .cached(&self.kinds.clusters, "", cluster)
            .and_then(|c| c.value().pointer("/metadata/annotations").cloned())
            .and_then(|a| a.get(ANNOTATION_HOSTING_CLUSTER_NAME).cloned())
            .filter(|h| h.as_str().is_some_and(|h| !h.is_empty()));
        if let Some(hosting) = hosting {
            addon["metadata"]["annotations"] = json!({ ANNOTATION_HOSTING_CLUSTER_NAME: hosting });
        }
        addon
    }

    /// Deletes the add-on `name`'s ManagedClusterAddOn in each of `clusters` (gone is fine).
    async fn delete_addons(&self, name: &str, clusters: &[&str]) -> Result<(), ApiError> {
        let rt = &self.kinds.mcas;
        let owned: Vec<String> = clusters.iter().map(ToString::to_string).collect();
        let results: Vec<Result<(), ApiError>> = futures::stream::iter(owned)
            .map(|cluster: String| async move {
                match self.registry.delete(rt, &cluster, name, &DeleteOptions::default()).await {
                    Err(e) if e.code != 404 => Err(e),
                    _ => Ok(()),
                }
            })
            .buffer_unordered(WRITES_AT_ONCE)
            .collect()
            .await;
        results.into_iter().collect()
    }
}

/// Whether the hub's add-on manager installs this add-on (not annotated `lifecycle: self`).
pub(super) fn managed(cma: &Value) -> bool {
    let lifecycle = cma.pointer("/metadata/annotations").and_then(|a| a.get(ANNOTATION_LIFECYCLE));
    lifecycle.and_then(Value::as_str) != Some(LIFECYCLE_SELF)
}

/// The add-on's install strategy when it is `Placements`.
fn strategy(cma: &Value) -> Option<InstallStrategy> {
    let raw = cma.pointer("/spec/installStrategy")?;
    let strategy: InstallStrategy = serde_json::from_value(raw.clone()).ok()?;
    (strategy.type_.as_deref() == Some(INSTALL_STRATEGY_PLACEMENTS)).then_some(strategy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_placements_strategies_install() {
        let cma = |s: Value| json!({"metadata": {"name": "a"}, "spec": {"installStrategy": s}});
        assert!(strategy(&cma(json!({"type": "Manual"}))).is_none());
        assert!(strategy(&json!({"metadata": {"name": "a"}, "spec": {}})).is_none());
        let placements = json!({"type": "Placements",
            "placements": [{"namespace": "ns", "name": "p"}]});
        let s = strategy(&cma(placements)).expect("a Placements strategy");
        assert_eq!(s.placements.len(), 1);
    }

    #[test]
    fn self_managed_addons_are_left_alone() {
        let with = |v: &str| json!({"metadata": {"annotations": {ANNOTATION_LIFECYCLE: v}}});
        assert!(!managed(&with(LIFECYCLE_SELF)));
        assert!(managed(&with("addon-manager")));
        assert!(managed(&json!({"metadata": {}})));
    }
}
