//! The live replicas of one hub and where agents are told to find them, as kube-apiserver keeps
//! its own endpoints: every replica keeps a Lease `kube-system/ocm-hub-<id>` labelled
//! [`REPLICA_LABEL`] with its HTTPS and gRPC URLs ([`register`]), and the leader's controller
//! ([`start`]) publishes the replicas whose Leases are live in `kube-public/cluster-info`
//! ([`REPLICAS_KEY`], a JSON list of `{"https", "grpc"}`), its own URLs first, so agents can
//! move to another replica when theirs goes away. Leases expired for [`FORGET_AFTER`] are
//! deleted.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::controllers::runtime::{Action, Runtime, Watch};
use crate::machinery::background::Background;
use crate::machinery::clock;
use crate::machinery::error::ApiError;
use crate::machinery::object::{parse_rfc3339, rfc3339_micros};
use crate::machinery::scheme::ResourceType;
use crate::store::cache::CachedObject;
use crate::store::registry::{DeleteOptions, Patch, Registry, WriteOptions};

/// The label on every replica's Lease.
pub const REPLICA_LABEL: &str = "ocm-hub.io/replica";
/// The annotations holding a replica's URLs.
pub const HTTPS_ANNOTATION: &str = "ocm-hub.io/https";
pub const GRPC_ANNOTATION: &str = "ocm-hub.io/grpc";
/// The ConfigMap in `kube-public` that tells agents where the hub is (kubeadm's).
pub const CLUSTER_INFO: &str = "cluster-info";
/// The key of `kube-public/cluster-info` listing the live replicas.
pub const REPLICAS_KEY: &str = ocm_proto::cloudevents::CLUSTER_INFO_REPLICAS;
/// The key naming the hub's gRPC server.
const GRPC_SERVER: &str = ocm_proto::cloudevents::CLUSTER_INFO_GRPC_SERVER;

/// A replica's Lease lasts this long unless renewed, every [`RENEW_EVERY`].
const LEASE_SECONDS: u64 = 15;
const RENEW_EVERY: Duration = Duration::from_secs(5);
/// A replica whose Lease expired this long ago is forgotten (its Lease deleted).
pub const FORGET_AFTER: Duration = Duration::from_secs(600);

/// This replica's URLs.
#[derive(Debug, Clone)]
pub struct Urls {
    pub https: String,
    pub grpc: Option<String>,
}

/// Keeps this replica's Lease (named for `identity`) renewed while the hub runs.
pub fn register(registry: &Registry, background: &Background, identity: &str, urls: Urls) {
    let Some(rt) = leases(registry) else { return };
    let registry = registry.clone();
    let name = lease_name(identity);
    let identity = identity.to_owned();
    background.spawn(async move {
        loop {
            let lease = replica_lease(&name, &identity, &urls);
            if let Err(e) = registry.ensure(&rt, lease, &WriteOptions::default()).await {
                tracing::warn!(error = %e.message, "replica lease not renewed");
            }
            tokio::time::sleep(RENEW_EVERY).await;
        }
    });
}

/// Deletes this replica's Lease as the hub stops cleanly (bounded to 2 s), so the leader drops
/// it from the published list at once rather than when it expires.
pub async fn deregister(registry: &Registry, identity: &str) {
    let Some(rt) = leases(registry) else { return };
    let opts = DeleteOptions::default();
    let name = lease_name(identity);
    let delete = registry.delete(&rt, "kube-system", &name, &opts);
    let _ = tokio::time::timeout(Duration::from_secs(2), delete).await;
}

/// The Lease name of the replica `identity` (`<host>_<uuid>`): `ocm-hub-<uuid>`.
fn lease_name(identity: &str) -> String {
    let id = identity.rsplit('_').next().unwrap_or(identity);
    format!("ocm-hub-{}", id.to_ascii_lowercase())
}

fn replica_lease(name: &str, identity: &str, urls: &Urls) -> Value {
    let mut annotations = json!({HTTPS_ANNOTATION: urls.https});
    if let Some(grpc) = &urls.grpc {
        annotations[GRPC_ANNOTATION] = json!(grpc);
    }
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": name,
            "namespace": "kube-system",
            "labels": {REPLICA_LABEL: "true"},
            "annotations": annotations,
        },
        "spec": {
            "holderIdentity": identity,
            "leaseDurationSeconds": LEASE_SECONDS,
            "renewTime": rfc3339_micros(clock::now()),
        },
    })
}

fn leases(registry: &Registry) -> Option<Arc<ResourceType>> {
    registry.scheme.lookup("coordination.k8s.io", "v1", "leases").cloned()
}

/// The one key of the controller.
const KEY: &str = "cluster-info";

