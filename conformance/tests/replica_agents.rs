//! A real klusterlet joined to a hub of three replicas over a three-member etcd: it learns the
//! replicas the hub publishes, and when the replica it joined at (the leader) is killed it
//! moves to another over REST and gRPC without re-joining or re-applying: its cluster stays
//! Available, and a ManifestWork created after the failover reaches the stand-in cluster.

use std::time::Duration;

use anyhow::ensure;
use ocm_apiserver::machinery::scheme::Profile;
use ocm_conformance::etcd::EtcdServer;
use ocm_conformance::hub::{Backend, TestHub, eventually};
use ocm_conformance::programs;
use ocm_conformance::replicas::{Replica, leader, post};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(90);
const WORKS: &str = "/apis/work.open-cluster-management.io/v1/namespaces/c1/manifestworks";

fn work(name: &str) -> Value {
    json!({
        "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {"name": name, "namespace": "c1"},
        "spec": {"workload": {"manifests": [{
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": {"from": name},
        }]}},
    })
}

/// The ConfigMap `name` on the stand-in cluster, once it is there.
async fn on_cluster(cluster: &TestHub, name: &str) -> anyhow::Result<Value> {
    let http = cluster.http()?;
    let path = format!("{}/api/v1/namespaces/default/configmaps/{name}", cluster.url);
    eventually(&format!("ConfigMap {name} on the cluster"), WAIT, || async {
        let resp = http.get(&path).send().await?;
        Ok(if resp.status() == 200 { Some(resp.json::<Value>().await?) } else { None })
    })
    .await
}

/// c1's `ManagedClusterConditionAvailable` status, read through `replica`.
async fn available(http: &reqwest::Client, replica: &str) -> anyhow::Result<Option<String>> {
    let path = format!("{replica}/apis/cluster.open-cluster-management.io/v1/managedclusters/c1");
    let cluster: Value = http.get(path).send().await?.json().await?;
    Ok(cluster["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "ManagedClusterConditionAvailable")
        .and_then(|c| c["status"].as_str().map(str::to_owned)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_agent_follows_the_replicas_through_a_failover() -> anyhow::Result<()> {
    if ocm_conformance::etcd::skip("the whole test") {
        return Ok(());
    }
    let (id, secret) = ("repl01", "0123456789abcdef");
    let etcd = tokio::task::spawn_blocking(|| EtcdServer::start_cluster(3)).await??;
    let endpoints: Vec<String> = etcd.iter().map(|m| m.endpoint.clone()).collect();
    let approve = format!("--auto-approve-identities=system:bootstrap:{id}");
    let extra = [
        "--leader-elect-lease-duration=4s",
        "--leader-elect-renew-deadline=3s",
        "--leader-elect-retry-period=1s",
        approve.as_str(),
    ];
    let first = Replica::start(&endpoints, None, &extra).await?;
    let mut replicas = vec![
        Replica::start(&endpoints, Some(&first), &extra).await?,
        Replica::start(&endpoints, Some(&first), &extra).await?,
    ];
    replicas.insert(0, first);
    let http = replicas[0].http()?;
    let token = ocm_apiserver::auth::bootstrap::bootstrap_token_object(
        id,
        secret,
        "2099-01-01T00:00:00Z",
        "replicas",
    );
    let (code, body) =
        post(&http, &replicas[0].url(), "/api/v1/namespaces/kube-system/secrets", &token).await?;
    ensure!(code == 201, "{code} {body}");

    // The agent joins at the first replica and learns the others.
    let cluster = TestHub::start_with(Backend::Memory, |c| c.profile = Profile::Cluster).await?;
    let dir = tempfile::tempdir()?;
    let ca = replicas[0].path().join("pki/ca.crt").display().to_string();
    let _agent = tokio::process::Command::new(programs::klusterlet()?)
        .args(["join", "--hub", &replicas[0].url(), "--token", &format!("{id}.{secret}")])
        .args(["--cluster-name", "c1", "--ca-file", &ca])
        .arg("--data-dir")
        .arg(dir.path())
        .arg("--cluster-kubeconfig")
        .arg(cluster.kubeconfig())
        .env("RUST_LOG", std::env::var("OCM_AGENT_LOG").unwrap_or_else(|_| "warn".into()))
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let up = eventually("c1 available", WAIT, || async {
        Ok((available(&http, &replicas[1].url()).await? == Some("True".into())).then_some(()))
    })
    .await;
    if up.is_err() {
        for r in &replicas {
            eprintln!("=== {}\n{}", r.url(), r.log());
        }
    }
    up?;
    let learned = dir.path().join("hub-replicas");
    eventually("the agent's list of replicas", WAIT, || async {
        let text = std::fs::read_to_string(&learned).unwrap_or_default();
        let list: Vec<Value> = serde_json::from_str(&text).unwrap_or_default();
        Ok((list.len() == 3).then_some(()))
    })
    .await?;
    let (code, body) = post(&http, &replicas[1].url(), WORKS, &work("before")).await?;
    ensure!(code == 201, "{code} {body}");
    let before = on_cluster(&cluster, "before").await?;
    let csrs = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
    let csrs_before: Value =
        http.get(format!("{}{csrs}", replicas[1].url())).send().await?.json().await?;

    // The replica the agent joined at goes, leading or not; make sure the leader goes too.
    let lead = leader(&replicas, &http, WAIT).await?;
    replicas[0].kill();
    if lead != 0 {
        replicas[lead].kill();
    }
    let alive: Vec<usize> = (0..3).filter(|&i| replicas[i].running()).collect();
    let next = leader(&replicas, &http, WAIT).await?;
    let (code, body) = post(&http, &replicas[next].url(), WORKS, &work("after")).await?;
    ensure!(code == 201, "{code} {body}");
    on_cluster(&cluster, "after").await?;

    // Through the failover: c1 stayed Available, nothing was applied again, no new CSR.
    let other = alive.iter().copied().find(|&i| i != next).unwrap_or(next);
    ensure!(available(&http, &replicas[other].url()).await? == Some("True".into()));
    let still = on_cluster(&cluster, "before").await?;
    ensure!(
        still["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"],
        "the work's ConfigMap was applied again: {before} then {still}"
    );
    let csrs_after: Value =
        http.get(format!("{}{csrs}", replicas[next].url())).send().await?.json().await?;
    ensure!(
        csrs_after["items"].as_array().map(Vec::len)
            == csrs_before["items"].as_array().map(Vec::len),
        "the agent asked for a certificate again"
    );
    drop(etcd);
    Ok(())
}
