//! Running the hub: opens storage, starts the registry and its controllers, creates the PKI and
//! `admin.kubeconfig`, binds the HTTPS listener, writes `endpoints.json` and serves every
//! connection over rustls, with explicit HTTP/1 and HTTP/2 limits, until shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use ocm_storage::{Engine, EtcdOptions, SledOptions, Storage};
use prometheus::IntGauge;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt as _;

use crate::auth::authn::Authenticator;
use crate::auth::delegate::Delegate;
use crate::auth::limits::Inflight;
use crate::auth::pki::{Pki, PkiError};
use crate::auth::tls::{PeerInfo, Tls, TlsFiles};
use crate::auth::tokens::TokenAuthority;
use crate::controllers::placement::Scheduler;
use crate::controllers::runtime::{Leadership, Runtime};
use crate::machinery::background::Background;
use crate::machinery::discovery::Discovery;
use crate::machinery::error::ApiError;
use crate::machinery::metrics::Metrics;
use crate::machinery::scheme::{Profile, Scheme};
use crate::serve::conn::{HeadDeadline, Requests, Tracked};
use crate::serve::rest::ApiState;
use crate::store::cache::CacheConfig;
use crate::store::registry::{Registry, WriteOptions};

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
    /// The store.
    pub storage: StorageChoice,
    /// sled's page cache, in bytes (`--sled-cache-mb`). Reads are served by the watch cache,
    /// so sled's own cache holds little more than the pages being written.
    pub sled_cache_bytes: u64,
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
}

