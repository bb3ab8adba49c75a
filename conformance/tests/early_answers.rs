//! Answers the hub gives before it reads a request body (413 over the body limit, 401 to a
//! client without credentials) reach clients that write their whole body before they read:
//! a raw HTTP/1.1 client (the connection kept when the rest of the body was read, else closed
//! with `Connection: close` and a TLS close_notify, never a reset), Python's requests over
//! urllib3, and curl over HTTP/2 (which fails on a stream reset during its upload).

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context as _, ensure};
use ocm_conformance::hub::{Backend, TestHub};
use ocm_conformance::programs;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// One hub at a time: each test writes tens of MiB through it.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const MIB: usize = 1024 * 1024;

/// A body over the limit by more than an HTTP/2 stream window (1 MiB): the hub reads the rest
/// and keeps the connection.
const A_LITTLE_OVER: usize = 5 * MIB;

/// A body far over the limit: more than the hub reads after its answer, so it closes.
const FAR_OVER: usize = 16 * MIB;

/// Where the bodies are sent.
const PATH: &str = "/api/v1/namespaces/default/configmaps";

type Conn = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

/// A ConfigMap whose JSON is about `size` bytes.
fn config_map(size: usize) -> Vec<u8> {
    let head = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{"x":""#;
    let mut body = head.to_vec();
    body.resize(size.max(head.len()), b'a');
    body.extend_from_slice(br#""}}"#);
    body
}

/// An HTTP/1.1 connection to the hub, as the admin or without a client certificate.
async fn connect(hub: &TestHub, admin: bool) -> anyhow::Result<Conn> {
    let mut tls = if admin {
        hub.admin_tls()?
    } else {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(hub.path().join("pki/ca.crt"))? {
            roots.add(cert?)?;
        }
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth()
    };
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tcp = tokio::net::TcpStream::connect(hub.url.trim_start_matches("https://")).await?;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1")?;
    Ok(tokio_rustls::TlsConnector::from(Arc::new(tls)).connect(name, tcp).await?)
}

/// One response: status, head (lower-cased), body.
struct Answer {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Answer {
    fn closes(&self) -> bool {
        self.head.lines().any(|l| l.starts_with("connection:") && l.contains("close"))
    }

    fn status_reason(&self) -> anyhow::Result<String> {
        let status: Value = serde_json::from_slice(&self.body)
            .with_context(|| format!("not a Status: {}", String::from_utf8_lossy(&self.body)))?;
        ensure!(status["kind"] == "Status", "{status}");
        Ok(status["reason"].as_str().unwrap_or_default().to_owned())
    }
}

/// Writes the whole POST (head and body) before reading anything, as Python's clients do,
/// then reads the response.
async fn post_then_read(conn: &mut Conn, body: &[u8]) -> anyhow::Result<Answer> {
    let head = format!(
        "POST {PATH} HTTP/1.1\r\nHost: hub\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).await?;
    conn.write_all(body).await.context("writing the body")?;
    conn.flush().await?;
    read_answer(conn).await
}

/// Reads one Content-Length framed response.
async fn read_answer(conn: &mut Conn) -> anyhow::Result<Answer> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        if let Some(at) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = conn.read(&mut buf).await.context("reading the response head")?;
        ensure!(n > 0, "the connection closed before a response: {got:?}");
        got.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).context("no status")?;
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .context("no content-length")?;
    let mut body = got[end..].to_vec();
    while body.len() < length {
        let n = conn.read(&mut buf).await.context("reading the response body")?;
        ensure!(n > 0, "the connection closed inside the body");
        body.extend_from_slice(&buf[..n]);
    }
    Ok(Answer { status, head, body })
}

/// The connection ends with the hub's TLS close_notify (a reset or a bare EOF is an error).
async fn closes_cleanly(conn: &mut Conn) -> anyhow::Result<()> {
    let mut rest = Vec::new();
    conn.read_to_end(&mut rest).await.context("the hub did not close with close_notify")?;
    ensure!(rest.is_empty(), "bytes after the answer: {rest:?}");
    Ok(())
}

/// Posts `body` over a fresh connection; checks the answer, and then that the connection is
/// kept (a GET answered on it) or closed cleanly, as `kept` says.
async fn answered(
    hub: &TestHub,
    admin: bool,
    size: usize,
    code: u16,
    reason: &str,
    kept: bool,
) -> anyhow::Result<()> {
    let mut conn = connect(hub, admin).await?;
    let answer = post_then_read(&mut conn, &config_map(size)).await?;
    ensure!(answer.status == code, "{size} bytes: {} {}", answer.status, answer.head);
    ensure!(answer.status_reason()? == reason, "{size} bytes");
    ensure!(answer.closes() != kept, "{size} bytes, kept {kept}: {}", answer.head);
    if kept {
        conn.write_all(b"GET /version HTTP/1.1\r\nHost: hub\r\n\r\n").await?;
        let next = read_answer(&mut conn).await.context("a request after the answer")?;
        ensure!(next.status == 200, "{}", next.head);
    } else {
        closes_cleanly(&mut conn).await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_body_gets_its_413_over_http1() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let hub = TestHub::start(Backend::Memory).await?;
    answered(&hub, true, A_LITTLE_OVER, 413, "RequestEntityTooLarge", true).await?;
    answered(&hub, true, FAR_OVER, 413, "RequestEntityTooLarge", false).await?;
    hub.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unauthenticated_post_with_a_large_body_gets_its_401() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let hub = TestHub::start(Backend::Memory).await?;
    answered(&hub, false, MIB, 401, "Unauthorized", true).await?;
    answered(&hub, false, FAR_OVER, 401, "Unauthorized", false).await?;
    hub.stop().await;
    Ok(())
}

/// Python's requests (over urllib3): writes the whole body, then reads; prints the status and
/// the Status reason, or the exception it met.
const PYTHON_POST: &str = r#"
import json, sys
import requests
url, ca, cert, key, size = sys.argv[1:6]
body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"},
                   "data": {"x": "a" * int(size)}})
try:
    r = requests.post(url, data=body, headers={"Content-Type": "application/json"}, verify=ca,
                      cert=(cert, key) if cert else None, timeout=60)
    print(r.status_code, r.json().get("reason"))
except Exception as e:
    print("error", type(e).__name__, e)
"#;

/// What [`PYTHON_POST`] printed.
fn python_post(python: &Path, hub: &TestHub, admin: bool, size: usize) -> anyhow::Result<String> {
    let pki = hub.path().join("pki");
    let (cert, key) =
        if admin { (pki.join("admin.crt"), pki.join("admin.key")) } else { Default::default() };
    let out = std::process::Command::new(python)
        .args(["-c", PYTHON_POST, &format!("{}{PATH}", hub.url)])
        .arg(pki.join("ca.crt"))
        .args([&cert, &key])
        .arg(size.to_string())
        .output()?;
    ensure!(out.status.success(), "python3: {}", String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_requests_reads_early_answers() -> anyhow::Result<()> {
    let python = programs::required("python3", "OCM_PYTHON3", "python3 with requests")?;
    let _serial = SERIAL.lock().await;
    let hub = TestHub::start(Backend::Memory).await?;
    let cases = [
        (true, A_LITTLE_OVER, "413 RequestEntityTooLarge"),
        (true, FAR_OVER, "413 RequestEntityTooLarge"),
        (false, FAR_OVER, "401 Unauthorized"),
    ];
    for (admin, size, want) in cases {
        let got = tokio::task::block_in_place(|| python_post(&python, &hub, admin, size))?;
        ensure!(got == want, "admin {admin}, {size} bytes: python saw {got:?}, not {want:?}");
    }
    hub.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_over_http2_reads_the_413() -> anyhow::Result<()> {
    let curl = programs::required("curl", "OCM_CURL", "curl (with HTTP/2)")?;
    let _serial = SERIAL.lock().await;
    let hub = TestHub::start(Backend::Memory).await?;
    let pki = hub.path().join("pki");
    let body = hub.path().join("body.json");
    std::fs::write(&body, config_map(A_LITTLE_OVER))?;
    let out = tokio::task::block_in_place(|| {
        std::process::Command::new(&curl)
            .args(["-sS", "--http2", "-H", "Content-Type: application/json"])
            .arg("--cacert")
            .arg(pki.join("ca.crt"))
            .arg("--cert")
            .arg(pki.join("admin.crt"))
            .arg("--key")
            .arg(pki.join("admin.key"))
            .arg("--data-binary")
            .arg(format!("@{}", body.display()))
            .args(["-w", "\n%{http_code} %{http_version}", &format!("{}{PATH}", hub.url)])
            .output()
    })?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure!(
        out.status.success(),
        "curl failed ({}): {} {stdout}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let (status, tail) = stdout.rsplit_once('\n').context("no status line")?;
    ensure!(tail == "413 2", "curl saw {tail:?}");
    let status: Value = serde_json::from_str(status)?;
    ensure!(status["reason"] == "RequestEntityTooLarge", "{status}");
    hub.stop().await;
    Ok(())
}
