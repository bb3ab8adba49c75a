//! The cluster proxy benchmark (`BENCHMARKS.md`): a hub and a `--profile cluster` stand-in as
//! `ocm-hub serve` processes, and `--tunnels` clusters whose tunnels the agent library's own
//! proxy (`ocm_agent::proxy`, what every klusterlet runs) keeps open in this process, all
//! carrying requests to the one stand-in. It times a GET of one object through the proxy
//! against the same GET straight to the stand-in, and a LIST of `--list` ConfigMaps both ways;
//! it reads the hub's RSS per idle tunnel and per open proxied watch (`--watches` of them, spread
//! over the tunnels), and how long a change made on the stand-in takes to reach every watcher.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;
use clap::Parser;
use futures::StreamExt as _;
use ocm_conformance::hub::{eventually, proc_status_kib};
use ocm_conformance::load::{configmap, hist, ms};
use ocm_conformance::replicas::Replica;
use serde_json::{Value, json};

#[derive(Parser)]
struct Args {
    /// GETs timed each way.
    #[arg(long, default_value_t = 2000)]
    gets: usize,
    /// ConfigMaps in the listed namespace.
    #[arg(long, default_value_t = 10_000)]
    list: usize,
    /// Clusters with a tunnel open.
    #[arg(long, default_value_t = 100)]
    tunnels: usize,
    /// Proxied watches open at once, spread over the tunnels.
    #[arg(long, default_value_t = 1000)]
    watches: usize,
}

/// How a timed LIST asks for its answer.
#[derive(Clone, Copy, Debug)]
enum Encoding {
    /// As it is (what this benchmark's client asks for by default).
    Identity,
    /// gzip (what kubectl and client-go always ask for).
    Gzip,
}

const GROUP: &str = "cluster.open-cluster-management.io";

fn proxy(cluster: &str, path: &str) -> String {
    format!("/apis/{GROUP}/v1/managedclusters/{cluster}/proxy{path}")
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // The agents' side holds a connection per tunnel and one to the stand-in per proxied
    // watch, besides the benchmark's own.
    ocm_apiserver::serve::server::raise_open_file_limit();
    let hub = Replica::start_sled(&[]).await?;
    let cluster = Replica::start_sled(&["--profile", "cluster"]).await?;
    let (hub_http, direct) = (hub.http()?, cluster.http()?);
    let hub_pid = hub.pid().context("the hub runs")?;
    println!(
        "proxy-bench: {} tunnels, {} watches, {} GETs, LIST of {}",
        args.tunnels, args.watches, args.gets, args.list
    );

    // The stand-in lets the hub's admins do anything, as a cluster admin would bind them.
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "ocm-hub-admins"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "ocm-hub:system:masters"}]});
    post(
        &direct,
        &cluster.url(),
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        &binding,
    )
    .await?;
    for ns in ["bench", "list", "watch"] {
        post(&direct, &cluster.url(), "/api/v1/namespaces", &json!({"metadata": {"name": ns}}))
            .await?;
    }

    let names: Vec<String> = (0..args.tunnels).map(|i| format!("pc-{i}")).collect();
    for name in &names {
        let mc = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "ManagedCluster",
            "metadata": {"name": name}, "spec": {"hubAcceptsClient": true}});
        post(&hub_http, &hub.url(), &format!("/apis/{GROUP}/v1/managedclusters"), &mc).await?;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before_tunnels = proc_status_kib(hub_pid, "VmRSS")?;
    let dirs = open_tunnels(&hub, &cluster, &names).await?;
    for name in &names {
        eventually(&format!("{name}'s tunnel"), Duration::from_secs(60), || async {
            let r =
                hub_http.get(format!("{}{}", hub.url(), proxy(name, "/version"))).send().await?;
            Ok(r.status().is_success().then_some(()))
        })
        .await?;
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let with_tunnels = proc_status_kib(hub_pid, "VmRSS")?;
    println!(
        "idle tunnels: hub RSS {before_tunnels} KiB -> {with_tunnels} KiB, {:.1} KiB per tunnel",
        (with_tunnels as f64 - before_tunnels as f64) / args.tunnels as f64
    );

    let sides = Sides { hub: &hub, cluster: &cluster, hub_http: &hub_http, direct: &direct };
    // Watches first: the LIST's large answers leave the hub's heap larger (or, freed, smaller)
    // for a while, which would drown the watches' own RSS.
    watches(&args, &hub, &cluster, &names, &direct).await?;
    gets(&args, &sides).await?;
    lists(&args, &sides).await?;
    drop(dirs);
    Ok(())
}

async fn post(http: &reqwest::Client, base: &str, path: &str, body: &Value) -> anyhow::Result<()> {
    let r = http.post(format!("{base}{path}")).json(body).send().await?;
    let code = r.status();
    anyhow::ensure!(
        code.is_success() || code.as_u16() == 409,
        "POST {path}: {code} {}",
        r.text().await?
    );
    Ok(())
}

