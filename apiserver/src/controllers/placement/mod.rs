//! The placement controller (ocm.md §5): runs the scheduler of `schedule.rs` for each Placement
//! when anything it reads changes (debounced), writes the PlacementDecisions (100 clusters each,
//! OCM's names, labels and owner) and the Placement's status and conditions.

pub mod cel;
pub mod schedule;
mod write;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ocm_proto::api::cluster::v1::ManagedCluster;
use ocm_proto::api::cluster::v1alpha1::AddOnPlacementScore;
use ocm_proto::api::cluster::v1beta1::Placement;
use ocm_proto::api::cluster::v1beta2::ManagedClusterSet;
use ocm_proto::api::cluster::{self as api};
use ocm_proto::selector::LabelSelector;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::controllers::runtime::{Action, Runtime, Watch};
use crate::machinery::error::ApiError;
use crate::machinery::object;
use crate::machinery::scheme::ResourceType;
use crate::machinery::table::{Column, Include, TableRequest};
use crate::store::cache::CachedObject;
use crate::store::registry::{Registry, WriteOptions};
use schedule::{ClusterFacts, Outcome, ScoreObject, World};

/// The field manager of the scheduler's writes.
const MANAGER: &str = "ocm-hub-placement";
/// How long a change to clusters, sets, bindings or scores waits for more before placements
/// are scheduled again (a relabel of every cluster is a pass per this, not one per cluster).
const DEBOUNCE: Duration = Duration::from_millis(500);
/// Placements scheduled at once: a pass is mostly waiting for its writes.
const WORKERS: usize = 8;
/// Events waiting to be written; more are dropped.
const EVENTS_QUEUED: usize = 4096;
/// A pass whose commit meets another writer's change (409) reads again and runs again, this
/// many times at once before it backs off as a failed run.
const CONFLICT_RETRIES: usize = 3;
/// A misconfigured placement is tried again this often.
const MISCONFIGURED_RETRY: Duration = Duration::from_secs(30);
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
/// Parsing happens outside the lock: a pass refreshing thousands of clusters never holds up
/// the watch that keeps the memo current.
struct Memo<T> {
    by_key: Mutex<HashMap<String, (u64, Arc<T>)>>,
}

impl<T> Default for Memo<T> {
    fn default() -> Self {
        Memo { by_key: Mutex::default() }
    }
}

impl<T> Memo<T> {
    /// The parsed form of exactly this revision of `o`, if known.
    fn known(&self, o: &CachedObject) -> Option<Arc<T>> {
        let by_key = lock(&self.by_key);
        by_key.get(&o.key).filter(|(rev, _)| *rev == o.rev).map(|(_, item)| Arc::clone(item))
    }

    /// One object as a `T`, parsed unless known at its revision; kept unless a newer revision
    /// already is.
    fn of(&self, o: &CachedObject, parse: impl Fn(&CachedObject) -> Option<T>) -> Option<Arc<T>> {
        if let Some(item) = self.known(o) {
            return Some(item);
        }
        let item = Arc::new(parse(o)?);
        let mut by_key = lock(&self.by_key);
        if by_key.get(&o.key).is_none_or(|(rev, _)| *rev < o.rev) {
            by_key.insert(o.key.clone(), (o.rev, Arc::clone(&item)));
        }
        Some(item)
    }

    /// Parses `o` ahead of a pass, unless this or a newer revision is known (the state before
    /// a change is mapped after the state after it).
    fn warm(&self, o: &CachedObject, parse: impl Fn(&CachedObject) -> Option<T>) {
        let newest = lock(&self.by_key).get(&o.key).is_some_and(|(rev, _)| *rev >= o.rev);
        if !newest {
            self.of(o, parse);
        }
    }

