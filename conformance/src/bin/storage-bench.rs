//! The storage benchmark: durable writes with 1, 16 and 256 concurrent writers (1 KiB values),
//! reads, a list of 10,000 keys and watch delivery latency with 1,000 watchers, for the memory,
//! sled and etcd backends and for raw etcd (the `etcd-client` crate writing the same payloads
//! straight into the same etcd), in one run. Prints a Markdown report for `BENCHMARKS.md`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use clap::Parser;
use etcd_client::{GetOptions, WatchOptions};
use futures::StreamExt;
use futures::stream::BoxStream;
use hdrhistogram::Histogram;
use ocm_conformance::etcd::EtcdServer;
use ocm_storage::{Engine, EtcdOptions, LocalOptions, SledOptions, Storage};
use rand::Rng;

#[derive(Parser, Debug)]
#[command(about = "Benchmarks the storage backends against raw etcd on this machine")]
struct Args {
    /// Seconds per write and read measurement.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Backends to run, comma-separated: memory, sled, etcd, raw-etcd.
    #[arg(long, default_value = "memory,sled,etcd,raw-etcd", value_delimiter = ',')]
    backends: Vec<String>,
    /// Watchers in the watch latency measurement.
    #[arg(long, default_value_t = 1000)]
    watchers: usize,
    /// Phases to run, comma-separated: writes, reads, list, watch.
    #[arg(long, default_value = "writes,reads,list,watch", value_delimiter = ',')]
    phases: Vec<String>,
    /// Writer concurrencies to measure.
    #[arg(long, default_value = "1,16,256", value_delimiter = ',')]
    writers: Vec<usize>,
}

/// What is measured: one of our backends through `Storage`, or etcd through its own client.
#[derive(Clone)]
enum Target {
    Store(Storage),
    Raw(Box<etcd_client::Client>),
}

impl Target {
    async fn write(&self, key: &str, value: Bytes) -> anyhow::Result<()> {
        match self {
            Target::Store(s) => drop(s.create(key, value).await?),
            Target::Raw(c) => {
                drop(c.clone().put(format!("/raw{key}"), value.to_vec(), None).await?)
            }
        }
        Ok(())
    }

    async fn read(&self, key: &str) -> anyhow::Result<()> {
        match self {
            Target::Store(s) => drop(s.get(key).await?),
            Target::Raw(c) => {
                let r = c.clone().get(format!("/raw{key}"), None).await?;
                anyhow::ensure!(!r.kvs().is_empty(), "missing {key}");
            }
        }
        Ok(())
    }

    async fn list(&self, prefix: &str) -> anyhow::Result<usize> {
        Ok(match self {
            Target::Store(s) => s.list(prefix, &Default::default()).await?.items.len(),
            Target::Raw(c) => {
                // Lift tonic's 4 MiB receive limit, as our etcd backend does.
                let mut kv = c.kv_client().max_decoding_message_size(i32::MAX as usize);
                let options = GetOptions::new().with_prefix();
                kv.get(format!("/raw{prefix}"), Some(options)).await?.kvs().len()
            }
        })
    }

    /// A stream of the values written under `prefix` from now on; a failed watch yields its
    /// error (a lagging watcher must show up in the report, not as a silent gap).
    async fn watch(
        &self,
        prefix: &str,
    ) -> anyhow::Result<BoxStream<'static, anyhow::Result<Bytes>>> {
        Ok(match self {
            Target::Store(s) => {
                let from = s.current_revision().await?;
                s.watch(prefix, from)
                    .await?
                    .map(|e| e.map(|e| e.value.clone()).map_err(anyhow::Error::from))
                    .boxed()
            }
            Target::Raw(c) => {
                let stream = c
                    .clone()
                    .watch(format!("/raw{prefix}"), Some(WatchOptions::new().with_prefix()))
                    .await?;
                let state = (stream, std::collections::VecDeque::<Bytes>::new());
                futures::stream::unfold(state, |(mut stream, mut queued)| async move {
                    loop {
                        if let Some(v) = queued.pop_front() {
                            return Some((Ok(v), (stream, queued)));
                        }
                        let response = match stream.message().await {
                            Ok(Some(response)) => response,
                            Ok(None) => return None,
                            Err(e) => return Some((Err(e.into()), (stream, queued))),
                        };
                        queued.extend(
                            response
                                .events()
                                .iter()
                                .filter_map(|e| e.kv())
                                .map(|kv| Bytes::copy_from_slice(kv.value())),
                        );
                    }
                })
                .boxed()
            }
        })
    }
}

