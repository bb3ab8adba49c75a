//! The `mwrs` mode's simulated work agent: the agent library's own gRPC transport (Subscribe
//! with spec resync, status resync by hash, reconnects; status events with sequence ids and
//! hashes; `Deleted` to release a work) in front of a cluster that applies nothing. Every work
//! it is sent is reported as a real agent reports it: per manifest and for the work, `Applied`
//! and `Available` at the work's generation. A manifest annotated [`FAIL`] is reported as not
//! applied (`Applied` False), which is how the benchmark makes a revision fail.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use ocm_agent::grpc::Endpoint;
use ocm_agent::state::DataDir;
use ocm_agent::transport::{self, GrpcSource, Incoming, Link, Sink};
use ocm_proto::api::meta::{
    CONDITION_FALSE, CONDITION_TRUE, CONDITION_UNKNOWN, Condition, condition, set_condition,
};
use ocm_proto::api::work::v1::{
    ManifestCondition, ManifestResourceMeta, ManifestResourceStatus, ManifestWork,
    ManifestWorkStatus,
};
use serde_json::Value;
use tokio::sync::mpsc;

/// The annotation that makes the simulated agent report a manifest as not applied.
pub(super) const FAIL: &str = "fleet-sim.open-cluster-management.io/fail";

/// How long a subscription may stay silent before the transport reconnects (the agent's
/// default).
const HEALTHINESS: Duration = Duration::from_secs(30);

/// Attempts at publishing one status before the agent gives up on it (the hub's status resync
/// asks again on the next subscription).
const ATTEMPTS: u32 = 10;

/// Starts the work agent of the cluster whose data dir is `dir`; it runs until the process
/// ends.
pub(super) fn start(endpoint: &Endpoint, dir: &DataDir) -> anyhow::Result<()> {
    let cluster = dir.identity()?.context("identity")?.cluster_name;
    let link = Link::new(&cluster, &format!("{cluster}-work-agent"));
    let source = GrpcSource {
        endpoint: endpoint.clone(),
        others: Default::default(),
        data_dir: dir.clone(),
        cluster,
        healthiness: HEALTHINESS,
    };
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(transport::grpc_source(source, Arc::clone(&link), tx));
    tokio::spawn(serve(link, rx));
    Ok(())
}

/// The agent's loop: each message from the hub answered as a real agent answers it.
async fn serve(link: Arc<Link>, mut rx: mpsc::Receiver<Incoming>) {
    let sink = Sink::Grpc(Arc::clone(&link));
    let mut held: HashMap<String, ManifestWork> = HashMap::new();
    while let Some(msg) = rx.recv().await {
        match msg {
            Incoming::Upsert(work) => {
                let uid = work.metadata.uid.clone().unwrap_or_default();
                let before = held.remove(&uid).and_then(|w| w.status);
                let mut work = *work;
                let status = status_of(&work, before.unwrap_or_default());
                report(&sink, &mut work, status).await;
                held.insert(uid, work);
                hold(&link, &held);
            }
            Incoming::Deleting(uid) => {
                if let Some(work) = held.remove(&uid) {
                    release(&sink, &work).await;
                    link.forget(&uid);
                    hold(&link, &held);
                }
            }
            Incoming::StatusHashes(hashes) => {
                link.hub_hashes(&hashes);
                for work in held.values_mut() {
                    let status = work.status.clone().unwrap_or_default();
                    report(&sink, work, status).await;
                }
            }
            Incoming::Gone(_) | Incoming::Relisted(_) => {}
        }
    }
}

/// Tells the transport which works (and generations) the agent holds, for its spec resync.
fn hold(link: &Link, held: &HashMap<String, ManifestWork>) {
    let by_name = held.values().map(|w| (w.metadata.name.clone().unwrap_or_default(), w.clone()));
    link.hold(&by_name.collect());
}

