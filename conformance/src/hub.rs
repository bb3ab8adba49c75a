//! A real hub for black-box tests: `ocm-hub serve` run in-process on a free loopback port with a
//! temporary data dir and the chosen storage backend (a real etcd for `Backend::Etcd`), and the
//! clients that talk to it over real TLS: reqwest with the admin certificate, reqwest without
//! one, and a `kube::Client` built from the hub's own `admin.kubeconfig`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use ocm_apiserver::serve::server::{ETCD_PREFIX, ServeConfig, StorageChoice, run};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::Value;
use tokio::sync::oneshot;

use crate::etcd::EtcdServer;

/// The storage a test hub runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// In memory.
    Memory,
    /// Embedded sled in the temporary data dir.
    Sled,
    /// A real etcd started for this hub.
    Etcd,
}

impl Backend {
    /// Every backend; etcd is left out when `OCM_SKIP_ETCD=1`, reported as the running test
    /// skipping its etcd run (so call it once per test, in the test's body).
    pub fn all() -> Vec<Backend> {
        let mut out = vec![Backend::Memory, Backend::Sled];
        if !crate::etcd::skip("its etcd run") {
            out.push(Backend::Etcd);
        }
        out
    }
}

/// A running hub and how to reach it.
pub struct TestHub {
    /// `https://127.0.0.1:PORT`.
    pub url: String,
    /// The gRPC server, `https://127.0.0.1:PORT` (hub profile).
    pub grpc_url: Option<String>,
    /// The join command a hub prints on its first start.
    pub join_command: Option<String>,
    /// The data dir (PKI, kubeconfig, database): a temporary dir owned by the hub's task, so it
    /// is removed only after the hub and its storage have stopped.
    dir: PathBuf,
    /// Held by the hub's task too, so the dir goes only once both are done with it.
    owned_dir: Arc<tempfile::TempDir>,
    /// How it was started (the address fixed once chosen), for a restart.
    config: ServeConfig,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    _etcd: Option<EtcdServer>,
}

impl std::fmt::Debug for TestHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestHub").field("url", &self.url).finish_non_exhaustive()
    }
}

impl TestHub {
    /// Starts a hub (hub profile) on `backend`: the API server alone, without the OCM
    /// controllers (as kube-apiserver's own suites run without kube-controller-manager), so
    /// the API-machinery suites see only what they write. [`TestHub::start_with`] keeps them.
    pub async fn start(backend: Backend) -> anyhow::Result<TestHub> {
        TestHub::start_with(backend, |_| {}).await
    }

    /// Starts a hub with its controllers (registration, ...), as `ocm-hub serve` runs.
    pub async fn start_with_controllers(backend: Backend) -> anyhow::Result<TestHub> {
        TestHub::start_with(backend, |c| c.registration.enabled = true).await
    }

    /// Starts a hub after `tune` adjusted its configuration (which starts without the OCM
    /// controllers; `tune` may turn them on).
    pub async fn start_with(
        backend: Backend,
        tune: impl FnOnce(&mut ServeConfig),
    ) -> anyhow::Result<TestHub> {
        TestHub::start_in_dir(tempfile::tempdir()?, backend, tune).await
    }

    /// Starts a hub (without the OCM controllers) whose data dir is a new temporary dir in
    /// `parent` (a small filesystem of the test's own, say), after `tune` adjusted its
    /// configuration.
    pub async fn start_in(
        parent: &Path,
        backend: Backend,
        tune: impl FnOnce(&mut ServeConfig),
    ) -> anyhow::Result<TestHub> {
        TestHub::start_in_dir(tempfile::tempdir_in(parent)?, backend, tune).await
    }

    /// Starts a hub (without the OCM controllers) on `dir` as its data dir, with whatever it
    /// holds already (a store to serve on, say); the dir goes when the hub does.
    pub async fn start_on(dir: tempfile::TempDir, backend: Backend) -> anyhow::Result<TestHub> {
        TestHub::start_in_dir(dir, backend, |_| {}).await
    }

    async fn start_in_dir(
        dir: tempfile::TempDir,
        backend: Backend,
        tune: impl FnOnce(&mut ServeConfig),
    ) -> anyhow::Result<TestHub> {
        let mut config = ServeConfig::new(dir.path());
        config.listen = "127.0.0.1:0".parse()?;
        config.grpc_listen = Some("127.0.0.1:0".parse()?);
        config.registration.enabled = false;
        let etcd = match backend {
            Backend::Memory => {
                config.storage = StorageChoice::Memory;
                None
            }
            Backend::Sled => None,
            Backend::Etcd => {
                let server = tokio::task::spawn_blocking(EtcdServer::start).await??;
                config.storage = StorageChoice::Etcd(vec![server.endpoint.clone()]);
                Some(server)
            }
        };
        tune(&mut config);
        TestHub::launch(dir, config, etcd).await
    }

