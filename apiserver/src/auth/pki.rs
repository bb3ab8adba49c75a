//! The hub's PKI under its data dir: a CA kept across restarts, a serving certificate re-issued
//! at every start for the addresses it listens on, the admin client certificate, the
//! `admin.kubeconfig` that carries them, and the rustls server configuration built from them.

use std::fs;
use std::io;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyIdMethod, KeyPair, KeyUsagePurpose, SanType,
};
use time::{Duration, OffsetDateTime};

/// The user the admin certificate names; its group is `system:masters`.
pub const ADMIN_USER: &str = "ocm-admin";
/// The group of the admin certificate (Kubernetes' superuser group).
pub const ADMIN_GROUP: &str = crate::auth::authz::MASTERS_GROUP;

/// A PKI failure.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// Reading or writing a file under the data dir failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Generating, parsing or signing a certificate or key failed.
    #[error("certificate {what}: {source}")]
    Cert {
        /// Which certificate.
        what: &'static str,
        /// Why.
        source: rcgen::Error,
    },
    /// A stored PEM file does not hold what it should.
    #[error("{path}: {detail}")]
    BadPem {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// rustls refused the material.
    #[error("TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    /// The client verifier could not be built.
    #[error("TLS client verifier: {0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
}

/// The kubeadm-style pin (`sha256:<hex>` of the SubjectPublicKeyInfo) of the first certificate
/// in `pem`.
pub fn ca_hash_of(pem: &str) -> Option<String> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).ok()?;
    let cert = pem.parse_x509().ok()?;
    let digest = ring::digest::digest(&ring::digest::SHA256, cert.tbs_certificate.subject_pki.raw);
    Some(format!(
        "sha256:{}",
        digest.as_ref().iter().map(|b| format!("{b:02x}")).collect::<String>()
    ))
}

/// Why a certificate request was not signed.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// The request itself is unacceptable (unreadable, bad signature, unsupported subject).
    #[error("{0}")]
    Request(String),
    /// The signer failed.
    #[error("signing failed: {0}")]
    Signer(String),
}

/// A subject of one CN and at most two Os. rcgen keeps one value per attribute type, so a
/// second O goes in under its OID as a custom type: it encodes the same (`2.5.4.10`), and
/// readers see two Os.
pub fn subject(cn: &str, groups: &[&str]) -> Result<DistinguishedName, SignError> {
    if groups.len() > 2 {
        return Err(SignError::Request(format!(
            "the subject names {} organizations; this signer supports at most 2",
            groups.len()
        )));
    }
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    if let Some(first) = groups.first() {
        dn.push(DnType::OrganizationName, *first);
    }
    if let Some(second) = groups.get(1) {
        dn.push(DnType::CustomDnType(vec![2, 5, 4, 10]), *second);
    }
    Ok(dn)
}

/// The CN and Os of a certificate request (DER); any other subject attribute, a missing or
/// repeated CN, or a group that is `system:masters` is refused.
pub fn request_subject(der: &[u8]) -> Result<(String, Vec<String>), SignError> {
    use x509_parser::prelude::FromDer;
    let (_, req) = x509_parser::certification_request::X509CertificationRequest::from_der(der)
        .map_err(|_| SignError::Request("the request is not a PKCS#10 request".into()))?;
    let subject = &req.certification_request_info.subject;
    let mut cn = Vec::new();
    let mut groups = Vec::new();
    for rdn in subject.iter() {
        for attr in rdn.iter() {
            let value = attr
                .as_str()
                .map_err(|_| SignError::Request("a subject attribute is not a string".into()))?
                .to_owned();
            let oid = attr.attr_type();
            if *oid == x509_parser::oid_registry::OID_X509_COMMON_NAME {
                cn.push(value);
            } else if *oid == x509_parser::oid_registry::OID_X509_ORGANIZATION_NAME {
                groups.push(value);
            } else {
                return Err(SignError::Request(format!(
                    "the subject has attribute {oid}; only CN and O are supported"
                )));
            }
        }
    }
    let [cn] = <[String; 1]>::try_from(cn)
        .map_err(|_| SignError::Request("the subject must have exactly one CN".into()))?;
    if cn.is_empty() {
        return Err(SignError::Request("the subject's CN is empty".into()));
    }
    if groups.iter().any(|g| g == crate::auth::authz::MASTERS_GROUP) {
        return Err(SignError::Request(format!(
            "the subject names group {}; this signer never issues it",
            crate::auth::authz::MASTERS_GROUP
        )));
    }
    Ok((cn, groups))
}

