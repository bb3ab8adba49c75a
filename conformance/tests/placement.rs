//! Placement end to end (ocm.md §5): Placements applied with kubectl to a hub running its
//! controllers, the PlacementDecisions and status read back, and the scheduler following
//! changes to clusters (labels, claims, allocatable), tolerations, bindings and the placement
//! itself; more than 100 clusters sliced into several decisions; deletion collects them.

use std::time::Duration;

use anyhow::ensure;
use ocm_conformance::hub::{Backend, TestHub, eventually};
use ocm_conformance::kubectl::{
    Kubectl, MCL, Printed, cluster, create, merge_patch, skip, stored, write_manifest,
};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);
const DECISIONS: &str =
    "/apis/cluster.open-cluster-management.io/v1beta1/namespaces/apps/placementdecisions";
const PLACEMENTS: &str =
    "/apis/cluster.open-cluster-management.io/v1beta1/namespaces/apps/placements";
const UNREACHABLE: &str = "cluster.open-cluster-management.io/unreachable";

async fn setup() -> anyhow::Result<Option<(TestHub, reqwest::Client, Kubectl)>> {
    if skip("the whole test") {
        return Ok(None);
    }
    let hub = TestHub::start_with_controllers(Backend::Memory).await?;
    let http = hub.http()?;
    let k = Kubectl::new(&hub)?;
    Ok(Some((hub, http, k)))
}

/// The clusters decided for placement `p` in `apps`, by decision object name then order.
async fn decided(hub: &TestHub, http: &reqwest::Client, p: &str) -> anyhow::Result<Vec<String>> {
    let list = stored(
        hub,
        http,
        &format!("{DECISIONS}?labelSelector=cluster.open-cluster-management.io%2Fplacement%3D{p}"),
    )
    .await?;
    let mut items = list["items"].as_array().cloned().unwrap_or_default();
    items.sort_by_key(|d| d["metadata"]["name"].as_str().unwrap_or("").to_owned());
    Ok(items
        .iter()
        .flat_map(|d| d["status"]["decisions"].as_array().cloned().unwrap_or_default())
        .filter_map(|d| d["clusterName"].as_str().map(str::to_owned))
        .collect())
}

/// Waits until `p` decides exactly `want`.
async fn until_decided(
    hub: &TestHub,
    http: &reqwest::Client,
    p: &str,
    want: &[&str],
) -> anyhow::Result<()> {
    let r = eventually(&format!("placement {p} deciding {want:?}"), WAIT, || async {
        Ok((decided(hub, http, p).await? == want).then_some(()))
    })
    .await;
    match r {
        Ok(()) => Ok(()),
        Err(e) => {
            let explained = stored(hub, http, &format!("{PLACEMENTS}/{p}/explain")).await?;
            let rows: Vec<&Value> =
                explained["rows"].as_array().into_iter().flatten().map(|r| &r["cells"]).collect();
            let last = decided(hub, http, p).await?;
            Err(e.context(format!("last decided: {last:?}; explained: {rows:?}")))
        }
    }
}

/// The placement's condition `type_`: (status, reason, message).
async fn placement_condition(
    hub: &TestHub,
    http: &reqwest::Client,
    p: &str,
    type_: &str,
) -> anyhow::Result<(String, String, String)> {
    let obj = stored(hub, http, &format!("{PLACEMENTS}/{p}")).await?;
    let c = obj["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == type_)
        .cloned()
        .unwrap_or(Value::Null);
    let s = |k: &str| c[k].as_str().unwrap_or("").to_owned();
    Ok((s("status"), s("reason"), s("message")))
}

async fn until_reason(
    hub: &TestHub,
    http: &reqwest::Client,
    p: &str,
    type_: &str,
    reason: &str,
) -> anyhow::Result<(String, String, String)> {
    eventually(&format!("{p} {type_} reason {reason}"), WAIT, || async {
        let c = placement_condition(hub, http, p, type_).await?;
        Ok((c.1 == reason).then_some(c))
    })
    .await
}

/// Applies, with kubectl, the namespace `apps`, a binding of `set` there and `placement` (YAML).
async fn apply_bound(k: &Kubectl, set: &str, placement: &str) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let manifests = write_manifest(
        &dir,
        "placement.yaml",
        &format!(
            r#"apiVersion: v1
kind: Namespace
metadata:
  name: apps
---
apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSetBinding
metadata:
  name: {set}
  namespace: apps
spec:
  clusterSet: {set}
---
{placement}"#
        ),
    )?;
    k.ok(&["apply", "-f", &manifests]).await?;
    Ok(())
}

