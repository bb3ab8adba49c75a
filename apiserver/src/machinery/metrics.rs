//! The hub's Prometheus metrics: kube-apiserver's request, watch and object families under its
//! names and labels (ecosystem.md §2.1, the 1.34 `group`/`resource` labels), storage latency,
//! the watch cache, the fleet's `ocm_` gauges, computed from the watch cache at scrape time, and
//! the gRPC CloudEvents server's `grpc_server_ce_*` family under OCM's names.
//!
//! One [`Metrics`] per hub (tests run several hubs in one process), rendered by [`Metrics::render`]
//! in Prometheus' classic text format (what `promtool check metrics` reads).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use prometheus::core::Collector;
use prometheus::{
    Encoder, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, TextEncoder,
};

use crate::machinery::scheme::{Profile, ResourceType};

/// The labels of one API request (kube-apiserver's RequestInfo, cleaned as its metrics clean
/// it: only served resources and their own subresources are named, so label values are bounded).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestLabels {
    /// `GET`, `LIST`, `WATCH`, `POST`, `PUT`, `PATCH`, `APPLY`, `DELETE`, `DELETECOLLECTION`,
    /// or the method of a non-resource request.
    pub verb: String,
    /// `All` for a dry run, else empty.
    pub dry_run: &'static str,
    /// API group (`""` = core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Plural resource.
    pub resource: String,
    /// Subresource.
    pub subresource: String,
    /// `resource`, `namespace`, `cluster`, or empty for non-resource requests.
    pub scope: &'static str,
}

impl RequestLabels {
    /// The values of [`REQUEST_LABELS`].
    fn values(&self) -> [&str; 8] {
        [
            &self.verb,
            self.dry_run,
            &self.group,
            &self.version,
            &self.resource,
            &self.subresource,
            self.scope,
            COMPONENT,
        ]
    }

    /// The values of [`REQUEST_LABELS`] without `dry_run` (response sizes, long-running).
    fn values_without_dry_run(&self) -> [&str; 7] {
        [
            &self.verb,
            &self.group,
            &self.version,
            &self.resource,
            &self.subresource,
            self.scope,
            COMPONENT,
        ]
    }
}

/// kube-apiserver's `component` label value.
const COMPONENT: &str = "apiserver";

const REQUEST_LABELS: [&str; 8] =
    ["verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component"];

/// kube-apiserver's labels of response sizes and long-running requests (no `dry_run`).
const REQUEST_LABELS_NO_DRY_RUN: [&str; 7] =
    ["verb", "group", "version", "resource", "subresource", "scope", "component"];

/// kube-apiserver's request latency buckets (seconds).
const LATENCY_BUCKETS: [f64; 23] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];

/// Storage operations take well under a millisecond on the embedded store.
const STORAGE_BUCKETS: [f64; 14] =
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// The ManifestWork conditions counted by `ocm_manifestworks`.
pub const WORK_CONDITIONS: [&str; 4] = ["Applied", "Available", "Progressing", "Degraded"];

/// The hub's metrics.
pub struct Metrics {
    registry: prometheus::Registry,
    requests: IntCounterVec,
    durations: HistogramVec,
    sizes: HistogramVec,
    longrunning: IntGaugeVec,
    watch_events: IntCounterVec,
    watch_event_sizes: HistogramVec,
    storage: HistogramVec,
    /// One placement's scheduling pass (`ocm_placement_scheduling_duration_seconds`).
    pub scheduling: Histogram,
    /// CSRs the hub approved, by reason (`ocm_csr_approvals_total`).
    pub csr_approvals: IntCounterVec,
    /// CSRs the signer answered, by result (`ocm_csr_signings_total`).
    pub csr_signings: IntCounterVec,
    /// HTTP/1.1 connections idle with only their TLS session kept
    /// (`ocm_http1_parked_connections`, [`crate::serve::conn::serve_http1`]).
    pub http1_parked: IntGauge,
    /// Whether this replica leads, by lease name (client-go's `leader_election_master_status`).
    pub leader: IntGaugeVec,
    grpc: GrpcFamilies,
    /// The families computed at scrape time (refreshed by the `/metrics` handler).
    pub scraped: Scraped,
    /// The group and resource of each storage prefix.
    kinds: HashMap<String, (String, String)>,
    /// One scrape at a time: each resets and refills the scrape-time gauges.
    pub scrape: std::sync::Mutex<()>,
}

