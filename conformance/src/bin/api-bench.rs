//! The API benchmark: the hub's REST API over real HTTPS (mTLS, HTTP/2) against the raw storage
//! backend underneath it, for the same operations: creates of a 1 KiB ConfigMap with 16 and 256
//! clients, GETs, a LIST of 10,000 objects and watch delivery to 1,000 watchers. Prints a
//! Markdown report for `BENCHMARKS.md` with the ratio API ÷ storage for each.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use bytes::Bytes;
use clap::Parser;
use futures::StreamExt;
use hdrhistogram::Histogram;
use ocm_conformance::hub::{Backend, TestHub};
use ocm_conformance::load::{self, configmap, hist, ms};
use ocm_storage::{Engine, ListOptions, SledOptions, Storage};
use rand::Rng as _;
use serde_json::{Value, json};

#[derive(Parser, Debug)]
#[command(about = "Benchmarks the hub's REST API against its raw storage backend")]
struct Args {
    /// Seconds per create and get measurement.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Client concurrencies for creates.
    #[arg(long, default_value = "16,256", value_delimiter = ',')]
    clients: Vec<usize>,
    /// Watchers in the watch delivery measurement.
    #[arg(long, default_value_t = 1000)]
    watchers: usize,
    /// Objects in the list measurement.
    #[arg(long, default_value_t = 10_000)]
    list_size: usize,
    /// Phases: creates, gets, list, watch.
    #[arg(long, default_value = "creates,gets,list,watch", value_delimiter = ',')]
    phases: Vec<String>,
}

fn now_nanos() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

/// A measured operation: API and storage side by side.
struct Line {
    what: String,
    api: String,
    storage: String,
    ratio: String,
}

async fn ensure_namespace(http: &reqwest::Client, url: &str, ns: &str) -> anyhow::Result<()> {
    let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
    let resp = http.post(format!("{url}/api/v1/namespaces")).json(&body).send().await?;
    anyhow::ensure!(
        resp.status().is_success() || resp.status() == 409,
        "namespace {ns}: {}",
        resp.status()
    );
    Ok(())
}

/// Creates through the API with `clients` clients (one HTTPS connection each) for `secs`.
async fn api_creates(
    hub: &TestHub,
    ns: &str,
    clients: usize,
    secs: u64,
) -> anyhow::Result<(f64, Histogram<u64>)> {
    let url = format!("{}/api/v1/namespaces/{ns}/configmaps", hub.url);
    let clients =
        (0..clients).map(|_| Ok((url.clone(), hub.http()?))).collect::<anyhow::Result<_>>()?;
    load::creates(clients, "c", secs).await
}

async fn raw_creates(
    store: &Storage,
    prefix: &str,
    clients: usize,
    secs: u64,
) -> anyhow::Result<(f64, Histogram<u64>)> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let store = store.clone();
        let prefix = prefix.to_owned();
        tasks.push(tokio::spawn(async move {
            let mut h = hist();
            let mut i = 0u64;
            while Instant::now() < deadline {
                // The same bytes the API stores: the object's JSON.
                let value =
                    Bytes::from(serde_json::to_vec(&configmap(&format!("c{c}-{i}"), None))?);
                let t = Instant::now();
                store.create(&format!("{prefix}c{c}-{i}"), value).await?;
                h.record(t.elapsed().as_micros() as u64)?;
                i += 1;
            }
            Ok::<_, anyhow::Error>(h)
        }));
    }
    let mut all = hist();
    for t in tasks {
        all.add(t.await??)?;
    }
    Ok((all.len() as f64 / start.elapsed().as_secs_f64(), all))
}

