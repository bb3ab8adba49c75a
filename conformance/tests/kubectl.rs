//! The kubectl suite: the real `kubectl` (1.32) against a real hub, checking what it prints and
//! what the hub stores. This first part covers `get`'s server-side tables: CRD printer columns,
//! core printers, `-o wide`, `--show-labels`, `-A`, `--sort-by`, `-o name` and `get -w`.

use std::time::Duration;

use anyhow::{Context as _, ensure};
use ocm_conformance::hub::{Backend, TestHub};
use ocm_conformance::kubectl::{Kubectl, Printed, skip_requested};
use serde_json::{Value, json};

const MCL: &str = "/apis/cluster.open-cluster-management.io/v1/managedclusters";

/// A memory hub, a REST client for set-up and kubectl; `None` when the suite is skipped.
async fn setup() -> anyhow::Result<Option<(TestHub, reqwest::Client, Kubectl)>> {
    if skip_requested() {
        eprintln!("OCM_SKIP_KUBECTL=1: kubectl suite skipped");
        return Ok(None);
    }
    let hub = TestHub::start(Backend::Memory).await?;
    let http = hub.http()?;
    let kubectl = Kubectl::new(&hub)?;
    Ok(Some((hub, http, kubectl)))
}

/// POSTs `body` to `path` (expects 201) and returns the stored object.
async fn create(
    hub: &TestHub,
    http: &reqwest::Client,
    path: &str,
    body: Value,
) -> anyhow::Result<Value> {
    let resp = http.post(format!("{}{path}", hub.url)).json(&body).send().await?;
    let code = resp.status().as_u16();
    let v: Value = resp.json().await?;
    ensure!(code == 201, "POST {path}: {code} {v}");
    Ok(v)
}

fn is_age(s: &str) -> bool {
    let digits = s.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()) && s.len() > digits.len()
}

