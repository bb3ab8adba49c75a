//! Governance policy propagation (OCM's governance-policy-propagator, ocm-wave2.md §3.2–§3.4):
//! PlacementBindings bind the Policies and PolicySets of their namespace to a Placement of it;
//! every cluster the placements decide gets the replicated policy `<ns>.<name>` in its cluster
//! namespace (`replica.rs`), chosen by the pure `select.rs`; the root's status gathers the
//! replicas' compliance and a PolicySet's its policies' (`status.rs`).
//!
//! Authority: a root policy reaches only the clusters its own namespace's Placements decide
//! (which its namespace's ManagedClusterSetBindings allow), and the controller touches only
//! objects it names exactly (`<ns>.<name>` labelled for that root, in a cluster namespace);
//! nothing is read from a label or annotation a user sets to decide where a policy goes.
//! Everything is recomputed from the watch cache on each run.

mod replica;
mod select;
mod status;

use std::collections::BTreeMap;
use std::sync::Arc;

use ocm_proto::api::cluster::LABEL_PLACEMENT;
use ocm_proto::api::policy::v1::{PlacementBinding, Policy};
use ocm_proto::api::policy::v1beta1::{PolicySet, PolicySetPlacement};
use ocm_proto::api::policy::{GROUP, LABEL_ROOT_POLICY, is_enforce, replica_name};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::controllers::runtime::{Action, Runtime, Watch};
use crate::machinery::error::ApiError;
use crate::machinery::object;
use crate::machinery::scheme::ResourceType;
use crate::store::cache::CachedObject;
use crate::store::registry::{Patch, Registry, WriteOptions};

use select::Reach;
use status::Member;

/// The field manager of the controller's writes.
const MANAGER: &str = "ocm-hub-policy-propagator";
/// Policies reconciled at once.
const WORKERS: usize = 4;
/// The most often replicas' reports rerun their root.
const REPORTS_EVERY: std::time::Duration = std::time::Duration::from_secs(1);
/// Replica writes of one run in flight at once.
const WRITES_AT_ONCE: usize = 32;

/// The kinds the controller reads and writes.
struct Kinds {
    policies: Arc<ResourceType>,
    bindings: Arc<ResourceType>,
    sets: Arc<ResourceType>,
    placements: Arc<ResourceType>,
    decisions: Arc<ResourceType>,
    clusters: Arc<ResourceType>,
}

impl Kinds {
    fn of(registry: &Registry) -> Option<Kinds> {
        let s = &registry.scheme;
        let cluster = ocm_proto::api::cluster::GROUP;
        let kind = |g: &str, v: &str, p: &str| s.lookup(g, v, p).cloned();
        Some(Kinds {
            policies: kind(GROUP, "v1", "policies")?,
            bindings: kind(GROUP, "v1", "placementbindings")?,
            sets: kind(GROUP, "v1beta1", "policysets")?,
            placements: kind(cluster, "v1beta1", "placements")?,
            decisions: kind(cluster, "v1beta1", "placementdecisions")?,
            clusters: kind(cluster, "v1", "managedclusters")?,
        })
    }
}

/// The controller: the registry it writes through (fenced where replicas elect a leader) and
/// the kinds it uses.
pub struct Controller {
    registry: Registry,
    kinds: Kinds,
}

/// `ns/name` of an object.
fn key_of(o: &CachedObject) -> String {
    let (ns, name) = o.namespace_name();
    format!("{ns}/{name}")
}

/// The root key a replica names by its label (`<ns>.<name>`: a namespace has no dot).
fn root_key_of_replica(o: &CachedObject) -> Option<String> {
    let (ns, name) = o.label(LABEL_ROOT_POLICY)?.split_once('.')?;
    Some(format!("{ns}/{name}"))
}

/// Parses a cached object as `T`; `None` when it does not parse (its schema was checked at
/// admission, so this is an object written before a schema change; it is left alone).
fn parsed<T: DeserializeOwned>(o: &CachedObject) -> Option<T> {
    serde_json::from_value(Value::clone(&o.value())).ok()
}

impl Controller {
    fn opts() -> WriteOptions {
        WriteOptions { field_manager: MANAGER.to_owned(), ..WriteOptions::default() }
    }

    /// The root policy `ns/name` (a Policy without the root-policy label).
    fn root(&self, ns: &str, name: &str) -> Option<Arc<CachedObject>> {
        self.registry
            .cached(&self.kinds.policies, ns, name)
            .filter(|p| p.label(LABEL_ROOT_POLICY).is_none())
    }

