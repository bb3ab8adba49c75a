//! The failover benchmark (`BENCHMARKS.md`): three `ocm-hub` replicas over a three-member etcd
//! with the default election timings (15 s lease, 10 s renew deadline, 2 s retry), a client
//! writing through every replica, and the leader killed with SIGKILL `--kills` times. Each kill
//! is timed until another replica reports itself leader (`leader_election_master_status`,
//! polled every 100 ms); after each, every acknowledged write is checked. Prints each failover
//! time, p50 and p99, and the writes acknowledged and lost.
//!
//! `cargo build --release -p ocm-apiserver -p ocm-conformance && target/release/failover-bench --kills 50`

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use ocm_conformance::etcd::EtcdServer;
use ocm_conformance::replicas::{Replica, all_acknowledged_stored, leader, write_continuously};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let kills = kills_arg()?;
    let etcd = tokio::task::spawn_blocking(|| EtcdServer::start_cluster(3)).await??;
    let endpoints: Vec<String> = etcd.iter().map(|m| m.endpoint.clone()).collect();
    let first = Replica::start(&endpoints, None, &[]).await?;
    let second = Replica::start(&endpoints, Some(&first), &[]).await?;
    let third = Replica::start(&endpoints, Some(&first), &[]).await?;
    let mut replicas = vec![first, second, third];
    let http = replicas[0].http()?;
    let acknowledged = Arc::new(Mutex::new(BTreeSet::new()));
    let urls = replicas.iter().map(Replica::url).collect();
    let writer = tokio::spawn(write_continuously(http.clone(), urls, Arc::clone(&acknowledged)));

    let mut times = Vec::with_capacity(kills);
    for kill in 0..kills {
        let lead = leader(&replicas, &http, Duration::from_secs(60)).await?;
        replicas[lead].kill();
        let killed = Instant::now();
        let next = loop {
            let mut found = None;
            for (i, r) in replicas.iter().enumerate() {
                if i != lead && r.leads(&http).await == Some(true) {
                    found = Some(i);
                }
            }
            if let Some(i) = found {
                break i;
            }
            anyhow::ensure!(
                killed.elapsed() < Duration::from_secs(120),
                "no leader after kill {kill}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let took = killed.elapsed();
        times.push(took);
        println!("kill {kill}: replica {next} leads after {:.2} s", took.as_secs_f64());
        replicas[lead].resume().await?;
        all_acknowledged_stored(&http, &replicas[next].url(), &acknowledged)
            .await
            .with_context(|| format!("after kill {kill}"))?;
    }
    writer.abort();
    times.sort_unstable();
    let at = |q: f64| times[((times.len() as f64 - 1.0) * q).round() as usize].as_secs_f64();
    let acked = acknowledged.lock().map(|a| a.len()).unwrap_or_default();
    println!(
        "failover over {kills} leader kills: p50 {:.2} s, p99 {:.2} s, max {:.2} s; \
         {acked} writes acknowledged, 0 lost",
        at(0.5),
        at(0.99),
        at(1.0)
    );
    Ok(())
}

fn kills_arg() -> anyhow::Result<usize> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == "--kills") {
        Some(i) => Ok(args.get(i + 1).context("--kills needs a number")?.parse()?),
        None => Ok(50),
    }
}
