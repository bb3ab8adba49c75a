//! Running the hub: opens storage, starts the registry and its controllers, creates the PKI and
//! `admin.kubeconfig`, binds the HTTPS listener, writes `endpoints.json` and serves every
//! connection over rustls, with explicit HTTP/1 and HTTP/2 limits, until shutdown.
//!
//! This file holds the configuration, the errors and [`run`]; `startup` the steps `run` takes
//! before it serves, `identity` the check that the store and the PKI are one hub's,
//! `connections` how connections are accepted, limited and served.

pub(crate) mod connections;
pub mod identity;
mod startup;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ocm_storage::{Engine, EtcdOptions, SledOptions, Storage};

use crate::auth::authn::Authenticator;
use crate::auth::limits::Inflight;
use crate::auth::pki::{Pki, PkiError};
use crate::auth::tokens::TokenAuthority;
use crate::machinery::background::Background;
use crate::machinery::discovery::Discovery;
use crate::machinery::error::ApiError;
use crate::machinery::scheme::Profile;
use crate::serve::rest::ApiState;
use crate::store::cache::CacheConfig;
use connections::{Acceptor, connection_cap, serve_https};
use startup::{
    bind_listeners, connect_delegates, io_error, open_registry, serve_grpc, serving_names,
    serving_tls, start_hub, write_endpoints,
};

/// Which store backs the hub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StorageChoice {
    /// The embedded default, under `DATA_DIR/db`.
    Sled,
    /// Several replicas over etcd.
    Etcd(Vec<String>),
    /// In memory (tests, demos): nothing survives a restart.
    Memory,
}

impl StorageChoice {
    /// The backend's name, as `--storage` spells it.
    pub fn name(&self) -> &'static str {
        match self {
            StorageChoice::Sled => "sled",
            StorageChoice::Etcd(_) => "etcd",
            StorageChoice::Memory => "memory",
        }
    }
}

/// How to run the hub.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Data directory (PKI, kubeconfig, endpoints, sled database).
    pub data_dir: PathBuf,
    /// HTTPS listen address (port 0 picks one).
    pub listen: SocketAddr,
    /// gRPC (CloudEvents) listen address, hub profile only (port 0 picks one; `None`: no
    /// gRPC listener).
    pub grpc_listen: Option<SocketAddr>,
    /// How often every gRPC subscriber gets a heartbeat.
    pub grpc_heartbeat: Duration,
    /// Whether the gRPC server's `grpc_server_ce_*` metrics carry OCM's per-cluster `consumer`
    /// label.
    pub grpc_metrics_per_cluster: bool,
    /// The store.
    pub storage: StorageChoice,
    /// sled's page cache, in bytes (`--sled-cache-mb`). Reads are served by the watch cache,
    /// so sled's own cache holds little more than the pages being written.
    pub sled_cache_bytes: u64,
    /// The free space the sled store keeps on its disk (`--sled-min-free-mb`): with less it
    /// refuses writes until there is more again.
    pub sled_min_free_bytes: u64,
    /// What to serve.
    pub profile: Profile,
    /// Watch cache tuning.
    pub cache: CacheConfig,
    /// Interval of watch bookmarks.
    pub bookmark_every: Duration,
    /// Non-watch read requests served at once (`--max-requests-inflight`).
    pub max_requests_inflight: usize,
    /// Mutating requests served at once (`--max-mutating-requests-inflight`).
    pub max_mutating_requests_inflight: usize,
    /// Seats one identity may hold at once (`--max-requests-inflight-per-user`).
    pub max_requests_inflight_per_user: usize,
    /// Seats reserved for Lease reads and renewals (`--lease-requests-inflight`).
    pub lease_requests_inflight: usize,
    /// Longest wait in line for a seat before 429 (`--request-queue-wait`; zero: no line).
    pub request_queue_wait: Duration,
    /// Serving certificate and key files instead of the hub-issued pair (`--tls-cert-file`,
    /// `--tls-private-key-file`); either way re-read when they change.
    pub tls_cert: Option<(PathBuf, PathBuf)>,
    /// CA bundles trusted for client certificates besides the hub CA (`--client-ca-file`).
    pub client_ca_files: Vec<PathBuf>,
    /// The front-proxy CA (`--requestheader-client-ca-file`): connections with a certificate
    /// from it may name the user in `X-Remote-*` headers.
    pub requestheader_ca: Option<PathBuf>,
    /// Common names allowed for front-proxy certificates (`--requestheader-allowed-names`).
    pub requestheader_allowed_names: Vec<String>,
    /// The `iss` of the tokens the hub signs and accepts (`--service-account-issuer`).
    pub service_account_issuer: String,
    /// How often certificate files are checked for changes.
    pub tls_reload_every: Duration,
    /// Where to send TokenReviews for tokens the hub did not issue: `in-cluster` or a
    /// kubeconfig (`--authentication-kubeconfig`).
    pub authentication_kubeconfig: Option<String>,
    /// Where to send SubjectAccessReviews for requests the hub's RBAC denies
    /// (`--authorization-kubeconfig`).
    pub authorization_kubeconfig: Option<String>,
    /// How registration approves, accepts and signs.
    pub registration: crate::controllers::registration::RegistrationConfig,
    /// Connections served at once (`--max-connections`).
    pub max_connections: usize,
    /// HTTP/1 head and idle limits.
    pub timeouts: Timeouts,
    /// The host (IP address or DNS name) agents and clients reach the hub at: the URLs of the
    /// join command, `kube-public/cluster-info` (HTTPS and gRPC), `admin.kubeconfig` and
    /// `endpoints.json` name it, and the self-issued serving certificate covers it. `None`: each
    /// listener's own address (loopback when it is unspecified); the certificate covers both.
    pub advertise_address: Option<String>,
    /// Further names or addresses the self-issued serving certificate covers (`--tls-san`).
    pub tls_sans: Vec<String>,
    /// The leader election's timings (replicas over etcd elect a leader; a hub on an embedded
    /// store always leads).
    pub leader_election: crate::controllers::leader::Timings,
    /// The key a new replica opens the hub's uploaded certificates with (`--certificate-key`),
    /// used when its data dir holds no CA yet.
    pub certificate_key: Option<crate::auth::sealed::CertificateKey>,
    /// Routes served beside the API on the HTTPS port, made from the API's state (the console
    /// at `/ui/`, which `main.rs` mounts from the layer above this one); `None`: the API only.
    pub routes: Option<fn(&Arc<ApiState>) -> axum::Router>,
}

