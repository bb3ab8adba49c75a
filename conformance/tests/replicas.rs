//! Several hub replicas over a real three-member etcd cluster, as real processes: writes
//! through one replica read and watched through another, one leader at a time, and the leader
//! killed (SIGKILL) cycle after cycle while a client keeps writing through every replica:
//! another replica leads, no acknowledged write is lost, and the new leader's controllers act
//! (a Placement created after the failover gets its decisions). A leader frozen (SIGSTOP) past
//! its lease is deposed and, thawed, stops leading; an etcd member killed leaves the service
//! running.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, ensure};
use ocm_conformance::etcd::EtcdServer;
use ocm_conformance::hub::eventually;
use ocm_conformance::replicas::{
    CONFIGMAPS, Replica, all_acknowledged_stored, configmap, create_placement, decided, leader,
    placement_fixture, post, write_continuously,
};
use serde_json::{Value, json};

/// Short election timings, so a cycle takes seconds (the benchmark runs the defaults).
const ELECTION: [&str; 3] = [
    "--leader-elect-lease-duration=4s",
    "--leader-elect-renew-deadline=3s",
    "--leader-elect-retry-period=1s",
];

/// How long a failover may take with [`ELECTION`]'s timings: the lease, a retry, and slack for a
/// loaded machine.
const FAILOVER: Duration = Duration::from_secs(20);

/// Leader kills per run (`OCM_FAILOVER_CYCLES` for a longer soak).
fn cycles() -> usize {
    std::env::var("OCM_FAILOVER_CYCLES").ok().and_then(|c| c.parse().ok()).unwrap_or(20)
}

