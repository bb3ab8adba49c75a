//! The object-scale benchmark (`BENCHMARKS.md`, "A million ManifestWorks"): one hub as an
//! `ocm-hub serve` process on sled, `--clusters` accepted ManagedClusters, and `--works` works
//! of about 1 KiB in each cluster's namespace, created through the API and then given the
//! status an agent reports. It prints, as the store fills and at rest: the create and status
//! write rates per slice (so a rate that falls as the store grows shows), the hub's RSS and disk,
//! one namespace's LIST, an agent's resync of its works over gRPC, a full paged LIST, creates
//! while the store holds them all, and a cold start (process start to `/readyz`, which the hub
//! answers only once its watch cache holds every object).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;
use futures::StreamExt as _;
use hdrhistogram::Histogram;
use ocm_conformance::cloudevents::{event, next};
use ocm_conformance::hub::proc_status_kib;
use ocm_conformance::load::{hist, ms};
use ocm_conformance::replicas::Replica;
use ocm_conformance::simfleet::{self, name};
use ocm_proto::cloudevents::{data_type, ext};
use rand::Rng as _;
use serde_json::{Value, json};

#[derive(Parser)]
struct Args {
    /// Clusters (each a namespace of works).
    #[arg(long, default_value_t = 10_000)]
    clusters: usize,
    /// Works per cluster.
    #[arg(long, default_value_t = 100)]
    works: usize,
    /// Requests in flight while filling the store.
    #[arg(long, default_value_t = 256)]
    inflight: usize,
    /// HTTP/2 connections they share.
    #[arg(long, default_value_t = 8)]
    connections: usize,
    /// Writes per reported slice of the fill.
    #[arg(long, default_value_t = 100_000)]
    slice: usize,
    /// Timed samples of each read at rest.
    #[arg(long, default_value_t = 1000)]
    samples: usize,
    /// Works created at rest, once the store holds the others.
    #[arg(long, default_value_t = 50_000)]
    at_rest: usize,
}

const WORKS: &str = "/apis/work.open-cluster-management.io/v1";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    ocm_apiserver::serve::server::raise_open_file_limit();
    let mut hub = Replica::start_sled(&[]).await?;
    let base = hub.url();
    let clients = (0..args.connections).map(|_| hub.http()).collect::<anyhow::Result<Vec<_>>>()?;
    let total = args.clusters * args.works;
    println!(
        "scale-bench: {} clusters × {} works = {total} ManifestWorks, {} in flight over {} connections",
        args.clusters, args.works, args.inflight, args.connections
    );
    let started = Instant::now();
    simfleet::make_fleet(&clients[0], &base, args.clusters).await?;
    println!("{} clusters accepted in {:.1} s", args.clusters, started.elapsed().as_secs_f64());
    report_size(&hub, "fleet, no works");

    let work_of = |i: usize| (name(i % args.clusters), format!("w-{:03}", i / args.clusters));
    println!("\n| phase | objects so far | rate /s | p50 ms | p99 ms |\n|---|---:|---:|---:|---:|");
    fill(&clients, args.inflight, total, args.slice, "create", |http, i| {
        let (ns, w) = work_of(i);
        (
            http.post(format!("{base}{WORKS}/namespaces/{ns}/manifestworks")).json(&work(&ns, &w)),
            201,
        )
    })
    .await?;
    report_size(&hub, "works created");
    fill(&clients, args.inflight, total, args.slice, "status", |http, i| {
        let (ns, w) = work_of(i);
        let url = format!("{base}{WORKS}/namespaces/{ns}/manifestworks/{w}/status");
        let patch = http.patch(url).header("content-type", "application/merge-patch+json");
        (patch.body(status(&ns, &w).to_string()), 200)
    })
    .await?;
    report_size(&hub, "with status");

    println!();
    namespace_lists(&clients[0], &base, &args).await?;
    resyncs(&hub, &args).await?;
    paged_list(&clients[0], &base, total).await?;
    creates_at_rest(&clients, &base, &args).await?;

    hub.stop()?;
    let t = Instant::now();
    hub.resume_within(Duration::from_secs(600)).await?;
    println!("\ncold start to /readyz: {:.1} s", t.elapsed().as_secs_f64());
    report_size(&hub, "after the cold start");
    let http = hub.http()?;
    namespace_lists(&http, &base, &args).await?;
    report_size(&hub, "after the lists that followed");
    Ok(())
}