    /// `objects` as `T`s, parsing those new or changed since the last call; forgets the rest.
    fn refresh(
        &self,
        objects: &[Arc<CachedObject>],
        parse: impl Fn(&CachedObject) -> Option<T>,
    ) -> Vec<Arc<T>> {
        let mut out: Vec<Option<Arc<T>>> = {
            let by_key = lock(&self.by_key);
            objects
                .iter()
                .map(|o| {
                    let known = by_key.get(&o.key).filter(|(rev, _)| *rev == o.rev);
                    known.map(|(_, item)| Arc::clone(item))
                })
                .collect()
        };
        let parsed: Vec<(usize, Option<Arc<T>>)> = out
            .iter()
            .enumerate()
            .filter(|(_, known)| known.is_none())
            .map(|(i, _)| (i, parse(&objects[i]).map(Arc::new)))
            .collect();
        let mut by_key = lock(&self.by_key);
        for (i, item) in parsed {
            let o = &objects[i];
            match &item {
                Some(item) => {
                    by_key.insert(o.key.clone(), (o.rev, Arc::clone(item)));
                }
                None => {
                    by_key.remove(&o.key);
                }
            }
            out[i] = item;
        }
        let out: Vec<Arc<T>> = out.into_iter().flatten().collect();
        if by_key.len() > out.len() {
            // Some are gone: keep only the objects listed.
            let listed: std::collections::HashSet<&str> =
                objects.iter().map(|o| o.key.as_str()).collect();
            by_key.retain(|k, _| listed.contains(k.as_str()));
        }
        out
    }
}

/// A ManagedClusterSet as the scheduler reads it: its name and which clusters it selects.
type SetFacts = (String, Result<LabelSelector, String>);

fn set_facts(o: &CachedObject) -> Option<SetFacts> {
    let set = parse::<ManagedClusterSet>(o)?;
    let name = set.metadata.name.clone().unwrap_or_default();
    let selector = set.spec.as_ref().and_then(|s| s.cluster_selector.as_ref());
    let sel = crate::controllers::registration::set_selector(&name, selector);
    Some((name, sel))
}

/// The typed Placement of a cached one, from its JSON (no copy of a parsed tree).
fn stored_placement(o: &CachedObject) -> Result<Placement, ApiError> {
    serde_json::from_slice(&o.json())
        .map_err(|e| ApiError::internal(format!("stored Placement {}: {e}", o.key)))
}

fn parse<T: DeserializeOwned>(o: &CachedObject) -> Option<T> {
    match serde_json::from_slice(&o.json()) {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::warn!(key = %o.key, error = %e, "placement: stored object does not parse");
            None
        }
    }
}

/// One PlacementDecision as the scheduler reads it.
struct DecisionFacts {
    /// `<namespace>/<placement>` from its label (unlabelled decisions count for `Balance`).
    placement: Option<String>,
    clusters: Vec<String>,
}

/// What the index reads of a stored PlacementDecision: its clusters, nothing else parsed.
#[derive(serde::Deserialize)]
struct DecidedClusters {
    status: Option<DecidedStatus>,
}

#[derive(serde::Deserialize)]
struct DecidedStatus {
    #[serde(default)]
    decisions: Vec<DecidedCluster>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct DecidedCluster {
    cluster_name: String,
}

/// Every PlacementDecision, parsed once per revision, and how many name each cluster (kept
/// up to date as decisions change, for `Balance`; shared with passes copy-on-write).
#[derive(Default)]
struct Decisions {
    by_key: HashMap<String, (u64, Arc<DecisionFacts>)>,
    counts: Arc<HashMap<String, u32>>,
}

impl Decisions {
    fn count(&mut self, d: &DecisionFacts, add: bool) {
        let counts = Arc::make_mut(&mut self.counts);
        for c in &d.clusters {
            if add {
                *counts.entry(c.clone()).or_default() += 1;
            } else if let Some(n) = counts.get_mut(c) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    counts.remove(c);
                }
            }
        }
    }

    /// Brings the index to `objects` (every PlacementDecision in the cache).
    fn refresh(&mut self, objects: &[Arc<CachedObject>]) {
        let mut indexed = 0;
        for o in objects {
            if self.by_key.get(&o.key).is_some_and(|(rev, _)| *rev == o.rev) {
                indexed += 1;
                continue;
            }
            let fresh = parse::<DecidedClusters>(o).map(|d| {
                let clusters = d.status.map(|s| s.decisions).unwrap_or_default();
                DecisionFacts {
                    placement: o
                        .label(api::LABEL_PLACEMENT)
                        .map(|p| format!("{}/{p}", o.namespace_name().0)),
                    clusters: clusters.into_iter().map(|c| c.cluster_name).collect(),
                }
            });
            if let Some((_, old)) = self.by_key.remove(&o.key) {
                self.count(&old, false);
            }
            if let Some(d) = fresh {
                self.count(&d, true);
                self.by_key.insert(o.key.clone(), (o.rev, Arc::new(d)));
                indexed += 1;
            }
        }
        if self.by_key.len() > indexed {
            // Some indexed decisions are gone from the cache.
            let listed: std::collections::HashSet<&str> =
                objects.iter().map(|o| o.key.as_str()).collect();
            let gone: Vec<String> =
                self.by_key.keys().filter(|k| !listed.contains(k.as_str())).cloned().collect();
            for key in gone {
                if let Some((_, old)) = self.by_key.remove(&key) {
                    self.count(&old, false);
                }
            }
        }
    }
}