/// The gRPC CloudEvents server's families under OCM sdk-go's (`server/grpc/metrics`) names,
/// labels and buckets: per `consumer` (the cluster), data type and method, unless the per-cluster
/// label is turned off (`consumer` is then absent: one series per data type, method and code).
struct GrpcFamilies {
    called: IntCounterVec,
    processed: IntCounterVec,
    duration: HistogramVec,
    received: IntCounterVec,
    sent: IntCounterVec,
    subscribers: IntGaugeVec,
    /// Whether the families carry the `consumer` label.
    consumer: bool,
}

impl GrpcFamilies {
    /// The families in `r`, with or without the `consumer` label.
    fn new(r: &prometheus::Registry, consumer: bool) -> GrpcFamilies {
        let with = |rest: &[&'static str]| -> Vec<&'static str> {
            consumer.then_some("consumer").into_iter().chain(rest.iter().copied()).collect()
        };
        let call = with(&["data_type", "method"]);
        let call_and_code = with(&["data_type", "method", "grpc_code"]);
        GrpcFamilies {
            called: counter(
                r,
                "grpc_server_ce_called_total",
                "[ALPHA] Total number of RPC requests for cloudevents called on the grpc server.",
                &call,
            ),
            processed: counter(
                r,
                "grpc_server_ce_processed_total",
                "[ALPHA] Total number of RPC requests for cloudevents processed on the server, regardless of success or failure.",
                &call_and_code,
            ),
            duration: histogram(
                r,
                "grpc_server_ce_processing_duration_seconds",
                "[ALPHA] Histogram of the duration of RPC requests for cloudevents processed on the server.",
                &call_and_code,
                prometheus::exponential_buckets(1e-6, 10.0, 10).expect("valid buckets"),
            ),
            received: counter(
                r,
                "grpc_server_ce_msg_received_total",
                "[ALPHA] Total number of messages for cloudevents received on the gRPC server.",
                &call,
            ),
            sent: counter(
                r,
                "grpc_server_ce_msg_sent_total",
                "[ALPHA] Total number of messages for cloudevents sent by the gRPC server.",
                &call,
            ),
            subscribers: gauge(
                r,
                "grpc_server_ce_subscribers",
                "[ALPHA] Number of current subscribers for cloudevents on the gRPC server.",
                &with(&["data_type"]),
            ),
            consumer,
        }
    }

    /// `rest` after the consumer, when the families carry it.
    fn values<'a>(&self, consumer: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
        self.consumer.then_some(consumer).into_iter().chain(rest.iter().copied()).collect()
    }
}

/// The families computed at scrape time.
pub struct Scraped {
    pub inflight: IntGaugeVec,
    pub inqueue: IntGaugeVec,
    pub objects: IntGaugeVec,
    pub cache_capacity: IntGaugeVec,
    pub cache_history: IntGaugeVec,
    pub cache_watchers: IntGaugeVec,
    pub cache_rv: IntGaugeVec,
    pub terminated: IntCounterVec,
    pub clusters: IntGaugeVec,
    pub lease_age: GaugeVec,
    pub works: IntGaugeVec,
    pub placements: IntGaugeVec,
    pub selected: IntGaugeVec,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

fn opts(name: &str, help: &str) -> Opts {
    Opts::new(name, help)
}

/// Registers `c` (names are ours and distinct, so this cannot fail) and returns it.
fn register<C: Collector + Clone + 'static>(registry: &prometheus::Registry, c: C) -> C {
    registry.register(Box::new(c.clone())).expect("metric names are distinct and valid");
    c
}

fn counter(r: &prometheus::Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    register(r, IntCounterVec::new(opts(name, help), labels).expect("valid counter"))
}

fn gauge(r: &prometheus::Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    register(r, IntGaugeVec::new(opts(name, help), labels).expect("valid gauge"))
}

fn histogram(
    r: &prometheus::Registry,
    name: &str,
    help: &str,
    labels: &[&str],
    buckets: Vec<f64>,
) -> HistogramVec {
    let opts = HistogramOpts::new(name, help).buckets(buckets);
    register(r, HistogramVec::new(opts, labels).expect("valid histogram"))
}