/// Signs a client certificate request (PEM) with `issuer` as a client-certificate signer does:
/// the request's signature is checked, its subject (one CN, at most two Os) and public key are
/// kept, the usages are client authentication, and it is valid from five minutes ago until
/// `not_after`. Returns the certificate (PEM).
fn sign_request<K: rcgen::SigningKey>(
    issuer: &Issuer<'_, K>,
    request_pem: &str,
    not_after: OffsetDateTime,
) -> Result<String, SignError> {
    let der = <rustls::pki_types::CertificateSigningRequestDer as rustls::pki_types::pem::PemObject>::from_pem_slice(
        request_pem.as_bytes(),
    )
    .map_err(|_| SignError::Request("spec.request is not a PEM CERTIFICATE REQUEST".into()))?;
    let (cn, groups) = request_subject(der.as_ref())?;
    let mut request = rcgen::CertificateSigningRequestParams::from_der(&der)
        .map_err(|e| SignError::Request(format!("the request cannot be read: {e}")))?;
    let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
    let params = &mut request.params;
    params.distinguished_name = subject(&cn, &groups)?;
    params.subject_alt_names.clear();
    leaf(params);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.not_before = crate::machinery::clock::now() - Duration::minutes(5);
    params.not_after = not_after;
    params.serial_number = Some(rcgen::SerialNumber::from_slice(&rand::random::<[u8; 16]>()));
    let cert = request.signed_by(issuer).map_err(|e| SignError::Signer(e.to_string()))?;
    Ok(cert.pem())
}

/// Signs a client certificate request (PEM) with another CA than the hub's (an add-on's
/// custom signer): its certificate and key (PKCS#8 or PKCS#1), PEM. Valid until `not_after`.
pub fn sign_with_ca(
    ca_cert_pem: &str,
    ca_key_pem: &str,
    request_pem: &str,
    not_after: OffsetDateTime,
) -> Result<String, SignError> {
    let key = KeyPair::from_pem(ca_key_pem)
        .map_err(|e| SignError::Signer(format!("the signing CA's key cannot be read: {e}")))?;
    let issuer = Issuer::from_ca_cert_pem(ca_cert_pem, key).map_err(|e| {
        SignError::Signer(format!("the signing CA's certificate cannot be read: {e}"))
    })?;
    sign_request(&issuer, request_pem, not_after)
}

/// The Subject Key Identifier of `cert`, if it has one.
fn subject_key_id(cert: &x509_parser::certificate::X509Certificate<'_>) -> Option<Vec<u8>> {
    cert.extensions().iter().find_map(|ext| match ext.parsed_extension() {
        x509_parser::extensions::ParsedExtension::SubjectKeyIdentifier(id) => Some(id.0.to_vec()),
        _ => None,
    })
}

/// Whether the first certificate in `pem` carries both a Subject and an Authority Key
/// Identifier.
fn has_key_ids(pem: &str) -> bool {
    let Ok((_, pem)) = x509_parser::pem::parse_x509_pem(pem.as_bytes()) else { return false };
    let Ok(cert) = pem.parse_x509() else { return false };
    let aki = cert.extensions().iter().any(|ext| {
        matches!(
            ext.parsed_extension(),
            x509_parser::extensions::ParsedExtension::AuthorityKeyIdentifier(_)
        )
    });
    aki && subject_key_id(&cert).is_some()
}

/// The hub's certificates, loaded or created under `DIR/pki`.
pub struct Pki {
    dir: PathBuf,
    /// The CA certificate (PEM), which clients trust and which signs client certificates.
    pub ca_pem: String,
    ca_key: KeyPair,
    /// The end of the CA certificate's validity: nothing it signs outlives it.
    ca_not_after: OffsetDateTime,
    /// The CA's key identifier, which every certificate it signs names as its Authority Key
    /// Identifier: the CA certificate's Subject Key Identifier, or, for a CA certificate
    /// without one, the identifier rcgen would give its key.
    ca_key_id: Vec<u8>,
}

