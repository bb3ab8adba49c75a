//! The ManifestWorkReplicaSet controller (ocm.md §4.6, ocm-wave2.md §1): one ManifestWork per
//! cluster its placements decide, rolled out with each placement's strategy, with revisions and
//! rollback (enhancement 229, plus `RollbackAll`) and per-cluster values.
//!
//! A run of one set: its finalizer, or its cascade deletion; its revisions (`revisions.rs`);
//! then per placement the works to write, keep or delete and the rollout's plan (`deploy.rs`);
//! then its status (`status.rs`). Everything is recomputed from the watch cache on each run.

mod deploy;
mod revisions;
mod status;

use std::sync::Arc;
use std::time::Duration;

use ocm_proto::api::cluster::LABEL_PLACEMENT;
use ocm_proto::api::work::v1alpha1::{
    CASCADE_DELETION_FOREGROUND, ManifestWorkReplicaSet, ManifestWorkReplicaSetSpec,
};
use ocm_proto::api::work::{
    FINALIZER_MANIFEST_WORK_REPLICA_SET_CLEANUP, LABEL_MANIFEST_WORK_REPLICA_SET,
    LABEL_PLACEMENT_NAME,
};
use serde_json::{Value, json};

use crate::controllers::runtime::{Action, Runtime, Watch};
use crate::machinery::error::ApiError;
use crate::machinery::object;
use crate::machinery::scheme::ResourceType;
use crate::machinery::strategy::Validating;
use crate::store::cache::CachedObject;
use crate::store::registry::{Patch, Registry, WriteOptions, Written, subject};
use ocm_proto::validation::FieldError;

use crate::machinery::template::{ClusterValues, RenderError};

/// The field manager of the controller's writes.
const MANAGER: &str = "ocm-hub-manifestworkreplicaset";
/// Sets reconciled at once.
const WORKERS: usize = 4;
/// Work writes of one run in flight at once.
const WRITES_AT_ONCE: usize = 32;
/// The longest a set waits before it is looked at again while a rollout waits (OCM's cap).
const MAX_RECHECK: Duration = Duration::from_secs(30 * 60);

/// The kinds the controller reads and writes.
struct Kinds {
    sets: Arc<ResourceType>,
    works: Arc<ResourceType>,
    placements: Arc<ResourceType>,
    decisions: Arc<ResourceType>,
    clusters: Arc<ResourceType>,
    revisions: Arc<ResourceType>,
}

impl Kinds {
    fn of(registry: &Registry) -> Option<Kinds> {
        let s = &registry.scheme;
        let work = ocm_proto::api::work::GROUP;
        let cluster = ocm_proto::api::cluster::GROUP;
        let kind = |g: &str, v: &str, p: &str| s.lookup(g, v, p).cloned();
        Some(Kinds {
            sets: kind(work, "v1alpha1", "manifestworkreplicasets")?,
            works: kind(work, "v1", "manifestworks")?,
            placements: kind(cluster, "v1beta1", "placements")?,
            decisions: kind(cluster, "v1beta1", "placementdecisions")?,
            clusters: kind(cluster, "v1", "managedclusters")?,
            revisions: kind("apps", "v1", "controllerrevisions")?,
        })
    }
}

/// The controller: the registry it writes through and the kinds it uses.
pub struct Controller {
    registry: Registry,
    kinds: Kinds,
    /// What runs read of each set's clusters (`deploy/memo.rs`).
    memo: deploy::Memo,
}

/// The label value that links a set's works to it: `<namespace>.<name>`.
pub fn owner_label(namespace: &str, name: &str) -> String {
    format!("{namespace}.{name}")
}

impl Controller {
    fn opts() -> WriteOptions {
        WriteOptions { field_manager: MANAGER.to_owned(), ..WriteOptions::default() }
    }

    /// The set of `ns/name` as stored, parsed.
    fn set(
        &self,
        ns: &str,
        name: &str,
    ) -> Result<Option<(Arc<Value>, ManifestWorkReplicaSet)>, ApiError> {
        let Some(cached) = self.registry.cached(&self.kinds.sets, ns, name) else {
            return Ok(None);
        };
        let raw = cached.value();
        let set = serde_json::from_value(Value::clone(&raw)).map_err(|e| {
            ApiError::internal(format!("stored ManifestWorkReplicaSet {ns}/{name}: {e}"))
        })?;
        Ok(Some((raw, set)))
    }

