//! The kubectl suite: the real `kubectl` (1.32) against a real hub, checking what it prints and
//! what the hub stores. This part covers reading: `get`'s server-side tables (CRD printer columns,
//! core printers, `-o wide`, `--show-labels`, `-L`, `-A`, `--sort-by`), the other output formats
//! (yaml, json, name, jsonpath, custom-columns), label and field selectors, chunked lists,
//! `get --raw`, `get -w`, and the `create`/`apply`/`replace`/`diff` round trip from files.

use anyhow::{Context as _, ensure};
use ocm_conformance::kubectl::{
    MCL, Printed, absent, cluster, create, delete, get_with, is_age, item_names, merge_patch,
    setup, stored,
};
use serde_json::{Value, json};

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
    // (the cluster-set label is OCM's webhook default)
    ensure!(
        t.cell(0, "LABELS")? == "cluster.open-cluster-management.io/clusterset=default,env=prod",
        "{t:?}"
    );
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
    // A named watch (`fieldSelector=metadata.name=w`): the current row, then one per change.
    let mut watcher = k.spawn_watching(&["get", "cm", "w", "-w"]).await?;
    merge_patch(&hub, &http, &format!("{cms}/w"), json!({"data": {"b": "2", "c": "3"}})).await?;
    watcher.printed("   3   ").await?;
    let t = Printed::parse(&watcher.stdout())?;
    ensure!(t.header == ["NAME", "DATA", "AGE"], "{t:?}");
    let data: Vec<&str> = t.rows.iter().map(|row| row[1].as_str()).collect();
    ensure!(data == ["1", "3"], "rows {data:?}");
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

const PLACEMENTS: &str =
    "/apis/cluster.open-cluster-management.io/v1beta1/namespaces/default/placements";

/// A Placement in `default` asking for `n` clusters.
fn placement(name: &str, n: i64) -> Value {
    json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
        "metadata": {"name": name, "labels": {"app": "demo"}},
        "spec": {"numberOfClusters": n, "clusterSets": ["global"]},
    })
}

