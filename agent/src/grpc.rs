//! The agent's end of OCM's CloudEvents protocol (ocm.md §8): one HTTP/2 connection over rustls
//! to the hub's gRPC listener, authenticated by the agent's client certificate (read again at
//! every connect, so a rotated certificate is used from the next connection on), and the
//! tonic client of `CloudEventService` on it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use ocm_proto::cloudevents::v1::cloud_event_service_client::CloudEventServiceClient;
use ocm_proto::cloudevents::v1::{CloudEvent, PublishRequest, SubscriptionRequest};

use crate::error::AgentError;

/// How long a connection attempt (TCP, TLS, HTTP/2) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Requests over one HTTP/2 connection, as tonic's client wants them.
#[derive(Clone)]
pub struct H2(hyper::client::conn::http2::SendRequest<tonic::body::Body>);

impl tower::Service<http::Request<tonic::body::Body>> for H2 {
    type Response = http::Response<hyper::body::Incoming>;
    type Error = hyper::Error;
    type Future =
        Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send + 'static>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        Box::pin(self.0.send_request(req))
    }
}

/// A connected client.
pub type Client = CloudEventServiceClient<H2>;

/// Where and how to reach the hub's gRPC server.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// `https://host:port`.
    pub url: String,
    /// The hub's CA (PEM).
    pub ca_pem: String,
}

impl Endpoint {
    /// Connects with the client certificate and key `cert_pem`, `key_pem`.
    pub async fn connect(&self, cert_pem: &str, key_pem: &str) -> Result<Client, AgentError> {
        tokio::time::timeout(CONNECT_TIMEOUT, self.connect_now(cert_pem, key_pem)).await.map_err(
            |_| AgentError::Unreachable {
                url: self.url.clone(),
                detail: "connecting timed out".into(),
            },
        )?
    }

    async fn connect_now(&self, cert_pem: &str, key_pem: &str) -> Result<Client, AgentError> {
        let uri: http::Uri = self
            .url
            .parse()
            .map_err(|e| AgentError::Invalid(format!("gRPC server {:?}: {e}", self.url)))?;
        let tls = tls_connect(&self.url, &self.ca_pem, cert_pem, key_pem, b"h2").await?;
        let unreachable = |e: &dyn std::fmt::Display| AgentError::Unreachable {
            url: self.url.clone(),
            detail: e.to_string(),
        };
        let (send, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            // OCM's client keepalive: a ping every 30 s, 10 s to answer, also while idle.
            .keep_alive_interval(Duration::from_secs(30))
            .keep_alive_timeout(Duration::from_secs(10))
            .keep_alive_while_idle(true)
            .handshake(TokioIo::new(tls))
            .await
            .map_err(|e| unreachable(&e))?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "gRPC connection ended");
            }
        });
        Ok(CloudEventServiceClient::with_origin(H2(send), uri))
    }
}

/// A TLS connection to `url` (`https://host:port`) that trusts only `ca_pem`, authenticated
/// by the agent's certificate and key, offering the one ALPN protocol `alpn` (the gRPC
/// stream's `h2`, the cluster proxy tunnel's own).
pub(crate) async fn tls_connect(
    url: &str,
    ca_pem: &str,
    cert_pem: &str,
    key_pem: &str,
    alpn: &[u8],
) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, AgentError> {
    let uri: http::Uri =
        url.parse().map_err(|e| AgentError::Invalid(format!("hub URL {url:?}: {e}")))?;
    let host = uri.host().unwrap_or_default().trim_matches(['[', ']']).to_owned();
    let port = uri.port_u16().unwrap_or(443);
    let config = tls_config(ca_pem, cert_pem, key_pem, alpn)?;
    let unreachable = |e: &dyn std::fmt::Display| AgentError::Unreachable {
        url: url.to_owned(),
        detail: e.to_string(),
    };
    let tcp =
        tokio::net::TcpStream::connect((host.as_str(), port)).await.map_err(|e| unreachable(&e))?;
    let _ = tcp.set_nodelay(true);
    let name = rustls::pki_types::ServerName::try_from(host.clone())
        .map_err(|e| AgentError::Invalid(format!("hub server name {host:?}: {e}")))?;
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| unreachable(&e))
}

fn tls_config(
    ca_pem: &str,
    cert_pem: &str,
    key_pem: &str,
    alpn: &[u8],
) -> Result<rustls::ClientConfig, AgentError> {
    let invalid = |what: &str, e: &dyn std::fmt::Display| {
        AgentError::Invalid(format!("the agent's {what} for gRPC: {e}"))
    };
    let mut roots = rustls::RootCertStore::empty();
    for der in crate::hub::pem_certificates(ca_pem) {
        roots.add(der.into()).map_err(|e| invalid("hub CA", &e))?;
    }
    let chain: Vec<rustls::pki_types::CertificateDer<'static>> =
        crate::hub::pem_certificates(cert_pem).into_iter().map(Into::into).collect();
    use rustls::pki_types::pem::PemObject as _;
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
        .map_err(|e| invalid("key", &e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid("TLS versions", &e))?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .map_err(|e| invalid("certificate", &e))?;
    config.alpn_protocols = vec![alpn.to_vec()];
    Ok(config)
}

/// Why a gRPC call failed, as an agent error (unreachable unless the hub refused it).
pub fn status_error(s: tonic::Status) -> AgentError {
    use tonic::Code;
    match s.code() {
        Code::Unavailable | Code::Unknown | Code::DeadlineExceeded | Code::Cancelled => {
            AgentError::Unreachable { url: "the gRPC server".into(), detail: s.message().into() }
        }
        code => AgentError::GrpcRefused { code: format!("{code:?}"), message: s.message().into() },
    }
}

/// Publishes one event.
pub async fn publish(client: &Client, event: CloudEvent) -> Result<(), AgentError> {
    client.clone().publish(PublishRequest { event: Some(event) }).await.map_err(status_error)?;
    Ok(())
}

/// Subscribes to `data_type` for `cluster`: the stream of events, once the hub named the
/// subscription.
pub async fn subscribe(
    client: &Client,
    cluster: &str,
    data_type: &str,
) -> Result<tonic::Streaming<CloudEvent>, AgentError> {
    let req = SubscriptionRequest {
        source: String::new(),
        cluster_name: cluster.to_owned(),
        data_type: data_type.to_owned(),
    };
    let resp = client.clone().subscribe(req).await.map_err(status_error)?;
    // OCM's clients treat an answer without it as failure.
    if resp.metadata().get(ocm_proto::cloudevents::SUBSCRIPTION_ID).is_none() {
        return Err(AgentError::GrpcRefused {
            code: "Subscribe".into(),
            message: "the answer named no subscription".into(),
        });
    }
    Ok(resp.into_inner())
}
