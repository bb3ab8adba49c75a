//! The start-up steps of [`run`](super::run) before it serves: the registry and what runs on it,
//! the listeners and the addresses clients are told, the names the serving certificate covers,
//! TLS, the delegates, the hub profile's controllers and `kube-public/cluster-info`, the gRPC
//! server and `endpoints.json`.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use super::connections::Acceptor;
use super::{
    CLUSTER_INFO, FIRST_TOKEN_TTL, ServeConfig, ServeError, StorageChoice, https_url, open_storage,
    told_host,
};
use crate::auth::delegate::Delegate;
use crate::auth::pki::Pki;
use crate::auth::tls::{Tls, TlsFiles};
use crate::controllers::leader::LEASE_NAME;
use crate::controllers::runtime::{Leadership, Runtime};
use crate::machinery::background::Background;
use crate::machinery::error::ApiError;
use crate::machinery::metrics::Metrics;
use crate::machinery::scheme::{Profile, Scheme};
use crate::serve::rest::ApiState;
use crate::store::registry::{Registry, WriteOptions};

/// `ServeError::Io` for `path`.
pub(super) fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> ServeError {
    let path = path.to_owned();
    move |source| ServeError::Io { path, source }
}

/// The registry and what runs on it before any listener opens.
pub(super) struct Core {
    pub(super) registry: Registry,
    pub(super) runtime: Runtime,
    pub(super) access: Arc<crate::auth::access::Access>,
    pub(super) metrics: Arc<Metrics>,
    /// This replica's election, when it runs as one of several over etcd.
    pub(super) election: Option<crate::controllers::leader::Election>,
    /// This replica's identity in the election (`None` on an embedded store).
    pub(super) replica: Option<String>,
}

/// Opens storage and the registry over it, creates the default namespaces and RBAC, starts the
/// garbage collector, and starts the authorizer once the cache holds every write made so far
/// (the default RBAC included), so the first request is decided on it.
pub(super) async fn open_registry(
    config: &ServeConfig,
    background: &Background,
) -> Result<Core, ServeError> {
    let scheme = Arc::new(Scheme::new(config.profile));
    let metrics =
        Arc::new(Metrics::new(scheme.types(), config.profile, config.grpc_metrics_per_cluster));
    let storage = open_storage(config).await?.observed(metrics.storage_observer());
    let registry = Registry::new(storage, scheme, config.cache, background).await?;
    ensure_namespaces(&registry).await?;
    ensure_default_rbac(&registry).await?;
    let (runtime, election, replica) = match config.storage {
        StorageChoice::Etcd(_) => {
            let identity = crate::controllers::leader::replica_identity();
            tracing::info!(replica = %identity, "running as a replica: controllers run while it leads");
            let election = elect(&registry, background, &identity, config, &metrics);
            let runtime = Runtime {
                registry: registry.fenced(election.fence.clone()),
                background: background.clone(),
                leadership: election.leadership.clone(),
            };
            (runtime, Some(election), Some(identity))
        }
        _ => {
            metrics.leader.with_label_values(&[LEASE_NAME]).set(1);
            let leadership = Leadership::Always;
            let runtime =
                Runtime { registry: registry.clone(), background: background.clone(), leadership };
            (runtime, None, None)
        }
    };
    crate::controllers::gc::start(&runtime);
    registry.cache.sync().await?;
    let access = crate::auth::access::Access::start(&registry, background).await;
    Ok(Core { registry, runtime, access, metrics, election, replica })
}

/// Starts this replica's leader election, `leader_election_master_status` following it.
fn elect(
    registry: &Registry,
    background: &Background,
    identity: &str,
    config: &ServeConfig,
    metrics: &Arc<Metrics>,
) -> crate::controllers::leader::Election {
    let gauge = metrics.leader.with_label_values(&[LEASE_NAME]);
    gauge.set(0);
    crate::controllers::leader::start(
        registry,
        background,
        identity.to_owned(),
        config.leader_election,
        move |leads| gauge.set(i64::from(leads)),
    )
}