impl std::fmt::Debug for Pki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pki").field("dir", &self.dir).finish_non_exhaustive()
    }
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> PkiError + '_ {
    move |source| PkiError::Io { path: path.to_owned(), source }
}

fn cert_err(what: &'static str) -> impl FnOnce(rcgen::Error) -> PkiError {
    move |source| PkiError::Cert { what, source }
}

/// Writes `contents` to `path` atomically (temp file + rename), private when `secret`.
pub(crate) fn write_file(path: &Path, contents: &str, secret: bool) -> Result<(), PkiError> {
    let tmp = path.with_extension("tmp");
    {
        use std::io::Write as _;
        let mut opts = fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        if secret {
            use std::os::unix::fs::OpenOptionsExt as _;
            opts.mode(0o600);
        }
        #[cfg(not(unix))]
        let _ = secret;
        let mut f = opts.open(&tmp).map_err(io_err(&tmp))?;
        f.write_all(contents.as_bytes()).map_err(io_err(&tmp))?;
        f.sync_all().map_err(io_err(&tmp))?;
    }
    fs::rename(&tmp, path).map_err(io_err(path))
}

/// The stored CA certificate (PEM) and key of a `pki` directory.
fn read_ca(dir: &Path) -> Result<(String, KeyPair), PkiError> {
    let crt = dir.join("ca.crt");
    let key_path = dir.join("ca.key");
    let pem = fs::read_to_string(&crt).map_err(io_err(&crt))?;
    let key_pem = fs::read_to_string(&key_path).map_err(io_err(&key_path))?;
    Ok((pem, KeyPair::from_pem(&key_pem).map_err(cert_err("CA key"))?))
}

fn validity(params: &mut CertificateParams, days: i64) {
    let now = crate::machinery::clock::now();
    params.not_before = now - Duration::minutes(5);
    params.not_after = now + Duration::days(days);
}

/// Marks `params` as an end-entity certificate as current TLS stacks require (Python 3.13's
/// default `VERIFY_X509_STRICT`, urllib3 2.3+): critical basicConstraints `CA:FALSE`, a Subject
/// Key Identifier, and an Authority Key Identifier naming the issuer's SKI.
fn leaf(params: &mut CertificateParams) {
    params.is_ca = IsCa::ExplicitNoCa;
    params.use_authority_key_identifier_extension = true;
}

/// The CA's parameters: critical basicConstraints `CA:TRUE`, keyCertSign, a Subject Key
/// Identifier (a truncated SHA-256 of its public key, rcgen's method) and, self-signed, an
/// Authority Key Identifier equal to it.
fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "ocm-hub-ca");
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.use_authority_key_identifier_extension = true;
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    validity(&mut params, 3650);
    params
}

impl Pki {
    /// Loads the CA from `data_dir/pki` (creating it on first start), issues a fresh serving
    /// certificate for `hosts` (DNS names or IP addresses) and makes sure the admin client
    /// certificate exists.
    pub fn load_or_create(data_dir: &Path, hosts: &[String]) -> Result<Pki, PkiError> {
        let dir = data_dir.join("pki");
        fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        let ca_crt = dir.join("ca.crt");
        let ca_key_path = dir.join("ca.key");
        let (ca_pem, ca_key) = if ca_crt.exists() && ca_key_path.exists() {
            read_ca(&dir)?
        } else {
            let key = KeyPair::generate().map_err(cert_err("CA key"))?;
            let cert = ca_params().self_signed(&key).map_err(cert_err("CA"))?;
            write_file(&ca_key_path, &key.serialize_pem(), true)?;
            write_file(&ca_crt, &cert.pem(), false)?;
            (cert.pem(), key)
        };
        let pki = Pki::new(dir, ca_pem, ca_key)?;
        let (crt, key) = pki.issue_serving(hosts)?;
        // The key first: a reload that sees the new certificate sees its key.
        write_file(&pki.dir.join("serving.key"), &key, true)?;
        write_file(&pki.dir.join("serving.crt"), &crt, false)?;
        // An admin certificate issued before certificates carried key identifiers is issued
        // again (the kubeconfig that embeds it is rewritten at every start).
        let admin = fs::read_to_string(pki.dir.join("admin.crt")).ok();
        if !admin.as_deref().is_some_and(has_key_ids) || !pki.dir.join("admin.key").exists() {
            let (crt, key) = pki.issue_client(ADMIN_USER, Some(ADMIN_GROUP), 365)?;
            write_file(&pki.dir.join("admin.key"), &key, true)?;
            write_file(&pki.dir.join("admin.crt"), &crt, false)?;
        }
        Ok(pki)
    }

