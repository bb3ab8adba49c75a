//! The fleet simulator (BENCHMARKS.md): many klusterlet agents from the agent library in one
//! process, each with its own key, certificate and TLS connection, against a real `ocm-hub
//! serve` process (sled), their clusters a backend that answers and records instead of a
//! Kubernetes API. Two measurements:
//! - `join`: N agents join at once (the hub auto-approves the simulator's bootstrap identity,
//!   `--auto-approve-identities`); the time until the hub shows all N `Available`.
//! - `renew`: N joined agents report their status once (as on start: `Available`), then renew
//!   their Leases every P seconds for D seconds; renewal
//!   latency (p50/p99/max), renewals per second, the hub's CPU and RSS, and RSS per agent.
//! - `works`: N joined agents each hold a gRPC Subscribe stream of their ManifestWorks (the
//!   agent library's client, each agent's own certificate and connection) and answer every work
//!   they receive with an `Applied` status; one-ConfigMap works are created at 100, 500 and
//!   1,000 per second (create → received p50/p99, create → `Applied` on the hub p99), then
//!   5 × N as fast as possible (time until all are `Applied`); the hub's RSS per subscribed
//!   agent.
//! - `fanout`: the same agents, then one work of `--work-kib` (500) KiB of manifests created for
//!   every cluster as fast as possible; the time until every agent received it and until all are
//!   `Applied`, and the hub's peak RSS above its RSS before the creates.
//! - `mwrs`: the agents' clusters labelled, run to `Available` and each given a simulated gRPC
//!   work agent, a Placement over them; ManifestWorkReplicaSet rollouts (`All`, a rollback,
//!   `Progressive`) timed from the set's create or change to the works and the set's status
//!   saying it is done, and the hub's RSS per replicated work (`fleet_sim/mwrs.rs`).
//! - `addons`: the same fleet; a template add-on installed on every cluster by a `Placements`
//!   strategy, timed until every add-on is Available, and the hub's RSS per installed add-on
//!   (`fleet_sim/addons.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;
use ocm_agent::agent::{self, CaSource, JoinRequest, Options};
use ocm_agent::error::AgentError;
use ocm_agent::state::DataDir;
use ocm_conformance::hub;
use serde_json::Value;

#[path = "fleet_sim/addons.rs"]
mod addons;
#[path = "fleet_sim/fleet.rs"]
mod fleet;
#[path = "fleet_sim/memory.rs"]
mod memory;
#[path = "fleet_sim/mwrs.rs"]
mod mwrs;
#[path = "fleet_sim/policies.rs"]
mod policies;
#[path = "fleet_sim/renew.rs"]
mod renew;
#[path = "fleet_sim/replicas.rs"]
mod replicas;
#[path = "fleet_sim/tracker.rs"]
mod tracker;
#[path = "fleet_sim/work_agent.rs"]
mod work_agent;

#[derive(Parser, Debug)]
#[command(about = "Runs many klusterlet agents against one ocm-hub process")]
struct Args {
    /// Agents.
    #[arg(long, default_value_t = 1000)]
    agents: usize,
    /// `join` (time until all are Available), `renew` (join, then lease renewals), `works`
    /// (join, subscribe over gRPC, then ManifestWork delivery), `fanout` (join, subscribe,
    /// then one big work to every cluster), `mwrs` (ManifestWorkReplicaSet rollouts),
    /// `addons` (a template add-on installed across the fleet) or `policies` (100 policies
    /// placed on the fleet, evaluated by the agents' policy agents).
    #[arg(long, default_value = "join")]
    mode: String,
    /// Seconds between one agent's renewals (renew mode).
    #[arg(long, default_value_t = 10)]
    renew_every: u64,
    /// Seconds of renewals measured (renew mode).
    #[arg(long, default_value_t = 60)]
    duration: u64,
    /// Agents joining at once (renew mode joins, and runs its agents to Available, in waves of
    /// this size).
    #[arg(long, default_value_t = 1000, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    wave: usize,
    /// KiB of manifests in the fanout mode's work (the hub's limit is 500).
    #[arg(long, default_value_t = 500)]
    work_kib: usize,
    /// The mwrs mode's scenarios, in order: `all`, `rollback` (on `all`'s set), `progressive`.
    #[arg(long, value_delimiter = ',', default_value = "all,rollback,progressive")]
    scenarios: Vec<String>,
    /// The hub binary (default: the release build next to this one).
    #[arg(long)]
    hub: Option<PathBuf>,
    /// The hub's `--grpc-metrics-per-cluster` (the works mode prints the gRPC series it makes).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    grpc_metrics_per_cluster: bool,
    /// Where the simulated agents keep their data dirs (default: /dev/shm where it exists,
    /// else the temporary dir). Each real agent writes and fsyncs its files on its own cluster's
    /// disk, not on the hub's: on the hub's disk, 1,000 agents' file writes would take CPU
    /// from the hub on the shared cores.
    #[arg(long)]
    agent_dir: Option<PathBuf>,
    /// Renew mode over this many `ocm-hub` replicas on a three-member etcd instead of one hub on
    /// sled (0), the agents joined to them in turn, and the measured window's renewals run by
    /// worker processes of at most `--per-worker` agents each (`fleet_sim/replicas.rs`).
    #[arg(long, default_value_t = 0)]
    replicas: usize,
    /// Agents per renewal worker process with `--replicas` (each holds one connection per
    /// agent, within its open-files limit).
    #[arg(long, default_value_t = 15_000)]
    per_worker: usize,
    /// A renewal worker's agents: `--from` up to `--to` of the fleet (`--mode renew-worker`,
    /// started by the replicas run).
    #[arg(long, default_value_t = 0, hide = true)]
    from: usize,
    #[arg(long, default_value_t = 0, hide = true)]
    to: usize,
    /// A renewal worker's agents' data dirs (`a<i>` each) and the hub's CA file.
    #[arg(long, hide = true)]
    agents_root: Option<PathBuf>,
    #[arg(long, hide = true)]
    ca_file: Option<PathBuf>,
}

