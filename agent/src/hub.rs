//! Reaching the hub over its REST API with the `kube` client: with the bootstrap token or the
//! agent's certificate, trusting only the hub CA the agent was given (`--ca-file`) or fetched
//! and checked against a pin (`--ca-hash`, kubeadm's `sha256:` of the CA's public key).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use base64::Engine as _;
use serde_json::{Value, json};

use crate::error::AgentError;

/// How long one request to the hub may take.
const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The DER certificates of a PEM bundle.
pub fn pem_certificates(pem: &str) -> Vec<Vec<u8>> {
    x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes())
        .filter_map(Result::ok)
        .filter(|p| p.label == "CERTIFICATE")
        .map(|p| p.contents)
        .collect()
}

/// kubeadm's CA pin: `sha256:` and the hex SHA-256 of the first certificate's DER
/// SubjectPublicKeyInfo.
pub fn ca_hash(pem: &str) -> Option<String> {
    let der = pem_certificates(pem).into_iter().next()?;
    let (_, cert) = x509_parser::parse_x509_certificate(&der).ok()?;
    let digest = ring::digest::digest(&ring::digest::SHA256, cert.tbs_certificate.subject_pki.raw);
    Some(format!(
        "sha256:{}",
        digest.as_ref().iter().map(|b| format!("{b:02x}")).collect::<String>()
    ))
}

fn config(url: &str, ca_pem: Option<&str>, auth: Value) -> Result<kube::Config, AgentError> {
    let uri: http::Uri =
        url.parse().map_err(|_| AgentError::Invalid(format!("--hub {url:?} is not a URL")))?;
    if uri.scheme_str() != Some("https") {
        return Err(AgentError::Invalid(format!("--hub {url:?} must be an https:// URL")));
    }
    let mut config = kube::Config::new(uri);
    match ca_pem {
        Some(pem) => {
            let certs = pem_certificates(pem);
            if certs.is_empty() {
                return Err(AgentError::Invalid("the hub CA is not a PEM certificate".into()));
            }
            config.root_cert = Some(certs);
        }
        None => config.accept_invalid_certs = true,
    }
    config.auth_info =
        serde_json::from_value(auth).map_err(|e| AgentError::Invalid(e.to_string()))?;
    config.connect_timeout = Some(std::time::Duration::from_secs(10));
    config.read_timeout = Some(TIMEOUT);
    config.write_timeout = Some(TIMEOUT);
    Ok(config)
}

fn client(config: kube::Config) -> Result<kube::Client, AgentError> {
    kube::Client::try_from(config).map_err(AgentError::Hub)
}

/// A client that authenticates with a bootstrap token.
pub fn with_token(url: &str, ca_pem: &str, token: &str) -> Result<kube::Client, AgentError> {
    client(config(url, Some(ca_pem), json!({"token": token}))?)
}

/// A client that authenticates with the agent's certificate and key (PEM).
pub fn with_certificate(
    url: &str,
    ca_pem: &str,
    cert_pem: &str,
    key_pem: &str,
) -> Result<kube::Client, AgentError> {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let auth = json!({"client-certificate-data": b64(cert_pem), "client-key-data": b64(key_pem)});
    client(config(url, Some(ca_pem), auth)?)
}

/// [`with_certificate`] over several replicas of one hub (`urls`, in order of preference):
/// requests go to one replica until it cannot be reached, then to the next (a request that
/// could not connect is sent to the next at once; one whose connection broke after it went
/// fails, its fate unknown, and the next request goes elsewhere).
pub fn with_certificate_at(
    urls: &[String],
    ca_pem: &str,
    cert_pem: &str,
    key_pem: &str,
) -> Result<kube::Client, AgentError> {
    match urls {
        [] => Err(AgentError::Invalid("no hub URL".into())),
        [one] => with_certificate(one, ca_pem, cert_pem, key_pem),
        many => {
            let hubs = many
                .iter()
                .map(|url| with_certificate(url, ca_pem, cert_pem, key_pem))
                .collect::<Result<Vec<_>, _>>()?;
            let failover = Failover { hubs: hubs.into(), current: Arc::default() };
            Ok(kube::Client::new(failover, "default"))
        }
    }
}

/// The failover of [`with_certificate_at`]: a client per replica and the one in use.
#[derive(Clone)]
struct Failover {
    hubs: Arc<[kube::Client]>,
    current: Arc<AtomicUsize>,
}

impl tower::Service<http::Request<kube::client::Body>> for Failover {
    type Response = http::Response<kube::client::Body>;
    type Error = kube::Error;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, kube::Error>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), kube::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        let me = self.clone();
        Box::pin(async move { me.send(request).await })
    }
}