/// The scheduler: the controller's state, and `placements/explain`.
pub struct Scheduler {
    registry: Registry,
    kinds: Kinds,
    clusters: Memo<ClusterFacts>,
    sets: Memo<SetFacts>,
    decisions: Mutex<Decisions>,
    /// Events to record (see [`Scheduler::record`]).
    events: tokio::sync::mpsc::Sender<Value>,
    /// Makes event names unique within a nanosecond.
    event_seq: std::sync::atomic::AtomicU64,
    /// The hub's metrics (scheduling pass durations).
    metrics: Arc<crate::machinery::metrics::Metrics>,
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
    decided: Arc<HashMap<String, u32>>,
    own: HashMap<String, u32>,
}

impl Scheduler {
    fn opts() -> WriteOptions {
        WriteOptions { field_manager: MANAGER.to_owned(), ..WriteOptions::default() }
    }

    /// The world as `ns/name` sees it now.
    fn snapshot(&self, ns: &str, name: &str) -> Snapshot {
        let k = &self.kinds;
        let reg = &self.registry;
        let list = reg.cached_list(&k.clusters, "");
        let clusters = self.clusters.refresh(&list, cluster_facts);
        let sets = self.set_facts().iter().map(|set| (**set).clone()).collect();
        let bindings = reg
            .cached_list(&k.bindings, ns)
            .iter()
            .map(|b| b.namespace_name().1.to_owned())
            .collect();
        let me = format!("{ns}/{name}");
        let (own, decided) = {
            let mut index = lock(&self.decisions);
            index.refresh(&reg.cached_list(&k.decisions, ""));
            let mut own: HashMap<String, u32> = HashMap::new();
            for (_, d) in index.by_key.values().filter(|(_, d)| d.placement.as_ref() == Some(&me)) {
                for c in &d.clusters {
                    *own.entry(c.clone()).or_default() += 1;
                }
            }
            (own, Arc::clone(&index.counts))
        };
        Snapshot { clusters, sets, bindings, own, decided }
    }

    /// Every ManagedClusterSet's selector, parsed once per revision.
    fn set_facts(&self) -> Vec<Arc<SetFacts>> {
        self.sets.refresh(&self.registry.cached_list(&self.kinds.sets, ""), set_facts)
    }

    /// An AddOnPlacementScore as the scheduler reads it.
    fn score_object(&self, cluster: &str, name: &str) -> Option<Arc<ScoreObject>> {
        let o = self.registry.cached(&self.kinds.scores, cluster, name)?;
        let status = parse::<AddOnPlacementScore>(&o)?.status?;
        Some(Arc::new(ScoreObject {
            items: status.scores.into_iter().map(|i| (i.name, i.value)).collect(),
            valid_until: status.valid_until.map(|t| t.0),
        }))
    }

    /// A ManagedCluster as JSON (for CEL).
    fn cluster_object(&self, name: &str) -> Option<Arc<Value>> {
        Some(self.registry.cached(&self.kinds.clusters, "", name)?.value())
    }

    /// Schedules `placement` against the world now; `explain` fills the verdicts.
    pub(crate) fn schedule(&self, ns: &str, placement: &Placement, explain: bool) -> Outcome {
        let name = placement.metadata.name.as_deref().unwrap_or_default();
        let snap = self.snapshot(ns, name);
        let now = crate::machinery::clock::timestamp();
        let scores = |c: &str, n: &str| self.score_object(c, n);
        let object = |c: &str| self.cluster_object(c);
        let world = World {
            clusters: &snap.clusters,
            sets: &snap.sets,
            bindings: &snap.bindings,
            decided: &snap.decided,
            own: &snap.own,
            scores: &scores,
            object: &object,
            now,
        };
        schedule::schedule(placement, &world, explain)
    }