async fn fill_api(hub: &TestHub, ns: &str, n: usize) -> anyhow::Result<()> {
    let url = format!("{}/api/v1/namespaces/{ns}/configmaps", hub.url);
    let per = n.div_ceil(16);
    let mut tasks = Vec::new();
    for c in 0..16 {
        let http = hub.http()?;
        let url = url.clone();
        tasks.push(tokio::spawn(async move {
            for i in (c * per)..((c + 1) * per).min(n) {
                let resp =
                    http.post(&url).json(&configmap(&format!("o{i:06}"), None)).send().await?;
                anyhow::ensure!(resp.status() == 201, "fill answered {}", resp.status());
            }
            Ok::<_, anyhow::Error>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

async fn fill_raw(store: &Storage, prefix: &str, n: usize) -> anyhow::Result<()> {
    let per = n.div_ceil(16);
    let mut tasks = Vec::new();
    for c in 0..16 {
        let store = store.clone();
        let prefix = prefix.to_owned();
        tasks.push(tokio::spawn(async move {
            for i in (c * per)..((c + 1) * per).min(n) {
                let value = Bytes::from(serde_json::to_vec(&configmap(&format!("o{i:06}"), None))?);
                store.create(&format!("{prefix}o{i:06}"), value).await?;
            }
            Ok::<_, anyhow::Error>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

async fn api_gets(hub: &TestHub, ns: &str, n: usize, secs: u64) -> anyhow::Result<Histogram<u64>> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let http = hub.http()?;
        let base = format!("{}/api/v1/namespaces/{ns}/configmaps/", hub.url);
        tasks.push(tokio::spawn(async move {
            let mut h = hist();
            while Instant::now() < deadline {
                let i = rand::rng().random_range(0..n);
                let t = Instant::now();
                let resp = http.get(format!("{base}o{i:06}")).send().await?;
                anyhow::ensure!(resp.status() == 200, "get answered {}", resp.status());
                let _ = resp.bytes().await?;
                h.record(t.elapsed().as_micros() as u64)?;
            }
            Ok::<_, anyhow::Error>(h)
        }));
    }
    let mut all = hist();
    for t in tasks {
        all.add(t.await??)?;
    }
    Ok(all)
}

async fn raw_gets(
    store: &Storage,
    prefix: &str,
    n: usize,
    secs: u64,
) -> anyhow::Result<Histogram<u64>> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let store = store.clone();
        let prefix = prefix.to_owned();
        tasks.push(tokio::spawn(async move {
            let mut h = hist();
            while Instant::now() < deadline {
                let i = rand::rng().random_range(0..n);
                let t = Instant::now();
                store.get(&format!("{prefix}o{i:06}")).await?;
                h.record(t.elapsed().as_micros() as u64)?;
            }
            Ok::<_, anyhow::Error>(h)
        }));
    }
    let mut all = hist();
    for t in tasks {
        all.add(t.await??)?;
    }
    Ok(all)
}

const LIST_RUNS: usize = 20;

async fn api_lists(hub: &TestHub, ns: &str, n: usize) -> anyhow::Result<Histogram<u64>> {
    let http = hub.http()?;
    let url = format!("{}/api/v1/namespaces/{ns}/configmaps", hub.url);
    let mut h = hist();
    for _ in 0..LIST_RUNS {
        let t = Instant::now();
        let body = http.get(&url).send().await?.bytes().await?;
        h.record(t.elapsed().as_micros() as u64)?;
        let v: Value = serde_json::from_slice(&body)?;
        let got = v["items"].as_array().map(Vec::len).unwrap_or(0);
        anyhow::ensure!(got == n, "list returned {got} items, expected {n}");
    }
    Ok(h)
}

async fn raw_lists(store: &Storage, prefix: &str, n: usize) -> anyhow::Result<Histogram<u64>> {
    let mut h = hist();
    for _ in 0..LIST_RUNS {
        let t = Instant::now();
        let page = store.list(prefix, &ListOptions::default()).await?;
        h.record(t.elapsed().as_micros() as u64)?;
        anyhow::ensure!(page.items.len() == n, "raw list returned {}", page.items.len());
    }
    Ok(h)
}

const WATCH_WRITES: usize = 200;
const WATCH_RATE: u64 = 50;

/// Watch delivery through the API: `watchers` watch streams over 20 HTTP/2 connections.
async fn api_watch(hub: &TestHub, ns: &str, watchers: usize) -> anyhow::Result<Histogram<u64>> {
    let http0 = hub.http()?;
    ensure_namespace(&http0, &hub.url, ns).await?;
    let list: Value = http0
        .get(format!("{}/api/v1/namespaces/{ns}/configmaps", hub.url))
        .send()
        .await?
        .json()
        .await?;
    let rv = list["metadata"]["resourceVersion"].as_str().context("list rv")?.to_owned();
    let conns: Vec<reqwest::Client> = (0..20).map(|_| hub.http()).collect::<Result<_, _>>()?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    for w in 0..watchers {
        let http = conns[w % conns.len()].clone();
        let url = format!(
            "{}/api/v1/namespaces/{ns}/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=120",
            hub.url
        );
        let tx = tx.clone();
        let ready = ready_tx.clone();
        tokio::spawn(async move {
            let resp = http.get(&url).send().await?;
            let _ = ready.send(());
            let mut stream = resp.bytes_stream();
            let mut buf = Vec::new();
            let mut seen = 0;
            while let Some(chunk) = stream.next().await {
                buf.extend_from_slice(&chunk?);
                while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=pos).collect();
                    let now = now_nanos();
                    let ev: Value = serde_json::from_slice(&line)?;
                    if let Some(sent) =
                        ev["object"]["metadata"]["annotations"]["bench/sent"].as_str()
                    {
                        let sent: u128 = sent.parse()?;
                        let _ = tx.send((now.saturating_sub(sent) / 1000) as u64);
                        seen += 1;
                        if seen == WATCH_WRITES {
                            return Ok::<_, anyhow::Error>(());
                        }
                    }
                }
            }
            Ok(())
        });
    }
    drop(tx);
    for _ in 0..watchers {
        ready_rx.recv().await.context("a watcher failed to start")?;
    }
    let writer = http0.clone();
    let url = format!("{}/api/v1/namespaces/{ns}/configmaps", hub.url);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(1000 / WATCH_RATE));
        for i in 0..WATCH_WRITES {
            tick.tick().await;
            let _ = writer
                .post(&url)
                .json(&configmap(&format!("w{i}"), Some(now_nanos())))
                .send()
                .await;
        }
    });
    collect(&mut rx, watchers * WATCH_WRITES).await
}

async fn raw_watch(
    store: &Storage,
    prefix: &str,
    watchers: usize,
) -> anyhow::Result<Histogram<u64>> {
    let from = store.current_revision().await?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
    for _ in 0..watchers {
        let mut stream = store.watch(prefix, from).await?;
        let tx = tx.clone();
        tokio::spawn(async move {
            let mut seen = 0;
            while let Some(ev) = stream.next().await {
                let now = now_nanos();
                let ev = ev?;
                let v: Value = serde_json::from_slice(&ev.value)?;
                if let Some(sent) = v["metadata"]["annotations"]["bench/sent"].as_str() {
                    let _ = tx.send((now.saturating_sub(sent.parse::<u128>()?) / 1000) as u64);
                    seen += 1;
                    if seen == WATCH_WRITES {
                        break;
                    }
                }
            }
            Ok::<_, anyhow::Error>(())
        });
    }
    drop(tx);
    let store = store.clone();
    let prefix = prefix.to_owned();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(1000 / WATCH_RATE));
        for i in 0..WATCH_WRITES {
            tick.tick().await;
            let value = serde_json::to_vec(&configmap(&format!("w{i}"), Some(now_nanos())))
                .unwrap_or_default();
            let _ = store.create(&format!("{prefix}w{i}"), value).await;
        }
    });
    collect(&mut rx, watchers * WATCH_WRITES).await
}