impl ServeConfig {
    /// The defaults of the command-line contract, for a data dir.
    pub fn new(data_dir: impl Into<PathBuf>) -> ServeConfig {
        ServeConfig {
            data_dir: data_dir.into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 6443)),
            grpc_listen: Some(SocketAddr::from(([127, 0, 0, 1], 8090))),
            grpc_heartbeat: crate::serve::grpc::DEFAULT_HEARTBEAT,
            grpc_metrics_per_cluster: true,
            storage: StorageChoice::Sled,
            leader_election: Default::default(),
            certificate_key: None,
            sled_cache_bytes: DEFAULT_SLED_CACHE_MB << 20,
            sled_min_free_bytes: ocm_storage::DEFAULT_MIN_FREE_BYTES,
            profile: Profile::Hub,
            cache: CacheConfig::default(),
            bookmark_every: Duration::from_secs(60),
            max_requests_inflight: crate::auth::limits::DEFAULT_READONLY,
            max_mutating_requests_inflight: crate::auth::limits::DEFAULT_MUTATING,
            max_requests_inflight_per_user: crate::auth::limits::DEFAULT_PER_IDENTITY,
            lease_requests_inflight: crate::auth::limits::DEFAULT_LEASE_LANE,
            request_queue_wait: crate::auth::limits::DEFAULT_QUEUE_WAIT,
            tls_cert: None,
            client_ca_files: Vec::new(),
            requestheader_ca: None,
            requestheader_allowed_names: Vec::new(),
            service_account_issuer: crate::auth::tokens::DEFAULT_ISSUER.to_owned(),
            tls_reload_every: Duration::from_secs(2),
            authentication_kubeconfig: None,
            authorization_kubeconfig: None,
            registration: Default::default(),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            timeouts: Timeouts::default(),
            advertise_address: None,
            tls_sans: Vec::new(),
            routes: None,
        }
    }
}