/// Three replicas on a fresh three-member etcd; `None` when told to skip etcd.
async fn replicas() -> anyhow::Result<Option<(Vec<EtcdServer>, Vec<Replica>)>> {
    if ocm_conformance::etcd::skip("the whole test") {
        return Ok(None);
    }
    let etcd = tokio::task::spawn_blocking(|| EtcdServer::start_cluster(3)).await??;
    let endpoints: Vec<String> = etcd.iter().map(|m| m.endpoint.clone()).collect();
    let mut extra = ELECTION.to_vec();
    extra.push("--controllers=*");
    let first = Replica::start(&endpoints, None, &extra).await?;
    let second = Replica::start(&endpoints, Some(&first), &extra).await?;
    let third = Replica::start(&endpoints, Some(&first), &extra).await?;
    Ok(Some((etcd, vec![first, second, third])))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_serve_one_api_and_fail_over_without_losing_writes() -> anyhow::Result<()> {
    let Some((mut etcd, mut replicas)) = replicas().await? else { return Ok(()) };
    let http = replicas[0].http()?;

    // One API: written through the first, read through the second, watched through the third.
    let (code, created) =
        post(&http, &replicas[0].url(), CONFIGMAPS, &configmap("through-first")).await?;
    ensure!(code == 201, "{code} {created}");
    let rv = created["metadata"]["resourceVersion"].as_str().context("rv")?.to_owned();
    let read = http
        .get(format!("{}{CONFIGMAPS}/through-first?resourceVersion={rv}", replicas[1].url()))
        .send()
        .await?;
    ensure!(read.status() == 200, "read through another replica: {}", read.status());
    let mut watch = http
        .get(format!("{}{CONFIGMAPS}?watch=1&resourceVersion={rv}", replicas[2].url()))
        .send()
        .await?;
    let (code, _) = post(&http, &replicas[1].url(), CONFIGMAPS, &configmap("after-rv")).await?;
    ensure!(code == 201);
    let event = tokio::time::timeout(Duration::from_secs(10), watch.chunk())
        .await
        .context("no watch event through the third replica")??
        .context("the watch ended")?;
    let event: Value = serde_json::from_slice(&event)?;
    ensure!(event["type"] == "ADDED" && event["object"]["metadata"]["name"] == "after-rv");
    drop(watch);

    // One leader, named by the Lease.
    let lead = leader(&replicas, &http, FAILOVER).await?;
    let lease = http
        .get(format!(
            "{}/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/ocm-hub",
            replicas[(lead + 1) % 3].url()
        ))
        .send()
        .await?
        .json::<Value>()
        .await?;
    ensure!(lease["spec"]["holderIdentity"] == json!(replicas[lead].identity()?), "{lease}");

    // Every live replica is published to agents, the leader's URLs first.
    let urls: Vec<String> = replicas.iter().map(Replica::url).collect();
    let mut expected = vec![urls[lead].clone()];
    let mut others: Vec<String> = urls.iter().filter(|u| **u != urls[lead]).cloned().collect();
    others.sort();
    expected.extend(others);
    published(&http, &urls[(lead + 2) % 3], &expected).await?;

    placement_fixture(&http, &replicas[lead].url()).await?;
    create_placement(&http, &replicas[lead].url(), "before-failover").await?;
    decided(&http, &replicas[(lead + 1) % 3].url(), "before-failover", FAILOVER).await?;

    // A client writes through every replica in turn while leaders are killed.
    let acknowledged = Arc::new(Mutex::new(BTreeSet::new()));
    let urls: Vec<String> = replicas.iter().map(Replica::url).collect();
    let writer = tokio::spawn(write_continuously(http.clone(), urls, Arc::clone(&acknowledged)));

    for cycle in 0..cycles() {
        let lead = leader(&replicas, &http, FAILOVER).await?;
        replicas[lead].kill();
        let next = leader(&replicas, &http, FAILOVER)
            .await
            .with_context(|| format!("cycle {cycle}: no replica took over"))?;
        ensure!(next != lead);
        replicas[lead].resume().await?;
        let placement = format!("after-failover-{cycle}");
        create_placement(&http, &replicas[next].url(), &placement).await?;
        decided(&http, &replicas[(next + 1) % 3].url(), &placement, FAILOVER).await?;
        all_acknowledged_stored(&http, &replicas[next].url(), &acknowledged).await?;
    }

    // A leader frozen past its lease is deposed; thawed, it stops leading.
    let frozen = leader(&replicas, &http, FAILOVER).await?;
    replicas[frozen].signal("STOP")?;
    let next = eventually("another leader while one is frozen", FAILOVER, || async {
        for (i, r) in replicas.iter().enumerate() {
            if i != frozen && r.leads(&http).await == Some(true) {
                return Ok(Some(i));
            }
        }
        Ok(None)
    })
    .await?;
    create_placement(&http, &replicas[next].url(), "while-frozen").await?;
    decided(&http, &replicas[next].url(), "while-frozen", FAILOVER).await?;
    replicas[frozen].signal("CONT")?;
    ensure!(leader(&replicas, &http, FAILOVER).await? == next, "the thawed replica leads again");

    // An etcd member killed (the one the replicas' clients use first): the replicas keep
    // serving. A write in flight as its connection broke may answer 503, its fate unknown (as
    // with kube-apiserver); the next one lands.
    etcd[0].stop()?;
    let (code, _) =
        post(&http, &replicas[next].url(), CONFIGMAPS, &configmap("member-down-1")).await?;
    if code != 201 {
        ensure!(code == 503, "a write as an etcd member went: {code}");
        let (code, body) =
            post(&http, &replicas[next].url(), CONFIGMAPS, &configmap("member-down-2")).await?;
        ensure!(code == 201, "a write with one etcd member down: {code} {body}");
    }
    create_placement(&http, &replicas[(next + 1) % 3].url(), "two-of-three").await?;
    decided(&http, &replicas[next].url(), "two-of-three", FAILOVER).await?;

    // A replica stopped cleanly deletes its own Lease and leaves the published list.
    let gone = (next + 1) % 3;
    let own_lease = format!(
        "{}/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/ocm-hub-{}",
        replicas[next].url(),
        replicas[gone].identity()?.rsplit('_').next().unwrap_or_default()
    );
    ensure!(http.get(&own_lease).send().await?.status() == 200, "no replica Lease {own_lease}");
    replicas[gone].stop()?;
    let status = http.get(&own_lease).send().await?.status();
    ensure!(status == 404, "a cleanly stopped replica's Lease: {status}");
    let expected: Vec<String> = [next, (next + 2) % 3].iter().map(|&i| replicas[i].url()).collect();
    published(&http, &replicas[next].url(), &expected).await?;

    writer.abort();
    all_acknowledged_stored(&http, &replicas[next].url(), &acknowledged).await?;
    let count = acknowledged.lock().map(|a| a.len()).unwrap_or_default();
    ensure!(count > cycles(), "the writer got only {count} acknowledgements");
    Ok(())
}

/// `kube-public/cluster-info` (read anonymously through `replica`) lists exactly `expected`
/// (HTTPS URLs, in order), each with its gRPC URL, and names the first as the hub's server.
async fn published(
    http: &reqwest::Client,
    replica: &str,
    expected: &[String],
) -> anyhow::Result<()> {
    let path = format!("{replica}/api/v1/namespaces/kube-public/configmaps/cluster-info");
    let found = eventually("the published replicas", Duration::from_secs(40), || async {
        let info: Value = http.get(&path).send().await?.json().await?;
        let list: Value =
            serde_json::from_str(info["data"]["ocm-hub-replicas"].as_str().unwrap_or("[]"))?;
        let https: Vec<String> = list
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r["grpc"].is_string())
            .filter_map(|r| r["https"].as_str().map(str::to_owned))
            .collect();
        Ok((https == expected).then_some(info))
    })
    .await?;
    let kubeconfig: Value =
        serde_json::from_str(found["data"]["kubeconfig"].as_str().context("kubeconfig")?)?;
    ensure!(kubeconfig["clusters"][0]["cluster"]["server"] == json!(expected[0]), "{kubeconfig}");
    Ok(())
}