    /// Opens an existing CA in `data_dir/pki` without writing anything (to issue client
    /// certificates for a running hub: tests, `ocm-hub` tooling).
    pub fn open(data_dir: &Path) -> Result<Pki, PkiError> {
        let dir = data_dir.join("pki");
        let (ca_pem, ca_key) = read_ca(&dir)?;
        Pki::new(dir, ca_pem, ca_key)
    }

    /// The CA's public key pin as kubeadm writes it (`--discovery-token-ca-cert-hash`):
    /// `sha256:` and the hex SHA-256 of its DER SubjectPublicKeyInfo.
    pub fn ca_hash(&self) -> Result<String, PkiError> {
        ca_hash_of(&self.ca_pem).ok_or_else(|| PkiError::BadPem {
            path: self.dir.join("ca.crt"),
            detail: "not an X.509 certificate".into(),
        })
    }

    fn new(dir: PathBuf, ca_pem: String, ca_key: KeyPair) -> Result<Pki, PkiError> {
        let bad =
            |detail: &str| PkiError::BadPem { path: dir.join("ca.crt"), detail: detail.into() };
        let (_, pem) = x509_parser::pem::parse_x509_pem(ca_pem.as_bytes())
            .map_err(|_| bad("not a PEM certificate"))?;
        let cert = pem.parse_x509().map_err(|_| bad("not an X.509 certificate"))?;
        let ca_not_after = cert.validity().not_after.to_datetime();
        let ca_key_id =
            subject_key_id(&cert).unwrap_or_else(|| ca_params().key_identifier(&ca_key));
        Ok(Pki { dir, ca_pem, ca_key, ca_not_after, ca_key_id })
    }