impl Metrics {
    /// The metrics of a hub serving `types`.
    pub fn new(types: &[Arc<ResourceType>], profile: Profile, grpc_consumer: bool) -> Metrics {
        let r = prometheus::Registry::new();
        let mut request_and_code = REQUEST_LABELS.to_vec();
        request_and_code.push("code");
        let requests = counter(
            &r,
            "apiserver_request_total",
            "[STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
            &request_and_code,
        );
        let durations = histogram(
            &r,
            "apiserver_request_duration_seconds",
            "[STABLE] Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.",
            &REQUEST_LABELS,
            LATENCY_BUCKETS.to_vec(),
        );
        let sizes = histogram(
            &r,
            "apiserver_response_sizes",
            "[STABLE] Response size distribution in bytes for each group, version, verb, resource, subresource, scope and component.",
            &REQUEST_LABELS_NO_DRY_RUN,
            prometheus::exponential_buckets(1000.0, 10.0, 7).expect("valid buckets"),
        );
        let longrunning = gauge(
            &r,
            "apiserver_longrunning_requests",
            "[STABLE] Gauge of all active long-running apiserver requests broken out by verb, group, version, resource, scope and component. Not all requests are tracked this way.",
            &REQUEST_LABELS_NO_DRY_RUN,
        );
        let watch_labels = ["group", "version", "resource"];
        let watch_events = counter(
            &r,
            "apiserver_watch_events_total",
            "[ALPHA] Number of events sent in watch clients",
            &watch_labels,
        );
        let watch_event_sizes = histogram(
            &r,
            "apiserver_watch_events_sizes",
            "[ALPHA] Watch event size distribution in bytes",
            &watch_labels,
            prometheus::exponential_buckets(1024.0, 2.0, 8).expect("valid buckets"),
        );
        let storage = histogram(
            &r,
            "ocm_storage_request_duration_seconds",
            "Storage request latency in seconds for each operation, group and resource (whichever backend: sled, etcd or memory).",
            &["operation", "group", "resource"],
            STORAGE_BUCKETS.to_vec(),
        );
        let scheduling = register(
            &r,
            Histogram::with_opts(
                HistogramOpts::new(
                    "ocm_placement_scheduling_duration_seconds",
                    "Time one placement's scheduling pass took (filters, prioritizers, groups), in seconds.",
                )
                .buckets(prometheus::exponential_buckets(0.0005, 2.0, 16).expect("valid buckets")),
            )
            .expect("valid histogram"),
        );
        let csr_approvals = counter(
            &r,
            "ocm_csr_approvals_total",
            "CertificateSigningRequests of agents the hub approved by itself, by reason (renewal, trusted_identity).",
            &["reason"],
        );
        let csr_signings = counter(
            &r,
            "ocm_csr_signings_total",
            "Approved CertificateSigningRequests the hub's signer answered, by result (issued, failed).",
            &["result"],
        );
        // Known label values start at zero, so rates and alerts see them before the first one.
        for reason in ["renewal", "trusted_identity"] {
            csr_approvals.with_label_values(&[reason]);
        }
        for result in ["issued", "failed"] {
            csr_signings.with_label_values(&[result]);
        }
        let grpc = GrpcFamilies::new(&r, grpc_consumer);
        let group_resource = ["group", "resource"];
        let scraped = Scraped {
            inflight: gauge(
                &r,
                "apiserver_current_inflight_requests",
                "[STABLE] Number of requests holding an in-flight seat at scrape time, per request kind (readOnly, mutating; the Lease lane has its own seats and is in neither).",
                &["request_kind"],
            ),
            inqueue: gauge(
                &r,
                "apiserver_current_inqueue_requests",
                "[ALPHA] Number of requests waiting in line for a seat at scrape time, per request kind (readOnly, mutating).",
                &["request_kind"],
            ),
            objects: gauge(
                &r,
                "apiserver_resource_objects",
                "[ALPHA] Number of stored objects at the time of last check split by group and resource.",
                &group_resource,
            ),
            cache_capacity: gauge(
                &r,
                "watch_cache_capacity",
                "[ALPHA] Total capacity of watch cache broken by group and resource.",
                &group_resource,
            ),
            cache_history: gauge(
                &r,
                "ocm_watch_cache_history_events",
                "Events held in the watch cache's history ring (a watch may resume from any of them), by group and resource.",
                &group_resource,
            ),
            cache_watchers: gauge(
                &r,
                "ocm_watch_cache_watchers",
                "Watchers registered with the watch cache, by group and resource.",
                &group_resource,
            ),
            cache_rv: gauge(
                &r,
                "apiserver_watch_cache_resource_version",
                "[ALPHA] Current resource version of watch cache broken by group and resource.",
                &group_resource,
            ),
            terminated: counter(
                &r,
                "apiserver_terminated_watchers_total",
                "[ALPHA] Counter of watchers closed due to unresponsiveness broken by group and resource.",
                &group_resource,
            ),
            clusters: gauge(
                &r,
                "ocm_managed_clusters",
                "ManagedClusters by whether the hub accepts them (true, false) and their Available condition (True, False, Unknown).",
                &["accepted", "available"],
            ),
            lease_age: register(
                &r,
                GaugeVec::new(
                    opts(
                        "ocm_managed_cluster_lease_age_seconds",
                        "Seconds since each accepted ManagedCluster's agent last renewed its Lease.",
                    ),
                    &["cluster"],
                )
                .expect("valid gauge"),
            ),
            works: gauge(
                &r,
                "ocm_manifestworks",
                "ManifestWorks by condition type and status (works without the condition count as Unknown).",
                &["condition", "status"],
            ),
            placements: gauge(
                &r,
                "ocm_placements",
                "Placements by whether they are satisfied (PlacementSatisfied True, False, Unknown) or misconfigured.",
                &["satisfied", "misconfigured"],
            ),
            selected: gauge(
                &r,
                "ocm_placement_selected_clusters",
                "Clusters selected by the placements of each namespace (the sum of numberOfSelectedClusters).",
                &["namespace"],
            ),
        };
        let http1_parked = register(
            &r,
            IntGauge::with_opts(opts(
                "ocm_http1_parked_connections",
                "Open HTTP/1.1 connections idle for a second or more, holding only their TLS session until the next request.",
            ))
            .expect("valid gauge"),
        );
        let leader = gauge(
            &r,
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
            &["name"],
        );
        let build = gauge(
            &r,
            "ocm_build_info",
            "A metric with a constant '1' value labeled by the hub's version, git commit and profile.",
            &["version", "git_commit", "profile"],
        );
        let profile = match profile {
            Profile::Hub => "hub",
            Profile::Cluster => "cluster",
        };
        build.with_label_values(&[env!("CARGO_PKG_VERSION"), GIT_COMMIT, profile]).set(1);
        // The standard `process_*` family (CPU, RSS, open files, start time).
        let process = prometheus::process_collector::ProcessCollector::for_self();
        r.register(Box::new(process)).expect("process metric names are distinct from ours");
        let kinds = types
            .iter()
            .filter(|rt| rt.review.is_none() && rt.stored_as.is_none())
            .map(|rt| (rt.prefix.clone(), (rt.group.clone(), rt.plural.clone())))
            .collect();
        Metrics {
            registry: r,
            requests,
            durations,
            sizes,
            longrunning,
            watch_events,
            watch_event_sizes,
            storage,
            scheduling,
            csr_approvals,
            csr_signings,
            http1_parked,
            leader,
            grpc,
            scraped,
            kinds,
            scrape: std::sync::Mutex::new(()),
        }
    }