impl Failover {
    async fn send(
        &self,
        request: http::Request<kube::client::Body>,
    ) -> Result<http::Response<kube::client::Body>, kube::Error> {
        let (parts, body) = request.into_parts();
        // Bodies the agent sends are small; kept so that a request can go again.
        let body = body.collect_bytes().await?;
        let n = self.hubs.len();
        let mut tries = n;
        loop {
            let at = self.current.load(Ordering::Relaxed) % n;
            let mut again = http::Request::new(kube::client::Body::from(body.clone()));
            *again.method_mut() = parts.method.clone();
            *again.uri_mut() = parts.uri.clone();
            *again.version_mut() = parts.version;
            *again.headers_mut() = parts.headers.clone();
            let error = match self.hubs[at].send(again).await {
                Ok(response) => return Ok(response),
                Err(e @ kube::Error::Api(_)) => return Err(e),
                Err(e) => e,
            };
            let next = (at + 1) % n;
            let _ = self.current.compare_exchange(at, next, Ordering::Relaxed, Ordering::Relaxed);
            tries -= 1;
            if tries == 0 || !never_sent(&error) {
                return Err(error);
            }
            tracing::info!(error = %error_chain(&error), "hub replica unreachable; trying the next");
        }
    }
}

/// Whether a failed request never reached the hub (its connection could not be made).
fn never_sent(error: &kube::Error) -> bool {
    let chain = error_chain(error);
    chain.contains("Connect")
        || chain.contains("connect error")
        || chain.contains("Connection refused")
}

/// Turns a failed request made with the agent's certificate into the error a person can act
/// on (a 401 is the certificate's, not a token's).
pub fn explain_certificate(url: &str, err: kube::Error) -> AgentError {
    match &err {
        kube::Error::Api(s) if s.code == 401 => {
            AgentError::CertificateRefused { url: url.to_owned() }
        }
        _ => explain(url, err),
    }
}

/// Turns a failed hub request made with the bootstrap token into the error a person can act
/// on.
pub fn explain(url: &str, err: kube::Error) -> AgentError {
    match &err {
        kube::Error::Api(s) if s.code == 401 => AgentError::BadToken,
        kube::Error::Api(_) => AgentError::Hub(err),
        _ => {
            let detail = error_chain(&err);
            if detail.contains("certificate") || detail.contains("UnknownIssuer") {
                AgentError::Untrusted { url: url.to_owned(), detail }
            } else {
                AgentError::Unreachable { url: url.to_owned(), detail }
            }
        }
    }
}

/// An error and its sources on one line.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// Fetches the hub's CA from its public `kube-public/cluster-info` (anonymously, before
/// trusting anything) and returns it only if its pin is `expected`.
pub async fn discover_ca(url: &str, expected: &str) -> Result<String, AgentError> {
    let anonymous = client(config(url, None, json!({}))?)?;
    let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(anonymous, "kube-public");
    let cm = cms.get("cluster-info").await.map_err(|e| match e {
        kube::Error::Api(s) => AgentError::Invalid(format!(
            "{url} did not hand out its cluster-info ({} {}): is it an ocm-hub? Use --ca-file instead",
            s.code, s.message
        )),
        other => explain(url, other),
    })?;
    let kubeconfig = cm.data.and_then(|d| d.get("kubeconfig").cloned()).unwrap_or_default();
    let parsed: Value = serde_json::from_str(&kubeconfig)
        .map_err(|_| AgentError::Invalid(format!("{url}'s cluster-info holds no kubeconfig")))?;
    let ca_b64 = parsed
        .pointer("/clusters/0/cluster/certificate-authority-data")
        .and_then(Value::as_str)
        .unwrap_or("");
    let ca_pem = base64::engine::general_purpose::STANDARD
        .decode(ca_b64)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| AgentError::Invalid(format!("{url}'s cluster-info holds no CA")))?;
    // Only the pinned certificate is trusted: a bundle could smuggle in a second CA that the
    // pin does not cover (the fetch itself was not verified).
    if pem_certificates(&ca_pem).len() != 1 {
        return Err(AgentError::Invalid(format!(
            "{url}'s cluster-info holds more than one CA certificate: use --ca-file"
        )));
    }
    let found = ca_hash(&ca_pem).ok_or_else(|| {
        AgentError::Invalid(format!("{url}'s cluster-info CA is not a certificate"))
    })?;
    if !found.eq_ignore_ascii_case(expected) {
        return Err(AgentError::CaMismatch {
            url: url.to_owned(),
            found,
            expected: expected.to_owned(),
        });
    }
    Ok(ca_pem)
}