/// Checks a host agents are told to reach the hub at (`--advertise-address`, `--tls-san`): an
/// IP address or a DNS-1123 subdomain; returns it (an IPv6 address without brackets).
pub fn parse_host(text: &str) -> Result<String, String> {
    let bare = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')).unwrap_or(text);
    if let Ok(ip) = bare.parse::<std::net::IpAddr>() {
        if ip.is_unspecified() {
            return Err(format!("{text:?} is no address a client can reach; give the host's own"));
        }
        return Ok(bare.to_owned());
    }
    crate::machinery::object::check_dns_subdomain(text)
        .map(|()| text.to_owned())
        .map_err(|e| format!("{text:?} is neither an IP address nor a DNS name: {e}"))
}

/// `HOST:PORT`, an IPv6 address in brackets.
fn authority(host: &str, port: u16) -> String {
    match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V6(ip)) => format!("[{ip}]:{port}"),
        _ => format!("{host}:{port}"),
    }
}

/// `https://HOST:PORT`, an IPv6 address in brackets.
fn https_url(host: &str, port: u16) -> String {
    format!("https://{}", authority(host, port))
}

/// The host clients are told for a listener bound at `bound`: the advertised one, else the
/// bound address (loopback for an unspecified one, which only a client on this machine can use).
fn told_host(advertised: Option<&str>, bound: SocketAddr) -> String {
    match (advertised, bound.ip()) {
        (Some(host), _) => host.to_owned(),
        (None, ip) if ip.is_unspecified() => "127.0.0.1".to_owned(),
        (None, ip) => ip.to_string(),
    }
}

