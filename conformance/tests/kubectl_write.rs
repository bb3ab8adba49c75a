//! The kubectl suite, writing part: `create -f` (stdin, generateName, `--dry-run=server`,
//! AlreadyExists, schema and strict-decoding refusals, core kinds), `apply` of a fresh object,
//! `replace`, `patch --type merge|json` (also of `/status`), `label`, `annotate` and `edit`, each
//! checked against what the hub stores afterwards.

use anyhow::{Context as _, ensure};
use ocm_conformance::kubectl::{
    MCL, Printed, absent, cluster, create, item_names, setup, stored, write_manifest,
};
use serde_json::{Value, json};

const PLACEMENTS: &str =
    "/apis/cluster.open-cluster-management.io/v1beta1/namespaces/default/placements";

fn rv(obj: &Value) -> &str {
    obj["metadata"]["resourceVersion"].as_str().unwrap_or("")
}

const GENERATED_PLACEMENT: &str = "apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata:
  generateName: spread-
  labels:
    app: demo
spec:
  numberOfClusters: 2
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_from_stdin_with_generate_name() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let mut printed = Vec::new();
    for _ in 0..2 {
        let r = k.run_with(&["create", "-f", "-"], Some(GENERATED_PLACEMENT)).await?;
        ensure!(r.code == 0, "{r:?}");
        let name = r
            .stdout
            .trim()
            .strip_prefix("placement.cluster.open-cluster-management.io/")
            .and_then(|s| s.strip_suffix(" created"))
            .with_context(|| format!("{r:?}"))?
            .to_owned();
        let suffix = name.strip_prefix("spread-").context("the generateName prefix")?;
        ensure!(suffix.len() == 5 && suffix.chars().all(|c| c.is_ascii_alphanumeric()), "{name}");
        printed.push(name);
    }
    ensure!(printed[0] != printed[1], "{printed:?}");
    let list = stored(&hub, &http, PLACEMENTS).await?;
    let mut names = item_names(&list);
    names.sort();
    printed.sort();
    ensure!(names == printed, "{names:?} vs {printed:?}");
    let obj = &list["items"][0];
    ensure!(obj["metadata"]["generateName"] == "spread-" && obj["spec"]["numberOfClusters"] == 2);
    Ok(())
}

const P9: &str = "apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata:
  name: p9
spec:
  numberOfClusters: 1
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_dry_run_server_then_already_exists() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let dir = tempfile::tempdir()?;
    let path = write_manifest(&dir, "p9.yaml", P9)?;
    let out = k.ok(&["create", "--dry-run=server", "-f", &path]).await?;
    ensure!(
        out.trim() == "placement.cluster.open-cluster-management.io/p9 created (server dry run)"
    );
    let r = k.run(&["get", "placement", "p9"]).await?;
    ensure!(r.code == 1, "{r:?}");
    ensure!(
        r.stderr.trim()
            == "Error from server (NotFound): placements.cluster.open-cluster-management.io \"p9\" not found",
        "{r:?}"
    );
    ensure!(absent(&hub, &http, &format!("{PLACEMENTS}/p9")).await?);

    let out = k.ok(&["create", "-f", &path]).await?;
    ensure!(out.trim() == "placement.cluster.open-cluster-management.io/p9 created", "{out}");
    let first = stored(&hub, &http, &format!("{PLACEMENTS}/p9")).await?;
    let r = k.run(&["create", "-f", &path]).await?;
    ensure!(r.code == 1 && r.stdout.is_empty(), "{r:?}");
    ensure!(
        r.stderr.trim()
            == format!(
                "Error from server (AlreadyExists): error when creating \"{path}\": \
                 placements.cluster.open-cluster-management.io \"p9\" already exists"
            ),
        "{r:?}"
    );
    let after = stored(&hub, &http, &format!("{PLACEMENTS}/p9")).await?;
    ensure!(after == first, "the second create changed nothing: {after}");
    Ok(())
}

const BAD_CLUSTER: &str = "apiVersion: cluster.open-cluster-management.io/v1
kind: ManagedCluster
metadata:
  name: bad
