//! The work agent over the hub's REST API (`--transport=kube`, as OCM's own agents work): it
//! follows the ManifestWorks in its cluster's namespace and, for each (ocm.md §4.2–§4.5), keeps
//! the finalizer, records what it applies in an AppliedManifestWork `<hubHash>-<work>` on the
//! managed cluster (its owner), applies the manifests in OCM's kind order with each one's
//! update strategy, deletes what a work no longer holds, reports per-manifest and work
//! conditions (`Applied` with `observedGeneration`, `Available`, status feedback), and on
//! deletion removes the resources it owns before letting the hub's object go. Level-triggered:
//! every event and every resync reconciles a work whole, so drift on the cluster is corrected
//! at the next pass. Works and their status are the typed objects of `ocm_proto::api::work`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt as _;
use ocm_proto::api::meta::{
    CONDITION_FALSE, CONDITION_TRUE, CONDITION_UNKNOWN, Condition, condition, set_condition,
};
use ocm_proto::api::work::v1::{
    self as v1, AppliedManifestWork, AppliedManifestWorkSpec, FEEDBACK_JSON_PATHS,
    FEEDBACK_WELL_KNOWN_STATUS, FIELD_VALUE_BOOLEAN, FIELD_VALUE_INTEGER, FIELD_VALUE_STRING,
    FeedbackRule, FeedbackValue, FieldValue, ManifestCondition, ManifestConfigOption,
    ManifestResourceMeta, ManifestResourceStatus, ManifestWork, ManifestWorkStatus,
    PROPAGATION_ORPHAN, PROPAGATION_SELECTIVELY_ORPHAN, ResourceIdentifier, StatusFeedbackResult,
    UPDATE_STRATEGY_CREATE_ONLY, UPDATE_STRATEGY_READ_ONLY, UPDATE_STRATEGY_SERVER_SIDE_APPLY,
};
use ocm_proto::api::work::{FINALIZER_MANIFEST_WORK_CLEANUP as FINALIZER, GROUP};
use time::format_description::well_known::Rfc3339;
use tokio::sync::mpsc;

use ocm_proto::jsonpath::JsonPath;
use serde_json::{Value, json};

use crate::cluster::{Applied, Cluster, Strategy};
use crate::error::AgentError;
use crate::state::DataDir;
use crate::transport::{self, GrpcSource, Incoming, Link, Sink, load_journal, save_journal};

/// How often every work is reconciled again without an event (drift correction and status
/// feedback), by default.
pub const RESYNC: Duration = Duration::from_secs(60);
/// How long an AppliedManifestWork whose work is gone from the hub is kept, by default (OCM's
/// `--appliedmanifestwork-eviction-grace-period`).
pub const EVICTION_GRACE: Duration = Duration::from_secs(3600);
/// A grace period this long or longer never evicts (OCM's rule: 100 years).
const NEVER_EVICT: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
/// A steady stream of messages still has the journal written at least this often (in messages).
const JOURNAL_EVERY: usize = 100;

