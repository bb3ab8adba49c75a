//! The agent's two entry points: `join` (trust the hub, register, wait for approval and
//! acceptance, keep the credentials) and `run` (from the data dir: renew the Lease, report the
//! cluster's status, rotate the certificate before it runs out), both level-triggered loops
//! that ride out a hub that is away.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, Patch, PatchParams, PostParams};
use ocm_proto::api::cluster as api;
use ocm_proto::api::meta::{CONDITION_FALSE, CONDITION_TRUE, Condition, condition, set_condition};
use serde_json::json;

use crate::backoff::Backoff;

use crate::cluster::Cluster;
use crate::error::AgentError;
use crate::hub;
use crate::registration::{self as reg, Acceptance};
use crate::state::{DataDir, Identity};

/// How the agent behaves.
#[derive(Debug, Clone)]
pub struct Options {
    /// Its data dir.
    pub data_dir: DataDir,
    /// How often the cluster's status is reported (`--cluster-healthcheck-period`).
    pub healthcheck_period: Duration,
    /// The certificate lifetime to ask for (`--client-cert-expiration-seconds`; the hub's
    /// maximum when `None`).
    pub cert_expiration: Option<Duration>,
    /// Where the agent's work is counted (`--metrics-listen`); none in the fleet simulator.
    pub metrics: Option<Arc<crate::metrics::Metrics>>,
    /// Whether it runs the work agent (applies its cluster's ManifestWorks); the fleet
    /// simulator's lease-only agents do not.
    pub work: bool,
    /// How often every work is reconciled without an event (`--work-resync-seconds`).
    pub work_resync: Duration,
    /// How works reach the agent (`--transport`).
    pub transport: Transport,
    /// How long an AppliedManifestWork without its work on the hub is kept before it is
    /// deleted with what it owns (`--appliedmanifestwork-eviction-grace-period`).
    pub eviction_grace: Duration,
    /// How often the cluster's add-ons are looked at (`--addon-resync-seconds`).
    pub addon_resync: Duration,
    /// Whether it evaluates and enforces its cluster's replicated policies (off with
    /// `--disable-policies`; never where it runs no work agent).
    pub policies: bool,
    /// How often policies whose interval is `watch` are evaluated (`--policy-resync-seconds`).
    pub policy_resync: Duration,
    /// The cluster proxy: the prefix hub users are impersonated under
    /// (`--proxy-identity-prefix`), or `None` where the cluster's admin refuses proxying
    /// (`--enable-proxy=false`).
    pub proxy_prefix: Option<String>,
}

/// How works reach the agent.
#[derive(Debug, Clone)]
pub enum Transport {
    /// OCM's CloudEvents over gRPC (the default).
    Grpc {
        /// The gRPC server (`--grpc-server`); `None`: the one the hub publishes.
        server: Option<String>,
        /// Resubscribe after this long without an event or heartbeat.
        healthiness: Duration,
    },
    /// A list-watch of the hub's REST API.
    Kube,
}

impl Options {
    /// Defaults (OCM's) for a data dir.
    pub fn new(data_dir: DataDir) -> Options {
        Options {
            data_dir,
            healthcheck_period: Duration::from_secs(60),
            cert_expiration: None,
            metrics: None,
            work: true,
            work_resync: crate::work::RESYNC,
            transport: Transport::Grpc { server: None, healthiness: Duration::from_secs(30) },
            eviction_grace: crate::work::EVICTION_GRACE,
            addon_resync: crate::addon::PERIOD,
            policies: true,
            policy_resync: crate::policy::RESYNC,
            proxy_prefix: Some(crate::proxy::DEFAULT_PREFIX.to_owned()),
        }
    }
}

/// Where the hub's CA comes from.
#[derive(Debug, Clone)]
pub enum CaSource {
    /// A PEM file's contents.
    Pem(String),
    /// A kubeadm-style pin of the CA the hub hands out.
    Pin(String),
}

/// What `join` needs.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    pub hub: String,
    pub token: String,
    pub cluster_name: String,
    pub ca: CaSource,
}

/// What `join` tells as it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// A step done.
    Step(String),
    /// Still waiting for something (with how long so far).
    Waiting { what: String, seconds: u64 },
}