    /// The PolicySets of `ns` listing `policy`.
    fn sets_with(&self, ns: &str, policy: &str) -> Vec<PolicySet> {
        self.registry
            .cached_list(&self.kinds.sets, ns)
            .iter()
            .filter_map(|s| parsed::<PolicySet>(s))
            .filter(|s| s.spec.policies.iter().any(|p| p == policy))
            .collect()
    }

    /// The clusters the Placement `ns/name` decides (none when it is missing).
    fn decided(&self, ns: &str, placement: &str) -> Vec<String> {
        let k = &self.kinds;
        crate::controllers::rollout::decided(
            &self.registry,
            &k.placements,
            &k.decisions,
            ns,
            placement,
        )
        .map(|d| d.clusters().cloned().collect())
        .unwrap_or_default()
    }

    /// Every binding of `ns` that reaches `policy`, directly or through one of its sets.
    fn reaches(&self, ns: &str, policy: &str) -> Vec<Reach> {
        let sets = self.sets_with(ns, policy);
        let mut out = Vec::new();
        for b in self.registry.cached_list(&self.kinds.bindings, ns) {
            let Some(binding) = parsed::<PlacementBinding>(&b) else { continue };
            let r = &binding.placement_ref;
            if r.kind != "Placement" || r.api_group != ocm_proto::api::cluster::GROUP {
                continue; // PlacementRules are not served by this hub
            }
            let base = Reach {
                binding: object_name(&binding.metadata),
                placement: r.name.clone(),
                restricted: binding.sub_filter.as_deref() == Some("restricted"),
                enforce: binding
                    .binding_overrides
                    .as_ref()
                    .and_then(|o| o.remediation_action.as_deref())
                    .is_some_and(is_enforce),
                ..Reach::default()
            };
            let mut decided = None;
            for s in binding.subjects.iter().filter(|s| s.api_group == GROUP) {
                let via = match s.kind.as_str() {
                    "Policy" if s.name == policy => None,
                    "PolicySet" => {
                        match sets.iter().find(|set| object_name(&set.metadata) == s.name) {
                            Some(set) => Some(set),
                            None => continue,
                        }
                    }
                    _ => continue,
                };
                let decided = decided.get_or_insert_with(|| self.decided(ns, &r.name)).clone();
                let excluded = via
                    .map(|set| {
                        set.spec
                            .exclusions
                            .iter()
                            .filter(|e| e.policy_name == policy)
                            .flat_map(|e| e.cluster_names.iter().cloned())
                            .collect()
                    })
                    .unwrap_or_default();
                out.push(Reach {
                    policy_set: via.map(|set| object_name(&set.metadata)),
                    decided,
                    excluded,
                    ..base.clone()
                });
            }
        }
        out
    }

    /// The replicas of root `root_name` that exist, by cluster: looked up by name in every
    /// cluster's namespace (no scan of every policy).
    fn replicas(&self, root_name: &str) -> BTreeMap<String, Arc<CachedObject>> {
        self.registry
            .cached_list(&self.kinds.clusters, "")
            .iter()
            .filter_map(|c| {
                let cluster = c.namespace_name().1;
                let r = self.registry.cached(&self.kinds.policies, cluster, root_name)?;
                replica::is_replica_of(&r.value(), root_name).then(|| (cluster.to_owned(), r))
            })
            .collect()
    }

    /// One run of the root policy `ns/name`: its replicas written and removed, its status.
    async fn run(&self, key: String) -> Result<Action, ApiError> {
        let Some((ns, name)) = key.split_once('/') else { return Ok(Action::Done) };
        let root_name = replica_name(ns, name);
        let existing = self.replicas(&root_name);
        let Some(root) = self.root(ns, name) else {
            self.delete_replicas(existing.values().cloned().collect()).await?;
            return Ok(Action::Done);
        };
        let raw = root.value();
        let disabled = raw.pointer("/spec/disabled").and_then(Value::as_bool) == Some(true);
        let selection = select::select(&self.reaches(ns, name), disabled);
        self.write_replicas(&raw, &selection.clusters).await?;
        let stale: Vec<_> = existing
            .iter()
            .filter(|(c, _)| !selection.clusters.contains_key(*c))
            .map(|(_, r)| Arc::clone(r))
            .collect();
        self.delete_replicas(stale).await?;
        let reported: BTreeMap<String, String> = existing
            .iter()
            .filter_map(|(c, r)| {
                let v = r.value();
                let s = v.pointer("/status/compliant").and_then(Value::as_str)?;
                Some((c.clone(), s.to_owned()))
            })
            .collect();
        let status = status::root_status(&selection, &reported);
        self.write_status(&self.kinds.policies, &raw, serde_json::to_value(status)).await?;
        Ok(Action::Done)
    }

