//! The fleet the `mwrs` and `addons` modes run over: the joined clusters labelled
//! `fleet-sim=fleet` (with a `leaseDurationSeconds` of an hour, so that a cluster whose agent
//! ran to `Available` stays so for the whole run while the lease agents are stopped), run to
//! `Available` a wave at a time, each with a simulated work agent on its own gRPC connection
//! (`work_agent.rs`); a namespace with a ManagedClusterSetBinding of the `default` set and a
//! Placement selecting the label, decided by the hub's placement controller.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::StreamExt as _;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch};
use kube::api::{ListParams, PatchParams, PostParams};
use ocm_agent::grpc::Endpoint;
use ocm_agent::state::DataDir;
use serde_json::{Value, json};

use super::{Hub, run_until_available, work_agent};

/// The namespace of the sets and the placement.
pub(super) const NS: &str = "fleet-sim";
/// The label that puts a cluster in the fleet the placement selects.
const FLEET_LABEL: &str = "fleet-sim";
/// The placement's name.
pub(super) const PLACEMENT: &str = "fleet";
/// The longest any milestone is waited for.
pub(super) const WITHIN: Duration = Duration::from_secs(600);
/// REST writes of the set-up in flight at once.
pub(super) const IN_FLIGHT: usize = 64;

/// Labels the clusters of `dirs`, runs them to `Available` a wave at a time, starts their work
/// agents, and has the placement decide them all.
pub(super) async fn prepare(
    hub: &Hub,
    client: &kube::Client,
    ca: &str,
    dirs: &[DataDir],
    wave: usize,
) -> anyhow::Result<()> {
    let n = dirs.len();
    let clusters = names(dirs)?;
    let t = Instant::now();
    label(client, &clusters).await?;
    for w in dirs.chunks(wave) {
        run_until_available(client, w).await?;
    }
    eprintln!("{n} clusters labelled and Available in {:.1} s", t.elapsed().as_secs_f64());
    subscribe(hub, client, ca, dirs, wave).await?;
    let t = Instant::now();
    fleet_objects(client).await?;
    decided(client, n).await?;
    eprintln!("the placement decided {n} clusters in {:.1} s", t.elapsed().as_secs_f64());
    Ok(())
}

fn names(dirs: &[DataDir]) -> anyhow::Result<Vec<String>> {
    dirs.iter().map(|d| Ok(d.identity()?.context("identity")?.cluster_name)).collect()
}

pub(super) fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

const CLUSTER_GROUP: &str = "cluster.open-cluster-management.io";

/// Labels every cluster into the fleet and gives it an hour's lease.
async fn label(client: &kube::Client, clusters: &[String]) -> anyhow::Result<()> {
    let ar = resource(CLUSTER_GROUP, "v1", "ManagedCluster", "managedclusters");
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let patch = json!({"metadata": {"labels": {FLEET_LABEL: "fleet"}},
                       "spec": {"leaseDurationSeconds": 3600}});
    let results: Vec<_> = futures::stream::iter(clusters)
        .map(|c| {
            let (api, patch) = (&api, &patch);
            async move { api.patch(c, &PatchParams::default(), &Patch::Merge(patch)).await }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    for r in results {
        r?;
    }
    Ok(())
}

/// Starts a work agent per cluster, a wave at a time, and waits until the hub counts every
/// subscription.
async fn subscribe(
    hub: &Hub,
    client: &kube::Client,
    ca: &str,
    dirs: &[DataDir],
    wave: usize,
) -> anyhow::Result<()> {
    let endpoints: Value =
        serde_json::from_str(&std::fs::read_to_string(hub.dir.path().join("endpoints.json"))?)?;
    let url = endpoints["grpc"].as_str().context("no gRPC endpoint")?.to_owned();
    let endpoint = Endpoint { url, ca_pem: ca.to_owned() };
    let t = Instant::now();
    let mut started = 0;
    for w in dirs.chunks(wave) {
        for d in w {
            work_agent::start(&endpoint, d)?;
        }
        started += w.len();
        wait_for(&format!("{started} work subscriptions"), || async {
            Ok(subscriptions(client).await? >= started as f64)
        })
        .await?;
    }
    eprintln!("{started} work agents subscribed in {:.1} s", t.elapsed().as_secs_f64());
    Ok(())
}

/// Open Subscribe streams on the hub (`grpc_server_ce_subscribers`, every cluster and data type).
async fn subscriptions(client: &kube::Client) -> anyhow::Result<f64> {
    let req = http::Request::get("/metrics").body(Vec::new())?;
    let samples = ocm_conformance::prom::samples(&client.request_text(req).await?)?;
    Ok(samples.iter().filter(|s| s.name == "grpc_server_ce_subscribers").map(|s| s.value).sum())
}

/// Polls `done` every 100 ms until it is true, for up to [`WITHIN`].
pub(super) async fn wait_for<F, Fut>(what: &str, done: F) -> anyhow::Result<()>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let deadline = Instant::now() + WITHIN;
    loop {
        if done().await.unwrap_or(false) {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < deadline, "{what}: not within {} s", WITHIN.as_secs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The namespace, the binding of the `default` set and the placement.
async fn fleet_objects(client: &kube::Client) -> anyhow::Result<()> {
    let post = |ar: ApiResource, ns: Option<&str>, obj: Value| {
        let api: Api<DynamicObject> = match ns {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        };
        async move {
            let obj: DynamicObject = serde_json::from_value(obj)?;
            api.create(&PostParams::default(), &obj).await?;
            anyhow::Ok(())
        }
    };
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}});
    post(resource("", "v1", "Namespace", "namespaces"), None, ns).await?;
    let binding = json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta2",
        "kind": "ManagedClusterSetBinding",
        "metadata": {"name": "default", "namespace": NS},
        "spec": {"clusterSet": "default"},
    });
    let bindings =
        resource(CLUSTER_GROUP, "v1beta2", "ManagedClusterSetBinding", "managedclustersetbindings");
    post(bindings, Some(NS), binding).await?;
    let placement = json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
        "metadata": {"name": PLACEMENT, "namespace": NS},
        "spec": {"clusterSets": ["default"],
                 "predicates": [{"requiredClusterSelector": {"labelSelector": {"matchLabels": {FLEET_LABEL: "fleet"}}}}]},
    });
    post(resource(CLUSTER_GROUP, "v1beta1", "Placement", "placements"), Some(NS), placement).await
}

/// Waits until the placement's decisions name `n` clusters.
async fn decided(client: &kube::Client, n: usize) -> anyhow::Result<()> {
    let ar = resource(CLUSTER_GROUP, "v1beta1", "PlacementDecision", "placementdecisions");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &ar);
    let lp = ListParams::default().labels(&format!("{CLUSTER_GROUP}/placement={PLACEMENT}"));
    wait_for("the placement's decisions", || async {
        let list = api.list(&lp).await?;
        let count: usize = list
            .items
            .iter()
            .filter_map(|d| d.data.pointer("/status/decisions").and_then(Value::as_array))
            .map(Vec::len)
            .sum();
        Ok(count == n)
    })
    .await
}
