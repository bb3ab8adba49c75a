//! ManifestWorks end to end over both transports (gRPC CloudEvents and REST): a real `klusterlet`
//! joined to a hub applies its cluster's works to a `--profile cluster` instance through the
//! `kube` crate, records them in an AppliedManifestWork, reports `Applied`/`Available` with
//! `observedGeneration`, follows updates, deletes what a work drops, and on deletion removes
//! what it owns (keeping what the delete option orphans) before the hub's object goes; and
//! AppliedManifestWorks of another hub or of works the hub no longer holds are evicted.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, ensure};
use ocm_apiserver::machinery::scheme::Profile;
use ocm_conformance::hub::{Backend, TestHub, eventually};
use ocm_conformance::kubectl::{create, delete, merge_patch};
use ocm_conformance::programs;
use reqwest::Method;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);
const WORKS: &str = "/apis/work.open-cluster-management.io/v1/namespaces/c1/manifestworks";
const AMWS: &str = "/apis/work.open-cluster-management.io/v1/appliedmanifestworks";
const FINALIZER: &str = "cluster.open-cluster-management.io/manifest-work-cleanup";

/// A hub that trusts one bootstrap identity (so the agent is approved and accepted at once), a
/// managed cluster, and a klusterlet joined to the hub for it.
async fn joined(
    extra: &[&str],
) -> anyhow::Result<(TestHub, TestHub, tokio::process::Child, tempfile::TempDir)> {
    joined_on(Backend::Memory, extra).await
}

/// [`joined`] with the hub on `backend` (sled when it must survive restarts).
async fn joined_on(
    backend: Backend,
    extra: &[&str],
) -> anyhow::Result<(TestHub, TestHub, tokio::process::Child, tempfile::TempDir)> {
    let (id, secret) = ("work01", "0123456789abcdef");
    let hub = TestHub::start_with(backend, |c| {
        c.registration.enabled = true;
        c.registration.auto_approve_identities = vec![format!("system:bootstrap:{id}")];
    })
    .await?;
    let token = ocm_apiserver::auth::bootstrap::bootstrap_token_object(
        id,
        secret,
        "2099-01-01T00:00:00Z",
        "work tests",
    );
    create(&hub, &hub.http()?, "/api/v1/namespaces/kube-system/secrets", token.clone()).await?;
    let cluster = TestHub::start_with(Backend::Memory, |c| c.profile = Profile::Cluster).await?;
    let dir = tempfile::tempdir()?;
    let join = [
        "join",
        "--hub",
        &hub.url,
        "--token",
        &format!("{id}.{secret}"),
        "--cluster-name",
        "c1",
        "--ca-file",
        &hub.path().join("pki/ca.crt").display().to_string(),
    ];
    let agent = klusterlet(&join, dir.path(), &cluster, extra)?;
    let http = hub.http()?;
    eventually("c1's namespace on the hub", WAIT, || async {
        let (code, _) = hub.call(&http, Method::GET, "/api/v1/namespaces/c1", None, &[]).await?;
        Ok((code == 200).then_some(()))
    })
    .await?;
    Ok((hub, cluster, agent, dir))
}

async fn get(hub: &TestHub, path: &str) -> anyhow::Result<Option<Value>> {
    let (code, body) = hub.call(&hub.http()?, Method::GET, path, None, &[]).await?;
    match code {
        200 => Ok(Some(body)),
        404 => Ok(None),
        _ => anyhow::bail!("GET {path}: {code} {body}"),
    }
}

fn configmap(name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "default"}, "data": {"v": value}})
}

fn deployment(name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
}

fn condition<'a>(obj: &'a Value, kind: &str) -> Option<&'a Value> {
    obj.pointer("/status/conditions")?.as_array()?.iter().find(|c| c["type"] == kind)
}

