//! The placement controller (ocm.md §5): runs the scheduler of `schedule.rs` for each Placement
//! when anything it reads changes (debounced), writes the PlacementDecisions (100 clusters each,
//! OCM's names, labels and owner) and the Placement's status and conditions.

pub mod schedule;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use ocm_proto::api::cluster::v1::ManagedCluster;
use ocm_proto::api::cluster::v1alpha1::AddOnPlacementScore;
use ocm_proto::api::cluster::v1beta1::{Placement, PlacementDecision};
use ocm_proto::api::cluster::v1beta2::ManagedClusterSet;
use ocm_proto::api::cluster::{self as api};
use ocm_proto::api::meta::{Time, condition, set_condition};
use ocm_proto::selector::LabelSelector;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::background::Background;
use crate::cache::CachedObject;
use crate::error::ApiError;
use crate::object;
use crate::reconcile::{self, Action, Watch};
use crate::registry::{DeleteOptions, Patch, Registry, WriteOptions};
use crate::scheme::ResourceType;
use crate::table::{Column, Include, TableRequest};
use schedule::{AddOnValue, ClusterFacts, Outcome, World};

/// The field manager of the scheduler's writes.
const MANAGER: &str = "ocm-hub-placement";
/// How long a change to clusters, sets, bindings or scores waits for more before placements
/// are scheduled again (a relabel of every cluster is a pass per this, not one per cluster).
const DEBOUNCE: Duration = Duration::from_millis(100);
/// Every placement is scheduled again this often regardless (OCM's informer resync).
const RESYNC: Duration = Duration::from_secs(600);

/// The kinds the scheduler reads and writes.
struct Kinds {
    clusters: Arc<ResourceType>,
    sets: Arc<ResourceType>,
    bindings: Arc<ResourceType>,
    placements: Arc<ResourceType>,
    decisions: Arc<ResourceType>,
    scores: Arc<ResourceType>,
    events: Arc<ResourceType>,
}

impl Kinds {
    fn of(registry: &Registry) -> Option<Kinds> {
        let s = &registry.scheme;
        let g = api::GROUP;
        let kind = |v: &str, p: &str| s.lookup(g, v, p).cloned();
        Some(Kinds {
            clusters: kind("v1", "managedclusters")?,
            sets: kind("v1beta2", "managedclustersets")?,
            bindings: kind("v1beta2", "managedclustersetbindings")?,
            placements: kind("v1beta1", "placements")?,
            decisions: kind("v1beta1", "placementdecisions")?,
            scores: kind("v1alpha1", "addonplacementscores")?,
            events: s.lookup("", "v1", "events").cloned()?,
        })
    }
}

/// Parsed forms kept per object revision, so a pass parses only what changed since the last.
struct Memo<T> {
    by_key: HashMap<String, (u64, Arc<T>)>,
}

impl<T> Default for Memo<T> {
    fn default() -> Self {
        Memo { by_key: HashMap::new() }
    }
}

impl<T> Memo<T> {
    /// `objects` as `T`s, parsing those new or changed since the last call; forgets the rest.
    fn refresh(
        &mut self,
        objects: &[Arc<CachedObject>],
        parse: impl Fn(&CachedObject) -> Option<T>,
    ) -> Vec<Arc<T>> {
        let mut fresh = HashMap::with_capacity(objects.len());
        let mut out = Vec::with_capacity(objects.len());
        for o in objects {
            let kept = self.by_key.remove(&o.key).filter(|(rev, _)| *rev == o.rev);
            let item = match kept {
                Some((_, item)) => item,
                None => match parse(o) {
                    Some(item) => Arc::new(item),
                    None => continue,
                },
            };
            out.push(Arc::clone(&item));
            fresh.insert(o.key.clone(), (o.rev, item));
        }
        self.by_key = fresh;
        out
    }
}

fn parse<T: DeserializeOwned>(o: &CachedObject) -> Option<T> {
    match serde_json::from_slice(&o.json) {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::warn!(key = %o.key, error = %e, "placement: stored object does not parse");
            None
        }
    }
}

