//! How the work agent meets the hub, on either transport: where its ManifestWorks come from (a
//! REST list-watch, or a CloudEvents `Subscribe` stream with spec resync by generation and
//! status resync by status hash) and where their status and finalizer changes go (REST patches,
//! or `Publish`ed status events, the finalizer being the hub's on gRPC). Also the journal: the
//! works the agent holds, on disk, so that a restarted agent keeps correcting drift while the
//! hub is away.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt as _;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::watcher;
use ocm_proto::api::meta::{CONDITION_TRUE, condition};
use ocm_proto::api::work::v1::{
    ManifestWork, ManifestWorkSpec, ManifestWorkStatus, ManifestsTemplate,
};
use ocm_proto::api::work::{
    FINALIZER_MANIFEST_WORK_CLEANUP as FINALIZER, GROUP, LABEL_CLOUDEVENTS_ORIGINAL_SOURCE,
};
use ocm_proto::cloudevents::v1::CloudEvent;
use ocm_proto::cloudevents::{
    Action, Attr, EventType, HEARTBEAT, HeldVersion, SpecResync, StatusResync, Subresource,
    data_type, ext,
};
use ocm_proto::payload::{ManifestBundle, ManifestBundleStatus, status_hash};
use serde_json::json;
use tokio::sync::mpsc;

use crate::backoff::Backoff;
use crate::error::AgentError;
use crate::grpc::{self, Client, Endpoint};
use crate::state::DataDir;

/// What a work source tells the work agent.
#[derive(Debug)]
pub enum Incoming {
    /// A work as the hub holds it now.
    Upsert(Box<ManifestWork>),
    /// The work with this uid is being deleted on the hub (or is gone from it): its resources
    /// are to be cleaned up.
    Deleting(String),
    /// The work with this name is gone from the hub after its cleanup (REST): forget it.
    Gone(String),
    /// A REST (re)list is complete: these are all the works there are.
    Relisted(Vec<String>),
    /// The hub's status hashes (uid → hash): statuses that differ are to be reported again.
    StatusHashes(Vec<(String, String)>),
}

/// The work file of the journal.
const JOURNAL: &str = "works.json";

/// The works the agent holds, by name, from the journal (empty when there is none).
pub fn load_journal(dir: &DataDir) -> BTreeMap<String, ManifestWork> {
    let works: Vec<ManifestWork> = match dir.read(JOURNAL) {
        Ok(Some(text)) => serde_json::from_str(&text).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "the work journal does not parse; starting empty");
            Vec::new()
        }),
        Ok(None) => Vec::new(),
        Err(e) => {
            tracing::warn!(error = %e, "the work journal cannot be read; starting empty");
            Vec::new()
        }
    };
    works.into_iter().map(|w| (w.metadata.name.clone().unwrap_or_default(), w)).collect()
}

/// The journal's bytes for `works`.
pub fn journal_bytes(works: &BTreeMap<String, ManifestWork>) -> Vec<u8> {
    serde_json::to_vec(&works.values().collect::<Vec<_>>()).unwrap_or_default()
}

/// Writes the journal (atomically; the previous one stays whole until the rename). It holds
/// every manifest, Secrets included, so only the agent's user may read it.
pub async fn save_journal(dir: &DataDir, bytes: Vec<u8>) -> Result<(), AgentError> {
    dir.write_async(JOURNAL, bytes, true).await
}

/// Where status and finalizer changes go.
pub enum Sink {
    /// REST patches of the hub's ManifestWorks.
    Kube(Box<Api<DynamicObject>>),
    /// Status events published over gRPC.
    Grpc(Arc<Link>),
}

/// The agent's current gRPC connection and what it has reported over it.
pub struct Link {
    client: Mutex<Option<Client>>,
    /// The agent's id, the `source` of its events.
    source: String,
    cluster: String,
    /// Monotonic per agent (OCM's `sequenceid`).
    sequence: AtomicU64,
    /// The status hash the hub last accepted, per work uid.
    acked: Mutex<HashMap<String, String>>,
    /// The generation of every work held, by uid (what a spec resync tells the hub).
    held: Mutex<HashMap<String, i64>>,
}