fn value(size: usize) -> Bytes {
    let mut rng = rand::rng();
    Bytes::from((0..size).map(|_| rng.random_range(b'a'..=b'z')).collect::<Vec<u8>>())
}

struct WriteResult {
    per_second: f64,
    p50_ms: f64,
    p99_ms: f64,
}

async fn writes(
    target: &Target,
    writers: usize,
    seconds: u64,
    tag: &str,
) -> anyhow::Result<WriteResult> {
    let payload = value(1024);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let start = Instant::now();
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let (target, payload, tag) = (target.clone(), payload.clone(), tag.to_owned());
            tokio::spawn(async move {
                let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
                let mut n = 0u64;
                while Instant::now() < deadline {
                    let t = Instant::now();
                    target.write(&format!("/bench/{tag}/w{w}/{n}"), payload.clone()).await?;
                    hist.record(t.elapsed().as_micros().max(1) as u64)?;
                    n += 1;
                }
                anyhow::Ok(hist)
            })
        })
        .collect();
    let mut total = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    for t in tasks {
        total.add(t.await??)?;
    }
    let elapsed = start.elapsed().as_secs_f64();
    Ok(WriteResult {
        per_second: total.len() as f64 / elapsed,
        p50_ms: total.value_at_quantile(0.5) as f64 / 1000.0,
        p99_ms: total.value_at_quantile(0.99) as f64 / 1000.0,
    })
}

async fn reads(target: &Target, seconds: u64) -> anyhow::Result<WriteResult> {
    let payload = value(1024);
    for i in 0..1000 {
        target.write(&format!("/bench/read/{i}"), payload.clone()).await?;
    }
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let start = Instant::now();
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let target = target.clone();
            tokio::spawn(async move {
                let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
                while Instant::now() < deadline {
                    let key = format!("/bench/read/{}", rand::rng().random_range(0..1000));
                    let t = Instant::now();
                    target.read(&key).await?;
                    hist.record(t.elapsed().as_micros().max(1) as u64)?;
                }
                anyhow::Ok(hist)
            })
        })
        .collect();
    let mut total = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    for t in tasks {
        total.add(t.await??)?;
    }
    Ok(WriteResult {
        per_second: total.len() as f64 / start.elapsed().as_secs_f64(),
        p50_ms: total.value_at_quantile(0.5) as f64 / 1000.0,
        p99_ms: total.value_at_quantile(0.99) as f64 / 1000.0,
    })
}

/// Median time to list 10,000 keys of 1 KiB, over 5 runs.
async fn list_10k(target: &Target) -> anyhow::Result<f64> {
    let payload = value(1024);
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let fill: Vec<_> = (0..64)
        .map(|_| {
            let (target, payload, next) = (target.clone(), payload.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= 10_000 {
                        return anyhow::Ok(());
                    }
                    target.write(&format!("/bench/list/{i:05}"), payload.clone()).await?;
                }
            })
        })
        .collect();
    for t in fill {
        t.await??;
    }
    let mut times = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let n = target.list("/bench/list/").await?;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        anyhow::ensure!(n == 10_000, "listed {n} keys");
    }
    times.sort_by(f64::total_cmp);
    Ok(times[2])
}

/// Delivery latency (write issued → event received) over `watchers` watchers, 200 events at
/// 50 writes/s; p50 and p99 in milliseconds.
async fn watch_latency(target: &Target, watchers: usize) -> anyhow::Result<(f64, f64)> {
    let origin = Instant::now();
    const EVENTS: usize = 200;
    let mut tasks = Vec::new();
    for _ in 0..watchers {
        let mut stream = target.watch("/bench/watch/").await?;
        tasks.push(tokio::spawn(async move {
            let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
            for _ in 0..EVENTS {
                let value = tokio::time::timeout(Duration::from_secs(60), stream.next())
                    .await
                    .context("watch stalled")?
                    .context("watch ended")??;
                let sent = u64::from_be_bytes(value[..8].try_into()?);
                let now = origin.elapsed().as_micros() as u64;
                hist.record(now.saturating_sub(sent).max(1))?;
            }
            anyhow::Ok(hist)
        }));
    }
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    for i in 0..EVENTS {
        tick.tick().await;
        let mut v = (origin.elapsed().as_micros() as u64).to_be_bytes().to_vec();
        v.resize(256, b'x');
        target.write(&format!("/bench/watch/{i}"), Bytes::from(v)).await?;
    }
    let mut total = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    for t in tasks {
        total.add(t.await??)?;
    }
    Ok((
        total.value_at_quantile(0.5) as f64 / 1000.0,
        total.value_at_quantile(0.99) as f64 / 1000.0,
    ))
}

