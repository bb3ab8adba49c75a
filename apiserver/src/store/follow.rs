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
    /// From the change after this revision; after falling behind, from the change after the
    /// last one it saw. When the cache's history no longer holds that change, the follower is
    /// told it [`Seen::Lost`] its place and goes on from the cache's revision then.
    After(u64),
}

/// What a follower is shown.
#[derive(Debug)]
pub enum Seen<'a> {
    /// Every object of the kind, as `Added` events ([`Resume::Snapshot`] only).
    Snapshot(&'a [Arc<CacheEvent>]),
    /// One change, in revision order.
    Change(&'a Arc<CacheEvent>),
    /// Changes were missed ([`Resume::After`] only): what the follower derived from the kind
    /// may be stale.
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
    let mut last = match resume {
        Resume::Snapshot => 0,
        Resume::After(rev) => rev,
    };
    loop {
        let start = match resume {
            Resume::Snapshot => Start::Snapshot,
            Resume::After(_) => Start::After(last),
        };
        let mut sub = match cache.subscribe(&prefix, start, None) {
            Ok(sub) => sub,
            Err(e) => {
                if matches!(resume, Resume::After(_)) && e.code == 410 {
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
            Resume::After(_) => {
                for ev in &sub.initial {
                    on(Seen::Change(ev));
                }
            }
        }
        while let Some(msg) = sub.live.recv().await {
            // One revision's changes come whole, so `last` is never a revision seen in part.
            if let Msg::Events(events) = msg {
                for ev in events.iter() {
                    on(Seen::Change(ev));
                    last = ev.rev;
                }
            }
        }
        tracing::debug!(%prefix, last, "a cache follower fell behind and subscribes again");
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tokio::sync::mpsc;

    use super::*;
    use crate::machinery::background::Background;
    use crate::machinery::scheme::{Profile, ResourceType, Scheme};
    use crate::store::registry::{Registry, WriteOptions};

    async fn registry(background: &Background) -> (Registry, Arc<ResourceType>) {
        let engine = ocm_storage::Engine::Memory(Default::default());
        let storage = ocm_storage::Storage::open(engine).await.unwrap();
        let scheme = Arc::new(Scheme::new(Profile::Hub));
        let registry =
            Registry::new(storage, scheme, Default::default(), background).await.unwrap();
        let rt = Arc::clone(registry.scheme.lookup("", "v1", "namespaces").unwrap());
        (registry, rt)
    }

    async fn create(registry: &Registry, rt: &ResourceType, name: &str) {
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        registry.create(rt, "", ns, &WriteOptions::default()).await.unwrap();
    }

    /// Follows `rt` in the background, sending one line per object or change seen.
    fn lines(
        registry: &Registry,
        rt: &ResourceType,
        resume: Resume,
        background: &Background,
    ) -> mpsc::UnboundedReceiver<String> {
        let (tx, rx) = mpsc::unbounded_channel();
        let seen = move |seen: Seen<'_>| match seen {
            Seen::Snapshot(objects) => {
                let names: Vec<_> = objects.iter().map(|e| e.object.namespace_name().1).collect();
                let _ = tx.send(format!("snapshot {}", names.join(",")));
            }
            Seen::Change(ev) => {
                let _ = tx.send(format!("{:?} {}", ev.kind, ev.object.namespace_name().1));
            }
            Seen::Lost => {
                let _ = tx.send("lost".to_owned());
            }
        };
        let cache = Arc::clone(&registry.cache);
        background.spawn(follow(cache, rt.prefix.clone(), resume, seen));
        rx
    }

    #[tokio::test]
    async fn a_snapshot_follower_sees_every_object_then_each_change() {
        let background = Background::new();
        let (registry, rt) = registry(&background).await;
        create(&registry, &rt, "before").await;
        registry.cache.sync().await.unwrap();
        let mut seen = lines(&registry, &rt, Resume::Snapshot, &background);
        assert_eq!(seen.recv().await.unwrap(), "snapshot before");
        create(&registry, &rt, "after").await;
        assert_eq!(seen.recv().await.unwrap(), "Added after");
        background.stop().await;
    }

    #[tokio::test]
    async fn a_follower_from_a_revision_sees_only_the_changes_after_it() {
        let background = Background::new();
        let (registry, rt) = registry(&background).await;
        create(&registry, &rt, "before").await;
        registry.cache.sync().await.unwrap();
        let now = registry.cache.revision();
        let mut seen = lines(&registry, &rt, Resume::After(now), &background);
        create(&registry, &rt, "after").await;
        assert_eq!(seen.recv().await.unwrap(), "Added after");
        background.stop().await;
    }
}
