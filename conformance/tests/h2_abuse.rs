//! HTTP/2 and HTTP/1.1 abuse against a running hub (reliability.md R8, the part that runs in CI):
//! the hub advertises its stream limit, a rapid-reset flood on one connection is refused (the
//! hub closes the connection) while a well-behaved client keeps being served without an error,
//! a request with a thousand headers is refused with 431, and an HTTP/1.1 connection is cut off
//! when a request head trickles in (slowloris) but kept while it idles between requests, with
//! its HTTP state let go (parked) while idle and nothing read before a pause lost. What the
//! flood costs in time and memory is measured by `h2-abuse-bench` (`BENCHMARKS.md`), not here.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, ensure};
use ocm_conformance::flood::{self, GoodClient, h2_connection, request};
use ocm_conformance::hub::{Backend, TestHub};

/// The tests of this file run one at a time: each starts a hub in this process and some wait
/// on its timeouts, which a flood beside them would only blur.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// HEADERS then RST_STREAM pairs in the flood: enough for the hub to close the abusive
/// connection many times over (`h2-abuse-bench` saw a close about every 1,100 pairs).
const FLOOD_PAIRS: usize = 20_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_limit_is_advertised() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let hub = TestHub::start(Backend::Memory).await?;
    let mut send = h2_connection(&hub, vec![b"h2".to_vec()]).await?.ready().await?;
    let (resp, _) = send.send_request(request(&hub, "/api/v1/namespaces")?, true)?;
    let resp = resp.await?;
    ensure!(resp.status() == 200, "{}", resp.status());
    let limit = send.current_max_send_streams();
    ensure!(
        limit == ocm_apiserver::serve::server::MAX_CONCURRENT_STREAMS as usize,
        "advertised {limit}"
    );
    // HTTP/2 with prior knowledge: no protocol chosen in the handshake, the preface tells.
    let mut send = h2_connection(&hub, Vec::new()).await?.ready().await?;
    let (resp, _) = send.send_request(request(&hub, "/api/v1/namespaces")?, true)?;
    ensure!(resp.await?.status() == 200, "HTTP/2 with prior knowledge was not served");
    hub.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rapid_reset_flood_is_refused_and_others_served() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let hub = TestHub::start(Backend::Memory).await?;
    hub.http()?.get(format!("{}/api/v1/namespaces", hub.url)).send().await?.error_for_status()?;
    // The well-behaved client keeps asking while the flood runs.
    let good = GoodClient::start(&hub)?;
    let flood = flood::rapid_reset(&hub, FLOOD_PAIRS).await?;
    let served = good.stop().await?;
    eprintln!(
        "rapid reset: {flood:?}; good client {} served, {} failed",
        served.ok.len(),
        served.failed.len()
    );
    ensure!(flood.pairs == FLOOD_PAIRS, "{flood:?}");
    ensure!(flood.closed > 0, "the hub never closed the abusive connection: {flood:?}");
    ensure!(
        served.failed.is_empty(),
        "the well-behaved client failed during the flood: {:?}",
        served.failed
    );
    ensure!(!served.ok.is_empty(), "the well-behaved client was never served");
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

/// A raw HTTP/1.1 connection to the hub as the admin, `http/1.1` chosen in the handshake.
async fn http1_connection(
    hub: &TestHub,
) -> anyhow::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    http1_connection_with(hub, vec![b"http/1.1".to_vec()]).await
}

/// [`http1_connection`] with `alpn` offered (none, as kube-rs's HTTP/1 client).
async fn http1_connection_with(
    hub: &TestHub,
    alpn: Vec<Vec<u8>>,
) -> anyhow::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let mut tls = hub.admin_tls()?;
    tls.alpn_protocols = alpn;
    let tcp = tokio::net::TcpStream::connect(hub.url.trim_start_matches("https://")).await?;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1")?;
    Ok(tokio_rustls::TlsConnector::from(Arc::new(tls)).connect(name, tcp).await?)
}

/// Sends one GET on `conn` and reads its response; the status code.
async fn http1_get(
    conn: &mut tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    path: &str,
) -> anyhow::Result<u16> {
    use tokio::io::AsyncWriteExt as _;
    conn.write_all(format!("GET {path} HTTP/1.1\r\nHost: hub\r\n\r\n").as_bytes()).await?;
    http1_response(conn).await
}

/// Reads one response (Content-Length framed) on `conn` to the end; the status code.
async fn http1_response(
    conn: &mut tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
) -> anyhow::Result<u16> {
    use tokio::io::AsyncReadExt as _;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = conn.read(&mut buf).await?;
        ensure!(n > 0, "the connection closed after {} bytes", got.len());
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got);
        let Some(end) = text.find("\r\n\r\n") else { continue };
        let length: usize = text[..end]
            .lines()
            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(str::to_owned))
            .context("no content-length")?
            .trim()
            .parse()?;
        if got.len() >= end + 4 + length {
            return Ok(text[9..12].parse()?);
        }
    }
}