impl ServeConfig {
    /// The defaults of the command-line contract, for a data dir.
    pub fn new(data_dir: impl Into<PathBuf>) -> ServeConfig {
        ServeConfig {
            data_dir: data_dir.into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 6443)),
            grpc_listen: Some(SocketAddr::from(([127, 0, 0, 1], 8090))),
            grpc_heartbeat: crate::serve::grpc::DEFAULT_HEARTBEAT,
            storage: StorageChoice::Sled,
            sled_cache_bytes: DEFAULT_SLED_CACHE_MB << 20,
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
    /// Certificates.
    #[error(transparent)]
    Pki(#[from] PkiError),
    /// Loading the registry.
    #[error("registry: {0}")]
    Registry(#[from] ApiError),
    /// Connecting to the kube-apiserver reviews are delegated to.
    #[error(transparent)]
    Delegate(#[from] crate::auth::delegate::DelegateError),
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
    let pki = Arc::new(Pki::load_or_create(&config.data_dir, &serving_names(&config, &listeners))?);
    let server_url = https_url(&listeners.host, listeners.https_addr.port());
    pki.write_admin_kubeconfig(&config.data_dir.join("admin.kubeconfig"), &server_url)?;
    let (tls, acceptor) = serving_tls(&config, &pki, &background)?;
    let tokens = TokenAuthority::load_or_create(&pki.dir(), &config.service_account_issuer)?;
    let authn = Authenticator::new(tokens, core.registry.clone());
    let (delegate_authn, delegate_authz) = connect_delegates(&config).await?;
    let grpc_url = listeners.grpc.as_ref().map(|g| g.url.clone());
    let (join_command, placement) = if config.profile == Profile::Hub {
        start_hub(&config, &core, &pki, &server_url, grpc_url.as_deref(), first_start).await?
    } else {
        (None, None)
    };
    let state = Arc::new(ApiState {
        discovery: Discovery::new(
            &core.registry.scheme,
            &authority(&listeners.host, listeners.https_addr.port()),
        ),
        openapi: crate::machinery::openapi::OpenApi::new(&core.registry.scheme),
        registry: core.registry,
        ready: AtomicBool::new(false),
        bookmark_every: config.bookmark_every,
        inflight: Inflight::with_lanes(
            config.max_requests_inflight,
            config.max_mutating_requests_inflight,
            config.lease_requests_inflight,
            config.max_requests_inflight_per_user,
        )
        .queue_wait(config.request_queue_wait),
        access: core.access,
        authn,
        delegate_authn,
        delegate_authz,
        placement,
        metrics: core.metrics,
    });
    let connections = Arc::new(tokio::sync::Semaphore::new(connection_cap(config.max_connections)));
    let https = Acceptor { tls: acceptor, state: tls, connections };
    let grpc_addr = listeners.grpc.as_ref().map(|g| g.addr);
    if let Some(grpc) = listeners.grpc {
        serve_grpc(&config, &state, grpc.listener, https.clone(), &background);
    }
    write_endpoints(&config, &server_url, grpc_url.as_deref())?;
    state.ready.store(true, Ordering::Release);
    tracing::info!(%server_url, "serving");
    on_ready(Running { https: listeners.https_addr, grpc: grpc_addr, join_command });

    serve_https(&config, &state, listeners.https, https, &background, shutdown).await;
    state.ready.store(false, Ordering::Release);
    // Connections, controllers and cache followers go before the storage closes (the last
    // reference to it is dropped as `run` returns).
    background.stop().await;
    Ok(())
}

/// `ServeError::Io` for `path`.
fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> ServeError {
    let path = path.to_owned();
    move |source| ServeError::Io { path, source }
}

/// The registry and what runs on it before any listener opens.
struct Core {
    registry: Registry,
    runtime: Runtime,
    access: Arc<crate::auth::access::Access>,
    metrics: Arc<Metrics>,
}

/// Opens storage and the registry over it, creates the default namespaces and RBAC, starts the
/// garbage collector, and starts the authorizer once the cache holds every write made so far
/// (the default RBAC included), so the first request is decided on it.
async fn open_registry(config: &ServeConfig, background: &Background) -> Result<Core, ServeError> {
    let scheme = Arc::new(Scheme::new(config.profile));
    let metrics = Arc::new(Metrics::new(scheme.types(), config.profile));
    let storage = open_storage(config).await?.observed(metrics.storage_observer());
    let registry = Registry::new(storage, scheme, config.cache, background).await?;
    ensure_namespaces(&registry).await?;
    ensure_default_rbac(&registry).await?;
    let runtime = Runtime {
        registry: registry.clone(),
        background: background.clone(),
        leadership: Leadership::Always,
    };
    crate::controllers::gc::start(&runtime);
    registry.cache.sync().await?;
    let access = crate::auth::access::Access::start(&registry, background).await;
    Ok(Core { registry, runtime, access, metrics })
}

/// The bound listeners and the addresses clients are told.
struct Listeners {
    https: TcpListener,
    https_addr: SocketAddr,
    /// The host clients are told for HTTPS.
    host: String,
    grpc: Option<GrpcListener>,
}

/// The gRPC listener, its address and the URL agents are told.
struct GrpcListener {
    listener: TcpListener,
    addr: SocketAddr,
    url: String,
}

/// Binds the HTTPS listener and, for the hub profile, the gRPC one; warns when agents on other
/// machines could not reach what they are told.
async fn bind_listeners(config: &ServeConfig) -> Result<Listeners, ServeError> {
    let https = TcpListener::bind(config.listen)
        .await
        .map_err(|source| ServeError::Bind { addr: config.listen, source })?;
    let https_addr =
        https.local_addr().map_err(|source| ServeError::Bind { addr: config.listen, source })?;
    let advertised = config.advertise_address.as_deref();
    if advertised.is_none() && https_addr.ip().is_unspecified() {
        tracing::warn!(
            listen = %https_addr,
            "listening on every address, but telling agents 127.0.0.1: pass --advertise-address with the address or name other machines reach this hub at"
        );
    }
    let host = told_host(advertised, https_addr);
    let grpc = match config.grpc_listen.filter(|_| config.profile == Profile::Hub) {
        Some(at) => Some(bind_grpc(at, advertised).await?),
        None => None,
    };
    Ok(Listeners { https, https_addr, host, grpc })
}

/// Binds the gRPC listener at `at`.
async fn bind_grpc(at: SocketAddr, advertised: Option<&str>) -> Result<GrpcListener, ServeError> {
    let bind = |source| ServeError::Bind { addr: at, source };
    let listener = TcpListener::bind(at).await.map_err(bind)?;
    let addr = listener.local_addr().map_err(bind)?;
    if let Some(host) = advertised.filter(|_| addr.ip().is_loopback()) {
        tracing::warn!(
            grpc_listen = %addr,
            advertised = %host,
            "gRPC listens on loopback only, so agents on other machines cannot stream their works: pass --grpc-listen with a reachable address (e.g. 0.0.0.0:8090)"
        );
    }
    Ok(GrpcListener { listener, addr, url: https_url(&told_host(advertised, addr), addr.port()) })
}

/// The names and addresses the self-issued serving certificate covers: the host clients are
/// told, each listener's own address unless unspecified, and `--tls-san`.
fn serving_names(config: &ServeConfig, listeners: &Listeners) -> Vec<String> {
    let mut sans = vec![listeners.host.clone()];
    let grpc_ip = listeners.grpc.as_ref().map(|g| g.addr.ip());
    sans.extend(
        [Some(listeners.https_addr.ip()), grpc_ip]
            .into_iter()
            .flatten()
            .filter(|ip| !ip.is_unspecified())
            .map(|ip| ip.to_string()),
    );
    sans.extend(config.tls_sans.iter().cloned());
    sans
}

/// The TLS server: the serving pair (the configured one, else the hub-issued one) and the
/// client CAs, re-read by a background task when the files change.
fn serving_tls(
    config: &ServeConfig,
    pki: &Pki,
    background: &Background,
) -> Result<(Arc<Tls>, TlsAcceptor), ServeError> {
    let (cert, key) = config.tls_cert.clone().unwrap_or_else(|| pki.serving_files());
    let mut client_ca = vec![pki.ca_file()];
    client_ca.extend(config.client_ca_files.iter().cloned());
    let tls = Tls::load(TlsFiles {
        cert,
        key,
        client_ca,
        requestheader_ca: config.requestheader_ca.clone(),
        requestheader_allowed_names: config.requestheader_allowed_names.clone(),
    })?;
    background.spawn(Arc::clone(&tls).watch(config.tls_reload_every));
    let acceptor = TlsAcceptor::from(Arc::new(tls.server_config()?));
    Ok((tls, acceptor))
}

/// The kube-apiservers TokenReviews and SubjectAccessReviews are delegated to (one connection
/// when both name the same source).
async fn connect_delegates(
    config: &ServeConfig,
) -> Result<(Option<Arc<Delegate>>, Option<Arc<Delegate>>), ServeError> {
    let authn = match &config.authentication_kubeconfig {
        Some(source) => Some(Arc::new(Delegate::connect(source).await?)),
        None => None,
    };
    let authz = match &config.authorization_kubeconfig {
        Some(source) if config.authentication_kubeconfig.as_ref() == Some(source) => authn.clone(),
        Some(source) => Some(Arc::new(Delegate::connect(source).await?)),
        None => None,
    };
    Ok((authn, authz))
}

/// The hub profile's part: `kube-public/cluster-info`, the registration and placement
/// controllers, and on the first start a bootstrap token. Returns the join command (first start
/// only) and the placement scheduler.
async fn start_hub(
    config: &ServeConfig,
    core: &Core,
    pki: &Arc<Pki>,
    server_url: &str,
    grpc_url: Option<&str>,
    first_start: bool,
) -> Result<(Option<String>, Option<Arc<Scheduler>>), ServeError> {
    publish_cluster_info(&core.registry, server_url, grpc_url, &pki.ca_pem).await?;
    crate::controllers::registration::start(
        &core.runtime,
        Arc::clone(&core.access),
        Arc::clone(pki),
        config.registration.clone(),
        Arc::clone(&core.metrics),
    );
    let placement = if config.registration.enabled {
        crate::controllers::placement::start(&core.runtime, Arc::clone(&core.metrics))
    } else {
        None
    };
    let join_command =
        if first_start { first_join_command(&core.registry, pki, server_url).await? } else { None };
    Ok((join_command, placement))
}

/// Creates the bootstrap token of a hub's first start (valid for [`FIRST_TOKEN_TTL`]) and
/// returns the command that joins a cluster with it.
async fn first_join_command(
    registry: &Registry,
    pki: &Pki,
    server_url: &str,
) -> Result<Option<String>, ServeError> {
    let (token, secret) = crate::auth::bootstrap::bootstrap_token_secret(
        FIRST_TOKEN_TTL,
        "created by ocm-hub serve on its first start",
    );
    let Some(rt) = registry.scheme.lookup("", "v1", "secrets").cloned() else { return Ok(None) };
    registry.create_if_absent(&rt, secret, &WriteOptions::default()).await?;
    Ok(Some(format!(
        "klusterlet join --hub {server_url} --token {token} --ca-hash {} --cluster-name <cluster-name>",
        pki.ca_hash()?
    )))
}

/// Starts the gRPC server and serves it on `listener`, in the background.
fn serve_grpc(
    config: &ServeConfig,
    state: &Arc<ApiState>,
    listener: TcpListener,
    acceptor: Acceptor,
    background: &Background,
) {
    let grpc =
        crate::serve::grpc::Grpc::start(Arc::clone(state), config.grpc_heartbeat, background);
    background.spawn(crate::serve::grpc::serve(
        grpc,
        listener,
        acceptor,
        config.timeouts,
        background.clone(),
    ));
}

/// Writes `endpoints.json`: the HTTPS URL and, when served, the gRPC one.
fn write_endpoints(
    config: &ServeConfig,
    server_url: &str,
    grpc_url: Option<&str>,
) -> Result<(), ServeError> {
    let mut body = json!({"https": server_url});
    if let Some(url) = grpc_url {
        body["grpc"] = json!(url);
    }
    let endpoints = config.data_dir.join("endpoints.json");
    std::fs::write(&endpoints, body.to_string()).map_err(io_error(&endpoints))
}

/// Serves the REST API on `listener` until `shutdown` resolves.
async fn serve_https(
    config: &ServeConfig,
    state: &Arc<ApiState>,
    listener: TcpListener,
    acceptor: Acceptor,
    background: &Background,
    shutdown: impl Future<Output = ()>,
) {
    let router = crate::serve::rest::router(Arc::clone(state));
    let parked = state.metrics.http1_parked.clone();
    let timeouts = config.timeouts;
    accept_loop(listener, acceptor, background, shutdown, move |stream, who, peer| {
        serve_connection(stream, who, peer, router.clone(), parked.clone(), timeouts)
    })
    .await;
}

/// Serves one HTTPS connection: each request goes to `router` with what the connection's
/// certificate authenticates, over HTTP/1 or HTTP/2 as the client chose.
async fn serve_connection(
    stream: Stream,
    who: PeerInfo,
    peer: SocketAddr,
    router: axum::Router,
    parked: IntGauge,
    timeouts: Timeouts,
) {
    let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
    let requests = Arc::new(Requests::default());
    let mut io = HeadDeadline::new(stream, Arc::clone(&requests), timeouts.head, h2);
    let svc = tower::service_fn(move |mut req: http::Request<hyper::body::Incoming>| {
        let in_flight = requests.begin();
        req.extensions_mut().insert(Arc::clone(&who));
        let call = router.clone().oneshot(req.map(axum::body::Body::new));
        // Boxed: an HTTP/1 connection hands its service from one hyper state to the
        // next (`conn::serve_http1`), which needs an `Unpin` future.
        Box::pin(async move {
            let resp = call.await?;
            Ok::<_, std::convert::Infallible>(resp.map(|b| Tracked::body(b, in_flight)))
        })
    });
    let svc = TowerToHyperService::new(svc);
    // HTTP/1 (kube-rs and every agent on REST, which choose no protocol in the TLS
    // handshake, or a client that chose HTTP/1.1) gets the server that lets go of a
    // connection's buffers while it idles; HTTP/2 (chosen, or its preface) hyper's.
    let h2 = h2
        || match crate::serve::conn::sniff_h2(&mut io, timeouts.idle).await {
            Ok(Some(h2)) => h2,
            Ok(None) | Err(_) => return,
        };
    // Each protocol's server is boxed: an HTTP/1 connection does not carry room for
    // HTTP/2's state (and the reverse) for as long as it lives.
    let served: Result<(), Box<dyn std::error::Error + Send + Sync>> = if h2 {
        Box::pin(
            async move { http_builder(timeouts).serve_connection(TokioIo::new(io), svc).await },
        )
        .await
    } else {
        Box::pin(async move {
            let http1 = http1_builder(timeouts);
            crate::serve::conn::serve_http1(io, svc, &http1, timeouts.idle, &parked).await
        })
        .await
        .map_err(Into::into)
    };
    if let Err(e) = served {
        tracing::debug!(%peer, error = %e, "connection ended");
    }
}

/// How a listener lets connections in: TLS with the hub's certificates, within the connection
/// cap every listener shares.
#[derive(Clone)]
pub(crate) struct Acceptor {
    pub(crate) tls: TlsAcceptor,
    pub(crate) state: Arc<Tls>,
    pub(crate) connections: Arc<tokio::sync::Semaphore>,
}

/// Accepts connections on `listener` until `shutdown` resolves: over the cap a connection is
/// closed at once (not queued); otherwise a background task makes its TLS handshake and hands
/// the stream, with what its certificate authenticates, to `serve`.
pub(crate) async fn accept_loop<F, Fut>(
    listener: TcpListener,
    acceptor: Acceptor,
    background: &Background,
    shutdown: impl Future<Output = ()>,
    serve: F,
) where
    F: Fn(Stream, PeerInfo, SocketAddr) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    tokio::pin!(shutdown);
    let (mut warned, mut refused) = (None, 0u64);
    loop {
        let (tcp, peer) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(slot) = Arc::clone(&acceptor.connections).try_acquire_owned() else {
            // Agents retry, so this is seen as slow joins and late reports: said at most every
            // 10 s, with how many were closed since.
            refused += 1;
            if warned.is_none_or(|at: Instant| at.elapsed() >= REFUSED_WARN_EVERY) {
                tracing::warn!(
                    %peer,
                    closed = refused,
                    "connection cap (--max-connections) reached: new connections are closed"
                );
                (warned, refused) = (Some(Instant::now()), 0);
            }
            continue;
        };
        let (tls, state, serve) =
            (acceptor.tls.clone(), Arc::clone(&acceptor.state), serve.clone());
        background.spawn(async move {
            let _slot = slot;
            // Boxed, as each protocol's server is in `serve_connection`: a connection's task
            // keeps room only for what its current phase needs, not for its largest phase for
            // as long as it lives.
            if let Some((stream, who)) = Box::pin(handshake(&tls, &state, tcp, peer)).await {
                serve(stream, who, peer).await;
            }
        });
    }
}

/// An accepted connection after its TLS handshake. Boxed: rustls' connection state is over a
/// KiB, and a connection's futures move their stream from one phase to the next (the HTTP/1
/// server hands it from one hyper state to another), each move leaving a slot behind.
pub(crate) type Stream = Box<tokio_rustls::server::TlsStream<tokio::net::TcpStream>>;

/// The TLS handshake of an accepted connection (within [`TLS_HANDSHAKE_TIMEOUT`]) and what its
/// client certificate authenticates, decided once per connection (the handshake proved the
/// client holds the key of the certificate it sent).
async fn handshake(
    acceptor: &TlsAcceptor,
    tls: &Tls,
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
) -> Option<(Stream, PeerInfo)> {
    let _ = tcp.set_nodelay(true);
    match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(stream)) => {
            let who = Arc::new(tls.classify(stream.get_ref().1.peer_certificates()));
            Some((Box::new(stream), who))
        }
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "TLS handshake failed");
            None
        }
        Err(_) => None,
    }
}