impl Link {
    /// A link for `cluster`'s agent `source`, not yet connected.
    pub fn new(cluster: &str, source: &str) -> Arc<Link> {
        let start = crate::clock::timestamp().as_nanosecond() as u64;
        Arc::new(Link {
            client: Mutex::new(None),
            source: source.to_owned(),
            cluster: cluster.to_owned(),
            sequence: AtomicU64::new(start),
            acked: Mutex::default(),
            held: Mutex::default(),
        })
    }

    fn client(&self) -> Option<Client> {
        self.client.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn set_client(&self, c: Option<Client>) {
        *self.client.lock().unwrap_or_else(PoisonError::into_inner) = c;
    }

    /// Records the works held (for the next spec resync).
    pub fn hold(&self, works: &BTreeMap<String, ManifestWork>) {
        let held = works
            .values()
            .filter_map(|w| Some((w.metadata.uid.clone()?, w.metadata.generation.unwrap_or(0))))
            .collect();
        *self.held.lock().unwrap_or_else(PoisonError::into_inner) = held;
    }

    /// Publishes a work's status, unless the hub already has it.
    pub(crate) async fn report(
        &self,
        work: &ManifestWork,
        status: &ManifestWorkStatus,
    ) -> Result<(), AgentError> {
        let uid = work.metadata.uid.clone().unwrap_or_default();
        let hash = status_hash(status);
        if self.acked.lock().unwrap_or_else(PoisonError::into_inner).get(&uid) == Some(&hash) {
            return Ok(());
        }
        let client = self.client().ok_or_else(|| AgentError::Unreachable {
            url: "the gRPC server".into(),
            detail: "not connected".into(),
        })?;
        let sequence = self.sequence.fetch_add(1, Ordering::Relaxed) + 1;
        let event = status_event(&self.source, &self.cluster, work, status, &hash, sequence)?;
        grpc::publish(&client, event).await?;
        self.acked.lock().unwrap_or_else(PoisonError::into_inner).insert(uid, hash);
        Ok(())
    }

    /// Forgets what was reported for a work let go.
    pub fn forget(&self, uid: &str) {
        self.acked.lock().unwrap_or_else(PoisonError::into_inner).remove(uid);
    }

    /// The hub's status hashes replace what it acknowledged before: a work whose hash differs,
    /// or that the hub does not list, is reported again at its next pass.
    pub fn hub_hashes(&self, hashes: &[(String, String)]) {
        *self.acked.lock().unwrap_or_else(PoisonError::into_inner) =
            hashes.iter().cloned().collect();
    }
}

impl Sink {
    /// The REST sink for `cluster`'s works.
    pub fn kube(hub: kube::Client, cluster: &str) -> Sink {
        Sink::Kube(Box::new(Api::namespaced_with(hub, cluster, &works_resource())))
    }

    /// Makes sure the work carries the agent's finalizer; false when a change was made (over
    /// REST: its event brings the work back). Over gRPC the hub adds it on the first report.
    pub async fn ensure_finalizer(&self, work: &ManifestWork) -> Result<bool, AgentError> {
        let Sink::Kube(api) = self else { return Ok(true) };
        let finalizers: Vec<&str> =
            work.metadata.finalizers.iter().flatten().map(String::as_str).collect();
        if finalizers.contains(&FINALIZER) {
            return Ok(true);
        }
        let with: Vec<&str> = finalizers.iter().copied().chain([FINALIZER]).collect();
        set_finalizers(api, work, &with).await?;
        Ok(false)
    }

    /// Reports a work's new status (when it changed), keeping it (and, over REST, the
    /// resourceVersion the write gave) in `work`.
    pub async fn report(
        &self,
        work: &mut ManifestWork,
        status: ManifestWorkStatus,
    ) -> Result<(), AgentError> {
        match self {
            Sink::Kube(api) => {
                if work.status.as_ref() != Some(&status) {
                    let name = work.metadata.name.as_deref().unwrap_or("");
                    let patch = json!({"status": status});
                    let params = PatchParams::default();
                    let o = api.patch_status(name, &params, &Patch::Merge(&patch)).await?;
                    work.metadata.resource_version = o.metadata.resource_version;
                }
            }
            Sink::Grpc(link) => link.report(work, &status).await?,
        }
        work.status = Some(status);
        Ok(())
    }