/// Whether the hub closes `conn` within `within` (EOF or reset), reading what it sends.
async fn closes_within(
    conn: &mut tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    within: Duration,
) -> bool {
    use tokio::io::AsyncReadExt as _;
    let mut buf = [0u8; 1024];
    tokio::time::timeout(within, async {
        loop {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickled_head_is_cut_off_and_an_idle_keep_alive_is_kept() -> anyhow::Result<()> {
    use tokio::io::AsyncWriteExt as _;
    let _serial = SERIAL.lock().await;
    let head = Duration::from_secs(1);
    let idle = Duration::from_secs(10);
    let hub = TestHub::start_with(Backend::Memory, |c| {
        c.timeouts = ocm_apiserver::serve::server::Timeouts { head, idle };
    })
    .await?;

    // Idle between requests for longer than the head limit: the connection is kept and serves
    // the next request (an agent's renewals share one TLS session).
    let mut kept = http1_connection(&hub).await?;
    ensure!(http1_get(&mut kept, "/api/v1/namespaces").await? == 200);
    tokio::time::sleep(head * 3).await;
    ensure!(
        http1_get(&mut kept, "/api/v1/namespaces").await? == 200,
        "the keep-alive connection was not kept past the head limit"
    );

    // A head that trickles in, one header line every 200 ms: cut off once the head limit has
    // passed since its first byte, long before the idle limit.
    let mut slow = http1_connection(&hub).await?;
    slow.write_all(b"GET /api/v1/namespaces HTTP/1.1\r\nHost: hub\r\n").await?;
    let mut lines = 0;
    let cut = loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        if slow.write_all(format!("x-slow-{lines}: 1\r\n").as_bytes()).await.is_err() {
            break true;
        }
        lines += 1;
        if closes_within(&mut slow, Duration::from_millis(1)).await {
            break true;
        }
        if lines == 20 {
            break false; // 4 s: past the head limit by far, still short of the idle limit
        }
    };
    ensure!(cut, "a head trickling in for {lines} lines was not cut off");

    // The same applies to a request's second head on a kept connection.
    ensure!(http1_get(&mut kept, "/api/v1/namespaces").await? == 200);
    // (Bytes that arrive before the previous response was finished are not timed: a moment.)
    tokio::time::sleep(Duration::from_millis(100)).await;
    kept.write_all(b"GET /api/v1/namespaces HTTP/1.1\r\n").await?;
    ensure!(closes_within(&mut kept, head * 4).await, "a partial second head was kept");

    // An idle connection is kept until the idle limit, then goes.
    let mut idler = http1_connection(&hub).await?;
    ensure!(http1_get(&mut idler, "/api/v1/namespaces").await? == 200);
    ensure!(!closes_within(&mut idler, idle / 2).await, "an idle connection went early");
    ensure!(closes_within(&mut idler, idle * 2).await, "an idle connection was kept");
    hub.stop().await;
    Ok(())
}

/// The hub's `ocm_http1_parked_connections`, read over HTTP/2 (which is never parked, so the
/// reading itself does not move it).
async fn parked(hub: &TestHub) -> anyhow::Result<f64> {
    let mut send = h2_connection(hub, vec![b"h2".to_vec()]).await?.ready().await?;
    let (resp, _) = send.send_request(request(hub, "/metrics")?, true)?;
    let resp = resp.await?;
    ensure!(resp.status() == 200, "/metrics answered {}", resp.status());
    let mut body = resp.into_body();
    let mut text = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        body.flow_control().release_capacity(chunk.len())?;
        text.extend_from_slice(&chunk);
    }
    let samples = ocm_conformance::prom::samples(&String::from_utf8(text)?)?;
    ocm_conformance::prom::value(&samples, "ocm_http1_parked_connections", &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_http1_connection_lets_go_of_its_state_and_is_served_again() -> anyhow::Result<()> {
    use tokio::io::AsyncWriteExt as _;
    let _serial = SERIAL.lock().await;
    let hub = TestHub::start_with(Backend::Memory, |c| {
        c.timeouts = ocm_apiserver::serve::server::Timeouts {
            head: Duration::from_secs(10),
            idle: Duration::from_secs(20),
        };
    })
    .await?;
    let park = ocm_apiserver::serve::conn::PARK_AFTER;
    let before = parked(&hub).await?;

    // Idle past the parking delay (it parks between one and two delays after its last
    // request): counted as parked, then served on the same TLS session, and no longer parked.
    // No protocol chosen in the handshake, as kube-rs does.
    let mut conn = http1_connection_with(&hub, Vec::new()).await?;
    ensure!(http1_get(&mut conn, "/api/v1/namespaces").await? == 200);
    tokio::time::sleep(park * 2 + Duration::from_millis(500)).await;
    let idle = parked(&hub).await?;
    ensure!(idle == before + 1.0, "parked connections {before} before, {idle} while idle");
    ensure!(http1_get(&mut conn, "/api/v1/namespaces").await? == 200, "not served after parking");
    let busy = parked(&hub).await?;
    ensure!(busy == before, "parked connections {busy} after the request, {before} before");

    // Part of a head, then a pause past the parking delay, then the rest: the bytes read
    // before the pause are not lost.
    conn.write_all(b"GET /api/v1/namespaces HTTP/1.1\r\nHost: hub\r\n").await?;
    tokio::time::sleep(park * 3).await;
    conn.write_all(b"\r\n").await?;
    ensure!(http1_response(&mut conn).await? == 200, "a head split by a pause was not served");
    hub.stop().await;
    Ok(())
}
