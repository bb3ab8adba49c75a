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
    CONDITION_FALSE, CONDITION_TRUE, Condition, condition, is_condition_true,
};
use ocm_proto::api::work::v1::{
    self as v1, AppliedManifestWork, AppliedManifestWorkSpec, ManifestCondition,
    ManifestConfigOption, ManifestResourceMeta, ManifestResourceStatus, ManifestWork,
    ManifestWorkStatus, PROPAGATION_ORPHAN, PROPAGATION_SELECTIVELY_ORPHAN, ResourceIdentifier,
    UPDATE_STRATEGY_CREATE_ONLY, UPDATE_STRATEGY_READ_ONLY, UPDATE_STRATEGY_SERVER_SIDE_APPLY,
};
use ocm_proto::api::work::{FINALIZER_MANIFEST_WORK_CLEANUP as FINALIZER, GROUP};
use serde_json::{Value, json};
use time::format_description::well_known::Rfc3339;
use tokio::sync::mpsc;

use crate::cluster::{Applied, Cluster, Strategy};
use crate::error::AgentError;
use crate::rules;
use crate::state::DataDir;
use crate::status::{self, Seen, with_conditions};
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

/// Whether an orphaning rule names `r` (exactly: OCM matches these without wildcards).
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

/// Where a manifest is reported: its ordinal, kind and name, and what it resolved to (else what
/// the manifest says of its version and namespace).
fn resource_meta(i: usize, manifest: &Value, seen: &Seen) -> ManifestResourceMeta {
    let text = |p: &str| manifest.pointer(p).and_then(Value::as_str).unwrap_or("").to_owned();
    let mut meta = ManifestResourceMeta {
        ordinal: i as i32,
        kind: Some(text("/kind")),
        name: Some(text("/metadata/name")),
        ..ManifestResourceMeta::default()
    };
    match seen.resource() {
        Some(r) => {
            meta.group = Some(r.group.clone().unwrap_or_default());
            meta.version = Some(r.version.clone());
            meta.resource = Some(r.resource.clone());
            meta.namespace = Some(r.namespace.clone().unwrap_or_default());
        }
        None => {
            meta.version = text("/apiVersion").rsplit('/').next().map(str::to_owned);
            meta.namespace = Some(text("/metadata/namespace"));
        }
    }
    meta
}

/// The work's `Applied`: True once every manifest is applied.
fn applied_of(manifests: &[ManifestCondition]) -> Condition {
    if manifests.iter().all(|m| is_condition_true(&m.conditions, v1::CONDITION_APPLIED)) {
        condition(
            v1::CONDITION_APPLIED,
            CONDITION_TRUE,
            v1::REASON_APPLIED_MANIFEST_WORK_COMPLETE,
            "Apply manifest work complete",
        )
    } else {
        condition(
            v1::CONDITION_APPLIED,
            CONDITION_FALSE,
            v1::REASON_APPLIED_MANIFEST_WORK_FAILED,
            "Failed to apply manifest work",
        )
    }
}

/// The manifests of a work, in spec order.
fn manifests_of(work: &ManifestWork) -> Vec<Value> {
    let workload = work.spec.as_ref().and_then(|s| s.workload.as_ref());
    workload.map(|w| w.manifests.iter().map(|m| m.0.clone()).collect()).unwrap_or_default()
}

/// The last reported status of the manifest at `ordinal`.
fn previous_of(previous: &[ManifestCondition], ordinal: usize) -> Option<&ManifestCondition> {
    previous.iter().find(|p| p.resource_meta.ordinal == ordinal as i32)
}

