//! The kubectl suite, part two: server-side apply (conflicts, `--force-conflicts`, the migration
//! from client-side apply, dry runs, `diff --server-side`) and strategic merge patch (kubectl's
//! default patch type, which the hub accepts for OCM kinds too), each checked on what kubectl
//! prints and on what the hub stores.

use anyhow::{Context as _, ensure};
use ocm_conformance::hub::{TestHub, managed_entry};
use ocm_conformance::kubectl::{self, Kubectl, MCL};
use serde_json::Value;

const CM: &str = "/api/v1/namespaces/default/configmaps";

const CLUSTER: &str = "apiVersion: cluster.open-cluster-management.io/v1
kind: ManagedCluster
metadata:
  name: s1
  labels:
    env: dev
spec:
  hubAcceptsClient: true
  leaseDurationSeconds: 60
";

const CONFIGMAP: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: app
  namespace: default
data:
  a: \"1\"
  b: \"2\"
";

/// A hub, kubectl, and a scratch directory for manifests; `None` when the suite is skipped.
struct Scene {
    hub: TestHub,
    http: reqwest::Client,
    k: Kubectl,
    dir: tempfile::TempDir,
}

impl Scene {
    async fn start() -> anyhow::Result<Option<Scene>> {
        let Some((hub, http, k)) = kubectl::setup().await? else { return Ok(None) };
        Ok(Some(Scene { hub, http, k, dir: tempfile::tempdir()? }))
    }

    /// Writes a manifest file; its path.
    fn file(&self, name: &str, text: &str) -> anyhow::Result<String> {
        kubectl::write_manifest(&self.dir, name, text)
    }

    /// The stored object at `path` (200 expected).
    async fn stored(&self, path: &str) -> anyhow::Result<Value> {
        kubectl::stored(&self.hub, &self.http, path).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_conflicts_and_force() -> anyhow::Result<()> {
    let Some(s) = Scene::start().await? else { return Ok(()) };
    let path = s.file("s1.yaml", CLUSTER)?;
    let out = s.k.ok(&["apply", "--server-side", "-f", &path]).await?;
    ensure!(
        out.trim() == "managedcluster.cluster.open-cluster-management.io/s1 serverside-applied",
        "{out}"
    );
    let obj = s.stored(&format!("{MCL}/s1")).await?;
    let mine = managed_entry(&obj, "kubectl", "Apply").context("kubectl's Apply entry")?;
    ensure!(mine["fieldsV1"]["f:spec"]["f:leaseDurationSeconds"].is_object(), "{mine}");

    // Another manager changes a field kubectl applied.
    let out =
        s.k.ok(&[
            "patch",
            "mcl",
            "s1",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"leaseDurationSeconds":30}}"#,
        ])
        .await?;
    ensure!(out.trim().ends_with("patched"), "{out}");
    let r = s.k.run(&["apply", "--server-side", "-f", &path]).await?;
    ensure!(r.code == 1, "{r:?}");
    ensure!(
        r.stderr.contains("Apply failed with 1 conflict: conflict with \"kubectl-patch\" using cluster.open-cluster-management.io/v1")
            && r.stderr.contains(": .spec.leaseDurationSeconds")
            && r.stderr.contains("--force-conflicts"),
        "{}",
        r.stderr
    );
    let obj = s.stored(&format!("{MCL}/s1")).await?;
    ensure!(
        obj["spec"]["leaseDurationSeconds"] == 30,
        "a conflicting apply changed nothing: {obj}"
    );

    // --force-conflicts takes the field back.
    let out = s.k.ok(&["apply", "--server-side", "--force-conflicts", "-f", &path]).await?;
    ensure!(out.trim().ends_with("serverside-applied"), "{out}");
    let obj = s.stored(&format!("{MCL}/s1")).await?;
    ensure!(obj["spec"]["leaseDurationSeconds"] == 60, "{obj}");
    ensure!(
        managed_entry(&obj, "kubectl-patch", "Update").is_none(),
        "kubectl-patch lost its only field: {obj}"
    );