/// The stored object as kubectl shows it: managedFields hidden.
fn without_managed_fields(mut obj: Value) -> Value {
    if let Some(meta) = obj["metadata"].as_object_mut() {
        meta.remove("managedFields");
    }
    obj
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_yaml_json_and_name_show_the_stored_object() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let r = k.run(&["get", "placements"]).await?;
    ensure!(r.code == 0 && r.stdout.is_empty(), "{r:?}");
    ensure!(r.stderr.trim() == "No resources found in default namespace.", "{r:?}");

    create(&hub, &http, PLACEMENTS, placement("p1", 2)).await?;
    let obj = stored(&hub, &http, &format!("{PLACEMENTS}/p1")).await?;
    // -o json is the stored object, managedFields hidden.
    let printed: Value =
        serde_json::from_str(&k.ok(&["get", "placement", "p1", "-o", "json"]).await?)?;
    ensure!(printed == without_managed_fields(obj.clone()), "{printed}\nvs stored {obj}");
    // -o yaml: the server-owned metadata, no managedFields.
    let yaml = k.ok(&["get", "placement", "p1", "-o", "yaml"]).await?;
    let meta = &obj["metadata"];
    for line in [
        "apiVersion: cluster.open-cluster-management.io/v1beta1".to_owned(),
        "kind: Placement".to_owned(),
        format!("  uid: {}", meta["uid"].as_str().context("uid")?),
        format!("  resourceVersion: \"{}\"", meta["resourceVersion"].as_str().context("rv")?),
        format!(
            "  creationTimestamp: \"{}\"",
            meta["creationTimestamp"].as_str().context("creationTimestamp")?
        ),
        "  generation: 1".to_owned(),
        "  namespace: default".to_owned(),
        "  numberOfClusters: 2".to_owned(),
    ] {
        ensure!(yaml.lines().any(|l| l == line), "no line {line:?} in\n{yaml}");
    }
    ensure!(!yaml.contains("managedFields"), "{yaml}");
    // -o name on a list: one kind-qualified name per stored item.
    create(&hub, &http, PLACEMENTS, placement("p2", 1)).await?;
    let names = k.ok(&["get", "placements", "-o", "name"]).await?;
    let list = stored(&hub, &http, PLACEMENTS).await?;
    let expected: Vec<String> = item_names(&list)
        .iter()
        .map(|n| format!("placement.cluster.open-cluster-management.io/{n}"))
        .collect();
    ensure!(names.lines().collect::<Vec<_>>() == expected && expected.len() == 2, "{names}");
    // A list in JSON is a v1 List of the stored items.
    let printed: Value = serde_json::from_str(&k.ok(&["get", "placements", "-o", "json"]).await?)?;
    ensure!(printed["kind"] == "List" && printed["items"].as_array().map(Vec::len) == Some(2));
    ensure!(printed["items"][1] == without_managed_fields(list["items"][1].clone()), "{printed}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jsonpath_and_custom_columns_read_lists_and_objects() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    for (name, env) in [("c1", Some("prod")), ("c2", None), ("c3", Some("dev"))] {
        let labels = env.map_or(json!({}), |e| json!({"env": e}));
        create(&hub, &http, MCL, cluster(name, labels)).await?;
    }
    merge_patch(&hub, &http, &format!("{MCL}/c2"), json!({"spec": {"hubAcceptsClient": false}}))
        .await?;
    let list = stored(&hub, &http, MCL).await?;
    let out = k.ok(&["get", "mcl", "-o", "jsonpath={.items[*].metadata.name}"]).await?;
    ensure!(out == item_names(&list).join(" ") && out == "c1 c2 c3", "{out}");
    let out = k
        .ok(&[
            "get",
            "mcl",
            "-o",
            r#"jsonpath={range .items[*]}{.metadata.name}={.spec.hubAcceptsClient}{"\n"}{end}"#,
        ])
        .await?;
    ensure!(out == "c1=true\nc2=false\nc3=true\n", "{out:?}");
    // On one object.
    let out = k
        .ok(&["get", "mcl", "c3", "-o", "jsonpath={.spec.managedClusterClientConfigs[0].url}"])
        .await?;
    ensure!(out == list["items"][2]["spec"]["managedClusterClientConfigs"][0]["url"], "{out}");
    ensure!(out == "https://c3:6443", "{out}");
    let out = k.ok(&["get", "mcl", "c1", "-o", "jsonpath={.metadata.uid}"]).await?;
    ensure!(out == list["items"][0]["metadata"]["uid"], "{out}");

    let t = Printed::parse(
        &k.ok(&[
            "get",
            "mcl",
            "-o",
            "custom-columns=NAME:.metadata.name,ENV:.metadata.labels.env,\
             ACCEPTS:.spec.hubAcceptsClient,URL:.spec.managedClusterClientConfigs[0].url",
        ])
        .await?,
    )?;
    ensure!(t.header == ["NAME", "ENV", "ACCEPTS", "URL"], "{t:?}");
    ensure!(t.names() == ["c1", "c2", "c3"], "{t:?}");
    ensure!(t.cell(0, "ENV")? == "prod" && t.cell(1, "ENV")? == "<none>", "{t:?}");
    ensure!(t.cell(1, "ACCEPTS")? == "false" && t.cell(2, "URL")? == "https://c3:6443", "{t:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_selectors_of_every_form() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    create(&hub, &http, MCL, cluster("c1", json!({"app": "demo", "tier": "front"}))).await?;
    create(&hub, &http, MCL, cluster("c2", json!({"app": "demo", "tier": "back"}))).await?;
    create(&hub, &http, MCL, cluster("c3", json!({"app": "other"}))).await?;
    for (selector, expected) in [
        ("app=demo,tier!=back", vec!["c1"]),
        ("tier in (front,back)", vec!["c1", "c2"]),
        ("!tier", vec!["c3"]),
        ("app,tier notin (front)", vec!["c2", "c3"]),
        ("app==other", vec!["c3"]),
    ] {
        let t = Printed::parse(&k.ok(&["get", "mcl", "-l", selector, "-L", "app,tier"]).await?)?;
        ensure!(t.names() == expected, "{selector}: {t:?}");
        ensure!(t.header.ends_with(&["APP".to_owned(), "TIER".to_owned()]), "{t:?}");
        // The hub's own answer to the same selector.
        let (_, list) = get_with(&hub, &http, MCL, "labelSelector", selector).await?;
        ensure!(item_names(&list) == expected, "{selector}: {list}");
    }
    let t = Printed::parse(&k.ok(&["get", "mcl", "-l", "tier", "-L", "tier"]).await?)?;
    ensure!(t.cell(0, "TIER")? == "front" && t.cell(1, "TIER")? == "back", "{t:?}");
    // Nothing matches: kubectl says so on stderr.
    let r = k.run(&["get", "mcl", "-l", "app=none"]).await?;
    ensure!(r.code == 0 && r.stdout.is_empty() && r.stderr.trim() == "No resources found", "{r:?}");
    let r = k.run(&["get", "mcl", "-l", "app in ("]).await?;
    ensure!(r.code == 1 && r.stderr.starts_with("Error from server (BadRequest)"), "{r:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn field_selectors_supported_and_refused() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    for ns in ["ns-a", "ns-b"] {
        create(&hub, &http, "/api/v1/namespaces", json!({"metadata": {"name": ns}})).await?;
        for name in ["x", "y"] {
            let path = format!("/api/v1/namespaces/{ns}/configmaps");
            create(&hub, &http, &path, json!({"metadata": {"name": name}, "data": {"k": ns}}))
                .await?;
        }
    }
    let t = Printed::parse(
        &k.ok(&["get", "cm", "-A", "--field-selector", "metadata.namespace=ns-b"]).await?,
    )?;
    ensure!(t.names() == ["ns-b", "ns-b"], "{t:?}");
    ensure!(t.cell(0, "NAME")? == "x" && t.cell(1, "NAME")? == "y", "{t:?}");
    let t = Printed::parse(
        &k.ok(&["get", "cm", "-A", "--field-selector", "metadata.name=y,metadata.namespace!=ns-b"])
            .await?,
    )?;
    ensure!(t.names() == ["ns-a"] && t.cell(0, "NAME")? == "y", "{t:?}");
    let selector = "metadata.name=y,metadata.namespace!=ns-b";
    let (_, list) = get_with(&hub, &http, "/api/v1/configmaps", "fieldSelector", selector).await?;
    ensure!(item_names(&list) == ["y"] && list["items"][0]["metadata"]["namespace"] == "ns-a");

    create(&hub, &http, MCL, cluster("c1", json!({}))).await?;
    let t = Printed::parse(&k.ok(&["get", "mcl", "--field-selector", "metadata.name=c1"]).await?)?;
    ensure!(t.names() == ["c1"], "{t:?}");
    let r = k.run(&["get", "mcl", "--field-selector", "metadata.name=c2"]).await?;
    ensure!(r.code == 0 && r.stderr.trim() == "No resources found", "{r:?}");
    // A field the kind does not select on: 400, printed by kubectl.
    let r = k.run(&["get", "mcl", "--field-selector", "spec.hubAcceptsClient=true"]).await?;
    ensure!(r.code == 1 && r.stdout.is_empty(), "{r:?}");
    ensure!(r.stderr.starts_with("Error from server (BadRequest):"), "{r:?}");
    ensure!(r.stderr.contains("field label not supported: spec.hubAcceptsClient"), "{r:?}");
    let (code, status) =
        get_with(&hub, &http, MCL, "fieldSelector", "spec.hubAcceptsClient=true").await?;
    ensure!(code == 400 && status["reason"] == "BadRequest", "{code} {status}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_lists_follow_continue_tokens() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    for ns in ["cluster-a", "cluster-b", "cluster-c"] {
        create(&hub, &http, "/api/v1/namespaces", json!({"metadata": {"name": ns}})).await?;
        let path =
            format!("/apis/work.open-cluster-management.io/v1/namespaces/{ns}/manifestworks");
        let work = json!({
            "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
            "metadata": {"name": format!("w-{ns}")},
            "spec": {"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "default"}}]}},
        });
        create(&hub, &http, &path, work).await?;
    }
    let r = k.run(&["get", "manifestworks", "-A", "--chunk-size=1", "-v=6"]).await?;
    ensure!(r.code == 0, "{r:?}");
    let t = Printed::parse(&r.stdout)?;
    ensure!(t.header == ["NAMESPACE", "NAME", "AGE"], "{t:?}");
    ensure!(t.names() == ["cluster-a", "cluster-b", "cluster-c"], "{t:?}");
    ensure!(t.cell(2, "NAME")? == "w-cluster-c", "{t:?}");
    // One request per item: the first with limit=1, the rest following the continue token.
    let requests: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.contains("/apis/work.open-cluster-management.io/v1/manifestworks?"))
        .collect();
    ensure!(requests.len() == 3, "{requests:#?}");
    ensure!(requests.iter().all(|l| l.contains("limit=1")), "{requests:#?}");
    ensure!(requests[1..].iter().all(|l| l.contains("continue=")), "{requests:#?}");
    let list =
        stored(&hub, &http, "/apis/work.open-cluster-management.io/v1/manifestworks").await?;
    ensure!(item_names(&list) == ["w-cluster-a", "w-cluster-b", "w-cluster-c"], "{list}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_raw_reads_health_discovery_openapi_and_watch() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    ensure!(k.ok(&["get", "--raw", "/readyz"]).await? == "ok");
    let gv = "/apis/cluster.open-cluster-management.io/v1";
    let printed: Value = serde_json::from_str(&k.ok(&["get", "--raw", gv]).await?)?;
    ensure!(printed["kind"] == "APIResourceList" && printed == stored(&hub, &http, gv).await?);
    let root: Value = serde_json::from_str(&k.ok(&["get", "--raw", "/openapi/v3"]).await?)?;
    let url = root["paths"]["apis/cluster.open-cluster-management.io/v1"]["serverRelativeURL"]
        .as_str()
        .context("the group-version in /openapi/v3")?;
    ensure!(url.starts_with("/openapi/v3/apis/cluster.open-cluster-management.io/v1?hash="));

    create(&hub, &http, MCL, cluster("c1", json!({}))).await?;
    create(&hub, &http, MCL, cluster("c2", json!({}))).await?;
    // The server ends the watch after timeoutSeconds; kubectl prints each event line.
    let out = k
        .ok(&["get", "--raw", &format!("{MCL}?watch=1&resourceVersion=0&timeoutSeconds=1")])
        .await?;
    let events: Vec<Value> =
        out.lines().map(serde_json::from_str).collect::<Result<_, _>>().context(out.clone())?;
    let list = stored(&hub, &http, MCL).await?;
    ensure!(events.len() == 2 && events.iter().all(|e| e["type"] == "ADDED"), "{out}");
    for (event, item) in events.iter().zip(list["items"].as_array().context("items")?) {
        ensure!(event["object"]["metadata"] == item["metadata"], "{event} vs {item}");
        ensure!(event["object"]["kind"] == "ManagedCluster", "{event}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_watch_prints_added_modified_and_deleted_events() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    create(&hub, &http, MCL, cluster("c1", json!({}))).await?;
    create(&hub, &http, MCL, cluster("c2", json!({}))).await?;
    let mut watch = k.spawn(&["get", "mcl", "-w", "--output-watch-events"])?;
    // kubectl lists, prints, then watches from the list's resourceVersion: every change after
    // the rows are printed is an event.
    watch.printed("https://c2:6443").await?;
    merge_patch(&hub, &http, &format!("{MCL}/c1"), json!({"spec": {"hubAcceptsClient": false}}))
        .await?;
    delete(&hub, &http, &format!("{MCL}/c2")).await?;
    watch.printed("DELETED").await?;
    let t = Printed::parse(&watch.stdout())?;
    ensure!(t.header[..3] == ["EVENT", "NAME", "HUB ACCEPTED"], "{t:?}");
    let events: Vec<(&str, &str, &str)> =
        t.rows.iter().map(|r| (r[0].as_str(), r[1].as_str(), r[2].as_str())).collect();
    ensure!(
        events
            == [
                ("ADDED", "c1", "true"),
                ("ADDED", "c2", "true"),
                ("MODIFIED", "c1", "false"),
                ("DELETED", "c2", "true")
            ],
        "{t:?}"
    );
    ensure!(absent(&hub, &http, &format!("{MCL}/c2")).await?);
    ensure!(stored(&hub, &http, &format!("{MCL}/c1")).await?["spec"]["hubAcceptsClient"] == false);
    Ok(())
}