    /// Starts a hub on a data dir made beforehand (a restored one) with the store `storage`
    /// names (`etcd` kept running as long as the hub), after `tune` (which may set the
    /// addresses: a restored hub serves on its original's).
    pub async fn start_restored(
        dir: tempfile::TempDir,
        storage: StorageChoice,
        etcd: Option<EtcdServer>,
        tune: impl FnOnce(&mut ServeConfig),
    ) -> anyhow::Result<TestHub> {
        let mut config = ServeConfig::new(dir.path());
        config.listen = "127.0.0.1:0".parse()?;
        config.grpc_listen = Some("127.0.0.1:0".parse()?);
        config.registration.enabled = false;
        config.storage = storage;
        tune(&mut config);
        TestHub::launch(dir, config, etcd).await
    }

    /// Runs `config`'s hub on `dir` until it is ready.
    async fn launch(
        dir: tempfile::TempDir,
        mut config: ServeConfig,
        etcd: Option<EtcdServer>,
    ) -> anyhow::Result<TestHub> {
        let dir = Arc::new(dir);
        let path = dir.path().to_path_buf();
        let (stop, task, ready_rx) = spawn_hub(config.clone(), Arc::clone(&dir));
        let (addr, grpc, join_command) = tokio::time::timeout(Duration::from_secs(30), ready_rx)
            .await
            .context("the hub did not become ready in 30 s")?
            .context("the hub failed to start")?;
        config.listen = addr;
        // A restart keeps both addresses, so connected agents find it again.
        config.grpc_listen = grpc;
        // A hub listening on every address is reached on loopback.
        let local = |mut a: std::net::SocketAddr| {
            if a.ip().is_unspecified() {
                a.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
            }
            format!("https://{a}")
        };
        Ok(TestHub {
            url: local(addr),
            grpc_url: grpc.map(local),
            join_command,
            dir: path,
            owned_dir: dir,
            config,
            stop: Some(stop),
            task: Some(task),
            _etcd: etcd,
        })
    }