    // Dropping a label from the manifest removes it; a server dry run stores nothing.
    let path = s.file("s1.yaml", &CLUSTER.replace("  labels:\n    env: dev\n", ""))?;
    let out = s.k.ok(&["apply", "--server-side", "--dry-run=server", "-f", &path]).await?;
    ensure!(out.trim().ends_with("serverside-applied (server dry run)"), "{out}");
    ensure!(s.stored(&format!("{MCL}/s1")).await?["metadata"]["labels"]["env"] == "dev");
    let r = s.k.run(&["diff", "--server-side", "-f", &path]).await?;
    ensure!(r.code == 1 && r.stdout.contains("-    env: dev"), "{r:?}");
    s.k.ok(&["apply", "--server-side", "-f", &path]).await?;
    let obj = s.stored(&format!("{MCL}/s1")).await?;
    ensure!(obj["metadata"].get("labels").is_none_or(|l| l.get("env").is_none()), "{obj}");
    // `get --show-managed-fields` prints the entries kubectl hides by default.
    let yaml = s.k.ok(&["get", "mcl", "s1", "-o", "yaml"]).await?;
    ensure!(!yaml.contains("managedFields"), "{yaml}");
    let yaml = s.k.ok(&["get", "mcl", "s1", "-o", "yaml", "--show-managed-fields"]).await?;
    ensure!(yaml.contains("manager: kubectl") && yaml.contains("operation: Apply"), "{yaml}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_side_apply_migrates_to_server_side() -> anyhow::Result<()> {
    let Some(s) = Scene::start().await? else { return Ok(()) };
    let path = s.file("app.yaml", CONFIGMAP)?;
    // Client-side apply of a kind kubectl knows: strategic merge patches.
    ensure!(s.k.ok(&["apply", "-f", &path]).await?.trim() == "configmap/app created");
    let path = s.file("app.yaml", &CONFIGMAP.replace("b: \"2\"", "b: \"3\""))?;
    ensure!(s.k.ok(&["apply", "-f", &path]).await?.trim() == "configmap/app configured");
    ensure!(s.k.ok(&["apply", "-f", &path]).await?.trim() == "configmap/app unchanged");
    let obj = s.stored(&format!("{CM}/app")).await?;
    ensure!(obj["data"]["b"] == "3", "{obj}");
    ensure!(managed_entry(&obj, "kubectl-client-side-apply", "Update").is_some(), "{obj}");

    // Server-side apply takes over the fields the last client-side apply set, without
    // conflicts, and kubectl moves the client-side entry into its Apply entry.
    let out = s.k.ok(&["apply", "--server-side", "-f", &path]).await?;
    ensure!(out.trim() == "configmap/app serverside-applied", "{out}");
    let obj = s.stored(&format!("{CM}/app")).await?;
    let applied = managed_entry(&obj, "kubectl", "Apply").context("Apply entry")?;
    ensure!(
        applied["fieldsV1"]["f:data"]["f:a"].is_object()
            && applied["fieldsV1"]["f:data"]["f:b"].is_object(),
        "{applied}"
    );
    ensure!(
        managed_entry(&obj, "kubectl-client-side-apply", "Update").is_none(),
        "migrated: {obj}"
    );
    // Now the manifest is the whole intent: dropping a key removes it.
    let path = s.file("app.yaml", &CONFIGMAP.replace("  b: \"2\"\n", ""))?;
    s.k.ok(&["apply", "--server-side", "-f", &path]).await?;
    let obj = s.stored(&format!("{CM}/app")).await?;
    ensure!(obj["data"] == serde_json::json!({"a": "1"}), "{obj}");
    // And back to client-side apply, which computes its patch from the annotation again.
    let path = s.file("app.yaml", &CONFIGMAP.replace("b: \"2\"", "c: \"4\""))?;
    let out = s.k.ok(&["apply", "-f", &path]).await?;
    ensure!(out.trim() == "configmap/app configured", "{out}");
    let obj = s.stored(&format!("{CM}/app")).await?;
    ensure!(obj["data"]["c"] == "4" && obj["data"]["a"] == "1", "{obj}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strategic_patches_from_kubectl() -> anyhow::Result<()> {
    let Some(s) = Scene::start().await? else { return Ok(()) };
    let path = s.file("s1.yaml", CLUSTER)?;
    s.k.ok(&["create", "-f", &path]).await?;
    // kubectl patch's default type is strategic: kube-apiserver refuses it for custom kinds;
    // the hub merges by the CRD's list-map keys.
    let out =
        s.k.ok(&["patch", "mcl", "s1", "-p", r#"{"spec":{"hubAcceptsClient":false}}"#]).await?;
    ensure!(out.trim() == "managedcluster.cluster.open-cluster-management.io/s1 patched", "{out}");
    let condition = |t: &str| {
        format!(
            r#"{{"status":{{"conditions":[{{"type":"{t}","status":"True","reason":"R","message":"m","lastTransitionTime":"2026-01-01T00:00:00Z"}}]}}}}"#
        )
    };
    for t in ["ManagedClusterJoined", "ManagedClusterConditionAvailable"] {
        let out =
            s.k.ok(&["patch", "mcl", "s1", "--subresource=status", "-p", &condition(t)]).await?;
        ensure!(out.trim().ends_with("patched"), "{out}");
    }
    let obj = s.stored(&format!("{MCL}/s1")).await?;
    let types: Vec<&str> = obj["status"]["conditions"]
        .as_array()
        .context("conditions")?
        .iter()
        .filter_map(|c| c["type"].as_str())
        .collect();
    ensure!(
        types == ["ManagedClusterJoined", "ManagedClusterConditionAvailable"],
        "merged by type: {obj}"
    );
    ensure!(
        obj["spec"]["hubAcceptsClient"] == false && obj["metadata"]["generation"] == 2,
        "{obj}"
    );
    let jp =
        "jsonpath={.status.conditions[?(@.type==\"ManagedClusterConditionAvailable\")].status}";
    ensure!(s.k.ok(&["get", "mcl", "s1", "-o", jp]).await? == "True");

    // Core kinds: strategic merge with directives kubectl users type.
    let path = s.file("app.yaml", CONFIGMAP)?;
    s.k.ok(&["create", "-f", &path]).await?;
    let out =
        s.k.ok(&[
            "patch",
            "cm",
            "app",
            "-p",
            r#"{"data":{"a":null,"c":"3"},"metadata":{"finalizers":["example.com/x"]}}"#,
        ])
        .await?;
    ensure!(out.trim() == "configmap/app patched", "{out}");
    let obj = s.stored(&format!("{CM}/app")).await?;
    ensure!(obj["data"] == serde_json::json!({"b": "2", "c": "3"}), "{obj}");
    s.k.ok(&[
        "patch",
        "cm",
        "app",
        "-p",
        r#"{"metadata":{"$deleteFromPrimitiveList/finalizers":["example.com/x"]}}"#,
    ])
    .await?;
    let obj = s.stored(&format!("{CM}/app")).await?;
    ensure!(obj["metadata"].get("finalizers").is_none_or(|f| f == &serde_json::json!([])), "{obj}");
    // A patch that cannot apply is refused and changes nothing.
    let r = s
        .k
        .run(&["patch", "cm", "app", "-p", r#"{"metadata":{"ownerReferences":[{"name":"x"}]}}"#])
        .await?;
    ensure!(r.code == 1 && r.stderr.contains("merge key"), "{r:?}");
    ensure!(s.stored(&format!("{CM}/app")).await?["metadata"].get("ownerReferences").is_none());
    Ok(())
}
