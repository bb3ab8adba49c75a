//! The add-on manager end to end over REST: a ClusterManagementAddOn's install strategy. With
//! `Placements`, a ManagedClusterAddOn in each cluster its placement decides (owned by the
//! add-on as controller, empty spec), following the placement as clusters are relabelled, and
//! removed with the add-on; `Manual` and `lifecycle: self` add-ons are left to their users. Both
//! API versions of the add-on kinds are used.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::ensure;
use ocm_conformance::hub::{Backend, TestHub, eventually};
use ocm_conformance::kubectl::{MCL, cluster, create, delete, item_names, merge_patch, stored};
use serde_json::{Value, json};

const ADDON_V1A1: &str = "/apis/addon.open-cluster-management.io/v1alpha1";
const ADDON_V1B1: &str = "/apis/addon.open-cluster-management.io/v1beta1";
const CLUSTER_V1B1: &str = "/apis/cluster.open-cluster-management.io/v1beta1";
const CLUSTER_V1B2: &str = "/apis/cluster.open-cluster-management.io/v1beta2";
const UNREACHABLE: &str = "cluster.open-cluster-management.io/unreachable";
const WAIT: Duration = Duration::from_secs(20);

/// The clusters holding a ManagedClusterAddOn named `addon` (read at v1beta1), with each one.
async fn installed(
    hub: &TestHub,
    http: &reqwest::Client,
    addon: &str,
) -> anyhow::Result<Vec<(String, Value)>> {
    let list = stored(hub, http, &format!("{ADDON_V1B1}/managedclusteraddons")).await?;
    Ok(list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["metadata"]["name"] == addon && a["metadata"]["deletionTimestamp"].is_null())
        .map(|a| (a["metadata"]["namespace"].as_str().unwrap_or_default().to_owned(), a.clone()))
        .collect())
}

/// Waits until the clusters holding `addon` are exactly `want`.
async fn until_installed(
    hub: &TestHub,
    http: &reqwest::Client,
    addon: &str,
    want: &[&str],
) -> anyhow::Result<Vec<(String, Value)>> {
    let want: BTreeSet<String> = want.iter().map(|c| (*c).to_owned()).collect();
    eventually(&format!("{addon} installed on {want:?}"), WAIT, || async {
        let now = installed(hub, http, addon).await?;
        let clusters: BTreeSet<String> = now.iter().map(|(c, _)| c.clone()).collect();
        Ok((clusters == want).then_some(now))
    })
    .await
}

async fn relabel(hub: &TestHub, http: &reqwest::Client, c: &str, env: &str) -> anyhow::Result<()> {
    merge_patch(hub, http, &format!("{MCL}/{c}"), json!({"metadata": {"labels": {"env": env}}}))
        .await?;
    Ok(())
}

/// Three accepted clusters (two `env=prod`), the `global` set bound to `addons`, and the
/// placement `prod` there selecting `env=prod`.
async fn fleet(hub: &TestHub, http: &reqwest::Client) -> anyhow::Result<()> {
    for (c, env) in [("c1", "prod"), ("c2", "prod"), ("c3", "dev")] {
        create(hub, http, MCL, cluster(c, json!({"env": env}))).await?;
    }
    for c in ["c1", "c2", "c3"] {
        eventually(&format!("namespace {c}"), WAIT, || async {
            let r = http.get(format!("{}/api/v1/namespaces/{c}", hub.url)).send().await?;
            Ok(r.status().is_success().then_some(()))
        })
        .await?;
    }
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "addons"}});
    create(hub, http, "/api/v1/namespaces", ns).await?;
    let binding = json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta2",
        "kind": "ManagedClusterSetBinding",
        "metadata": {"name": "global", "namespace": "addons"},
        "spec": {"clusterSet": "global"},
    });
    let bindings = format!("{CLUSTER_V1B2}/namespaces/addons/managedclustersetbindings");
    create(hub, http, &bindings, binding).await?;
    let placement = json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
        "metadata": {"name": "prod", "namespace": "addons"},
        "spec": {
            "tolerations": [{"key": UNREACHABLE, "operator": "Exists"}],
            "predicates": [{"requiredClusterSelector":
                {"labelSelector": {"matchLabels": {"env": "prod"}}}}],
        },
    });
    create(hub, http, &format!("{CLUSTER_V1B1}/namespaces/addons/placements"), placement).await?;
    Ok(())
}