spec:
  hubAcceptsClient: true
  taints:
  - key: gpu
    effect: Sometimes
    timeAdded: \"2026-01-01T00:00:00Z\"
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_refuses_invalid_objects_and_unknown_fields() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let dir = tempfile::tempdir()?;
    // A value outside the schema's enum: 422, the field named.
    let path = write_manifest(&dir, "bad.yaml", BAD_CLUSTER)?;
    let r = k.run(&["create", "-f", &path]).await?;
    ensure!(r.code == 1 && r.stdout.is_empty(), "{r:?}");
    ensure!(
        r.stderr.trim()
            == "The ManagedCluster \"bad\" is invalid: spec.taints[0].effect: Unsupported value: \
                \"Sometimes\": supported values: \"NoSelect\", \"PreferNoSelect\", \"NoSelectIfNew\"",
        "{r:?}"
    );
    // Two errors at once: every one listed.
    let path = write_manifest(
        &dir,
        "bad2.yaml",
        &BAD_CLUSTER.replace("hubAcceptsClient: true", "hubAcceptsClient: \"yes\""),
    )?;
    let r = k.run(&["create", "-f", &path]).await?;
    ensure!(
        r.code == 1 && r.stderr.starts_with("The ManagedCluster \"bad\" is invalid: \n"),
        "{r:?}"
    );
    ensure!(r.stderr.contains("\n* spec.hubAcceptsClient: Invalid value: \"string\""), "{r:?}");
    ensure!(r.stderr.contains("\n* spec.taints[0].effect: Unsupported value"), "{r:?}");
    ensure!(absent(&hub, &http, &format!("{MCL}/bad")).await?);

    // An unknown field: strict decoding refuses it (kubectl asks for fieldValidation=Strict).
    let path = write_manifest(
        &dir,
        "p.yaml",
        &P9.replace("numberOfClusters: 1", "numberOfClusters: 1\n  colour: red"),
    )?;
    let r = k.run(&["create", "-f", &path]).await?;
    ensure!(r.code == 1, "{r:?}");
    ensure!(r.stderr.starts_with("Error from server (BadRequest): error when creating"), "{r:?}");
    ensure!(r.stderr.contains("strict decoding error: unknown field \"spec.colour\""), "{r:?}");
    ensure!(absent(&hub, &http, &format!("{PLACEMENTS}/p9")).await?);
    // Without strict validation the field is dropped with a warning, and the object stored.
    let r = k.run(&["create", "--validate=warn", "-f", &path]).await?;
    ensure!(r.code == 0 && r.stdout.trim().ends_with("p9 created"), "{r:?}");
    ensure!(r.stderr.contains("unknown field \"spec.colour\""), "{r:?}");
    let obj = stored(&hub, &http, &format!("{PLACEMENTS}/p9")).await?;
    ensure!(obj["spec"].get("colour").is_none() && obj["spec"]["numberOfClusters"] == 1, "{obj}");
    Ok(())
}

const CORE_OBJECTS: &str = "apiVersion: v1
kind: Namespace
metadata:
  name: cluster-east
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: agent
  namespace: cluster-east
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: agent-lease
  namespace: cluster-east
spec:
  holderIdentity: agent-1
  leaseDurationSeconds: 60
---
apiVersion: v1
kind: Secret
metadata:
  name: bootstrap
  namespace: cluster-east
data:
  token: c2VjcmV0
stringData:
  user: admin
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: cluster-east
data:
  mode: fast
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_core_kinds_from_a_multi_document_file() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let r = k.run_with(&["create", "-f", "-"], Some(CORE_OBJECTS)).await?;
    ensure!(r.code == 0, "{r:?}");
    ensure!(
        r.stdout.lines().collect::<Vec<_>>()
            == [
                "namespace/cluster-east created",
                "serviceaccount/agent created",
                "lease.coordination.k8s.io/agent-lease created",
                "secret/bootstrap created",
                "configmap/settings created",
            ],
        "{r:?}"
    );
    let ns = "/api/v1/namespaces/cluster-east";
    ensure!(stored(&hub, &http, ns).await?["status"]["phase"] == "Active");
    stored(&hub, &http, &format!("{ns}/serviceaccounts/agent")).await?;
    let lease = stored(
        &hub,
        &http,
        "/apis/coordination.k8s.io/v1/namespaces/cluster-east/leases/agent-lease",
    )
    .await?;
    ensure!(lease["spec"]["holderIdentity"] == "agent-1", "{lease}");
    let secret = stored(&hub, &http, &format!("{ns}/secrets/bootstrap")).await?;
    // As kube-apiserver stores it: stringData folded into data, type defaulted.
    ensure!(
        secret["data"]["token"] == "c2VjcmV0" && secret["data"]["user"] == "YWRtaW4=",
        "{secret}"
    );
    ensure!(secret.get("stringData").is_none() && secret["type"] == "Opaque", "{secret}");
    let cm = stored(&hub, &http, &format!("{ns}/configmaps/settings")).await?;
    ensure!(cm["data"]["mode"] == "fast", "{cm}");
    // kubectl reads them back through the hub's tables.
    let t = Printed::parse(&k.ok(&["get", "secret,lease,sa", "-n", "cluster-east"]).await?)?;
    ensure!(t.names().contains(&"secret/bootstrap"), "{t:?}");
    let t = Printed::parse(&k.ok(&["get", "secrets", "-n", "cluster-east"]).await?)?;
    ensure!(t.cell(0, "TYPE")? == "Opaque" && t.cell(0, "DATA")? == "2", "{t:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_creates_then_configures_an_ocm_object() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let dir = tempfile::tempdir()?;
    let path = write_manifest(&dir, "p9.yaml", P9)?;
    let out = k.ok(&["apply", "-f", &path]).await?;
    ensure!(out.trim() == "placement.cluster.open-cluster-management.io/p9 created", "{out}");
    let obj = stored(&hub, &http, &format!("{PLACEMENTS}/p9")).await?;
    let last: Value = serde_json::from_str(
        obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .context("last-applied annotation")?,
    )?;
    ensure!(last["spec"]["numberOfClusters"] == 1 && last["metadata"]["namespace"] == "default");
    let out = k.ok(&["apply", "-f", &path]).await?;
    ensure!(out.trim() == "placement.cluster.open-cluster-management.io/p9 unchanged", "{out}");
    ensure!(rv(&stored(&hub, &http, &format!("{PLACEMENTS}/p9")).await?) == rv(&obj));
    let path =
        write_manifest(&dir, "p9.yaml", &P9.replace("numberOfClusters: 1", "numberOfClusters: 3"))?;
    let out = k.ok(&["apply", "-f", &path]).await?;
    ensure!(out.trim() == "placement.cluster.open-cluster-management.io/p9 configured", "{out}");
    let obj = stored(&hub, &http, &format!("{PLACEMENTS}/p9")).await?;
    ensure!(obj["spec"]["numberOfClusters"] == 3 && obj["metadata"]["generation"] == 2, "{obj}");
    Ok(())
}