/// Registers the cluster with the hub and waits until it is accepted, keeping what it learns in
/// the data dir so `run` (or a re-run of `join`) resumes without joining again.
pub async fn join(
    req: &JoinRequest,
    opts: &Options,
    mut progress: impl FnMut(Progress),
) -> Result<Identity, AgentError> {
    let dir = &opts.data_dir;
    let previous = dir.identity()?;
    if let Some(p) = &previous {
        if p.hub != req.hub || p.cluster_name != req.cluster_name {
            return Err(AgentError::Invalid(format!(
                "data dir {} already belongs to cluster {} of hub {}: use `klusterlet run`, or another --data-dir",
                dir.path().display(),
                p.cluster_name,
                p.hub
            )));
        }
    }
    let ca_pem = match &req.ca {
        CaSource::Pem(pem) => pem.clone(),
        CaSource::Pin(pin) => {
            let pem = hub::discover_ca(&req.hub, pin).await?;
            progress(Progress::Step(format!("trusting the hub's CA {pin}")));
            pem
        }
    };
    let id = Identity {
        hub: req.hub.clone(),
        cluster_name: req.cluster_name.clone(),
        agent_name: previous.map(|p| p.agent_name).unwrap_or_else(reg::new_agent_name),
    };
    dir.write("ca.crt", ca_pem.as_bytes(), false)?;
    dir.write("bootstrap.token", req.token.as_bytes(), true)?;
    dir.save_identity(&id)?;
    let bootstrap = hub::with_token(&req.hub, &ca_pem, &req.token)?;
    busy_retry(|| reg::ensure_cluster(&bootstrap, &req.hub, &id.cluster_name)).await?;
    progress(Progress::Step(format!(
        "ManagedCluster {} is registered on the hub",
        id.cluster_name
    )));
    let cn = api::agent_user(&id.cluster_name, &id.agent_name);
    let have = match dir.credentials()? {
        Some((cert, key)) => reg::check_certificate(&cert, &key, &cn)
            .is_ok_and(|(_, not_after)| not_after > crate::clock::unix_now()),
        None => false,
    };
    if !have {
        let (key, request) = reg::new_request(&id.cluster_name, &id.agent_name)?;
        let name = busy_retry(|| {
            reg::create_csr(&bootstrap, &req.hub, &id.cluster_name, &request, opts.cert_expiration)
        })
        .await?;
        progress(Progress::Step(format!(
            "CertificateSigningRequest {name} is waiting for the hub. On the hub, run:\n\n  ocm-hub accept {}\n",
            id.cluster_name
        )));
        let what = "the hub to approve the certificate request";
        let cert = reg::issued_certificate(&bootstrap, &req.hub, &name, |seconds| {
            progress(Progress::Waiting { what: what.to_owned(), seconds })
        })
        .await?;
        reg::check_certificate(&cert, &key, &cn)?;
        dir.save_credentials(&cert, &key)?;
        progress(Progress::Step(format!("certificate issued for {cn}")));
    }
    let what = "the hub to accept the cluster";
    reg::watch_until(
        reg::clusters(bootstrap),
        &id.cluster_name,
        &req.hub,
        |seconds| progress(Progress::Waiting { what: what.to_owned(), seconds }),
        |mc| match reg::acceptance(&reg::managed_cluster(mc)?.0) {
            Acceptance::Accepted => Ok(Some(())),
            Acceptance::Denied => Err(AgentError::Denied(id.cluster_name.clone())),
            Acceptance::Waiting | Acceptance::Accepting => Ok(None),
        },
    )
    .await?;
    progress(Progress::Step(format!("cluster {} is accepted by the hub", id.cluster_name)));
    Ok(id)
}

/// Repeats a request while the hub answers that it is busy (429, 5xx: many agents joining at
/// once share one bootstrap identity and its in-flight cap), backing off up to 5 s.
async fn busy_retry<T, F, Fut>(mut call: F) -> Result<T, AgentError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, AgentError>>,
{
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
    loop {
        match call().await {
            Err(e) if e.is_busy() => backoff.wait().await,
            other => return other,
        }
    }
}

/// What the loops of a running agent share.
struct Shared {
    id: Identity,
    opts: Options,
    ca_pem: String,
    client: RwLock<kube::Client>,
    /// The hub's replicas as last published (empty: one hub at the URL joined).
    replicas: RwLock<Vec<crate::replicas::Replica>>,
    /// Their gRPC servers, reachable as the agent reaches the hub (the work stream's).
    grpc_servers: Arc<RwLock<Vec<String>>>,
    /// The certificate's validity, Unix seconds.
    not_before: AtomicI64,
    not_after: AtomicI64,
    /// The cluster's `leaseDurationSeconds`, as last read.
    lease_seconds: AtomicI64,
    /// Wakes the lease loop when `lease_seconds` changes (OCM restarts it then).
    lease_changed: tokio::sync::Notify,
    cluster: Arc<dyn Cluster>,
    /// When the cluster's API server started failing (0: healthy).
    failing_since: AtomicI64,
    /// The last rotation's outcome (`ClusterCertificateRotated`), set in every status report
    /// until the next rotation replaces it, so a report that fails loses nothing (setting it
    /// again is no change).
    rotated: std::sync::Mutex<Option<Condition>>,
}

