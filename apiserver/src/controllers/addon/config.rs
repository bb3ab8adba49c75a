//! Config resolution and config rollout of an add-on (ocm-wave2.md §2.6–§2.7, OCM's
//! `addonconfiguration` controller): each ManagedClusterAddOn's desired configs by OCM's
//! precedence (its own `spec.configs` > the `configs` of the last listed placement that decides
//! its cluster > the add-on's `defaultConfigs`), each with the spec hash of the object it names;
//! written into `status.configReferences[].desiredConfig` only for the clusters the placement's
//! rollout strategy lets through now (`Configured=True`), the others waiting
//! (`Configured=False`). The add-on's status records its default configs' hashes and one
//! install progression per placement.
//!
//! Where a cluster stands in the rollout is read from its add-on: `ToApply` while its desired
//! configs differ from the computed ones, then `Progressing` or `Failed` (its `Progressing`
//! condition) until the deploy controller copies desired into `lastAppliedConfig`, then
//! `Succeeded`. Clusters no placement decides roll all at once.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::StreamExt as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use ocm_proto::api::addon::v1beta1::{
    ClusterManagementAddOn, ClusterManagementAddOnStatus, ConfigReference, ManagedClusterAddOn,
};
use ocm_proto::api::addon::{
    AddOnConfig, CONDITION_CONFIGURED, CONDITION_PROGRESSING, ConfigSpecHash,
    DefaultConfigReference, InstallConfigReference, InstallProgression, REASON_COMPLETED,
    REASON_FAILED, REASON_PROGRESSING, RESERVED_NO_DEFAULT_CONFIG_NAME,
};
use ocm_proto::api::cluster::v1alpha1::RolloutStrategy;
use ocm_proto::api::meta::{
    CONDITION_FALSE, CONDITION_TRUE, condition, find_condition, set_condition,
};

use super::{AddonManager, WORKERS, WRITES_AT_ONCE, install};
use crate::controllers::rollout::{self, ClusterStatus, Groups, Status};
use crate::controllers::runtime::{Action, Runtime, Watch};
use crate::machinery::clock;
use crate::machinery::error::ApiError;
use crate::store::cache::CachedObject;

/// The spec hashes of the configs one run has looked up.
type Hashes = std::collections::HashMap<[String; 4], ConfigSpecHash>;
/// A config kind: (group, resource).
pub(super) type ConfigKind = (String, String);
/// Desired configs by kind.
pub(super) type Desired = BTreeMap<ConfigKind, ConfigSpecHash>;

/// Starts the configuration controller: one key per ClusterManagementAddOn (its name).
pub(super) fn start(m: &Arc<AddonManager>, runtime: &Runtime) {
    let watches = watches(m, runtime);
    let m = Arc::clone(m);
    runtime.run("addon-config", watches, WORKERS, move |key| {
        let m = Arc::clone(&m);
        async move { m.configure(&key).await }
    });
}

/// What changes an add-on's configs: the add-on, its ManagedClusterAddOns, placements and
/// decisions, and the config objects (ADCs, templates) every add-on may name.
fn watches(m: &Arc<AddonManager>, runtime: &Runtime) -> Vec<Watch> {
    let k = &m.kinds;
    let by_name = |o: &CachedObject| vec![o.namespace_name().1.to_owned()];
    let mut watches = vec![
        super::cma_watch(&k.cmas, by_name),
        Watch::new(&k.mcas, by_name)
            .on_changes(|a, b| rollout_facts(&a.value()) != rollout_facts(&b.value()))
            .debounced(std::time::Duration::from_millis(200)),
        install::placement_watch(m, &k.placements).on_presence(),
        install::decision_watch(m, &k.decisions).debounced(std::time::Duration::from_millis(200)),
    ];
    for rt in [&k.configs, &k.templates] {
        let every = {
            let m = Arc::clone(m);
            move |_: &CachedObject| m.addon_names()
        };
        watches.push(Watch::new(rt, every).debounced(std::time::Duration::from_millis(200)));
    }
    let _ = runtime;
    watches
}

/// One placement's node of the rollout graph: its strategy and the add-ons it decides.
struct Node {
    placement: Option<(String, String)>,
    /// The placement's decision groups, read once per run (`None`: no such placement, or the
    /// node of the add-ons no placement decides).
    decided: Option<Vec<(crate::controllers::rollout::GroupKey, Vec<String>)>>,
    strategy: RolloutStrategy,
    configs: Vec<AddOnConfig>,
    addons: Vec<(ManagedClusterAddOn, Desired)>,
}

impl AddonManager {
    /// Every add-on's name.
    pub(super) fn addon_names(&self) -> Vec<String> {
        let cmas = self.registry.cached_list(&self.kinds.cmas, "");
        cmas.iter().map(|c| c.namespace_name().1.to_owned()).collect()
    }

