//! Restore: a new store made from a snapshot of another (keys and values as one list at one
//! revision, as a backup reads them), on any backend.
//!
//! A restored store starts past the snapshot: every key is written at a revision above the one
//! the caller names (the snapshot's, plus room for whatever the original wrote after it), and
//! that point is also its compaction revision. So every read and watch that names a revision
//! of the original store is `Compacted` (a client relists), and every revision the restored
//! store issues is newer than any the original did: nobody resumes into a history that differs
//! from the one they saw.
//!
//! The embedded backends store the keys straight into their records at one revision, as one
//! commit would, with no events ([`crate::local`]). etcd numbers its own revisions, so the keys
//! are written in transactions and an offset is recorded under the prefix (`<prefix>!restore`)
//! that the etcd backend adds to every revision from then on ([`crate::offset`]). The record's
//! last write ends the restore, so its revision is the restored store's (and, as the newest
//! revision, what a hub's watch cache finds itself at when it starts); a hub opening a prefix
//! whose restore did not finish is refused.

use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt as _, TryStreamExt as _};

use crate::engine::{Engine, EtcdOptions};
use crate::error::{Error, Result};
use crate::offset::{Offset, Shift};
use crate::{
    KeyValue, ListRequest, MAX_COMMIT_BYTES, MAX_COMMIT_KEYS, MAX_VALUE_BYTES, Revision, Storage,
    Store, Write,
};

/// The key, under an etcd backend's prefix, of what a restore recorded: outside every key the
/// contract allows (keys start with `/`), so no list or watch sees it.
const MARKER: &str = "!restore";

/// What the marker says, in its text form (readable with `etcdctl get`).
const MARKER_FORMAT: &str = "ocm-storage/restore/1";

/// Transactions of a restore into etcd in flight at once.
const ETCD_PARALLEL: usize = 4;

/// A restore in progress: keys go in with [`Restore::put`], in ascending order, and
/// [`Restore::finish`] makes the store.
pub struct Restore {
    target: Target,
    /// The last key put.
    last_key: Option<String>,
}

enum Target {
    /// An embedded store: every key at `at`.
    Local { store: Storage, at: Revision },
    /// An etcd prefix: the backend itself (unshifted), the offset and the marker written.
    Etcd { raw: Arc<dyn Store>, offset: u64, marker: KeyValue },
}

impl std::fmt::Debug for Restore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Restore").field("last_key", &self.last_key).finish_non_exhaustive()
    }
}

impl Storage {
    /// Begins a restore into the store `engine` names, which must be empty (no key, no
    /// revision written; for etcd, nothing under the prefix): else [`Error::NotEmpty`]. Every
    /// key restored gets a revision above `after`; see the crate docs.
    pub async fn restore(engine: Engine, after: Revision) -> Result<Restore> {
        let at = Revision(after.0.checked_add(1).ok_or_else(|| Error::Restore {
            reason: format!("revision {after} leaves no room"),
        })?);
        let target = match engine {
            Engine::Etcd(options) => etcd_target(options, at).await?,
            local => {
                let what = match &local {
                    Engine::Sled(options) => options.path.display().to_string(),
                    _ => "the store".to_owned(),
                };
                let store = Storage::open(local).await?;
                let first = ListRequest {
                    prefix: "/",
                    start_after: None,
                    limit: 1,
                    revision: None,
                    count_remaining: false,
                };
                let revision = store.inner.current_revision().await?;
                if revision != Revision::ZERO || !store.inner.list(first).await?.items.is_empty() {
                    return Err(Error::NotEmpty { target: what });
                }
                Target::Local { store, at }
            }
        };
        Ok(Restore { target, last_key: None })
    }
}

impl Restore {
    /// Stores `items` (key and value), whose keys follow every key put before, in ascending
    /// order.
    pub async fn put(&mut self, items: Vec<(String, Bytes)>) -> Result<()> {
        for (key, value) in &items {
            crate::key::validate_key(key)?;
            if value.len() > MAX_VALUE_BYTES {
                return Err(Error::TooLarge {
                    key: key.clone(),
                    size: value.len(),
                    limit: MAX_VALUE_BYTES,
                });
            }
            if let Some(last) = self.last_key.as_ref().filter(|last| *last >= key) {
                return Err(Error::Restore {
                    reason: format!("key {key:?} comes after {last:?}: keys must ascend"),
                });
            }
            self.last_key = Some(key.clone());
        }
        match &self.target {
            Target::Local { store, at } => store.inner.import(*at, items).await,
            Target::Etcd { raw, .. } => {
                futures::stream::iter(etcd_batches(items))
                    .map(|batch| {
                        let raw = Arc::clone(raw);
                        async move {
                            match batch {
                                Batch::One(key, value) => raw.create(&key, value).await.map(drop),
                                Batch::Many(writes) => raw.commit(writes).await.map(drop),
                            }
                        }
                    })
                    .buffer_unordered(ETCD_PARALLEL)
                    .try_collect::<()>()
                    .await
            }
        }
    }

    /// Finishes the restore: the store, and its revision (also its compaction revision; every
    /// key restored has a revision at or below it and above the `after` of
    /// [`Storage::restore`]).
    pub async fn finish(self) -> Result<(Storage, Revision)> {
        match self.target {
            Target::Local { store, at } => {
                store.inner.finish_import(at).await?;
                Ok((store, at))
            }
            Target::Etcd { raw, offset, marker } => {
                // The marker's last write is the restore's last: its revision is the floor.
                let done =
                    raw.update(MARKER, encode_marker(offset, true), marker.mod_revision).await?;
                let shift = Shift { offset, floor: done.mod_revision.0.saturating_add(offset) };
                let floor = shift.floor;
                let inner: Arc<dyn Store> = Arc::new(Offset { inner: raw, shift });
                Ok((Storage { inner, observer: None, fence: None }, Revision(floor)))
            }
        }
    }
}