/// The simulator's bootstrap token: its id is fixed so the hub can trust it from the start.
const TOKEN_ID: &str = "fleets";

/// A hub process and what the simulator needs of it.
struct Hub {
    child: std::process::Child,
    url: String,
    dir: tempfile::TempDir,
}

impl Drop for Hub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn hub_binary(given: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(p) = given {
        return Ok(p);
    }
    let exe = std::env::current_exe()?;
    let p = exe.with_file_name("ocm-hub");
    anyhow::ensure!(
        p.is_file(),
        "no ocm-hub next to {}: build it (--release) or pass --hub",
        exe.display()
    );
    Ok(p)
}

async fn start_hub(bin: &Path, agents: usize, per_cluster: bool) -> anyhow::Result<Hub> {
    let dir = tempfile::tempdir()?;
    let child = std::process::Command::new(bin)
        .args(["serve", "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0"])
        .args(["--storage", "sled"])
        .arg(format!("--grpc-metrics-per-cluster={per_cluster}"))
        .arg("--data-dir")
        .arg(dir.path())
        .arg(format!("--auto-approve-identities=system:bootstrap:{TOKEN_ID}"))
        // A running agent holds up to three connections (its REST client's, a second while
        // its Lease and status requests overlap, its work stream); over the cap the hub closes
        // new ones, and an agent whose report was refused retries 5 s later.
        .arg(format!("--max-connections={}", agents * 3 + 1024))
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .spawn()?;
    let endpoints = dir.path().join("endpoints.json");
    let start = Instant::now();
    let url = loop {
        if let Ok(text) = std::fs::read_to_string(&endpoints) {
            if let Ok(v) = serde_json::from_str::<Value>(&text) {
                break v["https"].as_str().context("endpoints.json")?.to_owned();
            }
        }
        anyhow::ensure!(start.elapsed() < Duration::from_secs(30), "the hub did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    Ok(Hub { child, url, dir })
}

/// The hub's CPU seconds so far and its RSS in KiB (Linux `/proc`).
fn hub_usage(pid: u32) -> anyhow::Result<(f64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after = stat.rsplit_once(')').context("stat")?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // Fields after the command: state is [0]; utime [11], stime [12] (clock ticks, 100/s).
    let ticks: f64 = fields[11].parse::<f64>()? + fields[12].parse::<f64>()?;
    let rss = hub::proc_status_kib(pid, "VmRSS")?;
    Ok((ticks / 100.0, rss))
}

async fn admin(hub: &Hub) -> anyhow::Result<kube::Client> {
    Ok(ocm_apiserver::cli::admin::client(hub.dir.path()).await?)
}

async fn create_token(client: &kube::Client) -> anyhow::Result<String> {
    let secret = "0123456789abcdef";
    let obj: k8s_openapi::api::core::v1::Secret =
        serde_json::from_value(ocm_apiserver::auth::bootstrap::bootstrap_token_object(
            TOKEN_ID,
            secret,
            "2099-01-01T00:00:00Z",
            "the fleet simulator's agents",
        ))?;
    let api: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(client.clone(), "kube-system");
    api.create(&Default::default(), &obj).await?;
    Ok(format!("{TOKEN_ID}.{secret}"))
}

/// Runs the agents of `wave` (Lease and status only) until the hub shows each of their
/// clusters Available, then stops them and waits until they have ended (their connections
/// closed). Only this wave's clusters are looked at: an earlier wave's stopped agents renew
/// nothing until the measured window, and their clusters may go Unknown meanwhile.
async fn run_until_available(client: &kube::Client, wave: &[DataDir]) -> anyhow::Result<()> {
    let mut names = BTreeSet::new();
    for d in wave {
        names.insert(d.identity()?.context("identity")?.cluster_name);
    }
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut running = Vec::with_capacity(wave.len());
    for d in wave {
        let mut opts = Options::new(d.clone());
        // Lease and status only: the simulator measures registration and heartbeats.
        opts.work = false;
        let mut stopped = stopped.clone();
        running.push(tokio::spawn(agent::run(
            opts,
            Arc::new(memory::MemoryCluster::default()),
            async move {
                let _ = stopped.wait_for(|s| *s).await;
            },
        )));
    }
    let since = Instant::now();
    loop {
        let up = available(client).await.unwrap_or_default();
        let n = names.iter().filter(|name| up.contains(*name)).count();
        if n == names.len() {
            break;
        }
        anyhow::ensure!(
            since.elapsed() < AVAILABLE_WITHIN,
            "{n} of a wave's {} clusters Available after {} s of their agents running",
            names.len(),
            AVAILABLE_WITHIN.as_secs()
        );
        // An agent runs until stopped: one that ended failed to start, and its cluster would
        // never be Available.
        if let Some(i) = running.iter().position(tokio::task::JoinHandle::is_finished) {
            let ended = running.swap_remove(i).await?;
            anyhow::bail!("an agent ended before its cluster was Available: {ended:?}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    stop.send_replace(true);
    for r in running {
        r.await??;
    }
    Ok(())
}

/// How long the renew mode waits for a wave's clusters to be Available.
const AVAILABLE_WITHIN: Duration = Duration::from_secs(300);

/// The clusters the hub shows Available.
async fn available(client: &kube::Client) -> anyhow::Result<BTreeSet<String>> {
    let gvk = kube::api::GroupVersionKind::gvk(
        "cluster.open-cluster-management.io",
        "v1",
        "ManagedCluster",
    );
    let ar = kube::api::ApiResource::from_gvk_with_plural(&gvk, "managedclusters");
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(client.clone(), &ar);
    let list = api.list(&Default::default()).await?;
    Ok(list
        .items
        .iter()
        .filter(|o| {
            o.data["status"]["conditions"].as_array().is_some_and(|l| {
                l.iter().any(|c| {
                    c["type"] == "ManagedClusterConditionAvailable" && c["status"] == "True"
                })
            })
        })
        .filter_map(|o| o.metadata.name.clone())
        .collect())
}

/// Joins agents `range` (and keeps them running when `run`), agent `i` at `urls[i % len]`;
/// returns each joined agent's data dir.
async fn join_agents(
    urls: &[String],
    token: &str,
    ca: &str,
    range: std::ops::Range<usize>,
    root: &Path,
    run: bool,
) -> anyhow::Result<Vec<DataDir>> {
    let mut tasks = Vec::new();
    for i in range {
        let req = JoinRequest {
            hub: urls[i % urls.len()].clone(),
            token: token.to_owned(),
            cluster_name: format!("sim-{i:05}"),
            ca: CaSource::Pem(ca.to_owned()),
        };
        let opts = Options::new(DataDir::new(root.join(format!("a{i}"))));
        tasks.push(tokio::spawn(async move {
            agent::join(&req, &opts, |_| {}).await?;
            let dir = opts.data_dir.clone();
            if run {
                tokio::spawn(agent::run(
                    opts,
                    Arc::new(memory::MemoryCluster::default()),
                    std::future::pending(),
                ));
            }
            Ok::<_, AgentError>(dir)
        }));
    }
    let mut dirs = Vec::new();
    for t in tasks {
        dirs.push(t.await??);
    }
    Ok(dirs)
}

/// Joins `args.agents` agents in waves, each at the next of `urls` in turn, then runs each wave
/// as on start until the hub shows its clusters Available (its first status report; a running
/// agent may hold two connections, and the simulator's descriptors are bounded); then only the
/// simulator's renewals go on. Returns the agents' data dirs.
async fn join_and_run(
    client: &kube::Client,
    urls: &[String],
    token: &str,
    ca: &str,
    args: &Args,
    root: &Path,
) -> anyhow::Result<Vec<DataDir>> {
    let mut dirs = Vec::new();
    let t = Instant::now();
    for start in (0..args.agents).step_by(args.wave.max(1)) {
        let end = (start + args.wave).min(args.agents);
        dirs.extend(join_agents(urls, token, ca, start..end, root, false).await?);
        eprintln!("joined {end} agents in {:.0} s", t.elapsed().as_secs_f64());
    }
    for wave in dirs.chunks(args.wave) {
        run_until_available(client, wave).await?;
    }
    eprintln!("all {} Available at {:.0} s", args.agents, t.elapsed().as_secs_f64());
    Ok(dirs)
}

/// A new dir for the agents' data dirs: under `--agent-dir`, else /dev/shm where it exists,
/// else the temporary dir.
fn agents_root(args: &Args) -> anyhow::Result<tempfile::TempDir> {
    let shm = Path::new("/dev/shm");
    Ok(match &args.agent_dir {
        Some(dir) => tempfile::tempdir_in(dir)?,
        None if shm.is_dir() => tempfile::tempdir_in(shm)?,
        None => tempfile::tempdir()?,
    })
}

/// Makes sure this process may open `wanted` files: its soft limit is raised to the hard one
/// (as the hub raises its own), and a run that still does not fit is refused. Without enough
/// descriptors a simulator fails agents at random (an agent that cannot read its data dir
/// ends).
fn ensure_open_files(wanted: u64) -> anyhow::Result<()> {
    let limit = ocm_apiserver::serve::server::raise_open_file_limit().unwrap_or(u64::MAX);
    anyhow::ensure!(
        limit >= wanted,
        "fleet-sim needs about {wanted} open files for these agents (the hub as many), and may have {limit} (ulimit -Hn): raise the limit or run fewer agents"
    );
    Ok(())
}

/// Open files the run needs at its peak, in this process and in the hub: up to three
/// connections per agent that runs (its REST pool, a second while its Lease and status
/// requests overlap, its work stream), one per agent that only renews, and a reserve (the
/// hub's for storage).
fn open_files_needed(args: &Args) -> u64 {
    let agents = args.agents as u64;
    let peak = match args.mode.as_str() {
        // A wave of running agents; the workers hold the renewal connections.
        "renew" if args.replicas > 0 => 3 * args.wave.min(args.agents) as u64,
        "renew-worker" => args.to.saturating_sub(args.from) as u64,
        // A wave of running agents, then every agent's one renewal connection.
        "renew" => (3 * args.wave.min(args.agents) as u64).max(agents),
        // A wave of running agents, and every agent's work stream.
        "mwrs" | "addons" => 3 * args.wave.min(args.agents) as u64 + agents,
        "policies" => 3 * args.wave.min(args.agents) as u64 + 2 * agents,
        _ => 3 * agents,
    };
    peak + 2048
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    ensure_open_files(open_files_needed(&args))?;
    if args.mode == "renew-worker" {
        return replicas::worker(&args).await;
    }
    if args.replicas > 0 {
        anyhow::ensure!(args.mode == "renew", "--replicas: only with --mode renew");
        return replicas::run(&args).await;
    }
    let bin = hub_binary(args.hub.clone())?;
    // The renewing agents' clients, kept (connections open) until the hub is stopped: the
    // closing scrape sees the fleet connected, and the hub is stopped with it (declared
    // before `hub`, so dropped after it).
    let mut connected: Vec<kube::Client> = Vec::new();
    let hub = start_hub(&bin, args.agents, args.grpc_metrics_per_cluster).await?;
    let client = admin(&hub).await?;
    let token = create_token(&client).await?;
    let ca = std::fs::read_to_string(hub.dir.path().join("pki/ca.crt"))?;
    let root = agents_root(&args)?;
    let pid = hub.child.id();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (_, rss_base) = hub_usage(pid)?;
    match args.mode.as_str() {
        "join" => {
            let start = Instant::now();
            let joiner = join_agents(
                std::slice::from_ref(&hub.url),
                &token,
                &ca,
                0..args.agents,
                root.path(),
                true,
            );
            let joined = tokio::spawn({
                let client = client.clone();
                let n = args.agents;
                async move {
                    loop {
                        if available(&client).await.map_or(0, |up| up.len()) >= n {
                            return start.elapsed();
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            });
            joiner.await?;
            let accepted = start.elapsed();
            let all = joined.await?;
            let (cpu, rss) = hub_usage(pid)?;
            println!(
                "| agents | all accepted (join returned) | all Available on the hub | hub CPU s | hub RSS MiB |"
            );
            println!("|---:|---:|---:|---:|---:|");
            println!(
                "| {} | {:.1} s | {:.1} s | {cpu:.1} | {:.0} |",
                args.agents,
                accepted.as_secs_f64(),
                all.as_secs_f64(),
                rss as f64 / 1024.0
            );
            requests(&client).await?;
        }
        "renew" => {
            let urls = std::slice::from_ref(&hub.url);
            let dirs = join_and_run(&client, urls, &token, &ca, &args, root.path()).await?;
            let clients = renew::renewers(&dirs, &ca)?;
            let period = Duration::from_secs(args.renew_every);
            let duration = Duration::from_secs(args.duration);
            renew::warm(&clients).await?;
            let (cpu0, _) = hub_usage(pid)?;
            let window = renew::renew_window(clients, 0, args.agents, period, duration).await?;
            let (hist, errors, took, open) = (window.hist, window.errors, window.took, window.open);
            let (cpu1, rss) = hub_usage(pid)?;
            // (A hub from before parking has no such gauge.)
            let parked = parked(&client).await.map_or("-".to_owned(), |n| n.to_string());
            connected.extend(open);
            let secs = took.max(duration.as_secs_f64());
            let cores = (cpu1 - cpu0) / took;
            renew::print_renewals(
                args.agents,
                &hist,
                errors,
                secs,
                cores,
                rss,
                rss.saturating_sub(rss_base),
            );
            println!("HTTP/1 connections parked at the end of the window: {parked}");
        }
        "works" | "fanout" | "mwrs" | "addons" | "policies" => {
            let mut dirs = Vec::new();
            for start in (0..args.agents).step_by(args.wave.max(1)) {
                let end = (start + args.wave).min(args.agents);
                dirs.extend(
                    join_agents(
                        std::slice::from_ref(&hub.url),
                        &token,
                        &ca,
                        start..end,
                        root.path(),
                        false,
                    )
                    .await?,
                );
            }
            if args.mode == "works" {
                works::run(&hub, &client, &ca, &dirs, pid).await?;
            } else if args.mode == "mwrs" {
                mwrs::run(&hub, &client, &ca, &dirs, pid, args.wave, &args.scenarios).await?;
            } else if args.mode == "addons" {
                addons::run(&hub, &client, &ca, &dirs, pid, args.wave).await?;
            } else if args.mode == "policies" {
                policies::run(&hub, &client, &ca, &dirs, pid, args.wave).await?;
            } else {
                works::fanout(&hub, &client, &ca, &dirs, pid, args.work_kib).await?;
            }
        }
        other => {
            anyhow::bail!("--mode {other:?}: join, renew, works, fanout, mwrs, addons or policies")
        }
    }
    scrape(&client, args.agents).await?;
    Ok(())
}

/// Times five scrapes of the hub's `/metrics` (whose fleet gauges read every cluster and
/// Lease from the watch cache) and prints the median, the size and the series count.
async fn scrape(client: &kube::Client, agents: usize) -> anyhow::Result<()> {
    let mut times = Vec::new();
    let mut text = String::new();
    for _ in 0..5 {
        let t = Instant::now();
        let req = http::Request::get("/metrics").body(Vec::new())?;
        text = client.request_text(req).await?;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    let series = text.lines().filter(|l| !l.is_empty() && !l.starts_with('#')).count();
    println!("| agents | /metrics median of 5 | min | max | size KiB | series |");
    println!("|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {agents} | {:.1} ms | {:.1} ms | {:.1} ms | {:.0} | {series} |",
        times[2],
        times[0],
        times[4],
        text.len() as f64 / 1024.0
    );
    Ok(())
}

/// Prints the hub's requests so far (`apiserver_request_total`) by verb, resource and code,
/// most first: where a run's requests went, and how many were refused.
async fn requests(client: &kube::Client) -> anyhow::Result<()> {
    let req = http::Request::get("/metrics").body(Vec::new())?;
    let samples = ocm_conformance::prom::samples(&client.request_text(req).await?)?;
    let mut rows: BTreeMap<(String, String, String), f64> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.name == "apiserver_request_total") {
        let label = |k: &str| s.labels.get(k).cloned().unwrap_or_default();
        let mut resource = label("resource");
        if let Some(sub) = s.labels.get("subresource").filter(|v| !v.is_empty()) {
            resource = format!("{resource}/{sub}");
        }
        *rows.entry((label("verb"), resource, label("code"))).or_default() += s.value;
    }
    let mut rows: Vec<_> = rows.into_iter().collect();
    rows.sort_by(|a, b| b.1.total_cmp(&a.1));
    println!("| verb | resource | code | requests |");
    println!("|---|---|---:|---:|");
    for ((verb, resource, code), n) in rows.iter().take(20) {
        println!("| {verb} | {resource} | {code} | {n} |");
    }
    Ok(())
}

/// The hub's `ocm_http1_parked_connections`.
async fn parked(client: &kube::Client) -> anyhow::Result<f64> {
    let req = http::Request::get("/metrics").body(Vec::new())?;
    let samples = ocm_conformance::prom::samples(&client.request_text(req).await?)?;
    ocm_conformance::prom::value(&samples, "ocm_http1_parked_connections", &[])
}

/// The `works` mode: simulated gRPC work agents and ManifestWork delivery.
mod works {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, PoisonError};
    use std::time::{Duration, Instant};

    use anyhow::Context as _;
    use futures::StreamExt as _;
    use hdrhistogram::Histogram;
    use kube::api::{Api, DynamicObject, PostParams};
    use kube::runtime::{WatchStreamExt as _, watcher};
    use ocm_agent::grpc::{self, Endpoint};
    use ocm_agent::state::DataDir;
    use ocm_proto::cloudevents::v1::CloudEvent;
    use ocm_proto::cloudevents::{Action, Attr, EventType, Subresource, data_type, ext};
    use serde_json::{Value, json};
    use tokio_util::task::AbortOnDropHandle;

    use super::{Hub, hub_usage};

    type Times = Arc<Mutex<HashMap<String, Instant>>>;

    fn record(times: &Times, name: &str) {
        times
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(name.to_owned())
            .or_insert_with(Instant::now);
    }

    /// One simulated work agent: every spec event is recorded as received and answered with
    /// an `Applied` status.
    async fn agent(endpoint: Endpoint, dir: DataDir, received: Times) -> anyhow::Result<()> {
        let id = dir.identity()?.context("identity")?;
        let (cert, key) = dir.credentials()?.context("credentials")?;
        let client = endpoint.connect(&cert, &key).await?;
        let mut stream =
            grpc::subscribe(&client, &id.cluster_name, data_type::MANIFEST_BUNDLES).await?;
        tokio::spawn(async move {
            while let Ok(Some(e)) = stream.message().await {
                let Ok(t) = EventType::parse(&e.r#type) else { continue };
                if t.subresource != Subresource::Spec || e.get(ext::DELETION_TIMESTAMP).is_some() {
                    continue;
                }
                let meta: Value = e
                    .string(ext::METADATA)
                    .and_then(|m| serde_json::from_str(m).ok())
                    .unwrap_or_default();
                let name = meta["name"].as_str().unwrap_or_default().to_owned();
                record(&received, &format!("{}/{name}", id.cluster_name));
                let generation = e.integer(ext::RESOURCE_VERSION).unwrap_or(0);
                let Ok(t) = EventType::new(
                    data_type::MANIFEST_BUNDLES,
                    Subresource::Status,
                    Action::UpdateRequest,
                ) else {
                    continue;
                };
                let mut report = CloudEvent::new(format!("{name}-applied"), "sim", &t);
                let status = json!({"conditions": [{"type": "Applied", "status": "True",
                    "reason": "AppliedManifestWorkComplete", "message": "Apply manifest work complete",
                    "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": generation}]});
                report
                    .set(ext::CLUSTER_NAME, Attr::CeString(id.cluster_name.clone()))
                    .set(
                        ext::RESOURCE_ID,
                        Attr::CeString(e.string(ext::RESOURCE_ID).unwrap_or_default().to_owned()),
                    )
                    .set(ext::RESOURCE_VERSION, Attr::CeInteger(generation))
                    .set_json(status.to_string());
                let client = client.clone();
                tokio::spawn(async move { grpc::publish(&client, report).await });
            }
        });
        Ok(())
    }

    /// A work named `name` for `cluster` with `manifests`, moved in (a fan-out's manifests are
    /// 500 KiB: they are not copied again here).
    fn work(name: &str, cluster: &str, manifests: Value) -> DynamicObject {
        let mut obj =
            DynamicObject::new(name, &ocm_agent::transport::works_resource()).within(cluster);
        obj.data = json!({"spec": {"workload": {"manifests": null}}});
        obj.data["spec"]["workload"]["manifests"] = manifests;
        obj
    }

    /// The perftool shape: one small ConfigMap named after its work.
    fn one_configmap(name: &str) -> Value {
        json!([{"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": {"k": "v"}}])
    }

    /// One ConfigMap whose manifests serialize to `kib` KiB (less a few bytes), its data
    /// pseudo-random letters so that no layer can make it cheap by compressing it.
    fn big_configmap(kib: usize) -> Value {
        let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "fanout", "namespace": "default"}, "data": {"blob": ""}});
        let overhead = json!([cm]).to_string().len();
        let blob = ocm_conformance::data::letters(
            (kib * 1024).saturating_sub(overhead + 16),
            0x9E37_79B9_7F4A_7C15,
        );
        cm["data"]["blob"] = Value::String(blob);
        json!([cm])
    }

    fn api(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), ns, &ocm_agent::transport::works_resource())
    }

    /// Follows every work on the hub and records when each first shows `Applied`, until the
    /// returned handle is dropped. A failed watch is retried with kube's backoff (a hub gone at
    /// the end of a run once kept it retrying at full speed, and the simulator never exited).
    fn follow_applied(client: &kube::Client, applied: Times) -> AbortOnDropHandle<()> {
        let all: Api<DynamicObject> =
            Api::all_with(client.clone(), &ocm_agent::transport::works_resource());
        AbortOnDropHandle::new(tokio::spawn(async move {
            let mut s = std::pin::pin!(watcher(all, watcher::Config::default()).default_backoff());
            while let Some(e) = s.next().await {
                if let Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) = e {
                    let done =
                        o.data.pointer("/status/conditions").and_then(Value::as_array).is_some_and(
                            |c| c.iter().any(|c| c["type"] == "Applied" && c["status"] == "True"),
                        );
                    if done {
                        let ns = o.metadata.namespace.as_deref().unwrap_or_default();
                        let name = o.metadata.name.as_deref().unwrap_or_default();
                        record(&applied, &format!("{ns}/{name}"));
                    }
                }
            }
        }))
    }

    /// Creates `count` works at `rate` per second (`prefix-<i>`, round robin over `clusters`,
    /// their manifests from `manifests(name)`). Returns when each create (`cluster/name`) was
    /// due (at a rate: its scheduled time, so that time spent waiting for a seat counts as
    /// latency; else when it was issued) and the creates achieved per second.
    async fn create(
        client: &kube::Client,
        clusters: &[String],
        prefix: &str,
        count: usize,
        rate: Option<f64>,
        manifests: &dyn Fn(&str) -> Value,
    ) -> anyhow::Result<(HashMap<String, Instant>, f64)> {
        let begin = Instant::now();
        // At most 64 creates in flight (the admin client opens a connection per request in
        // flight, and the hub caps connections).
        let seats = Arc::new(tokio::sync::Semaphore::new(64));
        let mut tasks = Vec::new();
        let mut due = HashMap::new();
        for i in 0..count {
            let at = match rate {
                Some(rate) => {
                    let at = begin + Duration::from_secs_f64(i as f64 / rate);
                    tokio::time::sleep_until(at.into()).await;
                    at
                }
                None => Instant::now(),
            };
            let cluster = &clusters[i % clusters.len()];
            let name = format!("{prefix}-{i}");
            let (api, obj) = (api(client, cluster), work(&name, cluster, manifests(&name)));
            due.insert(format!("{cluster}/{name}"), at);
            let seat = Arc::clone(&seats).acquire_owned().await?;
            tasks.push(tokio::spawn(async move {
                let _seat = seat;
                api.create(&PostParams::default(), &obj).await
            }));
        }
        let issued = begin.elapsed().as_secs_f64();
        for t in tasks {
            t.await??;
        }
        // The rate at which creates went out (the last one at `issued`).
        let achieved = if count > 1 { (count - 1) as f64 / issued } else { count as f64 };
        Ok((due, achieved))
    }

    /// Waits until every name in `sent` is in `times`, then the latencies' histogram (µs).
    async fn latencies(
        sent: &HashMap<String, Instant>,
        times: &Times,
    ) -> anyhow::Result<Histogram<u64>> {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            {
                let t = times.lock().unwrap_or_else(PoisonError::into_inner);
                if sent.keys().all(|k| t.contains_key(k)) {
                    let mut h = Histogram::<u64>::new(3)?;
                    for (k, at) in sent {
                        h.record((t[k].saturating_duration_since(*at).as_micros() as u64).max(1))?;
                    }
                    return Ok(h);
                }
            }
            anyhow::ensure!(Instant::now() < deadline, "not every work arrived within 120 s");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Subscribes one simulated work agent per data dir; the clusters, and the hub's RSS (KiB)
    /// before and after.
    async fn subscribe_all(
        hub: &Hub,
        ca: &str,
        dirs: &[DataDir],
        pid: u32,
        received: &Times,
    ) -> anyhow::Result<(Vec<String>, u64, u64)> {
        let endpoints: Value =
            serde_json::from_str(&std::fs::read_to_string(hub.dir.path().join("endpoints.json"))?)?;
        let url = endpoints["grpc"].as_str().context("no gRPC endpoint")?.to_owned();
        let endpoint = Endpoint { url, ca_pem: ca.to_owned() };
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (_, rss0) = hub_usage(pid)?;
        let mut clusters = Vec::new();
        let mut tasks = Vec::new();
        for d in dirs {
            clusters.push(d.identity()?.context("identity")?.cluster_name);
            tasks.push(tokio::spawn(agent(endpoint.clone(), d.clone(), Arc::clone(received))));
        }
        for t in tasks {
            t.await??;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (_, rss1) = hub_usage(pid)?;
        Ok((clusters, rss0, rss1))
    }

    pub(super) async fn run(
        hub: &Hub,
        client: &kube::Client,
        ca: &str,
        dirs: &[DataDir],
        pid: u32,
    ) -> anyhow::Result<()> {
        let (received, applied): (Times, Times) = Default::default();
        let (clusters, rss0, rss1) = subscribe_all(hub, ca, dirs, pid, &received).await?;
        let _following = follow_applied(client, Arc::clone(&applied));
        println!(
            "| agents | creates/s scheduled | achieved | works | create → received p50 ms | p99 ms | create → Applied on the hub p99 ms |"
        );
        println!("|---:|---:|---:|---:|---:|---:|---:|");
        for rate in [100.0, 500.0, 1000.0] {
            let count = (rate * 5.0) as usize;
            let (sent, achieved) =
                create(client, &clusters, &format!("r{rate}"), count, Some(rate), &one_configmap)
                    .await?;
            let got = latencies(&sent, &received).await?;
            let done = latencies(&sent, &applied).await?;
            let ms = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
            println!(
                "| {} | {rate:.0} | {achieved:.0} | {count} | {:.1} | {:.1} | {:.1} |",
                dirs.len(),
                ms(&got, 0.5),
                ms(&got, 0.99),
                ms(&done, 0.99)
            );
        }
        let burst = 5 * dirs.len();
        let start = Instant::now();
        let (sent, _) = create(client, &clusters, "burst", burst, None, &one_configmap).await?;
        latencies(&sent, &applied).await?;
        let all = start.elapsed();
        let (_, rss2) = hub_usage(pid)?;
        println!();
        println!(
            "| agents | burst works | all Applied | hub RSS before subscribing MiB | after | per subscribed agent KiB | after the works MiB |"
        );
        println!("|---:|---:|---:|---:|---:|---:|---:|");
        println!(
            "| {} | {burst} | {:.2} s | {:.0} | {:.0} | {:.1} | {:.0} |",
            dirs.len(),
            all.as_secs_f64(),
            rss0 as f64 / 1024.0,
            rss1 as f64 / 1024.0,
            rss1.saturating_sub(rss0) as f64 / dirs.len() as f64,
            rss2 as f64 / 1024.0
        );
        grpc_series(client, dirs.len()).await
    }

    /// Prints how many `grpc_server_ce_*` series the hub exports now, in all and per cluster.
    async fn grpc_series(client: &kube::Client, clusters: usize) -> anyhow::Result<()> {
        let req = http::Request::get("/metrics").body(Vec::new())?;
        let samples = ocm_conformance::prom::samples(&client.request_text(req).await?)?;
        let series = samples.iter().filter(|s| s.name.starts_with("grpc_server_ce_")).count();
        println!();
        println!("| agents | grpc_server_ce_* series | per cluster |");
        println!("|---:|---:|---:|");
        println!("| {clusters} | {series} | {:.1} |", series as f64 / clusters as f64);
        Ok(())
    }

    /// One work of `kib` KiB for every cluster, created as fast as possible: when every agent
    /// has it, when all are `Applied`, and the hub's peak RSS above its RSS before.
    pub(super) async fn fanout(
        hub: &Hub,
        client: &kube::Client,
        ca: &str,
        dirs: &[DataDir],
        pid: u32,
        kib: usize,
    ) -> anyhow::Result<()> {
        let (received, applied): (Times, Times) = Default::default();
        let (clusters, _, _) = subscribe_all(hub, ca, dirs, pid, &received).await?;
        let _following = follow_applied(client, Arc::clone(&applied));
        let manifests = big_configmap(kib);
        let size = manifests.to_string().len();
        tokio::time::sleep(Duration::from_secs(2)).await;
        // Linux: writing 5 to clear_refs sets the peak (VmHWM) back to the current RSS.
        std::fs::write(format!("/proc/{pid}/clear_refs"), "5").context("reset peak RSS")?;
        let (_, before) = hub_usage(pid)?;
        let start = Instant::now();
        let (sent, _) =
            create(client, &clusters, "fanout", clusters.len(), None, &|_| manifests.clone())
                .await?;
        let created = start.elapsed();
        latencies(&sent, &received).await?;
        let got = start.elapsed();
        latencies(&sent, &applied).await?;
        let done = start.elapsed();
        let (_, after) = hub_usage(pid)?;
        let peak = super::hub::proc_status_kib(pid, "VmHWM")?;
        println!(
            "| agents | manifests KiB | all created | all received | all Applied | hub RSS before MiB | peak MiB | peak − before MiB | after MiB |"
        );
        println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        println!(
            "| {} | {:.1} | {:.2} s | {:.2} s | {:.2} s | {:.0} | {:.0} | {:.0} | {:.0} |",
            dirs.len(),
            size as f64 / 1024.0,
            created.as_secs_f64(),
            got.as_secs_f64(),
            done.as_secs_f64(),
            before as f64 / 1024.0,
            peak as f64 / 1024.0,
            peak.saturating_sub(before) as f64 / 1024.0,
            after as f64 / 1024.0
        );
        Ok(())
    }
}