/// The hub's hash in AppliedManifestWork names: lowercase hex SHA-256 of its URL.
pub fn hub_hash(hub_url: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, hub_url.as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// OCM's apply order: lower ranks first, unknown kinds last (ordinals keep the spec index).
fn kind_rank(kind: &str) -> u16 {
    match kind {
        "PriorityClass"
        | "Namespace"
        | "CustomResourceDefinition"
        | "StorageClass"
        | "PersistentVolume"
        | "PodSecurityPolicy" => 0,
        "ClusterRole" | "ClusterRoleBinding" | "Role" | "RoleBinding" => 1,
        "NetworkPolicy"
        | "ResourceQuota"
        | "LimitRange"
        | "PodDisruptionBudget"
        | "ServiceAccount" => 2,
        "Secret" | "ConfigMap" | "PersistentVolumeClaim" => 3,
        "Service" => 4,
        "DaemonSet"
        | "Pod"
        | "ReplicationController"
        | "ReplicaSet"
        | "Deployment"
        | "HorizontalPodAutoscaler"
        | "StatefulSet"
        | "Job"
        | "CronJob" => 5,
        "APIService"
        | "MutatingWebhookConfiguration"
        | "ValidatingWebhookConfiguration"
        | "ValidatingAdmissionPolicy"
        | "ValidatingAdmissionPolicyBinding" => 6,
        "" => 1001,
        _ => 1000,
    }
}

/// Whether a work's `ResourceIdentifier` (a manifest config's, an orphaning rule's) names `r`.
fn names(id: &ResourceIdentifier, r: &Applied) -> bool {
    id.group.as_deref().unwrap_or("") == r.group.as_deref().unwrap_or("")
        && id.resource == r.resource
        && id.name == r.name
        && id.namespace.as_deref().unwrap_or("") == r.namespace.as_deref().unwrap_or("")
}

/// Whether two records name the same object (uids aside).
fn same_object(a: &Applied, b: &Applied) -> bool {
    (&a.group, &a.resource, &a.namespace, &a.name) == (&b.group, &b.resource, &b.namespace, &b.name)
}

/// Whether a resource stays when its work lets go of it: the delete option says `Orphan`, or
/// `SelectivelyOrphan` with a rule naming it.
fn orphaned(work: &ManifestWork, r: &Applied) -> bool {
    let option = work.spec.as_ref().and_then(|s| s.delete_option.as_ref());
    match option.and_then(|o| o.propagation_policy.as_deref()) {
        Some(PROPAGATION_ORPHAN) => true,
        Some(PROPAGATION_SELECTIVELY_ORPHAN) => option
            .and_then(|o| o.selectively_orphans.as_ref())
            .is_some_and(|s| s.orphaning_rules.iter().any(|rule| names(rule, r))),
        _ => false,
    }
}

/// A manifest's update strategy from its `manifestConfigs` entry (`Update` by default; a
/// server-side apply's field manager is `work-agent` unless given).
fn strategy_of(config: Option<&ManifestConfigOption>) -> Strategy {
    let Some(s) = config.and_then(|c| c.update_strategy.as_ref()) else { return Strategy::Update };
    match s.type_.as_str() {
        UPDATE_STRATEGY_CREATE_ONLY => Strategy::CreateOnly,
        UPDATE_STRATEGY_READ_ONLY => Strategy::ReadOnly,
        UPDATE_STRATEGY_SERVER_SIDE_APPLY => {
            let ssa = s.server_side_apply.as_ref();
            Strategy::ServerSideApply {
                field_manager: ssa
                    .and_then(|c| c.field_manager.clone())
                    .filter(|f| !f.is_empty())
                    .unwrap_or_else(|| "work-agent".to_owned()),
                force: ssa.and_then(|c| c.force).unwrap_or(false),
            }
        }
        _ => Strategy::Update,
    }
}

/// OCM's `WellKnownStatus` fields per kind: (name, path under `.status`, or a condition's status).
fn well_known(group: &str, kind: &str) -> &'static [(&'static str, &'static str)] {
    match (group, kind) {
        ("apps", "Deployment") => &[
            ("ReadyReplicas", "readyReplicas"),
            ("Replicas", "replicas"),
            ("AvailableReplicas", "availableReplicas"),
        ],
        ("apps", "DaemonSet") => &[
            ("NumberReady", "numberReady"),
            ("DesiredNumberScheduled", "desiredNumberScheduled"),
            ("NumberAvailable", "numberAvailable"),
        ],
        ("batch", "Job") => &[("JobComplete", "condition:Complete"), ("JobSucceeded", "succeeded")],
        ("", "Pod") => &[("PodReady", "condition:Ready"), ("PodPhase", "phase")],
        _ => &[],
    }
}

/// A feedback value of a scalar (`None` for anything else).
fn field_value(v: &Value) -> Option<FieldValue> {
    let typed = |type_: &str| FieldValue { type_: type_.to_owned(), ..FieldValue::default() };
    match v {
        Value::Number(n) => {
            n.as_i64().map(|i| FieldValue { integer: Some(i), ..typed(FIELD_VALUE_INTEGER) })
        }
        Value::String(s) => {
            Some(FieldValue { string: Some(s.clone()), ..typed(FIELD_VALUE_STRING) })
        }
        Value::Bool(b) => Some(FieldValue { boolean: Some(*b), ..typed(FIELD_VALUE_BOOLEAN) }),
        _ => None,
    }
}

/// The value at `path` under the live object's `.status` (`condition:<type>` is that
/// condition's status; other paths are kubectl JSONPaths relative to `.status`, with or without
/// `{}`, as OCM reads them: `.readyReplicas`, `.conditions[?(@.type=="Ready")].status`). The
/// first match, or `None`; a path that does not parse is an error.
fn status_value<'a>(live: &'a Value, path: &str) -> Result<Option<&'a Value>, String> {
    let Some(status) = live.get("status") else { return Ok(None) };
    if let Some(kind) = path.strip_prefix("condition:") {
        let conditions = status.get("conditions").and_then(Value::as_array);
        let found = conditions.into_iter().flatten().find(|c| c["type"] == kind);
        return Ok(found.and_then(|c| c.get("status")));
    }
    let inner = path.trim();
    let inner = inner.strip_prefix('{').and_then(|s| s.strip_suffix('}')).unwrap_or(inner);
    let relative =
        if inner.starts_with(['.', '[']) { inner.to_owned() } else { format!(".{inner}") };
    let path = JsonPath::parse(&relative).map_err(|e| e.to_string())?;
    Ok(path.find(status).into_iter().next())
}

