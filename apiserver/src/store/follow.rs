//! The one way to follow a kind in the watch cache (kube-runtime's watcher): the kind's
//! objects, then its changes, and after falling behind (the cache ends a watcher whose buffer
//! is full, and every watcher on a relist) a new subscription, tried again with the one
//! backoff until the cache takes it. Controllers, the RBAC follower and the gRPC fan-out
//! follow the cache through here.

use std::sync::Arc;

use crate::machinery::backoff::{Backoff, Retries};
use crate::store::cache::{Cache, CacheEvent, Msg, Start};

/// Where a follower starts, and starts again after falling behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// From a snapshot of the kind, every time: the follower rebuilds what it holds from it,
    /// so what was deleted while it was behind is gone from the next snapshot.
    Snapshot,
    /// From now; after falling behind, from the change after the last one it saw. When the
    /// cache's history no longer holds that change, the follower is told it [`Seen::Lost`]
    /// its place and goes on from now.
    AfterLast,
}

/// What a follower is shown.
#[derive(Debug)]
pub enum Seen<'a> {
    /// Every object of the kind, as `Added` events ([`Resume::Snapshot`] only).
    Snapshot(&'a [Arc<CacheEvent>]),
    /// One change, in revision order.
    Change(&'a Arc<CacheEvent>),
    /// Changes were missed ([`Resume::AfterLast`] only): what the follower derived from the
    /// kind may be stale.
    Lost,
}

/// Follows the kind under `prefix` for as long as the task runs, showing `on` what it sees.
pub async fn follow(
    cache: Arc<Cache>,
    prefix: String,
    resume: Resume,
    mut on: impl FnMut(Seen<'_>) + Send,
) {
    let mut retries = Retries::new(Backoff::RESUBSCRIBE);
    let mut last = cache.revision();
    loop {
        let start = match resume {
            Resume::Snapshot => Start::Snapshot,
            Resume::AfterLast => Start::After(last),
        };
        let mut sub = match cache.subscribe(&prefix, start, None) {
            Ok(sub) => sub,
            Err(e) => {
                if resume == Resume::AfterLast && e.code == 410 {
                    tracing::debug!(%prefix, last, "a cache follower lost its place");
                    on(Seen::Lost);
                    last = cache.revision();
                } else {
                    tracing::debug!(%prefix, error = %e.message, "a cache follower waits to subscribe");
                }
                tokio::time::sleep(retries.next_delay()).await;
                continue;
            }
        };
        retries.reset();
        match resume {
            Resume::Snapshot => on(Seen::Snapshot(&sub.initial)),
            Resume::AfterLast => {
                for ev in &sub.initial {
                    on(Seen::Change(ev));
                }
            }
        }
        while let Some(msg) = sub.live.recv().await {
            if let Msg::Event(ev) = msg {
                on(Seen::Change(&ev));
                last = ev.rev;
            }
        }
        tracing::debug!(%prefix, last, "a cache follower fell behind and subscribes again");
    }
}