/// File descriptors kept for everything but connections: storage (sled's files and blob
/// directory, etcd's client), certificates read at reload, the data dir.
const FDS_RESERVED: u64 = 1024;

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

/// The connection cap the process can honour: `wanted`, lowered to the open-file limit (raised
/// to the hard one first, [`raise_open_file_limit`]) less [`FDS_RESERVED`]. Without this a
/// fleet that opens more connections than the process has descriptors for takes the
/// descriptors storage needs: an fsync that cannot open its directory fails, and the store
/// refuses all further work.
fn connection_cap(wanted: usize) -> usize {
    let Some(files) = raise_open_file_limit() else { return wanted };
    let fit = usize::try_from(files.saturating_sub(FDS_RESERVED).max(1)).unwrap_or(usize::MAX);
    if fit < wanted {
        // A cap asked for is worth a warning; the default is lowered quietly.
        let message = format!(
            "--max-connections is over what the open-file limit allows (less {FDS_RESERVED} for storage); raise `ulimit -n` (the systemd unit sets LimitNOFILE)"
        );
        if wanted == DEFAULT_MAX_CONNECTIONS {
            tracing::info!(
                max_connections = wanted,
                open_file_limit = files,
                serving = fit,
                "{message}"
            );
        } else {
            tracing::warn!(
                max_connections = wanted,
                open_file_limit = files,
                serving = fit,
                "{message}"
            );
        }
    }
    fit.min(wanted)
}

