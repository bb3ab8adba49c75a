//! The hub binary's fleet commands against a running hub (ecosystem.md §1.1: clusteradm's
//! `get clusters|works|placements` and `create work`), and its logs: `ocm-hub serve
//! --logging-format json` writes one Kubernetes-style JSON object per line.

use std::time::Duration;

use anyhow::{Context as _, ensure};
use ocm_conformance::hub::{Backend, TestHub, eventually};
use ocm_conformance::kubectl::{MCL, Printed, cluster};
use ocm_conformance::programs;
use reqwest::Method;
use serde_json::{Value, json};

/// What one `ocm-hub` run printed.
struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

async fn ocm_hub(hub: &TestHub, args: &[&str]) -> anyhow::Result<Out> {
    let out = tokio::process::Command::new(programs::ocm_hub()?)
        .args(args)
        .arg("--data-dir")
        .arg(hub.path())
        .output()
        .await?;
    Ok(Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

async fn ok(hub: &TestHub, args: &[&str]) -> anyhow::Result<String> {
    let out = ocm_hub(hub, args).await?;
    ensure!(out.code == 0, "ocm-hub {args:?}: exit {}: {}{}", out.code, out.stdout, out.stderr);
    Ok(out.stdout)
}

const CONFIGMAP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hello\n  namespace: default\ndata:\n  greeting: hi\n---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Secret\n  metadata: {name: s, namespace: default}\n";

fn work_path(cluster: &str, name: &str) -> String {
    format!("/apis/work.open-cluster-management.io/v1/namespaces/{cluster}/manifestworks/{name}")
}

/// Reports `Applied` at generation `generation` of the work, as its agent would.
async fn set_applied(
    hub: &TestHub,
    http: &reqwest::Client,
    cluster: &str,
    name: &str,
    generation: i64,
) -> anyhow::Result<()> {
    let status = json!({"status": {"conditions": [{"type": "Applied", "status": "True",
        "reason": "AppliedManifestWorkComplete", "message": "applied",
        "observedGeneration": generation, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    let path = format!("{}/status", work_path(cluster, name));
    let (code, body) = hub
        .call(
            http,
            Method::PATCH,
            &path,
            Some(&status),
            &[("content-type", "application/merge-patch+json")],
        )
        .await?;
    ensure!(code == 200, "{path}: {code} {body}");
    Ok(())
}

#[tokio::test]
async fn get_and_create_work_read_and_write_the_fleet() -> anyhow::Result<()> {
    let hub = TestHub::start_with_controllers(Backend::Memory).await?;
    let http = hub.http()?;
    for (name, labels) in [("c1", json!({"env": "prod"})), ("c2", json!({}))] {
        let mut mc = cluster(name, labels);
        mc["spec"]["hubAcceptsClient"] = json!(name == "c1");
        let (code, body) = hub.call(&http, Method::POST, MCL, Some(&mc), &[]).await?;
        ensure!(code == 201, "{code} {body}");
    }
    let status = json!({"status": {"capacity": {"cpu": "8", "memory": "16Gi"},
        "version": {"kubernetes": "v1.32.1"}}});
    let (code, body) = hub
        .call(
            &http,
            Method::PATCH,
            &format!("{MCL}/c1/status"),
            Some(&status),
            &[("content-type", "application/merge-patch+json")],
        )
        .await?;
    ensure!(code == 200, "{code} {body}");

    // get clusters: the table, its wide form, and a List in JSON and YAML.
    let table = Printed::parse(&ok(&hub, &["get", "clusters"]).await?)?;
    ensure!(
        table.header
            == [
                "NAME",
                "ACCEPTED",
                "AVAILABLE",
                "CLUSTERSET",
                "CPU",
                "MEMORY",
                "KUBERNETES VERSION",
                "AGE"
            ],
        "{table:?}"
    );
    ensure!(table.names() == ["c1", "c2"], "{table:?}");
    ensure!(table.cell(0, "ACCEPTED")? == "true" && table.cell(1, "ACCEPTED")? == "false");
    ensure!(table.cell(0, "CPU")? == "8" && table.cell(0, "MEMORY")? == "16Gi");
    ensure!(table.cell(0, "KUBERNETES VERSION")? == "v1.32.1");
    // The cluster-set controller puts unlabelled clusters in `default`.
    eventually("c2 in the default set", Duration::from_secs(10), || async {
        let t = Printed::parse(&ok(&hub, &["get", "clusters"]).await?)?;
        Ok((t.cell(1, "CLUSTERSET")? == "default").then_some(()))
    })
    .await?;
    let wide = Printed::parse(&ok(&hub, &["get", "clusters", "-o", "wide"]).await?)?;
    ensure!(
        wide.cell(0, "URL")? == "https://c1:6443" && wide.cell(0, "TAINTS")?.parse::<u32>().is_ok(),
        "{wide:?}"
    );
    let list: Value = serde_json::from_str(&ok(&hub, &["get", "clusters", "-o", "json"]).await?)?;
    ensure!(list["kind"] == "List" && list["items"].as_array().map(Vec::len) == Some(2), "{list}");
    ensure!(list["items"][0]["apiVersion"] == "cluster.open-cluster-management.io/v1");
    let yaml: Value = serde_saphyr::from_str(&ok(&hub, &["get", "clusters", "-o", "yaml"]).await?)?;
    ensure!(yaml["items"][1]["metadata"]["name"] == "c2", "{yaml}");

    // create work: refused for a cluster not accepted (no namespace for its works yet).
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("work.yaml");
    std::fs::write(&file, CONFIGMAP)?;
    let file = file.to_str().context("utf-8 path")?;
    let early =
        ocm_hub(&hub, &["create", "work", "hello", "-f", file, "--clusters", "c1,c2"]).await?;
    ensure!(early.code == 1 && early.stdout.is_empty(), "{} {}", early.stdout, early.stderr);
    ensure!(
        early.stderr.trim()
            == "ocm-hub: cluster c2 is not accepted yet: it has no namespace (run `ocm-hub accept c2`)",
        "{}",
        early.stderr
    );
    let accept = json!({"spec": {"hubAcceptsClient": true}});
    let (code, body) = hub
        .call(
            &http,
            Method::PATCH,
            &format!("{MCL}/c2"),
            Some(&accept),
            &[("content-type", "application/merge-patch+json")],
        )
        .await?;
    ensure!(code == 200, "{code} {body}");
    eventually("c2's namespace", Duration::from_secs(10), || async {
        let (code, _) = hub.call(&http, Method::GET, "/api/v1/namespaces/c2", None, &[]).await?;
        Ok((code == 200).then_some(()))
    })
    .await?;
    // To named clusters, from YAML documents and a List.
    let printed = ok(&hub, &["create", "work", "hello", "-f", file, "--clusters", "c1,c2"]).await?;
    ensure!(
        printed == "manifestwork c1/hello created\nmanifestwork c2/hello created\n",
        "{printed}"
    );
    for c in ["c1", "c2"] {
        let (code, work) = hub.call(&http, Method::GET, &work_path(c, "hello"), None, &[]).await?;
        ensure!(code == 200, "{code} {work}");
        let kinds: Vec<&Value> = work["spec"]["workload"]["manifests"]
            .as_array()
            .context("manifests")?
            .iter()
            .map(|m| &m["kind"])
            .collect();
        ensure!(kinds == [&json!("ConfigMap"), &json!("Secret")], "{kinds:?}");
    }
    // Again: refused without --overwrite, replaced with it.
    let again = ocm_hub(&hub, &["create", "work", "hello", "-f", file, "--clusters", "c1"]).await?;
    ensure!(
        again.code == 1
            && again.stderr.contains("manifestwork c1/hello already exists (--overwrite"),
        "{}",
        again.stderr
    );
    std::fs::write(
        dir.path().join("one.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: only, namespace: default}\n",
    )?;
    let one = dir.path().join("one.yaml");
    let one = one.to_str().context("utf-8 path")?;
    // --overwrite replaces the manifests and keeps the rest of the spec.
    let orphan = json!({"spec": {"deleteOption": {"propagationPolicy": "Orphan"}}});
    let merge = [("content-type", "application/merge-patch+json")];
    let path = work_path("c1", "hello");
    let (code, body) = hub.call(&http, Method::PATCH, &path, Some(&orphan), &merge).await?;
    ensure!(code == 200, "{code} {body}");
    let printed =
        ok(&hub, &["create", "work", "hello", "-f", one, "--clusters", "c1", "--overwrite"])
            .await?;
    ensure!(printed == "manifestwork c1/hello updated\n", "{printed}");
    let (_, work) = hub.call(&http, Method::GET, &work_path("c1", "hello"), None, &[]).await?;
    ensure!(work["spec"]["workload"]["manifests"].as_array().map(Vec::len) == Some(1), "{work}");
    ensure!(work["spec"]["deleteOption"]["propagationPolicy"] == "Orphan", "{work}");

    // Errors: an unknown cluster (nothing created), bad flags and files (exit 2).
    let missing =
        ocm_hub(&hub, &["create", "work", "x", "-f", file, "--clusters", "c1,nope"]).await?;
    ensure!(
        missing.code == 1
            && missing.stderr.trim() == "ocm-hub: cluster nope is not a ManagedCluster of this hub",
        "{}",
        missing.stderr
    );
    let (code, _) = hub.call(&http, Method::GET, &work_path("c1", "x"), None, &[]).await?;
    ensure!(code == 404, "a work was created before the clusters were checked");
    for args in [
        vec!["create", "work", "x", "-f", file, "--clusters", "c1", "--placement", "a/b"],
        vec!["create", "work", "x", "-f", file],
        vec!["create", "work", "Bad_Name", "-f", file, "--clusters", "c1"],
        vec!["create", "work", "x", "-f", "/nonexistent.yaml", "--clusters", "c1"],
        vec!["get", "clusters", "-o", "table"],
        vec!["get", "placements", "-n", "Not/A/Namespace"],
    ] {
        let out = ocm_hub(&hub, &args).await?;
        ensure!(
            out.code == 2 && out.stderr.lines().count() == 1 && out.stderr.starts_with("ocm-hub: "),
            "{args:?}: {} {}",
            out.code,
            out.stderr
        );
    }
    std::fs::write(dir.path().join("bad.yaml"), "kind: ConfigMap\nmetadata: {name: a}\n")?;
    let bad = ocm_hub(
        &hub,
        &[
            "create",
            "work",
            "x",
            "-f",
            dir.path().join("bad.yaml").to_str().context("path")?,
            "--clusters",
            "c1",
        ],
    )
    .await?;
    ensure!(
        bad.code == 2
            && bad.stderr.trim() == "ocm-hub: the manifest file: object 1 has no apiVersion",
        "{}",
        bad.stderr
    );

    // --wait: times out naming the clusters not applied, then succeeds once both report Applied.
    let out = ocm_hub(
        &hub,
        &[
            "create",
            "work",
            "hello",
            "-f",
            file,
            "--clusters",
            "c1,c2",
            "--overwrite",
            "--wait",
            "--timeout",
            "1s",
        ],
    )
    .await?;
    ensure!(
        out.code == 1
            && out
                .stderr
                .contains("timed out after 1s: manifestwork hello not applied yet on c1, c2"),
        "{}",
        out.stderr
    );
    // The waiting overwrite changes both works' manifests (to `one`): each gets a new
    // generation, and an Applied of the one before does not end the wait.
    let generation = |cluster: &'static str| {
        let (hub, http) = (&hub, &http);
        async move {
            let (_, work) =
                hub.call(http, Method::GET, &work_path(cluster, "hello"), None, &[]).await?;
            work["metadata"]["generation"].as_i64().context("generation")
        }
    };
    let (g1, g2) = (generation("c1").await?, generation("c2").await?);
    let waiting = tokio::spawn({
        let args: Vec<String> = [
            "create",
            "work",
            "hello",
            "-f",
            one,
            "--clusters",
            "c1,c2",
            "--overwrite",
            "--wait",
            "--timeout",
            "60s",
            "--data-dir",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([hub.path().display().to_string()])
        .collect();
        let bin = programs::ocm_hub()?;
        async move { tokio::process::Command::new(bin).args(args).output().await }
    });
    eventually("the overwrite of both works", Duration::from_secs(30), || async {
        Ok((generation("c1").await? == g1 + 1 && generation("c2").await? == g2 + 1).then_some(()))
    })
    .await?;
    set_applied(&hub, &http, "c1", "hello", g1).await?;
    set_applied(&hub, &http, "c2", "hello", g2 + 1).await?;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    ensure!(!waiting.is_finished(), "--wait ended on an Applied of the older generation");
    set_applied(&hub, &http, "c1", "hello", g1 + 1).await?;
    let out = tokio::time::timeout(Duration::from_secs(30), waiting).await???;
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure!(
        out.status.success() && stdout.ends_with("manifestwork hello applied on 2 cluster(s)\n"),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Not a terminal: no progress line.
    ensure!(
        !String::from_utf8_lossy(&out.stderr).contains("applied"),
        "progress printed off a terminal"
    );

    // get works.
    let works = Printed::parse(&ok(&hub, &["get", "works"]).await?)?;
    ensure!(
        works.header == ["NAME", "CLUSTER", "MANIFESTS", "APPLIED", "AVAILABLE", "AGE"],
        "{works:?}"
    );
    ensure!(
        works.rows.len() == 2
            && works.cell(0, "CLUSTER")? == "c1"
            && works.cell(0, "APPLIED")? == "True",
        "{works:?}"
    );
    ensure!(
        works.cell(0, "MANIFESTS")? == "1" && works.cell(0, "AVAILABLE")?.is_empty(),
        "{works:?}"
    );
    let one = Printed::parse(&ok(&hub, &["get", "works", "--cluster", "c2", "-o", "wide"]).await?)?;
    ensure!(one.rows.len() == 1 && one.header.contains(&"DEGRADED".to_owned()), "{one:?}");

    // A placement's decisions as the target.
    for obj in [json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}})] {
        let (code, body) =
            hub.call(&http, Method::POST, "/api/v1/namespaces", Some(&obj), &[]).await?;
        ensure!(code == 201, "{code} {body}");
    }
    let binding = json!({"apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSetBinding",
        "metadata": {"name": "default", "namespace": "apps"}, "spec": {"clusterSet": "default"}});
    let (code, body) = hub.call(&http, Method::POST, "/apis/cluster.open-cluster-management.io/v1beta2/namespaces/apps/managedclustersetbindings", Some(&binding), &[]).await?;
    ensure!(code == 201, "{code} {body}");
    let placement = json!({"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
        "metadata": {"name": "prod", "namespace": "apps"},
        "spec": {"predicates": [{"requiredClusterSelector": {"labelSelector": {"matchLabels": {"env": "prod"}}}}],
                 // No agent renews c1's lease here: it is tainted unreachable.
                 "tolerations": [{"key": "cluster.open-cluster-management.io/unreachable", "operator": "Exists"},
                                 {"key": "cluster.open-cluster-management.io/unavailable", "operator": "Exists"}]}});
    let (code, body) = hub
        .call(
            &http,
            Method::POST,
            "/apis/cluster.open-cluster-management.io/v1beta1/namespaces/apps/placements",
            Some(&placement),
            &[],
        )
        .await?;
    ensure!(code == 201, "{code} {body}");
    eventually("the placement selects c1", Duration::from_secs(10), || async {
        let t = Printed::parse(&ok(&hub, &["get", "placements"]).await?)?;
        Ok((t.cell(0, "SELECTED")? == "1" && t.cell(0, "SATISFIED")? == "True").then_some(t))
    })
    .await?;
    let printed =
        ok(&hub, &["create", "work", "by-placement", "-f", file, "--placement", "apps/prod"])
            .await?;
    ensure!(printed == "manifestwork c1/by-placement created\n", "{printed}");
    let gone =
        ocm_hub(&hub, &["create", "work", "x", "-f", file, "--placement", "apps/nope"]).await?;
    ensure!(
        gone.code == 1 && gone.stderr.trim() == "ocm-hub: placement apps/nope does not exist",
        "{}",
        gone.stderr
    );
    let none = ocm_hub(&hub, &["get", "placements", "-n", "default"]).await?;
    ensure!(
        none.code == 0 && none.stdout.is_empty() && none.stderr.trim() == "No resources found",
        "{}",
        none.stderr
    );
    hub.stop().await;
    Ok(())
}

#[tokio::test]
async fn serve_logs_kubernetes_json_lines() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut child = tokio::process::Command::new(programs::ocm_hub()?)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--grpc-listen",
            "127.0.0.1:0",
            "--storage",
            "memory",
            "--logging-format",
            "json",
            "-v",
            "4",
            "--data-dir",
        ])
        .arg(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let stderr = child.stderr.take().context("stderr")?;
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stderr));
    let mut seen = Vec::new();
    let ready = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await? {
            let v: Value =
                serde_json::from_str(&line).with_context(|| format!("not JSON: {line}"))?;
            ensure!(
                v["ts"].is_f64()
                    && v["caller"].as_str().is_some_and(|c| c.contains(".rs:"))
                    && v["msg"].is_string(),
                "{line}"
            );
            let keys: Vec<&String> = v.as_object().context("object")?.keys().take(3).collect();
            ensure!(keys == ["ts", "caller", "msg"], "{line}");
            seen.push(v.clone());
            if v["msg"] == "ready" {
                ensure!(v["v"] == 0 && v["https"].is_string(), "{line}");
                return Ok(());
            }
        }
        anyhow::bail!("stderr ended before ready: {seen:?}")
    })
    .await;
    let _ = child.start_kill();
    ready.context("no ready line in 30 s")??;
    Ok(())
}
