//! The `mwrs` mode: ManifestWorkReplicaSet rollouts over the simulated fleet.
//!
//! The fleet: the joined clusters labelled `fleet-sim=mwrs` (with a `leaseDurationSeconds` of
//! an hour, so that a cluster whose agent ran to `Available` stays so for the whole run while
//! the lease agents are stopped), run to `Available` a wave at a time, each with a simulated
//! work agent on its own gRPC connection (`work_agent.rs`); a namespace with a
//! ManagedClusterSetBinding of the `default` set and a Placement selecting the label, decided by
//! the hub's placement controller (PlacementDecisions of 100 clusters).
//!
//! The scenarios, in the order given by `--scenarios`:
//! - `all`: a set of one ConfigMap (rendered per cluster) with `All` and `RollbackAll`: from its
//!   create until every cluster's work exists, until the works' status says every one is
//!   `Applied` at its generation, and until the set's status says so (`PlacementRolledOut`
//!   True/Complete, summary applied = clusters); the hub's RSS before and after, per work.
//! - `rollback` (after `all`, on its set): a template change the agents refuse (`Applied`
//!   False); until the set records the failure (`abortedTime`), and until every work is back at
//!   the previous revision and `Applied` there.
//! - `progressive`: a set with `Progressive` at `maxConcurrency` 10 %, no `minSuccessTime`: the
//!   same times as `all`.
//!
//! Each set is deleted after its scenarios; the time until its works are gone is printed too.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::StreamExt as _;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch};
use kube::api::{ListParams, PatchParams, PostParams};
use ocm_agent::grpc::Endpoint;
use ocm_agent::state::DataDir;
use serde_json::{Value, json};

use super::tracker::{Milestone, SetSeen, Tracker, sets_resource};
use super::{Hub, hub_usage, run_until_available, work_agent};

/// The namespace of the sets and the placement.
const NS: &str = "fleet-sim";
/// The label that puts a cluster in the fleet the placement selects.
const FLEET_LABEL: &str = "fleet-sim";
/// The placement's name.
const PLACEMENT: &str = "fleet";
/// The longest any milestone is waited for.
const WITHIN: Duration = Duration::from_secs(600);
/// REST writes of the set-up in flight at once.
const IN_FLIGHT: usize = 64;

/// The mode's figures for one scenario.
struct Row {
    scenario: String,
    exist: Duration,
    applied: Duration,
    status: Duration,
    cpu: f64,
    rss: Option<(u64, u64)>,
    deleted: Option<Duration>,
}

/// Runs the fleet set-up and the scenarios over the agents of `dirs`.
pub(super) async fn run(
    hub: &Hub,
    client: &kube::Client,
    ca: &str,
    dirs: &[DataDir],
    pid: u32,
    wave: usize,
    scenarios: &[String],
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
    let mut rows: Vec<Row> = Vec::new();
    let mut rollback = None;
    // The set still standing: `rollback` needs `all`'s; any other scenario starts without one.
    let mut left: Option<&str> = None;
    for s in scenarios {
        if s != "rollback" {
            if let Some(set) = left.take() {
                finish(client, pid, n, &mut rows, set).await?;
            }
        }
        match s.as_str() {
            "all" => {
                let all = json!({"type": "All", "failureStrategy": "RollbackAll"});
                rows.push(roll_out(client, pid, n, "all", all, true).await?);
                left = Some("all");
            }
            "rollback" => {
                anyhow::ensure!(left == Some("all"), "rollback runs on the set `all` makes");
                rollback = Some(roll_back(client, pid, n).await?);
            }
            "progressive" => {
                let p = json!({"type": "Progressive", "progressive": {"maxConcurrency": "10%"}});
                rows.push(roll_out(client, pid, n, "progressive", p, false).await?);
                left = Some("progressive");
            }
            other => anyhow::bail!("--scenarios: {other:?} is not all, rollback or progressive"),
        }
    }
    if let Some(set) = left {
        finish(client, pid, n, &mut rows, set).await?;
    }
    print(n, &rows, rollback.as_ref());
    Ok(())
}