/// How often a hub at its connection cap says so.
const REFUSED_WARN_EVERY: Duration = Duration::from_secs(10);

/// A client that has not finished its TLS handshake by then is dropped.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
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

/// The HTTP/1.1 and HTTP/2 settings of every connection, each limit set explicitly
/// (reliability.md §5.3): bounded streams, header list, reset-stream limits against rapid-reset
/// and MadeYouReset floods, keepalive pings that find dead peers; for HTTP/1 an idle limit
/// here and a head limit against slowloris in [`crate::serve::conn`].
pub(crate) fn http_builder(timeouts: Timeouts) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        // hyper's one timer runs while it waits for a head, idle or not: the idle limit.
        .header_read_timeout(timeouts.idle)
        .max_headers(MAX_HEADERS);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        .max_header_list_size(MAX_HEADER_LIST_BYTES)
        .max_pending_accept_reset_streams(20)
        .max_local_error_reset_streams(1024)
        .keep_alive_interval(Duration::from_secs(20))
        .keep_alive_timeout(Duration::from_secs(10));
    builder
}

/// The HTTP/1.1 settings of [`http_builder`], for connections that chose HTTP/1.1 in their
/// TLS handshake (served by [`crate::serve::conn::serve_http1`]).
fn http1_builder(timeouts: Timeouts) -> hyper::server::conn::http1::Builder {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(timeouts.idle).max_headers(MAX_HEADERS);
    builder
}