/// A tunnel per cluster of `names`, each with an agent certificate the hub's CA issues, kept
/// open by the agent library to the stand-in; the data dirs holding their credentials.
async fn open_tunnels(
    hub: &Replica,
    cluster: &Replica,
    names: &[String],
) -> anyhow::Result<Vec<tempfile::TempDir>> {
    let pki = ocm_apiserver::auth::pki::Pki::open(hub.path())?;
    let ca_pem = std::fs::read_to_string(hub.path().join("pki/ca.crt"))?;
    let kubeconfig = kube::config::Kubeconfig::read_from(cluster.path().join("admin.kubeconfig"))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    let api = ocm_agent::proxy::ClusterApi::new(&config)?;
    let mut dirs = Vec::new();
    for name in names {
        let dir = tempfile::tempdir()?;
        let group = format!("system:open-cluster-management:{name}");
        let (crt, key) = pki.issue_client(&format!("{group}:agent"), Some(&group), 1)?;
        let data_dir = ocm_agent::state::DataDir::new(dir.path());
        data_dir.save_credentials(&crt, &key)?;
        let tunnel = ocm_agent::proxy::Tunnel {
            ca_pem: ca_pem.clone(),
            data_dir,
            api: api.clone(),
            prefix: Arc::from(ocm_agent::proxy::DEFAULT_PREFIX),
        };
        tokio::spawn(ocm_agent::proxy::keep_open(hub.url(), tunnel));
        dirs.push(dir);
    }
    Ok(dirs)
}

/// The two ways to the stand-in: through the hub's proxy, and straight.
#[derive(Clone, Copy)]
struct Sides<'a> {
    hub: &'a Replica,
    cluster: &'a Replica,
    hub_http: &'a reqwest::Client,
    direct: &'a reqwest::Client,
}

/// GETs of one ConfigMap straight to the stand-in and through the proxy, alternating.
async fn gets(args: &Args, sides: &Sides<'_>) -> anyhow::Result<()> {
    let Sides { hub, cluster, hub_http, direct } = *sides;
    post(direct, &cluster.url(), "/api/v1/namespaces/bench/configmaps", &configmap("one", None))
        .await?;
    let path = "/api/v1/namespaces/bench/configmaps/one";
    let direct_url = format!("{}{path}", cluster.url());
    let proxied_url = format!("{}{}", hub.url(), proxy("pc-0", path));
    let (mut d, mut p) = (hist(), hist());
    for i in 0..args.gets + 100 {
        for (url, http, h) in [(&direct_url, direct, &mut d), (&proxied_url, hub_http, &mut p)] {
            let start = Instant::now();
            let r = http.get(url).send().await?;
            anyhow::ensure!(r.status().is_success(), "GET {url}: {}", r.status());
            r.bytes().await?;
            if i >= 100 {
                h.record(start.elapsed().as_micros() as u64)?;
            }
        }
    }
    println!(
        "GET one ConfigMap ({} each): direct p50 {:.2} ms p99 {:.2} ms; proxied p50 {:.2} ms p99 {:.2} ms; p99 difference {:.2} ms, p50 ratio {:.2}",
        args.gets,
        ms(&d, 0.5),
        ms(&d, 0.99),
        ms(&p, 0.5),
        ms(&p, 0.99),
        ms(&p, 0.99) - ms(&d, 0.99),
        ms(&p, 0.5) / ms(&d, 0.5)
    );
    Ok(())
}