    /// One run of the add-on `name`'s configuration.
    async fn configure(&self, name: &str) -> Result<Action, ApiError> {
        let Some((cma_raw, cma)) = self.read_cma(name) else { return Ok(Action::Done) };
        if cma.metadata.deletion_timestamp.is_some() {
            return Ok(Action::Done);
        }
        let defaults: Vec<AddOnConfig> = cma
            .spec
            .default_configs
            .iter()
            .filter(|c| c.name != RESERVED_NO_DEFAULT_CONFIG_NAME)
            .cloned()
            .collect();
        let mut hashes = Hashes::new();
        let nodes = self.nodes(name, &cma, &defaults, &mut hashes);
        let now = clock::timestamp();
        let mut recheck = None;
        let mut progressions = Vec::new();
        for node in &nodes {
            let (to_apply, next) = self.plan(node, now);
            recheck = rollout::earliest(recheck, next);
            self.write_desired(node, &to_apply).await?;
            if let Some((ns, pname)) = &node.placement {
                let old = cma.status.iter().flat_map(|s| &s.install_progressions);
                let old = old.into_iter().find(|p| p.namespace == *ns && p.name == *pname);
                let desired = self.desired(&mut hashes, &defaults, &node.configs, &[]);
                progressions.push(progression(ns, pname, node, desired, old, &to_apply));
            }
        }
        let status = ClusterManagementAddOnStatus {
            default_config_references: defaults
                .iter()
                .map(|c| DefaultConfigReference {
                    group: c.group.clone(),
                    resource: c.resource.clone(),
                    desired_config: self
                        .desired(&mut hashes, std::slice::from_ref(c), &[], &[])
                        .into_values()
                        .next(),
                })
                .collect(),
            install_progressions: progressions,
        };
        self.store_cma_status(&cma_raw, &cma, status).await?;
        Ok(recheck.map_or(Action::Done, Action::RequeueAfter))
    }

    /// The rollout graph: a node per listed placement (a cluster decided by several belongs to
    /// the last), and a node of every other add-on rolled all at once.
    fn nodes(
        &self,
        name: &str,
        cma: &ClusterManagementAddOn,
        defaults: &[AddOnConfig],
        hashes: &mut Hashes,
    ) -> Vec<Node> {
        let placements = cma.spec.install_strategy.iter().flat_map(|s| &s.placements);
        let mut nodes: Vec<Node> = Vec::new();
        let mut owner: BTreeMap<String, usize> = BTreeMap::new();
        for p in placements {
            let i = nodes.len();
            let decided = self.decided(&p.namespace, &p.name).map(|d| d.groups);
            for cluster in decided.iter().flatten().flat_map(|(_, cs)| cs) {
                owner.insert(cluster.clone(), i);
            }
            nodes.push(Node {
                placement: Some((p.namespace.clone(), p.name.clone())),
                decided,
                strategy: p.rollout_strategy.clone().unwrap_or_default(),
                configs: p.configs.clone(),
                addons: Vec::new(),
            });
        }
        let rest = nodes.len();
        nodes.push(Node {
            placement: None,
            decided: None,
            strategy: RolloutStrategy::default(),
            configs: Vec::new(),
            addons: Vec::new(),
        });
        for cached in self.registry.cached_list(&self.kinds.mcas, "") {
            let (ns, n) = cached.namespace_name();
            if n != name {
                continue;
            }
            let Some(mca) = self.read_mca(ns, n).map(|(_, m)| m) else { continue };
            let i = owner.get(ns).copied().unwrap_or(rest);
            let desired = self.desired(hashes, defaults, &nodes[i].configs, &mca.spec.configs);
            nodes[i].addons.push((mca, desired));
        }
        nodes
    }

    /// The desired configs of one add-on: defaults, overridden by the placement's, overridden
    /// by its own, each kind once (each config hashed once per run).
    fn desired(
        &self,
        hashes: &mut Hashes,
        defaults: &[AddOnConfig],
        placement: &[AddOnConfig],
        own: &[AddOnConfig],
    ) -> Desired {
        let mut out = Desired::new();
        for c in defaults.iter().chain(placement).chain(own) {
            let key = [
                c.group.clone().unwrap_or_default(),
                c.resource.clone(),
                c.namespace.clone().unwrap_or_default(),
                c.name.clone(),
            ];
            let hashed = hashes.entry(key).or_insert_with(|| self.hashed(c)).clone();
            out.insert(kind_of(c), hashed);
        }
        out
    }

