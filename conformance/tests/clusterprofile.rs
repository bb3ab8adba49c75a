//! ClusterProfiles (SIG-multicluster `multicluster.x-k8s.io/v1alpha1`) end to end over REST
//! against a hub running its controllers: a namespace whose ManagedClusterSetBinding is Bound
//! gets a profile per member cluster with OCM's labels, spec and status (version, claims as
//! properties, `ControlPlaneHealthy` and `Joined` mirrored from the cluster, the access provider
//! naming the hub's cluster proxy and CA as cluster-info publishes them), each read-back valid
//! against the CRD. Profiles follow the cluster, disappear when the binding goes or the cluster
//! leaves the set, come back when a user deletes them, and are not rewritten by changes they
//! do not show (allocatable, a Lease renewal). A profile of another cluster manager is left
//! alone.

use std::time::Duration;

use anyhow::{Context as _, ensure};
use ocm_conformance::fidelity::assert_matches_crd;
use ocm_conformance::hub::{Backend, TestHub, eventually};
use ocm_conformance::kubectl::{MCL, cluster, create, delete, merge_patch, stored};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);
const PROFILES: &str = "/apis/multicluster.x-k8s.io/v1alpha1/namespaces/apps/clusterprofiles";
const SETS: &str = "/apis/cluster.open-cluster-management.io/v1beta2/managedclustersets";
const BINDINGS: &str =
    "/apis/cluster.open-cluster-management.io/v1beta2/namespaces/apps/managedclustersetbindings";
const OURS: &str = "x-k8s.io/cluster-manager";
const SET_LABEL: &str = "cluster.open-cluster-management.io/clusterset";