/// A LIST of `--list` ConfigMaps straight and through the proxy, five times each, alternating,
/// as it is and gzipped.
async fn lists(args: &Args, sides: &Sides<'_>) -> anyhow::Result<()> {
    let Sides { cluster, direct, .. } = *sides;
    let url = format!("{}/api/v1/namespaces/list/configmaps", cluster.url());
    futures::stream::iter(0..args.list)
        .map(|i| {
            let (url, direct) = (url.clone(), direct.clone());
            async move {
                let r = direct
                    .post(&url)
                    .json(&configmap(&format!("cm-{i}"), None))
                    .send()
                    .await
                    .map_err(|e| anyhow::anyhow!("create cm-{i}: {e:?}"))?;
                anyhow::ensure!(r.status().is_success(), "create: {}", r.status());
                r.bytes().await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<anyhow::Result<Vec<()>>>()?;
    for encoding in [Encoding::Identity, Encoding::Gzip] {
        let (d, p) = timed_lists(args, sides, encoding).await?;
        println!(
            "LIST of {} ConfigMaps, {encoding:?} (median of 5): direct {d:.1} ms, proxied {p:.1} ms, ratio {:.2}",
            args.list,
            p / d
        );
    }
    Ok(())
}

/// Five LISTs each way, alternating, each read whole and its items counted: the medians in ms.
async fn timed_lists(
    args: &Args,
    sides: &Sides<'_>,
    encoding: Encoding,
) -> anyhow::Result<(f64, f64)> {
    let Sides { hub, cluster, hub_http, direct } = *sides;
    let path = "/api/v1/namespaces/list/configmaps";
    let (mut d, mut p) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        for (url, http, times) in [
            (format!("{}{path}", cluster.url()), direct, &mut d),
            (format!("{}{}", hub.url(), proxy("pc-0", path)), hub_http, &mut p),
        ] {
            let mut request = http.get(&url);
            if let Encoding::Gzip = encoding {
                request = request.header("accept-encoding", "gzip");
            }
            let start = Instant::now();
            let resp = request.send().await?;
            let zipped = resp.headers().get("content-encoding").is_some_and(|v| v == "gzip");
            let body = resp.bytes().await?;
            times.push(start.elapsed().as_secs_f64() * 1000.0);
            let body = if zipped {
                use std::io::Read as _;
                let mut out = Vec::new();
                flate2::read::GzDecoder::new(&body[..]).read_to_end(&mut out)?;
                out
            } else {
                anyhow::ensure!(matches!(encoding, Encoding::Identity), "{url}: not gzipped");
                body.to_vec()
            };
            let list: Value = serde_json::from_slice(&body)?;
            anyhow::ensure!(
                list["items"].as_array().map_or(0, Vec::len) == args.list,
                "a short list"
            );
        }
    }
    Ok((median(&mut d), median(&mut p)))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `--watches` proxied watches over the tunnels: the hub's RSS per watch, then how long a
/// change made on the stand-in takes to reach each of them (five changes).
async fn watches(
    args: &Args,
    hub: &Replica,
    cluster: &Replica,
    names: &[String],
    direct: &reqwest::Client,
) -> anyhow::Result<()> {
    let hub_pid = hub.pid().context("the hub runs")?;
    post(
        direct,
        &cluster.url(),
        "/api/v1/namespaces/watch/configmaps",
        &configmap("watched", None),
    )
    .await?;
    let before = proc_status_kib(hub_pid, "VmRSS")?;
    // A client per 100 watches: one HTTP/2 connection each, under the hub's stream limit.
    let clients: Vec<reqwest::Client> =
        (0..args.watches.div_ceil(100)).map(|_| hub.http()).collect::<anyhow::Result<_>>()?;
    let (seen_tx, mut seen_rx) = tokio::sync::mpsc::unbounded_channel::<(usize, u128)>();
    let mut opened = 0;
    for w in 0..args.watches {
        let name = &names[w % names.len()];
        let url = format!(
            "{}{}",
            hub.url(),
            proxy(
                name,
                "/api/v1/namespaces/watch/configmaps?watch=true&fieldSelector=metadata.name%3Dwatched"
            )
        );
        let resp = clients[w / 100].get(&url).send().await?;
        anyhow::ensure!(resp.status().is_success(), "watch {w}: {}", resp.status());
        let seen = seen_tx.clone();
        tokio::spawn(async move {
            let mut stream = resp.bytes_stream();
            let mut buf = Vec::new();
            while let Some(Ok(chunk)) = stream.next().await {
                buf.extend_from_slice(&chunk);
                while let Some(end) = buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=end).collect();
                    let Ok(event) = serde_json::from_slice::<Value>(&line) else { continue };
                    let sent = event
                        .pointer("/object/metadata/annotations/bench~1sent")
                        .and_then(Value::as_str)
                        .and_then(|s| s.parse::<u128>().ok());
                    if let (Some(sent), Some("MODIFIED")) = (sent, event["type"].as_str()) {
                        let _ = seen.send((w, now_ns().saturating_sub(sent)));
                    }
                }
            }
        });
        opened += 1;
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = proc_status_kib(hub_pid, "VmRSS")?;
    println!(
        "{opened} proxied watches open: hub RSS {before} KiB -> {after} KiB, {:.1} KiB per watch",
        (after as f64 - before as f64) / opened as f64
    );
    let mut latency = hist();
    let url = format!("{}/api/v1/namespaces/watch/configmaps/watched", cluster.url());
    for round in 0..5 {
        let change = configmap("watched", Some(now_ns()));
        let r = direct.put(&url).json(&change).send().await?;
        anyhow::ensure!(r.status().is_success(), "update {round}: {}", r.status());
        for _ in 0..opened {
            let (_, ns) = tokio::time::timeout(Duration::from_secs(60), seen_rx.recv())
                .await?
                .context("watchers ended")?;
            latency.record((ns / 1000) as u64)?;
        }
    }
    println!(
        "event latency over {opened} proxied watches (5 changes): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        ms(&latency, 0.5),
        ms(&latency, 0.99),
        latency.max() as f64 / 1000.0
    );
    Ok(())
}

fn now_ns() -> u128 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}