    /// A config reference with the spec hash of the object it names (empty when it is missing).
    fn hashed(&self, c: &AddOnConfig) -> ConfigSpecHash {
        let group = c.group.clone().unwrap_or_default();
        let namespace = c.namespace.clone().filter(|n| !n.is_empty());
        let hash = self
            .registry
            .scheme
            .types()
            .iter()
            .find(|rt| rt.group == group && rt.plural == c.resource && rt.review.is_none())
            .and_then(|rt| self.registry.cached(rt, namespace.as_deref().unwrap_or(""), &c.name))
            .map(|o| ocm_proto::api::addon::spec_hash(&o.value()))
            .unwrap_or_default();
        ConfigSpecHash { namespace, name: c.name.clone(), spec_hash: Some(hash) }
    }

    /// The add-ons of `node` to give their desired configs now, and when to look again.
    fn plan(&self, node: &Node, now: Timestamp) -> (BTreeSet<String>, Option<std::time::Duration>) {
        let statuses: Vec<(String, Status, Option<Timestamp>)> = node
            .addons
            .iter()
            .map(|(mca, desired)| {
                let (status, at) = rollout_status(mca, desired);
                (mca.metadata.namespace.clone().unwrap_or_default(), status, at)
            })
            .collect();
        let Some((_, name)) = &node.placement else {
            let all = statuses.iter().filter(|s| s.1 == Status::ToApply).map(|s| s.0.clone());
            return (all.collect(), None);
        };
        let have: BTreeSet<&str> = statuses.iter().map(|s| s.0.as_str()).collect();
        let groups = node.decided.as_ref().map(|d| {
            Groups::new(d.iter().map(|(g, cs)| {
                let installed = cs.iter().filter(|c| have.contains(c.as_str())).cloned();
                (g.clone(), installed.collect::<Vec<_>>())
            }))
        });
        let Some(groups) = groups else { return (BTreeSet::new(), None) };
        let membership = groups.membership();
        let existing: Vec<ClusterStatus> = statuses
            .iter()
            .filter(|s| s.1 != Status::ToApply)
            .filter_map(|(c, s, at)| {
                let group = (*membership.get(c.as_str())?).clone();
                Some(ClusterStatus::new(c.clone(), group, *s, *at))
            })
            .collect();
        match rollout::plan(&node.strategy, &groups, &existing, now) {
            Ok(plan) => {
                let apply = plan
                    .to_rollout
                    .iter()
                    .filter(|c| c.status == Status::ToApply)
                    .map(|c| c.cluster.clone())
                    .collect();
                (apply, plan.recheck_after)
            }
            Err(e) => {
                tracing::info!(placement = %name, error = %e, "add-on rollout strategy cannot be planned");
                (BTreeSet::new(), None)
            }
        }
    }

    /// Writes the desired configs of the node's add-ons in `apply` (Configured=True), and
    /// marks the ones never configured that wait (Configured=False).
    async fn write_desired(&self, node: &Node, apply: &BTreeSet<String>) -> Result<(), ApiError> {
        let writes: Vec<(ManagedClusterAddOn, Desired, bool)> =
            node.addons
                .iter()
                .filter_map(|(mca, desired)| {
                    let cluster = mca.metadata.namespace.as_deref().unwrap_or("");
                    let go = apply.contains(cluster);
                    let configured = mca.status.as_ref().is_some_and(|s| {
                        find_condition(&s.conditions, CONDITION_CONFIGURED).is_some()
                    });
                    (go || !configured).then(|| (mca.clone(), desired.clone(), go))
                })
                .collect();
        let results: Vec<Result<(), ApiError>> = futures::stream::iter(writes)
            .map(|(mca, desired, go)| async move { self.configure_addon(mca, &desired, go).await })
            .buffer_unordered(WRITES_AT_ONCE)
            .collect()
            .await;
        results.into_iter().collect()
    }

    /// One add-on's configured status: its desired configs when `go`, else the wait.
    async fn configure_addon(
        &self,
        mut mca: ManagedClusterAddOn,
        desired: &Desired,
        go: bool,
    ) -> Result<(), ApiError> {
        let status = mca.status.get_or_insert_with(Default::default);
        let before = status.clone();
        let now = Time(clock::timestamp());
        if go {
            let old: BTreeMap<ConfigKind, ConfigReference> = status
                .config_references
                .drain(..)
                .map(|r| ((r.group.clone().unwrap_or_default(), r.resource.clone()), r))
                .collect();
            status.config_references = desired
                .iter()
                .map(|((group, resource), hash)| {
                    let kept = old.get(&(group.clone(), resource.clone()));
                    ConfigReference {
                        group: Some(group.clone()),
                        resource: resource.clone(),
                        last_observed_generation: kept.and_then(|r| r.last_observed_generation),
                        desired_config: Some(hash.clone()),
                        last_applied_config: kept.and_then(|r| r.last_applied_config.clone()),
                    }
                })
                .collect();
            let c = condition(
                CONDITION_CONFIGURED,
                CONDITION_TRUE,
                "ConfigurationsConfigured",
                "Configurations configured",
            );
            set_condition(&mut status.conditions, c, now);
        } else {
            let c = condition(
                CONDITION_CONFIGURED,
                CONDITION_FALSE,
                "ConfigurationsNotConfigured",
                "Configurations are not configured",
            );
            set_condition(&mut status.conditions, c, now);
        }
        if *status == before {
            return Ok(());
        }
        self.store_mca_status(&mca).await
    }
}