/// Sends the request `op(client, i)` makes, expecting the code it names, for `i` in `0..n`,
/// `inflight` at once spread over `clients`; prints a row per `slice` completed: the rate over
/// that slice and its latencies.
async fn fill<F>(
    clients: &[reqwest::Client],
    inflight: usize,
    n: usize,
    slice: usize,
    what: &str,
    op: F,
) -> anyhow::Result<()>
where
    F: Fn(&reqwest::Client, usize) -> (reqwest::RequestBuilder, u16),
{
    let timed = |i: usize| {
        let (request, code) = op(&clients[i % clients.len()], i);
        async move {
            let t = Instant::now();
            send(request, code).await.with_context(|| format!("{what} {i}"))?;
            Ok::<_, anyhow::Error>(t.elapsed())
        }
    };
    let mut done = futures::stream::iter(0..n).map(timed).buffer_unordered(inflight);
    let (mut h, mut count, mut since) = (hist(), 0usize, Instant::now());
    while let Some(took) = done.next().await {
        h.record(took?.as_micros() as u64)?;
        count += 1;
        if count % slice == 0 || count == n {
            let rate = h.len() as f64 / since.elapsed().as_secs_f64();
            println!("| {what} | {count} | {rate:.0} | {:.1} | {:.1} |", ms(&h, 0.5), ms(&h, 0.99));
            (h, since) = (hist(), Instant::now());
        }
    }
    Ok(())
}

/// Sends a request and reads its whole answer; fails unless it is `code`.
async fn send(request: reqwest::RequestBuilder, code: u16) -> anyhow::Result<()> {
    let r = request.send().await?;
    let status = r.status();
    let body = r.bytes().await?;
    anyhow::ensure!(status == code, "{status}: {}", String::from_utf8_lossy(&body));
    Ok(())
}

/// A work as a placement's user writes one: a Deployment with its resources, and feedback asked
/// for it (about 1 KiB of JSON).
fn work(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {"name": name, "namespace": ns,
            "labels": {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "scale-bench"}},
        "spec": {
            "workload": {"manifests": [{"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "namespace": "apps", "labels": {"app": name}},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                    "template": {"metadata": {"labels": {"app": name}},
                        "spec": {"containers": [{"name": "server",
                            "image": "registry.example.com/team/server:1.24.3",
                            "ports": [{"containerPort": 8080, "name": "http"}],
                            "env": [{"name": "LOG_LEVEL", "value": "info"},
                                    {"name": "CLUSTER", "value": ns}],
                            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                                          "limits": {"cpu": "500m", "memory": "256Mi"}},
                            "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"}}}]}}}}]},
            "deleteOption": {"propagationPolicy": "Foreground"},
            "manifestConfigs": [{"resourceIdentifier": {"group": "apps", "resource": "deployments",
                "name": name, "namespace": "apps"},
                "feedbackRules": [{"type": "WellKnownStatus"}]}]}})
}

/// The status an agent reports for [`work`] once applied: the work's and the manifest's
/// conditions, and the feedback asked for.
fn status(ns: &str, name: &str) -> Value {
    let at = ocm_apiserver::machinery::object::now_rfc3339();
    let condition = |t: &str, reason: &str, message: &str| {
        json!({"type": t, "status": "True", "reason": reason, "message": message,
            "observedGeneration": 1, "lastTransitionTime": at})
    };
    json!({"status": {
        "conditions": [condition("Applied", "AppliedManifestWorkComplete", "Apply manifest work complete"),
                       condition("Available", "ResourcesAvailable", "All resources are available")],
        "resourceStatus": {"manifests": [{
            "resourceMeta": {"ordinal": 0, "group": "apps", "version": "v1", "kind": "Deployment",
                "resource": "deployments", "name": name, "namespace": "apps"},
            "statusFeedback": {"values": [
                {"name": "ReadyReplicas", "fieldValue": {"type": "Integer", "integer": 2}},
                {"name": "Replicas", "fieldValue": {"type": "Integer", "integer": 2}},
                {"name": "AvailableReplicas", "fieldValue": {"type": "Integer", "integer": 2}}]},
            "conditions": [condition("Applied", "AppliedManifestComplete", "Apply manifest complete"),
                           condition("Available", "ResourceAvailable", &format!("Resource is available in {ns}"))]}]}}})
}

/// The hub's RSS and the size of its data dir.
fn report_size(hub: &Replica, when: &str) {
    let rss = hub.pid().and_then(|pid| proc_status_kib(pid, "VmRSS").ok());
    let rss = rss.map_or("?".into(), |k| format!("{:.0}", k as f64 / 1024.0));
    let disk = dir_bytes(hub.path()) as f64 / (1 << 20) as f64;
    println!("{when}: hub RSS {rss} MiB, data dir {disk:.0} MiB");
}

fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// One random namespace's works listed, `samples` times, one after another.
async fn namespace_lists(http: &reqwest::Client, base: &str, args: &Args) -> anyhow::Result<()> {
    let mut h = hist();
    for _ in 0..args.samples {
        let ns = name(rand::rng().random_range(0..args.clusters));
        let t = Instant::now();
        let r = http.get(format!("{base}{WORKS}/namespaces/{ns}/manifestworks")).send().await?;
        let list: Value = r.json().await?;
        h.record(t.elapsed().as_micros() as u64)?;
        let items = list["items"].as_array().map_or(0, Vec::len);
        // Creates at rest add works to some namespaces.
        anyhow::ensure!(items >= args.works, "{ns} listed {items} works");
    }
    print_latency(&format!("LIST of one namespace ({} works)", args.works), &h);
    Ok(())
}

fn print_latency(what: &str, h: &Histogram<u64>) {
    println!(
        "{what}: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} samples)",
        ms(h, 0.5),
        ms(h, 0.99),
        ms(h, 1.0),
        h.len()
    );
}

/// Agents of random clusters reconnecting: each connects over mTLS with its own certificate,
/// subscribes and asks for a resync holding nothing; timed from the subscription to the last
/// of its works received.
async fn resyncs(hub: &Replica, args: &Args) -> anyhow::Result<()> {
    let pki = ocm_apiserver::auth::pki::Pki::open(hub.path())?;
    let endpoint = ocm_agent::grpc::Endpoint {
        url: hub.grpc_url(),
        ca_pem: std::fs::read_to_string(hub.path().join("pki/ca.crt"))?,
    };
    let bundles = data_type::MANIFEST_BUNDLES;
    let mut h = hist();
    for _ in 0..args.samples.min(200) {
        let cluster = name(rand::rng().random_range(0..args.clusters));
        let user = format!("system:open-cluster-management:{cluster}:agent1");
        let group = format!("system:open-cluster-management:{cluster}");
        let (crt, key) = pki.issue_client(&user, Some(&group), 1)?;
        let client = endpoint.connect(&crt, &key).await?;
        let t = Instant::now();
        let mut stream = ocm_agent::grpc::subscribe(&client, &cluster, bundles).await?;
        let mut ask = event(&format!("{bundles}.spec.resync_request"), &cluster)?;
        ask.set_json(json!({"resourceVersions": []}).to_string());
        ocm_agent::grpc::publish(&client, ask).await?;
        let mut works = 0;
        while works < args.works {
            let e = next(&mut stream).await?;
            if e.r#type.ends_with(".spec.resync_response")
                && e.get(ext::DELETION_TIMESTAMP).is_none()
            {
                works += 1;
            }
        }
        h.record(t.elapsed().as_micros() as u64)?;
    }
    print_latency(&format!("agent resync of {} works over gRPC", args.works), &h);
    Ok(())
}

/// Every work listed across namespaces in pages of 500, as a client-go reflector lists.
async fn paged_list(http: &reqwest::Client, base: &str, total: usize) -> anyhow::Result<()> {
    let (t, mut pages, mut items, mut token) = (Instant::now(), hist(), 0usize, String::new());
    loop {
        let mut url = format!("{base}{WORKS}/manifestworks?limit=500");
        if !token.is_empty() {
            url.push_str(&format!("&continue={token}"));
        }
        let page_started = Instant::now();
        let page: Value = http.get(url).send().await?.json().await?;
        pages.record(page_started.elapsed().as_micros() as u64)?;
        items += page["items"].as_array().map_or(0, Vec::len);
        token = page.pointer("/metadata/continue").and_then(Value::as_str).unwrap_or("").into();
        if token.is_empty() {
            break;
        }
    }
    anyhow::ensure!(items >= total, "the paged list held {items} of {total} works");
    println!(
        "paged LIST of all {items} works: {:.1} s, {} pages, page p50 {:.1} ms, p99 {:.1} ms",
        t.elapsed().as_secs_f64(),
        pages.len(),
        ms(&pages, 0.5),
        ms(&pages, 0.99)
    );
    Ok(())
}

/// `--at-rest` new works created while the store holds all the others, one row of the fill's
/// table.
async fn creates_at_rest(
    clients: &[reqwest::Client],
    base: &str,
    args: &Args,
) -> anyhow::Result<()> {
    println!("\n| phase | objects | rate /s | p50 ms | p99 ms |\n|---|---:|---:|---:|---:|");
    let n = args.at_rest;
    fill(clients, args.inflight, n, n, "create at rest", |http, i| {
        let (ns, w) = (name(i % args.clusters), format!("extra-{i}"));
        (
            http.post(format!("{base}{WORKS}/namespaces/{ns}/manifestworks")).json(&work(&ns, &w)),
            201,
        )
    })
    .await
}
