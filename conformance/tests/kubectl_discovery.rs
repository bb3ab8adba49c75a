//! The kubectl suite, discovery and schema part: `kubectl version`, `api-versions`,
//! `api-resources` (`-o wide`, `--api-group`, `--namespaced`), `explain` on nested fields checked
//! against the published OpenAPI, and `describe` of OCM and core objects with and without Events.

use std::collections::BTreeSet;

use anyhow::{Context as _, ensure};
use ocm_conformance::kubectl::{
    MCL, Printed, cluster, create, get_with, item_names, setup, stored,
};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_reports_the_servers_version() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let served = stored(&hub, &http, "/version").await?;
    let git = served["gitVersion"].as_str().context("gitVersion")?;
    let out = k.ok(&["version"]).await?;
    ensure!(out.lines().any(|l| l == format!("Server Version: {git}")), "{out}");
    ensure!(out.lines().any(|l| l.starts_with("Client Version: v1.")), "{out}");
    let printed: Value = serde_json::from_str(&k.ok(&["version", "-o", "json"]).await?)?;
    ensure!(printed["serverVersion"] == served, "{printed} vs {served}");
    ensure!(printed["serverVersion"]["major"] == "1", "{printed}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_versions_lists_every_served_group_version() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let out = k.ok(&["api-versions"]).await?;
    let printed: Vec<&str> = out.lines().collect();
    // The hub's discovery: /api's versions and every version of every group in /apis.
    let mut expected = BTreeSet::new();
    for v in stored(&hub, &http, "/api").await?["versions"].as_array().context("versions")? {
        expected.insert(v.as_str().context("version")?.to_owned());
    }
    for g in stored(&hub, &http, "/apis").await?["groups"].as_array().context("groups")? {
        for v in g["versions"].as_array().context("group versions")? {
            expected.insert(v["groupVersion"].as_str().context("groupVersion")?.to_owned());
        }
    }
    ensure!(printed == expected.iter().map(String::as_str).collect::<Vec<_>>(), "{out}");
    for gv in [
        "v1",
        "cluster.open-cluster-management.io/v1",
        "cluster.open-cluster-management.io/v1beta2",
        "work.open-cluster-management.io/v1",
        "addon.open-cluster-management.io/v1alpha1",
        "authentication.open-cluster-management.io/v1beta1",
        "coordination.k8s.io/v1",
    ] {
        ensure!(printed.contains(&gv), "{gv} missing: {out}");
    }
    // ManagedServiceAccount's deprecated v1alpha1 is in its CRD but has no conversion here.
    let unserved = "authentication.open-cluster-management.io/v1alpha1";
    ensure!(!printed.contains(&unserved), "{unserved} listed: {out}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_resources_by_group_and_scope() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let group = "cluster.open-cluster-management.io";
    let t = Printed::parse(&k.ok(&["api-resources", "-o", "wide", "--api-group", group]).await?)?;
    ensure!(
        t.header
            == ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND", "VERBS", "CATEGORIES"],
        "{t:?}"
    );
    ensure!(t.rows.iter().all(|r| r[2].starts_with(&format!("{group}/"))), "{t:?}");
    let names = t.names();
    for plural in [
        "addonplacementscores",
        "managedclusters",
        "managedclustersetbindings",
        "managedclustersets",
        "placementdecisions",
        "placements",
    ] {
        ensure!(names.contains(&plural), "{plural} missing: {t:?}");
    }
    // Each row is the preferred version's APIResource as the hub serves it.
    let row = names.iter().position(|n| *n == "managedclusters").context("managedclusters")?;
    let served = stored(&hub, &http, &format!("/apis/{group}/v1")).await?;
    let mcl = served["resources"]
        .as_array()
        .context("resources")?
        .iter()
        .find(|r| r["name"] == "managedclusters")
        .context("managedclusters served")?;
    let verbs: Vec<&str> =
        mcl["verbs"].as_array().context("verbs")?.iter().filter_map(Value::as_str).collect();
    let short: Vec<&str> = mcl["shortNames"]
        .as_array()
        .context("shortNames")?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    ensure!(t.cell(row, "SHORTNAMES")? == short.join(",") && short.contains(&"mcl"), "{t:?}");
    ensure!(t.cell(row, "APIVERSION")? == format!("{group}/v1"), "{t:?}");
    ensure!(t.cell(row, "NAMESPACED")? == "false" && t.cell(row, "KIND")? == "ManagedCluster");
    let mut sorted = verbs.clone();
    sorted.sort_unstable();
    ensure!(t.cell(row, "VERBS")? == sorted.join(","), "{t:?} vs {verbs:?}");
    ensure!(
        t.cell(row, "VERBS")? == "create,delete,deletecollection,get,list,patch,update,watch",
        "{t:?}"
    );
    let row = names.iter().position(|n| *n == "placements").context("placements")?;
    ensure!(t.cell(row, "NAMESPACED")? == "true" && t.cell(row, "KIND")? == "Placement");

    // ManagedServiceAccount, namespaced (in the cluster namespace), at its storage version.
    let group = "authentication.open-cluster-management.io";
    let t = Printed::parse(&k.ok(&["api-resources", "-o", "wide", "--api-group", group]).await?)?;
    ensure!(t.names() == ["managedserviceaccounts"], "{t:?}");
    ensure!(t.cell(0, "APIVERSION")? == format!("{group}/v1beta1"), "{t:?}");
    ensure!(t.cell(0, "NAMESPACED")? == "true", "{t:?}");
    ensure!(t.cell(0, "KIND")? == "ManagedServiceAccount" && t.cell(0, "SHORTNAMES")?.is_empty());
    ensure!(
        t.cell(0, "VERBS")? == "create,delete,deletecollection,get,list,patch,update,watch",
        "{t:?}"
    );

    // Cluster-scoped resources of every group, and only those.
    let t = Printed::parse(&k.ok(&["api-resources", "--namespaced=false"]).await?)?;
    ensure!(t.rows.iter().all(|r| r[t.header.len() - 2] == "false"), "{t:?}");
    let names = t.names();
    for plural in ["namespaces", "managedclusters", "managedclustersets", "clusterroles"] {
        ensure!(names.contains(&plural), "{plural} missing: {t:?}");
    }
    for plural in ["placements", "configmaps", "manifestworks", "leases"] {
        ensure!(!names.contains(&plural), "{plural} is namespaced: {t:?}");
    }
    let t = Printed::parse(&k.ok(&["api-resources", "--namespaced=true", "--api-group="]).await?)?;
    ensure!(t.names().contains(&"configmaps") && !t.names().contains(&"namespaces"), "{t:?}");
    Ok(())
}

/// Whitespace runs collapsed to one space: kubectl re-wraps descriptions.
fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether `out` has `want` as a line: the same indentation, the same words (describe aligns
/// values per block, so the gaps between them vary).
fn has_line(out: &str, want: &str) -> bool {
    let indent = |l: &str| l.len() - l.trim_start().len();
    out.lines().any(|l| indent(l) == indent(want) && squash(l) == squash(want))
}

/// The table under `describe`'s `Events:` (its rows: the dashes, then one per Event).
fn events_table(out: &str) -> anyhow::Result<Printed> {
    let section = out.split_once("\nEvents:").context("no Events section")?.1;
    let lines: Vec<&str> = section.lines().map(|l| l.strip_prefix("  ").unwrap_or(l)).collect();
    Printed::parse(&lines.join("\n"))
}

/// The schema of `kind` in the hub's OpenAPI v3 document for `gv`, and the document's
/// component schemas (for `$ref`s).
async fn published_schema(
    hub: &ocm_conformance::hub::TestHub,
    http: &reqwest::Client,
    gv: &str,
    kind: &str,
) -> anyhow::Result<(Value, Value)> {
    let doc = stored(hub, http, &format!("/openapi/v3/apis/{gv}")).await?;
    let schemas = doc["components"]["schemas"].as_object().context("components.schemas")?;
    let schema = schemas
        .values()
        .find(|s| s["x-kubernetes-group-version-kind"][0]["kind"] == kind)
        .cloned()
        .with_context(|| format!("no {kind} schema in {gv}"))?;
    Ok((schema, doc["components"]["schemas"].clone()))
}

/// The `type` of a property, following an `allOf: [{$ref}]` into `components`.
fn property_type<'a>(spec: &'a Value, components: &'a Value) -> Option<&'a str> {
    spec["type"].as_str().or_else(|| {
        let target = spec["allOf"][0]["$ref"].as_str()?.rsplit('/').next()?;
        components[target]["type"].as_str()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_walks_nested_fields() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let out = k.ok(&["explain", "managedcluster.spec.taints"]).await?;
    ensure!(out.contains("KIND:       ManagedCluster") && out.contains("VERSION:    v1"), "{out}");
    ensure!(out.contains("FIELD: taints <[]Object>"), "{out}");
    let (schema, components) =
        published_schema(&hub, &http, "cluster.open-cluster-management.io/v1", "ManagedCluster")
            .await?;
    let taints = &schema["properties"]["spec"]["properties"]["taints"];
    let description = taints["description"].as_str().context("taints description")?;
    ensure!(squash(&out).contains(&squash(description)), "{out}\nvs {description}");
    // Every field of the item, with its type, required marks and enum.
    let item = &taints["items"];
    let required: Vec<&str> =
        item["required"].as_array().context("required")?.iter().filter_map(Value::as_str).collect();
    let properties = item["properties"].as_object().context("item properties")?;
    ensure!(properties.len() >= 4, "a taint has key, value, effect and timeAdded: {item}");
    for (field, spec) in properties {
        let mark = if required.contains(&field.as_str()) { " -required-" } else { "" };
        let kind = property_type(spec, &components).with_context(|| format!("type of {spec}"))?;
        let line = format!("  {field}\t<{kind}>{mark}");
        ensure!(out.lines().any(|l| l == line), "no {line:?} in\n{out}");
    }
    ensure!(out.contains("enum: NoSelect, PreferNoSelect, NoSelectIfNew"), "{out}");

    let out = k.ok(&["explain", "manifestwork.spec.workload.manifests"]).await?;
    ensure!(out.contains("GROUP:      work.open-cluster-management.io"), "{out}");
    ensure!(
        out.contains("KIND:       ManifestWork") && out.contains("FIELD: manifests <[]Object>")
    );
    let (schema, _) =
        published_schema(&hub, &http, "work.open-cluster-management.io/v1", "ManifestWork").await?;
    let manifests =
        &schema["properties"]["spec"]["properties"]["workload"]["properties"]["manifests"];
    let description = manifests["description"].as_str().context("manifests description")?;
    ensure!(squash(&out).contains(&squash(description)), "{out}\nvs {description}");
    let out = k.ok(&["explain", "managedserviceaccount.spec.rotation"]).await?;
    ensure!(out.contains("GROUP:      authentication.open-cluster-management.io"), "{out}");
    ensure!(
        out.contains("KIND:       ManagedServiceAccount") && out.contains("VERSION:    v1beta1")
    );
    for line in ["  enabled\t<boolean>", "  validity\t<string>"] {
        ensure!(out.lines().any(|l| l == line), "no {line:?} in\n{out}");
    }
    // A field that does not exist.
    let r = k.run(&["explain", "managedcluster.spec.nosuchfield"]).await?;
    ensure!(r.code == 1 && r.stderr.contains("field \"nosuchfield\" does not exist"), "{r:?}");
    // --recursive prints the whole subtree.
    let out = k.ok(&["explain", "placement.spec.predicates", "--recursive"]).await?;
    ensure!(out.contains("requiredClusterSelector\t<Object>"), "{out}");
    ensure!(
        // A shared type is published by reference, and kubectl names it (as for core kinds).
        out.contains("labelSelector\t<LabelSelector>")
            && out.contains("matchLabels\t<map[string]string>")
    );
    Ok(())
}

/// A core Event about `object` (kind, name, uid; namespace when namespaced), stored in `ns`.
fn event(ns: &str, name: &str, object: &Value, reason: &str, message: &str, count: u32) -> Value {
    let meta = &object["metadata"];
    let mut involved = json!({
        "apiVersion": object["apiVersion"], "kind": object["kind"],
        "name": meta["name"], "uid": meta["uid"],
    });
    if let Some(n) = meta["namespace"].as_str() {
        involved["namespace"] = json!(n);
    }
    json!({
        "metadata": {"name": name, "namespace": ns},
        "involvedObject": involved, "reason": reason, "message": message,
        "type": "Warning", "source": {"component": "registration-controller"}, "count": count,
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z",
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_an_ocm_object_then_its_events() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let mut c1 = cluster("c1", json!({"env": "prod", "region": "eu"}));
    c1["spec"]["taints"] = json!([{"key": "gpu", "value": "none", "effect": "NoSelect",
                                   "timeAdded": "2026-01-01T00:00:00Z"}]);
    let obj = create(&hub, &http, MCL, c1).await?;
    let out = k.ok(&["describe", "mcl", "c1"]).await?;
    for line in [
        "Name:         c1",
        "Namespace:    ",
        "Labels:       cluster.open-cluster-management.io/clusterset=default",
        "              env=prod",
        "              region=eu",
        "Annotations:  <none>",
        "API Version:  cluster.open-cluster-management.io/v1",
        "Kind:         ManagedCluster",
        "Spec:",
        "  Hub Accepts Client:  true",
        "    Effect:      NoSelect",
        "    Key:         gpu",
        "Events:  <none>",
    ] {
        ensure!(has_line(&out, line), "no {line:?} in\n{out}");
    }
    // The hub stamps a new taint's timeAdded (OCM's webhook), whatever the client sent.
    let added = obj["spec"]["taints"][0]["timeAdded"].as_str().context("timeAdded")?;
    ensure!(added != "2026-01-01T00:00:00Z", "{obj}");
    ensure!(has_line(&out, &format!("    Time Added:  {added}")), "{out}");
    let uid = obj["metadata"]["uid"].as_str().context("uid")?;
    ensure!(has_line(&out, &format!("  UID:  {uid}")), "{out}");

    // An Event about the cluster (in default, as the registration controller records them).
    let ev = event("default", "c1.1", &obj, "ClusterJoined", "the cluster joined the hub", 3);
    create(&hub, &http, "/api/v1/namespaces/default/events", ev).await?;
    let out = k.ok(&["describe", "mcl", "c1"]).await?;
    let t = events_table(&out)?;
    ensure!(t.header == ["Type", "Reason", "Age", "From", "Message"], "{out}");
    ensure!(t.rows.len() == 2 && t.rows[0][0].starts_with("----"), "{out}");
    ensure!(t.cell(1, "Type")? == "Warning" && t.cell(1, "Reason")? == "ClusterJoined", "{out}");
    ensure!(t.cell(1, "Age")?.contains("(x3 over "), "{out}");
    ensure!(t.cell(1, "From")? == "registration-controller", "{out}");
    ensure!(t.cell(1, "Message")? == "the cluster joined the hub", "{out}");
    // The hub finds the Event the way describe asks for it.
    let selector = format!("involvedObject.name=c1,involvedObject.uid={uid}");
    let (code, list) = get_with(&hub, &http, "/api/v1/events", "fieldSelector", &selector).await?;
    ensure!(code == 200 && item_names(&list) == ["c1.1"], "{code} {list}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_a_core_object_lists_its_events() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let cms = "/api/v1/namespaces/default/configmaps";
    let cm = json!({"metadata": {"name": "settings", "labels": {"app": "hub"},
                                 "annotations": {"owner": "ops"}},
                    "data": {"mode": "fast"}});
    let obj = create(&hub, &http, cms, cm).await?;
    let out = k.ok(&["describe", "configmap", "settings"]).await?;
    for line in [
        "Name:         settings",
        "Namespace:    default",
        "Labels:       app=hub",
        "Annotations:  owner: ops",
        "mode:",
        "fast",
        "Events:  <none>",
    ] {
        ensure!(has_line(&out, line), "no {line:?} in\n{out}");
    }
    let mut with_kind = obj.clone();
    with_kind["apiVersion"] = json!("v1");
    with_kind["kind"] = json!("ConfigMap");
    let ev = event("default", "settings.1", &with_kind, "Reloaded", "mode changed", 1);
    create(&hub, &http, "/api/v1/namespaces/default/events", ev).await?;
    // An Event about another object of the same name and kind is not listed.
    let mut other = with_kind.clone();
    other["metadata"]["uid"] = json!("00000000-0000-0000-0000-000000000000");
    let ev = event("default", "settings.2", &other, "Stale", "about an older settings", 1);
    create(&hub, &http, "/api/v1/namespaces/default/events", ev).await?;
    let out = k.ok(&["describe", "cm", "settings"]).await?;
    let t = events_table(&out)?;
    ensure!(t.rows.len() == 2, "one event only: {out}");
    ensure!(t.cell(1, "Reason")? == "Reloaded" && t.cell(1, "Message")? == "mode changed", "{out}");
    let list = stored(&hub, &http, "/api/v1/namespaces/default/events").await?;
    ensure!(item_names(&list) == ["settings.1", "settings.2"], "{list}");
    Ok(())
}