/// What one etcd request of a restore writes.
#[derive(Debug, PartialEq, Eq)]
enum Batch {
    /// One key, created by itself: a value too large to share a transaction (or the last).
    One(String, Bytes),
    /// Several keys, one transaction of creates.
    Many(Vec<Write>),
}

/// The items as transactions of creates within the commit limits.
fn etcd_batches(items: Vec<(String, Bytes)>) -> Vec<Batch> {
    let mut groups: Vec<Vec<(String, Bytes)>> = Vec::new();
    let mut bytes = 0;
    for (key, value) in items {
        let size = key.len() + value.len();
        let full = groups
            .last()
            .is_none_or(|g| g.len() >= MAX_COMMIT_KEYS || bytes + size > MAX_COMMIT_BYTES);
        if full {
            groups.push(Vec::new());
            bytes = 0;
        }
        bytes += size;
        groups.last_mut().expect("pushed").push((key, value));
    }
    groups
        .into_iter()
        .map(|mut group| match group.len() {
            1 => {
                let (key, value) = group.remove(0);
                Batch::One(key, value)
            }
            _ => Batch::Many(
                group.into_iter().map(|(key, value)| Write::Create { key, value }).collect(),
            ),
        })
        .collect()
}

/// Opens an etcd prefix for a restore: nothing under it, no marker; writes the marker with the
/// offset that puts every revision written from now on above `at - 1`.
async fn etcd_target(options: EtcdOptions, at: Revision) -> Result<Target> {
    let what = format!("etcd prefix {:?}", options.prefix);
    let raw = crate::etcd::open(options).await?;
    let first = ListRequest {
        prefix: "/",
        start_after: None,
        limit: 1,
        revision: None,
        count_remaining: false,
    };
    if !raw.list(first).await?.items.is_empty() {
        return Err(Error::NotEmpty { target: what });
    }
    let now = raw.current_revision().await?;
    // Everything written from now on has an etcd revision above `now`.
    let offset = at.0.saturating_sub(now.0 + 1);
    let marker = match raw.create(MARKER, encode_marker(offset, false)).await {
        Err(Error::AlreadyExists { .. }) => return Err(Error::NotEmpty { target: what }),
        other => other?,
    };
    Ok(Target::Etcd { raw, offset, marker })
}

/// Opens the etcd backend, with the offset of a restore if one made the prefix.
pub(crate) async fn open_etcd(options: EtcdOptions) -> Result<Arc<dyn Store>> {
    let prefix = options.prefix.clone();
    let raw = crate::etcd::open(options).await?;
    let marker = match raw.get(MARKER).await {
        Ok(kv) => kv,
        Err(Error::NotFound { .. }) => return Ok(raw),
        Err(e) => return Err(e),
    };
    let (offset, done) = decode_marker(&marker.value)?;
    let floor = marker.mod_revision.0.saturating_add(offset);
    if !done {
        return Err(Error::Restore {
            reason: format!(
                "the restore into etcd prefix {prefix:?} did not finish: delete its keys \
                 (etcdctl del --prefix {prefix:?}) and restore again"
            ),
        });
    }
    Ok(Arc::new(Offset { inner: raw, shift: Shift { offset, floor } }))
}

fn encode_marker(offset: u64, done: bool) -> Bytes {
    let state = if done { "done" } else { "restoring" };
    Bytes::from(format!("{MARKER_FORMAT} offset={offset} state={state}"))
}

fn decode_marker(bytes: &[u8]) -> Result<(u64, bool)> {
    let bad =
        || Error::corrupt(MARKER, format!("unreadable: {:?}", String::from_utf8_lossy(bytes)));
    let text = std::str::from_utf8(bytes).map_err(|_| bad())?;
    let mut words = text.split(' ');
    if words.next() != Some(MARKER_FORMAT) {
        return Err(bad());
    }
    let mut field = |name: &str| {
        words.next().and_then(|w| w.strip_prefix(name)).and_then(|w| w.strip_prefix('='))
    };
    let offset = field("offset").and_then(|v| v.parse().ok()).ok_or_else(bad)?;
    let done = match field("state") {
        Some("done") => true,
        Some("restoring") => false,
        _ => return Err(bad()),
    };
    Ok((offset, done))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_round_trips_and_refuses_damage() {
        assert_eq!(decode_marker(&encode_marker(12, true)).unwrap(), (12, true));
        assert_eq!(decode_marker(&encode_marker(0, false)).unwrap(), (0, false));
        for bad in ["", "ocm-storage/restore/1 offset=x state=done", "other offset=1"] {
            assert!(decode_marker(bad.as_bytes()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn etcd_batches_keep_within_the_limits() {
        let len = |b: &Batch| match b {
            Batch::One(..) => 1,
            Batch::Many(w) => w.len(),
        };
        let small = |i: usize| (format!("/k/{i:04}"), Bytes::from(vec![b'a'; 100]));
        let batches = etcd_batches((0..300).map(small).collect());
        assert_eq!(batches.iter().map(len).collect::<Vec<_>>(), [128, 128, 44]);
        let big = |i: usize| (format!("/b/{i}"), Bytes::from(vec![b'a'; MAX_VALUE_BYTES]));
        let batches = etcd_batches(vec![small(0), big(1), small(2)]);
        assert!(batches.iter().all(|b| matches!(b, Batch::One(..))), "{batches:?}");
    }
}
