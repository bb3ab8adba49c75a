//! A leader partitioned from etcd, as real processes: three replicas over a three-member etcd,
//! the leader in a network namespace of its own whose link to etcd is cut while the test still
//! reaches it. It stops its controllers when it cannot renew, before its lease can run out, so
//! no two replicas ever lead at once; another takes over and its controllers act; once the
//! link returns, the old leader's late renewals fail (the Lease stays the new leader's), it
//! does not lead again, and it serves what was written meanwhile. Needs root (the namespace)
//! and iproute2.

use std::time::Duration;

use anyhow::{Context, ensure};
use ocm_conformance::etcd::EtcdServer;
use ocm_conformance::hub::eventually;
use ocm_conformance::netns::Netns;
use ocm_conformance::replicas::{
    CONFIGMAPS, Replica, configmap, create_placement, decided, leader, placement_fixture, post,
};
use serde_json::{Value, json};

/// Short election timings: a 4 s lease, given up after 3 s without a renewal.
const ELECTION: [&str; 4] = [
    "--leader-elect-lease-duration=4s",
    "--leader-elect-renew-deadline=3s",
    "--leader-elect-retry-period=1s",
    "--controllers=*",
];

/// How long a failover or a placement's decisions may take on a loaded machine.
const LIMIT: Duration = Duration::from_secs(30);

/// The Lease the replicas elect on, read through `replica`.
const LEASE: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/ocm-hub";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_cut_off_from_etcd_stops_before_another_leads() -> anyhow::Result<()> {
    if ocm_conformance::etcd::skip("the whole test")
        || ocm_conformance::netns::skip("the whole test")
    {
        return Ok(());
    }
    let netns = Netns::create()?;
    let store_host = netns.store_host();
    let etcd =
        tokio::task::spawn_blocking(move || EtcdServer::start_cluster_also_on(3, Some(store_host)))
            .await??;
    let loopback: Vec<String> = etcd.iter().map(|m| m.endpoint.clone()).collect();
    let across: Vec<String> = etcd.iter().map(|m| m.endpoint_at(store_host)).collect();

    // The first replica, in the namespace, takes the Lease nobody holds yet.
    let first = Replica::start_in(&netns, &across, None, &ELECTION).await?;
    let http = first.http()?;
    eventually("the first replica leads", LIMIT, || async {
        Ok((first.leads(&http).await == Some(true)).then_some(()))
    })
    .await?;
    let second = Replica::start(&loopback, Some(&first), &ELECTION).await?;
    let third = Replica::start(&loopback, Some(&first), &ELECTION).await?;
    let replicas = vec![first, second, third];
    ensure!(leader(&replicas, &http, LIMIT).await? == 0, "the partitioned replica must lead");
    placement_fixture(&http, &replicas[0].url()).await?;
    create_placement(&http, &replicas[0].url(), "before-cut").await?;
    decided(&http, &replicas[1].url(), "before-cut", LIMIT).await?;

    // Cut: the leader cannot reach etcd; the test still reaches every replica.
    netns.cut()?;
    let next = one_leader_at_a_time(&replicas, &http).await.context("while cut off")?;
    ensure!(next != 0, "the partitioned replica still leads");
    ensure!(
        replicas[0].log().contains("could not renew the leader lease within the renew deadline"),
        "the old leader never said it stopped its controllers:\n{}",
        replicas[0].log()
    );
    let new = replicas[next].identity()?;
    let lease = get(&http, &replicas[next].url(), LEASE).await?;
    ensure!(lease["spec"]["holderIdentity"] == json!(new), "{lease}");
    create_placement(&http, &replicas[next].url(), "while-cut").await?;
    decided(&http, &replicas[next].url(), "while-cut", LIMIT).await?;

    // Healed: the old leader's renewals sent before the cut and delivered now fail (the Lease
    // changed), it stays a follower, and it serves what was written meanwhile.
    netns.heal()?;
    let url = replicas[0].url();
    eventually("the old leader serving again", LIMIT, || async {
        let ok = http.get(format!("{url}/readyz")).send().await;
        Ok(ok.is_ok_and(|r| r.status().is_success()).then_some(()))
    })
    .await?;
    decided(&http, &url, "while-cut", LIMIT).await?;
    let (code, body) = post(&http, &url, CONFIGMAPS, &configmap("after-heal")).await?;
    ensure!(code == 201, "a write through the old leader after the heal: {code} {body}");
    create_placement(&http, &url, "after-heal").await?;
    decided(&http, &url, "after-heal", LIMIT).await?;
    for round in 0..10 {
        ensure!(replicas[0].leads(&http).await == Some(false), "the old leader leads again");
        ensure!(replicas[next].leads(&http).await == Some(true), "round {round}: no leader");
        let lease = get(&http, &url, LEASE).await?;
        ensure!(lease["spec"]["holderIdentity"] == json!(new), "round {round}: {lease}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    drop(etcd);
    Ok(())
}

/// Polls every replica's `leader_election_master_status` in rounds until one other than the
/// first (the partitioned one) leads: fails if a round ever finds two leading, or the new
/// leader before a round that found the first stopped. Returns the new leader.
async fn one_leader_at_a_time(
    replicas: &[Replica],
    http: &reqwest::Client,
) -> anyhow::Result<usize> {
    let mut old_stopped = false;
    let until = tokio::time::Instant::now() + LIMIT;
    while tokio::time::Instant::now() < until {
        let mut leading = Vec::new();
        for (i, r) in replicas.iter().enumerate() {
            match r.leads(http).await {
                Some(true) => leading.push(i),
                Some(false) if i == 0 => old_stopped = true,
                _ => {}
            }
        }
        ensure!(leading.len() <= 1, "two replicas lead at once: {leading:?}");
        if let Some(&i) = leading.first().filter(|i| **i != 0) {
            ensure!(old_stopped, "replica {i} leads before the old leader was seen stopped");
            return Ok(i);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    anyhow::bail!("no other replica led within {LIMIT:?}")
}

async fn get(http: &reqwest::Client, replica: &str, path: &str) -> anyhow::Result<Value> {
    let response = http.get(format!("{replica}{path}")).send().await?;
    ensure!(response.status() == 200, "GET {path}: {}", response.status());
    Ok(response.json().await?)
}