    /// Records a finished request: its code, duration and (for reads, when known, as kube-
    /// apiserver does) its response size.
    pub fn observe_request(
        &self,
        labels: &RequestLabels,
        code: u16,
        elapsed: Duration,
        size: Option<u64>,
    ) {
        let values = labels.values();
        let mut with_code = values.to_vec();
        let code = code.to_string();
        with_code.push(&code);
        self.requests.with_label_values(&with_code).inc();
        self.durations.with_label_values(&values).observe(elapsed.as_secs_f64());
        if let Some(size) = size.filter(|_| matches!(labels.verb.as_str(), "GET" | "LIST")) {
            self.sizes.with_label_values(&labels.values_without_dry_run()).observe(size as f64);
        }
    }

    /// A long-running request (a watch) began: counted in `apiserver_request_total` now, and in
    /// `apiserver_longrunning_requests` and the latency histogram until the guard is dropped.
    pub fn long_running(self: &Arc<Self>, labels: RequestLabels, code: u16) -> LongRunning {
        let values = labels.values();
        let mut with_code = values.to_vec();
        let code = code.to_string();
        with_code.push(&code);
        self.requests.with_label_values(&with_code).inc();
        self.longrunning.with_label_values(&labels.values_without_dry_run()).inc();
        LongRunning { metrics: Arc::clone(self), labels, started: Instant::now() }
    }