/// The status feedback of a live object under its rules (`WellKnownStatus`, `JSONPaths`), and
/// the `StatusFeedbackSynced` condition to report with it. A value not reported yet is left
/// out, not a failure (as OCM).
fn feedback(
    group: &str,
    kind: &str,
    live: &Value,
    rules: &[FeedbackRule],
) -> (Vec<FeedbackValue>, Condition) {
    const SYNCED: &str = "StatusFeedbackSynced";
    if rules.is_empty() {
        return (Vec::new(), condition(SYNCED, CONDITION_TRUE, "NoStatusFeedbackSynced", ""));
    }
    let mut values = Vec::new();
    let mut failed = Vec::new();
    for rule in rules {
        let wanted: Vec<(String, String)> = match rule.type_.as_str() {
            FEEDBACK_WELL_KNOWN_STATUS => well_known(group, kind)
                .iter()
                .map(|(n, p)| (n.to_string(), p.to_string()))
                .collect(),
            FEEDBACK_JSON_PATHS => {
                rule.json_paths.iter().map(|p| (p.name.clone(), p.path.clone())).collect()
            }
            _ => Vec::new(),
        };
        for (name, path) in wanted {
            match status_value(live, &path) {
                Ok(Some(v)) => match field_value(v) {
                    Some(field_value) => values.push(FeedbackValue { name, field_value }),
                    None => failed.push(format!("{name}: the value at {path} is not a scalar")),
                },
                Ok(None) => {}
                Err(e) => failed.push(format!("{name}: {e}")),
            }
        }
    }
    let synced = if failed.is_empty() {
        condition(SYNCED, CONDITION_TRUE, SYNCED, "")
    } else {
        condition(SYNCED, CONDITION_FALSE, "StatusFeedbackSyncFailed", failed.join("; "))
    };
    (values, synced)
}

/// `conditions` with each of `new` set (apimachinery's rules: a transition time moves only with
/// the status).
fn with_conditions(
    mut conditions: Vec<Condition>,
    new: impl IntoIterator<Item = Condition>,
) -> Vec<Condition> {
    for c in new {
        set_condition(&mut conditions, c, crate::clock::now());
    }
    conditions
}

/// A condition saying the work is being deleted.
fn deleting_condition() -> Condition {
    condition(
        v1::CONDITION_DELETING,
        CONDITION_TRUE,
        "WorkDeleting",
        "ManifestWork is being deleted",
    )
}

/// `c` at `generation`.
fn observed(mut c: Condition, generation: Option<i64>) -> Condition {
    c.observed_generation = generation;
    c
}

/// The work agent of one cluster.
pub struct WorkAgent {
    /// Where status and finalizer changes go.
    sink: Sink,
    /// Where the works come from.
    source: Source,
    cluster: Arc<dyn Cluster>,
    cluster_name: String,
    hub_hash: String,
    resync: Duration,
    /// How long an unmanaged AppliedManifestWork is kept ([`EVICTION_GRACE`]).
    eviction_grace: Duration,
    /// Where the works held are journaled.
    journal: DataDir,
}

/// Where a work agent's works come from.
pub enum Source {
    /// A REST list-watch of the cluster's namespace.
    Kube(kube::Client),
    /// A CloudEvents subscription.
    Grpc(GrpcSource),
}

/// What a pass over a work left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The work stays.
    Kept,
    /// The work was cleaned up and let go.
    Released,
}

impl WorkAgent {
    /// The agent of `cluster_name` on the hub at `hub_url`, with works from `source`,
    /// reconciling every work at least every `resync`, evicting AppliedManifestWorks without
    /// their work after `eviction_grace`, and journaling the works in `journal`.
    pub fn new(
        source: Source,
        hub_url: &str,
        cluster_name: &str,
        cluster: Arc<dyn Cluster>,
        resync: Duration,
        eviction_grace: Duration,
        journal: DataDir,
    ) -> WorkAgent {
        let sink = match &source {
            Source::Kube(hub) => Sink::kube(hub.clone(), cluster_name),
            Source::Grpc(_) => {
                Sink::Grpc(Link::new(cluster_name, &format!("{cluster_name}-work-agent")))
            }
        };
        WorkAgent {
            sink,
            source,
            cluster,
            cluster_name: cluster_name.to_owned(),
            hub_hash: hub_hash(hub_url),
            resync: resync.max(Duration::from_secs(1)),
            eviction_grace,
            journal,
        }
    }

