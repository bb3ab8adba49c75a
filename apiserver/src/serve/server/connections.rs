//! How connections come in and are served: the accept loop with its connection cap (fitted to
//! the open-file limit), the TLS handshake, the HTTP/1 and HTTP/2 settings, and one HTTPS
//! connection's requests handed to the REST router.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use prometheus::IntGauge;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt as _;

use super::{
    DEFAULT_MAX_CONNECTIONS, MAX_CONCURRENT_STREAMS, MAX_HEADER_LIST_BYTES, ServeConfig, Timeouts,
    raise_open_file_limit,
};
use crate::auth::tls::{PeerInfo, Tls};
use crate::machinery::background::Background;
use crate::serve::conn::{HeadDeadline, Requests, Tracked};
use crate::serve::rest::ApiState;

/// Serves the REST API on `listener` until `shutdown` resolves.
pub(super) async fn serve_https(
    config: &ServeConfig,
    state: &Arc<ApiState>,
    listener: TcpListener,
    acceptor: Acceptor,
    background: &Background,
    shutdown: impl Future<Output = ()>,
) {
    let api = crate::serve::rest::router(Arc::clone(state));
    let router = match config.routes {
        Some(routes) => routes(state).merge(api),
        None => api,
    };
    let parked = state.metrics.http1_parked.clone();
    let timeouts = config.timeouts;
    let state = Arc::clone(state);
    accept_loop(listener, acceptor, background, shutdown, move |stream, who, peer| {
        let tunnel = stream.get_ref().1.alpn_protocol() == Some(ocm_proto::tunnel::ALPN);
        let (router, parked, state) = (router.clone(), parked.clone(), Arc::clone(&state));
        async move {
            if tunnel {
                // A klusterlet's cluster proxy tunnel: not HTTP from here on.
                let (tunnels, registry) = (Arc::clone(&state.tunnels), state.registry.clone());
                Box::pin(crate::serve::tunnel::serve(stream, who, peer, tunnels, registry)).await;
            } else {
                serve_connection(stream, who, peer, router, parked, timeouts).await;
            }
        }
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
        let (parts, body) = req.into_parts();
        let http1 = parts.version < http::Version::HTTP_2;
        let headers = parts.headers.clone();
        let (body, rest) = crate::serve::unread::returning(body);
        let call = router.clone().oneshot(http::Request::from_parts(parts, Body::new(body)));
        let requests = Arc::clone(&requests);
        // Boxed: an HTTP/1 connection hands its service from one hyper state to the
        // next (`conn::serve_http1`), which needs an `Unpin` future.
        Box::pin(async move {
            let mut resp = call.await?;
            // An answer given before its request body was read (see `serve::unread`).
            if !crate::serve::unread::settle(rest, &headers).await && http1 {
                resp.headers_mut()
                    .insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
                requests.linger();
            }
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

/// The connection cap the process can honour: `wanted`, lowered to the open-file limit (raised
/// to the hard one first, [`raise_open_file_limit`]) less [`FDS_RESERVED`]. Without this a
/// fleet that opens more connections than the process has descriptors for takes the
/// descriptors storage needs: an fsync that cannot open its directory fails, and the store
/// refuses all further work.
pub(super) fn connection_cap(wanted: usize) -> usize {
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
}
