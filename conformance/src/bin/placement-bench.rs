//! The placement benchmark (issue 8): a hub with its controllers on sled, in this process,
//! driven over HTTPS. Measures, for one placement over N clusters, the scheduler's pass alone
//! and the time from the Placement's create to its status (decision) and to its
//! PlacementDecisions stored; then M placements recomputed at once (their binding appears);
//! then every cluster relabelled, until every affected decision is updated. Prints Markdown rows
//! for `BENCHMARKS.md`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use clap::Parser;
use futures::StreamExt as _;
use k8s_openapi::jiff::Timestamp;
use ocm_apiserver::controllers::placement::schedule::{ClusterFacts, World, schedule};
use ocm_conformance::hub::{Backend, TestHub};
use ocm_proto::api::cluster::v1beta1::Placement;
use ocm_proto::selector::LabelSelector;
use serde_json::{Value, json};

#[derive(Parser, Debug)]
#[command(about = "Benchmarks OCM placement scheduling on the hub")]
struct Args {
    /// Cluster counts for the single-placement measurement.
    #[arg(long, default_value = "1000,10000", value_delimiter = ',')]
    clusters: Vec<usize>,
    /// Placements created one after another per cluster count (the median is reported).
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// Placements × clusters of the recompute measurement (`0` skips it).
    #[arg(long, default_value_t = 1000)]
    placements: usize,
    /// Clusters of the recompute measurement.
    #[arg(long, default_value_t = 1000)]
    recompute_clusters: usize,
    /// Clusters relabelled in the relabel measurement (`0` skips it).
    #[arg(long, default_value_t = 10_000)]
    relabel: usize,
    /// Concurrent requests when creating and relabelling.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
}

const G: &str = "/apis/cluster.open-cluster-management.io";
const MCL: &str = "/apis/cluster.open-cluster-management.io/v1/managedclusters";
const TOLERATE: &str = "cluster.open-cluster-management.io/unreachable";

struct Bench {
    hub: TestHub,
    http: reqwest::Client,
    concurrency: usize,
}

impl Bench {
    async fn start(concurrency: usize) -> anyhow::Result<Bench> {
        let hub = TestHub::start_with(Backend::Sled, |c| {
            c.registration.enabled = true;
        })
        .await?;
        let http = hub.http()?;
        Ok(Bench { hub, http, concurrency })
    }

    async fn send(&self, req: reqwest::RequestBuilder, want: u16) -> anyhow::Result<Value> {
        let resp = req.send().await?;
        let code = resp.status().as_u16();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        ensure!(code == want, "{code}: {body}");
        Ok(body)
    }

    async fn post(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        self.send(self.http.post(format!("{}{path}", self.hub.url)).json(body), 201).await
    }