/// OCM's profiles in `apps` (labelled as OCM's, not being deleted), by name, each read back
/// with GET and checked against the CRD (one deleted between the list and its GET is gone).
async fn profiles(hub: &TestHub, http: &reqwest::Client) -> anyhow::Result<Vec<(String, Value)>> {
    let list = stored(hub, http, PROFILES).await?;
    let mut out = Vec::new();
    for item in list["items"].as_array().into_iter().flatten() {
        let name = item["metadata"]["name"].as_str().context("name")?;
        if item["metadata"]["labels"][OURS] != "open-cluster-management"
            || !item["metadata"]["deletionTimestamp"].is_null()
        {
            continue;
        }
        let r = http.get(format!("{}{PROFILES}/{name}", hub.url)).send().await?;
        if r.status() == 404 {
            continue; // deleted since the list
        }
        let one: Value = r.json().await?;
        assert_matches_crd(&one)?;
        out.push((name.to_owned(), one));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Waits until OCM's profiles in `apps` are exactly `want`, and returns them.
async fn until_profiles(
    hub: &TestHub,
    http: &reqwest::Client,
    want: &[&str],
) -> anyhow::Result<Vec<(String, Value)>> {
    eventually(&format!("profiles {want:?}"), WAIT, || async {
        let now = profiles(hub, http).await?;
        Ok((now.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>() == want).then_some(now))
    })
    .await
}

/// Waits until profile `name` satisfies `check`, and returns it.
async fn until_profile(
    hub: &TestHub,
    http: &reqwest::Client,
    name: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> anyhow::Result<Value> {
    eventually(&format!("profile {name}: {what}"), WAIT, || async {
        let r = http.get(format!("{}{PROFILES}/{name}", hub.url)).send().await?;
        if r.status() == 404 {
            return Ok(None);
        }
        let p: Value = r.json().await?;
        assert_matches_crd(&p)?;
        Ok(check(&p).then_some(p))
    })
    .await
}

/// A profile's condition `type_` as (status, reason, message).
fn condition(p: &Value, type_: &str) -> Option<(String, String, String)> {
    let c = p["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == type_)?;
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
    Some((s("status"), s("reason"), s("message")))
}

fn is(c: Option<(String, String, String)>, status: &str, reason: &str, message: &str) -> bool {
    c.is_some_and(|(s, r, m)| s == status && r == reason && m == message)
}

/// Sets the condition `type_` in a ManagedCluster status (as `meta.SetStatusCondition`).
fn set_condition(status: &mut Value, type_: &str, s: &str, reason: &str, message: &str) {
    let new = json!({"type": type_, "status": s, "reason": reason, "message": message,
        "lastTransitionTime": "2026-01-02T03:04:05Z"});
    if !status["conditions"].is_array() {
        status["conditions"] = json!([]);
    }
    let list = status["conditions"].as_array_mut().expect("an array");
    match list.iter_mut().find(|c| c["type"] == type_) {
        Some(c) => *c = new,
        None => list.push(new),
    }
}

/// Changes a ManagedCluster's status as its agent would: read, change, PUT at the version read,
/// again on a conflict (the hub's cluster controller writes conditions too).
async fn report(
    hub: &TestHub,
    http: &reqwest::Client,
    name: &str,
    change: impl Fn(&mut Value),
) -> anyhow::Result<()> {
    eventually(&format!("status of {name} written"), WAIT, || async {
        let mut mc = stored(hub, http, &format!("{MCL}/{name}")).await?;
        if !mc["status"].is_object() {
            mc["status"] = json!({});
        }
        change(&mut mc["status"]);
        let r = http.put(format!("{}{MCL}/{name}/status", hub.url)).json(&mc).send().await?;
        match r.status().as_u16() {
            200 => Ok(Some(())),
            409 => Ok(None),
            code => anyhow::bail!("PUT {name}/status: {code} {}", r.text().await?),
        }
    })
    .await
}

/// The hub's URL and CA data as `kube-public/cluster-info` publishes them.
async fn cluster_info(hub: &TestHub, http: &reqwest::Client) -> anyhow::Result<(String, String)> {
    let cm = stored(hub, http, "/api/v1/namespaces/kube-public/configmaps/cluster-info").await?;
    let kubeconfig: Value =
        serde_json::from_str(cm["data"]["kubeconfig"].as_str().context("kubeconfig")?)?;
    let c = &kubeconfig["clusters"][0]["cluster"];
    let server = c["server"].as_str().context("server")?.to_owned();
    let ca = c["certificate-authority-data"].as_str().context("CA")?.to_owned();
    Ok((server, ca))
}

fn binding(set: &str) -> Value {
    json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta2",
        "kind": "ManagedClusterSetBinding",
        "metadata": {"name": set, "namespace": "apps"},
        "spec": {"clusterSet": set},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profiles_follow_bound_sets_and_their_clusters() -> anyhow::Result<()> {
    let hub = TestHub::start_with_controllers(Backend::Memory).await?;
    let http = hub.http()?;
    // c1 in `default` (admission's), c2 and c3 in `prod`.
    create(&hub, &http, MCL, cluster("c1", json!({}))).await?;
    for c in ["c2", "c3"] {
        create(&hub, &http, MCL, cluster(c, json!({SET_LABEL: "prod"}))).await?;
    }
    let set = json!({"apiVersion": "cluster.open-cluster-management.io/v1beta2",
        "kind": "ManagedClusterSet", "metadata": {"name": "prod"}, "spec": {}});
    create(&hub, &http, SETS, set).await?;
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}});
    create(&hub, &http, "/api/v1/namespaces", ns).await?;
    // A profile of another cluster manager, which OCM's producer never touches.
    let foreign = json!({"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
        "metadata": {"name": "elsewhere", "namespace": "apps",
            "labels": {OURS: "someone-else"}},
        "spec": {"clusterManager": {"name": "someone-else"}}});
    let foreign = create(&hub, &http, PROFILES, foreign).await?;

    // Binding `prod` to `apps`: once Bound, a profile per member of the set.
    create(&hub, &http, BINDINGS, binding("prod")).await?;
    let found = until_profiles(&hub, &http, &["c2", "c3"]).await?;
    let (server, ca) = cluster_info(&hub, &http).await?;
    for (name, p) in &found {
        ensure!(
            p["metadata"]["labels"]
                == json!({OURS: "open-cluster-management",
                    "open-cluster-management.io/cluster-name": name,
                    "multicluster.x-k8s.io/clusterset": "prod"}),
            "{name}: labels {p}"
        );
        ensure!(
            p["spec"]
                == json!({"displayName": name,
                    "clusterManager": {"name": "open-cluster-management"}}),
            "{name}: spec {p}"
        );
        ensure!(p["metadata"]["ownerReferences"].is_null(), "{name}: owners {p}");
    }
    // The status: the access provider (the hub's proxy for the cluster, the hub's CA), and
    // Unknown conditions while the cluster reports none.
    let p = until_profile(&hub, &http, "c2", "status written", |p| {
        p["status"]["accessProviders"].is_array()
    })
    .await?;
    let want = json!([{"name": "open-cluster-management", "cluster": {
        "server": format!("{server}/apis/cluster.open-cluster-management.io/v1/managedclusters/c2/proxy"),
        "certificate-authority-data": ca}}]);
    ensure!(p["status"]["accessProviders"] == want, "access providers {p}");
    ensure!(condition(&p, "ControlPlaneHealthy").is_some_and(|(s, _, _)| s == "Unknown"), "{p}");
    ensure!(condition(&p, "Joined").is_some_and(|(s, _, _)| s == "Unknown"), "{p}");

    // The cluster reports itself joined and available, its version and claims.
    report(&hub, &http, "c2", |s| {
        set_condition(s, "ManagedClusterJoined", "True", "ManagedClusterJoined", "joined");
        set_condition(
            s,
            "ManagedClusterConditionAvailable",
            "True",
            "ManagedClusterAvailable",
            "Managed cluster is available",
        );
        s["version"] = json!({"kubernetes": "v1.31.2"});
        s["clusterClaims"] = json!([{"name": "id.k8s.io", "value": "c2-uid"},
            {"name": "region.open-cluster-management.io", "value": "eu-west-1"}]);
    })
    .await?;
    let p = until_profile(&hub, &http, "c2", "available, joined, versioned, claimed", |p| {
        is(
            condition(p, "ControlPlaneHealthy"),
            "True",
            "ManagedClusterAvailable",
            "Managed cluster is available",
        ) && is(condition(p, "Joined"), "True", "ManagedClusterJoined", "joined")
            && p["status"]["version"] == json!({"kubernetes": "v1.31.2"})
            && p["status"]["properties"]
                == json!([{"name": "id.k8s.io", "value": "c2-uid"},
                    {"name": "region.open-cluster-management.io", "value": "eu-west-1"}])
    })
    .await?;
    ensure!(p["status"]["accessProviders"] == want, "access providers kept: {p}");

    // Availability, version and claims follow the cluster.
    report(&hub, &http, "c2", |s| {
        set_condition(
            s,
            "ManagedClusterConditionAvailable",
            "Unknown",
            "ManagedClusterLeaseUpdateStopped",
            "Registration agent stopped updating its lease.",
        );
        s["version"] = json!({"kubernetes": "v1.32.0"});
        s["clusterClaims"] = json!([{"name": "id.k8s.io", "value": "c2-uid"}]);
    })
    .await?;
    let p = until_profile(&hub, &http, "c2", "unknown, v1.32.0, one claim", |p| {
        is(
            condition(p, "ControlPlaneHealthy"),
            "Unknown",
            "ManagedClusterLeaseUpdateStopped",
            "Registration agent stopped updating its lease.",
        ) && p["status"]["version"]["kubernetes"] == "v1.32.0"
            && p["status"]["properties"] == json!([{"name": "id.k8s.io", "value": "c2-uid"}])
    })
    .await?;

    // Changes a profile does not show write nothing: c2's allocatable, and its Lease renewed
    // (which the cluster controller judges, writing its clock condition). A change that c3's
    // profile shows, made after them, lands; the run writing it looks at c2 first (runs go by
    // cluster name), so by then c2's profile would have been rewritten.
    report(&hub, &http, "c2", |s| {
        s["allocatable"] = json!({"cpu": "4", "memory": "8Gi"});
        s["capacity"] = json!({"cpu": "4", "memory": "8Gi"});
    })
    .await?;
    let lease_path = "/apis/coordination.k8s.io/v1/namespaces/c2/leases/managed-cluster-lease";
    let mut lease = eventually("c2's Lease", WAIT, || async {
        let r = http.get(format!("{}{lease_path}", hub.url)).send().await?;
        Ok(if r.status() == 200 { Some(r.json::<Value>().await?) } else { None })
    })
    .await?;
    let renewed = ocm_apiserver::machinery::object::now_rfc3339().replace('Z', ".000000Z");
    lease["spec"]["renewTime"] = json!(renewed);
    let r = http.put(format!("{}{lease_path}", hub.url)).json(&lease).send().await?;
    ensure!(r.status() == 200, "lease renewal: {}", r.text().await?);
    report(&hub, &http, "c3", |s| {
        s["clusterClaims"] = json!([{"name": "id.k8s.io", "value": "c3-uid"}]);
    })
    .await?;
    until_profile(&hub, &http, "c3", "its claim", |p| {
        p["status"]["properties"] == json!([{"name": "id.k8s.io", "value": "c3-uid"}])
    })
    .await?;
    let c2_after = stored(&hub, &http, &format!("{PROFILES}/c2")).await?;
    assert_matches_crd(&c2_after)?;
    ensure!(
        c2_after["metadata"]["resourceVersion"] == p["metadata"]["resourceVersion"],
        "c2's profile was rewritten:\nbefore {p}\nafter {c2_after}"
    );

    // A profile a user deletes comes back; one a user changes is put back.
    let uid = p["metadata"]["uid"].clone();
    delete(&hub, &http, &format!("{PROFILES}/c2")).await?;
    let back = until_profile(&hub, &http, "c2", "recreated with its status", |p| {
        p["metadata"]["uid"] != uid && p["status"]["version"]["kubernetes"] == "v1.32.0"
    })
    .await?;
    ensure!(back["metadata"]["labels"]["multicluster.x-k8s.io/clusterset"] == "prod", "{back}");
    merge_patch(&hub, &http, &format!("{PROFILES}/c3"), json!({"spec": {"displayName": "mine"}}))
        .await?;
    until_profile(&hub, &http, "c3", "display name put back", |p| p["spec"]["displayName"] == "c3")
        .await?;

    // c3 leaves `prod` for `default`: its profile goes. Binding `default` too brings c1 and c3,
    // labelled with their set.
    merge_patch(
        &hub,
        &http,
        &format!("{MCL}/c3"),
        json!({"metadata": {"labels": {SET_LABEL: "default"}}}),
    )
    .await?;
    until_profiles(&hub, &http, &["c2"]).await?;
    create(&hub, &http, BINDINGS, binding("default")).await?;
    let found = until_profiles(&hub, &http, &["c1", "c2", "c3"]).await?;
    for (name, p) in &found {
        let set = if name == "c2" { "prod" } else { "default" };
        ensure!(p["metadata"]["labels"]["multicluster.x-k8s.io/clusterset"] == set, "{p}");
    }

    // The binding's deletion takes its set's profiles.
    delete(&hub, &http, &format!("{BINDINGS}/prod")).await?;
    until_profiles(&hub, &http, &["c1", "c3"]).await?;
    delete(&hub, &http, &format!("{BINDINGS}/default")).await?;
    until_profiles(&hub, &http, &[]).await?;

    // The other manager's profile is as it was created.
    let left = stored(&hub, &http, &format!("{PROFILES}/elsewhere")).await?;
    assert_matches_crd(&left)?;
    ensure!(
        left["metadata"]["resourceVersion"] == foreign["metadata"]["resourceVersion"],
        "another manager's profile was changed: {left}"
    );
    hub.stop().await;
    Ok(())
}