/// Deletes the set `set` and notes the time on its row.
async fn finish(
    client: &kube::Client,
    pid: u32,
    n: usize,
    rows: &mut [Row],
    set: &str,
) -> anyhow::Result<()> {
    let deleted = delete(client, pid, n, set).await?;
    if let Some(row) = rows.iter_mut().rev().find(|r| r.scenario == set) {
        row.deleted = Some(deleted);
    }
    Ok(())
}

fn names(dirs: &[DataDir]) -> anyhow::Result<Vec<String>> {
    dirs.iter().map(|d| Ok(d.identity()?.context("identity")?.cluster_name)).collect()
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

const CLUSTER_GROUP: &str = "cluster.open-cluster-management.io";

/// Labels every cluster into the fleet and gives it an hour's lease.
async fn label(client: &kube::Client, clusters: &[String]) -> anyhow::Result<()> {
    let ar = resource(CLUSTER_GROUP, "v1", "ManagedCluster", "managedclusters");
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let patch = json!({"metadata": {"labels": {FLEET_LABEL: "mwrs"}},
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

/// Open Subscribe streams on the hub (`ocm_grpc_subscriptions`, every data type).
async fn subscriptions(client: &kube::Client) -> anyhow::Result<f64> {
    let req = http::Request::get("/metrics").body(Vec::new())?;
    let samples = ocm_conformance::prom::samples(&client.request_text(req).await?)?;
    Ok(samples.iter().filter(|s| s.name == "ocm_grpc_subscriptions").map(|s| s.value).sum())
}

/// Polls `done` every 100 ms until it is true, for up to [`WITHIN`].
async fn wait_for<F, Fut>(what: &str, done: F) -> anyhow::Result<()>
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
                 "predicates": [{"requiredClusterSelector": {"labelSelector": {"matchLabels": {FLEET_LABEL: "mwrs"}}}}]},
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

/// The one ConfigMap of the sets' template, rendered per cluster; refused by the simulated
/// agents when `fail`.
fn configmap(v: &str, fail: bool) -> Value {
    let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "fleet-sim", "namespace": "default"},
        "data": {"v": v, "cluster": "{{ .clusterName }}"}});
    if fail {
        cm["metadata"]["annotations"] = json!({work_agent::FAIL: "true"});
    }
    cm
}

fn sets(client: &kube::Client) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), NS, &sets_resource())
}

/// Whether the set's status says every cluster runs `revision` and is applied.
fn complete(s: &SetSeen, revision: &str, n: usize) -> bool {
    s.update_revision == revision
        && s.rolled_out == ("True".to_owned(), "Complete".to_owned())
        && s.applied == n as i64
}

/// Creates the set `name` with `strategy` and times it until complete; with `measure_rss`, the
/// hub's RSS before the create and once complete.
async fn roll_out(
    client: &kube::Client,
    pid: u32,
    n: usize,
    name: &str,
    strategy: Value,
    measure_rss: bool,
) -> anyhow::Result<Row> {
    let tracker = Tracker::start(client, NS, name, n, pid);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (cpu0, rss0) = hub_usage(pid)?;
    let set = json!({
        "apiVersion": "work.open-cluster-management.io/v1alpha1", "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"placementRefs": [{"name": PLACEMENT, "rolloutStrategy": strategy}],
                 "manifestWorkTemplate": {"workload": {"manifests": [configmap("1", false)]}}},
    });
    let t0 = Instant::now();
    sets(client).create(&PostParams::default(), &serde_json::from_value(set)?).await?;
    let (_, s) = tracker
        .set_status("an update revision", t0, WITHIN, |s| !s.update_revision.is_empty())
        .await?;
    let rev = s.update_revision;
    let exist = tracker.reached(&Milestone::AllExist, t0, WITHIN).await?;
    let applied = tracker.reached(&Milestone::AllApplied(rev.clone()), t0, WITHIN).await?;
    let (status, _) = tracker.set_status("complete", t0, WITHIN, |s| complete(s, &rev, n)).await?;
    let (cpu1, _) = hub_usage(pid)?;
    let rss = if measure_rss {
        tokio::time::sleep(Duration::from_secs(3)).await;
        Some((rss0, hub_usage(pid)?.1))
    } else {
        None
    };
    Ok(Row {
        scenario: name.to_owned(),
        exist: exist - t0,
        applied: applied - t0,
        status: status - t0,
        cpu: cpu1 - cpu0,
        rss,
        deleted: None,
    })
}