const C1: &str = "apiVersion: cluster.open-cluster-management.io/v1
kind: ManagedCluster
metadata:
  name: c1
  labels:
    env: dev
spec:
  hubAcceptsClient: true
  leaseDurationSeconds: 60
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_puts_the_file_and_refuses_a_stale_version() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let c1 = format!("{MCL}/c1");
    create(&hub, &http, MCL, cluster("c1", json!({"env": "prod", "team": "a"}))).await?;
    let dir = tempfile::tempdir()?;
    // No resourceVersion in the file: kubectl reads the current one and PUTs the whole file.
    let path = write_manifest(&dir, "c1.yaml", C1)?;
    let out = k.ok(&["replace", "-f", &path]).await?;
    ensure!(out.trim() == "managedcluster.cluster.open-cluster-management.io/c1 replaced", "{out}");
    let obj = stored(&hub, &http, &c1).await?;
    ensure!(obj["metadata"]["labels"] == json!({"env": "dev"}), "{obj}");
    ensure!(obj["spec"].get("managedClusterClientConfigs").is_none(), "{obj}");
    ensure!(obj["metadata"]["generation"] == 2, "{obj}");

    // A resourceVersion read before a later write: Conflict, nothing stored.
    let old = k.ok(&["get", "mcl", "c1", "-o", "yaml"]).await?;
    let stale = write_manifest(
        &dir,
        "stale.yaml",
        &old.replace("leaseDurationSeconds: 60", "leaseDurationSeconds: 90"),
    )?;
    let out = k.ok(&["label", "mcl", "c1", "x=y"]).await?;
    ensure!(out.trim() == "managedcluster.cluster.open-cluster-management.io/c1 labeled", "{out}");
    let labeled = stored(&hub, &http, &c1).await?;
    let r = k.run(&["replace", "-f", &stale]).await?;
    ensure!(r.code == 1 && r.stdout.is_empty(), "{r:?}");
    ensure!(
        r.stderr.trim()
            == format!(
                "Error from server (Conflict): error when replacing \"{stale}\": Operation cannot \
                 be fulfilled on managedclusters.cluster.open-cluster-management.io \"c1\": the \
                 object has been modified; please apply your changes to the latest version and \
                 try again"
            ),
        "{r:?}"
    );
    ensure!(stored(&hub, &http, &c1).await? == labeled, "the refused replace stored nothing");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_merge_and_json_change_the_spec() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let p1 = format!("{PLACEMENTS}/p1");
    let placement = json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
        "metadata": {"name": "p1"},
        "spec": {"numberOfClusters": 1, "clusterSets": ["a", "b"]},
    });
    create(&hub, &http, PLACEMENTS, placement).await?;
    let out = k
        .ok(&[
            "patch",
            "placement",
            "p1",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"numberOfClusters":4,"clusterSets":["c"]}}"#,
        ])
        .await?;
    ensure!(out.trim() == "placement.cluster.open-cluster-management.io/p1 patched", "{out}");
    let obj = stored(&hub, &http, &p1).await?;
    ensure!(obj["spec"]["numberOfClusters"] == 4 && obj["spec"]["clusterSets"] == json!(["c"]));
    ensure!(obj["metadata"]["generation"] == 2, "{obj}");
    // A merge patch that changes nothing, a second later (so a write would move the
    // managedFields time): nothing is written.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let out = k
        .ok(&[
            "patch",
            "placement",
            "p1",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"numberOfClusters":4}}"#,
        ])
        .await?;
    ensure!(out.trim().ends_with("p1 patched (no change)"), "{out}");
    ensure!(rv(&stored(&hub, &http, &p1).await?) == rv(&obj));
    // `null` removes.
    k.ok(&[
        "patch",
        "placement",
        "p1",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"clusterSets":null}}"#,
    ])
    .await?;
    ensure!(stored(&hub, &http, &p1).await?["spec"].get("clusterSets").is_none());

    // JSON patch: replace, add to the end of a list, test then remove.
    create(&hub, &http, MCL, cluster("c1", json!({}))).await?;
    let patch = r#"[{"op":"replace","path":"/spec/leaseDurationSeconds","value":30},
        {"op":"add","path":"/spec/managedClusterClientConfigs/-","value":{"url":"https://c1-b:6443"}}]"#;
    let out = k.ok(&["patch", "mcl", "c1", "--type", "json", "-p", patch]).await?;
    ensure!(out.trim() == "managedcluster.cluster.open-cluster-management.io/c1 patched", "{out}");
    let obj = stored(&hub, &http, &format!("{MCL}/c1")).await?;
    ensure!(obj["spec"]["leaseDurationSeconds"] == 30, "{obj}");
    let urls: Vec<&str> = obj["spec"]["managedClusterClientConfigs"]
        .as_array()
        .context("configs")?
        .iter()
        .filter_map(|c| c["url"].as_str())
        .collect();
    ensure!(urls == ["https://c1:6443", "https://c1-b:6443"], "{obj}");
    let patch = r#"[{"op":"test","path":"/spec/leaseDurationSeconds","value":30},
        {"op":"remove","path":"/spec/managedClusterClientConfigs/0"}]"#;
    k.ok(&["patch", "mcl", "c1", "--type", "json", "-p", patch]).await?;
    let obj = stored(&hub, &http, &format!("{MCL}/c1")).await?;
    ensure!(obj["spec"]["managedClusterClientConfigs"] == json!([{"url": "https://c1-b:6443"}]));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_json_patches_change_nothing() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let c1 = format!("{MCL}/c1");
    create(&hub, &http, MCL, cluster("c1", json!({}))).await?;
    let before = stored(&hub, &http, &c1).await?;
    // A failing `test` op: the whole patch is refused, the op before it included.
    let patch = r#"[{"op":"replace","path":"/spec/hubAcceptsClient","value":false},
        {"op":"test","path":"/spec/leaseDurationSeconds","value":99}]"#;
    let r = k.run(&["patch", "mcl", "c1", "--type", "json", "-p", patch]).await?;
    ensure!(r.code == 1 && r.stdout.is_empty(), "{r:?}");
    // kube-apiserver's generic 422, which kubectl prints as "The request is invalid".
    ensure!(
        r.stderr.starts_with("The request is invalid: ")
            && r.stderr.contains("/spec/leaseDurationSeconds"),
        "{r:?}"
    );
    // A path into a list the object does not have, and past the end of one it has.
    for path in ["/spec/taints/0/key", "/spec/managedClusterClientConfigs/3/url"] {
        let patch = format!(r#"[{{"op":"replace","path":"{path}","value":"x"}}]"#);
        let r = k.run(&["patch", "mcl", "c1", "--type", "json", "-p", &patch]).await?;
        ensure!(
            r.code == 1
                && r.stderr.starts_with("The request is invalid: ")
                && r.stderr.contains(path),
            "{path}: {r:?}"
        );
    }
    // Not a JSON patch at all: 400.
    let r = k.run(&["patch", "mcl", "c1", "--type", "json", "-p", r#"{"spec":{}}"#]).await?;
    ensure!(r.code == 1 && r.stderr.starts_with("Error from server (BadRequest): "), "{r:?}");
    // A merge patch that breaks the schema.
    let r = k
        .run(&[
            "patch",
            "mcl",
            "c1",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"leaseDurationSeconds":"long"}}"#,
        ])
        .await?;
    ensure!(r.code == 1, "{r:?}");
    ensure!(
        r.stderr.starts_with("The ManagedCluster \"c1\" is invalid: spec.leaseDurationSeconds"),
        "{r:?}"
    );
    ensure!(stored(&hub, &http, &c1).await? == before, "nothing changed");
    Ok(())
}