    /// Follows the works until the future is dropped: first the journaled ones (so drift is
    /// corrected while the hub is away), then each change the source brings; every resync
    /// period all of them are reconciled again.
    pub async fn run(self) {
        let mut known = load_journal(&self.journal);
        let (tx, mut rx) = mpsc::channel(256);
        if let Sink::Grpc(link) = &self.sink {
            link.hold(&known);
        }
        let source = match (&self.source, &self.sink) {
            (Source::Kube(hub), _) => {
                transport::kube_source(hub.clone(), self.cluster_name.clone(), tx).boxed()
            }
            (Source::Grpc(g), Sink::Grpc(link)) => {
                transport::grpc_source(g.clone(), Arc::clone(link), tx).boxed()
            }
            (Source::Grpc(_), Sink::Kube(_)) => return,
        };
        let mut source = std::pin::pin!(source);
        let mut tick = tokio::time::interval(self.resync);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut journaled = transport::journal_bytes(&known);
        // Messages taken since the journal was last written.
        let mut unwritten = 0usize;
        // Whether the hub has said what it holds since the start: only then is a work missing
        // from `known` known to be gone (until then `known` is the journal's).
        let mut heard = false;
        loop {
            tokio::select! {
                () = &mut source => return,
                msg = rx.recv() => match msg {
                    Some(msg) => {
                        heard |= matches!(msg, Incoming::Relisted(_) | Incoming::StatusHashes(_));
                        self.take(msg, &mut known).await;
                        unwritten += 1;
                    }
                    None => return,
                },
                _ = tick.tick() => {
                    let names: Vec<String> = known.keys().cloned().collect();
                    for name in names {
                        self.pass(&name, &mut known).await;
                    }
                    if let Err(e) = self.evict_unmanaged(&known, heard).await {
                        tracing::debug!(error = %e, "AppliedManifestWorks not checked; at the next pass");
                    }
                }
            }
            // Once a burst of messages is taken (or per tick), not per message or work, and at
            // least every JOURNAL_EVERY messages of a steady stream: what the next spec resync
            // tells the hub, and the journal.
            if rx.is_empty() || unwritten >= JOURNAL_EVERY {
                unwritten = 0;
                if let Sink::Grpc(link) = &self.sink {
                    link.hold(&known);
                }
                self.journal(&known, &mut journaled).await;
            }
        }
    }

    /// Applies what the source said.
    async fn take(&self, msg: Incoming, known: &mut BTreeMap<String, ManifestWork>) {
        let name = match msg {
            Incoming::Upsert(work) => {
                let name = work.metadata.name.clone().unwrap_or_default();
                let mut work = *work;
                if let Some(held) = known.get(&name).filter(|h| h.metadata.uid == work.metadata.uid)
                {
                    // A late event of an older generation (a resync answer and a live event
                    // may cross) never rolls the cluster back.
                    if work.metadata.generation < held.metadata.generation {
                        return;
                    }
                    // Over gRPC the hub sends no status: the agent keeps what it reported
                    // (for this uid only; a work made again under the name starts afresh).
                    if work.status.is_none() {
                        work.status = held.status.clone();
                    }
                }
                known.insert(name.clone(), work);
                name
            }
            Incoming::Deleting(uid) => {
                let Some((name, work)) =
                    known.iter_mut().find(|(_, w)| w.metadata.uid.as_deref() == Some(&uid))
                else {
                    return;
                };
                transport::mark_deleting(work);
                name.clone()
            }
            Incoming::Gone(name) => {
                known.remove(&name);
                return;
            }
            Incoming::Relisted(names) => {
                known.retain(|n, _| names.contains(n));
                return;
            }
            Incoming::StatusHashes(hashes) => {
                // Only what the hub lacks or holds otherwise is sent again; no work is reconciled.
                let Sink::Grpc(link) = &self.sink else { return };
                link.hub_hashes(&hashes);
                for work in known.values() {
                    if let Some(status) = &work.status {
                        if let Err(e) = link.report(work, status).await {
                            tracing::debug!(error = %e, "status not re-sent; sent at the next pass");
                        }
                    }
                }
                return;
            }
        };
        self.pass(&name, known).await;
    }

    /// Reconciles the held work `name`, dropping it once released.
    async fn pass(&self, name: &str, known: &mut BTreeMap<String, ManifestWork>) {
        let Some(work) = known.get_mut(name) else { return };
        match self.reconcile(work).await {
            Ok(Outcome::Kept) => {}
            Ok(Outcome::Released) => {
                if let (Some(w), Sink::Grpc(link)) = (known.remove(name), &self.sink) {
                    link.forget(w.metadata.uid.as_deref().unwrap_or_default());
                }
            }
            // Someone wrote the work since this state (its newer state is the next event), or
            // it is gone (a late event of a work already cleaned up).
            Err(AgentError::Hub(kube::Error::Api(s))) if s.code == 409 || s.code == 404 => {
                tracing::debug!(work = %name, code = s.code, "work changed or gone meanwhile");
            }
            Err(e) => {
                tracing::warn!(work = %name, error = %e, "work not reconciled; retrying at the next pass")
            }
        }
    }