    /// `placements/<name>/explain`: every cluster of the hub, the step that dropped it (or
    /// that it was selected), why, and its scores, as a `meta.k8s.io/v1` Table, computed now
    /// against the same state the controller reads.
    pub fn explain(&self, rt: &ResourceType, ns: &str, name: &str) -> Result<Value, ApiError> {
        let Some(cached) = self.registry.cached(&self.kinds.placements, ns, name) else {
            return Err(ApiError::not_found(crate::store::registry::subject(rt, name)));
        };
        let placement = stored_placement(&cached)?;
        let outcome = self.schedule(ns, &placement, true);
        if let Some(why) = outcome.unavailable {
            return Err(ApiError::unavailable(why));
        }
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
        Ok(crate::machinery::table::build(&columns, rows, metadata, req, true))
    }

    async fn run(&self, key: String) -> Result<Action, ApiError> {
        let Some((ns, name)) = key.split_once('/') else { return Ok(Action::Done) };
        let mut conflicts = 0;
        loop {
            match self.pass(ns, name).await {
                Err(e) if e.code == 409 && conflicts < CONFLICT_RETRIES => {
                    // Another writer changed what the pass read: read it again (the cache as
                    // fresh as the store) and decide again.
                    conflicts += 1;
                    tracing::debug!(placement = %key, error = %e.message, "placement pass met a conflict; running it again");
                    self.registry.cache.sync().await?;
                }
                outcome => return outcome,
            }
        }
    }

    /// One pass: schedules the placement against the cache and writes its decisions and
    /// status.
    async fn pass(&self, ns: &str, name: &str) -> Result<Action, ApiError> {
        let k = &self.kinds;
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
        let placement = stored_placement(&cached)?;
        let started = std::time::Instant::now();
        let outcome = self.schedule(ns, &placement, false);
        self.metrics.scheduling.observe(started.elapsed().as_secs_f64());
        if let Some(why) = outcome.unavailable {
            // Not the placement's fault: its decisions and status stay; retried with backoff.
            return Err(ApiError::internal(why));
        }
        let slices = schedule::slices(name, &outcome.groups);
        // Decisions, then the status that names them (as OCM), in one commit.
        let changes = self.write_pass(ns, name, &raw, &placement, &outcome, &slices).await?;
        if !changes.is_empty() {
            self.record_pass(&raw, &outcome, &changes);
        }
        if outcome.misconfigured.is_some() {
            // OCM returns an error and retries with backoff; the spec's next change wakes it
            // anyway.
            return Ok(Action::RequeueAfter(MISCONFIGURED_RETRY));
        }
        Ok(Action::RequeueAfter(outcome.requeue_after.map_or(RESYNC, |d| d.min(RESYNC))))
    }

    /// Records a core Event about the placement (best effort: an event lost is logged).
    fn record(&self, placement: &Value, reason: &str, message: String) {
        let (ns, name) = (object::namespace(placement), object::name(placement));
        let now = crate::machinery::clock::timestamp().to_string();
        let nanos = std::time::SystemTime::from(crate::machinery::clock::now())
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let event = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": format!("{name}.{nanos:x}{:x}", self.event_seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed)), "namespace": ns},
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
        // Events are written by their own task: a pass never waits for them, and when they
        // come faster than they can be stored the excess is dropped, as client-go's
        // recorder drops.
        if self.events.try_send(event).is_err() {
            tracing::debug!(placement = %format!("{ns}/{name}"), reason, "placement event dropped");
        }
    }