fn placements_addon(name: &str, annotations: Value) -> Value {
    json!({
        "apiVersion": "addon.open-cluster-management.io/v1beta1",
        "kind": "ClusterManagementAddOn",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "addOnMeta": {"displayName": name},
            "installStrategy": {"type": "Placements",
                "placements": [{"namespace": "addons", "name": "prod"}]},
        },
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placements_install_follows_the_placement_and_manual_is_left_alone() -> anyhow::Result<()> {
    let hub = TestHub::start_with_controllers(Backend::Memory).await?;
    let http = hub.http()?;
    fleet(&hub, &http).await?;

    // A Placements add-on (created at v1beta1) lands on the two prod clusters, owned by it.
    let cmas = format!("{ADDON_V1B1}/clustermanagementaddons");
    let cma = create(&hub, &http, &cmas, placements_addon("demo", json!({}))).await?;
    let uid = cma["metadata"]["uid"].clone();
    for (c, mca) in until_installed(&hub, &http, "demo", &["c1", "c2"]).await? {
        let owners = &mca["metadata"]["ownerReferences"];
        ensure!(
            owners
                == &json!([{"apiVersion": "addon.open-cluster-management.io/v1alpha1",
                "kind": "ClusterManagementAddOn", "name": "demo", "uid": uid,
                "controller": true, "blockOwnerDeletion": true}]),
            "{c}: owners {owners}"
        );
        ensure!(mca["spec"].as_object().is_none_or(|s| s.is_empty()), "{c}: spec {mca}");
    }

    // The placement's changes: c3 joins, c1 leaves.
    relabel(&hub, &http, "c3", "prod").await?;
    until_installed(&hub, &http, "demo", &["c1", "c2", "c3"]).await?;
    relabel(&hub, &http, "c1", "dev").await?;
    until_installed(&hub, &http, "demo", &["c2", "c3"]).await?;

    // A ManagedClusterAddOn deleted by hand on a selected cluster comes back.
    delete(&hub, &http, &format!("{ADDON_V1A1}/namespaces/c2/managedclusteraddons/demo")).await?;
    until_installed(&hub, &http, "demo", &["c2", "c3"]).await?;

    // A Manual add-on (created at v1alpha1) gets nothing; one its user enables stays.
    let manual = json!({
        "apiVersion": "addon.open-cluster-management.io/v1alpha1",
        "kind": "ClusterManagementAddOn",
        "metadata": {"name": "manual"},
        "spec": {"installStrategy": {"type": "Manual"}},
    });
    create(&hub, &http, &format!("{ADDON_V1A1}/clustermanagementaddons"), manual).await?;
    let enabled = json!({
        "apiVersion": "addon.open-cluster-management.io/v1alpha1",
        "kind": "ManagedClusterAddOn",
        "metadata": {"name": "manual", "namespace": "c1"},
        "spec": {"installNamespace": "manual-agent"},
    });
    create(&hub, &http, &format!("{ADDON_V1A1}/namespaces/c1/managedclusteraddons"), enabled)
        .await?;
    // A self-managed add-on's Placements strategy is its own business.
    let own =
        placements_addon("own", json!({"addon.open-cluster-management.io/lifecycle": "self"}));
    create(&hub, &http, &cmas, own).await?;
    // The controller has run since: another change to `demo`'s placement has landed.
    relabel(&hub, &http, "c1", "prod").await?;
    until_installed(&hub, &http, "demo", &["c1", "c2", "c3"]).await?;
    until_installed(&hub, &http, "manual", &["c1"]).await?;
    until_installed(&hub, &http, "own", &[]).await?;

    // The add-on's removal takes its ManagedClusterAddOns with it.
    delete(&hub, &http, &format!("{cmas}/demo")).await?;
    until_installed(&hub, &http, "demo", &[]).await?;
    let left = stored(&hub, &http, &format!("{ADDON_V1B1}/managedclusteraddons")).await?;
    ensure!(item_names(&left) == ["manual"], "left: {left}");
    Ok(())
}