/// One PlacementDecision as the scheduler reads it.
struct DecisionFacts {
    /// `<namespace>/<placement>` from its label.
    placement: String,
    clusters: Vec<String>,
}

/// The scheduler: the controller's state, and `placements/explain`.
pub struct Scheduler {
    registry: Registry,
    kinds: Kinds,
    clusters: Mutex<Memo<ClusterFacts>>,
    decisions: Mutex<Memo<DecisionFacts>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler").finish_non_exhaustive()
    }
}

/// What a pass read of the world, besides the placement.
struct Snapshot {
    clusters: Vec<Arc<ClusterFacts>>,
    sets: BTreeMap<String, Result<LabelSelector, String>>,
    bindings: BTreeSet<String>,
    current: BTreeSet<String>,
    decided_elsewhere: HashMap<String, u32>,
}

impl Scheduler {
    fn opts() -> WriteOptions {
        WriteOptions { field_manager: MANAGER.to_owned(), ..WriteOptions::default() }
    }

    /// The world as `ns/name` sees it now.
    fn snapshot(&self, ns: &str, name: &str) -> Snapshot {
        let k = &self.kinds;
        let reg = &self.registry;
        let clusters = lock(&self.clusters).refresh(&reg.cached_list(&k.clusters, ""), |o| {
            parse::<ManagedCluster>(o).map(|c| ClusterFacts::of(&c))
        });
        let sets = reg
            .cached_list(&k.sets, "")
            .iter()
            .filter(|s| !s.deleting)
            .filter_map(|s| parse::<ManagedClusterSet>(s))
            .map(|set| {
                let name = set.metadata.name.clone().unwrap_or_default();
                let selector = set.spec.as_ref().and_then(|s| s.cluster_selector.as_ref());
                let sel = crate::registration::set_selector(&name, selector);
                (name, sel)
            })
            .collect();
        let bindings = reg
            .cached_list(&k.bindings, ns)
            .iter()
            .filter(|b| !b.deleting)
            .map(|b| b.namespace_name().1.to_owned())
            .collect();
        let decisions = lock(&self.decisions).refresh(&reg.cached_list(&k.decisions, ""), |o| {
            let placement = o.label(api::LABEL_PLACEMENT)?;
            let d = parse::<PlacementDecision>(o)?;
            let clusters = d.status.map(|s| s.decisions).unwrap_or_default();
            Some(DecisionFacts {
                placement: format!("{}/{placement}", o.namespace_name().0),
                clusters: clusters.into_iter().map(|c| c.cluster_name).collect(),
            })
        });
        let me = format!("{ns}/{name}");
        let mut current = BTreeSet::new();
        let mut decided_elsewhere: HashMap<String, u32> = HashMap::new();
        for d in &decisions {
            if d.placement == me {
                current.extend(d.clusters.iter().cloned());
            } else {
                for c in &d.clusters {
                    *decided_elsewhere.entry(c.clone()).or_default() += 1;
                }
            }
        }
        Snapshot { clusters, sets, bindings, current, decided_elsewhere }
    }

    /// An AddOnPlacementScore item, as of `now`.
    fn addon_score(
        &self,
        cluster: &str,
        resource: &str,
        score: &str,
        now: Timestamp,
    ) -> AddOnValue {
        let Some(o) = self.registry.cached(&self.kinds.scores, cluster, resource) else {
            return AddOnValue::Missing;
        };
        let Some(s) = parse::<AddOnPlacementScore>(&o) else { return AddOnValue::Missing };
        let Some(status) = s.status else { return AddOnValue::Missing };
        if status.valid_until.is_some_and(|t| t.0 < now) {
            return AddOnValue::Expired;
        }
        status
            .scores
            .iter()
            .find(|i| i.name == score)
            .map_or(AddOnValue::Missing, |i| AddOnValue::Value(i.value))
    }

