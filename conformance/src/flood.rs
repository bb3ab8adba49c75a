//! The HTTP/2 rapid-reset flood (CVE-2023-44487) and the well-behaved client served beside it,
//! shared by the behaviour test (`tests/h2_abuse.rs`: the flood is refused, the good client is
//! served without an error) and the benchmark that measures what it costs (`h2-abuse-bench`:
//! time and memory, `BENCHMARKS.md`). The flood is bounded by a count of requests, never by time.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;

use crate::hub::TestHub;

/// How long the flood waits for a connection to take one more stream before it gives the
/// connection up and opens another (a bound on waiting; a stalled connection is counted).
const READY_WAIT: Duration = Duration::from_secs(2);

/// Fresh connections in a row on which not one stream could be opened before the flood gives
/// up (a hub that refuses every stream is not being flooded).
const FRUITLESS_CONNECTIONS: usize = 10;

/// An HTTP/2 connection to the hub as the admin, spoken with the `h2` crate's client, with `alpn`
/// offered in the TLS handshake (empty: HTTP/2 with prior knowledge).
pub async fn h2_connection(
    hub: &TestHub,
    alpn: Vec<Vec<u8>>,
) -> anyhow::Result<h2::client::SendRequest<Bytes>> {
    let mut tls = hub.admin_tls()?;
    tls.alpn_protocols = alpn;
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

/// A GET of `path` on the hub, for an HTTP/2 connection.
pub fn request(hub: &TestHub, path: &str) -> anyhow::Result<http::Request<()>> {
    Ok(http::Request::get(format!("{}{path}", hub.url)).body(())?)
}

/// What a flood did.
#[derive(Debug, Clone, Copy, Default)]
pub struct Flood {
    /// HEADERS then RST_STREAM pairs sent.
    pub pairs: usize,
    /// Connections the hub closed or refused a new stream on (GOAWAY, reset, EOF).
    pub closed: usize,
    /// Connections given up after waiting [`READY_WAIT`] for a stream.
    pub stalled: usize,
}

/// Sends `pairs` HEADERS then RST_STREAM pairs (a GET of the namespaces, cancelled at once) as
/// fast as the connection takes them; a connection the hub closes, or that stops taking
/// streams, is replaced. Fails when [`FRUITLESS_CONNECTIONS`] fresh connections in a row took
/// no stream at all.
pub async fn rapid_reset(hub: &TestHub, pairs: usize) -> anyhow::Result<Flood> {
    let mut flood = Flood::default();
    let mut fruitless = 0;
    let mut send = h2_connection(hub, vec![b"h2".to_vec()]).await?;
    let mut sent_on_this = 0;
    while flood.pairs < pairs {
        let gone = match tokio::time::timeout(READY_WAIT, send.clone().ready()).await {
            Ok(Ok(mut ready)) => {
                match ready.send_request(request(hub, "/api/v1/namespaces")?, false) {
                    Ok((resp, mut stream)) => {
                        stream.send_reset(h2::Reason::CANCEL);
                        drop(resp);
                        flood.pairs += 1;
                        sent_on_this += 1;
                        continue;
                    }
                    Err(_) => &mut flood.closed,
                }
            }
            Ok(Err(_)) => &mut flood.closed,
            Err(_) => &mut flood.stalled,
        };
        *gone += 1;
        fruitless = if sent_on_this == 0 { fruitless + 1 } else { 0 };
        anyhow::ensure!(
            fruitless < FRUITLESS_CONNECTIONS,
            "{fruitless} fresh connections in a row took no stream ({flood:?})"
        );
        send = h2_connection(hub, vec![b"h2".to_vec()]).await?;
        sent_on_this = 0;
    }
    Ok(flood)
}

/// A well-behaved client: GETs the namespaces every 20 ms over its own connection (reqwest, as
/// the admin) until stopped, recording each answer.
pub struct GoodClient {
    stop: Arc<AtomicBool>,
    record: Arc<Mutex<Served>>,
    task: tokio::task::JoinHandle<()>,
}

/// What the well-behaved client saw.
#[derive(Debug, Clone, Default)]
pub struct Served {
    /// The latency of every request answered 200.
    pub ok: Vec<Duration>,
    /// Every other outcome: the status code, or the error.
    pub failed: Vec<String>,
}

impl GoodClient {
    /// Starts asking.
    pub fn start(hub: &TestHub) -> anyhow::Result<GoodClient> {
        let client = hub.http().context("the well-behaved client")?;
        let url = format!("{}/api/v1/namespaces", hub.url);
        let stop = Arc::new(AtomicBool::new(false));
        let record = Arc::new(Mutex::new(Served::default()));
        let task = {
            let (stop, record) = (Arc::clone(&stop), Arc::clone(&record));
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    let outcome = client.get(&url).send().await.map(|r| r.status().as_u16());
                    let took = started.elapsed();
                    {
                        let mut r = record.lock().unwrap_or_else(PoisonError::into_inner);
                        match outcome {
                            Ok(200) => r.ok.push(took),
                            Ok(code) => r.failed.push(format!("answered {code}")),
                            Err(e) => r.failed.push(format!("{e:#}")),
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
        };
        Ok(GoodClient { stop, record, task })
    }

    /// Stops asking (after the request in flight) and returns what it saw.
    pub async fn stop(self) -> anyhow::Result<Served> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await?;
        Ok(std::mem::take(&mut *self.record.lock().unwrap_or_else(PoisonError::into_inner)))
    }
}