/// Waits until the work is Applied and Available at its current generation.
async fn applied(hub: &TestHub, name: &str) -> anyhow::Result<Value> {
    eventually(&format!("work {name} applied"), WAIT, || async {
        let Some(w) = get(hub, &format!("{WORKS}/{name}")).await? else { return Ok(None) };
        let generation = w["metadata"]["generation"].as_i64();
        let ok = |kind| {
            condition(&w, kind).is_some_and(|c| {
                c["status"] == "True" && c["observedGeneration"].as_i64() == generation
            })
        };
        Ok((ok("Applied") && ok("Available")).then_some(w))
    })
    .await
}

/// Each scenario runs on both transports: OCM's CloudEvents over gRPC (the default, the server
/// found through `cluster-info`) and a list-watch of the hub's REST API.
macro_rules! both_transports {
    ($($scenario:ident),* $(,)?) => {
        mod grpc {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() -> anyhow::Result<()> {
                    super::$scenario("grpc").await
                }
            )*
        }
        mod kube {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() -> anyhow::Result<()> {
                    super::$scenario("kube").await
                }
            )*
        }
    };
}

both_transports!(
    works_are_applied_updated_pruned_and_cleaned_up,
    strategies_feedback_and_drift_correction,
    restarts_and_a_hub_away_lose_nothing,
    unmanaged_applied_works_are_evicted,
);

/// OCM's eviction of unmanaged AppliedManifestWorks: one left by another hub's agent and one
/// of this hub's for a work the hub does not hold are marked with `evictionStartTime`, then,
/// after the grace period, deleted with what they own; the agent's own AppliedManifestWork
/// and what it applied stay, and a mark put on it is taken off; another agent's (its agentID
/// differs) is left alone.
async fn unmanaged_applied_works_are_evicted(transport: &str) -> anyhow::Result<()> {
    let grace = ["--appliedmanifestwork-eviction-grace-period", "3s"];
    let flags = ["--work-resync-seconds", "1", "--transport", transport, grace[0], grace[1]];
    let (hub, cluster, _agent, _dir) = joined(&flags).await?;
    let on_cluster = cluster.http()?;
    let work = json!({"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {"name": "w1", "namespace": "c1"},
        "spec": {"workload": {"manifests": [configmap("cfg", "1")]}}});
    create(&hub, &hub.http()?, WORKS, work).await?;
    applied(&hub, "w1").await?;
    let amws = get(&cluster, AMWS).await?.context("AppliedManifestWorks")?;
    let own = amws["items"]
        .as_array()
        .and_then(|items| items.iter().find(|a| a["spec"]["manifestWorkName"] == "w1"))
        .context("w1's AppliedManifestWork")?
        .clone();
    let own_hash = own["spec"]["hubHash"].as_str().context("hubHash")?.to_owned();
    // A mark on an AppliedManifestWork whose work the hub holds is taken off.
    let own_path = format!("{AMWS}/{own_hash}-w1");
    let mark = json!({"status": {"evictionStartTime": "2026-01-01T00:00:00Z"}});
    merge_patch(&cluster, &on_cluster, &format!("{own_path}/status"), mark).await?;
    eventually("the mark on w1's taken off", WAIT, || async {
        let amw = get(&cluster, &own_path).await?.context("w1's AppliedManifestWork")?;
        Ok(amw["status"].get("evictionStartTime").is_none_or(Value::is_null).then_some(()))
    })
    .await?;
    // Left behind: by another hub's agent, and by this hub's for a work it no longer holds,
    // each owning a ConfigMap.
    let other_hash = "0".repeat(64);
    let left = [(other_hash.as_str(), "w9"), (own_hash.as_str(), "ghost")];
    for (hash, work) in left {
        let amw = json!({"apiVersion": "work.open-cluster-management.io/v1",
            "kind": "AppliedManifestWork", "metadata": {"name": format!("{hash}-{work}")},
            "spec": {"hubHash": hash, "manifestWorkName": work, "agentID": "c1"}});
        let amw = create(&cluster, &on_cluster, AMWS, amw).await?;
        let mut cm = configmap(&format!("left-{work}"), "x");
        cm["metadata"]["ownerReferences"] = json!([{
            "apiVersion": "work.open-cluster-management.io/v1", "kind": "AppliedManifestWork",
            "name": amw["metadata"]["name"], "uid": amw["metadata"]["uid"]}]);
        create(&cluster, &on_cluster, "/api/v1/namespaces/default/configmaps", cm).await?;
    }
    // Another agent's on the same cluster (its agentID is not c1's) is never this agent's to
    // evict.
    let foreign = json!({"apiVersion": "work.open-cluster-management.io/v1",
        "kind": "AppliedManifestWork", "metadata": {"name": format!("{other_hash}-theirs")},
        "spec": {"hubHash": other_hash, "manifestWorkName": "theirs", "agentID": "another-agent"}});
    create(&cluster, &on_cluster, AMWS, foreign).await?;
    let amw_path = |hash: &str, work: &str| format!("{AMWS}/{hash}-{work}");
    eventually("both marked for eviction", WAIT, || async {
        let mut marked = 0;
        for (hash, work) in left {
            let amw = get(&cluster, &amw_path(hash, work)).await?;
            marked += usize::from(
                amw.is_some_and(|a| a["status"]["evictionStartTime"].as_str().is_some()),
            );
        }
        Ok((marked == left.len()).then_some(()))
    })
    .await?;
    eventually("both evicted with the ConfigMaps they own", WAIT, || async {
        let mut gone = 0;
        for (hash, work) in left {
            let cm = format!("/api/v1/namespaces/default/configmaps/left-{work}");
            gone += usize::from(
                get(&cluster, &amw_path(hash, work)).await?.is_none()
                    && get(&cluster, &cm).await?.is_none(),
            );
        }
        Ok((gone == left.len()).then_some(()))
    })
    .await?;
    let theirs = get(&cluster, &amw_path(&other_hash, "theirs")).await?;
    let theirs = theirs.context("another agent's AppliedManifestWork was evicted")?;
    ensure!(theirs["status"].get("evictionStartTime").is_none_or(Value::is_null), "{theirs}");
    let still = get(&cluster, &amw_path(&own_hash, "w1")).await?.context("w1's was evicted")?;
    ensure!(still["status"].get("evictionStartTime").is_none_or(Value::is_null), "{still}");
    ensure!(still["metadata"]["uid"] == own["metadata"]["uid"], "{still}");
    cfg_holds(&cluster, "1").await?;
    Ok(())
}