/// A replica started on the hub's etcd without the hub's PKI, or with another hub's, is
/// refused with a message naming the hub's CA, instead of answering agents as a stranger.
#[tokio::test]
async fn a_replica_without_the_hubs_identity_is_refused() -> anyhow::Result<()> {
    if ocm_conformance::etcd::skip("the whole test") {
        return Ok(());
    }
    let etcd = tokio::task::spawn_blocking(EtcdServer::start).await??;
    let endpoints = vec![etcd.endpoint.clone()];
    let first = Replica::start(&endpoints, None, &[]).await?;
    let pin = ocm_apiserver::auth::pki::Pki::open(first.path())?.ca_hash()?;

    let bare = Replica::start(&endpoints, None, &[]).await.map(drop).unwrap_err();
    let bare = format!("{bare:#}");
    ensure!(bare.contains(&pin) && bare.contains("holds no CA"), "{bare}");

    let other_etcd = tokio::task::spawn_blocking(EtcdServer::start).await??;
    let stranger = Replica::start(std::slice::from_ref(&other_etcd.endpoint), None, &[]).await?;
    let foreign = Replica::start(&endpoints, Some(&stranger), &[]).await.map(drop).unwrap_err();
    let foreign = format!("{foreign:#}");
    ensure!(foreign.contains(&pin) && foreign.contains("but this data dir's CA is"), "{foreign}");
    Ok(())
}

/// A replica joins with a certificate key instead of a copy of `pki/`: `ocm-hub upload-certs`
/// seals a replica's identity into the store and prints the key once; a replica started with
/// that key and an empty data dir is the same hub (the same CA, its key private) and serves.
/// Another key, a key that is not one, and an upload from another hub's data dir are refused.
#[tokio::test]
async fn a_replica_joins_with_the_uploaded_certificates() -> anyhow::Result<()> {
    if ocm_conformance::etcd::skip("the whole test") {
        return Ok(());
    }
    let etcd = tokio::task::spawn_blocking(EtcdServer::start).await??;
    let endpoints = vec![etcd.endpoint.clone()];
    let first = Replica::start(&endpoints, None, &[]).await?;
    let (code, out, err) = upload_certs(first.path(), &etcd.endpoint)?;
    ensure!(code == 0, "upload-certs: {code} {out}{err}");
    let key = out.lines().nth(1).context("no key printed")?.trim().to_owned();
    ensure!(key.len() == 64 && key.bytes().all(|b| b.is_ascii_hexdigit()), "{out}");

    let joined = Replica::start(&endpoints, None, &["--certificate-key", &key]).await?;
    let read = |r: &Replica, f: &str| std::fs::read(r.path().join("pki").join(f));
    ensure!(read(&joined, "ca.crt")? == read(&first, "ca.crt")?, "another CA");
    ensure!(read(&joined, "ca.key")? == read(&first, "ca.key")?, "another CA key");
    let mode = std::fs::metadata(joined.path().join("pki/ca.key"))?.permissions().mode() & 0o777;
    ensure!(mode == 0o600, "ca.key mode {mode:o}");
    let http = joined.http()?;
    let (code, body) = post(&http, &joined.url(), CONFIGMAPS, &configmap("joined")).await?;
    ensure!(code == 201, "a write through the joined replica: {code} {body}");

    let other = "0".repeat(64);
    let refused = Replica::start(&endpoints, None, &["--certificate-key", &other]).await;
    let refused = format!("{:#}", refused.map(drop).unwrap_err());
    ensure!(refused.contains("does not open the uploaded certificates"), "{refused}");
    let bad = Replica::start(&endpoints, None, &["--certificate-key", "abc"]).await;
    let bad = format!("{:#}", bad.map(drop).unwrap_err());
    ensure!(bad.contains("64 hexadecimal digits"), "{bad}");

    let other_etcd = tokio::task::spawn_blocking(EtcdServer::start).await??;
    let stranger = Replica::start(std::slice::from_ref(&other_etcd.endpoint), None, &[]).await?;
    let (code, _, err) = upload_certs(stranger.path(), &etcd.endpoint)?;
    ensure!(code == 2 && err.contains("the store belongs to the hub whose CA is"), "{code} {err}");
    Ok(())
}

/// `ocm-hub upload-certs` of `data_dir` into the etcd at `endpoint`: status, stdout, stderr.
fn upload_certs(
    data_dir: &std::path::Path,
    endpoint: &str,
) -> anyhow::Result<(i32, String, String)> {
    let out = std::process::Command::new(ocm_conformance::programs::ocm_hub()?)
        .args(["upload-certs", "--etcd-endpoints", endpoint, "--data-dir"])
        .arg(data_dir)
        .output()?;
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    Ok((out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr)))
}