    /// The counters of one watch's events.
    pub fn watch_events(&self, rt: &ResourceType, version: &str) -> WatchEvents {
        let values = [rt.group.as_str(), version, rt.plural.as_str()];
        WatchEvents {
            count: self.watch_events.with_label_values(&values),
            sizes: self.watch_event_sizes.with_label_values(&values),
        }
    }

    /// A gRPC call began: `method` (`Publish`, `Subscribe`) for `data_type` (a served data type,
    /// or `unknown`) from `consumer` (the cluster, or `unknown`), its request received. The
    /// returned guard counts what it sends and records how it ended.
    pub fn grpc_call(
        &self,
        consumer: &str,
        data_type: &'static str,
        method: &'static str,
    ) -> GrpcCall {
        let g = &self.grpc;
        let call = g.values(consumer, &[data_type, method]);
        g.called.with_label_values(&call).inc();
        g.received.with_label_values(&call).inc();
        let subscribed = (method == "Subscribe").then(|| {
            let open = g.subscribers.with_label_values(&g.values(consumer, &[data_type]));
            open.inc();
            open
        });
        GrpcCall {
            processed: g.processed.clone(),
            duration: g.duration.clone(),
            labels: call.iter().map(|v| (*v).to_owned()).collect(),
            sent: g.sent.with_label_values(&call),
            subscribed,
            started: Instant::now(),
            ended: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Removes every gRPC series of `consumer` (a deleted cluster), for each of `data_types`
    /// and `unknown`, each method and each code, so the families do not keep a series per
    /// cluster that ever existed.
    pub fn forget_consumer(&self, consumer: &str, data_types: &[&'static str]) {
        let g = &self.grpc;
        if !g.consumer {
            return;
        }
        let codes: Vec<&str> = (0..=16).map(|c| grpc_code(tonic::Code::from_i32(c))).collect();
        for data_type in data_types.iter().copied().chain(["unknown"]) {
            let _ = g.subscribers.remove_label_values(&[consumer, data_type]);
            for method in ["Publish", "Subscribe"] {
                let call = [consumer, data_type, method];
                let _ = g.called.remove_label_values(&call);
                let _ = g.received.remove_label_values(&call);
                let _ = g.sent.remove_label_values(&call);
                for code in &codes {
                    let ended = [consumer, data_type, method, code];
                    let _ = g.processed.remove_label_values(&ended);
                    let _ = g.duration.remove_label_values(&ended);
                }
            }
        }
    }

    /// The storage observer feeding `ocm_storage_request_duration_seconds`.
    pub fn storage_observer(self: &Arc<Self>) -> Arc<dyn ocm_storage::Observer> {
        Arc::new(StorageObserver(Arc::clone(self)))
    }

    /// The group and resource a storage key belongs to (`("", "")` outside every kind).
    fn kind_of(&self, key: &str) -> (&str, &str) {
        let prefix = crate::machinery::scheme::kind_prefix(key);
        match self.kinds.get(prefix) {
            Some((g, r)) => (g, r),
            None => ("", ""),
        }
    }

    /// Every family in Prometheus' text format, gathered now (the scrape-time families as
    /// their last refresh left them).
    pub fn encode(&self) -> String {
        let mut out = Vec::new();
        // Encoding into a Vec fails only on a family of an unknown type: none here.
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            tracing::warn!(error = %e, "metrics encoding failed");
        }
        String::from_utf8(out).unwrap_or_default()
    }

    /// The group and resource of a kind's storage prefix.
    pub fn kind(&self, prefix: &str) -> Option<(&str, &str)> {
        self.kinds.get(prefix).map(|(g, r)| (g.as_str(), r.as_str()))
    }
}

/// The commit the hub was built from (the build script's `git rev-parse`, or `unknown`).
pub const GIT_COMMIT: &str = env!("OCM_GIT_COMMIT");

/// Held while a long-running request is served; records its duration when dropped.
pub struct LongRunning {
    metrics: Arc<Metrics>,
    labels: RequestLabels,
    started: Instant,
}

impl Drop for LongRunning {
    fn drop(&mut self) {
        let m = &self.metrics;
        m.longrunning.with_label_values(&self.labels.values_without_dry_run()).dec();
        let elapsed = self.started.elapsed().as_secs_f64();
        m.durations.with_label_values(&self.labels.values()).observe(elapsed);
    }
}

/// One gRPC call in progress (see [`Metrics::grpc_call`]). A call dropped before it ended (the
/// client went away) ends as `Canceled`.
pub struct GrpcCall {
    processed: IntCounterVec,
    duration: HistogramVec,
    /// The call's labels before `grpc_code`.
    labels: Vec<String>,
    sent: prometheus::IntCounter,
    subscribed: Option<prometheus::IntGauge>,
    started: Instant,
    ended: std::sync::atomic::AtomicBool,
}

impl GrpcCall {
    /// One message (an event, or Publish's reply) was sent.
    pub fn sent(&self) {
        self.sent.inc();
    }

    /// The call ended with `code` (only the first end counts): counted and timed (a Subscribe
    /// from its request to its stream's end, as OCM's interceptor times it), and a
    /// subscriber gone.
    pub fn end(&self, code: tonic::Code) {
        if self.ended.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return;
        }
        let mut values: Vec<&str> = self.labels.iter().map(String::as_str).collect();
        values.push(grpc_code(code));
        self.processed.with_label_values(&values).inc();
        let elapsed = self.started.elapsed().as_secs_f64();
        self.duration.with_label_values(&values).observe(elapsed);
        if let Some(open) = &self.subscribed {
            open.dec();
        }
    }
}

impl Drop for GrpcCall {
    fn drop(&mut self) {
        self.end(tonic::Code::Cancelled);
    }
}

/// A status code's name as gRPC-Go prints it (the `grpc_code` label values of OCM's metrics).
fn grpc_code(code: tonic::Code) -> &'static str {
    use tonic::Code;
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "Canceled",
        Code::Unknown => "Unknown",
        Code::InvalidArgument => "InvalidArgument",
        Code::DeadlineExceeded => "DeadlineExceeded",
        Code::NotFound => "NotFound",
        Code::AlreadyExists => "AlreadyExists",
        Code::PermissionDenied => "PermissionDenied",
        Code::ResourceExhausted => "ResourceExhausted",
        Code::FailedPrecondition => "FailedPrecondition",
        Code::Aborted => "Aborted",
        Code::OutOfRange => "OutOfRange",
        Code::Unimplemented => "Unimplemented",
        Code::Internal => "Internal",
        Code::Unavailable => "Unavailable",
        Code::DataLoss => "DataLoss",
        Code::Unauthenticated => "Unauthenticated",
    }
}