    /// OCM's unmanaged-AppliedManifestWork eviction (ocm.md §4), over this agent's own
    /// AppliedManifestWorks only (`spec.agentID`, the cluster name: another agent on the same
    /// cluster keeps its own): one made while the agent served another hub (its hub hash is not
    /// this hub's), or whose work the hub no longer holds (known only once the hub has said
    /// what it holds, `heard`), is marked with `status.evictionStartTime`; once the grace period
    /// has passed since then it is deleted, and the cluster's garbage collector deletes what it
    /// owns (orphaned and read-only resources carry no owner reference and stay). A mark is
    /// cleared when its work returns, or when eviction is off (a grace of 100 years or more).
    async fn evict_unmanaged(
        &self,
        known: &BTreeMap<String, ManifestWork>,
        heard: bool,
    ) -> Result<(), AgentError> {
        let never = self.eviction_grace >= NEVER_EVICT;
        let kind = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "AppliedManifestWork"});
        let now = crate::clock::offset_now();
        for mut amw in self.cluster.list(&kind).await? {
            let Ok(typed) = serde_json::from_value::<AppliedManifestWork>(amw.clone()) else {
                continue;
            };
            let spec = typed.spec.unwrap_or_default();
            if spec.agent_id.as_deref() != Some(self.cluster_name.as_str())
                || typed.metadata.deletion_timestamp.is_some()
            {
                continue;
            }
            let unmanaged = !never
                && (spec.hub_hash != self.hub_hash
                    || (heard && !known.contains_key(&spec.manifest_work_name)));
            let mark = amw.pointer("/status/evictionStartTime").filter(|v| !v.is_null());
            // A mark that does not parse is replaced (unmanaged) or cleared (managed).
            let started = mark
                .map(|v| v.as_str().and_then(|t| time::OffsetDateTime::parse(t, &Rfc3339).ok()));
            let name = typed.metadata.name.unwrap_or_default();
            match (unmanaged, started) {
                (false, None) => {}
                (false, Some(_)) => {
                    amw["status"]["evictionStartTime"] = Value::Null;
                    self.cluster.replace_status(&amw).await?;
                    tracing::info!(applied_work = %name, "its work is back: eviction called off");
                }
                (true, None | Some(None)) => {
                    let start = now.replace_nanosecond(0).unwrap_or(now);
                    amw["status"]["evictionStartTime"] =
                        json!(start.format(&Rfc3339).unwrap_or_default());
                    self.cluster.replace_status(&amw).await?;
                    tracing::info!(
                        applied_work = %name,
                        grace = ?self.eviction_grace,
                        "its work is not on this hub: evicted after the grace period"
                    );
                }
                // A start so far ahead that the sum overflows is never due.
                (true, Some(Some(start)))
                    if start
                        .checked_add(self.eviction_grace.try_into().unwrap_or(time::Duration::MAX))
                        .is_some_and(|due| now >= due) =>
                {
                    let amw_ref = Applied {
                        group: Some(GROUP.into()),
                        version: "v1".into(),
                        resource: "appliedmanifestworks".into(),
                        name: name.clone(),
                        uid: typed.metadata.uid,
                        namespace: None,
                    };
                    self.cluster.delete(&amw_ref).await?;
                    tracing::info!(applied_work = %name, "evicted with the resources it owns");
                }
                (true, Some(Some(_))) => {}
            }
        }
        Ok(())
    }

    /// Writes the journal when the works held changed (serialized once per pass).
    async fn journal(&self, known: &BTreeMap<String, ManifestWork>, last: &mut Vec<u8>) {
        let now = transport::journal_bytes(known);
        if now != *last {
            match save_journal(&self.journal, now.clone()).await {
                Ok(()) => *last = now,
                Err(e) => tracing::warn!(error = %e, "the work journal was not written"),
            }
        }
    }

    /// The AppliedManifestWork of a work.
    fn applied_work(&self, work_name: &str) -> Value {
        let mut amw = AppliedManifestWork {
            spec: Some(AppliedManifestWorkSpec {
                hub_hash: self.hub_hash.clone(),
                agent_id: Some(self.cluster_name.clone()),
                manifest_work_name: work_name.to_owned(),
            }),
            ..AppliedManifestWork::default()
        };
        amw.metadata.name = Some(format!("{}-{work_name}", self.hub_hash));
        serde_json::to_value(amw).unwrap_or_default()
    }

    /// What an AppliedManifestWork (live, as JSON) records.
    fn recorded(amw: &Value) -> Vec<Applied> {
        serde_json::from_value::<AppliedManifestWork>(amw.clone())
            .ok()
            .and_then(|a| a.status)
            .map(|s| s.applied_resources)
            .unwrap_or_default()
    }

    /// Reconciles one work whole (the status it reports is kept in `work`).
    pub async fn reconcile(&self, work: &mut ManifestWork) -> Result<Outcome, AgentError> {
        let meta = &work.metadata;
        let name = meta.name.clone().unwrap_or_default();
        let finalizers: Vec<&str> = meta.finalizers.iter().flatten().map(String::as_str).collect();
        if meta.deletion_timestamp.is_some() {
            if finalizers.contains(&FINALIZER) {
                self.clean_up(work, &name).await?;
                return Ok(Outcome::Released);
            }
            return Ok(Outcome::Kept);
        }
        // Over REST a new finalizer is an event of its own: the next pass applies.
        if !self.sink.ensure_finalizer(work).await? {
            return Ok(Outcome::Kept);
        }
        let (amw_ref, amw) =
            self.cluster.apply(&self.applied_work(&name), None, &Strategy::Update).await?;
        let owner = json!({"apiVersion": "work.open-cluster-management.io/v1",
            "kind": "AppliedManifestWork", "name": amw_ref.name, "uid": amw_ref.uid});
        let before = Self::recorded(&amw);

        let spec = work.spec.clone().unwrap_or_default();
        let manifests: Vec<Value> = spec
            .workload
            .map(|w| w.manifests.into_iter().map(|m| m.0).collect())
            .unwrap_or_default();
        let mut order: Vec<usize> = (0..manifests.len()).collect();
        order.sort_by_key(|&i| kind_rank(manifests[i]["kind"].as_str().unwrap_or("")));
        let generation = meta.generation;
        let status = work.status.clone().unwrap_or_default();
        let previous: Vec<ManifestCondition> =
            status.resource_status.map(|r| r.manifests).unwrap_or_default();
        let mut results: Vec<Option<ManifestCondition>> = vec![None; manifests.len()];
        let mut applied = Vec::new();
        for i in order {
            let m = &manifests[i];
            let text = |p: &str| m.pointer(p).and_then(Value::as_str).unwrap_or("").to_owned();
            let before_conditions = previous
                .iter()
                .find(|p| p.resource_meta.ordinal == i as i32)
                .map(|p| p.conditions.clone())
                .unwrap_or_default();
            let mut resource_meta = ManifestResourceMeta {
                ordinal: i as i32,
                kind: Some(text("/kind")),
                name: Some(text("/metadata/name")),
                ..ManifestResourceMeta::default()
            };
            let entry = match self.apply_one(work, &spec.manifest_configs, m, &owner).await {
                Ok((r, live, config)) => {
                    resource_meta.group = Some(r.group.clone().unwrap_or_default());
                    resource_meta.version = Some(r.version.clone());
                    resource_meta.resource = Some(r.resource.clone());
                    resource_meta.namespace = Some(r.namespace.clone().unwrap_or_default());
                    let rules = config.map(|c| c.feedback_rules.as_slice()).unwrap_or_default();
                    let (values, synced) =
                        feedback(r.group.as_deref().unwrap_or(""), &text("/kind"), &live, rules);
                    // What the agent only reads, or the delete option keeps, is not its to delete.
                    if strategy_of(config) != Strategy::ReadOnly && !orphaned(work, &r) {
                        applied.push(r);
                    }
                    ManifestCondition {
                        resource_meta,
                        status_feedback: (!values.is_empty())
                            .then_some(StatusFeedbackResult { values }),
                        conditions: with_conditions(
                            before_conditions,
                            [
                                condition(
                                    "Applied",
                                    CONDITION_TRUE,
                                    "AppliedManifestComplete",
                                    "Apply manifest complete",
                                ),
                                condition(
                                    "Available",
                                    CONDITION_TRUE,
                                    "ResourceAvailable",
                                    "Resource is available",
                                ),
                                synced,
                            ],
                        ),
                    }
                }
                Err(e) => {
                    resource_meta.version =
                        text("/apiVersion").rsplit('/').next().map(str::to_owned);
                    resource_meta.namespace = Some(text("/metadata/namespace"));
                    let message = format!("Failed to apply manifest: {e}");
                    ManifestCondition {
                        resource_meta,
                        status_feedback: None,
                        conditions: with_conditions(
                            before_conditions,
                            [
                                condition(
                                    "Applied",
                                    CONDITION_FALSE,
                                    "AppliedManifestFailed",
                                    message.clone(),
                                ),
                                condition(
                                    "Available",
                                    CONDITION_UNKNOWN,
                                    "FetchingResourceFailed",
                                    message,
                                ),
                            ],
                        ),
                    }
                }
            };
            results[i] = Some(entry);
        }

        // What the work no longer holds goes (only what this work owned, with the same uid).
        let mut kept = applied.clone();
        for old in &before {
            if applied.iter().any(|r| same_object(r, old)) {
                continue;
            }
            if !self.cluster.delete(old).await.unwrap_or(false) {
                kept.push(old.clone());
            }
        }
        if kept != before {
            let mut amw_status = amw.clone();
            amw_status["status"]["appliedResources"] =
                serde_json::to_value(&kept).unwrap_or_default();
            self.cluster.replace_status(&amw_status).await?;
        }

        let manifests: Vec<ManifestCondition> = results.into_iter().flatten().collect();
        let total = manifests.len();
        let is_true = |m: &ManifestCondition, kind: &str| {
            m.conditions.iter().any(|c| c.type_ == kind && c.status == CONDITION_TRUE)
        };
        let failed = manifests.iter().filter(|m| !is_true(m, "Applied")).count();
        let unavailable = manifests.iter().filter(|m| !is_true(m, "Available")).count();
        let applied_condition = if failed == 0 {
            condition(
                "Applied",
                CONDITION_TRUE,
                "AppliedManifestWorkComplete",
                "Apply manifest work complete",
            )
        } else {
            condition(
                "Applied",
                CONDITION_FALSE,
                "AppliedManifestWorkFailed",
                "Failed to apply manifest work",
            )
        };
        let available_condition = if unavailable == 0 && total > 0 {
            condition(
                "Available",
                CONDITION_TRUE,
                "ResourcesAvailable",
                "All resources are available",
            )
        } else {
            let message = format!("{unavailable} of {total} resources are not available");
            condition("Available", CONDITION_UNKNOWN, "ResourcesStatusUnknown", message)
        };
        let new_status = ManifestWorkStatus {
            conditions: with_conditions(
                status.conditions.clone(),
                [
                    observed(applied_condition, generation),
                    observed(available_condition, generation),
                ],
            ),
            resource_status: Some(ManifestResourceStatus { manifests }),
        };
        self.sink.report(work, new_status).await?;
        Ok(Outcome::Kept)
    }

    /// Applies one manifest as its work's configuration says: its resource resolved, its
    /// `manifestConfigs` entry found, owned by the AppliedManifestWork unless orphaned or read
    /// only. The resolved resource, the live object and the configuration.
    async fn apply_one<'c>(
        &self,
        work: &ManifestWork,
        configs: &'c [ManifestConfigOption],
        manifest: &Value,
        owner: &Value,
    ) -> Result<(Applied, Value, Option<&'c ManifestConfigOption>), AgentError> {
        let r = self.cluster.resolve(manifest).await?;
        let config = configs.iter().find(|c| names(&c.resource_identifier, &r));
        let strategy = strategy_of(config);
        let owned = strategy != Strategy::ReadOnly && !orphaned(work, &r);
        let (r, live) = self.cluster.apply(manifest, owned.then_some(owner), &strategy).await?;
        Ok((r, live, config))
    }

    /// A deleted work: `Deleting`, its owned resources removed (unless orphaned), its
    /// AppliedManifestWork removed, then the hub's object let go.
    async fn clean_up(&self, work: &mut ManifestWork, name: &str) -> Result<(), AgentError> {
        let mut status = work.status.clone().unwrap_or_default();
        let before = status.conditions.clone();
        status.conditions = with_conditions(before.clone(), [deleting_condition()]);
        if status.conditions != before {
            // Best effort: the cleanup goes on if the status cannot be written.
            let _ = self.sink.report(work, status).await;
        }
        let amw_manifest = self.applied_work(name);
        if let Some(amw) = self.cluster.get(&amw_manifest).await? {
            let mut waiting = 0;
            for r in Self::recorded(&amw).iter().filter(|r| !orphaned(work, r)) {
                if !self.cluster.delete(r).await? {
                    waiting += 1;
                }
            }
            if waiting > 0 {
                return Err(AgentError::Cluster(format!(
                    "{waiting} resources of work {name} are still being deleted"
                )));
            }
            let amw_ref = Applied {
                group: Some(GROUP.into()),
                version: "v1".into(),
                resource: "appliedmanifestworks".into(),
                name: amw_manifest["metadata"]["name"].as_str().unwrap_or_default().into(),
                uid: amw.pointer("/metadata/uid").and_then(Value::as_str).map(str::to_owned),
                namespace: None,
            };
            self.cluster.delete(&amw_ref).await?;
        }
        self.sink.release(work).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configmap(name: &str) -> Applied {
        Applied {
            group: None,
            version: "v1".into(),
            resource: "configmaps".into(),
            namespace: Some("default".into()),
            name: name.into(),
            uid: None,
        }
    }

    fn work(delete_option: Value) -> ManifestWork {
        serde_json::from_value(json!({"spec": {"deleteOption": delete_option}})).unwrap()
    }

    #[test]
    fn kinds_apply_in_ocms_order_and_orphaning_follows_the_delete_option() {
        assert!(kind_rank("Namespace") < kind_rank("ConfigMap"));
        assert!(kind_rank("ConfigMap") < kind_rank("Deployment"));
        assert!(kind_rank("Deployment") < kind_rank("Widget"));
        let selective = work(json!({"propagationPolicy": "SelectivelyOrphan",
            "selectivelyOrphans": {"orphaningRules": [{"group": "", "resource": "configmaps", "namespace": "default", "name": "keep"}]}}));
        assert!(orphaned(&selective, &configmap("keep")));
        assert!(!orphaned(&selective, &configmap("other")));
        assert!(orphaned(&work(json!({"propagationPolicy": "Orphan"})), &configmap("other")));
        assert!(!orphaned(&work(json!({})), &configmap("other")));
        assert_eq!(hub_hash("https://127.0.0.1:6443").len(), 64);
    }

    #[test]
    fn feedback_reads_well_known_fields_and_paths_and_refuses_non_scalars() {
        let live = json!({"status": {"readyReplicas": 2, "conditions": [{"type": "Ready", "status": "True"}],
                                     "nested": {"phase": "Running"}, "list": [1]}});
        let rules: Vec<FeedbackRule> = serde_json::from_value(json!([
            {"type": "WellKnownStatus"},
            {"type": "JSONPaths", "jsonPaths": [{"name": "p", "path": ".nested.phase"}, {"name": "l", "path": ".list"}]}])).unwrap();
        let (values, synced) = feedback("apps", "Deployment", &live, &rules);
        let names: Vec<&str> = values.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["ReadyReplicas", "p"], "absent values are left out");
        assert_eq!(values[0].field_value.integer, Some(2));
        assert_eq!(synced.status, CONDITION_FALSE);
        assert!(synced.message.contains("l: the value at .list is not a scalar"));
        let (none, synced) = feedback("apps", "Deployment", &live, &[]);
        assert!(none.is_empty() && synced.reason == "NoStatusFeedbackSynced");
        assert_eq!(status_value(&live, "condition:Ready"), Ok(Some(&json!("True"))));
    }

    #[test]
    fn feedback_paths_read_indexes_and_filters_as_kubectl_does() {
        let live = json!({"status": {
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "Progressing", "status": "False"}],
            "containers": [{"image": "a:1"}, {"image": "b:2"}]}});
        let rules: Vec<FeedbackRule> =
            serde_json::from_value(json!([{"type": "JSONPaths", "jsonPaths": [
            {"name": "ready", "path": ".conditions[?(@.type==\"Ready\")].status"},
            {"name": "first", "path": "{.containers[0].image}"},
            {"name": "last", "path": ".containers[-1].image"},
            {"name": "missing", "path": ".conditions[?(@.type==\"Absent\")].status"},
            {"name": "bad", "path": ".containers[?(@.image"}]}]))
            .unwrap();
        let (values, synced) = feedback("", "Pod", &live, &rules);
        let got: Vec<(&str, Option<&str>)> =
            values.iter().map(|v| (v.name.as_str(), v.field_value.string.as_deref())).collect();
        assert_eq!(got, [("ready", Some("True")), ("first", Some("a:1")), ("last", Some("b:2"))]);
        assert_eq!(synced.status, CONDITION_FALSE, "a path that does not parse fails the sync");
        assert!(synced.message.starts_with("bad: "), "{}", synced.message);
    }

    #[test]
    fn strategies_come_from_the_manifest_config() {
        let config = |s: Value| {
            serde_json::from_value::<ManifestConfigOption>(json!({
            "resourceIdentifier": {"resource": "configmaps", "name": "a"}, "updateStrategy": s}))
            .unwrap()
        };
        assert_eq!(strategy_of(None), Strategy::Update);
        assert_eq!(strategy_of(Some(&config(json!({"type": "CreateOnly"})))), Strategy::CreateOnly);
        assert_eq!(
            strategy_of(Some(&config(json!({"type": "ServerSideApply"})))),
            Strategy::ServerSideApply { field_manager: "work-agent".into(), force: false }
        );
        assert!(names(
            &config(json!({})).resource_identifier,
            &Applied { namespace: None, ..configmap("a") }
        ));
    }
}
