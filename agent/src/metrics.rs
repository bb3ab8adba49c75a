//! The agent's Prometheus metrics (`klusterlet --metrics-listen ADDR`): lease renewals, status
//! reports and certificate rotations with their outcomes and latency, the certificate's expiry,
//! build info and the `process_*` family, served as plain-text `GET /metrics` over HTTP/1.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, TextEncoder,
};

/// Latency buckets of hub requests (seconds): 1 ms to 10 s.
const BUCKETS: [f64; 13] =
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// What the agent does with the hub, as the `operation` label names it.
pub const OPERATIONS: [&str; 3] = ["lease", "status", "rotation"];

/// One agent's metrics.
pub struct Metrics {
    registry: prometheus::Registry,
    /// Hub requests by what they were for (`lease`, `status`, `rotation`) and outcome.
    pub requests: IntCounterVec,
    latency: HistogramVec,
    /// The agent's certificate's `notAfter`, Unix seconds.
    pub certificate_expiry: IntGauge,
    /// The agent's certificate's `notBefore`, Unix seconds.
    pub certificate_start: IntGauge,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// A fresh set.
    pub fn new() -> Metrics {
        let registry = prometheus::Registry::new();
        let requests = IntCounterVec::new(
            Opts::new(
                "ocm_agent_hub_requests_total",
                "The agent's work with the hub, by what it was (lease renewal, status report, certificate rotation) and its result (success, failure).",
            ),
            &["operation", "result"],
        )
        .expect("valid counter");
        let latency = HistogramVec::new(
            HistogramOpts::new(
                "ocm_agent_hub_request_duration_seconds",
                "How long the agent's work with the hub took, by operation, in seconds.",
            )
            .buckets(BUCKETS.to_vec()),
            &["operation"],
        )
        .expect("valid histogram");
        let certificate_expiry = IntGauge::new(
            "ocm_agent_certificate_expiration_timestamp_seconds",
            "When the agent's hub client certificate expires (Unix seconds); it is rotated when a fifth of its lifetime is left.",
        )
        .expect("valid gauge");
        let certificate_start = IntGauge::new(
            "ocm_agent_certificate_not_before_timestamp_seconds",
            "When the agent's hub client certificate became valid (Unix seconds): with the expiry, its lifetime.",
        )
        .expect("valid gauge");
        // Every operation and result starts at zero, so an agent that never succeeds still has
        // a success series (at 0) for rates and alerts to compare with.
        for operation in OPERATIONS {
            for result in ["success", "failure"] {
                requests.with_label_values(&[operation, result]);
            }
            latency.with_label_values(&[operation]);
        }
        let info = IntGauge::with_opts(
            Opts::new(
                "ocm_agent_build_info",
                "A metric with a constant '1' value labeled by the agent's version.",
            )
            .const_label("version", env!("CARGO_PKG_VERSION")),
        )
        .expect("valid gauge");
        info.set(1);
        for c in [
            Box::new(requests.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(latency.clone()),
            Box::new(certificate_expiry.clone()),
            Box::new(certificate_start.clone()),
            Box::new(info),
            Box::new(prometheus::process_collector::ProcessCollector::for_self()),
        ] {
            registry.register(c).expect("metric names are distinct and valid");
        }
        Metrics { registry, requests, latency, certificate_expiry, certificate_start }
    }

    /// The certificate in use: valid from `not_before` to `not_after` (Unix seconds).
    pub fn certificate(&self, not_before: i64, not_after: i64) {
        self.certificate_start.set(not_before);
        self.certificate_expiry.set(not_after);
    }

    /// Records one `operation` that took `elapsed` and succeeded or not.
    pub fn observe(&self, operation: &str, elapsed: Duration, ok: bool) {
        let result = if ok { "success" } else { "failure" };
        self.requests.with_label_values(&[operation, result]).inc();
        self.latency.with_label_values(&[operation]).observe(elapsed.as_secs_f64());
    }

    /// Everything in Prometheus' text format.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            tracing::warn!(error = %e, "metrics encoding failed");
        }
        String::from_utf8(out).unwrap_or_default()
    }
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

/// Serves `GET /metrics` (and 404 for anything else) on `listener` until the task is dropped.
pub async fn serve(listener: tokio::net::TcpListener, metrics: Arc<Metrics>) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "metrics accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let metrics = Arc::clone(&metrics);
        tokio::spawn(async move {
            let service =
                hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let metrics = Arc::clone(&metrics);
                    async move { Ok::<_, Infallible>(answer(&req, &metrics)) }
                });
            let io = hyper_util::rt::TokioIo::new(stream);
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(io, service);
            let _ = conn.await;
        });
    }
}

fn answer<B>(req: &hyper::Request<B>, metrics: &Metrics) -> hyper::Response<Full<Bytes>> {
    let (status, kind, body) = match (req.method(), req.uri().path()) {
        (&http::Method::GET, "/metrics") => {
            (http::StatusCode::OK, "text/plain; version=0.0.4; charset=utf-8", metrics.render())
        }
        (&http::Method::GET, "/healthz") => (http::StatusCode::OK, "text/plain", "ok".to_owned()),
        _ => (http::StatusCode::NOT_FOUND, "text/plain", "404 page not found\n".to_owned()),
    };
    hyper::Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, kind)
        .body(Full::new(Bytes::from(body)))
        .expect("static headers are valid")
}