/// `kubectl patch placement NAME -n apps --type=KIND -p PATCH`.
async fn patch_placement(k: &Kubectl, name: &str, kind: &str, patch: &str) -> anyhow::Result<()> {
    k.ok(&["patch", "placement", name, "-n", "apps", &format!("--type={kind}"), "-p", patch])
        .await?;
    Ok(())
}

/// Reports claims and allocatable CPU in a cluster's status, as its agent would.
async fn report(
    hub: &TestHub,
    http: &reqwest::Client,
    name: &str,
    region: &str,
    cpu: &str,
) -> anyhow::Result<()> {
    merge_patch(
        hub,
        http,
        &format!("{MCL}/{name}/status"),
        json!({"status": {
            "clusterClaims": [{"name": "region.open-cluster-management.io", "value": region}],
            "capacity": {"cpu": cpu, "memory": "16Gi"},
            "allocatable": {"cpu": cpu, "memory": "16Gi"},
        }}),
    )
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placements_follow_clusters_tolerations_and_bindings() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    for (name, env) in [("c1", "prod"), ("c2", "prod"), ("c3", "prod"), ("c4", "dev")] {
        create(&hub, &http, MCL, cluster(name, json!({"env": env}))).await?;
    }
    report(&hub, &http, "c1", "eu", "2").await?;
    report(&hub, &http, "c2", "us", "16").await?;
    report(&hub, &http, "c3", "eu", "8").await?;
    report(&hub, &http, "c4", "eu", "32").await?;
    apply_bound(
        &k,
        "default",
        &format!(
            r#"apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata:
  name: eu-prod
  namespace: apps
spec:
  numberOfClusters: 1
  predicates:
  - requiredClusterSelector:
      labelSelector:
        matchLabels:
          env: prod
      claimSelector:
        matchExpressions:
        - key: region.open-cluster-management.io
          operator: In
          values: [eu]
  tolerations:
  - key: {UNREACHABLE}
    operator: Exists
  prioritizerPolicy:
    mode: Exact
    configurations:
    - scoreCoordinate:
        builtIn: ResourceAllocatableCPU
"#
        ),
    )
    .await?;
    // c1 and c3 are the prod clusters in eu; c3 has more CPU.
    until_decided(&hub, &http, "eu-prod", &["c3"]).await?;
    let c =
        until_reason(&hub, &http, "eu-prod", "PlacementSatisfied", "AllDecisionsScheduled").await?;
    ensure!(c.0 == "True", "{c:?}");
    let m = placement_condition(&hub, &http, "eu-prod", "PlacementMisconfigured").await?;
    ensure!(
        m == (
            "False".into(),
            "Succeedconfigured".into(),
            "Placement configurations check pass".into()
        ),
        "{m:?}"
    );
    // kubectl prints the CRD's columns.
    let out = k.ok(&["get", "placements", "-n", "apps"]).await?;
    let table = Printed::parse(&out)?;
    ensure!(table.cell(0, "SUCCEEDED")? == "True", "{out}");
    ensure!(table.cell(0, "REASON")? == "AllDecisionsScheduled", "{out}");
    ensure!(table.cell(0, "SELECTEDCLUSTERS")? == "1", "{out}");
    // The decision object: OCM's name, labels and owner.
    let d = stored(&hub, &http, &format!("{DECISIONS}/eu-prod-decision-1")).await?;
    let labels = &d["metadata"]["labels"];
    ensure!(labels["cluster.open-cluster-management.io/placement"] == "eu-prod", "{d}");
    ensure!(labels["cluster.open-cluster-management.io/decision-group-index"] == "0", "{d}");
    ensure!(labels["cluster.open-cluster-management.io/decision-group-name"] == "", "{d}");
    let owner = &d["metadata"]["ownerReferences"][0];
    ensure!(owner["kind"] == "Placement" && owner["controller"] == true, "{d}");
    let p = stored(&hub, &http, &format!("{PLACEMENTS}/eu-prod")).await?;
    ensure!(p["status"]["numberOfSelectedClusters"] == 1, "{p}");
    ensure!(
        p["status"]["decisionGroups"]
            == json!([{"decisionGroupIndex": 0, "decisionGroupName": "", "decisions": ["eu-prod-decision-1"], "clusterCount": 1}]),
        "{p}"
    );

    // Why, on request: every cluster, the step that dropped it, its score.
    let raw = k.ok(&["get", "--raw", &format!("{PLACEMENTS}/eu-prod/explain")]).await?;
    let table: Value = serde_json::from_str(&raw)?;
    ensure!(table["kind"] == "Table" && table["apiVersion"] == "meta.k8s.io/v1", "{table}");
    let heads: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    ensure!(heads == ["Name", "Step", "Score", "Reason", "Scores"], "{heads:?}");
    let rows: Vec<(String, String, Value)> = table["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let cell = |i: usize| r["cells"][i].as_str().unwrap_or("").to_owned();
            (cell(0), cell(1), r["cells"][2].clone())
        })
        .collect();
    let want = [
        ("c3", "Selected", json!(100)),
        ("c1", "NumberOfClusters", json!(-100)),
        ("c2", "Predicate", Value::Null),
        ("c4", "Predicate", Value::Null),
    ];
    let want: Vec<(String, String, Value)> =
        want.iter().map(|(c, s, v)| ((*c).to_owned(), (*s).to_owned(), v.clone())).collect();
    ensure!(rows == want, "{rows:?}");
    let r = k.run(&["get", "--raw", &format!("{PLACEMENTS}/nope/explain")]).await?;
    ensure!(r.code != 0 && r.stderr.contains("NotFound"), "{r:?}");
    // And in events, as OCM records them, with the summary.
    let reasons = eventually("placement events", WAIT, || async {
        let out = k.ok(&["get", "events", "-n", "apps", "-o", "json"]).await?;
        let list: Value = serde_json::from_str(&out)?;
        let mut reasons: Vec<(String, String)> = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                let s = |k: &str| e[k].as_str().unwrap_or("").to_owned();
                (s("reason"), s("message"))
            })
            .collect();
        reasons.sort();
        Ok((reasons.len() >= 3).then_some(reasons))
    })
    .await?;
    ensure!(
        reasons
            == [
                ("DecisionCreate".to_owned(), "Decision eu-prod-decision-1 is created with placement eu-prod in namespace apps".to_owned()),
                ("Scheduled".to_owned(), "1 clusters selected; dropped: 2 by Predicate, 1 by NumberOfClusters (kubectl get --raw /apis/cluster.open-cluster-management.io/v1beta1/namespaces/apps/placements/eu-prod/explain)".to_owned()),
                ("ScoreUpdate".to_owned(), "c3:100 c1:-100".to_owned()),
            ],
        "{reasons:?}"
    );

    // Allocatable changes: c1 now has the most CPU.
    report(&hub, &http, "c1", "eu", "64").await?;
    until_decided(&hub, &http, "eu-prod", &["c1"]).await?;
    // A claim changes: c1 moves to the us; c3 is the only eu prod cluster left.
    report(&hub, &http, "c1", "us", "64").await?;
    until_decided(&hub, &http, "eu-prod", &["c3"]).await?;
    // A label changes: c3 is no longer prod; nothing matches.
    k.ok(&["label", "mcl", "c3", "env=dev", "--overwrite"]).await?;
    until_decided(&hub, &http, "eu-prod", &[]).await?;
    let c = until_reason(&hub, &http, "eu-prod", "PlacementSatisfied", "NoManagedClusterMatched")
        .await?;
    ensure!(c.0 == "False", "{c:?}");
    // Back, and then the placement itself changes: without the toleration, every cluster here
    // (none has an agent) carries the automatic unreachable taint.
    k.ok(&["label", "mcl", "c3", "env=prod", "--overwrite"]).await?;
    until_decided(&hub, &http, "eu-prod", &["c3"]).await?;
    patch_placement(&k, "eu-prod", "json", r#"[{"op":"remove","path":"/spec/tolerations"}]"#)
        .await?;
    until_decided(&hub, &http, "eu-prod", &[]).await?;
    // A misconfigured placement says why and, as OCM, selects nothing until it is fixed.
    patch_placement(&k, "eu-prod", "merge", r#"{"spec":{"tolerations":[{"key":"cluster.open-cluster-management.io/unreachable","operator":"Exists"}]}}"#).await?;
    until_decided(&hub, &http, "eu-prod", &["c3"]).await?;
    patch_placement(&k, "eu-prod", "merge", r#"{"spec":{"prioritizerPolicy":{"configurations":[{"scoreCoordinate":{"builtIn":"Nope"}}]}}}"#).await?;
    let m = until_reason(&hub, &http, "eu-prod", "PlacementMisconfigured", "Misconfigured").await?;
    ensure!(m.0 == "True" && m.2 == ":incorrect builtin prioritizer: Nope", "{m:?}");
    until_decided(&hub, &http, "eu-prod", &[]).await?;
    let c = until_reason(&hub, &http, "eu-prod", "PlacementSatisfied", "NoManagedClusterMatched")
        .await?;
    ensure!(c.0 == "False", "{c:?}");
    patch_placement(
        &k,
        "eu-prod",
        "json",
        r#"[{"op":"remove","path":"/spec/prioritizerPolicy/configurations"}]"#,
    )
    .await?;
    until_reason(&hub, &http, "eu-prod", "PlacementMisconfigured", "Succeedconfigured").await?;
    until_decided(&hub, &http, "eu-prod", &["c3"]).await?;

    // Someone else's edit of a decision is put back; a deleted decision comes back.
    k.ok(&[
        "patch",
        "placementdecision",
        "eu-prod-decision-1",
        "-n",
        "apps",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"decisions":[{"clusterName":"c2","reason":""}]}}"#,
    ])
    .await?;
    until_decided(&hub, &http, "eu-prod", &["c3"]).await?;
    k.ok(&["delete", "placementdecision", "eu-prod-decision-1", "-n", "apps"]).await?;
    until_decided(&hub, &http, "eu-prod", &["c3"]).await?;

    // The binding goes: no set is bound any more.
    k.ok(&["delete", "managedclustersetbinding", "default", "-n", "apps"]).await?;
    until_decided(&hub, &http, "eu-prod", &[]).await?;
    let c =
        until_reason(&hub, &http, "eu-prod", "PlacementSatisfied", "NoManagedClusterSetBindings")
            .await?;
    ensure!(c.2 == "No valid ManagedClusterSetBindings found in placement namespace", "{c:?}");

    // Deleting the placement collects its decisions.
    k.ok(&["delete", "placement", "eu-prod", "-n", "apps"]).await?;
    eventually("decisions collected", WAIT, || async {
        let list = stored(&hub, &http, DECISIONS).await?;
        Ok(list["items"].as_array().is_some_and(Vec::is_empty).then_some(()))
    })
    .await?;
    Ok(())
}