    async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.send(self.http.get(format!("{}{path}", self.hub.url)), 200).await
    }

    async fn merge(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        let req = self
            .http
            .patch(format!("{}{path}", self.hub.url))
            .header("content-type", "application/merge-patch+json")
            .body(body.to_string());
        self.send(req, 200).await
    }

    /// Creates clusters `first..first+n` named `<prefix>-NNNNN`, labelled `env=<env>`, with
    /// allocatable CPU varying by index.
    async fn clusters(&self, prefix: &str, n: usize, env: &str) -> anyhow::Result<()> {
        let bodies = (0..n).map(|i| {
            json!({
                "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
                "metadata": {"name": format!("{prefix}-{i:05}"), "labels": {
                    "env": env, "cluster.open-cluster-management.io/clusterset": prefix}},
                "spec": {"hubAcceptsClient": false},
            })
        });
        let mut results =
            futures::stream::iter(bodies.map(|b| async move { self.post(MCL, &b).await }))
                .buffer_unordered(self.concurrency);
        while let Some(r) = results.next().await {
            r?;
        }
        Ok(())
    }

    async fn namespace(&self, ns: &str, set: &str) -> anyhow::Result<()> {
        self.post("/api/v1/namespaces", &json!({"metadata": {"name": ns}})).await?;
        self.post(&format!("{G}/v1beta2/managedclustersets"), &json!({
            "apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSet",
            "metadata": {"name": set}, "spec": {"clusterSelector": {"selectorType": "ExclusiveClusterSetLabel"}},
        }))
        .await?;
        Ok(())
    }

    async fn bind(&self, ns: &str, set: &str) -> anyhow::Result<()> {
        self.post(&format!("{G}/v1beta2/namespaces/{ns}/managedclustersetbindings"), &json!({
            "apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSetBinding",
            "metadata": {"name": set, "namespace": ns}, "spec": {"clusterSet": set},
        }))
        .await?;
        Ok(())
    }

    /// Waits until the hub writes nothing for a second (the controllers' reaction to the set-up
    /// is over), so a measurement times one thing.
    async fn settle(&self) -> anyhow::Result<()> {
        let mut last = String::new();
        let start = Instant::now();
        loop {
            let list = self.get(&format!("{MCL}?limit=1")).await?;
            let rv = list["metadata"]["resourceVersion"].as_str().unwrap_or("").to_owned();
            if rv == last {
                return Ok(());
            }
            ensure!(start.elapsed() < Duration::from_secs(300), "the hub did not settle in 300 s");
            last = rv;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// Starts following the PlacementDecisions of `ns` (a list, then a watch from its
    /// revision), before a measurement starts: the list of every decision already there is
    /// not part of what is timed. A watch, not polling: a poll of thousands of decisions every
    /// few milliseconds would load the hub it measures.
    async fn decisions(&self, ns: &str) -> anyhow::Result<DecisionWatch> {
        let path = format!("{G}/v1beta1/namespaces/{ns}/placementdecisions");
        let list = self.get(&path).await?;
        let sizes: HashMap<String, usize> =
            list["items"].as_array().into_iter().flatten().map(|d| (name(d), size(d))).collect();
        let rv = list["metadata"]["resourceVersion"].as_str().unwrap_or("0").to_owned();
        let url = format!("{}{path}?watch=true&resourceVersion={rv}", self.hub.url);
        let resp = self.http.get(url).send().await?;
        ensure!(resp.status().is_success(), "watch: {}", resp.status());
        Ok(DecisionWatch { sizes, stream: Box::pin(resp.bytes_stream()) })
    }
}

/// A decision's name and how many clusters it holds.
fn name(d: &Value) -> String {
    d["metadata"]["name"].as_str().unwrap_or("").to_owned()
}

fn size(d: &Value) -> usize {
    d["status"]["decisions"].as_array().map_or(0, Vec::len)
}

/// PlacementDecisions followed: their sizes by name as the watch has shown them.
struct DecisionWatch {
    sizes: HashMap<String, usize>,
    stream: std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
}

impl DecisionWatch {
    /// Reads the watch until `done` holds for the decisions' sizes by name; when it did.
    async fn until(
        mut self,
        limit: Duration,
        done: impl Fn(&HashMap<String, usize>) -> bool,
    ) -> anyhow::Result<Instant> {
        let sizes = &mut self.sizes;
        if done(sizes) {
            return Ok(Instant::now());
        }
        let mut buf = Vec::new();
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let chunk = tokio::time::timeout_at(deadline, self.stream.next())
                .await
                .context("decisions not done in time")?
                .context("watch ended")??;
            buf.extend_from_slice(&chunk);
            while let Some(end) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=end).collect();
                let ev: Value = serde_json::from_slice(&line)?;
                let obj = &ev["object"];
                match ev["type"].as_str() {
                    Some("DELETED") => {
                        sizes.remove(&name(obj));
                    }
                    Some("ADDED" | "MODIFIED") => {
                        sizes.insert(name(obj), size(obj));
                    }
                    _ => {}
                }
            }
            if done(sizes) {
                return Ok(Instant::now());
            }
        }
    }
}

