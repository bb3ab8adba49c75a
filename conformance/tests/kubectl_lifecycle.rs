//! The kubectl suite, waiting and deleting: `kubectl wait` (a condition set through `/status`, a
//! jsonpath value, deletion, the timeout) while the test changes objects, and `kubectl delete`
//! (by label, `--all`, finalizers with and without waiting, `--force`, a namespace with content,
//! `--dry-run=server`), each checked against what the hub stores afterwards.

use anyhow::ensure;
use ocm_conformance::kubectl::{
    MCL, Printed, absent, cluster, create, delete, item_names, merge_patch, setup, stored,
};
use serde_json::{Value, json};

fn condition(type_: &str, status: &str) -> Value {
    json!({"status": {"conditions": [{
        "type": type_, "status": status, "reason": "Tested", "message": "set by the test",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_a_condition_set_through_status() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let c1 = format!("{MCL}/c1");
    create(&hub, &http, MCL, cluster("c1", json!({}))).await?;
    merge_patch(
        &hub,
        &http,
        &format!("{c1}/status"),
        condition("ManagedClusterConditionAvailable", "False"),
    )
    .await?;
    let mut wait = k
        .spawn_watching(&[
            "wait",
            "--for=condition=ManagedClusterConditionAvailable",
            "mcl/c1",
            "--timeout=50s",
        ])
        .await?;
    ensure!(!wait.exited()?, "kubectl wait returned while the condition was False");
    merge_patch(
        &hub,
        &http,
        &format!("{c1}/status"),
        condition("ManagedClusterConditionAvailable", "True"),
    )
    .await?;
    let r = wait.finish().await?;
    ensure!(r.code == 0, "{r:?}");
    ensure!(
        r.stdout.trim() == "managedcluster.cluster.open-cluster-management.io/c1 condition met",
        "{r:?}"
    );
    let obj = stored(&hub, &http, &c1).await?;
    ensure!(obj["status"]["conditions"][0]["status"] == "True", "{obj}");
    // Met already: kubectl reports it without waiting for a change.
    let out =
        k.ok(&["wait", "--for=condition=ManagedClusterConditionAvailable=True", "mcl/c1"]).await?;
    ensure!(out.trim().ends_with("c1 condition met"), "{out}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_a_jsonpath_value() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let c1 = format!("{MCL}/c1");
    let mut obj = cluster("c1", json!({}));
    obj["spec"]["hubAcceptsClient"] = json!(false);
    create(&hub, &http, MCL, obj).await?;
    let mut wait = k
        .spawn_watching(&[
            "wait",
            "--for=jsonpath={.spec.hubAcceptsClient}=true",
            "managedcluster/c1",
            "--timeout=50s",
        ])
        .await?;
    ensure!(!wait.exited()?, "kubectl wait returned while hubAcceptsClient was false");
    // Accepting the cluster is a spec change (what `clusteradm accept` does).
    merge_patch(&hub, &http, &c1, json!({"spec": {"hubAcceptsClient": true}})).await?;
    let r = wait.finish().await?;
    ensure!(r.code == 0, "{r:?}");
    ensure!(
        r.stdout.trim() == "managedcluster.cluster.open-cluster-management.io/c1 condition met",
        "{r:?}"
    );
    let obj = stored(&hub, &http, &c1).await?;
    ensure!(obj["spec"]["hubAcceptsClient"] == true && obj["metadata"]["generation"] == 2);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_delete_returns_once_the_object_is_gone() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let placements =
        "/apis/cluster.open-cluster-management.io/v1beta1/namespaces/default/placements";
    let p = json!({"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
                   "metadata": {"name": "p1"}, "spec": {}});
    create(&hub, &http, placements, p).await?;
    let mut wait =
        k.spawn_watching(&["wait", "--for=delete", "placement/p1", "--timeout=50s"]).await?;
    ensure!(!wait.exited()?, "kubectl wait returned while p1 existed");
    delete(&hub, &http, &format!("{placements}/p1")).await?;
    let r = wait.finish().await?;
    ensure!(r.code == 0, "{r:?}");
    ensure!(
        r.stdout.trim() == "placement.cluster.open-cluster-management.io/p1 condition met",
        "{r:?}"
    );
    ensure!(absent(&hub, &http, &format!("{placements}/p1")).await?);
    // Waiting for an object that is already gone succeeds at once.
    let r = k.run(&["wait", "--for=delete", "placement/p1", "--timeout=5s"]).await?;
    ensure!(r.code == 0, "{r:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_reports_its_timeout() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    create(&hub, &http, MCL, cluster("c1", json!({}))).await?;
    let before = stored(&hub, &http, &format!("{MCL}/c1")).await?;
    let r =
        k.run(&["wait", "--for=condition=ManagedClusterJoined", "mcl/c1", "--timeout=2s"]).await?;
    ensure!(r.code == 1 && r.stdout.is_empty(), "{r:?}");
    ensure!(
        r.stderr.trim() == "error: timed out waiting for the condition on managedclusters/c1",
        "{r:?}"
    );
    let r = k
        .run(&["wait", "--for=jsonpath={.spec.hubAcceptsClient}=false", "mcl/c1", "--timeout=1s"])
        .await?;
    ensure!(r.code == 1 && r.stderr.contains("timed out waiting for the condition"), "{r:?}");
    // Waiting on an object that does not exist.
    let r = k.run(&["wait", "--for=condition=Ready", "mcl/nope", "--timeout=1s"]).await?;
    ensure!(r.code == 1, "{r:?}");
    ensure!(
        r.stderr.contains("managedclusters.cluster.open-cluster-management.io \"nope\" not found"),
        "{r:?}"
    );
    ensure!(stored(&hub, &http, &format!("{MCL}/c1")).await? == before, "waiting wrote nothing");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_by_label_and_all() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    create(&hub, &http, MCL, cluster("c1", json!({"app": "demo", "tier": "front"}))).await?;
    create(&hub, &http, MCL, cluster("c2", json!({"app": "demo", "tier": "back"}))).await?;
    create(&hub, &http, MCL, cluster("c3", json!({"app": "other"}))).await?;
    let out = k.ok(&["delete", "mcl", "-l", "app=demo"]).await?;
    ensure!(
        out.lines().collect::<Vec<_>>()
            == [
                "managedcluster.cluster.open-cluster-management.io \"c1\" deleted",
                "managedcluster.cluster.open-cluster-management.io \"c2\" deleted",
            ],
        "{out}"
    );
    ensure!(item_names(&stored(&hub, &http, MCL).await?) == ["c3"]);
    // Namespaced, core: --all in one namespace leaves the others alone.
    create(&hub, &http, "/api/v1/namespaces", json!({"metadata": {"name": "other"}})).await?;
    for ns in ["default", "other"] {
        for name in ["a", "b"] {
            let path = format!("/api/v1/namespaces/{ns}/configmaps");
            create(&hub, &http, &path, json!({"metadata": {"name": name}})).await?;
        }
    }
    let out = k.ok(&["delete", "cm", "--all"]).await?;
    ensure!(out == "configmap \"a\" deleted\nconfigmap \"b\" deleted\n", "{out}");
    ensure!(
        item_names(&stored(&hub, &http, "/api/v1/namespaces/default/configmaps").await?).is_empty()
    );
    ensure!(
        item_names(&stored(&hub, &http, "/api/v1/namespaces/other/configmaps").await?)
            == ["a", "b"]
    );
    let out = k.ok(&["delete", "mcl", "--all"]).await?;
    ensure!(out.trim() == "managedcluster.cluster.open-cluster-management.io \"c3\" deleted");
    ensure!(item_names(&stored(&hub, &http, MCL).await?).is_empty());
    // Nothing left to delete.
    let r = k.run(&["delete", "mcl", "--all"]).await?;
    ensure!(r.code == 0 && r.stdout.trim() == "No resources found" && r.stderr.is_empty(), "{r:?}");
    let r = k.run(&["delete", "mcl", "c3"]).await?;
    ensure!(r.code == 1, "{r:?}");
    ensure!(
        r.stderr.trim()
            == "Error from server (NotFound): managedclusters.cluster.open-cluster-management.io \"c3\" not found",
        "{r:?}"
    );
    Ok(())
}

const HOLD: &str = r#"{"metadata":{"finalizers":["test.open-cluster-management.io/hold"]}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_without_waiting_leaves_a_finalized_object() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let c1 = format!("{MCL}/c1");
    create(&hub, &http, MCL, cluster("c1", json!({}))).await?;
    k.ok(&["patch", "mcl", "c1", "--type", "merge", "-p", HOLD]).await?;
    let out = k.ok(&["delete", "mcl", "c1", "--wait=false"]).await?;
    ensure!(
        out.trim() == "managedcluster.cluster.open-cluster-management.io \"c1\" deleted",
        "{out}"
    );
    let obj = stored(&hub, &http, &c1).await?;
    ensure!(obj["metadata"]["deletionTimestamp"].is_string(), "{obj}");
    ensure!(obj["metadata"]["finalizers"] == json!(["test.open-cluster-management.io/hold"]));
    let out = k.ok(&["get", "mcl", "c1", "-o", "jsonpath={.metadata.deletionTimestamp}"]).await?;
    ensure!(out == obj["metadata"]["deletionTimestamp"], "{out}");
    // Deleting again changes nothing; removing the finalizer lets it go.
    let out = k.ok(&["delete", "mcl", "c1", "--wait=false"]).await?;
    ensure!(out.trim().ends_with("\"c1\" deleted"), "{out}");
    ensure!(
        stored(&hub, &http, &c1).await?["metadata"]["deletionTimestamp"]
            == obj["metadata"]["deletionTimestamp"]
    );
    let out = k
        .ok(&[
            "patch",
            "mcl",
            "c1",
            "--type",
            "json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
        ])
        .await?;
    ensure!(out.trim().ends_with("c1 patched"), "{out}");
    ensure!(absent(&hub, &http, &c1).await?, "gone once the last finalizer went");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_waits_until_the_finalizer_is_removed() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let c1 = format!("{MCL}/c1");
    create(&hub, &http, MCL, cluster("c1", json!({}))).await?;
    merge_patch(&hub, &http, &c1, serde_json::from_str(HOLD)?).await?;
    // kubectl prints `deleted` once the hub accepted the deletion, then watches for the object
    // to go, which the finalizer prevents: once its watch is open, it must still be waiting.
    let mut del = k.spawn_watching(&["delete", "mcl", "c1", "--timeout=50s"]).await?;
    del.printed("managedcluster.cluster.open-cluster-management.io \"c1\" deleted").await?;
    let obj = stored(&hub, &http, &c1).await?;
    ensure!(obj["metadata"]["deletionTimestamp"].is_string(), "{obj}");
    ensure!(!del.exited()?, "kubectl delete returned while the finalizer held the object");
    merge_patch(&hub, &http, &c1, json!({"metadata": {"finalizers": null}})).await?;
    let r = del.finish().await?;
    ensure!(r.code == 0 && !r.stderr.contains("error"), "{r:?}");
    ensure!(r.stdout.trim() == "managedcluster.cluster.open-cluster-management.io \"c1\" deleted");
    ensure!(absent(&hub, &http, &c1).await?);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_delete_warns_and_deletes() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    create(&hub, &http, "/api/v1/namespaces", json!({"metadata": {"name": "cluster1"}})).await?;
    let works = "/apis/work.open-cluster-management.io/v1/namespaces/cluster1/manifestworks";
    let work = json!({"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
                      "metadata": {"name": "w1"}, "spec": {"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "default"}}]}}});
    create(&hub, &http, works, work).await?;
    let r = k
        .run(&["delete", "manifestwork", "w1", "-n", "cluster1", "--grace-period=0", "--force"])
        .await?;
    ensure!(r.code == 0, "{r:?}");
    ensure!(
        r.stdout.trim() == "manifestwork.work.open-cluster-management.io \"w1\" force deleted",
        "{r:?}"
    );
    ensure!(
        r.stderr.trim()
            == "Warning: Immediate deletion does not wait for confirmation that the running \
                resource has been terminated. The resource may continue to run on the cluster \
                indefinitely.",
        "{r:?}"
    );
    ensure!(absent(&hub, &http, &format!("{works}/w1")).await?);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_a_namespace_with_its_content() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let ns = "/api/v1/namespaces/cluster1";
    create(&hub, &http, "/api/v1/namespaces", json!({"metadata": {"name": "cluster1"}})).await?;
    let works = "/apis/work.open-cluster-management.io/v1/namespaces/cluster1/manifestworks";
    let work = json!({"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
                      "metadata": {"name": "w1"}, "spec": {"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "default"}}]}}});
    create(&hub, &http, works, work).await?;
    create(&hub, &http, &format!("{ns}/configmaps"), json!({"metadata": {"name": "cm"}})).await?;
    create(&hub, &http, &format!("{ns}/serviceaccounts"), json!({"metadata": {"name": "agent"}}))
        .await?;
    // kubectl waits for the namespace to go, which needs its content gone first.
    let out = k.ok(&["delete", "namespace", "cluster1"]).await?;
    ensure!(out.trim() == "namespace \"cluster1\" deleted", "{out}");
    ensure!(absent(&hub, &http, ns).await?);
    ensure!(
        item_names(
            &stored(&hub, &http, "/apis/work.open-cluster-management.io/v1/manifestworks").await?
        )
        .is_empty()
    );
    // (only the hub's own kube-public/cluster-info is left)
    ensure!(item_names(&stored(&hub, &http, "/api/v1/configmaps").await?) == ["cluster-info"]);
    ensure!(item_names(&stored(&hub, &http, "/api/v1/serviceaccounts").await?).is_empty());
    let r = k.run(&["get", "manifestwork", "-n", "cluster1"]).await?;
    ensure!(r.code == 0 && r.stderr.trim() == "No resources found in cluster1 namespace.", "{r:?}");
    // The system namespace stays (kube-apiserver's NamespaceLifecycle admission).
    let r = k.run(&["delete", "namespace", "default"]).await?;
    ensure!(
        r.code == 1
            && r.stderr.trim()
                == "Error from server (Forbidden): namespaces \"default\" is forbidden: this \
                    namespace may not be deleted",
        "{r:?}"
    );
    ensure!(!absent(&hub, &http, "/api/v1/namespaces/default").await?);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_dry_run_server_keeps_the_object() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    create(&hub, &http, MCL, cluster("c1", json!({"app": "demo"}))).await?;
    create(&hub, &http, MCL, cluster("c2", json!({"app": "demo"}))).await?;
    let before = stored(&hub, &http, MCL).await?;
    let out = k.ok(&["delete", "mcl", "c1", "--dry-run=server"]).await?;
    ensure!(
        out.trim()
            == "managedcluster.cluster.open-cluster-management.io \"c1\" deleted (server dry run)",
        "{out}"
    );
    let out = k.ok(&["delete", "mcl", "-l", "app=demo", "--dry-run=server"]).await?;
    ensure!(
        out.lines().count() == 2 && out.lines().all(|l| l.ends_with("deleted (server dry run)"))
    );
    ensure!(stored(&hub, &http, MCL).await?["items"] == before["items"], "nothing deleted");
    let t = Printed::parse(&k.ok(&["get", "mcl"]).await?)?;
    ensure!(t.names() == ["c1", "c2"], "{t:?}");
    // A client dry run sends nothing.
    let out = k.ok(&["delete", "mcl", "c2", "--dry-run=client"]).await?;
    ensure!(out.trim().ends_with("\"c2\" deleted (dry run)"), "{out}");
    ensure!(!absent(&hub, &http, &format!("{MCL}/c2")).await?);
    Ok(())
}