    /// Schedules `placement` against the world now; `explain` fills the verdicts.
    pub(crate) fn schedule(&self, ns: &str, placement: &Placement, explain: bool) -> Outcome {
        let name = placement.metadata.name.as_deref().unwrap_or_default();
        let snap = self.snapshot(ns, name);
        let now = Timestamp::now();
        let addon_score = |c: &str, r: &str, s: &str| self.addon_score(c, r, s, now);
        let world = World {
            clusters: &snap.clusters,
            sets: &snap.sets,
            bindings: &snap.bindings,
            current: &snap.current,
            decided_elsewhere: &snap.decided_elsewhere,
            addon_score: &addon_score,
            now,
        };
        schedule::schedule(placement, &world, explain)
    }

    /// `placements/<name>/explain`: every cluster of the hub, the step that dropped it (or
    /// that it was selected), why, and its scores, as a `meta.k8s.io/v1` Table, computed now
    /// against the same state the controller reads.
    pub fn explain(&self, rt: &ResourceType, ns: &str, name: &str) -> Result<Value, ApiError> {
        let Some(cached) = self.registry.cached(&self.kinds.placements, ns, name) else {
            return Err(ApiError::not_found(crate::registry::subject(rt, name)));
        };
        let placement: Placement = parse(&cached).ok_or_else(|| {
            ApiError::internal(format!("stored Placement {ns}/{name} does not parse"))
        })?;
        let outcome = self.schedule(ns, &placement, true);
        let rows: Vec<Value> = outcome
            .verdicts
            .iter()
            .map(|v| {
                let scores: Vec<String> =
                    v.scores.iter().map(|(p, s)| format!("{p}={s}")).collect();
                json!({
                    "metadata": {"name": v.cluster},
                    "step": v.step.as_str(),
                    "reason": v.reason,
                    "total": v.total,
                    "scores": scores.join(" "),
                })
            })
            .collect();
        let s = &outcome.satisfied;
        let summary = match &outcome.misconfigured {
            Some(m) => format!("Misconfigured: {m}"),
            None => format!("{} {}: {}", s.status, s.reason, s.message),
        };
        let columns = [
            Column::computed(
                "Step",
                "string",
                0,
                "The step that dropped the cluster, or Selected.",
                |v| v["step"].clone(),
            ),
            Column::computed(
                "Score",
                "integer",
                0,
                "The weighted total of the prioritizers (feasible clusters).",
                |v| v["total"].clone(),
            ),
            Column::computed("Reason", "string", 0, "Why.", |v| v["reason"].clone()),
            Column::computed(
                "Scores",
                "string",
                1,
                "Each prioritizer's score before weighting.",
                |v| v["scores"].clone(),
            ),
        ];
        let metadata = json!({
            "resourceVersion": cached.rev.to_string(),
            // Not a Table field Kubernetes defines; clients ignore it, people read it.
            "summary": summary,
        });
        let req = TableRequest { version: "v1", include: Include::None };
        Ok(crate::table::build(&columns, rows, metadata, req, true))
    }