/// What of an add-on its configuration reads: its own configs, its deletion, the configs its
/// status holds and its `Progressing` condition.
fn rollout_facts(mca: &serde_json::Value) -> [Option<serde_json::Value>; 4] {
    let progressing = mca
        .pointer("/status/conditions")
        .and_then(serde_json::Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == CONDITION_PROGRESSING).cloned());
    [
        mca.pointer("/spec/configs").cloned(),
        mca.pointer("/metadata/deletionTimestamp").cloned(),
        mca.pointer("/status/configReferences").cloned(),
        progressing,
    ]
}

/// A config's kind key.
pub(super) fn kind_of(c: &AddOnConfig) -> ConfigKind {
    (c.group.clone().unwrap_or_default(), c.resource.clone())
}

/// The desired configs an add-on's status holds.
pub(super) fn status_desired(mca: &ManagedClusterAddOn) -> Desired {
    mca.status.as_ref().map(|s| desired_of(&s.config_references)).unwrap_or_default()
}

/// The desired configs of config references.
pub(super) fn desired_of(refs: &[ConfigReference]) -> Desired {
    refs.iter()
        .filter_map(|r| {
            let d = r.desired_config.clone()?;
            Some(((r.group.clone().unwrap_or_default(), r.resource.clone()), d))
        })
        .collect()
}

/// Where an add-on stands against `desired` (ocm-wave2.md §2.7) and since when.
fn rollout_status(mca: &ManagedClusterAddOn, desired: &Desired) -> (Status, Option<Timestamp>) {
    if status_desired(mca) != *desired {
        return (Status::ToApply, None);
    }
    let status = mca.status.as_ref();
    let progressing =
        status.and_then(|s| find_condition(&s.conditions, CONDITION_PROGRESSING)).cloned();
    let at = progressing.as_ref().map(|c| c.last_transition_time.0);
    let applied = status
        .into_iter()
        .flat_map(|s| &s.config_references)
        .all(|r| r.last_applied_config.as_ref() == r.desired_config.as_ref());
    if !applied {
        let failed = progressing.as_ref().is_some_and(|c| c.reason == REASON_FAILED);
        return (if failed { Status::Failed } else { Status::Progressing }, at);
    }
    let completed = progressing.as_ref().is_some_and(|c| c.reason == REASON_COMPLETED);
    (Status::Succeeded, if completed { at } else { None })
}

/// The install progression of one placement: its configs and how far they rolled.
fn progression(
    ns: &str,
    name: &str,
    node: &Node,
    desired: Desired,
    old: Option<&InstallProgression>,
    applying: &BTreeSet<String>,
) -> InstallProgression {
    let total = node.addons.len();
    let (mut succeeded, mut failed, mut progressing) = (0, 0, 0);
    for (mca, d) in &node.addons {
        let cluster = mca.metadata.namespace.as_deref().unwrap_or("");
        match rollout_status(mca, d).0 {
            Status::Succeeded => succeeded += 1,
            Status::Failed | Status::TimeOut => failed += 1,
            Status::Progressing => progressing += 1,
            Status::ToApply if applying.contains(cluster) => progressing += 1,
            _ => {}
        }
    }
    let done = succeeded == total;
    let config_references = desired
        .iter()
        .map(|((group, resource), hash)| InstallConfigReference {
            group: Some(group.clone()),
            resource: resource.clone(),
            desired_config: Some(hash.clone()),
            last_known_good_config: done.then(|| hash.clone()),
            last_applied_config: done.then(|| hash.clone()),
        })
        .collect();
    let c = if done {
        let msg =
            format!("{succeeded}/{total} completed with no errors, {failed} failed 0 timeout.");
        condition(CONDITION_PROGRESSING, CONDITION_FALSE, REASON_COMPLETED, msg)
    } else {
        let msg = format!(
            "{}/{total} progressing..., {failed} failed 0 timeout.",
            progressing + succeeded
        );
        condition(CONDITION_PROGRESSING, CONDITION_TRUE, REASON_PROGRESSING, msg)
    };
    let mut conditions = old.map(|p| p.conditions.clone()).unwrap_or_default();
    set_condition(&mut conditions, c, Time(clock::timestamp()));
    InstallProgression {
        namespace: ns.to_owned(),
        name: name.to_owned(),
        config_references,
        conditions,
    }
}