/// Starts the controller that publishes the live replicas (`own`: the leader's URLs, listed
/// first).
pub fn start(runtime: &Runtime, own: Urls) {
    let registry = &runtime.registry;
    let (Some(lease_rt), Some(cm_rt)) =
        (leases(registry), registry.scheme.lookup("", "v1", "configmaps").cloned())
    else {
        return;
    };
    let replica = |o: &CachedObject| {
        let ours = o.namespace_name().0 == "kube-system" && o.label(REPLICA_LABEL).is_some();
        if ours { vec![KEY.to_owned()] } else { Vec::new() }
    };
    let info = |o: &CachedObject| {
        let ours = o.namespace_name() == ("kube-public", CLUSTER_INFO);
        if ours { vec![KEY.to_owned()] } else { Vec::new() }
    };
    let watches = vec![Watch::new(&lease_rt, replica), Watch::new(&cm_rt, info)];
    let publisher = Arc::new(Publisher { registry: registry.clone(), lease_rt, cm_rt, own });
    runtime.run("replicas", watches, 1, move |_| {
        let publisher = Arc::clone(&publisher);
        async move { publisher.reconcile().await }
    });
}

struct Publisher {
    registry: Registry,
    lease_rt: Arc<ResourceType>,
    cm_rt: Arc<ResourceType>,
    own: Urls,
}

/// A replica as its Lease says.
struct Seen {
    name: String,
    urls: Urls,
    /// Seconds until the Lease expires (negative: expired that long ago).
    left: f64,
}

impl Publisher {
    async fn reconcile(&self) -> Result<Action, ApiError> {
        let (items, _) = self
            .registry
            .cache
            .list(&self.lease_rt.prefix, &format!("{}kube-system/", self.lease_rt.prefix))?;
        let now = clock::now();
        let mut live = vec![self.own.clone()];
        let mut next = Duration::from_secs(LEASE_SECONDS);
        for item in items.iter().filter(|o| o.label(REPLICA_LABEL).is_some()) {
            let Some(seen) = seen(&item.value(), now) else { continue };
            if seen.left > 0.0 {
                next = next.min(Duration::from_secs_f64(seen.left));
                if seen.urls.https != self.own.https {
                    live.push(seen.urls);
                }
            } else if -seen.left > FORGET_AFTER.as_secs_f64() {
                let opts = DeleteOptions::default();
                let _ =
                    self.registry.delete(&self.lease_rt, "kube-system", &seen.name, &opts).await;
            }
        }
        live[1..].sort_by(|a, b| a.https.cmp(&b.https));
        self.publish(&live).await?;
        Ok(Action::RequeueAfter(next + Duration::from_millis(100)))
    }

    /// Writes the list into `kube-public/cluster-info`, and the leader's URLs as the hub's
    /// (the kubeconfig's server, `grpc-server`), where they differ.
    async fn publish(&self, live: &[Urls]) -> Result<(), ApiError> {
        let list: Vec<Value> = live
            .iter()
            .map(|u| match &u.grpc {
                Some(grpc) => json!({"https": u.https, "grpc": grpc}),
                None => json!({"https": u.https}),
            })
            .collect();
        let text = Value::Array(list).to_string();
        let name = CLUSTER_INFO;
        let Some(current) = self.registry.cached(&self.cm_rt, "kube-public", name) else {
            return Ok(());
        };
        let data = &current.value()["data"];
        let mut desired = json!({REPLICAS_KEY: text});
        if let Some(grpc) = &self.own.grpc {
            desired[GRPC_SERVER] = json!(grpc);
        }
        if let Some(kubeconfig) = data["kubeconfig"].as_str() {
            desired["kubeconfig"] = json!(with_server(kubeconfig, &self.own.https));
        }
        let stale = desired.as_object().into_iter().flatten().any(|(k, v)| &data[k] != v);
        if !stale {
            return Ok(());
        }
        let patch = Patch::Merge(json!({"data": desired}));
        self.registry
            .patch(&self.cm_rt, "kube-public", name, &patch, None, &WriteOptions::default())
            .await
            .map(drop)
    }
}

/// The cluster-info kubeconfig (JSON) with its cluster's server set to `server`.
fn with_server(kubeconfig: &str, server: &str) -> String {
    let Ok(mut config) = serde_json::from_str::<Value>(kubeconfig) else {
        return kubeconfig.to_owned();
    };
    if let Some(cluster) = config["clusters"].get_mut(0) {
        cluster["cluster"]["server"] = json!(server);
    }
    config.to_string()
}

fn seen(lease: &Value, now: time::OffsetDateTime) -> Option<Seen> {
    let annotations = &lease["metadata"]["annotations"];
    let https = annotations[HTTPS_ANNOTATION].as_str()?.to_owned();
    let grpc = annotations[GRPC_ANNOTATION].as_str().map(str::to_owned);
    let renewed = parse_rfc3339(lease["spec"]["renewTime"].as_str()?)?;
    let seconds = lease["spec"]["leaseDurationSeconds"].as_u64().unwrap_or(LEASE_SECONDS);
    let expires = renewed + time::Duration::seconds(i64::try_from(seconds).unwrap_or(i64::MAX));
    Some(Seen {
        name: lease["metadata"]["name"].as_str()?.to_owned(),
        urls: Urls { https, grpc },
        left: (expires - now).as_seconds_f64(),
    })
}
