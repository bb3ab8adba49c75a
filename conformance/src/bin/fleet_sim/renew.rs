//! The renew mode's measured window: each joined agent's renewal client (its own certificate
//! and connection), one warming renewal each, then renewals spread evenly over the period for
//! the window's length, and the row the mode prints. Run in the simulator itself, or split over
//! worker processes (`replicas.rs`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use hdrhistogram::Histogram;
use ocm_agent::agent;
use ocm_agent::state::DataDir;

/// A joined agent's renewal client (its own certificate and connection) and its cluster.
pub(super) type Renewer = (kube::Client, String);

/// The renewal clients of the agents of `dirs`, each at the hub it joined.
pub(super) fn renewers(dirs: &[DataDir], ca: &str) -> anyhow::Result<Vec<Renewer>> {
    dirs.iter()
        .map(|d| {
            let id = d.identity()?.context("identity")?;
            let (cert, key) = d.credentials()?.context("credentials")?;
            let c = ocm_agent::hub::with_certificate(&id.hub, ca, &cert, &key)?;
            Ok((c, id.cluster_name))
        })
        .collect()
}

/// One renewal by each agent, so its connection is open before a measured window.
pub(super) async fn warm(clients: &[Renewer]) -> anyhow::Result<()> {
    let warm: Vec<_> = clients
        .iter()
        .map(|(c, n)| {
            let (c, n) = (c.clone(), n.clone());
            tokio::spawn(async move { agent::renew_lease_with(&c, &n).await })
        })
        .collect();
    for w in warm {
        let _ = w.await?;
    }
    Ok(())
}

/// What a measured window of renewals found, and the clients, kept so their connections stay
/// open.
pub(super) struct Window {
    pub(super) hist: Histogram<u64>,
    pub(super) errors: usize,
    /// Seconds from the window's start to the last renewal's end.
    pub(super) took: f64,
    pub(super) open: Vec<kube::Client>,
}

/// Renewals for `duration`, each agent every `period`: agent `first + i` of `fleet` agents
/// renews first `period × (first + i) / fleet` into the window, so the fleet's renewals are
/// spread evenly over the period whichever process runs them. Renewals are scheduled only
/// inside the window; a simulator that falls behind finishes later, and `took` says so.
pub(super) async fn renew_window(
    clients: Vec<Renewer>,
    first: usize,
    fleet: usize,
    period: Duration,
    duration: Duration,
) -> anyhow::Result<Window> {
    let hist = Arc::new(Mutex::new(Histogram::<u64>::new(3)?));
    let errors = Arc::new(AtomicUsize::new(0));
    let began = Instant::now();
    let end = tokio::time::Instant::now() + duration;
    let mut tasks = Vec::new();
    for (i, (c, n)) in clients.into_iter().enumerate() {
        let (hist, errors) = (Arc::clone(&hist), Arc::clone(&errors));
        let offset = period.mul_f64((first + i) as f64 / fleet as f64);
        tasks.push(tokio::spawn(async move {
            let mut next = tokio::time::Instant::now() + offset;
            while next < end {
                tokio::time::sleep_until(next).await;
                let t = Instant::now();
                match agent::renew_lease_with(&c, &n).await {
                    Ok(()) => {
                        let us = t.elapsed().as_micros() as u64;
                        hist.lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .record(us.max(1))
                            .ok();
                    }
                    Err(_) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                next += period;
            }
            c
        }));
    }
    let mut open = Vec::with_capacity(tasks.len());
    for t in tasks {
        open.push(t.await?);
    }
    let took = began.elapsed().as_secs_f64();
    let hist = hist.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    Ok(Window { hist, errors: errors.load(Ordering::Relaxed), took, open })
}

/// Prints the renew mode's row: `agents`' renewals over `secs` seconds, the hubs' CPU in cores
/// and RSS in KiB, and RSS per agent from `grown` KiB.
pub(super) fn print_renewals(
    agents: usize,
    h: &Histogram<u64>,
    errors: usize,
    secs: f64,
    cores: f64,
    rss: u64,
    grown: u64,
) {
    let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    println!(
        "| agents | renewals/s | p50 ms | p99 ms | max ms | errors | hub CPU (cores) | hub RSS MiB | RSS per agent KiB |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {agents} | {:.0} | {:.2} | {:.2} | {:.1} | {errors} | {cores:.2} | {:.0} | {:.1} |",
        h.len() as f64 / secs,
        ms(0.5),
        ms(0.99),
        h.max() as f64 / 1000.0,
        rss as f64 / 1024.0,
        grown as f64 / agents as f64,
    );
}