fn placement(name: &str, number: Option<usize>) -> Value {
    let mut spec = json!({
        "predicates": [{"requiredClusterSelector": {"labelSelector": {"matchLabels": {"env": "prod"}}}}],
        "tolerations": [{"key": TOLERATE, "operator": "Exists"}],
    });
    if let Some(n) = number {
        spec["numberOfClusters"] = json!(n);
    }
    json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
        "metadata": {"name": name}, "spec": spec,
    })
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

/// The expressions of the `celSelector` pass: half the clusters are prod, and of those the ones
/// with more than 48 CPUs (49 of every 97).
const CEL: [&str; 2] = [
    "managedCluster.metadata.labels.env == \"prod\"",
    "quantity(managedCluster.status.allocatable.cpu).compareTo(quantity(\"48\")) > 0",
];

/// The scheduler's pass alone over `n` synthetic clusters (half `env=prod`), median of 21; with
/// `cel`, selected by the [`CEL`] expressions instead of a label selector.
fn pass_alone(n: usize, cel: bool) -> anyhow::Result<Duration> {
    let clusters: Vec<Arc<ClusterFacts>> = (0..n)
        .map(|i| {
            let mut labels = BTreeMap::new();
            labels.insert("env".to_owned(), if i % 2 == 0 { "prod" } else { "dev" }.to_owned());
            labels.insert(
                "cluster.open-cluster-management.io/clusterset".to_owned(),
                "bench".to_owned(),
            );
            Arc::new(ClusterFacts {
                name: format!("c-{i:05}"),
                labels,
                cpu: Some((i % 97) as f64 * 1000.0),
                ..ClusterFacts::default()
            })
        })
        .collect();
    let mut sets = BTreeMap::new();
    sets.insert(
        "bench".to_owned(),
        Ok(LabelSelector::parse("cluster.open-cluster-management.io/clusterset=bench")?),
    );
    let bindings: BTreeSet<String> = ["bench".to_owned()].into();
    let elsewhere = HashMap::new();
    // The clusters as CEL reads them (as stored: labels and the status the agent reports).
    let objects: HashMap<String, Arc<Value>> = clusters
        .iter()
        .filter(|_| cel)
        .map(|c| {
            let cpu = c.cpu.unwrap_or(0.0) / 1000.0;
            let o = json!({
                "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
                "metadata": {"name": c.name, "labels": c.labels, "uid": "0b6c1f5e-8f1e-4c57-9d55-5d0f0ad1c001",
                    "resourceVersion": "123456", "creationTimestamp": "2026-11-01T00:00:00Z",
                    "finalizers": ["cluster.open-cluster-management.io/api-resource-cleanup"],
                    "managedFields": [
                        {"manager": "klusterlet", "operation": "Update", "apiVersion": "cluster.open-cluster-management.io/v1",
                         "time": "2026-11-01T00:00:00Z", "fieldsType": "FieldsV1", "subresource": "status",
                         "fieldsV1": {"f:status": {"f:allocatable": {".": {}, "f:cpu": {}, "f:memory": {}},
                            "f:capacity": {".": {}, "f:cpu": {}, "f:memory": {}}, "f:conditions": {}, "f:version": {"f:kubernetes": {}}}}},
                        {"manager": "ocm-hub", "operation": "Update", "apiVersion": "cluster.open-cluster-management.io/v1",
                         "time": "2026-11-01T00:00:00Z", "fieldsType": "FieldsV1",
                         "fieldsV1": {"f:metadata": {"f:finalizers": {}, "f:labels": {}}, "f:spec": {"f:taints": {}}}}]},
                "spec": {"hubAcceptsClient": true, "leaseDurationSeconds": 60},
                "status": {"allocatable": {"cpu": cpu.to_string(), "memory": "64Gi"},
                    "capacity": {"cpu": cpu.to_string(), "memory": "64Gi"},
                    "version": {"kubernetes": "v1.31.2"},
                    "conditions": (["HubAcceptedManagedCluster", "ManagedClusterJoined",
                        "ManagedClusterConditionAvailable", "ManagedClusterConditionClockSynced"]
                        .map(|t| json!({"type": t, "status": "True", "reason": t, "message": "as expected",
                            "lastTransitionTime": "2026-11-01T00:00:00Z"})))},
            });
            (c.name.clone(), Arc::new(o))
        })
        .collect();
    let scores = |_: &str, _: &str| None;
    let object = |c: &str| objects.get(c).cloned();
    let mut p: Placement = serde_json::from_value(placement("p", None))?;
    if cel {
        p.spec.predicates = serde_json::from_value(json!([{"requiredClusterSelector": {
            "celSelector": {"celExpressions": CEL}}}]))?;
    }
    p.spec.prioritizer_policy = serde_json::from_value(json!({"configurations": [
        {"scoreCoordinate": {"builtIn": "ResourceAllocatableCPU"}}]}))?;
    let world = World {
        clusters: &clusters,
        sets: &sets,
        bindings: &bindings,
        decided: &elsewhere,
        own: &elsewhere,
        scores: &scores,
        object: &object,
        now: Timestamp::now(),
    };
    let mut times = Vec::new();
    for _ in 0..21 {
        let t = Instant::now();
        let out = schedule(&p, &world, false);
        times.push(t.elapsed());
        let want =
            if cel { (0..n).filter(|i| i % 2 == 0 && i % 97 > 48).count() } else { n.div_ceil(2) };
        ensure!(
            out.selected == want,
            "selected {} of {want}: {:?}",
            out.selected,
            out.misconfigured
        );
    }
    Ok(median(times))
}