/// Why the hub could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The data dir or a file in it.
    #[error("{path}: {source}")]
    Io {
        /// What.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Binding the listener.
    #[error("listening on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Opening storage.
    #[error("storage: {0}")]
    Storage(#[from] ocm_storage::Error),
    /// The store failed for good while serving (it cannot heal in place).
    #[error("the store cannot recover without a restart: {0}")]
    StoreFailed(String),
    /// Certificates.
    #[error(transparent)]
    Pki(#[from] PkiError),
    /// Loading the registry.
    #[error("registry: {0}")]
    Registry(#[from] ApiError),
    /// Connecting to the kube-apiserver reviews are delegated to.
    #[error(transparent)]
    Delegate(#[from] crate::auth::delegate::DelegateError),
    /// The store belongs to another hub than the data dir's PKI.
    #[error("{0}")]
    Identity(String),
}

/// A running hub's addresses.
#[derive(Debug, Clone)]
pub struct Running {
    /// The HTTPS address it listens on.
    pub https: SocketAddr,
    /// The gRPC address it listens on, if any.
    pub grpc: Option<SocketAddr>,
    /// On a hub's first start: the command that joins a cluster to it (with a bootstrap token
    /// valid for [`FIRST_TOKEN_TTL`]).
    pub join_command: Option<String>,
}

/// The default of `--sled-cache-mb`: reads come from the watch cache, so sled's cache serves the
/// write path and GETs of hot objects (a large fleet's Lease GETs fit), and every MiB of it is
/// resident.
pub const DEFAULT_SLED_CACHE_MB: u64 = 32;

/// Lifetime of the bootstrap token a hub makes on its first start (kubeadm's default).
pub const FIRST_TOKEN_TTL: Duration = Duration::from_secs(24 * 3600);

/// Opens the store a configuration names.
pub async fn open_storage(config: &ServeConfig) -> Result<Storage, ServeError> {
    let engine = match &config.storage {
        StorageChoice::Sled => {
            let mut options = SledOptions::new(config.data_dir.join("db"));
            options.cache_capacity = config.sled_cache_bytes;
            options.min_free_bytes = config.sled_min_free_bytes;
            Engine::Sled(options)
        }
        StorageChoice::Memory => Engine::Memory(Default::default()),
        StorageChoice::Etcd(endpoints) => {
            Engine::Etcd(EtcdOptions::new(endpoints.clone(), ETCD_PREFIX))
        }
    };
    Ok(Storage::open(engine).await?)
}

/// The prefix of every key the hub stores in etcd.
pub const ETCD_PREFIX: &str = "/ocm";

/// Runs the hub until `shutdown` resolves. `on_ready` is called once it serves.
pub async fn run(
    config: ServeConfig,
    shutdown: impl Future<Output = ()>,
    on_ready: impl FnOnce(Running),
) -> Result<(), ServeError> {
    std::fs::create_dir_all(&config.data_dir).map_err(io_error(&config.data_dir))?;
    let background = Background::new();
    let core = open_registry(&config, &background).await?;
    let listeners = bind_listeners(&config).await?;
    // The first start is the one that finds no CA yet.
    let first_start = !config.data_dir.join("pki").join("ca.crt").exists();
    if let Some(key) = &config.certificate_key {
        identity::join(&core.registry.storage, key, &config.data_dir).await?;
    }
    let recorded = identity::recorded(&core.registry.storage).await?;
    identity::check_before_pki(recorded.as_deref(), &config.data_dir)?;
    let pki = Arc::new(Pki::load_or_create(&config.data_dir, &serving_names(&config, &listeners))?);
    identity::check_or_record(&core.registry.storage, recorded, &pki).await?;
    let server_url = https_url(&listeners.host, listeners.https_addr.port());
    pki.write_admin_kubeconfig(&config.data_dir.join("admin.kubeconfig"), &server_url)?;
    let (tls, acceptor) = serving_tls(&config, &pki, &background)?;
    let tokens = TokenAuthority::load_or_create(&pki.dir(), &config.service_account_issuer)?;
    let authn = Authenticator::new(tokens, core.registry.clone());
    let (delegate_authn, delegate_authz) = connect_delegates(&config).await?;
    let grpc_url = listeners.grpc.as_ref().map(|g| g.url.clone());
    let (join_command, views) = if config.profile == Profile::Hub {
        start_hub(&config, &core, &pki, &server_url, grpc_url.as_deref(), first_start).await?
    } else {
        (None, crate::controllers::Views::default())
    };
    let state = Arc::new(ApiState {
        discovery: Discovery::new(
            &core.registry.scheme,
            &authority(&listeners.host, listeners.https_addr.port()),
        ),
        openapi: crate::machinery::openapi::OpenApi::new(&core.registry.scheme),
        registry: core.registry.clone(),
        ready: AtomicBool::new(false),
        bookmark_every: config.bookmark_every,
        inflight: Inflight::with_lanes(
            config.max_requests_inflight,
            config.max_mutating_requests_inflight,
            config.lease_requests_inflight,
            config.max_requests_inflight_per_user,
        )
        .queue_wait(config.request_queue_wait),
        access: Arc::clone(&core.access),
        authn,
        delegate_authn,
        delegate_authz,
        views,
        metrics: Arc::clone(&core.metrics),
        storage_backend: config.storage.name(),
        tunnels: Arc::default(),
    });
    let connections = Arc::new(tokio::sync::Semaphore::new(connection_cap(config.max_connections)));
    let https = Acceptor { tls: acceptor, state: tls, connections };
    let grpc_addr = listeners.grpc.as_ref().map(|g| g.addr);
    if let Some(grpc) = listeners.grpc {
        serve_grpc(&config, &state, grpc.listener, https.clone(), &background);
    }
    write_endpoints(&config, &server_url, grpc_url.as_deref(), core.replica.as_deref())?;
    state.ready.store(true, Ordering::Release);
    tracing::info!(%server_url, "serving");
    on_ready(Running { https: listeners.https_addr, grpc: grpc_addr, join_command });

    let store_failed = Arc::default();
    let shutdown = stop_if_the_store_fails(
        shutdown,
        state.registry.storage.clone(),
        Arc::clone(&store_failed),
    );
    serve_https(&config, &state, listeners.https, https, &background, shutdown).await;
    state.ready.store(false, Ordering::Release);
    // Connections, controllers and cache followers go before the storage closes (the last
    // reference to it is dropped as `run` returns).
    background.stop().await;
    if let Some(identity) = &core.replica {
        crate::controllers::replicas::deregister(&core.registry, identity).await;
    }
    if let Some(election) = core.election {
        election.release().await;
    }
    match store_failed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take() {
        Some(cause) => Err(ServeError::StoreFailed(cause)),
        None => Ok(()),
    }
}

/// How often the hub looks whether its store failed for good.
const STORE_CHECK_EVERY: Duration = Duration::from_secs(1);

/// Resolves with `shutdown`, or once the store cannot recover without a restart
/// (`Storage::failed`: an embedded store that could not heal in place), noting why in `failed`:
/// the hub then stops and `run` fails, so that its supervisor (systemd's `Restart=on-failure`,
/// a kubelet) starts it again on what the store made durable.
async fn stop_if_the_store_fails(
    shutdown: impl Future<Output = ()>,
    storage: Storage,
    failed: Arc<std::sync::Mutex<Option<String>>>,
) {
    let broken = async {
        loop {
            if storage.failed() {
                return storage.cannot_write().unwrap_or_default();
            }
            tokio::time::sleep(STORE_CHECK_EVERY).await;
        }
    };
    tokio::select! {
        () = shutdown => {}
        cause = broken => {
            tracing::error!(%cause, "the store cannot recover without a restart; the hub stops for its supervisor to start it again");
            *failed.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(cause);
        }
    }
}

/// Raises this process's soft open-file limit to its hard one (as Go's runtime does) and
/// returns the limit now in force (`None`: unlimited). Also used by the fleet simulator.
pub fn raise_open_file_limit() -> Option<u64> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        let raised = rustix::process::Rlimit { current: limit.maximum, maximum: limit.maximum };
        if setrlimit(Resource::Nofile, raised).is_ok() {
            limit.current = limit.maximum;
        }
    }
    limit.current
}

/// Connections served at once by default (`--max-connections`); more are closed on accept.
/// A running agent holds up to three (its REST client's, a second while its Lease and status
/// requests overlap, its work stream), so this bounds the fleet one hub serves: 20,000 agents
/// fit, and need more file descriptors than most defaults give (`ulimit -n`; the systemd unit
/// raises it). A parked connection keeps little beyond rustls' state, so descriptors, not
/// memory, set this cap.
pub const DEFAULT_MAX_CONNECTIONS: usize = 65536;

/// Concurrent HTTP/2 streams per connection (hyper's default, set explicitly: reliability.md
/// §5.3).
pub const MAX_CONCURRENT_STREAMS: u32 = 100;

/// Largest header list a request may send (16 KiB, hyper's default, set explicitly).
pub const MAX_HEADER_LIST_BYTES: u32 = 16 * 1024;

/// How long an HTTP/1 connection may take for a request head once its first byte arrived
/// (slowloris), and may sit idle between requests ([`ServeConfig::timeouts`]).
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// From a request's first byte to its complete head.
    pub head: Duration,
    /// Between requests on a keep-alive connection (and before the first): 90 s, the idle
    /// timeout of kube-apiserver's server and of Go's default transport, so an agent that
    /// renews every 60 s keeps its connection and TLS session.
    pub idle: Duration,
}

impl Default for Timeouts {
    fn default() -> Timeouts {
        Timeouts { head: Duration::from_secs(10), idle: Duration::from_secs(90) }
    }
}

pub use crate::controllers::replicas::CLUSTER_INFO;

#[cfg(test)]
mod tests {
    use super::*;

    /// An advertised host is an IP address (IPv6 with or without brackets) or a DNS name; the
    /// URLs put IPv6 in brackets.
    #[test]
    fn advertised_hosts_and_their_urls() {
        assert_eq!(parse_host("10.0.0.5").unwrap(), "10.0.0.5");
        assert_eq!(parse_host("[fd00::5]").unwrap(), "fd00::5");
        assert_eq!(parse_host("hub.example.com").unwrap(), "hub.example.com");
        for bad in ["https://hub", "hub:6443", "Hub.Example", "", "a b", "[hub]", "0.0.0.0", "::"] {
            assert!(parse_host(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(https_url("fd00::5", 6443), "https://[fd00::5]:6443");
        assert_eq!(https_url("hub.example.com", 8090), "https://hub.example.com:8090");
        let any: SocketAddr = ([0, 0, 0, 0], 6443).into();
        assert_eq!(told_host(None, any), "127.0.0.1");
        assert_eq!(told_host(Some("hub.example.com"), any), "hub.example.com");
        assert_eq!(told_host(None, ([10, 0, 0, 5], 6443).into()), "10.0.0.5");
    }
}