/// Starts `klusterlet ARGS` on data dir `dir` for `cluster`, with the `extra` flags.
fn klusterlet(
    args: &[&str],
    dir: &Path,
    cluster: &TestHub,
    extra: &[&str],
) -> anyhow::Result<tokio::process::Child> {
    Ok(tokio::process::Command::new(programs::klusterlet()?)
        .args(args)
        .arg("--data-dir")
        .arg(dir)
        .arg("--cluster-kubeconfig")
        .arg(cluster.kubeconfig())
        .args(extra)
        .env("RUST_LOG", std::env::var("OCM_AGENT_LOG").unwrap_or_else(|_| "warn".into()))
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?)
}

/// Starts `klusterlet run` again on a joined agent's data dir.
fn rerun(dir: &Path, cluster: &TestHub, extra: &[&str]) -> anyhow::Result<tokio::process::Child> {
    klusterlet(&["run"], dir, cluster, extra)
}

/// Sets the ConfigMap of work `name` to `value` (a new generation).
async fn set_value(hub: &TestHub, name: &str, value: &str) -> anyhow::Result<()> {
    let patch = json!({"spec": {"workload": {"manifests": [configmap("cfg", value)]}}});
    merge_patch(hub, &hub.http()?, &format!("{WORKS}/{name}"), patch).await?;
    Ok(())
}

/// `cfg` on the cluster, once it holds `value`.
async fn cfg_holds(cluster: &TestHub, value: &str) -> anyhow::Result<Value> {
    eventually(&format!("cfg = {value} on the cluster"), WAIT, || async {
        Ok(get(cluster, "/api/v1/namespaces/default/configmaps/cfg")
            .await?
            .filter(|c| c["data"]["v"] == value))
    })
    .await
}