    /// Stops the hub and starts it again on the same data dir and address (a restart: sled
    /// and etcd keep what was written; memory starts empty).
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        self.pause().await;
        self.resume().await
    }

    /// Stops the hub (its clients find nothing listening) until [`TestHub::resume`].
    pub async fn pause(&mut self) {
        self.shutdown().await;
    }

    /// Starts a paused hub again on the same data dir and addresses.
    pub async fn resume(&mut self) -> anyhow::Result<()> {
        let (stop, task, ready_rx) = spawn_hub(self.config.clone(), Arc::clone(&self.owned_dir));
        tokio::time::timeout(Duration::from_secs(30), ready_rx)
            .await
            .context("the restarted hub did not become ready in 30 s")?
            .context("the restarted hub failed to start")?;
        self.stop = Some(stop);
        self.task = Some(task);
        Ok(())
    }

    /// The data dir.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The HTTPS and gRPC addresses it listens on (a hub started in its place binds them).
    pub fn addresses(&self) -> (std::net::SocketAddr, Option<std::net::SocketAddr>) {
        (self.config.listen, self.config.grpc_listen)
    }

    /// The etcd the hub stores into (`Backend::Etcd` only) and the key prefix it uses there.
    pub fn etcd(&self) -> Option<(&str, &str)> {
        self._etcd.as_ref().map(|e| (e.endpoint.as_str(), ETCD_PREFIX))
    }

    /// Kills the hub's etcd (`Backend::Etcd`); the hub keeps running without its store.
    pub fn kill_etcd(&mut self) {
        self._etcd = None;
    }

    /// The etcd this hub stores in, to stop and start again (an outage).
    pub fn etcd_server(&mut self) -> Option<&mut EtcdServer> {
        self._etcd.as_mut()
    }

    /// `DIR/admin.kubeconfig`.
    pub fn kubeconfig(&self) -> PathBuf {
        self.path().join("admin.kubeconfig")
    }

    /// A client certificate and key (PEM) the hub CA signs for `user` in `group`.
    pub fn certificate_for(
        &self,
        user: &str,
        group: Option<&str>,
    ) -> anyhow::Result<(String, String)> {
        let pki = ocm_apiserver::auth::pki::Pki::open(self.path())?;
        Ok(pki.issue_client(user, group, 1)?)
    }

    /// A kubeconfig (in the data dir) presenting a certificate for `user` (in `group`).
    pub fn kubeconfig_as(&self, user: &str, group: Option<&str>) -> anyhow::Result<PathBuf> {
        let (crt, key) = self.certificate_for(user, group)?;
        let path = self.path().join(format!("{user}.kubeconfig"));
        let pki = ocm_apiserver::auth::pki::Pki::open(self.path())?;
        pki.write_kubeconfig(&path, &self.url, user, &crt, &key)?;
        Ok(path)
    }

    /// An HTTPS client presenting a certificate for `user` (in `group`).
    pub fn http_as(&self, user: &str, group: Option<&str>) -> anyhow::Result<reqwest::Client> {
        let (crt, key) = self.certificate_for(user, group)?;
        self.http_with_cert(&crt, &key)
    }

    /// An HTTPS client presenting the certificate `crt` with its key (PEM), whoever signed it.
    pub fn http_with_cert(&self, crt: &str, key: &str) -> anyhow::Result<reqwest::Client> {
        let certs =
            CertificateDer::pem_slice_iter(crt.as_bytes()).collect::<Result<Vec<_>, _>>()?;
        let key = PrivateKeyDer::from_pem_slice(key.as_bytes())?;
        let config = self.tls_builder()?.with_client_auth_cert(certs, key)?;
        Ok(reqwest::Client::builder().use_preconfigured_tls(alpn(config)).build()?)
    }

    fn tls(&self, with_client_cert: bool) -> anyhow::Result<rustls::ClientConfig> {
        tls_for(self.path(), with_client_cert)
    }

    fn tls_builder(
        &self,
    ) -> anyhow::Result<rustls::ConfigBuilder<rustls::ClientConfig, rustls::client::WantsClientCert>>
    {
        tls_builder(self.path())
    }

    /// The rustls client configuration of the admin (its certificate, the hub CA, ALPN `h2`
    /// then `http/1.1`), for tests that speak HTTP/2 frames themselves.
    pub fn admin_tls(&self) -> anyhow::Result<rustls::ClientConfig> {
        self.tls(true)
    }

    /// An HTTPS client presenting the admin certificate.
    pub fn http(&self) -> anyhow::Result<reqwest::Client> {
        self.client(true, true)
    }

    /// An HTTPS client presenting the admin certificate that does not follow redirects.
    pub fn http_no_redirects(&self) -> anyhow::Result<reqwest::Client> {
        self.client(true, false)
    }

    /// An HTTPS client without a client certificate.
    pub fn anonymous(&self) -> anyhow::Result<reqwest::Client> {
        self.client(false, true)
    }

    /// An HTTPS client without a client certificate that resolves `name` to `at` (to reach the
    /// hub by a name its certificate may or may not cover).
    pub fn anonymous_resolving(
        &self,
        name: &str,
        at: std::net::SocketAddr,
    ) -> anyhow::Result<reqwest::Client> {
        Ok(reqwest::Client::builder()
            .use_preconfigured_tls(self.tls(false)?)
            .resolve(name, at)
            .build()?)
    }

    /// An HTTPS client without a client certificate that sends `Authorization: Bearer token`.
    pub fn http_bearer(&self, token: &str) -> anyhow::Result<reqwest::Client> {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(reqwest::header::AUTHORIZATION, format!("Bearer {token}").parse()?);
        Ok(reqwest::Client::builder()
            .use_preconfigured_tls(self.tls(false)?)
            .default_headers(headers)
            .build()?)
    }

    fn client(&self, with_cert: bool, follow_redirects: bool) -> anyhow::Result<reqwest::Client> {
        let mut builder = reqwest::Client::builder().use_preconfigured_tls(self.tls(with_cert)?);
        if !follow_redirects {
            builder = builder.redirect(reqwest::redirect::Policy::none());
        }
        Ok(builder.build()?)
    }

    /// `method path` with an optional JSON body and extra headers, sent by `client`: the status
    /// code and the body (JSON, or the text as a string).
    pub async fn call(
        &self,
        client: &reqwest::Client,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        headers: &[(&str, &str)],
    ) -> anyhow::Result<(u16, Value)> {
        let mut req = client.request(method, format!("{}{path}", self.url));
        let typed = headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-type"));
        if let Some(b) = body {
            // JSON, sent as the content type given (a patch type) or as application/json.
            req = if typed { req.body(serde_json::to_vec(b)?) } else { req.json(b) };
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await?;
        let code = resp.status().as_u16();
        let text = resp.text().await?;
        Ok((code, serde_json::from_str(&text).unwrap_or(Value::String(text))))
    }

    /// Creates RBAC objects (Role, ClusterRole, RoleBinding, ClusterRoleBinding) as the admin,
    /// each in the collection its kind and namespace name.
    pub async fn create_rbac(
        &self,
        objects: impl IntoIterator<Item = Value>,
    ) -> anyhow::Result<()> {
        let admin = self.http()?;
        for obj in objects {
            let path = rbac_path(&obj)?;
            let (code, body) =
                self.call(&admin, reqwest::Method::POST, &path, Some(&obj), &[]).await?;
            anyhow::ensure!(code == 201, "POST {path}: {code} {body}");
        }
        Ok(())
    }

    /// A `kube::Client` from the hub's `admin.kubeconfig`.
    pub async fn kube(&self) -> anyhow::Result<kube::Client> {
        let kubeconfig = kube::config::Kubeconfig::read_from(self.kubeconfig())?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
        Ok(kube::Client::try_from(config)?)
    }

    /// Stops the hub and waits for it to finish.
    pub async fn stop(mut self) {
        self.shutdown().await;
    }

    async fn shutdown(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
        }
    }
}

