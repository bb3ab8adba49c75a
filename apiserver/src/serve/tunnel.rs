//! The hub's end of the cluster proxy's tunnels (`ocm_proto::tunnel`): a klusterlet's TLS
//! connection that chose the tunnel's ALPN protocol is taken here instead of being served as
//! HTTP. The hub checks who opened it (an agent certificate of an accepted cluster, parsed
//! exactly), then becomes the connection's HTTP/2 client and keeps its request handle under
//! the cluster's name until the connection ends, the certificate expires, or the same
//! cluster's agent opens a newer one. `serve::rest`'s proxy handler sends each proxied request
//! as one stream on it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::body::Body;
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};

use tokio::io::{AsyncRead, AsyncWrite};

use crate::auth::tls::{Peer, PeerInfo};
use crate::machinery::requester::UserInfo;
use crate::store::registry::Registry;

/// How often the hub pings an open tunnel, and how long it waits for the answer: a tunnel
/// whose agent went away without closing is found and dropped.
const KEEPALIVE: Duration = Duration::from_secs(30);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest HTTP/2 frame the hub takes on a tunnel.
const MAX_FRAME: u32 = 256 * 1024;

/// The open tunnels, one per cluster.
#[derive(Debug, Default)]
pub struct Tunnels {
    open: Mutex<HashMap<String, Open>>,
    next: AtomicU64,
}

#[derive(Debug)]
struct Open {
    id: u64,
    send: SendRequest<Body>,
}

impl Tunnels {
    /// The request handle of `cluster`'s tunnel, if one is open.
    pub fn get(&self, cluster: &str) -> Option<SendRequest<Body>> {
        let open = self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        open.get(cluster).map(|o| o.send.clone()).filter(|s| !s.is_closed())
    }

    /// Keeps `send` as `cluster`'s tunnel (a newer connection of the same agent replaces the
    /// older one, which ends once its open streams do); returns its id for [`Tunnels::remove`].
    fn insert(&self, cluster: &str, send: SendRequest<Body>) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let mut open = self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        open.insert(cluster.to_owned(), Open { id, send });
        id
    }

    /// Forgets `cluster`'s tunnel `id`, unless a newer one took its place.
    fn remove(&self, cluster: &str, id: u64) {
        let mut open = self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if open.get(cluster).is_some_and(|o| o.id == id) {
            open.remove(cluster);
        }
    }
}

/// Whether `cluster` exists and the hub accepts its agents (`hubAcceptsClient`), from the
/// watch cache.
pub fn accepted(registry: &Registry, cluster: &str) -> Option<bool> {
    let rt =
        registry.scheme.lookup("cluster.open-cluster-management.io", "v1", "managedclusters")?;
    let obj = registry.cached(rt, "", cluster)?;
    let value = obj.value();
    Some(value.pointer("/spec/hubAcceptsClient").and_then(serde_json::Value::as_bool) == Some(true))
}

/// The cluster whose agent presented `who`, and until when its certificate is valid, if it is
/// an agent certificate (`system:open-cluster-management:<cluster>:<agent>` in that cluster's
/// group).
fn agent(who: &Peer) -> Option<(&UserInfo, &str, i64)> {
    let Peer::User { user, not_after } = who else { return None };
    let cluster = crate::auth::visibility::agent_cluster(user)?;
    Some((user, cluster, *not_after))
}

/// Serves one tunnel connection until it ends: refused (closed) unless an accepted cluster's
/// agent opened it; otherwise kept as that cluster's tunnel until the agent closes it, stops
/// answering pings, or its certificate expires.
pub async fn serve<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    stream: S,
    who: PeerInfo,
    peer: SocketAddr,
    tunnels: std::sync::Arc<Tunnels>,
    registry: Registry,
) {
    let Some((user, cluster, not_after)) = agent(&who) else {
        tracing::info!(%peer, "tunnel refused: not a cluster agent's certificate");
        return;
    };
    if accepted(&registry, cluster) != Some(true) {
        tracing::info!(%peer, %cluster, user = %user.name, "tunnel refused: the cluster is not accepted");
        return;
    }
    let handshake = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .timer(TokioTimer::new())
        .keep_alive_interval(KEEPALIVE)
        .keep_alive_timeout(KEEPALIVE_TIMEOUT)
        .keep_alive_while_idle(true)
        // Answers (long lists) come in large frames under a window sized to the link, not
        // in 16 KiB frames each waiting on the last window update.
        .max_frame_size(MAX_FRAME)
        .adaptive_window(true)
        .handshake::<_, Body>(TokioIo::new(stream))
        .await;
    let (send, conn) = match handshake {
        Ok(pair) => pair,
        Err(e) => {
            tracing::debug!(%peer, %cluster, error = %e, "tunnel handshake failed");
            return;
        }
    };
    let id = tunnels.insert(cluster, send);
    tracing::info!(%peer, %cluster, "cluster proxy tunnel open");
    let left = not_after.saturating_sub(crate::machinery::clock::now().unix_timestamp());
    let expires = Duration::from_secs(u64::try_from(left).unwrap_or(0));
    tokio::select! {
        ended = conn => if let Err(e) = ended {
            tracing::debug!(%peer, %cluster, error = %e, "tunnel ended");
        },
        () = tokio::time::sleep(expires) => {
            tracing::info!(%peer, %cluster, "tunnel closed: the agent's certificate expired");
        }
    }
    tunnels.remove(cluster, id);
    tracing::info!(%peer, %cluster, "cluster proxy tunnel closed");
}