/// Header fields an HTTP/1 request may carry.
const MAX_HEADERS: usize = 100;

/// Creates the default RBAC on first start (`cluster-admin` for `system:masters`, discovery and
/// self-review rights for every authenticated user, OCM's bootstrap role); objects that exist
/// are left as they are.
async fn ensure_default_rbac(registry: &Registry) -> Result<(), ApiError> {
    for obj in crate::auth::authz::default_objects() {
        let kind = obj.get("kind").and_then(|k| k.as_str()).unwrap_or_default();
        let rt = registry
            .scheme
            .types()
            .iter()
            .find(|rt| rt.group == crate::auth::authz::RBAC_GROUP && rt.kind == kind)
            .cloned();
        if let Some(rt) = rt {
            registry.create_if_absent(&rt, obj, &WriteOptions::default()).await?;
        }
    }
    Ok(())
}

/// Creates the namespaces every Kubernetes API has (`default`, `kube-system`, `kube-public`).
async fn ensure_namespaces(registry: &Registry) -> Result<(), ApiError> {
    let Some(rt) = registry.scheme.lookup("", "v1", "namespaces").cloned() else {
        return Ok(());
    };
    for name in ["default", "kube-system", "kube-public"] {
        let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        registry.create_if_absent(&rt, obj, &WriteOptions::default()).await?;
    }
    Ok(())
}