    /// One run of the set `ns/name`.
    async fn run(&self, key: String) -> Result<Action, ApiError> {
        let Some((ns, name)) = key.split_once('/') else { return Ok(Action::Done) };
        let Some((raw, set)) = self.set(ns, name)? else { return Ok(Action::Done) };
        if object::is_deleting(&raw) {
            return self.finalize(&raw, &set).await;
        }
        if !object::finalizers(&raw).contains(&FINALIZER_MANIFEST_WORK_REPLICA_SET_CLEANUP) {
            let body =
                object::finalizer_patch(&raw, FINALIZER_MANIFEST_WORK_REPLICA_SET_CLEANUP, true);
            self.patch(&self.kinds.sets, ns, name, body, None).await?;
            return Ok(Action::Done); // the write runs the set again
        }
        let owner = owner_label(ns, name);
        if ocm_proto::selector::validate_value(&owner).is_err() {
            status::write_invalid_name(self, &raw, &set, &owner).await?;
            return Ok(Action::Done);
        }
        let spec = set.spec.clone().unwrap_or_default();
        let revs = revisions::ensure(self, &raw, &set, &spec).await?;
        let outcome = deploy::deploy(self, ns, &owner, &set, &spec, &revs).await?;
        status::write(self, &raw, &set, &revs, &outcome).await?;
        Ok(match outcome.recheck {
            Some(after) => Action::RequeueAfter(after.min(MAX_RECHECK)),
            None => Action::Done,
        })
    }

    /// A set being deleted: its works deleted; its finalizer released at once (`Background`)
    /// or once they are gone (`Foreground`).
    async fn finalize(
        &self,
        raw: &Value,
        set: &ManifestWorkReplicaSet,
    ) -> Result<Action, ApiError> {
        if !object::finalizers(raw).contains(&FINALIZER_MANIFEST_WORK_REPLICA_SET_CLEANUP) {
            return Ok(Action::Done);
        }
        let (ns, name) = (object::namespace(raw), object::name(raw));
        let works = self.works_of(&owner_label(ns, name));
        let foreground = set
            .spec
            .as_ref()
            .map(|s: &ManifestWorkReplicaSetSpec| s.cascade_deletion_policy.as_str())
            == Some(CASCADE_DELETION_FOREGROUND);
        let pending: Vec<_> = works.iter().filter(|w| !w.deleting).cloned().collect();
        self.delete_works(&pending).await?;
        if foreground && !works.is_empty() {
            return Ok(Action::Done); // each work's removal runs the set again
        }
        let body = object::finalizer_patch(raw, FINALIZER_MANIFEST_WORK_REPLICA_SET_CLEANUP, false);
        self.patch(&self.kinds.sets, ns, name, body, None).await?;
        Ok(Action::Done)
    }

    /// Every ManifestWork linked to the set by its label, in every cluster namespace.
    fn works_of(&self, owner: &str) -> Vec<Arc<CachedObject>> {
        self.registry
            .cached_list(&self.kinds.works, "")
            .into_iter()
            .filter(|w| w.label(LABEL_MANIFEST_WORK_REPLICA_SET) == Some(owner))
            .collect()
    }

    /// Deletes works (already gone is fine), several at once.
    async fn delete_works(&self, works: &[Arc<CachedObject>]) -> Result<(), ApiError> {
        self.registry.delete_each(&self.kinds.works, works, WRITES_AT_ONCE).await
    }

    /// A merge patch of the main resource (`sub` = `None`) or a subresource.
    async fn patch(
        &self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        body: Value,
        sub: Option<&str>,
    ) -> Result<Written, ApiError> {
        let sub = sub.and_then(|s| rt.subresource(s));
        self.registry.patch(rt, ns, name, &Patch::Merge(body), sub, &Self::opts()).await
    }

    /// The ManifestWork cluster `cluster` gets from the set `ns/name` now, before anything is
    /// written (`manifestworkreplicasets/<name>/render?cluster=`).
    pub fn render(&self, ns: &str, name: &str, cluster: &str) -> Result<Value, ApiError> {
        let Some((_, set)) = self.set(ns, name)? else {
            return Err(ApiError::not_found(subject(&self.kinds.sets, name)));
        };
        let Some(c) = self.registry.cached(&self.kinds.clusters, "", cluster) else {
            return Err(ApiError::not_found(subject(&self.kinds.clusters, cluster)));
        };
        let spec = set.spec.unwrap_or_default();
        let owner = owner_label(ns, name);
        let placement = deploy::placement_of(self, ns, &spec, cluster);
        let revision = revisions::hash_of(&spec, set.status.as_ref());
        let values = ClusterValues::of(&c.value());
        let mut work = deploy::desired_work(self, &owner, &set.metadata, &spec, &values, &revision)
            .map_err(|e| render_error(name, &e))?;
        if let Some(p) = placement {
            work["metadata"]["labels"][LABEL_PLACEMENT_NAME] = json!(p);
        }
        Ok(work)
    }
}

/// A render failure as a field error naming the field and the cluster.
fn field_error(e: &RenderError) -> FieldError {
    let detail = match &e.cluster {
        Some(c) => format!("{} (cluster {c:?})", e.detail),
        None => e.detail.clone(),
    };
    FieldError::invalid(e.field.clone(), Value::Null, detail)
}

/// A render failure as a 422 naming the field and the cluster.
pub fn render_error(name: &str, e: &RenderError) -> ApiError {
    ApiError::invalid(
        ocm_proto::api::work::GROUP,
        "ManifestWorkReplicaSet",
        name,
        &[field_error(e)],
    )
}