/// Publishes a status, retrying while the transport reconnects.
async fn report(sink: &Sink, work: &mut ManifestWork, status: ManifestWorkStatus) {
    for attempt in 1..=ATTEMPTS {
        match sink.report(work, status.clone()).await {
            Ok(()) => return,
            Err(e) if attempt == ATTEMPTS => eprintln!("status not published: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await,
        }
    }
}

/// Publishes `Deleted`, retrying while the transport reconnects.
async fn release(sink: &Sink, work: &ManifestWork) {
    for attempt in 1..=ATTEMPTS {
        match sink.release(work).await {
            Ok(()) => return,
            Err(e) if attempt == ATTEMPTS => eprintln!("deletion not published: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await,
        }
    }
}

/// The status a real agent reports after applying `work` (conditions keep their transition
/// times while their status stays).
fn status_of(work: &ManifestWork, before: ManifestWorkStatus) -> ManifestWorkStatus {
    let generation = work.metadata.generation;
    let manifests: Vec<&Value> = work
        .spec
        .iter()
        .flat_map(|s| s.workload.iter())
        .flat_map(|w| w.manifests.iter().map(|m| &m.0))
        .collect();
    let previous = before.resource_status.map(|r| r.manifests).unwrap_or_default();
    let results: Vec<ManifestCondition> = manifests
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let old = previous.iter().find(|p| p.resource_meta.ordinal == i as i32);
            manifest_condition(i, m, old.map(|o| o.conditions.clone()).unwrap_or_default())
        })
        .collect();
    let failed = results.iter().filter(|m| !is_true(&m.conditions, "Applied")).count();
    let (applied, available) = if failed == 0 && !results.is_empty() {
        (
            condition(
                "Applied",
                CONDITION_TRUE,
                "AppliedManifestWorkComplete",
                "Apply manifest work complete",
            ),
            condition(
                "Available",
                CONDITION_TRUE,
                "ResourcesAvailable",
                "All resources are available",
            ),
        )
    } else {
        let message = format!("{failed} of {} resources are not available", results.len());
        (
            condition(
                "Applied",
                CONDITION_FALSE,
                "AppliedManifestWorkFailed",
                "Failed to apply manifest work",
            ),
            condition("Available", CONDITION_UNKNOWN, "ResourcesStatusUnknown", message),
        )
    };
    let at = |mut c: Condition| {
        c.observed_generation = generation;
        c
    };
    ManifestWorkStatus {
        conditions: with_conditions(before.conditions, [at(applied), at(available)]),
        resource_status: Some(ManifestResourceStatus { manifests: results }),
    }
}

/// One manifest's entry: applied and available, or not applied when it carries [`FAIL`].
fn manifest_condition(i: usize, m: &Value, before: Vec<Condition>) -> ManifestCondition {
    let text = |p: &str| m.pointer(p).and_then(Value::as_str).unwrap_or("").to_owned();
    let api_version = text("/apiVersion");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
    let kind = text("/kind");
    let resource_meta = ManifestResourceMeta {
        ordinal: i as i32,
        group: Some(group.to_owned()),
        version: Some(version.to_owned()),
        kind: Some(kind.clone()),
        resource: Some(format!("{}s", kind.to_lowercase())),
        name: Some(text("/metadata/name")),
        namespace: Some(text("/metadata/namespace")),
    };
    let fails =
        m.pointer("/metadata/annotations").and_then(|a| a.get(FAIL)) == Some(&"true".into());
    let new = if fails {
        let message = "Failed to apply manifest: the simulated cluster refuses it";
        [
            condition("Applied", CONDITION_FALSE, "AppliedManifestFailed", message),
            condition("Available", CONDITION_UNKNOWN, "FetchingResourceFailed", message),
        ]
    } else {
        [
            condition(
                "Applied",
                CONDITION_TRUE,
                "AppliedManifestComplete",
                "Apply manifest complete",
            ),
            condition("Available", CONDITION_TRUE, "ResourceAvailable", "Resource is available"),
        ]
    };
    ManifestCondition {
        resource_meta,
        status_feedback: None,
        conditions: with_conditions(before, new),
    }
}

fn is_true(conditions: &[Condition], type_: &str) -> bool {
    conditions.iter().any(|c| c.type_ == type_ && c.status == CONDITION_TRUE)
}

/// `conditions` with each of `new` set (a transition time moves only with the status).
fn with_conditions(
    mut conditions: Vec<Condition>,
    new: impl IntoIterator<Item = Condition>,
) -> Vec<Condition> {
    for c in new {
        set_condition(&mut conditions, c, ocm_agent::clock::now());
    }
    conditions
}