/// The rollback scenario's figures.
struct Rollback {
    aborted: Duration,
    back: Duration,
    back_applied: Duration,
    failed_seen: usize,
    cpu: f64,
}

/// Changes the template of the set `all` to one the agents refuse; times the rollback.
async fn roll_back(client: &kube::Client, pid: u32, n: usize) -> anyhow::Result<Rollback> {
    let tracker = Tracker::start(client, NS, "all", n, pid);
    let since = Instant::now();
    let (_, good) =
        tracker.set_status("the set", since, WITHIN, |s| !s.current_revision.is_empty()).await?;
    let good = good.current_revision;
    // The works' watch has listed them all before the change.
    tracker.reached(&Milestone::AllApplied(good.clone()), since, WITHIN).await?;
    let (cpu0, _) = hub_usage(pid)?;
    let patch = json!({"spec": {"manifestWorkTemplate": {"workload": {"manifests": [configmap("2", true)]}}}});
    let t0 = Instant::now();
    sets(client).patch("all", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    let (aborted, _) = tracker
        .set_status("the rollout aborted", t0, WITHIN, |s| s.update_revision != good && s.aborted)
        .await?;
    let failed_seen = tracker.failed();
    let back = tracker.reached(&Milestone::AllAt(good.clone()), t0, WITHIN).await?;
    let back_applied = tracker.reached(&Milestone::AllApplied(good), t0, WITHIN).await?;
    let (cpu1, _) = hub_usage(pid)?;
    Ok(Rollback {
        aborted: aborted - t0,
        back: back - t0,
        back_applied: back_applied - t0,
        failed_seen,
        cpu: cpu1 - cpu0,
    })
}

/// Deletes the set `name` (background cascade) and times it until its works are gone.
async fn delete(client: &kube::Client, pid: u32, n: usize, name: &str) -> anyhow::Result<Duration> {
    let tracker = Tracker::start(client, NS, name, n, pid);
    // The works' watch has listed them all before the delete.
    tracker.reached(&Milestone::AllExist, Instant::now(), WITHIN).await?;
    let t0 = Instant::now();
    sets(client).delete(name, &DeleteParams::default()).await?;
    let gone = tracker.reached(&Milestone::NoneLeft, t0, WITHIN).await?;
    Ok(gone - t0)
}

fn print(n: usize, rows: &[Row], rollback: Option<&Rollback>) {
    let s = |d: Duration| format!("{:.2} s", d.as_secs_f64());
    println!(
        "| clusters | set | all works exist | all Applied (works' status) | set status Complete | hub CPU s | hub RSS before MiB | after MiB | per work KiB | set deleted → works gone |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let (before, after, per) = match r.rss {
            Some((b, a)) => (
                format!("{:.0}", b as f64 / 1024.0),
                format!("{:.0}", a as f64 / 1024.0),
                format!("{:.1}", a.saturating_sub(b) as f64 / n as f64),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        println!(
            "| {n} | {} | {} | {} | {} | {:.1} | {before} | {after} | {per} | {} |",
            r.scenario,
            s(r.exist),
            s(r.applied),
            s(r.status),
            r.cpu,
            r.deleted.map_or("-".into(), s)
        );
    }
    if let Some(r) = rollback {
        println!();
        println!(
            "| clusters | change → rollout aborted | → every work back at the previous revision | → and Applied there | works seen failed at the abort | hub CPU s |"
        );
        println!("|---:|---:|---:|---:|---:|---:|");
        println!(
            "| {n} | {} | {} | {} | {} | {:.1} |",
            s(r.aborted),
            s(r.back),
            s(r.back_applied),
            r.failed_seen,
            r.cpu
        );
    }
}