/// A set is refused (422) when its template cannot be rendered for a cluster its placements
/// decide now, naming the field and the cluster; a cluster decided later that cannot be
/// rendered is reported in the set's status instead.
impl Validating for Controller {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let Ok(set) = serde_json::from_value::<ManifestWorkReplicaSet>(obj.clone()) else {
            return Vec::new(); // the schema's validation speaks of it
        };
        let spec = set.spec.unwrap_or_default();
        let ns = object::namespace(obj);
        let template =
            serde_json::to_value(spec.manifest_work_template.clone().unwrap_or_default())
                .unwrap_or_default();
        let mut clusters: Vec<String> = spec
            .placement_refs
            .iter()
            .filter_map(|p| deploy::decisions(self, ns, &p.name))
            .flat_map(|d| d.clusters().cloned().collect::<Vec<_>>())
            .collect();
        clusters.sort_unstable();
        clusters.dedup();
        for name in clusters {
            let Some(c) = self.registry.cached(&self.kinds.clusters, "", &name) else { continue };
            let values = ClusterValues::of(&c.value());
            if let Err(e) = crate::machinery::template::render(&template, &spec.overrides, &values)
            {
                return vec![field_error(&e)];
            }
        }
        Vec::new()
    }
}

/// Starts the controller; returns it, for the `render` subresource.
pub fn start(runtime: &Runtime) -> Option<Arc<Controller>> {
    let kinds = Kinds::of(&runtime.registry)?;
    let c = Arc::new(Controller {
        registry: runtime.registry.clone(),
        kinds,
        memo: deploy::Memo::default(),
    });
    let check: Arc<dyn Validating> = c.clone();
    runtime.registry.register_validating(&c.kinds.sets, &check);
    let watches = watches(&c);
    let controller = Arc::clone(&c);
    runtime.run("manifestworkreplicaset", watches, WORKERS, move |key| {
        let c = Arc::clone(&c);
        async move { c.run(key).await }
    });
    Some(controller)
}

/// What wakes a set: its own changes, its works (by their label), its placements and their
/// decisions, the clusters its works render from, and its revisions.
fn watches(c: &Arc<Controller>) -> Vec<Watch> {
    let k = &c.kinds;
    let ns_name = |o: &CachedObject| {
        let (ns, name) = o.namespace_name();
        vec![format!("{ns}/{name}")]
    };
    let of_work = |w: &CachedObject| {
        // `<namespace>.<name>`: a namespace has no dot, so the first dot splits them.
        w.label(LABEL_MANIFEST_WORK_REPLICA_SET)
            .and_then(|v| v.split_once('.'))
            .map(|(ns, name)| vec![format!("{ns}/{name}")])
            .unwrap_or_default()
    };
    let sets_of_placement = {
        let c = Arc::clone(c);
        move |ns: &str, placement: &str| -> Vec<String> {
            c.registry
                .cached_list(&c.kinds.sets, ns)
                .iter()
                .filter(|s| refers_to(&s.value(), placement))
                .map(|s| format!("{ns}/{}", s.namespace_name().1))
                .collect()
        }
    };
    let of_placement = {
        let sets = sets_of_placement.clone();
        move |p: &CachedObject| {
            let (ns, name) = p.namespace_name();
            sets(ns, name)
        }
    };
    let of_decision = move |d: &CachedObject| match d.label(LABEL_PLACEMENT) {
        Some(p) => sets_of_placement(d.namespace_name().0, p),
        None => Vec::new(),
    };
    let of_cluster = {
        let c = Arc::clone(c);
        move |cl: &CachedObject| {
            let name = cl.namespace_name().1;
            let mut keys: Vec<String> = c
                .registry
                .cached_list(&c.kinds.works, name)
                .iter()
                .filter_map(|w| of_work(w).pop())
                .collect();
            keys.sort_unstable();
            keys.dedup();
            keys
        }
    };
    let of_revision = |r: &CachedObject| {
        let ns = r.namespace_name().0;
        r.label(ocm_proto::api::work::LABEL_MANIFEST_WORK_REPLICA_SET_NAME)
            .map(|set| vec![format!("{ns}/{set}")])
            .unwrap_or_default()
    };
    vec![
        Watch::new(&k.sets, ns_name),
        Watch::new(&k.works, of_work),
        Watch::new(&k.placements, of_placement),
        Watch::new(&k.decisions, of_decision),
        // A cluster's labels and claims are what its works render from.
        Watch::new(&k.clusters, of_cluster).on_changes(|before, after| {
            let claims = |o: &CachedObject| o.value().pointer("/status/clusterClaims").cloned();
            !before.same_labels(after) || claims(before) != claims(after)
        }),
        Watch::new(&k.revisions, of_revision).on_presence(),
    ]
}

/// Whether a stored set lists the placement `name`.
fn refers_to(set: &Value, name: &str) -> bool {
    set.pointer("/spec/placementRefs").and_then(Value::as_array).is_some_and(|refs| {
        refs.iter().any(|r| r.get("name").and_then(Value::as_str) == Some(name))
    })
}