fn available(status: &str) -> Value {
    json!({"status": {"conditions": [{
        "type": "ManagedClusterConditionAvailable", "status": status, "reason": "LeaseUpdated",
        "message": "the agent renews its lease", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_patches_go_through_the_subresource() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let c1 = format!("{MCL}/c1");
    create(&hub, &http, MCL, cluster("c1", json!({}))).await?;
    let patch = available("True").to_string();
    let out = k
        .ok(&["patch", "mcl", "c1", "--subresource=status", "--type", "merge", "-p", &patch])
        .await?;
    ensure!(out.trim() == "managedcluster.cluster.open-cluster-management.io/c1 patched", "{out}");
    let obj = stored(&hub, &http, &c1).await?;
    ensure!(obj["status"]["conditions"][0]["status"] == "True", "{obj}");
    ensure!(obj["metadata"]["generation"] == 1, "status writes keep the generation: {obj}");
    // Read through the subresource.
    let out = k
        .ok(&[
            "get",
            "mcl",
            "c1",
            "--subresource=status",
            "-o",
            "jsonpath={.status.conditions[0].type}={.status.conditions[0].status}",
        ])
        .await?;
    ensure!(out == "ManagedClusterConditionAvailable=True", "{out}");
    // The status endpoint prints the kind's own columns, like the main resource.
    let t = Printed::parse(&k.ok(&["get", "mcl", "c1", "--subresource=status"]).await?)?;
    ensure!(t.names() == ["c1"] && t.cell(0, "AVAILABLE")? == "True", "{t:?}");
    // The main resource ignores status: nothing changes.
    let patch = available("False").to_string();
    let out = k.ok(&["patch", "mcl", "c1", "--type", "merge", "-p", &patch]).await?;
    ensure!(out.trim().ends_with("c1 patched (no change)"), "{out}");
    ensure!(stored(&hub, &http, &c1).await? == obj, "the main resource left status alone");
    // The subresource ignores the spec.
    let patch =
        r#"{"spec":{"hubAcceptsClient":false},"status":{"version":{"kubernetes":"v1.32.0"}}}"#;
    k.ok(&["patch", "mcl", "c1", "--subresource=status", "--type", "merge", "-p", patch]).await?;
    let after = stored(&hub, &http, &c1).await?;
    ensure!(after["spec"]["hubAcceptsClient"] == true, "{after}");
    ensure!(after["status"]["version"]["kubernetes"] == "v1.32.0", "{after}");
    ensure!(after["metadata"]["generation"] == 1, "{after}");
    let out = k.ok(&["get", "mcl", "c1", "-o", "jsonpath={.status.version.kubernetes}"]).await?;
    ensure!(out == "v1.32.0", "{out}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manifestwork_status_patch_keeps_the_spec_and_generation() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    create(&hub, &http, "/api/v1/namespaces", json!({"metadata": {"name": "cluster1"}})).await?;
    let works = "/apis/work.open-cluster-management.io/v1/namespaces/cluster1/manifestworks";
    let work = json!({
        "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {"name": "hello"},
        "spec": {"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "hello", "namespace": "default"}, "data": {"a": "1"}}]}},
    });
    create(&hub, &http, works, work).await?;
    let status = json!({"status": {"conditions": [{
        "type": "Applied", "status": "True", "reason": "AppliedManifestWorkComplete",
        "message": "Apply manifest work complete", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        "resourceStatus": {"manifests": [{"resourceMeta": {"ordinal": 0, "group": "", "version": "v1",
            "kind": "ConfigMap", "resource": "configmaps", "name": "hello", "namespace": "default"},
            "conditions": [{"type": "Available", "status": "True", "reason": "ResourceAvailable",
                "message": "Resource is available", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}]}}});
    let out = k
        .ok(&[
            "-n",
            "cluster1",
            "patch",
            "manifestwork",
            "hello",
            "--subresource=status",
            "--type",
            "merge",
            "-p",
            &status.to_string(),
        ])
        .await?;
    ensure!(out.trim() == "manifestwork.work.open-cluster-management.io/hello patched", "{out}");
    let obj = stored(&hub, &http, &format!("{works}/hello")).await?;
    ensure!(obj["metadata"]["generation"] == 1, "{obj}");
    ensure!(obj["status"]["resourceStatus"]["manifests"][0]["resourceMeta"]["name"] == "hello");
    let out = k
        .ok(&[
            "-n",
            "cluster1",
            "get",
            "manifestwork",
            "hello",
            "--subresource=status",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Applied\")].reason}",
        ])
        .await?;
    ensure!(out == "AppliedManifestWorkComplete", "{out}");
    // A spec change moves the generation and keeps the status.
    let patch = r#"[{"op":"replace","path":"/spec/workload/manifests/0/data/a","value":"2"}]"#;
    k.ok(&["-n", "cluster1", "patch", "manifestwork", "hello", "--type", "json", "-p", patch])
        .await?;
    let after = stored(&hub, &http, &format!("{works}/hello")).await?;
    ensure!(after["metadata"]["generation"] == 2 && after["status"] == obj["status"], "{after}");
    ensure!(after["spec"]["workload"]["manifests"][0]["data"]["a"] == "2", "{after}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_add_overwrite_and_remove() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let c1 = format!("{MCL}/c1");
    create(&hub, &http, MCL, cluster("c1", json!({"app": "demo"}))).await?;
    // (without the cluster-set label OCM's webhook defaults)
    let labels = |obj: Value| {
        let mut l = obj["metadata"]["labels"].clone();
        l.as_object_mut().map(|m| m.remove("cluster.open-cluster-management.io/clusterset"));
        l
    };
    let out = k.ok(&["label", "mcl", "c1", "env=prod"]).await?;
    ensure!(out.trim() == "managedcluster.cluster.open-cluster-management.io/c1 labeled", "{out}");
    ensure!(labels(stored(&hub, &http, &c1).await?) == json!({"app": "demo", "env": "prod"}));
    let before = stored(&hub, &http, &c1).await?;
    let r = k.run(&["label", "mcl", "c1", "env=dev"]).await?;
    ensure!(r.code == 1 && r.stdout.is_empty(), "{r:?}");
    ensure!(r.stderr.trim() == "error: 'env' already has a value (prod), and --overwrite is false");
    ensure!(stored(&hub, &http, &c1).await? == before, "nothing changed");
    let out = k.ok(&["label", "mcl", "c1", "env=dev", "--overwrite"]).await?;
    ensure!(out.trim().ends_with("c1 labeled"), "{out}");
    ensure!(labels(stored(&hub, &http, &c1).await?)["env"] == "dev");
    let out = k.ok(&["label", "mcl", "c1", "env-", "app-"]).await?;
    ensure!(
        out.trim() == "managedcluster.cluster.open-cluster-management.io/c1 unlabeled",
        "{out}"
    );
    let obj = stored(&hub, &http, &c1).await?;
    ensure!(labels(obj.clone()) == json!({}), "{obj}");
    ensure!(obj["metadata"]["generation"] == 1, "labels are metadata: {obj}");
    // kubectl checks label values itself: nothing is sent.
    let r = k.run(&["label", "mcl", "c1", "bad=-x-"]).await?;
    ensure!(
        r.code == 1 && r.stderr.starts_with("error: invalid label value: \"bad=-x-\""),
        "{r:?}"
    );
    ensure!(stored(&hub, &http, &c1).await? == obj);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_many_by_all_and_by_selector() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let cms = "/api/v1/namespaces/default/configmaps";
    for (name, tier) in [("a", "front"), ("b", "back"), ("c", "front")] {
        create(&hub, &http, cms, json!({"metadata": {"name": name, "labels": {"tier": tier}}}))
            .await?;
    }
    let out = k.ok(&["label", "cm", "--all", "team=blue"]).await?;
    ensure!(
        out.lines().collect::<Vec<_>>()
            == ["configmap/a labeled", "configmap/b labeled", "configmap/c labeled"]
    );
    let out = k.ok(&["label", "cm", "-l", "tier=front", "exposed=yes"]).await?;
    ensure!(out.lines().collect::<Vec<_>>() == ["configmap/a labeled", "configmap/c labeled"]);
    let out = k.ok(&["label", "cm", "-l", "tier!=front", "team-"]).await?;
    ensure!(out.trim() == "configmap/b unlabeled", "{out}");
    let list = stored(&hub, &http, cms).await?;
    let labels: Vec<&Value> = list["items"]
        .as_array()
        .context("items")?
        .iter()
        .map(|o| &o["metadata"]["labels"])
        .collect();
    ensure!(
        labels
            == [
                &json!({"tier": "front", "team": "blue", "exposed": "yes"}),
                &json!({"tier": "back"}),
                &json!({"tier": "front", "team": "blue", "exposed": "yes"}),
            ],
        "{list}"
    );
    let t = Printed::parse(&k.ok(&["get", "cm", "-l", "exposed", "-L", "team"]).await?)?;
    ensure!(t.names() == ["a", "c"] && t.cell(1, "TEAM")? == "blue", "{t:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotate_add_overwrite_and_remove() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let sets = "/apis/cluster.open-cluster-management.io/v1beta2/managedclustersets";
    let set = json!({"apiVersion": "cluster.open-cluster-management.io/v1beta2",
                     "kind": "ManagedClusterSet", "metadata": {"name": "prod"},
                     "spec": {"clusterSelector": {"selectorType": "ExclusiveClusterSetLabel"}}});
    create(&hub, &http, sets, set).await?;
    let path = format!("{sets}/prod");
    let annotations = |obj: &Value| obj["metadata"]["annotations"].clone();
    let out =
        k.ok(&["annotate", "managedclusterset", "prod", "owner=team-a", "note=first"]).await?;
    ensure!(out.trim() == "managedclusterset.cluster.open-cluster-management.io/prod annotated");
    let obj = stored(&hub, &http, &path).await?;
    ensure!(annotations(&obj) == json!({"owner": "team-a", "note": "first"}), "{obj}");
    let r = k.run(&["annotate", "mclset", "prod", "note=second"]).await?;
    ensure!(r.code == 1, "{r:?}");
    ensure!(
        r.stderr.trim()
            == "error: --overwrite is false but found the following declared annotation(s): 'note' \
                already has a value (first)",
        "{r:?}"
    );
    ensure!(stored(&hub, &http, &path).await? == obj);
    k.ok(&["annotate", "mclset", "prod", "note=second", "--overwrite"]).await?;
    ensure!(annotations(&stored(&hub, &http, &path).await?)["note"] == "second");
    k.ok(&["annotate", "mclset", "prod", "note-"]).await?;
    let obj = stored(&hub, &http, &path).await?;
    ensure!(annotations(&obj) == json!({"owner": "team-a"}) && obj["metadata"]["generation"] == 1);

    // Core kinds, all at once.
    let leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
    for name in ["l1", "l2"] {
        create(
            &hub,
            &http,
            leases,
            json!({"metadata": {"name": name}, "spec": {"holderIdentity": name}}),
        )
        .await?;
    }
    let out = k.ok(&["annotate", "leases", "--all", "checked=yes"]).await?;
    ensure!(
        out.lines().collect::<Vec<_>>()
            == ["lease.coordination.k8s.io/l1 annotated", "lease.coordination.k8s.io/l2 annotated"],
        "{out}"
    );
    let list = stored(&hub, &http, leases).await?;
    for item in list["items"].as_array().context("items")? {
        ensure!(annotations(item) == json!({"checked": "yes"}), "{item}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_through_kube_editor_patches_the_change() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let c1 = format!("{MCL}/c1");
    create(&hub, &http, MCL, cluster("c1", json!({"env": "dev"}))).await?;
    let editor = "sed -i -e s/leaseDurationSeconds:\\ 60/leaseDurationSeconds:\\ 45/ -e s/env:\\ dev/env:\\ prod/";
    let r = k.run_env(&["edit", "mcl", "c1"], &[("KUBE_EDITOR", editor)]).await?;
    ensure!(r.code == 0, "{r:?}");
    ensure!(
        r.stdout.trim() == "managedcluster.cluster.open-cluster-management.io/c1 edited",
        "{r:?}"
    );
    let obj = stored(&hub, &http, &c1).await?;
    ensure!(
        obj["spec"]["leaseDurationSeconds"] == 45 && obj["metadata"]["labels"]["env"] == "prod"
    );
    ensure!(obj["metadata"]["generation"] == 2, "{obj}");
    ensure!(obj["spec"]["managedClusterClientConfigs"][0]["url"] == "https://c1:6443", "{obj}");
    // EDITOR is used when KUBE_EDITOR is not set.
    let r = k
        .run_env(
            &["edit", "mcl", "c1"],
            &[("EDITOR", "sed -i s/leaseDurationSeconds:\\ 45/leaseDurationSeconds:\\ 50/")],
        )
        .await?;
    ensure!(r.code == 0 && r.stdout.trim().ends_with("c1 edited"), "{r:?}");
    ensure!(stored(&hub, &http, &c1).await?["spec"]["leaseDurationSeconds"] == 50);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_without_changes_is_cancelled() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let c1 = format!("{MCL}/c1");
    create(&hub, &http, MCL, cluster("c1", json!({}))).await?;
    let before = stored(&hub, &http, &c1).await?;
    // `cat` shows the object kubectl would edit and changes nothing.
    let r = k.run_env(&["edit", "mcl", "c1"], &[("EDITOR", "cat")]).await?;
    ensure!(r.code == 0, "{r:?}");
    ensure!(r.stderr.trim() == "Edit cancelled, no changes made.", "{r:?}");
    ensure!(r.stdout.contains("# Please edit the object below."), "{r:?}");
    ensure!(r.stdout.contains(&format!("  resourceVersion: \"{}\"", rv(&before))), "{r:?}");
    ensure!(stored(&hub, &http, &c1).await? == before, "nothing stored");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_to_an_invalid_value_stores_nothing() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let c1 = format!("{MCL}/c1");
    create(&hub, &http, MCL, cluster("c1", json!({}))).await?;
    let before = stored(&hub, &http, &c1).await?;
    let editor = "sed -i s/hubAcceptsClient:\\ true/hubAcceptsClient:\\ maybe/";
    let r = k.run_env(&["edit", "mcl", "c1"], &[("KUBE_EDITOR", editor)]).await?;
    ensure!(r.code == 1 && r.stdout.is_empty(), "{r:?}");
    ensure!(
        r.stderr.contains(
            "error: managedclusters.cluster.open-cluster-management.io \"c1\" is invalid"
        ),
        "{r:?}"
    );
    ensure!(r.stderr.contains("A copy of your changes has been stored to"), "{r:?}");
    ensure!(stored(&hub, &http, &c1).await? == before, "nothing stored");
    // The copy kept the edit.
    let copy = r
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("A copy of your changes has been stored to \""))
        .and_then(|l| l.strip_suffix('"'))
        .context("the copy's path")?;
    let text = std::fs::read_to_string(copy)?;
    ensure!(text.contains("hubAcceptsClient: maybe"), "{text}");
    ensure!(
        text.contains("# managedclusters.cluster.open-cluster-management.io \"c1\" was not valid:"),
        "{text}"
    );
    Ok(())
}

const PLACEMENT_OBJECTS: &str = "apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSet
metadata:
  name: prod
spec:
  clusterSelector:
    selectorType: ExclusiveClusterSetLabel
---
apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSetBinding
metadata:
  name: prod
  namespace: default
spec:
  clusterSet: prod
---
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata:
  name: p1
  namespace: default
spec:
  clusterSets: [prod]
  numberOfClusters: 1
---
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: PlacementDecision
metadata:
  name: p1-decision-1
  namespace: default
  labels:
    cluster.open-cluster-management.io/placement: p1
    cluster.open-cluster-management.io/decision-group-index: \"0\"
---
apiVersion: cluster.open-cluster-management.io/v1alpha1
kind: AddOnPlacementScore
metadata:
  name: resource-usage
  namespace: default
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placement_objects_round_trip_with_their_status() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    let r = k.run_with(&["create", "-f", "-"], Some(PLACEMENT_OBJECTS)).await?;
    ensure!(r.code == 0, "{r:?}");
    ensure!(
        r.stdout.lines().collect::<Vec<_>>()
            == [
                "managedclusterset.cluster.open-cluster-management.io/prod created",
                "managedclustersetbinding.cluster.open-cluster-management.io/prod created",
                "placement.cluster.open-cluster-management.io/p1 created",
                "placementdecision.cluster.open-cluster-management.io/p1-decision-1 created",
                "addonplacementscore.cluster.open-cluster-management.io/resource-usage created",
            ],
        "{r:?}"
    );
    // What the placement controller and an add-on agent write: status through /status.
    let decisions = r#"{"status":{"decisions":[{"clusterName":"c1","reason":""},{"clusterName":"c2","reason":""}]}}"#;
    let out = k
        .ok(&[
            "patch",
            "placementdecision",
            "p1-decision-1",
            "--subresource=status",
            "--type",
            "merge",
            "-p",
            decisions,
        ])
        .await?;
    ensure!(out.trim().ends_with("p1-decision-1 patched"), "{out}");
    let scores = r#"{"status":{"scores":[{"name":"cpuAvailable","value":66}],"conditions":[]}}"#;
    k.ok(&[
        "patch",
        "addonplacementscore",
        "resource-usage",
        "--subresource=status",
        "--type",
        "merge",
        "-p",
        scores,
    ])
    .await?;
    // Clients find a placement's decisions by label, as the OCM placement API documents.
    let out = k
        .ok(&[
            "get",
            "placementdecisions",
            "-l",
            "cluster.open-cluster-management.io/placement=p1",
            "-o",
            "jsonpath={.items[*].status.decisions[*].clusterName}",
        ])
        .await?;
    ensure!(out == "c1 c2", "{out}");
    let base = "/apis/cluster.open-cluster-management.io";
    let pd = stored(
        &hub,
        &http,
        &format!("{base}/v1beta1/namespaces/default/placementdecisions/p1-decision-1"),
    )
    .await?;
    ensure!(
        pd["status"]["decisions"][1]["clusterName"] == "c2" && pd["metadata"]["generation"] == 1
    );
    let score = stored(
        &hub,
        &http,
        &format!("{base}/v1alpha1/namespaces/default/addonplacementscores/resource-usage"),
    )
    .await?;
    ensure!(score["status"]["scores"] == json!([{"name": "cpuAvailable", "value": 66}]), "{score}");
    let binding = stored(
        &hub,
        &http,
        &format!("{base}/v1beta2/namespaces/default/managedclustersetbindings/prod"),
    )
    .await?;
    ensure!(binding["spec"]["clusterSet"] == "prod", "{binding}");
    let t = Printed::parse(&k.ok(&["get", "managedclustersetbindings,placements"]).await?)?;
    ensure!(
        t.names()[0] == "managedclustersetbinding.cluster.open-cluster-management.io/prod",
        "{t:?}"
    );
    // A set name outside the schema's pattern is refused, and nothing changes.
    let r = k
        .run(&[
            "patch",
            "mclsetbinding",
            "prod",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"clusterSet":"Not_A_Name"}}"#,
        ])
        .await?;
    ensure!(r.code == 1 && r.stderr.contains("spec.clusterSet"), "{r:?}");
    ensure!(
        stored(
            &hub,
            &http,
            &format!("{base}/v1beta2/namespaces/default/managedclustersetbindings/prod")
        )
        .await?
            == binding
    );
    Ok(())
}