    /// The CA as an issuer: same subject, key and key identifier as the stored CA certificate,
    /// which is all a signature, its issuer name and its Authority Key Identifier depend on.
    fn issuer(&self) -> Result<Issuer<'_, &KeyPair>, PkiError> {
        let mut params = ca_params();
        params.key_identifier_method = KeyIdMethod::PreSpecified(self.ca_key_id.clone());
        Ok(Issuer::new(params, &self.ca_key))
    }

    fn issue_serving(&self, hosts: &[String]) -> Result<(String, String), PkiError> {
        let mut names: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
        for h in hosts {
            if !h.is_empty() && !names.contains(h) {
                names.push(h.clone());
            }
        }
        let mut params = CertificateParams::default();
        params.subject_alt_names = names
            .iter()
            .map(|n| match n.parse::<IpAddr>() {
                Ok(ip) => Ok(SanType::IpAddress(ip)),
                Err(_) => n.clone().try_into().map(SanType::DnsName),
            })
            .collect::<Result<_, _>>()
            .map_err(cert_err("serving SAN"))?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, "ocm-hub");
        params.distinguished_name = dn;
        leaf(&mut params);
        params.key_usages =
            vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        validity(&mut params, 365);
        let key = KeyPair::generate().map_err(cert_err("serving key"))?;
        let cert = params.signed_by(&key, &self.issuer()?).map_err(cert_err("serving"))?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    /// Signs a client certificate request (PEM) as the `kubernetes.io/kube-apiserver-client`
    /// signer does: the request's signature is checked, its subject (one CN, at most two Os)
    /// and public key are kept, the usages are client authentication, and it is valid from five
    /// minutes ago until `not_after` (never past the CA's own end). Returns the certificate (PEM).
    pub fn sign_client_request(
        &self,
        request_pem: &str,
        not_after: OffsetDateTime,
    ) -> Result<String, SignError> {
        let issuer = self.issuer().map_err(|e| SignError::Signer(e.to_string()))?;
        sign_request(&issuer, request_pem, not_after.min(self.ca_not_after))
    }

    /// Issues a client certificate (`CN=user`, `O=group`) valid for `days`, returning (cert,
    /// key) PEM.
    pub fn issue_client(
        &self,
        user: &str,
        group: Option<&str>,
        days: i64,
    ) -> Result<(String, String), PkiError> {
        let now = crate::machinery::clock::now();
        self.issue_client_between(
            user,
            group,
            now - Duration::minutes(5),
            now + Duration::days(days),
        )
    }

    /// Issues a client certificate valid from `not_before` to `not_after` (tests use it for
    /// certificates that have expired).
    pub fn issue_client_between(
        &self,
        user: &str,
        group: Option<&str>,
        not_before: OffsetDateTime,
        not_after: OffsetDateTime,
    ) -> Result<(String, String), PkiError> {
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, user);
        if let Some(g) = group {
            dn.push(DnType::OrganizationName, g);
        }
        params.distinguished_name = dn;
        leaf(&mut params);
        params.key_usages =
            vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.not_before = not_before;
        params.not_after = not_after;
        let key = KeyPair::generate().map_err(cert_err("client key"))?;
        let cert = params.signed_by(&key, &self.issuer()?).map_err(cert_err("client"))?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    /// Writes `path` as a kubeconfig for `server` with the admin certificate embedded.
    pub fn write_admin_kubeconfig(&self, path: &Path, server: &str) -> Result<(), PkiError> {
        let read = |name: &str| {
            let p = self.dir.join(name);
            fs::read_to_string(&p).map_err(io_err(&p))
        };
        self.write_kubeconfig(path, server, ADMIN_USER, &read("admin.crt")?, &read("admin.key")?)
    }

    /// Writes a kubeconfig for `server` that presents `user`'s certificate and key (PEM).
    pub fn write_kubeconfig(
        &self,
        path: &Path,
        server: &str,
        user: &str,
        crt: &str,
        key: &str,
    ) -> Result<(), PkiError> {
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
        let config = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: ocm-hub\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: {user}\n  user:\n    client-certificate-data: {crt}\n    client-key-data: {key}\ncontexts:\n- name: ocm-hub\n  context:\n    cluster: ocm-hub\n    user: {user}\ncurrent-context: ocm-hub\n",
            ca = b64(&self.ca_pem),
            crt = b64(crt),
            key = b64(key),
        );
        write_file(path, &config, true)
    }

    /// The `pki` directory.
    pub fn dir(&self) -> PathBuf {
        self.dir.clone()
    }

    /// The CA certificate file.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// The hub-issued serving certificate and key files.
    pub fn serving_files(&self) -> (PathBuf, PathBuf) {
        (self.dir.join("serving.crt"), self.dir.join("serving.key"))
    }
}

