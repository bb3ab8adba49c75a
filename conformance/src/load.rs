//! Load for the benchmarks: the 1 KiB ConfigMap they write, latency histograms, and creates
//! through the API by many clients at once, each over its own connection.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rand::Rng as _;
use serde_json::{Value, json};

/// The size of a benchmark ConfigMap's value.
pub const VALUE_BYTES: usize = 1024;

/// One random 1 KiB value, made once: generating it per object would bill the client's random
/// number generator to every side of a comparison.
pub fn payload() -> &'static str {
    static VALUE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    VALUE.get_or_init(|| {
        let mut rng = rand::rng();
        (0..VALUE_BYTES).map(|_| rng.random_range(b'a'..=b'z') as char).collect()
    })
}

/// The ConfigMap `name` holding [`payload`]; with `sent`, the time it was sent (ns since the
/// epoch) in the annotation `bench/sent`.
pub fn configmap(name: &str, sent: Option<u128>) -> Value {
    let mut cm = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"v": payload()},
    });
    if let Some(ns) = sent {
        cm["metadata"]["annotations"] = json!({"bench/sent": ns.to_string()});
    }
    cm
}

/// A histogram of microseconds, up to two minutes.
pub fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 120_000_000, 3).expect("static bounds")
}

/// The quantile `q` of `h` in milliseconds.
pub fn ms(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1000.0
}

/// Creates ConfigMaps for `secs` seconds, one client per entry of `clients` (the collection URL
/// it posts to and its own HTTP client), each waiting for its answer before the next, their
/// names `<prefix><client>-<n>`: the creates per second over all of them, and their latencies.
pub async fn creates(
    clients: Vec<(String, reqwest::Client)>,
    prefix: &str,
    secs: u64,
) -> anyhow::Result<(f64, Histogram<u64>)> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (c, (url, http)) in clients.into_iter().enumerate() {
        let prefix = prefix.to_owned();
        tasks.push(tokio::spawn(async move {
            let mut h = hist();
            let mut i = 0u64;
            while Instant::now() < deadline {
                let body = serde_json::to_vec(&configmap(&format!("{prefix}{c}-{i}"), None))?;
                let t = Instant::now();
                let resp = http
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await?;
                anyhow::ensure!(resp.status() == 201, "create answered {}", resp.status());
                let _ = resp.bytes().await?;
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
