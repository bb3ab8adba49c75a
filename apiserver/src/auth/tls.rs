//! The hub's TLS: the rustls server configuration, certificate files re-read when they change
//! (no restart), and the classification of a connection's client certificate. As in
//! kube-apiserver, the handshake only asks for a certificate and checks the client holds its
//! key; whether the chain leads to the client CA (a user) or to the front-proxy CA (an
//! aggregator allowed to name users in headers) is decided afterwards, so an expired or
//! unknown certificate is a 401 with a reason rather than a failed handshake.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};

use crate::auth::pki::PkiError;
use crate::machinery::requester::UserInfo;

/// Where the TLS material comes from; every file is re-read when it changes.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// Serving certificate chain (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
    /// CA bundles whose client certificates authenticate users (CN user, O groups).
    pub client_ca: Vec<PathBuf>,
    /// The front-proxy (requestheader) CA bundle, when the hub runs behind an aggregator.
    pub requestheader_ca: Option<PathBuf>,
    /// Common names a front-proxy certificate may carry (any when empty).
    pub requestheader_allowed_names: Vec<String>,
}

/// A connection's [`Peer`], as every request on it carries it (a request extension).
pub type PeerInfo = Arc<Peer>;

/// What a connection's client certificate turned out to be.
#[derive(Debug, Clone)]
pub enum Peer {
    /// No certificate.
    Anonymous,
    /// A user certificate from the client CA, valid until `not_after` (seconds since the epoch;
    /// checked again on every request of a long connection).
    User {
        /// Who.
        user: Arc<UserInfo>,
        /// Expiry.
        not_after: i64,
    },
    /// A front-proxy certificate: the request headers name the user.
    FrontProxy {
        /// Expiry.
        not_after: i64,
    },
    /// A certificate that authenticates nobody, and why.
    Rejected(String),
}

/// One generation of TLS material.
struct Material {
    serving: Arc<CertifiedKey>,
    client: Arc<dyn ClientCertVerifier>,
    front_proxy: Option<Arc<dyn ClientCertVerifier>>,
}

/// The hub's live TLS state.
pub struct Tls {
    files: TlsFiles,
    provider: Arc<CryptoProvider>,
    material: RwLock<Arc<Material>>,
    stamps: Mutex<Vec<Option<(SystemTime, u64)>>>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("files", &self.files).finish_non_exhaustive()
    }
}

fn read(path: &Path) -> Result<Vec<u8>, PkiError> {
    std::fs::read(path).map_err(|source| PkiError::Io { path: path.to_owned(), source })
}

fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, PkiError> {
    let bytes = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| PkiError::BadPem { path: path.to_owned(), detail: e.to_string() })?;
    if certs.is_empty() {
        return Err(PkiError::BadPem { path: path.to_owned(), detail: "no certificate".into() });
    }
    Ok(certs)
}

fn verifier(
    bundles: &[PathBuf],
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, PkiError> {
    let mut roots = rustls::RootCertStore::empty();
    for path in bundles {
        for ca in certs(path)? {
            roots.add(ca)?;
        }
    }
    Ok(WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(provider))
        .build()?)
}