impl Shared {
    fn client(&self) -> kube::Client {
        self.client.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    fn replicas(&self) -> Vec<crate::replicas::Replica> {
        self.replicas.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// The HTTPS URLs of the hub, in order of preference.
    fn hub_urls(&self) -> Vec<String> {
        crate::replicas::https_urls(&self.replicas(), &self.id.hub)
    }

    /// A REST client over the hub's replicas with the certificate `cert`, `key`.
    fn hub_client(&self, cert: &str, key: &str) -> Result<kube::Client, AgentError> {
        hub::with_certificate_at(&self.hub_urls(), &self.ca_pem, cert, key)
    }

    /// Takes a newly published list of replicas: remembered, and the REST client rebuilt.
    async fn follow_replicas(&self, list: Vec<crate::replicas::Replica>) -> Result<(), AgentError> {
        if self.replicas() == list {
            return Ok(());
        }
        crate::replicas::remember(&self.opts.data_dir, &list).await?;
        *self.grpc_servers.write().unwrap_or_else(std::sync::PoisonError::into_inner) =
            grpc_servers(&list, &self.id.hub);
        *self.replicas.write().unwrap_or_else(std::sync::PoisonError::into_inner) = list;
        let (cert, key) = self.opts.data_dir.credentials()?.ok_or_else(|| {
            AgentError::Invalid("the agent holds no certificate: run `klusterlet join`".into())
        })?;
        let client = self.hub_client(&cert, &key)?;
        *self.client.write().unwrap_or_else(std::sync::PoisonError::into_inner) = client;
        tracing::info!(replicas = ?self.hub_urls(), "following the hub's replicas");
        Ok(())
    }

    /// Runs `work` (`operation` with the hub) and counts it in the metrics, if any.
    async fn counted<T>(
        &self,
        operation: &str,
        work: impl std::future::Future<Output = Result<T, AgentError>>,
    ) -> Result<T, AgentError> {
        let started = std::time::Instant::now();
        let out = work.await;
        if let Some(m) = &self.opts.metrics {
            m.observe(operation, started.elapsed(), out.is_ok());
            m.certificate(
                self.not_before.load(Ordering::Relaxed),
                self.not_after.load(Ordering::Relaxed),
            );
        }
        out
    }
}

/// Runs a joined agent from its data dir until `shutdown` resolves.
pub async fn run(
    opts: Options,
    cluster: Arc<dyn Cluster>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), AgentError> {
    let dir = &opts.data_dir;
    let not_joined = || {
        AgentError::Invalid(format!(
            "{} holds no joined agent: run `klusterlet join` first",
            dir.path().display()
        ))
    };
    let id = dir.identity()?.ok_or_else(not_joined)?;
    let ca_pem = dir.read("ca.crt")?.ok_or_else(not_joined)?;
    let (cert, key) = dir.credentials()?.ok_or_else(not_joined)?;
    let cn = api::agent_user(&id.cluster_name, &id.agent_name);
    let (nb, na) = reg::check_certificate(&cert, &key, &cn)?;
    if na <= crate::clock::unix_now() {
        return Err(AgentError::Invalid(
            "the agent's certificate expired: join again with a new token (`ocm-hub token create` on the hub, then `klusterlet join`)"
                .into(),
        ));
    }
    let replicas = crate::replicas::remembered(dir)?;
    let hub_url = id.hub.clone();
    let urls = crate::replicas::https_urls(&replicas, &id.hub);
    let client = hub::with_certificate_at(&urls, &ca_pem, &cert, &key)?;
    let shared = Arc::new(Shared {
        id,
        grpc_servers: Arc::new(RwLock::new(grpc_servers(&replicas, &hub_url))),
        replicas: RwLock::new(replicas),
        opts: opts.clone(),
        ca_pem,
        client: RwLock::new(client),
        not_before: AtomicI64::new(nb),
        not_after: AtomicI64::new(na),
        lease_seconds: AtomicI64::new(60),
        lease_changed: tokio::sync::Notify::new(),
        cluster,
        failing_since: AtomicI64::new(0),
        rotated: Default::default(),
    });
    if let Some(m) = &shared.opts.metrics {
        m.certificate(nb, na);
    }
    tracing::info!(cluster = %shared.id.cluster_name, hub = %shared.id.hub, "agent running");
    tokio::select! {
        () = shutdown => Ok(()),
        () = lease_loop(Arc::clone(&shared)) => Ok(()),
        () = status_loop(Arc::clone(&shared)) => Ok(()),
        () = rotation_loop(Arc::clone(&shared)) => Ok(()),
        () = work_loop(Arc::clone(&shared)) => Ok(()),
        () = addon_loop(Arc::clone(&shared)) => Ok(()),
        () = policy_loop(Arc::clone(&shared)) => Ok(()),
        () = replicas_loop(Arc::clone(&shared)) => Ok(()),
        () = proxy_loop(Arc::clone(&shared)) => Ok(()),
    }
}

/// The cluster proxy (`proxy.rs`): a tunnel to every hub replica, following the published
/// list. None where proxying is refused or the cluster is not a real API server.
async fn proxy_loop(shared: Arc<Shared>) {
    let (Some(prefix), Some(api)) = (&shared.opts.proxy_prefix, shared.cluster.proxy_api()) else {
        return std::future::pending().await;
    };
    let tunnel = crate::proxy::Tunnel {
        ca_pem: shared.ca_pem.clone(),
        data_dir: shared.opts.data_dir.clone(),
        api,
        prefix: Arc::from(prefix.as_str()),
    };
    let mut tunnels = crate::proxy::Tunnels::default();
    loop {
        tunnels.follow(&shared.hub_urls(), &tunnel);
        tokio::time::sleep(REPLICAS_EVERY).await;
    }
}

/// How often the agent reads the hub's published replicas.
const REPLICAS_EVERY: Duration = Duration::from_secs(30);

/// Follows the replicas the hub publishes: a changed list is remembered and the REST client
/// rebuilt over it (the gRPC stream takes it at its next connect).
async fn replicas_loop(shared: Arc<Shared>) {
    use k8s_openapi::api::core::v1::ConfigMap;
    loop {
        let api: Api<ConfigMap> = Api::namespaced(shared.client(), "kube-public");
        if let Ok(info) = api.get("cluster-info").await {
            if let Some(list) = crate::replicas::published(&info) {
                if let Err(e) = shared.follow_replicas(list).await {
                    tracing::warn!(error = %e, "hub replicas not taken");
                }
            }
        }
        tokio::time::sleep(REPLICAS_EVERY).await;
    }
}

/// The add-on loop (`addon.rs`): every `addon_resync`, the cluster's add-ons' hub credentials
/// and Lease health. Only where the agent applies workloads (its cluster can hold Secrets).
async fn addon_loop(shared: Arc<Shared>) {
    if !shared.opts.work {
        return std::future::pending().await;
    }
    let written = std::sync::Mutex::new(std::collections::BTreeMap::new());
    let accounts = std::sync::Mutex::new(std::collections::BTreeSet::new());
    loop {
        let addons = crate::addon::Addons {
            hub: shared.client(),
            hub_url: &shared.id.hub,
            ca_pem: &shared.ca_pem,
            cluster_name: &shared.id.cluster_name,
            cluster: shared.cluster.as_ref(),
            expiration: shared.opts.cert_expiration,
            written: &written,
            accounts: &accounts,
        };
        if let Err(e) = shared.counted("addons", addons.round()).await {
            tracing::warn!(error = %e, "add-on round failed");
        }
        tokio::time::sleep(shared.opts.addon_resync).await;
    }
}

/// The policy agent (`policy/`), when enabled: a round every `policy_resync`, its policies
/// from the gRPC stream, or over the REST client of the moment (rotation swaps it).
async fn policy_loop(shared: Arc<Shared>) {
    if !shared.opts.work || !shared.opts.policies {
        return std::future::pending().await;
    }
    let mut agent = crate::policy::PolicyAgent::new(
        &shared.id.cluster_name,
        Arc::clone(&shared.cluster),
        shared.opts.data_dir.clone(),
    );
    let stream = match grpc_source(&shared).await {
        Some(source) => {
            let stream = crate::policy::GrpcPolicies::new(source, agent.journaled());
            tokio::spawn(Arc::clone(&stream).follow());
            Some(stream)
        }
        None => None,
    };
    loop {
        let hub = match &stream {
            Some(s) => crate::policy::Hub::Grpc(Arc::clone(s)),
            None => crate::policy::Hub::Kube(shared.client()),
        };
        agent.round(&hub).await;
        tokio::time::sleep(shared.opts.policy_resync).await;
    }
}

/// The gRPC source of the agent's transport (`None` over REST), once the hub's gRPC server is
/// known.
async fn grpc_source(shared: &Shared) -> Option<crate::transport::GrpcSource> {
    let Transport::Grpc { server, healthiness } = &shared.opts.transport else { return None };
    let url = loop {
        match server {
            Some(url) => break url.clone(),
            None => match grpc_server(shared).await {
                Ok(url) => break url,
                Err(e) => {
                    tracing::warn!(error = %e, "no gRPC server known yet; retrying");
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
            },
        }
    };
    Some(crate::transport::GrpcSource {
        endpoint: crate::grpc::Endpoint { url, ca_pem: shared.ca_pem.clone() },
        others: Arc::clone(&shared.grpc_servers),
        data_dir: shared.opts.data_dir.clone(),
        cluster: shared.id.cluster_name.clone(),
        healthiness: *healthiness,
    })
}

/// The work agent, when enabled, over the chosen transport; restarted if its source ever ends.
async fn work_loop(shared: Arc<Shared>) {
    if !shared.opts.work {
        return std::future::pending().await;
    }
    loop {
        let source = match grpc_source(&shared).await {
            Some(source) => crate::work::Source::Grpc(source),
            None => crate::work::Source::Kube(shared.client()),
        };
        let agent = crate::work::WorkAgent::new(
            source,
            &shared.id.hub,
            &shared.id.cluster_name,
            Arc::clone(&shared.cluster),
            shared.opts.work_resync,
            shared.opts.eviction_grace,
            shared.opts.data_dir.clone(),
        );
        agent.run().await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The gRPC servers of `replicas`, reachable as the agent reaches the hub at `hub`.
fn grpc_servers(replicas: &[crate::replicas::Replica], hub: &str) -> Vec<String> {
    replicas.iter().filter_map(|r| r.grpc.as_deref()).map(|g| reachable_as(g, hub)).collect()
}

/// The file of the data dir remembering the gRPC server the hub published.
const GRPC_SERVER_FILE: &str = "grpc-server";

/// The gRPC server the hub publishes, remembered in the data dir so that an agent restarted
/// while the hub is away still knows it (and works from its journal meanwhile).
async fn grpc_server(shared: &Shared) -> Result<String, AgentError> {
    let dir = &shared.opts.data_dir;
    match published_grpc_server(&shared.client()).await {
        Ok(url) => {
            let url = reachable_as(&url, &shared.id.hub);
            if dir.read(GRPC_SERVER_FILE)?.as_deref() != Some(url.as_str()) {
                dir.write_async(GRPC_SERVER_FILE, url.clone().into_bytes(), false).await?;
            }
            Ok(url)
        }
        Err(e) => dir.read(GRPC_SERVER_FILE)?.ok_or(e),
    }
}

/// A published gRPC URL on a loopback host (a hub listening on every address publishes
/// 127.0.0.1) with the host of the hub URL the agent was given instead, when that one is not
/// loopback: the gRPC port on the host the agent reaches the hub at.
fn reachable_as(grpc: &str, hub: &str) -> String {
    let (Ok(g), Ok(h)) = (grpc.parse::<http::Uri>(), hub.parse::<http::Uri>()) else {
        return grpc.to_owned();
    };
    let loopback = |host: &str| host == "localhost" || host.starts_with("127.") || host == "[::1]";
    match (g.host(), h.host(), g.port_u16()) {
        (Some(gh), Some(hh), Some(port)) if loopback(gh) && !loopback(hh) => {
            format!("https://{hh}:{port}")
        }
        _ => grpc.to_owned(),
    }
}

/// The gRPC server the hub publishes in `kube-public/cluster-info` (`grpc-server`).
async fn published_grpc_server(hub: &kube::Client) -> Result<String, AgentError> {
    use k8s_openapi::api::core::v1::ConfigMap;
    let api: Api<ConfigMap> = Api::namespaced(hub.clone(), "kube-public");
    let cm = api.get("cluster-info").await?;
    cm.data
        .and_then(|d| d.get(ocm_proto::cloudevents::CLUSTER_INFO_GRPC_SERVER).cloned())
        .ok_or_else(|| {
            AgentError::Invalid(
                "the hub publishes no gRPC server in kube-public/cluster-info: pass --grpc-server or --transport kube".into(),
            )
        })
}

/// Renews the Lease every `leaseDurationSeconds` (jittered up to 25 % later, as OCM does).
async fn lease_loop(shared: Arc<Shared>) {
    use rand::Rng as _;
    loop {
        if let Err(e) = shared.counted("lease", renew_lease(&shared)).await {
            tracing::warn!(error = %e, "lease renewal failed; retrying");
        }
        let base = shared.lease_seconds.load(Ordering::Relaxed).max(1) as f64;
        let jitter = rand::rng().random_range(0.0..0.25);
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs_f64(base * (1.0 + jitter))) => {}
            () = shared.lease_changed.notified() => {}
        }
    }
}

/// One renewal: GET and UPDATE (the agent never creates its Lease; the hub does on acceptance).
pub async fn renew_lease_with(client: &kube::Client, cluster: &str) -> Result<(), kube::Error> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), cluster);
    let mut lease = leases.get(api::LEASE_NAME).await?;
    let spec = lease.spec.get_or_insert_with(Default::default);
    spec.renew_time = Some(MicroTime(crate::clock::timestamp()));
    leases.replace(api::LEASE_NAME, &PostParams::default(), &lease).await.map(drop)
}