/// The bound listeners and the addresses clients are told.
pub(super) struct Listeners {
    pub(super) https: TcpListener,
    pub(super) https_addr: SocketAddr,
    /// The host clients are told for HTTPS.
    pub(super) host: String,
    pub(super) grpc: Option<GrpcListener>,
}

/// The gRPC listener, its address and the URL agents are told.
pub(super) struct GrpcListener {
    pub(super) listener: TcpListener,
    pub(super) addr: SocketAddr,
    pub(super) url: String,
}

/// Binds the HTTPS listener and, for the hub profile, the gRPC one; warns when agents on other
/// machines could not reach what they are told.
pub(super) async fn bind_listeners(config: &ServeConfig) -> Result<Listeners, ServeError> {
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
pub(super) fn serving_names(config: &ServeConfig, listeners: &Listeners) -> Vec<String> {
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
pub(super) fn serving_tls(
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
pub(super) async fn connect_delegates(
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
pub(super) async fn start_hub(
    config: &ServeConfig,
    core: &Core,
    pki: &Arc<Pki>,
    server_url: &str,
    grpc_url: Option<&str>,
    first_start: bool,
) -> Result<(Option<String>, crate::controllers::Views), ServeError> {
    let replica = core.replica.is_some();
    publish_cluster_info(&core.registry, server_url, grpc_url, &pki.ca_pem, replica).await?;
    if let Some(identity) = &core.replica {
        let urls = crate::controllers::replicas::Urls {
            https: server_url.to_owned(),
            grpc: grpc_url.map(str::to_owned),
        };
        crate::controllers::replicas::register(
            &core.registry,
            &core.runtime.background,
            identity,
            urls.clone(),
        );
        crate::controllers::replicas::start(&core.runtime, urls);
    }
    crate::controllers::registration::start(
        &core.runtime,
        Arc::clone(&core.access),
        Arc::clone(pki),
        config.registration.clone(),
        Arc::clone(&core.metrics),
        server_url,
    );
    let views = if config.registration.enabled {
        crate::controllers::addon::start(&core.runtime);
        crate::controllers::policy::start(&core.runtime);
        crate::controllers::Views {
            placement: crate::controllers::placement::start(
                &core.runtime,
                Arc::clone(&core.metrics),
            ),
            replica_sets: crate::controllers::manifestworkreplicaset::start(&core.runtime),
        }
    } else {
        crate::controllers::Views::default()
    };
    let join_command =
        if first_start { first_join_command(&core.registry, pki, server_url).await? } else { None };
    Ok((join_command, views))
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
pub(super) fn serve_grpc(
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

/// Writes `endpoints.json`: the HTTPS URL, the gRPC one when served, and the replica's
/// identity when it runs as one of several.
pub(super) fn write_endpoints(
    config: &ServeConfig,
    server_url: &str,
    grpc_url: Option<&str>,
    replica: Option<&str>,
) -> Result<(), ServeError> {
    let mut body = json!({"https": server_url});
    if let Some(url) = grpc_url {
        body["grpc"] = json!(url);
    }
    if let Some(replica) = replica {
        body["replica"] = json!(replica);
    }
    let endpoints = config.data_dir.join("endpoints.json");
    std::fs::write(&endpoints, body.to_string()).map_err(io_error(&endpoints))
}

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
/// gRPC server agents stream their works from. A replica of several only creates it: the
/// leader keeps it ([`crate::controllers::replicas`]).
async fn publish_cluster_info(
    registry: &Registry,
    server: &str,
    grpc: Option<&str>,
    ca_pem: &str,
    replica: bool,
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
        Some(cur) if replica || cur.value().get("data") == obj.get("data") => Ok(()),
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

/// Its key naming the hub's gRPC server.
const GRPC_SERVER_KEY: &str = ocm_proto::cloudevents::CLUSTER_INFO_GRPC_SERVER;