    async fn run(&self, key: String) -> Result<Action, ApiError> {
        let k = &self.kinds;
        let Some((ns, name)) = key.split_once('/') else { return Ok(Action::Done) };
        let Some(cached) = self.registry.cached(&k.placements, ns, name) else {
            return Ok(Action::Done); // its decisions go with it (owner references)
        };
        let raw = cached.value();
        if object::is_deleting(&raw)
            || raw
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(api::ANNOTATION_EXPERIMENTAL_SCHEDULING_DISABLE))
                .and_then(Value::as_str)
                == Some("true")
        {
            return Ok(Action::Done);
        }
        let placement: Placement = serde_json::from_value((*raw).clone())
            .map_err(|e| ApiError::internal(format!("stored Placement {key}: {e}")))?;
        let outcome = self.schedule(ns, &placement, false);
        let slices = schedule::slices(name, &outcome.groups);
        self.write_status(ns, name, &raw, &placement, &outcome, &slices).await?;
        if outcome.misconfigured.is_some() {
            return Ok(Action::RequeueAfter(RESYNC));
        }
        let changes = self.bind(ns, name, &raw, &slices).await?;
        if !changes.is_empty() {
            self.record_pass(&raw, &outcome, &changes).await;
        }
        Ok(Action::RequeueAfter(outcome.requeue_after.map_or(RESYNC, |d| d.min(RESYNC))))
    }

    async fn write_status(
        &self,
        ns: &str,
        name: &str,
        raw: &Value,
        placement: &Placement,
        outcome: &Outcome,
        slices: &[(String, &schedule::Group, &[String])],
    ) -> Result<(), ApiError> {
        let status = placement.status.clone().unwrap_or_default();
        let mut conditions = status.conditions.clone();
        let now = Time(Timestamp::now());
        let misconfigured = match &outcome.misconfigured {
            Some(m) => condition("PlacementMisconfigured", "True", "Misconfigured", m.clone()),
            None => condition(
                "PlacementMisconfigured",
                "False",
                "Succeedconfigured",
                "Placement configurations check pass",
            ),
        };
        let s = &outcome.satisfied;
        let satisfied = condition("PlacementSatisfied", s.status, s.reason, s.message.clone());
        let mut changed = set_condition(&mut conditions, misconfigured, now.clone());
        changed |= set_condition(&mut conditions, satisfied, now);
        let mut body = json!({"conditions": conditions});
        if outcome.misconfigured.is_none() {
            let groups: Vec<Value> = outcome
                .groups
                .iter()
                .map(|g| {
                    let names: Vec<&str> = slices
                        .iter()
                        .filter(|(_, sg, _)| sg.index == g.index)
                        .map(|(n, _, _)| n.as_str())
                        .collect();
                    json!({
                        "decisionGroupIndex": g.index,
                        "decisionGroupName": g.name,
                        "decisions": names,
                        "clusterCount": g.clusters.len(),
                    })
                })
                .collect();
            let selected = i32::try_from(outcome.selected).unwrap_or(i32::MAX);
            let old_groups = serde_json::to_value(&status.decision_groups).unwrap_or_default();
            changed |= status.number_of_selected_clusters != Some(selected)
                || old_groups != Value::Array(groups.clone());
            body["numberOfSelectedClusters"] = json!(selected);
            body["decisionGroups"] = Value::Array(groups);
        }
        if !changed {
            return Ok(());
        }
        let body = json!({
            "metadata": {"resourceVersion": object::meta_str(raw, "resourceVersion")},
            "status": body,
        });
        let rt = &self.kinds.placements;
        let sub = rt.subresource("status");
        self.registry.patch(rt, ns, name, &Patch::Merge(body), sub, &Self::opts()).await?;
        Ok(())
    }

    /// Brings the placement's PlacementDecisions to `slices`: creates, updates, deletes; what
    /// it did, as (event reason, decision name).
    async fn bind(
        &self,
        ns: &str,
        name: &str,
        placement: &Value,
        slices: &[(String, &schedule::Group, &[String])],
    ) -> Result<Vec<(&'static str, String)>, ApiError> {
        let mut done = Vec::new();
        let rt = &self.kinds.decisions;
        let reg = &self.registry;
        let mut existing: HashMap<String, Arc<CachedObject>> = reg
            .cached_list(rt, ns)
            .into_iter()
            .filter(|d| d.label(api::LABEL_PLACEMENT) == Some(name))
            .map(|d| (d.namespace_name().1.to_owned(), d))
            .collect();
        let owner = json!([{
            "apiVersion": "cluster.open-cluster-management.io/v1beta1",
            "kind": "Placement",
            "name": name,
            "uid": object::meta_str(placement, "uid"),
            "controller": true,
            "blockOwnerDeletion": true,
        }]);
        for (decision, group, clusters) in slices {
            let labels = json!({
                api::LABEL_PLACEMENT: name,
                api::LABEL_DECISION_GROUP_NAME: group.name,
                api::LABEL_DECISION_GROUP_INDEX: group.index.to_string(),
            });
            let decisions: Vec<Value> =
                clusters.iter().map(|c| json!({"clusterName": c, "reason": ""})).collect();
            let current = match existing.remove(decision.as_str()) {
                Some(c) => c.value(),
                None => {
                    let obj = json!({
                        "apiVersion": rt.storage_api_version(), "kind": rt.kind,
                        "metadata": {
                            "name": decision, "namespace": ns,
                            "labels": labels, "ownerReferences": owner,
                        },
                    });
                    let written = reg.create(rt, ns, obj, &Self::opts()).await?;
                    done.push(("DecisionCreate", decision.clone()));
                    Arc::new(written.object)
                }
            };
            if current.pointer("/metadata/labels") != Some(&labels) {
                let body = json!({"metadata": {"labels": labels}});
                reg.patch(rt, ns, decision, &Patch::Merge(body), None, &Self::opts()).await?;
            }
            let have = current.pointer("/status/decisions").cloned().unwrap_or(json!([]));
            if have != Value::Array(decisions.clone()) {
                let body = json!({"status": {"decisions": decisions}});
                let sub = rt.subresource("status");
                reg.patch(rt, ns, decision, &Patch::Merge(body), sub, &Self::opts()).await?;
                if !done.iter().any(|(_, d)| d == decision) {
                    done.push(("DecisionUpdate", decision.clone()));
                }
            }
        }
        for stale in existing.keys() {
            match reg.delete(rt, ns, stale, &DeleteOptions::default()).await {
                Ok(_) => done.push(("DecisionDelete", stale.clone())),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    /// Records a core Event about the placement (best effort: an event lost is logged).
    async fn record(&self, placement: &Value, reason: &str, message: String) {
        let (ns, name) = (object::namespace(placement), object::name(placement));
        let now = Timestamp::now().to_string();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let event = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": format!("{name}.{nanos:x}"), "namespace": ns},
            "involvedObject": {
                "apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
                "namespace": ns, "name": name, "uid": object::meta_str(placement, "uid"),
                "resourceVersion": object::meta_str(placement, "resourceVersion"),
            },
            "reason": reason,
            "message": message,
            "type": "Normal",
            "source": {"component": MANAGER},
            "reportingComponent": MANAGER,
            "reportingInstance": MANAGER,
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        });
        let rt = &self.kinds.events;
        if let Err(e) = self.registry.create(rt, ns, event, &Self::opts()).await {
            tracing::warn!(placement = %format!("{ns}/{name}"), reason, error = %e.message, "placement event not recorded");
        }
    }

    /// The events of a pass that changed decisions: one per decision object (OCM's reasons),
    /// the scores (OCM's `ScoreUpdate`), and what each step kept or dropped.
    async fn record_pass(
        &self,
        placement: &Value,
        outcome: &Outcome,
        changes: &[(&'static str, String)],
    ) {
        let (ns, name) = (object::namespace(placement), object::name(placement));
        for (reason, decision) in changes {
            let verb = match *reason {
                "DecisionCreate" => "created",
                "DecisionDelete" => "deleted",
                _ => "updated",
            };
            let message =
                format!("Decision {decision} is {verb} with placement {name} in namespace {ns}");
            self.record(placement, reason, message).await;
        }
        let mut scores = String::new();
        for (cluster, total) in &outcome.totals {
            let item = format!("{cluster}:{total} ");
            if scores.len() + item.len() > 1000 {
                break;
            }
            scores.push_str(&item);
        }
        self.record(placement, "ScoreUpdate", scores.trim_end().to_owned()).await;
        let steps: Vec<String> = outcome
            .counts
            .iter()
            .filter(|(step, _)| **step != schedule::Step::Selected)
            .map(|(step, n)| format!("{n} by {}", step.as_str()))
            .collect();
        let dropped = if steps.is_empty() { "none".to_owned() } else { steps.join(", ") };
        let message = format!(
            "{} clusters selected; dropped: {dropped} (kubectl get --raw {}/explain)",
            outcome.selected,
            format_args!(
                "/apis/cluster.open-cluster-management.io/v1beta1/namespaces/{ns}/placements/{name}"
            ),
        );
        self.record(placement, "Scheduled", message).await;
    }
}

/// Every placement in the namespaces where `any_set` holds for a bound set.
fn placements_bound_to(s: &Scheduler, any_set: impl Fn(&str) -> bool) -> Vec<String> {
    let reg = &s.registry;
    let namespaces: BTreeSet<String> = reg
        .cached_list(&s.kinds.bindings, "")
        .iter()
        .map(|b| b.namespace_name())
        .filter(|(_, set)| any_set(set))
        .map(|(ns, _)| ns.to_owned())
        .collect();
    namespaces
        .iter()
        .flat_map(|ns| reg.cached_list(&s.kinds.placements, ns))
        .map(|p| {
            let (ns, name) = p.namespace_name();
            format!("{ns}/{name}")
        })
        .collect()
}

/// Whether what the scheduler reads of a cluster differs between two states.
fn cluster_news(before: &CachedObject, after: &CachedObject) -> bool {
    if !before.same_labels(after) || before.deleting != after.deleting {
        return true;
    }
    let facts = |o: &CachedObject| {
        serde_json::from_value::<ManagedCluster>((*o.value()).clone())
            .ok()
            .map(|c| ClusterFacts::of(&c))
    };
    facts(before) != facts(after)
}

/// Starts the placement controller; the scheduler, for `placements/explain`.
pub fn start(registry: &Registry, background: &Background) -> Option<Arc<Scheduler>> {
    let kinds = Kinds::of(registry)?;
    let s = Arc::new(Scheduler {
        registry: registry.clone(),
        kinds,
        clusters: Mutex::default(),
        decisions: Mutex::default(),
    });
    let k = &s.kinds;
    let ns_name = |o: &CachedObject| {
        let (ns, name) = o.namespace_name();
        vec![format!("{ns}/{name}")]
    };
    // A cluster concerns the placements bound to a set it is in (its old state is mapped too).
    let of_cluster = {
        let s = Arc::clone(&s);
        move |c: &CachedObject| {
            let sets: Vec<(String, LabelSelector)> = s
                .registry
                .cached_list(&s.kinds.sets, "")
                .iter()
                .filter_map(|o| parse::<ManagedClusterSet>(o))
                .filter_map(|set| {
                    let name = set.metadata.name.clone().unwrap_or_default();
                    let selector = set.spec.as_ref().and_then(|s| s.cluster_selector.as_ref());
                    crate::registration::set_selector(&name, selector).ok().map(|sel| (name, sel))
                })
                .filter(|(_, sel)| sel.matches(|k| c.label(k)))
                .collect();
            placements_bound_to(&s, |set| sets.iter().any(|(n, _)| n == set))
        }
    };
    let of_set = {
        let s = Arc::clone(&s);
        move |set: &CachedObject| {
            let name = set.namespace_name().1;
            placements_bound_to(&s, |b| b == name)
        }
    };
    let of_binding = {
        let s = Arc::clone(&s);
        move |b: &CachedObject| {
            let ns = b.namespace_name().0;
            s.registry
                .cached_list(&s.kinds.placements, ns)
                .iter()
                .flat_map(|p| ns_name(p))
                .collect()
        }
    };
    let of_score = {
        let s = Arc::clone(&s);
        move |_: &CachedObject| {
            s.registry
                .cached_list(&s.kinds.placements, "")
                .iter()
                .flat_map(|p| ns_name(p))
                .collect()
        }
    };
    let of_decision = |d: &CachedObject| match d.label(api::LABEL_PLACEMENT) {
        Some(p) => vec![format!("{}/{p}", d.namespace_name().0)],
        None => Vec::new(),
    };
    let placement_news = |before: &CachedObject, after: &CachedObject| {
        let (b, a) = (before.value(), after.value());
        b.get("spec") != a.get("spec")
            || b.pointer("/metadata/annotations") != a.pointer("/metadata/annotations")
            || before.deleting != after.deleting
    };
    let watches = vec![
        Watch::new(&k.placements, ns_name).on_changes(placement_news),
        Watch::new(&k.decisions, of_decision).on_presence(),
        Watch::new(&k.clusters, of_cluster).on_changes(cluster_news).debounced(DEBOUNCE),
        Watch::new(&k.sets, of_set).debounced(DEBOUNCE),
        Watch::new(&k.bindings, of_binding).debounced(DEBOUNCE),
        Watch::new(&k.scores, of_score).debounced(DEBOUNCE),
    ];
    let scheduler = Arc::clone(&s);
    reconcile::run(registry, background, "placement", watches, 2, move |key| {
        let s = Arc::clone(&s);
        async move { s.run(key).await }
    });
    Some(scheduler)
}