/// A work's new status from `status` (its last) and a pass that saw its manifests (`texts`) as
/// `seen` and their rules give `rules`: each manifest's, then the work's `Applied` (left as it
/// was while `frozen` by `Complete`), aggregates, and no rule-made condition of another
/// generation.
fn work_status(
    work: &ManifestWork,
    texts: &[Value],
    status: ManifestWorkStatus,
    previous: &[ManifestCondition],
    seen: &[(Seen, Option<ManifestConfigOption>)],
    rules: Vec<Option<Vec<Condition>>>,
    frozen: bool,
) -> ManifestWorkStatus {
    let generation = work.metadata.generation;
    let manifests: Vec<ManifestCondition> = seen
        .iter()
        .zip(rules)
        .enumerate()
        .map(|(i, ((seen, config), rules))| {
            let meta = resource_meta(i, &texts[i], seen);
            let previous = previous_of(previous, i);
            status::manifest_condition(meta, previous, seen, config.as_ref(), rules, generation)
        })
        .collect();
    let mut conditions = status.conditions;
    if !frozen {
        conditions = with_conditions(conditions, [observed(applied_of(&manifests), generation)]);
    }
    conditions = with_conditions(conditions, status::aggregate(&manifests, generation));
    status::prune_rule_conditions(&mut conditions, generation);
    ManifestWorkStatus { conditions, resource_status: Some(ManifestResourceStatus { manifests }) }
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
        self.sync(work, &name).await?;
        Ok(Outcome::Kept)
    }

    /// Applies a work (unless it is `Complete`: then it is only read) and reports its status:
    /// per manifest `Applied`, `Available`, feedback and the conditions of its rules, and the
    /// work's conditions aggregated from them.
    async fn sync(&self, work: &mut ManifestWork, name: &str) -> Result<(), AgentError> {
        let status = work.status.clone().unwrap_or_default();
        // OCM leaves a complete work alone: nothing is applied, its status still follows.
        let frozen = is_condition_true(&status.conditions, v1::CONDITION_COMPLETE);
        let amw = if frozen {
            None
        } else {
            Some(self.cluster.apply(&self.applied_work(name), None, &Strategy::Update).await?)
        };
        let owner = amw.as_ref().map(|(r, _)| {
            json!({"apiVersion": "work.open-cluster-management.io/v1",
                "kind": "AppliedManifestWork", "name": r.name, "uid": r.uid})
        });
        let previous = status.resource_status.clone().map(|r| r.manifests).unwrap_or_default();
        let manifests = manifests_of(work);
        let seen = self.visit(work, &manifests, owner.as_ref(), &previous).await;
        if let Some((_, amw)) = &amw {
            self.prune_applied(work, amw, &seen).await?;
        }
        let rules = Self::rule_conditions(&seen).await;
        let new_status = work_status(work, &manifests, status, &previous, &seen, rules, frozen);
        self.sink.report(work, new_status).await
    }

    /// Applies the work's `manifests` in OCM's kind order as `owner` (the AppliedManifestWork), or
    /// only reads them when there is none (the work is `Complete`) or a manifest's own `Complete`
    /// is True in `previous`. What became of each, in spec order, with its options.
    async fn visit(
        &self,
        work: &ManifestWork,
        manifests: &[Value],
        owner: Option<&Value>,
        previous: &[ManifestCondition],
    ) -> Vec<(Seen, Option<ManifestConfigOption>)> {
        let configs = work.spec.as_ref().map(|s| s.manifest_configs.as_slice()).unwrap_or_default();
        let mut order: Vec<usize> = (0..manifests.len()).collect();
        order.sort_by_key(|&i| kind_rank(manifests[i]["kind"].as_str().unwrap_or("")));
        let mut seen: Vec<Option<(Seen, Option<ManifestConfigOption>)>> =
            (0..manifests.len()).map(|_| None).collect();
        for i in order {
            let done = previous_of(previous, i)
                .is_some_and(|p| is_condition_true(&p.conditions, v1::CONDITION_COMPLETE));
            seen[i] = Some(match owner {
                Some(owner) if !done => self.apply_one(work, configs, &manifests[i], owner).await,
                _ => self.read_one(configs, &manifests[i]).await,
            });
        }
        seen.into_iter().flatten().collect()
    }

    /// Deletes what the work no longer holds (only what this work owned, with the same uid) and
    /// records in the AppliedManifestWork `amw` what it holds now: what it applied or, `Complete`,
    /// read, unless only read by its strategy or kept by the delete option.
    async fn prune_applied(
        &self,
        work: &ManifestWork,
        amw: &Value,
        seen: &[(Seen, Option<ManifestConfigOption>)],
    ) -> Result<(), AgentError> {
        let before = Self::recorded(amw);
        let applied: Vec<Applied> = seen
            .iter()
            .filter(|(_, config)| strategy_of(config.as_ref()) != Strategy::ReadOnly)
            .filter_map(|(seen, _)| seen.resource().cloned())
            .filter(|r| !orphaned(work, r))
            .collect();
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
        Ok(())
    }

    /// The conditions the rules of each manifest give over its live object (`None` where there
    /// is no live object: its rule conditions stay as they are).
    async fn rule_conditions(
        seen: &[(Seen, Option<ManifestConfigOption>)],
    ) -> Vec<Option<Vec<Condition>>> {
        let mut jobs = Vec::new();
        for (i, (seen, config)) in seen.iter().enumerate() {
            let rules = config.as_ref().map(|c| c.condition_rules.as_slice()).unwrap_or_default();
            if let (Some(live), false) = (seen.live(), rules.is_empty()) {
                jobs.push((i, live.clone(), rules.to_vec()));
            }
        }
        let mut out: Vec<Option<Vec<Condition>>> =
            seen.iter().map(|(seen, _)| seen.live().map(|_| Vec::new())).collect();
        let indexes: Vec<usize> = jobs.iter().map(|(i, _, _)| *i).collect();
        let results = rules::evaluate_all(jobs.into_iter().map(|(_, l, r)| (l, r)).collect()).await;
        for (i, result) in indexes.into_iter().zip(results) {
            out[i] = Some(result);
        }
        out
    }

    /// Applies one manifest as its work's configuration says: its resource resolved, its
    /// `manifestConfigs` options found, owned by the AppliedManifestWork unless orphaned or read
    /// only. What became of it, and its options.
    async fn apply_one(
        &self,
        work: &ManifestWork,
        configs: &[ManifestConfigOption],
        manifest: &Value,
        owner: &Value,
    ) -> (Seen, Option<ManifestConfigOption>) {
        let r = match self.cluster.resolve(manifest).await {
            Ok(r) => r,
            Err(e) => return (Seen::ApplyFailed(e.to_string()), None),
        };
        let config = status::config_for(configs, &r);
        let strategy = strategy_of(config.as_ref());
        let owned = strategy != Strategy::ReadOnly && !orphaned(work, &r);
        match self.cluster.apply(manifest, owned.then_some(owner), &strategy).await {
            Ok((r, live)) => (Seen::Applied(r, live), config),
            Err(e) => (Seen::ApplyFailed(e.to_string()), config),
        }
    }

    /// Reads one manifest's live object without applying it (its work or itself `Complete`).
    async fn read_one(
        &self,
        configs: &[ManifestConfigOption],
        manifest: &Value,
    ) -> (Seen, Option<ManifestConfigOption>) {
        let r = match self.cluster.resolve(manifest).await {
            Ok(r) => r,
            Err(e) => return (Seen::ReadFailed(e.to_string()), None),
        };
        let config = status::config_for(configs, &r);
        match self.cluster.get(manifest).await {
            Ok(live) => {
                let uid = live.as_ref().and_then(|l| l.pointer("/metadata/uid"));
                let r = Applied { uid: uid.and_then(Value::as_str).map(str::to_owned), ..r };
                (Seen::Read(r, live), config)
            }
            Err(e) => (Seen::ReadFailed(e.to_string()), config),
        }
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