impl Tls {
    /// Loads the material `files` name.
    pub fn load(files: TlsFiles) -> Result<Arc<Tls>, PkiError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let material = Tls::read_material(&files, &provider)?;
        let tls = Tls {
            stamps: Mutex::new(stamps(&files)),
            files,
            provider,
            material: RwLock::new(Arc::new(material)),
        };
        Ok(Arc::new(tls))
    }

    fn read_material(
        files: &TlsFiles,
        provider: &Arc<CryptoProvider>,
    ) -> Result<Material, PkiError> {
        let chain = certs(&files.cert)?;
        let key_bytes = read(&files.key)?;
        let key = PrivateKeyDer::from_pem_slice(&key_bytes)
            .map_err(|e| PkiError::BadPem { path: files.key.clone(), detail: e.to_string() })?;
        let serving = CertifiedKey::from_der(chain, key, provider)?;
        let client = verifier(&files.client_ca, provider)?;
        let front_proxy = match &files.requestheader_ca {
            Some(path) => Some(verifier(std::slice::from_ref(path), provider)?),
            None => None,
        };
        Ok(Material { serving: Arc::new(serving), client, front_proxy })
    }

    /// Re-reads the files if any changed since the last look; a change that does not load
    /// (half-written files, a key that does not match) keeps the material in use.
    pub fn reload_if_changed(&self) -> Result<bool, PkiError> {
        let now = stamps(&self.files);
        {
            let seen = self.stamps.lock().unwrap_or_else(|e| e.into_inner());
            if *seen == now {
                return Ok(false);
            }
        }
        let material = Tls::read_material(&self.files, &self.provider)?;
        *self.material.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(material);
        *self.stamps.lock().unwrap_or_else(|e| e.into_inner()) = now;
        Ok(true)
    }

    /// Polls the files every `every` until the task is dropped.
    pub async fn watch(self: Arc<Tls>, every: Duration) {
        loop {
            tokio::time::sleep(every).await;
            match self.reload_if_changed() {
                Ok(true) => tracing::info!("TLS certificates reloaded"),
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "TLS certificates changed but do not load; keeping the previous ones")
                }
            }
        }
    }

    fn current(&self) -> Arc<Material> {
        Arc::clone(&self.material.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// The rustls configuration: TLS 1.2 and 1.3, ALPN `h2` and `http/1.1`, the serving
    /// certificate of the moment, client certificates asked for but not required.
    pub fn server_config(self: &Arc<Tls>) -> Result<rustls::ServerConfig, PkiError> {
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::clone(&self.provider))
            .with_safe_default_protocol_versions()?
            .with_client_cert_verifier(Arc::new(AskForCertificate {
                algorithms: self.provider.signature_verification_algorithms,
            }))
            .with_cert_resolver(Arc::new(Resolver(Arc::clone(self))));
        // The cluster proxy's tunnel is chosen only by agents that ask for it
        // (`serve::tunnel`); every other client gets HTTP.
        config.alpn_protocols =
            vec![b"h2".to_vec(), b"http/1.1".to_vec(), ocm_proto::tunnel::ALPN.to_vec()];
        Ok(config)
    }

    /// What a presented chain (leaf first) authenticates, now.
    pub fn classify(&self, chain: Option<&[CertificateDer<'_>]>) -> Peer {
        let Some((leaf, intermediates)) = chain.and_then(|c| c.split_first()) else {
            return Peer::Anonymous;
        };
        let Some(subject) = Subject::of(leaf.as_ref()) else {
            return Peer::Rejected("the client certificate does not parse".into());
        };
        let not_after = subject.not_after;
        let material = self.current();
        let now = UnixTime::now();
        let client = material.client.verify_client_cert(leaf, intermediates, now);
        if client.is_ok() {
            return match subject.user() {
                Some(user) => Peer::User { user: Arc::new(user), not_after },
                None => Peer::Rejected("the client certificate has no common name".into()),
            };
        }
        if let Some(front) = &material.front_proxy {
            if front.verify_client_cert(leaf, intermediates, now).is_ok() {
                let allowed = &self.files.requestheader_allowed_names;
                let cn = subject.common_name;
                if allowed.is_empty() || allowed.contains(&cn) {
                    return Peer::FrontProxy { not_after };
                }
                return Peer::Rejected(format!(
                    "front-proxy certificate CN {cn:?} is not in the allowed names"
                ));
            }
        }
        let why = client.err().map(|e| e.to_string()).unwrap_or_default();
        Peer::Rejected(format!("verifying the client certificate: {why}"))
    }
}

/// Modification time and length of each file, to notice changes.
fn stamps(files: &TlsFiles) -> Vec<Option<(SystemTime, u64)>> {
    let mut paths = vec![&files.cert, &files.key];
    paths.extend(files.client_ca.iter());
    paths.extend(files.requestheader_ca.iter());
    paths
        .into_iter()
        .map(|p| std::fs::metadata(p).ok().and_then(|m| Some((m.modified().ok()?, m.len()))))
        .collect()
}

/// What a certificate says about its holder, read in one parse.
struct Subject {
    common_name: String,
    organizations: Vec<String>,
    /// Seconds since the epoch.
    not_after: i64,
}

impl Subject {
    fn of(der: &[u8]) -> Option<Subject> {
        let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
        let subject = cert.subject();
        let common_name = subject
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .unwrap_or_default()
            .to_owned();
        let organizations = subject
            .iter_organization()
            .filter_map(|o| o.as_str().ok())
            .map(str::to_owned)
            .collect();
        Some(Subject {
            common_name,
            organizations,
            not_after: cert.validity().not_after.timestamp(),
        })
    }

    /// Kubernetes' x509 user: CN is the user, each O a group, plus `system:authenticated`.
    /// `None` without a CN.
    fn user(self) -> Option<UserInfo> {
        if self.common_name.is_empty() {
            return None;
        }
        let mut groups = self.organizations;
        groups.push(crate::auth::authz::AUTHENTICATED_GROUP.to_owned());
        Some(UserInfo { name: self.common_name, groups, ..Default::default() })
    }
}

/// The user a client certificate (DER) names, as Kubernetes' x509 authenticator reads it.
pub fn user_from_certificate(der: &[u8]) -> Option<UserInfo> {
    Subject::of(der)?.user()
}

/// Serves the certificate of the moment.
#[derive(Debug)]
struct Resolver(Arc<Tls>);

impl ResolvesServerCert for Resolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(&self.0.current().serving))
    }
}

/// Asks for a client certificate without requiring one and checks the handshake signature
/// (the client holds the key); the chain itself is judged by [`Tls::classify`].
#[derive(Debug)]
struct AskForCertificate {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for AskForCertificate {
    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