/// One placement over `n` clusters, `repeat` times: (decision, stored) medians.
async fn single(b: &Bench, n: usize, repeat: usize) -> anyhow::Result<(Duration, Duration)> {
    let set = format!("s{n}");
    let ns = format!("single-{n}");
    b.namespace(&ns, &set).await?;
    b.clusters(&set, n, "prod").await?;
    b.bind(&ns, &set).await?;
    b.settle().await?;
    let (mut decided, mut stored) = (Vec::new(), Vec::new());
    for r in 0..repeat {
        let name = format!("p{r}");
        let path = format!("{G}/v1beta1/namespaces/{ns}/placements");
        let prefix = format!("{name}-decision-");
        let decisions = b.decisions(&ns).await?;
        let start = Instant::now();
        let watching = decisions.until(Duration::from_secs(120), |sizes| {
            sizes.iter().filter(|(k, _)| k.starts_with(&prefix)).map(|(_, n)| n).sum::<usize>() == n
        });
        let deciding = async {
            b.post(&path, &placement(&name, None)).await?;
            loop {
                let p = b.get(&format!("{path}/{name}")).await?;
                if p["status"]["numberOfSelectedClusters"].as_u64() == Some(n as u64) {
                    return anyhow::Ok(start.elapsed());
                }
                ensure!(
                    start.elapsed() < Duration::from_secs(120),
                    "placement {name} not decided in 120 s"
                );
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        };
        let (done, decision) = tokio::join!(watching, deciding);
        stored.push(done? - start);
        let decision = Some(decision?);
        decided.extend(decision);
        b.settle().await?;
    }
    Ok((median(decided), median(stored)))
}

/// `m` placements over `n` clusters wait without a binding; the binding appears: the time
/// until every placement has its decision stored.
async fn recompute(b: &Bench, m: usize, n: usize) -> anyhow::Result<Duration> {
    let (ns, set) = ("recompute", "rset");
    b.namespace(ns, set).await?;
    b.clusters(set, n, "prod").await?;
    let path = format!("{G}/v1beta1/namespaces/{ns}/placements");
    let bodies = (0..m).map(|i| placement(&format!("p{i:04}"), Some(10)));
    let mut results = futures::stream::iter(bodies.map(|p| {
        let path = &path;
        async move { b.post(path, &p).await }
    }))
    .buffer_unordered(b.concurrency);
    while let Some(r) = results.next().await {
        r?;
    }
    b.settle().await?;
    let decisions = b.decisions(ns).await?;
    let start = Instant::now();
    let watching = decisions
        .until(Duration::from_secs(600), |sizes| sizes.values().filter(|n| **n == 10).count() == m);
    let (done, bound) = tokio::join!(watching, b.bind(ns, set));
    bound?;
    Ok(done? - start)
}

/// `n` clusters labelled `env=dev` under 10 placements selecting `env=prod`; every cluster is
/// relabelled: the time from the first patch to every placement deciding all `n`.
async fn relabel(b: &Bench, n: usize) -> anyhow::Result<(Duration, Duration)> {
    let (ns, set) = ("relabel", "lset");
    b.namespace(ns, set).await?;
    b.clusters(set, n, "dev").await?;
    b.bind(ns, set).await?;
    let path = format!("{G}/v1beta1/namespaces/{ns}/placements");
    let names: Vec<String> = (0..10).map(|i| format!("p{i}")).collect();
    for name in &names {
        b.post(&path, &placement(name, None)).await?;
    }
    b.settle().await?;
    let start = Instant::now();
    let patch = json!({"metadata": {"labels": {"env": "prod"}}});
    let mut results = futures::stream::iter((0..n).map(|i| {
        let patch = &patch;
        async move { b.merge(&format!("{MCL}/{set}-{i:05}"), patch).await }
    }))
    .buffer_unordered(b.concurrency);
    while let Some(r) = results.next().await {
        r?;
    }
    let patched = start.elapsed();
    // Followed from here (the patches are done): the list is part of what is timed.
    let decisions = b.decisions(ns).await?;
    let done = decisions
        .until(Duration::from_secs(600), |sizes| sizes.values().sum::<usize>() == 10 * n)
        .await?;
    Ok((patched, done - start))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    println!(
        "| measurement | clusters | scheduler pass (schedule() alone) | to status written (after the decisions) | to decisions stored |"
    );
    println!("|---|---:|---:|---:|---:|");
    for &n in &args.clusters {
        let alone = pass_alone(n, false)?;
        let b = Bench::start(args.concurrency).await?;
        let (decided, stored) =
            single(&b, n, args.repeat).await.with_context(|| format!("{n} clusters"))?;
        println!(
            "| one placement (median of {}) | {n} | {} ms | {} ms | {} ms |",
            args.repeat,
            ms(alone),
            ms(decided),
            ms(stored)
        );
        // Only once the hub has stopped (`stop` waits for it): its shutdown does not share the
        // cores with the CEL pass.
        b.hub.stop().await;
        println!(
            "| one placement's pass with a 2-expression celSelector | {n} | {} ms | — | — |",
            ms(pass_alone(n, true)?)
        );
    }
    if args.placements > 0 {
        let b = Bench::start(args.concurrency).await?;
        let took = recompute(&b, args.placements, args.recompute_clusters).await?;
        println!(
            "| {} placements (10 clusters each) recomputed when their binding appears | {} | — | — | {} ms |",
            args.placements,
            args.recompute_clusters,
            ms(took)
        );
        drop(b);
    }
    if args.relabel > 0 {
        let b = Bench::start(args.concurrency).await?;
        let (patched, took) = relabel(&b, args.relabel).await?;
        println!(
            "| relabel every cluster (10 placements); patches took {} ms | {} | — | — | {} ms |",
            ms(patched),
            args.relabel,
            ms(took)
        );
        drop(b);
    }
    Ok(())
}