/// One watch's event counter and size histogram (looked up once per watch).
pub struct WatchEvents {
    count: prometheus::IntCounter,
    sizes: Histogram,
}

impl WatchEvents {
    /// One event of `bytes` was sent.
    pub fn sent(&self, bytes: usize) {
        self.count.inc();
        self.sizes.observe(bytes as f64);
    }
}

struct StorageObserver(Arc<Metrics>);

impl ocm_storage::Observer for StorageObserver {
    fn observe(&self, op: ocm_storage::Operation, key: &str, elapsed: Duration) {
        let (group, resource) = self.0.kind_of(key);
        self.0
            .storage
            .with_label_values(&[op.as_str(), group, resource])
            .observe(elapsed.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gathered(m: &Metrics, name: &str) -> Vec<prometheus::proto::Metric> {
        m.registry
            .gather()
            .into_iter()
            .find(|f| f.name() == name)
            .map(|f| f.get_metric().to_vec())
            .unwrap_or_default()
    }

    /// Every recording path with its label arity (a wrong arity panics, in a watch's drop
    /// silently): a request, a watch begun and ended, watch events, a storage call.
    #[test]
    fn every_family_records_with_its_labels() {
        let m = Arc::new(Metrics::new(&[], Profile::Hub, true));
        let labels = RequestLabels {
            verb: "LIST".into(),
            group: "cluster.open-cluster-management.io".into(),
            version: "v1".into(),
            resource: "managedclusters".into(),
            scope: "cluster",
            ..RequestLabels::default()
        };
        m.observe_request(&labels, 200, Duration::from_millis(3), Some(1500));
        let post = RequestLabels { verb: "POST".into(), ..labels.clone() };
        m.observe_request(&post, 201, Duration::from_millis(3), Some(1500));
        let watch = RequestLabels { verb: "WATCH".into(), ..labels.clone() };
        let guard = m.long_running(watch, 200);
        assert_eq!(gathered(&m, "apiserver_longrunning_requests")[0].get_gauge().get_value(), 1.0);
        drop(guard);
        assert_eq!(gathered(&m, "apiserver_longrunning_requests")[0].get_gauge().get_value(), 0.0);
        assert_eq!(gathered(&m, "apiserver_request_total").len(), 3);
        // Sizes of reads only.
        let sizes = gathered(&m, "apiserver_response_sizes");
        assert_eq!(sizes.len(), 1);
        assert_eq!(sizes[0].get_histogram().get_sample_count(), 1);
        assert!(sizes[0].get_label().iter().all(|l| l.name() != "dry_run"));
        let durations = gathered(&m, "apiserver_request_duration_seconds");
        assert_eq!(durations.iter().map(|d| d.get_histogram().get_sample_count()).sum::<u64>(), 3);
        let rt_events = m.watch_events.with_label_values(&["g", "v1", "r"]);
        rt_events.inc();
        m.storage_observer().observe(
            ocm_storage::Operation::Get,
            "/registry/x/y/z",
            Duration::from_micros(300),
        );
        assert_eq!(gathered(&m, "ocm_storage_request_duration_seconds").len(), 1);
        // Known label values exist at zero from the start.
        assert_eq!(gathered(&m, "ocm_csr_approvals_total").len(), 2);
    }

    /// A gRPC call's families: a Publish and a Subscribe end with their code and duration; a
    /// Subscribe counts what it sends and its open stream, and ends as `Canceled` when dropped
    /// unended. Every series names its consumer.
    #[test]
    fn grpc_calls_record_their_end() {
        const WORKS: &str = "io.open-cluster-management.works.v1alpha1.manifestbundles";
        let m = Metrics::new(&[], Profile::Hub, true);
        m.grpc_call("c1", WORKS, "Publish").end(tonic::Code::PermissionDenied);
        let sub = m.grpc_call("c2", WORKS, "Subscribe");
        sub.sent();
        sub.sent();
        let open =
            |m: &Metrics| gathered(m, "grpc_server_ce_subscribers")[0].get_gauge().get_value();
        assert_eq!(open(&m), 1.0);
        drop(sub);
        assert_eq!(open(&m), 0.0);
        let series = |m: &Metrics, name: &str| -> Vec<(String, String, String, u64)> {
            let mut out: Vec<_> = gathered(m, name)
                .iter()
                .map(|s| {
                    let label = |n: &str| {
                        s.get_label().iter().find(|l| l.name() == n).map(|l| l.value().to_owned())
                    };
                    let count = if name.ends_with("_seconds") {
                        s.get_histogram().get_sample_count()
                    } else {
                        s.get_counter().get_value() as u64
                    };
                    (
                        label("consumer").unwrap_or_else(|| "-".into()),
                        label("method").unwrap_or_default(),
                        label("grpc_code").unwrap_or_default(),
                        count,
                    )
                })
                .collect();
            out.sort();
            out
        };
        let ended = vec![
            ("c1".into(), "Publish".into(), "PermissionDenied".into(), 1),
            ("c2".into(), "Subscribe".into(), "Canceled".into(), 1),
        ];
        assert_eq!(series(&m, "grpc_server_ce_processed_total"), ended);
        assert_eq!(series(&m, "grpc_server_ce_processing_duration_seconds"), ended);
        let sent = series(&m, "grpc_server_ce_msg_sent_total");
        // A refused Publish sent no reply.
        assert_eq!(
            sent,
            [
                ("c1".into(), "Publish".into(), String::new(), 0),
                ("c2".into(), "Subscribe".into(), String::new(), 2)
            ]
        );
        // A deleted cluster's series go; the others stay.
        m.forget_consumer("c1", &[WORKS]);
        for family in [
            "grpc_server_ce_called_total",
            "grpc_server_ce_processed_total",
            "grpc_server_ce_processing_duration_seconds",
            "grpc_server_ce_msg_received_total",
            "grpc_server_ce_msg_sent_total",
        ] {
            let consumers: Vec<String> = series(&m, family).into_iter().map(|s| s.0).collect();
            assert_eq!(consumers, ["c2"], "{family}");
        }
        // Without the per-cluster label: the same calls, no `consumer` anywhere.
        let m = Metrics::new(&[], Profile::Hub, false);
        m.grpc_call("c1", WORKS, "Publish").end(tonic::Code::Ok);
        m.grpc_call("c2", WORKS, "Publish").end(tonic::Code::Ok);
        assert_eq!(
            series(&m, "grpc_server_ce_processed_total"),
            [("-".into(), "Publish".into(), "OK".into(), 2)]
        );
    }
}
