//! HTTP/2 and HTTP/1.1 abuse against a running hub (reliability.md R8, the part that runs in CI):
//! the hub advertises its stream limit, a rapid-reset flood on one connection leaves the hub's
//! memory bounded while a well-behaved client keeps being served without an error, and a request
//! with a thousand headers is refused with 431.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use bytes::Bytes;
use ocm_conformance::hub::{Backend, TestHub};

/// The tests of this file run one at a time: the hub runs in this process, and the flood test
/// reads the process's memory.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The resident set of this process (the hub runs in it), in KiB.
fn rss_kib() -> anyhow::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).context("no VmRSS")?;
    Ok(line.split_whitespace().nth(1).context("VmRSS value")?.parse()?)
}

/// An HTTP/2 connection to the hub as the admin, spoken with the `h2` crate's client.
async fn h2_connection(hub: &TestHub) -> anyhow::Result<h2::client::SendRequest<Bytes>> {
    let mut tls = hub.admin_tls()?;
    tls.alpn_protocols = vec![b"h2".to_vec()];
    let addr = hub.url.trim_start_matches("https://").to_owned();
    let tcp = tokio::net::TcpStream::connect(&addr).await?;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1")?;
    let stream = tokio_rustls::TlsConnector::from(Arc::new(tls)).connect(name, tcp).await?;
    let (send, conn) = h2::client::handshake(stream).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(send)
}

fn request(hub: &TestHub, path: &str) -> anyhow::Result<http::Request<()>> {
    Ok(http::Request::get(format!("{}{path}", hub.url)).body(())?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_limit_is_advertised() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let hub = TestHub::start(Backend::Memory).await?;
    let mut send = h2_connection(&hub).await?.ready().await?;
    let (resp, _) = send.send_request(request(&hub, "/api/v1/namespaces")?, true)?;
    let resp = resp.await?;
    ensure!(resp.status() == 200, "{}", resp.status());
    let limit = send.current_max_send_streams();
    ensure!(limit == ocm_apiserver::server::MAX_CONCURRENT_STREAMS as usize, "advertised {limit}");
    hub.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rapid_reset_flood_leaves_memory_bounded_and_others_served() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let hub = TestHub::start(Backend::Memory).await?;
    let good = hub.http()?;
    let url = format!("{}/api/v1/namespaces", hub.url);
    good.get(&url).send().await?.error_for_status()?;
    let before = rss_kib()?;

    // The well-behaved client keeps asking while the flood runs.
    let stop = Arc::new(AtomicBool::new(false));
    let (served, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let good_task = {
        let (stop, served, failed) = (Arc::clone(&stop), Arc::clone(&served), Arc::clone(&failed));
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                match good.get(&url).send().await.map(|r| r.status().as_u16()) {
                    Ok(200) => served.fetch_add(1, Ordering::Relaxed),
                    _ => failed.fetch_add(1, Ordering::Relaxed),
                };
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };

    // 50,000 HEADERS then RST_STREAM pairs, as fast as the connection takes them (60 s at
    // most); a connection the hub closes is replaced.
    let mut pairs = 0usize;
    let mut connections = 1usize;
    let started = Instant::now();
    let mut send = h2_connection(&hub).await?;
    while started.elapsed() < Duration::from_secs(60) && pairs < 50_000 {
        let ready = match tokio::time::timeout(Duration::from_secs(2), send.clone().ready()).await {
            Ok(Ok(ready)) => ready,
            _ => {
                send = h2_connection(&hub).await?;
                connections += 1;
                continue;
            }
        };
        let mut ready = ready;
        match ready.send_request(request(&hub, "/api/v1/namespaces")?, false) {
            Ok((resp, mut stream)) => {
                stream.send_reset(h2::Reason::CANCEL);
                drop(resp);
                pairs += 1;
            }
            Err(_) => {
                send = h2_connection(&hub).await?;
                connections += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    good_task.await?;
    let after = rss_kib()?;
    let (served, failed) = (served.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    eprintln!(
        "rapid reset: {pairs} pairs on {connections} connections in {:?}; RSS {before} -> {after} KiB; good client {served} served, {failed} failed",
        started.elapsed()
    );
    ensure!(pairs == 50_000, "only {pairs} pairs were sent in 60 s");
    ensure!(connections > 1, "the hub never closed the abusive connection");
    ensure!(failed == 0, "the well-behaved client saw {failed} failures during the flood");
    ensure!(served > 0, "the well-behaved client was never served");
    ensure!(after.saturating_sub(before) <= 64 * 1024, "RSS grew by {} KiB", after - before);
    // Still serving afterwards.
    hub.http()?.get(format!("{}/readyz", hub.url)).send().await?.error_for_status()?;
    hub.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_headers_are_refused() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let hub = TestHub::start(Backend::Memory).await?;
    let client = reqwest::Client::builder()
        .use_preconfigured_tls({
            let mut tls = hub.admin_tls()?;
            tls.alpn_protocols = vec![b"http/1.1".to_vec()];
            tls
        })
        .http1_only()
        .build()?;
    let url = format!("{}/api/v1/namespaces", hub.url);
    let mut req = client.get(&url);
    for i in 0..1000 {
        req = req.header(format!("x-filler-{i}"), "x");
    }
    let code = req.send().await.map(|r| r.status().as_u16());
    ensure!(matches!(code, Ok(431)), "1,000 headers answered {code:?}");
    // The same client is served normally afterwards.
    let ok = client.get(&url).send().await?.status().as_u16();
    ensure!(ok == 200, "{ok}");
    hub.stop().await;
    Ok(())
}