    /// Lets the hub's work go once its resources are cleaned up: the finalizer removed over
    /// REST, a `Deleted` status over gRPC (the hub removes the finalizer then).
    pub async fn release(&self, work: &ManifestWork) -> Result<(), AgentError> {
        match self {
            Sink::Kube(api) => {
                let rest: Vec<&str> = work
                    .metadata
                    .finalizers
                    .iter()
                    .flatten()
                    .map(String::as_str)
                    .filter(|f| *f != FINALIZER)
                    .collect();
                set_finalizers(api, work, &rest).await
            }
            Sink::Grpc(link) => {
                let mut status = work.status.clone().unwrap_or_default();
                let deleted = condition(
                    "Deleted",
                    CONDITION_TRUE,
                    "ManifestsDeleted",
                    "Manifests are deleted",
                );
                let now = crate::clock::now();
                ocm_proto::api::meta::set_condition(&mut status.conditions, deleted, now);
                link.report(work, &status).await
            }
        }
    }
}

/// Merge-patches a work's finalizers at its resourceVersion (a change made meanwhile is a
/// conflict).
async fn set_finalizers(
    api: &Api<DynamicObject>,
    work: &ManifestWork,
    finalizers: &[&str],
) -> Result<(), AgentError> {
    let name = work.metadata.name.as_deref().unwrap_or("");
    let rv = &work.metadata.resource_version;
    let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": rv}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

/// The ManifestWork resource (`work.open-cluster-management.io/v1`) for `kube`'s dynamic API.
pub fn works_resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk(GROUP, "v1", "ManifestWork");
    ApiResource::from_gvk_with_plural(&gvk, "manifestworks")
}

/// Follows the works over REST: every change, and after each (re)list the names that exist.
pub async fn kube_source(hub: kube::Client, cluster: String, tx: mpsc::Sender<Incoming>) {
    let api: Api<DynamicObject> = Api::namespaced_with(hub, &cluster, &works_resource());
    let stream = watcher(api, watcher::Config::default());
    let mut stream = std::pin::pin!(stream);
    let mut listed = Vec::new();
    while let Some(event) = stream.next().await {
        let msg = match event {
            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                let parsed =
                    serde_json::to_value(&o).and_then(serde_json::from_value::<ManifestWork>);
                match parsed {
                    Ok(work) => {
                        listed.push(work.metadata.name.clone().unwrap_or_default());
                        Incoming::Upsert(Box::new(work))
                    }
                    Err(e) => {
                        tracing::warn!(work = ?o.metadata.name, error = %e, "not a ManifestWork");
                        continue;
                    }
                }
            }
            Ok(watcher::Event::Delete(o)) => Incoming::Gone(o.metadata.name.unwrap_or_default()),
            Ok(watcher::Event::Init) => {
                listed.clear();
                continue;
            }
            Ok(watcher::Event::InitDone) => Incoming::Relisted(std::mem::take(&mut listed)),
            Err(e) => {
                tracing::debug!(error = %e, "work watch interrupted; resuming");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if tx.send(msg).await.is_err() {
            return;
        }
    }
}

/// The gRPC source's settings.
#[derive(Debug, Clone)]
pub struct GrpcSource {
    /// The hub's gRPC server.
    pub endpoint: Endpoint,
    /// The gRPC servers of the hub's replicas as the agent last learned them (kept current by
    /// the agent), tried in turn when the one in use cannot be reached.
    pub others: Arc<std::sync::RwLock<Vec<String>>>,
    /// Where the agent's certificate is (read at every connect).
    pub data_dir: DataDir,
    /// The cluster.
    pub cluster: String,
    /// Resubscribe when nothing (not even a heartbeat) arrived for this long.
    pub healthiness: Duration,
}

/// The event reporting `status` of `work` from agent `source` of `cluster` (OCM's
/// `manifestbundles.status.update_request`, ocm-wave2.md §6.3): the work's uid, generation,
/// original source and metadata, a `sequenceid`, the status hash `hash`, and the status as
/// OCM's `ManifestBundleStatus`.
pub fn status_event(
    source: &str,
    cluster: &str,
    work: &ManifestWork,
    status: &ManifestWorkStatus,
    hash: &str,
    sequence: u64,
) -> Result<CloudEvent, AgentError> {
    let t = EventType::new(data_type::MANIFEST_BUNDLES, Subresource::Status, Action::UpdateRequest)
        .map_err(|e| AgentError::Invalid(e.to_string()))?;
    let mut event = CloudEvent::ocm(source, &t, cluster, crate::clock::offset_now());
    let meta = serde_json::to_string(&work.metadata).unwrap_or_default();
    let original = work
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_CLOUDEVENTS_ORIGINAL_SOURCE))
        .cloned()
        .unwrap_or_default();
    let generation = work.metadata.generation.unwrap_or(0);
    event
        .set(ext::RESOURCE_ID, Attr::CeString(work.metadata.uid.clone().unwrap_or_default()))
        .set(ext::RESOURCE_VERSION, Attr::CeInteger(i32::try_from(generation).unwrap_or(i32::MAX)))
        .set(ext::ORIGINAL_SOURCE, Attr::CeString(original))
        .set(ext::SEQUENCE_ID, Attr::CeString(sequence.to_string()))
        .set(ext::STATUS_HASH, Attr::CeString(hash.to_owned()))
        .set(ext::METADATA, Attr::CeString(meta))
        .set_json(serde_json::to_vec(&ManifestBundleStatus::of(status)).unwrap_or_default());
    Ok(event)
}