async fn renew_lease(shared: &Shared) -> Result<(), AgentError> {
    renew_lease_with(&shared.client(), &shared.id.cluster_name)
        .await
        .map_err(|e| hub::explain_certificate(&shared.id.hub, e))
}

/// Reports the cluster's status at start and then every healthcheck period.
async fn status_loop(shared: Arc<Shared>) {
    loop {
        let period = shared.opts.healthcheck_period;
        let outcome = shared.counted("status", report_status(&shared)).await;
        if let Err(e) = &outcome {
            if !is_conflict(e) {
                tracing::warn!(error = %e, "status report failed; retrying");
            }
        }
        let failing = shared.failing_since.load(Ordering::Relaxed) != 0;
        let next = next_report(&outcome, period, failing);
        tokio::time::sleep(next).await;
    }
}

/// How long after a report the next one is made.
fn next_report(outcome: &Result<Report, AgentError>, period: Duration, failing: bool) -> Duration {
    match outcome {
        // Accepted, and the hub's controller has not said so yet: report as soon as it has
        // (within a second of acceptance, not a whole period later).
        Ok(Report::Accepting) => ACCEPTING_RECHECK,
        // A write that lost a race with the hub's own status write is made again at once.
        Err(e) if is_conflict(e) => Duration::from_millis(100),
        Err(_) => period.min(Duration::from_secs(5)),
        // A failing API server is rechecked every 5 s (OCM's), so it turns False in time.
        Ok(Report::Done) if failing => period.min(Duration::from_secs(5)),
        Ok(Report::Done) => period,
    }
}