    /// Creates or brings up to date the replica of `root` in each cluster of `clusters`.
    async fn write_replicas(
        &self,
        root: &Value,
        clusters: &BTreeMap<String, bool>,
    ) -> Result<(), ApiError> {
        use futures::StreamExt as _;
        let desired: Vec<Value> =
            clusters.iter().map(|(c, enforce)| replica::replica(root, c, *enforce)).collect();
        let results: Vec<Result<(), ApiError>> =
            futures::stream::iter(desired)
                .map(|d| async move {
                    self.registry.ensure(&self.kinds.policies, d, &Self::opts()).await
                })
                .buffer_unordered(WRITES_AT_ONCE)
                .collect()
                .await;
        results.into_iter().collect()
    }

    /// Deletes replicas (already gone is fine).
    async fn delete_replicas(&self, replicas: Vec<Arc<CachedObject>>) -> Result<(), ApiError> {
        self.registry.delete_each(&self.kinds.policies, &replicas, WRITES_AT_ONCE).await
    }

    /// Writes `status` into `obj`'s status subresource unless it already holds it: a merge
    /// patch naming every field, absent ones as null.
    async fn write_status(
        &self,
        rt: &ResourceType,
        obj: &Value,
        status: Result<Value, serde_json::Error>,
    ) -> Result<(), ApiError> {
        let status = status.map_err(|e| ApiError::internal(format!("status: {e}")))?;
        let current = obj.get("status").cloned().unwrap_or(Value::Object(Map::new()));
        if current == status {
            return Ok(());
        }
        let mut body = status.as_object().cloned().unwrap_or_default();
        for k in current.as_object().into_iter().flatten().map(|(k, _)| k) {
            body.entry(k.clone()).or_insert(Value::Null);
        }
        let patch = Patch::Merge(serde_json::json!({ "status": body }));
        let (ns, name) = (object::namespace(obj), object::name(obj));
        let sub = rt.subresource("status");
        match self.registry.patch(rt, ns, name, &patch, sub, &Self::opts()).await {
            Ok(_) => Ok(()),
            Err(e) if e.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// One run of the PolicySet `ns/name`: its status from its policies' roots.
    async fn run_set(&self, key: String) -> Result<Action, ApiError> {
        let Some((ns, name)) = key.split_once('/') else { return Ok(Action::Done) };
        let Some(cached) = self.registry.cached(&self.kinds.sets, ns, name) else {
            return Ok(Action::Done);
        };
        let Some(set) = parsed::<PolicySet>(&cached) else { return Ok(Action::Done) };
        let mut placement: Vec<PolicySetPlacement> = Vec::new();
        let mut members = Vec::new();
        for policy in &set.spec.policies {
            let member = match self.root(ns, policy).and_then(|p| parsed::<Policy>(&p)) {
                None => Member::Missing,
                Some(p) if p.spec.disabled => Member::Disabled,
                Some(p) => {
                    let st = p.status.unwrap_or_default();
                    let mut clusters = Vec::new();
                    for pl in
                        st.placement.iter().filter(|pl| pl.policy_set.as_deref() == Some(name))
                    {
                        clusters.extend(pl.decisions.iter().filter_map(|d| d.cluster_name.clone()));
                        let entry = PolicySetPlacement {
                            placement: pl.placement.clone(),
                            placement_binding: pl.placement_binding.clone(),
                            placement_rule: pl.placement_rule.clone(),
                        };
                        if !placement.contains(&entry) {
                            placement.push(entry);
                        }
                    }
                    Member::Reporting(status::compliance_among(&st.status, &clusters))
                }
            };
            members.push((policy.clone(), member));
        }
        placement.sort_by(|a, b| a.placement_binding.cmp(&b.placement_binding));
        let status = status::set_status(&members, placement);
        self.write_status(&self.kinds.sets, &cached.value(), serde_json::to_value(status)).await?;
        Ok(Action::Done)
    }
}

/// An object's name from its typed metadata.
fn object_name(meta: &ocm_proto::api::meta::ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

/// Starts the propagator and the PolicySet status controller.
pub fn start(runtime: &Runtime) {
    let Some(kinds) = Kinds::of(&runtime.registry) else { return };
    let c = Arc::new(Controller { registry: runtime.registry.clone(), kinds });
    let policy_watches = policy_watches(&c);
    let set_watches = set_watches(&c);
    let p = Arc::clone(&c);
    runtime.run("policy-propagator", policy_watches, WORKERS, move |key| {
        let c = Arc::clone(&p);
        async move { c.run(key).await }
    });
    runtime.run("policyset", set_watches, 1, move |key| {
        let c = Arc::clone(&c);
        async move { c.run_set(key).await }
    });
}

/// The policy keys (`ns/name`) a binding's subjects reach.
fn policies_of_binding(c: &Controller, b: &CachedObject) -> Vec<String> {
    let ns = b.namespace_name().0;
    let Some(binding) = parsed::<PlacementBinding>(b) else { return Vec::new() };
    let mut keys = Vec::new();
    for s in binding.subjects.iter().filter(|s| s.api_group == GROUP) {
        match s.kind.as_str() {
            "Policy" => keys.push(format!("{ns}/{}", s.name)),
            "PolicySet" => {
                let set = c.registry.cached(&c.kinds.sets, ns, &s.name);
                let set = set.and_then(|s| parsed::<PolicySet>(&s));
                for p in set.map(|s| s.spec.policies).unwrap_or_default() {
                    keys.push(format!("{ns}/{p}"));
                }
            }
            _ => {}
        }
    }
    keys
}

/// The bindings of `ns` that follow Placement `placement`.
fn bindings_of_placement(c: &Controller, ns: &str, placement: &str) -> Vec<Arc<CachedObject>> {
    c.registry
        .cached_list(&c.kinds.bindings, ns)
        .into_iter()
        .filter(|b| {
            b.value().pointer("/placementRef/name").and_then(Value::as_str) == Some(placement)
        })
        .collect()
}

/// What wakes a root policy: itself, its replicas, the bindings and sets that reach it, and
/// the decisions of their placements.
fn policy_watches(c: &Arc<Controller>) -> Vec<Watch> {
    let k = &c.kinds;
    let of_root = |p: &CachedObject| match p.label(LABEL_ROOT_POLICY) {
        Some(_) => Vec::new(),
        None => vec![key_of(p)],
    };
    let of_replica = |p: &CachedObject| root_key_of_replica(p).into_iter().collect();
    let of_binding = {
        let c = Arc::clone(c);
        move |b: &CachedObject| policies_of_binding(&c, b)
    };
    let of_set = |s: &CachedObject| {
        let ns = s.namespace_name().0.to_owned();
        parsed::<PolicySet>(s)
            .map(|set| set.spec.policies.iter().map(|p| format!("{ns}/{p}")).collect())
            .unwrap_or_default()
    };
    let of_decision = {
        let c = Arc::clone(c);
        move |d: &CachedObject| {
            let Some(placement) = d.label(LABEL_PLACEMENT) else { return Vec::new() };
            let ns = d.namespace_name().0;
            bindings_of_placement(&c, ns, placement)
                .iter()
                .flat_map(|b| policies_of_binding(&c, b))
                .collect()
        }
    };
    vec![
        Watch::new(&k.policies, of_root),
        // Every cluster's report wakes its root: a burst (a fleet reporting) is one pass per
        // second, not one status write of the root per cluster.
        Watch::new(&k.policies, of_replica).debounced(REPORTS_EVERY),
        Watch::new(&k.bindings, of_binding),
        Watch::new(&k.sets, of_set),
        Watch::new(&k.decisions, of_decision),
    ]
}

/// What wakes a PolicySet: itself, the root policies it lists (their status), and the
/// bindings that name it.
fn set_watches(c: &Arc<Controller>) -> Vec<Watch> {
    let k = &c.kinds;
    let of_policy = {
        let c = Arc::clone(c);
        move |p: &CachedObject| {
            if p.label(LABEL_ROOT_POLICY).is_some() {
                return Vec::new();
            }
            let (ns, name) = p.namespace_name();
            c.sets_with(ns, name)
                .iter()
                .map(|s| format!("{ns}/{}", object_name(&s.metadata)))
                .collect()
        }
    };
    let of_binding = |b: &CachedObject| {
        let ns = b.namespace_name().0.to_owned();
        parsed::<PlacementBinding>(b)
            .map(|pb| {
                pb.subjects
                    .iter()
                    .filter(|s| s.api_group == GROUP && s.kind == "PolicySet")
                    .map(|s| format!("{ns}/{}", s.name))
                    .collect()
            })
            .unwrap_or_default()
    };
    vec![
        Watch::new(&k.sets, key_of_vec),
        Watch::new(&k.policies, of_policy).debounced(REPORTS_EVERY),
        Watch::new(&k.bindings, of_binding),
    ]
}

fn key_of_vec(o: &CachedObject) -> Vec<String> {
    vec![key_of(o)]
}