async fn collect(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<u64>,
    expected: usize,
) -> anyhow::Result<Histogram<u64>> {
    let mut h = hist();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while (h.len() as usize) < expected {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(us)) => h.record(us.max(1))?,
            Ok(None) => break,
            Err(_) => break,
        }
    }
    anyhow::ensure!(h.len() as usize == expected, "watchers got {} of {expected} events", h.len());
    Ok(h)
}

fn ratio(api: f64, storage: f64) -> String {
    if storage == 0.0 { "-".into() } else { format!("{:.2}×", api / storage) }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // In-flight limits above the largest client count (as large kube-apiserver deployments
    // raise them): the defaults (400 reads, 200 writes) would answer 429 to 256 writers.
    let seats = args.clients.iter().copied().max().unwrap_or(0) * 2;
    let hub = TestHub::start_with(Backend::Sled, |c| {
        c.max_requests_inflight = c.max_requests_inflight.max(seats);
        c.max_mutating_requests_inflight = c.max_mutating_requests_inflight.max(seats);
    })
    .await?;
    let raw_dir = tempfile::tempdir()?;
    let raw = Storage::open(Engine::Sled(SledOptions::new(raw_dir.path()))).await?;
    let http = hub.http()?;
    let phase = |p: &str| args.phases.iter().any(|x| x == p);
    let mut lines = Vec::new();
    if phase("creates") {
        for &c in &args.clients {
            let ns = format!("create-{c}");
            ensure_namespace(&http, &hub.url, &ns).await?;
            let (api_rate, api_h) = api_creates(&hub, &ns, c, args.seconds).await?;
            let (raw_rate, raw_h) =
                raw_creates(&raw, &format!("/bench/create-{c}/"), c, args.seconds).await?;
            lines.push(Line {
                what: format!("create 1 KiB ConfigMap, {c} clients: objects/s"),
                api: format!("{api_rate:.0}"),
                storage: format!("{raw_rate:.0}"),
                ratio: ratio(api_rate, raw_rate),
            });
            lines.push(Line {
                what: format!("create, {c} clients: p50 / p99 ms"),
                api: format!("{:.2} / {:.2}", ms(&api_h, 0.5), ms(&api_h, 0.99)),
                storage: format!("{:.2} / {:.2}", ms(&raw_h, 0.5), ms(&raw_h, 0.99)),
                ratio: ratio(ms(&api_h, 0.99), ms(&raw_h, 0.99)),
            });
        }
    }
    if phase("gets") || phase("list") {
        ensure_namespace(&http, &hub.url, "list").await?;
        fill_api(&hub, "list", args.list_size).await?;
        fill_raw(&raw, "/bench/list/", args.list_size).await?;
    }
    if phase("gets") {
        let api_h = api_gets(&hub, "list", args.list_size, args.seconds).await?;
        let raw_h = raw_gets(&raw, "/bench/list/", args.list_size, args.seconds).await?;
        lines.push(Line {
            what: "GET one object, 16 clients: p50 / p99 ms".into(),
            api: format!("{:.2} / {:.2}", ms(&api_h, 0.5), ms(&api_h, 0.99)),
            storage: format!("{:.3} / {:.3}", ms(&raw_h, 0.5), ms(&raw_h, 0.99)),
            ratio: ratio(ms(&api_h, 0.99), ms(&raw_h, 0.99)),
        });
    }
    if phase("list") {
        let api_h = api_lists(&hub, "list", args.list_size).await?;
        let raw_h = raw_lists(&raw, "/bench/list/", args.list_size).await?;
        lines.push(Line {
            what: format!("LIST {} objects: p50 / p99 ms ({LIST_RUNS} runs)", args.list_size),
            api: format!("{:.1} / {:.1}", ms(&api_h, 0.5), ms(&api_h, 0.99)),
            storage: format!("{:.1} / {:.1}", ms(&raw_h, 0.5), ms(&raw_h, 0.99)),
            ratio: ratio(ms(&api_h, 0.99), ms(&raw_h, 0.99)),
        });
    }
    if phase("watch") {
        let api_h = api_watch(&hub, "watch", args.watchers).await?;
        let raw_h = raw_watch(&raw, "/bench/watch/", args.watchers).await?;
        lines.push(Line {
            what: format!("watch delivery, {} watchers: p50 / p99 ms", args.watchers),
            api: format!("{:.2} / {:.2}", ms(&api_h, 0.5), ms(&api_h, 0.99)),
            storage: format!("{:.2} / {:.2}", ms(&raw_h, 0.5), ms(&raw_h, 0.99)),
            ratio: ratio(ms(&api_h, 0.99), ms(&raw_h, 0.99)),
        });
    }
    println!("| operation | API (HTTPS) | raw sled storage | API ÷ storage |");
    println!("|---|---|---|---|");
    for l in &lines {
        println!("| {} | {} | {} | {} |", l.what, l.api, l.storage, l.ratio);
    }
    hub.stop().await;
    Ok(())
}