/// A `kube` client from a kubeconfig file: the one way the hub binary makes one (its client
/// commands read the data dir's `admin.kubeconfig`; delegation reads the kube-apiserver's).
pub async fn kubeconfig_client(path: &Path) -> Result<kube::Client, String> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(|e| e.to_string())?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .map_err(|e| e.to_string())?;
    kube::Client::try_from(config).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;

    fn pem_certs(pem: &str) -> Vec<CertificateDer<'static>> {
        CertificateDer::pem_slice_iter(pem.as_bytes()).collect::<Result<_, _>>().unwrap()
    }

    #[test]
    fn ca_survives_restarts_and_configs_build() {
        let dir = tempfile::tempdir().unwrap();
        let a = Pki::load_or_create(dir.path(), &["hub.example".into()]).unwrap();
        let b = Pki::load_or_create(dir.path(), &[]).unwrap();
        assert_eq!(a.ca_pem, b.ca_pem, "the CA must be kept");
        let (cert, key) = b.serving_files();
        crate::auth::tls::Tls::load(crate::auth::tls::TlsFiles {
            cert,
            key,
            client_ca: vec![b.ca_file()],
            requestheader_ca: None,
            requestheader_allowed_names: Vec::new(),
        })
        .unwrap();
        let kc = dir.path().join("admin.kubeconfig");
        b.write_admin_kubeconfig(&kc, "https://127.0.0.1:1").unwrap();
        let text = fs::read_to_string(kc).unwrap();
        assert!(text.contains("client-certificate-data"));
    }

    #[test]
    fn client_certificates_name_user_and_groups() {
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::load_or_create(dir.path(), &[]).unwrap();
        let (pem, _) = pki.issue_client("alice", Some("team-a"), 1).unwrap();
        let der = pem_certs(&pem).remove(0);
        let id = crate::auth::tls::user_from_certificate(der.as_ref()).unwrap();
        assert_eq!(id.name, "alice");
        assert_eq!(id.groups, ["team-a", "system:authenticated"]);
        let (pem, _) = pki.issue_client(ADMIN_USER, Some(ADMIN_GROUP), 1).unwrap();
        let der = pem_certs(&pem).remove(0);
        let admin = crate::auth::tls::user_from_certificate(der.as_ref()).unwrap();
        assert!(admin.groups.iter().any(|g| g == ADMIN_GROUP));
        assert!(crate::auth::tls::user_from_certificate(b"not a certificate").is_none());
    }

    /// What a certificate says of keys and its role: (SKI, AKI key id, basicConstraints as
    /// (critical, CA), keyCertSign, serverAuth, clientAuth, SAN count).
    #[derive(Debug)]
    struct Ids {
        ski: Option<Vec<u8>>,
        aki: Option<Vec<u8>>,
        ca: Option<(bool, bool)>,
        cert_sign: bool,
        server: bool,
        client: bool,
        sans: usize,
    }

    fn ids(pem: &str) -> Ids {
        use x509_parser::extensions::ParsedExtension as E;
        let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
        let cert = pem.parse_x509().unwrap();
        let mut out = Ids {
            ski: subject_key_id(&cert),
            aki: None,
            ca: None,
            cert_sign: false,
            server: false,
            client: false,
            sans: 0,
        };
        for ext in cert.extensions() {
            match ext.parsed_extension() {
                E::AuthorityKeyIdentifier(a) => {
                    out.aki = a.key_identifier.as_ref().map(|k| k.0.to_vec())
                }
                E::BasicConstraints(bc) => out.ca = Some((ext.critical, bc.ca)),
                E::KeyUsage(ku) => out.cert_sign = ku.key_cert_sign(),
                E::ExtendedKeyUsage(eku) => {
                    (out.server, out.client) = (eku.server_auth, eku.client_auth)
                }
                E::SubjectAlternativeName(san) => out.sans = san.general_names.len(),
                _ => {}
            }
        }
        out
    }

    /// A leaf `issuer_ski` issued: its own SKI, an AKI naming the issuer, critical `CA:FALSE`.
    fn assert_leaf(what: &str, leaf: &Ids, issuer_ski: &[u8]) {
        assert!(leaf.ski.as_ref().is_some_and(|k| !k.is_empty()), "{what}: {leaf:?}");
        assert_eq!(leaf.aki.as_deref(), Some(issuer_ski), "{what}: AKI is the issuer's SKI");
        assert_ne!(leaf.ski.as_deref(), Some(issuer_ski), "{what}: its own key");
        assert_eq!(leaf.ca, Some((true, false)), "{what}: critical CA:FALSE");
        assert!(!leaf.cert_sign, "{what}");
    }

    /// A request for `cn` in `o` (PEM).
    fn request(cn: &str, o: &str) -> String {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name = subject(cn, &[o]).unwrap();
        params.serialize_request(&key).unwrap().pem().unwrap()
    }

    #[test]
    fn every_certificate_names_its_key_and_its_issuers() {
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::load_or_create(dir.path(), &["hub.example".into()]).unwrap();
        let ca = ids(&pki.ca_pem);
        let ca_ski = ca.ski.clone().expect("the CA has a SKI");
        assert_eq!(ca.aki.as_ref(), Some(&ca_ski), "self-signed: AKI = SKI");
        assert_eq!(ca.ca, Some((true, true)), "critical CA:TRUE");
        assert!(ca.cert_sign);
        let read = |name: &str| fs::read_to_string(pki.dir().join(name)).unwrap();
        let serving = ids(&read("serving.crt"));
        assert_leaf("serving", &serving, &ca_ski);
        assert!(serving.server && !serving.client && serving.sans == 4, "{serving:?}");
        let admin = ids(&read("admin.crt"));
        assert_leaf("admin", &admin, &ca_ski);
        assert!(admin.client && !admin.server, "{admin:?}");
        let (issued, _) = pki.issue_client("alice", None, 1).unwrap();
        assert_leaf("issued client", &ids(&issued), &ca_ski);
        let not_after = crate::machinery::clock::now() + Duration::days(1);
        let signed = pki
            .sign_client_request(&request("system:open-cluster-management:c1:a", "g"), not_after);
        let signed = ids(&signed.unwrap());
        assert_leaf("signed request", &signed, &ca_ski);
        assert!(signed.client && !signed.server, "{signed:?}");
        // An add-on's custom signer: the AKI is that CA's SKI.
        let other_key = KeyPair::generate().unwrap();
        let mut other = ca_params();
        other.distinguished_name = subject("custom-signer", &[]).unwrap();
        let other = other.self_signed(&other_key).unwrap();
        let custom =
            sign_with_ca(&other.pem(), &other_key.serialize_pem(), &request("u", "g"), not_after);
        let other_ski = ids(&other.pem()).ski.unwrap();
        assert_leaf("custom signer", &ids(&custom.unwrap()), &other_ski);
    }

    /// A CA certificate without a Subject Key Identifier (an older data dir's, or a custom
    /// signer's): what it signs names the identifier rcgen derives from its key, and an admin
    /// certificate without key identifiers is issued again.
    #[test]
    fn a_ca_without_a_key_identifier_still_gets_authority_key_identifiers() {
        let dir = tempfile::tempdir().unwrap();
        let pki_dir = dir.path().join("pki");
        fs::create_dir_all(&pki_dir).unwrap();
        let key = KeyPair::generate().unwrap();
        let mut old = ca_params();
        old.is_ca = IsCa::NoCa;
        old.use_authority_key_identifier_extension = false;
        let old = old.self_signed(&key).unwrap();
        assert!(ids(&old.pem()).ski.is_none());
        write_file(&pki_dir.join("ca.crt"), &old.pem(), false).unwrap();
        write_file(&pki_dir.join("ca.key"), &key.serialize_pem(), true).unwrap();
        let mut bare = CertificateParams::default();
        bare.distinguished_name = subject(ADMIN_USER, &[ADMIN_GROUP]).unwrap();
        let bare_key = KeyPair::generate().unwrap();
        let bare = bare.signed_by(&bare_key, &Issuer::new(ca_params(), &key)).unwrap();
        assert!(!has_key_ids(&bare.pem()));
        write_file(&pki_dir.join("admin.crt"), &bare.pem(), false).unwrap();
        write_file(&pki_dir.join("admin.key"), &bare_key.serialize_pem(), true).unwrap();

        let pki = Pki::load_or_create(dir.path(), &[]).unwrap();
        let derived = ca_params().key_identifier(&key);
        let serving = fs::read_to_string(pki.dir().join("serving.crt")).unwrap();
        assert_leaf("serving", &ids(&serving), &derived);
        let admin = fs::read_to_string(pki.dir().join("admin.crt")).unwrap();
        assert!(has_key_ids(&admin), "the admin certificate is issued again");
        assert_leaf("admin", &ids(&admin), &derived);
        let custom = sign_with_ca(
            &old.pem(),
            &key.serialize_pem(),
            &request("u", "g"),
            crate::machinery::clock::now() + Duration::days(1),
        );
        assert_leaf("custom signer", &ids(&custom.unwrap()), &derived);
    }
}