struct Row {
    name: String,
    writes: Vec<(usize, WriteResult)>,
    reads: Option<WriteResult>,
    list_ms: Option<f64>,
    watch: Option<(f64, f64)>,
}

async fn measure(name: &str, target: Target, args: &Args) -> anyhow::Result<Row> {
    eprintln!("== {name}");
    let phase = |p: &str| args.phases.iter().any(|x| x == p);
    let mut row =
        Row { name: name.to_owned(), writes: Vec::new(), reads: None, list_ms: None, watch: None };
    if phase("writes") {
        for &n in &args.writers {
            let r = writes(&target, n, args.seconds, &format!("c{n}")).await?;
            eprintln!(
                "  {n:>3} writers: {:>8.0} writes/s  p50 {:.2} ms  p99 {:.2} ms",
                r.per_second, r.p50_ms, r.p99_ms
            );
            row.writes.push((n, r));
        }
    }
    if phase("reads") {
        let r = reads(&target, args.seconds).await?;
        eprintln!("  reads: {:.0}/s p99 {:.2} ms", r.per_second, r.p99_ms);
        row.reads = Some(r);
    }
    if phase("list") {
        let ms = list_10k(&target).await?;
        eprintln!("  list 10k: {ms:.1} ms");
        row.list_ms = Some(ms);
    }
    if phase("watch") {
        let w = watch_latency(&target, args.watchers).await?;
        eprintln!("  watch: p50 {:.2} ms p99 {:.2} ms", w.0, w.1);
        row.watch = Some(w);
    }
    Ok(row)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let etcd = if args.backends.iter().any(|b| b == "etcd" || b == "raw-etcd") {
        Some(tokio::task::spawn_blocking(EtcdServer::start).await??)
    } else {
        None
    };
    let mut rows = Vec::new();
    for backend in &args.backends {
        let dir = tempfile::tempdir()?;
        let target = match backend.as_str() {
            "memory" => {
                Target::Store(Storage::open(Engine::Memory(LocalOptions::default())).await?)
            }
            "sled" => {
                Target::Store(Storage::open(Engine::Sled(SledOptions::new(dir.path()))).await?)
            }
            "etcd" => {
                let endpoint = etcd.as_ref().context("etcd")?.endpoint.clone();
                Target::Store(
                    Storage::open(Engine::Etcd(EtcdOptions::new(vec![endpoint], "/ocm"))).await?,
                )
            }
            "raw-etcd" => {
                let endpoint = etcd.as_ref().context("etcd")?.endpoint.clone();
                Target::Raw(Box::new(etcd_client::Client::connect([endpoint], None).await?))
            }
            other => anyhow::bail!("unknown backend {other:?} (memory, sled, etcd, raw-etcd)"),
        };
        rows.push(measure(backend, target, &args).await?);
    }
    print_report(&rows, &args);
    Ok(())
}

fn print_report(rows: &[Row], args: &Args) {
    let mut header = String::from("| backend |");
    let mut rule = String::from("|---|");
    for n in &args.writers {
        header.push_str(&format!(" writes/s ({n} w) | p50 / p99 ms ({n} w) |"));
        rule.push_str("---|---|");
    }
    header.push_str(" reads/s (16 r) | read p99 ms | list 10k keys ms | watch p50 / p99 ms |");
    rule.push_str("---|---|---|---|");
    println!("{header}\n{rule}");
    for row in rows {
        let mut line = format!("| {} |", row.name);
        for (_, w) in &row.writes {
            line.push_str(&format!(" {:.0} | {:.2} / {:.2} |", w.per_second, w.p50_ms, w.p99_ms));
        }
        let or_dash = |v: Option<String>| v.unwrap_or_else(|| "–".into());
        line.push_str(&format!(
            " {} | {} | {} | {} |",
            or_dash(row.reads.as_ref().map(|r| format!("{:.0}", r.per_second))),
            or_dash(row.reads.as_ref().map(|r| format!("{:.2}", r.p99_ms))),
            or_dash(row.list_ms.map(|ms| format!("{ms:.1}"))),
            or_dash(row.watch.map(|(p50, p99)| format!("{p50:.2} / {p99:.2}"))),
        ));
        println!("{line}");
    }
    let at = |name: &str| {
        rows.iter()
            .find(|r| r.name == name)
            .and_then(|r| r.writes.last())
            .map(|(n, w)| (*n, w.per_second))
    };
    if let (Some((n, sled)), Some((_, raw))) = (at("sled"), at("raw-etcd")) {
        println!("\nsled ÷ raw etcd write throughput at {n} writers: **{:.2}×**", sled / raw);
    }
}