/// Changes `cfg` on the cluster behind the agent's back.
async fn tamper(cluster: &TestHub) -> anyhow::Result<()> {
    let path = "/api/v1/namespaces/default/configmaps/cfg";
    merge_patch(cluster, &cluster.http()?, path, json!({"data": {"v": "tampered"}})).await?;
    Ok(())
}

/// The hub restarted under a connected agent, the hub away for a while, the agent restarted
/// (also while the hub is away): nothing applied is lost, drift is corrected from the agent's
/// journal meanwhile, changes made meanwhile arrive afterwards, and nothing is applied twice.
async fn restarts_and_a_hub_away_lose_nothing(transport: &str) -> anyhow::Result<()> {
    let flags = ["--work-resync-seconds", "1", "--transport", transport];
    let (mut hub, cluster, mut agent, dir) = joined_on(Backend::Sled, &flags).await?;
    let work = json!({"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {"name": "w1", "namespace": "c1"},
        "spec": {"workload": {"manifests": [configmap("cfg", "1")]}}});
    create(&hub, &hub.http()?, WORKS, work.clone()).await?;
    applied(&hub, "w1").await?;
    let before = cfg_holds(&cluster, "1").await?;

    // The hub restarts under the connected agent: the object is neither recreated nor written
    // again (the agent's applies skip writes that change nothing, so this shows that the
    // restart did not make the agent treat the work as new), and the next change arrives.
    hub.restart().await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let same = cfg_holds(&cluster, "1").await?;
    ensure!(
        same["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
            && same["metadata"]["uid"] == before["metadata"]["uid"],
        "cfg was written again after the hub restarted: {before} then {same}"
    );
    set_value(&hub, "w1", "2").await?;
    cfg_holds(&cluster, "2").await?;
    let w = applied(&hub, "w1").await?;
    ensure!(w["metadata"]["generation"] == 2, "{w}");

    // The hub away: what was applied stays (the same object, not made again), and drift is
    // still corrected.
    let uid = &before["metadata"]["uid"];
    hub.pause().await;
    tamper(&cluster).await?;
    ensure!(cfg_holds(&cluster, "2").await?["metadata"]["uid"] == *uid, "cfg was made again");
    tokio::time::sleep(Duration::from_secs(2)).await;
    ensure!(cfg_holds(&cluster, "2").await?["metadata"]["uid"] == *uid, "cfg was made again");
    hub.resume().await?;

    // The agent away: a change made meanwhile reaches the cluster once it is back.
    agent.kill().await?;
    set_value(&hub, "w1", "3").await?;
    let mut agent = rerun(dir.path(), &cluster, &flags)?;
    cfg_holds(&cluster, "3").await?;
    let w = applied(&hub, "w1").await?;
    ensure!(w["metadata"]["generation"] == 3, "{w}");

    // The agent restarted while the hub is away works from its journal.
    agent.kill().await?;
    hub.pause().await;
    let mut agent = rerun(dir.path(), &cluster, &flags)?;
    tamper(&cluster).await?;
    ensure!(cfg_holds(&cluster, "3").await?["metadata"]["uid"] == *uid, "cfg was made again");
    hub.resume().await?;
    // Deleting the work once the hub is back removes what it applied.
    delete(&hub, &hub.http()?, &format!("{WORKS}/w1")).await?;
    eventually("w1 gone from the hub and cfg from the cluster", WAIT, || async {
        Ok((get(&hub, &format!("{WORKS}/w1")).await?.is_none()
            && get(&cluster, "/api/v1/namespaces/default/configmaps/cfg").await?.is_none())
        .then_some(()))
    })
    .await?;
    let _ = agent.kill().await;
    Ok(())
}

async fn works_are_applied_updated_pruned_and_cleaned_up(transport: &str) -> anyhow::Result<()> {
    let (hub, cluster, mut agent, _dir) = joined(&["--transport", transport]).await?;
    let http = hub.http()?;
    let work = json!({"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {"name": "w1", "namespace": "c1"},
        "spec": {"workload": {"manifests": [deployment("web"), configmap("cfg", "1")]}}});
    create(&hub, &hub.http()?, WORKS, work.clone()).await?;

    // Applied on the cluster, reported on the hub.
    let w = applied(&hub, "w1").await?;
    ensure!(
        w["metadata"]["finalizers"].as_array().is_some_and(|f| f.contains(&json!(FINALIZER))),
        "{w}"
    );
    let manifests =
        w["status"]["resourceStatus"]["manifests"].as_array().context("resourceStatus")?;
    ensure!(manifests.len() == 2, "{w}");
    let meta0 = &manifests
        .iter()
        .find(|m| m["resourceMeta"]["ordinal"] == 0)
        .context("ordinal 0")?["resourceMeta"];
    ensure!(
        meta0["group"] == "apps"
            && meta0["resource"] == "deployments"
            && meta0["kind"] == "Deployment"
            && meta0["name"] == "web",
        "{meta0}"
    );
    let cfg = get(&cluster, "/api/v1/namespaces/default/configmaps/cfg")
        .await?
        .context("cfg on the cluster")?;
    ensure!(cfg["data"]["v"] == "1", "{cfg}");
    ensure!(get(&cluster, "/apis/apps/v1/namespaces/default/deployments/web").await?.is_some());
    // Recorded in the AppliedManifestWork, which owns them.
    let amws = get(&cluster, AMWS).await?.context("AMWs")?;
    let amw =
        amws["items"].as_array().and_then(|i| i.first()).context("no AppliedManifestWork")?.clone();
    let amw_name = amw["metadata"]["name"].as_str().unwrap_or_default().to_owned();
    ensure!(
        amw_name.ends_with("-w1")
            && amw["spec"]["manifestWorkName"] == "w1"
            && amw["spec"]["agentID"] == "c1",
        "{amw}"
    );
    ensure!(amw["status"]["appliedResources"].as_array().map(Vec::len) == Some(2), "{amw}");
    ensure!(cfg["metadata"]["ownerReferences"][0]["uid"] == amw["metadata"]["uid"], "{cfg}");
    // Nothing on the hub's own API: works reach only their cluster.
    ensure!(get(&hub, "/api/v1/namespaces/default/configmaps/cfg").await?.is_none());

    // An update reaches the cluster, and Applied follows the new generation.
    let patch =
        json!({"spec": {"workload": {"manifests": [deployment("web"), configmap("cfg", "2")]}}});
    merge_patch(&hub, &http, &format!("{WORKS}/w1"), patch).await?;
    let w = applied(&hub, "w1").await?;
    ensure!(w["metadata"]["generation"] == 2, "{w}");
    let cfg = get(&cluster, "/api/v1/namespaces/default/configmaps/cfg").await?.context("cfg")?;
    ensure!(cfg["data"]["v"] == "2", "{cfg}");

    // A manifest dropped from the work is deleted from the cluster.
    let patch = json!({"spec": {"workload": {"manifests": [configmap("cfg", "2")]}}});
    merge_patch(&hub, &http, &format!("{WORKS}/w1"), patch).await?;
    eventually("the dropped Deployment deleted", WAIT, || async {
        Ok(get(&cluster, "/apis/apps/v1/namespaces/default/deployments/web")
            .await?
            .is_none()
            .then_some(()))
    })
    .await?;
    applied(&hub, "w1").await?;

    // An orphaning work's resources survive its deletion, without the owner.
    let orphan = json!({"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {"name": "w2", "namespace": "c1"},
        "spec": {"workload": {"manifests": [configmap("kept", "x")]},
                 "deleteOption": {"propagationPolicy": "Orphan"}}});
    create(&hub, &hub.http()?, WORKS, orphan.clone()).await?;
    applied(&hub, "w2").await?;

    // Deleting the works: the agent removes what it owns, then lets the hub's objects go.
    for name in ["w1", "w2"] {
        delete(&hub, &http, &format!("{WORKS}/{name}")).await?;
    }
    eventually("both works gone from the hub", WAIT, || async {
        Ok((get(&hub, &format!("{WORKS}/w1")).await?.is_none()
            && get(&hub, &format!("{WORKS}/w2")).await?.is_none())
        .then_some(()))
    })
    .await?;
    ensure!(
        get(&cluster, "/api/v1/namespaces/default/configmaps/cfg").await?.is_none(),
        "the owned ConfigMap outlived its work"
    );
    let kept = get(&cluster, "/api/v1/namespaces/default/configmaps/kept")
        .await?
        .context("the orphaned ConfigMap was deleted")?;
    ensure!(
        kept["metadata"]
            .get("ownerReferences")
            .is_none_or(|o| o.as_array().is_some_and(Vec::is_empty)),
        "{kept}"
    );
    let amws = get(&cluster, AMWS).await?.context("AMWs")?;
    ensure!(amws["items"].as_array().is_some_and(Vec::is_empty), "{amws}");
    let _ = agent.kill().await;
    Ok(())
}

async fn strategies_feedback_and_drift_correction(transport: &str) -> anyhow::Result<()> {
    let (hub, cluster, mut agent, _dir) =
        joined(&["--work-resync-seconds", "1", "--transport", transport]).await?;
    let (http, on_cluster) = (hub.http()?, cluster.http()?);
    // An object the work will only read, made on the cluster first.
    create(
        &cluster,
        &cluster.http()?,
        "/api/v1/namespaces/default/configmaps",
        configmap("ro", "cluster's"),
    )
    .await?;
    let id = |resource: &str, name: &str| {
        json!({"group": if resource == "deployments" { "apps" } else { "" },
        "resource": resource, "namespace": "default", "name": name})
    };
    let work = json!({"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
    "metadata": {"name": "w", "namespace": "c1"},
    "spec": {
        "workload": {"manifests": [configmap("plain", "1"), configmap("once", "1"),
                                   configmap("ssa", "1"), configmap("ro", "work's"), deployment("web")]},
        "manifestConfigs": [
            {"resourceIdentifier": id("configmaps", "once"), "updateStrategy": {"type": "CreateOnly"}},
            {"resourceIdentifier": id("configmaps", "ssa"),
             "updateStrategy": {"type": "ServerSideApply", "serverSideApply": {"fieldManager": "work-agent-x", "force": true}}},
            {"resourceIdentifier": id("configmaps", "ro"), "updateStrategy": {"type": "ReadOnly"}},
            {"resourceIdentifier": id("deployments", "web"),
             "feedbackRules": [{"type": "WellKnownStatus"},
                               {"type": "JSONPaths", "jsonPaths": [{"name": "generation", "path": ".observedGeneration"}]}]},
        ]}});
    create(&hub, &hub.http()?, WORKS, work.clone()).await?;
    applied(&hub, "w").await?;
    let cm = |name: &'static str| {
        let (cluster, on_cluster) = (&cluster, &on_cluster);
        async move {
            let (code, body) = cluster
                .call(
                    on_cluster,
                    Method::GET,
                    &format!("/api/v1/namespaces/default/configmaps/{name}"),
                    None,
                    &[],
                )
                .await?;
            ensure!(code == 200, "{name}: {code} {body}");
            Ok::<Value, anyhow::Error>(body)
        }
    };
    // ReadOnly: left as the cluster has it, not owned.
    let ro = cm("ro").await?;
    ensure!(
        ro["data"]["v"] == "cluster's" && ro["metadata"].get("ownerReferences").is_none(),
        "{ro}"
    );
    // Server-side apply with the configured field manager.
    let ssa = cm("ssa").await?;
    let managers: Vec<&Value> = ssa["metadata"]["managedFields"]
        .as_array()
        .context("managedFields")?
        .iter()
        .map(|m| &m["manager"])
        .collect();
    ensure!(managers.contains(&&json!("work-agent-x")), "{ssa}");
    let entry = ssa["metadata"]["managedFields"]
        .as_array()
        .context("managedFields")?
        .iter()
        .find(|m| m["manager"] == "work-agent-x")
        .context("entry")?;
    ensure!(entry["operation"] == "Apply", "{ssa}");

    // Drift: a change made on the cluster is put back at the next resync.
    let tamper = json!({"data": {"v": "tampered"}});
    for name in ["plain", "once"] {
        let path = format!("/api/v1/namespaces/default/configmaps/{name}");
        merge_patch(&cluster, &on_cluster, &path, tamper.clone()).await?;
    }
    eventually("the drift on plain corrected", WAIT, || async {
        Ok((cm("plain").await?["data"]["v"] == "1").then_some(()))
    })
    .await?;
    // CreateOnly is never changed after creation.
    ensure!(cm("once").await?["data"]["v"] == "tampered");

    // Status feedback follows the Deployment's status on the cluster.
    let status = json!({"status": {"readyReplicas": 1, "replicas": 1, "availableReplicas": 1, "observedGeneration": 1}});
    let path = "/apis/apps/v1/namespaces/default/deployments/web/status";
    merge_patch(&cluster, &on_cluster, path, status).await?;
    let values = eventually("the Deployment's feedback on the hub", WAIT, || async {
        let Some(w) = get(&hub, &format!("{WORKS}/w")).await? else { return Ok(None) };
        let web = w["status"]["resourceStatus"]["manifests"]
            .as_array()
            .and_then(|ms| ms.iter().find(|m| m["resourceMeta"]["name"] == "web").cloned());
        Ok(web
            .and_then(|m| m["statusFeedback"]["values"].as_array().cloned())
            .filter(|v| v.len() == 4))
    })
    .await?;
    let value =
        |name: &str| values.iter().find(|v| v["name"] == name).map(|v| v["fieldValue"].clone());
    ensure!(value("ReadyReplicas") == Some(json!({"type": "Integer", "integer": 1})), "{values:?}");
    ensure!(value("generation") == Some(json!({"type": "Integer", "integer": 1})), "{values:?}");

    // Deleting the work leaves what it only read.
    delete(&hub, &http, &format!("{WORKS}/w")).await?;
    eventually("the work gone", WAIT, || async {
        Ok(get(&hub, &format!("{WORKS}/w")).await?.is_none().then_some(()))
    })
    .await?;
    ensure!(cm("ro").await?["data"]["v"] == "cluster's");
    let (code, _) = cluster
        .call(&on_cluster, Method::GET, "/api/v1/namespaces/default/configmaps/plain", None, &[])
        .await?;
    ensure!(code == 404, "the owned ConfigMap outlived its work");
    // A ReadOnly manifest naming nothing is reported, not created.
    let missing = json!({"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {"name": "m", "namespace": "c1"},
        "spec": {"workload": {"manifests": [configmap("absent", "x")]},
                 "manifestConfigs": [{"resourceIdentifier": id("configmaps", "absent"), "updateStrategy": {"type": "ReadOnly"}}]}});
    create(&hub, &hub.http()?, WORKS, missing.clone()).await?;
    let w = eventually("the ReadOnly failure reported", WAIT, || async {
        let Some(w) = get(&hub, &format!("{WORKS}/m")).await? else { return Ok(None) };
        Ok(condition(&w, "Applied").filter(|c| c["status"] == "False").is_some().then_some(w))
    })
    .await?;
    ensure!(
        condition(&w, "Applied").is_some_and(|c| c["reason"] == "AppliedManifestWorkFailed"),
        "{w}"
    );
    let (code, _) = cluster
        .call(&on_cluster, Method::GET, "/api/v1/namespaces/default/configmaps/absent", None, &[])
        .await?;
    ensure!(code == 404, "a ReadOnly manifest was created");
    let _ = agent.kill().await;
    Ok(())
}