fn is_conflict(e: &AgentError) -> bool {
    matches!(e, AgentError::Hub(kube::Error::Api(s)) if s.code == 409)
}

/// What a status report came to.
#[derive(Debug, PartialEq, Eq)]
enum Report {
    /// Reported (or nothing to report: not accepted, or the clock out of sync).
    Done,
    /// `hubAcceptsClient` is set but the hub has not yet added `HubAcceptedManagedCluster`,
    /// which comes within moments: look again soon. (OCM's agent watches its ManagedCluster;
    /// this one reads it each period, so without this a cluster accepted again while its agent
    /// runs, after a denial, would wait a whole healthcheck period, 60 s by default.)
    Accepting,
}

/// How soon a cluster being accepted is looked at again.
const ACCEPTING_RECHECK: Duration = Duration::from_secs(1);

/// How long the cluster's API server must fail before it is reported unavailable (OCM's).
const UNAVAILABLE_AFTER: i64 = 20;
/// Custom claims reported at most (OCM's `--max-custom-cluster-claims`).
const MAX_CUSTOM_CLAIMS: usize = 20;

async fn report_status(shared: &Shared) -> Result<Report, AgentError> {
    let url = &shared.id.hub;
    let name = &shared.id.cluster_name;
    let clusters = reg::clusters(shared.client());
    let obj = clusters.get(name).await.map_err(|e| hub::explain_certificate(url, e))?;
    let (mc, current) = reg::managed_cluster(&obj)?;
    if let Some(s) = mc.spec.as_ref().and_then(|s| s.lease_duration_seconds).filter(|s| *s > 0) {
        if shared.lease_seconds.swap(i64::from(s), Ordering::Relaxed) != i64::from(s) {
            shared.lease_changed.notify_one();
        }
    }
    // Nothing to report before acceptance (and no right to).
    match reg::acceptance(&mc) {
        Acceptance::Accepted => {}
        Acceptance::Accepting => return Ok(Report::Accepting),
        Acceptance::Waiting | Acceptance::Denied => return Ok(Report::Done),
    }
    let mut status = mc.status.clone().unwrap_or_default();
    let synced =
        ocm_proto::api::meta::find_condition(&status.conditions, api::v1::CONDITION_CLOCK_SYNCED);
    if synced.is_some_and(|c| c.status == CONDITION_FALSE) {
        tracing::warn!("the hub says this clock is out of sync; not reporting status");
        return Ok(Report::Done);
    }
    let stamp = crate::clock::now();
    set_condition(
        &mut status.conditions,
        condition(
            api::v1::CONDITION_JOINED,
            CONDITION_TRUE,
            api::v1::REASON_MANAGED_CLUSTER_JOINED,
            "Managed cluster joined",
        ),
        stamp.clone(),
    );
    let cluster = &shared.cluster;
    match cluster.healthy().await {
        Ok(()) => {
            shared.failing_since.store(0, Ordering::Relaxed);
            set_condition(
                &mut status.conditions,
                condition(
                    api::v1::CONDITION_AVAILABLE,
                    CONDITION_TRUE,
                    api::v1::REASON_MANAGED_CLUSTER_AVAILABLE,
                    "Managed cluster is available",
                ),
                stamp.clone(),
            );
        }
        Err(e) => {
            let since = match shared.failing_since.load(Ordering::Relaxed) {
                0 => {
                    shared.failing_since.store(crate::clock::unix_now(), Ordering::Relaxed);
                    crate::clock::unix_now()
                }
                t => t,
            };
            if crate::clock::unix_now() - since >= UNAVAILABLE_AFTER {
                set_condition(
                    &mut status.conditions,
                    condition(
                        api::v1::CONDITION_AVAILABLE,
                        CONDITION_FALSE,
                        api::v1::REASON_KUBE_APISERVER_UNAVAILABLE,
                        format!("The kube-apiserver is not ok: {e}"),
                    ),
                    stamp.clone(),
                );
            }
        }
    }
    let rotated = shared.rotated.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    if let Some(c) = rotated {
        set_condition(&mut status.conditions, c, stamp.clone());
    }
    let mut patch = json!({
        "metadata": {"resourceVersion": obj.metadata.resource_version},
        "status": {"conditions": status.conditions},
    });
    if let Ok(version) = cluster.version().await {
        patch["status"]["version"] = json!({"kubernetes": version});
    }
    if let Ok(res) = cluster.resources().await {
        patch["status"]["capacity"] = json!(res.capacity);
        patch["status"]["allocatable"] = json!(res.allocatable);
    }
    if let Ok(mut claims) = cluster.claims().await {
        claims.sort();
        let (mut reserved, custom): (Vec<_>, Vec<_>) =
            claims.into_iter().partition(|(n, _)| api::RESERVED_CLAIM_NAMES.contains(&n.as_str()));
        reserved.extend(custom.into_iter().take(MAX_CUSTOM_CLAIMS));
        let list: Vec<_> =
            reserved.into_iter().map(|(n, v)| json!({"name": n, "value": v})).collect();
        patch["status"]["clusterClaims"] = json!(list);
    }
    // Nothing to write when the status already says all of it.
    let unchanged = patch["status"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| current.pointer(&format!("/status/{k}")) == Some(v));
    if unchanged {
        return Ok(Report::Done);
    }
    clusters
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| hub::explain_certificate(url, e))?;
    Ok(Report::Done)
}

