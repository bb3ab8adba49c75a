//! A simulated fleet over REST, for the benchmarks that need many clusters but no agents:
//! accepted ManagedClusters reported Available (the hub makes each one's namespace, Lease and
//! agent RBAC, as for a joined cluster), and their Leases renewed as their agents would.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::hub::eventually;

/// The ManagedClusters' collection.
pub const MANAGED_CLUSTERS: &str = "/apis/cluster.open-cluster-management.io/v1/managedclusters";

/// How often each cluster renews its Lease (OCM's default `leaseDurationSeconds`).
pub const RENEW_EVERY: Duration = Duration::from_secs(60);

/// Cluster `i`'s name.
pub fn name(i: usize) -> String {
    format!("cl-{i:05}")
}

/// A status patch setting `ManagedClusterConditionAvailable` to `status`.
pub fn available(status: &str) -> Value {
    json!({"status": {"conditions": [{
        "type": "ManagedClusterConditionAvailable", "status": status, "reason": "Bench",
        "message": "set by the benchmark",
        "lastTransitionTime": ocm_apiserver::machinery::object::now_rfc3339(),
    }]}})
}

/// `n` accepted ManagedClusters, each Available, created and reported by 64 clients at once;
/// returns once the hub has made the last one's namespace and Lease.
pub async fn make_fleet(admin: &reqwest::Client, base: &str, n: usize) -> anyhow::Result<()> {
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let (admin, base, next) = (admin.clone(), base.to_owned(), Arc::clone(&next));
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return Ok::<_, anyhow::Error>(());
                }
                let mc = json!({"apiVersion": "cluster.open-cluster-management.io/v1",
                    "kind": "ManagedCluster", "metadata": {"name": name(i)},
                    "spec": {"hubAcceptsClient": true}});
                let r = admin.post(format!("{base}{MANAGED_CLUSTERS}")).json(&mc).send().await?;
                anyhow::ensure!(r.status() == 201, "create {}: {}", name(i), r.status());
                // Every answer is read: one dropped unread resets its HTTP/2 stream, and the
                // hub ends a connection that resets too many (`BENCHMARKS.md`, cluster proxy).
                r.bytes().await?;
                let status = format!("{base}{MANAGED_CLUSTERS}/{}/status", name(i));
                patch(&admin, &status, &available("True")).await?;
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    let lease = format!(
        "{base}/apis/coordination.k8s.io/v1/namespaces/{}/leases/{}",
        name(n - 1),
        ocm_proto::api::cluster::LEASE_NAME
    );
    eventually("the last cluster's Lease", Duration::from_secs(300), || async {
        Ok(admin.get(&lease).send().await?.status().is_success().then_some(()))
    })
    .await
}

/// A JSON merge patch of `url`, its answer read whole; fails unless it succeeds.
pub async fn patch(http: &reqwest::Client, url: &str, body: &Value) -> anyhow::Result<()> {
    let r = http
        .patch(url)
        .header("content-type", "application/merge-patch+json")
        .body(body.to_string())
        .send()
        .await?;
    let code = r.status();
    let body = r.text().await?;
    anyhow::ensure!(code.is_success(), "PATCH {url}: {code} {body}");
    Ok(())
}

/// Renews every cluster's Lease once per [`RENEW_EVERY`], evenly spread, until `stop`; returns
/// how many renewals were made, and over how long.
pub async fn renew(
    admin: reqwest::Client,
    base: String,
    n: usize,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<(u64, Duration)> {
    let started = Instant::now();
    let gap = RENEW_EVERY / n as u32;
    let mut tick = tokio::time::interval(gap);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let (mut i, mut renewed) = (0usize, 0u64);
    let inflight = Arc::new(tokio::sync::Semaphore::new(64));
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        let url = format!(
            "{base}/apis/coordination.k8s.io/v1/namespaces/{}/leases/{}",
            name(i % n),
            ocm_proto::api::cluster::LEASE_NAME
        );
        let now = ocm_apiserver::machinery::object::rfc3339_micros(time::OffsetDateTime::now_utc());
        let body = json!({"spec": {"renewTime": now}});
        let permit = Arc::clone(&inflight).acquire_owned().await?;
        let admin = admin.clone();
        tokio::spawn(async move {
            if let Err(e) = patch(&admin, &url, &body).await {
                eprintln!("renewal failed: {e}");
            }
            drop(permit);
        });
        i += 1;
        renewed += 1;
    }
    // The renewals still on their way finish before the hub goes.
    let _all = inflight.acquire_many(64).await?;
    Ok((renewed, started.elapsed()))
}