/// The work a spec event describes (ocm.md §8.4), or the uid of a work being deleted.
pub fn work_of(event: &CloudEvent, cluster: &str) -> Result<Incoming, String> {
    let uid = event.string(ext::RESOURCE_ID).ok_or("the event has no resourceid")?.to_owned();
    if event.get(ext::DELETION_TIMESTAMP).is_some() {
        return Ok(Incoming::Deleting(uid));
    }
    let bundle: ManifestBundle =
        serde_json::from_slice(event.bytes().ok_or("the event has no data")?)
            .map_err(|e| format!("the manifest bundle does not parse: {e}"))?;
    let mut work = ManifestWork::default();
    if let Some(meta) = event.string(ext::METADATA) {
        work.metadata = serde_json::from_str(meta)
            .map_err(|e| format!("the metadata extension does not parse: {e}"))?;
    }
    let meta = &mut work.metadata;
    if meta.name.as_deref().is_none_or(str::is_empty) {
        meta.name = Some(uid.clone());
    }
    meta.namespace = Some(cluster.to_owned());
    meta.uid = Some(uid);
    meta.generation = event.integer(ext::RESOURCE_VERSION).map(i64::from);
    meta.labels
        .get_or_insert_with(Default::default)
        .insert(LABEL_CLOUDEVENTS_ORIGINAL_SOURCE.into(), event.source.clone());
    // The agent holds the finalizer of every work it was sent (OCM's CloudEvents agent does).
    meta.finalizers = Some(vec![FINALIZER.to_owned()]);
    meta.deletion_timestamp = None;
    meta.managed_fields = None;
    work.spec = Some(ManifestWorkSpec {
        workload: Some(ManifestsTemplate {
            manifests: bundle.manifests.into_iter().map(Into::into).collect(),
        }),
        delete_option: bundle.delete_option,
        manifest_configs: bundle.manifest_configs,
        executor: bundle.executer,
    });
    Ok(Incoming::Upsert(Box::new(work)))
}

/// The status hashes of a status resync request.
fn hashes_of(event: &CloudEvent) -> Vec<(String, String)> {
    serde_json::from_slice::<StatusResync>(event.bytes().unwrap_or(b"{}"))
        .map(|r| r.status_hashes.into_iter().map(|e| (e.resource_id, e.status_hash)).collect())
        .unwrap_or_default()
}

/// Follows the works over gRPC until the receiver goes: connects, subscribes, asks for a spec
/// resync with the generations it holds, and forwards what arrives; reconnects with backoff
/// when the stream ends, fails or falls silent, to the next replica's server when the one in
/// use could not be reached.
pub async fn grpc_source(source: GrpcSource, link: Arc<Link>, tx: mpsc::Sender<Incoming>) {
    let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(10));
    let mut at = 0;
    loop {
        let servers = servers(&source);
        at %= servers.len();
        let mut subscribed = false;
        match follow(&source, &servers[at], &link, &tx, &mut subscribed).await {
            Ok(()) => return,
            Err(e) => {
                link.set_client(None);
                tracing::info!(error = %e, "work stream interrupted; reconnecting");
            }
        }
        // A stream that was up starts the backoff over, on the same server; a server that
        // could not be reached gives way to the next.
        if subscribed {
            backoff.reset();
        } else {
            at = (at + 1) % servers.len();
        }
        backoff.wait().await;
    }
}