/// Rotates the certificate when a fifth of its lifetime is left (OCM's threshold is 20–25 %).
async fn rotation_loop(shared: Arc<Shared>) {
    loop {
        let (nb, na) =
            (shared.not_before.load(Ordering::Relaxed), shared.not_after.load(Ordering::Relaxed));
        let threshold = na - (na - nb) / 5;
        let left = threshold - crate::clock::unix_now();
        if left > 0 {
            tokio::time::sleep(Duration::from_secs(left.unsigned_abs().min(10))).await;
            continue;
        }
        let outcome = shared.counted("rotation", rotate(&shared)).await;
        let c = match &outcome {
            Ok(()) => condition(
                api::v1::CONDITION_CLUSTER_CERTIFICATE_ROTATED,
                CONDITION_TRUE,
                api::v1::REASON_CLIENT_CERTIFICATE_UPDATED,
                "client certificate rotated",
            ),
            Err(e) => condition(
                api::v1::CONDITION_CLUSTER_CERTIFICATE_ROTATED,
                CONDITION_FALSE,
                api::v1::REASON_CLIENT_CERTIFICATE_UPDATE_FAILED,
                e.to_string(),
            ),
        };
        *shared.rotated.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(c);
        if let Err(e) = outcome {
            tracing::warn!(error = %e, "certificate rotation failed; retrying");
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    }
}

/// A new key and certificate, requested with the current one (the hub approves renewals by the
/// same identity), then used for every later request.
async fn rotate(shared: &Shared) -> Result<(), AgentError> {
    let id = &shared.id;
    let client = shared.client();
    // These requests go with the certificate: a refusal is the certificate's, not a token's.
    let refused = |e| match e {
        AgentError::BadToken => AgentError::CertificateRefused { url: id.hub.clone() },
        e => e,
    };
    let (key, request) = reg::new_request(&id.cluster_name, &id.agent_name)?;
    let name =
        reg::create_csr(&client, &id.hub, &id.cluster_name, &request, shared.opts.cert_expiration)
            .await
            .map_err(refused)?;
    let issued = reg::issued_certificate(&client, &id.hub, &name, |_| {});
    let cert = tokio::time::timeout(Duration::from_secs(60), issued)
        .await
        .map_err(|_| {
            AgentError::Invalid(format!("renewal request {name} was not approved within 60 s"))
        })?
        .map_err(refused)?;
    let cn = api::agent_user(&id.cluster_name, &id.agent_name);
    let (nb, na) = reg::check_certificate(&cert, &key, &cn)?;
    shared.opts.data_dir.save_credentials(&cert, &key)?;
    let client = shared.hub_client(&cert, &key)?;
    *shared.client.write().unwrap_or_else(std::sync::PoisonError::into_inner) = client;
    shared.not_before.store(nb, Ordering::Relaxed);
    shared.not_after.store(na, Ordering::Relaxed);
    tracing::info!(csr = %name, "certificate rotated");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cluster whose `hubAcceptsClient` is set but which the hub has not yet marked
    /// accepted is looked at again within a second; one not accepted waits its period, and
    /// one accepted is reported.
    #[test]
    fn a_cluster_being_accepted_is_looked_at_again_soon() {
        let mc = |accepts: bool, accepted: bool| -> api::v1::ManagedCluster {
            let conditions = if accepted {
                json!([{"type": api::v1::CONDITION_HUB_ACCEPTED, "status": "True",
                        "reason": "HubClusterAdminAccepted", "message": "",
                        "lastTransitionTime": "2026-11-25T00:00:00Z"}])
            } else {
                json!([])
            };
            serde_json::from_value(json!({
                "apiVersion": "cluster.open-cluster-management.io/v1",
                "kind": "ManagedCluster",
                "metadata": {"name": "c1"},
                "spec": {"hubAcceptsClient": accepts},
                "status": {"conditions": conditions},
            }))
            .unwrap()
        };
        assert_eq!(reg::acceptance(&mc(true, false)), Acceptance::Accepting);
        assert_eq!(reg::acceptance(&mc(false, false)), Acceptance::Waiting);
        assert_eq!(reg::acceptance(&mc(true, true)), Acceptance::Accepted);
        assert_eq!(reg::acceptance(&mc(false, true)), Acceptance::Denied);

        let period = Duration::from_secs(60);
        assert_eq!(next_report(&Ok(Report::Accepting), period, false), ACCEPTING_RECHECK);
        assert!(ACCEPTING_RECHECK <= Duration::from_secs(1));
        assert_eq!(next_report(&Ok(Report::Done), period, false), period);
        assert_eq!(next_report(&Ok(Report::Done), period, true), Duration::from_secs(5));
        let status = json!({"status": "Failure", "message": "conflict", "reason": "Conflict",
                            "code": 409});
        let conflict = AgentError::Hub(kube::Error::Api(serde_json::from_value(status).unwrap()));
        assert_eq!(next_report(&Err(conflict), period, false), Duration::from_millis(100));
        let other = AgentError::Invalid("x".into());
        assert_eq!(next_report(&Err(other), period, false), Duration::from_secs(5));
    }

    #[test]
    fn a_loopback_grpc_server_is_reached_at_the_hubs_host() {
        let hub = "https://hub.example.com:6443";
        assert_eq!(reachable_as("https://127.0.0.1:8090", hub), "https://hub.example.com:8090");
        assert_eq!(reachable_as("https://10.0.0.5:8090", hub), "https://10.0.0.5:8090");
        let local = "https://127.0.0.1:6443";
        assert_eq!(reachable_as("https://127.0.0.1:8090", local), "https://127.0.0.1:8090");
    }
}