fn cluster(name: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "cluster.open-cluster-management.io/v1",
        "kind": "ManagedCluster",
        "metadata": {"name": name, "labels": labels},
        "spec": {"hubAcceptsClient": true,
                 "managedClusterClientConfigs": [{"url": format!("https://{name}:6443")}]},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_prints_the_crd_printer_columns() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    // An empty cluster-scoped list: kubectl knows the scope from the Table.
    let r = k.run(&["get", "managedclusters"]).await?;
    ensure!(r.code == 0 && r.stdout.is_empty(), "{r:?}");
    ensure!(r.stderr.trim() == "No resources found", "{r:?}");

    create(&hub, &http, MCL, cluster("c1", json!({"env": "prod"}))).await?;
    let t = Printed::parse(&k.ok(&["get", "managedclusters"]).await?)?;
    ensure!(
        t.header == ["NAME", "HUB ACCEPTED", "MANAGED CLUSTER URLS", "JOINED", "AVAILABLE", "AGE"],
        "{t:?}"
    );
    ensure!(t.names() == ["c1"], "{t:?}");
    ensure!(t.cell(0, "HUB ACCEPTED")? == "true", "{t:?}");
    ensure!(t.cell(0, "MANAGED CLUSTER URLS")? == "https://c1:6443", "{t:?}");
    ensure!(t.cell(0, "JOINED")?.is_empty() && t.cell(0, "AVAILABLE")?.is_empty(), "{t:?}");
    ensure!(is_age(t.cell(0, "AGE")?), "{t:?}");

    // Conditions fill the filter columns.
    let status = json!({"status": {"conditions": [
        {"type": "ManagedClusterJoined", "status": "True", "reason": "Joined", "message": "",
         "lastTransitionTime": "2026-01-01T00:00:00Z"},
        {"type": "ManagedClusterConditionAvailable", "status": "Unknown", "reason": "Lease",
         "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    let resp = http
        .patch(format!("{}{MCL}/c1/status", hub.url))
        .header("content-type", "application/merge-patch+json")
        .body(status.to_string())
        .send()
        .await?;
    ensure!(resp.status() == 200, "status patch: {}", resp.text().await?);
    let t = Printed::parse(&k.ok(&["get", "mcl", "c1"]).await?)?;
    ensure!(t.cell(0, "JOINED")? == "True" && t.cell(0, "AVAILABLE")? == "Unknown", "{t:?}");

    // Labels and names come from the rows' object metadata.
    let t = Printed::parse(&k.ok(&["get", "mcl", "--show-labels"]).await?)?;
    ensure!(t.cell(0, "LABELS")? == "env=prod", "{t:?}");
    let t = Printed::parse(&k.ok(&["get", "mcl", "-L", "env"]).await?)?;
    ensure!(t.cell(0, "ENV")? == "prod", "{t:?}");
    ensure!(
        k.ok(&["get", "mcl", "-o", "name"]).await?.trim()
            == "managedcluster.cluster.open-cluster-management.io/c1"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kinds_without_printer_columns_print_name_and_age() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    for ns in ["cluster-a", "cluster-b"] {
        create(&hub, &http, "/api/v1/namespaces", json!({"metadata": {"name": ns}})).await?;
        let work = json!({
            "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
            "metadata": {"name": format!("w-{ns}")},
            "spec": {"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "x", "namespace": "default"}}]}},
        });
        let path =
            format!("/apis/work.open-cluster-management.io/v1/namespaces/{ns}/manifestworks");
        create(&hub, &http, &path, work).await?;
    }
    let t = Printed::parse(&k.ok(&["get", "manifestworks", "-A"]).await?)?;
    ensure!(t.header == ["NAMESPACE", "NAME", "AGE"], "{t:?}");
    ensure!(t.names() == ["cluster-a", "cluster-b"], "{t:?}");
    ensure!(t.cell(1, "NAME")? == "w-cluster-b" && is_age(t.cell(1, "AGE")?), "{t:?}");
    // In one namespace: no NAMESPACE column, and an empty namespace is named.
    let t = Printed::parse(&k.ok(&["get", "manifestworks", "-n", "cluster-a"]).await?)?;
    ensure!(t.header == ["NAME", "AGE"] && t.names() == ["w-cluster-a"], "{t:?}");
    let r = k.run(&["get", "manifestworks", "-n", "default"]).await?;
    ensure!(r.code == 0 && r.stderr.trim() == "No resources found in default namespace.", "{r:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn core_printers_and_wide_columns() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let cms = "/api/v1/namespaces/default/configmaps";
    create(&hub, &http, cms, json!({"metadata": {"name": "two"}, "data": {"a": "1", "b": "2"}}))
        .await?;
    let t = Printed::parse(&k.ok(&["get", "configmaps"]).await?)?;
    ensure!(t.header == ["NAME", "DATA", "AGE"] && t.cell(0, "DATA")? == "2", "{t:?}");

    let t = Printed::parse(&k.ok(&["get", "namespaces"]).await?)?;
    ensure!(t.header == ["NAME", "STATUS", "AGE"], "{t:?}");
    ensure!(t.names() == ["default", "kube-public", "kube-system"], "{t:?}");
    ensure!(t.rows.iter().all(|r| r[1] == "Active"), "{t:?}");

    let crb = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "b1"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
        "subjects": [
            {"kind": "User", "name": "u1", "apiGroup": "rbac.authorization.k8s.io"},
            {"kind": "User", "name": "u2", "apiGroup": "rbac.authorization.k8s.io"},
            {"kind": "ServiceAccount", "name": "sa", "namespace": "default"}],
    });
    create(&hub, &http, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", crb).await?;
    let t = Printed::parse(&k.ok(&["get", "clusterrolebindings"]).await?)?;
    ensure!(t.header == ["NAME", "ROLE", "AGE"], "priority-1 columns only with -o wide: {t:?}");
    let t = Printed::parse(&k.ok(&["get", "clusterrolebindings", "-o", "wide"]).await?)?;
    ensure!(t.header == ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"], "{t:?}");
    ensure!(t.cell(0, "ROLE")? == "ClusterRole/admin", "{t:?}");
    ensure!(t.cell(0, "USERS")? == "u1, u2" && t.cell(0, "GROUPS")?.is_empty(), "{t:?}");
    ensure!(t.cell(0, "SERVICEACCOUNTS")? == "default/sa", "{t:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sort_by_reads_whole_objects() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let cms = "/api/v1/namespaces/default/configmaps";
    for (name, rank) in [("a", "3"), ("b", "1"), ("c", "2")] {
        create(&hub, &http, cms, json!({"metadata": {"name": name}, "data": {"rank": rank}}))
            .await?;
    }
    // `--sort-by` asks for includeObject=Object and sorts on a field outside metadata.
    let t = Printed::parse(&k.ok(&["get", "cm", "--sort-by=.data.rank"]).await?)?;
    ensure!(t.names() == ["b", "c", "a"], "{t:?}");
    let t = Printed::parse(&k.ok(&["get", "cm", "--sort-by=.metadata.name"]).await?)?;
    ensure!(t.names() == ["a", "b", "c"], "{t:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_watch_prints_each_change() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let cms = "/api/v1/namespaces/default/configmaps";
    create(&hub, &http, cms, json!({"metadata": {"name": "w"}, "data": {"a": "1"}})).await?;
    let watcher = k.run(&["get", "cm", "w", "-w", "--request-timeout=8s"]);
    let writer = async {
        // kubectl prints the current row first; give it time to start watching.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let resp = http
            .patch(format!("{}{cms}/w", hub.url))
            .header("content-type", "application/merge-patch+json")
            .body(json!({"data": {"b": "2", "c": "3"}}).to_string())
            .send()
            .await?;
        ensure!(resp.status() == 200);
        anyhow::Ok(())
    };
    let (r, w) = tokio::join!(watcher, writer);
    w?;
    let r = r?;
    let t = Printed::parse(&r.stdout).with_context(|| format!("{r:?}"))?;
    ensure!(t.header == ["NAME", "DATA", "AGE"], "{r:?}");
    let data: Vec<&str> = t.rows.iter().map(|row| row[1].as_str()).collect();
    ensure!(data.first() == Some(&"1") && data.contains(&"3"), "rows {data:?}: {r:?}");
    Ok(())
}

const CLUSTER_YAML: &str = "apiVersion: cluster.open-cluster-management.io/v1
kind: ManagedCluster
metadata:
  name: c9
  labels:
    env: dev
spec:
  hubAcceptsClient: true
";

/// Reads a stored object over REST.
async fn stored(hub: &TestHub, http: &reqwest::Client, path: &str) -> anyhow::Result<Value> {
    let resp = http.get(format!("{}{path}", hub.url)).send().await?;
    ensure!(resp.status() == 200, "GET {path}: {}", resp.status());
    Ok(resp.json().await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_apply_replace_and_diff_from_files() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("c9.yaml");
    let path = file.to_str().context("utf-8 path")?;
    std::fs::write(&file, CLUSTER_YAML)?;
    // Default validation (Strict through OpenAPI's fieldValidation): no --validate=false.
    let out = k.ok(&["create", "-f", path]).await?;
    ensure!(out.trim() == "managedcluster.cluster.open-cluster-management.io/c9 created", "{out}");
    let r = k.run(&["create", "-f", path]).await?;
    ensure!(r.code == 1 && r.stderr.contains("already exists"), "{r:?}");

    // Client-side apply: the first apply adds the last-applied annotation (with a warning),
    // the second changes nothing, an edit is a merge patch.
    let r = k.run(&["apply", "-f", path]).await?;
    ensure!(r.code == 0 && r.stdout.trim().ends_with("configured"), "{r:?}");
    ensure!(
        r.stderr.contains("missing the kubectl.kubernetes.io/last-applied-configuration"),
        "{r:?}"
    );
    let out = k.ok(&["apply", "-f", path]).await?;
    ensure!(out.trim().ends_with("unchanged"), "{out}");
    std::fs::write(&file, CLUSTER_YAML.replace("env: dev", "env: prod"))?;
    let r = k.run(&["diff", "-f", path]).await?;
    ensure!(r.code == 1 && r.stdout.contains("+    env: prod"), "diff shows the change: {r:?}");
    let out = k.ok(&["apply", "-f", path]).await?;
    ensure!(out.trim().ends_with("configured"), "{out}");
    let obj = stored(&hub, &http, &format!("{MCL}/c9")).await?;
    ensure!(obj["metadata"]["labels"]["env"] == "prod", "{obj}");
    let last = obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
        .as_str()
        .context("last-applied annotation")?;
    ensure!(last.contains("\"env\":\"prod\""), "{last}");
    let r = k.run(&["diff", "-f", path]).await?;
    ensure!(r.code == 0 && r.stdout.is_empty(), "no differences left: {r:?}");

    // replace -f puts the file back as a whole.
    std::fs::write(
        &file,
        CLUSTER_YAML.replace("hubAcceptsClient: true", "hubAcceptsClient: false"),
    )?;
    let out = k.ok(&["replace", "-f", path]).await?;
    ensure!(out.trim().ends_with("replaced"), "{out}");
    let obj = stored(&hub, &http, &format!("{MCL}/c9")).await?;
    ensure!(
        obj["spec"]["hubAcceptsClient"] == false && obj["metadata"]["labels"]["env"] == "dev",
        "{obj}"
    );

    // Strict validation server-side: an unknown field is refused and nothing is stored.
    std::fs::write(
        &file,
        CLUSTER_YAML
            .replace("c9", "c10")
            .replace("  hubAcceptsClient: true", "  hubAcceptsClient: true\n  bogus: 1"),
    )?;
    let r = k.run(&["create", "-f", path]).await?;
    ensure!(r.code != 0 && r.stderr.contains("bogus"), "{r:?}");
    let resp = http.get(format!("{}{MCL}/c10", hub.url)).send().await?;
    ensure!(resp.status() == 404, "a refused create stored nothing");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_reads_the_published_schemas() -> anyhow::Result<()> {
    let Some((_hub, _http, k)) = setup().await? else { return Ok(()) };
    let out = k.ok(&["explain", "managedclusters.spec"]).await?;
    ensure!(out.contains("GROUP:      cluster.open-cluster-management.io"), "{out}");
    ensure!(out.contains("KIND:       ManagedCluster") && out.contains("VERSION:    v1"), "{out}");
    ensure!(out.contains("hubAcceptsClient\t<boolean>"), "{out}");
    let out = k.ok(&["explain", "placements.spec.predicates"]).await?;
    ensure!(out.contains("requiredClusterSelector"), "{out}");
    let out = k.ok(&["explain", "manifestworks.metadata.labels"]).await?;
    ensure!(out.contains("map[string]string"), "{out}");
    // Descriptions come from the Rust types: ocm-proto's doc comments, k8s-openapi's for core
    // kinds.
    let out = k.ok(&["explain", "managedclusters.spec.taints.effect"]).await?;
    ensure!(out.contains("ENUM:") && out.contains("NoSelectIfNew"), "{out}");
    let out = k.ok(&["explain", "configmap.data"]).await?;
    ensure!(out.contains("KIND:       ConfigMap") && out.contains("map[string]string"), "{out}");
    ensure!(out.contains("Data contains the configuration data."), "{out}");
    let out = k.ok(&["explain", "leases.spec.holderIdentity"]).await?;
    ensure!(out.contains("GROUP:      coordination.k8s.io") && out.contains("<string>"), "{out}");
    Ok(())
}