/// The servers to try: the one the agent was given, then the other replicas'.
pub(crate) fn servers(source: &GrpcSource) -> Vec<Endpoint> {
    let others = source.others.read().unwrap_or_else(PoisonError::into_inner).clone();
    let mut urls = vec![source.endpoint.url.clone()];
    for url in others {
        if !urls.contains(&url) {
            urls.push(url);
        }
    }
    urls.into_iter().map(|url| Endpoint { url, ..source.endpoint.clone() }).collect()
}

async fn follow(
    source: &GrpcSource,
    endpoint: &Endpoint,
    link: &Arc<Link>,
    tx: &mpsc::Sender<Incoming>,
    subscribed: &mut bool,
) -> Result<(), AgentError> {
    let (cert, key) = source.data_dir.credentials()?.ok_or_else(|| {
        AgentError::Invalid("the agent holds no certificate: run `klusterlet join`".into())
    })?;
    let client = endpoint.connect(&cert, &key).await?;
    let mut stream = grpc::subscribe(&client, &source.cluster, data_type::MANIFEST_BUNDLES).await?;
    link.set_client(Some(client.clone()));
    *subscribed = true;
    // Spec resync: everything newer than what the agent holds, and what it holds that is gone.
    let resource_versions = link
        .held
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .map(|(id, v)| HeldVersion { resource_id: id.clone(), resource_version: *v })
        .collect();
    let t = EventType::new(data_type::MANIFEST_BUNDLES, Subresource::Spec, Action::ResyncRequest)
        .map_err(|e| AgentError::Invalid(e.to_string()))?;
    let mut ask =
        CloudEvent::ocm(link.source.clone(), &t, &source.cluster, crate::clock::offset_now());
    ask.set_json(serde_json::to_vec(&SpecResync { resource_versions }).unwrap_or_default());
    grpc::publish(&client, ask).await?;
    tracing::info!(cluster = %source.cluster, "work stream connected");
    loop {
        let next = tokio::time::timeout(source.healthiness, stream.message()).await;
        let event = match next {
            Err(_) => {
                return Err(AgentError::Unreachable {
                    url: endpoint.url.clone(),
                    detail: "no heartbeat from the hub".into(),
                });
            }
            Ok(Err(s)) => return Err(grpc::status_error(s)),
            Ok(Ok(None)) => {
                return Err(AgentError::Unreachable {
                    url: endpoint.url.clone(),
                    detail: "the hub ended the stream".into(),
                });
            }
            Ok(Ok(Some(e))) => e,
        };
        if event.r#type == HEARTBEAT {
            continue;
        }
        let msg = match EventType::parse(&event.r#type) {
            Ok(t) if t.subresource == Subresource::Status && t.action == Action::ResyncRequest => {
                Incoming::StatusHashes(hashes_of(&event))
            }
            Ok(t) if t.subresource == Subresource::Spec => match work_of(&event, &source.cluster) {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!(id = %event.id, error = %e, "work event ignored");
                    continue;
                }
            },
            _ => {
                tracing::debug!(r#type = %event.r#type, "event ignored");
                continue;
            }
        };
        if tx.send(msg).await.is_err() {
            return Ok(());
        }
    }
}

/// Marks a held work deleted (the hub's deletion reached the agent).
pub fn mark_deleting(work: &mut ManifestWork) {
    if work.metadata.deletion_timestamp.is_none() {
        work.metadata.deletion_timestamp = Some(crate::clock::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hub's list replaces what it acknowledged: a work it no longer lists counts as not
    /// acknowledged (and is reported again), one it lists with a new hash takes that hash.
    #[test]
    fn the_hubs_status_hashes_replace_the_acknowledged_ones() {
        let link = Link::new("c1", "agent");
        let pair = |uid: &str, hash: &str| (uid.to_owned(), hash.to_owned());
        link.hub_hashes(&[pair("a", "h1"), pair("b", "h2")]);
        link.hub_hashes(&[pair("b", "h3")]);
        let acked = link.acked.lock().unwrap().clone();
        assert_eq!(acked, HashMap::from([pair("b", "h3")]));
    }
}