/// Publishes `kube-public/cluster-info` as kubeadm does: a kubeconfig with the hub's URL and
/// CA, readable anonymously, so a joining agent can fetch the CA and check it against the pin
/// it was given (`--ca-hash`) before it sends its token anywhere; and, under `grpc-server`, the
/// gRPC server agents stream their works from.
async fn publish_cluster_info(
    registry: &Registry,
    server: &str,
    grpc: Option<&str>,
    ca_pem: &str,
) -> Result<(), ApiError> {
    use base64::Engine as _;
    let Some(rt) = registry.scheme.lookup("", "v1", "configmaps").cloned() else { return Ok(()) };
    let kubeconfig = json!({
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": "", "cluster": {
            "server": server,
            "certificate-authority-data": base64::engine::general_purpose::STANDARD.encode(ca_pem),
        }}],
        "contexts": [], "users": [],
    });
    let mut obj = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": CLUSTER_INFO, "namespace": "kube-public"},
        "data": {"kubeconfig": kubeconfig.to_string()},
    });
    if let Some(url) = grpc {
        obj["data"][GRPC_SERVER_KEY] = json!(url);
    }
    match registry.cache.get(&rt.prefix, &rt.key("kube-public", CLUSTER_INFO)).ok().flatten() {
        Some(cur) if cur.value().get("data") == obj.get("data") => Ok(()),
        Some(_) => {
            let mut data = obj["data"].clone();
            if grpc.is_none() {
                // A hub restarted without gRPC stops naming its old server.
                data[GRPC_SERVER_KEY] = Value::Null;
            }
            let patch = crate::store::registry::Patch::Merge(json!({"data": data}));
            registry
                .patch(&rt, "kube-public", CLUSTER_INFO, &patch, None, &WriteOptions::default())
                .await
                .map(drop)
        }
        None => registry.create_if_absent(&rt, obj, &WriteOptions::default()).await,
    }
}

/// The ConfigMap in `kube-public` that carries the hub's URL and CA for joining agents.
pub const CLUSTER_INFO: &str = "cluster-info";
/// Its key naming the hub's gRPC server.
const GRPC_SERVER_KEY: &str = ocm_proto::cloudevents::CLUSTER_INFO_GRPC_SERVER;

#[cfg(test)]
mod tests {
    use super::*;

    /// The cap is the open-file limit (raised to the hard one) less the storage reserve, and a
    /// smaller cap is kept.
    #[test]
    fn the_connection_cap_leaves_descriptors_for_storage() {
        let files = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        let cap = connection_cap(usize::MAX);
        // After the call the soft limit is the hard one when it was lower (`None` is
        // unlimited, and an unlimited hard limit is left alone).
        let now = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        let raised = if files.current < files.maximum { files.maximum } else { files.current };
        assert_eq!(now.current, raised);
        match now.current {
            Some(n) => assert_eq!(cap as u64, n.saturating_sub(FDS_RESERVED).max(1)),
            None => assert_eq!(cap, usize::MAX),
        }
        assert_eq!(connection_cap(10), 10, "a cap under the limit is kept");
    }

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