    /// The events of a pass that changed decisions: one per decision object (OCM's reasons),
    /// the scores (OCM's `ScoreUpdate`), and what each step kept or dropped.
    fn record_pass(
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
            self.record(placement, reason, message);
        }
        let mut scores = String::new();
        for (cluster, total) in &outcome.totals {
            let item = format!("{cluster}:{total} ");
            if scores.len() + item.len() > 1000 {
                break;
            }
            scores.push_str(&item);
        }
        self.record(placement, "ScoreUpdate", scores.trim_end().to_owned());
        let steps: Vec<String> = outcome
            .counts
            .iter()
            .filter(|(step, _)| **step != schedule::Step::Selected)
            .map(|(step, n)| format!("{n} by {}", step.as_str()))
            .collect();
        let dropped = if steps.is_empty() { "none".to_owned() } else { steps.join(", ") };
        let explain =
            format!("/apis/{}/v1beta1/namespaces/{ns}/placements/{name}/explain", api::GROUP);
        let message = format!(
            "{} clusters selected; dropped: {dropped} (kubectl get --raw {explain})",
            outcome.selected
        );
        self.record(placement, "Scheduled", message);
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

/// The placements bound to a set the cluster is in.
fn placements_of_cluster(s: &Scheduler, c: &CachedObject) -> Vec<String> {
    let sets: Vec<Arc<SetFacts>> = s
        .set_facts()
        .into_iter()
        .filter(|set| set.1.as_ref().is_ok_and(|sel| sel.matches(|k| c.label(k))))
        .collect();
    placements_bound_to(s, |name| sets.iter().any(|set| set.0 == name))
}

/// What the scheduler reads of a stored ManagedCluster.
fn cluster_facts(o: &CachedObject) -> Option<ClusterFacts> {
    parse::<ManagedCluster>(o).map(|c| ClusterFacts::of(&c))
}

/// Starts the placement controller; the scheduler, for `placements/explain`.
pub fn start(
    runtime: &Runtime,
    metrics: Arc<crate::machinery::metrics::Metrics>,
) -> Option<Arc<Scheduler>> {
    let kinds = Kinds::of(&runtime.registry)?;
    let events = record_events(runtime, Arc::clone(&kinds.events));
    let s = Arc::new(Scheduler {
        registry: runtime.registry.clone(),
        kinds,
        clusters: Memo::default(),
        sets: Memo::default(),
        decisions: Mutex::default(),
        events,
        event_seq: std::sync::atomic::AtomicU64::new(0),
        metrics,
    });
    let watches = watches(&s);
    let scheduler = Arc::clone(&s);
    runtime.run("placement", watches, WORKERS, move |key| {
        let s = Arc::clone(&s);
        async move { s.run(key).await }
    });
    Some(scheduler)
}

/// The task that writes the controller's Events, so a pass never waits on them; returns
/// where to send them.
fn record_events(runtime: &Runtime, rt: Arc<ResourceType>) -> tokio::sync::mpsc::Sender<Value> {
    let (events, mut queued) = tokio::sync::mpsc::channel::<Value>(EVENTS_QUEUED);
    let registry = runtime.registry.clone();
    runtime.background.spawn(async move {
        while let Some(event) = queued.recv().await {
            let ns = object::namespace(&event).to_owned();
            if let Err(e) = registry.create(&rt, &ns, event, &Scheduler::opts()).await {
                tracing::warn!(error = %e.message, "placement event not recorded");
            }
        }
    });
    events
}

/// What wakes a placement: its own changes, another writer's change to its decisions, and the
/// clusters, sets, bindings and scores it reads.
fn watches(s: &Arc<Scheduler>) -> Vec<Watch> {
    let k = &s.kinds;
    let ns_name = |o: &CachedObject| {
        let (ns, name) = o.namespace_name();
        vec![format!("{ns}/{name}")]
    };
    // A cluster concerns the placements bound to a set it is in (its old state is mapped too).
    let of_cluster = {
        let s = Arc::clone(s);
        move |c: &CachedObject| {
            s.clusters.warm(c, cluster_facts);
            placements_of_cluster(&s, c)
        }
    };
    let of_set = {
        let s = Arc::clone(s);
        move |set: &CachedObject| {
            let name = set.namespace_name().1;
            placements_bound_to(&s, |b| b == name)
        }
    };
    let of_binding = {
        let s = Arc::clone(s);
        move |b: &CachedObject| {
            let ns = b.namespace_name().0;
            s.registry
                .cached_list(&s.kinds.placements, ns)
                .iter()
                .flat_map(|p| ns_name(p))
                .collect()
        }
    };
    // A score lives in its cluster's namespace: the placements that cluster concerns.
    let of_score = {
        let s = Arc::clone(s);
        move |score: &CachedObject| match s.registry.cached(
            &s.kinds.clusters,
            "",
            score.namespace_name().0,
        ) {
            Some(cluster) => placements_of_cluster(&s, &cluster),
            None => Vec::new(),
        }
    };
    // Someone else changed a decision (its managedFields name another manager than ours, or
    // differently than before): the placement puts it back.
    let foreign_write = |before: &CachedObject, after: &CachedObject| {
        let others = |o: &CachedObject| -> Vec<Value> {
            o.value()
                .pointer("/metadata/managedFields")
                .and_then(Value::as_array)
                .map(|entries| {
                    entries.iter().filter(|e| e["manager"] != MANAGER).cloned().collect()
                })
                .unwrap_or_default()
        };
        others(before) != others(after)
    };
    let of_decision = |d: &CachedObject| match d.label(api::LABEL_PLACEMENT) {
        Some(p) => vec![format!("{}/{p}", d.namespace_name().0)],
        None => Vec::new(),
    };
    // What the scheduler reads of a cluster, parsed as the cluster changes (so a pass finds
    // it known) and compared: a heartbeat that changes none of it wakes no placement.
    let cluster_news = {
        let s = Arc::clone(s);
        move |before: &CachedObject, after: &CachedObject| {
            let before = s.clusters.known(before);
            let after = s.clusters.of(after, cluster_facts);
            before.is_none() || before != after
        }
    };
    let placement_news = |before: &CachedObject, after: &CachedObject| {
        let (b, a) = (before.value(), after.value());
        b.get("spec") != a.get("spec")
            || b.pointer("/metadata/annotations") != a.pointer("/metadata/annotations")
            || before.deleting != after.deleting
    };
    vec![
        Watch::new(&k.placements, ns_name).on_changes(placement_news),
        // Its own creations and updates do not wake a placement; another writer's change or a
        // deletion does.
        Watch::new(&k.decisions, of_decision).on_changes(foreign_write).not_on_creation(),
        Watch::new(&k.clusters, of_cluster).on_changes(cluster_news).debounced(DEBOUNCE),
        Watch::new(&k.sets, of_set).debounced(DEBOUNCE),
        Watch::new(&k.bindings, of_binding).debounced(DEBOUNCE),
        Watch::new(&k.scores, of_score).debounced(DEBOUNCE),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(
        ns: &str,
        name: &str,
        placement: &str,
        rev: u64,
        clusters: &[&str],
    ) -> Arc<CachedObject> {
        let decisions: Vec<Value> =
            clusters.iter().map(|c| json!({"clusterName": c, "reason": ""})).collect();
        let obj = json!({
            "apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "PlacementDecision",
            "metadata": {"name": name, "namespace": ns, "labels": {api::LABEL_PLACEMENT: placement}},
            "status": {"decisions": decisions},
        });
        let key =
            format!("/registry/cluster.open-cluster-management.io/placementdecisions/{ns}/{name}");
        Arc::new(CachedObject::from_stored(key, &serde_json::to_vec(&obj).unwrap(), rev).unwrap())
    }

    fn counts(d: &Decisions) -> BTreeMap<String, u32> {
        d.counts.iter().map(|(k, v)| (k.clone(), *v)).collect()
    }

    #[test]
    fn decision_counts_follow_creates_updates_and_deletes() {
        let mut d = Decisions::default();
        let a1 = decision("ns", "a-decision-1", "a", 1, &["c1", "c2"]);
        let b1 = decision("ns", "b-decision-1", "b", 2, &["c2"]);
        d.refresh(&[Arc::clone(&a1), Arc::clone(&b1)]);
        assert_eq!(counts(&d), BTreeMap::from([("c1".into(), 1), ("c2".into(), 2)]));
        let held = Arc::clone(&d.counts);
        // b moves to c3; a's decision is gone.
        let b1 = decision("ns", "b-decision-1", "b", 3, &["c3"]);
        d.refresh(&[b1]);
        assert_eq!(counts(&d), BTreeMap::from([("c3".into(), 1)]));
        assert_eq!(held.len(), 2, "a pass holding the counts keeps its copy");
        assert_eq!(d.by_key.len(), 1);
    }
}