impl Drop for TestHub {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

type Ready =
    oneshot::Receiver<(std::net::SocketAddr, Option<std::net::SocketAddr>, Option<String>)>;

/// Runs a hub on a task that keeps `dir` until the hub has stopped.
fn spawn_hub(
    config: ServeConfig,
    dir: Arc<tempfile::TempDir>,
) -> (oneshot::Sender<()>, tokio::task::JoinHandle<()>, Ready) {
    let (ready_tx, ready_rx) = oneshot::channel();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let _dir = dir;
        let shutdown = async {
            let _ = stop_rx.await;
        };
        if let Err(e) = run(config, shutdown, move |r| {
            let _ = ready_tx.send((r.https, r.grpc, r.join_command));
        })
        .await
        {
            eprintln!("test hub stopped: {e}");
        }
    });
    (stop_tx, task, ready_rx)
}

/// The TLS client of a hub's data dir: its CA trusted and, `with_client_cert`, its admin
/// certificate presented.
fn tls_for(data_dir: &Path, with_client_cert: bool) -> anyhow::Result<rustls::ClientConfig> {
    let pki = data_dir.join("pki");
    let builder = tls_builder(data_dir)?;
    let config = if with_client_cert {
        let certs =
            CertificateDer::pem_file_iter(pki.join("admin.crt"))?.collect::<Result<Vec<_>, _>>()?;
        let key = PrivateKeyDer::from_pem_file(pki.join("admin.key"))?;
        builder.with_client_auth_cert(certs, key)?
    } else {
        builder.with_no_client_auth()
    };
    Ok(alpn(config))
}

fn tls_builder(
    data_dir: &Path,
) -> anyhow::Result<rustls::ConfigBuilder<rustls::ClientConfig, rustls::client::WantsClientCert>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(data_dir.join("pki").join("ca.crt"))? {
        roots.add(cert?)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots))
}

/// An HTTPS client presenting the admin certificate of the hub whose data dir is `data_dir`
/// (for hubs run as processes).
pub fn admin_http(data_dir: &Path) -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder().use_preconfigured_tls(tls_for(data_dir, true)?).build()?)
}

/// An HTTPS client without a client certificate that trusts the CA of the hub whose data dir
/// is `data_dir` (for hubs run as processes).
pub fn anonymous_http(data_dir: &Path) -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .use_preconfigured_tls(tls_for(data_dir, false)?)
        .redirect(reqwest::redirect::Policy::none())
        .build()?)
}

/// Offers HTTP/2 and HTTP/1.1.
fn alpn(mut config: rustls::ClientConfig) -> rustls::ClientConfig {
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config
}

/// The `metadata.managedFields` entry of `manager` with `operation` (`Apply`, `Update`) in an
/// object the hub returned.
pub fn managed_entry<'a>(obj: &'a Value, manager: &str, operation: &str) -> Option<&'a Value> {
    obj["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .find(|e| e["manager"] == manager && e["operation"] == operation)
}

/// The collection an RBAC object is created in (`/apis/rbac.authorization.k8s.io/v1/...`).
pub fn rbac_path(obj: &Value) -> anyhow::Result<String> {
    let plural = match obj["kind"].as_str() {
        Some("Role") => "roles",
        Some("ClusterRole") => "clusterroles",
        Some("RoleBinding") => "rolebindings",
        Some("ClusterRoleBinding") => "clusterrolebindings",
        other => anyhow::bail!("not an RBAC kind: {other:?}"),
    };
    Ok(match obj["metadata"]["namespace"].as_str() {
        Some(ns) => format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/{plural}"),
        None => format!("/apis/rbac.authorization.k8s.io/v1/{plural}"),
    })
}

/// A KiB figure of a process's `/proc/<pid>/status` (`VmRSS`; `VmHWM`, the peak since start or
/// since the last reset).
pub fn proc_status_kib(pid: u32, key: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    Ok(status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next())
        .with_context(|| format!("no {key} in /proc/{pid}/status"))?
        .parse()?)
}

/// Polls `check` every 50 ms until it yields a value, or fails after `limit` naming `what`.
pub async fn eventually<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let until = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = check().await? {
            return Ok(v);
        }
        anyhow::ensure!(tokio::time::Instant::now() < until, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