/// Applies an AddOnPlacementScore `load` in namespace `cluster` with one item `cpu`, as an
/// add-on agent would (the object, then its status).
async fn score_load(k: &Kubectl, cluster: &str, cpu: i32) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let manifest = write_manifest(
        &dir,
        "score.yaml",
        &format!(
            r#"apiVersion: v1
kind: Namespace
metadata:
  name: {cluster}
---
apiVersion: cluster.open-cluster-management.io/v1alpha1
kind: AddOnPlacementScore
metadata:
  name: load
  namespace: {cluster}
"#
        ),
    )?;
    k.ok(&["apply", "-f", &manifest]).await?;
    let status = json!({"status": {"scores": [{"name": "cpu", "value": cpu}]}}).to_string();
    k.ok(&[
        "patch",
        "addonplacementscore",
        "load",
        "-n",
        cluster,
        "--subresource=status",
        "--type=merge",
        "-p",
        &status,
    ])
    .await?;
    Ok(())
}

/// A Placement in `apps` (tolerating the automatic unreachable taint) selecting by `exprs`.
fn cel_placement(name: &str, exprs: &[&str]) -> String {
    let exprs: String = exprs.iter().map(|e| format!("        - '{e}'\n")).collect();
    format!(
        r#"apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata:
  name: {name}
  namespace: apps
spec:
  tolerations:
  - key: {UNREACHABLE}
    operator: Exists
  predicates:
  - requiredClusterSelector:
      celSelector:
        celExpressions:
{exprs}"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cel_selectors_read_any_field_and_addon_scores() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    for (name, env, version) in
        [("c1", "prod", "v1.30.1"), ("c2", "prod", "v1.31.0"), ("c3", "dev", "v1.31.0")]
    {
        create(&hub, &http, MCL, cluster(name, json!({"env": env}))).await?;
        let status = json!({"status": {"version": {"kubernetes": version}}});
        merge_patch(&hub, &http, &format!("{MCL}/{name}/status"), status).await?;
    }
    score_load(&k, "c1", 10).await?;
    score_load(&k, "c2", 70).await?;
    let recent = cel_placement(
        "recent",
        &[
            r#"managedCluster.metadata.labels.env == "prod""#,
            r#"semver(managedCluster.status.version.kubernetes.substring(1)).isGreaterThan(semver("1.30.5"))"#,
        ],
    );
    let idle = cel_placement(
        "idle",
        &[r#"managedCluster.scores("load").exists(s, s.name == "cpu" && s.value >= 50)"#],
    );
    apply_bound(&k, "default", &format!("{recent}---\n{idle}")).await?;
    // Both expressions hold only for c2; the score is at least 50 only on c2.
    until_decided(&hub, &http, "recent", &["c2"]).await?;
    until_decided(&hub, &http, "idle", &["c2"]).await?;
    // A score that changes moves the decision (AddOnPlacementScores are watched).
    score_load(&k, "c1", 90).await?;
    score_load(&k, "c2", 5).await?;
    until_decided(&hub, &http, "idle", &["c1"]).await?;
    // A label that changes does too.
    k.ok(&["label", "managedcluster", "c1", "env=dev", "--overwrite"]).await?;
    k.ok(&["label", "managedcluster", "c3", "env=prod", "--overwrite"]).await?;
    until_decided(&hub, &http, "recent", &["c2", "c3"]).await?;

    // Explain says which expression dropped a cluster and why.
    let raw = k.ok(&["get", "--raw", &format!("{PLACEMENTS}/idle/explain")]).await?;
    let table: Value = serde_json::from_str(&raw)?;
    let reason = |cluster: &str| {
        table["rows"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["cells"][0] == cluster)
            .map(|r| (r["cells"][1].clone(), r["cells"][3].as_str().unwrap_or("").to_owned()))
    };
    let (step, why) = reason("c3").unwrap_or_default();
    ensure!(step == "Predicate" && why.contains("failed to get score"), "{step} {why}");
    let (step, why) = reason("c2").unwrap_or_default();
    ensure!(step == "Predicate" && why.ends_with(": false)"), "{step} {why}");

    // An expression that does not compile misconfigures the placement: nothing is decided.
    let bad = json!({"spec": {"predicates": [{"requiredClusterSelector": {
        "celSelector": {"celExpressions": ["managedCluster.metadata.labels.env =="]}}}]}});
    patch_placement(&k, "recent", "merge", &bad.to_string()).await?;
    let (status, _, message) =
        until_reason(&hub, &http, "recent", "PlacementMisconfigured", "Misconfigured").await?;
    ensure!(
        status == "True" && message.starts_with("Predicate:compilation failed: "),
        "{status} {message}"
    );
    until_decided(&hub, &http, "recent", &[]).await?;
    let good = json!({"spec": {"predicates": [{"requiredClusterSelector": {
        "celSelector": {"celExpressions": ["managedCluster.metadata.name in [\"c1\", \"c3\"]"]}}}]}});
    patch_placement(&k, "recent", "merge", &good.to_string()).await?;
    until_reason(&hub, &http, "recent", "PlacementMisconfigured", "Succeedconfigured").await?;
    until_decided(&hub, &http, "recent", &["c1", "c3"]).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_clusters_are_grouped_and_sliced_by_a_hundred() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let names: Vec<String> = (0..130).map(|i| format!("m{i:03}")).collect();
    for (i, name) in names.iter().enumerate() {
        let tier = if i < 30 { "canary" } else { "main" };
        create(&hub, &http, MCL, cluster(name, json!({"tier": tier}))).await?;
    }
    apply_bound(
        &k,
        "global",
        &format!(
            r#"apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata:
  name: rollout
  namespace: apps
spec:
  tolerations:
  - key: {UNREACHABLE}
    operator: Exists
  decisionStrategy:
    groupStrategy:
      clustersPerDecisionGroup: 50%
      decisionGroups:
      - groupName: canary
        groupClusterSelector:
          labelSelector:
            matchLabels:
              tier: canary
"#
        ),
    )
    .await?;
    let want: Vec<&str> = names.iter().map(String::as_str).collect();
    until_decided(&hub, &http, "rollout", &want).await?;
    // 50% of 130 = 65 per group: canary (30), then the other 100 in groups of 65 and 35. The
    // status is written after the decisions, so it is waited for.
    let p = eventually("rollout status naming its groups", WAIT, || async {
        let p = stored(&hub, &http, &format!("{PLACEMENTS}/rollout")).await?;
        Ok((p["status"]["numberOfSelectedClusters"] == 130).then_some(p))
    })
    .await?;
    let groups: Vec<(i64, String, Vec<String>, i64)> = p["status"]["decisionGroups"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|g| {
            (
                g["decisionGroupIndex"].as_i64().unwrap_or(-1),
                g["decisionGroupName"].as_str().unwrap_or("?").to_owned(),
                serde_json::from_value(g["decisions"].clone()).unwrap_or_default(),
                g["clusterCount"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    let d = |n: usize| format!("rollout-decision-{n}");
    ensure!(
        groups
            == vec![
                (0, "canary".to_owned(), vec![d(1)], 30),
                (1, String::new(), vec![d(2)], 65),
                (2, String::new(), vec![d(3)], 35),
            ],
        "{groups:?}"
    );
    let out = k
        .ok(&[
            "get",
            "placementdecisions",
            "-n",
            "apps",
            "-l",
            "cluster.open-cluster-management.io/decision-group-name=canary",
            "-o",
            "name",
        ])
        .await?;
    ensure!(
        out.trim() == "placementdecision.cluster.open-cluster-management.io/rollout-decision-1",
        "{out}"
    );
    // Without groups the 130 clusters are sliced 100 + 30.
    patch_placement(&k, "rollout", "json", r#"[{"op":"remove","path":"/spec/decisionStrategy"}]"#)
        .await?;
    eventually("two decisions of 100 and 30", WAIT, || async {
        let list = stored(&hub, &http, DECISIONS).await?;
        let sizes: Vec<(String, usize)> = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| {
                (
                    d["metadata"]["name"].as_str().unwrap_or("").to_owned(),
                    d["status"]["decisions"].as_array().map_or(0, Vec::len),
                )
            })
            .collect();
        Ok((sizes == vec![(d(1), 100), (d(2), 30)]).then_some(()))
    })
    .await?;
    Ok(())
}
