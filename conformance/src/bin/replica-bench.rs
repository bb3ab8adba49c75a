//! The replicas' throughput benchmark (`BENCHMARKS.md`): durable creates of a 1 KiB ConfigMap
//! through three `ocm-hub` replicas over a three-member etcd, the clients spread evenly over
//! the replicas, beside one hub on its embedded sled store, in the same run with the same
//! clients (each its own HTTPS connection, one create at a time). The two are measured in turn,
//! `--rounds` times at each concurrency; prints creates per second and latency p50/p99 of each
//! measurement and the medians.
//!
//! `cargo build --release -p ocm-apiserver -p ocm-conformance && target/release/replica-bench`

use clap::Parser;
use ocm_conformance::etcd::EtcdServer;
use ocm_conformance::load::{self, ms};
use ocm_conformance::replicas::Replica;
use serde_json::json;

#[derive(Parser, Debug)]
#[command(about = "Create throughput of three hub replicas over etcd beside one hub on sled")]
struct Args {
    /// Seconds per measurement.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Client concurrencies.
    #[arg(long, default_value = "16,256", value_delimiter = ',')]
    clients: Vec<usize>,
    /// Measurements of each side at each concurrency.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
}

/// The namespace every create lands in.
const NAMESPACE: &str = "bench";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let etcd = tokio::task::spawn_blocking(|| EtcdServer::start_cluster(3)).await??;
    let endpoints: Vec<String> = etcd.iter().map(|m| m.endpoint.clone()).collect();
    let first = Replica::start(&endpoints, None, &[]).await?;
    let second = Replica::start(&endpoints, Some(&first), &[]).await?;
    let third = Replica::start(&endpoints, Some(&first), &[]).await?;
    let replicas = [first, second, third];
    let sled = Replica::start_sled(&[]).await?;
    namespace(&replicas[0]).await?;
    namespace(&sled).await?;

    println!("| hub | clients | round | creates/s | p50 ms | p99 ms |");
    println!("|---|---:|---:|---:|---:|---:|");
    let mut medians = Vec::new();
    for &clients in &args.clients {
        // Each side's rate per round: one hub on sled, then the replicas.
        let mut rates = [Vec::new(), Vec::new()];
        for round in 1..=args.rounds {
            let sides: [(&str, &[Replica]); 2] =
                [("one hub, sled", std::slice::from_ref(&sled)), ("3 replicas, etcd", &replicas)];
            for (side, (name, hubs)) in sides.into_iter().enumerate() {
                let prefix = format!("n{clients}r{round}c");
                let (rate, h) =
                    load::creates(spread(hubs, clients)?, &prefix, args.seconds).await?;
                println!(
                    "| {name} | {clients} | {round} | {rate:.0} | {:.2} | {:.2} |",
                    ms(&h, 0.5),
                    ms(&h, 0.99)
                );
                rates[side].push(rate);
            }
        }
        let [on_sled, on_etcd] = &mut rates;
        medians.push((clients, median(on_sled), median(on_etcd)));
    }
    println!();
    println!("| clients | one hub, sled (median creates/s) | 3 replicas, etcd | replicas ÷ sled |");
    println!("|---:|---:|---:|---:|");
    for (clients, sled, etcd) in medians {
        println!("| {clients} | {sled:.0} | {etcd:.0} | {:.2} |", etcd / sled);
    }
    drop(etcd);
    Ok(())
}

/// `clients` clients, each with its own connection, taken round-robin over `hubs`.
fn spread(hubs: &[Replica], clients: usize) -> anyhow::Result<Vec<(String, reqwest::Client)>> {
    (0..clients)
        .map(|c| {
            let hub = &hubs[c % hubs.len()];
            let url = format!("{}/api/v1/namespaces/{NAMESPACE}/configmaps", hub.url());
            Ok((url, hub.http()?))
        })
        .collect()
}

async fn namespace(hub: &Replica) -> anyhow::Result<()> {
    let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}});
    let resp =
        hub.http()?.post(format!("{}/api/v1/namespaces", hub.url())).json(&body).send().await?;
    anyhow::ensure!(resp.status() == 201, "namespace {NAMESPACE}: {}", resp.status());
    Ok(())
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}
